//! Rolling 24 h counters of unique business-initiated recipients (PROVIDER.md §10.2: the
//! messaging limit counts unique users reached outside a customer-service window in a moving
//! 24-hour period).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// Unique recipients in a rolling window: each recipient counts once while its latest
/// business-initiated send is younger than the window.
///
/// Two modes, because only a limit needs to know *who* counts:
/// - **exact** ([`RollingUnique::new`]): every recipient of the window is kept, so
///   [`RollingUnique::contains`] can tell whether a send is free (the recipient already counts)
///   and the count is exact. Memory follows the unique recipients of the window (about 35 bytes
///   each), which a limit bounds: a number or BM at a 100,000 tier never holds more than about
///   100,000. Expiry is amortised: every send is also queued by time in a min-heap, and counting
///   pops only what has expired, so a count costs O(expired · log n), not O(recipients).
/// - **estimated** ([`RollingUnique::estimated`], or [`RollingUnique::forget_members`]): for a
///   scope without a limit (an unlimited tier) nobody is kept; the count is a HyperLogLog
///   estimate (about 3 % standard error; within a few units below a few hundred) over a sliding
///   window of 24 sub-windows, so a send counts for up to one sub-window (1 h of a 24 h
///   window) longer than its exact expiry. Memory is fixed (about 26 KB), whatever the audience.
///
/// Both modes keep the estimate, so a scope that loses its limit switches to it at once; one that
/// gains a limit must be rebuilt exact from storage (the senders' history).
///
/// Recipients are kept as 64-bit keys ([`recipient_key`]), not strings.
#[derive(Debug, Clone)]
pub struct RollingUnique {
    window_ms: i64,
    members: Option<Members>,
    sketch: WindowSketch,
}

#[derive(Debug, Clone, Default)]
struct Members {
    last_send: HashMap<u64, i64>,
    by_time: BinaryHeap<Reverse<(i64, u64)>>,
}

impl Default for RollingUnique {
    fn default() -> Self {
        Self::new(crate::DAY_MS)
    }
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
    /// An exact counter over `window_ms` (use [`crate::DAY_MS`]).
    pub fn new(window_ms: i64) -> Self {
        Self {
            window_ms,
            members: Some(Members::default()),
            sketch: WindowSketch::new(window_ms),
        }
    }

    /// An estimating counter over `window_ms`: fixed memory, no membership (see the type).
    pub fn estimated(window_ms: i64) -> Self {
        Self {
            window_ms,
            members: None,
            sketch: WindowSketch::new(window_ms),
        }
    }

    /// Whether the counter keeps its recipients (exact mode).
    pub fn is_exact(&self) -> bool {
        self.members.is_some()
    }

    /// Drops the recipients and goes on estimating (the scope has no limit any more).
    pub fn forget_members(&mut self) {
        self.members = None;
    }

    /// Whether `recipient` already counts at `now` (a new send to them costs no headroom).
    /// Always `false` when estimating: every send is then taken as a new recipient.
    pub fn contains(&self, recipient: &str, now: i64) -> bool {
        self.members.as_ref().is_some_and(|m| {
            m.last_send
                .get(&recipient_key(recipient))
                .is_some_and(|t| now - *t < self.window_ms)
        })
    }

    /// Records a send to `recipient` at `at` (in any order of times).
    pub fn record(&mut self, recipient: &str, at: i64) {
        let key = recipient_key(recipient);
        self.sketch.record(key, at);
        if let Some(m) = &mut self.members {
            let latest = m.last_send.entry(key).or_insert(at);
            if at >= *latest {
                *latest = at;
                m.by_time.push(Reverse((at, key)));
            }
        }
    }

    /// Unique recipients counting at `now` (an estimate when not exact). Drops what expired,
    /// so memory follows the window, not history.
    pub fn count(&mut self, now: i64) -> i64 {
        self.sketch.expire(now);
        let Some(m) = &mut self.members else {
            return self.sketch.estimate();
        };
        while let Some(Reverse((t, _))) = m.by_time.peek() {
            if now - *t < self.window_ms {
                break;
            }
            let Reverse((t, r)) = m.by_time.pop().expect("peeked");
            // Only the recipient's latest send expires it; older heap entries are stale.
            if m.last_send.get(&r) == Some(&t) {
                m.last_send.remove(&r);
            }
        }
        m.last_send.len() as i64
    }

    /// When the recipient counting longest at `now` stops counting (ms): when headroom next
    /// grows. Exact: that recipient's latest send plus the window. Estimating: the end of the
    /// oldest sub-window plus the window (up to one sub-window late, as the count). `None`
    /// when nobody counts.
    pub fn frees_at(&mut self, now: i64) -> Option<i64> {
        self.count(now);
        let Some(m) = &mut self.members else {
            return self
                .sketch
                .slices
                .front()
                .map(|(start, _)| start + self.sketch.slice_ms + self.window_ms);
        };
        while let Some(&Reverse((t, r))) = m.by_time.peek() {
            if m.last_send.get(&r) == Some(&t) {
                return Some(t + self.window_ms);
            }
            // An older send of a recipient sent to again since: not what frees them.
            m.by_time.pop();
        }
        None
    }
}

/// Registers of each HyperLogLog: 2^10 (standard error 1.04 / √1024 ≈ 3.3 %).
const SKETCH_BITS: u32 = 10;
const REGISTERS: usize = 1 << SKETCH_BITS;
/// Sub-windows of the sliding window.
const SLICES: i64 = 24;

/// A sliding-window HyperLogLog: one sketch per sub-window of `window / 24`, and their union
/// (register-wise maximum) with its harmonic sum kept up to date, so an estimate is O(1) and a
/// record O(1); the union is rebuilt only when a sub-window expires.
#[derive(Debug, Clone)]
struct WindowSketch {
    slice_ms: i64,
    window_ms: i64,
    /// (start of the sub-window, its registers), oldest first.
    slices: std::collections::VecDeque<(i64, Box<[u8; REGISTERS]>)>,
    union: Box<[u8; REGISTERS]>,
    /// Σ 2^-register over the union.
    inverse_sum: f64,
    /// Registers of the union still at zero.
    zeros: usize,
}

impl WindowSketch {
    fn new(window_ms: i64) -> Self {
        Self {
            slice_ms: (window_ms / SLICES).max(1),
            window_ms,
            slices: std::collections::VecDeque::new(),
            union: Box::new([0; REGISTERS]),
            inverse_sum: REGISTERS as f64,
            zeros: REGISTERS,
        }
    }

    fn record(&mut self, key: u64, at: i64) {
        let start = at - at.rem_euclid(self.slice_ms);
        if self
            .slices
            .back()
            .is_some_and(|(s, _)| start > *s + self.window_ms)
        {
            // Far ahead of everything kept: what is kept has expired for this send's time.
            self.slices.clear();
            self.rebuild();
        }
        // Sends come in time order almost always: the newest slice first.
        let i = if self.slices.back().is_some_and(|(s, _)| *s == start) {
            self.slices.len() - 1
        } else {
            match self.slices.iter().position(|(s, _)| *s >= start) {
                Some(i) if self.slices[i].0 == start => i,
                Some(i) => {
                    self.slices.insert(i, (start, Box::new([0; REGISTERS])));
                    i
                }
                None => {
                    self.slices.push_back((start, Box::new([0; REGISTERS])));
                    self.slices.len() - 1
                }
            }
        };
        // splitmix64's finaliser: phone keys are not random enough for the register choice.
        let mut h = key.wrapping_add(0x9E37_79B9_7F4A_7C15);
        h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        h ^= h >> 31;
        let register = (h >> (64 - SKETCH_BITS)) as usize;
        let rank = ((h << SKETCH_BITS) | (1 << (SKETCH_BITS - 1))).leading_zeros() as u8 + 1;
        let slot = &mut self.slices[i].1[register];
        *slot = (*slot).max(rank);
        let old = self.union[register];
        if rank > old {
            self.union[register] = rank;
            self.inverse_sum += 2f64.powi(-i32::from(rank)) - 2f64.powi(-i32::from(old));
            if old == 0 {
                self.zeros -= 1;
            }
        }
    }

    /// Drops the sub-windows that ended a window ago; rebuilds the union if any went.
    fn expire(&mut self, now: i64) {
        let before = self.slices.len();
        while self
            .slices
            .front()
            .is_some_and(|(s, _)| now - (s + self.slice_ms) >= self.window_ms)
        {
            self.slices.pop_front();
        }
        if self.slices.len() != before {
            self.rebuild();
        }
    }

    fn rebuild(&mut self) {
        let mut union = [0u8; REGISTERS];
        for (_, r) in &self.slices {
            for (u, v) in union.iter_mut().zip(r.iter()) {
                *u = (*u).max(*v);
            }
        }
        *self.union = union;
        self.inverse_sum = self.union.iter().map(|r| 2f64.powi(-i32::from(*r))).sum();
        self.zeros = self.union.iter().filter(|r| **r == 0).count();
    }

    /// HyperLogLog's estimate, with linear counting for small sets (Flajolet et al. 2007).
    fn estimate(&self) -> i64 {
        let m = REGISTERS as f64;
        let raw = 0.7213 / (1.0 + 1.079 / m) * m * m / self.inverse_sum;
        let e = if raw <= 2.5 * m && self.zeros > 0 {
            m * (m / self.zeros as f64).ln()
        } else {
            raw
        };
        e.round() as i64
    }
}

/// A rolling 24 h limit several numbers share: their business portfolio's messaging limit
/// (PROVIDER.md §10.2: the limit is the portfolio's, shared by its numbers) or their sending
/// group's (D-037). Each member number counts its business-initiated recipients here as well as
/// in its own counter; a recipient already counted is free.
///
/// A plain value: whoever shares it serialises access (one lock per limit, taken group before
/// BM), so admission stays serial per limit (issue 15).
#[derive(Debug, Clone)]
pub struct SharedLimit {
    /// Shown in the members' health (a group's name; empty for a BM).
    pub name: String,
    /// The limit set on the scope itself (a BM's tier limit, a group's own limit), unique
    /// recipients per 24 h; `None`: none.
    pub own_limit: Option<i64>,
    /// A group's members and their own 24 h limits (`None`: unlimited): without an own limit
    /// the group's is their sum, and never above it. `None` for a BM.
    pub members: Option<HashMap<i64, Option<i64>>>,
    /// Unique business-initiated recipients of the members in the window.
    pub recipients: RollingUnique,
}

impl SharedLimit {
    /// A BM's limit: its tier's 24 h limit (`None`: unlimited or unknown).
    pub fn bm(limit: Option<i64>, recipients: RollingUnique) -> Self {
        Self {
            name: String::new(),
            own_limit: limit,
            members: None,
            recipients,
        }
    }

    /// A sending group's limit: its own (`None`: the sum of its members').
    pub fn group(name: String, own_limit: Option<i64>, recipients: RollingUnique) -> Self {
        Self {
            name,
            own_limit,
            members: Some(HashMap::new()),
            recipients,
        }
    }

    /// The limit in effect, unique recipients per 24 h; `None` = unlimited. A BM: its own. A
    /// group: the own limit when set (never above the members' sum), else the members' sum
    /// (unlimited when a member is).
    pub fn limit(&self) -> Option<i64> {
        let Some(members) = &self.members else {
            return self.own_limit;
        };
        let sum = members.values().try_fold(0i64, |acc, l| l.map(|l| acc + l));
        match (self.own_limit, sum) {
            (Some(own), Some(sum)) => Some(own.min(sum)),
            (Some(own), None) => Some(own),
            (None, sum) => sum,
        }
    }

    /// Headroom now (`now` in ms); `None` = unlimited.
    pub fn available(&mut self, now: i64) -> Option<i64> {
        let used = self.recipients.count(now);
        self.limit().map(|l| (l - used).max(0))
    }

    /// Whether a business-initiated send to `to` fits now: `to` already counts, or there is
    /// headroom. `None` asks for a new recipient.
    pub fn fits(&mut self, to: Option<&str>, now: i64) -> bool {
        to.is_some_and(|t| self.recipients.contains(t, now)) || self.available(now) != Some(0)
    }

    /// Sets a member number's own 24 h limit (a group; ignored for a BM).
    pub fn set_member_limit(&mut self, channel_id: i64, limit: Option<i64>) {
        if let Some(m) = self.members.as_mut() {
            m.insert(channel_id, limit);
        }
    }

    /// Removes a member number (it left the group).
    pub fn remove_member(&mut self, channel_id: i64) {
        if let Some(m) = self.members.as_mut() {
            m.remove(&channel_id);
        }
    }

    /// A group's name, own limit and members as stored now (after an edit): members that left
    /// stop counting toward the default limit; members that joined add theirs when their own
    /// number registers it ([`SharedLimit::set_member_limit`]). The recipients counted stay.
    pub fn regroup(&mut self, name: String, own_limit: Option<i64>, members: &[i64]) {
        self.name = name;
        self.own_limit = own_limit;
        if let Some(m) = self.members.as_mut() {
            m.retain(|id, _| members.contains(id));
        }
    }

    /// This limit as an exhausted quota of `scope` at `now` (`None` when it has headroom or
    /// no limit).
    pub fn exhausted(&mut self, scope: QuotaScope, now: i64) -> Option<Quota> {
        let limit = self.limit()?;
        (self.available(now) == Some(0))
            .then(|| Quota::read(scope, limit, &mut self.recipients, now))
    }

    /// The limit's reading at `now` (ms).
    pub fn reading(&mut self, now: i64) -> LimitReading {
        LimitReading {
            limit: self.limit(),
            used: self.recipients.count(now),
            available: self.available(now),
        }
    }
}

/// Which 24 h limit refused a new recipient (issue 49: each answers with its own figures).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum QuotaScope {
    /// The number's own (its tier's).
    Number,
    /// Its sending group's (D-037).
    Group,
    /// Its business portfolio's (PROVIDER.md §10.2).
    Bm,
}

impl QuotaScope {
    /// The wire name: `number`, `group`, `bm`.
    pub fn as_str(self) -> &'static str {
        match self {
            QuotaScope::Number => "number",
            QuotaScope::Group => "group",
            QuotaScope::Bm => "bm",
        }
    }
}

/// A 24 h limit found exhausted at one instant: what a refused send is answered with (429
/// `limite_24h_esgotado` with `Retry-After`, `limit`, `remaining`, `reset_at`). Serde: it
/// travels between nodes in cluster mode (issue 52).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Quota {
    /// Which limit.
    pub scope: QuotaScope,
    /// Unique recipients per 24 h.
    pub limit: i64,
    /// Counted now.
    pub used: i64,
    /// When headroom next returns (ms; [`RollingUnique::frees_at`]); `None` when nothing
    /// counted frees it (a limit of 0).
    pub reset_at: Option<i64>,
    /// `reset_at` less the time it was read at (ms, at least 0).
    pub retry_after_ms: Option<i64>,
}

impl Quota {
    /// The reading of `recipients` against `limit` at `now` as a quota of `scope`.
    pub fn read(scope: QuotaScope, limit: i64, recipients: &mut RollingUnique, now: i64) -> Self {
        let reset_at = recipients.frees_at(now);
        Quota {
            scope,
            limit,
            used: recipients.count(now),
            reset_at,
            retry_after_ms: reset_at.map(|t| (t - now).max(0)),
        }
    }
}

/// A shared limit's figures at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitReading {
    /// The limit in effect, unique recipients per 24 h; `None` = unlimited.
    pub limit: Option<i64>,
    /// Unique business-initiated recipients counted in the last 24 h.
    pub used: i64,
    /// Headroom; `None` = unlimited.
    pub available: Option<i64>,
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

    #[test]
    fn an_estimating_counter_is_exact_for_few_and_close_for_many_in_fixed_memory() {
        let mut r = RollingUnique::estimated(crate::DAY_MS);
        for i in 0..20 {
            r.record(&format!("55119{i:08}"), 1_000);
            r.record(&format!("55119{i:08}"), 2_000);
        }
        assert_eq!(r.count(3_000), 20, "repeats count once");
        assert!(!r.contains("5511900000001", 3_000), "it keeps nobody");
        for i in 20..200_000 {
            r.record(&format!("55119{i:08}"), 10_000 + i);
        }
        let n = r.count(300_000);
        assert!(
            (n - 200_000).abs() < 200_000 / 10,
            "estimate {n} for 200,000"
        );
        assert!(
            std::mem::size_of_val(&r) < 1_000,
            "the registers live in boxes"
        );
    }

    #[test]
    fn an_estimating_counter_forgets_by_sub_window() {
        let day = crate::DAY_MS;
        let hour = day / 24;
        let mut r = RollingUnique::estimated(day);
        r.record("5511900000001", 0);
        r.record("5511900000002", 3 * hour);
        assert_eq!(r.count(day - 1), 2);
        assert_eq!(r.count(day + hour), 1, "the first hour's send expired");
        assert_eq!(r.count(day + 4 * hour), 0);
        r.record("5511900000003", day + 5 * hour);
        assert_eq!(r.count(day + 5 * hour), 1);
    }

    #[test]
    fn forgetting_members_keeps_the_count() {
        let mut r = RollingUnique::new(1000);
        for i in 0..50 {
            r.record(&format!("55119{i:08}"), 10);
        }
        assert_eq!(r.count(20), 50);
        assert!(r.is_exact() && r.contains("5511900000007", 20));
        r.forget_members();
        assert!(!r.is_exact() && !r.contains("5511900000007", 20));
        let n = r.count(20);
        assert!((48..=52).contains(&n), "estimate {n} for 50");
    }

    #[test]
    fn a_regrouped_limit_drops_members_that_left_and_keeps_its_count() {
        let mut g = SharedLimit::group("a".into(), None, RollingUnique::new(1000));
        g.set_member_limit(1, Some(250));
        g.set_member_limit(2, Some(1000));
        g.recipients.record("5511900000001", 10);
        assert_eq!(
            g.reading(20),
            LimitReading {
                limit: Some(1250),
                used: 1,
                available: Some(1249)
            }
        );
        g.regroup("b".into(), None, &[2, 3]);
        assert_eq!(g.name, "b");
        assert_eq!(g.reading(20).limit, Some(1000), "number 1 left");
        g.regroup("b".into(), Some(400), &[2]);
        assert_eq!(g.reading(20).available, Some(399));
        let mut bm = SharedLimit::bm(Some(2), RollingUnique::new(1000));
        bm.regroup(String::new(), Some(5), &[]);
        assert_eq!(bm.reading(20).limit, Some(5), "a BM has no members to drop");
    }

    #[test]
    fn headroom_returns_when_the_longest_counted_recipient_leaves() {
        let mut r = RollingUnique::new(1000);
        assert_eq!(r.frees_at(0), None);
        r.record("5511900000001", 100);
        r.record("5511900000002", 300);
        r.record("5511900000001", 400);
        assert_eq!(
            r.frees_at(500),
            Some(1300),
            "…0001 was sent to again at 400"
        );
        assert_eq!(r.frees_at(1300), Some(1400));
        assert_eq!(r.frees_at(1400), None);
        let mut e = RollingUnique::estimated(24_000);
        e.record("5511900000001", 2_500);
        assert_eq!(
            e.frees_at(3_000),
            Some(3_000 + 24_000),
            "sub-window [2000, 3000)"
        );
        let mut bm = SharedLimit::bm(Some(2), RollingUnique::new(1000));
        bm.recipients.record("5511900000001", 10);
        assert_eq!(bm.exhausted(QuotaScope::Bm, 20), None);
        bm.recipients.record("5511900000002", 30);
        assert_eq!(
            bm.exhausted(QuotaScope::Bm, 40),
            Some(Quota {
                scope: QuotaScope::Bm,
                limit: 2,
                used: 2,
                reset_at: Some(1010),
                retry_after_ms: Some(970)
            })
        );
    }
}
