//! The OpenAPI 3.1 document of the account API (`/api/v1`), generated from the code with
//! utoipa: each handler's `#[utoipa::path]` gives its method, path, parameters, body and
//! answers, and the routers are built from those same annotations (`utoipa_axum::routes!`),
//! so a routed handler cannot be missing from the document. Served at
//! `GET /api/v1/openapi.json`; `/docs` is Swagger UI, served from files vendored in
//! `http/assets/swagger-ui` (npm package `swagger-ui-dist`), with no CDN.

use crate::AppState;
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::sync::OnceLock;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::server::Server;
use utoipa::{Modify, OpenApi, ToSchema};

/// The success envelope of one record or result: `{"data": {…}}` (spec "Resources and their
/// fields").
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct DataEnvelope {
    /// The record.
    #[schema(value_type = Object)]
    data: (),
}

/// The success envelope of a list: `{"data": [{…}], "has_more", "next_cursor"}` (keyset pages:
/// pass `next_cursor` as `cursor` for the next page; lists that are not paged carry neither).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ListEnvelope {
    /// The records, in the order the operation states.
    #[schema(value_type = Vec<Object>)]
    data: (),
    /// Whether more records follow this page.
    has_more: Option<bool>,
    /// The cursor of the next page; `null` on the last.
    next_cursor: Option<String>,
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
    /// `{code, message, data?}` (absent on success).
    #[schema(value_type = Option<Object>)]
    error: Option<()>,
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
        description = "Gateway self-hosted na frente da WhatsApp Business Platform Cloud API: números, mensagens, webhooks, templates, campanhas, wiki e ferramentas MCP. Todas as respostas de sucesso têm `data`; erros têm `message` (pt-BR) e `code`.",
    ),
    security(("bearer" = [])),
    modifiers(&Security),
    components(schemas(DataEnvelope, ListEnvelope, ErrorBody))
)]
pub struct ApiDoc;

/// The whole document (built once).
pub fn document() -> &'static utoipa::openapi::OpenApi {
    static DOC: OnceLock<utoipa::openapi::OpenApi> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut doc = crate::api_routes().split_for_parts().1;
        doc.merge(crate::public_api_routes().split_for_parts().1);
        common_responses(&mut doc);
        doc
    })
}

/// The operations (of the three documents) that call the provider while they answer, so may
/// answer 502 (the provider refused or failed; its reason in `message`, its code in
/// `provider_code`). The contract test (`tests/contract.rs`) fails on a 502 from any other.
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

/// Adds to every operation of `doc` the answers it shares with all the others, each with the
/// error envelope: 503 (`sobrecarregado` or `tempo_esgotado`: the server is busy or the
/// request took too long; `Retry-After`), and 502 for the [`PROVIDER_OPERATIONS`]. An operation's own
/// annotation wins where it already lists the status.
pub fn common_responses(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
    let error = |description: &str| {
        ResponseBuilder::new()
            .description(description)
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("ErrorBody")))
                    .build(),
            )
            .build()
    };
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
            let responses = &mut op.responses.responses;
            responses.entry("503".into()).or_insert_with(|| {
                error("`sobrecarregado` ou `tempo_esgotado`: servidor ocupado ou pedido demorado demais; tente de novo após `Retry-After`").into()
            });
            if op
                .operation_id
                .as_deref()
                .is_some_and(|id| PROVIDER_OPERATIONS.contains(&id))
            {
                responses.entry("502".into()).or_insert_with(|| {
                    error("`provider_refused`: o provedor recusou ou falhou; o motivo está em `message`, o código em `provider_code`").into()
                });
            }
        }
    }
}

/// Routes outside the token layer: the document and its interactive page.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/openapi.json", get(openapi_json))
        .route("/api/openapi.json", get(panel_openapi_json))
        .route("/api/v1/sender/openapi.json", get(sender_openapi_json))
        .route("/docs", get(docs_page))
        .route("/docs/", get(docs_page))
        .route("/docs/painel", get(panel_docs_page))
        .route("/docs/remetente", get(sender_docs_page))
        .route("/docs/swagger-ui.css", get(css))
        .route("/docs/swagger-ui-bundle.js", get(bundle))
}

async fn openapi_json() -> Response {
    static JSON: OnceLock<String> = OnceLock::new();
    let body = JSON.get_or_init(|| document().to_pretty_json().unwrap_or_default());
    ([(header::CONTENT_TYPE, "application/json")], body.as_str()).into_response()
}

async fn sender_openapi_json() -> Response {
    static JSON: OnceLock<String> = OnceLock::new();
    let body = JSON.get_or_init(|| {
        crate::routes::sender::document()
            .to_pretty_json()
            .unwrap_or_default()
    });
    ([(header::CONTENT_TYPE, "application/json")], body.as_str()).into_response()
}

async fn panel_openapi_json() -> Response {
    static JSON: OnceLock<String> = OnceLock::new();
    let body = JSON.get_or_init(|| {
        crate::panel::document()
            .to_pretty_json()
            .unwrap_or_default()
    });
    ([(header::CONTENT_TYPE, "application/json")], body.as_str()).into_response()
}

/// The Swagger UI page of one document, with links to the other.
fn page(title: &str, url: &str) -> String {
    format!(
        r##"<!doctype html>
<html lang="pt-BR">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>disparo — {title}</title>
<link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
<nav style="font-family: sans-serif; padding: 8px 20px">Documentos: <a href="/docs">API da conta (/api/v1)</a> · <a href="/docs/painel">API do painel (/api)</a> · <a href="/docs/remetente">Remetente público (/api/v1, token de usuário)</a></nav>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script>
window.ui = SwaggerUIBundle({{ url: "{url}", dom_id: "#swagger-ui", deepLinking: true, persistAuthorization: true }});
</script>
</body>
</html>
"##
    )
}

async fn docs_page() -> Html<String> {
    Html(page("API da conta", "/api/v1/openapi.json"))
}

async fn sender_docs_page() -> Html<String> {
    Html(page("Remetente público", "/api/v1/sender/openapi.json"))
}

async fn panel_docs_page() -> Html<String> {
    Html(page("API do painel", "/api/openapi.json"))
}

async fn css() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        include_bytes!("../assets/swagger-ui/swagger-ui.css").as_slice(),
    )
        .into_response()
}

async fn bundle() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        include_bytes!("../assets/swagger-ui/swagger-ui-bundle.js").as_slice(),
    )
        .into_response()
}
