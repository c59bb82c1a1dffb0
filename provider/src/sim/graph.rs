//! The Graph API surface of the simulator: same paths, shapes and error envelopes as the
//! provider (PROVIDER.md §1–§7).

use super::node::{authenticate, check_version, graph_error, resolve, unknown_node, Node};
use super::state::{Bucket, SentRecord};
use super::webhooks::{Emission, EmissionKind};
use super::{ms, now_ms, Inner};
use crate::wire::{SendMessageRequest, SendMessageResponse, SentContact, SentMessage};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

pub(crate) fn routes(inner: Arc<Inner>) -> Router<Arc<Inner>> {
    Router::new()
        .route(
            "/{version}/{node}",
            get(get_node)
                .post(super::phone::post_node)
                .delete(super::media::delete_media),
        )
        .route("/{version}/{node}/messages", post(send_message))
        .route("/{version}/{node}/media", post(super::media::upload))
        .route(
            "/{version}/{node}/request_code",
            post(super::phone::request_code),
        )
        .route(
            "/{version}/{node}/verify_code",
            post(super::phone::verify_code),
        )
        .route("/{version}/{node}/register", post(super::phone::register))
        .route(
            "/{version}/{node}/deregister",
            post(super::phone::deregister),
        )
        .route(
            "/{version}/{node}/phone_numbers",
            get(super::phone::list_numbers).post(super::phone::add_number),
        )
        .route(
            "/{version}/{node}/message_templates",
            get(super::templates::list)
                .post(super::templates::create)
                .delete(super::templates::delete),
        )
        .route(
            "/{version}/{node}/subscribed_apps",
            get(super::business::get_subscribed)
                .post(super::business::subscribe)
                .delete(super::business::unsubscribe),
        )
        .route(
            "/{version}/{node}/owned_whatsapp_business_accounts",
            get(super::business::owned_wabas),
        )
        .route(
            "/{version}/{node}/uploads",
            post(super::profile::start_upload),
        )
        .route(
            "/{version}/{node}/whatsapp_business_profile",
            get(super::profile::get_profile).post(super::profile::post_profile),
        )
        .route("/{version}/debug_token", get(super::business::debug_token))
        .route(
            "/{version}/oauth/access_token",
            get(super::business::exchange_code),
        )
        .layer(axum::middleware::from_fn_with_state(
            inner,
            super::faults::inject,
        ))
}

async fn get_node(
    State(inner): State<Arc<Inner>>,
    Path((version, node)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = check_version(&version) {
        return r;
    }
    let business = match authenticate(&inner, &headers, &query) {
        Ok(b) => b,
        Err(r) => return r,
    };
    match resolve(&inner, &business, &node) {
        Some(Node::Number) => {}
        Some(Node::Waba) => return super::business::get_waba(&inner, &node),
        Some(Node::Business) => {
            let verification = inner
                .businesses
                .get(&node)
                .map(|b| b.verification_status.clone())
                .unwrap_or_else(|| "verified".into());
            return Json(
                json!({"id": node, "name": "Disparo Sim Business", "verification_status": verification}),
            )
            .into_response();
        }
        Some(Node::Media) => return super::media::describe(&inner, &node, &headers, &query),
        Some(Node::Template(waba)) => return super::templates::get_one(&inner, &waba, &node),
        None => return unknown_node(&node),
    }
    let Some(n) = inner.numbers.get(&node) else {
        return unknown_node(&node);
    };
    let mut all = Map::new();
    all.insert("id".into(), json!(n.id));
    all.insert("display_phone_number".into(), json!(n.display_phone_number));
    all.insert("verified_name".into(), json!(n.verified_name));
    all.insert("quality_rating".into(), json!(n.quality));
    all.insert("messaging_limit_tier".into(), json!(n.tier));
    all.insert(
        "whatsapp_business_manager_messaging_limit".into(),
        json!(n.tier),
    );
    let level = if n.throughput_mps >= 1000 {
        "HIGH"
    } else {
        "STANDARD"
    };
    all.insert("throughput".into(), json!({ "level": level }));
    // A number held at the coexistence rate reports itself on the Business app (§4.1, §10.1).
    all.insert(
        "is_on_biz_app".into(),
        json!(n.throughput_mps <= engine::pacing::COEXISTENCE_MPS),
    );
    let banned = inner
        .wabas
        .get(&n.waba_id)
        .is_some_and(|w| w.ban_state.as_deref() == Some("DISABLE"));
    let status = match (banned, n.registered) {
        (true, _) => "BANNED",
        (false, true) => "CONNECTED",
        (false, false) => "PENDING",
    };
    all.insert("status".into(), json!(status));
    all.insert("name_status".into(), json!("APPROVED"));
    all.insert(
        "code_verification_status".into(),
        json!(if n.code_verified || n.registered {
            "VERIFIED"
        } else {
            "NOT_VERIFIED"
        }),
    );
    let can_send = if banned {
        "BLOCKED"
    } else if n.registered {
        "AVAILABLE"
    } else {
        "LIMITED"
    };
    all.insert(
        "health_status".into(),
        json!({"can_send_message": can_send, "entities": []}),
    );
    all.insert("platform_type".into(), json!("CLOUD_API"));
    all.insert("account_mode".into(), json!("LIVE"));
    all.insert("is_pin_enabled".into(), json!(n.pin.is_some()));
    all.insert("quality_score".into(), json!({"score": n.quality}));
    all.insert("is_official_business_account".into(), json!(false));
    all.insert("new_name_status".into(), json!("NONE"));
    all.insert("search_visibility".into(), json!("VISIBLE"));
    let digits: String = n
        .display_phone_number
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    if digits.starts_with("55") {
        all.insert("country_code".into(), json!("BR"));
        all.insert("country_dial_code".into(), json!("55"));
    }
    drop(n);
    let wanted: Vec<String> = match query.get("fields") {
        Some(f) => f
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        None => ["display_phone_number", "verified_name", "quality_rating"]
            .map(String::from)
            .to_vec(),
    };
    // Fields of the node the simulator holds no value for: Graph leaves an empty field out of
    // the answer rather than refusing it (what pywa asks for, issue 16).
    const EMPTY_FIELDS: [&str; 8] = [
        "conversational_automation",
        "webhook_configuration",
        "is_preverified_number",
        "eligibility_for_api_business_global_search",
        "certificate",
        "new_certificate",
        "last_onboarded_time",
        "messaging_limit",
    ];
    if let Some(bad) = wanted
        .iter()
        .find(|f| !all.contains_key(f.as_str()) && !EMPTY_FIELDS.contains(&f.as_str()))
    {
        return graph_error(
            StatusCode::BAD_REQUEST,
            100,
            &format!("(#100) Tried accessing nonexisting field ({bad}) on node type (WhatsAppBusinessPhoneNumber)"),
            None,
            None,
        );
    }
    let mut out = Map::new();
    for f in wanted {
        if let Some(v) = all.get(&f) {
            out.insert(f, v.clone());
        }
    }
    out.insert("id".into(), all["id"].clone());
    Json(Value::Object(out)).into_response()
}

fn invalid_parameter(details: &str) -> Response {
    graph_error(
        StatusCode::BAD_REQUEST,
        100,
        "(#100) Invalid parameter",
        Some(details),
        None,
    )
}

/// The template facts a send is checked against.
struct Found {
    name: String,
    status: String,
    category: String,
    layout: engine::template::Layout,
}

/// What a send needs from the number, read under its lock.
struct Sender {
    business_id: String,
    waba_id: String,
    display: String,
    app_secret: Arc<str>,
}

async fn send_message(
    State(inner): State<Arc<Inner>>,
    Path((version, node)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let major = match check_version(&version) {
        Ok(m) => m,
        Err(r) => return r,
    };
    let business = match authenticate(&inner, &headers, &query) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let req: SendMessageRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) if e.is_syntax() || e.is_eof() => {
            return invalid_parameter("The request body is not valid JSON.")
        }
        Err(e) => {
            // A read receipt (and typing indicator) is no message: `{messaging_product,
            // status: "read", message_id, typing_indicator?}` → `{"success": true}`.
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            if v["status"] == "read" && v["message_id"].is_string() {
                if inner
                    .numbers
                    .get(&node)
                    .is_none_or(|n| n.business_id != business)
                {
                    return unknown_node(&node);
                }
                return Json(serde_json::json!({"success": true})).into_response();
            }
            return invalid_parameter(&format!("Invalid request body: {e}"));
        }
    };
    if req.messaging_product != "whatsapp" {
        return invalid_parameter("messaging_product must be \"whatsapp\".");
    }
    let to: String = req.to.chars().filter(char::is_ascii_digit).collect();
    if to.len() < 8
        || to.len() > 15
        || !req
            .to
            .trim_start_matches('+')
            .chars()
            .all(|c| c.is_ascii_digit())
    {
        return graph_error(
            StatusCode::BAD_REQUEST,
            131009,
            "(#131009) Parameter value is not valid",
            Some("Recipient phone number is not a valid WhatsApp phone number."),
            None,
        );
    }
    let now = now_ms();

    // The number: ownership, registration, throughput, pair rate.
    let sender = {
        let Some(n) = inner
            .numbers
            .get(&node)
            .filter(|n| n.business_id == business)
        else {
            return unknown_node(&node);
        };
        if !n.registered {
            return graph_error(
                StatusCode::BAD_REQUEST,
                133010,
                "(#133010) Account not registered",
                Some("Phone number is not registered on the WhatsApp Business Platform."),
                None,
            );
        }
        // The rate limits are taken below, only for a request that would otherwise be accepted.
        let Some(b) = inner
            .businesses
            .get(&n.business_id)
            .map(|b| b.app_secret.clone())
        else {
            return unknown_node(&node);
        };
        if inner
            .wabas
            .get(&n.waba_id)
            .is_some_and(|w| w.ban_state.as_deref() == Some("DISABLE"))
        {
            let (status, message, details) = super::errors::canned(131031);
            return graph_error(status, 131031, &message, details, None);
        }
        let payment_ok = inner
            .businesses
            .get(&n.business_id)
            .is_none_or(|b| b.payment_ok);
        if !payment_ok && req.kind() == "template" {
            let (status, message, details) = super::errors::canned(131042);
            return graph_error(status, 131042, &message, details, None);
        }
        let sender = Sender {
            business_id: n.business_id.clone(),
            waba_id: n.waba_id.clone(),
            display: n.display_phone_number.clone(),
            app_secret: Arc::from(b.as_str()),
        };
        sender
    };

    // Type-specific validation.
    let mut template_category: Option<String> = None;
    match req.kind() {
        "text" => match &req.text {
            Some(t) if !t.body.is_empty() && t.body.chars().count() <= 4096 => {}
            Some(_) => return invalid_parameter("text.body must have 1 to 4096 characters."),
            None => {
                return graph_error(
                    StatusCode::BAD_REQUEST,
                    131008,
                    "(#131008) Required parameter is missing",
                    Some("The parameter text['body'] is required."),
                    None,
                )
            }
        },
        "template" => {
            let Some(t) = &req.template else {
                return graph_error(
                    StatusCode::BAD_REQUEST,
                    131008,
                    "(#131008) Required parameter is missing",
                    Some("The parameter template is required."),
                    None,
                );
            };
            let waba = inner.wabas.get(&sender.waba_id);
            // Only what the checks need, read under the WABA's guard (no clone of components).
            let found = waba.as_ref().and_then(|w| {
                w.templates
                    .iter()
                    .find(|x| x.name == t.name && x.language == t.language.code)
                    .map(|x| Found {
                        name: x.name.clone(),
                        status: x.status.clone(),
                        category: x.category.clone(),
                        layout: x.layout.clone(),
                    })
            });
            drop(waba);
            match found {
                Some(x) if x.status == "APPROVED" => {
                    if let Err(problem) = super::templates::check_send(&x.layout, t) {
                        let (code, message, details) = problem.answer(major);
                        return graph_error(
                            StatusCode::BAD_REQUEST,
                            code,
                            message,
                            Some(&details),
                            None,
                        );
                    }
                    template_category = Some(x.category.to_ascii_lowercase());
                }
                Some(x) if x.status == "PAUSED" => {
                    return graph_error(
                        StatusCode::BAD_REQUEST,
                        132015,
                        "(#132015) Template is Paused",
                        Some(&format!(
                            "Template {} is paused due to low quality.",
                            x.name
                        )),
                        None,
                    )
                }
                Some(x) if x.status == "DISABLED" => {
                    return graph_error(
                        StatusCode::BAD_REQUEST,
                        132016,
                        "(#132016) Template is disabled",
                        Some(&format!("Template {} has been disabled.", x.name)),
                        None,
                    )
                }
                _ => {
                    return graph_error(
                        StatusCode::NOT_FOUND,
                        132001,
                        "(#132001) Template name does not exist in the translation",
                        Some(&format!(
                            "template name ({}) does not exist in {}",
                            t.name, t.language.code
                        )),
                        None,
                    )
                }
            }
        }
        "image" | "document" | "video" | "audio" => {
            let media = match req.kind() {
                "image" => req.image.as_ref(),
                "document" => req.document.as_ref(),
                "video" => req.video.as_ref(),
                _ => req.audio.as_ref(),
            };
            match media {
                Some(m) if m.id.is_some() != m.link.is_some() => {
                    if let Some(id) = &m.id {
                        if inner
                            .media
                            .get(id)
                            .is_none_or(|x| x.business_id != sender.business_id)
                        {
                            let (status, message, _) = super::errors::canned(131053);
                            return graph_error(status, 131053, &message, Some("The media id does not exist or does not belong to this business."), None);
                        }
                    }
                }
                _ => return invalid_parameter("A media object needs exactly one of id or link."),
            }
        }
        other => return invalid_parameter(&format!("Unsupported message type: {other}")),
    }

    // Limits (§10.1, §10.3).
    {
        let Some(mut n) = inner.numbers.get_mut(&node) else {
            return unknown_node(&node);
        };
        if !n.bucket.try_take(now) {
            n.throughput_refusals += 1;
            return graph_error(
                StatusCode::TOO_MANY_REQUESTS,
                130429,
                "(#130429) Rate limit hit",
                Some("Message failed to send because there were too many messages sent from this phone number in a short period of time"),
                Some(2494055),
            );
        }
        let pair = n
            .pairs
            .entry(to.clone())
            .or_insert_with(|| Bucket::new(45.0, 1.0 / 6.0, now));
        if !pair.try_take(now) {
            return graph_error(
                StatusCode::TOO_MANY_REQUESTS,
                131056,
                "(#131056) (Business Account, Consumer Account) pair rate limit hit",
                Some("Message failed to send because there were too many messages sent from this phone number to the same phone number in a short period of time."),
                Some(2494055),
            );
        }
    }

    // Accept.
    let wamid = inner.wamid();
    let window_open = inner
        .windows
        .get(&(node.clone(), to.clone()))
        .is_some_and(|t| now - *t < engine::DAY_MS);
    // Business-initiated sends count against the portfolio's rolling 24 h limit of unique
    // users (§10.2); beyond it, sends to new users fail asynchronously.
    let over_limit = template_category.is_some()
        && !window_open
        && !inner.admit_business_initiated(&sender.business_id, &to, now);
    inner.ledger.lock().expect("ledger lock").record(
        &node,
        req.template.as_ref().map(|t| t.name.as_str()),
        SentRecord {
            id: wamid.clone(),
            to: to.clone(),
            kind: req.kind().to_string(),
            payload: bytes::Bytes::copy_from_slice(&body),
            at: now,
        },
    );
    schedule_statuses(
        &inner,
        &sender,
        &node,
        &wamid,
        &to,
        &req,
        template_category,
        window_open,
        over_limit,
        major,
        now,
    );

    let resp = SendMessageResponse {
        messaging_product: "whatsapp".into(),
        contacts: vec![SentContact {
            input: req.to.clone(),
            wa_id: Some(to),
        }],
        messages: vec![SentMessage {
            id: wamid,
            message_status: req.template.as_ref().map(|_| "accepted".to_string()),
        }],
    };
    Json(resp).into_response()
}

/// A webhook error object (§7, last paragraph).
pub(crate) fn webhook_error(code: i64, title: &str, details: &str) -> Value {
    json!({
        "code": code,
        "title": title,
        "message": title,
        "error_data": {"details": details},
        "href": "https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/"
    })
}

#[allow(clippy::too_many_arguments)]
fn schedule_statuses(
    inner: &Inner,
    sender: &Sender,
    node: &str,
    wamid: &str,
    to: &str,
    req: &SendMessageRequest,
    template_category: Option<String>,
    window_open: bool,
    over_limit: bool,
    api_major: u32,
    now: i64,
) {
    let d = inner.cfg.status_delays;
    let base = |status: &str, at_ms: u64| {
        let mut s = Map::new();
        s.insert("id".into(), json!(wamid));
        s.insert("status".into(), json!(status));
        s.insert(
            "timestamp".into(),
            json!(((now + at_ms as i64) / 1000).to_string()),
        );
        s.insert("recipient_id".into(), json!(to));
        if let Some(cb) = &req.biz_opaque_callback_data {
            s.insert("biz_opaque_callback_data".into(), json!(cb));
        }
        s
    };
    let emit = |delay: u64, status: Map<String, Value>| {
        inner.outbox.emit_after(
            ms(delay),
            Emission {
                app_secret: sender.app_secret.clone(),
                waba_id: sender.waba_id.clone(),
                kind: EmissionKind::Status {
                    phone_number_id: node.to_string(),
                    display: sender.display.clone(),
                    status: Value::Object(status),
                },
            },
        )
    };

    // Free text outside the customer-service window fails asynchronously (§10.5, 131047).
    if template_category.is_none() && !window_open {
        let mut f = base("failed", d.sent_ms);
        f.insert("errors".into(), json!([webhook_error(
            131047,
            "Re-engagement message",
            "Message failed to send because more than 24 hours have passed since the customer last replied to this number."
        )]));
        emit(d.sent_ms, f);
        return;
    }

    if over_limit {
        let code = inner.cfg.tier_limit_code;
        let (_, title, details) = super::errors::canned(code);
        let title = title.trim_start_matches(&format!("(#{code}) ")).to_string();
        let mut f = base("failed", d.sent_ms);
        let details = details
            .unwrap_or("The business has reached its messaging limit of unique users in 24 hours.");
        f.insert(
            "errors".into(),
            json!([webhook_error(code, &title, details)]),
        );
        emit(d.sent_ms, f);
        return;
    }

    let category = template_category.unwrap_or_else(|| "service".into());
    let pricing = json!({
        "billable": category != "service",
        "pricing_model": "PMP",
        "type": if category == "service" { "free_customer_service" } else { "regular" },
        "category": category,
    });
    let conversation_id = format!("{:032x}", inner.draw().to_bits() ^ now as u64);
    let conversation = |with_expiry: bool| {
        let mut c = json!({"id": conversation_id, "origin": {"type": category}});
        if with_expiry {
            c["expiration_timestamp"] = json!(((now + engine::DAY_MS) / 1000).to_string());
        }
        c
    };

    let mut sent = base("sent", d.sent_ms);
    if api_major < 24 {
        sent.insert("conversation".into(), conversation(true));
    }
    sent.insert("pricing".into(), pricing.clone());
    emit(d.sent_ms, sent);

    if inner.draw() < inner.cfg.failed_share {
        let mut f = base("failed", d.delivered_ms);
        f.insert("errors".into(), json!([webhook_error(
            131026,
            "Message undeliverable",
            "Message failed to send because the recipient's phone number is not a WhatsApp phone number or cannot receive this message."
        )]));
        emit(d.delivered_ms, f);
        return;
    }
    let mut delivered = base("delivered", d.delivered_ms);
    if api_major < 24 {
        delivered.insert("conversation".into(), conversation(false));
    }
    delivered.insert("pricing".into(), pricing);
    emit(d.delivered_ms, delivered);
    if inner.draw() < inner.cfg.read_share {
        emit(d.read_ms, base("read", d.read_ms));
    }
}
