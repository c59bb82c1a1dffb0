//! The group commit of 1:1 sends (issue 25 part 4, decision D-076).
//!
//! Every `POST /messages` writes its message twice: the row before the provider call and the
//! provider's answer after it. Written one transaction each, concurrent sends queue for the
//! database's commit one by one (SQLite has one writer; each commit is a sync to disk). Here
//! one task, the writer of 1:1 sends, takes every write waiting in its queue (up to
//! [`MAX_BATCH`]), runs them in one transaction and answers each caller once that transaction
//! committed: durability is unchanged (nothing is answered before it is on disk), and the
//! commit's cost is shared by the sends that arrived while the previous one ran. Nothing waits
//! for a timer: alone, a send is written at once (the latency of one send is unchanged); under
//! load the batches grow by themselves.
//!
//! A statement that fails rolls the whole batch back; each write of it is then retried alone in
//! its own transaction, so one bad write answers its own error and the others are kept.
//!
//! Priority (issue 25 part 2): while a batch waits for the write connection, bulk writers
//! (campaign claims and settlements, status batches) that have not started yet wait for it
//! ([`Priority`]), so a 1:1 send queues behind at most the one bulk transaction already running.

use crate::messages::{
    insert_outbound_tx, mark_failed_tx, mark_sent_tx, MessageRecord, NewOutbound,
};
use crate::webhooks::{enqueue_events_tx, NewEvent};
use crate::{begin_write_on, Backend, Result, StorageError};
use engine::message::MessageStatus;
use sqlx::AnyPool;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{mpsc, oneshot, Notify};

/// Most writes in one transaction of the writer of 1:1 sends.
pub const MAX_BATCH: usize = 256;

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

enum Op {
    Insert {
        new: NewOutbound,
        status: MessageStatus,
        key: Option<String>,
        reply: oneshot::Sender<Result<MessageRecord>>,
    },
    Sent {
        id: i64,
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
    Insert(MessageRecord),
    Sent(MessageRecord),
    Failed(MessageRecord),
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
    fn wait(&self) -> Waiting<'_> {
        self.waiting.fetch_add(1, Ordering::AcqRel);
        Waiting(self)
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
        let (queue, rx) = mpsc::channel(QUEUE);
        tokio::spawn(run(writer, backend, priority, rx));
        Self { queue }
    }

    async fn call<T>(&self, op: Op, rx: oneshot::Receiver<Result<T>>) -> Result<T> {
        if self.queue.send(op).await.is_err() {
            return Err(StorageError::Corrupt(
                "o gravador de envios parou".to_string(),
            ));
        }
        rx.await.unwrap_or_else(|_| {
            Err(StorageError::Corrupt(
                "o gravador de envios parou".to_string(),
            ))
        })
    }

    pub(crate) async fn insert(
        &self,
        new: NewOutbound,
        status: MessageStatus,
        key: Option<String>,
    ) -> Result<MessageRecord> {
        let (reply, rx) = oneshot::channel();
        self.call(
            Op::Insert {
                new,
                status,
                key,
                reply,
            },
            rx,
        )
        .await
    }

    pub(crate) async fn sent(
        &self,
        id: i64,
        wamid: String,
        make_events: MakeEvents,
    ) -> Result<(MessageRecord, u64)> {
        let (reply, rx) = oneshot::channel();
        self.call(
            Op::Sent {
                id,
                wamid,
                make_events,
                reply,
            },
            rx,
        )
        .await
    }

    pub(crate) async fn failed(&self, failure: Failure) -> Result<MessageRecord> {
        let (reply, rx) = oneshot::channel();
        self.call(Op::Failed { failure, reply }, rx).await
    }
}

async fn run(
    writer: AnyPool,
    backend: Backend,
    priority: Arc<Priority>,
    mut rx: mpsc::Receiver<Op>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let ops = std::mem::take(&mut batch);
        let started = Instant::now();
        metrics::histogram!("disparo_send_commit_batch").record(ops.len() as f64);
        match write(&writer, backend, &priority, &ops).await {
            Ok((done, delivered)) => answer(ops, done, delivered),
            Err(e) => {
                if ops.len() > 1 {
                    tracing::warn!(error = %e, writes = ops.len(), "a batch of 1:1 sends failed; writing them one by one");
                }
                for op in ops {
                    let one = [op];
                    match write(&writer, backend, &priority, &one).await {
                        Ok((done, delivered)) => answer(one, done, delivered),
                        Err(e) => fail(one, e),
                    }
                }
            }
        }
        metrics::histogram!("disparo_store_batch_seconds", "writer" => "sends")
            .record(started.elapsed().as_secs_f64());
    }
}

/// Runs `ops` in one transaction; the events of the accepted sends are written to the outbox
/// in the same transaction. Returns each write's result and how many deliveries it enqueued.
async fn write(
    writer: &AnyPool,
    backend: Backend,
    priority: &Priority,
    ops: &[Op],
) -> Result<(Vec<Done>, u64)> {
    let mut tx = {
        let _waiting = priority.wait();
        begin_write_on(writer, backend).await?
    };
    let mut done = Vec::with_capacity(ops.len());
    let mut events = Vec::new();
    for op in ops {
        done.push(match op {
            Op::Insert {
                new, status, key, ..
            } => Done::Insert(insert_outbound_tx(&mut tx, new, *status, key.as_deref()).await?),
            Op::Sent {
                id,
                wamid,
                make_events,
                ..
            } => {
                let rec = mark_sent_tx(&mut tx, *id, wamid).await?;
                events.extend(make_events(&rec));
                Done::Sent(rec)
            }
            Op::Failed { failure, .. } => Done::Failed(mark_failed_tx(&mut tx, failure).await?),
        });
    }
    let delivered = enqueue_events_tx(&mut tx, &events).await?;
    tx.commit().await?;
    Ok((done, delivered))
}

fn answer<I: IntoIterator<Item = Op>>(ops: I, done: Vec<Done>, delivered: u64) {
    for (op, d) in ops.into_iter().zip(done) {
        match (op, d) {
            (Op::Insert { reply, .. }, Done::Insert(r)) => {
                let _ = reply.send(Ok(r));
            }
            (Op::Sent { reply, .. }, Done::Sent(r)) => {
                let _ = reply.send(Ok((r, delivered)));
            }
            (Op::Failed { reply, .. }, Done::Failed(r)) => {
                let _ = reply.send(Ok(r));
            }
            _ => unreachable!("each write's result is in its place"),
        }
    }
}

fn fail(ops: [Op; 1], e: StorageError) {
    let [op] = ops;
    match op {
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

#[cfg(test)]
mod tests {
    use crate::channels::NewChannel;
    use crate::messages::NewOutbound;
    use crate::{Cipher, Store};
    use engine::message::{MessageKind, MessageStatus};
    use engine::Secret;

    async fn store(dir: &std::path::Path) -> (Store, i64, i64) {
        let url = format!("sqlite://{}?mode=rwc", dir.join("t.db").display());
        let cipher = Cipher::from_base64(&Cipher::generate_key_base64()).unwrap();
        let store = Store::connect(&url, cipher).await.unwrap();
        store.migrate().await.unwrap();
        let account = store.ensure_account("t").await.unwrap();
        let channel = store
            .insert_channel(&NewChannel {
                account_id: account.id,
                name: "n".into(),
                phone: "5511999990000".into(),
                phone_number_id: "1".into(),
                waba_id: "2".into(),
                verified_name: "n".into(),
                status: "WORKING".into(),
                quality: "GREEN".into(),
                tier: None,
                access_token: Secret::new("t".to_string()),
                app_secret: None,
                verify_token: "v".into(),
                bm_id: None,
            })
            .await
            .unwrap();
        (store, account.id, channel.id)
    }

    fn message(account_id: i64, channel_id: i64, i: usize) -> NewOutbound {
        NewOutbound {
            account_id,
            channel_id,
            contact_phone: format!("55119{i:08}"),
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

    /// Concurrent writes share transactions, each caller gets its own row, and a write that
    /// fails in a batch (an unknown message) answers its own error while the batch's other
    /// writes are kept.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_are_grouped_and_a_failing_one_fails_alone() {
        let dir = tempfile::tempdir().unwrap();
        let (store, account, channel) = store(dir.path()).await;
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

        let marks =
            futures::future::join_all(inserted.iter().map(|m| m.id).chain([i64::MAX]).map(|id| {
                let store = store.clone();
                async move {
                    let res = store
                        .mark_message_sent(id, &format!("wamid.{id}"), Box::new(|_| Vec::new()))
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
}
