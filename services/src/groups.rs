//! Sending groups as records (D-037): creating, editing, membership, listing, the templates
//! their numbers share, a group campaign. The group's live part (its shared 24 h limit, the
//! choice of a sender, the scheduler) is the group actor's (`actors::group`).

use crate::Services;
use actors::cluster::Control;
use actors::group::{GroupCampaignInput, GroupDetail, GroupInput, GroupMsg};
use actors::protocol::{SendCommand, SendContent};
use actors::{ask, ActorError};
use engine::ids::{AccountId, ChannelId};
use engine::phone::Phone;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::collections::HashSet;
use storage::messages::MessageRecord;
use storage::templates::TemplateRecord;

impl Services {
    /// Checks numbers for a group: official numbers of the account (else 422
    /// `invalid_channels`), in no other group (else 422 `in_other_group`).
    async fn check_members(
        &self,
        account_id: i64,
        group_id: Option<i64>,
        channel_ids: &[i64],
    ) -> Result<(), ActorError> {
        let taken: Vec<Value> = self
            .official_channels(account_id, channel_ids)
            .await?
            .iter()
            .filter(|c| c.group_id.is_some() && c.group_id != group_id)
            .map(|c| json!({"channel_id": c.id, "group_id": c.group_id}))
            .collect();
        if !taken.is_empty() {
            return Err(ActorError::rejected(
                "in_other_group",
                "Há números que já estão em outro grupo; retire-os de lá antes.",
                json!({"in_other_group": taken}),
            ));
        }
        Ok(())
    }

    /// Makes a number's actor re-read its record (its group among the rest).
    async fn reload_channel(&self, channel_id: i64) {
        if let Err(e) = self.notify_channel(channel_id, Control::Reload).await {
            tracing::warn!(channel_id, error = %e, "number not told to read its record again");
        }
    }

    /// Creates a group (decision D-037) with its numbers. Errors: 422 for an empty name, a
    /// limit below 1 or bad numbers; 422 `conflict` for a name in use.
    pub async fn create_group(
        &self,
        account_id: i64,
        input: GroupInput,
    ) -> Result<GroupDetail, ActorError> {
        let name = input.name.trim();
        if name.is_empty() {
            return Err(engine::ValidationError::new(
                "required",
                "name",
                "O campo `name` é obrigatório.",
            )
            .into());
        }
        check_limit(input.limit_24h)?;
        self.check_members(account_id, None, &input.channel_ids)
            .await?;
        let g = self
            .shared()
            .store
            .insert_group(account_id, name, input.limit_24h)
            .await?;
        self.shared()
            .store
            .set_channels_group(&input.channel_ids, Some(g.id))
            .await?;
        let (_, actor) = self.group_actor(account_id, g.id).await?;
        self.reload_group(&actor).await?;
        self.group_detail(account_id, g.id).await
    }

    /// Renames a group and/or changes its limit (`Some(None)`: back to the numbers' sum).
    pub async fn update_group(
        &self,
        account_id: i64,
        group_id: i64,
        name: Option<String>,
        limit_24h: Option<Option<i64>>,
    ) -> Result<GroupDetail, ActorError> {
        let (_, actor) = self.group_actor(account_id, group_id).await?;
        if let Some(n) = &name {
            if n.trim().is_empty() {
                return Err(engine::ValidationError::new(
                    "required",
                    "name",
                    "`name` não pode ser vazio.",
                )
                .into());
            }
        }
        if let Some(l) = limit_24h {
            check_limit(l)?;
        }
        self.shared()
            .store
            .update_group(group_id, name.as_deref().map(str::trim), limit_24h)
            .await?;
        self.reload_group(&actor).await?;
        self.group_detail(account_id, group_id).await
    }

    /// Puts numbers in a group.
    pub async fn add_group_numbers(
        &self,
        account_id: i64,
        group_id: i64,
        channel_ids: &[i64],
    ) -> Result<GroupDetail, ActorError> {
        let (_, actor) = self.group_actor(account_id, group_id).await?;
        self.check_members(account_id, Some(group_id), channel_ids)
            .await?;
        self.shared()
            .store
            .set_channels_group(channel_ids, Some(group_id))
            .await?;
        self.reload_group(&actor).await?;
        self.group_detail(account_id, group_id).await
    }

    /// Takes a number out of a group. Errors: `NotFound` when it is not in it.
    pub async fn remove_group_number(
        &self,
        account_id: i64,
        group_id: i64,
        channel_id: i64,
    ) -> Result<GroupDetail, ActorError> {
        let (_, actor) = self.group_actor(account_id, group_id).await?;
        let c = self
            .shared()
            .store
            .channel(AccountId(account_id), ChannelId(channel_id))
            .await?;
        if c.group_id != Some(group_id) {
            return Err(ActorError::NotFound);
        }
        self.shared()
            .store
            .set_channels_group(&[channel_id], None)
            .await?;
        // The number reloads (it leaves the counter and its health loses the group name).
        self.reload_group(&actor).await?;
        self.reload_channel(channel_id).await;
        self.group_detail(account_id, group_id).await
    }

    /// Deletes a group; its numbers leave it (and go on as single numbers). 409
    /// `grupo_com_campanhas` (`campanhas`: their ids) while a campaign of the group is not over;
    /// finished ones keep their history without the group (D-080).
    pub async fn delete_group(&self, account_id: i64, group_id: i64) -> Result<(), ActorError> {
        let (_, actor) = self.group_actor(account_id, group_id).await?;
        let members = self.shared().store.group_members(group_id).await?;
        let open = self.shared().store.delete_group(group_id).await?;
        if !open.is_empty() {
            return Err(ActorError::Refused {
                status: 409,
                code: "grupo_com_campanhas",
                message: "O grupo tem campanhas em andamento (rascunho, agendada, enviando ou pausada); conclua ou cancele-as antes de removê-lo.".into(),
                details: serde_json::json!({ "campanhas": open }),
            });
        }
        actor.stop(None);
        self.shared().groups.remove(&group_id);
        self.shared().group_counters.remove(&group_id);
        for id in members {
            self.reload_channel(id).await;
        }
        Ok(())
    }

    /// A group's reading, numbers and templates in common.
    pub async fn group_detail(
        &self,
        account_id: i64,
        group_id: i64,
    ) -> Result<GroupDetail, ActorError> {
        let (g, actor) = self.group_actor(account_id, group_id).await?;
        let state = ask(&actor, GroupMsg::State, self.shared().config.call_timeout).await?;
        let mut numbers = Vec::with_capacity(state.members.len());
        for id in &state.members {
            numbers.push(self.snapshot(AccountId(account_id), ChannelId(*id)).await?);
        }
        let templates = self.templates_in_common(account_id, &state.members).await?;
        Ok(GroupDetail {
            state,
            created_at: g.created_at,
            numbers,
            templates,
        })
    }

    /// A keyset page of the account's groups in id order (issue 17): up to `limit` after the id
    /// `after`, each with its numbers and headroom.
    pub async fn groups_page(
        &self,
        account_id: i64,
        after: Option<i64>,
        limit: i64,
    ) -> Result<Vec<GroupDetail>, ActorError> {
        let mut out = Vec::new();
        for g in self
            .shared()
            .store
            .list_groups_page(account_id, after, limit)
            .await?
        {
            out.push(self.group_detail(account_id, g.id).await?);
        }
        Ok(out)
    }

    /// Library templates approved on every one of `members` (none for an empty group).
    async fn templates_in_common(
        &self,
        account_id: i64,
        members: &[i64],
    ) -> Result<Vec<TemplateRecord>, ActorError> {
        if members.is_empty() {
            return Ok(Vec::new());
        }
        let store = &self.shared().store;
        let states = store.account_template_channels(account_id).await?;
        let mut approved: BTreeMap<i64, HashSet<i64>> = BTreeMap::new();
        for s in states
            .iter()
            .filter(|s| s.status == engine::library::TemplateStatus::Approved)
        {
            approved
                .entry(s.template_id)
                .or_default()
                .insert(s.channel_id);
        }
        let mut out = Vec::new();
        for t in store.list_templates(account_id).await? {
            if approved
                .get(&t.id)
                .is_some_and(|on| members.iter().all(|m| on.contains(m)))
            {
                out.push(t);
            }
        }
        Ok(out)
    }

    /// `POST /groups/{id}/campaigns` (D-038): a normal campaign over the group's numbers
    /// (weight 1 each, in the group's order), bounded by the group's 24 h limit; `all` uses
    /// every number together, `sequential` one at a time. With `start` it starts now, or at
    /// `scheduled_at` (state `scheduled`); without, it stays a draft. Errors: 422
    /// `empty_group`, `invalid_mode`, `schedule_needs_start`, and those of campaign creation
    /// (`template_missing` with `missing`…) and of the audience.
    pub async fn create_group_campaign(
        &self,
        account_id: i64,
        group_id: i64,
        input: GroupCampaignInput,
    ) -> Result<
        (
            crate::campaigns::CampaignView,
            Option<crate::campaigns::RecipientsAdded>,
        ),
        ActorError,
    > {
        let state = self.group_with_members(account_id, group_id).await?;
        let mode = engine::campaign::check_group_campaign(
            input.mode.as_deref(),
            input.scheduled_at.is_some(),
            input.start,
            input.recipients.len(),
            crate::campaigns::MAX_RECIPIENTS_PER_CALL,
        )?;
        let view = self
            .create_campaign(
                account_id,
                crate::campaigns::CampaignInput {
                    name: input.name,
                    category: input.category,
                    template_id: input.template_id,
                    var_map: input.var_map,
                    channels: state.members.iter().map(|m| (*m, 1)).collect(),
                    group_id: Some(group_id),
                    mode,
                },
            )
            .await?;
        let added = if input.recipients.is_empty() {
            None
        } else {
            Some(
                self.add_recipients(account_id, view.id, input.recipients)
                    .await?,
            )
        };
        if input.start {
            match input.scheduled_at.filter(|at| *at > self.shared().now_ms()) {
                Some(at) => self.shared().store.schedule_campaign(view.id, at).await?,
                None => {
                    self.start_campaign(account_id, view.id).await?;
                }
            }
        }
        Ok((self.campaign_view(account_id, view.id).await?, added))
    }
}

fn check_limit(limit: Option<i64>) -> Result<(), ActorError> {
    if limit.is_some_and(|l| l < 1) {
        return Err(engine::ValidationError::new(
            "invalid_limit",
            "limit_24h",
            "`limit_24h` deve ser um inteiro positivo (ou null para a soma dos números).",
        )
        .into());
    }
    Ok(())
}

impl Services {
    /// The library template `template_id` of `account_id`, when it is approved on every one of
    /// `members`.
    ///
    /// Errors: `unknown_template` (422), `template_missing` with the numbers it is missing on.
    /// The library id of the template a send names: its `id`, or the library template with
    /// that provider name and language (`pt_BR` by default). Errors: 422 `unknown_template`.
    async fn library_id(
        &self,
        account_id: i64,
        choice: &engine::send::TemplateChoice,
    ) -> Result<i64, ActorError> {
        let (name, language) = match choice {
            engine::send::TemplateChoice::Id(id) => return Ok(*id),
            engine::send::TemplateChoice::Name { name, language } => (
                name,
                language
                    .as_deref()
                    .unwrap_or(actors::protocol::DEFAULT_LANGUAGE),
            ),
        };
        match self
            .shared()
            .store
            .template_by_provider_name(account_id, name, language)
            .await?
        {
            Some(t) => Ok(t.id),
            None => Err(engine::ValidationError::new(
                "unknown_template",
                "template.name",
                format!("A biblioteca desta conta não tem o template `{name}` em {language}."),
            )
            .into()),
        }
    }

    async fn group_template(
        &self,
        account_id: i64,
        template_id: i64,
        members: &[i64],
    ) -> Result<(), ActorError> {
        let store = &self.shared().store;
        let template = match store.template(account_id, template_id).await {
            Ok(t) => t,
            Err(storage::StorageError::NotFound) => {
                return Err(engine::ValidationError::new(
                    "unknown_template",
                    "template.id",
                    "`template.id` não é um template da biblioteca desta conta.",
                )
                .into())
            }
            Err(e) => return Err(e.into()),
        };
        let on = store.template_channels(template.id).await?;
        let missing: Vec<Value> = members
            .iter()
            .filter_map(|m| crate::campaigns::not_approved(&on, *m))
            .collect();
        if !missing.is_empty() {
            return Err(ActorError::rejected(
                "template_missing",
                "O template não está aprovado em todos os números do grupo.",
                json!({"missing": missing}),
            ));
        }
        Ok(())
    }

    /// `POST /groups/{id}/messages`: a library template to `to` through the number of the
    /// group with most headroom now (`idempotency_key` bound to the message as in
    /// [`actors::Runtime::send`]). Errors: 422 `template_missing` with `missing` when the
    /// template is not approved on every number; [`ActorError::GroupExhausted`] (429) when the
    /// group's limit is used up or no number has headroom.
    pub async fn group_send(
        &self,
        account_id: i64,
        group_id: i64,
        to: Phone,
        template: engine::send::TemplateRef,
        idempotency_key: Option<String>,
    ) -> Result<MessageRecord, ActorError> {
        let state = self.group_with_members(account_id, group_id).await?;
        let template_id = self.library_id(account_id, &template.choice).await?;
        self.group_template(account_id, template_id, &state.members)
            .await?;
        let counter = self.shared().group_counter(group_id).await?;
        let now = self.shared().now_ms();
        let exhausted = counter.with(|g| {
            let fits = g.fits(Some(to.as_str()), now);
            (!fits).then(|| g.exhausted(engine::limits::QuotaScope::Group, now))
        });
        match exhausted {
            None => {}
            Some(Some(quota)) => return Err(ActorError::QuotaExhausted(quota)),
            Some(None) => return Err(ActorError::GroupExhausted),
        }
        // The number with most headroom now (unlimited first), among those that can send.
        let mut members = Vec::with_capacity(state.members.len());
        for id in &state.members {
            members.push((
                *id,
                self.snapshot(AccountId(account_id), ChannelId(*id))
                    .await?
                    .health,
            ));
        }
        let channel_id = engine::group::sender(members.iter().map(|(id, h)| (*id, h)))
            .ok_or(ActorError::GroupExhausted)?;
        let cmd = SendCommand {
            to,
            content: SendContent::Library {
                choice: engine::send::TemplateChoice::Id(template_id),
                values: template.values,
            },
            preview_text: None,
            idempotency_key,
            group_limited: true,
            deadline: None,
            span: tracing::Span::none(),
        };
        // The channel admits against the group's limit under its lock: a concurrent group send
        // that took the last slot since the check above makes this one 429 too.
        match self.send(account_id, Some(channel_id), cmd).await {
            Err(ActorError::BusinessInitiatedRefused(
                engine::channel::HealthCode::LimitExhausted,
            )) => Err(ActorError::GroupExhausted),
            other => other,
        }
    }
}
