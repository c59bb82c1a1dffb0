//! Spec sections "Template (library)" and "Templates".

use crate::envelope::{Data, Deleted, Page};
use crate::error::ApiError;
use crate::extract::{ApiJson, Auth, IdPath};
use crate::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use engine::library::{Button, VarMap};
use serde::Deserialize;
use services::templates::{TemplateInput, TemplateView};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Routes of this section (under `/api/v1`).
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(delete, edit))
        .routes(routes!(sync))
        .routes(routes!(submit))
        .routes(routes!(link))
        .routes(routes!(reactivate))
        .merge(OpenApiRouter::new().routes(routes!(header_example)).layer(
            axum::extract::DefaultBodyLimit::max(services::panel::PHOTO_MAX_BYTES + 64 * 1024),
        ))
}

/// A template header's kind.
#[derive(Debug, Clone, Copy, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum HeaderTypeIn {
    /// `header_text` (the default when it is given).
    Text,
    /// An image; its example with `PUT /templates/{id}/header-example`, and each send gives
    /// the image (`header_media`, a campaign's `image_url`).
    Image,
}

/// `POST /templates` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = TemplateCreateIn)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateIn {
    /// Not blank.
    #[schema(min_length = 1, pattern = r"\S")]
    name: String,
    body: String,
    category: Option<String>,
    language: Option<String>,
    provider_name: Option<String>,
    /// `image`: a media header (without `header_text`); until its example is given the
    /// template has the problem `header_example_missing` and is not submitted.
    header_type: Option<HeaderTypeIn>,
    header_text: Option<String>,
    footer_text: Option<String>,
    /// Buttons (more than 10, or a label over 25 characters, is a `problem`, not a refusal).
    #[serde(default)]
    buttons: Vec<Button>,
    /// Template variable → audience column (`"1".."n"`, `"btn:0"`, `"header:1"`).
    #[serde(default)]
    #[schema(value_type = std::collections::BTreeMap<String, engine::library::VarBinding>)]
    var_map: VarMap,
    #[serde(default)]
    submit_channels: Vec<i64>,
    kind: Option<String>,
    /// Submit it by itself to every number later added or connected (default true).
    auto_replicate: Option<bool>,
}

#[utoipa::path(
    post,
    operation_id = "templates_create",
    summary = "Cria um template na biblioteca",
    path = "/templates",
    tag = "Templates",
    request_body = CreateIn,
    responses((status = 201, description = "`data`: template com problems e channels_by_status", body = Data<TemplateView>))
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    auth: Auth,
    ApiJson(b): ApiJson<CreateIn>,
) -> Result<(StatusCode, Json<Data<TemplateView>>), ApiError> {
    if b.name.trim().is_empty() {
        return Err(ApiError::invalid(
            "name",
            "required",
            "O campo `name` é obrigatório.",
        ));
    }
    if b.kind.as_deref().is_some_and(|k| k != "official") {
        return Err(ApiError::invalid(
            "kind",
            "invalid_kind",
            "`kind` deve ser official.",
        ));
    }
    let input = TemplateInput {
        name: b.name.trim().to_string(),
        provider_name: b.provider_name,
        category: b
            .category
            .unwrap_or_else(|| "marketing".into())
            .to_ascii_lowercase(),
        language: b.language.unwrap_or_else(|| "pt_BR".into()),
        body: b.body,
        header_text: b.header_text.filter(|h| !h.is_empty()),
        header_media: matches!(b.header_type, Some(HeaderTypeIn::Image))
            .then_some(engine::template::HeaderMedia::Image),
        footer_text: b.footer_text.filter(|f| !f.is_empty()),
        buttons: b.buttons,
        var_map: b.var_map,
        submit_channels: b.submit_channels,
        auto_replicate: b.auto_replicate.unwrap_or(true),
    };
    let view = state
        .services
        .create_template(auth.account_id(), input)
        .await?;
    Ok((StatusCode::CREATED, Data::json(view)))
}

/// The multipart form of `PUT /templates/{id}/header-example`.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub(crate) struct HeaderExampleForm {
    /// JPEG or PNG, at most 5 MB.
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
}

#[utoipa::path(
    put,
    operation_id = "templates_header_example",
    summary = "Envia a imagem de exemplo do cabeçalho do template",
    path = "/templates/{id}/header-example",
    tag = "Templates",
    params(("id" = i64, Path, description = "Id do template")),
    request_body(content = HeaderExampleForm, content_type = "multipart/form-data"),
    responses(
        (status = 200, description = "`data`: o template, sem o problema `header_example_missing`; a imagem vai ao provedor a cada submissão (upload retomável do app do BM)", body = Data<TemplateView>),
        (status = 422, description = "`header_not_media` (o template não tem cabeçalho de imagem) ou `invalid_header_example` (não é JPEG/PNG ou passa de 5 MB)", body = crate::envelope::ErrorBody)
    )
)]
pub(crate) async fn header_example(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    multipart: Result<axum::extract::Multipart, axum::extract::multipart::MultipartRejection>,
) -> Result<Json<Data<TemplateView>>, ApiError> {
    // Not multipart, or without `file`: `None`, refused by the service once it knows the
    // template is the caller's (another account's id answers 404 whatever the body).
    let mut file = None;
    if let Ok(mut multipart) = multipart {
        while let Some(field) = multipart.next_field().await? {
            if field.name() == Some("file") {
                file = Some(field.bytes().await?.to_vec());
            }
        }
    }
    let view = state
        .services
        .set_template_header_example(auth.account_id(), id, file)
        .await?;
    Ok(Data::json(view))
}

#[utoipa::path(
    get,
    operation_id = "templates_list",
    summary = "Lista os templates da biblioteca",
    path = "/templates",
    tag = "Templates",
    params(crate::extract::PageQuery),
    responses((status = 200, description = "Templates da biblioteca com status por número, em ordem de criação; `has_more`, `next_cursor`", body = Page<TemplateView>))
)]
pub(crate) async fn list(
    state: State<AppState>,
    auth: Auth,
    sender: Option<axum::Extension<storage::sender::SenderCaller>>,
    q: Result<
        axum::extract::Query<crate::extract::PageQuery>,
        axum::extract::rejection::QueryRejection,
    >,
) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    // The public sender's token reads its own view (its own document, `sender_templates`).
    if let Some(axum::Extension(caller)) = sender {
        return Ok(crate::routes::sender::templates(&state, &caller)
            .await?
            .into_response());
    }
    Ok(library(state, auth, q).await?.into_response())
}

/// The account's library, a keyset page (`GET /api/v1/templates` and `GET /api/templates`).
pub(crate) async fn library(
    State(state): State<AppState>,
    auth: Auth,
    q: Result<
        axum::extract::Query<crate::extract::PageQuery>,
        axum::extract::rejection::QueryRejection,
    >,
) -> Result<Json<Page<TemplateView>>, ApiError> {
    let (limit, after) = crate::extract::list_page(q)?;
    let rows = state
        .services
        .library_page(auth.account_id(), after, limit + 1)
        .await?;
    Ok(Json(crate::extract::cursor_page(
        rows,
        limit,
        |t| t.id,
        |t| t.clone(),
    )))
}

/// `{channels: [ids]}`; without channels, every official number of the account.
#[derive(Debug, Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChannelsIn {
    channels: Option<Vec<i64>>,
}

#[utoipa::path(
    post,
    operation_id = "templates_submit",
    summary = "Submete o template ao provedor nos números",
    path = "/templates/{id}/submit",
    tag = "Templates",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    request_body = ChannelsIn,
    responses((status = 200, description = "O template com seu status em cada número", body = Data<TemplateView>))
)]
pub(crate) async fn submit(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    headers: axum::http::HeaderMap,
    body: bytes::Bytes,
) -> Result<Json<Data<TemplateView>>, ApiError> {
    // No body: every number of the account; a body is `ChannelsIn` as JSON.
    let channels = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        crate::extract::parse_json::<ChannelsIn>(&headers, &body)?.channels
    };
    let view = state
        .services
        .submit_template(auth.account_id(), id, channels)
        .await?;
    Ok(Data::json(view))
}

#[utoipa::path(
    post,
    operation_id = "templates_link",
    summary = "Submete o template aos números informados",
    path = "/templates/{id}/channels",
    tag = "Templates",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    request_body = ChannelsIn,
    responses((status = 200, description = "O template com seu status em cada número", body = Data<TemplateView>))
)]
async fn link(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<ChannelsIn>,
) -> Result<Json<Data<TemplateView>>, ApiError> {
    let Some(channels) = b.channels.filter(|c| !c.is_empty()) else {
        return Err(ApiError::invalid(
            "channels",
            "required",
            "Informe os números em `channels`.",
        ));
    };
    let view = state
        .services
        .submit_template(auth.account_id(), id, Some(channels))
        .await?;
    Ok(Data::json(view))
}

#[utoipa::path(
    post,
    operation_id = "templates_sync",
    summary = "Sincroniza o status do template com o provedor",
    path = "/templates/{id}/sync",
    tag = "Templates",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "`data` {synced_channels}", body = Data<SyncedOut>))
)]
pub(crate) async fn sync(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<SyncedOut>>, ApiError> {
    let synced_channels = state.services.sync_template(auth.account_id(), id).await?;
    Ok(Data::json(SyncedOut { synced_channels }))
}

/// `POST /templates/{id}/sync`'s answer.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct SyncedOut {
    /// Numbers whose status and quality were read again from the provider.
    synced_channels: usize,
}

/// `POST /templates/{id}/channels/{channel_id}/reactivate`'s answer (spec "Templates").
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ReactivatedOut {
    /// The new version's provider name (`…_v2`, `…_v3`).
    nome: String,
    /// pt-BR summary.
    message: String,
}

/// `PATCH /templates/{id}` (and the panel's `PUT`): the template and what the provider did
/// in each WABA.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct TemplateEditedOut {
    /// The template after the edit.
    #[serde(flatten)]
    pub template: TemplateView,
    /// Per WABA: edited in place, a new version, resubmitted or failed (D-066).
    pub edits: Vec<services::templates::ProviderEdit>,
}

#[utoipa::path(
    post,
    operation_id = "templates_reactivate",
    summary = "Reativa o template no número com uma nova versão",
    path = "/templates/{id}/channels/{channel_id}/reactivate",
    tag = "Templates",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404"), ("channel_id" = i64, Path, description = "id do número")),
    responses((status = 200, description = "`data` {nome, message}", body = Data<ReactivatedOut>))
)]
pub(crate) async fn reactivate(
    State(state): State<AppState>,
    auth: Auth,
    Path((id, channel_id)): Path<(String, String)>,
) -> Result<Json<Data<ReactivatedOut>>, ApiError> {
    let (Ok(id), Ok(channel_id)) = (id.parse::<i64>(), channel_id.parse::<i64>()) else {
        return Err(ApiError::NotFound);
    };
    let name = state
        .services
        .reactivate_template(auth.account_id(), id, channel_id)
        .await?;
    Ok(Data::json(ReactivatedOut {
        message: format!("Nova versão {name} enviada para aprovação."),
        nome: name,
    }))
}

#[utoipa::path(
    delete,
    operation_id = "templates_delete",
    summary = "Remove o template da biblioteca e do provedor",
    path = "/templates/{id}",
    tag = "Templates",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "Removido da biblioteca e do provedor (nível admin); 409 `template_em_uso` (`campanhas`: os ids que o enviam) e nada removido; quando o provedor recusa numa WABA, a recusa pela causa (422, 429, 502 ou 504) com `failed_waba` e `deleted_wabas`", body = Data<Deleted>))
)]
pub(crate) async fn delete(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<Deleted>>, ApiError> {
    state
        .services
        .delete_template(auth.account_id(), id)
        .await?;
    Ok(Deleted::json(id))
}

/// `PATCH /templates/{id}` body: only the fields sent change; `header_text: null` or
/// `footer_text: null` (or `""`) removes it; `buttons` replaces the list.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = TemplatePatch)]
#[serde(deny_unknown_fields)]
pub(crate) struct TemplatePatchIn {
    /// Not blank.
    #[schema(min_length = 1, pattern = r"\S")]
    name: Option<String>,
    category: Option<String>,
    body: Option<String>,
    #[serde(default, deserialize_with = "crate::extract::present")]
    #[schema(value_type = Option<String>)]
    header_text: Option<Option<String>>,
    #[serde(default, deserialize_with = "crate::extract::present")]
    #[schema(value_type = Option<String>)]
    footer_text: Option<Option<String>>,
    buttons: Option<Vec<Button>>,
    #[schema(value_type = Option<std::collections::BTreeMap<String, engine::library::VarBinding>>)]
    var_map: Option<VarMap>,
    auto_replicate: Option<bool>,
}

#[utoipa::path(
    patch,
    operation_id = "templates_edit",
    summary = "Altera um template",
    path = "/templates/{id}",
    tag = "Templates",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    request_body = TemplatePatchIn,
    responses((status = 200, description = "`data`: o template com `edits` [{waba_id, mode (edited, new_version, resubmitted, failed), provider_name, status, reason}] — o que o provedor fez em cada WABA", body = Data<TemplateEditedOut>))
)]
pub(crate) async fn edit(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<TemplatePatchIn>,
) -> Result<Json<Data<TemplateEditedOut>>, ApiError> {
    let (view, edits) = state
        .services
        .edit_template(
            auth.account_id(),
            id,
            services::templates::TemplatePatch {
                name: b.name,
                category: b.category,
                body: b.body,
                header_text: b.header_text,
                footer_text: b.footer_text,
                var_map: b.var_map,
                buttons: b.buttons,
                auto_replicate: b.auto_replicate,
            },
        )
        .await?;
    Ok(Data::json(TemplateEditedOut {
        template: view,
        edits,
    }))
}
