//! The engine's one error type: a value that failed a domain rule.

/// A value that failed a domain rule. `message` is the pt-BR text shown to the integrator;
/// `code` is a stable machine identifier (snake_case) for automation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ValidationError {
    /// Stable snake_case identifier, e.g. `invalid_phone`.
    pub code: &'static str,
    /// Which input field failed, e.g. `to`.
    pub field: &'static str,
    /// Human-readable pt-BR explanation, meant to be repeated to an operator.
    pub message: String,
}

impl ValidationError {
    /// Builds an error for `field` with a stable `code` and a pt-BR `message`.
    pub fn new(code: &'static str, field: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            field,
            message: message.into(),
        }
    }
}
