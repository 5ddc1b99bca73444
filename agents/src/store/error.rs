//! What can go wrong in the store, in backend-neutral terms.
//!
//! Why neutral: the engine, the gateway and `opc` match on these errors, and a second backend
//! (PostgreSQL) must report the same situations with the same variants. So no variant carries a
//! backend's own error type: a failure of the database itself is a [`DbFailure`], which says what it
//! means ([`DbFault`]: unavailable, conflict, corrupt, other) and keeps the backend's words for
//! people. Each backend classifies its own errors into it.
//!
//! Invariant: an error's text is the backend's message after what the store was doing, exactly as
//! people have read it so far (the backend's message is kept whole).

use super::TaskId;

/// What a failure of the database itself means, for a caller that decides what to do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DbFault {
    /// The database could not serve the operation now (busy or locked past the wait, an I/O error,
    /// a full disk, a file or server that cannot be reached): it may pass if tried again later.
    Unavailable,
    /// The change conflicts with what is stored (a uniqueness or reference constraint).
    Conflict,
    /// What is stored cannot be read as this build stores it (a damaged file, a value of the wrong
    /// type).
    Corrupt,
    /// Anything else (a statement the database refused, a misuse).
    Other,
}

/// A failure of the database itself: what it means, and the backend's own message (its `Display`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DbFailure {
    /// What it means.
    pub fault: DbFault,
    /// The backend's message.
    pub message: String,
}

/// Store errors. Failures of the database itself say what the store was doing.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be opened or migrated.
    #[error("cannot open the task database {path}: {source}")]
    Open {
        /// The file.
        path: String,
        /// Why.
        source: DbFailure,
    },
    /// The database was written by a newer OPC, whose schema this build does not know.
    #[error(
        "the task database {path} has schema version {found}, newer than this build of OPC knows ({known}); \
         upgrade OPC, or point `framework.memory.path` at another file"
    )]
    TooNew {
        /// The file.
        path: String,
        /// Its `user_version`.
        found: i64,
        /// The newest version this build migrates to.
        known: i64,
    },
    /// A schema migration failed (the database keeps its previous version).
    #[error("cannot upgrade the task database {path} ({what}): {source}")]
    Migrate {
        /// The file.
        path: String,
        /// The migration.
        what: &'static str,
        /// Why.
        source: DbFailure,
    },
    /// The memory tables (recall messages, core blocks) in the same file could not be brought up to
    /// date; the engine records every turn there, so it does not start without them.
    #[error("cannot prepare the memory tables in {path}: {source}")]
    Memory {
        /// The file.
        path: String,
        /// Why.
        source: DbFailure,
    },
    /// An operation on the database failed (what it means: [`DbFailure::fault`]).
    #[error("task database error while {doing}: {source}")]
    Database {
        /// What the store was doing.
        doing: &'static str,
        /// Why.
        source: DbFailure,
    },
    /// A stored JSON column could not be read back.
    #[error("task database holds unreadable {what} for task {task}: {message}")]
    Corrupt {
        /// Which column.
        what: &'static str,
        /// The task.
        task: TaskId,
        /// The decode error.
        message: String,
    },
    /// Something to be stored could not be encoded as JSON; nothing was written (a history that
    /// cannot be saved must never replace the saved one).
    #[error("cannot save the {what} of task {task}: {message}")]
    Encode {
        /// What was being saved.
        what: &'static str,
        /// The task.
        task: TaskId,
        /// The encoder's error.
        message: String,
    },
    /// A transition the lifecycle does not allow.
    #[error("task {task} cannot go from {from} to {to}")]
    BadTransition {
        /// The task.
        task: TaskId,
        /// Its current state.
        from: &'static str,
        /// The refused state.
        to: &'static str,
    },
    /// No such task.
    #[error("there is no task {0}")]
    NoTask(TaskId),
    /// The conversation's previous request is still running.
    #[error(
        "conversation {conversation} is still working on task {task}; wait for it or cancel it"
    )]
    Busy {
        /// The conversation.
        conversation: String,
        /// Its running root task.
        task: TaskId,
    },
    /// The store's writer stopped (it panicked, or the store is shutting down); the operation may not
    /// have been stored.
    #[error("the task database's writer stopped: {0}")]
    Writer(String),
    /// Another OPC process is using this database.
    #[error(
        "another OPC process is using {path} (lock file {lock}); stop it first, or point `framework.memory.path` elsewhere"
    )]
    Locked {
        /// The database.
        path: String,
        /// The lock file.
        lock: String,
    },
    /// Another OPC process holds the engine's claim on this PostgreSQL database.
    #[error(
        "another OPC process is serving the PostgreSQL database {place} (it holds the engine's advisory lock); \
         stop it first, or point `framework.memory.postgres.urlEnv` at another database"
    )]
    Claimed {
        /// The database, as `host:port/name`.
        place: String,
    },
    /// A write for a tree whose lease this node no longer holds (it was paused or cut off past
    /// `framework.cluster.leaseTtl`, and another node took the tree over): refused, nothing written.
    #[error(
        "tree {root} moved to another node (this node's lease on it expired); nothing was written"
    )]
    Fenced {
        /// The tree's root task.
        root: TaskId,
    },
}

impl StoreError {
    /// What the database's own failure means, when this is one (opening, migrating, an operation).
    pub fn fault(&self) -> Option<DbFault> {
        match self {
            StoreError::Open { source, .. }
            | StoreError::Migrate { source, .. }
            | StoreError::Memory { source, .. }
            | StoreError::Database { source, .. } => Some(source.fault),
            _ => None,
        }
    }
}
