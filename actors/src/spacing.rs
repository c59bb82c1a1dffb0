//! The guardrail cadence held between a number's campaign provider calls as they actually
//! start, not only as they were booked.
//!
//! The engine books each admitted campaign send a slot `cadence_ms` after the previous one
//! ([`engine::pacing::Pacer::take`]); each send then waits on its own. A send that starts late
//! (a busy machine, a full in-flight window) used to leave the next one on time, and two calls
//! went out a few ms apart although the number's cadence asked for 100 ms. Here a number's
//! campaign sends form a chain in the order they were admitted: each one hands the instant its
//! provider call started to the next, which starts no earlier than that plus the cadence.
//! The chain is owned by the channel actor (one link handed to each send task); nothing is
//! shared behind a lock.

use crate::clock::Clock;
use tokio::sync::oneshot;

/// When the previous send of the chain started its provider call (ms since the epoch), or
/// `None` when no send before it did.
type Started = Option<i64>;

/// A number's chain of campaign sends, kept by its channel actor.
#[derive(Debug, Default)]
pub(crate) struct Chain {
    /// Where the last link handed out reports its start.
    last: Option<oneshot::Receiver<Started>>,
}

impl Chain {
    /// The link of the next admitted send under a cadence of `cadence_ms` (ms); `None` without
    /// a cadence (`cadence_ms` ≤ 0: only the provider throughput paces the sends, through the
    /// booked slots), which also starts the chain again.
    pub(crate) fn link(&mut self, cadence_ms: i64) -> Option<Link> {
        if cadence_ms <= 0 {
            self.last = None;
            return None;
        }
        let (tx, rx) = oneshot::channel();
        Some(Link {
            after: self.last.replace(rx),
            previous: None,
            started: Some(tx),
            cadence_ms,
        })
    }
}

/// One send's place in its number's chain. Dropped without [`Link::started`] (the send never
/// reached the provider: refused, halted, fenced), it hands on the start it was given, so the
/// next send still keeps its distance from the last call that went out.
#[derive(Debug)]
pub(crate) struct Link {
    after: Option<oneshot::Receiver<Started>>,
    previous: Started,
    started: Option<oneshot::Sender<Started>>,
    cadence_ms: i64,
}

impl Link {
    /// Waits until the send before it has started its call (or given up) and then until
    /// `cadence_ms` after that start, by `clock`.
    pub(crate) async fn wait(&mut self, clock: &Clock) {
        if let Some(after) = self.after.take() {
            // A sender dropped without a word (its task ended abruptly): no start to keep to.
            self.previous = after.await.ok().flatten();
        }
        if let Some(previous) = self.previous {
            let wait = previous + self.cadence_ms - clock.now_ms();
            if wait > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(wait as u64)).await;
            }
        }
    }

    /// This send's provider call starts now (`at_ms`): the next send keeps its distance from
    /// it.
    pub(crate) fn started(&mut self, at_ms: i64) {
        if let Some(tx) = self.started.take() {
            let _ = tx.send(Some(at_ms));
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        if let Some(tx) = self.started.take() {
            let _ = tx.send(self.previous);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_send_keeps_the_cadence_from_the_previous_calls_actual_start() {
        let clock = Clock::manual(10_000);
        let mut chain = Chain::default();
        let mut first = chain.link(20).unwrap();
        let mut second = chain.link(20).unwrap();
        first.wait(&clock).await;
        // Booked at 10,000 and 10,020, the first call starts late, at 10,040: the second is
        // held until 10,060, 60 ms from now (the manual clock stands still).
        first.started(10_040);
        let before = std::time::Instant::now();
        second.wait(&clock).await;
        let held = before.elapsed();
        assert!(held >= std::time::Duration::from_millis(60), "{held:?}");
    }

    #[tokio::test]
    async fn a_send_that_never_called_hands_on_the_start_before_it() {
        let clock = Clock::manual(10_000);
        let mut chain = Chain::default();
        let mut first = chain.link(20).unwrap();
        let mut second = chain.link(20).unwrap();
        let mut third = chain.link(20).unwrap();
        first.wait(&clock).await;
        first.started(9_000);
        second.wait(&clock).await;
        drop(second);
        // The third keeps its distance from the first, the last call that went out.
        third.wait(&clock).await;
        assert_eq!(third.previous, Some(9_000));
    }

    #[test]
    fn no_cadence_no_chain() {
        let mut chain = Chain::default();
        assert!(chain.link(0).is_none());
        assert!(chain.last.is_none());
    }
}
