//! Idempotency keys (`Idempotency-Key` on `POST /messages`): the first answer to a key is kept
//! for 24 hours and replayed; a request still in progress is not run twice.

use crate::{now_ms, Result, Store};
use sqlx::Row;

/// How long a key is remembered, ms.
pub const IDEMPOTENCY_TTL_MS: i64 = engine::DAY_MS;

/// What to do with a request carrying a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdempotencyBegin {
    /// First time: run it, then [`Store::idempotency_finish`].
    New,
    /// Already answered: replay this status and body.
    Replay {
        /// HTTP status.
        status: u16,
        /// JSON body.
        body: String,
    },
    /// The first request with this key sent a message whose outcome is unknown (provider
    /// timeout, the caller's wait ran out, a crash): answer with that message as it stands.
    InDoubt {
        /// The message the key is bound to.
        message_id: i64,
    },
    /// The first request with this key has not finished yet.
    InProgress,
    /// The key was used with a different request body.
    Mismatch,
}

impl Store {
    /// Claims `key` for a request whose body hashes to `request_hash`.
    pub async fn idempotency_begin(
        &self,
        account_id: i64,
        key: &str,
        request_hash: &str,
    ) -> Result<IdempotencyBegin> {
        let now = now_ms();
        sqlx::query("DELETE FROM idempotency_keys WHERE account_id = $1 AND idem_key = $2 AND created_at < $3")
            .bind(account_id)
            .bind(key)
            .bind(now - IDEMPOTENCY_TTL_MS)
            .execute(&self.writer)
            .await?;
        let inserted = sqlx::query(
            "INSERT INTO idempotency_keys (account_id, idem_key, request_hash, state, created_at, session_id) VALUES ($1, $2, $3, 'pending', $4, $5) \
             ON CONFLICT (account_id, idem_key) DO NOTHING",
        )
        .bind(account_id)
        .bind(key)
        .bind(request_hash)
        .bind(now)
        .bind(self.session_id())
        .execute(&self.writer)
        .await?
        .rows_affected();
        if inserted == 1 {
            return Ok(IdempotencyBegin::New);
        }
        let row = sqlx::query("SELECT request_hash, state, response_status, response_body, message_id FROM idempotency_keys WHERE account_id = $1 AND idem_key = $2")
            .bind(account_id)
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else {
            // Expired and removed between the two statements: claim it again.
            return Box::pin(self.idempotency_begin(account_id, key, request_hash)).await;
        };
        let hash: String = row.try_get("request_hash")?;
        if hash != request_hash {
            return Ok(IdempotencyBegin::Mismatch);
        }
        let state: String = row.try_get("state")?;
        let message_id: Option<i64> = row.try_get("message_id")?;
        match (state.as_str(), message_id) {
            ("done", _) => {}
            ("in_doubt", Some(message_id)) => return Ok(IdempotencyBegin::InDoubt { message_id }),
            _ => return Ok(IdempotencyBegin::InProgress),
        }
        let status: Option<i64> = row.try_get("response_status")?;
        let body: Option<String> = row.try_get("response_body")?;
        Ok(IdempotencyBegin::Replay {
            status: status.unwrap_or(200) as u16,
            body: body.unwrap_or_default(),
        })
    }

    /// Stores the answer of a claimed key.
    pub async fn idempotency_finish(
        &self,
        account_id: i64,
        key: &str,
        status: u16,
        body: &str,
    ) -> Result<()> {
        sqlx::query("UPDATE idempotency_keys SET state = 'done', response_status = $3, response_body = $4 WHERE account_id = $1 AND idem_key = $2")
            .bind(account_id)
            .bind(key)
            .bind(status as i64)
            .bind(body)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Marks a claimed key in doubt when a message is bound to it (its send's outcome is
    /// unknown) and returns that message's id; `None` when no message was written for it.
    pub async fn idempotency_in_doubt(&self, account_id: i64, key: &str) -> Result<Option<i64>> {
        let row = sqlx::query(
            "UPDATE idempotency_keys SET state = 'in_doubt' WHERE account_id = $1 AND idem_key = $2 \
             AND state = 'pending' AND message_id IS NOT NULL RETURNING message_id",
        )
        .bind(account_id)
        .bind(key)
        .fetch_optional(&self.writer)
        .await?;
        Ok(match row {
            Some(r) => r.try_get("message_id")?,
            None => None,
        })
    }

    /// Releases a claimed key without an answer (the request failed in a way a retry may
    /// fix: 5xx, provider unavailable, a definite refusal), so a retry with the same key runs
    /// again.
    pub async fn idempotency_abandon(&self, account_id: i64, key: &str) -> Result<()> {
        sqlx::query("DELETE FROM idempotency_keys WHERE account_id = $1 AND idem_key = $2 AND state = 'pending'")
            .bind(account_id)
            .bind(key)
            .execute(&self.writer)
            .await?;
        Ok(())
    }
}
