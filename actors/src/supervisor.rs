//! The supervisor of channel actors: starts one per channel and restarts a channel actor that
//! fails or stops unexpectedly (its `pre_start` rebuilds the state from storage).

use crate::channel::{ChannelActor, ChannelArgs};
use crate::Shared;
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use std::collections::HashMap;
use std::sync::Arc;

/// Messages of the supervisor.
#[derive(Debug)]
pub enum SupervisorMsg {
    /// Starts the actor of a channel (no-op when it runs); replies when it has started.
    Start(i64, RpcReplyPort<Result<(), String>>),
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
