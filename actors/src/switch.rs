//! The account's dispatch switch (`DISPARO_ENABLED`, `PUT /api/settings/dispatch`; decision
//! D-062) and a campaign's start as the runtime sees it: approved panel campaigns are held
//! while the switch is off and released when it is on again, running ones halted and held;
//! `POST /campaigns/{id}/start` refuses a panel campaign not approved. The panel campaigns'
//! life before that (contacts, hygiene, validation, approval) is `services::panel_campaigns`.

use crate::error::ActorError;
use crate::Runtime;
use engine::campaign::CampaignState;
use engine::ids::{AccountId, CampaignId};
use engine::panel_campaign::{PanelStatus, Stage};
use serde_json::{json, Value};
use storage::campaigns::CampaignRecord;

/// A refusal with its own status and code (`details` travel in the error body).
pub fn refused(
    status: u16,
    code: &'static str,
    message: impl Into<String>,
    details: Value,
) -> ActorError {
    ActorError::Refused {
        status,
        code,
        message: message.into(),
        details,
    }
}

/// A campaign's state.
pub fn state_of(c: &CampaignRecord) -> CampaignState {
    c.state
}

/// A panel campaign's stage, when it has one.
pub fn stage_of(c: &CampaignRecord) -> Option<Stage> {
    c.stage
}

/// The pause reason the dispatch switch writes.
pub const SWITCH_REASON: &str =
    "Disparo desligado nesta conta (DISPARO_ENABLED / PUT /api/settings/dispatch)";

impl Runtime {
    /// Whether the account's campaigns may dispatch: the switch an Admin set, else
    /// `DISPARO_ENABLED`, else on (D-062).
    pub async fn dispatch_enabled(&self, account_id: i64) -> Result<bool, ActorError> {
        Ok(self
            .shared
            .store
            .dispatch_switch(account_id)
            .await?
            .or(self.shared.config.dispatch_enabled)
            .unwrap_or(true))
    }

    /// The refusal while the account's dispatch switch is off (409 `disparo_desligado`).
    pub fn switch_off(&self) -> ActorError {
        refused(
            409,
            "disparo_desligado",
            "O disparo de campanhas está desligado nesta conta (DISPARO_ENABLED); um Admin o religa em PUT /api/settings/dispatch.",
            json!({}),
        )
    }

    /// Releases valid contacts up to the volume and makes the campaign run.
    pub async fn release(&self, account_id: i64, c: &CampaignRecord) -> Result<u64, ActorError> {
        let store = &self.shared.store;
        let released = store
            .release_contacts(c.id, c.volume.unwrap_or(i64::MAX))
            .await?;
        let state = state_of(c);
        let run = match state {
            CampaignState::Draft | CampaignState::Scheduled | CampaignState::Paused => true,
            CampaignState::Completed => released > 0,
            CampaignState::Running => true,
            CampaignState::Cancelled => false,
        };
        if run {
            if state != CampaignState::Running {
                crate::campaign::move_campaign(
                    &self.shared,
                    account_id,
                    c.id,
                    CampaignState::Running,
                    None,
                )
                .await?;
            }
            store.set_campaign_held(c.id, false).await?;
            self.spawn_campaign(c.id, account_id).await?;
        }
        tracing::info!(campaign_id = c.id, released, "campaign contacts released");
        Ok(released)
    }

    /// The panel status of a campaign.
    pub fn status_of(&self, c: &CampaignRecord) -> &'static str {
        PanelStatus::of(state_of(c), stage_of(c), c.held).as_str()
    }

    /// Halts, pauses and holds every campaign of the account that has an actor or is running.
    pub async fn hold_running(&self, account_id: i64) -> Result<(), ActorError> {
        let store = &self.shared.store;
        for id in store
            .campaigns_in_states(account_id, &["running", "paused"])
            .await?
        {
            let had_actor = self.shared.campaigns.contains_key(&id);
            let c = store
                .campaign(AccountId(account_id), CampaignId(id))
                .await?;
            if !had_actor && state_of(&c) != CampaignState::Running {
                continue;
            }
            self.halt_campaign(id).await?;
            let c = store
                .campaign(AccountId(account_id), CampaignId(id))
                .await?;
            if matches!(state_of(&c), CampaignState::Running | CampaignState::Paused) {
                crate::campaign::move_campaign(
                    &self.shared,
                    account_id,
                    id,
                    CampaignState::Paused,
                    Some(SWITCH_REASON),
                )
                .await?;
                store.set_campaign_held(id, true).await?;
                tracing::warn!(campaign_id = id, "campaign held by the dispatch switch");
            }
        }
        Ok(())
    }

    /// Releases every campaign of the account the switch held.
    pub async fn release_held(&self, account_id: i64) -> Result<(), ActorError> {
        let store = &self.shared.store;
        for id in store.held_campaigns(account_id).await? {
            let c = store
                .campaign(AccountId(account_id), CampaignId(id))
                .await?;
            match state_of(&c) {
                CampaignState::Draft if stage_of(&c) == Some(Stage::Approved) => {
                    self.release(account_id, &c).await?;
                }
                CampaignState::Paused => {
                    crate::campaign::move_campaign(
                        &self.shared,
                        account_id,
                        id,
                        CampaignState::Running,
                        None,
                    )
                    .await?;
                    store.set_campaign_held(id, false).await?;
                    self.spawn_campaign(id, account_id).await?;
                }
                _ => store.set_campaign_held(id, false).await?,
            }
            tracing::info!(campaign_id = id, "campaign released by the dispatch switch");
        }
        Ok(())
    }

    /// The account API's view of whether a campaign may start by `POST /campaigns/{id}/start`:
    /// a panel campaign only once approved; none while the switch is off.
    pub async fn may_start(&self, c: &CampaignRecord) -> Result<(), ActorError> {
        if c.origin == "panel" && stage_of(c) != Some(Stage::Approved) {
            return Err(refused(
                409,
                "aprovacao_pendente",
                "Esta campanha é do painel: ela só dispara depois de validada e aprovada lá.",
                json!({"status": self.status_of(c)}),
            ));
        }
        if !self.dispatch_enabled(c.account_id).await? {
            return Err(self.switch_off());
        }
        Ok(())
    }
}
