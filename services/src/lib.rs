//! disparo's services: what the operator panel (`/api`) and the account API (`/api/v1`) do
//! with the records they share — BMs, WABAs, numbers, clients, users, the public sender, a
//! number's guardrails, connecting a number — built on the actors' [`actors::Runtime`]
//! (issue 51).
//!
//! Calls point one way: `http` → `services` → `actors` → `storage` / `provider` → `engine`.
//! A service reads and writes storage, asks the provider through the runtime's client and
//! asks a number's actor for its live state; the rules it applies are `engine`'s. The live
//! state itself (a number's counters, campaigns in flight, the outbox) belongs to the actors.
//!
//! [`Services`] is the handle `http` holds: its own methods are the services'; it
//! dereferences to the [`actors::Runtime`] for what the actors answer (sends, snapshots,
//! campaigns). Errors are the runtime's [`actors::ActorError`], mapped to HTTP in one place
//! (`http::error`).

pub mod accounts;
pub mod alternative;
pub mod campaigns;
pub mod channels;
pub mod cluster;
pub mod connect;
pub mod forwarding;
pub mod groups;
pub mod guardrails;
pub mod panel;
pub mod panel_campaigns;
pub mod sender;
pub mod templates;
pub mod webhooks;

use actors::Runtime;

/// The services' handle: the runtime and the services built on it. Cheap to clone.
#[derive(Clone)]
pub struct Services {
    runtime: Runtime,
}

impl Services {
    /// The services over a started runtime.
    pub fn new(runtime: Runtime) -> Self {
        Self { runtime }
    }

    /// The runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }
}

impl std::ops::Deref for Services {
    type Target = Runtime;

    fn deref(&self) -> &Runtime {
        &self.runtime
    }
}
