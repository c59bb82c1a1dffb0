//! The provider: Meta's WhatsApp Business Platform Cloud API, spoken over the Graph API.
//!
//! - [`client`]: a typed Graph API client (reqwest) used by the actors.
//! - [`wire`]: request, response and webhook payload types, shaped like the real payloads in
//!   `shared/provider-samples/`.
//! - [`error`]: the Graph error envelope parsed into one error that says what to do next.
//! - [`signature`]: `X-Hub-Signature-256` signing and verification, including the provider's
//!   `\uXXXX` escaping quirk (PROVIDER.md §8.2).
//! - [`alternative`]: alternative providers, referenced only (their senders' templates).
//! - [`hygiene`]: the contact-hygiene service panel campaigns validate their contacts with.
//! - [`sim`]: a provider simulator, a real HTTP server with the same paths, shapes and errors.
//!
//! Everything here follows `shared/PROVIDER.md`; section numbers in doc comments refer to it.

pub mod alternative;
pub mod client;
pub mod error;
pub mod hygiene;
pub mod signature;
pub mod sim;
pub mod wire;

pub use client::{GraphClient, GraphConfig};
pub use error::{Blame, ErrorKind, GraphError, NextStep, ProviderError};
