//! Cells and their placement (issue 52, `CLUSTER.md` "Cells"): the unit of ownership is a
//! cell — one BM with all its numbers, merged with every other BM a sending group spans; a
//! number with neither BM nor group is its own cell. Every counter a send checks (number, BM,
//! group) lives inside one cell, so each stays single-writer on the node that owns the cell.
//! Placement is rendezvous hashing over the live nodes: cells spread, and a node joining or
//! leaving moves only the cells it wins or held.

use crate::ids::ChannelId;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A cell's name, also its lease key: `bm:<id>` for a cell holding a BM (the smallest BM id
/// among them), else `group:<id>` (the smallest group id), else `ch:<channel id>`. Derived
/// from membership, so it changes when cells merge or split; the lease of a name no longer
/// computed is released by its holder.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CellKey(String);

impl CellKey {
    /// A key read back from storage (a lease row) or a message.
    pub fn from_stored(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The text stored in `leases.key` and `channels.cell_key`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key of a campaign's coordination lease, `campaign:<id>` (D-123): placed, held and
    /// renewed like a cell's, but it runs no channel.
    pub fn campaign(campaign_id: i64) -> Self {
        Self(format!("{CAMPAIGN_PREFIX}{campaign_id}"))
    }

    /// The campaign a coordination key names; `None` for a cell's key.
    pub fn campaign_id(&self) -> Option<i64> {
        self.0.strip_prefix(CAMPAIGN_PREFIX)?.parse().ok()
    }
}

/// The prefix of a campaign's coordination key.
const CAMPAIGN_PREFIX: &str = "campaign:";

impl fmt::Display for CellKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One channel's memberships, as stored (`channels.bm_id`, `channels.group_id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Membership {
    /// The channel (an official number).
    pub channel: ChannelId,
    /// Its BM (business portfolio), when known.
    pub bm: Option<i64>,
    /// Its sending group, when it is in one.
    pub group: Option<i64>,
}

/// The cells of a set of channels: which cell each channel is in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cells {
    of_channel: BTreeMap<ChannelId, CellKey>,
}

impl Cells {
    /// Computes the cells: channels sharing a BM or a group are in one cell, transitively.
    /// The result depends only on the memberships, not on their order.
    pub fn compute(members: &[Membership]) -> Self {
        let mut sets = UnionFind::new(members.len());
        let mut first_of_bm: BTreeMap<i64, usize> = BTreeMap::new();
        let mut first_of_group: BTreeMap<i64, usize> = BTreeMap::new();
        for (i, m) in members.iter().enumerate() {
            if let Some(bm) = m.bm {
                let j = *first_of_bm.entry(bm).or_insert(i);
                sets.union(i, j);
            }
            if let Some(group) = m.group {
                let j = *first_of_group.entry(group).or_insert(i);
                sets.union(i, j);
            }
        }
        // Each set's name: its smallest BM, else its smallest group, else its smallest channel.
        let mut names: BTreeMap<usize, (Option<i64>, Option<i64>, ChannelId)> = BTreeMap::new();
        for (i, m) in members.iter().enumerate() {
            let root = sets.find(i);
            let e = names.entry(root).or_insert((m.bm, m.group, m.channel));
            e.0 = min_some(e.0, m.bm);
            e.1 = min_some(e.1, m.group);
            e.2 = e.2.min(m.channel);
        }
        let of_channel = members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let (bm, group, channel) = names[&sets.find(i)];
                let key = match (bm, group) {
                    (Some(bm), _) => format!("bm:{bm}"),
                    (None, Some(group)) => format!("group:{group}"),
                    (None, None) => format!("ch:{}", channel.get()),
                };
                (m.channel, CellKey(key))
            })
            .collect();
        Self { of_channel }
    }

    /// The cell a channel is in; `None` for a channel not in the set.
    pub fn of(&self, channel: ChannelId) -> Option<&CellKey> {
        self.of_channel.get(&channel)
    }

    /// Every cell, once, in key order.
    pub fn keys(&self) -> BTreeSet<CellKey> {
        self.of_channel.values().cloned().collect()
    }

    /// The channels of one cell, in id order.
    pub fn channels_of(&self, cell: &CellKey) -> Vec<ChannelId> {
        self.of_channel
            .iter()
            .filter(|(_, k)| *k == cell)
            .map(|(c, _)| *c)
            .collect()
    }

    /// Every channel with its cell, in channel order.
    pub fn iter(&self) -> impl Iterator<Item = (ChannelId, &CellKey)> {
        self.of_channel.iter().map(|(c, k)| (*c, k))
    }
}

fn min_some(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// Disjoint sets over `0..n` (path halving, union by index).
struct UnionFind {
    parent: Vec<usize>,
}

impl UnionFind {
    fn new(n: usize) -> Self {
        Self {
            parent: (0..n).collect(),
        }
    }

    fn find(&mut self, mut i: usize) -> usize {
        while self.parent[i] != i {
            self.parent[i] = self.parent[self.parent[i]];
            i = self.parent[i];
        }
        i
    }

    fn union(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        if a != b {
            self.parent[a.max(b)] = a.min(b);
        }
    }
}

/// The node that owns `cell` among `nodes` by rendezvous (highest random weight) hashing: each
/// (node, cell) pair gets a weight from a fixed hash (FNV-1a, then a 64-bit mixer — the same on
/// every build and machine, so every node computes the same owner), the heaviest node wins,
/// ties to the smaller name. `None` when there are no nodes.
pub fn owner<'a>(cell: &CellKey, nodes: &'a [String]) -> Option<&'a str> {
    nodes
        .iter()
        .map(|n| (weight(n, cell), n.as_str()))
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(a.1)))
        .map(|(_, n)| n)
}

/// The rendezvous weight of a (node, cell) pair.
fn weight(node: &str, cell: &CellKey) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in node.bytes().chain([0u8]).chain(cell.0.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // splitmix64's finaliser: FNV's low bits alone spread poorly over short keys.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn campaign_keys_name_their_campaign_and_no_cell() {
        let key = CellKey::campaign(42);
        assert_eq!(key.as_str(), "campaign:42");
        assert_eq!(key.campaign_id(), Some(42));
        assert_eq!(CellKey::from_stored("bm:42").campaign_id(), None);
        assert_eq!(CellKey::from_stored("campaign:x").campaign_id(), None);
    }

    fn m(channel: i64, bm: Option<i64>, group: Option<i64>) -> Membership {
        Membership {
            channel: ChannelId(channel),
            bm,
            group,
        }
    }

    fn key(s: &str) -> CellKey {
        CellKey::from_stored(s)
    }

    #[test]
    fn a_bm_is_a_cell_and_a_group_merges_the_bms_it_spans() {
        let cells = Cells::compute(&[
            m(1, Some(10), None),
            m(2, Some(10), None),
            m(3, Some(20), Some(5)),
            m(4, Some(30), Some(5)),
            m(5, Some(40), None),
            m(6, None, None),
            m(7, None, Some(9)),
            m(8, None, Some(9)),
        ]);
        assert_eq!(cells.of(ChannelId(1)), Some(&key("bm:10")));
        assert_eq!(cells.of(ChannelId(2)), Some(&key("bm:10")));
        // Group 5 spans BMs 20 and 30: one cell, named by the smaller BM.
        assert_eq!(cells.of(ChannelId(3)), Some(&key("bm:20")));
        assert_eq!(cells.of(ChannelId(4)), Some(&key("bm:20")));
        assert_eq!(cells.of(ChannelId(5)), Some(&key("bm:40")));
        assert_eq!(cells.of(ChannelId(6)), Some(&key("ch:6")));
        assert_eq!(cells.of(ChannelId(7)), Some(&key("group:9")));
        assert_eq!(
            cells.channels_of(&key("group:9")),
            [ChannelId(7), ChannelId(8)]
        );
        assert_eq!(cells.keys().len(), 5);
        assert_eq!(cells.of(ChannelId(99)), None);
    }

    #[test]
    fn a_chain_of_groups_and_bms_is_one_cell() {
        // 1–2 share BM 1; 2 is in group 7 with 3; 3 shares BM 2 with 4.
        let cells = Cells::compute(&[
            m(4, Some(2), None),
            m(1, Some(1), None),
            m(3, Some(2), Some(7)),
            m(2, Some(1), Some(7)),
        ]);
        assert_eq!(cells.keys(), BTreeSet::from([key("bm:1")]));
    }

    #[test]
    fn the_owner_is_the_same_whatever_the_nodes_order_and_none_without_nodes() {
        let nodes = vec!["a".to_string(), "b".into(), "c".into()];
        let mut reversed = nodes.clone();
        reversed.reverse();
        for i in 0..50 {
            let cell = key(&format!("bm:{i}"));
            assert_eq!(owner(&cell, &nodes), owner(&cell, &reversed));
        }
        assert_eq!(owner(&key("bm:1"), &[]), None);
    }

    #[test]
    fn cells_spread_over_three_nodes() {
        let nodes = vec!["node-a".to_string(), "node-b".into(), "node-c".into()];
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for i in 0..3_000 {
            *count
                .entry(owner(&key(&format!("bm:{i}")), &nodes).unwrap())
                .or_default() += 1;
        }
        // Each node gets about a third (1,000 ± 10 %).
        for (node, n) in &count {
            assert!((900..=1_100).contains(n), "{node}: {n} of 3,000");
        }
    }

    proptest! {
        #[test]
        fn memberships_in_any_order_give_the_same_cells(
            raw in prop::collection::vec((1i64..40, prop::option::of(1i64..6), prop::option::of(1i64..4)), 0..30),
            seed in any::<u64>(),
        ) {
            let mut seen = BTreeSet::new();
            let members: Vec<Membership> = raw
                .into_iter()
                .filter(|(c, _, _)| seen.insert(*c))
                .map(|(c, b, g)| m(c, b, g))
                .collect();
            let mut shuffled = members.clone();
            let len = shuffled.len().max(1);
            shuffled.rotate_left((seed as usize) % len);
            shuffled.reverse();
            let (a, b) = (Cells::compute(&members), Cells::compute(&shuffled));
            prop_assert_eq!(&a, &b);
            // Channels that share a BM or a group share a cell.
            for x in &members {
                for y in &members {
                    if (x.bm.is_some() && x.bm == y.bm) || (x.group.is_some() && x.group == y.group) {
                        prop_assert_eq!(a.of(x.channel), a.of(y.channel));
                    }
                }
            }
        }

        #[test]
        fn a_node_leaving_moves_only_its_own_cells(
            n in 2usize..8,
            leaving in 0usize..8,
            cells in prop::collection::vec(0u32..10_000, 1..60),
        ) {
            let nodes: Vec<String> = (0..n).map(|i| format!("node-{i}")).collect();
            let gone = nodes[leaving % n].clone();
            let rest: Vec<String> = nodes.iter().filter(|x| **x != gone).cloned().collect();
            for c in cells {
                let cell = key(&format!("bm:{c}"));
                let before = owner(&cell, &nodes).unwrap();
                let after = owner(&cell, &rest).unwrap();
                if before != gone {
                    prop_assert_eq!(before, after);
                }
            }
        }
    }
}
