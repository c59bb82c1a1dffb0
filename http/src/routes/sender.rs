//! The public sender under `/api/v1` (spec `panel-api.md` "Public v1", issue 22, D-060):
//! `GET /numbers`, `GET /templates`, `POST /messages`, `GET /messages/{id}` for a per-user
//! `pub_…` token. The last three share their paths with the account API: the account's
//! handlers hand a request with a sender token to these functions. Its OpenAPI document is
//! [`document`], served at `GET /api/v1/sender/openapi.json` and shown at `/docs/remetente`.

use crate::envelope::{Data, List};
use crate::error::ApiError;
use crate::extract::{parse_json, Auth};
use crate::routes::message_out::{SendResultOut, TemplateRefOut};
use crate::routes::template_in::TemplateIn;
use crate::AppState;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::{Extension, Json};
use engine::phone::Phone;
use serde::Deserialize;
use serde_json::{json, Value};
use services::sender::{SenderNumber, SenderOutcome, SenderSend, SenderTemplate};
use storage::sender::SenderCaller;
use utoipa::OpenApi;

/// Lista os números liberados para o remetente público
///
/// `GET /api/v1/numbers`: the numbers the token's user may send from, with health and sends
/// in the last 24 h.
#[utoipa::path(get, operation_id = "sender_numbers", path = "/numbers", tag = "Remetente público",
    responses((status = 200, description = "`data`: `[{id, phone, name, quality, health, sends_24h}]`", body = List<SenderNumber>)))]
pub async fn numbers(
    State(state): State<AppState>,
    Extension(caller): Extension<SenderCaller>,
) -> Result<Json<List<SenderNumber>>, ApiError> {
    let list = state
        .services
        .sender_numbers(caller.user.account_id, &caller.user.scope())
        .await?;
    Ok(List::json(list))
}

/// Lista os templates aprovados para o remetente público
///
/// `GET /api/v1/templates` for a sender token.
#[utoipa::path(get, operation_id = "sender_templates", path = "/templates", tag = "Remetente público",
    responses((status = 200, description = "`data`: templates aprovados nos números do usuário, um por nome: `[{name, category, languages, variables, numbers}]`", body = List<SenderTemplate>)))]
pub async fn templates(
    state: &AppState,
    caller: &SenderCaller,
) -> Result<Json<List<SenderTemplate>>, ApiError> {
    let list = state
        .services
        .sender_templates(caller.user.account_id, &caller.user.scope())
        .await?;
    Ok(List::json(list))
}

/// `POST /api/v1/messages` body of a sender token: `{to, template, dry_run}` with the
/// `template` object of every send (D-127). The old shape (`template` a name, with
/// `language`, `variables`, `image_url`, `button_variable`) is still accepted, answered with
/// `Deprecation`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = SenderMessageIn)]
#[serde(deny_unknown_fields)]
pub struct SendIn {
    /// Recipient, digits with country code.
    #[schema(pattern = r"^\s*\+?[ ().-]*([0-9][ ().-]*){10,15}(@c\.us|@s\.whatsapp\.net)?\s*$")]
    to: String,
    /// The template and its values (`{id}` or `{name, language}`, with `vars` or `params`);
    /// deprecated: a template name (string) with the fields below.
    template: SenderTemplateIn,
    /// Deprecated (2026-11-29): `template.language`.
    #[schema(deprecated)]
    language: Option<String>,
    /// Deprecated (2026-11-29): `template.params`.
    #[schema(deprecated)]
    #[serde(default)]
    variables: Vec<String>,
    /// Deprecated (2026-11-29): `template.header_media` `{type: image, link}`.
    #[schema(deprecated)]
    image_url: Option<String>,
    /// Deprecated (2026-11-29): `template.button_param`.
    #[schema(deprecated)]
    button_variable: Option<String>,
    /// Check, choose and render without sending.
    #[serde(default)]
    dry_run: bool,
}

/// A public send's `template`: the one object, or (deprecated) a template name.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum SenderTemplateIn {
    /// The `template` object of every send.
    Object(Box<TemplateIn>),
    /// Deprecated: the template's name.
    Name(String),
}

impl SendIn {
    /// Whether the body used any deprecated field.
    fn legacy(&self) -> bool {
        matches!(self.template, SenderTemplateIn::Name(_))
            || self.language.is_some()
            || !self.variables.is_empty()
            || self.image_url.is_some()
            || self.button_variable.is_some()
    }

    /// The one `template` object, the old fields read into it. Errors: 422
    /// `ambiguous_template` when the object comes with old fields, `required` for a blank
    /// name, and the object's own.
    fn template(self) -> Result<TemplateIn, ApiError> {
        let old_fields = self.language.is_some()
            || !self.variables.is_empty()
            || self.image_url.is_some()
            || self.button_variable.is_some();
        match self.template {
            SenderTemplateIn::Object(_) if old_fields => Err(ApiError::invalid(
                "template",
                "ambiguous_template",
                "Com `template` como objeto, informe idioma, variáveis, imagem e botão dentro dele (`language`, `params`, `header_media`, `button_param`).",
            )),
            SenderTemplateIn::Object(t) => Ok(*t),
            SenderTemplateIn::Name(name) if name.trim().is_empty() => Err(ApiError::invalid(
                "template",
                "required",
                "`template` é obrigatório.",
            )),
            SenderTemplateIn::Name(name) => Ok(TemplateIn::legacy(
                None,
                Some(name.trim().to_string()),
                self.language.filter(|l| !l.is_empty()),
                self.variables,
                self.image_url,
                self.button_variable.filter(|v| !v.is_empty()),
            )),
        }
    }
}

/// The number the sender chose: `{id, phone, name}`.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ChosenNumberOut {
    /// Channel id.
    id: i64,
    /// Digits with country code.
    phone: String,
    /// Display name.
    name: String,
}

/// `POST /api/v1/messages` of a sender token, sent: the send result and the number chosen.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct SenderSentOut {
    /// The send result.
    #[serde(flatten)]
    message: SendResultOut,
    /// The number chosen.
    numero: ChosenNumberOut,
}

/// `POST /api/v1/messages` of a sender token with `dry_run`: what would go, nothing sent.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct SenderDryRunOut {
    /// Always true.
    dry_run: bool,
    /// The recipient, digits with country code.
    to: String,
    /// The number that would send it.
    numero: ChosenNumberOut,
    /// The template that would go.
    template: TemplateRefOut,
    /// The body as it would read.
    preview_text: String,
}

fn outcome_json(o: &SenderOutcome, to: &str) -> Value {
    let r = &o.channel.record;
    let numero = ChosenNumberOut {
        id: r.id,
        phone: r.phone.clone(),
        name: r.name.clone(),
    };
    let out = match &o.message {
        Some(m) => serde_json::to_value(SenderSentOut {
            message: SendResultOut::from(m),
            numero,
        }),
        None => serde_json::to_value(SenderDryRunOut {
            dry_run: true,
            to: to.to_string(),
            numero,
            template: TemplateRefOut {
                name: o.template.0.clone(),
                language: Some(o.template.1.clone()),
            },
            preview_text: o.preview.clone(),
        }),
    };
    out.unwrap_or_default()
}

/// Envia uma mensagem de template pelo remetente público
///
/// `POST /api/v1/messages` for a sender token.
#[utoipa::path(post, operation_id = "sender_send", path = "/messages", tag = "Remetente público",
    request_body = SendIn,
    params(("Idempotency-Key" = Option<String>, Header, description = "A mesma chave repete a primeira resposta por 24 h; a mensagem nunca sai duas vezes")),
    responses(
        (status = 201, description = "Enviada: a mensagem com `numero` (o número escolhido)", body = Data<SenderSentOut>),
        (status = 200, description = "`dry_run`: `{dry_run, to, numero, template, preview_text}`; nada enviado", body = Data<SenderDryRunOut>),
        (status = 202, description = "Envio em dúvida: não será repetido; o status chega depois", body = Data<SendResultOut>),
        (status = 422, description = "`unknown_template`, `variaveis_invalidas`, `nenhum_numero_elegivel` (`numeros`: motivo por número), URL recusada", body = crate::envelope::ErrorBody),
        (status = 429, description = "Sem folga de 24 h em nenhum número, ou acima de 120 requisições por minuto (`Retry-After`)", body = crate::envelope::ErrorBody),
    ))]
pub async fn send(
    state: &AppState,
    auth: &Auth,
    caller: &SenderCaller,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let namespace = format!("pub:{}:", caller.user.id);
    let resp =
        super::idempotency::idempotent(state, auth, &namespace, headers, body, |key| async move {
            let b: SendIn = parse_json(headers, body)?;
            let to = Phone::parse("to", &b.to).map_err(ApiError::from)?;
            let (legacy, dry_run) = (b.legacy(), b.dry_run);
            let template = b.template()?;
            if let Some(url) = template.media_link().filter(|u| !u.trim().is_empty()) {
                let field = if legacy {
                    "image_url"
                } else {
                    "template.header_media.link"
                };
                state.services.outbound().check_url(url).map_err(|r| {
                    ApiError::invalid(field, r.code(), actors::outbound::refusal_message(&r))
                })?;
            }
            let outcome = state
                .services
                .sender_send(
                    caller.user.account_id,
                    &caller.user.scope(),
                    SenderSend {
                        to: to.clone(),
                        template: template.into_ref()?,
                        legacy,
                        dry_run,
                        idempotency_key: key,
                    },
                )
                .await;
            let store = state.services.store();
            let outcome = match outcome {
                Ok(o) => o,
                Err(actors::ActorError::SendInDoubt(id)) => {
                    store
                        .link_sender_message(id, caller.user.id, caller.token_id)
                        .await?;
                    return Err(ApiError::InDoubt(id));
                }
                Err(e) => return Err(e.into()),
            };
            if let Some(m) = &outcome.message {
                store
                    .link_sender_message(m.id, caller.user.id, caller.token_id)
                    .await?;
            }
            let status = if dry_run {
                StatusCode::OK
            } else {
                StatusCode::CREATED
            };
            Ok((
                status,
                json!({ "data": outcome_json(&outcome, to.as_str()) }),
            ))
        })
        .await;
    let old_shape = super::template_in::body_has(body, |m| {
        m.get("template").is_some_and(|t| t.is_string())
            || ["language", "variables", "image_url", "button_variable"]
                .iter()
                .any(|k| m.contains_key(*k))
    });
    match old_shape {
        true => super::template_in::mark_deprecated(resp),
        false => resp,
    }
}

/// Lê uma mensagem enviada pelo remetente público
///
/// `GET /api/v1/messages/{id}` for a sender token: a message this token's user sent.
#[utoipa::path(get, operation_id = "sender_message", path = "/messages/{id}", tag = "Remetente público",
    params(("id" = i64, Path, description = "Id da mensagem enviada por este usuário")),
    responses((status = 200, description = "A mensagem e sua linha do tempo (`sent_at`, `delivered_at`, `read_at`, `failed_at`, `error`)", body = crate::envelope::Data<super::message_out::MessageOut>)))]
pub async fn message(
    state: &AppState,
    caller: &SenderCaller,
    id: i64,
) -> Result<Json<crate::envelope::Data<super::message_out::MessageOut>>, ApiError> {
    let store = state.services.store();
    if !store.sent_by_user(id, caller.user.id).await? {
        return Err(ApiError::NotFound);
    }
    let m = store.message(caller.user.account_id, id).await?;
    Ok(crate::envelope::Data::json(
        super::message_out::MessageOut::from(&m),
    ))
}

struct Security;

impl utoipa::Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "usuario",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("pub_…")
                    .description(Some(
                        "Token do usuário gerado por um Admin em `POST /api/users/{id}/api-token`; 120 requisições por minuto (D-060).",
                    ))
                    .build(),
            ),
        );
        openapi.servers = Some(vec![utoipa::openapi::server::Server::new("/api/v1")]);
    }
}

/// The public sender's OpenAPI document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "disparo — remetente público",
        description = "Envio de templates por terceiros com o token de um usuário: o serviço escolhe um número elegível (template aprovado, saúde, folga de 24 h, o que já falou com o contato). No máximo 120 requisições em qualquer janela de 60 s por token. Toda resposta traz `X-Request-Id`: o do pedido quando é um identificador simples (1 a 128 caracteres de letras, dígitos, `.`, `_`, `-`, `:`), senão um novo (32 hexadecimais); ele aparece em cada linha de log do pedido.",
    ),
    paths(numbers, templates, send, message),
    security(("usuario" = [])),
    modifiers(&Security),
    components(schemas(SendIn))
)]
pub struct SenderDoc;

/// The document (built once).
pub fn document() -> &'static utoipa::openapi::OpenApi {
    static DOC: std::sync::OnceLock<utoipa::openapi::OpenApi> = std::sync::OnceLock::new();
    DOC.get_or_init(|| {
        let mut doc = SenderDoc::openapi();
        crate::openapi::common_responses(&mut doc, crate::openapi::Surface::Sender);
        crate::openapi::tighten_idempotency_keys(&mut doc);
        doc
    })
}
