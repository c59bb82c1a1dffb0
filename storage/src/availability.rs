//! Whether the database answers (issue 53, D-124). A probe on a connection of its own (not
//! the pool's: a pool busy with slow statements is not a database away) runs `SELECT 1`
//! every [`PROBE_EVERY`]; two failed probes in a row mark the database unavailable, one
//! success available again. While it is unavailable the API answers 503
//! `database_unavailable` at once instead of waiting for the pool's connection timeout, and
//! campaigns and the outbox skip their rounds. PostgreSQL only: SQLite is a local file, whose
//! failures (busy, locked, full, read-only) show on the statement that meets them and are
//! answered the same way ([`crate::StorageError::is_unavailable`]).

use crate::Store;
use sqlx::Connection;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

/// How often the probe runs.
pub const PROBE_EVERY: Duration = Duration::from_millis(500);

/// How long one probe (connecting included) may take before it counts as failed.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Failed probes in a row that mark the database unavailable.
pub const FAILURES_TO_MARK_DOWN: u32 = 2;

/// The probe's verdict, shared by every clone of the [`Store`].
#[derive(Debug, Default)]
pub struct Availability {
    /// When the database was marked unavailable (ms since the epoch); 0 while it answers.
    down_since_ms: AtomicI64,
}

impl Availability {
    fn mark(&self, up: bool, now_ms: i64) -> Change {
        let was = self.down_since_ms.load(Ordering::Acquire);
        match (up, was) {
            (true, 0) | (false, 1..) => Change::None,
            (true, _) => {
                self.down_since_ms.store(0, Ordering::Release);
                Change::Up
            }
            (false, _) => {
                self.down_since_ms.store(now_ms.max(1), Ordering::Release);
                Change::Down
            }
        }
    }
}

/// What a probe's verdict changed.
#[derive(Debug, PartialEq, Eq)]
enum Change {
    None,
    Down,
    Up,
}

impl Store {
    /// Whether the database answers, as the probe last saw it (always `true` on SQLite and
    /// before the probe runs).
    pub fn available(&self) -> bool {
        self.availability.down_since_ms.load(Ordering::Acquire) == 0
    }

    /// Since when the database has been unavailable (ms since the epoch), if it is.
    pub fn unavailable_since_ms(&self) -> Option<i64> {
        match self.availability.down_since_ms.load(Ordering::Acquire) {
            0 => None,
            at => Some(at),
        }
    }

    /// Starts the probe on PostgreSQL (a task that runs until the process ends), connecting
    /// to `url` on a connection of its own; on SQLite only the series below (always up). Counts outages in
    /// `disparo_database_outages_total` and shows the verdict in `disparo_database_up`.
    pub fn spawn_availability_probe(&self, url: &str) {
        metrics::gauge!("disparo_database_up").set(1.0);
        metrics::counter!("disparo_database_outages_total").absolute(0);
        if self.backend != crate::Backend::Postgres {
            return;
        }
        let (store, url) = (self.clone(), url.to_string());
        tokio::spawn(async move {
            let mut conn: Option<sqlx::AnyConnection> = None;
            let mut failures = 0u32;
            loop {
                tokio::time::sleep(PROBE_EVERY).await;
                let answered = tokio::time::timeout(PROBE_TIMEOUT, probe(&mut conn, &url))
                    .await
                    .is_ok_and(|ok| ok);
                if !answered {
                    conn = None;
                }
                failures = if answered { 0 } else { failures + 1 };
                let up = failures < FAILURES_TO_MARK_DOWN;
                match store.availability.mark(up, crate::now_ms()) {
                    Change::Down => {
                        tracing::error!(
                            "database unavailable: API answers 503, campaigns and the outbox wait"
                        );
                        metrics::counter!("disparo_database_outages_total").increment(1);
                        metrics::gauge!("disparo_database_up").set(0.0);
                    }
                    Change::Up => {
                        tracing::warn!("database available again");
                        metrics::gauge!("disparo_database_up").set(1.0);
                    }
                    Change::None => {}
                }
            }
        });
    }
}

/// One probe: connects if needed, then `SELECT 1`; whether it answered.
async fn probe(conn: &mut Option<sqlx::AnyConnection>, url: &str) -> bool {
    if conn.is_none() {
        match sqlx::AnyConnection::connect(url).await {
            Ok(c) => *conn = Some(c),
            Err(_) => return false,
        }
    }
    let Some(c) = conn.as_mut() else {
        return false;
    };
    sqlx::query("SELECT 1").execute(&mut *c).await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_changes_once_per_outage() {
        let a = Availability::default();
        assert_eq!(a.mark(true, 10), Change::None);
        assert_eq!(a.mark(false, 20), Change::Down);
        assert_eq!(a.mark(false, 30), Change::None);
        assert_eq!(a.down_since_ms.load(Ordering::Acquire), 20);
        assert_eq!(a.mark(true, 40), Change::Up);
        assert_eq!(a.mark(true, 50), Change::None);
    }
}
