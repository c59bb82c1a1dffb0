//! `CampaignActor`: one per running campaign. Every tick it asks each of its numbers for
//! credits (how many sends the number takes now, or why it takes none), splits a page of
//! planned recipients among the numbers with credit in proportion to their weights, claims them
//! (each with its stored message, before any provider call) and hands them to the numbers. A
//! blocked or slow number simply takes less; with no number able to send, the campaign pauses
//! itself with a reason and resumes when one recovers. Memory stays flat: recipients are read
//! from storage a page at a time.

use crate::channel::{ChannelMsg, Dispatch, DispatchItem};
use crate::error::ActorError;
use crate::{Runtime, Shared};
use engine::campaign::CampaignState;
use engine::library::VarMap;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use storage::templates::TemplateRecord;

/// How often a running campaign hands out work.
pub const TICK: Duration = Duration::from_millis(50);

/// Most recipients claimed per tick.
pub const PAGE: usize = 500;

/// Messages of a [`CampaignActor`].
#[derive(Debug)]
pub enum CampaignMsg {
    /// Hand out work.
    Tick,
}

/// Start arguments.
pub struct CampaignArgs {
    /// Campaign.
    pub campaign_id: i64,
    /// Its account.
    pub account_id: i64,
    /// Shared runtime context.
    pub shared: Arc<Shared>,
}

struct Slot {
    channel_id: i64,
    weight: i64,
    dispatched: u64,
    /// Consecutive ticks without credit while not blocked.
    busy_ticks: u32,
}

/// Ticks a number may stay without credit (busy) before the campaign counts it as slow and lets
/// the others carry on without it; until then the tick waits for it, so weights hold.
pub const SLOW_AFTER_TICKS: u32 = 10;

/// The actor's state.
pub struct CampaignRun {
    campaign_id: i64,
    account_id: i64,
    template: TemplateRecord,
    var_map: VarMap,
    slots: Vec<Slot>,
    paused_by_rules: bool,
    shared: Arc<Shared>,
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
        let campaign = store.campaign(args.account_id, args.campaign_id).await?;
        let template = store
            .template(args.account_id, campaign.template_id)
            .await?;
        myself.send_interval(TICK, || CampaignMsg::Tick);
        Ok(CampaignRun {
            campaign_id: campaign.id,
            account_id: campaign.account_id,
            var_map: serde_json::from_value(campaign.var_map.clone()).unwrap_or_default(),
            template,
            slots: campaign
                .channels
                .iter()
                .map(|(c, w)| Slot {
                    channel_id: *c,
                    weight: *w,
                    dispatched: 0,
                    busy_ticks: 0,
                })
                .collect(),
            paused_by_rules: campaign.state == "paused",
            shared: args.shared,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<CampaignMsg>,
        msg: CampaignMsg,
        st: &mut CampaignRun,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            CampaignMsg::Tick => {
                let span = tracing::info_span!("campaign", campaign_id = st.campaign_id);
                let _g = span.enter();
                if let Err(e) = tick(&myself, st).await {
                    tracing::error!(error = %e, "campaign tick failed");
                }
            }
        }
        Ok(())
    }
}

/// Splits up to `page` units among the slots with credit. The page is sized so that every slot
/// with credit gets its weighted share within its credits (P = min(page, min ⌊credit·W/w⌋)),
/// and units go to the slot whose share (dispatched / weight) is lowest: a 3:1 weight gives
/// 3:1 sends. A slot without credit (blocked, or its window still full because it is slow) is
/// left out of the tick, so the others carry on without it.
fn allocate(slots: &[Slot], credits: &[usize], page: usize) -> Vec<usize> {
    let mut alloc = vec![0usize; slots.len()];
    let active: Vec<usize> = (0..slots.len()).filter(|i| credits[*i] > 0).collect();
    let total_weight: i64 = active.iter().map(|i| slots[*i].weight).sum();
    let total = active
        .iter()
        .map(|i| (credits[*i] as i64 * total_weight / slots[*i].weight) as usize)
        .min()
        .unwrap_or(0)
        .min(page);
    for _ in 0..total {
        let pick = (0..slots.len())
            .filter(|i| alloc[*i] < credits[*i])
            .min_by(|a, b| {
                let sa = (slots[*a].dispatched + alloc[*a] as u64) as f64 / slots[*a].weight as f64;
                let sb = (slots[*b].dispatched + alloc[*b] as u64) as f64 / slots[*b].weight as f64;
                sa.total_cmp(&sb)
            });
        match pick {
            Some(i) => alloc[i] += 1,
            None => break,
        }
    }
    alloc
}

async fn tick(myself: &ActorRef<CampaignMsg>, st: &mut CampaignRun) -> Result<(), ActorError> {
    let store = &st.shared.store;
    let mut credits = Vec::with_capacity(st.slots.len());
    let mut reasons = Vec::new();
    let mut wait_for_busy = false;
    for slot in st.slots.iter_mut() {
        let answer = match st.shared.registry.get(slot.channel_id) {
            Some(e) => crate::ask(
                &e.actor,
                ChannelMsg::CampaignCredits,
                Duration::from_secs(2),
            )
            .await
            .ok(),
            None => None,
        };
        match answer {
            Some((0, None)) => {
                // Busy (its window is full): wait for it a few ticks before calling it slow.
                slot.busy_ticks += 1;
                wait_for_busy |= slot.busy_ticks < SLOW_AFTER_TICKS;
                credits.push(0);
            }
            Some((n, None)) => {
                slot.busy_ticks = 0;
                credits.push(n);
            }
            Some((_, Some(code))) => {
                credits.push(0);
                reasons.push(format!("{}: {}", slot.channel_id, code.as_str()));
            }
            None => {
                credits.push(0);
                reasons.push(format!("{}: indisponível", slot.channel_id));
            }
        }
    }
    let stats = store.campaign_stats(st.campaign_id).await?;
    if stats.queued == 0 {
        if stats.sending == 0 {
            store
                .set_campaign_state(st.campaign_id, CampaignState::Completed.as_str(), None)
                .await?;
            tracing::info!("campaign completed");
            st.shared.campaigns.remove(&st.campaign_id);
            myself.stop(None);
        }
        return Ok(());
    }
    if reasons.len() == st.slots.len() {
        // No number can send: pause with the reasons, keep checking for a recovery.
        if !st.paused_by_rules {
            st.paused_by_rules = true;
            let reason = format!("Nenhum número disponível ({})", reasons.join(", "));
            store
                .set_campaign_state(
                    st.campaign_id,
                    CampaignState::Paused.as_str(),
                    Some(&reason),
                )
                .await?;
            tracing::warn!(reason, "campaign paused");
        }
        return Ok(());
    }
    if st.paused_by_rules {
        st.paused_by_rules = false;
        store
            .set_campaign_state(st.campaign_id, CampaignState::Running.as_str(), None)
            .await?;
        tracing::info!("campaign resumed");
    }
    if wait_for_busy {
        return Ok(());
    }
    let alloc = allocate(&st.slots, &credits, PAGE);
    let versions = store.template_channels(st.template.id).await?;
    for (i, n) in alloc.into_iter().enumerate() {
        if n == 0 {
            continue;
        }
        let channel_id = st.slots[i].channel_id;
        let name = versions
            .iter()
            .find(|v| v.channel_id == channel_id && v.status == "approved")
            .map(|v| v.provider_name.clone())
            .unwrap_or_else(|| st.template.provider_name.clone());
        let claimed = store
            .claim_recipients(
                st.account_id,
                st.campaign_id,
                channel_id,
                n as i64,
                &name,
                &st.template.language,
            )
            .await?;
        if claimed.is_empty() {
            break;
        }
        st.slots[i].dispatched += claimed.len() as u64;
        let items = claimed
            .into_iter()
            .map(|c| {
                let vars: BTreeMap<String, String> =
                    serde_json::from_str(&c.vars).unwrap_or_default();
                let (params, button) =
                    engine::library::render(&st.template.body, &st.var_map, &vars)
                        .unwrap_or_default();
                DispatchItem {
                    recipient_id: c.recipient_id,
                    message_id: c.message_id,
                    phone: c.phone,
                    params,
                    button,
                }
            })
            .collect();
        if let Some(e) = st.shared.registry.get(channel_id) {
            let _ = e.actor.cast(ChannelMsg::Dispatch(Box::new(Dispatch {
                template_name: name,
                language: st.template.language.clone(),
                items,
            })));
        }
    }
    Ok(())
}

impl Runtime {
    /// `POST /campaigns/{id}/start`: a draft or paused campaign starts (or resumes)
    /// dispatching.
    pub async fn start_campaign(
        &self,
        account_id: i64,
        id: i64,
    ) -> Result<crate::campaigns::CampaignView, ActorError> {
        let store = &self.shared.store;
        let c = store.campaign(account_id, id).await?;
        let state = CampaignState::parse(&c.state).unwrap_or(CampaignState::Cancelled);
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
        store
            .set_campaign_state(id, CampaignState::Running.as_str(), None)
            .await?;
        self.spawn_campaign(id, account_id).await?;
        self.campaign_view(account_id, id).await
    }

    /// Starts the actor of a running campaign (also at boot).
    pub(crate) async fn spawn_campaign(&self, id: i64, account_id: i64) -> Result<(), ActorError> {
        if self.shared.campaigns.contains_key(&id) {
            return Ok(());
        }
        let (actor, _) = Actor::spawn(
            None,
            CampaignActor,
            CampaignArgs {
                campaign_id: id,
                account_id,
                shared: self.shared.clone(),
            },
        )
        .await
        .map_err(|e| {
            tracing::error!(campaign_id = id, error = %e, "campaign actor did not start");
            ActorError::Unavailable
        })?;
        self.shared.campaigns.insert(id, actor);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_follows_weights_and_credits() {
        let slots = vec![
            Slot {
                channel_id: 1,
                weight: 3,
                dispatched: 0,
                busy_ticks: 0,
            },
            Slot {
                channel_id: 2,
                weight: 1,
                dispatched: 0,
                busy_ticks: 0,
            },
        ];
        assert_eq!(allocate(&slots, &[100, 100], 40), vec![30, 10]);
        assert_eq!(
            allocate(&slots, &[32, 32], 500),
            vec![31, 11],
            "equal windows still give about 3:1 (42 units)"
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
    }
}
