//! Numbers of an alternative provider, referenced only (spec "What the service does" item 11;
//! decision D-034): registered with their provider's API key, their sender's templates read
//! through [`provider::alternative::AlternativeProvider`], no actor and no sends.

use crate::Services;
use actors::outbound::{refusal_message, Guard};
use actors::protocol::ChannelSnapshot;
use actors::ActorError;
use engine::ids::{AccountId, ChannelId};
use engine::phone::Phone;
use engine::Secret;
use provider::alternative::{by_engine, AlternativeProvider};

/// The engines an alternative number may name (`360dialog`…), as `POST
/// /channels/alternative` checks them.
pub use provider::alternative::engines;
use provider::wire::TemplateInfo;
use provider::ProviderError;
use serde_json::json;
use storage::alternative::{NewAlternativeChannel, SenderTemplate};
use storage::channels::ChannelRecord;

/// `POST /channels/alternative` input.
#[derive(Debug, Clone)]
pub struct ConnectAlternative {
    /// Display name (default the phone).
    pub name: Option<String>,
    /// Phone with country code (formatting allowed).
    pub phone: String,
    /// Engine name, one of [`provider::alternative::engines`].
    pub engine: String,
    /// The provider's API base URL when not its default (e.g. a sandbox).
    pub provider_url: Option<String>,
    /// The provider's API key for this sender.
    pub api_key: Secret,
}

/// The authority (`host` or `host:port`) of a URL, lowercase.
fn authority(url: &url::Url) -> String {
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host,
    }
}

/// Checks a `provider_url` given at registration (D-042): an http(s) URL that passes the
/// outbound guard and whose host is the engine's own (its default base URL's) or one listed
/// in `DISPARO_ALTERNATIVE_HOSTS`. Errors: 422 `invalid_url`, `private_url` or
/// `provider_url_not_allowed`.
fn check_provider_url(
    guard: &Guard,
    allowed_hosts: &[String],
    p: &dyn AlternativeProvider,
    raw: &str,
) -> Result<(), ActorError> {
    let url = guard
        .check_url(raw)
        .map_err(|r| engine::ValidationError::new(r.code(), "provider_url", refusal_message(&r)))?;
    let own = url::Url::parse(p.default_base_url()).map(|u| authority(&u));
    let given = authority(&url);
    let host_only = url.host_str().unwrap_or_default().to_ascii_lowercase();
    let listed = allowed_hosts
        .iter()
        .any(|h| h.eq_ignore_ascii_case(&given) || h.eq_ignore_ascii_case(&host_only));
    if own.as_deref() == Ok(given.as_str()) || listed {
        return Ok(());
    }
    Err(engine::ValidationError::new(
        "provider_url_not_allowed",
        "provider_url",
        format!(
            "`provider_url` deve apontar para o próprio provedor {} ({}) ou para um host liberado em DISPARO_ALTERNATIVE_HOSTS; {given} não está liberado.",
            p.engine(),
            p.default_base_url()
        ),
    )
    .into())
}

fn key_error(e: ProviderError) -> ActorError {
    match &e {
        ProviderError::Http { status, .. } if *status == 401 || *status == 403 => {
            ActorError::CredentialRefused(format!(
                "o provedor alternativo recusou a chave de API (HTTP {status})"
            ))
        }
        _ => ActorError::from(e),
    }
}

fn provider_of(record: &ChannelRecord) -> Result<&'static dyn AlternativeProvider, ActorError> {
    by_engine(&record.engine).ok_or_else(|| ActorError::Rejected {
        code: "unknown_engine",
        message: format!(
            "O provedor {} deste número não é mais suportado.",
            record.engine
        ),
        details: json!({}),
    })
}

fn to_rows(list: Vec<TemplateInfo>) -> Vec<SenderTemplate> {
    list.into_iter()
        .map(|t| SenderTemplate {
            name: t.name,
            language: t.language,
            status: t.status,
            category: t.category,
            components: t.components,
        })
        .collect()
}

impl Services {
    /// Registers a number of an alternative provider: the engine must be known (422
    /// `unknown_engine`), the phone valid, and the key accepted by the provider, checked by
    /// reading the sender's templates (422 `credential_refused` otherwise), which are stored.
    /// A phone already registered with that engine is 409.
    pub async fn connect_alternative(
        &self,
        account_id: i64,
        input: ConnectAlternative,
    ) -> Result<(ChannelSnapshot, usize), ActorError> {
        let (p, phone) = self.checked_alternative(&input)?;
        let base = input
            .provider_url
            .clone()
            .unwrap_or_else(|| p.default_base_url().to_string());
        let templates = p
            .templates(&self.shared().outbound_http, &base, input.api_key.expose())
            .await
            .map_err(key_error)?;
        let record = self
            .shared()
            .store
            .insert_alternative_channel(&NewAlternativeChannel {
                account_id,
                name: input
                    .name
                    .filter(|n| !n.trim().is_empty())
                    .unwrap_or_else(|| phone.as_str().to_string()),
                phone: phone.as_str().to_string(),
                engine: p.engine().to_string(),
                provider_url: input.provider_url,
                api_key: input.api_key,
            })
            .await?;
        let n = templates.len();
        self.shared()
            .store
            .replace_sender_templates(record.id, &to_rows(templates))
            .await?;
        tracing::info!(
            channel_id = record.id,
            engine = p.engine(),
            templates = n,
            "alternative-provider number registered"
        );
        let record = self
            .shared()
            .store
            .channel(AccountId(account_id), ChannelId(record.id))
            .await?;
        Ok((actors::alternative::snapshot(record), n))
    }

    /// The checks of a `POST /channels/alternative` before any call: the engine known, the
    /// phone valid, the key present and sendable in a header, the provider URL (if any)
    /// allowed by the SSRF guard and `DISPARO_ALTERNATIVE_HOSTS`. Returns the engine's
    /// provider and the phone. Errors: a validation error naming the field.
    fn checked_alternative(
        &self,
        input: &ConnectAlternative,
    ) -> Result<(&'static dyn AlternativeProvider, Phone), ActorError> {
        let Some(p) = by_engine(input.engine.trim()) else {
            return Err(engine::ValidationError::new(
                "unknown_engine",
                "engine",
                format!(
                    "`engine` deve ser um provedor alternativo conhecido: {}.",
                    engines().join(", ")
                ),
            )
            .into());
        };
        let phone = Phone::parse("phone", &input.phone)?;
        if input.api_key.expose().trim().is_empty() {
            return Err(engine::ValidationError::new(
                "required",
                "api_key",
                "O campo `api_key` é obrigatório.",
            )
            .into());
        }
        // The key travels in a header: visible ASCII only (a line break could not be sent, and
        // is the caller's fault, not the provider's).
        if !input.api_key.expose().bytes().all(|b| b.is_ascii_graphic()) {
            return Err(engine::ValidationError::new(
                "invalid_field",
                "api_key",
                "`api_key` deve ter só caracteres ASCII visíveis, sem espaços.",
            )
            .into());
        }
        if let Some(raw) = &input.provider_url {
            check_provider_url(
                &self.shared().guard,
                &self.shared().config.alternative_hosts,
                p,
                raw,
            )?;
        }
        Ok((p, phone))
    }

    /// `POST /channels/{id}/sync` on a number of an alternative provider: reads its sender's
    /// templates again and stores them. Errors: the provider's, with a refused key as
    /// `credential_refused`.
    pub async fn sync_alternative(
        &self,
        record: ChannelRecord,
    ) -> Result<ChannelSnapshot, ActorError> {
        let p = provider_of(&record)?;
        let key = self
            .shared()
            .store
            .channel_secrets(record.id)
            .await?
            .access_token;
        let base = record
            .provider_url
            .clone()
            .unwrap_or_else(|| p.default_base_url().to_string());
        let templates = p
            .templates(&self.shared().outbound_http, &base, key.expose())
            .await
            .map_err(key_error)?;
        self.shared()
            .store
            .replace_sender_templates(record.id, &to_rows(templates))
            .await?;
        let record = self
            .shared()
            .store
            .channel(AccountId(record.account_id), ChannelId(record.id))
            .await?;
        Ok(actors::alternative::snapshot(record))
    }

    /// The approved templates last read from an alternative provider's sender.
    pub async fn alternative_templates(
        &self,
        record: &ChannelRecord,
    ) -> Result<Vec<TemplateInfo>, ActorError> {
        let rows = self.shared().store.sender_templates(record.id).await?;
        Ok(rows
            .into_iter()
            .filter(|t| t.status == "APPROVED")
            .map(|t| TemplateInfo {
                id: String::new(),
                name: t.name,
                language: t.language,
                status: t.status,
                category: t.category,
                parameter_format: None,
                components: t.components,
            })
            .collect())
    }
}

/// Where an alternative provider's notification arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotifyVia {
    /// The account's own URL (`notify_url`, with its key).
    Account,
    /// The URL shared by every account (`fixed_url`).
    Fixed,
}

impl NotifyVia {
    fn as_str(self) -> &'static str {
        match self {
            NotifyVia::Account => "notify_url",
            NotifyVia::Fixed => "fixed_url",
        }
    }
}

/// The sender's phone in a notification shaped like the Cloud API's webhooks (360dialog
/// forwards those): `entry[].changes[].value.metadata.display_phone_number`, digits only.
fn sender_phone(body: &serde_json::Value) -> Option<String> {
    let entries = body.get("entry")?.as_array()?;
    entries.iter().find_map(|e| {
        e.get("changes")?.as_array()?.iter().find_map(|c| {
            let p = c
                .pointer("/value/metadata/display_phone_number")?
                .as_str()?;
            let digits: String = p.chars().filter(char::is_ascii_digit).collect();
            (!digits.is_empty()).then_some(digits)
        })
    })
}

impl Services {
    /// The account's notification key for its `notify_url` (created on first use).
    pub async fn alternative_notify_key(&self, account_id: i64) -> Result<String, ActorError> {
        Ok(self
            .shared()
            .store
            .alternative_notify_key(account_id)
            .await?)
    }

    /// Records a notification from an alternative provider (D-034). On the account's URL the
    /// key names the account (unknown key → `NotFound`); on the fixed URL the sender's phone
    /// in the body must be a number of an alternative provider registered here (else
    /// `NotFound`, nothing stored). The body must be a JSON object (`BadPayload`). Returns the
    /// stored notification's id.
    pub async fn receive_alternative(
        &self,
        via: NotifyVia,
        key: Option<&str>,
        body: &[u8],
    ) -> Result<i64, ActorError> {
        let json: serde_json::Value = serde_json::from_slice(body)
            .map_err(|e| ActorError::BadPayload(format!("JSON inválido: {e}")))?;
        if !json.is_object() {
            return Err(ActorError::BadPayload(
                "a notificação deve ser um objeto JSON".into(),
            ));
        }
        let store = &self.shared().store;
        let account_id = match key {
            Some(k) => Some(
                store
                    .account_by_notify_key(k)
                    .await?
                    .ok_or(ActorError::NotFound)?,
            ),
            None => None,
        };
        let channel = match sender_phone(&json) {
            Some(phone) => {
                let mut found = store
                    .alternative_channels_by_phone(&phone, account_id)
                    .await?;
                if found.len() > 1 && account_id.is_none() {
                    // Several accounts reference this sender: the shared URL cannot tell
                    // whose it is, and never hands it to whoever registered first.
                    return Err(ActorError::Rejected {
                        code: "remetente_ambiguo",
                        message: "Mais de uma conta cadastrou este remetente; configure no provedor a notify_url da sua conta (GET /channels/alternative/notify-url).".into(),
                        details: json!({}),
                    });
                }
                found.pop()
            }
            None => None,
        };
        let account_id = match (account_id, &channel) {
            (Some(a), _) => a,
            (None, Some(c)) => c.account_id,
            (None, None) => return Err(ActorError::NotFound),
        };
        let id = store
            .record_alternative_notification(
                Some(account_id),
                channel.as_ref().map(|c| c.id),
                via.as_str(),
                &String::from_utf8_lossy(body),
            )
            .await?;
        metrics::counter!("disparo_alternative_notifications_total", "via" => via.as_str())
            .increment(1);
        Ok(id)
    }
}
