//! Graph API errors (PROVIDER.md §7): the envelope, its classification, and the client's error.

use serde::{Deserialize, Serialize};

/// The body of a Graph error response: `{"error": {…}}` (§7).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraphErrorEnvelope {
    /// The error object.
    pub error: GraphError,
}

/// The Graph error object. Only `message` and `code` are always present; branch on `code`
/// (§7: "Clients must key on `error.code`, not HTTP status").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraphError {
    /// `(#<code>) <title>` for WhatsApp codes, free text for generic Graph errors.
    pub message: String,
    /// Usually `OAuthException`; `GraphMethodException` also occurs.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The code to branch on.
    pub code: i64,
    /// Optional subcode (e.g. 463 expired token, 2494055 throughput, 2388024 duplicate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_subcode: Option<i64>,
    /// `{messaging_product, details}` for Cloud API errors; some template-API errors put a
    /// string here (§7), so it is kept as raw JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_data: Option<serde_json::Value>,
    /// Optional user-facing title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_user_title: Option<String>,
    /// Optional user-facing message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_user_msg: Option<String>,
    /// Whether Graph considers it transient.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_transient: Option<bool>,
    /// Support trace id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fbtrace_id: Option<String>,
}

impl GraphError {
    /// `error_data.details` when present (or `error_data` itself when it is a string).
    pub fn details(&self) -> Option<&str> {
        match self.error_data.as_ref()? {
            serde_json::Value::String(s) => Some(s),
            v => v.get("details")?.as_str(),
        }
    }
}

/// What a Graph error code means for disparo (PROVIDER.md §7.1, "Retry?" column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The number's throughput or an app/WABA request rate was exceeded (130429, 4, 17,
    /// 80007, 80008): back off and retry.
    RateLimited,
    /// Too many messages to one recipient (131056): retry to that recipient after 4^X s.
    PairRateLimited,
    /// The provider is temporarily unable (1, 2, 131000, 131016, 131057, 133004, HTTP 5xx,
    /// timeouts): bounded retries with backoff.
    Transient,
    /// The access token is missing, expired or invalid (0, 104, 190): re-authenticate.
    InvalidCredential,
    /// The token lacks permission on the asset (3, 10, 200–299).
    PermissionDenied,
    /// More than 24 h since the user's last message (131047): send a template instead.
    ReEngagement,
    /// The provider chose not to deliver a marketing message, or the user opted out (131049,
    /// 131050).
    MarketingLimited,
    /// The recipient cannot receive it (131026, 131030, 131021, 130472, 130497).
    InvalidRecipient,
    /// The template does not exist in that language or is not approved (132001).
    TemplateMissing,
    /// The template is paused (132015).
    TemplatePaused,
    /// The template is disabled (132016).
    TemplateDisabled,
    /// The template's parameters do not match (132000, 132005, 132007, 132008, 132012, 132018).
    TemplateParameters,
    /// The number is not registered (133010).
    NotRegistered,
    /// Registration failed: wrong PIN, too many attempts, re-verification needed (133005,
    /// 133006, 133008, 133009, 133015, 133016, 131045, 133000).
    Registration,
    /// The account is locked or blocked for policy (131031, 368, 131005).
    AccountLocked,
    /// A payment problem on the business (131042).
    Payment,
    /// Spam rate limit: too many blocks or reports (131048). Retry only much later.
    SpamLimited,
    /// Media could not be downloaded or uploaded (131052, 131053).
    Media,
    /// An invalid parameter or unknown id (100, 33, 131008, 131009, 135000).
    InvalidRequest,
    /// Any other code.
    Other,
}

/// Whose fault a provider refusal is, and whether the same request can succeed later (issue
/// 49, decision D-107): what a client is answered by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Blame {
    /// The request, or the account's own state at the provider (a template it does not know,
    /// a recipient it cannot reach, an invalid parameter, a payment or credential problem):
    /// sent again unchanged, it fails again.
    Request,
    /// The provider throttled it: the same request may succeed after `retry_after_ms`.
    Throttled {
        /// When to try again, ms (the provider's `Retry-After`, else the back-off's first
        /// step for the kind).
        retry_after_ms: u64,
    },
    /// The provider failed: `retryable` when a retry can help (a 5xx, unreachable), not when
    /// its answer could not be read.
    Upstream {
        /// Whether the same request may succeed later.
        retryable: bool,
    },
    /// No answer in time: whether the provider acted is unknown.
    Timeout,
}

impl Blame {
    /// Whether the same request may succeed if sent again later.
    pub fn retryable(self) -> bool {
        match self {
            Blame::Request => false,
            Blame::Throttled { .. } | Blame::Timeout => true,
            Blame::Upstream { retryable } => retryable,
        }
    }
}

impl ErrorKind {
    /// Whose fault an error of this kind is (D-107), for an error known only by its kind.
    pub fn blame(self) -> Blame {
        match self {
            ErrorKind::RateLimited | ErrorKind::PairRateLimited => Blame::Throttled {
                retry_after_ms: match self.next_step(1) {
                    NextStep::RetryAfter(ms) => ms,
                    _ => 1000,
                },
            },
            ErrorKind::Transient => Blame::Upstream { retryable: true },
            _ => Blame::Request,
        }
    }
}

/// What the caller should do after an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextStep {
    /// Try again after the delay (ms).
    RetryAfter(u64),
    /// Do not retry this request.
    Refuse,
    /// Fix the credential; nothing sent with it will succeed.
    Reauthenticate,
}

impl ErrorKind {
    /// Classifies a Graph error code (§7.1).
    pub fn from_code(code: i64) -> Self {
        match code {
            130429 | 4 | 17 | 80007 | 80008 => ErrorKind::RateLimited,
            131056 => ErrorKind::PairRateLimited,
            1 | 2 | 131000 | 131016 | 131057 | 133004 => ErrorKind::Transient,
            0 | 104 | 190 => ErrorKind::InvalidCredential,
            3 | 10 | 200..=299 => ErrorKind::PermissionDenied,
            131047 => ErrorKind::ReEngagement,
            131049 | 131050 => ErrorKind::MarketingLimited,
            131026 | 131030 | 131021 | 130472 | 130497 => ErrorKind::InvalidRecipient,
            132001 => ErrorKind::TemplateMissing,
            132015 => ErrorKind::TemplatePaused,
            132016 => ErrorKind::TemplateDisabled,
            132000 | 132005 | 132007 | 132008 | 132012 | 132018 => ErrorKind::TemplateParameters,
            133010 => ErrorKind::NotRegistered,
            133000 | 133005 | 133006 | 133008 | 133009 | 133015 | 133016 | 131045 => {
                ErrorKind::Registration
            }
            131031 | 368 | 131005 => ErrorKind::AccountLocked,
            131042 => ErrorKind::Payment,
            131048 => ErrorKind::SpamLimited,
            131052 | 131053 => ErrorKind::Media,
            100 | 33 | 131008 | 131009 | 135000 => ErrorKind::InvalidRequest,
            _ => ErrorKind::Other,
        }
    }

    /// The next step for this kind, `attempt` being how many tries were already made (1 for
    /// the first failure). Delays: rate limits 1 s doubling (max 60 s); pair rate 4^X s
    /// (§10.3); transient 2 s doubling (max 60 s).
    pub fn next_step(self, attempt: u32) -> NextStep {
        let exp = attempt.saturating_sub(1).min(10);
        match self {
            ErrorKind::RateLimited => NextStep::RetryAfter((1000u64 << exp).min(60_000)),
            ErrorKind::PairRateLimited => NextStep::RetryAfter(
                4u64.saturating_pow(exp.min(6))
                    .saturating_mul(1000)
                    .min(3_600_000),
            ),
            ErrorKind::Transient => NextStep::RetryAfter((2000u64 << exp).min(60_000)),
            ErrorKind::InvalidCredential => NextStep::Reauthenticate,
            _ => NextStep::Refuse,
        }
    }
}

/// An error from a provider call.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProviderError {
    /// The provider answered with a Graph error envelope.
    #[error("provider error {} (HTTP {status}): {}", error.code, error.message)]
    Graph {
        /// HTTP status of the response.
        status: u16,
        /// The parsed error object.
        error: GraphError,
        /// `Retry-After` header in seconds, when the provider sent one.
        retry_after_s: Option<u64>,
    },
    /// The provider answered with a status and a body that is not a Graph envelope.
    #[error("provider answered HTTP {status} without a Graph error body")]
    Http {
        /// HTTP status.
        status: u16,
        /// The first bytes of the body, for the logs.
        body: String,
    },
    /// The request did not complete (connection refused, reset, DNS).
    #[error("provider unreachable: {0}")]
    Transport(String),
    /// The request could not be built from the values given: a token (or another value)
    /// that cannot go in an HTTP header or URL. Never sent; the caller's input is at fault,
    /// so it reads as an invalid credential, never as a transient failure.
    #[error("request not built: {0}")]
    Request(String),
    /// The request timed out.
    #[error("provider timed out")]
    Timeout,
    /// A success answer could not be decoded.
    #[error("unexpected provider answer: {0}")]
    Decode(String),
}

impl ProviderError {
    /// The error's kind.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ProviderError::Graph { error, .. } => ErrorKind::from_code(error.code),
            ProviderError::Http { status, .. } if *status == 429 => ErrorKind::RateLimited,
            ProviderError::Http { status, .. } if *status >= 500 => ErrorKind::Transient,
            ProviderError::Http { status, .. } if *status == 401 => ErrorKind::InvalidCredential,
            ProviderError::Http { .. } | ProviderError::Decode(_) => ErrorKind::Other,
            ProviderError::Transport(_) | ProviderError::Timeout => ErrorKind::Transient,
            ProviderError::Request(_) => ErrorKind::InvalidCredential,
        }
    }

    /// The next step after `attempt` tries, honouring a `Retry-After` header when present.
    pub fn next_step(&self, attempt: u32) -> NextStep {
        match (self.kind().next_step(attempt), self) {
            (
                NextStep::RetryAfter(ms),
                ProviderError::Graph {
                    retry_after_s: Some(s),
                    ..
                },
            ) => NextStep::RetryAfter(ms.max(s * 1000)),
            (step, _) => step,
        }
    }

    /// Whose fault this error is (D-107): a timeout is [`Blame::Timeout`]; an answer that is
    /// not a Graph error and not a 5xx or 429, or a success that cannot be decoded, is the
    /// provider's and not retryable; a request that could not be built is the request's; a
    /// Graph error goes by its kind, a throttle with the provider's `Retry-After` when sent.
    pub fn blame(&self) -> Blame {
        match self {
            ProviderError::Timeout => Blame::Timeout,
            ProviderError::Request(_) => Blame::Request,
            ProviderError::Decode(_) => Blame::Upstream { retryable: false },
            ProviderError::Http { status, .. }
                if !matches!(*status, 401 | 429) && *status < 500 =>
            {
                Blame::Upstream { retryable: false }
            }
            _ => match (self.kind().blame(), self.next_step(1)) {
                (Blame::Throttled { .. }, NextStep::RetryAfter(ms)) => {
                    Blame::Throttled { retry_after_ms: ms }
                }
                (blame, _) => blame,
            },
        }
    }

    /// The Graph error code, when the provider sent one.
    pub fn code(&self) -> Option<i64> {
        match self {
            ProviderError::Graph { error, .. } => Some(error.code),
            _ => None,
        }
    }

    /// The provider's reason as one line: its message plus `error_data.details` when present.
    /// Used in pt-BR error messages and stored on failed messages.
    pub fn reason(&self) -> String {
        match self {
            ProviderError::Graph { error, .. } => match error.details() {
                Some(d) if !d.is_empty() => format!("{} ({d})", error.message),
                _ => error.message.clone(),
            },
            other => other.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Fuzzing (issue 53): any error body the provider may answer is a Graph error or
        /// not, never a panic, and every reading of a Graph error (kind, blame, reason, the
        /// retry plan at any attempt) is defined.
        #[test]
        fn any_error_body_is_read(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256),
                                  code in proptest::prelude::any::<i64>(),
                                  subcode in proptest::option::of(proptest::prelude::any::<i64>()),
                                  message in ".{0,40}",
                                  status in 100u16..600,
                                  attempt in proptest::prelude::any::<u32>()) {
            let _ = serde_json::from_slice::<GraphErrorEnvelope>(&bytes);
            let body = serde_json::json!({"error": {"message": message, "type": "OAuthException",
                "code": code, "error_subcode": subcode, "error_data": {"details": message}}});
            let env: GraphErrorEnvelope = serde_json::from_value(body).unwrap();
            let e = ProviderError::Graph { status, error: env.error, retry_after_s: None };
            let _ = (e.kind(), e.blame(), e.reason(), e.code(), e.next_step(attempt));
            let http = ProviderError::Http { status, body: message.clone() };
            let _ = (http.kind(), http.blame(), http.reason(), http.next_step(attempt));
            let _ = ErrorKind::from_code(code).next_step(attempt);
        }
    }

    fn graph(code: i64) -> ProviderError {
        ProviderError::Graph {
            status: 400,
            error: GraphError {
                message: format!("(#{code}) test"),
                kind: Some("OAuthException".into()),
                code,
                error_subcode: None,
                error_data: None,
                error_user_title: None,
                error_user_msg: None,
                is_transient: None,
                fbtrace_id: None,
            },
            retry_after_s: None,
        }
    }

    fn sample(name: &str) -> GraphErrorEnvelope {
        let path = format!("{}/testdata/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn each_refusal_is_blamed_on_its_cause() {
        assert_eq!(graph(132001).blame(), Blame::Request);
        assert_eq!(graph(131026).blame(), Blame::Request);
        assert_eq!(graph(100).blame(), Blame::Request);
        assert_eq!(graph(131042).blame(), Blame::Request);
        assert_eq!(
            graph(130429).blame(),
            Blame::Throttled {
                retry_after_ms: 1000
            }
        );
        let mut told = graph(130429);
        if let ProviderError::Graph { retry_after_s, .. } = &mut told {
            *retry_after_s = Some(30);
        }
        assert_eq!(
            told.blame(),
            Blame::Throttled {
                retry_after_ms: 30_000
            }
        );
        assert_eq!(graph(131000).blame(), Blame::Upstream { retryable: true });
        assert_eq!(
            ProviderError::Http {
                status: 503,
                body: String::new()
            }
            .blame(),
            Blame::Upstream { retryable: true }
        );
        assert_eq!(
            ProviderError::Http {
                status: 404,
                body: String::new()
            }
            .blame(),
            Blame::Upstream { retryable: false }
        );
        assert_eq!(
            ProviderError::Transport("reset".into()).blame(),
            Blame::Upstream { retryable: true }
        );
        assert_eq!(ProviderError::Timeout.blame(), Blame::Timeout);
        assert!(ProviderError::Timeout.blame().retryable());
        assert!(!graph(132001).blame().retryable());
    }

    #[test]
    fn real_error_bodies_parse_and_classify() {
        let e = sample("graph_error_190_expired_token.json").error;
        assert_eq!((e.code, e.error_subcode), (190, Some(463)));
        assert_eq!(ErrorKind::from_code(e.code), ErrorKind::InvalidCredential);
        let e = sample("graph_error_130429_rate_limit.json").error;
        assert_eq!(ErrorKind::from_code(e.code), ErrorKind::RateLimited);
        let e = sample("graph_error_131056_pair_rate_limit.json").error;
        assert_eq!(ErrorKind::from_code(e.code), ErrorKind::PairRateLimited);
    }

    #[test]
    fn every_code_in_the_reference_table_has_its_kind() {
        use ErrorKind as K;
        let table: &[(i64, ErrorKind)] = &[
            (0, K::InvalidCredential),
            (1, K::Transient),
            (2, K::Transient),
            (3, K::PermissionDenied),
            (4, K::RateLimited),
            (10, K::PermissionDenied),
            (17, K::RateLimited),
            (33, K::InvalidRequest),
            (100, K::InvalidRequest),
            (190, K::InvalidCredential),
            (200, K::PermissionDenied),
            (299, K::PermissionDenied),
            (368, K::AccountLocked),
            (80007, K::RateLimited),
            (80008, K::RateLimited),
            (130429, K::RateLimited),
            (130472, K::InvalidRecipient),
            (130497, K::InvalidRecipient),
            (131000, K::Transient),
            (131005, K::AccountLocked),
            (131008, K::InvalidRequest),
            (131009, K::InvalidRequest),
            (131016, K::Transient),
            (131021, K::InvalidRecipient),
            (131026, K::InvalidRecipient),
            (131030, K::InvalidRecipient),
            (131031, K::AccountLocked),
            (131042, K::Payment),
            (131045, K::Registration),
            (131047, K::ReEngagement),
            (131048, K::SpamLimited),
            (131049, K::MarketingLimited),
            (131050, K::MarketingLimited),
            (131051, K::Other),
            (131052, K::Media),
            (131053, K::Media),
            (131056, K::PairRateLimited),
            (131057, K::Transient),
            (131064, K::Other),
            (132000, K::TemplateParameters),
            (132001, K::TemplateMissing),
            (132005, K::TemplateParameters),
            (132007, K::TemplateParameters),
            (132008, K::TemplateParameters),
            (132012, K::TemplateParameters),
            (132015, K::TemplatePaused),
            (132016, K::TemplateDisabled),
            (132018, K::TemplateParameters),
            (133000, K::Registration),
            (133004, K::Transient),
            (133005, K::Registration),
            (133006, K::Registration),
            (133008, K::Registration),
            (133009, K::Registration),
            (133010, K::NotRegistered),
            (133015, K::Registration),
            (133016, K::Registration),
            (135000, K::InvalidRequest),
        ];
        for (code, kind) in table {
            assert_eq!(ErrorKind::from_code(*code), *kind, "code {code}");
            assert_eq!(graph(*code).kind(), *kind, "code {code}");
        }
    }

    #[test]
    fn next_steps_follow_the_kind() {
        assert_eq!(graph(130429).next_step(1), NextStep::RetryAfter(1000));
        assert_eq!(graph(130429).next_step(3), NextStep::RetryAfter(4000));
        assert_eq!(graph(131056).next_step(1), NextStep::RetryAfter(1000));
        assert_eq!(graph(131056).next_step(3), NextStep::RetryAfter(16_000));
        assert_eq!(graph(131000).next_step(1), NextStep::RetryAfter(2000));
        assert_eq!(graph(190).next_step(1), NextStep::Reauthenticate);
        assert_eq!(graph(131047).next_step(1), NextStep::Refuse);
        assert_eq!(
            ProviderError::Timeout.next_step(2),
            NextStep::RetryAfter(4000)
        );
        let http503 = ProviderError::Http {
            status: 503,
            body: String::new(),
        };
        assert!(matches!(http503.next_step(1), NextStep::RetryAfter(_)));
    }

    #[test]
    fn details_come_from_object_or_string_error_data() {
        let mut e = sample("graph_error_190_expired_token.json").error;
        assert_eq!(e.details(), None);
        e.error_data = Some(serde_json::json!({"messaging_product": "whatsapp", "details": "x"}));
        assert_eq!(e.details(), Some("x"));
        e.error_data = Some(serde_json::json!("y"));
        assert_eq!(e.details(), Some("y"));
    }
}
