//! A connected number's live rules as one pure aggregate ([`Channel`]): what it holds
//! (quality, tier, status, standing, the rolling 24 h counter, today's campaign cap, pacing),
//! how the provider's events and answers change it ([`Channel::apply`] → [`Effect`]s its actor
//! interprets) and what it admits (1:1 sends, campaign sends, campaign credits).
//!
//! No I/O and no clock: every call takes `now` (ms since the epoch). The limits a number
//! shares with others (its BM's, its group's) come in through [`Limits`], which the actor
//! builds from the shared counters it holds locked for the call, so admission is serial per
//! limit (issue 15, issue 51).

use super::{
    available, business_initiated_allowed, health, ChannelStatus, Health, HealthCode, HealthInput,
    Quality, Tier, WabaStanding,
};
use crate::guardrail::{self, CapToday, Guardrails};
use crate::limits::{Quota, QuotaScope, RollingUnique, SharedLimit};
use crate::message::window_open;
use crate::pacing::Pacer;

/// Campaign sends a channel keeps in flight at most (its share of the in-flight window): 256
/// (D-032; measured with `cargo bench --bench campaign_load`).
pub const CAMPAIGN_WINDOW: usize = 256;

/// How far ahead a channel books cadence slots when it grants credits (ms): a campaign tick
/// hands it at most what its cadence lets it send in this time.
pub const CADENCE_HORIZON_MS: i64 = 250;

/// How long a payment problem (131042) locks business-initiated sends when nobody checks
/// (decision D-021); `POST /bms/{id}/payment-check` releases it at once.
pub const PAYMENT_LOCK_MS: i64 = crate::HOUR_MS;

/// The shared 24 h limits of one number for one call: its sending group's and its BM's, each
/// borrowed from under its lock (group before BM, always). The port through which the
/// aggregate reads and counts what it shares.
#[derive(Debug, Default)]
pub struct Limits<'a> {
    /// The number's sending group (D-037), if any.
    pub group: Option<&'a mut SharedLimit>,
    /// The number's business portfolio, if known.
    pub bm: Option<&'a mut SharedLimit>,
}

impl Limits<'_> {
    /// No shared limit (a number without BM or group, or a test).
    pub fn none() -> Limits<'static> {
        Limits {
            group: None,
            bm: None,
        }
    }

    fn bm_available(&mut self, now: i64) -> Option<i64> {
        self.bm.as_mut().and_then(|b| b.available(now))
    }

    fn group_name(&self) -> String {
        self.group
            .as_ref()
            .map(|g| g.name.clone())
            .unwrap_or_default()
    }

    /// Checks `to` against the group (when `group_limited`) and the BM and, when it fits both,
    /// counts it in each (the group counts every member's sends, limited or not).
    fn admit(&mut self, to: &str, now: i64, group_limited: bool) -> Result<(), HealthCode> {
        if let Some(g) = self.group.as_mut().filter(|_| group_limited) {
            if !g.fits(Some(to), now) {
                return Err(HealthCode::LimitExhausted);
            }
        }
        if let Some(b) = self.bm.as_mut() {
            if !b.fits(Some(to), now) {
                return Err(HealthCode::LimitExhausted);
            }
        }
        if let Some(g) = self.group.as_mut() {
            g.recipients.record(to, now);
        }
        if let Some(b) = self.bm.as_mut() {
            b.recipients.record(to, now);
        }
        Ok(())
    }
}

/// What a number's actor loads from storage to build its [`Channel`] (and again on a reload:
/// see [`Input::Reloaded`]).
#[derive(Debug, Clone)]
pub struct Stored {
    /// Connection status.
    pub status: ChannelStatus,
    /// Quality rating.
    pub quality: Quality,
    /// Messaging tier, when known.
    pub tier: Option<Tier>,
    /// Whether the provider accepts the stored access token.
    pub credential_valid: bool,
    /// Until when a payment problem locks business-initiated sends (ms).
    pub payment_locked_until: Option<i64>,
    /// The WABA's standing.
    pub waba: WabaStanding,
    /// Business-initiated recipients of the last 24 h (exact when the tier has a limit).
    pub recipients: RollingUnique,
}

/// Everything a [`Channel`] starts from.
#[derive(Debug, Clone)]
pub struct ChannelInit {
    /// The channel's id.
    pub id: i64,
    /// The stored state.
    pub stored: Stored,
    /// The guardrail settings.
    pub guardrails: Guardrails,
    /// The local day the counts below are of (see [`guardrail::local_day`]).
    pub cap_day: i64,
    /// Campaign sends that day.
    pub cap_sent: i64,
    /// Extra campaign sends authorized that day.
    pub cap_authorized: i64,
    /// The provider's throughput for the number, messages/s.
    pub throughput_mps: u32,
    /// When the provider sent the quality reading the number holds (ms; issue 46).
    pub quality_event_at: Option<i64>,
    /// A library template is missing on the number.
    pub template_missing: bool,
    /// A template approved on the number has RED quality.
    pub template_quality_red: bool,
}

/// What the provider answered to one of the number's sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Accepted.
    Accepted,
    /// Refused for the number's throughput (130429), with `Retry-After` in ms when given.
    Throttled {
        /// The provider's `Retry-After`, ms.
        retry_after_ms: Option<u64>,
    },
    /// A payment problem (131042): business-initiated sends lock for [`PAYMENT_LOCK_MS`].
    PaymentProblem,
    /// The access token was refused.
    CredentialRefused,
    /// The provider failed or did not answer (HTTP 5xx, Graph transient codes, a timeout):
    /// campaign work backs off, longer after each failure in a row, and resumes with one
    /// send at a time until one is accepted (issue 53, D-125).
    Unavailable,
    /// Any other refusal (the number's state does not change).
    Refused,
}

/// The first back-off after the provider failed, ms; it doubles with each failure in a row.
pub const UNAVAILABLE_BACKOFF_MS: i64 = 1_000;

/// The longest back-off after the provider failed, ms.
pub const UNAVAILABLE_BACKOFF_MAX_MS: i64 = 60_000;

/// The back-off after `failures` provider failures in a row (≥ 1), ms: 1 s, 2 s, 4 s … 60 s.
pub fn unavailable_backoff_ms(failures: u32) -> i64 {
    let doublings = failures.saturating_sub(1).min(16);
    (UNAVAILABLE_BACKOFF_MS << doublings).min(UNAVAILABLE_BACKOFF_MAX_MS)
}

/// What the provider said when the number was read (`GET /{phone-number-id}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderRead {
    /// Connection status (`CONNECTED` → working, `PENDING`/`UNVERIFIED` → pending, else
    /// disconnected).
    pub status: ChannelStatus,
    /// The number is `BANNED`: the WABA reads as banned.
    pub banned: bool,
    /// Quality rating, when given.
    pub quality: Option<Quality>,
    /// Tier, when given.
    pub tier: Option<Tier>,
    /// Throughput, messages/s.
    pub throughput_mps: u32,
    /// The number's verified display name, when given.
    pub name: Option<String>,
}

/// What changes a number's state.
#[derive(Debug, Clone)]
pub enum Input {
    /// `phone_number_quality_update` (PROVIDER.md §9.4), sent by the provider at `at` (ms).
    QualityEvent {
        /// New quality, when the event carried one (the current webhook does not: read it).
        quality: Option<Quality>,
        /// New tier, when the event carried one.
        tier: Option<Tier>,
        /// When the provider sent it, ms.
        at: i64,
    },
    /// `account_update`: the WABA's standing (PROVIDER.md §9.7).
    WabaStanding(WabaStanding),
    /// The number's template flags (issue 17, D-074).
    TemplateFlags {
        /// A library template is missing on the number.
        missing: bool,
        /// A template approved on it has RED quality.
        quality_red: bool,
    },
    /// The provider's answer to a send.
    Answer(Answer),
    /// A read of the number at the provider.
    Read(ProviderRead),
    /// The stored state was read again (after an update elsewhere).
    Reloaded(Box<Stored>),
    /// New guardrail settings (already stored).
    Guardrails(Guardrails),
    /// The day's total of extra authorized campaign sends (already stored).
    Authorized(i64),
    /// The BM's payment works again.
    PaymentReleased,
    /// A campaign send finished; `sent: false` when the provider did not take it (it does not
    /// count against today's cap).
    CampaignSettled {
        /// Whether the provider took (or may have taken) it.
        sent: bool,
    },
}

/// What the actor must do after [`Channel::apply`], in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Read the number at the provider (its answer comes back as [`Input::Read`]).
    ReadAtProvider,
    /// Store the quality reading (`at`: the event's time; a newer stored one wins, then read
    /// at the provider).
    StoreQuality {
        /// Quality.
        quality: Quality,
        /// Tier.
        tier: Option<Tier>,
        /// When the provider sent it, ms.
        at: i64,
    },
    /// Store what a provider read found (status, quality, tier; the actor adds the name).
    StoreRead {
        /// Status.
        status: ChannelStatus,
        /// Quality.
        quality: Quality,
        /// Tier.
        tier: Option<Tier>,
        /// The verified display name, when the provider gave it.
        name: Option<String>,
    },
    /// Store the provider's new throughput, messages/s.
    StoreThroughput(u32),
    /// Store whether the access token is accepted.
    StoreCredential(bool),
    /// Store the payment lock (`None`: released).
    StorePaymentLock(Option<i64>),
    /// The tier gained a limit: rebuild the exact 24 h counter from storage and hand it to
    /// [`Channel::set_recipients`].
    RebuildRecipients,
    /// The number's own 24 h limit changed: update it in its group's shared limit.
    MemberLimit(Option<i64>),
    /// The connection status changed: emit `session.status`.
    StatusChanged {
        /// New status.
        status: ChannelStatus,
        /// Old status.
        previous: ChannelStatus,
    },
    /// The provider rate-limited the number: campaign work pauses until `until` (ms).
    BackedOff {
        /// End of the pause, ms.
        until: i64,
    },
    /// An older quality event arrived after a newer one: ignored (issue 46).
    StaleQualityIgnored,
}

/// A 1:1 send to admit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OneToOne {
    /// A template (business-initiated): the number's health, its 24 h limit and its BM's (and
    /// its group's when `group_limited`) apply.
    Template {
        /// A group send: the group's 24 h limit applies too.
        group_limited: bool,
    },
    /// Free text or media: only inside the 24-hour window, opened by the contact's last
    /// inbound message at `last_inbound_at` (ms).
    Session {
        /// The contact's last inbound message, ms.
        last_inbound_at: Option<i64>,
    },
}

/// Why a 1:1 send is not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Outside the 24-hour window (a template is needed).
    WindowClosed,
    /// The number refuses business-initiated sends (health code).
    Health(HealthCode),
    /// A 24 h limit (the number's, its group's or its BM's) has no room for a new recipient;
    /// the quota says which, its figures and when room returns (issue 49).
    Quota(Quota),
    /// A burst above the number's throughput: no slot within
    /// [`crate::pacing::PRIORITY_MAX_WAIT_MS`]; one is this many ms further (issue 54, D-128).
    Throughput {
        /// How long until a slot is within the bound, ms.
        retry_after_ms: i64,
    },
}

/// Today's guardrails of a number as `GET /channels/{id}/guardrails` shows them (serde: it
/// travels between nodes in cluster mode).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
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

/// A number's gauges (`/metrics`).
#[derive(Debug, Clone, PartialEq)]
pub struct Gauges {
    /// 2 green, 1 yellow, 0 red, -1 unknown.
    pub quality: f64,
    /// The health object (limit, sent and available over 24 h).
    pub health: Health,
    /// Today's campaign cap (-1: none).
    pub campaign_cap: f64,
    /// Campaign sends today.
    pub campaign_sent_today: f64,
    /// The warm-up day (0: not warming up).
    pub warmup_day: f64,
    /// 1 while backing off after a rate limit.
    pub backoff: f64,
    /// 0 ok, 1 restricted, 2 banned, 3 violation.
    pub waba_standing: f64,
}

/// A connected number's live state and rules (issue 51).
#[derive(Debug, Clone)]
pub struct Channel {
    id: i64,
    status: ChannelStatus,
    quality: Quality,
    tier: Option<Tier>,
    credential_valid: bool,
    payment_locked_until: Option<i64>,
    waba: WabaStanding,
    template_missing: bool,
    template_quality_red: bool,
    recipients: RollingUnique,
    guardrails: Guardrails,
    cap_day: i64,
    cap_sent: i64,
    cap_authorized: i64,
    pacer: Pacer,
    quality_event_at: Option<i64>,
    backoff_until: i64,
    /// Provider failures in a row (reset by an accepted send): while above zero, campaign
    /// work goes one send at a time (D-125).
    unavailable_streak: u32,
    campaign_in_flight: usize,
    /// What `channel.health` compares (issue 48).
    watch: super::watch::HealthWatch,
}

impl Channel {
    /// Builds the state from what storage holds.
    pub fn new(init: ChannelInit) -> Self {
        let s = init.stored;
        Self {
            id: init.id,
            status: s.status,
            quality: s.quality,
            tier: s.tier,
            credential_valid: s.credential_valid,
            payment_locked_until: s.payment_locked_until,
            waba: s.waba,
            template_missing: init.template_missing,
            template_quality_red: init.template_quality_red,
            recipients: s.recipients,
            guardrails: init.guardrails,
            cap_day: init.cap_day,
            cap_sent: init.cap_sent,
            cap_authorized: init.cap_authorized,
            pacer: Pacer::new(init.throughput_mps),
            quality_event_at: init.quality_event_at,
            backoff_until: 0,
            unavailable_streak: 0,
            campaign_in_flight: 0,
            watch: super::watch::HealthWatch::default(),
        }
    }

    /// The channel's id.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// Connection status.
    pub fn status(&self) -> ChannelStatus {
        self.status
    }

    /// Quality rating.
    pub fn quality(&self) -> Quality {
        self.quality
    }

    /// Messaging tier.
    pub fn tier(&self) -> Option<&Tier> {
        self.tier.as_ref()
    }

    /// The tier's 24 h limit (`None`: unlimited or unknown).
    pub fn tier_limit(&self) -> Option<i64> {
        self.tier.as_ref().and_then(Tier::limit_24h)
    }

    /// Whether the provider accepts the access token.
    pub fn credential_valid(&self) -> bool {
        self.credential_valid
    }

    /// Until when a payment problem locks business-initiated sends (ms).
    pub fn payment_locked_until(&self) -> Option<i64> {
        self.payment_locked_until
    }

    /// The guardrail cadence, ms between two campaign sends of the number (0: none).
    pub fn cadence_ms(&self) -> i64 {
        self.guardrails.cadence_ms
    }

    /// The pacing's current rate, messages/s.
    pub fn pacing_rate(&self) -> f64 {
        self.pacer.rate()
    }

    /// Replaces the 24 h counter (rebuilt from storage after [`Effect::RebuildRecipients`]).
    pub fn set_recipients(&mut self, recipients: RollingUnique) {
        self.recipients = recipients;
    }

    /// Applies one input at `now` (ms); returns what the actor must do, in order.
    pub fn apply(&mut self, input: Input, now: i64) -> Vec<Effect> {
        match input {
            Input::QualityEvent { quality, tier, at } => self.quality_event(quality, tier, at),
            Input::WabaStanding(standing) => {
                // A violation is news only for a WABA in good standing: it never hides a ban
                // or a restriction (D-074).
                let hides = standing == WabaStanding::Violation
                    && matches!(self.waba, WabaStanding::Banned | WabaStanding::Restricted);
                if !hides {
                    self.waba = standing;
                }
                Vec::new()
            }
            Input::TemplateFlags {
                missing,
                quality_red,
            } => {
                self.template_missing = missing;
                self.template_quality_red = quality_red;
                Vec::new()
            }
            Input::Answer(answer) => self.answer(answer, now),
            Input::Read(read) => self.read(read),
            Input::Reloaded(stored) => self.reloaded(*stored),
            Input::Guardrails(g) => {
                self.guardrails = g;
                Vec::new()
            }
            Input::Authorized(total) => {
                self.roll_day(now);
                self.cap_authorized = total;
                Vec::new()
            }
            Input::PaymentReleased => {
                self.payment_locked_until = None;
                Vec::new()
            }
            Input::CampaignSettled { sent } => {
                self.campaign_in_flight = self.campaign_in_flight.saturating_sub(1);
                if !sent {
                    self.cap_sent = (self.cap_sent - 1).max(0);
                }
                Vec::new()
            }
        }
    }

    fn quality_event(
        &mut self,
        quality: Option<Quality>,
        tier: Option<Tier>,
        at: i64,
    ) -> Vec<Effect> {
        if self.quality_event_at.is_some_and(|held| at < held) {
            return vec![Effect::StaleQualityIgnored];
        }
        self.quality_event_at = Some(at);
        let mut effects = Vec::new();
        match quality {
            Some(q) => self.quality = q,
            None => effects.push(Effect::ReadAtProvider),
        }
        if let Some(t) = tier {
            effects.extend(self.set_tier(t));
        }
        effects.push(Effect::StoreQuality {
            quality: self.quality,
            tier: self.tier.clone(),
            at,
        });
        effects
    }

    /// A new tier: the group learns the number's limit, and the 24 h counter is made exact
    /// (rebuilt) when the tier has a limit and an estimate when it has none.
    fn set_tier(&mut self, tier: Tier) -> Vec<Effect> {
        let limit = tier.limit_24h();
        self.tier = Some(tier);
        let mut effects = vec![Effect::MemberLimit(limit)];
        if limit.is_some() != self.recipients.is_exact() {
            if limit.is_some() {
                effects.push(Effect::RebuildRecipients);
            } else {
                self.recipients.forget_members();
            }
        }
        effects
    }

    fn answer(&mut self, answer: Answer, now: i64) -> Vec<Effect> {
        match answer {
            Answer::Accepted => {
                self.pacer.on_accepted();
                if self.unavailable_streak > 0 {
                    // The provider answers again: the outage's back-off ends (a throttle's
                    // does not: it is not an outage).
                    self.unavailable_streak = 0;
                    self.backoff_until = self.backoff_until.min(now);
                }
                self.set_credential(true)
            }
            // One failure per back-off counts (the sends in flight fail together).
            Answer::Unavailable if self.backoff_until > now => Vec::new(),
            Answer::Unavailable => {
                self.unavailable_streak = self.unavailable_streak.saturating_add(1);
                let until = now + unavailable_backoff_ms(self.unavailable_streak);
                self.backoff_until = until;
                vec![Effect::BackedOff { until }]
            }
            // One signal per burst (the sends in flight are refused together): the rate halves
            // and campaign work pauses for the provider's Retry-After, else 1 s; accepted sends
            // raise it back (issue 25).
            Answer::Throttled { retry_after_ms } => {
                match self.pacer.on_throttled(now, retry_after_ms) {
                    Some(until) => {
                        self.backoff_until = until;
                        vec![Effect::BackedOff { until }]
                    }
                    None => Vec::new(),
                }
            }
            Answer::PaymentProblem => {
                let until = now + PAYMENT_LOCK_MS;
                self.payment_locked_until = Some(until);
                vec![Effect::StorePaymentLock(Some(until))]
            }
            Answer::CredentialRefused => self.set_credential(false),
            Answer::Refused => Vec::new(),
        }
    }

    fn set_credential(&mut self, valid: bool) -> Vec<Effect> {
        if valid == self.credential_valid {
            return Vec::new();
        }
        self.credential_valid = valid;
        vec![Effect::StoreCredential(valid)]
    }

    fn set_status(&mut self, status: ChannelStatus) -> Option<Effect> {
        let previous = std::mem::replace(&mut self.status, status);
        (previous != status).then_some(Effect::StatusChanged { status, previous })
    }

    fn read(&mut self, read: ProviderRead) -> Vec<Effect> {
        let mut effects = Vec::new();
        if read.banned {
            self.waba = WabaStanding::Banned;
        }
        if let Some(q) = read.quality {
            self.quality = q;
        }
        if let Some(t) = read.tier {
            effects.extend(self.set_tier(t));
        }
        self.credential_valid = true;
        if read.throughput_mps != self.pacer.ceiling() {
            self.pacer.set_ceiling(read.throughput_mps);
            effects.push(Effect::StoreThroughput(read.throughput_mps));
        }
        effects.push(Effect::StoreRead {
            status: read.status,
            quality: self.quality,
            tier: self.tier.clone(),
            name: read.name,
        });
        effects.extend(self.set_status(read.status));
        effects
    }

    fn reloaded(&mut self, s: Stored) -> Vec<Effect> {
        self.quality = s.quality;
        self.tier = s.tier;
        self.credential_valid = s.credential_valid;
        self.payment_locked_until = s.payment_locked_until;
        self.waba = s.waba;
        self.recipients = s.recipients;
        self.set_status(s.status).into_iter().collect()
    }

    /// Starts a new day's campaign count when the local day changed.
    fn roll_day(&mut self, now: i64) {
        let day = guardrail::local_day(now);
        if day != self.cap_day {
            self.cap_day = day;
            self.cap_sent = 0;
            self.cap_authorized = 0;
        }
    }

    /// Today's campaign cap (a new day's count when the local day changed).
    fn cap(&mut self, now: i64) -> CapToday {
        self.roll_day(now);
        guardrail::cap_today(
            &self.guardrails,
            self.tier_limit(),
            self.cap_authorized,
            now,
        )
    }

    /// What the health is computed from, at `now`.
    pub fn health_input(&mut self, now: i64, limits: &mut Limits<'_>) -> HealthInput {
        HealthInput {
            status: self.status,
            quality: self.quality,
            credential_valid: self.credential_valid,
            payment_locked: self.payment_locked_until.is_some_and(|t| t > now),
            waba: self.waba,
            limit_24h: self.tier_limit(),
            sent_24h: self.recipients.count(now),
            external_available: limits.bm_available(now),
            template_missing: self.template_missing,
            template_quality_red: self.template_quality_red,
            warming_up: guardrail::warmup(&self.guardrails, self.tier_limit(), now).is_some(),
            daily_cap_reached: self.cap(now).reached(self.cap_sent),
            group: limits.group_name(),
        }
    }

    /// The change of the number's health since the last call, when its status, quality,
    /// tier, WABA standing, health code or tone changed or its 24 h headroom ran out or came
    /// back (`channel.health`, issue 48); the first call only sets the baseline. With the
    /// health object now.
    pub fn health_change(
        &mut self,
        now: i64,
        limits: &mut Limits<'_>,
    ) -> Option<(super::watch::HealthChange, Health)> {
        let input = self.health_input(now, limits);
        let h = health(&input);
        let tier = self.tier.as_ref().map(Tier::as_str);
        let seen = super::watch::Observed::of(&input, &h, tier);
        self.watch.observe(seen).map(|c| (c, h))
    }

    /// The health object at `now`.
    pub fn health(&mut self, now: i64, limits: &mut Limits<'_>) -> Health {
        health(&self.health_input(now, limits))
    }

    /// Whether business-initiated sends are refused now (RED, ban, payment, credential,
    /// disconnected): a campaign send already admitted checks it right before its provider
    /// call, so a RED event stops it.
    pub fn blocked(&mut self, now: i64, limits: &mut Limits<'_>) -> bool {
        business_initiated_allowed(&self.health_input(now, limits)).is_err()
    }

    /// Why a business-initiated send to `to` (or, with `None`, to a new recipient) is refused
    /// now: a blocking health code, or `limite_24h_esgotado` when the number's own 24 h limit
    /// or its BM's is used up and the recipient is not already counted (PROVIDER.md §10.2).
    pub fn business_initiated_refusal(
        &mut self,
        to: Option<&str>,
        now: i64,
        limits: &mut Limits<'_>,
    ) -> Option<HealthCode> {
        let input = self.health_input(now, limits);
        if let Err(code) = business_initiated_allowed(&input) {
            return Some(code);
        }
        let counted = to.is_some_and(|t| self.recipients.contains(t, now));
        let own_full = input.limit_24h.is_some_and(|l| input.sent_24h >= l) && !counted;
        let bm_full = limits.bm.as_mut().is_some_and(|b| !b.fits(to, now));
        (own_full || bm_full).then_some(HealthCode::LimitExhausted)
    }

    /// Admits a business-initiated send to `to` and counts it in the number's, its group's
    /// and its BM's 24 h counters (`group_limited`: the group's limit applies; `campaign`:
    /// today's cap applies too). Nothing is counted when it is refused.
    ///
    /// Errors: the health code that refuses it (`qualidade_red`…, `limite_24h_esgotado`,
    /// `limite_diario_atingido`).
    fn admit_business_initiated(
        &mut self,
        to: &str,
        now: i64,
        group_limited: bool,
        campaign: bool,
        limits: &mut Limits<'_>,
    ) -> Result<(), HealthCode> {
        let input = self.health_input(now, limits);
        business_initiated_allowed(&input)?;
        if campaign && self.cap(now).reached(self.cap_sent) {
            return Err(HealthCode::DailyCapReached);
        }
        if input.limit_24h.is_some_and(|l| input.sent_24h >= l)
            && !self.recipients.contains(to, now)
        {
            return Err(HealthCode::LimitExhausted);
        }
        limits.admit(to, now, group_limited)?;
        self.recipients.record(to, now);
        Ok(())
    }

    /// The 24 h limit with no room for a new recipient at `now`: the number's own first, then
    /// its group's (when the send is `group_limited`), then its BM's.
    fn exhausted_quota(
        &mut self,
        now: i64,
        group_limited: bool,
        limits: &mut Limits<'_>,
    ) -> Option<Quota> {
        if let Some(limit) = self.tier_limit() {
            if self.recipients.count(now) >= limit {
                return Some(Quota::read(
                    QuotaScope::Number,
                    limit,
                    &mut self.recipients,
                    now,
                ));
            }
        }
        let group = limits.group.as_mut().filter(|_| group_limited);
        if let Some(q) = group.and_then(|g| g.exhausted(QuotaScope::Group, now)) {
            return Some(q);
        }
        limits
            .bm
            .as_mut()
            .and_then(|b| b.exhausted(QuotaScope::Bm, now))
    }

    /// Admits a 1:1 send to `to` at `now` (a template by the number's health and 24 h limits;
    /// text or media inside the 24-hour window only) and books its slot: 1:1 sends are paced
    /// at the number's throughput, ahead of the campaign's slots (D-076, D-128). Returns when
    /// to call the provider (ms, `now` unless a burst queues it).
    ///
    /// Errors: [`Refusal::Throughput`] when no slot is within a second (nothing counted),
    /// [`Refusal::WindowClosed`], [`Refusal::Quota`] when a 24 h limit is exhausted, or the
    /// health code that refuses a template.
    pub fn admit_one_to_one(
        &mut self,
        to: &str,
        send: OneToOne,
        now: i64,
        limits: &mut Limits<'_>,
    ) -> Result<i64, Refusal> {
        self.pacer
            .priority_room(now)
            .map_err(|retry_after_ms| Refusal::Throughput { retry_after_ms })?;
        match send {
            OneToOne::Session { last_inbound_at } => {
                if !window_open(last_inbound_at, now) {
                    return Err(Refusal::WindowClosed);
                }
            }
            OneToOne::Template { group_limited } => {
                match self.admit_business_initiated(to, now, group_limited, false, limits) {
                    Ok(()) => {}
                    Err(HealthCode::LimitExhausted) => {
                        return Err(self
                            .exhausted_quota(now, group_limited, limits)
                            .map_or(Refusal::Health(HealthCode::LimitExhausted), Refusal::Quota));
                    }
                    Err(code) => return Err(Refusal::Health(code)),
                }
            }
        }
        Ok(self.pacer.take_priority(now))
    }

    /// Admits a claimed campaign send to `to` at `now` by the rules at this moment (a RED event
    /// processed before stops it, as do the 24 h limits and today's cap), counts it against
    /// today's cap and books its cadence slot: returns when to call the provider (ms).
    ///
    /// Errors: the health code that refuses it; the recipient goes back to the campaign.
    pub fn admit_campaign(
        &mut self,
        to: &str,
        group_limited: bool,
        now: i64,
        limits: &mut Limits<'_>,
    ) -> Result<i64, HealthCode> {
        self.admit_business_initiated(to, now, group_limited, true, limits)?;
        self.cap_sent += 1;
        self.campaign_in_flight += 1;
        Ok(self.pacer.take(self.guardrails.cadence_ms, now))
    }

    /// How many campaign sends the number takes now, or why it takes none: its free window,
    /// bounded by today's cap, its 24 h headroom and the sends its cadence fits in the next
    /// [`CADENCE_HORIZON_MS`]. Backing off after a rate limit: 0 without a reason (busy, not
    /// blocked).
    pub fn campaign_credits(
        &mut self,
        now: i64,
        limits: &mut Limits<'_>,
    ) -> (usize, Option<HealthCode>) {
        if let Some(code) = self.business_initiated_refusal(None, now, limits) {
            return (0, Some(code));
        }
        if self.cap(now).reached(self.cap_sent) {
            return (0, Some(HealthCode::DailyCapReached));
        }
        if self.backoff_until > now {
            return (0, None);
        }
        let input = self.health_input(now, limits);
        let window = CAMPAIGN_WINDOW.saturating_sub(self.campaign_in_flight);
        let cap = self
            .cap(now)
            .remaining(self.cap_sent)
            .map_or(usize::MAX, |r| r as usize);
        let headroom = available(input.limit_24h, input.sent_24h, input.external_available)
            .map_or(usize::MAX, |a| a as usize);
        let cadence = self
            .pacer
            .slots_within(self.guardrails.cadence_ms, now, CADENCE_HORIZON_MS);
        // After provider failures, one send probes until one is accepted (D-125).
        let probe = if self.unavailable_streak > 0 {
            1
        } else {
            usize::MAX
        };
        (window.min(cap).min(headroom).min(cadence).min(probe), None)
    }

    /// Until when campaign sends are held because the provider failed (ms; D-125): `Some`
    /// from the first failure in a row until a send is accepted. A send admitted before the
    /// outage that has not gone out yet goes back to the campaign instead of calling a provider
    /// that fails.
    pub fn outage_until(&self) -> Option<i64> {
        (self.unavailable_streak > 0).then_some(self.backoff_until)
    }

    /// Today's guardrails at `now`.
    pub fn guardrail_view(&mut self, now: i64) -> GuardrailView {
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

    /// The gauges at `now`.
    pub fn gauges(&mut self, now: i64, limits: &mut Limits<'_>) -> Gauges {
        let health = self.health(now, limits);
        let cap = self.cap(now);
        Gauges {
            quality: match self.quality {
                Quality::Green => 2.0,
                Quality::Yellow => 1.0,
                Quality::Red => 0.0,
                Quality::Unknown => -1.0,
            },
            health,
            campaign_cap: cap.cap.map_or(-1.0, |c| c as f64),
            campaign_sent_today: self.cap_sent as f64,
            warmup_day: f64::from(cap.warmup_day.unwrap_or(0)),
            backoff: if self.backoff_until > now { 1.0 } else { 0.0 },
            waba_standing: match self.waba {
                WabaStanding::Ok => 0.0,
                WabaStanding::Restricted => 1.0,
                WabaStanding::Banned => 2.0,
                WabaStanding::Violation => 3.0,
            },
        }
    }
}

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;
