//! Spec section "Health and channels": connect an official number, list and read channels.

use crate::error::ApiError;
use crate::extract::{ApiJson, Auth, IdPath};
use crate::AppState;
use actors::channel::ChannelSnapshot;
use actors::connect::ConnectOfficial;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use engine::channel::{Quality, Tone};
use engine::Secret;
use serde::Deserialize;
use serde_json::{json, Value};

/// Routes of this section (under `/api/v1`).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/channels", get(list))
        .route("/channels/official", post(connect))
        .route("/channels/{id}/official", get(official))
        .route("/channels/{id}/health", get(health))
}

/// The channel object of the spec ("Channel").
pub fn channel_json(s: &ChannelSnapshot) -> Value {
    let r = &s.record;
    let can_send = match (s.health.tone, s.health.code.as_str()) {
        (Tone::Bad, _) => "BLOCKED",
        (_, "limite_24h_esgotado") => "LIMITED",
        _ => "AVAILABLE",
    };
    json!({
        "id": r.id,
        "phone": r.phone,
        "name": r.name,
        "official": r.official,
        "engine": r.engine,
        "status": r.status,
        "quality": r.quality,
        "quality_label": Quality::parse(&r.quality).label(),
        "tier": r.tier,
        "can_send": can_send,
        "health": s.health,
        "created_at": actors::time::iso(r.created_at),
    })
}

async fn list(State(state): State<AppState>, auth: Auth) -> Result<Json<Value>, ApiError> {
    let channels = state.runtime.list_channels(auth.account_id()).await?;
    Ok(Json(
        json!({"data": channels.iter().map(channel_json).collect::<Vec<_>>()}),
    ))
}

/// `POST /channels/official` body ("Official channel configuration"). `phone_number_id`,
/// `waba_id` and `access_token` are required (decision D-002).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConnectIn {
    name: Option<String>,
    phone_number_id: String,
    waba_id: String,
    access_token: String,
    app_secret: Option<String>,
    verify_token: Option<String>,
}

fn required(field: &str, value: &str) -> Result<(), ApiError> {
    if value.trim().is_empty() {
        return Err(ApiError::invalid(
            field,
            "required",
            format!("O campo `{field}` é obrigatório."),
        ));
    }
    Ok(())
}

fn digits_id(field: &str, value: &str) -> Result<(), ApiError> {
    required(field, value)?;
    if !value.chars().all(|c| c.is_ascii_digit()) || value.len() > 32 {
        return Err(ApiError::invalid(
            field,
            "invalid_id",
            format!("`{field}` deve conter só dígitos (o id do provedor)."),
        ));
    }
    Ok(())
}

async fn connect(
    State(state): State<AppState>,
    auth: Auth,
    ApiJson(body): ApiJson<ConnectIn>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    digits_id("phone_number_id", &body.phone_number_id)?;
    digits_id("waba_id", &body.waba_id)?;
    required("access_token", &body.access_token)?;
    let req = ConnectOfficial {
        name: body.name,
        phone_number_id: body.phone_number_id,
        waba_id: body.waba_id,
        access_token: Secret::new(body.access_token.trim()),
        app_secret: body
            .app_secret
            .filter(|s| !s.trim().is_empty())
            .map(|s| Secret::new(s.trim())),
        verify_token: body.verify_token,
    };
    let (record, verification) = state
        .runtime
        .connect_official(auth.account_id(), req)
        .await?;
    let snapshot = state.runtime.snapshot(auth.account_id(), record.id).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "data": channel_json(&snapshot),
            "verification": {
                "ok": verification.ok,
                "display_phone_number": verification.display_phone_number,
                "verified_name": verification.verified_name,
            }
        })),
    ))
}

async fn official(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Value>, ApiError> {
    let snapshot = state.runtime.snapshot(auth.account_id(), id).await?;
    let r = &snapshot.record;
    let mut data = channel_json(&snapshot);
    data["phone_number_id"] = json!(r.phone_number_id);
    data["waba_id"] = json!(r.waba_id);
    data["verified_name"] = json!(r.verified_name);
    data["credential_valid"] = json!(r.credential_valid);
    data["webhook"] = json!({
        "url": format!("{}/webhooks/messaging/{}", state.config.public_url.trim_end_matches('/'), r.id),
        "verify_token": r.verify_token,
        "fields": ["messages"],
    });
    Ok(Json(json!({ "data": data })))
}

async fn health(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Value>, ApiError> {
    let snapshot = state.runtime.snapshot(auth.account_id(), id).await?;
    Ok(Json(json!({ "data": snapshot.health })))
}
