//! `ChannelActor`: one per connected number. It holds the live truth about the number
//! (quality, tier, rolling 24 h business-initiated recipients, credential state), admits sends
//! by the engine's rules, and applies the provider's events for it.
//!
//! It never awaits a provider call in its handler: an admitted send is stored `queued`, then a
//! task bounded by the channel's in-flight window makes the call, records the outcome and
//! answers the caller; the task reports back with [`ChannelMsg::Outcome`].

use crate::error::ActorError;
use crate::registry::ChannelEntry;
use crate::{events, Shared};
use engine::channel::{
    business_initiated_allowed, health, ChannelStatus, Health, HealthCode, HealthInput, Quality,
    Tier, WabaStanding,
};
use engine::guardrail::{self, CapToday, Guardrails};
use engine::limits::RollingUnique;
use engine::message::{window_open, MessageKind};
use engine::pacing::Pacer;
use engine::phone::Phone;
use engine::{Secret, DAY_MS};
use provider::wire::{SendMessageRequest, TemplatePayload};
use provider::ErrorKind;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use std::sync::Arc;
use storage::campaigns::{SendResult, Settlement};
use storage::channels::{ChannelRecord, ChannelSecrets};
use storage::messages::{MessageRecord, NewInbound, NewOutbound, StatusReport};
use storage::now_ms;
use tokio::sync::Semaphore;
use tracing::Instrument;

/// The prefix of `biz_opaque_callback_data` values disparo sets: `dsp:<message id>`.
pub const CALLBACK_PREFIX: &str = "dsp:";

/// What to send.
#[derive(Debug, Clone)]
pub enum SendContent {
    /// Free text (only inside the 24-hour window).
    Text {
        /// The text, 1 to 4096 characters.
        body: String,
    },
    /// An approved template.
    Template {
        /// Name at the provider.
        name: String,
        /// Locale, e.g. `pt_BR`.
        language: String,
        /// What the caller gave: body parameters, header variable or media (by link or
        /// uploaded id), URL button suffix, copy code.
        given: engine::template::Given,
        /// The template's layout when disparo holds it (a library template): the send is
        /// completed from it (every component the template needs, issue 16); `None` sends
        /// exactly what was given.
        layout: Option<Arc<engine::template::Layout>>,
        /// The library template's text header, when known: stored with the message so the
        /// send result shows it (`header`; issue 17).
        header_text: Option<String>,
    },
    /// Media at a public URL (only inside the 24-hour window); the runtime downloads it into
    /// [`SendContent::MediaFile`] before the channel sees it.
    Media {
        /// Image, document, video or audio.
        kind: engine::media::MediaKind,
        /// Public URL.
        url: String,
        /// Caption (not for audio).
        caption: Option<String>,
    },
    /// A library template by id with the audience columns of the recipient; the runtime
    /// renders it into [`SendContent::Template`] through its var_map.
    Library {
        /// Library template id.
        id: i64,
        /// Audience columns (column → value).
        vars: std::collections::BTreeMap<String, String>,
    },
    /// A downloaded, checked file: uploaded to the provider, then sent by media id.
    MediaFile {
        /// The file.
        file: crate::media::FetchedMedia,
        /// Caption.
        caption: Option<String>,
    },
}

/// What the send task sends: a ready request, or a file to upload first.
enum Prepared {
    Ready(Box<SendMessageRequest>),
    Upload {
        file: crate::media::FetchedMedia,
        caption: Option<String>,
        to: String,
    },
}

/// A send request, validated by the HTTP layer.
#[derive(Debug, Clone)]
pub struct SendCommand {
    /// The recipient.
    pub to: Phone,
    /// What to send.
    pub content: SendContent,
    /// Display text kept for a template message.
    pub preview_text: Option<String>,
    /// The request's `Idempotency-Key`, bound to the message when it is written (issue 15).
    pub idempotency_key: Option<String>,
    /// A group send: the number's group's 24 h limit applies, checked and counted under the
    /// group counter's lock (issue 15).
    pub group_limited: bool,
    /// When the caller stops waiting: a send not yet handed to the provider by then is
    /// dropped (the message is marked failed, never sent later as a second message).
    /// Set by [`crate::Runtime::send`].
    pub deadline: Option<std::time::Instant>,
}

/// A channel's live state as read by the API.
#[derive(Debug, Clone)]
pub struct ChannelSnapshot {
    /// The stored record with live quality, tier and credential state.
    pub record: ChannelRecord,
    /// Health object.
    pub health: Health,
}

/// Internal report of a send task.
#[derive(Debug)]
pub enum SendOutcome {
    /// The provider accepted it.
    Accepted,
    /// The provider refused it.
    Refused(ErrorKind),
    /// The provider refused it for the number's throughput (130429), with its `Retry-After`
    /// in ms when it sent one (issue 25).
    Throttled(Option<u64>),
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

/// Messages of a [`ChannelActor`].
#[derive(Debug)]
pub enum ChannelMsg {
    /// Send one message; the reply comes when the provider answered.
    Send(
        Box<SendCommand>,
        RpcReplyPort<Result<MessageRecord, ActorError>>,
    ),
    /// Apply status reports from a provider webhook; replies when stored.
    Statuses(Vec<StatusReport>, RpcReplyPort<Result<usize, ActorError>>),
    /// Record inbound messages from a provider webhook; replies when stored.
    Inbound(Vec<NewInbound>, RpcReplyPort<Result<usize, ActorError>>),
    /// A quality / tier change (`phone_number_quality_update`).
    QualityUpdate {
        /// New quality, when the event carried one.
        quality: Option<Quality>,
        /// New tier, when the event carried one.
        tier: Option<String>,
        /// When the provider sent it (the entry's `time`, ms); an update older than the one
        /// the number holds is ignored (issue 46).
        at: i64,
    },
    /// Read the live state.
    Snapshot(RpcReplyPort<ChannelSnapshot>),
    /// A send task's result.
    Outcome(SendOutcome),
    /// The WABA's standing changed (`account_update`).
    WabaStanding(WabaStanding),
    /// The number's template flags: whether an `auto_replicate` library template approved
    /// elsewhere in the account is not approved on it (health `template_ausente`; issue 17),
    /// and whether a template approved on it has RED quality (`template_qualidade_baixa`,
    /// D-074).
    TemplateFlags {
        /// A template is missing.
        missing: bool,
        /// A template's quality is RED.
        quality_red: bool,
    },
    /// Re-read the number at the provider (quality, tier, status, name); replies with the
    /// new state, or the provider's refusal. `None`: no one waits for the answer.
    Sync(Option<RpcReplyPort<Result<ChannelSnapshot, ActorError>>>),
    /// The result of the provider read a `Sync` started.
    SyncDone(
        Box<Result<provider::wire::PhoneNumber, provider::ProviderError>>,
        Option<RpcReplyPort<Result<ChannelSnapshot, ActorError>>>,
    ),
    /// The BM's payment works again: release the payment lock.
    PaymentReleased,
    /// Re-read the channel's record and credentials from storage (after an update).
    Reload(RpcReplyPort<Result<ChannelSnapshot, ActorError>>),
    /// How many campaign sends the channel takes now, or why it takes none.
    CampaignCredits(RpcReplyPort<(usize, Option<HealthCode>)>),
    /// Campaign sends (already claimed, each with its stored message).
    Dispatch(Box<Dispatch>),
    /// A campaign send finished (frees a credit); `sent: false` when the provider did not take
    /// it (it went back to the campaign), so it does not count against today's cap.
    CampaignSettled {
        /// Whether the provider took (or may have taken) the send.
        sent: bool,
    },
    /// Read the guardrails: settings and today's cap.
    Guardrails(RpcReplyPort<GuardrailView>),
    /// Replace the guardrail settings (already stored).
    SetGuardrails(Guardrails, RpcReplyPort<GuardrailView>),
    /// An owner or admin authorized `extra` more campaign sends today (already stored; the
    /// day's total authorized is given).
    Authorized(i64, RpcReplyPort<GuardrailView>),
}

/// A number's guardrails as `GET /channels/{id}/guardrails` shows them.
#[derive(Debug, Clone)]
pub struct GuardrailView {
    /// The settings.
    pub settings: Guardrails,
    /// Today's cap.
    pub today: CapToday,
    /// The local day (days since the epoch, UTC−03:00).
    pub day: i64,
    /// Campaign sends today.
    pub sent_today: i64,
    /// When the day ends and the count starts again (ms).
    pub resets_at: i64,
    /// Until when the number backs off after the provider's rate limit (ms), if it does.
    pub backoff_until: Option<i64>,
}

/// A batch of claimed campaign recipients for this channel.
#[derive(Debug)]
pub struct Dispatch {
    /// Template name to send (the version approved on this channel's WABA).
    pub template_name: String,
    /// Locale.
    pub language: String,
    /// The recipients.
    pub items: Vec<DispatchItem>,
    /// A group campaign's sends (D-038): each new recipient must fit the number's group's 24 h
    /// limit, else it goes back to the campaign.
    pub group_limited: bool,
    /// The template's layout: every send is completed from it (issue 16).
    pub layout: Arc<engine::template::Layout>,
    /// The campaign's gate: a send calls the provider only while it is open; halting the
    /// campaign closes it after the calls under way ended (issue 20).
    pub gate: crate::campaign::CampaignGate,
}

/// One claimed recipient.
#[derive(Debug, Clone)]
pub struct DispatchItem {
    /// Recipient row.
    pub recipient_id: i64,
    /// Message row.
    pub message_id: i64,
    /// Phone digits.
    pub phone: String,
    /// What the recipient's row gave (body, header variable, URL suffix) and the campaign's
    /// header media.
    pub given: engine::template::Given,
}

/// Campaign sends a channel keeps in flight at most (its share of the in-flight window): 256
/// (D-032; measured with `cargo bench --bench campaign_load`).
pub const CAMPAIGN_WINDOW: usize = 256;

/// How far ahead a channel books cadence slots when it grants credits (ms): a campaign tick
/// hands it at most what its cadence lets it send in this time.
pub const CADENCE_HORIZON_MS: i64 = 250;

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

/// The actor's state, rebuilt from storage on every start.
pub struct ChannelState {
    /// A library template is missing on the number ([`ChannelMsg::TemplateFlags`]).
    template_missing: bool,
    /// A template approved on the number has RED quality ([`ChannelMsg::TemplateFlags`]).
    template_quality_red: bool,
    record: Arc<ChannelRecord>,
    secrets: ChannelSecrets,
    status: ChannelStatus,
    quality: Quality,
    tier: Option<Tier>,
    credential_valid: bool,
    payment_locked_until: Option<i64>,
    waba: WabaStanding,
    recipients: RollingUnique,
    bm: Option<Arc<std::sync::Mutex<crate::bm::BmCounter>>>,
    /// The sending group's shared counter, when the number is in a group (D-037).
    group: Option<crate::group::SharedGroupCounter>,
    /// Provider calls in flight on the number (1:1 and campaign sends).
    in_flight: Arc<Semaphore>,
    /// The part of `in_flight` campaign sends may hold: the rest is kept for 1:1 sends
    /// (issue 25 part 2, D-076), so an API send never queues behind the campaign's window.
    campaign_share: Arc<Semaphore>,
    campaign_in_flight: usize,
    guardrails: Guardrails,
    /// The local day `cap_sent` and `cap_authorized` count.
    cap_day: i64,
    /// Campaign sends today (admitted, not given back).
    cap_sent: i64,
    /// Extra campaign sends authorized today.
    cap_authorized: i64,
    /// Campaign sends paced at the provider's throughput and the cadence, adapted by the
    /// provider's answers (issue 25).
    pacer: Pacer,
    /// When the provider sent the quality reading the number holds, ms (issue 46).
    quality_event_at: Option<i64>,
    /// No campaign work until then (ms): the provider rate-limited the number.
    backoff_until: i64,
    /// Whether business-initiated sends are refused now (RED, ban, payment, credential,
    /// disconnected); read by send tasks right before the provider call, so a RED event stops
    /// even sends admitted before it.
    blocked: Arc<std::sync::atomic::AtomicBool>,
    shared: Arc<Shared>,
}

/// How long a payment problem (131042) locks business-initiated sends when nobody checks
/// (decision D-021); `POST /bms/{id}/payment-check` releases it at once.
pub const PAYMENT_LOCK_MS: i64 = engine::HOUR_MS;

fn waba_standing(s: &str) -> WabaStanding {
    match s {
        "banned" => WabaStanding::Banned,
        "restricted" => WabaStanding::Restricted,
        "violation" => WabaStanding::Violation,
        _ => WabaStanding::Ok,
    }
}

type Loaded = (
    ChannelRecord,
    ChannelSecrets,
    RollingUnique,
    WabaStanding,
    Option<Arc<std::sync::Mutex<crate::bm::BmCounter>>>,
);

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
async fn load(shared: &Arc<Shared>, channel_id: i64) -> Result<Loaded, ActorError> {
    let store = &shared.store;
    let record = store.channel_unscoped(channel_id).await?;
    let secrets = store.channel_secrets(channel_id).await?;
    let limited = record
        .tier
        .as_deref()
        .and_then(Tier::parse)
        .and_then(|t| t.limit_24h())
        .is_some();
    let recipients = recent_recipients(store, record.id, limited).await?;
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
    Ok((record, secrets, recipients, waba, bm))
}

/// The number's rolling 24 h counter, from its business-initiated sends of the last 24 h:
/// exact when its tier has a limit, else an estimate in fixed memory (`engine::limits`), so an
/// unlimited number does not hold every recipient of its day.
async fn recent_recipients(
    store: &storage::Store,
    channel_id: i64,
    limited: bool,
) -> Result<RollingUnique, ActorError> {
    let mut recipients = if limited {
        RollingUnique::new(DAY_MS)
    } else {
        RollingUnique::estimated(DAY_MS)
    };
    store
        .business_initiated_recipients_since(channel_id, now_ms() - DAY_MS, |phone, at| {
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
) -> Result<Option<crate::group::SharedGroupCounter>, ActorError> {
    let Some(group_id) = record.group_id else {
        return Ok(None);
    };
    let counter = shared.group_counter(group_id).await?;
    let limit = record
        .tier
        .as_deref()
        .and_then(Tier::parse)
        .and_then(|t| t.limit_24h());
    counter
        .lock()
        .expect("group counter lock")
        .member_limits
        .insert(record.id, limit);
    Ok(Some(counter))
}

impl ChannelState {
    /// Joins the group of `counter` (or none), leaving the previous group's counter.
    fn set_group(&mut self, counter: Option<crate::group::SharedGroupCounter>) {
        if let Some(old) = self.group.take() {
            let same = counter.as_ref().is_some_and(|c| Arc::ptr_eq(c, &old));
            if !same {
                old.lock()
                    .expect("group counter lock")
                    .member_limits
                    .remove(&self.record.id);
            }
        }
        self.group = counter;
    }

    fn health_input(&mut self, now: i64) -> HealthInput {
        let bm_available = self
            .bm
            .as_ref()
            .and_then(|b| b.lock().expect("bm counter lock").available(now));
        HealthInput {
            status: self.status,
            quality: self.quality,
            credential_valid: self.credential_valid,
            payment_locked: self.payment_locked_until.is_some_and(|t| t > now),
            waba: self.waba,
            limit_24h: self.tier.as_ref().and_then(Tier::limit_24h),
            sent_24h: self.recipients.count(now),
            external_available: bm_available,
            template_missing: self.template_missing,
            template_quality_red: self.template_quality_red,
            warming_up: guardrail::warmup(&self.guardrails, self.tier_limit(), now).is_some(),
            daily_cap_reached: self.cap(now).reached(self.cap_sent),
            group: self
                .group
                .as_ref()
                .map(|g| g.lock().expect("group counter lock").name.clone())
                .unwrap_or_default(),
        }
    }

    fn tier_limit(&self) -> Option<i64> {
        self.tier.as_ref().and_then(Tier::limit_24h)
    }

    /// Today's campaign cap (starts a new day's count when the local day changed).
    fn cap(&mut self, now: i64) -> CapToday {
        let day = guardrail::local_day(now);
        if day != self.cap_day {
            self.cap_day = day;
            self.cap_sent = 0;
            self.cap_authorized = 0;
        }
        guardrail::cap_today(
            &self.guardrails,
            self.tier_limit(),
            self.cap_authorized,
            now,
        )
    }

    fn guardrail_view(&mut self) -> GuardrailView {
        let now = now_ms();
        let today = self.cap(now);
        GuardrailView {
            settings: self.guardrails.clone(),
            today,
            day: self.cap_day,
            sent_today: self.cap_sent,
            resets_at: guardrail::day_start(self.cap_day + 1),
            backoff_until: (self.backoff_until > now).then_some(self.backoff_until),
        }
    }

    /// Why the number takes no campaign work now: what refuses a business-initiated send
    /// (to `to`, or a new recipient), or its daily cap.
    fn campaign_refusal(&mut self, to: Option<&str>, now: i64) -> Option<HealthCode> {
        self.business_initiated_refusal(to, now).or_else(|| {
            self.cap(now)
                .reached(self.cap_sent)
                .then_some(HealthCode::DailyCapReached)
        })
    }

    /// How many campaign sends the number takes now: its free window, bounded by today's cap,
    /// its 24 h headroom and the sends its cadence fits in the next [`CADENCE_HORIZON_MS`].
    fn campaign_credits(&mut self, now: i64) -> usize {
        let input = self.health_input(now);
        let window = CAMPAIGN_WINDOW.saturating_sub(self.campaign_in_flight);
        let cap = self
            .cap(now)
            .remaining(self.cap_sent)
            .map_or(usize::MAX, |r| r as usize);
        let headroom =
            engine::channel::available(input.limit_24h, input.sent_24h, input.external_available)
                .map_or(usize::MAX, |a| a as usize);
        let cadence = self
            .pacer
            .slots_within(self.guardrails.cadence_ms, now, CADENCE_HORIZON_MS);
        window.min(cap).min(headroom).min(cadence)
    }

    fn snapshot(&mut self) -> ChannelSnapshot {
        let input = self.health_input(now_ms());
        let mut record = (*self.record).clone();
        record.status = self.status.as_str().to_string();
        record.quality = self.quality.as_str().to_string();
        record.tier = self.tier.as_ref().map(|t| t.as_str().to_string());
        record.credential_valid = self.credential_valid;
        record.payment_locked_until = self.payment_locked_until;
        ChannelSnapshot {
            record,
            health: health(&input),
        }
    }
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
    /// Per-channel gauges for Grafana: quality (2 green, 1 yellow, 0 red, -1 unknown), the
    /// 24 h limit (-1 unlimited), sent in 24 h and available now (-1 unlimited).
    fn publish_gauges(&mut self) {
        let id = self.record.id.to_string();
        let input = self.health_input(now_ms());
        self.blocked.store(
            business_initiated_allowed(&input).is_err(),
            std::sync::atomic::Ordering::Relaxed,
        );
        let h = health(&input);
        let q = match self.quality {
            Quality::Green => 2.0,
            Quality::Yellow => 1.0,
            Quality::Red => 0.0,
            Quality::Unknown => -1.0,
        };
        metrics::gauge!("disparo_channel_quality", "channel_id" => id.clone()).set(q);
        metrics::gauge!("disparo_channel_limit_24h", "channel_id" => id.clone())
            .set(h.limit_24h as f64);
        metrics::gauge!("disparo_channel_sent_24h", "channel_id" => id.clone())
            .set(h.sent_24h as f64);
        metrics::gauge!("disparo_channel_available", "channel_id" => id.clone())
            .set(h.available as f64);
        let now = now_ms();
        let cap = self.cap(now);
        metrics::gauge!("disparo_channel_campaign_cap", "channel_id" => id.clone())
            .set(cap.cap.map_or(-1.0, |c| c as f64));
        metrics::gauge!("disparo_channel_campaign_sent_today", "channel_id" => id.clone())
            .set(self.cap_sent as f64);
        metrics::gauge!("disparo_channel_warmup_day", "channel_id" => id.clone())
            .set(f64::from(cap.warmup_day.unwrap_or(0)));
        metrics::gauge!("disparo_channel_backoff", "channel_id" => id.clone())
            .set(if self.backoff_until > now { 1.0 } else { 0.0 });
        metrics::gauge!("disparo_channel_waba_standing", "channel_id" => id).set(match self.waba {
            WabaStanding::Ok => 0.0,
            WabaStanding::Restricted => 1.0,
            WabaStanding::Banned => 2.0,
            WabaStanding::Violation => 3.0,
        });
    }

    /// Makes the 24 h counter exact when the tier has a limit (rebuilt from storage) and an
    /// estimate when it has none (after a tier change).
    async fn fit_counter(&mut self) {
        let limited = self.tier.as_ref().and_then(Tier::limit_24h).is_some();
        if limited == self.recipients.is_exact() {
            return;
        }
        if !limited {
            self.recipients.forget_members();
            return;
        }
        match recent_recipients(&self.shared.store, self.record.id, true).await {
            Ok(r) => self.recipients = r,
            Err(e) => tracing::error!(error = %e, "could not rebuild the 24 h counter"),
        }
    }

    /// Why a business-initiated send to `to` (or, with `None`, to a new recipient) is refused
    /// now: a blocking health code, or `limite_24h_esgotado` when the number's own 24 h limit or
    /// its BM's is used up and the recipient is not already counted (PROVIDER.md §10.2).
    fn business_initiated_refusal(&mut self, to: Option<&str>, now: i64) -> Option<HealthCode> {
        let input = self.health_input(now);
        if let Err(code) = business_initiated_allowed(&input) {
            return Some(code);
        }
        let counted = |r: &RollingUnique| to.is_some_and(|t| r.contains(t, now));
        let own_full =
            input.limit_24h.is_some_and(|l| input.sent_24h >= l) && !counted(&self.recipients);
        let bm_full = self.bm.as_ref().is_some_and(|b| {
            let mut b = b.lock().expect("bm counter lock");
            !counted(&b.recipients) && b.available(now) == Some(0)
        });
        (own_full || bm_full).then_some(HealthCode::LimitExhausted)
    }

    /// Admits a business-initiated send to `to` and counts it in the number's, its group's and
    /// its BM's 24 h counters. Each shared counter's lock is held from its check to its record
    /// (group before BM, always), so two numbers of one BM or group can never both take its
    /// last slot: admission is serial per limit (issue 15). `group_limited`: the group's limit
    /// applies (group sends and group campaigns); `campaign`: today's cap applies too.
    ///
    /// Errors: the health code that refuses it (`qualidade_red`…, `limite_24h_esgotado`,
    /// `limite_diario_atingido`); nothing is counted then.
    fn admit_business_initiated(
        &mut self,
        to: &str,
        now: i64,
        group_limited: bool,
        campaign: bool,
    ) -> Result<(), HealthCode> {
        let input = self.health_input(now);
        business_initiated_allowed(&input)?;
        if campaign && self.cap(now).reached(self.cap_sent) {
            return Err(HealthCode::DailyCapReached);
        }
        if input.limit_24h.is_some_and(|l| input.sent_24h >= l)
            && !self.recipients.contains(to, now)
        {
            return Err(HealthCode::LimitExhausted);
        }
        let mut group = self
            .group
            .as_ref()
            .map(|g| g.lock().expect("group counter lock"));
        if let Some(g) = group.as_mut().filter(|_| group_limited) {
            if !g.recipients.contains(to, now) && g.available(now) == Some(0) {
                return Err(HealthCode::LimitExhausted);
            }
        }
        let mut bm = self.bm.as_ref().map(|b| b.lock().expect("bm counter lock"));
        if let Some(b) = bm.as_mut() {
            if !b.recipients.contains(to, now) && b.available(now) == Some(0) {
                return Err(HealthCode::LimitExhausted);
            }
        }
        if let Some(g) = group.as_mut() {
            g.recipients.record(to, now);
        }
        if let Some(b) = bm.as_mut() {
            b.recipients.record(to, now);
        }
        drop((group, bm));
        self.recipients.record(to, now);
        Ok(())
    }

    /// Records whether the provider accepts the channel's access token, in memory and in
    /// storage, when it changes (a refused token stops business-initiated sends: health
    /// code `credencial_invalida`).
    async fn set_credential_valid(&mut self, valid: bool) {
        if valid == self.credential_valid {
            return;
        }
        self.credential_valid = valid;
        if let Err(e) = self
            .shared
            .store
            .set_channel_credential_valid(self.record.id, valid)
            .await
        {
            tracing::error!(error = %e, "could not store the credential state");
        }
        if !valid {
            tracing::warn!("the provider refused the channel's access token");
        }
    }

    /// `session.status` when the connection status changes.
    async fn set_status(&mut self, status: ChannelStatus) {
        if status == self.status {
            return;
        }
        let previous = std::mem::replace(&mut self.status, status);
        let event = crate::events::session_status(&self.record, status, previous, now_ms());
        self.shared.emit(&[event]).await;
        tracing::info!(
            status = status.as_str(),
            previous = previous.as_str(),
            "channel status changed"
        );
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
        let (record, secrets, recipients, waba, bm) = load(&args.shared, args.channel_id)
            .await
            .map_err(|e| ActorProcessingErr::from(e.to_string()))?;
        let (guardrails, cap_day, cap_sent, cap_authorized) =
            load_guardrails(&args.shared, args.channel_id, now_ms())
                .await
                .map_err(|e| ActorProcessingErr::from(e.to_string()))?;
        let group = load_group(&args.shared, &record)
            .await
            .map_err(|e| ActorProcessingErr::from(e.to_string()))?;
        let (template_missing, template_quality_red) = args
            .shared
            .store
            .numbers_missing_templates(record.account_id, Some(record.id))
            .await
            .map_err(|e| ActorProcessingErr::from(e.to_string()))?
            .first()
            .map_or((false, false), |(_, missing, red)| (*missing, *red));
        register(&args.shared, &record, &secrets, &myself);
        tracing::info!(channel_id = record.id, "channel actor started");
        let record_arc = Arc::new(record.clone());
        let mut st = ChannelState {
            template_missing,
            template_quality_red,
            status: ChannelStatus::parse(&record.status),
            quality: Quality::parse(&record.quality),
            tier: record.tier.as_deref().and_then(Tier::parse),
            credential_valid: record.credential_valid,
            payment_locked_until: record.payment_locked_until,
            waba,
            record: record_arc.clone(),
            secrets,
            recipients,
            bm,
            group,
            in_flight: Arc::new(Semaphore::new(args.shared.config.channel_max_in_flight)),
            campaign_share: Arc::new(Semaphore::new(campaign_share(
                args.shared.config.channel_max_in_flight,
            ))),
            campaign_in_flight: 0,
            guardrails,
            cap_day,
            cap_sent,
            cap_authorized,
            pacer: Pacer::new(
                record
                    .throughput_mps
                    .and_then(|m| u32::try_from(m).ok())
                    .unwrap_or(engine::pacing::DEFAULT_MPS),
            ),
            quality_event_at: record.quality_event_at,
            backoff_until: 0,
            blocked: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            shared: args.shared,
        };
        st.publish_gauges();
        Ok(st)
    }

    async fn handle(
        &self,
        myself: ActorRef<ChannelMsg>,
        msg: ChannelMsg,
        st: &mut ChannelState,
    ) -> Result<(), ActorProcessingErr> {
        let span = tracing::info_span!("channel", channel_id = st.record.id);
        handle_msg(myself, msg, st).instrument(span).await;
        st.publish_gauges();
        Ok(())
    }
}

async fn handle_msg(myself: ActorRef<ChannelMsg>, msg: ChannelMsg, st: &mut ChannelState) {
    match msg {
        ChannelMsg::Send(cmd, reply) => {
            if let Err(e) = admit_and_send(myself, *cmd, reply, st).await {
                tracing::warn!(error = %e, "send not admitted");
            }
        }
        ChannelMsg::Statuses(reports, reply) => {
            // Applied by the number's batched writer, in arrival order, so the actor stays free for
            // sends and credits while the transaction runs.
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
            let record = st.record.clone();
            let base = st.shared.config.public_url.clone();
            let mut stored = 0;
            let mut result = Ok(());
            for item in items {
                let name = item.contact_name.clone();
                match st
                    .shared
                    .store
                    .record_inbound(&item, |m| {
                        vec![events::message_received(&record, m, name.as_deref(), &base)]
                    })
                    .await
                {
                    Ok(Some((_, n))) => {
                        stored += 1;
                        if n > 0 {
                            st.shared.wake_dispatcher();
                        }
                        metrics::counter!("disparo_messages_received_total", "channel_id" => record.id.to_string()).increment(1);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        result = Err(ActorError::from(e));
                        break;
                    }
                }
            }
            let _ = reply.send(result.map(|_| stored));
        }
        ChannelMsg::QualityUpdate { quality, tier, at } => {
            if st.quality_event_at.is_some_and(|held| at < held) {
                metrics::counter!("disparo_quality_updates_out_of_order_total").increment(1);
                tracing::info!(at, "an older quality update arrived late: ignored");
                return;
            }
            st.quality_event_at = Some(at);
            match quality {
                Some(q) => st.quality = q,
                // The current webhook carries no rating: read it at the provider.
                None => {
                    let _ = myself.cast(ChannelMsg::Sync(None));
                }
            }
            if let Some(t) = tier.as_deref().and_then(Tier::parse) {
                if let Some(g) = &st.group {
                    g.lock()
                        .expect("group counter lock")
                        .member_limits
                        .insert(st.record.id, t.limit_24h());
                }
                st.tier = Some(t);
                st.fit_counter().await;
            }
            let tier = st.tier.as_ref().map(|t| t.as_str().to_string());
            match st
                .shared
                .store
                .update_channel_quality(st.record.id, st.quality.as_str(), tier.as_deref(), at)
                .await
            {
                Ok(true) => {}
                // Another process stored a newer reading: read the number at the provider.
                Ok(false) => {
                    let _ = myself.cast(ChannelMsg::Sync(None));
                }
                Err(e) => tracing::error!(error = %e, "could not store a quality update"),
            }
            tracing::info!(quality = st.quality.as_str(), tier = ?tier, "quality update");
        }
        ChannelMsg::Snapshot(reply) => {
            let _ = reply.send(st.snapshot());
        }
        ChannelMsg::Outcome(SendOutcome::Accepted) => {
            st.pacer.on_accepted();
            st.set_credential_valid(true).await;
        }
        ChannelMsg::Outcome(SendOutcome::Throttled(retry_after_ms)) => {
            // The number's throughput was exceeded: one signal per burst (the sends in flight
            // are refused together): the rate halves and campaign work pauses for the
            // provider's Retry-After, else 1 s; accepted sends raise it back (issue 25).
            let now = now_ms();
            if let Some(until) = st.pacer.on_throttled(now, retry_after_ms) {
                st.backoff_until = until;
                metrics::counter!("disparo_channel_backoffs_total", "channel_id" => st.record.id.to_string()).increment(1);
                tracing::warn!(
                    pause_ms = until - now,
                    rate = st.pacer.rate(),
                    "the provider rate-limited the number; pacing slower"
                );
            }
        }
        ChannelMsg::TemplateFlags {
            missing,
            quality_red,
        } => {
            st.template_missing = missing;
            st.template_quality_red = quality_red;
        }
        // A violation is news only for a WABA in good standing: it never hides a ban or a
        // restriction (D-074).
        ChannelMsg::WabaStanding(WabaStanding::Violation)
            if matches!(st.waba, WabaStanding::Banned | WabaStanding::Restricted) => {}
        ChannelMsg::WabaStanding(standing) => {
            tracing::warn!(?standing, "WABA standing changed");
            st.waba = standing;
        }
        ChannelMsg::Sync(reply) => {
            let (graph, token, pnid, me) = (
                st.shared.graph.clone(),
                st.secrets.access_token.clone(),
                st.record.phone_number_id.clone(),
                myself.clone(),
            );
            tokio::spawn(async move {
                let res = graph.phone_number(token.expose(), &pnid).await;
                let _ = me.cast(ChannelMsg::SyncDone(Box::new(res), reply));
            });
        }
        ChannelMsg::SyncDone(res, reply) => {
            let out = apply_sync(st, *res).await;
            if let Some(reply) = reply {
                let _ = reply.send(out);
            }
        }
        ChannelMsg::CampaignCredits(reply) => {
            let now = now_ms();
            let answer = match st.campaign_refusal(None, now) {
                Some(code) => (0, Some(code)),
                // Backing off after a rate limit: busy, not blocked.
                None if st.backoff_until > now => (0, None),
                None => (st.campaign_credits(now), None),
            };
            let _ = reply.send(answer);
        }
        ChannelMsg::Dispatch(batch) => dispatch(myself, *batch, st).await,
        ChannelMsg::CampaignSettled { sent } => {
            st.campaign_in_flight = st.campaign_in_flight.saturating_sub(1);
            if !sent {
                st.cap_sent = (st.cap_sent - 1).max(0);
            }
        }
        ChannelMsg::Guardrails(reply) => {
            let _ = reply.send(st.guardrail_view());
        }
        ChannelMsg::SetGuardrails(g, reply) => {
            tracing::info!(?g, "guardrails changed");
            st.guardrails = g;
            let _ = reply.send(st.guardrail_view());
        }
        ChannelMsg::Authorized(total, reply) => {
            let now = now_ms();
            st.cap(now);
            st.cap_authorized = total;
            tracing::info!(authorized = total, "more campaign sends authorized today");
            let _ = reply.send(st.guardrail_view());
        }
        ChannelMsg::PaymentReleased => {
            st.payment_locked_until = None;
            tracing::info!("payment lock released");
        }
        ChannelMsg::Reload(reply) => {
            let out = match load(&st.shared, st.record.id).await {
                Ok((record, secrets, recipients, waba, bm)) => {
                    match load_group(&st.shared, &record).await {
                        Ok(group) => st.set_group(group),
                        Err(e) => tracing::error!(error = %e, "could not load the number's group"),
                    }
                    register(&st.shared, &record, &secrets, &myself);
                    st.quality = Quality::parse(&record.quality);
                    st.tier = record.tier.as_deref().and_then(Tier::parse);
                    st.credential_valid = record.credential_valid;
                    st.payment_locked_until = record.payment_locked_until;
                    st.waba = waba;
                    st.recipients = recipients;
                    st.bm = bm;
                    st.secrets = secrets;
                    let status = ChannelStatus::parse(&record.status);
                    st.record = Arc::new(record);
                    st.set_status(status).await;
                    Ok(st.snapshot())
                }
                Err(e) => Err(e),
            };
            let _ = reply.send(out);
        }
        ChannelMsg::Outcome(SendOutcome::Refused(ErrorKind::Payment)) => {
            let until = now_ms() + PAYMENT_LOCK_MS;
            st.payment_locked_until = Some(until);
            if let Err(e) = st
                .shared
                .store
                .set_channel_payment_lock(st.record.id, Some(until))
                .await
            {
                tracing::error!(error = %e, "could not store a payment lock");
            }
            tracing::warn!(
                "the provider reported a payment problem; business-initiated sends locked"
            );
        }
        ChannelMsg::Outcome(SendOutcome::Refused(kind)) => {
            if kind == ErrorKind::InvalidCredential {
                st.set_credential_valid(false).await;
            }
        }
    }
}

/// Checks the rules, stores the message `queued` and spawns the provider call. Errors here
/// are answered through `reply`; the returned error is only for the log.
async fn admit_and_send(
    myself: ActorRef<ChannelMsg>,
    cmd: SendCommand,
    reply: RpcReplyPort<Result<MessageRecord, ActorError>>,
    st: &mut ChannelState,
) -> Result<(), ActorError> {
    let now = now_ms();
    let refuse = |reply: RpcReplyPort<Result<MessageRecord, ActorError>>, e: ActorError| {
        let text = e.to_string();
        let _ = reply.send(Err(e));
        Err(ActorError::Conflict(text))
    };
    if cmd.deadline.is_some_and(|d| std::time::Instant::now() >= d) {
        // The caller has given up: nothing is written or sent.
        return refuse(reply, ActorError::Unavailable);
    }
    let to = cmd.to.as_str().to_string();
    match &cmd.content {
        SendContent::Media { .. } | SendContent::Library { .. } => {
            return refuse(
                reply,
                ActorError::Validation(engine::ValidationError::new(
                    "not_prepared",
                    "content",
                    "O conteúdo deve ser preparado antes do envio.",
                )),
            );
        }
        SendContent::Text { .. } | SendContent::MediaFile { .. } => {
            let last = match st.shared.store.last_inbound_at(st.record.id, &to).await {
                Ok(t) => t,
                Err(e) => return refuse(reply, e.into()),
            };
            if !window_open(last, now) {
                return refuse(reply, ActorError::WindowClosed);
            }
        }
        SendContent::Template { .. } => {
            if let Err(code) = st.admit_business_initiated(&to, now, cmd.group_limited, false) {
                return refuse(reply, ActorError::BusinessInitiatedRefused(code));
            }
        }
    }

    let new = match &cmd.content {
        SendContent::Text { body } => NewOutbound {
            account_id: st.record.account_id,
            channel_id: st.record.id,
            contact_phone: to.clone(),
            kind: MessageKind::Text,
            body: Some(body.clone()),
            template_name: None,
            template_language: None,
            params: None,
            preview_text: None,
            media: None,
            source: "api",
        },
        SendContent::Template {
            name,
            language,
            given,
            layout: _,
            header_text,
        } => NewOutbound {
            account_id: st.record.account_id,
            channel_id: st.record.id,
            contact_phone: to.clone(),
            kind: MessageKind::Template,
            body: None,
            template_name: Some(name.clone()),
            template_language: Some(language.clone()),
            params: Some({
                let mut p = serde_json::json!({"body": given.body, "button": given.url_suffix});
                if let Some(m) = &given.header_media {
                    match (&m.link, m.kind) {
                        (Some(url), engine::template::HeaderMedia::Image) => {
                            p["header_image"] = serde_json::json!(url);
                        }
                        _ => {
                            p["header_media"] = serde_json::json!({"type": m.kind.as_str(), "link": m.link, "id": m.id});
                        }
                    }
                }
                if let Some(text) = header_text {
                    p["header_text"] = serde_json::json!(text);
                }
                p
            }),
            preview_text: cmd.preview_text.clone(),
            media: None,
            source: "api",
        },
        SendContent::MediaFile { file, caption } => NewOutbound {
            account_id: st.record.account_id,
            channel_id: st.record.id,
            contact_phone: to.clone(),
            kind: MessageKind::parse(file.kind.as_str()),
            body: caption.clone(),
            template_name: None,
            template_language: None,
            params: None,
            preview_text: cmd.preview_text.clone(),
            media: Some(
                serde_json::json!({"url": file.url, "mime_type": file.mime, "size": file.bytes.len(), "filename": file.filename}),
            ),
            source: "api",
        },
        SendContent::Media { .. } | SendContent::Library { .. } => unreachable!("refused above"),
    };
    // A 1:1 send goes ahead of the campaign's slots on the number (D-076).
    st.pacer.yield_to_priority(now);
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
        SendContent::MediaFile { file, caption } => Prepared::Upload {
            file,
            caption,
            to: to.clone(),
        },
        SendContent::Media { .. } | SendContent::Library { .. } => unreachable!("refused above"),
    };

    let task = SendTask {
        shared: st.shared.clone(),
        record: st.record.clone(),
        token: st.secrets.access_token.clone(),
        in_flight: st.in_flight.clone(),
        myself,
    };
    tokio::spawn(
        task.run(new, cmd.idempotency_key, prepared, cmd.deadline, reply)
            .in_current_span(),
    );
    Ok(())
}

/// A provider call made outside the actor's handler.
struct SendTask {
    shared: Arc<Shared>,
    record: Arc<ChannelRecord>,
    token: Secret,
    in_flight: Arc<Semaphore>,
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
        deadline: Option<std::time::Instant>,
        reply: RpcReplyPort<Result<MessageRecord, ActorError>>,
    ) {
        let asked = std::time::Instant::now();
        let Ok(_permit) = self.in_flight.clone().acquire_owned().await else {
            let _ = reply.send(Err(ActorError::Unavailable));
            return;
        };
        api_send_phase("window", asked.elapsed());
        let store = &self.shared.store;
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            // The caller gave up while the send waited for the window: nothing is written or
            // sent now, when nobody expects it (a retry would send it a second time).
            tracing::warn!("caller gave up before the provider call; send dropped");
            let _ = reply.send(Err(ActorError::Unavailable));
            return;
        }
        // Written `sending` right before the call: the row exists before the provider can
        // report a status for it, and a crash in between leaves it in doubt, as it should.
        let writing = std::time::Instant::now();
        let written = store
            .insert_outbound(
                &new,
                engine::message::MessageStatus::Sending,
                idempotency_key.as_deref(),
            )
            .await;
        api_send_phase("write", writing.elapsed());
        let queued = match written {
            Ok(m) => m,
            Err(e) => {
                let _ = reply.send(Err(e.into()));
                return;
            }
        };
        let callback = format!("{CALLBACK_PREFIX}{}", queued.id);
        let channel_label = self.record.id.to_string();
        let graph = &self.shared.graph;
        let calling = std::time::Instant::now();
        let res = match prepared {
            Prepared::Ready(request) => {
                let request = request.with_callback_data(callback);
                graph
                    .send_message(self.token.expose(), &self.record.phone_number_id, &request)
                    .await
            }
            Prepared::Upload { file, caption, to } => {
                match graph
                    .upload_media(
                        self.token.expose(),
                        &self.record.phone_number_id,
                        file.bytes.to_vec(),
                        &file.mime,
                        &file.filename,
                    )
                    .await
                {
                    Ok(media_id) => {
                        let object = provider::wire::MediaObject {
                            id: Some(media_id),
                            link: None,
                            caption: caption.filter(|_| file.kind.takes_caption()),
                            filename: (file.kind == engine::media::MediaKind::Document)
                                .then(|| file.filename.clone()),
                        };
                        let request = SendMessageRequest::media(&to, file.kind.as_str(), object)
                            .expect("the four media kinds have payload objects")
                            .with_callback_data(callback);
                        graph
                            .send_message(
                                self.token.expose(),
                                &self.record.phone_number_id,
                                &request,
                            )
                            .await
                    }
                    Err(e) => Err(e),
                }
            }
        };
        api_send_phase("call", calling.elapsed());
        match res {
            Ok(resp) => {
                let Some(wamid) = resp.message_id().map(str::to_string) else {
                    let _ = reply.send(Err(ActorError::ProviderRefused {
                        kind: ErrorKind::Other,
                        code: None,
                        reason: "o provedor aceitou o envio sem devolver o id da mensagem".into(),
                    }));
                    return;
                };
                metrics::counter!("disparo_messages_sent_total", "channel_id" => channel_label)
                    .increment(1);
                let record = self.record.clone();
                let base = self.shared.config.public_url.clone();
                let answering = std::time::Instant::now();
                let result = store
                    .mark_message_sent(
                        &queued,
                        &wamid,
                        Box::new(move |m| vec![events::message_sent(&record, m, now_ms(), &base)]),
                    )
                    .await;
                api_send_phase("answer", answering.elapsed());
                let _ = self.myself.cast(ChannelMsg::Outcome(SendOutcome::Accepted));
                match result {
                    Ok((rec, n)) => {
                        if n > 0 {
                            self.shared.wake_dispatcher();
                        }
                        let _ = reply.send(Ok(rec));
                    }
                    Err(e) => {
                        // Accepted by the provider but not recorded: the status webhook, which
                        // carries our id in biz_opaque_callback_data, will settle the row.
                        tracing::error!(message_id = queued.id, error = %e, "could not record an accepted send");
                        let _ = reply.send(Err(ActorError::SendInDoubt(queued.id)));
                    }
                }
            }
            Err(e) => {
                let kind = e.kind();
                metrics::counter!("disparo_messages_failed_total", "channel_id" => channel_label, "kind" => format!("{kind:?}")).increment(1);
                let _ = self.myself.cast(ChannelMsg::Outcome(refused(&e)));
                if matches!(e, provider::ProviderError::Timeout) {
                    // In doubt: the provider may have accepted it. The row stays `sending`
                    // until a status webhook (carrying our id) settles it.
                    tracing::warn!(
                        message_id = queued.id,
                        "provider timed out; message left in doubt"
                    );
                    let _ = reply.send(Err(ActorError::SendInDoubt(queued.id)));
                    return;
                } else {
                    let title = e.reason();
                    let code = e.code();
                    if let Err(se) = store
                        .mark_message_failed(queued.id, code, &title, None, now_ms())
                        .await
                    {
                        tracing::error!(message_id = queued.id, error = %se, "could not record a refused send");
                    }
                }
                let _ = reply.send(Err(e.into()));
            }
        }
    }
}

/// Applies a provider read of the number: status, quality, tier, name; a refused credential
/// marks the channel `credencial_invalida`.
async fn apply_sync(
    st: &mut ChannelState,
    res: Result<provider::wire::PhoneNumber, provider::ProviderError>,
) -> Result<ChannelSnapshot, ActorError> {
    match res {
        Ok(pn) => {
            let status = match pn.status.as_deref() {
                None | Some("CONNECTED") => ChannelStatus::Working,
                Some("PENDING") | Some("UNVERIFIED") => ChannelStatus::Pending,
                Some(_) => ChannelStatus::Disconnected,
            };
            if pn.status.as_deref() == Some("BANNED") {
                st.waba = WabaStanding::Banned;
            }
            if let Some(q) = pn.quality_rating.as_deref() {
                st.quality = Quality::parse(q);
            }
            if let Some(t) = pn.tier().and_then(Tier::parse) {
                st.tier = Some(t);
                st.fit_counter().await;
            }
            st.credential_valid = true;
            let mps = pn.throughput_mps();
            if mps != st.pacer.ceiling() {
                tracing::info!(throughput_mps = mps, "the number's throughput changed");
                st.pacer.set_ceiling(mps);
                st.shared
                    .store
                    .set_channel_throughput(st.record.id, i64::from(mps))
                    .await?;
            }
            let tier = st.tier.as_ref().map(|t| t.as_str().to_string());
            st.shared
                .store
                .record_channel_sync(
                    st.record.id,
                    status.as_str(),
                    st.quality.as_str(),
                    tier.as_deref(),
                    pn.verified_name.as_deref(),
                )
                .await?;
            st.set_status(status).await;
            Ok(st.snapshot())
        }
        Err(e) => {
            if e.kind() == ErrorKind::InvalidCredential {
                st.set_credential_valid(false).await;
            }
            Err(e.into())
        }
    }
}

/// Admits each claimed recipient by the channel's rules at this moment (a RED event processed
/// before this batch stops it, as do the 24 h limit and today's cap), books it a cadence slot
/// and spawns its send; a refused one goes back to `planned`.
async fn dispatch(myself: ActorRef<ChannelMsg>, batch: Dispatch, st: &mut ChannelState) {
    let now = now_ms();
    for item in batch.items {
        if st
            .admit_business_initiated(&item.phone, now, batch.group_limited, true)
            .is_err()
        {
            settle(
                &st.shared,
                &st.record,
                item.recipient_id,
                item.message_id,
                SendResult::Replan,
            )
            .await;
            continue;
        }
        st.cap_sent += 1;
        st.campaign_in_flight += 1;
        let send_at = st.pacer.take(st.guardrails.cadence_ms, now);
        let payload = TemplatePayload::filled(
            &batch.template_name,
            &batch.language,
            &batch.layout.fill(&item.given),
        );
        let request = SendMessageRequest::template(&item.phone, payload)
            .with_callback_data(format!("{CALLBACK_PREFIX}{}", item.message_id));
        let task = CampaignSend {
            shared: st.shared.clone(),
            record: st.record.clone(),
            token: st.secrets.access_token.clone(),
            in_flight: st.in_flight.clone(),
            campaign_share: st.campaign_share.clone(),
            blocked: st.blocked.clone(),
            myself: myself.clone(),
            gate: batch.gate.clone(),
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
    myself: ActorRef<ChannelMsg>,
    gate: crate::campaign::CampaignGate,
}

impl CampaignSend {
    fn blocked(&self) -> bool {
        self.blocked.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits for its cadence slot and a place in the in-flight window, makes the call (again
    /// after a transient error, up to [`TRANSIENT_ATTEMPTS`] in all) and records the outcome by
    /// the error's kind (decision D-032).
    async fn run(
        self,
        recipient_id: i64,
        message_id: i64,
        request: SendMessageRequest,
        send_at: i64,
    ) {
        let admitted = std::time::Instant::now();
        let wait = send_at - now_ms();
        if wait > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(wait as u64)).await;
        }
        let result = self.attempt(&request, admitted).await;
        // Counts against today's cap when the provider took it or may have (as rebuilt from
        // storage at start: refusals without a provider id do not count).
        let sent = matches!(result, SendResult::Sent { .. } | SendResult::InDoubt);
        let handed = std::time::Instant::now();
        settle(&self.shared, &self.record, recipient_id, message_id, result).await;
        // Waiting for room in the writer's queue (s): above zero, the writer is the bound.
        send_phase("handoff", handed.elapsed());
        let _ = self.myself.cast(ChannelMsg::CampaignSettled { sent });
    }

    async fn attempt(
        &self,
        request: &SendMessageRequest,
        admitted: std::time::Instant,
    ) -> SendResult {
        let Ok(_share) = self.campaign_share.clone().acquire_owned().await else {
            return SendResult::Replan;
        };
        let Ok(_permit) = self.in_flight.clone().acquire_owned().await else {
            return SendResult::Replan;
        };
        // Time from admission to a place in the in-flight window (cadence included), then the
        // provider call: where a campaign send's time goes (s).
        send_phase("wait", admitted.elapsed());
        // Held for the whole call: a halt waits for it, and no call starts after the halt.
        let open = self.gate.clone().read_owned().await;
        if !*open {
            return SendResult::Replan;
        }
        let channel_label = self.record.id.to_string();
        let mut attempt = 0;
        loop {
            attempt += 1;
            // The channel turned RED (or was blocked) since this send was admitted: not sent.
            if self.blocked() {
                return SendResult::Replan;
            }
            let called = std::time::Instant::now();
            let res = self
                .shared
                .graph
                .send_message(self.token.expose(), &self.record.phone_number_id, request)
                .await;
            send_phase("call", called.elapsed());
            let e = match res {
                Ok(resp) => {
                    let _ = self.myself.cast(ChannelMsg::Outcome(SendOutcome::Accepted));
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
            return match kind {
                // No answer: the provider may have taken it. A status webhook (carrying our id)
                // settles it, or the grace period sends it again (D-032).
                _ if matches!(e, provider::ProviderError::Timeout) => SendResult::InDoubt,
                ErrorKind::Transient if attempt < TRANSIENT_ATTEMPTS => {
                    if let provider::NextStep::RetryAfter(ms) = kind.next_step(attempt) {
                        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                    }
                    continue;
                }
                // Throttled (the number backs off) or stopped by the number's state (credential,
                // payment, account): back to the campaign, another number or a later tick
                // takes it.
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
                // Re-engagement, the per-user marketing limit, template problems, transient
                // errors past their attempts…: failed with the provider's error, no retry
                // (a resend can try again).
                _ => SendResult::Failed {
                    code: e.code(),
                    reason: e.reason(),
                    skip: false,
                },
            };
        }
    }
}

/// Adds the time (µs) of a campaign send's phase (`wait` for the in-flight window, the
/// provider `call`, `handoff` to the writer) to `disparo_campaign_send_phase_microseconds_total`
/// and counts it in `disparo_campaign_send_phases_total`, both labelled `phase`: their ratio
/// is the mean. Counters, not a histogram: the exporter keeps every histogram sample until its
/// upkeep, and three per send were the largest part of its memory under a campaign.
/// Where a 1:1 send's time goes, by phase: `window` (a place in the number's in-flight
/// window), `write` (its row stored), `call` (the provider), `answer` (the answer stored):
/// `disparo_api_send_phase_microseconds_total{phase}` over `disparo_api_send_phases_total`
/// (counters, as for campaign sends: four histogram samples per send would cost the exporter
/// memory).
fn api_send_phase(phase: &'static str, elapsed: std::time::Duration) {
    let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
    metrics::counter!("disparo_api_send_phase_microseconds_total", "phase" => phase)
        .increment(micros);
    metrics::counter!("disparo_api_send_phases_total", "phase" => phase).increment(1);
}

fn send_phase(phase: &'static str, elapsed: std::time::Duration) {
    let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
    metrics::counter!("disparo_campaign_send_phase_microseconds_total", "phase" => phase)
        .increment(micros);
    metrics::counter!("disparo_campaign_send_phases_total", "phase" => phase).increment(1);
}
