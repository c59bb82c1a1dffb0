//! Cluster mode (issue 52, `../shared/CLUSTER.md`): when `NATS_URL` is set, this node runs
//! only the numbers of the cells it holds a lease on. The keeper task interprets
//! [`engine::cluster::Keeper`]'s effects every [`engine::cluster::keeper::renew_every_ms`]:
//! it renews the leases (and the session's heartbeat) in one statement, fences cells past their
//! local deadline, plans from the live nodes and the cells computed from storage, acquires,
//! hands off and releases, starts and stops the cells' channel actors, and starts its copy of
//! every running campaign (each node's copy sends through the numbers it runs, D-110). It also
//! records the channels other nodes run, so any node verifies and applies any provider
//! webhook; changes to a number's live state and reads of it go to its node over NATS
//! ([`control`]).
//!
//! The fence: every running channel has its cell's local deadline (ms on the runtime's clock);
//! the send paths check it right before a provider call ([`Shared::fenced`]), so a node frozen
//! past it (SIGSTOP, a lost database) sends nothing when it wakes, before the keeper has had a
//! turn to stop the cell.

mod control;
pub mod shared_limits;
pub mod wire;

pub(crate) use control::apply as apply_here;
pub use control::{
    forward_control, halt_everywhere, remote_ask, remote_credits, remote_grant, remote_send,
    remote_snapshot, CampaignGrant, Control, LiveState,
};

use crate::registry::RemoteChannel;
use crate::{Runtime, Shared};
use dashmap::DashMap;
use engine::cluster::{CellKey, Cells, Effect, Keeper, Membership};
use engine::ids::ChannelId;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Cluster mode's settings (`NATS_URL`, `DISPARO_NODE_ID`, `DISPARO_LEASE_TTL_MS`).
#[derive(Debug, Clone)]
pub struct ClusterSettings {
    /// This node's name (placement, leases, logs).
    pub node_id: String,
    /// A lease's time to live without renewal.
    pub lease_ttl: Duration,
    /// The NATS connection work is routed over.
    pub nats: async_nats::Client,
    /// The key every message between nodes is signed with (derived from the master key under
    /// [`NATS_SEAL_LABEL`]: every node of a cluster shares it, D-111).
    pub seal_key: engine::cluster::seal::SealKey,
}

/// The label the NATS signing key is derived from the master key under
/// (`storage::Cipher::derive_key`).
pub const NATS_SEAL_LABEL: &str = "cluster/nats-control/v1";

/// A cell this node holds, as the cluster view shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldCell {
    /// The cell's key (`bm:12`, `group:3`, `ch:7`).
    pub key: String,
    /// The lease's epoch.
    pub epoch: i64,
    /// The channels it runs here.
    pub channels: Vec<i64>,
    /// How long this node has held it, ms.
    pub held_for_ms: i64,
}

/// What the keeper saw at its last round: this node, the live nodes, the cells held here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterView {
    /// This node's name.
    pub node: String,
    /// The live nodes' names (this one included while its session is live).
    pub nodes: Vec<String>,
    /// The cells held here, by key.
    pub cells: Vec<HeldCell>,
    /// The campaigns coordinated here (their `campaign:<id>` lease is held here, D-123).
    pub campaigns: Vec<i64>,
    /// When the round ran, ms since the epoch (0: none yet).
    pub round_at_ms: i64,
}

/// The lease a running channel's sends go out under (cluster mode): its cell's local deadline
/// (ms on the runtime's clock), checked right before every provider call. Closed for good
/// when the cell stops on this node: a later acquisition of the cell makes a new fence, so a
/// send admitted under the old lease (a task that outlived its actor, a node woken from
/// SIGSTOP) never goes out under the new one. Always open on one node.
#[derive(Debug, Clone, Default)]
pub struct Fence(Option<Arc<FenceState>>);

/// A fence's deadline and the lease it stands for.
#[derive(Debug)]
struct FenceState {
    /// The local deadline, ms on the runtime's clock (`i64::MIN`: closed for good).
    deadline: AtomicI64,
    /// The cell's lease: checked again inside every claim's transaction
    /// ([`storage::leases::LeaseToken`]). A closed fence's (`""`, epoch 0) matches no lease
    /// row (epochs begin at 1): a write under it is refused.
    lease: storage::leases::LeaseToken,
}

impl Fence {
    /// Whether a provider call may be made at `now_ms`.
    pub fn holds(&self, now_ms: i64) -> bool {
        self.0
            .as_ref()
            .is_none_or(|d| d.deadline.load(Ordering::Acquire) > now_ms)
    }

    /// The lease writes under this fence are checked against in storage (cluster mode);
    /// `None` on one node.
    pub fn lease(&self) -> Option<storage::leases::LeaseToken> {
        self.0.as_ref().map(|f| f.lease.clone())
    }

    /// An open fence for a cell held under `lease` until `deadline_ms`.
    fn open(lease: storage::leases::LeaseToken, deadline_ms: i64) -> Self {
        Fence(Some(Arc::new(FenceState {
            deadline: AtomicI64::new(deadline_ms),
            lease,
        })))
    }

    /// A closed fence (cluster mode, a channel whose cell is not held here).
    fn closed() -> Self {
        Fence(Some(Arc::new(FenceState {
            deadline: AtomicI64::new(i64::MIN),
            lease: storage::leases::LeaseToken {
                key: String::new(),
                epoch: 0,
            },
        })))
    }

    fn close(&self) {
        if let Some(d) = &self.0 {
            d.deadline.store(i64::MIN, Ordering::Release);
        }
    }

    fn extend(&self, deadline_ms: i64) {
        if let Some(d) = &self.0 {
            // Never reopens a closed fence.
            let _ = d
                .deadline
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                    (v != i64::MIN).then_some(v.max(deadline_ms))
                });
        }
    }
}

/// The cluster state every actor reads: the settings, each running channel's fence (its
/// cell's local deadline, written by the keeper only) and the last view.
#[derive(Debug)]
pub struct Cluster {
    /// The settings.
    pub settings: ClusterSettings,
    fences: DashMap<i64, Fence>,
    /// The campaigns this node coordinates, each with its lease's local deadline (ms on the
    /// runtime's clock, D-123).
    coordinated: DashMap<i64, i64>,
    /// When this node last halted each campaign (ms): a copy is not started again for
    /// [`HALT_QUIET_MS`] (a pause writes its state right after the halt).
    halted: DashMap<i64, i64>,
    view: RwLock<ClusterView>,
    /// Asks the keeper for a round now (a number was connected or moved).
    wake: tokio::sync::Notify,
    /// How many rounds the keeper finished.
    rounds: tokio::sync::watch::Sender<u64>,
}

impl Cluster {
    /// A cluster state with nothing held yet.
    pub fn new(settings: ClusterSettings) -> Self {
        let view = ClusterView {
            node: settings.node_id.clone(),
            ..ClusterView::default()
        };
        Self {
            settings,
            fences: DashMap::new(),
            coordinated: DashMap::new(),
            halted: DashMap::new(),
            view: RwLock::new(view),
            wake: tokio::sync::Notify::new(),
            rounds: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Asks the keeper for a round now and waits (at most `timeout`) until one that began
    /// after the request has ended: a number just connected then runs here if its cell is
    /// (or becomes) this node's.
    pub async fn next_round(&self, timeout: Duration) {
        let mut rounds = self.rounds.subscribe();
        let target = *rounds.borrow_and_update() + 2;
        self.wake.notify_one();
        let _ = tokio::time::timeout(timeout, rounds.wait_for(|n| *n >= target)).await;
    }

    /// The fence `channel_id`'s actor sends under: its cell's current lease here, else a
    /// closed one.
    pub fn fence_of(&self, channel_id: i64) -> Fence {
        self.fences
            .get(&channel_id)
            .map(|f| f.clone())
            .unwrap_or_else(Fence::closed)
    }

    /// Whether `channel_id`'s actor runs here; when its cell is held here but the actor is
    /// still starting, waits up to 2 s for it. `false`: another node runs it.
    pub async fn wait_running(
        &self,
        registry: &crate::registry::Registry,
        channel_id: i64,
    ) -> bool {
        for _ in 0..100 {
            if registry.get(channel_id).is_some() {
                return true;
            }
            if !self.runs(channel_id) {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        registry.get(channel_id).is_some()
    }

    /// Whether this node holds the cell of `channel_id` (it may start its actor).
    pub fn runs(&self, channel_id: i64) -> bool {
        self.fences.contains_key(&channel_id)
    }

    /// Asks the keeper for a round now, without waiting for it (a campaign started here: its
    /// coordination lease is placed at once, D-123).
    pub fn wake_keeper(&self) {
        self.wake.notify_one();
    }

    /// The last round's view.
    pub fn view(&self) -> ClusterView {
        self.view.read().map(|v| v.clone()).unwrap_or_default()
    }

    /// Whether this node coordinates `campaign_id` at `now_ms` (its lease is held here and
    /// renewed in time; D-123).
    pub fn coordinates(&self, campaign_id: i64, now_ms: i64) -> bool {
        self.coordinated
            .get(&campaign_id)
            .is_some_and(|deadline| *deadline > now_ms)
    }

    /// Notes that `campaign_id`'s copy was halted here at `now_ms`.
    pub fn note_halted(&self, campaign_id: i64, now_ms: i64) {
        self.halted.insert(campaign_id, now_ms);
    }

    /// Whether `campaign_id` was halted here within [`HALT_QUIET_MS`] of `now_ms`: no copy
    /// starts again yet (the pause or cancel that halted it is being written).
    pub fn halted_recently(&self, campaign_id: i64, now_ms: i64) -> bool {
        self.halted
            .get(&campaign_id)
            .is_some_and(|at| now_ms - *at < HALT_QUIET_MS)
    }
}

/// How long after a halt a campaign's copy is not started again on the node (ms).
pub const HALT_QUIET_MS: i64 = 3_000;

impl Shared {
    /// Whether this node coordinates `campaign_id`'s dispatch (D-123): always on one node; in
    /// cluster mode, while it holds the campaign's lease.
    pub fn coordinates(&self, campaign_id: i64) -> bool {
        match &self.cluster {
            Some(c) => c.coordinates(campaign_id, self.config.clock.now_ms()),
            None => true,
        }
    }

    /// The fence a channel's actor sends under, taken when it starts (always open on one node).
    pub fn fence_of(&self, channel_id: i64) -> Fence {
        match &self.cluster {
            Some(c) => c.fence_of(channel_id),
            None => Fence::default(),
        }
    }
}

/// The keeper task's state: the pure keeper, the channels started per held cell (with their
/// memberships, to drop their BM and group counters when the cell leaves).
struct KeeperTask {
    rt: Runtime,
    keeper: Keeper,
    ttl_ms: i64,
    started: BTreeMap<CellKey, Vec<Membership>>,
    /// Each running channel's listener on its control subject.
    listens: BTreeMap<i64, tokio::task::JoinHandle<()>>,
    /// Rounds run (the other nodes' channels are read again every [`REFRESH_EVERY`]).
    round_no: u64,
    /// A task is starting campaign copies.
    resuming: Arc<std::sync::atomic::AtomicBool>,
    /// A task is reading the other nodes' channels.
    refreshing: Arc<std::sync::atomic::AtomicBool>,
}

/// Rounds between two reads of the channels other nodes run (their secrets may change).
const REFRESH_EVERY: u64 = 40;

/// Starts the keeper (cluster mode only); it runs a first round before returning, so the
/// cells this node can take at once run when the runtime is handed out.
pub(crate) async fn spawn_keeper(rt: Runtime) {
    let Some(cluster) = rt.shared.cluster.as_ref() else {
        return;
    };
    let ttl_ms = cluster.settings.lease_ttl.as_millis() as i64;
    tracing::warn!(
        node = %cluster.settings.node_id,
        ttl_ms,
        "cluster mode is under construction (issue 52): not measured on machines with cores \
         to spare yet; do not use it in production"
    );
    let mut task = KeeperTask {
        keeper: Keeper::new(cluster.settings.node_id.clone(), ttl_ms),
        rt: rt.clone(),
        ttl_ms,
        started: BTreeMap::new(),
        listens: BTreeMap::new(),
        round_no: 0,
        resuming: Arc::default(),
        refreshing: Arc::default(),
    };
    tokio::spawn(control::listen_halts(rt.clone()));
    task.round().await;
    let every = Duration::from_millis(engine::cluster::keeper::renew_every_ms(ttl_ms) as u64);
    tokio::spawn(async move {
        loop {
            let cluster = task.cluster();
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = cluster.wake.notified() => {}
            }
            if task.rt.shared.shutting_down() {
                return;
            }
            task.round().await;
        }
    });
}

impl KeeperTask {
    fn cluster(&self) -> &Cluster {
        self.rt
            .shared
            .cluster
            .as_ref()
            .expect("the keeper runs in cluster mode")
    }

    fn now_ms(&self) -> i64 {
        self.rt.shared.config.clock.now_ms()
    }

    /// One round: renew, fence, plan, reconcile the held cells' channels, the campaigns, the
    /// view. A storage error is logged and the round ends (the deadlines fence what could not
    /// be renewed).
    async fn round(&mut self) {
        let store = self.rt.shared.store.clone();
        let sent = self.now_ms();
        match store.renew_leases(self.ttl_ms).await {
            Ok(renewed) => {
                let renewed: Vec<(CellKey, i64)> = renewed
                    .into_iter()
                    .map(|(k, e)| (CellKey::from_stored(k), e))
                    .collect();
                let effects = self.keeper.renewed(sent, &renewed);
                self.apply(effects, &Cells::default()).await;
                self.sync_deadlines();
            }
            Err(e) => tracing::warn!(error = %e, "cell leases not renewed"),
        }
        let effects = self.keeper.tick(self.now_ms());
        self.apply(effects, &Cells::default()).await;
        let (nodes, members, campaigns) = match tokio::try_join!(
            store.live_nodes(self.ttl_ms),
            store.channel_memberships(),
            store.running_campaigns()
        ) {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(error = %e, "cluster round could not read nodes and cells");
                return;
            }
        };
        let cells = Cells::compute(&members);
        // Each running campaign's coordination lease is placed like a cell (D-123).
        let mut keys = cells.keys();
        keys.extend(campaigns.iter().map(|(id, _)| CellKey::campaign(*id)));
        let effects = self.keeper.plan(&nodes, &keys);
        self.apply(effects, &cells).await;
        self.reconcile(&cells, &members).await;
        self.refresh_elsewhere(members);
        self.forget_served_requests();
        self.round_no += 1;
        self.publish(nodes);
        self.cluster().rounds.send_modify(|n| *n += 1);
        self.resume_campaigns();
    }

    /// Every [`REFRESH_EVERY`] rounds, in a task of its own: forgets the served control
    /// requests older than twice the acceptance window (D-118; refused as stale by then).
    fn forget_served_requests(&self) {
        if !self.round_no.is_multiple_of(REFRESH_EVERY) {
            return;
        }
        let store = self.rt.shared.store.clone();
        let before = self.now_ms() - 2 * engine::cluster::seal::WINDOW_MS;
        tokio::spawn(async move {
            if let Err(e) = store.forget_cluster_requests(before).await {
                tracing::warn!(error = %e, "served control requests not forgotten");
            }
        });
    }

    /// Carries out the keeper's effects in order (a stop before its release; an acquisition's
    /// start right after it).
    async fn apply(&mut self, effects: Vec<Effect>, cells: &Cells) {
        for effect in effects {
            match effect {
                Effect::Acquire(cell) => self.acquire(cell, cells).await,
                Effect::Start { cell, epoch } => self.start_cell(&cell, epoch),
                Effect::Stop { cell, reason } => {
                    tracing::info!(cell = %cell, ?reason, "cell stopped on this node");
                    self.stop_cell(&cell).await;
                }
                Effect::Release { cell, epoch } => {
                    let store = &self.rt.shared.store;
                    if let Err(e) = store.release_lease(cell.as_str(), epoch).await {
                        tracing::warn!(cell = %cell, error = %e, "cell lease not released");
                    }
                }
            }
        }
    }

    async fn acquire(&mut self, cell: CellKey, cells: &Cells) {
        let sent = self.now_ms();
        let node = self.cluster().settings.node_id.clone();
        let store = self.rt.shared.store.clone();
        match store.acquire_lease(cell.as_str(), &node, self.ttl_ms).await {
            Ok(Some(epoch)) => {
                tracing::info!(cell = %cell, epoch, "cell acquired");
                let effects = self.keeper.acquired(cell, epoch, sent);
                Box::pin(self.apply(effects, cells)).await;
            }
            Ok(None) => tracing::debug!(cell = %cell, "cell still held by another node"),
            Err(e) => tracing::warn!(cell = %cell, error = %e, "cell lease not acquired"),
        }
    }

    /// Marks a newly held cell; its channels start in [`Self::reconcile`], each under a new
    /// fence.
    fn start_cell(&mut self, cell: &CellKey, _epoch: i64) {
        self.started.insert(cell.clone(), Vec::new());
    }

    /// Stops a cell's channels: their fences close first (no provider call starts after), then
    /// the actors stop and the cell's BM and group counters are dropped (rebuilt from storage
    /// if the cell comes back: another node counted meanwhile).
    async fn stop_cell(&mut self, cell: &CellKey) {
        if let Some(campaign_id) = cell.campaign_id() {
            self.cluster().coordinated.remove(&campaign_id);
        }
        let members = self.started.remove(cell).unwrap_or_default();
        for m in &members {
            self.close_fence(m.channel.get());
        }
        for m in &members {
            self.stop_channel(m).await;
        }
    }

    async fn stop_channel(&mut self, m: &Membership) {
        if let Some(listen) = self.listens.remove(&m.channel.get()) {
            listen.abort();
        }
        self.rt.stop_channel(m.channel.get()).await;
        if let Some(bm) = m.bm {
            self.rt.shared.bm_counters.remove(&bm);
        }
        if let Some(group) = m.group {
            self.rt.shared.group_counters.remove(&group);
        }
    }

    /// Closes a channel's fence for good and forgets it.
    fn close_fence(&self, channel_id: i64) {
        if let Some((_, f)) = self.cluster().fences.remove(&channel_id) {
            f.close();
        }
    }

    /// Moves every running channel's fence to its cell's deadline, and every coordinated
    /// campaign's to its lease's.
    fn sync_deadlines(&self) {
        let fences = &self.cluster().fences;
        for (cell, held) in self.keeper.held() {
            if let Some(campaign_id) = cell.campaign_id() {
                self.cluster()
                    .coordinated
                    .insert(campaign_id, held.deadline_ms);
                continue;
            }
            for m in self.started.get(cell).into_iter().flatten() {
                if let Some(f) = fences.get(&m.channel.get()) {
                    f.extend(held.deadline_ms);
                }
            }
        }
    }

    /// Starts the channels that are in a held cell and not running here; stops the ones that
    /// left a held cell (their BM or group changed).
    async fn reconcile(&mut self, cells: &Cells, members: &[Membership]) {
        self.sync_deadlines();
        let by_channel: BTreeMap<ChannelId, Membership> =
            members.iter().map(|m| (m.channel, *m)).collect();
        let held: BTreeSet<CellKey> = self.keeper.held().keys().cloned().collect();
        for cell in held {
            let now: Vec<Membership> = cells
                .channels_of(&cell)
                .iter()
                .filter_map(|c| by_channel.get(c).copied())
                .collect();
            let before = self.started.get(&cell).cloned().unwrap_or_default();
            for m in before
                .iter()
                .filter(|m| !now.iter().any(|n| n.channel == m.channel))
            {
                self.close_fence(m.channel.get());
                self.stop_channel(m).await;
            }
            let Some((deadline, epoch)) = self
                .keeper
                .held()
                .get(&cell)
                .map(|h| (h.deadline_ms, h.epoch))
            else {
                continue;
            };
            let lease = storage::leases::LeaseToken {
                key: cell.as_str().to_string(),
                epoch,
            };
            for m in now
                .iter()
                .filter(|m| !before.iter().any(|b| b.channel == m.channel))
            {
                let fence = Fence::open(lease.clone(), deadline);
                if let Some(old) = self.cluster().fences.insert(m.channel.get(), fence) {
                    old.close();
                }
                // Started in a task of its own (an actor's start reads storage, which a
                // frozen peer's locks may slow): the round, and so the renewals, never wait.
                let (rt, id) = (self.rt.clone(), m.channel.get());
                let listen = tokio::spawn(async move {
                    if let Err(e) = rt.start_channel(id).await {
                        tracing::error!(channel_id = id, error = %e, "channel not started");
                    }
                    rt.shared.registry.remove_elsewhere(id);
                    control::listen(rt, id).await;
                });
                if let Some(old) = self.listens.insert(id, listen) {
                    old.abort();
                }
            }
            self.started.insert(cell, now);
        }
        self.stop_orphans().await;
    }

    /// Stops every channel actor running here without a fence: one whose start finished after
    /// its cell had already stopped (the start reads storage, which a frozen peer's locks may
    /// slow, and runs in a task of its own). Such an actor sends nothing (its fence is closed)
    /// but would keep answering for the number here — a campaign copy would ask it for credit
    /// and claim under a lease this node does not hold, round after round.
    async fn stop_orphans(&mut self) {
        let orphans: Vec<i64> = self
            .rt
            .shared
            .registry
            .all()
            .iter()
            .map(|e| e.channel_id)
            .filter(|id| !self.cluster().fences.contains_key(id))
            .collect();
        for id in orphans {
            tracing::warn!(
                channel_id = id,
                "channel running without its cell here: stopped"
            );
            if let Some(listen) = self.listens.remove(&id) {
                listen.abort();
            }
            self.rt.stop_channel(id).await;
        }
    }

    /// Records the channels other nodes run, for the webhook ingest here: new ones read from
    /// storage, all of them again every [`REFRESH_EVERY`] rounds, removed ones forgotten. In
    /// a task of its own, one at a time (the round never waits for storage reads of records).
    fn refresh_elsewhere(&self, members: Vec<Membership>) {
        if self.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let refresh = self.round_no.is_multiple_of(REFRESH_EVERY);
        let (rt, refreshing) = (self.rt.clone(), self.refreshing.clone());
        tokio::spawn(async move {
            refresh_elsewhere(&rt, &members, refresh).await;
            refreshing.store(false, Ordering::Release);
        });
    }

    fn publish(&self, nodes: Vec<String>) {
        let now = self.now_ms();
        let cells = self
            .keeper
            .held()
            .iter()
            .filter(|(k, _)| k.campaign_id().is_none())
            .map(|(k, h)| HeldCell {
                key: k.to_string(),
                epoch: h.epoch,
                // The ones whose actor runs (a start may still be under way).
                channels: self
                    .started
                    .get(k)
                    .map(|ms| {
                        ms.iter()
                            .map(|m| m.channel.get())
                            .filter(|id| self.rt.shared.registry.get(*id).is_some())
                            .collect()
                    })
                    .unwrap_or_default(),
                held_for_ms: now - h.since_ms,
            })
            .collect();
        let cluster = self.cluster();
        if let Ok(mut v) = cluster.view.write() {
            *v = ClusterView {
                node: cluster.settings.node_id.clone(),
                nodes,
                cells,
                campaigns: self
                    .keeper
                    .held()
                    .keys()
                    .filter_map(CellKey::campaign_id)
                    .collect(),
                round_at_ms: now,
            };
        }
    }

    /// Starts this node's copy of every running campaign it does not run yet (its numbers
    /// may be in cells this node just took, or the campaign was started on another node), in
    /// a task of its own: a campaign's start writes rows a frozen peer may hold locked, and the
    /// keeper's round must never wait for that (its leases would lapse and it would fence
    /// itself). One such task at a time.
    fn resume_campaigns(&self) {
        if self.resuming.swap(true, Ordering::AcqRel) {
            return;
        }
        let (rt, resuming) = (self.rt.clone(), self.resuming.clone());
        tokio::spawn(async move {
            resume_campaigns(&rt).await;
            resuming.store(false, Ordering::Release);
        });
    }
}

/// See [`KeeperTask::resume_campaigns`].
async fn resume_campaigns(rt: &Runtime) {
    let running = match rt.shared.store.running_campaigns().await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "running campaigns not read");
            return;
        }
    };
    for (id, account_id) in running {
        rt.campaign_copy(id, account_id).await;
    }
}

impl Runtime {
    /// Makes sure this node runs a copy of campaign `id` (cluster mode, D-123): the copy serves
    /// the coordinator's grants for the numbers running here, and coordinates itself while it
    /// holds the campaign's lease. None is started within [`HALT_QUIET_MS`] of a halt here or
    /// while the account's dispatch switch is off. Returns whether a copy runs.
    pub(crate) async fn campaign_copy(&self, id: i64, account_id: i64) -> bool {
        if self.shared.campaigns.contains_key(&id) {
            return true;
        }
        let now = self.shared.config.clock.now_ms();
        if self
            .shared
            .cluster
            .as_ref()
            .is_some_and(|c| c.halted_recently(id, now))
        {
            return false;
        }
        if !self.dispatch_enabled(account_id).await.unwrap_or(false) {
            return false;
        }
        match self.spawn_campaign(id, account_id).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(campaign_id = id, error = %e, "campaign copy not started");
                false
            }
        }
    }
}

/// See [`KeeperTask::refresh_elsewhere`]; `refresh`: read the known ones again too.
async fn refresh_elsewhere(rt: &Runtime, members: &[Membership], refresh: bool) {
    let registry = &rt.shared.registry;
    let Some(cluster) = rt.shared.cluster.as_ref() else {
        return;
    };
    let known: BTreeSet<i64> = registry.elsewhere_ids().into_iter().collect();
    let all: BTreeSet<i64> = members.iter().map(|m| m.channel.get()).collect();
    for gone in known.difference(&all) {
        registry.remove_elsewhere(*gone);
    }
    for id in all {
        if cluster.runs(id) {
            registry.remove_elsewhere(id);
            continue;
        }
        if known.contains(&id) && !refresh {
            continue;
        }
        let store = &rt.shared.store;
        let read = tokio::try_join!(store.channel_unscoped(id), store.channel_secrets(id));
        match read {
            Ok((record, secrets)) => registry.set_elsewhere(RemoteChannel {
                record: Arc::new(record),
                app_secret: secrets.app_secret,
            }),
            Err(e) => tracing::warn!(channel_id = id, error = %e, "other node's number not read"),
        }
    }
}
