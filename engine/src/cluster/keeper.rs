//! The lease keeper (issue 52, `CLUSTER.md` "Leases with epochs"): which cells this node
//! should own, when to acquire, renew, hand off or fence them. Pure: the actor that runs it
//! reads the live nodes and the cells from storage, feeds them in with its clock, and carries
//! out the effects (lease statements, starting and stopping a cell's actors).
//!
//! Safety rests on two deadlines. PostgreSQL's: a lease row expires `ttl` after its last
//! renewal, on the database's clock, and only then may another node acquire it (with a higher
//! epoch). This node's own: a renewal sent at local time `t` keeps the cell until
//! `t + ttl − ttl / 4` on the local clock — before the row can expire, since the row's expiry
//! was set after `t` — and a cell past that deadline is fenced (stopped) even when nothing
//! answers, so a node frozen by SIGSTOP or cut from the database stops on its own before a
//! successor can start.

use super::cells::{owner, CellKey};
use std::collections::{BTreeMap, BTreeSet};

/// How often the keeper renews its leases and re-plans, ms: a quarter of the TTL, at most a
/// second (`CLUSTER.md`: renewed every second with the 6 s TTL of production).
pub fn renew_every_ms(ttl_ms: i64) -> i64 {
    (ttl_ms / 4).clamp(50, 1_000)
}

/// The local margin kept before a lease's expiry, ms: a quarter of the TTL (two renewal rounds
/// may fail before a cell is fenced).
pub fn fence_margin_ms(ttl_ms: i64) -> i64 {
    ttl_ms / 4
}

/// A cell this node holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// The lease's epoch: the fencing token of every claim and send made under it.
    pub epoch: i64,
    /// When it was acquired, local ms.
    pub since_ms: i64,
    /// When this node stops using it unless a renewal lands first, local ms.
    pub deadline_ms: i64,
}

/// Why a cell's actors stop on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Rendezvous placement gives it to another live node (a node joined).
    HandedOff,
    /// The cell no longer exists under this key (it merged into another or lost its numbers).
    Gone,
    /// A renewal did not return it: another node holds it, or it expired.
    Lost,
    /// Its local deadline passed without a renewal (frozen, or cut from the database).
    Fenced,
    /// This node is stopping.
    Shutdown,
}

/// What the actor running the keeper does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Try to acquire the cell's lease (succeeds only when it is free or expired).
    Acquire(CellKey),
    /// Release the cell's lease (guarded by this session and the epoch).
    Release {
        /// The cell.
        cell: CellKey,
        /// The epoch this node held it under.
        epoch: i64,
    },
    /// Start the cell's actors from storage under `epoch`.
    Start {
        /// The cell.
        cell: CellKey,
        /// The new lease's epoch.
        epoch: i64,
    },
    /// Stop the cell's actors; nothing of the cell is sent from here afterwards.
    Stop {
        /// The cell.
        cell: CellKey,
        /// Why.
        reason: StopReason,
    },
}

/// The keeper's state: this node's name, the TTL and the cells it holds.
#[derive(Debug, Clone)]
pub struct Keeper {
    me: String,
    ttl_ms: i64,
    held: BTreeMap<CellKey, Held>,
}

impl Keeper {
    /// A keeper for node `me` with leases of `ttl_ms` (`DISPARO_LEASE_TTL_MS`).
    pub fn new(me: impl Into<String>, ttl_ms: i64) -> Self {
        Self {
            me: me.into(),
            ttl_ms: ttl_ms.max(4),
            held: BTreeMap::new(),
        }
    }

    /// The cells held, with their epochs and deadlines.
    pub fn held(&self) -> &BTreeMap<CellKey, Held> {
        &self.held
    }

    /// Plans a round from the live nodes' names (this one included while its session is live)
    /// and the cells computed from storage: acquire the cells rendezvous gives this node and it
    /// does not hold; hand off the ones it gives another node; drop the ones that no longer
    /// exist. A node that does not see itself among the live nodes acquires nothing.
    pub fn plan(&mut self, nodes: &[String], cells: &BTreeSet<CellKey>) -> Vec<Effect> {
        let me_live = nodes.contains(&self.me);
        let mut effects = Vec::new();
        let held: Vec<CellKey> = self.held.keys().cloned().collect();
        for cell in held {
            let reason = if !cells.contains(&cell) {
                StopReason::Gone
            } else if me_live && owner(&cell, nodes) != Some(self.me.as_str()) {
                StopReason::HandedOff
            } else {
                continue;
            };
            effects.extend(self.drop_cell(&cell, reason));
        }
        if me_live {
            effects.extend(
                cells
                    .iter()
                    .filter(|c| !self.held.contains_key(*c))
                    .filter(|c| owner(c, nodes) == Some(self.me.as_str()))
                    .map(|c| Effect::Acquire(c.clone())),
            );
        }
        effects
    }

    /// An acquisition landed: the acquire statement was sent at local `sent_ms` and returned
    /// `epoch`. Starts the cell.
    pub fn acquired(&mut self, cell: CellKey, epoch: i64, sent_ms: i64) -> Vec<Effect> {
        self.held.insert(
            cell.clone(),
            Held {
                epoch,
                since_ms: sent_ms,
                deadline_ms: self.deadline(sent_ms),
            },
        );
        vec![Effect::Start { cell, epoch }]
    }

    /// A renewal sent at local `sent_ms` returned `renewed` (cell and epoch of every lease
    /// this session still holds): their deadlines move on; a held cell missing from it (or
    /// under another epoch) is lost.
    pub fn renewed(&mut self, sent_ms: i64, renewed: &[(CellKey, i64)]) -> Vec<Effect> {
        let renewed: BTreeMap<&CellKey, i64> = renewed.iter().map(|(c, e)| (c, *e)).collect();
        let deadline = self.deadline(sent_ms);
        let mut lost = Vec::new();
        for (cell, held) in self.held.iter_mut() {
            if renewed.get(cell) == Some(&held.epoch) {
                held.deadline_ms = held.deadline_ms.max(deadline);
            } else {
                lost.push(cell.clone());
            }
        }
        lost.into_iter()
            .flat_map(|c| {
                self.held.remove(&c);
                [Effect::Stop {
                    cell: c,
                    reason: StopReason::Lost,
                }]
            })
            .collect()
    }

    /// The clock moved to local `now_ms`: every cell past its deadline is fenced (stopped, and
    /// its lease released in case it is still this session's).
    pub fn tick(&mut self, now_ms: i64) -> Vec<Effect> {
        let late: Vec<CellKey> = self
            .held
            .iter()
            .filter(|(_, h)| now_ms >= h.deadline_ms)
            .map(|(c, _)| c.clone())
            .collect();
        late.iter()
            .flat_map(|c| self.drop_cell(c, StopReason::Fenced))
            .collect()
    }

    /// A graceful stop: every cell stopped and released, so peers take them at once.
    pub fn shutdown(&mut self) -> Vec<Effect> {
        let all: Vec<CellKey> = self.held.keys().cloned().collect();
        all.iter()
            .flat_map(|c| self.drop_cell(c, StopReason::Shutdown))
            .collect()
    }

    fn drop_cell(&mut self, cell: &CellKey, reason: StopReason) -> Vec<Effect> {
        match self.held.remove(cell) {
            Some(h) => vec![
                Effect::Stop {
                    cell: cell.clone(),
                    reason,
                },
                Effect::Release {
                    cell: cell.clone(),
                    epoch: h.epoch,
                },
            ],
            None => Vec::new(),
        }
    }

    fn deadline(&self, sent_ms: i64) -> i64 {
        sent_ms + self.ttl_ms - fence_margin_ms(self.ttl_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> CellKey {
        CellKey::from_stored(s)
    }

    fn nodes(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    /// Cells `bm:0..n` and which of them rendezvous gives `me` among `all`.
    fn cells_of(me: &str, all: &[String], n: usize) -> (BTreeSet<CellKey>, BTreeSet<CellKey>) {
        let cells: BTreeSet<CellKey> = (0..n).map(|i| key(&format!("bm:{i}"))).collect();
        let mine = cells
            .iter()
            .filter(|c| owner(c, all) == Some(me))
            .cloned()
            .collect();
        (cells, mine)
    }

    fn acquires(effects: &[Effect]) -> BTreeSet<CellKey> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Acquire(c) => Some(c.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_node_acquires_what_rendezvous_gives_it_and_starts_each_once_acquired() {
        let all = nodes(&["a", "b", "c"]);
        let (cells, mine) = cells_of("a", &all, 30);
        let mut k = Keeper::new("a", 6_000);
        let effects = k.plan(&all, &cells);
        assert_eq!(acquires(&effects), mine);
        assert!(!mine.is_empty() && mine.len() < 30);
        let cell = mine.iter().next().unwrap().clone();
        assert_eq!(
            k.acquired(cell.clone(), 7, 1_000),
            [Effect::Start {
                cell: cell.clone(),
                epoch: 7
            }]
        );
        assert_eq!(k.held()[&cell].deadline_ms, 1_000 + 6_000 - 1_500);
        // Held: not asked for again.
        assert!(!acquires(&k.plan(&all, &cells)).contains(&cell));
    }

    #[test]
    fn a_node_that_is_not_live_acquires_nothing() {
        let (cells, _) = cells_of("a", &nodes(&["a"]), 5);
        let mut k = Keeper::new("a", 6_000);
        assert!(k.plan(&nodes(&["b"]), &cells).is_empty());
    }

    #[test]
    fn a_joining_node_takes_its_cells_by_hand_off() {
        let (cells, _) = cells_of("a", &nodes(&["a"]), 40);
        let mut k = Keeper::new("a", 6_000);
        for c in acquires(&k.plan(&nodes(&["a"]), &cells)) {
            k.acquired(c, 1, 0);
        }
        assert_eq!(k.held().len(), 40);
        let two = nodes(&["a", "b"]);
        let (_, still_mine) = cells_of("a", &two, 40);
        let effects = k.plan(&two, &cells);
        let handed: BTreeSet<CellKey> = effects
            .iter()
            .filter_map(|e| match e {
                Effect::Stop {
                    cell,
                    reason: StopReason::HandedOff,
                } => Some(cell.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(handed.len(), 40 - still_mine.len());
        assert!(handed.is_disjoint(&still_mine));
        // Each handed-off cell is released under the epoch it was held with.
        for c in &handed {
            assert!(effects.contains(&Effect::Release {
                cell: c.clone(),
                epoch: 1
            }));
        }
        assert_eq!(
            k.held().keys().cloned().collect::<BTreeSet<_>>(),
            still_mine
        );
    }

    #[test]
    fn a_cell_that_merged_away_is_stopped_and_released() {
        let mut k = Keeper::new("a", 2_000);
        k.acquired(key("bm:7"), 3, 0);
        let effects = k.plan(&nodes(&["a"]), &BTreeSet::from([key("bm:3")]));
        assert_eq!(
            effects,
            [
                Effect::Stop {
                    cell: key("bm:7"),
                    reason: StopReason::Gone
                },
                Effect::Release {
                    cell: key("bm:7"),
                    epoch: 3
                },
                Effect::Acquire(key("bm:3")),
            ]
        );
    }

    #[test]
    fn renewals_move_the_deadline_and_a_missing_one_is_lost() {
        let mut k = Keeper::new("a", 2_000);
        k.acquired(key("bm:1"), 1, 0);
        k.acquired(key("bm:2"), 4, 0);
        assert_eq!(k.held()[&key("bm:1")].deadline_ms, 1_500);
        // bm:2 came back under another epoch: someone took it over.
        let effects = k.renewed(500, &[(key("bm:1"), 1), (key("bm:2"), 5)]);
        assert_eq!(
            effects,
            [Effect::Stop {
                cell: key("bm:2"),
                reason: StopReason::Lost
            }]
        );
        assert_eq!(k.held()[&key("bm:1")].deadline_ms, 2_000);
        // A late answer to an older renewal never moves the deadline back.
        k.renewed(100, &[(key("bm:1"), 1)]);
        assert_eq!(k.held()[&key("bm:1")].deadline_ms, 2_000);
    }

    #[test]
    fn a_node_frozen_past_its_deadline_fences_itself_before_the_lease_can_expire() {
        let ttl = 2_000;
        let mut k = Keeper::new("a", ttl);
        k.acquired(key("bm:1"), 9, 10_000);
        // The lease row expires no earlier than 10,000 + ttl on the database's clock.
        assert!(k.tick(11_499).is_empty());
        let effects = k.tick(11_500);
        assert_eq!(
            effects,
            [
                Effect::Stop {
                    cell: key("bm:1"),
                    reason: StopReason::Fenced
                },
                Effect::Release {
                    cell: key("bm:1"),
                    epoch: 9
                },
            ]
        );
        assert!(11_500 < 10_000 + ttl);
        assert!(k.held().is_empty());
        // Waking up and renewing late changes nothing: the cell is acquired anew (new epoch).
        assert!(k.renewed(12_000, &[(key("bm:1"), 9)]).is_empty());
        assert!(k.held().is_empty());
    }

    #[test]
    fn a_shutdown_stops_and_releases_everything() {
        let mut k = Keeper::new("a", 6_000);
        k.acquired(key("bm:1"), 1, 0);
        k.acquired(key("ch:4"), 2, 0);
        let effects = k.shutdown();
        assert_eq!(effects.len(), 4);
        assert!(effects.contains(&Effect::Release {
            cell: key("ch:4"),
            epoch: 2
        }));
        assert!(k.held().is_empty());
    }

    #[test]
    fn renewal_pace_and_margin_follow_the_ttl() {
        assert_eq!(renew_every_ms(6_000), 1_000);
        assert_eq!(renew_every_ms(2_000), 500);
        assert_eq!(fence_margin_ms(6_000), 1_500);
        // Two renewal rounds fit before the local deadline.
        for ttl in [400, 2_000, 6_000, 30_000] {
            assert!(2 * renew_every_ms(ttl) < ttl - fence_margin_ms(ttl));
        }
    }
}
