//! Outbound webhooks: event kinds, the retry schedule and the signature integrators verify.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The event kinds an integrator can subscribe to (spec "Events").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
pub enum EventKind {
    /// `message.received`: a contact sent a message.
    #[serde(rename = "message.received")]
    MessageReceived,
    /// `message.sent`: a message was accepted by the provider (API or campaign).
    #[serde(rename = "message.sent")]
    MessageSent,
    /// `message.ack`: delivery or read status changed.
    #[serde(rename = "message.ack")]
    MessageAck,
    /// `template.status`: the provider approved, rejected, paused or disabled a template.
    #[serde(rename = "template.status")]
    TemplateStatus,
    /// `session.status`: the number connected or disconnected.
    #[serde(rename = "session.status")]
    SessionStatus,
    /// `campaign.status`: a campaign of the number started, paused, resumed, completed or was
    /// cancelled (issue 17); one event per number of the campaign.
    #[serde(rename = "campaign.status")]
    CampaignStatus,
    /// `channel.health`: the number's status, quality, tier, WABA standing or health code
    /// changed, or its 24 h headroom ran out or came back (issue 48; D-121).
    #[serde(rename = "channel.health")]
    ChannelHealth,
    /// `waba.standing`: the provider restricted, banned, flagged or cleared the number's WABA
    /// (`account_update`); sent to each of the WABA's numbers (D-121).
    #[serde(rename = "waba.standing")]
    WabaStanding,
    /// `bm.tier`: the provider changed the portfolio limit of the number's BM; sent to each of
    /// the BM's numbers (D-121).
    #[serde(rename = "bm.tier")]
    BmTier,
    /// `ping`: sent by `POST /webhooks/{id}/test`; every subscription receives it.
    #[serde(rename = "ping")]
    Ping,
    /// `webhook.disabled`: another subscription of the account was disabled after failing for
    /// too long; every active subscription of the account receives it.
    #[serde(rename = "webhook.disabled")]
    WebhookDisabled,
}

impl EventKind {
    /// Every kind a subscription may list.
    pub const SUBSCRIBABLE: [EventKind; 9] = [
        EventKind::MessageReceived,
        EventKind::MessageSent,
        EventKind::MessageAck,
        EventKind::TemplateStatus,
        EventKind::SessionStatus,
        EventKind::CampaignStatus,
        EventKind::ChannelHealth,
        EventKind::WabaStanding,
        EventKind::BmTier,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::MessageReceived => "message.received",
            EventKind::MessageSent => "message.sent",
            EventKind::MessageAck => "message.ack",
            EventKind::TemplateStatus => "template.status",
            EventKind::SessionStatus => "session.status",
            EventKind::CampaignStatus => "campaign.status",
            EventKind::ChannelHealth => "channel.health",
            EventKind::WabaStanding => "waba.standing",
            EventKind::BmTier => "bm.tier",
            EventKind::Ping => "ping",
            EventKind::WebhookDisabled => "webhook.disabled",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::SUBSCRIBABLE
            .into_iter()
            .chain([EventKind::Ping, EventKind::WebhookDisabled])
            .find(|k| k.as_str() == s)
    }
}

/// The delays between attempts of one delivery, in milliseconds: entry `i` is the wait after
/// attempt `i + 1` failed. When the list is exhausted the delivery is marked failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrySchedule {
    delays_ms: Vec<u64>,
}

impl Default for RetrySchedule {
    /// 11 attempts over about 23 hours: immediately, then after 5 s, 30 s, 2 min, 10 min,
    /// 30 min, 1 h, 2 h, 4 h, 6 h and 8 h (decision D-005).
    fn default() -> Self {
        Self {
            delays_ms: [5, 30, 120, 600, 1800, 3600, 7200, 14_400, 21_600, 28_800]
                .into_iter()
                .map(|s| s * 1000)
                .collect(),
        }
    }
}

impl RetrySchedule {
    /// A schedule from explicit delays (ms); used by tests and the `DISPARO_WEBHOOK_RETRY_MS`
    /// setting.
    pub fn from_delays_ms(delays_ms: Vec<u64>) -> Self {
        Self { delays_ms }
    }

    /// Total attempts, the first one included.
    pub fn max_attempts(&self) -> u32 {
        self.delays_ms.len() as u32 + 1
    }

    /// The delay before the next attempt after `attempts` failed attempts, with ±20 % jitter
    /// taken from `jitter` in `[0, 1)`; `None` when no attempt is left.
    pub fn next_delay_ms(&self, attempts: u32, jitter: f64) -> Option<u64> {
        let base = *self.delays_ms.get((attempts as usize).checked_sub(1)?)?;
        let factor = 0.8 + 0.4 * jitter.clamp(0.0, 1.0);
        Some((base as f64 * factor).round() as u64)
    }
}

/// The `X-Svc-Signature` header value for `body`: `sha256=` + lowercase hex HMAC-SHA256 of the
/// raw body bytes keyed with the subscription's secret (spec "Authentication" item 4).
pub fn signature_header(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Checks an `X-Svc-Signature` header against `body` in constant time.
pub fn verify_signature(secret: &str, body: &[u8], header: &str) -> bool {
    let Some(hex_sig) = header.strip_prefix("sha256=") else {
        return false;
    };
    let Ok(sig) = hex::decode(hex_sig) else {
        return false;
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(body);
    mac.verify_slice(&sig).is_ok()
}

/// How far a Standard Webhooks timestamp may be from the verifier's clock, s (the official
/// libraries' tolerance: five minutes either way).
pub const STANDARD_TOLERANCE_S: i64 = 300;

/// The HMAC key of a Standard Webhooks signature for `secret`: the bytes its base64 part
/// encodes (`whsec_<base64>`, the prefix optional, padding optional), as the official
/// libraries read it; a secret that is not base64 signs with its own UTF-8 bytes (disparo's
/// secrets always are: `whsec_` + 32 base64 characters, 24 bytes).
fn standard_key(secret: &str) -> Vec<u8> {
    use base64::engine::{general_purpose, DecodePaddingMode, GeneralPurpose};
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        general_purpose::GeneralPurposeConfig::new()
            .with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
    base64::Engine::decode(&LENIENT, encoded)
        .ok()
        .filter(|k| !k.is_empty())
        .unwrap_or_else(|| secret.as_bytes().to_vec())
}

fn standard_mac(secret: &str, msg_id: &str, timestamp_s: i64, body: &[u8]) -> Hmac<Sha256> {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(&standard_key(secret)).expect("HMAC takes any key");
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp_s.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// One signature of the `webhook-signature` header (Standard Webhooks, standardwebhooks.com):
/// `v1,` + base64 of HMAC-SHA256 over `{webhook-id}.{webhook-timestamp}.{raw body}`, keyed
/// with the secret's decoded bytes. `timestamp_s`: the `webhook-timestamp` value, seconds
/// since the epoch. Several signatures (a rotation's overlap) are joined with a space.
pub fn standard_signature(secret: &str, msg_id: &str, timestamp_s: i64, body: &[u8]) -> String {
    let sig = standard_mac(secret, msg_id, timestamp_s, body)
        .finalize()
        .into_bytes();
    format!(
        "v1,{}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, sig)
    )
}

/// Checks a delivery as a Standard Webhooks receiver does: `timestamp_s` within
/// [`STANDARD_TOLERANCE_S`] of `now_s`, and one of the header's space-separated `v1,`
/// signatures made with `secret` over `msg_id`, `timestamp_s` and `body` (compared in constant
/// time). A replay older than the tolerance fails.
pub fn verify_standard(
    secret: &str,
    msg_id: &str,
    timestamp_s: i64,
    now_s: i64,
    body: &[u8],
    header: &str,
) -> bool {
    if (now_s - timestamp_s).abs() > STANDARD_TOLERANCE_S {
        return false;
    }
    header.split(' ').any(|part| {
        let Some(encoded) = part.strip_prefix("v1,") else {
            return false;
        };
        let Ok(sig) = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, encoded)
        else {
            return false;
        };
        standard_mac(secret, msg_id, timestamp_s, body)
            .verify_slice(&sig)
            .is_ok()
    })
}

/// The ordering key of an event inside one subscription (issue 17, D-065): deliveries with the
/// same key reach the endpoint strictly in the order they were written; deliveries with
/// different keys may be in flight at once. The conversation is the unit of order:
///
/// - `contact:<phone>` for `message.received`/`message.sent` (`data.contact.phone`),
///   `message.ack` (`data.to`) and forwarded provider payloads naming a contact
///   (`messages[0].from`, `statuses[0].recipient_id`, `contacts[0].wa_id`);
/// - `template:<id>`, `campaign:<id>` for `template.status` and `campaign.status`;
/// - `session` for `session.status`, `event:<name>` for anything else (`ping`,
///   `webhook.disabled`, provider fields without a contact).
pub fn order_key(event: &str, data: &serde_json::Value) -> String {
    let text = |pointer: &str| {
        data.pointer(pointer).and_then(|v| match v {
            serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
    };
    let contact = match event {
        "message.received" | "message.sent" => text("/contact/phone"),
        "message.ack" => text("/to"),
        _ => None,
    }
    .or_else(|| text("/messages/0/from"))
    .or_else(|| text("/statuses/0/recipient_id"))
    .or_else(|| text("/contacts/0/wa_id"));
    if let Some(c) = contact {
        return format!("contact:{c}");
    }
    match (event, text("/template_id"), text("/campaign_id")) {
        ("template.status", Some(id), _) => format!("template:{id}"),
        ("campaign.status", _, Some(id)) => format!("campaign:{id}"),
        ("session.status", ..) => "session".to_owned(),
        (other, ..) => format!("event:{other}"),
    }
}

/// One pending delivery as the dispatcher's picker sees it: its id, subscription, ordering
/// key ([`order_key`]) and when its next attempt is due (ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingDelivery {
    /// Delivery id (the outbox's order).
    pub id: i64,
    /// Subscription (the endpoint).
    pub subscription_id: i64,
    /// Ordering key.
    pub order_key: String,
    /// Next attempt, ms.
    pub next_attempt_at: i64,
}

/// Picks the deliveries to attempt now (D-065): from each subscription's first pending
/// deliveries in id order, the head of each ordering key — the earliest pending delivery of
/// that key — when it is due at `now`, its key has no attempt in flight (`busy` answers for a
/// subscription and key) and the subscription has fewer than `per_endpoint` attempts in
/// flight (`in_flight` per subscription) counting those picked. A key whose head waits for a
/// retry holds only that key's later deliveries; a delivery that exhausted its attempts is no
/// longer pending and holds nothing. At most `limit`, earliest due first.
pub fn pick_due(
    pending: &[PendingDelivery],
    now: i64,
    per_endpoint: usize,
    limit: usize,
    in_flight: impl Fn(i64) -> usize,
    busy: impl Fn(i64, &str) -> bool,
) -> Vec<i64> {
    use std::collections::{HashMap, HashSet};
    let mut rows: Vec<&PendingDelivery> = pending.iter().collect();
    rows.sort_by_key(|d| (d.subscription_id, d.id));
    let mut seen: HashSet<(i64, &str)> = HashSet::new();
    let mut taken: HashMap<i64, usize> = HashMap::new();
    let mut picked: Vec<&PendingDelivery> = Vec::new();
    for d in rows {
        if !seen.insert((d.subscription_id, d.order_key.as_str())) {
            continue; // behind its key's head
        }
        if d.next_attempt_at > now || busy(d.subscription_id, &d.order_key) {
            continue;
        }
        let n = taken.entry(d.subscription_id).or_default();
        if in_flight(d.subscription_id) + *n >= per_endpoint {
            continue;
        }
        *n += 1;
        picked.push(d);
    }
    picked.sort_by_key(|d| (d.next_attempt_at, d.id));
    picked.into_iter().take(limit).map(|d| d.id).collect()
}

/// Most outbound webhook subscriptions one channel may have (issue 46: each one multiplies
/// every event the number has into one more delivery).
pub const MAX_SUBSCRIPTIONS_PER_CHANNEL: i64 = 20;

#[cfg(test)]
mod tests {
    use super::*;

    fn pd(id: i64, sub: i64, key: &str, at: i64) -> PendingDelivery {
        PendingDelivery {
            id,
            subscription_id: sub,
            order_key: key.into(),
            next_attempt_at: at,
        }
    }

    #[test]
    fn order_keys_follow_the_conversation() {
        use serde_json::json;
        let sent = json!({"contact": {"phone": "5511999990001"}, "message": {}});
        assert_eq!(order_key("message.sent", &sent), "contact:5511999990001");
        assert_eq!(
            order_key("message.ack", &json!({"to": "5511999990001"})),
            "contact:5511999990001"
        );
        let forwarded = json!({"statuses": [{"recipient_id": "5511"}]});
        assert_eq!(order_key("messages", &forwarded), "contact:5511");
        assert_eq!(
            order_key("campaign.status", &json!({"campaign_id": 7})),
            "campaign:7"
        );
        assert_eq!(order_key("session.status", &json!({})), "session");
        assert_eq!(order_key("ping", &json!({})), "event:ping");
    }

    #[test]
    fn a_retried_head_holds_only_its_own_key() {
        // Contact a's head waits for a retry at 500; b and c are due at 100.
        let rows = [
            pd(1, 9, "contact:a", 500),
            pd(2, 9, "contact:b", 100),
            pd(3, 9, "contact:a", 100),
            pd(4, 9, "contact:c", 100),
            pd(5, 9, "contact:b", 100),
        ];
        let got = pick_due(&rows, 200, 8, 10, |_| 0, |_, _| false);
        assert_eq!(got, vec![2, 4]);
        // Once a's head is due it goes before its follower, never together.
        let got = pick_due(&rows, 600, 8, 10, |_| 0, |_, _| false);
        assert_eq!(got, vec![2, 4, 1]);
    }

    #[test]
    fn a_busy_key_and_the_endpoint_bound_hold_deliveries() {
        let rows = [
            pd(1, 1, "contact:a", 0),
            pd(2, 1, "contact:b", 0),
            pd(3, 1, "contact:c", 0),
            pd(4, 2, "contact:a", 0),
        ];
        // `a` of subscription 1 is in flight: its key waits, subscription 2's `a` does not.
        let got = pick_due(
            &rows,
            10,
            8,
            10,
            |s| usize::from(s == 1),
            |s, k| s == 1 && k == "contact:a",
        );
        assert_eq!(got, vec![2, 3, 4]);
        // Two per endpoint, one already in flight: one more for subscription 1.
        let got = pick_due(
            &rows,
            10,
            2,
            10,
            |s| usize::from(s == 1),
            |s, k| s == 1 && k == "contact:a",
        );
        assert_eq!(got, vec![2, 4]);
        assert_eq!(pick_due(&rows, 10, 8, 1, |_| 0, |_, _| false), vec![1]);
    }

    #[test]
    fn event_kinds_round_trip() {
        for k in EventKind::SUBSCRIBABLE {
            assert_eq!(EventKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(EventKind::parse("message.deleted"), None);
    }

    #[test]
    fn the_default_schedule_spans_about_a_day() {
        let s = RetrySchedule::default();
        assert_eq!(s.max_attempts(), 11);
        let total: u64 = (1..s.max_attempts())
            .map(|a| s.next_delay_ms(a, 0.5).unwrap())
            .sum();
        assert!(
            (20 * 3600 * 1000..26 * 3600 * 1000).contains(&total),
            "{total}"
        );
        assert_eq!(s.next_delay_ms(s.max_attempts(), 0.5), None);
        assert_eq!(s.next_delay_ms(0, 0.5), None);
    }

    #[test]
    fn jitter_stays_within_twenty_percent() {
        let s = RetrySchedule::from_delays_ms(vec![1000]);
        assert_eq!(s.next_delay_ms(1, 0.0), Some(800));
        assert_eq!(s.next_delay_ms(1, 0.999_999), Some(1200));
    }

    #[test]
    fn signatures_verify_and_forgeries_do_not() {
        // The Standard Webhooks example; the official Python package (standardwebhooks 1.1.0)
        // signs it the same.
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = br#"{"test": 2432232314}"#;
        let sig = standard_signature(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body);
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        assert!(verify_standard(
            secret,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            1614265330 + 299,
            body,
            &format!("v1,bad {sig}")
        ));
        assert!(!verify_standard(
            secret,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            1614265330 + 301,
            body,
            &sig
        ));
        assert!(!verify_standard(
            secret,
            "msg_other",
            1614265330,
            1614265330,
            body,
            &sig
        ));
        assert!(!verify_standard(
            "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            1614265330,
            body,
            &sig
        ));
        let h = signature_header("whsec_x", b"{\"a\":1}");
        assert!(verify_signature("whsec_x", b"{\"a\":1}", &h));
        assert!(!verify_signature("whsec_y", b"{\"a\":1}", &h));
        assert!(!verify_signature("whsec_x", b"{\"a\":2}", &h));
        assert!(!verify_signature("whsec_x", b"{\"a\":1}", "sha256=zz"));
    }
}
