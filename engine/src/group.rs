//! Sending groups (spec "Sending groups"; D-037): the group's shared 24 h limit is
//! [`crate::limits::SharedLimit`]; this module chooses which member sends a group's 1:1 send.

use crate::channel::{Health, Tone};

/// The member that sends a group send now: the one with most 24 h headroom (an unlimited one
/// first), among those whose health lets them send (tone not `bad`, headroom not 0); the
/// first in `members`' order on a tie. `None`: no member can send.
pub fn sender<'a>(members: impl IntoIterator<Item = (i64, &'a Health)>) -> Option<i64> {
    let mut best: Option<(i64, i64)> = None;
    for (id, health) in members {
        if health.tone == Tone::Bad || health.available == 0 {
            continue;
        }
        // `available` is -1 when unlimited.
        let headroom = if health.available < 0 {
            i64::MAX
        } else {
            health.available
        };
        if best.is_none_or(|(_, h)| headroom > h) {
            best = Some((id, headroom));
        }
    }
    best.map(|(id, _)| id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::HealthCode;

    fn health(code: HealthCode, available: i64) -> Health {
        Health {
            available,
            ..Health::of_code(code)
        }
    }

    #[test]
    fn the_member_with_most_headroom_sends() {
        let ok = |a| health(HealthCode::Ok, a);
        let red = health(HealthCode::QualityRed, 500);
        let members = [(1, ok(10)), (2, red.clone()), (3, ok(40)), (4, ok(40))];
        assert_eq!(sender(members.iter().map(|(i, h)| (*i, h))), Some(3));
        let members = [(1, ok(10)), (2, ok(-1))];
        assert_eq!(
            sender(members.iter().map(|(i, h)| (*i, h))),
            Some(2),
            "unlimited first"
        );
        let members = [(1, ok(0)), (2, red)];
        assert_eq!(sender(members.iter().map(|(i, h)| (*i, h))), None);
        let yellow = health(HealthCode::QualityYellow, 5);
        assert_eq!(sender([(7, &yellow)]), Some(7), "attention still sends");
    }
}
