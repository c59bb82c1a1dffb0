//! The provider's JSON shapes: send requests and responses (§2), phone numbers (§4), and the
//! webhook envelope with its `value` kinds (§8.3, §9; defined in [`engine::provider_webhook::wire`],
//! where the ingest reads them, and re-exported here). Optional fields stay optional: real
//! payloads omit many of them, and unknown fields are ignored, never an error.

use serde::{Deserialize, Serialize};

pub use engine::provider_webhook::wire::*;

// ---------------------------------------------------------------------------------------------
// Sending (§2)
// ---------------------------------------------------------------------------------------------

/// `POST /{phone_number_id}/messages` body (§2.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendMessageRequest {
    /// Always `"whatsapp"`.
    pub messaging_product: String,
    /// `individual` (default) or `group`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipient_type: Option<String>,
    /// The user's phone number (digits, `+` allowed).
    pub to: String,
    /// `text`, `template`, `image`, `document`, `video`, `audio`…; text may omit it.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Text payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<TextPayload>,
    /// Template payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<TemplatePayload>,
    /// Image payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<MediaObject>,
    /// Document payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document: Option<MediaObject>,
    /// Video payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video: Option<MediaObject>,
    /// Audio payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio: Option<MediaObject>,
    /// Reply context `{message_id}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<serde_json::Value>,
    /// Echoed back on every status webhook of this message (§9.4). disparo puts its own
    /// message id here so a status settles a message whose send answer was lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub biz_opaque_callback_data: Option<String>,
}

impl SendMessageRequest {
    fn base(to: &str, kind: &str) -> Self {
        Self {
            messaging_product: "whatsapp".into(),
            recipient_type: Some("individual".into()),
            to: to.into(),
            kind: Some(kind.into()),
            text: None,
            template: None,
            image: None,
            document: None,
            video: None,
            audio: None,
            context: None,
            biz_opaque_callback_data: None,
        }
    }

    /// A text message (§2.2); `body` ≤ 4096 characters.
    pub fn text(to: &str, body: &str) -> Self {
        let mut r = Self::base(to, "text");
        r.text = Some(TextPayload {
            body: body.into(),
            preview_url: None,
            rest: Default::default(),
        });
        r
    }

    /// A template message (§2.4).
    pub fn template(to: &str, template: TemplatePayload) -> Self {
        let mut r = Self::base(to, "template");
        r.template = Some(template);
        r
    }

    /// A media message (§2.3); `kind` is `image`, `document`, `video` or `audio`. Other kinds
    /// give `None`.
    pub fn media(to: &str, kind: &str, media: MediaObject) -> Option<Self> {
        let mut r = Self::base(to, kind);
        match kind {
            "image" => r.image = Some(media),
            "document" => r.document = Some(media),
            "video" => r.video = Some(media),
            "audio" => r.audio = Some(media),
            _ => return None,
        }
        Some(r)
    }

    /// Sets `biz_opaque_callback_data`.
    pub fn with_callback_data(mut self, data: impl Into<String>) -> Self {
        self.biz_opaque_callback_data = Some(data.into());
        self
    }

    /// The message type, `text` when omitted.
    pub fn kind(&self) -> &str {
        self.kind.as_deref().unwrap_or("text")
    }
}

/// A media object: exactly one of `id` (uploaded media) or `link` (§2.3).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MediaObject {
    /// Uploaded media id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Public HTTP(S) URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// Caption (image, video, document).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caption: Option<String>,
    /// File name (document).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
}

/// `template` object of a send (§2.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TemplatePayload {
    /// Template name at the provider.
    pub name: String,
    /// `{code, policy?}`.
    pub language: TemplateLanguage,
    /// Header, body and button parameters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<TemplateComponent>,
}

impl TemplatePayload {
    /// A template with positional body parameters and an optional dynamic URL button suffix
    /// (button index 0), for a template whose layout is not known.
    pub fn positional(
        name: &str,
        language: &str,
        body_params: &[String],
        url_button_suffix: Option<&str>,
    ) -> Self {
        Self::filled(
            name,
            language,
            &engine::template::Filled {
                header: None,
                body: body_params.to_vec(),
                buttons: url_button_suffix
                    .map(|s| vec![(0, engine::template::ButtonValue::UrlSuffix(s.into()))])
                    .unwrap_or_default(),
            },
        )
    }

    /// A template send with every component parameter of `filled` (header, body, buttons in
    /// index order; PROVIDER.md §2.4), as [`engine::template::Layout::fill`] completes them.
    pub fn filled(name: &str, language: &str, filled: &engine::template::Filled) -> Self {
        use engine::template::{ButtonValue, HeaderValue};
        let mut components = Vec::new();
        if let Some(h) = &filled.header {
            let parameter = match h {
                HeaderValue::Text(text) => Parameter::Text { text: text.clone() },
                HeaderValue::Media { kind, link, id } => {
                    let media = MediaObject {
                        id: id.clone(),
                        link: link.clone(),
                        ..Default::default()
                    };
                    match kind {
                        engine::template::HeaderMedia::Image => Parameter::Image { image: media },
                        engine::template::HeaderMedia::Video => Parameter::Video { video: media },
                        engine::template::HeaderMedia::Document => {
                            Parameter::Document { document: media }
                        }
                    }
                }
            };
            components.push(TemplateComponent {
                kind: "header".into(),
                sub_type: None,
                index: None,
                parameters: vec![parameter],
            });
        }
        if !filled.body.is_empty() {
            components.push(TemplateComponent {
                kind: "body".into(),
                sub_type: None,
                index: None,
                parameters: filled
                    .body
                    .iter()
                    .map(|p| Parameter::Text { text: p.clone() })
                    .collect(),
            });
        }
        for (index, value) in &filled.buttons {
            let (sub_type, parameter) = match value {
                ButtonValue::UrlSuffix(s) => ("url", Parameter::Text { text: s.clone() }),
                ButtonValue::Payload(p) => {
                    ("quick_reply", Parameter::Payload { payload: p.clone() })
                }
                ButtonValue::CouponCode(c) => (
                    "copy_code",
                    Parameter::CouponCode {
                        coupon_code: c.clone(),
                    },
                ),
            };
            components.push(TemplateComponent {
                kind: "button".into(),
                sub_type: Some(sub_type.into()),
                index: Some(index.to_string()),
                parameters: vec![parameter],
            });
        }
        Self {
            name: name.into(),
            language: TemplateLanguage {
                code: language.into(),
                policy: None,
            },
            components,
        }
    }

    /// The number of body parameters given.
    pub fn body_parameter_count(&self) -> usize {
        self.components
            .iter()
            .filter(|c| c.kind.eq_ignore_ascii_case("body"))
            .map(|c| c.parameters.len())
            .sum()
    }
}

/// `language` of a template send.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TemplateLanguage {
    /// Locale code, e.g. `pt_BR`.
    pub code: String,
    /// Optional `deterministic`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

/// One component of a template send: `header`, `body` or `button`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TemplateComponent {
    /// `header`, `body`, `button` (lower case when sending).
    #[serde(rename = "type")]
    pub kind: String,
    /// For buttons: `url`, `quick_reply`, `copy_code`…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_type: Option<String>,
    /// For buttons: the button's position, a string `"0"`…`"9"` (an integer is accepted).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "opt_string_or_number"
    )]
    pub index: Option<String>,
    /// The parameters.
    #[serde(default)]
    pub parameters: Vec<Parameter>,
}

/// A template parameter, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Parameter {
    /// `{"type":"text","text":…}`.
    Text {
        /// The value.
        text: String,
    },
    /// `{"type":"image","image":{id|link}}`.
    Image {
        /// The media.
        image: MediaObject,
    },
    /// `{"type":"video","video":{id|link}}`.
    Video {
        /// The media.
        video: MediaObject,
    },
    /// `{"type":"document","document":{id|link, filename}}`.
    Document {
        /// The media.
        document: MediaObject,
    },
    /// `{"type":"payload","payload":…}` (quick-reply buttons).
    Payload {
        /// The payload.
        payload: String,
    },
    /// `{"type":"currency","currency":{fallback_value, code, amount_1000}}`.
    Currency {
        /// The currency object as sent.
        currency: serde_json::Value,
    },
    /// `{"type":"date_time","date_time":{fallback_value}}`.
    DateTime {
        /// The date-time object as sent.
        date_time: serde_json::Value,
    },
    /// `{"type":"coupon_code","coupon_code":…}`.
    CouponCode {
        /// The code.
        coupon_code: String,
    },
}

/// `POST /{phone_number_id}/messages` success body (§2.6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendMessageResponse {
    /// `"whatsapp"`.
    #[serde(default)]
    pub messaging_product: String,
    /// `[{input, wa_id}]`.
    #[serde(default)]
    pub contacts: Vec<SentContact>,
    /// `[{id, message_status?}]`.
    #[serde(default)]
    pub messages: Vec<SentMessage>,
}

impl SendMessageResponse {
    /// The `wamid` of the accepted message.
    pub fn message_id(&self) -> Option<&str> {
        self.messages.first().map(|m| m.id.as_str())
    }
}

/// `contacts[]` of a send response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SentContact {
    /// The recipient exactly as sent.
    pub input: String,
    /// The user's WhatsApp id (absent when addressed by BSUID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wa_id: Option<String>,
}

/// `messages[]` of a send response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SentMessage {
    /// `wamid.…`.
    pub id: String,
    /// `accepted`, `held_for_quality_assessment` or `paused` (template sends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_status: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Phone numbers (§4)
// ---------------------------------------------------------------------------------------------

/// A phone number node (`GET /{phone_number_id}`, list items of `/{waba}/phone_numbers`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PhoneNumber {
    /// Phone number id.
    pub id: String,
    /// Display number, formatting varies (`"+1 631-555-5555"`, `"15550783881"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_phone_number: Option<String>,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_name: Option<String>,
    /// `GREEN`, `YELLOW`, `RED`, `UNKNOWN` or `NA`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality_rating: Option<String>,
    /// Deprecated per-number tier (`TIER_1K`…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messaging_limit_tier: Option<String>,
    /// Portfolio-level tier (`TIER_250`, `TIER_2K`…, §4.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whatsapp_business_manager_messaging_limit: Option<String>,
    /// `{level}`: `STANDARD`, `HIGH`, `NOT_APPLICABLE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<Throughput>,
    /// `CONNECTED`, `PENDING`, `DISCONNECTED`, `BANNED`…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Display-name review status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_status: Option<String>,
    /// `VERIFIED`, `NOT_VERIFIED`, `EXPIRED` (or `UNVERIFIED`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_verification_status: Option<String>,
    /// `CLOUD_API`, `ON_PREMISE`, `NOT_APPLICABLE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform_type: Option<String>,
    /// `SANDBOX` or `LIVE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_mode: Option<String>,
    /// Whether two-step verification is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_pin_enabled: Option<bool>,
    /// Whether the number is also on the WhatsApp Business app (coexistence: a fixed 20
    /// messages/s; PROVIDER.md §10.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_on_biz_app: Option<bool>,
}

impl PhoneNumber {
    /// The number's throughput, messages/s, from its `throughput.level` and coexistence
    /// ([`engine::pacing::throughput_mps`]).
    pub fn throughput_mps(&self) -> u32 {
        engine::pacing::throughput_mps(
            self.throughput.as_ref().map(|t| t.level.as_str()),
            self.is_on_biz_app == Some(true),
        )
    }

    /// The tier to use: the portfolio limit when present, else the legacy per-number tier.
    pub fn tier(&self) -> Option<&str> {
        self.whatsapp_business_manager_messaging_limit
            .as_deref()
            .or(self.messaging_limit_tier.as_deref())
    }
}

/// `throughput` of a phone number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Throughput {
    /// `STANDARD` (80 mps), `HIGH` (1,000 mps) or `NOT_APPLICABLE`.
    pub level: String,
}

/// The fields disparo reads from a phone number node.
pub const PHONE_NUMBER_FIELDS: &str = "id,display_phone_number,verified_name,quality_rating,messaging_limit_tier,whatsapp_business_manager_messaging_limit,throughput,status,name_status,code_verification_status,platform_type,account_mode,is_pin_enabled,is_on_biz_app";

/// A business portfolio node (`GET /{business_id}?fields=id,name,verification_status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Business {
    /// Business id.
    pub id: String,
    /// Name.
    #[serde(default)]
    pub name: String,
    /// `verified`, `unverified`, `pending`…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification_status: Option<String>,
}

/// `GET /{phone_number_id}/whatsapp_business_profile` answer: `{data: [profile]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BusinessProfiles {
    /// One profile.
    pub data: Vec<BusinessProfile>,
}

/// A number's business profile (the fields disparo reads).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BusinessProfile {
    /// Profile picture URL (temporary CDN URL at the provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_picture_url: Option<String>,
    /// "About" text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub about: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The answer of a resumable upload's data post: the file handle `h`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadHandle {
    /// The handle to give `profile_picture_handle` (or a template's `header_handle`).
    pub h: String,
}

/// `{"success": true}` answers of mutations (§1.4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Success {
    /// True when the mutation took effect.
    pub success: bool,
}

// ---------------------------------------------------------------------------------------------
// Management edges (§4.2, §5, §6)
// ---------------------------------------------------------------------------------------------

/// `{"id": "…"}` answers (number created, media uploaded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdResponse {
    /// The new id.
    pub id: String,
}

/// A page of an edge list: `{"data": [...], "paging": {...}}` (§1.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page<T> {
    /// Items.
    pub data: Vec<T>,
    /// Cursors and the next page's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paging: Option<Paging>,
}

/// `paging` of an edge list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Paging {
    /// `{before, after}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursors: Option<Cursors>,
    /// URL of the next page, absent on the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// Cursors of a page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursors {
    /// Before the first item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// After the last item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// A WABA as `owned_whatsapp_business_accounts` and `GET /{waba_id}` return it (§5.1, §5.4).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Waba {
    /// WABA id.
    pub id: String,
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Template namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_template_namespace: Option<String>,
    /// Timezone id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone_id: Option<String>,
    /// `PENDING`, `APPROVED`, `REJECTED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_review_status: Option<String>,
    /// Business verification status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub business_verification_status: Option<String>,
    /// `{can_send_message, …}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_status: Option<serde_json::Value>,
    /// Portfolio messaging limit (`TIER_250`…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whatsapp_business_manager_messaging_limit: Option<String>,
    /// The business portfolio (BM) that owns the WABA: `{id, name}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_business_info: Option<OwnerBusiness>,
}

/// `owner_business_info` of a WABA.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct OwnerBusiness {
    /// Business id.
    pub id: String,
    /// Business name.
    #[serde(default)]
    pub name: String,
}

impl Waba {
    /// The provider's error codes in `health_status.entities[].errors` (e.g. 141006 for a
    /// payment method problem).
    pub fn health_error_codes(&self) -> Vec<i64> {
        self.health_status
            .as_ref()
            .and_then(|h| h.get("entities"))
            .and_then(|e| e.as_array())
            .map(|entities| {
                entities
                    .iter()
                    .flat_map(|e| {
                        e.get("errors")
                            .and_then(|x| x.as_array())
                            .cloned()
                            .unwrap_or_default()
                    })
                    .filter_map(|err| err.get("error_code").and_then(|c| c.as_i64()))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// `GET /debug_token` answer (§5.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DebugToken {
    /// The token's description.
    pub data: DebugTokenData,
}

/// The token's description.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DebugTokenData {
    /// App the token belongs to.
    #[serde(default)]
    pub app_id: String,
    /// Whether the token works.
    #[serde(default)]
    pub is_valid: bool,
    /// Expiry, Unix seconds; 0 = never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// Granted permissions.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Permissions per asset: `target_ids` lists the WABAs (newest first).
    #[serde(default)]
    pub granular_scopes: Vec<GranularScope>,
}

/// A permission and the assets it covers.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GranularScope {
    /// Permission.
    pub scope: String,
    /// Asset ids.
    #[serde(default)]
    pub target_ids: Vec<String>,
}

/// `GET /oauth/access_token` answer (§5.6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessToken {
    /// The business token.
    pub access_token: String,
    /// `bearer`.
    #[serde(default)]
    pub token_type: String,
    /// Seconds until expiry, for expiring tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in: Option<i64>,
}

/// `GET /{media_id}` answer (§3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaInfo {
    /// `whatsapp`.
    #[serde(default)]
    pub messaging_product: String,
    /// Download URL, valid 5 minutes, needs the bearer token.
    pub url: String,
    /// MIME type.
    pub mime_type: String,
    /// SHA-256 of the file.
    #[serde(default)]
    pub sha256: String,
    /// Size in bytes (a string on the wire).
    #[serde(deserialize_with = "string_or_number")]
    pub file_size: String,
    /// Media id.
    pub id: String,
}

/// `POST /{waba_id}/message_templates` body (§6.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreateTemplate {
    /// `^[a-z0-9_]+$`, ≤ 512.
    pub name: String,
    /// Locale, e.g. `pt_BR`.
    pub language: String,
    /// `MARKETING`, `UTILITY`, `AUTHENTICATION`.
    pub category: String,
    /// `POSITIONAL` (default) or `NAMED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameter_format: Option<String>,
    /// `HEADER`, `BODY`, `FOOTER`, `BUTTONS` components with examples.
    pub components: Vec<serde_json::Value>,
}

/// `POST /{waba_id}/message_templates` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateCreated {
    /// Template id.
    pub id: String,
    /// `PENDING` (or `APPROVED` / `REJECTED` at once).
    pub status: String,
    /// Category as accepted.
    #[serde(default)]
    pub category: String,
}

/// A template as the list returns it (§6.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TemplateInfo {
    /// Template id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Locale.
    pub language: String,
    /// `APPROVED`, `PENDING`, `REJECTED`, `PAUSED`, `DISABLED`…
    pub status: String,
    /// `MARKETING`, `UTILITY`, `AUTHENTICATION`.
    pub category: String,
    /// `POSITIONAL` or `NAMED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameter_format: Option<String>,
    /// Components as created.
    #[serde(default)]
    pub components: serde_json::Value,
}

impl TemplatePayload {
    /// Adds a media header parameter (`image`, `video` or `document`) to a template send.
    /// Other kinds are ignored.
    pub fn with_header_media(mut self, kind: &str, media: MediaObject) -> Self {
        let parameter = match kind {
            "image" => Parameter::Image { image: media },
            "video" => Parameter::Video { video: media },
            "document" => Parameter::Document { document: media },
            _ => return self,
        };
        self.components.insert(
            0,
            TemplateComponent {
                kind: "header".into(),
                sub_type: None,
                index: None,
                parameters: vec![parameter],
            },
        );
        self
    }
}

#[cfg(test)]
mod management_tests {
    use super::*;

    fn sample<T: serde::de::DeserializeOwned>(name: &str) -> T {
        let path = format!("{}/testdata/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    #[test]
    fn management_answers_parse_from_the_samples() {
        let m: MediaInfo = sample("media_get_response.json");
        assert_eq!(
            (m.file_size.as_str(), m.mime_type.as_str()),
            ("303833", "image/jpeg")
        );
        let t: TemplateCreated = sample("message_template_create_response.json");
        assert_eq!(
            (t.status.as_str(), t.category.as_str()),
            ("PENDING", "UTILITY")
        );
        let w: Page<Waba> = sample("owned_whatsapp_business_accounts_response.json");
        assert_eq!(w.data.len(), 2);
        assert!(w.paging.unwrap().cursors.unwrap().after.is_some());
        let n: Page<PhoneNumber> = sample("waba_phone_numbers_list_response.json");
        assert_eq!(n.data[1].quality_rating.as_deref(), Some("NA"));
        assert_eq!(
            engine::channel::Quality::parse(n.data[1].quality_rating.as_deref().unwrap()),
            engine::channel::Quality::Unknown
        );
        let l: Page<TemplateInfo> = sample("message_templates_list_response.json");
        assert!(!l.data.is_empty() && l.data.iter().all(|t| !t.status.is_empty()));
        let c: CreateTemplate = sample("request_create_template_url_button_with_variable.json");
        assert!(c.components.iter().any(|x| x["type"] == "BUTTONS"));
        let a: serde_json::Value = sample("request_add_phone_number.json");
        assert_eq!(a["cc"], "1");
    }

    #[test]
    fn a_debug_token_answer_lists_the_wabas_granted() {
        let v = serde_json::json!({"data": {"app_id": "670843887433847", "application": "JaspersMarket", "data_access_expires_at": 1672092840,
            "expires_at": 1665090000, "is_valid": true, "type": "USER", "user_id": "10222270944537964",
            "scopes": ["whatsapp_business_management", "whatsapp_business_messaging", "public_profile"],
            "granular_scopes": [{"scope": "whatsapp_business_management", "target_ids": ["102289599326934", "101569239400667"]},
                                {"scope": "whatsapp_business_messaging", "target_ids": ["102289599326934", "101569239400667"]}]}});
        let d: DebugToken = serde_json::from_value(v).unwrap();
        assert!(d.data.is_valid);
        assert_eq!(d.data.granular_scopes[0].target_ids[0], "102289599326934");
        let t: AccessToken = serde_json::from_value(
            serde_json::json!({"access_token": "EAAA", "token_type": "bearer"}),
        )
        .unwrap();
        assert_eq!(t.access_token, "EAAA");
    }
}

#[cfg(test)]
mod send_tests {
    use super::*;

    fn sample<T: serde::de::DeserializeOwned>(name: &str) -> T {
        let path = format!("{}/testdata/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    #[test]
    fn send_bodies_and_responses_match_the_samples() {
        let r: SendMessageResponse = sample("send_message_response.json");
        assert_eq!(
            r.message_id(),
            Some("wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJCOTY3NDc0NDFDRUI3NTA0Q0UA")
        );
        let r: SendMessageResponse = sample("send_message_response_template_accepted.json");
        assert_eq!(r.messages[0].message_status.as_deref(), Some("accepted"));
        let req: SendMessageRequest = sample("request_send_template_quick_reply_buttons.json");
        assert_eq!(req.kind(), "template");
        let req: SendMessageRequest = sample("request_send_auth_template_url_button.json");
        let t = req.template.unwrap();
        assert!(t
            .components
            .iter()
            .any(|c| c.sub_type.as_deref() == Some("url")));
        let p: PhoneNumber = sample("phone_number_get_response.json");
        assert_eq!(p.quality_rating.as_deref(), Some("GREEN"));
    }

    #[test]
    fn a_positional_template_serialises_like_the_provider_expects() {
        let t = TemplatePayload::positional("order_update", "pt_BR", &["Ana".into()], Some("ABC"));
        let v = serde_json::to_value(SendMessageRequest::template("5511999998888", t)).unwrap();
        assert_eq!(v["type"], "template");
        assert_eq!(v["template"]["language"]["code"], "pt_BR");
        assert_eq!(
            v["template"]["components"][0]["parameters"][0],
            serde_json::json!({"type":"text","text":"Ana"})
        );
        assert_eq!(v["template"]["components"][1]["sub_type"], "url");
        assert_eq!(v["template"]["components"][1]["index"], "0");
    }
}
