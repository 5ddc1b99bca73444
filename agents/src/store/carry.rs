//! How an operation's arguments cross to the SQLite writer thread.
//!
//! Why: a write runs on the writer thread, after its caller's borrows may be gone, so each argument
//! travels owned ([`Carry::carry`], on the caller's thread) and is lent back to the `Db` function in
//! the very form the caller passed it ([`Carry::lend`]). With this, the backend forwards every
//! ordinary write in one line, whatever its arguments (see the `sqlite` file).
//!
//! Invariant: `lend(&carry(x))` is `x` (equal text, equal values): the writer does exactly what the
//! caller asked.

use std::time::Duration;

use super::{
    CallRecord, Ending, JobEnd, OfferedOption, TaskId, TaskRecord, TaskState, ToolCallRecord,
};

/// An argument of a write: owned for the trip to the writer thread, then lent as the caller gave it.
pub(super) trait Carry<'a>: Sized {
    /// What travels.
    type Owned: Send + 'static;
    /// Own it (on the caller's thread).
    fn carry(self) -> Self::Owned;
    /// The argument again, borrowed from what travelled.
    fn lend(owned: &'a Self::Owned) -> Self;
}

/// Values that are their own carriage.
macro_rules! carried_as_is {
    ($($t:ty),*) => {$(
        impl Carry<'_> for $t {
            type Owned = $t;
            fn carry(self) -> $t {
                self
            }
            fn lend(owned: &$t) -> $t {
                *owned
            }
        }
    )*};
}

carried_as_is!(
    TaskId,
    Option<TaskId>,
    u32,
    bool,
    Duration,
    TaskState,
    JobEnd
);

impl<'a> Carry<'a> for &'a str {
    type Owned = String;
    fn carry(self) -> String {
        self.to_string()
    }
    fn lend(owned: &'a String) -> &'a str {
        owned
    }
}

impl<'a> Carry<'a> for Option<&'a str> {
    type Owned = Option<String>;
    fn carry(self) -> Option<String> {
        self.map(str::to_string)
    }
    fn lend(owned: &'a Option<String>) -> Option<&'a str> {
        owned.as_deref()
    }
}

impl<'a> Carry<'a> for &'a [OfferedOption] {
    type Owned = Vec<OfferedOption>;
    fn carry(self) -> Vec<OfferedOption> {
        self.to_vec()
    }
    fn lend(owned: &'a Vec<OfferedOption>) -> &'a [OfferedOption] {
        owned
    }
}

/// Records passed by reference travel as clones.
macro_rules! carried_as_clone {
    ($($t:ty),*) => {$(
        impl<'a> Carry<'a> for &'a $t {
            type Owned = $t;
            fn carry(self) -> $t {
                self.clone()
            }
            fn lend(owned: &'a $t) -> &'a $t {
                owned
            }
        }
    )*};
}

carried_as_clone!(
    TaskRecord,
    CallRecord,
    ToolCallRecord,
    crate::llm::embed::EmbedCall
);

/// How a task ended, owned.
pub(super) enum OwnedEnding {
    Completed {
        output: String,
        summary: Option<String>,
    },
    Failed(String),
    Escalated(String),
    Cancelled(String),
}

impl<'a> Carry<'a> for Ending<'a> {
    type Owned = OwnedEnding;

    fn carry(self) -> OwnedEnding {
        match self {
            Ending::Completed { output, summary } => OwnedEnding::Completed {
                output: output.to_string(),
                summary: summary.map(str::to_string),
            },
            Ending::Failed(e) => OwnedEnding::Failed(e.to_string()),
            Ending::Escalated(e) => OwnedEnding::Escalated(e.to_string()),
            Ending::Cancelled(e) => OwnedEnding::Cancelled(e.to_string()),
        }
    }

    fn lend(owned: &'a OwnedEnding) -> Ending<'a> {
        match owned {
            OwnedEnding::Completed { output, summary } => Ending::Completed {
                output,
                summary: summary.as_deref(),
            },
            OwnedEnding::Failed(e) => Ending::Failed(e),
            OwnedEnding::Escalated(e) => Ending::Escalated(e),
            OwnedEnding::Cancelled(e) => Ending::Cancelled(e),
        }
    }
}
