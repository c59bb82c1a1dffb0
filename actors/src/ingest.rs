//! Provider webhooks in: signature check per channel, then each change routed to the actor of
//! the number it concerns. Nothing is recorded for a change whose channel's app secret did not
//! verify the signature.

use crate::error::ActorError;
use crate::protocol::{ChannelMsg, CALLBACK_PREFIX};
use crate::registry::ChannelEntry;
use crate::Runtime;
use engine::channel::{Quality, WabaStanding};
use engine::message::{MessageKind, ProviderStatus};
use engine::phone::Phone;
use engine::Secret;
use provider::signature;
use provider::wire::{ChangeValue, MessagesValue, WebhookPayload};
use std::collections::HashMap;
use std::sync::Arc;
use storage::messages::{NewInbound, StatusReport};

/// What one provider webhook did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngestReport {
    /// Status reports that changed a message.
    pub statuses: usize,
    /// Inbound messages recorded.
    pub inbound: usize,
    /// Quality updates applied.
    pub quality_updates: usize,
    /// WABA standing changes applied (`account_update`).
    pub account_updates: usize,
    /// Template states changed (`message_template_status_update`).
    pub template_updates: usize,
    /// Other provider fields acted on (capability, template quality and category, names,
    /// alerts, opt-outs, violations, verification; D-074).
    pub field_updates: usize,
    /// Changes not acted on (unknown numbers, fields disparo does not use yet).
    pub ignored: usize,
}

/// A number's quality change: the number, its quality and tier when the event carried them,
/// and when the provider sent it (the entry's `time`, ms; now when absent).
type QualityChange = (Arc<ChannelEntry>, Option<Quality>, Option<String>, i64);

/// A WABA's new standing: WABA id, standing, detail, its verified channels, and when the
/// provider sent it (ms).
type Standing = (
    String,
    WabaStanding,
    Option<String>,
    Vec<Arc<ChannelEntry>>,
    i64,
);

/// What a verified webhook asks for, taken out of its payload.
#[derive(Default)]
struct WebhookWork {
    statuses: HashMap<i64, (Arc<ChannelEntry>, Vec<StatusReport>)>,
    inbound: HashMap<i64, (Arc<ChannelEntry>, Vec<NewInbound>)>,
    quality: Vec<QualityChange>,
    standings: Vec<Standing>,
    template_updates: Vec<TemplateUpdate>,
    /// WABA-level changes, each with the WABA's channels whose secret verified it.
    waba_changes: Vec<(String, WabaChange, Vec<Arc<ChannelEntry>>)>,
    /// Number-level changes, for the verified channel.
    number_changes: Vec<(Arc<ChannelEntry>, NumberChange)>,
}

/// A WABA-level field disparo acts on (D-074).
#[derive(Debug)]
pub(crate) enum WabaChange {
    /// `business_capability_update`: the portfolio's tier.
    Capability(String),
    /// `message_template_quality_update`.
    TemplateQuality(provider::wire::TemplateQualityValue),
    /// `template_category_update`.
    TemplateCategory(provider::wire::TemplateCategoryValue),
    /// `account_alerts`.
    Alert(provider::wire::AccountAlertValue),
    /// `account_update` `VERIFIED_ACCOUNT`: the business is verified.
    Verified,
}

/// How a field is routed: a WABA-level change of [`WabaChange`], nothing to do (a capability
/// update without a limit), or any other field, handled by value.
enum Routed {
    Waba(WabaChange),
    Nothing,
    Other(ChangeValue),
}

fn waba_change(value: ChangeValue) -> Routed {
    let change = match value {
        ChangeValue::BusinessCapability(c) => c.tier().map(WabaChange::Capability),
        ChangeValue::TemplateQuality(q) => Some(WabaChange::TemplateQuality(q)),
        ChangeValue::TemplateCategory(c) => Some(WabaChange::TemplateCategory(c)),
        ChangeValue::AccountAlert(a) => Some(WabaChange::Alert(a)),
        other => return Routed::Other(other),
    };
    change.map_or(Routed::Nothing, Routed::Waba)
}

/// A number-level field disparo acts on (D-074).
#[derive(Debug)]
pub(crate) enum NumberChange {
    /// `phone_number_name_update` approved: the new verified name.
    Name(String),
    /// `user_preferences`: `(contact phone, category, stop)`.
    Preferences(Vec<(String, String, bool)>),
}

/// A template's new status for a WABA: WABA id, the change, the channels whose secret
/// verified it (only their rows change), and when the provider sent it (ms).
type TemplateUpdate = (
    String,
    provider::wire::TemplateStatusValue,
    Vec<Arc<ChannelEntry>>,
    i64,
);

/// What a webhook names, skimmed before its signature is checked: entry (WABA) ids and the
/// phone number ids of `messages` changes; every other value is skipped unread.
#[derive(serde::Deserialize)]
struct Named {
    #[serde(default)]
    entry: Vec<NamedEntry>,
}

#[derive(serde::Deserialize)]
struct NamedEntry {
    #[serde(default)]
    id: String,
    #[serde(default)]
    changes: Vec<NamedChange>,
}

#[derive(serde::Deserialize)]
struct NamedChange {
    #[serde(default)]
    value: NamedValue,
}

#[derive(serde::Deserialize, Default)]
struct NamedValue {
    metadata: Option<NamedMetadata>,
}

#[derive(serde::Deserialize)]
struct NamedMetadata {
    #[serde(default)]
    phone_number_id: String,
}

impl Named {
    /// The running numbers of its `messages` changes (the hot path: statuses, inbound).
    fn numbers(&self, registry: &crate::registry::Registry) -> Vec<Arc<ChannelEntry>> {
        self.entry
            .iter()
            .flat_map(|e| &e.changes)
            .filter_map(|c| c.value.metadata.as_ref())
            .filter_map(|m| registry.by_phone_number_id(&m.phone_number_id))
            .collect()
    }

    /// The running channels of the WABAs it names (WABA-level fields).
    fn waba_channels(&self, registry: &crate::registry::Registry) -> Vec<Arc<ChannelEntry>> {
        let wabas: Vec<&str> = self.entry.iter().map(|e| e.id.as_str()).collect();
        registry
            .all()
            .into_iter()
            .filter(|c| wabas.contains(&c.waba_id.as_str()))
            .collect()
    }
}

/// Checks signatures per secret once.
struct Verifier<'a> {
    body: &'a [u8],
    header: &'a str,
    fallback: Option<&'a Secret>,
    cache: HashMap<String, bool>,
}

impl Verifier<'_> {
    fn verifies_for(&mut self, entry: &ChannelEntry) -> bool {
        let Some(secret) = entry.app_secret.as_ref().or(self.fallback) else {
            return false;
        };
        let (body, header) = (self.body, self.header);
        *self
            .cache
            .entry(secret.expose().to_string())
            .or_insert_with(|| signature::verify(secret.expose(), body, header))
    }
}

/// Counts a change's status reports in `disparo_message_statuses_total{status}`: once per
/// status kind per change, not per report (a registry lookup per status cost ~10 % of
/// dispatch on PostgreSQL under a campaign).
fn count_statuses(v: &MessagesValue) {
    const KINDS: [&str; 5] = ["sent", "delivered", "read", "failed", "played"];
    let mut counts = [0u64; 5];
    for s in &v.statuses {
        if let Some(i) = KINDS.iter().position(|k| *k == s.status) {
            counts[i] += 1;
        }
    }
    for (kind, n) in KINDS.iter().zip(counts) {
        if n > 0 {
            metrics::counter!("disparo_message_statuses_total", "status" => *kind).increment(n);
        }
    }
}

fn status_reports(v: &MessagesValue, now: i64) -> Vec<StatusReport> {
    count_statuses(v);
    v.statuses
        .iter()
        .filter_map(|s| {
            let status = ProviderStatus::parse(&s.status)?;
            Some(StatusReport {
                provider_message_id: s.id.clone(),
                callback_message_id: s
                    .biz_opaque_callback_data
                    .as_deref()
                    .and_then(|c| c.strip_prefix(CALLBACK_PREFIX))
                    .and_then(|id| id.parse().ok()),
                status,
                at: s.timestamp_ms().unwrap_or(now),
                error: s
                    .errors
                    .first()
                    .map(|e| (e.code, e.title.clone(), e.details().map(str::to_string))),
            })
        })
        .collect()
}

fn inbound_messages(v: &MessagesValue, entry: &ChannelEntry, now: i64) -> Vec<NewInbound> {
    v.messages
        .iter()
        .filter_map(|m| {
            let from = Phone::from_provider_display(m.from.as_deref()?);
            if from.as_str().is_empty() {
                return None;
            }
            let name = v
                .contacts
                .iter()
                .find(|c| c.wa_id.as_deref() == m.from.as_deref())
                .or(v.contacts.first())
                .and_then(|c| c.profile.as_ref())
                .map(|p| p.name.clone());
            let media = m.media().map(|md| {
                serde_json::json!({
                    "provider_media_id": md.id,
                    "mime_type": md.mime_type,
                    "sha256": md.sha256,
                    "caption": md.caption,
                    "filename": md.filename,
                })
            });
            Some(NewInbound {
                account_id: entry.account_id,
                channel_id: entry.channel_id,
                contact_phone: from.as_str().to_string(),
                contact_name: name,
                provider_message_id: m.id.clone(),
                kind: MessageKind::parse(&m.kind),
                body: m.display_text(),
                media,
                at: m.timestamp.parse::<i64>().map(|s| s * 1000).unwrap_or(now),
            })
        })
        .collect()
}

/// Checks a webhook's signature before its payload is read: a per-channel receiver against
/// its channel's secret; the app-level receiver against the secrets of the channels the body
/// names (a skim that keeps only the ids) and the app secret. What none of them signs is
/// refused unread.
///
/// Errors: [`ActorError::InvalidSignature`]; [`ActorError::BadPayload`] for a body signed
/// with the app secret that is not JSON.
fn check_signature(
    registry: &crate::registry::Registry,
    routed: Option<&ChannelEntry>,
    verifier: &mut Verifier<'_>,
) -> Result<(), ActorError> {
    if let Some(entry) = routed {
        return match verifier.verifies_for(entry) {
            true => Ok(()),
            false => Err(ActorError::InvalidSignature),
        };
    }
    let (body, header, fallback) = (verifier.body, verifier.header, verifier.fallback);
    let fallback_ok = || fallback.is_some_and(|s| signature::verify(s.expose(), body, header));
    match serde_json::from_slice::<Named>(body) {
        Ok(named) => {
            let signed = named
                .numbers(registry)
                .iter()
                .any(|c| verifier.verifies_for(c))
                || named
                    .waba_channels(registry)
                    .iter()
                    .any(|c| verifier.verifies_for(c))
                || fallback_ok();
            match signed {
                true => Ok(()),
                false => Err(ActorError::InvalidSignature),
            }
        }
        // Only a signed body earns a 400; anything else is a forgery.
        Err(e) => Err(if fallback_ok() {
            ActorError::BadPayload(e.to_string())
        } else {
            ActorError::InvalidSignature
        }),
    }
}

/// The WABA standing an `account_update` event gives, if any (PROVIDER.md §9.7).
fn standing_of(a: &provider::wire::AccountUpdateValue) -> Option<WabaStanding> {
    match (
        a.event.as_str(),
        a.ban_info.as_ref().map(|b| b.waba_ban_state.as_str()),
    ) {
        ("DISABLED_UPDATE", Some("DISABLE"))
        | ("DISABLED_UPDATE", Some("SCHEDULE_FOR_DISABLE")) => Some(WabaStanding::Banned),
        ("DISABLED_UPDATE", Some("REINSTATE")) => Some(WabaStanding::Ok),
        ("ACCOUNT_RESTRICTION", _) => Some(WabaStanding::Restricted),
        ("ACCOUNT_VIOLATION", _) => Some(WabaStanding::Violation),
        _ => None,
    }
}

/// What an `account_update` says of its standing: the ban state, the violation's type or the
/// restrictions.
fn standing_detail(a: &provider::wire::AccountUpdateValue) -> Option<String> {
    a.ban_info
        .as_ref()
        .map(|b| b.waba_ban_state.clone())
        .or_else(|| {
            a.violation_info
                .as_ref()
                .and_then(|v| v["violation_type"].as_str().map(str::to_string))
        })
        .or_else(|| {
            a.restriction_info
                .as_ref()
                .map(|r| serde_json::Value::Array(r.clone()).to_string())
        })
}

/// A `user_preferences` change's `(contact phone, category, stop)` triples (`stop` / `resume`
/// only).
fn preferences(u: &provider::wire::UserPreferencesValue) -> Vec<(String, String, bool)> {
    u.user_preferences
        .iter()
        .filter_map(|p| {
            let stop = match p.value.to_ascii_lowercase().as_str() {
                "stop" => true,
                "resume" => false,
                _ => return None,
            };
            let phone: String = p.wa_id.chars().filter(char::is_ascii_digit).collect();
            (!phone.is_empty()).then(|| (phone, p.category.clone(), stop))
        })
        .collect()
}

/// Reads a signed payload change by change into per-channel work, keeping only what a
/// channel's secret (or the app secret, as its fallback) verifies.
struct Reader<'a> {
    registry: &'a crate::registry::Registry,
    /// The channel of a per-channel receiver.
    routed: Option<Arc<ChannelEntry>>,
    verifier: Verifier<'a>,
    report: IngestReport,
    /// When the webhook arrived, ms.
    now: i64,
    /// Some change was verified for a channel.
    any_verified: bool,
    /// Some change named a channel whose secret did not verify it.
    any_unverified: bool,
    work: WebhookWork,
}

impl Reader<'_> {
    /// The channel a number-level change is for: the routed channel only when it is that
    /// number, else the running channel of the number.
    fn number_target(&self, phone_number_id: &str) -> Option<Arc<ChannelEntry>> {
        match &self.routed {
            Some(r) if r.phone_number_id == phone_number_id => Some(r.clone()),
            Some(_) => None,
            None => self.registry.by_phone_number_id(phone_number_id),
        }
    }

    fn of_waba(&self, waba: &str) -> Vec<Arc<ChannelEntry>> {
        self.registry
            .all()
            .into_iter()
            .filter(|e| e.waba_id == waba)
            .collect()
    }

    /// Whether `target`'s secret verifies the body; counts the outcome.
    fn verifies(&mut self, target: &ChannelEntry) -> bool {
        let ok = self.verifier.verifies_for(target);
        match ok {
            true => self.any_verified = true,
            false => self.any_unverified = true,
        }
        ok
    }

    /// The WABA's channels whose secret verifies the body; counts the outcome (`None`: no
    /// channel of the WABA runs here, or none verified).
    fn waba_verified(&mut self, waba: &str) -> Option<Vec<Arc<ChannelEntry>>> {
        let of_waba = self.of_waba(waba);
        if of_waba.is_empty() {
            self.report.ignored += 1;
            return None;
        }
        let verified: Vec<Arc<ChannelEntry>> = of_waba
            .into_iter()
            .filter(|e| self.verifier.verifies_for(e))
            .collect();
        if verified.is_empty() {
            self.any_unverified = true;
            None
        } else {
            self.any_verified = true;
            Some(verified)
        }
    }

    /// Reads one change of the entry of WABA `waba` sent at `sent_at` (ms).
    fn change(&mut self, waba: &str, sent_at: i64, change: &provider::wire::WebhookChange) {
        let value = match change.parse() {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(field = change.field, error = %e, "unparseable provider change");
                self.report.ignored += 1;
                return;
            }
        };
        let value = match waba_change(value) {
            Routed::Waba(c) => {
                if let Some(v) = self.waba_verified(waba) {
                    self.work.waba_changes.push((waba.to_string(), c, v));
                }
                return;
            }
            Routed::Nothing => {
                self.report.ignored += 1;
                return;
            }
            Routed::Other(value) => value,
        };
        match value {
            ChangeValue::Messages(v) => self.messages(&v),
            ChangeValue::QualityUpdate(q) => self.quality(waba, &q, sent_at),
            ChangeValue::AccountUpdate(a) => self.account_update(waba, &a, sent_at),
            ChangeValue::TemplateStatus(t) => self.template_status(waba, t, sent_at),
            ChangeValue::NameUpdate(n) => self.name_update(waba, n),
            ChangeValue::UserPreferences(u) => {
                let Some(target) = self.number_target(&u.metadata.phone_number_id) else {
                    self.report.ignored += 1;
                    return;
                };
                if self.verifies(&target) {
                    let prefs = preferences(&u);
                    self.work
                        .number_changes
                        .push((target, NumberChange::Preferences(prefs)));
                }
            }
            // Taken by `waba_change` above.
            ChangeValue::BusinessCapability(_)
            | ChangeValue::TemplateQuality(_)
            | ChangeValue::TemplateCategory(_)
            | ChangeValue::AccountAlert(_) => {}
            ChangeValue::Other(_) => {
                // A field disparo does not act on (yet): answered 200 once the body is signed —
                // a refusal makes the provider retry it for days and can disable the app's
                // webhook (issue 16) — logged and counted.
                tracing::info!(field = change.field, "provider field not acted on");
                metrics::counter!("disparo_provider_fields_ignored_total").increment(1);
                self.report.ignored += 1;
            }
        }
    }

    /// A `messages` change: its statuses and inbound messages, for the verified number.
    fn messages(&mut self, v: &MessagesValue) {
        let Some(target) = self.number_target(&v.metadata.phone_number_id) else {
            self.report.ignored += 1;
            return;
        };
        if !self.verifies(&target) {
            return;
        }
        let s = status_reports(v, self.now);
        if !s.is_empty() {
            self.work
                .statuses
                .entry(target.channel_id)
                .or_insert_with(|| (target.clone(), Vec::new()))
                .1
                .extend(s);
        }
        let m = inbound_messages(v, &target, self.now);
        if !m.is_empty() {
            self.work
                .inbound
                .entry(target.channel_id)
                .or_insert_with(|| (target.clone(), Vec::new()))
                .1
                .extend(m);
        }
    }

    /// `phone_number_quality_update`: for each verified number of the WABA with that phone.
    fn quality(&mut self, waba: &str, q: &provider::wire::QualityUpdateValue, sent_at: i64) {
        let phone = Phone::from_provider_display(&q.display_phone_number);
        let targets = self.registry.by_waba_and_phone(waba, phone.as_str());
        if targets.is_empty() {
            self.report.ignored += 1;
        }
        let new_quality = match (q.quality_rating.as_deref(), q.event.as_str()) {
            (Some(r), _) => Some(Quality::parse(r)),
            (None, "FLAGGED") => Some(Quality::Red),
            _ => None,
        };
        for t in targets {
            if self.verifies(&t) {
                self.work
                    .quality
                    .push((t, new_quality, q.current_limit.clone(), sent_at));
            }
        }
    }

    /// `account_update`: the business verified, or the WABA's standing for its verified
    /// channels.
    fn account_update(&mut self, waba: &str, a: &provider::wire::AccountUpdateValue, sent_at: i64) {
        if a.event == "VERIFIED_ACCOUNT" {
            if let Some(v) = self.waba_verified(waba) {
                self.work
                    .waba_changes
                    .push((waba.to_string(), WabaChange::Verified, v));
            }
            return;
        }
        let verified: Vec<Arc<ChannelEntry>> = self
            .of_waba(waba)
            .into_iter()
            .filter(|t| self.verifier.verifies_for(t))
            .collect();
        match (standing_of(a), verified.is_empty()) {
            (Some(st), false) => {
                self.any_verified = true;
                let detail = standing_detail(a);
                self.work
                    .standings
                    .push((waba.to_string(), st, detail, verified, sent_at));
            }
            (None, _) => {
                // An event disparo does not act on (PARTNER_ADDED…): logged and counted like an
                // unknown field.
                tracing::info!(
                    event = a.event,
                    "provider account_update event not acted on"
                );
                metrics::counter!("disparo_provider_fields_ignored_total").increment(1);
                self.report.ignored += 1;
            }
            (Some(_), true) => self.report.ignored += 1,
        }
    }

    /// `message_template_status_update`: templates belong to the WABA, so any of its channels'
    /// secrets verifies it.
    fn template_status(
        &mut self,
        waba: &str,
        t: provider::wire::TemplateStatusValue,
        sent_at: i64,
    ) {
        let of_waba = self.of_waba(waba);
        let empty = of_waba.is_empty();
        let verified: Vec<Arc<ChannelEntry>> = of_waba
            .into_iter()
            .filter(|e| self.verifier.verifies_for(e))
            .collect();
        if !verified.is_empty() {
            self.any_verified = true;
            self.work
                .template_updates
                .push((waba.to_string(), t, verified, sent_at));
        } else if empty {
            self.report.ignored += 1;
        } else {
            self.any_unverified = true;
        }
    }

    /// `phone_number_name_update`: an approved name for each verified number with that phone.
    fn name_update(&mut self, waba: &str, n: provider::wire::NameUpdateValue) {
        let phone = Phone::from_provider_display(&n.display_phone_number);
        let targets = self.registry.by_waba_and_phone(waba, phone.as_str());
        let name = n
            .requested_verified_name
            .filter(|_| n.decision.eq_ignore_ascii_case("APPROVED"));
        if targets.is_empty() {
            self.report.ignored += 1;
        }
        for t in targets {
            if !self.verifies(&t) {
                continue;
            }
            match &name {
                Some(name) => self
                    .work
                    .number_changes
                    .push((t, NumberChange::Name(name.clone()))),
                // A rejected or deferred name changes nothing here.
                None => self.report.ignored += 1,
            }
        }
    }
}

impl Runtime {
    /// Ingests one provider webhook POST. `route` is the channel of a per-channel receiver
    /// (`/webhooks/messaging/{channel_id}`), `None` for the app-level receiver. The body is
    /// taken by value and dropped once read, before the wait for the writers.
    ///
    /// Errors: [`ActorError::InvalidSignature`] when the signature verifies for none of the
    /// channels the payload names (nothing is recorded); [`ActorError::BadPayload`] for a
    /// signed body that is not a provider payload; [`ActorError::NotFound`] for an unknown
    /// route.
    pub async fn ingest_provider_webhook(
        &self,
        route: Option<i64>,
        body: bytes::Bytes,
        signature_header: Option<&str>,
    ) -> Result<IngestReport, ActorError> {
        // Unsigned: refused before anything else is done with the body.
        let header = signature_header
            .ok_or(ActorError::InvalidSignature)?
            .to_string();
        // Hashing (and the escaped form the provider signs) and parsing are CPU work on up to
        // 2 MB: done on the blocking pool, not on the threads that serve requests.
        // As many at once as there are cores: more would only add blocking threads (and
        // their allocator caches), not throughput.
        let slot = self
            .shared
            .ingest_slots
            .acquire()
            .await
            .map_err(|_| ActorError::Unavailable)?;
        let rt = self.clone();
        let (report, work) = tokio::task::spawn_blocking(move || {
            rt.read_provider_webhook(route, &body, &header)
            // The body and its parsed form are dropped here: what waits for the writers
            // below is only the work taken from them.
        })
        .await
        .map_err(|_| ActorError::Unavailable)??;
        drop(slot);
        self.apply_provider_webhook(report, work).await
    }

    /// Verifies and reads a webhook into the work it asks for, per channel.
    fn read_provider_webhook(
        &self,
        route: Option<i64>,
        body: &[u8],
        header: &str,
    ) -> Result<(IngestReport, WebhookWork), ActorError> {
        let shared = &self.shared;
        let routed = match route {
            Some(id) => Some(shared.registry.get(id).ok_or(ActorError::NotFound)?),
            None => None,
        };
        let mut verifier = Verifier {
            body,
            header,
            fallback: shared.config.app_secret.as_ref(),
            cache: HashMap::new(),
        };
        check_signature(&shared.registry, routed.as_deref(), &mut verifier)?;
        // Signed by now: a body that is not a provider payload is the sender's mistake (400).
        let payload: WebhookPayload =
            serde_json::from_slice(body).map_err(|e| ActorError::BadPayload(e.to_string()))?;
        let mut reader = Reader {
            registry: &shared.registry,
            routed,
            verifier,
            report: IngestReport::default(),
            now: shared.now_ms(),
            any_verified: false,
            any_unverified: false,
            work: WebhookWork::default(),
        };
        for entry in &payload.entry {
            // When the provider sent the entry (ms): later-arriving older events of a field
            // do not override newer ones (issue 46).
            let sent_at = entry.time.map_or(reader.now, |s| s.saturating_mul(1000));
            for change in &entry.changes {
                reader.change(&entry.id, sent_at, change);
            }
        }
        if reader.any_unverified && !reader.any_verified {
            return Err(ActorError::InvalidSignature);
        }
        // Nothing was for a channel here (a WABA-level field disparo does not act on, an
        // account_update that is no ban): the signature checked at the top — by a channel of
        // a number or WABA the body names, or the app secret — is what makes it authentic,
        // and it is answered 200 (issue 16: a 401 would make the provider retry it for days).
        Ok((reader.report, reader.work))
    }

    /// A WABA's new standing (`account_update`), for the accounts whose channels' secrets
    /// signed it: stored on their WABA rows (an older event arriving late changes nothing), then
    /// told to those channels' actors.
    async fn apply_standing(
        &self,
        waba_id: &str,
        standing: WabaStanding,
        detail: Option<&str>,
        channels: &[Arc<ChannelEntry>],
        sent_at: i64,
    ) -> Result<(), ActorError> {
        let label = match standing {
            WabaStanding::Ok => "ok",
            WabaStanding::Restricted => "restricted",
            WabaStanding::Banned => "banned",
            WabaStanding::Violation => "violation",
        };
        // Only the records of the accounts whose channels' secrets signed the event: another
        // account's WABA row with the same id is not this signer's to change (issue 15).
        let mut accounts: std::collections::HashSet<i64> =
            channels.iter().map(|c| c.account_id).collect();
        let signers = accounts.clone();
        let store = &self.shared.store;
        for w in store
            .wabas_by_provider_id(waba_id)
            .await?
            .into_iter()
            .filter(|w| signers.contains(&w.account_id))
            // A violation never hides a ban or a restriction (D-074).
            .filter(|w| {
                standing != WabaStanding::Violation
                    || !matches!(w.standing.as_str(), "banned" | "restricted")
            })
        {
            // An older event that arrives late: that account's numbers keep the newer one.
            if !store
                .set_waba_standing(w.id, label, detail, sent_at)
                .await?
            {
                accounts.remove(&w.account_id);
            }
        }
        for c in channels.iter().filter(|c| accounts.contains(&c.account_id)) {
            c.actor
                .cast(ChannelMsg::WabaStanding(standing))
                .map_err(|_| ActorError::Unavailable)?;
        }
        Ok(())
    }

    /// Hands a webhook's work to the channels' actors and the writers, and waits for it.
    async fn apply_provider_webhook(
        &self,
        mut report: IngestReport,
        work: WebhookWork,
    ) -> Result<IngestReport, ActorError> {
        let shared = &self.shared;
        let WebhookWork {
            statuses,
            inbound,
            quality,
            standings,
            template_updates,
            waba_changes,
            number_changes,
        } = work;
        let timeout = shared.config.call_timeout;
        for (_, (entry, reports)) in statuses {
            report.statuses +=
                crate::ask(&entry.actor, |r| ChannelMsg::Statuses(reports, r), timeout).await??;
        }
        for (_, (entry, items)) in inbound {
            report.inbound +=
                crate::ask(&entry.actor, |r| ChannelMsg::Inbound(items, r), timeout).await??;
        }
        for (waba_id, standing, detail, channels, sent_at) in standings {
            self.apply_standing(&waba_id, standing, detail.as_deref(), &channels, sent_at)
                .await?;
            report.account_updates += 1;
        }
        for (waba_id, t, channels, sent_at) in template_updates {
            let verified: std::collections::HashSet<i64> =
                channels.iter().map(|c| c.channel_id).collect();
            report.template_updates += self
                .apply_template_status(&waba_id, &t, &verified, sent_at)
                .await?;
        }
        for (waba_id, change, channels) in waba_changes {
            report.field_updates += self.apply_waba_change(&waba_id, change, &channels).await?;
        }
        for (channel, change) in number_changes {
            report.field_updates += self.apply_number_change(&channel, change).await?;
        }
        for (entry, q, tier, at) in quality {
            entry
                .actor
                .cast(ChannelMsg::QualityUpdate {
                    quality: q,
                    tier,
                    at,
                })
                .map_err(|_| ActorError::Unavailable)?;
            report.quality_updates += 1;
        }
        Ok(report)
    }
}
