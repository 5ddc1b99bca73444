//! Human approvals: requested once per tool call, decided at most once (`UPDATE … WHERE state =
//! pending`), rejected when they expire or their task is cancelled.
//!
//! States and the system's own deciders are enums ([`ApprovalState`], [`SystemDecider`]); their names
//! are what the database stores.
//!
//! Options and outcomes: each option carries what choosing it means ([`ApprovalOption`]), so a model
//! may word its choices as it likes ("Yes, ship it" / "Not yet"). Options are offered as plain labels
//! or as `{label, outcome}` ([`OfferedOption`]); plain labels are resolved once, when the approval is
//! requested ([`resolve_options`]): `approve` and `reject` mean themselves, otherwise the first plain
//! label is the go-ahead (unless another option already approves) and the others are rejections.
//! The resolved options are stored; rows written before outcomes existed (a list of plain strings)
//! are resolved by the same rule when read, and their decided `state` is kept as it was recorded.
//! A decision records the chosen label in `decision` and its outcome in `state`; a label that is not
//! an option, a timeout, a cancellation or an error is a rejection (fail closed).

use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};

use super::{Db, StoreError, TaskId, TaskRecord, exec, now_ms, row, sql};

/// Where an approval is: waiting, or decided one way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalState {
    /// Waiting for a human.
    Pending,
    /// Approved (the option chosen is a go-ahead).
    Approved,
    /// Rejected: a rejecting option, an expiry, a cancellation or an error.
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

    pub(super) fn parse(text: &str) -> Option<Self> {
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

/// What choosing an option means.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptionOutcome {
    /// The go-ahead: the task continues as approved.
    Approve,
    /// A rejection.
    Reject,
}

impl OptionOutcome {
    /// The wire name (`approve` / `reject`), also the plain label that always means it.
    pub fn as_str(self) -> &'static str {
        match self {
            OptionOutcome::Approve => "approve",
            OptionOutcome::Reject => "reject",
        }
    }

    /// The outcome a plain label names by itself (`approve` / `reject`, any case), if any.
    fn named_by(label: &str) -> Option<OptionOutcome> {
        [OptionOutcome::Approve, OptionOutcome::Reject]
            .into_iter()
            .find(|o| label.trim().eq_ignore_ascii_case(o.as_str()))
    }
}

/// An option as stored: its label (the button, and the decision recorded) and its outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalOption {
    /// What people see and choose.
    pub label: String,
    /// What choosing it means.
    pub outcome: OptionOutcome,
}

/// An option as offered: a plain label (its outcome follows from [`resolve_options`]'s rule), or a
/// label with its outcome. Deserializes from a JSON string or `{"label", "outcome"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum OfferedOption {
    /// A label whose outcome follows from the rule.
    Plain(String),
    /// A label with its outcome.
    With(ApprovalOption),
}

impl OfferedOption {
    /// Its label.
    pub fn label(&self) -> &str {
        match self {
            OfferedOption::Plain(label) => label,
            OfferedOption::With(option) => &option.label,
        }
    }
}

impl From<&str> for OfferedOption {
    fn from(label: &str) -> Self {
        OfferedOption::Plain(label.to_string())
    }
}

impl From<String> for OfferedOption {
    fn from(label: String) -> Self {
        OfferedOption::Plain(label)
    }
}

impl<'de> Deserialize<'de> for OfferedOption {
    /// By hand rather than `untagged`, so a malformed option gets an error that says what an option
    /// may be (the model reads it).
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let shape = "an option is a string, or an object {\"label\": \"...\", \"outcome\": \"approve\" | \"reject\"}";
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::String(label) => Ok(OfferedOption::Plain(label)),
            value @ serde_json::Value::Object(_) => serde_json::from_value(value)
                .map(OfferedOption::With)
                .map_err(|e| D::Error::custom(format!("{shape}: {e}"))),
            other => Err(D::Error::custom(format!("{shape}, not `{other}`"))),
        }
    }
}

/// Resolve offered options to stored ones: an option with an outcome keeps it; a plain `approve` or
/// `reject` (any case) means itself; of the other plain labels, the first is the go-ahead when no
/// option approves otherwise, and the rest are rejections. Never fails: [`check_options`] says what
/// a caller should have offered.
pub fn resolve_options(offered: &[OfferedOption]) -> Vec<ApprovalOption> {
    let explicit = |o: &OfferedOption| match o {
        OfferedOption::Plain(label) => OptionOutcome::named_by(label),
        OfferedOption::With(option) => Some(option.outcome),
    };
    let mut go_ahead_taken = offered
        .iter()
        .any(|o| explicit(o) == Some(OptionOutcome::Approve));
    offered
        .iter()
        .map(|o| {
            let outcome = explicit(o).unwrap_or_else(|| {
                if go_ahead_taken {
                    OptionOutcome::Reject
                } else {
                    go_ahead_taken = true;
                    OptionOutcome::Approve
                }
            });
            ApprovalOption {
                label: o.label().to_string(),
                outcome,
            }
        })
        .collect()
}

/// Check options a model (or a caller) offers: at least two, labels non-empty and distinct (without
/// regard to case: people may type them), `approve` / `reject` not given the other outcome, and at
/// least one go-ahead and one rejection once resolved. The error is written for the model.
pub fn check_options(offered: &[OfferedOption]) -> Result<(), String> {
    if offered.len() < 2 {
        return Err("`options` must offer at least two choices".into());
    }
    for (i, option) in offered.iter().enumerate() {
        let label = option.label();
        if label.trim().is_empty() {
            return Err(format!("`options[{i}]` has an empty label"));
        }
        if let Some(j) = offered[..i]
            .iter()
            .position(|o| o.label().trim().eq_ignore_ascii_case(label.trim()))
        {
            return Err(format!(
                "`options[{i}]` repeats the label `{label}` of `options[{j}]`; labels must differ"
            ));
        }
        if let OfferedOption::With(o) = option
            && let Some(named) = OptionOutcome::named_by(&o.label)
            && named != o.outcome
        {
            return Err(format!(
                "`options[{i}]` is labelled `{label}` but its outcome is `{}`; use another label",
                o.outcome.as_str()
            ));
        }
    }
    let resolved = resolve_options(offered);
    for (outcome, what) in [
        (OptionOutcome::Approve, "a go-ahead"),
        (OptionOutcome::Reject, "a rejection"),
    ] {
        if !resolved.iter().any(|o| o.outcome == outcome) {
            return Err(format!(
                "`options` must include {what} (`\"outcome\": \"{}\"`); as given they resolve to {}",
                outcome.as_str(),
                resolved
                    .iter()
                    .map(|o| format!("`{}` → {}", o.label, o.outcome.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    Ok(())
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
    /// The choices offered, each with its outcome.
    pub options: Vec<ApprovalOption>,
    /// Pending, approved or rejected.
    pub state: ApprovalState,
    /// The label of the option chosen (`reject` when the system decided).
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

    /// The options' labels, in order.
    pub fn labels(&self) -> Vec<String> {
        self.options.iter().map(|o| o.label.clone()).collect()
    }

    /// The option labelled `label`, if any.
    pub fn option(&self, label: &str) -> Option<&ApprovalOption> {
        self.options.iter().find(|o| o.label == label)
    }

    /// How it was decided, as people read it: `Approved: Yes, ship it — by ana`,
    /// `Rejected: No — by ana`, `Rejected: no decision in time`; `None` while pending.
    pub fn decision_text(&self) -> Option<String> {
        let verdict = match self.state {
            ApprovalState::Pending => return None,
            ApprovalState::Approved => "Approved",
            ApprovalState::Rejected => "Rejected",
        };
        Some(match self.system_decider() {
            Some(SystemDecider::Timeout) => format!("{verdict}: no decision in time"),
            Some(SystemDecider::Cancelled) => format!("{verdict}: the request was cancelled"),
            Some(SystemDecider::Error) => format!("{verdict}: the approval could not be processed"),
            None => format!(
                "{verdict}: {} — by {}",
                self.decision.as_deref().unwrap_or("?"),
                self.decided_by.as_deref().unwrap_or("?")
            ),
        })
    }
}

/// The decision as recall memory records it: the label, with its outcome when the label does not
/// say it (`Yes, ship it (approved)`).
pub(super) fn recalled_decision(label: &str, state: ApprovalState) -> String {
    if OptionOutcome::named_by(label).is_some() {
        label.to_string()
    } else {
        format!("{label} ({})", state.as_str())
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
        // Resolved when requested; rows from before outcomes were stored hold plain labels.
        options: resolve_options(
            &serde_json::from_str::<Vec<OfferedOption>>(&options)
                .map_err(|e| corrupt(7, format!("approval options: {e}")))?,
        ),
        state: ApprovalState::parse(&state)
            .ok_or_else(|| corrupt(8, format!("unknown approval state `{state}`")))?,
        decision: row.get(9)?,
        decided_by: row.get(10)?,
        created_at: row.get(11)?,
        expires_at: row.get(12)?,
        decided_at: row.get(13)?,
    })
}

pub(super) const APPROVAL_COLUMNS: &str = "id, task_id, root_id, conversation_id, agent, tool_use_id, summary, options, \
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
    /// resumed session does not ask twice). The flag says whether it was created now. The options are
    /// stored resolved ([`resolve_options`]), each with its outcome.
    pub fn request_approval(
        &self,
        task: &TaskRecord,
        tool_use_id: &str,
        summary: &str,
        options: &[OfferedOption],
        timeout: Duration,
    ) -> Result<(Approval, bool), StoreError> {
        let options = resolve_options(options);
        let options_json = serde_json::to_string(&options).map_err(|e| StoreError::Encode {
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
            let labels: Vec<String> = options.iter().map(|o| o.label.clone()).collect();
            super::recall::approval_requested(&tx, task.id, summary, &labels, now)?;
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

    /// Every approval of root `root_id`'s tree, pending or decided, oldest first (the request
    /// timeline's approval waits).
    pub fn tree_approvals(&self, root_id: TaskId) -> Result<Vec<Approval>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE root_id = ?1 ORDER BY id"
            ))
            .map_err(sql("listing approvals"))?;
        let rows = stmt
            .query_map([root_id], approval_from_row)
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

    /// Decide an approval once. `decision` is the label of one of its options, and that option's
    /// outcome becomes the state; a label that is not an option counts as a rejection (the system
    /// rejects with `reject`). An expired approval is rejected instead of recorded.
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
        } else if approval
            .option(decision)
            .is_some_and(|o| o.outcome == OptionOutcome::Approve)
        {
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
            &recalled_decision(decision, state),
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
        let options: [OfferedOption; 2] = ["approve".into(), "reject".into()];
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
    fn offered(json: serde_json::Value) -> Vec<OfferedOption> {
        serde_json::from_value(json).unwrap()
    }

    fn outcomes(json: serde_json::Value) -> Vec<(String, &'static str)> {
        resolve_options(&offered(json))
            .into_iter()
            .map(|o| (o.label, o.outcome.as_str()))
            .collect()
    }

    #[test]
    fn plain_labels_resolve_first_as_go_ahead_and_keywords_as_themselves() {
        let pairs = |list: &[(&str, &'static str)]| {
            list.iter()
                .map(|(l, o)| (l.to_string(), *o))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            outcomes(serde_json::json!(["Yes, ship it", "No"])),
            pairs(&[("Yes, ship it", "approve"), ("No", "reject")])
        );
        assert_eq!(
            outcomes(serde_json::json!(["approve", "reject"])),
            pairs(&[("approve", "approve"), ("reject", "reject")])
        );
        // The keywords mean themselves wherever they stand; then no plain label is the go-ahead.
        assert_eq!(
            outcomes(serde_json::json!(["Not now", "Approve"])),
            pairs(&[("Not now", "reject"), ("Approve", "approve")])
        );
        assert_eq!(
            outcomes(serde_json::json!(["reject", "Ship it", "Ship Friday"])),
            pairs(&[
                ("reject", "reject"),
                ("Ship it", "approve"),
                ("Ship Friday", "reject")
            ])
        );
        // Options may carry their outcome, beside plain labels.
        assert_eq!(
            outcomes(serde_json::json!([
                "Hold on",
                {"label": "Ship now", "outcome": "approve"},
                {"label": "Ship Friday", "outcome": "approve"}
            ])),
            pairs(&[
                ("Hold on", "reject"),
                ("Ship now", "approve"),
                ("Ship Friday", "approve")
            ])
        );
    }

    #[test]
    fn offered_options_are_checked_with_errors_for_the_model() {
        assert_eq!(
            check_options(&offered(serde_json::json!(["Yes, ship it", "No"]))),
            Ok(())
        );
        let error = |json| check_options(&offered(json)).unwrap_err();
        assert!(error(serde_json::json!(["Yes"])).contains("at least two"));
        assert!(error(serde_json::json!(["Yes", " "])).contains("`options[1]` has an empty label"));
        assert!(error(serde_json::json!(["Yes", "yes"])).contains("repeats the label"));
        assert!(
            error(serde_json::json!([{"label": "Approve", "outcome": "reject"}, "No"]))
                .contains("labelled `Approve` but its outcome is `reject`")
        );
        let none_approve = error(serde_json::json!([
            {"label": "No", "outcome": "reject"},
            {"label": "Never", "outcome": "reject"}
        ]));
        assert!(
            none_approve.contains("must include a go-ahead")
                && none_approve.contains("`No` → reject"),
            "{none_approve}"
        );
        assert!(
            error(serde_json::json!(["approve", {"label": "Sure", "outcome": "approve"}]))
                .contains("must include a rejection")
        );
        // Once an option approves, the other plain labels reject.
        assert_eq!(
            check_options(&offered(serde_json::json!(["approve", "Not now"]))),
            Ok(())
        );
        let shape = serde_json::from_value::<Vec<OfferedOption>>(serde_json::json!([
            {"label": "Yes", "outcome": "maybe"}
        ]))
        .unwrap_err()
        .to_string();
        assert!(
            shape.contains("an option is a string, or an object"),
            "{shape}"
        );
        let shape = serde_json::from_value::<Vec<OfferedOption>>(serde_json::json!([3]))
            .unwrap_err()
            .to_string();
        assert!(shape.contains("not `3`"), "{shape}");
    }

    #[test]
    fn the_chosen_option_decides_the_outcome_and_is_stored() {
        let store = Db::in_memory().unwrap();
        let r = root(&store, "c");
        let task = store.task(r).unwrap();
        let options = offered(serde_json::json!(["Yes, ship it", "No"]));
        let ask = |id: &str| {
            store
                .request_approval(&task, id, "ship?", &options, Duration::from_secs(60))
                .unwrap()
                .0
        };
        let (yes, no, stranger) = (ask("t1"), ask("t2"), ask("t3"));
        assert_eq!(yes.options[0].outcome, OptionOutcome::Approve);
        let Decided::Recorded(yes) = store.decide(yes.id, "Yes, ship it", "ana").unwrap() else {
            panic!("not recorded")
        };
        assert_eq!(yes.state, ApprovalState::Approved);
        assert_eq!(yes.decision.as_deref(), Some("Yes, ship it"));
        assert_eq!(
            yes.decision_text().as_deref(),
            Some("Approved: Yes, ship it — by ana")
        );
        // Read back, the outcome and the label are what was recorded.
        let read = store.approval(yes.id).unwrap().unwrap();
        assert_eq!(
            (read.state, read.decision),
            (ApprovalState::Approved, Some("Yes, ship it".into()))
        );
        let Decided::Recorded(no) = store.decide(no.id, "No", "ana").unwrap() else {
            panic!("not recorded")
        };
        assert_eq!(no.decision_text().as_deref(), Some("Rejected: No — by ana"));
        // A label that is not an option fails closed.
        let Decided::Recorded(stranger) = store.decide(stranger.id, "approve", "ana").unwrap()
        else {
            panic!("not recorded")
        };
        assert_eq!(stranger.state, ApprovalState::Rejected);
        // The system's rejections stay rejections, shown as such.
        let timed_out = store
            .request_approval(&task, "t4", "ship?", &options, Duration::ZERO)
            .unwrap()
            .0;
        let Decided::Expired(timed_out) =
            store.decide(timed_out.id, "Yes, ship it", "ana").unwrap()
        else {
            panic!("not expired")
        };
        assert_eq!(
            timed_out.decision_text().as_deref(),
            Some("Rejected: no decision in time")
        );
        let rows = recall_rows(&store);
        assert!(
            rows.iter()
                .any(|(_, t)| t == "Approval decided: Yes, ship it (approved), by ana: ship?"),
            "{rows:?}"
        );
        assert!(
            rows.iter()
                .any(|(_, t)| t == "Approval decided: No (rejected), by ana: ship?"),
            "{rows:?}"
        );
    }

    #[test]
    fn approvals_stored_before_outcomes_are_read_with_the_rule_and_keep_their_state() {
        let store = Db::in_memory().unwrap();
        let r = root(&store, "c");
        let task = store.task(r).unwrap();
        let options = offered(serde_json::json!(["x", "y"]));
        let pending = store
            .request_approval(&task, "t1", "ship?", &options, Duration::from_secs(60))
            .unwrap()
            .0;
        let decided = store
            .request_approval(&task, "t2", "ship?", &options, Duration::from_secs(60))
            .unwrap()
            .0;
        // As an older build wrote them: plain labels; the decided one was (wrongly) rejected then.
        {
            let conn = store.conn();
            conn.execute(
                "UPDATE approvals SET options = '[\"Yes, ship it\",\"No\"]'",
                [],
            )
            .unwrap();
            conn.execute(
                "UPDATE approvals SET state = 'rejected', decision = 'Yes, ship it', decided_by = 'ana', \
                 decided_at = 1 WHERE id = ?1",
                [decided.id],
            )
            .unwrap();
        }
        let old = store.approval(decided.id).unwrap().unwrap();
        assert_eq!(
            old.state,
            ApprovalState::Rejected,
            "the recorded state is kept"
        );
        assert_eq!(old.labels(), ["Yes, ship it", "No"]);
        let pending = store.approval(pending.id).unwrap().unwrap();
        assert_eq!(pending.options[0].outcome, OptionOutcome::Approve);
        assert!(matches!(
            store.decide(pending.id, "Yes, ship it", "ana").unwrap(),
            Decided::Recorded(a) if a.state == ApprovalState::Approved
        ));
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
        let options: [OfferedOption; 2] = ["approve".into(), "reject".into()];
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
                    trace: None,
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
