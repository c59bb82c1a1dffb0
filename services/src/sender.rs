//! The public sender (spec `panel-api.md` "Public v1", issue 22, D-060): third parties send
//! template messages with a per-user token; the numbers are the user's panel scope and the
//! number is chosen by [`engine::sender::choose`].

use crate::templates::TemplateView;
use crate::Services;
use actors::error::ActorError;
use actors::protocol::{ChannelSnapshot, SendCommand, SendContent};
use engine::panel::Scope;
use engine::phone::Phone;
use engine::sender::{Candidate, Skip};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use storage::messages::MessageRecord;

/// A number the sender may use, as `GET /api/v1/numbers` shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SenderNumber {
    /// Channel id.
    pub id: i64,
    /// Digits with country code.
    pub phone: String,
    /// Display name.
    pub name: String,
    /// Quality rating.
    #[schema(value_type = engine::channel::Quality)]
    pub quality: String,
    /// Live health (code, label, tone, limit_24h, sent_24h, available).
    pub health: engine::channel::Health,
    /// Messages it sent in the last 24 h (every kind).
    pub sends_24h: i64,
}

/// A template the sender may use (`GET /api/v1/templates`): one entry per name.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SenderTemplate {
    /// Name at the provider (what `template` names in a send).
    pub name: String,
    /// Category.
    pub category: String,
    /// Languages approved on at least one of the user's numbers.
    pub languages: Vec<String>,
    /// Body variables a send must give (`variables`).
    pub variables: usize,
    /// The user's numbers where it is approved.
    pub numbers: Vec<i64>,
}

/// A send request of the public sender.
#[derive(Debug, Clone)]
pub struct SenderSend {
    /// Recipient (digits with country code).
    pub to: Phone,
    /// The template and its values (the `template` object of every send, D-127). By name
    /// without a language: the only language approved on the user's numbers, else `pt_BR`.
    pub template: engine::send::TemplateRef,
    /// Whether the request came in the deprecated shape (`template` a name, `variables`…):
    /// errors then name the old fields.
    pub legacy: bool,
    /// Run every check and the choice, render, send nothing.
    pub dry_run: bool,
    /// The request's `Idempotency-Key` (namespaced by the caller).
    pub idempotency_key: Option<String>,
}

impl SenderSend {
    /// How the request named its template, for messages.
    fn template_label(&self) -> String {
        match &self.template.choice {
            engine::send::TemplateChoice::Id(id) => format!("#{id}"),
            engine::send::TemplateChoice::Name { name, .. } => name.clone(),
        }
    }

    /// Whether a library template is the one this request names.
    fn names(&self, t: &TemplateView) -> bool {
        match &self.template.choice {
            engine::send::TemplateChoice::Id(id) => t.id == *id,
            engine::send::TemplateChoice::Name { name, .. } => {
                t.provider_name == *name || t.name == *name
            }
        }
    }
}

/// What a send (or a dry run) decided.
#[derive(Debug, Clone)]
pub struct SenderOutcome {
    /// The number chosen.
    pub channel: ChannelSnapshot,
    /// The rendered body.
    pub preview: String,
    /// Template name and language used.
    pub template: (String, String),
    /// The message (None on a dry run).
    pub message: Option<MessageRecord>,
}

fn approved_on(t: &TemplateView) -> Vec<i64> {
    t.channels
        .iter()
        .filter(|c| c.status == "approved")
        .map(|c| c.channel_id)
        .collect()
}

impl Services {
    async fn sender_scope_numbers(
        &self,
        account_id: i64,
        scope: &Scope,
    ) -> Result<Vec<ChannelSnapshot>, ActorError> {
        let channels = self
            .shared()
            .store
            .scoped_channels(account_id, scope)
            .await?;
        Ok(self.snapshots(account_id, &channels).await)
    }

    /// `GET /api/v1/numbers` of a sender token: the user's numbers with health and sends in
    /// the last 24 h.
    pub async fn sender_numbers(
        &self,
        account_id: i64,
        scope: &Scope,
    ) -> Result<Vec<SenderNumber>, ActorError> {
        let snaps = self.sender_scope_numbers(account_id, scope).await?;
        let counts = self
            .shared()
            .store
            .outbound_counts_since(account_id, self.shared().now_ms() - engine::DAY_MS)
            .await?;
        Ok(snaps
            .into_iter()
            .map(|s| SenderNumber {
                id: s.record.id,
                phone: s.record.phone.clone(),
                name: s.record.name.clone(),
                quality: s.record.quality.clone(),
                sends_24h: counts.get(&s.record.id).copied().unwrap_or(0),
                health: s.health,
            })
            .collect())
    }

    /// `GET /api/v1/templates` of a sender token: templates approved on the user's numbers,
    /// one entry per name.
    pub async fn sender_templates(
        &self,
        account_id: i64,
        scope: &Scope,
    ) -> Result<Vec<SenderTemplate>, ActorError> {
        let mine: Vec<i64> = self
            .shared()
            .store
            .scoped_channels(account_id, scope)
            .await?
            .iter()
            .map(|c| c.id)
            .collect();
        let mut by_name: BTreeMap<String, SenderTemplate> = BTreeMap::new();
        for t in self.list_library(account_id).await? {
            let numbers: Vec<i64> = approved_on(&t)
                .into_iter()
                .filter(|c| mine.contains(c))
                .collect();
            if numbers.is_empty() {
                continue;
            }
            let entry = by_name
                .entry(t.provider_name.clone())
                .or_insert_with(|| SenderTemplate {
                    name: t.provider_name.clone(),
                    category: t.category.clone(),
                    languages: Vec::new(),
                    variables: engine::template::parameter_count(&t.body),
                    numbers: Vec::new(),
                });
            if !entry.languages.contains(&t.language) {
                entry.languages.push(t.language.clone());
            }
            for n in numbers {
                if !entry.numbers.contains(&n) {
                    entry.numbers.push(n);
                }
            }
        }
        Ok(by_name.into_values().collect())
    }

    /// The number a public send to `to` goes through (`engine::sender::choose`): the template
    /// approved on it, its WABA active, its health and headroom, the contact's last number
    /// first.
    ///
    /// Errors: `limite_24h_esgotado`, `nenhum_numero_elegivel` with each number's reason.
    async fn sender_number(
        &self,
        account_id: i64,
        to: &str,
        template: &TemplateView,
        snaps: &[ChannelSnapshot],
    ) -> Result<i64, ActorError> {
        let approved = approved_on(template);
        let wabas: HashMap<String, String> = self
            .shared()
            .store
            .list_wabas(account_id)
            .await?
            .into_iter()
            .map(|w| (w.provider_waba_id, w.status))
            .collect();
        let last = self.shared().store.last_outbound_to(account_id, to).await?;
        let candidates: Vec<Candidate> = snaps
            .iter()
            .map(|s| Candidate {
                channel_id: s.record.id,
                template_approved: approved.contains(&s.record.id),
                waba_active: wabas.get(&s.record.waba_id).is_none_or(|st| st == "ativa"),
                health_code: s.health.code.clone(),
                available: (s.health.available >= 0).then_some(s.health.available),
                last_wrote_at: last.get(&s.record.id).copied(),
            })
            .collect();
        match engine::sender::choose(&candidates) {
            Ok(id) => Ok(id),
            Err((_, true)) => Err(ActorError::BusinessInitiatedRefused(
                engine::channel::HealthCode::LimitExhausted,
            )),
            Err((reasons, false)) => {
                let per_number: Vec<Value> = reasons
                    .iter()
                    .map(|(id, why): &(i64, Skip)| {
                        let code = snaps
                            .iter()
                            .find(|s| s.record.id == *id)
                            .map(|s| s.health.code.clone())
                            .unwrap_or_default();
                        json!({"numero_id": id, "motivo": why, "descricao": why.label(), "health_code": code})
                    })
                    .collect();
                Err(ActorError::Rejected {
                    code: "nenhum_numero_elegivel",
                    message: if per_number.is_empty() {
                        "Nenhum número ao alcance deste token.".into()
                    } else {
                        "Nenhum número pode enviar este template agora; veja `numeros`.".into()
                    },
                    details: json!({"numeros": per_number}),
                })
            }
        }
    }

    /// `POST /api/v1/messages` of a sender token: finds the template, chooses the number
    /// ([`engine::sender::choose`]), renders, and sends (unless `dry_run`). Errors: 422
    /// `unknown_template`, `variaveis_invalidas`, `nenhum_numero_elegivel` (with the
    /// reason per number); [`ActorError::BusinessInitiatedRefused`] (429) when only headroom is
    /// missing; the channel's own refusals.
    pub async fn sender_send(
        &self,
        account_id: i64,
        scope: &Scope,
        req: SenderSend,
    ) -> Result<SenderOutcome, ActorError> {
        let library = self.list_library(account_id).await?;
        let named: Vec<&TemplateView> = library.iter().filter(|t| req.names(t)).collect();
        if named.is_empty() {
            return Err(ActorError::Rejected {
                code: "unknown_template",
                message: format!("Não há template `{}` nesta conta.", req.template_label()),
                details: json!({"field": if req.legacy { "template" } else { "template.name" }}),
            });
        }
        let snaps = self.sender_scope_numbers(account_id, scope).await?;
        let mine: Vec<i64> = snaps.iter().map(|s| s.record.id).collect();
        let template = sender_template(&named, &req, &mine)?;
        let given = sender_values(template, &req)?;
        let chosen = self
            .sender_number(account_id, req.to.as_str(), template, &snaps)
            .await?;
        let channel = snaps
            .into_iter()
            .find(|s| s.record.id == chosen)
            .ok_or(ActorError::NotFound)?;
        let preview = engine::template::fill_text(&template.body, &given.body);
        let outcome_template = (template.provider_name.clone(), template.language.clone());
        if req.dry_run {
            return Ok(SenderOutcome {
                channel,
                preview,
                template: outcome_template,
                message: None,
            });
        }
        let message = self
            .send(
                account_id,
                Some(chosen),
                SendCommand {
                    to: req.to,
                    content: SendContent::Library {
                        choice: engine::send::TemplateChoice::Id(template.id),
                        values: engine::send::TemplateValues::Given(given),
                    },
                    preview_text: Some(preview.clone()),
                    idempotency_key: req.idempotency_key,
                    group_limited: false,
                    deadline: None,
                    span: tracing::Span::none(),
                },
            )
            .await?;
        Ok(SenderOutcome {
            channel,
            preview,
            template: outcome_template,
            message: Some(message),
        })
    }
}

/// The parameters of a public send: `vars` rendered through the template's var_map, or the
/// body parameters as given, counted against the template's (1 to 1,024 characters each).
///
/// Errors: `missing_vars`, `variaveis_invalidas` (with `expected`).
fn sender_values(
    template: &TemplateView,
    req: &SenderSend,
) -> Result<engine::template::Given, ActorError> {
    let given = match &req.template.values {
        engine::send::TemplateValues::Given(g) => g.clone(),
        engine::send::TemplateValues::Vars(row) => {
            let var_map: engine::library::VarMap =
                serde_json::from_value(template.var_map.clone()).unwrap_or_default();
            engine::library::render(&template.body, &var_map, row).map_err(|missing| {
                ActorError::from(engine::ValidationError::new(
                    "missing_vars",
                    "template.vars",
                    format!("Faltam valores para: {}.", missing.join(", ")),
                ))
            })?
        }
    };
    let wanted = engine::template::parameter_count(&template.body);
    if given.body.len() != wanted
        || given
            .body
            .iter()
            .any(|v| v.trim().is_empty() || v.chars().count() > 1024)
    {
        return Err(ActorError::Rejected {
            code: "variaveis_invalidas",
            message: format!(
                "O template `{}` pede {wanted} variáveis não vazias (até 1024 caracteres cada); vieram {}.",
                template.provider_name,
                given.body.len()
            ),
            details: json!({
                "field": if req.legacy { "variables" } else { "template.params" },
                "expected": wanted,
            }),
        });
    }
    Ok(given)
}

/// The template a public send names, in the language asked (by id: its own), else the only
/// one approved on the user's numbers (`mine`), else pt_BR.
///
/// Errors: `unknown_template` (no such language).
fn sender_template<'a>(
    named: &[&'a TemplateView],
    req: &SenderSend,
    mine: &[i64],
) -> Result<&'a TemplateView, ActorError> {
    // The language: the one asked, else the only one approved on the user's numbers,
    // else pt_BR.
    let languages: Vec<&str> = named
        .iter()
        .filter(|t| approved_on(t).iter().any(|c| mine.contains(c)))
        .map(|t| t.language.as_str())
        .collect();
    let asked = match &req.template.choice {
        engine::send::TemplateChoice::Name { language, .. } => language.clone(),
        engine::send::TemplateChoice::Id(_) => named.first().map(|t| t.language.clone()),
    };
    let language = match asked {
        Some(l) => l,
        None if languages.len() == 1 => languages[0].to_string(),
        None => "pt_BR".to_string(),
    };
    let Some(template) = named.iter().copied().find(|t| t.language == language) else {
        return Err(ActorError::Rejected {
            code: "unknown_template",
            message: format!(
                "O template `{}` não existe no idioma {language}.",
                req.template_label()
            ),
            details: json!({"field": if req.legacy { "language" } else { "template.language" }}),
        });
    };
    Ok(template)
}
