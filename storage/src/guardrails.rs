//! Per-number campaign guardrails (D-031): the settings stored on each channel, the campaign
//! sends a number made today and the extra sends an owner or admin authorized past its cap.

use crate::{found, now_ms, Result, Store};
use engine::guardrail::Guardrails;
use sqlx::Row;

impl Store {
    /// The channel's guardrail settings; the warm-up starts when the channel was connected
    /// unless it was set. Errors: [`crate::StorageError::NotFound`].
    pub async fn channel_guardrails(&self, channel_id: i64) -> Result<Guardrails> {
        let row = sqlx::query(
            "SELECT daily_cap, cadence_ms, warmup, warmup_started_at, warmup_initial_cap, created_at \
             FROM channels WHERE id = $1",
        )
        .bind(channel_id)
        .fetch_optional(&self.pool)
        .await?;
        found(row, |r| {
            let created: i64 = r.try_get("created_at")?;
            Ok(Guardrails {
                daily_cap: r.try_get("daily_cap")?,
                cadence_ms: r.try_get("cadence_ms")?,
                warmup: r.try_get::<i64, _>("warmup")? != 0,
                warmup_started_at: r
                    .try_get::<Option<i64>, _>("warmup_started_at")?
                    .unwrap_or(created),
                warmup_initial_cap: r.try_get("warmup_initial_cap")?,
            })
        })
    }

    /// Stores the channel's guardrail settings.
    pub async fn set_channel_guardrails(&self, channel_id: i64, g: &Guardrails) -> Result<()> {
        sqlx::query(
            "UPDATE channels SET daily_cap = $2, cadence_ms = $3, warmup = $4, warmup_started_at = $5, \
             warmup_initial_cap = $6, updated_at = $7 WHERE id = $1",
        )
        .bind(channel_id)
        .bind(g.daily_cap)
        .bind(g.cadence_ms)
        .bind(i64::from(g.warmup))
        .bind(g.warmup_started_at)
        .bind(g.warmup_initial_cap)
        .bind(now_ms())
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Campaign sends the channel made since `since` (ms): every campaign message it claimed,
    /// except those the provider refused outright (failed without a provider id). Rebuilds the
    /// day's count when a channel actor starts.
    pub async fn campaign_sends_since(&self, channel_id: i64, since: i64) -> Result<i64> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS n FROM messages WHERE channel_id = $1 AND created_at >= $2 \
             AND campaign_id IS NOT NULL AND NOT (status = 'failed' AND provider_message_id IS NULL)",
        )
        .bind(channel_id)
        .bind(since)
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get("n")?)
    }

    /// Extra campaign sends authorized for the channel on local day `day`.
    pub async fn cap_authorized(&self, channel_id: i64, day: i64) -> Result<i64> {
        let row = sqlx::query(
            "SELECT CAST(COALESCE(SUM(extra), 0) AS BIGINT) AS n FROM channel_cap_authorizations \
             WHERE channel_id = $1 AND day = $2",
        )
        .bind(channel_id)
        .bind(day)
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get("n")?)
    }

    /// Records an authorization of `extra` campaign sends past the cap on local day `day` by
    /// the token named `by`; returns the day's total authorized.
    pub async fn authorize_cap(
        &self,
        channel_id: i64,
        day: i64,
        extra: i64,
        by: &str,
    ) -> Result<i64> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO channel_cap_authorizations (channel_id, day, extra, authorized_by, created_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(channel_id)
        .bind(day)
        .bind(extra)
        .bind(by)
        .bind(now_ms())
        .execute(&mut *tx)
        .await?;
        let row = sqlx::query(
            "SELECT CAST(COALESCE(SUM(extra), 0) AS BIGINT) AS n FROM channel_cap_authorizations \
             WHERE channel_id = $1 AND day = $2",
        )
        .bind(channel_id)
        .bind(day)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(row.try_get("n")?)
    }
}
