//! Examples of every request and answer body in the three documents (issue 49 item 7), taken
//! from real traffic: the test suite runs with `DISPARO_RECORD_EXAMPLES=<file>`, which makes
//! the API routers write each JSON exchange to that file ([`record`]);
//! `tools/openapi_examples.py` picks one per operation and answer, scrubs secrets and writes
//! `http/openapi-examples.json`, which [`add`] places in each served document as the body's
//! `example`. An example is therefore an answer disparo really gave, in the shape the
//! document declares (the tool and `tests/openapi.rs` check each against its schema).

use axum::body::{to_bytes, Body};
use axum::extract::{MatchedPath, Request};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use serde_json::{json, Value};
use std::io::Write;
use std::sync::{Mutex, OnceLock};

/// Largest body recorded, bytes (a list page of a few hundred rows; larger ones are skipped).
const MAX_RECORDED: usize = 64 * 1024;

/// The recording file, when `DISPARO_RECORD_EXAMPLES` names one.
fn recording() -> Option<&'static Mutex<std::fs::File>> {
    static FILE: OnceLock<Option<Mutex<std::fs::File>>> = OnceLock::new();
    FILE.get_or_init(|| {
        let path = std::env::var_os("DISPARO_RECORD_EXAMPLES")?;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok()
            .map(Mutex::new)
    })
    .as_ref()
}

/// Whether exchanges are recorded (the layer is added only then).
pub fn recording_enabled() -> bool {
    recording().is_some()
}

/// Which document an exchange belongs to: the panel API under `/api`, the public sender for
/// a `pub_` token, else the account API.
fn document_of(path: &str, authorization: Option<&str>) -> &'static str {
    if !path.starts_with("/api/v1") {
        "panel"
    } else if authorization.is_some_and(|a| a.trim_start_matches("Bearer ").starts_with("pub_")) {
        "sender"
    } else {
        "account"
    }
}

/// A body as JSON when it is JSON and small enough.
fn json_body(bytes: &[u8], content_type: Option<&str>) -> Option<Value> {
    let json = content_type.is_some_and(|c| c.starts_with("application/json"));
    (json && !bytes.is_empty() && bytes.len() <= MAX_RECORDED)
        .then(|| serde_json::from_slice(bytes).ok())
        .flatten()
}

/// Route layer: records the exchange (document, method, route template, status, JSON
/// request and answer) as one line of the recording file. Bodies are buffered whole, which
/// is why it runs only while recording.
pub async fn record(req: Request, next: Next) -> Response {
    let Some(file) = recording() else {
        return next.run(req).await;
    };
    let (parts, body) = req.into_parts();
    let Ok(bytes) = to_bytes(body, usize::MAX).await else {
        return next.run(Request::from_parts(parts, Body::empty())).await;
    };
    let text = |h: &axum::http::HeaderMap, name| {
        h.get(name)
            .and_then(|v: &axum::http::HeaderValue| v.to_str().ok())
            .map(str::to_string)
    };
    let route = parts
        .extensions
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string());
    let auth = text(&parts.headers, header::AUTHORIZATION);
    let request = json_body(
        &bytes,
        text(&parts.headers, header::CONTENT_TYPE).as_deref(),
    );
    let method = parts.method.to_string();
    let resp = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    let (parts, body) = resp.into_parts();
    let Ok(bytes) = to_bytes(body, usize::MAX).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let answer = json_body(
        &bytes,
        text(&parts.headers, header::CONTENT_TYPE).as_deref(),
    );
    if let Some(route) = route {
        let line = json!({
            "document": document_of(&route, auth.as_deref()),
            "method": method,
            "path": route,
            "status": parts.status.as_u16(),
            "request": request,
            "response": answer,
        });
        if let Ok(mut f) = file.lock() {
            let _ = writeln!(f, "{line}");
        }
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// The chosen examples (`http/openapi-examples.json`): `{document: {"METHOD /path":
/// {"request": …, "responses": {"200": …}}}}`, paths as the documents write them.
fn chosen() -> &'static Value {
    static EXAMPLES: OnceLock<Value> = OnceLock::new();
    EXAMPLES.get_or_init(|| {
        serde_json::from_str(include_str!("../openapi-examples.json")).unwrap_or(Value::Null)
    })
}

/// Puts the chosen examples of `document` (`account`, `sender`, `panel`) into its JSON: each
/// operation's JSON request body and JSON answers get `example`.
pub fn add(document: &str, doc: &mut Value) {
    add_from(chosen(), document, doc);
}

fn add_from(chosen: &Value, document: &str, doc: &mut Value) {
    let Some(ops) = chosen[document].as_object() else {
        return;
    };
    /// The JSON media of `v` at `keys`, when the document has it (nothing is created).
    fn media<'a>(v: &'a mut Value, keys: &[&str]) -> Option<&'a mut Value> {
        keys.iter()
            .try_fold(v, |v, k| v.get_mut(*k))
            .filter(|m| m.is_object())
    }
    for (key, ex) in ops {
        let Some((method, path)) = key.split_once(' ') else {
            continue;
        };
        let method = method.to_ascii_lowercase();
        let Some(op) = media(doc, &["paths", path, &method]) else {
            continue;
        };
        if let Some(req) = ex.get("request").filter(|r| !r.is_null()) {
            if let Some(m) = media(op, &["requestBody", "content", "application/json"]) {
                m["example"] = req.clone();
            }
        }
        for (status, answer) in ex["responses"].as_object().into_iter().flatten() {
            if let Some(m) = media(op, &["responses", status, "content", "application/json"]) {
                m["example"] = answer.clone();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The recording names the document by path and token kind.
    #[test]
    fn exchanges_are_told_apart_by_document() {
        assert_eq!(document_of("/api/campaigns/{id}", None), "panel");
        assert_eq!(
            document_of("/api/v1/messages", Some("Bearer pub_abc")),
            "sender"
        );
        assert_eq!(
            document_of("/api/v1/messages", Some("Bearer svc_abc")),
            "account"
        );
    }

    /// An example lands on its operation's request and answer only.
    #[test]
    fn examples_land_on_their_operation() {
        let mut doc = json!({"paths": {"/messages": {"post": {
            "requestBody": {"content": {"application/json": {"schema": {}}}},
            "responses": {"202": {"content": {"application/json": {"schema": {}}}}}
        }}}});
        let chosen = json!({"account": {
            "POST /messages": {"request": {"to": "5511"}, "responses": {"202": {"data": {"id": 1}}, "500": {}}},
            "GET /nowhere": {"responses": {"200": {}}}
        }});
        add_from(&chosen, "panel", &mut doc);
        assert!(!doc.to_string().contains("example"), "another document's");
        add_from(&chosen, "account", &mut doc);
        let op = &doc["paths"]["/messages"]["post"];
        assert_eq!(
            op["requestBody"]["content"]["application/json"]["example"]["to"],
            "5511"
        );
        assert_eq!(
            op["responses"]["202"]["content"]["application/json"]["example"]["data"]["id"],
            1
        );
        assert!(op["responses"].get("500").is_none(), "no answer invented");
        assert!(
            doc["paths"].get("/nowhere").is_none(),
            "no operation invented"
        );
    }
}
