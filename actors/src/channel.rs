//! `ChannelActor`: one per connected number. It holds the live truth about the number
//! (quality, tier, rolling 24 h business-initiated recipients, credential state), admits sends
//! by the engine's rules, and applies the provider's events for it.
//!
//! It never awaits a provider call in its handler: an admitted send is stored `queued`, then a
//! task bounded by the channel's in-flight window makes the call, records the outcome and
//! answers the caller; the task reports back with [`ChannelMsg::Outcome`].

use crate::clock::{Moment, Stopwatch};
use crate::error::ActorError;
use crate::limits::LimitPort;
use crate::protocol::{
    ChannelMsg, ChannelSnapshot, Dispatch, SendCommand, SendContent, SendOutcome, CALLBACK_PREFIX,
};
use crate::registry::ChannelEntry;
use crate::{events, Shared};
use engine::channel::machine::{Answer, ChannelInit, OneToOne, ProviderRead, Refusal, Stored};
use engine::channel::{Channel, ChannelStatus, Effect, Input, Limits, Quality, Tier, WabaStanding};
use engine::guardrail::{self, Guardrails};
use engine::limits::RollingUnique;
use engine::message::MessageKind;
use engine::{Secret, DAY_MS};
use provider::wire::{SendMessageRequest, TemplatePayload};
use provider::ErrorKind;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use std::sync::Arc;
use storage::campaigns::{SendResult, Settlement};
use storage::channels::{ChannelRecord, ChannelSecrets};
use storage::messages::{MessageRecord, NewInbound, NewOutbound};
use tokio::sync::Semaphore;
use tracing::Instrument;

/// What the send task sends: a ready request, or a file to upload first.
enum Prepared {
    Ready(Box<SendMessageRequest>),
    Upload {
        file: crate::media::FetchedMedia,
        caption: Option<String>,
        to: String,
    },
}

/// The outcome a refused send reports to its channel.
fn refused(e: &provider::ProviderError) -> SendOutcome {
    match (e.kind(), e) {
        (
            ErrorKind::RateLimited,
            provider::ProviderError::Graph {
                retry_after_s: s, ..
            },
        ) => SendOutcome::Throttled(s.map(|s| s * 1000)),
        (ErrorKind::RateLimited, _) => SendOutcome::Throttled(None),
        (kind, _) => SendOutcome::Refused(kind),
    }
}

pub use engine::channel::machine::{CADENCE_HORIZON_MS, CAMPAIGN_WINDOW, PAYMENT_LOCK_MS};

/// How many of a number's `max_in_flight` provider calls campaign sends may hold: three
/// quarters (at least one); the rest stays free for 1:1 sends (D-076).
pub fn campaign_share(max_in_flight: usize) -> usize {
    (max_in_flight - max_in_flight / 4).max(1)
}

/// Attempts of a campaign send the provider answered with a transient error (5xx, 131000…),
/// the first included; then the recipient fails with the provider's error.
pub const TRANSIENT_ATTEMPTS: u32 = 3;

/// Start arguments.
pub struct ChannelArgs {
    /// Which channel.
    pub channel_id: i64,
    /// Shared runtime context.
    pub shared: Arc<Shared>,
}

/// The actor's state, rebuilt from storage on every start: the number's rules and live state
/// ([`Channel`], pure) and what the actor needs to act on them.
pub struct ChannelState {
    channel: Channel,
    record: Arc<ChannelRecord>,
    secrets: ChannelSecrets,
    bm: Option<LimitPort>,
    /// The sending group's shared counter, when the number is in a group (D-037).
    group: Option<LimitPort>,
    /// Provider calls in flight on the number (1:1 and campaign sends).
    in_flight: Arc<Semaphore>,
    /// The part of `in_flight` campaign sends may hold: the rest is kept for 1:1 sends
    /// (issue 25 part 2, D-076), so an API send never queues behind the campaign's window.
    campaign_share: Arc<Semaphore>,
    /// Whether business-initiated sends are refused now ([`Channel::blocked`]), refreshed after
    /// every message; read by send tasks right before the provider call, so a RED event stops
    /// even sends admitted before it.
    blocked: Arc<std::sync::atomic::AtomicBool>,
    /// When a campaign send of this number was last accepted (ms): a send failing
    /// transiently while others get through fails, one failing in an outage goes back to the
    /// campaign (D-125).
    accepted_at: Arc<std::sync::atomic::AtomicI64>,
    /// Until when campaign sends are held because the provider fails (ms, 0: it answers;
    /// [`engine::channel::Channel::outage_until`]), refreshed after every message.
    outage_until: Arc<std::sync::atomic::AtomicI64>,
    /// The lease this actor's sends go out under (cluster mode; always open on one node),
    /// checked by send tasks right before the provider call.
    fence: crate::cluster::Fence,
    /// The chain that holds the guardrail cadence between the campaign calls as they start.
    chain: crate::spacing::Chain,
    /// The time the message being handled is decided at: the clock is read once per message
    /// (issue 51), in [`ChannelActor`]'s `handle`.
    now: Moment,
    /// The number's gauges, published after every message.
    gauges: ChannelGauges,
    shared: Arc<Shared>,
}

/// A number's gauges for Grafana, labelled `channel_id`: quality (2 green, 1 yellow, 0 red,
/// -1 unknown), the 24 h limit (-1 unlimited), sent in 24 h, available now (-1 unlimited), the
/// campaign cap (-1 none) and campaign sends today, the warm-up day (0 none), backoff (1 while
/// backing off) and the WABA's standing (0 ok, 1 restricted, 2 banned, 3 violation). The
/// handles are looked up in the metrics registry once, when the actor starts: looked up at
/// every message, with the label's string built each time, they were 2.5 % of the gateway's
/// CPU in a campaign (D-145).
struct ChannelGauges {
    quality: metrics::Gauge,
    limit_24h: metrics::Gauge,
    sent_24h: metrics::Gauge,
    available: metrics::Gauge,
    campaign_cap: metrics::Gauge,
    campaign_sent_today: metrics::Gauge,
    warmup_day: metrics::Gauge,
    backoff: metrics::Gauge,
    waba_standing: metrics::Gauge,
}

impl ChannelGauges {
    /// The handles of number `channel_id`'s gauges.
    fn new(channel_id: i64) -> Self {
        let id = channel_id.to_string();
        let gauge = |name: &'static str| metrics::gauge!(name, "channel_id" => id.clone());
        Self {
            quality: gauge("disparo_channel_quality"),
            limit_24h: gauge("disparo_channel_limit_24h"),
            sent_24h: gauge("disparo_channel_sent_24h"),
            available: gauge("disparo_channel_available"),
            campaign_cap: gauge("disparo_channel_campaign_cap"),
            campaign_sent_today: gauge("disparo_channel_campaign_sent_today"),
            warmup_day: gauge("disparo_channel_warmup_day"),
            backoff: gauge("disparo_channel_backoff"),
            waba_standing: gauge("disparo_channel_waba_standing"),
        }
    }

    /// Sets every gauge from the number's rules' figures.
    fn set(&self, g: &engine::channel::machine::Gauges) {
        let h = &g.health;
        self.quality.set(g.quality);
        self.limit_24h.set(h.limit_24h as f64);
        self.sent_24h.set(h.sent_24h as f64);
        self.available.set(h.available as f64);
        self.campaign_cap.set(g.campaign_cap);
        self.campaign_sent_today.set(g.campaign_sent_today);
        self.warmup_day.set(g.warmup_day);
        self.backoff.set(g.backoff);
        self.waba_standing.set(g.waba_standing);
    }
}

fn waba_standing(s: &str) -> WabaStanding {
    match s {
        "banned" => WabaStanding::Banned,
        "restricted" => WabaStanding::Restricted,
        "violation" => WabaStanding::Violation,
        _ => WabaStanding::Ok,
    }
}

/// What a load from storage gives: the record, its secrets, the stored live state and the
/// BM's shared counter.
struct Loaded {
    record: ChannelRecord,
    secrets: ChannelSecrets,
    stored: Stored,
    bm: Option<LimitPort>,
}

/// Today's guardrail state from storage: settings, local day, campaign sends and extra
/// authorized today.
async fn load_guardrails(
    shared: &Shared,
    channel_id: i64,
    now: i64,
) -> Result<(Guardrails, i64, i64, i64), ActorError> {
    let store = &shared.store;
    let g = store.channel_guardrails(channel_id).await?;
    let day = guardrail::local_day(now);
    let sent = store
        .campaign_sends_since(channel_id, guardrail::day_start(day))
        .await?;
    let authorized = store.cap_authorized(channel_id, day).await?;
    Ok((g, day, sent, authorized))
}

/// Loads what a channel actor holds from storage.
async fn load(shared: &Arc<Shared>, channel_id: i64, now: i64) -> Result<Loaded, ActorError> {
    let store = &shared.store;
    let record = store.channel_unscoped(channel_id).await?;
    let secrets = store.channel_secrets(channel_id).await?;
    let tier = record.tier.as_deref().and_then(Tier::parse);
    let limited = tier.as_ref().and_then(Tier::limit_24h).is_some();
    let recipients = recent_recipients(store, record.id, limited, now).await?;
    let waba = match store
        .waba_by_provider_id(record.account_id, &record.waba_id)
        .await
    {
        Ok(w) => waba_standing(&w.standing),
        Err(storage::StorageError::NotFound) => WabaStanding::Ok,
        Err(e) => return Err(e.into()),
    };
    let bm = match record.bm_id {
        Some(id) => Some(shared.bm_counter(id).await?),
        None => None,
    };
    let stored = Stored {
        status: ChannelStatus::parse(&record.status),
        quality: Quality::parse(&record.quality),
        tier,
        credential_valid: record.credential_valid,
        payment_locked_until: record.payment_locked_until,
        waba,
        recipients,
    };
    Ok(Loaded {
        record,
        secrets,
        stored,
        bm,
    })
}

/// The number's rolling 24 h counter, from its business-initiated sends of the last 24 h:
/// exact when its tier has a limit, else an estimate in fixed memory (`engine::limits`), so an
/// unlimited number does not hold every recipient of its day.
async fn recent_recipients(
    store: &storage::Store,
    channel_id: i64,
    limited: bool,
    now: i64,
) -> Result<RollingUnique, ActorError> {
    let mut recipients = if limited {
        RollingUnique::new(DAY_MS)
    } else {
        RollingUnique::estimated(DAY_MS)
    };
    store
        .business_initiated_recipients_since(channel_id, now - DAY_MS, |phone, at| {
            recipients.record(phone, at)
        })
        .await?;
    Ok(recipients)
}

/// The counter of the number's sending group, with the number's own limit registered in it
/// (the group's default limit is the sum of its numbers').
async fn load_group(
    shared: &Arc<Shared>,
    record: &ChannelRecord,
) -> Result<Option<LimitPort>, ActorError> {
    let Some(group_id) = record.group_id else {
        return Ok(None);
    };
    let counter = shared.group_counter(group_id).await?;
    let limit = record
        .tier
        .as_deref()
        .and_then(Tier::parse)
        .and_then(|t| t.limit_24h());
    counter.with(|g| g.set_member_limit(record.id, limit));
    Ok(Some(counter))
}

fn register(
    shared: &Shared,
    record: &ChannelRecord,
    secrets: &ChannelSecrets,
    myself: &ActorRef<ChannelMsg>,
) {
    shared.registry.insert(ChannelEntry {
        channel_id: record.id,
        account_id: record.account_id,
        phone_number_id: record.phone_number_id.clone(),
        waba_id: record.waba_id.clone(),
        phone: record.phone.clone(),
        app_secret: secrets.app_secret.clone(),
        verify_token: record.verify_token.clone(),
        actor: myself.clone(),
    });
}

impl ChannelState {
    /// Runs `f` on the number's rules with its group's and BM's shared limits locked (group
    /// before BM, always): admission is serial per shared limit (issue 15).
    fn with_limits<T>(&mut self, f: impl FnOnce(&mut Channel, &mut Limits<'_>) -> T) -> T {
        let channel = &mut self.channel;
        LimitPort::both(self.group.as_ref(), self.bm.as_ref(), |limits| {
            f(channel, limits)
        })
    }

    /// Joins the group of `counter` (or none), leaving the previous group's counter.
    fn set_group(&mut self, counter: Option<LimitPort>) {
        if let Some(old) = self.group.take() {
            let same = counter.as_ref().is_some_and(|c| c.same(&old));
            if !same {
                old.with(|g| g.remove_member(self.record.id));
            }
        }
        self.group = counter;
    }

    fn snapshot(&mut self) -> ChannelSnapshot {
        let now = self.now.ms;
        let health = self.with_limits(|c, l| c.health(now, l));
        let c = &self.channel;
        let mut record = (*self.record).clone();
        record.status = c.status().as_str().to_string();
        record.quality = c.quality().as_str().to_string();
        record.tier = c.tier().map(|t| t.as_str().to_string());
        record.credential_valid = c.credential_valid();
        record.payment_locked_until = c.payment_locked_until();
        ChannelSnapshot { record, health }
    }

    /// Emits `channel.health` when the number's health changed since the last message (the
    /// first call, at start, sets the baseline; D-121).
    async fn watch_health(&mut self) {
        let now = self.now.ms;
        if let Some((change, health)) = self.with_limits(|c, l| c.health_change(now, l)) {
            tracing::info!(changed = ?change.changed, code = %health.code, "number's health changed");
            let event = events::channel_health(&self.record, &change, &health, now);
            self.shared.emit(&[event]).await;
        }
    }

    /// Refreshes the flag send tasks read right before their provider call.
    fn refresh_blocked(&mut self) {
        let now = self.now.ms;
        let blocked = self.with_limits(|c, l| c.blocked(now, l));
        self.blocked
            .store(blocked, std::sync::atomic::Ordering::Relaxed);
        self.outage_until.store(
            self.channel.outage_until().unwrap_or(0),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// Per-channel gauges for Grafana (see [`ChannelGauges`]), set after every message.
    fn publish_gauges(&mut self) {
        let now = self.now.ms;
        let g = self.with_limits(|c, l| c.gauges(now, l));
        self.gauges.set(&g);
    }

    /// Reads the number at the provider off the actor's handler; the answer comes back as
    /// [`ChannelMsg::SyncDone`] (to `reply`, when someone waits).
    fn read_at_provider(
        &self,
        myself: &ActorRef<ChannelMsg>,
        reply: Option<RpcReplyPort<Result<ChannelSnapshot, ActorError>>>,
    ) {
        let (graph, token, pnid, me) = (
            self.shared.graph.clone(),
            self.secrets.access_token.clone(),
            self.record.phone_number_id.clone(),
            myself.clone(),
        );
        tokio::spawn(async move {
            let res = graph.phone_number(token.expose(), &pnid).await;
            let _ = me.cast(ChannelMsg::SyncDone(Box::new(res), reply));
        });
    }

    /// Applies `input` to the number's rules and carries out their effects.
    async fn apply(
        &mut self,
        myself: &ActorRef<ChannelMsg>,
        input: Input,
    ) -> Result<(), ActorError> {
        let effects = self.channel.apply(input, self.now.ms);
        let mut first_error = None;
        for effect in effects {
            if let Err(e) = self.carry_out(myself, effect).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Carries out one effect of [`Channel::apply`].
    async fn carry_out(
        &mut self,
        myself: &ActorRef<ChannelMsg>,
        effect: Effect,
    ) -> Result<(), ActorError> {
        let store = &self.shared.store;
        let id = self.record.id;
        match effect {
            Effect::ReadAtProvider => {
                let _ = myself.cast(ChannelMsg::Sync(None));
            }
            Effect::StoreQuality { .. }
            | Effect::StoreRead { .. }
            | Effect::StoreThroughput(_)
            | Effect::StoreCredential(_)
            | Effect::StorePaymentLock(_) => self.persist(myself, effect).await?,
            Effect::RebuildRecipients => {
                let recipients = recent_recipients(store, id, true, self.now.ms).await?;
                self.channel.set_recipients(recipients);
            }
            Effect::MemberLimit(limit) => {
                if let Some(g) = &self.group {
                    g.with(|g| g.set_member_limit(id, limit));
                }
            }
            Effect::StatusChanged { status, previous } => {
                let event = events::session_status(&self.record, status, previous, self.now.ms);
                self.shared.emit(&[event]).await;
                tracing::info!(
                    status = status.as_str(),
                    previous = previous.as_str(),
                    "channel status changed"
                );
            }
            Effect::BackedOff { until } => {
                metrics::counter!("disparo_channel_backoffs_total", "channel_id" => id.to_string())
                    .increment(1);
                tracing::warn!(
                    pause_ms = until - self.now.ms,
                    rate = self.channel.pacing_rate(),
                    "the provider rate-limited the number; pacing slower"
                );
            }
            Effect::StaleQualityIgnored => {
                metrics::counter!("disparo_quality_updates_out_of_order_total").increment(1);
                tracing::info!("an older quality update arrived late: ignored");
            }
        }
        Ok(())
    }

    /// Stores what an effect of [`Channel::apply`] says changed.
    async fn persist(
        &self,
        myself: &ActorRef<ChannelMsg>,
        effect: Effect,
    ) -> Result<(), ActorError> {
        let store = &self.shared.store;
        let id = self.record.id;
        match effect {
            Effect::StoreQuality { quality, tier, at } => {
                let tier = tier.as_ref().map(Tier::as_str);
                tracing::info!(quality = quality.as_str(), tier = ?tier, "quality update");
                // `false`: another process stored a newer reading: read the number at the
                // provider.
                if !store
                    .update_channel_quality(id, quality.as_str(), tier, at)
                    .await?
                {
                    let _ = myself.cast(ChannelMsg::Sync(None));
                }
            }
            Effect::StoreRead {
                status,
                quality,
                tier,
                name,
            } => {
                store
                    .record_channel_sync(
                        id,
                        status.as_str(),
                        quality.as_str(),
                        tier.as_ref().map(Tier::as_str),
                        name.as_deref(),
                    )
                    .await?;
            }
            Effect::StoreThroughput(mps) => {
                tracing::info!(throughput_mps = mps, "the number's throughput changed");
                store.set_channel_throughput(id, i64::from(mps)).await?;
            }
            Effect::StoreCredential(valid) => {
                if !valid {
                    tracing::warn!("the provider refused the channel's access token");
                }
                store.set_channel_credential_valid(id, valid).await?;
            }
            Effect::StorePaymentLock(until) => {
                tracing::warn!(?until, "payment lock changed");
                store.set_channel_payment_lock(id, until).await?;
            }
            _ => {}
        }
        Ok(())
    }
}

/// The actor.
pub struct ChannelActor;

impl Actor for ChannelActor {
    type Msg = ChannelMsg;
    type State = ChannelState;
    type Arguments = ChannelArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<ChannelMsg>,
        args: ChannelArgs,
    ) -> Result<ChannelState, ActorProcessingErr> {
        start(myself, args)
            .await
            .map_err(|e| ActorProcessingErr::from(e.to_string()))
    }

    async fn handle(
        &self,
        myself: ActorRef<ChannelMsg>,
        msg: ChannelMsg,
        st: &mut ChannelState,
    ) -> Result<(), ActorProcessingErr> {
        let span = tracing::info_span!("channel", channel_id = st.record.id);
        st.now = st.shared.config.clock.moment();
        handle_msg(myself, msg, st).instrument(span.clone()).await;
        st.refresh_blocked();
        st.publish_gauges();
        st.watch_health().instrument(span).await;
        Ok(())
    }
}

/// Builds the actor's state from storage and registers the running channel.
async fn start(
    myself: ActorRef<ChannelMsg>,
    args: ChannelArgs,
) -> Result<ChannelState, ActorError> {
    let shared = args.shared;
    let now = shared.config.clock.moment();
    let Loaded {
        record,
        secrets,
        stored,
        bm,
    } = load(&shared, args.channel_id, now.ms).await?;
    let (guardrails, cap_day, cap_sent, cap_authorized) =
        load_guardrails(&shared, args.channel_id, now.ms).await?;
    let group = load_group(&shared, &record).await?;
    let (template_missing, template_quality_red) = shared
        .store
        .numbers_missing_templates(record.account_id, Some(record.id))
        .await?
        .first()
        .map_or((false, false), |(_, missing, red)| (*missing, *red));
    register(&shared, &record, &secrets, &myself);
    tracing::info!(channel_id = record.id, "channel actor started");
    let channel = Channel::new(ChannelInit {
        id: record.id,
        stored,
        guardrails,
        cap_day,
        cap_sent,
        cap_authorized,
        throughput_mps: record
            .throughput_mps
            .and_then(|m| u32::try_from(m).ok())
            .unwrap_or(engine::pacing::DEFAULT_MPS),
        quality_event_at: record.quality_event_at,
        template_missing,
        template_quality_red,
    });
    let max_in_flight = shared.config.channel_max_in_flight;
    let fence = shared.fence_of(record.id);
    let record_id = record.id;
    let mut st = ChannelState {
        channel,
        record: Arc::new(record),
        secrets,
        bm,
        group,
        in_flight: Arc::new(Semaphore::new(max_in_flight)),
        campaign_share: Arc::new(Semaphore::new(campaign_share(max_in_flight))),
        blocked: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        accepted_at: Arc::default(),
        outage_until: Arc::default(),
        fence,
        chain: crate::spacing::Chain::default(),
        now,
        gauges: ChannelGauges::new(record_id),
        shared,
    };
    st.refresh_blocked();
    st.publish_gauges();
    st.watch_health().await;
    Ok(st)
}

async fn handle_msg(myself: ActorRef<ChannelMsg>, msg: ChannelMsg, st: &mut ChannelState) {
    match input_of(msg) {
        Ok(input) => {
            if let Err(e) = st.apply(&myself, input).await {
                tracing::error!(error = %e, "could not store a change of the number's state");
            }
        }
        Err(msg) => serve(myself, msg, st).await,
    }
}

/// The input to the number's rules a message carries (a provider event or answer, a setting
/// already stored), or the message back when it asks for something else.
fn input_of(msg: ChannelMsg) -> Result<Input, ChannelMsg> {
    Ok(match msg {
        ChannelMsg::QualityUpdate { quality, tier, at } => Input::QualityEvent {
            quality,
            tier: tier.as_deref().and_then(Tier::parse),
            at,
        },
        ChannelMsg::Outcome(outcome) => Input::Answer(match outcome {
            SendOutcome::Accepted => Answer::Accepted,
            SendOutcome::Throttled(retry_after_ms) => Answer::Throttled { retry_after_ms },
            SendOutcome::Refused(ErrorKind::Payment) => Answer::PaymentProblem,
            SendOutcome::Refused(ErrorKind::InvalidCredential) => Answer::CredentialRefused,
            SendOutcome::Refused(ErrorKind::Transient) => Answer::Unavailable,
            SendOutcome::Refused(_) => Answer::Refused,
        }),
        ChannelMsg::TemplateFlags {
            missing,
            quality_red,
        } => Input::TemplateFlags {
            missing,
            quality_red,
        },
        ChannelMsg::WabaStanding(standing) => {
            tracing::warn!(?standing, "WABA standing changed");
            Input::WabaStanding(standing)
        }
        ChannelMsg::CampaignSettled { sent } => Input::CampaignSettled { sent },
        ChannelMsg::PaymentReleased => {
            tracing::info!("payment lock released");
            Input::PaymentReleased
        }
        other => return Err(other),
    })
}

/// Serves a message that asks for something: a send, a read, a provider sync, campaign
/// credits or work, the guardrails, a reload.
async fn serve(myself: ActorRef<ChannelMsg>, msg: ChannelMsg, st: &mut ChannelState) {
    let now = st.now.ms;
    match msg {
        ChannelMsg::Send(cmd, reply) => {
            if let Some(deadline) = cmd.deadline {
                // Asked at the deadline less the call timeout (`Runtime::send_here`).
                let asked = deadline.checked_sub(st.shared.config.call_timeout);
                let waited = asked.map(|a| {
                    st.shared
                        .config
                        .clock
                        .instant()
                        .saturating_duration_since(a)
                });
                api_send_phase("mailbox", waited.unwrap_or_default());
            }
            // Under the asking request's span: its request id is on every line (issue 49).
            let span = tracing::info_span!(parent: &cmd.span, "send", channel_id = st.record.id);
            let sent = admit_and_send(myself, *cmd, reply, st).instrument(span.clone());
            if let Err(e) = sent.await {
                span.in_scope(|| tracing::warn!(error = %e, "send not admitted"));
            }
        }
        ChannelMsg::Statuses(reports, reply) => {
            // Applied by the number's batched writer, in arrival order, so the actor stays free
            // for sends and credits while the transaction runs.
            let job = crate::settle::StatusJob {
                record: st.record.clone(),
                reports,
                reply,
            };
            if let Err(job) = st.shared.writers.statuses(job).await {
                let _ = job.reply.send(Err(ActorError::Unavailable));
            }
        }
        ChannelMsg::Inbound(items, reply) => {
            let _ = reply.send(record_inbound(st, items).await);
        }
        ChannelMsg::Snapshot(reply) => {
            let _ = reply.send(st.snapshot());
        }
        ChannelMsg::Sync(reply) => st.read_at_provider(&myself, reply),
        ChannelMsg::SyncDone(res, reply) => {
            let out = apply_sync(&myself, st, *res).await;
            if let Some(reply) = reply {
                let _ = reply.send(out);
            }
        }
        ChannelMsg::CampaignCredits(reply) => {
            let _ = reply.send(st.with_limits(|c, l| c.campaign_credits(now, l)));
        }
        ChannelMsg::Dispatch(batch) => dispatch(myself, *batch, st).await,
        ChannelMsg::Guardrails(reply) => {
            let _ = reply.send(st.channel.guardrail_view(now));
        }
        ChannelMsg::SetGuardrails(g, reply) => {
            tracing::info!(?g, "guardrails changed");
            let _ = st.apply(&myself, Input::Guardrails(g)).await;
            let _ = reply.send(st.channel.guardrail_view(now));
        }
        ChannelMsg::Authorized(total, reply) => {
            tracing::info!(authorized = total, "more campaign sends authorized today");
            let _ = st.apply(&myself, Input::Authorized(total)).await;
            let _ = reply.send(st.channel.guardrail_view(now));
        }
        ChannelMsg::Reload(reply) => {
            let _ = reply.send(reload(&myself, st).await);
        }
        event => {
            if let Ok(input) = input_of(event) {
                let _ = st.apply(&myself, input).await;
            }
        }
    }
}

/// Stores inbound messages of the number (each with its `message.received` event).
async fn record_inbound(st: &ChannelState, items: Vec<NewInbound>) -> Result<usize, ActorError> {
    record_inbound_for(&st.shared, &st.record, items).await
}

/// Stores inbound messages of the channel `record` with their `message.received` events;
/// how many were new. Used by the channel's actor and, in cluster mode, by a node that
/// receives a webhook for a number another node runs (the message needs no live state).
pub(crate) async fn record_inbound_for(
    shared: &Shared,
    record: &ChannelRecord,
    items: Vec<NewInbound>,
) -> Result<usize, ActorError> {
    let base = &shared.config.public_url;
    let mut stored = 0;
    for mut item in items {
        name_referenced_messages(shared, &mut item).await?;
        let name = item.contact_name.clone();
        let written = shared
            .store
            .record_inbound(&item, |m| {
                vec![events::message_received(record, m, name.as_deref(), base)]
            })
            .await?;
        if let Some((_, n)) = written {
            stored += 1;
            if n > 0 {
                shared.wake_dispatcher();
            }
            metrics::counter!("disparo_messages_received_total", "channel_id" => record.id.to_string()).increment(1);
        }
    }
    Ok(stored)
}

/// Adds disparo's `message_id` to the content's quoted (`context`) and reacted-to
/// (`reaction`) message when it is one of the account's stored messages (issue 48).
async fn name_referenced_messages(
    shared: &Shared,
    item: &mut NewInbound,
) -> Result<(), ActorError> {
    let refs = engine::provider_webhook::inbound::referenced_messages(&item.content);
    if refs.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = refs.iter().map(|(_, p)| p.clone()).collect();
    let found = shared
        .store
        .message_ids_by_provider(item.account_id, &ids)
        .await?;
    for (key, provider_id) in refs {
        if let Some(id) = found.get(&provider_id) {
            item.content[key]["message_id"] = serde_json::json!(id);
        }
    }
    Ok(())
}

/// Reads the channel's record and credentials again (after an update elsewhere).
async fn reload(
    myself: &ActorRef<ChannelMsg>,
    st: &mut ChannelState,
) -> Result<ChannelSnapshot, ActorError> {
    let Loaded {
        record,
        secrets,
        stored,
        bm,
    } = load(&st.shared, st.record.id, st.now.ms).await?;
    match load_group(&st.shared, &record).await {
        Ok(group) => st.set_group(group),
        Err(e) => tracing::error!(error = %e, "could not load the number's group"),
    }
    register(&st.shared, &record, &secrets, myself);
    st.bm = bm;
    st.secrets = secrets;
    st.record = Arc::new(record);
    st.apply(myself, Input::Reloaded(Box::new(stored))).await?;
    Ok(st.snapshot())
}

/// Checks the rules, stores the message `queued` and spawns the provider call. Errors here
/// are answered through `reply`; the returned error is only for the log.
async fn admit_and_send(
    myself: ActorRef<ChannelMsg>,
    cmd: SendCommand,
    reply: RpcReplyPort<Result<MessageRecord, ActorError>>,
    st: &mut ChannelState,
) -> Result<(), ActorError> {
    let slot_ms = match admit(&cmd, st).await {
        Ok(at) => at,
        Err(e) => {
            let text = e.to_string();
            let _ = reply.send(Err(e));
            return Err(ActorError::Conflict(text));
        }
    };
    let to = cmd.to.as_str().to_string();
    let new = new_outbound(&st.record, &cmd);
    let prepared = match cmd.content {
        SendContent::Text { body } => {
            Prepared::Ready(Box::new(SendMessageRequest::text(&to, &body)))
        }
        SendContent::Template {
            name,
            language,
            given,
            layout,
            header_text: _,
        } => {
            let filled = match &layout {
                Some(l) => l.fill(&given),
                None => engine::template::Layout::unknown(&given),
            };
            let payload = TemplatePayload::filled(&name, &language, &filled);
            Prepared::Ready(Box::new(SendMessageRequest::template(&to, payload)))
        }
        SendContent::MediaFile { file, caption } => Prepared::Upload { file, caption, to },
        SendContent::Media { .. } | SendContent::Library { .. } => unreachable!("refused above"),
    };
    let task = SendTask {
        shared: st.shared.clone(),
        record: st.record.clone(),
        token: st.secrets.access_token.clone(),
        in_flight: st.in_flight.clone(),
        fence: st.fence.clone(),
        myself,
    };
    tokio::spawn(
        task.run(
            new,
            cmd.idempotency_key,
            prepared,
            (slot_ms, cmd.deadline),
            reply,
        )
        .in_current_span(),
    );
    Ok(())
}

/// Admits a 1:1 send by the number's rules ([`Channel::admit_one_to_one`]): a template counts
/// in its 24 h limits; text and media need the contact's 24-hour window open; every send takes
/// a slot of the number's throughput. Returns the slot (ms: when to call the provider).
///
/// Errors: `Unavailable` when the caller gave up, `Validation` for unprepared content,
/// `WindowClosed`, `BusinessInitiatedRefused` with the health code, `ThroughputExceeded`
/// for a burst over the number's throughput (D-128).
async fn admit(cmd: &SendCommand, st: &mut ChannelState) -> Result<i64, ActorError> {
    if cmd.deadline.is_some_and(|d| st.now.at >= d) {
        // The caller has given up: nothing is written or sent.
        return Err(ActorError::Unavailable);
    }
    let to = cmd.to.as_str();
    let send = match &cmd.content {
        SendContent::Media { .. } | SendContent::Library { .. } => {
            return Err(ActorError::Validation(engine::ValidationError::new(
                "not_prepared",
                "content",
                "O conteúdo deve ser preparado antes do envio.",
            )));
        }
        SendContent::Text { .. } | SendContent::MediaFile { .. } => OneToOne::Session {
            last_inbound_at: st.shared.store.last_inbound_at(st.record.id, to).await?,
        },
        SendContent::Template { .. } => OneToOne::Template {
            group_limited: cmd.group_limited,
        },
    };
    let now = st.now.ms;
    st.with_limits(|c, l| c.admit_one_to_one(to, send, now, l))
        .map_err(|r| match r {
            Refusal::WindowClosed => ActorError::WindowClosed,
            Refusal::Health(code) => ActorError::BusinessInitiatedRefused(code),
            Refusal::Quota(quota) => ActorError::QuotaExhausted(quota),
            Refusal::Throughput { retry_after_ms } => {
                metrics::counter!("disparo_throughput_refusals_total").increment(1);
                ActorError::ThroughputExceeded { retry_after_ms }
            }
        })
}

/// The message row of an admitted 1:1 send.
fn new_outbound(record: &ChannelRecord, cmd: &SendCommand) -> NewOutbound {
    let mut new = NewOutbound {
        account_id: record.account_id,
        channel_id: record.id,
        contact_phone: cmd.to.as_str().to_string(),
        kind: MessageKind::Text,
        body: None,
        template_name: None,
        template_language: None,
        params: None,
        preview_text: cmd.preview_text.clone(),
        media: None,
        source: "api",
    };
    match &cmd.content {
        SendContent::Text { body } => {
            new.body = Some(body.clone());
            new.preview_text = None;
        }
        SendContent::Template {
            name,
            language,
            given,
            layout: _,
            header_text,
        } => {
            new.kind = MessageKind::Template;
            new.template_name = Some(name.clone());
            new.template_language = Some(language.clone());
            new.params = Some(template_params(given, header_text.as_deref()));
        }
        SendContent::MediaFile { file, caption } => {
            new.kind = MessageKind::parse(file.kind.as_str());
            new.body = caption.clone();
            new.media = Some(
                serde_json::json!({"url": file.url, "mime_type": file.mime, "size": file.bytes.len(), "filename": file.filename}),
            );
        }
        SendContent::Media { .. } | SendContent::Library { .. } => {}
    }
    new
}

/// What a template message stores of its parameters: body, URL button suffix, header media
/// (an image link as `header_image`) and the library's text header.
fn template_params(
    given: &engine::template::Given,
    header_text: Option<&str>,
) -> serde_json::Value {
    let mut p = serde_json::json!({"body": given.body, "button": given.url_suffix});
    if let Some(m) = &given.header_media {
        match (&m.link, m.kind) {
            (Some(url), engine::template::HeaderMedia::Image) => {
                p["header_image"] = serde_json::json!(url);
            }
            _ => {
                p["header_media"] =
                    serde_json::json!({"type": m.kind.as_str(), "link": m.link, "id": m.id});
            }
        }
    }
    if let Some(text) = header_text {
        p["header_text"] = serde_json::json!(text);
    }
    p
}

/// A provider call made outside the actor's handler.
struct SendTask {
    shared: Arc<Shared>,
    record: Arc<ChannelRecord>,
    token: Secret,
    in_flight: Arc<Semaphore>,
    fence: crate::cluster::Fence,
    myself: ActorRef<ChannelMsg>,
}

impl SendTask {
    /// Waits for a place in the number's in-flight window, stores the message `sending` (group
    /// commit, D-076), makes the provider call and records its answer; the caller is answered
    /// once that answer is stored.
    async fn run(
        self,
        new: NewOutbound,
        idempotency_key: Option<String>,
        prepared: Prepared,
        (slot_ms, deadline): (i64, Option<std::time::Instant>),
        reply: RpcReplyPort<Result<MessageRecord, ActorError>>,
    ) {
        let mut watch = self.shared.config.clock.stopwatch();
        // A burst over the number's throughput waits for its slot (at most a second, D-128).
        let wait_ms = slot_ms - watch.last().ms;
        if wait_ms > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(wait_ms as u64)).await;
            api_send_phase("pacing", watch.lap());
        }
        let Ok(_permit) = self.in_flight.clone().acquire_owned().await else {
            let _ = reply.send(Err(ActorError::Unavailable));
            return;
        };
        api_send_phase("window", watch.lap());
        if deadline.is_some_and(|d| watch.last().at >= d) {
            // The caller gave up while the send waited for the window: nothing is written or
            // sent now, when nobody expects it (a retry would send it a second time).
            tracing::warn!("caller gave up before the provider call; send dropped");
            let _ = reply.send(Err(ActorError::Unavailable));
            return;
        }
        if !self.fence.holds(watch.last().ms) {
            // Cluster mode: this node no longer holds the number's cell (or could not renew
            // it in time): nothing is written or sent here; the caller may retry.
            tracing::warn!("number fenced on this node; send refused before the provider call");
            let _ = reply.send(Err(ActorError::Unavailable));
            return;
        }
        // Written `sending` right before the call: the row exists before the provider can
        // report a status for it, and a crash in between leaves it in doubt, as it should.
        let written = self
            .shared
            .store
            .insert_outbound_under(
                &new,
                engine::message::MessageStatus::Sending,
                idempotency_key.as_deref(),
                self.fence.lease().as_ref(),
            )
            .await;
        api_send_phase("write", watch.lap());
        let queued = match written {
            Ok(m) => m,
            Err(e) => {
                let _ = reply.send(Err(e.into()));
                return;
            }
        };
        let res = self
            .call(prepared, format!("{CALLBACK_PREFIX}{}", queued.id))
            .await;
        api_send_phase("call", watch.lap());
        let answer = match res {
            Ok(resp) => self.accepted(&queued, resp.message_id(), &mut watch).await,
            Err(e) => self.refused(&queued, e, watch.last().ms).await,
        };
        let _ = reply.send(answer);
    }

    /// The provider call: the request as prepared, or the file uploaded first and then sent by
    /// its media id; `callback` rides along in `biz_opaque_callback_data`.
    async fn call(
        &self,
        prepared: Prepared,
        callback: String,
    ) -> Result<provider::wire::SendMessageResponse, provider::ProviderError> {
        let graph = &self.shared.graph;
        let (token, pnid) = (self.token.expose(), &self.record.phone_number_id);
        let request = match prepared {
            Prepared::Ready(request) => request.with_callback_data(callback),
            Prepared::Upload { file, caption, to } => {
                let media_id = graph
                    .upload_media(token, pnid, file.bytes.to_vec(), &file.mime, &file.filename)
                    .await?;
                let object = provider::wire::MediaObject {
                    id: Some(media_id),
                    link: None,
                    caption: caption.filter(|_| file.kind.takes_caption()),
                    filename: (file.kind == engine::media::MediaKind::Document)
                        .then(|| file.filename.clone()),
                };
                SendMessageRequest::media(&to, file.kind.as_str(), object)
                    .expect("the four media kinds have payload objects")
                    .with_callback_data(callback)
            }
        };
        graph.send_message(token, pnid, &request).await
    }

    /// Records a send the provider accepted (with its message id) and its `message.sent`
    /// (stamped when the answer came, `watch`'s last lap).
    async fn accepted(
        &self,
        queued: &MessageRecord,
        wamid: Option<&str>,
        watch: &mut Stopwatch,
    ) -> Result<MessageRecord, ActorError> {
        let Some(wamid) = wamid else {
            // Accepted without an id (as a campaign send, D-032): only a status webhook, which
            // carries our id, can settle it; it is never sent again.
            tracing::warn!(
                message_id = queued.id,
                "provider accepted a send without its id; left in doubt"
            );
            return Err(ActorError::SendInDoubt(queued.id));
        };
        metrics::counter!("disparo_messages_sent_total", "channel_id" => self.record.id.to_string())
            .increment(1);
        let record = self.record.clone();
        let base = self.shared.config.public_url.clone();
        let now = watch.last().ms;
        let result = self
            .shared
            .store
            .mark_message_sent(
                queued,
                wamid,
                Box::new(move |m| vec![events::message_sent(&record, m, now, &base)]),
            )
            .await;
        api_send_phase("answer", watch.lap());
        let _ = self.myself.cast(ChannelMsg::Outcome(SendOutcome::Accepted));
        match result {
            Ok((rec, n)) => {
                if n > 0 {
                    self.shared.wake_dispatcher();
                }
                Ok(rec)
            }
            Err(e) => {
                // Accepted by the provider but not recorded: the status webhook, which carries
                // our id in biz_opaque_callback_data, will settle the row.
                tracing::error!(message_id = queued.id, error = %e, "could not record an accepted send");
                Err(ActorError::SendInDoubt(queued.id))
            }
        }
    }

    /// Records a send the provider refused (failed with its error, at `now`, ms), or one it may
    /// have taken (a timeout: left in doubt).
    async fn refused(
        &self,
        queued: &MessageRecord,
        e: provider::ProviderError,
        now: i64,
    ) -> Result<MessageRecord, ActorError> {
        let kind = e.kind();
        metrics::counter!("disparo_messages_failed_total", "channel_id" => self.record.id.to_string(), "kind" => format!("{kind:?}")).increment(1);
        let _ = self.myself.cast(ChannelMsg::Outcome(refused(&e)));
        if matches!(e, provider::ProviderError::Timeout) {
            // In doubt: the provider may have accepted it. The row stays `sending` until a
            // status webhook (carrying our id) settles it.
            tracing::warn!(
                message_id = queued.id,
                "provider timed out; message left in doubt"
            );
            return Err(ActorError::SendInDoubt(queued.id));
        }
        let (code, title) = (e.code(), e.reason());
        let answer = ActorError::from(e).with_message_id(queued.id);
        if let Err(se) = self
            .shared
            .store
            .mark_message_failed(queued.id, code, &title, None, now)
            .await
        {
            tracing::error!(message_id = queued.id, error = %se, "could not record a refused send");
        }
        Err(answer)
    }
}

/// Applies a provider read of the number: status, quality, tier, name; a refused credential
/// marks the channel `credencial_invalida`.
async fn apply_sync(
    myself: &ActorRef<ChannelMsg>,
    st: &mut ChannelState,
    res: Result<provider::wire::PhoneNumber, provider::ProviderError>,
) -> Result<ChannelSnapshot, ActorError> {
    let pn = match res {
        Ok(pn) => pn,
        Err(e) => {
            if e.kind() == ErrorKind::InvalidCredential {
                st.apply(myself, Input::Answer(Answer::CredentialRefused))
                    .await?;
            }
            return Err(e.into());
        }
    };
    let read = ProviderRead {
        status: match pn.status.as_deref() {
            None | Some("CONNECTED") => ChannelStatus::Working,
            Some("PENDING") | Some("UNVERIFIED") => ChannelStatus::Pending,
            Some(_) => ChannelStatus::Disconnected,
        },
        banned: pn.status.as_deref() == Some("BANNED"),
        quality: pn.quality_rating.as_deref().map(Quality::parse),
        tier: pn.tier().and_then(Tier::parse),
        throughput_mps: pn.throughput_mps(),
        name: pn.verified_name.clone(),
    };
    st.apply(myself, Input::Read(read)).await?;
    Ok(st.snapshot())
}

/// Admits each claimed recipient by the channel's rules at this moment (a RED event processed
/// before this batch stops it, as do the 24 h limit and today's cap), books it a cadence slot
/// and spawns its send; a refused one goes back to `planned`.
async fn dispatch(myself: ActorRef<ChannelMsg>, batch: Dispatch, st: &mut ChannelState) {
    let now = st.now.ms;
    for item in batch.items {
        let given = match item.given {
            Ok(given) => given,
            Err(reason) => {
                let failed = SendResult::Failed {
                    code: None,
                    reason,
                    skip: false,
                };
                settle(
                    &st.shared,
                    &st.record,
                    item.recipient_id,
                    item.message_id,
                    failed,
                )
                .await;
                continue;
            }
        };
        let admitted =
            st.with_limits(|c, l| c.admit_campaign(&item.phone, batch.group_limited, now, l));
        let Ok(send_at) = admitted else {
            settle(
                &st.shared,
                &st.record,
                item.recipient_id,
                item.message_id,
                SendResult::Replan,
            )
            .await;
            continue;
        };
        let payload = TemplatePayload::filled(
            &batch.template_name,
            &batch.language,
            &batch.layout.fill(&given),
        );
        let request = SendMessageRequest::template(&item.phone, payload)
            .with_callback_data(format!("{CALLBACK_PREFIX}{}", item.message_id));
        let link = st.chain.link(st.channel.cadence_ms());
        let task = CampaignSend {
            shared: st.shared.clone(),
            record: st.record.clone(),
            token: st.secrets.access_token.clone(),
            in_flight: st.in_flight.clone(),
            campaign_share: st.campaign_share.clone(),
            blocked: st.blocked.clone(),
            accepted_at: st.accepted_at.clone(),
            outage_until: st.outage_until.clone(),
            fence: st.fence.clone(),
            myself: myself.clone(),
            gate: batch.gate.clone(),
            link,
        };
        tokio::spawn(
            task.run(item.recipient_id, item.message_id, request, send_at)
                .in_current_span(),
        );
    }
}

/// Hands a campaign send's outcome to its number's batched writer (waits when its queue is
/// full).
async fn settle(
    shared: &Shared,
    record: &Arc<ChannelRecord>,
    recipient_id: i64,
    message_id: i64,
    result: SendResult,
) {
    let item = crate::settle::SettleItem {
        settlement: Settlement {
            channel_id: record.id,
            recipient_id,
            message_id,
            result,
        },
        record: record.clone(),
    };
    if shared.writers.settle(item).await.is_err() {
        tracing::error!(
            recipient_id,
            "the campaign writer is gone; the send stays in doubt"
        );
    }
}

/// One campaign send, outside the actor's handler.
struct CampaignSend {
    shared: Arc<Shared>,
    record: Arc<ChannelRecord>,
    token: Secret,
    in_flight: Arc<Semaphore>,
    /// Taken before `in_flight`: campaign sends hold at most their share of the window.
    campaign_share: Arc<Semaphore>,
    blocked: Arc<std::sync::atomic::AtomicBool>,
    accepted_at: Arc<std::sync::atomic::AtomicI64>,
    outage_until: Arc<std::sync::atomic::AtomicI64>,
    fence: crate::cluster::Fence,
    myself: ActorRef<ChannelMsg>,
    gate: crate::protocol::CampaignGate,
    /// Its place in the number's cadence chain (none without a guardrail cadence).
    link: Option<crate::spacing::Link>,
}

impl CampaignSend {
    fn blocked(&self) -> bool {
        self.blocked.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits for its cadence slot, for the cadence after the number's previous campaign call
    /// actually started (`crate::spacing`) and for a place in the in-flight window, makes the
    /// call (again after a transient error, up to [`TRANSIENT_ATTEMPTS`] in all) and records
    /// the outcome by the error's kind (decision D-032).
    async fn run(
        mut self,
        recipient_id: i64,
        message_id: i64,
        request: SendMessageRequest,
        send_at: i64,
    ) {
        let mut watch = self.shared.config.clock.stopwatch();
        let wait = send_at - watch.last().ms;
        if wait > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(wait as u64)).await;
        }
        if let Some(link) = self.link.as_mut() {
            link.wait(&self.shared.config.clock).await;
        }
        let result = self.attempt(&request, &mut watch).await;
        // The next send of the chain goes on (from this call's start, or the one before).
        self.link = None;
        // Counts against today's cap when the provider took it or may have (as rebuilt from
        // storage at start: refusals without a provider id do not count).
        let sent = matches!(result, SendResult::Sent { .. } | SendResult::InDoubt);
        watch.lap();
        settle(&self.shared, &self.record, recipient_id, message_id, result).await;
        // Waiting for room in the writer's queue (s): above zero, the writer is the bound.
        send_phase("handoff", watch.lap());
        let _ = self.myself.cast(ChannelMsg::CampaignSettled { sent });
    }

    /// The provider call(s) of one campaign send; `watch` started at its admission.
    async fn attempt(&mut self, request: &SendMessageRequest, watch: &mut Stopwatch) -> SendResult {
        let Ok(_share) = self.campaign_share.clone().acquire_owned().await else {
            return SendResult::Replan;
        };
        let Ok(_permit) = self.in_flight.clone().acquire_owned().await else {
            return SendResult::Replan;
        };
        // Time from admission to a place in the in-flight window (cadence included), then the
        // provider call: where a campaign send's time goes (s).
        send_phase("wait", watch.lap());
        // Held for the whole call: a halt waits for it, and no call starts after the halt.
        let open = self.gate.clone().read_owned().await;
        if !*open {
            return SendResult::Replan;
        }
        let channel_label = self.record.id.to_string();
        let started_ms = self.shared.config.clock.now_ms();
        let mut attempt = 0;
        loop {
            attempt += 1;
            // The channel turned RED (or was blocked) since this send was admitted, or this
            // node lost the number's cell (cluster mode: fenced): not sent.
            let now = self.shared.config.clock.now_ms();
            if self.blocked() || !self.fence.holds(now) {
                return SendResult::Replan;
            }
            // The provider fails for this number (D-125): back to the campaign, whose next
            // send through the number is a single probe once the back-off ends.
            if self.outage_until.load(std::sync::atomic::Ordering::Relaxed) > now {
                return SendResult::Replan;
            }
            if let Some(link) = self.link.as_mut() {
                link.started(now);
            }
            watch.lap();
            let res = self
                .shared
                .graph
                .send_message(self.token.expose(), &self.record.phone_number_id, request)
                .await;
            send_phase("call", watch.lap());
            let e = match res {
                Ok(resp) => {
                    let _ = self.myself.cast(ChannelMsg::Outcome(SendOutcome::Accepted));
                    self.accepted_at.fetch_max(
                        self.shared.config.clock.now_ms(),
                        std::sync::atomic::Ordering::Relaxed,
                    );
                    return match resp.message_id() {
                        Some(wamid) => {
                            metrics::counter!("disparo_messages_sent_total", "channel_id" => channel_label).increment(1);
                            SendResult::Sent {
                                provider_message_id: wamid.to_string(),
                            }
                        }
                        // Accepted without an id: only a status webhook can settle it.
                        None => SendResult::InDoubt,
                    };
                }
                Err(e) => e,
            };
            let kind = e.kind();
            metrics::counter!("disparo_messages_failed_total", "channel_id" => channel_label.clone(), "kind" => format!("{kind:?}")).increment(1);
            let _ = self.myself.cast(ChannelMsg::Outcome(refused(&e)));
            let others_accepted =
                self.accepted_at.load(std::sync::atomic::Ordering::Relaxed) >= started_ms;
            match campaign_result(&e, attempt, others_accepted) {
                Some(result) => return result,
                None => {
                    if let provider::NextStep::RetryAfter(ms) = kind.next_step(attempt) {
                        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                    }
                }
            }
        }
    }
}

/// What a campaign send's provider refusal at attempt `attempt` makes of its recipient
/// (D-032); `None`: try again (a transient error before [`TRANSIENT_ATTEMPTS`]).
/// `others_accepted`: another send of the number was accepted since this one's first try.
fn campaign_result(
    e: &provider::ProviderError,
    attempt: u32,
    others_accepted: bool,
) -> Option<SendResult> {
    Some(match e.kind() {
        // No answer: the provider may have taken it. A status webhook (carrying our id)
        // settles it, or the grace period sends it again (D-032).
        _ if matches!(e, provider::ProviderError::Timeout) => SendResult::InDoubt,
        ErrorKind::Transient if attempt < TRANSIENT_ATTEMPTS => return None,
        // The provider fails for every send of the number (an outage): back to the campaign,
        // which the number's back-off holds until the provider answers again (D-125).
        ErrorKind::Transient if !others_accepted => SendResult::Replan,
        // Throttled (the number backs off) or stopped by the number's state (credential,
        // payment, account): back to the campaign, another number or a later tick takes it.
        ErrorKind::RateLimited
        | ErrorKind::PairRateLimited
        | ErrorKind::InvalidCredential
        | ErrorKind::Payment
        | ErrorKind::AccountLocked
        | ErrorKind::NotRegistered => SendResult::Replan,
        // The recipient cannot receive messages: skipped, never retried.
        ErrorKind::InvalidRecipient => SendResult::Failed {
            code: e.code(),
            reason: e.reason(),
            skip: true,
        },
        // Re-engagement, the per-user marketing limit, template problems, transient errors
        // past their attempts…: failed with the provider's error, no retry (a resend can try
        // again).
        _ => SendResult::Failed {
            code: e.code(),
            reason: e.reason(),
            skip: false,
        },
    })
}

/// Adds the time (µs) of a campaign send's phase (`wait` for the in-flight window, the
/// provider `call`, `handoff` to the writer) to `disparo_campaign_send_phase_microseconds_total`
/// and counts it in `disparo_campaign_send_phases_total`, both labelled `phase`: their ratio
/// is the mean. Counters, not a histogram: the exporter keeps every histogram sample until its
/// upkeep, and three per send were the largest part of its memory under a campaign.
/// Where a 1:1 send's time goes, by phase: `prepare` (its content checked and resolved before
/// the number's actor is asked), `mailbox` (waiting for the actor to take it), `pacing` (its
/// throughput slot), `window` (a place in the number's in-flight window), `write` (its row
/// stored), `call` (the provider), `answer` (the answer stored):
/// `disparo_api_send_phase_microseconds_total{phase}` over `disparo_api_send_phases_total`
/// (counters, as for campaign sends: four histogram samples per send would cost the exporter
/// memory). A phase that took [`SLOW_PHASE`] or more is also counted in
/// `disparo_api_send_slow_phases_total{phase}`: where a 1:1 send's tail latency is spent.
pub(crate) fn api_send_phase(phase: &'static str, elapsed: std::time::Duration) {
    let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
    metrics::counter!("disparo_api_send_phase_microseconds_total", "phase" => phase)
        .increment(micros);
    metrics::counter!("disparo_api_send_phases_total", "phase" => phase).increment(1);
    if elapsed >= SLOW_PHASE {
        metrics::counter!("disparo_api_send_slow_phases_total", "phase" => phase).increment(1);
    }
}

/// A 1:1 send's phase this long or longer is counted as slow (half the 50 ms p99 that issue 54
/// asks of a 1:1 send during a campaign).
const SLOW_PHASE: std::time::Duration = std::time::Duration::from_millis(25);

fn send_phase(phase: &'static str, elapsed: std::time::Duration) {
    let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
    metrics::counter!("disparo_campaign_send_phase_microseconds_total", "phase" => phase)
        .increment(micros);
    metrics::counter!("disparo_campaign_send_phases_total", "phase" => phase).increment(1);
}
