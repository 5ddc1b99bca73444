//! Human approvals: requested once per tool call, decided at most once (`UPDATE … WHERE state =
//! pending`), rejected when they expire or their task is cancelled.
//!
//! States and the system's own deciders are enums ([`ApprovalState`], [`SystemDecider`]); their names
//! are what the database stores.

use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::Serialize;

use super::{Db, StoreError, TaskId, TaskRecord, exec, now_ms, row, sql};

/// Where an approval is: waiting, or decided one way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalState {
    /// Waiting for a human.
    Pending,
    /// Approved (the decision was `approve`).
    Approved,
    /// Rejected: any other decision, an expiry, a cancellation or an error.
    Rejected,
}

impl ApprovalState {
    /// Every state.
    pub const ALL: [ApprovalState; 3] = [
        ApprovalState::Pending,
        ApprovalState::Approved,
        ApprovalState::Rejected,
    ];

    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Approved => "approved",
            ApprovalState::Rejected => "rejected",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        ApprovalState::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// Who rejects an approval when no human decides it, as recorded in `decided_by`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SystemDecider {
    /// `approvalTimeout` passed.
    Timeout,
    /// Its task (or an ancestor) was cancelled.
    Cancelled,
    /// Waiting for it failed (fail closed).
    Error,
}

impl SystemDecider {
    /// Every system decider.
    pub const ALL: [SystemDecider; 3] = [
        SystemDecider::Timeout,
        SystemDecider::Cancelled,
        SystemDecider::Error,
    ];

    /// The name stored in `decided_by` and shown to people.
    pub fn as_str(self) -> &'static str {
        match self {
            SystemDecider::Timeout => "timeout",
            SystemDecider::Cancelled => "cancelled",
            SystemDecider::Error => "error",
        }
    }
}

/// A human approval.
#[derive(Clone, Debug, Serialize)]
pub struct Approval {
    /// Its id.
    pub id: i64,
    /// The task that asked.
    pub task_id: TaskId,
    /// That task's root.
    pub root_id: TaskId,
    /// The conversation.
    pub conversation_id: String,
    /// The agent that asked.
    pub agent: String,
    /// The tool call waiting for it.
    pub tool_use_id: String,
    /// What is to be approved.
    pub summary: String,
    /// The choices offered.
    pub options: Vec<String>,
    /// Pending, approved or rejected.
    pub state: ApprovalState,
    /// The option chosen.
    pub decision: Option<String>,
    /// Who decided: a person's id, or a [`SystemDecider`]'s name (see [`Approval::system_decider`]).
    pub decided_by: Option<String>,
    /// Created, ms since epoch.
    pub created_at: i64,
    /// Undecided after this → rejected.
    pub expires_at: i64,
    /// Decided, ms since epoch.
    pub decided_at: Option<i64>,
}

/// Reject the pending approvals matching `filter` (SQL over `?1` = `value`) on the system's behalf, in
/// the caller's transaction, and record each decision in recall memory. Returns how many were
/// rejected; the caller wakes the recall indexer after its commit.
pub(super) fn reject_pending(
    conn: &rusqlite::Connection,
    filter: &str,
    value: impl rusqlite::ToSql,
    by: SystemDecider,
    now: i64,
) -> Result<usize, StoreError> {
    let context = "rejecting pending approvals";
    let pending: Vec<(TaskId, String)> = {
        let mut stmt = conn
            .prepare(&format!(
                "SELECT task_id, summary FROM approvals WHERE {filter} AND state = ?2 ORDER BY id"
            ))
            .map_err(sql(context))?;
        let rows = stmt
            .query_map(params![value, ApprovalState::Pending.as_str()], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map_err(sql(context))?;
        rows.collect::<Result<_, _>>().map_err(sql(context))?
    };
    exec(
        conn,
        &format!(
            "UPDATE approvals SET state = ?2, decision = 'reject', decided_by = ?3, decided_at = ?4 \
             WHERE {filter} AND state = ?5"
        ),
        params![
            value,
            ApprovalState::Rejected.as_str(),
            by.as_str(),
            now,
            ApprovalState::Pending.as_str()
        ],
    )
    .map_err(sql(context))?;
    for (task, summary) in &pending {
        super::recall::approval_decided(
            conn,
            *task,
            summary,
            "reject",
            by.as_str(),
            super::recall::SYSTEM_AUTHOR,
            now,
        )?;
    }
    Ok(pending.len())
}

impl Approval {
    /// The system decider that rejected it, when no human decided.
    pub fn system_decider(&self) -> Option<SystemDecider> {
        let by = self.decided_by.as_deref()?;
        SystemDecider::ALL.into_iter().find(|d| d.as_str() == by)
    }
}

fn approval_from_row(row: &Row<'_>) -> rusqlite::Result<Approval> {
    let options: String = row.get(7)?;
    let state: String = row.get(8)?;
    let corrupt = |index, message: String| {
        rusqlite::Error::FromSqlConversionFailure(
            index,
            rusqlite::types::Type::Text,
            message.into(),
        )
    };
    Ok(Approval {
        id: row.get(0)?,
        task_id: row.get(1)?,
        root_id: row.get(2)?,
        conversation_id: row.get(3)?,
        agent: row.get(4)?,
        tool_use_id: row.get(5)?,
        summary: row.get(6)?,
        options: serde_json::from_str(&options)
            .map_err(|e| corrupt(7, format!("approval options: {e}")))?,
        state: ApprovalState::parse(&state)
            .ok_or_else(|| corrupt(8, format!("unknown approval state `{state}`")))?,
        decision: row.get(9)?,
        decided_by: row.get(10)?,
        created_at: row.get(11)?,
        expires_at: row.get(12)?,
        decided_at: row.get(13)?,
    })
}

const APPROVAL_COLUMNS: &str = "id, task_id, root_id, conversation_id, agent, tool_use_id, summary, options, \
     state, decision, decided_by, created_at, expires_at, decided_at";

/// The result of trying to decide an approval.
#[derive(Clone, Debug, PartialEq)]
pub enum Decided {
    /// Recorded.
    Recorded(Approval),
    /// It was already decided (by someone, a timeout or a cancellation).
    AlreadyDecided(Approval),
    /// It expired before the decision; it is now rejected.
    Expired(Approval),
    /// No such approval.
    NotFound,
}

impl PartialEq for Approval {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id && self.state == other.state && self.decision == other.decision
    }
}

impl Db {
    /// Record a pending approval for a task's tool call, or return the existing one for that call (so a
    /// resumed session does not ask twice). The flag says whether it was created now.
    pub fn request_approval(
        &self,
        task: &TaskRecord,
        tool_use_id: &str,
        summary: &str,
        options: &[String],
        timeout: Duration,
    ) -> Result<(Approval, bool), StoreError> {
        let options_json = serde_json::to_string(options).map_err(|e| StoreError::Encode {
            what: "approval options",
            task: task.id,
            message: e.to_string(),
        })?;
        let now = now_ms();
        let expires = now.saturating_add(timeout.as_millis() as i64);
        let mut conn = self.conn();
        let tx = conn.savepoint().map_err(sql("requesting an approval"))?;
        let created = exec(&tx,
            "INSERT OR IGNORE INTO approvals (task_id, root_id, conversation_id, agent, tool_use_id, summary, \
             options, state, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                task.id,
                task.root_id,
                task.conversation_id,
                task.agent,
                tool_use_id,
                summary,
                options_json,
                ApprovalState::Pending.as_str(),
                now,
                expires
            ],
        )
        .map_err(sql("requesting an approval"))?
            == 1;
        let approval = row(
            &tx,
            &format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE task_id = ?1 AND tool_use_id = ?2"
            ),
            params![task.id, tool_use_id],
            approval_from_row,
        )
        .map_err(sql("requesting an approval"))?;
        if created {
            super::recall::approval_requested(&tx, task.id, summary, options, now)?;
        }
        tx.commit().map_err(sql("requesting an approval"))?;
        if created {
            self.recall_appended();
        }
        Ok((approval, created))
    }

    /// One approval.
    pub fn approval(&self, id: i64) -> Result<Option<Approval>, StoreError> {
        row(
            &self.conn(),
            &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?1"),
            [id],
            approval_from_row,
        )
        .optional()
        .map_err(sql("reading an approval"))
    }

    /// Approvals still waiting for a human, oldest first.
    pub fn pending_approvals(&self) -> Result<Vec<Approval>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE state = ?1 ORDER BY id"
            ))
            .map_err(sql("listing approvals"))?;
        let rows = stmt
            .query_map([ApprovalState::Pending.as_str()], approval_from_row)
            .map_err(sql("listing approvals"))?;
        rows.collect::<Result<_, _>>()
            .map_err(sql("listing approvals"))
    }

    /// The latest `limit` approvals, pending or decided, newest first.
    pub fn recent_approvals(&self, limit: u32) -> Result<Vec<Approval>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals ORDER BY id DESC LIMIT ?1"
            ))
            .map_err(sql("listing approvals"))?;
        let rows = stmt
            .query_map([limit], approval_from_row)
            .map_err(sql("listing approvals"))?;
        rows.collect::<Result<_, _>>()
            .map_err(sql("listing approvals"))
    }

    /// Decide an approval once. `decision` is one of its options; anything other than `approve` counts
    /// as a rejection for the state column. An expired approval is rejected instead of recorded.
    pub fn decide(&self, id: i64, decision: &str, by: &str) -> Result<Decided, StoreError> {
        let mut conn = self.conn();
        let tx = conn.savepoint().map_err(sql("deciding an approval"))?;
        let read = |tx: &Connection| {
            row(
                tx,
                &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?1"),
                [id],
                approval_from_row,
            )
            .optional()
            .map_err(sql("deciding an approval"))
        };
        let Some(approval) = read(&tx)? else {
            return Ok(Decided::NotFound);
        };
        if approval.state != ApprovalState::Pending {
            return Ok(Decided::AlreadyDecided(approval));
        }
        let now = now_ms();
        let expired = now >= approval.expires_at;
        let (state, decision, by) = if expired {
            (
                ApprovalState::Rejected,
                "reject",
                SystemDecider::Timeout.as_str(),
            )
        } else if decision == "approve" {
            (ApprovalState::Approved, decision, by)
        } else {
            (ApprovalState::Rejected, decision, by)
        };
        exec(
            &tx,
            "UPDATE approvals SET state = ?2, decision = ?3, decided_by = ?4, decided_at = ?5 \
             WHERE id = ?1 AND state = ?6",
            params![
                id,
                state.as_str(),
                decision,
                by,
                now,
                ApprovalState::Pending.as_str()
            ],
        )
        .map_err(sql("deciding an approval"))?;
        let author = if expired {
            super::recall::SYSTEM_AUTHOR
        } else {
            by
        };
        super::recall::approval_decided(
            &tx,
            approval.task_id,
            &approval.summary,
            decision,
            by,
            author,
            now,
        )?;
        let updated = read(&tx)?.unwrap_or(approval);
        tx.commit().map_err(sql("deciding an approval"))?;
        self.recall_appended();
        Ok(if expired {
            Decided::Expired(updated)
        } else {
            Decided::Recorded(updated)
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::store::testing::root;

    #[test]
    fn approvals_are_decided_once_and_expire() {
        let store = Db::in_memory().unwrap();
        let r = root(&store, "c");
        let task = store.task(r).unwrap();
        let options = ["approve".to_string(), "reject".to_string()];
        let (a, created) = store
            .request_approval(&task, "t1", "ship?", &options, Duration::from_secs(60))
            .unwrap();
        assert!(created);
        // Asking again for the same tool call returns the same approval.
        let (again, created) = store
            .request_approval(&task, "t1", "ship?", &options, Duration::from_secs(60))
            .unwrap();
        assert_eq!(a.id, again.id);
        assert!(!created);
        assert!(
            matches!(store.decide(a.id, "approve", "u1").unwrap(), Decided::Recorded(x) if x.state == ApprovalState::Approved)
        );
        assert!(
            matches!(store.decide(a.id, "reject", "u2").unwrap(), Decided::AlreadyDecided(x) if x.decided_by.as_deref() == Some("u1"))
        );
        let (b, _) = store
            .request_approval(&task, "t2", "ship?", &options, Duration::ZERO)
            .unwrap();
        assert!(
            matches!(store.decide(b.id, "approve", "u1").unwrap(), Decided::Expired(x) if x.state == ApprovalState::Rejected)
        );
        assert_eq!(
            store.decide(999, "approve", "u1").unwrap(),
            Decided::NotFound
        );
    }
    /// (author, text) of every recall row, oldest first.
    fn recall_rows(store: &Db) -> Vec<(String, String)> {
        let conn = store.conn();
        let mut stmt = conn
            .prepare("SELECT author, text FROM recall_messages ORDER BY seq")
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn approvals_escalations_and_their_decisions_are_recorded_in_recall() {
        use crate::store::Ending;
        let store = Db::in_memory().unwrap();
        let r = root(&store, "c");
        let task = store.task(r).unwrap();
        let options = ["approve".to_string(), "reject".to_string()];
        let (a, _) = store
            .request_approval(&task, "t1", "ship v2", &options, Duration::from_secs(60))
            .unwrap();
        // Asked again for the same call (a resumed session): not recorded twice.
        store
            .request_approval(&task, "t1", "ship v2", &options, Duration::from_secs(60))
            .unwrap();
        store.decide(a.id, "approve", "slack:U42").unwrap();
        let (b, _) = store
            .request_approval(&task, "t2", "wire $5k", &options, Duration::ZERO)
            .unwrap();
        store.decide(b.id, "approve", "slack:U42").unwrap();
        store
            .request_approval(&task, "t3", "hire Ann", &options, Duration::from_secs(60))
            .unwrap();
        store.cancel_subtree(r, "stopped").unwrap();
        let r2 = {
            store.create_conversation("c2", "ceo").unwrap();
            store
                .create_task(&super::super::NewTask {
                    parent_id: None,
                    conversation_id: "c2",
                    agent: "ceo",
                    depth: 0,
                    tool_use_id: None,
                    tool_index: 0,
                    input: "go",
                    messages: &[],
                    author: None,
                })
                .unwrap()
        };
        store
            .finish(
                r2,
                Ending::Escalated(r#"{"type":"uncertainty","reason":"no budget left"}"#),
            )
            .unwrap();
        let rows = recall_rows(&store);
        let find = |text: &str| {
            rows.iter()
                .filter(|(_, t)| t.contains(text))
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(find("Asked for approval: ship v2").len(), 1, "{rows:?}");
        assert_eq!(
            find("Approval decided: approve, by slack:U42: ship v2"),
            vec![(
                "slack:U42".to_string(),
                "Approval decided: approve, by slack:U42: ship v2".to_string()
            )]
        );
        // Expired before it was decided: the system rejected it.
        assert_eq!(
            find("wire $5k")
                .iter()
                .filter(|(a, t)| a == "opc" && t.contains("reject, by timeout"))
                .count(),
            1,
            "{rows:?}"
        );
        assert_eq!(
            find("hire Ann")
                .iter()
                .filter(|(a, t)| a == "opc" && t.contains("reject, by cancelled"))
                .count(),
            1,
            "{rows:?}"
        );
        assert_eq!(
            find("Escalated by ceo (uncertainty): no budget left"),
            vec![(
                "ceo".to_string(),
                "Escalated by ceo (uncertainty): no budget left".to_string()
            )]
        );
    }
}
