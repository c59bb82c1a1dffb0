//! The campaign send path's writer: outcomes of campaign sends are committed in batches, one
//! durable transaction for up to [`MAX_BATCH`] sends, instead of one commit per send (issue 6:
//! "no relaxed fsync on the send path: batch the commits instead").
//!
//! Send tasks hand their outcome over a bounded queue (so a slow disk slows the senders down
//! rather than growing memory) and go on; the writer takes whatever is queued, up to the batch
//! size, and commits it with the `message.sent` webhook events in one transaction. A send whose
//! outcome is lost in a crash before its commit stays `claimed` in storage and is resolved as
//! in doubt at the next start (D-032).

use crate::{events, Shared};
use std::sync::{Arc, Weak};
use storage::campaigns::Settlement;
use storage::channels::ChannelRecord;
use storage::now_ms;
use tokio::sync::mpsc;

/// Most outcomes committed in one transaction.
pub const MAX_BATCH: usize = 1000;

/// Outcomes that may wait in the queue before senders wait for the writer.
pub const QUEUE: usize = 8192;

/// One outcome with the channel it was sent through (for its `message.sent` event).
#[derive(Debug)]
pub struct SettleItem {
    /// The outcome.
    pub settlement: Settlement,
    /// The channel.
    pub record: Arc<ChannelRecord>,
}

/// Starts the writer; it ends when every sender is dropped.
pub(crate) fn spawn(shared: Weak<Shared>, mut rx: mpsc::Receiver<SettleItem>) {
    tokio::spawn(async move {
        let mut batch: Vec<SettleItem> = Vec::with_capacity(MAX_BATCH);
        while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
            let Some(shared) = shared.upgrade() else {
                return;
            };
            write(&shared, &batch).await;
            metrics::histogram!("disparo_campaign_commit_batch").record(batch.len() as f64);
            batch.clear();
        }
    });
}

async fn write(shared: &Shared, batch: &[SettleItem]) {
    let settlements: Vec<Settlement> = batch.iter().map(|i| i.settlement.clone()).collect();
    let mut delay = std::time::Duration::from_millis(50);
    for attempt in 1..=5 {
        let res = shared
            .store
            .settle_campaign_sends(&settlements, |i, m| {
                vec![events::message_sent(&batch[i].record, m, now_ms())]
            })
            .await;
        match res {
            Ok(n) => {
                if n > 0 {
                    shared.wake_dispatcher();
                }
                return;
            }
            Err(e) => {
                tracing::error!(error = %e, attempt, size = batch.len(), "could not record campaign sends");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
        }
    }
    // Left `claimed` in storage: resolved as in doubt when the campaign next starts (D-032).
    tracing::error!(
        size = batch.len(),
        "campaign send outcomes not recorded; they will be resolved as in doubt"
    );
}
