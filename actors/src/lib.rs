//! disparo's actors: the live, stateful part of the gateway (DESIGN.md §3).
//!
//! - [`channel::ChannelActor`], one per connected number, supervised by
//!   [`supervisor::ChannelSupervisor`], which restarts it from storage;
//! - [`dispatcher::WebhookDispatcher`], which delivers the outbox to integrators;
//! - [`Runtime`], the typed handle the HTTP layer calls (with timeouts): it owns the
//!   [`registry::Registry`] of running channels.
//!
//! Calls point one way: the HTTP layer asks the runtime, the runtime asks actors, actors use
//! storage and the provider client. Only this crate talks to the provider.

pub mod alternative;
pub mod bm;
pub mod campaign;
pub mod channel;
pub mod clock;
pub mod cluster;
pub mod dispatcher;
pub mod error;
pub mod events;
mod fields;
pub mod group;
pub mod ingest;
pub mod limits;
pub mod located;
pub mod media;
pub mod outbound;
pub mod protocol;
pub mod registry;
pub mod sessions;
pub mod settle;
mod spacing;
pub mod supervisor;
pub mod switch;
pub mod templates;
pub mod time;

pub use cluster::{ClusterSettings, ClusterView, NATS_SEAL_LABEL};
pub use error::ActorError;
pub use sessions::node_name;

use dispatcher::{DispatcherArgs, DispatcherConfig, DispatcherMsg, WebhookDispatcher};
use engine::ids::{AccountId, ChannelId};
use engine::webhook::RetrySchedule;
use engine::Secret;
use protocol::{ChannelMsg, ChannelSnapshot, SendCommand};
use provider::GraphClient;
use ractor::rpc::CallResult;
use ractor::{Actor, ActorRef, RpcReplyPort};
use registry::Registry;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use storage::messages::MessageRecord;
use storage::Store;
use supervisor::{ChannelSupervisor, SupervisorMsg};

/// Runtime settings.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// `DISPARO_PUBLIC_URL` without a trailing `/` (default `http://<listen address>`): the
    /// base of the absolute URLs events carry (`media_src`; issue 17). Empty: relative paths.
    pub public_url: String,
    /// `PROVIDER_APP_SECRET`: verifies provider webhooks of channels without their own app
    /// secret; exchanges embedded-signup codes.
    pub app_secret: Option<Secret>,
    /// `PROVIDER_APP_ID`: the app embedded signup runs under (exchanges codes, names the app a
    /// WABA must be subscribed to).
    pub app_id: Option<String>,
    /// `PROVIDER_CONFIG_ID`: the embedded-signup configuration the front end opens.
    pub config_id: Option<String>,
    /// How long an HTTP request waits for an actor (then 503).
    pub call_timeout: Duration,
    /// Provider calls in flight per channel (the in-flight window).
    pub channel_max_in_flight: usize,
    /// Outbound webhook retry schedule.
    pub webhook_retry: RetrySchedule,
    /// Timeout of one webhook attempt.
    pub webhook_timeout: Duration,
    /// Webhook attempts in flight at once.
    pub webhook_max_in_flight: usize,
    /// Webhook attempts in flight at once to one subscription, each for a different
    /// conversation (`DISPARO_WEBHOOK_PER_ENDPOINT`, default 8; D-065).
    pub webhook_max_per_endpoint: usize,
    /// How often the outbox is polled for due retries.
    pub webhook_poll_interval: Duration,
    /// A subscription whose attempts have only failed for this long is disabled
    /// (`DISPARO_WEBHOOK_DISABLE_AFTER_MS`, default 5 days).
    pub webhook_disable_after: Duration,
    /// Settled deliveries are kept this long (`DISPARO_WEBHOOK_RETENTION_DAYS`, default 30).
    pub webhook_retention: Duration,
    /// Bodies of the panel's provider webhook log are kept this long
    /// (`DISPARO_PROVIDER_LOG_RETENTION_MS`, default 7 days; D-061).
    pub provider_log_retention: Duration,
    /// `PROVIDER_WEBHOOK_VERIFY_TOKEN`: the handshake token of `GET /api/webhooks/provider`.
    pub provider_webhook_verify_token: Option<String>,
    /// Where requests to URLs clients give may go (webhooks, media, alternative providers):
    /// `DISPARO_ALLOW_PRIVATE_URLS`, `DISPARO_ALLOWED_SUBNETS` (D-042).
    pub outbound: engine::net::OutboundPolicy,
    /// Timeout of a media download, DNS included (also of an alternative provider's call).
    pub media_timeout: Duration,
    /// Media downloads at once (`DISPARO_MEDIA_MAX_CONCURRENT`).
    pub media_max_concurrent: usize,
    /// Bytes of downloaded media held in memory at once (`DISPARO_MEDIA_MAX_MEMORY_MB`).
    pub media_max_bytes: u64,
    /// Hosts (`host` or `host:port`) an alternative provider's `provider_url` may name besides
    /// the engine's own (`DISPARO_ALTERNATIVE_HOSTS`, D-042).
    pub alternative_hosts: Vec<String>,
    /// How long an in-doubt campaign send waits for a status webhook before it is sent again
    /// (`DISPARO_IN_DOUBT_GRACE_MS`, D-032).
    pub in_doubt_grace: Duration,
    /// How long this process's session lives without a heartbeat (`DISPARO_NODE_TTL_MS`,
    /// issue 50, D-100).
    pub node_ttl: Duration,
    /// The contact-hygiene service of panel campaigns (`HYGIENE_URL`; none: campaigns show
    /// that it is not configured).
    pub hygiene: Option<HygieneSettings>,
    /// `DISPARO_ENABLED`: when set, every account's dispatch switch takes this value at start
    /// (D-062); unset, the stored switches stand.
    pub dispatch_enabled: Option<bool>,
    /// Cluster mode (`NATS_URL`; issue 52): this node runs only the cells it holds a lease
    /// on. `None`: one node runs everything.
    pub cluster: Option<ClusterSettings>,
    /// The clock every actor reads (issue 51): the system's, or a manual one in tests.
    pub clock: clock::Clock,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            public_url: String::new(),
            app_secret: None,
            app_id: None,
            config_id: None,
            call_timeout: Duration::from_secs(30),
            channel_max_in_flight: 64,
            webhook_retry: RetrySchedule::default(),
            webhook_timeout: Duration::from_secs(10),
            webhook_max_in_flight: 64,
            webhook_max_per_endpoint: 8,
            webhook_poll_interval: Duration::from_millis(250),
            webhook_disable_after: Duration::from_secs(5 * 24 * 3600),
            webhook_retention: Duration::from_secs(30 * 24 * 3600),
            provider_log_retention: Duration::from_secs(7 * 24 * 3600),
            provider_webhook_verify_token: None,
            outbound: engine::net::OutboundPolicy::default(),
            media_timeout: Duration::from_secs(20),
            alternative_hosts: Vec::new(),
            media_max_concurrent: 16,
            media_max_bytes: 256 * 1024 * 1024,
            in_doubt_grace: Duration::from_secs(120),
            node_ttl: Duration::from_millis(storage::sessions::DEFAULT_SESSION_TTL_MS as u64),
            hygiene: None,
            dispatch_enabled: None,
            cluster: None,
            clock: clock::Clock::system(),
        }
    }
}

/// The contact-hygiene service's settings (`HYGIENE_URL`, `HYGIENE_API_KEY`).
#[derive(Debug, Clone)]
pub struct HygieneSettings {
    /// Base URL of the service's API (e.g. `http://host/hygiene/v1`).
    pub url: String,
    /// Its API key.
    pub api_key: engine::Secret,
    /// Timeout of one call.
    pub call_timeout: std::time::Duration,
    /// How long a job may take before the campaign shows it failed
    /// (`HYGIENE_JOB_TIMEOUT_MS`, default 30 min).
    pub job_timeout: std::time::Duration,
    /// Where the service posts its completion callback (`{public URL}/api/hygiene/callback`);
    /// none: no callback is asked for.
    pub callback_url: Option<String>,
}

/// What every actor shares.
pub struct Shared {
    /// Storage.
    pub store: Store,
    /// Provider client.
    pub graph: GraphClient,
    /// Running channels.
    pub registry: Arc<Registry>,
    /// Settings.
    pub config: RuntimeConfig,
    /// Rolling 24 h unique business-initiated recipients per BM, shared by its channels
    /// (PROVIDER.md §10.2: the limit is per business portfolio since 2025-10-07).
    pub bm_counters: dashmap::DashMap<i64, limits::LimitPort>,
    /// Running campaigns.
    pub campaigns: dashmap::DashMap<i64, ActorRef<campaign::CampaignMsg>>,
    /// Running sending groups (D-037).
    pub groups: dashmap::DashMap<i64, ActorRef<group::GroupMsg>>,
    /// Each sending group's shared 24 h counter.
    pub group_counters: dashmap::DashMap<i64, limits::LimitPort>,
    dispatcher: OnceLock<ActorRef<DispatcherMsg>>,
    /// The SSRF guard of every request to a client's URL (D-042).
    pub guard: outbound::Guard,
    /// The client of [`Shared::guard`] for media downloads and alternative providers.
    pub outbound_http: reqwest::Client,
    /// The process-wide bound on media downloads and their bytes in memory.
    pub media_budget: media::MediaBudget,
    /// Provider webhooks verified and parsed at once on the blocking pool (one per core).
    pub ingest_slots: tokio::sync::Semaphore,
    /// The contact-hygiene service's client.
    pub hygiene: Option<provider::hygiene::HygieneClient>,
    /// How long a hygiene job may run before its campaign shows it failed.
    pub hygiene_job_timeout: Duration,
    /// The send path's batched writers: campaign send outcomes and status webhooks, by number.
    pub(crate) writers: settle::Writers,
    /// Cluster mode's state (`None`: one node).
    pub cluster: Option<cluster::Cluster>,
    shutting_down: AtomicBool,
}

impl Shared {
    /// Tells the dispatcher that deliveries were written.
    pub fn wake_dispatcher(&self) {
        if let Some(d) = self.dispatcher.get() {
            let _ = d.cast(DispatcherMsg::Wake);
        }
    }

    /// The shared counter of a BM, built from storage the first time it is needed.
    pub async fn bm_counter(&self, bm_id: i64) -> Result<limits::LimitPort, storage::StorageError> {
        if let Some(c) = self.bm_counters.get(&bm_id) {
            return Ok(c.clone());
        }
        let built = bm::load_bm_limit(&self.store, bm_id, self.now_ms()).await?;
        Ok(self
            .bm_counters
            .entry(bm_id)
            .or_insert_with(|| limits::LimitPort::new(built))
            .clone())
    }

    /// Writes events to the outbox and wakes the dispatcher.
    pub async fn emit(&self, events: &[storage::webhooks::NewEvent]) {
        match self.store.enqueue_events(events).await {
            Ok(n) if n > 0 => self.wake_dispatcher(),
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "could not write events to the outbox"),
        }
    }

    /// Now, ms since the epoch, by the runtime's [`clock::Clock`].
    pub fn now_ms(&self) -> i64 {
        self.config.clock.now_ms()
    }

    /// Whether the runtime is stopping (actors that end are not restarted).
    pub fn shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Relaxed)
    }
}

/// Asks an actor and waits for its answer at most `timeout`: a stopped actor, a timeout or a
/// dropped reply is [`ActorError::Unavailable`].
pub async fn ask<M, T>(
    actor: &ActorRef<M>,
    msg: impl FnOnce(RpcReplyPort<T>) -> M,
    timeout: Duration,
) -> Result<T, ActorError>
where
    M: ractor::Message,
    T: Send + 'static,
{
    match actor.call(msg, Some(timeout)).await {
        Ok(CallResult::Success(v)) => Ok(v),
        Ok(CallResult::Timeout | CallResult::SenderError) | Err(_) => Err(ActorError::Unavailable),
    }
}

/// The handle to the running actors. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    shared: Arc<Shared>,
    supervisor: ActorRef<SupervisorMsg>,
    campaign_supervisor: ActorRef<supervisor::CampaignSupervisorMsg>,
    dispatcher: ActorRef<DispatcherMsg>,
}

impl Runtime {
    /// Starts the dispatcher, the supervisor and one actor per stored channel.
    pub async fn start(
        store: Store,
        graph: GraphClient,
        config: RuntimeConfig,
    ) -> Result<Self, ActorError> {
        // The session first: everything this process claims or leases carries it (D-100).
        let node = config
            .cluster
            .as_ref()
            .map_or_else(sessions::node_name, |c| c.node_id.clone());
        let session = store
            .register_session(&node, config.node_ttl.as_millis() as i64)
            .await?;
        tracing::info!(session, "process session registered");
        let guard = outbound::Guard::new(config.outbound.clone());
        let media_budget =
            media::MediaBudget::new(config.media_max_concurrent, config.media_max_bytes);
        let outbound_http = guard.client(config.media_timeout).build().map_err(|e| {
            tracing::error!(error = %e, "outbound client did not build");
            ActorError::Unavailable
        })?;
        let dispatcher = spawn_dispatcher(&store, &config, &guard).await?;
        let (hygiene, hygiene_job_timeout) = hygiene_client(&config)?;
        let (writers, receivers) = settle::Writers::new(store.send_path_writers());
        let cluster = config.cluster.clone().map(cluster::Cluster::new);
        let shared = Arc::new(Shared {
            store: store.clone(),
            graph,
            registry: Arc::new(Registry::default()),
            config,
            bm_counters: dashmap::DashMap::new(),
            campaigns: dashmap::DashMap::new(),
            groups: dashmap::DashMap::new(),
            group_counters: dashmap::DashMap::new(),
            dispatcher: OnceLock::new(),
            guard,
            outbound_http,
            media_budget,
            ingest_slots: tokio::sync::Semaphore::new(
                std::thread::available_parallelism().map_or(2, |n| n.get()),
            ),
            hygiene,
            hygiene_job_timeout,
            writers,
            cluster,
            shutting_down: AtomicBool::new(false),
        });
        settle::spawn(Arc::downgrade(&shared), receivers);
        let _ = shared.dispatcher.set(dispatcher.clone());
        let (supervisor, _) = Actor::spawn(None, ChannelSupervisor, shared.clone())
            .await
            .map_err(|_| ActorError::Unavailable)?;
        let (campaign_supervisor, _) =
            Actor::spawn(None, supervisor::CampaignSupervisor, shared.clone())
                .await
                .map_err(|_| ActorError::Unavailable)?;
        let rt = Self {
            shared,
            supervisor,
            campaign_supervisor,
            dispatcher,
        };
        sessions::recover(&store).await?;
        sessions::spawn_heartbeat(Arc::downgrade(&rt.shared));
        // Cluster mode: the cells this node can take now run before campaigns resume.
        cluster::spawn_keeper(rt.clone()).await;
        rt.resume_at_boot().await?;
        group::spawn_scheduler(rt.clone());
        Ok(rt)
    }

    /// What a start resumes: every number's actor, the dispatch switches as `DISPARO_ENABLED`
    /// says, the running campaigns (held where the switch is off) and the held campaigns whose
    /// switch is on again.
    async fn resume_at_boot(&self) -> Result<(), ActorError> {
        let store = &self.shared.store;
        // In cluster mode the keeper starts the channels of the cells this node holds.
        let channels = match self.shared.cluster {
            Some(_) => Vec::new(),
            None => store.all_channel_ids().await?,
        };
        for id in channels {
            if let Err(e) = self.start_channel(id).await {
                tracing::error!(channel_id = id, error = %e, "channel not started at boot");
            }
        }
        let reset = match self.shared.config.dispatch_enabled {
            // DISPARO_ENABLED=false stops every account's dispatch at every start (the
            // emergency stop, even right after a crash whose session still looks live).
            Some(false) => true,
            // DISPARO_ENABLED=true turns them on when the deployment starts; a process joining
            // live peers (a rolling deploy, a second node) keeps the switches as operators
            // left them (D-100).
            Some(true) => store.other_live_sessions().await? == 0,
            None => false,
        };
        if reset {
            // DISPARO_ENABLED named at start decides again for every account (D-062).
            store.reset_dispatch_switches().await?;
        }
        for (id, account_id) in store.running_campaigns().await? {
            if !self.dispatch_enabled(account_id).await? {
                // The switch is off: held, not resumed.
                crate::campaign::move_campaign(
                    &self.shared,
                    account_id,
                    id,
                    engine::campaign::CampaignState::Paused,
                    Some(switch::SWITCH_REASON),
                )
                .await?;
                store.set_campaign_held(id, true).await?;
                tracing::warn!(
                    campaign_id = id,
                    "campaign held at boot by the dispatch switch"
                );
                continue;
            }
            if let Err(e) = self.spawn_campaign(id, account_id).await {
                tracing::error!(campaign_id = id, error = %e, "campaign not resumed at boot");
            }
        }
        for account_id in store.accounts_with_held_campaigns().await? {
            if self.dispatch_enabled(account_id).await? {
                if let Err(e) = self.release_held(account_id).await {
                    tracing::error!(account_id, error = %e, "held campaigns not released at boot");
                }
            }
        }
        Ok(())
    }

    /// Starts (or confirms running) the actor of a stored channel. In cluster mode only when
    /// this node holds its cell (else nothing: the holder's keeper starts it within a round).
    pub async fn start_channel(&self, channel_id: i64) -> Result<(), ActorError> {
        if let Some(cluster) = &self.shared.cluster {
            if !cluster.runs(channel_id) {
                // A number just connected or moved: the keeper's next round starts it if its
                // cell is this node's.
                cluster.next_round(self.shared.config.call_timeout).await;
                return Ok(());
            }
        }
        let started = ask(
            &self.supervisor,
            |r| SupervisorMsg::Start(channel_id, r),
            self.shared.config.call_timeout,
        )
        .await?;
        match started {
            Ok(()) => Ok(()),
            Err(e) => {
                tracing::error!(channel_id, error = e, "channel actor did not start");
                Err(ActorError::Unavailable)
            }
        }
    }

    /// Stops the actor of a channel (before its record is deleted); waits at most the call
    /// timeout. A channel not running is not an error.
    pub async fn stop_channel(&self, channel_id: i64) {
        let _ = ask(
            &self.supervisor,
            |r| SupervisorMsg::Stop(channel_id, r),
            self.shared.config.call_timeout,
        )
        .await;
    }

    /// What every actor shares, for the services built on the runtime (`services` crate):
    /// storage, the provider client, the registry, the settings, the clock.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// `GET /channels/{id}/guardrails`: settings and today's cap. Errors: `NotFound` for a
    /// channel of another account.
    pub async fn guardrails(
        &self,
        account_id: i64,
        channel_id: i64,
    ) -> Result<protocol::GuardrailView, ActorError> {
        let located = self
            .locate(AccountId(account_id), ChannelId(channel_id))
            .await?;
        self.ask_guardrails(&located, cluster::wire::ChannelAsk::Guardrails)
            .await
    }

    /// Cluster mode's last view (this node, the live nodes, the cells held here), the lease
    /// TTL and the time since that view's round (ms); `None` on one node.
    pub fn cluster_view(&self) -> Option<(ClusterView, Duration, i64)> {
        self.shared.cluster.as_ref().map(|c| {
            let v = c.view();
            let since = (self.shared.now_ms() - v.round_at_ms).max(0);
            (v, c.settings.lease_ttl, since)
        })
    }

    /// Sets the cluster gauges from the keeper's last round, at each `/metrics` scrape
    /// (issue 52): `disparo_cluster_nodes` (live nodes this node sees; 1 on one process),
    /// `disparo_cluster_cells` (cells held here; 0 on one process), `disparo_node_channels`
    /// (numbers running here) and, in cluster mode, `disparo_cluster_round_age_seconds`.
    pub fn record_cluster_gauges(&self) {
        let (nodes, cells) = match self.cluster_view() {
            Some((view, _, since_ms)) => {
                metrics::gauge!("disparo_cluster_round_age_seconds").set(since_ms as f64 / 1e3);
                (view.nodes.len().max(1), view.cells.len())
            }
            None => (1, 0),
        };
        metrics::gauge!("disparo_cluster_nodes").set(nodes as f64);
        metrics::gauge!("disparo_cluster_cells").set(cells as f64);
        metrics::gauge!("disparo_node_channels").set(self.shared.registry.all().len() as f64);
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.shared.store
    }

    /// The SSRF guard of requests to clients' URLs (D-042).
    pub fn outbound(&self) -> &outbound::Guard {
        &self.shared.guard
    }

    /// The registry of running channels.
    pub fn registry(&self) -> &Registry {
        &self.shared.registry
    }

    /// The actor of a channel of this account. Errors: `NotFound` for a channel not running
    /// or of another account.
    pub fn channel_actor(
        &self,
        account: AccountId,
        channel: ChannelId,
    ) -> Result<ActorRef<ChannelMsg>, ActorError> {
        match self.shared.registry.get(channel.get()) {
            Some(e) if e.account_id == account.get() => Ok(e.actor.clone()),
            _ => Err(ActorError::NotFound),
        }
    }

    /// Sends a message through a channel of the account (`None`: the first connected one).
    /// Answers when the provider answered.
    ///
    /// Errors: the channel's refusals; [`ActorError::SendInDoubt`] when the message was handed
    /// to the provider and its answer is unknown (it is never sent again);
    /// [`ActorError::Unavailable`] when the actor did not answer within the call timeout (a
    /// send it reaches later is dropped, not sent).
    pub async fn send(
        &self,
        account_id: i64,
        channel_id: Option<i64>,
        cmd: SendCommand,
    ) -> Result<MessageRecord, ActorError> {
        let channel_id = match channel_id {
            Some(id) => id,
            None => {
                self.shared
                    .store
                    .first_working_channel(account_id)
                    .await?
                    .id
            }
        };
        if let Some(cluster) = &self.shared.cluster {
            // A number of a cell just taken here is starting: wait for it (a little); one
            // another node runs is handed over.
            if !cluster
                .wait_running(&self.shared.registry, channel_id)
                .await
            {
                return self.send_elsewhere(account_id, channel_id, cmd).await;
            }
        }
        let timeout = self.shared.config.call_timeout;
        match self.send_here(account_id, channel_id, cmd, timeout).await {
            Err(ActorError::NotFound) => {
                let record = self.alternative_record(account_id, channel_id).await?;
                Err(alternative::send_refused(&record))
            }
            answer => answer,
        }
    }

    /// Sends through a channel of the account running here, waiting at most `timeout`.
    /// Errors: as [`Runtime::send`]; `NotFound` when the channel does not run here.
    pub(crate) async fn send_here(
        &self,
        account_id: i64,
        channel_id: i64,
        mut cmd: SendCommand,
        timeout: Duration,
    ) -> Result<MessageRecord, ActorError> {
        let actor = self.channel_actor(AccountId(account_id), ChannelId(channel_id))?;
        let mut watch = self.shared.config.clock.stopwatch();
        cmd = self.prepare(account_id, channel_id, cmd).await?;
        crate::channel::api_send_phase("prepare", watch.lap());
        // The actor drops a send it reaches after this wait ran out: the caller has given up
        // by then, and a send made later would be a second message if it retries.
        cmd.deadline = Some(self.shared.config.clock.instant() + timeout);
        cmd.span = tracing::Span::current();
        ask(&actor, |r| ChannelMsg::Send(Box::new(cmd), r), timeout).await?
    }

    /// Cluster mode: a send through a channel of the account that another node runs, handed
    /// to that node over NATS; answers the stored message. Errors: as [`Runtime::send`];
    /// `NotFound` for a channel of another account.
    async fn send_elsewhere(
        &self,
        account_id: i64,
        channel_id: i64,
        cmd: SendCommand,
    ) -> Result<MessageRecord, ActorError> {
        let record = match self
            .shared
            .store
            .channel(AccountId(account_id), ChannelId(channel_id))
            .await
        {
            Ok(r) => r,
            Err(storage::StorageError::NotFound) => return Err(ActorError::NotFound),
            Err(e) => return Err(e.into()),
        };
        if !record.official {
            return Err(alternative::send_refused(&record));
        }
        let budget = self.shared.config.call_timeout.as_millis() as u64;
        let send = cluster::wire::RemoteSend::of(account_id, &cmd, budget)
            .ok_or(ActorError::Unavailable)?;
        let id = cluster::remote_send(&self.shared, channel_id, send).await?;
        Ok(self.shared.store.message(account_id, id).await?)
    }

    /// Prepares a send's content for the number `channel_id`: media downloaded (through the
    /// SSRF guard); a library template — by id, or by a name the library holds — rendered
    /// with the recipient's values or the parameters given, under the name of its version on
    /// the number, with its preview text and header (D-127); a name the library does not hold
    /// sent as given.
    ///
    /// Errors: the media's or the template's refusal (422), storage errors.
    async fn prepare(
        &self,
        account_id: i64,
        channel_id: i64,
        mut cmd: SendCommand,
    ) -> Result<SendCommand, ActorError> {
        cmd.content = match cmd.content {
            protocol::SendContent::Media { kind, url, caption } => {
                let file = media::fetch(
                    &url,
                    kind,
                    &self.shared.guard,
                    &self.shared.outbound_http,
                    &self.shared.media_budget,
                )
                .await?;
                protocol::SendContent::MediaFile { file, caption }
            }
            protocol::SendContent::Library { choice, values } => {
                let (found, given) = self.render_library(account_id, &choice, values).await?;
                library_send(&found, given, None, channel_id, &mut cmd.preview_text)
            }
            protocol::SendContent::Template {
                name,
                language,
                given,
                layout,
                header_text,
            } => match self.library_by_name(account_id, &name, &language).await? {
                Some(found) => {
                    library_send(&found, given, layout, channel_id, &mut cmd.preview_text)
                }
                None => protocol::SendContent::Template {
                    name,
                    language,
                    given,
                    layout,
                    header_text,
                },
            },
            other => other,
        };
        Ok(cmd)
    }

    /// The live state of a channel of the account. Errors: `NotFound` for a channel of another
    /// account.
    pub async fn snapshot(
        &self,
        account: AccountId,
        channel: ChannelId,
    ) -> Result<ChannelSnapshot, ActorError> {
        let actor = match self.channel_actor(account, channel) {
            Ok(a) => a,
            Err(ActorError::NotFound) if self.shared.cluster.is_some() => {
                return self.snapshot_elsewhere(account, channel).await;
            }
            Err(ActorError::NotFound) => {
                let record = self
                    .alternative_record(account.get(), channel.get())
                    .await?;
                return Ok(alternative::snapshot(record));
            }
            Err(e) => return Err(e),
        };
        ask(
            &actor,
            ChannelMsg::Snapshot,
            self.shared.config.call_timeout,
        )
        .await
    }

    /// Cluster mode: the live state of a channel of the account that this node does not run,
    /// from the node that does (an alternative provider's number has none). Errors:
    /// `NotFound` for a channel of another account; `Unavailable` when no node answers.
    async fn snapshot_elsewhere(
        &self,
        account: AccountId,
        channel: ChannelId,
    ) -> Result<ChannelSnapshot, ActorError> {
        let record = match self.shared.store.channel(account, channel).await {
            Ok(r) => r,
            Err(storage::StorageError::NotFound) => return Err(ActorError::NotFound),
            Err(e) => return Err(e.into()),
        };
        if !record.official {
            return Ok(alternative::snapshot(record));
        }
        let live = cluster::remote_snapshot(&self.shared, channel.get()).await?;
        Ok(located::overlay(record, live))
    }

    /// A channel of the account and its decrypted access token (for provider calls made on
    /// the account's behalf outside the channel's actor).
    pub async fn channel_with_token(
        &self,
        account_id: i64,
        channel_id: i64,
    ) -> Result<(storage::channels::ChannelRecord, Secret), ActorError> {
        let record = self
            .shared
            .store
            .channel(AccountId(account_id), ChannelId(channel_id))
            .await?;
        let token = self
            .shared
            .store
            .channel_secrets(channel_id)
            .await?
            .access_token;
        Ok((record, token))
    }

    /// Nudges the webhook dispatcher.
    pub fn wake_dispatcher(&self) {
        let _ = self.dispatcher.cast(DispatcherMsg::Wake);
    }

    /// Stops every actor (channels are not restarted).
    pub async fn shutdown(&self) {
        self.shared.shutting_down.store(true, Ordering::Relaxed);
        for c in self.shared.campaigns.iter() {
            c.stop(None);
        }
        self.campaign_supervisor.stop(None);
        self.supervisor.stop_children(None);
        self.supervisor.stop(None);
        // The attempts under way end and are recorded before the leases are released: a
        // peer taking the subscriptions over never POSTs what this process delivered.
        let wait = self.shared.config.webhook_timeout + Duration::from_secs(5);
        if crate::ask(&self.dispatcher, DispatcherMsg::Drain, wait)
            .await
            .is_err()
        {
            tracing::warn!("webhook attempts still under way at the stop");
        }
        self.dispatcher.stop(None);
        // Leases released and the session ended: peers take over at once (D-100).
        sessions::end(&self.shared.store).await;
    }
}

/// The contact-hygiene service's client (when `HYGIENE_URL` is set) and its jobs' timeout.
fn hygiene_client(
    config: &RuntimeConfig,
) -> Result<(Option<provider::hygiene::HygieneClient>, Duration), ActorError> {
    let hygiene = match &config.hygiene {
        Some(h) => Some(
            provider::hygiene::HygieneClient::new(&h.url, h.api_key.expose(), h.call_timeout)
                .map_err(|e| {
                    tracing::error!(error = %e, "hygiene client did not build");
                    ActorError::Unavailable
                })?,
        ),
        None => None,
    };
    let hygiene_job_timeout = config
        .hygiene
        .as_ref()
        .map_or(Duration::from_secs(1800), |h| h.job_timeout);
    Ok((hygiene, hygiene_job_timeout))
}

/// Starts the webhook dispatcher with the runtime's settings.
async fn spawn_dispatcher(
    store: &Store,
    config: &RuntimeConfig,
    guard: &outbound::Guard,
) -> Result<ActorRef<DispatcherMsg>, ActorError> {
    let (dispatcher, _) = Actor::spawn(
        None,
        WebhookDispatcher,
        DispatcherArgs {
            store: store.clone(),
            config: DispatcherConfig {
                guard: guard.clone(),
                schedule: config.webhook_retry.clone(),
                timeout: config.webhook_timeout,
                max_in_flight: config.webhook_max_in_flight,
                max_per_endpoint: config.webhook_max_per_endpoint.max(1),
                poll_interval: config.webhook_poll_interval,
                disable_after: config.webhook_disable_after,
                retention: config.webhook_retention,
                log_body_retention: config.provider_log_retention,
                clock: config.clock.clone(),
            },
        },
    )
    .await
    .map_err(|e| {
        tracing::error!(error = %e, "webhook dispatcher did not start");
        ActorError::Unavailable
    })?;
    Ok(dispatcher)
}

/// A library template's send on `channel_id`: the name of its version there and its layout
/// (`layout` when the caller had one), the preview text from its body when none was given,
/// its text header.
fn library_send(
    found: &storage::templates::TemplateForSend,
    given: engine::template::Given,
    layout: Option<std::sync::Arc<engine::template::Layout>>,
    channel_id: i64,
    preview_text: &mut Option<String>,
) -> protocol::SendContent {
    let (name, own_layout) = templates::version_on_channel(found, channel_id);
    let t = &found.template;
    if preview_text.is_none() {
        *preview_text = Some(engine::template::fill_text(&t.body, &given.body));
    }
    protocol::SendContent::Template {
        name,
        language: t.language.clone(),
        given,
        layout: layout.or(own_layout),
        header_text: t.header_text.clone(),
    }
}
