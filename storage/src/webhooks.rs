//! Outbound webhooks: subscriptions (with sealed signing secrets) and the delivery outbox.
//!
//! A delivery row is written in the same transaction as the change it reports, before any
//! attempt (DESIGN.md §3: an outbox), so a crash between the change and the POST loses
//! nothing; the dispatcher reads due rows, attempts them and records each attempt.

use crate::{found, now_ms, Result, StorageError, Store};
use engine::webhook::{order_key, EventKind, PendingDelivery};
use engine::Secret;
use serde::Serialize;
use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};

/// A webhook subscription of a channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SubscriptionRecord {
    /// Id.
    pub id: i64,
    /// Owning account.
    pub account_id: i64,
    /// The channel whose events it receives.
    pub channel_id: i64,
    /// The integrator's endpoint.
    pub url: String,
    /// Subscribed event kinds (wire names).
    pub events: Vec<String>,
    /// Whether it receives deliveries.
    pub active: bool,
    /// When it was disabled for failing too long, ms.
    pub disabled_at: Option<i64>,
    /// Why it was disabled.
    pub disabled_reason: Option<String>,
    /// Created, ms.
    pub created_at: i64,
}

/// A subscription the dispatcher disabled: what the `webhook.disabled` event and the audit
/// line name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisabledSubscription {
    /// Id.
    pub id: i64,
    /// Owning account.
    pub account_id: i64,
    /// Its endpoint.
    pub url: String,
    /// When its failures began, ms.
    pub failing_since: i64,
}

/// An event to write to the outbox: one delivery per active subscription of the channel that
/// lists its kind.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// Owning account.
    pub account_id: i64,
    /// The channel the event concerns.
    pub channel_id: i64,
    /// Event kind.
    pub kind: EventKind,
    /// The envelope's `channel` object.
    pub channel: serde_json::Value,
    /// The envelope's `data` object.
    pub data: serde_json::Value,
    /// When it happened, ms (the envelope's `created_at`).
    pub created_at: i64,
}

/// A delivery due for an attempt, with what the attempt needs.
#[derive(Debug, Clone)]
pub struct DueDelivery {
    /// Delivery id (the envelope's `delivery_id`).
    pub id: i64,
    /// Subscription id.
    pub subscription_id: i64,
    /// The client of a forwarding lane (D-061): the envelope is the forward's.
    pub client_id: Option<i64>,
    /// Target URL.
    pub url: String,
    /// Signing secret.
    pub secret: Secret,
    /// The secret a rotation replaced, while its overlap lasts: attempts are signed with both.
    pub previous_secret: Option<Secret>,
    /// Event kind (wire name).
    pub event: String,
    /// The envelope's `channel` object.
    pub channel: serde_json::Value,
    /// The envelope's `data` object.
    pub data: serde_json::Value,
    /// Event time, ms.
    pub created_at: i64,
    /// Attempts already made.
    pub attempts: i64,
    /// Its ordering key (D-065): the dispatcher holds the key while the attempt is in flight.
    pub order_key: String,
}

/// A delivery as the delivery log shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeliveryRecord {
    /// Id.
    pub id: i64,
    /// Event kind.
    pub event: String,
    /// `pending`, `delivered` or `failed` (attempts exhausted).
    pub status: String,
    /// Attempts made.
    pub attempts: i64,
    /// HTTP status of the last attempt, when there was an answer.
    pub last_status_code: Option<i64>,
    /// Error of the last attempt (timeout, connection refused, non-2xx).
    pub last_error: Option<String>,
    /// When the next attempt is due, ms (pending only).
    pub next_attempt_at: Option<i64>,
    /// When it was delivered, ms.
    pub delivered_at: Option<i64>,
    /// Event time, ms.
    pub created_at: i64,
}

/// The result of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// 2xx.
    Delivered {
        /// HTTP status.
        status_code: u16,
    },
    /// Failed; try again at `next_at` (ms).
    Retry {
        /// HTTP status, when there was an answer.
        status_code: Option<u16>,
        /// What went wrong.
        error: String,
        /// Next attempt, ms.
        next_at: i64,
    },
    /// Failed and no attempt is left.
    GiveUp {
        /// HTTP status, when there was an answer.
        status_code: Option<u16>,
        /// What went wrong.
        error: String,
    },
}

/// Most attempts in one statement of [`Store::record_attempts`] (six parameters each).
const ATTEMPT_CHUNK: usize = 64;

/// One attempt to record: the delivery, its subscription, what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The delivery (`webhook_deliveries.id`).
    pub id: i64,
    /// Its subscription.
    pub subscription_id: i64,
    /// The result.
    pub outcome: AttemptOutcome,
}

/// The columns an attempt's outcome writes on its delivery.
struct AttemptColumns<'a> {
    status: &'static str,
    status_code: Option<i64>,
    error: Option<&'a str>,
    next_attempt_at: Option<i64>,
    delivered_at: Option<i64>,
}

impl AttemptOutcome {
    fn is_delivered(&self) -> bool {
        matches!(self, AttemptOutcome::Delivered { .. })
    }

    /// The delivery's new `status`, `last_status_code`, `last_error`, `next_attempt_at` and
    /// `delivered_at` (`now`, ms, for a delivery).
    fn columns(&self, now: i64) -> AttemptColumns<'_> {
        match self {
            AttemptOutcome::Delivered { status_code } => AttemptColumns {
                status: "delivered",
                status_code: Some(i64::from(*status_code)),
                error: None,
                next_attempt_at: None,
                delivered_at: Some(now),
            },
            AttemptOutcome::Retry {
                status_code,
                error,
                next_at,
            } => AttemptColumns {
                status: "pending",
                status_code: status_code.map(i64::from),
                error: Some(error),
                next_attempt_at: Some(*next_at),
                delivered_at: None,
            },
            AttemptOutcome::GiveUp { status_code, error } => AttemptColumns {
                status: "failed",
                status_code: status_code.map(i64::from),
                error: Some(error),
                next_attempt_at: None,
                delivered_at: None,
            },
        }
    }
}

fn read_subscription(row: &AnyRow) -> Result<SubscriptionRecord> {
    let events: String = row.try_get("events")?;
    Ok(SubscriptionRecord {
        id: row.try_get("id")?,
        account_id: row.try_get("account_id")?,
        channel_id: row.try_get("channel_id")?,
        url: row.try_get("url")?,
        events: serde_json::from_str(&events).map_err(|e| StorageError::Corrupt(e.to_string()))?,
        active: row.try_get::<i64, _>("active")? != 0,
        disabled_at: row.try_get("disabled_at")?,
        disabled_reason: row.try_get("disabled_reason")?,
        created_at: row.try_get("created_at")?,
    })
}

fn read_delivery(row: &AnyRow) -> Result<DeliveryRecord> {
    Ok(DeliveryRecord {
        id: row.try_get("id")?,
        event: row.try_get("event")?,
        status: row.try_get("status")?,
        attempts: row.try_get("attempts")?,
        last_status_code: row.try_get("last_status_code")?,
        last_error: row.try_get("last_error")?,
        next_attempt_at: row.try_get("next_attempt_at")?,
        delivered_at: row.try_get("delivered_at")?,
        created_at: row.try_get("created_at")?,
    })
}

/// The active webhook subscriptions of some channels, read once inside a transaction: the
/// writers ask [`Subscriptions::covers`] before building a channel's events, then write the
/// events' deliveries from the same rows ([`Subscriptions::enqueue_tx`]).
pub(crate) struct Subscriptions {
    /// (subscription id, account, channel, subscribed kinds), by id.
    rows: Vec<(i64, i64, i64, Vec<String>)>,
}

impl Subscriptions {
    /// Reads the active subscriptions of `channels` (in any order, repeats allowed).
    pub(crate) async fn load_tx(tx: &mut Transaction<'_, Any>, channels: &[i64]) -> Result<Self> {
        let mut channels = channels.to_vec();
        channels.sort_unstable();
        channels.dedup();
        let mut rows = Vec::new();
        for chunk in crate::shaped_chunks(&channels, 256) {
            let sql = format!(
                "SELECT id, account_id, channel_id, events FROM webhook_subscriptions \
                 WHERE active = 1 AND client_id IS NULL AND channel_id IN ({}) ORDER BY id",
                crate::placeholders(1, chunk.len())
            );
            let mut q = sqlx::query(&sql);
            for c in chunk {
                q = q.bind(*c);
            }
            for row in q.fetch_all(&mut **tx).await? {
                let kinds: String = row.try_get("events")?;
                rows.push((
                    row.try_get("id")?,
                    row.try_get("account_id")?,
                    row.try_get("channel_id")?,
                    serde_json::from_str(&kinds)
                        .map_err(|e| StorageError::Corrupt(e.to_string()))?,
                ));
            }
        }
        Ok(Self { rows })
    }

    /// Whether `channel_id` has at least one active subscription.
    pub(crate) fn covers(&self, channel_id: i64) -> bool {
        self.rows.iter().any(|(_, _, c, _)| *c == channel_id)
    }

    /// Writes `events` to the outbox inside `tx`: one delivery per subscription of the event's
    /// channel (in the event's account) that lists its kind, with multi-row statements, in the
    /// events' order. Returns how many deliveries were created.
    pub(crate) async fn enqueue_tx(
        &self,
        tx: &mut Transaction<'_, Any>,
        events: &[NewEvent],
    ) -> Result<u64> {
        if self.rows.is_empty() || events.is_empty() {
            return Ok(0);
        }
        let subscriptions = &self.rows;
        let deliveries: Vec<(i64, &NewEvent)> = events
            .iter()
            .flat_map(|e| {
                subscriptions
                    .iter()
                    .filter(move |(_, account_id, channel_id, kinds)| {
                        *account_id == e.account_id
                            && *channel_id == e.channel_id
                            && kinds.iter().any(|k| k == e.kind.as_str())
                    })
                    .map(move |(id, ..)| (*id, e))
            })
            .collect();
        for chunk in crate::shaped_chunks(&deliveries, DELIVERY_CHUNK) {
            let values: Vec<String> = (0..chunk.len())
                .map(|j| {
                    let p = 1 + 8 * j;
                    format!(
                        "(${}, ${}, ${}, ${}, ${}, 'pending', 0, ${}, ${}, ${})",
                        p,
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
                "INSERT INTO webhook_deliveries (subscription_id, account_id, event, channel, data, status, attempts, next_attempt_at, created_at, order_key) VALUES {}",
                values.join(", ")
            );
            let sql = crate::positional(tx, &sql);
            let mut q = sqlx::query(&sql);
            for (subscription_id, e) in chunk {
                q = bind_event(q.bind(*subscription_id), e);
            }
            q.execute(&mut **tx).await?;
        }
        Ok(deliveries.len() as u64)
    }
}

/// Binds the delivery columns an event fills, in this order: account, event kind, the
/// envelope's `channel` and `data` objects (JSON text), next attempt (ms, the event's time),
/// created (ms), order key. The subscription's id is bound by the caller.
pub(crate) fn bind_event<'q>(
    q: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>>,
    e: &'q NewEvent,
) -> sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>> {
    q.bind(e.account_id)
        .bind(e.kind.as_str())
        .bind(e.channel.to_string())
        .bind(e.data.to_string())
        .bind(e.created_at)
        .bind(e.created_at)
        .bind(order_key(e.kind.as_str(), &e.data))
}

/// PostgreSQL: the deliveries of the events in `events` (a `WITH` clause of columns `mid`,
/// `channel_id` and the seven of [`bind_event`], ordered by `n`) whose message is in
/// `updated` (a `WITH` clause returning `id`), as a data-modifying `WITH` clause named `d`:
/// one delivery per active subscription of the event's channel, in the event's account, that
/// lists its kind — the rule of [`Subscriptions::enqueue_tx`] in one statement (D-098).
pub(crate) fn postgres_deliveries_clause(events: &str, updated: &str) -> String {
    format!(
        "d AS (INSERT INTO webhook_deliveries (subscription_id, account_id, event, channel, data, status, attempts, next_attempt_at, created_at, order_key) \
         SELECT s.id, {events}.account_id, {events}.event, {events}.channel, {events}.data, 'pending', 0, {events}.next_attempt_at, {events}.created_at, {events}.order_key \
         FROM {events} JOIN {updated} ON {updated}.id = {events}.mid \
         JOIN webhook_subscriptions s ON s.active = 1 AND s.client_id IS NULL AND s.channel_id = {events}.channel_id \
         AND s.account_id = {events}.account_id AND s.events::jsonb @> jsonb_build_array({events}.event) \
         ORDER BY {events}.n, s.id RETURNING 1)"
    )
}

/// Most rows per multi-row `INSERT` of deliveries (8 parameters each: 1,024 per statement, well
/// under SQLite's and PostgreSQL's limits); shaped chunks.
const DELIVERY_CHUNK: usize = 128;

/// Writes events to the outbox inside `tx`: one delivery per active subscription of the
/// event's channel (in the event's account) that lists its kind, the subscriptions read once
/// for the batch ([`Subscriptions`]). Returns how many deliveries were created.
pub(crate) async fn enqueue_events_tx(
    tx: &mut Transaction<'_, Any>,
    events: &[NewEvent],
) -> Result<u64> {
    if events.is_empty() {
        return Ok(0);
    }
    let channels: Vec<i64> = events.iter().map(|e| e.channel_id).collect();
    Subscriptions::load_tx(tx, &channels)
        .await?
        .enqueue_tx(tx, events)
        .await
}

/// A new signing secret: `whsec_` + 32 random URL-safe characters.
pub fn new_signing_secret() -> Secret {
    use rand::Rng;
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::thread_rng();
    let body: String = (0..32)
        .map(|_| char::from(ALPHABET[rng.gen_range(0..ALPHABET.len())]))
        .collect();
    Secret::new(format!("whsec_{body}"))
}

/// How many pending deliveries of each subscription the dispatcher looks at per poll, in id
/// order (D-065): a key whose head waits holds at most this many rows of the window; keys
/// behind a longer stall wait for the window to move.
pub const DUE_WINDOW: i64 = 128;

const DELIVERY_COLUMNS: &str =
    "id, event, status, attempts, last_status_code, last_error, next_attempt_at, delivered_at, created_at";

/// The windows of `subscriptions` subscriptions (bound `$1`…`$n`): each one's first
/// [`DUE_WINDOW`] pending deliveries in id order, `(id, subscription_id, order_key,
/// next_attempt_at)`, one `UNION ALL` part each.
///
/// On PostgreSQL the subscription is matched through a one-element array and the rows ordered
/// by `(subscription_id, id)`: an order only the pending index gives. With `subscription_id =
/// $n … ORDER BY id` the planner could also walk the primary key in id order, and it did on a
/// server whose operator set the default cost of a random read (4; D-095 lowers it only where
/// nobody set it) once a backlog was a good part of the table (an endpoint down): every
/// settled delivery older than the backlog was read past at each window read, 23 ms a read
/// with 16,800 pending behind 43,200 settled, against 0.06 ms through the index (D-143).
fn window_sql(backend: crate::Backend, subscriptions: usize) -> String {
    let parts: Vec<String> = (1..=subscriptions)
        .map(|i| {
            let (matched, order) = match backend {
                crate::Backend::Postgres => (
                    format!("subscription_id = ANY (ARRAY[${i}]::BIGINT[])"),
                    "subscription_id, id",
                ),
                crate::Backend::Sqlite => (format!("subscription_id = ${i}"), "id"),
            };
            format!(
                "SELECT * FROM (SELECT id, subscription_id, order_key, next_attempt_at FROM webhook_deliveries \
                 WHERE {matched} AND status = 'pending' ORDER BY {order} LIMIT {DUE_WINDOW}) w{i}"
            )
        })
        .collect();
    parts.join(" UNION ALL ")
}

/// The update of `rows` deliveries with their attempts' results (six values a row: id, status,
/// status code, error, next attempt at, delivered at), settling only rows still `pending`.
///
/// Each row is found by its id. The pending test is written so no index can serve it (`IS
/// TRUE`): planned from statistics read while the backlog was empty, a plain `status =
/// 'pending'` walked every pending row of the outbox through its pending index for each chunk
/// (4.8 ms a chunk of 32 behind a backlog of 20,000, against 1.2 ms by id; D-143).
fn attempts_update_sql(rows: usize) -> String {
    let values: Vec<String> = (0..rows)
        .map(|j| {
            let p = 1 + 6 * j;
            let params: Vec<String> = (p..p + 6).map(|i| format!("${i}")).collect();
            format!("({})", params.join(", "))
        })
        .collect();
    format!(
        "WITH v (did, status, code, err, next_at, delivered_at) AS (VALUES {}) \
         UPDATE webhook_deliveries SET status = v.status, attempts = webhook_deliveries.attempts + 1, \
         last_status_code = v.code, last_error = v.err, next_attempt_at = v.next_at, delivered_at = v.delivered_at \
         FROM v WHERE webhook_deliveries.id = v.did AND (webhook_deliveries.status = 'pending') IS TRUE",
        values.join(", ")
    )
}

impl Store {
    /// Creates a subscription with a new signing secret (`whsec_` + 32 random characters),
    /// sealed before it is written. The secret is returned once, here, and never again.
    /// Conflict `subscriptions_per_channel` when the channel has
    /// [`engine::webhook::MAX_SUBSCRIPTIONS_PER_CHANNEL`] already (checked in the same
    /// transaction).
    pub async fn create_subscription(
        &self,
        account_id: i64,
        channel_id: i64,
        url: &str,
        events: &[EventKind],
    ) -> Result<(SubscriptionRecord, Secret)> {
        let secret = new_signing_secret();
        let names: Vec<&str> = events.iter().map(|e| e.as_str()).collect();
        // The secret is sealed for the row's id (D-052): written in the same transaction.
        let mut tx = self.begin_write().await?;
        let existing: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM webhook_subscriptions WHERE account_id = $1 AND channel_id = $2 AND client_id IS NULL",
        )
        .bind(account_id)
        .bind(channel_id)
        .fetch_one(&mut *tx)
        .await?
        .try_get("n")?;
        if existing >= engine::webhook::MAX_SUBSCRIPTIONS_PER_CHANNEL {
            return Err(StorageError::Conflict("subscriptions_per_channel".into()));
        }
        let row = sqlx::query(
            "INSERT INTO webhook_subscriptions (account_id, channel_id, url, events, secret_enc, active, created_at) VALUES ($1, $2, $3, $4, '', 1, $5) \
             RETURNING id, account_id, channel_id, url, events, active, disabled_at, disabled_reason, created_at",
        )
        .bind(account_id)
        .bind(channel_id)
        .bind(url)
        .bind(serde_json::to_string(&names).expect("strings serialise"))
        .bind(now_ms())
        .fetch_one(&mut *tx)
        .await?;
        let record = read_subscription(&row)?;
        sqlx::query("UPDATE webhook_subscriptions SET secret_enc = $2 WHERE id = $1")
            .bind(record.id)
            .bind(
                self.cipher
                    .seal(&secret, "webhook_subscriptions", "secret_enc", record.id),
            )
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok((record, secret))
    }

    /// The channel's subscriptions (account-scoped).
    pub async fn list_subscriptions(
        &self,
        account_id: i64,
        channel_id: i64,
    ) -> Result<Vec<SubscriptionRecord>> {
        let rows = sqlx::query(
            "SELECT id, account_id, channel_id, url, events, active, disabled_at, disabled_reason, created_at FROM webhook_subscriptions WHERE account_id = $1 AND channel_id = $2 AND client_id IS NULL ORDER BY id",
        )
        .bind(account_id)
        .bind(channel_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(read_subscription).collect()
    }

    /// A subscription of this account.
    pub async fn subscription(&self, account_id: i64, id: i64) -> Result<SubscriptionRecord> {
        let row = sqlx::query(
            "SELECT id, account_id, channel_id, url, events, active, disabled_at, disabled_reason, created_at FROM webhook_subscriptions WHERE account_id = $1 AND id = $2 AND client_id IS NULL",
        )
        .bind(account_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        found(row, read_subscription)
    }

    /// Changes a subscription's `url`, `events` and `active` (each when given); turning it
    /// active again clears why it was disabled (its pending deliveries resume).
    pub async fn update_subscription(
        &self,
        account_id: i64,
        id: i64,
        url: Option<&str>,
        events: Option<&[EventKind]>,
        active: Option<bool>,
    ) -> Result<SubscriptionRecord> {
        let names = events.map(|e| {
            serde_json::to_string(&e.iter().map(|k| k.as_str()).collect::<Vec<_>>())
                .expect("strings serialise")
        });
        let row = sqlx::query(
            "UPDATE webhook_subscriptions SET url = COALESCE($3, url), events = COALESCE($4, events), \
               active = COALESCE($5, active), \
               disabled_at = CASE WHEN $5 = 1 THEN NULL ELSE disabled_at END, \
               disabled_reason = CASE WHEN $5 = 1 THEN NULL ELSE disabled_reason END, \
               failing_since = CASE WHEN $5 = 1 THEN NULL ELSE failing_since END \
             WHERE account_id = $1 AND id = $2 AND client_id IS NULL \
             RETURNING id, account_id, channel_id, url, events, active, disabled_at, disabled_reason, created_at",
        )
        .bind(account_id)
        .bind(id)
        .bind(url)
        .bind(names)
        .bind(active.map(i64::from))
        .fetch_optional(&self.writer)
        .await?;
        found(row, read_subscription)
    }

    /// Deletes a subscription and its delivery log (pending deliveries are dropped).
    pub async fn delete_subscription(&self, account_id: i64, id: i64) -> Result<()> {
        let mut tx = self.begin_write().await?;
        let exists = sqlx::query(
            "SELECT id FROM webhook_subscriptions WHERE account_id = $1 AND id = $2 AND client_id IS NULL",
        )
        .bind(account_id)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        if exists.is_none() {
            return Err(StorageError::NotFound);
        }
        sqlx::query("DELETE FROM webhook_deliveries WHERE subscription_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM webhook_subscriptions WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Gives a subscription a new signing secret (returned once); the previous one keeps
    /// signing, beside it, until `overlap_until` (ms).
    pub async fn rotate_subscription_secret(
        &self,
        account_id: i64,
        id: i64,
        overlap_until: i64,
    ) -> Result<Secret> {
        let mut tx = self.begin_write().await?;
        let row = sqlx::query(
            "SELECT secret_enc FROM webhook_subscriptions WHERE account_id = $1 AND id = $2 AND client_id IS NULL",
        )
        .bind(account_id)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(StorageError::NotFound)?;
        let sealed: String = row.try_get("secret_enc")?;
        let current = self
            .cipher
            .open(&sealed, "webhook_subscriptions", "secret_enc", id)?;
        let fresh = new_signing_secret();
        sqlx::query(
            "UPDATE webhook_subscriptions SET secret_enc = $2, previous_secret_enc = $3, previous_secret_until = $4 WHERE id = $1",
        )
        .bind(id)
        .bind(self.cipher.seal(&fresh, "webhook_subscriptions", "secret_enc", id))
        .bind(
            self.cipher
                .seal(&current, "webhook_subscriptions", "previous_secret_enc", id),
        )
        .bind(overlap_until)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(fresh)
    }

    /// Queues a failed delivery of the subscription again (a fresh run of attempts, now).
    /// NotFound when it is not the subscription's; Conflict `not_failed` when it is pending
    /// or delivered.
    pub async fn retry_delivery(
        &self,
        account_id: i64,
        subscription_id: i64,
        delivery_id: i64,
    ) -> Result<()> {
        let row = sqlx::query(
            "SELECT status FROM webhook_deliveries WHERE id = $1 AND subscription_id = $2 AND account_id = $3",
        )
        .bind(delivery_id)
        .bind(subscription_id)
        .bind(account_id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or(StorageError::NotFound)?;
        let status: String = row.try_get("status")?;
        if status != "failed" {
            return Err(StorageError::Conflict("not_failed".into()));
        }
        sqlx::query(
            "UPDATE webhook_deliveries SET status = 'pending', attempts = 0, next_attempt_at = $2 WHERE id = $1 AND status = 'failed'",
        )
        .bind(delivery_id)
        .bind(now_ms())
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Queues every failed delivery of the subscription created at or after `since` (ms)
    /// again; returns how many.
    pub async fn recover_deliveries(
        &self,
        account_id: i64,
        subscription_id: i64,
        since: i64,
    ) -> Result<u64> {
        Ok(sqlx::query(
            "UPDATE webhook_deliveries SET status = 'pending', attempts = 0, next_attempt_at = $4 \
             WHERE subscription_id = $1 AND account_id = $2 AND status = 'failed' AND created_at >= $3",
        )
        .bind(subscription_id)
        .bind(account_id)
        .bind(since)
        .bind(now_ms())
        .execute(&self.writer)
        .await?
        .rows_affected())
    }

    /// Writes events to the outbox in a transaction of their own.
    pub async fn enqueue_events(&self, events: &[NewEvent]) -> Result<u64> {
        let mut tx = self.begin_write().await?;
        let n = enqueue_events_tx(&mut tx, events).await?;
        tx.commit().await?;
        Ok(n)
    }

    /// The outbox's window (D-065): the first [`DUE_WINDOW`] pending deliveries in id order of
    /// each active subscription with pending work (one index probe on
    /// `webhook_deliveries_queue` each, so a dead endpoint's growing backlog is never
    /// rescanned, issue 15), in no particular order. A subscription that has exactly
    /// [`DUE_WINDOW`] rows here may have more beyond. A client's lane (D-061) is left out while
    /// the client has no URL or secret.
    pub async fn pending_window(&self) -> Result<Vec<PendingDelivery>> {
        // The subscriptions with pending work: one index probe each. A client's lane (D-061)
        // takes the client's current URL and secret, and waits while the client has none.
        // Planned at each call, not prepared: a parameterless prepared statement keeps the
        // plan it got when `webhook_deliveries` was empty (a scan of the whole table) until
        // the next ANALYZE, and on PostgreSQL that plan grew with the table to 7–120 ms a
        // call, the database's largest cost while a campaign ran (issue 25 part 3).
        // Only the subscriptions this process holds the lease of (issue 50, D-100).
        let sql = format!(
            "SELECT s.id FROM webhook_subscriptions s LEFT JOIN clients cl ON cl.id = s.client_id \
             WHERE s.active = 1 AND {} \
               AND (s.client_id IS NULL OR (cl.webhook_url IS NOT NULL AND cl.webhook_secret_enc IS NOT NULL)) \
               AND EXISTS (SELECT 1 FROM webhook_deliveries h WHERE h.subscription_id = s.id AND h.status = 'pending')",
            self.leased_sql()
        );
        let busy_rows = sqlx::query(&sql)
            .persistent(false)
            .fetch_all(&self.pool)
            .await?;
        let mut subscriptions = Vec::with_capacity(busy_rows.len());
        for r in busy_rows {
            subscriptions.push(r.try_get::<i64, _>("id")?);
        }
        // Each one's window: the first pending rows in id order, one index range each
        // (`webhook_deliveries_queue`), several subscriptions per statement.
        let mut pending = Vec::new();
        for chunk in subscriptions.chunks(32) {
            let sql = window_sql(self.backend, chunk.len());
            let mut q = sqlx::query(&sql);
            for id in chunk {
                q = q.bind(*id);
            }
            for r in q.fetch_all(&self.pool).await? {
                pending.push(PendingDelivery {
                    id: r.try_get("id")?,
                    subscription_id: r.try_get("subscription_id")?,
                    order_key: r.try_get("order_key")?,
                    next_attempt_at: r.try_get("next_attempt_at")?,
                });
            }
        }
        Ok(pending)
    }

    /// The deliveries of `ids` still pending, of an active subscription (whose client, for a
    /// forwarding lane, has a URL and secret), with what an attempt needs: URL, secrets
    /// (opened), envelope fields. Earliest due first. Ids that are no longer pending, or whose
    /// subscription was deactivated since the window was read, are left out.
    pub async fn deliveries_to_attempt(&self, now: i64, ids: &[i64]) -> Result<Vec<DueDelivery>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT d.id, d.subscription_id, s.client_id, COALESCE(cl.webhook_url, s.url) AS url, s.secret_enc, cl.webhook_secret_enc, \
               s.previous_secret_enc, s.previous_secret_until, d.event, d.channel, d.data, d.created_at, d.attempts, d.order_key, d.status \
             FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id \
             LEFT JOIN clients cl ON cl.id = s.client_id \
             WHERE d.id IN ({}) AND s.active = 1 AND {} \
               AND (s.client_id IS NULL OR (cl.webhook_url IS NOT NULL AND cl.webhook_secret_enc IS NOT NULL)) \
             ORDER BY d.next_attempt_at, d.id",
            crate::placeholders(1, ids.len()),
            // Checked again right before the attempt: a lease lost since the window was read
            // (this process stalled past it) attempts nothing (D-100).
            self.leased_sql()
        );
        let mut q = sqlx::query(&sql);
        for id in ids {
            q = q.bind(*id);
        }
        let rows = q.fetch_all(&self.pool).await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            // Checked here, not in the statement: with `status = 'pending'` beside `id IN`,
            // SQLite walked the `(status, next_attempt_at)` index over the whole backlog
            // instead of looking the ids up (0.3 ms a call on SQLite, 2 ms on PostgreSQL, with
            // ~12,000 calls in a 100k campaign; D-088).
            if r.try_get::<String, _>("status")? != "pending" {
                continue;
            }
            let subscription_id: i64 = r.try_get("subscription_id")?;
            let client_id: Option<i64> = r.try_get("client_id")?;
            let secret = match client_id {
                Some(c) => {
                    let sealed: String = r.try_get("webhook_secret_enc")?;
                    self.cipher
                        .open(&sealed, "clients", "webhook_secret_enc", c)?
                }
                None => {
                    let sealed: String = r.try_get("secret_enc")?;
                    self.cipher.open(
                        &sealed,
                        "webhook_subscriptions",
                        "secret_enc",
                        subscription_id,
                    )?
                }
            };
            let previous_until: Option<i64> = r.try_get("previous_secret_until")?;
            let previous_secret = match (client_id, previous_until) {
                (None, Some(until)) if until > now => {
                    let sealed: Option<String> = r.try_get("previous_secret_enc")?;
                    sealed
                        .map(|sealed| {
                            self.cipher.open(
                                &sealed,
                                "webhook_subscriptions",
                                "previous_secret_enc",
                                subscription_id,
                            )
                        })
                        .transpose()?
                }
                _ => None,
            };
            let channel: String = r.try_get("channel")?;
            let data: String = r.try_get("data")?;
            out.push(DueDelivery {
                id: r.try_get("id")?,
                subscription_id,
                client_id,
                url: r.try_get("url")?,
                secret,
                previous_secret,
                event: r.try_get("event")?,
                channel: serde_json::from_str(&channel)
                    .map_err(|e| StorageError::Corrupt(e.to_string()))?,
                data: serde_json::from_str(&data)
                    .map_err(|e| StorageError::Corrupt(e.to_string()))?,
                created_at: r.try_get("created_at")?,
                attempts: r.try_get("attempts")?,
                order_key: r.try_get("order_key")?,
            });
        }
        Ok(out)
    }

    /// Queues one event for one subscription only (`POST /webhooks/{id}/test` sends `ping`).
    pub async fn enqueue_for_subscription(
        &self,
        account_id: i64,
        subscription_id: i64,
        kind: EventKind,
        channel: &serde_json::Value,
        data: &serde_json::Value,
    ) -> Result<i64> {
        let now = now_ms();
        let row = sqlx::query(
            "INSERT INTO webhook_deliveries (account_id, subscription_id, event, channel, data, status, attempts, next_attempt_at, created_at, order_key) \
             VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, $6, $7) RETURNING id",
        )
        .bind(account_id)
        .bind(subscription_id)
        .bind(kind.as_str())
        .bind(channel.to_string())
        .bind(data.to_string())
        .bind(now)
        .bind(order_key(kind.as_str(), data))
        .fetch_one(&self.writer)
        .await?;
        Ok(row.try_get("id")?)
    }

    /// Takes the leases of the active subscriptions nobody holds (never held, released, or
    /// expired) and renews this process's own once half their time has passed
    /// (issue 50, D-100): one process at a time attempts a subscription's deliveries, so none
    /// is POSTed by two processes and each conversation's order holds. A lease lasts `hold_ms`
    /// (the session TTL plus the attempt timeout, so an attempt that began under it ends
    /// before a peer may take it). Only its end frees a lease, never the holder's missed
    /// heartbeats: a busy process whose heartbeat lagged still holds what it renewed, and a
    /// peer never POSTs a delivery it may have in flight. Returns how many leases were taken or renewed.
    pub async fn lease_subscriptions(&self, hold_ms: i64) -> Result<u64> {
        let now = self.now_sql();
        let sql = format!(
            "UPDATE webhook_subscriptions SET lease_session = $1, lease_until = {now} + $2 \
             WHERE active = 1 AND ( \
               (lease_session = $1 AND lease_until < {now} + $2 / 2) \
               OR lease_session IS NULL OR lease_until IS NULL OR lease_until < {now})"
        );
        Ok(sqlx::query(&sql)
            .bind(self.session_id())
            .bind(hold_ms)
            .execute(&self.writer)
            .await?
            .rows_affected())
    }

    /// A condition on `s` (a subscription): this process holds its lease.
    fn leased_sql(&self) -> String {
        format!(
            "s.lease_session = {} AND s.lease_until > {}",
            self.session_id(),
            self.now_sql()
        )
    }

    /// When the earliest pending delivery is due, ms.
    pub async fn next_delivery_due_at(&self) -> Result<Option<i64>> {
        let row = sqlx::query(
            "SELECT MIN(next_attempt_at) AS t FROM webhook_deliveries WHERE status = 'pending'",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get("t")?)
    }

    /// Records the results of attempts in one transaction (the dispatcher's group commit:
    /// every attempt that finished while the previous transaction ran, instead of two commits
    /// per attempt; issue 25 part 3). Waits for the bulk writers' lane, so 1:1 sends go first.
    ///
    /// Also keeps each subscription's run of failures, as the attempts would one after the
    /// other in the order given: a delivered attempt ends it, a failed one starts it when none
    /// is running. Returns, for each attempt in order, when the run began after it (`None`
    /// after a delivery, or when the subscription is gone), for
    /// [`Store::disable_subscription`]. One failing statement rolls the whole batch back.
    pub async fn record_attempts(&self, attempts: &[Attempt]) -> Result<Vec<Option<i64>>> {
        if attempts.is_empty() {
            return Ok(Vec::new());
        }
        let now = now_ms();
        let _lane = self.bulk_lane("webhook_attempts").await;
        // Lost in a database crash, an attempt is made again: delivery is at least once, so
        // the commit does not wait for the log's flush (D-141).
        let mut tx = self.begin_recoverable_write().await?;
        // The deliveries: one multi-row statement per chunk (a join with the new values).
        for chunk in crate::padded_chunks(&attempts.iter().collect::<Vec<_>>(), ATTEMPT_CHUNK) {
            let sql = attempts_update_sql(chunk.len());
            let sql = crate::positional(&tx, &sql);
            let mut q = sqlx::query(&sql);
            for a in &chunk {
                let c = a.outcome.columns(now);
                q = q
                    .bind(a.id)
                    .bind(c.status)
                    .bind(c.status_code)
                    .bind(c.error)
                    .bind(c.next_attempt_at)
                    .bind(c.delivered_at);
            }
            q.execute(&mut *tx).await?;
        }
        // The runs of failures: per subscription, the first attempt's statement as a lone
        // attempt would run it (it tells the run before this batch and locks the row), then
        // the rest in memory and the final state written once if it changed.
        let mut runs = vec![None; attempts.len()];
        let mut subscriptions: Vec<i64> = attempts.iter().map(|a| a.subscription_id).collect();
        subscriptions.sort_unstable();
        subscriptions.dedup();
        for subscription_id in subscriptions {
            let mine: Vec<usize> = (0..attempts.len())
                .filter(|&i| attempts[i].subscription_id == subscription_id)
                .collect();
            let first = &attempts[mine[0]];
            let mut run = if first.outcome.is_delivered() {
                sqlx::query(
                    "UPDATE webhook_subscriptions SET failing_since = NULL WHERE id = $1 AND failing_since IS NOT NULL",
                )
                .bind(subscription_id)
                .execute(&mut *tx)
                .await?;
                None
            } else {
                let row = sqlx::query(
                    "UPDATE webhook_subscriptions SET failing_since = COALESCE(failing_since, $2) WHERE id = $1 RETURNING failing_since",
                )
                .bind(subscription_id)
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?;
                match row {
                    Some(r) => r.try_get("failing_since")?,
                    // The subscription is gone: no run to keep.
                    None => continue,
                }
            };
            runs[mine[0]] = run;
            let before = run;
            for &i in &mine[1..] {
                run = if attempts[i].outcome.is_delivered() {
                    None
                } else {
                    Some(run.unwrap_or(now))
                };
                runs[i] = run;
            }
            if run != before {
                sqlx::query("UPDATE webhook_subscriptions SET failing_since = $2 WHERE id = $1")
                    .bind(subscription_id)
                    .bind(run)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        Ok(runs)
    }

    /// Disables a subscription that has only failed since `failing_since` (it receives no
    /// delivery until it is enabled again; its pending ones wait). `None` when it was not
    /// active any more.
    pub async fn disable_subscription(
        &self,
        subscription_id: i64,
        reason: &str,
    ) -> Result<Option<DisabledSubscription>> {
        let row = sqlx::query(
            "UPDATE webhook_subscriptions SET active = 0, disabled_at = $2, disabled_reason = $3 \
             WHERE id = $1 AND active = 1 RETURNING id, account_id, url, failing_since",
        )
        .bind(subscription_id)
        .bind(now_ms())
        .bind(reason)
        .fetch_optional(&self.writer)
        .await?;
        row.map(|r| {
            Ok(DisabledSubscription {
                id: r.try_get("id")?,
                account_id: r.try_get("account_id")?,
                url: r.try_get("url")?,
                failing_since: r
                    .try_get::<Option<i64>, _>("failing_since")?
                    .unwrap_or_default(),
            })
        })
        .transpose()
    }

    /// Queues an event for every other active subscription of the account, whatever the
    /// events they list (operational events such as `webhook.disabled`). Returns how many.
    pub async fn enqueue_for_account(
        &self,
        account_id: i64,
        except_subscription: i64,
        kind: EventKind,
        channel: &serde_json::Value,
        data: &serde_json::Value,
    ) -> Result<u64> {
        let now = now_ms();
        Ok(sqlx::query(
            "INSERT INTO webhook_deliveries (account_id, subscription_id, event, channel, data, status, attempts, next_attempt_at, created_at, order_key) \
             SELECT account_id, id, $3, $4, $5, 'pending', 0, $6, $6, $7 FROM webhook_subscriptions \
             WHERE account_id = $1 AND id <> $2 AND active = 1 AND client_id IS NULL",
        )
        .bind(account_id)
        .bind(except_subscription)
        .bind(kind.as_str())
        .bind(channel.to_string())
        .bind(data.to_string())
        .bind(now)
        .bind(order_key(kind.as_str(), data))
        .execute(&self.writer)
        .await?
        .rows_affected())
    }

    /// The outbox's backlog: pending deliveries and when the oldest of them was created (ms),
    /// for the `disparo_webhook_backlog` and `disparo_webhook_oldest_pending_seconds` gauges.
    pub async fn outbox_backlog(&self) -> Result<(i64, Option<i64>)> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM webhook_deliveries WHERE status = 'pending'",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok((row.try_get("n")?, row.try_get("oldest")?))
    }

    /// Deletes settled deliveries (delivered or failed) created before `before` (ms): the
    /// outbox keeps a retention window, not every attempt forever. Returns how many.
    pub async fn purge_deliveries(&self, before: i64) -> Result<u64> {
        Ok(sqlx::query(
            "DELETE FROM webhook_deliveries WHERE status IN ('delivered', 'failed') AND created_at < $1",
        )
        .bind(before)
        .execute(&self.writer)
        .await?
        .rows_affected())
    }

    /// A subscription's delivery log, newest first, at most `limit` rows with id below
    /// `before` when given (cursor pagination).
    pub async fn list_deliveries(
        &self,
        account_id: i64,
        subscription_id: i64,
        limit: i64,
        before: Option<i64>,
    ) -> Result<Vec<DeliveryRecord>> {
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE account_id = $1 AND subscription_id = $2 AND id < $3 ORDER BY id DESC LIMIT $4"
        );
        let rows = sqlx::query(&sql)
            .bind(account_id)
            .bind(subscription_id)
            .bind(before.unwrap_or(i64::MAX))
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(read_delivery).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::{Attempt, AttemptOutcome};
    use engine::webhook::EventKind;
    use serde_json::json;
    use sqlx::Row;

    /// Enqueues `n` pings (one ordering key per subscription), to `subscriptions` in turn;
    /// returns the deliveries' ids.
    async fn pings(
        store: &crate::Store,
        account_id: i64,
        channel_id: i64,
        subscriptions: &[i64],
        n: usize,
    ) -> Vec<i64> {
        let mut ids = Vec::with_capacity(n);
        for i in 0..n {
            let id = store
                .enqueue_for_subscription(
                    account_id,
                    subscriptions[i % subscriptions.len()],
                    EventKind::Ping,
                    &json!({"id": channel_id}),
                    &json!({"n": i}),
                )
                .await
                .unwrap();
            ids.push(id);
        }
        ids
    }

    /// A PostgreSQL store with one subscription and batches of deliveries written straight to
    /// the table (`(status, how many, then ANALYZE)`, 300-byte bodies, ids from 1 in order):
    /// the store, its subscription and its database's name.
    async fn postgres_outbox(batches: &[(&str, i64, bool)]) -> Option<(crate::Store, i64, String)> {
        let (store, account_id, channel_id, db) =
            crate::test_support::postgres_store_with_channel().await?;
        let (sub, _) = store
            .create_subscription(account_id, channel_id, "https://example.com/h", &[])
            .await
            .unwrap();
        let fill = "INSERT INTO webhook_deliveries (account_id, subscription_id, event, channel, data, status, attempts, next_attempt_at, created_at, order_key) \
                    SELECT $1, $2, 'message.sent', '{}', repeat('x', 300), $3, 0, 0, 0, 'contact:' || g FROM generate_series(1, $4) g";
        for &(status, n, analyze) in batches {
            sqlx::query(fill)
                .bind(account_id)
                .bind(sub.id)
                .bind(status)
                .bind(n)
                .execute(&store.pool)
                .await
                .unwrap();
            if analyze {
                sqlx::query("ANALYZE webhook_deliveries")
                    .execute(&store.pool)
                    .await
                    .unwrap();
            }
        }
        Some((store, sub.id, db))
    }

    /// The lines of an `EXPLAIN`'s answer, as one text.
    fn plan_text(rows: &[sqlx::any::AnyRow]) -> String {
        let lines: Vec<String> = rows.iter().map(|r| r.get::<String, _>(0)).collect();
        lines.join("\n")
    }

    #[tokio::test]
    async fn a_delivery_being_recorded_is_never_picked_and_its_key_moves_on() {
        use std::collections::HashSet;
        let dir = tempfile::tempdir().unwrap();
        let (store, account_id, channel_id) =
            crate::test_support::store_with_channel(dir.path()).await;
        let (sub, _) = store
            .create_subscription(account_id, channel_id, "https://example.com/h", &[])
            .await
            .unwrap();
        // Three deliveries of one ordering key, of a subscription this process holds (D-100).
        let ids = pings(&store, account_id, channel_id, &[sub.id], 3).await;
        assert_eq!(store.lease_subscriptions(60_000).await.unwrap(), 1);
        let now = crate::now_ms() + 1;
        // What the dispatcher does with a window it reads (D-086): the deliveries being
        // recorded left out, the due heads picked, then read in full.
        let due = |recording: HashSet<i64>| {
            let store = store.clone();
            async move {
                let mut window = store.pending_window().await.unwrap();
                window.retain(|d| !recording.contains(&d.id));
                let ids = engine::webhook::pick_due(&window, now, 8, 10, |_| 0, |_, _| false);
                store
                    .deliveries_to_attempt(now, &ids)
                    .await
                    .unwrap()
                    .iter()
                    .map(|d| d.id)
                    .collect::<Vec<_>>()
            }
        };
        // Only the key's head; with the head being recorded, the next; and so on.
        assert_eq!(due(HashSet::new()).await, vec![ids[0]]);
        assert_eq!(due(HashSet::from([ids[0]])).await, vec![ids[1]]);
        assert_eq!(due(HashSet::from([ids[0], ids[1]])).await, vec![ids[2]]);
        assert_eq!(due(ids.iter().copied().collect()).await, Vec::<i64>::new());
        // Once the record is written, the delivery is settled whatever the set says.
        store
            .record_attempts(&[Attempt {
                id: ids[0],
                subscription_id: sub.id,
                outcome: AttemptOutcome::Delivered { status_code: 200 },
            }])
            .await
            .unwrap();
        assert_eq!(due(HashSet::new()).await, vec![ids[1]]);
        // A window kept from before the record does not make it attempted again: the rows
        // read in full are only those still pending (D-088).
        let again = store
            .deliveries_to_attempt(now, &[ids[0], ids[1]])
            .await
            .unwrap();
        assert_eq!(again.iter().map(|d| d.id).collect::<Vec<_>>(), vec![ids[1]]);
    }

    #[tokio::test]
    async fn a_batch_of_attempts_records_what_the_attempts_one_by_one_would() {
        let dir = tempfile::tempdir().unwrap();
        let (store, account_id, channel_id) =
            crate::test_support::store_with_channel(dir.path()).await;
        let mut subs = Vec::new();
        for _ in 0..2 {
            let (s, _) = store
                .create_subscription(account_id, channel_id, "https://example.com/h", &[])
                .await
                .unwrap();
            subs.push(s.id);
        }
        let deliveries = pings(&store, account_id, channel_id, &subs, 6).await;
        let retry = |error: &str| AttemptOutcome::Retry {
            status_code: Some(500),
            error: error.to_string(),
            next_at: 9_999_999_999_999,
        };
        // Subscription 0: fails, fails, is delivered. Subscription 1: is delivered, fails,
        // gives up.
        let batch = vec![
            Attempt {
                id: deliveries[0],
                subscription_id: subs[0],
                outcome: retry("HTTP 500"),
            },
            Attempt {
                id: deliveries[1],
                subscription_id: subs[1],
                outcome: AttemptOutcome::Delivered { status_code: 204 },
            },
            Attempt {
                id: deliveries[2],
                subscription_id: subs[0],
                outcome: retry("timeout"),
            },
            Attempt {
                id: deliveries[3],
                subscription_id: subs[1],
                outcome: retry("HTTP 502"),
            },
            Attempt {
                id: deliveries[4],
                subscription_id: subs[0],
                outcome: AttemptOutcome::Delivered { status_code: 200 },
            },
            Attempt {
                id: deliveries[5],
                subscription_id: subs[1],
                outcome: AttemptOutcome::GiveUp {
                    status_code: None,
                    error: "refused".into(),
                },
            },
        ];
        let runs = store.record_attempts(&batch).await.unwrap();
        let started = runs[0].expect("a failure starts a run");
        assert_eq!(
            runs[2],
            Some(started),
            "a second failure keeps the run's start"
        );
        assert_eq!(runs[4], None, "a delivery ends the run");
        assert_eq!(runs[1], None);
        let restarted = runs[3].expect("a failure after a delivery starts a new run");
        assert_eq!(runs[5], Some(restarted));
        let failing = |id: i64| {
            let store = store.clone();
            async move {
                sqlx::query("SELECT failing_since FROM webhook_subscriptions WHERE id = $1")
                    .bind(id)
                    .fetch_one(&store.pool)
                    .await
                    .unwrap()
                    .try_get::<Option<i64>, _>("failing_since")
                    .unwrap()
            }
        };
        assert_eq!(failing(subs[0]).await, None);
        assert_eq!(failing(subs[1]).await, Some(restarted));
        let mut rows = Vec::new();
        for id in &deliveries {
            let r = sqlx::query(
                "SELECT status, attempts, last_status_code, last_error, next_attempt_at, delivered_at FROM webhook_deliveries WHERE id = $1",
            )
            .bind(*id)
            .fetch_one(&store.pool)
            .await
            .unwrap();
            rows.push((
                r.try_get::<String, _>("status").unwrap(),
                r.try_get::<i64, _>("attempts").unwrap(),
                r.try_get::<Option<i64>, _>("last_status_code").unwrap(),
                r.try_get::<Option<String>, _>("last_error").unwrap(),
                r.try_get::<Option<i64>, _>("next_attempt_at").unwrap(),
                r.try_get::<Option<i64>, _>("delivered_at")
                    .unwrap()
                    .is_some(),
            ));
        }
        let pending = |code: i64, error: &str| {
            (
                "pending".to_string(),
                1,
                Some(code),
                Some(error.to_string()),
                Some(9_999_999_999_999),
                false,
            )
        };
        assert_eq!(rows[0], pending(500, "HTTP 500"));
        assert_eq!(
            rows[1],
            ("delivered".to_string(), 1, Some(204), None, None, true)
        );
        assert_eq!(rows[2], pending(500, "timeout"));
        assert_eq!(rows[3], pending(500, "HTTP 502"));
        assert_eq!(
            rows[4],
            ("delivered".to_string(), 1, Some(200), None, None, true)
        );
        assert_eq!(
            rows[5],
            (
                "failed".to_string(),
                1,
                None,
                Some("refused".to_string()),
                None,
                false
            )
        );

        // A run already going keeps its start; an empty batch writes nothing.
        let more = store
            .record_attempts(&[Attempt {
                id: deliveries[3],
                subscription_id: subs[1],
                outcome: retry("HTTP 503"),
            }])
            .await
            .unwrap();
        assert_eq!(more, vec![Some(restarted)]);
        assert!(store.record_attempts(&[]).await.unwrap().is_empty());
    }

    /// The plan PostgreSQL makes of an attempts chunk, from statistics read while nothing was
    /// pending and a backlog queued since (D-143): the rows are found by id, whatever the
    /// backlog; a delivery already settled is left as it is.
    #[tokio::test]
    async fn on_postgres_attempts_find_their_deliveries_by_id_behind_a_backlog() {
        let Some((store, sub, db)) =
            postgres_outbox(&[("delivered", 4_000, true), ("pending", 4_000, false)]).await
        else {
            return;
        };
        let rows = sqlx::query(
            "SELECT id, status FROM webhook_deliveries WHERE id IN (1, 4001, 4002) ORDER BY id",
        )
        .fetch_all(&store.pool)
        .await
        .unwrap();
        let statuses: Vec<String> = rows.iter().map(|r| r.get("status")).collect();
        assert_eq!(statuses, ["delivered", "pending", "pending"]);
        let sql = format!("EXPLAIN {}", super::attempts_update_sql(3));
        let mut q = sqlx::query(&sql);
        for id in [1_i64, 4001, 4002] {
            q = q
                .bind(id)
                .bind("delivered")
                .bind(Some(200_i64))
                .bind(None::<String>)
                .bind(None::<i64>)
                .bind(Some(5_i64));
        }
        let plan = plan_text(&q.fetch_all(&store.pool).await.unwrap());
        assert!(plan.contains("webhook_deliveries_pkey"), "{plan}");
        for pending_index in ["webhook_deliveries_due", "webhook_deliveries_queue"] {
            assert!(!plan.contains(pending_index), "{plan}");
        }
        // What the statement does: the two pending rows settled, the settled one untouched.
        let attempts: Vec<Attempt> = [1_i64, 4001, 4002]
            .into_iter()
            .map(|id| Attempt {
                id,
                subscription_id: sub,
                outcome: AttemptOutcome::Delivered { status_code: 200 },
            })
            .collect();
        store.record_attempts(&attempts).await.unwrap();
        let rows = sqlx::query("SELECT status, attempts FROM webhook_deliveries WHERE id IN (1, 4001, 4002, 4003) ORDER BY id")
            .fetch_all(&store.pool)
            .await
            .unwrap();
        let after: Vec<(String, i64)> = rows
            .iter()
            .map(|r| (r.get("status"), r.get("attempts")))
            .collect();
        let expected = [
            ("delivered", 0),
            ("delivered", 1),
            ("delivered", 1),
            ("pending", 0),
        ];
        assert_eq!(after, expected.map(|(s, n)| (s.to_string(), n)).to_vec());
        crate::test_support::drop_postgres(store, &db).await;
    }

    /// A window read on PostgreSQL while a backlog is a good part of the table (an endpoint
    /// down, statistics up to date): through the pending index, never the primary key's walk
    /// past every settled delivery (D-143); the window is the backlog's head in id order.
    #[tokio::test]
    async fn on_postgres_a_window_is_read_through_the_pending_index() {
        let Some((store, sub, db)) =
            postgres_outbox(&[("delivered", 40_000, false), ("pending", 16_000, true)]).await
        else {
            return;
        };
        assert_eq!(store.lease_subscriptions(60_000).await.unwrap(), 1);
        let sql = format!("EXPLAIN {}", super::window_sql(crate::Backend::Postgres, 1));
        // As a server whose operator set the planner's default cost of a random read (the
        // gateway lowers it only where nobody set it, D-095).
        let mut conn = store.pool.acquire().await.unwrap();
        sqlx::query("SET random_page_cost = 4")
            .execute(&mut *conn)
            .await
            .unwrap();
        let rows = sqlx::query(&sql)
            .bind(sub)
            .fetch_all(&mut *conn)
            .await
            .unwrap();
        let plan = plan_text(&rows);
        assert!(plan.contains("webhook_deliveries_queue"), "{plan}");
        assert!(!plan.contains("webhook_deliveries_pkey"), "{plan}");
        assert!(!plan.contains("Sort"), "{plan}");
        sqlx::query("RESET random_page_cost")
            .execute(&mut *conn)
            .await
            .unwrap();
        drop(conn);
        let mut window: Vec<i64> = store
            .pending_window()
            .await
            .unwrap()
            .iter()
            .map(|d| d.id)
            .collect();
        let in_order = window.clone();
        window.sort_unstable();
        assert_eq!(in_order, window);
        assert_eq!(
            window,
            (40_001..40_001 + super::DUE_WINDOW).collect::<Vec<_>>()
        );
        crate::test_support::drop_postgres(store, &db).await;
    }
}
