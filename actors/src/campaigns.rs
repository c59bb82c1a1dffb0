//! Campaigns (spec "Campaign, recipient, group", "Campaigns"): creation with the checks of
//! its numbers and template, the audience added in batches, and progress.

use crate::error::ActorError;
use crate::Runtime;
use engine::library::{problems, Draft, VarMap};
use engine::phone::Phone;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
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

/// A recipient of `POST /campaigns/{id}/recipients`: `phone` with country code, `vars` the
/// audience columns.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecipientInput {
    /// Phone with country code (formatting allowed).
    pub phone: String,
    /// Audience columns.
    #[serde(default)]
    pub vars: BTreeMap<String, String>,
}

/// An audience row refused (`RecipientsAdded.invalid`, `DryRun.invalid`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct InvalidRow {
    /// Its position in the batch (from 0).
    pub index: usize,
    /// The phone as sent.
    pub phone: String,
    /// Why (pt-BR).
    pub reason: String,
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

/// Audience rows after their checks.
pub struct Audience {
    /// `(phone digits, vars as JSON)`.
    pub valid: Vec<(String, String)>,
    /// Rows refused, with why.
    pub invalid: Vec<InvalidRow>,
    /// Repeated phones dropped.
    pub duplicates: u64,
}

/// Checks audience rows: phone normalised, vars against the var_map's columns, repeated phones
/// dropped.
pub fn check_rows(body: &str, var_map: &VarMap, rows: Vec<RecipientInput>) -> Audience {
    let mut invalid = Vec::new();
    let mut duplicates = 0u64;
    let mut seen = HashSet::new();
    let mut valid = Vec::with_capacity(rows.len());
    for (index, row) in rows.into_iter().enumerate() {
        let phone = match Phone::parse("phone", &row.phone) {
            Ok(p) => p,
            Err(e) => {
                invalid.push(InvalidRow {
                    index,
                    phone: row.phone,
                    reason: e.message,
                });
                continue;
            }
        };
        if let Err(missing) = engine::library::render(body, var_map, &row.vars) {
            invalid.push(InvalidRow {
                index,
                phone: row.phone,
                reason: format!("Faltam valores para: {}.", missing.join(", ")),
            });
            continue;
        }
        if !seen.insert(phone.as_str().to_string()) {
            duplicates += 1;
            continue;
        }
        valid.push((
            phone.as_str().to_string(),
            serde_json::to_string(&row.vars).unwrap_or_else(|_| "{}".into()),
        ));
    }
    Audience {
        valid,
        invalid,
        duplicates,
    }
}

/// `{channel_id, status}` when the template (with per-number `states`) is not approved on
/// `channel_id` (`not_submitted` when it was never sent there): an entry of a 422 `missing`.
pub fn not_approved(
    states: &[storage::templates::TemplateChannel],
    channel_id: i64,
) -> Option<Value> {
    let state = states.iter().find(|s| s.channel_id == channel_id);
    state.is_none_or(|s| s.status != "approved").then(|| {
        json!({"channel_id": channel_id, "status": state.map(|s| s.status.clone()).unwrap_or_else(|| "not_submitted".into())})
    })
}

fn rejected(code: &'static str, message: impl Into<String>, details: Value) -> ActorError {
    ActorError::Rejected {
        code,
        message: message.into(),
        details,
    }
}

impl Runtime {
    /// The numbers `ids` of the account, in order, when every one is an official number of it;
    /// else 422 `invalid_channels` listing the others.
    pub async fn official_channels(
        &self,
        account_id: i64,
        ids: &[i64],
    ) -> Result<Vec<storage::channels::ChannelRecord>, ActorError> {
        let (mut found, mut invalid) = (Vec::with_capacity(ids.len()), Vec::new());
        for id in ids {
            match self.shared.store.channel(account_id, *id).await {
                Ok(c) if c.official => found.push(c),
                Ok(_) | Err(storage::StorageError::NotFound) => invalid.push(*id),
                Err(e) => return Err(e.into()),
            }
        }
        if !invalid.is_empty() {
            return Err(rejected(
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
            .shared
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

    /// The checks of [`Runtime::create_campaign`], storing nothing.
    pub async fn check_campaign(
        &self,
        account_id: i64,
        input: &CampaignInput,
    ) -> Result<CheckedCampaign, ActorError> {
        let store = &self.shared.store;
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
            None => crate::error::stored_json("var_map do template", &template.var_map)?,
        };
        let draft = Draft {
            provider_name: template.provider_name.clone(),
            category: template.category.clone(),
            language: template.language.clone(),
            body: template.body.clone(),
            header_text: template.header_text.clone(),
            footer_text: template.footer_text.clone(),
            buttons: crate::error::stored_json("botões do template", &template.buttons)?,
            var_map: var_map.clone(),
        };
        let var_problems: Vec<_> = problems(&draft)
            .into_iter()
            .filter(|p| p.code.starts_with("var_map"))
            .collect();
        if !var_problems.is_empty() {
            return Err(rejected(
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
            return Err(rejected(
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
        let store = &self.shared.store;
        let campaign = store.campaign(account_id, campaign_id).await?;
        if campaign.origin == "panel" {
            // Its contacts go through hygiene and approval in the panel (issue 20).
            return Err(rejected(
                "campanha_do_painel",
                "Esta campanha é do painel: seus contatos entram pela higienização e aprovação de /api/campaigns.",
                json!({}),
            ));
        }
        let state = campaign.state;
        if !state.accepts_recipients() {
            return Err(rejected(
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
        let var_map: VarMap = crate::error::stored_json("var_map da campanha", &campaign.var_map)?;
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
        let store = &self.shared.store;
        let c = store.campaign(account_id, id).await?;
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
            created_at: crate::time::iso(c.created_at),
            started_at: c.started_at.map(crate::time::iso),
            finished_at: c.finished_at.map(crate::time::iso),
            group_id: c.group_id,
            mode: c.mode,
            scheduled_at: c.scheduled_at.map(crate::time::iso),
        })
    }
}
