//! Status reports applied to their messages in batches, each batch with its outbound webhook
//! events in the same transaction (an outbox).
//!
//! On PostgreSQL, statuses move forward only across processes (issue 50): the rows are locked,
//! in id order, as they are read, so a report is compared with a row's latest version
//! (SQLite's write transaction is exclusive). Applying a group without locks and writing each
//! row only where it was still as read was measured and not kept (D-140).

use crate::messages::{
    messages_by_id_locked_tx, messages_by_id_tx, messages_by_provider_id_tx,
    record_provider_ids_tx, AppliedStatus, MessageRecord, StatusBatchOutcome, StatusReport,
    STATUS_GROUP, STATUS_UPDATE_CHUNK,
};
use crate::webhooks::{NewEvent, Subscriptions};
use crate::{placeholders, Result, Store};
use engine::message::{next_status, MessageStatus, ProviderStatus};
use sqlx::{Any, Row, Transaction};
use std::collections::{BTreeMap, HashMap};

/// One report of a group: the index of its batch, its channel and the report.
type Entry<'a> = (usize, i64, &'a StatusReport);

/// What one report did to its message, as folded onto the rows read.
#[derive(Debug, Clone)]
enum Folded {
    /// It changed the message (status or a first timestamp).
    Applied(Box<AppliedStatus>),
    /// It changed nothing (a duplicate, out of order, stale).
    Unchanged,
    /// Its message is unknown on the batch's channel.
    Unknown,
}

impl Store {
    /// Applies batches of status reports (each one provider webhook's reports for one
    /// channel, as `(channel_id, reports)`) in one transaction, in order: each message moves
    /// by [`engine::message::next_status`], first timestamps are set (`read` also sets
    /// `delivered_at`, since read implies delivered), a status that names our id in
    /// `biz_opaque_callback_data` settles a message whose send answer was lost, and the events
    /// `make_events` builds for each change (given the batch's index) are written to the
    /// outbox in the same transaction, in the reports' order. A report whose message is not
    /// on the batch's channel counts as unknown. Returns what each batch did and how many
    /// webhook deliveries were written. One transaction for many webhooks of many channels
    /// keeps the single SQLite writer free for the send path (issue 6). On SQLite the
    /// transaction is committed early, after a group of whole webhooks ([`STATUS_GROUP`]
    /// reports), when a batch of 1:1 sends waits for the write connection (issue 25 part 2,
    /// D-093); the rest follows in the next transaction, before any other bulk writer. An
    /// error may thus leave the first webhooks applied: the caller refuses them all and the
    /// provider sends them again, which changes nothing for those applied (statuses only move
    /// forward, and an unchanged message gets no event).
    pub async fn apply_status_batches(
        &self,
        batches: &[(i64, &[StatusReport])],
        make_events: impl Fn(usize, &AppliedStatus) -> Vec<NewEvent>,
    ) -> Result<(Vec<StatusBatchOutcome>, u64)> {
        if batches.iter().all(|(_, reports)| reports.is_empty()) {
            return Ok((vec![StatusBatchOutcome::default(); batches.len()], 0));
        }
        let _lane = self.bulk_lane("statuses").await;
        let mut tx = self.begin_write().await?;
        // Events are built only for channels someone subscribed to.
        let channels: Vec<i64> = batches.iter().map(|(c, _)| *c).collect();
        let subscriptions = Subscriptions::load_tx(&mut tx, &channels).await?;
        let mut outs: Vec<StatusBatchOutcome> = vec![Default::default(); batches.len()];
        let mut deliveries = 0;
        let mut start = 0;
        while start < batches.len() {
            if start > 0 && self.priority.sends_waiting() {
                // 1:1 sends wait: commit the webhooks applied, let them begin, go on (the lane
                // is kept: no other bulk writer goes first).
                metrics::counter!("disparo_store_bulk_yields_total", "writer" => "statuses")
                    .increment(1);
                tx.commit().await?;
                self.priority.yield_to_sends().await;
                tx = self.begin_write().await?;
            }
            let end = self.group_end(batches, start);
            let entries: Vec<Entry<'_>> = batches[start..end]
                .iter()
                .enumerate()
                .flat_map(|(k, (channel_id, reports))| {
                    reports.iter().map(move |r| (start + k, *channel_id, r))
                })
                .collect();
            let folded = self.apply_status_group(&mut tx, &entries).await?;
            let mut events = Vec::new();
            for ((b, channel_id, _), result) in entries.iter().zip(folded) {
                let out = &mut outs[*b];
                match result {
                    Folded::Applied(applied) => {
                        if subscriptions.covers(*channel_id) {
                            events.extend(make_events(*b, &applied));
                        }
                        out.applied.push(*applied);
                    }
                    Folded::Unchanged => out.unchanged += 1,
                    Folded::Unknown => out.unknown += 1,
                }
            }
            deliveries += subscriptions.enqueue_tx(&mut tx, &events).await?;
            start = end;
        }
        tx.commit().await?;
        Ok((outs, deliveries))
    }

    /// Where the group of batches from `start` ends: whole webhooks, up to [`STATUS_GROUP`]
    /// reports (at least one webhook) on SQLite; all of them on PostgreSQL, where 1:1 sends
    /// have connections of their own and one group writes its rows in one id order.
    fn group_end(&self, batches: &[(i64, &[StatusReport])], start: usize) -> usize {
        let group = match self.backend {
            crate::Backend::Sqlite => STATUS_GROUP,
            crate::Backend::Postgres => usize::MAX,
        };
        let mut end = start;
        let mut n = 0;
        while end < batches.len() && (end == start || n + batches[end].1.len() <= group) {
            n += batches[end].1.len();
            end += 1;
        }
        end
    }

    /// Applies one group's reports inside `tx`; returns what each did, in their order.
    async fn apply_status_group(
        &self,
        tx: &mut Transaction<'static, Any>,
        entries: &[Entry<'_>],
    ) -> Result<Vec<Folded>> {
        let pg = self.backend == crate::Backend::Postgres;
        let (by_wamid, by_id) = status_targets_tx(tx, entries, pg).await?;
        let fold = fold_reports(entries, by_wamid, by_id);
        write_status_updates_tx(tx, &fold.updates).await?;
        let named: Vec<(i64, &str)> = fold
            .named
            .iter()
            .map(|(id, wamid)| (*id, wamid.as_str()))
            .collect();
        record_provider_ids_tx(tx, &named).await?;
        Ok(fold.results)
    }
}

/// The rows a group's reports fold onto.
struct Fold {
    /// What each report did, in the group's order.
    results: Vec<Folded>,
    /// Each changed message as the group leaves it, by id.
    updates: BTreeMap<i64, MessageRecord>,
    /// Messages a report gave their provider id first (the send's answer was lost, or is
    /// not written yet), as `(message id, provider id)`.
    named: Vec<(i64, String)>,
}

/// Folds a group's reports, in order, onto the rows read (`by_wamid`: by provider id;
/// `by_id`: those found only by the id in `biz_opaque_callback_data`). Pure.
fn fold_reports(
    entries: &[Entry<'_>],
    mut by_wamid: HashMap<String, MessageRecord>,
    by_id: HashMap<i64, MessageRecord>,
) -> Fold {
    let mut fold = Fold {
        results: Vec::with_capacity(entries.len()),
        updates: BTreeMap::new(),
        named: Vec::new(),
    };
    for (_, channel_id, r) in entries {
        let known = by_wamid
            .get(&r.provider_message_id)
            .filter(|m| m.channel_id == *channel_id);
        let current = match known {
            Some(m) => m.clone(),
            None => match r.callback_message_id.and_then(|id| by_id.get(&id)) {
                Some(m)
                    if m.channel_id == *channel_id
                        && (m.provider_message_id.is_none()
                            || m.provider_message_id.as_deref()
                                == Some(r.provider_message_id.as_str())) =>
                {
                    m.clone()
                }
                _ => {
                    fold.results.push(Folded::Unknown);
                    continue;
                }
            },
        };
        let next = advance(&current, r);
        if next == current {
            fold.results.push(Folded::Unchanged);
            continue;
        }
        fold.updates.insert(next.id, next.clone());
        if let Some(w) = &next.provider_message_id {
            by_wamid.insert(w.clone(), next.clone());
            if current.provider_message_id.is_none() {
                fold.named.push((next.id, w.clone()));
            }
        }
        fold.results.push(Folded::Applied(Box::new(AppliedStatus {
            accepted_here: current.provider_message_id.is_none()
                && current.sent_at.is_none()
                && next.sent_at.is_some(),
            message: next,
            reported: r.status,
        })));
    }
    fold
}

/// The message `current` after the report `r`: its status moved forward, its provider id
/// and first timestamps set (a later status implies the earlier ones), a failure's error.
fn advance(current: &MessageRecord, r: &StatusReport) -> MessageRecord {
    let mut next = current.clone();
    if next.provider_message_id.is_none() {
        next.provider_message_id = Some(r.provider_message_id.clone());
    }
    if let Some(s) = next_status(current.status, r.status) {
        next.status = s;
    }
    match r.status {
        ProviderStatus::Sent => {
            next.sent_at = next.sent_at.or(Some(r.at));
        }
        ProviderStatus::Delivered => {
            next.sent_at = next.sent_at.or(Some(r.at));
            next.delivered_at = next.delivered_at.or(Some(r.at));
        }
        ProviderStatus::Read | ProviderStatus::Played => {
            next.sent_at = next.sent_at.or(Some(r.at));
            next.delivered_at = next.delivered_at.or(Some(r.at));
            next.read_at = next.read_at.or(Some(r.at));
        }
        ProviderStatus::Failed if next.status == MessageStatus::Failed => {
            next.failed_at = next.failed_at.or(Some(r.at));
            if let Some((code, title, detail)) = &r.error {
                next.error_code = Some(*code);
                next.error_title = Some(title.clone());
                next.error_detail = detail.clone();
            }
        }
        ProviderStatus::Failed => {}
    }
    next
}

/// The messages a group's reports name, as `(by provider id, by our id)`: by provider id
/// first, then by the id in `biz_opaque_callback_data` for those not found. On PostgreSQL
/// the rows are locked in id order as they are read (two transactions lock what they share
/// in the same order), in one statement per 256 rows (a lock and then a read were two), and
/// a report that names our id (every send of ours does, D-032) is found by it: only the
/// other reports' provider ids are looked up in their own table (D-135, D-145). A row found
/// by our id counts as found by provider id when it carries the report's; one that carries
/// another (callback data that is not the provider's echo of ours) matches nothing.
async fn status_targets_tx(
    tx: &mut Transaction<'static, Any>,
    entries: &[Entry<'_>],
    pg: bool,
) -> Result<(HashMap<String, MessageRecord>, HashMap<i64, MessageRecord>)> {
    // PostgreSQL: every row the group may write, found by provider id or named by its
    // callback data, locked and read in one statement per chunk.
    let mut locked: Option<HashMap<i64, MessageRecord>> = None;
    let known = if pg {
        let uncalled = provider_ids(entries, |r| r.callback_message_id.is_none());
        let found = ids_by_provider_id_tx(tx, &uncalled).await?;
        let called: Vec<i64> = entries
            .iter()
            .filter_map(|(_, _, r)| r.callback_message_id)
            .collect();
        let mut all: Vec<i64> = called.iter().chain(found.iter()).copied().collect();
        all.sort_unstable();
        all.dedup();
        let rows: HashMap<i64, MessageRecord> = messages_by_id_locked_tx(tx, &all)
            .await?
            .into_iter()
            .map(|rec| (rec.id, rec))
            .collect();
        let named_by_us = called
            .iter()
            .filter_map(|id| rows.get(id))
            .filter(|rec| rec.provider_message_id.is_some());
        let known = found
            .iter()
            .filter_map(|id| rows.get(id))
            .chain(named_by_us)
            .cloned()
            .collect();
        locked = Some(rows);
        known
    } else {
        messages_by_provider_id_tx(tx, &provider_ids(entries, |_| true)).await?
    };
    let mut by_wamid: HashMap<String, MessageRecord> = HashMap::new();
    for rec in known {
        by_wamid.insert(rec.provider_message_id.clone().unwrap_or_default(), rec);
    }
    let mut orphans: Vec<i64> = entries
        .iter()
        .filter(|(_, _, r)| !by_wamid.contains_key(&r.provider_message_id))
        .filter_map(|(_, _, r)| r.callback_message_id)
        .collect();
    orphans.sort_unstable();
    orphans.dedup();
    let by_id = match locked {
        Some(mut rows) => orphans
            .iter()
            .filter_map(|id| rows.remove(id).map(|rec| (rec.id, rec)))
            .collect(),
        None => messages_by_id_tx(tx, &orphans)
            .await?
            .into_iter()
            .map(|rec| (rec.id, rec))
            .collect(),
    };
    Ok((by_wamid, by_id))
}

/// The distinct provider ids of the reports `keep` accepts, sorted.
fn provider_ids<'a>(entries: &[Entry<'a>], keep: impl Fn(&StatusReport) -> bool) -> Vec<&'a str> {
    let mut ids: Vec<&str> = entries
        .iter()
        .filter(|(_, _, r)| keep(r))
        .map(|(_, _, r)| r.provider_message_id.as_str())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// PostgreSQL: the ids of the messages with these provider ids, from their own table
/// (D-135), sorted.
async fn ids_by_provider_id_tx(
    tx: &mut Transaction<'static, Any>,
    wamids: &[&str],
) -> Result<Vec<i64>> {
    let mut found: Vec<i64> = Vec::with_capacity(wamids.len());
    for chunk in crate::padded_chunks(wamids, 256) {
        let sql = format!(
            "SELECT message_id FROM message_provider_ids WHERE provider_message_id IN ({})",
            placeholders(1, chunk.len())
        );
        let mut q = sqlx::query(&sql);
        for w in &chunk {
            q = q.bind(*w);
        }
        for row in q.fetch_all(&mut **tx).await? {
            found.push(row.try_get("message_id")?);
        }
    }
    found.sort_unstable();
    found.dedup();
    Ok(found)
}

/// Writes a group's changed messages inside `tx`, one multi-row statement per chunk (a join
/// with the new values; every statement is a round trip) in id order: every writer of message
/// rows (this, the campaign writer) sorts its values by id, so with a plan that follows them
/// (D-095) PostgreSQL rarely finds two transactions waiting on each other; a batch that loses
/// a deadlock is refused and sent again.
async fn write_status_updates_tx(
    tx: &mut Transaction<'static, Any>,
    updates: &BTreeMap<i64, MessageRecord>,
) -> Result<()> {
    let updates: Vec<&MessageRecord> = updates.values().collect();
    for chunk in crate::padded_chunks(&updates, STATUS_UPDATE_CHUNK) {
        let values: Vec<String> = (0..chunk.len())
            .map(|j| {
                let p = 1 + 10 * j;
                let params: Vec<String> = (p..p + 10).map(|i| format!("${i}")).collect();
                format!("({})", params.join(", "))
            })
            .collect();
        let sql = format!(
            "WITH v (mid, status, wamid, sent_at, delivered_at, read_at, failed_at, error_code, error_title, error_detail) AS (VALUES {}) \
             UPDATE messages SET status = v.status, provider_message_id = v.wamid, sent_at = v.sent_at, delivered_at = v.delivered_at, \
             read_at = v.read_at, failed_at = v.failed_at, error_code = v.error_code, error_title = v.error_title, error_detail = v.error_detail \
             FROM v WHERE messages.id = v.mid",
            values.join(", ")
        );
        let sql = crate::positional(tx, &sql);
        let mut q = sqlx::query(&sql);
        for next in &chunk {
            q = q
                .bind(next.id)
                .bind(next.status.as_str())
                .bind(&next.provider_message_id)
                .bind(next.sent_at)
                .bind(next.delivered_at)
                .bind(next.read_at)
                .bind(next.failed_at)
                .bind(next.error_code)
                .bind(&next.error_title)
                .bind(&next.error_detail);
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}
