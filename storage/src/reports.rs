//! Campaign reports (spec "Reports", "Report rows"; decision D-036): one row per campaign
//! recipient (its latest message), filtered, as a page or as a stream for CSV; and the summary
//! per campaign over the same filtered rows, plus totals.

use crate::{Result, Store};
use sqlx::any::AnyRow;
use sqlx::Row;

/// The report statuses of the spec's filter. `delivered` and `read` are timestamps, not
/// stored statuses: a read message matches `sent`, `delivered` and `read`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportStatus {
    /// Waiting for a number (recipient `planned`).
    Queued,
    /// Claimed or in doubt.
    Sending,
    /// Accepted by the provider.
    Sent,
    /// Has a delivery timestamp.
    Delivered,
    /// Has a read timestamp.
    Read,
    /// Failed.
    Failed,
    /// Skipped (invalid recipient).
    Skipped,
}

impl ReportStatus {
    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "queued" => Self::Queued,
            "sending" => Self::Sending,
            "sent" => Self::Sent,
            "delivered" => Self::Delivered,
            "read" => Self::Read,
            "failed" => Self::Failed,
            "skipped" => Self::Skipped,
            _ => return None,
        })
    }

    fn condition(self) -> &'static str {
        match self {
            Self::Queued => "r.state = 'planned'",
            Self::Sending => "r.state IN ('claimed', 'in_doubt')",
            Self::Sent => "r.state = 'sent'",
            Self::Delivered => "m.delivered_at IS NOT NULL",
            Self::Read => "m.read_at IS NOT NULL",
            Self::Failed => "r.state = 'failed'",
            Self::Skipped => "r.state = 'skipped'",
        }
    }
}

/// The filters of both reports; every field narrows the rows.
#[derive(Debug, Clone, Default)]
pub struct ReportFilter {
    /// Rows whose time (message sent, else created, else the campaign's creation) is at or
    /// after this instant (ms).
    pub from_ms: Option<i64>,
    /// …and before this instant (ms, exclusive).
    pub until_ms: Option<i64>,
    /// One campaign.
    pub campaign_id: Option<i64>,
    /// The number that sent the message.
    pub channel_id: Option<i64>,
    /// The campaign's library template.
    pub template_id: Option<i64>,
    /// An audience column and its exact value.
    pub audience: Option<(String, String)>,
    /// Report status.
    pub status: Option<ReportStatus>,
    /// Text in the phone, the audience columns or the campaign name (case-insensitive).
    pub q: Option<String>,
}

/// One row of the detail report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageReportRow {
    /// Campaign recipient id (the row's id).
    pub id: i64,
    /// Campaign.
    pub campaign_id: i64,
    /// Campaign name.
    pub campaign_name: String,
    /// Template name in the library.
    pub template_name: String,
    /// Recipient phone.
    pub phone: String,
    /// Audience columns (JSON object text).
    pub vars: String,
    /// Recipient state (`planned`, `claimed`, `in_doubt`, `sent`, `failed`, `skipped`).
    pub state: String,
    /// The number used, when sent.
    pub channel_id: Option<i64>,
    /// Its phone.
    pub channel_phone: Option<String>,
    /// Our message id.
    pub message_id: Option<i64>,
    /// The provider's message id.
    pub provider_message_id: Option<String>,
    /// Sent (ms).
    pub sent_at: Option<i64>,
    /// Delivered (ms).
    pub delivered_at: Option<i64>,
    /// Read (ms).
    pub read_at: Option<i64>,
    /// The provider's error code.
    pub error_code: Option<i64>,
    /// The provider's error, or why the recipient was skipped.
    pub error: Option<String>,
}

impl MessageReportRow {
    /// The row's report status: `read` or `delivered` when it has that timestamp, else its
    /// state (`planned` → `queued`, `claimed`/`in_doubt` → `sending`).
    pub fn status(&self) -> &'static str {
        if self.read_at.is_some() {
            return "read";
        }
        if self.delivered_at.is_some() {
            return "delivered";
        }
        match self.state.as_str() {
            "planned" => "queued",
            "claimed" | "in_doubt" => "sending",
            "sent" => "sent",
            "failed" => "failed",
            _ => "skipped",
        }
    }
}

/// One row of the summary: a campaign and its counts over the filtered rows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CampaignReportRow {
    /// Campaign (0 on the totals row).
    pub campaign_id: i64,
    /// Name.
    pub name: String,
    /// Template name.
    pub template_name: String,
    /// State.
    pub state: String,
    /// Created (ms).
    pub created_at: i64,
    /// Rows.
    pub total: i64,
    /// Queued.
    pub queued: i64,
    /// Sending.
    pub sending: i64,
    /// Accepted by the provider.
    pub sent: i64,
    /// With a delivery timestamp.
    pub delivered: i64,
    /// With a read timestamp.
    pub read: i64,
    /// Failed.
    pub failed: i64,
    /// Skipped.
    pub skipped: i64,
}

/// A bind value of a built query.
#[derive(Debug, Clone)]
enum Bind {
    Int(i64),
    Text(String),
}

const FROM: &str = "FROM campaign_recipients r \
    JOIN campaigns c ON c.id = r.campaign_id \
    JOIN templates t ON t.id = c.template_id \
    LEFT JOIN messages m ON m.id = r.message_id";

/// Escapes `%`, `_` and `\` for a `LIKE … ESCAPE '\'` pattern.
fn like_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        if matches!(ch, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

/// A WHERE clause under construction: conditions and their numbered binds.
struct Where {
    conds: Vec<String>,
    binds: Vec<Bind>,
}

impl Where {
    /// Adds a condition that uses one new bind (`cond` gets its `$n` number).
    fn add(&mut self, bind: Bind, cond: impl FnOnce(usize) -> String) {
        self.binds.push(bind);
        let n = self.binds.len();
        self.conds.push(cond(n));
    }
}

/// The WHERE clause of a filter and its binds (`$1` is the account).
fn where_clause(account_id: i64, f: &ReportFilter) -> (String, Vec<Bind>) {
    let mut w = Where {
        conds: vec!["c.account_id = $1".to_string()],
        binds: vec![Bind::Int(account_id)],
    };
    let time = "COALESCE(m.sent_at, m.created_at, c.created_at)";
    if let Some(v) = f.from_ms {
        w.add(Bind::Int(v), |n| format!("{time} >= ${n}"));
    }
    if let Some(v) = f.until_ms {
        w.add(Bind::Int(v), |n| format!("{time} < ${n}"));
    }
    if let Some(v) = f.campaign_id {
        w.add(Bind::Int(v), |n| format!("r.campaign_id = ${n}"));
    }
    if let Some(v) = f.channel_id {
        w.add(Bind::Int(v), |n| format!("m.channel_id = ${n}"));
    }
    if let Some(v) = f.template_id {
        w.add(Bind::Int(v), |n| format!("c.template_id = ${n}"));
    }
    if let Some((col, val)) = &f.audience {
        // vars are stored as compact JSON (serde_json): `"col":"val"` appears verbatim.
        let pair = format!(
            "{}:{}",
            serde_json::Value::String(col.clone()),
            serde_json::Value::String(val.clone())
        );
        w.add(Bind::Text(format!("%{}%", like_escape(&pair))), |n| {
            format!("r.vars LIKE ${n} ESCAPE '\\'")
        });
    }
    if let Some(s) = f.status {
        w.conds.push(s.condition().to_string());
    }
    if let Some(q) = f.q.as_deref().map(str::trim).filter(|q| !q.is_empty()) {
        let pattern = format!("%{}%", like_escape(&q.to_lowercase()));
        w.add(Bind::Text(pattern), |n| {
            format!(
                "(LOWER(r.phone) LIKE ${n} ESCAPE '\\' OR LOWER(r.vars) LIKE ${n} ESCAPE '\\' OR LOWER(c.name) LIKE ${n} ESCAPE '\\')"
            )
        });
    }
    (w.conds.join(" AND "), w.binds)
}

fn bind_all<'q>(
    mut q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    binds: &'q [Bind],
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
    for b in binds {
        q = match b {
            Bind::Int(v) => q.bind(*v),
            Bind::Text(v) => q.bind(v.as_str()),
        };
    }
    q
}

const DETAIL_COLUMNS: &str = "r.id, r.campaign_id, c.name AS campaign_name, t.name AS template_name, \
    r.phone, r.vars, r.state, r.error AS recipient_error, m.id AS message_id, m.channel_id, \
    (SELECT ch.phone FROM channels ch WHERE ch.id = m.channel_id) AS channel_phone, \
    m.provider_message_id, m.sent_at, m.delivered_at, m.read_at, m.error_code, m.error_title, m.error_detail";

fn read_detail(r: &AnyRow) -> Result<MessageReportRow> {
    let title: Option<String> = r.try_get("error_title")?;
    let detail: Option<String> = r.try_get("error_detail")?;
    let recipient_error: Option<String> = r.try_get("recipient_error")?;
    let error = match (title, detail) {
        (Some(t), Some(d)) if !d.is_empty() && d != t => Some(format!("{t}: {d}")),
        (Some(t), _) => Some(t),
        (None, Some(d)) => Some(d),
        (None, None) => recipient_error,
    };
    Ok(MessageReportRow {
        id: r.try_get("id")?,
        campaign_id: r.try_get("campaign_id")?,
        campaign_name: r.try_get("campaign_name")?,
        template_name: r.try_get("template_name")?,
        phone: r.try_get("phone")?,
        vars: r.try_get("vars")?,
        state: r.try_get("state")?,
        channel_id: r.try_get("channel_id")?,
        channel_phone: r.try_get("channel_phone")?,
        message_id: r.try_get("message_id")?,
        provider_message_id: r.try_get("provider_message_id")?,
        sent_at: r.try_get("sent_at")?,
        delivered_at: r.try_get("delivered_at")?,
        read_at: r.try_get("read_at")?,
        error_code: r.try_get("error_code")?,
        error,
    })
}

impl Store {
    /// A page of the detail report in row order: `limit` rows after `offset`, or (keyset,
    /// issue 17) after the row id `after` (the caller bounds `limit`). Answers one row more
    /// than asked when there are more.
    pub async fn campaign_messages_page(
        &self,
        account_id: i64,
        filter: &ReportFilter,
        limit: i64,
        offset: i64,
        after: Option<i64>,
    ) -> Result<Vec<MessageReportRow>> {
        let (cond, mut binds) = where_clause(account_id, filter);
        binds.push(Bind::Int(after.unwrap_or(0)));
        let a = binds.len();
        binds.push(Bind::Int(limit + 1));
        binds.push(Bind::Int(offset));
        let (l, o) = (binds.len() - 1, binds.len());
        let sql = format!(
            "SELECT {DETAIL_COLUMNS} {FROM} WHERE {cond} AND r.id > ${a} ORDER BY r.id LIMIT ${l} OFFSET ${o}"
        );
        let rows = bind_all(sqlx::query(&sql), &binds)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(read_detail).collect()
    }

    /// Streams the whole filtered detail report in row order into `tx` (for CSV), holding
    /// at most the channel's capacity in memory; stops early when the receiver is dropped.
    pub async fn stream_campaign_messages(
        &self,
        account_id: i64,
        filter: &ReportFilter,
        tx: tokio::sync::mpsc::Sender<Result<MessageReportRow>>,
    ) {
        use futures::TryStreamExt;
        let (cond, binds) = where_clause(account_id, filter);
        let sql = format!("SELECT {DETAIL_COLUMNS} {FROM} WHERE {cond} ORDER BY r.id");
        let mut rows = bind_all(sqlx::query(&sql), &binds).fetch(&self.pool);
        loop {
            let item = match rows.try_next().await {
                Ok(Some(row)) => read_detail(&row),
                Ok(None) => return,
                Err(e) => Err(e.into()),
            };
            let failed = item.is_err();
            if tx.send(item).await.is_err() || failed {
                return;
            }
        }
    }

    /// The summary: per campaign (newest first) the counts over the filtered rows.
    pub async fn campaign_report(
        &self,
        account_id: i64,
        filter: &ReportFilter,
    ) -> Result<Vec<CampaignReportRow>> {
        let (cond, binds) = where_clause(account_id, filter);
        let sql = format!(
            "SELECT c.id, c.name, t.name AS template_name, c.state, c.created_at, COUNT(*) AS total, \
               COUNT(CASE WHEN r.state = 'planned' THEN 1 END) AS queued, \
               COUNT(CASE WHEN r.state IN ('claimed', 'in_doubt') THEN 1 END) AS sending, \
               COUNT(CASE WHEN r.state = 'sent' THEN 1 END) AS sent, \
               COUNT(m.delivered_at) AS delivered, COUNT(m.read_at) AS read_count, \
               COUNT(CASE WHEN r.state = 'failed' THEN 1 END) AS failed, \
               COUNT(CASE WHEN r.state = 'skipped' THEN 1 END) AS skipped \
             {FROM} WHERE {cond} \
             GROUP BY c.id, c.name, t.name, c.state, c.created_at ORDER BY c.id DESC"
        );
        let rows = bind_all(sqlx::query(&sql), &binds)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(CampaignReportRow {
                    campaign_id: r.try_get("id")?,
                    name: r.try_get("name")?,
                    template_name: r.try_get("template_name")?,
                    state: r.try_get("state")?,
                    created_at: r.try_get("created_at")?,
                    total: r.try_get("total")?,
                    queued: r.try_get("queued")?,
                    sending: r.try_get("sending")?,
                    sent: r.try_get("sent")?,
                    delivered: r.try_get("delivered")?,
                    read: r.try_get("read_count")?,
                    failed: r.try_get("failed")?,
                    skipped: r.try_get("skipped")?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_patterns_escape_wildcards() {
        assert_eq!(like_escape("50%_a\\b"), "50\\%\\_a\\\\b");
    }

    #[test]
    fn filters_number_their_binds_in_order() {
        let f = ReportFilter {
            from_ms: Some(1),
            campaign_id: Some(2),
            status: Some(ReportStatus::Read),
            q: Some(" Ana ".into()),
            ..ReportFilter::default()
        };
        let (cond, binds) = where_clause(7, &f);
        assert!(cond.contains(">= $2") && cond.contains("r.campaign_id = $3"));
        assert!(cond.contains("m.read_at IS NOT NULL"));
        assert!(cond.contains("LOWER(r.phone) LIKE $4"));
        assert_eq!(binds.len(), 4);
        assert!(matches!(&binds[3], Bind::Text(t) if t == "%ana%"));
    }
}
