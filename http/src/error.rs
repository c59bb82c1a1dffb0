//! The one place where errors become HTTP answers: `{"message": "<pt-BR>", "code":
//! "<stable_snake_case>", …details}` with the spec's status codes ("Errors").

use actors::error::Blame;
use actors::ActorError;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use engine::channel::HealthCode;
use serde_json::{json, Map, Value};

/// An error answer of the API.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 401: token missing or invalid.
    #[error("unauthorized")]
    Unauthorized,
    /// The bearer token existed and was revoked (401 `token_revoked`; issue 55).
    #[error("token revoked")]
    TokenRevoked,
    /// No route answers this path (404 `route_not_found`; issue 55): not a missing record.
    #[error("route not found")]
    RouteNotFound,
    /// 401: the panel's session is missing, expired, revoked or its user disabled.
    #[error("no valid session")]
    SessionInvalid,
    /// 401: `POST /api/login` with an unknown e-mail or a wrong password (one answer for both).
    #[error("login failed")]
    LoginFailed,
    /// 403: the panel user's role may not do this.
    #[error("role not allowed")]
    RoleForbidden {
        /// The roles that may.
        allowed: Vec<&'static str>,
        /// The caller's role.
        held: String,
    },
    /// 429: too many login attempts for this e-mail or from this address.
    #[error("too many login attempts")]
    TooManyAttempts {
        /// Seconds until an attempt is taken again.
        retry_after: u64,
    },
    /// 429 `muitas_recusas`: an address whose calls to an unauthenticated receiver were
    /// refused too often this minute (issue 46).
    #[error("too many refused calls")]
    TooManyRefusals {
        /// Seconds until the address is heard again.
        retry_after: u64,
    },
    /// 401: a provider webhook whose signature does not verify.
    #[error("invalid signature")]
    InvalidSignature,
    /// 403 with a pt-BR reason.
    #[error("forbidden")]
    Forbidden(String),
    /// 403: the token's access level is below what the action needs.
    #[error("insufficient level")]
    InsufficientLevel {
        /// Level the action needs.
        needed: engine::access::Level,
        /// Level the token has.
        held: engine::access::Level,
    },
    /// 404: not in this account (or does not exist).
    #[error("not found")]
    NotFound,
    /// 405.
    #[error("method not allowed")]
    MethodNotAllowed,
    /// 400: the body is not JSON.
    #[error("malformed body: {0}")]
    Malformed(String),
    /// 400: a `multipart/form-data` body whose framing cannot be read.
    #[error("malformed form: {0}")]
    MalformedForm(String),
    /// 413.
    #[error("payload too large")]
    PayloadTooLarge,
    /// 409: a request with the same idempotency key is still running.
    #[error("idempotency key in progress")]
    IdempotencyInProgress,
    /// 415.
    #[error("unsupported media type")]
    UnsupportedMediaType,
    /// 422: invalid data or a business rule.
    #[error("{message}")]
    Unprocessable {
        /// Stable code.
        code: &'static str,
        /// pt-BR text.
        message: String,
        /// Extra members of the body (`field`, `missing`, `problems`…).
        details: Map<String, Value>,
    },
    /// 403 or 409 from a rule of the runtime (`ActorError::Refused`), with its code.
    #[error("{message}")]
    Refused {
        /// 403 or 409.
        status: StatusCode,
        /// Stable code.
        code: &'static str,
        /// pt-BR text.
        message: String,
        /// Extra members of the body.
        details: Map<String, Value>,
    },
    /// 429: a sending limit is exhausted (pooled numbers none of which has room: no one time
    /// when room returns).
    #[error("limit exhausted")]
    LimitExhausted(String),
    /// 429 `throughput_exceeded`: a burst of 1:1 sends over the number's provider throughput
    /// (no slot within a second), with `Retry-After` and `retry_after` (s) (issue 54, D-128).
    #[error("throughput exceeded")]
    ThroughputExceeded {
        /// How long until a slot, ms.
        retry_after_ms: i64,
    },
    /// 429 `limite_24h_esgotado`: one 24 h limit is exhausted, with `Retry-After` at the time
    /// room returns and `scope`, `limit`, `remaining`, `reset_at` in the body (issue 49).
    #[error("quota exhausted")]
    QuotaExhausted(engine::limits::Quota),
    /// The provider refused or failed, answered by cause (D-107): 422 `provider_refused` (the
    /// request's fault), 429 `provider_rate_limited` with `Retry-After`, 502
    /// `provider_unavailable`, 504 `provider_timeout`; the body has `provider_code`,
    /// `retryable` and, when a message row was written, `message_id`.
    #[error("provider refused: {reason}")]
    ProviderRefused {
        /// The provider's reason.
        reason: String,
        /// The provider's error code.
        provider_code: Option<i64>,
        /// Whose fault it is.
        blame: Blame,
        /// The message written before the call, when there is one.
        message_id: Option<i64>,
        /// Extra members (e.g. which WABAs were already changed).
        details: Map<String, Value>,
    },
    /// 202: a message was handed to the provider and its outcome is unknown (it is never sent
    /// again; a status webhook or the reconciliation settles it). The send routes answer with
    /// the message itself; elsewhere the body names it (`message_id`).
    #[error("send in doubt")]
    InDoubt(i64),
    /// 503: busy or unavailable (`Retry-After: 1`).
    #[error("unavailable")]
    Unavailable,
    /// 503: the database is away or cannot write (issue 53, D-124; `Retry-After: 2`,
    /// `retryable: true`).
    #[error("database unavailable")]
    DatabaseUnavailable,
    /// 503: more requests at once than the server takes (`Retry-After: 1`).
    #[error("overloaded")]
    Overloaded,
    /// 503: the request took longer than `DISPARO_REQUEST_TIMEOUT_MS` (`Retry-After: 1`).
    #[error("request timed out")]
    TimedOut,
    /// 429: the token's request rate limit (`Retry-After` in seconds).
    #[error("rate limited")]
    RateLimited {
        /// Seconds until a request is allowed again.
        retry_after: u64,
    },
    /// 500: a broken invariant; logged once, opaque to the caller.
    #[error("internal: {0}")]
    Internal(String),
}

/// `Retry-After` of a `database_unavailable` answer, s: the probe sees a database back
/// within a second of its return (D-124).
pub const DATABASE_RETRY_AFTER_S: u64 = 2;

/// An error answer's status, code, message (pt-BR) and details.
type Parts = (StatusCode, &'static str, String, Map<String, Value>);

impl ApiError {
    /// A 422 for one field.
    pub fn invalid(field: &str, code: &'static str, message: impl Into<String>) -> Self {
        let mut details = Map::new();
        details.insert("field".into(), json!(field));
        ApiError::Unprocessable {
            code,
            message: message.into(),
            details,
        }
    }

    fn parts(&self) -> Parts {
        match self {
            ApiError::Unauthorized
            | ApiError::TokenRevoked
            | ApiError::SessionInvalid
            | ApiError::LoginFailed
            | ApiError::RoleForbidden { .. }
            | ApiError::InvalidSignature
            | ApiError::Forbidden(_)
            | ApiError::InsufficientLevel { .. } => self.access_parts(),
            ApiError::TooManyRefusals { .. }
            | ApiError::TooManyAttempts { .. }
            | ApiError::LimitExhausted(_)
            | ApiError::QuotaExhausted(_)
            | ApiError::ThroughputExceeded { .. }
            | ApiError::RateLimited { .. } => self.limit_parts(),
            ApiError::Refused { .. }
            | ApiError::NotFound
            | ApiError::RouteNotFound
            | ApiError::MethodNotAllowed
            | ApiError::Malformed(_)
            | ApiError::MalformedForm(_)
            | ApiError::IdempotencyInProgress
            | ApiError::PayloadTooLarge
            | ApiError::UnsupportedMediaType
            | ApiError::Unprocessable { .. } => self.request_parts(),
            ApiError::ProviderRefused { .. } => self.provider_parts(),
            ApiError::Unavailable
            | ApiError::DatabaseUnavailable
            | ApiError::InDoubt(_)
            | ApiError::Overloaded
            | ApiError::TimedOut
            | ApiError::Internal(_) => self.server_parts(),
        }
    }

    /// Who may call: credentials, sessions, roles and token levels (401, 403).
    fn access_parts(&self) -> Parts {
        let none = Map::new;
        match self {
            ApiError::Unauthorized => (
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "Token ausente ou inválido. Envie Authorization: Bearer svc_….".into(),
                none(),
            ),
            ApiError::TokenRevoked => (
                StatusCode::UNAUTHORIZED,
                "token_revoked",
                "Este token foi revogado. Peça a um administrador da conta um token novo.".into(),
                none(),
            ),
            ApiError::SessionInvalid => (
                StatusCode::UNAUTHORIZED,
                "sessao_invalida",
                "Sessão ausente, expirada ou encerrada. Entre de novo com POST /api/login e envie Authorization: Bearer ses_….".into(),
                none(),
            ),
            ApiError::LoginFailed => (
                StatusCode::UNAUTHORIZED,
                "login_invalido",
                "E-mail ou senha incorretos.".into(),
                none(),
            ),
            ApiError::RoleForbidden { allowed, held } => {
                let mut m = Map::new();
                m.insert("papeis_permitidos".into(), json!(allowed));
                m.insert("papel".into(), json!(held));
                (
                    StatusCode::FORBIDDEN,
                    "papel_insuficiente",
                    format!("Esta ação é de {}; seu papel é {held}.", allowed.join(" ou ")),
                    m,
                )
            }
            ApiError::InvalidSignature => (
                StatusCode::UNAUTHORIZED,
                "invalid_signature",
                "Assinatura X-Hub-Signature-256 ausente ou inválida.".into(),
                none(),
            ),
                        ApiError::Forbidden(m) => (StatusCode::FORBIDDEN, "forbidden", m.clone(), none()),
            ApiError::InsufficientLevel { needed, held } => {
                let mut m = Map::new();
                m.insert("required_level".into(), json!(needed.as_str()));
                m.insert("token_level".into(), json!(held.as_str()));
                (
                    StatusCode::FORBIDDEN,
                    "insufficient_level",
                    format!("Esta ação exige um token de nível {}; este token é de nível {}.", needed.as_str(), held.as_str()),
                    m,
                )
            }
            other => other.misrouted(),
        }
    }

    /// Rate limits and quotas (429).
    fn limit_parts(&self) -> Parts {
        let none = Map::new;
        match self {
            ApiError::TooManyRefusals { retry_after } => {
                let mut m = Map::new();
                m.insert("retry_after".into(), json!(retry_after));
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    "muitas_recusas",
                    format!("Chamadas recusadas demais deste endereço; tente de novo em {retry_after} s."),
                    m,
                )
            }
            ApiError::TooManyAttempts { retry_after } => {
                let mut m = Map::new();
                m.insert("retry_after".into(), json!(retry_after));
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    "muitas_tentativas",
                    format!("Tentativas de login demais; tente de novo em {retry_after} s."),
                    m,
                )
            }
            ApiError::LimitExhausted(m) => (
                StatusCode::TOO_MANY_REQUESTS,
                "limite_24h_esgotado",
                m.clone(),
                none(),
            ),
            ApiError::QuotaExhausted(q) => quota_parts(q),
            ApiError::ThroughputExceeded { retry_after_ms } => {
                let secs = retry_after_secs(*retry_after_ms);
                let mut m = Map::new();
                m.insert("retry_after".into(), json!(secs));
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    "throughput_exceeded",
                    format!("Envios demais de uma vez por este número, acima da vazão do provedor; tente de novo em {secs} s."),
                    m,
                )
            }
            ApiError::RateLimited { retry_after } => {
                let mut m = Map::new();
                m.insert("retry_after".into(), json!(retry_after));
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    "limite_de_requisicoes",
                    format!("Limite de requisições deste token atingido; tente de novo em {retry_after} s."),
                    m,
                )
            }
            other => other.misrouted(),
        }
    }

    /// The request itself: its route, body, state and rules (400, 404, 405, 409, 413, 415, 422).
    fn request_parts(&self) -> Parts {
        let none = Map::new;
        match self {
            ApiError::Refused {
                status,
                code,
                message,
                details,
            } => (*status, code, message.clone(), details.clone()),
            ApiError::NotFound => (
                StatusCode::NOT_FOUND,
                "not_found",
                "Registro não encontrado nesta conta.".into(),
                none(),
            ),
            ApiError::RouteNotFound => (
                StatusCode::NOT_FOUND,
                "route_not_found",
                "Nenhuma rota atende este método e caminho; confira a documentação em /docs.".into(),
                none(),
            ),
            ApiError::MethodNotAllowed => (
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "Método não permitido neste endereço.".into(),
                none(),
            ),
            ApiError::Malformed(d) => {
                let mut m = Map::new();
                m.insert("detail".into(), json!(d));
                (
                    StatusCode::BAD_REQUEST,
                    "invalid_json",
                    "O corpo da requisição não é um JSON válido.".into(),
                    m,
                )
            }
            ApiError::MalformedForm(_) => (
                StatusCode::BAD_REQUEST,
                "formulario_invalido",
                "O formulário multipart/form-data está malformado; envie cada campo com seu nome.".into(),
                none(),
            ),
            ApiError::IdempotencyInProgress => (StatusCode::CONFLICT, "idempotency_in_progress", "Uma requisição com esta Idempotency-Key ainda está em andamento; repita em instantes.".into(), none()),
            ApiError::PayloadTooLarge => (StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                "O corpo da requisição é grande demais.".into(),
                none(),
            ),
            ApiError::UnsupportedMediaType => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "Envie o corpo como JSON (Content-Type: application/json).".into(),
                none(),
            ),
            ApiError::Unprocessable {
                code,
                message,
                details,
            } => (
                StatusCode::UNPROCESSABLE_ENTITY,
                code,
                message.clone(),
                details.clone(),
            ),
            other => other.misrouted(),
        }
    }

    /// A provider refusal by its cause (D-107): 422, 429, 502 or 504, with `provider_code`,
    /// `retryable` and the message's id when one was written.
    fn provider_parts(&self) -> Parts {
        let ApiError::ProviderRefused {
            reason,
            provider_code,
            blame,
            message_id,
            details,
        } = self
        else {
            return self.misrouted();
        };
        let mut m = details.clone();
        m.insert("provider_code".into(), json!(provider_code));
        m.insert("retryable".into(), json!(blame.retryable()));
        if let Some(id) = message_id {
            m.insert("message_id".into(), json!(id));
        }
        let (status, code, message) = match blame {
            Blame::Request => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "provider_refused",
                format!("O provedor recusou a operação: {reason}"),
            ),
            Blame::Throttled { retry_after_ms } => {
                m.insert("retry_after".into(), json!(retry_after_ms.div_ceil(1000)));
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    "provider_rate_limited",
                    format!("O provedor limitou a taxa de envio; tente de novo após Retry-After: {reason}"),
                )
            }
            Blame::Upstream { .. } => (
                StatusCode::BAD_GATEWAY,
                "provider_unavailable",
                format!("O provedor falhou ao responder: {reason}"),
            ),
            Blame::Timeout => (
                StatusCode::GATEWAY_TIMEOUT,
                "provider_timeout",
                "O provedor não respondeu a tempo; a operação pode ter sido feita lá.".into(),
            ),
        };
        (status, code, message, m)
    }

    /// The provider's answers and our own state (202, 5xx).
    fn server_parts(&self) -> Parts {
        let none = Map::new;
        let retryable = || Map::from_iter([("retryable".to_string(), json!(true))]);
        match self {
            // Nothing was done (a send refused before the provider call): a retry can help.
            ApiError::Unavailable => (StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "Serviço ocupado no momento; tente novamente em instantes.".into(),
                retryable(),
            ),
            ApiError::InDoubt(id) => {
                let mut m = Map::new();
                m.insert("message_id".into(), json!(id));
                (
                    StatusCode::ACCEPTED,
                    "envio_em_duvida",
                    "O provedor não confirmou o envio a tempo; a mensagem não será enviada de novo e o status chegará pelo webhook.".into(),
                    m,
                )
            }
            ApiError::DatabaseUnavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                "database_unavailable",
                "O banco de dados está indisponível no momento; tente de novo em instantes (com a mesma Idempotency-Key, se usou uma).".into(),
                retryable(),
            ),
            ApiError::Overloaded => (
                StatusCode::SERVICE_UNAVAILABLE,
                "sobrecarregado",
                "O servidor está com requisições demais ao mesmo tempo; tente novamente em instantes.".into(),
                retryable(),
            ),
            ApiError::TimedOut => (
                StatusCode::SERVICE_UNAVAILABLE,
                "tempo_esgotado",
                "A requisição demorou demais e foi interrompida; tente novamente.".into(),
                none(),
            ),
            ApiError::Internal(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "Erro interno. A equipe foi avisada pelo log.".into(),
                none(),
            ),
            other => other.misrouted(),
        }
    }

    /// A variant `parts` sent to the wrong family (cannot happen: its match is exhaustive):
    /// answered as an internal error rather than a panic.
    fn misrouted(&self) -> Parts {
        tracing::error!(error = ?self, "error variant routed to the wrong family");
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "Erro interno. A equipe foi avisada pelo log.".into(),
            Map::new(),
        )
    }
}

impl ApiError {
    /// The status and the body this error answers with.
    pub fn status_and_body(&self) -> (StatusCode, Value) {
        let (status, code, message, details) = self.parts();
        // Every code the API answers is in the documents' enums (issue 18): a test that meets
        // one missing from `openapi::ERROR_CODES` fails here.
        debug_assert!(
            status.is_success()
                || status.is_server_error() && code == "internal"
                || crate::envelope::documented(status.as_u16(), code),
            "error code `{code}` ({status}) is missing from openapi::ERROR_CODES"
        );
        let mut body = Map::new();
        body.insert("message".into(), json!(message));
        body.insert("code".into(), json!(code));
        body.extend(details);
        (status, Value::Object(body))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(cause) = &self {
            tracing::error!(cause, "internal error");
        }
        let retry_after = match &self {
            ApiError::RateLimited { retry_after }
            | ApiError::TooManyAttempts { retry_after }
            | ApiError::TooManyRefusals { retry_after } => Some(*retry_after),
            ApiError::Unavailable | ApiError::Overloaded | ApiError::TimedOut => Some(1),
            ApiError::DatabaseUnavailable => Some(DATABASE_RETRY_AFTER_S),
            ApiError::ProviderRefused {
                blame: Blame::Throttled { retry_after_ms },
                ..
            } => Some(retry_after_ms.div_ceil(1000)),
            ApiError::QuotaExhausted(q) => q.retry_after_ms.map(retry_after_secs),
            ApiError::ThroughputExceeded { retry_after_ms } => {
                Some(retry_after_secs(*retry_after_ms))
            }
            _ => None,
        };
        let (status, body) = self.status_and_body();
        let mut resp = (status, Json(body)).into_response();
        if let Some(secs) = retry_after {
            resp.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(secs),
            );
        }
        resp
    }
}

/// Whole seconds until `ms` have passed (at least 1: a `Retry-After: 0` invites a retry that is
/// refused again).
fn retry_after_secs(ms: i64) -> u64 {
    (ms.max(0) as u64).div_ceil(1000).max(1)
}

/// A 24 h quota's answer: 429 `limite_24h_esgotado` naming the limit (`scope`: `number`,
/// `group`, `bm`), with `limit`, `remaining`, `reset_at` (ISO 8601, `null` when nothing counted
/// frees it) and `retry_after` (s).
fn quota_parts(q: &engine::limits::Quota) -> Parts {
    use engine::limits::QuotaScope;
    let whose = match q.scope {
        QuotaScope::Number => "deste número",
        QuotaScope::Group => "do grupo",
        QuotaScope::Bm => "do portfólio (BM) deste número",
    };
    let when = match q.reset_at {
        Some(t) => format!("; há folga de novo em {}", actors::time::iso(t)),
        None => String::new(),
    };
    let mut m = Map::new();
    m.insert("scope".into(), json!(q.scope.as_str()));
    m.insert("limit".into(), json!(q.limit));
    m.insert("remaining".into(), json!((q.limit - q.used).max(0)));
    m.insert("reset_at".into(), json!(q.reset_at.map(actors::time::iso)));
    m.insert(
        "retry_after".into(),
        json!(q.retry_after_ms.map(retry_after_secs)),
    );
    (
        StatusCode::TOO_MANY_REQUESTS,
        "limite_24h_esgotado",
        format!(
            "O limite de 24 horas de destinatários {whose} está esgotado ({} de {}){when}. Quem já recebeu nas últimas 24 h não conta de novo.",
            q.used, q.limit
        ),
        m,
    )
}

impl From<storage::StorageError> for ApiError {
    fn from(e: storage::StorageError) -> Self {
        ApiError::from(ActorError::from(e))
    }
}

/// A multipart form that cannot be read: 413 past the body limit, else 400 (a malformed form).
impl From<axum::extract::multipart::MultipartError> for ApiError {
    fn from(e: axum::extract::multipart::MultipartError) -> Self {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge
        } else {
            ApiError::MalformedForm(e.body_text())
        }
    }
}

impl From<engine::ValidationError> for ApiError {
    fn from(e: engine::ValidationError) -> Self {
        ApiError::invalid(e.field, e.code, e.message)
    }
}

impl From<ActorError> for ApiError {
    fn from(e: ActorError) -> Self {
        match e {
            ActorError::NotFound => ApiError::NotFound,
            ActorError::Validation(v) => v.into(),
            ActorError::WindowClosed => ApiError::Unprocessable {
                code: "janela_24h_fechada",
                message: "Texto livre só pode ser enviado dentro da janela de 24 horas aberta pela última mensagem do contato. Use um template.".into(),
                details: Map::new(),
            },
            ActorError::BusinessInitiatedRefused(HealthCode::LimitExhausted) => ApiError::LimitExhausted(
                "O limite de 24 horas de destinatários deste número está esgotado. Aguarde a janela liberar ou use outro número.".into(),
            ),
            ActorError::BusinessInitiatedRefused(code) => ApiError::Unprocessable {
                code: code.as_str(),
                message: format!(
                    "Envio iniciado pela empresa bloqueado neste número: {}. Respostas dentro da janela de 24 horas continuam permitidas.",
                    code.label()
                ),
                details: Map::new(),
            },
            ActorError::ProviderRefused { reason, code, blame, message_id, details, .. } => ApiError::ProviderRefused {
                reason,
                provider_code: code,
                blame,
                message_id,
                details: details.as_object().cloned().unwrap_or_default(),
            },
            ActorError::CredentialRefused(reason) => ApiError::Unprocessable {
                code: "credencial_invalida",
                message: format!("O provedor recusou a credencial: {reason}"),
                details: Map::new(),
            },
            ActorError::Conflict(what) => {
                // `what` is storage's own note (English, for the log): the client gets the
                // sentence in Portuguese (issue 17, honest errors).
                tracing::debug!(conflict = %what, "conflict with an existing record");
                ApiError::Unprocessable {
                    code: "conflict",
                    message: "Já existe um registro com esses dados (nome, número ou identificador já em uso nesta conta ou no provedor).".into(),
                    details: Map::new(),
                }
            }
                        ActorError::InvalidSignature => ApiError::InvalidSignature,
                        ActorError::Rejected { code, message, details } => ApiError::Unprocessable {
                code,
                message,
                details: details.as_object().cloned().unwrap_or_default(),
            },
            ActorError::Refused { status, code, message, details } => ApiError::Refused {
                status: StatusCode::from_u16(status).unwrap_or(StatusCode::CONFLICT),
                code,
                message,
                details: details.as_object().cloned().unwrap_or_default(),
            },
            ActorError::TemplateHasProblems(problems) => {
                let mut details = Map::new();
                details.insert("problems".into(), problems);
                ApiError::Unprocessable {
                    code: "template_has_problems",
                    message: "O template tem problemas a corrigir antes de ser enviado ao provedor.".into(),
                    details,
                }
            }
            ActorError::BadPayload(d) => ApiError::Malformed(d),
            ActorError::QuotaExhausted(quota) => ApiError::QuotaExhausted(quota),
            ActorError::ThroughputExceeded { retry_after_ms } => {
                ApiError::ThroughputExceeded { retry_after_ms }
            }
            ActorError::GroupExhausted => ApiError::LimitExhausted(
                "O limite de 24 horas do grupo está esgotado (ou nenhum número do grupo tem folga agora). Aguarde a janela liberar.".into(),
            ),
            ActorError::Unavailable => ApiError::Unavailable,
            ActorError::SendInDoubt(id) => ApiError::InDoubt(id),
            ActorError::Storage(e) if e.is_unavailable() => {
                tracing::warn!(error = %e, "database unavailable");
                ApiError::DatabaseUnavailable
            }
            ActorError::Storage(e) => ApiError::Internal(e.to_string()),
        }
    }
}
