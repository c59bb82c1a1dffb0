//! Pacing of a number's campaign sends at the provider's throughput (issue 25, part 1).
//!
//! The provider allows each business number a throughput — 80 messages/s by default, 1,000
//! once upgraded, 20 for coexistence numbers (PROVIDER.md §10.1) — and answers 130429 above it.
//! A [`Pacer`] spreads a number's sends over time at the lower of that rate and the
//! guardrail cadence, and adapts to the provider's answers by AIMD: a 130429 halves the rate
//! (once per burst: the refusals of sends already in flight are the same signal) and pauses
//! the number briefly; each accepted send raises the rate a little, back up to the ceiling.
//! Pure: the caller passes the time.

/// A number's provider throughput from its `throughput.level` (PROVIDER.md §4.1, §10.1):
/// `HIGH` 1,000 messages/s; a coexistence number (on the WhatsApp Business app as well) 20;
/// otherwise (`STANDARD`, unknown) 80.
pub fn throughput_mps(level: Option<&str>, coexistence: bool) -> u32 {
    if coexistence {
        return COEXISTENCE_MPS;
    }
    match level.map(str::to_ascii_uppercase).as_deref() {
        Some("HIGH") => 1000,
        _ => DEFAULT_MPS,
    }
}

/// The provider's default throughput per number, messages/s.
pub const DEFAULT_MPS: u32 = 80;
/// A coexistence number's fixed throughput, messages/s.
pub const COEXISTENCE_MPS: u32 = 20;

/// Refusals within this long of the last decrease are the same burst (ms): the sends that were
/// in flight when the provider started refusing.
pub const BURST_MS: i64 = 1000;
/// The pause after a throughput refusal when the provider gave no `Retry-After` (ms).
pub const DEFAULT_PAUSE_MS: u64 = 1000;
/// Longest a 1:1 send waits for its slot, ms: a burst of 1:1 sends above the number's
/// throughput queues this long at most; beyond it a send is refused with the wait instead of
/// reaching the provider over its throughput (issue 54, D-128).
pub const PRIORITY_MAX_WAIT_MS: i64 = 1000;
/// The rate never drops below this share of the ceiling.
const FLOOR_SHARE: f64 = 0.05;
/// Each accepted send raises the rate by this share of the ceiling (additive increase: back
/// from half to the ceiling after 100 accepted sends).
const STEP_SHARE: f64 = 0.005;

/// A number's send pacing: the provider's ceiling, the current (adapted) rate and the next
/// free send slot.
#[derive(Debug, Clone, PartialEq)]
pub struct Pacer {
    ceiling: f64,
    rate: f64,
    /// The next free slot, ms (fractional: 80/s is a slot every 12.5 ms).
    next_free: f64,
    /// The next free slot of a 1:1 send, ms.
    priority_next: f64,
    /// When the rate was last decreased, ms.
    last_decrease: Option<i64>,
}

impl Pacer {
    /// A pacer at the number's provider throughput `mps` (messages/s).
    pub fn new(mps: u32) -> Self {
        let ceiling = f64::from(mps.max(1));
        Self {
            ceiling,
            rate: ceiling,
            next_free: 0.0,
            priority_next: 0.0,
            last_decrease: None,
        }
    }

    /// The provider's throughput, messages/s.
    pub fn ceiling(&self) -> u32 {
        self.ceiling as u32
    }

    /// The rate sends are paced at now, messages/s (≤ the ceiling).
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// A new provider throughput (a sync read it, or `THROUGHPUT_UPGRADE`): the rate keeps its
    /// share of the old ceiling.
    pub fn set_ceiling(&mut self, mps: u32) {
        let new = f64::from(mps.max(1));
        if new != self.ceiling {
            self.rate = (self.rate / self.ceiling * new).clamp(new * FLOOR_SHARE, new);
            self.ceiling = new;
        }
    }

    /// The interval between sends, ms: the slower of the adapted rate and the guardrail
    /// cadence (`cadence_ms`, 0 for none).
    fn interval(&self, cadence_ms: i64) -> f64 {
        (1000.0 / self.rate).max(cadence_ms.max(0) as f64)
    }

    /// Books the next slot at or after `now` (ms); returns its instant (ms).
    pub fn take(&mut self, cadence_ms: i64, now: i64) -> i64 {
        let at = self.next_free.max(now as f64);
        self.next_free = at + self.interval(cadence_ms);
        at.ceil() as i64
    }

    /// Whether a 1:1 send at `now` (ms) finds a slot within [`PRIORITY_MAX_WAIT_MS`].
    ///
    /// Errors: how long until one is within it (ms, ≥ 1) (issue 54, D-128).
    pub fn priority_room(&self, now: i64) -> Result<(), i64> {
        let wait = self.priority_next - now as f64;
        if wait > PRIORITY_MAX_WAIT_MS as f64 {
            return Err(((wait - PRIORITY_MAX_WAIT_MS as f64).ceil() as i64).max(1));
        }
        Ok(())
    }

    /// Books a 1:1 send's slot (an API send or a reply) at or after `now` (ms): 1:1 sends are
    /// paced among themselves at the adapted rate, ahead of the campaign — each takes the
    /// provider throughput a campaign send would have had, so the next free campaign slot
    /// moves one interval later (issue 25 part 2, D-076; slots already booked, at most the
    /// channel's horizon ahead, keep their time). Returns when to call the provider (ms);
    /// check [`Pacer::priority_room`] first.
    pub fn take_priority(&mut self, now: i64) -> i64 {
        let at = self.priority_next.max(now as f64);
        let interval = 1000.0 / self.rate;
        self.priority_next = at + interval;
        self.next_free = self.next_free.max(at) + interval;
        at.ceil() as i64
    }

    /// How many slots start within `horizon_ms` of `now`.
    pub fn slots_within(&self, cadence_ms: i64, now: i64, horizon_ms: i64) -> usize {
        let start = self.next_free.max(now as f64);
        let end = (now + horizon_ms) as f64;
        if start > end {
            0
        } else {
            ((end - start) / self.interval(cadence_ms)) as usize + 1
        }
    }

    /// The provider accepted a send: additive increase, up to the ceiling.
    pub fn on_accepted(&mut self) {
        self.rate = (self.rate + self.ceiling * STEP_SHARE).min(self.ceiling);
    }

    /// The provider refused a send for throughput (130429) at `now`, with its `Retry-After`
    /// (ms) when given. The first refusal of a burst halves the rate and pauses the number
    /// (`Retry-After`, else [`DEFAULT_PAUSE_MS`]): returns the instant the pause ends. Later
    /// refusals of the same burst (within [`BURST_MS`]) change nothing and return `None`.
    pub fn on_throttled(&mut self, now: i64, retry_after_ms: Option<u64>) -> Option<i64> {
        if self.last_decrease.is_some_and(|t| now - t < BURST_MS) {
            return None;
        }
        self.last_decrease = Some(now);
        self.rate = (self.rate / 2.0).max(self.ceiling * FLOOR_SHARE);
        let until = now + retry_after_ms.unwrap_or(DEFAULT_PAUSE_MS) as i64;
        self.next_free = self.next_free.max(until as f64);
        self.priority_next = self.priority_next.max(until as f64);
        Some(until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_priority_send_pushes_the_next_campaign_slot() {
        let mut p = Pacer::new(80);
        assert_eq!(p.take(0, 1_000), 1_000);
        // The campaign's next slot was 1,012.5; a 1:1 send at 1,001 takes it.
        assert_eq!(p.take_priority(1_001), 1_001);
        assert_eq!(p.take(0, 1_001), 1_025);
        // Idle: the 1:1 send takes the slot at its own time.
        assert_eq!(p.take_priority(5_000), 5_000);
        assert_eq!(p.take(0, 5_000), 5_013);
    }

    /// What a burst of 1:1 sends at `now` gets: booked slots, then the first refusal's wait.
    fn burst(p: &mut Pacer, now: i64, n: usize) -> (Vec<i64>, Option<i64>) {
        let mut booked = Vec::new();
        for _ in 0..n {
            match p.priority_room(now) {
                Ok(()) => booked.push(p.take_priority(now)),
                Err(wait) => return (booked, Some(wait)),
            }
        }
        (booked, None)
    }

    #[test]
    fn a_burst_of_priority_sends_queues_one_second_then_is_refused() {
        // 20 messages/s: a slot every 50 ms; 21 slots fit within 1 s of waiting.
        let mut p = Pacer::new(20);
        let (booked, refused) = burst(&mut p, 1_000, 25);
        assert_eq!(booked.len(), 21);
        assert_eq!((booked[0], booked[20]), (1_000, 2_000));
        assert!(booked.windows(2).all(|w| w[1] - w[0] == 50));
        assert_eq!(refused, Some(50), "the next slot is 50 ms past the bound");
        // Time passes: room again, at the pace.
        assert_eq!(burst(&mut p, 1_100, 1), (vec![2_050], None));
        // A throttle pauses 1:1 sends too.
        let mut q = Pacer::new(80);
        q.on_throttled(10_000, Some(600));
        assert_eq!(burst(&mut q, 10_000, 1), (vec![10_600], None));
    }

    #[test]
    fn the_level_gives_the_ceiling() {
        assert_eq!(throughput_mps(Some("HIGH"), false), 1000);
        assert_eq!(throughput_mps(Some("STANDARD"), false), 80);
        assert_eq!(throughput_mps(None, false), 80);
        assert_eq!(throughput_mps(Some("HIGH"), true), 20);
    }

    #[test]
    fn sends_are_spread_at_the_lower_of_rate_and_cadence() {
        let mut p = Pacer::new(20);
        let slots: Vec<i64> = (0..4).map(|_| p.take(0, 1000)).collect();
        assert_eq!(slots, vec![1000, 1050, 1100, 1150]);
        // A 100 ms cadence is slower than 20/s: it wins.
        let mut p = Pacer::new(20);
        assert_eq!((p.take(100, 0), p.take(100, 0)), (0, 100));
        // 80/s within 250 ms: 21 slots (0, 12.5, … 250).
        assert_eq!(Pacer::new(80).slots_within(0, 0, 250), 21);
    }

    #[test]
    fn one_burst_of_refusals_is_one_signal() {
        let mut p = Pacer::new(80);
        assert_eq!(p.on_throttled(10_000, None), Some(11_000));
        assert_eq!(p.rate(), 40.0);
        // The other refusals of the burst in flight: nothing more.
        for t in [10_001, 10_500, 10_999] {
            assert_eq!(p.on_throttled(t, None), None);
        }
        assert_eq!(p.rate(), 40.0);
        // The next slot waits for the pause.
        assert_eq!(p.take(0, 10_002), 11_000);
        // A later burst halves again, with the provider's Retry-After.
        assert_eq!(p.on_throttled(12_000, Some(3000)), Some(15_000));
        assert_eq!(p.rate(), 20.0);
    }

    #[test]
    fn accepted_sends_climb_back_to_the_ceiling() {
        let mut p = Pacer::new(80);
        p.on_throttled(0, None);
        for _ in 0..99 {
            p.on_accepted();
        }
        assert!(p.rate() < 80.0);
        p.on_accepted();
        p.on_accepted();
        assert_eq!(p.rate(), 80.0);
        // Never below the floor.
        let mut p = Pacer::new(20);
        for i in 0..20 {
            p.on_throttled(i * 2000, None);
        }
        assert_eq!(p.rate(), 1.0);
    }

    #[test]
    fn an_upgrade_keeps_the_share() {
        let mut p = Pacer::new(80);
        p.on_throttled(0, None);
        p.set_ceiling(1000);
        assert_eq!((p.ceiling(), p.rate()), (1000, 500.0));
    }
}
