//! Health as events (issue 48 item 4, decision D-121): what a number's health watch compares
//! after each change, and the `channel.health` change it reports. Pure: the actor passes what
//! the number's rules computed ([`super::Channel::health_change`]).

use super::{ChannelStatus, Health, HealthInput, Quality, Tone, WabaStanding};
use serde::{Deserialize, Serialize};

/// What a number's `channel.health` event compares: the connection status, quality rating,
/// tier, WABA standing, the health object's code and tone, and whether the 24 h headroom is
/// exhausted (0 unique recipients left under a limit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Observed {
    /// Connection status (`WORKING`…).
    pub status: ChannelStatus,
    /// Quality rating.
    pub quality: Quality,
    /// Messaging tier (`TIER_250`…; `null` unknown).
    pub tier: Option<String>,
    /// The WABA's standing.
    pub waba_standing: WabaStanding,
    /// The health object's code (`ok`, `qualidade_red`, `limite_24h_esgotado`…).
    pub code: String,
    /// The health object's tone.
    pub tone: Tone,
    /// No business-initiated recipient is left in the rolling 24 h (the number's own limit
    /// or its BM's).
    pub headroom_exhausted: bool,
}

impl Observed {
    /// What the number's rules say at one moment: the health's `input`, the `health` object
    /// computed from it and the `tier`.
    pub fn of(input: &HealthInput, health: &Health, tier: Option<&str>) -> Self {
        Observed {
            status: input.status,
            quality: input.quality,
            tier: tier.map(str::to_string),
            waba_standing: input.waba,
            code: health.code.clone(),
            tone: health.tone,
            headroom_exhausted: super::available(
                input.limit_24h,
                input.sent_24h,
                input.external_available,
            ) == Some(0),
        }
    }
}

/// A change of what [`Observed`] watches: the values before and after, and the names of the
/// members that changed (`status`, `quality`, `tier`, `waba_standing`, `code`, `tone`,
/// `headroom_exhausted`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HealthChange {
    /// The members that changed.
    pub changed: Vec<String>,
    /// Before.
    pub previous: Observed,
    /// Now.
    pub current: Observed,
}

/// The last observation of one number: the first one sets it without a change (a number's
/// actor starting is not a change of its health); each later one that differs is reported once.
#[derive(Debug, Clone, Default)]
pub struct HealthWatch {
    last: Option<Observed>,
}

impl HealthWatch {
    /// Takes `now`'s observation; the change since the last one, when something changed.
    pub fn observe(&mut self, now: Observed) -> Option<HealthChange> {
        let previous = self.last.replace(now.clone())?;
        let changed = changed_members(&previous, &now);
        (!changed.is_empty()).then_some(HealthChange {
            changed,
            previous,
            current: now,
        })
    }
}

fn changed_members(a: &Observed, b: &Observed) -> Vec<String> {
    let pairs = [
        ("status", a.status != b.status),
        ("quality", a.quality != b.quality),
        ("tier", a.tier != b.tier),
        ("waba_standing", a.waba_standing != b.waba_standing),
        ("code", a.code != b.code),
        ("tone", a.tone != b.tone),
        (
            "headroom_exhausted",
            a.headroom_exhausted != b.headroom_exhausted,
        ),
    ];
    pairs
        .into_iter()
        .filter(|(_, differs)| *differs)
        .map(|(name, _)| name.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(quality: Quality, code: &str, exhausted: bool) -> Observed {
        Observed {
            status: ChannelStatus::Working,
            quality,
            tier: Some("TIER_1K".into()),
            waba_standing: WabaStanding::Ok,
            code: code.into(),
            tone: if code == "ok" { Tone::Ok } else { Tone::Bad },
            headroom_exhausted: exhausted,
        }
    }

    #[test]
    fn the_first_observation_is_no_change_and_each_later_change_is_reported_once() {
        let mut w = HealthWatch::default();
        assert_eq!(w.observe(seen(Quality::Green, "ok", false)), None);
        assert_eq!(w.observe(seen(Quality::Green, "ok", false)), None);
        let red = w
            .observe(seen(Quality::Red, "qualidade_red", false))
            .unwrap();
        assert_eq!(red.changed, ["quality", "code", "tone"]);
        assert_eq!(red.previous.quality, Quality::Green);
        assert_eq!(red.current.code, "qualidade_red");
        assert_eq!(w.observe(seen(Quality::Red, "qualidade_red", false)), None);
        let back = w
            .observe(seen(Quality::Red, "qualidade_red", true))
            .unwrap();
        assert_eq!(back.changed, ["headroom_exhausted"]);
    }
}
