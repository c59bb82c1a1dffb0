//! Spec section "Outbound webhooks": subscriptions per channel and their delivery log.

use super::iso_opt;
use crate::error::ApiError;
use crate::extract::{ApiJson, Auth, IdPath};
use crate::AppState;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::Json;
use engine::webhook::EventKind;
use serde::Deserialize;
use serde_json::{json, Value};
use storage::webhooks::{DeliveryRecord, SubscriptionRecord};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Routes of this section (under `/api/v1`).
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(deliveries))
        .routes(routes!(test))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct CreateIn {
    url: String,
    events: Vec<String>,
}

fn subscription_json(s: &SubscriptionRecord) -> Value {
    json!({
        "id": s.id,
        "channel_id": s.channel_id,
        "url": s.url,
        "events": s.events,
        "active": s.active,
        "disabled_at": s.disabled_at.map(actors::time::iso),
        "disabled_reason": s.disabled_reason,
        "created_at": actors::time::iso(s.created_at),
    })
}

/// Checks a subscription URL with the outbound guard (D-042): an absolute http(s) URL of at
/// most 2,048 characters whose host is not a literal private, loopback or reserved address
/// (422 `invalid_url` or `private_url`; a name that resolves to one is refused at delivery).
fn validate_url(guard: &actors::outbound::Guard, raw: &str) -> Result<(), ApiError> {
    if raw.len() > 2048 {
        return Err(ApiError::invalid(
            "url",
            "invalid_url",
            "`url` tem mais de 2.048 caracteres.",
        ));
    }
    guard
        .check_url(raw)
        .map(|_| ())
        .map_err(|r| ApiError::invalid("url", r.code(), actors::outbound::refusal_message(&r)))
}

#[utoipa::path(
    post,
    operation_id = "webhooks_create",
    path = "/channels/{id}/webhooks",
    tag = "Webhooks de saída",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    request_body = CreateIn,
    responses((status = 201, description = "`data`: assinatura com o segredo (mostrado uma vez)", body = crate::openapi::DataEnvelope), (status = "4XX", description = "Erro: `{message, code, …}` (401 sem token, 403 nível insuficiente, 404 fora da conta, 422 inválido)", body = crate::openapi::ErrorBody))
)]
async fn create(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(channel_id): IdPath,
    ApiJson(body): ApiJson<CreateIn>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let store = state.runtime.store();
    store.channel(auth.account_id(), channel_id).await?;
    validate_url(state.runtime.outbound(), &body.url)?;
    if body.events.is_empty() {
        return Err(ApiError::invalid(
            "events",
            "required",
            "Informe ao menos um evento em `events`.",
        ));
    }
    let mut events = Vec::new();
    for name in &body.events {
        match EventKind::parse(name).filter(|k| EventKind::SUBSCRIBABLE.contains(k)) {
            Some(k) if !events.contains(&k) => events.push(k),
            Some(_) => {}
            None => {
                let known: Vec<&str> = EventKind::SUBSCRIBABLE.iter().map(|k| k.as_str()).collect();
                return Err(ApiError::invalid(
                    "events",
                    "unknown_event",
                    format!(
                        "Evento desconhecido `{name}`. Eventos: {}.",
                        known.join(", ")
                    ),
                ));
            }
        }
    }
    let (sub, secret) = store
        .create_subscription(auth.account_id(), channel_id, &body.url, &events)
        .await?;
    let mut data = subscription_json(&sub);
    data["secret"] = json!(secret.expose());
    Ok((StatusCode::CREATED, Json(json!({ "data": data }))))
}

#[utoipa::path(
    get,
    operation_id = "webhooks_list",
    path = "/channels/{id}/webhooks",
    tag = "Webhooks de saída",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "Assinaturas do número", body = crate::openapi::DataEnvelope), (status = "4XX", description = "Erro: `{message, code, …}` (401 sem token, 403 nível insuficiente, 404 fora da conta, 422 inválido)", body = crate::openapi::ErrorBody))
)]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(channel_id): IdPath,
) -> Result<Json<Value>, ApiError> {
    let store = state.runtime.store();
    store.channel(auth.account_id(), channel_id).await?;
    let subs = store
        .list_subscriptions(auth.account_id(), channel_id)
        .await?;
    Ok(Json(
        json!({ "data": subs.iter().map(subscription_json).collect::<Vec<_>>() }),
    ))
}

/// Cursor pagination of the delivery log: newest first, `limit` (1–200, default 50), and
/// `before` = the last id of the previous page.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct Page {
    limit: Option<i64>,
    before: Option<i64>,
}

fn delivery_json(d: &DeliveryRecord) -> Value {
    json!({
        "id": d.id,
        "event": d.event,
        "status": d.status,
        "attempts": d.attempts,
        "last_status_code": d.last_status_code,
        "last_error": d.last_error,
        "next_attempt_at": iso_opt(d.next_attempt_at),
        "delivered_at": iso_opt(d.delivered_at),
        "created_at": actors::time::iso(d.created_at),
    })
}

#[utoipa::path(
    get,
    operation_id = "webhooks_deliveries",
    path = "/webhooks/{id}/deliveries",
    tag = "Webhooks de saída",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404"), Page),
    responses((status = 200, description = "Histórico de entregas, mais recentes primeiro", body = crate::openapi::DataEnvelope), (status = "4XX", description = "Erro: `{message, code, …}` (401 sem token, 403 nível insuficiente, 404 fora da conta, 422 inválido)", body = crate::openapi::ErrorBody))
)]
async fn deliveries(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    page: Result<Query<Page>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(page) = page.map_err(crate::extract::query_rejection)?;
    let store = state.runtime.store();
    store.subscription(auth.account_id(), id).await?;
    let limit = page.limit.unwrap_or(50);
    if !(1..=200).contains(&limit) {
        return Err(ApiError::invalid(
            "limit",
            "invalid_limit",
            "`limit` deve estar entre 1 e 200.",
        ));
    }
    let mut rows = store
        .list_deliveries(auth.account_id(), id, limit + 1, page.before)
        .await?;
    let has_more = rows.len() as i64 > limit;
    rows.truncate(limit as usize);
    Ok(Json(json!({
        "data": rows.iter().map(delivery_json).collect::<Vec<_>>(),
        "has_more": has_more,
        "next_before": if has_more { rows.last().map(|d| d.id) } else { None },
    })))
}

#[utoipa::path(
    post,
    operation_id = "webhooks_test",
    path = "/webhooks/{id}/test",
    tag = "Webhooks de saída",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "Evento ping enviado", body = crate::openapi::DataEnvelope), (status = "4XX", description = "Erro: `{message, code, …}` (401 sem token, 403 nível insuficiente, 404 fora da conta, 422 inválido)", body = crate::openapi::ErrorBody))
)]
async fn test(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let delivery_id = state.runtime.test_webhook(auth.account_id(), id).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({"data": {"delivery_id": delivery_id, "event": "ping"}})),
    ))
}
