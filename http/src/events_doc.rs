//! The outbound events in the contract (issue 48 item 3, decision D-122): every event kind
//! disparo delivers to a subscription, and the panel's forwarded provider events, as typed
//! schemas under the OpenAPI 3.1 `webhooks` section of the served documents, so a client
//! generator types them. The types here describe the deliveries `actors::events` and the
//! dispatcher build; `tests/openapi.rs` validates real deliveries of every kind against the
//! served document, so a change on the wire that the schema does not follow fails there.

use engine::channel::watch::Observed;
use engine::channel::Health;
use engine::message::{Direction, MessageKind, MessageStatus};
use engine::provider_webhook::inbound::InboundContent;
use engine::webhook::EventKind;
use serde::Serialize;
use serde_json::{json, Value};
use utoipa::{OpenApi, ToSchema};

/// The number an event is about (`channel` of every envelope).
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct EventChannel {
    /// The number's id.
    id: i64,
    /// Its name.
    name: String,
    /// Its phone, digits.
    phone: String,
    /// The provider's phone number id.
    provider_phone_number_id: Option<String>,
}

/// Every delivery: `{event, delivery_id, created_at, channel, data}`, signed per Standard
/// Webhooks (`webhook-id` is `delivery_id`).
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct EventEnvelope<T> {
    /// The event's kind.
    event: EventKind,
    /// The delivery's id, the same at every attempt: deduplicate on it.
    delivery_id: i64,
    /// When the event happened (ISO 8601, UTC).
    created_at: String,
    /// The number it is about.
    channel: EventChannel,
    /// The kind's payload.
    data: T,
}

/// The contact of a message event.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct EventContact {
    /// Phone digits.
    phone: String,
    /// Profile name (received messages).
    name: Option<String>,
}

/// The template of a sent template message.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct EventTemplate {
    /// The template's name.
    name: String,
    /// Its language.
    language: Option<String>,
    /// The parameters sent.
    #[schema(value_type = Option<Object>)]
    params: Option<Value>,
}

/// The message of `message.received` and `message.sent`.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct EventMessage {
    /// disparo's id.
    id: i64,
    /// The provider's id (`wamid.…`).
    provider_message_id: Option<String>,
    /// `in` or `out`.
    direction: Direction,
    /// disparo's stored kind (`other` for kinds without one: see `content.type`).
    #[serde(rename = "type")]
    kind: MessageKind,
    /// The text, caption or button text.
    text: Option<String>,
    /// Where it stands.
    status: MessageStatus,
    /// When it was written (ISO 8601).
    timestamp: String,
    /// Sent messages: `api`, `campaign`…
    source: Option<String>,
    /// Sent template messages.
    template: Option<EventTemplate>,
    /// Sent template messages: the text as the contact reads it.
    preview_text: Option<String>,
    /// Media: where to download it with the token.
    media_src: Option<String>,
    /// Media: the descriptor.
    media: Option<EventMedia>,
    /// Received messages: the whole content, typed per provider kind (`type`, the kind's
    /// object, `context`, `referral`, `errors`, `raw`).
    content: Option<InboundContent>,
}

/// A media message's descriptor: received (`provider_media_id`, `sha256`, `caption`) or sent
/// (`url`, `size`).
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct EventMedia {
    /// The provider's media id (received).
    provider_media_id: Option<String>,
    /// Where it was fetched from (sent).
    url: Option<String>,
    /// MIME type.
    mime_type: Option<String>,
    /// SHA-256 (received).
    sha256: Option<String>,
    /// Caption.
    caption: Option<String>,
    /// File name.
    filename: Option<String>,
    /// Bytes (sent).
    size: Option<i64>,
}

/// `data` of `message.received` and `message.sent`.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct MessageEventData {
    /// The conversation.
    conversation_id: i64,
    /// The contact.
    contact: EventContact,
    /// The message.
    message: EventMessage,
}

/// The provider's error of a failed message.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct EventError {
    /// The provider's code.
    code: Option<i64>,
    /// Its title.
    title: Option<String>,
    /// Its details.
    details: Option<String>,
}

/// `data` of `message.ack`.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct MessageAckData {
    /// disparo's id of the message.
    message_id: i64,
    /// The provider's id (`wamid.…`), the name it has in every answer and event.
    provider_message_id: Option<String>,
    /// Deprecated: the same as `provider_message_id`, under its old name.
    engine_message_id: Option<String>,
    /// -1 failed, 1 sent, 2 delivered, 3 read, 4 played.
    ack: i64,
    /// The same in words.
    ack_label: String,
    /// The message's status now.
    status: MessageStatus,
    /// The contact's phone.
    to: String,
    /// On a failure.
    error: Option<EventError>,
}

/// `data` of `template.status`.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct TemplateStatusData {
    /// The library template.
    template_id: i64,
    /// Its name.
    name: String,
    /// Its name at the provider.
    provider_name: String,
    /// Its language.
    language: String,
    /// The provider's event (`APPROVED`, `REJECTED`…).
    event: String,
    /// The status on this number.
    status: String,
    /// Why, on a rejection or pause.
    reason: Option<String>,
}

/// `data` of `session.status`.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct SessionStatusData {
    /// The status now.
    status: String,
    /// Before.
    previous_status: String,
    /// The number's phone.
    phone: String,
}

/// `data` of `campaign.status`.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct CampaignStatusData {
    /// The campaign.
    campaign_id: i64,
    /// Its name.
    name: String,
    /// The state now.
    status: String,
    /// Before.
    previous_status: String,
    /// Why (a pause's reason).
    reason: Option<String>,
}

/// `data` of `channel.health`.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct ChannelHealthData {
    /// The members of `current` that changed.
    changed: Vec<String>,
    /// Before.
    previous: Observed,
    /// Now.
    current: Observed,
    /// The health object now.
    health: Health,
}

/// `data` of `waba.standing`.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct WabaStandingData {
    /// The provider's WABA id.
    waba_id: String,
    /// Before (`ok`, `restricted`, `banned`, `violation`).
    previous_standing: String,
    /// Now.
    standing: String,
    /// The provider's detail.
    detail: Option<String>,
}

/// `data` of `bm.tier`.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct BmTierData {
    /// The BM.
    bm_id: i64,
    /// Before.
    previous_tier: Option<String>,
    /// Now (`TIER_2K`…).
    tier: String,
    /// Unique business-initiated recipients per 24 h; `null` unlimited.
    limit_24h: Option<i64>,
}

/// `data` of `ping`.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct PingData {
    /// `ping`.
    message: String,
    /// The subscription tested.
    subscription_id: i64,
    /// Always true.
    test: bool,
}

/// `data` of `webhook.disabled`.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct WebhookDisabledData {
    /// The subscription disabled.
    subscription_id: i64,
    /// Its URL.
    url: String,
    /// Since when it failed (ISO 8601).
    failing_since: Option<String>,
    /// Why.
    reason: String,
}

/// A provider event forwarded to a number's client (the panel's forwarding): the provider's
/// change as received, verified, in an envelope signed with the client's secret.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct ForwardedEvent {
    /// The provider's field (`messages`, `phone_number_quality_update`…).
    event: String,
    /// The delivery's id (`webhook-id`).
    delivery_id: i64,
    /// When the provider's call arrived (ISO 8601).
    received_at: String,
    /// The number's provider id.
    phone_number_id: Option<String>,
    /// The client.
    client_id: i64,
    /// The provider's change, as sent.
    #[schema(value_type = Object)]
    payload: Value,
}

/// The schemas of the account API's events.
#[derive(OpenApi)]
#[openapi(components(schemas(
    EventEnvelope<MessageEventData>,
    EventEnvelope<MessageAckData>,
    EventEnvelope<TemplateStatusData>,
    EventEnvelope<SessionStatusData>,
    EventEnvelope<CampaignStatusData>,
    EventEnvelope<ChannelHealthData>,
    EventEnvelope<WabaStandingData>,
    EventEnvelope<BmTierData>,
    EventEnvelope<PingData>,
    EventEnvelope<WebhookDisabledData>,
)))]
pub struct AccountEvents;

/// The schema of the panel's forwarded events.
#[derive(OpenApi)]
#[openapi(components(schemas(ForwardedEvent)))]
pub struct PanelEvents;

/// Each event kind, its schema's name and what it tells (pt-BR).
const KINDS: [(&str, &str, &str); 11] = [
    ("message.received", "EventEnvelope_MessageEventData", "Um contato enviou uma mensagem; `data.message.content` traz o conteúdo inteiro."),
    ("message.sent", "EventEnvelope_MessageEventData", "O provedor aceitou uma mensagem enviada (API ou campanha)."),
    ("message.ack", "EventEnvelope_MessageAckData", "O status de entrega ou leitura de uma mensagem mudou."),
    ("template.status", "EventEnvelope_TemplateStatusData", "O provedor aprovou, rejeitou, pausou ou desativou um template no número."),
    ("session.status", "EventEnvelope_SessionStatusData", "O número conectou ou desconectou."),
    ("campaign.status", "EventEnvelope_CampaignStatusData", "Uma campanha que envia pelo número começou, pausou, retomou, terminou ou foi cancelada."),
    ("channel.health", "EventEnvelope_ChannelHealthData", "A saúde do número mudou: status, qualidade, tier, situação da WABA, código ou folga de 24 h."),
    ("waba.standing", "EventEnvelope_WabaStandingData", "O provedor restringiu, baniu, sinalizou ou liberou a WABA do número."),
    ("bm.tier", "EventEnvelope_BmTierData", "O provedor mudou o limite do portfólio (BM) do número."),
    ("ping", "EventEnvelope_PingData", "Teste de uma inscrição (`POST /webhooks/{id}/test`)."),
    ("webhook.disabled", "EventEnvelope_WebhookDisabledData", "Outra inscrição da conta foi desativada por falhar por tempo demais."),
];

/// The Standard Webhooks headers every delivery carries.
fn signature_headers() -> Value {
    json!([
        {"name": "webhook-id", "in": "header", "required": true, "description": "O id da entrega (`delivery_id`), o mesmo em cada tentativa.", "schema": {"type": "string"}},
        {"name": "webhook-timestamp", "in": "header", "required": true, "description": "Hora da tentativa, em segundos desde 1970.", "schema": {"type": "string"}},
        {"name": "webhook-signature", "in": "header", "required": true, "description": "`v1,` + base64 do HMAC-SHA256 de `{webhook-id}.{webhook-timestamp}.{corpo}` com o segredo `whsec_…` (as duas assinaturas, separadas por espaço, durante a sobreposição de uma rotação).", "schema": {"type": "string"}},
        {"name": "X-Svc-Signature", "in": "header", "required": true, "description": "Legado: `sha256=` + HMAC-SHA256 hexadecimal do corpo com o segredo inteiro.", "schema": {"type": "string"}}
    ])
}

fn webhook(summary: &str, schema: &str) -> Value {
    json!({"post": {
        "summary": summary,
        "parameters": signature_headers(),
        "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}},
        "responses": {"200": {"description": "Recebido: qualquer resposta 2xx encerra a entrega; outra resposta ou tempo esgotado é tentado de novo."}}
    }})
}

/// Adds the `webhooks` section of the account API's document (the served JSON).
pub fn add_account_webhooks(doc: &mut Value) {
    let hooks: serde_json::Map<String, Value> = KINDS
        .iter()
        .map(|(kind, schema, summary)| (kind.to_string(), webhook(summary, schema)))
        .collect();
    doc["webhooks"] = Value::Object(hooks);
}

/// Adds the `webhooks` section of the panel's document: the forwarded provider events.
pub fn add_panel_webhooks(doc: &mut Value) {
    doc["webhooks"] = json!({
        "provider.forwarded": webhook("Um evento do provedor sobre um número do cliente, verificado e encaminhado à URL do cliente, assinado com o segredo do cliente.", "ForwardedEvent")
    });
}
