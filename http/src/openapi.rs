//! The OpenAPI 3.1 document of the account API (`/api/v1`), generated from the code with
//! utoipa: each handler's `#[utoipa::path]` gives its method, path, parameters, body and
//! answers, and the routers are built from those same annotations (`utoipa_axum::routes!`),
//! so a routed handler cannot be missing from the document. Served (by [`crate::docs`]) at
//! `GET /api/v1/openapi.json`; `/docs` is Swagger UI, served from files vendored in
//! `http/assets/swagger-ui` (npm package `swagger-ui-dist`), with no CDN.

use crate::envelope::{codes_of, ERROR_RESPONSES};
use std::sync::OnceLock;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::server::Server;
use utoipa::{Modify, OpenApi};

struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("svc_…")
                    .description(Some(
                        "Token da conta (`Authorization: Bearer svc_…`), com nível read, write ou admin (D-027).",
                    ))
                    .build(),
            ),
        );
        openapi.servers = Some(vec![Server::new("/api/v1")]);
    }
}

/// The document's header; the paths come from the routers.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "disparo — API da conta",
        description = "Gateway self-hosted na frente da WhatsApp Business Platform Cloud API: números, mensagens, webhooks, templates, campanhas, wiki e ferramentas MCP. Todas as respostas de sucesso têm `data`; erros têm `message` (pt-BR) e `code`. Toda resposta traz `X-Request-Id`: o do pedido quando é um identificador simples (1 a 128 caracteres de letras, dígitos, `.`, `_`, `-`, `:`), senão um novo (32 hexadecimais); ele aparece em cada linha de log do pedido.",
    ),
    security(("bearer" = [])),
    modifiers(&Security)
)]
pub struct ApiDoc;

/// The whole document (built once).
pub fn document() -> &'static utoipa::openapi::OpenApi {
    static DOC: OnceLock<utoipa::openapi::OpenApi> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut doc = crate::api_routes().split_for_parts().1;
        doc.merge(crate::public_api_routes().split_for_parts().1);
        common_responses(&mut doc, Surface::Account);
        declare_idempotency_keys(&mut doc);
        tighten_idempotency_keys(&mut doc);
        doc.merge(crate::events_doc::AccountEvents::openapi());
        doc
    })
}

/// Declares the optional `Idempotency-Key` header on every `POST` that creates or sends
/// (issue 49 item 5), where its handler does not declare it already.
fn declare_idempotency_keys(doc: &mut utoipa::openapi::OpenApi) {
    use crate::routes::idempotency::{KEYED_CREATES, SELF_KEYED};
    use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
    for path in KEYED_CREATES.iter().chain(SELF_KEYED) {
        let Some(op) = doc.paths.paths.get_mut(*path).and_then(|p| p.post.as_mut()) else {
            continue;
        };
        let params = op.parameters.get_or_insert_with(Vec::new);
        if params
            .iter()
            .any(|p| p.name.eq_ignore_ascii_case("Idempotency-Key"))
        {
            continue;
        }
        params.push(
            ParameterBuilder::new()
                .name("Idempotency-Key")
                .parameter_in(ParameterIn::Header)
                .required(utoipa::openapi::Required::False)
                .description(Some(
                    "Chave do cliente (1 a 255 caracteres ASCII visíveis): a primeira resposta (menos 5xx) é repetida por 24 h com `Idempotent-Replayed: true`; a mesma chave com outro corpo (comparado como JSON canônico) ou outra rota é 422 `idempotency_key_reused`; enquanto a primeira roda, 409 `idempotency_in_progress`.",
                ))
                .schema(Some(idempotency_key_schema()))
                .build(),
        );
    }
}

/// Gives every `Idempotency-Key` parameter of `doc` (declared here or by its handler) the one
/// schema of [`idempotency_key_schema`].
pub(crate) fn tighten_idempotency_keys(doc: &mut utoipa::openapi::OpenApi) {
    for item in doc.paths.paths.values_mut() {
        let ops = [
            &mut item.get,
            &mut item.post,
            &mut item.put,
            &mut item.patch,
            &mut item.delete,
        ];
        for op in ops.into_iter().flatten() {
            for p in op.parameters.iter_mut().flatten() {
                if p.name.eq_ignore_ascii_case("Idempotency-Key") {
                    p.schema = Some(idempotency_key_schema().into());
                }
            }
        }
    }
}

/// The `Idempotency-Key` header's schema: what `routes::idempotency` accepts (1 to 255
/// visible ASCII characters, `!` to `~`), else 422 `invalid_idempotency_key` (issue 49 item 8:
/// the schema as strict as the check).
fn idempotency_key_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(255))
        .pattern(Some("^[!-~]+$"))
        .build()
}

/// The operations (of the three documents) that call the provider while they answer, so may
/// answer a provider refusal by its cause (D-107): 422 `provider_refused`, 429
/// `provider_rate_limited`, 502 `provider_unavailable`, 504 `provider_timeout` (the reason in
/// `message`, the provider's code in `provider_code`, `retryable`). The contract test
/// (`tests/contract.rs`) fails on a 502 from any other.
pub const PROVIDER_OPERATIONS: &[&str] = &[
    // Account API.
    "accounts_add_number",
    "accounts_sync_bm",
    "accounts_payment_check",
    "alternative_connect",
    "channels_connect",
    "channels_embedded_signup",
    "channels_update",
    "channels_verify",
    "channels_sync",
    "channels_templates",
    "channels_request_code",
    "channels_verify_code",
    "channels_register",
    "channels_payment_check",
    "groups_send",
    "mcp_rpc",
    "messages_send",
    "messages_media",
    "templates_create",
    "templates_submit",
    "templates_link",
    "templates_sync",
    "templates_reactivate",
    "templates_delete",
    "templates_edit",
    // Panel API.
    "panel_bms_create",
    "panel_bms_update",
    "panel_bms_sync",
    "panel_numbers_photo",
    "panel_campaigns_test_send",
    "panel_templates_create",
    "panel_templates_submit",
    "panel_templates_sync",
    "panel_templates_reactivate",
    "panel_templates_update",
    "panel_templates_delete",
    // Public sender.
    "sender_send",
];

/// The surface a document describes: its callers and so its errors differ (account tokens,
/// panel sessions and roles, public-sender user tokens).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// `/api/v1` with an account token (levels, D-027; a per-token rate limit, D-043).
    Account,
    /// `/api` with a panel session (roles, D-054).
    Panel,
    /// `/api/v1` with a public-sender user token (120 requests per minute, D-060).
    Sender,
}

/// The records the account API and the panel API serve both, one row each (issue 55,
/// D-054: one tenant model, the same ids): `(account schema, panel schema, the record and
/// its routes in both documents)`. Each document's schema says which record of the other it
/// is ([`shared_record_names`]).
pub const SHARED_RECORDS: [(&str, &str, &str); 6] = [
    (
        "ChannelOut",
        "NumberView",
        "o número de WhatsApp: canal (`channel`) na API de conta (`/api/v1/channels`, `/api/v1/channels/{id}/…`) e número (`phone number`) no painel (`/api/phone-numbers/{id}`)",
    ),
    (
        "BmView",
        "PanelBm",
        "o Business Manager: `/api/v1/bms/{id}` na API de conta e `/api/business-managers/{id}` no painel",
    ),
    (
        "WabaView",
        "PanelWaba",
        "a WABA: `/api/v1/wabas` na API de conta e `/api/wabas/{id}` no painel",
    ),
    (
        "TemplateView",
        "TemplateView",
        "o template da biblioteca: `/api/v1/templates/{id}` na API de conta e `/api/templates/{id}` no painel",
    ),
    (
        "CampaignView",
        "PanelCampaignView",
        "a campanha: `/api/v1/campaigns/{id}` na API de conta e `/api/campaigns/{id}` no painel (uma campanha do painel é uma campanha da conta com aprovação e higiene)",
    ),
    (
        "MessageOut",
        "MessageOut",
        "a mensagem: `/api/v1/messages/{id}` na API de conta e as mensagens das campanhas e do webhook log no painel",
    ),
];

/// Appends to each shared record's schema (account and panel documents) which record of the
/// other document it is and that the ids are the same ([`SHARED_RECORDS`]).
fn shared_record_names(doc: &mut utoipa::openapi::OpenApi, surface: Surface) {
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    for (account, panel, what) in SHARED_RECORDS {
        let name = match surface {
            Surface::Account => account,
            Surface::Panel => panel,
            Surface::Sender => continue,
        };
        use utoipa::openapi::schema::Schema;
        let description = match components.schemas.get_mut(name) {
            Some(utoipa::openapi::RefOr::T(Schema::Object(o))) => &mut o.description,
            Some(utoipa::openapi::RefOr::T(Schema::AllOf(a))) => &mut a.description,
            _ => continue,
        };
        let note = format!(
            "Registro compartilhado: {what}. O mesmo registro nos dois documentos, com o mesmo `id`."
        );
        *description = Some(match description.take() {
            Some(d) if !d.is_empty() => format!("{d}\n\n{note}"),
            _ => note,
        });
    }
}

/// The statuses an operation answers beyond the rules of [`error_statuses`], by
/// `operation_id`: 409 where the record's state refuses the move (`invalid_state`,
/// `template_em_uso`, `not_failed`, `aprovacao_pendente`, `disparo_desligado`, the hygiene
/// codes) or an `Idempotency-Key` is still running (`idempotency_in_progress`); 429 where a
/// panel route sends through a number (its 24 h limit); 403 where a rule, not the role table,
/// refuses (`aprovacao_propria`, a scoped user creating a BM).
const EXTRA_STATUSES: &[(&str, &[u16])] = &[
    // Account API.
    ("campaigns_create", &[409]),
    ("campaigns_start", &[409]),
    ("campaigns_edit", &[409]),
    ("campaigns_pause", &[409]),
    ("campaigns_resume", &[409]),
    ("campaigns_cancel", &[409]),
    ("groups_remove", &[409]),
    ("groups_send", &[409]),
    ("messages_send", &[409]),
    ("templates_delete", &[409]),
    ("webhooks_delivery_retry", &[409]),
    // Panel API.
    ("panel_bms_create", &[403]),
    ("panel_campaigns_update", &[409]),
    ("panel_campaigns_hygiene", &[409]),
    ("panel_campaigns_validate", &[409]),
    ("panel_campaigns_approve", &[403, 409, 422]),
    ("panel_campaigns_dispatch", &[409]),
    ("panel_campaigns_test_send", &[409, 429]),
    ("panel_templates_delete", &[409]),
];

/// The error statuses one operation answers, from what it is: 401 when it needs a credential,
/// 403 when not every caller may call it (the level or role tables), 404 when its path or its
/// body names a record, 400/413/415/422 when it takes a body, 422 when it takes parameters, 429 under a
/// per-token limit, 422/429/502/504 for the [`PROVIDER_OPERATIONS`], 503 always, and its
/// [`EXTRA_STATUSES`].
pub fn error_statuses(
    surface: Surface,
    method: &axum::http::Method,
    path: &str,
    op: &utoipa::openapi::path::Operation,
    schemas: &SchemaMap,
) -> Vec<u16> {
    let id = op.operation_id.as_deref().unwrap_or_default();
    let public = op.security.as_ref().is_some_and(|s| {
        s.iter().all(|r| {
            serde_json::to_value(r).is_ok_and(|v| v.as_object().is_some_and(|o| o.is_empty()))
        })
    });
    let mut statuses = vec![503];
    if !public {
        statuses.push(401);
        let restricted = match surface {
            Surface::Account => {
                crate::access::required(method, &format!("/api/v1{path}"))
                    != engine::access::Level::Read
            }
            Surface::Panel => {
                crate::panel::access::allowed(method, &format!("/api{path}")).len() < 3
            }
            Surface::Sender => true,
        };
        if restricted {
            statuses.push(403);
        }
        if surface != Surface::Panel {
            statuses.push(429);
        }
    }
    if path.contains('{') || body_names_a_record(op, schemas) {
        statuses.push(404);
    }
    if op.request_body.is_some() {
        // A JSON body that does not parse, or a multipart body whose framing does not.
        statuses.extend([400, 413, 415, 422]);
    }
    if op.parameters.as_ref().is_some_and(|p| !p.is_empty()) {
        statuses.push(422);
    }
    if PROVIDER_OPERATIONS.contains(&id) {
        // A provider refusal by its cause (D-107): the request's fault, throttling, the
        // provider failing, no answer in time.
        statuses.extend([422, 429, 502, 504]);
    }
    if let Some((_, extra)) = EXTRA_STATUSES.iter().find(|(op_id, _)| *op_id == id) {
        statuses.extend(extra.iter().copied());
    }
    statuses.sort_unstable();
    statuses.dedup();
    statuses
}

/// A document's named schemas.
pub type SchemaMap =
    std::collections::BTreeMap<String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>>;

/// Whether the operation's body names a record by id (a field `…_id`, `…_ids`, `channels`,
/// `submit_channels`, `numeros`): a record of another account, or none, answers 404 as in a
/// path.
fn body_names_a_record(op: &utoipa::openapi::path::Operation, schemas: &SchemaMap) -> bool {
    use utoipa::openapi::schema::Schema;
    use utoipa::openapi::RefOr;
    let Some(body) = &op.request_body else {
        return false;
    };
    body.content
        .values()
        .filter_map(|c| c.schema.as_ref())
        .any(|schema| {
            let resolved = match schema {
                RefOr::Ref(r) => r
                    .ref_location
                    .rsplit('/')
                    .next()
                    .and_then(|name| schemas.get(name)),
                inline => Some(inline),
            };
            let Some(RefOr::T(Schema::Object(o))) = resolved else {
                return false;
            };
            o.properties.keys().any(|k| {
                k.ends_with("_id")
                    || k.ends_with("_ids")
                    || ["channels", "submit_channels", "numeros"].contains(&k.as_str())
            })
        })
}

/// The error schema of one status: the envelope with `code` an enum of its codes.
fn error_schema(status: u16) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    let codes = codes_of(status);
    ObjectBuilder::new()
        .description(Some(format!(
            "Erro {status}: `message` em pt-BR, `code` estável e detalhes conforme o erro (`field`, `missing`, `problems`, `retry_after`, `provider_code`…)."
        )))
        .property(
            "message",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .description(Some("Mensagem em pt-BR.")),
        )
        .required("message")
        .property(
            "code",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some("^[a-z0-9_]+$"))
                .description(Some(format!(
                    "Identificador estável, um por significado. Um conjunto aberto: códigos novos podem ser acrescentados sem nova versão, e um cliente deve tratar um código que não conhece pelo status. Os de hoje: {}.",
                    codes.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
                ))),
        )
        .required("code")
        .property(
            "field",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .description(Some("O campo com problema, em erros de validação.")),
        )
        .additional_properties(Some(utoipa::openapi::schema::AdditionalProperties::FreeForm(true)))
        .into()
}

/// A tag name in ASCII: Portuguese letters without their accents (`Números` → `Numeros`), so
/// generated clients get plain module names (`api.numeros`, not `api.nú_meros`; issue 49
/// item 7).
pub fn ascii_tag(name: &str) -> String {
    name.chars()
        .map(|c| match engine::library::fold(c) {
            Some(c) if c.is_ascii() => c,
            _ => '_',
        })
        .collect()
}

/// Renames every operation's tags to ASCII ([`ascii_tag`]) and lists the tags in the document
/// with their Portuguese names as descriptions, for the documentation pages.
fn ascii_tags(doc: &mut utoipa::openapi::OpenApi) {
    let mut seen = std::collections::BTreeMap::new();
    for item in doc.paths.paths.values_mut() {
        for op in [
            &mut item.get,
            &mut item.post,
            &mut item.put,
            &mut item.patch,
            &mut item.delete,
        ]
        .into_iter()
        .flatten()
        {
            for tag in op.tags.iter_mut().flatten() {
                let ascii = ascii_tag(tag);
                seen.entry(ascii.clone()).or_insert_with(|| tag.clone());
                *tag = ascii;
            }
        }
    }
    doc.tags = Some(
        seen.into_iter()
            .map(|(name, original)| {
                utoipa::openapi::tag::TagBuilder::new()
                    .name(name)
                    .description(Some(original))
                    .build()
            })
            .collect(),
    );
}

/// The project's own references in a text meant for integrators: decision numbers (`D-031`,
/// `decisions D-024, D-045`) and issue numbers (`issue 17`), with the punctuation that held
/// them. The code's doc comments keep them for developers; the documents do not show them
/// (issue 49 item 7).
fn internal_references() -> &'static [(regex::Regex, &'static str)] {
    static RULES: OnceLock<Vec<(regex::Regex, &'static str)>> = OnceLock::new();
    RULES.get_or_init(|| {
        let refs = r"(?:decisions? )?D-\d{3}(?:,? D-\d{3})*|issue \d+(?: item \d+)?";
        [
            // " (D-037)", " (decisions D-024, D-045)", " (issue 17)": the whole parenthesis.
            (format!(r"\s*\((?:{refs})\)"), ""),
            // "(decision D-007: the spec …" → "(the spec …".
            (format!(r"(?:{refs}):\s*"), ""),
            // "(or in doubt, D-032)", "(spec \"Limits\"; D-031)", "…; D-074),".
            (format!(r"[,;]\s*(?:{refs})"), ""),
            // Anything left: the reference alone.
            (format!(r"\s*(?:{refs})"), ""),
        ]
        .into_iter()
        .filter_map(|(pattern, with)| Some((regex::Regex::new(&pattern).ok()?, with)))
        .collect()
    })
}

/// `text` without the project's internal references ([`internal_references`]).
pub fn public_words(text: &str) -> String {
    let mut out = text.to_string();
    for (rule, with) in internal_references() {
        out = rule.replace_all(&out, *with).into_owned();
    }
    out
}

/// `doc` as served (pretty JSON): without internal references in any `summary` or
/// `description` (operations, parameters, answers, schemas and their fields, security
/// schemes; [`public_words`]). Rewritten on the JSON, as utoipa's types do not all read
/// back what they write.
pub fn public_json(doc: &utoipa::openapi::OpenApi) -> String {
    public_json_with(doc, |_| {})
}

/// [`public_json`] with `add` applied to the JSON first (the `webhooks` section, which
/// utoipa's types do not carry: [`crate::events_doc`]).
pub fn public_json_with(
    doc: &utoipa::openapi::OpenApi,
    add: impl FnOnce(&mut serde_json::Value),
) -> String {
    fn scrub(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, v) in map.iter_mut() {
                    match v {
                        serde_json::Value::String(text)
                            if key == "description" || key == "summary" =>
                        {
                            *text = public_words(text);
                        }
                        _ => scrub(v),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(scrub),
            _ => {}
        }
    }
    let Ok(mut value) = serde_json::to_value(doc) else {
        return String::new();
    };
    add(&mut value);
    scrub(&mut value);
    serde_json::to_string_pretty(&value).unwrap_or_default()
}

/// Gives every operation of `doc` its error answers ([`error_statuses`]), each a reference to
/// one shared definition in `components.responses` (with its `Error<status>` schema). An
/// operation's own annotation wins where it already lists the status.
pub fn common_responses(doc: &mut utoipa::openapi::OpenApi, surface: Surface) {
    use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
    ascii_tags(doc);
    shared_record_names(doc, surface);
    let mut used = std::collections::BTreeSet::new();
    let mut errors_used = std::collections::BTreeSet::new();
    let schemas: SchemaMap = doc
        .components
        .as_ref()
        .map(|c| c.schemas.clone())
        .unwrap_or_default();
    for (path, item) in doc.paths.paths.iter_mut() {
        for (method, op) in [
            (axum::http::Method::GET, &mut item.get),
            (axum::http::Method::POST, &mut item.post),
            (axum::http::Method::PUT, &mut item.put),
            (axum::http::Method::PATCH, &mut item.patch),
            (axum::http::Method::DELETE, &mut item.delete),
        ] {
            let Some(op) = op else { continue };
            // An operation's own error answers (their descriptions say which codes) take the
            // shared schema of their status too, so every `code` in a document is an enum.
            for (status, answer) in op.responses.responses.iter_mut() {
                let Ok(status) = status.parse::<u16>() else {
                    continue;
                };
                let utoipa::openapi::RefOr::T(answer) = answer else {
                    continue;
                };
                if status < 400 || !ERROR_RESPONSES.iter().any(|(s, _, _)| *s == status) {
                    continue;
                }
                for content in answer.content.values_mut() {
                    content.schema = Some(Ref::from_schema_name(format!("Error{status}")).into());
                }
                errors_used.insert(status);
            }
            for status in error_statuses(surface, &method, path, op, &schemas) {
                let Some((_, name, _)) = ERROR_RESPONSES.iter().find(|(s, _, _)| *s == status)
                else {
                    continue;
                };
                used.insert(status);
                op.responses
                    .responses
                    .entry(status.to_string())
                    .or_insert_with(|| Ref::new(format!("#/components/responses/{name}")).into());
            }
        }
    }
    let components = doc.components.get_or_insert_with(Default::default);
    // Every reference to the untyped envelope was rewritten above.
    components.schemas.remove("ErrorBody");
    for (status, name, description) in ERROR_RESPONSES {
        let schema = format!("Error{status}");
        if used.contains(status) || errors_used.contains(status) {
            components
                .schemas
                .insert(schema.clone(), error_schema(*status));
        }
        if !used.contains(status) {
            continue;
        }
        components.responses.insert(
            (*name).to_string(),
            ResponseBuilder::new()
                .description(*description)
                .content(
                    "application/json",
                    ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name(schema)))
                        .build(),
                )
                .build()
                .into(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::ERROR_CODES;

    /// The three documents: account API, panel, public sender.
    fn documents() -> [&'static utoipa::openapi::OpenApi; 3] {
        [
            document(),
            crate::panel::document(),
            crate::routes::sender::document(),
        ]
    }

    /// Every operation id of the three documents.
    fn operation_ids() -> std::collections::BTreeSet<String> {
        documents()
            .iter()
            .flat_map(|d| d.paths.paths.values())
            .flat_map(|item| {
                [&item.get, &item.post, &item.put, &item.patch, &item.delete]
                    .into_iter()
                    .flatten()
                    .filter_map(|op| op.operation_id.clone())
            })
            .collect()
    }

    #[test]
    fn the_status_tables_name_real_operations() {
        let ids = operation_ids();
        for id in PROVIDER_OPERATIONS
            .iter()
            .chain(EXTRA_STATUSES.iter().map(|(id, _)| id))
        {
            assert!(
                ids.contains(*id),
                "`{id}` is not an operation of any document"
            );
        }
    }

    /// The `$ref`s of a document that name no schema of its own.
    fn dangling_refs(doc: &utoipa::openapi::OpenApi) -> Vec<String> {
        let text = serde_json::to_string(doc).unwrap();
        let names: Vec<&String> = doc
            .components
            .as_ref()
            .map(|c| c.schemas.keys().collect())
            .unwrap_or_default();
        text.split("\"#/components/schemas/")
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .filter(|name| !names.iter().any(|n| n.as_str() == *name))
            .map(str::to_string)
            .collect()
    }

    /// The operations of `doc` with a JSON success answer whose body is not a named type
    /// (a `$ref` to a component schema).
    fn untyped_answers(doc: &utoipa::openapi::OpenApi) -> Vec<String> {
        use utoipa::openapi::RefOr;
        let mut out = Vec::new();
        for item in doc.paths.paths.values() {
            for op in [&item.get, &item.post, &item.put, &item.patch, &item.delete]
                .into_iter()
                .flatten()
            {
                for (status, answer) in &op.responses.responses {
                    let RefOr::T(answer) = answer else { continue };
                    let named = answer
                        .content
                        .get("application/json")
                        .is_none_or(|c| matches!(c.schema, Some(RefOr::Ref(_))));
                    if status.starts_with('2') && !named {
                        out.push(op.operation_id.clone().unwrap_or_default());
                    }
                    // An error answer an operation spells out itself still has its status's
                    // schema (`code` an enum).
                    let typed_error = answer.content.values().all(|c| {
                        matches!(&c.schema, Some(RefOr::Ref(r))
                            if r.ref_location == format!("#/components/schemas/Error{status}"))
                    });
                    if (status.starts_with('4') || status.starts_with('5')) && !typed_error {
                        out.push(format!(
                            "{} {status}",
                            op.operation_id.clone().unwrap_or_default()
                        ));
                    }
                }
            }
        }
        out
    }

    #[test]
    fn every_document_types_every_answer() {
        for doc in documents() {
            assert_eq!(untyped_answers(doc), Vec::<String>::new());
        }
        for doc in documents() {
            assert_eq!(dangling_refs(doc), Vec::<String>::new());
        }
    }

    /// The properties of `doc`'s component schemas that accept any JSON (no type, no
    /// reference, no composition), as `Schema.property`.
    fn free_form(doc: &utoipa::openapi::OpenApi) -> Vec<String> {
        let text = serde_json::to_value(doc).unwrap();
        let mut out = Vec::new();
        let Some(schemas) = text["components"]["schemas"].as_object() else {
            return out;
        };
        fn open(p: &serde_json::Value) -> bool {
            let typed = ["type", "$ref", "oneOf", "allOf", "anyOf", "enum"]
                .iter()
                .any(|k| p.get(*k).is_some());
            let is_object = p["type"] == "object"
                || p["type"]
                    .as_array()
                    .is_some_and(|t| t.iter().any(|t| t == "object"));
            !typed
                || (is_object
                    && p.get("properties").is_none()
                    && !p["additionalProperties"].is_object())
        }
        fn walk(name: &str, schema: &serde_json::Value, out: &mut Vec<String>) {
            if let Some(props) = schema["properties"].as_object() {
                for (prop, p) in props {
                    if open(p) {
                        out.push(format!("{name}.{prop}"));
                    }
                    if p.get("items").is_some() && open(&p["items"]) {
                        out.push(format!("{name}.{prop}[]"));
                    }
                    walk(&format!("{name}.{prop}"), p, out);
                    walk(&format!("{name}.{prop}[]"), &p["items"], out);
                }
            }
            for key in ["oneOf", "allOf", "anyOf"] {
                for s in schema[key].as_array().into_iter().flatten() {
                    walk(name, s, out);
                }
            }
        }
        for (name, schema) in schemas {
            walk(name, schema, &mut out);
        }
        out
    }

    /// Fields that are any JSON on purpose: what the provider or the client sent, passed on
    /// as it came.
    const FREE_FORM: &[&str] = &[
        // JSON-RPC 2.0 (MCP): the id is the client's, params and result are each method's
        // (MCP's own schema, `tools/list` describes the tools' inputs).
        "JsonRpcResponse.id",
        "JsonRpcResponse.result",
        "McpRequest.id",
        "McpRequest.params",
        // A template as the provider lists it: its HEADER component and buttons as they came.
        "ProviderTemplateOut.header",
        "ProviderTemplateOut.buttons",
        "List_ProviderTemplateOut.data[].header",
        "List_ProviderTemplateOut.data[].buttons",
        // What the provider sent in an inbound message that no type models, as sent (D-120).
        "InboundContent.raw",
        // A template send's parameters as the client gave them; a provider change forwarded
        // to a client as it came (D-122).
        "EventTemplate.params",
        "ForwardedEvent.payload",
    ];

    #[test]
    fn no_field_is_any_json_unless_it_passes_one_on() {
        for doc in documents() {
            let found: Vec<String> = free_form(doc)
                .into_iter()
                .filter(|f| !FREE_FORM.contains(&f.as_str()))
                .collect();
            assert_eq!(found, Vec::<String>::new());
        }
    }

    /// A map typed through an alias (`VarMap`) is registered under the container's name
    /// (`BTreeMap`), where two different maps would collide: every map is inline.
    #[test]
    fn no_schema_is_named_after_a_container() {
        for doc in documents() {
            let names: Vec<&String> = doc
                .components
                .as_ref()
                .map(|c| c.schemas.keys().collect())
                .unwrap_or_default();
            for name in names {
                assert!(
                    !["BTreeMap", "HashMap", "Vec", "Option", "Value", "Object"]
                        .contains(&name.as_str()),
                    "component schema `{name}`"
                );
            }
        }
    }

    #[test]
    fn every_tag_is_ascii() {
        assert_eq!(ascii_tag("Números"), "Numeros");
        assert_eq!(ascii_tag("Webhooks de saída"), "Webhooks de saida");
        for doc in documents() {
            for item in doc.paths.paths.values() {
                for op in [&item.get, &item.post, &item.put, &item.patch, &item.delete]
                    .into_iter()
                    .flatten()
                {
                    for tag in op.tags.iter().flatten() {
                        assert!(tag.is_ascii(), "tag {tag}");
                    }
                }
            }
            assert!(doc.tags.as_ref().is_some_and(|t| !t.is_empty()));
        }
    }

    #[test]
    fn every_error_status_has_a_shared_answer() {
        for (status, _) in ERROR_CODES {
            if *status == 405 {
                // No route is documented with a method it refuses.
                continue;
            }
            assert!(
                ERROR_RESPONSES.iter().any(|(s, _, _)| s == status),
                "{status} has codes but no shared answer"
            );
        }
    }
}

#[cfg(test)]
mod idempotency_tests {
    use crate::routes::idempotency::{KEYED_CREATES, SELF_KEYED};

    /// Every route that takes `Idempotency-Key` exists as a `POST` of the document and
    /// declares the header once (a typo in the lists would leave a route unkeyed).
    #[test]
    fn every_creating_post_declares_the_idempotency_key() {
        let doc = super::document();
        for path in KEYED_CREATES.iter().chain(SELF_KEYED) {
            let op = doc
                .paths
                .paths
                .get(*path)
                .and_then(|p| p.post.as_ref())
                .unwrap_or_else(|| panic!("POST {path} is not in the document"));
            let declared = op
                .parameters
                .iter()
                .flatten()
                .filter(|p| p.name.eq_ignore_ascii_case("Idempotency-Key"))
                .count();
            assert_eq!(declared, 1, "POST {path}");
        }
    }

    /// Every `Idempotency-Key` of the account and sender documents has the schema the check
    /// applies (issue 49 item 8): 1 to 255 characters from `!` to `~`.
    #[test]
    fn every_idempotency_key_has_the_checked_schema() {
        let mut seen = 0;
        for doc in [super::document(), crate::routes::sender::document()] {
            let json = serde_json::to_value(doc).unwrap();
            for (path, item) in json["paths"].as_object().unwrap() {
                for (method, op) in item.as_object().unwrap() {
                    for p in op["parameters"].as_array().into_iter().flatten() {
                        if p["name"] != "Idempotency-Key" {
                            continue;
                        }
                        seen += 1;
                        let schema = &p["schema"];
                        assert_eq!(schema["pattern"], "^[!-~]+$", "{method} {path}");
                        assert_eq!(schema["minLength"], 1, "{method} {path}");
                        assert_eq!(schema["maxLength"], 255, "{method} {path}");
                    }
                }
            }
        }
        assert!(seen > KEYED_CREATES.len(), "only {seen} keys seen");
    }
}

#[cfg(test)]
mod text_tests {
    use super::public_words;

    #[test]
    fn internal_references_leave_readable_sentences() {
        for (before, after) in [
            ("State (D-029).", "State."),
            (
                "Taken by a number, provider answer pending (or in doubt, D-032).",
                "Taken by a number, provider answer pending (or in doubt).",
            ),
            (
                "A message with its delivery timeline (decision D-007: the spec shows no read end).",
                "A message with its delivery timeline (the spec shows no read end).",
            ),
            (
                "never sent twice (decisions D-024, D-045): a send",
                "never sent twice: a send",
            ),
            (
                "guardrails (spec \"Limits\"; D-031): the settings",
                "guardrails (spec \"Limits\"): the settings",
            ),
            ("the `header` (issue 17): a link", "the `header`: a link"),
            ("reads `public` (issue 46).", "reads `public`."),
            ("cluster mode only (`NATS_URL`, issue 52): this", "cluster mode only (`NATS_URL`): this"),
            ("(a secret; issue 49 item 7)", "(a secret)"),
            ("spec \"Authentication\" item 4", "spec \"Authentication\" item 4"),
        ] {
            assert_eq!(public_words(before), after);
        }
    }

    /// The three documents read as a product (issue 49 item 7): every operation has a short
    /// summary, and no summary or description names a decision or an issue of the project.
    #[test]
    fn every_operation_has_a_summary_and_no_text_names_internal_work() {
        let refs = regex::Regex::new(r"\bD-\d{3}\b|\bissue \d+|\bdecis(?:ion|ão) D").unwrap();
        for doc in [
            super::document(),
            crate::panel::document(),
            crate::routes::sender::document(),
        ] {
            let mut missing = Vec::new();
            for (path, item) in &doc.paths.paths {
                for op in [&item.get, &item.post, &item.put, &item.patch, &item.delete]
                    .into_iter()
                    .flatten()
                {
                    let summary = op.summary.as_deref().unwrap_or_default();
                    if summary.trim().is_empty() || summary.chars().count() > 160 {
                        missing.push(format!("{path} {:?}", op.operation_id));
                    }
                }
            }
            assert_eq!(missing, Vec::<String>::new(), "{}", doc.info.title);
            let text: serde_json::Value = serde_json::from_str(&super::public_json(doc)).unwrap();
            let mut found = Vec::new();
            walk(&text, &refs, &mut found);
            assert_eq!(found, Vec::<String>::new(), "{}", doc.info.title);
        }
    }

    fn walk(value: &serde_json::Value, refs: &regex::Regex, found: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, v) in map {
                    match v {
                        serde_json::Value::String(s)
                            if (key == "description" || key == "summary") && refs.is_match(s) =>
                        {
                            found.push(s.chars().take(100).collect());
                        }
                        _ => walk(v, refs, found),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, refs, found)),
            _ => {}
        }
    }
}
