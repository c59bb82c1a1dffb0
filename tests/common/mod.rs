//! Test harness: the real gateway on 127.0.0.1:0 against the provider simulator, on SQLite
//! (a temporary file) or PostgreSQL (a fresh database per test when
//! `DISPARO_TEST_POSTGRES_URL` is set), and a receiver that captures our outbound webhooks.

#![allow(dead_code)]

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use disparo::{Application, Settings};
use provider::sim::{CreateNumber, CreatedNumber, SimConfig, Simulator, StatusDelays};
use serde_json::{json, Value};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;

pub mod gateway;
pub mod relay;

/// Runs `scenario` on SQLite, then on PostgreSQL when `DISPARO_TEST_POSTGRES_URL` is set.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident => $scenario:ident;)+) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn on_sqlite() {
                    super::$scenario($crate::common::Backend::Sqlite).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn on_postgres() {
                    match $crate::common::Backend::postgres() {
                        Some(b) => super::$scenario(b).await,
                        None => eprintln!("DISPARO_TEST_POSTGRES_URL unset: PostgreSQL run skipped"),
                    }
                }
            }
        )+
    };
}

/// Which database a test runs on.
#[derive(Debug, Clone)]
pub enum Backend {
    Sqlite,
    Postgres(String),
}

impl Backend {
    pub fn postgres() -> Option<Backend> {
        std::env::var("DISPARO_TEST_POSTGRES_URL")
            .ok()
            .filter(|u| !u.is_empty())
            .map(Backend::Postgres)
    }
}

/// A database for one test; the SQLite directory lives as long as this value.
pub struct TestDb {
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    pub async fn create(backend: &Backend) -> TestDb {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("temp dir");
                let url = format!("sqlite://{}/test.db?mode=rwc", dir.path().display());
                TestDb {
                    url,
                    _dir: Some(dir),
                }
            }
            Backend::Postgres(admin) => {
                use sqlx::Connection;
                let name = format!("disparo_test_{}", rand::random::<u64>());
                let mut conn = sqlx::PgConnection::connect(admin)
                    .await
                    .expect("PostgreSQL reachable");
                sqlx::query(&format!("CREATE DATABASE {name}"))
                    .execute(&mut conn)
                    .await
                    .expect("create database");
                conn.close().await.ok();
                let mut url = url::Url::parse(admin).expect("postgres url");
                url.set_path(&format!("/{name}"));
                TestDb {
                    url: url.to_string(),
                    _dir: None,
                }
            }
        }
    }
}

/// One captured outbound webhook.
#[derive(Debug, Clone)]
pub struct Captured {
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Captured {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("webhook body is JSON")
    }
    pub fn event(&self) -> String {
        self.json()["event"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

/// A local webhook receiver: records every POST, and answers 500 to the first `fail_first`
/// and to every body containing `refuse` (when set); holds each answer `hold_ms`; counts the
/// most requests it had open at once (`peak`).
#[derive(Clone)]
pub struct Receiver {
    pub addr: SocketAddr,
    pub captured: Arc<Mutex<Vec<Captured>>>,
    pub fail_first: Arc<AtomicUsize>,
    pub hits: Arc<AtomicUsize>,
    pub refuse: Arc<Mutex<Option<String>>>,
    pub hold_ms: Arc<AtomicUsize>,
    pub open: Arc<AtomicUsize>,
    pub peak: Arc<AtomicUsize>,
}

impl Receiver {
    pub async fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let r = Receiver {
            addr: listener.local_addr().unwrap(),
            captured: Arc::default(),
            fail_first: Arc::default(),
            hits: Arc::default(),
            refuse: Arc::default(),
            hold_ms: Arc::default(),
            open: Arc::default(),
            peak: Arc::default(),
        };
        let app = Router::new()
            .route("/hook", post(receive))
            .with_state(r.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.ok() });
        r
    }

    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    pub fn events(&self) -> Vec<Captured> {
        self.captured.lock().unwrap().clone()
    }
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    r.hits.fetch_add(1, Ordering::SeqCst);
    let open = r.open.fetch_add(1, Ordering::SeqCst) + 1;
    r.peak.fetch_max(open, Ordering::SeqCst);
    let hold = r.hold_ms.load(Ordering::SeqCst);
    if hold > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(hold as u64)).await;
    }
    r.open.fetch_sub(1, Ordering::SeqCst);
    let refused = r
        .refuse
        .lock()
        .unwrap()
        .as_deref()
        .is_some_and(|needle| String::from_utf8_lossy(&body).contains(needle));
    if refused {
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    let failing = r
        .fail_first
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    if failing {
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    r.captured.lock().unwrap().push(Captured { headers, body });
    StatusCode::OK
}

/// The gateway, the simulator and a token, running for one test.
pub struct TestApp {
    pub addr: SocketAddr,
    pub sim: Simulator,
    pub sim_addr: SocketAddr,
    pub token: String,
    pub account_id: i64,
    pub http: reqwest::Client,
    pub app_secret_fallback: String,
    pub db: TestDb,
    pub runtime: services::Services,
    settings: Settings,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

/// The password of the panel users tests create.
pub const PANEL_PASSWORD: &str = "senha-forte-123";

/// Polls `check` every 20 ms until it returns `Some`, for at most `secs` seconds.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl TestApp {
    pub async fn spawn(backend: Backend) -> TestApp {
        Self::spawn_with(backend, |_| {}).await
    }

    pub async fn spawn_with(backend: Backend, tweak: impl FnOnce(&mut Settings)) -> TestApp {
        init_logs();
        let db = TestDb::create(&backend).await;
        let gateway = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = gateway.local_addr().unwrap();
        let sim = Simulator::new(SimConfig {
            seed: Some(7),
            webhook_url: Some(format!("http://{addr}/webhooks/messaging")),
            status_delays: StatusDelays {
                sent_ms: 0,
                delivered_ms: 30,
                read_ms: 60,
            },
            webhook_retry_ms: vec![50, 100, 200],
            template_review_ms: 50,
            ..SimConfig::default()
        });
        let sim_addr = sim.clone().spawn("127.0.0.1:0").await.unwrap();
        let mut settings = Settings::defaults();
        settings.database_url = db.url.clone();
        settings.master_key = Some(engine::Secret::new(storage::Cipher::generate_key_base64()));
        settings.provider_base_url = format!("http://{sim_addr}");
        settings.provider_app_secret = Some(engine::Secret::new("app-level-secret"));
        settings.provider_verify_token = Some("app-verify-token".into());
        settings.webhook_retry_ms = Some(vec![100, 200, 400, 800]);
        settings.webhook_timeout_ms = 2000;
        // The test receivers and file servers listen on 127.0.0.1: the one host the outbound
        // guard lets through (D-042). Tests of the guard clear it.
        settings.allowed_subnets = vec![engine::net::Subnet::parse("127.0.0.1").unwrap()];
        // The simulator stands in for the alternative provider's host.
        settings.alternative_hosts = vec![sim_addr.to_string()];
        // The simulator's contact-hygiene service (panel campaigns, issue 20).
        settings.hygiene_url = Some(format!("http://{sim_addr}/hygiene/v1"));
        settings.hygiene_api_key = Some(engine::Secret::new("hygiene-test-key"));
        tweak(&mut settings);
        let app = Application::build(settings.clone(), Some(gateway))
            .await
            .expect("app builds");
        let runtime = app.services().clone();
        let store = runtime.store().clone();
        let account = store.ensure_account("acme").await.unwrap();
        let token = store
            .create_token(account.id, "ci-token", "admin")
            .await
            .unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(app.run_until(async move {
            let _ = stopped.await;
        }));
        TestApp {
            settings,
            stop: Some(stop),
            server: Some(server),
            addr,
            sim,
            sim_addr,
            token: token.value.expose().to_string(),
            account_id: account.id,
            http: reqwest::Client::new(),
            app_secret_fallback: "app-level-secret".into(),
            db,
            runtime,
        }
    }

    /// Stops the server (gracefully, actors included) and starts a new one on the same
    /// address and database, as after a process restart.
    pub async fn restart(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            server
                .await
                .expect("server task")
                .expect("server stopped cleanly");
        }
        let listener = TcpListener::bind(self.addr).await.expect("same port again");
        let app = Application::build(self.settings.clone(), Some(listener))
            .await
            .expect("app builds again");
        self.runtime = app.services().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        self.stop = Some(stop);
        self.server = Some(tokio::spawn(app.run_until(async move {
            let _ = stopped.await;
        })));
    }

    /// Creates an operator panel user of the test account (password [`PANEL_PASSWORD`]) and
    /// logs it in; returns `(user id, session token)`.
    pub async fn panel_user(
        &self,
        email: &str,
        role: &str,
        client: Option<i64>,
        bms: Vec<i64>,
    ) -> (i64, String) {
        let u = services::panel::create_user(
            self.runtime.store(),
            self.account_id,
            services::panel::UserInput {
                email: email.into(),
                name: format!("Usuário {role}"),
                role: role.into(),
                status: None,
                password: PANEL_PASSWORD.into(),
                client_id: client,
                bm_ids: bms,
            },
        )
        .await
        .expect("panel user created");
        (u.id, self.panel_login(email, PANEL_PASSWORD).await)
    }

    /// Creates a BM through the panel with `body` (the BM fields; the business's id, token, the
    /// simulator's app id and, unless `body` says otherwise, its app secret are added from
    /// `n`) and syncs it; returns the BM's id.
    pub async fn panel_bm(&self, admin: &str, n: &CreatedNumber, mut body: Value) -> i64 {
        let fields = body.as_object_mut().expect("an object");
        fields.insert("id_provider".into(), json!(n.business_id));
        fields.insert("access_token".into(), json!(n.access_token));
        fields.insert("app_id".into(), json!(provider::sim::SIM_APP_ID));
        match fields.get("app_secret") {
            Some(Value::Null) => {
                fields.remove("app_secret");
            }
            Some(_) => {}
            None => {
                fields.insert("app_secret".into(), json!(n.app_secret));
            }
        }
        let (s, b) = self
            .call(
                reqwest::Method::POST,
                Some(admin),
                "/api/business-managers",
                Some(body),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{b}");
        let id = b["data"]["id"].as_i64().unwrap();
        let (s, b) = self
            .call(
                reqwest::Method::POST,
                Some(admin),
                &format!("/api/business-managers/{id}/sync"),
                None,
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{b}");
        id
    }

    /// `POST /api/login`; the session token.
    /// The panel's id of a number (`/api/phone-numbers`) by its provider phone number id.
    pub async fn panel_number_id(&self, admin: &str, phone_number_id: &str) -> i64 {
        let (_, numbers) = self
            .call(
                reqwest::Method::GET,
                Some(admin),
                "/api/phone-numbers",
                None,
            )
            .await;
        numbers["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["phone_number_id"] == phone_number_id)
            .unwrap_or_else(|| panic!("{numbers}"))["id"]
            .as_i64()
            .unwrap()
    }

    /// A panel client whose events go to `webhook_url`: its id and signing secret (shown once).
    pub async fn panel_client(&self, admin: &str, name: &str, webhook_url: &str) -> (i64, String) {
        let (s, b) = self
            .call(
                reqwest::Method::POST,
                Some(admin),
                "/api/clientes",
                Some(json!({"nome": name, "webhook_url": webhook_url})),
            )
            .await;
        assert_eq!(s, 201, "{b}");
        (
            b["data"]["id"].as_i64().unwrap(),
            b["data"]["webhook_secret"]
                .as_str()
                .expect("secret shown once")
                .to_string(),
        )
    }

    pub async fn panel_login(&self, email: &str, password: &str) -> String {
        let (status, body) = self
            .call(
                reqwest::Method::POST,
                None,
                "/api/login",
                Some(json!({"email": email, "password": password})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["data"]["token"].as_str().unwrap().to_string()
    }

    /// The settings the gateway runs with.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Any request with a bearer token (`None`: without), JSON body or none.
    pub async fn call(
        &self,
        method: reqwest::Method,
        token: Option<&str>,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = self.http.request(method, self.url(path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.unwrap();
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// A token of another account.
    pub async fn other_account_token(&self) -> String {
        let store = self.runtime.store();
        let other = store.ensure_account("other").await.unwrap();
        store
            .create_token(other.id, "intruder", "admin")
            .await
            .unwrap()
            .value
            .expose()
            .to_string()
    }

    pub async fn get_as(&self, token: &str, path: &str) -> (StatusCode, Value) {
        let r = self
            .http
            .get(self.url(path))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.get_as(&self.token, path).await
    }

    pub async fn post_as(&self, token: &str, path: &str, body: Value) -> (StatusCode, Value) {
        let r = self
            .http
            .post(self.url(path))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// The Prometheus text of `GET /metrics`.
    pub async fn metrics(&self) -> String {
        self.http
            .get(self.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        let r = self
            .http
            .delete(self.url(path))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn patch(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let r = self
            .http
            .patch(self.url(path))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.post_as(&self.token, path, body).await
    }

    /// Creates a number in the simulator and connects it through the API.
    pub async fn connect_channel(&self) -> (i64, CreatedNumber) {
        let number = self
            .sim
            .create_number(CreateNumber {
                verified_name: Some("Loja Teste".into()),
                ..CreateNumber::default()
            })
            .unwrap();
        let (status, body) = self
            .post(
                "/api/v1/channels/official",
                json!({
                    "name": "Principal",
                    "phone_number_id": number.phone_number_id,
                    "waba_id": number.waba_id,
                    "access_token": number.access_token,
                    "app_secret": number.app_secret,
                }),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        (body["data"]["id"].as_i64().unwrap(), number)
    }

    /// Connects a new simulator number of `tier` (and `throughput_mps`, default the
    /// simulator's) as an official channel.
    pub async fn connect_number(
        &self,
        tier: &str,
        throughput_mps: Option<u32>,
    ) -> (i64, CreatedNumber) {
        let n = self
            .sim
            .create_number(CreateNumber {
                tier: Some(tier.into()),
                throughput_mps,
                ..CreateNumber::default()
            })
            .unwrap();
        let (status, body) = self
            .post("/api/v1/channels/official", json!({"phone_number_id": n.phone_number_id, "waba_id": n.waba_id, "access_token": n.access_token, "app_secret": n.app_secret}))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        (body["data"]["id"].as_i64().unwrap(), n)
    }

    /// A number already warmed up, without a daily cap or cadence (TIER_10K, 1,000 msg/s at
    /// the simulator): only the provider bounds it.
    pub async fn fast_channel(&self) -> (i64, CreatedNumber) {
        let (id, n) = self.connect_number("TIER_10K", Some(1000)).await;
        let (status, g) = self
            .patch(
                &format!("/api/v1/channels/{id}/guardrails"),
                json!({"daily_cap": null, "cadence_ms": 0, "warmup": false}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{g}");
        assert_eq!(g["data"]["today"]["cap"], Value::Null);
        (id, n)
    }

    /// Creates a library template (`template`: the `POST /templates` body without
    /// `submit_channels`), submits it to `channels` and waits until every one approved it.
    pub async fn approved_template(&self, template: Value, channels: &[i64]) -> i64 {
        let mut body = template;
        body["submit_channels"] = json!(channels);
        let (status, t) = self.post("/api/v1/templates", body).await;
        assert_eq!(status, StatusCode::CREATED, "{t}");
        let id = t["data"]["id"].as_i64().unwrap();
        self.wait_approved(id, channels.len()).await;
        id
    }

    /// Waits until `n` numbers approved the library template `id`.
    pub async fn wait_approved(&self, id: i64, n: usize) {
        eventually(10, "template approved", || async {
            let (_, list) = self.get("/api/v1/templates").await;
            let t = list["data"]
                .as_array()?
                .iter()
                .find(|t| t["id"] == id)
                .cloned()?;
            (t["channels_by_status"]["approved"].as_u64() == Some(n as u64)).then_some(())
        })
        .await;
    }

    /// Subscribes a receiver to a channel's events; returns (subscription id, secret).
    pub async fn subscribe(
        &self,
        channel_id: i64,
        receiver: &Receiver,
        events: &[&str],
    ) -> (i64, String) {
        let (status, body) = self
            .post(
                &format!("/api/v1/channels/{channel_id}/webhooks"),
                json!({"url": receiver.url(), "events": events}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        (
            body["data"]["id"].as_i64().unwrap(),
            body["data"]["secret"].as_str().unwrap().to_string(),
        )
    }

    /// Holds every Graph answer of the simulator `ms` after it handled the request (`None`:
    /// answers at once again).
    pub async fn hold_answers(&self, ms: Option<u64>) {
        let r = self
            .http
            .put(format!("http://{}/_sim/faults", self.sim_addr))
            .json(&json!({"answer_delay_ms": ms}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
    }

    /// The simulator's ledger summary (`per_recipient`, `per_number`…): what reached the
    /// provider.
    pub async fn sim_summary(&self) -> Value {
        self.sim_json("/_sim/sent/summary").await
    }

    /// A simulator control route's answer (`GET /_sim/…`): its `data`.
    pub async fn sim_json(&self, path: &str) -> Value {
        self.http
            .get(format!("http://{}{path}", self.sim_addr))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()["data"]
            .clone()
    }

    /// Sets a template's review status at the simulator (`APPROVED`, `PAUSED`, `UNPAUSED`…),
    /// which posts the provider's `message_template_status_update`.
    pub async fn sim_template_status(&self, provider_template_id: &str, status: &str) {
        let r = self
            .http
            .post(format!(
                "http://{}/_sim/templates/{provider_template_id}/status",
                self.sim_addr
            ))
            .json(&json!({"status": status}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
    }

    /// Posts a raw provider webhook body to the app-level receiver with a signature.
    pub async fn provider_post(&self, body: &str, signature: &str) -> StatusCode {
        self.http
            .post(self.url("/webhooks/messaging"))
            .header("content-type", "application/json")
            .header("x-hub-signature-256", signature)
            .body(body.to_string())
            .send()
            .await
            .unwrap()
            .status()
    }

    /// Makes the simulator deliver an inbound message from `from` (opens the 24-hour window).
    pub async fn inbound(&self, phone_number_id: &str, from: &str, text: &str) {
        let r = self
            .http
            .post(format!("http://{}/_sim/inbound", self.sim_addr))
            .json(&json!({"phone_number_id": phone_number_id, "from": from, "text": text, "name": "Ana"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
    }
}

/// Runs `tests/events/validate.py` (the `jsonschema` package) over `deliveries` against the
/// served document `doc`: each delivery's errors, by its webhook's name.
pub async fn schema_errors(
    doc: &Value,
    deliveries: Vec<(String, Value)>,
) -> Vec<(String, Vec<String>)> {
    static RUN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir();
    let doc_file = dir.join(format!("doc-{}-{n}.json", std::process::id()));
    let list_file = dir.join(format!("deliveries-{}-{n}.json", std::process::id()));
    std::fs::write(&doc_file, doc.to_string()).unwrap();
    let list: Vec<Value> = deliveries
        .iter()
        .map(|(w, b)| json!({"webhook": w, "body": b}))
        .collect();
    std::fs::write(&list_file, Value::Array(list).to_string()).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/events/validate.py");
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .arg(script)
            .arg(&doc_file)
            .arg(&list_file)
            .output()
    })
    .await
    .unwrap()
    .expect("python3 runs");
    let verdicts: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the validator printed no JSON ({e}; install tests/requirements.txt):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    verdicts
        .into_iter()
        .map(|v| {
            let errors = v["errors"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e.as_str().unwrap().to_string())
                .collect();
            (v["webhook"].as_str().unwrap().to_string(), errors)
        })
        .collect()
}

/// Sends the server's logs to the test output when `DISPARO_TEST_LOG` is set.
pub fn init_logs() {
    if let Ok(filter) = std::env::var("DISPARO_TEST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    }
}

/// Runs the Python script `tests/<script>` with one argument (installed by `tests/setup.sh`);
/// panics with both outputs unless it succeeds, and returns the JSON line it printed.
pub async fn python_json(script: &str, arg: String) -> Value {
    python_script(&format!("tests/{script}"), vec![arg]).await
}

/// Runs the Python script at `path` (from the repository's root) with `args`; panics with
/// both outputs unless it succeeds, and returns the JSON line it printed.
pub async fn python_script(path: &str, args: Vec<String>) -> Value {
    let script = path.to_string();
    let full = format!("{}/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .arg(full)
            .args(args)
            .output()
    })
    .await
    .unwrap()
    .expect("python3 runs");
    assert!(
        out.status.success(),
        "{script} failed (run tests/setup.sh; browser runs leave a screenshot in their out_dir):\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the script prints one JSON line")
}
