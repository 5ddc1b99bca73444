//! What went wrong with PostgreSQL, in terms a caller acts on ([`Fault`]) and words people read,
//! naming the database as `host:port/name` only (never the URL, which holds the password).

use postgres::error::SqlState;

/// What a failure means for the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The server cannot be reached or is shutting down or restarting: the call may pass later.
    Unavailable,
    /// The change conflicts with what is stored (a uniqueness or reference constraint, a
    /// serialization failure, a deadlock).
    Conflict,
    /// What is stored cannot be read as this build stores it.
    Corrupt,
    /// Anything else (a statement the server refused).
    Other,
}

/// A failure of PostgreSQL while doing something.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("PostgreSQL at {place}, while {doing}: {message}")]
pub struct PgError {
    /// The database, as `host:port/name`.
    pub place: String,
    /// What the caller was doing.
    pub doing: &'static str,
    /// What it means.
    pub fault: Fault,
    /// The server's (or the client's) words.
    pub message: String,
}

impl PgError {
    /// `e`, met at `place` while `doing`.
    pub fn of(e: &postgres::Error, place: &str, doing: &'static str) -> PgError {
        PgError {
            place: place.to_string(),
            doing,
            fault: fault(e),
            message: message(e),
        }
    }
}

/// What a client error means.
pub fn fault(e: &postgres::Error) -> Fault {
    match e.code() {
        Some(code) => {
            let class = &code.code()[..2];
            if *code == SqlState::UNIQUE_VIOLATION
                || *code == SqlState::FOREIGN_KEY_VIOLATION
                || *code == SqlState::EXCLUSION_VIOLATION
                || *code == SqlState::T_R_SERIALIZATION_FAILURE
                || *code == SqlState::T_R_DEADLOCK_DETECTED
            {
                Fault::Conflict
            } else if matches!(class, "08" | "53" | "57" | "58") {
                Fault::Unavailable
            } else if matches!(class, "22" | "XX") {
                Fault::Corrupt
            } else {
                Fault::Other
            }
        }
        None if e.is_closed() || io_underneath(e) => Fault::Unavailable,
        None => Fault::Other,
    }
}

/// A client error in words: the server's message and detail, or the client's with its cause.
pub fn message(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("{}: {detail}", db.message()),
            None => db.message().to_string(),
        },
        None => match std::error::Error::source(e) {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        },
    }
}

fn io_underneath(e: &postgres::Error) -> bool {
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        if c.is::<std::io::Error>() {
            return true;
        }
        cause = c.source();
    }
    false
}
