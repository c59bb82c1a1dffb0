//! A provider refusal answers by its cause (issue 49 item 1, D-107): the request's fault 422
//! `provider_refused`, throttling 429 `provider_rate_limited` with `Retry-After`, the provider
//! failing 502 `provider_unavailable`, no answer in time 504 `provider_timeout`; each with
//! `provider_code` and `retryable`, and the message's id when a message row was written.

mod common;

use common::{Backend, TestApp};
use reqwest::StatusCode;
use serde_json::{json, Value};

/// Queues the next `count` Graph requests to `phone_number_id`'s `edge` to fail with `code`.
async fn next_error(app: &TestApp, phone_number_id: &str, edge: &str, code: i64) {
    let r = app
        .http
        .put(format!("http://{}/_sim/faults", app.sim_addr))
        .json(&json!({"next_errors": [{"phone_number_id": phone_number_id, "edge": edge, "code": code, "count": 1}]}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
}

/// A template send through the account API: the status, `Retry-After` and body.
async fn send(app: &TestApp, channel_id: i64, to: &str) -> (StatusCode, Option<String>, Value) {
    let r = app
        .http
        .post(app.url("/api/v1/messages"))
        .bearer_auth(&app.token)
        .json(&json!({"to": to, "channel_id": channel_id, "template": {"name": "hello_world", "language": "en_US"}}))
        .send()
        .await
        .unwrap();
    let status = r.status();
    let retry_after = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    (status, retry_after, r.json().await.unwrap())
}

/// The message the error names reads back `failed` with the provider's code.
async fn failed_with(app: &TestApp, err: &Value, code: i64) {
    let id = err["message_id"]
        .as_i64()
        .expect("the error names the message");
    let (status, m) = app.get(&format!("/api/v1/messages/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{m}");
    assert_eq!(m["data"]["status"], "failed", "{m}");
    assert_eq!(m["data"]["error"]["code"], code, "{m}");
}

async fn each_refusal_answers_by_its_cause(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel_id, number) = app.connect_channel().await;
    let pnid = number.phone_number_id.as_str();

    // A template the provider does not know: the request's fault.
    next_error(&app, pnid, "messages", 132001).await;
    let (status, retry_after, err) = send(&app, channel_id, "5511911110001").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    assert_eq!(
        (err["code"].as_str(), err["provider_code"].as_i64()),
        (Some("provider_refused"), Some(132001)),
        "{err}"
    );
    assert_eq!(
        (err["retryable"].as_bool(), retry_after),
        (Some(false), None)
    );
    failed_with(&app, &err, 132001).await;

    // An undeliverable recipient: the request's fault too.
    next_error(&app, pnid, "messages", 131026).await;
    let (status, _, err) = send(&app, channel_id, "5511911110002").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    assert_eq!(err["provider_code"], 131026, "{err}");

    // Throttled: 429 with Retry-After, retryable.
    next_error(&app, pnid, "messages", 130429).await;
    let (status, retry_after, err) = send(&app, channel_id, "5511911110003").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{err}");
    assert_eq!(err["code"], "provider_rate_limited", "{err}");
    assert_eq!(err["retryable"], true, "{err}");
    let secs: u64 = retry_after.expect("Retry-After").parse().unwrap();
    assert!(secs >= 1, "Retry-After {secs}");
    assert_eq!(err["retry_after"], secs, "{err}");
    failed_with(&app, &err, 130429).await;

    // The provider failing: 502, retryable.
    next_error(&app, pnid, "messages", 131000).await;
    let (status, _, err) = send(&app, channel_id, "5511911110004").await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{err}");
    assert_eq!(
        (err["code"].as_str(), err["retryable"].as_bool()),
        (Some("provider_unavailable"), Some(true)),
        "{err}"
    );
    failed_with(&app, &err, 131000).await;

    // An invalid parameter outside a send (registering the number): 422, no message.
    next_error(&app, pnid, "register", 100).await;
    let (status, err) = app
        .post(
            &format!("/api/v1/channels/{channel_id}/register"),
            json!({"pin": "123456"}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    assert_eq!(
        (err["code"].as_str(), err["provider_code"].as_i64()),
        (Some("provider_refused"), Some(100)),
        "{err}"
    );
    assert!(err.get("message_id").is_none(), "{err}");

    // After all that, a plain send goes out.
    let (status, _, body) = send(&app, channel_id, "5511911110005").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

async fn no_answer_in_time_is_a_504(backend: Backend) {
    let app = TestApp::spawn_with(backend, |s| s.provider_timeout_ms = 400).await;
    let (channel_id, _) = app.connect_channel().await;
    let r = app
        .http
        .put(format!("http://{}/_sim/faults", app.sim_addr))
        .json(&json!({"share_timeout": 1.0, "timeout_ms": 1500}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let (status, err) = app
        .post(&format!("/api/v1/channels/{channel_id}/sync"), json!({}))
        .await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{err}");
    assert_eq!(
        (err["code"].as_str(), err["retryable"].as_bool()),
        (Some("provider_timeout"), Some(true)),
        "{err}"
    );
    // A 1:1 send that times out stays in doubt (202 with its id): it is never sent again.
    let (status, _, err) = send(&app, channel_id, "5511911110006").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{err}");
}

on_both_backends! {
    by_cause => each_refusal_answers_by_its_cause;
    timeout => no_answer_in_time_is_a_504;
}
