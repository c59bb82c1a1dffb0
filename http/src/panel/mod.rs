//! The operator panel's JSON API under `/api` (spec `panel-api.md`, issue 19): session
//! login, users and roles, the inventory of BMs, WABAs, numbers and clients, templates, tasks,
//! wiki, dashboard, alerts and the full state. Its OpenAPI document is served at
//! `GET /api/openapi.json` and shown at `/docs` beside the account API's.
//!
//! Every route but `POST /api/login` needs `Authorization: Bearer ses_…`. The middleware
//! resolves the session (sliding expiry), refuses a role the route's line of [`access::ROUTES`]
//! does not list (403 `papel_insuficiente`), hands the handler the user and its scope, and
//! writes every successful write to the account's audit log under the user's name. Templates
//! and wiki pages are the account API's own handlers (one implementation): the middleware also
//! presents the user to them as the account's caller.

pub mod access;
pub(crate) mod campaigns;
mod client;
mod cluster;
mod inventory;
mod logs;
mod people;
mod session;

use crate::error::ApiError;
use crate::AppState;
use axum::extract::{FromRequestParts, MatchedPath, OriginalUri, Request, State};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use engine::panel::{looks_like_session, Role, Scope};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;
use storage::accounts::TokenOwner;
use storage::panel::UserRecord;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::server::Server;
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;

/// The logged-in panel user behind a request (set by [`authenticate`]).
#[derive(Debug, Clone)]
pub struct PanelUser {
    /// The user.
    pub user: UserRecord,
    /// The session's id (logout revokes it).
    pub session_id: i64,
    /// The account's slug.
    pub account_slug: String,
    /// The role, parsed.
    pub role: Role,
}

impl PanelUser {
    /// The account.
    pub fn account_id(&self) -> i64 {
        self.user.account_id
    }

    /// What the user may see.
    pub fn scope(&self) -> Scope {
        self.user.scope()
    }

    /// The audit log's author: `Nome <email> (painel)`.
    pub fn author(&self) -> String {
        format!("{} <{}> (painel)", self.user.name, self.user.email)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for PanelUser {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<PanelUser>()
            .cloned()
            .ok_or(ApiError::SessionInvalid)
    }
}

/// Limits on login attempts (issue 19, issue 46): per e-mail and client address, a burst of
/// 10 then one every 30 s (another address's wrong passwords never lock the user out); per
/// client address, a burst of 30 then one every 2 s. Every attempt counts.
#[derive(Clone)]
pub struct LoginLimit {
    /// By (the e-mail's digest, the address).
    by_email: Arc<DefaultKeyedRateLimiter<(String, Option<IpAddr>)>>,
    by_ip: Arc<DefaultKeyedRateLimiter<IpAddr>>,
    /// This node's attempts for the other nodes (cluster mode).
    pending: Arc<crate::limits::Pending>,
}

impl std::fmt::Debug for LoginLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LoginLimit")
    }
}

impl Default for LoginLimit {
    fn default() -> Self {
        let quota = |every: Duration, burst: u32| {
            Quota::with_period(every)
                .expect("non-zero period")
                .allow_burst(NonZeroU32::new(burst).expect("non-zero burst"))
        };
        Self {
            by_email: Arc::new(RateLimiter::keyed(quota(Duration::from_secs(30), 10))),
            by_ip: Arc::new(RateLimiter::keyed(quota(Duration::from_secs(2), 30))),
            pending: Arc::default(),
        }
    }
}

/// The key of an e-mail in the limits: its SHA-256 (lowercased, trimmed), hex — the same on
/// every node, and no address on the wire between them.
fn email_key(email: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(email.trim().to_lowercase().as_bytes()))
}

impl LoginLimit {
    /// Takes one attempt for `email` from `ip`; `Err(seconds to wait)` when either is spent.
    pub fn take(&self, email: &str, ip: Option<IpAddr>) -> Result<(), u64> {
        use governor::clock::{Clock, DefaultClock};
        let now = DefaultClock::default().now();
        let wait = |e: governor::NotUntil<governor::clock::QuantaInstant>| {
            e.wait_time_from(now).as_secs().max(1)
        };
        if let Some(ip) = ip {
            self.by_ip.check_key(&ip).map_err(wait)?;
            self.pending.count(|| format!("i|{ip}"));
        }
        let key = email_key(email);
        self.by_email.check_key(&(key.clone(), ip)).map_err(wait)?;
        self.pending
            .count(|| format!("e|{key}|{}", ip.map(|i| i.to_string()).unwrap_or_default()));
        Ok(())
    }
}

/// Cluster mode: login attempts count on every node (issue 52, D-112).
impl actors::cluster::shared_limits::ClusterLimit for LoginLimit {
    fn name(&self) -> &'static str {
        "login"
    }

    fn share(&self) {
        self.pending.share();
    }

    fn drain(&self) -> Vec<(String, u32)> {
        self.pending.drain()
    }

    fn absorb(&self, key: &str, n: u32) {
        let mut parts = key.split('|');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("i"), Some(ip), None) => {
                if let Ok(ip) = ip.parse::<IpAddr>() {
                    for _ in 0..n.min(30) {
                        if self.by_ip.check_key(&ip).is_err() {
                            break;
                        }
                    }
                }
            }
            (Some("e"), Some(digest), Some(ip)) => {
                let ip = ip.parse::<IpAddr>().ok();
                let key = (digest.to_string(), ip);
                for _ in 0..n.min(10) {
                    if self.by_email.check_key(&key).is_err() {
                        break;
                    }
                }
            }
            _ => {}
        }
    }
}

/// Resolves the session, checks the route's roles, and audits successful writes.
pub async fn authenticate(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let token = crate::middleware::bearer(req.headers())
        .filter(|t| looks_like_session(t))
        .map(str::to_string);
    let Some(token) = token else {
        return ApiError::SessionInvalid.into_response();
    };
    let ttl = state.config.session_ttl.as_millis() as i64;
    let session = match state
        .services
        .store()
        .authenticate_session(&token, ttl)
        .await
    {
        Ok(Some(s)) => s,
        Ok(None) => return ApiError::SessionInvalid.into_response(),
        Err(e) => return ApiError::from(e).into_response(),
    };
    let Some(role) = Role::parse(&session.user.role) else {
        return ApiError::SessionInvalid.into_response();
    };
    let method = req.method().clone();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
    let target = req
        .extensions()
        .get::<OriginalUri>()
        .map(|u| u.path().to_string())
        .unwrap_or_else(|| req.uri().path().to_string());
    let allowed = access::allowed(&method, &route);
    if !allowed.contains(&role) {
        return ApiError::RoleForbidden {
            allowed: allowed.iter().map(|r| r.as_str()).collect(),
            held: role.as_str().into(),
        }
        .into_response();
    }
    let user = PanelUser {
        user: session.user.clone(),
        session_id: session.id,
        account_slug: session.account_slug.clone(),
        role,
    };
    // The account API's handlers mounted here (templates, wiki) see the user as the
    // account's caller; the role table above already decided what it may do.
    req.extensions_mut().insert(TokenOwner {
        token_id: 0,
        token_name: user.author(),
        level: match role {
            Role::Admin => "admin",
            Role::Operador => "write",
            Role::Client => "read",
        }
        .into(),
        account_id: user.account_id(),
        account_slug: user.account_slug.clone(),
    });
    req.extensions_mut().insert(user.clone());
    let resp = next.run(req).await;
    crate::middleware::audit_write(
        &state,
        user.account_id(),
        &user.author(),
        &method,
        &route,
        &target,
        resp.status(),
    )
    .await;
    resp
}

struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "sessao",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("ses_…")
                    .description(Some(
                        "Token de sessão de `POST /api/login` (`Authorization: Bearer ses_…`); expira após o período de inatividade (D-054).",
                    ))
                    .build(),
            ),
        );
        openapi.servers = Some(vec![Server::new("/api")]);
    }
}

/// The panel document's header; the paths come from the routers.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "disparo — API do painel",
        description = "Painel do operador: sessão, usuários e papéis (Admin, Operador, Client), inventário de BMs, WABAs, números e clientes, templates, tarefas, wiki, dashboard, alertas e o estado completo. Respostas de sucesso têm `data`; erros têm `message` (pt-BR) e `code`. Toda resposta traz `X-Request-Id`: o do pedido quando é um identificador simples (1 a 128 caracteres de letras, dígitos, `.`, `_`, `-`, `:`), senão um novo (32 hexadecimais); ele aparece em cada linha de log do pedido.",
    ),
    security(("sessao" = [])),
    modifiers(&Security)
)]
pub struct PanelDoc;

/// The routes of `/api` behind a session (paths relative to it), with their document.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(PanelDoc::openapi())
        .merge(session::routes())
        .merge(people::routes())
        .merge(inventory::routes())
        .merge(logs::routes())
        .merge(client::routes())
        .merge(campaigns::routes())
        .merge(cluster::routes())
}

/// `POST /api/hygiene/callback` (no session: the hygiene service signs it).
pub fn hygiene_callback_routes() -> axum::Router<AppState> {
    campaigns::callback_routes()
}

/// `POST /api/login` (no session), with its document.
pub fn public_routes() -> OpenApiRouter<AppState> {
    session::public_routes()
}

/// The panel's whole OpenAPI document (built once).
pub fn document() -> &'static utoipa::openapi::OpenApi {
    static DOC: std::sync::OnceLock<utoipa::openapi::OpenApi> = std::sync::OnceLock::new();
    DOC.get_or_init(|| {
        let mut doc = routes().split_for_parts().1;
        doc.merge(public_routes().split_for_parts().1);
        crate::openapi::common_responses(&mut doc, crate::openapi::Surface::Panel);
        doc.merge(<crate::events_doc::PanelEvents as utoipa::OpenApi>::openapi());
        doc
    })
}
