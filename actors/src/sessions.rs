//! This process's session on the database (issue 50, D-100): registered at boot, renewed every
//! second, ended at a graceful stop; every tenth heartbeat also recovers what gone sessions
//! left (their idempotency keys) and, once an hour, purges sessions gone for a day. The
//! storage side is `storage::sessions`.

use crate::Shared;
use std::sync::Weak;
use std::time::Duration;
use storage::Store;

/// How many heartbeats between two recoveries of gone sessions' keys.
const RECOVER_EVERY: u64 = 10;

/// How many heartbeats between two purges of old sessions (an hour).
const PURGE_EVERY: u64 = 3_600;

/// The name a session carries: host name and process id.
pub fn node_name() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    format!(
        "{}:{}",
        if host.is_empty() { "disparo" } else { &host },
        std::process::id()
    )
}

/// Resolves what gone sessions left; logs what it did. Errors: the database's.
pub(crate) async fn recover(store: &Store) -> Result<(), storage::StorageError> {
    let r = store.recover_gone_sessions().await?;
    if r.keys_in_doubt + r.keys_released > 0 {
        tracing::info!(
            in_doubt = r.keys_in_doubt,
            released = r.keys_released,
            "idempotency keys left pending by a gone process resolved"
        );
    }
    Ok(())
}

/// Renews the session every [`storage::sessions::HEARTBEAT_EVERY_MS`] until the runtime is
/// dropped or shuts down. A failed heartbeat is logged and tried again at the next beat.
pub(crate) fn spawn_heartbeat(shared: Weak<Shared>) {
    tokio::spawn(async move {
        let mut beat: u64 = 0;
        loop {
            tokio::time::sleep(Duration::from_millis(storage::sessions::HEARTBEAT_EVERY_MS)).await;
            let Some(shared) = shared.upgrade() else {
                return;
            };
            if shared.shutting_down() {
                return;
            }
            beat += 1;
            if let Err(e) = shared.store.heartbeat().await {
                tracing::warn!(error = %e, "session heartbeat failed");
                continue;
            }
            if beat.is_multiple_of(RECOVER_EVERY) {
                if let Err(e) = recover(&shared.store).await {
                    tracing::warn!(error = %e, "gone sessions not recovered");
                }
            }
            if beat.is_multiple_of(PURGE_EVERY) {
                if let Err(e) = shared.store.purge_sessions().await {
                    tracing::warn!(error = %e, "old sessions not purged");
                }
            }
        }
    });
}

/// Ends the session at a graceful stop (errors logged: the TTL ends it anyway).
pub(crate) async fn end(store: &Store) {
    if let Err(e) = store.end_session().await {
        tracing::warn!(error = %e, "session not ended; peers take over after its TTL");
    }
}
