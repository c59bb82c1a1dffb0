//! Panel campaigns (spec `panel-api.md` "Campaign" rows; issue 20, decision D-062): created
//! with contacts, checked by the contact-hygiene service, validated, approved by someone other
//! than their maker (unless an Admin), and dispatched through the same `CampaignActor` as the
//! account API's campaigns, over the valid contacts up to the campaign's volume. The account's
//! dispatch switch (`DISPARO_ENABLED`, `PUT /api/settings/dispatch`) holds approved campaigns
//! and halts running ones.

use crate::Services;
use actors::switch::{refused, stage_of, state_of};
use actors::ActorError;
use engine::campaign::CampaignState;
use engine::ids::{AccountId, CampaignId};
use engine::panel::{Role, Scope};
use engine::panel_campaign::{may_approve, ApprovalRefusal, Contact, PanelStatus, Stage};
use engine::phone::Phone;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashSet};
use storage::campaigns::{CampaignRecord, CampaignStats, NewCampaign};
use storage::panel_campaigns::{HygieneCounts, NewContact, NewPanelCampaign, Verdict};

/// Who acts on a panel campaign.
#[derive(Debug, Clone)]
pub struct PanelActor {
    /// The user.
    pub user_id: i64,
    /// Its role.
    pub role: Role,
    /// What it may see.
    pub scope: Scope,
    /// `Nome <email> (painel)` for pause reasons.
    pub author: String,
}

/// `POST /api/campaigns` (the spec's "Campaign create" fields).
#[derive(Debug, Clone)]
pub struct PanelCampaignInput {
    /// `nome`.
    pub name: String,
    /// `template_id` (a library template of the account).
    pub template_id: i64,
    /// `volume`: at most this many contacts are sent (default: every valid contact).
    pub volume: Option<i64>,
    /// `numeros[]`: sending numbers (channel ids).
    pub channels: Vec<i64>,
    /// `contatos[]`.
    pub contacts: Vec<Contact>,
    /// `variaveis[]`: the column that fills each template variable, in order.
    pub variables: Vec<String>,
    /// `imagem_url`: header image.
    pub image_url: Option<String>,
    /// `botao_variavel`: the URL button's suffix, or the column that fills it.
    pub button_var: Option<String>,
    /// Blank rows the CSV import skipped (0 for a JSON body).
    pub blank_rows: i64,
}

/// What a campaign's CSV import dropped (`descartados`).
#[derive(Debug, Clone, Copy, Serialize, utoipa::ToSchema)]
pub struct DroppedRows {
    /// Rows whose number repeated an earlier row's (the first one stays).
    #[serde(rename = "duplicados")]
    pub duplicates: i64,
    /// Blank rows.
    #[serde(rename = "em_branco")]
    pub blank: i64,
}

/// The hygiene part of a [`PanelCampaignView`].
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct HygieneView {
    /// The service's job.
    pub job_id: Option<String>,
    /// When it was submitted (ISO 8601).
    #[serde(rename = "enviado_em")]
    pub submitted_at: Option<String>,
    /// Why it failed.
    #[serde(rename = "erro")]
    pub error: Option<String>,
}

/// One contact's message as the campaign sends it (`GET /api/campaigns/{id}/preview`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ContactPreview {
    /// The contact's number (digits, as stored).
    #[serde(rename = "numero")]
    pub phone: String,
    /// Its name, when the CSV had one.
    #[serde(rename = "nome")]
    pub name: Option<String>,
    /// The body with this contact's values; `None` when a variable has no value (`faltam`).
    #[serde(rename = "texto")]
    pub text: Option<String>,
    /// The text header with its value, when the template has one.
    #[serde(rename = "cabecalho")]
    pub header: Option<String>,
    /// The campaign's header image (URL), for an image-header template.
    #[serde(rename = "imagem")]
    pub image_url: Option<String>,
    /// The template's footer.
    #[serde(rename = "rodape")]
    pub footer: Option<String>,
    /// The buttons' labels.
    #[serde(rename = "botoes")]
    pub buttons: Vec<String>,
    /// Columns this contact has no value for (and no default): it would not be sent.
    #[serde(rename = "faltam")]
    pub missing: Vec<String>,
    /// Hygiene result (`valid`, `invalid`, `unknown`; none while being checked).
    #[serde(rename = "higienizacao")]
    pub hygiene: Option<String>,
}

/// A panel campaign as `GET /api/campaigns/{id}` shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct PanelCampaignView {
    /// Id (the same campaign `/api/v1/campaigns/{id}` serves).
    pub id: i64,
    /// Name.
    #[serde(rename = "nome")]
    pub name: String,
    /// The panel's status (D-062).
    pub status: &'static str,
    /// The campaign's engine state (`draft`, `running`, …).
    #[serde(rename = "estado")]
    pub state: String,
    /// Why it is paused.
    #[serde(rename = "motivo_pausa")]
    pub pause_reason: Option<String>,
    /// Library template.
    pub template_id: i64,
    /// Most contacts sent.
    pub volume: Option<i64>,
    /// Sending numbers.
    #[serde(rename = "numeros")]
    pub channels: Vec<i64>,
    /// The var_map built from `variaveis` and `botao_variavel`.
    #[serde(rename = "variaveis")]
    #[schema(value_type = std::collections::BTreeMap<String, engine::library::VarBinding>)]
    pub var_map: Value,
    /// Header image.
    pub imagem_url: Option<String>,
    /// Button column or suffix.
    pub botao_variavel: Option<String>,
    /// The hygiene job.
    #[serde(rename = "higienizacao")]
    pub hygiene: HygieneView,
    /// Contacts by verdict.
    #[serde(rename = "contatos")]
    pub contacts: HygieneCounts,
    /// What the import dropped before storing the contacts.
    #[serde(rename = "descartados")]
    pub dropped: DroppedRows,
    /// Send counters (as `/api/v1`).
    pub stats: CampaignStats,
    /// Held by the dispatch switch.
    #[serde(rename = "retida")]
    pub held: bool,
    /// Creator (user id).
    #[serde(rename = "criado_por")]
    pub created_by: Option<i64>,
    /// Approver (user id).
    #[serde(rename = "aprovado_por")]
    pub approved_by: Option<i64>,
    /// Approved (ISO 8601).
    #[serde(rename = "aprovado_em")]
    pub approved_at: Option<String>,
    /// Created (ISO 8601).
    pub created_at: String,
    /// Started.
    pub started_at: Option<String>,
    /// Finished.
    pub finished_at: Option<String>,
    /// Whether the reader may approve it (`engine::panel_campaign::may_approve`: an Admin
    /// always, an Operador not their own campaign, a Client never), whatever its status; only
    /// on `GET /api/campaigns/{id}`.
    #[serde(rename = "pode_aprovar", skip_serializing_if = "Option::is_none")]
    pub may_approve: Option<bool>,
}

/// The dispatch switch as `GET /api/settings/dispatch` shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct DispatchSetting {
    /// Whether the account's campaigns may dispatch.
    #[serde(rename = "habilitado")]
    pub enabled: bool,
    /// Campaigns held by it now.
    #[serde(rename = "retidas")]
    pub held: Vec<i64>,
}

impl Services {
    /// Creates a panel campaign: the numbers must be official numbers of the account in the
    /// user's scope (else 422 `invalid_channels`) with the template approved on each (422
    /// `template_missing` with `missing`); 1–100,000 contacts, normalised (a malformed one is
    /// kept as invalid), repeated numbers dropped; then the contacts go to the hygiene service
    /// (a failure to submit leaves stage `hygiene_failed` with the reason, resubmittable).
    pub async fn create_panel_campaign(
        &self,
        account_id: i64,
        who: &PanelActor,
        input: PanelCampaignInput,
    ) -> Result<PanelCampaignView, ActorError> {
        let store = &self.shared().store;
        engine::panel_campaign::check_request(
            &input.contacts,
            input.volume,
            input.image_url.as_deref(),
        )?;
        for id in &input.channels {
            match store.scoped_channel(account_id, &who.scope, *id).await {
                Ok(_) => {}
                Err(storage::StorageError::NotFound) => {
                    return Err(refused(
                        422,
                        "invalid_channels",
                        "Há números que não são números oficiais desta conta no seu escopo.",
                        json!({"invalid_channels": [id]}),
                    ))
                }
                Err(e) => return Err(e.into()),
            }
        }
        let mut columns: BTreeSet<String> = ["nome".to_string(), "numero".to_string()].into();
        for c in &input.contacts {
            columns.extend(c.data.keys().map(|k| k.to_lowercase()));
        }
        engine::panel_campaign::check_variables(&input.variables, &columns)?;
        let var_map = engine::panel_campaign::var_map(
            &input.variables,
            input.button_var.as_deref(),
            &columns,
        );
        // The account API's checks (numbers, template, var_map): one implementation.
        let checked = self
            .check_campaign(
                account_id,
                &crate::campaigns::CampaignInput {
                    name: input.name.clone(),
                    category: None,
                    template_id: input.template_id,
                    var_map: Some(var_map.clone()),
                    channels: input.channels.iter().map(|c| (*c, 1)).collect(),
                    group_id: None,
                    mode: "all".into(),
                },
            )
            .await?;
        let (contacts, duplicates) =
            new_contacts(&input.contacts, &checked.template.body, &var_map);
        let (rec, _) = store
            .insert_panel_campaign(
                &NewCampaign {
                    account_id,
                    name: input.name.trim().to_string(),
                    category: checked.template.category.clone(),
                    template_id: checked.template.id,
                    var_map: serde_json::to_value(&var_map).unwrap_or(json!({})),
                    channels: input.channels.iter().map(|c| (*c, 1)).collect(),
                    group_id: None,
                    mode: "all".into(),
                },
                &NewPanelCampaign {
                    volume: input.volume.unwrap_or(contacts.len() as i64),
                    created_by: who.user_id,
                    image_url: input.image_url.clone(),
                    button_var: input.button_var.clone(),
                    import_duplicates: duplicates as i64,
                    import_blank: input.blank_rows,
                },
                &contacts,
            )
            .await?;
        self.submit_hygiene(rec.id).await?;
        self.panel_campaign_view(account_id, &who.scope, rec.id)
            .await
    }

    /// Sends the campaign's unchecked contacts to the hygiene service; records the job, or
    /// stage `hygiene_failed` with the reason. With nothing to check, the campaign moves on
    /// to `pending_approval` at once.
    async fn submit_hygiene(&self, campaign_id: i64) -> Result<(), ActorError> {
        let store = &self.shared().store;
        let numbers = store.unchecked_contacts(campaign_id).await?;
        if numbers.is_empty() {
            store
                .set_hygiene(campaign_id, None, Stage::Hygiene.as_str(), None)
                .await?;
            store.apply_hygiene(campaign_id, &[]).await?;
            return Ok(());
        }
        let Some(client) = &self.shared().hygiene else {
            store
                .set_hygiene(
                    campaign_id,
                    None,
                    Stage::HygieneFailed.as_str(),
                    Some("serviço de higienização não configurado (HYGIENE_URL)"),
                )
                .await?;
            return Ok(());
        };
        let callback = self
            .shared()
            .config
            .hygiene
            .as_ref()
            .and_then(|h| h.callback_url.clone());
        match client.submit(&numbers, callback.as_deref()).await {
            Ok(job) => {
                tracing::info!(
                    campaign_id,
                    contacts = numbers.len(),
                    "hygiene job submitted"
                );
                store
                    .set_hygiene(campaign_id, Some(&job), Stage::Hygiene.as_str(), None)
                    .await?;
            }
            Err(e) => {
                tracing::warn!(campaign_id, error = %e, "hygiene job not submitted");
                store
                    .set_hygiene(
                        campaign_id,
                        None,
                        Stage::HygieneFailed.as_str(),
                        Some(&e.to_string()),
                    )
                    .await?;
            }
        }
        Ok(())
    }

    /// `POST /api/campaigns/{id}/hygiene`: submits the unchecked contacts again (after a
    /// failure or a timeout). 409 `invalid_state` once validated.
    pub async fn resubmit_hygiene(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
    ) -> Result<PanelCampaignView, ActorError> {
        let c = self
            .shared()
            .store
            .scoped_panel_campaign(account_id, scope, id)
            .await?;
        if state_of(&c) != CampaignState::Draft
            || !matches!(stage_of(&c), Some(Stage::Hygiene | Stage::HygieneFailed))
        {
            return Err(refused(
                409,
                "invalid_state",
                "Só campanhas em higienização (ou cuja higienização falhou) podem ser reenviadas ao serviço.",
                json!({"status": self.status_of(&c)}),
            ));
        }
        self.submit_hygiene(id).await?;
        self.panel_campaign_view(account_id, scope, id).await
    }

    /// `POST /api/campaigns/{id}/validate`: reads the hygiene report. Done: the contacts
    /// become valid, invalid or unknown (with reasons) and the campaign waits for approval.
    /// Still running: 409 `higienizacao_em_andamento` with `done`/`total` (past
    /// `HYGIENE_JOB_TIMEOUT_MS` it fails instead). Failed: stage `hygiene_failed` with the
    /// reason and 409 `higienizacao_falhou`. Service unreachable: 503
    /// `higienizacao_indisponivel` (nothing changes).
    pub async fn validate_panel_campaign(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
    ) -> Result<PanelCampaignView, ActorError> {
        let store = &self.shared().store;
        let c = store.scoped_panel_campaign(account_id, scope, id).await?;
        self.awaits_hygiene_report(&c)?;
        let (Some(client), Some(job)) = (&self.shared().hygiene, c.hygiene_job.clone()) else {
            return Err(refused(
                503,
                "higienizacao_indisponivel",
                "O serviço de higienização não está configurado (HYGIENE_URL).",
                json!({}),
            ));
        };
        let progress = client.progress(&job).await.map_err(hygiene_unavailable)?;
        if let Some(failure) = self.unfinished(&c, &progress)? {
            store
                .set_hygiene(id, None, Stage::HygieneFailed.as_str(), Some(&failure))
                .await?;
            return Err(refused(
                409,
                "higienizacao_falhou",
                format!("A higienização falhou: {failure}. Reenvie com POST /api/campaigns/{id}/hygiene."),
                json!({"status": PanelStatus::FalhaHigienizacao.as_str()}),
            ));
        }
        let verdicts = hygiene_verdicts(client, &job).await.map_err(|e| match e {
            Some(e) => hygiene_unavailable(e),
            None => refused(
                409,
                "higienizacao_em_andamento",
                "A higienização ainda não terminou.",
                json!({}),
            ),
        })?;
        store.apply_hygiene(id, &verdicts).await?;
        tracing::info!(
            campaign_id = id,
            rows = verdicts.len(),
            "hygiene report applied"
        );
        self.panel_campaign_view(account_id, scope, id).await
    }

    /// A hygiene job not done yet: `Ok(None)` when it is done; `Ok(Some(reason))` when it
    /// failed or ran past the job timeout (the campaign is then marked failed); 409
    /// `higienizacao_em_andamento` with its progress while it runs.
    fn unfinished(
        &self,
        c: &CampaignRecord,
        progress: &provider::hygiene::JobProgress,
    ) -> Result<Option<String>, ActorError> {
        use provider::hygiene::JobStatus;
        match progress.status {
            JobStatus::Queued | JobStatus::Running => {
                let age = self.shared().now_ms() - c.hygiene_submitted_at.unwrap_or(c.created_at);
                let limit = self.shared().hygiene_job_timeout.as_millis() as i64;
                if age > limit {
                    return Ok(Some(format!(
                        "tempo esgotado ({} s sem terminar)",
                        limit / 1000
                    )));
                }
                Err(refused(
                    409,
                    "higienizacao_em_andamento",
                    format!(
                        "A higienização ainda está em andamento ({} de {}). Tente validar de novo em instantes.",
                        progress.done, progress.total
                    ),
                    json!({"done": progress.done, "total": progress.total}),
                ))
            }
            JobStatus::Failed => Ok(Some(
                progress
                    .error
                    .clone()
                    .unwrap_or_else(|| "o serviço informou falha".into()),
            )),
            JobStatus::Done => Ok(None),
        }
    }

    /// Whether a campaign waits for its hygiene report (a draft at the hygiene stage).
    ///
    /// Errors: 409 `higienizacao_falhou` (resubmit it), 409 `invalid_state` (already
    /// validated).
    fn awaits_hygiene_report(&self, c: &CampaignRecord) -> Result<(), ActorError> {
        let id = c.id;
        match (state_of(c), stage_of(c)) {
            (CampaignState::Draft, Some(Stage::Hygiene)) => {}
            (CampaignState::Draft, Some(Stage::HygieneFailed)) => {
                return Err(refused(
                    409,
                    "higienizacao_falhou",
                    format!(
                        "A higienização falhou: {}. Reenvie com POST /api/campaigns/{id}/hygiene.",
                        c.hygiene_error.clone().unwrap_or_default()
                    ),
                    json!({"status": self.status_of(c)}),
                ))
            }
            _ => {
                return Err(refused(
                    409,
                    "invalid_state",
                    "A campanha já foi validada.",
                    json!({"status": self.status_of(c)}),
                ))
            }
        }
        Ok(())
    }

    /// `POST /api/hygiene/callback`: the service says a job ended. The body must be signed
    /// with `HYGIENE_API_KEY` (`X-Hygiene-Signature`, else [`ActorError::InvalidSignature`]);
    /// the job's campaign is then validated at once, as `POST /api/campaigns/{id}/validate`
    /// would. [`ActorError::NotFound`] when no campaign waits for the job (yet: the service
    /// retries). Returns the campaign validated, if any.
    pub async fn hygiene_callback(
        &self,
        body: &[u8],
        signature: Option<&str>,
    ) -> Result<Option<i64>, ActorError> {
        let Some(settings) = &self.shared().config.hygiene else {
            return Err(ActorError::NotFound);
        };
        let key = settings.api_key.expose();
        if key.is_empty() || !signature.is_some_and(|s| provider::hygiene::verify(key, body, s)) {
            return Err(ActorError::InvalidSignature);
        }
        #[derive(serde::Deserialize)]
        struct Callback {
            job_id: String,
        }
        let cb: Callback = serde_json::from_slice(body)
            .map_err(|_| ActorError::BadPayload("esperado {job_id, status}".into()))?;
        let Some((id, account_id)) = self
            .shared()
            .store
            .campaign_by_hygiene_job(&cb.job_id)
            .await?
        else {
            // No campaign waits for it: a job replaced by a resubmission, or a callback faster
            // than our record of the job (a service may call back before its answer to the
            // job's creation reached us). 404 lets the service retry.
            return Err(ActorError::NotFound);
        };
        match self
            .validate_panel_campaign(account_id, &Scope::Bms(Vec::new()), id)
            .await
        {
            Ok(_) => Ok(Some(id)),
            // Already validated, failed (now recorded) or still running: nothing else to do.
            Err(ActorError::Refused { code, .. }) => {
                tracing::info!(campaign_id = id, code, "hygiene callback: nothing to apply");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// `POST /api/campaigns/{id}/approve`: Admin, or an Operador who did not create it (403
    /// `aprovacao_propria`); only a validated campaign (409 `invalid_state`). Dispatch starts
    /// at once, unless the account's dispatch switch is off: then the campaign is approved and
    /// held (`retida`) until the switch is turned on.
    pub async fn approve_panel_campaign(
        &self,
        account_id: i64,
        who: &PanelActor,
        id: i64,
    ) -> Result<PanelCampaignView, ActorError> {
        let store = &self.shared().store;
        let c = store
            .scoped_panel_campaign(account_id, &who.scope, id)
            .await?;
        match may_approve(who.role, who.user_id, c.created_by) {
            Ok(()) => {}
            Err(ApprovalRefusal::OwnCampaign) => return Err(refused(
                403,
                "aprovacao_propria",
                "Quem criou a campanha não pode aprová-la; peça a outro Operador ou a um Admin.",
                json!({}),
            )),
            Err(ApprovalRefusal::Role) => {
                return Err(refused(
                    403,
                    "papel_insuficiente",
                    "Só Admin e Operador aprovam campanhas.",
                    json!({}),
                ))
            }
        }
        if state_of(&c) == CampaignState::Draft && c.stage == Some(Stage::PendingApproval) {
            // Nothing to send: approving it would only "complete" an empty campaign (issue 47:
            // a wrong column mapping made every contact invalid and it still reached approval).
            let counts = store.hygiene_counts(id).await?;
            if counts.valid == 0 {
                return Err(refused(
                    422,
                    "sem_contatos_validos",
                    "A campanha não tem nenhum contato válido: corrija a lista ou as colunas escolhidas e crie a campanha de novo.",
                    json!({"invalidos": counts.invalid, "desconhecidos": counts.unknown}),
                ));
            }
        }
        let enabled = self.dispatch_enabled(account_id).await?;
        if state_of(&c) != CampaignState::Draft
            || !store.approve_campaign(id, who.user_id, !enabled).await?
        {
            return Err(refused(
                409,
                "invalid_state",
                "Só campanhas validadas, aguardando aprovação, podem ser aprovadas.",
                json!({"status": self.status_of(&c)}),
            ));
        }
        tracing::info!(campaign_id = id, held = !enabled, "panel campaign approved");
        if enabled {
            let c = store
                .campaign(AccountId(account_id), CampaignId(id))
                .await?;
            self.release(account_id, &c).await?;
        }
        self.panel_campaign_view(account_id, &who.scope, id).await
    }

    /// `POST /api/campaigns/{id}/dispatch`: (re)dispatches an approved campaign: releases
    /// valid contacts up to the volume and runs it (a paused or completed campaign runs again
    /// when there is something to send). 409 `disparo_desligado` while the switch is off,
    /// `invalid_state` before approval or after a cancel.
    pub async fn dispatch_panel_campaign(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
    ) -> Result<PanelCampaignView, ActorError> {
        let store = &self.shared().store;
        let c = store.scoped_panel_campaign(account_id, scope, id).await?;
        if stage_of(&c) != Some(Stage::Approved) || state_of(&c) == CampaignState::Cancelled {
            return Err(refused(
                409,
                "invalid_state",
                "Só campanhas aprovadas (e não canceladas) podem ser disparadas.",
                json!({"status": self.status_of(&c)}),
            ));
        }
        if !self.dispatch_enabled(account_id).await? {
            return Err(self.switch_off());
        }
        store.set_campaign_held(id, false).await?;
        self.release(account_id, &c).await?;
        self.panel_campaign_view(account_id, scope, id).await
    }

    /// `PUT /api/campaigns/{id}`: name and volume (a volume below what was already released
    /// is refused: 422 `volume_invalido`), and `status` `pausada` / `em_andamento` /
    /// `cancelada` (pause, resume, cancel).
    pub async fn update_panel_campaign(
        &self,
        account_id: i64,
        who: &PanelActor,
        id: i64,
        name: Option<String>,
        volume: Option<i64>,
        status: Option<String>,
    ) -> Result<PanelCampaignView, ActorError> {
        let store = &self.shared().store;
        let c = store
            .scoped_panel_campaign(account_id, &who.scope, id)
            .await?;
        if let Some(n) = &name {
            if n.trim().is_empty() || n.len() > 200 {
                return Err(engine::ValidationError::new(
                    "invalid_name",
                    "nome",
                    "`nome` deve ter de 1 a 200 caracteres.",
                )
                .into());
            }
        }
        if let Some(v) = volume {
            let released = store.hygiene_counts(id).await?.released;
            if v < 1 || v < released {
                return Err(engine::ValidationError::new(
                    "volume_invalido",
                    "volume",
                    format!("`volume` deve ser ao menos 1 e não menor que os {released} contatos já liberados."),
                )
                .into());
            }
        }
        store
            .update_panel_campaign(id, name.as_deref().map(str::trim), volume)
            .await?;
        match status.as_deref() {
            None => {}
            Some("pausada") => {
                self.pause_campaign(account_id, id, &format!("Pausada por {}", who.author))
                    .await?;
            }
            Some("em_andamento") => {
                if state_of(&c) != CampaignState::Paused {
                    return Err(refused(
                        409,
                        "invalid_state",
                        "Só campanhas pausadas podem ser retomadas.",
                        json!({"status": self.status_of(&c)}),
                    ));
                }
                self.resume_campaign(account_id, id).await?;
            }
            Some("cancelada") => {
                self.cancel_campaign(account_id, id).await?;
            }
            Some(_) => {
                return Err(engine::ValidationError::new(
                    "status_invalido",
                    "status",
                    "`status` deve ser pausada, em_andamento ou cancelada.",
                )
                .into())
            }
        }
        self.panel_campaign_view(account_id, &who.scope, id).await
    }

    /// `DELETE /api/campaigns/{id}`: only before dispatch (422 `campanha_disparada` after).
    pub async fn delete_panel_campaign(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
    ) -> Result<(), ActorError> {
        let store = &self.shared().store;
        store.scoped_panel_campaign(account_id, scope, id).await?;
        match store.delete_undispatched_campaign(id).await {
            Ok(()) => Ok(()),
            Err(storage::StorageError::Conflict(_)) => Err(ActorError::Rejected {
                code: "campanha_disparada",
                message: "A campanha já foi disparada; cancele-a em vez de removê-la.".into(),
                details: json!({}),
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// `POST /api/campaigns/{id}/test-send {destino}`: the campaign's template, filled with its
    /// first contact's columns, sent to `destino` through its first number with the template
    /// approved. Counts in that number's 24 h headroom like any send; not in the campaign.
    /// Issue 46: refused (409 `disparo_desligado`) while the account's dispatch switch is
    /// off; at most [`engine::panel::TEST_SENDS_PER_CAMPAIGN_PER_DAY`] per campaign and
    /// [`engine::panel::TEST_SENDS_PER_USER_PER_DAY`] per user in any 24 h (429
    /// `limite_de_testes`); each destination recorded with its sender and written to the
    /// audit log under `author`.
    pub async fn test_send_panel_campaign(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
        destination: &str,
        sender: (i64, &str),
    ) -> Result<storage::messages::MessageRecord, ActorError> {
        let store = &self.shared().store;
        let c = store.scoped_panel_campaign(account_id, scope, id).await?;
        let to = Phone::parse("destino", destination)?;
        if !self.dispatch_enabled(account_id).await? {
            return Err(self.switch_off());
        }
        let (user_id, author) = sender;
        let reservation = self
            .reserve_test_send(account_id, id, user_id, to.as_str())
            .await?;
        let sent = self.send_test(account_id, &c, to).await;
        let target = format!(
            "/api/campaigns/{id}/test-send destino {}",
            destination.trim()
        );
        let status = if sent.is_ok() { 201 } else { 502 };
        store
            .append_audit(
                account_id,
                author,
                "TESTE campanha → destino",
                &target,
                status,
            )
            .await?;
        let m = sent?;
        store.set_test_send_message(reservation, m.id).await?;
        Ok(m)
    }

    /// Takes one of the campaign's and the user's test sends of the day, or 429.
    async fn reserve_test_send(
        &self,
        account_id: i64,
        campaign_id: i64,
        user_id: i64,
        to: &str,
    ) -> Result<i64, ActorError> {
        use engine::panel::{TEST_SENDS_PER_CAMPAIGN_PER_DAY, TEST_SENDS_PER_USER_PER_DAY};
        let store = &self.shared().store;
        if let Some(id) = store
            .reserve_test_send(
                account_id,
                campaign_id,
                user_id,
                to,
                TEST_SENDS_PER_CAMPAIGN_PER_DAY,
                TEST_SENDS_PER_USER_PER_DAY,
            )
            .await?
        {
            return Ok(id);
        }
        let (of_campaign, _) = store.test_sends_last_day(campaign_id, user_id).await?;
        let (limit, by) = if of_campaign >= TEST_SENDS_PER_CAMPAIGN_PER_DAY {
            (TEST_SENDS_PER_CAMPAIGN_PER_DAY, "campanha")
        } else {
            (TEST_SENDS_PER_USER_PER_DAY, "usuario")
        };
        Err(refused(
            429,
            "limite_de_testes",
            format!("Limite de {limit} envios de teste por {by} em 24 h atingido."),
            json!({"limite": limit, "por": by}),
        ))
    }

    /// One contact's message as the campaign will send it (issue 47 item 10), found by its
    /// number (any format [`Phone::parse`] reads; a malformed stored number as typed): the
    /// template's header and body with the contact's values, footer and buttons, the
    /// campaign's header image. A contact missing a value gets `faltam` (the columns) and no
    /// text. Errors: 404 outside the scope or for a number not in the campaign.
    pub async fn panel_campaign_preview(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
        number: &str,
    ) -> Result<ContactPreview, ActorError> {
        let store = &self.shared().store;
        let c = store.scoped_panel_campaign(account_id, scope, id).await?;
        let wanted = Phone::parse("numero", number)
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|_| number.trim().to_string());
        let contact = store
            .campaign_contact_by_phone(id, &wanted)
            .await?
            .ok_or(ActorError::NotFound)?;
        let template = store.template(account_id, c.template_id).await?;
        let var_map: engine::library::VarMap =
            actors::error::stored_json("var_map da campanha", &c.var_map)?;
        let row: std::collections::BTreeMap<String, String> =
            serde_json::from_value(contact.data.clone()).unwrap_or_default();
        let rendered = engine::library::render(&template.body, &var_map, &row);
        let buttons: Vec<engine::library::Button> =
            serde_json::from_value(template.buttons.clone()).unwrap_or_default();
        let mut preview = ContactPreview {
            phone: contact.phone,
            name: contact.name,
            text: None,
            header: None,
            image_url: c.image_url.clone(),
            footer: template.footer_text.clone(),
            buttons: buttons.into_iter().map(|b| b.text).collect(),
            missing: Vec::new(),
            hygiene: contact.hygiene,
        };
        match rendered {
            Ok(given) => {
                let header_value: Vec<String> = given.header_text.iter().cloned().collect();
                preview.header = template
                    .header_text
                    .as_deref()
                    .map(|h| engine::template::fill_text(h, &header_value));
                preview.text = Some(engine::template::fill_text(&template.body, &given.body));
            }
            Err(missing) => preview.missing = missing,
        }
        Ok(preview)
    }

    /// The test message itself: the template filled with the first contact's columns.
    async fn send_test(
        &self,
        account_id: i64,
        c: &CampaignRecord,
        to: Phone,
    ) -> Result<storage::messages::MessageRecord, ActorError> {
        let store = &self.shared().store;
        let id = c.id;
        let template = store.template(account_id, c.template_id).await?;
        let states = store.template_channels(template.id).await?;
        let channel_id = c
            .channels
            .iter()
            .map(|(id, _)| *id)
            .find(|ch| crate::campaigns::not_approved(&states, *ch).is_none())
            .ok_or_else(|| ActorError::Rejected {
                code: "template_missing",
                message: "O template não está aprovado em nenhum número da campanha.".into(),
                details: json!({}),
            })?;
        let first = store.campaign_contacts(id, None, None, 1).await?;
        let row: std::collections::BTreeMap<String, String> = first
            .first()
            .and_then(|f| serde_json::from_value(f.data.clone()).ok())
            .unwrap_or_default();
        let var_map: engine::library::VarMap =
            actors::error::stored_json("var_map da campanha", &c.var_map)?;
        let mut given =
            engine::library::render(&template.body, &var_map, &row).map_err(|missing| {
                ActorError::Rejected {
                    code: "variaveis_ausentes",
                    message: format!("O primeiro contato não preenche: {}.", missing.join(", ")),
                    details: json!({"missing": missing}),
                }
            })?;
        let preview = engine::template::fill_text(&template.body, &given.body);
        given.header_media = c
            .image_url
            .clone()
            .map(|link| engine::template::GivenMedia {
                kind: engine::template::HeaderMedia::Image,
                link: Some(link),
                id: None,
            });
        self.send(
            account_id,
            Some(channel_id),
            actors::protocol::SendCommand {
                to,
                content: actors::protocol::SendContent::Template {
                    name: template.provider_name.clone(),
                    language: template.language.clone(),
                    given,
                    layout: Some(std::sync::Arc::new(actors::templates::layout_of(&template))),
                    header_text: template.header_text.clone(),
                },
                preview_text: Some(preview),
                idempotency_key: None,
                group_limited: false,
                deadline: None,
                span: tracing::Span::none(),
            },
        )
        .await
    }

    /// A panel campaign in the user's scope with its counters.
    pub async fn panel_campaign_view(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
    ) -> Result<PanelCampaignView, ActorError> {
        let store = &self.shared().store;
        let c = store.scoped_panel_campaign(account_id, scope, id).await?;
        let stats = store.campaign_stats(id).await?;
        let contacts = store.hygiene_counts(id).await?;
        Ok(self.view_of(c, stats, contacts))
    }

    fn view_of(
        &self,
        c: CampaignRecord,
        stats: CampaignStats,
        contacts: HygieneCounts,
    ) -> PanelCampaignView {
        PanelCampaignView {
            id: c.id,
            status: self.status_of(&c),
            name: c.name,
            state: c.state.as_str().to_string(),
            pause_reason: c.pause_reason,
            template_id: c.template_id,
            volume: c.volume,
            channels: c.channels.iter().map(|(id, _)| *id).collect(),
            var_map: c.var_map,
            imagem_url: c.image_url,
            botao_variavel: c.button_var,
            hygiene: HygieneView {
                job_id: c.hygiene_job,
                submitted_at: c.hygiene_submitted_at.map(actors::time::iso),
                error: c.hygiene_error,
            },
            dropped: DroppedRows {
                duplicates: c.import_duplicates,
                blank: c.import_blank,
            },
            contacts,
            stats,
            held: c.held,
            created_by: c.created_by,
            approved_by: c.approved_by,
            approved_at: c.approved_at.map(actors::time::iso),
            created_at: actors::time::iso(c.created_at),
            started_at: c.started_at.map(actors::time::iso),
            finished_at: c.finished_at.map(actors::time::iso),
            may_approve: None,
        }
    }

    /// [`Services::panel_campaign_view`] as `who` reads it: with whether `who` may approve it
    /// (the rule `approve_panel_campaign` applies, so the panel shows "Aprovar" only to those
    /// it would accept).
    pub async fn panel_campaign_view_as(
        &self,
        account_id: i64,
        who: &PanelActor,
        id: i64,
    ) -> Result<PanelCampaignView, ActorError> {
        let mut view = self.panel_campaign_view(account_id, &who.scope, id).await?;
        view.may_approve = Some(may_approve(who.role, who.user_id, view.created_by).is_ok());
        Ok(view)
    }

    /// `GET /api/campaigns`: the account's panel campaigns in scope, newest first, paged by
    /// id (`before_id`), filtered by engine state.
    pub async fn panel_campaigns(
        &self,
        account_id: i64,
        scope: &Scope,
        state: Option<&str>,
        before_id: Option<i64>,
        limit: i64,
    ) -> Result<Vec<PanelCampaignView>, ActorError> {
        let store = &self.shared().store;
        let list = store
            .panel_campaigns(account_id, scope, state, before_id, limit)
            .await?;
        let mut out = Vec::with_capacity(list.len());
        for c in list {
            let stats = store.campaign_stats(c.id).await?;
            let contacts = store.hygiene_counts(c.id).await?;
            out.push(self.view_of(c, stats, contacts));
        }
        Ok(out)
    }

    /// `GET /api/settings/dispatch`.
    pub async fn dispatch_setting(&self, account_id: i64) -> Result<DispatchSetting, ActorError> {
        Ok(DispatchSetting {
            enabled: self.dispatch_enabled(account_id).await?,
            held: self.shared().store.held_campaigns(account_id).await?,
        })
    }

    /// `PUT /api/settings/dispatch {habilitado}` (Admin): turning it off halts every running
    /// campaign of the account at once (no provider call starts after the answer; they are
    /// paused and held); turning it on releases the held ones (approved ones dispatch, paused
    /// ones resume).
    pub async fn set_dispatch_enabled(
        &self,
        account_id: i64,
        on: bool,
    ) -> Result<DispatchSetting, ActorError> {
        let store = &self.shared().store;
        store.set_dispatch_switch(account_id, on).await?;
        if on {
            self.release_held(account_id).await?;
        } else {
            self.hold_running(account_id).await?;
        }
        self.dispatch_setting(account_id).await
    }
}

/// A panel campaign's contacts as stored rows: each number once (the first row wins), its
/// columns lower-cased with `numero` normalised; a contact whose values lack a template
/// variable, or whose number does not parse, stored invalid with the reason. Also how many
/// rows were dropped as repeats of an earlier number.
fn new_contacts(
    input: &[engine::panel_campaign::Contact],
    body: &str,
    var_map: &engine::library::VarMap,
) -> (Vec<NewContact>, usize) {
    let mut duplicates = 0usize;
    let mut seen = HashSet::new();
    let mut contacts = Vec::with_capacity(input.len());
    for c in input {
        let mut row = c.columns();
        row = row
            .into_iter()
            .map(|(k, v)| (k.to_lowercase(), v))
            .collect();
        match Phone::parse("numero", &c.number) {
            Ok(p) => {
                if !seen.insert(p.as_str().to_string()) {
                    duplicates += 1;
                    continue;
                }
                row.insert("numero".into(), p.as_str().to_string());
                let missing = engine::library::render(body, var_map, &row).err();
                contacts.push(NewContact {
                    phone: p.as_str().to_string(),
                    vars: serde_json::to_string(&row).unwrap_or_else(|_| "{}".into()),
                    name: c.name.clone(),
                    hygiene: missing.as_ref().map(|_| "invalid"),
                    reason: missing.map(|m| format!("faltam valores para: {}", m.join(", "))),
                });
            }
            Err(_) => {
                let raw: String = c.number.trim().chars().take(64).collect();
                if !seen.insert(raw.clone()) {
                    duplicates += 1;
                    continue;
                }
                contacts.push(NewContact {
                    phone: raw,
                    vars: serde_json::to_string(&row).unwrap_or_else(|_| "{}".into()),
                    name: c.name.clone(),
                    hygiene: Some("invalid"),
                    reason: Some("formato_invalido".into()),
                });
            }
        }
    }
    (contacts, duplicates)
}

/// The hygiene service's verdicts of a finished job: `(input, status, reason, wa_id)` per row.
///
/// Errors: `None` when the report is not ready yet, else the service's error.
async fn hygiene_verdicts(
    client: &provider::hygiene::HygieneClient,
    job: &str,
) -> Result<Vec<Verdict>, Option<provider::hygiene::HygieneError>> {
    let rows = client.results(job).await.map_err(|e| match e {
        provider::hygiene::HygieneError::NotReady => None,
        e => Some(e),
    })?;
    Ok(rows
        .into_iter()
        .map(|r| (r.input, r.status.as_str(), r.reason, r.wa_id))
        .collect())
}

/// The refusal when the hygiene service cannot be read (503, retryable).
fn hygiene_unavailable(e: provider::hygiene::HygieneError) -> ActorError {
    refused(
        503,
        "higienizacao_indisponivel",
        format!("Não foi possível ler o relatório de higienização: {e}. Tente de novo."),
        json!({}),
    )
}
