//! Wiki categories and pages.

use crate::{found, now_ms, Result, StorageError, Store};
use sqlx::any::AnyRow;
use sqlx::Row;

/// A wiki page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRecord {
    /// Id.
    pub id: i64,
    /// Owning account.
    pub account_id: i64,
    /// Title.
    pub title: String,
    /// Slug, unique per account.
    pub slug: String,
    /// Category.
    pub category_id: Option<i64>,
    /// `private` or `public`.
    pub visibility: String,
    /// Used as bot knowledge.
    pub bot_knowledge: bool,
    /// Plain-text excerpt.
    pub excerpt: String,
    /// Markdown.
    pub content: String,
    /// Created, ms.
    pub created_at: i64,
    /// Updated, ms.
    pub updated_at: i64,
}

/// A wiki category.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CategoryRecord {
    /// Id.
    pub id: i64,
    /// Name, unique per account.
    pub name: String,
    /// Created, ms.
    pub created_at: i64,
}

/// Filters of the page list.
#[derive(Debug, Clone, Default)]
pub struct PageFilter {
    /// Only this category.
    pub category_id: Option<i64>,
    /// Only `private` or `public`.
    pub visibility: Option<String>,
    /// Only pages that are (or are not) bot knowledge.
    pub bot_knowledge: Option<bool>,
    /// Keyset paging (issue 17): only pages created before this id…
    pub before_id: Option<i64>,
    /// …and at most this many (all when absent).
    pub limit: Option<i64>,
}

const P_COLUMNS: &str = "id, account_id, title, slug, category_id, visibility, bot_knowledge, excerpt, content, created_at, updated_at";

fn read_page(r: &AnyRow) -> Result<PageRecord> {
    Ok(PageRecord {
        id: r.try_get("id")?,
        account_id: r.try_get("account_id")?,
        title: r.try_get("title")?,
        slug: r.try_get("slug")?,
        category_id: r.try_get("category_id")?,
        visibility: r.try_get("visibility")?,
        bot_knowledge: r.try_get::<i64, _>("bot_knowledge")? != 0,
        excerpt: r.try_get("excerpt")?,
        content: r.try_get("content")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

fn read_category(r: &AnyRow) -> Result<CategoryRecord> {
    Ok(CategoryRecord {
        id: r.try_get("id")?,
        name: r.try_get("name")?,
        created_at: r.try_get("created_at")?,
    })
}

impl Store {
    /// The slugs of the account that start with `base` (to pick a unique one).
    pub async fn wiki_slugs_like(&self, account_id: i64, base: &str) -> Result<Vec<String>> {
        let rows = sqlx::query(
            "SELECT slug FROM wiki_pages WHERE account_id = $1 AND (slug = $2 OR slug LIKE $3)",
        )
        .bind(account_id)
        .bind(base)
        .bind(format!("{base}-%"))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok(r.try_get("slug")?)).collect()
    }

    /// Stores a page.
    #[allow(clippy::too_many_arguments)]
    pub async fn insert_wiki_page(
        &self,
        account_id: i64,
        title: &str,
        slug: &str,
        category_id: Option<i64>,
        visibility: &str,
        bot_knowledge: bool,
        excerpt: &str,
        content: &str,
    ) -> Result<PageRecord> {
        let sql = format!(
            "INSERT INTO wiki_pages (account_id, title, slug, category_id, visibility, bot_knowledge, excerpt, content, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) RETURNING {P_COLUMNS}"
        );
        let res = sqlx::query(&sql)
            .bind(account_id)
            .bind(title)
            .bind(slug)
            .bind(category_id)
            .bind(visibility)
            .bind(bot_knowledge as i64)
            .bind(excerpt)
            .bind(content)
            .bind(now_ms())
            .fetch_one(&self.writer)
            .await;
        match res {
            Ok(r) => read_page(&r),
            Err(e) if StorageError::is_unique_violation(&e) => {
                Err(StorageError::Conflict(format!("slug {slug} exists")))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Replaces a page's fields (the caller merged the partial update).
    pub async fn update_wiki_page(&self, p: &PageRecord) -> Result<PageRecord> {
        let sql = format!(
            "UPDATE wiki_pages SET title = $3, slug = $4, category_id = $5, visibility = $6, bot_knowledge = $7, excerpt = $8, content = $9, updated_at = $10 \
             WHERE id = $1 AND account_id = $2 RETURNING {P_COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(p.id)
            .bind(p.account_id)
            .bind(&p.title)
            .bind(&p.slug)
            .bind(p.category_id)
            .bind(&p.visibility)
            .bind(p.bot_knowledge as i64)
            .bind(&p.excerpt)
            .bind(&p.content)
            .bind(now_ms())
            .fetch_optional(&self.writer)
            .await?;
        found(row, read_page)
    }

    /// A page of this account.
    pub async fn wiki_page(&self, account_id: i64, id: i64) -> Result<PageRecord> {
        let sql = format!("SELECT {P_COLUMNS} FROM wiki_pages WHERE id = $1 AND account_id = $2");
        let row = sqlx::query(&sql)
            .bind(id)
            .bind(account_id)
            .fetch_optional(&self.pool)
            .await?;
        found(row, read_page)
    }

    /// A page of this account by its slug (the panel's `GET /api/wiki/{slug}`).
    pub async fn wiki_page_by_slug(&self, account_id: i64, slug: &str) -> Result<PageRecord> {
        let sql = format!("SELECT {P_COLUMNS} FROM wiki_pages WHERE slug = $1 AND account_id = $2");
        let row = sqlx::query(&sql)
            .bind(slug)
            .bind(account_id)
            .fetch_optional(&self.pool)
            .await?;
        found(row, read_page)
    }

    /// A public page by account slug and page slug (for `/w/{account}/{page}`).
    pub async fn public_wiki_page(&self, account_slug: &str, slug: &str) -> Result<PageRecord> {
        let sql = "SELECT p.id, p.account_id, p.title, p.slug, p.category_id, p.visibility, p.bot_knowledge, p.excerpt, p.content, p.created_at, p.updated_at \
             FROM wiki_pages p JOIN accounts a ON a.id = p.account_id WHERE a.slug = $1 AND p.slug = $2 AND p.visibility = 'public'";
        let row = sqlx::query(sql)
            .bind(account_slug)
            .bind(slug)
            .fetch_optional(&self.pool)
            .await?;
        found(row, read_page)
    }

    /// The account's pages, newest first (by creation: the id), filtered and paged.
    pub async fn list_wiki_pages(
        &self,
        account_id: i64,
        f: &PageFilter,
    ) -> Result<Vec<PageRecord>> {
        let sql = format!(
            "SELECT {P_COLUMNS} FROM wiki_pages WHERE account_id = $1 \
             AND ($2 IS NULL OR category_id = $2) AND ($3 IS NULL OR visibility = $3) AND ($4 IS NULL OR bot_knowledge = $4) \
             AND id < $5 ORDER BY id DESC LIMIT $6"
        );
        let rows = sqlx::query(&sql)
            .bind(account_id)
            .bind(f.category_id)
            .bind(f.visibility.clone())
            .bind(f.bot_knowledge.map(|b| b as i64))
            .bind(f.before_id.unwrap_or(i64::MAX))
            .bind(f.limit.unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(read_page).collect()
    }

    /// Removes a page.
    pub async fn delete_wiki_page(&self, account_id: i64, id: i64) -> Result<()> {
        let n = sqlx::query("DELETE FROM wiki_pages WHERE id = $1 AND account_id = $2")
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

    /// Creates a category.
    pub async fn insert_wiki_category(
        &self,
        account_id: i64,
        name: &str,
    ) -> Result<CategoryRecord> {
        let res = sqlx::query("INSERT INTO wiki_categories (account_id, name, created_at) VALUES ($1, $2, $3) RETURNING id, name, created_at")
            .bind(account_id)
            .bind(name)
            .bind(now_ms())
            .fetch_one(&self.writer)
            .await;
        match res {
            Ok(r) => read_category(&r),
            Err(e) if StorageError::is_unique_violation(&e) => {
                Err(StorageError::Conflict(format!("category {name} exists")))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The account's categories by name.
    pub async fn list_wiki_categories(&self, account_id: i64) -> Result<Vec<CategoryRecord>> {
        let rows = sqlx::query(
            "SELECT id, name, created_at FROM wiki_categories WHERE account_id = $1 ORDER BY name",
        )
        .bind(account_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(read_category).collect()
    }

    /// Renames a category.
    pub async fn rename_wiki_category(
        &self,
        account_id: i64,
        id: i64,
        name: &str,
    ) -> Result<CategoryRecord> {
        let res = sqlx::query("UPDATE wiki_categories SET name = $3 WHERE id = $1 AND account_id = $2 RETURNING id, name, created_at")
            .bind(id)
            .bind(account_id)
            .bind(name)
            .fetch_optional(&self.writer)
            .await;
        match res {
            Ok(Some(r)) => read_category(&r),
            Ok(None) => Err(StorageError::NotFound),
            Err(e) if StorageError::is_unique_violation(&e) => {
                Err(StorageError::Conflict(format!("category {name} exists")))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Removes a category; its pages stay, without category.
    pub async fn delete_wiki_category(&self, account_id: i64, id: i64) -> Result<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "UPDATE wiki_pages SET category_id = NULL WHERE category_id = $1 AND account_id = $2",
        )
        .bind(id)
        .bind(account_id)
        .execute(&mut *tx)
        .await?;
        let n = sqlx::query("DELETE FROM wiki_categories WHERE id = $1 AND account_id = $2")
            .bind(id)
            .bind(account_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if n == 0 {
            return Err(StorageError::NotFound);
        }
        tx.commit().await?;
        Ok(())
    }
}
