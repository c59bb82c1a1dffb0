//! Load harness for the campaign reports (issue 7): fills 1,000,000 campaign message rows
//! (recipients with their messages, across 2 numbers and 4 campaigns, in the proportions of a
//! real run: mostly read, some delivered or sent only, some failed, skipped or queued) straight
//! into the database, then starts the gateway (release build, its own process) on it and
//! times, through the API:
//! - the summary (`GET /reports/campaigns`, JSON and CSV);
//! - a first detail page, a page at offset 500,000 and a filtered page (JSON, 1,000 rows);
//! - the full detail CSV (every row, streamed), with its size and row count;
//! - the gateway's peak RSS before and after the export (the CSV must not hold the rows).
//!
//! Run: `cargo bench --bench reports_load` (settings: `LOAD_ROWS`, default 1000000;
//! `LOAD_BACKEND` `sqlite` (default) or `postgres`, a fresh database next to
//! `DISPARO_TEST_POSTGRES_URL`).

mod support;

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::{env_num, load_token, peak_rss_mb, serve_command, wait_until_up, Api, Gateway};

/// Rows per multi-row INSERT.
const BATCH: usize = 500;
/// Campaigns the rows are spread over.
const CAMPAIGNS: usize = 4;

/// Inserts `n` recipients with their messages (ids from 1) for the campaigns and channels.
async fn fill(url: &str, channels: &[i64], campaigns: &[i64], n: usize) {
    sqlx::any::install_default_drivers();
    let pool = sqlx::any::AnyPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
        .expect("database");
    let (account,): (i64,) = sqlx::query_as("SELECT account_id FROM campaigns WHERE id = $1")
        .bind(campaigns[0])
        .fetch_one(&pool)
        .await
        .expect("the campaigns' account");
    let now = storage::now_ms();
    let mut conversations = Vec::new();
    for (i, ch) in channels.iter().enumerate() {
        let row: (i64,) = sqlx::query_as(
            "INSERT INTO conversations (account_id, channel_id, contact_phone, created_at) VALUES ($1, $2, $3, $4) RETURNING id",
        )
        .bind(account)
        .bind(*ch)
        .bind(format!("bench{i}"))
        .bind(now)
        .fetch_one(&pool)
        .await
        .expect("conversation");
        conversations.push(row.0);
    }
    let mut done = 0;
    while done < n {
        let mut tx = pool.begin().await.expect("begin");
        for _ in 0..100 {
            if done >= n {
                break;
            }
            let rows = BATCH.min(n - done);
            let mut msg = String::from("INSERT INTO messages (id, account_id, channel_id, conversation_id, direction, kind, contact_phone, template_name, template_language, status, provider_message_id, error_code, error_title, source, created_at, sent_at, delivered_at, read_at, failed_at, campaign_id) VALUES ");
            let mut rec = String::from("INSERT INTO campaign_recipients (id, campaign_id, phone, vars, state, channel_id, message_id, error, updated_at) VALUES ");
            for k in 0..rows {
                let i = done + k;
                let id = i + 1;
                let c = i % channels.len();
                let camp = campaigns[i % campaigns.len()];
                let t = now - ((n - i) as i64) * 50;
                // 80 % read, 5 % delivered, 5 % sent, 4 % failed, 3 % skipped, 3 % queued.
                let bucket = i % 100;
                let (state, status, wamid, sent, delivered, read, failed, err) = match bucket {
                    0..=79 => ("sent", "read", true, true, true, true, false, false),
                    80..=84 => ("sent", "delivered", true, true, true, false, false, false),
                    85..=89 => ("sent", "sent", true, true, false, false, false, false),
                    90..=93 => ("failed", "failed", true, false, false, false, true, true),
                    94..=96 => ("skipped", "failed", false, false, false, false, true, true),
                    _ => ("planned", "", false, false, false, false, false, false),
                };
                let ts = |b: bool| if b { t.to_string() } else { "NULL".into() };
                let phone = format!("55119{i:08}");
                if k > 0 {
                    rec.push(',');
                }
                let has_msg = !status.is_empty();
                rec.push_str(&format!(
                    "({id}, {camp}, '{phone}', '{{\"nome\":\"Cliente {i}\",\"cidade\":\"{}\"}}', '{state}', {}, {}, {}, {t})",
                    if i % 7 == 0 { "Recife" } else { "São Paulo" },
                    if has_msg { channels[c].to_string() } else { "NULL".into() },
                    if has_msg { id.to_string() } else { "NULL".into() },
                    if state == "skipped" { "'número inválido'" } else { "NULL" },
                ));
                if has_msg {
                    if !msg.ends_with("VALUES ") {
                        msg.push(',');
                    }
                    msg.push_str(&format!(
                        "({id}, {account}, {}, {}, 'out', 'template', '{phone}', 'carga', 'pt_BR', '{status}', {}, {}, {}, 'campaign', {t}, {}, {}, {}, {}, {camp})",
                        channels[c],
                        conversations[c],
                        if wamid { format!("'wamid.bench.{id}'") } else { "NULL".into() },
                        if err { "131049" } else { "NULL" },
                        if err { "'Esta mensagem não foi entregue para manter um engajamento saudável'" } else { "NULL" },
                        ts(sent),
                        ts(delivered),
                        ts(read),
                        ts(failed),
                    ));
                }
            }
            if !msg.ends_with("VALUES ") {
                sqlx::query(&msg).execute(&mut *tx).await.expect("messages");
            }
            sqlx::query(&rec)
                .execute(&mut *tx)
                .await
                .expect("recipients");
            done += rows;
        }
        tx.commit().await.expect("commit");
    }
    // PostgreSQL: the explicit ids leave the sequences behind; and fresh statistics.
    if url.starts_with("postgres") {
        for table in ["messages", "campaign_recipients"] {
            sqlx::query(&format!(
                "SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT MAX(id) FROM {table}))"
            ))
            .execute(&pool)
            .await
            .expect("setval");
        }
        sqlx::query("ANALYZE")
            .execute(&pool)
            .await
            .expect("analyze");
    } else {
        sqlx::query("ANALYZE")
            .execute(&pool)
            .await
            .expect("analyze");
    }
    pool.close().await;
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n = env_num("LOAD_ROWS", 1_000_000) as usize;
    let backend = std::env::var("LOAD_BACKEND").unwrap_or_else(|_| "sqlite".into());
    let support::Stage {
        dir: _dir,
        addr,
        sim,
        env,
    } = support::stage(&backend, 5, None).await;
    let db_url = env[0].1.clone();
    let http = reqwest::Client::new();
    let start_gateway = || async {
        let gw = Gateway {
            child: serve_command(&env).spawn().expect("gateway"),
        };
        wait_until_up(&http, &addr).await;
        gw
    };
    let gw = start_gateway().await;
    let token = load_token(&env);
    let client = Api {
        http: http.clone(),
        addr: addr.clone(),
        token: token.clone(),
    };
    let api = |m: reqwest::Method, path: String, body: Option<Value>| client.call(m, path, body);
    let mut channels = Vec::new();
    for _ in 0..2 {
        let num = sim
            .create_number(provider::sim::CreateNumber::default())
            .unwrap();
        let c = api(reqwest::Method::POST, "/channels/official".into(), Some(json!({"phone_number_id": num.phone_number_id, "waba_id": num.waba_id, "access_token": num.access_token, "app_secret": num.app_secret}))).await;
        channels.push(c["data"]["id"].as_i64().unwrap());
    }
    let t = api(reqwest::Method::POST, "/templates".into(), Some(json!({"name": "Carga", "body": "Olá {{1}}, tudo bem?", "var_map": {"1": {"field": "nome"}}, "submit_channels": channels}))).await;
    let template = t["data"]["id"].as_i64().unwrap();
    loop {
        let list = api(reqwest::Method::GET, "/templates".into(), None).await;
        let approved = list["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["id"] == template && t["channels_by_status"]["approved"] == 2);
        if approved {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let chans: Vec<Value> = channels.iter().map(|c| json!({"channel_id": c})).collect();
    let mut campaigns = Vec::new();
    for k in 0..CAMPAIGNS {
        let c = api(
            reqwest::Method::POST,
            "/campaigns".into(),
            Some(json!({"name": format!("Carga {k}"), "template_id": template, "channels": chans})),
        )
        .await;
        campaigns.push(c["data"]["id"].as_i64().unwrap());
    }
    // The gateway stops while the rows go in.
    drop(gw);
    let fill_start = Instant::now();
    fill(&db_url, &channels, &campaigns, n).await;
    let fill_secs = fill_start.elapsed().as_secs_f64();
    let gw = start_gateway().await;
    let pid = gw.child.id();

    let timed = |path: String| {
        let (http, token, addr) = (http.clone(), token.clone(), addr.clone());
        async move {
            let t = Instant::now();
            let r = http
                .get(format!("http://{addr}/api/v1{path}"))
                .bearer_auth(&token)
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success(), "{path}: {}", r.status());
            let bytes = r.bytes().await.unwrap();
            (t.elapsed().as_secs_f64() * 1000.0, bytes)
        }
    };
    // Each JSON request three times; the median.
    let median = |path: &'static str| {
        let timed = &timed;
        async move {
            let mut ms = Vec::new();
            let mut rows = 0;
            for _ in 0..3 {
                let (t, body) = timed(path.to_string()).await;
                let v: Value = serde_json::from_slice(&body).unwrap();
                rows = v["data"].as_array().map_or(0, Vec::len);
                ms.push(t);
            }
            ms.sort_by(|a, b| a.total_cmp(b));
            (ms[1], rows)
        }
    };
    println!("reports_load backend={backend} rows={n}");
    println!(
        "  fill: {fill_secs:.1} s ({:.0} rows/s, recipients and messages)",
        n as f64 / fill_secs
    );
    for (label, path) in [
        ("summary JSON", "/reports/campaigns"),
        (
            "detail page 1 (1,000 rows)",
            "/reports/campaign-messages?limit=1000",
        ),
        (
            "detail page at offset 500,000",
            "/reports/campaign-messages?limit=1000&offset=500000",
        ),
        (
            "detail status=failed (1,000)",
            "/reports/campaign-messages?limit=1000&status=failed",
        ),
        (
            "detail campanha=<2nd>&status=read (1,000)",
            "/reports/campaign-messages?limit=1000&campanha=2&status=read",
        ),
        (
            "detail q=phone (1 row)",
            "/reports/campaign-messages?limit=1000&q=5511900077777",
        ),
    ] {
        let (ms, rows) = median(path).await;
        println!("  {label}: {ms:.0} ms ({rows} rows)");
    }
    let (ms, body) = timed("/reports/campaigns?format=csv".into()).await;
    println!("  summary CSV: {ms:.0} ms ({} bytes)", body.len());
    let rss_before = peak_rss_mb(pid).unwrap_or(f64::NAN);
    // The full export, read as it streams (the client counts, it does not keep it).
    let t = Instant::now();
    let mut r = http
        .get(format!(
            "http://{addr}/api/v1/reports/campaign-messages?format=csv"
        ))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let first_byte_ms = t.elapsed().as_secs_f64() * 1000.0;
    let (mut bytes, mut lines) = (0usize, 0usize);
    while let Some(chunk) = r.chunk().await.unwrap() {
        bytes += chunk.len();
        lines += chunk.iter().filter(|b| **b == b'\n').count();
    }
    let csv_secs = t.elapsed().as_secs_f64();
    let rss_after = peak_rss_mb(pid).unwrap_or(f64::NAN);
    assert_eq!(lines, n + 1, "header and every row");
    println!(
        "  full detail CSV: {csv_secs:.1} s ({:.0} rows/s, {:.0} MB, first byte after {first_byte_ms:.0} ms)",
        n as f64 / csv_secs,
        bytes as f64 / 1e6
    );
    println!("  gateway peak RSS: {rss_before:.0} MB before the export, {rss_after:.0} MB after");
    drop(gw);
}
