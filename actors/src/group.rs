//! Sending groups (spec "Sending groups"; decision D-037). A [`GroupActor`] per group holds
//! its members and the shared 24 h counter: the unique business-initiated recipients of all
//! its numbers in the rolling 24 h, against the group's limit (its own, or by default the sum
//! of its numbers' limits). Member `ChannelActor`s record their business-initiated sends in the
//! same counter (a [`LimitPort`] to the engine's [`engine::limits::SharedLimit`], shared like a
//! BM's), so a direct send through a member counts too; the limit is enforced on the group's
//! own routes (429 when exhausted).

use crate::error::ActorError;
use crate::limits::LimitPort;
use crate::protocol::{ChannelMsg, ChannelSnapshot};
use crate::{ask, Runtime, Shared};
use engine::limits::RollingUnique;
use engine::DAY_MS;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::Serialize;
use serde_json::json;
use std::collections::HashSet;
use std::sync::Arc;
use storage::groups::GroupRecord;
use storage::templates::TemplateRecord;

impl Shared {
    /// The counter of a group, built from storage the first time it is needed.
    pub async fn group_counter(&self, group_id: i64) -> Result<LimitPort, ActorError> {
        if let Some(c) = self.group_counters.get(&group_id) {
            return Ok(c.clone());
        }
        let g = self.store.group_unscoped(group_id).await?;
        let mut recipients = RollingUnique::new(DAY_MS);
        self.store
            .group_business_initiated_recipients_since(
                group_id,
                self.now_ms() - DAY_MS,
                |phone, at| recipients.record(phone, at),
            )
            .await?;
        let built = engine::limits::SharedLimit::group(g.name, g.limit_24h, recipients);
        Ok(self
            .group_counters
            .entry(group_id)
            .or_insert_with(|| LimitPort::new(built))
            .clone())
    }
}

/// Messages of a [`GroupActor`].
#[derive(Debug)]
pub enum GroupMsg {
    /// The members and the counter's reading now.
    State(RpcReplyPort<GroupState>),
    /// Re-reads name, limit and members from storage (after a change).
    Reload(RpcReplyPort<Result<GroupState, ActorError>>),
}

/// What a group's actor knows.
#[derive(Debug, Clone, Serialize)]
pub struct GroupState {
    /// Id.
    pub id: i64,
    /// Name.
    pub name: String,
    /// Own limit, when set.
    pub own_limit: Option<i64>,
    /// Limit in effect; `None` = unlimited.
    pub limit_24h: Option<i64>,
    /// Unique business-initiated recipients of its numbers in the last 24 h.
    pub sent_24h: i64,
    /// Headroom now; `None` = unlimited.
    pub available: Option<i64>,
    /// Its numbers.
    pub members: Vec<i64>,
}

/// The actor of one sending group.
pub struct GroupActor;

/// Its state.
pub struct GroupRun {
    id: i64,
    members: Vec<i64>,
    counter: LimitPort,
    shared: Arc<Shared>,
}

impl GroupRun {
    fn state(&self) -> GroupState {
        let now = self.shared.now_ms();
        let (name, own_limit, reading) = self
            .counter
            .with(|c| (c.name.clone(), c.own_limit, c.reading(now)));
        GroupState {
            id: self.id,
            name,
            own_limit,
            limit_24h: reading.limit,
            sent_24h: reading.used,
            available: reading.available,
            members: self.members.clone(),
        }
    }

    /// Reads the group again and makes every number that joined or left reload (so its health
    /// shows the group and its sends count in the right counter).
    async fn reload(&mut self) -> Result<GroupState, ActorError> {
        let store = &self.shared.store;
        let g = store.group_unscoped(self.id).await?;
        let members = store.group_members(self.id).await?;
        self.counter
            .with(|c| c.regroup(g.name, g.limit_24h, &members));
        let before: HashSet<i64> = self.members.iter().copied().collect();
        let after: HashSet<i64> = members.iter().copied().collect();
        for id in before
            .symmetric_difference(&after)
            .chain(after.intersection(&before))
        {
            match self.shared.registry.signer(*id) {
                Some(crate::registry::Signer::Here(e)) => {
                    let _ = ask(
                        &e.actor,
                        ChannelMsg::Reload,
                        self.shared.config.call_timeout,
                    )
                    .await;
                }
                // Cluster mode: the node running it reads its record again.
                Some(crate::registry::Signer::Elsewhere(_)) => {
                    let reload = crate::cluster::Control::Reload;
                    if let Err(e) =
                        crate::cluster::forward_control(&self.shared, *id, &reload).await
                    {
                        tracing::warn!(channel_id = *id, error = %e, "group member not told to reload");
                    }
                }
                None => {}
            }
        }
        self.members = members;
        Ok(self.state())
    }
}

impl Actor for GroupActor {
    type Msg = GroupMsg;
    type State = GroupRun;
    type Arguments = (i64, Arc<Shared>);

    async fn pre_start(
        &self,
        _myself: ActorRef<GroupMsg>,
        (id, shared): (i64, Arc<Shared>),
    ) -> Result<GroupRun, ActorProcessingErr> {
        let counter = shared
            .group_counter(id)
            .await
            .map_err(|e| ActorProcessingErr::from(e.to_string()))?;
        let members = shared
            .store
            .group_members(id)
            .await
            .map_err(|e| ActorProcessingErr::from(e.to_string()))?;
        tracing::info!(group_id = id, "group actor started");
        Ok(GroupRun {
            id,
            members,
            counter,
            shared,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<GroupMsg>,
        msg: GroupMsg,
        st: &mut GroupRun,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            GroupMsg::State(reply) => {
                let _ = reply.send(st.state());
            }
            GroupMsg::Reload(reply) => {
                let span = tracing::info_span!("group", group_id = st.id);
                let _e = span.enter();
                let _ = reply.send(st.reload().await);
            }
        }
        Ok(())
    }
}

/// How often scheduled campaigns are checked (ms).
pub const SCHEDULER_EVERY_MS: u64 = 1000;

/// Starts scheduled campaigns whose `scheduled_at` has come (D-038), every
/// [`SCHEDULER_EVERY_MS`], until the runtime shuts down. Schedules live in storage, so a
/// restart keeps them (one whose time passed while stopped starts at once).
pub(crate) fn spawn_scheduler(rt: Runtime) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(SCHEDULER_EVERY_MS)).await;
            if rt.shared.shutting_down() {
                return;
            }
            let due = match rt
                .shared
                .store
                .due_scheduled_campaigns(rt.shared.now_ms())
                .await
            {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(error = %e, "could not read scheduled campaigns");
                    continue;
                }
            };
            for (id, account_id) in due {
                match rt.launch_campaign(account_id, id).await {
                    Ok(_) => tracing::info!(campaign_id = id, "scheduled campaign started"),
                    // The account's dispatch switch is off: it starts once it is turned on.
                    Err(ActorError::Refused {
                        code: "disparo_desligado",
                        ..
                    }) => {
                        tracing::debug!(campaign_id = id, "scheduled campaign held by the switch")
                    }
                    // Another process's scheduler started it first (the start is a
                    // compare-and-set on `scheduled`, issue 50): it runs there.
                    Err(ActorError::Rejected {
                        code: "invalid_state",
                        ..
                    }) => {
                        tracing::debug!(campaign_id = id, "scheduled campaign started elsewhere")
                    }
                    Err(e) => {
                        tracing::error!(campaign_id = id, error = %e, "scheduled campaign not started")
                    }
                }
            }
        }
    });
}

/// `POST /groups/{id}/campaigns` input.
#[derive(Debug, Clone)]
pub struct GroupCampaignInput {
    /// Name.
    pub name: String,
    /// Category; default the template's.
    pub category: Option<String>,
    /// Library template id (approved on every number of the group).
    pub template_id: i64,
    /// `all` (default) or `sequential`.
    pub mode: Option<String>,
    /// var_map; default the template's.
    pub var_map: Option<engine::library::VarMap>,
    /// Audience (≤ 10,000 rows here; more with `POST /campaigns/{id}/recipients`).
    pub recipients: Vec<engine::audience::RecipientInput>,
    /// When to start (ms); `None`: now (with `start`).
    pub scheduled_at: Option<i64>,
    /// `false`: only create (a draft).
    pub start: bool,
}

/// `POST /groups` input.
#[derive(Debug, Clone)]
pub struct GroupInput {
    /// Name, unique in the account.
    pub name: String,
    /// Own limit; `None`: the sum of the numbers'.
    pub limit_24h: Option<i64>,
    /// Numbers to put in it (official numbers of the account, in no other group).
    pub channel_ids: Vec<i64>,
}

/// A group with its numbers, as `GET /groups/{id}` shows it.
#[derive(Debug, Clone)]
pub struct GroupDetail {
    /// The actor's reading.
    pub state: GroupState,
    /// When it was created (ms).
    pub created_at: i64,
    /// Each number's live state.
    pub numbers: Vec<ChannelSnapshot>,
    /// Library templates approved on every number.
    pub templates: Vec<TemplateRecord>,
}

impl Runtime {
    /// The actor of a group of the account, started on first use. Errors: `NotFound`.
    pub async fn group_actor(
        &self,
        account_id: i64,
        group_id: i64,
    ) -> Result<(GroupRecord, ActorRef<GroupMsg>), ActorError> {
        let g = self.shared.store.group(account_id, group_id).await?;
        if let Some(a) = self.shared.groups.get(&group_id) {
            return Ok((g, a.clone()));
        }
        let (actor, _) = Actor::spawn(None, GroupActor, (group_id, self.shared.clone()))
            .await
            .map_err(|e| {
                tracing::error!(group_id, error = %e, "group actor failed to start");
                ActorError::Unavailable
            })?;
        let actor = self
            .shared
            .groups
            .entry(group_id)
            .or_insert(actor.clone())
            .clone();
        Ok((g, actor))
    }

    /// Makes a running group actor re-read its members (after a number joined it elsewhere).
    pub async fn refresh_group(&self, group_id: i64) {
        if let Some(a) = self.shared.groups.get(&group_id).map(|a| a.clone()) {
            if let Err(e) = self.reload_group(&a).await {
                tracing::warn!(group_id, error = %e, "group reload failed");
            }
        }
    }

    /// Asks a group's actor to re-read its members and limit; answers its new state.
    pub async fn reload_group(&self, actor: &ActorRef<GroupMsg>) -> Result<GroupState, ActorError> {
        ask(actor, GroupMsg::Reload, self.shared.config.call_timeout).await?
    }

    /// The live state of group `group_id` of `account_id`, which must have numbers.
    ///
    /// Errors: `NotFound`, `empty_group` (422).
    pub async fn group_with_members(
        &self,
        account_id: i64,
        group_id: i64,
    ) -> Result<GroupState, ActorError> {
        let (_, actor) = self.group_actor(account_id, group_id).await?;
        let state = ask(&actor, GroupMsg::State, self.shared.config.call_timeout).await?;
        if state.members.is_empty() {
            return Err(ActorError::rejected(
                "empty_group",
                "O grupo não tem números.",
                json!({}),
            ));
        }
        Ok(state)
    }
}
