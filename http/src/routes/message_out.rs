//! How a message reads on the wire: the send result (`POST /messages`, the public sender, MCP,
//! the panel's test send) and the message (`GET /messages/{id}`, lists). One set of types for
//! every surface that shows a message.

use serde::Serialize;
use serde_json::Value;
use storage::messages::MessageRecord;

/// The send result's `header` (issue 17): a header image's link or a library template's text
/// header.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum HeaderOut {
    /// A header image: `{type: "image", link}`.
    Image {
        /// The image's public URL.
        link: String,
    },
    /// A text header: `{type: "text", text}`.
    Text {
        /// The header's text as sent.
        text: String,
    },
}

/// The header of `m`, null for a template sent by name whose layout disparo does not hold, or
/// a message without one.
fn header_of(m: &MessageRecord) -> Option<HeaderOut> {
    let p = m.params.as_ref();
    let field = |k: &str| {
        p.and_then(|p| p.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    match (field("header_image"), field("header_text")) {
        (Some(link), _) => Some(HeaderOut::Image { link }),
        (None, Some(text)) => Some(HeaderOut::Text { text }),
        _ => None,
    }
}

/// The template a message sent: `{name, language}`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TemplateRefOut {
    /// The provider's template name.
    pub name: String,
    /// Its locale (`pt_BR`…).
    pub language: Option<String>,
}

/// The send result ("Message" › send result): what `POST /messages` (and group and sender
/// sends) answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SendResultOut {
    /// Id.
    pub id: i64,
    /// The conversation (one per contact and number).
    pub conversation_id: i64,
    /// The contact, digits with country code.
    pub to: String,
    /// `text`, `template`, `image`…
    #[serde(rename = "type")]
    pub kind: engine::message::MessageKind,
    /// The text, or a template's `preview_text`.
    pub text: Option<String>,
    /// The number that sent it.
    pub channel_id: i64,
    /// The provider's message id (`message.ack` events refer to it); null until it answers.
    pub provider_message_id: Option<String>,
    /// Where it stands.
    pub status: engine::message::MessageStatus,
    /// The template's header as sent.
    pub header: Option<HeaderOut>,
    /// Text kept for display of a template message.
    pub preview_text: Option<String>,
    /// The template, for a template message.
    pub template: Option<TemplateRefOut>,
    /// When it was written (ISO 8601, UTC).
    pub created_at: String,
}

impl From<&MessageRecord> for SendResultOut {
    fn from(m: &MessageRecord) -> Self {
        SendResultOut {
            id: m.id,
            conversation_id: m.conversation_id,
            to: m.contact_phone.clone(),
            kind: m.kind,
            text: m.body.clone().or_else(|| m.preview_text.clone()),
            channel_id: m.channel_id,
            provider_message_id: m.provider_message_id.clone(),
            status: m.status,
            header: header_of(m),
            preview_text: m.preview_text.clone(),
            template: m.template_name.as_ref().map(|n| TemplateRefOut {
                name: n.clone(),
                language: m.template_language.clone(),
            }),
            created_at: actors::time::iso(m.created_at),
        }
    }
}

/// The send result as JSON ([`SendResultOut`]).
pub fn send_result(m: &MessageRecord) -> Value {
    serde_json::to_value(SendResultOut::from(m)).unwrap_or_default()
}

/// The provider's error on a failed message.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct MessageErrorOut {
    /// The provider's error code (`131049`…), when it gave one.
    pub code: Option<i64>,
    /// Its title.
    pub title: Option<String>,
    /// Its details.
    pub details: Option<String>,
}

/// A message with its delivery timeline (decision D-007: the spec shows no read endpoint).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct MessageOut {
    /// The send result's fields.
    #[serde(flatten)]
    pub message: SendResultOut,
    /// `out` (sent by the account) or `in` (received from the contact).
    pub direction: engine::message::Direction,
    /// When the provider accepted it (ISO 8601).
    pub sent_at: Option<String>,
    /// When it reached the handset.
    pub delivered_at: Option<String>,
    /// When the contact read it.
    pub read_at: Option<String>,
    /// When it failed.
    pub failed_at: Option<String>,
    /// The provider's error, on a failure.
    pub error: Option<MessageErrorOut>,
    /// A received message's whole content, as `message.received` carried it: `type` (the
    /// provider's kind: `text`, `image`, `location`, `contacts`, `interactive`, `button`,
    /// `reaction`, `order`, `system`, `unsupported`…), that kind's object in the provider's
    /// field names, `context` (the quoted message: `provider_message_id`, `message_id` when it
    /// is ours, `forwarded`, `frequently_forwarded`, `referred_product`), `referral` (the ad
    /// the conversation started from), `errors`, and `raw` with whatever none of them models.
    /// Absent on sent messages and on those received before it was kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<engine::provider_webhook::inbound::InboundContent>)]
    pub content: Option<Value>,
}

impl From<&MessageRecord> for MessageOut {
    fn from(m: &MessageRecord) -> Self {
        let iso = |t: Option<i64>| t.map(actors::time::iso);
        MessageOut {
            message: SendResultOut::from(m),
            direction: m.direction,
            sent_at: iso(m.sent_at),
            delivered_at: iso(m.delivered_at),
            read_at: iso(m.read_at),
            failed_at: iso(m.failed_at),
            error: (m.error_code.is_some() || m.error_title.is_some()).then(|| MessageErrorOut {
                code: m.error_code,
                title: m.error_title.clone(),
                details: m.error_detail.clone(),
            }),
            content: m.content.clone(),
        }
    }
}
