//! Helpers shared by the load harnesses: the gateway as a child process (the `disparo`
//! binary, release build), a fresh database per run, and readings of a process's memory and
//! CPU from `/proc`.

#![allow(dead_code)]

use std::process::{Child, Command, Stdio};

/// A number from the environment, or `default`.
pub fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A process's peak resident memory (VmHWM), MB.
pub fn peak_rss_mb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// CPU time (user + system, s) a process has used so far (`/proc/<pid>/stat`, 100 ticks/s).
pub fn cpu_secs(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the `(comm)`: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// What PostgreSQL itself spent on the benchmark's database up to one moment (issue 54): the
/// statement time of its sessions (`pg_stat_database.active_time`, ms; flushed by the server
/// at most a second after a transaction) and the CPU of each backend serving it (s, from
/// `/proc`, by pid). Read on a connection of its own.
pub struct PgCost {
    active_ms: f64,
    cpu_by_pid: std::collections::HashMap<i32, f64>,
    /// Row writes per table: `(inserted, updated, of which heap-only, deleted)`
    /// (`pg_stat_user_tables`).
    tables: std::collections::HashMap<String, [i64; 4]>,
    /// Per statement (`pg_stat_statements`, when the server loads it): `(calls, rows, total
    /// ms, WAL bytes)` by the statement's text.
    statements: std::collections::HashMap<String, (i64, i64, f64, f64)>,
    /// The server's write-ahead log position (`pg_current_wal_lsn()`, as text).
    wal_lsn: Option<String>,
}

/// One kind of write-ahead log record over a run (see [`PgCost::wal_since`]).
pub struct WalRecords {
    /// `resource manager/record type`, e.g. `Btree/INSERT_LEAF`.
    pub kind: String,
    pub count: i64,
    /// Bytes, full-page images included.
    pub bytes: f64,
}

/// One table's row writes over a run (see [`PgCost::tables_since`]).
pub struct TableWrites {
    pub table: String,
    pub inserted: i64,
    pub updated: i64,
    pub hot: i64,
    pub deleted: i64,
}

/// One statement's cost over a run (see [`PgCost::statements_since`]).
pub struct StatementCost {
    pub query: String,
    pub calls: i64,
    pub rows: i64,
    pub total_ms: f64,
    pub wal_bytes: f64,
}

impl PgCost {
    /// The reading of the database at `url`; `None` when it cannot be read.
    pub async fn read(url: &str) -> Option<PgCost> {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(url).await.ok()?;
        let (active_ms,): (f64,) = sqlx::query_as(
            "SELECT COALESCE(active_time, 0)::float8 FROM pg_stat_database WHERE datname = current_database()",
        )
        .fetch_one(&mut conn)
        .await
        .ok()?;
        let pids: Vec<(i32,)> = sqlx::query_as(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .fetch_all(&mut conn)
        .await
        .ok()?;
        let cpu_by_pid = pids
            .into_iter()
            .filter_map(|(pid,)| Some((pid, cpu_secs(&pid.to_string())?)))
            .collect();
        let tables: Vec<(String, i64, i64, i64, i64)> = sqlx::query_as(
            "SELECT relname::text, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del FROM pg_stat_user_tables",
        )
        .fetch_all(&mut conn)
        .await
        .ok()?;
        let tables = tables
            .into_iter()
            .map(|(t, i, u, h, d)| (t, [i, u, h, d]))
            .collect();
        // Only where the server preloads the extension (`shared_preload_libraries`); the
        // figures above do without it.
        let _ = sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            .execute(&mut conn)
            .await;
        let statements: Vec<(String, i64, i64, f64, f64)> = sqlx::query_as(
            "SELECT query, calls, rows, total_exec_time, wal_bytes::float8 FROM pg_stat_statements \
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
        )
        .fetch_all(&mut conn)
        .await
        .unwrap_or_default();
        let mut by_query: std::collections::HashMap<String, (i64, i64, f64, f64)> =
            Default::default();
        for (q, calls, rows, ms, wal) in statements {
            let e = by_query.entry(q).or_default();
            *e = (e.0 + calls, e.1 + rows, e.2 + ms, e.3 + wal);
        }
        let wal_lsn: Option<(String,)> = sqlx::query_as("SELECT pg_current_wal_lsn()::text")
            .fetch_optional(&mut conn)
            .await
            .ok()
            .flatten();
        let _ = conn.close().await;
        Some(PgCost {
            active_ms,
            cpu_by_pid,
            tables,
            statements: by_query,
            wal_lsn: wal_lsn.map(|(l,)| l),
        })
    }

    /// The write-ahead log written since `earlier` (the whole server's: on a machine running
    /// only the benchmark, the run's), bytes in all and by record kind, the largest first.
    /// By kind only where `pg_walinspect` (PostgreSQL ≥ 15's contrib) can be created on
    /// `url`'s database and the segments are still on disk (`wal_keep_size` large enough);
    /// `None` without a position.
    pub async fn wal_since(&self, earlier: &PgCost, url: &str) -> Option<(f64, Vec<WalRecords>)> {
        use sqlx::Connection;
        let (from, to) = (earlier.wal_lsn.as_deref()?, self.wal_lsn.as_deref()?);
        let mut conn = sqlx::PgConnection::connect(url).await.ok()?;
        let (total,): (f64,) =
            sqlx::query_as("SELECT pg_wal_lsn_diff($2::pg_lsn, $1::pg_lsn)::float8")
                .bind(from)
                .bind(to)
                .fetch_one(&mut conn)
                .await
                .ok()?;
        let _ = sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
            .execute(&mut conn)
            .await;
        let rows: Vec<(String, i64, f64)> = sqlx::query_as(
            "SELECT \"resource_manager/record_type\", count, combined_size::float8 \
             FROM pg_get_wal_stats($1::pg_lsn, $2::pg_lsn, true) WHERE count > 0 \
             ORDER BY combined_size DESC",
        )
        .bind(from)
        .bind(to)
        .fetch_all(&mut conn)
        .await
        .unwrap_or_default();
        let _ = conn.close().await;
        let kinds = rows
            .into_iter()
            .map(|(kind, count, bytes)| WalRecords { kind, count, bytes })
            .collect();
        Some((total, kinds))
    }

    /// Row writes per table since `earlier`, the most written first (tables without writes
    /// left out).
    pub fn tables_since(&self, earlier: &PgCost) -> Vec<TableWrites> {
        let mut out: Vec<TableWrites> = self
            .tables
            .iter()
            .map(|(t, now)| {
                let was = earlier.tables.get(t).copied().unwrap_or_default();
                TableWrites {
                    table: t.clone(),
                    inserted: now[0] - was[0],
                    updated: now[1] - was[1],
                    hot: now[2] - was[2],
                    deleted: now[3] - was[3],
                }
            })
            .filter(|w| w.inserted + w.updated + w.deleted > 0)
            .collect();
        out.sort_by_key(|w| std::cmp::Reverse(w.inserted + w.updated + w.deleted));
        out
    }

    /// Statements since `earlier`, the costliest first (empty without `pg_stat_statements`).
    pub fn statements_since(&self, earlier: &PgCost) -> Vec<StatementCost> {
        let mut out: Vec<StatementCost> = self
            .statements
            .iter()
            .map(|(q, now)| {
                let was = earlier.statements.get(q).copied().unwrap_or_default();
                StatementCost {
                    query: q.clone(),
                    calls: now.0 - was.0,
                    rows: now.1 - was.1,
                    total_ms: now.2 - was.2,
                    wal_bytes: now.3 - was.3,
                }
            })
            .filter(|c| c.calls > 0)
            .collect();
        out.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms));
        out
    }

    /// Statement time (ms) and backend CPU (s) since `earlier`: a backend that started since
    /// counts whole; one that ended since is lost (the pool keeps its connections through a
    /// run).
    pub fn since(&self, earlier: &PgCost) -> (f64, f64) {
        let cpu = self
            .cpu_by_pid
            .iter()
            .map(|(pid, now)| now - earlier.cpu_by_pid.get(pid).copied().unwrap_or(0.0))
            .sum();
        (self.active_ms - earlier.active_ms, cpu)
    }
}

/// A metric's value summed over its label sets (Prometheus text).
pub fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        // A fold from +0 (`sum` of no f64 is -0, printed "-0").
        .fold(0.0, |a, b| a + b)
}

/// Prints the mean of each phase of a pair of counters labelled `phase` (`{family}_microseconds_total`
/// over `{family}s_total`, e.g. `disparo_api_send_phase`) as `  {title} {phase}: count, mean
/// ms`, for the phases that were counted.
pub fn print_phase_means(text: &str, family: &str, phases: &[&str], title: &str) {
    for phase in phases {
        let label = format!("{{phase=\"{phase}\"}}");
        let sum = metric_sum(text, &format!("{family}_microseconds_total{label}"));
        let count = metric_sum(text, &format!("{family}s_total{label}"));
        // `{family}_slow...`: phases of 25 ms or more, where the family counts them.
        let slow_family = format!(
            "{}_slow_phases_total{label}",
            family.trim_end_matches("_phase")
        );
        let slow = metric_sum(text, &slow_family);
        if count > 0.0 {
            println!(
                "  {title} {phase}: {count:.0}, mean {:.2} ms, {slow:.0} of 25 ms or more",
                sum / count / 1000.0
            );
        }
    }
}

/// Count and mean (ms) of each labelled series of a Prometheus histogram (or summary) `name`
/// in an exposition `text`, from its `_sum` and `_count` lines: `(labels, count, mean_ms)`.
pub fn histogram_means(text: &str, name: &str) -> Vec<(String, f64, f64)> {
    let series = |suffix: &str| -> Vec<(String, f64)> {
        let prefix = format!("{name}{suffix}");
        text.lines()
            .filter_map(|l| {
                let rest = l.strip_prefix(&prefix)?;
                let (labels, value) = rest.rsplit_once(' ')?;
                Some((labels.to_string(), value.parse().ok()?))
            })
            .collect()
    };
    let sums = series("_sum");
    series("_count")
        .into_iter()
        .filter(|(_, count)| *count > 0.0)
        .filter_map(|(labels, count)| {
            let sum = sums.iter().find(|(l, _)| *l == labels)?.1;
            Some((labels, count, sum / count * 1000.0))
        })
        .collect()
}

/// The gateway child process, killed when dropped.
pub struct Gateway {
    /// The child process.
    pub child: Child,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `disparo` command with only `PATH`, warn-level logs, `MIMALLOC_*` settings and `env`.
pub fn gateway_command(env: &[(&str, String)]) -> Command {
    with_env(Command::new(env!("CARGO_BIN_EXE_disparo")), env)
}

/// `disparo serve`, as [`gateway_command`] makes it. `LOAD_GATEWAY_WRAP` (a command and its
/// arguments, split at spaces) runs it under another program, e.g. `heaptrack -o /tmp/gw` with
/// a `--features system-alloc` build (the RSS printed is then the wrapper's).
pub fn serve_command(env: &[(&str, String)]) -> Command {
    serve_command_on(env, None)
}

/// The CPUs `0..cores` as `taskset` names them (`0-1`).
pub fn cpu_list(cores: usize) -> String {
    format!("0-{}", cores.max(1) - 1)
}

/// Pins this process (every thread: the simulator and the harness) to the CPUs `0..cores`.
pub fn pin_self(cores: usize) {
    let ok = Command::new("taskset")
        .args([
            "-a",
            "-p",
            "-c",
            &cpu_list(cores),
            &std::process::id().to_string(),
        ])
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(
        ok,
        "taskset (util-linux) could not pin the harness to {cores} cores"
    );
}

/// [`serve_command`], pinned to the CPUs `0..cores` with `taskset` when `cores` is given.
pub fn serve_command_on(env: &[(&str, String)], cores: Option<usize>) -> Command {
    serve_command_of(env!("CARGO_BIN_EXE_disparo"), env, cores)
}

/// [`serve_command_on`] with another build of the gateway, `bin` (a path to a `disparo`
/// binary): a harness compares two builds side by side in one run (issue 54).
pub fn serve_command_of(bin: &str, env: &[(&str, String)], cores: Option<usize>) -> Command {
    let mut wrap = std::env::var("LOAD_GATEWAY_WRAP").unwrap_or_default();
    if let Some(n) = cores {
        wrap = format!("taskset -c {} {wrap}", cpu_list(n));
    }
    let mut words = wrap.split_whitespace();
    let mut c = match words.next() {
        Some(program) => {
            let mut c = Command::new(program);
            c.args(words).arg(bin);
            c
        }
        None => Command::new(bin),
    };
    c.arg("serve");
    with_env(c, env)
}

fn with_env(mut c: Command, env: &[(&str, String)]) -> Command {
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("PROVIDER_APP_SECRET", "bench-app-secret")
        // The harnesses read `/metrics` without a token and drive the API past a client's
        // default rate (D-099).
        .env("DISPARO_METRICS_PUBLIC", "true")
        .env("DISPARO_RATE_LIMIT_PER_MIN", "0")
        .env(
            "DISPARO_LOG",
            std::env::var("LOAD_GATEWAY_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    // The allocator's and the webhook dispatcher's settings pass through (e.g.
    // `MIMALLOC_PURGE_DELAY=0`, `DISPARO_WEBHOOK_PER_ENDPOINT=1`).
    for (k, v) in std::env::vars()
        .filter(|(k, _)| k.starts_with("MIMALLOC_") || k.starts_with("DISPARO_WEBHOOK_"))
    {
        c.env(k, v);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

/// A fresh database: a SQLite file in a temporary directory, or a new PostgreSQL database.
pub async fn database(backend: &str, dir: &std::path::Path) -> String {
    if backend == "postgres" {
        use sqlx::Connection;
        let admin = std::env::var("DISPARO_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
        // One database per call: a harness with `LOAD_CORES=1,2` stages one run per count.
        static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("disparo_load_{}{run:03}", std::process::id());
        let mut conn = sqlx::PgConnection::connect(&admin)
            .await
            .expect("PostgreSQL");
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut conn)
            .await
            .expect("create database");
        let mut url = url::Url::parse(&admin).unwrap();
        url.set_path(&format!("/{name}"));
        url.to_string()
    } else {
        format!("sqlite://{}?mode=rwc", dir.join("load.db").display())
    }
}

/// A free loopback address, the provider simulator serving on another (its webhooks to the
/// first, statuses at once or on `status_delays`), a fresh database of `backend` (kept in
/// `dir`) and the environment of a gateway on them: what every harness starts from.
pub struct Stage {
    /// Temporary directory of a SQLite database (dropped with the stage).
    pub dir: tempfile::TempDir,
    /// The gateway's `host:port`.
    pub addr: String,
    /// The simulator.
    pub sim: provider::sim::Simulator,
    /// The gateway's environment (`DATABASE_URL`, `DISPARO_LISTEN`, `DISPARO_MASTER_KEY`,
    /// `PROVIDER_BASE_URL`).
    pub env: Vec<(&'static str, String)>,
}

/// Sets a [`Stage`] up.
pub async fn stage(
    backend: &str,
    seed: u64,
    status_delays: Option<provider::sim::StatusDelays>,
) -> Stage {
    let dir = tempfile::tempdir().unwrap();
    let db_url = database(backend, dir.path()).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let defaults = provider::sim::SimConfig::default();
    let sim = provider::sim::Simulator::new(provider::sim::SimConfig {
        seed: Some(seed),
        webhook_url: Some(format!("http://{addr}/webhooks/messaging")),
        status_delays: status_delays.unwrap_or(defaults.status_delays),
        template_review_ms: 50,
        ..defaults
    });
    let sim_addr = sim.clone().spawn("127.0.0.1:0").await.unwrap();
    let env = vec![
        ("DATABASE_URL", db_url),
        ("DISPARO_LISTEN", addr.clone()),
        ("DISPARO_MASTER_KEY", storage::Cipher::generate_key_base64()),
        ("PROVIDER_BASE_URL", format!("http://{sim_addr}")),
    ];
    Stage {
        dir,
        addr,
        sim,
        env,
    }
}

/// The gateway's `/metrics` text (Prometheus exposition).
pub async fn metrics_text(http: &reqwest::Client, addr: &str) -> String {
    http.get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Any call to the gateway with a bearer token (empty: none); the status and the JSON body.
pub async fn call(
    http: &reqwest::Client,
    addr: &str,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let mut r = http.request(method, format!("http://{addr}{path}"));
    if !token.is_empty() {
        r = r.bearer_auth(token);
    }
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.expect("gateway answers");
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(serde_json::Value::Null))
}

/// The password of the harnesses' panel Admin.
pub const ADMIN_PASSWORD: &str = "senha-da-carga-123";

/// Creates the panel Admin `admin@load.test` of the account `load` with `disparo user create`
/// (before the gateway starts).
pub fn bootstrap_admin(env: &[(&str, String)]) {
    use std::io::Write;
    let mut child = gateway_command(env)
        .args([
            "user",
            "create",
            "--account",
            "load",
            "--email",
            "admin@load.test",
            "--name",
            "Admin",
            "--role",
            "Admin",
            "--password-stdin",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("disparo user create");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{ADMIN_PASSWORD}\n").as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success(), "the Admin is created");
}

/// Logs the harnesses' Admin in; the session token.
pub async fn admin_session(http: &reqwest::Client, addr: &str) -> String {
    let (_, login) = call(
        http,
        addr,
        reqwest::Method::POST,
        "/api/login",
        "",
        Some(serde_json::json!({"email": "admin@load.test", "password": ADMIN_PASSWORD})),
    )
    .await;
    login["data"]["token"].as_str().expect("login").to_string()
}

/// Waits (up to 30 s) until the gateway at `addr` answers `GET /health`.
pub async fn wait_until_up(http: &reqwest::Client, addr: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !http
        .get(format!("http://{addr}/health"))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "gateway did not start"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A token of the account `load`, made with `disparo token create`.
pub fn load_token(env: &[(&str, String)]) -> String {
    load_token_of(env!("CARGO_BIN_EXE_disparo"), env)
}

/// [`load_token`] made by another build of the gateway, `bin` (which then also migrates a
/// fresh database with its own migrations).
pub fn load_token_of(bin: &str, env: &[(&str, String)]) -> String {
    let out = with_env(Command::new(bin), env)
        .args(["token", "create", "--account", "load", "--name", "load"])
        .stdout(Stdio::piped())
        .output()
        .expect("disparo token create");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The gateway's `/api/v1` with a token, for the harnesses' set-up calls.
#[derive(Clone)]
pub struct Api {
    /// HTTP client.
    pub http: reqwest::Client,
    /// `host:port` of the gateway.
    pub addr: String,
    /// Bearer token.
    pub token: String,
}

impl Api {
    /// Calls `method /api/v1{path}` and answers the JSON body; panics unless it is a 2xx.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: String,
        body: Option<serde_json::Value>,
    ) -> serde_json::Value {
        let mut r = self
            .http
            .request(method, format!("http://{}/api/v1{path}", self.addr))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            r = r.json(&b);
        }
        let r = r.send().await.expect("gateway answers");
        let status = r.status();
        let body: serde_json::Value = r.json().await.unwrap_or(serde_json::Value::Null);
        assert!(status.is_success(), "{status}: {body}");
        body
    }
}

/// Where PostgreSQL's statement time goes (issue 54): the server's active sessions on one
/// database sampled every 50 ms on a connection of their own until `stop`, counted by what
/// each was doing (`wait_event_type:wait_event` from `pg_stat_activity`, `CPU` when not
/// waiting). Statement time (`active_time`) counts a commit's wait for its log flush, which no
/// statement's own time (`pg_stat_statements`) includes.
pub fn sample_waits(
    url: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<std::collections::HashMap<String, u64>> {
    tokio::spawn(async move {
        use sqlx::Connection;
        let mut counts: std::collections::HashMap<String, u64> = Default::default();
        let Ok(mut conn) = sqlx::PgConnection::connect(&url).await else {
            return counts;
        };
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let rows: Vec<(String,)> = sqlx::query_as(
                "SELECT COALESCE(wait_event_type || ':' || wait_event, 'CPU') FROM pg_stat_activity \
                 WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()",
            )
            .fetch_all(&mut conn)
            .await
            .unwrap_or_default();
            for (w,) in rows {
                *counts.entry(w).or_default() += 1;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let _ = conn.close().await;
        counts
    })
}

/// Prints [`sample_waits`]' counts: the share of samples waiting on the write-ahead log
/// (`LWLock:WALWrite`, `IO:WAL*`), running (`CPU`), and the five most frequent.
pub fn print_waits(counts: &std::collections::HashMap<String, u64>) {
    let total: u64 = counts.values().sum();
    if total == 0 {
        return;
    }
    let share = |f: &dyn Fn(&str) -> bool| {
        counts
            .iter()
            .filter(|(k, _)| f(k))
            .map(|(_, n)| *n)
            .sum::<u64>() as f64
            * 100.0
            / total as f64
    };
    let wal = share(&|k| k == "LWLock:WALWrite" || k.starts_with("IO:WAL"));
    let cpu = share(&|k| k == "CPU");
    let mut top: Vec<(&String, &u64)> = counts.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let top: Vec<String> = top
        .iter()
        .take(5)
        .map(|(k, n)| format!("{k} {:.0} %", **n as f64 * 100.0 / total as f64))
        .collect();
    println!(
        "  PostgreSQL active sessions ({total} samples, every 50 ms): {wal:.0} % waiting on the write-ahead log, {cpu:.0} % running; {}",
        top.join(", ")
    );
}
