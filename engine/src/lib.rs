//! disparo's domain: the values and rules every other layer uses.
//!
//! This crate is pure: no async, no I/O, no clock. Functions take the current time as an
//! argument (milliseconds since the Unix epoch, UTC) when a rule depends on it, so every rule is
//! a table-testable function.

pub mod access;
pub mod audience;
pub mod campaign;
pub mod channel;
pub mod cluster;
pub mod error;
pub mod group;
pub mod guardrail;
pub mod ids;
pub mod library;
pub mod limits;
pub mod media;
pub mod message;
pub mod net;
pub mod pacing;
pub mod panel;
pub mod panel_campaign;
pub mod phone;
pub mod provider_webhook;
pub mod rate;
pub mod secret;
pub mod send;
pub mod sender;
pub mod template;
pub mod token;
pub mod webhook;
pub mod wiki;

pub use error::ValidationError;
pub use secret::Secret;

/// The OpenAPI schema of a string that takes one of `values` (stable wire identifiers whose
/// Rust names differ, or a subset of an enum), with a pt-BR `description` (D-079).
pub fn string_enum_schema(
    values: impl IntoIterator<Item = &'static str>,
    description: &str,
) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(values))
        .description(Some(description))
        .into()
}

/// Milliseconds in one hour.
pub const HOUR_MS: i64 = 60 * 60 * 1000;
/// Milliseconds in the 24-hour windows the provider uses (customer-service window, messaging
/// limits).
pub const DAY_MS: i64 = 24 * HOUR_MS;
