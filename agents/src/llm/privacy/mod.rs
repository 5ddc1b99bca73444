//! The privacy layer: the one place where requests are masked and answers restored.
//!
//! It sits in the shared part of the call stack, above the router and above retry (see
//! [`super::layers`]), so each call is handled once whatever the provider and however many attempts
//! it takes:
//!
//! - **on the way out** the whole request is masked with the conversation's vault: the system prompt,
//!   every text block, every string inside `tool_use` inputs and every `tool_result`. Detection is
//!   cached per text for the conversation, and per text (a recalled memory block per recalled
//!   message) for the process, so a call scans only the text it has not seen. Tool specs
//!   (the org's text) are not scanned, but values the conversation already holds are swept from them;
//! - **on the way in** the answer's text and its `tool_use` inputs are restored (a `delegate` carries
//!   the real value into the engine; the child's request is masked again, with the same vault, so the
//!   same real value has the same substitute in every agent's request), and streamed deltas are
//!   restored by a [`opc_privacy::StreamRestorer`] wrapped around the request's sink, which never
//!   emits half a substitute, flushes at the end and drops what it holds on a retry's restart;
//! - the **egress guard** ([`super::EgressGuard`]) travels with the masked request: the wire client
//!   checks the exact bytes it is about to send for every real value the vault holds, and fails the
//!   call closed ([`super::LlmError::Leak`]) on a hit;
//! - **modes**: `mask` (realistic fakes), `redact` (numbered typed placeholders), `route` (a request
//!   that carries personal data goes, unmasked, to the trusted `routeModel`; one without goes to its
//!   own model, guarded);
//! - **the NER gate** ([`NerGate`]): a call that needs the NER model waits for it, up to `nerWait`,
//!   or fails closed ([`super::LlmError::Privacy`]); [`readiness`] says where the gate stands;
//! - **announcements**: what the layer did in a task's call (masked, routed, or stopped by the guard)
//!   goes to the call's listener, the engine's event bus ([`PrivacyEvents`]), so agent code knows
//!   nothing of privacy.
//!
//! State: one [`PrivacyState`] (the vault and the detection cache) per conversation tree, in a
//! per-root registry (the call stack's `RootStates`) keyed by root task, which the engine opens when
//! the root starts and drops when the tree has no live task. A call outside any tree gets a vault for
//! that call alone.
//!
//! The files, one concern each (none depends on `layer`, which uses them all):
//! - `policy`: the mode and the detector a config asks for;
//! - `gate`: the NER gate and the gateway's readiness;
//! - `parts`: the parts a text is detected in (a recalled memory block, message by message);
//! - `cache`: detections shared by every conversation, part by part;
//! - `state`: one conversation's vault, and the egress guard over it;
//! - `masking`: masking a request and restoring an answer, over the wire's JSON;
//! - `restore`: the restoring sink for streamed text;
//! - `report`: counts by type, what a call reports;
//! - `announce`: telling the call's listener;
//! - `layer`: the layer itself, one call's way through all of the above.
//!
//! Invariants: values never leave this module except restored into answers for the engine; the
//! layer reports and announces counts by type only ([`PrivacyReport`]), never values, and logs
//! nothing about content.

mod announce;
mod cache;
mod gate;
mod layer;
mod masking;
mod parts;
mod policy;
mod report;
mod restore;
mod state;

pub use announce::PrivacyEvents;
pub(crate) use announce::heard_by;
pub use gate::{NerGate, Readiness, needs_ner, readiness};
pub use layer::{PrivacyLayer, ner_queue};
pub use policy::{Mode, detector, mode};
pub use report::{PrivacyReport, TypeCounts};
pub use state::{PrivacyState, VAULT_CAPACITY};
