//! The supervisor of channel actors: starts one per channel and restarts a channel actor that
//! fails or stops unexpectedly (its `pre_start` rebuilds the state from storage).

use crate::channel::{ChannelActor, ChannelArgs};
pub use crate::protocol::CampaignSupervisorMsg;
use crate::Shared;
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use std::collections::HashMap;
use std::sync::Arc;

/// Messages of the supervisor.
#[derive(Debug)]
pub enum SupervisorMsg {
    /// Starts the actor of a channel (no-op when it runs); replies when it has started.
    Start(i64, RpcReplyPort<Result<(), String>>),
    /// Stops the actor of a channel for good (the number was removed); replies when asked to
    /// stop. It is not restarted.
    Stop(i64, RpcReplyPort<()>),
}

/// The supervisor actor.
pub struct ChannelSupervisor;

/// Its state: which child runs which channel.
pub struct SupervisorState {
    children: HashMap<ActorId, i64>,
    shared: Arc<Shared>,
}

async fn spawn_child(
    myself: &ActorRef<SupervisorMsg>,
    st: &mut SupervisorState,
    channel_id: i64,
) -> Result<(), String> {
    let args = ChannelArgs {
        channel_id,
        shared: st.shared.clone(),
    };
    match Actor::spawn_linked(None, ChannelActor, args, myself.get_cell()).await {
        Ok((actor, _)) => {
            st.children.insert(actor.get_id(), channel_id);
            Ok(())
        }
        Err(e) => {
            tracing::error!(channel_id, error = %e, "channel actor failed to start");
            Err(e.to_string())
        }
    }
}

impl Actor for ChannelSupervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = Arc<Shared>;

    async fn pre_start(
        &self,
        _myself: ActorRef<SupervisorMsg>,
        shared: Arc<Shared>,
    ) -> Result<SupervisorState, ActorProcessingErr> {
        Ok(SupervisorState {
            children: HashMap::new(),
            shared,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<SupervisorMsg>,
        msg: SupervisorMsg,
        st: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SupervisorMsg::Start(channel_id, reply) => {
                let running = st.children.values().any(|c| *c == channel_id);
                let res = if running {
                    Ok(())
                } else {
                    spawn_child(&myself, st, channel_id).await
                };
                let _ = reply.send(res);
            }
            SupervisorMsg::Stop(channel_id, reply) => {
                let ids: Vec<ActorId> = st
                    .children
                    .iter()
                    .filter(|(_, c)| **c == channel_id)
                    .map(|(id, _)| *id)
                    .collect();
                for id in ids {
                    st.children.remove(&id);
                }
                if let Some(e) = st.shared.registry.remove(channel_id) {
                    e.actor.stop(Some("número removido".into()));
                }
                let _ = reply.send(());
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<SupervisorMsg>,
        evt: SupervisionEvent,
        st: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, why) = match evt {
            SupervisionEvent::ActorFailed(cell, err) => (cell, format!("failed: {err}")),
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                (cell, format!("stopped: {}", reason.unwrap_or_default()))
            }
            _ => return Ok(()),
        };
        if let Some(channel_id) = st.children.remove(&cell.get_id()) {
            if st.shared.shutting_down() {
                return Ok(());
            }
            tracing::warn!(channel_id, why, "channel actor ended; restarting it");
            metrics::counter!("disparo_channel_actor_restarts_total").increment(1);
            let _ = spawn_child(&myself, st, channel_id).await;
        }
        Ok(())
    }
}

/// Restarts a campaign's actor may take within [`CAMPAIGN_RESTART_WINDOW`] before the campaign
/// is paused with the failure as its reason instead (issue 15).
pub const CAMPAIGN_RESTART_BUDGET: usize = 5;

/// The window of [`CAMPAIGN_RESTART_BUDGET`].
pub const CAMPAIGN_RESTART_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

/// The supervisor of campaign actors: a campaign actor that fails (an error in a handler, a
/// panic) or stops without having finished is started again from storage (its `pre_start`
/// marks the recipients it had claimed in doubt, D-032, so none is sent twice); past
/// [`CAMPAIGN_RESTART_BUDGET`] restarts in [`CAMPAIGN_RESTART_WINDOW`] the campaign is paused
/// with the failure as its `pause_reason` (`POST /campaigns/{id}/start` resumes it).
pub struct CampaignSupervisor;

/// Its state.
pub struct CampaignSupervisorState {
    /// Which child runs which campaign `(campaign_id, account_id)`.
    children: HashMap<ActorId, (i64, i64)>,
    /// Recent restarts per campaign.
    restarts: HashMap<i64, Vec<std::time::Instant>>,
    shared: Arc<Shared>,
}

async fn spawn_campaign_child(
    myself: &ActorRef<CampaignSupervisorMsg>,
    st: &mut CampaignSupervisorState,
    campaign_id: i64,
    account_id: i64,
) -> Result<(), String> {
    let args = crate::campaign::CampaignArgs {
        campaign_id,
        account_id,
        shared: st.shared.clone(),
    };
    match Actor::spawn_linked(
        None,
        crate::campaign::CampaignActor,
        args,
        myself.get_cell(),
    )
    .await
    {
        Ok((actor, _)) => {
            st.children
                .insert(actor.get_id(), (campaign_id, account_id));
            st.shared.campaigns.insert(campaign_id, actor);
            Ok(())
        }
        Err(e) => {
            tracing::error!(campaign_id, error = %e, "campaign actor failed to start");
            Err(e.to_string())
        }
    }
}

impl Actor for CampaignSupervisor {
    type Msg = CampaignSupervisorMsg;
    type State = CampaignSupervisorState;
    type Arguments = Arc<Shared>;

    async fn pre_start(
        &self,
        _myself: ActorRef<CampaignSupervisorMsg>,
        shared: Arc<Shared>,
    ) -> Result<CampaignSupervisorState, ActorProcessingErr> {
        Ok(CampaignSupervisorState {
            children: HashMap::new(),
            restarts: HashMap::new(),
            shared,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<CampaignSupervisorMsg>,
        msg: CampaignSupervisorMsg,
        st: &mut CampaignSupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            CampaignSupervisorMsg::Start(campaign_id, account_id, reply) => {
                let running = st.children.values().any(|(c, _)| *c == campaign_id);
                let res = if running {
                    Ok(())
                } else {
                    spawn_campaign_child(&myself, st, campaign_id, account_id).await
                };
                let _ = reply.send(res);
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<CampaignSupervisorMsg>,
        evt: SupervisionEvent,
        st: &mut CampaignSupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, why) = match evt {
            SupervisionEvent::ActorFailed(cell, err) => (cell, format!("falhou: {err}")),
            SupervisionEvent::ActorTerminated(cell, _, reason) => (
                cell,
                format!("parou: {}", reason.unwrap_or_else(|| "sem motivo".into())),
            ),
            _ => return Ok(()),
        };
        let Some((campaign_id, account_id)) = st.children.remove(&cell.get_id()) else {
            return Ok(());
        };
        // A campaign that finished removed itself from the running set before stopping.
        let finished = st
            .shared
            .campaigns
            .get(&campaign_id)
            .is_none_or(|a| a.get_id() != cell.get_id());
        if finished || st.shared.shutting_down() {
            return Ok(());
        }
        st.shared.campaigns.remove(&campaign_id);
        let now = st.shared.config.clock.instant();
        let recent = st.restarts.entry(campaign_id).or_default();
        recent.retain(|t| now.duration_since(*t) < CAMPAIGN_RESTART_WINDOW);
        if recent.len() >= CAMPAIGN_RESTART_BUDGET {
            st.restarts.remove(&campaign_id);
            let reason = format!(
                "falha_interna: o processo da campanha {why} ({CAMPAIGN_RESTART_BUDGET} vezes em {} s); retome com POST /campaigns/{campaign_id}/start",
                CAMPAIGN_RESTART_WINDOW.as_secs()
            );
            tracing::error!(
                campaign_id,
                why,
                "campaign actor out of restarts; campaign paused"
            );
            metrics::counter!("disparo_campaign_actor_gave_up_total").increment(1);
            if let Err(e) = crate::campaign::move_campaign(
                &st.shared,
                account_id,
                campaign_id,
                engine::campaign::CampaignState::Paused,
                Some(&reason),
            )
            .await
            {
                tracing::error!(campaign_id, error = %e, "could not pause a failing campaign");
            }
            return Ok(());
        }
        recent.push(now);
        tracing::warn!(
            campaign_id,
            why,
            "campaign actor ended before its campaign; restarting it"
        );
        metrics::counter!("disparo_campaign_actor_restarts_total").increment(1);
        let _ = spawn_campaign_child(&myself, st, campaign_id, account_id).await;
        Ok(())
    }
}
