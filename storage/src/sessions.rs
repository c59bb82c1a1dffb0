//! Process sessions (issue 50, D-100): each `disparo serve` process on a database registers a
//! session at boot and renews its heartbeat every [`HEARTBEAT_EVERY_MS`]; a session whose
//! heartbeat is older than the TTL ([`DEFAULT_SESSION_TTL_MS`], `DISPARO_NODE_TTL_MS`), or
//! that ended, is gone. What a process holds carries its session: claimed campaign recipients
//! (`claim_session`), pending idempotency keys (`session_id`), webhook subscriptions it
//! delivers (`lease_session`, `lease_until`). A booting process, and every live one from time
//! to time, recovers only what gone sessions left, never what a live peer holds. Times are on
//! the database's clock on PostgreSQL (processes on several machines), on this process's on
//! SQLite (one machine).

use crate::{now_ms, Backend, Result, Store};
use sqlx::Row;
use std::sync::atomic::{AtomicI64, Ordering};

/// How often a process renews its heartbeat, ms.
pub const HEARTBEAT_EVERY_MS: u64 = 1_000;

/// How long a session lives without a heartbeat, ms (ten missed heartbeats).
pub const DEFAULT_SESSION_TTL_MS: i64 = 10_000;

/// This process's session id (0 before [`Store::register_session`]) and the TTL.
#[derive(Debug)]
pub(crate) struct SessionState {
    id: AtomicI64,
    ttl_ms: AtomicI64,
}

impl Default for SessionState {
    fn default() -> Self {
        Self {
            id: AtomicI64::new(0),
            ttl_ms: AtomicI64::new(DEFAULT_SESSION_TTL_MS),
        }
    }
}

/// What [`Store::recover_gone_sessions`] resolved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Idempotency keys of gone sessions bound to a message: now in doubt (a retry answers
    /// with that message).
    pub keys_in_doubt: u64,
    /// Idempotency keys of gone sessions with no message: released (nothing was sent).
    pub keys_released: u64,
}

impl Store {
    /// Registers this process's session (`node` names it in logs and tables: host and pid) and
    /// returns its id. Called once at boot, before anything is claimed.
    pub async fn register_session(&self, node: &str, ttl_ms: i64) -> Result<i64> {
        self.session.ttl_ms.store(ttl_ms.max(1), Ordering::Relaxed);
        let now = self.db_now_ms().await?;
        let row = sqlx::query(
            "INSERT INTO node_sessions (node, started_at, heartbeat_at) VALUES ($1, $2, $2) RETURNING id",
        )
        .bind(node)
        .bind(now)
        .fetch_one(&self.writer)
        .await?;
        let id: i64 = row.try_get("id")?;
        self.session.id.store(id, Ordering::Relaxed);
        Ok(id)
    }

    /// This process's session id; 0 before [`Store::register_session`] (tools and tests that
    /// use the store alone: nothing of theirs is ever recovered from under them by a peer, as
    /// no live session is 0).
    pub fn session_id(&self) -> i64 {
        self.session.id.load(Ordering::Relaxed)
    }

    /// The session TTL, ms.
    pub fn session_ttl_ms(&self) -> i64 {
        self.session.ttl_ms.load(Ordering::Relaxed)
    }

    /// Renews this session's heartbeat. Errors: the database's.
    pub async fn heartbeat(&self) -> Result<()> {
        let sql = format!(
            "UPDATE node_sessions SET heartbeat_at = {} WHERE id = $1",
            self.now_sql()
        );
        sqlx::query(&sql)
            .bind(self.session_id())
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Ends this session at a graceful stop: its subscriptions' and cells' leases are released
    /// (a live peer delivers and sends them at once) and the session counts as gone (a peer recovers what it
    /// left without waiting for the TTL).
    pub async fn end_session(&self) -> Result<()> {
        let me = self.session_id();
        sqlx::query(
            "UPDATE webhook_subscriptions SET lease_session = NULL, lease_until = NULL WHERE lease_session = $1",
        )
        .bind(me)
        .execute(&self.writer)
        .await?;
        self.release_all_leases().await?;
        let sql = format!(
            "UPDATE node_sessions SET ended_at = {} WHERE id = $1",
            self.now_sql()
        );
        sqlx::query(&sql).bind(me).execute(&self.writer).await?;
        Ok(())
    }

    /// How many live sessions other than this one the database has.
    pub async fn other_live_sessions(&self) -> Result<i64> {
        let sql = format!(
            "SELECT COUNT(*) AS n FROM node_sessions WHERE id <> $1 AND id IN {}",
            self.live_sessions_sql()
        );
        let row = sqlx::query(&sql)
            .bind(self.session_id())
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get("n")?)
    }

    /// Resolves the idempotency keys that gone sessions (and processes from before sessions)
    /// left `pending`: a key bound to a message is in doubt, one without is released (nothing
    /// was written, so nothing was sent). Keys of live sessions are theirs. Run at boot and
    /// from time to time by every process.
    pub async fn recover_gone_sessions(&self) -> Result<Recovered> {
        let gone = format!(
            "(session_id IS NULL OR session_id NOT IN {})",
            self.live_sessions_sql()
        );
        let keys_in_doubt = sqlx::query(&format!(
            "UPDATE idempotency_keys SET state = 'in_doubt' WHERE state = 'pending' AND message_id IS NOT NULL AND {gone}"
        ))
        .execute(&self.writer)
        .await?
        .rows_affected();
        let keys_released = sqlx::query(&format!(
            "DELETE FROM idempotency_keys WHERE state = 'pending' AND {gone}"
        ))
        .execute(&self.writer)
        .await?
        .rows_affected();
        Ok(Recovered {
            keys_in_doubt,
            keys_released,
        })
    }

    /// Removes sessions gone for a day (their rows hold nothing any more).
    pub async fn purge_sessions(&self) -> Result<u64> {
        let sql = format!(
            "DELETE FROM node_sessions WHERE heartbeat_at < {} - $1",
            self.now_sql()
        );
        Ok(sqlx::query(&sql)
            .bind(engine::DAY_MS)
            .execute(&self.writer)
            .await?
            .rows_affected())
    }

    /// The database's clock, ms (this process's on SQLite).
    pub async fn db_now_ms(&self) -> Result<i64> {
        if self.backend == Backend::Sqlite {
            return Ok(now_ms());
        }
        let row = sqlx::query(&format!("SELECT {} AS t", self.now_sql()))
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get("t")?)
    }

    /// An SQL expression for "now" in ms: PostgreSQL's clock there (every process reads the
    /// same clock), SQLite's (this machine's) on SQLite.
    pub(crate) fn now_sql(&self) -> &'static str {
        now_sql_of(self.backend)
    }

    /// A parenthesised subquery of the live sessions' ids, for `… IN (…)` (no parameters:
    /// the TTL is this process's setting, written into the text).
    pub(crate) fn live_sessions_sql(&self) -> String {
        format!(
            "(SELECT id FROM node_sessions WHERE ended_at IS NULL AND heartbeat_at > {} - {})",
            self.now_sql(),
            self.session_ttl_ms()
        )
    }

    /// A condition on `column` (a session id): the session is this one, is gone, or is
    /// unknown (NULL: from before sessions) — what this process may take over.
    pub(crate) fn mine_or_gone_sql(&self, column: &str) -> String {
        format!(
            "({column} IS NULL OR {column} = {} OR {column} NOT IN {})",
            self.session_id(),
            self.live_sessions_sql()
        )
    }
}

/// An SQL expression for "now" in ms on `backend` ([`crate::Store::now_sql`]).
pub(crate) fn now_sql_of(backend: Backend) -> &'static str {
    match backend {
        Backend::Postgres => "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
        Backend::Sqlite => "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
    }
}
