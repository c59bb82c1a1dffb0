//! Campaigns, their numbers and their audience.

use crate::{found, now_ms, Result, StorageError, Store};
use engine::ids::{AccountId, CampaignId};
use serde::Serialize;
use sqlx::any::AnyRow;
use sqlx::Row;

/// A campaign.
#[derive(Debug, Clone, PartialEq)]
pub struct CampaignRecord {
    /// Id.
    pub id: i64,
    /// Owning account.
    pub account_id: i64,
    /// Name.
    pub name: String,
    /// `marketing`, `utility`…
    pub category: String,
    /// Library template.
    pub template_id: i64,
    /// var_map used to fill the template (JSON object).
    pub var_map: serde_json::Value,
    /// State; a stored state this version does not know reads as `StorageError::Corrupt`.
    pub state: engine::campaign::CampaignState,
    /// Why it is paused.
    pub pause_reason: Option<String>,
    /// Numbers and weights.
    pub channels: Vec<(i64, i64)>,
    /// Created, ms.
    pub created_at: i64,
    /// Started, ms.
    pub started_at: Option<i64>,
    /// Finished, ms.
    pub finished_at: Option<i64>,
    /// The sending group it was made for (D-038).
    pub group_id: Option<i64>,
    /// `all` or `sequential`.
    pub mode: String,
    /// When a scheduled campaign starts (ms).
    pub scheduled_at: Option<i64>,
    /// `api` or `panel` (issue 20): a panel campaign's contacts go through hygiene and
    /// approval before any is released.
    pub origin: String,
    /// The panel's step, for panel campaigns (an unknown stored step is `Corrupt`).
    pub stage: Option<engine::panel_campaign::Stage>,
    /// At most this many contacts are sent (panel).
    pub volume: Option<i64>,
    /// The panel user who created it.
    pub created_by: Option<i64>,
    /// CSV rows its import dropped because their number repeated an earlier row's (panel).
    pub import_duplicates: i64,
    /// Blank CSV rows its import skipped (panel).
    pub import_blank: i64,
    /// The panel user who approved it.
    pub approved_by: Option<i64>,
    /// When it was approved, ms.
    pub approved_at: Option<i64>,
    /// The hygiene service's job.
    pub hygiene_job: Option<String>,
    /// When the job was submitted, ms.
    pub hygiene_submitted_at: Option<i64>,
    /// Why hygiene failed.
    pub hygiene_error: Option<String>,
    /// Header image of every send.
    pub image_url: Option<String>,
    /// What fills the URL button (a column or a literal suffix), as given.
    pub button_var: Option<String>,
    /// Held by the account's dispatch switch (`DISPARO_ENABLED`).
    pub held: bool,
    /// Paused by its own rules (no number could send, D-123), not by an operator: its
    /// coordinator keeps checking for a recovery and resumes it.
    pub auto_paused: bool,
}

/// A new campaign.
#[derive(Debug, Clone)]
pub struct NewCampaign {
    /// Owning account.
    pub account_id: i64,
    /// Name.
    pub name: String,
    /// Category.
    pub category: String,
    /// Library template.
    pub template_id: i64,
    /// var_map (JSON object).
    pub var_map: serde_json::Value,
    /// `(channel_id, weight)`.
    pub channels: Vec<(i64, i64)>,
    /// The sending group it is made for.
    pub group_id: Option<i64>,
    /// `all` or `sequential` (D-038).
    pub mode: String,
}

/// Filters of `GET /campaigns`.
#[derive(Debug, Clone, Default)]
pub struct CampaignFilter {
    /// State (`draft`, `scheduled`, `running`, `paused`, `completed`, `cancelled`).
    pub state: Option<String>,
    /// Campaigns sending through this number.
    pub channel_id: Option<i64>,
    /// Campaigns made for this sending group.
    pub group_id: Option<i64>,
    /// Created at or after (ms).
    pub created_since: Option<i64>,
    /// Created before (ms).
    pub created_until: Option<i64>,
}

/// The counters of `GET /campaigns/{id}` (`stats`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct CampaignStats {
    /// Recipients in all.
    pub total: i64,
    /// Waiting for a number.
    pub queued: i64,
    /// Taken by a number, provider answer pending (or in doubt, D-032).
    pub sending: i64,
    /// Accepted by the provider.
    pub sent: i64,
    /// Delivered (a timestamp: read ones count too).
    pub delivered: i64,
    /// Read.
    pub read: i64,
    /// Failed.
    pub failed: i64,
    /// Skipped.
    pub skipped: i64,
    /// Panel contacts not released for sending (before approval, invalid, or beyond the
    /// volume; issue 20).
    pub pending: i64,
}

pub(crate) const COLUMNS: &str = "id, account_id, name, category, template_id, var_map, state, pause_reason, created_at, started_at, finished_at, group_id, mode, scheduled_at, origin, stage, volume, created_by, approved_by, approved_at, hygiene_job, hygiene_submitted_at, hygiene_error, image_url, button_var, held, auto_paused, import_duplicates, import_blank";

/// A stored campaign state; an unknown one is `Corrupt` (never read as another state).
fn campaign_state(s: &str) -> Result<engine::campaign::CampaignState> {
    engine::campaign::CampaignState::parse(s)
        .ok_or_else(|| StorageError::Corrupt(format!("campaigns.state: {s:?}")))
}

pub(crate) fn read(r: &AnyRow) -> Result<CampaignRecord> {
    let var_map: String = r.try_get("var_map")?;
    Ok(CampaignRecord {
        id: r.try_get("id")?,
        account_id: r.try_get("account_id")?,
        name: r.try_get("name")?,
        category: r.try_get("category")?,
        template_id: r.try_get("template_id")?,
        var_map: serde_json::from_str(&var_map)
            .map_err(|e| StorageError::Corrupt(e.to_string()))?,
        state: campaign_state(&r.try_get::<String, _>("state")?)?,
        pause_reason: r.try_get("pause_reason")?,
        channels: Vec::new(),
        created_at: r.try_get("created_at")?,
        started_at: r.try_get("started_at")?,
        finished_at: r.try_get("finished_at")?,
        group_id: r.try_get("group_id")?,
        mode: r.try_get("mode")?,
        scheduled_at: r.try_get("scheduled_at")?,
        origin: r.try_get("origin")?,
        stage: r
            .try_get::<Option<String>, _>("stage")?
            .map(|s| {
                engine::panel_campaign::Stage::parse(&s)
                    .ok_or_else(|| StorageError::Corrupt(format!("campaigns.stage: {s:?}")))
            })
            .transpose()?,
        volume: r.try_get("volume")?,
        created_by: r.try_get("created_by")?,
        import_duplicates: r.try_get("import_duplicates")?,
        import_blank: r.try_get("import_blank")?,
        approved_by: r.try_get("approved_by")?,
        approved_at: r.try_get("approved_at")?,
        hygiene_job: r.try_get("hygiene_job")?,
        hygiene_submitted_at: r.try_get("hygiene_submitted_at")?,
        hygiene_error: r.try_get("hygiene_error")?,
        image_url: r.try_get("image_url")?,
        button_var: r.try_get("button_var")?,
        held: r.try_get::<i64, _>("held")? != 0,
        auto_paused: r.try_get::<i64, _>("auto_paused")? != 0,
    })
}

/// Most recipients claimed per multi-row statement (at most 4 parameters each, plus 4); chunks
/// are shaped by [`crate::shaped_chunks`].
const CLAIM_CHUNK: usize = 256;

/// Most accepted sends settled per multi-row statement (2 parameters each) on PostgreSQL;
/// shaped chunks.
const SETTLE_CHUNK: usize = 512;

/// Most accepted sends settled per multi-row statement on SQLite, whose one write connection
/// 1:1 sends share with settlements: a settlement transaction is committed after any chunk
/// when a batch of 1:1 sends waits (D-093), so this bounds how long they wait behind it
/// (~128 outcomes, a few ms).
const SQLITE_SETTLE_CHUNK: usize = 128;

/// Most rows of one multi-row insert (3 parameters each; well under both dialects' limits);
/// shaped chunks.
pub(crate) const INSERT_CHUNK: usize = 1024;

impl Store {
    /// Stores a campaign (state `draft`) with its numbers.
    pub async fn insert_campaign(&self, c: &NewCampaign) -> Result<CampaignRecord> {
        let now = now_ms();
        let mut tx = self.begin_write().await?;
        let sql = format!(
            "INSERT INTO campaigns (account_id, name, category, template_id, var_map, state, created_at, updated_at, group_id, mode) VALUES ($1, $2, $3, $4, $5, 'draft', $6, $6, $7, $8) RETURNING {COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(c.account_id)
            .bind(&c.name)
            .bind(&c.category)
            .bind(c.template_id)
            .bind(c.var_map.to_string())
            .bind(now)
            .bind(c.group_id)
            .bind(&c.mode)
            .fetch_one(&mut *tx)
            .await?;
        let mut rec = read(&row)?;
        for (channel_id, weight) in &c.channels {
            sqlx::query("INSERT INTO campaign_channels (campaign_id, channel_id, weight) VALUES ($1, $2, $3)")
                .bind(rec.id)
                .bind(channel_id)
                .bind(weight)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        rec.channels = c.channels.clone();
        Ok(rec)
    }

    /// Schedules a campaign: state `scheduled`, starting at `at` (ms). Only a campaign not
    /// started yet (`draft` or `scheduled`) changes (issue 50: never one a scheduler started
    /// meanwhile).
    pub async fn schedule_campaign(&self, id: i64, at: i64) -> Result<()> {
        sqlx::query("UPDATE campaigns SET state = 'scheduled', scheduled_at = $1, updated_at = $2 WHERE id = $3 AND state IN ('draft', 'scheduled')")
            .bind(at)
            .bind(now_ms())
            .bind(id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Renames a campaign and sets (or clears: back to `draft`) when it starts; only a
    /// campaign still `draft` or `scheduled` changes (false otherwise, e.g. it started
    /// meanwhile).
    pub async fn edit_campaign(
        &self,
        id: i64,
        name: Option<&str>,
        schedule: Option<Option<i64>>,
    ) -> Result<bool> {
        let (set_schedule, at) = match schedule {
            None => (0i64, None),
            Some(at) => (1, at),
        };
        let n = sqlx::query(
            "UPDATE campaigns SET name = COALESCE($2, name), \
             scheduled_at = CASE WHEN $3 = 1 THEN $4 ELSE scheduled_at END, \
             state = CASE WHEN $3 = 1 AND $4 IS NULL THEN 'draft' WHEN $3 = 1 THEN 'scheduled' ELSE state END, \
             updated_at = $5 WHERE id = $1 AND state IN ('draft', 'scheduled')",
        )
        .bind(id)
        .bind(name)
        .bind(set_schedule)
        .bind(at)
        .bind(now_ms())
        .execute(&self.writer)
        .await?
        .rows_affected();
        Ok(n == 1)
    }

    /// The account's campaigns, newest first: at most `limit` (1–200) with an id below
    /// `before_id`, filtered by `f`.
    pub async fn list_campaigns(
        &self,
        account_id: i64,
        f: &CampaignFilter,
        before_id: Option<i64>,
        limit: i64,
    ) -> Result<Vec<CampaignRecord>> {
        let mut conds = vec!["account_id = $1".to_string()];
        if f.state.is_some() {
            conds.push("state = $2".into());
        }
        if let Some(c) = f.channel_id {
            conds.push(format!(
                "id IN (SELECT campaign_id FROM campaign_channels WHERE channel_id = {c})"
            ));
        }
        if let Some(g) = f.group_id {
            conds.push(format!("group_id = {g}"));
        }
        if let Some(t) = f.created_since {
            conds.push(format!("created_at >= {t}"));
        }
        if let Some(t) = f.created_until {
            conds.push(format!("created_at < {t}"));
        }
        if let Some(b) = before_id {
            conds.push(format!("id < {b}"));
        }
        let sql = format!(
            "SELECT {COLUMNS} FROM campaigns WHERE {} ORDER BY id DESC LIMIT {}",
            conds.join(" AND "),
            limit.clamp(1, 201)
        );
        let mut q = sqlx::query(&sql).bind(account_id);
        if let Some(s) = &f.state {
            q = q.bind(s);
        }
        let mut out: Vec<CampaignRecord> = q
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(read)
            .collect::<Result<_>>()?;
        for rec in &mut out {
            rec.channels = self.campaign_channels(rec.id).await?;
        }
        Ok(out)
    }

    /// Scheduled campaigns whose time has come: `(id, account_id)`.
    pub async fn due_scheduled_campaigns(&self, now: i64) -> Result<Vec<(i64, i64)>> {
        let rows = sqlx::query(
            "SELECT id, account_id FROM campaigns WHERE state = 'scheduled' AND scheduled_at <= $1 ORDER BY scheduled_at",
        )
        .bind(now)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("id")?, r.try_get("account_id")?)))
            .collect()
    }

    /// A campaign of this account, with its numbers. Errors: `NotFound` for a campaign of
    /// another account.
    pub async fn campaign(&self, account: AccountId, id: CampaignId) -> Result<CampaignRecord> {
        let sql = format!("SELECT {COLUMNS} FROM campaigns WHERE id = $1 AND account_id = $2");
        let row = sqlx::query(&sql)
            .bind(id.get())
            .bind(account.get())
            .fetch_optional(&self.pool)
            .await?;
        let mut rec = found(row, read)?;
        rec.channels = self.campaign_channels(id.get()).await?;
        Ok(rec)
    }

    /// A campaign's numbers and weights, by channel id.
    pub(crate) async fn campaign_channels(&self, campaign_id: i64) -> Result<Vec<(i64, i64)>> {
        let rows = sqlx::query("SELECT channel_id, weight FROM campaign_channels WHERE campaign_id = $1 ORDER BY channel_id")
            .bind(campaign_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("channel_id")?, r.try_get("weight")?)))
            .collect()
    }

    /// Adds recipients `(phone, vars JSON)` as `planned`; a phone already in the campaign is
    /// skipped. One transaction; returns how many were added.
    pub async fn add_campaign_recipients(
        &self,
        campaign_id: i64,
        rows: &[(String, String)],
    ) -> Result<u64> {
        let now = now_ms();
        let mut tx = self.begin_write().await?;
        let mut added = 0;
        for chunk in crate::shaped_chunks(rows, INSERT_CHUNK) {
            let mut sql = String::from("INSERT INTO campaign_recipients (campaign_id, phone, vars, state, updated_at) VALUES ");
            for i in 0..chunk.len() {
                if i > 0 {
                    sql.push_str(", ");
                }
                let p = 1 + 4 * i;
                sql.push_str(&format!(
                    "(${p}, ${}, ${}, 'planned', ${})",
                    p + 1,
                    p + 2,
                    p + 3
                ));
            }
            sql.push_str(" ON CONFLICT (campaign_id, phone) DO NOTHING");
            let sql = crate::positional(&tx, &sql);
            let mut q = sqlx::query(&sql);
            for (phone, vars) in chunk {
                q = q.bind(campaign_id).bind(phone).bind(vars).bind(now);
            }
            added += q.execute(&mut *tx).await?.rows_affected();
        }
        tx.commit().await?;
        Ok(added)
    }

    /// The campaign's counters: its recipients by state and its messages by status. A message
    /// counts as sent once the provider took it (`sent`, `delivered` or `read`), as delivered
    /// at `delivered` or `read` (read implies delivered), as read at `read`.
    ///
    /// On SQLite, two grouped counts over the `(campaign_id, state)` and
    /// `(campaign_id, status)` indexes (covering: the rows are not visited). On PostgreSQL,
    /// where such a count visits every row version of the audience (80–100 ms at 100,000
    /// recipients while the campaign runs), the sums of the campaign's `campaign_counts` rows,
    /// which the database's statement triggers append in every transaction that adds, changes
    /// or removes recipients or campaign messages (D-091); past [`COUNTS_COMPACT_AT`] rows a
    /// campaign's rows are folded into one per value.
    pub async fn campaign_stats(&self, campaign_id: i64) -> Result<CampaignStats> {
        let mut stats = CampaignStats::default();
        let (states, statuses) = match self.backend {
            crate::Backend::Sqlite => (
                sqlx::query(
                    "SELECT state AS value, COUNT(*) AS n FROM campaign_recipients WHERE campaign_id = $1 GROUP BY state",
                )
                .bind(campaign_id)
                .fetch_all(&self.pool)
                .await?,
                sqlx::query(
                    "SELECT status AS value, COUNT(*) AS n FROM messages WHERE campaign_id = $1 GROUP BY status",
                )
                .bind(campaign_id)
                .fetch_all(&self.pool)
                .await?,
            ),
            crate::Backend::Postgres => {
                let rows = sqlx::query(
                    "SELECT kind, value, SUM(n)::BIGINT AS n, COUNT(*) AS parts FROM campaign_counts \
                     WHERE campaign_id = $1 GROUP BY kind, value",
                )
                .bind(campaign_id)
                .fetch_all(&self.pool)
                .await?;
                let mut parts = 0;
                let (mut states, mut statuses) = (Vec::new(), Vec::new());
                for r in rows {
                    parts += r.try_get::<i64, _>("parts")?;
                    if r.try_get::<String, _>("kind")? == "state" {
                        states.push(r);
                    } else {
                        statuses.push(r);
                    }
                }
                if parts > COUNTS_COMPACT_AT {
                    self.compact_campaign_counts(campaign_id).await?;
                }
                (states, statuses)
            }
        };
        for r in states {
            let state: String = r.try_get("value")?;
            let n: i64 = r.try_get("n")?;
            stats.total += n;
            match state.as_str() {
                "planned" => stats.queued += n,
                "claimed" | "in_doubt" => stats.sending += n,
                "failed" => stats.failed += n,
                "skipped" => stats.skipped += n,
                "pending" => stats.pending += n,
                _ => {}
            }
        }
        for r in statuses {
            let status: String = r.try_get("value")?;
            let n: i64 = r.try_get("n")?;
            match status.as_str() {
                "sent" => stats.sent += n,
                "delivered" => {
                    stats.sent += n;
                    stats.delivered += n;
                }
                "read" => {
                    stats.sent += n;
                    stats.delivered += n;
                    stats.read += n;
                }
                _ => {}
            }
        }
        Ok(stats)
    }
}

/// How many `campaign_counts` rows a campaign may gather on PostgreSQL before a read of its
/// counters folds them into one per value (D-091): a running campaign appends a few rows per
/// claim, settlement and status batch (about 3,000 at 100,000 recipients), which a read sums
/// in about a millisecond.
pub const COUNTS_COMPACT_AT: i64 = 4_096;

impl Store {
    /// Folds a campaign's `campaign_counts` rows into one per kind and value, in one
    /// statement (PostgreSQL only; D-091): the rows it deletes are the ones its snapshot saw,
    /// and their sums are written back in the same transaction, so a reader sees the same sums
    /// before and after, and rows appended meanwhile by other transactions stay as they are.
    async fn compact_campaign_counts(&self, campaign_id: i64) -> Result<()> {
        sqlx::query(
            "WITH gone AS (DELETE FROM campaign_counts WHERE campaign_id = $1 RETURNING kind, value, n) \
             INSERT INTO campaign_counts (campaign_id, kind, value, n) \
             SELECT $1, kind, value, SUM(n)::BIGINT FROM gone GROUP BY kind, value HAVING SUM(n) <> 0",
        )
        .bind(campaign_id)
        .execute(&self.writer)
        .await?;
        Ok(())
    }
}

/// A recipient claimed for a channel, with the message stored for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    /// Recipient row.
    pub recipient_id: i64,
    /// Message row (its id goes in `biz_opaque_callback_data`).
    pub message_id: i64,
    /// Phone digits.
    pub phone: String,
    /// Audience columns (JSON object).
    pub vars: String,
}

impl Store {
    /// Campaigns whose actor runs: `running`, or paused by their own rules (D-123: the actor
    /// watches for a recovery); `(id, account_id)`, restarted at boot.
    pub async fn running_campaigns(&self) -> Result<Vec<(i64, i64)>> {
        let rows = sqlx::query(
            "SELECT id, account_id FROM campaigns WHERE state = 'running' OR (state = 'paused' AND auto_paused = 1) ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("id")?, r.try_get("account_id")?)))
            .collect()
    }

    /// Moves a campaign from state `from` to `state` (with a pause reason, or none), stamping
    /// start and finish: a compare-and-set, so of two processes or requests moving it at once
    /// only the one that saw its current state moves it (issue 50; a completion never
    /// overwrites a cancel). Returns whether it moved.
    pub async fn set_campaign_state(
        &self,
        id: i64,
        from: &str,
        state: &str,
        reason: Option<&str>,
    ) -> Result<bool> {
        self.move_campaign_row(id, from, state, reason, false).await
    }

    /// [`Store::set_campaign_state`] to `paused` by the campaign's own rules (no number could
    /// send, D-123): marked `auto_paused`, so it stays among [`Store::running_campaigns`].
    pub async fn pause_campaign_by_rules(&self, id: i64, from: &str, reason: &str) -> Result<bool> {
        self.move_campaign_row(id, from, "paused", Some(reason), true)
            .await
    }

    async fn move_campaign_row(
        &self,
        id: i64,
        from: &str,
        state: &str,
        reason: Option<&str>,
        auto_paused: bool,
    ) -> Result<bool> {
        let now = now_ms();
        let moved = sqlx::query(
            "UPDATE campaigns SET state = $2, pause_reason = $3, updated_at = $4, auto_paused = $6, \
             started_at = CASE WHEN $2 = 'running' AND started_at IS NULL THEN $4 ELSE started_at END, \
             finished_at = CASE WHEN $2 IN ('completed', 'cancelled') THEN $4 ELSE finished_at END WHERE id = $1 AND state = $5",
        )
        .bind(id)
        .bind(state)
        .bind(reason)
        .bind(now)
        .bind(from)
        .bind(i64::from(auto_paused))
        .execute(&self.writer)
        .await?
        .rows_affected();
        Ok(moved == 1)
    }

    /// Claims planned recipients of a campaign for its numbers in one transaction (on SQLite
    /// committed between chunks when a batch of 1:1 sends waits, D-094), before any
    /// provider call: `shares` gives each number's count and template name; the recipients
    /// (oldest first) are split among them in that order. Each claimed recipient gets a
    /// `queued` template message (`campaign_id` set) and moves to `claimed` with its message
    /// id, so each is sent at most once. With `pinned`, only recipients a resend pinned to the
    /// (single) number of `shares` are claimed; without, only recipients pinned to none.
    /// In cluster mode each share's lease is checked (and locked `FOR SHARE`) in the same
    /// transaction. Returns the claimed recipients per share, in the order of `shares`.
    /// Errors: [`crate::StorageError::Fenced`] when a share's lease is no longer held
    /// (nothing claimed); [`crate::StorageError::ClaimUnconfirmed`] when it failed after
    /// claiming some (they may be stored, none was handed out: to be given back); the
    /// database's.
    pub async fn claim_recipients(
        &self,
        account_id: i64,
        campaign_id: i64,
        pinned: bool,
        shares: &[ClaimShare],
        template_language: &str,
    ) -> Result<Vec<Vec<Claimed>>> {
        let mut after = 0;
        self.claim_recipients_after(
            account_id,
            campaign_id,
            pinned,
            shares,
            template_language,
            &mut after,
        )
        .await
    }

    /// [`Store::claim_recipients`] from a cursor: the planned recipients past `after` (a
    /// recipient id) first, then, when fewer are there than asked, the ones from the start of
    /// the audience (given back or planned again behind the cursor). `after` becomes the last
    /// recipient picked (0 when none was). A campaign's actor keeps one cursor per kind of
    /// claim, so a claim reads the rows it takes instead of every row already claimed before
    /// them: on PostgreSQL no index names `state` (D-137), which is what lets both of a
    /// recipient's updates be heap-only.
    pub async fn claim_recipients_after(
        &self,
        account_id: i64,
        campaign_id: i64,
        pinned: bool,
        shares: &[ClaimShare],
        template_language: &str,
        after: &mut i64,
    ) -> Result<Vec<Vec<Claimed>>> {
        let now = now_ms();
        let limit: usize = shares.iter().map(|s| s.count).sum();
        if limit == 0 {
            return Ok(shares.iter().map(|_| Vec::new()).collect());
        }
        let _lane = self.bulk_lane("claims").await;
        let leases: Vec<&crate::leases::LeaseToken> =
            shares.iter().filter_map(|s| s.lease.as_ref()).collect();
        let mut tx = self.begin_write().await?;
        self.hold_leases(&mut tx, &leases).await?;
        let channel_id = shares[0].channel_id;
        let mut picked = self
            .pick_planned_tx(
                &mut tx,
                (campaign_id, pinned, channel_id),
                (*after, i64::MAX),
                limit,
            )
            .await?;
        if picked.len() < limit && *after > 0 {
            let wrapped = self
                .pick_planned_tx(
                    &mut tx,
                    (campaign_id, pinned, channel_id),
                    (0, *after + 1),
                    limit - picked.len(),
                )
                .await?;
            picked.extend(wrapped);
        }
        *after = picked.last().map_or(0, |p| p.0);
        // In id order, as every writer of these rows goes (D-095).
        picked.sort_unstable_by_key(|p| p.0);
        // Fewer recipients left than asked: each share shrinks in proportion (largest
        // remainders first), so the weights hold to the end of the audience.
        let counts = proportional(
            &shares.iter().map(|s| s.count).collect::<Vec<_>>(),
            picked.len(),
        );
        let mut rows: Vec<(usize, &(i64, String, String))> = Vec::with_capacity(picked.len());
        let mut rest = &picked[..];
        for (s, count) in counts.into_iter().enumerate() {
            let (mine, others) = rest.split_at(count.min(rest.len()));
            rest = others;
            rows.extend(mine.iter().map(|r| (s, r)));
        }
        let mut result: Vec<Vec<Claimed>> = shares.iter().map(|_| Vec::new()).collect();
        let cx = ClaimContext {
            account_id,
            campaign_id,
            shares,
            template_language,
            session: self.session_id(),
            now,
        };
        match self
            .claim_rows_and_commit(tx, cx, rows, &leases, &mut result)
            .await
        {
            Ok(()) => Ok(result),
            Err(source) => {
                // Claims may be stored (a SQLite chunk committed, or a commit whose answer the
                // database's going away lost) and none was handed out: the caller gives them
                // back once the database answers.
                let give_back: Vec<Settlement> = result
                    .iter()
                    .zip(shares)
                    .flat_map(|(claimed, share)| {
                        claimed.iter().map(|c| Settlement {
                            channel_id: share.channel_id,
                            recipient_id: c.recipient_id,
                            message_id: c.message_id,
                            result: SendResult::Replan,
                        })
                    })
                    .collect();
                if give_back.is_empty() {
                    Err(source)
                } else {
                    Err(StorageError::ClaimUnconfirmed {
                        give_back,
                        source: Box::new(source),
                    })
                }
            }
        }
    }

    /// The claim's writes after its pick (see [`Store::claim_recipients`]): `rows` claimed in
    /// chunks inside `tx`, each claimed recipient pushed to its share's list in `result` as
    /// soon as its statements ran, then the commit.
    async fn claim_rows_and_commit(
        &self,
        mut tx: sqlx::Transaction<'static, sqlx::Any>,
        cx: ClaimContext<'_>,
        rows: Vec<(usize, &(i64, String, String))>,
        leases: &[&crate::leases::LeaseToken],
        result: &mut [Vec<Claimed>],
    ) -> Result<()> {
        // On SQLite a batch of 1:1 sends waiting for the write connection gets it between
        // chunks (D-094): what is claimed is committed, the sends begin (the bulk lane is
        // kept, no other bulk writer goes first), and the claim goes on in a new transaction
        // with the picked recipients still `planned` (a cancel or a deletion, which do not
        // take the lane, may have come in between). An error after such a commit leaves the
        // committed part `claimed`: the campaign actor fails and its restart makes those
        // `in_doubt` (D-032), as after a crash. On PostgreSQL 1:1 sends have connections of
        // their own: one transaction.
        let sqlite = self.backend == crate::Backend::Sqlite;
        let mut start = 0;
        let mut chunk_rows = rows;
        while start < chunk_rows.len() {
            if start > 0 && sqlite && self.priority.sends_waiting() {
                metrics::counter!("disparo_store_bulk_yields_total", "writer" => "claims")
                    .increment(1);
                tx.commit().await?;
                self.priority.yield_to_sends().await;
                tx = self.begin_write().await?;
                self.hold_leases(&mut tx, leases).await?;
                let ids: Vec<i64> = chunk_rows[start..].iter().map(|(_, r)| r.0).collect();
                let planned = still_planned_tx(&mut tx, &ids).await?;
                let mut rest = chunk_rows.split_off(start);
                rest.retain(|(_, r)| planned.contains(&r.0));
                chunk_rows.extend(rest);
                if start == chunk_rows.len() {
                    break;
                }
            }
            let chunk = crate::shaped_chunks(&chunk_rows[start..], CLAIM_CHUNK)
                .into_iter()
                .next()
                .expect("rows are left");
            start += chunk.len();
            for (s, claimed) in claim_chunk(&mut tx, cx, chunk).await? {
                result[s].push(claimed);
            }
        }
        tx.commit().await?;
        Ok(())
    }
}

impl Store {
    /// Up to `limit` planned recipients of `campaign` (`(campaign id, pinned, channel id)`:
    /// with `pinned`, the ones a resend pinned to that number; without, the ones pinned to
    /// none) with an id strictly between `ids.0` and `ids.1`, in id order: `(id, phone,
    /// vars)`. On PostgreSQL the picked rows are locked until the claim commits, and rows
    /// another process is claiming are passed over (issue 50, D-100): two claimers never pick
    /// the same recipient. SQLite has one writer at a time.
    async fn pick_planned_tx(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        campaign: (i64, bool, i64),
        ids: (i64, i64),
        limit: usize,
    ) -> Result<Vec<(i64, String, String)>> {
        let (campaign_id, pinned, channel_id) = campaign;
        let sql = if pinned {
            "SELECT id, phone, vars FROM campaign_recipients WHERE campaign_id = $1 AND id > $4 AND id < $5 AND state = 'planned' AND pinned_channel_id = $3 ORDER BY id LIMIT $2"
        } else {
            "SELECT id, phone, vars FROM campaign_recipients WHERE campaign_id = $1 AND id > $4 AND id < $5 AND state = 'planned' AND pinned_channel_id IS NULL AND $3 > 0 ORDER BY id LIMIT $2"
        };
        let sql = match self.backend {
            crate::Backend::Postgres => format!("{sql} FOR UPDATE SKIP LOCKED"),
            crate::Backend::Sqlite => sql.to_string(),
        };
        let rows = sqlx::query(&sql)
            .bind(campaign_id)
            .bind(limit as i64)
            .bind(channel_id)
            .bind(ids.0)
            .bind(ids.1)
            .fetch_all(&mut **tx)
            .await?;
        let mut picked = Vec::with_capacity(rows.len());
        for r in rows {
            let id: i64 = r.try_get("id")?;
            let phone: String = r.try_get("phone")?;
            let vars: String = r.try_get("vars")?;
            picked.push((id, phone, vars));
        }
        Ok(picked)
    }
}

/// Which of these recipients are still `planned` inside `tx`: one `IN` lookup per 256 ids.
async fn still_planned_tx(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    ids: &[i64],
) -> Result<std::collections::HashSet<i64>> {
    let mut out = std::collections::HashSet::with_capacity(ids.len());
    for chunk in crate::padded_chunks(ids, 256) {
        let sql = format!(
            "SELECT id FROM campaign_recipients WHERE state = 'planned' AND id IN ({})",
            crate::placeholders(1, chunk.len())
        );
        let sql = crate::positional(tx, &sql);
        let mut q = sqlx::query(&sql);
        for id in &chunk {
            q = q.bind(*id);
        }
        for row in q.fetch_all(&mut **tx).await? {
            out.insert(row.try_get("id")?);
        }
    }
    Ok(out)
}

/// Splits `available` units among `asked` counts in proportion when there are fewer than
/// asked (largest remainders first); the counts as asked otherwise.
fn proportional(asked: &[usize], available: usize) -> Vec<usize> {
    let total: usize = asked.iter().sum();
    if available >= total || total == 0 {
        return asked.to_vec();
    }
    let mut counts: Vec<usize> = asked.iter().map(|a| a * available / total).collect();
    let mut order: Vec<usize> = (0..asked.len()).collect();
    order.sort_by_key(|i| std::cmp::Reverse((asked[*i] * available) % total));
    let mut left = available - counts.iter().sum::<usize>();
    for i in order {
        if left == 0 {
            break;
        }
        counts[i] += 1;
        left -= 1;
    }
    counts
}

/// One number's part of a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimShare {
    /// The number.
    pub channel_id: i64,
    /// How many recipients it takes.
    pub count: usize,
    /// The template's name on its WABA.
    pub template_name: String,
    /// Cluster mode: the lease of the number's cell the claim is made under (checked in the
    /// claim's transaction, [`Store::hold_leases`]); `None` on one node.
    pub lease: Option<crate::leases::LeaseToken>,
}

/// What every chunk of one claim shares.
#[derive(Clone, Copy)]
struct ClaimContext<'a> {
    account_id: i64,
    campaign_id: i64,
    shares: &'a [ClaimShare],
    template_language: &'a str,
    /// The claiming process's session (D-100).
    session: i64,
    now: i64,
}

/// Claims a chunk of picked recipients, each with the index of its share (its number),
/// inside the claim's transaction: three multi-row statements for the chunk, whatever the
/// numbers, instead of three per recipient or per number (the claim is on every campaign
/// tick's path). Returns each claimed recipient with its share's index. Errors:
/// [`StorageError::Conflict`] (`claim_lost`) when a picked recipient was no longer `planned`
/// (the transaction must roll back: its messages go with it).
async fn claim_chunk(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    cx: ClaimContext<'_>,
    chunk: &[(usize, &(i64, String, String))],
) -> Result<Vec<(usize, Claimed)>> {
    let ClaimContext {
        account_id,
        campaign_id,
        shares,
        template_language,
        session,
        now,
    } = cx;
    // Conversations (one per recipient and number), created or found.
    let values: Vec<String> = (0..chunk.len())
        .map(|i| {
            let p = 1 + 4 * i;
            format!("(${p}, ${}, ${}, ${})", p + 1, p + 2, p + 3)
        })
        .collect();
    let sql = format!(
        "INSERT INTO conversations (account_id, channel_id, contact_phone, created_at) VALUES {} \
         ON CONFLICT (channel_id, contact_phone) DO UPDATE SET contact_phone = excluded.contact_phone \
         RETURNING id, contact_phone",
        values.join(", ")
    );
    let sql = crate::positional(tx, &sql);
    let mut q = sqlx::query(&sql);
    for (s, (_, phone, _)) in chunk {
        q = q
            .bind(account_id)
            .bind(shares[*s].channel_id)
            .bind(phone)
            .bind(now);
    }
    // A phone appears once in a campaign, so it names its conversation and message here.
    let mut conversation: std::collections::HashMap<String, i64> = Default::default();
    for row in q.fetch_all(&mut **tx).await? {
        conversation.insert(row.try_get("contact_phone")?, row.try_get("id")?);
    }
    // Their queued messages. Inserted `queued`, never in a status the campaign's counters
    // report: on PostgreSQL the counters see messages only through their updates (D-091).
    let values: Vec<String> = (0..chunk.len())
        .map(|i| {
            let p = 1 + 8 * i;
            format!(
                "(${p}, ${}, ${}, 'out', 'template', ${}, ${}, ${}, 'queued', 'campaign', ${}, ${})",
                p + 1,
                p + 2,
                p + 3,
                p + 4,
                p + 5,
                p + 6,
                p + 7
            )
        })
        .collect();
    let sql = format!(
        "INSERT INTO messages (account_id, channel_id, conversation_id, direction, kind, contact_phone, template_name, template_language, status, source, created_at, campaign_id) \
         VALUES {} RETURNING id, contact_phone",
        values.join(", ")
    );
    let sql = crate::positional(tx, &sql);
    let mut q = sqlx::query(&sql);
    for (s, (_, phone, _)) in chunk {
        let conv = conversation.get(phone).copied().ok_or_else(|| {
            StorageError::Corrupt(format!("no conversation returned for {phone}"))
        })?;
        q = q
            .bind(account_id)
            .bind(shares[*s].channel_id)
            .bind(conv)
            .bind(phone)
            .bind(shares[*s].template_name.as_str())
            .bind(template_language)
            .bind(now)
            .bind(campaign_id);
    }
    let mut message: std::collections::HashMap<String, i64> = Default::default();
    for row in q.fetch_all(&mut **tx).await? {
        message.insert(row.try_get("contact_phone")?, row.try_get("id")?);
    }
    // The recipients, claimed with their numbers and message ids (a join with the values).
    let values: Vec<String> = (0..chunk.len())
        .map(|i| {
            let p = 1 + 4 * i;
            format!("(${p}, ${}, ${}, ${})", p + 1, p + 2, p + 3)
        })
        .collect();
    // Only over `planned` rows (issue 50): a recipient claimed twice would be sent twice.
    let sql = format!(
        "WITH v (rid, cid, mid, at) AS (VALUES {}) \
         UPDATE campaign_recipients SET state = 'claimed', channel_id = v.cid, message_id = v.mid, updated_at = v.at, \
         claim_session = ${} \
         FROM v WHERE campaign_recipients.id = v.rid AND campaign_recipients.state = 'planned'",
        values.join(", "),
        4 * chunk.len() + 1
    );
    let sql = crate::positional(tx, &sql);
    let mut q = sqlx::query(&sql);
    let mut out = Vec::with_capacity(chunk.len());
    for (s, (recipient_id, phone, vars)) in chunk {
        let message_id = message
            .get(phone)
            .copied()
            .ok_or_else(|| StorageError::Corrupt(format!("no message returned for {phone}")))?;
        q = q
            .bind(*recipient_id)
            .bind(shares[*s].channel_id)
            .bind(message_id)
            .bind(now);
        out.push((
            *s,
            Claimed {
                recipient_id: *recipient_id,
                message_id,
                phone: phone.clone(),
                vars: vars.clone(),
            },
        ));
    }
    let claimed = q.bind(session).execute(&mut **tx).await?.rows_affected();
    if claimed != chunk.len() as u64 {
        return Err(StorageError::Conflict("claim_lost".into()));
    }
    Ok(out)
}

/// The outcome of one campaign send, as recorded by [`Store::settle_campaign_sends`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendResult {
    /// Accepted by the provider with this id: the recipient is `sent`.
    Sent {
        /// The provider's message id (`wamid`).
        provider_message_id: String,
    },
    /// Not sent (throttled, or refused by the number before the provider call): the recipient
    /// goes back to `planned` and its unsent message is removed.
    Replan,
    /// Refused by the provider, not to be retried: the message is `failed` with the provider's
    /// error and the recipient `failed`, or `skipped` when the recipient cannot receive messages.
    Failed {
        /// The provider's error code.
        code: Option<i64>,
        /// The provider's reason (pt-BR).
        reason: String,
        /// Record the recipient as `skipped` instead of `failed`.
        skip: bool,
    },
    /// No answer (timeout): the provider may have accepted it. The recipient is `in_doubt`
    /// until a status webhook settles its message or the grace period ends (D-032).
    InDoubt,
}

/// One campaign send's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settlement {
    /// The number it was sent through (whose webhook subscriptions get its event).
    pub channel_id: i64,
    /// Recipient row.
    pub recipient_id: i64,
    /// Message row.
    pub message_id: i64,
    /// What happened.
    pub result: SendResult,
}

/// What [`Store::campaign_open_work`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenWork {
    /// Recipients wait (`planned`).
    pub planned: bool,
    /// Recipients are taken and not settled (`claimed`, `in_doubt`).
    pub open: bool,
    /// The campaign's stored state (`None`: deleted).
    pub state: Option<engine::campaign::CampaignState>,
    /// Paused by its own rules (D-123).
    pub auto_paused: bool,
}

/// What a sweep of in-doubt recipients did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepOutcome {
    /// Settled as sent (a status webhook gave their message a provider id).
    pub sent: u64,
    /// Settled as failed (a status webhook reported a failure).
    pub failed: u64,
    /// Back to planned: no sign of the provider within the grace period.
    pub replanned: u64,
    /// Claimed by a gone process, now in doubt (issue 50, D-100).
    pub taken_over: u64,
    /// Claimed by this process and left unsettled longer than the grace period (its outcome
    /// was lost), now in doubt.
    pub stale: u64,
}

impl Store {
    /// Records campaign send outcomes (see [`Store::settle_campaign_sends_from`]). Returns how
    /// many webhook deliveries were enqueued. An error leaves the transactions already
    /// committed recorded and the rest `claimed` (resolved as in doubt, D-032): a caller that
    /// tries again uses [`Store::settle_campaign_sends_from`], which tells what is left.
    pub async fn settle_campaign_sends(
        &self,
        settlements: &[Settlement],
        make_events: impl Fn(usize, &crate::messages::MessageRecord) -> Vec<crate::webhooks::NewEvent>,
    ) -> Result<u64> {
        let mut pending: Vec<usize> = (0..settlements.len()).collect();
        self.settle_campaign_sends_from(settlements, &mut pending, make_events)
            .await
    }

    /// Records the campaign send outcomes `pending` names (indices into `settlements`) in
    /// durable transactions (the send path batches its commits instead of committing each
    /// send); the `message.sent` events that `make_events` builds for each accepted message
    /// (given the settlement's index) are written in the same transaction as its message.
    /// On SQLite a transaction ends early, after a chunk of [`SQLITE_SETTLE_CHUNK`], when a
    /// batch of 1:1 sends waits for the write connection (issue 25 part 2, D-093):
    /// everything of one settlement (message, recipient, events) is in one transaction, and
    /// the rest follows in the next
    /// transaction once the 1:1 batch began, before any other bulk writer. On return
    /// `pending` holds what was not recorded: empty on success, the failed transaction's part
    /// and what followed it on an error (never anything committed: a replan written twice
    /// could give back a recipient the campaign had claimed again). Returns how many webhook
    /// deliveries were enqueued.
    pub async fn settle_campaign_sends_from(
        &self,
        settlements: &[Settlement],
        pending: &mut Vec<usize>,
        make_events: impl Fn(usize, &crate::messages::MessageRecord) -> Vec<crate::webhooks::NewEvent>,
    ) -> Result<u64> {
        let mut enqueued = 0;
        let _lane = self.bulk_lane("settlements").await;
        while !pending.is_empty() {
            *pending = self
                .settle_tx(settlements, pending, &make_events, &mut enqueued)
                .await?;
            if !pending.is_empty() {
                // Committed early for waiting 1:1 sends: the lane is kept, so this settlement
                // goes on as soon as they began, ahead of the other bulk writers.
                self.priority.yield_to_sends().await;
            }
        }
        Ok(enqueued)
    }

    /// One settlement transaction over `pending` (see
    /// [`Store::settle_campaign_sends_from`]); returns what it left for the next one.
    async fn settle_tx(
        &self,
        settlements: &[Settlement],
        pending: &[usize],
        make_events: &impl Fn(usize, &crate::messages::MessageRecord) -> Vec<crate::webhooks::NewEvent>,
        enqueued: &mut u64,
    ) -> Result<Vec<usize>> {
        let now = now_ms();
        // Message rows in id order, as every writer of them does (deadlocks rare on PostgreSQL,
        // D-095).
        let mut order: Vec<usize> = pending.to_vec();
        order.sort_by_key(|i| settlements[*i].message_id);
        let (sent, rest): (Vec<usize>, Vec<usize>) = order
            .into_iter()
            .partition(|i| matches!(settlements[*i].result, SendResult::Sent { .. }));
        // Outcomes of calls already made: lost in a database crash, they are in doubt and
        // settled by the sends' status webhooks (D-032), so the commit does not wait for the
        // log's flush (D-141).
        let mut tx = self.begin_recoverable_write().await?;
        // Events are built only for numbers someone subscribed to: only their rows are read
        // back.
        let channels: Vec<i64> = sent.iter().map(|i| settlements[*i].channel_id).collect();
        let subscriptions = crate::webhooks::Subscriptions::load_tx(&mut tx, &channels).await?;
        // Accepted sends, the bulk: two multi-row statements per chunk (and a read of the
        // subscribed numbers' rows).
        let mut written = 0;
        let mut written_events = 0;
        // On PostgreSQL 1:1 sends have connections of their own: nothing to give way to (a
        // batch waiting for its BEGIN there would only split the settlement's commits).
        let sqlite = self.backend == crate::Backend::Sqlite;
        let size = if sqlite {
            SQLITE_SETTLE_CHUNK
        } else {
            SETTLE_CHUNK
        };
        for chunk in crate::shaped_chunks(&sent, size) {
            if written > 0 && sqlite && self.priority.sends_waiting() {
                // 1:1 sends wait: commit what is written, leave the rest to the next call.
                let mut left: Vec<usize> = sent[written..].to_vec();
                left.extend(rest.iter().copied());
                left.sort_unstable();
                metrics::counter!("disparo_store_bulk_yields_total", "writer" => "settlements")
                    .increment(1);
                tx.commit().await?;
                *enqueued += written_events;
                return Ok(left);
            }
            written += chunk.len();
            // A join with the new values (in id order), not a CASE per row: a CASE of n
            // branches costs n comparisons for each of the n rows.
            let values: Vec<String> = (0..chunk.len())
                .map(|j| format!("(${}, ${})", 1 + 2 * j, 2 + 2 * j))
                .collect();
            let sql = format!(
                "WITH v (mid, wamid) AS (VALUES {}) \
                 UPDATE messages SET provider_message_id = v.wamid, \
                 status = CASE WHEN status IN ('queued', 'sending') THEN 'sent' ELSE status END \
                 FROM v WHERE messages.id = v.mid",
                values.join(", ")
            );
            let sql = crate::positional(&tx, &sql);
            let mut q = sqlx::query(&sql);
            for &i in chunk {
                if let SendResult::Sent {
                    provider_message_id,
                } = &settlements[i].result
                {
                    q = q.bind(settlements[i].message_id).bind(provider_message_id);
                }
            }
            q.execute(&mut *tx).await?;
            let named: Vec<(i64, &str)> = chunk
                .iter()
                .filter_map(|&i| match &settlements[i].result {
                    SendResult::Sent {
                        provider_message_id,
                    } => Some((settlements[i].message_id, provider_message_id.as_str())),
                    _ => None,
                })
                .collect();
            crate::messages::record_provider_ids_tx(&mut tx, &named).await?;
            // The events' messages are read back after the update, only those of subscribed
            // numbers: a RETURNING of every column for the whole chunk cost SQLite 35–65 µs a
            // row (6× the update itself) when one number of ten had a subscription (D-084).
            let covered: Vec<(i64, usize)> = chunk
                .iter()
                .filter(|i| subscriptions.covers(settlements[**i].channel_id))
                .map(|&i| (settlements[i].message_id, i))
                .collect();
            if !covered.is_empty() {
                let index_of: std::collections::HashMap<i64, usize> =
                    covered.iter().copied().collect();
                let ids: Vec<i64> = covered.iter().map(|(id, _)| *id).collect();
                // In id order (the settlements' order), as the events were before.
                let records = crate::messages::messages_by_id_tx(&mut tx, &ids).await?;
                let mut events = Vec::new();
                for rec in &records {
                    // A status report that came first wrote its `message.sent` (D-103).
                    let first = crate::messages::answered_by_status(rec);
                    if let Some(i) = index_of.get(&rec.id).filter(|_| !first) {
                        events.extend(make_events(*i, rec));
                    }
                }
                written_events += subscriptions.enqueue_tx(&mut tx, &events).await?;
            }
            // Only the claim this send came from (its message; issue 50): a recipient given
            // back and claimed again since is another send's.
            let values: Vec<String> = (0..chunk.len())
                .map(|j| format!("(${}, ${})", 1 + 2 * j, 2 + 2 * j))
                .collect();
            let sql = format!(
                "WITH v (rid, mid) AS (VALUES {}) \
                 UPDATE campaign_recipients SET state = 'sent', updated_at = ${} \
                 FROM v WHERE campaign_recipients.id = v.rid AND campaign_recipients.message_id = v.mid \
                 AND campaign_recipients.state IN ('claimed', 'in_doubt')",
                values.join(", "),
                2 * chunk.len() + 1
            );
            let sql = crate::positional(&tx, &sql);
            let mut q = sqlx::query(&sql);
            for &i in chunk {
                q = q
                    .bind(settlements[i].recipient_id)
                    .bind(settlements[i].message_id);
            }
            q.bind(now).execute(&mut *tx).await?;
        }
        for i in rest {
            let s = &settlements[i];
            match &s.result {
                SendResult::Sent { .. } => {}
                SendResult::Replan => {
                    replan(&mut tx, s.recipient_id, s.message_id, now).await?;
                }
                SendResult::Failed { code, reason, skip } => {
                    sqlx::query(
                        "UPDATE messages SET status = 'failed', failed_at = $2, error_code = $3, error_title = $4 WHERE id = $1",
                    )
                    .bind(s.message_id)
                    .bind(now)
                    .bind(*code)
                    .bind(reason)
                    .execute(&mut *tx)
                    .await?;
                    sqlx::query("UPDATE campaign_recipients SET state = $2, error = $3, updated_at = $4 WHERE id = $1 \
                                 AND message_id = $5 AND state IN ('claimed', 'in_doubt')")
                        .bind(s.recipient_id)
                        .bind(if *skip { "skipped" } else { "failed" })
                        .bind(reason)
                        .bind(now)
                        .bind(s.message_id)
                        .execute(&mut *tx)
                        .await?;
                }
                SendResult::InDoubt => {
                    sqlx::query("UPDATE campaign_recipients SET state = 'in_doubt', updated_at = $2 WHERE id = $1 AND state = 'claimed' AND message_id = $3")
                        .bind(s.recipient_id)
                        .bind(now)
                        .bind(s.message_id)
                        .execute(&mut *tx)
                        .await?;
                }
            }
        }
        tx.commit().await?;
        *enqueued += written_events;
        Ok(Vec::new())
    }

    /// Whether the campaign still has recipients waiting (`planned`) and recipients taken but
    /// not settled (`claimed` or `in_doubt`), and its stored state (read on every tick: the
    /// backstop for moves made by another process, issue 50). One statement, so the answers
    /// come from the same snapshot: asked apart, a settlement that gives a claimed recipient
    /// back (`claimed` → `planned`) between them made both look empty and completed a
    /// campaign with recipients left.
    ///
    /// On SQLite two probes of the `(campaign_id, state, id)` index; on PostgreSQL, where no
    /// index names `state` (D-137), the sums of the campaign's counters (`campaign_counts`,
    /// D-091), which every change of a recipient appends to in its own transaction: exact as
    /// of the statement's snapshot.
    pub async fn campaign_open_work(&self, campaign_id: i64) -> Result<OpenWork> {
        let sql = match self.backend {
            crate::Backend::Sqlite => {
                "SELECT \
               (SELECT COUNT(*) FROM (SELECT 1 AS x FROM campaign_recipients WHERE campaign_id = $1 AND state = 'planned' LIMIT 1) p) AS planned, \
               (SELECT COUNT(*) FROM (SELECT 1 AS x FROM campaign_recipients WHERE campaign_id = $1 AND state IN ('claimed', 'in_doubt') LIMIT 1) o) AS open_work, \
               (SELECT state FROM campaigns WHERE id = $1) AS state, \
               (SELECT auto_paused FROM campaigns WHERE id = $1) AS auto_paused"
            }
            crate::Backend::Postgres => {
                "SELECT \
               COALESCE(SUM(CASE WHEN value = 'planned' THEN n END), 0)::BIGINT AS planned, \
               COALESCE(SUM(CASE WHEN value IN ('claimed', 'in_doubt') THEN n END), 0)::BIGINT AS open_work, \
               (SELECT state FROM campaigns WHERE id = $1) AS state, \
               (SELECT auto_paused FROM campaigns WHERE id = $1) AS auto_paused, \
               COUNT(*) AS parts \
               FROM campaign_counts WHERE campaign_id = $1 AND kind = 'state'"
            }
        };
        let row = sqlx::query(sql)
            .bind(campaign_id)
            .fetch_one(&self.pool)
            .await?;
        if self.backend == crate::Backend::Postgres
            && row.try_get::<i64, _>("parts")? > COUNTS_COMPACT_AT
        {
            self.compact_campaign_counts(campaign_id).await?;
        }
        Ok(OpenWork {
            planned: row.try_get::<i64, _>("planned")? > 0,
            open: row.try_get::<i64, _>("open_work")? > 0,
            state: row
                .try_get::<Option<String>, _>("state")?
                .map(|s| campaign_state(&s))
                .transpose()?,
            auto_paused: row.try_get::<Option<i64>, _>("auto_paused")?.unwrap_or(0) != 0,
        })
    }

    /// At a campaign actor's start, recipients still `claimed` by this process (an actor
    /// that failed) or by a gone one (a crash) were left mid-send: the provider may or may not
    /// have received them, so they become `in_doubt` (D-032). A live peer's claims are its
    /// own (issue 50, D-100). Returns how many.
    pub async fn mark_claimed_in_doubt(&self, campaign_id: i64) -> Result<u64> {
        let sql = format!(
            "UPDATE campaign_recipients SET state = 'in_doubt', updated_at = $2 WHERE campaign_id = $1 AND state = 'claimed' AND {}",
            self.mine_or_gone_sql("claim_session")
        );
        let r = sqlx::query(&sql)
            .bind(campaign_id)
            .bind(now_ms())
            .execute(&self.writer)
            .await?;
        Ok(r.rows_affected())
    }

    /// Resolves in-doubt recipients (D-032): one whose message a status webhook settled (it
    /// has a provider id, or failed at the provider) is `sent` or `failed` at once; one with no
    /// sign of the provider since before `grace_before` (ms) goes back to `planned`, its unsent
    /// message removed, to be sent again.
    pub async fn sweep_in_doubt(
        &self,
        campaign_id: i64,
        grace_before: i64,
    ) -> Result<SweepOutcome> {
        let mut out = self.take_stale_claims(campaign_id, grace_before).await?;
        let resolved = self.resolve_in_doubt(campaign_id, grace_before).await?;
        out.sent = resolved.sent;
        out.failed = resolved.failed;
        out.replanned = resolved.replanned;
        Ok(out)
    }

    /// The first half of [`Store::sweep_in_doubt`]: claims left by a gone process, and this
    /// process's own claims untouched since before `grace_before` (ms), become `in_doubt`
    /// (`taken_over`, `stale`). Reads every claimed row of the campaign: on PostgreSQL, where
    /// no index names `state` (D-137), the campaign's actor runs it a few times per grace
    /// period, not every second.
    pub async fn take_stale_claims(
        &self,
        campaign_id: i64,
        grace_before: i64,
    ) -> Result<SweepOutcome> {
        let mut out = SweepOutcome::default();
        // Sends a gone process left `claimed` are in doubt from now (a peer died mid-send).
        let sql = format!(
            "UPDATE campaign_recipients SET state = 'in_doubt', updated_at = $2 WHERE campaign_id = $1 AND state = 'claimed' \
             AND claim_session IS NOT NULL AND claim_session <> $3 AND claim_session NOT IN {}",
            self.live_sessions_sql()
        );
        out.taken_over = sqlx::query(&sql)
            .bind(campaign_id)
            .bind(now_ms())
            .bind(self.session_id())
            .execute(&self.writer)
            .await?
            .rows_affected();
        // This process's own claims untouched since before the grace: their outcome was lost
        // (the batched writer gave up on a database error, or the number's actor stopped with
        // the batch in its mailbox). Still settled normally if the send is merely slow: a
        // settlement takes `in_doubt` as it takes `claimed`.
        out.stale = sqlx::query(
            "UPDATE campaign_recipients SET state = 'in_doubt', updated_at = $2 WHERE campaign_id = $1 \
             AND state = 'claimed' AND claim_session = $3 AND updated_at < $4",
        )
        .bind(campaign_id)
        .bind(now_ms())
        .bind(self.session_id())
        .bind(grace_before)
        .execute(&self.writer)
        .await?
        .rows_affected();
        Ok(out)
    }

    /// The second half of [`Store::sweep_in_doubt`]: the campaign's in-doubt recipients (this
    /// process's or a gone one's) with a sign of the provider are `sent` or `failed`, and those
    /// without one since before `grace_before` (ms) are planned again. On PostgreSQL the
    /// campaign's counters are read first and nothing else when none is in doubt.
    pub async fn resolve_in_doubt(
        &self,
        campaign_id: i64,
        grace_before: i64,
    ) -> Result<SweepOutcome> {
        let mut out = SweepOutcome::default();
        if self.backend == crate::Backend::Postgres {
            let in_doubt: i64 = sqlx::query_scalar(
                "SELECT COALESCE(SUM(n), 0)::BIGINT FROM campaign_counts WHERE campaign_id = $1 AND kind = 'state' AND value = 'in_doubt'",
            )
            .bind(campaign_id)
            .fetch_one(&self.pool)
            .await?;
            if in_doubt <= 0 {
                return Ok(out);
            }
        }
        // A live peer's in-doubt sends are its own to resolve.
        let sql = format!(
            "SELECT r.id AS rid, r.message_id AS mid, r.updated_at AS since, m.provider_message_id AS wamid, \
             m.status AS status, m.error_title AS error FROM campaign_recipients r LEFT JOIN messages m ON m.id = r.message_id \
             WHERE r.campaign_id = $1 AND r.state = 'in_doubt' AND {} ORDER BY r.id LIMIT 1000",
            self.mine_or_gone_sql("r.claim_session")
        );
        let rows = sqlx::query(&sql)
            .bind(campaign_id)
            .fetch_all(&self.pool)
            .await?;
        if rows.is_empty() {
            return Ok(out);
        }
        let now = now_ms();
        let mut tx = self.begin_write().await?;
        for r in rows {
            let rid: i64 = r.try_get("rid")?;
            let mid: Option<i64> = r.try_get("mid")?;
            let since: i64 = r.try_get("since")?;
            let wamid: Option<String> = r.try_get("wamid")?;
            let status: Option<String> = r.try_get("status")?;
            let error: Option<String> = r.try_get("error")?;
            let (state, n) = match (wamid.is_some(), status.as_deref()) {
                (true, Some("failed")) => ("failed", &mut out.failed),
                (true, _) => ("sent", &mut out.sent),
                (false, _) if since < grace_before => {
                    replan(&mut tx, rid, mid.unwrap_or(0), now).await?;
                    out.replanned += 1;
                    continue;
                }
                (false, _) => continue,
            };
            sqlx::query("UPDATE campaign_recipients SET state = $2, error = $3, updated_at = $4 WHERE id = $1 AND state = 'in_doubt' AND message_id = $5")
                .bind(rid)
                .bind(state)
                .bind(error.filter(|_| state == "failed"))
                .bind(now)
                .bind(mid)
                .execute(&mut *tx)
                .await?;
            *n += 1;
        }
        tx.commit().await?;
        Ok(out)
    }

    /// The numbers with recipients a resend pinned to them still `planned`.
    pub async fn pinned_channels(
        &self,
        campaign_id: i64,
    ) -> Result<std::collections::HashSet<i64>> {
        let rows = sqlx::query(
            "SELECT DISTINCT pinned_channel_id AS c FROM campaign_recipients \
             WHERE campaign_id = $1 AND state = 'planned' AND pinned_channel_id IS NOT NULL",
        )
        .bind(campaign_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok(r.try_get("c")?)).collect()
    }

    /// `POST /campaigns/{id}/resend`: every `failed` recipient goes back to `planned`, pinned
    /// to `channel_id` (only that number sends it); the number joins the campaign (weight 0:
    /// it takes only what is pinned to it) when it is not in it. Returns how many.
    pub async fn resend_failed(&self, campaign_id: i64, channel_id: i64) -> Result<u64> {
        let now = now_ms();
        let mut tx = self.begin_write().await?;
        let r = sqlx::query(
            "UPDATE campaign_recipients SET state = 'planned', pinned_channel_id = $2, channel_id = NULL, \
             message_id = NULL, error = NULL, attempts = attempts + 1, updated_at = $3 \
             WHERE campaign_id = $1 AND state = 'failed'",
        )
        .bind(campaign_id)
        .bind(channel_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO campaign_channels (campaign_id, channel_id, weight) VALUES ($1, $2, 0) \
             ON CONFLICT (campaign_id, channel_id) DO NOTHING",
        )
        .bind(campaign_id)
        .bind(channel_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(r.rows_affected())
    }
}

/// A recipient back to `planned`; its message, if the provider never saw it, removed.
async fn replan(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    recipient_id: i64,
    message_id: i64,
    now: i64,
) -> Result<()> {
    // Only the claim this send came from (issue 50): a recipient settled or claimed again
    // since is left alone, and so is its message.
    // A send given back after its campaign was cancelled is skipped, not planned again.
    let replanned = sqlx::query("UPDATE campaign_recipients SET state = CASE WHEN EXISTS (SELECT 1 FROM campaigns k WHERE k.id = campaign_recipients.campaign_id AND k.state = 'cancelled') THEN 'skipped' ELSE 'planned' END, \
                 error = CASE WHEN EXISTS (SELECT 1 FROM campaigns k WHERE k.id = campaign_recipients.campaign_id AND k.state = 'cancelled') THEN 'cancelada' ELSE error END, \
                 channel_id = NULL, message_id = NULL, claim_session = NULL, updated_at = $2 WHERE id = $1 \
                 AND COALESCE(message_id, 0) = $3 AND state IN ('claimed', 'in_doubt')")
        .bind(recipient_id)
        .bind(now)
        .bind(message_id)
        .execute(&mut **tx)
        .await?
        .rows_affected();
    if replanned == 0 {
        return Ok(());
    }
    sqlx::query("DELETE FROM messages WHERE id = $1 AND provider_message_id IS NULL")
        .bind(message_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::StatusReport;
    use engine::message::ProviderStatus;

    /// Rows of the campaign's recipients in `state`, and of its messages in `status`, read
    /// outside the writer's transactions.
    async fn counts(store: &Store, campaign_id: i64) -> (i64, i64) {
        let sent: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM campaign_recipients WHERE campaign_id = $1 AND state = 'sent'",
        )
        .bind(campaign_id)
        .fetch_one(&store.pool)
        .await
        .unwrap();
        let delivered: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM messages WHERE campaign_id = $1 AND status = 'delivered'",
        )
        .bind(campaign_id)
        .fetch_one(&store.pool)
        .await
        .unwrap();
        (sent, delivered)
    }

    /// Polls `counts` until it changes from `before` (up to 5 s), then checks that it stays
    /// there while the writer waits for the 1:1 batch (D-093).
    async fn settles_at(store: &Store, campaign_id: i64, before: (i64, i64)) -> (i64, i64) {
        let mut now = before;
        for _ in 0..500 {
            now = counts(store, campaign_id).await;
            if now != before {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert_eq!(counts(store, campaign_id).await, now, "still waiting");
        now
    }

    /// Once a bulk writer holds the lane (and so waits for the write connection `conn`, which
    /// the test holds), a batch of 1:1 sends starts waiting and the connection is let go: the
    /// bulk writer begins with the 1:1 batch waiting behind it.
    async fn sends_wait_behind(
        store: &Store,
        conn: sqlx::pool::PoolConnection<sqlx::Any>,
    ) -> crate::sends::Waiting<'_> {
        for _ in 0..500 {
            if store.bulk_lane.available_permits() == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(
            store.bulk_lane.available_permits(),
            0,
            "the writer took the lane"
        );
        // From the lane to its BEGIN there is nothing to wait for.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let waiting = store.priority.wait();
        drop(conn);
        waiting
    }

    /// A SQLite store in `dir` with a marketing campaign on its one number and `n` planned
    /// recipients: the store, the account, the number and the campaign.
    async fn campaign_with_recipients(
        dir: &std::path::Path,
        n: usize,
    ) -> (Store, i64, i64, CampaignRecord) {
        let (store, account, channel) = crate::test_support::store_with_channel(dir).await;
        let campaign =
            crate::test_support::campaign_with_recipients_on(&store, account, channel, n).await;
        (store, account, channel, campaign)
    }

    /// Issue 51: a campaign's state and panel step are typed when read; a stored value this
    /// version does not know is an error (`Corrupt`), never read as another one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unknown_stored_state_is_corrupt_not_a_default() {
        let dir = tempfile::tempdir().unwrap();
        let (store, account, _, campaign) = campaign_with_recipients(dir.path(), 1).await;
        assert_eq!(
            store
                .campaign(AccountId(account), CampaignId(campaign.id))
                .await
                .unwrap()
                .state,
            engine::campaign::CampaignState::Draft
        );
        sqlx::query("UPDATE campaigns SET state = 'arquivada' WHERE id = $1")
            .bind(campaign.id)
            .execute(&store.pool)
            .await
            .unwrap();
        assert!(matches!(
            store.campaign(AccountId(account), CampaignId(campaign.id)).await,
            Err(StorageError::Corrupt(m)) if m.contains("arquivada")
        ));
        assert!(matches!(
            store.campaign_open_work(campaign.id).await,
            Err(StorageError::Corrupt(_))
        ));
        // The panel's step too.
        sqlx::query("UPDATE campaigns SET state = 'draft', stage = 'revisada' WHERE id = $1")
            .bind(campaign.id)
            .execute(&store.pool)
            .await
            .unwrap();
        assert!(matches!(
            store.campaign(AccountId(account), CampaignId(campaign.id)).await,
            Err(StorageError::Corrupt(m)) if m.contains("revisada")
        ));
    }

    /// One share's claim from the cursor `after`.
    async fn claim_from(
        store: &Store,
        account: i64,
        campaign_id: i64,
        share: ClaimShare,
        after: &mut i64,
    ) -> Vec<Claimed> {
        store
            .claim_recipients_after(account, campaign_id, false, &[share], "pt_BR", after)
            .await
            .unwrap()
            .remove(0)
    }

    /// D-137: a claim from a cursor takes the planned recipients past it first and, when
    /// fewer are there than asked, the ones behind it (given back meanwhile); the cursor ends
    /// at the last one taken, 0 when none was.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_claim_from_a_cursor_goes_past_it_then_back_to_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let (store, account, channel, campaign) = campaign_with_recipients(dir.path(), 6).await;
        let ids: Vec<i64> = sqlx::query_scalar(
            "SELECT id FROM campaign_recipients WHERE campaign_id = $1 ORDER BY id",
        )
        .bind(campaign.id)
        .fetch_all(&store.pool)
        .await
        .unwrap();
        let mut after = 0;
        let share = |count| ClaimShare {
            channel_id: channel,
            count,
            template_name: "oferta".into(),
            lease: None,
        };
        let first = claim_from(&store, account, campaign.id, share(2), &mut after).await;
        let at = after;
        let taken = |c: &[Claimed]| c.iter().map(|c| c.recipient_id).collect::<Vec<_>>();
        assert_eq!((taken(&first), at), (vec![ids[0], ids[1]], ids[1]));
        let back = Settlement {
            channel_id: channel,
            recipient_id: first[0].recipient_id,
            message_id: first[0].message_id,
            result: SendResult::Replan,
        };
        store
            .settle_campaign_sends(&[back], |_, _| Vec::new())
            .await
            .unwrap();
        // Past the cursor first: the one given back waits.
        let second = claim_from(&store, account, campaign.id, share(2), &mut after).await;
        let at = after;
        assert_eq!((taken(&second), at), (vec![ids[2], ids[3]], ids[3]));
        // The rest of the audience, then the start: in id order, the cursor on the last taken.
        let third = claim_from(&store, account, campaign.id, share(5), &mut after).await;
        let at = after;
        assert_eq!((taken(&third), at), (vec![ids[0], ids[4], ids[5]], ids[0]));
        let none = claim_from(&store, account, campaign.id, share(5), &mut after).await;
        let at = after;
        assert_eq!((taken(&none), at), (vec![], 0));
    }

    /// D-103 for campaign sends: a status report that reached a claimed recipient's message
    /// before the settlement (by the id in `biz_opaque_callback_data`) wrote its
    /// `message.sent`; the settlement writes one only for the message it answers first.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_settlement_writes_no_sent_event_a_status_wrote_first() {
        use engine::webhook::EventKind;
        let dir = tempfile::tempdir().unwrap();
        let (store, account, channel, campaign) = campaign_with_recipients(dir.path(), 2).await;
        let (sub, _) = store
            .create_subscription(
                account,
                channel,
                "https://example.com/h",
                &[EventKind::MessageSent],
            )
            .await
            .unwrap();
        let share = ClaimShare {
            channel_id: channel,
            count: 2,
            template_name: "oferta".into(),
            lease: None,
        };
        let claimed = store
            .claim_recipients(account, campaign.id, false, &[share], "pt_BR")
            .await
            .unwrap()
            .remove(0);
        let sent_event = |m: &crate::messages::MessageRecord| crate::webhooks::NewEvent {
            account_id: m.account_id,
            channel_id: m.channel_id,
            kind: EventKind::MessageSent,
            channel: serde_json::json!({"id": m.channel_id}),
            data: serde_json::json!({"id": m.id}),
            created_at: 1,
        };
        let early = claimed[0].message_id;
        let reports = [StatusReport {
            provider_message_id: format!("wamid.{early}"),
            callback_message_id: Some(early),
            status: ProviderStatus::Sent,
            at: now_ms(),
            error: None,
        }];
        let (outs, _) = store
            .apply_status_batches(&[(channel, &reports[..])], |_, a| {
                a.accepted_here
                    .then(|| sent_event(&a.message))
                    .into_iter()
                    .collect()
            })
            .await
            .unwrap();
        assert!(outs[0].applied[0].accepted_here);
        let settlements: Vec<Settlement> = claimed
            .iter()
            .map(|c| Settlement {
                channel_id: channel,
                recipient_id: c.recipient_id,
                message_id: c.message_id,
                result: SendResult::Sent {
                    provider_message_id: format!("wamid.{}", c.message_id),
                },
            })
            .collect();
        store
            .settle_campaign_sends(&settlements, |_, m| vec![sent_event(m)])
            .await
            .unwrap();
        let ids: Vec<i64> = sqlx::query(
            "SELECT data FROM webhook_deliveries WHERE subscription_id = $1 ORDER BY id",
        )
        .bind(sub.id)
        .fetch_all(&store.pool)
        .await
        .unwrap()
        .iter()
        .map(|r| {
            let data: String = sqlx::Row::get(r, "data");
            serde_json::from_str::<serde_json::Value>(&data).unwrap()["id"]
                .as_i64()
                .unwrap()
        })
        .collect();
        assert_eq!(
            ids,
            vec![early, claimed[1].message_id],
            "one message.sent each"
        );
    }

    /// While a batch of 1:1 sends waits for SQLite's one write connection, a settlement and a
    /// batch of status webhooks each commit their first chunk and wait for the 1:1 batch to
    /// begin before writing the rest (D-093): the 1:1 batch waits behind one chunk, not the
    /// whole transaction, and nothing committed is written twice.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bulk_writers_give_way_to_waiting_sends_between_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let (store, account, channel, campaign) = campaign_with_recipients(dir.path(), 300).await;
        let share = ClaimShare {
            channel_id: channel,
            count: 300,
            template_name: "oferta".into(),
            lease: None,
        };
        let claimed = store
            .claim_recipients(account, campaign.id, false, &[share], "pt_BR")
            .await
            .unwrap()
            .remove(0);
        assert_eq!(claimed.len(), 300);
        let settlements: Vec<Settlement> = claimed
            .iter()
            .map(|c| Settlement {
                channel_id: channel,
                recipient_id: c.recipient_id,
                message_id: c.message_id,
                result: SendResult::Sent {
                    provider_message_id: format!("wamid.{}", c.message_id),
                },
            })
            .collect();

        // The settlement is let through the lane, then held at its BEGIN (the test has the
        // write connection) until a batch of 1:1 sends waits too.
        let conn = store.writer.acquire().await.unwrap();
        let settling = tokio::spawn({
            let store = store.clone();
            let settlements = settlements.clone();
            async move {
                store
                    .settle_campaign_sends(&settlements, |_, _| Vec::new())
                    .await
            }
        });
        let waiting = sends_wait_behind(&store, conn).await;
        let first = settles_at(&store, campaign.id, (0, 0)).await;
        assert_eq!(
            first,
            (SQLITE_SETTLE_CHUNK as i64, 0),
            "one chunk committed"
        );
        assert!(!settling.is_finished());
        drop(waiting);
        settling.await.unwrap().unwrap();
        assert_eq!(counts(&store, campaign.id).await, (300, 0));

        // 300 webhooks of one report each: the first group is committed, then it waits.
        let reports: Vec<StatusReport> = settlements
            .iter()
            .map(|s| StatusReport {
                provider_message_id: format!("wamid.{}", s.message_id),
                callback_message_id: None,
                status: ProviderStatus::Delivered,
                at: now_ms(),
                error: None,
            })
            .collect();
        let conn = store.writer.acquire().await.unwrap();
        let applying = tokio::spawn({
            let store = store.clone();
            async move {
                let batches: Vec<(i64, &[StatusReport])> =
                    reports.chunks(1).map(|r| (channel, r)).collect();
                store
                    .apply_status_batches(&batches, |_, _| Vec::new())
                    .await
            }
        });
        let waiting = sends_wait_behind(&store, conn).await;
        let first = settles_at(&store, campaign.id, (300, 0)).await;
        assert_eq!(
            first,
            (300, crate::messages::STATUS_GROUP as i64),
            "one group committed"
        );
        assert!(!applying.is_finished());
        drop(waiting);
        let (outcomes, _) = applying.await.unwrap().unwrap();
        assert_eq!(outcomes.len(), 300);
        assert!(outcomes
            .iter()
            .all(|o| o.applied.len() == 1 && o.unchanged == 0));
        assert_eq!(counts(&store, campaign.id).await, (300, 300));
    }

    /// While a batch of 1:1 sends waits for SQLite's one write connection, a claim commits its
    /// first chunk and lets the batch begin before claiming the rest (D-094); a recipient
    /// skipped meanwhile (a cancel does not take the bulk lane) is not claimed, and gets no
    /// message.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_claim_gives_way_to_waiting_sends_and_claims_only_what_is_still_planned() {
        let dir = tempfile::tempdir().unwrap();
        let (store, account, channel, campaign) = campaign_with_recipients(dir.path(), 600).await;
        let claimed_count = || async {
            sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM campaign_recipients WHERE campaign_id = $1 AND state = 'claimed'",
            )
            .bind(campaign.id)
            .fetch_one(&store.pool)
            .await
            .unwrap()
        };
        let conn = store.writer.acquire().await.unwrap();
        let claiming = tokio::spawn({
            let store = store.clone();
            let share = ClaimShare {
                channel_id: channel,
                count: 600,
                template_name: "oferta".into(),
                lease: None,
            };
            async move {
                store
                    .claim_recipients(account, campaign.id, false, &[share], "pt_BR")
                    .await
            }
        });
        let waiting = sends_wait_behind(&store, conn).await;
        let mut first = 0;
        for _ in 0..500 {
            first = claimed_count().await;
            if first > 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert_eq!(first, CLAIM_CHUNK as i64, "one chunk committed");
        assert_eq!(claimed_count().await, first, "still waiting");
        assert!(!claiming.is_finished());
        // A recipient picked for the rest of the claim is skipped meanwhile.
        let last: i64 =
            sqlx::query_scalar("SELECT MAX(id) FROM campaign_recipients WHERE campaign_id = $1")
                .bind(campaign.id)
                .fetch_one(&store.pool)
                .await
                .unwrap();
        sqlx::query("UPDATE campaign_recipients SET state = 'skipped' WHERE id = $1")
            .bind(last)
            .execute(&store.writer)
            .await
            .unwrap();
        drop(waiting);
        let got = claiming.await.unwrap().unwrap().remove(0);
        assert_eq!(got.len(), 599);
        assert!(got.iter().all(|c| c.recipient_id != last));
        assert_eq!(claimed_count().await, 599);
        let messages: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM messages WHERE campaign_id = $1")
                .bind(campaign.id)
                .fetch_one(&store.pool)
                .await
                .unwrap();
        assert_eq!(messages, 599, "no message for the skipped recipient");
    }

    #[test]
    fn a_short_claim_keeps_the_proportions() {
        assert_eq!(proportional(&[30, 10], 100), vec![30, 10]);
        assert_eq!(proportional(&[30, 10], 20), vec![15, 5]);
        assert_eq!(proportional(&[128, 42], 10), vec![8, 2]);
        assert_eq!(proportional(&[1, 1, 1], 2).iter().sum::<usize>(), 2);
        assert_eq!(proportional(&[5], 0), vec![0]);
    }
}
