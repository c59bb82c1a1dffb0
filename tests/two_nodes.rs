//! Two `disparo serve` processes on one PostgreSQL database (issue 50, D-100): a campaign
//! started on the first while the second is restarted twice mid-run (once killed with
//! SIGKILL, once stopped with SIGTERM); both run the campaign (a booting process resumes every
//! running campaign) and both poll the outbox. Then the first, which holds the webhook
//! subscriptions, is stopped with SIGTERM while a slow receiver leaves a backlog: the second
//! takes the subscriptions over. Every recipient is sent exactly once at the simulator's
//! ledger, the campaign completes, and the integrator's receiver gets every delivery and none
//! twice. PostgreSQL only (SQLite is one process's database).

mod common;

use common::gateway::{assert_each_once, campaign_over_two_numbers, sent_log, Api, Gateway};
use common::{eventually, Backend, Receiver, TestDb};
use reqwest::{Method, StatusCode};
use serde_json::json;
use std::collections::HashMap;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_one_database_each_recipient_and_delivery_once() {
    let Some(backend) = Backend::postgres() else {
        eprintln!("DISPARO_TEST_POSTGRES_URL unset: PostgreSQL run skipped");
        return;
    };
    let db = TestDb::create(&backend).await;
    let env = vec![
        ("DATABASE_URL", db.url.clone()),
        ("DISPARO_MASTER_KEY", storage::Cipher::generate_key_base64()),
        ("DISPARO_IN_DOUBT_GRACE_MS", "10000".into()),
        ("DISPARO_NODE_TTL_MS", "3000".into()),
        ("DISPARO_WEBHOOK_RETRY_MS", "100,200,400,800".into()),
        ("DISPARO_ALLOWED_SUBNETS", "127.0.0.1".into()),
    ];
    let mut a = Gateway::on_free_port(env.clone());
    let mut b = Gateway::on_free_port(env);
    // The provider's webhooks reach the first node (the one that stays up).
    let sim = common::gateway::patient_simulator(format!("http://{}/webhooks/messaging", a.addr));
    let sim_addr = sim.clone().spawn("127.0.0.1:0").await.unwrap();
    for g in [&mut a, &mut b] {
        g.env
            .push(("PROVIDER_BASE_URL", format!("http://{sim_addr}")));
    }
    a.start().await;
    let api = Api::new(&a.addr, &a.token());
    const N: usize = 4000;
    let (id, channels) = campaign_over_two_numbers(&api, &sim, N).await;
    let receiver = Receiver::start().await;
    for c in &channels {
        let (status, body) = api
            .call(
                Method::POST,
                &format!("/api/v1/channels/{c}/webhooks"),
                Some(json!({"url": receiver.url(), "events": ["message.sent", "message.ack", "campaign.status"]})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    // The first node takes the subscriptions' leases (first come); the second, started after,
    // is the one killed below: killed while holding them, a delivery it POSTed but had not
    // recorded would be POSTed again by the next holder (at-least-once, D-100).
    let pg = sqlx::PgPool::connect(&db.url).await.unwrap();
    eventually(20, "the first node holds both subscriptions", || async {
        let n: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM webhook_subscriptions WHERE lease_session = (SELECT MIN(id) FROM node_sessions)",
        )
        .fetch_one(&pg)
        .await
        .ok()?;
        (n == 2).then_some(())
    })
    .await;
    // A slow receiver: the outbox is still delivering when the campaign completes.
    receiver
        .hold_ms
        .store(20, std::sync::atomic::Ordering::Relaxed);
    b.start().await;
    let api_b = api.on(&b.addr);
    let (status, _) = api_b.call(Method::GET, "/api/v1/channels", None).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the second node serves the same account"
    );
    api.http
        .put(format!("http://{sim_addr}/_sim/faults"))
        .json(&json!({"latency_ms": {"p50": 5, "p99": 15}}))
        .send()
        .await
        .unwrap();
    let (status, body) = api
        .call(Method::POST, &format!("/api/v1/campaigns/{id}/start"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The second node restarted twice mid-run; each time it resumes the running campaign and
    // claims beside the first.
    for (at, kill) in [(N / 4, true), (N / 2, false)] {
        eventually(90, "sends under way", || async {
            (sent_log(sim_addr).await["total"].as_u64()? >= at as u64).then_some(())
        })
        .await;
        if kill {
            b.kill();
        } else {
            b.terminate();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        b.start().await;
    }
    let done = eventually(120, "campaign completed", || async {
        let (_, c) = api
            .call(Method::GET, &format!("/api/v1/campaigns/{id}"), None)
            .await;
        (c["data"]["state"] == "completed").then_some(c["data"].clone())
    })
    .await;
    assert_each_once(&sent_log(sim_addr).await, N);
    assert_eq!(done["stats"]["sent"], N, "{done}");
    // A rolling deploy's step: the first node stops gracefully with deliveries under way and
    // a backlog; its attempts end and are recorded, its leases are released, and the second
    // node delivers the rest.
    let backlog: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'pending'")
            .fetch_one(&pg)
            .await
            .unwrap();
    a.terminate();
    eventually(120, "the outbox delivered by the second node", || async {
        let pending: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'pending'")
                .fetch_one(&pg)
                .await
                .ok()?;
        (pending == 0).then_some(())
    })
    .await;
    // The outbox drained (nothing new for 3 s), then: no delivery twice.
    let mut last = (receiver.events().len(), std::time::Instant::now());
    while last.1.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let n = receiver.events().len();
        if n != last.0 {
            last = (n, std::time::Instant::now());
        }
    }
    let sent_events = receiver
        .events()
        .iter()
        .filter(|e| e.event() == "message.sent")
        .count();
    assert!(
        sent_events >= N * 9 / 10,
        "message.sent delivered: {sent_events}"
    );
    let mut seen: HashMap<i64, usize> = HashMap::new();
    for e in receiver.events() {
        let d = e.json()["delivery_id"].as_i64().expect("delivery_id");
        *seen.entry(d).or_default() += 1;
    }
    let delivered: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'delivered'")
            .fetch_one(&pg)
            .await
            .unwrap();
    assert_eq!(seen.len() as i64, delivered, "every delivery received");
    eprintln!(
        "{} deliveries, {backlog} pending when the first node stopped, {sent_events} message.sent",
        seen.len()
    );
    assert!(backlog > 0, "the first node stopped with work left");
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "{} deliveries received twice (of {}): {:?}",
        twice.len(),
        seen.len(),
        twice.iter().take(5).collect::<Vec<_>>()
    );
    // One completion announced (the two nodes' campaign actors both saw the end).
    let completed = receiver
        .events()
        .iter()
        .filter(|e| e.event() == "campaign.status" && e.json()["data"]["status"] == "completed")
        .count();
    assert_eq!(
        completed, 2,
        "one completion, announced to each number's subscription"
    );
    let (status, c) = api_b
        .call(Method::GET, &format!("/api/v1/campaigns/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(c["data"]["state"], "completed");
    b.kill();
}
