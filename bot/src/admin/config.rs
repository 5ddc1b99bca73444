//! The Config page's endpoints: the file's text (with an ETag for the save to come) and validation of
//! edited text.
//!
//! Invariant: validation reads only the request's text (and prompt files the text names, as
//! `opc validate` does); the file and the running config are untouched.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
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
/// prints for that text as the config file.
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
    // Validation of a large org takes milliseconds: off the async workers.
    match tokio::task::spawn_blocking(move || validate_text(&file, request.text, &base_dir)).await {
        Ok(report) => Json(report).into_response(),
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "validation did not finish",
        ),
    }
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
