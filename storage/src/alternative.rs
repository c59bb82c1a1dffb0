//! Numbers of an alternative provider, referenced only (decision D-034): the channel row
//! (`official = 0`, `engine` = the provider's name, the sealed API key in `access_token_enc`),
//! the templates last read from its sender, each account's notification key and the
//! notifications received.

use crate::channels::{read, ChannelRecord, COLUMNS};
use crate::{now_ms, Result, StorageError, Store};
use engine::Secret;
use sqlx::Row;

/// A new number of an alternative provider.
#[derive(Debug, Clone)]
pub struct NewAlternativeChannel {
    /// Owning account.
    pub account_id: i64,
    /// Display name.
    pub name: String,
    /// Digits with country code.
    pub phone: String,
    /// Engine name (`360dialog`).
    pub engine: String,
    /// Base URL of the provider's API when not its default.
    pub provider_url: Option<String>,
    /// The provider's API key (sealed before it is written).
    pub api_key: Secret,
}

/// A template read from an alternative provider's sender.
#[derive(Debug, Clone)]
pub struct SenderTemplate {
    /// Name.
    pub name: String,
    /// Locale.
    pub language: String,
    /// `APPROVED`, `PENDING`…
    pub status: String,
    /// `MARKETING`, `UTILITY`, `AUTHENTICATION`.
    pub category: String,
    /// Components as the provider gave them (JSON array).
    pub components: serde_json::Value,
}

/// A notification received from an alternative provider.
#[derive(Debug, Clone)]
pub struct AlternativeNotification {
    /// Id.
    pub id: i64,
    /// Account it was addressed to, when known.
    pub account_id: Option<i64>,
    /// Channel it names, when found.
    pub channel_id: Option<i64>,
    /// `notify_url` or `fixed_url`.
    pub via: String,
    /// Raw body (JSON text).
    pub body: String,
    /// Received (ms).
    pub received_at: i64,
}

impl Store {
    /// Stores a number of an alternative provider (`status` WORKING, quality UNKNOWN). Its
    /// `phone_number_id` is `<engine>:<account>:<phone>`, so a phone is connected once per
    /// provider in an account; another account may reference the same phone (issue 15: the
    /// first account to register a phone no longer blocks, or receives, everyone else's).
    /// Errors: [`StorageError::Conflict`] when it already is in this account.
    pub async fn insert_alternative_channel(
        &self,
        c: &NewAlternativeChannel,
    ) -> Result<ChannelRecord> {
        let now = now_ms();
        let sql = format!(
            "INSERT INTO channels (account_id, name, phone, official, engine, status, quality, tier, phone_number_id, waba_id, verified_name, access_token_enc, app_secret_enc, verify_token, credential_valid, created_at, updated_at, last_sync_at, bm_id, warmup, daily_cap, provider_url) \
             VALUES ($1, $2, $3, 0, $4, 'WORKING', 'UNKNOWN', NULL, $5, '', $2, $6, NULL, $7, 1, $8, $8, NULL, NULL, 0, NULL, $9) RETURNING {COLUMNS}"
        );
        let mut tx = self.begin_write().await?;
        let res = sqlx::query(&sql)
            .bind(c.account_id)
            .bind(&c.name)
            .bind(&c.phone)
            .bind(&c.engine)
            .bind(format!("{}:{}:{}", c.engine, c.account_id, c.phone))
            .bind("")
            .bind(crate::webhooks::new_signing_secret().expose().to_string())
            .bind(now)
            .bind(&c.provider_url)
            .fetch_one(&mut *tx)
            .await;
        let record = match res {
            Ok(row) => read(&row)?,
            Err(e) if StorageError::is_unique_violation(&e) => {
                return Err(StorageError::Conflict(format!(
                    "{} is already connected through {}",
                    c.phone, c.engine
                )))
            }
            Err(e) => return Err(e.into()),
        };
        // The API key is sealed for the row's id (D-052), in the same transaction.
        self.write_channel_secrets(&mut tx, record.id, Some(&c.api_key), None)
            .await?;
        tx.commit().await?;
        Ok(record)
    }

    /// Replaces the templates of an alternative provider's number with what its sender has
    /// now, and stamps the channel's `last_sync_at`.
    pub async fn replace_sender_templates(
        &self,
        channel_id: i64,
        templates: &[SenderTemplate],
    ) -> Result<()> {
        let now = now_ms();
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM channel_sender_templates WHERE channel_id = $1")
            .bind(channel_id)
            .execute(&mut *tx)
            .await?;
        for t in templates {
            // A sender may list a name/language twice (versions): the last one wins.
            sqlx::query(
                "INSERT INTO channel_sender_templates (channel_id, name, language, status, category, components, synced_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) \
                 ON CONFLICT (channel_id, name, language) DO UPDATE SET status = excluded.status, category = excluded.category, components = excluded.components",
            )
            .bind(channel_id)
            .bind(&t.name)
            .bind(&t.language)
            .bind(&t.status)
            .bind(&t.category)
            .bind(t.components.to_string())
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query("UPDATE channels SET last_sync_at = $1, updated_at = $1 WHERE id = $2")
            .bind(now)
            .bind(channel_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The templates last read from an alternative provider's sender, by name and language.
    pub async fn sender_templates(&self, channel_id: i64) -> Result<Vec<SenderTemplate>> {
        let rows = sqlx::query(
            "SELECT name, language, status, category, components FROM channel_sender_templates \
             WHERE channel_id = $1 ORDER BY name, language",
        )
        .bind(channel_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let components: String = r.try_get("components")?;
                Ok(SenderTemplate {
                    name: r.try_get("name")?,
                    language: r.try_get("language")?,
                    status: r.try_get("status")?,
                    category: r.try_get("category")?,
                    components: serde_json::from_str(&components)
                        .unwrap_or(serde_json::Value::Null),
                })
            })
            .collect()
    }

    /// The account's notification key (the last segment of its `notify_url`), created on
    /// first use: 32 random characters.
    pub async fn alternative_notify_key(&self, account_id: i64) -> Result<String> {
        let existing =
            sqlx::query("SELECT notify_key FROM alternative_notify_keys WHERE account_id = $1")
                .bind(account_id)
                .fetch_optional(&self.pool)
                .await?;
        if let Some(row) = existing {
            return Ok(row.try_get("notify_key")?);
        }
        let fresh = crate::webhooks::new_signing_secret()
            .expose()
            .trim_start_matches("whsec_")
            .to_string();
        // Two first requests may race: the first insert wins, both read it back.
        sqlx::query(
            "INSERT INTO alternative_notify_keys (account_id, notify_key, created_at) VALUES ($1, $2, $3) \
             ON CONFLICT (account_id) DO NOTHING",
        )
        .bind(account_id)
        .bind(&fresh)
        .bind(now_ms())
        .execute(&self.writer)
        .await?;
        let row =
            sqlx::query("SELECT notify_key FROM alternative_notify_keys WHERE account_id = $1")
                .bind(account_id)
                .fetch_one(&self.writer)
                .await?;
        Ok(row.try_get("notify_key")?)
    }

    /// The account of a notification key.
    pub async fn account_by_notify_key(&self, key: &str) -> Result<Option<i64>> {
        let row =
            sqlx::query("SELECT account_id FROM alternative_notify_keys WHERE notify_key = $1")
                .bind(key)
                .fetch_optional(&self.pool)
                .await?;
        Ok(match row {
            Some(r) => Some(r.try_get("account_id")?),
            None => None,
        })
    }

    /// The numbers of an alternative provider with this phone (digits), within `account_id`
    /// when given (at most two are read: enough to tell one owner from several).
    pub async fn alternative_channels_by_phone(
        &self,
        phone: &str,
        account_id: Option<i64>,
    ) -> Result<Vec<ChannelRecord>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM channels WHERE official = 0 AND phone = $1 AND ($2 = 0 OR account_id = $2) ORDER BY id LIMIT 2"
        );
        let rows = sqlx::query(&sql)
            .bind(phone)
            .bind(account_id.unwrap_or(0))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(read).collect()
    }

    /// Records a notification received from an alternative provider; returns its id.
    pub async fn record_alternative_notification(
        &self,
        account_id: Option<i64>,
        channel_id: Option<i64>,
        via: &str,
        body: &str,
    ) -> Result<i64> {
        let row = sqlx::query(
            "INSERT INTO alternative_notifications (account_id, channel_id, via, body, received_at) \
             VALUES ($1, $2, $3, $4, $5) RETURNING id",
        )
        .bind(account_id)
        .bind(channel_id)
        .bind(via)
        .bind(body)
        .bind(now_ms())
        .fetch_one(&self.writer)
        .await?;
        Ok(row.try_get("id")?)
    }

    /// The account's latest notifications from alternative providers, newest first.
    pub async fn alternative_notifications(
        &self,
        account_id: i64,
        limit: i64,
    ) -> Result<Vec<AlternativeNotification>> {
        let rows = sqlx::query(
            "SELECT id, account_id, channel_id, via, body, received_at FROM alternative_notifications \
             WHERE account_id = $1 ORDER BY id DESC LIMIT $2",
        )
        .bind(account_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(AlternativeNotification {
                    id: r.try_get("id")?,
                    account_id: r.try_get("account_id")?,
                    channel_id: r.try_get("channel_id")?,
                    via: r.try_get("via")?,
                    body: r.try_get("body")?,
                    received_at: r.try_get("received_at")?,
                })
            })
            .collect()
    }
}
