//! Load harness of the panel's provider receiver (issue 21): the gateway runs as its own
//! process (release build) against the simulator in this process.
//!
//! A number's messages are sent first (`LOAD_MESSAGES`, default 3,000, through the account
//! API with the simulator's status webhooks off); then their statuses (sent, delivered, read:
//! 3 per message) are posted to `POST /api/webhooks/provider` signed with the BM's app secret,
//! 20 per call, paced at `LOAD_EVENTS_PER_S` (default 3,000 events/s = 150 calls/s, a
//! 1,000 msg/s number's output), while a client's receiver on loopback takes the forwards.
//! It prints the provider-facing latency (p50, p99, share above 1 s), the calls refused, and
//! whether every status was forwarded exactly once and applied (messages `read`).
//!
//! Run: `cargo bench --bench forward_load` (`LOAD_BACKEND=postgres` for PostgreSQL).

mod support;

use axum::extract::State;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{call, env_num, serve_command, wait_until_up, Gateway};

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// The client's receiver: counts the statuses in the forwards (and each wamid/status pair).
#[derive(Clone, Default)]
struct Sink {
    statuses: Arc<AtomicUsize>,
    seen: Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>,
}

async fn sink(State(s): State<Sink>, body: axum::body::Bytes) -> axum::http::StatusCode {
    let v: Value = serde_json::from_slice(&body).unwrap_or_default();
    let mut seen = s.seen.lock().unwrap();
    for change in v["payload"]["entry"][0]["changes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        for st in change["value"]["statuses"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            s.statuses.fetch_add(1, Ordering::Relaxed);
            *seen
                .entry(format!(
                    "{}:{}",
                    st["id"].as_str().unwrap_or_default(),
                    st["status"].as_str().unwrap_or_default()
                ))
                .or_default() += 1;
        }
    }
    axum::http::StatusCode::OK
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let messages = env_num("LOAD_MESSAGES", 3_000) as usize;
    let rate = env_num("LOAD_EVENTS_PER_S", 3_000) as f64;
    let backend = std::env::var("LOAD_BACKEND").unwrap_or_else(|_| "sqlite".into());
    let support::Stage {
        dir: _dir,
        addr,
        sim,
        mut env,
    } = support::stage(&backend, 9, None).await;
    env.push(("DISPARO_ALLOWED_SUBNETS", "127.0.0.1/32".into()));
    support::bootstrap_admin(&env);
    let _gw = Gateway {
        child: serve_command(&env).spawn().expect("gateway"),
    };
    let http = reqwest::Client::new();
    wait_until_up(&http, &addr).await;
    let token = support::load_token(&env);
    let admin = support::admin_session(&http, &addr).await;
    // The client's receiver.
    let received = Sink::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sink_addr = listener.local_addr().unwrap();
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(sink))
        .with_state(received.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });
    let (s, client) = call(
        &http,
        &addr,
        reqwest::Method::POST,
        "/api/clientes",
        &admin,
        Some(json!({"nome": "Carga", "webhook_url": format!("http://{sink_addr}/hook")})),
    )
    .await;
    assert_eq!(s, 201, "{client}");
    let client_id = client["data"]["id"].as_i64().unwrap();
    let n = sim
        .create_number(provider::sim::CreateNumber {
            tier: Some("TIER_UNLIMITED".into()),
            throughput_mps: Some(1000),
            ..Default::default()
        })
        .unwrap();
    let (s, bm) = call(&http, &addr, reqwest::Method::POST, "/api/business-managers", &admin,
        Some(json!({"nome": "BM", "cliente_id": client_id, "id_provider": n.business_id, "access_token": n.access_token, "app_secret": n.app_secret}))).await;
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
    let channel = synced["data"]["bm"]["wabas"][0]["numeros"][0]["id"]
        .as_i64()
        .unwrap();
    let (s, g) = call(
        &http,
        &addr,
        reqwest::Method::PATCH,
        &format!("/api/v1/channels/{channel}/guardrails"),
        &token,
        Some(json!({"daily_cap": null, "cadence_ms": 0, "warmup": false})),
    )
    .await;
    assert_eq!(s, 200, "{g}");
    // The messages whose statuses will come back, without the simulator's own status webhooks.
    sim.set_webhook_url(None).await;
    let mut wamids = Vec::with_capacity(messages);
    let mut ids = Vec::with_capacity(messages);
    for chunk in (0..messages).collect::<Vec<_>>().chunks(16) {
        let mut tasks = Vec::new();
        for i in chunk {
            let (http, addr, token) = (http.clone(), addr.clone(), token.clone());
            let to = format!("5511{:09}", 900_000_000 + i);
            tasks.push(tokio::spawn(async move {
                let (s, m) = call(&http, &addr, reqwest::Method::POST, "/api/v1/messages", &token,
                    Some(json!({"to": to, "channel_id": channel, "template": {"name": "hello_world", "language": "en_US"}}))).await;
                assert_eq!(s, 201, "{m}");
                (m["data"]["provider_message_id"].as_str().unwrap().to_string(), m["data"]["id"].as_i64().unwrap(), to)
            }));
        }
        for t in tasks {
            let (w, id, to) = t.await.unwrap();
            wamids.push((w, to));
            ids.push(id);
        }
        // At most 16 every 25 ms (640/s): under the number's 1,000 msg/s, which the simulator
        // enforces (130429 past it; 1:1 sends are not paced by the gateway yet).
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    // 3 statuses per message, 20 per call, signed with the BM's app secret.
    let mut events = Vec::new();
    for status in ["sent", "delivered", "read"] {
        for (w, to) in &wamids {
            events.push(
                json!({"id": w, "status": status, "timestamp": "1795520000", "recipient_id": to}),
            );
        }
    }
    let bodies: Vec<Vec<u8>> = events
        .chunks(20)
        .map(|c| {
            serde_json::to_vec(&json!({"object": "whatsapp_business_account", "entry": [{"id": n.waba_id, "changes": [{"field": "messages",
                "value": {"messaging_product": "whatsapp", "metadata": {"display_phone_number": "5511", "phone_number_id": n.phone_number_id}, "statuses": c}}]}]}))
            .unwrap()
        })
        .collect();
    let interval = Duration::from_secs_f64(20.0 / rate);
    let started = Instant::now();
    let mut tasks = Vec::new();
    let mut tick = tokio::time::interval(interval);
    for body in bodies {
        tick.tick().await;
        let (http, addr, secret) = (http.clone(), addr.clone(), n.app_secret.clone());
        tasks.push(tokio::spawn(async move {
            let sig = engine::webhook::signature_header(&secret, &body);
            let t0 = Instant::now();
            let r = http
                .post(format!("http://{addr}/api/webhooks/provider"))
                .header("x-hub-signature-256", sig)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await;
            (
                r.map(|r| r.status().as_u16()).unwrap_or(0),
                t0.elapsed().as_secs_f64() * 1000.0,
            )
        }));
    }
    let mut lat = Vec::new();
    let mut refused = 0;
    for t in tasks {
        let (s, ms) = t.await.unwrap();
        if s != 200 {
            refused += 1;
        }
        lat.push(ms);
    }
    let posting = started.elapsed().as_secs_f64();
    let total = events.len();
    let deadline = Instant::now() + Duration::from_secs(120);
    while received.statuses.load(Ordering::Relaxed) < total && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let forwarded_in = started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(500)).await;
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let over_1s = lat.iter().filter(|l| **l > 1000.0).count() as f64 / lat.len() as f64 * 100.0;
    let seen = received.seen.lock().unwrap().clone();
    let once = seen.len() == total && seen.values().all(|c| *c == 1);
    let mut read = 0;
    for id in ids.iter().step_by((ids.len() / 50).max(1)) {
        let (_, m) = call(
            &http,
            &addr,
            reqwest::Method::GET,
            &format!("/api/v1/messages/{id}"),
            &token,
            None,
        )
        .await;
        read += usize::from(m["data"]["status"] == "read");
    }
    println!("forward_load ({backend}): {total} statuses of {messages} messages, 20 per call at {rate:.0} events/s");
    println!(
        "  posted {} calls in {posting:.1} s; refused: {refused}",
        lat.len()
    );
    println!("  provider-facing latency: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms, above 1 s {over_1s:.2} %", percentile(&lat, 0.5), percentile(&lat, 0.99), lat.last().copied().unwrap_or(f64::NAN));
    println!(
        "  forwarded: {} statuses by {forwarded_in:.1} s; every one exactly once: {once}",
        received.statuses.load(Ordering::Relaxed)
    );
    println!(
        "  applied: {read} of {} sampled messages read",
        ids.iter().step_by((ids.len() / 50).max(1)).count()
    );
}
