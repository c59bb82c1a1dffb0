//! The port through which several numbers' actors reach a 24 h limit they share (a BM's or a
//! sending group's): the limit's rules are the engine's ([`SharedLimit`], a plain value); this
//! port only makes each use of it serial (issue 15, issue 51: "BM and group limits behind a
//! small port the aggregate calls, so admission stays serial per limit").
//!
//! Every use is one closure run under the limit's lock, never held across an await; when a
//! number needs both its group's and its BM's limits, [`LimitPort::both`] takes them group
//! before BM, always, so two numbers can never wait on each other.

use engine::channel::machine::Limits;
use engine::limits::SharedLimit;
use std::sync::{Arc, Mutex, MutexGuard};

/// A shared 24 h limit (cheap to clone: every clone is the same limit).
#[derive(Debug, Clone)]
pub struct LimitPort(Arc<Mutex<SharedLimit>>);

impl LimitPort {
    /// A port to `limit`.
    pub fn new(limit: SharedLimit) -> Self {
        Self(Arc::new(Mutex::new(limit)))
    }

    fn lock(&self) -> MutexGuard<'_, SharedLimit> {
        // A panic while the lock was held leaves a value whose every field is still valid
        // (each use is one engine call): keep serving it rather than poisoning every number.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `f` on the limit, alone.
    pub fn with<T>(&self, f: impl FnOnce(&mut SharedLimit) -> T) -> T {
        f(&mut self.lock())
    }

    /// Replaces the limit's whole value (a counter rebuilt from storage).
    pub fn replace(&self, limit: SharedLimit) {
        *self.lock() = limit;
    }

    /// Whether `self` and `other` are the same limit.
    pub fn same(&self, other: &LimitPort) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Runs `f` with a number's group and BM limits (either may be absent) taken together,
    /// group before BM, as the engine's [`Limits`].
    pub fn both<T>(
        group: Option<&LimitPort>,
        bm: Option<&LimitPort>,
        f: impl FnOnce(&mut Limits<'_>) -> T,
    ) -> T {
        let mut group = group.map(LimitPort::lock);
        let mut bm = bm.map(LimitPort::lock);
        f(&mut Limits {
            group: group.as_deref_mut(),
            bm: bm.as_deref_mut(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::limits::RollingUnique;

    #[test]
    fn clones_are_one_limit_and_both_sees_each() {
        let bm = LimitPort::new(SharedLimit::bm(Some(2), RollingUnique::new(1_000)));
        let group = LimitPort::new(SharedLimit::group(
            "g".into(),
            Some(5),
            RollingUnique::new(1_000),
        ));
        group.with(|g| g.set_member_limit(1, Some(10)));
        let other = bm.clone();
        assert!(other.same(&bm) && !group.same(&bm));
        other.with(|l| l.recipients.record("5511999990001", 10));
        assert_eq!(bm.with(|l| l.available(20)), Some(1));
        let seen = LimitPort::both(Some(&group), Some(&bm), |l| {
            let g = l.group.as_mut().map(|g| g.available(20));
            (g, l.bm.as_mut().map(|b| b.available(20)))
        });
        assert_eq!(seen, (Some(Some(5)), Some(Some(1))));
        bm.replace(SharedLimit::bm(None, RollingUnique::new(1_000)));
        assert_eq!(other.with(|l| l.available(20)), None);
    }
}
