//! disparo's storage: one sqlx `AnyPool` over SQLite (the default) or PostgreSQL, the same SQL
//! text (`$1, $2…` placeholders) on both, migrations per dialect, and one module per aggregate.
//!
//! Rules (DESIGN.md §4, STYLE.md §6): every query of an account's record takes the account id;
//! timestamps are integer ms since the epoch (UTC); secrets are sealed with [`Cipher`] before
//! they are written; hot paths write in batches, one transaction per batch.

pub mod accounts;
pub mod alternative;
pub mod availability;
pub mod bms;
pub mod campaigns;
pub mod channels;
mod cipher;
pub mod forwarding;
pub mod groups;
pub mod guardrails;
pub mod idempotency;
pub mod leases;
pub mod messages;
pub mod panel;
pub mod panel_campaigns;
pub mod provider_fields;
pub mod reports;
pub mod sender;
pub mod sends;
pub mod sessions;
mod statuses;
pub mod templates;
pub mod webhooks;
pub mod wiki;

#[cfg(test)]
mod concurrency_tests;
#[cfg(test)]
mod test_support;

pub use cipher::{Cipher, CipherError};

use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Row};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Milliseconds since the Unix epoch (UTC), from the system clock.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The storage crate's one error type.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The database failed or refused a query.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// A migration failed.
    #[error("migration error: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A stored secret could not be opened.
    #[error(transparent)]
    Cipher(#[from] CipherError),
    /// The record does not exist (in this account).
    #[error("not found")]
    NotFound,
    /// A uniqueness rule was violated; the text names what already exists.
    #[error("conflict: {0}")]
    Conflict(String),
    /// A stored value does not parse (bad JSON in a column).
    #[error("corrupt stored value: {0}")]
    Corrupt(String),
    /// The database URL is not SQLite or PostgreSQL.
    #[error("unsupported DATABASE_URL scheme (use sqlite:// or postgres://)")]
    UnsupportedUrl,
    /// Cluster mode: the write was made under a lease this process no longer holds (another
    /// node took the cell, or the lease expired): nothing was written (issue 52, `CLUSTER.md`
    /// "Fencing").
    #[error("fenced: the lease {0} is no longer held under this epoch")]
    Fenced(String),
    /// A campaign claim failed after it had claimed recipients (`source`): on SQLite a chunk
    /// may have committed, on PostgreSQL the database may have gone away with the commit's
    /// answer, so whether they are stored is unknown — and none was handed to a number. The
    /// caller settles `give_back` once the database answers (each a `Replan`, which changes
    /// nothing where the claim was not stored), instead of leaving them `claimed` for the
    /// in-doubt grace (D-032, D-136).
    #[error("claim not confirmed: {source}")]
    ClaimUnconfirmed {
        /// The claims made, as settlements that give them back.
        give_back: Vec<campaigns::Settlement>,
        /// What failed.
        source: Box<StorageError>,
    },
}

impl StorageError {
    /// Whether the database could not be reached or could not take the statement for a
    /// reason of its own, not of the request (issue 53, D-124): a connection that failed or
    /// could not be had in time, PostgreSQL shutting down, refusing connections or out of
    /// them (SQLSTATE classes 08, 53 and 57P0x), SQLite busy, locked, read-only, failing to
    /// read or write its file, or full. Answered 503 `database_unavailable`, retryable;
    /// anything else stays an internal error.
    pub fn is_unavailable(&self) -> bool {
        if let StorageError::ClaimUnconfirmed { source, .. } = self {
            return source.is_unavailable();
        }
        let StorageError::Database(e) = self else {
            return false;
        };
        match e {
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::WorkerCrashed => true,
            sqlx::Error::Database(d) => d.code().is_some_and(|c| unavailable_code(&c)),
            _ => false,
        }
    }

    /// Whether the error is a unique-constraint violation reported by the database.
    fn is_unique_violation(e: &sqlx::Error) -> bool {
        matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
    }
}

/// Whether a database error code means the database is away or cannot write (see
/// [`StorageError::is_unavailable`]): a PostgreSQL SQLSTATE (always five characters) or an
/// SQLite result code (a number of at most four digits, the primary code in the low byte: 5
/// busy, 6 locked, 8 read-only, 10 I/O error, 13 full, 14 cannot open).
fn unavailable_code(code: &str) -> bool {
    if code.len() == 5 {
        return code.starts_with("08") || code.starts_with("53") || code.starts_with("57P0");
    }
    code.parse::<i64>()
        .is_ok_and(|n| matches!(n & 0xff, 5 | 6 | 8 | 10 | 13 | 14))
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, StorageError>;

/// Which database is behind the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// SQLite (file, WAL).
    Sqlite,
    /// PostgreSQL.
    Postgres,
}

impl Backend {
    /// `sqlite` or `postgres`.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// Most batched send-path writers on PostgreSQL (see [`Store::send_path_writers`]): four of
/// the pool's 16 connections, leaving the rest to claims, 1:1 sends and reads.
pub const POSTGRES_SEND_PATH_WRITERS: usize = 4;

/// The planner's price of a random page read on the gateway's PostgreSQL connections when
/// the server, database or role does not set one (D-095): 1.1 instead of PostgreSQL's 4, the
/// usual value for SSDs and for data that stays cached. At 4 the planner joined a chunk of 256
/// new values to `messages` by scanning the whole table while it held less than ~60,000 rows
/// (and kept that plan cached after it grew), which cost a tenth of the campaign path's
/// database time and locked rows out of id order.
pub const POSTGRES_RANDOM_PAGE_COST: &str = "1.1";

/// `idle_in_transaction_session_timeout` of disparo's PostgreSQL sessions, ms, unless the
/// operator set one (issue 52, D-110): a process frozen (SIGSTOP, a stalled VM) or cut off
/// between two statements of a transaction holds its row locks until PostgreSQL ends that
/// session; peers on the same database (a status for a message it was settling, a sweep of
/// its claims) wait that long. disparo's transactions never wait between statements for
/// anything but the database, so 5 s idle inside one means the process is gone.
pub const POSTGRES_IDLE_IN_TRANSACTION_MS: &str = "5000";

/// The default database when `DATABASE_URL` is unset: `disparo.db` in the working directory.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://disparo.db?mode=rwc";

/// The store: a pool, its backend and the cipher for secrets. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    /// Where writes go. On SQLite a pool of one connection: writers wait their turn here, in
    /// order, instead of polling SQLite's busy handler (which sleeps up to 100 ms between
    /// tries). On PostgreSQL the same pool as reads.
    writer: AnyPool,
    /// The lane of bulk writers (campaign claims and settlements, status batches): on SQLite
    /// one of them at a time waits for the write connection, so a request's own write (an
    /// API send) queues behind at most one bulk transaction, not behind every one of them.
    bulk_lane: Arc<tokio::sync::Semaphore>,
    /// Bulk writers step aside for a waiting batch of 1:1 sends (issue 25 part 2, D-076).
    priority: Arc<sends::Priority>,
    /// The writer of 1:1 sends (group commit, D-076).
    sends: sends::Sends,
    backend: Backend,
    cipher: Cipher,
    /// Tokens resolved in the last [`accounts::TOKEN_CACHE_TTL`] (D-075).
    tokens: Arc<accounts::TokenCache>,
    /// Templates read for sends (D-090).
    templates: Arc<templates::TemplateCache>,
    /// This process's session and how long a silent one lives (issue 50, D-100).
    session: Arc<sessions::SessionState>,
    /// Whether the database answers (issue 53, D-124).
    availability: Arc<availability::Availability>,
}

impl Store {
    /// Connects to `url` (`sqlite://…` or `postgres://…`). SQLite runs in WAL mode with
    /// foreign keys on; nothing relaxes fsync.
    pub async fn connect(url: &str, cipher: Cipher) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Backend::Postgres
        } else {
            return Err(StorageError::UnsupportedUrl);
        };
        let mut opts = AnyPoolOptions::new()
            .max_connections(match backend {
                Backend::Sqlite => 8,
                Backend::Postgres => 16,
            })
            .acquire_timeout(Duration::from_secs(10))
            .after_release(match backend {
                Backend::Sqlite => released_sqlite,
                Backend::Postgres => released_postgres,
            });
        if backend == Backend::Sqlite {
            opts = opts.after_connect(|conn, _| {
                Box::pin(async move {
                    sqlite_pragmas(conn).await?;
                    // Readers keep a small page cache of their own: the kernel's page cache
                    // holds the file anyway, and 2 MB (SQLite's default) on each of 8 readers
                    // was up to 16 MB of the gateway's memory, filled as the tables grew.
                    sqlx::query(&format!("PRAGMA cache_size = -{SQLITE_READER_CACHE_KIB}"))
                        .execute(&mut *conn)
                        .await?;
                    Ok(())
                })
            });
        }
        if backend == Backend::Postgres {
            opts = opts.after_connect(|conn, _| {
                Box::pin(async move {
                    // D-095: index lookups priced as what they are here, unless the operator
                    // priced them (server, database or role settings are left alone).
                    sqlx::query(
                        "SELECT set_config('random_page_cost', $1, false) FROM pg_settings \
                         WHERE name = 'random_page_cost' AND source = 'default'",
                    )
                    .bind(POSTGRES_RANDOM_PAGE_COST)
                    .fetch_all(&mut *conn)
                    .await?;
                    sqlx::query(
                        "SELECT set_config('idle_in_transaction_session_timeout', $1, false) \
                         FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout' \
                         AND source = 'default'",
                    )
                    .bind(POSTGRES_IDLE_IN_TRANSACTION_MS)
                    .fetch_all(&mut *conn)
                    .await?;
                    Ok(())
                })
            });
        }
        let pool = opts.connect(url).await?;
        let writer = match backend {
            Backend::Sqlite => {
                AnyPoolOptions::new()
                    .max_connections(1)
                    .acquire_timeout(Duration::from_secs(60))
                    .after_release(released_sqlite)
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            sqlite_pragmas(conn).await?;
                            sqlite_writer_pragmas(conn).await
                        })
                    })
                    .connect(url)
                    .await?
            }
            Backend::Postgres => pool.clone(),
        };
        let priority = Arc::new(sends::Priority::default());
        let sends = sends::Sends::start(writer.clone(), backend, priority.clone());
        Ok(Self {
            pool,
            writer,
            priority,
            sends,
            bulk_lane: Arc::new(tokio::sync::Semaphore::new(match backend {
                Backend::Sqlite => 1,
                Backend::Postgres => tokio::sync::Semaphore::MAX_PERMITS,
            })),
            backend,
            cipher,
            tokens: Arc::new(accounts::TokenCache::default()),
            templates: Arc::new(templates::TemplateCache::default()),
            session: Arc::new(sessions::SessionState::default()),
            availability: Arc::default(),
        })
    }

    /// Applies the migrations of the backend's dialect (`migrations/sqlite` or
    /// `migrations/postgres`). Applied migrations are never edited.
    pub async fn migrate(&self) -> Result<()> {
        match self.backend {
            Backend::Sqlite => {
                // A table rebuild (0023) needs foreign keys off, which SQLite switches only
                // outside a transaction: the migrations run on one connection with them off,
                // and every reference is checked afterwards.
                let mut conn = self.pool.acquire().await?;
                sqlx::query("PRAGMA foreign_keys = OFF")
                    .execute(&mut *conn)
                    .await?;
                let applied = sqlx::migrate!("../migrations/sqlite").run(&mut *conn).await;
                sqlx::query("PRAGMA foreign_keys = ON")
                    .execute(&mut *conn)
                    .await?;
                applied?;
                let broken = sqlx::query("PRAGMA foreign_key_check")
                    .fetch_all(&mut *conn)
                    .await?;
                if !broken.is_empty() {
                    return Err(StorageError::Corrupt(format!(
                        "{} rows reference missing rows after the migrations",
                        broken.len()
                    )));
                }
            }
            Backend::Postgres => {
                sqlx::migrate!("../migrations/postgres")
                    .run(&self.pool)
                    .await?
            }
        }
        let resealed = self.reseal_legacy_secrets().await?;
        if resealed > 0 {
            tracing::info!(resealed, "stored secrets re-sealed bound to their rows");
        }
        Ok(())
    }

    /// Re-seals every stored secret still in the legacy `v1:` form (no associated data) as
    /// `v2:`, bound to its table, column and row (D-052), in one transaction. Idempotent: run
    /// by [`Store::migrate`] at every start; a value that does not open under the master key
    /// stops it (the key is wrong, and nothing is changed).
    pub async fn reseal_legacy_secrets(&self) -> Result<u64> {
        const SEALED: [(&str, &str); 4] = [
            ("channels", "access_token_enc"),
            ("channels", "app_secret_enc"),
            ("channels", "pin_enc"),
            ("webhook_subscriptions", "secret_enc"),
        ];
        let mut tx = self.begin_write().await?;
        let mut n = 0;
        for (table, column) in SEALED {
            let rows = sqlx::query(&format!(
                "SELECT id, {column} AS v FROM {table} WHERE {column} LIKE 'v1:%'"
            ))
            .fetch_all(&mut *tx)
            .await?;
            for r in rows {
                let id: i64 = r.try_get("id")?;
                let v: String = r.try_get("v")?;
                let secret = self.cipher.open_legacy(&v)?;
                sqlx::query(&format!("UPDATE {table} SET {column} = $2 WHERE id = $1"))
                    .bind(id)
                    .bind(self.cipher.seal(&secret, table, column, id))
                    .execute(&mut *tx)
                    .await?;
                n += 1;
            }
        }
        tx.commit().await?;
        Ok(n)
    }

    /// Round-trips a trivial query; returns how long it took.
    pub async fn ping(&self) -> Result<Duration> {
        let start = Instant::now();
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(start.elapsed())
    }

    /// Begins a write transaction. On SQLite it is `BEGIN IMMEDIATE`: a deferred transaction
    /// that reads first and writes later fails at once with `SQLITE_BUSY_SNAPSHOT` when another
    /// writer committed in between (WAL mode), whereas an immediate one waits its turn under
    /// the busy timeout.
    pub(crate) async fn begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>> {
        begin_write_on(&self.writer, self.backend).await
    }

    /// Begins a write transaction (as [`Store::begin_write`]) whose loss in a database crash
    /// the gateway already recovers from, so its commit need not wait for the log's flush: on
    /// PostgreSQL `SET LOCAL synchronous_commit = off` (D-141). Only for what is written after
    /// the provider call and tells nobody anything they could not hear again: a campaign
    /// send's outcome (lost, its recipient is in doubt and the send's status webhooks
    /// settle it, D-032) and webhook delivery attempts (lost, the event is delivered again).
    /// The next synchronous commit of any session flushes it too. SQLite: unchanged.
    pub(crate) async fn begin_recoverable_write(
        &self,
    ) -> Result<sqlx::Transaction<'static, sqlx::Any>> {
        let mut tx = self.begin_write().await?;
        if self.backend == Backend::Postgres {
            sqlx::query(RELAXED_COMMIT).execute(&mut *tx).await?;
        }
        Ok(tx)
    }

    /// Waits for the bulk writers' lane (see `bulk_lane`), then for no batch of 1:1 sends to
    /// be waiting for the write connection (they go first, D-076); hold the guard until the
    /// bulk transaction committed. `writer` names the caller in the metrics
    /// `disparo_store_lane_wait_seconds{writer}` (time waiting for the lane) and
    /// `disparo_store_lane_hold_seconds{writer}` (time holding it: the transaction).
    pub(crate) async fn bulk_lane(&self, writer: &'static str) -> LaneGuard {
        let asked = Instant::now();
        let permit = self
            .bulk_lane
            .clone()
            .acquire_owned()
            .await
            .expect("the bulk lane is never closed");
        self.priority.yield_to_sends().await;
        metrics::histogram!("disparo_store_lane_wait_seconds", "writer" => writer)
            .record(asked.elapsed().as_secs_f64());
        LaneGuard {
            _permit: permit,
            writer,
            since: Instant::now(),
        }
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// How many batched writers the send path runs (campaign outcomes and status webhooks,
    /// each owning a partition of the numbers; issue 25 part 3): one on SQLite, whose single
    /// write connection serialises them anyway; on PostgreSQL, whose row locks let writers of
    /// disjoint numbers commit side by side, one per two cores of this machine, at least one
    /// and at most [`POSTGRES_SEND_PATH_WRITERS`]. On a machine where the gateway, the
    /// database and the load share two cores, more writers only cut the batches smaller (ten
    /// times as many commits for the same outcomes) for no gain in dispatch (D-082).
    pub fn send_path_writers(&self) -> usize {
        match self.backend {
            Backend::Sqlite => 1,
            Backend::Postgres => {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                (cores / 2).clamp(1, POSTGRES_SEND_PATH_WRITERS)
            }
        }
    }

    /// The cipher that seals secrets.
    pub fn cipher(&self) -> &Cipher {
        &self.cipher
    }

    /// Closes the pools.
    pub async fn close(&self) {
        self.writer.close().await;
        self.pool.close().await;
    }
}

/// What the pools' `after_release` hooks answer: whether the connection goes back to its pool.
type Released<'c> =
    std::pin::Pin<Box<dyn std::future::Future<Output = sqlx::Result<bool>> + Send + 'c>>;

/// Whether `conn` is outside any transaction.
fn outside_transaction(conn: &sqlx::AnyConnection) -> bool {
    use sqlx::{Database, TransactionManager};
    <sqlx::Any as Database>::TransactionManager::get_transaction_depth(conn) == 0
}

/// A SQLite connection goes back to its pool only outside a transaction. A caller cancelled
/// after its `BEGIN` was acknowledged but before its `Transaction` existed (a campaign actor
/// killed mid-claim) hands the connection back inside a transaction nobody can end: every
/// later `begin` on it fails ("non-zero transaction depth"), and on the one write connection
/// every write of the gateway with it, while the transaction holds the database's write
/// lock. Such a connection is closed, which rolls it back. Inside a transaction at release,
/// a ping first waits for what the connection's worker still has queued (a dropped
/// `Transaction`'s rollback, counted when it runs); outside, nothing is waited for.
fn released_sqlite(
    conn: &mut sqlx::AnyConnection,
    _: sqlx::pool::PoolConnectionMetadata,
) -> Released<'_> {
    Box::pin(async move {
        use sqlx::Connection;
        if outside_transaction(conn) {
            return Ok(true);
        }
        conn.ping().await?;
        let outside = outside_transaction(conn);
        if !outside {
            tracing::warn!("a connection came back inside a transaction nobody holds; closing it");
        }
        Ok(outside)
    })
}

/// PostgreSQL's side of [`released_sqlite`]: a dropped transaction's rollback is counted at
/// once, so only the depth is read.
fn released_postgres(
    conn: &mut sqlx::AnyConnection,
    _: sqlx::pool::PoolConnectionMetadata,
) -> Released<'_> {
    Box::pin(async move { Ok(outside_transaction(conn)) })
}

/// Makes the current PostgreSQL transaction's commit return before its log is flushed
/// (D-141; see [`Store::begin_recoverable_write`]).
pub(crate) const RELAXED_COMMIT: &str = "SET LOCAL synchronous_commit = off";

/// Begins a write transaction on `writer` (see [`Store::begin_write`]).
pub(crate) async fn begin_write_on(
    writer: &AnyPool,
    backend: Backend,
) -> Result<sqlx::Transaction<'static, sqlx::Any>> {
    Ok(match backend {
        Backend::Sqlite => writer.begin_with("BEGIN IMMEDIATE").await?,
        Backend::Postgres => writer.begin().await?,
    })
}

/// A place in the bulk writers' lane; records how long it was held when dropped.
pub(crate) struct LaneGuard {
    _permit: tokio::sync::OwnedSemaphorePermit,
    writer: &'static str,
    since: Instant,
}

impl Drop for LaneGuard {
    fn drop(&mut self) {
        metrics::histogram!("disparo_store_lane_hold_seconds", "writer" => self.writer)
            .record(self.since.elapsed().as_secs_f64());
    }
}

/// Page cache of each SQLite reader connection, KiB (the writer has its own,
/// [`SQLITE_WRITER_CACHE_KIB`]).
pub const SQLITE_READER_CACHE_KIB: u32 = 512;

/// Page cache of the SQLite write connection, KiB: every hot table's and index's upper pages
/// and the pages a batch touches stay in memory, so a batch reads (`pread`) few pages (D-084).
pub const SQLITE_WRITER_CACHE_KIB: u32 = 16 * 1024;

/// WAL pages after which the SQLite write connection checkpoints (SQLite's default is 1,000):
/// a checkpoint copies each page once however often it changed since the last one, so fewer,
/// larger checkpoints write the hot pages (indexes' upper levels, the outbox's head) fewer
/// times; the WAL file grows to about this many pages (4 KiB each) before it is reused.
/// Durability is the same: a commit is in the WAL (synced) either way (D-084).
pub const SQLITE_WAL_AUTOCHECKPOINT_PAGES: u32 = 8_000;

/// The write connection's own SQLite settings: [`SQLITE_WRITER_CACHE_KIB`],
/// [`SQLITE_WAL_AUTOCHECKPOINT_PAGES`], and temporary tables in memory (its multi-row
/// statements' materialized values created, unlinked and wrote a temporary file ~11 times a
/// second; the readers keep files, so a report's large sort spills to disk, not to memory).
async fn sqlite_writer_pragmas(
    conn: &mut sqlx::AnyConnection,
) -> std::result::Result<(), sqlx::Error> {
    sqlx::query("PRAGMA temp_store = MEMORY")
        .execute(&mut *conn)
        .await?;
    sqlx::query(&format!("PRAGMA cache_size = -{SQLITE_WRITER_CACHE_KIB}"))
        .execute(&mut *conn)
        .await?;
    sqlx::query(&format!(
        "PRAGMA wal_autocheckpoint = {SQLITE_WAL_AUTOCHECKPOINT_PAGES}"
    ))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Per-connection SQLite settings: WAL, a busy timeout, foreign keys.
async fn sqlite_pragmas(conn: &mut sqlx::AnyConnection) -> std::result::Result<(), sqlx::Error> {
    sqlx::query("PRAGMA journal_mode = WAL")
        .execute(&mut *conn)
        .await?;
    sqlx::query("PRAGMA busy_timeout = 10000")
        .execute(&mut *conn)
        .await?;
    sqlx::query("PRAGMA foreign_keys = ON")
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Reads an optional TEXT column holding JSON.
fn json_col(row: &AnyRow, col: &str) -> Result<Option<serde_json::Value>> {
    let text: Option<String> = row.try_get(col)?;
    text.map(|t| serde_json::from_str(&t).map_err(|e| StorageError::Corrupt(format!("{col}: {e}"))))
        .transpose()
}

/// The record a single-row lookup found, read with `read`; [`StorageError::NotFound`] when
/// the lookup found no row.
fn found<T>(row: Option<AnyRow>, read: impl FnOnce(&AnyRow) -> Result<T>) -> Result<T> {
    row.as_ref()
        .map(read)
        .transpose()?
        .ok_or(StorageError::NotFound)
}

/// `$start, $start+1, …` for `n` parameters of a statement (`$1, $2, $3` for `(1, 3)`).
pub(crate) fn placeholders(start: usize, n: usize) -> String {
    (start..start + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The text of a multi-row statement as the connection's database binds it fastest: on
/// SQLite, `$1, $2, …, $n` become anonymous `?` when they appear in the text exactly in that
/// order, each once; otherwise (and always on PostgreSQL) the text is unchanged. SQLite keeps
/// named parameters (`$1` is one) in a list it walks for each parameter bound, so binding a
/// statement of n named parameters costs n²/2 steps: 1,280 parameters (a status chunk) were
/// ~0.8 million, a fifth of the write connection's CPU while a campaign ran (issue 25,
/// D-084). Anonymous parameters are never in that list. `$` inside a quoted literal or name is
/// not a parameter.
pub(crate) fn positional<'a>(
    conn: &sqlx::AnyConnection,
    sql: &'a str,
) -> std::borrow::Cow<'a, str> {
    if conn.backend_name() != "SQLite" {
        return std::borrow::Cow::Borrowed(sql);
    }
    match anonymous_parameters(sql) {
        Some(text) => std::borrow::Cow::Owned(text),
        None => std::borrow::Cow::Borrowed(sql),
    }
}

/// `sql` with `$1 … $n` replaced by `?` when they appear in that order, each once (outside
/// quotes); `None` when they do not, or when the text has no parameter or already has a `?`.
fn anonymous_parameters(sql: &str) -> Option<String> {
    let bytes = sql.as_bytes();
    let mut out = String::with_capacity(sql.len());
    let mut next = 1u64;
    let mut quote: Option<u8> = None;
    let mut i = 0;
    let mut copied = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(q) => {
                if b == q {
                    quote = None;
                }
                i += 1;
            }
            None if b == b'\'' || b == b'"' => {
                quote = Some(b);
                i += 1;
            }
            None if b == b'?' => return None,
            None if b == b'$' => {
                let digits = bytes[i + 1..]
                    .iter()
                    .take_while(|c| c.is_ascii_digit())
                    .count();
                if digits == 0 {
                    return None;
                }
                let n: u64 = sql[i + 1..i + 1 + digits].parse().ok()?;
                if n != next {
                    return None;
                }
                next += 1;
                out.push_str(&sql[copied..i]);
                out.push('?');
                i += 1 + digits;
                copied = i;
            }
            None => i += 1,
        }
    }
    if next == 1 {
        return None;
    }
    out.push_str(&sql[copied..]);
    Some(out)
}

#[cfg(test)]
mod unavailable_tests {
    use super::unavailable_code;

    #[test]
    fn codes_of_a_database_away_or_full() {
        for c in [
            "08006", "08001", "57P01", "57P03", "53300", "53100", "5", "517", "6", "8", "13",
            "778", "14",
        ] {
            assert!(unavailable_code(c), "{c}");
        }
        for c in ["23505", "40001", "42P01", "22P02", "19", "2067", "1", "11"] {
            assert!(!unavailable_code(c), "{c}");
        }
    }

    fn cipher() -> crate::Cipher {
        crate::Cipher::from_base64(&crate::Cipher::generate_key_base64()).unwrap()
    }

    /// Issue 53: a database file that can no longer be written (here opened read-only, as a
    /// filesystem remounted read-only leaves it) refuses writes with an error the API
    /// answers 503 `database_unavailable`, and still serves reads.
    #[tokio::test]
    async fn a_read_only_file_is_unavailable_for_writes_and_served_for_reads() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _, _) = crate::test_support::store_with_channel(dir.path()).await;
        store.close().await;
        let url = format!("sqlite://{}?mode=ro", dir.path().join("t.db").display());
        let ro = crate::Store::connect(&url, cipher()).await.unwrap();
        assert_eq!(ro.count_accounts().await.unwrap(), 1, "a read");
        let e = ro.ensure_account("outra").await.unwrap_err();
        assert!(e.is_unavailable(), "{e:?}");
    }
}

#[cfg(test)]
mod positional_tests {
    use super::anonymous_parameters as anon;

    #[test]
    fn parameters_in_order_become_anonymous() {
        assert_eq!(
            anon("INSERT INTO t (a, b) VALUES ($1, 'x$9'), ($2, $3)").as_deref(),
            Some("INSERT INTO t (a, b) VALUES (?, 'x$9'), (?, ?)")
        );
        assert_eq!(
            anon("SELECT 1 WHERE a IN ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)").as_deref(),
            Some("SELECT 1 WHERE a IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        );
    }

    #[test]
    fn anything_else_is_left_as_written() {
        // Out of order, repeated, skipped, none, or a `?` already there.
        assert_eq!(anon("SELECT $2, $1"), None);
        assert_eq!(anon("SELECT $1, $1"), None);
        assert_eq!(anon("SELECT $1, $3"), None);
        assert_eq!(anon("SELECT 1"), None);
        assert_eq!(anon("SELECT $1, ?"), None);
        assert_eq!(anon("SELECT $x"), None);
        // A quoted `$` is text, not a parameter.
        assert_eq!(anon("SELECT '$2', $1").as_deref(), Some("SELECT '$2', ?"));
        assert_eq!(
            anon("SELECT \"$2\", $1").as_deref(),
            Some("SELECT \"$2\", ?")
        );
    }

    #[tokio::test]
    async fn a_sqlite_connection_binds_the_anonymous_text_in_order() {
        use sqlx::{Acquire, Row};
        let dir = tempfile::tempdir().unwrap();
        let (store, _, _) = crate::test_support::store_with_channel(dir.path()).await;
        let mut conn = store.pool.acquire().await.unwrap();
        let conn = conn.acquire().await.unwrap();
        let sql = "SELECT $1 || '-$9-' || $2 || $3 AS v";
        let text = super::positional(conn, sql);
        assert_eq!(text, "SELECT ? || '-$9-' || ? || ? AS v");
        let row = sqlx::query(&text)
            .bind("a")
            .bind("b")
            .bind("c")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        assert_eq!(row.get::<String, _>("v"), "a-$9-bc");
    }
}

/// Splits `items` into chunks whose lengths come from a fixed menu: `max` (a power of two)
/// and the powers of two below it, largest first. A multi-row statement's text depends on its
/// row count, and each text is compiled once per connection and kept in the connection's
/// statement cache: with the menu a statement family has at most log2(`max`) + 1 texts, so the
/// caches stay small whatever the batch sizes (memory flat with the audience, issue 6) and no
/// statement is compiled twice on a connection.
pub(crate) fn shaped_chunks<T>(items: &[T], max: usize) -> Vec<&[T]> {
    debug_assert!(max.is_power_of_two());
    let mut out = Vec::new();
    let mut rest = items;
    while !rest.is_empty() {
        let n = if rest.len() >= max {
            max
        } else {
            1 << (usize::BITS - 1 - rest.len().leading_zeros())
        };
        let (chunk, others) = rest.split_at(n);
        out.push(chunk);
        rest = others;
    }
    out
}

/// Splits `items` into chunks of `max` (a power of two) and pads the last one to the next
/// power of two by repeating its last item: every chunk's length is on the menu of
/// [`shaped_chunks`] (statement texts stay few), in one statement per `max` items instead of
/// one per power of two in the remainder. Only for statements where a repeated item changes
/// nothing: an `IN` list, or the values an `UPDATE … FROM` joins on (the row is updated once).
pub(crate) fn padded_chunks<T: Copy>(items: &[T], max: usize) -> Vec<Vec<T>> {
    debug_assert!(max.is_power_of_two());
    items
        .chunks(max)
        .map(|c| {
            let mut v = c.to_vec();
            let last = *c.last().expect("chunks are never empty");
            v.resize(c.len().next_power_of_two(), last);
            v
        })
        .collect()
}

#[cfg(test)]
mod shaped_chunks_tests {
    #[test]
    fn lengths_come_from_the_menu_and_cover_everything_in_order() {
        let v: Vec<u32> = (0..1000).collect();
        let chunks = super::shaped_chunks(&v, 256);
        let lens: Vec<usize> = chunks.iter().map(|c| c.len()).collect();
        assert_eq!(lens, vec![256, 256, 256, 128, 64, 32, 8]);
        assert_eq!(chunks.concat(), v);
        let padded = super::padded_chunks(&v, 256);
        let lens: Vec<usize> = padded.iter().map(|c| c.len()).collect();
        assert_eq!(lens, vec![256, 256, 256, 256]);
        assert_eq!(padded.concat()[..1000], v[..]);
        assert!(padded[3][232..].iter().all(|x| *x == 999));
        assert!(super::shaped_chunks::<u32>(&[], 8).is_empty());
        assert_eq!(super::shaped_chunks(&[1, 2, 3], 8).len(), 2);
    }
}

#[cfg(test)]
mod planner_tests {
    use super::{Cipher, Store, POSTGRES_RANDOM_PAGE_COST};

    async fn random_page_cost(store: &Store) -> String {
        sqlx::query_scalar("SELECT current_setting('random_page_cost')")
            .fetch_one(&store.pool)
            .await
            .unwrap()
    }

    /// On PostgreSQL (`DISPARO_TEST_POSTGRES_URL`, set by `.ci/run`) the gateway's connections
    /// price random reads at [`POSTGRES_RANDOM_PAGE_COST`] when nothing set a price, and keep
    /// the operator's own when the database sets one (D-095).
    #[tokio::test]
    async fn postgres_connections_price_index_reads_unless_the_operator_did() {
        let Ok(admin) = std::env::var("DISPARO_TEST_POSTGRES_URL") else {
            return;
        };
        sqlx::any::install_default_drivers();
        let name = format!("disparo_test_{}", rand::random::<u64>());
        let (base, _) = admin.rsplit_once('/').expect("a URL with a database");
        let url = format!("{base}/{name}");
        let admin_pool = sqlx::AnyPool::connect(&admin).await.unwrap();
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&admin_pool)
            .await
            .unwrap();
        let cipher = || Cipher::from_base64(&Cipher::generate_key_base64()).unwrap();

        let store = Store::connect(&url, cipher()).await.unwrap();
        assert_eq!(random_page_cost(&store).await, POSTGRES_RANDOM_PAGE_COST);
        store.pool.close().await;

        sqlx::query(&format!("ALTER DATABASE {name} SET random_page_cost = 3"))
            .execute(&admin_pool)
            .await
            .unwrap();
        let store = Store::connect(&url, cipher()).await.unwrap();
        assert_eq!(
            random_page_cost(&store).await,
            "3",
            "the database's own price"
        );
        store.pool.close().await;
        store.writer.close().await;

        sqlx::query(&format!("DROP DATABASE {name} WITH (FORCE)"))
            .execute(&admin_pool)
            .await
            .unwrap();
    }
}
