//! The `record_facts` tool: its JSON Schema, and strict validation of a model's input against it.

use std::collections::HashSet;

/// The tool's name (offered and forced in every memory call).
pub const RECORD_FACTS: &str = "record_facts";

/// Why a `record_facts` input was rejected (what and where).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Rejected(pub String);

/// The input's JSON Schema.
pub fn record_facts_schema() -> serde_json::Value {
    todo!()
}

/// The tool's description.
pub fn record_facts_description() -> &'static str {
    todo!()
}

/// Validate a `record_facts` input against the schema and the ids that were listed. Whole or nothing.
pub fn parse(
    input: &serde_json::Value,
    listed: &HashSet<i64>,
) -> Result<Vec<super::Op>, Rejected> {
    let _ = (input, listed);
    todo!()
}
