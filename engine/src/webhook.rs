//! Outbound webhooks: event kinds, the retry schedule and the signature integrators verify.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The event kinds an integrator can subscribe to (spec "Events").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
    pub const SUBSCRIBABLE: [EventKind; 6] = [
        EventKind::MessageReceived,
        EventKind::MessageSent,
        EventKind::MessageAck,
        EventKind::TemplateStatus,
        EventKind::SessionStatus,
        EventKind::CampaignStatus,
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let h = signature_header("whsec_x", b"{\"a\":1}");
        assert!(verify_signature("whsec_x", b"{\"a\":1}", &h));
        assert!(!verify_signature("whsec_y", b"{\"a\":1}", &h));
        assert!(!verify_signature("whsec_x", b"{\"a\":2}", &h));
        assert!(!verify_signature("whsec_x", b"{\"a\":1}", "sha256=zz"));
    }
}
