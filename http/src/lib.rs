//! disparo's HTTP facade (DESIGN.md §5): axum routers per spec section, the auth middleware,
//! the error mapping, metrics and tracing. Handlers extract, ask the runtime (actors) or read
//! the store once, and render; no SQL, no rule and no provider call lives here.

pub mod access;
pub mod docs;
pub mod envelope;
pub mod error;
pub mod events_doc;
pub mod examples;
pub mod extract;
pub mod limits;
pub mod middleware;
pub mod openapi;
pub mod panel;
pub mod routes;
mod web;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::response::IntoResponse;
use axum::Router;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use services::Services;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;

/// HTTP settings.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Public base URL of this gateway (for the webhook URLs it tells operators to
    /// configure), e.g. `https://disparo.example.com`.
    pub public_url: String,
    /// `PROVIDER_VERIFY_TOKEN`: the app-level webhook handshake token.
    pub provider_verify_token: Option<String>,
    /// Largest API request body, bytes.
    pub max_body_bytes: usize,
    /// Largest provider webhook body, bytes: 2 MB (the provider batches up to 1,000 updates
    /// of well under 1 KB each); refused with 413 before it is read further (issue 15).
    pub max_webhook_bytes: usize,
    /// Largest alternative-provider notification body, bytes (64 KB).
    pub max_notification_bytes: usize,
    /// `DISPARO_METRICS_TOKEN`: when set, `GET /metrics` needs `Authorization: Bearer` with
    /// it (every account's channels show there).
    pub metrics_token: Option<engine::Secret>,
    /// Request timeout and concurrency limit (the header timeout is the accept loop's).
    pub limits: limits::ServerLimits,
    /// Requests per minute per API token (`DISPARO_RATE_LIMIT_PER_MIN`); `None`: no limit.
    pub rate_limit: Option<limits::TokenRateLimit>,
    /// How long a panel session lives without use (`DISPARO_SESSION_TTL_MS`, default 12 h;
    /// sliding).
    pub session_ttl: Duration,
    /// The panel's login attempt limits (per e-mail and per address).
    pub login_limit: panel::LoginLimit,
    /// The public sender's per-token limit (`DISPARO_SENDER_RATE_PER_MIN`, 120: at most that
    /// many in any 60 s, D-060); `None`: no limit.
    pub sender_rate_limit: Option<limits::TokenRateLimit>,
    /// `DISPARO_TRUSTED_PROXIES`: the reverse proxies whose `X-Forwarded-For` names the
    /// client (issue 46); from any other peer the header is ignored.
    pub trusted_proxies: Vec<engine::net::Subnet>,
    /// Refused calls per source address on the unauthenticated receivers
    /// (`DISPARO_RECEIVER_REFUSALS_PER_MIN`, issue 46); `None`: no limit.
    pub receiver_refusals: Option<limits::RefusalLimit>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            public_url: "http://127.0.0.1:8080".into(),
            provider_verify_token: None,
            max_body_bytes: 1024 * 1024,
            max_webhook_bytes: 2 * 1024 * 1024,
            max_notification_bytes: 64 * 1024,
            metrics_token: None,
            limits: limits::ServerLimits::default(),
            rate_limit: None,
            session_ttl: Duration::from_secs(12 * 3600),
            login_limit: panel::LoginLimit::default(),
            sender_rate_limit: limits::TokenRateLimit::sender(120),
            trusted_proxies: Vec::new(),
            receiver_refusals: limits::RefusalLimit::new(60),
        }
    }
}

/// What every handler gets.
#[derive(Clone)]
pub struct AppState {
    /// The services and, through them, the actors' runtime.
    pub services: Services,
    /// Settings.
    pub config: Arc<HttpConfig>,
    /// Prometheus renderer.
    pub metrics: PrometheusHandle,
}

/// Installs the process-wide Prometheus recorder once and returns its handle (also starts
/// the exporter's upkeep task). `node`: cluster mode's node name, a `node` label on every
/// series (issue 52); the first call's value holds for the process.
pub fn install_metrics(node: Option<&str>) -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            // Every histogram is exported with buckets (aggregatable with
            // `histogram_quantile`), none as a summary: the exporter's summaries keep a
            // DDSketch per series and time slice, megabytes under a campaign's sample rate.
            let builder = match node {
                Some(n) => PrometheusBuilder::new().add_global_label("node", n),
                None => PrometheusBuilder::new(),
            };
            let handle = builder
                .set_buckets(&[
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                    10.0,
                ])
                .expect("static buckets are valid")
                .set_buckets_for_metric(
                    Matcher::Full("disparo_campaign_commit_batch".into()),
                    &[1.0, 10.0, 50.0, 100.0, 250.0, 500.0, 750.0, 1000.0],
                )
                .expect("static buckets are valid")
                .install_recorder()
                .expect("the metrics recorder is installed once");
            // Histogram samples wait in the recorder until an upkeep folds them in: every
            // second keeps that buffer small under load (~30,000 samples/s during a campaign).
            // The process's own series (`process_resident_memory_bytes`,
            // `process_cpu_seconds_total`…, metrics-process) are read at the same pace.
            let process = metrics_process::Collector::default();
            process.describe();
            let upkeep = handle.clone();
            tokio::spawn(async move {
                loop {
                    process.collect();
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    upkeep.run_upkeep();
                }
            });
            handle
        })
        .clone()
}

/// The authenticated routes of `/api/v1` (paths relative to it), with their part of the API
/// document: the routers are built from the handlers' `#[utoipa::path]` annotations.
pub fn api_routes() -> utoipa_axum::router::OpenApiRouter<AppState> {
    use utoipa::OpenApi;
    utoipa_axum::router::OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .merge(routes::channels::routes())
        .merge(routes::guardrails::routes())
        .merge(routes::accounts::routes())
        .merge(routes::templates::routes())
        .merge(routes::tokens::routes())
        .merge(routes::campaigns::routes())
        .merge(routes::wiki::routes())
        .merge(routes::messages::routes())
        .merge(routes::webhooks::routes())
        .merge(routes::mcp::routes())
        .merge(routes::alternative::routes())
        .merge(routes::reports::routes())
        .merge(routes::groups::routes())
}

/// The routes of `/api/v1` that take no token (`GET /health`), with their part of the API
/// document.
pub fn public_api_routes() -> utoipa_axum::router::OpenApiRouter<AppState> {
    routes::ops::api_routes()
}

/// The layers every answer goes through: the 404/405 fallbacks, request metrics, security
/// headers, a tracing span per request (its matched route and request id), panics answered as
/// 500, and `X-Request-Id` on every answer (outermost, so a panic's answer carries it too).
fn with_server_layers(app: Router<AppState>) -> Router<AppState> {
    app.fallback(|| async { error::ApiError::RouteNotFound })
        .method_not_allowed_fallback(|| async { error::ApiError::MethodNotAllowed.into_response() })
        .layer(axum::middleware::from_fn(middleware::track_metrics))
        .layer(axum::middleware::from_fn(middleware::security_headers))
        .layer(TraceLayer::new_for_http().make_span_with(|req: &Request| {
            let route = req
                .extensions()
                .get::<MatchedPath>()
                .map(|m| m.as_str().to_string())
                .unwrap_or_default();
            let request_id = req
                .headers()
                .get(middleware::REQUEST_ID)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            tracing::info_span!("request", method = %req.method(), route, request_id)
        }))
        .layer(CatchPanicLayer::custom(|_| {
            error::ApiError::Internal("a handler panicked".into()).into_response()
        }))
        .layer(axum::middleware::from_fn(middleware::request_id))
}

/// The whole application router.
pub fn router(state: AppState) -> Router {
    // Building the routers also builds their part of the API document: do it once per
    // process (the MCP endpoint builds a router per tool call).
    type Routers = (
        Router<AppState>,
        Router<AppState>,
        Router<AppState>,
        Router<AppState>,
    );
    static ROUTERS: OnceLock<Routers> = OnceLock::new();
    let (api, public_api, panel_api, panel_public) = ROUTERS
        .get_or_init(|| {
            (
                api_routes().split_for_parts().0,
                public_api_routes().split_for_parts().0,
                panel::routes().split_for_parts().0,
                panel::public_routes().split_for_parts().0,
            )
        })
        .clone();
    let panel_api = recorded(panel_api)
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            panel::authenticate,
        ))
        .merge(recorded(panel_public))
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes));
    // The web panel calls the panel API in-process, through its own middleware (D-077).
    let panel_service = web::PanelApi(
        Router::new()
            .nest("/api", panel_api.clone())
            .with_state(state.clone()),
    );
    let api = recorded(api.route("/numbers", axum::routing::get(routes::sender::numbers)))
        // Inside the token check (a route layer added later runs first).
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            routes::idempotency::keyed_creates,
        ))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            middleware::authenticate,
        ))
        .merge(recorded(public_api))
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes));
    // The unauthenticated receivers: an address refused too often is not heard (issue 46).
    let refusals = || axum::middleware::from_fn_with_state(state.clone(), limits::limit_refusals);
    let provider = routes::provider::routes()
        .layer(DefaultBodyLimit::max(state.config.max_webhook_bytes))
        .merge(
            routes::alternative::public_routes()
                .layer(DefaultBodyLimit::max(state.config.max_notification_bytes)),
        )
        .route_layer(refusals());
    let app = Router::new()
        .nest("/api/v1", api)
        .nest("/api", panel_api)
        .merge(provider)
        .merge(
            panel::hygiene_callback_routes()
                .layer(DefaultBodyLimit::max(state.config.max_notification_bytes))
                .route_layer(refusals()),
        )
        .merge(routes::ops::routes())
        .merge(docs::routes())
        .merge(routes::wiki::public_routes())
        .merge(web::routes(panel_service))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            middleware::database_gate,
        ));
    limited(with_server_layers(app), state)
}

/// `router` with its exchanges recorded when `DISPARO_RECORD_EXAMPLES` is set (the
/// documents' examples, [`examples`]); as it is otherwise.
fn recorded(router: Router<AppState>) -> Router<AppState> {
    if examples::recording_enabled() {
        router.route_layer(axum::middleware::from_fn(examples::record))
    } else {
        router
    }
}

/// The whole server behind one limit (issue 46; a layer on the router would be one per
/// route): requests shed past `max_concurrent` (503), answered 503 after `request_timeout`.
fn limited(app: Router<AppState>, state: AppState) -> Router {
    let limits = state.config.limits;
    let limited = tower::ServiceBuilder::new()
        .layer(axum::error_handling::HandleErrorLayer::new(
            |err: tower::BoxError| async move {
                if err.is::<tower::timeout::error::Elapsed>() {
                    error::ApiError::TimedOut
                } else if err.is::<tower::load_shed::error::Overloaded>() {
                    error::ApiError::Overloaded
                } else {
                    error::ApiError::Internal(err.to_string())
                }
            },
        ))
        .load_shed()
        .concurrency_limit(limits.max_concurrent)
        .timeout(limits.request_timeout)
        .service(app.with_state(state));
    Router::new().fallback_service(limited)
}
