//! Conversations and messages: outbound sends, inbound messages, and status reports applied in
//! batches, each batch with its outbound webhook events in the same transaction (an outbox).

use crate::webhooks::NewEvent;
use crate::{found, json_col, now_ms, placeholders, Result, StorageError, Store};
use engine::message::{Direction, MessageKind, MessageStatus, ProviderStatus};
use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};
use std::collections::HashMap;

/// A stored message.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageRecord {
    /// Id (disparo's message id).
    pub id: i64,
    /// Owning account.
    pub account_id: i64,
    /// Channel it went through.
    pub channel_id: i64,
    /// Conversation (channel × contact).
    pub conversation_id: i64,
    /// `out` or `in`.
    pub direction: Direction,
    /// Payload kind.
    pub kind: MessageKind,
    /// The contact's phone digits.
    pub contact_phone: String,
    /// Text, caption or display text.
    pub body: Option<String>,
    /// Template name, for templates.
    pub template_name: Option<String>,
    /// Template language, for templates.
    pub template_language: Option<String>,
    /// Template parameters (JSON array of strings), for templates.
    pub params: Option<serde_json::Value>,
    /// Display text kept for a template message.
    pub preview_text: Option<String>,
    /// Media descriptor (JSON), for media messages.
    pub media: Option<serde_json::Value>,
    /// Current status.
    pub status: MessageStatus,
    /// The provider's `wamid`.
    pub provider_message_id: Option<String>,
    /// Provider error code, for failures.
    pub error_code: Option<i64>,
    /// Provider error title, for failures.
    pub error_title: Option<String>,
    /// Provider error details, for failures.
    pub error_detail: Option<String>,
    /// `api`, `campaign`, `inbound`.
    pub source: String,
    /// Created, ms.
    pub created_at: i64,
    /// Sent (accepted), ms.
    pub sent_at: Option<i64>,
    /// Delivered, ms.
    pub delivered_at: Option<i64>,
    /// Read, ms.
    pub read_at: Option<i64>,
    /// Failed, ms.
    pub failed_at: Option<i64>,
    /// A received message's whole content, typed per provider kind (issue 48, D-120); `None`
    /// for sent messages and for those received before it was kept.
    pub content: Option<serde_json::Value>,
}

pub(crate) const COLUMNS: &str = "id, account_id, channel_id, conversation_id, direction, kind, contact_phone, body, template_name, template_language, params, preview_text, media, status, provider_message_id, error_code, error_title, error_detail, source, created_at, sent_at, delivered_at, read_at, failed_at, content";

pub(crate) fn read(row: &AnyRow) -> Result<MessageRecord> {
    let status: String = row.try_get("status")?;
    let direction: String = row.try_get("direction")?;
    let kind: String = row.try_get("kind")?;
    Ok(MessageRecord {
        id: row.try_get("id")?,
        account_id: row.try_get("account_id")?,
        channel_id: row.try_get("channel_id")?,
        conversation_id: row.try_get("conversation_id")?,
        direction: if direction == "in" {
            Direction::In
        } else {
            Direction::Out
        },
        kind: MessageKind::parse(&kind),
        contact_phone: row.try_get("contact_phone")?,
        body: row.try_get("body")?,
        template_name: row.try_get("template_name")?,
        template_language: row.try_get("template_language")?,
        params: json_col(row, "params")?,
        preview_text: row.try_get("preview_text")?,
        media: json_col(row, "media")?,
        status: MessageStatus::parse(&status)
            .ok_or_else(|| StorageError::Corrupt(format!("message status {status}")))?,
        provider_message_id: row.try_get("provider_message_id")?,
        error_code: row.try_get("error_code")?,
        error_title: row.try_get("error_title")?,
        error_detail: row.try_get("error_detail")?,
        source: row.try_get("source")?,
        created_at: row.try_get("created_at")?,
        sent_at: row.try_get("sent_at")?,
        delivered_at: row.try_get("delivered_at")?,
        read_at: row.try_get("read_at")?,
        failed_at: row.try_get("failed_at")?,
        content: json_col(row, "content")?,
    })
}

/// An outbound message to store before it is handed to the provider.
#[derive(Debug, Clone)]
pub struct NewOutbound {
    /// Owning account.
    pub account_id: i64,
    /// Channel.
    pub channel_id: i64,
    /// Contact phone digits.
    pub contact_phone: String,
    /// Payload kind.
    pub kind: MessageKind,
    /// Text or caption.
    pub body: Option<String>,
    /// Template name.
    pub template_name: Option<String>,
    /// Template language.
    pub template_language: Option<String>,
    /// Template parameters (JSON array).
    pub params: Option<serde_json::Value>,
    /// Preview text.
    pub preview_text: Option<String>,
    /// Media descriptor.
    pub media: Option<serde_json::Value>,
    /// `api`, `campaign`.
    pub source: &'static str,
}

/// An inbound message to record and a status report, as the webhook ingest reads them
/// ([`engine::provider_webhook`]).
pub use engine::provider_webhook::{NewInbound, StatusReport};

/// A status report as applied to its message.
#[derive(Debug, Clone)]
pub struct AppliedStatus {
    /// The message after the update.
    pub message: MessageRecord,
    /// The reported status.
    pub reported: ProviderStatus,
    /// This report is how disparo learned that the provider accepted the send: the message
    /// had no provider id yet (its send's answer not recorded: still on its way to the
    /// writer, or lost) and the report found it by the id in `biz_opaque_callback_data`.
    /// Its `message.sent` is written here, before the report's own `message.ack`, and the
    /// answer recorded later writes none ([`answered_by_status`]), so an integrator reads
    /// `sent` before `delivered` for each message (D-103).
    pub accepted_here: bool,
}

/// Whether a status report reached this message before its send's answer was recorded: only
/// status reports set `sent_at` (answers set the provider id and `sent`, never a timestamp),
/// and [`Store::apply_status_batches`] then wrote the message's `message.sent`
/// ([`AppliedStatus::accepted_here`]). Read on the row after the answer's update, in the
/// answer's transaction (its row lock keeps later reports out until it commits).
pub fn answered_by_status(rec: &MessageRecord) -> bool {
    rec.sent_at.is_some()
}

/// What a batch of status reports did.
#[derive(Debug, Clone, Default)]
pub struct StatusBatchOutcome {
    /// Reports that changed their message (status or a first timestamp).
    pub applied: Vec<AppliedStatus>,
    /// Reports that changed nothing (duplicates, out-of-order, stale).
    pub unchanged: usize,
    /// Reports whose message is unknown on this channel.
    pub unknown: usize,
}

/// Most messages per multi-row status `UPDATE` (10 parameters each); shaped chunks.
pub(crate) const STATUS_UPDATE_CHUNK: usize = 128;

/// Most status reports applied between two looks for waiting 1:1 sends: a status transaction
/// ends after such a group, whole webhooks only, when a batch of 1:1 sends waits for the write
/// connection (D-093).
pub(crate) const STATUS_GROUP: usize = 128;

async fn upsert_conversation(
    tx: &mut Transaction<'_, Any>,
    account_id: i64,
    channel_id: i64,
    phone: &str,
    name: Option<&str>,
    inbound_at: Option<i64>,
) -> Result<i64> {
    let row = sqlx::query(
        "INSERT INTO conversations (account_id, channel_id, contact_phone, contact_name, last_inbound_at, created_at) VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (channel_id, contact_phone) DO UPDATE SET \
           contact_name = COALESCE(excluded.contact_name, conversations.contact_name), \
           last_inbound_at = CASE WHEN excluded.last_inbound_at IS NULL THEN conversations.last_inbound_at \
                                  WHEN conversations.last_inbound_at IS NULL OR conversations.last_inbound_at < excluded.last_inbound_at THEN excluded.last_inbound_at \
                                  ELSE conversations.last_inbound_at END \
         RETURNING id",
    )
    .bind(account_id)
    .bind(channel_id)
    .bind(phone)
    .bind(name)
    .bind(inbound_at)
    .bind(now_ms())
    .fetch_one(&mut **tx)
    .await?;
    Ok(row.try_get("id")?)
}

/// Binds an idempotency key (claimed `pending` by the API) to the message it sent, inside the
/// transaction that wrote the message: a key never outlives the knowledge of what it sent.
pub(crate) async fn bind_idempotency_key_tx(
    tx: &mut Transaction<'_, Any>,
    account_id: i64,
    key: &str,
    message_id: i64,
) -> Result<()> {
    sqlx::query("UPDATE idempotency_keys SET message_id = $3 WHERE account_id = $1 AND idem_key = $2 AND state = 'pending'")
        .bind(account_id)
        .bind(key)
        .bind(message_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Most messages per multi-row statement of the writer of 1:1 sends (14 parameters each).
const OUTBOUND_CHUNK: usize = 64;

/// Inserts outbound messages (each with its status) inside `tx` in a few multi-row statements
/// (the conversations, then the messages, per chunk), for the writer of 1:1 sends (D-076).
/// Returns the records in the order of `items`. A contact may appear more than once.
/// Binds a new outbound message's columns after its account, number and conversation, in
/// this order: kind, contact, body, template name and language, params, preview, media,
/// status, source, created at (ms).
pub(crate) fn bind_outbound<'q>(
    q: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>>,
    m: &'q NewOutbound,
    status: MessageStatus,
    now: i64,
) -> sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>> {
    q.bind(m.kind.as_str())
        .bind(&m.contact_phone)
        .bind(&m.body)
        .bind(&m.template_name)
        .bind(&m.template_language)
        .bind(m.params.as_ref().map(|p| p.to_string()))
        .bind(&m.preview_text)
        .bind(m.media.as_ref().map(|p| p.to_string()))
        .bind(status.as_str())
        .bind(m.source)
        .bind(now)
}

/// The (number, account, contact) of each conversation new outbound messages need, sorted,
/// each (number, contact) once: an upsert cannot update one row twice.
pub(crate) fn conversation_keys<'a>(
    messages: impl Iterator<Item = &'a NewOutbound>,
) -> Vec<(i64, i64, &'a str)> {
    let mut keys: Vec<(i64, i64, &str)> = messages
        .map(|m| (m.channel_id, m.account_id, m.contact_phone.as_str()))
        .collect();
    keys.sort_unstable();
    keys.dedup_by(|a, b| (a.0, a.2) == (b.0, b.2));
    keys
}

/// Sorts the records a multi-row insert returned by id and checks they line up with the
/// messages asked for, in order (ids are drawn in the order of the rows): a database that did
/// otherwise fails the batch ([`StorageError::Corrupt`]), not a message.
pub(crate) fn in_batch_order<'a>(
    recs: &mut [MessageRecord],
    asked: impl ExactSizeIterator<Item = &'a NewOutbound>,
) -> Result<()> {
    recs.sort_unstable_by_key(|r| r.id);
    let n = asked.len();
    if recs.len() != n
        || recs
            .iter()
            .zip(asked)
            .any(|(r, m)| r.channel_id != m.channel_id || r.contact_phone != m.contact_phone)
    {
        return Err(StorageError::Corrupt(
            "the inserted messages came back out of order".into(),
        ));
    }
    Ok(())
}

pub(crate) async fn insert_outbound_many_tx(
    tx: &mut Transaction<'_, Any>,
    items: &[(&NewOutbound, MessageStatus)],
) -> Result<Vec<MessageRecord>> {
    let now = now_ms();
    let mut out = Vec::with_capacity(items.len());
    for chunk in crate::shaped_chunks(items, OUTBOUND_CHUNK) {
        // Conversations, created or found; each (number, contact) once per statement (a row
        // cannot be updated twice by one upsert).
        let pairs = conversation_keys(chunk.iter().map(|(m, _)| *m));
        let mut conversation: HashMap<(i64, String), i64> = HashMap::new();
        for part in crate::shaped_chunks(&pairs, OUTBOUND_CHUNK) {
            let values: Vec<String> = (0..part.len())
                .map(|i| {
                    let p = 1 + 4 * i;
                    format!("(${}, ${}, ${}, ${})", p, p + 1, p + 2, p + 3)
                })
                .collect();
            let sql = format!(
                "INSERT INTO conversations (account_id, channel_id, contact_phone, created_at) VALUES {} \
                 ON CONFLICT (channel_id, contact_phone) DO UPDATE SET contact_phone = excluded.contact_phone \
                 RETURNING id, channel_id, contact_phone",
                values.join(", ")
            );
            let sql = crate::positional(tx, &sql);
            let mut q = sqlx::query(&sql);
            for (channel_id, account_id, phone) in part {
                q = q.bind(*account_id).bind(*channel_id).bind(*phone).bind(now);
            }
            for row in q.fetch_all(&mut **tx).await? {
                conversation.insert(
                    (row.try_get("channel_id")?, row.try_get("contact_phone")?),
                    row.try_get("id")?,
                );
            }
        }
        let values: Vec<String> = (0..chunk.len())
            .map(|i| {
                let p = 1 + 14 * i;
                let params: Vec<String> = (p..p + 14).map(|i| format!("${i}")).collect();
                format!(
                    "({}, 'out', {})",
                    params[..4].join(", "),
                    params[4..].join(", ")
                )
            })
            .collect();
        let sql = format!(
            "INSERT INTO messages (account_id, channel_id, conversation_id, kind, direction, contact_phone, body, template_name, template_language, params, preview_text, media, status, source, created_at) \
             VALUES {} RETURNING {COLUMNS}",
            values.join(", ")
        );
        let sql = crate::positional(tx, &sql);
        let mut q = sqlx::query(&sql);
        for (m, status) in chunk {
            let conv = conversation
                .get(&(m.channel_id, m.contact_phone.clone()))
                .copied()
                .ok_or_else(|| {
                    StorageError::Corrupt(format!(
                        "no conversation returned for {}",
                        m.contact_phone
                    ))
                })?;
            q = bind_outbound(
                q.bind(m.account_id).bind(m.channel_id).bind(conv),
                m,
                *status,
                now,
            );
        }
        // Ids are drawn in the order of the rows: sorted by id, the records line up with
        // `chunk` (checked, so a database that did otherwise fails the batch, not a message).
        let mut recs = q
            .fetch_all(&mut **tx)
            .await?
            .iter()
            .map(read)
            .collect::<Result<Vec<_>>>()?;
        in_batch_order(&mut recs, chunk.iter().map(|(m, _)| *m))?;
        out.extend(recs);
    }
    Ok(out)
}

/// The messages with these ids inside `tx` (an unknown id is missing; a repeated one comes
/// back once), in id order: one `IN` lookup per 256 ids.
pub(crate) async fn messages_by_id_tx(
    tx: &mut Transaction<'_, Any>,
    ids: &[i64],
) -> Result<Vec<MessageRecord>> {
    read_by_id_tx(tx, ids, "").await
}

/// PostgreSQL: the same, each row locked (`FOR UPDATE`) as it is read, in id order: `ids`
/// sorted, every writer of message rows takes them so (D-095). A row another transaction
/// changed while this one waited for it is read as that transaction left it.
pub(crate) async fn messages_by_id_locked_tx(
    tx: &mut Transaction<'_, Any>,
    ids: &[i64],
) -> Result<Vec<MessageRecord>> {
    read_by_id_tx(tx, ids, " ORDER BY id FOR UPDATE").await
}

async fn read_by_id_tx(
    tx: &mut Transaction<'_, Any>,
    ids: &[i64],
    suffix: &str,
) -> Result<Vec<MessageRecord>> {
    let mut out = Vec::with_capacity(ids.len());
    for chunk in crate::padded_chunks(ids, 256) {
        let sql = format!(
            "SELECT {COLUMNS} FROM messages WHERE id IN ({}){suffix}",
            placeholders(1, chunk.len())
        );
        let sql = crate::positional(tx, &sql);
        let mut q = sqlx::query(&sql);
        for id in &chunk {
            q = q.bind(*id);
        }
        for row in q.fetch_all(&mut **tx).await? {
            out.push(read(&row)?);
        }
    }
    out.sort_unstable_by_key(|r| r.id);
    out.dedup_by_key(|r| r.id);
    Ok(out)
}

/// Records the provider's acceptance of several messages inside `tx`, in multi-row updates in
/// id order (see [`Store::mark_message_sent`]). Returns the updated records by id; an unknown
/// id is missing from the map.
pub(crate) async fn mark_sent_many_tx(
    tx: &mut Transaction<'_, Any>,
    items: &[(i64, &str)],
) -> Result<HashMap<i64, MessageRecord>> {
    let mut sorted = items.to_vec();
    sorted.sort_unstable_by_key(|(id, _)| *id);
    let mut out = HashMap::with_capacity(items.len());
    for chunk in crate::padded_chunks(&sorted, 2 * OUTBOUND_CHUNK) {
        let values: Vec<String> = (0..chunk.len())
            .map(|i| format!("(${}, ${})", 1 + 2 * i, 2 + 2 * i))
            .collect();
        let sql = format!(
            "WITH v (mid, wamid) AS (VALUES {}) \
             UPDATE messages SET provider_message_id = v.wamid, \
             status = CASE WHEN messages.status IN ('queued', 'sending') THEN 'sent' ELSE messages.status END \
             FROM v WHERE messages.id = v.mid RETURNING {COLUMNS}",
            values.join(", ")
        );
        let sql = crate::positional(tx, &sql);
        let mut q = sqlx::query(&sql);
        for (id, wamid) in &chunk {
            q = q.bind(*id).bind(*wamid);
        }
        for row in q.fetch_all(&mut **tx).await? {
            let rec = read(&row)?;
            out.insert(rec.id, rec);
        }
    }
    record_provider_ids_tx(tx, &sorted).await?;
    Ok(out)
}

/// PostgreSQL: records messages' provider ids, as `(message id, provider id)`, in their own
/// narrow table inside `tx` (D-135), where every lookup by provider id finds them: the
/// statement that wrote them to `messages` changed no indexed column there. An id already
/// recorded keeps its message (a status that named the message first recorded it; the
/// provider never gives one id to two messages). A no-op on SQLite, whose unique index on
/// `messages.provider_message_id` serves the lookups. One multi-row insert per 256 ids.
pub(crate) async fn record_provider_ids_tx(
    tx: &mut Transaction<'_, Any>,
    pairs: &[(i64, &str)],
) -> Result<()> {
    if tx.backend_name() == "SQLite" || pairs.is_empty() {
        return Ok(());
    }
    let mut sorted: Vec<(i64, &str)> = pairs.to_vec();
    // In key order: two transactions recording the same ids wait in one order.
    sorted.sort_unstable_by(|a, b| a.1.cmp(b.1));
    sorted.dedup_by(|a, b| a.1 == b.1);
    for chunk in crate::padded_chunks(&sorted, 256) {
        let values: Vec<String> = (0..chunk.len())
            .map(|i| format!("(${}, ${})", 1 + 2 * i, 2 + 2 * i))
            .collect();
        let sql = format!(
            "INSERT INTO message_provider_ids (provider_message_id, message_id) VALUES {} \
             ON CONFLICT (provider_message_id) DO NOTHING",
            values.join(", ")
        );
        let mut q = sqlx::query(&sql);
        for (id, wamid) in &chunk {
            q = q.bind(*wamid).bind(*id);
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}

impl Store {
    /// A message of this account.
    pub async fn message(&self, account_id: i64, id: i64) -> Result<MessageRecord> {
        let sql = format!("SELECT {COLUMNS} FROM messages WHERE id = $1 AND account_id = $2");
        let row = sqlx::query(&sql)
            .bind(id)
            .bind(account_id)
            .fetch_optional(&self.pool)
            .await?;
        found(row, read)
    }

    /// When the contact last wrote to this channel (ms), which opens the 24-hour window.
    pub async fn last_inbound_at(&self, channel_id: i64, phone: &str) -> Result<Option<i64>> {
        let row = sqlx::query(
            "SELECT last_inbound_at FROM conversations WHERE channel_id = $1 AND contact_phone = $2",
        )
        .bind(channel_id)
        .bind(phone)
        .fetch_optional(&self.pool)
        .await?;
        Ok(match row {
            Some(r) => r.try_get("last_inbound_at")?,
            None => None,
        })
    }

    /// disparo's ids of the account's messages among `provider_ids` (the messages an inbound
    /// message quotes or reacts to), by provider id; those not found are absent.
    pub async fn message_ids_by_provider(
        &self,
        account_id: i64,
        provider_ids: &[String],
    ) -> Result<std::collections::HashMap<String, i64>> {
        let mut found = std::collections::HashMap::new();
        // PostgreSQL finds provider ids in their own table (D-135), SQLite in its index.
        let sql = match self.backend {
            crate::Backend::Postgres => {
                "SELECT m.id FROM message_provider_ids w JOIN messages m ON m.id = w.message_id \
                 WHERE w.provider_message_id = $1 AND m.account_id = $2"
            }
            crate::Backend::Sqlite => {
                "SELECT id FROM messages WHERE provider_message_id = $1 AND account_id = $2"
            }
        };
        for p in provider_ids {
            let row: Option<(i64,)> = sqlx::query_as(sql)
                .bind(p)
                .bind(account_id)
                .fetch_optional(&self.pool)
                .await?;
            if let Some((id,)) = row {
                found.insert(p.clone(), id);
            }
        }
        Ok(found)
    }

    /// Records an inbound message (deduplicated by `wamid`: a provider retry records nothing)
    /// and refreshes the conversation's 24-hour window; events from `make_events` are written
    /// in the same transaction. `None` when it was a duplicate.
    pub async fn record_inbound(
        &self,
        m: &NewInbound,
        make_events: impl FnOnce(&MessageRecord) -> Vec<NewEvent>,
    ) -> Result<Option<(MessageRecord, u64)>> {
        let mut tx = self.begin_write().await?;
        let conversation_id = upsert_conversation(
            &mut tx,
            m.account_id,
            m.channel_id,
            &m.contact_phone,
            m.contact_name.as_deref(),
            Some(m.at),
        )
        .await?;
        // A provider retry inserts nothing: keyed on the provider id, on PostgreSQL in the
        // provider ids' own table (D-135), which also names the new message's id; a copy
        // another process is inserting meanwhile is waited for, then this one inserts nothing.
        let sql = match self.backend {
            crate::Backend::Postgres => format!(
                "WITH w AS (INSERT INTO message_provider_ids (provider_message_id, message_id) \
                 VALUES ($8, nextval(pg_get_serial_sequence('messages', 'id'))) \
                 ON CONFLICT (provider_message_id) DO NOTHING RETURNING message_id) \
                 INSERT INTO messages (id, account_id, channel_id, conversation_id, direction, kind, contact_phone, body, media, status, provider_message_id, source, created_at, content) \
                 SELECT w.message_id, $1, $2, $3, 'in', $4, $5, $6, $7, 'received', $8, 'inbound', $9, $10 FROM w \
                 RETURNING {COLUMNS}"
            ),
            crate::Backend::Sqlite => format!(
                "INSERT INTO messages (account_id, channel_id, conversation_id, direction, kind, contact_phone, body, media, status, provider_message_id, source, created_at, content) \
                 VALUES ($1, $2, $3, 'in', $4, $5, $6, $7, 'received', $8, 'inbound', $9, $10) \
                 ON CONFLICT (provider_message_id) DO NOTHING RETURNING {COLUMNS}"
            ),
        };
        let row = sqlx::query(&sql)
            .bind(m.account_id)
            .bind(m.channel_id)
            .bind(conversation_id)
            .bind(m.kind.as_str())
            .bind(&m.contact_phone)
            .bind(&m.body)
            .bind(m.media.as_ref().map(|v| v.to_string()))
            .bind(&m.provider_message_id)
            .bind(m.at)
            .bind(m.content.to_string())
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else {
            tx.commit().await?;
            return Ok(None);
        };
        let rec = read(&row)?;
        let n = crate::webhooks::enqueue_events_tx(&mut tx, &make_events(&rec)).await?;
        tx.commit().await?;
        Ok(Some((rec, n)))
    }
}

/// The messages with these provider ids (SQLite: the unique index of `messages`), in id
/// order; ids not found are absent.
pub(crate) async fn messages_by_provider_id_tx(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    wamids: &[&str],
) -> Result<Vec<MessageRecord>> {
    let mut out = Vec::with_capacity(wamids.len());
    for chunk in crate::padded_chunks(wamids, 256) {
        let sql = format!(
            "SELECT {COLUMNS} FROM messages WHERE provider_message_id IN ({})",
            placeholders(1, chunk.len())
        );
        let sql = crate::positional(tx, &sql);
        let mut q = sqlx::query(&sql);
        for w in &chunk {
            q = q.bind(*w);
        }
        for row in q.fetch_all(&mut **tx).await? {
            out.push(read(&row)?);
        }
    }
    out.sort_unstable_by_key(|r| r.id);
    Ok(out)
}

impl Store {
    /// Recipients of business-initiated (template) sends on a channel since `since` (ms) that
    /// did not fail, each with the time of the latest send to it, handed to `each` as they are
    /// read (streamed: a day of a busy number is never held at once): what a channel rebuilds
    /// its rolling 24 h counter from.
    pub async fn business_initiated_recipients_since(
        &self,
        channel_id: i64,
        since: i64,
        each: impl FnMut(&str, i64) + Send,
    ) -> Result<()> {
        let query = sqlx::query(
            "SELECT contact_phone, MAX(created_at) AS last_at FROM messages \
             WHERE channel_id = $1 AND direction = 'out' AND kind = 'template' AND status <> 'failed' AND created_at >= $2 \
             GROUP BY contact_phone",
        )
        .bind(channel_id)
        .bind(since);
        recipients_with_last_send(query.fetch(&self.pool), each).await
    }
}

/// Hands each `(contact_phone, last_at)` row of `rows` to `each` as it arrives.
pub(crate) async fn recipients_with_last_send(
    mut rows: futures::stream::BoxStream<'_, std::result::Result<AnyRow, sqlx::Error>>,
    mut each: impl FnMut(&str, i64) + Send,
) -> Result<()> {
    use futures::TryStreamExt;
    while let Some(r) = rows.try_next().await? {
        let phone: String = r.try_get("contact_phone")?;
        each(&phone, r.try_get("last_at")?);
    }
    Ok(())
}

/// Filters of `GET /messages` (issue 17): the read side integrators reconcile with.
#[derive(Debug, Clone, Default)]
pub struct MessageFilter {
    /// One number.
    pub channel_id: Option<i64>,
    /// The contact (digits).
    pub contact: Option<String>,
    /// `in` or `out`.
    pub direction: Option<String>,
    /// `queued`, `sending`, `sent`, `delivered`, `read`, `failed`, `received`.
    pub status: Option<String>,
    /// Created at or after (ms).
    pub since: Option<i64>,
    /// Created before (ms).
    pub until: Option<i64>,
}

impl Store {
    /// The account's messages newest first: at most `limit` (1–501) with an id below
    /// `before_id`, filtered by `f` (keyset on the id: a deep page costs what the first does).
    pub async fn list_messages(
        &self,
        account_id: i64,
        f: &MessageFilter,
        before_id: Option<i64>,
        limit: i64,
    ) -> Result<Vec<MessageRecord>> {
        let mut conds = vec!["account_id = $1".to_string()];
        let mut texts: Vec<&str> = Vec::new();
        if let Some(c) = f.channel_id {
            conds.push(format!("channel_id = {c}"));
        }
        for (column, value) in [
            ("contact_phone", &f.contact),
            ("direction", &f.direction),
            ("status", &f.status),
        ] {
            if let Some(v) = value {
                texts.push(v.as_str());
                conds.push(format!("{column} = ${}", texts.len() + 1));
            }
        }
        if let Some(t) = f.since {
            conds.push(format!("created_at >= {t}"));
        }
        if let Some(t) = f.until {
            conds.push(format!("created_at < {t}"));
        }
        if let Some(b) = before_id {
            conds.push(format!("id < {b}"));
        }
        let sql = format!(
            "SELECT {COLUMNS} FROM messages WHERE {} ORDER BY id DESC LIMIT {}",
            conds.join(" AND "),
            limit.clamp(1, 501)
        );
        let mut q = sqlx::query(&sql).bind(account_id);
        for t in texts {
            q = q.bind(t);
        }
        q.fetch_all(&self.pool).await?.iter().map(read).collect()
    }
}

impl Store {
    /// Outbound messages the provider accepted (they carry its message id), per channel and
    /// hour, created at or after `since_ms`: `(channel_id, hour, count)` where `hour` is the
    /// start (ms, UTC) of the hour of the provider's `sent` status, or of the message's
    /// creation where that status never came (a campaign's send is settled from the provider's
    /// answer, milliseconds after it is created); oldest first. Reads the
    /// `messages_account_created` index.
    pub async fn sends_per_hour(
        &self,
        account_id: i64,
        since_ms: i64,
    ) -> Result<Vec<(i64, i64, i64)>> {
        let rows = sqlx::query(
            "SELECT channel_id, (COALESCE(sent_at, created_at) / 3600000) * 3600000 AS hour, COUNT(*) AS n \
             FROM messages WHERE account_id = $1 AND created_at >= $2 AND direction = 'out' \
             AND provider_message_id IS NOT NULL \
             GROUP BY channel_id, (COALESCE(sent_at, created_at) / 3600000) * 3600000 ORDER BY hour, channel_id",
        )
        .bind(account_id)
        .bind(since_ms)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("channel_id")?,
                    r.try_get("hour")?,
                    r.try_get("n")?,
                ))
            })
            .collect()
    }
}
