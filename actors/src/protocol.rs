//! The actors' protocol: the messages a [`crate::channel::ChannelActor`] and the campaign
//! supervisor take, and what travels with them (a send request, a campaign's batch, a
//! number's snapshot). The modules that send these messages depend on this one, not on the
//! actors that handle them, so no module of the crate imports another in a circle (issue 51).

use crate::error::ActorError;
use engine::channel::{Health, HealthCode, Quality, WabaStanding};
use engine::guardrail::Guardrails;
use engine::phone::Phone;
use provider::ErrorKind;
use ractor::RpcReplyPort;
use std::sync::Arc;
use storage::channels::ChannelRecord;
use storage::messages::{MessageRecord, NewInbound, StatusReport};

/// The prefix of `biz_opaque_callback_data` values disparo sets (defined where the ingest reads it).
pub use engine::provider_webhook::CALLBACK_PREFIX;

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
    /// A library template (by id, or by name and language with `vars`); the runtime renders
    /// it into [`SendContent::Template`]: its var_map over the recipient's columns, or the
    /// parameters as given, under the name of its version on the number.
    Library {
        /// The template.
        choice: engine::send::TemplateChoice,
        /// Its values.
        values: engine::send::TemplateValues,
    },
    /// A downloaded, checked file: uploaded to the provider, then sent by media id.
    MediaFile {
        /// The file.
        file: crate::media::FetchedMedia,
        /// Caption.
        caption: Option<String>,
    },
}

/// The locale of a template named without one (spec send `template.language`).
pub const DEFAULT_LANGUAGE: &str = "pt_BR";

impl SendContent {
    /// The content of a checked `template` object (issue 55, D-127): a template by name with
    /// its parameters is sent as given (completed from the library when it holds it, in
    /// [`DEFAULT_LANGUAGE`] unless another is named); anything else is a library template
    /// the runtime resolves.
    pub fn of_template(r: engine::send::TemplateRef) -> SendContent {
        use engine::send::{TemplateChoice, TemplateValues};
        match (r.choice, r.values) {
            (TemplateChoice::Name { name, language }, TemplateValues::Given(given)) => {
                SendContent::Template {
                    name,
                    language: language.unwrap_or_else(|| DEFAULT_LANGUAGE.to_string()),
                    given,
                    layout: None,
                    header_text: None,
                }
            }
            (choice, values) => SendContent::Library { choice, values },
        }
    }
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
    /// The span of the request that asked for it, so the number's actor and the send task
    /// log under its request id (issue 49 item 6). Set by [`crate::Runtime::send`].
    pub span: tracing::Span,
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

/// Messages of a [`crate::channel::ChannelActor`].
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
    /// The number's template flags: whether a template meant for it is not usable on it
    /// (health `template_ausente`; issue 17, D-126:
    /// [`storage::Store::numbers_missing_templates`]),
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

pub use engine::channel::machine::GuardrailView;

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
    pub gate: CampaignGate,
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
    /// header media; `Err` with the reason (pt-BR) when the row's stored variables are
    /// unreadable or lack a value the template needs: the recipient fails without a provider
    /// call (issue 51).
    pub given: Result<engine::template::Given, String>,
}

/// A campaign's gate (issue 20): open (`true`) while it may call the provider. Each send
/// holds a read lock for its call; halting takes the write lock (so it waits for the calls
/// under way) and closes it, so no call starts after a halt answered.
pub type CampaignGate = Arc<tokio::sync::RwLock<bool>>;

/// Messages of the campaign supervisor.
#[derive(Debug)]
pub enum CampaignSupervisorMsg {
    /// Starts the actor of a running campaign `(campaign_id, account_id)` (no-op when it
    /// runs); replies when it has started.
    Start(i64, i64, RpcReplyPort<Result<(), String>>),
}
