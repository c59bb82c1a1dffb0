//! Several nodes on one PostgreSQL (issue 52, `../shared/CLUSTER.md`): the pure rules —
//! which channels form a cell ([`cells`]), which node owns a cell (rendezvous, [`cells::owner`])
//! and the lease keeper's state machine ([`keeper`]).

pub mod cells;
pub mod keeper;

pub use cells::{owner, CellKey, Cells, Membership};
pub use keeper::{Effect, Held, Keeper, StopReason};
