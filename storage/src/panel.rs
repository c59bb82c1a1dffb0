//! The operator panel's records (issue 19): panel users and their sessions, clients, support
//! tasks, the panel's writes to BMs, WABAs and numbers, and the scoped reads of the inventory.
//!
//! Scope (D-054) is applied in the SQL of every read here, never by filtering afterwards:
//! staff see the BMs of their list (all when empty) and what hangs from them; a Client user
//! sees the records whose client is theirs, a number's client being its own, else its WABA's,
//! else its BM's.

use crate::bms::{read_bm, read_waba, BmRecord, WabaRecord, BM_COLUMNS, WABA_COLUMNS};
use crate::channels::{read as read_channel, ChannelRecord, COLUMNS as CHANNEL_COLUMNS};
use crate::{found, now_ms, Result, StorageError, Store};
use engine::ids::{AccountId, CampaignId, ChannelId};
use engine::panel::Scope;
use engine::token::hash_token;
use engine::Secret;
use rand::Rng;
use sqlx::any::AnyRow;
use sqlx::Row;

/// A panel user (never its password hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRecord {
    /// Id.
    pub id: i64,
    /// Account the user belongs to.
    pub account_id: i64,
    /// Login e-mail, lowercase, unique across accounts.
    pub email: String,
    /// Display name (the audit log's author).
    pub name: String,
    /// `Admin`, `Operador` or `Client`.
    pub role: String,
    /// `active` or `disabled`.
    pub status: String,
    /// For a Client user: its client.
    pub client_id: Option<i64>,
    /// For staff: the BMs they may see (empty = all).
    pub bm_scope: Vec<i64>,
    /// Created, ms.
    pub created_at: i64,
    /// Updated, ms.
    pub updated_at: i64,
}

impl UserRecord {
    /// The user's scope (a Client user without a client sees nothing: scope client 0).
    pub fn scope(&self) -> Scope {
        if self.role == "Client" {
            Scope::Client(self.client_id.unwrap_or(0))
        } else {
            Scope::Bms(self.bm_scope.clone())
        }
    }
}

/// What is needed to create a panel user.
#[derive(Debug, Clone)]
pub struct NewUser {
    /// Account.
    pub account_id: i64,
    /// E-mail (already normalised).
    pub email: String,
    /// Name.
    pub name: String,
    /// Role wire name.
    pub role: String,
    /// Status wire name.
    pub status: String,
    /// Argon2id PHC string.
    pub password_hash: String,
    /// Client (Client role).
    pub client_id: Option<i64>,
    /// BM scope (staff).
    pub bm_scope: Vec<i64>,
}

/// A change to a user; `None` keeps the field.
#[derive(Debug, Clone, Default)]
pub struct UserPatch {
    /// E-mail (normalised).
    pub email: Option<String>,
    /// Name.
    pub name: Option<String>,
    /// Role.
    pub role: Option<String>,
    /// Status.
    pub status: Option<String>,
    /// Client (`Some(None)` clears it).
    pub client_id: Option<Option<i64>>,
    /// BM scope.
    pub bm_scope: Option<Vec<i64>>,
    /// New password hash: every session of the user ends with the change but
    /// `keep_session` (issue 46).
    pub password_hash: Option<String>,
    /// The session that made the change, kept when a password changes (the user's own).
    pub keep_session: Option<i64>,
}

/// A session as the panel sees it.
#[derive(Debug, Clone)]
pub struct SessionRecord {
    /// Session id.
    pub id: i64,
    /// Its user.
    pub user: UserRecord,
    /// Expires, ms (sliding).
    pub expires_at: i64,
    /// The account's slug.
    pub account_slug: String,
}

/// A freshly created session: the token is shown once.
#[derive(Debug, Clone)]
pub struct CreatedSession {
    /// `ses_…`.
    pub token: Secret,
    /// Expires, ms.
    pub expires_at: i64,
}

/// A client of the operator (a company served by some BMs, WABAs or numbers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRecord {
    /// Id.
    pub id: i64,
    /// Account.
    pub account_id: i64,
    /// Name (unique in the account).
    pub name: String,
    /// CNPJ digits, when given.
    pub document: Option<String>,
    /// Where the client's numbers' events go (issue 21).
    pub webhook_url: Option<String>,
    /// Created, ms.
    pub created_at: i64,
    /// Updated, ms.
    pub updated_at: i64,
    /// BMs linked to it.
    pub bms: i64,
    /// WABAs linked to it.
    pub wabas: i64,
    /// Numbers linked to it directly.
    pub numbers: i64,
}

/// A support task (ticket) on the kanban board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRecord {
    /// Id.
    pub id: i64,
    /// Account.
    pub account_id: i64,
    /// Title.
    pub title: String,
    /// Description (Markdown).
    pub description: String,
    /// Column: `aberto`, `em_andamento`, `aguardando`, `resolvido`.
    pub status: String,
    /// `baixa`, `media`, `alta`, `urgente`.
    pub priority: String,
    /// Position within its column, from 0.
    pub position: i64,
    /// Assigned user.
    pub assignee_id: Option<i64>,
    /// Linked BM.
    pub bm_id: Option<i64>,
    /// Linked WABA (disparo id).
    pub waba_id: Option<i64>,
    /// Linked number (channel id).
    pub channel_id: Option<i64>,
    /// Linked campaign.
    pub campaign_id: Option<i64>,
    /// Author.
    pub created_by: Option<i64>,
    /// Created, ms.
    pub created_at: i64,
    /// Updated, ms.
    pub updated_at: i64,
}

/// The fields of a task a write sets.
#[derive(Debug, Clone, Default)]
pub struct TaskFields {
    /// Title.
    pub title: String,
    /// Description.
    pub description: String,
    /// Column.
    pub status: String,
    /// Priority.
    pub priority: String,
    /// Wanted position in its column (`None`: the end).
    pub position: Option<i64>,
    /// Assignee.
    pub assignee_id: Option<i64>,
    /// BM link.
    pub bm_id: Option<i64>,
    /// WABA link.
    pub waba_id: Option<i64>,
    /// Number link.
    pub channel_id: Option<i64>,
    /// Campaign link.
    pub campaign_id: Option<i64>,
}

/// A BM as the panel writes it.
#[derive(Debug, Clone)]
pub struct BmFields {
    /// Name.
    pub name: String,
    /// Client.
    pub client_id: Option<i64>,
    /// Business ID, when known.
    pub provider_business_id: Option<String>,
    /// App id.
    pub app_id: Option<String>,
    /// New access token (`None` keeps the stored one).
    pub access_token: Option<Secret>,
    /// New app secret (`None` keeps the stored one).
    pub app_secret: Option<Secret>,
}

/// A BM's own credential (the panel's system-user token and app secret).
#[derive(Debug, Clone)]
pub struct BmSecrets {
    /// Access token.
    pub access_token: Option<Secret>,
    /// App secret.
    pub app_secret: Option<Secret>,
}

const USER_COLUMNS: &str =
    "u.id, u.account_id, u.email, u.name, u.role, u.status, u.client_id, u.bm_scope, u.created_at, u.updated_at";
const TASK_COLUMNS: &str = "id, account_id, title, description, status, priority, position, assignee_id, bm_id, waba_id, channel_id, campaign_id, created_by, created_at, updated_at";

pub(crate) fn read_user(r: &AnyRow) -> Result<UserRecord> {
    let scope: String = r.try_get("bm_scope")?;
    Ok(UserRecord {
        id: r.try_get("id")?,
        account_id: r.try_get("account_id")?,
        email: r.try_get("email")?,
        name: r.try_get("name")?,
        role: r.try_get("role")?,
        status: r.try_get("status")?,
        client_id: r.try_get("client_id")?,
        bm_scope: serde_json::from_str(&scope).map_err(|e| StorageError::Corrupt(e.to_string()))?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

fn read_task(r: &AnyRow) -> Result<TaskRecord> {
    Ok(TaskRecord {
        id: r.try_get("id")?,
        account_id: r.try_get("account_id")?,
        title: r.try_get("title")?,
        description: r.try_get("description")?,
        status: r.try_get("status")?,
        priority: r.try_get("priority")?,
        position: r.try_get("position")?,
        assignee_id: r.try_get("assignee_id")?,
        bm_id: r.try_get("bm_id")?,
        waba_id: r.try_get("waba_id")?,
        channel_id: r.try_get("channel_id")?,
        campaign_id: r.try_get("campaign_id")?,
        created_by: r.try_get("created_by")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

fn read_client(r: &AnyRow) -> Result<ClientRecord> {
    Ok(ClientRecord {
        id: r.try_get("id")?,
        account_id: r.try_get("account_id")?,
        name: r.try_get("name")?,
        document: r.try_get("document")?,
        webhook_url: r.try_get("webhook_url")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
        bms: r.try_get("n_bms")?,
        wabas: r.try_get("n_wabas")?,
        numbers: r.try_get("n_numbers")?,
    })
}

/// A list of ids as SQL (they are integers: safe to inline).
fn id_list(ids: &[i64]) -> String {
    ids.iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The SQL condition that a number (alias `c`) is in `scope`.
pub(crate) fn channel_in_scope(scope: &Scope) -> String {
    match scope {
        Scope::Bms(b) if b.is_empty() => "1 = 1".into(),
        Scope::Bms(b) => format!("c.bm_id IN ({})", id_list(b)),
        Scope::Client(id) => format!(
            "COALESCE(c.client_id, \
               (SELECT w.client_id FROM wabas w WHERE w.account_id = c.account_id AND w.provider_waba_id = c.waba_id), \
               (SELECT b.client_id FROM bms b WHERE b.id = c.bm_id)) = {id}"
        ),
    }
}

/// The SQL condition that a WABA (alias `w`) is in `scope`: its own client, else its BM's, or
/// one of its numbers is the client's.
fn waba_in_scope(scope: &Scope) -> String {
    match scope {
        Scope::Bms(b) if b.is_empty() => "1 = 1".into(),
        Scope::Bms(b) => format!("w.bm_id IN ({})", id_list(b)),
        Scope::Client(id) => format!(
            "(COALESCE(w.client_id, (SELECT b.client_id FROM bms b WHERE b.id = w.bm_id)) = {id} \
              OR EXISTS (SELECT 1 FROM channels c WHERE c.account_id = w.account_id AND c.waba_id = w.provider_waba_id AND {}))",
            channel_in_scope(scope)
        ),
    }
}

/// The SQL condition that a BM (alias `bm`) is in `scope`.
fn bm_in_scope(scope: &Scope) -> String {
    match scope {
        Scope::Bms(b) if b.is_empty() => "1 = 1".into(),
        Scope::Bms(b) => format!("bm.id IN ({})", id_list(b)),
        Scope::Client(id) => format!(
            "(bm.client_id = {id} \
              OR EXISTS (SELECT 1 FROM wabas w WHERE w.bm_id = bm.id AND w.client_id = {id}) \
              OR EXISTS (SELECT 1 FROM channels c WHERE c.bm_id = bm.id AND {}))",
            channel_in_scope(scope)
        ),
    }
}

/// The SQL condition that a client (alias `cl`) is in `scope` (issue 46, D-099): staff
/// scoped to BMs see a client linked to at least one BM, WABA or number of theirs and to
/// nothing of another BM (so linking one's own number to another BM's client never opens
/// that client); a Client user sees its own.
pub(crate) fn client_in_scope(scope: &Scope) -> String {
    match scope {
        Scope::Bms(b) if b.is_empty() => "1 = 1".into(),
        Scope::Bms(b) => {
            let ids = id_list(b);
            format!(
                "(EXISTS (SELECT 1 FROM bms x WHERE x.client_id = cl.id AND x.id IN ({ids})) \
                  OR EXISTS (SELECT 1 FROM wabas x WHERE x.client_id = cl.id AND x.bm_id IN ({ids})) \
                  OR EXISTS (SELECT 1 FROM channels x WHERE x.client_id = cl.id AND x.bm_id IN ({ids}))) \
                 AND NOT EXISTS (SELECT 1 FROM bms x WHERE x.client_id = cl.id AND x.id NOT IN ({ids})) \
                 AND NOT EXISTS (SELECT 1 FROM wabas x WHERE x.client_id = cl.id AND (x.bm_id IS NULL OR x.bm_id NOT IN ({ids}))) \
                 AND NOT EXISTS (SELECT 1 FROM channels x WHERE x.client_id = cl.id AND (x.bm_id IS NULL OR x.bm_id NOT IN ({ids})))"
            )
        }
        Scope::Client(id) => format!("cl.id = {id}"),
    }
}

/// The SQL condition that a provider log line (alias `l`) is in `scope` (issue 46): staff
/// scoped to BMs see the handshakes and the lines that name a WABA or number of theirs.
pub(crate) fn log_in_scope(scope: &Scope) -> String {
    match scope {
        Scope::Bms(b) if b.is_empty() => "1 = 1".into(),
        Scope::Bms(b) => {
            let ids = id_list(b);
            format!(
                "(l.account_id IS NULL \
                  OR EXISTS (SELECT 1 FROM channels c WHERE c.account_id = l.account_id AND c.bm_id IN ({ids}) \
                     AND l.phone_number_ids LIKE '%\"' || c.phone_number_id || '\"%') \
                  OR EXISTS (SELECT 1 FROM wabas w WHERE w.account_id = l.account_id AND w.bm_id IN ({ids}) \
                     AND l.waba_ids LIKE '%\"' || w.provider_waba_id || '\"%'))"
            )
        }
        // Client users never read the log (the route is staff only): nothing.
        Scope::Client(_) => "1 = 0".into(),
    }
}

/// NotFound unless row `id` of `table` belongs to the account.
async fn owned(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    table: &'static str,
    id: i64,
    account_id: i64,
) -> Result<()> {
    let sql = format!("SELECT id FROM {table} WHERE id = $1 AND account_id = $2");
    sqlx::query(&sql)
        .bind(id)
        .bind(account_id)
        .fetch_optional(&mut **tx)
        .await?
        .map(|_| ())
        .ok_or(StorageError::NotFound)
}

/// Runs each statement with `$1 = id`, in the transaction.
async fn exec_each(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    statements: &[&str],
    id: i64,
) -> Result<()> {
    for sql in statements {
        sqlx::query(sql).bind(id).execute(&mut **tx).await?;
    }
    Ok(())
}

/// Conflict `last_admin` unless the account has an active Admin other than `id`.
async fn keep_an_admin(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    account_id: i64,
    id: i64,
) -> Result<()> {
    let others: i64 = sqlx::query(
        "SELECT COUNT(*) AS n FROM users WHERE account_id = $1 AND role = 'Admin' AND status = 'active' AND id <> $2",
    )
    .bind(account_id)
    .bind(id)
    .fetch_one(&mut **tx)
    .await?
    .try_get("n")?;
    if others == 0 {
        return Err(StorageError::Conflict("last_admin".into()));
    }
    Ok(())
}

/// The SQL that counts what keeps a number in the inventory: its messages and campaigns.
const NUMBER_HISTORY: &str = "SELECT (SELECT COUNT(*) FROM messages WHERE channel_id = $1) + (SELECT COUNT(*) FROM campaign_channels WHERE channel_id = $1) AS n";

/// `ses_` + 40 alphanumeric characters.
fn new_session_token() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::thread_rng();
    let body: String = (0..40)
        .map(|_| char::from(ALPHABET[rng.gen_range(0..ALPHABET.len())]))
        .collect();
    format!("{}{body}", engine::panel::SESSION_PREFIX)
}

/// A placeholder Business ID for a BM recorded before its ID is known (unique per BM;
/// [`BmRecord::provider_id`] hides it).
fn placeholder_business_id() -> String {
    let mut rng = rand::thread_rng();
    format!("sem-id-{:016x}", rng.gen::<u64>())
}

impl Store {
    // ---- users -----------------------------------------------------------------------

    /// Creates a panel user. Errors: [`StorageError::Conflict`] when the e-mail is taken.
    pub async fn insert_user(&self, u: &NewUser) -> Result<UserRecord> {
        let now = now_ms();
        let scope = serde_json::to_string(&u.bm_scope).unwrap_or_else(|_| "[]".into());
        let res = sqlx::query(
            "INSERT INTO users (account_id, email, name, role, status, password_hash, client_id, bm_scope, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) RETURNING id",
        )
        .bind(u.account_id)
        .bind(&u.email)
        .bind(&u.name)
        .bind(&u.role)
        .bind(&u.status)
        .bind(&u.password_hash)
        .bind(u.client_id)
        .bind(scope)
        .bind(now)
        .fetch_one(&self.writer)
        .await;
        let id: i64 = match res {
            Ok(r) => r.try_get("id")?,
            Err(e) if StorageError::is_unique_violation(&e) => {
                return Err(StorageError::Conflict("email".into()))
            }
            Err(e) => return Err(e.into()),
        };
        self.user(u.account_id, id).await
    }

    /// A user of the account.
    pub async fn user(&self, account_id: i64, id: i64) -> Result<UserRecord> {
        let sql =
            format!("SELECT {USER_COLUMNS} FROM users u WHERE u.id = $1 AND u.account_id = $2");
        let row = sqlx::query(&sql)
            .bind(id)
            .bind(account_id)
            .fetch_optional(&self.pool)
            .await?;
        found(row, read_user)
    }

    /// The account's users, oldest first.
    pub async fn list_users(&self, account_id: i64) -> Result<Vec<UserRecord>> {
        let sql =
            format!("SELECT {USER_COLUMNS} FROM users u WHERE u.account_id = $1 ORDER BY u.id");
        let rows = sqlx::query(&sql)
            .bind(account_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(read_user).collect()
    }

    /// The users with this login e-mail (unique per account, so one per account; at most 8)
    /// with their password hashes, for the login check.
    pub async fn user_for_login(&self, email: &str) -> Result<Vec<(UserRecord, String)>> {
        let sql = format!(
            "SELECT {USER_COLUMNS}, u.password_hash FROM users u WHERE u.email = $1 ORDER BY u.id LIMIT 8"
        );
        let rows = sqlx::query(&sql).bind(email).fetch_all(&self.pool).await?;
        rows.iter()
            .map(|r| Ok((read_user(r)?, r.try_get("password_hash")?)))
            .collect()
    }

    /// Applies a change to a user; refuses (Conflict `last_admin`) a change that would leave
    /// the account without an active Admin, checked in the same transaction.
    pub async fn update_user(&self, account_id: i64, id: i64, p: &UserPatch) -> Result<UserRecord> {
        let mut tx = self.begin_write().await?;
        let sql =
            format!("SELECT {USER_COLUMNS} FROM users u WHERE u.id = $1 AND u.account_id = $2");
        let row = sqlx::query(&sql)
            .bind(id)
            .bind(account_id)
            .fetch_optional(&mut *tx)
            .await?;
        let current = found(row, read_user)?;
        let role = p.role.clone().unwrap_or_else(|| current.role.clone());
        let status = p.status.clone().unwrap_or_else(|| current.status.clone());
        if current.role == "Admin"
            && current.status == "active"
            && (role != "Admin" || status != "active")
        {
            keep_an_admin(&mut tx, account_id, id).await?;
        }
        let client_id = match p.client_id {
            Some(c) => c,
            None => current.client_id,
        };
        let scope = serde_json::to_string(p.bm_scope.as_ref().unwrap_or(&current.bm_scope))
            .unwrap_or_else(|_| "[]".into());
        let res = sqlx::query(
            "UPDATE users SET email = $3, name = $4, role = $5, status = $6, client_id = $7, bm_scope = $8, \
               password_hash = COALESCE($9, password_hash), updated_at = $10 WHERE id = $1 AND account_id = $2",
        )
        .bind(id)
        .bind(account_id)
        .bind(p.email.as_ref().unwrap_or(&current.email))
        .bind(p.name.as_ref().unwrap_or(&current.name))
        .bind(&role)
        .bind(&status)
        .bind(client_id)
        .bind(scope)
        .bind(p.password_hash.as_deref())
        .bind(now_ms())
        .execute(&mut *tx)
        .await;
        match res {
            Ok(_) => {}
            Err(e) if StorageError::is_unique_violation(&e) => {
                return Err(StorageError::Conflict("email".into()))
            }
            Err(e) => return Err(e.into()),
        }
        // Disabled: every session ends. A new password: every other session ends (issue 46).
        let keep = match (status != "active", &p.password_hash) {
            (true, _) => Some(-1),
            (false, Some(_)) => Some(p.keep_session.unwrap_or(-1)),
            (false, None) => None,
        };
        if let Some(keep) = keep {
            sqlx::query(
                "UPDATE sessions SET revoked_at = $2 WHERE user_id = $1 AND revoked_at IS NULL AND id <> $3",
            )
            .bind(id)
            .bind(now_ms())
            .bind(keep)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        self.user(account_id, id).await
    }

    /// Removes a user (its sessions go first; tasks keep no dangling author or assignee).
    /// Refuses (Conflict `last_admin`) removing the account's last active Admin.
    pub async fn delete_user(&self, account_id: i64, id: i64) -> Result<()> {
        let mut tx = self.begin_write().await?;
        let row = sqlx::query("SELECT role, status FROM users WHERE id = $1 AND account_id = $2")
            .bind(id)
            .bind(account_id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StorageError::NotFound)?;
        let role: String = row.try_get("role")?;
        let status: String = row.try_get("status")?;
        if role == "Admin" && status == "active" {
            keep_an_admin(&mut tx, account_id, id).await?;
        }
        exec_each(
            &mut tx,
            &[
                "DELETE FROM sessions WHERE user_id = $1",
                "DELETE FROM user_api_tokens WHERE user_id = $1",
                "DELETE FROM sender_messages WHERE user_id = $1",
                "UPDATE tasks SET assignee_id = NULL WHERE assignee_id = $1",
                "UPDATE tasks SET created_by = NULL WHERE created_by = $1",
                "DELETE FROM users WHERE id = $1",
            ],
            id,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    // ---- sessions --------------------------------------------------------------------

    /// Opens a session for a user, valid for `ttl_ms`; only the token's hash is stored.
    pub async fn create_session(&self, user_id: i64, ttl_ms: i64) -> Result<CreatedSession> {
        let token = new_session_token();
        let now = now_ms();
        sqlx::query(
            "INSERT INTO sessions (user_id, token_hash, created_at, expires_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(user_id)
        .bind(hash_token(&token))
        .bind(now)
        .bind(now + ttl_ms)
        .execute(&self.writer)
        .await?;
        Ok(CreatedSession {
            token: Secret::new(token),
            expires_at: now + ttl_ms,
        })
    }

    /// Resolves a session token: `None` when unknown, revoked, expired or its user disabled.
    /// A valid session's expiry slides to `now + ttl_ms` (written when it moved by a quarter of
    /// the lifetime or a minute, whichever is less).
    pub async fn authenticate_session(
        &self,
        token: &str,
        ttl_ms: i64,
    ) -> Result<Option<SessionRecord>> {
        let now = now_ms();
        let sql = format!(
            "SELECT s.id AS session_id, s.expires_at, a.slug, {USER_COLUMNS} FROM sessions s \
             JOIN users u ON u.id = s.user_id JOIN accounts a ON a.id = u.account_id \
             WHERE s.token_hash = $1 AND s.revoked_at IS NULL AND s.expires_at > $2 AND u.status = 'active'"
        );
        let Some(row) = sqlx::query(&sql)
            .bind(hash_token(token))
            .bind(now)
            .fetch_optional(&self.pool)
            .await?
        else {
            return Ok(None);
        };
        let id: i64 = row.try_get("session_id")?;
        let mut expires_at: i64 = row.try_get("expires_at")?;
        if now + ttl_ms - expires_at > (ttl_ms / 4).min(60_000) {
            expires_at = now + ttl_ms;
            sqlx::query("UPDATE sessions SET expires_at = $2 WHERE id = $1")
                .bind(id)
                .bind(expires_at)
                .execute(&self.writer)
                .await?;
        }
        Ok(Some(SessionRecord {
            id,
            user: read_user(&row)?,
            expires_at,
            account_slug: row.try_get("slug")?,
        }))
    }

    /// Revokes one session (logout).
    pub async fn revoke_session(&self, id: i64) -> Result<()> {
        sqlx::query("UPDATE sessions SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL")
            .bind(id)
            .bind(now_ms())
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    // ---- clients ---------------------------------------------------------------------

    fn client_select() -> &'static str {
        "SELECT cl.id, cl.account_id, cl.name, cl.document, cl.webhook_url, cl.created_at, cl.updated_at, \
           (SELECT COUNT(*) FROM bms b WHERE b.client_id = cl.id) AS n_bms, \
           (SELECT COUNT(*) FROM wabas w WHERE w.client_id = cl.id) AS n_wabas, \
           (SELECT COUNT(*) FROM channels c WHERE c.client_id = cl.id) AS n_numbers \
         FROM clients cl"
    }

    /// The account's clients in `scope` ([`client_in_scope`]) with their link counts, by
    /// name.
    pub async fn list_clients(&self, account_id: i64, scope: &Scope) -> Result<Vec<ClientRecord>> {
        let select = format!("{} WHERE cl.account_id = $1", Self::client_select());
        self.scoped_rows(
            select,
            client_in_scope(scope),
            "cl.name",
            account_id,
            None,
            read_client,
        )
        .await
    }

    /// A client of the account in `scope` (NotFound outside it).
    pub async fn scoped_client(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
    ) -> Result<ClientRecord> {
        let select = format!("{} WHERE cl.account_id = $1", Self::client_select());
        self.scoped_rows(
            select,
            client_in_scope(scope),
            "cl.id",
            account_id,
            Some(id),
            read_client,
        )
        .await?
        .pop()
        .ok_or(StorageError::NotFound)
    }

    /// A client of the account.
    pub async fn client(&self, account_id: i64, id: i64) -> Result<ClientRecord> {
        let sql = format!(
            "{} WHERE cl.account_id = $1 AND cl.id = $2",
            Self::client_select()
        );
        let row = sqlx::query(&sql)
            .bind(account_id)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        found(row, read_client)
    }

    /// The account's client with this name, created when missing (a BM names its client).
    pub async fn client_by_name_or_create(
        &self,
        account_id: i64,
        name: &str,
    ) -> Result<ClientRecord> {
        let now = now_ms();
        sqlx::query(
            "INSERT INTO clients (account_id, name, created_at, updated_at) VALUES ($1, $2, $3, $3) \
             ON CONFLICT (account_id, name) DO NOTHING",
        )
        .bind(account_id)
        .bind(name)
        .bind(now)
        .execute(&self.writer)
        .await?;
        let sql = format!(
            "{} WHERE cl.account_id = $1 AND cl.name = $2",
            Self::client_select()
        );
        let row = sqlx::query(&sql)
            .bind(account_id)
            .bind(name)
            .fetch_optional(&self.writer)
            .await?;
        found(row, read_client)
    }

    /// Creates or updates (`id`) a client. Errors: Conflict `name` when another client of
    /// the account has the name.
    pub async fn save_client(
        &self,
        account_id: i64,
        id: Option<i64>,
        name: &str,
        document: Option<&str>,
        webhook_url: Option<&str>,
    ) -> Result<ClientRecord> {
        let now = now_ms();
        let res = match id {
            None => sqlx::query(
                "INSERT INTO clients (account_id, name, document, webhook_url, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5) RETURNING id",
            )
            .bind(account_id)
            .bind(name)
            .bind(document)
            .bind(webhook_url)
            .bind(now)
            .fetch_optional(&self.writer)
            .await,
            Some(id) => sqlx::query(
                "UPDATE clients SET name = $3, document = $4, webhook_url = $5, updated_at = $6 WHERE id = $1 AND account_id = $2 RETURNING id",
            )
            .bind(id)
            .bind(account_id)
            .bind(name)
            .bind(document)
            .bind(webhook_url)
            .bind(now)
            .fetch_optional(&self.writer)
            .await,
        };
        let id: i64 = match res {
            Ok(Some(r)) => r.try_get("id")?,
            Ok(None) => return Err(StorageError::NotFound),
            Err(e) if StorageError::is_unique_violation(&e) => {
                return Err(StorageError::Conflict("name".into()))
            }
            Err(e) => return Err(e.into()),
        };
        self.client(account_id, id).await
    }

    /// Removes a client: its links on BMs, WABAs and numbers are cleared in the same
    /// transaction. Refuses (Conflict `client_users`) while a Client user belongs to it.
    pub async fn delete_client(&self, account_id: i64, id: i64) -> Result<()> {
        let mut tx = self.begin_write().await?;
        owned(&mut tx, "clients", id, account_id).await?;
        let users: i64 = sqlx::query("SELECT COUNT(*) AS n FROM users WHERE client_id = $1")
            .bind(id)
            .fetch_one(&mut *tx)
            .await?
            .try_get("n")?;
        if users > 0 {
            return Err(StorageError::Conflict("client_users".into()));
        }
        exec_each(
            &mut tx,
            &[
                "DELETE FROM webhook_deliveries WHERE subscription_id IN (SELECT id FROM webhook_subscriptions WHERE client_id = $1)",
                "DELETE FROM webhook_subscriptions WHERE client_id = $1",
                "UPDATE bms SET client_id = NULL WHERE client_id = $1",
                "UPDATE wabas SET client_id = NULL WHERE client_id = $1",
                "UPDATE channels SET client_id = NULL WHERE client_id = $1",
                "DELETE FROM clients WHERE id = $1",
            ],
            id,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    // ---- scoped inventory reads ------------------------------------------------------

    /// Rows of `select` (which ends in `WHERE <alias>.account_id = $1`) that satisfy `cond`,
    /// by `id_column`; only the row `id` when given.
    async fn scoped_rows<T>(
        &self,
        select: String,
        cond: String,
        id_column: &str,
        account_id: i64,
        id: Option<i64>,
        read: impl Fn(&AnyRow) -> Result<T>,
    ) -> Result<Vec<T>> {
        let only = if id.is_some() {
            format!(" AND {id_column} = $2")
        } else {
            String::new()
        };
        let sql = format!("{select} AND {cond}{only} ORDER BY {id_column}");
        let mut query = sqlx::query(&sql).bind(account_id);
        if let Some(id) = id {
            query = query.bind(id);
        }
        query
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(read)
            .collect()
    }

    async fn scoped_bm_rows(
        &self,
        account_id: i64,
        scope: &Scope,
        id: Option<i64>,
    ) -> Result<Vec<BmRecord>> {
        let select = format!("SELECT {BM_COLUMNS} FROM bms bm WHERE bm.account_id = $1");
        self.scoped_rows(select, bm_in_scope(scope), "bm.id", account_id, id, read_bm)
            .await
    }

    async fn scoped_waba_rows(
        &self,
        account_id: i64,
        scope: &Scope,
        id: Option<i64>,
    ) -> Result<Vec<WabaRecord>> {
        let select = format!("SELECT {WABA_COLUMNS} FROM wabas w WHERE w.account_id = $1");
        self.scoped_rows(
            select,
            waba_in_scope(scope),
            "w.id",
            account_id,
            id,
            read_waba,
        )
        .await
    }

    async fn scoped_channel_rows(
        &self,
        account_id: i64,
        scope: &Scope,
        id: Option<i64>,
    ) -> Result<Vec<ChannelRecord>> {
        let select = format!(
            "SELECT {CHANNEL_COLUMNS} FROM channels c WHERE c.account_id = $1 AND c.official = 1"
        );
        self.scoped_rows(
            select,
            channel_in_scope(scope),
            "c.id",
            account_id,
            id,
            read_channel,
        )
        .await
    }

    /// The account's BMs in `scope`, by id.
    pub async fn scoped_bms(&self, account_id: i64, scope: &Scope) -> Result<Vec<BmRecord>> {
        self.scoped_bm_rows(account_id, scope, None).await
    }

    /// A BM in `scope` (NotFound outside it).
    pub async fn scoped_bm(&self, account_id: i64, scope: &Scope, id: i64) -> Result<BmRecord> {
        self.scoped_bm_rows(account_id, scope, Some(id))
            .await?
            .pop()
            .ok_or(StorageError::NotFound)
    }

    /// The account's WABAs in `scope`, by id.
    pub async fn scoped_wabas(&self, account_id: i64, scope: &Scope) -> Result<Vec<WabaRecord>> {
        self.scoped_waba_rows(account_id, scope, None).await
    }

    /// A WABA in `scope` by disparo id (NotFound outside it).
    pub async fn scoped_waba(&self, account_id: i64, scope: &Scope, id: i64) -> Result<WabaRecord> {
        self.scoped_waba_rows(account_id, scope, Some(id))
            .await?
            .pop()
            .ok_or(StorageError::NotFound)
    }

    /// The account's official numbers in `scope`, by id.
    pub async fn scoped_channels(
        &self,
        account_id: i64,
        scope: &Scope,
    ) -> Result<Vec<ChannelRecord>> {
        self.scoped_channel_rows(account_id, scope, None).await
    }

    /// An official number in `scope` (NotFound outside it).
    pub async fn scoped_channel(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
    ) -> Result<ChannelRecord> {
        self.scoped_channel_rows(account_id, scope, Some(id))
            .await?
            .pop()
            .ok_or(StorageError::NotFound)
    }

    // ---- inventory writes ------------------------------------------------------------

    /// Stores a BM the panel creates. Errors: Conflict `id_provider` when the account already
    /// has a BM with that Business ID.
    pub async fn insert_panel_bm(&self, account_id: i64, f: &BmFields) -> Result<BmRecord> {
        let mut tx = self.begin_write().await?;
        let provider_id = f
            .provider_business_id
            .clone()
            .unwrap_or_else(placeholder_business_id);
        let res = sqlx::query(
            "INSERT INTO bms (account_id, provider_business_id, name, client_id, app_id, has_provider_id, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
        )
        .bind(account_id)
        .bind(&provider_id)
        .bind(&f.name)
        .bind(f.client_id)
        .bind(f.app_id.as_deref())
        .bind(f.provider_business_id.is_some() as i64)
        .bind(now_ms())
        .fetch_one(&mut *tx)
        .await;
        let id: i64 = match res {
            Ok(r) => r.try_get("id")?,
            Err(e) if StorageError::is_unique_violation(&e) => {
                return Err(StorageError::Conflict("id_provider".into()))
            }
            Err(e) => return Err(e.into()),
        };
        self.write_bm_secrets(&mut tx, id, f).await?;
        tx.commit().await?;
        self.bm(account_id, id).await
    }

    /// Updates a BM from the panel; a `None` token or secret keeps the stored one.
    pub async fn update_panel_bm(
        &self,
        account_id: i64,
        id: i64,
        f: &BmFields,
    ) -> Result<BmRecord> {
        let mut tx = self.begin_write().await?;
        let current = sqlx::query("SELECT provider_business_id, has_provider_id FROM bms WHERE id = $1 AND account_id = $2")
            .bind(id)
            .bind(account_id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StorageError::NotFound)?;
        let (provider_id, has) = match &f.provider_business_id {
            Some(p) => (p.clone(), 1i64),
            None => (
                current.try_get::<String, _>("provider_business_id")?,
                current.try_get::<i64, _>("has_provider_id")?,
            ),
        };
        let res = sqlx::query(
            "UPDATE bms SET name = $3, client_id = $4, app_id = COALESCE($5, app_id), provider_business_id = $6, has_provider_id = $7 \
             WHERE id = $1 AND account_id = $2",
        )
        .bind(id)
        .bind(account_id)
        .bind(&f.name)
        .bind(f.client_id)
        .bind(f.app_id.as_deref())
        .bind(&provider_id)
        .bind(has)
        .execute(&mut *tx)
        .await;
        match res {
            Ok(_) => {}
            Err(e) if StorageError::is_unique_violation(&e) => {
                return Err(StorageError::Conflict("id_provider".into()))
            }
            Err(e) => return Err(e.into()),
        }
        self.write_bm_secrets(&mut tx, id, f).await?;
        tx.commit().await?;
        self.bm(account_id, id).await
    }

    async fn write_bm_secrets(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        id: i64,
        f: &BmFields,
    ) -> Result<()> {
        if let Some(t) = &f.access_token {
            sqlx::query("UPDATE bms SET access_token_enc = $2 WHERE id = $1")
                .bind(id)
                .bind(self.cipher.seal(t, "bms", "access_token_enc", id))
                .execute(&mut **tx)
                .await?;
        }
        if let Some(s) = &f.app_secret {
            sqlx::query("UPDATE bms SET app_secret_enc = $2 WHERE id = $1")
                .bind(id)
                .bind(self.cipher.seal(s, "bms", "app_secret_enc", id))
                .execute(&mut **tx)
                .await?;
        }
        Ok(())
    }

    /// A BM's own credential, opened.
    pub async fn bm_secrets(&self, id: i64) -> Result<BmSecrets> {
        let row = sqlx::query("SELECT access_token_enc, app_secret_enc FROM bms WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or(StorageError::NotFound)?;
        let open = |col: &str| -> Result<Option<Secret>> {
            let v: Option<String> = row.try_get(col)?;
            v.map(|v| {
                self.cipher
                    .open(&v, "bms", col, id)
                    .map_err(StorageError::from)
            })
            .transpose()
        };
        Ok(BmSecrets {
            access_token: open("access_token_enc")?,
            app_secret: open("app_secret_enc")?,
        })
    }

    /// Records a BM's health after a sync.
    pub async fn set_bm_health(&self, id: i64, health: &str, name: Option<&str>) -> Result<()> {
        sqlx::query("UPDATE bms SET health_status = $2, name = CASE WHEN $3 IS NULL OR $3 = '' THEN name ELSE $3 END WHERE id = $1")
            .bind(id)
            .bind(health)
            .bind(name)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Whether a campaign is running (or scheduled to) on one of these numbers.
    pub async fn campaign_running_on(&self, channel_ids: &[i64]) -> Result<bool> {
        if channel_ids.is_empty() {
            return Ok(false);
        }
        let sql = format!(
            "SELECT COUNT(*) AS n FROM campaign_channels cc JOIN campaigns k ON k.id = cc.campaign_id \
             WHERE cc.channel_id IN ({}) AND k.state IN ('running', 'scheduled')",
            id_list(channel_ids)
        );
        let n: i64 = sqlx::query(&sql)
            .fetch_one(&self.pool)
            .await?
            .try_get("n")?;
        Ok(n > 0)
    }

    /// Removes a panel BM: its WABAs and numbers stay (they keep their history and go on
    /// working) and lose the link, in one transaction; tasks lose the link too.
    pub async fn delete_bm(&self, account_id: i64, id: i64) -> Result<()> {
        let mut tx = self.begin_write().await?;
        owned(&mut tx, "bms", id, account_id).await?;
        exec_each(
            &mut tx,
            &[
                "UPDATE wabas SET bm_id = NULL WHERE bm_id = $1",
                "UPDATE channels SET bm_id = NULL WHERE bm_id = $1",
                "UPDATE tasks SET bm_id = NULL WHERE bm_id = $1",
                "DELETE FROM bms WHERE id = $1",
            ],
            id,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Updates a WABA's operator fields.
    pub async fn update_waba_panel(
        &self,
        account_id: i64,
        id: i64,
        status: Option<&str>,
        client_id: Option<Option<i64>>,
        name: Option<&str>,
    ) -> Result<WabaRecord> {
        let current = self.waba_by_id(account_id, id).await?;
        let client = client_id.unwrap_or(current.client_id);
        sqlx::query("UPDATE wabas SET status = $3, client_id = $4, name = $5 WHERE id = $1 AND account_id = $2")
            .bind(id)
            .bind(account_id)
            .bind(status.unwrap_or(&current.status))
            .bind(client)
            .bind(name.unwrap_or(&current.name))
            .execute(&self.writer)
            .await?;
        self.waba_by_id(account_id, id).await
    }

    /// A WABA of the account by disparo id.
    pub async fn waba_by_id(&self, account_id: i64, id: i64) -> Result<WabaRecord> {
        let sql =
            format!("SELECT {WABA_COLUMNS} FROM wabas w WHERE w.id = $1 AND w.account_id = $2");
        let row = sqlx::query(&sql)
            .bind(id)
            .bind(account_id)
            .fetch_optional(&self.pool)
            .await?;
        found(row, read_waba)
    }

    /// Removes a WABA without numbers. Errors: Conflict `waba_numbers` while numbers of the
    /// account are in it.
    pub async fn delete_waba(&self, account_id: i64, id: i64) -> Result<()> {
        let mut tx = self.begin_write().await?;
        let w = sqlx::query("SELECT provider_waba_id FROM wabas WHERE id = $1 AND account_id = $2")
            .bind(id)
            .bind(account_id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StorageError::NotFound)?;
        let provider: String = w.try_get("provider_waba_id")?;
        let n: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM channels WHERE account_id = $1 AND waba_id = $2",
        )
        .bind(account_id)
        .bind(&provider)
        .fetch_one(&mut *tx)
        .await?
        .try_get("n")?;
        if n > 0 {
            return Err(StorageError::Conflict("waba_numbers".into()));
        }
        exec_each(
            &mut tx,
            &[
                "UPDATE tasks SET waba_id = NULL WHERE waba_id = $1",
                "DELETE FROM wabas WHERE id = $1",
            ],
            id,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Updates a number's operator fields: display name and client.
    pub async fn update_channel_panel(
        &self,
        account_id: i64,
        id: i64,
        name: Option<&str>,
        client_id: Option<Option<i64>>,
    ) -> Result<ChannelRecord> {
        let current = self.channel(AccountId(account_id), ChannelId(id)).await?;
        sqlx::query("UPDATE channels SET name = $3, client_id = $4, updated_at = $5 WHERE id = $1 AND account_id = $2")
            .bind(id)
            .bind(account_id)
            .bind(name.unwrap_or(&current.name))
            .bind(client_id.unwrap_or(current.client_id))
            .bind(now_ms())
            .execute(&self.writer)
            .await?;
        self.channel(AccountId(account_id), ChannelId(id)).await
    }

    /// The account's number with this provider phone number id, if any.
    pub async fn channel_by_phone_number_id(
        &self,
        account_id: i64,
        phone_number_id: &str,
    ) -> Result<Option<ChannelRecord>> {
        let sql = format!("SELECT {CHANNEL_COLUMNS} FROM channels c WHERE c.account_id = $1 AND c.phone_number_id = $2");
        let row = sqlx::query(&sql)
            .bind(account_id)
            .bind(phone_number_id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(read_channel).transpose()
    }

    /// Records a number's profile picture URL.
    pub async fn set_channel_photo(&self, id: i64, url: Option<&str>) -> Result<()> {
        sqlx::query("UPDATE channels SET photo_url = $2 WHERE id = $1")
            .bind(id)
            .bind(url)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Removes a number that never sent nor received: its subscriptions, template states,
    /// guardrail authorisations and conversations go with it in one transaction. Errors:
    /// Conflict `number_history` when messages or campaigns reference it (D-057: history is
    /// never deleted; such a number stays, disconnected).
    pub async fn delete_channel(&self, account: AccountId, id: ChannelId) -> Result<()> {
        let (account_id, id) = (account.get(), id.get());
        let mut tx = self.begin_write().await?;
        owned(&mut tx, "channels", id, account_id).await?;
        let used: i64 = sqlx::query(NUMBER_HISTORY)
            .bind(id)
            .fetch_one(&mut *tx)
            .await?
            .try_get("n")?;
        if used > 0 {
            return Err(StorageError::Conflict("number_history".into()));
        }
        exec_each(
            &mut tx,
            &[
                "DELETE FROM webhook_deliveries WHERE subscription_id IN (SELECT id FROM webhook_subscriptions WHERE channel_id = $1)",
                "DELETE FROM webhook_subscriptions WHERE channel_id = $1",
                "DELETE FROM template_channels WHERE channel_id = $1",
                "DELETE FROM channel_cap_authorizations WHERE channel_id = $1",
                "DELETE FROM channel_sender_templates WHERE channel_id = $1",
                "DELETE FROM conversations WHERE channel_id = $1",
                "UPDATE tasks SET channel_id = NULL WHERE channel_id = $1",
                "DELETE FROM channels WHERE id = $1",
            ],
            id,
        )
        .await?;
        tx.commit().await?;
        self.templates.invalidate();
        Ok(())
    }

    /// Whether a number has history (messages or campaigns) that keeps it in the inventory.
    pub async fn delete_channel_check(&self, id: i64) -> Result<bool> {
        let used: i64 = sqlx::query(NUMBER_HISTORY)
            .bind(id)
            .fetch_one(&self.pool)
            .await?
            .try_get("n")?;
        Ok(used > 0)
    }

    /// Messages sent by the numbers of a Client user's scope, newest first: at most `limit`,
    /// with an id below `before_id` (the cursor), of one number (`channel_id`) and `status`
    /// when given, created in `[since, until)` (ms).
    #[allow(clippy::too_many_arguments)]
    pub async fn client_sends(
        &self,
        account_id: i64,
        scope: &Scope,
        channel_id: Option<i64>,
        status: Option<&str>,
        since: Option<i64>,
        until: Option<i64>,
        before_id: Option<i64>,
        limit: i64,
    ) -> Result<Vec<crate::messages::MessageRecord>> {
        let mut conds = vec![
            "m.account_id = $1".to_string(),
            "m.direction = 'out'".to_string(),
            format!(
                "m.channel_id IN (SELECT c.id FROM channels c WHERE c.account_id = $1 AND {})",
                channel_in_scope(scope)
            ),
        ];
        if let Some(c) = channel_id {
            conds.push(format!("m.channel_id = {c}"));
        }
        if status.is_some() {
            conds.push("m.status = $2".into());
        }
        if let Some(t) = since {
            conds.push(format!("m.created_at >= {t}"));
        }
        if let Some(t) = until {
            conds.push(format!("m.created_at < {t}"));
        }
        if let Some(b) = before_id {
            conds.push(format!("m.id < {b}"));
        }
        let columns = crate::messages::COLUMNS
            .split(", ")
            .map(|c| format!("m.{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "SELECT {columns} FROM messages m WHERE {} ORDER BY m.id DESC LIMIT {}",
            conds.join(" AND "),
            limit.clamp(1, 500)
        );
        let mut q = sqlx::query(&sql).bind(account_id);
        if let Some(s) = status {
            q = q.bind(s);
        }
        q.fetch_all(&self.pool)
            .await?
            .iter()
            .map(crate::messages::read)
            .collect()
    }

    // ---- tasks -----------------------------------------------------------------------

    /// The account's tasks by column and position.
    pub async fn list_tasks(&self, account_id: i64) -> Result<Vec<TaskRecord>> {
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE account_id = $1 ORDER BY status, position, id"
        );
        let rows = sqlx::query(&sql)
            .bind(account_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(read_task).collect()
    }

    /// A task of the account.
    pub async fn task(&self, account_id: i64, id: i64) -> Result<TaskRecord> {
        let sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = $1 AND account_id = $2");
        let row = sqlx::query(&sql)
            .bind(id)
            .bind(account_id)
            .fetch_optional(&self.pool)
            .await?;
        found(row, read_task)
    }

    /// Creates (`id` None) or updates a task and places it at its position in its column
    /// (the column is renumbered 0… in the same transaction).
    pub async fn save_task(
        &self,
        account_id: i64,
        id: Option<i64>,
        f: &TaskFields,
        author: i64,
    ) -> Result<TaskRecord> {
        let now = now_ms();
        let mut tx = self.begin_write().await?;
        let id = match id {
            None => sqlx::query(
                "INSERT INTO tasks (account_id, title, description, status, priority, position, assignee_id, bm_id, waba_id, channel_id, campaign_id, created_by, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, 0, $6, $7, $8, $9, $10, $11, $12, $12) RETURNING id",
            )
            .bind(account_id)
            .bind(&f.title)
            .bind(&f.description)
            .bind(&f.status)
            .bind(&f.priority)
            .bind(f.assignee_id)
            .bind(f.bm_id)
            .bind(f.waba_id)
            .bind(f.channel_id)
            .bind(f.campaign_id)
            .bind(author)
            .bind(now)
            .fetch_one(&mut *tx)
            .await?
            .try_get::<i64, _>("id")?,
            Some(id) => {
                let n = sqlx::query(
                    "UPDATE tasks SET title = $3, description = $4, status = $5, priority = $6, assignee_id = $7, bm_id = $8, waba_id = $9, channel_id = $10, campaign_id = $11, updated_at = $12 \
                     WHERE id = $1 AND account_id = $2",
                )
                .bind(id)
                .bind(account_id)
                .bind(&f.title)
                .bind(&f.description)
                .bind(&f.status)
                .bind(&f.priority)
                .bind(f.assignee_id)
                .bind(f.bm_id)
                .bind(f.waba_id)
                .bind(f.channel_id)
                .bind(f.campaign_id)
                .bind(now)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if n == 0 {
                    return Err(StorageError::NotFound);
                }
                id
            }
        };
        // Renumber the column with the task at its wanted place.
        let rows = sqlx::query(
            "SELECT id FROM tasks WHERE account_id = $1 AND status = $2 AND id <> $3 ORDER BY position, id",
        )
        .bind(account_id)
        .bind(&f.status)
        .bind(id)
        .fetch_all(&mut *tx)
        .await?;
        let mut order: Vec<i64> = rows
            .iter()
            .map(|r| r.try_get::<i64, _>("id"))
            .collect::<std::result::Result<_, _>>()?;
        let at = f
            .position
            .map_or(order.len(), |p| (p.max(0) as usize).min(order.len()));
        order.insert(at, id);
        for (pos, tid) in order.iter().enumerate() {
            sqlx::query("UPDATE tasks SET position = $2 WHERE id = $1")
                .bind(tid)
                .bind(pos as i64)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        self.task(account_id, id).await
    }

    /// Removes a task.
    pub async fn delete_task(&self, account_id: i64, id: i64) -> Result<()> {
        let n = sqlx::query("DELETE FROM tasks WHERE id = $1 AND account_id = $2")
            .bind(id)
            .bind(account_id)
            .execute(&self.writer)
            .await?
            .rows_affected();
        if n == 0 {
            return Err(StorageError::NotFound);
        }
        Ok(())
    }

    /// Whether a campaign id belongs to the account.
    pub async fn campaign_exists(&self, account: AccountId, id: CampaignId) -> Result<bool> {
        Ok(
            sqlx::query("SELECT id FROM campaigns WHERE id = $1 AND account_id = $2")
                .bind(id.get())
                .bind(account.get())
                .fetch_optional(&self.pool)
                .await?
                .is_some(),
        )
    }

    /// The account's campaigns (id, name, state, created), newest first, for the panel's
    /// state; at most `limit`.
    pub async fn campaign_summaries(
        &self,
        account_id: i64,
        limit: i64,
    ) -> Result<Vec<(i64, String, String, i64)>> {
        let rows = sqlx::query(
            "SELECT id, name, state, created_at FROM campaigns WHERE account_id = $1 ORDER BY id DESC LIMIT $2",
        )
        .bind(account_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("id")?,
                    r.try_get("name")?,
                    r.try_get("state")?,
                    r.try_get("created_at")?,
                ))
            })
            .collect()
    }
}
