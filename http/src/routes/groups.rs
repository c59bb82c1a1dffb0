//! Spec section "Sending groups" (decision D-037): groups of numbers with a shared 24 h
//! limit, managed by the account; the list, a group with its numbers, the templates approved
//! on all of them, and a single template message through the number with most headroom.

use crate::error::ApiError;
use crate::extract::{ApiJson, Auth, IdPath, RawBody};
use crate::routes::channels::channel_json;
use crate::routes::messages::send_result;
use crate::AppState;
use actors::group::{GroupDetail, GroupInput};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use engine::phone::Phone;
use serde::Deserialize;
use serde_json::{json, Value};
use storage::templates::TemplateRecord;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Routes (under `/api/v1`).
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(read, update, remove))
        .routes(routes!(templates))
        .routes(routes!(add_numbers))
        .routes(routes!(remove_number))
        .routes(routes!(send))
        .routes({
            // 10,000 rows with their columns do not fit the default 1 MiB.
            let (schemas, paths, route) = routes!(create_campaign);
            (
                schemas,
                paths,
                route.layer(axum::extract::DefaultBodyLimit::max(16 * 1024 * 1024)),
            )
        })
}

/// `scheduled_at`: a date-time without zone is America/Sao_Paulo (UTC−03:00, D-038);
/// RFC 3339 with a zone is taken as is.
pub(crate) fn parse_schedule(s: &str) -> Result<i64, ApiError> {
    let s = s.trim();
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Ok(t.timestamp_millis());
    }
    for f in [
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(t) = chrono::NaiveDateTime::parse_from_str(s, f) {
            return Ok(t.and_utc().timestamp_millis() - engine::guardrail::LOCAL_OFFSET_MS);
        }
    }
    Err(ApiError::invalid(
        "scheduled_at",
        "invalid_date",
        "`scheduled_at` deve ser uma data e hora AAAA-MM-DDTHH:MM[:SS] (horário de Brasília).",
    ))
}

/// The variables `{{n}}` of a body (highest n).
fn variables(body: &str) -> usize {
    let mut max = 0;
    let mut rest = body;
    while let Some(i) = rest.find("{{") {
        rest = &rest[i + 2..];
        if let Some(j) = rest.find("}}") {
            if let Ok(n) = rest[..j].trim().parse::<usize>() {
                max = max.max(n);
            }
            rest = &rest[j + 2..];
        }
    }
    max
}

/// A template in common, with the spec's fields.
fn template_json(t: &TemplateRecord) -> Value {
    json!({
        "id": t.id, "name": t.name, "provider_name": t.provider_name, "category": t.category,
        "language": t.language, "body": t.body, "variables": variables(&t.body),
        "header_type": t.header_type, "has_media_header": t.has_media_header,
        "buttons": t.buttons, "var_map": t.var_map,
    })
}

/// A group: `limit_24h` (null: unlimited), `limit_source` (`own` or `sum`), `sent_24h`,
/// `available` (null: unlimited), `numbers` (count), `templates_in_common`; with
/// `with_numbers`, the numbers themselves (channel objects with health and headroom).
fn group_json(g: &GroupDetail, with_numbers: bool) -> Value {
    let s = &g.state;
    let mut v = json!({
        "id": s.id, "name": s.name, "limit_24h": s.limit_24h, "own_limit": s.own_limit,
        "limit_source": if s.own_limit.is_some() { "own" } else { "sum" },
        "sent_24h": s.sent_24h, "available": s.available,
        "numbers": s.members.len(),
        "templates_in_common": g.templates.iter().map(|t| json!({"id": t.id, "name": t.name})).collect::<Vec<_>>(),
        "created_at": actors::time::iso(g.created_at),
    });
    if with_numbers {
        v["numbers"] = g.numbers.iter().map(channel_json).collect();
    }
    v
}

/// `POST /groups` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = GroupIn)]
#[serde(deny_unknown_fields)]
struct CreateIn {
    name: String,
    /// Own 24 h limit; omitted or null: the sum of the numbers' limits.
    limit_24h: Option<i64>,
    #[serde(default)]
    channel_ids: Vec<i64>,
}

/// `PATCH /groups/{id}` body: only the fields sent change; `limit_24h: null` goes back to
/// the numbers' sum.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = GroupPatch)]
#[serde(deny_unknown_fields)]
struct UpdateIn {
    name: Option<String>,
    #[serde(default, deserialize_with = "crate::extract::present")]
    #[schema(value_type = Option<i64>)]
    limit_24h: Option<Option<i64>>,
}

/// `POST /groups/{id}/numbers` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct NumbersIn {
    channel_ids: Vec<i64>,
}

/// `POST /groups/{id}/messages` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = GroupMessageIn)]
#[serde(deny_unknown_fields)]
struct SendIn {
    to: String,
    template_id: i64,
    #[serde(default)]
    params: Vec<String>,
}

/// `POST /groups/{id}/campaigns` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = GroupCampaignIn)]
#[serde(deny_unknown_fields)]
struct CampaignIn {
    name: String,
    template_id: i64,
    category: Option<String>,
    /// `all` (default: every number together) or `sequential` (one at a time).
    mode: Option<String>,
    #[schema(value_type = Option<Object>)]
    var_map: Option<engine::library::VarMap>,
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    recipients: Vec<actors::campaigns::RecipientInput>,
    /// Date-time without zone (America/Sao_Paulo), e.g. `2026-12-01T09:00`.
    scheduled_at: Option<String>,
    /// `false`: only create (default true).
    start: Option<bool>,
}

/// `GET /groups`: every group with its limit, use and templates in common.
#[utoipa::path(
    get,
    operation_id = "groups_list",
    path = "/groups",
    tag = "Grupos de envio",
    params(crate::extract::PageQuery),
    responses((status = 200, description = "`data`: grupos com limite, enviados em 24 h, disponível e templates em comum, em ordem de criação; `has_more`, `next_cursor`", body = crate::openapi::ListEnvelope), (status = "4XX", description = "Erro: `{message, code, …}`", body = crate::openapi::ErrorBody))
)]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
    q: Result<
        axum::extract::Query<crate::extract::PageQuery>,
        axum::extract::rejection::QueryRejection,
    >,
) -> Result<Json<Value>, ApiError> {
    let (limit, after) = crate::extract::list_page(q)?;
    let groups = state
        .runtime
        .groups_page(auth.account_id(), after, limit + 1)
        .await?;
    Ok(Json(crate::extract::cursor_page(
        groups,
        limit,
        |g| g.state.id,
        |g| group_json(g, false),
    )))
}

/// `POST /groups`: 201 with the group and its numbers.
#[utoipa::path(
    post,
    operation_id = "groups_create",
    path = "/groups",
    tag = "Grupos de envio",
    request_body = CreateIn,
    responses((status = 201, description = "`data`: o grupo com seus números", body = crate::openapi::DataEnvelope), (status = "4XX", description = "Erro: `{message, code, …}` (422 nome em uso, números inválidos ou em outro grupo)", body = crate::openapi::ErrorBody))
)]
async fn create(
    State(state): State<AppState>,
    auth: Auth,
    ApiJson(b): ApiJson<CreateIn>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let g = state
        .runtime
        .create_group(
            auth.account_id(),
            GroupInput {
                name: b.name,
                limit_24h: b.limit_24h,
                channel_ids: b.channel_ids,
            },
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({ "data": group_json(&g, true) })),
    ))
}

/// `GET /groups/{id}`: the group with its numbers (health and headroom of each).
#[utoipa::path(
    get,
    operation_id = "groups_read",
    path = "/groups/{id}",
    tag = "Grupos de envio",
    params(("id" = i64, Path, description = "Id do grupo")),
    responses((status = 200, description = "`data`: o grupo com seus números", body = crate::openapi::DataEnvelope), (status = "4XX", description = "Erro: `{message, code, …}`", body = crate::openapi::ErrorBody))
)]
async fn read(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Value>, ApiError> {
    let g = state.runtime.group_detail(auth.account_id(), id).await?;
    Ok(Json(json!({ "data": group_json(&g, true) })))
}

/// `PATCH /groups/{id}`: renames and/or changes the limit.
#[utoipa::path(
    patch,
    operation_id = "groups_update",
    path = "/groups/{id}",
    tag = "Grupos de envio",
    params(("id" = i64, Path, description = "Id do grupo")),
    request_body = UpdateIn,
    responses((status = 200, description = "`data`: o grupo", body = crate::openapi::DataEnvelope), (status = "4XX", description = "Erro: `{message, code, …}`", body = crate::openapi::ErrorBody))
)]
async fn update(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<UpdateIn>,
) -> Result<Json<Value>, ApiError> {
    let g = state
        .runtime
        .update_group(auth.account_id(), id, b.name, b.limit_24h)
        .await?;
    Ok(Json(json!({ "data": group_json(&g, true) })))
}

/// `DELETE /groups/{id}`: the numbers leave the group and go on as single numbers.
#[utoipa::path(
    delete,
    operation_id = "groups_remove",
    path = "/groups/{id}",
    tag = "Grupos de envio",
    params(("id" = i64, Path, description = "Id do grupo")),
    responses((status = 200, description = "`data` {deleted: true}", body = crate::openapi::DataEnvelope), (status = "4XX", description = "Erro: `{message, code, …}`", body = crate::openapi::ErrorBody))
)]
async fn remove(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Value>, ApiError> {
    state.runtime.delete_group(auth.account_id(), id).await?;
    Ok(Json(json!({"data": {"deleted": true, "id": id}})))
}

/// `GET /groups/{id}/templates`: library templates approved on ALL its numbers.
#[utoipa::path(
    get,
    operation_id = "groups_templates",
    path = "/groups/{id}/templates",
    tag = "Grupos de envio",
    params(("id" = i64, Path, description = "Id do grupo")),
    responses((status = 200, description = "`data`: templates com id, name, provider_name, category, language, body, variables, header_type, has_media_header, buttons, var_map", body = crate::openapi::ListEnvelope), (status = "4XX", description = "Erro: `{message, code, …}`", body = crate::openapi::ErrorBody))
)]
async fn templates(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Value>, ApiError> {
    let g = state.runtime.group_detail(auth.account_id(), id).await?;
    let data: Vec<Value> = g.templates.iter().map(template_json).collect();
    Ok(Json(json!({ "data": data })))
}

/// `POST /groups/{id}/numbers` {channel_ids}: puts numbers in the group.
#[utoipa::path(
    post,
    operation_id = "groups_add_numbers",
    path = "/groups/{id}/numbers",
    tag = "Grupos de envio",
    params(("id" = i64, Path, description = "Id do grupo")),
    request_body = NumbersIn,
    responses((status = 200, description = "`data`: o grupo com seus números", body = crate::openapi::DataEnvelope), (status = "4XX", description = "Erro: `{message, code, …}`", body = crate::openapi::ErrorBody))
)]
async fn add_numbers(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<NumbersIn>,
) -> Result<Json<Value>, ApiError> {
    let g = state
        .runtime
        .add_group_numbers(auth.account_id(), id, &b.channel_ids)
        .await?;
    Ok(Json(json!({ "data": group_json(&g, true) })))
}

/// `DELETE /groups/{id}/numbers/{channel_id}`: takes a number out of the group.
#[utoipa::path(
    delete,
    operation_id = "groups_remove_number",
    path = "/groups/{id}/numbers/{channel_id}",
    tag = "Grupos de envio",
    params(("id" = i64, Path, description = "Id do grupo"), ("channel_id" = i64, Path, description = "Id do número")),
    responses((status = 200, description = "`data`: o grupo com seus números", body = crate::openapi::DataEnvelope), (status = "4XX", description = "Erro: `{message, code, …}`", body = crate::openapi::ErrorBody))
)]
async fn remove_number(
    State(state): State<AppState>,
    auth: Auth,
    Path((id, channel_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let (Ok(id), Ok(channel_id)) = (id.parse::<i64>(), channel_id.parse::<i64>()) else {
        return Err(ApiError::NotFound);
    };
    let g = state
        .runtime
        .remove_group_number(auth.account_id(), id, channel_id)
        .await?;
    Ok(Json(json!({ "data": group_json(&g, true) })))
}

/// `POST /groups/{id}/messages` {to, template_id, params}: 201 through the number with most
/// headroom; 422 `template_missing` with `missing`; 429 when the group's limit is exhausted.
/// `Idempotency-Key` is honoured as on `POST /messages` (202 for a send in doubt).
#[utoipa::path(
    post,
    operation_id = "groups_send",
    path = "/groups/{id}/messages",
    tag = "Grupos de envio",
    params(("id" = i64, Path, description = "Id do grupo")),
    request_body = SendIn,
    responses((status = 201, description = "Resultado do envio (com `channel_id` usado)", body = crate::openapi::DataEnvelope), (status = "4XX", description = "Erro: `{message, code, …}` (422 `missing`, 429 limite do grupo esgotado)", body = crate::openapi::ErrorBody))
)]
async fn send(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    headers: axum::http::HeaderMap,
    RawBody(body): RawBody,
) -> axum::response::Response {
    // `Idempotency-Key` as on `POST /messages`: one key, one message.
    crate::routes::messages::idempotent(&state, &auth, "", &headers, &body, |key| async {
        let b: SendIn = crate::extract::parse_json(&headers, &body)?;
        let to = Phone::parse("to", &b.to)?;
        let m = state
            .runtime
            .group_send(auth.account_id(), id, to, b.template_id, b.params, key)
            .await?;
        Ok((StatusCode::CREATED, json!({ "data": send_result(&m) })))
    })
    .await
}

/// `POST /groups/{id}/campaigns`: 201 with the campaign (tracked by `GET /campaigns/{id}` and
/// webhooks) and what the audience did.
#[utoipa::path(
    post,
    operation_id = "groups_create_campaign",
    path = "/groups/{id}/campaigns",
    tag = "Grupos de envio",
    params(("id" = i64, Path, description = "Id do grupo")),
    request_body = CampaignIn,
    responses((status = 201, description = "`data`: a campanha; `recipients`: adicionados, duplicados, inválidos", body = crate::openapi::DataEnvelope), (status = "4XX", description = "Erro: `{message, code, …}` (422 `missing`, modo ou data inválidos)", body = crate::openapi::ErrorBody))
)]
async fn create_campaign(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<CampaignIn>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let scheduled_at = b.scheduled_at.as_deref().map(parse_schedule).transpose()?;
    let (campaign, added) = state
        .runtime
        .create_group_campaign(
            auth.account_id(),
            id,
            actors::group::GroupCampaignInput {
                name: b.name,
                category: b.category,
                template_id: b.template_id,
                mode: b.mode,
                var_map: b.var_map,
                recipients: b.recipients,
                scheduled_at,
                start: b.start.unwrap_or(true),
            },
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({"data": campaign, "recipients": added})),
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn schedules_without_zone_are_brasilia_time() {
        // 2026-12-01 09:00 in Brasília is 12:00 UTC.
        assert_eq!(
            super::parse_schedule("2026-12-01T09:00").unwrap(),
            chrono::DateTime::parse_from_rfc3339("2026-12-01T12:00:00Z")
                .unwrap()
                .timestamp_millis()
        );
        assert!(super::parse_schedule("amanhã").is_err());
    }

    #[test]
    fn variables_are_counted_by_the_highest_placeholder() {
        assert_eq!(super::variables("Olá {{1}}, seu código é {{2}}."), 2);
        assert_eq!(super::variables("Sem variáveis"), 0);
    }
}
