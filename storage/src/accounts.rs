//! Accounts, API tokens (stored as SHA-256 hashes only) and the audit log.

use crate::{now_ms, Result, StorageError, Store};
use engine::token::{display_prefix, hash_token, TOKEN_PREFIX};
use rand::Rng;
use serde::Serialize;
use sqlx::Row;

/// An account: the tenant every record belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Account {
    /// Id.
    pub id: i64,
    /// URL-safe slug, unique.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// Creation time, ms.
    pub created_at: i64,
}

/// What a valid token resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenOwner {
    /// The token's id.
    pub token_id: i64,
    /// The token's name (recorded in the audit log).
    pub token_name: String,
    /// Access level (`admin` for every token until access levels land).
    pub level: String,
    /// The account it is bound to.
    pub account_id: i64,
    /// The account's slug.
    pub account_slug: String,
}

/// A newly created token: the value is returned once and never stored.
#[derive(Debug, Clone)]
pub struct CreatedToken {
    /// Token id.
    pub id: i64,
    /// The full value (`svc_…`), shown once.
    pub value: engine::Secret,
    /// Display prefix (first 8 characters).
    pub prefix: String,
}

/// One audit log line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditEntry {
    /// Id.
    pub id: i64,
    /// Name of the token that made the call.
    pub token_name: String,
    /// `METHOD /route/template`.
    pub action: String,
    /// The concrete path (with ids).
    pub target: String,
    /// HTTP status of the answer.
    pub status: i64,
    /// When, ms.
    pub at: i64,
}

/// Whether `slug` is a valid account slug: 1 to 64 of `a-z`, `0-9`, `-`.
pub fn valid_slug(slug: &str) -> bool {
    (1..=64).contains(&slug.len())
        && slug
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

impl Store {
    /// Returns the account with `slug`, creating it when absent.
    pub async fn ensure_account(&self, slug: &str) -> Result<Account> {
        if !valid_slug(slug) {
            return Err(StorageError::Conflict(format!(
                "invalid account slug `{slug}`: use a-z, 0-9 and -"
            )));
        }
        sqlx::query(
            "INSERT INTO accounts (slug, name, created_at) VALUES ($1, $2, $3) ON CONFLICT (slug) DO NOTHING",
        )
        .bind(slug)
        .bind(slug)
        .bind(now_ms())
        .execute(&self.writer)
        .await?;
        let row = sqlx::query("SELECT id, slug, name, created_at FROM accounts WHERE slug = $1")
            .bind(slug)
            .fetch_one(&self.pool)
            .await?;
        Ok(Account {
            id: row.try_get("id")?,
            slug: row.try_get("slug")?,
            name: row.try_get("name")?,
            created_at: row.try_get("created_at")?,
        })
    }

    /// How many accounts exist.
    pub async fn count_accounts(&self) -> Result<i64> {
        Ok(sqlx::query("SELECT COUNT(*) AS n FROM accounts")
            .fetch_one(&self.pool)
            .await?
            .try_get("n")?)
    }

    /// Creates a token for an account: `svc_` + 40 random URL-safe characters. Only its hash
    /// and display prefix are stored.
    pub async fn create_token(
        &self,
        account_id: i64,
        name: &str,
        level: &str,
    ) -> Result<CreatedToken> {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let value: String = {
            let mut rng = rand::thread_rng();
            let body: String = (0..40)
                .map(|_| char::from(ALPHABET[rng.gen_range(0..ALPHABET.len())]))
                .collect();
            format!("{TOKEN_PREFIX}{body}")
        };
        let prefix = display_prefix(&value);
        let row = sqlx::query(
            "INSERT INTO api_tokens (account_id, name, prefix, token_hash, level, created_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        )
        .bind(account_id)
        .bind(name)
        .bind(&prefix)
        .bind(hash_token(&value))
        .bind(level)
        .bind(now_ms())
        .fetch_one(&self.writer)
        .await?;
        Ok(CreatedToken {
            id: row.try_get("id")?,
            value: engine::Secret::new(value),
            prefix,
        })
    }

    /// Resolves a presented token value to its owner; `None` for unknown or revoked tokens.
    /// A token resolved in the last [`TOKEN_CACHE_TTL`] is answered from memory (D-075); unknown
    /// values are never kept.
    pub async fn authenticate_token(&self, value: &str) -> Result<Option<TokenOwner>> {
        let hash = hash_token(value);
        if let Some(owner) = self.tokens.get(&hash) {
            return Ok(Some(owner));
        }
        let row = sqlx::query(
            "SELECT t.id, t.name, t.level, t.account_id, a.slug FROM api_tokens t JOIN accounts a ON a.id = t.account_id WHERE t.token_hash = $1 AND t.revoked_at IS NULL",
        )
        .bind(&hash)
        .fetch_optional(&self.pool)
        .await?;
        let owner = row
            .map(|r| {
                Ok::<_, StorageError>(TokenOwner {
                    token_id: r.try_get("id")?,
                    token_name: r.try_get("name")?,
                    level: r.try_get("level")?,
                    account_id: r.try_get("account_id")?,
                    account_slug: r.try_get("slug")?,
                })
            })
            .transpose()?;
        if let Some(o) = &owner {
            self.tokens.put(hash, o.clone());
        }
        Ok(owner)
    }

    /// Whether `value` is a token that existed and was revoked (asked only after
    /// [`Store::authenticate_token`] refused it, so a revoked token is told apart from a
    /// malformed or unknown one; issue 55).
    pub async fn token_revoked(&self, value: &str) -> Result<bool> {
        let row: Option<(i64,)> = sqlx::query_as(
            "SELECT id FROM api_tokens WHERE token_hash = $1 AND revoked_at IS NOT NULL",
        )
        .bind(hash_token(value))
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.is_some())
    }

    /// Appends one line to the account's audit log through the group commit of the request
    /// path's writes (D-076): queued here, committed with the writer's next write, or alone
    /// after [`crate::sends::AUDIT_LINGER`] (50 ms; D-089); the caller (a request about to be
    /// answered) does not wait for the commit.
    /// Errors: only when the writer has stopped.
    pub async fn append_audit(
        &self,
        account_id: i64,
        token_name: &str,
        action: &str,
        target: &str,
        status: u16,
    ) -> Result<()> {
        self.sends
            .audit(crate::sends::AuditLine {
                account_id,
                token_name: token_name.to_string(),
                action: action.to_string(),
                target: target.to_string(),
                status,
                at: now_ms(),
            })
            .await
    }

    /// The account's most recent audit lines, newest first; the lines queued before the call are
    /// committed first (D-076), so a caller reads the lines of its own earlier requests.
    pub async fn list_audit(&self, account_id: i64, limit: i64) -> Result<Vec<AuditEntry>> {
        self.list_audit_where(account_id, &AuditFilter::default(), limit)
            .await
    }

    /// [`Store::list_audit`] narrowed by `filter` (the panel's audit page, issue 47 item 10).
    pub async fn list_audit_where(
        &self,
        account_id: i64,
        filter: &AuditFilter,
        limit: i64,
    ) -> Result<Vec<AuditEntry>> {
        // The lines queued before this read (its caller's own requests) are committed first.
        self.sends.flush().await?;
        let mut sql = String::from(
            "SELECT id, token_name, action, target, status, at FROM audit_log WHERE account_id = $1 AND id < $2",
        );
        let mut binds: Vec<String> = Vec::new();
        if let Some(who) = &filter.author_contains {
            binds.push(format!("%{}%", like_escaped(&who.to_lowercase())));
            sql.push_str(&format!(
                " AND LOWER(token_name) LIKE ${} ESCAPE '\\'",
                binds.len() + 2
            ));
        }
        if let Some(resource) = &filter.resource {
            let r = like_escaped(resource);
            binds.push(format!("% /api/{r}%"));
            binds.push(format!("% /api/v1/{r}%"));
            sql.push_str(&format!(
                " AND (action LIKE ${} ESCAPE '\\' OR action LIKE ${} ESCAPE '\\')",
                binds.len() + 1,
                binds.len() + 2
            ));
        }
        sql.push_str(" ORDER BY id DESC LIMIT ");
        sql.push_str(&limit.clamp(1, 10_000).to_string());
        let mut q = sqlx::query(&sql)
            .bind(account_id)
            .bind(filter.before_id.unwrap_or(i64::MAX));
        for b in &binds {
            q = q.bind(b);
        }
        let rows = q.fetch_all(&self.pool).await?;
        rows.iter()
            .map(|r| {
                Ok(AuditEntry {
                    id: r.try_get("id")?,
                    token_name: r.try_get("token_name")?,
                    action: r.try_get("action")?,
                    target: r.try_get("target")?,
                    status: r.try_get("status")?,
                    at: r.try_get("at")?,
                })
            })
            .collect()
    }
}

/// What an audit listing is narrowed to ([`Store::list_audit_where`]); every field optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Lines whose author (`token_name`) contains this, case-insensitive.
    pub author_contains: Option<String>,
    /// Lines on this resource: the first segment of the route after `/api` or `/api/v1`
    /// (`campaigns`, `tasks`, `phone-numbers`…).
    pub resource: Option<String>,
    /// Lines older than this id (the next page after a page that ended at it).
    pub before_id: Option<i64>,
}

/// `text` with LIKE's wildcards (`%`, `_`) and the escape (`\`) escaped.
fn like_escaped(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}

/// A token as listings show it (never the value).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TokenRecord {
    /// Id.
    pub id: i64,
    /// Name.
    pub name: String,
    /// Display prefix.
    pub prefix: String,
    /// Access level.
    pub level: String,
    /// Created, ms.
    pub created_at: i64,
    /// Revoked, ms.
    pub revoked_at: Option<i64>,
}

impl Store {
    /// A keyset page of the account's tokens, newest first: up to `limit` before the id
    /// `before` (issue 17).
    pub async fn list_tokens_page(
        &self,
        account_id: i64,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<TokenRecord>> {
        let rows = sqlx::query("SELECT id, name, prefix, level, created_at, revoked_at FROM api_tokens WHERE account_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3")
            .bind(account_id)
            .bind(before.unwrap_or(i64::MAX))
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(TokenRecord {
                    id: r.try_get("id")?,
                    name: r.try_get("name")?,
                    prefix: r.try_get("prefix")?,
                    level: r.try_get("level")?,
                    created_at: r.try_get("created_at")?,
                    revoked_at: r.try_get("revoked_at")?,
                })
            })
            .collect()
    }

    /// Revokes a token of the account; it stops working at once.
    pub async fn revoke_token(&self, account_id: i64, id: i64) -> Result<()> {
        let n = sqlx::query("UPDATE api_tokens SET revoked_at = $3 WHERE id = $1 AND account_id = $2 AND revoked_at IS NULL")
            .bind(id)
            .bind(account_id)
            .bind(now_ms())
            .execute(&self.writer)
            .await?
            .rows_affected();
        if n == 0 {
            return Err(StorageError::NotFound);
        }
        // It stops working here at once; another gateway process on the same database may
        // honour it for up to TOKEN_CACHE_TTL.
        self.tokens.forget(id);
        Ok(())
    }
}

/// How long a resolved API token is answered from memory (D-075): a revocation through this
/// process takes effect at once, through another process on the same database within this.
pub const TOKEN_CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(5);

/// Most tokens kept in memory; past it the cache starts over (tokens are few; this bounds
/// memory whatever is presented).
const TOKEN_CACHE_MAX: usize = 10_000;

/// API tokens resolved recently, by the hash of their value.
#[derive(Debug, Default)]
pub(crate) struct TokenCache(dashmap::DashMap<String, (TokenOwner, std::time::Instant)>);

impl TokenCache {
    fn get(&self, hash: &str) -> Option<TokenOwner> {
        let hit = self.0.get(hash)?;
        (hit.1.elapsed() < TOKEN_CACHE_TTL).then(|| hit.0.clone())
    }

    fn put(&self, hash: String, owner: TokenOwner) {
        if self.0.len() >= TOKEN_CACHE_MAX {
            self.0.clear();
        }
        self.0.insert(hash, (owner, std::time::Instant::now()));
    }

    fn forget(&self, token_id: i64) {
        self.0.retain(|_, (o, _)| o.token_id != token_id);
    }
}
