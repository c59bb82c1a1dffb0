//! Per-number campaign guardrails (spec "Limits": daily campaign cap, cadence, warm-up; "States
//! and transitions": on reaching the cap the number stops until the next day unless an owner or
//! admin authorizes more). Decision D-031 records the defaults.
//!
//! They bound campaign sends only: API sends are bound by the provider's rules (tier, quality)
//! alone. Days are local calendar days in America/Sao_Paulo (UTC−03:00, no daylight saving
//! since 2019), so "tomorrow" starts at 00:00 in Brasília, as an operator in Brazil reads it.

use crate::{DAY_MS, HOUR_MS};
use serde::{Deserialize, Serialize};

/// Offset of the guardrails' local day from UTC: −3 h (America/Sao_Paulo).
pub const LOCAL_OFFSET_MS: i64 = -3 * HOUR_MS;

/// Default daily campaign cap: 1,000 campaign sends per local day per number.
pub const DEFAULT_DAILY_CAP: i64 = 1_000;

/// Default cadence: 25 ms between campaign sends on a number (at most 40 messages/s, half the
/// provider's default throughput of 80 messages/s, PROVIDER.md §10.1), leaving room for API
/// sends.
pub const DEFAULT_CADENCE_MS: i64 = 25;

/// Default cap of a number's first warm-up day: 50 campaign sends.
pub const DEFAULT_WARMUP_INITIAL_CAP: i64 = 50;

/// Highest cadence accepted: one campaign send per minute.
pub const MAX_CADENCE_MS: i64 = 60_000;

/// Highest value accepted for a cap or an authorization: 1,000,000 sends per day.
pub const MAX_CAP: i64 = 1_000_000;

/// Where a warm-up ends when neither the tier nor the daily cap bounds it: 100,000 sends per
/// day (the highest numbered tier, `TIER_100K`).
pub const WARMUP_CEILING: i64 = 100_000;

/// A number's guardrail settings (stored per channel).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Guardrails {
    /// Campaign sends per local day; `None`: no own cap (the tier's 24 h limit still applies).
    pub daily_cap: Option<i64>,
    /// Minimum spacing between two campaign sends on the number, in ms (0: none).
    pub cadence_ms: i64,
    /// Whether the warm-up ramp applies.
    pub warmup: bool,
    /// When the warm-up started (ms since the epoch); its local day is warm-up day 1.
    pub warmup_started_at: i64,
    /// Cap of warm-up day 1; it doubles every local day until the ramp reaches the tier's
    /// limit (or the daily cap), when the warm-up ends.
    pub warmup_initial_cap: i64,
}

impl Guardrails {
    /// The defaults (D-031) for a number connected at `connected_at`: a 1,000/day cap, 25 ms
    /// cadence, warm-up from the connection day starting at 50/day.
    pub fn defaults(connected_at: i64) -> Self {
        Guardrails {
            daily_cap: Some(DEFAULT_DAILY_CAP),
            cadence_ms: DEFAULT_CADENCE_MS,
            warmup: true,
            warmup_started_at: connected_at,
            warmup_initial_cap: DEFAULT_WARMUP_INITIAL_CAP,
        }
    }
}

/// Whether a newly connected number starts in warm-up (D-031): yes when its messaging tier is
/// 250 unique users per 24 h or lower, or not known — where every new number and portfolio
/// starts (PROVIDER.md §10.2); no on a higher tier, which the provider granted for a sending
/// history it already measured. Either can be changed with `PATCH /channels/{id}/guardrails`.
pub fn warmup_by_default(tier: Option<&str>) -> bool {
    match tier.and_then(crate::channel::Tier::parse) {
        None => true,
        Some(t) => t.limit_24h().is_some_and(|l| l <= 250),
    }
}

/// The local day (days since 1970-01-01 in UTC−03:00) of an instant.
pub fn local_day(now_ms: i64) -> i64 {
    (now_ms + LOCAL_OFFSET_MS).div_euclid(DAY_MS)
}

/// The instant (ms) a local day starts.
pub fn day_start(day: i64) -> i64 {
    day * DAY_MS - LOCAL_OFFSET_MS
}

/// The warm-up in effect at `now`: `(day, cap)` with day 1 the local day it started, or `None`
/// when warm-up is off or over (its ramp reached the tier's 24 h limit `tier_limit`, or the
/// daily cap, or [`WARMUP_CEILING`]).
pub fn warmup(g: &Guardrails, tier_limit: Option<i64>, now_ms: i64) -> Option<(u32, i64)> {
    if !g.warmup {
        return None;
    }
    let day = (local_day(now_ms) - local_day(g.warmup_started_at)).max(0) + 1;
    let doublings = (day - 1).min(40) as u32;
    let cap = g
        .warmup_initial_cap
        .max(1)
        .saturating_mul(1i64 << doublings);
    let target = [tier_limit, g.daily_cap]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(WARMUP_CEILING)
        .min(WARMUP_CEILING);
    (cap < target).then_some((day as u32, cap))
}

/// Why today's campaign cap is what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CapSource {
    /// The number's daily cap.
    DailyCap,
    /// The warm-up ramp (lower than the daily cap today).
    Warmup,
    /// No cap today.
    None,
}

/// Today's campaign cap of a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapToday {
    /// Campaign sends allowed today, authorizations included; `None`: no cap.
    pub cap: Option<i64>,
    /// Where the base cap comes from.
    pub source: CapSource,
    /// The warm-up day (1-based), when warming up.
    pub warmup_day: Option<u32>,
    /// Extra sends an owner or admin authorized for today.
    pub authorized: i64,
}

impl CapToday {
    /// Campaign sends left today after `sent`; `None`: no cap.
    pub fn remaining(&self, sent: i64) -> Option<i64> {
        self.cap.map(|c| (c - sent).max(0))
    }

    /// Whether `sent` reached the cap.
    pub fn reached(&self, sent: i64) -> bool {
        self.remaining(sent) == Some(0)
    }
}

/// Today's cap: the lower of the daily cap and the warm-up's, plus what was authorized today.
pub fn cap_today(
    g: &Guardrails,
    tier_limit: Option<i64>,
    authorized: i64,
    now_ms: i64,
) -> CapToday {
    let warm = warmup(g, tier_limit, now_ms);
    let (base, source) = match (g.daily_cap, warm) {
        (Some(c), Some((_, w))) if c <= w => (Some(c), CapSource::DailyCap),
        (_, Some((_, w))) => (Some(w), CapSource::Warmup),
        (Some(c), None) => (Some(c), CapSource::DailyCap),
        (None, None) => (None, CapSource::None),
    };
    CapToday {
        cap: base.map(|b| b.saturating_add(authorized.max(0))),
        source,
        warmup_day: warm.map(|(d, _)| d),
        authorized: authorized.max(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2026-11-22 12:00 in Brasília (15:00 UTC).
    const NOON: i64 = 1_795_359_600_000;

    #[test]
    fn local_days_start_at_midnight_in_brasilia() {
        let d = local_day(NOON);
        assert_eq!(day_start(d), NOON - 12 * HOUR_MS);
        assert_eq!(local_day(day_start(d) - 1), d - 1);
        // 23:30 UTC is still the same day in Brasília (20:30).
        assert_eq!(local_day(NOON + 8 * HOUR_MS + 30 * 60_000), d);
        assert_eq!(local_day(NOON + 12 * HOUR_MS), d + 1);
    }

    #[test]
    fn warmup_doubles_daily_until_the_tier_limit() {
        let g = Guardrails {
            daily_cap: None,
            ..Guardrails::defaults(NOON)
        };
        let tier = Some(1000);
        assert_eq!(warmup(&g, tier, NOON), Some((1, 50)));
        assert_eq!(warmup(&g, tier, NOON + DAY_MS), Some((2, 100)));
        assert_eq!(warmup(&g, tier, NOON + 4 * DAY_MS), Some((5, 800)));
        assert_eq!(
            warmup(&g, tier, NOON + 5 * DAY_MS),
            None,
            "1600 ≥ 1000: over"
        );
        assert_eq!(warmup(&g, None, NOON + 10 * DAY_MS), Some((11, 51_200)));
        assert_eq!(warmup(&g, None, NOON + 11 * DAY_MS), None, "ceiling");
        let off = Guardrails {
            warmup: false,
            ..g.clone()
        };
        assert_eq!(warmup(&off, tier, NOON), None);
    }

    #[test]
    fn the_cap_is_the_lower_of_daily_and_warmup_plus_authorized() {
        let g = Guardrails::defaults(NOON);
        let today = cap_today(&g, Some(10_000), 0, NOON);
        assert_eq!(today.cap, Some(50));
        assert_eq!(today.source, CapSource::Warmup);
        assert_eq!(today.warmup_day, Some(1));
        assert_eq!(today.remaining(20), Some(30));
        assert!(today.reached(50));
        let later = cap_today(&g, Some(10_000), 0, NOON + 6 * DAY_MS);
        assert_eq!((later.cap, later.source), (Some(1000), CapSource::DailyCap));
        assert_eq!(later.warmup_day, None, "ramp 3200 ≥ daily cap 1000: over");
        let authorized = cap_today(&g, Some(10_000), 25, NOON);
        assert_eq!(authorized.cap, Some(75));
        assert!(!authorized.reached(50));
        let none = Guardrails {
            daily_cap: None,
            warmup: false,
            ..g
        };
        let t = cap_today(&none, Some(10_000), 0, NOON);
        assert_eq!(
            (t.cap, t.source, t.remaining(1_000_000)),
            (None, CapSource::None, None)
        );
    }

    #[test]
    fn young_tiers_start_in_warmup() {
        assert!(warmup_by_default(None));
        assert!(warmup_by_default(Some("TIER_NOT_SET")));
        assert!(warmup_by_default(Some("TIER_250")));
        assert!(warmup_by_default(Some("TIER_50")));
        assert!(!warmup_by_default(Some("TIER_2K")));
        assert!(!warmup_by_default(Some("TIER_UNLIMITED")));
    }
}
