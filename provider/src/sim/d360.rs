//! The simulated 360dialog sender (an alternative provider, [`crate::alternative::D360`]):
//! `GET /v1/configs/templates` with the `D360-API-KEY` header, paged with `limit`/`offset`,
//! and the control route `POST /_sim/d360/senders` that creates a sender with its templates.

use super::Inner;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

pub(crate) fn routes() -> Router<Arc<Inner>> {
    Router::new()
        .route("/v1/configs/templates", get(list_templates))
        .route("/_sim/d360/senders", post(create_sender))
}

/// A template of a simulated sender: `{name, language, status, category, body}`.
#[derive(Debug, Clone, Deserialize)]
pub struct D360TemplateSpec {
    /// Name.
    pub name: String,
    /// Locale (default `pt_BR`).
    #[serde(default = "pt_br")]
    pub language: String,
    /// `approved`, `pending`, `rejected`… (default `approved`).
    #[serde(default = "approved")]
    pub status: String,
    /// `MARKETING`, `UTILITY`… (default `MARKETING`).
    #[serde(default = "marketing")]
    pub category: String,
    /// Body text with `{{n}}` variables.
    pub body: String,
}

fn pt_br() -> String {
    "pt_BR".into()
}
fn approved() -> String {
    "approved".into()
}
fn marketing() -> String {
    "MARKETING".into()
}

#[derive(Debug, Deserialize)]
struct SenderIn {
    api_key: Option<String>,
    #[serde(default)]
    templates: Vec<D360TemplateSpec>,
}

/// Creates (or replaces) a sender; answers `{"data": {"api_key"}}`.
async fn create_sender(State(inner): State<Arc<Inner>>, Json(b): Json<SenderIn>) -> Response {
    let key = b.api_key.unwrap_or_else(|| {
        inner.random_from(
            b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
            32,
        )
    });
    inner.d360.insert(key.clone(), b.templates);
    (StatusCode::CREATED, Json(json!({"data": {"api_key": key}}))).into_response()
}

#[derive(Debug, Deserialize)]
struct Page {
    limit: Option<usize>,
    offset: Option<usize>,
}

async fn list_templates(
    State(inner): State<Arc<Inner>>,
    headers: HeaderMap,
    Query(page): Query<Page>,
) -> Response {
    let key = headers
        .get("D360-API-KEY")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let Some(templates) = inner.d360.get(key).map(|t| t.clone()) else {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"meta": {"success": false, "http_code": 401, "developer_message": "Invalid api key"}})),
        )
            .into_response();
    };
    let limit = page.limit.unwrap_or(1000).clamp(1, 1000);
    let offset = page.offset.unwrap_or(0);
    let rows: Vec<Value> = templates
        .iter()
        .enumerate()
        .skip(offset)
        .take(limit)
        .map(|(i, t)| {
            json!({
                "id": format!("d360-{i}"),
                "name": t.name,
                "language": t.language,
                "status": t.status,
                "category": t.category,
                "namespace": "sim_namespace",
                "rejected_reason": "NONE",
                "components": [{"type": "BODY", "text": t.body}],
            })
        })
        .collect();
    Json(json!({
        "count": rows.len(),
        "filters": {},
        "limit": limit,
        "offset": offset,
        "sort": ["id"],
        "total": templates.len(),
        "waba_templates": rows,
    }))
    .into_response()
}
