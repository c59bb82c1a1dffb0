//! A gateway process killed with SIGKILL in the middle of a campaign and started again resumes
//! it: every recipient receives the campaign exactly once, as the simulator's sent log counts
//! (issue 6, D-032). The gateway runs as a real child process (the `disparo` binary), so the
//! kill loses everything in memory: in-flight provider calls, unsent outcomes, the batched
//! writer's queue.

mod common;

use common::{eventually, Backend, TestDb};
use provider::sim::{SimConfig, Simulator, StatusDelays};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

struct Gateway {
    env: Vec<(&'static str, String)>,
    addr: String,
    child: Option<Child>,
}

impl Gateway {
    fn command(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_disparo"));
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("DISPARO_LOG", "warn")
            .env("PROVIDER_APP_SECRET", "crash-test-app-secret")
            // No metrics token file in the working directory (D-099).
            .env("DISPARO_METRICS_PUBLIC", "true")
            .stdout(Stdio::null())
            .stderr(match std::env::var("DISPARO_TEST_CHILD_LOG") {
                Ok(p) => Stdio::from(
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(p)
                        .unwrap(),
                ),
                Err(_) => Stdio::null(),
            });
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    async fn start(&mut self) {
        self.child = Some(self.command().arg("serve").spawn().expect("gateway starts"));
        let url = format!("http://{}/health", self.addr);
        eventually(30, "gateway up", || async {
            let r = reqwest::get(&url).await.ok()?;
            (r.status() == StatusCode::OK).then_some(())
        })
        .await;
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().expect("SIGKILL");
            c.wait().expect("reaped");
        }
    }

    fn token(&self) -> String {
        let out = self
            .command()
            .args([
                "token",
                "create",
                "--account",
                "acme",
                "--name",
                "ci",
                "--level",
                "admin",
            ])
            .stdout(Stdio::piped())
            .output()
            .expect("token command runs");
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn killed_mid_campaign_it_resumes_and_everyone_gets_it_once(backend: Backend) {
    let db = TestDb::create(&backend).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    // The provider keeps retrying webhooks the dead gateway did not take (as the real one does
    // for days); the in-doubt grace (10 s from the restart) is longer than the gap between two
    // retries (≤ 5 s), so every status reaches the restarted gateway within it.
    let sim = Simulator::new(SimConfig {
        seed: Some(11),
        webhook_url: Some(format!("http://{addr}/webhooks/messaging")),
        status_delays: StatusDelays {
            sent_ms: 0,
            delivered_ms: 30,
            read_ms: 60,
        },
        // Retries go on past a slow restart (a loaded CI machine, PostgreSQL): a status dropped
        // before the gateway is back would make its send look unsent after the grace.
        webhook_retry_ms: vec![200, 400, 800, 1600, 3200, 5000, 5000, 5000, 5000, 5000],
        template_review_ms: 50,
        ..SimConfig::default()
    });
    let sim_addr = sim.clone().spawn("127.0.0.1:0").await.unwrap();
    let mut gw = Gateway {
        env: vec![
            ("DATABASE_URL", db.url.clone()),
            ("DISPARO_LISTEN", addr.clone()),
            ("DISPARO_MASTER_KEY", storage::Cipher::generate_key_base64()),
            ("PROVIDER_BASE_URL", format!("http://{sim_addr}")),
            ("DISPARO_IN_DOUBT_GRACE_MS", "10000".into()),
            ("DISPARO_WEBHOOK_RETRY_MS", "100,200".into()),
        ],
        addr: addr.clone(),
        child: None,
    };
    gw.start().await;
    let token = gw.token();
    let http = reqwest::Client::new();
    let call = |method: reqwest::Method, path: &str, body: Option<Value>| {
        let mut r = http
            .request(method, format!("http://{addr}{path}"))
            .bearer_auth(&token);
        if let Some(b) = body {
            r = r.json(&b);
        }
        async move {
            let r = r.send().await.unwrap();
            let status = r.status();
            (status, r.json::<Value>().await.unwrap_or(Value::Null))
        }
    };

    let mut channels = Vec::new();
    for _ in 0..2 {
        let n = sim
            .create_number(provider::sim::CreateNumber {
                tier: Some("TIER_10K".into()),
                throughput_mps: Some(1000),
                ..Default::default()
            })
            .unwrap();
        let (status, c) = call(reqwest::Method::POST, "/api/v1/channels/official", Some(json!({"phone_number_id": n.phone_number_id, "waba_id": n.waba_id, "access_token": n.access_token, "app_secret": n.app_secret}))).await;
        assert_eq!(status, StatusCode::CREATED, "{c}");
        let id = c["data"]["id"].as_i64().unwrap();
        let (status, _) = call(
            reqwest::Method::PATCH,
            &format!("/api/v1/channels/{id}/guardrails"),
            Some(json!({"daily_cap": null, "cadence_ms": 0, "warmup": false})),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        channels.push(id);
    }
    let (status, t) = call(reqwest::Method::POST, "/api/v1/templates", Some(json!({"name": "Oferta", "body": "Olá {{1}}.", "var_map": {"1": {"field": "nome"}}, "submit_channels": channels}))).await;
    assert_eq!(status, StatusCode::CREATED, "{t}");
    let template = t["data"]["id"].as_i64().unwrap();
    eventually(10, "template approved", || async {
        let (_, t) = call(reqwest::Method::GET, "/api/v1/templates", None).await;
        let t = t["data"]
            .as_array()?
            .iter()
            .find(|t| t["id"] == template)?
            .clone();
        (t["channels_by_status"]["approved"] == 2).then_some(())
    })
    .await;
    let (status, c) = call(
        reqwest::Method::POST,
        "/api/v1/campaigns",
        Some(json!({"name": "Queda", "template_id": template, "channels": channels.iter().map(|c| json!({"channel_id": c, "weight": 1})).collect::<Vec<_>>()})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let id = c["data"]["id"].as_i64().unwrap();
    const N: usize = 3000;
    let rows: Vec<Value> = (0..N)
        .map(|i| json!({"phone": format!("5511980{i:06}"), "vars": {"nome": format!("P{i}")}}))
        .collect();
    let (status, _) = call(
        reqwest::Method::POST,
        &format!("/api/v1/campaigns/{id}/recipients"),
        Some(json!({ "recipients": rows })),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    // A little provider latency keeps many sends in flight when the kill comes.
    http.put(format!("http://{sim_addr}/_sim/faults"))
        .json(&json!({"latency_ms": {"p50": 5, "p99": 15}}))
        .send()
        .await
        .unwrap();
    call(
        reqwest::Method::POST,
        &format!("/api/v1/campaigns/{id}/start"),
        None,
    )
    .await;
    let sent_log = || async {
        http.get(format!("http://{sim_addr}/_sim/sent/summary"))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()["data"]
            .clone()
    };
    eventually(60, "a third sent", || async {
        (sent_log().await["total"].as_u64()? >= (N / 3) as u64).then_some(())
    })
    .await;
    gw.kill();
    let at_kill = sent_log().await["total"].as_u64().unwrap();
    assert!(at_kill < N as u64, "killed mid-campaign ({at_kill} of {N})");
    tokio::time::sleep(Duration::from_millis(300)).await;
    gw.start().await;

    let done = eventually(90, "campaign completed after the restart", || async {
        let (_, c) = call(
            reqwest::Method::GET,
            &format!("/api/v1/campaigns/{id}"),
            None,
        )
        .await;
        (c["data"]["state"] == "completed").then_some(c["data"].clone())
    })
    .await;
    let log = sent_log().await;
    let per_recipient = log["per_recipient"].as_object().unwrap();
    assert_eq!(per_recipient.len(), N, "none left out");
    let twice: Vec<_> = per_recipient
        .iter()
        .filter(|(_, t)| t["oferta"] != 1)
        .collect();
    assert!(twice.is_empty(), "sent more than once: {twice:?}");
    assert_eq!(log["total"], N);
    assert_eq!(done["stats"]["sent"], N, "{done}");
    assert_eq!(done["stats"]["failed"], 0);
    gw.kill();
}

on_both_backends! {
    kill_restart => killed_mid_campaign_it_resumes_and_everyone_gets_it_once;
}
