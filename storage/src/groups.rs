//! Sending groups (spec "Sending groups"; decision D-037): a pool of an account's numbers
//! with an optional own 24 h limit. Membership is the `channels.group_id` column.

use crate::{now_ms, Result, StorageError, Store};
use sqlx::any::AnyRow;
use sqlx::Row;

/// A stored group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRecord {
    /// Id.
    pub id: i64,
    /// Owning account.
    pub account_id: i64,
    /// Name, unique in the account.
    pub name: String,
    /// Own 24 h limit (unique business-initiated recipients); `None`: the sum of its numbers'.
    pub limit_24h: Option<i64>,
    /// Created (ms).
    pub created_at: i64,
}

const COLUMNS: &str = "id, account_id, name, limit_24h, created_at";

fn read(r: &AnyRow) -> Result<GroupRecord> {
    Ok(GroupRecord {
        id: r.try_get("id")?,
        account_id: r.try_get("account_id")?,
        name: r.try_get("name")?,
        limit_24h: r.try_get("limit_24h")?,
        created_at: r.try_get("created_at")?,
    })
}

impl Store {
    /// Creates a group. Errors: [`StorageError::Conflict`] for a name the account already uses.
    pub async fn insert_group(
        &self,
        account_id: i64,
        name: &str,
        limit_24h: Option<i64>,
    ) -> Result<GroupRecord> {
        let now = now_ms();
        let sql = format!(
            "INSERT INTO sending_groups (account_id, name, limit_24h, created_at, updated_at) VALUES ($1, $2, $3, $4, $4) RETURNING {COLUMNS}"
        );
        match sqlx::query(&sql)
            .bind(account_id)
            .bind(name)
            .bind(limit_24h)
            .bind(now)
            .fetch_one(&self.writer)
            .await
        {
            Ok(r) => read(&r),
            Err(e) if StorageError::is_unique_violation(&e) => Err(StorageError::Conflict(
                format!("a group named {name} already exists"),
            )),
            Err(e) => Err(e.into()),
        }
    }

    /// A group of the account. Errors: `NotFound`.
    pub async fn group(&self, account_id: i64, id: i64) -> Result<GroupRecord> {
        let sql = format!("SELECT {COLUMNS} FROM sending_groups WHERE id = $1 AND account_id = $2");
        match sqlx::query(&sql)
            .bind(id)
            .bind(account_id)
            .fetch_optional(&self.pool)
            .await?
        {
            Some(r) => read(&r),
            None => Err(StorageError::NotFound),
        }
    }

    /// A group by id, any account (for its actor).
    pub async fn group_unscoped(&self, id: i64) -> Result<GroupRecord> {
        let sql = format!("SELECT {COLUMNS} FROM sending_groups WHERE id = $1");
        match sqlx::query(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
        {
            Some(r) => read(&r),
            None => Err(StorageError::NotFound),
        }
    }

    /// A keyset page of the account's groups in id order: up to `limit` after the id `after`
    /// (issue 17).
    pub async fn list_groups_page(
        &self,
        account_id: i64,
        after: Option<i64>,
        limit: i64,
    ) -> Result<Vec<GroupRecord>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM sending_groups WHERE account_id = $1 AND id > $2 ORDER BY id LIMIT $3"
        );
        let rows = sqlx::query(&sql)
            .bind(account_id)
            .bind(after.unwrap_or(0))
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(read).collect()
    }

    /// Every group id (for starting their actors).
    pub async fn all_group_ids(&self) -> Result<Vec<i64>> {
        let rows = sqlx::query("SELECT id FROM sending_groups ORDER BY id")
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| Ok(r.try_get("id")?)).collect()
    }

    /// Renames a group and/or sets its limit (`Some(None)`: back to the sum of its numbers').
    /// Errors: `Conflict` for a name in use.
    pub async fn update_group(
        &self,
        id: i64,
        name: Option<&str>,
        limit_24h: Option<Option<i64>>,
    ) -> Result<()> {
        let mut tx = self.begin_write().await?;
        if let Some(n) = name {
            let res =
                sqlx::query("UPDATE sending_groups SET name = $1, updated_at = $2 WHERE id = $3")
                    .bind(n)
                    .bind(now_ms())
                    .bind(id)
                    .execute(&mut *tx)
                    .await;
            match res {
                Ok(_) => {}
                Err(e) if StorageError::is_unique_violation(&e) => {
                    return Err(StorageError::Conflict(format!(
                        "a group named {n} already exists"
                    )))
                }
                Err(e) => return Err(e.into()),
            }
        }
        if let Some(l) = limit_24h {
            sqlx::query("UPDATE sending_groups SET limit_24h = $1, updated_at = $2 WHERE id = $3")
                .bind(l)
                .bind(now_ms())
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Deletes a group; its numbers leave it.
    ///
    /// A group whose campaigns are not over (`draft`, `scheduled`, `running`, `paused`) is
    /// kept: their ids are returned and nothing changes (D-080). Otherwise its numbers leave it,
    /// its finished campaigns keep their history without it (`group_id` null) and it is
    /// removed; the answer is empty.
    pub async fn delete_group(&self, id: i64) -> Result<Vec<i64>> {
        let mut tx = self.begin_write().await?;
        let open: Vec<i64> = sqlx::query_scalar(
            "SELECT id FROM campaigns WHERE group_id = $1 \
             AND state IN ('draft', 'scheduled', 'running', 'paused') ORDER BY id",
        )
        .bind(id)
        .fetch_all(&mut *tx)
        .await?;
        if !open.is_empty() {
            return Ok(open);
        }
        sqlx::query("UPDATE campaigns SET group_id = NULL WHERE group_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE channels SET group_id = NULL WHERE group_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM sending_groups WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Vec::new())
    }

    /// Puts numbers in a group (`None`: out of any group).
    pub async fn set_channels_group(
        &self,
        channel_ids: &[i64],
        group_id: Option<i64>,
    ) -> Result<()> {
        let mut tx = self.begin_write().await?;
        for id in channel_ids {
            sqlx::query("UPDATE channels SET group_id = $1, updated_at = $2 WHERE id = $3")
                .bind(group_id)
                .bind(now_ms())
                .bind(*id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The numbers of a group, oldest first.
    pub async fn group_members(&self, group_id: i64) -> Result<Vec<i64>> {
        let rows = sqlx::query("SELECT id FROM channels WHERE group_id = $1 ORDER BY id")
            .bind(group_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| Ok(r.try_get("id")?)).collect()
    }

    /// Unique business-initiated recipients of the group's numbers since `since` (ms), with
    /// the last time each was messaged, handed to `each` as read (to rebuild the group's rolling
    /// counter).
    pub async fn group_business_initiated_recipients_since(
        &self,
        group_id: i64,
        since: i64,
        each: impl FnMut(&str, i64) + Send,
    ) -> Result<()> {
        self.business_initiated_recipients_of("c.group_id", group_id, since, each)
            .await
    }
}
