//! `X-Hub-Signature-256`: how the provider signs webhook bodies (PROVIDER.md §8.2). The rule is
//! pure and lives in [`engine::provider_webhook::signature`]; re-exported here for the client
//! and the simulator, which sign and check bodies on the wire.

pub use engine::provider_webhook::signature::*;
