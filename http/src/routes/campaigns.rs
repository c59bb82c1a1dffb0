//! Spec section "Campaigns" (first slice: create, audience, progress; dispatch lands with
//! the campaign engine).

use crate::envelope::{Data, Page};
use crate::error::ApiError;
use crate::extract::{ApiJson, Auth, IdPath, RawBody};
use crate::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use engine::library::VarMap;
use serde::Deserialize;
use serde_json::{json, Value};
use services::campaigns::{CampaignInput, CampaignView, DryRun, RecipientInput, RecipientsAdded};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Routes (under `/api/v1`).
pub fn routes() -> OpenApiRouter<AppState> {
    // 10,000 rows with their columns do not fit the default 1 MiB.
    let (schemas, paths, recipients_route) = routes!(recipients);
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(read, edit))
        .routes(routes!(start))
        .routes(routes!(pause))
        .routes(routes!(resume))
        .routes(routes!(cancel))
        .routes(routes!(resend))
        .routes((
            schemas,
            paths,
            recipients_route.layer(axum::extract::DefaultBodyLimit::max(16 * 1024 * 1024)),
        ))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct ChannelWeight {
    channel_id: i64,
    /// Share of the audience, 1 to 100 (default 1).
    #[schema(minimum = 1, maximum = 100)]
    #[serde(default = "one")]
    weight: i64,
}

fn one() -> i64 {
    1
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = CampaignIn)]
#[serde(deny_unknown_fields)]
struct CreateIn {
    /// Not blank.
    #[schema(min_length = 1, pattern = r"\S")]
    name: String,
    /// `marketing`, `utility` or `authentication` (default the template's).
    #[schema(pattern = "^(marketing|utility|authentication)$")]
    category: Option<String>,
    template_id: i64,
    /// Template variable → audience column (`{"1": {"field": "nome", "default": "…"}}`);
    /// default the template's.
    #[schema(value_type = Option<std::collections::BTreeMap<String, engine::library::VarBinding>>)]
    var_map: Option<VarMap>,
    /// The numbers and their weights; at least one.
    #[schema(min_items = 1)]
    channels: Vec<ChannelWeight>,
    /// With `true`: only check (decision D-033), answer 200, store nothing.
    #[serde(default)]
    dry_run: bool,
    /// Audience to check in a dry run, up to 10,000 rows (refused otherwise: add it with
    /// `POST /campaigns/{id}/recipients`).
    #[schema(max_items = 10000)]
    recipients: Option<Vec<RecipientInput>>,
}

/// Cria uma campanha ou simula sua execução
///
/// `POST /campaigns`: 201 with the campaign (`draft`); with `dry_run: true`, 200 with what a
/// real run would find (`valid`, `invalid`, `duplicates`, each number's headroom today,
/// `fits_today`). `Idempotency-Key` is honoured as on `POST /messages`.
#[utoipa::path(
    post,
    operation_id = "campaigns_create",
    path = "/campaigns",
    tag = "Campanhas",
    request_body = CreateIn,
    responses((status = 201, description = "Campanha criada (`draft`); uma repetição com a mesma `Idempotency-Key` devolve a primeira", body = Data<CampaignView>), (status = 200, description = "`dry_run`: o que uma campanha de verdade encontraria; nada gravado nem enviado", body = Data<DryRun>))
)]
async fn create(
    State(state): State<AppState>,
    auth: Auth,
    headers: axum::http::HeaderMap,
    RawBody(body): RawBody,
) -> axum::response::Response {
    // `Idempotency-Key` as on `POST /messages`: a retried creation returns the first campaign.
    crate::routes::idempotency::idempotent(&state, &auth, "", &headers, &body, |_| async {
        let b: CreateIn = crate::extract::parse_json(&headers, &body)?;
        create_once(&state, &auth, b).await
    })
    .await
}

async fn create_once(
    state: &AppState,
    auth: &Auth,
    b: CreateIn,
) -> Result<(StatusCode, Value), ApiError> {
    if b.recipients.is_some() && !b.dry_run {
        return Err(ApiError::invalid(
            "recipients",
            "recipients_need_dry_run",
            "`recipients` só é aceito com `dry_run: true`; adicione o público com POST /campaigns/{id}/recipients.",
        ));
    }
    if let Some(c) = &b.category {
        if !["marketing", "utility", "authentication"].contains(&c.as_str()) {
            return Err(ApiError::invalid(
                "category",
                "invalid_category",
                "`category` deve ser marketing, utility ou authentication.",
            ));
        }
    }
    let input = CampaignInput {
        name: b.name,
        category: b.category,
        template_id: b.template_id,
        var_map: b.var_map,
        channels: b
            .channels
            .iter()
            .map(|c| (c.channel_id, c.weight))
            .collect(),
        group_id: None,
        mode: "all".into(),
    };
    if b.dry_run {
        let report = state
            .services
            .dry_run_campaign(auth.account_id(), input, b.recipients.unwrap_or_default())
            .await?;
        return Ok((StatusCode::OK, json!(Data { data: report })));
    }
    let view = state
        .services
        .create_campaign(auth.account_id(), input)
        .await?;
    Ok((StatusCode::CREATED, json!(Data { data: view })))
}

#[utoipa::path(
    get,
    operation_id = "campaigns_read",
    summary = "Lê uma campanha com suas estatísticas",
    path = "/campaigns/{id}",
    tag = "Campanhas",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "Campanha com `stats`", body = Data<CampaignView>))
)]
async fn read(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<CampaignView>>, ApiError> {
    Ok(Data::json(
        state.services.campaign_view(auth.account_id(), id).await?,
    ))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct RecipientsIn {
    /// 1 to 10,000 rows per call (`services::campaigns::MAX_RECIPIENTS_PER_CALL`).
    #[schema(min_items = 1, max_items = 10000)]
    recipients: Vec<RecipientInput>,
}

#[utoipa::path(
    post,
    operation_id = "campaigns_recipients",
    summary = "Adiciona contatos ao público da campanha",
    path = "/campaigns/{id}/recipients",
    tag = "Campanhas",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    request_body = RecipientsIn,
    responses((status = 201, description = "`data` {added, duplicates, invalid, total}", body = Data<RecipientsAdded>))
)]
async fn recipients(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<RecipientsIn>,
) -> Result<(StatusCode, Json<Data<RecipientsAdded>>), ApiError> {
    let out = state
        .services
        .add_recipients(auth.account_id(), id, b.recipients)
        .await?;
    Ok((StatusCode::CREATED, Data::json(out)))
}

#[utoipa::path(
    post,
    operation_id = "campaigns_start",
    summary = "Inicia o disparo da campanha",
    path = "/campaigns/{id}/start",
    tag = "Campanhas",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "Campanha em andamento", body = Data<CampaignView>))
)]
async fn start(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<CampaignView>>, ApiError> {
    Ok(Data::json(
        state.services.start_campaign(auth.account_id(), id).await?,
    ))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct ResendIn {
    target_channel_id: i64,
}

/// `POST /campaigns/{id}/resend`'s answer: the campaign after the call, as every campaign
/// action answers it, with how many recipients went again (issue 49 item 7).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ResentOut {
    #[serde(flatten)]
    view: CampaignView,
    /// Failed recipients queued again through the target number.
    resent: u64,
    /// Deprecated (2026-11-30): the same campaign, as the answer itself is; kept for the
    /// life of `/v1`.
    #[schema(deprecated)]
    campaign: CampaignView,
}

/// `POST /campaigns/{id}/cancel`'s answer: the campaign after the call, as every campaign
/// action answers it, with how many recipients it skipped (issue 49 item 7).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct CancelledOut {
    #[serde(flatten)]
    view: CampaignView,
    /// Unsent recipients marked `skipped` (`cancelada`).
    skipped: u64,
    /// Deprecated (2026-11-30): the same campaign, as the answer itself is; kept for the
    /// life of `/v1`.
    #[schema(deprecated)]
    campaign: CampaignView,
}

/// Reenvia por outro número os contatos que falharam na campanha
///
/// `POST /campaigns/{id}/resend` {target_channel_id}: `data` is the campaign with `resent`.
#[utoipa::path(
    post,
    operation_id = "campaigns_resend",
    path = "/campaigns/{id}/resend",
    tag = "Campanhas",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    request_body = ResendIn,
    responses((status = 200, description = "`data`: a campanha depois da chamada (como nas outras ações) com `resent`; `campaign` repete a campanha e está obsoleto", body = Data<ResentOut>))
)]
async fn resend(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<ResendIn>,
) -> Result<Json<Data<ResentOut>>, ApiError> {
    let (resent, campaign) = state
        .services
        .resend_campaign(auth.account_id(), id, b.target_channel_id)
        .await?;
    Ok(Data::json(ResentOut {
        view: campaign.clone(),
        resent,
        campaign,
    }))
}

/// Filters and paging of `GET /campaigns`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    /// `draft`, `scheduled`, `running`, `paused`, `completed`, `cancelled`.
    #[param(pattern = "^(draft|scheduled|running|paused|completed|cancelled)$")]
    state: Option<String>,
    /// Campaigns sending through this number.
    channel_id: Option<i64>,
    /// Campaigns made for this sending group.
    group_id: Option<i64>,
    /// Created at or after (ISO 8601 with zone).
    #[param(format = DateTime)]
    created_since: Option<String>,
    /// Created before (ISO 8601 with zone).
    #[param(format = DateTime)]
    created_until: Option<String>,
    /// The `next_cursor` of the previous page (opaque).
    #[param(pattern = "^[0-9]{1,18}$")]
    cursor: Option<String>,
    /// Page size, 1 to 200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    limit: Option<i64>,
}

/// Lista as campanhas da conta
///
/// `GET /campaigns`: the account's campaigns, newest first, with their counters;
/// `{data, has_more, next_cursor}`.
#[utoipa::path(
    get,
    operation_id = "campaigns_list",
    path = "/campaigns",
    tag = "Campanhas",
    params(ListQuery),
    responses((status = 200, description = "`data`: campanhas com `stats`, a mais nova primeiro; `has_more`, `next_cursor`", body = Page<CampaignView>))
)]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
    q: Result<axum::extract::Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Page<CampaignView>>, ApiError> {
    let axum::extract::Query(q) = q.map_err(crate::extract::query_rejection)?;
    if let Some(s) = &q.state {
        if engine::campaign::CampaignState::parse(s).is_none() {
            return Err(ApiError::invalid(
                "state",
                "invalid_filter",
                "`state` deve ser draft, scheduled, running, paused, completed ou cancelled.",
            ));
        }
    }
    let before = crate::extract::cursor(&q.cursor)?;
    let limit = q.limit.unwrap_or(50);
    if !(1..=200).contains(&limit) {
        return Err(ApiError::invalid(
            "limit",
            "invalid_limit",
            "`limit` deve estar entre 1 e 200.",
        ));
    }
    let filter = storage::campaigns::CampaignFilter {
        state: q.state.clone(),
        channel_id: q.channel_id,
        group_id: q.group_id,
        created_since: crate::extract::instant("created_since", &q.created_since)?,
        created_until: crate::extract::instant("created_until", &q.created_until)?,
    };
    let rows = state
        .services
        .list_campaigns(auth.account_id(), &filter, before, limit + 1)
        .await?;
    Ok(Json(crate::extract::cursor_page(
        rows,
        limit,
        |c| c.id,
        |c| c.clone(),
    )))
}

/// `PATCH /campaigns/{id}` body: each field optional.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct EditIn {
    /// New name.
    name: Option<String>,
    /// When it starts (ISO 8601; without zone: Brasília time); `null` unschedules it.
    #[serde(default, deserialize_with = "crate::extract::present")]
    #[schema(value_type = Option<String>)]
    scheduled_at: Option<Option<String>>,
}

/// Altera o nome ou o agendamento da campanha
///
/// `PATCH /campaigns/{id}`: name and `scheduled_at` before it starts.
#[utoipa::path(
    patch,
    operation_id = "campaigns_edit",
    path = "/campaigns/{id}",
    tag = "Campanhas",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    request_body = EditIn,
    responses((status = 200, description = "Campanha editada", body = Data<CampaignView>))
)]
async fn edit(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<EditIn>,
) -> Result<Json<Data<CampaignView>>, ApiError> {
    let schedule = match b.scheduled_at {
        None => None,
        Some(None) => Some(None),
        Some(Some(s)) => Some(Some(crate::routes::groups::parse_schedule(&s)?)),
    };
    Ok(Data::json(
        state
            .services
            .edit_campaign(auth.account_id(), id, b.name, schedule)
            .await?,
    ))
}

/// Pausa a campanha
///
/// `POST /campaigns/{id}/pause`: halts the campaign (no provider call of it starts after the
/// answer); `{data: campaign}`.
#[utoipa::path(
    post,
    operation_id = "campaigns_pause",
    path = "/campaigns/{id}/pause",
    tag = "Campanhas",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "Campanha pausada", body = Data<CampaignView>))
)]
async fn pause(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<CampaignView>>, ApiError> {
    let reason = format!("Pausada por {}", auth.0.token_name);
    state
        .services
        .pause_campaign(auth.account_id(), id, &reason)
        .await?;
    Ok(Data::json(
        state.services.campaign_view(auth.account_id(), id).await?,
    ))
}

/// Retoma a campanha pausada
///
/// `POST /campaigns/{id}/resume`: a paused campaign runs again.
#[utoipa::path(
    post,
    operation_id = "campaigns_resume",
    path = "/campaigns/{id}/resume",
    tag = "Campanhas",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "Campanha retomada", body = Data<CampaignView>))
)]
async fn resume(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<CampaignView>>, ApiError> {
    state
        .services
        .resume_campaign(auth.account_id(), id)
        .await?;
    Ok(Data::json(
        state.services.campaign_view(auth.account_id(), id).await?,
    ))
}

/// Cancela a campanha
///
/// `POST /campaigns/{id}/cancel`: stops it for good; its unsent recipients become `skipped`
/// (`cancelada`); `data` is the campaign with `skipped`.
#[utoipa::path(
    post,
    operation_id = "campaigns_cancel",
    path = "/campaigns/{id}/cancel",
    tag = "Campanhas",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "`data`: a campanha depois da chamada (como nas outras ações) com `skipped`; `campaign` repete a campanha e está obsoleto", body = Data<CancelledOut>))
)]
async fn cancel(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<CancelledOut>>, ApiError> {
    let skipped = state
        .services
        .cancel_campaign(auth.account_id(), id)
        .await?;
    let campaign = state.services.campaign_view(auth.account_id(), id).await?;
    Ok(Data::json(CancelledOut {
        view: campaign.clone(),
        skipped,
        campaign,
    }))
}
