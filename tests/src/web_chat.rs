//! A client of `opc run`'s web chat JSON API, for end-to-end tests: open a conversation, follow its
//! event stream, send messages.

use serde_json::json;

use crate::opc_process::OpcRun;
use crate::post_json as post;
use crate::sse::Sse;
use crate::wait::WAIT;

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

/// Wait on `sse` for the approval card a request shows when it asks a human: the approval's id and
/// the index of its `approve` option (what deciding it through `/api/approvals/{id}` takes).
pub async fn pending_approval(sse: &mut Sse) -> (i64, usize) {
    let card = sse.wait_for("card", WAIT, |_| true).await;
    let approval = card["card"]["approval"].as_i64().expect("approval id");
    let approve = card["card"]["options"]
        .as_array()
        .unwrap_or_else(|| panic!("options in the card {card}"))
        .iter()
        .position(|o| o == "approve")
        .unwrap_or_else(|| panic!("an approve option in the card {card}"));
    (approval, approve)
}
