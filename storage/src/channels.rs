//! Channels: connected numbers, their provider ids and sealed credentials.

use crate::{found, now_ms, Result, StorageError, Store};
use engine::ids::{AccountId, ChannelId};
use engine::Secret;
use sqlx::any::AnyRow;
use sqlx::Row;

/// A stored channel, without its secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelRecord {
    /// Id.
    pub id: i64,
    /// Owning account.
    pub account_id: i64,
    /// Display name.
    pub name: String,
    /// Digits with country code.
    pub phone: String,
    /// True for Cloud API numbers.
    pub official: bool,
    /// `cloud_api`.
    pub engine: String,
    /// `WORKING`, `PENDING`, `DISCONNECTED`.
    pub status: String,
    /// `GREEN`, `YELLOW`, `RED`, `UNKNOWN`.
    pub quality: String,
    /// Provider tier string, when known.
    pub tier: Option<String>,
    /// Provider phone number id (unique).
    pub phone_number_id: String,
    /// Provider WABA id.
    pub waba_id: String,
    /// Provider display name.
    pub verified_name: String,
    /// Verify token of this channel's own webhook receiver.
    pub verify_token: String,
    /// Whether the credential worked the last time it was used.
    pub credential_valid: bool,
    /// Created, ms.
    pub created_at: i64,
    /// Updated, ms.
    pub updated_at: i64,
    /// Last read of the number at the provider, ms.
    pub last_sync_at: Option<i64>,
    /// The BM (business portfolio) of its WABA, when known.
    pub bm_id: Option<i64>,
    /// Business-initiated sends are locked by a payment problem until this time, ms.
    pub payment_locked_until: Option<i64>,
    /// Base URL of an alternative provider's API (D-034); `None` on Cloud API numbers and for
    /// the provider's default.
    pub provider_url: Option<String>,
    /// The sending group it belongs to (D-037).
    pub group_id: Option<i64>,
    /// The client this number serves (panel; the WABA's and then the BM's client apply when
    /// unset, D-054).
    pub client_id: Option<i64>,
    /// The profile picture's URL at the provider, from the last sync or upload.
    pub photo_url: Option<String>,
    /// The provider's throughput for the number, messages/s (issue 25); `None` until read.
    pub throughput_mps: Option<i64>,
    /// When the provider sent the quality reading it holds, ms (issue 46); `None` before one.
    pub quality_event_at: Option<i64>,
}

/// A channel's decrypted credentials.
#[derive(Debug, Clone)]
pub struct ChannelSecrets {
    /// Graph access token.
    pub access_token: Secret,
    /// App secret that signs this number's webhooks; `None` = use `PROVIDER_APP_SECRET`.
    pub app_secret: Option<Secret>,
}

/// What is needed to store a new channel.
#[derive(Debug, Clone)]
pub struct NewChannel {
    /// Owning account.
    pub account_id: i64,
    /// Display name.
    pub name: String,
    /// Digits with country code.
    pub phone: String,
    /// Provider phone number id.
    pub phone_number_id: String,
    /// Provider WABA id.
    pub waba_id: String,
    /// Provider display name.
    pub verified_name: String,
    /// `WORKING`…
    pub status: String,
    /// Quality rating.
    pub quality: String,
    /// Tier string.
    pub tier: Option<String>,
    /// Access token (sealed before it is written).
    pub access_token: Secret,
    /// App secret (sealed before it is written).
    pub app_secret: Option<Secret>,
    /// Verify token for the channel's receiver.
    pub verify_token: String,
    /// The BM of its WABA, when known.
    pub bm_id: Option<i64>,
}

pub(crate) const COLUMNS: &str = "id, account_id, name, phone, official, engine, status, quality, tier, phone_number_id, waba_id, verified_name, verify_token, credential_valid, created_at, updated_at, last_sync_at, bm_id, payment_locked_until, provider_url, group_id, client_id, photo_url, throughput_mps, quality_event_at";

pub(crate) fn read(row: &AnyRow) -> Result<ChannelRecord> {
    Ok(ChannelRecord {
        id: row.try_get("id")?,
        account_id: row.try_get("account_id")?,
        name: row.try_get("name")?,
        phone: row.try_get("phone")?,
        official: row.try_get::<i64, _>("official")? != 0,
        engine: row.try_get("engine")?,
        status: row.try_get("status")?,
        quality: row.try_get("quality")?,
        tier: row.try_get("tier")?,
        phone_number_id: row.try_get("phone_number_id")?,
        waba_id: row.try_get("waba_id")?,
        verified_name: row.try_get("verified_name")?,
        verify_token: row.try_get("verify_token")?,
        credential_valid: row.try_get::<i64, _>("credential_valid")? != 0,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        last_sync_at: row.try_get("last_sync_at")?,
        bm_id: row.try_get("bm_id")?,
        payment_locked_until: row.try_get("payment_locked_until")?,
        provider_url: row.try_get("provider_url")?,
        group_id: row.try_get("group_id")?,
        client_id: row.try_get("client_id")?,
        photo_url: row.try_get("photo_url")?,
        throughput_mps: row.try_get("throughput_mps")?,
        quality_event_at: row.try_get("quality_event_at")?,
    })
}

impl Store {
    /// Records the number's provider throughput, messages/s (issue 25).
    pub async fn set_channel_throughput(&self, id: i64, mps: i64) -> Result<()> {
        sqlx::query("UPDATE channels SET throughput_mps = $2 WHERE id = $1")
            .bind(id)
            .bind(mps)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Stores a new channel. Errors: [`StorageError::Conflict`] when the phone number id is
    /// already connected.
    pub async fn insert_channel(&self, c: &NewChannel) -> Result<ChannelRecord> {
        let now = now_ms();
        let sql = format!(
                        "INSERT INTO channels (account_id, name, phone, official, engine, status, quality, tier, phone_number_id, waba_id, verified_name, access_token_enc, app_secret_enc, verify_token, credential_valid, created_at, updated_at, last_sync_at, bm_id, warmup) \
             VALUES ($1, $2, $3, 1, 'cloud_api', $4, $5, $6, $7, $8, $9, $10, $11, $12, 1, $13, $13, $13, $14, $15) RETURNING {COLUMNS}"
        );
        // Secrets are sealed for the row's id (D-052): inserted blank, then written in the
        // same transaction.
        let mut tx = self.begin_write().await?;
        let res = sqlx::query(&sql)
            .bind(c.account_id)
            .bind(&c.name)
            .bind(&c.phone)
            .bind(&c.status)
            .bind(&c.quality)
            .bind(&c.tier)
            .bind(&c.phone_number_id)
            .bind(&c.waba_id)
            .bind(&c.verified_name)
            .bind("")
            .bind(None::<String>)
            .bind(&c.verify_token)
            .bind(now)
            .bind(c.bm_id)
            .bind(i64::from(engine::guardrail::warmup_by_default(
                c.tier.as_deref(),
            )))
            .fetch_one(&mut *tx)
            .await;
        let record = match res {
            Ok(row) => read(&row)?,
            Err(e) if StorageError::is_unique_violation(&e) => {
                return Err(StorageError::Conflict(format!(
                    "phone_number_id {} is already connected",
                    c.phone_number_id
                )))
            }
            Err(e) => return Err(e.into()),
        };
        self.write_channel_secrets(
            &mut tx,
            record.id,
            Some(&c.access_token),
            c.app_secret.as_ref(),
        )
        .await?;
        tx.commit().await?;
        Ok(record)
    }

    /// Writes a channel's sealed access token and app secret (`None` keeps the stored one),
    /// each bound to the row (D-052).
    pub(crate) async fn write_channel_secrets(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        id: i64,
        access_token: Option<&Secret>,
        app_secret: Option<&Secret>,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE channels SET access_token_enc = COALESCE($2, access_token_enc), app_secret_enc = COALESCE($3, app_secret_enc) WHERE id = $1",
        )
        .bind(id)
        .bind(access_token.map(|t| self.cipher.seal(t, "channels", "access_token_enc", id)))
        .bind(app_secret.map(|t| self.cipher.seal(t, "channels", "app_secret_enc", id)))
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// A channel of this account. Errors: `NotFound` for a channel of another account.
    pub async fn channel(&self, account: AccountId, id: ChannelId) -> Result<ChannelRecord> {
        let sql = format!("SELECT {COLUMNS} FROM channels WHERE id = $1 AND account_id = $2");
        let row = sqlx::query(&sql)
            .bind(id.get())
            .bind(account.get())
            .fetch_optional(&self.pool)
            .await?;
        found(row, read)
    }

    /// Any channel by id, whatever its account: for the channel's own actor and for the
    /// provider-facing receiver, which are not account-scoped.
    pub async fn channel_unscoped(&self, id: i64) -> Result<ChannelRecord> {
        let sql = format!("SELECT {COLUMNS} FROM channels WHERE id = $1");
        let row = sqlx::query(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        found(row, read)
    }

    /// The account's channels, oldest first.
    pub async fn list_channels(&self, account_id: i64) -> Result<Vec<ChannelRecord>> {
        let sql = format!("SELECT {COLUMNS} FROM channels WHERE account_id = $1 ORDER BY id");
        let rows = sqlx::query(&sql)
            .bind(account_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(read).collect()
    }

    /// A keyset page of the account's channels in id order: up to `limit` after the id
    /// `after` (issue 17; the caller asks one more to learn whether more follow).
    pub async fn list_channels_page(
        &self,
        account_id: i64,
        after: Option<i64>,
        limit: i64,
    ) -> Result<Vec<ChannelRecord>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM channels WHERE account_id = $1 AND id > $2 ORDER BY id LIMIT $3"
        );
        let rows = sqlx::query(&sql)
            .bind(account_id)
            .bind(after.unwrap_or(0))
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(read).collect()
    }

    /// Every Cloud API channel id (for starting actors at boot; numbers of an alternative
    /// provider have none, D-034).
    pub async fn all_channel_ids(&self) -> Result<Vec<i64>> {
        let rows = sqlx::query("SELECT id FROM channels WHERE official = 1 ORDER BY id")
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| Ok(r.try_get("id")?)).collect()
    }

    /// The account's first connected channel (the default for sends without `channel_id`).
    pub async fn first_working_channel(&self, account_id: i64) -> Result<ChannelRecord> {
        let sql = format!(
            "SELECT {COLUMNS} FROM channels WHERE account_id = $1 AND status = 'WORKING' AND official = 1 ORDER BY id LIMIT 1"
        );
        let row = sqlx::query(&sql)
            .bind(account_id)
            .fetch_optional(&self.pool)
            .await?;
        found(row, read)
    }

    /// The decrypted credentials of a channel.
    pub async fn channel_secrets(&self, id: i64) -> Result<ChannelSecrets> {
        let row =
            sqlx::query("SELECT access_token_enc, app_secret_enc FROM channels WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?
                .ok_or(StorageError::NotFound)?;
        let token: String = row.try_get("access_token_enc")?;
        let secret: Option<String> = row.try_get("app_secret_enc")?;
        Ok(ChannelSecrets {
            access_token: self
                .cipher
                .open(&token, "channels", "access_token_enc", id)?,
            app_secret: secret
                .map(|s| self.cipher.open(&s, "channels", "app_secret_enc", id))
                .transpose()?,
        })
    }

    /// Records a quality / tier reading of a channel that the provider sent at `event_at`
    /// (ms), unless the channel holds a newer one (issue 46: events arrive out of order, and
    /// another process may have applied a newer one). Returns whether it was recorded.
    pub async fn update_channel_quality(
        &self,
        id: i64,
        quality: &str,
        tier: Option<&str>,
        event_at: i64,
    ) -> Result<bool> {
        let n = sqlx::query(
            "UPDATE channels SET quality = $2, tier = COALESCE($3, tier), updated_at = $4, quality_event_at = $5 \
             WHERE id = $1 AND (quality_event_at IS NULL OR quality_event_at <= $5)",
        )
        .bind(id)
        .bind(quality)
        .bind(tier)
        .bind(now_ms())
        .bind(event_at)
        .execute(&self.writer)
        .await?
        .rows_affected();
        Ok(n > 0)
    }

    /// Records whether the credential works.
    pub async fn set_channel_credential_valid(&self, id: i64, valid: bool) -> Result<()> {
        sqlx::query("UPDATE channels SET credential_valid = $2, updated_at = $3 WHERE id = $1")
            .bind(id)
            .bind(valid as i64)
            .bind(now_ms())
            .execute(&self.writer)
            .await?;
        Ok(())
    }
}

impl Store {
    /// The account's channels of one WABA (provider id).
    pub async fn channels_of_waba(
        &self,
        account_id: i64,
        waba_id: &str,
    ) -> Result<Vec<ChannelRecord>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM channels WHERE account_id = $1 AND waba_id = $2 ORDER BY id"
        );
        let rows = sqlx::query(&sql)
            .bind(account_id)
            .bind(waba_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(read).collect()
    }

    /// Every channel of a BM.
    pub async fn channels_of_bm(&self, bm_id: i64) -> Result<Vec<ChannelRecord>> {
        let sql = format!("SELECT {COLUMNS} FROM channels WHERE bm_id = $1 ORDER BY id");
        let rows = sqlx::query(&sql).bind(bm_id).fetch_all(&self.pool).await?;
        rows.iter().map(read).collect()
    }

    /// Links a channel to its BM.
    pub async fn set_channel_bm(&self, id: i64, bm_id: i64) -> Result<()> {
        sqlx::query("UPDATE channels SET bm_id = $2 WHERE id = $1")
            .bind(id)
            .bind(bm_id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Records a channel's connection status and its reading of the provider.
    pub async fn set_channel_status(&self, id: i64, status: &str) -> Result<()> {
        sqlx::query(
            "UPDATE channels SET status = $2, updated_at = $3, last_sync_at = $3 WHERE id = $1",
        )
        .bind(id)
        .bind(status)
        .bind(now_ms())
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Records a full reading of the number at the provider.
    pub async fn record_channel_sync(
        &self,
        id: i64,
        status: &str,
        quality: &str,
        tier: Option<&str>,
        verified_name: Option<&str>,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE channels SET status = $2, quality = $3, tier = COALESCE($4, tier), verified_name = COALESCE($5, verified_name), credential_valid = 1, updated_at = $6, last_sync_at = $6 WHERE id = $1",
        )
        .bind(id)
        .bind(status)
        .bind(quality)
        .bind(tier)
        .bind(verified_name)
        .bind(now_ms())
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Locks (until `until`, ms) or releases (`None`) a channel's business-initiated sends for a
    /// payment problem.
    pub async fn set_channel_payment_lock(&self, id: i64, until: Option<i64>) -> Result<()> {
        sqlx::query("UPDATE channels SET payment_locked_until = $2, updated_at = $3 WHERE id = $1")
            .bind(id)
            .bind(until)
            .bind(now_ms())
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Replaces a channel's credentials (sealed); `None` keeps the stored value.
    pub async fn update_channel_credentials(
        &self,
        id: i64,
        name: Option<&str>,
        access_token: Option<&Secret>,
        app_secret: Option<&Secret>,
        verify_token: Option<&str>,
    ) -> Result<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "UPDATE channels SET name = COALESCE($2, name), verify_token = COALESCE($3, verify_token), credential_valid = 1, updated_at = $4 WHERE id = $1",
        )
        .bind(id)
        .bind(name)
        .bind(verify_token)
        .bind(now_ms())
        .execute(&mut *tx)
        .await?;
        self.write_channel_secrets(&mut tx, id, access_token, app_secret)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Stores the registration PIN of a channel (sealed).
    pub async fn set_channel_pin(&self, id: i64, pin: &Secret) -> Result<()> {
        sqlx::query("UPDATE channels SET pin_enc = $2 WHERE id = $1")
            .bind(id)
            .bind(self.cipher.seal(pin, "channels", "pin_enc", id))
            .execute(&self.writer)
            .await?;
        Ok(())
    }
}
