//! The registry of running channel actors, owned by the runtime (not ractor's global names):
//! by channel id, and by the provider's phone number id for routing provider webhooks.

use crate::protocol::ChannelMsg;
use dashmap::DashMap;
use engine::Secret;
use ractor::ActorRef;
use std::sync::Arc;

/// What the router of provider webhooks needs to know about a running channel.
#[derive(Debug, Clone)]
pub struct ChannelEntry {
    /// Channel id.
    pub channel_id: i64,
    /// Owning account.
    pub account_id: i64,
    /// Provider phone number id.
    pub phone_number_id: String,
    /// Provider WABA id.
    pub waba_id: String,
    /// Display digits (quality updates name the number by it).
    pub phone: String,
    /// App secret that signs this number's webhooks, if the channel has its own.
    pub app_secret: Option<Secret>,
    /// Verify token of the channel's own receiver.
    pub verify_token: String,
    /// The actor.
    pub actor: ActorRef<ChannelMsg>,
}

/// Running channels and, in cluster mode, the channels other nodes run (for the webhook
/// ingest only).
#[derive(Debug, Default)]
pub struct Registry {
    by_id: DashMap<i64, Arc<ChannelEntry>>,
    by_phone_number_id: DashMap<String, i64>,
    elsewhere: DashMap<i64, Arc<RemoteChannel>>,
    elsewhere_by_phone_number_id: DashMap<String, i64>,
}

/// A channel another node runs (cluster mode, issue 52): what verifying its provider webhooks
/// here and applying their statuses and inbound messages needs; changes to its live state go
/// to its node ([`crate::cluster::forward_control`]).
#[derive(Debug, Clone)]
pub struct RemoteChannel {
    /// Its stored record (for the events its statuses and messages write).
    pub record: Arc<storage::channels::ChannelRecord>,
    /// App secret that signs its webhooks, if the channel has its own.
    pub app_secret: Option<Secret>,
}

/// A channel a provider webhook concerns, as the ingest holds it: running here (its actor) or
/// on another node (cluster mode).
#[derive(Debug, Clone)]
pub enum Signer {
    /// Its actor runs here.
    Here(Arc<ChannelEntry>),
    /// Another node runs it.
    Elsewhere(Arc<RemoteChannel>),
}

impl Signer {
    /// The channel's id.
    pub fn channel_id(&self) -> i64 {
        match self {
            Signer::Here(e) => e.channel_id,
            Signer::Elsewhere(r) => r.record.id,
        }
    }

    /// The owning account.
    pub fn account_id(&self) -> i64 {
        match self {
            Signer::Here(e) => e.account_id,
            Signer::Elsewhere(r) => r.record.account_id,
        }
    }

    fn phone_number_id(&self) -> &str {
        match self {
            Signer::Here(e) => &e.phone_number_id,
            Signer::Elsewhere(r) => &r.record.phone_number_id,
        }
    }

    fn waba_id(&self) -> &str {
        match self {
            Signer::Here(e) => &e.waba_id,
            Signer::Elsewhere(r) => &r.record.waba_id,
        }
    }

    fn phone(&self) -> &str {
        match self {
            Signer::Here(e) => &e.phone,
            Signer::Elsewhere(r) => &r.record.phone,
        }
    }

    fn app_secret(&self) -> Option<&Secret> {
        match self {
            Signer::Here(e) => e.app_secret.as_ref(),
            Signer::Elsewhere(r) => r.app_secret.as_ref(),
        }
    }
}

impl Registry {
    /// Adds or replaces (after a restart) a channel's entry.
    pub fn insert(&self, entry: ChannelEntry) {
        self.by_phone_number_id
            .insert(entry.phone_number_id.clone(), entry.channel_id);
        self.by_id.insert(entry.channel_id, Arc::new(entry));
    }

    /// The entry of a channel.
    pub fn get(&self, channel_id: i64) -> Option<Arc<ChannelEntry>> {
        self.by_id.get(&channel_id).map(|e| e.clone())
    }

    /// The entry of the channel with this provider phone number id.
    pub fn by_phone_number_id(&self, id: &str) -> Option<Arc<ChannelEntry>> {
        let channel_id = *self.by_phone_number_id.get(id)?;
        self.get(channel_id)
    }

    /// Entries of a WABA whose phone digits are `phone` (quality updates name a number by its
    /// display number inside the WABA's entry).
    pub fn by_waba_and_phone(&self, waba_id: &str, phone: &str) -> Vec<Arc<ChannelEntry>> {
        self.by_id
            .iter()
            .filter(|e| e.waba_id == waba_id && e.phone == phone)
            .map(|e| e.clone())
            .collect()
    }

    /// Entries of a WABA of an account.
    pub fn of_waba(&self, account_id: i64, waba_id: &str) -> Vec<Arc<ChannelEntry>> {
        self.by_id
            .iter()
            .filter(|e| e.account_id == account_id && e.waba_id == waba_id)
            .map(|e| e.clone())
            .collect()
    }

    /// Removes a channel's entry (the number was removed); returns it.
    pub fn remove(&self, channel_id: i64) -> Option<Arc<ChannelEntry>> {
        let (_, e) = self.by_id.remove(&channel_id)?;
        self.by_phone_number_id.remove(&e.phone_number_id);
        Some(e)
    }

    /// Every entry.
    pub fn all(&self) -> Vec<Arc<ChannelEntry>> {
        self.by_id.iter().map(|e| e.clone()).collect()
    }

    /// Records (or refreshes) a channel another node runs (cluster mode).
    pub fn set_elsewhere(&self, remote: RemoteChannel) {
        let id = remote.record.id;
        if let Some(old) = self.elsewhere.get(&id) {
            if old.record.phone_number_id != remote.record.phone_number_id {
                self.elsewhere_by_phone_number_id
                    .remove(&old.record.phone_number_id);
            }
        }
        self.elsewhere_by_phone_number_id
            .insert(remote.record.phone_number_id.clone(), id);
        self.elsewhere.insert(id, Arc::new(remote));
    }

    /// Forgets a channel another node ran (it runs here now, or was removed).
    pub fn remove_elsewhere(&self, channel_id: i64) {
        if let Some((_, r)) = self.elsewhere.remove(&channel_id) {
            self.elsewhere_by_phone_number_id
                .remove_if(&r.record.phone_number_id, |_, id| *id == channel_id);
        }
    }

    /// The ids of the channels other nodes run, as recorded.
    pub fn elsewhere_ids(&self) -> Vec<i64> {
        self.elsewhere.iter().map(|e| *e.key()).collect()
    }

    /// The channel a webhook names by id (a per-channel receiver): running here, else run by
    /// another node.
    pub fn signer(&self, channel_id: i64) -> Option<Signer> {
        if let Some(e) = self.get(channel_id) {
            return Some(Signer::Here(e));
        }
        self.elsewhere
            .get(&channel_id)
            .map(|r| Signer::Elsewhere(r.clone()))
    }

    /// The channels of the account's WABA `waba_id`: the running ones, then those other
    /// nodes run.
    pub fn signers_of_waba(&self, account_id: i64, waba_id: &str) -> Vec<Signer> {
        self.signers()
            .into_iter()
            .filter(|s| s.account_id() == account_id && s.waba_id() == waba_id)
            .collect()
    }

    /// Every channel a webhook may name: the running ones, then the others' not running here.
    fn signers(&self) -> Vec<Signer> {
        let mut all: Vec<Signer> = self.by_id.iter().map(|e| Signer::Here(e.clone())).collect();
        all.extend(
            self.elsewhere
                .iter()
                .filter(|r| !self.by_id.contains_key(r.key()))
                .map(|r| Signer::Elsewhere(r.clone())),
        );
        all
    }
}

/// The channels, as the webhook ingest looks them up ([`engine::provider_webhook`]): the
/// running ones first, then (cluster mode) those other nodes run.
impl engine::provider_webhook::Directory for Registry {
    type Channel = Signer;

    fn by_phone_number_id(&self, phone_number_id: &str) -> Option<Signer> {
        if let Some(e) = Registry::by_phone_number_id(self, phone_number_id) {
            return Some(Signer::Here(e));
        }
        let id = *self.elsewhere_by_phone_number_id.get(phone_number_id)?;
        self.elsewhere
            .get(&id)
            .map(|r| Signer::Elsewhere(r.clone()))
    }

    fn of_waba(&self, waba_id: &str) -> Vec<Signer> {
        self.signers()
            .into_iter()
            .filter(|s| s.waba_id() == waba_id)
            .collect()
    }

    fn by_waba_and_phone(&self, waba_id: &str, phone: &str) -> Vec<Signer> {
        self.signers()
            .into_iter()
            .filter(|s| s.waba_id() == waba_id && s.phone() == phone)
            .collect()
    }

    fn identity<'a>(&self, channel: &'a Signer) -> engine::provider_webhook::Identity<'a> {
        engine::provider_webhook::Identity {
            account_id: channel.account_id(),
            channel_id: channel.channel_id(),
            phone_number_id: channel.phone_number_id(),
            app_secret: channel.app_secret(),
        }
    }
}
