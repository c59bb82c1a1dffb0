//! Request limits per cluster, not per node (issue 52): the account API's per-token limit,
//! the public sender's 120/min and the panel's login attempt limits count every node's
//! admissions. Each node counts its own as it admits them (no round trip in the request
//! path) and, every [`SHARE_EVERY`], publishes what it admitted since the last time on
//! `dsp.limits` (signed as every message between nodes, D-111); every node adds the others'
//! to its own limiters. A client spreading its requests over the nodes gets the quota once,
//! give or take what the nodes admitted in the last [`SHARE_EVERY`] before they heard of each
//! other (D-112). NATS away, each node limits alone, as on one node.

use crate::Runtime;
use engine::cluster::seal;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// How often a node publishes its admissions.
pub const SHARE_EVERY: Duration = Duration::from_millis(200);

/// The subject admissions travel on.
const SUBJECT: &str = "dsp.limits";

/// A limit whose admissions every node counts. Implemented by the HTTP layer's limiters;
/// the gossip task calls it.
pub trait ClusterLimit: Send + Sync + 'static {
    /// The limit's name, the same on every node (`token`, `sender`, `login`).
    fn name(&self) -> &'static str;
    /// Starts keeping this node's admissions for [`ClusterLimit::drain`] (on one node nothing
    /// is kept).
    fn share(&self);
    /// This node's admissions since the last call, by key (a token id, a hashed e-mail…).
    fn drain(&self) -> Vec<(String, u32)>;
    /// Counts `n` admissions another node made for `key` just now.
    fn absorb(&self, key: &str, n: u32);
}

/// One node's admissions of one limit since its last tally.
#[derive(Debug, Serialize, Deserialize)]
struct Tally {
    node: String,
    limit: String,
    counts: Vec<(String, u32)>,
}

impl Runtime {
    /// Cluster mode: shares `limits`' admissions with the other nodes (a task that publishes
    /// this node's every [`SHARE_EVERY`] and one that adds the others'). Nothing on one node.
    pub fn share_limits(&self, limits: Vec<Arc<dyn ClusterLimit>>) {
        let Some(cluster) = self.shared.cluster.as_ref() else {
            return;
        };
        if limits.is_empty() {
            return;
        }
        for l in &limits {
            l.share();
        }
        let settings = cluster.settings.clone();
        let clock = self.shared.config.clock.clone();
        let limits: Arc<[Arc<dyn ClusterLimit>]> = limits.into();
        let (s, c, l) = (settings.clone(), clock.clone(), limits.clone());
        tokio::spawn(async move { publish(s, c, l).await });
        tokio::spawn(async move { absorb(settings, clock, limits).await });
    }
}

async fn publish(
    settings: super::ClusterSettings,
    clock: crate::clock::Clock,
    limits: Arc<[Arc<dyn ClusterLimit>]>,
) {
    let mut every = tokio::time::interval(SHARE_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        for limit in limits.iter() {
            let counts = limit.drain();
            if counts.is_empty() {
                continue;
            }
            let tally = Tally {
                node: settings.node_id.clone(),
                limit: limit.name().to_string(),
                counts,
            };
            let Ok(body) = serde_json::to_vec(&tally) else {
                continue;
            };
            let (bytes, _) = seal::seal_request(
                &settings.seal_key,
                SUBJECT,
                clock.now_ms(),
                rand::random(),
                &body,
            );
            // NATS away: this node limits alone until it is back (the tally is lost).
            if let Err(e) = settings.nats.publish(SUBJECT, bytes.into()).await {
                tracing::debug!(error = %e, "limit tally not published");
            }
        }
    }
}

async fn absorb(
    settings: super::ClusterSettings,
    clock: crate::clock::Clock,
    limits: Arc<[Arc<dyn ClusterLimit>]>,
) {
    let mut sub = match settings.nats.subscribe(SUBJECT).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "limit tallies not subscribed: limits count this node only");
            return;
        }
    };
    let mut replays = seal::Replays::default();
    while let Some(msg) = sub.next().await {
        let now_ms = clock.now_ms();
        let opened = match seal::open_request(&settings.seal_key, SUBJECT, now_ms, &msg.payload) {
            Ok(o) if replays.admit(&o, now_ms) => o,
            _ => {
                tracing::warn!("limit tally refused: not a signed message of this cluster");
                metrics::counter!("disparo_cluster_refused_messages_total", "reason" => "tally")
                    .increment(1);
                continue;
            }
        };
        let Ok(tally) = serde_json::from_slice::<Tally>(opened.body) else {
            continue;
        };
        if tally.node == settings.node_id {
            continue;
        }
        if let Some(limit) = limits.iter().find(|l| l.name() == tally.limit) {
            for (key, n) in &tally.counts {
                limit.absorb(key, *n);
            }
        }
    }
}
