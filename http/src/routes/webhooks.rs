//! Spec section "Outbound webhooks": subscriptions per channel and their delivery log.

use crate::envelope::{Data, Deleted, List, Page};
use crate::error::ApiError;
use crate::extract::{ApiJson, Auth, IdPath};
use crate::AppState;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::Json;
use engine::ids::{AccountId, ChannelId};
use engine::webhook::EventKind;
use serde::{Deserialize, Serialize};
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
    /// An absolute http(s) URL of a public address, at most 2,048 characters (D-042).
    #[schema(
        min_length = 1,
        max_length = 2048,
        pattern = "^[Hh][Tt][Tt][Pp][Ss]?://"
    )]
    url: String,
    /// The events to receive; at least one.
    #[schema(value_type = Vec<SubscribableEvent>, min_items = 1)]
    events: Vec<String>,
}

/// The events a subscription may receive ([`EventKind::SUBSCRIBABLE`]).
pub struct SubscribableEvent;

impl utoipa::PartialSchema for SubscribableEvent {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        engine::string_enum_schema(
            EventKind::SUBSCRIBABLE.iter().map(|k| k.as_str()),
            "Um evento que uma assinatura recebe (spec \"Events\").",
        )
    }
}

impl utoipa::ToSchema for SubscribableEvent {}

/// An outbound webhook subscription (spec "Outbound webhook subscription").
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SubscriptionOut {
    /// Id.
    id: i64,
    /// The number whose events it receives.
    channel_id: i64,
    /// The integrator's endpoint.
    url: String,
    /// The events it receives.
    #[schema(value_type = Vec<EventKind>)]
    events: Vec<String>,
    /// `false`: deliveries wait (paused by hand, or disabled after failing for days, D-048).
    active: bool,
    /// When it was disabled for failing (ISO 8601).
    disabled_at: Option<String>,
    /// Why.
    disabled_reason: Option<String>,
    /// When it was created (ISO 8601).
    created_at: String,
    /// The signing secret (`whsec_…`): only in the creation answer, never again.
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
}

impl From<&SubscriptionRecord> for SubscriptionOut {
    fn from(s: &SubscriptionRecord) -> Self {
        SubscriptionOut {
            id: s.id,
            channel_id: s.channel_id,
            url: s.url.clone(),
            events: s.events.clone(),
            active: s.active,
            disabled_at: s.disabled_at.map(actors::time::iso),
            disabled_reason: s.disabled_reason.clone(),
            created_at: actors::time::iso(s.created_at),
            secret: None,
        }
    }
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
    summary = "Cria uma assinatura de webhook para o número",
    path = "/channels/{id}/webhooks",
    tag = "Webhooks de saída",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    request_body = CreateIn,
    responses((status = 201, description = "`data`: assinatura com o segredo (mostrado uma vez)", body = Data<SubscriptionOut>))
)]
async fn create(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(channel_id): IdPath,
    ApiJson(body): ApiJson<CreateIn>,
) -> Result<(StatusCode, Json<Data<SubscriptionOut>>), ApiError> {
    let store = state.services.store();
    store
        .channel(AccountId(auth.account_id()), ChannelId(channel_id))
        .await?;
    validate_url(state.services.outbound(), &body.url)?;
    let events = parse_events(&body.events)?;
    let (sub, secret) = store
        .create_subscription(auth.account_id(), channel_id, &body.url, &events)
        .await
        .map_err(|e| match e {
            storage::StorageError::Conflict(c) if c == "subscriptions_per_channel" => {
                ApiError::invalid(
                    "url",
                    "assinaturas_demais",
                    format!(
                        "Este número já tem {} assinaturas: remova uma antes de criar outra.",
                        engine::webhook::MAX_SUBSCRIPTIONS_PER_CHANNEL
                    ),
                )
            }
            e => e.into(),
        })?;
    let mut data = SubscriptionOut::from(&sub);
    data.secret = Some(secret.expose().to_string());
    Ok((StatusCode::CREATED, Data::json(data)))
}

#[utoipa::path(
    get,
    operation_id = "webhooks_list",
    summary = "Lista as assinaturas de webhook do número",
    path = "/channels/{id}/webhooks",
    tag = "Webhooks de saída",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "Assinaturas do número", body = List<SubscriptionOut>))
)]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(channel_id): IdPath,
) -> Result<Json<List<SubscriptionOut>>, ApiError> {
    let store = state.services.store();
    store
        .channel(AccountId(auth.account_id()), ChannelId(channel_id))
        .await?;
    let subs = store
        .list_subscriptions(auth.account_id(), channel_id)
        .await?;
    Ok(List::json(subs.iter().map(SubscriptionOut::from).collect()))
}

/// Cursor pagination of the delivery log: newest first, `limit` (1–200, default 50), and
/// `cursor` = the previous page's `next_cursor` (`before`/`next_before`, the last id, still
/// work).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct DeliveriesQuery {
    limit: Option<i64>,
    cursor: Option<String>,
    before: Option<i64>,
}

/// A delivery of an event to a subscription, with its attempts so far.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DeliveryOut {
    /// Id (`delivery_id` of the event envelope).
    id: i64,
    /// The event kind (`message.ack`, `ping`…).
    event: String,
    /// `pending` (an attempt is due), `delivered` or `failed` (attempts exhausted).
    #[schema(pattern = "^(pending|delivered|failed)$")]
    status: String,
    /// Attempts made.
    attempts: i64,
    /// The endpoint's last HTTP status.
    last_status_code: Option<i64>,
    /// The last attempt's error (timeout, refused address…).
    last_error: Option<String>,
    /// When the next attempt is due (ISO 8601).
    next_attempt_at: Option<String>,
    /// When it was delivered.
    delivered_at: Option<String>,
    /// When it was created.
    created_at: String,
}

impl From<&DeliveryRecord> for DeliveryOut {
    fn from(d: &DeliveryRecord) -> Self {
        let iso = |t: Option<i64>| t.map(actors::time::iso);
        DeliveryOut {
            id: d.id,
            event: d.event.clone(),
            status: d.status.clone(),
            attempts: d.attempts,
            last_status_code: d.last_status_code,
            last_error: d.last_error.clone(),
            next_attempt_at: iso(d.next_attempt_at),
            delivered_at: iso(d.delivered_at),
            created_at: actors::time::iso(d.created_at),
        }
    }
}

/// The delivery log's page: a keyset page plus `next_before` (the last id, as a number; the
/// older name of `next_cursor`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DeliveryPage {
    /// The page.
    #[serde(flatten)]
    page: Page<DeliveryOut>,
    /// `next_cursor` as an integer; `null` on the last page.
    next_before: Option<i64>,
}

#[utoipa::path(
    get,
    operation_id = "webhooks_deliveries",
    summary = "Lista as entregas da assinatura de webhook",
    path = "/webhooks/{id}/deliveries",
    tag = "Webhooks de saída",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404"), DeliveriesQuery),
    responses((status = 200, description = "Histórico de entregas, mais recentes primeiro", body = DeliveryPage))
)]
async fn deliveries(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    page: Result<Query<DeliveriesQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<DeliveryPage>, ApiError> {
    let Query(page) = page.map_err(crate::extract::query_rejection)?;
    let store = state.services.store();
    store.subscription(auth.account_id(), id).await?;
    let (limit, cursor) = crate::extract::page_params(page.limit, &page.cursor, 50, 200)?;
    let rows = store
        .list_deliveries(auth.account_id(), id, limit + 1, cursor.or(page.before))
        .await?;
    let page = crate::extract::cursor_page(rows, limit, |d| d.id, |d| DeliveryOut::from(d));
    let next_before = page.next_cursor.as_deref().and_then(|c| c.parse().ok());
    Ok(Json(DeliveryPage { page, next_before }))
}

#[utoipa::path(
    post,
    operation_id = "webhooks_test",
    summary = "Envia um ping de teste à assinatura de webhook",
    path = "/webhooks/{id}/test",
    tag = "Webhooks de saída",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 201, description = "Evento ping enviado: a entrega criada", body = Data<PingOut>))
)]
async fn test(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<(StatusCode, Json<Data<PingOut>>), ApiError> {
    let delivery_id = state.services.test_webhook(auth.account_id(), id).await?;
    Ok((
        StatusCode::CREATED,
        Data::json(PingOut {
            delivery_id,
            event: "ping",
        }),
    ))
}

/// `POST /webhooks/{id}/test`'s answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PingOut {
    /// The delivery created (its log: `GET /webhooks/{id}/deliveries`).
    delivery_id: i64,
    /// Always `ping`.
    event: &'static str,
}

/// `POST /webhooks/{id}/deliveries/{delivery_id}/retry`'s answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RetryOut {
    /// The delivery queued again.
    delivery_id: i64,
    /// Always `pending`.
    status: &'static str,
}

/// `POST /webhooks/{id}/recover`'s answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RecoveredOut {
    /// Failed deliveries queued again.
    requeued: u64,
}

/// `POST /webhooks/{id}/rotate-secret`'s answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RotatedOut {
    /// The subscription.
    id: i64,
    /// The new secret (`whsec_…`), shown only here.
    secret: String,
    /// Until when the previous secret signs beside it (ISO 8601).
    previous_valid_until: String,
}

#[utoipa::path(
    get,
    operation_id = "webhooks_read",
    summary = "Lê uma assinatura de webhook",
    path = "/webhooks/{id}",
    tag = "Webhooks de saída",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "A assinatura (sem o segredo)", body = Data<SubscriptionOut>))
)]
async fn read(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<SubscriptionOut>>, ApiError> {
    let sub = state
        .services
        .store()
        .subscription(auth.account_id(), id)
        .await?;
    Ok(Data::json(SubscriptionOut::from(&sub)))
}

/// `PATCH /webhooks/{id}`: each field optional.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = WebhookPatch)]
#[serde(deny_unknown_fields)]
struct UpdateIn {
    /// New endpoint (checked as at creation).
    #[schema(
        min_length = 1,
        max_length = 2048,
        pattern = "^[Hh][Tt][Tt][Pp][Ss]?://"
    )]
    url: Option<String>,
    /// New list of events (at least one).
    #[schema(value_type = Option<Vec<SubscribableEvent>>, min_items = 1)]
    events: Option<Vec<String>>,
    /// `false` stops deliveries (they wait); `true` resumes a disabled subscription.
    active: Option<bool>,
}

#[utoipa::path(
    patch,
    operation_id = "webhooks_update",
    summary = "Altera uma assinatura de webhook",
    path = "/webhooks/{id}",
    tag = "Webhooks de saída",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    request_body = UpdateIn,
    responses((status = 200, description = "A assinatura alterada", body = Data<SubscriptionOut>))
)]
async fn update(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<UpdateIn>,
) -> Result<Json<Data<SubscriptionOut>>, ApiError> {
    if let Some(url) = &b.url {
        validate_url(state.services.outbound(), url)?;
    }
    let events = b.events.as_deref().map(parse_events).transpose()?;
    let sub = state
        .services
        .update_webhook(
            auth.account_id(),
            id,
            b.url.as_deref(),
            events.as_deref(),
            b.active,
        )
        .await?;
    Ok(Data::json(SubscriptionOut::from(&sub)))
}

#[utoipa::path(
    delete,
    operation_id = "webhooks_delete",
    summary = "Remove uma assinatura de webhook",
    path = "/webhooks/{id}",
    tag = "Webhooks de saída",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "Removida, com seu histórico de entregas", body = Data<Deleted>))
)]
async fn remove(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<Deleted>>, ApiError> {
    state
        .services
        .store()
        .delete_subscription(auth.account_id(), id)
        .await?;
    Ok(Deleted::json(id))
}

/// `POST /webhooks/{id}/rotate-secret`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct RotateIn {
    /// How long the previous secret keeps signing beside the new one, seconds (0–604800;
    /// default 86400).
    #[schema(minimum = 0, maximum = 604_800)]
    overlap_seconds: Option<u64>,
}

#[utoipa::path(
    post,
    operation_id = "webhooks_rotate_secret",
    summary = "Troca o segredo da assinatura de webhook",
    path = "/webhooks/{id}/rotate-secret",
    tag = "Webhooks de saída",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    request_body = RotateIn,
    responses((status = 200, description = "`data` {secret (mostrado uma vez), previous_valid_until}; até lá `webhook-signature` leva as duas assinaturas separadas por espaço (e o antigo `X-Svc-Signature`, por vírgula)", body = Data<RotatedOut>))
)]
async fn rotate_secret(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    headers: axum::http::HeaderMap,
    crate::extract::RawBody(raw): crate::extract::RawBody,
) -> Result<Json<Data<RotatedOut>>, ApiError> {
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
        .services
        .rotate_webhook_secret(
            auth.account_id(),
            id,
            std::time::Duration::from_secs(overlap),
        )
        .await?;
    Ok(Data::json(RotatedOut {
        id,
        secret: secret.expose().to_string(),
        previous_valid_until: actors::time::iso(until),
    }))
}

#[utoipa::path(
    post,
    operation_id = "webhooks_delivery_retry",
    summary = "Reenvia uma entrega de webhook que falhou",
    path = "/webhooks/{id}/deliveries/{delivery_id}/retry",
    tag = "Webhooks de saída",
    params(("id" = i64, Path, description = "Id da assinatura"), ("delivery_id" = i64, Path, description = "Id da entrega (`delivery_id`)")),
    responses((status = 202, description = "Entrega que falhou posta na fila de novo", body = Data<RetryOut>))
)]
async fn retry(
    State(state): State<AppState>,
    auth: Auth,
    axum::extract::Path((id, delivery_id)): axum::extract::Path<(String, String)>,
) -> Result<(StatusCode, Json<Data<RetryOut>>), ApiError> {
    let (Ok(id), Ok(delivery_id)) = (id.parse::<i64>(), delivery_id.parse::<i64>()) else {
        return Err(ApiError::NotFound);
    };
    state
        .services
        .retry_webhook_delivery(auth.account_id(), id, delivery_id)
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Data::json(RetryOut {
            delivery_id,
            status: "pending",
        }),
    ))
}

/// `POST /webhooks/{id}/recover`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct RecoverIn {
    /// Failed deliveries created at or after this time (ISO 8601 with zone) are queued again.
    #[schema(format = DateTime)]
    since: String,
}

#[utoipa::path(
    post,
    operation_id = "webhooks_recover",
    summary = "Reenvia as entregas que falharam desde uma data",
    path = "/webhooks/{id}/recover",
    tag = "Webhooks de saída",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    request_body = RecoverIn,
    responses((status = 202, description = "`data` {requeued}: entregas que falharam desde `since`, na fila de novo", body = Data<RecoveredOut>))
)]
async fn recover(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<RecoverIn>,
) -> Result<(StatusCode, Json<Data<RecoveredOut>>), ApiError> {
    let since = chrono::DateTime::parse_from_rfc3339(b.since.trim())
        .map(|t| t.timestamp_millis())
        .map_err(|_| {
            ApiError::invalid(
                "since",
                "invalid_date",
                "`since` deve ser uma data e hora ISO 8601 com fuso.",
            )
        })?;
    let requeued = state
        .services
        .recover_webhook(auth.account_id(), id, since)
        .await?;
    Ok((StatusCode::ACCEPTED, Data::json(RecoveredOut { requeued })))
}
