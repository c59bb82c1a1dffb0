//! `Idempotency-Key` on sends (issue 15): the key's first answer is stored and repeated to
//! every retry; a retry while the first is running answers 409; a send whose outcome is in
//! doubt answers 202 with its message, and so does every retry.

use super::message_out::send_result;
use crate::error::ApiError;
use crate::extract::Auth;
use crate::AppState;
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use storage::idempotency::IdempotencyBegin;

/// The `Idempotency-Key` header: `None` when absent; 1 to 255 printable ASCII characters, else
/// 422 `invalid_idempotency_key`.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    match headers
        .get("idempotency-key")
        .map(|v| v.to_str().map(str::to_string))
    {
        None => Ok(None),
        Some(Ok(k)) if (1..=255).contains(&k.len()) && k.bytes().all(|b| b.is_ascii_graphic()) => {
            Ok(Some(k))
        }
        Some(_) => Err(ApiError::invalid(
            "Idempotency-Key",
            "invalid_idempotency_key",
            "Idempotency-Key deve ter de 1 a 255 caracteres ASCII visíveis.",
        )),
    }
}

/// A request body as a key compares it (issue 49): JSON with every object's keys sorted and
/// no whitespace between tokens, so the same request with its keys in another order or
/// formatted otherwise replays instead of answering `idempotency_key_reused`; a body that is
/// not JSON, byte for byte.
fn canonical_body(body: &[u8]) -> String {
    match serde_json::from_slice::<Value>(body) {
        Ok(v) => {
            let mut out = String::with_capacity(body.len());
            write_canonical(&v, &mut out);
            out
        }
        Err(_) => String::from_utf8_lossy(body).into_owned(),
    }
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// How long a keyed request may run before its key is resolved here: a little less than the
/// server's request timeout, whose 503 would otherwise leave the key `pending` (a retry with
/// it answered 409 for the key's 24 h). At least half a second.
fn keyed_deadline(state: &AppState) -> std::time::Duration {
    state
        .config
        .limits
        .request_timeout
        .saturating_sub(std::time::Duration::from_secs(2))
        .max(std::time::Duration::from_millis(500))
}

/// The 202 answer of a send in doubt: the message as it stands now (status `sending` until a
/// status webhook settles it).
async fn in_doubt_answer(state: &AppState, account_id: i64, message_id: i64) -> Response {
    match state.services.store().message(account_id, message_id).await {
        Ok(m) => (
            StatusCode::ACCEPTED,
            Json(json!({ "data": send_result(&m) })),
        )
            .into_response(),
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// Runs a write under the request's `Idempotency-Key` (decision D-024, issue 15): the first
/// answer for a key is replayed for 24 hours (`Idempotent-Replayed: true`); a key reused with
/// another body is 422; a key still running is 409. `run` gets the key to bind it to the
/// message it writes. A send in doubt ([`ApiError::InDoubt`], or the wait for the actor ran
/// out after the message was written) keeps the key bound to that message and answers 202
/// with it, now and on every retry: the message is never sent twice. A failure a retry may
/// fix (other 5xx, or a 429 with `Retry-After`: nothing sent) releases the key, and the error
/// is answered with its headers. `namespace` separates callers of one
/// account that must not share keys (`""` for account tokens, `pub:<user>:` for a sender).
pub(crate) async fn idempotent<F, Fut>(
    state: &AppState,
    auth: &Auth,
    namespace: &str,
    headers: &HeaderMap,
    body: &[u8],
    run: F,
) -> Response
where
    F: FnOnce(Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<(StatusCode, Value), ApiError>>,
{
    let account_id = auth.account_id();
    let key = match idempotency_key(headers) {
        Ok(k) => k.map(|k| format!("{namespace}{k}")),
        Err(e) => return e.into_response(),
    };
    let Some(key) = key else {
        return match run(None).await {
            Ok((status, v)) => (status, Json(v)).into_response(),
            Err(ApiError::InDoubt(id)) => in_doubt_answer(state, account_id, id).await,
            Err(e) => e.into_response(),
        };
    };
    let store = state.services.store();
    if let Some(answer) = begin_idempotent(state, account_id, &key, &canonical_body(body)).await {
        return answer;
    }
    // Past the deadline the key is resolved as a send whose wait ran out: in doubt with its
    // message, or released when none was written.
    let ran = tokio::time::timeout(keyed_deadline(state), run(Some(key.clone())))
        .await
        .unwrap_or(Err(ApiError::TimedOut));
    let (status, value, error) = match ran {
        Ok((status, value)) => (status, value, None),
        Err(ApiError::InDoubt(_)) | Err(ApiError::Unavailable) | Err(ApiError::TimedOut) => {
            return unfinished(state, account_id, &key).await;
        }
        Err(e) => {
            let (status, value) = e.status_and_body();
            (status, value, Some(e))
        }
    };
    // A 5xx or a 429 sent nothing and asks for a retry (`Retry-After`): the key is released
    // for it, as Stripe does, instead of replaying the refusal (D-128).
    let stored = if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
        store.idempotency_abandon(account_id, &key).await
    } else {
        store
            .idempotency_finish(account_id, &key, status.as_u16(), &value.to_string())
            .await
    };
    if let Err(e) = stored {
        tracing::error!(error = %e, "could not record an idempotency key");
    }
    match error {
        // The error's own answer, with its headers (`Retry-After`).
        Some(e) => e.into_response(),
        None => (status, Json(value)).into_response(),
    }
}

/// Reserves an idempotency key for `request` (its canonical form): `None` when the request is new and runs, else the
/// answer to give now (a replay, the in-doubt answer, in progress, the key reused with another
/// body, or a storage error).
async fn begin_idempotent(
    state: &AppState,
    account_id: i64,
    key: &str,
    request: &str,
) -> Option<Response> {
    let store = state.services.store();
    let hash = engine::token::hash_token(request);
    match store.idempotency_begin(account_id, key, &hash).await {
        Err(e) => Some(ApiError::from(e).into_response()),
        Ok(IdempotencyBegin::Replay { status, body }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
            Some(
                (
                    status,
                    [
                        ("content-type", "application/json"),
                        ("idempotent-replayed", "true"),
                    ],
                    body,
                )
                    .into_response(),
            )
        }
        Ok(IdempotencyBegin::InDoubt { message_id }) => {
            let mut resp = in_doubt_answer(state, account_id, message_id).await;
            resp.headers_mut().insert(
                "idempotent-replayed",
                axum::http::HeaderValue::from_static("true"),
            );
            Some(resp)
        }
        Ok(IdempotencyBegin::InProgress) => Some(ApiError::IdempotencyInProgress.into_response()),
        Ok(IdempotencyBegin::Mismatch) => Some(
            ApiError::invalid(
                "Idempotency-Key",
                "idempotency_key_reused",
                "Esta Idempotency-Key já foi usada com outro corpo de requisição.",
            )
            .into_response(),
        ),
        Ok(IdempotencyBegin::New) => None,
    }
}

/// The answer to a keyed request that did not finish (in doubt, busy, timed out): a message
/// written for the key is in doubt for good; nothing written means nothing sent, and the key
/// is released for a retry (503).
async fn unfinished(state: &AppState, account_id: i64, key: &str) -> Response {
    let store = state.services.store();
    match store.idempotency_in_doubt(account_id, key).await {
        Ok(Some(message_id)) => in_doubt_answer(state, account_id, message_id).await,
        Ok(None) => {
            if let Err(e) = store.idempotency_abandon(account_id, key).await {
                tracing::error!(error = %e, "could not release an idempotency key");
            }
            ApiError::Unavailable.into_response()
        }
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// The `POST` routes of `/api/v1` that create a record and take `Idempotency-Key` through
/// [`keyed_creates`] (issue 49 item 5). The sends and the campaign's creation handle the key
/// themselves ([`idempotent`], [`SELF_KEYED`]). Not here: `POST /tokens` and
/// `POST /channels/{id}/webhooks`, whose answers show a secret once (the token, the signing
/// secret) — a replay would keep it in the clear in `idempotency_keys` for a day, where the
/// token is stored only hashed and the secret sealed (D-114).
pub const KEYED_CREATES: &[&str] = &[
    "/channels/official",
    "/channels/embedded-signup",
    "/channels/alternative",
    "/wabas/{waba}/numbers",
    "/templates",
    "/campaigns/{id}/recipients",
    "/groups",
    "/groups/{id}/campaigns",
    "/wiki",
    "/wiki/categories",
];

/// The `POST` routes whose handlers run [`idempotent`] themselves.
pub const SELF_KEYED: &[&str] = &["/messages", "/campaigns", "/groups/{id}/messages"];

/// `Idempotency-Key` on the creating routes of [`KEYED_CREATES`] (a route layer, after the
/// token is checked): the key's first answer (any but a 5xx) is stored with the canonical
/// request (its path and [`canonical_body`]) and replayed for 24 h with `Idempotent-Replayed:
/// true`; a retry while the first runs is 409 `idempotency_in_progress`; the key with another
/// path or body is 422 `idempotency_key_reused`; a 5xx or a 429 releases the key for a retry,
/// and so does a request that runs into the server's timeout (answered 503 here just before
/// it, [`keyed_deadline`]). Requests without the header, and every other route, pass
/// untouched.
pub(crate) async fn keyed_creates(
    axum::extract::State(state): axum::extract::State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(|m| m.as_str().trim_start_matches("/api/v1").to_string());
    let keyed = req.method() == axum::http::Method::POST
        && route.is_some_and(|r| KEYED_CREATES.contains(&r.as_str()));
    let owner = req
        .extensions()
        .get::<storage::accounts::TokenOwner>()
        .map(|o| o.account_id);
    let (key, account_id) = match (keyed, idempotency_key(req.headers()), owner) {
        (true, Ok(Some(key)), Some(account_id)) => (key, account_id),
        (true, Err(e), _) => return e.into_response(),
        _ => return next.run(req).await,
    };
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, state.config.max_body_bytes).await else {
        return ApiError::PayloadTooLarge.into_response();
    };
    let request = format!("POST {}\n{}", parts.uri.path(), canonical_body(&bytes));
    if let Some(answer) = begin_idempotent(&state, account_id, &key, &request).await {
        return answer;
    }
    let req = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
    // Past the deadline the request is answered as the server's timeout would (503, retry)
    // and, as after any 5xx, the key is released for that retry.
    let answer = tokio::time::timeout(keyed_deadline(&state), next.run(req))
        .await
        .unwrap_or_else(|_| ApiError::TimedOut.into_response());
    let (parts, body) = answer.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let store = state.services.store();
    let stored = if parts.status.is_server_error()
        || parts.status == axum::http::StatusCode::TOO_MANY_REQUESTS
    {
        store.idempotency_abandon(account_id, &key).await
    } else {
        let text = String::from_utf8_lossy(&bytes);
        store
            .idempotency_finish(account_id, &key, parts.status.as_u16(), &text)
            .await
    };
    if let Err(e) = stored {
        tracing::error!(error = %e, "could not record an idempotency key");
    }
    Response::from_parts(parts, axum::body::Body::from(bytes))
}

#[cfg(test)]
mod tests {
    use super::canonical_body;

    #[test]
    fn reordered_keys_and_whitespace_are_the_same_request() {
        let a =
            br#"{"to":"5511","template":{"name":"oi","language":"pt_BR"},"n":[1,{"b":2,"a":1}]}"#;
        let b = br#"{ "template": {"language": "pt_BR", "name": "oi"},
                      "n": [1, {"a": 1, "b": 2}], "to": "5511" }"#;
        assert_eq!(canonical_body(a), canonical_body(b));
        assert_ne!(
            canonical_body(a),
            canonical_body(br#"{"to":"5512","template":{"name":"oi","language":"pt_BR"},"n":[1,{"b":2,"a":1}]}"#)
        );
        // Arrays keep their order; a body that is not JSON is compared as it is.
        assert_ne!(canonical_body(b"[1,2]"), canonical_body(b"[2,1]"));
        assert_eq!(canonical_body(b"not json"), "not json");
    }
}
