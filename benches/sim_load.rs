//! Load harness for the provider simulator (issue 3): the simulator runs as its own process
//! (`disparo sim`, release build); this process is the load generator and the webhook sink.
//!
//! It sends template messages over keep-alive connections to the simulator's Graph API, while
//! the simulator emits the sent / delivered / read status webhooks for each, batched, to a sink
//! here that only acknowledges. It prints the accepted send rate, the status events received,
//! the webhook POSTs (and so the batch size), and the simulator's peak RSS.
//!
//! Run: `cargo bench --bench sim_load` (settings: `SIM_LOAD_SENDS`, default 200000;
//! `SIM_LOAD_CONNECTIONS`, default 32; `SIM_LOAD_NUMBERS`, default 10).

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Default)]
struct Sink {
    posts: AtomicU64,
    statuses: AtomicU64,
}

async fn ack(State(s): State<Arc<Sink>>, body: Bytes) -> &'static str {
    s.posts.fetch_add(1, Ordering::Relaxed);
    let needle = b"\"status\":\"";
    let n = body.windows(needle.len()).filter(|w| w == needle).count() as u64;
    s.statuses.fetch_add(n, Ordering::Relaxed);
    "ok"
}

fn peak_rss_mb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// CPU seconds (user + system) of a process, from /proc.
fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

struct Killer(Child);
impl Drop for Killer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run());
}

async fn run() {
    let sends = env_num("SIM_LOAD_SENDS", 200_000);
    let connections = env_num("SIM_LOAD_CONNECTIONS", 32);
    let numbers = env_num("SIM_LOAD_NUMBERS", 10);

    let sink = Arc::new(Sink::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sink_addr = listener.local_addr().unwrap();
    let app = Router::new()
        .route("/hook", post(ack))
        .with_state(sink.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(env!("CARGO_BIN_EXE_disparo"))
        .args([
            "sim",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--webhook-url",
            &format!("http://{sink_addr}/hook"),
        ])
        .args([
            "--seed",
            "1",
            "--status-delays-ms",
            "0,20,40",
            "--throughput-mps",
            "1000000",
        ])
        .env("DISPARO_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("the disparo binary runs");
    let child = Killer(child);
    let pid = child.0.id();
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(connections as usize)
        .tcp_nodelay(true)
        .build()
        .unwrap();
    for _ in 0..200 {
        if http.get(format!("{base}/_sim/stats")).send().await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let mut senders = Vec::new();
    for _ in 0..numbers {
        let r: Value = http
            .post(format!("{base}/_sim/numbers"))
            .json(&json!({"tier": "TIER_UNLIMITED", "throughput_mps": 1_000_000}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let d = &r["data"];
        senders.push((
            d["phone_number_id"].as_str().unwrap().to_string(),
            d["access_token"].as_str().unwrap().to_string(),
        ));
    }
    let senders = Arc::new(senders);

    println!("simulator load: {sends} sends over {connections} keep-alive connections, {numbers} numbers, statuses 0/20/40 ms");
    let next = Arc::new(AtomicU64::new(0));
    let accepted = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let (sim_cpu0, own_cpu0) = (
        cpu_seconds(&pid.to_string()).unwrap_or(0.0),
        cpu_seconds("self").unwrap_or(0.0),
    );
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let (http, base, senders, next, accepted, refused) = (
            http.clone(),
            base.clone(),
            senders.clone(),
            next.clone(),
            accepted.clone(),
            refused.clone(),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= sends {
                    break;
                }
                let (pnid, token) = &senders[(i % senders.len() as u64) as usize];
                let body = format!(
                    r#"{{"messaging_product":"whatsapp","recipient_type":"individual","to":"55{:011}","type":"template","template":{{"name":"hello_world","language":{{"code":"en_US"}}}}}}"#,
                    i
                );
                let r = http
                    .post(format!("{base}/v21.0/{pnid}/messages"))
                    .bearer_auth(token)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await;
                match r {
                    Ok(r) if r.status().is_success() => {
                        let _ = r.bytes().await;
                        accepted.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let send_time = start.elapsed();
    let ok = accepted.load(Ordering::Relaxed);
    let expected = ok * 3;
    let deadline = Instant::now() + Duration::from_secs(60);
    while sink.statuses.load(Ordering::Relaxed) < expected && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let all_time = start.elapsed();
    let statuses = sink.statuses.load(Ordering::Relaxed);
    let posts = sink.posts.load(Ordering::Relaxed);
    println!(
        "accepted sends:        {ok} ({} refused)",
        refused.load(Ordering::Relaxed)
    );
    println!(
        "send rate:             {:.0} sends/s ({:.2} s)",
        ok as f64 / send_time.as_secs_f64(),
        send_time.as_secs_f64()
    );
    println!(
        "status events:         {statuses} of {expected} in {:.2} s ({:.0} events/s)",
        all_time.as_secs_f64(),
        statuses as f64 / all_time.as_secs_f64()
    );
    println!(
        "webhook POSTs:         {posts} ({:.1} statuses per POST)",
        statuses as f64 / posts.max(1) as f64
    );
    let sim_cpu = cpu_seconds(&pid.to_string()).unwrap_or(0.0) - sim_cpu0;
    let own_cpu = cpu_seconds("self").unwrap_or(0.0) - own_cpu0;
    println!(
        "CPU:                   simulator {sim_cpu:.1} s ({:.0} µs per send), load generator + sink {own_cpu:.1} s",
        sim_cpu * 1e6 / ok.max(1) as f64
    );
    if let Some(mb) = peak_rss_mb(pid) {
        println!("simulator peak RSS:    {mb:.0} MB");
    }
    if statuses < expected {
        println!("WARNING: not every status webhook arrived within 60 s");
    }
}
