//! Phone-number registration at the simulator (PROVIDER.md §4.2): add a number to a WABA,
//! request and verify the code, register with the 6-digit PIN, set the PIN, deregister; and
//! the WABA's number list (§5.2).

use super::node::{authenticate, graph_error, param_str, params, resolve, unknown_node, Node};
use super::state::{Bucket, Number};
use super::Inner;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

type Parts = (Arc<Inner>, String, Map<String, Value>);

/// Authenticates, checks that `node` is a number of the caller, and reads the parameters.
fn number_call(
    inner: Arc<Inner>,
    node: String,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Parts, Response> {
    super::node::number_business(&inner, &node, headers, query)?;
    Ok((inner, node, params(query, body)))
}

fn error(code: i64, details: &str) -> Response {
    let (status, message, _) = super::errors::canned(code);
    graph_error(status, code, &message, Some(details), None)
}

fn success() -> Response {
    Json(json!({"success": true})).into_response()
}

fn six_digits(pin: &str) -> bool {
    pin.len() == 6 && pin.bytes().all(|b| b.is_ascii_digit())
}

/// `POST /{phone_number_id}` with `{"pin": "<6 digits>"}`: sets or changes the 2FA PIN.
pub(crate) async fn post_node(
    State(inner): State<Arc<Inner>>,
    Path((_, node)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if node.starts_with("upload:") {
        return super::profile::upload_data(&inner, &node, &headers, body);
    }
    // `POST /{template_id}` edits a template (§6.3).
    if let Ok(business) = super::node::authenticate(&inner, &headers, &query) {
        if let Some(super::node::Node::Template(waba)) =
            super::node::resolve(&inner, &business, &node)
        {
            return super::templates::edit(&inner, &waba, &node, &body);
        }
    }
    let (inner, node, p) = match number_call(inner, node, &query, &headers, &body) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let Some(pin) = param_str(&p, "pin").filter(|p| six_digits(p)) else {
        return error(100, "pin must be 6 digits.");
    };
    if let Some(mut n) = inner.numbers.get_mut(&node) {
        n.pin = Some(pin.to_string());
    }
    success()
}

/// `POST /{phone_number_id}/request_code` `{code_method: SMS|VOICE, language}`.
pub(crate) async fn request_code(
    State(inner): State<Arc<Inner>>,
    Path((_, node)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (inner, node, p) = match number_call(inner, node, &query, &headers, &body) {
        Ok(x) => x,
        Err(r) => return r,
    };
    match param_str(&p, "code_method")
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        Some("SMS") | Some("VOICE") => {}
        _ => return error(100, "code_method must be SMS or VOICE."),
    }
    if param_str(&p, "language").is_none_or(str::is_empty) {
        return error(100, "The parameter language is required.");
    }
    let code = inner.digits(6);
    if let Some(mut n) = inner.numbers.get_mut(&node) {
        n.verification_code = Some(code);
    }
    success()
}

/// `POST /{phone_number_id}/verify_code` `{code}` (digits, no hyphen).
pub(crate) async fn verify_code(
    State(inner): State<Arc<Inner>>,
    Path((_, node)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (inner, node, p) = match number_call(inner, node, &query, &headers, &body) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let given = param_str(&p, "code").unwrap_or_default().replace('-', "");
    let Some(mut n) = inner.numbers.get_mut(&node) else {
        return unknown_node(&node);
    };
    match &n.verification_code {
        Some(code) if *code == given => {
            n.code_verified = true;
            n.verification_code = None;
            Json(json!({"success": true, "id": node})).into_response()
        }
        Some(_) => error(136025, "The verification code does not match."),
        None => error(
            136025,
            "No verification code was requested for this number.",
        ),
    }
}

/// `POST /{phone_number_id}/register` `{messaging_product, pin}`.
pub(crate) async fn register(
    State(inner): State<Arc<Inner>>,
    Path((_, node)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (inner, node, p) = match number_call(inner, node, &query, &headers, &body) {
        Ok(x) => x,
        Err(r) => return r,
    };
    if param_str(&p, "messaging_product") != Some("whatsapp") {
        return error(100, "messaging_product must be \"whatsapp\".");
    }
    let Some(pin) = param_str(&p, "pin").filter(|p| six_digits(p)) else {
        return error(100, "pin must be 6 digits.");
    };
    let Some(mut n) = inner.numbers.get_mut(&node) else {
        return unknown_node(&node);
    };
    if !n.code_verified && !n.registered {
        return error(
            133006,
            "Verify the phone number with request_code and verify_code before registering.",
        );
    }
    match &n.pin {
        Some(existing) if existing != pin => {
            return error(133005, "The two-step verification PIN does not match.")
        }
        Some(_) => {}
        None => n.pin = Some(pin.to_string()),
    }
    n.registered = true;
    success()
}

/// `POST /{phone_number_id}/deregister`.
pub(crate) async fn deregister(
    State(inner): State<Arc<Inner>>,
    Path((_, node)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (inner, node, _) = match number_call(inner, node, &query, &headers, &body) {
        Ok(x) => x,
        Err(r) => return r,
    };
    if let Some(mut n) = inner.numbers.get_mut(&node) {
        n.registered = false;
    }
    success()
}

fn waba_call(
    inner: &Inner,
    node: &str,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Result<String, Response> {
    let business = authenticate(inner, headers, query)?;
    match resolve(inner, &business, node) {
        Some(Node::Waba) => Ok(business),
        _ => Err(unknown_node(node)),
    }
}

/// `POST /{waba_id}/phone_numbers` `{cc, phone_number, verified_name}` → `{id}`.
pub(crate) async fn add_number(
    State(inner): State<Arc<Inner>>,
    Path((_, node)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let business = match waba_call(&inner, &node, &query, &headers) {
        Ok(b) => b,
        Err(r) => return r,
    };
    if inner.wabas.get(&node).is_some_and(|w| {
        w.restrictions
            .iter()
            .any(|r| r == "RESTRICTED_ADD_PHONE_NUMBER_ACTION")
    }) {
        return error(
            131031,
            "Adding phone numbers is restricted on this WhatsApp Business Account.",
        );
    }
    let p = params(&query, &body);
    let cc: String = param_str(&p, "cc")
        .unwrap_or_default()
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    let number: String = param_str(&p, "phone_number")
        .unwrap_or_default()
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    let verified_name = param_str(&p, "verified_name")
        .unwrap_or_default()
        .trim()
        .to_string();
    if cc.is_empty() || cc.len() > 3 {
        return error(100, "cc must be a country calling code, e.g. 55.");
    }
    if number.len() < 6 || number.len() > 15 {
        return error(100, "phone_number is not a valid phone number.");
    }
    if verified_name.chars().count() < 3 {
        return error(100, "verified_name must have at least 3 characters.");
    }
    // "with or without the country code" (§4.2).
    let display = if number.starts_with(&cc) && number.len() > 10 {
        number
    } else {
        format!("{cc}{number}")
    };
    if inner
        .numbers
        .iter()
        .any(|n| n.display_phone_number == display)
    {
        return error(
            100,
            "This phone number is already registered to a WhatsApp Business Account.",
        );
    }
    let tier = inner
        .portfolio_tier(&business)
        .unwrap_or_else(|| "TIER_250".into());
    let id = inner.digits(15);
    let now = super::now_ms();
    let mps = inner.cfg.default_throughput_mps;
    inner.numbers.insert(
        id.clone(),
        Number {
            id: id.clone(),
            waba_id: node.clone(),
            business_id: business,
            display_phone_number: display,
            verified_name,
            quality: "UNKNOWN".into(),
            tier,
            throughput_mps: mps,
            registered: false,
            cc,
            verification_code: None,
            code_verified: false,
            pin: None,
            bucket: Bucket::new(mps as f64, mps as f64, now),
            pairs: HashMap::new(),
            throughput_refusals: 0,
        },
    );
    Json(json!({"id": id})).into_response()
}

/// `GET /{waba_id}/phone_numbers` with cursor paging (`limit` ≤ 100, `after`).
pub(crate) async fn list_numbers(
    State(inner): State<Arc<Inner>>,
    Path((_, node)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = waba_call(&inner, &node, &query, &headers) {
        return r;
    }
    // A disabled WABA's numbers read BANNED, as the number node says (§4.1).
    let banned = inner
        .wabas
        .get(&node)
        .is_some_and(|w| w.ban_state.as_deref() == Some("DISABLE"));
    let mut numbers: Vec<Value> = inner
        .numbers
        .iter()
        .filter(|n| n.waba_id == node)
        .map(|n| {
            json!({
                "verified_name": n.verified_name,
                "display_phone_number": n.display_phone_number,
                "id": n.id,
                "quality_rating": n.quality,
                "code_verification_status": if n.code_verified || n.registered { "VERIFIED" } else { "NOT_VERIFIED" },
                "status": match (banned, n.registered) {
                    (true, _) => "BANNED",
                    (false, true) => "CONNECTED",
                    (false, false) => "PENDING",
                },
                "messaging_limit_tier": n.tier,
            })
        })
        .collect();
    numbers.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    let limit = query
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .unwrap_or(25)
        .clamp(1, 100);
    let start = query
        .get("after")
        .and_then(|a| numbers.iter().position(|n| n["id"] == a.as_str()))
        .map(|i| i + 1)
        .unwrap_or(0);
    let page: Vec<Value> = numbers.iter().skip(start).take(limit).cloned().collect();
    let mut paging = json!({"cursors": {
        "before": page.first().map(|n| n["id"].clone()).unwrap_or(Value::Null),
        "after": page.last().map(|n| n["id"].clone()).unwrap_or(Value::Null),
    }});
    if start + page.len() < numbers.len() {
        paging["next"] = json!(format!(
            "?limit={limit}&after={}",
            page.last()
                .and_then(|n| n["id"].as_str())
                .unwrap_or_default()
        ));
    }
    Json(json!({"data": page, "paging": paging})).into_response()
}
