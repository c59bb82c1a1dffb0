//! Rolling 24 h counters of unique business-initiated recipients (PROVIDER.md §10.2: the
//! messaging limit counts unique users reached outside a customer-service window in a moving
//! 24-hour period).

use std::collections::HashMap;

/// Unique recipients in a rolling window: each recipient counts once while its latest
/// business-initiated send is younger than the window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RollingUnique {
    window_ms: i64,
    last_send: HashMap<String, i64>,
}

impl RollingUnique {
    /// A counter over `window_ms` (use [`crate::DAY_MS`]).
    pub fn new(window_ms: i64) -> Self {
        Self {
            window_ms,
            last_send: HashMap::new(),
        }
    }

    /// Whether `recipient` already counts at `now` (a new send to them costs no headroom).
    pub fn contains(&self, recipient: &str, now: i64) -> bool {
        self.last_send
            .get(recipient)
            .is_some_and(|t| now - *t < self.window_ms)
    }

    /// Records a send to `recipient` at `at`.
    pub fn record(&mut self, recipient: &str, at: i64) {
        let e = self.last_send.entry(recipient.to_string()).or_insert(at);
        *e = (*e).max(at);
    }

    /// Unique recipients counting at `now`. Drops expired entries, so memory follows the
    /// window, not history.
    pub fn count(&mut self, now: i64) -> i64 {
        let w = self.window_ms;
        self.last_send.retain(|_, t| now - *t < w);
        self.last_send.len() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_recipient_counts_once_while_inside_the_window() {
        let mut r = RollingUnique::new(1000);
        r.record("a", 0);
        r.record("a", 10);
        r.record("b", 500);
        assert_eq!(r.count(600), 2);
        assert!(r.contains("a", 600));
        assert_eq!(r.count(1009), 2, "a's latest send at 10 still counts");
        assert_eq!(r.count(1010), 1);
        assert!(!r.contains("a", 1010));
        assert_eq!(r.count(1500), 0);
    }
}
