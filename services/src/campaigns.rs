//! A campaign tried without sending (`POST /campaigns` with `dry_run: true`): the audience
//! checked row by row and each number's headroom today.

use crate::Services;
use actors::campaign::{announce_campaign, move_campaign, CampaignMsg};
use actors::campaigns::{
    check_rows, CampaignInput, DryRun, DryRunChannel, RecipientInput, MAX_RECIPIENTS_PER_CALL,
};
use actors::ActorError;
use engine::campaign::CampaignState;

impl Services {
    /// `POST /campaigns` with `dry_run: true` (decision D-033): the campaign's checks (same
    /// errors as [`actors::Runtime::create_campaign`]), the audience's rows checked as
    /// `POST /campaigns/{id}/recipients` would, and today's headroom of each number
    /// (the smaller of its 24 h headroom and what its daily campaign cap leaves). Nothing is
    /// stored and nothing is sent.
    pub async fn dry_run_campaign(
        &self,
        account_id: i64,
        input: CampaignInput,
        rows: Vec<RecipientInput>,
    ) -> Result<DryRun, ActorError> {
        let checked = self.check_campaign(account_id, &input).await?;
        if rows.len() > MAX_RECIPIENTS_PER_CALL {
            return Err(engine::ValidationError::new(
                "invalid_batch",
                "recipients",
                format!("Envie até {MAX_RECIPIENTS_PER_CALL} destinatários por simulação."),
            )
            .into());
        }
        let audience = check_rows(&checked.template.body, &checked.var_map, rows);
        let mut channels = Vec::with_capacity(input.channels.len());
        let mut headroom_today = 0i64;
        for (channel_id, weight) in &input.channels {
            let snapshot = self.snapshot(account_id, *channel_id).await?;
            let guard = self.guardrails(account_id, *channel_id).await?;
            let cap_left = guard.today.remaining(guard.sent_today);
            let blocked = snapshot.health.tone == engine::channel::Tone::Bad;
            let can_take = if blocked {
                0
            } else {
                cap_left.map_or(snapshot.health.available, |c| {
                    c.min(snapshot.health.available)
                })
            };
            headroom_today += can_take;
            channels.push(DryRunChannel {
                channel_id: *channel_id,
                weight: *weight,
                health_code: snapshot.health.code.clone(),
                available_24h: snapshot.health.available,
                cap_remaining_today: cap_left,
                can_take_today: can_take,
            });
        }
        let valid = audience.valid.len() as i64;
        Ok(DryRun {
            dry_run: true,
            valid,
            duplicates: audience.duplicates,
            invalid: audience.invalid,
            channels,
            headroom_today,
            fits_today: valid <= headroom_today,
        })
    }
}

impl Services {
    /// Pauses a running campaign (or one the rules paused) with `reason`: its actor is
    /// halted first, so no send starts after this returns. 409 `invalid_state` otherwise.
    pub async fn pause_campaign(
        &self,
        account_id: i64,
        id: i64,
        reason: &str,
    ) -> Result<(), ActorError> {
        let store = &self.shared().store;
        let c = store.campaign(account_id, id).await?;
        let state = c.state;
        if !matches!(state, CampaignState::Running | CampaignState::Paused) {
            return Err(ActorError::Refused {
                status: 409,
                code: "invalid_state",
                message: format!(
                    "A campanha está {}; só campanhas em andamento podem ser pausadas.",
                    state.as_str()
                ),
                details: serde_json::json!({"state": state.as_str()}),
            });
        }
        self.halt_campaign(id).await?;
        let now = store.campaign(account_id, id).await?.state;
        if matches!(now, CampaignState::Running | CampaignState::Paused) {
            move_campaign(
                self.shared(),
                account_id,
                id,
                CampaignState::Paused,
                Some(reason),
            )
            .await?;
            store.set_campaign_held(id, false).await?;
        }
        tracing::info!(campaign_id = id, "campaign paused by an operator");
        Ok(())
    }

    /// `PATCH /campaigns/{id}`: a new name and/or start time (`Some(None)` unschedules it
    /// back to `draft`) before the campaign starts; 409 `invalid_state` once it started, 422
    /// `campanha_do_painel` to schedule a panel campaign (its approval starts it), 422
    /// `invalid_date` for a time in the past.
    pub async fn edit_campaign(
        &self,
        account_id: i64,
        id: i64,
        name: Option<String>,
        schedule: Option<Option<i64>>,
    ) -> Result<actors::campaigns::CampaignView, ActorError> {
        let store = &self.shared().store;
        let c = store.campaign(account_id, id).await?;
        if let Some(n) = &name {
            if n.trim().is_empty() || n.len() > 200 {
                return Err(engine::ValidationError::new(
                    "invalid_name",
                    "name",
                    "`name` deve ter de 1 a 200 caracteres.",
                )
                .into());
            }
        }
        if let Some(Some(at)) = schedule {
            if at <= self.shared().now_ms() {
                return Err(engine::ValidationError::new(
                    "invalid_date",
                    "scheduled_at",
                    "`scheduled_at` deve estar no futuro.",
                )
                .into());
            }
        }
        if schedule.is_some() && c.origin == "panel" {
            return Err(ActorError::Rejected {
                code: "campanha_do_painel",
                message:
                    "Campanhas do painel começam pela aprovação; não podem ser agendadas aqui."
                        .into(),
                details: serde_json::json!({}),
            });
        }
        let refused = || ActorError::Refused {
            status: 409,
            code: "invalid_state",
            message: "Só campanhas em rascunho ou agendadas podem ser editadas.".into(),
            details: serde_json::json!({"state": c.state}),
        };
        if !matches!(c.state.as_str(), "draft" | "scheduled") {
            return Err(refused());
        }
        if !store
            .edit_campaign(id, name.as_deref().map(str::trim), schedule)
            .await?
        {
            return Err(refused());
        }
        if schedule.is_some() {
            let after = store.campaign(account_id, id).await?;
            if after.state != c.state {
                // Announce the move (the row already holds it).
                let state = after.state;
                let mut before = c.clone();
                before.name = after.name.clone();
                announce_campaign(self.shared(), &before, state, None).await;
            }
        }
        self.campaign_view(account_id, id).await
    }

    /// The account's campaigns, newest first (`GET /campaigns`), paged by id.
    pub async fn list_campaigns(
        &self,
        account_id: i64,
        filter: &storage::campaigns::CampaignFilter,
        before_id: Option<i64>,
        limit: i64,
    ) -> Result<Vec<actors::campaigns::CampaignView>, ActorError> {
        let store = &self.shared().store;
        let mut out = Vec::new();
        for c in store
            .list_campaigns(account_id, filter, before_id, limit)
            .await?
        {
            out.push(self.campaign_view(account_id, c.id).await?);
        }
        Ok(out)
    }

    /// Resumes a paused campaign (409 `disparo_desligado` while the account's switch is off).
    pub async fn resume_campaign(&self, account_id: i64, id: i64) -> Result<(), ActorError> {
        let store = &self.shared().store;
        let c = store.campaign(account_id, id).await?;
        if c.state != CampaignState::Paused {
            return Err(ActorError::Refused {
                status: 409,
                code: "invalid_state",
                message: "Só campanhas pausadas podem ser retomadas.".into(),
                details: serde_json::json!({"state": c.state}),
            });
        }
        self.may_start(&c).await?;
        move_campaign(self.shared(), account_id, id, CampaignState::Running, None).await?;
        store.set_campaign_held(id, false).await?;
        self.spawn_campaign(id, account_id).await
    }

    /// Cancels a campaign that has not finished: its actor is halted, it sends nothing more,
    /// and its unsent recipients become `skipped` (`cancelada`). 409 `invalid_state` when it
    /// already completed or was cancelled.
    pub async fn cancel_campaign(&self, account_id: i64, id: i64) -> Result<u64, ActorError> {
        let store = &self.shared().store;
        let c = store.campaign(account_id, id).await?;
        let state = c.state;
        if !state.can_move_to(CampaignState::Cancelled) {
            return Err(ActorError::Refused {
                status: 409,
                code: "invalid_state",
                message: format!(
                    "A campanha está {}; não pode ser cancelada.",
                    state.as_str()
                ),
                details: serde_json::json!({"state": state.as_str()}),
            });
        }
        self.halt_campaign(id).await?;
        move_campaign(
            self.shared(),
            account_id,
            id,
            CampaignState::Cancelled,
            None,
        )
        .await?;
        store.set_campaign_held(id, false).await?;
        let skipped = store.skip_unsent(id).await?;
        tracing::info!(campaign_id = id, skipped, "campaign cancelled");
        Ok(skipped)
    }

    /// `POST /campaigns/{id}/resend`: the campaign's failed recipients are sent again through
    /// `target_channel_id` only (an official number of the account with the template
    /// approved, else 422 `invalid_channels` / `template_missing` with `missing`). A completed
    /// campaign runs again; returns how many were planned again and the campaign.
    pub async fn resend_campaign(
        &self,
        account_id: i64,
        id: i64,
        target_channel_id: i64,
    ) -> Result<(u64, actors::campaigns::CampaignView), ActorError> {
        let store = &self.shared().store;
        let c = store.campaign(account_id, id).await?;
        let state = c.state;
        if !state.can_resend() {
            return Err(ActorError::Rejected {
                code: "invalid_state",
                message: format!(
                    "A campanha está {}; só campanhas iniciadas podem reenviar falhas.",
                    state.as_str()
                ),
                details: serde_json::json!({"state": state.as_str()}),
            });
        }
        match store.channel(account_id, target_channel_id).await {
            Ok(ch) if ch.official => {}
            Ok(_) | Err(storage::StorageError::NotFound) => {
                return Err(ActorError::Rejected {
                    code: "invalid_channels",
                    message: "O número de destino não é um número oficial desta conta.".into(),
                    details: serde_json::json!({"invalid_channels": [target_channel_id]}),
                })
            }
            Err(e) => return Err(e.into()),
        }
        let versions = store.template_channels(c.template_id).await?;
        let version = versions.iter().find(|v| v.channel_id == target_channel_id);
        if version.is_none_or(|v| v.status != "approved") {
            return Err(ActorError::Rejected {
                code: "template_missing",
                message: "O template da campanha não está aprovado no número de destino; envie-o com POST /templates/{id}/channels.".into(),
                details: serde_json::json!({"missing": [{"channel_id": target_channel_id, "status": version.map(|v| v.status.clone()).unwrap_or_else(|| "not_submitted".into())}]}),
            });
        }
        let resent = store.resend_failed(id, target_channel_id).await?;
        if resent > 0 {
            match self.shared().campaigns.get(&id).map(|a| a.clone()) {
                Some(actor) => {
                    let _ = actor.cast(CampaignMsg::Refresh);
                }
                None => {
                    move_campaign(self.shared(), account_id, id, CampaignState::Running, None)
                        .await?;
                    self.spawn_campaign(id, account_id).await?;
                }
            }
            tracing::info!(
                campaign_id = id,
                resent,
                target_channel_id,
                "failed recipients resent"
            );
        }
        Ok((resent, self.campaign_view(account_id, id).await?))
    }
}
