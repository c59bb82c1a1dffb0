//! The database away (issue 53): a gateway on PostgreSQL reached through a relay the test cuts
//! mid-campaign (the network failing; the machine's PostgreSQL, shared with other tests, keeps
//! running). While cut: an API write answers 503 `database_unavailable` with `Retry-After`
//! at once, not after the pool's wait; `GET /health` says `degraded`; the provider's webhook
//! answers 503 (it retries); nothing panics. Restored: the campaign goes on by itself and
//! completes with every recipient once, the refused send made again with its idempotency key
//! goes out once, and `/metrics` counted the outage.

mod common;

use common::gateway::{assert_each_once, campaign_over_numbers, sent_log, Api, Gateway};
use common::relay::Relay;
use common::{eventually, Backend, TestDb};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_away_answers_503_at_once_and_loses_nothing() {
    let Some(backend) = Backend::postgres() else {
        eprintln!("DISPARO_TEST_POSTGRES_URL unset: PostgreSQL run skipped");
        return;
    };
    let db = TestDb::create(&backend).await;
    let mut url = reqwest::Url::parse(&db.url).unwrap();
    let target = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap_or(5432));
    let relay = Relay::start(target.parse().unwrap()).await;
    url.set_port(Some(relay.addr.port())).unwrap();
    let mut gateway = Gateway::on_free_port(vec![
        ("DATABASE_URL", url.to_string()),
        ("DISPARO_MASTER_KEY", storage::Cipher::generate_key_base64()),
    ]);
    let sim =
        common::gateway::patient_simulator(format!("http://{}/webhooks/messaging", gateway.addr));
    let sim_addr = sim.clone().spawn("127.0.0.1:0").await.unwrap();
    gateway
        .env
        .push(("PROVIDER_BASE_URL", format!("http://{sim_addr}")));
    // Kept after the run: on a failure the test's output names it.
    let (_, log) = tempfile::NamedTempFile::new().unwrap().keep().unwrap();
    eprintln!("gateway log: {}", log.display());
    gateway.log = Some(log.clone());
    gateway.start().await;
    let token = gateway.token();
    let api = Api::new(&gateway.addr, &token);
    const N: usize = 1_500;
    let (id, channels) = campaign_over_numbers(&api, &sim, N, 2).await;
    // 40 sends/s per number: the campaign spans the outage.
    for c in &channels {
        let (status, g) = api
            .call(
                Method::PATCH,
                &format!("/api/v1/channels/{c}/guardrails"),
                Some(json!({"cadence_ms": 25})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{g}");
    }
    let (status, body) = api
        .call(Method::POST, &format!("/api/v1/campaigns/{id}/start"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, c) = api
        .call(Method::GET, &format!("/api/v1/campaigns/{id}"), None)
        .await;
    let template = c["data"]["template_id"].clone();
    eventually(20, "the campaign under way", || async {
        (sent_log(sim_addr).await["total"].as_u64()? >= 150).then_some(())
    })
    .await;

    relay.cut();
    let health = format!("http://{}/health", gateway.addr);
    let degraded = eventually(10, "health degraded", || async {
        let r = reqwest::get(&health).await.ok()?;
        (r.status() == StatusCode::SERVICE_UNAVAILABLE).then_some(())?;
        r.json::<Value>().await.ok()
    })
    .await;
    assert_eq!(degraded["data"]["status"], "degraded", "{degraded}");
    assert_eq!(degraded["data"]["database"]["ok"], false, "{degraded}");
    // A monitor polling `/health` through the outage adds no log line per call: the probe
    // logged the outage once.
    let health_lines = || {
        std::fs::read_to_string(&log)
            .unwrap()
            .matches("health: database unreachable")
            .count()
    };
    let before = health_lines();
    for _ in 0..10 {
        let r = reqwest::get(&health).await.unwrap();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
    assert_eq!(health_lines(), before, "a log line per /health call");
    let lines = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        lines
            .matches("database unavailable: API answers 503")
            .count(),
        1,
        "the probe logs the outage once:\n{lines}"
    );
    let send = json!({
        "channel_id": channels[0],
        "to": "5511977000001",
        "template": {"id": template, "vars": {"nome": "Ana"}},
    });
    let post = || {
        api.http
            .post(format!("http://{}/api/v1/messages", gateway.addr))
            .bearer_auth(&token)
            .header("Idempotency-Key", "queda-do-banco-1")
            .json(&send)
            .send()
    };
    let asked = Instant::now();
    let r = post().await.unwrap();
    let took = asked.elapsed();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let retry_after: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=10).contains(&retry_after), "Retry-After {retry_after}");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], "database_unavailable", "{body}");
    assert_eq!(body["retryable"], true, "{body}");
    // Answered from the outage's state, not after the pool's 10 s wait for a connection.
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
    // A provider webhook is refused with 503: the provider keeps it and retries.
    let hook = api
        .http
        .post(format!("http://{}/webhooks/messaging", gateway.addr))
        .json(&json!({"object": "whatsapp_business_account", "entry": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(hook.status(), StatusCode::SERVICE_UNAVAILABLE);
    let during = sent_log(sim_addr).await["total"].as_u64().unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    // Nothing is claimed while the database is away; sends already handed to a number may
    // finish, no more.
    let still = sent_log(sim_addr).await["total"].as_u64().unwrap();
    assert!(
        still - during <= 100,
        "{during} → {still} sends while the database was away"
    );

    relay.restore().await;
    eventually(20, "health ok again", || async {
        let r = reqwest::get(&health).await.ok()?;
        (r.status() == StatusCode::OK).then_some(())
    })
    .await;
    let r = post().await.unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    eventually(90, "campaign completed", || async {
        let (_, c) = api
            .call(Method::GET, &format!("/api/v1/campaigns/{id}"), None)
            .await;
        (c["data"]["state"] == "completed").then_some(())
    })
    .await;
    let log = sent_log(sim_addr).await;
    assert_eq!(log["per_recipient"]["5511977000001"]["oferta"], 1, "{log}");
    let mut campaign_only = log.clone();
    campaign_only["per_recipient"]
        .as_object_mut()
        .unwrap()
        .remove("5511977000001");
    campaign_only["total"] = json!(log["total"].as_u64().unwrap() - 1);
    assert_each_once(&campaign_only, N);
    let metrics = reqwest::get(format!("http://{}/metrics", gateway.addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let outages = metrics
        .lines()
        .find(|l| l.starts_with("disparo_database_outages_total"))
        .unwrap_or_else(|| panic!("no outage counter in {metrics}"));
    assert!(outages.ends_with(" 1"), "{outages}");
    gateway.kill();
}
