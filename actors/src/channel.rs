//! `ChannelActor`: one per connected number. It holds the live truth about the number
//! (quality, tier, rolling 24 h business-initiated recipients, credential state), admits sends
//! by the engine's rules, and applies the provider's events for it.
//!
//! It never awaits a provider call in its handler: an admitted send is stored `queued`, then a
//! task bounded by the channel's in-flight window makes the call, records the outcome and
//! answers the caller; the task reports back with [`ChannelMsg::Outcome`].

use crate::error::ActorError;
use crate::registry::ChannelEntry;
use crate::{events, Shared};
use engine::channel::{
    business_initiated_allowed, health, ChannelStatus, Health, HealthCode, HealthInput, Quality,
    Tier, WabaStanding,
};
use engine::limits::RollingUnique;
use engine::message::{window_open, MessageKind};
use engine::phone::Phone;
use engine::{Secret, DAY_MS};
use provider::wire::{SendMessageRequest, TemplatePayload};
use provider::ErrorKind;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use std::sync::Arc;
use storage::channels::{ChannelRecord, ChannelSecrets};
use storage::messages::{MessageRecord, NewInbound, NewOutbound, StatusReport};
use storage::now_ms;
use tokio::sync::Semaphore;
use tracing::Instrument;

/// The prefix of `biz_opaque_callback_data` values disparo sets: `dsp:<message id>`.
pub const CALLBACK_PREFIX: &str = "dsp:";

/// What to send.
#[derive(Debug, Clone)]
pub enum SendContent {
    /// Free text (only inside the 24-hour window).
    Text {
        /// The text, 1 to 4096 characters.
        body: String,
    },
    /// An approved template.
    Template {
        /// Name at the provider.
        name: String,
        /// Locale, e.g. `pt_BR`.
        language: String,
        /// Positional body parameters.
        params: Vec<String>,
        /// Suffix of a dynamic URL button (button 0).
        button_param: Option<String>,
    },
    /// Media at a public URL (only inside the 24-hour window); the runtime downloads it into
    /// [`SendContent::MediaFile`] before the channel sees it.
    Media {
        /// Image, document, video or audio.
        kind: engine::media::MediaKind,
        /// Public URL.
        url: String,
        /// Caption (not for audio).
        caption: Option<String>,
    },
    /// A library template by id with the audience columns of the recipient; the runtime
    /// renders it into [`SendContent::Template`] through its var_map.
    Library {
        /// Library template id.
        id: i64,
        /// Audience columns (column → value).
        vars: std::collections::BTreeMap<String, String>,
    },
    /// A downloaded, checked file: uploaded to the provider, then sent by media id.
    MediaFile {
        /// The file.
        file: crate::media::FetchedMedia,
        /// Caption.
        caption: Option<String>,
    },
}

/// What the send task sends: a ready request, or a file to upload first.
enum Prepared {
    Ready(Box<SendMessageRequest>),
    Upload {
        file: crate::media::FetchedMedia,
        caption: Option<String>,
        to: String,
        callback: String,
    },
}

/// A send request, validated by the HTTP layer.
#[derive(Debug, Clone)]
pub struct SendCommand {
    /// The recipient.
    pub to: Phone,
    /// What to send.
    pub content: SendContent,
    /// Display text kept for a template message.
    pub preview_text: Option<String>,
}

/// A channel's live state as read by the API.
#[derive(Debug, Clone)]
pub struct ChannelSnapshot {
    /// The stored record with live quality, tier and credential state.
    pub record: ChannelRecord,
    /// Health object.
    pub health: Health,
}

/// Internal report of a send task.
#[derive(Debug)]
pub enum SendOutcome {
    /// The provider accepted it.
    Accepted,
    /// The provider refused it.
    Refused(ErrorKind),
}

/// Messages of a [`ChannelActor`].
#[derive(Debug)]
pub enum ChannelMsg {
    /// Send one message; the reply comes when the provider answered.
    Send(SendCommand, RpcReplyPort<Result<MessageRecord, ActorError>>),
    /// Apply status reports from a provider webhook; replies when stored.
    Statuses(Vec<StatusReport>, RpcReplyPort<Result<usize, ActorError>>),
    /// Record inbound messages from a provider webhook; replies when stored.
    Inbound(Vec<NewInbound>, RpcReplyPort<Result<usize, ActorError>>),
    /// A quality / tier change (`phone_number_quality_update`).
    QualityUpdate {
        /// New quality, when the event carried one.
        quality: Option<Quality>,
        /// New tier, when the event carried one.
        tier: Option<String>,
    },
    /// Read the live state.
    Snapshot(RpcReplyPort<ChannelSnapshot>),
    /// A send task's result.
    Outcome(SendOutcome),
    /// The WABA's standing changed (`account_update`).
    WabaStanding(WabaStanding),
    /// Re-read the number at the provider (quality, tier, status, name); replies with the
    /// new state, or the provider's refusal. `None`: no one waits for the answer.
    Sync(Option<RpcReplyPort<Result<ChannelSnapshot, ActorError>>>),
    /// The result of the provider read a `Sync` started.
    SyncDone(
        Box<Result<provider::wire::PhoneNumber, provider::ProviderError>>,
        Option<RpcReplyPort<Result<ChannelSnapshot, ActorError>>>,
    ),
    /// The BM's payment works again: release the payment lock.
    PaymentReleased,
    /// Re-read the channel's record and credentials from storage (after an update).
    Reload(RpcReplyPort<Result<ChannelSnapshot, ActorError>>),
    /// How many campaign sends the channel takes now, or why it takes none.
    CampaignCredits(RpcReplyPort<(usize, Option<HealthCode>)>),
    /// Campaign sends (already claimed, each with its stored message).
    Dispatch(Box<Dispatch>),
    /// A campaign send finished (frees a credit).
    CampaignSettled,
}

/// A batch of claimed campaign recipients for this channel.
#[derive(Debug)]
pub struct Dispatch {
    /// Template name to send (the version approved on this channel's WABA).
    pub template_name: String,
    /// Locale.
    pub language: String,
    /// The recipients.
    pub items: Vec<DispatchItem>,
}

/// One claimed recipient.
#[derive(Debug)]
pub struct DispatchItem {
    /// Recipient row.
    pub recipient_id: i64,
    /// Message row.
    pub message_id: i64,
    /// Phone digits.
    pub phone: String,
    /// Body parameters.
    pub params: Vec<String>,
    /// URL button suffix.
    pub button: Option<String>,
}

/// Campaign sends a channel keeps in flight at most (its share of the in-flight window).
pub const CAMPAIGN_WINDOW: usize = 32;

/// Start arguments.
pub struct ChannelArgs {
    /// Which channel.
    pub channel_id: i64,
    /// Shared runtime context.
    pub shared: Arc<Shared>,
}

/// The actor's state, rebuilt from storage on every start.
pub struct ChannelState {
    record: Arc<ChannelRecord>,
    secrets: ChannelSecrets,
    status: ChannelStatus,
    quality: Quality,
    tier: Option<Tier>,
    credential_valid: bool,
    payment_locked_until: Option<i64>,
    waba: WabaStanding,
    recipients: RollingUnique,
    bm: Option<Arc<std::sync::Mutex<crate::bm::BmCounter>>>,
    in_flight: Arc<Semaphore>,
    campaign_in_flight: usize,
    /// Whether business-initiated sends are refused now (RED, ban, payment, credential,
    /// disconnected); read by send tasks right before the provider call, so a RED event stops
    /// even sends admitted before it.
    blocked: Arc<std::sync::atomic::AtomicBool>,
    shared: Arc<Shared>,
}

/// How long a payment problem (131042) locks business-initiated sends when nobody checks
/// (decision D-021); `POST /bms/{id}/payment-check` releases it at once.
pub const PAYMENT_LOCK_MS: i64 = engine::HOUR_MS;

fn waba_standing(s: &str) -> WabaStanding {
    match s {
        "banned" => WabaStanding::Banned,
        "restricted" => WabaStanding::Restricted,
        _ => WabaStanding::Ok,
    }
}

type Loaded = (
    ChannelRecord,
    ChannelSecrets,
    RollingUnique,
    WabaStanding,
    Option<Arc<std::sync::Mutex<crate::bm::BmCounter>>>,
);

/// Loads what a channel actor holds from storage.
async fn load(shared: &Arc<Shared>, channel_id: i64) -> Result<Loaded, ActorError> {
    let store = &shared.store;
    let record = store.channel_unscoped(channel_id).await?;
    let secrets = store.channel_secrets(channel_id).await?;
    let mut recipients = RollingUnique::new(DAY_MS);
    for (phone, at) in store
        .business_initiated_recipients_since(record.id, now_ms() - DAY_MS)
        .await?
    {
        recipients.record(&phone, at);
    }
    let waba = match store
        .waba_by_provider_id(record.account_id, &record.waba_id)
        .await
    {
        Ok(w) => waba_standing(&w.standing),
        Err(storage::StorageError::NotFound) => WabaStanding::Ok,
        Err(e) => return Err(e.into()),
    };
    let bm = match record.bm_id {
        Some(id) => Some(shared.bm_counter(id).await?),
        None => None,
    };
    Ok((record, secrets, recipients, waba, bm))
}

impl ChannelState {
    fn health_input(&mut self, now: i64) -> HealthInput {
        let bm_available = self
            .bm
            .as_ref()
            .and_then(|b| b.lock().expect("bm counter lock").available(now));
        HealthInput {
            status: self.status,
            quality: self.quality,
            credential_valid: self.credential_valid,
            payment_locked: self.payment_locked_until.is_some_and(|t| t > now),
            waba: self.waba,
            limit_24h: self.tier.as_ref().and_then(Tier::limit_24h),
            sent_24h: self.recipients.count(now),
            external_available: bm_available,
            template_missing: false,
            warming_up: false,
            group: String::new(),
        }
    }

    fn snapshot(&mut self) -> ChannelSnapshot {
        let input = self.health_input(now_ms());
        let mut record = (*self.record).clone();
        record.status = self.status.as_str().to_string();
        record.quality = self.quality.as_str().to_string();
        record.tier = self.tier.as_ref().map(|t| t.as_str().to_string());
        record.credential_valid = self.credential_valid;
        record.payment_locked_until = self.payment_locked_until;
        ChannelSnapshot {
            record,
            health: health(&input),
        }
    }
}

fn register(
    shared: &Shared,
    record: &ChannelRecord,
    secrets: &ChannelSecrets,
    myself: &ActorRef<ChannelMsg>,
) {
    shared.registry.insert(ChannelEntry {
        channel_id: record.id,
        account_id: record.account_id,
        phone_number_id: record.phone_number_id.clone(),
        waba_id: record.waba_id.clone(),
        phone: record.phone.clone(),
        app_secret: secrets.app_secret.clone(),
        verify_token: record.verify_token.clone(),
        actor: myself.clone(),
    });
}

impl ChannelState {
    /// Per-channel gauges for Grafana: quality (2 green, 1 yellow, 0 red, -1 unknown), the
    /// 24 h limit (-1 unlimited), sent in 24 h and available now (-1 unlimited).
    fn publish_gauges(&mut self) {
        let id = self.record.id.to_string();
        let input = self.health_input(now_ms());
        self.blocked.store(
            business_initiated_allowed(&input).is_err(),
            std::sync::atomic::Ordering::Relaxed,
        );
        let h = health(&input);
        let q = match self.quality {
            Quality::Green => 2.0,
            Quality::Yellow => 1.0,
            Quality::Red => 0.0,
            Quality::Unknown => -1.0,
        };
        metrics::gauge!("disparo_channel_quality", "channel_id" => id.clone()).set(q);
        metrics::gauge!("disparo_channel_limit_24h", "channel_id" => id.clone())
            .set(h.limit_24h as f64);
        metrics::gauge!("disparo_channel_sent_24h", "channel_id" => id.clone())
            .set(h.sent_24h as f64);
        metrics::gauge!("disparo_channel_available", "channel_id" => id).set(h.available as f64);
    }

    /// Why a business-initiated send to `to` (or, with `None`, to a new recipient) is refused
    /// now: a blocking health code, or `limite_24h_esgotado` when the number's own 24 h limit or
    /// its BM's is used up and the recipient is not already counted (PROVIDER.md §10.2).
    fn business_initiated_refusal(&mut self, to: Option<&str>, now: i64) -> Option<HealthCode> {
        let input = self.health_input(now);
        if let Err(code) = business_initiated_allowed(&input) {
            return Some(code);
        }
        let counted = |r: &RollingUnique| to.is_some_and(|t| r.contains(t, now));
        let own_full =
            input.limit_24h.is_some_and(|l| input.sent_24h >= l) && !counted(&self.recipients);
        let bm_full = self.bm.as_ref().is_some_and(|b| {
            let mut b = b.lock().expect("bm counter lock");
            !counted(&b.recipients) && b.available(now) == Some(0)
        });
        (own_full || bm_full).then_some(HealthCode::LimitExhausted)
    }

    /// Counts a business-initiated send to `to` in the number's and its BM's 24 h counters.
    fn count_business_initiated(&mut self, to: &str, now: i64) {
        self.recipients.record(to, now);
        if let Some(b) = &self.bm {
            b.lock()
                .expect("bm counter lock")
                .recipients
                .record(to, now);
        }
    }

    /// Records whether the provider accepts the channel's access token, in memory and in
    /// storage, when it changes (a refused token stops business-initiated sends: health
    /// code `credencial_invalida`).
    async fn set_credential_valid(&mut self, valid: bool) {
        if valid == self.credential_valid {
            return;
        }
        self.credential_valid = valid;
        if let Err(e) = self
            .shared
            .store
            .set_channel_credential_valid(self.record.id, valid)
            .await
        {
            tracing::error!(error = %e, "could not store the credential state");
        }
        if !valid {
            tracing::warn!("the provider refused the channel's access token");
        }
    }

    /// `session.status` when the connection status changes.
    async fn set_status(&mut self, status: ChannelStatus) {
        if status == self.status {
            return;
        }
        let previous = std::mem::replace(&mut self.status, status);
        let event = crate::events::session_status(&self.record, status, previous, now_ms());
        self.shared.emit(&[event]).await;
        tracing::info!(
            status = status.as_str(),
            previous = previous.as_str(),
            "channel status changed"
        );
    }
}

/// The actor.
pub struct ChannelActor;

impl Actor for ChannelActor {
    type Msg = ChannelMsg;
    type State = ChannelState;
    type Arguments = ChannelArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<ChannelMsg>,
        args: ChannelArgs,
    ) -> Result<ChannelState, ActorProcessingErr> {
        let (record, secrets, recipients, waba, bm) = load(&args.shared, args.channel_id)
            .await
            .map_err(|e| ActorProcessingErr::from(e.to_string()))?;
        register(&args.shared, &record, &secrets, &myself);
        tracing::info!(channel_id = record.id, "channel actor started");
        let mut st = ChannelState {
            status: ChannelStatus::parse(&record.status),
            quality: Quality::parse(&record.quality),
            tier: record.tier.as_deref().and_then(Tier::parse),
            credential_valid: record.credential_valid,
            payment_locked_until: record.payment_locked_until,
            waba,
            record: Arc::new(record),
            secrets,
            recipients,
            bm,
            in_flight: Arc::new(Semaphore::new(args.shared.config.channel_max_in_flight)),
            campaign_in_flight: 0,
            blocked: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            shared: args.shared,
        };
        st.publish_gauges();
        Ok(st)
    }

    async fn handle(
        &self,
        myself: ActorRef<ChannelMsg>,
        msg: ChannelMsg,
        st: &mut ChannelState,
    ) -> Result<(), ActorProcessingErr> {
        let span = tracing::info_span!("channel", channel_id = st.record.id);
        handle_msg(myself, msg, st).instrument(span).await;
        st.publish_gauges();
        Ok(())
    }
}

async fn handle_msg(myself: ActorRef<ChannelMsg>, msg: ChannelMsg, st: &mut ChannelState) {
    match msg {
        ChannelMsg::Send(cmd, reply) => {
            if let Err(e) = admit_and_send(myself, cmd, reply, st).await {
                tracing::warn!(error = %e, "send not admitted");
            }
        }
        ChannelMsg::Statuses(reports, reply) => {
            let record = st.record.clone();
            let res = st
                .shared
                .store
                .apply_status_reports(record.id, &reports, |a| {
                    vec![events::message_ack(&record, a)]
                })
                .await
                .map_err(ActorError::from);
            if let Ok(out) = &res {
                tracing::debug!(
                    applied = out.applied.len(),
                    unchanged = out.unchanged,
                    unknown = out.unknown,
                    deliveries = out.deliveries,
                    "status reports"
                );
                if out.deliveries > 0 {
                    st.shared.wake_dispatcher();
                }
                if out.unknown > 0 {
                    tracing::debug!(unknown = out.unknown, "statuses for unknown messages");
                }
            }
            let _ = reply.send(res.map(|o| o.applied.len()));
        }
        ChannelMsg::Inbound(items, reply) => {
            let record = st.record.clone();
            let mut stored = 0;
            let mut result = Ok(());
            for item in items {
                let name = item.contact_name.clone();
                match st
                    .shared
                    .store
                    .record_inbound(&item, |m| {
                        vec![events::message_received(&record, m, name.as_deref())]
                    })
                    .await
                {
                    Ok(Some((_, n))) => {
                        stored += 1;
                        if n > 0 {
                            st.shared.wake_dispatcher();
                        }
                        metrics::counter!("disparo_messages_received_total", "channel_id" => record.id.to_string()).increment(1);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        result = Err(ActorError::from(e));
                        break;
                    }
                }
            }
            let _ = reply.send(result.map(|_| stored));
        }
        ChannelMsg::QualityUpdate { quality, tier } => {
            match quality {
                Some(q) => st.quality = q,
                // The current webhook carries no rating: read it at the provider.
                None => {
                    let _ = myself.cast(ChannelMsg::Sync(None));
                }
            }
            if let Some(t) = tier.as_deref().and_then(Tier::parse) {
                st.tier = Some(t);
            }
            let tier = st.tier.as_ref().map(|t| t.as_str().to_string());
            if let Err(e) = st
                .shared
                .store
                .update_channel_quality(st.record.id, st.quality.as_str(), tier.as_deref())
                .await
            {
                tracing::error!(error = %e, "could not store a quality update");
            }
            tracing::info!(quality = st.quality.as_str(), tier = ?tier, "quality update");
        }
        ChannelMsg::Snapshot(reply) => {
            let _ = reply.send(st.snapshot());
        }
        ChannelMsg::Outcome(SendOutcome::Accepted) => {
            st.set_credential_valid(true).await;
        }
        ChannelMsg::WabaStanding(standing) => {
            tracing::warn!(?standing, "WABA standing changed");
            st.waba = standing;
        }
        ChannelMsg::Sync(reply) => {
            let (graph, token, pnid, me) = (
                st.shared.graph.clone(),
                st.secrets.access_token.clone(),
                st.record.phone_number_id.clone(),
                myself.clone(),
            );
            tokio::spawn(async move {
                let res = graph.phone_number(token.expose(), &pnid).await;
                let _ = me.cast(ChannelMsg::SyncDone(Box::new(res), reply));
            });
        }
        ChannelMsg::SyncDone(res, reply) => {
            let out = apply_sync(st, *res).await;
            if let Some(reply) = reply {
                let _ = reply.send(out);
            }
        }
        ChannelMsg::CampaignCredits(reply) => {
            let blocked = st.business_initiated_refusal(None, now_ms());
            let credits = if blocked.is_some() {
                0
            } else {
                CAMPAIGN_WINDOW.saturating_sub(st.campaign_in_flight)
            };
            let _ = reply.send((credits, blocked));
        }
        ChannelMsg::Dispatch(batch) => dispatch(myself, *batch, st).await,
        ChannelMsg::CampaignSettled => {
            st.campaign_in_flight = st.campaign_in_flight.saturating_sub(1);
        }
        ChannelMsg::PaymentReleased => {
            st.payment_locked_until = None;
            tracing::info!("payment lock released");
        }
        ChannelMsg::Reload(reply) => {
            let out = match load(&st.shared, st.record.id).await {
                Ok((record, secrets, recipients, waba, bm)) => {
                    register(&st.shared, &record, &secrets, &myself);
                    st.quality = Quality::parse(&record.quality);
                    st.tier = record.tier.as_deref().and_then(Tier::parse);
                    st.credential_valid = record.credential_valid;
                    st.payment_locked_until = record.payment_locked_until;
                    st.waba = waba;
                    st.recipients = recipients;
                    st.bm = bm;
                    st.secrets = secrets;
                    let status = ChannelStatus::parse(&record.status);
                    st.record = Arc::new(record);
                    st.set_status(status).await;
                    Ok(st.snapshot())
                }
                Err(e) => Err(e),
            };
            let _ = reply.send(out);
        }
        ChannelMsg::Outcome(SendOutcome::Refused(ErrorKind::Payment)) => {
            let until = now_ms() + PAYMENT_LOCK_MS;
            st.payment_locked_until = Some(until);
            if let Err(e) = st
                .shared
                .store
                .set_channel_payment_lock(st.record.id, Some(until))
                .await
            {
                tracing::error!(error = %e, "could not store a payment lock");
            }
            tracing::warn!(
                "the provider reported a payment problem; business-initiated sends locked"
            );
        }
        ChannelMsg::Outcome(SendOutcome::Refused(kind)) => {
            if kind == ErrorKind::InvalidCredential {
                st.set_credential_valid(false).await;
            }
        }
    }
}

/// Checks the rules, stores the message `queued` and spawns the provider call. Errors here
/// are answered through `reply`; the returned error is only for the log.
async fn admit_and_send(
    myself: ActorRef<ChannelMsg>,
    cmd: SendCommand,
    reply: RpcReplyPort<Result<MessageRecord, ActorError>>,
    st: &mut ChannelState,
) -> Result<(), ActorError> {
    let now = now_ms();
    let refuse = |reply: RpcReplyPort<Result<MessageRecord, ActorError>>, e: ActorError| {
        let text = e.to_string();
        let _ = reply.send(Err(e));
        Err(ActorError::Conflict(text))
    };
    let to = cmd.to.as_str().to_string();
    match &cmd.content {
        SendContent::Media { .. } | SendContent::Library { .. } => {
            return refuse(
                reply,
                ActorError::Validation(engine::ValidationError::new(
                    "not_prepared",
                    "content",
                    "O conteúdo deve ser preparado antes do envio.",
                )),
            );
        }
        SendContent::Text { .. } | SendContent::MediaFile { .. } => {
            let last = match st.shared.store.last_inbound_at(st.record.id, &to).await {
                Ok(t) => t,
                Err(e) => return refuse(reply, e.into()),
            };
            if !window_open(last, now) {
                return refuse(reply, ActorError::WindowClosed);
            }
        }
        SendContent::Template { .. } => {
            if let Some(code) = st.business_initiated_refusal(Some(&to), now) {
                return refuse(reply, ActorError::BusinessInitiatedRefused(code));
            }
            st.count_business_initiated(&to, now);
        }
    }

    let new = match &cmd.content {
        SendContent::Text { body } => NewOutbound {
            account_id: st.record.account_id,
            channel_id: st.record.id,
            contact_phone: to.clone(),
            kind: MessageKind::Text,
            body: Some(body.clone()),
            template_name: None,
            template_language: None,
            params: None,
            preview_text: None,
            media: None,
            source: "api",
        },
        SendContent::Template {
            name,
            language,
            params,
            button_param,
        } => NewOutbound {
            account_id: st.record.account_id,
            channel_id: st.record.id,
            contact_phone: to.clone(),
            kind: MessageKind::Template,
            body: None,
            template_name: Some(name.clone()),
            template_language: Some(language.clone()),
            params: Some(serde_json::json!({"body": params, "button": button_param})),
            preview_text: cmd.preview_text.clone(),
            media: None,
            source: "api",
        },
        SendContent::MediaFile { file, caption } => NewOutbound {
            account_id: st.record.account_id,
            channel_id: st.record.id,
            contact_phone: to.clone(),
            kind: MessageKind::parse(file.kind.as_str()),
            body: caption.clone(),
            template_name: None,
            template_language: None,
            params: None,
            preview_text: cmd.preview_text.clone(),
            media: Some(
                serde_json::json!({"url": file.url, "mime_type": file.mime, "size": file.bytes.len(), "filename": file.filename}),
            ),
            source: "api",
        },
        SendContent::Media { .. } | SendContent::Library { .. } => unreachable!("refused above"),
    };
    let queued = match st.shared.store.insert_outbound(&new).await {
        Ok(m) => m,
        Err(e) => return refuse(reply, e.into()),
    };
    let callback = format!("{CALLBACK_PREFIX}{}", queued.id);
    let prepared = match cmd.content {
        SendContent::Text { body } => Prepared::Ready(Box::new(
            SendMessageRequest::text(&to, &body).with_callback_data(callback),
        )),
        SendContent::Template {
            name,
            language,
            params,
            button_param,
        } => Prepared::Ready(Box::new(
            SendMessageRequest::template(
                &to,
                TemplatePayload::positional(&name, &language, &params, button_param.as_deref()),
            )
            .with_callback_data(callback),
        )),
        SendContent::MediaFile { file, caption } => Prepared::Upload {
            file,
            caption,
            to: to.clone(),
            callback,
        },
        SendContent::Media { .. } | SendContent::Library { .. } => unreachable!("refused above"),
    };

    let task = SendTask {
        shared: st.shared.clone(),
        record: st.record.clone(),
        token: st.secrets.access_token.clone(),
        in_flight: st.in_flight.clone(),
        myself,
    };
    tokio::spawn(task.run(queued, prepared, reply).in_current_span());
    Ok(())
}

/// A provider call made outside the actor's handler.
struct SendTask {
    shared: Arc<Shared>,
    record: Arc<ChannelRecord>,
    token: Secret,
    in_flight: Arc<Semaphore>,
    myself: ActorRef<ChannelMsg>,
}

impl SendTask {
    async fn run(
        self,
        queued: MessageRecord,
        prepared: Prepared,
        reply: RpcReplyPort<Result<MessageRecord, ActorError>>,
    ) {
        let Ok(_permit) = self.in_flight.clone().acquire_owned().await else {
            let _ = reply.send(Err(ActorError::Unavailable));
            return;
        };
        let store = &self.shared.store;
        if let Err(e) = store.mark_message_sending(queued.id).await {
            let _ = reply.send(Err(e.into()));
            return;
        }
        let channel_label = self.record.id.to_string();
        let graph = &self.shared.graph;
        let res = match prepared {
            Prepared::Ready(request) => {
                graph
                    .send_message(self.token.expose(), &self.record.phone_number_id, &request)
                    .await
            }
            Prepared::Upload {
                file,
                caption,
                to,
                callback,
            } => {
                match graph
                    .upload_media(
                        self.token.expose(),
                        &self.record.phone_number_id,
                        file.bytes.to_vec(),
                        &file.mime,
                        &file.filename,
                    )
                    .await
                {
                    Ok(media_id) => {
                        let object = provider::wire::MediaObject {
                            id: Some(media_id),
                            link: None,
                            caption: caption.filter(|_| file.kind.takes_caption()),
                            filename: (file.kind == engine::media::MediaKind::Document)
                                .then(|| file.filename.clone()),
                        };
                        let request = SendMessageRequest::media(&to, file.kind.as_str(), object)
                            .expect("the four media kinds have payload objects")
                            .with_callback_data(callback);
                        graph
                            .send_message(
                                self.token.expose(),
                                &self.record.phone_number_id,
                                &request,
                            )
                            .await
                    }
                    Err(e) => Err(e),
                }
            }
        };
        match res {
            Ok(resp) => {
                let Some(wamid) = resp.message_id().map(str::to_string) else {
                    let _ = reply.send(Err(ActorError::ProviderRefused {
                        kind: ErrorKind::Other,
                        code: None,
                        reason: "o provedor aceitou o envio sem devolver o id da mensagem".into(),
                    }));
                    return;
                };
                metrics::counter!("disparo_messages_sent_total", "channel_id" => channel_label)
                    .increment(1);
                let record = self.record.clone();
                let result = store
                    .mark_message_sent(queued.id, &wamid, |m| {
                        vec![events::message_sent(&record, m, now_ms())]
                    })
                    .await;
                let _ = self.myself.cast(ChannelMsg::Outcome(SendOutcome::Accepted));
                match result {
                    Ok((rec, n)) => {
                        if n > 0 {
                            self.shared.wake_dispatcher();
                        }
                        let _ = reply.send(Ok(rec));
                    }
                    Err(e) => {
                        // Accepted by the provider but not recorded: the status webhook, which
                        // carries our id in biz_opaque_callback_data, will settle the row.
                        tracing::error!(message_id = queued.id, error = %e, "could not record an accepted send");
                        let _ = reply.send(Err(e.into()));
                    }
                }
            }
            Err(e) => {
                let kind = e.kind();
                metrics::counter!("disparo_messages_failed_total", "channel_id" => channel_label, "kind" => format!("{kind:?}")).increment(1);
                let _ = self
                    .myself
                    .cast(ChannelMsg::Outcome(SendOutcome::Refused(kind)));
                if matches!(e, provider::ProviderError::Timeout) {
                    // In doubt: the provider may have accepted it. The row stays `sending`
                    // until a status webhook (carrying our id) settles it.
                    tracing::warn!(
                        message_id = queued.id,
                        "provider timed out; message left in doubt"
                    );
                } else {
                    let title = e.reason();
                    let code = e.code();
                    if let Err(se) = store
                        .mark_message_failed(queued.id, code, &title, None, now_ms())
                        .await
                    {
                        tracing::error!(message_id = queued.id, error = %se, "could not record a refused send");
                    }
                }
                let _ = reply.send(Err(e.into()));
            }
        }
    }
}

/// Applies a provider read of the number: status, quality, tier, name; a refused credential
/// marks the channel `credencial_invalida`.
async fn apply_sync(
    st: &mut ChannelState,
    res: Result<provider::wire::PhoneNumber, provider::ProviderError>,
) -> Result<ChannelSnapshot, ActorError> {
    match res {
        Ok(pn) => {
            let status = match pn.status.as_deref() {
                None | Some("CONNECTED") => ChannelStatus::Working,
                Some("PENDING") | Some("UNVERIFIED") => ChannelStatus::Pending,
                Some(_) => ChannelStatus::Disconnected,
            };
            if pn.status.as_deref() == Some("BANNED") {
                st.waba = WabaStanding::Banned;
            }
            if let Some(q) = pn.quality_rating.as_deref() {
                st.quality = Quality::parse(q);
            }
            if let Some(t) = pn.tier().and_then(Tier::parse) {
                st.tier = Some(t);
            }
            st.credential_valid = true;
            let tier = st.tier.as_ref().map(|t| t.as_str().to_string());
            st.shared
                .store
                .record_channel_sync(
                    st.record.id,
                    status.as_str(),
                    st.quality.as_str(),
                    tier.as_deref(),
                    pn.verified_name.as_deref(),
                )
                .await?;
            st.set_status(status).await;
            Ok(st.snapshot())
        }
        Err(e) => {
            if e.kind() == ErrorKind::InvalidCredential {
                st.set_credential_valid(false).await;
            }
            Err(e.into())
        }
    }
}

/// Admits each claimed recipient by the channel's rules at this moment (a RED event processed
/// before this batch stops it) and spawns its send; a refused one goes back to `planned`.
async fn dispatch(myself: ActorRef<ChannelMsg>, batch: Dispatch, st: &mut ChannelState) {
    let now = now_ms();
    for item in batch.items {
        if st
            .business_initiated_refusal(Some(&item.phone), now)
            .is_some()
        {
            if let Err(e) = st
                .shared
                .store
                .settle_recipient(item.recipient_id, item.message_id, "planned", None)
                .await
            {
                tracing::error!(error = %e, "could not return a recipient to the campaign");
            }
            continue;
        }
        st.count_business_initiated(&item.phone, now);
        st.campaign_in_flight += 1;
        let request = SendMessageRequest::template(
            &item.phone,
            TemplatePayload::positional(
                &batch.template_name,
                &batch.language,
                &item.params,
                item.button.as_deref(),
            ),
        )
        .with_callback_data(format!("{CALLBACK_PREFIX}{}", item.message_id));
        let task = CampaignSend {
            shared: st.shared.clone(),
            record: st.record.clone(),
            token: st.secrets.access_token.clone(),
            in_flight: st.in_flight.clone(),
            blocked: st.blocked.clone(),
            myself: myself.clone(),
        };
        tokio::spawn(
            task.run(item.recipient_id, item.message_id, request)
                .in_current_span(),
        );
    }
}

/// One campaign send, outside the actor's handler.
struct CampaignSend {
    shared: Arc<Shared>,
    record: Arc<ChannelRecord>,
    token: Secret,
    in_flight: Arc<Semaphore>,
    blocked: Arc<std::sync::atomic::AtomicBool>,
    myself: ActorRef<ChannelMsg>,
}

impl CampaignSend {
    async fn run(self, recipient_id: i64, message_id: i64, request: SendMessageRequest) {
        let store = &self.shared.store;
        let outcome = match self.in_flight.clone().acquire_owned().await {
            Err(_) => Err(None),
            // The channel turned RED (or was blocked) since this send was admitted: not sent.
            Ok(_) if self.blocked.load(std::sync::atomic::Ordering::Relaxed) => Err(None),
            Ok(_permit) => {
                let _ = store.mark_message_sending(message_id).await;
                if self.blocked.load(std::sync::atomic::Ordering::Relaxed) {
                    Err(None)
                } else {
                    match self
                        .shared
                        .graph
                        .send_message(self.token.expose(), &self.record.phone_number_id, &request)
                        .await
                    {
                        Ok(resp) => Ok(resp.message_id().map(str::to_string)),
                        Err(e) => Err(Some(e)),
                    }
                }
            }
        };
        let settled = match outcome {
            Ok(Some(wamid)) => {
                metrics::counter!("disparo_messages_sent_total", "channel_id" => self.record.id.to_string()).increment(1);
                let record = self.record.clone();
                let sent = store
                    .mark_message_sent(message_id, &wamid, |m| {
                        vec![events::message_sent(&record, m, now_ms())]
                    })
                    .await;
                if let Ok((_, n)) = &sent {
                    if *n > 0 {
                        self.shared.wake_dispatcher();
                    }
                }
                let _ = self.myself.cast(ChannelMsg::Outcome(SendOutcome::Accepted));
                store
                    .settle_recipient(recipient_id, message_id, "sent", None)
                    .await
            }
            Ok(None) | Err(None) => {
                store
                    .settle_recipient(recipient_id, message_id, "planned", None)
                    .await
            }
            Err(Some(e)) => {
                let kind = e.kind();
                let _ = self
                    .myself
                    .cast(ChannelMsg::Outcome(SendOutcome::Refused(kind)));
                match kind {
                    // Throttled: back to the campaign, another number or a later tick takes it.
                    ErrorKind::RateLimited | ErrorKind::PairRateLimited => {
                        store
                            .settle_recipient(recipient_id, message_id, "planned", None)
                            .await
                    }
                    // In doubt: the status webhook (with our id) settles the message.
                    _ if matches!(e, provider::ProviderError::Timeout) => Ok(()),
                    _ => {
                        let reason = e.reason();
                        let _ = store
                            .mark_message_failed(message_id, e.code(), &reason, None, now_ms())
                            .await;
                        store
                            .settle_recipient(recipient_id, message_id, "failed", Some(&reason))
                            .await
                    }
                }
            }
        };
        if let Err(e) = settled {
            tracing::error!(error = %e, recipient_id, "could not settle a campaign recipient");
        }
        let _ = self.myself.cast(ChannelMsg::CampaignSettled);
    }
}
