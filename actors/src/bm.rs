//! Business portfolios (BMs): the 24 h limit their numbers share, payment checks and syncs
//! with the provider.

use engine::channel::Tier;
use engine::limits::{RollingUnique, SharedLimit};
use engine::DAY_MS;
use storage::Store;

/// Rebuilds a BM's shared limit from the messages of every channel of the BM: exact when the
/// BM's tier has a limit; an estimate in fixed memory when it has none or is unknown
/// (`engine::limits`).
pub async fn load_bm_limit(
    store: &Store,
    bm_id: i64,
    now: i64,
) -> Result<SharedLimit, storage::StorageError> {
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
        .bm_business_initiated_recipients_since(bm_id, now - DAY_MS, |phone, at| {
            recipients.record(phone, at)
        })
        .await?;
    Ok(SharedLimit::bm(limit, recipients))
}

impl crate::Runtime {
    /// Applies a BM's (new) tier to its live shared counter at once: the limit changes, and a
    /// counter that kept only an estimate is rebuilt exactly from storage when the BM gains a
    /// limit. A BM no number has used yet has no counter; it is built with the tier later.
    pub async fn apply_bm_limit(
        &self,
        bm_id: i64,
        tier: &Tier,
    ) -> Result<(), storage::StorageError> {
        let limit = tier.limit_24h();
        let counter = self.shared.bm_counters.get(&bm_id).map(|c| c.clone());
        if let Some(counter) = counter {
            let exact = counter.with(|c| c.recipients.is_exact());
            if limit.is_some() && !exact {
                // A limit now: the counter must know who counts, from storage.
                let rebuilt =
                    load_bm_limit(&self.shared.store, bm_id, self.shared.now_ms()).await?;
                counter.replace(rebuilt);
            } else {
                counter.with(|c| {
                    c.own_limit = limit;
                    if limit.is_none() {
                        c.recipients.forget_members();
                    }
                });
            }
        }
        Ok(())
    }
}
