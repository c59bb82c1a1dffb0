//! Outbound webhooks an integrator can rely on: ordered per conversation, every event once,
//! across a receiver outage and a server restart, one contact's failures not delaying
//! another's; `ping`; subscription management.

mod common;

use common::{eventually, Backend, Receiver, TestApp};
use reqwest::StatusCode;
use serde_json::{json, Value};
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
    // Each contact is its own queue (D-065): while the receiver fails only the head of each
    // of the three contacts' queues — its `message.sent` — is attempted.
    let attempted: Vec<&serde_json::Value> = log["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["attempts"].as_i64() > Some(0))
        .collect();
    assert!(
        !attempted.is_empty()
            && attempted.len() <= 3
            && attempted.iter().all(|d| d["event"] == "message.sent"),
        "only the head of each contact's queue is attempted while it fails: {log}"
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
    assert_in_order_per_contact(&got_all);
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

/// The contact an event is about (`data.contact.phone` or `data.to`).
fn contact_of(c: &common::Captured) -> String {
    let j = c.json();
    j["data"]["contact"]["phone"]
        .as_str()
        .or(j["data"]["to"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// Every contact's events arrived in the order they were written (delivery ids ascending).
fn assert_in_order_per_contact(got: &[common::Captured]) {
    let mut last: std::collections::HashMap<String, i64> = Default::default();
    for c in got {
        let id = c.json()["delivery_id"].as_i64().unwrap();
        let prev = last.insert(contact_of(c), id);
        assert!(
            prev.is_none_or(|p| p < id),
            "{} out of order after {prev:?}",
            id
        );
    }
}

/// Issue 17: a receiver that fails every event of one contact does not delay another
/// contact's; deliveries of different contacts are in flight at once up to the bound per
/// endpoint; each contact's events arrive in order.
async fn a_failing_contact_does_not_delay_another(backend: Backend) {
    let app = TestApp::spawn_with(backend, |s| {
        s.webhook_retry_ms = Some(vec![150; 60]);
        s.webhook_per_endpoint = 3;
    })
    .await;
    let (channel_id, _) = app.connect_channel().await;
    let receiver = Receiver::start().await;
    let (subscription_id, _) = app
        .subscribe(channel_id, &receiver, &["message.sent", "message.ack"])
        .await;
    let failing = "5511977770000";
    *receiver.refuse.lock().unwrap() = Some(failing.to_string());
    receiver.hold_ms.store(150, Ordering::SeqCst);
    let send = |to: String| {
        let app = &app;
        async move {
            let (status, body) = app
                .post(
                    "/api/v1/messages",
                    json!({"to": to, "template": {"name": "hello_world", "language": "en_US"}}),
                )
                .await;
            assert_eq!(status, StatusCode::CREATED, "{body}");
        }
    };
    send(failing.to_string()).await;
    for i in 1..=6 {
        send(format!("551197777000{i}")).await;
    }
    // Six healthy contacts: `message.sent` and at least one ack each, while the failing one
    // is retried.
    let got = eventually(30, "the healthy contacts' events", || async {
        let e = receiver.events();
        (e.len() >= 12).then_some(e)
    })
    .await;
    assert!(
        got.iter().all(|c| contact_of(c) != failing),
        "nothing of the failing contact was accepted"
    );
    assert_in_order_per_contact(&got);
    let peak = receiver.peak.load(Ordering::SeqCst);
    assert!(
        (2..=3).contains(&peak),
        "several contacts in flight at once, at most 3 per endpoint: {peak}"
    );
    let (_, log) = app
        .get(&format!(
            "/api/v1/webhooks/{subscription_id}/deliveries?limit=200"
        ))
        .await;
    let pending: Vec<&serde_json::Value> = log["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["status"] == "pending")
        .collect();
    assert!(!pending.is_empty(), "{log}");
    let retried = pending.iter().filter(|d| d["attempts"].as_i64() > Some(0));
    assert_eq!(
        retried.count(),
        1,
        "only the failing contact's head is retried: {log}"
    );

    // The receiver takes the contact again: its events arrive, in order.
    *receiver.refuse.lock().unwrap() = None;
    receiver.hold_ms.store(0, Ordering::SeqCst);
    let all = eventually(30, "the failing contact's events", || async {
        let e = receiver.events();
        (e.iter().filter(|c| contact_of(c) == failing).count() >= 2).then_some(e)
    })
    .await;
    assert_in_order_per_contact(&all);
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

/// Every delivery of a subscription, newest first, page by page (`next_before`).
async fn all_deliveries(app: &TestApp, sub: i64) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let mut before = String::new();
    loop {
        let (status, page) = app
            .get(&format!(
                "/api/v1/webhooks/{sub}/deliveries?limit=200{before}"
            ))
            .await;
        assert_eq!(status, StatusCode::OK, "{page}");
        out.extend(page["data"].as_array().unwrap().iter().cloned());
        match page["next_before"].as_i64() {
            Some(b) => before = format!("&before={b}"),
            None => return out,
        }
    }
}

/// D-086: a backlog longer than the window the dispatcher keeps between polls (128 pending
/// deliveries of a subscription) drains to the last delivery, each event once and in order
/// per contact, while one contact's deliveries fail for a while (each failure drops the
/// kept window) and the others go through.
async fn a_backlog_longer_than_the_window_drains_in_order(backend: Backend) {
    let app = TestApp::spawn_with(backend, |s| s.webhook_retry_ms = Some(vec![100; 300])).await;
    let (channel_id, _) = app.connect_channel().await;
    let receiver = Receiver::start().await;
    let (subscription_id, _) = app
        .subscribe(channel_id, &receiver, &["message.sent", "message.ack"])
        .await;
    receiver.fail_first.store(usize::MAX, Ordering::SeqCst); // down
    let failing = "5511966660000";
    for i in 0..70 {
        let (status, body) = app
            .post(
                "/api/v1/messages",
                json!({"to": format!("55119666600{i:02}"), "template": {"name": "hello_world", "language": "en_US"}}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    // The whole backlog written (every message's events, unchanged between two looks):
    // more than one window of it.
    let seen = std::sync::atomic::AtomicUsize::new(0);
    let total = eventually(30, "a backlog longer than the window", || async {
        let all = all_deliveries(&app, subscription_id).await;
        let pending = all.iter().filter(|d| d["status"] == "pending").count();
        let before = seen.swap(pending, Ordering::SeqCst);
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        (pending == all.len() && pending >= 2 * 70 && pending == before).then_some(pending)
    })
    .await;
    assert!(total > storage::webhooks::DUE_WINDOW as usize);
    *receiver.refuse.lock().unwrap() = Some(failing.to_string());
    receiver.fail_first.store(0, Ordering::SeqCst); // back up, but for one contact
    let healthy = eventually(30, "every other contact's events", || async {
        let e = receiver.events();
        let n = e.iter().filter(|c| contact_of(c) != failing).count();
        (n > 0
            && all_deliveries(&app, subscription_id)
                .await
                .iter()
                .filter(|d| d["status"] == "pending")
                .count()
                == total - n)
            .then_some(n)
    })
    .await;
    assert!(
        receiver.events().iter().all(|c| contact_of(c) != failing),
        "nothing of the failing contact was accepted"
    );
    *receiver.refuse.lock().unwrap() = None;
    let got = eventually(30, "every event delivered", || async {
        let e = receiver.events();
        (e.len() >= total).then_some(e)
    })
    .await;
    assert!(
        got.len() - healthy >= 3,
        "the failing contact's events: {}",
        got.len()
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let got = receiver.events();
    assert_eq!(got.len(), total, "each event once");
    assert_in_order_per_contact(&got);
    let log = all_deliveries(&app, subscription_id).await;
    assert!(log.iter().all(|d| d["status"] == "delivered"));
}

/// `Idempotency-Key` on a creating route (issue 49 item 5): a category created twice with
/// one key is one category, the second answer the first's replayed; the key on another route,
/// or with another body, is refused; without a key each POST creates.
async fn an_idempotency_key_creates_a_record_once(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let post = |path: &'static str, key: &'static str, body: serde_json::Value| {
        let req = app
            .http
            .post(app.url(path))
            .bearer_auth(&app.token)
            .header("idempotency-key", key)
            .json(&body);
        async move { req.send().await.unwrap() }
    };
    let path = "/api/v1/wiki/categories";
    let first = post(path, "categoria-1", json!({"name": "Atendimento"})).await;
    assert_eq!(first.status(), StatusCode::CREATED);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first: serde_json::Value = first.json().await.unwrap();
    let again = post(path, "categoria-1", json!({"name": "Atendimento"})).await;
    assert_eq!(again.status(), StatusCode::CREATED);
    assert_eq!(again.headers().get("idempotent-replayed").unwrap(), "true");
    let again: serde_json::Value = again.json().await.unwrap();
    assert_eq!(again, first, "the first answer");
    let (_, list) = app.get(path).await;
    assert_eq!(list["data"].as_array().unwrap().len(), 1, "{list}");
    // The key with another body, or on another route: refused, nothing created.
    let r = post(path, "categoria-1", json!({"name": "Vendas"})).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let r = post(
        "/api/v1/wiki",
        "categoria-1",
        json!({"title": "Boas-vindas"}),
    )
    .await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    // Without a key, each POST creates.
    let (status, _) = app.post(path, json!({"name": "Vendas"})).await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, list) = app.get(path).await;
    assert_eq!(list["data"].as_array().unwrap().len(), 2, "{list}");
}

on_both_backends! {
    outage_and_restart => a_receiver_down_for_a_while_gets_every_event_once_in_order_after_a_restart;
    ping => a_ping_reaches_only_the_subscription_tested;
    failing_contact => a_failing_contact_does_not_delay_another;
    long_backlog => a_backlog_longer_than_the_window_drains_in_order;
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
    // The same request with its keys in another order is the same request (issue 49).
    let reordered = app
        .http
        .post(app.url("/api/v1/messages"))
        .bearer_auth(&app.token)
        .header("idempotency-key", "pedido-123")
        .header("content-type", "application/json")
        .body(
            r#"{"template": {"language": "en_US", "name": "hello_world"}, "to": "5511987654321"}"#,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(reordered.status(), StatusCode::CREATED);
    assert_eq!(
        reordered.headers().get("idempotent-replayed").unwrap(),
        "true"
    );
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

async fn sent_to(app: &TestApp, phone: &str) -> i64 {
    app.sim_summary().await["per_recipient"][phone]["hello_world"]
        .as_i64()
        .unwrap_or(0)
}

async fn one_idempotency_key_reaches_the_provider_once_across_timeouts_and_restarts(
    backend: Backend,
) {
    let mut app = TestApp::spawn_with(backend, |s| s.provider_timeout_ms = 300).await;
    let (channel_id, _) = app.connect_channel().await;
    let to = "5511911112222";
    let body = json!({"to": to, "template": {"name": "hello_world", "language": "en_US"}});
    let post = |key: &'static str| {
        let req = app
            .http
            .post(app.url("/api/v1/messages"))
            .bearer_auth(&app.token)
            .header("idempotency-key", key)
            .json(&body);
        async move {
            let r = req.send().await.unwrap();
            let replayed = r.headers().contains_key("idempotent-replayed");
            let status = r.status();
            (
                status,
                replayed,
                r.json::<serde_json::Value>().await.unwrap(),
            )
        }
    };

    // The provider takes the send but answers after our timeout: in doubt, 202 with the
    // message, and every retry with the key gets that message, never a second send.
    app.hold_answers(Some(900)).await;
    let (status, replayed, first) = post("pedido-lento").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{first}");
    assert!(!replayed);
    // `sending`, unless its status webhooks (sent before the held answer) got there first.
    assert!(
        ["sending", "sent", "delivered", "read"]
            .contains(&first["data"]["status"].as_str().unwrap()),
        "{first}"
    );
    let message_id = first["data"]["id"].as_i64().unwrap();
    for _ in 0..3 {
        let (status, replayed, again) = post("pedido-lento").await;
        assert_eq!(status, StatusCode::ACCEPTED, "{again}");
        assert!(replayed);
        assert_eq!(again["data"]["id"], message_id);
    }
    app.hold_answers(None).await;
    // The provider did accept it: its status webhooks settle the message.
    eventually(
        10,
        "the in-doubt message settled by its statuses",
        || async {
            let (_, m) = app.get(&format!("/api/v1/messages/{message_id}")).await;
            (m["data"]["status"] == "read").then_some(())
        },
    )
    .await;
    let (status, _, late) = post("pedido-lento").await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(late["data"]["id"], message_id);
    assert_eq!(late["data"]["status"], "read", "the message as it stands");
    assert_eq!(
        sent_to(&app, to).await,
        1,
        "one key, one message at the provider"
    );

    // Keys a crash left pending: bound to a message → in doubt; not bound → released.
    let store = app.runtime.store().clone();
    let hash = |b: &serde_json::Value| engine::token::hash_token(&b.to_string());
    let crash_body =
        json!({"to": "5511911113333", "template": {"name": "hello_world", "language": "en_US"}});
    store
        .idempotency_begin(app.account_id, "antes-da-queda", &hash(&crash_body))
        .await
        .unwrap();
    app.restart().await;
    let r = app
        .http
        .post(app.url("/api/v1/messages"))
        .bearer_auth(&app.token)
        .header("idempotency-key", "antes-da-queda")
        .header("content-type", "application/json")
        .body(crash_body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::CREATED,
        "nothing was written for the key, so it runs now"
    );
    assert_eq!(sent_to(&app, "5511911113333").await, 1);

    // POST /campaigns honours the key too: a retried creation is the same campaign.
    let template = app
        .approved_template(
            json!({"name": "Natal", "body": "Feliz Natal, {{1}}!", "var_map": {"1": {"field": "nome"}}}),
            &[channel_id],
        )
        .await;
    let campaign = json!({"name": "Natal", "template_id": template, "channels": [{"channel_id": channel_id, "weight": 1}]});
    let create = |key: &'static str| {
        let req = app
            .http
            .post(app.url("/api/v1/campaigns"))
            .bearer_auth(&app.token)
            .header("idempotency-key", key)
            .json(&campaign);
        async move {
            let r = req.send().await.unwrap();
            let replayed = r.headers().contains_key("idempotent-replayed");
            (
                r.status(),
                replayed,
                r.json::<serde_json::Value>().await.unwrap(),
            )
        }
    };
    let (s1, r1, b1) = create("campanha-1").await;
    let (s2, r2, b2) = create("campanha-1").await;
    assert_eq!(
        (s1, r1, s2, r2),
        (StatusCode::CREATED, false, StatusCode::CREATED, true),
        "{b1} {b2}"
    );
    assert_eq!(b1["data"]["id"], b2["data"]["id"]);
    let (s3, r3, b3) = create("campanha-2").await;
    assert_eq!((s3, r3), (StatusCode::CREATED, false));
    assert_ne!(
        b3["data"]["id"], b1["data"]["id"],
        "another key, another campaign"
    );
}

async fn a_subscription_that_only_fails_is_disabled_and_the_account_told(backend: Backend) {
    let app = TestApp::spawn_with(backend, |s| {
        s.webhook_disable_after_ms = 400;
        s.webhook_retry_ms = Some(vec![100; 50]);
    })
    .await;
    let (channel_id, _) = app.connect_channel().await;
    let dead = Receiver::start().await;
    dead.fail_first.store(usize::MAX, Ordering::SeqCst);
    let alive = Receiver::start().await;
    let (dead_id, _) = app.subscribe(channel_id, &dead, &["message.sent"]).await;
    let (alive_id, _) = app.subscribe(channel_id, &alive, &["message.sent"]).await;
    let (status, _) = app
        .post(&format!("/api/v1/webhooks/{dead_id}/test"), json!({}))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let disabled = eventually(10, "the dead subscription disabled", || async {
        let (_, list) = app
            .get(&format!("/api/v1/channels/{channel_id}/webhooks"))
            .await;
        list["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == dead_id && s["active"] == false)
            .cloned()
    })
    .await;
    assert!(
        disabled["disabled_reason"]
            .as_str()
            .unwrap()
            .starts_with("todas as tentativas falharam"),
        "{disabled}"
    );
    assert!(disabled["disabled_at"].is_string());
    // The account's other subscription is told, whatever events it lists.
    let event = eventually(10, "webhook.disabled at the other endpoint", || async {
        alive
            .events()
            .into_iter()
            .find(|e| e.event() == "webhook.disabled")
    })
    .await;
    let body = event.json();
    assert_eq!(body["data"]["subscription_id"], dead_id, "{body}");
    assert_eq!(body["data"]["url"], dead.url());
    let audit = app
        .runtime
        .store()
        .list_audit(app.account_id, 20)
        .await
        .unwrap();
    assert!(
        audit
            .iter()
            .any(|a| a.action == "webhook.disabled" && a.target.ends_with(&format!("/{dead_id}"))),
        "{audit:?}"
    );
    // Disabled, it gets no more attempts.
    let hits = dead.hits.load(Ordering::SeqCst);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(dead.hits.load(Ordering::SeqCst), hits);
    let _ = alive_id;
}

on_both_backends! {
    disabled => a_subscription_that_only_fails_is_disabled_and_the_account_told;
    idempotency => a_repeated_idempotency_key_returns_the_first_result_and_never_sends_twice;
    idempotent_creates => an_idempotency_key_creates_a_record_once;
    idempotency_in_doubt => one_idempotency_key_reaches_the_provider_once_across_timeouts_and_restarts;
}

/// The newest delivery of a subscription once its first attempt is logged.
async fn first_attempt(app: &TestApp, sub_id: i64) -> serde_json::Value {
    eventually(10, "the first attempt logged", || async {
        let (_, log) = app
            .get(&format!("/api/v1/webhooks/{sub_id}/deliveries"))
            .await;
        let d = log["data"][0].clone();
        (d["attempts"].as_i64() == Some(1)).then_some(d)
    })
    .await
}

/// A name of this machine that resolves only to loopback addresses (the host name does in
/// the project's machines; `localhost` itself is refused before any resolution).
async fn a_name_resolving_to_loopback() -> String {
    let mut candidates = vec!["localhost.localdomain".to_string(), "ip6-localhost".into()];
    if let Ok(h) = std::fs::read_to_string("/etc/hostname") {
        candidates.insert(0, h.trim().to_string());
    }
    for name in candidates.into_iter().filter(|n| !n.is_empty()) {
        let addrs: Vec<_> = match tokio::net::lookup_host((name.as_str(), 0)).await {
            Ok(found) => found.collect(),
            Err(_) => continue,
        };
        if !addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback()) {
            return name;
        }
    }
    panic!("no name of this machine resolves to loopback only");
}

async fn webhook_urls_to_private_addresses_are_refused_at_subscription_and_at_delivery(
    backend: Backend,
) {
    let app = TestApp::spawn_with(backend, |s| {
        s.allowed_subnets.clear();
        s.webhook_retry_ms = Some(vec![60_000]);
    })
    .await;
    let (channel_id, _) = app.connect_channel().await;
    let path = format!("/api/v1/channels/{channel_id}/webhooks");
    for url in [
        "http://localhost:8080/hook",
        "http://LOCALHOST./hook",
        "http://api.localhost/hook",
        "http://127.0.0.1/hook",
        "http://0.0.0.0/hook",
        "http://10.0.0.1/hook",
        "http://172.16.0.1/hook",
        "http://192.168.1.1/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://100.64.0.1/hook",
        "http://198.18.0.1/hook",
        "http://240.0.0.1/hook",
        "http://[::1]/hook",
        "http://[fd00::1]/hook",
        "http://[fe80::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://[::7f00:1]/hook",
        "http://[64:ff9b::a9fe:a9fe]/hook",
        "http://[2002:7f00:1::1]/hook",
        "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook",
        "http://2130706433/hook",
        "http://0x7f.1/hook",
    ] {
        let (status, err) = app
            .post(&path, json!({"url": url, "events": ["message.sent"]}))
            .await;
        assert_eq!(
            (status, err["code"].as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some("private_url")),
            "{url}: {err}"
        );
        assert!(
            err["message"].as_str().unwrap().contains("privado"),
            "{err}"
        );
    }
    for url in [
        "ftp://example.com/x",
        "https://user:pw@example.com/x",
        "hook",
    ] {
        let (status, err) = app
            .post(&path, json!({"url": url, "events": ["message.sent"]}))
            .await;
        assert_eq!(
            (status, err["code"].as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_url")),
            "{url}: {err}"
        );
    }
    let (_, list) = app.get(&path).await;
    assert_eq!(list["data"].as_array().unwrap().len(), 0, "nothing stored");

    // A name is resolved at delivery: one that resolves to loopback is refused there, logged,
    // and the receiver behind it hears nothing.
    let receiver = Receiver::start().await;
    let name = a_name_resolving_to_loopback().await;
    let url = format!("http://{name}:{}/hook", receiver.addr.port());
    let (status, sub) = app
        .post(&path, json!({"url": url, "events": ["message.sent"]}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sub}");
    let sub_id = sub["data"]["id"].as_i64().unwrap();
    let (status, _) = app
        .post(&format!("/api/v1/webhooks/{sub_id}/test"), json!({}))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let delivery = first_attempt(&app, sub_id).await;
    assert!(
        delivery["last_error"]
            .as_str()
            .unwrap()
            .starts_with("refused:"),
        "{delivery}"
    );
    assert_eq!(delivery["last_status_code"], serde_json::Value::Null);
    assert_eq!(receiver.hits.load(Ordering::SeqCst), 0);
}

async fn a_redirect_is_a_failed_attempt_and_is_not_followed(backend: Backend) {
    let app = TestApp::spawn_with(backend, |s| s.webhook_retry_ms = Some(vec![60_000])).await;
    let (channel_id, _) = app.connect_channel().await;
    let receiver = Receiver::start().await;
    // An endpoint that redirects to the receiver (allowed itself): the redirect is the answer.
    let target = receiver.url();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let redirector = listener.local_addr().unwrap();
    let app_router = axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            let target = target.clone();
            async move { axum::response::Redirect::temporary(&target) }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app_router).await.ok() });
    let (status, sub) = app
        .post(
            &format!("/api/v1/channels/{channel_id}/webhooks"),
            json!({"url": format!("http://{redirector}/hook"), "events": ["message.sent"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sub}");
    let sub_id = sub["data"]["id"].as_i64().unwrap();
    app.post(&format!("/api/v1/webhooks/{sub_id}/test"), json!({}))
        .await;
    let delivery = first_attempt(&app, sub_id).await;
    assert_eq!(delivery["last_status_code"], 307, "{delivery}");
    assert_eq!(delivery["status"], "pending", "retried later: {delivery}");
    assert_eq!(receiver.hits.load(Ordering::SeqCst), 0, "not followed");
}

on_both_backends! {
    ssrf => webhook_urls_to_private_addresses_are_refused_at_subscription_and_at_delivery;
    redirects => a_redirect_is_a_failed_attempt_and_is_not_followed;
}

/// The status of a delivery in the subscription's log.
async fn delivery_status(app: &TestApp, sub: i64, delivery: i64) -> String {
    let (_, log) = app.get(&format!("/api/v1/webhooks/{sub}/deliveries")).await;
    log["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == delivery)
        .map(|d| d["status"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

async fn ping(app: &TestApp, sub: i64) -> i64 {
    let (s, b) = app
        .post(&format!("/api/v1/webhooks/{sub}/test"), json!({}))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    b["data"]["delivery_id"].as_i64().unwrap()
}

/// Issue 17: an integrator reads, edits, pauses, rotates the secret of, retries, recovers and
/// deletes a subscription.
async fn an_integrator_manages_a_subscription(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel_id, _) = app.connect_channel().await;
    let r = Receiver::start().await;
    let (sub, first_secret) = app.subscribe(channel_id, &r, &["message.sent"]).await;

    let (s, b) = app.get(&format!("/api/v1/webhooks/{sub}")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        (b["data"]["url"].as_str(), b["data"]["secret"].is_null()),
        (Some(r.url().as_str()), true),
        "{b}"
    );
    let (s, b) = app
        .patch(
            &format!("/api/v1/webhooks/{sub}"),
            json!({"events": ["message.sent", "campaign.status"]}),
        )
        .await;
    assert_eq!(
        (s, b["data"]["events"].clone()),
        (StatusCode::OK, json!(["message.sent", "campaign.status"])),
        "{b}"
    );
    let (s, b) = app
        .patch(
            &format!("/api/v1/webhooks/{sub}"),
            json!({"url": "http://10.1.2.3/hook"}),
        )
        .await;
    assert_eq!(
        (s, b["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("private_url")),
        "{b}"
    );
    let (s, b) = app
        .patch(
            &format!("/api/v1/webhooks/{sub}"),
            json!({"events": ["message.nope"]}),
        )
        .await;
    assert_eq!(
        (s, b["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("unknown_event")),
        "{b}"
    );

    // Rotation: during the overlap both signatures come, comma-separated; each verifies.
    let (s, b) = app
        .post(
            &format!("/api/v1/webhooks/{sub}/rotate-secret"),
            json!({"overlap_seconds": 3600}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let second_secret = b["data"]["secret"].as_str().unwrap().to_string();
    assert!(second_secret.starts_with("whsec_") && second_secret != first_secret);
    ping(&app, sub).await;
    let got = eventually(10, "ping after rotation", || async {
        r.events().into_iter().last()
    })
    .await;
    let header = got.headers["x-svc-signature"].to_str().unwrap().to_string();
    let parts: Vec<&str> = header.split(',').collect();
    assert_eq!(parts.len(), 2, "{header}");
    assert!(engine::webhook::verify_signature(
        &second_secret,
        &got.body,
        parts[0]
    ));
    assert!(engine::webhook::verify_signature(
        &first_secret,
        &got.body,
        parts[1]
    ));
    // Without an overlap only the newest signs.
    let (_, b) = app
        .post(
            &format!("/api/v1/webhooks/{sub}/rotate-secret"),
            json!({"overlap_seconds": 0}),
        )
        .await;
    let third_secret = b["data"]["secret"].as_str().unwrap().to_string();
    let before = r.events().len();
    ping(&app, sub).await;
    let got = eventually(10, "ping after a rotation without overlap", || async {
        r.events().get(before).cloned()
    })
    .await;
    let header = got.headers["x-svc-signature"].to_str().unwrap();
    assert!(!header.contains(','), "{header}");
    assert!(engine::webhook::verify_signature(
        &third_secret,
        &got.body,
        header
    ));
    let (s, b) = app
        .post(
            &format!("/api/v1/webhooks/{sub}/rotate-secret"),
            json!({"overlap_seconds": 9_999_999}),
        )
        .await;
    assert_eq!(
        (s, b["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_overlap"))
    );

    // A delivery that exhausted its attempts is retried by hand; recover re-queues the rest.
    r.fail_first.store(5, Ordering::SeqCst);
    let failed = ping(&app, sub).await;
    eventually(15, "failed after its attempts", || async {
        (delivery_status(&app, sub, failed).await == "failed").then_some(())
    })
    .await;
    let (s, b) = app
        .post(
            &format!("/api/v1/webhooks/{sub}/deliveries/{failed}/retry"),
            json!({}),
        )
        .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    eventually(10, "delivered on retry", || async {
        (delivery_status(&app, sub, failed).await == "delivered").then_some(())
    })
    .await;
    let (s, b) = app
        .post(
            &format!("/api/v1/webhooks/{sub}/deliveries/{failed}/retry"),
            json!({}),
        )
        .await;
    assert_eq!(
        (s, b["code"].as_str()),
        (StatusCode::CONFLICT, Some("not_failed"))
    );
    let (s, _) = app
        .post(
            &format!("/api/v1/webhooks/{sub}/deliveries/999999/retry"),
            json!({}),
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // One failed before `since` stays failed; the two after it are recovered.
    r.fail_first.store(5, Ordering::SeqCst);
    let old = ping(&app, sub).await;
    eventually(15, "old one failed", || async {
        (delivery_status(&app, sub, old).await == "failed").then_some(())
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let since = actors::time::iso(storage::now_ms());
    r.fail_first.store(10, Ordering::SeqCst);
    let (a, b2) = (ping(&app, sub).await, ping(&app, sub).await);
    eventually(20, "both failed", || async {
        (delivery_status(&app, sub, a).await == "failed"
            && delivery_status(&app, sub, b2).await == "failed")
            .then_some(())
    })
    .await;
    r.fail_first.store(0, Ordering::SeqCst);
    let (s, b) = app
        .post(
            &format!("/api/v1/webhooks/{sub}/recover"),
            json!({"since": since}),
        )
        .await;
    assert_eq!(
        (s, b["data"]["requeued"].as_u64()),
        (StatusCode::ACCEPTED, Some(2)),
        "{b}"
    );
    eventually(10, "recovered", || async {
        (delivery_status(&app, sub, a).await == "delivered"
            && delivery_status(&app, sub, b2).await == "delivered")
            .then_some(())
    })
    .await;
    assert_eq!(delivery_status(&app, sub, old).await, "failed");
    let (s, b) = app
        .post(
            &format!("/api/v1/webhooks/{sub}/recover"),
            json!({"since": "ontem"}),
        )
        .await;
    assert_eq!(
        (s, b["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_date"))
    );

    // Inactive: deliveries wait; active again: they go.
    let (s, b) = app
        .patch(&format!("/api/v1/webhooks/{sub}"), json!({"active": false}))
        .await;
    assert_eq!(
        (s, b["data"]["active"].as_bool()),
        (StatusCode::OK, Some(false))
    );
    let waiting = ping(&app, sub).await;
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(delivery_status(&app, sub, waiting).await, "pending");
    let (s, _) = app
        .patch(&format!("/api/v1/webhooks/{sub}"), json!({"active": true}))
        .await;
    assert_eq!(s, StatusCode::OK);
    eventually(10, "delivered once active", || async {
        (delivery_status(&app, sub, waiting).await == "delivered").then_some(())
    })
    .await;

    // Other accounts reach none of it; delete removes it.
    let other = app.other_account_token().await;
    let (s, _) = app.get_as(&other, &format!("/api/v1/webhooks/{sub}")).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = app
        .post_as(
            &other,
            &format!("/api/v1/webhooks/{sub}/rotate-secret"),
            json!({}),
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = app.delete(&format!("/api/v1/webhooks/{sub}")).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = app.get(&format!("/api/v1/webhooks/{sub}")).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

on_both_backends! {
    manage => an_integrator_manages_a_subscription;
}

/// Runs `tests/standardwebhooks/verify.py` (the official `standardwebhooks` package, pinned in
/// tests/requirements.txt) over `deliveries` with each of `secrets`; its verdicts, one object
/// per delivery: each secret's label → "ok" or the library's error, and `tampered`, `late`.
async fn verdicts(deliveries: &[common::Captured], secrets: Value) -> Vec<Value> {
    let spec = json!({
        "deliveries": deliveries.iter().map(|c| json!({
            "headers": c.headers.iter()
                .map(|(k, v)| (k.to_string(), json!(v.to_str().unwrap())))
                .collect::<serde_json::Map<_, _>>(),
            "body": std::str::from_utf8(&c.body).unwrap(),
        })).collect::<Vec<_>>(),
        "secrets": secrets,
    });
    static RUN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = RUN.fetch_add(1, Ordering::Relaxed);
    let file = std::env::temp_dir().join(format!("sw-{}-{n}.json", std::process::id()));
    std::fs::write(&file, spec.to_string()).unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/standardwebhooks/verify.py"
    );
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .arg(script)
            .arg(&file)
            .output()
    })
    .await
    .unwrap()
    .expect("python3 runs");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the verifier printed no JSON ({e}; install tests/requirements.txt):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Issue 48 item 2: every delivery verifies with the official Standard Webhooks library —
/// a real event and a ping, before and during a secret rotation's overlap (both secrets
/// sign) — while a wrong secret, a changed body and the same delivery checked past the
/// library's five-minute tolerance fail. The legacy `X-Svc-Signature` is still sent.
async fn deliveries_verify_with_the_standard_webhooks_library(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel_id, _) = app.connect_channel().await;
    let r = Receiver::start().await;
    let (sub, first) = app.subscribe(channel_id, &r, &["message.sent"]).await;
    let (status, body) = app
        .post("/api/v1/messages", json!({"to": "5511988880001", "template": {"name": "hello_world", "language": "en_US"}}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    eventually(10, "message.sent delivered", || async {
        r.events()
            .iter()
            .any(|c| c.event() == "message.sent")
            .then_some(())
    })
    .await;
    let (s, b) = app
        .post(
            &format!("/api/v1/webhooks/{sub}/rotate-secret"),
            json!({"overlap_seconds": 3600}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let second = b["data"]["secret"].as_str().unwrap().to_string();
    ping(&app, sub).await;
    let got = eventually(10, "the ping after the rotation", || async {
        let events = r.events();
        events.iter().any(|c| c.event() == "ping").then_some(events)
    })
    .await;
    for c in &got {
        let id = c.headers["webhook-id"].to_str().unwrap();
        assert_eq!(
            id,
            c.json()["delivery_id"].to_string(),
            "webhook-id is the delivery"
        );
        assert!(
            c.headers.contains_key("x-svc-signature"),
            "legacy header kept"
        );
    }
    let secrets = json!({"first": first, "second": second, "wrong": "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"});
    let v = verdicts(&got, secrets).await;
    let sent = got
        .iter()
        .position(|c| c.event() == "message.sent")
        .unwrap();
    let pinged = got.iter().position(|c| c.event() == "ping").unwrap();
    let (before, during) = (&v[sent], &v[pinged]);
    assert_eq!(before["first"], "ok", "{before}");
    assert_ne!(
        before["second"], "ok",
        "signed before the second secret existed: {before}"
    );
    assert_eq!(
        (&during["first"], &during["second"]),
        (&json!("ok"), &json!("ok")),
        "{during}"
    );
    for verdict in [before, during] {
        assert_ne!(verdict["wrong"], "ok", "{verdict}");
        let tampered = verdict["tampered"].as_str().unwrap();
        assert!(tampered.contains("No matching signature"), "{verdict}");
        let late = verdict["late"].as_str().unwrap();
        assert!(late.contains("too old"), "{verdict}");
    }
}

on_both_backends! {
    standard_webhooks => deliveries_verify_with_the_standard_webhooks_library;
}

/// Issue 48 item 3: every event kind is in the document's `webhooks` section with a typed
/// schema, and real deliveries of each kind the suite can provoke here — sent, acknowledged
/// and received messages (text and a tapped button), a template's approval, a campaign's
/// start and completion, a number going RED, its WABA banned, its BM's tier, a ping — validate
/// against it (`jsonschema`, as a generator reads the document). A delivery that does not
/// match (a renamed field, a wrong type, a missing member) fails here.
async fn every_delivery_matches_the_documented_schema(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel_id, number) = app.connect_channel().await;
    let r = Receiver::start().await;
    let kinds: Vec<&str> = engine::webhook::EventKind::SUBSCRIBABLE
        .iter()
        .map(|k| k.as_str())
        .collect();
    let (sub, _) = app.subscribe(channel_id, &r, &kinds).await;
    let (_, doc) = app.get("/api/v1/openapi.json").await;
    let hooks = doc["webhooks"].as_object().expect("a webhooks section");
    for k in kinds.iter().chain(&["ping", "webhook.disabled"]) {
        assert!(hooks.contains_key(*k), "{k} is not in the document");
    }

    let (status, sent) = app
        .post("/api/v1/messages", json!({"to": "5511977770000", "template": {"name": "hello_world", "language": "en_US"}}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    app.inbound(&number.phone_number_id, "5511977770000", "Oi")
        .await;
    let sim = |path: String, body: Value| {
        let app = &app;
        async move {
            let res = app
                .http
                .post(format!("http://{}{path}", app.sim_addr))
                .json(&body)
                .send()
                .await
                .unwrap();
            assert!(res.status().is_success(), "{path}: {}", res.status());
        }
    };
    sim("/_sim/inbound".into(), json!({"phone_number_id": number.phone_number_id, "from": "5511977770001", "type": "interactive", "payload": {"type": "button_reply", "button_reply": {"id": "b1", "title": "Sim"}}})).await;
    let template = app
        .approved_template(
            json!({"name": "Aviso", "body": "Olá {{1}}.", "var_map": {"1": {"field": "nome"}}}),
            &[channel_id],
        )
        .await;
    let (status, c) = app
        .post("/api/v1/campaigns", json!({"name": "Contrato", "template_id": template, "channels": [{"channel_id": channel_id}]}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let campaign = c["data"]["id"].as_i64().unwrap();
    app.post(
        &format!("/api/v1/campaigns/{campaign}/recipients"),
        json!({"recipients": [{"phone": "5511977770002", "vars": {"nome": "Ana"}}]}),
    )
    .await;
    let (status, b) = app
        .post(&format!("/api/v1/campaigns/{campaign}/start"), json!({}))
        .await;
    assert!(status.is_success(), "{b}");
    app.post(&format!("/api/v1/webhooks/{sub}/test"), json!({}))
        .await;
    sim(
        format!("/_sim/numbers/{}/quality", number.phone_number_id),
        json!({"quality": "RED"}),
    )
    .await;
    sim(
        format!("/_sim/wabas/{}/account-update", number.waba_id),
        json!({"event": "DISABLED_UPDATE", "ban_state": "DISABLE"}),
    )
    .await;
    sim(
        format!("/_sim/wabas/{}/capability", number.waba_id),
        json!({"max_daily_conversations_per_business": 2000}),
    )
    .await;

    let provoked = [
        "message.sent",
        "message.ack",
        "message.received",
        "template.status",
        "campaign.status",
        "channel.health",
        "waba.standing",
        "bm.tier",
        "ping",
    ];
    let got = eventually(20, "a delivery of each kind", || async {
        let events = r.events();
        provoked
            .iter()
            .all(|k| events.iter().any(|c| c.event() == *k))
            .then_some(events)
    })
    .await;
    let deliveries: Vec<(String, Value)> = got.iter().map(|c| (c.event(), c.json())).collect();
    let verdicts = common::schema_errors(&doc, deliveries).await;
    let wrong: Vec<_> = verdicts.iter().filter(|(_, e)| !e.is_empty()).collect();
    assert!(wrong.is_empty(), "deliveries off their schema: {wrong:#?}");
    assert!(verdicts.len() >= provoked.len());
    // The check can fail: a delivery with a field of the wrong type is refused.
    let mut broken = got[0].json();
    broken["delivery_id"] = json!("um");
    let v = common::schema_errors(&doc, vec![(got[0].event(), broken)]).await;
    assert!(!v[0].1.is_empty(), "a wrong type passed: {v:?}");
}

on_both_backends! {
    documented_events => every_delivery_matches_the_documented_schema;
}
