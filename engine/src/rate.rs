//! A request limit over a sliding window (issue 49: the public sender's "at most 120 requests in
//! any 60 s", D-060): every admitted request is kept until it leaves the window, so a steady
//! client at the quota's pace is never refused and no 60 s ever holds more than the quota.

use std::collections::VecDeque;

/// At most `limit` requests in any `window_ms`: the admitted requests' times (ms, from any
/// monotonic origin), oldest first. Memory: at most `limit` entries (8 bytes each).
#[derive(Debug, Clone)]
pub struct SlidingWindow {
    limit: usize,
    window_ms: i64,
    admitted: VecDeque<i64>,
}

/// What [`SlidingWindow::admit`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Admitted: requests still admissible now, and ms until the whole quota is free again (the
    /// newest request leaves the window).
    Admitted {
        /// Requests left in the window now.
        remaining: usize,
        /// Ms until every request of the window has left it.
        reset_ms: i64,
    },
    /// Refused: ms until the oldest request of the window leaves it (one becomes admissible).
    Refused {
        /// Ms to wait before one more request is admitted (≥ 1).
        retry_after_ms: i64,
    },
}

impl SlidingWindow {
    /// A window admitting at most `limit` requests in any `window_ms`.
    pub fn new(limit: usize, window_ms: i64) -> Self {
        Self {
            limit,
            window_ms,
            admitted: VecDeque::with_capacity(limit.min(1024)),
        }
    }

    /// Admits one request at `now_ms` when fewer than `limit` were admitted in the window that
    /// ends at `now_ms` (a request admitted exactly `window_ms` earlier has left it).
    pub fn admit(&mut self, now_ms: i64) -> Admission {
        while self
            .admitted
            .front()
            .is_some_and(|t| *t <= now_ms - self.window_ms)
        {
            self.admitted.pop_front();
        }
        if self.admitted.len() >= self.limit {
            let oldest = self.admitted.front().copied().unwrap_or(now_ms);
            return Admission::Refused {
                retry_after_ms: (oldest + self.window_ms - now_ms).max(1),
            };
        }
        self.admitted.push_back(now_ms);
        Admission::Admitted {
            remaining: self.limit - self.admitted.len(),
            reset_ms: self.window_ms,
        }
    }
}

impl SlidingWindow {
    /// Counts `n` requests admitted elsewhere at `at_ms` (another node of the cluster, its
    /// admissions shared after the fact): they take room in the window as this node's own do,
    /// without a check (they were admitted already). The window never holds more than its
    /// limit: the oldest leave first.
    pub fn record(&mut self, at_ms: i64, n: usize) {
        for _ in 0..n.min(self.limit) {
            let i = self.admitted.partition_point(|t| *t <= at_ms);
            self.admitted.insert(i, at_ms);
        }
        while self.admitted.len() > self.limit {
            self.admitted.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_admitted_elsewhere_take_room_until_they_leave_the_window() {
        let mut w = SlidingWindow::new(10, 60_000);
        for _ in 0..4 {
            assert!(matches!(w.admit(0), Admission::Admitted { .. }));
        }
        w.record(1_000, 6);
        assert_eq!(
            w.admit(2_000),
            Admission::Refused {
                retry_after_ms: 58_000
            }
        );
        // The local ones leave first (admitted at 0), then the recorded ones (at 1,000).
        for left in (0..4).rev() {
            assert_eq!(
                w.admit(60_000),
                Admission::Admitted {
                    remaining: left,
                    reset_ms: 60_000
                }
            );
        }
        assert!(matches!(w.admit(60_500), Admission::Refused { .. }));
        assert!(matches!(w.admit(61_000), Admission::Admitted { .. }));
        // A late report never grows the window past its limit.
        w.record(30_000, 50);
        assert!(matches!(w.admit(62_000), Admission::Refused { .. }));
    }

    #[test]
    fn a_burst_takes_the_quota_then_waits_for_the_oldest() {
        let mut w = SlidingWindow::new(120, 60_000);
        for i in 0..120 {
            assert!(matches!(w.admit(i * 10), Admission::Admitted { .. }), "{i}");
        }
        assert_eq!(
            w.admit(5_000),
            Admission::Refused {
                retry_after_ms: 55_000
            }
        );
        assert!(matches!(
            w.admit(60_000),
            Admission::Admitted { remaining: 0, .. }
        ));
        assert!(matches!(w.admit(60_001), Admission::Refused { .. }));
        assert!(matches!(w.admit(60_010), Admission::Admitted { .. }));
    }

    /// Issue 49: a client paced at 2 requests/s, its requests arriving up to ±240 ms off its
    /// grid, is never refused by 120 per 59.5 s (the sender's window, D-106).
    #[test]
    fn a_steady_client_at_the_quotas_pace_is_never_refused() {
        let mut w = SlidingWindow::new(120, 59_500);
        for i in 0..1_000i64 {
            // A deterministic jitter in [-240, 240] ms.
            let jitter = (i * 7_919 % 481) - 240;
            let at = 1_000 + i * 500 + jitter;
            assert!(
                matches!(w.admit(at), Admission::Admitted { .. }),
                "request {i} refused"
            );
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Under any arrival pattern, no window of `window_ms` holds more than `limit` admitted
        /// requests, and a refusal happens only when the window is full.
        #[test]
        fn no_window_ever_holds_more_than_the_limit(
            gaps in proptest::collection::vec(0i64..400, 1..600),
            limit in 1usize..50,
        ) {
            let window = 5_000;
            let mut w = SlidingWindow::new(limit, window);
            let (mut now, mut admitted) = (0i64, Vec::new());
            for gap in gaps {
                now += gap;
                let in_window = admitted.iter().filter(|t| **t > now - window).count();
                match w.admit(now) {
                    Admission::Admitted { .. } => {
                        proptest::prop_assert!(in_window < limit);
                        admitted.push(now);
                    }
                    Admission::Refused { retry_after_ms } => {
                        proptest::prop_assert_eq!(in_window, limit);
                        proptest::prop_assert!(retry_after_ms >= 1 && retry_after_ms <= window);
                    }
                }
            }
        }
    }
}
