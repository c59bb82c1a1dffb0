//! Changes to a number's live state that arrive at a node not running it (cluster mode, issue
//! 52, `CLUSTER.md` "Routing"): a provider webhook's quality, tier, WABA standing or new
//! verified name is forwarded over NATS core request/reply to the node that runs the number,
//! and the webhook is answered only once that node took it (else 503: the provider retries).
//! The node running a number listens on `dsp.ch.<channel id>.ctl` while it runs it. Every
//! request and reply is signed under a key derived from the master key, bound to its subject
//! (a reply to its request), accepted within 30 s and once ([`engine::cluster::seal`],
//! D-111): a NATS client that is not a node of this cluster is answered nothing.

use super::wire::{AskAnswer, ChannelAsk, RemoteSend, SendAnswer};
use crate::error::ActorError;
use crate::protocol::ChannelMsg;
use crate::{Runtime, Shared};
use engine::channel::{Quality, WabaStanding};
use engine::cluster::seal;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A change to a number's live state, as it travels to the node running it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Control {
    /// `phone_number_quality_update`: new quality and tier, when the event sent at `at` (ms)
    /// carried them.
    Quality {
        /// New quality.
        quality: Option<Quality>,
        /// New tier.
        tier: Option<String>,
        /// When the provider sent it, ms.
        at: i64,
    },
    /// `account_update`: the WABA's standing (already stored).
    Standing(WabaStanding),
    /// The record changed in storage (a new verified name): read it again.
    Reload,
    /// Read the live state (answered with a [`LiveState`]).
    Snapshot,
    /// A 1:1 send (answered with a [`SendAnswer`]).
    Send(Box<RemoteSend>),
    /// The BM's payment is in order again (the lock is already cleared in storage).
    PaymentReleased,
    /// Whether a library template is missing on the number and whether one of its templates
    /// has RED quality (health `template_ausente`, `template_qualidade_baixa`).
    TemplateFlags {
        /// A template is missing.
        missing: bool,
        /// A template's quality is RED.
        quality_red: bool,
    },
    /// A question to the number's actor (answered with an [`AskAnswer`]).
    Ask(ChannelAsk),
    /// How many campaign sends the number takes now (a campaign coordinator's question,
    /// D-123): answered with `[count, health code or null]`.
    Credits,
    /// Claim and hand out campaign recipients through the number (a coordinator's grant,
    /// D-123): answered with how many were claimed.
    Grant(CampaignGrant),
    /// Halt this node's copy of a campaign (published to every node on [`HALT_SUBJECT`], not
    /// to a number's subject): answered once no provider call of it runs here.
    HaltCampaign(i64),
}

/// A campaign coordinator's grant to the node running a number (D-123).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CampaignGrant {
    /// The campaign.
    pub campaign_id: i64,
    /// Its account.
    pub account_id: i64,
    /// How many recipients to claim at most.
    pub count: usize,
    /// Claim the recipients a resend pinned to the number (else the unpinned ones).
    pub pinned: bool,
}

/// The subject every node listens on for campaign halts.
pub const HALT_SUBJECT: &str = "dsp.campaigns.halt";

/// A number's live state as its node answers [`Control::Snapshot`]: the record's live fields
/// and the health object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveState {
    /// `status`.
    pub status: String,
    /// `quality`.
    pub quality: String,
    /// `tier`.
    pub tier: Option<String>,
    /// Whether the credential works.
    pub credential_valid: bool,
    /// The payment lock, ms.
    pub payment_locked_until: Option<i64>,
    /// The health object.
    pub health: engine::channel::Health,
}

impl LiveState {
    /// The live part of a snapshot taken where the number runs.
    pub fn of(s: crate::protocol::ChannelSnapshot) -> Self {
        LiveState {
            status: s.record.status,
            quality: s.record.quality,
            tier: s.record.tier,
            credential_valid: s.record.credential_valid,
            payment_locked_until: s.record.payment_locked_until,
            health: s.health,
        }
    }
}

/// What the node running the number answers to a change it took.
const TAKEN: &[u8] = b"ok";

/// The subject a number's node listens on.
fn subject(channel_id: i64) -> String {
    format!("dsp.ch.{channel_id}.ctl")
}

/// Hands `control` to the node running `channel_id` and waits until it took it. "No
/// responders" (the number is moving between nodes) and timeouts are retried every 100 ms for
/// up to twice the lease TTL. Errors: [`ActorError::Unavailable`] when no node took it by
/// then (the webhook answers 503 and the provider retries).
pub async fn forward_control(
    shared: &Shared,
    channel_id: i64,
    control: &Control,
) -> Result<(), ActorError> {
    ask_owner(
        shared,
        channel_id,
        control,
        Duration::from_secs(2),
        |answer| (answer == TAKEN).then_some(()),
    )
    .await
}

/// The live state of `channel_id` from the node that runs it; retried as
/// [`forward_control`]. Errors: [`ActorError::Unavailable`].
pub async fn remote_snapshot(shared: &Shared, channel_id: i64) -> Result<LiveState, ActorError> {
    ask_owner(
        shared,
        channel_id,
        &Control::Snapshot,
        Duration::from_secs(2),
        |answer| serde_json::from_slice(answer).ok(),
    )
    .await
}

/// Puts `ask` to the actor of `channel_id` on the node that runs it and returns its answer
/// (each try waits as long as a local ask would, plus a second); retried as
/// [`forward_control`] (every [`ChannelAsk`] may be repeated: each sets or reads). Errors:
/// the ask's own, as that node answered them; [`ActorError::Unavailable`] when none did.
pub async fn remote_ask(
    shared: &Shared,
    channel_id: i64,
    ask: ChannelAsk,
) -> Result<AskAnswer, ActorError> {
    let wait = shared.config.call_timeout + Duration::from_secs(1);
    match ask_owner(shared, channel_id, &Control::Ask(ask), wait, |answer| {
        serde_json::from_slice::<AskAnswer>(answer).ok()
    })
    .await?
    {
        AskAnswer::Failed(e) => Err(e.into()),
        answer => Ok(answer),
    }
}

/// Hands a 1:1 send to the node running `channel_id` and returns the stored message's id.
/// "No responders" and "gone" (nothing was sent) are retried every 100 ms while the caller's
/// budget and twice the lease TTL last; a request that times out is not retried (the send
/// may have been made: the caller's idempotency key decides). Errors: the send's own, as the
/// node running the number answered them; [`ActorError::Unavailable`] when none did.
pub async fn remote_send(
    shared: &Shared,
    channel_id: i64,
    mut send: RemoteSend,
) -> Result<i64, ActorError> {
    let Some(cluster) = shared.cluster.as_ref() else {
        return Err(ActorError::Unavailable);
    };
    let started = tokio::time::Instant::now();
    let budget = Duration::from_millis(send.budget_ms);
    let give_up = started + budget.min(2 * cluster.settings.lease_ttl);
    loop {
        let left = budget.saturating_sub(started.elapsed());
        send.budget_ms = left.as_millis() as u64;
        let payload = serde_json::to_vec(&Control::Send(Box::new(send.clone())))
            .map_err(|_| ActorError::Unavailable)?;
        let asked = ask_once(shared, channel_id, &payload, left + Duration::from_secs(1)).await;
        match asked {
            Asked::Answer(answer) => match serde_json::from_slice::<SendAnswer>(&answer) {
                Ok(SendAnswer::Sent(id)) => return Ok(id),
                Ok(SendAnswer::Failed(e)) => return Err(e.into()),
                // "gone": the number stopped there before the send; nothing was sent.
                Err(_) => {}
            },
            Asked::NoResponders => {}
            Asked::Failed => {
                tracing::warn!(channel_id, "a forwarded send got no answer in time");
                return Err(ActorError::Unavailable);
            }
        }
        if tokio::time::Instant::now() >= give_up {
            return Err(ActorError::Unavailable);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The campaign credits of `channel_id` from the node that runs it (one try of at most
/// 500 ms: a coordinator's tick does not wait for a node that cannot answer); `None` when no
/// node answered (the number is moving, or its node is slow), which the coordinator counts
/// as "elsewhere": no credit, no refusal.
pub async fn remote_credits(
    shared: &Shared,
    channel_id: i64,
) -> Option<(usize, Option<engine::channel::HealthCode>)> {
    let payload = serde_json::to_vec(&Control::Credits).ok()?;
    match ask_once(shared, channel_id, &payload, Duration::from_millis(500)).await {
        Asked::Answer(answer) => serde_json::from_slice(&answer).ok(),
        Asked::NoResponders | Asked::Failed => None,
    }
}

/// Hands a coordinator's grant to the node running `channel_id` (one try, as long as a claim
/// may take) and returns how many recipients it claimed there; 0 when no node answered (a
/// grant that timed out may still have been claimed: the claims are the storage's, so
/// nothing is sent twice — only the coordinator's count of the number's share is short).
pub async fn remote_grant(shared: &Shared, channel_id: i64, grant: CampaignGrant) -> usize {
    let Ok(payload) = serde_json::to_vec(&Control::Grant(grant)) else {
        return 0;
    };
    let wait = shared.config.call_timeout + Duration::from_secs(1);
    match ask_once(shared, channel_id, &payload, wait).await {
        Asked::Answer(answer) => serde_json::from_slice(&answer).unwrap_or(0),
        Asked::NoResponders | Asked::Failed => 0,
    }
}

/// Halts campaign `campaign_id`'s copy on every live node (a pause, cancel or the dispatch
/// switch at any node, D-123) and waits until each answered — at most the provider timeout
/// plus twice the lease TTL: a node that does not answer by then is frozen or gone, and its
/// fences have closed. This node's own copy answers too (it was halted already).
pub async fn halt_everywhere(shared: &Shared, campaign_id: i64) {
    let Some(cluster) = shared.cluster.as_ref() else {
        return;
    };
    let nodes = cluster.view().nodes.len();
    let settings = &cluster.settings;
    let Ok(body) = serde_json::to_vec(&Control::HaltCampaign(campaign_id)) else {
        return;
    };
    let now_ms = shared.config.clock.now_ms();
    let (bytes, tag) = seal::seal_request(
        &settings.seal_key,
        HALT_SUBJECT,
        now_ms,
        rand::random(),
        &body,
    );
    let inbox = settings.nats.new_inbox();
    let mut replies = match settings.nats.subscribe(inbox.clone()).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(campaign_id, error = %e, "campaign halt not published");
            return;
        }
    };
    if let Err(e) = settings
        .nats
        .publish_with_reply(HALT_SUBJECT, inbox, bytes.into())
        .await
    {
        tracing::warn!(campaign_id, error = %e, "campaign halt not published");
        return;
    }
    let deadline =
        tokio::time::Instant::now() + shared.config.call_timeout + 2 * settings.lease_ttl;
    let mut halted = 0;
    while halted < nodes {
        match tokio::time::timeout_at(deadline, replies.next()).await {
            Ok(Some(m)) if seal::open_reply(&settings.seal_key, &tag, &m.payload).is_ok() => {
                halted += 1;
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break,
        }
    }
    if halted < nodes {
        tracing::warn!(
            campaign_id,
            halted,
            nodes,
            "not every node confirmed a campaign halt in time"
        );
    }
}

/// Serves [`HALT_SUBJECT`] on this node (cluster mode): a signed halt of a campaign stops
/// this node's copy of it and is answered once no provider call of it runs here.
pub(crate) async fn listen_halts(rt: Runtime) {
    let Some(cluster) = rt.shared.cluster.as_ref() else {
        return;
    };
    let nats = cluster.settings.nats.clone();
    let key = cluster.settings.seal_key.clone();
    let mut sub = match nats.subscribe(HALT_SUBJECT).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "campaign halts not subscribed");
            return;
        }
    };
    let mut replays = seal::Replays::default();
    while let Some(msg) = sub.next().await {
        let now_ms = rt.shared.config.clock.now_ms();
        let Some((tag, _, Ok(Control::HaltCampaign(campaign_id)))) =
            admit(&key, HALT_SUBJECT, now_ms, &mut replays, &msg.payload)
        else {
            continue;
        };
        let (rt, nats, key) = (rt.clone(), nats.clone(), key.clone());
        tokio::spawn(async move {
            if let Err(e) = rt.halt_campaign_here(campaign_id).await {
                tracing::warn!(campaign_id, error = %e, "campaign copy not halted");
                return;
            }
            if let Some(reply) = msg.reply {
                let _ = nats
                    .publish(reply, seal::seal_reply(&key, &tag, TAKEN).into())
                    .await;
            }
        });
    }
}

/// What one signed request to a number's node gave.
enum Asked {
    /// A reply signed by a node of this cluster, bound to the request: its body.
    Answer(Vec<u8>),
    /// Nobody listens on the subject (the number is moving between nodes).
    NoResponders,
    /// No (valid) reply in time.
    Failed,
}

/// Signs `body` for `channel_id`'s control subject ([`engine::cluster::seal`], D-111), asks
/// and opens the reply; a reply not signed for this very request counts as none.
async fn ask_once(shared: &Shared, channel_id: i64, body: &[u8], wait: Duration) -> Asked {
    let Some(cluster) = shared.cluster.as_ref() else {
        return Asked::Failed;
    };
    let settings = &cluster.settings;
    let subject = subject(channel_id);
    let now_ms = shared.config.clock.now_ms();
    let (bytes, tag) =
        seal::seal_request(&settings.seal_key, &subject, now_ms, rand::random(), body);
    match tokio::time::timeout(wait, settings.nats.request(subject, bytes.into())).await {
        Ok(Ok(answer)) => match seal::open_reply(&settings.seal_key, &tag, &answer.payload) {
            Ok(body) => Asked::Answer(body.to_vec()),
            Err(e) => {
                tracing::warn!(channel_id, error = ?e, "a reply not signed by a node of this cluster was ignored");
                metrics::counter!("disparo_cluster_refused_messages_total", "reason" => "reply")
                    .increment(1);
                Asked::Failed
            }
        },
        Ok(Err(e)) if e.kind() == async_nats::RequestErrorKind::NoResponders => Asked::NoResponders,
        _ => Asked::Failed,
    }
}

/// Asks the node running `channel_id` until `read` accepts its answer or twice the lease TTL
/// passed ("no responders" while the number moves, a timeout, or "gone" from a node that just
/// stopped it are retried every 100 ms).
async fn ask_owner<T>(
    shared: &Shared,
    channel_id: i64,
    control: &Control,
    wait: Duration,
    read: impl Fn(&[u8]) -> Option<T>,
) -> Result<T, ActorError> {
    let Some(cluster) = shared.cluster.as_ref() else {
        return Err(ActorError::Unavailable);
    };
    let payload = serde_json::to_vec(control).map_err(|_| ActorError::Unavailable)?;
    let give_up = tokio::time::Instant::now() + 2 * cluster.settings.lease_ttl;
    loop {
        if let Asked::Answer(answer) = ask_once(shared, channel_id, &payload, wait).await {
            if let Some(v) = read(&answer) {
                return Ok(v);
            }
        }
        if tokio::time::Instant::now() >= give_up {
            tracing::warn!(
                channel_id,
                "the node running a number did not answer in time"
            );
            return Err(ActorError::Unavailable);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Serves `channel_id`'s control subject while this node runs it: ends when the task running
/// it is aborted (the number stops here; the subscription is dropped) or the connection
/// closes for good.
pub(crate) async fn listen(rt: Runtime, channel_id: i64) {
    let Some(cluster) = rt.shared.cluster.as_ref() else {
        return;
    };
    let nats = cluster.settings.nats.clone();
    let key = cluster.settings.seal_key.clone();
    let subject = subject(channel_id);
    let mut sub = match nats.subscribe(subject.clone()).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(channel_id, error = %e, "number's control subject not subscribed");
            return;
        }
    };
    let mut replays = seal::Replays::default();
    while let Some(msg) = sub.next().await {
        let now_ms = rt.shared.config.clock.now_ms();
        let Some((tag, sent_at_ms, control)) =
            admit(&key, &subject, now_ms, &mut replays, &msg.payload)
        else {
            continue;
        };
        let answer = match control {
            // A send or an ask runs as long as the provider takes: the next message does not
            // wait.
            Ok(control @ (Control::Send(_) | Control::Ask(_) | Control::Grant(_))) => {
                let (rt, nats, key) = (rt.clone(), nats.clone(), key.clone());
                tokio::spawn(async move {
                    if !first_in_cluster(&rt, channel_id, &control, &tag, sent_at_ms).await {
                        return;
                    }
                    let answer = apply(&rt, channel_id, control)
                        .await
                        .unwrap_or_else(|| b"gone".to_vec());
                    if let Some(reply) = msg.reply {
                        let _ = nats
                            .publish(reply, seal::seal_reply(&key, &tag, &answer).into())
                            .await;
                    }
                });
                continue;
            }
            Ok(control) => {
                if !first_in_cluster(&rt, channel_id, &control, &tag, sent_at_ms).await {
                    continue;
                }
                apply(&rt, channel_id, control).await
            }
            Err(e) => {
                tracing::warn!(channel_id, error = %e, "unreadable control message");
                None
            }
        };
        if let Some(reply) = msg.reply {
            let body = answer.unwrap_or_else(|| b"gone".to_vec());
            let _ = nats
                .publish(reply, seal::seal_reply(&key, &tag, &body).into())
                .await;
        }
    }
}

/// Counts and logs a control message refused without an answer.
fn refused(subject: &str, reason: &'static str) {
    tracing::warn!(
        subject,
        reason,
        "control message refused: not a signed request of this cluster"
    );
    metrics::counter!("disparo_cluster_refused_messages_total", "reason" => reason).increment(1);
}

/// Whether `control` may change something where it is applied: every control but a read of
/// the live state or of the guardrails.
fn changes_state(control: &Control) -> bool {
    !matches!(
        control,
        Control::Snapshot
            | Control::Credits
            | Control::HaltCampaign(_)
            | Control::Ask(super::wire::ChannelAsk::Guardrails)
    )
}

/// Whether a state-changing request is served for the first time anywhere in the cluster
/// (D-118): its tag is recorded in storage, so a request captured on the wire and replayed
/// to another node — the number having moved there within the window — is refused there
/// too (each listener's own memory, [`seal::Replays`], only catches a replay to itself).
/// A read is always served; a storage error refuses (the asker retries or answers 503).
async fn first_in_cluster(
    rt: &Runtime,
    channel_id: i64,
    control: &Control,
    tag: &seal::Tag,
    sent_at_ms: i64,
) -> bool {
    if !changes_state(control) {
        return true;
    }
    let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
    match rt
        .shared
        .store
        .admit_cluster_request(&hex, sent_at_ms)
        .await
    {
        Ok(true) => true,
        Ok(false) => {
            refused(&subject(channel_id), "replayed");
            false
        }
        Err(e) => {
            tracing::warn!(error = %e, "a control request could not be recorded; not served");
            false
        }
    }
}

/// What [`admit`] accepted: the request's tag, when it was sent (ms) and its decoded control.
type Admitted = (seal::Tag, i64, Result<Control, serde_json::Error>);

/// Opens a message received on a control subject: signed by a node of this cluster for this
/// subject, within the window and not seen before by this listener (D-111). Anything else is
/// refused without an answer (logged and counted).
fn admit(
    key: &seal::SealKey,
    subject: &str,
    now_ms: i64,
    replays: &mut seal::Replays,
    payload: &[u8],
) -> Option<Admitted> {
    let refused = |reason: &'static str| refused(subject, reason);
    match seal::open_request(key, subject, now_ms, payload) {
        Ok(opened) if replays.admit(&opened, now_ms) => Some((
            opened.tag,
            opened.sent_at_ms,
            serde_json::from_slice::<Control>(opened.body),
        )),
        Ok(_) => {
            refused("replayed");
            None
        }
        Err(seal::SealError::Stale) => {
            refused("stale");
            None
        }
        Err(_) => {
            refused("signature");
            None
        }
    }
}

/// Gives a change (or a snapshot request) to the local actor of `channel_id`; its answer
/// (`None`: the number does not run here, or its actor did not take it).
pub(crate) async fn apply(rt: &Runtime, channel_id: i64, control: Control) -> Option<Vec<u8>> {
    let shared = &rt.shared;
    let entry = shared.registry.get(channel_id)?;
    let timeout = shared.config.call_timeout;
    let taken = match control {
        Control::Quality { quality, tier, at } => entry
            .actor
            .cast(ChannelMsg::QualityUpdate { quality, tier, at })
            .is_ok(),
        Control::Standing(standing) => entry.actor.cast(ChannelMsg::WabaStanding(standing)).is_ok(),
        Control::PaymentReleased => entry.actor.cast(ChannelMsg::PaymentReleased).is_ok(),
        Control::TemplateFlags {
            missing,
            quality_red,
        } => entry
            .actor
            .cast(ChannelMsg::TemplateFlags {
                missing,
                quality_red,
            })
            .is_ok(),
        Control::Ask(ask) => {
            let answer = match crate::located::answer_here(rt, &entry.actor, channel_id, ask).await
            {
                Ok(answered) => answered.into_wire(),
                Err(e) => AskAnswer::Failed(e.into()),
            };
            return serde_json::to_vec(&answer).ok();
        }
        Control::Reload => crate::ask(&entry.actor, ChannelMsg::Reload, timeout)
            .await
            .is_ok_and(|r| r.is_ok()),
        Control::Snapshot => {
            let s = crate::ask(&entry.actor, ChannelMsg::Snapshot, timeout)
                .await
                .ok()?;
            return serde_json::to_vec(&LiveState::of(s)).ok();
        }
        Control::Send(send) => return Some(serve_send(rt, channel_id, *send).await),
        Control::Credits => {
            let credits = crate::ask(&entry.actor, ChannelMsg::CampaignCredits, timeout)
                .await
                .ok()?;
            return serde_json::to_vec(&credits).ok();
        }
        Control::Grant(grant) => {
            return serde_json::to_vec(&serve_grant(rt, channel_id, grant).await).ok()
        }
        // Halts travel on their own subject.
        Control::HaltCampaign(_) => false,
    };
    taken.then(|| TAKEN.to_vec())
}

/// Serves a coordinator's grant for `channel_id` (running here) through this node's copy of
/// the campaign, started if needed; how many recipients it claimed.
async fn serve_grant(rt: &Runtime, channel_id: i64, grant: CampaignGrant) -> usize {
    if !rt.campaign_copy(grant.campaign_id, grant.account_id).await {
        return 0;
    }
    let Some(copy) = rt.campaign_actor(grant.campaign_id) else {
        return 0;
    };
    let asked = crate::ask(
        &copy,
        |reply| crate::campaign::CampaignMsg::Grant {
            channel_id,
            count: grant.count,
            pinned: grant.pinned,
            reply,
        },
        rt.shared.config.call_timeout,
    )
    .await;
    asked.unwrap_or(0)
}

/// Runs a forwarded 1:1 send here; the answer's bytes (`gone` when the number does not run
/// here: nothing was sent).
async fn serve_send(rt: &Runtime, channel_id: i64, send: RemoteSend) -> Vec<u8> {
    let account_id = send.account_id;
    let budget = Duration::from_millis(send.budget_ms);
    let answer = match send.command() {
        Ok(cmd) => match rt.send_here(account_id, channel_id, cmd, budget).await {
            Err(ActorError::NotFound) if rt.shared.registry.get(channel_id).is_none() => {
                return b"gone".to_vec();
            }
            Ok(m) => SendAnswer::Sent(m.id),
            Err(e) => SendAnswer::Failed(e.into()),
        },
        Err(e) => SendAnswer::Failed(e.into()),
    };
    serde_json::to_vec(&answer).unwrap_or_else(|_| b"gone".to_vec())
}
