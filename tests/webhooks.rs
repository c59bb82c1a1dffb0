//! Outbound webhooks an integrator can rely on: ordered per channel, every event once, across
//! a receiver outage and a server restart; `ping`.

mod common;

use common::{eventually, Backend, Receiver, TestApp};
use reqwest::StatusCode;
use serde_json::json;
use std::sync::atomic::Ordering;

async fn a_receiver_down_for_a_while_gets_every_event_once_in_order_after_a_restart(
    backend: Backend,
) {
    let mut app = TestApp::spawn_with(backend, |s| s.webhook_retry_ms = Some(vec![100; 40])).await;
    let (channel_id, _) = app.connect_channel().await;
    let receiver = Receiver::start().await;
    let (subscription_id, secret) = app
        .subscribe(channel_id, &receiver, &["message.sent", "message.ack"])
        .await;
    receiver.fail_first.store(usize::MAX, Ordering::SeqCst); // down
    let mut message_ids = Vec::new();
    for i in 0..3 {
        let (status, body) = app
            .post("/api/v1/messages", json!({"to": format!("551198888000{i}"), "template": {"name": "hello_world", "language": "en_US"}}))
            .await;
        assert_eq!(status, StatusCode::CREATED);
        message_ids.push(body["data"]["id"].as_i64().unwrap());
    }
    for id in &message_ids {
        eventually(10, "read", || async {
            let (_, m) = app.get(&format!("/api/v1/messages/{id}")).await;
            (m["data"]["status"] == "read").then_some(())
        })
        .await;
    }
    let (_, log) = app
        .get(&format!(
            "/api/v1/webhooks/{subscription_id}/deliveries?limit=200"
        ))
        .await;
    let total = log["data"].as_array().unwrap().len();
    assert!(total >= 6, "message.sent and acks queued: {log}");
    assert!(
        receiver.hits.load(Ordering::SeqCst) > 0,
        "attempts were made while it was down"
    );
    assert!(receiver.events().is_empty());
    let head_attempts = log["data"].as_array().unwrap().last().unwrap()["attempts"]
        .as_i64()
        .unwrap();
    assert!(head_attempts >= 1);
    assert!(
        log["data"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .skip(1)
            .all(|d| d["attempts"] == 0),
        "only the head of the queue is attempted while it fails: {log}"
    );

    app.restart().await;
    receiver.fail_first.store(0, Ordering::SeqCst); // back up
    let got = eventually(20, "every event delivered", || async {
        let e = receiver.events();
        (e.len() >= total).then_some(e)
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let got_all = receiver.events();
    assert_eq!(got_all.len(), got.len(), "nothing delivered twice");
    let ids: Vec<i64> = got_all
        .iter()
        .map(|c| c.json()["delivery_id"].as_i64().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "in order: {ids:?}");
    for c in &got_all {
        let sig = c.headers.get("x-svc-signature").unwrap().to_str().unwrap();
        assert!(engine::webhook::verify_signature(&secret, &c.body, sig));
    }
    let (_, log) = app
        .get(&format!(
            "/api/v1/webhooks/{subscription_id}/deliveries?limit=200"
        ))
        .await;
    assert!(
        log["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["status"] == "delivered"),
        "{log}"
    );
}

async fn a_ping_reaches_only_the_subscription_tested(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel_id, _) = app.connect_channel().await;
    let (a, b) = (Receiver::start().await, Receiver::start().await);
    let (sub_a, _) = app.subscribe(channel_id, &a, &["message.ack"]).await;
    app.subscribe(channel_id, &b, &["message.ack"]).await;
    let (status, body) = app
        .post(&format!("/api/v1/webhooks/{sub_a}/test"), json!({}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let ping = eventually(10, "ping", || async { a.events().into_iter().next() }).await;
    assert_eq!(ping.event(), "ping");
    assert_eq!(ping.json()["delivery_id"], body["data"]["delivery_id"]);
    assert!(b.events().is_empty());
    let other = app.other_account_token().await;
    let (status, _) = app
        .post_as(&other, &format!("/api/v1/webhooks/{sub_a}/test"), json!({}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

on_both_backends! {
    outage_and_restart => a_receiver_down_for_a_while_gets_every_event_once_in_order_after_a_restart;
    ping => a_ping_reaches_only_the_subscription_tested;
}

async fn a_repeated_idempotency_key_returns_the_first_result_and_never_sends_twice(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let (_, number) = app.connect_channel().await;
    let body =
        json!({"to": "5511987654321", "template": {"name": "hello_world", "language": "en_US"}});
    let post = |key: &'static str, body: serde_json::Value| {
        let req = app
            .http
            .post(app.url("/api/v1/messages"))
            .bearer_auth(&app.token)
            .header("idempotency-key", key)
            .json(&body);
        async move { req.send().await.unwrap() }
    };
    let first = post("pedido-123", body.clone()).await;
    assert_eq!(first.status(), StatusCode::CREATED);
    let first: serde_json::Value = first.json().await.unwrap();
    let again = post("pedido-123", body.clone()).await;
    assert_eq!(again.status(), StatusCode::CREATED);
    assert_eq!(again.headers().get("idempotent-replayed").unwrap(), "true");
    let again: serde_json::Value = again.json().await.unwrap();
    assert_eq!(again, first, "the first result, byte for byte");
    // Concurrent repeats of a new key: one send.
    let results = futures::future::join_all((0..5).map(|_| post("pedido-456", body.clone()))).await;
    let created = results
        .iter()
        .filter(|r| r.status() == StatusCode::CREATED)
        .count();
    assert!(
        created >= 1
            && results
                .iter()
                .all(|r| r.status() == StatusCode::CREATED || r.status() == StatusCode::CONFLICT)
    );
    // The same key with another body is refused.
    let other = post(
        "pedido-123",
        json!({"to": "5511900000000", "template": {"name": "hello_world", "language": "en_US"}}),
    )
    .await;
    assert_eq!(other.status(), StatusCode::UNPROCESSABLE_ENTITY);
    // A validation error is also remembered (and sends nothing).
    let bad = post("pedido-789", json!({"to": "1"})).await;
    assert_eq!(bad.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let summary: serde_json::Value = app
        .http
        .get(format!("http://{}/_sim/sent/summary", app.sim_addr))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        summary["data"]["per_recipient"]["5511987654321"]["hello_world"], 2,
        "one send per key: {summary}"
    );
    assert_eq!(summary["data"]["per_number"][&number.phone_number_id], 2);
}

on_both_backends! {
    idempotency => a_repeated_idempotency_key_returns_the_first_result_and_never_sends_twice;
}
