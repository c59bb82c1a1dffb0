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

/// Running channels.
#[derive(Debug, Default)]
pub struct Registry {
    by_id: DashMap<i64, Arc<ChannelEntry>>,
    by_phone_number_id: DashMap<String, i64>,
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
}

/// The running channels, as the webhook ingest looks them up ([`engine::provider_webhook`]).
impl engine::provider_webhook::Directory for Registry {
    type Channel = Arc<ChannelEntry>;

    fn by_phone_number_id(&self, phone_number_id: &str) -> Option<Arc<ChannelEntry>> {
        Registry::by_phone_number_id(self, phone_number_id)
    }

    fn of_waba(&self, waba_id: &str) -> Vec<Arc<ChannelEntry>> {
        self.by_id
            .iter()
            .filter(|e| e.waba_id == waba_id)
            .map(|e| e.clone())
            .collect()
    }

    fn by_waba_and_phone(&self, waba_id: &str, phone: &str) -> Vec<Arc<ChannelEntry>> {
        Registry::by_waba_and_phone(self, waba_id, phone)
    }

    fn identity<'a>(
        &self,
        channel: &'a Arc<ChannelEntry>,
    ) -> engine::provider_webhook::Identity<'a> {
        engine::provider_webhook::Identity {
            account_id: channel.account_id,
            channel_id: channel.channel_id,
            phone_number_id: &channel.phone_number_id,
            app_secret: channel.app_secret.as_ref(),
        }
    }
}
