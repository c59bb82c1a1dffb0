//! The whole of an inbound message, typed per provider kind (issue 48 item 1, PROVIDER.md
//! §9.2, decision D-120): what `message.received` carries under `message.content` and what
//! `GET /api/v1/messages/{id}` answers for a received message.
//!
//! Each kind's object is read into its own type (numbers as numbers, flags as booleans) and
//! written back in the provider's own field names, with two changes where a message is named:
//! `context.id` becomes `context.provider_message_id` and `reaction.message_id` becomes
//! `reaction.provider_message_id` (the caller adds `message_id`, disparo's id, when the
//! message is one it stored), and a reaction says `removed` when its emoji is empty. Nothing the
//! provider sent is dropped: whatever no type models — a kind disparo does not know, a field
//! added later, a value of an unexpected type — is passed through under `raw`, as sent.
//!
//! Pure: no I/O.

use super::wire::{InboundMessage, WebhookError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `text`: `{body}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = InboundText)]
pub struct Text {
    /// The text.
    pub body: String,
}

/// `image`, `video`, `audio`, `document`, `sticker`: the provider's media descriptor (the file
/// itself is downloaded with `GET /api/v1/messages/{id}/media`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = InboundMedia)]
pub struct Media {
    /// The provider's media id (downloadable for 7 days).
    #[serde(deserialize_with = "super::wire::string_or_number")]
    pub id: String,
    /// MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// SHA-256 of the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Caption (image, video, document).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caption: Option<String>,
    /// File name (document).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// A voice note (audio).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice: Option<bool>,
    /// An animated sticker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub animated: Option<bool>,
    /// The provider's bearer-protected download URL (newer payloads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// `location`: a pin the contact shared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = InboundLocation)]
pub struct Location {
    /// Degrees.
    pub latitude: f64,
    /// Degrees.
    pub longitude: f64,
    /// The place's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The place's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The place's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// `contacts[].name`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = InboundContactName)]
pub struct ContactName {
    /// The full name as shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub formatted_name: Option<String>,
    /// First name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_name: Option<String>,
    /// Last name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_name: Option<String>,
    /// Middle name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub middle_name: Option<String>,
    /// Suffix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suffix: Option<String>,
    /// Prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

/// `contacts[].phones[]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = InboundContactPhone)]
pub struct ContactPhone {
    /// The number as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phone: Option<String>,
    /// Its WhatsApp id, when it has WhatsApp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wa_id: Option<String>,
    /// `CELL`, `MAIN`, `HOME`, `WORK`…
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// `contacts[].emails[]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = InboundContactEmail)]
pub struct ContactEmail {
    /// The address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// `HOME`, `WORK`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// `contacts[].org`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = InboundContactOrg)]
pub struct ContactOrg {
    /// Company.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub company: Option<String>,
    /// Department.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub department: Option<String>,
    /// Job title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// `contacts[].urls[]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = InboundContactUrl)]
pub struct ContactUrl {
    /// The URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `HOME`, `WORK`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// `contacts[].addresses[]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = InboundContactAddress)]
pub struct ContactAddress {
    /// Street.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub street: Option<String>,
    /// City.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub city: Option<String>,
    /// State.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// ZIP / CEP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zip: Option<String>,
    /// Country.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
    /// Two-letter country code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country_code: Option<String>,
    /// `HOME`, `WORK`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// One card of `contacts`: a contact the contact shared.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = InboundSharedContact)]
pub struct SharedContact {
    /// Names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<ContactName>,
    /// Phones, each with its WhatsApp id when it has one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phones: Vec<ContactPhone>,
    /// E-mails.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub emails: Vec<ContactEmail>,
    /// Organisation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub org: Option<ContactOrg>,
    /// URLs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub urls: Vec<ContactUrl>,
    /// Addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<ContactAddress>,
    /// `YYYY-MM-DD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub birthday: Option<String>,
}

/// `interactive.button_reply` / `interactive.list_reply`: the button or list row tapped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = InboundReply)]
pub struct Reply {
    /// The id the business gave the button or row: what a bot branches on.
    pub id: String,
    /// Its title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The row's description (list replies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `interactive.nfm_reply`: a Flow's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = InboundFlowReply)]
pub struct FlowReply {
    /// `flow`, `address_message`…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Text shown in the chat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The Flow's answers, a JSON document as a string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_json: Option<String>,
}

/// `interactive`: a reply to an interactive message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = InboundInteractive)]
pub struct Interactive {
    /// `button_reply`, `list_reply`, `nfm_reply`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The reply button tapped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub button_reply: Option<Reply>,
    /// The list row chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_reply: Option<Reply>,
    /// A Flow's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nfm_reply: Option<FlowReply>,
}

/// `button`: a template's quick-reply button tapped (`context` names the template message).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = InboundButton)]
pub struct Button {
    /// The payload the send gave the button.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    /// The button's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// `reaction` as the provider sends it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ProviderReaction {
    message_id: String,
    #[serde(default)]
    emoji: Option<String>,
}

/// `order.product_items[]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = InboundProductItem)]
pub struct ProductItem {
    /// The product's id in the catalog.
    pub product_retailer_id: String,
    /// How many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantity: Option<i64>,
    /// Unit price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_price: Option<f64>,
    /// ISO 4217 currency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
}

/// `order`: a cart the contact sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = InboundOrder)]
pub struct Order {
    /// The catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_id: Option<String>,
    /// The contact's note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The products.
    #[serde(default)]
    pub product_items: Vec<ProductItem>,
}

/// `system`: e.g. the contact changed number.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = InboundSystem)]
pub struct System {
    /// `user_changed_number`…
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The provider's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The contact's new WhatsApp id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wa_id: Option<String>,
}

/// `context.referred_product`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = InboundReferredProduct)]
pub struct ReferredProduct {
    /// The catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_id: Option<String>,
    /// The product.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product_retailer_id: Option<String>,
}

/// `context` as the provider sends it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ProviderContext {
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    forwarded: Option<bool>,
    #[serde(default)]
    frequently_forwarded: Option<bool>,
    #[serde(default)]
    referred_product: Option<ReferredProduct>,
}

/// `referral.welcome_message`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = InboundWelcomeMessage)]
pub struct WelcomeMessage {
    /// The ad's welcome text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// `referral`: the ad or post the conversation started from (click-to-WhatsApp).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = InboundReferral)]
pub struct Referral {
    /// The ad's or post's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_url: Option<String>,
    /// Its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_id: Option<String>,
    /// `ad` or `post`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_type: Option<String>,
    /// Headline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headline: Option<String>,
    /// Body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// `image` or `video`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The ad's image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_url: Option<String>,
    /// The ad's video.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video_url: Option<String>,
    /// The video's thumbnail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thumbnail_url: Option<String>,
    /// The click id (Conversions API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ctwa_clid: Option<String>,
    /// The ad's welcome message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub welcome_message: Option<WelcomeMessage>,
}

/// `reaction` as the content says it (D-120).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[schema(as = InboundReaction)]
pub struct ReactionView {
    /// The provider's id of the message reacted to.
    pub provider_message_id: String,
    /// disparo's id of it, when it is one of the account's messages.
    pub message_id: Option<i64>,
    /// The emoji; absent or empty when the reaction was removed.
    pub emoji: Option<String>,
    /// The contact removed their reaction.
    pub removed: bool,
}

/// `context` as the content says it: the message quoted or replied to (D-120).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[schema(as = InboundContext)]
pub struct ContextView {
    /// The provider's id of the quoted message.
    pub provider_message_id: Option<String>,
    /// disparo's id of it, when it is one of the account's messages.
    pub message_id: Option<i64>,
    /// Who sent the quoted message.
    pub from: Option<String>,
    /// The message was forwarded.
    pub forwarded: Option<bool>,
    /// Forwarded many times.
    pub frequently_forwarded: Option<bool>,
    /// The product asked about.
    pub referred_product: Option<ReferredProduct>,
}

/// `errors[].error_data`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[schema(as = InboundErrorData)]
pub struct ErrorDataView {
    /// The provider's details.
    pub details: Option<String>,
}

/// `errors[]` of an unsupported message.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[schema(as = InboundError)]
pub struct ErrorView {
    /// The provider's code (131051…).
    pub code: i64,
    /// Title.
    pub title: Option<String>,
    /// Message.
    pub message: Option<String>,
    /// Details.
    pub error_data: Option<ErrorDataView>,
    /// The provider's page about the code.
    pub href: Option<String>,
}

/// The shape of [`content`]'s object, for the documents (`message.content`; D-120, D-122).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct InboundContent {
    /// The provider's kind (`text`, `image`, `location`, `contacts`, `interactive`, `button`,
    /// `reaction`, `order`, `system`, `unsupported`…; an open set).
    #[serde(rename = "type")]
    pub kind: String,
    /// A text.
    pub text: Option<Text>,
    /// An image.
    pub image: Option<Media>,
    /// A video.
    pub video: Option<Media>,
    /// An audio (`voice` for a voice note).
    pub audio: Option<Media>,
    /// A document.
    pub document: Option<Media>,
    /// A sticker (`animated`).
    pub sticker: Option<Media>,
    /// A location.
    pub location: Option<Location>,
    /// Contact cards.
    pub contacts: Option<Vec<SharedContact>>,
    /// A reply to an interactive message.
    pub interactive: Option<Interactive>,
    /// A template's quick-reply button tapped.
    pub button: Option<Button>,
    /// A reaction.
    pub reaction: Option<ReactionView>,
    /// A cart.
    pub order: Option<Order>,
    /// A system message.
    pub system: Option<System>,
    /// An unsupported message's errors.
    pub errors: Option<Vec<ErrorView>>,
    /// The message quoted.
    pub context: Option<ContextView>,
    /// The ad the conversation started from.
    pub referral: Option<Referral>,
    /// What the provider sent that none of the above models, as sent.
    #[schema(value_type = Option<Object>)]
    pub raw: Option<serde_json::Map<String, Value>>,
}

/// The message's keys said elsewhere in the event (`provider_message_id`, `timestamp`, the
/// contact): not repeated in the content.
const SAID_ELSEWHERE: [&str; 3] = ["from", "id", "timestamp"];

/// The typed content of `m` as a JSON object: `type`, the kind's object, `context`,
/// `referral`, `errors`, and `raw` with whatever the provider sent that none of them models
/// (see the module). A quoted or reacted-to message is named by `provider_message_id`; the
/// caller adds `message_id` ([`referenced_messages`]).
pub fn content(m: &InboundMessage) -> Value {
    let Ok(Value::Object(mut sent)) = serde_json::to_value(m) else {
        return serde_json::json!({"type": m.kind});
    };
    for k in SAID_ELSEWHERE {
        sent.remove(k);
    }
    let mut typed = Map::new();
    typed.insert("type".into(), Value::String(m.kind.clone()));
    for (key, value) in &sent {
        if let Some(t) = typed_kind(key, value) {
            typed.insert(key.clone(), t);
        }
    }
    let raw = leftover(&Value::Object(sent), &Value::Object(typed.clone()));
    if let Some(c) = typed.get_mut("context") {
        rename(c, "id", "provider_message_id");
    }
    if let Some(r) = typed.get_mut("reaction") {
        rename(r, "message_id", "provider_message_id");
        let removed = r["emoji"].as_str().is_none_or(str::is_empty);
        r["removed"] = Value::Bool(removed);
    }
    if let Some(raw) = raw {
        typed.insert("raw".into(), raw);
    }
    Value::Object(typed)
}

/// The provider ids of the messages `content` names (the quoted one, the reacted-to one), as
/// `(key, provider id)`: the caller sets `content[key].message_id` to its own id of each
/// message it stored.
pub fn referenced_messages(content: &Value) -> Vec<(&'static str, String)> {
    ["context", "reaction"]
        .into_iter()
        .filter_map(|k| {
            let id = content.get(k)?.get("provider_message_id")?.as_str()?;
            Some((k, id.to_string()))
        })
        .collect()
}

/// The typed reading of one key of a message, written back; `None` when the key is not a
/// modelled one or its value does not read as its type (it then stays in `raw`).
fn typed_kind(key: &str, value: &Value) -> Option<Value> {
    match key {
        "type" => None,
        "text" => retyped::<Text>(value),
        "image" | "video" | "audio" | "document" | "sticker" => retyped::<Media>(value),
        "location" => retyped::<Location>(value),
        "contacts" => retyped::<Vec<SharedContact>>(value),
        "interactive" => retyped::<Interactive>(value),
        "button" => retyped::<Button>(value),
        "reaction" => retyped::<ProviderReaction>(value),
        "order" => retyped::<Order>(value),
        "system" => retyped::<System>(value),
        "errors" => retyped::<Vec<WebhookError>>(value),
        "context" => retyped::<ProviderContext>(value),
        "referral" => retyped::<Referral>(value),
        _ => None,
    }
}

fn retyped<T: DeserializeOwned + Serialize>(value: &Value) -> Option<Value> {
    let t: T = serde_json::from_value(value.clone()).ok()?;
    let mut v = serde_json::to_value(t).ok()?;
    strip_nulls(&mut v);
    Some(v)
}

/// Drops `null` members (an absent optional reads as absent, not as `null`).
fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.retain(|_, x| !x.is_null());
            o.values_mut().for_each(strip_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

fn rename(v: &mut Value, from: &str, to: &str) {
    if let Some(o) = v.as_object_mut() {
        if let Some(x) = o.remove(from) {
            o.insert(to.to_string(), x);
        }
    }
}

/// What of `sent` the `typed` reading does not say: members missing from it or different in
/// it, recursively through objects and same-length arrays; `None` when it says everything.
fn leftover(sent: &Value, typed: &Value) -> Option<Value> {
    if sent == typed || (sent.is_null() && typed.is_null()) {
        return None;
    }
    match (sent, typed) {
        (Value::Object(s), Value::Object(t)) => {
            let rest: Map<String, Value> = s
                .iter()
                .filter(|(_, v)| !v.is_null())
                .filter_map(|(k, v)| match t.get(k) {
                    None => Some((k.clone(), v.clone())),
                    Some(tv) => leftover(v, tv).map(|l| (k.clone(), l)),
                })
                .collect();
            (!rest.is_empty()).then_some(Value::Object(rest))
        }
        (Value::Array(s), Value::Array(t)) if s.len() == t.len() => {
            let rest: Vec<Value> = s
                .iter()
                .zip(t)
                .map(|(a, b)| leftover(a, b).unwrap_or(Value::Null))
                .collect();
            rest.iter()
                .any(|x| !x.is_null())
                .then_some(Value::Array(rest))
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => None,
        _ => Some(sent.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(message: Value) -> Value {
        let m: InboundMessage = serde_json::from_value(message).unwrap();
        content(&m)
    }

    fn base(kind: &str, body: Value) -> Value {
        let mut m = json!({"from": "5511999990000", "id": "wamid.X", "timestamp": "1700000000", "type": kind});
        m[kind] = body;
        m
    }

    #[test]
    fn each_kind_is_read_whole() {
        let c = read(base(
            "location",
            json!({"latitude": -23.55, "longitude": -46.63, "name": "Sé", "address": "Praça da Sé", "url": "https://x.example"}),
        ));
        assert_eq!(c["type"], "location");
        assert_eq!(c["location"]["latitude"], -23.55);
        assert_eq!(c["location"]["address"], "Praça da Sé");
        assert!(c.get("raw").is_none(), "{c}");

        let c = read(base(
            "interactive",
            json!({"type": "list_reply", "list_reply": {"id": "row-2", "title": "Boleto", "description": "Vence amanhã"}}),
        ));
        assert_eq!(c["interactive"]["list_reply"]["id"], "row-2");
        assert!(c.get("raw").is_none(), "{c}");

        let c = read(base(
            "contacts",
            json!([{"name": {"formatted_name": "Ana Souza", "first_name": "Ana"}, "phones": [{"phone": "+55 11 98888-0000", "wa_id": "5511988880000", "type": "CELL"}], "emails": [{"email": "ana@example.com", "type": "WORK"}], "org": {"company": "ACME"}, "birthday": "1990-01-31"}]),
        ));
        assert_eq!(c["contacts"][0]["phones"][0]["wa_id"], "5511988880000");
        assert_eq!(c["contacts"][0]["org"]["company"], "ACME");
        assert!(c.get("raw").is_none(), "{c}");

        let c = read(base(
            "order",
            json!({"catalog_id": "cat1", "text": "sem cebola", "product_items": [{"product_retailer_id": "sku1", "quantity": 2, "item_price": 10.5, "currency": "BRL"}]}),
        ));
        assert_eq!(c["order"]["product_items"][0]["item_price"], 10.5);
        assert!(c.get("raw").is_none(), "{c}");
    }

    #[test]
    fn a_reaction_and_a_quote_name_the_provider_message() {
        let mut m = base("reaction", json!({"message_id": "wamid.OURS", "emoji": ""}));
        m["context"] = json!({"from": "5511000", "id": "wamid.Q", "forwarded": true});
        let c = read(m);
        assert_eq!(c["reaction"]["provider_message_id"], "wamid.OURS");
        assert_eq!(c["reaction"]["removed"], true);
        assert_eq!(c["context"]["provider_message_id"], "wamid.Q");
        assert_eq!(c["context"]["forwarded"], true);
        assert_eq!(
            referenced_messages(&c),
            vec![
                ("context", "wamid.Q".to_string()),
                ("reaction", "wamid.OURS".to_string())
            ]
        );
        assert!(c.get("raw").is_none(), "{c}");
    }

    #[test]
    fn what_no_type_models_is_passed_through_under_raw() {
        let mut m = base("hologram", json!({"depth": 3}));
        m["location"] = json!({"latitude": "not a number", "longitude": 1});
        m["text"] = json!({"body": "oi", "lang": "pt"});
        m["from_user_id"] = json!("BR.123");
        let c = read(m);
        assert_eq!(c["type"], "hologram");
        assert_eq!(c["raw"]["hologram"], json!({"depth": 3}));
        assert_eq!(c["raw"]["location"]["latitude"], "not a number");
        assert_eq!(c["raw"]["text"], json!({"lang": "pt"}));
        assert_eq!(c["text"]["body"], "oi");
        assert_eq!(c["raw"]["from_user_id"], "BR.123");
        assert!(c["raw"].get("id").is_none());
    }
}
