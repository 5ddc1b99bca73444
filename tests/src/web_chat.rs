//! A client of `opc run`'s web chat JSON API, for end-to-end tests: open a conversation, follow its
//! event stream, send messages.

use serde_json::json;

use crate::opc_process::OpcRun;
use crate::post_json as post;
use crate::sse::Sse;

/// Open a web conversation and follow its events (subscribed before anything is sent).
pub async fn open(opc: &OpcRun) -> (String, Sse) {
    let (status, body) = post(&opc.url("/api/conversations"), json!({})).await;
    assert_eq!(status, 201, "opening a conversation: {body}");
    let id = body["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a conversation id in {body}"))
        .to_string();
    let sse = Sse::connect(&opc.url(&format!("/api/conversations/{id}/events")), None).await;
    (id, sse)
}

/// Send `text` in `conversation` (accepted: 202).
pub async fn say(opc: &OpcRun, conversation: &str, text: &str) {
    let (status, body) = post(
        &opc.url(&format!("/api/conversations/{conversation}/messages")),
        json!({ "text": text }),
    )
    .await;
    assert_eq!(status, 202, "sending a message: {body}");
}

/// [`open`] a conversation and [`say`] `text` in it.
pub async fn start(opc: &OpcRun, text: &str) -> (String, Sse) {
    let (id, sse) = open(opc).await;
    say(opc, &id, text).await;
    (id, sse)
}
