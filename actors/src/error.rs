//! The actors crate's one error type. `http/src/error.rs` maps it to a status and body.

use engine::channel::HealthCode;
pub use provider::Blame;
use provider::ErrorKind;

/// What can go wrong when the HTTP layer asks the runtime for something.
#[derive(Debug, thiserror::Error)]
pub enum ActorError {
    /// The record does not exist in this account (or the channel is not running).
    #[error("not found")]
    NotFound,
    /// Input failed a domain rule.
    #[error(transparent)]
    Validation(#[from] engine::ValidationError),
    /// Free text outside the 24-hour window.
    #[error("the 24-hour window is closed")]
    WindowClosed,
    /// A business-initiated send refused by the channel's state (quality RED, banned WABA,
    /// payment lock, invalid credential, disconnected).
    #[error("business-initiated send refused: {}", .0.as_str())]
    BusinessInitiatedRefused(HealthCode),
    /// The provider refused the request or failed (answered by its [`Blame`], D-107).
    #[error("provider refused ({kind:?}, code {code:?}): {reason}")]
    ProviderRefused {
        /// Classification.
        kind: ErrorKind,
        /// Graph code, when there was one.
        code: Option<i64>,
        /// The provider's reason.
        reason: String,
        /// Whose fault it is and whether a retry can help.
        blame: Blame,
        /// The message row written before the call (it is `failed` now), when there is one.
        message_id: Option<i64>,
        /// Extra members of the answer's body (e.g. which WABAs were already changed), an
        /// object or `null`.
        details: serde_json::Value,
    },
    /// The credential given to connect a channel does not work at the provider.
    #[error("credential refused by the provider: {0}")]
    CredentialRefused(String),
    /// A uniqueness rule.
    #[error("conflict: {0}")]
    Conflict(String),
    /// A message was written and handed to the provider, but whether the provider accepted it
    /// is unknown (timeout, or its answer could not be recorded): the message (this id) stays
    /// `sending` until a status webhook or the reconciliation settles it. Never sent again.
    #[error("send in doubt (message {0})")]
    SendInDoubt(i64),
    /// A provider webhook whose signature does not verify.
    #[error("invalid provider signature")]
    InvalidSignature,
    /// A provider webhook body that is not a provider payload.
    #[error("invalid provider payload: {0}")]
    BadPayload(String),
    /// A business rule refused the request; `details` go into the 422 body (`missing`,
    /// `invalid_channels`, `problems`…).
    #[error("{message}")]
    Rejected {
        /// Stable code.
        code: &'static str,
        /// pt-BR text.
        message: String,
        /// Extra members of the body.
        details: serde_json::Value,
    },
    /// A rule refused the request with a status other than 422: 409 (the record's state does
    /// not allow it now: `details` say why), 403 (a rule about who may do it), 503 (a service
    /// it needs did not answer) or 502 (the provider refused, with details such as the
    /// `channel_id` already created).
    #[error("{message}")]
    Refused {
        /// 403 or 409.
        status: u16,
        /// Stable code.
        code: &'static str,
        /// pt-BR text.
        message: String,
        /// Extra members of the body.
        details: serde_json::Value,
    },
    /// A template with problems cannot be submitted.
    #[error("the template has problems")]
    TemplateHasProblems(serde_json::Value),
    /// 429: the sending group's 24 h limit is used up, or none of its numbers has headroom.
    #[error("the sending group's 24-hour limit is exhausted")]
    GroupExhausted,
    /// 429: a 24 h limit (the number's, its group's or its BM's) has no room for a new
    /// recipient; the quota says which, its figures and when room returns (issue 49).
    #[error("the {} 24-hour limit is exhausted", .0.scope.as_str())]
    QuotaExhausted(engine::limits::Quota),
    /// 429: a burst of 1:1 sends over the number's throughput — no slot within a second; one
    /// is `retry_after_ms` further (issue 54, D-128).
    #[error("the number's throughput is exceeded")]
    ThroughputExceeded {
        /// How long until a slot is within the bound, ms.
        retry_after_ms: i64,
    },
    /// The actor did not answer in time or is gone.
    #[error("the service is busy, try again")]
    Unavailable,
    /// Storage failed.
    #[error(transparent)]
    Storage(storage::StorageError),
}

impl ActorError {
    /// A refusal (422) with its code, message (pt-BR) and details.
    pub fn rejected(
        code: &'static str,
        message: impl Into<String>,
        details: serde_json::Value,
    ) -> Self {
        ActorError::Rejected {
            code,
            message: message.into(),
            details,
        }
    }
}

impl From<storage::StorageError> for ActorError {
    fn from(e: storage::StorageError) -> Self {
        match e {
            storage::StorageError::NotFound => ActorError::NotFound,
            storage::StorageError::Conflict(c) => ActorError::Conflict(c),
            // Cluster mode: this node lost the number's cell; nothing was written, and the
            // caller may retry (another node runs the number by then).
            storage::StorageError::Fenced(_) => ActorError::Unavailable,
            other => ActorError::Storage(other),
        }
    }
}

impl From<provider::ProviderError> for ActorError {
    fn from(e: provider::ProviderError) -> Self {
        ActorError::ProviderRefused {
            kind: e.kind(),
            code: e.code(),
            reason: e.reason(),
            blame: e.blame(),
            message_id: None,
            details: serde_json::Value::Null,
        }
    }
}

impl ActorError {
    /// A provider refusal that left message `id` (written before the call) behind: its id goes
    /// into the answer. Any other error is unchanged.
    pub fn with_message_id(mut self, id: i64) -> Self {
        if let ActorError::ProviderRefused { message_id, .. } = &mut self {
            *message_id = Some(id);
        }
        self
    }

    /// A provider refusal with `extra` members for the answer's body (an object) and `context`
    /// before the provider's reason. Any other error is unchanged.
    pub fn with_provider_context(mut self, context: &str, extra: serde_json::Value) -> Self {
        if let ActorError::ProviderRefused {
            reason, details, ..
        } = &mut self
        {
            *reason = format!("{context}: {reason}");
            *details = extra;
        }
        self
    }
}

/// Reads a JSON column of a stored record (`what` names it for the log): a value that does not
/// decode is corrupt data, an error, never a silent default (issue 51).
///
/// Errors: [`ActorError::Storage`] with [`storage::StorageError::Corrupt`].
pub fn stored_json<T: serde::de::DeserializeOwned>(
    what: &str,
    value: &serde_json::Value,
) -> Result<T, ActorError> {
    T::deserialize(value).map_err(|e| {
        ActorError::Storage(storage::StorageError::Corrupt(format!(
            "{what} ilegível: {e}"
        )))
    })
}

/// A provider refusal known only by its kind (no code, the kind as its reason).
impl From<provider::ErrorKind> for ActorError {
    fn from(kind: provider::ErrorKind) -> Self {
        ActorError::ProviderRefused {
            kind,
            code: None,
            reason: format!("{kind:?}"),
            blame: kind.blame(),
            message_id: None,
            details: serde_json::Value::Null,
        }
    }
}
