//! Applying a batch of operations in one transaction.
//!
//! Order of checks (and why): every op is validated before anything is written (bad text, times out
//! of order); then ops run in order inside one `BEGIN IMMEDIATE` transaction, and the first target
//! that is not a current version of this namespace rolls the whole batch back. Nothing is ever
//! deleted: UPDATE and INVALIDATE only *close* a version (`invalidated_at` = now, and `valid_to`);
//! UPDATE opens a new version of the same fact, and INVALIDATE records the closing as a version that
//! was never current (the closer's source and reason), so every change is a version. An ADD whose normalised text hashes like a
//! current fact of the namespace (or an earlier ADD of the batch) is dropped as a duplicate.
//!
//! Graph memory: a version may carry a relation, `predicate` + `object` (both or neither; an object
//! needs a subject). The object is resolved through the alias table like the subject, into
//! `object_entity_id`; the edge is the version, so closing the version closes the edge. An UPDATE
//! that names no relation and no new subject keeps the fact's relation (as it keeps its subject);
//! one that names a new subject without a relation drops it (the old relation was about the old
//! subject).

use rusqlite::{OptionalExtension, Transaction, params};

use super::ops::{MAX_OBJECT, MAX_PREDICATE, MAX_REASON, MAX_SUBJECT, MAX_TEXT};
use super::prompt::content_hash;
use super::{Applied, FactError, Op, Provenance, entities};

/// A version opened by the batch (for the vector index).
pub struct Opened {
    /// Its id.
    pub id: i64,
    /// Its namespace.
    pub namespace: String,
    /// When it was recorded.
    pub recorded_at: i64,
    /// The text (to embed).
    pub text: String,
}

/// What the batch changed, beyond [`Applied`]: the vector index follows it after the commit.
#[derive(Default)]
pub struct Changes {
    /// Versions opened.
    pub opened: Vec<Opened>,
    /// Versions closed.
    pub closed: Vec<i64>,
}

fn check_text(i: usize, field: &str, s: &str, max: usize) -> Result<(), FactError> {
    if s.chars().count() > max {
        return Err(FactError::Invalid(format!(
            "facts[{i}].{field}: longer than {max} characters; shorten it"
        )));
    }
    if s.contains('\0') {
        return Err(FactError::Invalid(format!(
            "facts[{i}].{field}: contains a NUL character"
        )));
    }
    Ok(())
}

/// A relation's checks: both or neither of `predicate` and `object`, bounded, and (when
/// `subject_known`) an object only with a subject.
fn check_relation(
    i: usize,
    subject: Option<&str>,
    predicate: &Option<String>,
    object: &Option<String>,
    subject_known: bool,
) -> Result<(), FactError> {
    match (predicate, object) {
        (None, None) => return Ok(()),
        (Some(_), None) => {
            return Err(FactError::Invalid(format!(
                "facts[{i}].object: required with a predicate (both or neither); name the entity the relation points to"
            )));
        }
        (None, Some(_)) => {
            return Err(FactError::Invalid(format!(
                "facts[{i}].predicate: required with an object (both or neither); name the relation, e.g. \"leads\""
            )));
        }
        (Some(p), Some(o)) => {
            for (field, s, max) in [("predicate", p, MAX_PREDICATE), ("object", o, MAX_OBJECT)] {
                if s.trim().is_empty() {
                    return Err(FactError::Invalid(format!(
                        "facts[{i}].{field}: empty; give both predicate and object, or neither"
                    )));
                }
                check_text(i, field, s, max)?;
            }
        }
    }
    if subject_known && subject.is_none_or(|s| s.trim().is_empty()) {
        return Err(FactError::Invalid(format!(
            "facts[{i}].subject: required with an object; a relation goes from the subject to the object"
        )));
    }
    Ok(())
}

/// Validate ops that did not come through [`super::ops::parse`] (a direct `insert`, a test).
pub fn validate(namespace: &str, ops: &[Op]) -> Result<(), FactError> {
    if namespace.trim().is_empty() {
        return Err(FactError::Invalid(
            "facts: the namespace is empty; pass `agent/<id>`".to_string(),
        ));
    }
    for (i, op) in ops.iter().enumerate() {
        let (text, subject, reason, from, to) = match op {
            Op::Add {
                text,
                subject,
                predicate,
                object,
                valid_from,
                valid_to,
            } => {
                check_relation(i, subject.as_deref(), predicate, object, true)?;
                (Some(text), subject, &None, *valid_from, *valid_to)
            }
            Op::Update {
                text,
                subject,
                predicate,
                object,
                valid_from,
                valid_to,
                reason,
                ..
            } => {
                // The subject may be kept from the target: checked again when it is known.
                check_relation(i, subject.as_deref(), predicate, object, false)?;
                (Some(text), subject, reason, *valid_from, *valid_to)
            }
            Op::Invalidate { reason, .. } => (None, &None, reason, None, None),
            Op::Noop => continue,
        };
        if let Some(text) = text {
            if text.trim().is_empty() {
                return Err(FactError::Invalid(format!(
                    "facts[{i}].text: empty; a fact is one statement"
                )));
            }
            check_text(i, "text", text, MAX_TEXT)?;
        }
        if let Some(s) = subject {
            check_text(i, "subject", s, MAX_SUBJECT)?;
        }
        if let Some(r) = reason {
            check_text(i, "reason", r, MAX_REASON)?;
        }
        if let (Some(f), Some(t)) = (from, to)
            && t < f
        {
            return Err(FactError::Invalid(format!(
                "facts[{i}].valid_to: before valid_from; a fact cannot stop holding before it starts"
            )));
        }
    }
    Ok(())
}

/// The target's fact id, subject and relation, if it is a current version of `namespace`;
/// otherwise the error that fails the batch.
fn current_target(
    tx: &Transaction<'_>,
    namespace: &str,
    i: usize,
    target: i64,
) -> Result<Target, FactError> {
    let row: Option<TargetRow> = tx
        .query_row(
            "SELECT fact_id, namespace, invalidated_at, subject, predicate, object
             FROM memory_fact_versions WHERE id = ?1",
            [target],
            |r| {
                Ok(TargetRow {
                    fact_id: r.get(0)?,
                    namespace: r.get(1)?,
                    invalidated_at: r.get(2)?,
                    subject: r.get(3)?,
                    predicate: r.get(4)?,
                    object: r.get(5)?,
                })
            },
        )
        .optional()
        .map_err(|e| db(tx, e))?;
    target_state(namespace, i, target, row)
}

/// A target's row as both backends read it.
pub(super) struct TargetRow {
    pub(super) fact_id: i64,
    pub(super) namespace: String,
    pub(super) invalidated_at: Option<i64>,
    pub(super) subject: Option<String>,
    pub(super) predicate: Option<String>,
    pub(super) object: Option<String>,
}

/// A current target: what an UPDATE keeps when it names nothing new.
pub(super) struct Target {
    pub(super) fact_id: i64,
    pub(super) subject: Option<String>,
    pub(super) predicate: Option<String>,
    pub(super) object: Option<String>,
}

/// Judge op `i`'s `target` from its row (None: no such version): what it keeps when it is a current
/// version of `namespace`, else the error that fails the batch (shared by both backends, so they
/// fail a batch with the same words).
pub(super) fn target_state(
    namespace: &str,
    i: usize,
    target: i64,
    row: Option<TargetRow>,
) -> Result<Target, FactError> {
    match row {
        None => Err(FactError::Invalid(format!(
            "facts[{i}].target: no fact version {target}; target an id that was listed"
        ))),
        Some(r) if r.namespace != namespace => Err(FactError::Invalid(format!(
            "facts[{i}].target: fact version {target} is not in {namespace}; an agent changes only its own facts"
        ))),
        Some(r) if r.invalidated_at.is_some() => Err(FactError::Stale(target)),
        Some(r) => Ok(Target {
            fact_id: r.fact_id,
            subject: r.subject,
            predicate: r.predicate,
            object: r.object,
        }),
    }
}

/// What an UPDATE's new version says: its subject and relation, given or kept from `old` (see the
/// module doc), checked (an object needs a subject). Shared by both backends.
#[allow(clippy::type_complexity)]
pub(super) fn updated_fields<'a>(
    i: usize,
    old: &'a Target,
    subject: Option<&'a str>,
    predicate: Option<&'a str>,
    object: Option<&'a str>,
) -> Result<(Option<&'a str>, Option<&'a str>, Option<&'a str>), FactError> {
    let (predicate, object) = match (predicate, object, subject) {
        (Some(p), Some(o), _) => (Some(p), Some(o)),
        (_, _, None) => (old.predicate.as_deref(), old.object.as_deref()),
        _ => (None, None),
    };
    let subject = subject.or(old.subject.as_deref());
    if object.is_some() && subject.is_none() {
        return Err(FactError::Invalid(format!(
            "facts[{i}].subject: required with an object; the fact has no subject to keep"
        )));
    }
    Ok((subject, predicate, object))
}

pub(super) fn db(tx: &rusqlite::Connection, source: rusqlite::Error) -> FactError {
    FactError::Db {
        path: opc_migrate::path_of(tx),
        source,
    }
}

/// Close `target` (current, checked) with the batch's provenance.
fn close(
    tx: &Transaction<'_>,
    target: i64,
    valid_to: Option<i64>,
    reason: Option<&str>,
    p: &Provenance,
    now_ms: i64,
) -> rusqlite::Result<()> {
    tx.execute(
        "UPDATE memory_fact_versions SET invalidated_at = ?2, valid_to = COALESCE(?3, valid_to),
             reason = COALESCE(?4, reason), closed_source = ?5, closed_agent = ?6, closed_task = ?7,
             closed_conversation = ?8, closed_model = ?9, closed_ledger_id = ?10
         WHERE id = ?1 AND invalidated_at IS NULL",
        params![
            target,
            now_ms,
            valid_to,
            reason,
            p.source.as_str(),
            p.agent,
            p.task,
            p.conversation,
            p.model,
            p.ledger_id
        ],
    )?;
    // Only current versions are in the current index.
    tx.prepare_cached("DELETE FROM memory_facts_fts_current WHERE rowid = ?1")?
        .execute([target])?;
    Ok(())
}

/// Record an INVALIDATE as a version of its own: the closed version's statement (with the world-time
/// end just set), recorded and invalidated at the same instant — so it is never current and never
/// believed at any time — carrying the closer's provenance and reason. Why: the closed version keeps
/// the provenance of whoever opened it, so without this record a retraction (a duplicate merged by
/// consolidation, a fact a conversation contradicted) would leave no version with its own source,
/// and `--history` would not show who retracted it. Every change is a version.
fn record_closing(
    tx: &Transaction<'_>,
    namespace: &str,
    target: i64,
    p: &Provenance,
    now_ms: i64,
) -> rusqlite::Result<i64> {
    let messages = serde_json::to_string(&p.source_messages).unwrap_or_else(|_| "[]".into());
    tx.execute(
        "INSERT INTO memory_fact_versions (fact_id, namespace, text, subject, entity_id, content_hash,
             valid_from, valid_to, recorded_at, invalidated_at, reason, source, agent, task,
             conversation, source_messages, model, ledger_id, closed_source, closed_agent,
             closed_task, closed_conversation, closed_model, closed_ledger_id, predicate, object,
             object_entity_id)
         SELECT fact_id, ?2, text, subject, entity_id, content_hash, valid_from, valid_to, ?3, ?3,
             reason, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?4, ?5, ?6, ?7, ?9, ?10,
             predicate, object, object_entity_id
         FROM memory_fact_versions WHERE id = ?1",
        params![
            target,
            namespace,
            now_ms,
            p.source.as_str(),
            p.agent,
            p.task,
            p.conversation,
            messages,
            p.model,
            p.ledger_id
        ],
    )?;
    let id = tx.last_insert_rowid();
    // In the index of every version (what an erase rebuilds), never in the current one.
    tx.prepare_cached(
        "INSERT INTO memory_facts_fts (rowid, ns, text, subject)
         SELECT id, ?2, text, subject FROM memory_fact_versions WHERE id = ?1",
    )?
    .execute(params![id, super::search::ns_token(namespace)])?;
    Ok(id)
}

/// A version to open (both backends).
pub(super) struct NewVersion<'a> {
    pub(super) fact_id: i64,
    pub(super) text: &'a str,
    pub(super) subject: Option<&'a str>,
    pub(super) predicate: Option<&'a str>,
    pub(super) object: Option<&'a str>,
    pub(super) valid_from: Option<i64>,
    pub(super) valid_to: Option<i64>,
    pub(super) reason: Option<&'a str>,
}

fn open_version(
    tx: &Transaction<'_>,
    namespace: &str,
    v: &NewVersion<'_>,
    p: &Provenance,
    now_ms: i64,
) -> rusqlite::Result<i64> {
    let entity = match v.subject {
        Some(s) => entities::resolve(tx, namespace, s, now_ms)?,
        None => None,
    };
    // An edge needs both ends: no subject entity, no object entity (the relation stays as text).
    let (predicate, object) = match (v.predicate, v.object, entity) {
        (Some(p), Some(o), Some(_)) => (Some(p), Some(o)),
        _ => (None, None),
    };
    let object_entity = match object {
        Some(o) => entities::resolve(tx, namespace, o, now_ms)?,
        None => None,
    };
    let messages = serde_json::to_string(&p.source_messages).unwrap_or_else(|_| "[]".into());
    tx.execute(
        "INSERT INTO memory_fact_versions (fact_id, namespace, text, subject, entity_id, content_hash,
             valid_from, valid_to, recorded_at, reason, source, agent, task, conversation,
             source_messages, model, ledger_id, predicate, object, object_entity_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
             ?18, ?19, ?20)",
        params![
            v.fact_id,
            namespace,
            v.text,
            v.subject,
            entity,
            content_hash(v.text),
            v.valid_from,
            v.valid_to,
            now_ms,
            v.reason,
            p.source.as_str(),
            p.agent,
            p.task,
            p.conversation,
            messages,
            p.model,
            p.ledger_id,
            predicate,
            object,
            object_entity
        ],
    )?;
    let id = tx.last_insert_rowid();
    let ns = super::search::ns_token(namespace);
    for table in ["memory_facts_fts", "memory_facts_fts_current"] {
        tx.prepare_cached(&format!(
            "INSERT INTO {table} (rowid, ns, text, subject) VALUES (?1, ?2, ?3, ?4)"
        ))?
        .execute(params![id, ns, v.text, v.subject])?;
    }
    Ok(id)
}

/// Run `ops` inside `tx` (the caller commits). The first stale or foreign target fails the batch.
pub fn run(
    tx: &Transaction<'_>,
    namespace: &str,
    ops: &[Op],
    p: &Provenance,
    now_ms: i64,
) -> Result<(Applied, Changes), FactError> {
    let mut applied = Applied::default();
    let mut changes = Changes::default();
    let e = |err| db(tx, err);
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Noop => applied.noops += 1,
            Op::Add {
                text,
                subject,
                predicate,
                object,
                valid_from,
                valid_to,
            } => {
                let text = text.trim();
                let dup: Option<i64> = tx
                    .query_row(
                        "SELECT id FROM memory_fact_versions
                         WHERE namespace = ?1 AND content_hash = ?2 AND invalidated_at IS NULL",
                        params![namespace, content_hash(text)],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(e)?;
                if dup.is_some() {
                    applied.duplicates += 1;
                    continue;
                }
                tx.execute(
                    "INSERT INTO memory_facts (namespace, created_ms) VALUES (?1, ?2)",
                    params![namespace, now_ms],
                )
                .map_err(e)?;
                let fact_id = tx.last_insert_rowid();
                let id = open_version(
                    tx,
                    namespace,
                    &NewVersion {
                        fact_id,
                        text,
                        subject: subject.as_deref().map(str::trim),
                        predicate: predicate.as_deref().map(str::trim),
                        object: object.as_deref().map(str::trim),
                        valid_from: *valid_from,
                        valid_to: *valid_to,
                        reason: None,
                    },
                    p,
                    now_ms,
                )
                .map_err(e)?;
                applied.added.push(id);
                changes.opened.push(Opened {
                    id,
                    namespace: namespace.to_string(),
                    recorded_at: now_ms,
                    text: text.to_string(),
                });
            }
            Op::Update {
                target,
                text,
                subject,
                predicate,
                object,
                valid_from,
                valid_to,
                reason,
            } => {
                let old = current_target(tx, namespace, i, *target)?;
                // An UPDATE that names no subject keeps the fact's (and its relation, see above).
                let (subject, predicate, object) = updated_fields(
                    i,
                    &old,
                    subject.as_deref().map(str::trim),
                    predicate.as_deref().map(str::trim),
                    object.as_deref().map(str::trim),
                )?;
                close(tx, *target, *valid_from, reason.as_deref(), p, now_ms).map_err(e)?;
                let text = text.trim();
                let id = open_version(
                    tx,
                    namespace,
                    &NewVersion {
                        fact_id: old.fact_id,
                        text,
                        subject,
                        predicate,
                        object,
                        valid_from: *valid_from,
                        valid_to: *valid_to,
                        reason: reason.as_deref(),
                    },
                    p,
                    now_ms,
                )
                .map_err(e)?;
                applied.updated.push((*target, id));
                changes.closed.push(*target);
                changes.opened.push(Opened {
                    id,
                    namespace: namespace.to_string(),
                    recorded_at: now_ms,
                    text: text.to_string(),
                });
            }
            Op::Invalidate {
                target,
                reason,
                valid_to,
            } => {
                current_target(tx, namespace, i, *target)?;
                close(tx, *target, *valid_to, reason.as_deref(), p, now_ms).map_err(e)?;
                record_closing(tx, namespace, *target, p, now_ms).map_err(e)?;
                applied.invalidated.push(*target);
                changes.closed.push(*target);
            }
        }
    }
    Ok((applied, changes))
}
