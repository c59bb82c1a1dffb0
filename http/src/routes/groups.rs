//! Spec section "Sending groups" (decision D-037): groups of numbers with a shared 24 h
//! limit, managed by the account; the list, a group with its numbers, the templates approved
//! on all of them, and a single template message through the number with most headroom.

use crate::envelope::{Data, Deleted, List, Page};
use crate::error::ApiError;
use crate::extract::{ApiJson, Auth, IdPath, RawBody};
use crate::routes::channels::ChannelOut;
use crate::routes::message_out::{send_result, SendResultOut};
use crate::AppState;
use actors::group::{GroupDetail, GroupInput};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use engine::phone::Phone;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use services::campaigns::{CampaignView, RecipientsAdded};
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

/// A template approved on every number of a group (spec "Sending groups":
/// `GET /groups/{id}/templates`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct GroupTemplateOut {
    /// Library id.
    id: i64,
    /// Library name.
    name: String,
    /// Provider name.
    provider_name: String,
    /// `marketing`, `utility` or `authentication`.
    category: String,
    /// Locale.
    language: String,
    /// Body with `{{n}}` variables.
    body: String,
    /// How many body variables a send fills.
    variables: usize,
    /// `text` or null.
    header_type: Option<String>,
    /// A media header.
    has_media_header: bool,
    /// Buttons: `{type, text, url, example}`.
    #[schema(value_type = Vec<engine::library::Button>)]
    buttons: Value,
    /// Variable bindings (spec "Template (library)" › var_map).
    #[schema(value_type = std::collections::BTreeMap<String, engine::library::VarBinding>)]
    var_map: Value,
}

impl From<&TemplateRecord> for GroupTemplateOut {
    fn from(t: &TemplateRecord) -> Self {
        GroupTemplateOut {
            id: t.id,
            name: t.name.clone(),
            provider_name: t.provider_name.clone(),
            category: t.category.clone(),
            language: t.language.clone(),
            body: t.body.clone(),
            variables: variables(&t.body),
            header_type: t.header_type.clone(),
            has_media_header: t.has_media_header,
            buttons: t.buttons.clone(),
            var_map: t.var_map.clone(),
        }
    }
}

/// A library template named in a group: `{id, name}`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TemplateNameOut {
    /// Library id.
    id: i64,
    /// Library name.
    name: String,
}

/// A sending group's fields, in the list and in the detail (D-037).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct GroupFields {
    /// Id.
    id: i64,
    /// Name.
    name: String,
    /// Unique recipients per 24 h over the group; null: unlimited.
    limit_24h: Option<i64>,
    /// The group's own limit; null: the sum of its numbers'.
    own_limit: Option<i64>,
    /// `own` or `sum`.
    #[schema(pattern = "^(own|sum)$")]
    limit_source: &'static str,
    /// Unique business-initiated recipients of its numbers in the last 24 h.
    sent_24h: i64,
    /// Headroom now; null: unlimited.
    available: Option<i64>,
    /// Templates approved on all its numbers.
    templates_in_common: Vec<TemplateNameOut>,
    /// When it was created (ISO 8601).
    created_at: String,
}

impl From<&GroupDetail> for GroupFields {
    fn from(g: &GroupDetail) -> Self {
        let s = &g.state;
        GroupFields {
            id: s.id,
            name: s.name.clone(),
            limit_24h: s.limit_24h,
            own_limit: s.own_limit,
            limit_source: if s.own_limit.is_some() { "own" } else { "sum" },
            sent_24h: s.sent_24h,
            available: s.available,
            templates_in_common: g
                .templates
                .iter()
                .map(|t| TemplateNameOut {
                    id: t.id,
                    name: t.name.clone(),
                })
                .collect(),
            created_at: actors::time::iso(g.created_at),
        }
    }
}

/// A sending group as the list shows it: `numbers` is how many it has.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct GroupOut {
    /// The group's fields.
    #[serde(flatten)]
    group: GroupFields,
    /// How many numbers it has.
    numbers: usize,
}

impl From<&GroupDetail> for GroupOut {
    fn from(g: &GroupDetail) -> Self {
        GroupOut {
            group: GroupFields::from(g),
            numbers: g.state.members.len(),
        }
    }
}

/// A sending group with its numbers (each with health and headroom).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct GroupDetailOut {
    /// The group's fields.
    #[serde(flatten)]
    group: GroupFields,
    /// Its numbers, with live health and 24 h headroom.
    numbers: Vec<ChannelOut>,
}

impl From<&GroupDetail> for GroupDetailOut {
    fn from(g: &GroupDetail) -> Self {
        GroupDetailOut {
            group: GroupFields::from(g),
            numbers: g.numbers.iter().map(ChannelOut::from).collect(),
        }
    }
}

/// `POST /groups/{id}/campaigns`'s answer: the campaign and what its audience did.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct GroupCampaignOut {
    /// The campaign (track it with `GET /campaigns/{id}`).
    data: CampaignView,
    /// The audience rows: added, duplicates, invalid; null when none was given.
    recipients: Option<RecipientsAdded>,
}

/// `POST /groups` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = GroupIn)]
#[serde(deny_unknown_fields)]
struct CreateIn {
    /// Not blank.
    #[schema(min_length = 1, pattern = r"\S")]
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
    /// Not blank.
    #[schema(min_length = 1, pattern = r"\S")]
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
    #[schema(pattern = r"^\s*\+?[ ().-]*([0-9][ ().-]*){10,15}(@c\.us|@s\.whatsapp\.net)?\s*$")]
    to: String,
    /// The template and its values, as on `POST /messages` (D-127); it must be approved on
    /// every number of the group.
    template: Option<crate::routes::template_in::TemplateIn>,
    /// Deprecated (2026-11-29): `template.id`. Still accepted; the answer then carries
    /// `Deprecation`.
    #[schema(deprecated)]
    template_id: Option<i64>,
    /// Deprecated (2026-11-29): `template.params`.
    #[schema(deprecated)]
    #[serde(default)]
    params: Vec<String>,
}

impl SendIn {
    /// The one `template` object, from the deprecated `template_id` + `params` when those
    /// came. Errors: 422 `ambiguous_template` with both shapes, `required` with neither.
    fn template(self) -> Result<engine::send::TemplateRef, ApiError> {
        use crate::routes::template_in::TemplateIn;
        match (self.template, self.template_id) {
            (Some(t), None) if self.params.is_empty() => t.into_ref(),
            (None, Some(id)) => {
                TemplateIn::legacy(Some(id), None, None, self.params, None, None).into_ref()
            }
            (None, None) => Err(ApiError::invalid(
                "template",
                "required",
                "Informe `template` ({id} ou {name, language}, com `vars` ou `params`).",
            )),
            _ => Err(ApiError::invalid(
                "template",
                "ambiguous_template",
                "Informe `template`, não `template_id` e `params` (formato antigo) junto.",
            )),
        }
    }
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
    #[schema(value_type = Option<std::collections::BTreeMap<String, engine::library::VarBinding>>)]
    var_map: Option<engine::library::VarMap>,
    /// Up to 10,000 rows (`services::campaigns::MAX_RECIPIENTS_PER_CALL`).
    #[serde(default)]
    #[schema(max_items = 10000)]
    recipients: Vec<services::campaigns::RecipientInput>,
    /// Date-time without zone (America/Sao_Paulo), e.g. `2026-12-01T09:00`.
    scheduled_at: Option<String>,
    /// `false`: only create (default true).
    start: Option<bool>,
}

/// Lista os grupos de envio
///
/// `GET /groups`: every group with its limit, use and templates in common.
#[utoipa::path(
    get,
    operation_id = "groups_list",
    path = "/groups",
    tag = "Grupos de envio",
    params(crate::extract::PageQuery),
    responses((status = 200, description = "`data`: grupos com limite, enviados em 24 h, disponível e templates em comum, em ordem de criação; `has_more`, `next_cursor`", body = Page<GroupOut>))
)]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
    q: Result<
        axum::extract::Query<crate::extract::PageQuery>,
        axum::extract::rejection::QueryRejection,
    >,
) -> Result<Json<Page<GroupOut>>, ApiError> {
    let (limit, after) = crate::extract::list_page(q)?;
    let groups = state
        .services
        .groups_page(auth.account_id(), after, limit + 1)
        .await?;
    Ok(Json(crate::extract::cursor_page(
        groups,
        limit,
        |g| g.state.id,
        |g| GroupOut::from(g),
    )))
}

/// Cria um grupo de envio
///
/// `POST /groups`: 201 with the group and its numbers.
#[utoipa::path(
    post,
    operation_id = "groups_create",
    path = "/groups",
    tag = "Grupos de envio",
    request_body = CreateIn,
    responses((status = 201, description = "`data`: o grupo com seus números", body = Data<GroupDetailOut>))
)]
async fn create(
    State(state): State<AppState>,
    auth: Auth,
    ApiJson(b): ApiJson<CreateIn>,
) -> Result<(StatusCode, Json<Data<GroupDetailOut>>), ApiError> {
    let g = state
        .services
        .create_group(
            auth.account_id(),
            GroupInput {
                name: b.name,
                limit_24h: b.limit_24h,
                channel_ids: b.channel_ids,
            },
        )
        .await?;
    Ok((StatusCode::CREATED, Data::json(GroupDetailOut::from(&g))))
}

/// Lê um grupo de envio com seus números
///
/// `GET /groups/{id}`: the group with its numbers (health and headroom of each).
#[utoipa::path(
    get,
    operation_id = "groups_read",
    path = "/groups/{id}",
    tag = "Grupos de envio",
    params(("id" = i64, Path, description = "Id do grupo")),
    responses((status = 200, description = "`data`: o grupo com seus números", body = Data<GroupDetailOut>))
)]
async fn read(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<GroupDetailOut>>, ApiError> {
    let g = state.services.group_detail(auth.account_id(), id).await?;
    Ok(Data::json(GroupDetailOut::from(&g)))
}

/// Altera o nome ou o limite do grupo de envio
///
/// `PATCH /groups/{id}`: renames and/or changes the limit.
#[utoipa::path(
    patch,
    operation_id = "groups_update",
    path = "/groups/{id}",
    tag = "Grupos de envio",
    params(("id" = i64, Path, description = "Id do grupo")),
    request_body = UpdateIn,
    responses((status = 200, description = "`data`: o grupo", body = Data<GroupDetailOut>))
)]
async fn update(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<UpdateIn>,
) -> Result<Json<Data<GroupDetailOut>>, ApiError> {
    let g = state
        .services
        .update_group(auth.account_id(), id, b.name, b.limit_24h)
        .await?;
    Ok(Data::json(GroupDetailOut::from(&g)))
}

/// Remove um grupo de envio
///
/// `DELETE /groups/{id}`: the numbers leave the group and go on as single numbers.
#[utoipa::path(
    delete,
    operation_id = "groups_remove",
    path = "/groups/{id}",
    tag = "Grupos de envio",
    params(("id" = i64, Path, description = "Id do grupo")),
    responses((status = 200, description = "`data` {deleted: true}", body = Data<Deleted>))
)]
async fn remove(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<Deleted>>, ApiError> {
    state.services.delete_group(auth.account_id(), id).await?;
    Ok(Deleted::json(id))
}

/// Lista os templates aprovados em todos os números do grupo
///
/// `GET /groups/{id}/templates`: library templates approved on ALL its numbers.
#[utoipa::path(
    get,
    operation_id = "groups_templates",
    path = "/groups/{id}/templates",
    tag = "Grupos de envio",
    params(("id" = i64, Path, description = "Id do grupo")),
    responses((status = 200, description = "`data`: templates com id, name, provider_name, category, language, body, variables, header_type, has_media_header, buttons, var_map", body = List<GroupTemplateOut>))
)]
async fn templates(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<List<GroupTemplateOut>>, ApiError> {
    let g = state.services.group_detail(auth.account_id(), id).await?;
    Ok(List::json(
        g.templates.iter().map(GroupTemplateOut::from).collect(),
    ))
}

/// Adiciona números ao grupo de envio
///
/// `POST /groups/{id}/numbers` {channel_ids}: puts numbers in the group.
#[utoipa::path(
    post,
    operation_id = "groups_add_numbers",
    path = "/groups/{id}/numbers",
    tag = "Grupos de envio",
    params(("id" = i64, Path, description = "Id do grupo")),
    request_body = NumbersIn,
    responses((status = 200, description = "`data`: o grupo com seus números", body = Data<GroupDetailOut>))
)]
async fn add_numbers(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<NumbersIn>,
) -> Result<Json<Data<GroupDetailOut>>, ApiError> {
    let g = state
        .services
        .add_group_numbers(auth.account_id(), id, &b.channel_ids)
        .await?;
    Ok(Data::json(GroupDetailOut::from(&g)))
}

/// Retira um número do grupo de envio
///
/// `DELETE /groups/{id}/numbers/{channel_id}`: takes a number out of the group.
#[utoipa::path(
    delete,
    operation_id = "groups_remove_number",
    path = "/groups/{id}/numbers/{channel_id}",
    tag = "Grupos de envio",
    params(("id" = i64, Path, description = "Id do grupo"), ("channel_id" = i64, Path, description = "Id do número")),
    responses((status = 200, description = "`data`: o grupo com seus números", body = Data<GroupDetailOut>))
)]
async fn remove_number(
    State(state): State<AppState>,
    auth: Auth,
    Path((id, channel_id)): Path<(String, String)>,
) -> Result<Json<Data<GroupDetailOut>>, ApiError> {
    let (Ok(id), Ok(channel_id)) = (id.parse::<i64>(), channel_id.parse::<i64>()) else {
        return Err(ApiError::NotFound);
    };
    let g = state
        .services
        .remove_group_number(auth.account_id(), id, channel_id)
        .await?;
    Ok(Data::json(GroupDetailOut::from(&g)))
}

/// Envia uma mensagem pelo número do grupo com mais folga
///
/// `POST /groups/{id}/messages` {to, template} (the `template` object of `POST /messages`;
/// the old `template_id` + `params` still accepted, answered with `Deprecation`): 201 through
/// the number with most headroom; 422 `template_missing` with `missing`; 429 when the group's limit is exhausted.
/// `Idempotency-Key` is honoured as on `POST /messages` (202 for a send in doubt).
#[utoipa::path(
    post,
    operation_id = "groups_send",
    path = "/groups/{id}/messages",
    tag = "Grupos de envio",
    params(("id" = i64, Path, description = "Id do grupo")),
    request_body = SendIn,
    responses((status = 201, description = "Resultado do envio (com `channel_id` usado)", body = Data<SendResultOut>))
)]
async fn send(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    headers: axum::http::HeaderMap,
    RawBody(body): RawBody,
) -> axum::response::Response {
    use crate::routes::template_in::{body_has, mark_deprecated};
    // `Idempotency-Key` as on `POST /messages`: one key, one message.
    let resp =
        crate::routes::idempotency::idempotent(&state, &auth, "", &headers, &body, |key| async {
            let mut b: SendIn = crate::extract::parse_json(&headers, &body)?;
            let to = Phone::parse("to", &std::mem::take(&mut b.to))?;
            let m = state
                .services
                .group_send(auth.account_id(), id, to, b.template()?, key)
                .await?;
            Ok((StatusCode::CREATED, json!({ "data": send_result(&m) })))
        })
        .await;
    match body_has(&body, |m| m.contains_key("template_id")) {
        true => mark_deprecated(resp),
        false => resp,
    }
}

/// Cria uma campanha para o grupo de envio
///
/// `POST /groups/{id}/campaigns`: 201 with the campaign (tracked by `GET /campaigns/{id}` and
/// webhooks) and what the audience did.
#[utoipa::path(
    post,
    operation_id = "groups_create_campaign",
    path = "/groups/{id}/campaigns",
    tag = "Grupos de envio",
    params(("id" = i64, Path, description = "Id do grupo")),
    request_body = CampaignIn,
    responses((status = 201, description = "`data`: a campanha; `recipients`: adicionados, duplicados, inválidos", body = GroupCampaignOut))
)]
async fn create_campaign(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<CampaignIn>,
) -> Result<(StatusCode, Json<GroupCampaignOut>), ApiError> {
    let scheduled_at = b.scheduled_at.as_deref().map(parse_schedule).transpose()?;
    let (campaign, added) = state
        .services
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
        Json(GroupCampaignOut {
            data: campaign,
            recipients: added,
        }),
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
