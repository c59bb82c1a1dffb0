//! `GET /api/cluster` (issue 52): the cluster as the answering node sees it — the live nodes
//! with the cells and numbers each runs, and the account's own cells with their holder,
//! epoch and lease age (`services::cluster`). Admin only; `modo: "um_no"` without
//! `NATS_URL`.

use super::PanelUser;
use crate::error::ApiError;
use crate::AppState;
use axum::extract::State;
use axum::Json;
use serde::Serialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(cluster))
}

/// A live node.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PanelNodeOut {
    /// Its name (`DISPARO_NODE_ID`).
    #[serde(rename = "nome")]
    name: String,
    /// Cells it holds.
    #[serde(rename = "celulas")]
    cells: usize,
    /// Numbers in those cells (every account's).
    #[serde(rename = "numeros")]
    numbers: usize,
    /// Whether it is the node that answered.
    #[serde(rename = "este")]
    this: bool,
}

/// One of the account's cells (a BM and the groups it spans, or a number alone).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PanelCellOut {
    /// `bm:12`, `group:3`, `ch:7`.
    #[serde(rename = "chave")]
    key: String,
    /// The node holding it; null while nobody does.
    #[serde(rename = "no")]
    node: Option<String>,
    /// The lease's epoch (the fencing token of everything sent under it).
    #[serde(rename = "epoca")]
    epoch: i64,
    /// How long its holder has held it, ms.
    #[serde(rename = "ha_ms")]
    held_for_ms: i64,
    /// Time left before the lease expires unless renewed, ms.
    #[serde(rename = "expira_em_ms")]
    expires_in_ms: i64,
    /// The account's numbers in it.
    #[serde(rename = "numeros")]
    numbers: Vec<i64>,
}

/// `GET /api/cluster`'s `data`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PanelClusterOut {
    /// `cluster` (several nodes on PostgreSQL and NATS) or `um_no` (one process).
    modo: &'static str,
    /// The node that answered (cluster mode).
    #[serde(rename = "no", skip_serializing_if = "Option::is_none")]
    node: Option<String>,
    /// The lease TTL, ms.
    #[serde(rename = "ttl_lease_ms", skip_serializing_if = "Option::is_none")]
    lease_ttl_ms: Option<i64>,
    /// Time since the answering node's last keeper round, ms.
    #[serde(rename = "rodada_ha_ms", skip_serializing_if = "Option::is_none")]
    round_age_ms: Option<i64>,
    /// The live nodes.
    #[serde(rename = "nos")]
    nodes: Vec<PanelNodeOut>,
    /// The account's cells.
    #[serde(rename = "celulas")]
    cells: Vec<PanelCellOut>,
}

#[utoipa::path(get, operation_id = "panel_cluster", summary = "Lê o estado do cluster e das células da conta", path = "/cluster", tag = "Cluster",
    responses((status = 200, description = "`data`: `{modo, no, ttl_lease_ms, rodada_ha_ms, nos: [{nome, celulas, numeros, este}], celulas: [{chave, no, epoca, ha_ms, expira_em_ms, numeros}]}`; só `modo: \"um_no\"` e listas vazias sem `NATS_URL`", body = crate::envelope::Data<PanelClusterOut>)))]
pub(crate) async fn cluster(
    State(state): State<AppState>,
    me: PanelUser,
) -> Result<Json<crate::envelope::Data<PanelClusterOut>>, ApiError> {
    let overview = state.services.cluster_overview(me.account_id()).await?;
    let out = match overview {
        None => PanelClusterOut {
            modo: "um_no",
            node: None,
            lease_ttl_ms: None,
            round_age_ms: None,
            nodes: Vec::new(),
            cells: Vec::new(),
        },
        Some(o) => PanelClusterOut {
            modo: "cluster",
            node: Some(o.node),
            lease_ttl_ms: Some(o.lease_ttl_ms),
            round_age_ms: Some(o.round_age_ms),
            nodes: o
                .nodes
                .into_iter()
                .map(|n| PanelNodeOut {
                    name: n.name,
                    cells: n.cells,
                    numbers: n.numbers,
                    this: n.this,
                })
                .collect(),
            cells: o
                .cells
                .into_iter()
                .map(|c| PanelCellOut {
                    key: c.key,
                    node: c.node,
                    epoch: c.epoch,
                    held_for_ms: c.held_for_ms,
                    expires_in_ms: c.expires_in_ms,
                    numbers: c.numbers,
                })
                .collect(),
        },
    };
    Ok(crate::envelope::Data::json(out))
}
