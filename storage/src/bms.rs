//! Business portfolios (BMs) and WABAs of an account, as learnt from the provider when a
//! channel is connected and when a BM is synced (decision D-020).

use crate::{found, now_ms, Result, Store};
use sqlx::any::AnyRow;
use sqlx::Row;

/// A business portfolio (BM).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BmRecord {
    /// disparo's id.
    pub id: i64,
    /// Owning account.
    pub account_id: i64,
    /// The provider's business id.
    pub provider_business_id: String,
    /// Name.
    pub name: String,
    /// Business verification status, when known.
    pub verification_status: Option<String>,
    /// Whether the payment method worked at the last check.
    pub payment_ok: bool,
    /// Last payment check, ms.
    pub payment_checked_at: Option<i64>,
    /// The portfolio's messaging tier (`TIER_250`…), shared by its numbers.
    pub tier: Option<String>,
    /// Last sync with the provider, ms.
    pub last_sync_at: Option<i64>,
    /// Created, ms.
    pub created_at: i64,
    /// The client this BM serves (panel, D-054).
    pub client_id: Option<i64>,
    /// The provider app id the panel recorded.
    pub app_id: Option<String>,
    /// Whether the operator gave the provider's Business ID (panel BMs may be recorded
    /// before it is known; [`BmRecord::provider_id`]).
    pub has_provider_id: bool,
    /// The BM's health after its last sync (`ok`, `banido`, `restrito`, `pagamento_pendente`,
    /// `credencial_invalida`); `None` until synced (D-055).
    pub health_status: Option<String>,
    /// Whether the BM has its own access token stored (the panel's system-user token).
    pub has_token: bool,
    /// Whether the BM has its own app secret stored.
    pub has_app_secret: bool,
}

impl BmRecord {
    /// The provider's Business ID, when known.
    pub fn provider_id(&self) -> Option<&str> {
        self.has_provider_id
            .then_some(self.provider_business_id.as_str())
    }
}

/// A WABA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WabaRecord {
    /// disparo's id.
    pub id: i64,
    /// Owning account.
    pub account_id: i64,
    /// Its BM, when known.
    pub bm_id: Option<i64>,
    /// The provider's WABA id.
    pub provider_waba_id: String,
    /// Name.
    pub name: String,
    /// `ok`, `restricted` or `banned` (from `account_update`).
    pub standing: String,
    /// The provider's detail (ban state, restriction types).
    pub standing_detail: Option<String>,
    /// The provider's reason the last time adding a number failed.
    pub last_upload_failure: Option<String>,
    /// Created, ms.
    pub created_at: i64,
    /// The client this WABA serves (panel).
    pub client_id: Option<i64>,
    /// The operator's status: `ativa` or `inativa` (D-056).
    pub status: String,
}

pub(crate) const BM_COLUMNS: &str = "id, account_id, provider_business_id, name, verification_status, payment_ok, payment_checked_at, tier, last_sync_at, created_at, client_id, app_id, has_provider_id, health_status, CAST(CASE WHEN access_token_enc IS NULL THEN 0 ELSE 1 END AS BIGINT) AS has_token, CAST(CASE WHEN app_secret_enc IS NULL THEN 0 ELSE 1 END AS BIGINT) AS has_app_secret";
pub(crate) const WABA_COLUMNS: &str = "id, account_id, bm_id, provider_waba_id, name, standing, standing_detail, last_upload_failure, created_at, client_id, status";

pub(crate) fn read_bm(r: &AnyRow) -> Result<BmRecord> {
    Ok(BmRecord {
        id: r.try_get("id")?,
        account_id: r.try_get("account_id")?,
        provider_business_id: r.try_get("provider_business_id")?,
        name: r.try_get("name")?,
        verification_status: r.try_get("verification_status")?,
        payment_ok: r.try_get::<i64, _>("payment_ok")? != 0,
        payment_checked_at: r.try_get("payment_checked_at")?,
        tier: r.try_get("tier")?,
        last_sync_at: r.try_get("last_sync_at")?,
        created_at: r.try_get("created_at")?,
        client_id: r.try_get("client_id")?,
        app_id: r.try_get("app_id")?,
        has_provider_id: r.try_get::<i64, _>("has_provider_id")? != 0,
        health_status: r.try_get("health_status")?,
        has_token: r.try_get::<i64, _>("has_token")? != 0,
        has_app_secret: r.try_get::<i64, _>("has_app_secret")? != 0,
    })
}

pub(crate) fn read_waba(r: &AnyRow) -> Result<WabaRecord> {
    Ok(WabaRecord {
        id: r.try_get("id")?,
        account_id: r.try_get("account_id")?,
        bm_id: r.try_get("bm_id")?,
        provider_waba_id: r.try_get("provider_waba_id")?,
        name: r.try_get("name")?,
        standing: r.try_get("standing")?,
        standing_detail: r.try_get("standing_detail")?,
        last_upload_failure: r.try_get("last_upload_failure")?,
        created_at: r.try_get("created_at")?,
        client_id: r.try_get("client_id")?,
        status: r.try_get("status")?,
    })
}

impl Store {
    /// Records (or refreshes the name and tier of) the account's BM with this provider id.
    pub async fn upsert_bm(
        &self,
        account_id: i64,
        provider_business_id: &str,
        name: &str,
        tier: Option<&str>,
    ) -> Result<BmRecord> {
        let sql = format!(
            "INSERT INTO bms (account_id, provider_business_id, name, tier, created_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (account_id, provider_business_id) DO UPDATE SET \
               name = CASE WHEN excluded.name = '' THEN bms.name ELSE excluded.name END, \
               tier = COALESCE(excluded.tier, bms.tier) \
             RETURNING {BM_COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(account_id)
            .bind(provider_business_id)
            .bind(name)
            .bind(tier)
            .bind(now_ms())
            .fetch_one(&self.writer)
            .await?;
        read_bm(&row)
    }

    /// Records (or refreshes) the account's WABA with this provider id.
    pub async fn upsert_waba(
        &self,
        account_id: i64,
        bm_id: Option<i64>,
        provider_waba_id: &str,
        name: &str,
    ) -> Result<WabaRecord> {
        let sql = format!(
            "INSERT INTO wabas (account_id, bm_id, provider_waba_id, name, created_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (account_id, provider_waba_id) DO UPDATE SET \
               bm_id = COALESCE(excluded.bm_id, wabas.bm_id), \
               name = CASE WHEN excluded.name = '' THEN wabas.name ELSE excluded.name END \
             RETURNING {WABA_COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(account_id)
            .bind(bm_id)
            .bind(provider_waba_id)
            .bind(name)
            .bind(now_ms())
            .fetch_one(&self.writer)
            .await?;
        read_waba(&row)
    }

    /// A BM of this account.
    pub async fn bm(&self, account_id: i64, id: i64) -> Result<BmRecord> {
        let sql = format!("SELECT {BM_COLUMNS} FROM bms WHERE id = $1 AND account_id = $2");
        let row = sqlx::query(&sql)
            .bind(id)
            .bind(account_id)
            .fetch_optional(&self.pool)
            .await?;
        found(row, read_bm)
    }

    /// A BM by id, whatever its account (for actors).
    pub async fn bm_unscoped(&self, id: i64) -> Result<BmRecord> {
        let sql = format!("SELECT {BM_COLUMNS} FROM bms WHERE id = $1");
        let row = sqlx::query(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        found(row, read_bm)
    }

    /// The account's BMs.
    pub async fn list_bms(&self, account_id: i64) -> Result<Vec<BmRecord>> {
        let sql = format!("SELECT {BM_COLUMNS} FROM bms WHERE account_id = $1 ORDER BY id");
        let rows = sqlx::query(&sql)
            .bind(account_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(read_bm).collect()
    }

    /// The account's WABAs.
    pub async fn list_wabas(&self, account_id: i64) -> Result<Vec<WabaRecord>> {
        let sql = format!("SELECT {WABA_COLUMNS} FROM wabas WHERE account_id = $1 ORDER BY id");
        let rows = sqlx::query(&sql)
            .bind(account_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(read_waba).collect()
    }

    /// The account's WABA with this provider id.
    pub async fn waba_by_provider_id(
        &self,
        account_id: i64,
        provider_waba_id: &str,
    ) -> Result<WabaRecord> {
        let sql = format!(
            "SELECT {WABA_COLUMNS} FROM wabas WHERE account_id = $1 AND provider_waba_id = $2"
        );
        let row = sqlx::query(&sql)
            .bind(account_id)
            .bind(provider_waba_id)
            .fetch_optional(&self.pool)
            .await?;
        found(row, read_waba)
    }

    /// Every account's WABA with this provider id (provider events name WABAs, not accounts).
    pub async fn wabas_by_provider_id(&self, provider_waba_id: &str) -> Result<Vec<WabaRecord>> {
        let sql = format!("SELECT {WABA_COLUMNS} FROM wabas WHERE provider_waba_id = $1");
        let rows = sqlx::query(&sql)
            .bind(provider_waba_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(read_waba).collect()
    }

    /// Records a WABA's standing after an `account_update` the provider sent at `event_at`
    /// (ms), unless the WABA holds a newer one (issue 46). Returns whether it was recorded.
    pub async fn set_waba_standing(
        &self,
        id: i64,
        standing: &str,
        detail: Option<&str>,
        event_at: i64,
    ) -> Result<bool> {
        let n = sqlx::query(
            "UPDATE wabas SET standing = $2, standing_detail = $3, standing_event_at = $4 \
             WHERE id = $1 AND (standing_event_at IS NULL OR standing_event_at <= $4)",
        )
        .bind(id)
        .bind(standing)
        .bind(detail)
        .bind(event_at)
        .execute(&self.writer)
        .await?
        .rows_affected();
        Ok(n > 0)
    }

    /// Records the last failure to add a number to a WABA (`None` clears it).
    pub async fn set_waba_upload_failure(&self, id: i64, failure: Option<&str>) -> Result<()> {
        sqlx::query("UPDATE wabas SET last_upload_failure = $2 WHERE id = $1")
            .bind(id)
            .bind(failure)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Records a payment check of a BM.
    pub async fn set_bm_payment(&self, id: i64, ok: bool) -> Result<()> {
        sqlx::query("UPDATE bms SET payment_ok = $2, payment_checked_at = $3 WHERE id = $1")
            .bind(id)
            .bind(ok as i64)
            .bind(now_ms())
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Records the business verification status the provider reported for a BM
    /// (`verified`, `pending`, `not_verified`, …).
    pub async fn set_bm_verification(&self, id: i64, verification: &str) -> Result<()> {
        sqlx::query("UPDATE bms SET verification_status = $2 WHERE id = $1")
            .bind(id)
            .bind(verification)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Records a sync of a BM.
    pub async fn set_bm_synced(
        &self,
        id: i64,
        tier: Option<&str>,
        verification: Option<&str>,
    ) -> Result<()> {
        sqlx::query("UPDATE bms SET last_sync_at = $2, tier = COALESCE($3, tier), verification_status = COALESCE($4, verification_status) WHERE id = $1")
            .bind(id)
            .bind(now_ms())
            .bind(tier)
            .bind(verification)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Recipients of business-initiated sends of every channel of a BM since `since` (ms),
    /// with the latest send to each, handed to `each` as read: what the BM's shared 24 h counter
    /// is rebuilt from.
    pub async fn bm_business_initiated_recipients_since(
        &self,
        bm_id: i64,
        since: i64,
        each: impl FnMut(&str, i64) + Send,
    ) -> Result<()> {
        self.business_initiated_recipients_of("c.bm_id", bm_id, since, each)
            .await
    }

    /// Unique business-initiated recipients since `since` (ms) of the channels whose
    /// `column` (`c.bm_id`, `c.group_id`) is `id`, with the last time each was messaged, streamed
    /// to `each`.
    pub(crate) async fn business_initiated_recipients_of(
        &self,
        column: &'static str,
        id: i64,
        since: i64,
        each: impl FnMut(&str, i64) + Send,
    ) -> Result<()> {
        let sql = format!(
            "SELECT m.contact_phone, MAX(m.created_at) AS last_at FROM messages m JOIN channels c ON c.id = m.channel_id \
             WHERE {column} = $1 AND m.direction = 'out' AND m.kind = 'template' AND m.status <> 'failed' AND m.created_at >= $2 \
             GROUP BY m.contact_phone"
        );
        let query = sqlx::query(&sql).bind(id).bind(since);
        crate::messages::recipients_with_last_send(query.fetch(&self.pool), each).await
    }
}
