//! The group commit of 1:1 sends and of the request path's audit lines (issue 25 part 4,
//! decision D-076).
//!
//! Every `POST /messages` writes its message twice: the row before the provider call and the
//! provider's answer after it, and its request appends an audit line. Written one transaction
//! each, concurrent sends queue for the database's commit one by one (SQLite has one writer).
//! Here one task, the writer of 1:1 sends, begins a transaction, takes every write that queued
//! while it waited for the write connection (up to [`MAX_BATCH`]), runs them in a few multi-row
//! statements and answers each caller once that transaction committed: a new send's row is
//! on disk before its provider call; a provider's answer written in one statement on
//! PostgreSQL does not wait for the log's flush (D-141: lost in a database crash, the send's
//! status webhooks record it again). A send never waits for a timer: alone, it is
//! written at once; under load the batches grow with the time the connection was busy. Audit
//! lines are queued, not waited for, and share the next write's transaction (at most
//! [`AUDIT_LINGER`] later; D-089).
//!
//! On PostgreSQL [`POSTGRES_SEND_WRITERS`] batches are written side by side: the next batch is
//! taken and written while the one before it waits for its commit (D-090); a flush still
//! waits for every batch taken before it. A small batch of new sends and audit lines (what a
//! batch is at low concurrency) is one statement there, committed on its own, instead of a
//! transaction of five round trips (D-097); so is a small batch of providers' answers with
//! their `message.sent` events' deliveries (D-098). A batch that holds both providers'
//! answers and new sends writes the answers first, committed on their own without waiting for
//! the log's flush, and answers them before it writes the new sends (D-146).
//!
//! A statement that fails rolls the whole batch back; each write of it is then retried alone in
//! its own transaction, so one bad write answers its own error and the others are kept.
//!
//! Priority (issue 25 part 2): while a batch waits for the write connection, bulk writers
//! (campaign claims and settlements, status batches) that have not started yet wait for it
//! ([`Priority`]), so a 1:1 send queues behind at most the one bulk transaction already running;
//! settlements, status batches (D-093) and claims (D-094) look again between their chunks and
//! commit what they wrote, so it waits for one chunk of it, not the whole transaction.

use crate::messages::{
    bind_idempotency_key_tx, bind_outbound, conversation_keys, in_batch_order,
    insert_outbound_many_tx, mark_sent_many_tx, MessageRecord, NewOutbound,
};
use crate::webhooks::{bind_event, enqueue_events_tx, postgres_deliveries_clause, NewEvent};
use crate::{begin_write_on, Backend, Result, StorageError};
use engine::message::MessageStatus;
use sqlx::{AnyPool, Row};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{mpsc, oneshot, Notify};

/// Most writes in one transaction of the writer of 1:1 sends.
pub const MAX_BATCH: usize = 256;

/// How long audit lines with no other write queued wait for one to share its transaction
/// (D-089); a write that waits for its commit (a send, a flush) never waits for this.
pub const AUDIT_LINGER: std::time::Duration = std::time::Duration::from_millis(50);

/// Batches of 1:1 sends written side by side on PostgreSQL (D-090): the next batch is taken
/// and written while the one before it commits. SQLite has one write connection: one batch.
pub const POSTGRES_SEND_WRITERS: usize = 2;

/// Most audit lines per multi-row statement (6 parameters each).
const AUDIT_CHUNK: usize = 64;

/// Most new sends (or answers), and most audit lines, of a batch written in one statement on
/// PostgreSQL (D-097, D-098). Each count of conversations, lines, sends and events is its own
/// statement text, kept in the connection's statement cache: small batches keep those texts
/// few (at most 80 of each kind), and a larger batch, where one statement's saved round trips
/// matter less, takes a transaction.
const ONE_STATEMENT_MAX: usize = 4;

/// How many writes may wait for the writer before a caller waits for room (back-pressure).
const QUEUE: usize = 8_192;

/// Builds the outbox events of a message the provider accepted, from the updated row (called
/// again when its batch is retried write by write).
pub type MakeEvents = Box<dyn Fn(&MessageRecord) -> Vec<NewEvent> + Send + Sync>;

/// A refusal to record: the message, the provider's code, title and details, when (ms).
#[derive(Debug, Clone)]
pub struct Failure {
    /// Message id.
    pub id: i64,
    /// The provider's error code, when it gave one.
    pub code: Option<i64>,
    /// Why, in pt-BR or the provider's words.
    pub title: String,
    /// Details.
    pub detail: Option<String>,
    /// When it failed, ms.
    pub at: i64,
}

/// A line of an account's audit log (who did what, answered with which status, when in ms).
#[derive(Debug, Clone)]
pub struct AuditLine {
    /// The account.
    pub account_id: i64,
    /// Who: the token's or the panel user's name.
    pub token_name: String,
    /// `METHOD /route/{template}`.
    pub action: String,
    /// The concrete path.
    pub target: String,
    /// The answer's status.
    pub status: u16,
    /// When, ms.
    pub at: i64,
}

enum Op {
    /// Nobody waits for an audit line: a failure is logged.
    Audit { line: AuditLine },
    /// Answered once everything queued before it is committed (a read of the audit log
    /// reads its own request's line).
    Flush { reply: oneshot::Sender<Result<()>> },
    Insert {
        new: NewOutbound,
        status: MessageStatus,
        key: Option<String>,
        /// Cluster mode: the lease of the number's cell, checked in the write's transaction.
        fencing: Option<crate::leases::Fencing>,
        reply: oneshot::Sender<Result<MessageRecord>>,
    },
    Sent {
        /// The message as stored before its provider call.
        queued: MessageRecord,
        wamid: String,
        make_events: MakeEvents,
        reply: oneshot::Sender<Result<(MessageRecord, u64)>>,
    },
    Failed {
        failure: Failure,
        reply: oneshot::Sender<Result<MessageRecord>>,
    },
}

/// What a write produced, kept until its transaction commits.
enum Done {
    Audit,
    Flush,
    Insert(MessageRecord),
    Sent(MessageRecord),
    Failed(MessageRecord),
    /// This write alone failed (the others of its batch are kept).
    Refused(StorageError),
}

/// Bulk writers step aside for the writer of 1:1 sends: the number of its batches waiting for
/// the write connection, and a wake-up when none is.
#[derive(Debug, Default)]
pub(crate) struct Priority {
    waiting: AtomicUsize,
    clear: Notify,
}

/// A batch of 1:1 sends waiting for the write connection (see [`Priority`]); dropped once its
/// transaction began.
pub(crate) struct Waiting<'a>(&'a Priority);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.0.waiting.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.clear.notify_waiters();
        }
    }
}

impl Priority {
    pub(crate) fn wait(&self) -> Waiting<'_> {
        self.waiting.fetch_add(1, Ordering::AcqRel);
        Waiting(self)
    }

    /// Whether a batch of 1:1 sends waits for the write connection now: a bulk writer that
    /// sees it commits what it has written and leaves the rest to its next transaction
    /// (D-093).
    pub(crate) fn sends_waiting(&self) -> bool {
        self.waiting.load(Ordering::Acquire) > 0
    }

    /// Returns once no batch of 1:1 sends waits for the write connection.
    pub(crate) async fn yield_to_sends(&self) {
        loop {
            let clear = self.clear.notified();
            tokio::pin!(clear);
            clear.as_mut().enable();
            if self.waiting.load(Ordering::Acquire) == 0 {
                return;
            }
            clear.await;
        }
    }
}

/// The handle of the writer of 1:1 sends; cheap to clone. The writer stops when the last
/// handle (the last clone of the [`crate::Store`]) is dropped.
#[derive(Debug, Clone)]
pub(crate) struct Sends {
    queue: mpsc::Sender<Op>,
}

impl Sends {
    /// Starts the writer on `writer` (the store's write pool).
    pub(crate) fn start(writer: AnyPool, backend: Backend, priority: Arc<Priority>) -> Self {
        Self::start_with(writer, backend, priority, writers_for(backend))
    }

    /// Starts the writer with `writers` batches side by side (D-090).
    pub(crate) fn start_with(
        writer: AnyPool,
        backend: Backend,
        priority: Arc<Priority>,
        writers: usize,
    ) -> Self {
        let (queue, rx) = mpsc::channel(QUEUE);
        tokio::spawn(run(writer, backend, priority, rx, writers.max(1)));
        Self { queue }
    }

    async fn call<T>(&self, op: Op, rx: oneshot::Receiver<Result<T>>) -> Result<T> {
        self.queue.send(op).await.map_err(|_| stopped())?;
        rx.await.unwrap_or_else(|_| Err(stopped()))
    }

    pub(crate) async fn insert(
        &self,
        new: NewOutbound,
        status: MessageStatus,
        key: Option<String>,
        fencing: Option<crate::leases::Fencing>,
    ) -> Result<MessageRecord> {
        let (reply, rx) = oneshot::channel();
        self.call(
            Op::Insert {
                new,
                status,
                key,
                fencing,
                reply,
            },
            rx,
        )
        .await
    }

    pub(crate) async fn sent(
        &self,
        queued: MessageRecord,
        wamid: String,
        make_events: MakeEvents,
    ) -> Result<(MessageRecord, u64)> {
        let (reply, rx) = oneshot::channel();
        self.call(
            Op::Sent {
                queued,
                wamid,
                make_events,
                reply,
            },
            rx,
        )
        .await
    }

    /// Queues an audit line; it is committed with the next write, or alone after
    /// [`AUDIT_LINGER`], and the caller does not wait for that commit.
    pub(crate) async fn audit(&self, line: AuditLine) -> Result<()> {
        self.queue
            .send(Op::Audit { line })
            .await
            .map_err(|_| stopped())
    }

    /// Waits until every write queued before this call is committed.
    pub(crate) async fn flush(&self) -> Result<()> {
        let (reply, rx) = oneshot::channel();
        self.call(Op::Flush { reply }, rx).await
    }

    pub(crate) async fn failed(&self, failure: Failure) -> Result<MessageRecord> {
        let (reply, rx) = oneshot::channel();
        self.call(Op::Failed { failure, reply }, rx).await
    }
}

/// The error of a write handed to a writer that has stopped (the store is shutting down).
fn stopped() -> StorageError {
    StorageError::Corrupt("o gravador de envios parou".to_string())
}

/// How many batches of 1:1 sends are written side by side: one on SQLite (one write
/// connection), [`POSTGRES_SEND_WRITERS`] on PostgreSQL.
pub(crate) fn writers_for(backend: Backend) -> usize {
    match backend {
        Backend::Sqlite => 1,
        Backend::Postgres => POSTGRES_SEND_WRITERS,
    }
}

/// The writer: `writers` tasks take turns at the queue (D-090). The one whose turn it is
/// takes the next write, begins its transaction and takes every write that queued meanwhile,
/// then hands the queue to the next task and writes its batch; so on PostgreSQL a batch is
/// taken while the one before it commits, instead of waiting for that commit.
async fn run(
    writer: AnyPool,
    backend: Backend,
    priority: Arc<Priority>,
    rx: mpsc::Receiver<Op>,
    writers: usize,
) {
    let turn = Arc::new(tokio::sync::Mutex::new(rx));
    let in_flight = Arc::new(tokio::sync::Semaphore::new(writers));
    let tasks: Vec<_> = (0..writers)
        .map(|_| {
            tokio::spawn(take_turns(
                writer.clone(),
                backend,
                priority.clone(),
                turn.clone(),
                in_flight.clone(),
                writers as u32,
            ))
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
}

async fn take_turns(
    writer: AnyPool,
    backend: Backend,
    priority: Arc<Priority>,
    turn: Arc<tokio::sync::Mutex<mpsc::Receiver<Op>>>,
    in_flight: Arc<tokio::sync::Semaphore>,
    writers: u32,
) {
    loop {
        let mut rx = turn.lock().await;
        let Some(first) = rx.recv().await else {
            return;
        };
        let mut ops = vec![first];
        // Audit lines alone wait for the next write (a send's row, its answer) to share its
        // commit, for up to AUDIT_LINGER: written at once, a request's line took a commit of
        // its own between one send and the next (D-089).
        let linger_until = tokio::time::Instant::now() + AUDIT_LINGER;
        while ops.len() < MAX_BATCH && ops.iter().all(|op| matches!(op, Op::Audit { .. })) {
            match tokio::time::timeout_at(linger_until, rx.recv()).await {
                Ok(Some(op)) => ops.push(op),
                Ok(None) | Err(_) => break,
            }
        }
        // Measured from here: a batch's time is its wait for the connection and its
        // transaction, not the audit lines' linger.
        let started = Instant::now();
        let batch = in_flight
            .clone()
            .acquire_owned()
            .await
            .expect("the writers' semaphore is never closed");
        // The batch is what waited while the write connection was busy: taken once the
        // transaction began, so the time spent waiting for it fills the batch.
        let begun = start(&writer, backend, &priority).await;
        while ops.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(op) => ops.push(op),
                Err(_) => break,
            }
        }
        // The next batch is taken while this one is written.
        drop(rx);
        metrics::histogram!("disparo_send_commit_batch").record(ops.len() as f64);
        let mut flushes = Vec::new();
        match begun {
            Ok(Begun::Transaction(tx)) => {
                let written = write_in(tx, &ops.iter().collect::<Vec<_>>()).await;
                settle(&writer, backend, &priority, ops, written, &mut flushes).await;
            }
            Ok(Begun::Connection(conn)) => {
                write_batch_on(&writer, backend, &priority, conn, ops, &mut flushes).await
            }
            Err(e) => settle(&writer, backend, &priority, ops, Err(e), &mut flushes).await,
        }
        drop(batch);
        metrics::histogram!("disparo_store_batch_seconds", "writer" => "sends")
            .record(started.elapsed().as_secs_f64());
        if !flushes.is_empty() {
            // A flush is answered once every write queued before it is committed: the batches
            // taken before this one may still be writing, so it waits for every batch in
            // flight (the semaphore is fair: batches taken later wait behind it).
            if writers > 1 {
                let _all = in_flight.acquire_many(writers).await;
            }
            for op in flushes {
                if let Op::Flush { reply } = op {
                    let _ = reply.send(Ok(()));
                }
            }
        }
    }
}

/// Answers each write of `ops` from what writing them together gave (`written`); flushes are
/// kept in `flushes`, answered by the caller once every batch before them committed. When the
/// writes failed together, each is written again alone, in its own transaction, so one bad
/// write answers its own error and the others are kept.
async fn settle(
    writer: &AnyPool,
    backend: Backend,
    priority: &Priority,
    ops: Vec<Op>,
    written: Result<(Vec<Done>, u64)>,
    flushes: &mut Vec<Op>,
) {
    match written {
        Ok((done, delivered)) => {
            for (op, d) in ops.into_iter().zip(done) {
                if matches!(op, Op::Flush { .. }) {
                    flushes.push(op);
                } else {
                    answer_one(op, d, delivered);
                }
            }
        }
        Err(e) => {
            if ops.len() > 1 {
                tracing::warn!(error = %e, writes = ops.len(), "a batch of 1:1 sends failed; writing them one by one");
            }
            for op in ops {
                if matches!(op, Op::Flush { .. }) {
                    flushes.push(op);
                    continue;
                }
                let one = [op];
                match write(writer, backend, priority, &[&one[0]]).await {
                    Ok((done, delivered)) => answer(one, done, delivered),
                    Err(e) => fail(one, e),
                }
            }
        }
    }
}

/// PostgreSQL: writes a batch on `conn` and answers its writes (flushes are kept in
/// `flushes`): the providers' answers first when the batch also holds writes that must be
/// flushed ([`answers_apart`]), then the rest.
async fn write_batch_on(
    writer: &AnyPool,
    backend: Backend,
    priority: &Priority,
    mut conn: sqlx::pool::PoolConnection<sqlx::Any>,
    ops: Vec<Op>,
    flushes: &mut Vec<Op>,
) {
    let (answers, rest) = answers_apart(ops);
    if !answers.is_empty() {
        let written = write_answers_on(&mut conn, &answers).await;
        settle(writer, backend, priority, answers, written, flushes).await;
    }
    if !rest.is_empty() {
        let written = write_on(&mut conn, &rest).await;
        settle(writer, backend, priority, rest, written, flushes).await;
    }
}

/// PostgreSQL: splits a batch into what commits without waiting for the log's flush — the
/// providers' answers (D-141) — and what must be flushed: new sends and refusals. A batch of
/// answers with only audit lines and flushes beside them is all of the first part (it stays
/// one statement when small, D-098); a batch without answers all of the second. Mixed, the
/// answers are written, committed and answered before the rest is written: a send's answer no
/// longer waits for another send's new row to reach the disk (D-146).
fn answers_apart(ops: Vec<Op>) -> (Vec<Op>, Vec<Op>) {
    let answers = ops.iter().any(|op| matches!(op, Op::Sent { .. }));
    let flushed = ops
        .iter()
        .any(|op| matches!(op, Op::Insert { .. } | Op::Failed { .. }));
    match (answers, flushed) {
        (false, _) => (Vec::new(), ops),
        (true, false) => (ops, Vec::new()),
        (true, true) => ops
            .into_iter()
            .partition(|op| matches!(op, Op::Sent { .. })),
    }
}

/// PostgreSQL: writes providers' answers (with audit lines and flushes, no new send nor
/// refusal) on `conn`, committed without waiting for the log's flush (D-141): in one
/// statement when they fit one ([`Shape::Answers`]), else in a transaction that relaxes its
/// own commit.
async fn write_answers_on(
    conn: &mut sqlx::pool::PoolConnection<sqlx::Any>,
    ops: &[Op],
) -> Result<(Vec<Done>, u64)> {
    debug_assert!(!ops
        .iter()
        .any(|op| matches!(op, Op::Insert { .. } | Op::Failed { .. })));
    if matches!(shape(ops), Shape::Answers) {
        return write_on(conn, ops).await;
    }
    let mut tx = sqlx::Acquire::begin(&mut **conn).await?;
    sqlx::query(crate::RELAXED_COMMIT).execute(&mut *tx).await?;
    write_in(tx, &ops.iter().collect::<Vec<_>>()).await
}

/// Where a batch is written: on SQLite a transaction begun before the batch is taken (the
/// wait for the one write connection is what fills it); on PostgreSQL a connection, so that a
/// batch that fits one statement is written without a transaction of its own (D-097).
enum Begun {
    Transaction(sqlx::Transaction<'static, sqlx::Any>),
    Connection(sqlx::pool::PoolConnection<sqlx::Any>),
}

/// Starts a batch (see [`Begun`]), bulk writers stepping aside while it waits.
async fn start(writer: &AnyPool, backend: Backend, priority: &Priority) -> Result<Begun> {
    match backend {
        Backend::Sqlite => Ok(Begun::Transaction(begin(writer, backend, priority).await?)),
        Backend::Postgres => {
            let asked = Instant::now();
            let conn = {
                let _waiting = priority.wait();
                writer.acquire().await?
            };
            metrics::histogram!("disparo_store_lane_wait_seconds", "writer" => "sends")
                .record(asked.elapsed().as_secs_f64());
            Ok(Begun::Connection(conn))
        }
    }
}

/// Writes `ops` on a PostgreSQL connection: in one statement when they fit one (see
/// [`Shape`]), else in a transaction ([`write_in`]).
async fn write_on(
    conn: &mut sqlx::pool::PoolConnection<sqlx::Any>,
    ops: &[Op],
) -> Result<(Vec<Done>, u64)> {
    let begun = Instant::now();
    let written = match shape(ops) {
        Shape::NewSends => (insert_in_one_statement(conn, ops).await?, 0),
        Shape::Answers => answer_in_one_statement(conn, ops).await?,
        Shape::Transaction => {
            let tx = sqlx::Acquire::begin(&mut **conn).await?;
            return write_in(tx, &ops.iter().collect::<Vec<_>>()).await;
        }
    };
    metrics::histogram!("disparo_store_lane_hold_seconds", "writer" => "sends")
        .record(begun.elapsed().as_secs_f64());
    Ok(written)
}

/// How a batch is written on PostgreSQL: what a batch of 1:1 sends is at low concurrency
/// (at most [`ONE_STATEMENT_MAX`] writes of one kind, at most as many audit lines, any
/// flushes) is one statement; anything else a transaction.
enum Shape {
    /// New sends without idempotency keys ([`insert_in_one_statement`], D-097).
    NewSends,
    /// Providers' answers to sends whose row is still `queued` or `sending` without a wamid
    /// ([`answer_in_one_statement`], D-098).
    Answers,
    Transaction,
}

fn shape(ops: &[Op]) -> Shape {
    let (mut inserts, mut answers, mut audit) = (0, 0, 0);
    for op in ops {
        match op {
            // A fenced write takes a transaction: its lease is held in it (cluster mode).
            Op::Insert {
                key: None,
                fencing: None,
                ..
            } => inserts += 1,
            Op::Sent { queued, .. } if answer_predictable(queued) => answers += 1,
            Op::Audit { .. } => audit += 1,
            Op::Flush { .. } => {}
            _ => return Shape::Transaction,
        }
    }
    if audit > ONE_STATEMENT_MAX {
        return Shape::Transaction;
    }
    match (inserts, answers) {
        (1..=ONE_STATEMENT_MAX, 0) => Shape::NewSends,
        (0, 1..=ONE_STATEMENT_MAX) => Shape::Answers,
        _ => Shape::Transaction,
    }
}

/// Whether the row a provider's answer updates is known before the update: the message is
/// `queued` or `sending` without a wamid, so [`mark_sent_many_tx`] would make it `sent` with
/// the wamid and change nothing else ([`answered`]).
fn answer_predictable(queued: &MessageRecord) -> bool {
    matches!(
        queued.status,
        MessageStatus::Queued | MessageStatus::Sending
    ) && queued.provider_message_id.is_none()
}

/// The row of a message whose row is [`answer_predictable`] once the provider's answer
/// (`wamid`) is recorded.
fn answered(queued: &MessageRecord, wamid: &str) -> MessageRecord {
    let mut rec = queued.clone();
    rec.status = MessageStatus::Sent;
    rec.provider_message_id = Some(wamid.to_string());
    rec
}

/// The audit lines of a batch, in order.
fn audit_lines_of(ops: &[Op]) -> Vec<&AuditLine> {
    ops.iter()
        .filter_map(|op| match op {
            Op::Audit { line } => Some(line),
            _ => None,
        })
        .collect()
}

/// Numbers a statement's parameters: each [`Placeholders::row`] gives the next `n` as one
/// row of values, `($k, …, $k+n-1)`.
#[derive(Default)]
struct Placeholders(usize);

impl Placeholders {
    fn row(&mut self, n: usize) -> String {
        let v: Vec<String> = (self.0 + 1..=self.0 + n).map(|i| format!("${i}")).collect();
        self.0 += n;
        format!("({})", v.join(", "))
    }
}

/// The data-modifying `WITH` clause `a` appending the audit lines whose value rows (six
/// parameters each, see [`bind_audit_line`]) are `rows`; none without lines.
fn audit_clause(rows: &[String]) -> Option<String> {
    (!rows.is_empty()).then(|| {
        format!(
            "a AS (INSERT INTO audit_log (account_id, token_name, action, target, status, at) VALUES {})",
            rows.join(", ")
        )
    })
}

/// PostgreSQL: the conversations, the messages and the audit lines of a batch of
/// [`Shape::NewSends`] in one statement (data-modifying `WITH` clauses), committed on its
/// own: one round trip instead of five (`BEGIN`, conversations, messages, audit lines,
/// `COMMIT`), the same rows and the same durability (the statement's commit is flushed before
/// it answers). Returns each op's result in order.
async fn insert_in_one_statement(
    conn: &mut sqlx::pool::PoolConnection<sqlx::Any>,
    ops: &[Op],
) -> Result<Vec<Done>> {
    let now = crate::now_ms();
    let inserts: Vec<(&NewOutbound, MessageStatus)> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Insert { new, status, .. } => Some((new, *status)),
            _ => None,
        })
        .collect();
    let audit = audit_lines_of(ops);
    let pairs = conversation_keys(inserts.iter().map(|(m, _)| *m));
    let mut params = Placeholders::default();
    let mut next = |n: usize| params.row(n);
    let conversations: Vec<String> = pairs.iter().map(|_| next(4)).collect();
    let audit_values: Vec<String> = audit.iter().map(|_| next(6)).collect();
    let message_values: Vec<String> = inserts.iter().map(|_| next(14)).collect();
    let audit_clause = audit_clause(&audit_values)
        .map(|a| format!("{a}, "))
        .unwrap_or_default();
    let sql = format!(
        "WITH c AS (INSERT INTO conversations (account_id, channel_id, contact_phone, created_at) VALUES {} \
         ON CONFLICT (channel_id, contact_phone) DO UPDATE SET contact_phone = excluded.contact_phone \
         RETURNING id, channel_id, contact_phone), {audit_clause}\
         v (n, account_id, channel_id, kind, contact_phone, body, template_name, template_language, params, preview_text, media, status, source, created_at) AS (VALUES {}) \
         INSERT INTO messages (account_id, channel_id, conversation_id, kind, direction, contact_phone, body, template_name, template_language, params, preview_text, media, status, source, created_at) \
         SELECT v.account_id, v.channel_id, c.id, v.kind, 'out', v.contact_phone, v.body, v.template_name, v.template_language, v.params, v.preview_text, v.media, v.status, v.source, v.created_at \
         FROM v JOIN c ON c.channel_id = v.channel_id AND c.contact_phone = v.contact_phone ORDER BY v.n \
         RETURNING {}",
        conversations.join(", "),
        message_values.join(", "),
        crate::messages::COLUMNS
    );
    let mut q = sqlx::query(&sql);
    for (channel_id, account_id, phone) in &pairs {
        q = q.bind(*account_id).bind(*channel_id).bind(*phone).bind(now);
    }
    for l in &audit {
        q = bind_audit_line(q, l);
    }
    for (n, (m, status)) in inserts.iter().enumerate() {
        q = bind_outbound(
            q.bind(n as i64).bind(m.account_id).bind(m.channel_id),
            m,
            *status,
            now,
        );
    }
    let rows = q.fetch_all(&mut **conn).await?;
    // Committed: an error from here on is answered to the writes, never a retry of the batch.
    let read = || -> Result<Vec<MessageRecord>> {
        let mut recs = rows
            .iter()
            .map(crate::messages::read)
            .collect::<Result<Vec<_>>>()?;
        in_batch_order(&mut recs, inserts.iter().map(|(m, _)| *m))?;
        Ok(recs)
    };
    let mut recs = match read() {
        Ok(recs) => recs.into_iter(),
        Err(e) => return Ok(committed_but_unread(ops, &e)),
    };
    let mut done = Vec::with_capacity(ops.len());
    for op in ops {
        done.push(match op {
            Op::Insert { .. } => Done::Insert(recs.next().ok_or_else(|| {
                StorageError::Corrupt("an inserted message did not come back".into())
            })?),
            Op::Audit { .. } => Done::Audit,
            _ => Done::Flush,
        });
    }
    Ok(done)
}

/// Answers written in one statement commit without waiting for the log's flush (D-141): lost
/// in a database crash, the message is `sending` without its wamid and the status webhooks,
/// which name it by its callback data, record it `sent` (D-103). The setting is the
/// statement's own transaction's (`set_config(…, true)`), read from a `WITH` query the final
/// `SELECT` joins, so it is evaluated.
const RELAXED_ANSWER: &str = "set_config('synchronous_commit', 'off', true)";

/// PostgreSQL: the providers' answers and the audit lines of a batch of [`Shape::Answers`]
/// in one statement committed on its own (D-098), instead of `BEGIN`, the update, the
/// subscriptions' read, the deliveries and `COMMIT`. The updated rows are known before the
/// update ([`answered`]), so their `message.sent` events are built first and written by the
/// same statement to every subscription that lists them ([`postgres_deliveries_clause`]);
/// the update applies only to a row still as it was queued, so an event never describes a
/// row other than the one written. A message whose row changed meanwhile (a status webhook
/// came first) or is unknown is then written in a transaction of its own ([`write_in`]), as
/// any answer was before: its error is its own, the batch's other writes are kept.
async fn answer_in_one_statement(
    conn: &mut sqlx::pool::PoolConnection<sqlx::Any>,
    ops: &[Op],
) -> Result<(Vec<Done>, u64)> {
    let answers: Vec<(&MessageRecord, &str, MessageRecord)> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Sent { queued, wamid, .. } => {
                Some((queued, wamid.as_str(), answered(queued, wamid)))
            }
            _ => None,
        })
        .collect();
    let events: Vec<(i64, NewEvent)> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Sent { make_events, .. } => Some(make_events),
            _ => None,
        })
        .zip(&answers)
        .flat_map(|(make_events, (_, _, rec))| make_events(rec).into_iter().map(|e| (rec.id, e)))
        .collect();
    // The rows are updated (and locked) in the order of the values: message id order, as
    // every writer of message rows locks them (D-095); in arrival order a status batch
    // locking the same rows by id could deadlock with this statement.
    let mut in_id_order: Vec<&(&MessageRecord, &str, MessageRecord)> = answers.iter().collect();
    in_id_order.sort_by_key(|(queued, _, _)| queued.id);
    let audit = audit_lines_of(ops);
    let mut params = Placeholders::default();
    let mut next = |n: usize| params.row(n);
    let answer_values: Vec<String> = in_id_order.iter().map(|_| next(3)).collect();
    let audit_values: Vec<String> = audit.iter().map(|_| next(6)).collect();
    let event_values: Vec<String> = events.iter().map(|_| next(10)).collect();
    let audit_clause = audit_clause(&audit_values)
        .map(|a| format!(", {a}"))
        .unwrap_or_default();
    let (events_clause, delivered) = if events.is_empty() {
        (String::new(), "CAST(0 AS BIGINT)")
    } else {
        (
            format!(
                ", e (n, mid, channel_id, account_id, event, channel, data, next_attempt_at, created_at, order_key) AS (VALUES {}), {}",
                event_values.join(", "),
                postgres_deliveries_clause("e", "u")
            ),
            "(SELECT COUNT(*) FROM d)",
        )
    };
    let sql = format!(
        "WITH v (mid, wamid, queued) AS (VALUES {}), \
         u AS (UPDATE messages SET provider_message_id = v.wamid, status = 'sent' FROM v \
         WHERE messages.id = v.mid AND messages.status = v.queued AND messages.provider_message_id IS NULL \
         RETURNING {columns}), \
         w AS (INSERT INTO message_provider_ids (provider_message_id, message_id) \
         SELECT provider_message_id, id FROM u ON CONFLICT (provider_message_id) DO NOTHING){audit_clause}{events_clause}, \
         r AS (SELECT {relaxed}) \
         SELECT {columns}, {delivered} AS delivered FROM u, r",
        answer_values.join(", "),
        columns = crate::messages::COLUMNS,
        relaxed = RELAXED_ANSWER,
    );
    let mut q = sqlx::query(&sql);
    for (queued, wamid, _) in in_id_order {
        q = q.bind(queued.id).bind(*wamid).bind(queued.status.as_str());
    }
    for l in &audit {
        q = bind_audit_line(q, l);
    }
    for (n, (mid, e)) in events.iter().enumerate() {
        q = bind_event(q.bind(n as i64).bind(*mid).bind(e.channel_id), e);
    }
    let rows = q.fetch_all(&mut **conn).await?;
    #[cfg(test)]
    ANSWER_STATEMENTS.fetch_add(1, Ordering::Relaxed);
    // Committed: an error from here on is answered to the writes, never a retry of the batch.
    let read = || -> Result<(u64, HashMap<i64, MessageRecord>)> {
        let mut delivered = 0;
        let mut updated = HashMap::with_capacity(rows.len());
        for row in &rows {
            delivered = u64::try_from(row.try_get::<i64, _>("delivered")?).unwrap_or(0);
            let rec = crate::messages::read(row)?;
            updated.insert(rec.id, rec);
        }
        Ok((delivered, updated))
    };
    let (mut delivered, mut updated) = match read() {
        Ok(read) => read,
        Err(e) => return Ok((committed_but_unread(ops, &e), 0)),
    };
    let mut done = Vec::with_capacity(ops.len());
    for op in ops {
        done.push(match op {
            Op::Sent { queued, wamid, .. } => match updated.remove(&queued.id) {
                Some(rec) => {
                    if rec != answered(queued, wamid) {
                        // The update's condition makes this impossible; logged, not hidden.
                        tracing::error!(
                            message_id = rec.id,
                            "an answered row differs from the row its event describes"
                        );
                    }
                    Done::Sent(rec)
                }
                // Changed since it was queued, or unknown: a transaction of its own.
                None => match write_alone(conn, op).await {
                    Ok((mut one, n)) => {
                        delivered += n;
                        one.pop().expect("one write, one result")
                    }
                    Err(e) => Done::Refused(e),
                },
            },
            Op::Audit { .. } => Done::Audit,
            _ => Done::Flush,
        });
    }
    Ok((done, delivered))
}

/// The results of a one-statement batch that committed but whose returned rows could not be
/// read: each write waiting for a row answers the error (its row is stored; a read shows it)
/// instead of the batch being retried write by write, which would write its rows, events and
/// audit lines twice.
fn committed_but_unread(ops: &[Op], e: &StorageError) -> Vec<Done> {
    tracing::error!(error = %e, writes = ops.len(), "a committed batch of 1:1 sends could not be read back");
    ops.iter()
        .map(|op| match op {
            Op::Audit { .. } => Done::Audit,
            Op::Flush { .. } => Done::Flush,
            _ => Done::Refused(StorageError::Corrupt(e.to_string())),
        })
        .collect()
}

/// How many answer statements ran (tests check that the path they test was taken).
#[cfg(test)]
static ANSWER_STATEMENTS: AtomicUsize = AtomicUsize::new(0);

/// Writes `op` in a transaction of its own on `conn`.
async fn write_alone(
    conn: &mut sqlx::pool::PoolConnection<sqlx::Any>,
    op: &Op,
) -> Result<(Vec<Done>, u64)> {
    let tx = sqlx::Acquire::begin(&mut **conn).await?;
    write_in(tx, &[op]).await
}

/// Begins the writer's transaction, bulk writers stepping aside while it waits.
async fn begin(
    writer: &AnyPool,
    backend: Backend,
    priority: &Priority,
) -> Result<sqlx::Transaction<'static, sqlx::Any>> {
    let asked = Instant::now();
    let tx = {
        let _waiting = priority.wait();
        begin_write_on(writer, backend).await?
    };
    metrics::histogram!("disparo_store_lane_wait_seconds", "writer" => "sends")
        .record(asked.elapsed().as_secs_f64());
    Ok(tx)
}

/// Runs `ops` in one transaction (see [`write_in`]).
async fn write(
    writer: &AnyPool,
    backend: Backend,
    priority: &Priority,
    ops: &[&Op],
) -> Result<(Vec<Done>, u64)> {
    write_in(begin(writer, backend, priority).await?, ops).await
}

/// Runs `ops` in `tx` and commits; the events of the accepted sends are written to the outbox
/// in the same transaction. Returns each write's result and how many deliveries it enqueued.
async fn write_in(
    mut tx: sqlx::Transaction<'_, sqlx::Any>,
    ops: &[&Op],
) -> Result<(Vec<Done>, u64)> {
    let begun = Instant::now();
    // New rows first (a few multi-row statements), then the providers' answers in message id
    // order: every writer of message rows (this, the status batches, the campaign writer)
    // sorts them by id, so with a plan that follows the values (D-095) PostgreSQL rarely finds
    // two transactions waiting on each other; a batch that loses a deadlock is retried.
    let mut done: Vec<Option<Done>> = (0..ops.len()).map(|_| None).collect();
    let inserts: Vec<(usize, &NewOutbound, MessageStatus, Option<&str>)> = ops
        .iter()
        .enumerate()
        .filter_map(|(i, op)| match op {
            Op::Insert {
                new, status, key, ..
            } => Some((i, new, *status, key.as_deref())),
            _ => None,
        })
        .collect();
    if !inserts.is_empty() {
        // Cluster mode: every new row's lease, held FOR SHARE until the commit (a lost one
        // fails the batch; each write is then retried alone and that one answers `Fenced`).
        let fencing: Vec<&crate::leases::Fencing> = ops
            .iter()
            .filter_map(|op| match op {
                Op::Insert {
                    fencing: Some(f), ..
                } => Some(f),
                _ => None,
            })
            .collect();
        crate::leases::hold_in(&mut tx, &fencing).await?;
        let items: Vec<(&NewOutbound, MessageStatus)> =
            inserts.iter().map(|(_, m, s, _)| (*m, *s)).collect();
        let recs = insert_outbound_many_tx(&mut tx, &items).await?;
        for ((i, m, _, key), rec) in inserts.into_iter().zip(recs) {
            if let Some(key) = key {
                bind_idempotency_key_tx(&mut tx, m.account_id, key, rec.id).await?;
            }
            done[i] = Some(Done::Insert(rec));
        }
    }
    let sent: Vec<(i64, &str)> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Sent { queued, wamid, .. } => Some((queued.id, wamid.as_str())),
            _ => None,
        })
        .collect();
    let mut events = Vec::new();
    if !sent.is_empty() {
        let mut recs = mark_sent_many_tx(&mut tx, &sent).await?;
        for (i, op) in ops.iter().enumerate() {
            if let Op::Sent {
                queued,
                make_events,
                ..
            } = op
            {
                // An unknown message fails the batch; each write is then retried alone and
                // this one answers `NotFound`.
                let rec = recs.remove(&queued.id).ok_or(StorageError::NotFound)?;
                // A status report that came first wrote its `message.sent` (D-103).
                if !crate::messages::answered_by_status(&rec) {
                    events.extend(make_events(&rec));
                }
                done[i] = Some(Done::Sent(rec));
            }
        }
    }
    let audit: Vec<&AuditLine> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Audit { line, .. } => Some(line),
            _ => None,
        })
        .collect();
    if !audit.is_empty() {
        insert_audit_lines_tx(&mut tx, &audit).await?;
        for (i, op) in ops.iter().enumerate() {
            if matches!(op, Op::Audit { .. }) {
                done[i] = Some(Done::Audit);
            }
        }
    }
    for (i, op) in ops.iter().enumerate() {
        if matches!(op, Op::Flush { .. }) {
            done[i] = Some(Done::Flush);
        }
    }
    for (i, op) in ops.iter().enumerate() {
        if let Op::Failed { failure, .. } = op {
            done[i] = Some(Done::Failed(mark_failed_tx(&mut tx, failure).await?));
        }
    }
    let done: Vec<Done> = done.into_iter().flatten().collect();
    let delivered = enqueue_events_tx(&mut tx, &events).await?;
    tx.commit().await?;
    metrics::histogram!("disparo_store_lane_hold_seconds", "writer" => "sends")
        .record(begun.elapsed().as_secs_f64());
    Ok((done, delivered))
}

/// Binds an audit line's columns: account, token name, action, target, status, at (ms).
fn bind_audit_line<'q>(
    q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    l: &'q AuditLine,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
    q.bind(l.account_id)
        .bind(&l.token_name)
        .bind(&l.action)
        .bind(&l.target)
        .bind(i64::from(l.status))
        .bind(l.at)
}

/// Appends audit lines inside `tx`, 64 per multi-row statement (6 parameters each).
async fn insert_audit_lines_tx(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    lines: &[&AuditLine],
) -> Result<()> {
    for chunk in crate::shaped_chunks(lines, AUDIT_CHUNK) {
        let values: Vec<String> = (0..chunk.len())
            .map(|i| {
                let p = 1 + 6 * i;
                format!(
                    "(${}, ${}, ${}, ${}, ${}, ${})",
                    p,
                    p + 1,
                    p + 2,
                    p + 3,
                    p + 4,
                    p + 5
                )
            })
            .collect();
        let sql = format!(
            "INSERT INTO audit_log (account_id, token_name, action, target, status, at) VALUES {}",
            values.join(", ")
        );
        let sql = crate::positional(tx, &sql);
        let mut q = sqlx::query(&sql);
        for l in chunk {
            q = bind_audit_line(q, l);
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}

fn answer<I: IntoIterator<Item = Op>>(ops: I, done: Vec<Done>, delivered: u64) {
    for (op, d) in ops.into_iter().zip(done) {
        answer_one(op, d, delivered);
    }
}

fn answer_one(op: Op, done: Done, delivered: u64) {
    match (op, done) {
        (Op::Audit { .. }, Done::Audit) => {}
        (Op::Flush { reply }, Done::Flush) => {
            let _ = reply.send(Ok(()));
        }
        (Op::Insert { reply, .. }, Done::Insert(r)) => {
            let _ = reply.send(Ok(r));
        }
        (Op::Sent { reply, .. }, Done::Sent(r)) => {
            let _ = reply.send(Ok((r, delivered)));
        }
        (Op::Failed { reply, .. }, Done::Failed(r)) => {
            let _ = reply.send(Ok(r));
        }
        (op, Done::Refused(e)) => fail([op], e),
        _ => unreachable!("each write's result is in its place"),
    }
}

fn fail(ops: [Op; 1], e: StorageError) {
    let [op] = ops;
    match op {
        Op::Flush { reply } => {
            let _ = reply.send(Err(e));
        }
        Op::Audit { line } => {
            tracing::error!(error = %e, account_id = line.account_id, action = %line.action, "could not append to the audit log");
        }
        Op::Insert { reply, .. } => {
            let _ = reply.send(Err(e));
        }
        Op::Sent { reply, .. } => {
            let _ = reply.send(Err(e));
        }
        Op::Failed { reply, .. } => {
            let _ = reply.send(Err(e));
        }
    }
}

impl crate::Store {
    /// Stores an outbound message with `status` (`queued`, or `sending` when its provider call
    /// starts at once), creating its conversation when new, in the group commit of 1:1 sends
    /// (D-076): the answer comes once the transaction holding it committed.
    ///
    /// With `idempotency_key`, the key's row (claimed `pending` by the API) is bound to the new
    /// message in the same transaction, so a key never outlives the knowledge of what it sent.
    pub async fn insert_outbound(
        &self,
        m: &NewOutbound,
        status: MessageStatus,
        idempotency_key: Option<&str>,
    ) -> Result<MessageRecord> {
        self.insert_outbound_under(m, status, idempotency_key, None)
            .await
    }

    /// [`crate::Store::insert_outbound`] under `lease` (cluster mode, `CLUSTER.md`
    /// "Fencing"): the number's cell lease is checked and held `FOR SHARE` in the transaction
    /// that writes the row, so a node that lost the cell writes (and sends) nothing. Errors:
    /// [`StorageError::Fenced`] when the lease is no longer held; the database's.
    pub async fn insert_outbound_under(
        &self,
        m: &NewOutbound,
        status: MessageStatus,
        idempotency_key: Option<&str>,
        lease: Option<&crate::leases::LeaseToken>,
    ) -> Result<MessageRecord> {
        self.sends
            .insert(
                m.clone(),
                status,
                idempotency_key.map(str::to_string),
                lease.map(|t| self.fencing(t)),
            )
            .await
    }

    /// Records the provider's acceptance (`wamid`, status `sent`) of `queued` (the message as
    /// stored before its provider call) and, in the same commit (the group commit of 1:1
    /// sends, D-076; one statement on PostgreSQL, D-098), the events `make_events` builds from
    /// the updated message. `sent_at` is left to the provider's `sent` status, so that status
    /// is reported exactly once whichever arrives first; a status webhook that already moved
    /// the message further is kept. Returns the message and how many deliveries the commit
    /// enqueued (its other sends' included). Errors: `NotFound` for an unknown message.
    pub async fn mark_message_sent(
        &self,
        queued: &MessageRecord,
        provider_message_id: &str,
        make_events: MakeEvents,
    ) -> Result<(MessageRecord, u64)> {
        self.sends
            .sent(queued.clone(), provider_message_id.to_string(), make_events)
            .await
    }

    /// Records a refusal by the provider (group commit of 1:1 sends, D-076).
    pub async fn mark_message_failed(
        &self,
        id: i64,
        code: Option<i64>,
        title: &str,
        detail: Option<&str>,
        at: i64,
    ) -> Result<MessageRecord> {
        self.sends
            .failed(Failure {
                id,
                code,
                title: title.to_string(),
                detail: detail.map(str::to_string),
                at,
            })
            .await
    }
}

/// Records a refusal inside `tx` (see [`crate::Store::mark_message_failed`]).
pub(crate) async fn mark_failed_tx(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    f: &Failure,
) -> Result<MessageRecord> {
    let sql = format!(
        "UPDATE messages SET status = 'failed', failed_at = $2, error_code = $3, error_title = $4, error_detail = $5 \
         WHERE id = $1 RETURNING {}",
        crate::messages::COLUMNS
    );
    let row = sqlx::query(&sql)
        .bind(f.id)
        .bind(f.at)
        .bind(f.code)
        .bind(&f.title)
        .bind(&f.detail)
        .fetch_optional(&mut **tx)
        .await?
        .ok_or(StorageError::NotFound)?;
    crate::messages::read(&row)
}

#[cfg(test)]
mod tests {
    use crate::messages::{MessageRecord, NewOutbound};
    use crate::StorageError;
    use engine::message::{MessageKind, MessageStatus};

    /// How many audit lines `account` has.
    async fn audit_lines(store: &crate::Store, account: i64) -> i64 {
        use sqlx::Row;
        sqlx::query("SELECT COUNT(*) AS n FROM audit_log WHERE account_id = $1")
            .bind(account)
            .fetch_one(&store.pool)
            .await
            .unwrap()
            .try_get("n")
            .unwrap()
    }

    fn message(account_id: i64, channel_id: i64, i: usize) -> NewOutbound {
        NewOutbound {
            account_id,
            channel_id,
            // 150 contacts: some are written twice in one batch.
            contact_phone: format!("55119{:08}", i % 150),
            kind: MessageKind::Text,
            body: Some("oi".into()),
            template_name: None,
            template_language: None,
            params: None,
            preview_text: None,
            media: None,
            source: "api",
        }
    }

    /// D-103: a status report that reaches a message before its send's answer is recorded
    /// (it finds the message by the id in `biz_opaque_callback_data`) writes the message's
    /// `message.sent` before its own `message.ack`, and the answer recorded afterwards writes
    /// none: each message's events leave in the order sent → ack, once each. A message answered
    /// first gets its `message.sent` from the answer and only the ack from the report.
    async fn a_status_before_the_answer_writes_sent_then_ack(
        store: crate::Store,
        account: i64,
        channel: i64,
    ) {
        use crate::messages::{AppliedStatus, StatusReport};
        use crate::webhooks::NewEvent;
        use engine::message::ProviderStatus;
        use engine::webhook::EventKind;
        use sqlx::Row;
        let (sub, _) = store
            .create_subscription(
                account,
                channel,
                "https://example.com/h",
                &[EventKind::MessageSent, EventKind::MessageAck],
            )
            .await
            .unwrap();
        let event = |kind: EventKind, m: &MessageRecord| NewEvent {
            account_id: m.account_id,
            channel_id: m.channel_id,
            kind,
            channel: serde_json::json!({"id": m.channel_id}),
            data: serde_json::json!({"id": m.id, "status": m.status.as_str()}),
            created_at: 1,
        };
        let on_status = |_: usize, a: &AppliedStatus| {
            let ack = event(EventKind::MessageAck, &a.message);
            if a.accepted_here {
                vec![event(EventKind::MessageSent, &a.message), ack]
            } else {
                vec![ack]
            }
        };
        let report = |m: &MessageRecord| StatusReport {
            provider_message_id: format!("wamid.{}", m.id),
            callback_message_id: Some(m.id),
            status: ProviderStatus::Delivered,
            at: 7_000,
            error: None,
        };
        let answer = |m: MessageRecord| {
            let store = store.clone();
            async move {
                let wamid = format!("wamid.{}", m.id);
                store
                    .mark_message_sent(
                        &m,
                        &wamid,
                        Box::new(move |r| vec![event(EventKind::MessageSent, r)]),
                    )
                    .await
                    .unwrap()
                    .0
            }
        };
        // The report first.
        let early = store
            .insert_outbound(&message(account, channel, 1), MessageStatus::Sending, None)
            .await
            .unwrap();
        let reports = [report(&early)];
        let (outs, written) = store
            .apply_status_batches(&[(channel, &reports[..])], on_status)
            .await
            .unwrap();
        assert!(outs[0].applied[0].accepted_here);
        assert_eq!(written, 2);
        let rec = answer(early.clone()).await;
        assert_eq!(
            rec.status,
            MessageStatus::Delivered,
            "the answer keeps the report's status"
        );
        assert!(crate::messages::answered_by_status(&rec));
        // The answer first.
        let late = store
            .insert_outbound(&message(account, channel, 2), MessageStatus::Sending, None)
            .await
            .unwrap();
        let rec = answer(late.clone()).await;
        assert!(!crate::messages::answered_by_status(&rec));
        let reports = [report(&late)];
        let (outs, _) = store
            .apply_status_batches(&[(channel, &reports[..])], on_status)
            .await
            .unwrap();
        assert!(!outs[0].applied[0].accepted_here);
        let written: Vec<(String, i64)> = sqlx::query(
            "SELECT event, data FROM webhook_deliveries WHERE subscription_id = $1 ORDER BY id",
        )
        .bind(sub.id)
        .fetch_all(&store.pool)
        .await
        .unwrap()
        .iter()
        .map(|r| {
            let data: serde_json::Value =
                serde_json::from_str(&r.try_get::<String, _>("data").unwrap()).unwrap();
            (r.try_get("event").unwrap(), data["id"].as_i64().unwrap())
        })
        .collect();
        let expected: Vec<(String, i64)> = [
            ("message.sent", early.id),
            ("message.ack", early.id),
            ("message.sent", late.id),
            ("message.ack", late.id),
        ]
        .map(|(e, id)| (e.to_string(), id))
        .into();
        assert_eq!(written, expected);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_sqlite_a_status_before_the_answer_writes_sent_then_ack() {
        let dir = tempfile::tempdir().unwrap();
        let (store, account, channel) = crate::test_support::store_with_channel(dir.path()).await;
        a_status_before_the_answer_writes_sent_then_ack(store, account, channel).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_postgres_a_status_before_the_answer_writes_sent_then_ack() {
        let Some((store, account, channel, db)) =
            crate::test_support::postgres_store_with_channel().await
        else {
            return;
        };
        a_status_before_the_answer_writes_sent_then_ack(store.clone(), account, channel).await;
        crate::test_support::drop_postgres(store, &db).await;
    }

    /// A connection handed back inside a transaction nobody holds (what a caller cancelled
    /// between its BEGIN and the `Transaction` leaves: a campaign actor killed mid-claim) is
    /// closed, not reused: the one write connection is not left refusing every later write
    /// ("non-zero transaction depth"), and the lock its transaction held is released.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_connection_left_inside_a_transaction_is_not_reused() {
        use sqlx::{Database, TransactionManager};
        let dir = tempfile::tempdir().unwrap();
        let (store, account, channel) = crate::test_support::store_with_channel(dir.path()).await;
        let mut conn = store.writer.acquire().await.unwrap();
        <sqlx::Any as Database>::TransactionManager::begin(
            &mut conn,
            Some("BEGIN IMMEDIATE".into()),
        )
        .await
        .unwrap();
        drop(conn);
        for _ in 0..3 {
            let tx = store
                .begin_write()
                .await
                .expect("the write connection begins a transaction");
            tx.commit().await.unwrap();
        }
        store
            .insert_outbound(&message(account, channel, 0), MessageStatus::Sending, None)
            .await
            .expect("a write after it");
    }

    /// Concurrent writes share transactions, each caller gets its own row (a contact written
    /// twice in one batch too), and a write that
    /// fails in a batch (an unknown message) answers its own error while the batch's other
    /// writes are kept.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_are_grouped_and_a_failing_one_fails_alone() {
        let dir = tempfile::tempdir().unwrap();
        let (store, account, channel) = crate::test_support::store_with_channel(dir.path()).await;
        let inserted = futures::future::join_all((0..200).map(|i| {
            let store = store.clone();
            async move {
                store
                    .insert_outbound(&message(account, channel, i), MessageStatus::Sending, None)
                    .await
                    .unwrap()
            }
        }))
        .await;
        let mut ids: Vec<i64> = inserted.iter().map(|m| m.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 200);
        assert!(inserted.iter().all(|m| m.status == MessageStatus::Sending));
        for (i, m) in inserted.iter().enumerate() {
            assert_eq!(m.contact_phone, format!("55119{:08}", i % 150));
        }
        let conversations: std::collections::HashSet<i64> =
            inserted.iter().map(|m| m.conversation_id).collect();
        assert_eq!(conversations.len(), 150, "one conversation per contact");

        let unknown = MessageRecord {
            id: i64::MAX,
            ..inserted[0].clone()
        };
        let marks = futures::future::join_all(inserted.iter().chain([&unknown]).map(|m| {
            let store = store.clone();
            async move {
                let id = m.id;
                let res = store
                    .mark_message_sent(m, &format!("wamid.{id}"), Box::new(|_| Vec::new()))
                    .await;
                (id, res)
            }
        }))
        .await;
        for (id, res) in marks {
            if id == i64::MAX {
                assert!(matches!(res, Err(crate::StorageError::NotFound)));
            } else {
                let (m, delivered) = res.unwrap();
                assert_eq!(m.status, MessageStatus::Sent);
                assert_eq!(
                    m.provider_message_id.as_deref(),
                    Some(format!("wamid.{id}").as_str())
                );
                assert_eq!(delivered, 0);
            }
        }
        for id in ids {
            let m = store.message(account, id).await.unwrap();
            assert_eq!(m.status, MessageStatus::Sent);
        }
    }

    /// D-090: with two batches written side by side, every concurrent write is answered
    /// with its own row, and a flush answers only once every audit line queued before it is
    /// committed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_writers_side_by_side_answer_every_write_and_flush_after_all() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, account, channel) =
            crate::test_support::store_with_channel(dir.path()).await;
        store.sends = super::Sends::start_with(
            store.writer.clone(),
            store.backend,
            store.priority.clone(),
            2,
        );
        let writes = futures::future::join_all((0..300).map(|i| {
            let store = store.clone();
            async move {
                store
                    .append_audit(account, "t", "POST /messages", "/messages", 201)
                    .await
                    .unwrap();
                store
                    .insert_outbound(&message(account, channel, i), MessageStatus::Sending, None)
                    .await
                    .unwrap()
            }
        }))
        .await;
        let mut ids: Vec<i64> = writes.iter().map(|m| m.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 300);
        for (i, m) in writes.iter().enumerate() {
            assert_eq!(m.contact_phone, format!("55119{:08}", i % 150));
        }
        for _ in 0..50 {
            store
                .append_audit(account, "t", "GET /messages", "/messages", 200)
                .await
                .unwrap();
        }
        store.sends.flush().await.unwrap();
        assert_eq!(
            audit_lines(&store, account).await,
            350,
            "every line queued before the flush is committed"
        );
    }

    /// D-097: on PostgreSQL a batch of new sends without keys, with audit lines, is one
    /// statement: each send gets its own row in its contact's conversation (one that existed
    /// before, one new, one contact twice in the batch), the audit lines are committed by the
    /// time the sends are answered, and a batch whose statement fails (a number of another
    /// account, refused by the composite key of D-092) answers that send's error and keeps
    /// the others and the lines.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_postgres_a_small_batch_of_sends_is_one_statement_with_its_audit_lines() {
        let Some((store, account, channel, db)) =
            crate::test_support::postgres_store_with_channel().await
        else {
            return;
        };
        let first = store
            .insert_outbound(&message(account, channel, 1), MessageStatus::Sending, None)
            .await
            .unwrap();
        for round in 0..20 {
            let before = audit_lines(&store, account).await;
            store
                .append_audit(account, "t", "POST /messages", "/messages", 201)
                .await
                .unwrap();
            let batch = futures::future::join_all([1, 2, 2].map(|i| {
                let store = store.clone();
                async move {
                    store
                        .insert_outbound(
                            &message(account, channel, i),
                            MessageStatus::Sending,
                            None,
                        )
                        .await
                        .unwrap()
                }
            }))
            .await;
            assert_eq!(
                audit_lines(&store, account).await,
                before + 1,
                "round {round}: the line is committed with the sends"
            );
            assert_eq!(batch[0].conversation_id, first.conversation_id);
            assert_eq!(batch[0].contact_phone, first.contact_phone);
            assert_eq!(batch[1].conversation_id, batch[2].conversation_id);
            assert_ne!(batch[1].conversation_id, first.conversation_id);
            assert_ne!(batch[1].id, batch[2].id);
            for m in &batch {
                let stored = store.message(account, m.id).await.unwrap();
                assert_eq!(&stored, m, "the answer is the stored row");
                assert_eq!(stored.status, MessageStatus::Sending);
                assert_eq!(stored.channel_id, channel);
            }
        }
        // A send on a number of another account is refused by the database; the others of
        // its batch and the audit line are kept.
        let other = store.ensure_account("other").await.unwrap();
        let before = audit_lines(&store, account).await;
        store
            .append_audit(account, "t", "POST /messages", "/messages", 201)
            .await
            .unwrap();
        let (bad_send, good_send) = (message(other.id, channel, 3), message(account, channel, 4));
        let (bad, good) = tokio::join!(
            store.insert_outbound(&bad_send, MessageStatus::Sending, None),
            store.insert_outbound(&good_send, MessageStatus::Sending, None),
        );
        assert!(bad.is_err(), "{bad:?}");
        let good = good.unwrap();
        assert_eq!(store.message(account, good.id).await.unwrap(), good);
        store.sends.flush().await.unwrap();
        assert_eq!(audit_lines(&store, account).await, before + 1);
        crate::test_support::drop_postgres(store, &db).await;
    }

    /// D-098: on PostgreSQL the providers' answers of a small batch are one statement with
    /// their events' deliveries and audit lines: each answer is the stored row, its event went
    /// to the subscription that lists `message.sent` (once, describing the row as written)
    /// and not to the one that does not; a message a status webhook moved first keeps its
    /// status and gets no event from its answer (the webhook wrote it, D-103); an unknown message answers `NotFound`
    /// alone, the others of its batch written once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_postgres_small_batches_of_answers_are_one_statement_with_their_events() {
        use crate::webhooks::NewEvent;
        use engine::webhook::EventKind;
        use sqlx::Row;
        let Some((store, account, channel, db)) =
            crate::test_support::postgres_store_with_channel().await
        else {
            return;
        };
        let (listed, _) = store
            .create_subscription(
                account,
                channel,
                "https://example.com/a",
                &[EventKind::MessageSent],
            )
            .await
            .unwrap();
        let (unlisted, _) = store
            .create_subscription(
                account,
                channel,
                "https://example.com/b",
                &[EventKind::MessageAck],
            )
            .await
            .unwrap();
        let event = |m: &MessageRecord| NewEvent {
            account_id: m.account_id,
            channel_id: m.channel_id,
            kind: EventKind::MessageSent,
            channel: serde_json::json!({"id": m.channel_id}),
            data: serde_json::json!({
                "id": m.id,
                "status": m.status.as_str(),
                "wamid": m.provider_message_id,
            }),
            created_at: 1,
        };
        let deliveries = |subscription: i64| {
            let pool = store.pool.clone();
            async move {
                sqlx::query(
                    "SELECT data FROM webhook_deliveries WHERE subscription_id = $1 ORDER BY id",
                )
                .bind(subscription)
                .fetch_all(&pool)
                .await
                .unwrap()
                .iter()
                .map(|r| serde_json::from_str(&r.get::<String, _>("data")).unwrap())
                .collect::<Vec<serde_json::Value>>()
            }
        };
        let mut expected = Vec::new();
        let statements = super::ANSWER_STATEMENTS.load(std::sync::atomic::Ordering::Relaxed);
        for round in 0..10 {
            let queued = futures::future::join_all((0..5).map(|i| {
                let store = store.clone();
                async move {
                    store
                        .insert_outbound(
                            &message(account, channel, 5 * round + i),
                            MessageStatus::Sending,
                            None,
                        )
                        .await
                        .unwrap()
                }
            }))
            .await;
            // The fifth: a status webhook came first (it knew our id), moved it to
            // `delivered` and set its wamid.
            let first = &queued[4];
            sqlx::query(
                "UPDATE messages SET status = 'delivered', provider_message_id = $2, sent_at = 5, delivered_at = 5 WHERE id = $1",
            )
            .bind(first.id)
            .bind(format!("wamid.{}", first.id))
            .execute(&store.pool)
            .await
            .unwrap();
            let before = audit_lines(&store, account).await;
            store
                .append_audit(account, "t", "POST /messages", "/messages", 201)
                .await
                .unwrap();
            let unknown = MessageRecord {
                id: i64::MAX,
                ..queued[0].clone()
            };
            // Batches of at most four answers (one statement each): the moved message and
            // the unknown one with a plain one, then three plain ones.
            let answer = |m: &MessageRecord| {
                let (store, m) = (store.clone(), m.clone());
                async move {
                    store
                        .mark_message_sent(
                            &m,
                            &format!("wamid.{}", m.id),
                            Box::new(move |m| vec![event(m)]),
                        )
                        .await
                }
            };
            let mut answers =
                futures::future::join_all([&queued[0], &queued[4], &unknown].map(answer)).await;
            assert!(
                matches!(answers[2], Err(StorageError::NotFound)),
                "round {round}: {:?}",
                answers[2]
            );
            answers.truncate(2);
            let moved = answers.remove(1);
            answers.extend(futures::future::join_all(queued[1..4].iter().map(answer)).await);
            answers.push(moved);
            for (k, (m, answer)) in queued.iter().zip(&answers).enumerate() {
                let (rec, _) = answer.as_ref().unwrap();
                assert_eq!(
                    rec,
                    &store.message(account, m.id).await.unwrap(),
                    "the stored row"
                );
                assert_eq!(rec.provider_message_id, Some(format!("wamid.{}", m.id)));
                // The moved one's `message.sent` was the status webhook's to write (D-103).
                if k != 4 {
                    expected.push(event(rec).data);
                }
            }
            assert_eq!(answers[0].as_ref().unwrap().0.status, MessageStatus::Sent);
            assert_eq!(
                answers[4].as_ref().unwrap().0.status,
                MessageStatus::Delivered
            );
            assert_eq!(
                audit_lines(&store, account).await,
                before + 1,
                "round {round}"
            );
        }
        assert!(
            super::ANSWER_STATEMENTS.load(std::sync::atomic::Ordering::Relaxed) >= statements + 20,
            "each batch of answers was one statement"
        );
        let mut written = deliveries(listed.id).await;
        let key = |v: &serde_json::Value| v["id"].as_i64().unwrap();
        written.sort_by_key(key);
        expected.sort_by_key(key);
        assert_eq!(
            written, expected,
            "one event per answer a status did not precede, as the row was written"
        );
        assert!(deliveries(unlisted.id).await.is_empty());
        crate::test_support::drop_postgres(store, &db).await;
    }

    /// D-089: an audit line queued alone waits for the next write and is committed with it
    /// (by the time that write is answered), and alone it is still committed, after
    /// [`super::AUDIT_LINGER`], with nothing else asked of the writer.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_audit_line_shares_the_next_write_or_is_committed_alone_soon() {
        let dir = tempfile::tempdir().unwrap();
        let (store, account, channel) = crate::test_support::store_with_channel(dir.path()).await;
        let before = audit_lines(&store, account).await;
        store
            .append_audit(account, "t", "POST /messages", "/messages", 201)
            .await
            .unwrap();
        store
            .insert_outbound(&message(account, channel, 0), MessageStatus::Sending, None)
            .await
            .unwrap();
        assert_eq!(
            audit_lines(&store, account).await,
            before + 1,
            "committed with the send"
        );
        store
            .append_audit(account, "t", "GET /messages", "/messages", 200)
            .await
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while audit_lines(&store, account).await < before + 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "a line alone is committed after the linger"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// `synchronous_commit` as the transaction `tx` sees it.
    async fn commit_setting(tx: &mut sqlx::Transaction<'static, sqlx::Any>) -> String {
        sqlx::query_scalar("SELECT current_setting('synchronous_commit')")
            .fetch_one(&mut **tx)
            .await
            .unwrap()
    }

    /// D-141: a recoverable write (a settlement, webhook attempts) commits without waiting
    /// for the log's flush, and so does a batch of 1:1 answers in one statement; nothing of it
    /// stays on the connection: afterwards every writer connection's transactions commit
    /// synchronously, as a campaign's claim and a new send must.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_postgres_relaxed_commits_stay_in_their_own_transactions() {
        let Some((store, account, channel, db)) =
            crate::test_support::postgres_store_with_channel().await
        else {
            return;
        };
        let mut tx = store.begin_recoverable_write().await.unwrap();
        assert_eq!(commit_setting(&mut tx).await, "off");
        tx.commit().await.unwrap();
        let statements = super::ANSWER_STATEMENTS.load(std::sync::atomic::Ordering::Relaxed);
        let queued = store
            .insert_outbound(&message(account, channel, 0), MessageStatus::Sending, None)
            .await
            .unwrap();
        let (sent, _) = store
            .mark_message_sent(&queued, "wamid.relaxed", Box::new(|_| Vec::new()))
            .await
            .unwrap();
        assert_eq!(sent.status, MessageStatus::Sent);
        assert!(
            super::ANSWER_STATEMENTS.load(std::sync::atomic::Ordering::Relaxed) > statements,
            "the answer took the one-statement path"
        );
        // Every connection of the writer at once: each one's next transaction is synchronous.
        let mut all = Vec::new();
        for _ in 0..store.writer.options().get_max_connections() {
            all.push(store.begin_write().await.unwrap());
        }
        for tx in &mut all {
            assert_eq!(commit_setting(tx).await, "on");
        }
        drop(all);
        crate::test_support::drop_postgres(store, &db).await;
    }

    /// Answers written in one statement lock their rows in message id order, as every writer
    /// of message rows does (D-095), whatever order they came in: a status batch that holds
    /// the lower id and then asks for the higher one waits for nothing, and the answers are
    /// written once it commits (in arrival order this was a deadlock, `api_load` on
    /// PostgreSQL).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_postgres_answers_in_one_statement_lock_in_id_order() {
        let Some((store, account, channel, db)) =
            crate::test_support::postgres_store_with_channel().await
        else {
            return;
        };
        let mut queued = Vec::new();
        for i in 0..2 {
            queued.push(
                store
                    .insert_outbound(&message(account, channel, i), MessageStatus::Sending, None)
                    .await
                    .unwrap(),
            );
        }
        let (low, high) = (queued[0].clone(), queued[1].clone());
        assert!(low.id < high.id);
        let lock = "SELECT id FROM messages WHERE id = $1 FOR UPDATE";
        let mut status_batch = store.pool.begin().await.unwrap();
        sqlx::query(lock)
            .bind(low.id)
            .execute(&mut *status_batch)
            .await
            .unwrap();
        // The higher id's answer came first.
        let ops: Vec<super::Op> = [&high, &low]
            .into_iter()
            .map(|q| super::Op::Sent {
                queued: q.clone(),
                wamid: format!("wamid.order.{}", q.id),
                make_events: Box::new(|_| Vec::new()),
                reply: tokio::sync::oneshot::channel().0,
            })
            .collect();
        let mut conn = store.writer.acquire().await.unwrap();
        let answers = tokio::spawn(async move {
            super::answer_in_one_statement(&mut conn, &ops)
                .await
                .map(|(done, _)| done.len())
        });
        // The statement is waiting for the lower id by now.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let second = sqlx::query(lock)
            .bind(high.id)
            .execute(&mut *status_batch)
            .await;
        assert!(
            second.is_ok(),
            "the status batch was chosen to end a deadlock: {second:?}"
        );
        status_batch.commit().await.unwrap();
        let written = answers.await.unwrap();
        assert!(
            matches!(written, Ok(2)),
            "both answers in one statement: {written:?}"
        );
        for q in [&low, &high] {
            let rec = store.message(account, q.id).await.unwrap();
            assert_eq!(rec.status, MessageStatus::Sent);
            assert_eq!(
                rec.provider_message_id.as_deref(),
                Some(format!("wamid.order.{}", q.id).as_str())
            );
        }
        crate::test_support::drop_postgres(store, &db).await;
    }

    /// D-146: in a batch that mixes a provider's answer with a new send, the answer is written
    /// and answered first, committed on its own, without waiting for the new send's row (here
    /// held back by a lock on its conversation; before, the answer waited for it in the
    /// batch's one transaction). Both are written, each once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_postgres_an_answer_does_not_wait_for_a_new_send_of_its_batch() {
        let Some((store, account, channel, db)) =
            crate::test_support::postgres_store_with_channel().await
        else {
            return;
        };
        let queued = store
            .insert_outbound(&message(account, channel, 0), MessageStatus::Sending, None)
            .await
            .unwrap();
        // The new send's conversation exists and another transaction holds it.
        let blocked = message(account, channel, 1);
        store
            .insert_outbound(&blocked, MessageStatus::Sent, None)
            .await
            .unwrap();
        let mut holder = store.pool.begin().await.unwrap();
        sqlx::query(
            "SELECT id FROM conversations WHERE channel_id = $1 AND contact_phone = $2 FOR UPDATE",
        )
        .bind(channel)
        .bind(&blocked.contact_phone)
        .execute(&mut *holder)
        .await
        .unwrap();
        let (insert_reply, inserted) = tokio::sync::oneshot::channel();
        let (sent_reply, answered) = tokio::sync::oneshot::channel();
        let ops = vec![
            super::Op::Insert {
                new: blocked,
                status: MessageStatus::Sending,
                key: None,
                fencing: None,
                reply: insert_reply,
            },
            super::Op::Sent {
                queued: queued.clone(),
                wamid: "wamid.apart".into(),
                make_events: Box::new(|_| Vec::new()),
                reply: sent_reply,
            },
        ];
        let conn = store.writer.acquire().await.unwrap();
        let (writer, priority) = (store.writer.clone(), store.priority.clone());
        let batch = tokio::spawn(async move {
            let mut flushes = Vec::new();
            super::write_batch_on(
                &writer,
                crate::Backend::Postgres,
                &priority,
                conn,
                ops,
                &mut flushes,
            )
            .await;
        });
        let answer = tokio::time::timeout(std::time::Duration::from_secs(5), answered)
            .await
            .expect("the answer is not held by the new send")
            .unwrap()
            .unwrap();
        assert_eq!(answer.0.status, MessageStatus::Sent);
        let stored = store.message(account, queued.id).await.unwrap();
        assert_eq!(stored.provider_message_id.as_deref(), Some("wamid.apart"));
        assert!(
            !batch.is_finished(),
            "the new send waits for its conversation"
        );
        holder.commit().await.unwrap();
        let new = inserted.await.unwrap().unwrap();
        assert_eq!(new.status, MessageStatus::Sending);
        batch.await.unwrap();
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM messages WHERE channel_id = $1")
            .bind(channel)
            .fetch_one(&store.pool)
            .await
            .unwrap();
        assert_eq!(n, 3, "each write once");
        crate::test_support::drop_postgres(store, &db).await;
    }
}
