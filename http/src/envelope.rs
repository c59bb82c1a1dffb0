//! The envelopes every answer of the three documents uses (`{"data": …}`, pages, lists,
//! JSON-RPC, the error body) and the vocabulary of error codes by status. A leaf: handlers,
//! the extractors and the one error mapping use it; [`crate::openapi`] composes the documents
//! from them (issue 51: no module imports another in a circle).

use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

/// The success envelope of one record or result: `{"data": T}` (spec "Resources and their
/// fields"). Handlers answer with it, so the document's schema and the wire are one type.
#[derive(Debug, Serialize, ToSchema)]
pub struct Data<T> {
    /// The record or result.
    pub data: T,
}

impl<T> Data<T> {
    /// `Json({"data": data})`.
    pub fn json(data: T) -> Json<Data<T>> {
        Json(Data { data })
    }
}

/// What a `DELETE` answers: `{"data": {"deleted": true, "id"}}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Deleted {
    /// Always true.
    pub deleted: bool,
    /// The removed record's id.
    pub id: i64,
}

impl Deleted {
    /// `Json({"data": {"deleted": true, "id": id}})`.
    pub fn json(id: i64) -> Json<Data<Deleted>> {
        Data::json(Deleted { deleted: true, id })
    }
}

/// The success envelope of a list that is not paged: `{"data": [T]}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct List<T> {
    /// The records, in the order the operation states.
    pub data: Vec<T>,
}

impl<T> List<T> {
    /// `Json({"data": data})`.
    pub fn json(data: Vec<T>) -> Json<List<T>> {
        Json(List { data })
    }
}

/// A keyset page: `{"data": [T], "has_more", "next_cursor"}` (pass `next_cursor` as
/// `cursor` for the next page; built by [`crate::extract::cursor_page`]).
#[derive(Debug, Serialize, ToSchema)]
pub struct Page<T> {
    /// The records, in the order the operation states.
    pub data: Vec<T>,
    /// Whether more records follow this page.
    pub has_more: bool,
    /// The cursor of the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

/// A JSON-RPC 2.0 answer (`POST /mcp`): `result` on success, `error` otherwise.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct JsonRpcResponse {
    /// Always `2.0`.
    jsonrpc: String,
    /// The request's id, as sent (any JSON value; `null` when it could not be read).
    #[schema(value_type = serde_json::Value)]
    id: (),
    /// The method's result (absent on error).
    #[schema(value_type = Option<Object>)]
    result: Option<()>,
    /// Absent on success.
    error: Option<JsonRpcError>,
}

/// A JSON-RPC 2.0 error (`JsonRpcResponse.error`).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct JsonRpcError {
    /// `-32700` (parse), `-32600` (invalid request), `-32601` (method not found), `-32602`
    /// (invalid params), or a tool's error.
    code: i64,
    /// What went wrong (pt-BR for the gateway's own errors).
    message: String,
}

/// The error envelope (spec "Errors"): a pt-BR `message`, a stable `code`, and details such
/// as `field`, `missing` or `problems` depending on the error.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ErrorBody {
    /// Human-readable message in pt-BR.
    message: String,
    /// Stable snake_case identifier.
    code: String,
    /// The field at fault, for validation errors.
    field: Option<String>,
}

/// The error answers the documents use: `(status, shared response name, description)`. Each
/// is one definition in `components.responses`, whose schema (`Error<status>`) is the error
/// envelope with `code` an enum of that status's codes ([`ERROR_CODES`]).
pub const ERROR_RESPONSES: &[(u16, &str, &str)] = &[
    (400, "BadRequest", "O corpo não é JSON válido (`invalid_json`) ou o formulário multipart está malformado (`formulario_invalido`)"),
    (401, "Unauthorized", "Sem credencial válida (token ou sessão ausente, inválido, revogado ou expirado)"),
    (403, "Forbidden", "A credencial não pode fazer isto (nível do token, papel do usuário ou uma regra)"),
    (404, "NotFound", "Não existe ou não é desta conta (ou do escopo do usuário)"),
    (409, "Conflict", "Conflito com o estado do recurso ou com um pedido em andamento"),
    (413, "PayloadTooLarge", "Corpo maior que o limite"),
    (415, "UnsupportedMediaType", "Corpo sem o Content-Type esperado"),
    (422, "Unprocessable", "Dados inválidos ou uma regra de negócio recusou; `field` nomeia o campo quando é um"),
    (429, "TooManyRequests", "Limite de requisições ou de envios esgotado, ou o provedor limitou a taxa (`provider_rate_limited`); `Retry-After` quando se sabe"),
    (502, "BadGateway", "`provider_unavailable`: o provedor falhou (5xx, inalcançável ou resposta ilegível); `retryable` diz se tentar de novo pode dar certo, `provider_code` traz o código dele"),
    (503, "Unavailable", "Servidor ocupado ou pedido demorado demais; tente de novo após `Retry-After`"),
    (504, "GatewayTimeout", "`provider_timeout`: o provedor não respondeu a tempo; a operação pode ter sido feita lá (`retryable`: true)"),
];

/// Every `code` an error answer carries, by status (the health codes of
/// `engine::channel::HealthCode` are 422 codes too: a business-initiated send refused by the
/// number's health). In debug builds [`crate::error::ApiError`] checks each answer against
/// it, so a test that meets an error missing here fails; the documents' `Error<status>`
/// schemas list them as `code` enums.
pub const ERROR_CODES: &[(u16, &[&str])] = &[
    (400, &["formulario_invalido", "invalid_json"]),
    (
        401,
        &[
            "invalid_signature",
            "login_invalido",
            "sessao_invalida",
            "token_revoked",
            "unauthorized",
        ],
    ),
    (
        403,
        &[
            "aprovacao_propria",
            "forbidden",
            "insufficient_level",
            "papel_insuficiente",
        ],
    ),
    (404, &["not_found", "route_not_found"]),
    (405, &["method_not_allowed"]),
    (
        409,
        &[
            "aprovacao_pendente",
            "disparo_desligado",
            "grupo_com_campanhas",
            "higienizacao_em_andamento",
            "higienizacao_falhou",
            "idempotency_in_progress",
            "invalid_state",
            "not_failed",
            "template_em_uso",
        ],
    ),
    (413, &["payload_too_large"]),
    (415, &["unsupported_media_type"]),
    (
        422,
        &[
            "ambiguous_content",
            "ambiguous_recipient",
            "ambiguous_template",
            "assinaturas_demais",
            "bm_existente",
            "bm_invalido",
            "bm_sem_app_id",
            "bm_sem_id_provider",
            "cadastro_indisponivel",
            "campaign_closed",
            "campanha_disparada",
            "campanha_do_painel",
            "campanha_em_andamento",
            "campo_do_provedor",
            "celula_longa",
            "celulas_demais",
            "cliente_com_usuarios",
            "cliente_existente",
            "cliente_invalido",
            "cliente_obrigatorio",
            "cnpj_invalido",
            "coluna_ausente",
            "coluna_desconhecida",
            "coluna_longa",
            "colunas_demais",
            "conflict",
            "contatos_demais",
            "contatos_invalidos",
            "credencial_invalida",
            "csv_invalido",
            "duplicate_channel",
            "email_em_uso",
            "email_invalido",
            "empty_group",
            "foto_invalida",
            "header_example_missing",
            "header_not_media",
            "horas_invalidas",
            "id_provider_invalido",
            "idempotency_key_reused",
            "imagem_url_invalida",
            "in_other_group",
            "invalid_batch",
            "invalid_caption",
            "invalid_category",
            "invalid_cc",
            "invalid_channels",
            "invalid_code",
            "invalid_cursor",
            "invalid_date",
            "invalid_field",
            "invalid_filter",
            "invalid_header_example",
            "invalid_header_media",
            "invalid_id",
            "invalid_idempotency_key",
            "invalid_kind",
            "invalid_language",
            "invalid_level",
            "invalid_limit",
            "invalid_media_type",
            "invalid_media_url",
            "invalid_method",
            "invalid_mode",
            "invalid_name",
            "invalid_overlap",
            "invalid_param",
            "invalid_phone",
            "invalid_pin",
            "invalid_provider_name",
            "invalid_query",
            "invalid_state",
            "invalid_template_name",
            "invalid_text",
            "invalid_url",
            "invalid_var_map",
            "invalid_verified_name",
            "invalid_visibility",
            "invalid_weight",
            "janela_24h_fechada",
            "media_too_large",
            "media_unreachable",
            "missing_vars",
            "nenhum_numero_elegivel",
            "no_credential",
            "nome_longo",
            "nome_obrigatorio",
            "not_official",
            "not_paused",
            "not_prepared",
            "numero_com_historico",
            "numero_sem_bm",
            "out_of_range",
            "pagamento_bloqueado",
            "papel_invalido",
            "prioridade_invalida",
            "private_media_url",
            "private_url",
            "provedor_alternativo",
            "provider_refused",
            "provider_url_not_allowed",
            "qualidade_red",
            "recipients_need_dry_run",
            "registro_recusado",
            "remetente_ambiguo",
            "required",
            "schedule_needs_start",
            "sem_contatos_validos",
            "senha_fraca",
            "status_invalido",
            "template_has_problems",
            "template_missing",
            "titulo_obrigatorio",
            "ultimo_admin",
            "unknown_category",
            "unknown_engine",
            "unknown_event",
            "unknown_template",
            "unsupported_media",
            "variaveis_ausentes",
            "variaveis_invalidas",
            "vinculo_invalido",
            "volume_invalido",
            "waba_banida",
            "waba_com_numeros",
            "waba_invalida",
            "waba_sem_bm",
        ],
    ),
    (
        429,
        &[
            "limite_24h_esgotado",
            "limite_de_requisicoes",
            "limite_de_testes",
            "muitas_recusas",
            "muitas_tentativas",
            "provider_rate_limited",
            "throughput_exceeded",
        ],
    ),
    (502, &["provider_unavailable"]),
    (
        503,
        &[
            "database_unavailable",
            "higienizacao_indisponivel",
            "sobrecarregado",
            "tempo_esgotado",
            "unavailable",
        ],
    ),
    (504, &["provider_timeout"]),
];

/// The codes of `status` ([`ERROR_CODES`], with the health codes for 422), sorted.
pub fn codes_of(status: u16) -> Vec<&'static str> {
    let mut codes: Vec<&'static str> = ERROR_CODES
        .iter()
        .filter(|(s, _)| *s == status)
        .flat_map(|(_, c)| c.iter().copied())
        .collect();
    if status == 422 {
        codes.extend(engine::channel::HealthCode::ALL.iter().map(|c| c.as_str()));
    }
    codes.sort_unstable();
    codes.dedup();
    codes
}

/// Whether `code` is documented for `status` (the debug check of every error answer).
pub fn documented(status: u16, code: &str) -> bool {
    (status == 422
        && engine::channel::HealthCode::ALL
            .iter()
            .any(|c| c.as_str() == code))
        || ERROR_CODES
            .iter()
            .any(|(s, codes)| *s == status && codes.contains(&code))
}
