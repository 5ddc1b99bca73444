//! Saving the config from the console: the diff first, then a checked, atomic write that keeps the
//! previous version, and an audit record.
//!
//! Invariants:
//! - text with validation errors is never written (422, with the same report the editor shows);
//! - a file changed on disk since the console loaded it is never overwritten: the ETag the console
//!   sent must be the file's current SHA-256 (409, with the current text and what changed);
//! - the write is atomic: a temporary file in the same directory, fsync, rename, fsync of the directory.
//!   A crash leaves either the old file or the new one, never half of one;
//! - the version being replaced is kept in `.opc/config-history/` (beside the config file) under its UTC
//!   time, and every save appends one line to `audit.jsonl` there: when, who (the access token's
//!   holder, or a loopback user), the file, lines added and removed, and the kept copy's name;
//! - a kept copy is listed only together with its audit line. The order makes it so: the copy is
//!   written hidden (`.<name>.pending-<pid>`), then the config is replaced, then the audit line is
//!   appended and synced, and only then the copy is renamed to its listed name. A crash (kill -9,
//!   power loss) at any point leaves at most a hidden copy and the save's temporary file
//!   (`.<config>.saving-<pid>`), which [`recover`] settles when `opc run` starts;
//! - saves are serialised: two consoles cannot interleave a check and a write;
//! - on a cluster (PostgreSQL), a save applied here (or already running here) is also recorded in
//!   the database's config history ([`opc_agents::store::Cluster::save_config`]), from which every
//!   other node writes and applies it ([`crate::reload::Reloader::follow`]); a save this node did
//!   not apply is not shared. The answer's `cluster` says which: the history's id, or why not.

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
use super::config::{error, etag_of, rejected, too_large};
use crate::validation::validate_text;

/// Where earlier versions and the audit log live, relative to the config file's directory.
pub(super) const HISTORY_DIR: &str = ".opc/config-history";

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
    let request = body.map(|Json(r)| r).map_err(|rejection| {
        rejected(
            &rejection,
            "{\"text\": \"<yaml>\", \"etag\": \"<from GET /admin/api/config>\"}",
        )
    })?;
    for text in std::iter::once(&request.text).chain(request.base.as_ref()) {
        if let Some(response) = too_large(text) {
            return Err(response);
        }
    }
    Ok(request)
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
    let shared_text = admin.cluster.as_ref().map(|_| request.text.clone());
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
            let cluster = match (&admin.cluster, shared_text) {
                (Some(cluster), Some(text)) if applied => share(&**cluster, &text, by).await,
                (Some(_), _) => json!({
                    "shared": false,
                    "error": "not applied on this node, so not sent to the other nodes",
                }),
                (None, _) => Value::Null,
            };
            Json(json!({
                "saved": true,
                "etag": new_etag,
                "previous": kept,
                "added": added,
                "removed": removed,
                "diff": summary,
                "applied": applied,
                "reload": reload,
                "cluster": cluster,
            }))
            .into_response()
        }
        Ok(Err(SaveError::NotWritten(e))) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("not saved: {e}; the file on disk is unchanged"),
        ),
        Ok(Err(SaveError::Unrecorded(e))) => {
            tracing::warn!(file = %file, error = %e, "config saved, but the save is not recorded");
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!(
                    "the file is saved, but {e}; it is recorded when opc run next starts, and applied then or on the next reload"
                ),
            )
        }
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the save did not finish; the file on disk is unchanged or whole",
        ),
    }
}

/// Record `text`, saved here by `by`, in the cluster's config history: every other node applies it.
/// What the answer's `cluster` says: `{"shared": true, "id"}` or `{"shared": false, "error"}` (the
/// file here is saved and applied either way).
async fn share(cluster: &dyn opc_agents::store::Cluster, text: &str, by: &str) -> Value {
    let digest = crate::node::config_digest(text.as_bytes());
    match cluster.save_config(text, &digest, Some(by)).await {
        Ok(id) => {
            tracing::info!(id, digest, "config recorded in the cluster's history");
            json!({ "shared": true, "id": id, "digest": digest })
        }
        Err(e) => {
            tracing::warn!(error = %e, "config saved here, but not recorded in the cluster's history");
            json!({
                "shared": false,
                "error": format!("saved and applied on this node, but not sent to the other nodes: {e}; save it again once the database answers"),
            })
        }
    }
}

/// Why a save failed: before the config file was replaced (nothing changed), or after (the file is
/// the new one, but the save could not be recorded; [`recover`] records it at the next start).
#[derive(Debug)]
pub(super) enum SaveError {
    NotWritten(std::io::Error),
    Unrecorded(std::io::Error),
}

/// The name of the save's temporary file for the config `file_name`, written by process `pid`.
fn temp_name(file_name: &str, pid: u32) -> String {
    format!(".{file_name}.saving-{pid}")
}

/// The hidden name of the kept copy `name` until its audit line is written, by process `pid`.
fn pending_name(name: &str, pid: u32) -> String {
    format!(".{name}.pending-{pid}")
}

/// The config's directory (`.` for a bare file name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Keep `current` in `history`, write `new` over `path` atomically, and append the audit line, in the
/// order the module doc gives. Returns the kept version's file name.
fn write_with_history(
    path: &Path,
    history: &Path,
    current: &str,
    new: &str,
    by: &str,
    added: usize,
    removed: usize,
) -> Result<String, SaveError> {
    let context = |what: &str, p: &Path| {
        let p = p.display().to_string();
        let what = what.to_string();
        move |e: std::io::Error| std::io::Error::new(e.kind(), format!("{what} {p}: {e}"))
    };
    let not_written = |e| SaveError::NotWritten(e);
    std::fs::create_dir_all(history)
        .map_err(context("cannot create", history))
        .map_err(not_written)?;
    let at = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
    let file_name = path
        .file_name()
        .map_or("config.yaml".into(), |n| n.to_string_lossy().into_owned());
    let name = format!("{}-{file_name}", at.replace(':', "-"));
    // Saves are serialised within this process (`save_lock`); the pid keeps another process's apart.
    let pid = std::process::id();
    let pending = history.join(pending_name(&name, pid));
    let kept = history.join(&name);
    write_synced(&pending, current.as_bytes())
        .map_err(context("cannot keep the previous version in", &pending))
        .map_err(not_written)?;

    let dir = parent_dir(path);
    let temp = dir.join(temp_name(&file_name, pid));
    let undo = |e: std::io::Error| {
        let _ = std::fs::remove_file(&temp);
        let _ = std::fs::remove_file(&pending);
        SaveError::NotWritten(e)
    };
    write_synced(&temp, new.as_bytes()).map_err(|e| undo(context("cannot write", &temp)(e)))?;
    std::fs::rename(&temp, path).map_err(|e| undo(context("cannot replace", path)(e)))?;
    // The rename is durable once the directory is synced.
    sync_dir(&dir);

    let line = json!({
        "at": at,
        "by": by,
        "file": path.display().to_string(),
        "added": added,
        "removed": removed,
        "previous": name,
    });
    let audit = history.join(AUDIT);
    append_line(&audit, &line)
        .map_err(context("saved, but cannot record it in", &audit))
        .map_err(SaveError::Unrecorded)?;
    std::fs::rename(&pending, &kept)
        .map_err(context(
            "saved and recorded, but cannot list the kept copy",
            &kept,
        ))
        .map_err(SaveError::Unrecorded)?;
    sync_dir(history);
    Ok(name)
}

/// The audit log's file name in the history directory.
const AUDIT: &str = "audit.jsonl";

/// Append `line` to the audit log and sync it. A log whose last line was cut short (a crash in the
/// middle of a write) gets its newline first, so the new line stays whole.
fn append_line(audit: &Path, line: &Value) -> std::io::Result<()> {
    let torn = match std::fs::read(audit) {
        Ok(bytes) => bytes.last().is_some_and(|b| *b != b'\n'),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(e),
    };
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(audit)?;
    let text = format!("{}{line}\n", if torn { "\n" } else { "" });
    log.write_all(text.as_bytes())?;
    log.sync_all()
}

/// The kept copies the audit log names (its `previous` fields).
fn audited(history: &Path) -> std::io::Result<std::collections::HashSet<String>> {
    let text = match std::fs::read_to_string(history.join(AUDIT)) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => return Err(e),
    };
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|line| line["previous"].as_str().map(str::to_string))
        .collect())
}

/// Whether a process `pid` (other than this one) is running: its `/proc` entry exists. Where there is
/// no `/proc`, none is taken to be: a save of another `opc run` of the same config at that very
/// moment would then fail cleanly ("cannot replace"), leaving the file as it was.
fn alive(pid: u32) -> bool {
    pid != std::process::id()
        && Path::new("/proc").join("self").exists()
        && Path::new("/proc").join(pid.to_string()).exists()
}

/// The pid a leftover's name ends with after `marker` (`.saving-`, `.pending-`), when it is one.
fn leftover_pid<'a>(name: &'a str, marker: &str) -> Option<(&'a str, u32)> {
    let (stem, pid) = name.rsplit_once(marker)?;
    Some((stem, pid.parse().ok()?))
}

/// Settle what saves interrupted by a crash left behind, for the config at `path` whose history is in
/// `history`; called by `opc run` at start, before the console can save. Returns one line per thing
/// done, for the log. Only leftovers of processes no longer running are touched:
/// - a temporary file `.<config>.saving-<pid>` is removed (the config itself is whole: it is only
///   ever replaced by a rename);
/// - a hidden kept copy `.<name>.pending-<pid>` whose audit line was written is listed (renamed to
///   `<name>`); one without its line and equal to the config file is removed (the save never replaced
///   the file); one without its line and different is listed with a line recording that its save
///   was interrupted before it was recorded (or the file was changed on disk since);
/// - a listed copy without an audit line (left by an older OPC) gets the same recorded line, so
///   every listed copy has one.
pub fn recover(path: &Path, history: &Path) -> Vec<String> {
    let mut done = Vec::new();
    let dir = parent_dir(path);
    let file_name = path
        .file_name()
        .map_or("config.yaml".into(), |n| n.to_string_lossy().into_owned());
    let temp_prefix = format!(".{file_name}.saving-");
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(pid) = name
                .strip_prefix(&temp_prefix)
                .and_then(|pid| pid.parse::<u32>().ok())
            else {
                continue;
            };
            if alive(pid) {
                continue;
            }
            match std::fs::remove_file(entry.path()) {
                Ok(()) => done.push(format!(
                    "removed {}, left by a save that did not finish (the config file is whole)",
                    entry.path().display()
                )),
                Err(e) => done.push(format!("cannot remove {}: {e}", entry.path().display())),
            }
        }
    }
    let Ok(entries) = std::fs::read_dir(history) else {
        return done;
    };
    let mut audited = match audited(history) {
        Ok(audited) => audited,
        Err(e) => {
            done.push(format!(
                "cannot read {}: {e}; the config history was not checked",
                history.join(AUDIT).display()
            ));
            return done;
        }
    };
    let current = std::fs::read(path).ok();
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for name in names {
        let entry = history.join(&name);
        let kept = if let Some(hidden) = name.strip_prefix('.') {
            let Some((stem, pid)) = leftover_pid(hidden, ".pending-") else {
                continue;
            };
            if alive(pid) {
                continue;
            }
            let kept = stem.to_string();
            if !audited.contains(&kept)
                && current.is_some()
                && std::fs::read(&entry).ok() == current
            {
                match std::fs::remove_file(&entry) {
                    Ok(()) => done.push(format!(
                        "removed {}: its save stopped before it replaced the config file",
                        entry.display()
                    )),
                    Err(e) => done.push(format!("cannot remove {}: {e}", entry.display())),
                }
                continue;
            }
            kept
        } else if name == AUDIT || audited.contains(&name) {
            continue;
        } else {
            name.clone()
        };
        if !audited.contains(&kept) {
            let line = json!({
                "at": humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
                "by": "unknown: recorded when opc run started; the save that kept this copy stopped before recording it (or the file was changed on disk since)",
                "file": path.display().to_string(),
                "previous": kept,
                "recovered": true,
            });
            if let Err(e) = append_line(&history.join(AUDIT), &line) {
                done.push(format!("cannot record {kept} in the audit log: {e}"));
                continue;
            }
            audited.insert(kept.clone());
            done.push(format!(
                "recorded {kept} in {}: its save stopped before recording it",
                history.join(AUDIT).display()
            ));
        }
        if kept != name {
            match std::fs::rename(&entry, history.join(&kept)) {
                Ok(()) => done.push(format!("listed {kept} in the config history")),
                Err(e) => done.push(format!("cannot list {kept}: {e}")),
            }
        }
    }
    sync_dir(history);
    done
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
            // Hidden files are a save's copy not yet recorded (see the module doc).
            if name == AUDIT || name.starts_with('.') || !entry.file_type()?.is_file() {
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
///
/// `name` must be one of the names the listing shows: it is looked up among the directory's entries,
/// never joined to a path, so nothing else (`..`, a NUL byte, the audit log, a copy not yet recorded)
/// can be read — all of those are 404.
pub async fn version(State(admin): State<Arc<Admin>>, UrlPath(name): UrlPath<String>) -> Response {
    let dir = admin.base_dir.join(HISTORY_DIR);
    let wanted = name.clone();
    let read = tokio::task::spawn_blocking(move || -> std::io::Result<Option<String>> {
        let listed = wanted != AUDIT && !wanted.starts_with('.');
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            if listed && entry.file_name() == wanted.as_str() && entry.file_type()?.is_file() {
                return std::fs::read_to_string(entry.path()).map(Some);
            }
        }
        Ok(None)
    })
    .await;
    match read {
        Ok(Ok(Some(text))) => Json(json!({ "name": name, "text": text })).into_response(),
        Ok(Ok(None)) => error(
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A pid no process can have (above Linux's largest, 2^22).
    const GONE: u32 = (1 << 22) + 1;

    fn lines(history: &Path) -> Vec<Value> {
        std::fs::read_to_string(history.join(AUDIT))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn a_save_lists_its_copy_only_with_its_audit_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("opc.config.yaml");
        let history = dir.path().join(HISTORY_DIR);
        std::fs::write(&path, "old\n").unwrap();
        let name = write_with_history(
            &path,
            &history,
            "old\n",
            "new\n",
            "console (loopback)",
            1,
            1,
        )
        .unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        assert_eq!(
            std::fs::read_to_string(history.join(&name)).unwrap(),
            "old\n"
        );
        let audit = lines(&history);
        assert_eq!(audit.len(), 1);
        assert_eq!(audit[0]["previous"], name.as_str());
        let names: Vec<String> = std::fs::read_dir(&history)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names.len(),
            2,
            "the copy and the log, nothing hidden: {names:?}"
        );
        assert!(recover(&path, &history).is_empty(), "nothing to settle");
    }

    #[test]
    fn start_up_settles_what_a_crashed_save_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("opc.config.yaml");
        let history = dir.path().join(HISTORY_DIR);
        std::fs::create_dir_all(&history).unwrap();
        std::fs::write(&path, "current\n").unwrap();
        // Killed while writing the temporary file: the config is untouched.
        let temp = dir.path().join(temp_name("opc.config.yaml", GONE));
        std::fs::write(&temp, "half of a new ver").unwrap();
        // Another config's temporary file, and one of a running process: not ours to remove.
        let other = dir.path().join(temp_name("other.yaml", GONE));
        std::fs::write(&other, "x").unwrap();
        let running = dir.path().join(temp_name("opc.config.yaml", 1));
        std::fs::write(&running, "x").unwrap();
        // Killed before the rename: the copy equals the config, so the save never happened.
        let unsaved = history.join(pending_name(
            "2026-01-01T00-00-00.000Z-opc.config.yaml",
            GONE,
        ));
        std::fs::write(&unsaved, "current\n").unwrap();
        // Killed after the rename, before the audit line: the save happened, unrecorded.
        let unrecorded = history.join(pending_name(
            "2026-01-02T00-00-00.000Z-opc.config.yaml",
            GONE,
        ));
        std::fs::write(&unrecorded, "before\n").unwrap();
        // Killed after the audit line, before the copy was listed (and the line cut short by a
        // later crash — the next line stays whole).
        let recorded = "2026-01-03T00-00-00.000Z-opc.config.yaml";
        std::fs::write(history.join(pending_name(recorded, GONE)), "earlier\n").unwrap();
        std::fs::write(
            history.join(AUDIT),
            format!("{}\n{{\"at\": \"to", json!({"previous": recorded})),
        )
        .unwrap();
        // A listed copy an older OPC left without its line.
        let legacy = "2025-12-31T00-00-00.000Z-opc.config.yaml";
        std::fs::write(history.join(legacy), "legacy\n").unwrap();

        let done = recover(&path, &history);
        assert!(!done.is_empty());
        assert!(
            !temp.exists() && other.exists() && running.exists(),
            "{done:?}"
        );
        assert!(!unsaved.exists(), "{done:?}");
        assert!(
            !history
                .join("2026-01-01T00-00-00.000Z-opc.config.yaml")
                .exists()
        );
        for (name, text) in [
            ("2026-01-02T00-00-00.000Z-opc.config.yaml", "before\n"),
            (recorded, "earlier\n"),
            (legacy, "legacy\n"),
        ] {
            assert_eq!(std::fs::read_to_string(history.join(name)).unwrap(), text);
        }
        let hidden: Vec<_> = std::fs::read_dir(&history)
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().to_string_lossy().into_owned();
                name.starts_with('.').then_some(name)
            })
            .collect();
        assert!(hidden.is_empty(), "{hidden:?}");
        // Every listed copy has exactly one audit line; the torn line is left as it was, apart.
        let text = std::fs::read_to_string(history.join(AUDIT)).unwrap();
        let previous: Vec<String> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|l| l["previous"].as_str().map(str::to_string))
            .collect();
        let mut sorted = previous.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            [legacy, "2026-01-02T00-00-00.000Z-opc.config.yaml", recorded],
            "{text}"
        );
        assert_eq!(text.lines().count(), 4, "{text}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "current\n");
        // Settled: a second start finds nothing.
        assert!(recover(&path, &history).is_empty());
    }
}
