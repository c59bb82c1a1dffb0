//! [`read`]: a webhook body's signature checked per channel, then each change taken into
//! [`Work`] for the channels whose secret verified it.

use super::wire::{
    AccountUpdateValue, ChangeValue, MessagesValue, NameUpdateValue, QualityUpdateValue,
    TemplateStatusValue, UserPreferencesValue, WebhookChange, WebhookPayload,
};
use super::{
    signature, Directory, IngestReport, NewInbound, NumberChange, QualityChange, Reading,
    StandingChange, StatusReport, TemplateUpdate, WabaChange, Work, CALLBACK_PREFIX,
    INVALID_PAYLOAD, INVALID_SIGNATURE,
};
use crate::channel::{Quality, WabaStanding};
use crate::message::{MessageKind, ProviderStatus};
use crate::phone::Phone;
use crate::{Secret, ValidationError};
use std::collections::HashMap;

/// The provider statuses counted per kind, in [`Reading::status_counts`].
const STATUS_KINDS: [&str; 5] = ["sent", "delivered", "read", "failed", "played"];

fn refused() -> ValidationError {
    ValidationError::new(
        INVALID_SIGNATURE,
        "x-hub-signature-256",
        "assinatura do webhook não confere",
    )
}

/// Reads one provider webhook POST at `now` (ms). `routed` is the channel of a per-channel
/// receiver (`/webhooks/messaging/{channel_id}`), `None` for the app-level receiver, whose
/// body is checked against the secrets of the channels it names and `fallback` (the
/// deployment's app secret).
///
/// Errors: [`INVALID_SIGNATURE`] when the signature verifies for none of the channels the
/// payload names (nothing may be recorded); [`INVALID_PAYLOAD`] for a signed body that is not
/// a provider payload. A signed change for no known channel, or of a field disparo does not act
/// on, is counted in `ignored` and answered 200 (a refusal makes the provider retry it for
/// days, issue 16).
pub fn read<D: Directory>(
    directory: &D,
    routed: Option<D::Channel>,
    body: &[u8],
    header: &str,
    fallback: Option<&Secret>,
    now: i64,
) -> Result<Reading<D::Channel>, ValidationError> {
    let mut verifier = Verifier {
        body,
        header,
        fallback,
        cache: HashMap::new(),
    };
    check_signature(directory, routed.as_ref(), &mut verifier)?;
    // Signed by now: a body that is not a provider payload is the sender's mistake (400).
    let payload: WebhookPayload = serde_json::from_slice(body)
        .map_err(|e| ValidationError::new(INVALID_PAYLOAD, "body", e.to_string()))?;
    let mut reader = Reader {
        directory,
        routed,
        verifier,
        now,
        any_verified: false,
        any_unverified: false,
        reading: Reading {
            work: Work::default(),
            report: IngestReport::default(),
            status_counts: Vec::new(),
            not_acted_on: Vec::new(),
            unparseable: Vec::new(),
        },
        status_counts: [0; 5],
        statuses_at: HashMap::new(),
        inbound_at: HashMap::new(),
    };
    for entry in &payload.entry {
        // When the provider sent the entry (ms): later-arriving older events of a field do
        // not override newer ones (issue 46).
        let sent_at = entry.time.map_or(now, |s| s.saturating_mul(1000));
        for change in &entry.changes {
            reader.change(&entry.id, sent_at, change);
        }
    }
    if reader.any_unverified && !reader.any_verified {
        return Err(refused());
    }
    // Nothing may have been for a channel here (a WABA-level field disparo does not act on,
    // an account_update that is no ban): the signature checked first — by a channel of a
    // number or WABA the body names, or the app secret — is what makes it authentic.
    let mut reading = reader.reading;
    reading.report.phone_number_ids.sort_unstable();
    reading.status_counts = STATUS_KINDS
        .iter()
        .zip(reader.status_counts)
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| (*k, n))
        .collect();
    Ok(reading)
}

/// What a webhook names, skimmed before its signature is checked: entry (WABA) ids and the
/// phone number ids of `messages` changes; every other value is skipped unread. Tolerant of
/// any shape: a value that is not what the skim looks for (a change whose `value` is a string,
/// an entry id sent as a number, `null`s) is read as empty or as text, never an error, so a
/// signed body is checked against its signers whatever else it holds. Hand-written visitors,
/// not an untagged enum: nothing is buffered on the ingest's hot path.
#[derive(Default)]
struct Named {
    entry: Vec<NamedEntry>,
}

#[derive(Default)]
struct NamedEntry {
    id: String,
    changes: Vec<NamedChange>,
}

#[derive(Default)]
struct NamedChange {
    phone_number_id: Option<String>,
}

/// An object the skim reads some keys of (the rest is skipped).
trait Skim: Default {
    /// The keys it reads.
    const KEYS: &'static [&'static str];
    /// Reads the value of `KEYS[key]`.
    fn read<'de, A: serde::de::MapAccess<'de>>(
        &mut self,
        key: usize,
        map: &mut A,
    ) -> Result<(), A::Error>;
}

impl Skim for Named {
    const KEYS: &'static [&'static str] = &["entry"];
    fn read<'de, A: serde::de::MapAccess<'de>>(
        &mut self,
        _: usize,
        map: &mut A,
    ) -> Result<(), A::Error> {
        self.entry = map
            .next_value::<Lenient<Vec<Lenient<NamedEntry>>>>()?
            .0
            .into_iter()
            .map(|e| e.0)
            .collect();
        Ok(())
    }
}

impl Skim for NamedEntry {
    const KEYS: &'static [&'static str] = &["id", "changes"];
    fn read<'de, A: serde::de::MapAccess<'de>>(
        &mut self,
        key: usize,
        map: &mut A,
    ) -> Result<(), A::Error> {
        match key {
            0 => self.id = map.next_value::<Lenient<Text>>()?.0 .0,
            _ => {
                let changes = map.next_value::<Lenient<Vec<Lenient<NamedChange>>>>()?.0;
                self.changes = changes.into_iter().map(|c| c.0).collect();
            }
        }
        Ok(())
    }
}

impl Skim for NamedChange {
    const KEYS: &'static [&'static str] = &["value"];
    fn read<'de, A: serde::de::MapAccess<'de>>(
        &mut self,
        _: usize,
        map: &mut A,
    ) -> Result<(), A::Error> {
        self.phone_number_id = map.next_value::<Lenient<NamedValue>>()?.0.phone_number_id;
        Ok(())
    }
}

/// A change's `value`, for its `metadata.phone_number_id`.
#[derive(Default)]
struct NamedValue {
    phone_number_id: Option<String>,
}

impl Skim for NamedValue {
    const KEYS: &'static [&'static str] = &["metadata"];
    fn read<'de, A: serde::de::MapAccess<'de>>(
        &mut self,
        _: usize,
        map: &mut A,
    ) -> Result<(), A::Error> {
        self.phone_number_id = map
            .next_value::<Lenient<NamedMetadata>>()?
            .0
            .phone_number_id;
        Ok(())
    }
}

#[derive(Default)]
struct NamedMetadata {
    phone_number_id: Option<String>,
}

impl Skim for NamedMetadata {
    const KEYS: &'static [&'static str] = &["phone_number_id"];
    fn read<'de, A: serde::de::MapAccess<'de>>(
        &mut self,
        _: usize,
        map: &mut A,
    ) -> Result<(), A::Error> {
        let id = map.next_value::<Lenient<Text>>()?.0 .0;
        self.phone_number_id = (!id.is_empty()).then_some(id);
        Ok(())
    }
}

/// Text the skim reads: a string, or a number written as text; anything else is empty.
#[derive(Default)]
struct Text(String);

/// `T` read from whatever JSON value is there: its own shape as `T` reads it, any other shape
/// as `T::default()` (skipped unread).
struct Lenient<T>(T);

/// What `Lenient` reads in a value of the shape it looks for.
trait Shape: Default {
    fn from_map<'de, A: serde::de::MapAccess<'de>>(_map: A) -> Result<Option<Self>, A::Error> {
        Ok(None)
    }
    fn from_seq<'de, A: serde::de::SeqAccess<'de>>(_seq: A) -> Result<Option<Self>, A::Error> {
        Ok(None)
    }
    fn from_text(_text: &str) -> Option<Self> {
        None
    }
}

impl<T: Skim> Shape for T {
    fn from_map<'de, A: serde::de::MapAccess<'de>>(mut map: A) -> Result<Option<Self>, A::Error> {
        let mut out = T::default();
        while let Some(key) = map.next_key::<KeyOf<T>>()? {
            match key.0 {
                Some(i) => out.read(i, &mut map)?,
                None => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(Some(out))
    }
}

impl<T: Shape> Shape for Vec<Lenient<T>> {
    fn from_seq<'de, A: serde::de::SeqAccess<'de>>(mut seq: A) -> Result<Option<Self>, A::Error> {
        let mut out = Vec::new();
        while let Some(item) = seq.next_element::<Lenient<T>>()? {
            out.push(item);
        }
        Ok(Some(out))
    }
}

impl<T> Default for Lenient<T>
where
    T: Default,
{
    fn default() -> Self {
        Lenient(T::default())
    }
}

impl Shape for Text {
    fn from_text(text: &str) -> Option<Self> {
        Some(Text(text.to_string()))
    }
}

impl<'de, T: Shape> serde::Deserialize<'de> for Lenient<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LenientVisitor(std::marker::PhantomData))
    }
}

struct LenientVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: Shape> serde::de::Visitor<'de> for LenientVisitor<T> {
    type Value = Lenient<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Ok(Lenient(T::from_map(map)?.unwrap_or_default()))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        // `from_seq` of a non-list shape reads nothing: what is left is skipped here.
        match T::from_seq(&mut seq)? {
            Some(v) => Ok(Lenient(v)),
            None => {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Lenient(T::default()))
            }
        }
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Lenient(T::from_text(v).unwrap_or_default()))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Lenient(T::from_text(&v.to_string()).unwrap_or_default()))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Lenient(T::from_text(&v.to_string()).unwrap_or_default()))
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Lenient(T::default()))
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Lenient(T::default()))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(Lenient(T::default()))
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(Lenient(T::default()))
    }
}

/// A key of a [`Skim`] object: its index in `KEYS`, `None` for any other key.
struct KeyOf<T>(Option<usize>, std::marker::PhantomData<T>);

impl<'de, T: Skim> serde::Deserialize<'de> for KeyOf<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<T: Skim> serde::de::Visitor<'_> for V<T> {
            type Value = KeyOf<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<KeyOf<T>, E> {
                Ok(KeyOf(
                    T::KEYS.iter().position(|k| *k == v),
                    std::marker::PhantomData,
                ))
            }
        }
        d.deserialize_str(V(std::marker::PhantomData))
    }
}

impl Named {
    /// The channels of its `messages` changes' numbers (the hot path: statuses, inbound).
    fn numbers<D: Directory>(&self, directory: &D) -> Vec<D::Channel> {
        self.entry
            .iter()
            .flat_map(|e| &e.changes)
            .filter_map(|c| c.phone_number_id.as_deref())
            .filter_map(|id| directory.by_phone_number_id(id))
            .collect()
    }

    /// The channels of the WABAs it names (WABA-level fields).
    fn waba_channels<D: Directory>(&self, directory: &D) -> Vec<D::Channel> {
        self.entry
            .iter()
            .flat_map(|e| directory.of_waba(&e.id))
            .collect()
    }
}

/// Checks signatures, once per distinct secret.
struct Verifier<'a> {
    body: &'a [u8],
    header: &'a str,
    fallback: Option<&'a Secret>,
    cache: HashMap<String, bool>,
}

impl Verifier<'_> {
    /// Whether `secret` (or the fallback, for a channel without its own) signs the body.
    fn verifies_with(&mut self, secret: Option<&Secret>) -> bool {
        let Some(secret) = secret.or(self.fallback) else {
            return false;
        };
        let (body, header) = (self.body, self.header);
        *self
            .cache
            .entry(secret.expose().to_string())
            .or_insert_with(|| signature::verify(secret.expose(), body, header))
    }

    fn verifies_for<D: Directory>(&mut self, directory: &D, channel: &D::Channel) -> bool {
        self.verifies_with(directory.identity(channel).app_secret)
    }

    /// Whether the deployment's app secret signs the body.
    fn fallback_signs(&self) -> bool {
        self.fallback
            .is_some_and(|s| signature::verify(s.expose(), self.body, self.header))
    }
}

/// Checks a webhook's signature before its payload is read: a per-channel receiver against
/// its channel's secret; the app-level receiver against the secrets of the channels the body
/// names (a skim that keeps only the ids) and the app secret. What none of them signs is
/// refused unread; only a signed body that is not JSON earns a 400.
fn check_signature<D: Directory>(
    directory: &D,
    routed: Option<&D::Channel>,
    verifier: &mut Verifier<'_>,
) -> Result<(), ValidationError> {
    if let Some(channel) = routed {
        return match verifier.verifies_for(directory, channel) {
            true => Ok(()),
            false => Err(refused()),
        };
    }
    match serde_json::from_slice::<Lenient<Named>>(verifier.body) {
        Ok(Lenient(named)) => {
            let signed = named
                .numbers(directory)
                .iter()
                .any(|c| verifier.verifies_for(directory, c))
                || named
                    .waba_channels(directory)
                    .iter()
                    .any(|c| verifier.verifies_for(directory, c))
                || verifier.fallback_signs();
            match signed {
                true => Ok(()),
                false => Err(refused()),
            }
        }
        Err(e) if verifier.fallback_signs() => {
            Err(ValidationError::new(INVALID_PAYLOAD, "body", e.to_string()))
        }
        Err(_) => Err(refused()),
    }
}

/// The WABA standing an `account_update` event gives, if any (PROVIDER.md §9.7).
fn standing_of(a: &AccountUpdateValue) -> Option<WabaStanding> {
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
fn standing_detail(a: &AccountUpdateValue) -> Option<String> {
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
fn preferences(u: &UserPreferencesValue) -> Vec<(String, String, bool)> {
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

/// A `messages` change's status reports (PROVIDER.md §9.2); statuses disparo does not know
/// are skipped.
fn status_reports(v: &MessagesValue, now: i64) -> Vec<StatusReport> {
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

/// A `messages` change's inbound messages for the channel of `account_id`/`channel_id`
/// (PROVIDER.md §9.1); a message without a sender is skipped.
fn inbound_messages(
    v: &MessagesValue,
    (account_id, channel_id): (i64, i64),
    now: i64,
) -> Vec<NewInbound> {
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
                account_id,
                channel_id,
                contact_phone: from.as_str().to_string(),
                contact_name: name,
                provider_message_id: m.id.clone(),
                kind: MessageKind::parse(&m.kind),
                body: m.display_text(),
                media,
                content: super::inbound::content(m),
                at: m.timestamp.parse::<i64>().map(|s| s * 1000).unwrap_or(now),
            })
        })
        .collect()
}

/// Reads a signed payload change by change into per-channel work, keeping only what a
/// channel's secret (or the app secret, as its fallback) verifies.
struct Reader<'a, D: Directory> {
    directory: &'a D,
    /// The channel of a per-channel receiver.
    routed: Option<D::Channel>,
    verifier: Verifier<'a>,
    /// When the webhook arrived, ms.
    now: i64,
    /// Some change was verified for a channel.
    any_verified: bool,
    /// Some change named a channel whose secret did not verify it.
    any_unverified: bool,
    reading: Reading<D::Channel>,
    /// Per [`STATUS_KINDS`].
    status_counts: [u64; 5],
    /// Channel id → index in `work.statuses`.
    statuses_at: HashMap<i64, usize>,
    /// Channel id → index in `work.inbound`.
    inbound_at: HashMap<i64, usize>,
}

impl<D: Directory> Reader<'_, D> {
    fn ignore(&mut self) {
        self.reading.report.ignored += 1;
    }

    /// The channel a number-level change is for: the routed channel only when it is that
    /// number, else the channel of the number.
    fn number_target(&self, phone_number_id: &str) -> Option<D::Channel> {
        match &self.routed {
            Some(r) if self.directory.identity(r).phone_number_id == phone_number_id => {
                Some(r.clone())
            }
            Some(_) => None,
            None => self.directory.by_phone_number_id(phone_number_id),
        }
    }

    /// Whether `target`'s secret verifies the body; counts the outcome.
    fn verifies(&mut self, target: &D::Channel) -> bool {
        let ok = self.verifier.verifies_for(self.directory, target);
        match ok {
            true => self.any_verified = true,
            false => self.any_unverified = true,
        }
        ok
    }

    /// The WABA's channels whose secret verifies the body, or `None` (none known: ignored;
    /// none verified: counted as unverified).
    fn waba_verified(&mut self, waba: &str) -> Option<Vec<D::Channel>> {
        let of_waba = self.directory.of_waba(waba);
        if of_waba.is_empty() {
            self.ignore();
            return None;
        }
        let verified = self.verified_of(of_waba);
        if verified.is_empty() {
            self.any_unverified = true;
            None
        } else {
            self.any_verified = true;
            Some(verified)
        }
    }

    /// Those of `channels` whose secret verifies the body (not counted).
    fn verified_of(&mut self, channels: Vec<D::Channel>) -> Vec<D::Channel> {
        let directory = self.directory;
        channels
            .into_iter()
            .filter(|c| self.verifier.verifies_for(directory, c))
            .collect()
    }

    /// Reads one change of the entry of WABA `waba` sent at `sent_at` (ms).
    fn change(&mut self, waba: &str, sent_at: i64, change: &WebhookChange) {
        let value = match change.parse() {
            Ok(v) => v,
            Err(e) => {
                let note = (change.field.clone(), e.to_string());
                self.reading.unparseable.push(note);
                self.ignore();
                return;
            }
        };
        let waba_level = match value {
            ChangeValue::BusinessCapability(c) => Some(c.tier().map(WabaChange::Capability)),
            ChangeValue::TemplateQuality(q) => Some(Some(WabaChange::TemplateQuality(q))),
            ChangeValue::TemplateCategory(c) => Some(Some(WabaChange::TemplateCategory(c))),
            ChangeValue::AccountAlert(a) => Some(Some(WabaChange::Alert(a))),
            ChangeValue::Messages(v) => return self.messages(&v),
            ChangeValue::QualityUpdate(q) => return self.quality(waba, &q, sent_at),
            ChangeValue::AccountUpdate(a) => return self.account_update(waba, &a, sent_at),
            ChangeValue::TemplateStatus(t) => return self.template_status(waba, t, sent_at),
            ChangeValue::NameUpdate(n) => return self.name_update(waba, n),
            ChangeValue::UserPreferences(u) => return self.user_preferences(&u),
            ChangeValue::Other(field) => {
                // A field disparo does not act on (yet): answered 200 once the body is signed
                // — a refusal makes the provider retry it for days and can disable the app's
                // webhook (issue 16) — logged and counted by the caller.
                self.reading.not_acted_on.push(field);
                return self.ignore();
            }
        };
        match waba_level {
            Some(Some(c)) => {
                if let Some(v) = self.waba_verified(waba) {
                    self.reading
                        .work
                        .waba_changes
                        .push((waba.to_string(), c, v));
                }
            }
            // A capability update without a limit: nothing to do.
            _ => self.ignore(),
        }
    }

    /// A `messages` change: its statuses and inbound messages, for the verified number.
    fn messages(&mut self, v: &MessagesValue) {
        let named = &mut self.reading.report.phone_number_ids;
        if !named.contains(&v.metadata.phone_number_id) {
            named.push(v.metadata.phone_number_id.clone());
        }
        let Some(target) = self.number_target(&v.metadata.phone_number_id) else {
            return self.ignore();
        };
        if !self.verifies(&target) {
            return;
        }
        for s in &v.statuses {
            if let Some(i) = STATUS_KINDS.iter().position(|k| *k == s.status) {
                self.status_counts[i] += 1;
            }
        }
        let identity = self.directory.identity(&target);
        let ids = (identity.account_id, identity.channel_id);
        let statuses = status_reports(v, self.now);
        let inbound = inbound_messages(v, ids, self.now);
        let work = &mut self.reading.work;
        if !statuses.is_empty() {
            let i = *self.statuses_at.entry(ids.1).or_insert_with(|| {
                work.statuses.push((target.clone(), Vec::new()));
                work.statuses.len() - 1
            });
            work.statuses[i].1.extend(statuses);
        }
        if !inbound.is_empty() {
            let i = *self.inbound_at.entry(ids.1).or_insert_with(|| {
                work.inbound.push((target.clone(), Vec::new()));
                work.inbound.len() - 1
            });
            work.inbound[i].1.extend(inbound);
        }
    }

    /// `phone_number_quality_update`: for each verified number of the WABA with that phone.
    fn quality(&mut self, waba: &str, q: &QualityUpdateValue, sent_at: i64) {
        let phone = Phone::from_provider_display(&q.display_phone_number);
        let targets = self.directory.by_waba_and_phone(waba, phone.as_str());
        if targets.is_empty() {
            self.ignore();
        }
        let quality = match (q.quality_rating.as_deref(), q.event.as_str()) {
            (Some(r), _) => Some(Quality::parse(r)),
            (None, "FLAGGED") => Some(Quality::Red),
            _ => None,
        };
        for channel in targets {
            if self.verifies(&channel) {
                self.reading.work.quality.push(QualityChange {
                    channel,
                    quality,
                    tier: q.current_limit.clone(),
                    at: sent_at,
                });
            }
        }
    }

    /// `account_update`: the business verified, or the WABA's standing for its verified
    /// channels.
    fn account_update(&mut self, waba: &str, a: &AccountUpdateValue, sent_at: i64) {
        if a.event == "VERIFIED_ACCOUNT" {
            if let Some(v) = self.waba_verified(waba) {
                let change = (waba.to_string(), WabaChange::Verified, v);
                self.reading.work.waba_changes.push(change);
            }
            return;
        }
        let verified = self.verified_of(self.directory.of_waba(waba));
        match (standing_of(a), verified.is_empty()) {
            (Some(standing), false) => {
                self.any_verified = true;
                self.reading.work.standings.push(StandingChange {
                    waba_id: waba.to_string(),
                    standing,
                    detail: standing_detail(a),
                    channels: verified,
                    at: sent_at,
                });
            }
            (None, _) => {
                // An event disparo does not act on (PARTNER_ADDED…): logged and counted like
                // an unknown field.
                let note = format!("account_update {}", a.event);
                self.reading.not_acted_on.push(note);
                self.ignore();
            }
            (Some(_), true) => self.ignore(),
        }
    }

    /// `message_template_status_update`: templates belong to the WABA, so any of its
    /// channels' secrets verifies it.
    fn template_status(&mut self, waba: &str, value: TemplateStatusValue, sent_at: i64) {
        let of_waba = self.directory.of_waba(waba);
        let empty = of_waba.is_empty();
        let channels = self.verified_of(of_waba);
        if !channels.is_empty() {
            self.any_verified = true;
            self.reading.work.template_updates.push(TemplateUpdate {
                waba_id: waba.to_string(),
                value,
                channels,
                at: sent_at,
            });
        } else if empty {
            self.ignore();
        } else {
            self.any_unverified = true;
        }
    }

    /// `phone_number_name_update`: an approved name for each verified number with that phone.
    fn name_update(&mut self, waba: &str, n: NameUpdateValue) {
        let phone = Phone::from_provider_display(&n.display_phone_number);
        let targets = self.directory.by_waba_and_phone(waba, phone.as_str());
        let name = n
            .requested_verified_name
            .filter(|_| n.decision.eq_ignore_ascii_case("APPROVED"));
        if targets.is_empty() {
            self.ignore();
        }
        for t in targets {
            if !self.verifies(&t) {
                continue;
            }
            match &name {
                Some(name) => {
                    let change = (t, NumberChange::Name(name.clone()));
                    self.reading.work.number_changes.push(change);
                }
                // A rejected or deferred name changes nothing here.
                None => self.ignore(),
            }
        }
    }

    /// `user_preferences`: a contact's marketing stop or resume, for the verified number.
    fn user_preferences(&mut self, u: &UserPreferencesValue) {
        let Some(target) = self.number_target(&u.metadata.phone_number_id) else {
            return self.ignore();
        };
        if self.verifies(&target) {
            let change = (target, NumberChange::Preferences(preferences(u)));
            self.reading.work.number_changes.push(change);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider_webhook::Identity;
    use serde_json::json;

    /// A channel: (account, channel id, phone number id, WABA, phone digits, secret).
    type Fake = (i64, i64, String, String, String, Option<Secret>);

    struct Channels(Vec<Fake>);

    impl Directory for Channels {
        type Channel = Fake;
        fn by_phone_number_id(&self, id: &str) -> Option<Fake> {
            self.0.iter().find(|c| c.2 == id).cloned()
        }
        fn of_waba(&self, waba: &str) -> Vec<Fake> {
            self.0.iter().filter(|c| c.3 == waba).cloned().collect()
        }
        fn by_waba_and_phone(&self, waba: &str, phone: &str) -> Vec<Fake> {
            let of = self.0.iter().filter(|c| c.3 == waba && c.4 == phone);
            of.cloned().collect()
        }
        fn identity<'a>(&self, c: &'a Fake) -> Identity<'a> {
            Identity {
                account_id: c.0,
                channel_id: c.1,
                phone_number_id: &c.2,
                app_secret: c.5.as_ref(),
            }
        }
    }

    fn channels() -> Channels {
        let fake = |account, id, pnid: &str, waba: &str, phone: &str, secret: Option<&str>| {
            let s = secret.map(|s| Secret::new(s.to_string()));
            (account, id, pnid.into(), waba.into(), phone.into(), s)
        };
        Channels(vec![
            fake(1, 10, "111", "W1", "5511900000001", Some("secret-a")),
            fake(2, 20, "222", "W2", "5511900000002", Some("secret-b")),
            fake(3, 30, "333", "W3", "5511900000003", None),
        ])
    }

    fn messages(pnid: &str, value: serde_json::Value) -> serde_json::Value {
        let mut value = value;
        value["messaging_product"] = json!("whatsapp");
        value["metadata"] = json!({"display_phone_number": "x", "phone_number_id": pnid});
        json!({"field": "messages", "value": value})
    }

    fn body(entries: Vec<(&str, Vec<serde_json::Value>)>) -> Vec<u8> {
        let entry: Vec<_> = entries
            .into_iter()
            .map(|(waba, changes)| json!({"id": waba, "time": 1_700_000_000, "changes": changes}))
            .collect();
        json!({"object": "whatsapp_business_account", "entry": entry})
            .to_string()
            .into_bytes()
    }

    fn status(id: &str, status: &str, callback: Option<&str>) -> serde_json::Value {
        json!({"id": id, "status": status, "timestamp": "1700000001",
               "recipient_id": "5511988887777", "biz_opaque_callback_data": callback})
    }

    fn read_as(body: &[u8], secret: &str) -> Result<Reading<Fake>, ValidationError> {
        let header = signature::sign(secret, body);
        let fallback = Secret::new("app-secret".to_string());
        read(&channels(), None, body, &header, Some(&fallback), 5)
    }

    #[test]
    fn statuses_are_taken_for_the_number_whose_secret_signed() {
        let change = messages(
            "111",
            json!({"statuses": [status("wamid.1", "delivered", Some("dsp:42")),
                                status("wamid.2", "read", Some("other:1")),
                                status("wamid.3", "warning", None)]}),
        );
        let b = body(vec![("W1", vec![change])]);
        let r = read_as(&b, "secret-a").unwrap();
        assert_eq!(r.work.statuses.len(), 1);
        let (channel, reports) = &r.work.statuses[0];
        assert_eq!(channel.1, 10);
        assert_eq!(reports.len(), 2, "an unknown status is skipped");
        assert_eq!(reports[0].callback_message_id, Some(42));
        assert_eq!(reports[0].at, 1_700_000_001_000);
        assert_eq!(reports[1].callback_message_id, None, "not disparo's prefix");
        assert_eq!(r.status_counts, vec![("delivered", 1), ("read", 1)]);
        let e = read_as(&b, "secret-b").unwrap_err();
        assert_eq!(e.code, INVALID_SIGNATURE);
    }

    #[test]
    fn the_skim_reads_any_shape_and_still_finds_the_signer() {
        // An entry id as a number, changes whose value is a string, null, a list, metadata
        // of the wrong shape, and one real `messages` change of number 111 (secret-a): the
        // body is checked against secret-a, not refused for its shapes.
        let good = messages("111", json!({"statuses": [status("w.9", "sent", None)]}));
        let body = json!({"object": "whatsapp_business_account", "entry": [
            {"id": 12345, "time": 1_700_000_000, "changes": [
                {"field": "history", "value": "oops"},
                {"field": "history", "value": null},
                {"field": "history", "value": [1, {"metadata": 2}]},
                {"field": "history", "value": {"metadata": 7}},
                {"field": "history", "value": {"metadata": {"phone_number_id": null}}},
            ]},
            {"id": "W1", "time": 1_700_000_000, "changes": [good]},
            "not an entry",
        ]})
        .to_string()
        .into_bytes();
        let header = signature::sign("secret-a", &body);
        let named = match serde_json::from_slice::<Lenient<Named>>(&body) {
            Ok(Lenient(n)) => n,
            Err(e) => panic!("the skim reads it: {e}"),
        };
        assert_eq!(named.entry[0].id, "12345");
        assert_eq!(named.numbers(&channels()).len(), 1, "number 111, once");
        let mut verifier = Verifier {
            body: &body,
            header: &header,
            fallback: None,
            cache: HashMap::new(),
        };
        assert!(check_signature(&channels(), None, &mut verifier).is_ok());
        let wrong = signature::sign("secret-b", &body);
        let mut verifier = Verifier {
            body: &body,
            header: &wrong,
            fallback: None,
            cache: HashMap::new(),
        };
        assert_eq!(
            check_signature(&channels(), None, &mut verifier)
                .unwrap_err()
                .code,
            INVALID_SIGNATURE
        );
    }

    #[test]
    fn a_change_for_another_secrets_number_is_not_taken() {
        let inbound = json!({"contacts": [{"profile": {"name": "Ana"}, "wa_id": "5511988887777"}],
            "messages": [{"from": "5511988887777", "id": "wamid.in", "timestamp": "1700000002",
                          "type": "text", "text": {"body": "oi"}}]});
        let b = body(vec![
            ("W1", vec![messages("111", inbound.clone())]),
            ("W2", vec![messages("222", inbound)]),
        ]);
        let r = read_as(&b, "secret-a").unwrap();
        assert_eq!(r.work.inbound.len(), 1, "only the signer's number");
        let m = &r.work.inbound[0].1[0];
        assert_eq!((m.account_id, m.channel_id), (1, 10));
        assert_eq!(m.contact_name.as_deref(), Some("Ana"));
        assert_eq!(m.body.as_deref(), Some("oi"));
        assert_eq!(m.at, 1_700_000_002_000);
    }

    #[test]
    fn the_deployment_secret_signs_for_a_channel_without_its_own() {
        let b = body(vec![(
            "W3",
            vec![messages(
                "333",
                json!({"statuses": [status("w", "sent", None)]}),
            )],
        )]);
        assert_eq!(read_as(&b, "app-secret").unwrap().work.statuses.len(), 1);
        assert_eq!(read_as(&b, "secret-a").unwrap_err().code, INVALID_SIGNATURE);
    }

    /// The report names every number the `messages` changes named, once each, in order,
    /// the unknown one and the one whose secret did not sign included: the forwarding
    /// receiver looks their clients up by it (D-145).
    #[test]
    fn the_report_names_the_numbers_of_the_messages_changes() {
        let statuses = || json!({"statuses": [status("w", "delivered", None)]});
        let b = body(vec![
            ("W2", vec![messages("222", statuses())]),
            (
                "W1",
                vec![
                    messages("111", statuses()),
                    messages("999", statuses()),
                    messages("111", statuses()),
                ],
            ),
        ]);
        let r = read_as(&b, "secret-a").unwrap();
        assert_eq!(r.work.statuses.len(), 1, "only 111's secret signed");
        assert_eq!(r.report.phone_number_ids, vec!["111", "222", "999"]);
    }

    #[test]
    fn signed_fields_not_acted_on_are_ignored_not_refused() {
        let b = body(vec![(
            "W1",
            vec![
                json!({"field": "history", "value": {}}),
                json!({"field": "account_update", "value": {"event": "PARTNER_ADDED"}}),
                json!({"field": "phone_number_quality_update", "value": {"event": 5}}),
            ],
        )]);
        let r = read_as(&b, "secret-a").unwrap();
        assert_eq!(r.report.ignored, 3);
        assert_eq!(
            r.not_acted_on,
            vec!["history", "account_update PARTNER_ADDED"]
        );
        assert_eq!(r.unparseable.len(), 1);
    }

    #[test]
    fn waba_level_changes_carry_the_verified_channels_and_the_entry_time() {
        let quality = json!({"field": "phone_number_quality_update", "value": {
            "display_phone_number": "+55 11 90000-0001", "event": "FLAGGED",
            "current_limit": "TIER_1K"}});
        let ban = json!({"field": "account_update", "value": {"event": "DISABLED_UPDATE",
            "ban_info": {"waba_ban_state": "DISABLE"}}});
        let b = body(vec![("W1", vec![quality, ban])]);
        let r = read_as(&b, "secret-a").unwrap();
        let q = &r.work.quality[0];
        assert_eq!(q.quality, Some(Quality::Red), "FLAGGED without a rating");
        assert_eq!(
            (q.tier.as_deref(), q.at),
            (Some("TIER_1K"), 1_700_000_000_000)
        );
        let s = &r.work.standings[0];
        assert_eq!(s.standing, WabaStanding::Banned);
        assert_eq!(s.detail.as_deref(), Some("DISABLE"));
        assert_eq!(s.channels.len(), 1);
    }

    #[test]
    fn a_routed_receiver_takes_only_its_own_number() {
        let dir = channels();
        let b = body(vec![(
            "W2",
            vec![messages(
                "222",
                json!({"statuses": [status("w", "sent", None)]}),
            )],
        )]);
        let header = signature::sign("secret-a", &b);
        let r = read(&dir, Some(dir.0[0].clone()), &b, &header, None, 5).unwrap();
        assert!(r.work.statuses.is_empty());
        assert_eq!(r.report.ignored, 1);
        let e = read(&dir, Some(dir.0[1].clone()), &b, &header, None, 5).unwrap_err();
        assert_eq!(
            e.code, INVALID_SIGNATURE,
            "number 222's receiver wants its secret"
        );
    }

    #[test]
    fn only_a_signed_body_that_is_not_json_earns_a_400() {
        assert_eq!(
            read_as(b"{nope", "app-secret").unwrap_err().code,
            INVALID_PAYLOAD
        );
        assert_eq!(
            read_as(b"{nope", "secret-a").unwrap_err().code,
            INVALID_SIGNATURE
        );
        let e = read(&channels(), None, b"{}", "sha256=zz", None, 5).unwrap_err();
        assert_eq!(e.code, INVALID_SIGNATURE);
    }

    /// The real webhook payloads in `provider/testdata` (copied from the provider's
    /// documentation), their ids pointed at the fake channel 111 of WABA W1.
    fn corpus() -> Vec<Vec<u8>> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../provider/testdata");
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if !name.starts_with("webhook_") || name.contains("signature_vector") {
                continue;
            }
            let mut v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            for e in v["entry"].as_array_mut().into_iter().flatten() {
                e["id"] = json!("W1");
                for c in e["changes"].as_array_mut().into_iter().flatten() {
                    if c["value"]["metadata"].is_object() {
                        c["value"]["metadata"]["phone_number_id"] = json!("111");
                    }
                }
            }
            out.push(serde_json::to_vec(&v).unwrap());
        }
        assert!(out.len() >= 8, "the corpus is in provider/testdata");
        out
    }

    #[test]
    fn every_real_payload_is_read() {
        for body in corpus() {
            let r = read_as(&body, "secret-a");
            assert!(
                r.is_ok(),
                "{}: {:?}",
                String::from_utf8_lossy(&body),
                r.err()
            );
        }
    }

    proptest::proptest! {
        /// Fuzzing (issue 53): the real payloads, signed, with bytes overwritten, cut short or
        /// spliced together, are read (messages with their content objects) or refused as
        /// invalid — never a panic.
        #[test]
        fn mutated_real_payloads_are_read_or_refused(
            pick in 0usize..64,
            other in 0usize..64,
            edits in proptest::collection::vec((0usize..4096, proptest::prelude::any::<u8>()), 0..8),
            cut in proptest::option::of(0usize..4096),
            splice in proptest::prelude::any::<bool>(),
        ) {
            let corpus = corpus();
            let mut body = corpus[pick % corpus.len()].clone();
            if splice {
                let tail = &corpus[other % corpus.len()];
                let at = body.len() / 2;
                body.truncate(at);
                body.extend_from_slice(&tail[tail.len() / 2..]);
            }
            for (at, byte) in edits {
                if !body.is_empty() {
                    let i = at % body.len();
                    body[i] = byte;
                }
            }
            if let Some(n) = cut {
                body.truncate(n.min(body.len()));
            }
            let _ = read_as(&body, "secret-a");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Any bytes, signed or not, are read or refused: never a panic, and an unsigned
        /// body is never taken.
        #[test]
        fn any_body_is_read_or_refused(bytes in proptest::collection::vec(0u8..=255, 0..512),
                                       signed in proptest::bool::ANY) {
            let header = if signed { signature::sign("secret-a", &bytes) } else { "sha256=00".into() };
            let r = read(&channels(), None, &bytes, &header, None, 5);
            if !signed {
                proptest::prop_assert!(r.is_err());
            }
        }

        /// Payload-shaped bodies with arbitrary statuses: every status taken is one the body
        /// carried, for the number that signed.
        #[test]
        fn statuses_taken_are_the_bodys(kinds in proptest::collection::vec(
            proptest::sample::select(vec!["sent", "delivered", "read", "failed", "x", ""]), 0..20)) {
            let statuses: Vec<_> = kinds.iter().enumerate()
                .map(|(i, k)| status(&format!("w{i}"), k, Some(&format!("dsp:{i}"))))
                .collect();
            let b = body(vec![("W1", vec![messages("111", json!({"statuses": statuses}))])]);
            let r = read_as(&b, "secret-a").unwrap();
            let taken: Vec<_> = r.work.statuses.iter().flat_map(|(_, s)| s).collect();
            let known = kinds.iter().filter(|k| ProviderStatus::parse(k).is_some()).count();
            proptest::prop_assert_eq!(taken.len(), known);
            for s in taken {
                let i: usize = s.provider_message_id[1..].parse().unwrap();
                proptest::prop_assert_eq!(s.callback_message_id, Some(i as i64));
            }
        }
    }
}
