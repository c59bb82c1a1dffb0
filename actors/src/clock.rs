//! The actors' one clock (issue 51): every decision's `now` comes from a [`Clock`] held in
//! [`crate::Shared`], so a test can drive time instead of sleeping, and the engine's rules
//! receive the time they decide at.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Wall-clock time in ms since the Unix epoch (UTC) and monotonic instants for durations.
///
/// `Clock::system()` reads the machine's clocks; `Clock::manual(start_ms)` holds a time that
/// only [`Clock::advance`] moves (its instants move with it).
#[derive(Debug, Clone, Default)]
pub struct Clock {
    manual: Option<Arc<Manual>>,
}

#[derive(Debug)]
struct Manual {
    ms: AtomicI64,
    start_ms: i64,
    start: Instant,
}

impl Clock {
    /// The machine's clocks.
    pub fn system() -> Self {
        Self { manual: None }
    }

    /// A clock that stands at `start_ms` until advanced.
    pub fn manual(start_ms: i64) -> Self {
        Self {
            manual: Some(Arc::new(Manual {
                ms: AtomicI64::new(start_ms),
                start_ms,
                start: Instant::now(),
            })),
        }
    }

    /// Moves a manual clock forward by `by` (a system clock ignores it).
    pub fn advance(&self, by: Duration) {
        if let Some(m) = &self.manual {
            m.ms.fetch_add(by.as_millis() as i64, Ordering::SeqCst);
        }
    }

    /// Now, in ms since the Unix epoch (UTC).
    pub fn now_ms(&self) -> i64 {
        match &self.manual {
            Some(m) => m.ms.load(Ordering::SeqCst),
            None => storage::now_ms(),
        }
    }

    /// Now, as a monotonic instant (for durations and deadlines).
    pub fn instant(&self) -> Instant {
        match &self.manual {
            Some(m) => {
                let elapsed = m.ms.load(Ordering::SeqCst) - m.start_ms;
                m.start + Duration::from_millis(elapsed.max(0) as u64)
            }
            None => Instant::now(),
        }
    }
}

impl Clock {
    /// Now, read once as both a wall-clock time and an instant: what an actor reads when a
    /// message arrives and decides the whole message at.
    pub fn moment(&self) -> Moment {
        Moment {
            ms: self.now_ms(),
            at: self.instant(),
        }
    }

    /// A stopwatch started now (for the phase timings of a send).
    pub fn stopwatch(&self) -> Stopwatch {
        Stopwatch {
            clock: self.clone(),
            last: self.moment(),
        }
    }
}

/// One reading of a [`Clock`].
#[derive(Debug, Clone, Copy)]
pub struct Moment {
    /// Wall-clock time, ms since the Unix epoch (UTC).
    pub ms: i64,
    /// The same time as a monotonic instant (for deadlines).
    pub at: Instant,
}

/// Times consecutive phases of a piece of work through its [`Clock`]: each [`Stopwatch::lap`]
/// reads the clock once and answers the time since the previous lap (or the start).
#[derive(Debug, Clone)]
pub struct Stopwatch {
    clock: Clock,
    last: Moment,
}

impl Stopwatch {
    /// The time since the previous lap (or the start), and a new lap begins now.
    pub fn lap(&mut self) -> Duration {
        let now = self.clock.moment();
        let elapsed = now.at.saturating_duration_since(self.last.at);
        self.last = now;
        elapsed
    }

    /// The time since `start` (an earlier [`Stopwatch::last`]), and a new lap begins now.
    pub fn since(&mut self, start: Moment) -> Duration {
        self.lap();
        self.last.at.saturating_duration_since(start.at)
    }

    /// When the current lap began (the last reading of the clock).
    pub fn last(&self) -> Moment {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_advanced() {
        let c = Clock::manual(1_000);
        let (t0, i0) = (c.now_ms(), c.instant());
        assert_eq!(c.now_ms(), t0);
        c.advance(Duration::from_millis(250));
        assert_eq!(c.now_ms(), 1_250);
        assert_eq!(c.instant() - i0, Duration::from_millis(250));
        let s = Clock::system();
        assert!(s.now_ms() > 1_700_000_000_000);
    }

    #[test]
    fn a_stopwatch_times_each_lap_from_the_previous_one() {
        let c = Clock::manual(5_000);
        let mut w = c.stopwatch();
        assert_eq!(w.last().ms, 5_000);
        c.advance(Duration::from_millis(40));
        assert_eq!(w.lap(), Duration::from_millis(40));
        c.advance(Duration::from_millis(7));
        assert_eq!(w.lap(), Duration::from_millis(7));
        assert_eq!(w.last().ms, 5_047);
        assert_eq!(w.lap(), Duration::ZERO);
        let start = w.last();
        c.advance(Duration::from_millis(3));
        w.lap();
        c.advance(Duration::from_millis(2));
        assert_eq!(w.since(start), Duration::from_millis(5));
    }
}
