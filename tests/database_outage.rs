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

/// A gateway on a fresh PostgreSQL database reached through a relay, with the patient
/// simulator, and a draft campaign of `n` recipients over two numbers sending 40/s each
/// ([`slow_down`]): what both tests start from. `None` without PostgreSQL.
struct Setup {
    db: TestDb,
    relay: Relay,
    gateway: Gateway,
    sim_addr: std::net::SocketAddr,
    /// The gateway's log (kept after the run: on a failure the test's output names it).
    log: std::path::PathBuf,
    token: String,
    api: Api,
    /// The campaign.
    id: i64,
    /// Its numbers.
    channels: Vec<i64>,
}

async fn setup(n: usize) -> Option<Setup> {
    let Some(backend) = Backend::postgres() else {
        eprintln!("DISPARO_TEST_POSTGRES_URL unset: PostgreSQL run skipped");
        return None;
    };
    let backend = &backend;
    let db = TestDb::create(backend).await;
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
    let (_, log) = tempfile::NamedTempFile::new().unwrap().keep().unwrap();
    eprintln!("gateway log: {}", log.display());
    gateway.log = Some(log.clone());
    gateway.start().await;
    let token = gateway.token();
    let api = Api::new(&gateway.addr, &token);
    let (id, channels) = campaign_over_numbers(&api, &sim, n, 2).await;
    slow_down(&api, &channels).await;
    Some(Setup {
        db,
        relay,
        gateway,
        sim_addr,
        log,
        token,
        api,
        id,
        channels,
    })
}

/// Sets every number of the campaign to one send per 25 ms (40/s): the campaign lasts long
/// enough to span what the test does to its database.
async fn slow_down(api: &Api, channels: &[i64]) {
    for c in channels {
        let (status, g) = api
            .call(
                Method::PATCH,
                &format!("/api/v1/channels/{c}/guardrails"),
                Some(json!({"cadence_ms": 25})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{g}");
    }
}

/// Waits (at most 90 s, far less than the in-doubt grace of 120 s, D-032) for the campaign to
/// complete; on a timeout the panic shows its stats and the gateway's last warnings.
async fn wait_completed(api: &Api, id: i64, log: &std::path::Path) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let (_, c) = api
            .call(Method::GET, &format!("/api/v1/campaigns/{id}"), None)
            .await;
        if c["data"]["state"] == "completed" {
            return;
        }
        if Instant::now() > deadline {
            let lines = std::fs::read_to_string(log).unwrap();
            let worth: Vec<&str> = lines
                .lines()
                .filter(|l| l.contains("WARN") || l.contains("ERROR"))
                .collect();
            panic!(
                "campaign not completed within 90 s: {}\n{}",
                c["data"],
                worth[worth.len().saturating_sub(60)..].join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_away_answers_503_at_once_and_loses_nothing() {
    const N: usize = 1_500;
    // 40 sends/s per number: the campaign spans the outage.
    let Some(Setup {
        db: _db,
        relay,
        mut gateway,
        sim_addr,
        log,
        token,
        api,
        id,
        channels,
    }) = setup(N).await
    else {
        return;
    };
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
    wait_completed(&api, id, &log).await;
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

/// How many sessions of database `name` sleep in the test trigger (a commit held open).
async fn held_commits(pg: &sqlx::PgPool, name: &str) -> Option<i64> {
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = $1 AND wait_event = 'PgSleep'",
    )
    .bind(name)
    .fetch_one(pg)
    .await
    .ok()
}

/// Arms the slow commit, cuts the relay while a claim's commit is held open and waits for it
/// to go through; returns how many of the recipients then stored `claimed` never reached the
/// provider (the held claim's, when the cut landed inside it).
async fn cut_inside_a_held_claim(
    pg: &sqlx::PgPool,
    name: &str,
    relay: &Relay,
    sim_addr: std::net::SocketAddr,
    id: i64,
) -> usize {
    sqlx::query("INSERT INTO test_slow_commit VALUES (1)")
        .execute(pg)
        .await
        .unwrap();
    eventually(20, "a claim's commit held open", || async move {
        (held_commits(pg, name).await? > 0).then_some(())
    })
    .await;
    relay.cut();
    // The held commit goes through after its sleep: its recipients are stored `claimed`, and
    // none of them reached the provider.
    let stranded: Vec<String> = eventually(20, "the held claim committed", || async move {
        if held_commits(pg, name).await? > 0 {
            return None;
        }
        sqlx::query_scalar(
            "SELECT phone FROM campaign_recipients WHERE campaign_id = $1 AND state = 'claimed'",
        )
        .bind(id)
        .fetch_all(pg)
        .await
        .ok()
    })
    .await;
    let sent = sent_log(sim_addr).await;
    stranded
        .iter()
        .filter(|p| sent["per_recipient"].get(p.as_str()).is_none())
        .count()
}

/// The database goes away while a claim commits (D-136): PostgreSQL stores the claim, its
/// answer is lost with the connection, and the gateway cannot know it was stored — nor did
/// it hand those recipients to a number. Once the database is back they are given back and
/// sent once, without waiting for the in-doubt grace twice (120 s + 120 s, D-032). The claim's
/// commit is held open by a test trigger (a deferred `pg_sleep`, armed once) so the cut lands
/// inside it every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_commit_answer_is_lost_is_given_back() {
    const N: usize = 600;
    let Some(Setup {
        db,
        relay,
        mut gateway,
        sim_addr,
        log,
        token: _,
        api,
        id,
        channels: _,
    }) = setup(N).await
    else {
        return;
    };
    // Straight to the database, not through the relay.
    let pg = sqlx::PgPool::connect(&db.url).await.unwrap();
    for sql in [
        "CREATE TABLE test_slow_commit (armed INT)",
        "CREATE FUNCTION test_slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
           DELETE FROM test_slow_commit; IF FOUND THEN PERFORM pg_sleep(4); END IF; RETURN NULL; END $$",
        "CREATE CONSTRAINT TRIGGER test_slow_claim AFTER UPDATE ON campaign_recipients \
           DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.state = 'claimed') \
           EXECUTE FUNCTION test_slow_commit()",
    ] {
        sqlx::query(sql).execute(&pg).await.unwrap();
    }
    let (status, body) = api
        .call(Method::POST, &format!("/api/v1/campaigns/{id}/start"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    eventually(20, "the campaign under way", || async {
        (sent_log(sim_addr).await["total"].as_u64()? >= 100).then_some(())
    })
    .await;
    let name = db.url.rsplit('/').next().unwrap().to_string();
    // On a slow machine the cut sometimes misses the held claim (its rows are found sent, the
    // recovery below passes all the same): the scenario is armed again, up to three times.
    for attempt in 1..=3 {
        let never_sent = cut_inside_a_held_claim(&pg, &name, &relay, sim_addr, id).await;
        if never_sent > 0 {
            break;
        }
        assert!(
            attempt < 3,
            "the cut claim was stored and not sent: three cuts, none inside a held claim"
        );
        relay.restore().await;
        let before = sent_log(sim_addr).await["total"].as_u64().unwrap_or(0);
        eventually(20, "the campaign under way again", || async {
            (sent_log(sim_addr).await["total"].as_u64()? > before).then_some(())
        })
        .await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    relay.restore().await;
    wait_completed(&api, id, &log).await;
    assert_each_once(&sent_log(sim_addr).await, N);
    let lines = std::fs::read_to_string(&log).unwrap();
    assert!(
        lines.contains("claim not confirmed"),
        "the cut claim was not reported:\n{lines}"
    );
    gateway.kill();
}
