//! disparo's domain: the values and rules every other layer uses.
//!
//! This crate is pure: no async, no I/O, no clock. Functions take the current time as an
//! argument (milliseconds since the Unix epoch, UTC) when a rule depends on it, so every rule is
//! a table-testable function.

pub mod access;
pub mod campaign;
pub mod channel;
pub mod error;
pub mod guardrail;
pub mod library;
pub mod limits;
pub mod media;
pub mod message;
pub mod net;
pub mod pacing;
pub mod panel;
pub mod panel_campaign;
pub mod phone;
pub mod secret;
pub mod sender;
pub mod template;
pub mod token;
pub mod webhook;
pub mod wiki;

pub use error::ValidationError;
pub use secret::Secret;

/// Milliseconds in one hour.
pub const HOUR_MS: i64 = 60 * 60 * 1000;
/// Milliseconds in the 24-hour windows the provider uses (customer-service window, messaging
/// limits).
pub const DAY_MS: i64 = 24 * HOUR_MS;
