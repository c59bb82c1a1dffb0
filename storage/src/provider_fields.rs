//! What provider webhook fields beyond messages and statuses leave behind (issue 16, D-074):
//! a portfolio's tier from `business_capability_update`, a number's verified name from
//! `phone_number_name_update`, `account_alerts`, and contacts' marketing opt-outs from
//! `user_preferences`.

use crate::placeholders;
use crate::{now_ms, Result, Store};
use sqlx::Row;
use std::collections::HashSet;

/// An `account_alerts` alert kept for an account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderAlert {
    /// Id.
    pub id: i64,
    /// The WABA whose webhook carried it.
    pub waba_id: String,
    /// `WABA`, `PHONE_NUMBER`, `BUSINESS`…
    pub entity_type: String,
    /// The entity's provider id.
    pub entity_id: String,
    /// e.g. `INCREASED_CAPABILITIES_ELIGIBILITY_DEFERRED`.
    pub alert_type: String,
    /// `CRITICAL`, `WARNING`, `INFORMATIONAL`…
    pub severity: String,
    /// `ACTIVE`, `NONE`…
    pub status: String,
    /// The provider's text.
    pub description: String,
    /// Received, ms.
    pub received_at: i64,
}

impl Store {
    /// Sets a BM's portfolio tier (`TIER_2K`, `TIER_UNLIMITED`…).
    pub async fn set_bm_tier(&self, id: i64, tier: &str) -> Result<()> {
        sqlx::query("UPDATE bms SET tier = $2 WHERE id = $1")
            .bind(id)
            .bind(tier)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Sets a number's verified name.
    pub async fn set_channel_verified_name(&self, id: i64, name: &str) -> Result<()> {
        sqlx::query("UPDATE channels SET verified_name = $2, updated_at = $3 WHERE id = $1")
            .bind(id)
            .bind(name)
            .bind(now_ms())
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Keeps an alert; an alert of the same type and entity replaces the account's earlier one
    /// (the provider re-sends an alert when its status changes).
    pub async fn record_provider_alert(&self, account_id: i64, a: &ProviderAlert) -> Result<()> {
        let mut tx = self.writer.begin().await?;
        sqlx::query(
            "DELETE FROM provider_alerts WHERE account_id = $1 AND entity_id = $2 AND alert_type = $3",
        )
        .bind(account_id)
        .bind(&a.entity_id)
        .bind(&a.alert_type)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO provider_alerts (account_id, waba_id, entity_type, entity_id, alert_type, severity, status, description, received_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(account_id)
        .bind(&a.waba_id)
        .bind(&a.entity_type)
        .bind(&a.entity_id)
        .bind(&a.alert_type)
        .bind(&a.severity)
        .bind(&a.status)
        .bind(&a.description)
        .bind(a.received_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The account's active alerts (status other than `NONE`/`RESOLVED`), newest first, at
    /// most `limit`.
    pub async fn active_provider_alerts(
        &self,
        account_id: i64,
        limit: i64,
    ) -> Result<Vec<ProviderAlert>> {
        let rows = sqlx::query(
            "SELECT id, waba_id, entity_type, entity_id, alert_type, severity, status, description, received_at \
             FROM provider_alerts WHERE account_id = $1 AND status NOT IN ('NONE', 'RESOLVED') \
             ORDER BY received_at DESC, id DESC LIMIT $2",
        )
        .bind(account_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(ProviderAlert {
                    id: r.try_get("id")?,
                    waba_id: r.try_get("waba_id")?,
                    entity_type: r.try_get("entity_type")?,
                    entity_id: r.try_get("entity_id")?,
                    alert_type: r.try_get("alert_type")?,
                    severity: r.try_get("severity")?,
                    status: r.try_get("status")?,
                    description: r.try_get("description")?,
                    received_at: r.try_get("received_at")?,
                })
            })
            .collect()
    }

    /// Records that a contact stopped (`stop: true`) or resumed messages of `category`
    /// (`marketing_messages`) from the account.
    pub async fn set_opt_out(
        &self,
        account_id: i64,
        phone: &str,
        category: &str,
        stop: bool,
    ) -> Result<()> {
        if stop {
            sqlx::query(
                "INSERT INTO contact_opt_outs (account_id, phone, category, created_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (account_id, phone, category) DO NOTHING",
            )
            .bind(account_id)
            .bind(phone)
            .bind(category)
            .bind(now_ms())
            .execute(&self.writer)
            .await?;
        } else {
            sqlx::query(
                "DELETE FROM contact_opt_outs WHERE account_id = $1 AND phone = $2 AND category = $3",
            )
            .bind(account_id)
            .bind(phone)
            .bind(category)
            .execute(&self.writer)
            .await?;
        }
        Ok(())
    }

    /// Which of `phones` opted out of `category` at the account.
    pub async fn opted_out(
        &self,
        account_id: i64,
        category: &str,
        phones: &[&str],
    ) -> Result<HashSet<String>> {
        let mut out = HashSet::new();
        for chunk in phones.chunks(500) {
            let sql = format!(
                "SELECT phone FROM contact_opt_outs WHERE account_id = $1 AND category = $2 AND phone IN ({})",
                placeholders(3, chunk.len())
            );
            let mut q = sqlx::query(&sql).bind(account_id).bind(category);
            for p in chunk {
                q = q.bind(*p);
            }
            for r in q.fetch_all(&self.pool).await? {
                out.insert(r.try_get::<String, _>("phone")?);
            }
        }
        Ok(out)
    }
}
