//! The recorder: every event of this process's engine (streamed tokens aside, as on the console's
//! stream) written to the stored events, in batches, off the hot path; and the retention purge.
//!
//! Two halves:
//! - a tokio task follows the engine's bus (this process's events only: on a cluster each node
//!   records its own, tagged with its node id), turns each event into a row (its request, found from
//!   the task, and its JSON without answer text) and hands it on over a channel at once; it never
//!   waits for the database;
//! - a blocking writer commits the rows in groups (every [`FLUSH_EVERY`], or [`BATCH`] rows), one
//!   transaction per group, and purges events older than `framework.console.eventRetention` (read
//!   from the running config each time, so a reload applies) at start and every [`PURGE_EVERY`].
//!
//! Invariants:
//! - nothing is lost silently while the process runs: a failed write is said once (a warning) and
//!   retried with its rows kept, in order; rows that could not be kept (over [`MAX_PENDING`] while
//!   the database is down) and events the follower missed (it fell behind the bus) are counted and
//!   recorded as a `recording_gap` event when writes succeed again;
//! - a clean stop flushes what is pending: the writer is a blocking task, which the runtime waits for
//!   when it shuts down, and it ends (after a last write, retried for up to [`LAST_WRITE`]) only when
//!   the follower, and with it the channel, is gone;
//! - no message text is stored: `agent_finished` loses its `text` (the answer), as nothing else the
//!   console streams carries one.

use std::collections::{HashMap, VecDeque};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

use opc_agents::Event;
use opc_agents::store::now_ms;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::store::{EventStore, NewEvent};

/// Rows are committed at least this often while some wait.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// Or as soon as this many wait; and at most this many per transaction.
pub const BATCH: usize = 500;
/// Rows kept while writes fail; beyond, the oldest are dropped and counted.
pub const MAX_PENDING: usize = 100_000;
/// The purge's period (it also runs at start).
pub const PURGE_EVERY: Duration = Duration::from_secs(60 * 60);
/// The longest wait between retries of a failed write.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long the last write at a stop is retried before its rows are given up (and said so).
const LAST_WRITE: Duration = Duration::from_secs(5);
/// Task → request entries kept; the map is cleared beyond (lookups refill it).
const ROOTS_KEPT: usize = 100_000;

/// What the follower hands the writer.
enum Row {
    Event(NewEvent),
    /// The follower fell behind the bus and missed this many events.
    Missed(u64),
}

/// Start recording `engine`'s events into `store` (a connection of the recorder's own), as `node`;
/// `retention` reads the running retention.
pub fn start(
    engine: &opc_agents::Engine,
    store: EventStore,
    node: Option<String>,
    retention: impl Fn() -> Duration + Send + 'static,
) {
    let (rows, queue) = channel::<Row>();
    let receiver = engine.events().subscribe_local();
    let lookup = engine.clone();
    tokio::spawn(follow(receiver, lookup, rows));
    tokio::task::spawn_blocking(move || {
        Writer {
            store,
            node,
            retention: Box::new(retention),
            pending: VecDeque::new(),
            missed: 0,
            failing: None,
        }
        .run(queue)
    });
}

/// The follower (see the module doc).
async fn follow(
    mut receiver: tokio::sync::broadcast::Receiver<Event>,
    engine: opc_agents::Engine,
    rows: Sender<Row>,
) {
    // Each task's request and agent: from its `task_created`, or the engine's record.
    let mut tasks: HashMap<i64, (i64, String)> = HashMap::new();
    loop {
        let row = match receiver.recv().await {
            Ok(Event::Token { .. }) => continue,
            Ok(event) => {
                let value = serde_json::to_value(&event).unwrap_or_default();
                if tasks.len() >= ROOTS_KEPT {
                    tasks.clear();
                }
                let known = match &event {
                    Event::TaskCreated {
                        task, root, agent, ..
                    } => {
                        tasks.insert(*task, (*root, agent.clone()));
                        Some((*root, agent.clone()))
                    }
                    _ => match value["task"].as_i64() {
                        Some(task) => match tasks.get(&task) {
                            Some(found) => Some(found.clone()),
                            // A task created before this process started (a resumed tree).
                            None => match engine.store().task(task).await {
                                Ok(t) => {
                                    tasks.insert(task, (t.root_id, t.agent.clone()));
                                    Some((t.root_id, t.agent))
                                }
                                Err(_) => None,
                            },
                        },
                        None => None,
                    },
                };
                let (request, agent) = known.unzip();
                Row::Event(to_row(value, request, agent, now_ms()))
            }
            Err(RecvError::Lagged(missed)) => Row::Missed(missed),
            Err(RecvError::Closed) => return,
        };
        if rows.send(row).is_err() {
            return;
        }
    }
}

/// The free-text fields of events, by kind, that are left out of what is stored (their length is kept
/// as `<field>_chars`): model output after the privacy gateway restored it, so they may hold the real
/// values it masked, and the history is kept for weeks and exported. The live stream, the approvals
/// and the tasks keep them where they already are.
const FREE_TEXT: [(&str, &str); 5] = [
    ("agent_finished", "text"),
    ("approval_requested", "summary"),
    ("escalated", "reason"),
    ("facts_rejected", "reason"),
    ("memory_work_failed", "error"),
];

/// An event's row: its kind, task, agent (`from` for a delegation; else its task's agent, `task_agent`)
/// and JSON, free text left out ([`FREE_TEXT`]).
pub fn to_row(
    mut value: Value,
    request: Option<i64>,
    task_agent: Option<String>,
    at: i64,
) -> NewEvent {
    let kind = value["event"].as_str().unwrap_or("event").to_string();
    if let Some(object) = value.as_object_mut() {
        for (_, field) in FREE_TEXT.iter().filter(|(k, _)| *k == kind) {
            if let Some(text) = object.remove(*field) {
                let chars = text.as_str().map_or(0, |t| t.chars().count());
                object.insert(format!("{field}_chars"), Value::from(chars));
            }
        }
    }
    let agent = value["agent"]
        .as_str()
        .or_else(|| value["from"].as_str())
        .map(str::to_string)
        .or(task_agent);
    NewEvent {
        at,
        request,
        task: value["task"].as_i64(),
        agent,
        data: value.to_string(),
        kind,
    }
}

/// The writer (see the module doc).
struct Writer {
    store: EventStore,
    node: Option<String>,
    retention: Box<dyn Fn() -> Duration + Send>,
    pending: VecDeque<NewEvent>,
    /// Events missed or dropped, not yet recorded as a gap.
    missed: u64,
    /// Since when writes fail, and when to try next.
    failing: Option<(Instant, Instant, Duration)>,
}

impl Writer {
    fn run(mut self, queue: Receiver<Row>) {
        self.purge();
        let mut next_purge = Instant::now() + PURGE_EVERY;
        let mut oldest: Option<Instant> = None;
        loop {
            let wait = match oldest {
                Some(since) => FLUSH_EVERY.saturating_sub(since.elapsed()),
                None => FLUSH_EVERY,
            };
            let wait = match self.failing {
                Some((_, retry, _)) => wait.max(retry.saturating_duration_since(Instant::now())),
                None => wait,
            };
            match queue.recv_timeout(wait.max(Duration::from_millis(10))) {
                Ok(row) => {
                    self.take(row);
                    oldest.get_or_insert_with(Instant::now);
                    // Take what else is waiting, so a burst becomes one transaction.
                    while self.pending.len() < BATCH
                        && let Ok(row) = queue.try_recv()
                    {
                        self.take(row);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.last_write();
                    return;
                }
            }
            let due =
                oldest.is_some_and(|t| t.elapsed() >= FLUSH_EVERY) || self.pending.len() >= BATCH;
            let may = self
                .failing
                .is_none_or(|(_, retry, _)| Instant::now() >= retry);
            if due && may {
                while !self.pending.is_empty() || self.missed > 0 {
                    if !self.write() {
                        break;
                    }
                }
                oldest = (!self.pending.is_empty()).then(Instant::now);
            }
            if Instant::now() >= next_purge {
                self.purge();
                next_purge = Instant::now() + PURGE_EVERY;
            }
        }
    }

    fn take(&mut self, row: Row) {
        match row {
            Row::Event(event) => {
                if self.pending.len() >= MAX_PENDING {
                    self.pending.pop_front();
                    self.missed += 1;
                }
                self.pending.push_back(event);
            }
            Row::Missed(n) => {
                tracing::warn!(
                    missed = n,
                    "the console's event recorder fell behind the engine: {n} events were not recorded"
                );
                self.missed += n;
            }
        }
    }

    /// Commit one group; whether it landed.
    fn write(&mut self) -> bool {
        let n = self.pending.len().min(BATCH);
        let mut group: Vec<NewEvent> = self.pending.iter().take(n).cloned().collect();
        if self.missed > 0 {
            // Said where the events are: the history shows where its gap is.
            group.insert(
                0,
                to_row(
                    json!({"event": "recording_gap", "missed": self.missed}),
                    None,
                    None,
                    group.first().map_or_else(now_ms, |e| e.at),
                ),
            );
        }
        match self.store.insert(self.node.as_deref(), &group) {
            Ok(()) => {
                self.pending.drain(..n);
                self.missed = 0;
                if let Some((since, _, _)) = self.failing.take() {
                    tracing::info!(
                        after_s = since.elapsed().as_secs(),
                        "the console's event recorder writes again"
                    );
                }
                true
            }
            Err(e) => {
                let now = Instant::now();
                self.failing = Some(match self.failing {
                    None => {
                        tracing::warn!(
                            error = %e,
                            pending = self.pending.len(),
                            "the console could not record events; it keeps them and retries"
                        );
                        (now, now + Duration::from_secs(1), Duration::from_secs(1))
                    }
                    Some((since, _, backoff)) => {
                        let backoff = (backoff * 2).min(MAX_BACKOFF);
                        (since, now + backoff, backoff)
                    }
                });
                false
            }
        }
    }

    /// At a stop: write what is left, retrying for a while, and say what could not be.
    fn last_write(&mut self) {
        let deadline = Instant::now() + LAST_WRITE;
        while !self.pending.is_empty() || self.missed > 0 {
            if self.write() {
                continue;
            }
            if Instant::now() >= deadline {
                tracing::error!(
                    lost = self.pending.len(),
                    "the console could not record its last events before stopping"
                );
                crate::term::eprint(&format!(
                    "opc: the console could not record its last {} events before stopping\n",
                    self.pending.len()
                ));
                return;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Delete the events older than the running retention.
    fn purge(&self) {
        let cutoff = now_ms()
            .saturating_sub(i64::try_from((self.retention)().as_millis()).unwrap_or(i64::MAX));
        match self.store.purge(cutoff) {
            Ok(0) => {}
            Ok(n) => tracing::info!(deleted = n, "old console events purged"),
            Err(e) => tracing::warn!(error = %e, "the console could not purge old events"),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_row_keeps_ids_and_counts_but_never_answer_text() {
        let event = Event::AgentFinished {
            task: 7,
            agent: "vp".into(),
            state: "COMPLETED".into(),
            text: "Dear Alice Example, your order".into(),
            tokens_in: 10,
            tokens_out: 5,
            cost_usd: 0.25,
            duration_ms: 12,
        };
        let row = to_row(serde_json::to_value(&event).unwrap(), Some(3), None, 99);
        assert_eq!(row.kind, "agent_finished");
        assert_eq!((row.request, row.task, row.at), (Some(3), Some(7), 99));
        assert_eq!(row.agent.as_deref(), Some("vp"));
        assert!(!row.data.contains("Alice"), "{}", row.data);
        let data: Value = serde_json::from_str(&row.data).unwrap();
        assert_eq!(data["tokens_out"], 5);
        assert_eq!(data["state"], "COMPLETED");

        let delegated = Event::Delegated {
            task: 1,
            child: 2,
            from: "ceo".into(),
            to: "vp".into(),
        };
        let row = to_row(
            serde_json::to_value(&delegated).unwrap(),
            Some(1),
            Some("vp".into()),
            1,
        );
        assert_eq!(
            row.agent.as_deref(),
            Some("ceo"),
            "a delegation is its sender's"
        );
        let resolved = Event::ApprovalResolved {
            approval: 4,
            task: 2,
            decision: "approve".into(),
            by: "console".into(),
        };
        let row = to_row(
            serde_json::to_value(&resolved).unwrap(),
            Some(1),
            Some("vp".into()),
            1,
        );
        assert_eq!(row.agent.as_deref(), Some("vp"), "else its task's agent");

        // An approval's summary is the model's text with real values restored: its length only.
        let asked = Event::ApprovalRequested {
            approval: 5,
            task: 2,
            conversation: "c".into(),
            agent: "vp".into(),
            path: vec!["ceo".into(), "vp".into()],
            summary: "Refund alice@example.com".into(),
            options: vec!["approve".into()],
        };
        let row = to_row(serde_json::to_value(&asked).unwrap(), Some(1), None, 1);
        assert!(!row.data.contains("alice"), "{}", row.data);
        let data: Value = serde_json::from_str(&row.data).unwrap();
        assert_eq!(
            (&data["summary_chars"], &data["approval"]),
            (&json!(24), &json!(5))
        );
    }

    /// Rows are committed by the writer within about a second, and what is pending when the
    /// channel closes (a stop) is written before the writer ends.
    #[test]
    fn the_writer_commits_in_groups_and_flushes_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("opc.db");
        let store = EventStore::open_sqlite(&path).unwrap();
        let (rows, queue) = channel();
        let writer = std::thread::spawn(move || {
            Writer {
                store,
                node: None,
                retention: Box::new(|| Duration::from_secs(3600)),
                pending: VecDeque::new(),
                missed: 0,
                failing: None,
            }
            .run(queue)
        });
        for i in 0..1_200 {
            let event = to_row(
                json!({"event": "agent_started", "task": i, "agent": "ceo"}),
                Some(1),
                None,
                now_ms(),
            );
            rows.send(Row::Event(event)).unwrap();
        }
        rows.send(Row::Missed(3)).unwrap();
        drop(rows);
        writer.join().unwrap();
        let reader = EventStore::open_sqlite(&path).unwrap();
        let all = reader
            .query(&super::super::store::Filter {
                limit: 5_000,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(all.len(), 1_201, "every event, and one gap");
        let gap = all.iter().find(|e| e.kind == "recording_gap").unwrap();
        assert!(gap.data.contains("\"missed\":3"), "{}", gap.data);
        let tasks: Vec<i64> = all.iter().rev().filter_map(|e| e.task).collect();
        assert_eq!(tasks, (0..1_200).collect::<Vec<_>>(), "in order");
    }

    /// The purge at the writer's start uses the retention it is given.
    #[test]
    fn the_writer_purges_by_the_running_retention_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("opc.db");
        let store = EventStore::open_sqlite(&path).unwrap();
        let hour = 3_600_000;
        let old = |age: i64, task: i64| {
            to_row(
                json!({"event": "agent_started", "task": task}),
                None,
                None,
                now_ms() - age,
            )
        };
        store
            .insert(None, &[old(3 * hour, 1), old(hour / 2, 2), old(0, 3)])
            .unwrap();
        let (rows, queue) = channel();
        drop(rows);
        Writer {
            store,
            node: None,
            retention: Box::new(|| Duration::from_secs(2 * 3600)),
            pending: VecDeque::new(),
            missed: 0,
            failing: None,
        }
        .run(queue);
        let reader = EventStore::open_sqlite(&path).unwrap();
        let left: Vec<i64> = reader
            .query(&super::super::store::Filter {
                limit: 10,
                ..Default::default()
            })
            .unwrap()
            .iter()
            .filter_map(|e| e.task)
            .collect();
        assert_eq!(left, [3, 2]);
    }
}
