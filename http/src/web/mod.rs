//! The web panel operators use (issue 23, D-077): server-rendered pages (askama templates
//! compiled into the binary) with htmx and pico.css vendored in `http/assets/web/`, served by
//! the binary itself at `/`.
//!
//! **One implementation.** A page never reads the store nor applies a rule: every read and
//! every write is a call to the panel's own JSON API (`/api`, [`PanelApi`]) made in-process
//! with the operator's session, so the role table, the scopes, the validation, the audit log
//! and the errors are exactly the API's. A page turns the API's `data` into a view (the
//! structs of `views`) and renders it; an API error becomes the API's own pt-BR message on the
//! page.
//!
//! **Session.** `POST /login` calls `POST /api/login` and keeps the `ses_…` token in the
//! `disparo_sessao` cookie (HttpOnly, SameSite=Lax, `Secure` when the public URL is https).
//! When the API answers 401 (expired or revoked session) the operator is sent back to
//! `/login` (htmx requests get `HX-Redirect`). Every write (any method but GET/HEAD) must come
//! from this origin: `Sec-Fetch-Site: same-origin`, or an `Origin` equal to the request's
//! host where the browser sends no fetch metadata; anything else is refused with 403
//! (CSRF, [`same_origin`]).
//!
//! **Live.** The dashboard's KPIs and a campaign's progress are pushed over SSE
//! (`text/event-stream`, axum's `Sse`, every 2 s / 1 s) as rendered fragments that htmx's SSE
//! extension swaps in.

mod contact_preview;
mod glossary;
mod pages;
mod template_builder;
pub(crate) mod views;

use crate::AppState;
use axum::body::Body;
use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;
use std::net::SocketAddr;
use tower::ServiceExt;

/// The session cookie's name.
pub const COOKIE: &str = "disparo_sessao";

/// Largest API answer a page reads into memory, bytes (a page of 200 log lines with bodies).
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// The panel's JSON API (`/api`, with its session middleware and state), called in-process by
/// the pages: `Router` nested at `/api`.
#[derive(Clone)]
pub struct PanelApi(pub Router);

/// The web panel's routes (pages, form actions, SSE streams and static files); `api` is the
/// panel API they call.
pub fn routes(api: PanelApi) -> Router<AppState> {
    Router::new()
        .route("/", get(pages::dashboard))
        .route("/login", get(pages::login_page).post(pages::login))
        .route("/logout", post(pages::logout))
        .route("/eventos/dashboard", get(pages::dashboard_events))
        .route("/inventario", get(pages::inventory))
        .route("/inventario/bms", post(pages::create_bm))
        .route("/inventario/bms/{id}", post(pages::update_bm))
        .route("/inventario/bms/{id}/sync", post(pages::sync_bm))
        .route("/inventario/numeros/{id}", post(pages::update_number))
        .route("/inventario/numeros/{id}/foto", post(pages::number_photo))
        .route(
            "/inventario/numeros/{id}/guardrails",
            get(pages::number_guardrails).post(pages::set_number_guardrails),
        )
        .route("/clientes", get(pages::clients).post(pages::create_client))
        .route("/clientes/{id}/segredo", post(pages::rotate_client_secret))
        .route("/usuarios/{id}/acesso", post(pages::update_access))
        .route("/clientes/{id}", post(pages::update_client))
        .route("/clientes/{id}/remover", post(pages::delete_client))
        .route("/usuarios", get(pages::users).post(pages::create_user))
        .route("/usuarios/{id}", post(pages::update_user))
        .route("/usuarios/{id}/token", post(pages::create_api_token))
        .route(
            "/templates",
            get(pages::templates)
                .post(template_builder::build_template)
                .layer(
                    // The example image of a media header (5 MB at most) and the form around it.
                    axum::extract::DefaultBodyLimit::max(
                        services::panel::PHOTO_MAX_BYTES + 64 * 1024,
                    ),
                ),
        )
        .route("/templates/{id}/{acao}", post(pages::template_action))
        .route(
            "/templates/{id}/numeros/{channel}/reativar",
            post(pages::reactivate_template),
        )
        .route(
            "/campanhas",
            get(pages::campaigns).post(pages::import_campaign),
        )
        .route("/campanhas/{id}", get(pages::campaign))
        .route("/campanhas/{id}/eventos", get(pages::campaign_events))
        .route("/campanhas/{id}/export", get(pages::export_campaign))
        .route("/campanhas/{id}/teste", post(pages::test_send))
        .route(
            "/campanhas/{id}/previa",
            get(contact_preview::contact_preview),
        )
        .route("/campanhas/{id}/{acao}", post(pages::campaign_action))
        .route("/configuracoes/disparo", post(pages::set_dispatch))
        .route("/tarefas", get(pages::tasks).post(pages::create_task))
        .route("/tarefas/{id}/mover", post(pages::move_task))
        .route("/webhook-logs", get(pages::webhook_logs))
        .route("/webhook-logs/{id}/reenviar", post(pages::reforward))
        .route("/auditoria", get(pages::audit))
        .route("/cluster", get(pages::cluster))
        .route("/wiki", get(pages::wiki))
        .route("/envios", get(pages::client_sends))
        .route("/wiki", post(pages::create_wiki))
        .route("/wiki/previa", post(pages::wiki_preview))
        .route("/wiki/{slug}", get(pages::wiki_page))
        .route("/wiki/{slug}/editar", post(pages::update_wiki))
        .route("/static/{file}", get(asset))
        .layer(axum::middleware::from_fn(same_origin))
        .layer(Extension(api))
}

/// Refuses a write (any method but GET/HEAD) that a browser says came from another site
/// (CSRF): `Sec-Fetch-Site` must be `same-origin`; without it, `Origin` must name this host;
/// with neither, the request is refused too (a browser always sends one of them on a POST).
async fn same_origin(req: Request, next: Next) -> Response {
    if matches!(*req.method(), Method::GET | Method::HEAD) || is_same_origin(req.headers()) {
        let mut resp = next.run(req).await;
        let h = resp.headers_mut();
        // Pages load only their own scripts and styles, and are never framed (clickjacking).
        h.entry(header::CONTENT_SECURITY_POLICY).or_insert(HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob: https:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
        ));
        h.entry(header::X_FRAME_OPTIONS)
            .or_insert(HeaderValue::from_static("DENY"));
        h.entry(header::REFERRER_POLICY)
            .or_insert(HeaderValue::from_static("same-origin"));
        return resp;
    }
    let htmx = req.headers().contains_key("hx-request");
    WebError {
        failure: Failure::Api {
            status: StatusCode::FORBIDDEN,
            message: "Pedido de outra origem recusado: use os formulários do próprio painel."
                .into(),
        },
        htmx,
    }
    .into_response()
}

/// Whether the request's fetch metadata or `Origin` says it came from this origin.
pub fn is_same_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site") {
        return site.as_bytes() == b"same-origin";
    }
    let (Some(origin), Some(host)) = (headers.get(header::ORIGIN), headers.get(header::HOST))
    else {
        return false;
    };
    let (Ok(origin), Ok(host)) = (origin.to_str(), host.to_str()) else {
        return false;
    };
    url::Url::parse(origin).is_ok_and(|u| {
        let authority = match (u.host_str(), u.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            _ => return false,
        };
        authority.eq_ignore_ascii_case(host)
    })
}

/// Why a page could not be served.
#[derive(Debug)]
pub(crate) enum Failure {
    /// No session cookie: to the login page.
    NoSession,
    /// The API answered 401 to the session (expired or revoked): back to the login page,
    /// which says so.
    LoggedOut,
    /// The API refused (its status and pt-BR message), or the request was refused here.
    Api {
        /// The status to answer.
        status: StatusCode,
        /// The pt-BR message shown.
        message: String,
    },
    /// The API refused one field of a form (its `field`): as [`Failure::Api`], and for htmx
    /// the alert names the field, which the page marks (`aria-invalid`) and focuses while the
    /// form keeps everything typed, ticked and chosen (issue 47 item 5).
    Field {
        /// The status to answer.
        status: StatusCode,
        /// The pt-BR message shown.
        message: String,
        /// The API's name of the field (the form control's `name`).
        field: String,
    },
}

/// A page's error: rendered as a page, or for htmx as an alert swapped into `#avisos`.
#[derive(Debug)]
pub(crate) struct WebError {
    pub(crate) failure: Failure,
    pub(crate) htmx: bool,
}

impl IntoResponse for WebError {
    fn into_response(self) -> Response {
        match self.failure {
            Failure::NoSession if !self.htmx => Redirect::to("/login").into_response(),
            Failure::NoSession | Failure::LoggedOut => {
                let clear = clear_cookie();
                if self.htmx {
                    (
                        StatusCode::OK,
                        [
                            (header::SET_COOKIE, clear),
                            (
                                header::HeaderName::from_static("hx-redirect"),
                                HeaderValue::from_static("/login?expirada=1"),
                            ),
                        ],
                    )
                        .into_response()
                } else {
                    (
                        [(header::SET_COOKIE, clear)],
                        Redirect::to("/login?expirada=1"),
                    )
                        .into_response()
                }
            }
            Failure::Api { status, message } => api_failure(self.htmx, status, &message, None),
            Failure::Field {
                status,
                message,
                field,
            } => api_failure(self.htmx, status, &message, Some(&field)),
        }
    }
}

/// An API refusal as a page (a full error page) or, for htmx, as an alert swapped into
/// `#avisos`, naming the `field` at fault when there is one.
fn api_failure(htmx: bool, status: StatusCode, message: &str, field: Option<&str>) -> Response {
    if htmx {
        (
            status,
            [
                (
                    header::HeaderName::from_static("hx-retarget"),
                    HeaderValue::from_static("#avisos"),
                ),
                (
                    header::HeaderName::from_static("hx-reswap"),
                    HeaderValue::from_static("innerHTML"),
                ),
            ],
            Html(pages::alert_fragment(message, field)),
        )
            .into_response()
    } else {
        (status, Html(pages::error_page(status, message))).into_response()
    }
}

/// The `Set-Cookie` value that forgets the session.
/// The `HX-Trigger` value that shows `message` as a toast (issue 47 item 8): the event
/// `aviso` with the text as its value, read by `app.js`. Header values are ASCII, so every
/// character outside it travels as a JSON `\uXXXX` escape.
fn toast_trigger(message: &str) -> HeaderValue {
    let mut text = String::with_capacity(message.len() + 16);
    for unit in message.encode_utf16() {
        match unit {
            0x22 => text.push_str("\\\""),
            0x5C => text.push_str("\\\\"),
            0x20..=0x7E => text.push(char::from(unit as u8)),
            _ => text.push_str(&format!("\\u{unit:04x}")),
        }
    }
    HeaderValue::from_str(&format!("{{\"aviso\":\"{text}\"}}"))
        .unwrap_or(HeaderValue::from_static("{}"))
}

fn clear_cookie() -> HeaderValue {
    HeaderValue::from_static("disparo_sessao=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0")
}

/// The `Set-Cookie` value that keeps `token` for this browser session (`Secure` when the
/// gateway's public URL is https).
fn session_cookie(token: &str, secure: bool) -> Option<HeaderValue> {
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax{secure}"
    ))
    .ok()
}

/// The session token in the request's `Cookie` header, if any.
fn cookie_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| engine::panel::looks_like_session(v))
}

/// The API's success envelope, as a page reads it.
#[derive(Debug, Deserialize)]
pub(crate) struct Envelope<T> {
    pub(crate) data: T,
    #[serde(default)]
    pub(crate) next_cursor: Option<String>,
}

/// One in-process call to the panel API and its answer.
pub(crate) struct Caller {
    api: PanelApi,
    token: Option<String>,
    peer: Option<ConnectInfo<SocketAddr>>,
    /// Whether the page's request came from htmx (errors become alerts).
    pub(crate) htmx: bool,
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let api = parts
            .extensions
            .get::<PanelApi>()
            .cloned()
            .expect("the web routes carry the panel API");
        Ok(Self {
            api,
            token: cookie_token(&parts.headers),
            peer: parts.extensions.get::<ConnectInfo<SocketAddr>>().cloned(),
            htmx: parts.headers.contains_key("hx-request"),
        })
    }
}

impl Caller {
    /// An error of this request's kind (page or htmx fragment).
    pub(crate) fn fail(&self, failure: Failure) -> WebError {
        WebError {
            failure,
            htmx: self.htmx,
        }
    }

    /// Whether a session cookie came with the request.
    pub(crate) fn has_session(&self) -> bool {
        self.token.is_some()
    }

    /// Sends `method path` with `body` (and its content type) to the panel API as this
    /// session; the raw answer.
    pub(crate) async fn raw(
        &self,
        method: Method,
        path: &str,
        content_type: Option<HeaderValue>,
        body: Body,
    ) -> Result<Response, WebError> {
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::ACCEPT, "application/json");
        if let Some(token) = &self.token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if let Some(ct) = content_type {
            req = req.header(header::CONTENT_TYPE, ct);
        }
        let mut req = req.body(body).map_err(|_| {
            self.fail(Failure::Api {
                status: StatusCode::BAD_REQUEST,
                message: "Endereço inválido.".into(),
            })
        })?;
        if let Some(peer) = self.peer {
            req.extensions_mut().insert(peer);
        }
        let resp = match self.api.0.clone().oneshot(req).await {
            Ok(r) => r,
            Err(never) => match never {},
        };
        if resp.status() == StatusCode::UNAUTHORIZED && self.token.is_some() {
            return Err(self.fail(Failure::LoggedOut));
        }
        Ok(resp)
    }

    /// Sends a JSON request (or none) and reads the JSON answer; a non-2xx answer is the
    /// API's message as a [`WebError`].
    pub(crate) async fn json(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, WebError> {
        let (ct, body) = match body {
            Some(v) => (
                Some(HeaderValue::from_static("application/json")),
                Body::from(v.to_string()),
            ),
            None => (None, Body::empty()),
        };
        let resp = self.raw(method, path, ct, body).await?;
        self.read(resp).await
    }

    /// Reads a JSON answer of the API; a non-2xx answer becomes its message.
    pub(crate) async fn read(&self, resp: Response) -> Result<Value, WebError> {
        let status = resp.status();
        let Ok(bytes) = axum::body::to_bytes(resp.into_body(), MAX_ANSWER_BYTES).await else {
            // Too large for a page (issue 46): say so instead of failing to read it.
            return Err(self.fail(Failure::Api {
                status: StatusCode::BAD_GATEWAY,
                message: "O conteúdo é grande demais para mostrar nesta página (mais de 16 MiB): use os filtros, a paginação ou a exportação CSV.".into(),
            }));
        };
        let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(value);
        }
        // The API's words, its field names as the screens name them (issue 47 item 9).
        let message = glossary::message(
            value["message"]
                .as_str()
                .unwrap_or("O pedido não pôde ser atendido."),
        );
        Err(self.fail(match value["field"].as_str() {
            Some(field) => Failure::Field {
                status,
                message,
                field: field.to_string(),
            },
            None => Failure::Api { status, message },
        }))
    }

    /// `GET path` and its `data` as `T` (with the list's `has_more`/`next_cursor`).
    pub(crate) async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
    ) -> Result<Envelope<T>, WebError> {
        if self.token.is_none() {
            return Err(self.fail(Failure::NoSession));
        }
        let v = self.json(Method::GET, path, None).await?;
        serde_json::from_value(v).map_err(|e| {
            tracing::error!(path, error = %e, "the panel API's answer does not fit its page");
            self.fail(Failure::Api {
                status: StatusCode::BAD_GATEWAY,
                message: "A resposta da API do painel não pôde ser lida.".into(),
            })
        })
    }

    /// `GET path` as [`Caller::get`], for a part of a page (issue 47): an answer that does not
    /// fit `T` is `Ok(None)` (logged) and the page shows the rest with a notice in that part,
    /// instead of failing whole. A refused call (no session, 4xx/5xx) is still an error.
    pub(crate) async fn part<T: DeserializeOwned>(
        &self,
        path: &str,
    ) -> Result<Option<Envelope<T>>, WebError> {
        if self.token.is_none() {
            return Err(self.fail(Failure::NoSession));
        }
        let v = self.json(Method::GET, path, None).await?;
        Ok(serde_json::from_value(v)
            .map_err(|e| {
                tracing::error!(path, error = %e, "a part of a page does not fit the panel API's answer");
            })
            .ok())
    }

    /// `GET path`'s `data` as `T`.
    pub(crate) async fn data<T: DeserializeOwned>(&self, path: &str) -> Result<T, WebError> {
        Ok(self.get(path).await?.data)
    }
}

/// A form body (`application/x-www-form-urlencoded`); a malformed or incomplete one is a pt-BR
/// error on the page (422), not axum's plain-text rejection.
pub(crate) struct WebForm<T>(pub T);

impl<S, T> axum::extract::FromRequest<S> for WebForm<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = WebError;

    async fn from_request(req: Request, state: &S) -> Result<Self, WebError> {
        let htmx = req.headers().contains_key("hx-request");
        axum::Form::<T>::from_request(req, state)
            .await
            .map(|axum::Form(v)| WebForm(v))
            .map_err(|_| WebError {
                failure: Failure::Api {
                    status: StatusCode::UNPROCESSABLE_ENTITY,
                    message: "Formulário incompleto ou inválido: preencha os campos obrigatórios."
                        .into(),
                },
                htmx,
            })
    }
}

/// Path parameters; one that does not parse (`/campanhas/abc`) is the page's 404.
pub(crate) struct WebPath<T>(pub T);

impl<S, T> FromRequestParts<S> for WebPath<T>
where
    S: Send + Sync,
    T: DeserializeOwned + Send,
{
    type Rejection = WebError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, WebError> {
        let htmx = parts.headers.contains_key("hx-request");
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(v)| WebPath(v))
            .map_err(|_| WebError {
                failure: Failure::Api {
                    status: StatusCode::NOT_FOUND,
                    message: "Página não encontrada.".into(),
                },
                htmx,
            })
    }
}

/// The vendored front-end files and the panel's own script and style.
async fn asset(axum::extract::Path(file): axum::extract::Path<String>) -> Response {
    let (ct, bytes): (&str, &'static [u8]) = match file.as_str() {
        "htmx.min.js" => (
            "text/javascript; charset=utf-8",
            include_bytes!("../../assets/web/htmx.min.js"),
        ),
        "htmx-ext-sse.min.js" => (
            "text/javascript; charset=utf-8",
            include_bytes!("../../assets/web/htmx-ext-sse.min.js"),
        ),
        "pico.min.css" => (
            "text/css; charset=utf-8",
            include_bytes!("../../assets/web/pico.min.css"),
        ),
        "app.js" => (
            "text/javascript; charset=utf-8",
            include_bytes!("../../assets/web/app.js"),
        ),
        "app.css" => (
            "text/css; charset=utf-8",
            include_bytes!("../../assets/web/app.css"),
        ),
        _ => return crate::error::ApiError::NotFound.into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, ct),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        bytes,
    )
        .into_response()
}

/// The public URL's scheme decides the cookie's `Secure` flag.
pub(crate) fn secure_cookies(state: &State<AppState>) -> bool {
    state.config.public_url.starts_with("https://")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toast's text reaches the page whole: accents, quotes and backslashes survive the
    /// ASCII header as JSON escapes.
    #[test]
    fn a_toast_carries_any_text_in_an_ascii_header() {
        let text = "Campanha “Natal” pausada: \"ok\" \\ 10%";
        let v = toast_trigger(text);
        assert!(v.to_str().is_ok(), "ASCII only");
        let parsed: serde_json::Value = serde_json::from_slice(v.as_bytes()).unwrap();
        assert_eq!(parsed["aviso"], text);
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn only_this_origin_may_write() {
        assert!(is_same_origin(&headers(&[(
            "sec-fetch-site",
            "same-origin"
        )])));
        assert!(!is_same_origin(&headers(&[(
            "sec-fetch-site",
            "cross-site"
        )])));
        assert!(!is_same_origin(&headers(&[(
            "sec-fetch-site",
            "same-site"
        )])));
        // Fetch metadata wins over a matching Origin.
        assert!(!is_same_origin(&headers(&[
            ("sec-fetch-site", "cross-site"),
            ("origin", "http://127.0.0.1:8080"),
            ("host", "127.0.0.1:8080"),
        ])));
        assert!(is_same_origin(&headers(&[
            ("origin", "http://127.0.0.1:8080"),
            ("host", "127.0.0.1:8080"),
        ])));
        assert!(!is_same_origin(&headers(&[
            ("origin", "http://evil.example"),
            ("host", "127.0.0.1:8080"),
        ])));
        assert!(!is_same_origin(&headers(&[
            ("origin", "null"),
            ("host", "127.0.0.1:8080"),
        ])));
        assert!(!is_same_origin(&headers(&[("host", "127.0.0.1:8080")])));
    }

    #[test]
    fn the_session_cookie_is_read_among_others() {
        let h = headers(&[(
            "cookie",
            "a=1; disparo_sessao=ses_abcdefghijklmnopqrstuvwxyz0123456789ABCD; b=2",
        )]);
        let t = cookie_token(&h);
        assert_eq!(
            t.as_deref(),
            Some("ses_abcdefghijklmnopqrstuvwxyz0123456789ABCD")
                .filter(|t| engine::panel::looks_like_session(t))
        );
        assert_eq!(
            cookie_token(&headers(&[("cookie", "disparo_sessao=svc_x")])),
            None
        );
    }
}
