//! Serving the three documents (account API, panel API, public sender) as JSON and as Swagger
//! UI pages, from files vendored in `http/assets/swagger-ui` (npm package `swagger-ui-dist`),
//! with no CDN. The documents themselves are composed by [`crate::openapi::document`],
//! [`crate::panel::document`] and [`crate::routes::sender::document`].

use crate::openapi::document;
use crate::AppState;
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::sync::OnceLock;

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
        .route("/docs/swagger-init.js", get(init_script))
}

async fn openapi_json() -> Response {
    static JSON: OnceLock<String> = OnceLock::new();
    let body = JSON.get_or_init(|| {
        crate::openapi::public_json_with(document(), |v| {
            crate::events_doc::add_account_webhooks(v);
            crate::examples::add("account", v);
        })
    });
    ([(header::CONTENT_TYPE, "application/json")], body.as_str()).into_response()
}

async fn sender_openapi_json() -> Response {
    static JSON: OnceLock<String> = OnceLock::new();
    let body = JSON.get_or_init(|| {
        crate::openapi::public_json_with(crate::routes::sender::document(), |v| {
            crate::examples::add("sender", v)
        })
    });
    ([(header::CONTENT_TYPE, "application/json")], body.as_str()).into_response()
}

async fn panel_openapi_json() -> Response {
    static JSON: OnceLock<String> = OnceLock::new();
    let body = JSON.get_or_init(|| {
        crate::openapi::public_json_with(crate::panel::document(), |v| {
            crate::events_doc::add_panel_webhooks(v);
            crate::examples::add("panel", v);
        })
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
<div id="swagger-ui" data-url="{url}"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/swagger-init.js"></script>
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

/// Starts Swagger UI on the page's document (a file, not an inline script: the pages' policy
/// allows only the server's own scripts).
async fn init_script() -> Response {
    const INIT: &str = "window.ui = SwaggerUIBundle({ url: document.getElementById('swagger-ui').dataset.url, dom_id: '#swagger-ui', deepLinking: true, persistAuthorization: true });\n";
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        INIT,
    )
        .into_response()
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
