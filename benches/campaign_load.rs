//! Load harness for the dispatch engine (issue 6): the gateway runs as its own process (the
//! `disparo` binary, release build) against the provider simulator, which runs in this process
//! on loopback with 10 numbers at 1,000 messages/s each, zero latency and every status webhook
//! (sent, delivered, read) on.
//!
//! It adds the audience through the API in batches of 10,000 (timed), starts the campaign and
//! polls `GET /campaigns/{id}` (every 500 ms, every 50 ms over the last 5 % of each count) to print:
//! - the dispatch rate: messages/s from the start to the last `sent` in the campaign's stats;
//! - the end-to-end rate: messages/s from the start to the last `read` counted;
//! - the gateway's peak RSS (VmHWM);
//! - p50 / p99 of those polls' latency (the campaign's counters read while it runs; D-091);
//! - p50 / p99 of `POST /messages` latency under a concurrent 1:1 load: template sends to
//!   distinct recipients at `LOAD_API_RATE` requests/s (default 100, open loop: one starts
//!   every 10 ms whether or not the earlier ones answered; over the numbers in turn) for the
//!   whole run (issue 25 part 2);
//! - the throughput (130429) and pair-rate (131056) refusals the gateway saw (its metrics);
//! - on PostgreSQL, the database's own cost per 1,000 messages: its statement time
//!   (`pg_stat_database.active_time`) and its backends' CPU seconds (issue 54); its row
//!   writes per message by table; and, when the server preloads `pg_stat_statements`, the ten
//!   costliest statements per 1,000 messages (D-129); its write-ahead log per 1,000 messages
//!   (by record kind where `pg_walinspect` reads it) and what its active sessions were doing,
//!   sampled every 50 ms (waiting on the log's flush, running…; D-135);
//! - one webhook subscription's delivery rate: the first number's `message.sent` and
//!   `message.ack` events, received by a local endpoint (deliveries/s from the first to the
//!   last received, how long after the last read it caught up, and whether every contact's
//!   events arrived in order; issue 17, D-065); `LOAD_WEBHOOK_LATENCY_MS` (default 0) makes
//!   the endpoint answer that much later, as a real integrator's would.
//!
//! Run: `cargo bench --bench campaign_load` (settings: `LOAD_RECIPIENTS`, default 100000;
//! `LOAD_NUMBERS`, default 10; `LOAD_THROUGHPUT_MPS`, each number's provider throughput,
//! default 1000; `LOAD_BACKEND` `sqlite` (default) or `postgres`, which
//! creates a fresh database next to `DISPARO_TEST_POSTGRES_URL`; `LOAD_METRICS_OUT=<file>` keeps
//! the gateway's `/metrics` text at the end; `LOAD_API_RATE`, 0 for no 1:1 load;
//! `LOAD_COMPARE=<path to another build's disparo>` runs that build and this checkout's in
//! turn, `LOAD_REPEAT` times each (default 2), a row each in the table at the end with
//! PostgreSQL's statement time, CPU and log per 1,000 messages (issue 54: before and after,
//! side by side on the same machine);
//! `LOAD_CORES=1,2` runs once per core count, gateway and harness (with the simulator) pinned
//! to the first N CPUs with `taskset`, and prints a row per count at the end).

mod support;

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::{
    cpu_secs, env_num, histogram_means, load_token_of, metric_sum, peak_rss_mb, print_phase_means,
    serve_command_of, wait_until_up, Api, Gateway,
};

/// One run's headline figures (a row of the `LOAD_CORES` table).
struct Row {
    /// Which build: `this` (this checkout's) or `other` (`LOAD_COMPARE`).
    build: &'static str,
    cores: Option<usize>,
    dispatch: f64,
    end_to_end: f64,
    api_p50: f64,
    api_p99: f64,
    api_sends: usize,
    api_refused: usize,
    rss: f64,
    /// PostgreSQL per 1,000 messages: statement time (ms), backends' CPU (s), write-ahead
    /// log (kB).
    pg: Option<(f64, f64, Option<f64>)>,
}

/// The webhook endpoint of one subscription: counts deliveries, when the first and last
/// arrived, and deliveries of a contact that arrived after a later one of the same contact.
#[derive(Clone, Default)]
struct Receiver {
    addr: String,
    state: std::sync::Arc<std::sync::Mutex<ReceiverState>>,
}

#[derive(Default)]
struct ReceiverState {
    count: u64,
    first: Option<Instant>,
    last: Option<Instant>,
    last_per_contact: std::collections::HashMap<String, i64>,
    out_of_order: u64,
    /// Delivery ids received, to count the ones received twice.
    seen: std::collections::HashSet<i64>,
    duplicates: u64,
}

struct ReceiverSummary {
    count: u64,
    first: f64,
    last: f64,
    out_of_order: u64,
    duplicates: u64,
}

impl Receiver {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let r = Receiver {
            addr: listener.local_addr().unwrap().to_string(),
            state: Default::default(),
        };
        let state = r.state.clone();
        let latency_ms = env_num("LOAD_WEBHOOK_LATENCY_MS", 0);
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |body: axum::body::Bytes| {
                let state = state.clone();
                async move {
                    if latency_ms > 0 {
                        tokio::time::sleep(Duration::from_millis(latency_ms)).await;
                    }
                    let v: Value = serde_json::from_slice(&body).unwrap_or_default();
                    let contact = v["data"]["contact"]["phone"]
                        .as_str()
                        .or(v["data"]["to"].as_str())
                        .unwrap_or_default()
                        .to_string();
                    let id = v["delivery_id"].as_i64().unwrap_or_default();
                    let mut s = state.lock().unwrap();
                    let now = Instant::now();
                    s.count += 1;
                    if !s.seen.insert(id) {
                        s.duplicates += 1;
                    }
                    s.first.get_or_insert(now);
                    s.last = Some(now);
                    if s.last_per_contact
                        .insert(contact, id)
                        .is_some_and(|p| p > id)
                    {
                        s.out_of_order += 1;
                    }
                    axum::http::StatusCode::OK
                }
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await.ok() });
        r
    }

    fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    fn count(&self) -> u64 {
        self.state.lock().unwrap().count
    }

    fn summary(&self, start: Instant) -> ReceiverSummary {
        let s = self.state.lock().unwrap();
        let at = |t: Option<Instant>| t.map_or(f64::NAN, |t| (t - start).as_secs_f64());
        ReceiverSummary {
            count: s.count,
            first: at(s.first),
            last: at(s.last),
            out_of_order: s.out_of_order,
            duplicates: s.duplicates,
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let cores: Vec<usize> = std::env::var("LOAD_CORES")
        .ok()
        .map(|v| {
            v.split(',')
                .map(|c| c.trim().parse().expect("LOAD_CORES: core counts, e.g. 1,2"))
                .collect()
        })
        .unwrap_or_default();
    // Side by side (issue 54): `LOAD_COMPARE=<another build's disparo>` runs it and this
    // checkout's build in turn, `LOAD_REPEAT` times each (default 2), so both meet the
    // machine in the same state.
    let other = std::env::var("LOAD_COMPARE").ok();
    let builds: Vec<(&'static str, String)> = match &other {
        Some(path) => {
            let repeat = env_num("LOAD_REPEAT", 2) as usize;
            let this = env!("CARGO_BIN_EXE_disparo").to_string();
            (0..repeat)
                .flat_map(|_| [("other", path.clone()), ("this", this.clone())])
                .collect()
        }
        None => vec![("this", env!("CARGO_BIN_EXE_disparo").to_string())],
    };
    let mut rows = Vec::new();
    for (build, bin) in &builds {
        if cores.is_empty() {
            rows.push(run(None, build, bin).await);
        } else {
            for n in &cores {
                support::pin_self(*n);
                rows.push(run(Some(*n), build, bin).await);
            }
        }
    }
    println!("build | cores | dispatch msg/s | end to end msg/s | 1:1 p50 ms | 1:1 p99 ms | 1:1 sends (refused) | peak RSS MB | PostgreSQL ms / CPU s / log kB per 1,000");
    for r in rows {
        let pg = match r.pg {
            Some((ms, cpu, wal)) => format!(
                "{ms:.0} / {cpu:.2} / {}",
                wal.map_or("-".to_string(), |w| format!("{w:.0}"))
            ),
            None => "-".to_string(),
        };
        println!(
            "{} | {} | {:.0} | {:.0} | {:.1} | {:.1} | {} ({}) | {:.0} | {pg}",
            r.build,
            r.cores.map_or("all".to_string(), |c| c.to_string()),
            r.dispatch,
            r.end_to_end,
            r.api_p50,
            r.api_p99,
            r.api_sends,
            r.api_refused,
            r.rss
        );
    }
}

/// One run of the campaign against the gateway binary `bin` (`build` labels its row).
async fn run(cores: Option<usize>, build: &'static str, bin: &str) -> Row {
    let n = env_num("LOAD_RECIPIENTS", 100_000) as usize;
    let numbers = env_num("LOAD_NUMBERS", 10) as usize;
    // The provider throughput of each number, messages/s (1,000: HIGH; 80 the default; 20 a
    // coexistence number): the issue-25 probe is `LOAD_RECIPIENTS=2000 LOAD_NUMBERS=1
    // LOAD_THROUGHPUT_MPS=20 LOAD_API_RATE=0`.
    let throughput = env_num("LOAD_THROUGHPUT_MPS", 1000) as u32;
    let backend = std::env::var("LOAD_BACKEND").unwrap_or_else(|_| "sqlite".into());
    let support::Stage {
        dir: _dir,
        addr,
        sim,
        env,
    } = support::stage(
        &backend,
        3,
        Some(provider::sim::StatusDelays {
            sent_ms: 0,
            delivered_ms: 0,
            read_ms: 0,
        }),
    )
    .await;
    let mut env = env;
    env.push(("DISPARO_ALLOW_PRIVATE_URLS", "true".into()));
    let receiver = Receiver::start().await;
    let gw = Gateway {
        child: serve_command_of(bin, &env, cores).spawn().expect("gateway"),
    };
    let http = reqwest::Client::new();
    wait_until_up(&http, &addr).await;
    let token = load_token_of(bin, &env);
    let client = Api {
        http: http.clone(),
        addr: addr.clone(),
        token: token.clone(),
    };
    let api = |m: reqwest::Method, path: &str, body: Option<Value>| {
        client.call(m, path.to_string(), body)
    };

    let mut channels = Vec::new();
    for _ in 0..numbers {
        let num = sim
            .create_number(provider::sim::CreateNumber {
                tier: Some("TIER_UNLIMITED".into()),
                throughput_mps: Some(throughput),
                ..Default::default()
            })
            .unwrap();
        let c = api(reqwest::Method::POST, "/channels/official", Some(json!({"phone_number_id": num.phone_number_id, "waba_id": num.waba_id, "access_token": num.access_token, "app_secret": num.app_secret}))).await;
        let id = c["data"]["id"].as_i64().unwrap();
        api(
            reqwest::Method::PATCH,
            &format!("/channels/{id}/guardrails"),
            Some(json!({"daily_cap": null, "cadence_ms": 0, "warmup": false})),
        )
        .await;
        channels.push(id);
    }
    api(
        reqwest::Method::POST,
        &format!("/channels/{}/webhooks", channels[0]),
        Some(json!({"url": receiver.url(), "events": ["message.sent", "message.ack"]})),
    )
    .await;
    let t = api(reqwest::Method::POST, "/templates", Some(json!({"name": "Carga", "body": "Olá {{1}}, seu código é {{2}}.", "var_map": {"1": {"field": "nome"}, "2": {"field": "codigo"}}, "submit_channels": channels}))).await;
    let template = t["data"]["id"].as_i64().unwrap();
    loop {
        let list = api(reqwest::Method::GET, "/templates", None).await;
        let approved = list["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == template)
            .map(|t| t["channels_by_status"]["approved"] == numbers);
        if approved == Some(true) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let chans: Vec<Value> = channels
        .iter()
        .map(|c| json!({"channel_id": c, "weight": 1}))
        .collect();
    let c = api(
        reqwest::Method::POST,
        "/campaigns",
        Some(json!({"name": "Carga", "template_id": template, "channels": chans})),
    )
    .await;
    let campaign = c["data"]["id"].as_i64().unwrap();

    // The audience, 10,000 rows per call.
    let add_start = Instant::now();
    for chunk_start in (0..n).step_by(10_000) {
        let rows: Vec<Value> = (chunk_start..(chunk_start + 10_000).min(n))
            .map(|i| json!({"phone": format!("55119{i:08}"), "vars": {"nome": format!("Cliente {i}"), "codigo": format!("C{i}")}}))
            .collect();
        api(
            reqwest::Method::POST,
            &format!("/campaigns/{campaign}/recipients"),
            Some(json!({ "recipients": rows })),
        )
        .await;
    }
    let add_secs = add_start.elapsed().as_secs_f64();

    // The concurrent 1:1 load: template sends to other recipients, `LOAD_API_RATE` per second
    // (open loop), over the numbers in turn. `LOAD_API_RATE=0` leaves the numbers to the
    // campaign (the pacing probe: 1:1 sends take part of a slow number's throughput).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let probe = {
        let (http, token, addr, stop) = (http.clone(), token.clone(), addr.clone(), stop.clone());
        let channels = channels.clone();
        tokio::spawn(async move {
            let rate = env_num("LOAD_API_RATE", 100);
            let mut sends = tokio::task::JoinSet::new();
            if rate > 0 {
                let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
                let mut i = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    tick.tick().await;
                    i += 1;
                    let channel = channels[i as usize % channels.len()];
                    let req = http
                        .post(format!("http://{addr}/api/v1/messages"))
                        .bearer_auth(&token)
                        .json(&json!({"channel_id": channel, "to": format!("55219{i:08}"), "template": {"id": template, "vars": {"nome": "Sonda", "codigo": "S1"}}}));
                    sends.spawn(async move {
                        let started = Instant::now();
                        match req.send().await {
                            Ok(r) if r.status().is_success() => {
                                Ok(started.elapsed().as_secs_f64() * 1000.0)
                            }
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
            (latencies, refused.len())
        })
    };

    let db_url = env
        .iter()
        .find(|(k, _)| *k == "DATABASE_URL")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let pg_at_start = match backend.as_str() {
        "postgres" => support::PgCost::read(&db_url).await,
        _ => None,
    };
    let waits = pg_at_start
        .as_ref()
        .map(|_| support::sample_waits(db_url.clone(), stop.clone()));
    let gw_pid = gw.child.id().to_string();
    let cpu_at_start = (cpu_secs(&gw_pid), cpu_secs("self"));
    let mut cpu_at_sent = (None, None);
    let start = Instant::now();
    api(
        reqwest::Method::POST,
        &format!("/campaigns/{campaign}/start"),
        None,
    )
    .await;
    let (mut sent_at, mut read_at) = (None, None);
    // Polling the campaign costs the gateway two counts over the audience, so the harness
    // polls every 500 ms and every 50 ms only near the end of each count (the last 5 %): the
    // readings keep a 50 ms resolution without the probe loading the database (on PostgreSQL
    // the counts visit every row version of the audience).
    let mut near_end = false;
    // How long each poll took: the campaign's counters, read while it runs (D-091).
    let mut poll_ms: Vec<f64> = Vec::new();
    while read_at.is_none() {
        tokio::time::sleep(Duration::from_millis(if near_end { 50 } else { 500 })).await;
        let asked = Instant::now();
        let c = api(
            reqwest::Method::GET,
            &format!("/campaigns/{campaign}"),
            None,
        )
        .await;
        poll_ms.push(asked.elapsed().as_secs_f64() * 1000.0);
        let stats = &c["data"]["stats"];
        let count = |k: &str| stats[k].as_u64().unwrap_or(0);
        let next = if sent_at.is_none() { "sent" } else { "read" };
        near_end = count(next) * 100 >= n as u64 * 95;
        if sent_at.is_none() && stats["sent"].as_u64() == Some(n as u64) {
            sent_at = Some(start.elapsed().as_secs_f64());
            cpu_at_sent = (cpu_secs(&gw_pid), cpu_secs("self"));
        }
        if stats["read"].as_u64() == Some(n as u64) {
            read_at = Some(start.elapsed().as_secs_f64());
        }
        assert!(
            start.elapsed() < Duration::from_secs(1200),
            "campaign did not finish: {stats}"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    // The subscription catches up: wait until nothing new arrived for 2 s.
    let mut seen = receiver.count();
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = receiver.count();
        if now == seen || start.elapsed() > Duration::from_secs(1500) {
            break;
        }
        seen = now;
    }
    let (mut latencies, api_refused) = probe.await.unwrap();
    // PostgreSQL's own cost of the run: the campaign, its statuses and the 1:1 load.
    let pg_at_end = match &pg_at_start {
        Some(_) => support::PgCost::read(&db_url).await,
        None => None,
    };
    let waits = match waits {
        Some(w) => w.await.unwrap_or_default(),
        None => Default::default(),
    };
    let wal = match (&pg_at_start, &pg_at_end) {
        (Some(start), Some(end)) => end.wal_since(start, &db_url).await,
        _ => None,
    };
    let pg_cost = match (&pg_at_start, &pg_at_end) {
        (Some(start), Some(end)) => Some(end.since(start)),
        _ => None,
    };
    latencies.sort_by(|a, b| a.total_cmp(b));
    let metrics = support::metrics_text(&http, &addr).await;
    if let Ok(path) = std::env::var("LOAD_METRICS_OUT") {
        std::fs::write(path, &metrics).expect("write the gateway's /metrics");
    }
    let throttled: f64 = metrics
        .lines()
        .filter(|l| {
            l.starts_with("disparo_messages_failed_total")
                && (l.contains("kind=\"RateLimited\"") || l.contains("kind=\"PairRateLimited\""))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(0.0, |a, b| a + b);
    let rss = peak_rss_mb(gw.child.id()).unwrap_or(f64::NAN);
    let sent_secs = sent_at.unwrap();
    let read_secs = read_at.unwrap();
    println!(
        "campaign_load backend={backend} recipients={n} numbers={numbers} cores={}",
        cores.map_or("all".to_string(), |c| c.to_string())
    );
    println!(
        "  add recipients:   {add_secs:.2} s ({:.0} rows/s)",
        n as f64 / add_secs
    );
    println!(
        "  dispatch:         {:.0} messages/s (last sent at {sent_secs:.2} s)",
        n as f64 / sent_secs
    );
    println!(
        "  end to end:       {:.0} messages/s (last read at {read_secs:.2} s)",
        n as f64 / read_secs
    );
    println!("  gateway peak RSS: {rss:.0} MB");
    println!(
        "  POST /messages:   p50 {:.1} ms, p99 {:.1} ms ({} sends, {api_refused} refused)",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies.len()
    );
    poll_ms.sort_by(|a, b| a.total_cmp(b));
    println!(
        "  GET /campaigns/{{id}}: p50 {:.1} ms, p99 {:.1} ms ({} polls while it ran)",
        percentile(&poll_ms, 0.5),
        percentile(&poll_ms, 0.99),
        poll_ms.len()
    );
    println!("  throughput / pair-rate refusals: {throttled}");
    if let Some((active_ms, cpu)) = pg_cost {
        let thousands = (n + latencies.len()) as f64 / 1000.0;
        println!(
            "  PostgreSQL: {:.0} ms of statement time and {:.2} CPU s per 1,000 messages ({active_ms:.0} ms, {cpu:.1} s for {} campaign and {} 1:1 messages, statuses included)",
            active_ms / thousands,
            cpu / thousands,
            n,
            latencies.len()
        );
        if let (Some(start), Some(end)) = (&pg_at_start, &pg_at_end) {
            print_pg_writes(start, end, thousands);
        }
        if let Some((bytes, kinds)) = &wal {
            print_wal(*bytes, kinds, thousands);
        }
        support::print_waits(&waits);
    }
    let w = receiver.summary(start);
    println!(
        "  one subscription: {} deliveries at {:.0} deliveries/s (first at {:.2} s, last at {:.2} s, {:.2} s after the last read), {} out of order per contact, {} received twice",
        w.count,
        w.count as f64 / (w.last - w.first).max(1e-3),
        w.first,
        w.last,
        w.last - read_secs,
        w.out_of_order,
        w.duplicates
    );
    // Where the time goes while dispatching: CPU of the gateway and of this process (the
    // simulator and the probes), in cores busy on average; and the campaign's ticks.
    if let ((Some(g0), Some(h0)), (Some(g1), Some(h1))) = (cpu_at_start, cpu_at_sent) {
        println!(
            "  CPU while dispatching: gateway {:.2} cores, simulator+harness {:.2} cores",
            (g1 - g0) / sent_secs,
            (h1 - h0) / sent_secs
        );
    }
    let ticks = metric_sum(&metrics, "disparo_campaign_tick_seconds_count");
    let tick_secs = metric_sum(&metrics, "disparo_campaign_tick_seconds_sum");
    if ticks > 0.0 {
        println!(
            "  campaign ticks: {ticks:.0}, mean {:.1} ms, busy {:.0} % of the run",
            tick_secs / ticks * 1000.0,
            tick_secs / read_secs * 100.0
        );
    }
    // Where a send's time goes: the tick's phases, the send's phases, the writers' batches
    // and the status webhooks' requests (mean ms per series).
    for family in [
        "disparo_campaign_tick_phase_seconds",
        "disparo_store_batch_seconds",
        "disparo_store_lane_wait_seconds",
        "disparo_store_lane_hold_seconds",
    ] {
        for (labels, count, mean) in histogram_means(&metrics, family) {
            println!("  {family}{labels}: {count:.0}, mean {mean:.2} ms");
        }
    }
    print_phase_means(
        &metrics,
        "disparo_campaign_send_phase",
        &["wait", "call", "handoff"],
        "campaign send phase",
    );
    print_phase_means(
        &metrics,
        "disparo_api_send_phase",
        &[
            "prepare", "mailbox", "pacing", "window", "write", "call", "answer",
        ],
        "1:1 send phase",
    );
    // A count, not seconds: its "mean ms" is the mean batch size times 1,000.
    for (_, count, mean) in histogram_means(&metrics, "disparo_campaign_commit_batch") {
        println!(
            "  settlement batches: {count:.0}, mean {:.0} outcomes",
            mean / 1000.0
        );
    }
    for (_, count, mean) in histogram_means(&metrics, "disparo_webhook_attempt_batch") {
        println!(
            "  webhook attempt batches: {count:.0}, mean {:.1} attempts",
            mean / 1000.0
        );
    }
    println!(
        "  webhook dispatcher polls: {:.0}, window reads {:.0} (D-086)",
        metric_sum(&metrics, "disparo_webhook_polls_total"),
        metric_sum(&metrics, "disparo_webhook_window_reads_total")
    );
    for (labels, count, mean) in histogram_means(&metrics, "disparo_http_request_duration_seconds")
    {
        if labels.contains("webhooks") {
            println!("  webhooks {labels}: {count:.0}, mean {mean:.2} ms");
        }
    }
    drop(gw);
    let thousands = (n + latencies.len()) as f64 / 1000.0;
    Row {
        build,
        pg: pg_cost.map(|(ms, cpu)| {
            (
                ms / thousands,
                cpu / thousands,
                wal.as_ref().map(|(bytes, _)| bytes / thousands / 1024.0),
            )
        }),
        cores,
        dispatch: n as f64 / sent_secs,
        end_to_end: n as f64 / read_secs,
        api_p50: percentile(&latencies, 0.5),
        api_p99: percentile(&latencies, 0.99),
        api_sends: latencies.len(),
        api_refused,
        rss,
    }
}

/// The write-ahead log per 1,000 messages (issue 54, D-135): every commit waits for its flush,
/// so the log's volume, more than the statements' own time, is PostgreSQL's cost per
/// message. In all, and, where `pg_walinspect` reads it, the six largest record kinds.
fn print_wal(bytes: f64, kinds: &[support::WalRecords], thousands: f64) {
    let kb = |b: f64| b / thousands / 1024.0;
    let top: Vec<String> = kinds
        .iter()
        .take(6)
        .map(|k| {
            format!(
                "{} {:.0} kB ({:.1} per message)",
                k.kind,
                kb(k.bytes),
                k.count as f64 / thousands / 1000.0
            )
        })
        .collect();
    println!(
        "  PostgreSQL write-ahead log per 1,000 messages: {:.0} kB{}{}",
        kb(bytes),
        if top.is_empty() {
            ""
        } else {
            "; the largest: "
        },
        top.join(", ")
    );
}

/// PostgreSQL's row writes per message by table (heap-only updates, which touch no index,
/// apart) and, where the server loads `pg_stat_statements`, the ten costliest statements per
/// 1,000 messages (issue 54: what the write model costs).
fn print_pg_writes(start: &support::PgCost, end: &support::PgCost, thousands: f64) {
    println!(
        "  PostgreSQL row writes per message (inserted / updated, of which heap-only / deleted):"
    );
    for w in end.tables_since(start).iter().take(10) {
        println!(
            "    {:<28} {:.2} / {:.2} ({:.2}) / {:.2}",
            w.table,
            w.inserted as f64 / thousands / 1000.0,
            w.updated as f64 / thousands / 1000.0,
            w.hot as f64 / thousands / 1000.0,
            w.deleted as f64 / thousands / 1000.0
        );
    }
    let statements = end.statements_since(start);
    if statements.is_empty() {
        return;
    }
    println!(
        "  PostgreSQL statements per 1,000 messages (ms, calls, rows, WAL kB), the costliest:"
    );
    for c in statements.iter().take(10) {
        let text: String = c.query.split_whitespace().collect::<Vec<_>>().join(" ");
        let text: String = text.chars().take(110).collect();
        println!(
            "    {:>7.1} ms {:>6.1} calls {:>7.0} rows {:>7.0} kB  {text}",
            c.total_ms / thousands,
            c.calls as f64 / thousands,
            c.rows as f64 / thousands,
            c.wal_bytes / thousands / 1024.0
        );
    }
}
