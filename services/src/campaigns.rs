//! Campaigns (spec "Campaign, recipient, group", "Campaigns"): creation with the checks of
//! its numbers and template, the audience added in batches (rows checked by
//! [`engine::audience`]), progress, a campaign tried without sending (`dry_run`), and its
//! life after the start (pause, edit, resume, cancel, resend).

use crate::Services;
use actors::campaign::{announce_campaign, move_campaign, CampaignMsg};
use actors::error::stored_json;
use actors::ActorError;
pub use engine::audience::{check_rows, Audience, InvalidRow, RecipientInput};
use engine::campaign::CampaignState;
use engine::ids::{AccountId, CampaignId, ChannelId};
use engine::library::TemplateStatus;
use engine::library::{problems, Draft, VarMap};
use serde::Serialize;
use serde_json::{json, Value};

use storage::campaigns::{CampaignStats, NewCampaign};

/// Most recipients in one `POST /campaigns/{id}/recipients`.
pub const MAX_RECIPIENTS_PER_CALL: usize = 10_000;

/// `POST /campaigns` input.
#[derive(Debug, Clone)]
pub struct CampaignInput {
    /// Name.
    pub name: String,
    /// Category; default the template's.
    pub category: Option<String>,
    /// Library template id.
    pub template_id: i64,
    /// var_map; default the template's.
    pub var_map: Option<VarMap>,
    /// `(channel_id, weight)`.
    pub channels: Vec<(i64, i64)>,
    /// The sending group it is made for (D-038).
    pub group_id: Option<i64>,
    /// `all` (default) or `sequential`.
    pub mode: String,
}

/// What an audience batch did.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RecipientsAdded {
    /// Rows added.
    pub added: u64,
    /// Rows dropped because the phone was already in the campaign (or repeated in the batch).
    pub duplicates: u64,
    /// Rows refused: `{index, phone, reason}`.
    pub invalid: Vec<InvalidRow>,
    /// Recipients in the campaign now.
    pub total: i64,
}

/// A campaign as `GET /campaigns/{id}` shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CampaignView {
    /// Id.
    pub id: i64,
    /// Name.
    pub name: String,
    /// Category.
    pub category: String,
    /// Library template.
    pub template_id: i64,
    /// State (D-029).
    pub state: engine::campaign::CampaignState,
    /// Why it is paused.
    pub pause_reason: Option<String>,
    /// var_map in use.
    #[schema(value_type = BTreeMap<String, engine::library::VarBinding>)]
    pub var_map: Value,
    /// The sending numbers and their weights.
    pub channels: Vec<CampaignChannel>,
    /// Counters.
    pub stats: CampaignStats,
    /// Created (ISO 8601).
    pub created_at: String,
    /// Started.
    pub started_at: Option<String>,
    /// Finished.
    pub finished_at: Option<String>,
    /// The sending group it was made for (D-038).
    pub group_id: Option<i64>,
    /// `all` or `sequential`.
    pub mode: String,
    /// When a scheduled campaign starts (ISO 8601).
    pub scheduled_at: Option<String>,
}

/// A sending number of a campaign and its share (`CampaignView.channels`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CampaignChannel {
    /// The number.
    pub channel_id: i64,
    /// Its weight in the split (1–100).
    pub weight: i64,
}

/// What the checks of a campaign found good.
pub struct CheckedCampaign {
    /// The library template.
    pub template: storage::templates::TemplateRecord,
    /// Its var_map.
    pub var_map: VarMap,
}

/// The outcome of `POST /campaigns` with `dry_run: true`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct DryRun {
    /// Always true: nothing was stored or sent.
    pub dry_run: bool,
    /// Audience rows that would be added.
    pub valid: i64,
    /// Rows dropped as repeated phones.
    pub duplicates: u64,
    /// Rows refused: `{index, phone, reason}`.
    pub invalid: Vec<InvalidRow>,
    /// Each number's headroom today.
    pub channels: Vec<DryRunChannel>,
    /// Sum of `can_take_today` over the numbers (messages).
    pub headroom_today: i64,
    /// Whether the valid audience fits today's headroom.
    pub fits_today: bool,
}

/// A number in a [`DryRun`].
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct DryRunChannel {
    /// Channel id.
    pub channel_id: i64,
    /// Weight in the campaign.
    pub weight: i64,
    /// Its health code now.
    pub health_code: String,
    /// Rolling 24 h headroom (messages).
    pub available_24h: i64,
    /// Campaign sends its daily cap leaves today; null: no cap.
    pub cap_remaining_today: Option<i64>,
    /// Campaign messages it can take today (0 when its health is bad).
    pub can_take_today: i64,
}

/// `{channel_id, status}` when the template (with per-number `states`) is not approved on
/// `channel_id` (`not_submitted` when it was never sent there): an entry of a 422 `missing`.
pub fn not_approved(
    states: &[storage::templates::TemplateChannel],
    channel_id: i64,
) -> Option<Value> {
    let state = states.iter().find(|s| s.channel_id == channel_id);
    state.is_none_or(|s| s.status != TemplateStatus::Approved).then(|| {
        json!({"channel_id": channel_id, "status": state.map_or("not_submitted", |s| s.status.as_str())})
    })
}

impl Services {
    /// `POST /campaigns/{id}/start`: a draft or paused campaign starts (or resumes)
    /// dispatching ([`actors::Runtime::launch_campaign`]); answers its view.
    pub async fn start_campaign(
        &self,
        account_id: i64,
        id: i64,
    ) -> Result<CampaignView, ActorError> {
        self.launch_campaign(account_id, id).await?;
        self.campaign_view(account_id, id).await
    }

    /// The numbers `ids` of the account, in order, when every one is an official number of it;
    /// else 422 `invalid_channels` listing the others.
    pub async fn official_channels(
        &self,
        account_id: i64,
        ids: &[i64],
    ) -> Result<Vec<storage::channels::ChannelRecord>, ActorError> {
        let (mut found, mut invalid) = (Vec::with_capacity(ids.len()), Vec::new());
        for id in ids {
            match self
                .shared()
                .store
                .channel(AccountId(account_id), ChannelId(*id))
                .await
            {
                Ok(c) if c.official => found.push(c),
                Ok(_) | Err(storage::StorageError::NotFound) => invalid.push(*id),
                Err(e) => return Err(e.into()),
            }
        }
        if !invalid.is_empty() {
            return Err(ActorError::rejected(
                "invalid_channels",
                "Há números que não são números oficiais desta conta.",
                json!({"invalid_channels": invalid}),
            ));
        }
        Ok(found)
    }

    /// Creates a campaign (`draft`). Every number must be an official number of the account
    /// (else 422 `invalid_channels`) with the template approved (else 422 `missing`), and the
    /// var_map must fit the template's body (else 422 `problems`).
    pub async fn create_campaign(
        &self,
        account_id: i64,
        input: CampaignInput,
    ) -> Result<CampaignView, ActorError> {
        let checked = self.check_campaign(account_id, &input).await?;
        let rec = self
            .shared()
            .store
            .insert_campaign(&NewCampaign {
                account_id,
                name: input.name.trim().to_string(),
                category: input
                    .category
                    .unwrap_or_else(|| checked.template.category.clone()),
                template_id: checked.template.id,
                var_map: serde_json::to_value(&checked.var_map).unwrap_or(json!({})),
                channels: input.channels,
                group_id: input.group_id,
                mode: input.mode,
            })
            .await?;
        self.campaign_view(account_id, rec.id).await
    }

    /// The checks of [`Services::create_campaign`], storing nothing.
    pub async fn check_campaign(
        &self,
        account_id: i64,
        input: &CampaignInput,
    ) -> Result<CheckedCampaign, ActorError> {
        let store = &self.shared().store;
        engine::campaign::check_numbers(&input.name, &input.channels)?;
        let template = match store.template(account_id, input.template_id).await {
            Ok(t) => t,
            Err(storage::StorageError::NotFound) => {
                return Err(engine::ValidationError::new(
                    "unknown_template",
                    "template_id",
                    "`template_id` não é um template da biblioteca desta conta.",
                )
                .into())
            }
            Err(e) => return Err(e.into()),
        };
        if template.problems.as_array().is_some_and(|p| !p.is_empty()) {
            return Err(ActorError::TemplateHasProblems(template.problems.clone()));
        }
        let var_map: VarMap = match input.var_map.clone() {
            Some(v) => v,
            None => stored_json("var_map do template", &template.var_map)?,
        };
        let draft = Draft {
            provider_name: template.provider_name.clone(),
            category: template.category.clone(),
            language: template.language.clone(),
            body: template.body.clone(),
            header_text: template.header_text.clone(),
            header_media: template
                .header_type
                .as_deref()
                .and_then(engine::template::HeaderMedia::parse),
            header_example: actors::templates::has_header_example(&template),
            footer_text: template.footer_text.clone(),
            buttons: stored_json("botões do template", &template.buttons)?,
            var_map: var_map.clone(),
        };
        let var_problems: Vec<_> = problems(&draft)
            .into_iter()
            .filter(|p| p.code.starts_with("var_map"))
            .collect();
        if !var_problems.is_empty() {
            return Err(ActorError::rejected(
                "invalid_var_map",
                "O var_map não corresponde às variáveis do template.",
                json!({"problems": var_problems}),
            ));
        }
        let states = store.template_channels(template.id).await?;
        let ids: Vec<i64> = input.channels.iter().map(|(id, _)| *id).collect();
        let missing: Vec<Value> = self
            .official_channels(account_id, &ids)
            .await?
            .iter()
            .filter_map(|c| not_approved(&states, c.id))
            .collect();
        if !missing.is_empty() {
            return Err(ActorError::rejected(
                "template_missing",
                "O template não está aprovado em todos os números da campanha; envie-o com POST /templates/{id}/channels.",
                json!({"missing": missing}),
            ));
        }
        Ok(CheckedCampaign { template, var_map })
    }

    /// Adds a batch of recipients (at most 10,000): phones normalised, duplicates (in the batch
    /// or the campaign) dropped, rows whose phone is invalid or whose vars miss a column
    /// without default reported with their index.
    pub async fn add_recipients(
        &self,
        account_id: i64,
        campaign_id: i64,
        rows: Vec<RecipientInput>,
    ) -> Result<RecipientsAdded, ActorError> {
        let store = &self.shared().store;
        let campaign = store
            .campaign(AccountId(account_id), CampaignId(campaign_id))
            .await?;
        if campaign.origin == "panel" {
            // Its contacts go through hygiene and approval in the panel (issue 20).
            return Err(ActorError::rejected(
                "campanha_do_painel",
                "Esta campanha é do painel: seus contatos entram pela higienização e aprovação de /api/campaigns.",
                json!({}),
            ));
        }
        let state = campaign.state;
        if !state.accepts_recipients() {
            return Err(ActorError::rejected(
                "campaign_closed",
                format!(
                    "A campanha está {}; não recebe mais destinatários.",
                    state.as_str()
                ),
                json!({}),
            ));
        }
        if rows.is_empty() || rows.len() > MAX_RECIPIENTS_PER_CALL {
            return Err(engine::ValidationError::new(
                "invalid_batch",
                "recipients",
                format!("Envie de 1 a {MAX_RECIPIENTS_PER_CALL} destinatários por chamada."),
            )
            .into());
        }
        let template = store.template(account_id, campaign.template_id).await?;
        let var_map: VarMap = stored_json("var_map da campanha", &campaign.var_map)?;
        let Audience {
            valid,
            invalid,
            duplicates: batch_dupes,
        } = check_rows(&template.body, &var_map, rows);
        let added = store.add_campaign_recipients(campaign_id, &valid).await?;
        let total = store.campaign_stats(campaign_id).await?.total;
        Ok(RecipientsAdded {
            added,
            duplicates: batch_dupes + (valid.len() as u64 - added),
            invalid,
            total,
        })
    }

    /// A campaign with its counters.
    pub async fn campaign_view(
        &self,
        account_id: i64,
        id: i64,
    ) -> Result<CampaignView, ActorError> {
        let store = &self.shared().store;
        let c = store
            .campaign(AccountId(account_id), CampaignId(id))
            .await?;
        let stats = store.campaign_stats(id).await?;
        Ok(CampaignView {
            id: c.id,
            name: c.name,
            category: c.category,
            template_id: c.template_id,
            state: c.state,
            pause_reason: c.pause_reason,
            var_map: c.var_map,
            channels: c
                .channels
                .iter()
                .map(|(id, w)| CampaignChannel {
                    channel_id: *id,
                    weight: *w,
                })
                .collect(),
            stats,
            created_at: actors::time::iso(c.created_at),
            started_at: c.started_at.map(actors::time::iso),
            finished_at: c.finished_at.map(actors::time::iso),
            group_id: c.group_id,
            mode: c.mode,
            scheduled_at: c.scheduled_at.map(actors::time::iso),
        })
    }
}

impl Services {
    /// `POST /campaigns` with `dry_run: true` (decision D-033): the campaign's checks (same
    /// errors as [`Services::create_campaign`]), the audience's rows checked as
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
            let snapshot = self
                .snapshot(AccountId(account_id), ChannelId(*channel_id))
                .await?;
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
        let c = store
            .campaign(AccountId(account_id), CampaignId(id))
            .await?;
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
        let now = store
            .campaign(AccountId(account_id), CampaignId(id))
            .await?
            .state;
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
    ) -> Result<crate::campaigns::CampaignView, ActorError> {
        let store = &self.shared().store;
        let c = store
            .campaign(AccountId(account_id), CampaignId(id))
            .await?;
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
            let after = store
                .campaign(AccountId(account_id), CampaignId(id))
                .await?;
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
    ) -> Result<Vec<crate::campaigns::CampaignView>, ActorError> {
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
        let c = store
            .campaign(AccountId(account_id), CampaignId(id))
            .await?;
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
        let c = store
            .campaign(AccountId(account_id), CampaignId(id))
            .await?;
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
    ) -> Result<(u64, crate::campaigns::CampaignView), ActorError> {
        let store = &self.shared().store;
        let c = store
            .campaign(AccountId(account_id), CampaignId(id))
            .await?;
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
        match store
            .channel(AccountId(account_id), ChannelId(target_channel_id))
            .await
        {
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
        if version.is_none_or(|v| v.status != TemplateStatus::Approved) {
            return Err(ActorError::Rejected {
                code: "template_missing",
                message: "O template da campanha não está aprovado no número de destino; envie-o com POST /templates/{id}/channels.".into(),
                details: serde_json::json!({"missing": [{"channel_id": target_channel_id, "status": version.map_or("not_submitted", |v| v.status.as_str())}]}),
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
