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
        .routes(routes!(read, update, remove))
        .routes(routes!(rotate_secret))
        .routes(routes!(retry))
        .routes(routes!(recover))
}

/// The subscribable events named in `names` (at least one, no unknown one; repeats dropped).
fn parse_events(names: &[String]) -> Result<Vec<EventKind>, ApiError> {
    if names.is_empty() {
        return Err(ApiError::invalid(
            "events",
            "required",
            "Informe ao menos um evento em `events`.",
        ));
    }
    let mut events = Vec::new();
    for name in names {
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
    Ok(events)
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = WebhookIn)]
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
    let events = parse_events(&body.events)?;
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
    responses((status = 200, description = "Assinaturas do número", body = crate::openapi::ListEnvelope), (status = "4XX", description = "Erro: `{message, code, …}` (401 sem token, 403 nível insuficiente, 404 fora da conta, 422 inválido)", body = crate::openapi::ErrorBody))
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
/// `cursor` = the previous page's `next_cursor` (`before`/`next_before`, the last id, still
/// work).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct Page {
    limit: Option<i64>,
    cursor: Option<String>,
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
    responses((status = 200, description = "Histórico de entregas, mais recentes primeiro", body = crate::openapi::ListEnvelope), (status = "4XX", description = "Erro: `{message, code, …}` (401 sem token, 403 nível insuficiente, 404 fora da conta, 422 inválido)", body = crate::openapi::ErrorBody))
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
    let (limit, cursor) = crate::extract::page_params(page.limit, &page.cursor, 50, 200)?;
    let rows = store
        .list_deliveries(auth.account_id(), id, limit + 1, cursor.or(page.before))
        .await?;
    let mut out = crate::extract::cursor_page(rows, limit, |d| d.id, delivery_json);
    out["next_before"] = out["next_cursor"]
        .as_str()
        .and_then(|c| c.parse::<i64>().ok())
        .map_or(Value::Null, Value::from);
    Ok(Json(out))
}

#[utoipa::path(
    post,
    operation_id = "webhooks_test",
    path = "/webhooks/{id}/test",
    tag = "Webhooks de saída",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 201, description = "Evento ping enviado: a entrega criada", body = crate::openapi::DataEnvelope), (status = "4XX", description = "Erro: `{message, code, …}` (401 sem token, 403 nível insuficiente, 404 fora da conta, 422 inválido)", body = crate::openapi::ErrorBody))
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

#[utoipa::path(
    get,
    operation_id = "webhooks_read",
    path = "/webhooks/{id}",
    tag = "Webhooks de saída",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "A assinatura (sem o segredo)", body = crate::openapi::DataEnvelope), (status = "4XX", description = "Erro: `{message, code, …}` (401, 404)", body = crate::openapi::ErrorBody))
)]
async fn read(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Value>, ApiError> {
    let sub = state
        .runtime
        .store()
        .subscription(auth.account_id(), id)
        .await?;
    Ok(Json(json!({ "data": subscription_json(&sub) })))
}

/// `PATCH /webhooks/{id}`: each field optional.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = WebhookPatch)]
#[serde(deny_unknown_fields)]
struct UpdateIn {
    /// New endpoint (checked as at creation).
    url: Option<String>,
    /// New list of events (at least one).
    events: Option<Vec<String>>,
    /// `false` stops deliveries (they wait); `true` resumes a disabled subscription.
    active: Option<bool>,
}

#[utoipa::path(
    patch,
    operation_id = "webhooks_update",
    path = "/webhooks/{id}",
    tag = "Webhooks de saída",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    request_body = UpdateIn,
    responses((status = 200, description = "A assinatura alterada", body = crate::openapi::DataEnvelope), (status = "4XX", description = "Erro: `{message, code, …}` (401, 403, 404, 422 `invalid_url`/`private_url`/`unknown_event`)", body = crate::openapi::ErrorBody))
)]
async fn update(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<UpdateIn>,
) -> Result<Json<Value>, ApiError> {
    if let Some(url) = &b.url {
        validate_url(state.runtime.outbound(), url)?;
    }
    let events = b.events.as_deref().map(parse_events).transpose()?;
    let sub = state
        .runtime
        .update_webhook(
            auth.account_id(),
            id,
            b.url.as_deref(),
            events.as_deref(),
            b.active,
        )
        .await?;
    Ok(Json(json!({ "data": subscription_json(&sub) })))
}

#[utoipa::path(
    delete,
    operation_id = "webhooks_delete",
    path = "/webhooks/{id}",
    tag = "Webhooks de saída",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "Removida, com seu histórico de entregas", body = crate::openapi::DataEnvelope), (status = "4XX", description = "Erro: `{message, code, …}` (401, 403, 404)", body = crate::openapi::ErrorBody))
)]
async fn remove(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Value>, ApiError> {
    state
        .runtime
        .store()
        .delete_subscription(auth.account_id(), id)
        .await?;
    Ok(Json(json!({ "data": {"id": id, "deleted": true} })))
}

/// `POST /webhooks/{id}/rotate-secret`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct RotateIn {
    /// How long the previous secret keeps signing beside the new one, seconds (0–604800;
    /// default 86400).
    overlap_seconds: Option<u64>,
}

#[utoipa::path(
    post,
    operation_id = "webhooks_rotate_secret",
    path = "/webhooks/{id}/rotate-secret",
    tag = "Webhooks de saída",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    request_body = RotateIn,
    responses((status = 200, description = "`data` {secret (mostrado uma vez), previous_valid_until}; até lá `X-Svc-Signature` leva as duas assinaturas separadas por vírgula", body = crate::openapi::DataEnvelope), (status = "4XX", description = "Erro: `{message, code, …}` (401, 403, 404, 422)", body = crate::openapi::ErrorBody))
)]
async fn rotate_secret(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    headers: axum::http::HeaderMap,
    crate::extract::RawBody(raw): crate::extract::RawBody,
) -> Result<Json<Value>, ApiError> {
    // The body is optional: none keeps the default overlap.
    let overlap = if raw.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        crate::extract::parse_json::<RotateIn>(&headers, &raw)?.overlap_seconds
    }
    .unwrap_or(86_400);
    if overlap > 604_800 {
        return Err(ApiError::invalid(
            "overlap_seconds",
            "invalid_overlap",
            "`overlap_seconds` deve estar entre 0 e 604800 (7 dias).",
        ));
    }
    let (secret, until) = state
        .runtime
        .rotate_webhook_secret(
            auth.account_id(),
            id,
            std::time::Duration::from_secs(overlap),
        )
        .await?;
    Ok(Json(json!({ "data": {
        "id": id,
        "secret": secret.expose(),
        "previous_valid_until": actors::time::iso(until),
    } })))
}

#[utoipa::path(
    post,
    operation_id = "webhooks_delivery_retry",
    path = "/webhooks/{id}/deliveries/{delivery_id}/retry",
    tag = "Webhooks de saída",
    params(("id" = i64, Path, description = "Id da assinatura"), ("delivery_id" = i64, Path, description = "Id da entrega (`delivery_id`)")),
    responses((status = 202, description = "Entrega que falhou posta na fila de novo", body = crate::openapi::DataEnvelope), (status = "4XX", description = "Erro: `{message, code, …}` (401, 403, 404, 409 `not_failed`)", body = crate::openapi::ErrorBody))
)]
async fn retry(
    State(state): State<AppState>,
    auth: Auth,
    axum::extract::Path((id, delivery_id)): axum::extract::Path<(String, String)>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let (Ok(id), Ok(delivery_id)) = (id.parse::<i64>(), delivery_id.parse::<i64>()) else {
        return Err(ApiError::NotFound);
    };
    state
        .runtime
        .retry_webhook_delivery(auth.account_id(), id, delivery_id)
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "data": {"delivery_id": delivery_id, "status": "pending"} })),
    ))
}

/// `POST /webhooks/{id}/recover`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct RecoverIn {
    /// Failed deliveries created at or after this time (ISO 8601 with zone) are queued again.
    since: String,
}

#[utoipa::path(
    post,
    operation_id = "webhooks_recover",
    path = "/webhooks/{id}/recover",
    tag = "Webhooks de saída",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    request_body = RecoverIn,
    responses((status = 202, description = "`data` {requeued}: entregas que falharam desde `since`, na fila de novo", body = crate::openapi::DataEnvelope), (status = "4XX", description = "Erro: `{message, code, …}` (401, 403, 404, 422 `invalid_date`)", body = crate::openapi::ErrorBody))
)]
async fn recover(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<RecoverIn>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let since = chrono::DateTime::parse_from_rfc3339(b.since.trim())
        .map(|t| t.timestamp_millis())
        .map_err(|_| {
            ApiError::invalid(
                "since",
                "invalid_date",
                "`since` deve ser uma data e hora ISO 8601 com fuso.",
            )
        })?;
    let n = state
        .runtime
        .recover_webhook(auth.account_id(), id, since)
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "data": {"requeued": n} })),
    ))
}
