//! The simulator's outgoing webhooks: a scheduler that releases events when due, and an emitter
//! that batches them as the provider does under load (several statuses in one POST, §8.2),
//! escapes non-ASCII as `\uXXXX`, signs with the app secret and retries non-2xx answers.

use crate::signature;
use serde_json::{json, Map, Value};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, RwLock, Semaphore};
use tokio::time::Instant;

/// One event to deliver.
#[derive(Debug, Clone)]
pub(crate) struct Emission {
    /// Signs the POST; events of different apps never share a POST.
    pub app_secret: Arc<str>,
    /// `entry[].id`.
    pub waba_id: String,
    /// What to put in the change.
    pub kind: EmissionKind,
}

#[derive(Debug, Clone)]
pub(crate) enum EmissionKind {
    /// A `statuses[]` item of `field: messages`.
    Status {
        phone_number_id: String,
        display: String,
        status: Value,
    },
    /// A `messages[]` item (with its contact) of `field: messages`.
    Inbound {
        phone_number_id: String,
        display: String,
        contact: Value,
        message: Value,
    },
    /// Any other field with its whole value (quality, template status, account update).
    Change { field: &'static str, value: Value },
}

struct Scheduled {
    due: Instant,
    seq: u64,
    emission: Emission,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    // BinaryHeap is a max-heap: reverse so the earliest due pops first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.due, other.seq).cmp(&(self.due, self.seq))
    }
}

/// Handle for scheduling events.
#[derive(Clone)]
pub(crate) struct Outbox {
    delayed: mpsc::UnboundedSender<(Duration, Emission)>,
    now: mpsc::UnboundedSender<Emission>,
}

impl Outbox {
    /// Emits `e` after `delay` (at once when zero).
    pub fn emit_after(&self, delay: Duration, e: Emission) {
        if delay.is_zero() {
            let _ = self.now.send(e);
        } else {
            let _ = self.delayed.send((delay, e));
        }
    }
}

/// Settings of the emitter.
#[derive(Debug, Clone)]
pub(crate) struct EmitterConfig {
    pub batch_max: usize,
    pub batch_window: Duration,
    pub retry_ms: Vec<u64>,
    pub escape_unicode: bool,
    pub max_in_flight: usize,
}

/// Counters the control API reports.
#[derive(Debug, Default)]
pub(crate) struct EmitterStats {
    pub posts: std::sync::atomic::AtomicU64,
    pub events: std::sync::atomic::AtomicU64,
    pub retries: std::sync::atomic::AtomicU64,
    pub dropped: std::sync::atomic::AtomicU64,
}

/// Starts the scheduler and emitter tasks.
pub(crate) fn start(
    url: Arc<RwLock<Option<String>>>,
    cfg: EmitterConfig,
    stats: Arc<EmitterStats>,
) -> Outbox {
    let (delayed_tx, delayed_rx) = mpsc::unbounded_channel();
    let (now_tx, now_rx) = mpsc::unbounded_channel();
    tokio::spawn(scheduler(delayed_rx, now_tx.clone()));
    tokio::spawn(emitter(now_rx, url, cfg, stats));
    Outbox {
        delayed: delayed_tx,
        now: now_tx,
    }
}

async fn scheduler(
    mut rx: mpsc::UnboundedReceiver<(Duration, Emission)>,
    out: mpsc::UnboundedSender<Emission>,
) {
    let mut heap = BinaryHeap::<Scheduled>::new();
    let mut seq = 0u64;
    loop {
        let next_due = heap.peek().map(|s| s.due);
        tokio::select! {
            msg = rx.recv() => match msg {
                Some((delay, emission)) => {
                    seq += 1;
                    heap.push(Scheduled { due: Instant::now() + delay, seq, emission });
                }
                None => break,
            },
            _ = async { tokio::time::sleep_until(next_due.unwrap()).await }, if next_due.is_some() => {
                let now = Instant::now();
                while heap.peek().is_some_and(|s| s.due <= now) {
                    let s = heap.pop().expect("peeked");
                    if out.send(s.emission).is_err() {
                        return;
                    }
                }
            }
        }
    }
}

async fn emitter(
    mut rx: mpsc::UnboundedReceiver<Emission>,
    url: Arc<RwLock<Option<String>>>,
    cfg: EmitterConfig,
    stats: Arc<EmitterStats>,
) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(cfg.max_in_flight)
        .tcp_nodelay(true)
        .build()
        .expect("static reqwest settings");
    let permits = Arc::new(Semaphore::new(cfg.max_in_flight));
    let cfg = Arc::new(cfg);
    let mut batch = Vec::with_capacity(cfg.batch_max);
    while let Some(first) = rx.recv().await {
        batch.push(first);
        // Collect what is already queued, then wait up to the window for more.
        let deadline = Instant::now() + cfg.batch_window;
        while batch.len() < cfg.batch_max {
            match rx.try_recv() {
                Ok(e) => batch.push(e),
                Err(_) => match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(e)) => batch.push(e),
                    _ => break,
                },
            }
        }
        stats
            .events
            .fetch_add(batch.len() as u64, std::sync::atomic::Ordering::Relaxed);
        let target = url.read().await.clone();
        let Some(target) = target else {
            stats
                .dropped
                .fetch_add(batch.len() as u64, std::sync::atomic::Ordering::Relaxed);
            batch.clear();
            continue;
        };
        for (secret, body) in build_posts(std::mem::take(&mut batch), cfg.escape_unicode) {
            stats
                .posts
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let permit = permits.clone().acquire_owned().await.expect("never closed");
            let (http, target, cfg, stats) =
                (http.clone(), target.clone(), cfg.clone(), stats.clone());
            tokio::spawn(async move {
                let _permit = permit;
                deliver(&http, &target, &secret, body, &cfg, &stats).await;
            });
        }
    }
}

async fn deliver(
    http: &reqwest::Client,
    target: &str,
    secret: &str,
    body: String,
    cfg: &EmitterConfig,
    stats: &EmitterStats,
) {
    let sig = signature::sign(secret, body.as_bytes());
    let mut attempt = 0usize;
    loop {
        let res = http
            .post(target)
            .header("content-type", "application/json")
            .header(signature::HEADER, &sig)
            .body(body.clone())
            .send()
            .await;
        if matches!(&res, Ok(r) if r.status().is_success()) {
            return;
        }
        match cfg.retry_ms.get(attempt) {
            Some(ms) => {
                attempt += 1;
                stats
                    .retries
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(*ms)).await;
            }
            None => {
                stats
                    .dropped
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::debug!(target, "simulator dropped a webhook after its retries");
                return;
            }
        }
    }
}

/// Groups a batch into POST bodies: one per app secret, entries per WABA, and for `messages`
/// one change per business number carrying all of its statuses / messages.
fn build_posts(batch: Vec<Emission>, escape: bool) -> Vec<(Arc<str>, String)> {
    group_by_secret(batch)
        .into_iter()
        .map(|(secret, emissions)| {
            let payload = envelope(emissions);
            let text = serde_json::to_string(&payload).expect("JSON values serialise");
            let text = if escape {
                signature::escape_unicode(&text)
            } else {
                text
            };
            (secret, text)
        })
        .collect()
}

fn group_by_secret(batch: Vec<Emission>) -> Vec<(Arc<str>, Vec<Emission>)> {
    let mut groups: Vec<(Arc<str>, Vec<Emission>)> = Vec::new();
    for e in batch {
        match groups.iter_mut().find(|(s, _)| *s == e.app_secret) {
            Some((_, v)) => v.push(e),
            None => groups.push((e.app_secret.clone(), vec![e])),
        }
    }
    groups
}

fn envelope(emissions: Vec<Emission>) -> Value {
    // entry per WABA, in first-seen order.
    let mut entries: Vec<(String, Vec<Value>)> = Vec::new();
    // (waba, phone_number_id) -> index into that WABA's changes for `messages` values.
    let mut message_changes: Vec<(String, String, usize)> = Vec::new();
    let now_s = super::now_ms() / 1000;
    let mut has_time: Vec<String> = Vec::new();
    for e in emissions {
        let idx = match entries.iter().position(|(w, _)| *w == e.waba_id) {
            Some(i) => i,
            None => {
                entries.push((e.waba_id.clone(), Vec::new()));
                entries.len() - 1
            }
        };
        match e.kind {
            EmissionKind::Change { field, value } => {
                if !has_time.contains(&e.waba_id) {
                    has_time.push(e.waba_id.clone());
                }
                entries[idx].1.push(json!({"value": value, "field": field}));
            }
            EmissionKind::Status {
                phone_number_id,
                display,
                status,
            } => {
                let change = messages_change(
                    &mut entries[idx].1,
                    &mut message_changes,
                    &e.waba_id,
                    &phone_number_id,
                    &display,
                );
                // `contacts` accompanies non-failed statuses (PROVIDER.md §9.1), once per user.
                if status["status"] != "failed" {
                    if let Some(to) = status["recipient_id"].as_str() {
                        let known = change
                            .get("contacts")
                            .and_then(Value::as_array)
                            .is_some_and(|cs| cs.iter().any(|c| c["wa_id"] == to));
                        if !known {
                            push_array(
                                change,
                                "contacts",
                                json!({"wa_id": to, "user_id": bsuid(to)}),
                            );
                        }
                    }
                }
                push_array(change, "statuses", status);
            }
            EmissionKind::Inbound {
                phone_number_id,
                display,
                contact,
                message,
            } => {
                let change = messages_change(
                    &mut entries[idx].1,
                    &mut message_changes,
                    &e.waba_id,
                    &phone_number_id,
                    &display,
                );
                // `system` messages come without a `contacts` block (PROVIDER.md §9.1).
                if !contact.is_null() {
                    push_array(change, "contacts", contact);
                }
                push_array(change, "messages", message);
            }
        }
    }
    let entry: Vec<Value> = entries
        .into_iter()
        .map(|(waba, changes)| {
            let mut m = Map::new();
            m.insert("id".into(), Value::String(waba.clone()));
            if has_time.contains(&waba) {
                m.insert("time".into(), json!(now_s));
            }
            m.insert("changes".into(), Value::Array(changes));
            Value::Object(m)
        })
        .collect();
    json!({"object": "whatsapp_business_account", "entry": entry})
}

fn messages_change<'a>(
    changes: &'a mut Vec<Value>,
    index: &mut Vec<(String, String, usize)>,
    waba: &str,
    phone_number_id: &str,
    display: &str,
) -> &'a mut Map<String, Value> {
    let pos = index
        .iter()
        .find(|(w, p, _)| w == waba && p == phone_number_id)
        .map(|(_, _, i)| *i);
    let i = match pos {
        Some(i) => i,
        None => {
            changes.push(json!({
                "value": {
                    "messaging_product": "whatsapp",
                    "metadata": {"display_phone_number": display, "phone_number_id": phone_number_id}
                },
                "field": "messages"
            }));
            index.push((
                waba.to_string(),
                phone_number_id.to_string(),
                changes.len() - 1,
            ));
            changes.len() - 1
        }
    };
    changes[i]["value"]
        .as_object_mut()
        .expect("built as an object")
}

/// The business-scoped user id of a user (PROVIDER.md §9.8: `"US.1349…"`, the region and 20
/// digits, in webhooks since April 2026): repeatable per phone here, the region from the
/// country code (55 BR, 1 US, else ZZ).
pub(crate) fn bsuid(wa_id: &str) -> String {
    use sha2::Digest;
    let region = if wa_id.starts_with("55") {
        "BR"
    } else if wa_id.starts_with('1') {
        "US"
    } else {
        "ZZ"
    };
    let digest = sha2::Sha256::digest(wa_id.as_bytes());
    let digits: String = digest
        .iter()
        .take(20)
        .map(|b| char::from(b'0' + b % 10))
        .collect();
    format!("{region}.{digits}")
}

fn push_array(obj: &mut Map<String, Value>, key: &str, item: Value) {
    match obj.get_mut(key) {
        Some(Value::Array(a)) => a.push(item),
        _ => {
            obj.insert(key.to_string(), Value::Array(vec![item]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{ChangeValue, WebhookPayload};

    fn status(n: &str, id: &str) -> Emission {
        Emission {
            app_secret: Arc::from("s1"),
            waba_id: "w1".into(),
            kind: EmissionKind::Status {
                phone_number_id: n.into(),
                display: "5511".into(),
                status: json!({"id": id, "status": "sent", "timestamp": "1", "recipient_id": "55119"}),
            },
        }
    }

    #[test]
    fn a_batch_groups_statuses_per_number_and_parses_as_a_provider_payload() {
        let posts = build_posts(
            vec![status("p1", "a"), status("p1", "b"), status("p2", "c")],
            true,
        );
        assert_eq!(posts.len(), 1);
        let p: WebhookPayload = serde_json::from_str(&posts[0].1).unwrap();
        assert_eq!(p.entry.len(), 1);
        assert_eq!(p.entry[0].changes.len(), 2);
        match p.entry[0].changes[0].parse().unwrap() {
            ChangeValue::Messages(m) => assert_eq!(m.statuses.len(), 2),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn different_apps_never_share_a_post_and_non_ascii_is_escaped() {
        let mut other = status("p9", "z");
        other.app_secret = Arc::from("s2");
        let mut inbound = status("p1", "a");
        inbound.kind = EmissionKind::Inbound {
            phone_number_id: "p1".into(),
            display: "5511".into(),
            contact: json!({"profile": {"name": "João"}, "wa_id": "5511"}),
            message: json!({"from": "5511", "id": "m", "timestamp": "1", "type": "text", "text": {"body": "olá"}}),
        };
        let posts = build_posts(vec![inbound, other], true);
        assert_eq!(posts.len(), 2);
        assert!(posts[0].1.is_ascii());
        assert!(posts[0].1.contains("Jo\\u00e3o"));
    }
}
