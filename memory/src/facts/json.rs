//! Renderings of a version: the CLI's JSON object and a prompt's line (times RFC 3339 or null).
//! A version's relation (`predicate`, `object`) appears in both only when it has one, so the
//! renderings of facts without relations (graph memory off) are unchanged.

use serde_json::json;

use super::time::json_time;

impl super::FactVersion {
    /// The JSON object of `opc memory facts --format json` (RFC 3339 times or null):
    /// {id, fact_id, text, subject, valid_from, valid_to, recorded_at, invalidated_at, reason,
    ///  source, agent, task, conversation}, plus {predicate, object} when it has a relation.
    pub fn to_json(&self) -> serde_json::Value {
        let mut out = json!({
            "id": self.id,
            "fact_id": self.fact_id,
            "text": self.text,
            "subject": self.subject,
            "valid_from": json_time(self.valid_from),
            "valid_to": json_time(self.valid_to),
            "recorded_at": json_time(Some(self.recorded_at)),
            "invalidated_at": json_time(self.invalidated_at),
            "reason": self.reason,
            "source": self.source.as_str(),
            "agent": self.agent,
            "task": self.task,
            "conversation": self.conversation,
        });
        if let (Some(p), Some(o), Some(map)) = (&self.predicate, &self.object, out.as_object_mut())
        {
            map.insert("predicate".into(), json!(p));
            map.insert("object".into(), json!(o));
        }
        out
    }

    /// The line a prompt lists: {"id", "text", "subject", "valid_from", "valid_to"} (RFC 3339), one
    /// line; plus "predicate" and "object" when it has a relation (so an UPDATE can restate it).
    pub fn prompt_line(&self) -> String {
        // serde_json escapes newlines inside strings, so the object is always one line.
        let mut line = json!({
            "id": self.id,
            "text": self.text,
            "subject": self.subject,
            "valid_from": json_time(self.valid_from),
            "valid_to": json_time(self.valid_to),
        });
        if let (Some(p), Some(o), Some(map)) = (&self.predicate, &self.object, line.as_object_mut())
        {
            map.insert("predicate".into(), json!(p));
            map.insert("object".into(), json!(o));
        }
        line.to_string()
    }
}
