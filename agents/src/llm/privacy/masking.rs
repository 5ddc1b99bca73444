//! Masking a request and restoring an answer, over the JSON the wire clients send: every text the
//! request carries (system prompt, text blocks, each string of the tool inputs, tool results) is
//! masked in one batch with the conversation's vault, and the answer's text and tool inputs are
//! restored.
//!
//! Invariants:
//! - the masker and the egress guard agree: a value is either replaced everywhere the request carries
//!   it, or not mapped at all;
//! - masking never touches the request's [`structure`] (the model's name, tool names and ids, the keys
//!   of tool inputs and schemas, the chosen tool, the wire's own words): a value there is the org's or
//!   the protocol's word, never a person's;
//! - tool specs (the org's text) are not scanned, but values the conversation already holds are
//!   swept from them.

use opc_privacy::detect::Detector;
use opc_privacy::{Conversation, Counts, Held, Vault};
use serde_json::Value;

use super::cache::DetectCache;
use super::parts::parts;
use crate::llm::{Content, LlmError, LlmRequest, LlmResponse, ToolChoice};

/// Every string inside a JSON value (tool inputs), in order.
fn json_strings<'a>(value: &'a mut Value, out: &mut Vec<&'a mut String>) {
    match value {
        Value::String(text) => out.push(text),
        Value::Array(items) => items.iter_mut().for_each(|v| json_strings(v, out)),
        Value::Object(map) => map.values_mut().for_each(|v| json_strings(v, out)),
        _ => {}
    }
}

/// The words the wire clients write around the request's content (Anthropic's and OpenAI's JSON keys
/// and fixed values). Masking never changes them, so they are the request's structure too.
const WIRE_WORDS: &str = "model system messages role user assistant tool content type text tool_use \
    tool_result tool_use_id is_error id name input tools description input_schema tool_choice auto \
    max_tokens stream stream_options include_usage function arguments parameters tool_calls \
    tool_call_id object string properties required items enum integer number boolean array null";

/// Every object key in a JSON value, one a line.
fn json_keys(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => items.iter().for_each(|v| json_keys(v, out)),
        Value::Object(map) => {
            for (key, v) in map {
                out.push_str(key);
                out.push('\n');
                json_keys(v, out);
            }
        }
        _ => {}
    }
}

/// The request's structure: what goes on the wire but is not content, so masking cannot replace it —
/// the model's name, tool names and ids, the keys of tool inputs and schemas, the chosen tool, and
/// the wire's own words. A value there is the org's or the protocol's word (a tool keyed `path`,
/// `head_limit`), never a person's.
fn structure(request: &LlmRequest) -> String {
    let mut out = format!("{WIRE_WORDS}\n{}\n", request.model);
    for tool in &request.tools {
        out.push_str(&tool.name);
        out.push('\n');
        json_keys(&tool.input_schema, &mut out);
    }
    if let Some(ToolChoice::Tool(name)) = &request.tool_choice {
        out.push_str(name);
        out.push('\n');
    }
    for message in &request.messages {
        for block in &message.content {
            match block {
                Content::Text { .. } => {}
                Content::ToolUse { id, name, input } => {
                    out.push_str(&format!("{id}\n{name}\n"));
                    json_keys(input, &mut out);
                }
                Content::ToolResult { tool_use_id, .. } => {
                    out.push_str(tool_use_id);
                    out.push('\n');
                }
            }
        }
    }
    out
}

/// Whether `word` stands alone in `structure` (not glued to letters or digits on either side).
fn in_structure(structure: &str, word: &str) -> bool {
    let glued = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    !word.is_empty()
        && structure.match_indices(word).any(|(at, _)| {
            !glued(structure[..at].chars().next_back())
                && !glued(structure[at + word.len()..].chars().next())
        })
}

/// Masks the whole request in place — system prompt, text blocks, every string of the tool inputs,
/// tool results — in one batch (the vault's indexes are rebuilt at most once per request), each text
/// detected at most once per conversation, and each part of it ([`parts`]) at most once per process
/// while the shared cache holds it; what is new is detected in one batch.
///
/// The masker and the egress guard agree: a value is either replaced everywhere the request carries
/// it, or not mapped at all. Masking cannot reach the request's [`structure`] (tool names, ids, keys),
/// so a detection equal to a word there is not mapped, and a value the vault already held that
/// stands there is left out of this request's guard (returned as [`Held`]).
pub(super) fn mask_request(
    conversation: &mut Conversation,
    cache: &DetectCache,
    detector: &Detector,
    request: &mut LlmRequest,
) -> Result<(Counts, Held), LlmError> {
    let structure = structure(request);
    let mut slots: Vec<&mut String> = vec![&mut request.system];
    for message in &mut request.messages {
        for block in &mut message.content {
            match block {
                Content::Text { text } => slots.push(text),
                Content::ToolUse { input, .. } => json_strings(input, &mut slots),
                Content::ToolResult { content, .. } => slots.push(content),
            }
        }
    }
    slots.retain(|text| !text.is_empty());
    let masked = {
        let texts: Vec<&str> = slots.iter().map(|text| text.as_str()).collect();
        // Every part the shared cache does not hold yet, detected in one batch (usually the new
        // message alone: the system prompt, the history and recalled messages were read before).
        let all_parts: Vec<&str> = texts
            .iter()
            .flat_map(|text| parts(text).into_iter().map(move |part| &text[part]))
            .collect();
        cache.prefetch(detector, &all_parts);
        let detect = |text: &str| {
            let mut found = cache.detect_parts(detector, text);
            found.retain(|e| !in_structure(&structure, e.text(text)));
            found
        };
        conversation
            .mask_texts(&detect, &texts)
            .map_err(|full| LlmError::Privacy(full.to_string()))?
    };
    let mut counts = Counts::default();
    for (slot, masked) in slots.into_iter().zip(masked) {
        counts.merge(&masked.counts);
        *slot = masked.text;
    }
    // Tool specs are the org's text, not the user's: nothing is detected in them, but a value the
    // conversation already holds is swept like anywhere else. Otherwise the egress guard would find it
    // there and fail every call of the conversation. Not counted: the value was counted where it came in.
    let mut specs: Vec<&mut String> = Vec::new();
    for tool in &mut request.tools {
        specs.push(&mut tool.description);
        json_strings(&mut tool.input_schema, &mut specs);
    }
    specs.retain(|text| !text.is_empty());
    if !specs.is_empty() && !conversation.vault().is_empty() {
        let items: Vec<(&str, &[opc_privacy::Entity])> =
            specs.iter().map(|text| (text.as_str(), &[][..])).collect();
        let swept = conversation
            .vault_mut()
            .mask_batch(&items)
            .map_err(|full| LlmError::Privacy(full.to_string()))?;
        for (slot, masked) in specs.into_iter().zip(swept) {
            *slot = masked.text;
        }
    }
    Ok((counts, conversation.vault().held_in(&structure)))
}

/// Restores every string in a JSON value (tool inputs the model wrote).
fn restore_json(vault: &Vault, value: &mut Value) {
    match value {
        Value::String(text) => {
            if let std::borrow::Cow::Owned(restored) = vault.restore(text) {
                *text = restored;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| restore_json(vault, v)),
        Value::Object(map) => map.values_mut().for_each(|v| restore_json(vault, v)),
        _ => {}
    }
}

/// Restores the answer: text blocks and tool inputs.
pub(super) fn restore_response(vault: &Vault, response: &mut LlmResponse) {
    for block in &mut response.content {
        match block {
            Content::Text { text } => {
                if let std::borrow::Cow::Owned(restored) = vault.restore(text) {
                    *text = restored;
                }
            }
            Content::ToolUse { input, .. } => restore_json(vault, input),
            Content::ToolResult { content, .. } => {
                if let std::borrow::Cow::Owned(restored) = vault.restore(content) {
                    *content = restored;
                }
            }
        }
    }
}
