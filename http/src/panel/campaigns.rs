//! Panel campaigns (spec `panel-api.md` "Campaign" rows; issue 20, D-062): create with
//! contacts (JSON or a CSV import with a column mapping), contact hygiene, validate, approve
//! (maker/checker), dispatch, pause/resume/cancel, test send, contacts, report, sends and their
//! CSV export, and the account's dispatch switch (`/api/settings/dispatch`).

use super::PanelUser;
use crate::envelope::{Data, Deleted, Page};
use crate::error::ApiError;
use crate::extract::{ApiJson, IdPath};
use crate::AppState;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Multipart, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use engine::panel_campaign::{Contact, CsvMapping};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use services::panel_campaigns::{
    DispatchSetting, PanelActor, PanelCampaignInput, PanelCampaignView,
};
use storage::panel_campaigns::{SendFilter, SendRow};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// 100,000 contacts with their columns as JSON (`POST /api/campaigns`).
const CONTACTS_BODY_LIMIT: usize = 64 * 1024 * 1024;

/// 100,000 real CSV rows (a number, a name and a handful of columns: ~300 bytes a row) with
/// room to spare (issue 46).
const CSV_BODY_LIMIT: usize = 32 * 1024 * 1024;

/// `POST /api/hygiene/callback`: public (the hygiene service calls it), signed with
/// `HYGIENE_API_KEY` (D-062).
pub fn callback_routes() -> axum::Router<AppState> {
    axum::Router::new().route(
        "/api/hygiene/callback",
        axum::routing::post(hygiene_callback),
    )
}

/// The service says a job ended: 200 `{validated: id|null}`; 401 unsigned or badly signed;
/// 404 when no service is configured or no campaign waits for the job (yet); 400 a body that
/// is not `{job_id, status}`.
async fn hygiene_callback(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
    crate::extract::RawBody(body): crate::extract::RawBody,
) -> Result<Json<Value>, ApiError> {
    let signature = headers
        .get("x-hygiene-signature")
        .and_then(|v| v.to_str().ok());
    let validated = state.services.hygiene_callback(&body, signature).await?;
    Ok(Json(json!({"data": {"validated": validated}})))
}

pub(super) fn routes() -> OpenApiRouter<AppState> {
    let (s1, p1, create_route) = routes!(list, create);
    let (s2, p2, import_route) = routes!(import);
    OpenApiRouter::new()
        .routes((
            s1,
            p1,
            create_route.layer(DefaultBodyLimit::max(CONTACTS_BODY_LIMIT)),
        ))
        .routes((
            s2,
            p2,
            import_route.layer(DefaultBodyLimit::max(CSV_BODY_LIMIT)),
        ))
        .routes(routes!(read, update, remove))
        .routes(routes!(resubmit))
        .routes(routes!(validate))
        .routes(routes!(approve))
        .routes(routes!(dispatch))
        .routes(routes!(test_send))
        .routes(routes!(preview))
        .routes(routes!(contacts))
        .routes(routes!(report))
        .routes(routes!(sends))
        .routes(routes!(export))
        .routes(routes!(dispatch_setting, set_dispatch_setting))
}

fn actor(me: &PanelUser) -> PanelActor {
    PanelActor {
        user_id: me.user.id,
        role: me.role,
        scope: me.scope(),
        author: me.author(),
    }
}

/// `POST /api/campaigns` (the spec's "Campaign create" fields).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = PanelCampaignIn)]
#[serde(deny_unknown_fields)]
pub(crate) struct CampaignIn {
    /// Name (1–200 characters).
    nome: String,
    /// A library template of the account, approved on every number.
    template_id: i64,
    /// At most this many contacts are sent (default: all valid ones).
    volume: Option<i64>,
    /// Sending numbers (ids of `/api/phone-numbers`).
    numeros: Vec<i64>,
    /// Contacts `{numero, nome, dados}` (1–100,000).
    #[schema(min_items = 1, max_items = 100000)]
    contatos: Vec<Contact>,
    /// The column that fills each template variable, in order (`["nome", "cidade"]`).
    #[serde(default)]
    variaveis: Vec<String>,
    /// Header image (http(s) URL).
    imagem_url: Option<String>,
    /// The URL button's suffix, or the column that fills it.
    botao_variavel: Option<String>,
}

fn name_ok(n: &str) -> Result<(), ApiError> {
    if n.trim().is_empty() || n.len() > 200 {
        return Err(ApiError::invalid(
            "nome",
            "invalid_name",
            "`nome` deve ter de 1 a 200 caracteres.",
        ));
    }
    Ok(())
}

#[utoipa::path(post, operation_id = "panel_campaigns_create", summary = "Cria uma campanha com a lista de contatos", path = "/campaigns", tag = "Campanhas",
    request_body = CampaignIn,
    responses((status = 201, description = "Campanha criada; contatos enviados à higienização (`status` `higienizando`, ou `falha_higienizacao` com o motivo)", body = Data<PanelCampaignView>)))]
pub(crate) async fn create(
    State(state): State<AppState>,
    me: PanelUser,
    ApiJson(b): ApiJson<CampaignIn>,
) -> Result<(StatusCode, Json<Data<PanelCampaignView>>), ApiError> {
    name_ok(&b.nome)?;
    let view = state
        .services
        .create_panel_campaign(
            me.account_id(),
            &actor(&me),
            PanelCampaignInput {
                name: b.nome,
                template_id: b.template_id,
                volume: b.volume,
                channels: b.numeros,
                contacts: b.contatos,
                variables: b.variaveis,
                image_url: b.imagem_url,
                button_var: b.botao_variavel,
                blank_rows: 0,
            },
        )
        .await?;
    Ok((StatusCode::CREATED, Data::json(view)))
}

/// The multipart form of `POST /api/campaigns/import`.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub(crate) struct ImportForm {
    /// The CSV (`;` or `,`, header row, UTF-8; up to 100,000 rows).
    #[schema(value_type = String, format = Binary)]
    arquivo: Vec<u8>,
    /// Name.
    nome: String,
    /// Library template id.
    template_id: i64,
    /// Sending number ids, comma-separated (`12,13`), or the field repeated once per number.
    numeros: String,
    /// Most contacts sent.
    volume: Option<i64>,
    /// Columns that fill the template's variables, comma-separated, in order.
    variaveis: Option<String>,
    /// Header image URL.
    imagem_url: Option<String>,
    /// URL button suffix or its column.
    botao_variavel: Option<String>,
    /// The number's column (default `numero`, `telefone`, `phone` or `celular`).
    coluna_numero: Option<String>,
    /// The name's column (default `nome`).
    coluna_nome: Option<String>,
}

fn form_int(field: &'static str, v: &str) -> Result<i64, ApiError> {
    v.trim().parse().map_err(|_| {
        ApiError::invalid(
            field,
            "invalid_field",
            format!("`{field}` deve ser um inteiro."),
        )
    })
}

#[utoipa::path(post, operation_id = "panel_campaigns_import", summary = "Cria uma campanha a partir de um CSV de contatos", path = "/campaigns/import", tag = "Campanhas",
    request_body(content = ImportForm, content_type = "multipart/form-data"),
    responses((status = 201, description = "Campanha criada a partir do CSV (como `POST /campaigns`)", body = Data<PanelCampaignView>)))]
pub(crate) async fn import(
    State(state): State<AppState>,
    me: PanelUser,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Result<(StatusCode, Json<Data<PanelCampaignView>>), ApiError> {
    let mut multipart = multipart.map_err(|_| {
        ApiError::invalid(
            "arquivo",
            "csv_invalido",
            "Envie o CSV como multipart/form-data no campo `arquivo`.",
        )
    })?;
    let (file, fields) = read_form(&mut multipart).await?;
    let file = file.ok_or_else(|| {
        ApiError::invalid(
            "arquivo",
            "csv_invalido",
            "O campo `arquivo` (o CSV) é obrigatório.",
        )
    })?;
    let form = ImportFields::read(&fields)?;
    let mapping = form.mapping.clone();
    // Parsing up to 32 MB is CPU work: on the blocking pool, not the request threads.
    let (contacts, blank_rows) = tokio::task::spawn_blocking(move || {
        engine::panel_campaign::contacts_and_blank_rows(&file, &mapping)
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))??;
    let view = state
        .services
        .create_panel_campaign(
            me.account_id(),
            &actor(&me),
            PanelCampaignInput {
                name: form.name,
                template_id: form.template_id,
                volume: form.volume,
                channels: form.channels,
                contacts,
                variables: form.variables,
                image_url: form.image_url,
                button_var: form.button_var,
                blank_rows: blank_rows as i64,
            },
        )
        .await?;
    Ok((StatusCode::CREATED, Data::json(view)))
}

/// An import form's fields besides the CSV, read and checked (422 `required` for a
/// missing `nome`, `template_id` or `numeros`; the name's and numbers' own errors).
struct ImportFields {
    name: String,
    template_id: i64,
    channels: Vec<i64>,
    volume: Option<i64>,
    variables: Vec<String>,
    mapping: CsvMapping,
    image_url: Option<String>,
    button_var: Option<String>,
}

impl ImportFields {
    fn read(fields: &std::collections::HashMap<String, String>) -> Result<Self, ApiError> {
        let optional = |f: &str| fields.get(f).filter(|v| !v.is_empty()).cloned();
        let required = |f: &'static str| {
            optional(f).ok_or_else(|| {
                ApiError::invalid(f, "required", format!("O campo `{f}` é obrigatório."))
            })
        };
        let name = required("nome")?;
        name_ok(&name)?;
        let template_id = form_int("template_id", &required("template_id")?)?;
        let channels = required("numeros")?
            .split(',')
            .map(|n| form_int("numeros", n))
            .collect::<Result<Vec<_>, _>>()?;
        let volume = optional("volume")
            .map(|v| form_int("volume", &v))
            .transpose()?;
        let variables: Vec<String> = optional("variaveis")
            .map(|v| {
                v.split(',')
                    .map(|c| c.trim().to_string())
                    .filter(|c| !c.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        Ok(Self {
            name,
            template_id,
            channels,
            volume,
            variables,
            mapping: CsvMapping {
                number: optional("coluna_numero"),
                name: optional("coluna_nome"),
            },
            image_url: optional("imagem_url"),
            button_var: optional("botao_variavel"),
        })
    }
}

/// Reads an import form: the CSV (`arquivo`) and the other fields, trimmed; repeated `numeros`
/// (a form's checkboxes) joined with commas (`12,13`).
///
/// Errors: 413 for a part over the body limit, 400 for a malformed form.
async fn read_form(
    multipart: &mut Multipart,
) -> Result<(Option<Bytes>, std::collections::HashMap<String, String>), ApiError> {
    let mut file: Option<Bytes> = None;
    let mut fields = std::collections::HashMap::new();
    while let Some(field) = multipart.next_field().await? {
        let name = field.name().unwrap_or_default().to_string();
        let bytes = field.bytes().await?;
        if name == "arquivo" {
            file = Some(bytes);
        } else if name == "numeros" {
            // Repeated `numeros` fields (a form's checkboxes) add up: `12,13`.
            let more = String::from_utf8_lossy(&bytes).trim().to_string();
            fields
                .entry(name)
                .and_modify(|v: &mut String| {
                    v.push(',');
                    v.push_str(&more);
                })
                .or_insert(more);
        } else {
            fields.insert(name, String::from_utf8_lossy(&bytes).trim().to_string());
        }
    }
    Ok((file, fields))
}

/// Filters of `GET /api/campaigns`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    /// Engine state: `draft`, `scheduled`, `running`, `paused`, `completed`, `cancelled`.
    #[param(value_type = Option<engine::campaign::CampaignState>)]
    estado: Option<String>,
    /// The `next_cursor` of the previous page.
    #[param(pattern = "^[0-9]{1,18}$")]
    cursor: Option<String>,
    /// Page size, 1 to 200 (default 50).
    limit: Option<i64>,
}

#[utoipa::path(get, operation_id = "panel_campaigns_list", summary = "Lista as campanhas do painel", path = "/campaigns", tag = "Campanhas",
    params(ListQuery),
    responses((status = 200, description = "`data`: campanhas do painel no seu escopo, a mais nova primeiro; `has_more`, `next_cursor`", body = Page<PanelCampaignView>)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    me: PanelUser,
    q: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Page<PanelCampaignView>>, ApiError> {
    let Query(q) = q.map_err(crate::extract::query_rejection)?;
    if let Some(s) = &q.estado {
        if engine::campaign::CampaignState::parse(s).is_none() {
            return Err(ApiError::invalid(
                "estado",
                "invalid_state",
                "`estado` deve ser draft, scheduled, running, paused, completed ou cancelled.",
            ));
        }
    }
    let limit = q.limit.unwrap_or(50).clamp(1, 200);
    let rows = state
        .services
        .panel_campaigns(
            me.account_id(),
            &me.scope(),
            q.estado.as_deref(),
            crate::extract::cursor(&q.cursor)?,
            limit + 1,
        )
        .await?;
    Ok(Json(crate::extract::cursor_page(
        rows,
        limit,
        |c| c.id,
        |c| c.clone(),
    )))
}

#[utoipa::path(get, operation_id = "panel_campaigns_read", summary = "Lê uma campanha", path = "/campaigns/{id}", tag = "Campanhas",
    params(("id" = i64, Path, description = "Id da campanha")),
    responses((status = 200, description = "`data`: a campanha (`status`, `higienizacao`, `contatos`, `stats`, `retida`…; `pode_aprovar`: se quem lê pode aprová-la)", body = Data<PanelCampaignView>)))]
pub(crate) async fn read(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<Data<PanelCampaignView>>, ApiError> {
    let view = state
        .services
        .panel_campaign_view_as(me.account_id(), &actor(&me), id)
        .await?;
    Ok(Data::json(view))
}

/// `PUT /api/campaigns/{id}` (the spec's "Campaign update").
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CampaignPatch {
    /// New name.
    nome: Option<String>,
    /// `pausada`, `em_andamento` (resume) or `cancelada`.
    status: Option<String>,
    /// New volume (not below the contacts already released).
    volume: Option<i64>,
}

#[utoipa::path(put, operation_id = "panel_campaigns_update", summary = "Altera o nome, o volume ou o status da campanha", path = "/campaigns/{id}", tag = "Campanhas",
    params(("id" = i64, Path, description = "Id da campanha")),
    request_body = CampaignPatch,
    responses((status = 200, description = "`data`: a campanha; uma pausa vale antes da próxima chamada ao provedor", body = Data<PanelCampaignView>)))]
pub(crate) async fn update(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<CampaignPatch>,
) -> Result<Json<Data<PanelCampaignView>>, ApiError> {
    let view = state
        .services
        .update_panel_campaign(me.account_id(), &actor(&me), id, b.nome, b.volume, b.status)
        .await?;
    Ok(Data::json(view))
}

#[utoipa::path(delete, operation_id = "panel_campaigns_delete", summary = "Remove uma campanha ainda não disparada", path = "/campaigns/{id}", tag = "Campanhas",
    params(("id" = i64, Path, description = "Id da campanha")),
    responses((status = 200, description = "Removida (só antes do disparo)", body = Data<Deleted>)))]
pub(crate) async fn remove(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<Data<Deleted>>, ApiError> {
    state
        .services
        .delete_panel_campaign(me.account_id(), &me.scope(), id)
        .await?;
    Ok(Deleted::json(id))
}

#[utoipa::path(post, operation_id = "panel_campaigns_hygiene", summary = "Reenvia os contatos da campanha à higienização", path = "/campaigns/{id}/hygiene", tag = "Campanhas",
    params(("id" = i64, Path, description = "Id da campanha")),
    responses((status = 200, description = "Contatos reenviados à higienização", body = Data<PanelCampaignView>)))]
pub(crate) async fn resubmit(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<Data<PanelCampaignView>>, ApiError> {
    let view = state
        .services
        .resubmit_hygiene(me.account_id(), &me.scope(), id)
        .await?;
    Ok(Data::json(view))
}

#[utoipa::path(post, operation_id = "panel_campaigns_validate", summary = "Aplica o resultado da higienização aos contatos da campanha", path = "/campaigns/{id}/validate", tag = "Campanhas",
    params(("id" = i64, Path, description = "Id da campanha")),
    responses((status = 200, description = "Relatório aplicado: contatos válidos/inválidos; `status` `aguardando_aprovacao`", body = Data<PanelCampaignView>),
        (status = 503, description = "`higienizacao_indisponivel`: o serviço não respondeu; nada mudou", body = crate::envelope::ErrorBody)))]
pub(crate) async fn validate(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<Data<PanelCampaignView>>, ApiError> {
    let view = state
        .services
        .validate_panel_campaign(me.account_id(), &me.scope(), id)
        .await?;
    Ok(Data::json(view))
}

#[utoipa::path(post, operation_id = "panel_campaigns_approve", summary = "Aprova a campanha e inicia o disparo", path = "/campaigns/{id}/approve", tag = "Campanhas",
    params(("id" = i64, Path, description = "Id da campanha")),
    responses((status = 200, description = "Aprovada; o disparo começa (ou fica `retida` com o disparo desligado)", body = Data<PanelCampaignView>)))]
pub(crate) async fn approve(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<Data<PanelCampaignView>>, ApiError> {
    let view = state
        .services
        .approve_panel_campaign(me.account_id(), &actor(&me), id)
        .await?;
    Ok(Data::json(view))
}

#[utoipa::path(post, operation_id = "panel_campaigns_dispatch", summary = "Dispara a campanha para os contatos válidos", path = "/campaigns/{id}/dispatch", tag = "Campanhas",
    params(("id" = i64, Path, description = "Id da campanha")),
    responses((status = 200, description = "(Re)disparada: contatos válidos liberados até o volume", body = Data<PanelCampaignView>)))]
pub(crate) async fn dispatch(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<Data<PanelCampaignView>>, ApiError> {
    let view = state
        .services
        .dispatch_panel_campaign(me.account_id(), &me.scope(), id)
        .await?;
    Ok(Data::json(view))
}

/// `POST /api/campaigns/{id}/test-send`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TestSendIn {
    /// Destination number with country code.
    #[schema(pattern = r"^\s*\+?[ ().-]*([0-9][ ().-]*){10,15}(@c\.us|@s\.whatsapp\.net)?\s*$")]
    destino: String,
}

#[utoipa::path(post, operation_id = "panel_campaigns_test_send", summary = "Envia uma mensagem de teste da campanha", path = "/campaigns/{id}/test-send", tag = "Campanhas",
    params(("id" = i64, Path, description = "Id da campanha")),
    request_body = TestSendIn,
    responses((status = 201, description = "`data`: a mensagem de teste (fora das estatísticas da campanha; conta no limite de 24 h do número)", body = crate::envelope::Data<crate::routes::message_out::MessageOut>)))]
pub(crate) async fn test_send(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<TestSendIn>,
) -> Result<
    (
        StatusCode,
        Json<crate::envelope::Data<crate::routes::message_out::MessageOut>>,
    ),
    ApiError,
> {
    let m = state
        .services
        .test_send_panel_campaign(
            me.account_id(),
            &me.scope(),
            id,
            &b.destino,
            (me.user.id, &me.author()),
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        crate::envelope::Data::json(crate::routes::message_out::MessageOut::from(&m)),
    ))
}

/// `GET /api/campaigns/{id}/preview` query.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct PreviewQuery {
    /// The contact's number, as in the CSV or in digits.
    #[param(min_length = 1, max_length = 40)]
    numero: String,
}

#[utoipa::path(get, operation_id = "panel_campaigns_preview", summary = "Mostra a mensagem de um contato da campanha", path = "/campaigns/{id}/preview", tag = "Campanhas",
    params(("id" = i64, Path, description = "Id da campanha"), PreviewQuery),
    responses(
        (status = 200, description = "`data`: a mensagem do contato como a campanha a envia (`texto`, `cabecalho`, `rodape`, `botoes`, `imagem`); `faltam` lista as colunas sem valor", body = crate::envelope::Data<services::panel_campaigns::ContactPreview>),
        (status = 404, description = "Campanha fora do escopo, ou número que não está na campanha", body = crate::envelope::ErrorBody)
    ))]
pub(crate) async fn preview(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
    q: Result<Query<PreviewQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<crate::envelope::Data<services::panel_campaigns::ContactPreview>>, ApiError> {
    let Query(q) = q.map_err(crate::extract::query_rejection)?;
    let p = state
        .services
        .panel_campaign_preview(me.account_id(), &me.scope(), id, &q.numero)
        .await?;
    Ok(crate::envelope::Data::json(p))
}

/// Filters of `GET /api/campaigns/{id}/contacts`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct ContactsQuery {
    /// `valid`, `invalid`, `unknown` or `pending` (not checked yet).
    #[param(pattern = "^(valid|invalid|unknown|pending)$")]
    status: Option<String>,
    /// The `next_cursor` of the previous page.
    #[param(pattern = "^[0-9]{1,18}$")]
    cursor: Option<String>,
    /// Page size, 1 to 1000 (default 100).
    limit: Option<i64>,
}

#[utoipa::path(get, operation_id = "panel_campaigns_contacts", summary = "Lista os contatos da campanha", path = "/campaigns/{id}/contacts", tag = "Campanhas",
    params(("id" = i64, Path, description = "Id da campanha"), ContactsQuery),
    responses((status = 200, description = "`data`: contatos com `higienizacao` e `motivo`; `has_more`, `next_cursor`", body = Page<storage::panel_campaigns::ContactRecord>)))]
pub(crate) async fn contacts(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
    q: Result<Query<ContactsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Page<storage::panel_campaigns::ContactRecord>>, ApiError> {
    let Query(q) = q.map_err(crate::extract::query_rejection)?;
    if let Some(s) = &q.status {
        if !["valid", "invalid", "unknown", "pending"].contains(&s.as_str()) {
            return Err(ApiError::invalid(
                "status",
                "status_invalido",
                "`status` deve ser valid, invalid, unknown ou pending.",
            ));
        }
    }
    let store = state.services.store();
    store
        .scoped_panel_campaign(me.account_id(), &me.scope(), id)
        .await?;
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    let rows = store
        .campaign_contacts(
            id,
            q.status.as_deref(),
            crate::extract::cursor(&q.cursor)?,
            limit + 1,
        )
        .await?;
    Ok(Json(crate::extract::cursor_page(
        rows,
        limit,
        |c| c.id,
        |c| c.clone(),
    )))
}

/// `GET /api/campaigns/{id}/report`: a panel campaign's KPIs.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PanelReportOut {
    /// Contacts in all.
    total: i64,
    /// Contacts the hygiene found valid.
    validos: i64,
    /// Found invalid.
    invalidos: i64,
    /// Unknown to the hygiene service.
    desconhecidos: i64,
    /// Released for sending (approved, within the volume).
    liberados: i64,
    /// Waiting or being sent.
    na_fila: i64,
    /// Accepted by the provider.
    enviados: i64,
    /// Delivered.
    entregues: i64,
    /// Read.
    lidos: i64,
    /// Failed.
    falhas: i64,
    /// Not sent on purpose.
    ignorados: i64,
    /// The counts per sending number.
    por_numero: Vec<storage::panel_campaigns::NumberCounts>,
}

/// A send of a panel campaign (`GET /api/campaigns/{id}/sends`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PanelSendOut {
    /// The recipient row.
    id: i64,
    /// The contact's number.
    numero: String,
    /// The contact's name.
    nome: Option<String>,
    /// The number that sent it.
    channel_id: Option<i64>,
    /// Its phone.
    numero_envio: Option<String>,
    /// The recipient's state.
    estado: String,
    /// The send's status, always present: `queued` (waiting for a number), `sending`,
    /// `sent`, `delivered`, `read`, `failed`, `skipped` (the values of the `status` filter).
    #[schema(example = "delivered")]
    status: String,
    /// The provider's message id.
    wamid: Option<String>,
    /// The provider's error.
    erro: Option<String>,
    /// Sent (ISO 8601).
    enviado_em: Option<String>,
    /// Delivered.
    entregue_em: Option<String>,
    /// Read.
    lido_em: Option<String>,
}

#[utoipa::path(get, operation_id = "panel_campaigns_report", summary = "Lê os indicadores da campanha", path = "/campaigns/{id}/report", tag = "Campanhas",
    params(("id" = i64, Path, description = "Id da campanha")),
    responses((status = 200, description = "`data`: KPIs `{total, validos, invalidos, desconhecidos, enviados, entregues, lidos, falhas, ignorados, na_fila, por_numero[]}`", body = Data<PanelReportOut>)))]
pub(crate) async fn report(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<Data<PanelReportOut>>, ApiError> {
    let view = state
        .services
        .panel_campaign_view(me.account_id(), &me.scope(), id)
        .await?;
    let per_number = state.services.store().campaign_number_counts(id).await?;
    Ok(Data::json(PanelReportOut {
        total: view.contacts.total,
        validos: view.contacts.valid,
        invalidos: view.contacts.invalid,
        desconhecidos: view.contacts.unknown,
        liberados: view.contacts.released,
        na_fila: view.stats.queued + view.stats.sending,
        enviados: view.stats.sent,
        entregues: view.stats.delivered,
        lidos: view.stats.read,
        falhas: view.stats.failed,
        ignorados: view.stats.skipped,
        por_numero: per_number,
    }))
}

/// Filters of `/sends` and `/sends/export`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct SendsQuery {
    /// `queued`, `sending`, `sent`, `delivered`, `read`, `failed`, `skipped`.
    #[param(pattern = "^(queued|sending|sent|delivered|read|failed|skipped)$")]
    status: Option<String>,
    /// Sending number id.
    numero_id: Option<i64>,
    /// Destination (digits with country code).
    #[param(pattern = r"^\s*\+?[ ().-]*([0-9][ ().-]*){10,15}(@c\.us|@s\.whatsapp\.net)?\s*$")]
    destino: Option<String>,
    /// The `next_cursor` of the previous page (not on the export).
    #[param(pattern = "^[0-9]{1,18}$")]
    cursor: Option<String>,
    /// Page size, 1 to 1000 (default 100; not on the export).
    limit: Option<i64>,
}

/// The statuses a campaign's sends may be filtered by (`status` of `/campaigns/{id}/sends`;
/// the web panel's filter offers the same).
pub(crate) const SEND_STATUSES: [&str; 7] = [
    "queued",
    "sending",
    "sent",
    "delivered",
    "read",
    "failed",
    "skipped",
];

fn send_filter(q: &SendsQuery) -> Result<SendFilter, ApiError> {
    if let Some(s) = &q.status {
        if !SEND_STATUSES.contains(&s.as_str()) {
            return Err(ApiError::invalid(
                "status",
                "status_invalido",
                "`status` deve ser queued, sending, sent, delivered, read, failed ou skipped.",
            ));
        }
    }
    let phone = q
        .destino
        .as_deref()
        .map(|d| engine::phone::Phone::parse("destino", d).map(|p| p.as_str().to_string()))
        .transpose()?;
    Ok(SendFilter {
        status: q.status.clone(),
        channel_id: q.numero_id,
        phone,
    })
}

#[utoipa::path(get, operation_id = "panel_campaigns_sends", summary = "Lista os envios da campanha", path = "/campaigns/{id}/sends", tag = "Campanhas",
    params(("id" = i64, Path, description = "Id da campanha"), SendsQuery),
    responses((status = 200, description = "`data`: envios (contato liberado e sua mensagem) em ordem; `has_more`, `next_cursor`", body = Page<PanelSendOut>)))]
pub(crate) async fn sends(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
    q: Result<Query<SendsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Page<PanelSendOut>>, ApiError> {
    let Query(q) = q.map_err(crate::extract::query_rejection)?;
    let f = send_filter(&q)?;
    let store = state.services.store();
    store
        .scoped_panel_campaign(me.account_id(), &me.scope(), id)
        .await?;
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    let rows = store
        .campaign_sends(id, &f, crate::extract::cursor(&q.cursor)?, limit + 1)
        .await?;
    Ok(Json(crate::extract::cursor_page(
        rows,
        limit,
        |r| r.id,
        send_json,
    )))
}

fn send_json(r: &SendRow) -> PanelSendOut {
    let iso = |t: Option<i64>| t.map(actors::time::iso);
    PanelSendOut {
        id: r.id,
        numero: r.phone.clone(),
        nome: r.name.clone(),
        channel_id: r.channel_id,
        numero_envio: r.channel_phone.clone(),
        estado: r.state.clone(),
        status: r.status.clone(),
        wamid: r.wamid.clone(),
        erro: r.error.clone(),
        enviado_em: iso(r.sent_at),
        entregue_em: iso(r.delivered_at),
        lido_em: iso(r.read_at),
    }
}

const EXPORT_HEADER: [&str; 12] = [
    "id",
    "numero",
    "nome",
    "channel_id",
    "numero_envio",
    "estado",
    "status",
    "wamid",
    "erro",
    "enviado_em",
    "entregue_em",
    "lido_em",
];

fn export_record(r: &SendRow) -> Vec<String> {
    use crate::routes::reports::inert;
    let s = |v: &Option<String>| inert(v.as_deref().unwrap_or_default());
    let t = |v: Option<i64>| v.map(actors::time::iso).unwrap_or_default();
    vec![
        r.id.to_string(),
        inert(&r.phone),
        s(&r.name),
        r.channel_id.map(|c| c.to_string()).unwrap_or_default(),
        s(&r.channel_phone),
        r.state.clone(),
        inert(&r.status),
        s(&r.wamid),
        s(&r.error),
        t(r.sent_at),
        t(r.delivered_at),
        t(r.read_at),
    ]
}

#[utoipa::path(get, operation_id = "panel_campaigns_sends_export", summary = "Exporta os envios da campanha em CSV", path = "/campaigns/{id}/sends/export", tag = "Campanhas",
    params(("id" = i64, Path, description = "Id da campanha"), SendsQuery),
    responses((status = 200, description = "CSV (`;`, BOM UTF-8) de todo o filtro, transmitido em partes; as mesmas colunas de `/sends`", content_type = "text/csv")))]
pub(crate) async fn export(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
    q: Result<Query<SendsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = q.map_err(crate::extract::query_rejection)?;
    let f = send_filter(&q)?;
    state
        .services
        .store()
        .scoped_panel_campaign(me.account_id(), &me.scope(), id)
        .await?;
    let (tx, rx) = tokio::sync::mpsc::channel(2 * crate::routes::reports::CHUNK_ROWS);
    let reader = state.clone();
    tokio::spawn(async move {
        reader
            .services
            .store()
            .stream_campaign_sends(id, &f, tx)
            .await;
    });
    Ok(crate::routes::reports::csv_response(
        &format!("campanha-{id}-envios.csv"),
        crate::routes::reports::csv_body(&EXPORT_HEADER, rx, export_record),
    ))
}

#[utoipa::path(get, operation_id = "panel_settings_dispatch", summary = "Lê o interruptor de disparo da conta", path = "/settings/dispatch", tag = "Campanhas",
    responses((status = 200, description = "`data`: `{habilitado, retidas[]}`: o interruptor de disparo da conta (DISPARO_ENABLED) e as campanhas retidas por ele", body = Data<DispatchSetting>)))]
pub(crate) async fn dispatch_setting(
    State(state): State<AppState>,
    me: PanelUser,
) -> Result<Json<Data<DispatchSetting>>, ApiError> {
    let s = state.services.dispatch_setting(me.account_id()).await?;
    Ok(Data::json(s))
}

/// `PUT /api/settings/dispatch`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DispatchIn {
    /// `false` halts every running campaign of the account at once (kill switch); `true`
    /// releases the held ones.
    habilitado: bool,
}

#[utoipa::path(put, operation_id = "panel_settings_dispatch_set", summary = "Liga ou desliga o disparo de campanhas da conta", path = "/settings/dispatch", tag = "Campanhas",
    request_body = DispatchIn,
    responses((status = 200, description = "`data`: `{habilitado, retidas[]}` depois da mudança; desligar para as campanhas em andamento antes da resposta", body = Data<DispatchSetting>)))]
pub(crate) async fn set_dispatch_setting(
    State(state): State<AppState>,
    me: PanelUser,
    ApiJson(b): ApiJson<DispatchIn>,
) -> Result<Json<Data<DispatchSetting>>, ApiError> {
    let s = state
        .services
        .set_dispatch_enabled(me.account_id(), b.habilitado)
        .await?;
    Ok(Data::json(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The document's `status` filter of the sends lists exactly [`SEND_STATUSES`].
    #[test]
    fn the_sends_filter_documents_the_statuses_it_takes() {
        let doc = serde_json::to_value(crate::panel::document()).unwrap();
        let params = doc["paths"]["/campaigns/{id}/sends"]["get"]["parameters"]
            .as_array()
            .unwrap();
        let status = params.iter().find(|p| p["name"] == "status").unwrap();
        assert_eq!(
            status["schema"]["pattern"],
            format!("^({})$", SEND_STATUSES.join("|"))
        );
    }
}
