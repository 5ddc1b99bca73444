//! Notices to conversations (e.g. "your request was interrupted by a restart"): written by the engine,
//! delivered by the gateway, which marks each one delivered once it has been posted.
//!
//! Invariant: a notice is undelivered (`delivered_at IS NULL`) until [`Db::mark_notice_delivered`];
//! notices written before delivery was tracked count as undelivered (see [`super::schema`]).

use rusqlite::{Connection, params};
use serde::Serialize;

use super::{Db, StoreError, TaskId, exec, now_ms, sql};

/// A notice waiting to be posted to its conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Notice {
    /// Its id (for [`Db::mark_notice_delivered`]).
    pub id: i64,
    /// The conversation it is for.
    pub conversation_id: String,
    /// What to tell it.
    pub text: String,
    /// Written, ms since epoch.
    pub created_at: i64,
}

/// Insert a notice inside the caller's connection or transaction (recovery writes them in its own).
pub(super) fn insert(
    conn: &Connection,
    conversation_id: &str,
    task_id: Option<TaskId>,
    text: &str,
    now: i64,
) -> rusqlite::Result<usize> {
    exec(
        conn,
        "INSERT INTO notices (conversation_id, task_id, text, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![conversation_id, task_id, text, now],
    )
}

impl Db {
    /// Tell a conversation something (e.g. that its task was interrupted).
    pub fn add_notice(
        &self,
        conversation_id: &str,
        task_id: Option<TaskId>,
        text: &str,
    ) -> Result<(), StoreError> {
        insert(&self.conn(), conversation_id, task_id, text, now_ms())
            .map_err(sql("adding a notice"))?;
        Ok(())
    }

    /// A conversation's notices, delivered or not, oldest first.
    pub fn notices(&self, conversation_id: &str) -> Result<Vec<String>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached("SELECT text FROM notices WHERE conversation_id = ?1 ORDER BY id")
            .map_err(sql("reading notices"))?;
        let rows = stmt
            .query_map([conversation_id], |row| row.get(0))
            .map_err(sql("reading notices"))?;
        rows.collect::<Result<_, _>>()
            .map_err(sql("reading notices"))
    }

    /// Every notice not yet delivered, oldest first (the gateway posts them, then marks each one).
    pub fn undelivered_notices(&self) -> Result<Vec<Notice>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT id, conversation_id, text, created_at FROM notices \
                 WHERE delivered_at IS NULL ORDER BY id",
            )
            .map_err(sql("reading undelivered notices"))?;
        let rows = stmt
            .query_map([], |row| {
                Ok(Notice {
                    id: row.get(0)?,
                    conversation_id: row.get(1)?,
                    text: row.get(2)?,
                    created_at: row.get(3)?,
                })
            })
            .map_err(sql("reading undelivered notices"))?;
        rows.collect::<Result<_, _>>()
            .map_err(sql("reading undelivered notices"))
    }

    /// Record that notice `id` was posted. Returns whether it was undelivered until now (`false` for
    /// a notice already marked, or no such notice), so marking twice is harmless.
    pub fn mark_notice_delivered(&self, id: i64) -> Result<bool, StoreError> {
        let changed = exec(
            &self.conn(),
            "UPDATE notices SET delivered_at = ?2 WHERE id = ?1 AND delivered_at IS NULL",
            params![id, now_ms()],
        )
        .map_err(sql("marking a notice delivered"))?;
        Ok(changed == 1)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn notices_stay_undelivered_until_marked_once() {
        let store = Db::in_memory().unwrap();
        store.add_notice("c", None, "first").unwrap();
        store.add_notice("d", None, "second").unwrap();
        let pending = store.undelivered_notices().unwrap();
        let texts: Vec<&str> = pending.iter().map(|n| n.text.as_str()).collect();
        assert_eq!(texts, ["first", "second"]);
        assert_eq!(pending[0].conversation_id, "c");
        assert!(store.mark_notice_delivered(pending[0].id).unwrap());
        assert!(
            !store.mark_notice_delivered(pending[0].id).unwrap(),
            "marked twice"
        );
        assert!(
            !store.mark_notice_delivered(9_999).unwrap(),
            "no such notice"
        );
        let left = store.undelivered_notices().unwrap();
        assert_eq!(left, vec![pending[1].clone()]);
        // Delivered notices are still part of the conversation's record.
        assert_eq!(store.notices("c").unwrap(), ["first"]);
    }
}
