//! 1:1 API sends, closed loop like wrk (issue 25, part 4): `LOAD_SENDS` template sends
//! (default 20,000) to distinct recipients through `POST /api/v1/messages`, statuses on, at
//! each concurrency of `LOAD_CONCURRENCY` (default `1,128`; the concurrency-1 row sends
//! `LOAD_SENDS_SERIAL`, default 2,000). Prints sends/s, p50 and p99 per row; asserts no time.
//! `LOAD_BACKEND=postgres` needs `DISPARO_TEST_POSTGRES_URL`.

mod support;

use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{
    cpu_secs, env_num, histogram_means, load_token, print_phase_means, serve_command,
    wait_until_up, Api, Gateway,
};

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let total = env_num("LOAD_SENDS", 20_000) as usize;
    let serial = env_num("LOAD_SENDS_SERIAL", 2_000) as usize;
    let concurrencies: Vec<usize> = std::env::var("LOAD_CONCURRENCY")
        .unwrap_or_else(|_| "1,128".into())
        .split(',')
        .filter_map(|c| c.trim().parse().ok())
        .collect();
    let backend = std::env::var("LOAD_BACKEND").unwrap_or_else(|_| "sqlite".into());
    // Statuses on: sent at once, delivered and read shortly after, as the provider does.
    let support::Stage {
        dir: _dir,
        addr,
        sim,
        env,
    } = support::stage(
        &backend,
        11,
        Some(provider::sim::StatusDelays {
            sent_ms: 0,
            delivered_ms: 100,
            read_ms: 300,
        }),
    )
    .await;
    let mut env = env;
    // The harness measures the send path, not the per-token request limit.
    env.push(("DISPARO_RATE_LIMIT_PER_MIN", "0".into()));
    let gw = Gateway {
        child: serve_command(&env).spawn().expect("gateway"),
    };
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()
        .unwrap();
    wait_until_up(&http, &addr).await;
    let token = load_token(&env);
    let api = Api {
        http: http.clone(),
        addr: addr.clone(),
        token: token.clone(),
    };
    // One number at the provider's HIGH throughput with no 24 h limit: the provider is not
    // what is measured.
    let num = sim
        .create_number(provider::sim::CreateNumber {
            tier: Some("TIER_UNLIMITED".into()),
            throughput_mps: Some(100_000),
            ..Default::default()
        })
        .unwrap();
    let c = api
        .call(
            reqwest::Method::POST,
            "/channels/official".into(),
            Some(json!({"phone_number_id": num.phone_number_id, "waba_id": num.waba_id, "access_token": num.access_token, "app_secret": num.app_secret})),
        )
        .await;
    let channel = c["data"]["id"].as_i64().unwrap();
    println!(
        "api_load: backend {backend}, channel {channel}, gateway pid {}",
        gw.child.id()
    );
    println!(
        "concurrency | sends | seconds | sends/s | p50 ms | p99 ms | errors | CPU gateway / simulator+harness (cores)"
    );
    let gw_pid = gw.child.id().to_string();
    let mut offset = 0usize;
    for conc in concurrencies {
        let n = if conc == 1 { serial.min(total) } else { total };
        let next = Arc::new(AtomicUsize::new(0));
        let errors = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        let cpu_at_start = (cpu_secs(&gw_pid), cpu_secs("self"));
        let mut workers = Vec::new();
        for _ in 0..conc {
            let (http, addr, token, next, errors) = (
                http.clone(),
                addr.clone(),
                token.clone(),
                next.clone(),
                errors.clone(),
            );
            workers.push(tokio::spawn(async move {
                let mut lat = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let to = format!("5511{:09}", offset + i);
                    let t0 = Instant::now();
                    let r = http
                        .post(format!("http://{addr}/api/v1/messages"))
                        .bearer_auth(&token)
                        .json(&json!({"to": to, "channel_id": channel, "template": {"name": "hello_world", "language": "en_US"}}))
                        .send()
                        .await;
                    let ok = match r {
                        Ok(r) => {
                            let s = r.status();
                            let _ = r.bytes().await;
                            s.is_success()
                        }
                        Err(_) => false,
                    };
                    lat.push(t0.elapsed());
                    if !ok {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                lat
            }));
        }
        let mut all = Vec::with_capacity(n);
        for w in workers {
            all.extend(w.await.unwrap());
        }
        let secs = started.elapsed().as_secs_f64();
        let cpu = match (cpu_at_start, (cpu_secs(&gw_pid), cpu_secs("self"))) {
            ((Some(g0), Some(h0)), (Some(g1), Some(h1))) => {
                format!("{:.2} / {:.2}", (g1 - g0) / secs, (h1 - h0) / secs)
            }
            _ => "?".into(),
        };
        all.sort();
        println!(
            "{conc} | {n} | {secs:.1} | {:.0} | {:.2} | {:.2} | {} | {cpu}",
            n as f64 / secs,
            percentile(&all, 0.5),
            percentile(&all, 0.99),
            errors.load(Ordering::Relaxed)
        );
        offset += n;
    }
    // Where a send's time goes in the gateway: its writers' transactions, the 1:1 commit
    // batches, the time bulk writers waited (mean ms per series; batch sizes ×1,000).
    let metrics = support::metrics_text(&http, &addr).await;
    for family in [
        "disparo_store_batch_seconds",
        "disparo_send_commit_batch",
        "disparo_store_lane_wait_seconds",
        "disparo_store_lane_hold_seconds",
        "disparo_http_request_duration_seconds",
    ] {
        for (labels, count, mean) in histogram_means(&metrics, family) {
            println!("  {family}{labels}: {count:.0}, mean {mean:.2}");
        }
    }
    print_phase_means(
        &metrics,
        "disparo_api_send_phase",
        &[
            "prepare", "mailbox", "pacing", "window", "write", "call", "answer",
        ],
        "1:1 send phase",
    );
    drop(gw);
}
