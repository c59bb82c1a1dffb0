//! WABA and business edges at the simulator (PROVIDER.md §5): WABA node, `subscribed_apps`,
//! a business's WABAs, `debug_token`, and the Embedded Signup code exchange.

use super::node::{authenticate, graph_error, resolve, unknown_node, Node};
use super::Inner;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// The app id the simulator's tokens belong to.
pub const SIM_APP_ID: &str = "670843887433847";

pub(crate) fn get_waba(inner: &Inner, id: &str) -> Response {
    let Some(w) = inner.wabas.get(id) else {
        return unknown_node(id);
    };
    let payment_ok = inner
        .businesses
        .get(&w.business_id)
        .is_none_or(|b| b.payment_ok);
    let can_send = if w.ban_state.is_some() || !payment_ok {
        "BLOCKED"
    } else if w.restrictions.is_empty() {
        "AVAILABLE"
    } else {
        "LIMITED"
    };
    let mut entities =
        vec![json!({"entity_type": "WABA", "id": w.id, "can_send_message": can_send})];
    if !payment_ok {
        entities.push(json!({"entity_type": "BUSINESS", "id": w.business_id, "can_send_message": "BLOCKED",
            "errors": [{"error_code": 141006, "error_description": "There is an error with the payment method.", "possible_solution": "Update the payment method in the business settings."}]}));
    }
    Json(json!({
        "owner_business_info": {"id": w.business_id, "name": "Disparo Sim Business"},
        "id": w.id,
        "name": w.name,
        "timezone_id": "1",
        "message_template_namespace": format!("sim_{}", w.id),
        "account_review_status": "APPROVED",
        "business_verification_status": "verified",
        "ownership_type": "SELF",
        "currency": "BRL",
        "country": "BR",
        "health_status": {"can_send_message": can_send, "entities": entities},
        "whatsapp_business_manager_messaging_limit": inner.portfolio_tier(&w.business_id),
    }))
    .into_response()
}

fn waba_call(
    inner: &Inner,
    node: &str,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Result<(), Response> {
    let business = authenticate(inner, headers, query)?;
    match resolve(inner, &business, node) {
        Some(Node::Waba) => Ok(()),
        _ => Err(unknown_node(node)),
    }
}

/// `POST /{waba_id}/subscribed_apps` (optionally with `override_callback_uri` + `verify_token`).
pub(crate) async fn subscribe(
    State(inner): State<Arc<Inner>>,
    Path((_, node)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(r) = waba_call(&inner, &node, &query, &headers) {
        return r;
    }
    let p = super::node::params(&query, &body);
    let mut app = json!({"whatsapp_business_api_data": {"id": SIM_APP_ID, "link": format!("https://www.facebook.com/games/?app_id={SIM_APP_ID}"), "name": "disparo"}});
    if let Some(uri) = super::node::param_str(&p, "override_callback_uri") {
        app["override_callback_uri"] = json!(uri);
    }
    if let Some(mut w) = inner.wabas.get_mut(&node) {
        w.subscribed_apps = vec![app];
    }
    Json(json!({"success": true})).into_response()
}

/// `GET /{waba_id}/subscribed_apps`.
pub(crate) async fn get_subscribed(
    State(inner): State<Arc<Inner>>,
    Path((_, node)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = waba_call(&inner, &node, &query, &headers) {
        return r;
    }
    let apps: Vec<Value> = inner
        .wabas
        .get(&node)
        .map(|w| w.subscribed_apps.clone())
        .unwrap_or_default();
    Json(json!({"data": apps})).into_response()
}

/// `DELETE /{waba_id}/subscribed_apps`.
pub(crate) async fn unsubscribe(
    State(inner): State<Arc<Inner>>,
    Path((_, node)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = waba_call(&inner, &node, &query, &headers) {
        return r;
    }
    if let Some(mut w) = inner.wabas.get_mut(&node) {
        w.subscribed_apps.clear();
    }
    Json(json!({"success": true})).into_response()
}

/// `GET /{business_id}/owned_whatsapp_business_accounts`.
pub(crate) async fn owned_wabas(
    State(inner): State<Arc<Inner>>,
    Path((_, node)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let business = match authenticate(&inner, &headers, &query) {
        Ok(b) => b,
        Err(r) => return r,
    };
    if !matches!(resolve(&inner, &business, &node), Some(Node::Business)) {
        return unknown_node(&node);
    }
    let mut data: Vec<Value> = inner
        .wabas
        .iter()
        .filter(|w| w.business_id == business)
        .map(|w| json!({"id": w.id, "name": w.name, "message_template_namespace": format!("sim_{}", w.id), "timezone_id": "1"}))
        .collect();
    data.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    let cursors = json!({"before": data.first().map(|w| w["id"].clone()), "after": data.last().map(|w| w["id"].clone())});
    Json(json!({"data": data, "paging": {"cursors": cursors}})).into_response()
}

/// `GET /debug_token?input_token=…` (§5.5). The caller authenticates with any valid token or
/// an app token `<app_id>|<app_secret>`.
pub(crate) async fn debug_token(
    State(inner): State<Arc<Inner>>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string)
        .or_else(|| query.get("access_token").cloned())
        .unwrap_or_default();
    let app_token_ok = bearer.split_once('|').is_some_and(|(app, secret)| {
        app == SIM_APP_ID && inner.businesses.iter().any(|b| b.app_secret == secret)
    });
    if !app_token_ok {
        if let Err(r) = authenticate(&inner, &headers, &query) {
            return r;
        }
    }
    let Some(input) = query.get("input_token") else {
        return graph_error(
            StatusCode::BAD_REQUEST,
            100,
            "(#100) The parameter input_token is required",
            None,
            None,
        );
    };
    let Some(business) = inner.tokens.get(input).map(|b| b.clone()) else {
        return Json(json!({"data": {"app_id": SIM_APP_ID, "is_valid": false, "error": {"code": 190, "message": "Invalid OAuth access token."}, "scopes": []}}))
            .into_response();
    };
    let wabas: Vec<String> = inner
        .wabas
        .iter()
        .filter(|w| w.business_id == business)
        .map(|w| w.id.clone())
        .collect();
    Json(json!({"data": {
        "app_id": SIM_APP_ID,
        "application": "disparo",
        "data_access_expires_at": 0,
        "expires_at": 0,
        "is_valid": true,
        "type": "SYSTEM_USER",
        "scopes": ["whatsapp_business_management", "whatsapp_business_messaging", "business_management"],
        "granular_scopes": [
            {"scope": "whatsapp_business_management", "target_ids": wabas},
            {"scope": "whatsapp_business_messaging", "target_ids": wabas},
        ],
    }}))
    .into_response()
}

/// `GET /oauth/access_token?client_id&client_secret&code` (§5.6): exchanges a code from
/// `POST /_sim/embedded-signup` for the business token.
pub(crate) async fn exchange_code(
    State(inner): State<Arc<Inner>>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let (Some(client_id), Some(secret), Some(code)) = (
        query.get("client_id"),
        query.get("client_secret"),
        query.get("code"),
    ) else {
        return graph_error(
            StatusCode::BAD_REQUEST,
            100,
            "Missing client_id, client_secret or code",
            None,
            None,
        );
    };
    let Some(business) = inner.signup_codes.get(code).map(|b| b.clone()) else {
        return graph_error(
            StatusCode::BAD_REQUEST,
            100,
            "Invalid verification code format.",
            None,
            Some(36007),
        );
    };
    let Some(b) = inner.businesses.get(&business).map(|b| b.clone()) else {
        return graph_error(
            StatusCode::BAD_REQUEST,
            100,
            "Invalid verification code format.",
            None,
            Some(36007),
        );
    };
    if client_id != SIM_APP_ID || *secret != b.app_secret {
        return graph_error(
            StatusCode::BAD_REQUEST,
            1,
            "Error validating client secret.",
            None,
            None,
        );
    }
    inner.signup_codes.remove(code);
    Json(json!({"access_token": b.access_token, "token_type": "bearer"})).into_response()
}
