//! The public sender's records (issue 22, D-060): per-user API tokens (`pub_…`, stored as
//! SHA-256 hashes), the link from a message to the user who sent it, and the reads the
//! number choice needs.

use crate::panel::UserRecord;
use crate::{now_ms, Result, StorageError, Store};
use engine::token::{display_prefix, hash_token};
use engine::Secret;
use rand::Rng;
use sqlx::Row;
use std::collections::HashMap;

/// Prefix of the public sender's tokens (distinct from account tokens, `svc_`).
pub const SENDER_TOKEN_PREFIX: &str = "pub_";

/// Whether `value` has the shape of a sender token (`pub_` + 40 alphanumerics).
pub fn looks_like_sender_token(value: &str) -> bool {
    value
        .strip_prefix(SENDER_TOKEN_PREFIX)
        .is_some_and(|rest| rest.len() == 40 && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// A sender token as listings show it (never the value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SenderTokenRecord {
    /// Id.
    pub id: i64,
    /// The user it sends as.
    pub user_id: i64,
    /// Display prefix (`pub_AbCd`).
    pub prefix: String,
    /// Created, ms.
    pub created_at: i64,
    /// Revoked, ms.
    pub revoked_at: Option<i64>,
}

/// A token the sender just resolved: its id and its (active) user.
#[derive(Debug, Clone)]
pub struct SenderCaller {
    /// Token id.
    pub token_id: i64,
    /// The user.
    pub user: UserRecord,
    /// The account's slug.
    pub account_slug: String,
}

impl Store {
    /// Generates a user's sender token, revoking the ones it had (one active token per user).
    /// Returns the value (shown once) and its record.
    pub async fn rotate_sender_token(
        &self,
        account_id: i64,
        user_id: i64,
        created_by: i64,
    ) -> Result<(Secret, SenderTokenRecord)> {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let value: String = {
            let mut rng = rand::thread_rng();
            let body: String = (0..40)
                .map(|_| char::from(ALPHABET[rng.gen_range(0..ALPHABET.len())]))
                .collect();
            format!("{SENDER_TOKEN_PREFIX}{body}")
        };
        let now = now_ms();
        let mut tx = self.begin_write().await?;
        let exists = sqlx::query("SELECT id FROM users WHERE id = $1 AND account_id = $2")
            .bind(user_id)
            .bind(account_id)
            .fetch_optional(&mut *tx)
            .await?;
        if exists.is_none() {
            return Err(StorageError::NotFound);
        }
        sqlx::query(
            "UPDATE user_api_tokens SET revoked_at = $2 WHERE user_id = $1 AND revoked_at IS NULL",
        )
        .bind(user_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let prefix = display_prefix(&value);
        let id: i64 = sqlx::query(
            "INSERT INTO user_api_tokens (account_id, user_id, prefix, token_hash, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        )
        .bind(account_id)
        .bind(user_id)
        .bind(&prefix)
        .bind(hash_token(&value))
        .bind(created_by)
        .bind(now)
        .fetch_one(&mut *tx)
        .await?
        .try_get("id")?;
        tx.commit().await?;
        Ok((
            Secret::new(value),
            SenderTokenRecord {
                id,
                user_id,
                prefix,
                created_at: now,
                revoked_at: None,
            },
        ))
    }

    /// A user's sender tokens, newest first.
    pub async fn sender_tokens(
        &self,
        account_id: i64,
        user_id: i64,
    ) -> Result<Vec<SenderTokenRecord>> {
        let rows = sqlx::query(
            "SELECT id, user_id, prefix, created_at, revoked_at FROM user_api_tokens WHERE account_id = $1 AND user_id = $2 ORDER BY id DESC",
        )
        .bind(account_id)
        .bind(user_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(SenderTokenRecord {
                    id: r.try_get("id")?,
                    user_id: r.try_get("user_id")?,
                    prefix: r.try_get("prefix")?,
                    created_at: r.try_get("created_at")?,
                    revoked_at: r.try_get("revoked_at")?,
                })
            })
            .collect()
    }

    /// Revokes a user's active sender token; NotFound when it has none.
    pub async fn revoke_sender_token(&self, account_id: i64, user_id: i64) -> Result<()> {
        let n = sqlx::query(
            "UPDATE user_api_tokens SET revoked_at = $3 WHERE account_id = $1 AND user_id = $2 AND revoked_at IS NULL",
        )
        .bind(account_id)
        .bind(user_id)
        .bind(now_ms())
        .execute(&self.writer)
        .await?
        .rows_affected();
        if n == 0 {
            return Err(StorageError::NotFound);
        }
        Ok(())
    }

    /// Resolves a sender token: `None` when unknown, revoked, or its user disabled.
    pub async fn authenticate_sender_token(&self, value: &str) -> Result<Option<SenderCaller>> {
        let sql = "SELECT t.id AS token_id, a.slug, u.id, u.account_id, u.email, u.name, u.role, u.status, u.client_id, u.bm_scope, u.created_at, u.updated_at \
             FROM user_api_tokens t JOIN users u ON u.id = t.user_id JOIN accounts a ON a.id = u.account_id \
             WHERE t.token_hash = $1 AND t.revoked_at IS NULL AND u.status = 'active'";
        let Some(row) = sqlx::query(sql)
            .bind(hash_token(value))
            .fetch_optional(&self.pool)
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(SenderCaller {
            token_id: row.try_get("token_id")?,
            user: crate::panel::read_user(&row)?,
            account_slug: row.try_get("slug")?,
        }))
    }

    /// Records that `user_id` sent `message_id` with token `token_id`.
    pub async fn link_sender_message(
        &self,
        message_id: i64,
        user_id: i64,
        token_id: i64,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO sender_messages (message_id, user_id, token_id, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (message_id) DO NOTHING",
        )
        .bind(message_id)
        .bind(user_id)
        .bind(token_id)
        .bind(now_ms())
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Whether `user_id` sent `message_id` through the public sender.
    pub async fn sent_by_user(&self, message_id: i64, user_id: i64) -> Result<bool> {
        Ok(sqlx::query(
            "SELECT message_id FROM sender_messages WHERE message_id = $1 AND user_id = $2",
        )
        .bind(message_id)
        .bind(user_id)
        .fetch_optional(&self.pool)
        .await?
        .is_some())
    }

    /// Outbound messages per channel of the account since `since` (ms).
    pub async fn outbound_counts_since(
        &self,
        account_id: i64,
        since: i64,
    ) -> Result<HashMap<i64, i64>> {
        let rows = sqlx::query(
            "SELECT channel_id, COUNT(*) AS n FROM messages WHERE account_id = $1 AND direction = 'out' AND created_at >= $2 GROUP BY channel_id",
        )
        .bind(account_id)
        .bind(since)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("channel_id")?, r.try_get("n")?)))
            .collect()
    }

    /// When each channel of the account last wrote to `phone` (ms).
    pub async fn last_outbound_to(
        &self,
        account_id: i64,
        phone: &str,
    ) -> Result<HashMap<i64, i64>> {
        let rows = sqlx::query(
            "SELECT channel_id, MAX(created_at) AS at FROM messages WHERE account_id = $1 AND contact_phone = $2 AND direction = 'out' AND status <> 'failed' GROUP BY channel_id",
        )
        .bind(account_id)
        .bind(phone)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("channel_id")?, r.try_get("at")?)))
            .collect()
    }
}
