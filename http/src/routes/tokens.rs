//! Token management (decision D-027): list, create with a level, revoke. Admin only.

use crate::error::ApiError;
use crate::extract::{ApiJson, Auth, IdPath};
use crate::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{delete, get};
use axum::{Json, Router};
use engine::access::Level;
use serde::Deserialize;
use serde_json::{json, Value};

/// Routes (under `/api/v1`).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/tokens", get(list).post(create))
        .route("/tokens/{id}", delete(revoke))
}

async fn list(State(state): State<AppState>, auth: Auth) -> Result<Json<Value>, ApiError> {
    let tokens = state.runtime.store().list_tokens(auth.account_id()).await?;
    let data: Vec<Value> = tokens
        .iter()
        .map(|t| {
            json!({"id": t.id, "name": t.name, "prefix": t.prefix, "level": t.level,
                   "created_at": actors::time::iso(t.created_at), "revoked_at": super::iso_opt(t.revoked_at)})
        })
        .collect();
    Ok(Json(json!({ "data": data })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateIn {
    name: String,
    level: String,
}

async fn create(
    State(state): State<AppState>,
    auth: Auth,
    ApiJson(b): ApiJson<CreateIn>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    if b.name.trim().is_empty() || b.name.len() > 100 {
        return Err(ApiError::invalid(
            "name",
            "required",
            "`name` deve ter de 1 a 100 caracteres.",
        ));
    }
    let level = Level::parse(&b.level).ok_or_else(|| {
        ApiError::invalid(
            "level",
            "invalid_level",
            "`level` deve ser read, write ou admin.",
        )
    })?;
    let t = state
        .runtime
        .store()
        .create_token(auth.account_id(), b.name.trim(), level.as_str())
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(
            json!({"data": {"id": t.id, "name": b.name.trim(), "level": level.as_str(), "prefix": t.prefix, "token": t.value.expose()}}),
        ),
    ))
}

async fn revoke(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Value>, ApiError> {
    state
        .runtime
        .store()
        .revoke_token(auth.account_id(), id)
        .await?;
    Ok(Json(json!({"data": {"id": id, "revoked": true}})))
}
