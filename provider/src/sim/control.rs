//! The simulator's control API under `/_sim/`: create numbers, inject inbound messages and
//! provider events, read the ledger of accepted sends. Answers use `{"data": …}`.

use super::state::{Bucket, Business, Number, Template, Waba};
use super::webhooks::EmissionKind;
use super::{now_ms, Inner};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub(crate) fn routes() -> Router<Arc<Inner>> {
    Router::new()
        .route("/_sim/numbers", post(post_number))
        .route("/_sim/numbers/{id}/sent", get(get_sent))
        .route("/_sim/numbers/{id}/quality", post(post_quality))
        .route("/_sim/sent/summary", get(get_summary))
        .route("/_sim/inbound", post(post_inbound))
        .route("/_sim/config", put(put_config))
        .route("/_sim/stats", get(get_stats))
        .route("/_sim/numbers/{id}/code", get(get_code))
        .route("/_sim/numbers/{id}", axum::routing::delete(delete_number))
        .route("/_sim/businesses/{id}/payment", post(post_payment))
        .route(
            "/_sim/businesses/{id}/verification",
            post(post_verification),
        )
        .route("/_sim/templates/{id}/status", post(post_template_status))
        .route("/_sim/wabas/{id}/account-update", post(post_account_update))
        .route("/_sim/faults", put(put_faults).get(get_faults))
        .route("/_sim/embedded-signup", post(post_signup))
        .route("/_sim/lookaside/{id}", get(super::media::download))
        .route("/_sim/profile-pictures/{id}", get(super::profile::picture))
}

fn bad_request(message: impl Into<String>) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"message": message.into()})),
    )
        .into_response()
}

fn not_found(what: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(json!({"message": format!("{what} not found")})),
    )
        .into_response()
}

/// `POST /_sim/numbers` body. Every field is optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateNumber {
    /// Digits; default: a random Brazilian mobile number (55 + area 11 + 9 digits).
    pub display_phone_number: Option<String>,
    /// Display name; default `Disparo Sim`.
    pub verified_name: Option<String>,
    /// `GREEN` (default), `YELLOW`, `RED`.
    pub quality: Option<String>,
    /// `TIER_250` (default), `TIER_2K`, `TIER_10K`, `TIER_100K`, `TIER_UNLIMITED`.
    pub tier: Option<String>,
    /// Messages per second (default: the simulator's `default_throughput_mps`).
    pub throughput_mps: Option<u32>,
    /// Put the number in this existing WABA (sharing its business token and app secret);
    /// default: a new business and WABA. With `access_token` given and an unknown WABA id, a
    /// WABA with that id is created (adoption after a restart).
    pub waba_id: Option<String>,
    /// Whether the number is registered (default true); unregistered numbers cannot send.
    pub registered: Option<bool>,
    /// Adopt a known id instead of generating one (to re-create a number after a restart).
    pub phone_number_id: Option<String>,
    /// Adopt a known token for a new business.
    pub access_token: Option<String>,
    /// Adopt a known app secret for a new business.
    pub app_secret: Option<String>,
    /// A two-step verification PIN already set on the number (then `/register` needs it).
    pub pin: Option<String>,
}

/// `POST /_sim/numbers` answer (`data`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CreatedNumber {
    /// The number's id.
    pub phone_number_id: String,
    /// Its WABA.
    pub waba_id: String,
    /// Its business.
    pub business_id: String,
    /// A token that reaches the business's assets.
    pub access_token: String,
    /// The app secret that signs its webhooks.
    pub app_secret: String,
    /// Display number.
    pub display_phone_number: String,
    /// Display name.
    pub verified_name: String,
}

/// The sample template every new WABA has at the provider.
fn hello_world(inner: &Inner) -> Template {
    let mut t = Template {
        id: inner.digits(16),
        name: "hello_world".into(),
        language: "en_US".into(),
        category: "UTILITY".into(),
        status: "APPROVED".into(),
        components: json!([
            {"type": "HEADER", "format": "TEXT", "text": "Hello World"},
            {"type": "BODY", "text": "Welcome and congratulations!! This message demonstrates your ability to send a WhatsApp message notification from the Cloud API, hosted by Meta. Thank you for taking the time to test with us."},
            {"type": "FOOTER", "text": "WhatsApp Business Platform sample message"}
        ]),
        layout: engine::template::Layout::default(),
        edits: Vec::new(),
    };
    t.layout = engine::template::Layout::from_components(&t.components);
    t
}

pub(crate) fn create_number(inner: &Inner, req: CreateNumber) -> Result<CreatedNumber, String> {
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    if let Some(id) = &req.phone_number_id {
        if let Some(n) = inner.numbers.get(id) {
            let b = inner
                .businesses
                .get(&n.business_id)
                .ok_or("business vanished")?;
            if req
                .access_token
                .as_deref()
                .is_some_and(|t| t != b.access_token)
            {
                return Err(format!("phone_number_id {id} exists with another token"));
            }
            return Ok(CreatedNumber {
                phone_number_id: n.id.clone(),
                waba_id: n.waba_id.clone(),
                business_id: n.business_id.clone(),
                access_token: b.access_token.clone(),
                app_secret: b.app_secret.clone(),
                display_phone_number: n.display_phone_number.clone(),
                verified_name: n.verified_name.clone(),
            });
        }
    }
    let quality = req
        .quality
        .unwrap_or_else(|| "GREEN".into())
        .to_ascii_uppercase();
    if !["GREEN", "YELLOW", "RED", "UNKNOWN"].contains(&quality.as_str()) {
        return Err(format!(
            "quality must be GREEN, YELLOW, RED or UNKNOWN, not {quality}"
        ));
    }
    let tier = req
        .tier
        .unwrap_or_else(|| "TIER_250".into())
        .to_ascii_uppercase();
    if engine::channel::Tier::parse(&tier).is_none() {
        return Err(format!("unknown tier {tier}"));
    }
    let known_waba = req.waba_id.as_ref().and_then(|w| {
        inner
            .wabas
            .get(w)
            .map(|x| (x.id.clone(), x.business_id.clone()))
    });
    let (waba_id, business_id) = match (&req.waba_id, known_waba) {
        (Some(_), Some(ids)) => ids,
        (Some(w), None) if req.access_token.is_none() => return Err(format!("waba {w} not found")),
        _ => {
            let business = Business {
                id: inner.digits(15),
                access_token: req
                    .access_token
                    .clone()
                    .unwrap_or_else(|| format!("EAAG{}", inner.random_from(ALNUM, 60))),
                app_secret: req
                    .app_secret
                    .clone()
                    .or_else(|| inner.cfg.app_secret.clone())
                    .unwrap_or_else(|| inner.random_from(b"0123456789abcdef", 32)),
                payment_ok: true,
                verification_status: "verified".into(),
            };
            let waba = Waba {
                // Adoption (a known token with a known WABA id) keeps the WABA's id.
                id: req.waba_id.clone().unwrap_or_else(|| inner.digits(15)),
                business_id: business.id.clone(),
                name: req
                    .verified_name
                    .clone()
                    .unwrap_or_else(|| "Disparo Sim".into()),
                templates: vec![hello_world(inner)],
                subscribed_apps: Vec::new(),
                ban_state: None,
                restrictions: Vec::new(),
            };
            inner
                .tokens
                .insert(business.access_token.clone(), business.id.clone());
            let ids = (waba.id.clone(), business.id.clone());
            inner.businesses.insert(business.id.clone(), business);
            inner.wabas.insert(waba.id.clone(), waba);
            ids
        }
    };
    let display = match req.display_phone_number {
        Some(d) => {
            let digits: String = d.chars().filter(char::is_ascii_digit).collect();
            if digits.len() < 8 {
                return Err("display_phone_number needs at least 8 digits".into());
            }
            digits
        }
        None => format!("55119{}", inner.digits(8)),
    };
    let id = req.phone_number_id.unwrap_or_else(|| inner.digits(15));
    let mps = req
        .throughput_mps
        .unwrap_or(inner.cfg.default_throughput_mps)
        .max(1);
    let now = now_ms();
    let number = Number {
        id: id.clone(),
        waba_id: waba_id.clone(),
        business_id: business_id.clone(),
        display_phone_number: display.clone(),
        verified_name: req.verified_name.unwrap_or_else(|| "Disparo Sim".into()),
        quality,
        tier,
        throughput_mps: mps,
        registered: req.registered.unwrap_or(true),
        cc: display.chars().take(2).collect(),
        verification_code: None,
        code_verified: req.registered.unwrap_or(true),
        pin: req.pin.clone(),
        bucket: Bucket::new(mps as f64, mps as f64, now),
        pairs: HashMap::new(),
        throughput_refusals: 0,
    };
    let verified_name = number.verified_name.clone();
    inner.numbers.insert(id.clone(), number);
    let b = inner
        .businesses
        .get(&business_id)
        .ok_or("business vanished")?;
    Ok(CreatedNumber {
        phone_number_id: id,
        waba_id,
        business_id,
        access_token: b.access_token.clone(),
        app_secret: b.app_secret.clone(),
        display_phone_number: display,
        verified_name,
    })
}

async fn post_number(
    State(inner): State<Arc<Inner>>,
    body: Option<Json<CreateNumber>>,
) -> Response {
    let req = body.map(|Json(b)| b).unwrap_or_default();
    match create_number(&inner, req) {
        Ok(n) => (StatusCode::CREATED, Json(json!({ "data": n }))).into_response(),
        Err(e) => bad_request(e),
    }
}

#[derive(Deserialize)]
struct Limit {
    limit: Option<usize>,
}

async fn get_sent(
    State(inner): State<Arc<Inner>>,
    Path(id): Path<String>,
    Query(q): Query<Limit>,
) -> Response {
    if !inner.numbers.contains_key(&id) {
        return not_found("number");
    }
    let ledger = inner.ledger.lock().expect("ledger lock");
    let count = ledger.per_number.get(&id).copied().unwrap_or(0);
    let limit = q.limit.unwrap_or(100);
    let messages: Vec<_> = ledger
        .recent
        .get(&id)
        .map(|q| q.iter().rev().take(limit).cloned().collect())
        .unwrap_or_default();
    Json(json!({"data": {"count": count, "messages": messages}})).into_response()
}

async fn get_summary(State(inner): State<Arc<Inner>>) -> Response {
    let ledger = inner.ledger.lock().expect("ledger lock");
    Json(json!({"data": {
        "total": ledger.total,
        "per_number": ledger.per_number,
        "per_recipient": ledger.per_recipient,
    }}))
    .into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Inbound {
    phone_number_id: String,
    from: String,
    #[serde(rename = "type", default = "default_text")]
    kind: String,
    text: Option<String>,
    media: Option<Value>,
    name: Option<String>,
    /// The kind's object for every kind but text and media (`location`, `contacts`,
    /// `interactive`, `button`, `reaction`, `order`, `system`, or a kind the gateway does not
    /// know), as the provider sends it; for `unsupported`, its `errors` (default 131051).
    payload: Option<Value>,
    /// Other members of the message as the provider sends them (`context`, `referral`,
    /// `from_user_id`…).
    #[serde(default)]
    extra: serde_json::Map<String, Value>,
}

fn default_text() -> String {
    "text".into()
}

async fn post_inbound(State(inner): State<Arc<Inner>>, Json(req): Json<Inbound>) -> Response {
    let Some(n) = inner.numbers.get(&req.phone_number_id) else {
        return not_found("number");
    };
    let (waba, display, business) = (
        n.waba_id.clone(),
        n.display_phone_number.clone(),
        n.business_id.clone(),
    );
    drop(n);
    if !inner.businesses.contains_key(&business) {
        return not_found("business");
    }
    let from: String = req.from.chars().filter(char::is_ascii_digit).collect();
    if from.len() < 8 {
        return bad_request("from needs at least 8 digits");
    }
    let now = now_ms();
    let id = inner.wamid();
    let mut message =
        json!({"from": from, "id": id, "timestamp": (now / 1000).to_string(), "type": req.kind});
    match req.kind.as_str() {
        "text" => message["text"] = json!({"body": req.text.unwrap_or_default()}),
        "image" | "video" | "audio" | "document" | "sticker" => {
            let mut media = req.media.unwrap_or_else(|| json!({}));
            if media.get("mime_type").is_none() {
                media["mime_type"] = json!(match req.kind.as_str() {
                    "image" => "image/jpeg",
                    "video" => "video/mp4",
                    "audio" => "audio/ogg; codecs=opus",
                    "sticker" => "image/webp",
                    _ => "application/pdf",
                });
            }
            // The file the contact sent: `data_base64` when given, else generated bytes; it is
            // stored so the gateway can fetch it with the media endpoints (§3).
            let data = match media.get("data_base64").and_then(Value::as_str) {
                Some(b) => match base64::engine::general_purpose::STANDARD.decode(b) {
                    Ok(d) => d,
                    Err(_) => return bad_request("media.data_base64 is not base64"),
                },
                None => format!("simulated {} from {from}", req.kind).into_bytes(),
            };
            if let Some(m) = media.as_object_mut() {
                m.remove("data_base64");
            }
            let mime = media["mime_type"]
                .as_str()
                .unwrap_or("application/octet-stream")
                .to_string();
            let media_id = super::media::store(
                &inner,
                &business,
                &req.phone_number_id,
                &mime,
                bytes::Bytes::from(data),
            );
            let sha = inner
                .media
                .get(&media_id)
                .map(|m| m.sha256.clone())
                .unwrap_or_default();
            media["id"] = json!(media_id);
            media["sha256"] = json!(sha);
            message[req.kind.as_str()] = media;
        }
        "unsupported" | "unknown" => {
            message["errors"] = req.payload.unwrap_or_else(|| json!([{"code": 131051, "title": "Message type unknown", "message": "Message type unknown", "error_data": {"details": "Message type is currently not supported."}}]));
        }
        other => match req.payload {
            Some(p) => message[other] = p,
            None => return bad_request(format!("type {other} needs its payload")),
        },
    }
    for (k, v) in req.extra {
        if !["from", "id", "timestamp", "type"].contains(&k.as_str()) {
            message[k.as_str()] = v;
        }
    }
    inner
        .windows
        .insert((req.phone_number_id.clone(), from.clone()), now);
    let contact = match req.kind.as_str() {
        "system" => Value::Null,
        _ => {
            json!({"profile": {"name": req.name.unwrap_or_else(|| "Contato".into())}, "wa_id": from, "user_id": super::webhooks::bsuid(&from)})
        }
    };
    inner.emit_now(
        &business,
        waba,
        EmissionKind::Inbound {
            phone_number_id: req.phone_number_id,
            display,
            contact,
            message,
        },
    );
    (StatusCode::CREATED, Json(json!({"data": {"id": id}}))).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QualityChange {
    quality: String,
    tier: Option<String>,
}

async fn post_quality(
    State(inner): State<Arc<Inner>>,
    Path(id): Path<String>,
    Json(req): Json<QualityChange>,
) -> Response {
    let quality = req.quality.to_ascii_uppercase();
    if !["GREEN", "YELLOW", "RED"].contains(&quality.as_str()) {
        return bad_request("quality must be GREEN, YELLOW or RED");
    }
    if let Some(t) = &req.tier {
        if engine::channel::Tier::parse(t).is_none() {
            return bad_request(format!("unknown tier {t}"));
        }
    }
    let Some(mut n) = inner.numbers.get_mut(&id) else {
        return not_found("number");
    };
    let old_limit = n.tier.clone();
    let old_quality = std::mem::replace(&mut n.quality, quality.clone());
    if let Some(t) = &req.tier {
        n.tier = t.to_ascii_uppercase();
    }
    let event = match (old_quality.as_str(), quality.as_str()) {
        (_, "RED") => "FLAGGED",
        ("RED", _) => "UNFLAGGED",
        _ if n.tier != old_limit => "UPGRADE",
        _ => "ONBOARDING",
    };
    let mut value = json!({
        "display_phone_number": n.display_phone_number,
        "event": event,
        "current_limit": n.tier,
        "max_daily_conversations_per_business": n.tier,
        "quality_rating": quality,
    });
    if n.tier != old_limit {
        value["old_limit"] = json!(old_limit);
    }
    let (waba, business) = (n.waba_id.clone(), n.business_id.clone());
    drop(n);
    let kind = EmissionKind::Change {
        field: "phone_number_quality_update",
        value: value.clone(),
    };
    if !inner.emit_now(&business, waba, kind) {
        return not_found("business");
    }
    Json(json!({"data": value})).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigChange {
    webhook_url: Option<String>,
}

async fn put_config(State(inner): State<Arc<Inner>>, Json(req): Json<ConfigChange>) -> Response {
    *inner.webhook_url.write().await = req.webhook_url.clone();
    Json(json!({"data": {"webhook_url": req.webhook_url}})).into_response()
}

/// `GET /_sim/stats`: accepted sends, webhook emitter counters, the number count and
/// `throughput_refusals` — `{phone_number_id: count}` of sends refused with 130429 over a
/// number's throughput, only numbers with at least one refusal (issue 52: a cluster that
/// paces each number once shows none).
async fn get_stats(State(inner): State<Arc<Inner>>) -> Response {
    let s = &inner.emitter_stats;
    let total = inner.ledger.lock().expect("ledger lock").total;
    let refusals: serde_json::Map<String, Value> = inner
        .numbers
        .iter()
        .filter(|n| n.throughput_refusals > 0)
        .map(|n| (n.id.clone(), json!(n.throughput_refusals)))
        .collect();
    Json(json!({"data": {
        "accepted_sends": total,
        "webhook_events": s.events.load(Ordering::Relaxed),
        "webhook_posts": s.posts.load(Ordering::Relaxed),
        "webhook_retries": s.retries.load(Ordering::Relaxed),
        "webhooks_dropped": s.dropped.load(Ordering::Relaxed),
        "numbers": inner.numbers.len(),
        "throughput_refusals": refusals,
        "injected_faults": inner.injected_faults.load(Ordering::Relaxed),
    }}))
    .into_response()
}

async fn get_code(State(inner): State<Arc<Inner>>, Path(id): Path<String>) -> Response {
    match inner.numbers.get(&id) {
        Some(n) => match &n.verification_code {
            Some(code) => Json(json!({"data": {"code": code}})).into_response(),
            None => not_found("verification code (call request_code first)"),
        },
        None => not_found("number"),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TemplateStatus {
    status: String,
    reason: Option<String>,
}

/// `POST /_sim/templates/{template_id}/status` `{status, reason?}`: APPROVED, REJECTED, PAUSED,
/// DISABLED, PENDING (or an event such as REINSTATED); emits the template webhook.
async fn post_template_status(
    State(inner): State<Arc<Inner>>,
    Path(id): Path<String>,
    Json(req): Json<TemplateStatus>,
) -> Response {
    let status = req.status.to_ascii_uppercase();
    const KNOWN: [&str; 9] = [
        "APPROVED",
        "REJECTED",
        "PAUSED",
        "DISABLED",
        "PENDING",
        "FLAGGED",
        "REINSTATED",
        "UNPAUSED",
        "IN_APPEAL",
    ];
    if !KNOWN.contains(&status.as_str()) {
        return bad_request(format!("status must be one of {}", KNOWN.join(", ")));
    }
    if super::templates::set_status(&inner, &id, &status, req.reason.as_deref(), false) {
        Json(json!({"data": {"id": id, "status": status}})).into_response()
    } else {
        not_found("template")
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AccountUpdate {
    event: String,
    ban_state: Option<String>,
    restriction_type: Option<String>,
    violation_type: Option<String>,
}

/// `POST /_sim/wabas/{waba_id}/account-update`: `DISABLED_UPDATE` with `ban_state`
/// (`DISABLE`, `SCHEDULE_FOR_DISABLE`, `REINSTATE`), `ACCOUNT_RESTRICTION` with
/// `restriction_type`, `ACCOUNT_VIOLATION` with `violation_type`; emits `account_update`.
async fn post_account_update(
    State(inner): State<Arc<Inner>>,
    Path(id): Path<String>,
    Json(req): Json<AccountUpdate>,
) -> Response {
    let event = req.event.to_ascii_uppercase();
    let Some(mut w) = inner.wabas.get_mut(&id) else {
        return not_found("waba");
    };
    let value = match event.as_str() {
        "DISABLED_UPDATE" => {
            let state = req
                .ban_state
                .unwrap_or_else(|| "DISABLE".into())
                .to_ascii_uppercase();
            if !["DISABLE", "SCHEDULE_FOR_DISABLE", "REINSTATE"].contains(&state.as_str()) {
                return bad_request("ban_state must be DISABLE, SCHEDULE_FOR_DISABLE or REINSTATE");
            }
            w.ban_state = (state != "REINSTATE").then(|| state.clone());
            json!({"event": event, "ban_info": {"waba_ban_state": state, "waba_ban_date": "November 22, 2026"}})
        }
        "ACCOUNT_RESTRICTION" => {
            let kind = req
                .restriction_type
                .unwrap_or_else(|| "RESTRICTED_BIZ_INITIATED_MESSAGING".into());
            if !w.restrictions.contains(&kind) {
                w.restrictions.push(kind.clone());
            }
            json!({"event": event, "restriction_info": [{"restriction_type": kind, "expiration": (now_ms() / 1000) + 7 * 86_400}]})
        }
        "VERIFIED_ACCOUNT" => {
            // Legacy shape (PROVIDER.md §9.7): the business is verified.
            let phone = inner
                .numbers
                .iter()
                .find(|n| n.waba_id == id)
                .map(|n| {
                    n.display_phone_number
                        .chars()
                        .filter(char::is_ascii_digit)
                        .collect::<String>()
                })
                .unwrap_or_default();
            if let Some(mut b) = inner.businesses.get_mut(&w.business_id) {
                b.verification_status = "verified".into();
            }
            json!({"event": event, "phone_number": phone})
        }
        "ACCOUNT_VIOLATION" => {
            json!({"event": event, "violation_info": {"violation_type": req.violation_type.unwrap_or_else(|| "SCAM".into())}})
        }
        other => json!({"event": other}),
    };
    let business = w.business_id.clone();
    drop(w);
    let kind = EmissionKind::Change {
        field: "account_update",
        value: value.clone(),
    };
    if !inner.emit_now(&business, id, kind) {
        return not_found("business");
    }
    Json(json!({"data": value})).into_response()
}

/// `PUT /_sim/faults`: replaces the fault settings (see [`super::state::Faults`]).
async fn put_faults(
    State(inner): State<Arc<Inner>>,
    Json(f): Json<super::state::Faults>,
) -> Response {
    if !(0.0..=1.0).contains(&f.share_5xx) || !(0.0..=1.0).contains(&f.share_timeout) {
        return bad_request("shares must be between 0 and 1");
    }
    *inner.faults.lock().expect("faults lock") = f.clone();
    Json(json!({"data": f})).into_response()
}

async fn get_faults(State(inner): State<Arc<Inner>>) -> Response {
    let f = inner.faults.lock().expect("faults lock").clone();
    Json(json!({"data": f})).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Signup {
    waba_id: String,
}

/// `POST /_sim/embedded-signup` `{waba_id}` → `{code}`: what the Embedded Signup popup hands
/// the front end; exchange it at `GET /{version}/oauth/access_token`.
async fn post_signup(State(inner): State<Arc<Inner>>, Json(req): Json<Signup>) -> Response {
    let Some(business) = inner.wabas.get(&req.waba_id).map(|w| w.business_id.clone()) else {
        return not_found("waba");
    };
    let code = format!(
        "AQ{}",
        inner.random_from(
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
            40
        )
    );
    inner.signup_codes.insert(code.clone(), business);
    // The popup verifies the customer's number by code before it hands one back: the WABA's
    // numbers only await `/register` (PROVIDER.md §5.6 "Follow-up").
    for mut n in inner.numbers.iter_mut() {
        if n.waba_id == req.waba_id {
            n.code_verified = true;
        }
    }
    (
        StatusCode::CREATED,
        Json(json!({"data": {"code": code, "app_id": super::business::SIM_APP_ID}})),
    )
        .into_response()
}

/// `DELETE /_sim/numbers/{phone_number_id}`: the number disappears at the provider (deleted
/// from its WABA).
async fn delete_number(State(inner): State<Arc<Inner>>, Path(id): Path<String>) -> Response {
    match inner.numbers.remove(&id) {
        Some(_) => Json(json!({"data": {"deleted": id}})).into_response(),
        None => not_found("number"),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Payment {
    ok: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Verification {
    status: String,
}

/// `POST /_sim/businesses/{business_id}/verification` `{status}`: sets the business
/// verification status the business node answers.
async fn post_verification(
    State(inner): State<Arc<Inner>>,
    Path(id): Path<String>,
    Json(req): Json<Verification>,
) -> Response {
    match inner.businesses.get_mut(&id) {
        Some(mut b) => {
            b.verification_status = req.status.clone();
            Json(json!({"data": {"business_id": id, "verification_status": req.status}}))
                .into_response()
        }
        None => not_found("business"),
    }
}

/// `POST /_sim/businesses/{business_id}/payment` `{ok}`: breaks or fixes the business's payment
/// method.
async fn post_payment(
    State(inner): State<Arc<Inner>>,
    Path(id): Path<String>,
    Json(req): Json<Payment>,
) -> Response {
    match inner.businesses.get_mut(&id) {
        Some(mut b) => {
            b.payment_ok = req.ok;
            Json(json!({"data": {"business_id": id, "payment_ok": req.ok}})).into_response()
        }
        None => not_found("business"),
    }
}
