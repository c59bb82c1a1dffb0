//! 1:1 sends under load (issue 25 parts 2 and 4, D-076): concurrent `POST /messages` share
//! the writer's commits and each is answered with its own stored message; a 1:1 send on a
//! number whose campaign fills the in-flight window goes through the share kept for it.

mod common;

use common::{eventually, Backend, TestApp};
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn template(app: &TestApp, channels: &[i64]) -> i64 {
    app.approved_template(
        json!({"name": "Aviso de pedido", "category": "utility", "body": "Olá {{1}}, seu pedido saiu.", "var_map": {"1": {"field": "nome"}}}),
        channels,
    )
    .await
}

/// A sum of a metric's series (Prometheus text).
fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(0.0, |a, b| a + b)
}

async fn concurrent_sends_share_commits_and_each_gets_its_own_message(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel, _) = app.fast_channel().await;
    let t = template(&app, &[channel]).await;
    let before = app.metrics().await;
    let sends = futures::future::join_all((0..120).map(|i| {
        let app = &app;
        async move {
            app.post(
                "/api/v1/messages",
                json!({"channel_id": channel, "to": format!("55119300{i:05}"), "template": {"id": t, "vars": {"nome": format!("C{i}")}}}),
            )
            .await
        }
    }))
    .await;
    let mut ids = Vec::new();
    for (i, (status, body)) in sends.iter().enumerate() {
        assert_eq!(status, &StatusCode::CREATED, "{body}");
        let m = &body["data"];
        assert_eq!(m["to"], format!("55119300{i:05}"), "{m}");
        assert!(
            m["provider_message_id"]
                .as_str()
                .is_some_and(|w| w.starts_with("wamid.")),
            "{m}"
        );
        assert!(
            ["sent", "delivered", "read"].contains(&m["status"].as_str().unwrap()),
            "{m}"
        );
        ids.push(m["id"].as_i64().unwrap());
    }
    let mut distinct = ids.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 120, "each send has its own message");
    // Every one is stored and reaches `read` through the status webhooks.
    for id in &ids {
        eventually(20, "read", || async {
            let (_, m) = app.get(&format!("/api/v1/messages/{id}")).await;
            (m["data"]["status"] == "read").then_some(())
        })
        .await;
    }
    assert_eq!(
        app.sim_summary().await["per_recipient"]
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| k.starts_with("55119300"))
            .count(),
        120,
        "each reached the provider once"
    );
    // Both writes of every send (the row, the provider's answer) went through the writer of
    // 1:1 sends, in fewer transactions than writes.
    let after = app.metrics().await;
    let writes = metric(&after, "disparo_send_commit_batch_sum")
        - metric(&before, "disparo_send_commit_batch_sum");
    let commits = metric(&after, "disparo_send_commit_batch_count")
        - metric(&before, "disparo_send_commit_batch_count");
    assert!(writes >= 240.0, "writes {writes}");
    assert!(commits < writes, "{commits} commits for {writes} writes");
}

async fn a_one_to_one_send_does_not_queue_behind_the_campaign_window(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel, _) = app.fast_channel().await;
    let t = template(&app, &[channel]).await;
    let (status, c) = app
        .post(
            "/api/v1/campaigns",
            json!({"name": "Lote", "template_id": t, "channels": [{"channel_id": channel, "weight": 1}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let campaign = c["data"]["id"].as_i64().unwrap();
    let rows: Vec<Value> = (0..600)
        .map(|i| json!({"phone": format!("55119400{i:05}"), "vars": {"nome": format!("P{i}")}}))
        .collect();
    let (status, _) = app
        .post(
            &format!("/api/v1/campaigns/{campaign}/recipients"),
            json!({"recipients": rows}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    // Every provider answer is held 1.5 s: the campaign fills its window and holds it.
    app.hold_answers(Some(1500)).await;
    app.post(&format!("/api/v1/campaigns/{campaign}/start"), json!({}))
        .await;
    eventually(20, "the campaign's window full", || async {
        let (_, c) = app.get(&format!("/api/v1/campaigns/{campaign}")).await;
        (c["data"]["stats"]["sending"].as_u64()? >= 200).then_some(())
    })
    .await;
    let answered = || async {
        let (_, c) = app.get(&format!("/api/v1/campaigns/{campaign}")).await;
        let stats = &c["data"]["stats"];
        // `sent` counts every message the provider took (delivered and read ones too).
        stats["sent"].as_u64().unwrap() + stats["failed"].as_u64().unwrap()
    };
    // Right after a wave of the campaign was taken by the provider (the count moves), so the
    // 1:1 send's held answer sees exactly one more wave: the next
    // (its statuses are counted over a few batches: wait until the count holds for 200 ms).
    let first = answered().await;
    let (mut before, mut still) = (first, 0);
    while before == first || still < 4 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let now = answered().await;
        still = if now == before { still + 1 } else { 0 };
        before = now;
    }
    let (status, m) = app
        .post(
            "/api/v1/messages",
            json!({"channel_id": channel, "to": "5511950000001", "template": {"id": t, "vars": {"nome": "Ana"}}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{m}");
    // Sent beside the campaign's wave in flight (48 of the 64 calls), so answered while the
    // provider takes one more wave (48); without the share kept for it, it waits for a free
    // call and sees two (or, queued behind the 200 campaign sends, four).
    let during = answered().await - before;
    assert!(
        during <= 48,
        "the 1:1 send waited for {during} campaign sends to be answered"
    );
    app.hold_answers(None).await;
    eventually(60, "the campaign done", || async {
        let (_, c) = app.get(&format!("/api/v1/campaigns/{campaign}")).await;
        (c["data"]["state"] == "completed").then_some(())
    })
    .await;
}

/// Issue 54 (D-128): a burst of 1:1 sends over a number's throughput never reaches the
/// provider over it. 60 concurrent sends on a number the provider allows 20 messages/s: each
/// is sent (paced: queued at most a second) or answered 429 `throughput_exceeded` with
/// `Retry-After`; the simulator refuses none for throughput; a client that waits
/// `Retry-After` and sends again with its key gets every recipient sent exactly once.
async fn a_burst_over_the_numbers_throughput_is_paced_not_refused_by_the_provider(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let n = app
        .sim
        .create_number(provider::sim::CreateNumber {
            throughput_mps: Some(20),
            tier: Some("TIER_UNLIMITED".into()),
            ..Default::default()
        })
        .unwrap();
    let (status, c) = app
        .post("/api/v1/channels/official", json!({"phone_number_id": n.phone_number_id, "waba_id": n.waba_id, "access_token": n.access_token, "app_secret": n.app_secret}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let channel = c["data"]["id"].as_i64().unwrap();
    let send = |i: usize| {
        let app = &app;
        async move {
            let r = app
                .http
                .post(app.url("/api/v1/messages"))
                .bearer_auth(&app.token)
                .header("Idempotency-Key", format!("rajada-{i}"))
                .json(&json!({"channel_id": channel, "to": format!("5511931{i:06}"), "template": {"name": "hello_world", "language": "en_US"}}))
                .send()
                .await
                .unwrap();
            let retry_after = r
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
            (i, r.status(), retry_after, r.json::<Value>().await.unwrap())
        }
    };
    let mut pending: Vec<usize> = (0..60).collect();
    let (mut sent, mut refused_rounds) = (0, Vec::new());
    while !pending.is_empty() {
        let answers = futures::future::join_all(pending.iter().map(|i| send(*i))).await;
        let mut wait = 0;
        let mut again = Vec::new();
        for (i, status, retry_after, body) in answers {
            match status {
                StatusCode::CREATED => sent += 1,
                StatusCode::TOO_MANY_REQUESTS => {
                    assert_eq!(body["code"], "throughput_exceeded", "{body}");
                    let secs = retry_after.expect("Retry-After");
                    assert!((1..=2).contains(&secs), "{secs}");
                    wait = wait.max(secs);
                    again.push(i);
                }
                other => panic!("{other}: {body}"),
            }
        }
        refused_rounds.push(again.len());
        assert!(refused_rounds.len() < 10, "{refused_rounds:?}");
        tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
        pending = again;
    }
    eprintln!("refused per round: {refused_rounds:?}");
    assert_eq!(sent, 60);
    assert!(
        refused_rounds[0] > 0,
        "a burst of 60 at 20/s is refused in part: {refused_rounds:?}"
    );
    assert!(
        refused_rounds[0] <= 40,
        "about a second's worth was queued: {refused_rounds:?}"
    );
    let stats = app.sim_json("/_sim/stats").await;
    assert_eq!(
        stats["throughput_refusals"][&n.phone_number_id]
            .as_u64()
            .unwrap_or(0),
        0,
        "{stats}"
    );
    let ledger = app.sim_summary().await;
    assert_eq!(ledger["total"], 60, "{ledger}");
}

/// Issue 49 (noticed at item 5): a keyed request that runs into the server's request
/// timeout is resolved before the timeout answers, so a retry with the same key is not 409
/// for the key's 24 h. A send whose message was written is in doubt (202, the same message
/// on every retry, sent once); a create that wrote nothing releases its key (503, then the
/// retry runs).
async fn a_keyed_request_cut_by_the_timeout_can_be_retried(backend: Backend) {
    let app = TestApp::spawn_with(backend, |s| s.request_timeout_ms = 2_500).await;
    let (channel, _) = app.connect_channel().await;
    let other = app
        .sim
        .create_number(provider::sim::CreateNumber::default())
        .unwrap();
    app.hold_answers(Some(4_000)).await;
    let send = || {
        app.http
            .post(app.url("/api/v1/messages"))
            .bearer_auth(&app.token)
            .header("Idempotency-Key", "corte-envio-1")
            .json(&json!({"channel_id": channel, "to": "5511955550002", "template": {"name": "hello_world", "language": "en_US"}}))
            .send()
    };
    let first = send().await.unwrap();
    assert_eq!(
        first.status(),
        StatusCode::ACCEPTED,
        "in doubt, not the timeout's 503"
    );
    let first: Value = first.json().await.unwrap();
    let again = send().await.unwrap();
    assert_eq!(again.status(), StatusCode::ACCEPTED);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["data"]["id"], first["data"]["id"], "{again}");
    // A create held at the provider's confirmation: nothing written, the key released.
    let connect = || {
        app.http
            .post(app.url("/api/v1/channels/official"))
            .bearer_auth(&app.token)
            .header("Idempotency-Key", "corte-numero-1")
            .json(&json!({"phone_number_id": other.phone_number_id, "waba_id": other.waba_id, "access_token": other.access_token, "app_secret": other.app_secret}))
            .send()
    };
    let cut = connect().await.unwrap();
    assert_eq!(cut.status(), StatusCode::SERVICE_UNAVAILABLE);
    let cut: Value = cut.json().await.unwrap();
    assert_eq!(cut["code"], "tempo_esgotado", "{cut}");
    app.hold_answers(None).await;
    // The held confirmation of the cut request may still land; the retry runs either way.
    tokio::time::sleep(std::time::Duration::from_millis(4_500)).await;
    let retried = connect().await.unwrap();
    let status = retried.status();
    let body: Value = retried.json().await.unwrap();
    assert_eq!(status, StatusCode::CREATED, "the retry ran: {body}");
    eventually(10, "the doubtful send at the provider once", || async {
        let summary = app.sim_summary().await;
        let per_template = summary["per_recipient"]["5511955550002"]
            .as_object()?
            .clone();
        (per_template.values().filter_map(Value::as_u64).sum::<u64>() == 1).then_some(())
    })
    .await;
}

on_both_backends! {
    cut_by_timeout => a_keyed_request_cut_by_the_timeout_can_be_retried;
    burst => a_burst_over_the_numbers_throughput_is_paced_not_refused_by_the_provider;
    grouped => concurrent_sends_share_commits_and_each_gets_its_own_message;
    priority => a_one_to_one_send_does_not_queue_behind_the_campaign_window;
}
