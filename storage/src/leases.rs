//! Leases with epochs (issue 52, `CLUSTER.md` "Leases with epochs"): a node holds a key (a
//! cell, later a campaign or a singleton) while the row's `expires_at` is ahead on the
//! database's clock. Acquiring a free, released or expired key — or one this session holds
//! already — bumps its epoch, the fencing token of everything done under it; renewing moves
//! the expiry of every key the session still holds; releasing frees a key at once. Every
//! statement is guarded by this process's session (`node_sessions`, D-100).

use crate::{Result, Store};
use engine::cluster::Membership;
use engine::ids::ChannelId;
use sqlx::Row;

/// The lease a write is made under (cluster mode): the key and the epoch it was acquired
/// with. Checked inside the write's transaction by [`hold_leases`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LeaseToken {
    /// The key (`bm:12`, `ch:7`…).
    pub key: String,
    /// The epoch it was acquired with.
    pub epoch: i64,
}

/// One lease row, for the cluster view (`GET /health`, the panel).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRow {
    /// The key (`bm:12`, `ch:7`…).
    pub key: String,
    /// The holding node's name; `None` when released.
    pub owner_node: Option<String>,
    /// The holding session; `None` when released.
    pub owner_session: Option<i64>,
    /// The fencing epoch (1 at the first acquisition).
    pub epoch: i64,
    /// Time left before it expires, ms (negative: expired).
    pub expires_in_ms: i64,
    /// How long the current holder has held it, ms.
    pub held_for_ms: i64,
}

/// A write made under a lease, as a writer that holds a transaction but not the store checks
/// it ([`hold_in`]): the token, this process's session and the backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fencing {
    pub(crate) token: LeaseToken,
    pub(crate) session: i64,
    pub(crate) backend: crate::Backend,
}

/// [`Store::hold_leases`] for each distinct lease of `fencing`, inside `tx`. Errors:
/// [`crate::StorageError::Fenced`] naming the first lease not held.
pub(crate) async fn hold_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    fencing: &[&Fencing],
) -> Result<()> {
    let mut checked: Vec<&Fencing> = Vec::with_capacity(fencing.len());
    for f in fencing {
        if checked.contains(f) {
            continue;
        }
        checked.push(f);
        let lock = match f.backend {
            crate::Backend::Postgres => " FOR SHARE",
            crate::Backend::Sqlite => "",
        };
        let sql = format!(
            "SELECT epoch FROM leases WHERE key = $1 AND epoch = $2 AND owner_session = $3 \
             AND expires_at > {}{lock}",
            crate::sessions::now_sql_of(f.backend)
        );
        let held = sqlx::query(&sql)
            .bind(&f.token.key)
            .bind(f.token.epoch)
            .bind(f.session)
            .fetch_optional(&mut **tx)
            .await?;
        if held.is_none() {
            metrics::counter!("disparo_cluster_fenced_writes_total").increment(1);
            return Err(crate::StorageError::Fenced(f.token.key.clone()));
        }
    }
    Ok(())
}

/// How long (ms) acquiring a lease waits for its row when another session's transaction has
/// it locked, before it counts as held (PostgreSQL; D-138).
pub const ACQUIRE_LOCK_WAIT_MS: u64 = 200;

impl Store {
    /// The fencing of a write this process makes under `token`.
    pub(crate) fn fencing(&self, token: &LeaseToken) -> Fencing {
        Fencing {
            token: token.clone(),
            session: self.session_id(),
            backend: self.backend,
        }
    }

    /// Checks, inside `tx`, that this session still holds each of `tokens` under its epoch
    /// and that none has expired, and keeps each row locked `FOR SHARE` until `tx` ends (on
    /// PostgreSQL; SQLite has one writer and no cluster mode): a peer taking the cell over
    /// (its epoch bump updates the row) waits until this write has committed, so every write
    /// under the old epoch is visible to the new holder's in-doubt marking (`CLUSTER.md`
    /// "Fencing"). Errors: [`crate::StorageError::Fenced`] naming the first lease not held —
    /// the caller must not commit `tx` then.
    pub(crate) async fn hold_leases(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        tokens: &[&LeaseToken],
    ) -> Result<()> {
        let fencing: Vec<Fencing> = tokens.iter().map(|t| self.fencing(t)).collect();
        hold_in(tx, &fencing.iter().collect::<Vec<_>>()).await
    }

    /// The names of the live nodes: sessions not ended whose heartbeat (or last lease
    /// renewal) is younger than `ttl_ms`, each name once, sorted.
    pub async fn live_nodes(&self, ttl_ms: i64) -> Result<Vec<String>> {
        let sql = format!(
            "SELECT DISTINCT node FROM node_sessions WHERE ended_at IS NULL AND heartbeat_at > {} - $1 ORDER BY node",
            self.now_sql()
        );
        let rows = sqlx::query(&sql).bind(ttl_ms).fetch_all(&self.pool).await?;
        rows.iter()
            .map(|r| Ok(r.try_get::<String, _>("node")?))
            .collect()
    }

    /// Every channel's BM and group, the input of [`engine::cluster::Cells::compute`].
    pub async fn channel_memberships(&self) -> Result<Vec<Membership>> {
        let rows = sqlx::query("SELECT id, bm_id, group_id FROM channels ORDER BY id")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(Membership {
                    channel: ChannelId(r.try_get("id")?),
                    bm: r.try_get("bm_id")?,
                    group: r.try_get("group_id")?,
                })
            })
            .collect()
    }

    /// Acquires `key` for this session for `ttl_ms` when it is free, released, expired or
    /// this session's already, and returns the new epoch (one more than the last); `None`
    /// when another session holds it — or, on PostgreSQL, still has its row locked after
    /// [`ACQUIRE_LOCK_WAIT_MS`]: a holder frozen inside a transaction that checks the lease
    /// (`FOR SHARE`, [`Store::hold_leases`]) keeps the row locked until PostgreSQL ends its
    /// session (`idle_in_transaction_session_timeout`, 5 s), and the caller, a node's keeper,
    /// must not wait that long: its own leases would expire meanwhile (D-138). It tries again
    /// at its next round. Errors: the database's.
    pub async fn acquire_lease(&self, key: &str, node: &str, ttl_ms: i64) -> Result<Option<i64>> {
        let now = self.now_sql();
        let sql = format!(
            "INSERT INTO leases (key, owner_session, owner_node, epoch, expires_at, acquired_at) \
             VALUES ($1, $2, $3, 1, {now} + $4, {now}) \
             ON CONFLICT (key) DO UPDATE SET owner_session = excluded.owner_session, \
             owner_node = excluded.owner_node, epoch = leases.epoch + 1, \
             expires_at = excluded.expires_at, acquired_at = excluded.acquired_at \
             WHERE leases.owner_session IS NULL OR leases.owner_session = excluded.owner_session \
             OR leases.expires_at <= {now} \
             RETURNING epoch"
        );
        let mut tx = self.writer.begin().await?;
        if self.backend == crate::Backend::Postgres {
            sqlx::query(&format!(
                "SET LOCAL lock_timeout = '{ACQUIRE_LOCK_WAIT_MS}ms'"
            ))
            .execute(&mut *tx)
            .await?;
        }
        let row = sqlx::query(&sql)
            .bind(key)
            .bind(self.session_id())
            .bind(node)
            .bind(ttl_ms)
            .fetch_optional(&mut *tx)
            .await;
        let row = match row {
            Ok(row) => row,
            // lock_not_available: the row is locked by another session's transaction.
            Err(sqlx::Error::Database(d)) if d.code().as_deref() == Some("55P03") => {
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        tx.commit().await?;
        row.map(|r| Ok(r.try_get("epoch")?)).transpose()
    }

    /// Renews every lease this session still holds (not expired) for `ttl_ms` and the
    /// session's heartbeat, in one transaction; returns the keys renewed with their epochs.
    /// An expired lease is not renewed (a peer may hold it by now): its holder acquires it
    /// anew, under a new epoch. Errors: the database's.
    pub async fn renew_leases(&self, ttl_ms: i64) -> Result<Vec<(String, i64)>> {
        let now = self.now_sql();
        let mut tx = self.writer.begin().await?;
        sqlx::query(&format!(
            "UPDATE node_sessions SET heartbeat_at = {now} WHERE id = $1"
        ))
        .bind(self.session_id())
        .execute(&mut *tx)
        .await?;
        let rows = sqlx::query(&format!(
            "UPDATE leases SET expires_at = {now} + $2 \
             WHERE owner_session = $1 AND expires_at > {now} RETURNING key, epoch"
        ))
        .bind(self.session_id())
        .bind(ttl_ms)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        rows.iter()
            .map(|r| Ok((r.try_get("key")?, r.try_get("epoch")?)))
            .collect()
    }

    /// Releases `key` if this session holds it under `epoch`; whether it did.
    pub async fn release_lease(&self, key: &str, epoch: i64) -> Result<bool> {
        let n = sqlx::query(
            "UPDATE leases SET owner_session = NULL, owner_node = NULL, expires_at = 0 \
             WHERE key = $1 AND owner_session = $2 AND epoch = $3",
        )
        .bind(key)
        .bind(self.session_id())
        .bind(epoch)
        .execute(&self.writer)
        .await?
        .rows_affected();
        Ok(n == 1)
    }

    /// Records a signed request between nodes as served (D-118): its tag (hex) and when it was
    /// sent (ms). `false` when the tag was recorded before — by this node or another — and the
    /// request is a replay to refuse.
    pub async fn admit_cluster_request(&self, tag_hex: &str, sent_at_ms: i64) -> Result<bool> {
        let n = sqlx::query(
            "INSERT INTO cluster_requests (tag, sent_at) VALUES ($1, $2) \
             ON CONFLICT (tag) DO NOTHING",
        )
        .bind(tag_hex)
        .bind(sent_at_ms)
        .execute(&self.writer)
        .await?
        .rows_affected();
        Ok(n == 1)
    }

    /// Forgets served requests sent before `before_ms` (they are refused as stale anyway);
    /// how many.
    pub async fn forget_cluster_requests(&self, before_ms: i64) -> Result<u64> {
        Ok(
            sqlx::query("DELETE FROM cluster_requests WHERE sent_at < $1")
                .bind(before_ms)
                .execute(&self.writer)
                .await?
                .rows_affected(),
        )
    }

    /// Releases every lease this session holds (a graceful stop); how many.
    pub async fn release_all_leases(&self) -> Result<u64> {
        Ok(sqlx::query(
            "UPDATE leases SET owner_session = NULL, owner_node = NULL, expires_at = 0 \
             WHERE owner_session = $1",
        )
        .bind(self.session_id())
        .execute(&self.writer)
        .await?
        .rows_affected())
    }

    /// Every lease row, by key.
    pub async fn leases(&self) -> Result<Vec<LeaseRow>> {
        let now = self.now_sql();
        let sql = format!(
            "SELECT key, owner_node, owner_session, epoch, expires_at - {now} AS expires_in, \
             {now} - acquired_at AS held_for FROM leases ORDER BY key"
        );
        let rows = sqlx::query(&sql).fetch_all(&self.pool).await?;
        rows.iter()
            .map(|r| {
                Ok(LeaseRow {
                    key: r.try_get("key")?,
                    owner_node: r.try_get("owner_node")?,
                    owner_session: r.try_get("owner_session")?,
                    epoch: r.try_get("epoch")?,
                    expires_in_ms: r.try_get("expires_in")?,
                    held_for_ms: r.try_get("held_for")?,
                })
            })
            .collect()
    }
}
