//! `CampaignActor`: one per running campaign. Every tick it asks each of its numbers for
//! credits (how many sends the number takes now, or why it takes none), splits a page of
//! planned recipients among the numbers with credit in proportion to their weights, claims them
//! (each with its stored message, before any provider call) and hands them to the numbers. A
//! blocked or slow number simply takes less; with no number able to send, the campaign pauses
//! itself with a reason and resumes when one recovers. Memory stays flat: recipients are read
//! from storage a page at a time.
//!
//! Cluster mode (D-123): every node running one of the campaign's numbers has a copy of the
//! actor, and the copy on the node holding the campaign's lease (`campaign:<id>`) coordinates:
//! it asks every number for credits (the ones on other nodes over NATS), splits the page by
//! weight across all of them, claims for its own numbers and grants the others' shares to
//! their nodes' copies, which claim under their cells' leases and hand out. The other copies
//! only serve grants and stop when the campaign stops running.

use crate::clock::Stopwatch;
use crate::error::ActorError;
use crate::protocol::{CampaignGate, CampaignSupervisorMsg, ChannelMsg, Dispatch, DispatchItem};
use crate::{Runtime, Shared};
use engine::campaign::{allocate, CampaignState, CreditAnswer, Slot, Step};
use engine::ids::{AccountId, CampaignId};
use engine::library::VarMap;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use storage::campaigns::{ClaimShare, Settlement};
use storage::templates::TemplateRecord;
use tracing::Instrument;

/// How often a running campaign hands out work.
pub const TICK: Duration = Duration::from_millis(50);

/// Most recipients claimed per tick.
pub const PAGE: usize = 2000;

/// Messages of a [`CampaignActor`].
#[derive(Debug)]
pub enum CampaignMsg {
    /// Hand out work.
    Tick,
    /// Re-read the campaign's numbers and the recipients pinned to them (after a resend).
    Refresh,
    /// Stop handing out work, wait for the provider calls under way, close the gate (sends
    /// still waiting go back to `planned`) and stop; replies when done (pause, cancel, the
    /// dispatch switch).
    Halt(ractor::RpcReplyPort<()>),
    /// Claim at most `count` recipients (the pinned ones when `pinned`) for `channel_id`, a
    /// number running on this node, and hand them to it: the coordinator's grant from another
    /// node (D-123). Replies how many were claimed.
    Grant {
        /// The number.
        channel_id: i64,
        /// Most recipients to claim.
        count: usize,
        /// Claim the recipients a resend pinned to the number.
        pinned: bool,
        /// How many were claimed.
        reply: ractor::RpcReplyPort<usize>,
    },
}

/// Ticks between two sweeps of in-doubt recipients (20 × 50 ms = 1 s).
pub const SWEEP_EVERY_TICKS: u64 = 20;

/// Start arguments.
pub struct CampaignArgs {
    /// Campaign.
    pub campaign_id: i64,
    /// Its account.
    pub account_id: i64,
    /// Shared runtime context.
    pub shared: Arc<Shared>,
}

/// The actor's state.
pub struct CampaignRun {
    campaign_id: i64,
    account_id: i64,
    template: TemplateRecord,
    var_map: VarMap,
    slots: Vec<Slot>,
    /// Channels with recipients a resend pinned to them, still to be claimed.
    pinned: std::collections::HashSet<i64>,
    /// Whether the last tick coordinated (cluster mode: this node held the campaign's lease).
    coordinating: bool,
    ticks: u64,
    /// The sending group whose 24 h limit bounds it (D-038).
    group_id: Option<i64>,
    /// `sequential`: one number at a time, in order, moving on when it refuses work.
    sequential: bool,
    /// Header image of every send (panel campaigns).
    header_image: Option<String>,
    /// The template's layout, every send completed from it (issue 16).
    layout: Arc<engine::template::Layout>,
    /// Open while the campaign may call the provider.
    gate: CampaignGate,
    /// What this copy's claims left: stranded claims and the claim cursors.
    claims: ClaimBook,
    shared: Arc<Shared>,
}

/// A campaign actor's record of its own claims.
#[derive(Debug, Default)]
struct ClaimBook {
    /// Recipients claimed and never handed to a number (the database went away between the
    /// claim and the hand-out, or with the claim's commit): given back before anything else
    /// is claimed ([`give_back`], D-136).
    stranded: Vec<Settlement>,
    /// The last recipient id claimed, unpinned `[0]` and pinned by a resend `[1]`: the next
    /// claim of that kind starts past it ([`storage::Store::claim_recipients_after`], D-137).
    after: [i64; 2],
    /// Per kind, until when (ms) no claim of that kind is tried: a claim that found nobody
    /// read the whole audience (no index names `state` on PostgreSQL), so the next one waits
    /// [`DRY_WAIT_MS`] — the campaign's planned recipients may all be pinned by a resend, or
    /// being claimed by another node.
    dry_until: [i64; 2],
}

/// How long (ms) a kind of claim that found nobody waits before it is tried again (D-137).
const DRY_WAIT_MS: i64 = 1_000;

fn slots_of(campaign: &storage::campaigns::CampaignRecord) -> Vec<Slot> {
    campaign
        .channels
        .iter()
        .map(|(c, w)| Slot {
            channel_id: *c,
            weight: *w,
            dispatched: 0,
            busy_ticks: 0,
            short_ticks: 0,
        })
        .collect()
}

/// The actor.
pub struct CampaignActor;

impl Actor for CampaignActor {
    type Msg = CampaignMsg;
    type State = CampaignRun;
    type Arguments = CampaignArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<CampaignMsg>,
        args: CampaignArgs,
    ) -> Result<CampaignRun, ActorProcessingErr> {
        let store = &args.shared.store;
        let campaign = store
            .campaign(AccountId(args.account_id), CampaignId(args.campaign_id))
            .await?;
        let template = store
            .template(args.account_id, campaign.template_id)
            .await?;
        // Recipients still `claimed` were taken by a process that stopped: in doubt (D-032).
        let in_doubt = store.mark_claimed_in_doubt(campaign.id).await?;
        if in_doubt > 0 {
            tracing::warn!(
                campaign_id = campaign.id,
                in_doubt,
                "claimed recipients of a stopped process are in doubt"
            );
        }
        let pinned = store.pinned_channels(campaign.id).await?;
        myself.send_interval(TICK, || CampaignMsg::Tick);
        metrics::gauge!("disparo_campaign_running", "campaign_id" => campaign.id.to_string())
            .set(1.0);
        let layout = Arc::new(crate::templates::layout_of(&template));
        Ok(CampaignRun {
            campaign_id: campaign.id,
            account_id: campaign.account_id,
            var_map: crate::error::stored_json("var_map da campanha", &campaign.var_map)?,
            template,
            slots: slots_of(&campaign),
            pinned,
            coordinating: true,
            ticks: 0,
            group_id: campaign.group_id,
            sequential: campaign.mode == "sequential",
            gate: Arc::new(tokio::sync::RwLock::new(true)),
            header_image: campaign.image_url.clone(),
            layout,
            claims: ClaimBook::default(),
            shared: args.shared,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<CampaignMsg>,
        st: &mut CampaignRun,
    ) -> Result<(), ActorProcessingErr> {
        metrics::gauge!("disparo_campaign_running", "campaign_id" => st.campaign_id.to_string())
            .set(0.0);
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<CampaignMsg>,
        msg: CampaignMsg,
        st: &mut CampaignRun,
    ) -> Result<(), ActorProcessingErr> {
        let span = tracing::info_span!("campaign", campaign_id = st.campaign_id);
        match msg {
            CampaignMsg::Tick if !st.shared.coordinates(st.campaign_id) => {
                follow(&myself, st).instrument(span).await;
            }
            CampaignMsg::Tick => {
                if !st.coordinating {
                    // Just became the coordinator: the numbers and pins as stored now (a
                    // failed read is tried again at the next tick).
                    match refresh(st).await {
                        Ok(()) => st.coordinating = true,
                        Err(e) => {
                            tracing::warn!(campaign_id = st.campaign_id, error = %e, "campaign not read")
                        }
                    }
                }
                let mut watch = st.shared.config.clock.stopwatch();
                let started = watch.last();
                if let Err(e) = tick(&myself, st, &mut watch).instrument(span).await {
                    tracing::error!(error = %e, "campaign tick failed");
                }
                // How long handing out work takes (s): above `TICK`, the tick is what bounds
                // the dispatch rate.
                metrics::histogram!("disparo_campaign_tick_seconds", "campaign_id" => st.campaign_id.to_string())
                    .record(watch.since(started).as_secs_f64());
            }
            CampaignMsg::Refresh => refresh(st).await?,
            CampaignMsg::Grant {
                channel_id,
                count,
                pinned,
                reply,
            } => {
                let mut book = std::mem::take(&mut st.claims);
                let granted = grant_here(st, channel_id, count, pinned, &mut book)
                    .instrument(span)
                    .await;
                st.claims = book;
                let claimed = match granted {
                    Ok(n) => n,
                    Err(e) => {
                        tracing::warn!(campaign_id = st.campaign_id, channel_id, error = %e, "grant not served");
                        0
                    }
                };
                let _ = reply.send(claimed);
            }
            CampaignMsg::Halt(reply) => {
                *st.gate.write().await = false;
                st.shared.campaigns.remove(&st.campaign_id);
                tracing::info!(campaign_id = st.campaign_id, "campaign halted");
                myself.stop(None);
                let _ = reply.send(());
            }
        }
        Ok(())
    }
}

/// Reads the campaign's numbers (new ones join, weights change) and the numbers a resend
/// pinned recipients to.
async fn refresh(st: &mut CampaignRun) -> Result<(), ActorError> {
    let store = &st.shared.store;
    let c = store
        .campaign(AccountId(st.account_id), CampaignId(st.campaign_id))
        .await?;
    for fresh in slots_of(&c) {
        match st
            .slots
            .iter_mut()
            .find(|s| s.channel_id == fresh.channel_id)
        {
            Some(s) => s.weight = fresh.weight,
            None => st.slots.push(fresh),
        }
    }
    st.pinned = store.pinned_channels(st.campaign_id).await?;
    Ok(())
}

/// A tick of a copy that does not coordinate (cluster mode, D-123): once a second it reads
/// the campaign and stops when it no longer runs ([`engine::campaign::follower_keeps_running`]).
async fn follow(myself: &ActorRef<CampaignMsg>, st: &mut CampaignRun) {
    st.coordinating = false;
    if !st.shared.store.available() || !give_back(st).await {
        return;
    }
    st.ticks += 1;
    if st.ticks % SWEEP_EVERY_TICKS != 1 {
        return;
    }
    let keeps = match st
        .shared
        .store
        .campaign(AccountId(st.account_id), CampaignId(st.campaign_id))
        .await
    {
        Ok(c) => engine::campaign::follower_keeps_running(Some(c.state), c.auto_paused),
        Err(storage::StorageError::NotFound) => false,
        Err(e) => {
            tracing::warn!(error = %e, "campaign not read");
            true
        }
    };
    if !keeps {
        *st.gate.write().await = false;
        st.shared.campaigns.remove(&st.campaign_id);
        tracing::info!("campaign no longer runs: this node's copy stops");
        myself.stop(None);
    }
}

/// Asks each slot's number how many campaign sends it takes now, all at once (2 s each at
/// most; in cluster mode a number running on another node is asked there).
async fn ask_credits(shared: &Shared, slots: &[Slot]) -> Vec<CreditAnswer> {
    let asks = slots.iter().map(|slot| async move {
        let answer = match shared.registry.get(slot.channel_id) {
            Some(e) => crate::ask(
                &e.actor,
                ChannelMsg::CampaignCredits,
                Duration::from_secs(2),
            )
            .await
            .ok(),
            None if shared.cluster.is_some() => {
                match crate::cluster::remote_credits(shared, slot.channel_id).await {
                    Some(answer) => Some(answer),
                    // No node answered: the number is moving between nodes.
                    None => return CreditAnswer::Elsewhere,
                }
            }
            None => None,
        };
        match answer {
            Some((0, None)) => CreditAnswer::Busy,
            Some((n, None)) => CreditAnswer::Granted(n),
            Some((_, Some(code))) => CreditAnswer::Refused(code.as_str()),
            None => CreditAnswer::Unreachable,
        }
    });
    futures::future::join_all(asks).await
}

/// What a claimed recipient's stored variables give the template (the campaign's header image
/// added), or why they cannot: unreadable JSON, or a value the template needs and the row
/// lacks (no default).
fn recipient_given(st: &CampaignRun, vars: &str) -> Result<engine::template::Given, String> {
    let vars: BTreeMap<String, String> = serde_json::from_str(vars)
        .map_err(|e| format!("As variáveis guardadas do destinatário estão ilegíveis: {e}"))?;
    let mut given = engine::library::render(&st.template.body, &st.var_map, &vars)
        .map_err(|missing| format!("Faltam valores para: {}", missing.join(", ")))?;
    given.header_media = st
        .header_image
        .as_ref()
        .map(|link| engine::template::GivenMedia {
            kind: engine::template::HeaderMedia::Image,
            link: Some(link.clone()),
            id: None,
        });
    Ok(given)
}

/// One tick, decided at the time `watch` started (ms) and timed by it.
async fn tick(
    myself: &ActorRef<CampaignMsg>,
    st: &mut CampaignRun,
    watch: &mut Stopwatch,
) -> Result<(), ActorError> {
    let shared = st.shared.clone();
    let store = &shared.store;
    if !store.available() {
        // The database is away (D-124): nothing can be claimed or settled; the campaign goes
        // on by itself when it is back.
        return Ok(());
    }
    if !give_back(st).await {
        return Ok(());
    }
    st.ticks += 1;
    let now = watch.last().ms;
    if st.ticks % SWEEP_EVERY_TICKS == 1 {
        sweep(st, now).await?;
        // A resend or a change of numbers made at another node reaches this copy here.
        if st.shared.cluster.is_some() {
            refresh(st).await?;
        }
    }
    watch.lap();
    let answers = ask_credits(&st.shared, &st.slots).await;
    phase("credits", watch.lap());
    // A group campaign: the group's 24 h headroom bounds the claim; none left pauses it.
    let group_available = match st.group_id {
        Some(group_id) => st
            .shared
            .group_counter(group_id)
            .await?
            .with(|g| g.available(now)),
        None => None,
    };
    let grants = engine::campaign::grants(
        &mut st.slots,
        &answers,
        engine::channel::machine::CAMPAIGN_WINDOW / 2,
        st.sequential,
        group_available,
        PAGE,
    );
    let work = store.campaign_open_work(st.campaign_id).await?;
    let stored = work.state;
    let step = engine::campaign::next_step(
        stored,
        work.auto_paused,
        work.planned,
        work.open,
        &grants,
        st.slots.len(),
    );
    if take_step(myself, st, step, work.state.map(CampaignState::as_str)).await? {
        claim_tick_work(st, grants.credits, grants.page).await?;
    }
    Ok(())
}

/// Carries out a tick's [`Step`] (`stored`: the state read, for the log); `true` when the tick
/// goes on to claim and hand out work.
async fn take_step(
    myself: &ActorRef<CampaignMsg>,
    st: &mut CampaignRun,
    step: Step,
    stored: Option<&str>,
) -> Result<bool, ActorError> {
    let (shared, account, id) = (st.shared.clone(), st.account_id, st.campaign_id);
    match step {
        Step::Stop => {
            *st.gate.write().await = false;
            shared.campaigns.remove(&id);
            tracing::info!(state = stored, "campaign moved elsewhere: its actor stops");
            myself.stop(None);
            Ok(false)
        }
        Step::Idle => Ok(false),
        Step::Complete => {
            move_campaign(&shared, account, id, CampaignState::Completed, None).await?;
            tracing::info!("campaign completed");
            shared.campaigns.remove(&id);
            myself.stop(None);
            Ok(false)
        }
        Step::Pause(reason) => {
            // No number can send: pause with the reasons, keep checking for a recovery.
            pause_by_rules(&shared, account, id, &reason).await?;
            tracing::warn!(reason, "campaign paused");
            Ok(false)
        }
        Step::Proceed { resume, dispatch } => {
            if resume {
                move_campaign(&shared, account, id, CampaignState::Running, None).await?;
                tracing::info!("campaign resumed");
            }
            Ok(dispatch)
        }
    }
}

/// Every how many ticks a sweep also reads the campaign's claimed rows for stale and
/// orphaned claims ([`storage::Store::take_stale_claims`]), for an in-doubt grace of `grace`
/// ms: a twelfth of the grace, between one sweep (1 s) and ten (D-137) — a claim is found
/// at most that much after its grace, and the scan, which no index serves on PostgreSQL,
/// runs every 10 s at the default grace of 120 s.
fn claim_scan_every(grace: i64) -> u64 {
    SWEEP_EVERY_TICKS * (grace / 12_000).clamp(1, 10) as u64
}

/// Resolves the campaign's in-doubt recipients older than the grace period at `now` (ms;
/// D-032).
async fn sweep(st: &CampaignRun, now: i64) -> Result<(), ActorError> {
    let grace = st.shared.config.in_doubt_grace.as_millis() as i64;
    let store = &st.shared.store;
    let mut swept = if st.ticks % claim_scan_every(grace) == 1 {
        store.take_stale_claims(st.campaign_id, now - grace).await?
    } else {
        storage::campaigns::SweepOutcome::default()
    };
    let resolved = store.resolve_in_doubt(st.campaign_id, now - grace).await?;
    swept.sent = resolved.sent;
    swept.failed = resolved.failed;
    swept.replanned = resolved.replanned;
    if swept != storage::campaigns::SweepOutcome::default() {
        tracing::info!(
            sent = swept.sent,
            failed = swept.failed,
            replanned = swept.replanned,
            taken_over = swept.taken_over,
            stale = swept.stale,
            "in-doubt recipients resolved"
        );
    }
    Ok(())
}

/// Claims and hands out a tick's work: first the recipients a resend pinned to a number
/// (through that number only), then the weighted shares of `credits` within `page`, claimed
/// together in one transaction.
async fn claim_tick_work(
    st: &mut CampaignRun,
    mut credits: Vec<usize>,
    page: usize,
) -> Result<(), ActorError> {
    let versions = st.shared.store.template_channels(st.template.id).await?;
    let default_name = st.template.provider_name.clone();
    let template_name = |channel_id: i64| template_name_on(&default_name, &versions, channel_id);
    let channel_ids: Vec<i64> = st.slots.iter().map(|s| s.channel_id).collect();
    for (credit, channel_id) in credits.iter_mut().zip(channel_ids) {
        if *credit == 0 || !st.pinned.contains(&channel_id) {
            continue;
        }
        let share = ClaimShare {
            channel_id,
            count: *credit,
            template_name: template_name(channel_id),
            lease: st.shared.fence_of(channel_id).lease(),
        };
        let mut book = std::mem::take(&mut st.claims);
        let claimed = claim_anywhere(st, true, std::slice::from_ref(&share), &mut book).await;
        st.claims = book;
        let n = claimed?[0];
        if n < *credit {
            st.pinned.remove(&channel_id);
        }
        *credit -= n;
    }
    let alloc = allocate(&st.slots, &credits, page);
    let shares: Vec<(usize, ClaimShare)> = alloc
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(i, n)| {
            let channel_id = st.slots[i].channel_id;
            let share = ClaimShare {
                channel_id,
                count: *n,
                template_name: template_name(channel_id),
                lease: st.shared.fence_of(channel_id).lease(),
            };
            (i, share)
        })
        .collect();
    if shares.is_empty() {
        return Ok(());
    }
    let only: Vec<ClaimShare> = shares.iter().map(|(_, s)| s.clone()).collect();
    let mut book = std::mem::take(&mut st.claims);
    let handed = claim_anywhere(st, false, &only, &mut book).await;
    st.claims = book;
    let handed = handed?;
    for ((i, _), n) in shares.into_iter().zip(handed) {
        st.slots[i].dispatched += n as u64;
    }
    Ok(())
}

/// The provider's name of the campaign's template on `channel_id`: its approved version's
/// there, else the template's own.
fn template_name_on(
    default_name: &str,
    versions: &[storage::templates::TemplateChannel],
    channel_id: i64,
) -> String {
    versions
        .iter()
        .find(|v| {
            v.channel_id == channel_id && v.status == engine::library::TemplateStatus::Approved
        })
        .map_or_else(|| default_name.to_string(), |v| v.provider_name.clone())
}

/// Claims and hands out `shares` wherever their numbers run: the ones running here through
/// [`claim_and_hand_out`], the others (cluster mode) granted to their nodes' copies, all at
/// once (D-123). Returns how many recipients each share took.
async fn claim_anywhere(
    st: &CampaignRun,
    pinned: bool,
    shares: &[ClaimShare],
    book: &mut ClaimBook,
) -> Result<Vec<usize>, ActorError> {
    let shared = &st.shared;
    let (here, there): (Vec<usize>, Vec<usize>) = (0..shares.len()).partition(|&i| {
        shared.cluster.is_none() || shared.registry.get(shares[i].channel_id).is_some()
    });
    let mut taken = vec![0usize; shares.len()];
    let grants = there.iter().map(|&i| {
        let grant = crate::cluster::CampaignGrant {
            campaign_id: st.campaign_id,
            account_id: st.account_id,
            count: shares[i].count,
            pinned,
        };
        crate::cluster::remote_grant(shared, shares[i].channel_id, grant)
    });
    let local: Vec<ClaimShare> = here.iter().map(|&i| shares[i].clone()).collect();
    let (granted, claimed) = tokio::join!(
        futures::future::join_all(grants),
        claim_and_hand_out(st, pinned, &local, book)
    );
    for (&i, n) in there.iter().zip(granted) {
        taken[i] = n;
    }
    for (&i, n) in here.iter().zip(claimed?) {
        taken[i] = n;
    }
    Ok(taken)
}

/// Serves a coordinator's grant (D-123): claims at most `count` recipients for
/// `channel_id`, which must run here, and hands them to it. How many were claimed.
async fn grant_here(
    st: &CampaignRun,
    channel_id: i64,
    count: usize,
    pinned: bool,
    book: &mut ClaimBook,
) -> Result<usize, ActorError> {
    if count == 0 || st.shared.registry.get(channel_id).is_none() || !book.stranded.is_empty() {
        return Ok(0);
    }
    let versions = st.shared.store.template_channels(st.template.id).await?;
    let share = ClaimShare {
        channel_id,
        count,
        template_name: template_name_on(&st.template.provider_name, &versions, channel_id),
        lease: st.shared.fence_of(channel_id).lease(),
    };
    Ok(claim_and_hand_out(st, pinned, std::slice::from_ref(&share), book).await?[0])
}

/// Pauses campaign `id` because no number can send (`reason`), marked as paused by its rules
/// (D-123: whoever coordinates it keeps checking for a recovery, also after a restart or a
/// hand-off) and announced as [`move_campaign`] does.
async fn pause_by_rules(
    shared: &Shared,
    account_id: i64,
    id: i64,
    reason: &str,
) -> Result<bool, storage::StorageError> {
    let before = shared
        .store
        .campaign(AccountId(account_id), CampaignId(id))
        .await?;
    if before.state != CampaignState::Running {
        return Ok(false);
    }
    if !shared
        .store
        .pause_campaign_by_rules(id, before.state.as_str(), reason)
        .await?
    {
        return Ok(false);
    }
    announce_campaign(shared, &before, CampaignState::Paused, Some(reason)).await;
    Ok(true)
}

/// Moves campaign `id` of `account_id` to `state` (with a pause reason, or none) and emits
/// `campaign.status` to the subscriptions of each of its numbers (issue 17): `{campaign_id,
/// name, status, previous_status, reason}`. A move to the state it is already in emits
/// nothing. The write is a compare-and-set on the state read (issue 50): when another
/// process or request moved the campaign in between, or the stored state may not be written
/// over ([`CampaignState::may_be_overwritten_by`]: a cancelled campaign stays cancelled),
/// nothing is written or emitted and the answer is `false`.
pub async fn move_campaign(
    shared: &Shared,
    account_id: i64,
    id: i64,
    state: CampaignState,
    reason: Option<&str>,
) -> Result<bool, storage::StorageError> {
    let store = &shared.store;
    let before = store
        .campaign(AccountId(account_id), CampaignId(id))
        .await?;
    let stored = before.state;
    if !stored.may_be_overwritten_by(state) {
        tracing::info!(
            campaign_id = id,
            from = stored.as_str(),
            to = state.as_str(),
            "campaign move refused: the stored state stands"
        );
        return Ok(false);
    }
    if !store
        .set_campaign_state(id, before.state.as_str(), state.as_str(), reason)
        .await?
    {
        tracing::info!(
            campaign_id = id,
            to = state.as_str(),
            "campaign moved by someone else meanwhile"
        );
        return Ok(false);
    }
    if before.state == state && before.pause_reason.as_deref() == reason {
        return Ok(true);
    }
    announce_campaign(shared, &before, state, reason).await;
    Ok(true)
}

/// Emits `campaign.status` (`before`'s state as the previous one, `state` as the new) to the
/// subscriptions of each of the campaign's numbers.
pub async fn announce_campaign(
    shared: &Shared,
    before: &storage::campaigns::CampaignRecord,
    state: CampaignState,
    reason: Option<&str>,
) {
    let now = shared.now_ms();
    let mut events = Vec::with_capacity(before.channels.len());
    for (channel_id, _) in &before.channels {
        let Ok(channel) = shared.store.channel_unscoped(*channel_id).await else {
            continue;
        };
        events.push(crate::events::campaign_status(
            &channel,
            before,
            state.as_str(),
            reason,
            now,
        ));
    }
    shared.emit(&events).await;
}

/// Records how long a phase of a tick took (s) in
/// `disparo_campaign_tick_phase_seconds{phase}`: `credits` (asking the numbers), `claim`
/// (one claim transaction, with its wait for the write connection), `claim_and_hand_out`
/// (every round of the tick, claimed and handed to the numbers).
fn phase(name: &'static str, took: Duration) {
    metrics::histogram!("disparo_campaign_tick_phase_seconds", "phase" => name)
        .record(took.as_secs_f64());
}

/// Most recipients claimed in one transaction (a tick claims in rounds of this many).
pub const CLAIM_ROUND: usize = 512;

/// Claims the shares in rounds and hands each round to its numbers as soon as it is claimed:
/// the numbers dispatch one round while the next is claimed (a pipeline, issue 25 part 3),
/// instead of waiting for the whole tick's claim. Returns how many recipients each share
/// took; counts them in `disparo_campaign_claimed_total{campaign_id}`. Claims that may be
/// stored but were not handed out (the database failed in between) go to `stranded`, to be
/// given back ([`give_back`]); each claim starts from `book`'s cursor.
async fn claim_and_hand_out(
    st: &CampaignRun,
    pinned: bool,
    shares: &[ClaimShare],
    book: &mut ClaimBook,
) -> Result<Vec<usize>, ActorError> {
    let mut watch = st.shared.config.clock.stopwatch();
    let started = watch.last();
    // In rounds of at most CLAIM_ROUND recipients, one transaction each: 1:1 sends' writes
    // wait for one round, not for the whole tick's claim (issue 25 part 2, D-076), and on
    // SQLite for one chunk of it (D-094).
    let mut left: Vec<usize> = shares.iter().map(|s| s.count).collect();
    let mut taken = vec![0usize; shares.len()];
    loop {
        let total: usize = left.iter().sum();
        if total == 0 {
            break;
        }
        let round: Vec<ClaimShare> = shares
            .iter()
            .zip(&left)
            .map(|(s, &l)| ClaimShare {
                count: if total <= CLAIM_ROUND {
                    l
                } else {
                    (l * CLAIM_ROUND).div_ceil(total).min(l)
                },
                ..s.clone()
            })
            .collect();
        let asked: usize = round.iter().map(|s| s.count).sum();
        watch.lap();
        let Some(got) = claim_round(st, pinned, &round, book).await? else {
            break;
        };
        phase("claim", watch.lap());
        let mut n = 0;
        let mut failed = None;
        for (i, part) in got.into_iter().enumerate() {
            left[i] -= part.len().min(left[i]);
            taken[i] += part.len();
            n += part.len();
            // Every part is handed out or given back, whatever happened to the others.
            let back = given_back(&shares[i], &part);
            if let Err(e) = hand_out(st, &shares[i], part).await {
                book.stranded.extend(back);
                failed.get_or_insert(e);
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        if n < asked {
            // The audience ran out.
            break;
        }
    }
    phase("claim_and_hand_out", watch.since(started));
    let n: usize = taken.iter().sum();
    metrics::counter!("disparo_campaign_claimed_total", "campaign_id" => st.campaign_id.to_string())
        .increment(n as u64);
    Ok(taken)
}

/// One claim transaction of [`claim_and_hand_out`]: the claimed recipients per share, or
/// `None` when a share's cell left this node (cluster mode: nothing was claimed, the next
/// tick plans without it). A claim that failed after claiming puts its claims in the book's
/// stranded ones; the claim moves the book's cursor.
async fn claim_round(
    st: &CampaignRun,
    pinned: bool,
    round: &[ClaimShare],
    book: &mut ClaimBook,
) -> Result<Option<Vec<Vec<storage::campaigns::Claimed>>>, ActorError> {
    let kind = usize::from(pinned);
    let now = st.shared.now_ms();
    if book.dry_until[kind] > now {
        return Ok(Some(round.iter().map(|_| Vec::new()).collect()));
    }
    let claimed = st
        .shared
        .store
        .claim_recipients_after(
            st.account_id,
            st.campaign_id,
            pinned,
            round,
            &st.template.language,
            &mut book.after[usize::from(pinned)],
        )
        .await;
    let error = match claimed {
        Ok(got) => {
            if got.iter().all(Vec::is_empty) {
                book.dry_until[kind] = now + DRY_WAIT_MS;
            }
            return Ok(Some(got));
        }
        Err(storage::StorageError::ClaimUnconfirmed { give_back, source }) => {
            tracing::warn!(
                error = %source,
                claims = give_back.len(),
                "claim not confirmed: its recipients will be given back"
            );
            book.stranded.extend(give_back);
            *source
        }
        Err(e) => e,
    };
    match error {
        storage::StorageError::Fenced(cell) => {
            tracing::warn!(
                campaign_id = st.campaign_id,
                cell,
                "claim refused: cell no longer held here"
            );
            Ok(None)
        }
        e => Err(e.into()),
    }
}

/// The settlements that give `claimed` back to the campaign (`Replan`, D-136).
fn given_back(share: &ClaimShare, claimed: &[storage::campaigns::Claimed]) -> Vec<Settlement> {
    claimed
        .iter()
        .map(|c| Settlement {
            channel_id: share.channel_id,
            recipient_id: c.recipient_id,
            message_id: c.message_id,
            result: storage::campaigns::SendResult::Replan,
        })
        .collect()
}

/// Gives the campaign's stranded claims back (D-136): recipients the database's going away
/// cut off between their claim and their hand-out were never sent, so they are planned
/// again at once instead of waiting for the in-doubt grace twice (D-032). A claim that was
/// not stored changes nothing (the settlement names its message). Returns whether none is
/// left: until then nothing new is claimed (a SQLite message id of a rolled-back claim may
/// be given again to a new one).
async fn give_back(st: &mut CampaignRun) -> bool {
    if st.claims.stranded.is_empty() {
        return true;
    }
    match st
        .shared
        .store
        .settle_campaign_sends(&st.claims.stranded, |_, _| Vec::new())
        .await
    {
        Ok(_) => {
            tracing::info!(
                recipients = st.claims.stranded.len(),
                "stranded claims given back to the campaign"
            );
            st.claims.stranded.clear();
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, recipients = st.claims.stranded.len(), "stranded claims not given back yet");
            false
        }
    }
}

/// The reason a marketing campaign skips a contact who stopped marketing messages.
pub const OPT_OUT_REASON: &str =
    "O contato pediu para não receber mensagens de marketing (opt-out no WhatsApp).";

/// A marketing campaign's claimed recipients without the contacts who stopped marketing
/// messages (`user_preferences`, D-074): those are settled `skipped` with the reason, never
/// sent.
async fn skip_opted_out(
    st: &CampaignRun,
    share: &ClaimShare,
    claimed: Vec<storage::campaigns::Claimed>,
) -> Result<Vec<storage::campaigns::Claimed>, ActorError> {
    if !st.template.category.eq_ignore_ascii_case("marketing") {
        return Ok(claimed);
    }
    let phones: Vec<&str> = claimed.iter().map(|c| c.phone.as_str()).collect();
    let out = st
        .shared
        .store
        .opted_out(st.account_id, "marketing_messages", &phones)
        .await?;
    if out.is_empty() {
        return Ok(claimed);
    }
    let (skipped, kept): (Vec<_>, Vec<_>) =
        claimed.into_iter().partition(|c| out.contains(&c.phone));
    let settlements: Vec<_> = skipped
        .iter()
        .map(|c| storage::campaigns::Settlement {
            channel_id: share.channel_id,
            recipient_id: c.recipient_id,
            message_id: c.message_id,
            result: storage::campaigns::SendResult::Failed {
                code: None,
                reason: OPT_OUT_REASON.into(),
                skip: true,
            },
        })
        .collect();
    st.shared
        .store
        .settle_campaign_sends(&settlements, |_, _| Vec::new())
        .await?;
    Ok(kept)
}

/// Hands claimed recipients to their number with their rendered parameters.
async fn hand_out(
    st: &CampaignRun,
    share: &ClaimShare,
    claimed: Vec<storage::campaigns::Claimed>,
) -> Result<(), ActorError> {
    if claimed.is_empty() {
        return Ok(());
    }
    let claimed = skip_opted_out(st, share, claimed).await?;
    if claimed.is_empty() {
        return Ok(());
    }
    let items: Vec<DispatchItem> = claimed
        .into_iter()
        .map(|c| {
            let given = recipient_given(st, &c.vars);
            DispatchItem {
                recipient_id: c.recipient_id,
                message_id: c.message_id,
                phone: c.phone,
                given,
            }
        })
        .collect();
    match st.shared.registry.get(share.channel_id) {
        Some(e) => {
            let _ = e.actor.cast(ChannelMsg::Dispatch(Box::new(Dispatch {
                template_name: share.template_name.clone(),
                language: st.template.language.clone(),
                items,
                group_limited: st.group_id.is_some(),
                layout: st.layout.clone(),
                gate: st.gate.clone(),
            })));
        }
        // The number stopped between the credit and the claim: give them back at once.
        None => {
            let back: Vec<_> = items
                .iter()
                .map(|i| storage::campaigns::Settlement {
                    channel_id: share.channel_id,
                    recipient_id: i.recipient_id,
                    message_id: i.message_id,
                    result: storage::campaigns::SendResult::Replan,
                })
                .collect();
            st.shared
                .store
                .settle_campaign_sends(&back, |_, _| Vec::new())
                .await?;
        }
    }
    Ok(())
}

impl Runtime {
    /// A draft, paused or scheduled campaign starts (or resumes) dispatching: its state moves
    /// to `running` (a compare-and-set: another request or process's scheduler may win) and
    /// its actor is spawned. The dispatch switch and the campaign's numbers may refuse it
    /// ([`Runtime::may_start`]).
    ///
    /// Errors: 422 `invalid_state` (not startable, or moved meanwhile); the switch's refusal;
    /// storage failures.
    pub async fn launch_campaign(&self, account_id: i64, id: i64) -> Result<(), ActorError> {
        let store = &self.shared.store;
        let c = store
            .campaign(AccountId(account_id), CampaignId(id))
            .await?;
        let state = c.state;
        if !state.can_move_to(CampaignState::Running) {
            return Err(ActorError::Rejected {
                code: "invalid_state",
                message: format!(
                    "A campanha está {}; só rascunhos e pausadas podem ser iniciadas.",
                    state.as_str()
                ),
                details: serde_json::json!({"state": state.as_str()}),
            });
        }
        self.may_start(&c).await?;
        if !crate::campaign::move_campaign(
            &self.shared,
            account_id,
            id,
            CampaignState::Running,
            None,
        )
        .await?
        {
            // Started, cancelled or scheduled-and-started by someone else meanwhile (another
            // request, another process's scheduler): theirs stands.
            return Err(ActorError::Rejected {
                code: "invalid_state",
                message: "A campanha mudou de estado enquanto era iniciada; consulte-a de novo."
                    .into(),
                details: serde_json::json!({"state": c.state}),
            });
        }
        if let Some(cluster) = &self.shared.cluster {
            cluster.wake_keeper();
        }
        self.spawn_campaign(id, account_id).await
    }

    /// Stops a campaign's actor, if one runs: no provider call of it starts after this
    /// returns (the calls under way have ended), and its sends still waiting go back to
    /// `planned`.
    pub async fn halt_campaign(&self, id: i64) -> Result<(), ActorError> {
        self.halt_campaign_here(id).await?;
        // Cluster mode: the other nodes' copies (the coordinator may be one of them, D-123).
        crate::cluster::halt_everywhere(&self.shared, id).await;
        Ok(())
    }

    /// Stops this node's actor of a campaign, if one runs (see [`Runtime::halt_campaign`]).
    pub(crate) async fn halt_campaign_here(&self, id: i64) -> Result<(), ActorError> {
        if let Some(c) = &self.shared.cluster {
            c.note_halted(id, self.shared.config.clock.now_ms());
        }
        if let Some(actor) = self.shared.campaigns.get(&id).map(|a| a.clone()) {
            // The halt waits for the provider calls under way (each bounded by the provider
            // timeout).
            let wait = self.shared.config.call_timeout + Duration::from_secs(35);
            if let Err(e) = crate::ask(&actor, CampaignMsg::Halt, wait).await {
                // Gone meanwhile (it completed, or another halt stopped it): nothing runs.
                if self.shared.campaigns.contains_key(&id) {
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Starts the actor of a running campaign (also at boot), under the campaign supervisor.
    pub async fn spawn_campaign(&self, id: i64, account_id: i64) -> Result<(), ActorError> {
        if self.shared.campaigns.contains_key(&id) {
            return Ok(());
        }
        let started = crate::ask(
            &self.campaign_supervisor,
            |r| CampaignSupervisorMsg::Start(id, account_id, r),
            self.shared.config.call_timeout,
        )
        .await?;
        started.map_err(|e| {
            tracing::error!(campaign_id = id, error = e, "campaign actor did not start");
            ActorError::Unavailable
        })
    }

    /// The actor running a campaign, if one runs (operations and tests: stopping it shows the
    /// supervisor restart it).
    pub fn campaign_actor(&self, id: i64) -> Option<ActorRef<CampaignMsg>> {
        self.shared.campaigns.get(&id).map(|a| a.clone())
    }
}
