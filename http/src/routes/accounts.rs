//! Spec section "WABAs, BMs, overview, linking numbers".

use crate::error::ApiError;
use crate::extract::{ApiJson, Auth, IdPath};
use crate::AppState;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

/// Routes of this section (under `/api/v1`).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/overview", get(overview))
        .route("/wabas", get(wabas))
        .route("/wabas/{waba}/numbers", post(add_number))
        .route("/bms/{id}", get(bm))
        .route("/bms/{id}/sync", post(sync_bm))
        .route("/bms/{id}/payment-check", post(payment_check))
}

async fn overview(State(state): State<AppState>, auth: Auth) -> Result<Json<Value>, ApiError> {
    let o = state.runtime.overview(auth.account_id()).await?;
    Ok(Json(json!({ "data": o })))
}

#[derive(Debug, Deserialize)]
struct WabaQuery {
    health: Option<String>,
}

async fn wabas(
    State(state): State<AppState>,
    auth: Auth,
    Query(q): Query<WabaQuery>,
) -> Result<Json<Value>, ApiError> {
    if let Some(h) = &q.health {
        if !["good", "bad", "attention"].contains(&h.as_str()) {
            return Err(ApiError::invalid(
                "health",
                "invalid_filter",
                "`health` deve ser good, bad ou attention.",
            ));
        }
    }
    let list = state
        .runtime
        .wabas(auth.account_id(), q.health.as_deref())
        .await?;
    Ok(Json(json!({ "data": list })))
}

/// `POST /wabas/{waba}/numbers` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AddNumberIn {
    phone: String,
    verified_name: String,
    cc: Option<String>,
    method: Option<String>,
    #[serde(default)]
    same_group: bool,
}

async fn add_number(
    State(state): State<AppState>,
    auth: Auth,
    Path(waba): Path<String>,
    ApiJson(body): ApiJson<AddNumberIn>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let cc: String = body
        .cc
        .unwrap_or_else(|| "55".into())
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    if cc.is_empty() || cc.len() > 3 {
        return Err(ApiError::invalid(
            "cc",
            "invalid_cc",
            "`cc` deve ser o código do país, por exemplo 55.",
        ));
    }
    let req = actors::accounts::AddNumber {
        phone: body.phone,
        verified_name: body.verified_name,
        cc,
        method: body.method.unwrap_or_else(|| "SMS".into()),
        same_group: body.same_group,
    };
    let out = state
        .runtime
        .add_number(auth.account_id(), &waba, req)
        .await?;
    Ok((StatusCode::CREATED, Json(json!({ "data": out }))))
}

async fn bm(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(
        json!({ "data": state.runtime.bm_view(auth.account_id(), id).await? }),
    ))
}

async fn sync_bm(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Value>, ApiError> {
    let r = state.runtime.sync_bm(auth.account_id(), id).await?;
    Ok(Json(json!({"data": {
        "message": format!("BM relido: {} número(s) novo(s), {} ausente(s).", r.created_numbers.len(), r.missing_numbers.len()),
        "created_numbers": r.created_numbers,
        "missing_numbers": r.missing_numbers,
        "bm": {"id": r.bm_id, "good": r.good},
    }})))
}

async fn payment_check(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Value>, ApiError> {
    let (bm, paid) = state
        .runtime
        .payment_check_bm(auth.account_id(), id)
        .await?;
    let message = if paid {
        "Pagamento em dia; números liberados."
    } else {
        "O provedor ainda aponta problema de pagamento."
    };
    Ok(Json(json!({"data": {
        "message": message,
        "bm": {"id": bm.id, "name": bm.name, "good": paid, "payment": if paid { "ok" } else { "pending" }},
    }})))
}
