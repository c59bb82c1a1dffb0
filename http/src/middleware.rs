//! Request middleware: bearer-token authentication with the audit log of writes, and HTTP
//! metrics by matched route.

use crate::error::ApiError;
use crate::AppState;
use axum::extract::{MatchedPath, OriginalUri, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use engine::token::looks_like_token;
use std::time::Instant;

/// Resolves `Authorization: Bearer svc_…` to its account (401 otherwise), refuses an action
/// above the token's access level (403, [`crate::access`]) and, after a
/// successful write (any method but GET/HEAD/OPTIONS answered 2xx), appends the audit line:
/// token name, `METHOD /route/{template}`, the concrete path, the status and the time.
pub async fn authenticate(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    if let Some(token) = bearer(req.headers())
        .filter(|t| storage::sender::looks_like_sender_token(t))
        .map(str::to_string)
    {
        return authenticate_sender(state, token, req, next).await;
    }
    let token = bearer(req.headers())
        .filter(|t| looks_like_token(t))
        .map(str::to_string);
    let owner = match token_owner(&state, token.as_deref()).await {
        Ok(owner) => owner,
        Err(e) => return e.into_response(),
    };
    let rate_headers = match &state.config.rate_limit {
        Some(limit) => match limit.check(owner.token_id) {
            crate::limits::RateVerdict::Allowed(headers) => Some(headers),
            crate::limits::RateVerdict::Refused(resp) => return resp,
        },
        None => None,
    };
    let method = req.method().clone();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
    // Nested routers see a stripped path; the original URI has the whole one.
    let target = req
        .extensions()
        .get::<OriginalUri>()
        .map(|u| u.path().to_string())
        .unwrap_or_else(|| req.uri().path().to_string());
    if crate::access::SENDER_ONLY.contains(&(method.as_str(), route.as_str())) {
        return ApiError::Forbidden(
            "Esta rota é do remetente público: use o token de usuário (pub_…) que um Admin gera em POST /api/users/{id}/api-token.".into(),
        )
        .into_response();
    }
    let needed = crate::access::required(&method, &route);
    let level = engine::access::Level::parse(&owner.level).unwrap_or(engine::access::Level::Read);
    if level < needed {
        return ApiError::InsufficientLevel {
            needed,
            held: level,
        }
        .into_response();
    }
    req.extensions_mut().insert(owner.clone());
    let mut resp = next.run(req).await;
    if let Some(headers) = rate_headers {
        resp.headers_mut().extend(headers);
    }
    // The MCP endpoint's tools call their routes in process; those calls write their own
    // audit lines, so the JSON-RPC envelope does not.
    if route != "/api/v1/mcp" {
        audit_write(
            &state,
            owner.account_id,
            &owner.token_name,
            &method,
            &route,
            &target,
            resp.status(),
        )
        .await;
    }
    resp
}

/// What the account token (`svc_…`) a request bears grants. Errors: 401 (`unauthorized`
/// without one or for an unknown one; `token_revoked` for a revoked one, issue 55), or the
/// store's.
async fn token_owner(
    state: &AppState,
    token: Option<&str>,
) -> Result<storage::accounts::TokenOwner, ApiError> {
    let token = token.ok_or(ApiError::Unauthorized)?;
    let store = state.services.store();
    match store.authenticate_token(token).await? {
        Some(owner) => Ok(owner),
        // A revoked token says so; any other refusal stays the generic one (issue 55).
        None if store.token_revoked(token).await? => Err(ApiError::TokenRevoked),
        None => Err(ApiError::Unauthorized),
    }
}

/// `Authorization: Bearer pub_…` (the public sender, D-060): the token's active user, only
/// on the sender's routes (403 elsewhere), under the sender's own rate limit (120 per minute);
/// the handlers of the shared paths see a [`storage::sender::SenderCaller`].
async fn authenticate_sender(
    state: AppState,
    token: String,
    mut req: Request,
    next: Next,
) -> Response {
    let caller = match state
        .services
        .store()
        .authenticate_sender_token(&token)
        .await
    {
        Ok(Some(c)) => c,
        Ok(None) => return ApiError::Unauthorized.into_response(),
        Err(e) => return ApiError::from(e).into_response(),
    };
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
    let method = req.method().clone();
    if !crate::access::SENDER_ROUTES.contains(&(method.as_str(), route.as_str())) {
        return ApiError::Forbidden(
            "Este token é do remetente público: ele só usa GET /api/v1/numbers, GET /api/v1/templates, POST /api/v1/messages e GET /api/v1/messages/{id}. Para o resto da API, use um token da conta (svc_…).".into(),
        )
        .into_response();
    }
    let rate_headers = match &state.config.sender_rate_limit {
        Some(limit) => match limit.check(caller.token_id) {
            crate::limits::RateVerdict::Allowed(headers) => Some(headers),
            crate::limits::RateVerdict::Refused(resp) => return resp,
        },
        None => None,
    };
    let target = req
        .extensions()
        .get::<OriginalUri>()
        .map(|u| u.path().to_string())
        .unwrap_or_else(|| req.uri().path().to_string());
    let author = format!(
        "{} <{}> (remetente público)",
        caller.user.name, caller.user.email
    );
    // Handlers that take the account's caller (idempotency) see the user's account.
    req.extensions_mut().insert(storage::accounts::TokenOwner {
        token_id: 0,
        token_name: author.clone(),
        level: "write".into(),
        account_id: caller.user.account_id,
        account_slug: caller.account_slug.clone(),
    });
    let account_id = caller.user.account_id;
    req.extensions_mut().insert(caller);
    let mut resp = next.run(req).await;
    if let Some(headers) = rate_headers {
        resp.headers_mut().extend(headers);
    }
    audit_write(
        &state,
        account_id,
        &author,
        &method,
        &route,
        &target,
        resp.status(),
    )
    .await;
    resp
}

/// The value of `Authorization: Bearer <value>` (either case of `Bearer`), trimmed.
pub fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
}

/// Appends a successful write (any method but GET/HEAD/OPTIONS answered 2xx) to the account's
/// audit log: who, `METHOD /route/{template}`, the concrete path, the status.
pub(crate) async fn audit_write(
    state: &AppState,
    account_id: i64,
    author: &str,
    method: &Method,
    route: &str,
    target: &str,
    status: axum::http::StatusCode,
) {
    let write = !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
    if !write || !status.is_success() {
        return;
    }
    if let Err(e) = state
        .services
        .store()
        .append_audit(
            account_id,
            author,
            &format!("{method} {route}"),
            target,
            status.as_u16(),
        )
        .await
    {
        tracing::error!(error = %e, "could not append to the audit log");
    }
}

/// The `method` label of a request: a standard method's name, `other` for anything else
/// (issue 46: an unauthenticated client must not mint a label per invented method).
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

/// Counts requests by route (`unmatched` for every path no route serves), method (standard
/// methods, else `other`) and status, and records their latency.
pub async fn track_metrics(req: Request, next: Next) -> Response {
    let start = Instant::now();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let method = method_label(req.method());
    let resp = next.run(req).await;
    let status = resp.status().as_u16().to_string();
    metrics::counter!("disparo_http_requests_total", "route" => route.clone(), "method" => method, "status" => status).increment(1);
    metrics::histogram!("disparo_http_request_duration_seconds", "route" => route, "method" => method)
        .record(start.elapsed().as_secs_f64());
    resp
}

/// The policy of the pages served outside the web panel (`/docs*`, public wiki pages `/w/…`):
/// their own scripts and styles only, never framed (issue 46).
const DOCS_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'";

/// Security headers on every answer (issue 46): `X-Content-Type-Options: nosniff`; on the
/// documentation and public wiki pages also a content security policy and `X-Frame-Options:
/// DENY` (the web panel sets its own).
pub async fn security_headers(req: Request, next: Next) -> Response {
    use axum::http::{header, HeaderValue};
    let page = {
        let p = req.uri().path();
        p == "/docs" || p.starts_with("/docs/") || p.starts_with("/w/")
    };
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.entry(header::X_CONTENT_TYPE_OPTIONS)
        .or_insert(HeaderValue::from_static("nosniff"));
    if page {
        h.entry(header::CONTENT_SECURITY_POLICY)
            .or_insert(HeaderValue::from_static(DOCS_POLICY));
        h.entry(header::X_FRAME_OPTIONS)
            .or_insert(HeaderValue::from_static("DENY"));
        h.entry(header::REFERRER_POLICY)
            .or_insert(HeaderValue::from_static("same-origin"));
    }
    resp
}

/// The request id header (issue 49): accepted from the caller, else made here.
pub const REQUEST_ID: &str = "x-request-id";

/// Whether a caller's `X-Request-Id` is kept: 1 to 128 characters of `A–Z a–z 0–9 . _ - :`
/// (a UUID, a ULID, a trace id); anything else is replaced, so a log line never carries what a
/// caller smuggled into it.
fn acceptable_request_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b':'))
}

/// A new request id: 32 lowercase hex digits (128 random bits).
fn new_request_id() -> String {
    let bytes: [u8; 16] = rand::random();
    hex::encode(bytes)
}

/// Answers 503 `database_unavailable` (`Retry-After`) at once while the database is away
/// (issue 53, D-124; the storage's probe decides), for every request that needs it: the
/// account, panel and sender APIs and the webhook receivers (the provider keeps a refused
/// webhook and retries). `/health`, `/metrics`, the documents and the pages' assets are
/// served as usual; a page of the panel shows the error of the API call it makes.
pub async fn database_gate(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if state.services.store().available() || !needs_database(req.uri().path()) {
        return next.run(req).await;
    }
    metrics::counter!("disparo_database_unavailable_answers_total").increment(1);
    ApiError::DatabaseUnavailable.into_response()
}

/// Whether a request to `path` cannot be served without the database.
fn needs_database(path: &str) -> bool {
    const SERVED_WITHOUT: [&str; 4] = [
        "/api/v1/health",
        "/api/openapi.json",
        "/api/v1/openapi.json",
        "/api/v1/sender/openapi.json",
    ];
    (path.starts_with("/api/") || path.starts_with("/webhooks/")) && !SERVED_WITHOUT.contains(&path)
}

/// `X-Request-Id` on every answer (issue 49): the caller's when acceptable
/// ([`acceptable_request_id`]), else a new one; set on the request before the tracing span is
/// made (the span's `request_id` field, so every log line of the request carries it) and on
/// the answer, errors and panics included.
pub async fn request_id(mut req: Request, next: Next) -> Response {
    use axum::http::HeaderValue;
    let id = req
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| acceptable_request_id(v))
        .map(str::to_string)
        .unwrap_or_else(new_request_id);
    let value = HeaderValue::from_str(&id).expect("an acceptable id is a header value");
    req.headers_mut().insert(REQUEST_ID, value.clone());
    let mut resp = next.run(req).await;
    resp.headers_mut().insert(REQUEST_ID, value);
    resp
}
