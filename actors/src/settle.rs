//! The send path's writers: outcomes of campaign sends and the provider's status reports are
//! committed in batches, one durable transaction for up to [`MAX_BATCH`] sends and one for up
//! to [`STATUS_JOBS`] status webhooks, instead of one commit per send or per webhook (issue 6:
//! "no relaxed fsync on the send path: batch the commits instead").
//!
//! There are as many writers as the backend takes concurrent writes
//! ([`storage::Store::send_path_writers`]: one on SQLite, several on PostgreSQL), each owning
//! the numbers whose id falls in its partition (`channel_id mod writers`): a number's outcomes
//! and statuses are always written by the same writer, in order, and two writers never touch
//! the same message row (issue 25 part 3).
//!
//! Send tasks hand their outcome over a bounded queue (so a slow disk slows the senders down
//! rather than growing memory) and go on; channel actors hand over each status webhook's
//! reports with the port its request waits on. The writer takes whatever is queued on both,
//! commits the outcomes with their `message.sent` events, then the statuses (in arrival order)
//! with their `message.ack` events, and answers each webhook. A send whose outcome is lost in a
//! crash before its commit stays `claimed` in storage and is resolved as in doubt at the next
//! start (D-032); a status webhook not answered is refused, and the provider sends it again.

use crate::error::ActorError;
use crate::{events, Shared};
use ractor::RpcReplyPort;
use std::sync::{Arc, Weak};
use storage::campaigns::Settlement;
use storage::channels::ChannelRecord;
use storage::messages::StatusReport;
use tokio::sync::mpsc;
use tracing::Instrument;

/// Most outcomes committed in one transaction.
pub const MAX_BATCH: usize = 1000;

/// Outcomes that may wait in the queue before senders wait for the writer.
pub const QUEUE: usize = 8192;

/// Most status webhooks applied in one transaction.
pub const STATUS_JOBS: usize = 128;

/// Status webhooks that may wait before channel actors wait for the writer.
pub const STATUS_QUEUE: usize = 1024;

/// The status reports of one provider webhook for one channel, and the port its request waits
/// on (answered with how many reports changed their message).
#[derive(Debug)]
pub struct StatusJob {
    /// The channel (for its `message.ack` events).
    pub record: Arc<ChannelRecord>,
    /// The reports, in the webhook's order.
    pub reports: Vec<StatusReport>,
    /// Who waits.
    pub reply: RpcReplyPort<Result<usize, ActorError>>,
}

/// One outcome with the channel it was sent through (for its `message.sent` event).
#[derive(Debug)]
pub struct SettleItem {
    /// The outcome.
    pub settlement: Settlement,
    /// The channel.
    pub record: Arc<ChannelRecord>,
}

/// The queues of the send path's writers, one pair per partition of the numbers.
#[derive(Debug)]
pub(crate) struct Writers {
    outcomes: Vec<mpsc::Sender<SettleItem>>,
    statuses: Vec<mpsc::Sender<StatusJob>>,
}

/// The queues' receiving ends, handed to [`spawn`].
pub(crate) struct Receivers(Vec<(mpsc::Receiver<SettleItem>, mpsc::Receiver<StatusJob>)>);

impl Writers {
    /// `n` partitions (at least one), each with its bounded queues.
    pub(crate) fn new(n: usize) -> (Self, Receivers) {
        let n = n.max(1);
        let mut outcomes = Vec::with_capacity(n);
        let mut statuses = Vec::with_capacity(n);
        let mut receivers = Vec::with_capacity(n);
        for _ in 0..n {
            let (otx, orx) = mpsc::channel(QUEUE);
            let (stx, srx) = mpsc::channel(STATUS_QUEUE);
            outcomes.push(otx);
            statuses.push(stx);
            receivers.push((orx, srx));
        }
        (Self { outcomes, statuses }, Receivers(receivers))
    }

    fn partition(&self, channel_id: i64) -> usize {
        channel_id.rem_euclid(self.outcomes.len() as i64) as usize
    }

    /// Queues a campaign send's outcome for its number's writer (waits while the queue is
    /// full). Gives the item back when the writer is gone.
    pub(crate) async fn settle(&self, item: SettleItem) -> Result<(), SettleItem> {
        let i = self.partition(item.settlement.channel_id);
        self.outcomes[i].send(item).await.map_err(|e| e.0)
    }

    /// Queues a status webhook's reports for its number's writer (waits while the queue is
    /// full). Gives the job back when the writer is gone.
    pub(crate) async fn statuses(&self, job: StatusJob) -> Result<(), StatusJob> {
        let i = self.partition(job.record.id);
        self.statuses[i].send(job).await.map_err(|e| e.0)
    }
}

/// Starts one writer per partition; each ends when its queues close (the runtime's shared
/// state is dropped).
pub(crate) fn spawn(shared: Weak<Shared>, receivers: Receivers) {
    for (partition, (outcomes, statuses)) in receivers.0.into_iter().enumerate() {
        spawn_one(shared.clone(), partition, outcomes, statuses);
    }
}

fn spawn_one(
    shared: Weak<Shared>,
    partition: usize,
    mut outcomes: mpsc::Receiver<SettleItem>,
    mut statuses: mpsc::Receiver<StatusJob>,
) {
    tokio::spawn(
        async move {
            let mut batch: Vec<SettleItem> = Vec::with_capacity(MAX_BATCH);
            let mut jobs: Vec<StatusJob> = Vec::with_capacity(STATUS_JOBS);
            loop {
                // Wait for either queue, then take what the other holds too.
                let open = tokio::select! {
                    n = outcomes.recv_many(&mut batch, MAX_BATCH) => n > 0,
                    n = statuses.recv_many(&mut jobs, STATUS_JOBS) => n > 0,
                };
                if !open {
                    return;
                }
                while batch.len() < MAX_BATCH {
                    match outcomes.try_recv() {
                        Ok(item) => batch.push(item),
                        Err(_) => break,
                    }
                }
                while jobs.len() < STATUS_JOBS {
                    match statuses.try_recv() {
                        Ok(job) => jobs.push(job),
                        Err(_) => break,
                    }
                }
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                // One reading of the clock per round: the events' time and the batches' timing.
                let mut watch = shared.config.clock.stopwatch();
                let now = watch.last().ms;
                if !batch.is_empty() {
                    write(&shared, &batch, now).await;
                    // One settlement transaction, with its wait for the write connection (s).
                    metrics::histogram!("disparo_store_batch_seconds", "writer" => "settlements")
                        .record(watch.lap().as_secs_f64());
                    metrics::histogram!("disparo_campaign_commit_batch").record(batch.len() as f64);
                    batch.clear();
                }
                if !jobs.is_empty() {
                    watch.lap();
                    apply_statuses(&shared, std::mem::take(&mut jobs), now).await;
                    // One status transaction, with its wait for the write connection (s).
                    metrics::histogram!("disparo_store_batch_seconds", "writer" => "statuses")
                        .record(watch.lap().as_secs_f64());
                }
            }
        }
        .instrument(tracing::info_span!("send_path_writer", partition)),
    );
}

/// Applies the status webhooks and answers each one (`now`, ms: the time of a `message.sent`
/// whose send's answer is not recorded yet).
async fn apply_statuses(shared: &Shared, jobs: Vec<StatusJob>, now: i64) {
    let batches: Vec<(i64, &[StatusReport])> = jobs
        .iter()
        .map(|j| (j.record.id, j.reports.as_slice()))
        .collect();
    let base = &shared.config.public_url;
    let res = shared
        .store
        .apply_status_batches(&batches, |b, a| {
            let record = &jobs[b].record;
            let ack = events::message_ack(record, a);
            if a.accepted_here {
                // The send's answer is not recorded yet: its `message.sent` goes first (D-103).
                let at = a.message.sent_at.unwrap_or(now);
                vec![events::message_sent(record, &a.message, at, base), ack]
            } else {
                vec![ack]
            }
        })
        .await;
    match res {
        Ok((outcomes, deliveries)) => {
            if deliveries > 0 {
                shared.wake_dispatcher();
            }
            for (job, out) in jobs.into_iter().zip(outcomes) {
                tracing::debug!(
                    channel_id = job.record.id,
                    applied = out.applied.len(),
                    unchanged = out.unchanged,
                    unknown = out.unknown,
                    "status reports"
                );
                let _ = job.reply.send(Ok(out.applied.len()));
            }
        }
        Err(e) => {
            // Not stored, or stored in part: the webhooks are refused and the provider sends
            // them again (a report applied twice changes nothing the second time).
            shared.wake_dispatcher();
            tracing::error!(error = %e, webhooks = jobs.len(), "could not store status reports");
            for job in jobs {
                let _ = job.reply.send(Err(ActorError::Unavailable));
            }
        }
    }
}

/// How long campaign send outcomes wait for a database that is away before they are left
/// to the in-doubt resolution (D-032, D-124).
pub const OUTAGE_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// Waits until the storage's probe sees the database again (at least 250 ms: the probe may
/// not have noticed the outage yet), at most [`OUTAGE_WAIT`].
async fn wait_for_database(shared: &Shared) {
    let give_up = tokio::time::Instant::now() + OUTAGE_WAIT;
    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    while !shared.store.available() && tokio::time::Instant::now() < give_up {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Records the batch's outcomes (the store may commit them in several transactions, giving
/// waiting 1:1 sends their turn between them, D-093); after a failure it tries again with only
/// what was not committed (a replan written twice could send a recipient whom the campaign had
/// claimed again).
async fn write(shared: &Shared, batch: &[SettleItem], now: i64) {
    let settlements: Vec<Settlement> = batch.iter().map(|i| i.settlement.clone()).collect();
    let mut pending: Vec<usize> = (0..batch.len()).collect();
    let mut delay = std::time::Duration::from_millis(50);
    let (mut attempt, started) = (0, tokio::time::Instant::now());
    loop {
        let res = shared
            .store
            .settle_campaign_sends_from(&settlements, &mut pending, |i, m| {
                vec![events::message_sent(
                    &batch[i].record,
                    m,
                    now,
                    &shared.config.public_url,
                )]
            })
            .await;
        match res {
            Ok(n) => {
                if n > 0 {
                    shared.wake_dispatcher();
                }
                return;
            }
            // The database is away (D-124): the outcomes wait for it (they are the truth of
            // sends the provider took), for up to OUTAGE_WAIT, without using up the attempts.
            Err(e) if e.is_unavailable() && started.elapsed() < OUTAGE_WAIT => {
                tracing::warn!(error = %e, size = pending.len(), "database away: campaign send outcomes wait for it");
                wait_for_database(shared).await;
            }
            Err(e) => {
                // Parts committed before the failure may have written deliveries.
                shared.wake_dispatcher();
                attempt += 1;
                tracing::error!(error = %e, attempt, size = pending.len(), "could not record campaign sends");
                if attempt == 5 {
                    break;
                }
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
        }
    }
    // Left `claimed` in storage: in doubt once untouched for the grace period (the campaign's
    // sweep) or when the campaign next starts (D-032).
    tracing::error!(
        size = pending.len(),
        "campaign send outcomes not recorded; they will be resolved as in doubt"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_always_goes_to_the_same_writer_and_every_writer_gets_numbers() {
        let (writers, receivers) = Writers::new(3);
        assert_eq!(receivers.0.len(), 3);
        let mut seen = [0usize; 3];
        for channel_id in 1..=30 {
            let p = writers.partition(channel_id);
            assert_eq!(p, writers.partition(channel_id));
            seen[p] += 1;
        }
        assert_eq!(seen, [10, 10, 10]);
        // No writers asked for is one writer, never a division by zero.
        let (one, receivers) = Writers::new(0);
        assert_eq!(receivers.0.len(), 1);
        assert_eq!(one.partition(-5), 0);
    }
}
