//! Per-number campaign guardrails through the API (D-031): read them, change them, and let an
//! owner or admin authorize more campaign sends today past the daily cap (spec "States and
//! transitions": "unless an owner or admin authorizes").

use crate::Services;
use actors::cluster::wire::ChannelAsk;
use actors::error::ActorError;
use actors::protocol::GuardrailView;
use engine::guardrail::{self, Guardrails};
use engine::ids::{AccountId, ChannelId};

/// The fields of `PATCH /channels/{id}/guardrails` (already range-checked by the HTTP layer);
/// `None` keeps the current value.
#[derive(Debug, Clone, Default)]
pub struct GuardrailsPatch {
    /// New daily cap; `Some(None)` removes it.
    pub daily_cap: Option<Option<i64>>,
    /// New cadence (ms).
    pub cadence_ms: Option<i64>,
    /// Warm-up on or off.
    pub warmup: Option<bool>,
    /// Warm-up start (ms).
    pub warmup_started_at: Option<i64>,
    /// Warm-up day-1 cap.
    pub warmup_initial_cap: Option<i64>,
}

impl GuardrailsPatch {
    fn apply(self, mut g: Guardrails) -> Guardrails {
        if let Some(v) = self.daily_cap {
            g.daily_cap = v;
        }
        if let Some(v) = self.cadence_ms {
            g.cadence_ms = v;
        }
        if let Some(v) = self.warmup {
            g.warmup = v;
        }
        if let Some(v) = self.warmup_started_at {
            g.warmup_started_at = v;
        }
        if let Some(v) = self.warmup_initial_cap {
            g.warmup_initial_cap = v;
        }
        g
    }
}

impl Services {
    /// `PATCH /channels/{id}/guardrails`: stores the changed settings, then the number applies
    /// them at once.
    pub async fn set_guardrails(
        &self,
        account_id: i64,
        channel_id: i64,
        patch: GuardrailsPatch,
    ) -> Result<GuardrailView, ActorError> {
        let located = self
            .locate(AccountId(account_id), ChannelId(channel_id))
            .await?;
        let store = &self.shared().store;
        let g = patch.apply(store.channel_guardrails(channel_id).await?);
        store.set_channel_guardrails(channel_id, &g).await?;
        self.ask_guardrails(&located, ChannelAsk::SetGuardrails(g))
            .await
    }

    /// `POST /channels/{id}/guardrails/authorize`: `extra` more campaign sends for today (local
    /// day, D-031), recorded with the token's name; the number takes campaign work again at
    /// once if the cap was what stopped it.
    pub async fn authorize_cap(
        &self,
        account_id: i64,
        channel_id: i64,
        extra: i64,
        by: &str,
    ) -> Result<GuardrailView, ActorError> {
        let located = self
            .locate(AccountId(account_id), ChannelId(channel_id))
            .await?;
        let day = guardrail::local_day(self.shared().now_ms());
        let total = self
            .shared()
            .store
            .authorize_cap(channel_id, day, extra, by)
            .await?;
        self.ask_guardrails(&located, ChannelAsk::Authorized(total))
            .await
    }
}
