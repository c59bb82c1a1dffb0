//! Panel campaigns (issue 20, D-062): the account API's `campaigns` and `campaign_recipients`
//! rows with the panel's columns (origin, stage, volume, approval, hygiene job, held), the
//! contacts' hygiene verdicts, the release of valid contacts up to the volume, and the
//! account's dispatch switch.

use crate::campaigns::{read, CampaignRecord, COLUMNS, INSERT_CHUNK};
use crate::{now_ms, Result, StorageError, Store};
use engine::ids::{AccountId, CampaignId};
use engine::panel::Scope;
use serde::Serialize;
use sqlx::any::AnyRow;
use sqlx::Row;

/// A contact as stored for a new panel campaign.
#[derive(Debug, Clone)]
pub struct NewContact {
    /// Normalised digits, or the input as given when it does not parse.
    pub phone: String,
    /// Columns (JSON object) the template's variables read.
    pub vars: String,
    /// Name.
    pub name: Option<String>,
    /// `invalid` when refused before hygiene (malformed), else none (to be checked).
    pub hygiene: Option<&'static str>,
    /// Why it was refused.
    pub reason: Option<String>,
}

/// The panel's columns of a new campaign.
#[derive(Debug, Clone)]
pub struct NewPanelCampaign {
    /// At most this many contacts are sent.
    pub volume: i64,
    /// The creating user.
    pub created_by: i64,
    /// Header image.
    pub image_url: Option<String>,
    /// The button's column or suffix.
    pub button_var: Option<String>,
    /// CSV rows dropped because their number repeated an earlier row's.
    pub import_duplicates: i64,
    /// Blank CSV rows skipped.
    pub import_blank: i64,
}

/// A hygiene verdict to record: `(phone, valid|invalid|unknown, reason, wa_id)`.
pub type Verdict = (String, &'static str, Option<String>, Option<String>);

/// A contact of a panel campaign (`GET /api/campaigns/{id}/contacts`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ContactRecord {
    /// Id (the recipient row).
    pub id: i64,
    /// Number (digits) or the input as given when malformed.
    #[serde(rename = "numero")]
    pub phone: String,
    /// Name.
    #[serde(rename = "nome")]
    pub name: Option<String>,
    /// Other columns (column → value).
    #[serde(rename = "dados")]
    #[schema(value_type = std::collections::BTreeMap<String, String>)]
    pub data: serde_json::Value,
    /// `valid`, `invalid`, `unknown`; none while with the hygiene service.
    #[serde(rename = "higienizacao")]
    pub hygiene: Option<String>,
    /// Why it is not valid.
    #[serde(rename = "motivo")]
    pub reason: Option<String>,
    /// WhatsApp id the service reported.
    pub wa_id: Option<String>,
    /// Send state (`pending` until released; then the recipient states).
    #[serde(rename = "estado")]
    pub state: String,
}

/// A `campaign_recipients` row as a contact.
fn read_contact(r: &AnyRow) -> Result<ContactRecord> {
    let vars: String = r.try_get("vars")?;
    Ok(ContactRecord {
        id: r.try_get("id")?,
        phone: r.try_get("phone")?,
        name: r.try_get("contact_name")?,
        data: serde_json::from_str(&vars).unwrap_or(serde_json::json!({})),
        hygiene: r.try_get("hygiene")?,
        reason: r.try_get("hygiene_reason")?,
        wa_id: r.try_get("wa_id")?,
        state: r.try_get("state")?,
    })
}

/// One send of a panel campaign (`/sends`, `/sends/export`): the recipient and its message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SendRow {
    /// Recipient id (the cursor).
    pub id: i64,
    /// Destination digits.
    #[serde(rename = "numero")]
    pub phone: String,
    /// Contact name.
    #[serde(rename = "nome")]
    pub name: Option<String>,
    /// Sending number's id.
    pub channel_id: Option<i64>,
    /// Sending number (digits).
    #[serde(rename = "numero_envio")]
    pub channel_phone: Option<String>,
    /// Recipient state: `planned`, `claimed`, `in_doubt`, `sent`, `failed`, `skipped`.
    #[serde(rename = "estado")]
    pub state: String,
    /// The send's status, never empty ([`engine::campaign::send_status`]): `queued`,
    /// `sending`, `sent`, `delivered`, `read`, `failed`, `skipped`.
    pub status: String,
    /// Provider message id.
    pub wamid: Option<String>,
    /// Error text.
    #[serde(rename = "erro")]
    pub error: Option<String>,
    /// Sent (ms).
    pub sent_at: Option<i64>,
    /// Delivered (ms).
    pub delivered_at: Option<i64>,
    /// Read (ms).
    pub read_at: Option<i64>,
}

/// Filters of `/sends`.
#[derive(Debug, Clone, Default)]
pub struct SendFilter {
    /// `queued`, `sending`, `sent`, `delivered`, `read`, `failed`, `skipped`.
    pub status: Option<String>,
    /// Sending number.
    pub channel_id: Option<i64>,
    /// Destination digits.
    pub phone: Option<String>,
}

/// Hygiene counts of a campaign's contacts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct HygieneCounts {
    /// Contacts in all.
    pub total: i64,
    /// Valid.
    #[serde(rename = "validos")]
    pub valid: i64,
    /// Invalid.
    #[serde(rename = "invalidos")]
    pub invalid: i64,
    /// The service could not tell (not sent).
    #[serde(rename = "desconhecidos")]
    pub unknown: i64,
    /// Not checked yet.
    #[serde(rename = "pendentes")]
    pub unchecked: i64,
    /// Valid contacts released for sending (planned or beyond).
    #[serde(rename = "liberados")]
    pub released: i64,
}

/// One sending number's counts in a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct NumberCounts {
    /// The number.
    pub channel_id: i64,
    /// Accepted by the provider.
    pub sent: i64,
    /// Delivered (read implies delivered).
    pub delivered: i64,
    /// Read.
    pub read: i64,
    /// Failed.
    pub failed: i64,
}

const SEND_COLUMNS: &str = "r.id, r.phone, r.contact_name, r.channel_id, ch.phone AS channel_phone, r.state, m.status, m.provider_message_id, COALESCE(m.error_title, r.error) AS error, m.sent_at, m.delivered_at, m.read_at";
const SEND_FROM: &str = "FROM campaign_recipients r LEFT JOIN messages m ON m.id = r.message_id LEFT JOIN channels ch ON ch.id = r.channel_id";

fn read_send(r: &AnyRow) -> Result<SendRow> {
    Ok(SendRow {
        id: r.try_get("id")?,
        phone: r.try_get("phone")?,
        name: r.try_get("contact_name")?,
        channel_id: r.try_get("channel_id")?,
        channel_phone: r.try_get("channel_phone")?,
        state: r.try_get("state")?,
        status: engine::campaign::send_status(
            &r.try_get::<String, _>("state")?,
            r.try_get::<Option<String>, _>("status")?.as_deref(),
        )
        .to_string(),
        wamid: r.try_get("provider_message_id")?,
        error: r.try_get("error")?,
        sent_at: r.try_get("sent_at")?,
        delivered_at: r.try_get("delivered_at")?,
        read_at: r.try_get("read_at")?,
    })
}

/// The WHERE of a send filter (binds: `$1` campaign, then phone when given).
fn send_where(f: &SendFilter) -> Result<String> {
    let mut conds = vec![
        "r.campaign_id = $1".to_string(),
        "r.state <> 'pending'".to_string(),
    ];
    if let Some(s) = &f.status {
        conds.push(
            match s.as_str() {
                "queued" => "r.state = 'planned'",
                "sending" => "r.state IN ('claimed', 'in_doubt')",
                "sent" => "r.state = 'sent'",
                "delivered" => "m.delivered_at IS NOT NULL",
                "read" => "m.read_at IS NOT NULL",
                "failed" => "r.state = 'failed'",
                "skipped" => "r.state = 'skipped'",
                _ => return Err(StorageError::Corrupt(format!("unknown send filter {s}"))),
            }
            .to_string(),
        );
    }
    if let Some(c) = f.channel_id {
        conds.push(format!("r.channel_id = {c}"));
    }
    if f.phone.is_some() {
        conds.push("r.phone = $2".into());
    }
    Ok(conds.join(" AND "))
}

impl Store {
    /// Stores a panel campaign with its numbers and contacts in one transaction: the campaign
    /// `draft` at stage `hygiene`, every contact `pending` (a malformed one already `invalid`).
    /// A number repeated among the contacts is stored once. Returns the campaign and how many
    /// contacts were stored.
    pub async fn insert_panel_campaign(
        &self,
        c: &crate::campaigns::NewCampaign,
        p: &NewPanelCampaign,
        contacts: &[NewContact],
    ) -> Result<(CampaignRecord, u64)> {
        let now = now_ms();
        let mut tx = self.begin_write().await?;
        let sql = format!(
            "INSERT INTO campaigns (account_id, name, category, template_id, var_map, state, created_at, updated_at, group_id, mode, origin, stage, volume, created_by, image_url, button_var, import_duplicates, import_blank) \
             VALUES ($1, $2, $3, $4, $5, 'draft', $6, $6, NULL, 'all', 'panel', 'hygiene', $7, $8, $9, $10, $11, $12) RETURNING {COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(c.account_id)
            .bind(&c.name)
            .bind(&c.category)
            .bind(c.template_id)
            .bind(c.var_map.to_string())
            .bind(now)
            .bind(p.volume)
            .bind(p.created_by)
            .bind(&p.image_url)
            .bind(&p.button_var)
            .bind(p.import_duplicates)
            .bind(p.import_blank)
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
        let mut added = 0;
        // 5 parameters a row: a fifth of the plain insert's chunk.
        for chunk in crate::shaped_chunks(contacts, INSERT_CHUNK / 2) {
            let mut sql = String::from("INSERT INTO campaign_recipients (campaign_id, phone, vars, contact_name, hygiene, hygiene_reason, state, updated_at) VALUES ");
            for i in 0..chunk.len() {
                if i > 0 {
                    sql.push_str(", ");
                }
                let b = i * 5 + 3;
                sql.push_str(&format!(
                    "($1, ${b}, ${}, ${}, ${}, ${}, 'pending', $2)",
                    b + 1,
                    b + 2,
                    b + 3,
                    b + 4
                ));
            }
            sql.push_str(" ON CONFLICT (campaign_id, phone) DO NOTHING");
            let mut q = sqlx::query(&sql).bind(rec.id).bind(now);
            for k in chunk {
                q = q
                    .bind(&k.phone)
                    .bind(&k.vars)
                    .bind(&k.name)
                    .bind(k.hygiene)
                    .bind(&k.reason);
            }
            added += q.execute(&mut *tx).await?.rows_affected();
        }
        tx.commit().await?;
        rec.channels = c.channels.clone();
        Ok((rec, added))
    }

    /// The numbers of a campaign's contacts still to be checked by the hygiene service.
    pub async fn unchecked_contacts(&self, campaign_id: i64) -> Result<Vec<String>> {
        let rows = sqlx::query("SELECT phone FROM campaign_recipients WHERE campaign_id = $1 AND hygiene IS NULL ORDER BY id")
            .bind(campaign_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| Ok(r.try_get::<String, _>("phone")?))
            .collect()
    }

    /// The panel campaign waiting at stage `hygiene` for `job`: `(id, account_id)`.
    pub async fn campaign_by_hygiene_job(&self, job: &str) -> Result<Option<(i64, i64)>> {
        let row = sqlx::query("SELECT id, account_id FROM campaigns WHERE hygiene_job = $1 AND stage = 'hygiene' AND origin = 'panel' ORDER BY id DESC LIMIT 1")
            .bind(job)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| Ok((r.try_get("id")?, r.try_get("account_id")?)))
            .transpose()
    }

    /// Records a hygiene submission: the job (none when it could not be submitted), the
    /// stage, and why it failed.
    pub async fn set_hygiene(
        &self,
        campaign_id: i64,
        job: Option<&str>,
        stage: &str,
        error: Option<&str>,
    ) -> Result<()> {
        let now = now_ms();
        sqlx::query("UPDATE campaigns SET hygiene_job = COALESCE($2, hygiene_job), hygiene_submitted_at = CASE WHEN $2 IS NULL THEN hygiene_submitted_at ELSE $5 END, stage = $3, hygiene_error = $4, updated_at = $5 WHERE id = $1")
            .bind(campaign_id)
            .bind(job)
            .bind(stage)
            .bind(error)
            .bind(now)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Applies the hygiene verdicts to the contacts (matched by number) in one transaction;
    /// contacts the report did not name are `unknown` ("sem resultado"); the campaign moves to
    /// stage `pending_approval`. Only a campaign still at stage `hygiene` is changed (two
    /// validations at once apply once): false when it was not.
    pub async fn apply_hygiene(&self, campaign_id: i64, verdicts: &[Verdict]) -> Result<bool> {
        let now = now_ms();
        let _lane = self.bulk_lane("hygiene").await;
        let mut tx = self.begin_write().await?;
        let moved = sqlx::query("UPDATE campaigns SET stage = 'pending_approval', hygiene_error = NULL, updated_at = $2 WHERE id = $1 AND stage = 'hygiene'")
            .bind(campaign_id)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if moved == 0 {
            return Ok(false);
        }
        for chunk in crate::shaped_chunks(verdicts, 256) {
            let values: Vec<String> = (0..chunk.len())
                .map(|j| {
                    let b = 2 + 4 * j;
                    format!("(${b}, ${}, ${}, ${})", b + 1, b + 2, b + 3)
                })
                .collect();
            let sql = format!(
                "WITH v (phone, verdict, reason, wa) AS (VALUES {}) \
                 UPDATE campaign_recipients SET hygiene = v.verdict, hygiene_reason = v.reason, wa_id = v.wa \
                 FROM v WHERE campaign_recipients.campaign_id = $1 AND campaign_recipients.phone = v.phone AND campaign_recipients.hygiene IS NULL",
                values.join(", ")
            );
            let mut q = sqlx::query(&sql).bind(campaign_id);
            for (phone, verdict, reason, wa) in chunk {
                q = q.bind(phone).bind(*verdict).bind(reason).bind(wa);
            }
            q.execute(&mut *tx).await?;
        }
        sqlx::query("UPDATE campaign_recipients SET hygiene = 'unknown', hygiene_reason = 'sem resultado' WHERE campaign_id = $1 AND hygiene IS NULL")
            .bind(campaign_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Records the approval (stage `approved`, by `user_id`, `held` by the dispatch switch).
    /// Only a campaign at stage `pending_approval` is approved: false when it was not.
    pub async fn approve_campaign(
        &self,
        campaign_id: i64,
        user_id: i64,
        held: bool,
    ) -> Result<bool> {
        let now = now_ms();
        let n = sqlx::query("UPDATE campaigns SET stage = 'approved', approved_by = $2, approved_at = $3, held = $4, updated_at = $3 WHERE id = $1 AND stage = 'pending_approval'")
            .bind(campaign_id)
            .bind(user_id)
            .bind(now)
            .bind(held as i64)
            .execute(&self.writer)
            .await?
            .rows_affected();
        Ok(n == 1)
    }

    /// Releases valid contacts for sending (`pending` → `planned`), oldest first, so that at
    /// most `volume` valid contacts are released in all; returns how many were released now.
    /// Two releases of one campaign (two approvals, two processes) take turns on the
    /// campaign's row, so together they never release more than `volume` (issue 50).
    pub async fn release_contacts(&self, campaign_id: i64, volume: i64) -> Result<u64> {
        let mut tx = self.begin_write().await?;
        if self.backend == crate::Backend::Postgres {
            // SQLite's write transaction is exclusive already.
            sqlx::query("SELECT id FROM campaigns WHERE id = $1 FOR UPDATE")
                .bind(campaign_id)
                .fetch_optional(&mut *tx)
                .await?;
        }
        let released: i64 = sqlx::query("SELECT COUNT(*) AS n FROM campaign_recipients WHERE campaign_id = $1 AND hygiene = 'valid' AND state <> 'pending'")
            .bind(campaign_id)
            .fetch_one(&mut *tx)
            .await?
            .try_get("n")?;
        let room = (volume - released).max(0);
        if room == 0 {
            tx.commit().await?;
            return Ok(0);
        }
        let n = sqlx::query(
            "UPDATE campaign_recipients SET state = 'planned', updated_at = $3 WHERE id IN \
             (SELECT id FROM campaign_recipients WHERE campaign_id = $1 AND hygiene = 'valid' AND state = 'pending' ORDER BY id LIMIT $2)",
        )
        .bind(campaign_id)
        .bind(room)
        .bind(now_ms())
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok(n)
    }

    /// Marks a campaign held (or not) by the dispatch switch.
    pub async fn set_campaign_held(&self, campaign_id: i64, held: bool) -> Result<()> {
        sqlx::query("UPDATE campaigns SET held = $2, updated_at = $3 WHERE id = $1")
            .bind(campaign_id)
            .bind(held as i64)
            .bind(now_ms())
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// The account's campaigns in `states` (ids).
    pub async fn campaigns_in_states(&self, account_id: i64, states: &[&str]) -> Result<Vec<i64>> {
        let list: Vec<String> = states.iter().map(|s| format!("'{s}'")).collect();
        let sql = format!(
            "SELECT id FROM campaigns WHERE account_id = $1 AND state IN ({}) ORDER BY id",
            list.join(", ")
        );
        let rows = sqlx::query(&sql)
            .bind(account_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| Ok(r.try_get("id")?)).collect()
    }

    /// The account's campaigns held by the dispatch switch (ids).
    pub async fn held_campaigns(&self, account_id: i64) -> Result<Vec<i64>> {
        let rows =
            sqlx::query("SELECT id FROM campaigns WHERE account_id = $1 AND held = 1 ORDER BY id")
                .bind(account_id)
                .fetch_all(&self.pool)
                .await?;
        rows.iter().map(|r| Ok(r.try_get("id")?)).collect()
    }

    /// The account's dispatch switch as an Admin set it; none: never set since the last start
    /// that named `DISPARO_ENABLED` (the process default decides).
    pub async fn dispatch_switch(&self, account_id: i64) -> Result<Option<bool>> {
        let row = sqlx::query("SELECT dispatch_enabled FROM accounts WHERE id = $1")
            .bind(account_id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or(StorageError::NotFound)?;
        Ok(row
            .try_get::<Option<i64>, _>("dispatch_enabled")?
            .map(|v| v != 0))
    }

    /// Forgets every account's switch (a start that names `DISPARO_ENABLED`: its value
    /// decides again).
    pub async fn reset_dispatch_switches(&self) -> Result<()> {
        sqlx::query("UPDATE accounts SET dispatch_enabled = NULL")
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Accounts with campaigns held by the switch.
    pub async fn accounts_with_held_campaigns(&self) -> Result<Vec<i64>> {
        let rows = sqlx::query(
            "SELECT DISTINCT account_id FROM campaigns WHERE held = 1 ORDER BY account_id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok(r.try_get("account_id")?)).collect()
    }

    /// Stores the account's dispatch switch.
    pub async fn set_dispatch_switch(&self, account_id: i64, on: bool) -> Result<()> {
        sqlx::query("UPDATE accounts SET dispatch_enabled = $2 WHERE id = $1")
            .bind(account_id)
            .bind(on as i64)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// A cancelled campaign's unsent recipients (`pending`, `planned`) become `skipped`
    /// (`cancelada`); returns how many.
    pub async fn skip_unsent(&self, campaign_id: i64) -> Result<u64> {
        Ok(sqlx::query("UPDATE campaign_recipients SET state = 'skipped', error = 'cancelada', updated_at = $2 WHERE campaign_id = $1 AND state IN ('pending', 'planned')")
            .bind(campaign_id)
            .bind(now_ms())
            .execute(&self.writer)
            .await?
            .rows_affected())
    }

    /// Edits a panel campaign's name and volume (each when given).
    pub async fn update_panel_campaign(
        &self,
        campaign_id: i64,
        name: Option<&str>,
        volume: Option<i64>,
    ) -> Result<()> {
        sqlx::query("UPDATE campaigns SET name = COALESCE($2, name), volume = COALESCE($3, volume), updated_at = $4 WHERE id = $1")
            .bind(campaign_id)
            .bind(name)
            .bind(volume)
            .bind(now_ms())
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Test sends in the last 24 h: `(of the campaign, of the user)`.
    pub async fn test_sends_last_day(&self, campaign_id: i64, user_id: i64) -> Result<(i64, i64)> {
        let since = now_ms() - engine::DAY_MS;
        let row = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM panel_test_sends WHERE campaign_id = $1 AND created_at >= $3) AS of_campaign, \
                    (SELECT COUNT(*) FROM panel_test_sends WHERE user_id = $2 AND created_at >= $3) AS of_user",
        )
        .bind(campaign_id)
        .bind(user_id)
        .bind(since)
        .fetch_one(&self.writer)
        .await?;
        Ok((row.try_get("of_campaign")?, row.try_get("of_user")?))
    }

    /// Records a test send to `destination` before it is sent, when in the last 24 h the
    /// campaign has fewer than `per_campaign` and the user fewer than `per_user` (one
    /// statement: the check and the row together). `None` when a limit is reached.
    pub async fn reserve_test_send(
        &self,
        account_id: i64,
        campaign_id: i64,
        user_id: i64,
        destination: &str,
        per_campaign: i64,
        per_user: i64,
    ) -> Result<Option<i64>> {
        let now = now_ms();
        let since = now - engine::DAY_MS;
        let row = sqlx::query(
            "INSERT INTO panel_test_sends (account_id, campaign_id, user_id, destination, created_at) \
             SELECT $1, $2, $3, $4, $5 \
             WHERE (SELECT COUNT(*) FROM panel_test_sends WHERE campaign_id = $2 AND created_at >= $6) < $7 \
               AND (SELECT COUNT(*) FROM panel_test_sends WHERE user_id = $3 AND created_at >= $6) < $8 \
             RETURNING id",
        )
        .bind(account_id)
        .bind(campaign_id)
        .bind(user_id)
        .bind(destination)
        .bind(now)
        .bind(since)
        .bind(per_campaign)
        .bind(per_user)
        .fetch_optional(&self.writer)
        .await?;
        row.map(|r| r.try_get("id")).transpose().map_err(Into::into)
    }

    /// The message a reserved test send became.
    pub async fn set_test_send_message(&self, id: i64, message_id: i64) -> Result<()> {
        sqlx::query("UPDATE panel_test_sends SET message_id = $2 WHERE id = $1")
            .bind(id)
            .bind(message_id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Deletes a campaign that never dispatched, with its numbers and contacts. Conflict
    /// `dispatched` when it has sent anything (a message exists) or started.
    pub async fn delete_undispatched_campaign(&self, campaign_id: i64) -> Result<()> {
        let mut tx = self.begin_write().await?;
        let row = sqlx::query("SELECT started_at, (SELECT COUNT(*) FROM messages WHERE campaign_id = $1) AS sent FROM campaigns WHERE id = $1")
            .bind(campaign_id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StorageError::NotFound)?;
        let started: Option<i64> = row.try_get("started_at")?;
        let sent: i64 = row.try_get("sent")?;
        if started.is_some() || sent > 0 {
            return Err(StorageError::Conflict("dispatched".into()));
        }
        for sql in [
            "DELETE FROM campaign_recipients WHERE campaign_id = $1",
            "DELETE FROM campaign_channels WHERE campaign_id = $1",
            "DELETE FROM campaigns WHERE id = $1",
        ] {
            sqlx::query(sql).bind(campaign_id).execute(&mut *tx).await?;
        }
        if self.backend == crate::Backend::Postgres {
            // Its counters (D-091), written by the database's triggers (SQLite has none).
            sqlx::query("DELETE FROM campaign_counts WHERE campaign_id = $1")
                .bind(campaign_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The account's panel campaigns whose every number is in `scope`, newest first: at most
    /// `limit` (1–200) with an id below `before_id`, in `state` when given.
    pub async fn panel_campaigns(
        &self,
        account_id: i64,
        scope: &Scope,
        state: Option<&str>,
        before_id: Option<i64>,
        limit: i64,
    ) -> Result<Vec<CampaignRecord>> {
        let columns: Vec<String> = COLUMNS.split(", ").map(|c| format!("k.{c}")).collect();
        let mut conds = vec![
            "k.account_id = $1".to_string(),
            "k.origin = 'panel'".to_string(),
            scope_condition(scope),
        ];
        if state.is_some() {
            conds.push("k.state = $2".into());
        }
        if let Some(b) = before_id {
            conds.push(format!("k.id < {b}"));
        }
        let sql = format!(
            "SELECT {} FROM campaigns k WHERE {} ORDER BY k.id DESC LIMIT {}",
            columns.join(", "),
            conds.join(" AND "),
            limit.clamp(1, 200)
        );
        let mut q = sqlx::query(&sql).bind(account_id);
        if let Some(s) = state {
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

    /// A panel campaign of the account whose every number is in `scope` (NotFound otherwise:
    /// an account API campaign, another account's, or one with a number outside the scope).
    pub async fn scoped_panel_campaign(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
    ) -> Result<CampaignRecord> {
        let sql = format!(
            "SELECT k.id FROM campaigns k WHERE k.id = $1 AND k.account_id = $2 AND k.origin = 'panel' AND {}",
            scope_condition(scope)
        );
        sqlx::query(&sql)
            .bind(id)
            .bind(account_id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or(StorageError::NotFound)?;
        self.campaign(AccountId(account_id), CampaignId(id)).await
    }

    /// A campaign's contacts by id: at most `limit` (1–1000) after `after_id`, with hygiene
    /// verdict `hygiene` when given (`valid`, `invalid`, `unknown`, `pending` = not checked).
    pub async fn campaign_contacts(
        &self,
        campaign_id: i64,
        hygiene: Option<&str>,
        after_id: Option<i64>,
        limit: i64,
    ) -> Result<Vec<ContactRecord>> {
        let mut conds = vec!["campaign_id = $1".to_string()];
        match hygiene {
            Some("pending") => conds.push("hygiene IS NULL".into()),
            Some(_) => conds.push("hygiene = $2".into()),
            None => {}
        }
        if let Some(a) = after_id {
            conds.push(format!("id > {a}"));
        }
        let sql = format!(
            "SELECT id, phone, contact_name, vars, hygiene, hygiene_reason, wa_id, state FROM campaign_recipients WHERE {} ORDER BY id LIMIT {}",
            conds.join(" AND "),
            limit.clamp(1, 1000)
        );
        let mut q = sqlx::query(&sql).bind(campaign_id);
        if let Some(h) = hygiene.filter(|h| *h != "pending") {
            q = q.bind(h);
        }
        q.fetch_all(&self.pool)
            .await?
            .iter()
            .map(read_contact)
            .collect()
    }

    /// The contact of campaign `campaign_id` with number `phone` (digits, as stored), if any.
    pub async fn campaign_contact_by_phone(
        &self,
        campaign_id: i64,
        phone: &str,
    ) -> Result<Option<ContactRecord>> {
        sqlx::query(
            "SELECT id, phone, contact_name, vars, hygiene, hygiene_reason, wa_id, state FROM campaign_recipients \
             WHERE campaign_id = $1 AND phone = $2 ORDER BY id LIMIT 1",
        )
        .bind(campaign_id)
        .bind(phone)
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(read_contact)
        .transpose()
    }

    /// The hygiene counts of a campaign's contacts.
    pub async fn hygiene_counts(&self, campaign_id: i64) -> Result<HygieneCounts> {
        let rows = sqlx::query("SELECT hygiene, state, COUNT(*) AS n FROM campaign_recipients WHERE campaign_id = $1 GROUP BY hygiene, state")
            .bind(campaign_id)
            .fetch_all(&self.pool)
            .await?;
        let mut c = HygieneCounts::default();
        for r in rows {
            let h: Option<String> = r.try_get("hygiene")?;
            let state: String = r.try_get("state")?;
            let n: i64 = r.try_get("n")?;
            c.total += n;
            match h.as_deref() {
                Some("valid") => {
                    c.valid += n;
                    if state != "pending" {
                        c.released += n;
                    }
                }
                Some("invalid") => c.invalid += n,
                Some(_) => c.unknown += n,
                None => c.unchecked += n,
            }
        }
        Ok(c)
    }

    /// Per sending number: sent, delivered, read and failed messages of a campaign.
    pub async fn campaign_number_counts(&self, campaign_id: i64) -> Result<Vec<NumberCounts>> {
        let rows = sqlx::query(
            "SELECT channel_id, \
               COUNT(CASE WHEN status IN ('sent', 'delivered', 'read') THEN 1 END) AS sent, \
               COUNT(CASE WHEN status IN ('delivered', 'read') THEN 1 END) AS delivered, \
               COUNT(CASE WHEN status = 'read' THEN 1 END) AS read_count, \
               COUNT(CASE WHEN status = 'failed' THEN 1 END) AS failed \
             FROM messages WHERE campaign_id = $1 GROUP BY channel_id ORDER BY channel_id",
        )
        .bind(campaign_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(NumberCounts {
                    channel_id: r.try_get("channel_id")?,
                    sent: r.try_get("sent")?,
                    delivered: r.try_get("delivered")?,
                    read: r.try_get("read_count")?,
                    failed: r.try_get("failed")?,
                })
            })
            .collect()
    }

    /// A page of a campaign's sends by recipient id: at most `limit` (1–1000) after
    /// `after_id`. Errors: Corrupt for an unknown status filter (the caller checks it first).
    pub async fn campaign_sends(
        &self,
        campaign_id: i64,
        f: &SendFilter,
        after_id: Option<i64>,
        limit: i64,
    ) -> Result<Vec<SendRow>> {
        let mut cond = send_where(f)?;
        if let Some(a) = after_id {
            cond.push_str(&format!(" AND r.id > {a}"));
        }
        let sql = format!(
            "SELECT {SEND_COLUMNS} {SEND_FROM} WHERE {cond} ORDER BY r.id LIMIT {}",
            limit.clamp(1, 1000)
        );
        let mut q = sqlx::query(&sql).bind(campaign_id);
        if let Some(p) = &f.phone {
            q = q.bind(p);
        }
        q.fetch_all(&self.pool)
            .await?
            .iter()
            .map(read_send)
            .collect()
    }

    /// Every send of the filter in id order into `tx` (the CSV export), read as one stream;
    /// an error is sent and ends it.
    pub async fn stream_campaign_sends(
        &self,
        campaign_id: i64,
        f: &SendFilter,
        tx: tokio::sync::mpsc::Sender<Result<SendRow>>,
    ) {
        use futures::TryStreamExt;
        let cond = match send_where(f) {
            Ok(c) => c,
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        };
        let sql = format!("SELECT {SEND_COLUMNS} {SEND_FROM} WHERE {cond} ORDER BY r.id");
        let mut q = sqlx::query(&sql).bind(campaign_id);
        if let Some(p) = &f.phone {
            q = q.bind(p);
        }
        let mut rows = q.fetch(&self.pool);
        loop {
            let item = match rows.try_next().await {
                Ok(Some(row)) => read_send(&row),
                Ok(None) => return,
                Err(e) => Err(e.into()),
            };
            let failed = item.is_err();
            if tx.send(item).await.is_err() || failed {
                return;
            }
        }
    }
}

/// The SQL condition that every number of campaign `k` is in `scope`.
fn scope_condition(scope: &Scope) -> String {
    format!(
        "NOT EXISTS (SELECT 1 FROM campaign_channels cc JOIN channels c ON c.id = cc.channel_id WHERE cc.campaign_id = k.id AND NOT ({}))",
        crate::panel::channel_in_scope(scope)
    )
}
