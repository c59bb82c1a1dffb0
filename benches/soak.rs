//! Soak benchmark (issue 53): hours of a gateway's ordinary day, compressed to steady load for
//! `SOAK_MINUTES` (default 5; the issue asks for 30 in a closing note), to show what grows.
//! The gateway runs as its own process (the release `disparo` binary) against the provider
//! simulator in this process, with every status webhook (sent, delivered, read) on:
//! - campaigns back to back over `SOAK_NUMBERS` numbers (default 4), each number paced at
//!   `SOAK_NUMBER_MPS` sends/s by its cadence guardrail (default 50): a new campaign of
//!   `SOAK_CAMPAIGN` recipients (default 3,000) starts when the last one completed;
//! - 1:1 template sends at `SOAK_API_RATE` requests/s (default 20, open loop);
//! - inbound text messages at `SOAK_INBOUND_RATE` per second (default 10) through the
//!   simulator (signed webhooks, as the provider posts them).
//!
//! Every minute it prints the gateway's resident memory (VmRSS), open file descriptors,
//! threads, the database's size (SQLite: the file and its WAL; PostgreSQL:
//! `pg_database_size`), bytes of database per message stored, the messages sent (the
//! simulator's ledger) and the 1:1 refusals; at the end the first and the last minute side by
//! side. Flat RSS, descriptors and threads, and a steady size per message, are the pass.
//!
//! Run: `cargo bench --bench soak` (`SOAK_BACKEND` `sqlite` (default) or `postgres`, which
//! creates a fresh database next to `DISPARO_TEST_POSTGRES_URL`).

mod support;

use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{env_num, load_token, serve_command, wait_until_up, Api, Gateway};

/// One minute's reading.
#[derive(Debug, Clone, Copy)]
struct Reading {
    minute: u64,
    rss_mb: f64,
    fds: usize,
    threads: u64,
    db_mb: f64,
    messages: u64,
    refused: u64,
}

impl Reading {
    fn bytes_per_message(&self) -> f64 {
        self.db_mb * 1024.0 * 1024.0 / (self.messages.max(1) as f64)
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let minutes = env_num("SOAK_MINUTES", 5);
    let numbers = env_num("SOAK_NUMBERS", 4) as usize;
    let backend = std::env::var("SOAK_BACKEND").unwrap_or_else(|_| "sqlite".into());
    let support::Stage {
        dir,
        addr,
        sim,
        env,
    } = support::stage(
        &backend,
        5,
        Some(provider::sim::StatusDelays {
            sent_ms: 0,
            delivered_ms: 200,
            read_ms: 500,
        }),
    )
    .await;
    let sim_url = env
        .iter()
        .find(|(k, _)| *k == "PROVIDER_BASE_URL")
        .map(|(_, v)| v.clone())
        .unwrap();
    let db_url = env
        .iter()
        .find(|(k, _)| *k == "DATABASE_URL")
        .map(|(_, v)| v.clone())
        .unwrap();
    let gw = Gateway {
        child: serve_command(&env).spawn().expect("gateway"),
    };
    let pid = gw.child.id();
    let http = reqwest::Client::new();
    wait_until_up(&http, &addr).await;
    let api = Api {
        http: http.clone(),
        addr: addr.clone(),
        token: load_token(&env),
    };
    let (channels, pnids, template) = numbers_and_template(&api, &sim, numbers).await;
    let stop = Arc::new(AtomicBool::new(false));
    let refused = Arc::new(AtomicU64::new(0));
    let campaigns = tokio::spawn(campaigns_back_to_back(
        api.clone(),
        channels.clone(),
        template,
        stop.clone(),
    ));
    let one_to_one = tokio::spawn(one_to_one(
        api.clone(),
        channels.clone(),
        template,
        stop.clone(),
        refused.clone(),
    ));
    let inbound = tokio::spawn(inbound(http.clone(), sim_url.clone(), pnids, stop.clone()));
    println!("minute | RSS MB | fds | threads | database MB | messages sent | bytes/message | 1:1 refused");
    let mut readings = Vec::new();
    let started = Instant::now();
    for minute in 1..=minutes {
        let at = started + Duration::from_secs(60 * minute);
        tokio::time::sleep_until(at.into()).await;
        let r = Reading {
            minute,
            rss_mb: proc_status(pid, "VmRSS:").unwrap_or(0) as f64 / 1024.0,
            fds: std::fs::read_dir(format!("/proc/{pid}/fd"))
                .map(|d| d.count())
                .unwrap_or(0),
            threads: proc_status(pid, "Threads:").unwrap_or(0),
            db_mb: database_mb(&db_url, dir.path()).await,
            messages: sent_total(&http, &sim_url).await,
            refused: refused.load(Ordering::Relaxed),
        };
        println!(
            "{} | {:.1} | {} | {} | {:.1} | {} | {:.0} | {}",
            r.minute,
            r.rss_mb,
            r.fds,
            r.threads,
            r.db_mb,
            r.messages,
            r.bytes_per_message(),
            r.refused
        );
        readings.push(r);
    }
    stop.store(true, Ordering::Relaxed);
    let _ = tokio::join!(campaigns, one_to_one, inbound);
    if let (Some(first), Some(last)) = (readings.first(), readings.last()) {
        println!(
            "first → last minute: RSS {:.1} → {:.1} MB, fds {} → {}, threads {} → {}, bytes/message {:.0} → {:.0}, {:.0} messages/minute",
            first.rss_mb,
            last.rss_mb,
            first.fds,
            last.fds,
            first.threads,
            last.threads,
            first.bytes_per_message(),
            last.bytes_per_message(),
            last.messages as f64 / last.minute as f64
        );
    }
    drop(gw);
}

/// `n` numbers paced at `SOAK_NUMBER_MPS` and one approved template over them: the channel
/// ids, the phone number ids and the template id.
async fn numbers_and_template(
    api: &Api,
    sim: &provider::sim::Simulator,
    n: usize,
) -> (Vec<i64>, Vec<String>, i64) {
    let mps = env_num("SOAK_NUMBER_MPS", 50).max(1);
    let (mut channels, mut pnids) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let num = sim
            .create_number(provider::sim::CreateNumber {
                tier: Some("TIER_UNLIMITED".into()),
                throughput_mps: Some(1000),
                ..Default::default()
            })
            .unwrap();
        let c = api.call(reqwest::Method::POST, "/channels/official".into(), Some(json!({"phone_number_id": num.phone_number_id, "waba_id": num.waba_id, "access_token": num.access_token, "app_secret": num.app_secret}))).await;
        let id = c["data"]["id"].as_i64().expect("a number");
        api.call(
            reqwest::Method::PATCH,
            format!("/channels/{id}/guardrails"),
            Some(json!({"daily_cap": null, "cadence_ms": 1000 / mps, "warmup": false})),
        )
        .await;
        channels.push(id);
        pnids.push(num.phone_number_id);
    }
    let t = api.call(reqwest::Method::POST, "/templates".into(), Some(json!({"name": "Soak", "body": "Olá {{1}}.", "var_map": {"1": {"field": "nome"}}, "submit_channels": channels}))).await;
    let template = t["data"]["id"].as_i64().expect("a template");
    loop {
        let list = api
            .call(reqwest::Method::GET, "/templates".into(), None)
            .await;
        let approved = list["data"]
            .as_array()
            .and_then(|l| l.iter().find(|t| t["id"] == template))
            .map(|t| t["channels_by_status"]["approved"] == n);
        if approved == Some(true) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (channels, pnids, template)
}

/// Campaigns of `SOAK_CAMPAIGN` recipients over every number, one after the other.
async fn campaigns_back_to_back(
    api: Api,
    channels: Vec<i64>,
    template: i64,
    stop: Arc<AtomicBool>,
) {
    let size = env_num("SOAK_CAMPAIGN", 3_000) as usize;
    let chans: Vec<Value> = channels
        .iter()
        .map(|c| json!({"channel_id": c, "weight": 1}))
        .collect();
    let mut round = 0usize;
    while !stop.load(Ordering::Relaxed) {
        round += 1;
        let c = api
            .call(
                reqwest::Method::POST,
                "/campaigns".into(),
                Some(json!({"name": format!("Soak {round}"), "template_id": template, "channels": chans})),
            )
            .await;
        let id = c["data"]["id"].as_i64().expect("a campaign");
        for start in (0..size).step_by(10_000) {
            let rows: Vec<Value> = (start..(start + 10_000).min(size))
                .map(|i| json!({"phone": format!("5531{round:04}{i:05}"), "vars": {"nome": format!("Cliente {i}")}}))
                .collect();
            api.call(
                reqwest::Method::POST,
                format!("/campaigns/{id}/recipients"),
                Some(json!({ "recipients": rows })),
            )
            .await;
        }
        api.call(
            reqwest::Method::POST,
            format!("/campaigns/{id}/start"),
            None,
        )
        .await;
        while !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let c = api
                .call(reqwest::Method::GET, format!("/campaigns/{id}"), None)
                .await;
            if c["data"]["state"] != "running" {
                break;
            }
        }
    }
}

/// 1:1 template sends at `SOAK_API_RATE` per second (open loop) over the numbers in turn,
/// each to a new recipient; counts the refused ones.
async fn one_to_one(
    api: Api,
    channels: Vec<i64>,
    template: i64,
    stop: Arc<AtomicBool>,
    refused: Arc<AtomicU64>,
) {
    let rate = env_num("SOAK_API_RATE", 20);
    if rate == 0 {
        return;
    }
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        i += 1;
        let req = api
            .http
            .post(format!("http://{}/api/v1/messages", api.addr))
            .bearer_auth(&api.token)
            .json(&json!({"channel_id": channels[i as usize % channels.len()], "to": format!("5532{i:09}"), "template": {"id": template, "vars": {"nome": "Ana"}}}));
        let refused = refused.clone();
        tokio::spawn(async move {
            if !req.send().await.is_ok_and(|r| r.status().is_success()) {
                refused.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
}

/// Inbound text messages at `SOAK_INBOUND_RATE` per second through the simulator.
async fn inbound(
    http: reqwest::Client,
    sim_url: String,
    pnids: Vec<String>,
    stop: Arc<AtomicBool>,
) {
    let rate = env_num("SOAK_INBOUND_RATE", 10);
    if rate == 0 {
        return;
    }
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        i += 1;
        let body = json!({"phone_number_id": pnids[i as usize % pnids.len()], "from": format!("5533{:09}", i % 5_000), "text": format!("mensagem {i}")});
        let req = http.post(format!("{sim_url}/_sim/inbound")).json(&body);
        tokio::spawn(async move {
            let _ = req.send().await;
        });
    }
}

/// A `/proc/<pid>/status` field's number (kB for memory).
fn proc_status(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The database's size, MB.
async fn database_mb(url: &str, dir: &std::path::Path) -> f64 {
    if url.starts_with("postgres") {
        use sqlx::Connection;
        let Ok(mut conn) = sqlx::PgConnection::connect(url).await else {
            return 0.0;
        };
        let size: Result<(i64,), _> = sqlx::query_as("SELECT pg_database_size(current_database())")
            .fetch_one(&mut conn)
            .await;
        size.map_or(0.0, |(b,)| b as f64 / 1024.0 / 1024.0)
    } else {
        ["load.db", "load.db-wal"]
            .iter()
            .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
            .map(|m| m.len() as f64 / 1024.0 / 1024.0)
            .sum()
    }
}

/// The simulator's count of accepted sends.
async fn sent_total(http: &reqwest::Client, sim_url: &str) -> u64 {
    let Ok(r) = http.get(format!("{sim_url}/_sim/stats")).send().await else {
        return 0;
    };
    r.json::<Value>()
        .await
        .ok()
        .and_then(|v| v["data"]["accepted_sends"].as_u64())
        .unwrap_or(0)
}
