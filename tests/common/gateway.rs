//! The gateway as a real child process (the `disparo` binary): started, killed with SIGKILL,
//! stopped with SIGTERM, started again (crash and several-process tests).

use super::eventually;
use reqwest::StatusCode;
use std::process::{Child, Command, Stdio};

/// One `disparo serve` process: its environment and address.
pub struct Gateway {
    pub env: Vec<(&'static str, String)>,
    pub addr: String,
    pub child: Option<Child>,
    /// Where its log (stderr) goes; `DISPARO_TEST_CHILD_LOG` or nowhere when `None`.
    pub log: Option<std::path::PathBuf>,
}

impl Gateway {
    /// A gateway on a free local port with `env` (its `DISPARO_LISTEN` is added).
    pub fn on_free_port(mut env: Vec<(&'static str, String)>) -> Gateway {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        env.push(("DISPARO_LISTEN", addr.clone()));
        Gateway {
            env,
            addr,
            child: None,
            log: None,
        }
    }

    pub fn command(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_disparo"));
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("DISPARO_LOG", "warn")
            .env("PROVIDER_APP_SECRET", "crash-test-app-secret")
            // No metrics token file in the working directory (D-099).
            .env("DISPARO_METRICS_PUBLIC", "true")
            .stdout(Stdio::null())
            .stderr(
                match self
                    .log
                    .clone()
                    .map(Ok)
                    .unwrap_or_else(|| std::env::var("DISPARO_TEST_CHILD_LOG").map(Into::into))
                {
                    Ok(p) => Stdio::from(
                        std::fs::OpenOptions::new()
                            .create(true)
                            .append(true)
                            .open(p)
                            .unwrap(),
                    ),
                    Err(_) => Stdio::null(),
                },
            );
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    pub async fn start(&mut self) {
        self.child = Some(self.command().arg("serve").spawn().expect("gateway starts"));
        let url = format!("http://{}/health", self.addr);
        eventually(30, "gateway up", || async {
            let r = reqwest::get(&url).await.ok()?;
            (r.status() == StatusCode::OK).then_some(())
        })
        .await;
    }

    /// Stops it with SIGTERM (a graceful stop) and waits for it to exit.
    pub fn terminate(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            c.wait().expect("reaped");
        }
    }

    /// Sends `signal` (`STOP`, `CONT`…) to the running process.
    pub fn signal(&self, signal: &str) {
        if let Some(c) = &self.child {
            let ok = Command::new("kill")
                .args([&format!("-{signal}"), &c.id().to_string()])
                .status()
                .expect("kill runs")
                .success();
            assert!(ok, "kill -{signal}");
        }
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().expect("SIGKILL");
            c.wait().expect("reaped");
        }
    }

    pub fn token(&self) -> String {
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

impl Gateway {
    /// A panel Admin of the `acme` account (created with `disparo user create`), logged in
    /// at this gateway: the session token.
    pub async fn panel_admin(&self, email: &str, password: &str) -> String {
        use std::io::Write;
        let mut child = self
            .command()
            .args([
                "user",
                "create",
                "--account",
                "acme",
                "--email",
                email,
                "--name",
                "Operações",
                "--role",
                "Admin",
                "--password-stdin",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("user command runs");
        writeln!(child.stdin.take().unwrap(), "{password}").unwrap();
        assert!(child.wait_with_output().unwrap().status.success());
        let r = reqwest::Client::new()
            .post(format!("http://{}/api/login", self.addr))
            .json(&serde_json::json!({"email": email, "password": password}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
        let body: serde_json::Value = r.json().await.unwrap();
        body["data"]["token"].as_str().unwrap().to_string()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Calls to one gateway's account API with a token.
#[derive(Clone)]
pub struct Api {
    pub http: reqwest::Client,
    pub base: String,
    pub token: String,
}

impl Api {
    pub fn new(addr: &str, token: &str) -> Api {
        Api {
            http: reqwest::Client::new(),
            base: format!("http://{addr}"),
            token: token.to_string(),
        }
    }

    /// The same token on another gateway (another process on the same database).
    pub fn on(&self, addr: &str) -> Api {
        Api {
            base: format!("http://{addr}"),
            ..self.clone()
        }
    }

    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (StatusCode, serde_json::Value) {
        let mut r = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            r = r.json(&b);
        }
        let r = r.send().await.unwrap();
        let status = r.status();
        (
            status,
            r.json::<serde_json::Value>()
                .await
                .unwrap_or(serde_json::Value::Null),
        )
    }
}

/// A simulator posting its webhooks to `webhook_url` that keeps retrying them past a
/// gateway's restart (as the real provider does for days): retries ≤ 5 s apart for ~30 s.
pub fn patient_simulator(webhook_url: String) -> provider::sim::Simulator {
    provider::sim::Simulator::new(provider::sim::SimConfig {
        seed: Some(11),
        webhook_url: Some(webhook_url),
        status_delays: provider::sim::StatusDelays {
            sent_ms: 0,
            delivered_ms: 30,
            read_ms: 60,
        },
        webhook_retry_ms: vec![200, 400, 800, 1600, 3200, 5000, 5000, 5000, 5000, 5000],
        template_review_ms: 50,
        ..provider::sim::SimConfig::default()
    })
}

/// Two numbers of the simulator connected (no daily cap, cadence or warm-up, 1,000 msg/s), a
/// template approved on both and a draft campaign over both with `n` recipients
/// (`5511980000000`…): (campaign id, numbers).
pub async fn campaign_over_two_numbers(
    api: &Api,
    sim: &provider::sim::Simulator,
    n: usize,
) -> (i64, Vec<i64>) {
    campaign_over_numbers(api, sim, n, 2).await
}

/// The same over `numbers` numbers, each in its own business (BM) at the simulator.
pub async fn campaign_over_numbers(
    api: &Api,
    sim: &provider::sim::Simulator,
    n: usize,
    numbers: usize,
) -> (i64, Vec<i64>) {
    use reqwest::Method;
    use serde_json::json;
    let mut channels = Vec::new();
    for _ in 0..numbers {
        let num = sim
            .create_number(provider::sim::CreateNumber {
                tier: Some("TIER_10K".into()),
                throughput_mps: Some(1000),
                ..Default::default()
            })
            .unwrap();
        let (status, c) = api.call(Method::POST, "/api/v1/channels/official", Some(json!({"phone_number_id": num.phone_number_id, "waba_id": num.waba_id, "access_token": num.access_token, "app_secret": num.app_secret}))).await;
        assert_eq!(status, StatusCode::CREATED, "{c}");
        let id = c["data"]["id"].as_i64().unwrap();
        let (status, _) = api
            .call(
                Method::PATCH,
                &format!("/api/v1/channels/{id}/guardrails"),
                Some(json!({"daily_cap": null, "cadence_ms": 0, "warmup": false})),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
        channels.push(id);
    }
    let (status, t) = api.call(Method::POST, "/api/v1/templates", Some(json!({"name": "Oferta", "body": "Olá {{1}}.", "var_map": {"1": {"field": "nome"}}, "submit_channels": channels}))).await;
    assert_eq!(status, StatusCode::CREATED, "{t}");
    let template = t["data"]["id"].as_i64().unwrap();
    eventually(10, "template approved", || async {
        let (_, t) = api.call(Method::GET, "/api/v1/templates", None).await;
        let t = t["data"]
            .as_array()?
            .iter()
            .find(|t| t["id"] == template)?
            .clone();
        (t["channels_by_status"]["approved"] == numbers).then_some(())
    })
    .await;
    let (status, c) = api
        .call(
            Method::POST,
            "/api/v1/campaigns",
            Some(json!({"name": "Queda", "template_id": template, "channels": channels.iter().map(|c| json!({"channel_id": c, "weight": 1})).collect::<Vec<_>>()})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let id = c["data"]["id"].as_i64().unwrap();
    let rows: Vec<serde_json::Value> = (0..n)
        .map(|i| json!({"phone": format!("5511980{i:06}"), "vars": {"nome": format!("P{i}")}}))
        .collect();
    // At most 10,000 recipients per request.
    for part in rows.chunks(5_000) {
        let (status, body) = api
            .call(
                Method::POST,
                &format!("/api/v1/campaigns/{id}/recipients"),
                Some(json!({ "recipients": part })),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    (id, channels)
}

/// The simulator's sent log summary (`total`, `per_recipient`).
pub async fn sent_log(sim_addr: std::net::SocketAddr) -> serde_json::Value {
    reqwest::get(format!("http://{sim_addr}/_sim/sent/summary"))
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap()["data"]
        .clone()
}

/// Asserts every one of the `n` recipients got the campaign's template exactly once.
pub fn assert_each_once(log: &serde_json::Value, n: usize) {
    let per_recipient = log["per_recipient"].as_object().unwrap();
    assert_eq!(per_recipient.len(), n, "none left out");
    let twice: Vec<_> = per_recipient
        .iter()
        .filter(|(_, t)| t["oferta"] != 1)
        .collect();
    assert!(twice.is_empty(), "sent more than once: {twice:?}");
    assert_eq!(log["total"], n);
}

/// A load balancer in front of several gateways, as a provider app's one webhook URL would
/// reach them: each POST goes to the next address in turn; one marked down (its health check
/// failed: [`Balancer::set_down`]) or not answering within 2 s is skipped for the next.
/// Answers the upstream's status and body; 502 when none answers.
pub struct Balancer {
    /// Where it listens.
    pub addr: std::net::SocketAddr,
    down: std::sync::Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
}

impl Balancer {
    /// Marks a gateway down (skipped) or up again, as a health check would.
    pub fn set_down(&self, target: &str, down: bool) {
        let mut set = self.down.lock().unwrap();
        if down {
            set.insert(target.to_string());
        } else {
            set.remove(target);
        }
    }
}

/// Starts a [`Balancer`] over `targets`.
pub async fn round_robin(targets: Vec<String>) -> Balancer {
    use axum::body::Bytes;
    use axum::extract::{OriginalUri, State};
    use axum::http::HeaderMap;
    use axum::response::IntoResponse;
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    type Down = Arc<Mutex<HashSet<String>>>;
    type Shared = Arc<(Vec<String>, AtomicUsize, reqwest::Client, Down)>;
    async fn forward(
        State(s): State<Shared>,
        OriginalUri(uri): OriginalUri,
        headers: HeaderMap,
        body: Bytes,
    ) -> axum::response::Response {
        let (targets, next, http, down) = &*s;
        for _ in 0..targets.len() {
            let target = &targets[next.fetch_add(1, Ordering::Relaxed) % targets.len()];
            if down.lock().unwrap().contains(target) {
                continue;
            }
            let mut req = http
                .post(format!("http://{target}{uri}"))
                .body(body.clone());
            for (k, v) in headers
                .iter()
                .filter(|(k, _)| *k != "host" && *k != "content-length")
            {
                req = req.header(k, v);
            }
            if let Ok(r) = req.send().await {
                let status = r.status().as_u16();
                let body = r.bytes().await.unwrap_or_default();
                return (axum::http::StatusCode::from_u16(status).unwrap(), body).into_response();
            }
        }
        axum::http::StatusCode::BAD_GATEWAY.into_response()
    }
    let down: Down = Arc::default();
    let shared: Shared = Arc::new((
        targets,
        AtomicUsize::new(0),
        // A node that does not answer within 2 s is passed over.
        reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(2))
            .build()
            .unwrap(),
        down.clone(),
    ));
    let app = axum::Router::new()
        .fallback(axum::routing::post(forward))
        .with_state(shared);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });
    Balancer { addr, down }
}
