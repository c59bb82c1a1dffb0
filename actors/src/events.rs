//! Builders of the outbound webhook events (spec "Events"): the envelope's `channel` object
//! and each kind's `data`.

use engine::message::{Direction, ProviderStatus};
use engine::webhook::EventKind;
use serde_json::{json, Value};
use storage::channels::ChannelRecord;
use storage::messages::{AppliedStatus, MessageRecord};
use storage::webhooks::NewEvent;

/// The envelope's `channel` object: `{id, name, phone, provider_phone_number_id}`.
pub fn channel_object(c: &ChannelRecord) -> Value {
    json!({
        "id": c.id,
        "name": c.name,
        "phone": c.phone,
        "provider_phone_number_id": c.phone_number_id,
    })
}

/// The `message` object inside `message.received` / `message.sent`; `media_src` is absolute
/// under `base` (the public URL; issue 17).
pub fn message_object(m: &MessageRecord, base: &str) -> Value {
    let mut v = json!({
        "id": m.id,
        "provider_message_id": m.provider_message_id,
        "direction": m.direction,
        "type": m.kind.as_str(),
        "text": m.body,
        "status": m.status.as_str(),
        "timestamp": crate::time::iso(m.created_at),
    });
    if m.direction == Direction::Out {
        v["source"] = json!(m.source);
        if let Some(name) = &m.template_name {
            v["template"] =
                json!({"name": name, "language": m.template_language, "params": m.params});
            v["preview_text"] = json!(m.preview_text);
        }
    }
    if m.media.is_some() {
        v["media_src"] = json!(format!("{base}/api/v1/messages/{}/media", m.id));
        v["media"] = m.media.clone().unwrap_or(Value::Null);
    }
    if let Some(content) = &m.content {
        v["content"] = content.clone();
    }
    v
}

fn event(kind: EventKind, channel: &ChannelRecord, data: Value, at: i64) -> NewEvent {
    NewEvent {
        account_id: channel.account_id,
        channel_id: channel.id,
        kind,
        channel: channel_object(channel),
        data,
        created_at: at,
    }
}

/// `message.sent`: the provider accepted a message at `at` (ms); `base` is the public URL.
pub fn message_sent(channel: &ChannelRecord, m: &MessageRecord, at: i64, base: &str) -> NewEvent {
    let data = json!({
        "conversation_id": m.conversation_id,
        "contact": {"phone": m.contact_phone},
        "message": message_object(m, base),
    });
    event(EventKind::MessageSent, channel, data, at)
}

/// `channel.health`: what changed of the number's health (`changed`, `previous`, `current`)
/// and its health object now (`health`), at `at` (ms; D-121).
pub fn channel_health(
    channel: &ChannelRecord,
    change: &engine::channel::watch::HealthChange,
    health: &engine::channel::Health,
    at: i64,
) -> NewEvent {
    let data = json!({
        "changed": change.changed,
        "previous": change.previous,
        "current": change.current,
        "health": health,
    });
    event(EventKind::ChannelHealth, channel, data, at)
}

/// `waba.standing` for one of the WABA's numbers: `{waba_id, previous_standing, standing,
/// detail}` at `at` (ms; D-121).
pub fn waba_standing(
    channel: &ChannelRecord,
    waba_id: &str,
    previous: &str,
    standing: &str,
    detail: Option<&str>,
    at: i64,
) -> NewEvent {
    let data = json!({
        "waba_id": waba_id,
        "previous_standing": previous,
        "standing": standing,
        "detail": detail,
    });
    event(EventKind::WabaStanding, channel, data, at)
}

/// `bm.tier` for one of the BM's numbers: `{bm_id, previous_tier, tier, limit_24h}` (the
/// portfolio's unique business-initiated recipients per 24 h, `null` unlimited) at `at` (ms;
/// D-121).
pub fn bm_tier(
    channel: &ChannelRecord,
    bm_id: i64,
    previous: Option<&str>,
    tier: &engine::channel::Tier,
    at: i64,
) -> NewEvent {
    let data = json!({
        "bm_id": bm_id,
        "previous_tier": previous,
        "tier": tier.as_str(),
        "limit_24h": tier.limit_24h(),
    });
    event(EventKind::BmTier, channel, data, at)
}

/// `message.received`: a contact wrote; `base` is the public URL.
pub fn message_received(
    channel: &ChannelRecord,
    m: &MessageRecord,
    contact_name: Option<&str>,
    base: &str,
) -> NewEvent {
    let data = json!({
        "conversation_id": m.conversation_id,
        "contact": {"phone": m.contact_phone, "name": contact_name},
        "message": message_object(m, base),
    });
    event(EventKind::MessageReceived, channel, data, m.created_at)
}

/// `message.ack`: delivery or read status changed. `message_id` is disparo's id;
/// `provider_message_id` the provider's, as in every other answer and event (issue 55);
/// `engine_message_id` the same value under its old name, kept for existing receivers.
pub fn message_ack(channel: &ChannelRecord, a: &AppliedStatus) -> NewEvent {
    let ack = a.reported.ack();
    let m = &a.message;
    let at = match a.reported {
        ProviderStatus::Sent => m.sent_at,
        ProviderStatus::Delivered => m.delivered_at,
        ProviderStatus::Read | ProviderStatus::Played => m.read_at,
        ProviderStatus::Failed => m.failed_at,
    }
    .unwrap_or(m.created_at);
    let mut data = json!({
        "message_id": m.id,
        "provider_message_id": m.provider_message_id,
        "engine_message_id": m.provider_message_id,
        "ack": ack.value(),
        "ack_label": ack.label(),
        "status": m.status.as_str(),
        "to": m.contact_phone,
    });
    if a.reported == ProviderStatus::Failed {
        data["error"] =
            json!({"code": m.error_code, "title": m.error_title, "details": m.error_detail});
    }
    event(EventKind::MessageAck, channel, data, at)
}

/// `session.status`: the number connected or disconnected.
pub fn session_status(
    channel: &ChannelRecord,
    status: engine::channel::ChannelStatus,
    previous: engine::channel::ChannelStatus,
    at: i64,
) -> NewEvent {
    let data = json!({"status": status.as_str(), "previous_status": previous.as_str(), "phone": channel.phone});
    event(EventKind::SessionStatus, channel, data, at)
}

/// `campaign.status`: a campaign that sends through this number moved to `status` (issue 17).
pub fn campaign_status(
    channel: &ChannelRecord,
    campaign: &storage::campaigns::CampaignRecord,
    status: &str,
    reason: Option<&str>,
    at: i64,
) -> NewEvent {
    let data = json!({
        "campaign_id": campaign.id,
        "name": campaign.name,
        "status": status,
        "previous_status": campaign.state,
        "reason": reason,
    });
    event(EventKind::CampaignStatus, channel, data, at)
}
