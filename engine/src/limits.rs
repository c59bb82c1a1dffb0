//! Rolling 24 h counters of unique business-initiated recipients (PROVIDER.md §10.2: the
//! messaging limit counts unique users reached outside a customer-service window in a moving
//! 24-hour period).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// Unique recipients in a rolling window: each recipient counts once while its latest
/// business-initiated send is younger than the window.
///
/// Expiry is amortised: every send is also queued by time in a min-heap, and counting pops only
/// what has expired, so a count costs O(expired · log n), not O(recipients) (this runs on every
/// message of a channel actor).
///
/// Recipients are kept as 64-bit keys ([`recipient_key`]), not strings: about 35 bytes per
/// recipient instead of about 110, which matters because a number, its BM and its group each
/// hold every recipient of the last 24 h (1,000,000 sends held ~300 MB as strings).
#[derive(Debug, Clone, Default)]
pub struct RollingUnique {
    window_ms: i64,
    last_send: HashMap<u64, i64>,
    by_time: BinaryHeap<Reverse<(i64, u64)>>,
}

/// The key of a recipient: a phone of up to 15 digits (E.164) is encoded exactly (its length in
/// the top byte, so `0123` and `123` differ); anything else is hashed (SipHash with fixed keys,
/// top bit set so it never meets a phone's key).
pub fn recipient_key(recipient: &str) -> u64 {
    let b = recipient.as_bytes();
    if !b.is_empty() && b.len() <= 15 && b.iter().all(u8::is_ascii_digit) {
        let value = b.iter().fold(0u64, |acc, d| acc * 10 + u64::from(d - b'0'));
        return ((b.len() as u64) << 56) | value;
    }
    use std::hash::{Hash, Hasher};
    #[allow(deprecated)]
    let mut h = std::hash::SipHasher::new();
    recipient.hash(&mut h);
    h.finish() | (1 << 63)
}

impl RollingUnique {
    /// A counter over `window_ms` (use [`crate::DAY_MS`]).
    pub fn new(window_ms: i64) -> Self {
        Self {
            window_ms,
            last_send: HashMap::new(),
            by_time: BinaryHeap::new(),
        }
    }

    /// Whether `recipient` already counts at `now` (a new send to them costs no headroom).
    pub fn contains(&self, recipient: &str, now: i64) -> bool {
        self.last_send
            .get(&recipient_key(recipient))
            .is_some_and(|t| now - *t < self.window_ms)
    }

    /// Records a send to `recipient` at `at` (in any order of times).
    pub fn record(&mut self, recipient: &str, at: i64) {
        let key = recipient_key(recipient);
        let latest = self.last_send.entry(key).or_insert(at);
        if at >= *latest {
            *latest = at;
            self.by_time.push(Reverse((at, key)));
        }
    }

    /// Unique recipients counting at `now`. Drops expired entries, so memory follows the
    /// window, not history.
    pub fn count(&mut self, now: i64) -> i64 {
        while let Some(Reverse((t, _))) = self.by_time.peek() {
            if now - *t < self.window_ms {
                break;
            }
            let Reverse((t, r)) = self.by_time.pop().expect("peeked");
            // Only the recipient's latest send expires it; older heap entries are stale.
            if self.last_send.get(&r) == Some(&t) {
                self.last_send.remove(&r);
            }
        }
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

    #[test]
    fn phone_keys_are_exact_and_other_keys_never_meet_them() {
        assert_ne!(recipient_key("0123"), recipient_key("123"));
        assert_ne!(
            recipient_key("5511999990001"),
            recipient_key("5511999990002")
        );
        assert_eq!(
            recipient_key("5511999990001"),
            recipient_key("5511999990001")
        );
        assert_ne!(recipient_key("user@x"), recipient_key("user@y"));
        assert!(recipient_key("user@x") >> 63 == 1 && recipient_key("999999999999999") >> 63 == 0);
        assert_eq!(recipient_key("user@x"), recipient_key("user@x"));
    }

    #[test]
    fn out_of_order_records_and_resends_expire_by_the_latest_send() {
        let mut r = RollingUnique::new(1000);
        r.record("b", 900);
        r.record("a", 100);
        r.record("a", 50);
        assert_eq!(
            r.count(1050),
            2,
            "a's latest send (100) is still inside the window"
        );
        assert_eq!(r.count(1100), 1, "a expires 1000 ms after its latest send");
        r.record("b", 1000);
        assert_eq!(r.count(1950), 1, "b's older entry at 900 is stale");
        assert!(r.contains("b", 1950));
        assert_eq!(r.count(2000), 0);
    }
}
