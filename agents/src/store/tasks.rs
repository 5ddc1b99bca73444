//! Conversations and task records: creating tasks (one live root per conversation), reading them
//! back, and their saved session histories.
//!
//! Invariant: a task's session history is saved as JSON that always decodes back; a history that
//! cannot be encoded is an error, never an empty history.

use rusqlite::{OptionalExtension, Row, params};
use serde::Serialize;

use super::{Db, StoreError, TaskId, TaskState, exec, now_ms, row, sql};
use crate::llm::Message;

/// One task as stored.
#[derive(Clone, Debug, Serialize)]
pub struct TaskRecord {
    /// Its id.
    pub id: TaskId,
    /// The task that delegated it (`None` for a root task).
    pub parent_id: Option<TaskId>,
    /// The root task of its tree.
    pub root_id: TaskId,
    /// The conversation it belongs to.
    pub conversation_id: String,
    /// The agent running it.
    pub agent: String,
    /// Depth in the delegation tree (root = 0).
    pub depth: u32,
    /// The parent's tool call that created it.
    pub tool_use_id: Option<String>,
    /// Position inside a `delegate_parallel` call.
    pub tool_index: u32,
    /// Current state.
    pub state: TaskState,
    /// The instructions it was given.
    pub input: String,
    /// Its final answer (the original, even when the parent was given a summary).
    pub output: Option<String>,
    /// The summary the parent saw, when the output was compressed.
    pub summary: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// The structured escalation it ended with (JSON).
    pub escalation: Option<String>,
    /// Created, ms since epoch.
    pub created_at: i64,
    /// Last change, ms since epoch.
    pub updated_at: i64,
    /// Ended, ms since epoch.
    pub finished_at: Option<i64>,
    /// Prompt tokens over all its LLM calls.
    pub tokens_in: u64,
    /// Generated tokens over all its LLM calls.
    pub tokens_out: u64,
    /// USD over all its LLM calls.
    pub cost_usd: f64,
    /// LLM calls made.
    pub llm_calls: u32,
    /// Of those, calls whose token usage the provider did not report (the sums are lower bounds).
    pub unknown_usage_calls: u32,
    /// The cluster node that ran it last (PostgreSQL with several nodes); always `None` on SQLite,
    /// where one process owns the file.
    pub node: Option<String>,
    /// The W3C `traceparent` of the span it was created under ([`NewTask::trace`]); `None` when
    /// telemetry was off then, and for every task from before the column. Why stored: whoever runs
    /// the task (this process after a restart, or another cluster node) makes its `invoke_agent`
    /// span a child of this context, so a tree stays one trace.
    pub trace: Option<String>,
}

pub(super) const TASK_COLUMNS: &str = "id, parent_id, root_id, conversation_id, agent, depth, tool_use_id, tool_index, \
     state, input, output, summary, error, escalation, created_at, updated_at, finished_at, \
     tokens_in, tokens_out, cost_usd, llm_calls, unknown_usage_calls, trace";

pub(super) fn task_from_row(row: &Row<'_>) -> rusqlite::Result<TaskRecord> {
    let state: String = row.get(8)?;
    Ok(TaskRecord {
        id: row.get(0)?,
        parent_id: row.get(1)?,
        root_id: row.get(2)?,
        conversation_id: row.get(3)?,
        agent: row.get(4)?,
        depth: row.get(5)?,
        tool_use_id: row.get(6)?,
        tool_index: row.get(7)?,
        state: TaskState::parse(&state).unwrap_or(TaskState::Failed),
        input: row.get(9)?,
        output: row.get(10)?,
        summary: row.get(11)?,
        error: row.get(12)?,
        escalation: row.get(13)?,
        created_at: row.get(14)?,
        updated_at: row.get(15)?,
        finished_at: row.get(16)?,
        tokens_in: row.get::<_, i64>(17)? as u64,
        tokens_out: row.get::<_, i64>(18)? as u64,
        cost_usd: row.get(19)?,
        llm_calls: row.get(20)?,
        unknown_usage_calls: row.get(21)?,
        node: None,
        trace: row.get(22)?,
    })
}

/// A session history as stored. An encoding failure is an error: saving `[]` instead would wipe the
/// history. `task` names the task in the error (the parent, for a task not created yet; 0 for a root).
pub(super) fn encode_history(messages: &[Message], task: TaskId) -> Result<String, StoreError> {
    serde_json::to_string(messages).map_err(|e| StoreError::Encode {
        what: "session history",
        task,
        message: e.to_string(),
    })
}

/// What a new task starts with.
#[derive(Clone, Debug)]
pub struct NewTask<'a> {
    /// The delegating task, for child tasks.
    pub parent_id: Option<TaskId>,
    /// The conversation.
    pub conversation_id: &'a str,
    /// The agent.
    pub agent: &'a str,
    /// Depth (root = 0).
    pub depth: u32,
    /// The parent's tool call.
    pub tool_use_id: Option<&'a str>,
    /// Index inside `delegate_parallel`.
    pub tool_index: u32,
    /// Instructions.
    pub input: &'a str,
    /// The session history it starts from.
    pub messages: &'a [Message],
    /// Who wrote a root task's message, for recall's provenance (`platform:user id`); `None` records
    /// [`super::recall::USER_AUTHOR`]. A child task's author is always its delegating agent.
    pub author: Option<&'a str>,
    /// The W3C `traceparent` of the span it is created under: the parent's `execute_tool delegate`
    /// span for a child, the inbound message's span for a root; `None` when telemetry is off. Stored
    /// with the task so a tree stays one trace across restarts and cluster nodes: wherever the task
    /// runs, its `invoke_agent` span is made a child of this context.
    pub trace: Option<&'a str>,
}

impl Db {
    // -------------------------------------------------------------------------------- conversations

    /// Record a new conversation with `root_agent`, under `id`.
    pub fn create_conversation(&self, id: &str, root_agent: &str) -> Result<(), StoreError> {
        exec(
            &self.conn(),
            "INSERT OR IGNORE INTO conversations (id, root_agent, created_at) VALUES (?1, ?2, ?3)",
            params![id, root_agent, now_ms()],
        )
        .map_err(sql("creating a conversation"))?;
        Ok(())
    }

    /// The latest root task of a conversation, if any.
    pub fn last_root_task(&self, conversation_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        row(
            &self.conn(),
            &format!(
                "SELECT {TASK_COLUMNS} FROM tasks WHERE conversation_id = ?1 AND parent_id IS NULL \
                     ORDER BY id DESC LIMIT 1"
            ),
            [conversation_id],
            task_from_row,
        )
        .optional()
        .map_err(sql("finding a conversation's last task"))
    }

    // -------------------------------------------------------------------------------- tasks

    /// Record a new task (state CREATED). A root task is its own root, and records its conversation if
    /// it is the first; it is refused while the conversation has a live root ([`StoreError::Busy`]).
    #[cfg(test)]
    pub fn create_task(&self, task: &NewTask<'_>) -> Result<TaskId, StoreError> {
        let messages = encode_history(task.messages, task.parent_id.unwrap_or_default())?;
        self.create_task_encoded(task, &messages)
    }

    /// Record a new task (see `Db::create_task`) with its history already encoded (`task.messages` is
    /// not read): the async store encodes on the caller's thread, off the single writer's.
    pub(super) fn create_task_encoded(
        &self,
        task: &NewTask<'_>,
        messages: &str,
    ) -> Result<TaskId, StoreError> {
        let mut conn = self.conn();
        let tx = conn.savepoint().map_err(sql("creating a task"))?;
        let root_id: Option<TaskId> = match task.parent_id {
            Some(parent) => Some(
                row(
                    &tx,
                    "SELECT root_id FROM tasks WHERE id = ?1",
                    [parent],
                    |r| r.get(0),
                )
                .optional()
                .map_err(sql("creating a task"))?
                .ok_or(StoreError::NoTask(parent))?,
            ),
            None => {
                // One request at a time per conversation: checked in the inserting transaction, so two
                // concurrent senders cannot both start a root.
                let live: Option<TaskId> = row(
                    &tx,
                    &format!(
                        "SELECT id FROM tasks WHERE conversation_id = ?1 AND parent_id IS NULL \
                         AND state NOT IN {}",
                        TaskState::terminal_sql()
                    ),
                    [task.conversation_id],
                    |r| r.get(0),
                )
                .optional()
                .map_err(sql("creating a task"))?;
                if let Some(live) = live {
                    return Err(StoreError::Busy {
                        conversation: task.conversation_id.to_string(),
                        task: live,
                    });
                }
                exec(
                    &tx,
                    "INSERT OR IGNORE INTO conversations (id, root_agent, created_at) VALUES (?1, ?2, ?3)",
                    params![task.conversation_id, task.agent, now_ms()],
                )
                .map_err(sql("creating a task"))?;
                None
            }
        };
        let now = now_ms();
        exec(&tx,
            "INSERT INTO tasks (parent_id, root_id, conversation_id, agent, depth, tool_use_id, tool_index, \
             state, input, messages, created_at, updated_at, trace) \
             VALUES (?1, COALESCE(?2, 0), ?3, ?4, ?5, ?6, ?7, ?11, ?8, ?9, ?10, ?10, ?12)",
            params![
                task.parent_id,
                root_id,
                task.conversation_id,
                task.agent,
                task.depth,
                task.tool_use_id,
                task.tool_index,
                task.input,
                messages,
                now,
                TaskState::Created.as_str(),
                task.trace
            ],
        )
        .map_err(sql("creating a task"))?;
        let id = tx.last_insert_rowid();
        if root_id.is_none() {
            exec(&tx, "UPDATE tasks SET root_id = id WHERE id = ?1", [id])
                .map_err(sql("creating a task"))?;
        }
        let author = match task.parent_id {
            Some(parent) => super::recall::agent_of(&tx, parent)?,
            None => task
                .author
                .unwrap_or(super::recall::USER_AUTHOR)
                .to_string(),
        };
        super::recall::given(
            &tx,
            id,
            task.agent,
            task.conversation_id,
            &author,
            task.input,
            now,
        )?;
        tx.commit().map_err(sql("creating a task"))?;
        self.recall_appended();
        Ok(id)
    }

    /// One task.
    pub fn task(&self, id: TaskId) -> Result<TaskRecord, StoreError> {
        row(
            &self.conn(),
            &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?1"),
            [id],
            task_from_row,
        )
        .optional()
        .map_err(sql("reading a task"))?
        .ok_or(StoreError::NoTask(id))
    }

    /// The child a parent's tool call created, if it exists (makes delegation idempotent on resume).
    pub fn child_for(
        &self,
        parent: TaskId,
        tool_use_id: &str,
        index: u32,
    ) -> Result<Option<TaskRecord>, StoreError> {
        row(&self.conn(),
                &format!(
                    "SELECT {TASK_COLUMNS} FROM tasks WHERE parent_id = ?1 AND tool_use_id = ?2 AND tool_index = ?3"
                ),
                params![parent, tool_use_id, index],
                task_from_row,
            )
            .optional()
            .map_err(sql("finding a child task"))
    }

    /// A task's saved session history.
    pub fn messages(&self, id: TaskId) -> Result<Vec<Message>, StoreError> {
        let text: String = row(
            &self.conn(),
            "SELECT messages FROM tasks WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql("reading a session"))?
        .ok_or(StoreError::NoTask(id))?;
        serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
            what: "session history",
            task: id,
            message: e.to_string(),
        })
    }

    /// Save a task's session history (after every turn), already encoded.
    pub(super) fn save_messages_encoded(&self, id: TaskId, text: &str) -> Result<(), StoreError> {
        exec(
            &self.conn(),
            "UPDATE tasks SET messages = ?2, updated_at = ?3 WHERE id = ?1",
            params![id, text, now_ms()],
        )
        .map_err(sql("saving a session"))?;
        Ok(())
    }

    /// Every task of a tree, in creation order (parents before children).
    pub fn tree(&self, root_id: TaskId) -> Result<Vec<TaskRecord>, StoreError> {
        self.query_tasks(
            &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE root_id = ?1 ORDER BY id"),
            params![root_id],
        )
    }

    /// The most recent root tasks, newest first.
    pub fn recent_roots(&self, limit: u32) -> Result<Vec<TaskRecord>, StoreError> {
        self.query_tasks(
            &format!(
                "SELECT {TASK_COLUMNS} FROM tasks WHERE parent_id IS NULL ORDER BY id DESC LIMIT ?1"
            ),
            params![limit],
        )
    }

    /// Tasks that have not ended, oldest first.
    pub fn live_tasks(&self) -> Result<Vec<TaskRecord>, StoreError> {
        self.query_tasks(
            &format!(
                "SELECT {TASK_COLUMNS} FROM tasks WHERE state NOT IN {} ORDER BY id",
                TaskState::terminal_sql()
            ),
            params![],
        )
    }

    fn query_tasks(
        &self,
        query: &str,
        params: impl rusqlite::Params,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(query).map_err(sql("listing tasks"))?;
        let rows = stmt
            .query_map(params, task_from_row)
            .map_err(sql("listing tasks"))?;
        rows.collect::<Result<_, _>>().map_err(sql("listing tasks"))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::store::testing::root;

    /// The SQL that finds live tasks agrees with [`TaskState::is_terminal`] for every state.
    #[test]
    fn live_tasks_are_exactly_the_non_terminal_states() {
        let store = Db::in_memory().unwrap();
        let mut expected_live = Vec::new();
        for (i, state) in TaskState::ALL.into_iter().enumerate() {
            let id = root(&store, &format!("c{i}"));
            exec(
                &store.conn(),
                "UPDATE tasks SET state = ?2 WHERE id = ?1",
                params![id, state.as_str()],
            )
            .unwrap();
            if !state.is_terminal() {
                expected_live.push(id);
            }
            // A conversation whose root is live refuses a second root; an ended one takes it.
            let second = store.create_task(&NewTask {
                parent_id: None,
                conversation_id: &format!("c{i}"),
                agent: "ceo",
                depth: 0,
                tool_use_id: None,
                tool_index: 0,
                input: "again",
                messages: &[],
                author: None,
                trace: None,
            });
            match second {
                Err(StoreError::Busy { task, .. }) => {
                    assert!(!state.is_terminal(), "{state:?} refused a new root");
                    assert_eq!(task, id);
                }
                Ok(_) => assert!(state.is_terminal(), "{state:?} accepted a second root"),
                Err(e) => panic!("unexpected error for {state:?}: {e}"),
            }
        }
        let live: Vec<TaskId> = store
            .live_tasks()
            .unwrap()
            .iter()
            .filter(|t| t.input == "hello")
            .map(|t| t.id)
            .collect();
        assert_eq!(live, expected_live);
    }
}
