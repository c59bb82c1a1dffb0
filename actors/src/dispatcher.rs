//! `WebhookDispatcher`: attempts the outbox's due deliveries (signed POSTs to integrators),
//! records every attempt, and schedules retries by the [`engine::webhook::RetrySchedule`].
//!
//! Deliveries are already stored when they reach it, so a restart loses nothing: a new
//! dispatcher picks up every pending row whose time has come.

use crate::clock::Moment;
use crate::time::iso;
use engine::webhook::{signature_header, standard_signature, RetrySchedule};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use rand::Rng;
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use storage::webhooks::{Attempt, AttemptOutcome, DueDelivery};
use storage::Store;
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

/// Messages of the dispatcher.
#[derive(Debug)]
pub enum DispatcherMsg {
    /// New deliveries were written: look soon.
    Wake,
    /// Look now (timer, or after a wake).
    Poll,
    /// An attempt of this subscription and ordering key finished (its outcome recorded).
    Done(i64, String),
    /// A delivery of this subscription and ordering key (the third field) was delivered; its
    /// record is on its way to the writer. The key is free at once: the delivery is left out
    /// of the picks until [`DispatcherMsg::Recorded`] names it (D-085).
    Delivered(i64, String, i64),
    /// These delivered deliveries' records were written (or could not be: they stay pending
    /// and are attempted again).
    Recorded(Vec<i64>),
    /// Delete settled deliveries past the retention.
    Purge,
    /// Publish the backlog gauges.
    Gauges,
    /// A graceful stop (issue 50, D-100): start no attempt any more and answer once every
    /// attempt under way ended and is recorded, so the subscriptions' leases can be released
    /// without a peer POSTing what this process delivered.
    Drain(ractor::RpcReplyPort<()>),
}

/// Dispatcher settings.
#[derive(Debug, Clone)]
pub struct DispatcherConfig {
    /// Retry schedule.
    pub schedule: RetrySchedule,
    /// Timeout of one attempt.
    pub timeout: Duration,
    /// Most attempts in flight at once.
    pub max_in_flight: usize,
    /// Most attempts in flight at once to one subscription (endpoint), each of a different
    /// ordering key (D-065).
    pub max_per_endpoint: usize,
    /// How often the outbox is polled for due retries.
    pub poll_interval: Duration,
    /// The SSRF guard every attempt goes through (D-042).
    pub guard: crate::outbound::Guard,
    /// A subscription whose attempts have only failed for this long is disabled (Svix: 5
    /// days).
    pub disable_after: Duration,
    /// Settled deliveries older than this are deleted.
    pub retention: Duration,
    /// Bodies of the provider webhook log older than this are dropped (the lines stay;
    /// `DISPARO_PROVIDER_LOG_RETENTION_MS`, D-061).
    pub log_body_retention: Duration,
    /// The runtime's clock (issue 51).
    pub clock: crate::clock::Clock,
}

/// Start arguments.
pub struct DispatcherArgs {
    /// Store.
    pub store: Store,
    /// Settings.
    pub config: DispatcherConfig,
}

/// The actor.
pub struct WebhookDispatcher;

/// Its state.
pub struct DispatcherState {
    store: Store,
    config: Arc<DispatcherConfig>,
    http: reqwest::Client,
    /// The ordering keys with an attempt in flight, per subscription (one per key keeps a
    /// conversation's order; D-065).
    in_flight: HashMap<i64, HashSet<String>>,
    /// Deliveries delivered whose record the writer has not committed yet: still `pending`
    /// in the store, never picked again (D-085).
    recording: HashSet<i64>,
    /// The outbox's window as last read, less what was picked since (D-086); `None` when it
    /// must be read again.
    window: Option<Window>,
    poll_scheduled: bool,
    /// When the subscriptions' leases were last taken and renewed (D-100).
    leased_at: Option<std::time::Instant>,
    /// Graceful stop: who waits for the attempts under way to end (empty: not draining).
    drain: Vec<ractor::RpcReplyPort<()>>,
    /// Whether a graceful stop began (no attempt starts).
    draining: bool,
    /// The attempts' writer.
    recorder: Recorder,
}

/// The outbox's window kept between polls (D-086): the pending deliveries read by
/// [`Store::pending_window`], less those picked since. Picking from it keeps each key's order:
/// it holds each subscription's oldest pending deliveries, and anything written since has a
/// larger id. A delivery leaves it when picked, and when delivered (a window read while it was
/// in flight holds it). It is dropped when that may no longer hold or when it may hide work: on a
/// wake (new, retried or re-pended deliveries, a changed subscription), after a failed
/// attempt (its delivery waits for a retry, and it was taken out of the window when picked),
/// when it is older than the poll interval, and when nothing in it can be picked while a
/// subscription whose window was full has room for more.
struct Window {
    rows: Vec<engine::webhook::PendingDelivery>,
    /// Subscriptions that had [`storage::webhooks::DUE_WINDOW`] rows: more may wait beyond.
    full: HashSet<i64>,
    read_at: std::time::Instant,
}

impl Window {
    /// Whether a subscription whose window was full has room for another attempt.
    fn may_hide_work(
        &self,
        in_flight: &HashMap<i64, HashSet<String>>,
        per_endpoint: usize,
    ) -> bool {
        self.full
            .iter()
            .any(|s| in_flight.get(s).map_or(0, HashSet::len) < per_endpoint)
    }
}

/// Most attempts recorded in one transaction.
pub const ATTEMPT_BATCH: usize = 256;

/// How long the attempts' writer gathers delivered attempts before their transaction when no
/// failed attempt waits for it (D-087): a delivered attempt's key is already free (D-085), so
/// the wait costs no delivery any time, and each commit (a WAL flush) serves more attempts.
pub const ATTEMPT_LINGER: Duration = Duration::from_millis(10);

/// An attempt on its way to the writer, with where to answer: the attempt's task, which
/// waits for the commit (a failed attempt), or nobody (a delivered one: the writer tells the
/// dispatcher with [`DispatcherMsg::Recorded`]).
struct Recording {
    attempt: Attempt,
    reply: Option<oneshot::Sender<storage::Result<Option<i64>>>>,
}

/// The queue to the attempts' writer: a task that records every attempt that finished while
/// its previous transaction ran in one transaction ([`storage::Store::record_attempts`]), so
/// a busy outbox costs a commit per batch, not two per attempt (issue 25 part 3).
#[derive(Clone)]
struct Recorder(mpsc::Sender<Recording>);

impl Recorder {
    /// Starts the writer, which tells `dispatcher` when delivered attempts are written; it
    /// ends when every sender is gone.
    fn spawn(store: Store, dispatcher: ActorRef<DispatcherMsg>) -> Self {
        let (tx, rx) = mpsc::channel(ATTEMPT_BATCH * 4);
        tokio::spawn(
            write_attempts(store, rx, dispatcher)
                .instrument(tracing::info_span!("webhook_attempt_writer")),
        );
        Recorder(tx)
    }

    /// Records one attempt (waits for its transaction's commit); returns when the
    /// subscription's run of failures began (`None` after a delivery).
    async fn record(&self, attempt: Attempt) -> Result<Option<i64>, crate::ActorError> {
        let (reply, answer) = oneshot::channel();
        self.0
            .send(Recording {
                attempt,
                reply: Some(reply),
            })
            .await
            .map_err(|_| crate::ActorError::Unavailable)?;
        Ok(answer.await.map_err(|_| crate::ActorError::Unavailable)??)
    }

    /// Queues a delivered attempt without waiting for its commit (waits only while the queue
    /// is full); the writer sends [`DispatcherMsg::Recorded`] once it is written.
    async fn queue_delivered(&self, attempt: Attempt) -> Result<(), crate::ActorError> {
        self.0
            .send(Recording {
                attempt,
                reply: None,
            })
            .await
            .map_err(|_| crate::ActorError::Unavailable)
    }
}

/// The attempts' writer: takes what queued (at most [`ATTEMPT_BATCH`]), records it in one
/// transaction, answers each. A failed attempt's batch is written at once (its task waits for
/// the commit); a batch of delivered attempts only waits up to [`ATTEMPT_LINGER`] for more.
/// Under load the batches also grow with the time the previous commit took. When a batch
/// fails, each of its attempts is recorded alone, so one bad row answers its own error.
async fn write_attempts(
    store: Store,
    mut queue: mpsc::Receiver<Recording>,
    dispatcher: ActorRef<DispatcherMsg>,
) {
    let mut batch: Vec<Recording> = Vec::with_capacity(ATTEMPT_BATCH);
    while let Some(first) = queue.recv().await {
        batch.push(first);
        let linger_until = tokio::time::Instant::now() + ATTEMPT_LINGER;
        while batch.len() < ATTEMPT_BATCH {
            match queue.try_recv() {
                Ok(r) => batch.push(r),
                // Nobody waits for a delivered attempt's commit: gather more for a while,
                // unless a failed attempt in the batch waits for it (D-087).
                Err(_) if batch.iter().all(|r| r.reply.is_none()) => {
                    match tokio::time::timeout_at(linger_until, queue.recv()).await {
                        Ok(Some(r)) => batch.push(r),
                        Ok(None) | Err(_) => break,
                    }
                }
                Err(_) => break,
            }
        }
        let attempts: Vec<Attempt> = batch.iter().map(|r| r.attempt.clone()).collect();
        metrics::histogram!("disparo_webhook_attempt_batch").record(attempts.len() as f64);
        let delivered: Vec<i64> = batch
            .iter()
            .filter(|r| r.reply.is_none())
            .map(|r| r.attempt.id)
            .collect();
        match store.record_attempts(&attempts).await {
            Ok(runs) => {
                for (r, run) in batch.drain(..).zip(runs) {
                    if let Some(reply) = r.reply {
                        let _ = reply.send(Ok(run));
                    }
                }
            }
            Err(e) => {
                if batch.len() > 1 {
                    tracing::warn!(attempts = batch.len(), error = %e, "a batch of webhook attempts failed; recording each alone");
                }
                for r in batch.drain(..) {
                    let alone = store
                        .record_attempts(std::slice::from_ref(&r.attempt))
                        .await
                        .map(|runs| runs.into_iter().next().flatten());
                    match r.reply {
                        Some(reply) => {
                            let _ = reply.send(alone);
                        }
                        // Still pending in the store: attempted again once the dispatcher
                        // hears of it below (at least once, as before).
                        None => {
                            if let Err(e) = alone {
                                tracing::error!(delivery_id = r.attempt.id, error = %e, "could not record a delivered webhook attempt");
                            }
                        }
                    }
                }
            }
        }
        if !delivered.is_empty() {
            let _ = dispatcher.cast(DispatcherMsg::Recorded(delivered));
        }
    }
}

/// The body of a delivery: the spec's envelope. Rendered from stored fields only, with sorted
/// keys, so every attempt of a delivery sends the same bytes.
pub fn render_envelope(d: &DueDelivery) -> Vec<u8> {
    if let Some(client_id) = d.client_id {
        // A provider event forwarded to a client (D-061).
        return serde_json::to_vec(&json!({
            "event": d.event,
            "delivery_id": d.id,
            "received_at": iso(d.created_at),
            "phone_number_id": d.channel.get("provider_phone_number_id"),
            "client_id": client_id,
            "payload": d.data,
        }))
        .expect("JSON values serialise");
    }
    serde_json::to_vec(&json!({
        "event": d.event,
        "delivery_id": d.id,
        "created_at": iso(d.created_at),
        "channel": d.channel,
        "data": d.data,
    }))
    .expect("JSON values serialise")
}

impl Actor for WebhookDispatcher {
    type Msg = DispatcherMsg;
    type State = DispatcherState;
    type Arguments = DispatcherArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<DispatcherMsg>,
        args: DispatcherArgs,
    ) -> Result<DispatcherState, ActorProcessingErr> {
        myself.send_interval(args.config.poll_interval, || DispatcherMsg::Poll);
        let _ = myself.cast(DispatcherMsg::Purge);
        myself.send_interval(Duration::from_secs(3600), || DispatcherMsg::Purge);
        myself.send_interval(Duration::from_secs(5), || DispatcherMsg::Gauges);
        let http = args
            .config
            .guard
            .client(args.config.timeout)
            .user_agent(concat!("disparo-webhooks/", env!("CARGO_PKG_VERSION")))
            .pool_max_idle_per_host(args.config.max_in_flight)
            .build()?;
        Ok(DispatcherState {
            recorder: Recorder::spawn(args.store.clone(), myself.clone()),
            store: args.store,
            config: Arc::new(args.config),
            http,
            in_flight: HashMap::new(),
            recording: HashSet::new(),
            window: None,
            poll_scheduled: false,
            leased_at: None,
            drain: Vec::new(),
            draining: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<DispatcherMsg>,
        msg: DispatcherMsg,
        st: &mut DispatcherState,
    ) -> Result<(), ActorProcessingErr> {
        // The clock is read once per message (issue 51): everything below decides at `now`.
        let now = st.config.clock.moment();
        match msg {
            DispatcherMsg::Wake => {
                st.window = None;
                // Coalesce bursts of wakes into one poll.
                if !st.poll_scheduled {
                    st.poll_scheduled = true;
                    myself.send_after(Duration::from_millis(2), || DispatcherMsg::Poll);
                }
            }
            // The database is away (D-124): the outbox waits, no round of failing reads.
            DispatcherMsg::Poll if !st.store.available() => st.poll_scheduled = false,
            DispatcherMsg::Poll => {
                st.poll_scheduled = false;
                // Renewed also while every slot is busy (the poll then reads nothing).
                lease(st, now).await;
                poll(&myself, st, now).await;
            }
            DispatcherMsg::Gauges => match st.store.outbox_backlog().await {
                Ok((pending, oldest)) => {
                    metrics::gauge!("disparo_webhook_backlog").set(pending as f64);
                    let age = oldest.map_or(0.0, |t| (now.ms - t).max(0) as f64 / 1000.0);
                    metrics::gauge!("disparo_webhook_oldest_pending_seconds").set(age);
                }
                Err(e) => tracing::warn!(error = %e, "could not read the webhook backlog"),
            },
            DispatcherMsg::Purge => {
                let before = now.ms - st.config.retention.as_millis() as i64;
                match st.store.purge_deliveries(before).await {
                    Ok(0) => {}
                    Ok(n) => {
                        tracing::info!(deleted = n, "webhook deliveries past retention deleted")
                    }
                    Err(e) => tracing::error!(error = %e, "could not purge webhook deliveries"),
                }
                let before = now.ms - st.config.log_body_retention.as_millis() as i64;
                if let Err(e) = st.store.purge_provider_log_bodies(before).await {
                    tracing::error!(error = %e, "could not drop provider log bodies");
                }
            }
            DispatcherMsg::Done(subscription_id, key) => {
                // The failed delivery is pending again with a later time, and no longer in the
                // window: the window must be read before its key's next delivery is picked.
                st.window = None;
                release(&myself, st, subscription_id, &key)
            }
            DispatcherMsg::Delivered(subscription_id, key, delivery_id) => {
                st.recording.insert(delivery_id);
                // A window read while it was in flight holds it as its key's head.
                if let Some(w) = st.window.as_mut() {
                    w.rows.retain(|d| d.id != delivery_id);
                }
                release(&myself, st, subscription_id, &key);
            }
            DispatcherMsg::Recorded(ids) => {
                for id in ids {
                    st.recording.remove(&id);
                }
            }
            DispatcherMsg::Drain(reply) => {
                st.draining = true;
                st.drain.push(reply);
            }
        }
        if st.draining && st.in_flight.is_empty() && st.recording.is_empty() {
            for reply in st.drain.drain(..) {
                let _ = reply.send(());
            }
        }
        Ok(())
    }
}

/// Frees a subscription's ordering key after an attempt and looks for its next delivery.
fn release(
    myself: &ActorRef<DispatcherMsg>,
    st: &mut DispatcherState,
    subscription_id: i64,
    key: &str,
) {
    if let Some(keys) = st.in_flight.get_mut(&subscription_id) {
        keys.remove(key);
        if keys.is_empty() {
            st.in_flight.remove(&subscription_id);
        }
    }
    // The subscription's next delivery may be waiting behind the one just done.
    if !st.poll_scheduled {
        st.poll_scheduled = true;
        let _ = myself.cast(DispatcherMsg::Poll);
    }
}

async fn poll(myself: &ActorRef<DispatcherMsg>, st: &mut DispatcherState, now: Moment) {
    if st.draining {
        return;
    }
    let free = st
        .config
        .max_in_flight
        .saturating_sub(st.in_flight.values().map(HashSet::len).sum());
    if free == 0 {
        return;
    }
    metrics::counter!("disparo_webhook_polls_total").increment(1);
    let Some(ids) = pick(st, now, free).await else {
        return;
    };
    let due = match st.store.deliveries_to_attempt(now.ms, &ids).await {
        Ok(d) => d,
        Err(e) => {
            tracing::error!(error = %e, "could not read due webhook deliveries");
            st.window = None;
            return;
        }
    };
    spawn_attempts(myself, st, due);
}

/// Picks up to `free` due deliveries from the window of due rows (read again when stale, or
/// when it may hide work), at most `max_per_endpoint` per subscription and one per ordering
/// key in flight; `None` when the window could not be read.
async fn pick(st: &mut DispatcherState, now: Moment, free: usize) -> Option<Vec<i64>> {
    let per_endpoint = st.config.max_per_endpoint;
    let mut fresh = false;
    let ids = loop {
        let stale = st
            .window
            .as_ref()
            .is_none_or(|w| now.at.saturating_duration_since(w.read_at) >= st.config.poll_interval);
        if stale {
            match read_window(st, now).await {
                Ok(w) => st.window = Some(w),
                Err(e) => {
                    tracing::error!(error = %e, "could not read due webhook deliveries");
                    st.window = None;
                    return None;
                }
            }
            fresh = true;
        }
        let window = st.window.as_mut().expect("read above");
        let in_flight = &st.in_flight;
        let ids = engine::webhook::pick_due(
            &window.rows,
            now.ms,
            per_endpoint,
            free,
            |s| in_flight.get(&s).map_or(0, HashSet::len),
            |s, k| in_flight.get(&s).is_some_and(|keys| keys.contains(k)),
        );
        if ids.is_empty() && !fresh && window.may_hide_work(in_flight, per_endpoint) {
            st.window = None;
            continue;
        }
        let picked: HashSet<i64> = ids.iter().copied().collect();
        window.rows.retain(|d| !picked.contains(&d.id));
        break ids;
    };
    Some(ids)
}

/// Starts an attempt task per delivery, each holding its subscription's ordering key.
fn spawn_attempts(
    myself: &ActorRef<DispatcherMsg>,
    st: &mut DispatcherState,
    due: Vec<DueDelivery>,
) {
    for d in due {
        st.in_flight
            .entry(d.subscription_id)
            .or_default()
            .insert(d.order_key.clone());
        let (store, http, config, me) = (
            st.store.clone(),
            st.http.clone(),
            st.config.clone(),
            myself.clone(),
        );
        let recorder = st.recorder.clone();
        tokio::spawn(async move {
            let (subscription_id, key) = (d.subscription_id, d.order_key.clone());
            let ctx = Ctx {
                store: &store,
                recorder: &recorder,
                config: &config,
                dispatcher: &me,
            };
            if !attempt(ctx, &http, d).await {
                let _ = me.cast(DispatcherMsg::Done(subscription_id, key));
            }
        });
    }
}

/// How often the subscriptions' leases are taken and renewed, at most (D-100).
const LEASE_EVERY: Duration = Duration::from_millis(250);

/// Takes and renews subscription leases when the last time is [`LEASE_EVERY`] ago (a failure
/// is logged; the leases held last until their end).
async fn lease(st: &mut DispatcherState, now: Moment) {
    if st
        .leased_at
        .is_some_and(|t| now.at.saturating_duration_since(t) < LEASE_EVERY)
    {
        return;
    }
    st.leased_at = Some(now.at);
    let hold = st.store.session_ttl_ms() + st.config.timeout.as_millis() as i64;
    if let Err(e) = st.store.lease_subscriptions(hold).await {
        tracing::warn!(error = %e, "webhook subscription leases not renewed");
    }
}

/// Reads the outbox's window (one read of the store per call; D-086), leaving out the
/// deliveries being recorded.
async fn read_window(st: &mut DispatcherState, now: Moment) -> storage::Result<Window> {
    lease(st, now).await;
    let mut rows = st.store.pending_window().await?;
    metrics::counter!("disparo_webhook_window_reads_total").increment(1);
    let mut per_subscription: HashMap<i64, i64> = HashMap::new();
    for d in &rows {
        *per_subscription.entry(d.subscription_id).or_default() += 1;
    }
    rows.retain(|d| !st.recording.contains(&d.id));
    Ok(Window {
        rows,
        full: per_subscription
            .into_iter()
            .filter(|(_, n)| *n >= storage::webhooks::DUE_WINDOW)
            .map(|(s, _)| s)
            .collect(),
        read_at: now.at,
    })
}

/// An attempt's signature headers (D-119). Standard Webhooks (`webhook-id`: the delivery's id,
/// the same at every attempt; `webhook-timestamp`: the attempt's time, s; `webhook-signature`:
/// `v1,<base64>`) and the legacy `X-Svc-Signature: sha256=<hex>` of the body alone. During a
/// rotation's overlap both secrets sign, the newest first: space-separated in the standard
/// header, comma-separated in the legacy one (D-064).
struct Signed {
    id: String,
    timestamp_s: i64,
    standard: String,
    legacy: String,
}

impl Signed {
    fn new(d: &DueDelivery, body: &[u8], timestamp_s: i64) -> Self {
        let id = d.id.to_string();
        let secrets: Vec<&str> = std::iter::once(d.secret.expose())
            .chain(d.previous_secret.as_ref().map(|p| p.expose()))
            .collect();
        let standard = secrets
            .iter()
            .map(|s| standard_signature(s, &id, timestamp_s, body))
            .collect::<Vec<_>>()
            .join(" ");
        let legacy = secrets
            .iter()
            .map(|s| signature_header(s, body))
            .collect::<Vec<_>>()
            .join(",");
        Signed {
            id,
            timestamp_s,
            standard,
            legacy,
        }
    }
}

/// What an attempt's task records with.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    store: &'a Store,
    recorder: &'a Recorder,
    config: &'a DispatcherConfig,
    dispatcher: &'a ActorRef<DispatcherMsg>,
}

/// Makes one attempt and records it. Returns whether the delivery's key was already freed
/// (delivered: [`DispatcherMsg::Delivered`] was sent); otherwise the caller sends `Done` once
/// the failed attempt is recorded.
async fn attempt(ctx: Ctx<'_>, http: &reqwest::Client, d: DueDelivery) -> bool {
    let config = ctx.config;
    let body = render_envelope(&d);
    let signed = Signed::new(&d, &body, config.clock.now_ms() / 1000);
    // Checked again at every attempt: a literal address connects without a resolution, and
    // the policy may have changed since the subscription was made.
    if let Err(refusal) = config.guard.check_url(&d.url) {
        tracing::warn!(
            delivery_id = d.id,
            "webhook attempt refused by the outbound guard"
        );
        metrics::counter!("disparo_outbound_refused_total").increment(1);
        let error = format!("refused: {}", crate::outbound::refusal_message(&refusal));
        finish(ctx, &d, None, error).await;
        return false;
    }
    let res = http
        .post(&d.url)
        .header("content-type", "application/json")
        .header("webhook-id", &signed.id)
        .header("webhook-timestamp", signed.timestamp_s.to_string())
        .header("webhook-signature", signed.standard)
        .header("x-svc-signature", signed.legacy)
        .header("x-svc-event", &d.event)
        .header("x-svc-delivery", &signed.id)
        .body(body)
        .send()
        .await;
    let failure = match res {
        Ok(r) if r.status().is_success() => Err(r.status().as_u16()),
        Ok(r) => Ok((
            Some(r.status().as_u16()),
            format!("HTTP {}", r.status().as_u16()),
        )),
        Err(e) if crate::outbound::is_refused(&e) => Ok((
            None,
            "refused: the URL's host resolves to a private or local address".to_string(),
        )),
        Err(e) if e.is_timeout() => Ok((None, "timeout".to_string())),
        Err(e) if e.is_connect() => Ok((None, "connection refused or unreachable".to_string())),
        Err(e) => Ok((None, format!("request error: {e}"))),
    };
    // `failure` is Err(status) on success, to keep the happy path's code.
    match failure {
        Err(status_code) => {
            delivered(ctx, &d, status_code).await;
            true
        }
        Ok((status_code, error)) => {
            finish(ctx, &d, status_code, error).await;
            false
        }
    }
}

/// A delivered attempt: the key is freed first (so the dispatcher leaves this delivery out of
/// its picks before the writer can report it written), then the record is queued without
/// waiting for its commit. The writer commits in queue order, so a crash loses at most the
/// last records of a key, which are delivered again in order (D-085).
async fn delivered(ctx: Ctx<'_>, d: &DueDelivery, status_code: u16) {
    metrics::counter!("disparo_webhook_deliveries_total", "outcome" => "delivered").increment(1);
    let _ = ctx.dispatcher.cast(DispatcherMsg::Delivered(
        d.subscription_id,
        d.order_key.clone(),
        d.id,
    ));
    let queued = ctx
        .recorder
        .queue_delivered(Attempt {
            id: d.id,
            subscription_id: d.subscription_id,
            outcome: AttemptOutcome::Delivered { status_code },
        })
        .await;
    if let Err(e) = queued {
        tracing::error!(delivery_id = d.id, error = %e, "could not record a webhook attempt");
        let _ = ctx.dispatcher.cast(DispatcherMsg::Recorded(vec![d.id]));
    }
}

/// Records a failed attempt: a retry on the schedule, or the last one.
async fn finish(ctx: Ctx<'_>, d: &DueDelivery, status_code: Option<u16>, error: String) {
    // Read once the attempt is over: the retry's time counts from its end.
    let now = ctx.config.clock.now_ms();
    let done = (d.attempts + 1) as u32;
    let jitter: f64 = rand::thread_rng().gen();
    let outcome = match ctx.config.schedule.next_delay_ms(done, jitter) {
        Some(ms) => AttemptOutcome::Retry {
            status_code,
            error,
            next_at: now + ms as i64,
        },
        None => AttemptOutcome::GiveUp { status_code, error },
    };
    record(ctx, d, outcome, now).await;
}

/// Records an attempt (ended at `now`, ms); a subscription whose attempts have only failed for
/// [`DispatcherConfig::disable_after`] is disabled, the account's other subscriptions get
/// `webhook.disabled`, and the audit log a line.
async fn record(ctx: Ctx<'_>, d: &DueDelivery, outcome: AttemptOutcome, now: i64) {
    let label = match &outcome {
        AttemptOutcome::Delivered { .. } => "delivered",
        AttemptOutcome::Retry { .. } => "retry",
        AttemptOutcome::GiveUp { .. } => "failed",
    };
    metrics::counter!("disparo_webhook_deliveries_total", "outcome" => label).increment(1);
    let last_error = match &outcome {
        AttemptOutcome::Retry { error, .. } | AttemptOutcome::GiveUp { error, .. } => error.clone(),
        AttemptOutcome::Delivered { .. } => String::new(),
    };
    let recorded = ctx
        .recorder
        .record(Attempt {
            id: d.id,
            subscription_id: d.subscription_id,
            outcome,
        })
        .await;
    let failing_since = match recorded {
        Ok(f) => f,
        Err(e) => {
            tracing::error!(delivery_id = d.id, error = %e, "could not record a webhook attempt");
            return;
        }
    };
    let Some(since) = failing_since else {
        return;
    };
    if now - since < ctx.config.disable_after.as_millis() as i64 {
        return;
    }
    if let Err(e) = disable(ctx.store, d, since, &last_error).await {
        tracing::error!(subscription_id = d.subscription_id, error = %e, "could not disable a failing subscription");
    }
}

async fn disable(
    store: &Store,
    d: &DueDelivery,
    since: i64,
    last_error: &str,
) -> Result<(), storage::StorageError> {
    let reason = format!(
        "todas as tentativas falharam desde {} (última: {last_error})",
        iso(since)
    );
    let Some(sub) = store
        .disable_subscription(d.subscription_id, &reason)
        .await?
    else {
        return Ok(());
    };
    tracing::warn!(
        subscription_id = sub.id,
        "webhook subscription disabled after failing for too long"
    );
    metrics::counter!("disparo_webhook_subscriptions_disabled_total").increment(1);
    store
        .enqueue_for_account(
            sub.account_id,
            sub.id,
            engine::webhook::EventKind::WebhookDisabled,
            &d.channel,
            &json!({
                "subscription_id": sub.id,
                "url": sub.url,
                "failing_since": iso(sub.failing_since),
                "reason": reason,
            }),
        )
        .await?;
    store
        .append_audit(
            sub.account_id,
            "disparo",
            "webhook.disabled",
            &format!("/api/v1/webhooks/{}", sub.id),
            200,
        )
        .await?;
    Ok(())
}
