//! The text of the memory calls (extraction and consolidation).

/// System prompt of an extraction call; its first line is exactly `OPC memory: extract`.
pub fn extract_system(agent: &str) -> String {
    let _ = agent;
    todo!()
}

/// The user message: the exchange, then the listed facts one JSON object per line.
pub fn extract_user(exchange: &str, listed: &[super::FactVersion]) -> String {
    let _ = (exchange, listed);
    todo!()
}

/// System prompt of a consolidation run; first line exactly `OPC memory: consolidate`.
pub fn consolidate_system(agent: &str) -> String {
    let _ = agent;
    todo!()
}

/// The user message: the agent's current facts, one JSON object per line.
pub fn consolidate_user(current: &[super::FactVersion]) -> String {
    let _ = current;
    todo!()
}

/// Normalised-text hash (lowercase, collapsed whitespace, trimmed punctuation): exact duplicates.
pub fn content_hash(text: &str) -> String {
    let _ = text;
    todo!()
}
