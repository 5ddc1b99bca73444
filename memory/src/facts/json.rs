//! Renderings of a version: the CLI's JSON object and a prompt's line.

impl super::FactVersion {
    /// The JSON object of `opc memory facts --format json` (RFC 3339 times or null).
    pub fn to_json(&self) -> serde_json::Value {
        todo!()
    }

    /// The line a prompt lists: {"id", "text", "subject", "valid_from", "valid_to"} (RFC 3339), one line.
    pub fn prompt_line(&self) -> String {
        todo!()
    }
}
