//! Operations (issue 24): the Grafana dashboard and the Prometheus rules in `ops/`, checked
//! against a real Prometheus (Debian's `prometheus`, installed by `tests/setup.sh`) scraping a
//! gateway that runs a small campaign against the simulator.

mod common;

use common::{eventually, Backend, Receiver, TestApp};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

fn ops_file(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A Prometheus server on loopback scraping the gateway every second with the project's
/// rules, stopped when dropped.
struct Prometheus {
    child: std::process::Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    async fn start(gateway: std::net::SocketAddr) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {rules}\nscrape_configs:\n  - job_name: disparo\n    static_configs:\n      - targets: ['{gateway}']\n",
                rules = ops_file("ops/prometheus/rules.yml").display()
            ),
        )
        .unwrap();
        let port = free_port();
        let child = std::process::Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("prometheus runs (bash tests/setup.sh installs Debian's package)");
        Prometheus {
            child,
            base: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        }
    }

    /// `GET /api/v1/query`: the `data.result` of an instant query; panics when the expression
    /// does not parse.
    async fn query(&self, expr: &str) -> Vec<Value> {
        let r: Value = reqwest::Client::new()
            .get(format!("{}/api/v1/query", self.base))
            .query(&[("query", expr)])
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(r["status"], "success", "{expr}: {r}");
        r["data"]["result"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A panel's expression as Grafana runs it over "All": the variables replaced.
fn as_grafana_runs_it(expr: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("$channel_id", ".*")
        .replace("$campaign_id", ".*")
        .replace("$job", "disparo")
}

/// Every `disparo_…` series name an expression reads (recording-rule names excluded).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let bytes = expr.as_bytes();
    let mut out = BTreeSet::new();
    let mut i = 0;
    while let Some(pos) = expr[i..].find("disparo_") {
        let start = i + pos;
        let preceded =
            start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b':');
        let mut end = start;
        while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
            end += 1;
        }
        if !preceded {
            out.insert(expr[start..end].to_string());
        }
        i = end;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_and_rules_read_real_series_and_red_quality_fires_its_alert() {
    // The files themselves.
    let check = std::process::Command::new("promtool")
        .args(["check", "rules"])
        .arg(ops_file("ops/prometheus/rules.yml"))
        .output()
        .expect("promtool runs (bash tests/setup.sh installs Debian's prometheus)");
    assert!(
        check.status.success(),
        "promtool check rules: {}",
        String::from_utf8_lossy(&check.stdout)
    );
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(ops_file("ops/grafana/disparo.json")).unwrap(),
    )
    .unwrap();
    for field in [
        "title",
        "uid",
        "schemaVersion",
        "panels",
        "templating",
        "time",
    ] {
        assert!(dashboard.get(field).is_some(), "dashboard field {field}");
    }
    let variables: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    for v in ["datasource", "channel_id", "campaign_id"] {
        assert!(variables.contains(&v), "variable {v}: {variables:?}");
    }
    let mut exprs = Vec::new();
    let mut rows = 0;
    for p in dashboard["panels"].as_array().unwrap() {
        if p["type"] == "row" {
            rows += 1;
            continue;
        }
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{}", p["title"]);
        for t in p["targets"].as_array().unwrap() {
            assert_eq!(t["datasource"]["uid"], "${datasource}", "{}", p["title"]);
            exprs.push((
                p["title"].as_str().unwrap().to_string(),
                t["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    assert_eq!(
        rows, 9,
        "numbers, campaigns, provider, webhooks in and out, store, HTTP, process, cluster"
    );

    // A gateway with something to show: a campaign (one throughput refusal, one undeliverable
    // recipient), an outbound webhook, a forged provider webhook, a bad request.
    let app = TestApp::spawn(Backend::Sqlite).await;
    let prometheus = Prometheus::start(app.addr).await;
    let (channel, number) = app.fast_channel().await;
    let receiver = Receiver::start().await;
    app.subscribe(channel, &receiver, &["message.sent"]).await;
    let template = app
        .approved_template(
            json!({"name": "Aviso", "body": "Olá {{1}}.", "var_map": {"1": {"field": "nome"}}}),
            &[channel],
        )
        .await;
    let (status, c) = app
        .post("/api/v1/campaigns", json!({"name": "Ops", "template_id": template, "channels": [{"channel_id": channel, "weight": 1}]}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let id = c["data"]["id"].as_i64().unwrap();
    let rows: Vec<Value> = (0..30)
        .map(|i| json!({"phone": format!("55119400000{i:02}"), "vars": {"nome": "Ana"}}))
        .collect();
    app.post(
        &format!("/api/v1/campaigns/{id}/recipients"),
        json!({"recipients": rows}),
    )
    .await;
    let r = app
        .http
        .put(format!("http://{}/_sim/faults", app.sim_addr))
        .json(&json!({"next_errors": [
            {"phone_number_id": number.phone_number_id, "code": 130429, "count": 1},
            {"phone_number_id": number.phone_number_id, "code": 131026, "count": 1},
        ]}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    app.post(&format!("/api/v1/campaigns/{id}/start"), json!({}))
        .await;
    let forged = json!({"object": "whatsapp_business_account", "entry": []}).to_string();
    assert_eq!(
        app.provider_post(&forged, "sha256=00").await,
        StatusCode::UNAUTHORIZED
    );
    let (status, _) = app.get("/api/v1/campaigns/not-a-number").await;
    assert!(status.is_client_error());

    // Prometheus has scraped it a few times, with the campaign under way.
    eventually(30, "Prometheus scraping the gateway", || async {
        let up = prometheus.query("up{job=\"disparo\"} == 1").await;
        let claimed = prometheus.query("disparo_campaign_claimed_total").await;
        (!up.is_empty() && !claimed.is_empty()).then_some(())
    })
    .await;
    eventually(30, "the campaign done", || async {
        let (_, c) = app.get(&format!("/api/v1/campaigns/{id}")).await;
        (c["data"]["state"] == "completed").then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(6)).await;

    // Every panel's expression parses and returns a series.
    let mut empty = Vec::new();
    for (title, expr) in &exprs {
        if prometheus.query(&as_grafana_runs_it(expr)).await.is_empty() {
            empty.push(format!("{title}: {expr}"));
        }
    }
    assert!(
        empty.is_empty(),
        "panels without a series:\n{}",
        empty.join("\n")
    );

    // Every rule parses; recording rules return a series; the series alerts read exist.
    let rules: Value = reqwest::get(format!("{}/api/v1/rules", prometheus.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let groups = rules["data"]["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2, "{rules}");
    for g in groups {
        for rule in g["rules"].as_array().unwrap() {
            let expr = rule["query"].as_str().unwrap();
            assert_ne!(rule["health"], "err", "{rule}");
            let result = prometheus.query(expr).await;
            if rule["type"] == "recording" {
                assert!(
                    !result.is_empty(),
                    "recording rule without a series: {expr}"
                );
            }
            for name in metric_names(expr) {
                assert!(
                    !prometheus.query(&name).await.is_empty(),
                    "{} reads {name}, which the gateway does not export",
                    rule["name"]
                );
            }
        }
    }

    // A RED quality event makes the RED alert fire for that number.
    let r = app
        .http
        .post(format!(
            "http://{}/_sim/numbers/{}/quality",
            app.sim_addr, number.phone_number_id
        ))
        .json(&json!({"quality": "RED"}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let channel_label = channel.to_string();
    eventually(30, "the RED alert firing", || async {
        let alerts: Value = reqwest::get(format!("{}/api/v1/alerts", prometheus.base))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        alerts["data"]["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| {
                a["labels"]["alertname"] == "DisparoNumeroQualidadeVermelha"
                    && a["labels"]["channel_id"] == channel_label.as_str()
                    && a["state"] == "firing"
            })
            .cloned()
    })
    .await;
}
