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
}
