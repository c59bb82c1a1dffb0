//! Load harness of cluster mode (issue 52): one node against three nodes on one PostgreSQL
//! and a `nats-server` of its own, each node a `disparo serve` process (release build) in
//! cluster mode (lease TTL 2 s), the provider simulator in this process (`LOAD_NUMBERS`
//! numbers, each in its own business so each is a cell of its own, 1,000 msg/s each, statuses
//! at once; its webhooks reach the first node, which applies any number's).
//!
//! Per node count it runs a campaign of `LOAD_RECIPIENTS` over every number (started at the
//! first node; each node sends through the numbers it runs) while 1:1 template sends arrive at
//! `LOAD_API_RATE` per second (open loop), spread over the nodes in turn — a send for a number
//! another node runs goes there over NATS. It prints:
//! - dispatch msg/s: from the start to the last `sent` of the campaign;
//! - 1:1 p50 / p99 ms (and how many were refused);
//! - CPU seconds per 1,000 messages (campaign + 1:1) of each node and of PostgreSQL (every
//!   `postgres` process's CPU, read from `/proc`, before and after);
//! - with several nodes, the re-home time: the node running the most numbers is killed
//!   (SIGKILL) after the campaign and the clock runs until the others run every number.
//!
//! Run: `cargo bench --bench nodes_load` (settings: `LOAD_RECIPIENTS`, default 30000;
//! `LOAD_NUMBERS`, default 6; `LOAD_API_RATE`, default 50; `LOAD_NODES`, default `1,3`).
//! Needs `nats-server` on the `PATH` and PostgreSQL at `DISPARO_TEST_POSTGRES_URL`.

mod support;

use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{cpu_secs, env_num, load_token, serve_command, wait_until_up, Api, Gateway};

/// One run's figures (a row of the table).
struct Row {
    nodes: usize,
    dispatch: f64,
    api_p50: f64,
    api_p99: f64,
    api_sends: usize,
    api_refused: usize,
    cpu_per_node: Vec<f64>,
    postgres_cpu: f64,
    rehome_secs: Option<f64>,
}

/// A `nats-server` on a free port, stopped when dropped.
struct Nats {
    child: std::process::Child,
    url: String,
}

impl Nats {
    fn start() -> Nats {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("nats-server")
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server on the PATH");
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Nats {
            child,
            url: format!("nats://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// CPU seconds used so far by every `postgres` process (the server and its backends).
fn postgres_cpu() -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return f64::NAN;
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "postgres")
        })
        .filter_map(|pid| cpu_secs(&pid.to_string()))
        .sum()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let counts: Vec<usize> = std::env::var("LOAD_NODES")
        .unwrap_or_else(|_| "1,3".into())
        .split(',')
        .map(|c| c.trim().parse().expect("LOAD_NODES: node counts, e.g. 1,3"))
        .collect();
    let mut rows = Vec::new();
    for n in counts {
        rows.push(run(n).await);
    }
    println!("nodes | dispatch msg/s | 1:1 p50 ms | 1:1 p99 ms | 1:1 sends (refused) | CPU s per 1,000 msgs per node | PostgreSQL CPU s per 1,000 | re-home s");
    for r in rows {
        let per_node: Vec<String> = r.cpu_per_node.iter().map(|c| format!("{c:.2}")).collect();
        println!(
            "{} | {:.0} | {:.1} | {:.1} | {} ({}) | {} | {:.2} | {}",
            r.nodes,
            r.dispatch,
            r.api_p50,
            r.api_p99,
            r.api_sends,
            r.api_refused,
            per_node.join(" / "),
            r.postgres_cpu,
            r.rehome_secs.map_or("-".into(), |s| format!("{s:.1}")),
        );
    }
}

/// The nodes' environments: the stage's, cluster mode, a name and an address each (the first
/// on the stage's address, where the simulator's webhooks go).
fn node_envs(
    stage_env: &[(&'static str, String)],
    first_addr: &str,
    nats: &str,
    nodes: usize,
) -> Vec<(String, Vec<(&'static str, String)>)> {
    (0..nodes)
        .map(|i| {
            let addr = if i == 0 {
                first_addr.to_string()
            } else {
                let port = std::net::TcpListener::bind("127.0.0.1:0")
                    .unwrap()
                    .local_addr()
                    .unwrap()
                    .port();
                format!("127.0.0.1:{port}")
            };
            let mut env = stage_env.to_vec();
            env.extend([
                ("DISPARO_LISTEN", addr.clone()),
                ("NATS_URL", nats.to_string()),
                ("DISPARO_NODE_ID", format!("node-{i}")),
                ("DISPARO_LEASE_TTL_MS", "2000".to_string()),
                ("DISPARO_NODE_TTL_MS", "3000".to_string()),
            ]);
            (addr, env)
        })
        .collect()
}

/// How many numbers each node runs (`GET /health`'s cluster part; 0 when it does not answer).
async fn channels_per_node(http: &reqwest::Client, addrs: &[String]) -> Vec<u64> {
    let mut out = Vec::new();
    for a in addrs {
        let n = async {
            let r = http.get(format!("http://{a}/health")).send().await.ok()?;
            let v: Value = r.json().await.ok()?;
            v["data"]["cluster"]["channels"].as_u64()
        }
        .await;
        out.push(n.unwrap_or(0));
    }
    out
}

/// Numbers at the simulator, connected through `api`, with no cap, cadence or warm-up; a
/// template approved on all of them. (channels, template id)
async fn numbers_and_template(
    api: &Api,
    sim: &provider::sim::Simulator,
    numbers: usize,
) -> (Vec<i64>, i64) {
    let mut channels = Vec::new();
    for _ in 0..numbers {
        let num = sim
            .create_number(provider::sim::CreateNumber {
                tier: Some("TIER_UNLIMITED".into()),
                throughput_mps: Some(1000),
                ..Default::default()
            })
            .unwrap();
        let c = api.call(reqwest::Method::POST, "/channels/official".into(), Some(json!({"phone_number_id": num.phone_number_id, "waba_id": num.waba_id, "access_token": num.access_token, "app_secret": num.app_secret}))).await;
        let id = c["data"]["id"].as_i64().unwrap();
        api.call(
            reqwest::Method::PATCH,
            format!("/channels/{id}/guardrails"),
            Some(json!({"daily_cap": null, "cadence_ms": 0, "warmup": false})),
        )
        .await;
        channels.push(id);
    }
    let t = api.call(reqwest::Method::POST, "/templates".into(), Some(json!({"name": "Carga", "body": "Olá {{1}}.", "var_map": {"1": {"field": "nome"}}, "submit_channels": channels}))).await;
    let template = t["data"]["id"].as_i64().unwrap();
    loop {
        let list = api
            .call(reqwest::Method::GET, "/templates".into(), None)
            .await;
        let approved = list["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["id"] == template && t["channels_by_status"]["approved"] == numbers);
        if approved {
            return (channels, template);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A draft campaign of `n` recipients over `channels`.
async fn campaign(api: &Api, channels: &[i64], template: i64, n: usize) -> i64 {
    let chans: Vec<Value> = channels
        .iter()
        .map(|c| json!({"channel_id": c, "weight": 1}))
        .collect();
    let c = api
        .call(
            reqwest::Method::POST,
            "/campaigns".into(),
            Some(json!({"name": "Nós", "template_id": template, "channels": chans})),
        )
        .await;
    let id = c["data"]["id"].as_i64().unwrap();
    for from in (0..n).step_by(10_000) {
        let rows: Vec<Value> = (from..(from + 10_000).min(n))
            .map(|i| json!({"phone": format!("55119{i:08}"), "vars": {"nome": format!("Cliente {i}")}}))
            .collect();
        api.call(
            reqwest::Method::POST,
            format!("/campaigns/{id}/recipients"),
            Some(json!({ "recipients": rows })),
        )
        .await;
    }
    id
}

/// The open-loop 1:1 load until `stop`: template sends at `rate` per second, to the nodes and
/// the numbers in turn. (latencies ms, refused)
async fn one_to_one(
    addrs: Vec<String>,
    token: String,
    channels: Vec<i64>,
    template: i64,
    rate: u64,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (Vec<f64>, usize) {
    let http = reqwest::Client::new();
    let mut sends = tokio::task::JoinSet::new();
    if rate > 0 {
        let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
        let mut i = 0usize;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            tick.tick().await;
            i += 1;
            let req = http
                .post(format!("http://{}/api/v1/messages", addrs[i % addrs.len()]))
                .bearer_auth(&token)
                .json(&json!({"channel_id": channels[(i / addrs.len()) % channels.len()], "to": format!("55219{i:08}"), "template": {"id": template, "vars": {"nome": "Sonda"}}}));
            sends.spawn(async move {
                let started = Instant::now();
                match req.send().await {
                    Ok(r) if r.status().is_success() => Ok(started.elapsed().as_secs_f64() * 1e3),
                    Ok(r) => Err(format!(
                        "{} {}",
                        r.status(),
                        r.text().await.unwrap_or_default()
                    )),
                    Err(e) => Err(e.to_string()),
                }
            });
        }
    }
    let (mut latencies, mut refused) = (Vec::new(), Vec::new());
    while let Some(r) = sends.join_next().await {
        match r.expect("a 1:1 send task") {
            Ok(ms) => latencies.push(ms),
            Err(e) => refused.push(e),
        }
    }
    if let Some(first) = refused.first() {
        eprintln!("{} 1:1 sends refused, the first: {first}", refused.len());
    }
    latencies.sort_by(|a, b| a.total_cmp(b));
    (latencies, refused.len())
}

/// Kills the node running the most numbers and answers how long the others took to run
/// every number (s).
async fn rehome(
    http: &reqwest::Client,
    gateways: &mut [Gateway],
    addrs: &[String],
    numbers: u64,
) -> f64 {
    let per = channels_per_node(http, addrs).await;
    let busiest = (0..per.len()).max_by_key(|i| per[*i]).unwrap();
    let killed = Instant::now();
    let _ = gateways[busiest].child.kill();
    let _ = gateways[busiest].child.wait();
    let others: Vec<String> = addrs
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != busiest)
        .map(|(_, a)| a.clone())
        .collect();
    loop {
        if channels_per_node(http, &others).await.iter().sum::<u64>() == numbers {
            return killed.elapsed().as_secs_f64();
        }
        assert!(killed.elapsed() < Duration::from_secs(60), "no re-home");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn run(nodes: usize) -> Row {
    let n = env_num("LOAD_RECIPIENTS", 30_000) as usize;
    let numbers = env_num("LOAD_NUMBERS", 6) as usize;
    let rate = env_num("LOAD_API_RATE", 50);
    let nats = Nats::start();
    let stage = support::stage(
        "postgres",
        5,
        Some(provider::sim::StatusDelays {
            sent_ms: 0,
            delivered_ms: 0,
            read_ms: 0,
        }),
    )
    .await;
    let envs = node_envs(&stage.env, &stage.addr, &nats.url, nodes);
    let addrs: Vec<String> = envs.iter().map(|(a, _)| a.clone()).collect();
    let http = reqwest::Client::new();
    let mut gateways = Vec::new();
    for (addr, env) in &envs {
        gateways.push(Gateway {
            child: serve_command(env).spawn().expect("gateway"),
        });
        wait_until_up(&http, addr).await;
    }
    let token = load_token(&envs[0].1);
    let api = Api {
        http: http.clone(),
        addr: addrs[0].clone(),
        token: token.clone(),
    };
    let (channels, template) = numbers_and_template(&api, &stage.sim, numbers).await;
    let id = campaign(&api, &channels, template, n).await;
    // Every number runs on some node (spread by rendezvous) before the clock starts.
    let t0 = Instant::now();
    while channels_per_node(&http, &addrs).await.iter().sum::<u64>() != numbers as u64 {
        assert!(t0.elapsed() < Duration::from_secs(30), "numbers not placed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "{nodes} node(s): numbers per node {:?}",
        channels_per_node(&http, &addrs).await
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let probe = tokio::spawn(one_to_one(
        addrs.clone(),
        token.clone(),
        channels.clone(),
        template,
        rate,
        stop.clone(),
    ));
    let pids: Vec<String> = gateways.iter().map(|g| g.child.id().to_string()).collect();
    let cpu_before: Vec<f64> = pids.iter().map(|p| cpu_secs(p).unwrap_or(0.0)).collect();
    let pg_before = postgres_cpu();
    let start = Instant::now();
    api.call(
        reqwest::Method::POST,
        format!("/campaigns/{id}/start"),
        None,
    )
    .await;
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let c = api
            .call(reqwest::Method::GET, format!("/campaigns/{id}"), None)
            .await;
        if c["data"]["stats"]["sent"].as_u64() == Some(n as u64) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(1200),
            "campaign did not finish: {c}"
        );
    }
    let dispatch_secs = start.elapsed().as_secs_f64();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (latencies, api_refused) = probe.await.unwrap();
    let messages = (n + latencies.len()) as f64 / 1000.0;
    let cpu_per_node = pids
        .iter()
        .zip(&cpu_before)
        .map(|(p, before)| (cpu_secs(p).unwrap_or(f64::NAN) - before) / messages)
        .collect();
    let postgres_cpu = (postgres_cpu() - pg_before) / messages;
    let rehome_secs = if nodes > 1 {
        Some(rehome(&http, &mut gateways, &addrs, numbers as u64).await)
    } else {
        None
    };
    Row {
        nodes,
        dispatch: n as f64 / dispatch_secs,
        api_p50: percentile(&latencies, 0.5),
        api_p99: percentile(&latencies, 0.99),
        api_sends: latencies.len(),
        api_refused,
        cpu_per_node,
        postgres_cpu,
        rehome_secs,
    }
}
