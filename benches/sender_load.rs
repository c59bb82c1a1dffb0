//! Load harness of the public sender (issue 22): the gateway runs as its own process (the
//! `disparo` binary, release build) against the provider simulator in this process.
//!
//! 100 sender tokens (`pub_…`) each spend their whole burst (60 requests, D-060) of
//! `POST /api/v1/messages` at once, concurrently, while one more token fires twice its burst.
//! It prints the throughput and p50 / p99 of accepted sends, how many each kind of token had
//! accepted and refused (the over-limit token must be refused past its burst, the others never),
//! and, in process, the limiter's own cost per check (accepted and refused paths).
//!
//! Run: `cargo bench --bench sender_load` (`LOAD_TOKENS`, default 100; `LOAD_BACKEND` `sqlite`
//! (default) or `postgres`, a fresh database next to `DISPARO_TEST_POSTGRES_URL`).

mod support;

use serde_json::json;
use std::time::Instant;
use support::{call, env_num, serve_command, wait_until_up, Gateway};

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// The limiter alone: nanoseconds per check over 101 tokens, on the accepted path (a quota
/// nothing reaches) and on the refused path (a spent quota).
fn limiter_cost() -> (f64, f64) {
    let open = http::limits::TokenRateLimit::sender(u32::MAX).unwrap();
    let n = 1_000_000;
    let started = Instant::now();
    for i in 0..n {
        let _ = open.check(i % 101);
    }
    let accepted = started.elapsed().as_nanos() as f64 / n as f64;
    let spent = http::limits::TokenRateLimit::sender(2).unwrap();
    for k in 0..101 {
        let _ = spent.check(k);
    }
    let n = 200_000;
    let started = Instant::now();
    for i in 0..n {
        let _ = spent.check(i % 101);
    }
    let refused = started.elapsed().as_nanos() as f64 / n as f64;
    (accepted, refused)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let tokens = env_num("LOAD_TOKENS", 100) as usize;
    let backend = std::env::var("LOAD_BACKEND").unwrap_or_else(|_| "sqlite".into());
    let support::Stage {
        dir: _dir,
        addr,
        sim,
        env,
    } = support::stage(
        &backend,
        5,
        Some(provider::sim::StatusDelays {
            sent_ms: 0,
            delivered_ms: 0,
            read_ms: 0,
        }),
    )
    .await;
    // The first Admin, then the gateway.
    support::bootstrap_admin(&env);
    let _gw = Gateway {
        child: serve_command(&env).spawn().expect("gateway"),
    };
    let http = reqwest::Client::new();
    wait_until_up(&http, &addr).await;
    let admin = support::admin_session(&http, &addr).await;
    // One unlimited number at 1,000 msg/s, its BM synced (hello_world approved).
    let n = sim
        .create_number(provider::sim::CreateNumber {
            tier: Some("TIER_UNLIMITED".into()),
            throughput_mps: Some(1000),
            ..Default::default()
        })
        .unwrap();
    let (s, bm) = call(&http, &addr, reqwest::Method::POST, "/api/business-managers", &admin,
        Some(json!({"nome": "BM carga", "cliente": "Carga", "id_provider": n.business_id, "access_token": n.access_token, "app_secret": n.app_secret}))).await;
    assert_eq!(s, 201, "{bm}");
    let bm_id = bm["data"]["id"].as_i64().unwrap();
    let (s, synced) = call(
        &http,
        &addr,
        reqwest::Method::POST,
        &format!("/api/business-managers/{bm_id}/sync"),
        &admin,
        None,
    )
    .await;
    assert_eq!(s, 200, "{synced}");
    // 100 tokens plus the one over its limit.
    let mut sender_tokens = Vec::new();
    for i in 0..=tokens {
        let (s, u) = call(&http, &addr, reqwest::Method::POST, "/api/users", &admin,
            Some(json!({"email": format!("u{i}@load.test"), "name": format!("U{i}"), "role": "Operador", "password": "senha-da-carga-123"}))).await;
        assert_eq!(s, 201, "{u}");
        let id = u["data"]["id"].as_i64().unwrap();
        let (s, t) = call(
            &http,
            &addr,
            reqwest::Method::POST,
            &format!("/api/users/{id}/api-token"),
            &admin,
            None,
        )
        .await;
        assert_eq!(s, 201, "{t}");
        sender_tokens.push(t["data"]["token"].as_str().unwrap().to_string());
    }
    let over = sender_tokens.pop().unwrap();
    let burst = 60usize;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (i, token) in sender_tokens.iter().cloned().enumerate() {
        let (http, addr) = (http.clone(), addr.clone());
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::with_capacity(burst);
            for j in 0..burst {
                let t0 = Instant::now();
                let (s, _) = call(
                    &http,
                    &addr,
                    reqwest::Method::POST,
                    "/api/v1/messages",
                    &token,
                    Some(json!({"to": format!("55119{i:03}{j:05}"), "template": "hello_world"})),
                )
                .await;
                out.push((s, t0.elapsed().as_secs_f64() * 1000.0));
            }
            (false, out)
        }));
    }
    {
        let (http, addr) = (http.clone(), addr.clone());
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::with_capacity(2 * burst);
            for j in 0..2 * burst {
                let t0 = Instant::now();
                let (s, _) = call(
                    &http,
                    &addr,
                    reqwest::Method::POST,
                    "/api/v1/messages",
                    &over,
                    Some(json!({"to": format!("55118{j:07}"), "template": "hello_world"})),
                )
                .await;
                out.push((s, t0.elapsed().as_secs_f64() * 1000.0));
            }
            (true, out)
        }));
    }
    let mut accepted_ms = Vec::new();
    let (mut ok_within, mut refused_within, mut ok_over, mut refused_over, mut refused_ms) =
        (0, 0, 0, 0, Vec::new());
    let mut other = std::collections::BTreeMap::new();
    for t in tasks {
        let (is_over, out) = t.await.unwrap();
        for (s, ms) in out {
            match (is_over, s) {
                (false, 201) => {
                    ok_within += 1;
                    accepted_ms.push(ms);
                }
                (false, 429) => refused_within += 1,
                (true, 201) => {
                    ok_over += 1;
                    accepted_ms.push(ms);
                }
                (true, 429) => {
                    refused_over += 1;
                    refused_ms.push(ms);
                }
                (_, s) => *other.entry(s).or_insert(0) += 1,
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    accepted_ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    refused_ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (lim_ok, lim_refused) = limiter_cost();
    println!(
        "sender_load ({backend}): {tokens} tokens × {burst} sends + 1 token × {} sends",
        2 * burst
    );
    println!(
        "  accepted sends: {} in {elapsed:.2} s = {:.0} sends/s",
        accepted_ms.len(),
        accepted_ms.len() as f64 / elapsed
    );
    println!(
        "  accepted latency: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        percentile(&accepted_ms, 0.5),
        percentile(&accepted_ms, 0.99),
        accepted_ms.last().copied().unwrap_or(f64::NAN)
    );
    println!("  tokens within their limit: {ok_within} accepted, {refused_within} refused");
    println!(
        "  token over its limit: {ok_over} accepted, {refused_over} refused (p50 of a refusal {:.2} ms)",
        percentile(&refused_ms, 0.5)
    );
    if !other.is_empty() {
        println!("  other answers: {other:?}");
    }
    println!("  limiter alone: {lim_ok:.0} ns per accepted check, {lim_refused:.0} ns per refused check (429 built)");
}
