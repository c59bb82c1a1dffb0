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

/// The success envelope: `{"data": …}` (spec "Resources and their fields").
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct DataEnvelope {
    /// The result: an object or an array.
    #[schema(value_type = Object)]
    data: (),
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
    components(schemas(DataEnvelope, ErrorBody))
)]
pub struct ApiDoc;

/// The whole document (built once).
pub fn document() -> &'static utoipa::openapi::OpenApi {
    static DOC: OnceLock<utoipa::openapi::OpenApi> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut doc = crate::api_routes().split_for_parts().1;
        doc.merge(crate::public_api_routes().split_for_parts().1);
        doc
    })
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
