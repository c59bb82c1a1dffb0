//! Routers per spec section.

pub mod accounts;
pub mod alternative;
pub mod campaigns;
pub mod channels;
pub mod groups;
pub mod guardrails;
pub mod idempotency;
pub mod mcp;
pub mod message_out;
pub mod messages;
pub mod ops;
pub mod provider;
pub mod reports;
pub mod sender;
pub mod template_in;
pub mod templates;
pub mod tokens;
pub mod webhooks;
pub mod wiki;
