//! Several nodes on one PostgreSQL (issue 52, `../shared/CLUSTER.md`): the pure rules —
//! which channels form a cell ([`cells`]), which node owns a cell (rendezvous, [`cells::owner`]),
//! the lease keeper's state machine ([`keeper`]) and the signed form of the messages nodes
//! exchange over NATS ([`seal`]).

pub mod cells;
pub mod keeper;
pub mod seal;

pub use cells::{owner, CellKey, Cells, Membership};
pub use keeper::{Effect, Held, Keeper, StopReason};
