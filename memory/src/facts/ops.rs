//! The `record_facts` tool: its JSON Schema, and strict validation of a model's input against it.
//!
//! Whole or nothing: the first error rejects the batch, with a message naming the JSON path and what
//! was expected (`facts[2].target: 17 was not listed`), so the event that records the rejection
//! says exactly what the model got wrong. The validation is written out by hand rather than through
//! a generic JSON Schema validator because it also checks what the schema cannot say (a target must
//! be one of the listed ids, at most once per batch; `valid_to` not before `valid_from`), and it never
//! panics on any input (a test feeds garbage of every shape).
//!
//! Graph memory (`framework.memory.graph.enabled`): ADD and UPDATE may carry a relation,
//! `predicate` (a short verb phrase) and `object` (an entity name), both or neither, an object only
//! with a subject. Only agents with graph memory are offered the two fields
//! ([`record_facts_schema_for`]`(true)`) and accept them ([`parse_for`]`(.., true)`); with it off
//! the fields are unknown and a model that sends them anyway is told graph memory is off.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};

use super::Op;
use super::time::parse_time;

/// The tool's name (offered and forced in every memory call).
pub const RECORD_FACTS: &str = "record_facts";

/// Operations per batch at most.
pub const MAX_OPS: usize = 100;
/// Characters of a fact's text at most.
pub const MAX_TEXT: usize = 2000;
/// Characters of a subject at most.
pub const MAX_SUBJECT: usize = 200;
/// Characters of a reason at most.
pub const MAX_REASON: usize = 500;
/// Characters of a relation's predicate at most (a short verb phrase: "leads", "reports to").
pub const MAX_PREDICATE: usize = 60;
/// Characters of a relation's object at most (an entity name, as a subject).
pub const MAX_OBJECT: usize = 200;

const FIELDS: &[&str] = &[
    "op",
    "text",
    "subject",
    "valid_from",
    "valid_to",
    "target",
    "reason",
    "predicate",
    "object",
];

/// Why a `record_facts` input was rejected (what and where).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Rejected(pub String);

/// The input's JSON Schema without graph memory (no relation fields).
pub fn record_facts_schema() -> Value {
    record_facts_schema_for(false)
}

/// The input's JSON Schema; with `graph`, ADD and UPDATE may carry `predicate` and `object`.
pub fn record_facts_schema_for(graph: bool) -> Value {
    let mut schema = base_schema();
    if graph
        && let Some(props) = schema
            .pointer_mut("/properties/facts/items/properties")
            .and_then(Value::as_object_mut)
    {
        props.insert(
            "predicate".into(),
            json!({
                "type": ["string", "null"],
                "maxLength": MAX_PREDICATE,
                "description": "The relation from `subject` to `object`, a short verb phrase (\"leads\", \"reports to\", \"depends on\"), when the text states one (ADD, UPDATE). Both predicate and object, or neither."
            }),
        );
        props.insert(
            "object".into(),
            json!({
                "type": ["string", "null"],
                "maxLength": MAX_OBJECT,
                "description": "The entity the relation points to (a project, person, customer, system), spelled the same way every time; needs `subject`."
            }),
        );
    }
    schema
}

fn base_schema() -> Value {
    let time = |what: &str| {
        json!({
            "type": ["string", "null"],
            "description": format!("{what}: RFC 3339 with an offset (2026-05-03T09:00:00Z) or a date (2026-05-03); null when unknown."),
        })
    };
    json!({
        "type": "object",
        "properties": {
            "facts": {
                "type": "array",
                "maxItems": MAX_OPS,
                "description": "The operations, applied together or not at all. [{\"op\":\"NOOP\"}] when nothing is new.",
                "items": {
                    "type": "object",
                    "properties": {
                        "op": {
                            "type": "string",
                            "enum": ["ADD", "UPDATE", "INVALIDATE", "NOOP"],
                            "description": "ADD a new fact; UPDATE a listed fact that changed; INVALIDATE a listed fact no longer true; NOOP when nothing is new."
                        },
                        "text": {
                            "type": ["string", "null"],
                            "minLength": 1,
                            "maxLength": MAX_TEXT,
                            "description": "The fact, one self-contained statement with names and absolute dates (ADD, UPDATE)."
                        },
                        "subject": {
                            "type": ["string", "null"],
                            "maxLength": MAX_SUBJECT,
                            "description": "What the fact is about (project, person, customer, system), spelled the same way every time."
                        },
                        "valid_from": time("When the fact became true in the world"),
                        "valid_to": time("When it stopped being true in the world"),
                        "target": {
                            "type": ["integer", "null"],
                            "description": "The id of a listed fact (UPDATE, INVALIDATE). Never an id that was not listed."
                        },
                        "reason": {
                            "type": ["string", "null"],
                            "maxLength": MAX_REASON,
                            "description": "Why a fact is updated or invalidated (e.g. \"duplicate of 12\")."
                        }
                    },
                    "required": ["op"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["facts"],
        "additionalProperties": false
    })
}

/// The tool's description.
pub fn record_facts_description() -> &'static str {
    "Record long-term facts learned from the exchange: ADD new facts, UPDATE or INVALIDATE listed \
     facts (by their id), or NOOP when there is nothing new. Times are RFC 3339 or null. The whole \
     batch is rejected if any operation is malformed or targets an id that was not listed."
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn reject(path: &str, what: impl std::fmt::Display) -> Rejected {
    Rejected(format!("{path}: {what}"))
}

/// A string field: absent or null → None; a string is trimmed and bounded (empty → None unless
/// `required`).
fn string(
    item: &Map<String, Value>,
    path: &str,
    field: &str,
    max: usize,
) -> Result<Option<String>, Rejected> {
    match item.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            let s = s.trim();
            let chars = s.chars().count();
            if chars > max {
                return Err(reject(
                    &format!("{path}.{field}"),
                    format!("{chars} characters, at most {max} allowed; shorten it"),
                ));
            }
            if s.contains('\0') {
                return Err(reject(
                    &format!("{path}.{field}"),
                    "contains a NUL character",
                ));
            }
            Ok((!s.is_empty()).then(|| s.to_string()))
        }
        Some(other) => Err(reject(
            &format!("{path}.{field}"),
            format!("expected a string or null, got {}", kind(other)),
        )),
    }
}

fn time(item: &Map<String, Value>, path: &str, field: &str) -> Result<Option<i64>, Rejected> {
    match item.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => parse_time(s)
            .map(Some)
            .map_err(|e| reject(&format!("{path}.{field}"), e)),
        Some(other) => Err(reject(
            &format!("{path}.{field}"),
            format!("expected an RFC 3339 string or null, got {}", kind(other)),
        )),
    }
}

fn target(
    item: &Map<String, Value>,
    path: &str,
    listed: &HashSet<i64>,
    seen: &mut HashMap<i64, usize>,
    index: usize,
) -> Result<i64, Rejected> {
    let at = format!("{path}.target");
    let id = match item.get("target") {
        None | Some(Value::Null) => {
            return Err(reject(&at, "required: the id of the listed fact to change"));
        }
        Some(Value::Number(n)) => n
            .as_i64()
            .ok_or_else(|| reject(&at, format!("{n} is not an integer id")))?,
        Some(other) => {
            return Err(reject(
                &at,
                format!("expected an integer id, got {}", kind(other)),
            ));
        }
    };
    if !listed.contains(&id) {
        return Err(reject(&at, format!("{id} was not listed")));
    }
    if let Some(first) = seen.insert(id, index) {
        return Err(reject(
            &at,
            format!("{id} is already the target of facts[{first}]; one operation per fact"),
        ));
    }
    Ok(id)
}

fn absent(item: &Map<String, Value>, path: &str, field: &str, why: &str) -> Result<(), Rejected> {
    match item.get(field) {
        None | Some(Value::Null) => Ok(()),
        Some(_) => Err(reject(&format!("{path}.{field}"), why)),
    }
}

/// An op's relation: `predicate` and `object`, both or neither, only with graph memory, only on
/// ADD and UPDATE, an object only with a subject (an UPDATE may keep the fact's subject: the store
/// checks that one).
fn relation(
    item: &Map<String, Value>,
    path: &str,
    op: &str,
    has_subject: bool,
    graph: bool,
) -> Result<(Option<String>, Option<String>), Rejected> {
    let given = |f: &str| !matches!(item.get(f), None | Some(Value::Null));
    if !graph {
        for field in ["predicate", "object"] {
            if given(field) {
                return Err(reject(
                    &format!("{path}.{field}"),
                    "graph memory is off for this agent (framework.memory.graph.enabled); \
                     record the relation in `text` and leave predicate and object out",
                ));
            }
        }
        return Ok((None, None));
    }
    let predicate = string(item, path, "predicate", MAX_PREDICATE)?;
    let object = string(item, path, "object", MAX_OBJECT)?;
    match (&predicate, &object) {
        (None, None) => return Ok((None, None)),
        _ if !matches!(op, "ADD" | "UPDATE") => {
            let field = if predicate.is_some() {
                "predicate"
            } else {
                "object"
            };
            return Err(reject(
                &format!("{path}.{field}"),
                format!("{op} takes no relation; only ADD and UPDATE carry predicate and object"),
            ));
        }
        (Some(_), None) => {
            return Err(reject(
                &format!("{path}.object"),
                "required with a predicate (both or neither): the entity the relation points to",
            ));
        }
        (None, Some(_)) => {
            return Err(reject(
                &format!("{path}.predicate"),
                "required with an object (both or neither): the relation, e.g. \"leads\"",
            ));
        }
        (Some(_), Some(_)) => {}
    }
    if op == "ADD" && !has_subject {
        return Err(reject(
            &format!("{path}.subject"),
            "required with an object: a relation goes from the subject to the object",
        ));
    }
    Ok((predicate, object))
}

fn ordered(
    path: &str,
    from: Option<i64>,
    to: Option<i64>,
) -> Result<(Option<i64>, Option<i64>), Rejected> {
    if let (Some(f), Some(t)) = (from, to)
        && t < f
    {
        return Err(reject(
            &format!("{path}.valid_to"),
            "is before valid_from; a fact cannot stop holding before it starts",
        ));
    }
    Ok((from, to))
}

/// Validate a `record_facts` input against the schema and the ids that were listed. Whole or
/// nothing: any error rejects the batch, with a message saying what and where
/// (`facts[2].target: 17 was not listed`). Graph memory off: see [`parse_for`].
pub fn parse(input: &Value, listed: &HashSet<i64>) -> Result<Vec<Op>, Rejected> {
    parse_for(input, listed, false)
}

/// [`parse`], with graph memory on or off: with `graph`, ADD and UPDATE may carry `predicate` and
/// `object` (both or neither; an object only with a subject); without it, either is rejected
/// saying graph memory is off.
pub fn parse_for(input: &Value, listed: &HashSet<i64>, graph: bool) -> Result<Vec<Op>, Rejected> {
    let Value::Object(top) = input else {
        return Err(reject(
            "input",
            format!(
                "expected an object {{\"facts\": [...]}}, got {}",
                kind(input)
            ),
        ));
    };
    if let Some(extra) = top.keys().find(|k| k.as_str() != "facts") {
        return Err(reject(
            &format!("input.{extra}"),
            "unknown field; the input has only `facts`",
        ));
    }
    let facts = match top.get("facts") {
        None => return Err(reject("facts", "required: an array of operations")),
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(reject(
                "facts",
                format!("expected an array of operations, got {}", kind(other)),
            ));
        }
    };
    if facts.len() > MAX_OPS {
        return Err(reject(
            "facts",
            format!("{} operations, at most {MAX_OPS} per call", facts.len()),
        ));
    }
    let mut seen = HashMap::new();
    let mut ops = Vec::with_capacity(facts.len());
    for (i, item) in facts.iter().enumerate() {
        let path = format!("facts[{i}]");
        let Value::Object(item) = item else {
            return Err(reject(
                &path,
                format!("expected an object with `op`, got {}", kind(item)),
            ));
        };
        if let Some(extra) = item.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(reject(
                &format!("{path}.{extra}"),
                format!("unknown field; allowed: {}", FIELDS.join(", ")),
            ));
        }
        let op = match item.get("op") {
            Some(Value::String(s)) => s.as_str(),
            None => {
                return Err(reject(
                    &format!("{path}.op"),
                    "required: ADD, UPDATE, INVALIDATE or NOOP",
                ));
            }
            Some(other) => {
                return Err(reject(
                    &format!("{path}.op"),
                    format!(
                        "expected ADD, UPDATE, INVALIDATE or NOOP, got {}",
                        kind(other)
                    ),
                ));
            }
        };
        let text = string(item, &path, "text", MAX_TEXT)?;
        let subject = string(item, &path, "subject", MAX_SUBJECT)?;
        let reason = string(item, &path, "reason", MAX_REASON)?;
        let (predicate, object) = relation(item, &path, op, subject.is_some(), graph)?;
        let (valid_from, valid_to) = ordered(
            &path,
            time(item, &path, "valid_from")?,
            time(item, &path, "valid_to")?,
        )?;
        let need_text = |text: Option<String>| {
            text.ok_or_else(|| {
                reject(
                    &format!("{path}.text"),
                    format!("required for {op}: the fact as one statement"),
                )
            })
        };
        ops.push(match op {
            "ADD" => {
                absent(
                    item,
                    &path,
                    "target",
                    "ADD opens a new fact and takes no target; to change a listed fact use UPDATE",
                )?;
                Op::Add {
                    text: need_text(text)?,
                    subject,
                    predicate,
                    object,
                    valid_from,
                    valid_to,
                }
            }
            "UPDATE" => Op::Update {
                target: target(item, &path, listed, &mut seen, i)?,
                text: need_text(text)?,
                subject,
                predicate,
                object,
                valid_from,
                valid_to,
                reason,
            },
            "INVALIDATE" => {
                absent(
                    item,
                    &path,
                    "text",
                    "INVALIDATE closes a fact and takes no text; to change its text use UPDATE",
                )?;
                Op::Invalidate {
                    target: target(item, &path, listed, &mut seen, i)?,
                    reason,
                    valid_to,
                }
            }
            "NOOP" => Op::Noop,
            other => {
                return Err(reject(
                    &format!("{path}.op"),
                    format!("{other:?} is not an operation; use ADD, UPDATE, INVALIDATE or NOOP"),
                ));
            }
        });
    }
    Ok(ops)
}
