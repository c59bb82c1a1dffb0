//! Provider webhooks in: the body read by [`engine::provider_webhook::read`] (signature per
//! channel, each change routed to the channel it concerns), then its work handed to the
//! channels' actors and the writers. Nothing is recorded for a change whose channel's app
//! secret did not verify the signature.

use crate::cluster::Control;
use crate::error::ActorError;
use crate::protocol::ChannelMsg;
use crate::registry::Signer;
use crate::Runtime;
use engine::channel::WabaStanding;
use engine::provider_webhook::{self as webhook, Reading, StandingChange, Work};

pub use engine::provider_webhook::IngestReport;

/// Logs and counts what a reading noted: statuses per kind, fields not acted on, values that
/// did not parse.
fn count(reading: &Reading<Signer>) {
    for (kind, n) in &reading.status_counts {
        metrics::counter!("disparo_message_statuses_total", "status" => *kind).increment(*n);
    }
    for field in &reading.not_acted_on {
        tracing::info!(field, "provider field not acted on");
        metrics::counter!("disparo_provider_fields_ignored_total").increment(1);
    }
    for (field, error) in &reading.unparseable {
        tracing::warn!(field, error, "unparseable provider change");
    }
}

impl Runtime {
    /// Ingests one provider webhook POST. `route` is the channel of a per-channel receiver
    /// (`/webhooks/messaging/{channel_id}`), `None` for the app-level receiver. The body is
    /// taken by value and dropped once read, before the wait for the writers.
    ///
    /// Errors: [`ActorError::InvalidSignature`] when the signature verifies for none of the
    /// channels the payload names (nothing is recorded); [`ActorError::BadPayload`] for a
    /// signed body that is not a provider payload; [`ActorError::NotFound`] for an unknown
    /// route.
    pub async fn ingest_provider_webhook(
        &self,
        route: Option<i64>,
        body: bytes::Bytes,
        signature_header: Option<&str>,
    ) -> Result<IngestReport, ActorError> {
        // Unsigned: refused before anything else is done with the body.
        let header = signature_header
            .ok_or(ActorError::InvalidSignature)?
            .to_string();
        // Hashing (and the escaped form the provider signs) and parsing are CPU work on up to
        // 2 MB: done on the blocking pool, not on the threads that serve requests.
        // As many at once as there are cores: more would only add blocking threads (and
        // their allocator caches), not throughput.
        let slot = self
            .shared
            .ingest_slots
            .acquire()
            .await
            .map_err(|_| ActorError::Unavailable)?;
        let rt = self.clone();
        let reading = tokio::task::spawn_blocking(move || {
            rt.read_provider_webhook(route, &body, &header)
            // The body and its parsed form are dropped here: what waits for the writers
            // below is only the work taken from them.
        })
        .await
        .map_err(|_| ActorError::Unavailable)??;
        drop(slot);
        self.apply_provider_webhook(reading.report, reading.work)
            .await
    }

    /// Verifies and reads a webhook into the work it asks for, per channel, at the clock's
    /// now (the pure half: [`engine::provider_webhook::read`]).
    fn read_provider_webhook(
        &self,
        route: Option<i64>,
        body: &[u8],
        header: &str,
    ) -> Result<Reading<Signer>, ActorError> {
        let shared = &self.shared;
        let routed = match route {
            Some(id) => Some(shared.registry.signer(id).ok_or(ActorError::NotFound)?),
            None => None,
        };
        let fallback = shared.config.app_secret.as_ref();
        let now = shared.now_ms();
        let reading = webhook::read(&*shared.registry, routed, body, header, fallback, now)
            .map_err(|e| match e.code {
                webhook::INVALID_SIGNATURE => ActorError::InvalidSignature,
                _ => ActorError::BadPayload(e.message),
            })?;
        count(&reading);
        Ok(reading)
    }

    /// A WABA's new standing (`account_update`), for the accounts whose channels' secrets
    /// signed it: stored on their WABA rows (an older event arriving late changes nothing), then
    /// told to those channels' actors.
    async fn apply_standing(&self, change: StandingChange<Signer>) -> Result<(), ActorError> {
        let StandingChange {
            waba_id,
            standing,
            detail,
            channels,
            at: sent_at,
        } = change;
        let label = match standing {
            WabaStanding::Ok => "ok",
            WabaStanding::Restricted => "restricted",
            WabaStanding::Banned => "banned",
            WabaStanding::Violation => "violation",
        };
        // Only the records of the accounts whose channels' secrets signed the event: another
        // account's WABA row with the same id is not this signer's to change (issue 15).
        let mut accounts: std::collections::HashSet<i64> =
            channels.iter().map(Signer::account_id).collect();
        let signers = accounts.clone();
        let store = &self.shared.store;
        for w in store
            .wabas_by_provider_id(&waba_id)
            .await?
            .into_iter()
            .filter(|w| signers.contains(&w.account_id))
            // A violation never hides a ban or a restriction (D-074).
            .filter(|w| {
                standing != WabaStanding::Violation
                    || !matches!(w.standing.as_str(), "banned" | "restricted")
            })
        {
            // An older event that arrives late: that account's numbers keep the newer one.
            if !store
                .set_waba_standing(w.id, label, detail.as_deref(), sent_at)
                .await?
            {
                accounts.remove(&w.account_id);
            } else if w.standing != label {
                let told = crate::events::waba_standing;
                let at = self.shared.now_ms();
                let events: Vec<_> = store
                    .channels_of_waba(w.account_id, &waba_id)
                    .await?
                    .iter()
                    .map(|c| told(c, &waba_id, &w.standing, label, detail.as_deref(), at))
                    .collect();
                self.shared.emit(&events).await;
            }
        }
        for c in channels
            .iter()
            .filter(|c| accounts.contains(&c.account_id()))
        {
            self.tell(c, Control::Standing(standing)).await?;
        }
        Ok(())
    }

    /// Hands a webhook's work to the channels' actors and the writers, and waits for it.
    async fn apply_provider_webhook(
        &self,
        mut report: IngestReport,
        work: Work<Signer>,
    ) -> Result<IngestReport, ActorError> {
        for (signer, reports) in work.statuses {
            report.statuses += self.apply_statuses(&signer, reports).await?;
        }
        for (signer, items) in work.inbound {
            report.inbound += self.apply_inbound(&signer, items).await?;
        }
        for change in work.standings {
            self.apply_standing(change).await?;
            report.account_updates += 1;
        }
        for t in work.template_updates {
            let verified: std::collections::HashSet<i64> =
                t.channels.iter().map(Signer::channel_id).collect();
            let accounts: std::collections::HashSet<i64> =
                t.channels.iter().map(Signer::account_id).collect();
            report.template_updates += self
                .apply_template_status(&t.waba_id, &t.value, &verified, &accounts, t.at)
                .await?;
        }
        for (waba_id, change, channels) in work.waba_changes {
            report.field_updates += self.apply_waba_change(&waba_id, change, &channels).await?;
        }
        for (channel, change) in work.number_changes {
            report.field_updates += self.apply_number_change(&channel, change).await?;
        }
        for q in work.quality {
            let update = Control::Quality {
                quality: q.quality,
                tier: q.tier,
                at: q.at,
            };
            self.tell(&q.channel, update).await?;
            report.quality_updates += 1;
        }
        Ok(report)
    }

    /// Status reports of one channel: through its actor when it runs here, else straight to
    /// its number's batched writer (statuses need no live state; they are forward-only under
    /// a row lock, D-100). Returns how many were applied.
    async fn apply_statuses(
        &self,
        signer: &Signer,
        reports: Vec<storage::messages::StatusReport>,
    ) -> Result<usize, ActorError> {
        let timeout = self.shared.config.call_timeout;
        match signer {
            Signer::Here(e) => {
                crate::ask(&e.actor, |r| ChannelMsg::Statuses(reports, r), timeout).await?
            }
            Signer::Elsewhere(remote) => {
                let (tx, rx) = ractor::concurrency::oneshot();
                let job = crate::settle::StatusJob {
                    record: remote.record.clone(),
                    reports,
                    reply: tx.into(),
                };
                if self.shared.writers.statuses(job).await.is_err() {
                    return Err(ActorError::Unavailable);
                }
                match tokio::time::timeout(timeout, rx).await {
                    Ok(Ok(applied)) => applied,
                    _ => Err(ActorError::Unavailable),
                }
            }
        }
    }

    /// Inbound messages of one channel: through its actor when it runs here, else stored here.
    async fn apply_inbound(
        &self,
        signer: &Signer,
        items: Vec<storage::messages::NewInbound>,
    ) -> Result<usize, ActorError> {
        match signer {
            Signer::Here(e) => {
                let timeout = self.shared.config.call_timeout;
                crate::ask(&e.actor, |r| ChannelMsg::Inbound(items, r), timeout).await?
            }
            Signer::Elsewhere(remote) => {
                crate::channel::record_inbound_for(&self.shared, &remote.record, items).await
            }
        }
    }

    /// Tells a channel's actor a change to its live state: here by a message to it, else over
    /// NATS to the node that runs it, which must take it before the webhook is answered.
    pub(crate) async fn tell(&self, signer: &Signer, control: Control) -> Result<(), ActorError> {
        match signer {
            Signer::Here(e) => crate::cluster::apply_here(self, e.channel_id, control)
                .await
                .map(|_| ())
                .ok_or(ActorError::Unavailable),
            Signer::Elsewhere(remote) => {
                crate::cluster::forward_control(&self.shared, remote.record.id, &control).await
            }
        }
    }
}
