//! Routers per spec section.

pub mod accounts;
pub mod alternative;
pub mod campaigns;
pub mod channels;
pub mod groups;
pub mod guardrails;
pub mod mcp;
pub mod messages;
pub mod ops;
pub mod provider;
pub mod reports;
pub mod sender;
pub mod templates;
pub mod tokens;
pub mod webhooks;
pub mod wiki;

use actors::time::iso;
use serde_json::Value;

/// Renders optional ms timestamps as ISO 8601 (null when absent).
pub(crate) fn iso_opt(ms: Option<i64>) -> Value {
    ms.map(|t| Value::String(iso(t))).unwrap_or(Value::Null)
}
