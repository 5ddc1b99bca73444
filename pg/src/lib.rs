//! # opc-pg — PostgreSQL for OPC's components (`framework.memory.storage: postgres`)
//!
//! Role: what every component that keeps tables in PostgreSQL shares, below them all (a leaf: it
//! depends on `opc-migrate` only):
//! - [`Blocking`]: one connection on a thread of its own, for synchronous code (memory's blocks,
//!   recall and facts, the web transcript, the gateway's threads). Why a thread: these components
//!   run their SQL synchronously today, as rusqlite does, often from inside the async runtime; the
//!   blocking client must never run on a runtime thread (it drives its own), so it lives on its own
//!   thread and callers wait on a channel — exactly as they waited on SQLite's locks;
//! - [`place()`]: the database named as `host:port/name`, the only way any message shows it (the URL
//!   holds the password);
//! - [`migrate()`]: a component's migrations (`opc_migrate::Component`, with PostgreSQL's SQL) applied
//!   with its `schema_versions` row in one transaction, under a transaction-scoped advisory lock, so
//!   nodes starting together migrate once.
//!
//! - [`session_options`]: what every session carries (a paused node's transaction cannot hold its
//!   locks past [`IDLE_IN_TRANSACTION`]).
//!
//! Invariants: no message, log line or error holds the URL; a lost connection is reopened on the
//! next use (a restarted server costs the calls made while it was down, never the component).

mod blocking;
mod error;
mod migrate;
mod place;
mod session;

pub use blocking::Blocking;
pub use error::{Fault, PgError, fault, message};
pub use migrate::{MIGRATION_LOCK, PgMigrateError, migrate};
pub use place::{parse, place};
pub use session::{IDLE_IN_TRANSACTION, session_options};

/// The blocking client's types, for the components' SQL (rows, transactions, parameters).
pub use postgres;
