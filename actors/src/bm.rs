//! Business portfolios (BMs): the 24 h limit their numbers share, payment checks and syncs
//! with the provider.

use engine::channel::Tier;
use engine::limits::RollingUnique;
use engine::DAY_MS;
use storage::{now_ms, Store};

/// A BM's rolling 24 h count of unique business-initiated recipients and its limit.
#[derive(Debug, Clone)]
pub struct BmCounter {
    /// Recipients in the window.
    pub recipients: RollingUnique,
    /// The portfolio limit; `None` = unlimited or unknown.
    pub limit: Option<i64>,
}

impl BmCounter {
    /// Rebuilds the counter from the messages of every channel of the BM.
    /// Exact when the BM's tier has a limit; an estimate in fixed memory when it has none or
    /// is unknown (`engine::limits`).
    pub async fn load(store: &Store, bm_id: i64) -> Result<Self, storage::StorageError> {
        let bm = store.bm_unscoped(bm_id).await?;
        let limit = bm
            .tier
            .as_deref()
            .and_then(Tier::parse)
            .and_then(|t| t.limit_24h());
        let mut recipients = if limit.is_some() {
            RollingUnique::new(DAY_MS)
        } else {
            RollingUnique::estimated(DAY_MS)
        };
        store
            .bm_business_initiated_recipients_since(bm_id, now_ms() - DAY_MS, |phone, at| {
                recipients.record(phone, at)
            })
            .await?;
        Ok(Self { recipients, limit })
    }

    /// Headroom left now; `None` = unlimited.
    pub fn available(&mut self, now: i64) -> Option<i64> {
        let used = self.recipients.count(now);
        self.limit.map(|l| (l - used).max(0))
    }
}
