//! Operations: `GET /health` (no auth) and `GET /metrics` (Prometheus text).

use crate::AppState;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::time::Duration;

/// Routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics))
}

/// `GET /api/v1/health` (no token), described in the API document.
pub fn api_routes() -> utoipa_axum::router::OpenApiRouter<AppState> {
    utoipa_axum::router::OpenApiRouter::new().routes(utoipa_axum::routes!(health))
}

/// `GET /health`'s answer.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct HealthOut {
    /// `ok` or `degraded` (the database does not answer, or a cluster node cannot renew).
    #[schema(pattern = "^(ok|degraded)$")]
    status: &'static str,
    /// disparo's version.
    version: &'static str,
    /// The database.
    database: DatabaseOut,
    /// Cluster mode only (`NATS_URL`, issue 52): this node and what it holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster: Option<ClusterOut>,
}

/// This node in cluster mode, as `GET /health` shows it (the cells' keys stay in the panel).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ClusterOut {
    /// This node's name (`DISPARO_NODE_ID`).
    node: String,
    /// Live nodes it sees, itself included.
    nodes: usize,
    /// Cells whose lease it holds.
    cells: usize,
    /// Numbers it runs.
    channels: usize,
    /// Campaigns it coordinates (it holds their `campaign:<id>` lease: asks every number for
    /// credits and grants each node its share).
    campaigns: Vec<i64>,
    /// Time since its last lease round, ms; past the lease TTL the node is `degraded` (it
    /// cannot renew, so it sends nothing).
    last_round_ms: i64,
}

/// The database as `GET /health` sees it.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct DatabaseOut {
    /// It answered.
    ok: bool,
    /// `sqlite` or `postgres`.
    backend: &'static str,
    /// How long the ping took (ms).
    latency_ms: Option<f64>,
    /// Why it did not answer (pt-BR).
    error: Option<&'static str>,
}

/// Verifica a saúde do serviço e do banco de dados
///
/// `{"data": {"status": "ok"|"degraded", "version", "database": {ok, backend, latency_ms},
/// "cluster"?: {node, nodes, cells, channels, campaigns, last_round_ms}}}`; 503 when the database does not
/// answer or, in cluster mode, when the node's last lease round is older than the lease TTL.
#[utoipa::path(
    get,
    operation_id = "ops_health",
    path = "/health",
    tag = "Operação",
    security(()),
    responses(
        (status = 200, description = "Serviço e banco de dados respondendo", body = crate::envelope::Data<HealthOut>),
        (status = 503, description = "Banco de dados indisponível ou, em modo cluster, nó que não renova seus leases", body = crate::envelope::Data<HealthOut>)
    )
)]
async fn health(State(state): State<AppState>) -> Response {
    let store = state.services.store();
    // The probe's verdict first (D-124), then a ping of at most 2 s: a database away is
    // reported at once, not after the pool's wait for a connection.
    // While the probe holds the database away, the outage is logged once, by the probe at its
    // change (`storage::availability`): a monitor polling `/health` every second adds no
    // line per call. A ping that fails while the probe still saw the database is logged.
    let pinged = match store.available() {
        true => tokio::time::timeout(Duration::from_secs(2), store.ping())
            .await
            .map_err(|_| "timed out".to_string())
            .and_then(|r| r.map_err(|e| e.to_string()))
            .inspect_err(|e| tracing::error!(error = %e, "health: database unreachable")),
        false => Err("the probe marked it unavailable".to_string()),
    };
    let (ok, latency_ms, error) = match pinged {
        Ok(d) => (true, Some(d.as_secs_f64() * 1000.0), None),
        Err(_) => (false, None, Some("banco de dados indisponível")),
    };
    let view = state.services.cluster_view();
    let stale = view
        .as_ref()
        .is_some_and(|(_, ttl, since)| *since > ttl.as_millis() as i64);
    let cluster = view.map(|(v, _, since)| ClusterOut {
        node: v.node,
        nodes: v.nodes.len(),
        cells: v.cells.len(),
        channels: v.cells.iter().map(|c| c.channels.len()).sum(),
        campaigns: v.campaigns,
        last_round_ms: since,
    });
    let ok = ok && !stale;
    let body = crate::envelope::Data::json(HealthOut {
        status: if ok { "ok" } else { "degraded" },
        version: env!("CARGO_PKG_VERSION"),
        cluster,
        database: DatabaseOut {
            ok,
            backend: store.backend().as_str(),
            latency_ms,
            error,
        },
    });
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, body).into_response()
}

/// `GET /metrics`: the Prometheus text. With `DISPARO_METRICS_TOKEN` set, only a request
/// with `Authorization: Bearer <token>` gets it (401 otherwise): the series name every
/// account's channels and campaigns.
async fn metrics(State(state): State<AppState>, headers: axum::http::HeaderMap) -> Response {
    if let Some(want) = &state.config.metrics_token {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default();
        if !engine::secret::constant_time_eq(given.as_bytes(), want.expose().as_bytes()) {
            return crate::error::ApiError::Unauthorized.into_response();
        }
    }
    state.services.record_cluster_gauges();
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
        .into_response()
}
