//! Human approvals on PostgreSQL: the SQL of `store/approvals.rs`, in PostgreSQL's dialect, with
//! the same rules (options resolved once when requested, a label that is not an option rejects, an
//! expired approval is rejected by the system) and the same recall rows.
//!
//! Several nodes share the table, so the promises hold across them:
//! - one approval per tool call: [`request_approval`] inserts `ON CONFLICT (task_id, tool_use_id)
//!   DO NOTHING` and reads the row back; only the transaction whose insert took reports it as new
//!   (and records the request in recall memory). A concurrent insert of the same key waits on the
//!   unique index for the first to commit, then reads the first's row.
//! - decided at most once: [`decide`] locks the approval's row `FOR UPDATE` before it looks at its
//!   state, and changes it with `UPDATE … WHERE id = $1 AND state = 'pending'`, so a second decider
//!   (on any node) waits for the first's commit, then finds it decided.
//! - the system's rejections ([`reject_pending`]: timeouts, cancellations) are one conditional
//!   `UPDATE … WHERE state = 'pending' RETURNING`, locking exactly the rows it changes; each is
//!   recorded in recall memory by the one transaction that changed it.
//!
//! Rows locked: [`request_approval`] the new row (or, waiting, the unique key); [`decide`] the
//! approval's row; [`reject_pending`] the pending rows matching its filter.

use std::time::Duration;

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::super::approvals::{APPROVAL_COLUMNS, recalled_decision};
use super::super::{
    Approval, ApprovalState, DbFailure, DbFault, Decided, OfferedOption, OptionOutcome, StoreError,
    SystemDecider, TaskId, TaskRecord, now_ms, resolve_options,
};
use super::recall;
use super::sql::{Tx, exec, get, one, opt, rows};

/// A value of an approval's row that does not read as what it holds (a corrupt row, never a panic).
fn corrupt(doing: &'static str, message: String) -> StoreError {
    StoreError::Database {
        doing,
        source: DbFailure {
            fault: DbFault::Corrupt,
            message,
        },
    }
}

/// An approval row (the columns of [`APPROVAL_COLUMNS`], in order). The options are resolved as on
/// SQLite: rows written before outcomes were stored hold plain labels, resolved by the same rule.
fn approval_from_row(row: &Row, doing: &'static str) -> Result<Approval, StoreError> {
    let options: String = get(row, 7, doing)?;
    let state: String = get(row, 8, doing)?;
    let offered: Vec<OfferedOption> = serde_json::from_str(&options)
        .map_err(|e| corrupt(doing, format!("approval options: {e}")))?;
    Ok(Approval {
        id: get(row, 0, doing)?,
        task_id: get(row, 1, doing)?,
        root_id: get(row, 2, doing)?,
        conversation_id: get(row, 3, doing)?,
        agent: get(row, 4, doing)?,
        tool_use_id: get(row, 5, doing)?,
        summary: get(row, 6, doing)?,
        options: resolve_options(&offered),
        state: ApprovalState::parse(&state)
            .ok_or_else(|| corrupt(doing, format!("unknown approval state `{state}`")))?,
        decision: get(row, 9, doing)?,
        decided_by: get(row, 10, doing)?,
        created_at: get(row, 11, doing)?,
        expires_at: get(row, 12, doing)?,
        decided_at: get(row, 13, doing)?,
    })
}

/// Every row of `rows`, decoded.
fn approvals_of(list: &[Row], doing: &'static str) -> Result<Vec<Approval>, StoreError> {
    list.iter().map(|r| approval_from_row(r, doing)).collect()
}

/// One approval.
pub(super) async fn approval(
    c: &impl GenericClient,
    id: i64,
) -> Result<Option<Approval>, StoreError> {
    const DOING: &str = "reading an approval";
    opt(
        c,
        DOING,
        &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = $1"),
        &[&id],
    )
    .await?
    .map(|r| approval_from_row(&r, DOING))
    .transpose()
}

/// Approvals still waiting for a human, oldest first.
pub(super) async fn pending_approvals(c: &impl GenericClient) -> Result<Vec<Approval>, StoreError> {
    const DOING: &str = "listing approvals";
    let list = rows(
        c,
        DOING,
        &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE state = $1 ORDER BY id"),
        &[&ApprovalState::Pending.as_str()],
    )
    .await?;
    approvals_of(&list, DOING)
}

/// Every approval of root `root_id`'s tree, pending or decided, oldest first.
pub(super) async fn tree_approvals(
    c: &impl GenericClient,
    root_id: TaskId,
) -> Result<Vec<Approval>, StoreError> {
    const DOING: &str = "listing approvals";
    let list = rows(
        c,
        DOING,
        &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE root_id = $1 ORDER BY id"),
        &[&root_id],
    )
    .await?;
    approvals_of(&list, DOING)
}

/// The latest `limit` approvals, pending or decided, newest first.
pub(super) async fn recent_approvals(
    c: &impl GenericClient,
    limit: u32,
) -> Result<Vec<Approval>, StoreError> {
    const DOING: &str = "listing approvals";
    let list = rows(
        c,
        DOING,
        &format!("SELECT {APPROVAL_COLUMNS} FROM approvals ORDER BY id DESC LIMIT $1"),
        &[&i64::from(limit)],
    )
    .await?;
    approvals_of(&list, DOING)
}

/// Record a pending approval for a task's tool call, or return the existing one for that call (so a
/// resumed session, or another node, does not ask twice); whether it was created now. The options
/// are stored resolved. Only the request that created it is recorded in recall memory.
pub(super) async fn request_approval(
    t: &Tx<'_>,
    task: &TaskRecord,
    tool_use_id: &str,
    summary: &str,
    options: &[OfferedOption],
    timeout: Duration,
) -> Result<(Approval, bool), StoreError> {
    const DOING: &str = "requesting an approval";
    let options = resolve_options(options);
    let options_json = serde_json::to_string(&options).map_err(|e| StoreError::Encode {
        what: "approval options",
        task: task.id,
        message: e.to_string(),
    })?;
    let now = now_ms();
    let expires = now.saturating_add(i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX));
    let created = exec(
        t.c(),
        DOING,
        "INSERT INTO approvals (task_id, root_id, conversation_id, agent, tool_use_id, summary, \
         options, state, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
         ON CONFLICT (task_id, tool_use_id) DO NOTHING",
        &[
            &task.id,
            &task.root_id,
            &task.conversation_id,
            &task.agent,
            &tool_use_id,
            &summary,
            &options_json,
            &ApprovalState::Pending.as_str(),
            &now,
            &expires,
        ],
    )
    .await?
        == 1;
    // A new statement sees the row whoever inserted it: ours, or a concurrent request's that the
    // insert above waited for.
    let row = one(
        t.c(),
        DOING,
        &format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE task_id = $1 AND tool_use_id = $2"
        ),
        &[&task.id, &tool_use_id],
    )
    .await?;
    let approval = approval_from_row(&row, DOING)?;
    if created {
        let labels: Vec<String> = options.iter().map(|o| o.label.clone()).collect();
        recall::approval_requested(t, task.id, summary, &labels, now).await?;
    }
    Ok((approval, created))
}

/// Decide an approval once: `decision` is the label of one of its options, and that option's
/// outcome becomes the state; a label that is not an option rejects. An expired approval is
/// rejected by the system instead. The row is locked `FOR UPDATE` before its state is read, so of
/// racing deciders (on any node) exactly one records; the others find it already decided.
pub(super) async fn decide(
    t: &Tx<'_>,
    id: i64,
    decision: &str,
    by: &str,
) -> Result<Decided, StoreError> {
    const DOING: &str = "deciding an approval";
    let Some(row) = opt(
        t.c(),
        DOING,
        &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = $1 FOR UPDATE"),
        &[&id],
    )
    .await?
    else {
        return Ok(Decided::NotFound);
    };
    let approval = approval_from_row(&row, DOING)?;
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
    let updated = opt(
        t.c(),
        DOING,
        &format!(
            "UPDATE approvals SET state = $2, decision = $3, decided_by = $4, decided_at = $5 \
             WHERE id = $1 AND state = $6 RETURNING {APPROVAL_COLUMNS}"
        ),
        &[
            &id,
            &state.as_str(),
            &decision,
            &by,
            &now,
            &ApprovalState::Pending.as_str(),
        ],
    )
    .await?;
    // Under the row lock the state cannot have moved; the condition is the promise's second guard.
    let Some(updated) = updated else {
        return Ok(match self::approval(t.c(), id).await? {
            Some(now_decided) => Decided::AlreadyDecided(now_decided),
            None => Decided::NotFound,
        });
    };
    let updated = approval_from_row(&updated, DOING)?;
    let author = if expired {
        super::super::recall::SYSTEM_AUTHOR
    } else {
        by
    };
    recall::approval_decided(
        t,
        approval.task_id,
        &approval.summary,
        &recalled_decision(decision, state),
        by,
        author,
        now,
    )
    .await?;
    Ok(if expired {
        Decided::Expired(updated)
    } else {
        Decided::Recorded(updated)
    })
}

/// Reject the pending approvals matching `filter` (SQL over `$1` = `value`) on the system's behalf, in
/// the caller's transaction, recording each decision in recall memory. How many were rejected.
///
/// One conditional `UPDATE … WHERE state = 'pending' RETURNING`: it locks and changes only rows still
/// pending, so a row a human (or another node) decided meanwhile is neither rejected nor recorded,
/// and each rejection is recorded once.
pub(super) async fn reject_pending(
    t: &Tx<'_>,
    filter: &str,
    value: &(dyn ToSql + Sync),
    by: SystemDecider,
    now: i64,
) -> Result<usize, StoreError> {
    const DOING: &str = "rejecting pending approvals";
    let changed = rows(
        t.c(),
        DOING,
        &format!(
            "UPDATE approvals SET state = $2, decision = 'reject', decided_by = $3, decided_at = $4 \
             WHERE {filter} AND state = $5 RETURNING id, task_id, summary"
        ),
        &[
            value,
            &ApprovalState::Rejected.as_str(),
            &by.as_str(),
            &now,
            &ApprovalState::Pending.as_str(),
        ],
    )
    .await?;
    let mut rejected = changed
        .iter()
        .map(|r| -> Result<(i64, i64, String), StoreError> {
            Ok((get(r, 0, DOING)?, get(r, 1, DOING)?, get(r, 2, DOING)?))
        })
        .collect::<Result<Vec<_>, _>>()?;
    // RETURNING has no order; recall memory records them in the approvals' order, as on SQLite.
    rejected.sort_by_key(|(id, _, _)| *id);
    for (_, task, summary) in &rejected {
        recall::approval_decided(
            t,
            *task,
            summary,
            "reject",
            by.as_str(),
            super::super::recall::SYSTEM_AUTHOR,
            now,
        )
        .await?;
    }
    Ok(rejected.len())
}
