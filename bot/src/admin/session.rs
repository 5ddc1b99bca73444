//! `GET /api/session`: who the listener let this request in as — `{"role": "admin"|"viewer", "via":
//! "session"|"bearer"|"query"|"open", "expires_at": <ms or null>}`. The console reads it at start (to
//! hide what a viewer may not do, and to offer "Sign out" to a signed-in browser); the chat can too.
//!
//! Why under `/api` and not `/admin/api`: the web chat asks the same question.
//!
//! Invariant: it answers only what the listener's check decided (the [`Caller`] it put in the request);
//! it never looks at a token or a cookie itself, so it cannot disagree with the check.

use std::sync::Arc;

use axum::Extension;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use opc_adapters::Page;
use opc_adapters::session::Caller;

use super::Admin;

/// This module's endpoints.
pub(super) fn pages(_admin: &Arc<Admin>) -> Vec<Page> {
    vec![Page::new(Method::GET, "/api/session", session, ())]
}

/// `GET /api/session` (see the module doc).
async fn session(caller: Option<Extension<Caller>>) -> Response {
    match caller {
        Some(Extension(caller)) => (
            [(header::CACHE_CONTROL, "no-store")],
            axum::Json(caller),
        )
            .into_response(),
        // Every page is behind the check, which always names its caller: a router built otherwise.
        None => (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(serde_json::json!({
                "error": "this listener did not check who is asking; serve /api/session behind opc_adapters::pages::protect_with"
            })),
        )
            .into_response(),
    }
}
