//! What a 1:1 send and its answer look like between nodes (cluster mode, issue 52): the send
//! as the HTTP layer validated it, before the runtime prepares it (the node running the number
//! downloads media and renders templates itself), and the answer as the message's id or the
//! error the caller maps to HTTP as if the send had run where it arrived.

use crate::error::ActorError;
use crate::protocol::{SendCommand, SendContent};
use dashmap::DashMap;
use engine::channel::HealthCode;
use engine::limits::Quota;
use engine::media::MediaKind;
use engine::phone::Phone;
use engine::template::Given;
use engine::ValidationError;
use provider::{Blame, ErrorKind};
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// A 1:1 send on its way to the node running its number.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemoteSend {
    /// The account sending (the number is checked against it again there).
    pub account_id: i64,
    /// The recipient, digits.
    pub to: String,
    /// What to send.
    pub content: RemoteContent,
    /// Display text of a template message.
    pub preview_text: Option<String>,
    /// The request's `Idempotency-Key` (bound to the message where it is written).
    pub idempotency_key: Option<String>,
    /// A group send (the group's 24 h limit applies).
    pub group_limited: bool,
    /// How long the caller still waits, ms: a send not handed to the provider by then is
    /// dropped there (never sent later as a second message).
    pub budget_ms: u64,
}

/// A send's content before it is prepared ([`SendContent`] without the downloaded file and
/// the layout, which the receiving node finds itself).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RemoteContent {
    /// Free text.
    Text {
        /// The text.
        body: String,
    },
    /// A template by name.
    Template {
        /// Name at the provider.
        name: String,
        /// Locale.
        language: String,
        /// What the caller gave.
        given: Given,
        /// The library template's text header, when known.
        header_text: Option<String>,
    },
    /// Media at a public URL.
    Media {
        /// `image`, `document`, `video` or `audio`.
        kind: String,
        /// Public URL.
        url: String,
        /// Caption.
        caption: Option<String>,
    },
    /// A library template (by id, or by name) with its values.
    Library {
        /// The template.
        choice: engine::send::TemplateChoice,
        /// Its values.
        values: engine::send::TemplateValues,
    },
}

impl RemoteSend {
    /// The wire form of `cmd` for `account_id`, with `budget_ms` of the caller's wait left.
    /// `None` for a send already prepared (a downloaded file never travels).
    pub fn of(account_id: i64, cmd: &SendCommand, budget_ms: u64) -> Option<Self> {
        let content = match &cmd.content {
            SendContent::Text { body } => RemoteContent::Text { body: body.clone() },
            SendContent::Template {
                name,
                language,
                given,
                header_text,
                ..
            } => RemoteContent::Template {
                name: name.clone(),
                language: language.clone(),
                given: given.clone(),
                header_text: header_text.clone(),
            },
            SendContent::Media { kind, url, caption } => RemoteContent::Media {
                kind: kind.as_str().to_string(),
                url: url.clone(),
                caption: caption.clone(),
            },
            SendContent::Library { choice, values } => RemoteContent::Library {
                choice: choice.clone(),
                values: values.clone(),
            },
            SendContent::MediaFile { .. } => return None,
        };
        Some(Self {
            account_id,
            to: cmd.to.as_str().to_string(),
            content,
            preview_text: cmd.preview_text.clone(),
            idempotency_key: cmd.idempotency_key.clone(),
            group_limited: cmd.group_limited,
            budget_ms,
        })
    }

    /// The command again on the receiving node (the caller's deadline is set by the send).
    /// Errors: a recipient or media kind that no longer parses (a peer of another version).
    pub fn command(self) -> Result<SendCommand, ActorError> {
        let content = match self.content {
            RemoteContent::Text { body } => SendContent::Text { body },
            RemoteContent::Template {
                name,
                language,
                given,
                header_text,
            } => SendContent::Template {
                name,
                language,
                given,
                layout: None,
                header_text,
            },
            RemoteContent::Media { kind, url, caption } => SendContent::Media {
                kind: MediaKind::parse("media.type", &kind)?,
                url,
                caption,
            },
            RemoteContent::Library { choice, values } => SendContent::Library { choice, values },
        };
        Ok(SendCommand {
            to: Phone::parse("to", &self.to)?,
            content,
            preview_text: self.preview_text,
            idempotency_key: self.idempotency_key,
            group_limited: self.group_limited,
            deadline: None,
            span: tracing::Span::none(),
        })
    }
}

/// The answer to a [`RemoteSend`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SendAnswer {
    /// Sent (or queued): the stored message's id.
    Sent(i64),
    /// Refused or failed, as the send would have answered where it arrived.
    Failed(WireError),
}

/// A question another node may put to a number's actor (cluster mode): the panel's and the
/// API's actions that need the number's live state (`CLUSTER.md` "Routing").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ChannelAsk {
    /// `GET /channels/{id}/guardrails`.
    Guardrails,
    /// Apply guardrail settings already stored.
    SetGuardrails(engine::guardrail::Guardrails),
    /// Today's authorized extra sends (total, already stored).
    Authorized(i64),
    /// Read the number again at the provider.
    Sync,
    /// Read the record again from storage (credentials, name, client, group changed).
    Reload,
    /// Stop the number's actor (it is being removed).
    Stop,
}

/// The answer to a [`ChannelAsk`] as it travels back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum AskAnswer {
    /// Guardrails and today's cap.
    Guardrails(engine::channel::machine::GuardrailView),
    /// The number's live state after a sync or reload.
    Live(super::LiveState),
    /// The actor stopped.
    Stopped,
    /// Refused or failed, as the ask would have answered where it arrived.
    Failed(WireError),
}

/// An [`ActorError`] between nodes. Storage errors travel as `Unavailable` (the receiving
/// node's database failed; the caller may retry).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum WireError {
    NotFound,
    Validation {
        code: String,
        field: String,
        message: String,
    },
    WindowClosed,
    BusinessInitiatedRefused(HealthCode),
    ProviderRefused {
        kind: ErrorKind,
        code: Option<i64>,
        reason: String,
        blame: Blame,
        message_id: Option<i64>,
        details: serde_json::Value,
    },
    CredentialRefused(String),
    Conflict(String),
    SendInDoubt(i64),
    InvalidSignature,
    BadPayload(String),
    Rejected {
        code: String,
        message: String,
        details: serde_json::Value,
    },
    Refused {
        status: u16,
        code: String,
        message: String,
        details: serde_json::Value,
    },
    TemplateHasProblems(serde_json::Value),
    GroupExhausted,
    QuotaExhausted(Quota),
    /// A burst over the number's throughput (ms until a slot).
    ThroughputExceeded(i64),
    Unavailable,
}

impl From<ActorError> for WireError {
    fn from(e: ActorError) -> Self {
        match e {
            ActorError::NotFound => WireError::NotFound,
            ActorError::Validation(v) => WireError::Validation {
                code: v.code.into(),
                field: v.field.into(),
                message: v.message,
            },
            ActorError::WindowClosed => WireError::WindowClosed,
            ActorError::BusinessInitiatedRefused(c) => WireError::BusinessInitiatedRefused(c),
            ActorError::ProviderRefused {
                kind,
                code,
                reason,
                blame,
                message_id,
                details,
            } => WireError::ProviderRefused {
                kind,
                code,
                reason,
                blame,
                message_id,
                details,
            },
            ActorError::CredentialRefused(s) => WireError::CredentialRefused(s),
            ActorError::Conflict(s) => WireError::Conflict(s),
            ActorError::SendInDoubt(id) => WireError::SendInDoubt(id),
            ActorError::InvalidSignature => WireError::InvalidSignature,
            ActorError::BadPayload(s) => WireError::BadPayload(s),
            ActorError::Rejected {
                code,
                message,
                details,
            } => WireError::Rejected {
                code: code.into(),
                message,
                details,
            },
            ActorError::Refused {
                status,
                code,
                message,
                details,
            } => WireError::Refused {
                status,
                code: code.into(),
                message,
                details,
            },
            ActorError::TemplateHasProblems(v) => WireError::TemplateHasProblems(v),
            ActorError::GroupExhausted => WireError::GroupExhausted,
            ActorError::QuotaExhausted(q) => WireError::QuotaExhausted(q),
            ActorError::ThroughputExceeded { retry_after_ms } => {
                WireError::ThroughputExceeded(retry_after_ms)
            }
            ActorError::Unavailable | ActorError::Storage(_) => WireError::Unavailable,
        }
    }
}

impl From<WireError> for ActorError {
    fn from(e: WireError) -> Self {
        match e {
            WireError::NotFound => ActorError::NotFound,
            WireError::Validation {
                code,
                field,
                message,
            } => {
                ActorError::Validation(ValidationError::new(intern(&code), intern(&field), message))
            }
            WireError::WindowClosed => ActorError::WindowClosed,
            WireError::BusinessInitiatedRefused(c) => ActorError::BusinessInitiatedRefused(c),
            WireError::ProviderRefused {
                kind,
                code,
                reason,
                blame,
                message_id,
                details,
            } => ActorError::ProviderRefused {
                kind,
                code,
                reason,
                blame,
                message_id,
                details,
            },
            WireError::CredentialRefused(s) => ActorError::CredentialRefused(s),
            WireError::Conflict(s) => ActorError::Conflict(s),
            WireError::SendInDoubt(id) => ActorError::SendInDoubt(id),
            WireError::InvalidSignature => ActorError::InvalidSignature,
            WireError::BadPayload(s) => ActorError::BadPayload(s),
            WireError::Rejected {
                code,
                message,
                details,
            } => ActorError::Rejected {
                code: intern(&code),
                message,
                details,
            },
            WireError::Refused {
                status,
                code,
                message,
                details,
            } => ActorError::Refused {
                status,
                code: intern(&code),
                message,
                details,
            },
            WireError::TemplateHasProblems(v) => ActorError::TemplateHasProblems(v),
            WireError::GroupExhausted => ActorError::GroupExhausted,
            WireError::QuotaExhausted(q) => ActorError::QuotaExhausted(q),
            WireError::ThroughputExceeded(retry_after_ms) => {
                ActorError::ThroughputExceeded { retry_after_ms }
            }
            WireError::Unavailable => ActorError::Unavailable,
        }
    }
}

/// The one `&'static str` of an error code or field name received from a peer: each distinct
/// text is kept once for the process's life (codes and field names are a small closed set in
/// the code of the nodes that send them).
fn intern(s: &str) -> &'static str {
    static SEEN: OnceLock<DashMap<String, &'static str>> = OnceLock::new();
    let seen = SEEN.get_or_init(DashMap::new);
    if let Some(v) = seen.get(s) {
        return *v;
    }
    let leaked: &'static str = Box::leak(s.to_string().into_boxed_str());
    *seen.entry(s.to_string()).or_insert(leaked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_crosses_nodes_unchanged() {
        let cmd = SendCommand {
            to: Phone::parse("to", "+55 11 99999-0001").unwrap(),
            content: SendContent::Template {
                name: "oferta".into(),
                language: "pt_BR".into(),
                given: Given {
                    body: vec!["Ana".into()],
                    url_suffix: Some("x".into()),
                    ..Given::default()
                },
                layout: None,
                header_text: Some("Oi".into()),
            },
            preview_text: Some("Olá Ana".into()),
            idempotency_key: Some("k-1".into()),
            group_limited: true,
            deadline: None,
            span: tracing::Span::none(),
        };
        let wire = RemoteSend::of(7, &cmd, 25_000).unwrap();
        let back: RemoteSend = serde_json::from_slice(&serde_json::to_vec(&wire).unwrap()).unwrap();
        assert_eq!(back, wire);
        let again = back.command().unwrap();
        assert_eq!(again.to, cmd.to);
        assert_eq!(again.idempotency_key.as_deref(), Some("k-1"));
        assert!(again.group_limited);
        match again.content {
            SendContent::Template { name, given, .. } => {
                assert_eq!(name, "oferta");
                assert_eq!(given.body, ["Ana"]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn errors_cross_nodes_with_their_codes_and_figures() {
        let cases = [
            ActorError::Validation(ValidationError::new(
                "invalid_phone",
                "to",
                "Telefone inválido",
            )),
            ActorError::rejected(
                "unknown_template",
                "Template desconhecido",
                serde_json::json!({"name": "x"}),
            ),
            ActorError::SendInDoubt(42),
            ActorError::QuotaExhausted(Quota {
                scope: engine::limits::QuotaScope::Bm,
                limit: 250,
                used: 250,
                reset_at: Some(1_000),
                retry_after_ms: Some(10),
            }),
            ActorError::ProviderRefused {
                kind: ErrorKind::RateLimited,
                code: Some(130429),
                reason: "Rate limit hit".into(),
                blame: Blame::Throttled {
                    retry_after_ms: 2_000,
                },
                message_id: Some(9),
                details: serde_json::Value::Null,
            },
        ];
        for e in cases {
            let before = format!("{e:?}");
            let wire: WireError = e.into();
            let json = serde_json::to_vec(&SendAnswer::Failed(wire)).unwrap();
            let SendAnswer::Failed(back) = serde_json::from_slice(&json).unwrap() else {
                panic!("not a failure");
            };
            assert_eq!(format!("{:?}", ActorError::from(back)), before);
        }
        assert!(std::ptr::eq(intern("abc"), intern("abc")));
    }
}
