//! The simulator's in-memory state: businesses, WABAs, numbers, templates, windows, the ledger.

use serde::Serialize;
use std::collections::{HashMap, VecDeque};

/// A business portfolio: owns WABAs; its system-user token and app secret reach all of them.
#[derive(Debug, Clone)]
pub struct Business {
    /// Business id.
    pub id: String,
    /// The access token that reaches this business's assets.
    pub access_token: String,
    /// The app secret that signs this business's webhooks.
    pub app_secret: String,
    /// Whether the business's payment method works; when not, business-initiated sends fail
    /// with 131042 and WABAs report it in `health_status` (error 141006).
    pub payment_ok: bool,
    /// The business verification status `GET /{business_id}?fields=verification_status`
    /// answers (`verified` by default; `pending`, `not_verified`, `rejected`…).
    pub verification_status: String,
}

/// A WhatsApp Business Account.
#[derive(Debug, Clone)]
pub struct Waba {
    /// WABA id.
    pub id: String,
    /// Owning business id.
    pub business_id: String,
    /// Display name.
    pub name: String,
    /// Message templates, one per (name, language).
    pub templates: Vec<Template>,
    /// Apps subscribed to the WABA's webhooks (`/subscribed_apps`).
    pub subscribed_apps: Vec<serde_json::Value>,
    /// `DISABLE` / `SCHEDULE_FOR_DISABLE` after an account update; `None` when in good
    /// standing.
    pub ban_state: Option<String>,
    /// Active restriction types (`RESTRICTED_BIZ_INITIATED_MESSAGING`…).
    pub restrictions: Vec<String>,
}

/// A message template in a WABA.
#[derive(Debug, Clone, Serialize)]
pub struct Template {
    /// Template id (numeric string).
    pub id: String,
    /// Name (`^[a-z0-9_]+$`).
    pub name: String,
    /// Locale.
    pub language: String,
    /// `MARKETING`, `UTILITY`, `AUTHENTICATION`.
    pub category: String,
    /// `APPROVED`, `PENDING`, `REJECTED`, `PAUSED`, `DISABLED`.
    pub status: String,
    /// Components as created.
    pub components: serde_json::Value,
    /// What a send of it must carry, read from `components` (checked at every send).
    #[serde(skip)]
    pub layout: engine::template::Layout,
    /// When each edit of the template was accepted, ms (PROVIDER.md §6.3 limits edits of an
    /// approved template to 1 per 24 h and 10 per 30 days).
    #[serde(skip)]
    pub edits: Vec<i64>,
}

/// A token bucket: `capacity` tokens, refilled at `per_sec` tokens per second.
#[derive(Debug, Clone)]
pub struct Bucket {
    tokens: f64,
    capacity: f64,
    per_ms: f64,
    last_ms: i64,
}

impl Bucket {
    /// A full bucket.
    pub fn new(capacity: f64, per_sec: f64, now_ms: i64) -> Self {
        Self {
            tokens: capacity,
            capacity,
            per_ms: per_sec / 1000.0,
            last_ms: now_ms,
        }
    }

    /// Takes one token if there is one.
    pub fn try_take(&mut self, now_ms: i64) -> bool {
        let elapsed = (now_ms - self.last_ms).max(0) as f64;
        self.tokens = (self.tokens + elapsed * self.per_ms).min(self.capacity);
        self.last_ms = now_ms;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// A business phone number.
#[derive(Debug, Clone)]
pub struct Number {
    /// Phone number id.
    pub id: String,
    /// WABA id.
    pub waba_id: String,
    /// Business id.
    pub business_id: String,
    /// Display number (digits).
    pub display_phone_number: String,
    /// Display name.
    pub verified_name: String,
    /// `GREEN`, `YELLOW`, `RED`, `UNKNOWN`.
    pub quality: String,
    /// `TIER_250`, `TIER_2K`… (`whatsapp_business_manager_messaging_limit`).
    pub tier: String,
    /// Messages per second allowed (default 80, §10.1).
    pub throughput_mps: u32,
    /// Whether `/register` completed; sends need it (133010 otherwise).
    pub registered: bool,
    /// Country calling code given at creation.
    pub cc: String,
    /// The last verification code sent by `/request_code` (read it with
    /// `GET /_sim/numbers/{id}/code`, as the SMS would).
    pub verification_code: Option<String>,
    /// Whether `/verify_code` succeeded.
    pub code_verified: bool,
    /// The two-step verification PIN, when set (then `/register` must give it).
    pub pin: Option<String>,
    /// Throughput bucket (capacity = one second of throughput).
    pub bucket: Bucket,
    /// Pair-rate buckets per recipient: 45-message burst, 1 per 6 s (§10.3).
    pub pairs: HashMap<String, Bucket>,
    /// Sends refused with 130429 (over the number's throughput) since it was created, read by
    /// `GET /_sim/stats` (`throughput_refusals`).
    pub throughput_refusals: u64,
}

/// An uploaded (or inbound) media file.
#[derive(Debug, Clone)]
pub struct Media {
    /// Media id.
    pub id: String,
    /// Business that may read it.
    pub business_id: String,
    /// Number it was uploaded to / received on.
    pub phone_number_id: String,
    /// MIME type.
    pub mime_type: String,
    /// The bytes.
    pub bytes: bytes::Bytes,
    /// Lowercase hex SHA-256 of the bytes.
    pub sha256: String,
}

/// Faults injected through `PUT /_sim/faults`.
#[derive(Debug, Clone, Default, serde::Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Faults {
    /// Share of Graph requests answered HTTP 500 (code 2, transient), 0 to 1.
    #[serde(default)]
    pub share_5xx: f64,
    /// Share of Graph requests that hang for `timeout_ms` before answering 504, 0 to 1.
    #[serde(default)]
    pub share_timeout: f64,
    /// How long a "timeout" hangs, ms (default 30000: longer than the usual client timeout).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Added latency: p50 and p99 in ms (piecewise-linear between them).
    #[serde(default)]
    pub latency_ms: Option<Latency>,
    /// Holds every Graph answer this long (ms) after the request was handled: what the request
    /// started (a template review, a message's status webhooks) goes on meanwhile, so a webhook
    /// can arrive before the answer, as it can from the real provider.
    #[serde(default)]
    pub answer_delay_ms: Option<u64>,
    /// The next Graph requests to fail with these codes.
    #[serde(default)]
    pub next_errors: Vec<NextError>,
}

/// Latency percentiles, ms.
#[derive(Debug, Clone, Copy, Default, serde::Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Latency {
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
}

/// A queued error: the next `count` requests to the node (a number or a WABA, or any node when
/// neither is given) answer Graph error `code`.
#[derive(Debug, Clone, serde::Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NextError {
    /// Only requests to this number (its node and edges).
    #[serde(default)]
    pub phone_number_id: Option<String>,
    /// Only requests to this WABA (its node and edges).
    #[serde(default)]
    pub waba_id: Option<String>,
    /// Only requests to this edge: the last path segment (`request_code`, `messages`, …).
    #[serde(default)]
    pub edge: Option<String>,
    /// Graph error code (see PROVIDER.md §7.1).
    pub code: i64,
    /// How many requests (default 1).
    #[serde(default = "one")]
    pub count: u32,
}

fn one() -> u32 {
    1
}

/// One accepted send, as the ledger keeps it.
#[derive(Debug, Clone, Serialize)]
pub struct SentRecord {
    /// `wamid`.
    pub id: String,
    /// Recipient.
    pub to: String,
    /// Message type.
    #[serde(rename = "type")]
    pub kind: String,
    /// The request body as received (bytes; rendered as JSON by the control API).
    #[serde(serialize_with = "as_json")]
    pub payload: bytes::Bytes,
    /// Acceptance time (ms since epoch).
    pub at: i64,
}

fn as_json<S: serde::Serializer>(b: &bytes::Bytes, s: S) -> Result<S::Ok, S::Error> {
    let v: serde_json::Value = serde_json::from_slice(b).unwrap_or(serde_json::Value::Null);
    v.serialize(s)
}

/// Every accepted send: totals, a bounded recent list per number, and per-recipient template
/// counts (what duplicate checks read).
#[derive(Debug, Default)]
pub struct Ledger {
    /// Accepted sends in all.
    pub total: u64,
    /// Accepted sends per number.
    pub per_number: HashMap<String, u64>,
    /// Most recent sends per number (bounded).
    pub recent: HashMap<String, VecDeque<SentRecord>>,
    /// recipient → template name → sends.
    pub per_recipient: HashMap<String, HashMap<String, u64>>,
    /// How many recent sends are kept per number.
    pub recent_cap: usize,
}

impl Ledger {
    /// Records an accepted send.
    pub fn record(&mut self, number_id: &str, template: Option<&str>, rec: SentRecord) {
        self.total += 1;
        *self.per_number.entry(number_id.to_string()).or_default() += 1;
        if let Some(t) = template {
            *self
                .per_recipient
                .entry(rec.to.clone())
                .or_default()
                .entry(t.to_string())
                .or_default() += 1;
        }
        let q = self.recent.entry(number_id.to_string()).or_default();
        if q.len() >= self.recent_cap.max(1) {
            q.pop_front();
        }
        q.push_back(rec);
    }
}
