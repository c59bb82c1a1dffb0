//! The panel's inventory (spec "Resources and their fields": BM, WABA, Phone number) and its
//! overview (`/state`, `/dashboard`, `/alertas`). Status, tier and quality come from the
//! provider by sync and are refused when sent (422 `campo_do_provedor`).

use super::PanelUser;
use crate::envelope::{Data, Deleted, List};
use crate::error::ApiError;
use crate::extract::{present, ApiJson, IdPath};
use crate::AppState;
use axum::extract::{DefaultBodyLimit, Multipart, Query, State};
use axum::http::StatusCode;
use axum::Json;
use engine::Secret;
use serde::Deserialize;
use serde_json::Value;
use services::panel::{BmFilter, BmInput, NumberInput, NumberView, PanelBm, PanelWaba, WabaInput};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(state_all))
        .routes(routes!(dashboard))
        .routes(routes!(sends_per_hour))
        .routes(routes!(alerts))
        .routes(routes!(list_bms, create_bm))
        .routes(routes!(get_bm, update_bm, delete_bm))
        .routes(routes!(sync_bm))
        .routes(routes!(list_wabas, create_waba))
        .routes(routes!(get_waba, update_waba, delete_waba))
        .routes(routes!(list_numbers, create_number))
        .routes(routes!(get_number, update_number, delete_number))
        .routes(routes!(number_guardrails, set_number_guardrails))
        .merge(
            OpenApiRouter::new()
                .routes(routes!(upload_photo))
                // The photo (5 MB at most) and the multipart framing.
                .layer(DefaultBodyLimit::max(
                    services::panel::PHOTO_MAX_BYTES + 64 * 1024,
                )),
        )
}

/// Refuses fields the provider owns (spec: status, tier and quality are not editable).
fn provider_owned(fields: &[(&str, bool)]) -> Result<(), ApiError> {
    match fields.iter().find(|(_, sent)| *sent) {
        Some((name, _)) => Err(ApiError::invalid(
            name,
            "campo_do_provedor",
            format!("`{name}` vem do provedor pela sincronização e não é editável."),
        )),
        None => Ok(()),
    }
}

// ---- overview --------------------------------------------------------------------------

#[utoipa::path(get, operation_id = "panel_state", summary = "Lê o estado completo do painel no escopo do usuário", path = "/state", tag = "Visão geral",
    responses((status = 200, description = "Estado completo no escopo do usuário: `{user, bms, wabas, numeros, clientes, templates, campanhas, tarefas, usuarios}`", body = Data<services::panel::PanelState>)))]
pub(crate) async fn state_all(
    State(state): State<AppState>,
    me: PanelUser,
) -> Result<Json<Data<services::panel::PanelState>>, ApiError> {
    let data = state
        .services
        .panel_state(me.account_id(), &me.scope(), &me.user, &me.account_slug)
        .await?;
    Ok(Data::json(data))
}

#[utoipa::path(get, operation_id = "panel_dashboard", summary = "Lê os indicadores de risco do painel", path = "/dashboard", tag = "Visão geral",
    responses((status = 200, description = "KPIs de risco no escopo: `{bms: {total, por_saude}, wabas: {total, por_situacao}, numeros: {total, por_qualidade, por_tier, por_saude, perto_do_limite}, tarefas_abertas: {total, por_prioridade}, alertas: {critica, atencao}}`", body = Data<services::panel::Dashboard>)))]
pub(crate) async fn dashboard(
    State(state): State<AppState>,
    me: PanelUser,
) -> Result<Json<Data<services::panel::Dashboard>>, ApiError> {
    let data = state
        .services
        .panel_dashboard(me.account_id(), &me.scope(), me.role.is_staff())
        .await?;
    Ok(Data::json(data))
}

/// Query of `GET /api/dashboard/envios-por-hora`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct HoursQuery {
    /// Hours back, 1 to 168 (default 24), ending with the current hour.
    #[param(minimum = 1, maximum = 168)]
    horas: Option<i64>,
}

#[utoipa::path(get, operation_id = "panel_sends_per_hour", summary = "Lista os envios por número e por hora", path = "/dashboard/envios-por-hora", tag = "Visão geral",
    params(HoursQuery),
    responses((status = 200, description = "Envios aceitos pelo provedor por número e hora, no escopo: `{horas: [ISO do início de cada hora], numeros: [{id, telefone, por_hora: [n por hora], total}]}`", body = Data<services::panel::HourlySends>)))]
pub(crate) async fn sends_per_hour(
    State(state): State<AppState>,
    me: PanelUser,
    q: Result<Query<HoursQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Data<services::panel::HourlySends>>, ApiError> {
    let Query(q) = q.map_err(crate::extract::query_rejection)?;
    let hours = q.horas.unwrap_or(24);
    if !(1..=168).contains(&hours) {
        return Err(ApiError::invalid(
            "horas",
            "horas_invalidas",
            "`horas` deve estar entre 1 e 168.",
        ));
    }
    let data = state
        .services
        .panel_sends_per_hour(me.account_id(), &me.scope(), hours)
        .await?;
    Ok(Data::json(data))
}

#[utoipa::path(get, operation_id = "panel_alerts", summary = "Lista os alertas ativos", path = "/alertas", tag = "Visão geral",
    responses((status = 200, description = "Alertas ativos no escopo, `critica` primeiro: `[{severidade, tipo, id, nome, codigo, mensagem, proxima_acao}]`", body = List<services::panel::Alert>)))]
pub(crate) async fn alerts(
    State(state): State<AppState>,
    me: PanelUser,
) -> Result<Json<List<services::panel::Alert>>, ApiError> {
    let data = state
        .services
        .panel_alerts(me.account_id(), &me.scope())
        .await?;
    Ok(List::json(data))
}

// ---- BMs -------------------------------------------------------------------------------

/// Filters of `GET /api/business-managers`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct BmQuery {
    /// Text in the name, the client's name or the Business ID.
    busca: Option<String>,
    /// `health_status`: `ok`, `banido`, `restrito`, `pagamento_pendente`, `credencial_invalida`, `nao_sincronizado`.
    status: Option<String>,
    /// BMs with a number of this quality (`GREEN`, `YELLOW`, `RED`).
    qualidade: Option<String>,
}

/// `POST /api/business-managers` and `PUT /api/business-managers/{id}` body (spec "BM").
/// On update, a blank (or absent) `access_token` or `app_secret` keeps the stored one.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BmIn {
    /// Not blank, 200 characters at most (trimmed).
    #[schema(pattern = r"\S")]
    nome: String,
    /// The client's name (created when new); or `cliente_id`. One of them on create.
    cliente: Option<String>,
    cliente_id: Option<i64>,
    /// The provider's Business ID.
    id_provider: Option<String>,
    /// System-user token (write-only).
    access_token: Option<String>,
    app_id: Option<String>,
    /// App secret (write-only).
    app_secret: Option<String>,
    /// Refused with `campo_do_provedor` (it comes from the provider); not in the document.
    #[schema(ignore)]
    status: Option<Value>,
    /// Refused with `campo_do_provedor`; not in the document.
    #[schema(ignore)]
    health_status: Option<Value>,
    /// Refused with `campo_do_provedor`; not in the document.
    #[schema(ignore)]
    tier: Option<Value>,
}

impl BmIn {
    fn input(self) -> Result<BmInput, ApiError> {
        provider_owned(&[
            ("status", self.status.is_some()),
            ("health_status", self.health_status.is_some()),
            ("tier", self.tier.is_some()),
        ])?;
        Ok(BmInput {
            name: self.nome,
            client_name: self.cliente,
            client_id: self.cliente_id,
            provider_business_id: self.id_provider,
            app_id: self.app_id,
            access_token: self.access_token.map(Secret::new),
            app_secret: self.app_secret.map(Secret::new),
        })
    }
}

#[utoipa::path(get, operation_id = "panel_bms_list", summary = "Lista os BMs com suas WABAs e números", path = "/business-managers", tag = "Inventário",
    params(BmQuery),
    responses((status = 200, description = "BMs no escopo com WABAs, números (saúde ao vivo) e resumo; tokens nunca voltam", body = List<PanelBm>)))]
pub(crate) async fn list_bms(
    State(state): State<AppState>,
    me: PanelUser,
    q: Result<Query<BmQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<List<PanelBm>>, ApiError> {
    let Query(q) = q.map_err(crate::extract::query_rejection)?;
    let bms = state
        .services
        .panel_bms(
            me.account_id(),
            &me.scope(),
            &BmFilter {
                busca: q.busca.filter(|b| !b.trim().is_empty()),
                status: q.status,
                qualidade: q.qualidade,
            },
        )
        .await?;
    Ok(List::json(bms))
}

#[utoipa::path(post, operation_id = "panel_bms_create", summary = "Cadastra um BM", path = "/business-managers", tag = "Inventário", request_body = BmIn,
    responses((status = 201, description = "BM criado; com id_provider e access_token, a credencial é confirmada no provedor antes", body = Data<PanelBm>)))]
pub(crate) async fn create_bm(
    State(state): State<AppState>,
    me: PanelUser,
    ApiJson(b): ApiJson<BmIn>,
) -> Result<(StatusCode, Json<Data<PanelBm>>), ApiError> {
    if !me.scope().is_all() {
        return Err(ApiError::Forbidden(
            "Seu usuário vê só alguns BMs; um Admin cria BMs novos e os inclui no seu escopo."
                .into(),
        ));
    }
    let bm = state
        .services
        .panel_create_bm(me.account_id(), b.input()?)
        .await?;
    Ok((StatusCode::CREATED, Data::json(bm)))
}

#[utoipa::path(get, operation_id = "panel_bms_get", summary = "Lê um BM com suas WABAs e números", path = "/business-managers/{id}", tag = "Inventário",
    params(("id" = i64, Path, description = "Id do BM")),
    responses((status = 200, description = "BM com WABAs, números e resumo", body = Data<PanelBm>)))]
pub(crate) async fn get_bm(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<Data<PanelBm>>, ApiError> {
    let bm = state
        .services
        .panel_bm(me.account_id(), &me.scope(), id)
        .await?;
    Ok(Data::json(bm))
}

#[utoipa::path(put, operation_id = "panel_bms_update", summary = "Altera um BM", path = "/business-managers/{id}", tag = "Inventário",
    params(("id" = i64, Path, description = "Id do BM")), request_body = BmIn,
    responses((status = 200, description = "BM alterado; token e secret em branco mantêm os guardados", body = Data<PanelBm>)))]
pub(crate) async fn update_bm(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<BmIn>,
) -> Result<Json<Data<PanelBm>>, ApiError> {
    let bm = state
        .services
        .panel_update_bm(me.account_id(), &me.scope(), id, b.input()?)
        .await?;
    Ok(Data::json(bm))
}

#[utoipa::path(delete, operation_id = "panel_bms_delete", summary = "Remove um BM", path = "/business-managers/{id}", tag = "Inventário",
    params(("id" = i64, Path, description = "Id do BM")),
    responses((status = 200, description = "BM removido; suas WABAs e números ficam, sem o vínculo", body = Data<Deleted>)))]
pub(crate) async fn delete_bm(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<Data<Deleted>>, ApiError> {
    state
        .services
        .panel_delete_bm(me.account_id(), &me.scope(), id)
        .await?;
    Ok(Deleted::json(id))
}

#[utoipa::path(post, operation_id = "panel_bms_sync", summary = "Sincroniza o BM com o provedor", path = "/business-managers/{id}/sync", tag = "Inventário",
    params(("id" = i64, Path, description = "Id do BM")),
    responses((status = 200, description = "`data`: `{sync: {created_numbers, missing_numbers, wabas, templates_imported, photos, health_status, good}, bm}`", body = Data<PanelBmSyncedOut>)))]
pub(crate) async fn sync_bm(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<Data<PanelBmSyncedOut>>, ApiError> {
    let (sync, bm) = state
        .services
        .panel_sync_bm(me.account_id(), &me.scope(), id)
        .await?;
    Ok(Data::json(PanelBmSyncedOut { sync, bm }))
}

/// `POST /api/business-managers/{id}/sync`'s answer.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct PanelBmSyncedOut {
    /// What the sync found.
    sync: services::accounts::BmSyncResult,
    /// The BM after it.
    bm: PanelBm,
}

// ---- WABAs -----------------------------------------------------------------------------

/// `POST /api/wabas` body (D-056): a WABA of a BM, proven at the provider.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WabaIn {
    /// The provider's WABA id.
    id_provider: String,
    /// The BM (disparo id) whose business owns it.
    bm_id: i64,
    nome: Option<String>,
    cliente_id: Option<i64>,
}

/// `PUT /api/wabas/{id}` body: the operator's `status` (`ativa`, `inativa`), `cliente_id`
/// (null unlinks) and `nome`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WabaPatchIn {
    status: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>)]
    cliente_id: Option<Option<i64>>,
    nome: Option<String>,
    /// Refused: from the provider.
    #[schema(value_type = Option<String>)]
    standing: Option<Value>,
    /// Refused: from the provider.
    #[schema(value_type = Option<String>)]
    tier: Option<Value>,
    /// Refused: from the provider.
    #[schema(value_type = Option<String>)]
    qualidade: Option<Value>,
}

#[utoipa::path(get, operation_id = "panel_wabas_list", summary = "Lista as WABAs com seus números", path = "/wabas", tag = "Inventário",
    responses((status = 200, description = "WABAs no escopo com seus números", body = List<PanelWaba>)))]
pub(crate) async fn list_wabas(
    State(state): State<AppState>,
    me: PanelUser,
) -> Result<Json<List<PanelWaba>>, ApiError> {
    let s = state
        .services
        .panel_state(me.account_id(), &me.scope(), &me.user, &me.account_slug)
        .await?;
    Ok(List::json(s.wabas))
}

#[utoipa::path(post, operation_id = "panel_wabas_create", summary = "Registra uma WABA de um BM", path = "/wabas", tag = "Inventário", request_body = WabaIn,
    responses((status = 201, description = "WABA registrada (o provedor confirmou que é do BM)", body = Data<PanelWaba>)))]
pub(crate) async fn create_waba(
    State(state): State<AppState>,
    me: PanelUser,
    ApiJson(b): ApiJson<WabaIn>,
) -> Result<(StatusCode, Json<Data<PanelWaba>>), ApiError> {
    let w = state
        .services
        .panel_create_waba(
            me.account_id(),
            &me.scope(),
            WabaInput {
                provider_waba_id: b.id_provider.trim().to_string(),
                bm_id: b.bm_id,
                name: b.nome,
                client_id: b.cliente_id,
            },
        )
        .await?;
    Ok((StatusCode::CREATED, Data::json(w)))
}

#[utoipa::path(get, operation_id = "panel_wabas_get", summary = "Lê uma WABA com seus números", path = "/wabas/{id}", tag = "Inventário",
    params(("id" = i64, Path, description = "Id da WABA (do disparo)")),
    responses((status = 200, description = "WABA com seus números", body = Data<PanelWaba>)))]
pub(crate) async fn get_waba(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<Data<PanelWaba>>, ApiError> {
    let w = state
        .services
        .panel_waba(me.account_id(), &me.scope(), id)
        .await?;
    Ok(Data::json(w))
}

#[utoipa::path(put, operation_id = "panel_wabas_update", summary = "Altera uma WABA", path = "/wabas/{id}", tag = "Inventário",
    params(("id" = i64, Path, description = "Id da WABA")), request_body = WabaPatchIn,
    responses((status = 200, description = "WABA alterada", body = Data<PanelWaba>)))]
pub(crate) async fn update_waba(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<WabaPatchIn>,
) -> Result<Json<Data<PanelWaba>>, ApiError> {
    provider_owned(&[
        ("standing", b.standing.is_some()),
        ("tier", b.tier.is_some()),
        ("qualidade", b.qualidade.is_some()),
    ])?;
    let w = state
        .services
        .panel_update_waba(
            me.account_id(),
            &me.scope(),
            id,
            b.status,
            b.cliente_id,
            b.nome,
        )
        .await?;
    Ok(Data::json(w))
}

#[utoipa::path(delete, operation_id = "panel_wabas_delete", summary = "Remove uma WABA", path = "/wabas/{id}", tag = "Inventário",
    params(("id" = i64, Path, description = "Id da WABA")),
    responses((status = 200, description = "WABA removida", body = Data<Deleted>)))]
pub(crate) async fn delete_waba(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<Data<Deleted>>, ApiError> {
    state
        .services
        .panel_delete_waba(me.account_id(), &me.scope(), id)
        .await?;
    Ok(Deleted::json(id))
}

// ---- numbers ---------------------------------------------------------------------------

/// `POST /api/phone-numbers` body (D-056): a number of a registered WABA, connected with its
/// BM's credential.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NumberIn {
    /// The provider's phone number id: digits, at most 32.
    #[schema(pattern = r"^\s*[0-9]{1,32}\s*$")]
    phone_number_id: String,
    /// The WABA (disparo id).
    waba_id: i64,
    nome_exibicao: Option<String>,
    cliente_id: Option<i64>,
}

/// `PUT /api/phone-numbers/{id}` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NumberPatchIn {
    nome_exibicao: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>)]
    cliente_id: Option<Option<i64>>,
    /// Refused: from the provider.
    #[schema(value_type = Option<String>)]
    status: Option<Value>,
    /// Refused: from the provider.
    #[schema(value_type = Option<String>)]
    qualidade: Option<Value>,
    /// Refused: from the provider.
    #[schema(value_type = Option<String>)]
    tier: Option<Value>,
}

#[utoipa::path(get, operation_id = "panel_numbers_list", summary = "Lista os números com sua saúde", path = "/phone-numbers", tag = "Inventário",
    responses((status = 200, description = "Números no escopo com saúde ao vivo (os mesmos canais de /api/v1/channels)", body = List<NumberView>)))]
pub(crate) async fn list_numbers(
    State(state): State<AppState>,
    me: PanelUser,
) -> Result<Json<List<NumberView>>, ApiError> {
    let s = state
        .services
        .panel_state(me.account_id(), &me.scope(), &me.user, &me.account_slug)
        .await?;
    Ok(List::json(s.numeros))
}

#[utoipa::path(post, operation_id = "panel_numbers_create", summary = "Conecta um número de uma WABA", path = "/phone-numbers", tag = "Inventário", request_body = NumberIn,
    responses((status = 201, description = "Número conectado como canal da conta (o provedor confirmou que é da WABA)", body = Data<NumberView>)))]
pub(crate) async fn create_number(
    State(state): State<AppState>,
    me: PanelUser,
    ApiJson(b): ApiJson<NumberIn>,
) -> Result<(StatusCode, Json<Data<NumberView>>), ApiError> {
    let n = state
        .services
        .panel_create_number(
            me.account_id(),
            &me.scope(),
            NumberInput {
                phone_number_id: b.phone_number_id,
                waba_id: b.waba_id,
                display_name: b.nome_exibicao,
                client_id: b.cliente_id,
            },
        )
        .await?;
    Ok((StatusCode::CREATED, Data::json(n)))
}

#[utoipa::path(get, operation_id = "panel_numbers_get", summary = "Lê um número com sua saúde", path = "/phone-numbers/{id}", tag = "Inventário",
    params(("id" = i64, Path, description = "Id do número (id do canal)")),
    responses((status = 200, description = "Número com saúde ao vivo", body = Data<NumberView>)))]
pub(crate) async fn get_number(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<Data<NumberView>>, ApiError> {
    let n = state
        .services
        .panel_number(me.account_id(), &me.scope(), id)
        .await?;
    Ok(Data::json(n))
}

#[utoipa::path(put, operation_id = "panel_numbers_update", summary = "Altera o nome de exibição ou o cliente do número", path = "/phone-numbers/{id}", tag = "Inventário",
    params(("id" = i64, Path, description = "Id do número")), request_body = NumberPatchIn,
    responses((status = 200, description = "Número alterado", body = Data<NumberView>)))]
pub(crate) async fn update_number(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<NumberPatchIn>,
) -> Result<Json<Data<NumberView>>, ApiError> {
    provider_owned(&[
        ("status", b.status.is_some()),
        ("qualidade", b.qualidade.is_some()),
        ("tier", b.tier.is_some()),
    ])?;
    let n = state
        .services
        .panel_update_number(
            me.account_id(),
            &me.scope(),
            id,
            b.nome_exibicao,
            b.cliente_id,
        )
        .await?;
    Ok(Data::json(n))
}

#[utoipa::path(delete, operation_id = "panel_numbers_delete", summary = "Remove um número sem histórico", path = "/phone-numbers/{id}", tag = "Inventário",
    params(("id" = i64, Path, description = "Id do número")),
    responses((status = 200, description = "Número removido (só sem histórico)", body = Data<Deleted>)))]
pub(crate) async fn delete_number(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<Data<Deleted>>, ApiError> {
    state
        .services
        .panel_delete_number(me.account_id(), &me.scope(), id)
        .await?;
    Ok(Deleted::json(id))
}

/// The multipart form of `POST /api/phone-numbers/{id}/foto`.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub(crate) struct PhotoForm {
    /// JPEG or PNG, at most 5 MB.
    #[schema(value_type = String, format = Binary)]
    foto: Vec<u8>,
}

#[utoipa::path(post, operation_id = "panel_numbers_photo", summary = "Troca a foto de perfil do número", path = "/phone-numbers/{id}/foto", tag = "Inventário",
    params(("id" = i64, Path, description = "Id do número")),
    request_body(content = PhotoForm, content_type = "multipart/form-data"),
    responses((status = 200, description = "Foto de perfil trocada no provedor; `foto_url` atualizada", body = Data<NumberView>)))]
pub(crate) async fn upload_photo(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Result<Json<Data<NumberView>>, ApiError> {
    let mut multipart = multipart.map_err(|_| {
        ApiError::invalid(
            "foto",
            "foto_invalida",
            "Envie a foto como multipart/form-data no campo `foto`.",
        )
    })?;
    let mut photo = None;
    while let Some(field) = multipart.next_field().await? {
        if field.name() == Some("foto") {
            photo = Some(field.bytes().await?.to_vec());
        }
    }
    let photo = photo.ok_or_else(|| {
        ApiError::invalid("foto", "foto_invalida", "O campo `foto` é obrigatório.")
    })?;
    let n = state
        .services
        .panel_number_photo(me.account_id(), &me.scope(), id, photo)
        .await?;
    Ok(Data::json(n))
}

#[utoipa::path(get, operation_id = "panel_numbers_guardrails", summary = "Lê os limites de envio do número", path = "/phone-numbers/{id}/guardrails", tag = "Inventário",
    params(("id" = i64, Path, description = "Id do número")),
    responses((status = 200, description = "Guardrails do número e o limite de hoje (como `GET /api/v1/channels/{id}/guardrails`)", body = crate::envelope::Data<crate::routes::guardrails::GuardrailsOut>)))]
pub(crate) async fn number_guardrails(
    state: State<AppState>,
    me: PanelUser,
    auth: crate::extract::Auth,
    IdPath(id): IdPath,
) -> Result<Json<crate::envelope::Data<crate::routes::guardrails::GuardrailsOut>>, ApiError> {
    // The user's scope first: the account API's handler checks the account only.
    state
        .services
        .store()
        .scoped_channel(me.account_id(), &me.scope(), id)
        .await?;
    crate::routes::guardrails::read(state, auth, IdPath(id)).await
}

#[utoipa::path(patch, operation_id = "panel_numbers_guardrails_update", summary = "Altera os limites de envio do número", path = "/phone-numbers/{id}/guardrails", tag = "Inventário",
    params(("id" = i64, Path, description = "Id do número")),
    request_body = crate::routes::guardrails::PatchIn,
    responses((status = 200, description = "Guardrails alterados (como `PATCH /api/v1/channels/{id}/guardrails`)", body = crate::envelope::Data<crate::routes::guardrails::GuardrailsOut>)))]
pub(crate) async fn set_number_guardrails(
    state: State<AppState>,
    me: PanelUser,
    auth: crate::extract::Auth,
    IdPath(id): IdPath,
    body: ApiJson<crate::routes::guardrails::PatchIn>,
) -> Result<Json<crate::envelope::Data<crate::routes::guardrails::GuardrailsOut>>, ApiError> {
    state
        .services
        .store()
        .scoped_channel(me.account_id(), &me.scope(), id)
        .await?;
    crate::routes::guardrails::update(state, auth, IdPath(id), body).await
}
