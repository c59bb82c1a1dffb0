//! The template library's services (spec "Template (library)", "Templates"): drafts validated by the
//! provider's rules, submitted once per WABA, kept in step with the provider's status webhooks
//! and syncs, reactivated as `_v2`, `_v3`… when paused or disabled, deleted at the provider
//! first.

use crate::Services;
use actors::templates::{draft_of, provider_body};
use actors::ActorError;
use engine::ids::{AccountId, ChannelId};
use engine::library::{problems, provider_name_from, valid_provider_name, Button, Draft, VarMap};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use storage::templates::TemplateStatus;
use storage::templates::{NewTemplate, TemplateChannel, TemplateChannelState, TemplateRecord};
use tracing::Instrument;

/// `POST /templates` input.
#[derive(Debug, Clone)]
pub struct TemplateInput {
    /// Library name.
    pub name: String,
    /// Provider name (derived from `name` when absent).
    pub provider_name: Option<String>,
    /// Category (marketing by default).
    pub category: String,
    /// Locale (pt_BR by default).
    pub language: String,
    /// Body.
    pub body: String,
    /// Text header.
    pub header_text: Option<String>,
    /// Media header's kind instead of a text header; its example comes with
    /// [`Services::set_template_header_example`].
    pub header_media: Option<engine::template::HeaderMedia>,
    /// Footer.
    pub footer_text: Option<String>,
    /// Buttons.
    pub buttons: Vec<Button>,
    /// Variable bindings.
    pub var_map: VarMap,
    /// Channels to submit to at once.
    pub submit_channels: Vec<i64>,
    /// Submitted by itself to every number later added or connected (default true; issue 17).
    pub auto_replicate: bool,
}

/// A change to a template (`PATCH /templates/{id}`, the panel's `PUT`); `None` keeps the field
/// (`Some(None)` clears the header or footer).
#[derive(Debug, Clone, Default)]
pub struct TemplatePatch {
    /// Library name.
    pub name: Option<String>,
    /// Category.
    pub category: Option<String>,
    /// Body.
    pub body: Option<String>,
    /// Text header.
    pub header_text: Option<Option<String>>,
    /// Footer.
    pub footer_text: Option<Option<String>>,
    /// Variable bindings.
    pub var_map: Option<VarMap>,
    /// Buttons (a full replacement).
    pub buttons: Option<Vec<Button>>,
    /// Follows new numbers.
    pub auto_replicate: Option<bool>,
}

/// What an edit did at the provider in one WABA (`edits[]` of `PATCH /templates/{id}`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ProviderEdit {
    /// The WABA.
    pub waba_id: String,
    /// `edited` (the provider's template edited in place, reviewed again), `new_version`
    /// (`_vN` submitted: the provider does not edit a template in its state, or refused the
    /// edit), `resubmitted` (the template never reached the provider there: sent again) or
    /// `failed`.
    pub mode: &'static str,
    /// The provider name now in use (or submitted) in the WABA.
    pub provider_name: String,
    /// The library status of its numbers after the call.
    pub status: String,
    /// Why the edit went another way, or why it failed (the provider's reason).
    pub reason: Option<String>,
}

/// A template as the API shows it, with its state on each number.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct TemplateView {
    /// Id.
    pub id: i64,
    /// Library name.
    pub name: String,
    /// Provider name.
    pub provider_name: String,
    /// `official`.
    pub kind: String,
    /// Category.
    pub category: String,
    /// Locale.
    pub language: String,
    /// Body.
    pub body: String,
    /// `text` or null.
    pub header_type: Option<String>,
    /// Header text.
    pub header_text: Option<String>,
    /// Footer.
    pub footer_text: Option<String>,
    /// Media header.
    pub has_media_header: bool,
    /// Buttons.
    #[schema(value_type = Vec<engine::library::Button>)]
    pub buttons: Value,
    /// Template variable → audience column (`"1".."n"`, `"btn:0"`, `"header:1"`).
    #[schema(value_type = BTreeMap<String, engine::library::VarBinding>)]
    pub var_map: Value,
    /// Problems (empty when the provider would accept it).
    #[schema(value_type = Vec<engine::library::Problem>)]
    pub problems: Value,
    /// Where it stands on each number of the account.
    pub channels: Vec<TemplateChannelView>,
    /// Count of numbers per status.
    pub channels_by_status: BTreeMap<String, i64>,
    /// Submitted by itself to every number added to or connected in the account (issue 17).
    pub auto_replicate: bool,
    /// Created (ISO 8601).
    pub created_at: String,
}

/// A library template on one number (`TemplateView.channels`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct TemplateChannelView {
    /// The number.
    pub channel_id: i64,
    /// `pending`, `approved`, `rejected`, `paused`, `disabled`, `failed` or `deleted` (D-026).
    pub status: String,
    /// The provider's reason, on rejection or failure.
    pub rejection_reason: Option<String>,
    /// The template's quality on that number (`GREEN`, `YELLOW`, `RED`, `UNKNOWN`; D-074),
    /// null until the provider reports one.
    pub quality: Option<String>,
    /// Its name at the provider on that number.
    pub provider_name: String,
    /// Its id at the provider.
    pub provider_template_id: Option<String>,
}

fn view(t: &TemplateRecord, rows: &[TemplateChannel]) -> TemplateView {
    let mut by_status = BTreeMap::new();
    for r in rows {
        *by_status.entry(r.status.to_string()).or_insert(0) += 1;
    }
    TemplateView {
        id: t.id,
        name: t.name.clone(),
        provider_name: t.provider_name.clone(),
        kind: t.kind.clone(),
        category: t.category.clone(),
        language: t.language.clone(),
        body: t.body.clone(),
        header_type: t.header_type.clone(),
        header_text: t.header_text.clone(),
        footer_text: t.footer_text.clone(),
        has_media_header: t.has_media_header,
        buttons: t.buttons.clone(),
        var_map: t.var_map.clone(),
        problems: t.problems.clone(),
        channels: rows
            .iter()
            .map(|r| TemplateChannelView {
                channel_id: r.channel_id,
                status: r.status.to_string(),
                rejection_reason: r.rejection_reason.clone(),
                quality: r.quality.clone(),
                provider_name: r.provider_name.clone(),
                provider_template_id: r.provider_template_id.clone(),
            })
            .collect(),
        channels_by_status: by_status,
        auto_replicate: t.auto_replicate,
        created_at: actors::time::iso(t.created_at),
    }
}

impl Services {
    /// Stores a library template with its problems; submits it to `submit_channels` when it
    /// has none.
    pub async fn create_template(
        &self,
        account_id: i64,
        input: TemplateInput,
    ) -> Result<TemplateView, ActorError> {
        let provider_name = match input.provider_name.filter(|p| !p.is_empty()) {
            Some(p) => {
                if !valid_provider_name(&p) {
                    return Err(engine::ValidationError::new(
                        "invalid_provider_name",
                        "provider_name",
                        "`provider_name` deve seguir ^[a-z0-9_]+$.",
                    )
                    .into());
                }
                p
            }
            None => provider_name_from(&input.name),
        };
        let draft = Draft {
            provider_name: provider_name.clone(),
            category: input.category.clone(),
            language: input.language.clone(),
            body: input.body.clone(),
            header_text: input.header_text.clone(),
            header_media: input.header_media,
            header_example: false,
            footer_text: input.footer_text.clone(),
            buttons: input.buttons.clone(),
            var_map: input.var_map.clone(),
        };
        let found = problems(&draft);
        let record = self
            .shared()
            .store
            .insert_template(&NewTemplate {
                account_id,
                name: input.name,
                provider_name,
                category: input.category,
                language: input.language,
                body: input.body,
                header_text: input.header_text,
                header_media: input.header_media.map(|m| m.as_str().to_string()),
                footer_text: input.footer_text,
                buttons: serde_json::to_value(&input.buttons).unwrap_or(Value::Array(vec![])),
                var_map: serde_json::to_value(&input.var_map).unwrap_or(json!({})),
                problems: serde_json::to_value(&found).unwrap_or(Value::Array(vec![])),
                auto_replicate: input.auto_replicate,
            })
            .await?;
        if found.is_empty() && !input.submit_channels.is_empty() {
            return self
                .submit_template(account_id, record.id, Some(input.submit_channels))
                .await;
        }
        self.template_view(account_id, record.id).await
    }

    /// Edits a library template (`PATCH /api/v1/templates/{id}`, panel `PUT
    /// /api/templates/{id}`; issue 17, D-066): name, category, body, header, footer, buttons,
    /// var_map and `auto_replicate`; the problems are found again. A template never submitted
    /// is only rewritten. A submitted one must stay free of problems (422
    /// `template_has_problems`, nothing changes); when its text changed, each WABA it lives in
    /// gets it as the provider allows (PROVIDER.md §6.3): an `APPROVED`, `REJECTED` or
    /// `PAUSED` template is edited in place and reviewed again (its numbers go `pending`);
    /// otherwise — `PENDING`, `DISABLED`, or the provider refused the edit (once per 24 h for an
    /// approved one, never into another category) — the next version `_vN` is submitted, as a
    /// reactivation does. `edits` says what happened in each WABA; the library keeps the new
    /// text whatever the provider answered.
    pub async fn edit_template(
        &self,
        account_id: i64,
        id: i64,
        patch: TemplatePatch,
    ) -> Result<(TemplateView, Vec<ProviderEdit>), ActorError> {
        let store = &self.shared().store;
        let t = store.template(account_id, id).await?;
        let rows = store.template_channels(id).await?;
        let old = draft_of(&t);
        let (name, draft, auto_replicate) = patched(&t, &old, patch)?;
        let found = problems(&draft);
        let live: Vec<&TemplateChannel> = rows
            .iter()
            .filter(|r| r.status != TemplateStatus::Deleted)
            .collect();
        if !live.is_empty() && !found.is_empty() {
            return Err(ActorError::TemplateHasProblems(
                serde_json::to_value(&found).unwrap_or(json!([])),
            ));
        }
        let text_changed = draft.category != old.category
            || draft.body != old.body
            || draft.header_text != old.header_text
            || draft.footer_text != old.footer_text
            || serde_json::to_value(&draft.buttons).ok() != serde_json::to_value(&old.buttons).ok();
        let buttons = serde_json::to_value(&draft.buttons).unwrap_or(json!([]));
        let var_map = serde_json::to_value(&draft.var_map).unwrap_or(json!({}));
        let problems_json = serde_json::to_value(&found).unwrap_or(json!([]));
        let record = store
            .update_template_content(
                account_id,
                id,
                &storage::templates::TemplateContent {
                    name: name.trim(),
                    category: &draft.category,
                    body: &draft.body,
                    header_text: draft.header_text.as_deref(),
                    footer_text: draft.footer_text.as_deref(),
                    buttons: &buttons,
                    var_map: &var_map,
                    problems: &problems_json,
                    auto_replicate,
                },
            )
            .await?;
        let mut edits = Vec::new();
        if text_changed && !live.is_empty() {
            let mut by_waba: BTreeMap<&str, Vec<&TemplateChannel>> = BTreeMap::new();
            for r in &live {
                by_waba.entry(r.waba_id.as_str()).or_default().push(r);
            }
            for (waba, rs) in by_waba {
                edits.push(
                    self.edit_in_waba(account_id, &record, &old, waba, &rs)
                        .await?,
                );
            }
        }
        self.refresh_template_health(account_id).await;
        Ok((self.template_view(account_id, id).await?, edits))
    }

    /// One WABA's part of [`Services::edit_template`].
    async fn edit_in_waba(
        &self,
        account_id: i64,
        t: &TemplateRecord,
        old: &Draft,
        waba: &str,
        rs: &[&TemplateChannel],
    ) -> Result<ProviderEdit, ActorError> {
        let store = &self.shared().store;
        let head = rs
            .iter()
            .max_by_key(|r| r.version)
            .copied()
            .expect("a WABA has rows");
        let token = store.channel_secrets(head.channel_id).await?.access_token;
        let outcome = |mode, name: &str, status: TemplateStatus, reason| {
            provider_edit(waba, mode, name, status, reason)
        };
        let mut why_new = None;
        if let (Some(pid), true) = (
            head.provider_template_id.as_deref(),
            matches!(
                head.status,
                TemplateStatus::Approved | TemplateStatus::Rejected | TemplateStatus::Paused
            ),
        ) {
            let category = (t.category != old.category).then(|| t.category.to_ascii_uppercase());
            match self
                .edit_in_place(t, head, rs, token.expose(), pid, category.as_deref())
                .await?
            {
                Ok(()) => {
                    return Ok(outcome(
                        "edited",
                        &head.provider_name,
                        TemplateStatus::Pending,
                        None,
                    ))
                }
                Err(InPlace::NewVersion(why)) => why_new = Some(why),
                Err(InPlace::Failed(why)) => {
                    return Ok(outcome(
                        "failed",
                        &head.provider_name,
                        head.status,
                        Some(why),
                    ))
                }
            }
        } else if head.provider_template_id.is_some() {
            why_new = Some(format!("o provedor não edita um template {}", head.status));
        }
        // The template never reached the provider in this WABA: send it again under its
        // name; otherwise the next version.
        let (mode, version) = if head.provider_template_id.is_none() {
            ("resubmitted", head.version)
        } else {
            ("new_version", head.version + 1)
        };
        match self
            .submit_version(account_id, t, rs, &token, version)
            .await
        {
            Ok((name, status)) => Ok(outcome(mode, &name, status, why_new)),
            Err(e) => Ok(outcome(
                "failed",
                &head.provider_name,
                head.status,
                Some(e.to_string()),
            )),
        }
    }

    /// Edits the provider's template `pid` in place (its components, and its category when it
    /// changed). The rows are `pending` before the call (the review webhook can come before the
    /// answer, D-040); a refusal puts them back as they were and says whether a new version
    /// should go instead (the provider refused the edit) or nothing can be done now.
    async fn edit_in_place(
        &self,
        t: &TemplateRecord,
        head: &TemplateChannel,
        rs: &[&TemplateChannel],
        token: &str,
        pid: &str,
        category: Option<&str>,
    ) -> Result<Result<(), InPlace>, ActorError> {
        let store = &self.shared().store;
        let handle = self.header_handle(t, head.channel_id, token).await?;
        let components = provider_body(t, &head.provider_name, handle.as_deref()).components;
        for r in rs {
            store
                .set_template_channel_status(r.id, TemplateStatus::Pending, None)
                .await?;
        }
        let answer = self
            .shared()
            .graph
            .edit_template(token, pid, category, &components)
            .await;
        if answer.is_err() {
            for r in rs {
                store
                    .set_template_channel_status(r.id, r.status, r.rejection_reason.as_deref())
                    .await?;
            }
        }
        Ok(match answer {
            Ok(_) => Ok(()),
            Err(e @ provider::ProviderError::Graph { .. }) => Err(InPlace::NewVersion(e.reason())),
            Err(e) => Err(InPlace::Failed(e.reason())),
        })
    }

    /// Submits `version` of a template in one WABA (version 1 under its provider name, then
    /// `<provider_name>_vN`) and points the WABA's numbers `rows` at it. As in a submission the
    /// rows name the version before the call (its review webhook can come first); a refused
    /// creation puts them back as they were. Returns the name and the library status.
    async fn submit_version(
        &self,
        account_id: i64,
        t: &TemplateRecord,
        rows: &[&TemplateChannel],
        token: &engine::Secret,
        version: i64,
    ) -> Result<(String, TemplateStatus), ActorError> {
        let store = &self.shared().store;
        let waba = rows[0].waba_id.clone();
        let name = if version <= 1 {
            t.provider_name.clone()
        } else {
            format!("{}_v{version}", t.provider_name)
        };
        let handle = self
            .header_handle(t, rows[0].channel_id, token.expose())
            .await?;
        let next = |provider_id, status| TemplateChannelState {
            waba_id: &waba,
            provider_name: &name,
            provider_template_id: provider_id,
            version,
            status,
            rejection_reason: None,
        };
        for r in rows {
            store
                .upsert_template_channel(
                    account_id,
                    t.id,
                    r.channel_id,
                    next(None, TemplateStatus::Pending),
                )
                .await?;
        }
        let created = match self
            .shared()
            .graph
            .create_template(
                token.expose(),
                &waba,
                &provider_body(t, &name, handle.as_deref()),
            )
            .await
        {
            Ok(created) => created,
            Err(e) => {
                for r in rows {
                    store
                        .upsert_template_channel(account_id, t.id, r.channel_id, r.state())
                        .await?;
                }
                return Err(e.into());
            }
        };
        let status =
            TemplateStatus::from_provider(&created.status).unwrap_or(TemplateStatus::Pending);
        for r in rows {
            store
                .record_template_answer(
                    account_id,
                    t.id,
                    r.channel_id,
                    next(Some(&created.id), status),
                )
                .await?;
        }
        Ok((name, status))
    }

    /// Submits the account's `auto_replicate` templates to a number just added or connected
    /// (issue 17; the spec: "the new number inherits the account's layouts"): each template
    /// without problems that was submitted somewhere, has no state on the number yet and
    /// existed when the number was added (a template created later was submitted to the
    /// numbers its creator chose; this task running late must not add another). A
    /// WABA that has the template already links the number to it; another WABA gets it
    /// submitted. A refusal is logged and leaves that template missing (health
    /// `template_ausente`). Returns how many templates were replicated.
    pub async fn replicate_templates(&self, account_id: i64, channel_id: i64) -> usize {
        let store = &self.shared().store;
        let (templates, rows, channel) = match (
            store.list_templates(account_id).await,
            store.account_template_channels(account_id).await,
            store.channel_unscoped(channel_id).await,
        ) {
            (Ok(t), Ok(r), Ok(c)) => (t, r, c),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                tracing::error!(error = %e, "could not read the library to replicate");
                return 0;
            }
        };
        let mut n = 0;
        for t in templates
            .iter()
            .filter(|t| t.auto_replicate && t.problems.as_array().is_none_or(|p| p.is_empty()))
            .filter(|t| t.created_at <= channel.created_at)
        {
            let of_t: Vec<&TemplateChannel> =
                rows.iter().filter(|r| r.template_id == t.id).collect();
            if of_t.iter().any(|r| r.channel_id == channel_id)
                || !of_t.iter().any(|r| r.status != TemplateStatus::Deleted)
            {
                continue;
            }
            match self
                .submit_template(account_id, t.id, Some(vec![channel_id]))
                .await
            {
                Ok(_) => n += 1,
                Err(e) => tracing::warn!(
                    template_id = t.id,
                    channel_id,
                    error = %e,
                    "template not replicated to the new number"
                ),
            }
        }
        self.refresh_template_health(account_id).await;
        n
    }

    /// [`Services::replicate_templates`] in the background, so adding or connecting a number
    /// answers without waiting for the provider's template calls.
    pub fn replicate_in_background(&self, account_id: i64, channel_id: i64) {
        let runtime = self.clone();
        tokio::spawn(
            async move {
                let n = runtime.replicate_templates(account_id, channel_id).await;
                tracing::info!(
                    channel_id,
                    templates = n,
                    "library replicated to the number"
                );
            }
            .instrument(tracing::info_span!("replicate", channel_id)),
        );
    }

    /// The view of one template.
    pub async fn template_view(
        &self,
        account_id: i64,
        id: i64,
    ) -> Result<TemplateView, ActorError> {
        let t = self.shared().store.template(account_id, id).await?;
        let rows = self.shared().store.template_channels(id).await?;
        Ok(view(&t, &rows))
    }

    /// The account's library with per-number status.
    pub async fn list_library(&self, account_id: i64) -> Result<Vec<TemplateView>, ActorError> {
        let store = &self.shared().store;
        let mut rows: HashMap<i64, Vec<TemplateChannel>> = HashMap::new();
        for r in store.account_template_channels(account_id).await? {
            rows.entry(r.template_id).or_default().push(r);
        }
        Ok(store
            .list_templates(account_id)
            .await?
            .iter()
            .map(|t| view(t, rows.get(&t.id).map(Vec::as_slice).unwrap_or_default()))
            .collect())
    }

    /// A keyset page of the library in id order with per-number status (issue 17): up to
    /// `limit` templates after the id `after`.
    pub async fn library_page(
        &self,
        account_id: i64,
        after: Option<i64>,
        limit: i64,
    ) -> Result<Vec<TemplateView>, ActorError> {
        let store = &self.shared().store;
        let templates = store.list_templates_page(account_id, after, limit).await?;
        let ids: Vec<i64> = templates.iter().map(|t| t.id).collect();
        let mut rows: HashMap<i64, Vec<TemplateChannel>> = HashMap::new();
        for r in store.template_channels_of(&ids).await? {
            rows.entry(r.template_id).or_default().push(r);
        }
        Ok(templates
            .iter()
            .map(|t| view(t, rows.get(&t.id).map(Vec::as_slice).unwrap_or_default()))
            .collect())
    }

    /// Submits a template to numbers (default: every official number of the account with a
    /// WABA): one provider template per WABA; numbers of a WABA where it already exists are
    /// linked to it. Refused when the template has problems.
    pub async fn submit_template(
        &self,
        account_id: i64,
        id: i64,
        channels: Option<Vec<i64>>,
    ) -> Result<TemplateView, ActorError> {
        let store = &self.shared().store;
        let t = store.template(account_id, id).await?;
        if t.problems.as_array().is_some_and(|p| !p.is_empty()) {
            return Err(ActorError::TemplateHasProblems(t.problems.clone()));
        }
        let targets = match channels {
            Some(ids) => {
                let mut v = Vec::new();
                for c in ids {
                    v.push(store.channel(AccountId(account_id), ChannelId(c)).await?);
                }
                v
            }
            None => store
                .list_channels(account_id)
                .await?
                .into_iter()
                .filter(|c| c.official)
                .collect(),
        };
        let existing = store.template_channels(id).await?;
        let mut by_waba: BTreeMap<String, Vec<storage::channels::ChannelRecord>> = BTreeMap::new();
        for c in targets {
            by_waba.entry(c.waba_id.clone()).or_default().push(c);
        }
        for (waba_id, chans) in by_waba {
            // Already at the provider for this WABA (through another number): link.
            if let Some(r) = existing
                .iter()
                .find(|r| r.waba_id == waba_id && r.provider_template_id.is_some())
            {
                for c in &chans {
                    store
                        .upsert_template_channel(account_id, id, c.id, r.state())
                        .await?;
                }
                continue;
            }
            self.submit_to_waba(account_id, &t, &waba_id, &chans)
                .await?;
        }
        self.refresh_template_health(account_id).await;
        self.template_view(account_id, id).await
    }

    /// Version 1 of template `t` submitted to one WABA for its numbers `chans`: the rows are
    /// stored `pending` before the call (the review webhook can arrive before the answer, and
    /// it finds the rows by WABA and name until they have the provider's id), then the
    /// provider's answer.
    async fn submit_to_waba(
        &self,
        account_id: i64,
        t: &TemplateRecord,
        waba_id: &str,
        chans: &[storage::channels::ChannelRecord],
    ) -> Result<(), ActorError> {
        let store = &self.shared().store;
        let token = store.channel_secrets(chans[0].id).await?.access_token;
        let handle = self.header_handle(t, chans[0].id, token.expose()).await?;
        let submitted = |provider_id, status, reason| TemplateChannelState {
            waba_id,
            provider_name: &t.provider_name,
            provider_template_id: provider_id,
            version: 1,
            status,
            rejection_reason: reason,
        };
        for c in chans {
            store
                .upsert_template_channel(
                    account_id,
                    t.id,
                    c.id,
                    submitted(None, TemplateStatus::Pending, None),
                )
                .await?;
        }
        let (status, reason, provider_id) = self
            .create_at_provider(t, token.expose(), waba_id, handle.as_deref())
            .await?;
        for c in chans {
            store
                .record_template_answer(
                    account_id,
                    t.id,
                    c.id,
                    submitted(provider_id.as_deref(), status, reason.as_deref()),
                )
                .await?;
        }
        Ok(())
    }

    /// Creates template `t` in a WABA at the provider: `(library status, reason, provider
    /// id)`. One that exists there already (subcode 2388024: created elsewhere) is adopted
    /// with its state; a refusal is `failed` with the provider's reason.
    async fn create_at_provider(
        &self,
        t: &TemplateRecord,
        token: &str,
        waba_id: &str,
        header_handle: Option<&str>,
    ) -> Result<(TemplateStatus, Option<String>, Option<String>), ActorError> {
        let graph = &self.shared().graph;
        let created = graph
            .create_template(
                token,
                waba_id,
                &provider_body(t, &t.provider_name, header_handle),
            )
            .await;
        Ok(match created {
            Ok(created) => (
                TemplateStatus::from_provider(&created.status).unwrap_or(TemplateStatus::Pending),
                None,
                Some(created.id),
            ),
            Err(e) if matches!(&e, provider::ProviderError::Graph { error, .. } if error.error_subcode == Some(2388024)) =>
            {
                let listed = graph.list_templates(token, waba_id).await?;
                match listed
                    .into_iter()
                    .find(|x| x.name == t.provider_name && x.language == t.language)
                {
                    Some(x) => (
                        TemplateStatus::from_provider(&x.status).unwrap_or(TemplateStatus::Pending),
                        None,
                        Some(x.id),
                    ),
                    None => (TemplateStatus::Failed, Some(e.reason()), None),
                }
            }
            Err(e) => (TemplateStatus::Failed, Some(e.reason()), None),
        })
    }

    /// The `header_handle` of template `t`'s media header for a submission through number
    /// `channel_id`: its stored example uploaded to the provider under the app of the
    /// number's BM, or of the app the number's token belongs to (`debug_token`) when it has
    /// no BM (resumable upload, D-058, D-132); `None` without a media header. Errors: 422
    /// `header_example_missing` when the library holds no example (an imported template's
    /// example stays at the provider), `bm_sem_app_id` when no app is known; the provider's
    /// refusals as they come.
    async fn header_handle(
        &self,
        t: &TemplateRecord,
        channel_id: i64,
        token: &str,
    ) -> Result<Option<String>, ActorError> {
        if t.header_type
            .as_deref()
            .and_then(engine::template::HeaderMedia::parse)
            .is_none()
        {
            return Ok(None);
        }
        let store = &self.shared().store;
        let Some((mime, bytes)) = store.template_header_example(t.account_id, t.id).await? else {
            return Err(ActorError::rejected(
                engine::library::HEADER_EXAMPLE_MISSING,
                "Envie a imagem de exemplo do cabeçalho antes de submeter o template: o provedor a exige.",
                json!({"field": "header_example"}),
            ));
        };
        let channel = store
            .channel(AccountId(t.account_id), ChannelId(channel_id))
            .await?;
        let graph = &self.shared().graph;
        let bm_app = match channel.bm_id {
            Some(bm) => store.bm(t.account_id, bm).await?.app_id,
            None => None,
        };
        // A number connected without a BM: the app its token belongs to.
        let app_id = match bm_app.filter(|a| !a.is_empty()) {
            Some(a) => a,
            None => graph.debug_token(token, token).await?.app_id,
        };
        if app_id.is_empty() {
            return Err(ActorError::rejected(
                "bm_sem_app_id",
                "Informe o app_id do BM do número para enviar a imagem de exemplo do cabeçalho.",
                json!({"field": "app_id"}),
            ));
        }
        let handle = graph
            .upload_handle(token, &app_id, bytes, &mime, "cabecalho")
            .await?;
        Ok(Some(handle))
    }

    /// Stores the example image of template `id`'s media header (JPEG or PNG by its magic
    /// bytes, at most 5 MB, the provider's image limit, PROVIDER.md §3) and finds the
    /// template's problems again; it goes to the provider with each submission. Errors: 404
    /// outside the account; 422 `header_not_media` for a template without an image header,
    /// `invalid_header_example` without a file (`None`) or for another format or size.
    pub async fn set_template_header_example(
        &self,
        account_id: i64,
        id: i64,
        bytes: Option<Vec<u8>>,
    ) -> Result<TemplateView, ActorError> {
        let store = &self.shared().store;
        let t = store.template(account_id, id).await?;
        let mut draft = draft_of(&t);
        if draft.header_media != Some(engine::template::HeaderMedia::Image) {
            return Err(ActorError::rejected(
                "header_not_media",
                "Este template não tem cabeçalho de imagem.",
                json!({"field": "header_type"}),
            ));
        }
        let Some(bytes) = bytes else {
            return Err(ActorError::rejected(
                "invalid_header_example",
                "Envie a imagem como multipart/form-data no campo `file`.",
                json!({"field": "file"}),
            ));
        };
        let mime = engine::media::image_mime(&bytes).unwrap_or_default();
        let too_big = bytes.len() as u64 > engine::media::MediaKind::Image.max_bytes();
        if mime.is_empty() || too_big {
            return Err(ActorError::rejected(
                "invalid_header_example",
                "A imagem de exemplo deve ser JPEG ou PNG de até 5 MB.",
                json!({"field": "header_example"}),
            ));
        }
        draft.header_example = true;
        let found = serde_json::to_value(problems(&draft)).unwrap_or(json!([]));
        store
            .set_template_header_example(account_id, id, mime, &bytes, &found)
            .await?;
        self.template_view(account_id, id).await
    }

    /// Re-reads the template's state in each of its WABAs at the provider; returns how many
    /// numbers were read.
    pub async fn sync_template(&self, account_id: i64, id: i64) -> Result<usize, ActorError> {
        let store = &self.shared().store;
        store.template(account_id, id).await?;
        let rows = store.template_channels(id).await?;
        let mut by_waba: BTreeMap<&str, Vec<&TemplateChannel>> = BTreeMap::new();
        for r in &rows {
            by_waba.entry(r.waba_id.as_str()).or_default().push(r);
        }
        let mut events = Vec::new();
        let mut synced = 0;
        for (waba, rs) in by_waba {
            let token = store.channel_secrets(rs[0].channel_id).await?.access_token;
            let listed = self
                .shared()
                .graph
                .list_templates(token.expose(), waba)
                .await?;
            for r in rs {
                synced += 1;
                let found = listed.iter().find(|x| {
                    Some(&x.id) == r.provider_template_id.as_ref() || x.name == r.provider_name
                });
                let status = found
                    .and_then(|x| TemplateStatus::from_provider(&x.status))
                    .unwrap_or(TemplateStatus::Deleted);
                if status != r.status {
                    store
                        .set_template_channel_status(r.id, status, r.rejection_reason.as_deref())
                        .await?;
                    let event = found
                        .map(|x| x.status.clone())
                        .unwrap_or_else(|| "DELETED".into());
                    events.push(
                        self.template_event(r, &event, status, r.rejection_reason.as_deref())
                            .await?,
                    );
                }
            }
        }
        self.shared().emit(&events).await;
        self.refresh_template_health(account_id).await;
        Ok(synced)
    }

    /// Submits the next version (`<provider_name>_v2`, `_v3`…) of a template paused or
    /// disabled on a number, with the current text; once approved, sends on that WABA use it.
    pub async fn reactivate_template(
        &self,
        account_id: i64,
        id: i64,
        channel_id: i64,
    ) -> Result<String, ActorError> {
        let store = &self.shared().store;
        let t = store.template(account_id, id).await?;
        let (_, token) = self.channel_with_token(account_id, channel_id).await?;
        let rows = store.template_channels(id).await?;
        let row = rows
            .iter()
            .find(|r| r.channel_id == channel_id)
            .ok_or(ActorError::NotFound)?;
        if !["paused", "disabled"].contains(&row.status.as_str()) {
            return Err(engine::ValidationError::new(
                "not_paused",
                "channel",
                format!(
                    "O template está {} neste número; só pausado ou desativado pode ser reativado.",
                    row.status
                ),
            )
            .into());
        }
        let version = rows
            .iter()
            .filter(|r| r.waba_id == row.waba_id)
            .map(|r| r.version)
            .max()
            .unwrap_or(1)
            + 1;
        let waba_rows: Vec<&TemplateChannel> =
            rows.iter().filter(|r| r.waba_id == row.waba_id).collect();
        let (name, _) = self
            .submit_version(account_id, &t, &waba_rows, &token, version)
            .await?;
        self.refresh_template_health(account_id).await;
        Ok(name)
    }

    /// Deletes a template at the provider in every WABA, then from the library. When a WABA
    /// refuses, nothing more is deleted, the library keeps the template, and the error names
    /// the WABAs already deleted (their numbers are marked `deleted`).
    pub async fn delete_template(&self, account_id: i64, id: i64) -> Result<(), ActorError> {
        let store = &self.shared().store;
        let t = store.template(account_id, id).await?;
        // Campaigns keep the template they send (their history and reports name it): refused
        // before anything is deleted at the provider.
        let campaigns = store.campaigns_using_template(id).await?;
        if !campaigns.is_empty() {
            return Err(ActorError::Refused {
                status: 409,
                code: "template_em_uso",
                message: format!(
                    "O template é usado por {} campanha(s) e não pode ser removido; crie outro para as próximas.",
                    campaigns.len()
                ),
                details: serde_json::json!({ "campanhas": campaigns }),
            });
        }
        let rows = store.template_channels(id).await?;
        let mut wabas: BTreeMap<&str, Vec<&TemplateChannel>> = BTreeMap::new();
        for r in rows
            .iter()
            .filter(|r| r.provider_template_id.is_some() && r.status != TemplateStatus::Deleted)
        {
            wabas.entry(r.waba_id.as_str()).or_default().push(r);
        }
        let mut deleted = Vec::new();
        for (waba, rs) in &wabas {
            let token = store.channel_secrets(rs[0].channel_id).await?.access_token;
            if let Err(e) = self.delete_in_waba(&t, waba, rs, token.expose()).await {
                self.mark_deleted(&rows, &deleted).await?;
                let context = format!("exclusão recusada na WABA {waba}");
                let extra = serde_json::json!({"failed_waba": waba, "deleted_wabas": deleted});
                return Err(ActorError::from(e).with_provider_context(&context, extra));
            }
            deleted.push(waba.to_string());
        }
        store.delete_template(account_id, t.id).await?;
        self.refresh_template_health(account_id).await;
        Ok(())
    }

    /// Deletes at the provider every version that may exist in one WABA — the base name and
    /// `_v2`…`_vN` — in this template's language only: each by its provider id with its name
    /// (`hsm_id` + `name`), never by name alone, which deletes every language of the name
    /// (PROVIDER.md §6.3; issue 17). One already gone is not an error.
    async fn delete_in_waba(
        &self,
        t: &TemplateRecord,
        waba: &str,
        rs: &[&TemplateChannel],
        token: &str,
    ) -> Result<(), provider::ProviderError> {
        let graph = &self.shared().graph;
        let max_version = rs.iter().map(|r| r.version).max().unwrap_or(1);
        let mut names = vec![t.provider_name.clone()];
        names.extend((2..=max_version).map(|v| format!("{}_v{v}", t.provider_name)));
        let listed = graph.list_templates(token, waba).await?;
        for x in listed
            .into_iter()
            .filter(|x| names.contains(&x.name) && x.language == t.language)
        {
            match graph
                .delete_template(token, waba, &x.name, Some(&x.id))
                .await
            {
                Ok(_) => {}
                // Already gone at the provider.
                Err(provider::ProviderError::Graph { error, .. })
                    if error.code == 100 && error.error_subcode == Some(2593002) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// After a refused deletion: the numbers of the WABAs already deleted show `deleted`.
    async fn mark_deleted(
        &self,
        rows: &[TemplateChannel],
        deleted: &[String],
    ) -> Result<(), ActorError> {
        for r in rows.iter().filter(|r| deleted.contains(&r.waba_id)) {
            self.shared()
                .store
                .set_template_channel_status(r.id, TemplateStatus::Deleted, None)
                .await?;
        }
        Ok(())
    }
}

/// A library template's fields after `patch` (unset fields keep `old`'s; `""` removes a
/// header or footer, as `null` does): its name, its draft and whether it follows the numbers.
///
/// Errors: `required` when the name would be empty.
fn patched(
    t: &TemplateRecord,
    old: &Draft,
    patch: TemplatePatch,
) -> Result<(String, Draft, bool), ActorError> {
    let name = patch.name.unwrap_or_else(|| t.name.clone());
    if name.trim().is_empty() {
        return Err(engine::ValidationError::new(
            "required",
            "name",
            "`name` não pode ficar vazio.",
        )
        .into());
    }
    let draft = Draft {
        provider_name: t.provider_name.clone(),
        category: patch
            .category
            .map(|c| c.to_ascii_lowercase())
            .unwrap_or_else(|| old.category.clone()),
        language: t.language.clone(),
        body: patch.body.unwrap_or_else(|| old.body.clone()),
        // `""` removes a header or footer, as `null` does.
        header_text: patch
            .header_text
            .map(|h| h.filter(|h| !h.is_empty()))
            .unwrap_or_else(|| old.header_text.clone()),
        header_media: old.header_media,
        header_example: old.header_example,
        footer_text: patch
            .footer_text
            .map(|f| f.filter(|f| !f.is_empty()))
            .unwrap_or_else(|| old.footer_text.clone()),
        buttons: patch.buttons.unwrap_or_else(|| old.buttons.clone()),
        var_map: patch.var_map.unwrap_or_else(|| old.var_map.clone()),
    };
    Ok((
        name,
        draft,
        patch.auto_replicate.unwrap_or(t.auto_replicate),
    ))
}

/// Why a template was not edited in place at the provider.
enum InPlace {
    /// The provider refused the edit itself: a new version goes instead, with this reason.
    NewVersion(String),
    /// The call failed (an outage, a timeout): nothing changed; the reason.
    Failed(String),
}

/// What an edit did in one WABA.
fn provider_edit(
    waba: &str,
    mode: &'static str,
    provider_name: &str,
    status: TemplateStatus,
    reason: Option<String>,
) -> ProviderEdit {
    ProviderEdit {
        waba_id: waba.to_string(),
        mode,
        provider_name: provider_name.to_string(),
        status: status.to_string(),
        reason,
    }
}
