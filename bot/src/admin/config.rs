//! The Config page's endpoints: the file's text (with an ETag for the save to come) and validation of
//! edited text, with the hierarchy the text describes (the preview beside the editor).
//!
//! Invariants:
//! - validation reads only the request's text (and prompt files the text names, as `opc validate`
//!   does); the file and the running config are untouched (the running org is only read, to mark
//!   what the text changes);
//! - the preview reads the agents from the YAML tree, not from the validated config, so an agent added
//!   or moved shows while the rest of the file still has errors; only text that is not YAML, or has
//!   no `agents` mapping, has no preview (and the answer says why);
//! - the preview's cost is one more parse of the text (milliseconds for a 1,000-agent org) and at most
//!   [`MAX_PREVIEW_AGENTS`] agents in the answer.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::Admin;
use crate::validation::validate_text;

/// `GET /admin/api/config`: `{"file", "text", "etag"}`, the ETag also as a header.
pub async fn read(State(admin): State<Arc<Admin>>) -> Response {
    let path = admin.config_path.clone();
    let read = tokio::task::spawn_blocking(move || std::fs::read(&path)).await;
    let bytes = match read {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!(
                    "cannot read {}: {e}; check the file is still there and readable",
                    admin.config_path.display()
                ),
            );
        }
        Err(_) => return error(StatusCode::INTERNAL_SERVER_ERROR, "the read did not finish"),
    };
    let etag = etag_of(&bytes);
    let Ok(text) = String::from_utf8(bytes) else {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!(
                "{} is not UTF-8 text; save it as UTF-8",
                admin.config_path.display()
            ),
        );
    };
    (
        [
            (header::ETAG, etag.clone()),
            (header::CACHE_CONTROL, "no-store".into()),
        ],
        Json(json!({
            "file": admin.config_path.display().to_string(),
            "text": text,
            "etag": etag,
        })),
    )
        .into_response()
}

/// The validation request.
#[derive(Deserialize)]
pub struct ValidateRequest {
    text: String,
}

/// `POST /admin/api/config/validate` with `{"text": "<yaml>"}`: what `opc validate --format json`
/// prints for that text as the config file, plus `org`: the hierarchy it describes, compared with the
/// running org ([`org_preview`]).
pub async fn validate(
    State(admin): State<Arc<Admin>>,
    body: Result<Json<ValidateRequest>, JsonRejection>,
) -> Response {
    let request = match body {
        Ok(Json(request)) => request,
        Err(rejection) => return rejected(&rejection, "{\"text\": \"<yaml>\"}"),
    };
    if let Some(response) = too_large(&request.text) {
        return response;
    }
    let file = admin.config_path.display().to_string();
    let base_dir = admin.base_dir.clone();
    let running = admin.live.get().map(|live| (live.get(), live.generation()));
    // Validation of a large org takes milliseconds: off the async workers.
    let checked = tokio::task::spawn_blocking(move || {
        let org = org_preview(
            &request.text,
            running
                .as_ref()
                .map(|(loaded, generation)| (&loaded.org, *generation)),
        );
        let mut report = validate_text(&file, request.text, &base_dir);
        if let Some(fields) = report.as_object_mut() {
            fields.insert("org".into(), org);
        }
        report
    });
    match checked.await {
        Ok(report) => Json(report).into_response(),
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "validation did not finish",
        ),
    }
}

/// Most agents a preview lists; past it the answer says how many there are (`total`) and the page says
/// that the rest is not shown. Far above a real org (the benchmark org has 1,000).
pub(super) const MAX_PREVIEW_AGENTS: usize = 5_000;

/// The hierarchy `text` describes, read from its YAML tree:
/// `{"readable": true, "root", "agents": [{"id", "role", "parent", "children", "change"?}],
/// "removed": [{"id", "role", "parent"}], "compared", "generation", "total", "truncated"}`, or
/// `{"readable": false, "reason"}` when the agents cannot be read at all.
///
/// An agent's parent is its `parent:`, else the agent whose `children:` lists it; `children` are the
/// agents whose parent it is, in the file's order. Against `running` (the running org and its
/// generation), an agent is `added` when the running org has no such id and `moved` when its parent
/// differs; running agents the text no longer has are listed in `removed`.
pub(super) fn org_preview(text: &str, running: Option<(&opc_hierarchy::OrgTree, u64)>) -> Value {
    use opc_hierarchy::yaml::{self, Value as Yaml};
    let unreadable = |reason: String| json!({ "readable": false, "reason": reason });
    let doc = match yaml::parse(text) {
        Ok(doc) => doc,
        Err(e) => {
            return unreadable(format!(
                "the text is not YAML at line {}, column {}: {}",
                e.span.line, e.span.column, e.message
            ));
        }
    };
    let Some(agents) = doc.get("agents") else {
        return unreadable("there is no `agents:` mapping".into());
    };
    let Some(entries) = agents.entries() else {
        return unreadable(format!(
            "`agents:` (line {}) is {}, not a mapping of agent ids",
            agents.span.line,
            agents.value.kind()
        ));
    };
    let text_of = |node: Option<&yaml::Node>| match node.map(|n| &n.value) {
        Some(Yaml::Str(s)) => Some(s.clone()),
        _ => None,
    };
    // The first entry of an id counts (a duplicate is an error the problems list names).
    let mut seen = std::collections::HashSet::new();
    /// An agent as the text lists it: id, role, `parent:` and `children:`.
    type Listed = (String, Option<String>, Option<String>, Vec<String>);
    let mut listed: Vec<Listed> = Vec::new();
    for entry in entries {
        if !seen.insert(entry.key.as_str()) {
            continue;
        }
        let children = match entry.value.get("children").map(|n| &n.value) {
            Some(Yaml::Seq(items)) => items.iter().filter_map(|n| text_of(Some(n))).collect(),
            _ => Vec::new(),
        };
        listed.push((
            entry.key.clone(),
            text_of(entry.value.get("role")),
            text_of(entry.value.get("parent")),
            children,
        ));
    }
    let total = listed.len();
    let mut claimed: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    for (id, _, _, children) in &listed {
        for child in children {
            claimed.entry(child.as_str()).or_insert(id.as_str());
        }
    }
    let parents: Vec<Option<String>> = listed
        .iter()
        .map(|(id, _, parent, _)| {
            parent
                .clone()
                .or_else(|| claimed.get(id.as_str()).map(|p| p.to_string()))
        })
        .collect();
    let mut children_of: std::collections::HashMap<&str, Vec<&str>> =
        std::collections::HashMap::new();
    for ((id, ..), parent) in listed.iter().zip(&parents) {
        if let Some(parent) = parent {
            children_of.entry(parent.as_str()).or_default().push(id);
        }
    }
    let root = listed
        .iter()
        .zip(&parents)
        .find(|(_, parent)| parent.is_none())
        .map(|((id, ..), _)| id.clone());
    let agents: Vec<Value> = listed
        .iter()
        .zip(&parents)
        .take(MAX_PREVIEW_AGENTS)
        .map(|((id, role, _, _), parent)| {
            let mut agent = json!({
                "id": id,
                "role": role,
                "parent": parent,
                "children": children_of.get(id.as_str()).cloned().unwrap_or_default(),
            });
            if let Some((org, _)) = running {
                let change = if !org.contains(id) {
                    Some("added")
                } else if org.parent(id) != parent.as_deref() {
                    Some("moved")
                } else {
                    None
                };
                if let Some(change) = change {
                    agent["change"] = change.into();
                    if change == "moved" {
                        agent["was"] = org.parent(id).into();
                    }
                }
            }
            agent
        })
        .collect();
    let removed: Vec<Value> = running.map_or_else(Vec::new, |(org, _)| {
        org.agent_ids()
            .filter(|id| !seen.contains(id))
            .take(MAX_PREVIEW_AGENTS)
            .map(|id| json!({ "id": id, "role": org.role(id), "parent": org.parent(id) }))
            .collect()
    });
    json!({
        "readable": true,
        "root": root,
        "agents": agents,
        "removed": removed,
        "compared": running.is_some(),
        "generation": running.map(|(_, generation)| generation),
        "total": total,
        "truncated": total > MAX_PREVIEW_AGENTS,
    })
}

/// The structured-edit request: the editor's text and the action to apply to it.
#[derive(Deserialize)]
pub struct EditRequest {
    text: String,
    action: opc_hierarchy::edit::Action,
}

/// `POST /admin/api/config/edit` with `{"text", "action"}`: the text with the action applied as a
/// minimal edit (`{"text"}`), or 422 with why not. Nothing is saved: the console puts the result in
/// the editor, where it is validated and saved like any edit.
pub async fn edit(body: Result<Json<EditRequest>, JsonRejection>) -> Response {
    let request = match body {
        Ok(Json(request)) => request,
        Err(rejection) => {
            return rejected(
                &rejection,
                "{\"text\": \"<yaml>\", \"action\": {\"kind\": \"add_agent\" | \"remove_agent\" | \"move_agent\" | \"set_field\" | \"share_with\", …}}",
            );
        }
    };
    if let Some(response) = too_large(&request.text) {
        return response;
    }
    match opc_hierarchy::edit::apply(&request.text, &request.action) {
        Ok(text) => Json(json!({ "text": text })).into_response(),
        Err(e) => error(StatusCode::UNPROCESSABLE_ENTITY, &e.to_string()),
    }
}

/// The 413 for a config text over [`super::MAX_CONFIG_BYTES`], or `None` when it is within it.
pub(super) fn too_large(text: &str) -> Option<Response> {
    (text.len() > super::MAX_CONFIG_BYTES).then(|| {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!(
                "the config text is {} bytes; the console takes at most {} MiB (split prompts into files with `prompt: file:…`)",
                text.len(),
                super::MAX_CONFIG_BYTES >> 20
            ),
        )
    })
}

/// The answer to a body that is not the JSON an endpoint expects (`expected`, shown as an example),
/// or that is over the body limit (413, with the same limit as [`too_large`]).
pub(super) fn rejected(rejection: &JsonRejection, expected: &str) -> Response {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!(
                "the request is too large: the console takes a config text of at most {} MiB",
                super::MAX_CONFIG_BYTES >> 20
            ),
        );
    }
    error(
        rejection.status(),
        &format!(
            "expected a JSON body {expected} ({})",
            rejection.body_text()
        ),
    )
}

/// The ETag of the file's bytes: their SHA-256, quoted.
pub(super) fn etag_of(bytes: &[u8]) -> String {
    format!("\"{:x}\"", Sha256::digest(bytes))
}

/// An error answer: `{"error": message}`.
pub(super) fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const RUNNING: &str = "
framework:
  defaultModel: m
  providers: { p: { kind: anthropic, models: { m: { input: 1, output: 1 } } } }
agents:
  ceo: { role: CEO, level: 0, children: [a, b] }
  a: { role: A, level: 1, parent: ceo }
  b: { role: B, level: 1, parent: ceo, children: [c] }
  c: { role: C, level: 2, parent: b }
";

    fn org(text: &str) -> opc_hierarchy::OrgTree {
        opc_hierarchy::parse("t.yaml", text.to_string(), None)
            .unwrap()
            .org
    }

    fn agent<'a>(preview: &'a Value, id: &str) -> &'a Value {
        preview["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == id)
            .unwrap()
    }

    #[test]
    fn an_added_a_moved_and_a_removed_agent_are_marked_while_the_rest_has_errors() {
        let running = org(RUNNING);
        // `c` moved under `a` (by `parent:` alone: `b` still lists it), `d` added with an unknown
        // field (an error elsewhere), `b`… kept, and `a`'s sibling `x` never existed: removed is none.
        let edited = "
framework: { name: T, nonsense: 1 }
agents:
  ceo: { role: CEO, level: 0, children: [a, b] }
  a: { role: A, level: 1, parent: ceo, children: [c] }
  c: { role: C, level: 2, parent: a }
  d: { role: New, level: 2, parent: a, bogus: true }
";
        let preview = org_preview(edited, Some((&running, 3)));
        assert_eq!(preview["readable"], true, "{preview}");
        assert_eq!(preview["root"], "ceo");
        assert_eq!(preview["generation"], 3);
        assert_eq!(agent(&preview, "c")["change"], "moved");
        assert_eq!(agent(&preview, "c")["was"], "b");
        assert_eq!(agent(&preview, "d")["change"], "added");
        assert_eq!(agent(&preview, "a")["children"], json!(["c", "d"]));
        assert!(agent(&preview, "ceo").get("change").is_none());
        assert_eq!(
            preview["removed"],
            json!([{"id": "b", "role": "B", "parent": "ceo"}])
        );
    }

    #[test]
    fn a_parent_is_read_from_children_when_the_agent_names_none() {
        let preview = org_preview(
            "agents:\n  ceo: { role: CEO, children: [new] }\n  new: { role: N }\n",
            None,
        );
        assert_eq!(agent(&preview, "new")["parent"], "ceo");
        assert_eq!(preview["compared"], false);
    }

    #[test]
    fn text_without_readable_agents_says_why() {
        let preview = org_preview("agents: [\n", None);
        assert_eq!(preview["readable"], false);
        assert!(
            preview["reason"]
                .as_str()
                .unwrap()
                .contains("not YAML at line"),
            "{preview}"
        );
        let preview = org_preview("framework: {}\n", None);
        assert!(preview["reason"].as_str().unwrap().contains("no `agents:`"));
        let preview = org_preview("agents: [a, b]\n", None);
        assert!(
            preview["reason"]
                .as_str()
                .unwrap()
                .contains("not a mapping"),
            "{preview}"
        );
    }
}
