//! Campaigns: their states and the moves between them (decision D-029), and the recipient
//! states that make each send happen at most once.

use serde::{Deserialize, Serialize};

/// A campaign's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum CampaignState {
    /// Created; recipients may be added; nothing is sent.
    Draft,
    /// Waiting for its `scheduled_at` (D-038); starts by itself then.
    Scheduled,
    /// Dispatching through its numbers.
    Running,
    /// Stopped with a reason (no number left, or paused by an operator); resumable.
    Paused,
    /// Every recipient was sent, failed or skipped.
    Completed,
    /// Stopped for good.
    Cancelled,
}

impl CampaignState {
    /// The stored and wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            CampaignState::Draft => "draft",
            CampaignState::Scheduled => "scheduled",
            CampaignState::Running => "running",
            CampaignState::Paused => "paused",
            CampaignState::Completed => "completed",
            CampaignState::Cancelled => "cancelled",
        }
    }

    /// Parses the stored form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "draft" => CampaignState::Draft,
            "scheduled" => CampaignState::Scheduled,
            "running" => CampaignState::Running,
            "paused" => CampaignState::Paused,
            "completed" => CampaignState::Completed,
            "cancelled" => CampaignState::Cancelled,
            _ => return None,
        })
    }

    /// Whether recipients may still be added (draft, running and paused campaigns take more).
    pub fn accepts_recipients(self) -> bool {
        matches!(
            self,
            CampaignState::Draft
                | CampaignState::Scheduled
                | CampaignState::Running
                | CampaignState::Paused
        )
    }

    /// Whether `POST /campaigns/{id}/resend` may send its failed messages again: once it has
    /// started (running, paused or completed; a completed campaign runs again).
    pub fn can_resend(self) -> bool {
        matches!(
            self,
            CampaignState::Running | CampaignState::Paused | CampaignState::Completed
        )
    }

    /// Whether a stored state may be written over by `next` at all (whatever the caller
    /// saw): a cancelled campaign stays cancelled, a completed one only runs again (a resend,
    /// `can_resend`). Guards the compare-and-set of every campaign move (issue 50): a
    /// completion that raced a cancel leaves the cancel standing.
    pub fn may_be_overwritten_by(self, next: CampaignState) -> bool {
        match self {
            CampaignState::Cancelled => next == CampaignState::Cancelled,
            CampaignState::Completed => {
                matches!(next, CampaignState::Completed | CampaignState::Running)
            }
            _ => true,
        }
    }

    /// Whether the campaign may move to `next`.
    pub fn can_move_to(self, next: CampaignState) -> bool {
        use CampaignState::*;
        matches!(
            (self, next),
            (Draft, Running)
                | (Draft, Scheduled)
                | (Draft, Cancelled)
                | (Scheduled, Running)
                | (Scheduled, Draft)
                | (Scheduled, Cancelled)
                | (Running, Paused)
                | (Running, Completed)
                | (Running, Cancelled)
                | (Paused, Running)
                | (Paused, Cancelled)
        )
    }
}

/// A recipient's state: `planned → claimed → sent`, or `failed` / `skipped`. A row is claimed
/// (with its message id) before the provider is called, so it is sent at most once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RecipientState {
    /// A panel campaign's contact not released for sending: before validation and approval,
    /// invalid, or beyond the campaign's `volume` (issue 20, D-062). Never claimed.
    Pending,
    /// Waiting for a number.
    Planned,
    /// Taken by a number; its message is stored, the provider call may be under way.
    Claimed,
    /// The provider's answer was lost (timeout, or a process stopped mid-send): settled by a
    /// status webhook, or planned again after a grace period (D-032).
    InDoubt,
    /// Accepted by the provider.
    Sent,
    /// Refused by the provider or a rule.
    Failed,
    /// Deliberately not sent.
    Skipped,
}

impl RecipientState {
    /// The stored form.
    pub fn as_str(self) -> &'static str {
        match self {
            RecipientState::Pending => "pending",
            RecipientState::Planned => "planned",
            RecipientState::Claimed => "claimed",
            RecipientState::InDoubt => "in_doubt",
            RecipientState::Sent => "sent",
            RecipientState::Failed => "failed",
            RecipientState::Skipped => "skipped",
        }
    }
}

/// The status a campaign send shows (panel list, filter and export; issue 47): its message's
/// status once the provider saw it, else what its recipient state says — `queued` (waiting
/// for a number), `sending` (claimed or in doubt), `skipped`, `failed`. Never empty: a send
/// without a message (waiting, skipped) still has a status. `message_status` is the stored
/// message status, when the recipient has a message.
pub fn send_status(recipient_state: &str, message_status: Option<&str>) -> &'static str {
    use crate::message::MessageStatus as M;
    let message = message_status.and_then(M::parse);
    match recipient_state {
        "skipped" => "skipped",
        "failed" => "failed",
        "planned" | "pending" => "queued",
        _ => match message {
            Some(s @ (M::Sent | M::Delivered | M::Read | M::Failed)) => s.as_str(),
            _ if recipient_state == "sent" => "sent",
            _ => "sending",
        },
    }
}

/// A campaign's own request rules (spec "Campaigns"): a name, at least one number, each number
/// once with a weight from 1 to 100.
///
/// Errors: `required` (`name`, `channels`), `invalid_weight`, `duplicate_channel`.
pub fn check_numbers(name: &str, channels: &[(i64, i64)]) -> Result<(), crate::ValidationError> {
    use crate::ValidationError as E;
    if name.trim().is_empty() {
        return Err(E::new("required", "name", "O campo `name` é obrigatório."));
    }
    if channels.is_empty() {
        return Err(E::new(
            "required",
            "channels",
            "Informe ao menos um número em `channels`.",
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for (id, weight) in channels {
        if !(1..=100).contains(weight) {
            return Err(E::new(
                "invalid_weight",
                "channels",
                "`weight` deve estar entre 1 e 100.",
            ));
        }
        if !seen.insert(*id) {
            return Err(E::new(
                "duplicate_channel",
                "channels",
                format!("O número {id} aparece duas vezes."),
            ));
        }
    }
    Ok(())
}

/// A group campaign's own request rules (spec "Sending groups", D-038): `mode` `all` (the
/// default) or `sequential`; `scheduled_at` only with `start`; at most `max_recipients` rows
/// in the call. Returns the mode.
///
/// Errors: `invalid_mode`, `schedule_needs_start`, `invalid_batch`.
pub fn check_group_campaign(
    mode: Option<&str>,
    scheduled: bool,
    start: bool,
    recipients: usize,
    max_recipients: usize,
) -> Result<String, crate::ValidationError> {
    use crate::ValidationError as E;
    let mode = mode.unwrap_or("all");
    if mode != "all" && mode != "sequential" {
        return Err(E::new(
            "invalid_mode",
            "mode",
            "`mode` deve ser all ou sequential.",
        ));
    }
    if scheduled && !start {
        return Err(E::new(
            "schedule_needs_start",
            "scheduled_at",
            "`scheduled_at` agenda o início: não combina com `start: false`.",
        ));
    }
    if recipients > max_recipients {
        return Err(E::new(
            "invalid_batch",
            "recipients",
            format!(
                "Envie até {max_recipients} destinatários aqui; adicione mais com POST /campaigns/{{id}}/recipients."
            ),
        ));
    }
    Ok(mode.to_string())
}

/// One number of a running campaign, as its allocation sees it (D-032, issue 6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// The number.
    pub channel_id: i64,
    /// Its weight: a 3:1 weight gives 3:1 sends (0: a number that joined through a resend
    /// takes no share).
    pub weight: i64,
    /// Sends handed to it so far.
    pub dispatched: u64,
    /// Consecutive ticks without credit while not blocked.
    pub busy_ticks: u32,
    /// Consecutive ticks with less than half its window free (a slow number: its sends take
    /// long to come back).
    pub short_ticks: u32,
}

impl Slot {
    /// A slot of `weight` with nothing dispatched.
    pub fn new(channel_id: i64, weight: i64) -> Self {
        Self {
            channel_id,
            weight,
            dispatched: 0,
            busy_ticks: 0,
            short_ticks: 0,
        }
    }

    /// Whether the number has been slow for [`SLOW_AFTER_TICKS`]: the tick's total is then
    /// sized without it, so it takes less and the others carry on (issue 6).
    pub fn slow(&self) -> bool {
        self.short_ticks >= SLOW_AFTER_TICKS
    }
}

/// Ticks a number may stay without credit (busy) before the campaign counts it as slow and lets
/// the others carry on without it; until then the tick waits for it, so weights hold.
pub const SLOW_AFTER_TICKS: u32 = 10;

/// Splits up to `page` units among the slots with credit. The page is sized so that every slot
/// with credit gets its weighted share within its credits (P = min(page, min ⌊credit·W/w⌋)),
/// and units go to the slot furthest behind its weighted share (smooth weighted round-robin):
/// a 3:1 weight gives 3:1 sends, each number within one send of its share. A slot without credit (blocked, or its window still full because it is slow) is
/// left out of the tick, so the others carry on without it.
/// Slots of weight 0 (numbers that joined through a resend) take no share.
pub fn allocate(slots: &[Slot], credits: &[usize], page: usize) -> Vec<usize> {
    let mut alloc = vec![0usize; slots.len()];
    let credits: Vec<usize> = credits
        .iter()
        .zip(slots)
        .map(|(c, s)| if s.weight > 0 { *c } else { 0 })
        .collect();
    let active: Vec<usize> = (0..slots.len()).filter(|i| credits[*i] > 0).collect();
    let total_weight: i64 = active.iter().map(|i| slots[*i].weight).sum();
    // The total keeps every number to its weight: it is what the most constrained number
    // allows. A slow number does not set it (it gets its credits, the others carry on),
    // unless every number is slow.
    let bound = |i: &usize| (credits[*i] as i64 * total_weight / slots[*i].weight) as usize;
    let total = active
        .iter()
        .filter(|i| !slots[**i].slow())
        .map(bound)
        .min()
        .or_else(|| active.iter().map(bound).min())
        .unwrap_or(0)
        .min(page);
    // A slow number's credits come on top of that total (it is behind on its weight, so the
    // picks below reach it first).
    let total = total
        + active
            .iter()
            .filter(|i| slots[**i].slow())
            .map(|i| credits[*i])
            .sum::<usize>()
            .min(page.saturating_sub(total));
    // Smooth weighted round-robin over the whole campaign: each unit goes to the slot furthest
    // behind its weighted share of everything dispatched once the unit is added
    // ((D+1)·w − W·d, largest first), so every number stays within one send of its share.
    let weighted: Vec<usize> = (0..slots.len()).filter(|i| slots[*i].weight > 0).collect();
    let all_weight: i128 = weighted.iter().map(|i| i128::from(slots[*i].weight)).sum();
    let mut all_dispatched: i128 = weighted
        .iter()
        .map(|i| i128::from(slots[*i].dispatched))
        .sum();
    for _ in 0..total {
        let mut pick: Option<(usize, i128)> = None;
        for i in (0..slots.len()).filter(|i| alloc[*i] < credits[*i]) {
            let d = i128::from(slots[i].dispatched) + alloc[i] as i128;
            let deficit = (all_dispatched + 1) * i128::from(slots[i].weight) - all_weight * d;
            if pick.is_none_or(|(_, best)| deficit > best) {
                pick = Some((i, deficit));
            }
        }
        match pick {
            Some((i, _)) => {
                alloc[i] += 1;
                all_dispatched += 1;
            }
            None => break,
        }
    }
    alloc
}

/// What a number answered when its campaign asked it for credits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreditAnswer {
    /// It takes `n` sends now.
    Granted(usize),
    /// It takes none now and nothing blocks it (its window is full, its cadence or a back-off
    /// holds it).
    Busy,
    /// It refuses campaign work for the health code (`qualidade_red`, `limite_diario_atingido`…).
    Refused(&'static str),
    /// It did not answer (not running, or too slow).
    Unreachable,
    /// Another node runs it (cluster mode, issue 52): that node's copy of the campaign sends
    /// through it; here it takes nothing and refuses nothing.
    Elsewhere,
}

/// What one tick may hand out: each slot's credits, why slots refuse work, whether the tick
/// waits for busy numbers (so weights hold), and the most it claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grants {
    /// Sends each slot takes now (in the slots' order).
    pub credits: Vec<usize>,
    /// `<channel id>: <code>` of every slot that refuses work (every slot, with the group's
    /// code, when the group's 24 h headroom is gone).
    pub reasons: Vec<String>,
    /// A busy number has not been busy for [`SLOW_AFTER_TICKS`] yet: the tick waits for it.
    pub wait_for_busy: bool,
    /// The most the tick claims (the group's headroom bounds it).
    pub page: usize,
}

/// Reads the numbers' answers into a tick's grants, updating each slot's busy and short
/// counts. `half_window`: a number granting fewer is short of room (slow). `sequential`
/// (D-038): only the first number that does not refuse takes work. `group_available`: a group
/// campaign's 24 h headroom (`None`: not a group campaign or unlimited); none left makes
/// every slot refuse.
pub fn grants(
    slots: &mut [Slot],
    answers: &[CreditAnswer],
    half_window: usize,
    sequential: bool,
    group_available: Option<i64>,
    page: usize,
) -> Grants {
    let mut credits = Vec::with_capacity(slots.len());
    let mut reasons = Vec::new();
    let mut refused = Vec::with_capacity(slots.len());
    let mut wait_for_busy = false;
    for (slot, answer) in slots.iter_mut().zip(answers) {
        let (credit, reason) = match *answer {
            CreditAnswer::Busy => {
                slot.busy_ticks += 1;
                slot.short_ticks += 1;
                wait_for_busy |= slot.busy_ticks < SLOW_AFTER_TICKS && slot.weight > 0;
                (0, None)
            }
            CreditAnswer::Granted(n) => {
                slot.busy_ticks = 0;
                slot.short_ticks = if n < half_window {
                    slot.short_ticks + 1
                } else {
                    0
                };
                (n, None)
            }
            CreditAnswer::Refused(code) => (0, Some(code)),
            CreditAnswer::Unreachable => (0, Some("indisponível")),
            CreditAnswer::Elsewhere => (0, None),
        };
        credits.push(credit);
        refused.push(reason.is_some());
        if let Some(code) = reason {
            reasons.push(format!("{}: {code}", slot.channel_id));
        }
    }
    if sequential {
        if let Some(current) = refused.iter().position(|r| !r) {
            for (i, c) in credits.iter_mut().enumerate() {
                if i != current {
                    *c = 0;
                }
            }
            wait_for_busy = wait_for_busy && credits[current] == 0;
        }
    }
    let mut page = page;
    if let Some(a) = group_available {
        page = page.min(a.max(0) as usize);
        if a <= 0 {
            reasons = slots
                .iter()
                .map(|s| format!("{}: grupo limite_24h_esgotado", s.channel_id))
                .collect();
        }
    }
    Grants {
        credits,
        reasons,
        wait_for_busy,
        page,
    }
}

/// What a campaign's tick does after reading its grants and its stored state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The campaign was moved elsewhere (paused, cancelled or completed by another process or
    /// an operator): its actor stops, as a halt would, before it claims again (issue 50).
    Stop,
    /// Nothing planned, nothing open: it completed.
    Complete,
    /// Nothing to do this tick.
    Idle,
    /// No number can send: pause with this reason (pt-BR), and keep checking for a recovery.
    Pause(String),
    /// Go on: `resume` first when the rules had paused it; then claim and hand out unless
    /// `dispatch` is false (a busy number is waited for).
    Proceed {
        /// Move back to running first.
        resume: bool,
        /// Claim and hand out this tick.
        dispatch: bool,
    },
}

/// Whether a campaign's actor keeps running on a node that does not coordinate it (D-123):
/// while the campaign is `running`, or paused by its own rules (`auto_paused`: its
/// coordinator watches for a recovery). Anything else — an operator's pause, a cancel, a
/// completion — stops it.
pub fn follower_keeps_running(stored: Option<CampaignState>, auto_paused: bool) -> bool {
    match stored {
        Some(CampaignState::Running) => true,
        Some(CampaignState::Paused) => auto_paused,
        _ => false,
    }
}

/// The tick's next step. `stored`: the campaign's stored state; `paused_by_rules`: it is
/// stored as paused by its own rules for lack of numbers (`auto_paused`, D-123); `planned`/`open`: recipients still planned / not
/// settled; `slots`: how many numbers it has.
pub fn next_step(
    stored: Option<CampaignState>,
    paused_by_rules: bool,
    planned: bool,
    open: bool,
    grants: &Grants,
    slots: usize,
) -> Step {
    let keeps_running = match stored {
        Some(CampaignState::Running) => true,
        Some(CampaignState::Paused) => paused_by_rules,
        _ => false,
    };
    if !keeps_running {
        return Step::Stop;
    }
    if !planned {
        return if open { Step::Idle } else { Step::Complete };
    }
    if grants.reasons.len() == slots {
        return match paused_by_rules {
            true => Step::Idle,
            false => Step::Pause(format!(
                "Nenhum número disponível ({})",
                grants.reasons.join(", ")
            )),
        };
    }
    Step::Proceed {
        resume: paused_by_rules,
        dispatch: !grants.wait_for_busy,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CampaignState::*;

    #[test]
    fn a_follower_stops_unless_running_or_paused_by_rules() {
        assert!(follower_keeps_running(Some(Running), false));
        assert!(follower_keeps_running(Some(Paused), true));
        assert!(!follower_keeps_running(Some(Paused), false));
        assert!(!follower_keeps_running(Some(Completed), false));
        assert!(!follower_keeps_running(Some(Cancelled), true));
        assert!(!follower_keeps_running(None, false));
    }

    #[test]
    fn campaign_moves() {
        assert!(Draft.can_move_to(Running));
        assert!(Running.can_move_to(Paused) && Paused.can_move_to(Running));
        assert!(!Completed.can_move_to(Running));
        assert!(Completed.can_resend() && !Draft.can_resend() && !Cancelled.can_resend());
        assert!(!Cancelled.can_move_to(Running));
        assert!(!Draft.can_move_to(Completed));
        for s in [Draft, Running, Paused, Completed, Cancelled] {
            assert_eq!(CampaignState::parse(s.as_str()), Some(s));
        }
        assert!(Draft.accepts_recipients() && !Completed.accepts_recipients());
    }

    #[test]
    fn every_send_has_a_status() {
        assert_eq!(send_status("planned", None), "queued");
        assert_eq!(send_status("skipped", None), "skipped");
        assert_eq!(send_status("skipped", Some("queued")), "skipped");
        assert_eq!(send_status("failed", Some("failed")), "failed");
        assert_eq!(send_status("claimed", Some("queued")), "sending");
        assert_eq!(send_status("in_doubt", None), "sending");
        assert_eq!(send_status("in_doubt", Some("delivered")), "delivered");
        assert_eq!(send_status("sent", Some("read")), "read");
        assert_eq!(send_status("sent", Some("sent")), "sent");
        assert_eq!(send_status("sent", None), "sent");
    }

    #[test]
    fn a_cancel_stands_and_a_completion_only_runs_again() {
        for next in [Draft, Scheduled, Running, Paused, Completed] {
            assert!(!Cancelled.may_be_overwritten_by(next), "{next:?}");
        }
        assert!(Cancelled.may_be_overwritten_by(Cancelled));
        assert!(Completed.may_be_overwritten_by(Running));
        assert!(!Completed.may_be_overwritten_by(Paused));
        assert!(!Completed.may_be_overwritten_by(Cancelled));
        assert!(
            Running.may_be_overwritten_by(Completed) && Running.may_be_overwritten_by(Cancelled)
        );
    }

    #[test]
    fn allocation_follows_weights_and_credits() {
        let slots = vec![
            Slot {
                channel_id: 1,
                weight: 3,
                dispatched: 0,
                busy_ticks: 0,
                short_ticks: 0,
            },
            Slot {
                channel_id: 2,
                weight: 1,
                dispatched: 0,
                busy_ticks: 0,
                short_ticks: 0,
            },
        ];
        assert_eq!(allocate(&slots, &[100, 100], 40), vec![30, 10]);
        assert_eq!(
            allocate(&slots, &[32, 32], 500),
            vec![32, 10],
            "equal windows still give 3:1 within one send (42 units: 31.5 and 10.5)"
        );
        let a = allocate(&slots, &[3, 100], 40);
        assert!(
            a[0] <= 3 && a.iter().sum::<usize>() == 4,
            "a slow number bounds the page: {a:?}"
        );
        assert_eq!(
            allocate(&slots, &[0, 100], 40),
            vec![0, 40],
            "a number without credit is left out, the other carries on"
        );
        assert_eq!(allocate(&slots, &[0, 0], 40), vec![0, 0]);
        // Once a number has been short of credit for SLOW_AFTER_TICKS it no longer bounds the
        // page: it takes what it can, the other carries on.
        let mut slow = slots.clone();
        slow[0].short_ticks = SLOW_AFTER_TICKS;
        assert_eq!(allocate(&slow, &[3, 100], 40), vec![3, 37]);
        assert_eq!(
            allocate(&slow, &[3, 10], 40),
            vec![3, 10],
            "the slow number's credits come on top of the other's bound"
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// With credit to spare, every tick keeps each number within one send of its weighted
        /// share of everything dispatched so far (a 3:1 weight gives 3:1 sends).
        #[test]
        fn weights_hold_within_one_send_every_tick(
            weights in proptest::collection::vec(1i64..6, 1..6),
            pages in proptest::collection::vec(1usize..200, 1..30),
        ) {
            let mut slots: Vec<Slot> = weights.iter().enumerate().map(|(i, w)| Slot::new(i as i64, *w)).collect();
            let total_weight: i64 = weights.iter().sum();
            for page in pages {
                let credits = vec![1_000usize; slots.len()];
                let alloc = allocate(&slots, &credits, page);
                proptest::prop_assert_eq!(alloc.iter().sum::<usize>(), page);
                for (s, a) in slots.iter_mut().zip(&alloc) {
                    s.dispatched += *a as u64;
                }
                let dispatched: u64 = slots.iter().map(|s| s.dispatched).sum();
                for s in &slots {
                    let share = dispatched as f64 * s.weight as f64 / total_weight as f64;
                    proptest::prop_assert!((s.dispatched as f64 - share).abs() <= 1.0,
                        "{} sent against a share of {:.2} ({:?})", s.dispatched, share, weights);
                }
            }
        }

        /// No number is handed more than its credits, and none outside the campaign's page.
        #[test]
        fn allocation_stays_within_credits_and_the_page(
            slots in proptest::collection::vec((0i64..5, 0u64..500, 0u32..20, 0usize..300), 1..6),
            page in 0usize..600,
        ) {
            let credits: Vec<usize> = slots.iter().map(|s| s.3).collect();
            let slots: Vec<Slot> = slots
                .iter()
                .enumerate()
                .map(|(i, (w, d, short, _))| Slot { dispatched: *d, short_ticks: *short, ..Slot::new(i as i64, *w) })
                .collect();
            let alloc = allocate(&slots, &credits, page);
            proptest::prop_assert!(alloc.iter().sum::<usize>() <= page);
            for ((a, c), s) in alloc.iter().zip(&credits).zip(&slots) {
                proptest::prop_assert!(a <= c);
                if s.weight == 0 {
                    proptest::prop_assert_eq!(*a, 0);
                }
            }
        }
    }

    #[test]
    fn grants_read_the_numbers_answers() {
        let mut slots = vec![Slot::new(1, 1), Slot::new(2, 1), Slot::new(3, 1)];
        let answers = [
            CreditAnswer::Granted(200),
            CreditAnswer::Busy,
            CreditAnswer::Refused("qualidade_red"),
        ];
        let g = grants(&mut slots, &answers, 128, false, None, 1000);
        assert_eq!(g.credits, vec![200, 0, 0]);
        assert_eq!(g.reasons, vec!["3: qualidade_red".to_string()]);
        assert!(g.wait_for_busy, "a number busy for one tick is waited for");
        assert_eq!((slots[1].busy_ticks, slots[1].short_ticks), (1, 1));
        // Busy for SLOW_AFTER_TICKS: the others carry on.
        for _ in 1..SLOW_AFTER_TICKS {
            grants(&mut slots, &answers, 128, false, None, 1000);
        }
        assert!(!grants(&mut slots, &answers, 128, false, None, 1000).wait_for_busy);
        // Sequential: only the first number that does not refuse takes work.
        let mut slots = vec![Slot::new(1, 1), Slot::new(2, 1), Slot::new(3, 1)];
        let answers = [
            CreditAnswer::Refused("limite_diario_atingido"),
            CreditAnswer::Granted(10),
            CreditAnswer::Granted(10),
        ];
        let g = grants(&mut slots, &answers, 128, true, None, 1000);
        assert_eq!(g.credits, vec![0, 10, 0]);
        // A group without headroom: every number refuses, the page is empty.
        let g = grants(&mut slots, &answers, 128, false, Some(0), 1000);
        assert_eq!((g.reasons.len(), g.page), (3, 0));
        assert_eq!(
            grants(&mut slots, &answers, 128, false, Some(7), 1000).page,
            7
        );
    }

    #[test]
    fn a_number_another_node_runs_takes_nothing_and_refuses_nothing() {
        let mut slots = vec![Slot::new(1, 1), Slot::new(2, 1)];
        let answers = [
            CreditAnswer::Refused("qualidade_red"),
            CreditAnswer::Elsewhere,
        ];
        let g = grants(&mut slots, &answers, 128, false, None, 1000);
        assert_eq!(g.credits, vec![0, 0]);
        assert_eq!(g.reasons, vec!["1: qualidade_red".to_string()]);
        assert!(!g.wait_for_busy);
        // This node's only number refuses, but the other node's may send: no pause here.
        assert_eq!(
            next_step(Some(CampaignState::Running), false, true, true, &g, 2),
            Step::Proceed {
                resume: false,
                dispatch: true
            }
        );
        // Sequential: the first number that does not refuse is the other node's; none here.
        let mut slots = vec![Slot::new(1, 1), Slot::new(2, 1), Slot::new(3, 1)];
        let answers = [
            CreditAnswer::Elsewhere,
            CreditAnswer::Granted(10),
            CreditAnswer::Granted(10),
        ];
        assert_eq!(
            grants(&mut slots, &answers, 128, true, None, 1000).credits,
            vec![0, 0, 0]
        );
    }

    #[test]
    fn the_tick_stops_completes_pauses_and_resumes_by_its_state() {
        let go = Grants {
            credits: vec![5],
            reasons: vec![],
            wait_for_busy: false,
            page: 100,
        };
        let none = Grants {
            credits: vec![0],
            reasons: vec!["1: qualidade_red".into()],
            ..go.clone()
        };
        use CampaignState as S;
        assert_eq!(
            next_step(Some(S::Cancelled), false, true, true, &go, 1),
            Step::Stop
        );
        assert_eq!(
            next_step(Some(S::Paused), false, true, true, &go, 1),
            Step::Stop,
            "an operator's pause"
        );
        assert_eq!(next_step(None, false, true, true, &go, 1), Step::Stop);
        assert_eq!(
            next_step(Some(S::Running), false, false, false, &go, 1),
            Step::Complete
        );
        assert_eq!(
            next_step(Some(S::Running), false, false, true, &go, 1),
            Step::Idle
        );
        assert_eq!(
            next_step(Some(S::Running), false, true, true, &none, 1),
            Step::Pause("Nenhum número disponível (1: qualidade_red)".into())
        );
        assert_eq!(
            next_step(Some(S::Paused), true, true, true, &none, 1),
            Step::Idle
        );
        assert_eq!(
            next_step(Some(S::Paused), true, true, true, &go, 1),
            Step::Proceed {
                resume: true,
                dispatch: true
            }
        );
        let busy = Grants {
            wait_for_busy: true,
            ..go.clone()
        };
        assert_eq!(
            next_step(Some(S::Running), false, true, true, &busy, 1),
            Step::Proceed {
                resume: false,
                dispatch: false
            }
        );
    }

    #[test]
    fn a_campaign_names_its_numbers_once_with_weights() {
        assert_eq!(check_numbers(" ", &[(1, 1)]).unwrap_err().field, "name");
        assert_eq!(check_numbers("a", &[]).unwrap_err().code, "required");
        assert_eq!(
            check_numbers("a", &[(1, 0)]).unwrap_err().code,
            "invalid_weight"
        );
        assert_eq!(
            check_numbers("a", &[(1, 101)]).unwrap_err().code,
            "invalid_weight"
        );
        assert_eq!(
            check_numbers("a", &[(1, 1), (1, 2)]).unwrap_err().code,
            "duplicate_channel"
        );
        assert!(check_numbers("a", &[(1, 1), (2, 100)]).is_ok());
    }

    #[test]
    fn a_group_campaign_checks_its_mode_schedule_and_batch() {
        assert_eq!(
            check_group_campaign(None, false, true, 0, 10).unwrap(),
            "all"
        );
        assert_eq!(
            check_group_campaign(Some("sequential"), true, true, 10, 10).unwrap(),
            "sequential"
        );
        assert_eq!(
            check_group_campaign(Some("x"), false, true, 0, 10)
                .unwrap_err()
                .code,
            "invalid_mode"
        );
        assert_eq!(
            check_group_campaign(None, true, false, 0, 10)
                .unwrap_err()
                .code,
            "schedule_needs_start"
        );
        assert_eq!(
            check_group_campaign(None, false, true, 11, 10)
                .unwrap_err()
                .code,
            "invalid_batch"
        );
    }
}
