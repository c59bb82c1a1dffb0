//! The template library and each template's state on each number.

use crate::{found, now_ms, Result, StorageError, Store};
use sqlx::any::AnyRow;
use sqlx::Row;

pub use engine::library::TemplateStatus;

/// A library template.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateRecord {
    /// Id.
    pub id: i64,
    /// Owning account.
    pub account_id: i64,
    /// Library name.
    pub name: String,
    /// Name at the provider (base; versions add `_v2`…).
    pub provider_name: String,
    /// `official`.
    pub kind: String,
    /// `marketing`, `utility`, `authentication`.
    pub category: String,
    /// Locale.
    pub language: String,
    /// Body.
    pub body: String,
    /// `text` when there is a text header.
    pub header_type: Option<String>,
    /// Header text.
    pub header_text: Option<String>,
    /// Footer.
    pub footer_text: Option<String>,
    /// Media header.
    pub has_media_header: bool,
    /// MIME type of the media header's example (`image/jpeg`, `image/png`), when one was
    /// given (issue 47 item 6); the bytes are read by [`Store::template_header_example`].
    pub header_example_mime: Option<String>,
    /// Buttons (JSON array).
    pub buttons: serde_json::Value,
    /// var_map (JSON object).
    pub var_map: serde_json::Value,
    /// Problems (JSON array).
    pub problems: serde_json::Value,
    /// Submitted by itself to every number added to or connected in the account (issue 17).
    pub auto_replicate: bool,
    /// Created, ms.
    pub created_at: i64,
    /// Updated, ms.
    pub updated_at: i64,
}

/// A template's state on one number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateChannel {
    /// Id.
    pub id: i64,
    /// Template.
    pub template_id: i64,
    /// Channel.
    pub channel_id: i64,
    /// The channel's WABA (one provider template per WABA).
    pub waba_id: String,
    /// Name at the provider of the version in use.
    pub provider_name: String,
    /// Provider template id.
    pub provider_template_id: Option<String>,
    /// Version (1, then 2 for `_v2`…).
    pub version: i64,
    /// Its state on this number (an unknown stored value is [`StorageError::Corrupt`]).
    pub status: TemplateStatus,
    /// The provider's reason, on rejection or failure.
    pub rejection_reason: Option<String>,
    /// The template's quality on this number (`GREEN`, `YELLOW`, `RED`, `UNKNOWN`), from
    /// `message_template_quality_update`; `None` until the provider reports one (D-074).
    pub quality: Option<String>,
    /// Updated, ms.
    pub updated_at: i64,
}

impl TemplateChannel {
    /// The row's state, to write again (on another number of the WABA, or back as it was).
    pub fn state(&self) -> TemplateChannelState<'_> {
        TemplateChannelState {
            waba_id: &self.waba_id,
            provider_name: &self.provider_name,
            provider_template_id: self.provider_template_id.as_deref(),
            version: self.version,
            status: self.status,
            rejection_reason: self.rejection_reason.as_deref(),
        }
    }
}

/// A template's state on a number, as [`Store::upsert_template_channel`] and
/// [`Store::record_template_answer`] write it.
#[derive(Debug, Clone, Copy)]
pub struct TemplateChannelState<'a> {
    /// The number's WABA.
    pub waba_id: &'a str,
    /// Name at the provider of the version in use.
    pub provider_name: &'a str,
    /// Provider template id, once the provider answered.
    pub provider_template_id: Option<&'a str>,
    /// Version (1, then 2 for `_v2`…).
    pub version: i64,
    /// Its state on this number.
    pub status: TemplateStatus,
    /// The provider's reason, on rejection or failure.
    pub rejection_reason: Option<&'a str>,
}

/// A new library template.
#[derive(Debug, Clone)]
pub struct NewTemplate {
    /// Owning account.
    pub account_id: i64,
    /// Library name.
    pub name: String,
    /// Provider name.
    pub provider_name: String,
    /// Category.
    pub category: String,
    /// Locale.
    pub language: String,
    /// Body.
    pub body: String,
    /// Header text.
    pub header_text: Option<String>,
    /// Header format of a media header imported from the provider (`image`, `video`,
    /// `document`); `None`: `text` when there is header text.
    pub header_media: Option<String>,
    /// Footer.
    pub footer_text: Option<String>,
    /// Buttons JSON.
    pub buttons: serde_json::Value,
    /// var_map JSON.
    pub var_map: serde_json::Value,
    /// Problems JSON.
    pub problems: serde_json::Value,
    /// Follows new numbers (issue 17).
    pub auto_replicate: bool,
}

/// A library template's new content (`PATCH /templates/{id}`, the panel's `PUT`): every field
/// is written; the provider name and language stay.
#[derive(Debug, Clone)]
pub struct TemplateContent<'a> {
    /// Library name.
    pub name: &'a str,
    /// Category.
    pub category: &'a str,
    /// Body.
    pub body: &'a str,
    /// Header text.
    pub header_text: Option<&'a str>,
    /// Footer.
    pub footer_text: Option<&'a str>,
    /// Buttons JSON.
    pub buttons: &'a serde_json::Value,
    /// var_map JSON.
    pub var_map: &'a serde_json::Value,
    /// Problems JSON.
    pub problems: &'a serde_json::Value,
    /// Follows new numbers.
    pub auto_replicate: bool,
}

const T_COLUMNS: &str = "id, account_id, name, provider_name, kind, category, language, body, header_type, header_text, footer_text, has_media_header, header_example_mime, buttons, var_map, problems, auto_replicate, created_at, updated_at";
const C_COLUMNS: &str = "id, template_id, channel_id, waba_id, provider_name, provider_template_id, version, status, rejection_reason, quality, updated_at";

fn json(r: &AnyRow, col: &str) -> Result<serde_json::Value> {
    let t: String = r.try_get(col)?;
    serde_json::from_str(&t).map_err(|e| StorageError::Corrupt(format!("{col}: {e}")))
}

fn read_t(r: &AnyRow) -> Result<TemplateRecord> {
    Ok(TemplateRecord {
        id: r.try_get("id")?,
        account_id: r.try_get("account_id")?,
        name: r.try_get("name")?,
        provider_name: r.try_get("provider_name")?,
        kind: r.try_get("kind")?,
        category: r.try_get("category")?,
        language: r.try_get("language")?,
        body: r.try_get("body")?,
        header_type: r.try_get("header_type")?,
        header_text: r.try_get("header_text")?,
        footer_text: r.try_get("footer_text")?,
        has_media_header: r.try_get::<i64, _>("has_media_header")? != 0,
        header_example_mime: r.try_get("header_example_mime")?,
        buttons: json(r, "buttons")?,
        var_map: json(r, "var_map")?,
        problems: json(r, "problems")?,
        auto_replicate: r.try_get::<i64, _>("auto_replicate")? != 0,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

/// A stored template state; an unknown one is `Corrupt` (never read as another state).
fn template_status(s: &str) -> Result<TemplateStatus> {
    TemplateStatus::parse(s)
        .ok_or_else(|| StorageError::Corrupt(format!("template_channels.status: {s:?}")))
}

fn read_c(r: &AnyRow) -> Result<TemplateChannel> {
    Ok(TemplateChannel {
        id: r.try_get("id")?,
        template_id: r.try_get("template_id")?,
        channel_id: r.try_get("channel_id")?,
        waba_id: r.try_get("waba_id")?,
        provider_name: r.try_get("provider_name")?,
        provider_template_id: r.try_get("provider_template_id")?,
        version: r.try_get("version")?,
        status: template_status(&r.try_get::<String, _>("status")?)?,
        rejection_reason: r.try_get("rejection_reason")?,
        quality: r.try_get("quality")?,
        updated_at: r.try_get("updated_at")?,
    })
}

impl Store {
    /// The campaigns (of any state) that send library template `template_id`, oldest first:
    /// a template they name cannot be removed (their rows reference it).
    pub async fn campaigns_using_template(&self, template_id: i64) -> Result<Vec<i64>> {
        let rows = sqlx::query("SELECT id FROM campaigns WHERE template_id = $1 ORDER BY id")
            .bind(template_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| Ok(r.try_get("id")?)).collect()
    }

    /// Stores a library template. Errors: [`StorageError::Conflict`] when the provider name
    /// and language exist in the account.
    pub async fn insert_template(&self, t: &NewTemplate) -> Result<TemplateRecord> {
        let now = now_ms();
        let sql = format!(
            "INSERT INTO templates (account_id, name, provider_name, kind, category, language, body, header_type, header_text, footer_text, has_media_header, buttons, var_map, problems, created_at, updated_at, auto_replicate) \
             VALUES ($1, $2, $3, 'official', $4, $5, $6, $7, $8, $9, $15, $10, $11, $12, $13, $13, $14) RETURNING {T_COLUMNS}"
        );
        let res = sqlx::query(&sql)
            .bind(t.account_id)
            .bind(&t.name)
            .bind(&t.provider_name)
            .bind(&t.category)
            .bind(&t.language)
            .bind(&t.body)
            .bind(
                t.header_media
                    .as_deref()
                    .or(t.header_text.as_ref().map(|_| "text")),
            )
            .bind(&t.header_text)
            .bind(&t.footer_text)
            .bind(t.buttons.to_string())
            .bind(t.var_map.to_string())
            .bind(t.problems.to_string())
            .bind(now)
            .bind(i64::from(t.auto_replicate))
            .bind(i64::from(t.header_media.is_some()))
            .fetch_one(&self.writer)
            .await;
        match res {
            Ok(r) => {
                self.templates.invalidate();
                read_t(&r)
            }
            Err(e) if StorageError::is_unique_violation(&e) => {
                Err(StorageError::Conflict(format!(
                    "template {} ({}) already exists",
                    t.provider_name, t.language
                )))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Rewrites a library template's content (its text, category, buttons, variables and
    /// `auto_replicate`, with the problems found for them); the provider name and language
    /// stay. Errors: [`StorageError::NotFound`] outside the account.
    pub async fn update_template_content(
        &self,
        account_id: i64,
        id: i64,
        c: &TemplateContent<'_>,
    ) -> Result<TemplateRecord> {
        let n = sqlx::query(
            "UPDATE templates SET name = $3, category = $4, body = $5, \
               header_type = CASE WHEN has_media_header = 1 THEN header_type ELSE $6 END, header_text = $7, footer_text = $8, \
               buttons = $9, var_map = $10, problems = $11, auto_replicate = $12, updated_at = $13 \
             WHERE id = $1 AND account_id = $2",
        )
        .bind(id)
        .bind(account_id)
        .bind(c.name)
        .bind(c.category)
        .bind(c.body)
        .bind(c.header_text.map(|_| "text"))
        .bind(c.header_text)
        .bind(c.footer_text)
        .bind(c.buttons.to_string())
        .bind(c.var_map.to_string())
        .bind(c.problems.to_string())
        .bind(i64::from(c.auto_replicate))
        .bind(now_ms())
        .execute(&self.writer)
        .await?
        .rows_affected();
        self.rewritten_template(n, account_id, id).await
    }

    /// After an update of template `id` that touched `n` rows: the cache dropped and the
    /// template read again. Errors: [`StorageError::NotFound`] when no row was touched.
    async fn rewritten_template(&self, n: u64, account_id: i64, id: i64) -> Result<TemplateRecord> {
        self.templates.invalidate();
        if n == 0 {
            return Err(StorageError::NotFound);
        }
        self.template(account_id, id).await
    }

    /// Stores the example of a template's media header (MIME type and bytes) with the problems
    /// found once it is there. Errors: [`StorageError::NotFound`] outside the account.
    pub async fn set_template_header_example(
        &self,
        account_id: i64,
        id: i64,
        mime: &str,
        bytes: &[u8],
        problems: &serde_json::Value,
    ) -> Result<TemplateRecord> {
        let n = sqlx::query(
            "UPDATE templates SET header_example_mime = $3, header_example = $4, problems = $5, updated_at = $6 \
             WHERE id = $1 AND account_id = $2",
        )
        .bind(id)
        .bind(account_id)
        .bind(mime)
        .bind(bytes)
        .bind(problems.to_string())
        .bind(now_ms())
        .execute(&self.writer)
        .await?
        .rows_affected();
        self.rewritten_template(n, account_id, id).await
    }

    /// The example of a template's media header: `(mime, bytes)`, `None` when none was given.
    /// Errors: [`StorageError::NotFound`] outside the account.
    pub async fn template_header_example(
        &self,
        account_id: i64,
        id: i64,
    ) -> Result<Option<(String, Vec<u8>)>> {
        let row = sqlx::query(
            "SELECT header_example_mime, header_example FROM templates WHERE id = $1 AND account_id = $2",
        )
        .bind(id)
        .bind(account_id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or(StorageError::NotFound)?;
        let mime: Option<String> = row.try_get("header_example_mime")?;
        let bytes: Option<Vec<u8>> = row.try_get("header_example")?;
        Ok(mime.zip(bytes))
    }

    /// The account's library by WABA and status (issue 17, a WABA's `layouts_by_status`):
    /// `(waba_id, status, templates)`, each template counted once per WABA and status.
    pub async fn layouts_by_waba(&self, account_id: i64) -> Result<Vec<(String, String, i64)>> {
        let rows = sqlx::query(
            "SELECT waba_id, status, COUNT(DISTINCT template_id) AS n FROM template_channels \
             WHERE account_id = $1 GROUP BY waba_id, status ORDER BY waba_id, status",
        )
        .bind(account_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("waba_id")?, r.try_get("status")?, r.try_get("n")?)))
            .collect()
    }

    /// The account's official numbers that miss a template (issue 17; narrowed by issue 55,
    /// D-126): for each, whether a template meant for it is not usable on it — a template
    /// submitted to it (by its creator, a later submission or replication) whose state there
    /// is `rejected`, `paused`, `disabled` or `failed` (not `pending`: the provider is
    /// deciding; not `deleted`: someone removed it), or an `auto_replicate` template the
    /// number inherited (it existed when the number was added and is approved elsewhere)
    /// that never reached it. A template created for other numbers does not count. And
    /// whether a template approved on it has RED quality. `channel_id` narrows to one
    /// number. Rows: `(channel_id, missing, quality_red)`.
    pub async fn numbers_missing_templates(
        &self,
        account_id: i64,
        channel_id: Option<i64>,
    ) -> Result<Vec<(i64, bool, bool)>> {
        let rows = sqlx::query(
            "SELECT c.id, CASE WHEN EXISTS (SELECT 1 FROM template_channels r \
                 WHERE r.channel_id = c.id AND r.status IN ('rejected', 'paused', 'disabled', 'failed')) \
               OR EXISTS (SELECT 1 FROM templates t WHERE t.account_id = c.account_id AND t.auto_replicate = 1 \
                 AND t.created_at <= c.created_at \
                 AND EXISTS (SELECT 1 FROM template_channels a WHERE a.template_id = t.id AND a.status = 'approved') \
                 AND NOT EXISTS (SELECT 1 FROM template_channels b WHERE b.template_id = t.id AND b.channel_id = c.id)) \
               THEN 1 ELSE 0 END AS missing, \
             CASE WHEN EXISTS (SELECT 1 FROM template_channels q WHERE q.channel_id = c.id AND q.status = 'approved' AND q.quality = 'RED') \
               THEN 1 ELSE 0 END AS quality_red \
             FROM channels c WHERE c.account_id = $1 AND c.official = 1 AND c.id = COALESCE($2, c.id) ORDER BY c.id",
        )
        .bind(account_id)
        .bind(channel_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("id")?,
                    r.try_get::<i64, _>("missing")? != 0,
                    r.try_get::<i64, _>("quality_red")? != 0,
                ))
            })
            .collect()
    }

    /// A library template of this account.
    pub async fn template(&self, account_id: i64, id: i64) -> Result<TemplateRecord> {
        let sql = format!("SELECT {T_COLUMNS} FROM templates WHERE id = $1 AND account_id = $2");
        let row = sqlx::query(&sql)
            .bind(id)
            .bind(account_id)
            .fetch_optional(&self.pool)
            .await?;
        found(row, read_t)
    }

    /// The account's library template with this provider (base) name and language.
    pub async fn template_by_provider_name(
        &self,
        account_id: i64,
        provider_name: &str,
        language: &str,
    ) -> Result<Option<TemplateRecord>> {
        let sql = format!("SELECT {T_COLUMNS} FROM templates WHERE account_id = $1 AND provider_name = $2 AND language = $3");
        let row = sqlx::query(&sql)
            .bind(account_id)
            .bind(provider_name)
            .bind(language)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(read_t).transpose()
    }

    /// What a send needs of a library template, by its provider (base) name and language,
    /// or by id: the template and its state on each number. Answered from memory when read
    /// in the last [`TEMPLATE_CACHE_TTL`] and no template was written through this store
    /// since (D-090); `None` when the account has no such template.
    pub async fn template_for_send(
        &self,
        account_id: i64,
        key: TemplateKey<'_>,
    ) -> Result<Option<std::sync::Arc<TemplateForSend>>> {
        let cache_key = match key {
            TemplateKey::Name { name, language } => {
                CacheKey::Name(account_id, name.to_string(), language.to_string())
            }
            TemplateKey::Id(id) => CacheKey::Id(account_id, id),
        };
        if let Some(hit) = self.templates.get(&cache_key) {
            return Ok(hit);
        }
        let generation = self.templates.generation();
        let template = match key {
            TemplateKey::Name { name, language } => {
                self.template_by_provider_name(account_id, name, language)
                    .await?
            }
            TemplateKey::Id(id) => match self.template(account_id, id).await {
                Ok(t) => Some(t),
                Err(StorageError::NotFound) => None,
                Err(e) => return Err(e),
            },
        };
        let found = match template {
            Some(template) => {
                let channels = self.template_channels(template.id).await?;
                Some(std::sync::Arc::new(TemplateForSend { template, channels }))
            }
            None => None,
        };
        self.templates.put(generation, cache_key, found.clone());
        Ok(found)
    }

    /// The account's library, oldest first.
    pub async fn list_templates(&self, account_id: i64) -> Result<Vec<TemplateRecord>> {
        let sql = format!("SELECT {T_COLUMNS} FROM templates WHERE account_id = $1 ORDER BY id");
        let rows = sqlx::query(&sql)
            .bind(account_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(read_t).collect()
    }

    /// A keyset page of the account's library in id order: up to `limit` after the id `after`
    /// (issue 17).
    pub async fn list_templates_page(
        &self,
        account_id: i64,
        after: Option<i64>,
        limit: i64,
    ) -> Result<Vec<TemplateRecord>> {
        let sql = format!(
            "SELECT {T_COLUMNS} FROM templates WHERE account_id = $1 AND id > $2 ORDER BY id LIMIT $3"
        );
        let rows = sqlx::query(&sql)
            .bind(account_id)
            .bind(after.unwrap_or(0))
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(read_t).collect()
    }

    /// The per-number states of some templates (a page of the library).
    pub async fn template_channels_of(&self, template_ids: &[i64]) -> Result<Vec<TemplateChannel>> {
        let mut out = Vec::new();
        for chunk in crate::shaped_chunks(template_ids, 256) {
            let sql = format!(
                "SELECT {C_COLUMNS} FROM template_channels WHERE template_id IN ({}) ORDER BY template_id, channel_id",
                crate::placeholders(1, chunk.len())
            );
            let mut q = sqlx::query(&sql);
            for id in chunk {
                q = q.bind(*id);
            }
            for r in q.fetch_all(&self.pool).await? {
                out.push(read_c(&r)?);
            }
        }
        Ok(out)
    }

    /// The per-number states of a template.
    pub async fn template_channels(&self, template_id: i64) -> Result<Vec<TemplateChannel>> {
        let sql = format!(
            "SELECT {C_COLUMNS} FROM template_channels WHERE template_id = $1 ORDER BY channel_id"
        );
        let rows = sqlx::query(&sql)
            .bind(template_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(read_c).collect()
    }

    /// Every per-number state of the account's templates (for listings).
    pub async fn account_template_channels(&self, account_id: i64) -> Result<Vec<TemplateChannel>> {
        let sql = format!("SELECT {C_COLUMNS} FROM template_channels WHERE account_id = $1 ORDER BY template_id, channel_id");
        let rows = sqlx::query(&sql)
            .bind(account_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(read_c).collect()
    }

    /// Records (insert or replace) a template's state on a number.
    pub async fn upsert_template_channel(
        &self,
        account_id: i64,
        template_id: i64,
        channel_id: i64,
        state: TemplateChannelState<'_>,
    ) -> Result<()> {
        self.write_template_channel(account_id, template_id, channel_id, state, false)
            .await
    }

    /// Records the provider's answer to a template creation on a number whose row was written
    /// `pending` before the call: like [`Store::upsert_template_channel`], except that a
    /// `pending` answer keeps a status a review webhook set meanwhile (the provider can send
    /// the webhook before its answer arrives; the row had no provider id yet, so the webhook
    /// found it by WABA and name; D-040).
    pub async fn record_template_answer(
        &self,
        account_id: i64,
        template_id: i64,
        channel_id: i64,
        state: TemplateChannelState<'_>,
    ) -> Result<()> {
        self.write_template_channel(account_id, template_id, channel_id, state, true)
            .await
    }

    async fn write_template_channel(
        &self,
        account_id: i64,
        template_id: i64,
        channel_id: i64,
        state: TemplateChannelState<'_>,
        keep_reviewed: bool,
    ) -> Result<()> {
        let (status_set, reason_set) = if keep_reviewed {
            (
                "CASE WHEN excluded.status = 'pending' AND template_channels.provider_template_id IS NULL \
                   AND template_channels.provider_name = excluded.provider_name THEN template_channels.status ELSE excluded.status END",
                "CASE WHEN excluded.status = 'pending' AND template_channels.provider_template_id IS NULL \
                   AND template_channels.provider_name = excluded.provider_name THEN template_channels.rejection_reason ELSE excluded.rejection_reason END",
            )
        } else {
            ("excluded.status", "excluded.rejection_reason")
        };
        let sql = format!(
            "INSERT INTO template_channels (account_id, template_id, channel_id, waba_id, provider_name, provider_template_id, version, status, rejection_reason, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
             ON CONFLICT (template_id, channel_id) DO UPDATE SET status = {status_set}, rejection_reason = {reason_set}, \
               waba_id = excluded.waba_id, provider_name = excluded.provider_name, \
               provider_template_id = excluded.provider_template_id, version = excluded.version, \
               updated_at = excluded.updated_at"
        );
        sqlx::query(&sql)
            .bind(account_id)
            .bind(template_id)
            .bind(channel_id)
            .bind(state.waba_id)
            .bind(state.provider_name)
            .bind(state.provider_template_id)
            .bind(state.version)
            .bind(state.status.as_str())
            .bind(state.rejection_reason)
            .bind(now_ms())
            .execute(&self.writer)
            .await?;
        self.templates.invalidate();
        Ok(())
    }

    /// The states, across accounts, of the provider template with this id or, when the id is
    /// unknown, with this WABA, name and language (provider webhooks name templates so).
    pub async fn template_channels_for_provider(
        &self,
        provider_template_id: &str,
        waba_id: &str,
        provider_name: &str,
    ) -> Result<Vec<TemplateChannel>> {
        let sql = format!(
            "SELECT {C_COLUMNS} FROM template_channels WHERE provider_template_id = $1 OR (waba_id = $2 AND provider_name = $3) ORDER BY id"
        );
        let rows = sqlx::query(&sql)
            .bind(provider_template_id)
            .bind(waba_id)
            .bind(provider_name)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(read_c).collect()
    }

    /// Records a template's quality on a number (D-074).
    pub async fn set_template_channel_quality(&self, id: i64, quality: &str) -> Result<()> {
        sqlx::query("UPDATE template_channels SET quality = $2, updated_at = $3 WHERE id = $1")
            .bind(id)
            .bind(quality)
            .bind(now_ms())
            .execute(&self.writer)
            .await?;
        self.templates.invalidate();
        Ok(())
    }

    /// Sets a library template's category (`template_category_update`, D-074).
    pub async fn set_template_category(&self, id: i64, category: &str) -> Result<()> {
        sqlx::query("UPDATE templates SET category = $2, updated_at = $3 WHERE id = $1")
            .bind(id)
            .bind(category)
            .bind(now_ms())
            .execute(&self.writer)
            .await?;
        self.templates.invalidate();
        Ok(())
    }

    /// Sets the status of a per-number state.
    pub async fn set_template_channel_status(
        &self,
        id: i64,
        status: TemplateStatus,
        reason: Option<&str>,
    ) -> Result<()> {
        sqlx::query("UPDATE template_channels SET status = $2, rejection_reason = $3, updated_at = $4 WHERE id = $1")
            .bind(id)
            .bind(status.as_str())
            .bind(reason)
            .bind(now_ms())
            .execute(&self.writer)
            .await?;
        self.templates.invalidate();
        Ok(())
    }

    /// Sets the status of a per-number state from a provider event sent at `event_at` (ms),
    /// unless the state holds a newer event's (issue 46). Returns whether it was recorded.
    pub async fn set_template_channel_status_at(
        &self,
        id: i64,
        status: TemplateStatus,
        reason: Option<&str>,
        event_at: i64,
    ) -> Result<bool> {
        let n = sqlx::query(
            "UPDATE template_channels SET status = $2, rejection_reason = $3, updated_at = $4, status_event_at = $5 \
             WHERE id = $1 AND (status_event_at IS NULL OR status_event_at <= $5)",
        )
        .bind(id)
        .bind(status.as_str())
        .bind(reason)
        .bind(now_ms())
        .bind(event_at)
        .execute(&self.writer)
        .await?
        .rows_affected();
        self.templates.invalidate();
        Ok(n > 0)
    }

    /// Removes a template and its per-number states.
    pub async fn delete_template(&self, account_id: i64, id: i64) -> Result<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM template_channels WHERE template_id = $1 AND account_id = $2")
            .bind(id)
            .bind(account_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM templates WHERE id = $1 AND account_id = $2")
            .bind(id)
            .bind(account_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.templates.invalidate();
        Ok(())
    }
}

/// Which template a send names: its provider (base) name and language, as `POST /messages`
/// does, or its library id.
#[derive(Debug, Clone, Copy)]
pub enum TemplateKey<'a> {
    /// Provider (base) name and language.
    Name {
        /// Provider (base) name.
        name: &'a str,
        /// Locale.
        language: &'a str,
    },
    /// Library id.
    Id(i64),
}

/// A library template with its state on each number, as a send reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateForSend {
    /// The template.
    pub template: TemplateRecord,
    /// Its state on each number, by channel id.
    pub channels: Vec<TemplateChannel>,
}

/// How long a template read for a send is answered from memory (D-090): a template written
/// through this process is read afresh at once; one written by another gateway process on
/// the same database is seen within this time.
pub const TEMPLATE_CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(2);

/// Most templates kept in memory; past it the cache starts over (bounds memory whatever
/// names requests present: unknown names are kept too, as `None`).
const TEMPLATE_CACHE_MAX: usize = 10_000;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum CacheKey {
    Name(i64, String, String),
    Id(i64, i64),
}

/// Templates read for sends (D-090): each entry with the generation it was read at; every
/// template write through the store starts a new generation, so an entry read before it is
/// never answered after it.
#[derive(Debug, Default)]
pub(crate) struct TemplateCache {
    generation: std::sync::atomic::AtomicU64,
    entries: dashmap::DashMap<
        CacheKey,
        (
            u64,
            std::time::Instant,
            Option<std::sync::Arc<TemplateForSend>>,
        ),
    >,
}

impl TemplateCache {
    fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    fn get(&self, key: &CacheKey) -> Option<Option<std::sync::Arc<TemplateForSend>>> {
        let hit = self.entries.get(key)?;
        (hit.0 == self.generation() && hit.1.elapsed() < TEMPLATE_CACHE_TTL).then(|| hit.2.clone())
    }

    /// Keeps what was read at `generation`, unless a write started another since.
    fn put(&self, generation: u64, key: CacheKey, value: Option<std::sync::Arc<TemplateForSend>>) {
        if generation != self.generation() {
            return;
        }
        if self.entries.len() >= TEMPLATE_CACHE_MAX {
            self.entries.clear();
        }
        self.entries
            .insert(key, (generation, std::time::Instant::now(), value));
    }

    /// Called after every committed write of a template or of its per-number states.
    pub(crate) fn invalidate(&self) {
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::{TemplateChannelState, TemplateKey};

    /// D-090: a template read for a send is answered from memory (a change made behind the
    /// store's back, as another process would, is not seen yet), and any write through the
    /// store is seen by the next read, including a template created under a name that was
    /// looked up and not found.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_template_read_for_a_send_is_cached_until_the_store_writes_one() {
        let dir = tempfile::tempdir().unwrap();
        let (store, account, channel) = crate::test_support::store_with_channel(dir.path()).await;
        let hello = TemplateKey::Name {
            name: "hello",
            language: "pt_BR",
        };
        assert!(store
            .template_for_send(account, hello)
            .await
            .unwrap()
            .is_none());
        let t = store
            .insert_template(&crate::test_support::new_template(
                account, "Olá", "hello", "utility", "Oi {{1}}",
            ))
            .await
            .unwrap();
        let found = store
            .template_for_send(account, hello)
            .await
            .unwrap()
            .expect("created after a miss: seen at once");
        assert_eq!(found.template.id, t.id);
        assert!(found.channels.is_empty());

        sqlx::query("UPDATE templates SET body = 'mudado por fora' WHERE id = $1")
            .bind(t.id)
            .execute(&store.pool)
            .await
            .unwrap();
        let by_id = TemplateKey::Id(t.id);
        let first = store
            .template_for_send(account, by_id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            first.template.body, "mudado por fora",
            "not read by id before"
        );
        sqlx::query("UPDATE templates SET body = 'mudado por fora de novo' WHERE id = $1")
            .bind(t.id)
            .execute(&store.pool)
            .await
            .unwrap();
        let cached = store
            .template_for_send(account, hello)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(cached.template.body, "Oi {{1}}", "answered from memory");
        let cached = store
            .template_for_send(account, by_id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            cached.template.body, "mudado por fora",
            "answered from memory"
        );

        store
            .upsert_template_channel(
                account,
                t.id,
                channel,
                TemplateChannelState {
                    waba_id: "2",
                    provider_name: "hello_v2",
                    provider_template_id: Some("9"),
                    version: 2,
                    status: super::TemplateStatus::Approved,
                    rejection_reason: None,
                },
            )
            .await
            .unwrap();
        for key in [hello, by_id] {
            let fresh = store
                .template_for_send(account, key)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(fresh.template.body, "mudado por fora de novo");
            assert_eq!(fresh.channels.len(), 1);
            assert_eq!(fresh.channels[0].provider_name, "hello_v2");
        }

        assert!(
            store
                .template_for_send(account + 1, TemplateKey::Id(t.id))
                .await
                .unwrap()
                .is_none(),
            "another account's id is not found"
        );
        store.delete_template(account, t.id).await.unwrap();
        assert!(store
            .template_for_send(account, hello)
            .await
            .unwrap()
            .is_none());
    }

    /// A template's state on a number is typed at the boundary: an unknown stored value is
    /// `Corrupt`, never read as another state (issue 51).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unknown_stored_template_state_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let (store, account, channel) = crate::test_support::store_with_channel(dir.path()).await;
        let t = store
            .insert_template(&crate::test_support::new_template(
                account, "Olá", "hello", "utility", "Oi {{1}}",
            ))
            .await
            .unwrap();
        let state = TemplateChannelState {
            waba_id: "2",
            provider_name: "hello",
            provider_template_id: Some("9"),
            version: 1,
            status: super::TemplateStatus::Paused,
            rejection_reason: Some("baixa qualidade"),
        };
        store
            .upsert_template_channel(account, t.id, channel, state)
            .await
            .unwrap();
        let rows = store.template_channels(t.id).await.unwrap();
        assert_eq!(rows[0].status, super::TemplateStatus::Paused);
        sqlx::query("UPDATE template_channels SET status = 'arquivado' WHERE template_id = $1")
            .bind(t.id)
            .execute(&store.pool)
            .await
            .unwrap();
        assert!(matches!(
            store.template_channels(t.id).await,
            Err(crate::StorageError::Corrupt(m)) if m.contains("arquivado")
        ));
    }
}
