//! The panel's and the API's actions on one number's actor, wherever it runs: here, or — in
//! cluster mode (issue 52, `CLUSTER.md` "Routing") — on the node that holds its cell, asked
//! over NATS ([`crate::cluster::remote_ask`]). One implementation answers both: the node that
//! runs the number answers a remote ask with [`answer_here`], as it answers its own callers.

use crate::cluster::wire::{AskAnswer, ChannelAsk};
use crate::cluster::{Control, LiveState};
use crate::error::ActorError;
use crate::protocol::{ChannelMsg, ChannelSnapshot};
use crate::Runtime;
use engine::channel::machine::GuardrailView;
use engine::ids::{AccountId, ChannelId};
use ractor::ActorRef;

/// Where a number of the account runs.
#[derive(Debug, Clone)]
pub enum Located {
    /// Its actor runs on this node.
    Here(ChannelId, ActorRef<ChannelMsg>),
    /// Another node runs it (cluster mode); its record is the account's.
    Elsewhere(AccountId, ChannelId),
}

/// What a number's actor answered to a [`ChannelAsk`] on its node.
#[derive(Debug, Clone)]
pub enum Answered {
    /// Guardrails and today's cap.
    Guardrails(GuardrailView),
    /// The live state after a sync or reload.
    Snapshot(Box<ChannelSnapshot>),
    /// The actor stopped.
    Stopped,
}

impl Answered {
    /// The form that travels back to the asking node.
    pub(crate) fn into_wire(self) -> AskAnswer {
        match self {
            Answered::Guardrails(g) => AskAnswer::Guardrails(g),
            Answered::Snapshot(s) => AskAnswer::Live(LiveState::of(*s)),
            Answered::Stopped => AskAnswer::Stopped,
        }
    }
}

/// Puts `ask` to the actor of `channel_id` running here (`actor`). Errors: the actor's
/// (`Unavailable` when it does not answer within the call timeout).
pub(crate) async fn answer_here(
    rt: &Runtime,
    actor: &ActorRef<ChannelMsg>,
    channel_id: i64,
    ask: ChannelAsk,
) -> Result<Answered, ActorError> {
    let timeout = rt.shared.config.call_timeout;
    let answered = match ask {
        ChannelAsk::Guardrails => {
            Answered::Guardrails(crate::ask(actor, ChannelMsg::Guardrails, timeout).await?)
        }
        ChannelAsk::SetGuardrails(g) => Answered::Guardrails(
            crate::ask(actor, |r| ChannelMsg::SetGuardrails(g, r), timeout).await?,
        ),
        ChannelAsk::Authorized(total) => Answered::Guardrails(
            crate::ask(actor, |r| ChannelMsg::Authorized(total, r), timeout).await?,
        ),
        ChannelAsk::Sync => {
            let s = crate::ask(actor, |r| ChannelMsg::Sync(Some(r)), timeout).await??;
            Answered::Snapshot(Box::new(s))
        }
        ChannelAsk::Reload => {
            let s = crate::ask(actor, ChannelMsg::Reload, timeout).await??;
            Answered::Snapshot(Box::new(s))
        }
        ChannelAsk::Stop => {
            rt.stop_channel(channel_id).await;
            Answered::Stopped
        }
    };
    Ok(answered)
}

impl Runtime {
    /// Where the account's number `channel` runs: here, or (cluster mode) on another node —
    /// then its record is read to prove it is the account's and official (a number just
    /// taken by this node is waited for, up to 2 s). Errors: `NotFound` for a number of
    /// another account, an alternative provider's number, or none.
    pub async fn locate(
        &self,
        account: AccountId,
        channel: ChannelId,
    ) -> Result<Located, ActorError> {
        match self.channel_actor(account, channel) {
            Ok(actor) => Ok(Located::Here(channel, actor)),
            Err(ActorError::NotFound) => {
                let Some(cluster) = self.shared.cluster.as_ref() else {
                    return Err(ActorError::NotFound);
                };
                let record = match self.shared.store.channel(account, channel).await {
                    Ok(r) => r,
                    Err(storage::StorageError::NotFound) => return Err(ActorError::NotFound),
                    Err(e) => return Err(e.into()),
                };
                if !record.official {
                    return Err(ActorError::NotFound);
                }
                if cluster
                    .wait_running(&self.shared.registry, channel.get())
                    .await
                {
                    let actor = self.channel_actor(account, channel)?;
                    return Ok(Located::Here(channel, actor));
                }
                Ok(Located::Elsewhere(account, channel))
            }
            Err(e) => Err(e),
        }
    }

    /// Puts `ask` to the located number's actor, here or on its node.
    async fn ask_located(
        &self,
        located: &Located,
        ask: ChannelAsk,
    ) -> Result<Answered, ActorError> {
        match located {
            Located::Here(channel, actor) => answer_here(self, actor, channel.get(), ask).await,
            Located::Elsewhere(account, channel) => {
                match crate::cluster::remote_ask(&self.shared, channel.get(), ask).await? {
                    AskAnswer::Guardrails(g) => Ok(Answered::Guardrails(g)),
                    AskAnswer::Live(live) => {
                        let record = match self.shared.store.channel(*account, *channel).await {
                            Ok(r) => r,
                            Err(storage::StorageError::NotFound) => {
                                return Err(ActorError::NotFound)
                            }
                            Err(e) => return Err(e.into()),
                        };
                        Ok(Answered::Snapshot(Box::new(overlay(record, live))))
                    }
                    AskAnswer::Stopped => Ok(Answered::Stopped),
                    AskAnswer::Failed(e) => Err(e.into()),
                }
            }
        }
    }

    /// A guardrails ask ([`ChannelAsk::Guardrails`], `SetGuardrails`, `Authorized`) to the
    /// located number. Errors: as the actor answers; `Unavailable` when nobody does.
    pub async fn ask_guardrails(
        &self,
        located: &Located,
        ask: ChannelAsk,
    ) -> Result<GuardrailView, ActorError> {
        match self.ask_located(located, ask).await? {
            Answered::Guardrails(g) => Ok(g),
            _ => Err(ActorError::Unavailable),
        }
    }

    /// A sync or a reload ([`ChannelAsk::Sync`], [`ChannelAsk::Reload`]) of the located
    /// number; its live state after it. Errors: as the actor answers (a sync's provider
    /// errors among them); `Unavailable` when nobody does.
    pub async fn ask_snapshot(
        &self,
        located: &Located,
        ask: ChannelAsk,
    ) -> Result<ChannelSnapshot, ActorError> {
        match self.ask_located(located, ask).await? {
            Answered::Snapshot(s) => Ok(*s),
            _ => Err(ActorError::Unavailable),
        }
    }

    /// Stops the account's number `channel` wherever it runs, before its removal; a number
    /// that runs nowhere is left as it is. Errors: `NotFound` for a number of another
    /// account; `Unavailable` when its node does not answer.
    pub async fn retire_channel(
        &self,
        account: AccountId,
        channel: ChannelId,
    ) -> Result<(), ActorError> {
        match self.locate(account, channel).await {
            Ok(located) => self
                .ask_located(&located, ChannelAsk::Stop)
                .await
                .map(|_| ()),
            // Not running (an alternative provider's number, or not started): nothing to stop.
            Err(ActorError::NotFound) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Tells every number of the account's WABA `waba_id` (running here or elsewhere) a
    /// change already stored, as [`Runtime::notify_channel`]; a number whose node does not
    /// take it is logged (its actor reads storage again when it starts).
    pub async fn notify_waba(&self, account_id: i64, waba_id: &str, control: Control) {
        for signer in self.shared.registry.signers_of_waba(account_id, waba_id) {
            if let Err(e) = self.tell(&signer, control.clone()).await {
                tracing::warn!(channel_id = signer.channel_id(), error = %e, "WABA change not told");
            }
        }
    }

    /// Tells the actor of `channel_id` a change already stored (`Control::Reload`,
    /// `Control::PaymentReleased`, `Control::Standing`): here by a message, else (cluster
    /// mode) over NATS to the node that runs it. A number that runs nowhere known is left
    /// alone (its actor reads storage when it starts). Errors: `Unavailable` when its node
    /// did not take it.
    pub async fn notify_channel(
        &self,
        channel_id: i64,
        control: Control,
    ) -> Result<(), ActorError> {
        match self.shared.registry.signer(channel_id) {
            Some(signer) => self.tell(&signer, control).await,
            None => Ok(()),
        }
    }
}

/// A number's stored record with the live fields its node answered.
pub(crate) fn overlay(
    mut record: storage::channels::ChannelRecord,
    live: LiveState,
) -> ChannelSnapshot {
    record.status = live.status;
    record.quality = live.quality;
    record.tier = live.tier;
    record.credential_valid = live.credential_valid;
    record.payment_locked_until = live.payment_locked_until;
    ChannelSnapshot {
        record,
        health: live.health,
    }
}
