//! Provider webhooks in, the pure half (issue 51): the payload's wire types ([`wire`]), the
//! signature rule ([`signature`]) and [`read`], which checks a body's signature against the
//! secrets of the channels it names and turns each verified change into the work it asks for,
//! per channel. The actors apply that work (writers, channel actors); nothing here does I/O or
//! reads a clock.
//!
//! Which channels exist is the caller's: it answers through [`Directory`] (the running
//! channels, in the actors). A change is taken only for a channel whose app secret (or the
//! deployment's, as its fallback) signs the body (PROVIDER.md §8.2, issue 15).

pub mod inbound;
mod read;
pub mod signature;
pub mod wire;

pub use read::read;

use crate::channel::{Quality, WabaStanding};
use crate::message::{MessageKind, ProviderStatus};
use crate::Secret;

/// The prefix of the `biz_opaque_callback_data` disparo sets on each send: `dsp:<message id>`;
/// a status report carrying it finds its message before the send's answer is recorded.
pub const CALLBACK_PREFIX: &str = "dsp:";

/// [`crate::ValidationError::code`] of a body no candidate secret signs (answered 401, nothing
/// recorded).
pub const INVALID_SIGNATURE: &str = "assinatura_invalida";

/// [`crate::ValidationError::code`] of a signed body that is not a provider payload (400).
pub const INVALID_PAYLOAD: &str = "payload_invalido";

/// An inbound message to record.
#[derive(Debug, Clone, PartialEq)]
pub struct NewInbound {
    /// Owning account.
    pub account_id: i64,
    /// Channel.
    pub channel_id: i64,
    /// Sender's phone digits.
    pub contact_phone: String,
    /// Sender's profile name.
    pub contact_name: Option<String>,
    /// Provider `wamid` (deduplicates the provider's retries).
    pub provider_message_id: String,
    /// Payload kind.
    pub kind: MessageKind,
    /// Text, caption or button text.
    pub body: Option<String>,
    /// Media descriptor (provider media id, mime type…).
    pub media: Option<serde_json::Value>,
    /// The whole message, typed per kind ([`inbound::content`]; issue 48).
    pub content: serde_json::Value,
    /// When the contact sent it, ms (opens the 24-hour window).
    pub at: i64,
}

/// A status the provider reported for an outbound message (PROVIDER.md §9.2).
#[derive(Debug, Clone, PartialEq)]
pub struct StatusReport {
    /// The `wamid`.
    pub provider_message_id: String,
    /// disparo's message id from `biz_opaque_callback_data`, when the send carried it.
    pub callback_message_id: Option<i64>,
    /// The status.
    pub status: ProviderStatus,
    /// When it happened, ms.
    pub at: i64,
    /// For `failed`: code, title, details.
    pub error: Option<(i64, String, Option<String>)>,
}

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
    /// The phone number ids its `messages` changes named (`value.metadata.phone_number_id`;
    /// distinct, sorted), whether or not the number is known here or its change verified:
    /// what the forwarding receiver looks the numbers' clients up by for a call of status
    /// reports only, instead of reading the body a second time (D-145).
    pub phone_number_ids: Vec<String>,
}

/// What the ingest needs to know of a channel.
#[derive(Debug, Clone, Copy)]
pub struct Identity<'a> {
    /// Owning account.
    pub account_id: i64,
    /// disparo's channel id.
    pub channel_id: i64,
    /// The provider's phone number id.
    pub phone_number_id: &'a str,
    /// The app secret that signs its webhooks, when it has its own.
    pub app_secret: Option<&'a Secret>,
}

/// The channels a webhook may concern, as the caller knows them (the running channels).
pub trait Directory {
    /// A channel as the caller holds it (e.g. a handle to its actor).
    type Channel: Clone;
    /// The channel of a provider phone number id.
    fn by_phone_number_id(&self, phone_number_id: &str) -> Option<Self::Channel>;
    /// The channels of a WABA.
    fn of_waba(&self, waba_id: &str) -> Vec<Self::Channel>;
    /// The channels of a WABA with that phone (digits).
    fn by_waba_and_phone(&self, waba_id: &str, phone: &str) -> Vec<Self::Channel>;
    /// What the ingest needs of a channel.
    fn identity<'a>(&self, channel: &'a Self::Channel) -> Identity<'a>;
}

/// A WABA-level field disparo acts on (D-074).
#[derive(Debug, Clone, PartialEq)]
pub enum WabaChange {
    /// `business_capability_update`: the portfolio's tier.
    Capability(String),
    /// `message_template_quality_update`.
    TemplateQuality(wire::TemplateQualityValue),
    /// `template_category_update`.
    TemplateCategory(wire::TemplateCategoryValue),
    /// `account_alerts`.
    Alert(wire::AccountAlertValue),
    /// `account_update` `VERIFIED_ACCOUNT`: the business is verified.
    Verified,
}

/// A number-level field disparo acts on (D-074).
#[derive(Debug, Clone, PartialEq)]
pub enum NumberChange {
    /// `phone_number_name_update` approved: the new verified name.
    Name(String),
    /// `user_preferences`: `(contact phone, category, stop)`.
    Preferences(Vec<(String, String, bool)>),
}

/// A number's quality change (`phone_number_quality_update`, PROVIDER.md §9.5).
#[derive(Debug, Clone)]
pub struct QualityChange<C> {
    /// The number's channel (its secret verified the change).
    pub channel: C,
    /// The new quality, when the event carried one (`FLAGGED` without a rating is RED).
    pub quality: Option<Quality>,
    /// The new tier (`current_limit`), when the event carried one.
    pub tier: Option<String>,
    /// When the provider sent it (the entry's `time`, ms; the arrival when absent).
    pub at: i64,
}

/// A WABA's new standing (`account_update`, PROVIDER.md §9.7).
#[derive(Debug, Clone)]
pub struct StandingChange<C> {
    /// The provider's WABA id.
    pub waba_id: String,
    /// The new standing.
    pub standing: WabaStanding,
    /// The ban state, the violation's type or the restrictions.
    pub detail: Option<String>,
    /// The WABA's channels whose secret verified it.
    pub channels: Vec<C>,
    /// When the provider sent it, ms.
    pub at: i64,
}

/// A template's new status for a WABA (`message_template_status_update`).
#[derive(Debug, Clone)]
pub struct TemplateUpdate<C> {
    /// The provider's WABA id.
    pub waba_id: String,
    /// The change as the provider sent it.
    pub value: wire::TemplateStatusValue,
    /// The WABA's channels whose secret verified it (only their rows change).
    pub channels: Vec<C>,
    /// When the provider sent it, ms.
    pub at: i64,
}

/// What a verified webhook asks for, per channel, in the order the body gave it.
#[derive(Debug, Clone)]
pub struct Work<C> {
    /// Status reports per channel.
    pub statuses: Vec<(C, Vec<StatusReport>)>,
    /// Inbound messages per channel.
    pub inbound: Vec<(C, Vec<NewInbound>)>,
    /// Quality changes.
    pub quality: Vec<QualityChange<C>>,
    /// WABA standings.
    pub standings: Vec<StandingChange<C>>,
    /// Template states.
    pub template_updates: Vec<TemplateUpdate<C>>,
    /// WABA-level changes: WABA id, change, its channels whose secret verified it.
    pub waba_changes: Vec<(String, WabaChange, Vec<C>)>,
    /// Number-level changes, for the verified channel.
    pub number_changes: Vec<(C, NumberChange)>,
}

impl<C> Default for Work<C> {
    fn default() -> Self {
        Self {
            statuses: Vec::new(),
            inbound: Vec::new(),
            quality: Vec::new(),
            standings: Vec::new(),
            template_updates: Vec::new(),
            waba_changes: Vec::new(),
            number_changes: Vec::new(),
        }
    }
}

/// A verified webhook, read: the work it asks for, the report so far (what was ignored), and
/// what the caller logs and counts.
#[derive(Debug, Clone)]
pub struct Reading<C> {
    /// What the body asks for.
    pub work: Work<C>,
    /// `ignored` counted; the rest is filled as the work is applied.
    pub report: IngestReport,
    /// Status reports per provider status (`sent`, `delivered`, `read`, `failed`, `played`),
    /// for `disparo_message_statuses_total`.
    pub status_counts: Vec<(&'static str, u64)>,
    /// Signed changes disparo does not act on (yet): the field, or `account_update <event>`.
    pub not_acted_on: Vec<String>,
    /// Changes of a known field whose value did not parse: field and parse error.
    pub unparseable: Vec<(String, String)>,
}
