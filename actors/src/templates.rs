//! The template library as sends and provider webhooks meet it (spec "Template (library)"):
//! the layout a send completes from, the version to send on a number, a library template
//! rendered for an audience row, and the provider's status webhooks applied to each number's
//! copy. Creating, editing, submitting, syncing and deleting templates is the services'
//! (`services::templates`).

use crate::error::ActorError;
use crate::Runtime;
use engine::library::{Draft, VarMap};
use engine::webhook::EventKind;
use provider::wire::{CreateTemplate, TemplateStatusValue};
use serde_json::{json, Value};
use storage::templates::{TemplateChannel, TemplateForSend, TemplateRecord, TemplateStatus};
use storage::webhooks::NewEvent;

/// A library template's fields as the engine's draft (the provider's rules read it).
pub fn draft_of(t: &TemplateRecord) -> Draft {
    Draft {
        provider_name: t.provider_name.clone(),
        category: t.category.clone(),
        language: t.language.clone(),
        body: t.body.clone(),
        header_text: t.header_text.clone(),
        header_media: t
            .header_type
            .as_deref()
            .and_then(engine::template::HeaderMedia::parse),
        header_example: has_header_example(t),
        footer_text: t.footer_text.clone(),
        buttons: serde_json::from_value(t.buttons.clone()).unwrap_or_default(),
        var_map: serde_json::from_value(t.var_map.clone()).unwrap_or_default(),
    }
}

/// Whether template `t`'s media header has its example: stored in the library (a template
/// built here), or at the provider (an imported one: its stored problems never said the
/// example was missing, D-132).
pub fn has_header_example(t: &TemplateRecord) -> bool {
    t.header_example_mime.is_some()
        || !t.problems.as_array().is_some_and(|ps| {
            ps.iter()
                .any(|p| p["code"] == engine::library::HEADER_EXAMPLE_MISSING)
        })
}

/// What a send of a library template must carry: the layout of the components disparo submits
/// for it (one derivation for submission and sends).
pub fn layout_of(t: &TemplateRecord) -> engine::template::Layout {
    let body = provider_body(t, &t.provider_name, None);
    engine::template::Layout::from_components(&Value::Array(body.components))
}

/// The provider's create body for a library template under `provider_name`, with examples
/// taken from the var_map's defaults (or placeholders) and, for a media header, the handle of
/// its example uploaded to the provider (`example.header_handle`; `None` leaves the example
/// out, as a send's layout needs only the format).
pub fn provider_body(
    t: &TemplateRecord,
    provider_name: &str,
    header_handle: Option<&str>,
) -> CreateTemplate {
    let d = draft_of(t);
    let n = engine::template::parameter_count(&d.body);
    let examples: Vec<String> = (1..=n)
        .map(|i| {
            d.var_map
                .get(&i.to_string())
                .and_then(|b| b.default.clone())
                .unwrap_or_else(|| format!("exemplo{i}"))
        })
        .collect();
    let mut components = Vec::new();
    let media = t
        .header_type
        .as_deref()
        .and_then(engine::template::HeaderMedia::parse);
    if let Some(m) = media {
        let mut c = json!({"type": "HEADER", "format": m.as_str().to_ascii_uppercase()});
        if let Some(h) = header_handle {
            c["example"] = json!({ "header_handle": [h] });
        }
        components.push(c);
    } else if let Some(h) = &d.header_text {
        let mut c = json!({"type": "HEADER", "format": "TEXT", "text": h});
        if engine::template::parameter_count(h) == 1 {
            let example = d
                .var_map
                .get(engine::library::HEADER_KEY)
                .and_then(|b| b.default.clone())
                .unwrap_or_else(|| "exemplo".into());
            c["example"] = json!({"header_text": [example]});
        }
        components.push(c);
    }
    let mut body = json!({"type": "BODY", "text": d.body});
    if n > 0 {
        body["example"] = json!({"body_text": [examples]});
    }
    components.push(body);
    if let Some(f) = &d.footer_text {
        components.push(json!({"type": "FOOTER", "text": f}));
    }
    if !d.buttons.is_empty() {
        let buttons: Vec<Value> = d
            .buttons
            .iter()
            .map(|b| match b.kind.to_ascii_lowercase().as_str() {
                "url" => {
                    let mut v = json!({"type": "URL", "text": b.text, "url": b.url});
                    if let Some(e) = &b.example {
                        v["example"] = json!([e]);
                    }
                    v
                }
                "phone_number" => {
                    json!({"type": "PHONE_NUMBER", "text": b.text, "phone_number": b.phone_number})
                }
                "copy_code" => json!({"type": "COPY_CODE", "example": b.example}),
                "quick_reply" => json!({"type": "QUICK_REPLY", "text": b.text}),
                // An imported button of another kind (OTP, FLOW…) keeps its kind.
                other => json!({"type": other.to_ascii_uppercase(), "text": b.text}),
            })
            .collect();
        components.push(json!({"type": "BUTTONS", "buttons": buttons}));
    }
    CreateTemplate {
        name: provider_name.to_string(),
        language: t.language.clone(),
        category: t.category.to_ascii_uppercase(),
        parameter_format: Some("POSITIONAL".into()),
        components,
    }
}

impl Runtime {
    /// Tells each of the account's numbers whether a library template is missing on it
    /// (health `template_ausente`) and whether one approved on it has RED quality
    /// (`template_qualidade_baixa`), after the library, a number or a template's quality
    /// changed.
    pub async fn refresh_template_health(&self, account_id: i64) {
        if let Err(e) = self.tell_template_flags(account_id).await {
            tracing::warn!(account_id, error = %e, "template flags not told to every number");
        }
    }

    /// Tells each number of `account_id` its template flags (missing templates, a RED
    /// template) wherever it runs. Every number is told even when one fails; errors:
    /// storage's, or `Unavailable` when a number's node did not take its flags — a provider
    /// webhook that changed them is then answered 503 and sent again (issue 52: live state
    /// is acknowledged to the provider only once its owner applied it).
    pub async fn tell_template_flags(&self, account_id: i64) -> Result<(), ActorError> {
        let rows = self
            .shared
            .store
            .numbers_missing_templates(account_id, None)
            .await?;
        let mut failed = None;
        for (channel_id, missing, quality_red) in rows {
            let flags = crate::cluster::Control::TemplateFlags {
                missing,
                quality_red,
            };
            if let Err(e) = self.notify_channel(channel_id, flags).await {
                tracing::warn!(channel_id, error = %e, "template flags not told");
                failed = Some(e);
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Applies a `message_template_status_update` of a WABA: updates the per-number states of
    /// that provider template on `verified_channels` (the numbers whose app secret signed the
    /// webhook; never another account's number that shares the WABA id), emits
    /// `template.status` to each number's subscribers, and tells the numbers of `accounts`
    /// (those channels' accounts) their template flags — also when nothing changed, so a
    /// call sent again after a refusal still reaches every number. Errors: as
    /// [`Runtime::tell_template_flags`].
    pub async fn apply_template_status(
        &self,
        waba_id: &str,
        v: &TemplateStatusValue,
        verified_channels: &std::collections::HashSet<i64>,
        accounts: &std::collections::HashSet<i64>,
        event_at: i64,
    ) -> Result<usize, ActorError> {
        let Some(status) = TemplateStatus::from_provider(&v.event) else {
            return Ok(0);
        };
        let store = &self.shared.store;
        let rows = store
            .template_channels_for_provider(
                &v.message_template_id,
                waba_id,
                &v.message_template_name,
            )
            .await?;
        let mut events = Vec::new();
        let reason = match status {
            TemplateStatus::Rejected => v.reason.clone().filter(|r| r != "NONE"),
            TemplateStatus::Paused | TemplateStatus::Disabled => v
                .other_info
                .as_ref()
                .and_then(|o| o.get("title"))
                .and_then(|t| t.as_str())
                .map(str::to_string),
            _ => None,
        };
        let mut n = 0;
        for r in rows
            .iter()
            .filter(|r| r.waba_id == waba_id && verified_channels.contains(&r.channel_id))
        {
            if r.status == status && r.rejection_reason == reason {
                continue;
            }
            // An older event that arrives late changes nothing (issue 46).
            if !store
                .set_template_channel_status_at(r.id, status, reason.as_deref(), event_at)
                .await?
            {
                continue;
            }
            n += 1;
            events.push(
                self.template_event(r, &v.event, status, reason.as_deref())
                    .await?,
            );
        }
        self.shared.emit(&events).await;
        for a in accounts {
            self.tell_template_flags(*a).await?;
        }
        Ok(n)
    }

    /// The `template.status` event of one number's copy of a template.
    pub async fn template_event(
        &self,
        r: &TemplateChannel,
        event: &str,
        status: TemplateStatus,
        reason: Option<&str>,
    ) -> Result<NewEvent, ActorError> {
        let store = &self.shared.store;
        let channel = store.channel_unscoped(r.channel_id).await?;
        let t = store.template(channel.account_id, r.template_id).await?;
        Ok(NewEvent {
            account_id: channel.account_id,
            channel_id: channel.id,
            kind: EventKind::TemplateStatus,
            channel: crate::events::channel_object(&channel),
            data: json!({"template_id": t.id, "name": t.name, "provider_name": r.provider_name, "language": t.language, "event": event, "status": status, "reason": reason}),
            created_at: self.shared.now_ms(),
        })
    }

    /// The library template with this provider name and language, if the library holds it
    /// (read through the store's cache of templates for sends, D-090).
    pub async fn library_by_name(
        &self,
        account_id: i64,
        name: &str,
        language: &str,
    ) -> Result<Option<std::sync::Arc<TemplateForSend>>, ActorError> {
        Ok(self
            .shared
            .store
            .template_for_send(
                account_id,
                storage::templates::TemplateKey::Name { name, language },
            )
            .await?)
    }

    /// The send parameters of a library template (by id, or by name and language, default
    /// `pt_BR`): `vars` rendered through its var_map, or the parameters as given; with the
    /// template and its state on each number (read through the store's cache, D-090).
    /// Errors: `NotFound` for an id outside the account, 422 `unknown_template` for a name
    /// the library does not have; `missing_vars` when `vars` lacks a variable.
    pub async fn render_library(
        &self,
        account_id: i64,
        choice: &engine::send::TemplateChoice,
        values: engine::send::TemplateValues,
    ) -> Result<(std::sync::Arc<TemplateForSend>, engine::template::Given), ActorError> {
        use engine::send::{TemplateChoice, TemplateValues};
        let key = match choice {
            TemplateChoice::Id(id) => storage::templates::TemplateKey::Id(*id),
            TemplateChoice::Name { name, language } => storage::templates::TemplateKey::Name {
                name,
                language: language
                    .as_deref()
                    .unwrap_or(crate::protocol::DEFAULT_LANGUAGE),
            },
        };
        let found = match self.shared.store.template_for_send(account_id, key).await? {
            Some(found) => found,
            None => return Err(unknown_library_template(choice)),
        };
        let row = match values {
            TemplateValues::Given(given) => return Ok((found, given)),
            TemplateValues::Vars(row) => row,
        };
        let var_map: VarMap =
            serde_json::from_value(found.template.var_map.clone()).unwrap_or_default();
        match engine::library::render(&found.template.body, &var_map, &row) {
            Ok(given) => Ok((found, given)),
            Err(missing) => Err(engine::ValidationError::new(
                "missing_vars",
                "template.vars",
                format!("Faltam valores para: {}.", missing.join(", ")),
            )
            .into()),
        }
    }
}

/// The refusal of a send naming a library template the account does not have: by id the
/// record is not found (404); by name 422 `unknown_template`.
fn unknown_library_template(choice: &engine::send::TemplateChoice) -> ActorError {
    match choice {
        engine::send::TemplateChoice::Id(_) => ActorError::NotFound,
        engine::send::TemplateChoice::Name { name, language } => ActorError::Rejected {
            code: "unknown_template",
            message: format!(
                "A biblioteca não tem o template `{name}` no idioma {} (com `template.vars`, o template precisa estar na biblioteca).",
                language.as_deref().unwrap_or(crate::protocol::DEFAULT_LANGUAGE)
            ),
            details: serde_json::json!({"field": "template.name"}),
        },
    }
}

/// The name to send for library template `found` on a channel, and its layout: the name of
/// its current version on the channel's WABA when that version was renamed (`_v2`…) and
/// approved, its own provider name otherwise.
pub fn version_on_channel(
    found: &TemplateForSend,
    channel_id: i64,
) -> (String, Option<std::sync::Arc<engine::template::Layout>>) {
    let t = &found.template;
    let layout = Some(std::sync::Arc::new(layout_of(t)));
    match found.channels.iter().find(|r| r.channel_id == channel_id) {
        Some(r) if r.status == TemplateStatus::Approved => (r.provider_name.clone(), layout),
        _ => (t.provider_name.clone(), layout),
    }
}
