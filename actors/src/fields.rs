//! Provider webhook fields beyond messages, statuses, quality, bans and template reviews,
//! acted on (issue 16, D-074): a portfolio's limit, a template's quality and category, a
//! number's verified name, account alerts, business verification and marketing opt-outs.

use crate::error::ActorError;
use crate::registry::Signer;
use crate::Runtime;
use engine::provider_webhook::{NumberChange, WabaChange};
use std::collections::HashSet;

impl Runtime {
    /// Applies a WABA-level change for the accounts whose channels' secrets verified it (only
    /// their records change; issue 15). Returns how many records changed.
    pub(crate) async fn apply_waba_change(
        &self,
        waba_id: &str,
        change: WabaChange,
        channels: &[Signer],
    ) -> Result<usize, ActorError> {
        let store = &self.shared.store;
        let accounts: HashSet<i64> = channels.iter().map(Signer::account_id).collect();
        let verified: HashSet<i64> = channels.iter().map(Signer::channel_id).collect();
        let wabas: Vec<_> = store
            .wabas_by_provider_id(waba_id)
            .await?
            .into_iter()
            .filter(|w| accounts.contains(&w.account_id))
            .collect();
        let mut n = 0;
        match change {
            WabaChange::Capability(tier) => {
                let Some(parsed) = engine::channel::Tier::parse(&tier) else {
                    return Ok(0);
                };
                for bm in wabas.iter().filter_map(|w| w.bm_id) {
                    let previous = store.bm_unscoped(bm).await?.tier;
                    store.set_bm_tier(bm, parsed.as_str()).await?;
                    self.apply_bm_limit(bm, &parsed).await?;
                    if previous.as_deref() != Some(parsed.as_str()) {
                        let at = self.shared.now_ms();
                        let events: Vec<_> = store
                            .channels_of_bm(bm)
                            .await?
                            .iter()
                            .map(|c| {
                                crate::events::bm_tier(c, bm, previous.as_deref(), &parsed, at)
                            })
                            .collect();
                        self.shared.emit(&events).await;
                    }
                    n += 1;
                }
                tracing::info!(
                    waba = waba_id,
                    tier = parsed.as_str(),
                    "portfolio limit changed by the provider"
                );
            }
            WabaChange::Verified => {
                for bm in wabas.iter().filter_map(|w| w.bm_id) {
                    store.set_bm_verification(bm, "verified").await?;
                    n += 1;
                }
            }
            WabaChange::Alert(a) => {
                let alert = storage::provider_fields::ProviderAlert {
                    id: 0,
                    waba_id: waba_id.to_string(),
                    entity_type: a.entity_type,
                    entity_id: a.entity_id,
                    alert_type: a.alert_info.alert_type,
                    severity: a.alert_info.alert_severity,
                    status: a.alert_info.alert_status,
                    description: a.alert_info.alert_description,
                    received_at: self.shared.now_ms(),
                };
                for account in &accounts {
                    store.record_provider_alert(*account, &alert).await?;
                    n += 1;
                }
            }
            WabaChange::TemplateQuality(q) => {
                n += self
                    .apply_template_quality(waba_id, &q, &verified, &accounts)
                    .await?;
            }
            WabaChange::TemplateCategory(c) => {
                n += self.apply_template_category(waba_id, &c, &verified).await?;
            }
        }
        Ok(n)
    }

    /// `message_template_quality_update`: the template's quality on the verified numbers of the
    /// WABA, with a `template.status` event (`QUALITY_UPDATE`) each; the accounts' template
    /// health refreshed. Returns how many rows changed.
    async fn apply_template_quality(
        &self,
        waba_id: &str,
        q: &provider::wire::TemplateQualityValue,
        verified: &HashSet<i64>,
        accounts: &HashSet<i64>,
    ) -> Result<usize, ActorError> {
        let store = &self.shared.store;
        let mut n = 0;
        let quality = q.new_quality_score.to_ascii_uppercase();
        let rows = store
            .template_channels_for_provider(
                &q.message_template_id,
                waba_id,
                &q.message_template_name,
            )
            .await?;
        let mut events = Vec::new();
        for r in rows
            .iter()
            .filter(|r| r.waba_id == waba_id && verified.contains(&r.channel_id))
        {
            if r.quality.as_deref() == Some(quality.as_str()) {
                continue;
            }
            store.set_template_channel_quality(r.id, &quality).await?;
            n += 1;
            let mut event = self
                .template_event(r, "QUALITY_UPDATE", r.status, None)
                .await?;
            event.data["quality"] = serde_json::json!(quality);
            event.data["previous_quality"] = serde_json::json!(q.previous_quality_score.clone());
            events.push(event);
        }
        self.shared.emit(&events).await;
        for a in accounts {
            self.tell_template_flags(*a).await?;
        }
        Ok(n)
    }

    /// `template_category_update`: the library template's new category (marketing, utility or
    /// authentication), with a `template.status` event (`CATEGORY_UPDATE`) per verified number.
    /// Returns how many templates changed.
    async fn apply_template_category(
        &self,
        waba_id: &str,
        c: &provider::wire::TemplateCategoryValue,
        verified: &HashSet<i64>,
    ) -> Result<usize, ActorError> {
        let store = &self.shared.store;
        let mut n = 0;
        let category = c.new_category.to_ascii_lowercase();
        if !["marketing", "utility", "authentication"].contains(&category.as_str()) {
            return Ok(0);
        }
        let rows = store
            .template_channels_for_provider(
                &c.message_template_id,
                waba_id,
                &c.message_template_name,
            )
            .await?;
        let mut done = HashSet::new();
        let mut events = Vec::new();
        for r in rows
            .iter()
            .filter(|r| r.waba_id == waba_id && verified.contains(&r.channel_id))
        {
            if done.insert(r.template_id) {
                store
                    .set_template_category(r.template_id, &category)
                    .await?;
                n += 1;
            }
            let mut event = self
                .template_event(r, "CATEGORY_UPDATE", r.status, None)
                .await?;
            event.data["category"] = serde_json::json!(category);
            events.push(event);
        }
        self.shared.emit(&events).await;
        Ok(n)
    }

    /// Applies a number-level change to a channel whose secret verified it. Returns how many
    /// records changed.
    pub(crate) async fn apply_number_change(
        &self,
        channel: &Signer,
        change: NumberChange,
    ) -> Result<usize, ActorError> {
        let store = &self.shared.store;
        match change {
            NumberChange::Name(name) => {
                store
                    .set_channel_verified_name(channel.channel_id(), &name)
                    .await?;
                // The actor re-reads its record (the name it shows), wherever it runs.
                self.tell(channel, crate::cluster::Control::Reload).await?;
                Ok(1)
            }
            NumberChange::Preferences(prefs) => {
                for (phone, category, stop) in &prefs {
                    let category = if category.is_empty() {
                        "marketing_messages"
                    } else {
                        category.as_str()
                    };
                    store
                        .set_opt_out(channel.account_id(), phone, category, *stop)
                        .await?;
                }
                Ok(prefs.len())
            }
        }
    }
}
