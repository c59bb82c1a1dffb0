//! The provider's webhook envelope and its `value` kinds (PROVIDER.md §8.3, §9), as the
//! provider posts them. Optional fields stay optional: real payloads omit many of them, and
//! unknown fields are ignored, never an error. `provider::wire` re-exports these types.

use serde::{Deserialize, Deserializer, Serialize};

/// Graph ids and timestamps arrive as strings in most places and as JSON integers in a few
/// (`message_template_id`, `expiration_timestamp` in some fixtures); read both as a string.
pub fn string_or_number<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        S(String),
        I(i64),
        U(u64),
        F(f64),
    }
    Ok(match Either::deserialize(d)? {
        Either::S(s) => s,
        Either::I(i) => i.to_string(),
        Either::U(u) => u.to_string(),
        Either::F(f) => f.to_string(),
    })
}

/// [`string_or_number`] for an optional field.
pub fn opt_string_or_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    struct Wrap(#[serde(deserialize_with = "string_or_number")] String);
    Ok(Option::<Wrap>::deserialize(d)?.map(|w| w.0))
}

/// `text` object: an inbound text message's and a text send's (§2, §9.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextPayload {
    /// The text.
    pub body: String,
    /// Whether to render a link preview.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview_url: Option<bool>,
    /// Any other member, kept as sent (an inbound message is passed on whole, issue 48).
    #[serde(flatten, default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub rest: serde_json::Map<String, serde_json::Value>,
}

/// The webhook envelope: `{"object": "whatsapp_business_account", "entry": [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebhookPayload {
    /// `whatsapp_business_account`.
    pub object: String,
    /// One entry per WABA (the provider may batch several).
    #[serde(default)]
    pub entry: Vec<WebhookEntry>,
}

/// One `entry[]` item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebhookEntry {
    /// The WABA id (a partner's business id for `PARTNER_ADDED`).
    #[serde(deserialize_with = "string_or_number")]
    pub id: String,
    /// Unix seconds; present on management fields, absent on `messages`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<i64>,
    /// The changes.
    #[serde(default)]
    pub changes: Vec<WebhookChange>,
}

/// One `changes[]` item: a subscribed `field` and its `value`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WebhookChange {
    /// The subscribed field (`messages`, `phone_number_quality_update`…).
    pub field: String,
    /// The value as its JSON text, whose shape depends on `field`; see
    /// [`WebhookChange::parse`], which reads it straight into the field's type. Read into a
    /// `serde_json::Value` first, every object and string of every status was allocated
    /// twice (2.4 % of the gateway's CPU samples in a campaign, D-145).
    pub value: Box<serde_json::value::RawValue>,
}

impl PartialEq for WebhookChange {
    /// Same field, same JSON text.
    fn eq(&self, other: &Self) -> bool {
        self.field == other.field && self.value.get() == other.value.get()
    }
}

/// A change's value, typed by its field.
#[derive(Debug, Clone, PartialEq)]
pub enum ChangeValue {
    /// `messages`: inbound messages, statuses or system errors.
    Messages(MessagesValue),
    /// `phone_number_quality_update`.
    QualityUpdate(QualityUpdateValue),
    /// `message_template_status_update`.
    TemplateStatus(TemplateStatusValue),
    /// `account_update`.
    AccountUpdate(AccountUpdateValue),
    /// `business_capability_update` (§9.7).
    BusinessCapability(BusinessCapabilityValue),
    /// `message_template_quality_update` (§9.6).
    TemplateQuality(TemplateQualityValue),
    /// `template_category_update` (§9.7).
    TemplateCategory(TemplateCategoryValue),
    /// `phone_number_name_update` (§9.7).
    NameUpdate(NameUpdateValue),
    /// `account_alerts` (§9.7).
    AccountAlert(AccountAlertValue),
    /// `user_preferences`: a user stopped (or resumed) marketing messages.
    UserPreferences(UserPreferencesValue),
    /// Any other field, kept by name.
    Other(String),
}

impl WebhookChange {
    /// Types the value by its field. A known field whose value does not parse is an error.
    pub fn parse(&self) -> Result<ChangeValue, serde_json::Error> {
        use serde_json::from_str;
        // Read from the value's text straight into its type: no tree of it is built.
        let v = self.value.get();
        Ok(match self.field.as_str() {
            "messages" => ChangeValue::Messages(from_str(v)?),
            "phone_number_quality_update" => ChangeValue::QualityUpdate(from_str(v)?),
            "message_template_status_update" => ChangeValue::TemplateStatus(from_str(v)?),
            "account_update" => ChangeValue::AccountUpdate(from_str(v)?),
            "business_capability_update" => ChangeValue::BusinessCapability(from_str(v)?),
            "message_template_quality_update" => ChangeValue::TemplateQuality(from_str(v)?),
            "template_category_update" => ChangeValue::TemplateCategory(from_str(v)?),
            "phone_number_name_update" => ChangeValue::NameUpdate(from_str(v)?),
            "account_alerts" => ChangeValue::AccountAlert(from_str(v)?),
            "user_preferences" => ChangeValue::UserPreferences(from_str(v)?),
            other => ChangeValue::Other(other.to_string()),
        })
    }

    /// A change of `field` whose value is `value` (as the simulator and tests build them).
    pub fn new(field: impl Into<String>, value: &serde_json::Value) -> Self {
        let text = value.to_string();
        Self {
            field: field.into(),
            value: serde_json::value::RawValue::from_string(text).expect("a Value's text is JSON"),
        }
    }
}

/// `value` of a `messages` change (§9.1).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MessagesValue {
    /// `"whatsapp"`.
    #[serde(default)]
    pub messaging_product: String,
    /// Which business number it concerns.
    pub metadata: Metadata,
    /// Contacts of inbound messages and non-failed statuses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contacts: Vec<WebhookContact>,
    /// Inbound messages.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<InboundMessage>,
    /// Delivery statuses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub statuses: Vec<StatusUpdate>,
    /// System-level errors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<WebhookError>,
}

/// `metadata` of a `messages` value.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Metadata {
    /// Display number of the business number (any formatting).
    #[serde(default)]
    pub display_phone_number: String,
    /// Phone number id of the business number.
    #[serde(deserialize_with = "string_or_number")]
    pub phone_number_id: String,
}

/// `contacts[]` of a `messages` value.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WebhookContact {
    /// `{name}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
    /// The user's WhatsApp id; may be absent for username-only users (§9.8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wa_id: Option<String>,
    /// Business-scoped user id (§9.8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
}

/// `profile` of a contact.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Profile {
    /// The user's profile name.
    #[serde(default)]
    pub name: String,
}

/// An inbound message (§9.2). The kinds disparo acts on are typed here; every other member is
/// kept as sent in `rest` ([`super::inbound`] reads the whole).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct InboundMessage {
    /// Sender's phone / WhatsApp id (absent for username-only users).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// `wamid.…`.
    pub id: String,
    /// Unix seconds as a string.
    #[serde(deserialize_with = "string_or_number")]
    pub timestamp: String,
    /// `text`, `image`, `audio`, `document`, `video`, `sticker`, `location`, `button`…
    #[serde(rename = "type")]
    pub kind: String,
    /// Text payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<TextPayload>,
    /// Image payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<InboundMedia>,
    /// Video payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video: Option<InboundMedia>,
    /// Audio payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio: Option<InboundMedia>,
    /// Document payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document: Option<InboundMedia>,
    /// Sticker payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sticker: Option<InboundMedia>,
    /// Template quick-reply button tap `{payload, text}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub button: Option<serde_json::Value>,
    /// Reply context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<serde_json::Value>,
    /// Errors for unsupported messages.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<WebhookError>,
    /// Every other member (`location`, `interactive`, `reaction`, `referral`…), kept as sent
    /// and read by [`super::inbound::content`].
    #[serde(flatten, default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub rest: serde_json::Map<String, serde_json::Value>,
}

impl InboundMessage {
    /// The media object, for media kinds.
    pub fn media(&self) -> Option<&InboundMedia> {
        self.image
            .as_ref()
            .or(self.video.as_ref())
            .or(self.audio.as_ref())
            .or(self.document.as_ref())
            .or(self.sticker.as_ref())
    }

    /// Text to keep for display: the text body, a media caption, or a button's text.
    pub fn display_text(&self) -> Option<String> {
        if let Some(t) = &self.text {
            return Some(t.body.clone());
        }
        if let Some(c) = self.media().and_then(|m| m.caption.clone()) {
            return Some(c);
        }
        self.button
            .as_ref()
            .and_then(|b| b.get("text"))
            .and_then(|t| t.as_str())
            .map(str::to_string)
    }
}

/// Media of an inbound message.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct InboundMedia {
    /// Media id, downloadable for 7 days (§3).
    #[serde(deserialize_with = "string_or_number")]
    pub id: String,
    /// MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// SHA-256 of the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Caption.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caption: Option<String>,
    /// File name (documents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// Bearer-protected download URL (newer payloads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Any other member (`voice`, `animated`…), kept as sent.
    #[serde(flatten, default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub rest: serde_json::Map<String, serde_json::Value>,
}

/// A `statuses[]` item (§9.4).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StatusUpdate {
    /// The `wamid` from the send response.
    pub id: String,
    /// `sent`, `delivered`, `read`, `failed`, `played`.
    pub status: String,
    /// Unix seconds as a string.
    #[serde(deserialize_with = "string_or_number")]
    pub timestamp: String,
    /// The user's phone (absent when addressed by BSUID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipient_id: Option<String>,
    /// Echo of the send's `biz_opaque_callback_data`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub biz_opaque_callback_data: Option<String>,
    /// `{id, expiration_timestamp?, origin{type}}`; omitted from v24.0 on (§9.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<serde_json::Value>,
    /// `{billable, pricing_model, type?, category}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pricing: Option<serde_json::Value>,
    /// Only on `failed`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<WebhookError>,
}

impl StatusUpdate {
    /// The timestamp in milliseconds, when it parses.
    pub fn timestamp_ms(&self) -> Option<i64> {
        self.timestamp.parse::<i64>().ok().map(|s| s * 1000)
    }
}

/// The error object inside webhooks (§7, last paragraph): `{code, title, message, error_data,
/// href}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WebhookError {
    /// The Graph/WhatsApp code.
    pub code: i64,
    /// Title.
    #[serde(default)]
    pub title: String,
    /// Same as `title` in current payloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `{details}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_data: Option<serde_json::Value>,
    /// Link to the error-code page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub href: Option<String>,
}

impl WebhookError {
    /// `error_data.details`, when present.
    pub fn details(&self) -> Option<&str> {
        self.error_data.as_ref()?.get("details")?.as_str()
    }
}

/// `value` of `phone_number_quality_update` (§9.7). The field carries the number's display
/// number, not its id.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct QualityUpdateValue {
    /// Display number of the business number.
    #[serde(deserialize_with = "string_or_number")]
    pub display_phone_number: String,
    /// `ONBOARDING`, `THROUGHPUT_UPGRADE`; legacy `FLAGGED`, `UNFLAGGED`, `DOWNGRADE`,
    /// `UPGRADE`.
    pub event: String,
    /// The tier now (`TIER_250`…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_limit: Option<String>,
    /// The previous tier, on limit changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_limit: Option<String>,
    /// The portfolio limit (same tier strings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_daily_conversations_per_business: Option<String>,
    /// Not in Meta's documented payload; the simulator adds the new quality rating here so
    /// that one webhook carries it (a gateway also re-reads `quality_rating` on sync).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality_rating: Option<String>,
}

/// `value` of `message_template_status_update` (§9.5).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TemplateStatusValue {
    /// `APPROVED`, `REJECTED`, `PAUSED`, `DISABLED`…
    pub event: String,
    /// Template id (a JSON integer here).
    #[serde(deserialize_with = "string_or_number")]
    pub message_template_id: String,
    /// Template name.
    pub message_template_name: String,
    /// Locale (`en_US`, sometimes `en-US`).
    pub message_template_language: String,
    /// Rejection reason, `NONE`, or null.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Category (newer payloads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_template_category: Option<String>,
    /// `{reason, recommendation}` for INVALID_FORMAT rejections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejection_info: Option<serde_json::Value>,
    /// `{title, description}` for pauses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_info: Option<serde_json::Value>,
    /// `{disable_date}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_info: Option<serde_json::Value>,
}

/// `value` of `account_update` (§9.7).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AccountUpdateValue {
    /// `DISABLED_UPDATE`, `ACCOUNT_RESTRICTION`, `ACCOUNT_VIOLATION`…
    pub event: String,
    /// `{waba_ban_state, waba_ban_date}` for `DISABLED_UPDATE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ban_info: Option<BanInfo>,
    /// `[{restriction_type, expiration}]` for `ACCOUNT_RESTRICTION`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restriction_info: Option<Vec<serde_json::Value>>,
    /// `{violation_type}` for `ACCOUNT_VIOLATION`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub violation_info: Option<serde_json::Value>,
    /// Legacy `VERIFIED_ACCOUNT` number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phone_number: Option<String>,
}

/// `value` of `business_capability_update` (§9.7): integers, `-1` unlimited.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct BusinessCapabilityValue {
    /// The portfolio's limit of unique business-initiated users per 24 h (250, 2000, 10000,
    /// 100000; -1 unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_daily_conversations_per_business: Option<i64>,
    /// Deprecated per-number form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_daily_conversation_per_phone: Option<i64>,
    /// Numbers allowed per business.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_phone_numbers_per_business: Option<i64>,
}

impl BusinessCapabilityValue {
    /// The portfolio tier the limit means (`TIER_2K`, `TIER_UNLIMITED`…), when given.
    pub fn tier(&self) -> Option<String> {
        let n = self
            .max_daily_conversations_per_business
            .or(self.max_daily_conversation_per_phone)?;
        Some(match n {
            n if n < 0 => "TIER_UNLIMITED".to_string(),
            n if n >= 1000 && n % 1000 == 0 => format!("TIER_{}K", n / 1000),
            n => format!("TIER_{n}"),
        })
    }
}

/// `value` of `message_template_quality_update` (§9.6).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TemplateQualityValue {
    /// `GREEN`, `YELLOW`, `RED`, `UNKNOWN`.
    #[serde(default)]
    pub previous_quality_score: Option<String>,
    /// `GREEN`, `YELLOW`, `RED`, `UNKNOWN`.
    pub new_quality_score: String,
    /// Template id (a JSON integer).
    #[serde(deserialize_with = "string_or_number")]
    pub message_template_id: String,
    /// Name.
    pub message_template_name: String,
    /// Locale.
    #[serde(default)]
    pub message_template_language: String,
}

/// `value` of `template_category_update` (§9.7).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TemplateCategoryValue {
    /// Template id (a JSON integer).
    #[serde(deserialize_with = "string_or_number")]
    pub message_template_id: String,
    /// Name.
    pub message_template_name: String,
    /// Locale.
    #[serde(default)]
    pub message_template_language: String,
    /// Category before.
    #[serde(default)]
    pub previous_category: Option<String>,
    /// Category now.
    pub new_category: String,
}

/// `value` of `phone_number_name_update` (§9.7).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NameUpdateValue {
    /// The number, as the provider displays it.
    pub display_phone_number: String,
    /// `APPROVED`, `REJECTED`, `DEFERRED`…
    pub decision: String,
    /// The name asked for.
    #[serde(default)]
    pub requested_verified_name: Option<String>,
    /// Why a name was rejected.
    #[serde(default)]
    pub rejection_reason: Option<String>,
}

/// `value` of `account_alerts` (§9.7).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AccountAlertValue {
    /// `WABA`, `PHONE_NUMBER`, `BUSINESS`…
    #[serde(default)]
    pub entity_type: String,
    /// The entity's id.
    #[serde(default, deserialize_with = "string_or_number")]
    pub entity_id: String,
    /// `{alert_severity, alert_status, alert_type, alert_description}`.
    #[serde(default)]
    pub alert_info: AlertInfo,
}

/// `alert_info` of `account_alerts`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AlertInfo {
    /// `CRITICAL`, `WARNING`, `INFORMATIONAL`…
    #[serde(default)]
    pub alert_severity: String,
    /// `ACTIVE`, `NONE`…
    #[serde(default)]
    pub alert_status: String,
    /// e.g. `INCREASED_CAPABILITIES_ELIGIBILITY_DEFERRED`.
    #[serde(default)]
    pub alert_type: String,
    /// Text.
    #[serde(default)]
    pub alert_description: String,
}

/// `value` of `user_preferences`: `{messaging_product, metadata, contacts, user_preferences:
/// [{wa_id, detail, category: "marketing_messages", value: "stop"|"resume", timestamp}]}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UserPreferencesValue {
    /// Which business number it concerns.
    pub metadata: Metadata,
    /// The preferences.
    #[serde(default)]
    pub user_preferences: Vec<UserPreference>,
}

/// One entry of `user_preferences`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UserPreference {
    /// The user.
    pub wa_id: String,
    /// `marketing_messages`.
    #[serde(default)]
    pub category: String,
    /// `stop` or `resume`.
    pub value: String,
}

/// `ban_info` of `DISABLED_UPDATE`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct BanInfo {
    /// `SCHEDULE_FOR_DISABLE`, `DISABLE` or `REINSTATE`.
    pub waba_ban_state: String,
    /// A human date string (`April 17, 2025`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waba_ban_date: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample<T: serde::de::DeserializeOwned>(name: &str) -> T {
        let path = format!(
            "{}/testdata/{name}",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../provider")
        );
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    fn messages(p: &WebhookPayload) -> MessagesValue {
        match p.entry[0].changes[0].parse().unwrap() {
            ChangeValue::Messages(m) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn inbound_text_and_image_parse() {
        let p: WebhookPayload = sample("webhook_messages_text.json");
        let m = messages(&p);
        assert_eq!(m.metadata.phone_number_id, "106540352242922");
        assert_eq!(m.messages[0].from.as_deref(), Some("16505551234"));
        assert_eq!(
            m.messages[0].display_text().as_deref(),
            Some("Does it come in another color?")
        );
        assert_eq!(
            m.contacts[0].profile.as_ref().unwrap().name,
            "Sheena Nelson"
        );
        let p: WebhookPayload = sample("webhook_messages_image.json");
        let m = messages(&p);
        assert_eq!(m.messages[0].kind, "image");
        assert!(m.messages[0].media().is_some());
    }

    #[test]
    fn statuses_parse_with_callback_data_and_errors() {
        let p: WebhookPayload = sample("webhook_status_delivered.json");
        let s = &messages(&p).statuses[0];
        assert_eq!(
            (s.id.as_str(), s.status.as_str()),
            ("wamid.xyzxyz", "delivered")
        );
        assert_eq!(s.timestamp_ms(), Some(1_698_266_945_000));
        let p: WebhookPayload = sample("webhook_status_sent_biz_opaque_callback_data.json");
        assert!(messages(&p).statuses[0].biz_opaque_callback_data.is_some());
        let p: WebhookPayload = sample("webhook_status_failed_131049.json");
        let s = &messages(&p).statuses[0];
        assert_eq!(s.errors[0].code, 131049);
        assert!(s.errors[0].details().unwrap().contains("healthy ecosystem"));
        let p: WebhookPayload = sample("webhook_status_read.json");
        assert_eq!(messages(&p).statuses[0].status, "read");
    }

    #[test]
    fn management_fields_parse() {
        let p: WebhookPayload =
            sample("webhook_phone_number_quality_update_throughput_upgrade.json");
        match p.entry[0].changes[0].parse().unwrap() {
            ChangeValue::QualityUpdate(q) => {
                assert_eq!(q.event, "THROUGHPUT_UPGRADE");
                assert_eq!(q.current_limit.as_deref(), Some("TIER_UNLIMITED"));
            }
            other => panic!("{other:?}"),
        }
        let p: WebhookPayload = sample("webhook_message_template_status_update_approved.json");
        assert!(
            matches!(p.entry[0].changes[0].parse().unwrap(), ChangeValue::TemplateStatus(t) if t.event == "APPROVED")
        );
        let p: WebhookPayload =
            sample("webhook_message_template_status_update_rejected_invalid_format.json");
        assert!(
            matches!(p.entry[0].changes[0].parse().unwrap(), ChangeValue::TemplateStatus(t) if t.event == "REJECTED")
        );
        let p: WebhookPayload = sample("webhook_account_update_disabled_update_ban.json");
        match p.entry[0].changes[0].parse().unwrap() {
            ChangeValue::AccountUpdate(a) => assert_eq!(a.event, "DISABLED_UPDATE"),
            other => panic!("{other:?}"),
        }
    }
}
