//! Saving the config from the console: the diff first, then a checked, atomic write that keeps the
//! previous version, and an audit record.
//!
//! Invariants:
//! - text with validation errors is never written (422, with the same report the editor shows);
//! - a file changed on disk since the console loaded it is never overwritten: the ETag the console
//!   sent must be the file's current SHA-256 (409, with the current text and what changed);
//! - the write is atomic: a temporary file in the same directory, fsync, rename, fsync of the directory.
//!   A crash leaves either the old file or the new one, never half of one;
//! - before the rename, the version being replaced is copied to `.opc/config-history/` (beside the
//!   config file) under its UTC time, and every save appends one line to `audit.jsonl` there: when,
//!   who (the access token's holder, or a loopback user), the file, and lines added and removed;
//! - saves are serialised: two consoles cannot interleave a check and a write.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use similar::{ChangeTag, TextDiff};

use super::Admin;
use super::config::{error, etag_of};
use crate::commands::validate::validate_text;

/// Where earlier versions and the audit log live, relative to the config file's directory.
const HISTORY_DIR: &str = ".opc/config-history";

/// A unified diff from `old` to `new` (3 lines of context) and the lines added and removed.
pub fn diff(old: &str, new: &str, old_name: &str, new_name: &str) -> (String, usize, usize) {
    let d = TextDiff::from_lines(old, new);
    let (mut added, mut removed) = (0, 0);
    for change in d.iter_all_changes() {
        match change.tag() {
            ChangeTag::Insert => added += 1,
            ChangeTag::Delete => removed += 1,
            ChangeTag::Equal => {}
        }
    }
    let text = d
        .unified_diff()
        .context_radius(3)
        .header(old_name, new_name)
        .to_string();
    (text, added, removed)
}

/// `{"text"}` for a diff; `{"text", "etag", "base"?}` for a save (`base`: the text the console
/// loaded, to show what changed on disk since).
#[derive(Deserialize)]
pub struct SaveRequest {
    text: String,
    #[serde(default)]
    etag: Option<String>,
    #[serde(default)]
    base: Option<String>,
}

#[allow(clippy::result_large_err)] // the error is the HTTP answer itself; not a hot path
fn body(body: Result<Json<SaveRequest>, JsonRejection>) -> Result<SaveRequest, Response> {
    body.map(|Json(r)| r).map_err(|rejection| {
        error(
            rejection.status(),
            &format!(
                "expected a JSON body {{\"text\": \"<yaml>\", \"etag\": \"<from GET /admin/api/config>\"}} ({})",
                rejection.body_text()
            ),
        )
    })
}

/// `POST /admin/api/config/diff` `{"text"}`: what saving `text` would change in the file on disk.
pub async fn preview(
    State(admin): State<Arc<Admin>>,
    request: Result<Json<SaveRequest>, JsonRejection>,
) -> Response {
    let request = match body(request) {
        Ok(r) => r,
        Err(response) => return response,
    };
    let current = match read_current(&admin.config_path).await {
        Ok((text, _)) => text,
        Err(response) => return response,
    };
    let (diff, added, removed) = diff(&current, &request.text, "on disk", "edited");
    Json(json!({ "diff": diff, "added": added, "removed": removed })).into_response()
}

/// The file's text and ETag, read off the async workers.
#[allow(clippy::result_large_err)] // the error is the HTTP answer itself
async fn read_current(path: &Path) -> Result<(String, String), Response> {
    let owned = path.to_path_buf();
    let bytes = match tokio::task::spawn_blocking(move || std::fs::read(owned)).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => {
            return Err(error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("cannot read {}: {e}", path.display()),
            ));
        }
        Err(_) => {
            return Err(error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the read did not finish",
            ));
        }
    };
    let etag = etag_of(&bytes);
    String::from_utf8(bytes)
        .map(|text| (text, etag))
        .map_err(|_| {
            error(
                StatusCode::UNPROCESSABLE_ENTITY,
                &format!("{} is not UTF-8 text; save it as UTF-8", path.display()),
            )
        })
}

/// Who saved: the console sends the access token when it has one; otherwise the listener let the
/// request in because it came from this machine.
pub(super) fn who(headers: &HeaderMap) -> &'static str {
    if headers.contains_key(header::AUTHORIZATION) {
        "console (access token)"
    } else {
        "console (loopback)"
    }
}

/// `POST /admin/api/config/save` `{"text", "etag", "base"?}`.
pub async fn save(
    State(admin): State<Arc<Admin>>,
    headers: HeaderMap,
    request: Result<Json<SaveRequest>, JsonRejection>,
) -> Response {
    let request = match body(request) {
        Ok(r) => r,
        Err(response) => return response,
    };
    let Some(etag) = request.etag.clone() else {
        return error(
            StatusCode::BAD_REQUEST,
            "a save needs the \"etag\" the file had when it was loaded (GET /admin/api/config), so a change made on disk meanwhile is never overwritten",
        );
    };
    let file = admin.config_path.display().to_string();
    let text = request.text.clone();
    let base_dir = admin.base_dir.clone();
    let check = {
        let file = file.clone();
        tokio::task::spawn_blocking(move || validate_text(&file, text, &base_dir)).await
    };
    let report = match check {
        Ok(report) => report,
        Err(_) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "validation did not finish",
            );
        }
    };
    if report["valid"] != Value::Bool(true) {
        let errors = report["errors"].as_array().map_or(0, Vec::len);
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({
                "error": format!("not saved: the config has {errors} error{}; fix {} first", if errors == 1 { "" } else { "s" }, if errors == 1 { "it" } else { "them" }),
                "report": report,
            })),
        )
            .into_response();
    }

    let _one_at_a_time = admin.save_lock.lock().await;
    let (current, current_etag) = match read_current(&admin.config_path).await {
        Ok(c) => c,
        Err(response) => return response,
    };
    if current_etag != etag {
        let base = request.base.as_deref().unwrap_or(&request.text);
        let (diff, added, removed) = diff(base, &current, "as loaded", "on disk now");
        return (
            StatusCode::CONFLICT,
            Json(json!({
                "error": format!("not saved: {file} changed on disk since it was loaded; review the change, then load the file again (your edits are kept in the editor until you do)"),
                "etag": current_etag,
                "text": current,
                "diff": diff,
                "added": added,
                "removed": removed,
            })),
        )
            .into_response();
    }
    let (summary, added, removed) = diff(&current, &request.text, "before", "after");
    let path = admin.config_path.clone();
    let history = admin.base_dir.join(HISTORY_DIR);
    let by = who(&headers);
    let new_etag = etag_of(request.text.as_bytes());
    let new_text = request.text;
    // Held from before the write to the reload, so the watcher cannot apply the file first.
    let held = match admin.reloader.get() {
        Some(reloader) => Some((reloader, reloader.hold().await)),
        None => None,
    };
    let written = tokio::task::spawn_blocking(move || {
        write_with_history(&path, &history, &current, &new_text, by, added, removed)
    })
    .await;
    match written {
        Ok(Ok(kept)) => {
            tracing::info!(file = %file, added, removed, by, "config saved from the admin console");
            // Applied before answering, so the console shows the new org as soon as it hears back.
            let reload = match held {
                Some((reloader, held)) => serde_json::to_value(
                    reloader
                        .reload_held(held, crate::reload::Trigger::Console)
                        .await,
                )
                .unwrap_or_default(),
                None => json!({"outcome": "not_running"}),
            };
            let applied = reload["outcome"] == "applied" || reload["outcome"] == "unchanged";
            Json(json!({
                "saved": true,
                "etag": new_etag,
                "previous": kept,
                "added": added,
                "removed": removed,
                "diff": summary,
                "applied": applied,
                "reload": reload,
            }))
            .into_response()
        }
        Ok(Err(e)) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("not saved: {e}; the file on disk is unchanged"),
        ),
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the save did not finish; the file on disk is unchanged or whole",
        ),
    }
}

/// Keep `current` in `history`, write `new` over `path` atomically, and append the audit line.
/// Returns the kept version's file name.
fn write_with_history(
    path: &Path,
    history: &Path,
    current: &str,
    new: &str,
    by: &str,
    added: usize,
    removed: usize,
) -> std::io::Result<String> {
    let context = |what: &str, p: &Path| {
        let p = p.display().to_string();
        let what = what.to_string();
        move |e: std::io::Error| std::io::Error::new(e.kind(), format!("{what} {p}: {e}"))
    };
    std::fs::create_dir_all(history).map_err(context("cannot create", history))?;
    let at = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
    let name = format!(
        "{}-{}",
        at.replace(':', "-"),
        path.file_name()
            .map_or("config.yaml".into(), |n| n.to_string_lossy())
    );
    let kept = history.join(&name);
    write_synced(&kept, current.as_bytes())
        .map_err(context("cannot keep the previous version in", &kept))?;

    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let temp = dir.join(format!(
        ".{}.saving-{}",
        path.file_name()
            .map_or("config".into(), |n| n.to_string_lossy()),
        // Saves are serialised within this process (`save_lock`).
        std::process::id()
    ));
    if let Err(e) = write_synced(&temp, new.as_bytes()) {
        let _ = std::fs::remove_file(&temp);
        return Err(context("cannot write", &temp)(e));
    }
    if let Err(e) = std::fs::rename(&temp, path) {
        let _ = std::fs::remove_file(&temp);
        return Err(context("cannot replace", path)(e));
    }
    // The rename is durable once the directory is synced.
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    let line = json!({
        "at": at,
        "by": by,
        "file": path.display().to_string(),
        "added": added,
        "removed": removed,
        "previous": name,
    });
    let audit = history.join("audit.jsonl");
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&audit)
        .map_err(context("saved, but cannot record it in", &audit))?;
    writeln!(log, "{line}").map_err(context("saved, but cannot record it in", &audit))?;
    Ok(name)
}

fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::File::create(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// `GET /admin/api/config/history`: earlier versions, newest first.
pub async fn list(State(admin): State<Arc<Admin>>) -> Response {
    let dir = admin.base_dir.join(HISTORY_DIR);
    let listed = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<Value>> {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut versions = Vec::new();
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == "audit.jsonl" || !entry.file_type()?.is_file() {
                continue;
            }
            versions.push(json!({ "name": name, "bytes": entry.metadata()?.len() }));
        }
        // Names start with the UTC time, so they sort by it.
        versions.sort_by(|a, b| b["name"].as_str().cmp(&a["name"].as_str()));
        Ok(versions)
    })
    .await;
    match listed {
        Ok(Ok(versions)) => Json(json!({ "versions": versions })).into_response(),
        Ok(Err(e)) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("cannot list the config history: {e}"),
        ),
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the listing did not finish",
        ),
    }
}

/// `GET /admin/api/config/history/{name}`: one earlier version's text. Restoring it is a save.
pub async fn version(State(admin): State<Arc<Admin>>, UrlPath(name): UrlPath<String>) -> Response {
    // A bare file name from the listing: nothing that could leave the history directory.
    if name.is_empty()
        || name.starts_with('.')
        || name.contains(['/', '\\'])
        || name == "audit.jsonl"
    {
        return error(
            StatusCode::NOT_FOUND,
            "no such version; list them with GET /admin/api/config/history",
        );
    }
    let path = admin.base_dir.join(HISTORY_DIR).join(&name);
    match tokio::task::spawn_blocking(move || std::fs::read_to_string(path)).await {
        Ok(Ok(text)) => Json(json!({ "name": name, "text": text })).into_response(),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => error(
            StatusCode::NOT_FOUND,
            "no such version; list them with GET /admin/api/config/history",
        ),
        Ok(Err(e)) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("cannot read that version: {e}"),
        ),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the read did not finish"),
    }
}
