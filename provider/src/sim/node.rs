//! What every Graph handler of the simulator shares: request parameters, the node a path
//! names and whose it is, the provider's error envelope, the API version and token checks
//! (PROVIDER.md §1). The handler modules and the router ([`super::graph`]) use it; it uses
//! none of them.

use super::{now_ms, Inner};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// Request parameters from the query string, a JSON object body or a form body, merged
/// (PROVIDER.md §1.4: Graph accepts all three; docs disagree on which one each call uses).
pub(crate) fn params(query: &HashMap<String, String>, body: &[u8]) -> Map<String, Value> {
    let mut out: Map<String, Value> = query.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    if let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(body) {
        out.extend(m);
    } else if !body.is_empty() {
        for (k, v) in url::form_urlencoded::parse(body) {
            out.insert(k.into_owned(), json!(v.into_owned()));
        }
    }
    out
}

/// A string parameter.
pub(crate) fn param_str<'a>(p: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    p.get(key).and_then(Value::as_str)
}

/// The business whose token reaches the number `node` (a call on a number's node or edge);
/// Graph's unknown-object error otherwise.
pub(crate) fn number_business(
    inner: &Inner,
    node: &str,
    headers: &HeaderMap,
    query: &HashMap<String, String>,
) -> Result<String, Response> {
    let business = authenticate(inner, headers, query)?;
    match resolve(inner, &business, node) {
        Some(Node::Number) => Ok(business),
        _ => Err(unknown_node(node)),
    }
}

/// What a Graph node id is in the simulator.
pub(crate) enum Node {
    Number,
    Waba,
    Business,
    Media,
    Template(String),
}

/// Finds what `id` is, among the assets `business` may read.
pub(crate) fn resolve(inner: &Inner, business: &str, id: &str) -> Option<Node> {
    if inner
        .numbers
        .get(id)
        .is_some_and(|n| n.business_id == business)
    {
        return Some(Node::Number);
    }
    if inner
        .wabas
        .get(id)
        .is_some_and(|w| w.business_id == business)
    {
        return Some(Node::Waba);
    }
    if id == business {
        return Some(Node::Business);
    }
    if inner
        .media
        .get(id)
        .is_some_and(|m| m.business_id == business)
    {
        return Some(Node::Media);
    }
    inner
        .wabas
        .iter()
        .filter(|w| w.business_id == business)
        .find_map(|w| {
            w.templates
                .iter()
                .any(|t| t.id == id)
                .then(|| Node::Template(w.id.clone()))
        })
}

/// A Graph error response (§7). `type` is `OAuthException` as in most real bodies.
pub(crate) fn graph_error(
    status: StatusCode,
    code: i64,
    message: &str,
    details: Option<&str>,
    subcode: Option<i64>,
) -> Response {
    let mut err = Map::new();
    err.insert("message".into(), json!(message));
    err.insert(
        "type".into(),
        json!(if code == 100 && subcode == Some(33) {
            "GraphMethodException"
        } else {
            "OAuthException"
        }),
    );
    err.insert("code".into(), json!(code));
    if let Some(s) = subcode {
        err.insert("error_subcode".into(), json!(s));
    }
    if let Some(d) = details {
        err.insert(
            "error_data".into(),
            json!({"messaging_product": "whatsapp", "details": d}),
        );
    }
    err.insert(
        "fbtrace_id".into(),
        json!(format!("Sim{}", now_ms() % 1_000_000_007)),
    );
    (status, Json(json!({ "error": Value::Object(err) }))).into_response()
}

pub(crate) fn unknown_node(id: &str) -> Response {
    graph_error(
        StatusCode::BAD_REQUEST,
        100,
        &format!("Unsupported get request. Object with ID '{id}' does not exist, cannot be loaded due to missing permissions, or does not support this operation. Please read the Graph API documentation at https://developers.facebook.com/docs/graph-api"),
        None,
        Some(33),
    )
}

/// The oldest and newest Graph API versions the simulator serves (PROVIDER.md §1.1: v21.0 to
/// v25.0). An older version is served as the oldest (Graph upgrades calls to expired
/// versions); a newer one does not exist yet and is refused like an unknown path.
pub const API_VERSIONS: std::ops::RangeInclusive<u32> = 21..=25;

pub(crate) fn check_version(version: &str) -> Result<u32, Response> {
    let parsed = version
        .strip_prefix('v')
        .and_then(|v| v.split_once('.'))
        .and_then(|(maj, min)| Some((maj.parse::<u32>().ok()?, min.parse::<u32>().ok()?)));
    match parsed {
        Some((major, _)) if major <= *API_VERSIONS.end() => Ok(major.max(*API_VERSIONS.start())),
        _ => Err(graph_error(
            StatusCode::BAD_REQUEST,
            2500,
            &format!("Unknown path components: /{version}"),
            None,
            None,
        )),
    }
}

/// Resolves the caller's business from `Authorization: Bearer` (or `access_token=`).
pub(crate) fn authenticate(
    inner: &Inner,
    headers: &HeaderMap,
    query: &HashMap<String, String>,
) -> Result<String, Response> {
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .map(str::to_string)
        .or_else(|| query.get("access_token").cloned());
    let Some(token) = token.filter(|t| !t.is_empty()) else {
        return Err(graph_error(
            StatusCode::UNAUTHORIZED,
            104,
            "An access token is required to request this resource.",
            None,
            None,
        ));
    };
    match inner.tokens.get(&token) {
        Some(b) => Ok(b.clone()),
        None => Err(graph_error(
            StatusCode::UNAUTHORIZED,
            190,
            "Invalid OAuth access token - Cannot parse access token",
            None,
            None,
        )),
    }
}
