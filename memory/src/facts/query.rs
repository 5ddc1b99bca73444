//! The views as SQL over the indexes of migration 4, and reading versions back.
//!
//! Each view is one indexed query (see [`crate::schema::facts`] for the indexes):
//! - `Current`: the partial index of current versions, `(namespace, recorded_at)`;
//! - `BelievedAt(t)`: current versions recorded by t (same index) UNION ALL closed versions with
//!   `invalidated_at > t` and `recorded_at <= t` (the closed index holds both columns, so versions
//!   not believed at t are skipped without reading their rows);
//! - `ValidAt(t)`: current versions whose `[valid_from, valid_to)` holds t (null = open);
//! - `History`: `(namespace, fact_id, id)`.

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, Row, params_from_iter};

use super::{FactVersion, Source, View};

/// The columns [`row`] reads, in order (`v.` qualified).
pub const COLUMNS: &str = "v.id, v.fact_id, v.namespace, v.text, v.subject, v.valid_from, v.valid_to, \
     v.recorded_at, v.invalidated_at, v.reason, v.source, v.agent, v.task, v.conversation, \
     v.source_messages, v.model, v.ledger_id, v.predicate, v.object";

/// One version from a row selected with [`COLUMNS`].
pub fn row(r: &Row<'_>) -> rusqlite::Result<FactVersion> {
    let source: String = r.get(10)?;
    let messages: String = r.get(14)?;
    Ok(FactVersion {
        id: r.get(0)?,
        fact_id: r.get(1)?,
        namespace: r.get(2)?,
        text: r.get(3)?,
        subject: r.get(4)?,
        valid_from: r.get(5)?,
        valid_to: r.get(6)?,
        recorded_at: r.get(7)?,
        invalidated_at: r.get(8)?,
        reason: r.get(9)?,
        // The column has a CHECK constraint; an unknown value cannot be stored.
        source: Source::parse(&source).unwrap_or(Source::System),
        agent: r.get(11)?,
        task: r.get(12)?,
        conversation: r.get(13)?,
        source_messages: serde_json::from_str(&messages).unwrap_or_default(),
        model: r.get(15)?,
        ledger_id: r.get(16)?,
        predicate: r.get(17)?,
        object: r.get(18)?,
    })
}

/// The view as a WHERE fragment over `v` (the versions table), with its time parameter (if any)
/// pushed to `params`.
pub fn view_filter(view: View, params: &mut Vec<SqlValue>) -> String {
    match view {
        View::Current => "v.invalidated_at IS NULL".to_string(),
        View::BelievedAt(t) => {
            params.push(SqlValue::Integer(t));
            let n = params.len();
            format!(
                "v.recorded_at <= ?{n} AND (v.invalidated_at IS NULL OR v.invalidated_at > ?{n})"
            )
        }
        View::ValidAt(t) => {
            params.push(SqlValue::Integer(t));
            let n = params.len();
            format!(
                "v.invalidated_at IS NULL AND (v.valid_from IS NULL OR v.valid_from <= ?{n}) \
                 AND (v.valid_to IS NULL OR v.valid_to > ?{n})"
            )
        }
        View::History => "1".to_string(),
    }
}

/// Versions of `namespace` in `view`: newest first (History: facts newest first, each fact's
/// versions oldest first).
pub fn list(conn: &Connection, namespace: &str, view: View) -> rusqlite::Result<Vec<FactVersion>> {
    let (sql, params): (String, Vec<SqlValue>) = match view {
        View::Current => (
            format!(
                "SELECT {COLUMNS} FROM memory_fact_versions v
                 WHERE v.namespace = ?1 AND v.invalidated_at IS NULL
                 ORDER BY v.recorded_at DESC, v.id DESC"
            ),
            vec![SqlValue::Text(namespace.to_string())],
        ),
        View::BelievedAt(t) => (
            format!(
                "SELECT * FROM (
                   SELECT {COLUMNS} FROM memory_fact_versions v
                   WHERE v.namespace = ?1 AND v.invalidated_at IS NULL AND v.recorded_at <= ?2
                   UNION ALL
                   SELECT {COLUMNS} FROM memory_fact_versions v
                   WHERE v.namespace = ?1 AND v.invalidated_at IS NOT NULL AND v.invalidated_at > ?2
                     AND v.recorded_at <= ?2)
                 ORDER BY recorded_at DESC, id DESC"
            ),
            vec![SqlValue::Text(namespace.to_string()), t.into()],
        ),
        View::ValidAt(t) => (
            format!(
                "SELECT {COLUMNS} FROM memory_fact_versions v
                 WHERE v.namespace = ?1 AND v.invalidated_at IS NULL
                   AND (v.valid_from IS NULL OR v.valid_from <= ?2)
                   AND (v.valid_to IS NULL OR v.valid_to > ?2)
                 ORDER BY v.recorded_at DESC, v.id DESC"
            ),
            vec![SqlValue::Text(namespace.to_string()), t.into()],
        ),
        View::History => (
            format!(
                "SELECT {COLUMNS} FROM memory_fact_versions v
                 WHERE v.namespace = ?1
                 ORDER BY v.fact_id DESC, v.id ASC"
            ),
            vec![SqlValue::Text(namespace.to_string())],
        ),
    };
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(params_from_iter(params), row)?;
    rows.collect()
}

/// Every version of one fact, oldest first.
pub fn history(conn: &Connection, fact_id: i64) -> rusqlite::Result<Vec<FactVersion>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM memory_fact_versions v WHERE v.fact_id = ?1 ORDER BY v.id"
    ))?;
    let rows = stmt.query_map([fact_id], row)?;
    rows.collect()
}

/// The versions with these ids (any order).
pub fn by_ids(conn: &Connection, ids: &[i64]) -> rusqlite::Result<Vec<FactVersion>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let marks = vec!["?"; ids.len()].join(",");
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM memory_fact_versions v WHERE v.id IN ({marks})"
    ))?;
    let rows = stmt.query_map(params_from_iter(ids), row)?;
    rows.collect()
}

/// Versions in `view` linked to any of `entities`, newest first.
pub fn by_entities(
    conn: &Connection,
    entities: &[i64],
    view: View,
) -> rusqlite::Result<Vec<FactVersion>> {
    if entities.is_empty() {
        return Ok(Vec::new());
    }
    let mut params: Vec<SqlValue> = entities.iter().map(|&e| SqlValue::Integer(e)).collect();
    let marks = (1..=entities.len())
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(",");
    let filter = view_filter(view, &mut params);
    let order = if view == View::History {
        "v.fact_id DESC, v.id ASC"
    } else {
        "v.recorded_at DESC, v.id DESC"
    };
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM memory_fact_versions v
         WHERE v.entity_id IN ({marks}) AND {filter} ORDER BY {order}"
    ))?;
    let rows = stmt.query_map(params_from_iter(params), row)?;
    rows.collect()
}
