//! The account API's webhook subscriptions as records: a test event, editing a
//! subscription, rotating its signing secret, retrying a delivery, recovering a disabled one.

use crate::Services;
use actors::{events, ActorError};
use engine::ids::{AccountId, ChannelId};
use std::time::Duration;

impl Services {
    /// `POST /webhooks/{id}/test`: queues a `ping` for that subscription alone; returns the
    /// delivery id.
    pub async fn test_webhook(
        &self,
        account_id: i64,
        subscription_id: i64,
    ) -> Result<i64, ActorError> {
        let store = &self.shared().store;
        let sub = store.subscription(account_id, subscription_id).await?;
        let channel = store
            .channel(AccountId(account_id), ChannelId(sub.channel_id))
            .await?;
        let data = serde_json::json!({"message": "ping", "subscription_id": sub.id, "test": true});
        let id = store
            .enqueue_for_subscription(
                account_id,
                sub.id,
                engine::webhook::EventKind::Ping,
                &events::channel_object(&channel),
                &data,
            )
            .await?;
        self.wake_dispatcher();
        Ok(id)
    }

    /// `PATCH /webhooks/{id}`: url (checked by the outbound guard by the caller), events,
    /// active; re-enabling wakes the dispatcher for its pending deliveries.
    pub async fn update_webhook(
        &self,
        account_id: i64,
        id: i64,
        url: Option<&str>,
        events: Option<&[engine::webhook::EventKind]>,
        active: Option<bool>,
    ) -> Result<storage::webhooks::SubscriptionRecord, ActorError> {
        let sub = self
            .shared()
            .store
            .update_subscription(account_id, id, url, events, active)
            .await?;
        self.wake_dispatcher();
        Ok(sub)
    }

    /// `POST /webhooks/{id}/rotate-secret`: a new secret (shown once); the previous one also
    /// signs for `overlap` (D-064).
    pub async fn rotate_webhook_secret(
        &self,
        account_id: i64,
        id: i64,
        overlap: Duration,
    ) -> Result<(engine::Secret, i64), ActorError> {
        let until = self.shared().now_ms() + overlap.as_millis() as i64;
        let secret = self
            .shared()
            .store
            .rotate_subscription_secret(account_id, id, until)
            .await?;
        Ok((secret, until))
    }

    /// `POST /webhooks/{id}/deliveries/{delivery_id}/retry`: a failed delivery queued again
    /// (409 `not_failed` for a pending or delivered one).
    pub async fn retry_webhook_delivery(
        &self,
        account_id: i64,
        id: i64,
        delivery_id: i64,
    ) -> Result<(), ActorError> {
        match self
            .shared()
            .store
            .retry_delivery(account_id, id, delivery_id)
            .await
        {
            Ok(()) => {
                self.wake_dispatcher();
                Ok(())
            }
            Err(storage::StorageError::Conflict(_)) => Err(ActorError::Refused {
                status: 409,
                code: "not_failed",
                message: "Só entregas que falharam podem ser repetidas.".into(),
                details: serde_json::json!({}),
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// `POST /webhooks/{id}/recover {since}`: every failed delivery since `since` (ms) queued
    /// again; how many.
    pub async fn recover_webhook(
        &self,
        account_id: i64,
        id: i64,
        since: i64,
    ) -> Result<u64, ActorError> {
        let store = &self.shared().store;
        store.subscription(account_id, id).await?;
        let n = store.recover_deliveries(account_id, id, since).await?;
        self.wake_dispatcher();
        Ok(n)
    }
}
