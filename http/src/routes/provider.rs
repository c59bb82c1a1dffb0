//! Provider webhooks in (spec "Authentication" items 5–6): the app-level receiver
//! `/webhooks/messaging` and each channel's own receiver `/webhooks/messaging/{channel_id}`.

use crate::error::ApiError;
use crate::extract::RawBody;
use crate::AppState;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

/// Routes (outside `/api/v1`, no token: the provider signs instead).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/webhooks/messaging", get(handshake_app).post(receive_app))
        .route(
            "/webhooks/messaging/{channel_id}",
            get(handshake_channel).post(receive_channel),
        )
        .route(
            "/api/webhooks/provider",
            get(handshake_panel).post(receive_panel),
        )
}

/// `GET /api/webhooks/provider` (the panel's receiver, D-061): the challenge when
/// `hub.verify_token` is `PROVIDER_WEBHOOK_VERIFY_TOKEN`, else 403; logged either way.
async fn handshake_panel(State(state): State<AppState>, Query(h): Query<Handshake>) -> Response {
    match state
        .services
        .provider_handshake(h.mode.as_deref(), h.verify_token.as_deref(), h.challenge)
        .await
    {
        Some(challenge) => (StatusCode::OK, challenge).into_response(),
        None => ApiError::Forbidden("hub.verify_token não confere.".into()).into_response(),
    }
}

/// `POST /api/webhooks/provider`: verified per BM, applied through the one ingest path,
/// forwarded to each number's client, logged (D-061).
async fn receive_panel(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Response {
    let signature = headers
        .get("x-hub-signature-256")
        .and_then(|v| v.to_str().ok());
    match state
        .services
        .receive_provider_webhook(body, signature)
        .await
    {
        Ok(services::forwarding::Receipt::Accepted) => {
            metrics::counter!("disparo_provider_webhooks_total", "result" => "ok").increment(1);
            Json(json!({"data": {"received": true}})).into_response()
        }
        Ok(services::forwarding::Receipt::InvalidSignature) => {
            metrics::counter!("disparo_provider_webhooks_total", "result" => "invalid_signature")
                .increment(1);
            ApiError::InvalidSignature.into_response()
        }
        Ok(services::forwarding::Receipt::BadPayload) => {
            metrics::counter!("disparo_provider_webhooks_total", "result" => "bad_payload")
                .increment(1);
            ApiError::Malformed("o corpo não é um webhook do provedor".into()).into_response()
        }
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// The verification handshake query (PROVIDER.md §8.1). Not `Debug`: it holds a verify token.
#[derive(Deserialize)]
struct Handshake {
    #[serde(rename = "hub.mode")]
    mode: Option<String>,
    #[serde(rename = "hub.verify_token")]
    verify_token: Option<String>,
    #[serde(rename = "hub.challenge")]
    challenge: Option<String>,
}

fn answer(h: Handshake, expected: Option<&str>) -> Response {
    match (
        h.mode.as_deref(),
        h.verify_token.as_deref(),
        expected,
        h.challenge,
    ) {
        (Some("subscribe"), Some(given), Some(want), Some(challenge))
            if !want.is_empty()
                && engine::secret::constant_time_eq(given.as_bytes(), want.as_bytes()) =>
        {
            (StatusCode::OK, challenge).into_response()
        }
        _ => ApiError::Forbidden("hub.verify_token não confere.".into()).into_response(),
    }
}

async fn handshake_app(State(state): State<AppState>, Query(h): Query<Handshake>) -> Response {
    answer(h, state.config.provider_verify_token.as_deref())
}

async fn handshake_channel(
    State(state): State<AppState>,
    Path(channel_id): Path<String>,
    Query(h): Query<Handshake>,
) -> Response {
    let expected = channel_id
        .parse()
        .ok()
        .and_then(|id| state.services.channel_verify_token(id));
    answer(h, expected.as_deref())
}

async fn receive(state: AppState, route: Option<i64>, headers: HeaderMap, body: Bytes) -> Response {
    let signature = headers
        .get("x-hub-signature-256")
        .and_then(|v| v.to_str().ok());
    match state
        .services
        .receive_account_webhook(route, body, signature)
        .await
    {
        Ok(report) => {
            metrics::counter!("disparo_provider_webhooks_total", "result" => "ok").increment(1);
            Json(json!({"data": {
                "statuses": report.statuses,
                "inbound": report.inbound,
                "quality_updates": report.quality_updates,
                "ignored": report.ignored,
            }}))
            .into_response()
        }
        Err(e) => {
            let err = ApiError::from(e);
            let label = match err {
                ApiError::InvalidSignature => "invalid_signature",
                ApiError::Malformed(_) => "bad_payload",
                _ => "error",
            };
            metrics::counter!("disparo_provider_webhooks_total", "result" => label).increment(1);
            err.into_response()
        }
    }
}

async fn receive_app(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Response {
    receive(state, None, headers, body).await
}

async fn receive_channel(
    State(state): State<AppState>,
    Path(channel_id): Path<String>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Response {
    match channel_id.parse::<i64>() {
        Ok(id) => receive(state, Some(id), headers, body).await,
        Err(_) => ApiError::NotFound.into_response(),
    }
}
