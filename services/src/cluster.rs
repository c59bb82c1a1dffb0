//! The panel's cluster view (issue 52, `GET /api/cluster`): the live nodes with how many
//! cells and numbers each runs, and the account's own cells — which node holds each, under
//! which epoch, for how long. Other accounts' cells count in the nodes' totals only (their
//! keys name other tenants' businesses and are not shown).

use crate::Services;
use actors::error::ActorError;
use engine::cluster::{CellKey, Cells};
use std::collections::{BTreeMap, BTreeSet};

/// What a node carries, as the lease rows say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLoad {
    /// The node's name (`DISPARO_NODE_ID`).
    pub name: String,
    /// Cells it holds (unexpired leases).
    pub cells: usize,
    /// Numbers in those cells.
    pub numbers: usize,
    /// Whether it is the node that answered.
    pub this: bool,
}

/// One of the account's cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountCell {
    /// `bm:12`, `group:3` or `ch:7`.
    pub key: String,
    /// The node holding it; `None` while nobody does (released, or expired and not yet taken).
    pub node: Option<String>,
    /// The lease's epoch (0: never held).
    pub epoch: i64,
    /// How long its holder has held it, ms.
    pub held_for_ms: i64,
    /// Time left before the lease expires unless renewed, ms (negative: expired).
    pub expires_in_ms: i64,
    /// The account's numbers in it.
    pub numbers: Vec<i64>,
}

/// The cluster as one node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterOverview {
    /// The node that answered.
    pub node: String,
    /// The lease TTL, ms.
    pub lease_ttl_ms: i64,
    /// Time since its keeper's last round, ms.
    pub round_age_ms: i64,
    /// The live nodes, by name.
    pub nodes: Vec<NodeLoad>,
    /// The account's cells, by key.
    pub cells: Vec<AccountCell>,
}

impl Services {
    /// The cluster view for `account_id`; `None` on one node (no `NATS_URL`). Errors: the
    /// store's.
    pub async fn cluster_overview(
        &self,
        account_id: i64,
    ) -> Result<Option<ClusterOverview>, ActorError> {
        let Some((view, ttl, round_age_ms)) = self.cluster_view() else {
            return Ok(None);
        };
        let store = self.store();
        let ttl_ms = ttl.as_millis() as i64;
        let (names, leases, members, own) = tokio::try_join!(
            store.live_nodes(ttl_ms),
            store.leases(),
            store.channel_memberships(),
            store.list_channels(account_id),
        )?;
        let cells = Cells::compute(&members);
        let own: BTreeSet<i64> = own.iter().map(|c| c.id).collect();
        let mut nodes: BTreeMap<String, NodeLoad> = names
            .into_iter()
            .map(|name| {
                let this = name == view.node;
                let load = NodeLoad {
                    name: name.clone(),
                    cells: 0,
                    numbers: 0,
                    this,
                };
                (name, load)
            })
            .collect();
        let mut account_cells = Vec::new();
        for lease in leases {
            let key = CellKey::from_stored(lease.key.clone());
            let numbers: Vec<i64> = cells.channels_of(&key).iter().map(|c| c.get()).collect();
            let held = lease.owner_node.clone().filter(|_| lease.expires_in_ms > 0);
            if let Some(load) = held.as_ref().and_then(|n| nodes.get_mut(n)) {
                load.cells += 1;
                load.numbers += numbers.len();
            }
            let mine: Vec<i64> = numbers.into_iter().filter(|c| own.contains(c)).collect();
            if !mine.is_empty() {
                account_cells.push(AccountCell {
                    key: lease.key,
                    node: held,
                    epoch: lease.epoch,
                    held_for_ms: lease.held_for_ms,
                    expires_in_ms: lease.expires_in_ms,
                    numbers: mine,
                });
            }
        }
        Ok(Some(ClusterOverview {
            node: view.node,
            lease_ttl_ms: ttl_ms,
            round_age_ms,
            nodes: nodes.into_values().collect(),
            cells: account_cells,
        }))
    }
}
