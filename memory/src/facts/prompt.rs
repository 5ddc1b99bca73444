//! The text of the memory calls (extraction and consolidation), and the duplicate hash.
//!
//! The first line of each system prompt is a fixed marker (`OPC memory: extract`,
//! `OPC memory: consolidate`): it is the contract a scripted LLM (and a log reader) keys on, so it
//! never changes. The rest teaches the model the `record_facts` operations, that times are RFC 3339,
//! that targets must be listed ids, and to answer NOOP when nothing is new. Facts are listed one
//! JSON object per line ([`super::FactVersion::prompt_line`]): each line parses alone, and a model
//! copies an `id` from it without confusing neighbours.
//!
//! Graph memory is a parameter of the prompt functions (`*_for(.., graph)`), never a global: with
//! it on, the operations also teach `predicate`/`object` (a relation, where the text states one),
//! still in the same one call per task; with it off the text is exactly what it was before.

use sha2::{Digest, Sha256};

use super::FactVersion;

/// First line of an extraction call's system prompt.
pub const EXTRACT_MARKER: &str = "OPC memory: extract";
/// First line of a consolidation call's system prompt.
pub const CONSOLIDATE_MARKER: &str = "OPC memory: consolidate";

const OPERATIONS: &str = "\
Operations (the `facts` array of `record_facts`; the whole array is applied together, or not at all):
- ADD {text, subject?, valid_from?, valid_to?}: a new fact. Write one self-contained statement, with \
names and absolute dates (\"The Orion launch is on 2026-05-17\"), never \"it\", \"he\" or \"tomorrow\".
- UPDATE {target, text, subject?, valid_from?, valid_to?, reason?}: a listed fact changed (the launch \
moved). Its old version is kept as history and closed; `valid_from` is when the new statement became \
true, and closes the old one's validity there.
- INVALIDATE {target, reason, valid_to?}: a listed fact is no longer true, or was wrong, and nothing \
replaces it. Give the reason.
- NOOP: nothing new. Answer {\"facts\":[{\"op\":\"NOOP\"}]} rather than restating a listed fact.

Rules:
- `target` must be the `id` of a fact listed below. Never invent an id: an answer naming an id that \
was not listed is rejected whole.
- Times are RFC 3339 with an offset (2026-05-03T09:00:00Z) or a date (2026-05-03), or null when \
unknown.
- `subject` names what the fact is about (a project, person, customer, system, decision), spelled the \
same way every time, so the facts about it can be found together.
- Record what was said: a user who dislikes something is a fact about the user, not a reason to \
invalidate a fact about the thing.";

/// What graph memory adds to the operations: relations, where the text states one.
const RELATIONS: &str = "\
Relations (graph memory): when a fact states a relation between two named things, also give \
`predicate` (a short verb phrase: \"leads\", \"reports to\", \"depends on\", \"works at\") and \
`object` (the other thing's name, spelled as its own facts spell their subject), on ADD or UPDATE, \
both or neither, with `subject` set. Only relations the text states; never guess one. Example:
{\"op\":\"ADD\",\"text\":\"Marco Diaz leads the Orion project\",\"subject\":\"Marco Diaz\",\
\"predicate\":\"leads\",\"object\":\"Orion project\"}
An UPDATE that gives no relation keeps the fact's; give it again when it changed.";

/// System prompt of an extraction call; its first line is exactly `OPC memory: extract`.
/// Without graph memory (see [`extract_system_for`]).
pub fn extract_system(agent: &str) -> String {
    extract_system_for(agent, false)
}

/// System prompt of an extraction call, with graph memory on or off (`graph`: ask for relations).
pub fn extract_system_for(agent: &str, graph: bool) -> String {
    with_relations(
        format!(
            "{EXTRACT_MARKER}
You keep the long-term facts of the agent `{agent}`. Read the exchange and record, with one call \
of the `record_facts` tool, what it teaches that is worth knowing beyond this conversation: \
decisions, dates, names, figures, preferences, commitments, owners. Skip greetings, questions, \
guesses, and what the listed facts already say. A listed fact the exchange changes is an UPDATE of \
that fact, not a new ADD.

{OPERATIONS}"
        ),
        graph,
    )
}

fn with_relations(prompt: String, graph: bool) -> String {
    if graph {
        format!("{prompt}\n\n{RELATIONS}")
    } else {
        prompt
    }
}

/// The user message: the exchange, then the listed facts one JSON object per line.
pub fn extract_user(exchange: &str, listed: &[FactVersion]) -> String {
    format!(
        "Exchange:\n{}\n\nFacts already known (one JSON object per line; `id` is what `target` names):\n{}",
        exchange.trim_end(),
        lines(listed)
    )
}

/// System prompt of a consolidation run; first line exactly `OPC memory: consolidate`.
/// Without graph memory (see [`consolidate_system_for`]).
pub fn consolidate_system(agent: &str) -> String {
    consolidate_system_for(agent, false)
}

/// System prompt of a consolidation run, with graph memory on or off.
pub fn consolidate_system_for(agent: &str, graph: bool) -> String {
    with_relations(
        format!(
            "{CONSOLIDATE_MARKER}
You tidy the long-term memory of the agent `{agent}` while it is idle. Its current facts are \
listed one JSON object per line. With one call of `record_facts`:
- merge duplicates: keep the better-worded fact and INVALIDATE the other with the reason \
\"duplicate of <id kept>\";
- resolve contradictions the extraction missed: UPDATE or INVALIDATE the fact that is no longer \
true, with a reason (the later `valid_from`, or the later id, usually wins);
- answer NOOP when everything is in order.
If core memory block tools are offered, use them too: keep the agent's blocks current and within \
their limits. Change nothing that is already right.

{OPERATIONS}"
        ),
        graph,
    )
}

/// The user message: the agent's current facts, one JSON object per line.
pub fn consolidate_user(current: &[FactVersion]) -> String {
    format!(
        "Current facts (one JSON object per line; `id` is what `target` names):\n{}",
        lines(current)
    )
}

fn lines(facts: &[FactVersion]) -> String {
    if facts.is_empty() {
        return "(none)".to_string();
    }
    facts
        .iter()
        .map(FactVersion::prompt_line)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The normalised form the duplicate hash is taken of: lowercase, whitespace collapsed to one space,
/// punctuation trimmed from both ends (so "The launch is on May 3rd." equals "the launch is on may 3rd").
pub fn normalise_text(text: &str) -> String {
    let lowered: String = text.chars().flat_map(char::to_lowercase).collect();
    let collapsed = lowered.split_whitespace().collect::<Vec<_>>().join(" ");
    collapsed
        .trim_matches(|c: char| c.is_ascii_punctuation() || c.is_whitespace())
        .to_string()
}

/// Normalised-text hash (lowercase, collapsed whitespace, trimmed punctuation): exact duplicates.
pub fn content_hash(text: &str) -> String {
    hex::encode(Sha256::digest(normalise_text(text).as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_first_lines() {
        assert_eq!(
            extract_system("ceo").lines().next(),
            Some("OPC memory: extract")
        );
        assert_eq!(
            consolidate_system("ceo").lines().next(),
            Some("OPC memory: consolidate")
        );
        for p in [extract_system("ceo"), consolidate_system("ceo")] {
            assert!(p.contains("RFC 3339") && p.contains("NOOP") && p.contains("listed"));
        }
        assert!(extract_user("user: hi", &[]).contains("(none)"));
    }

    #[test]
    fn relations_are_asked_only_with_graph_memory() {
        assert_eq!(extract_system("ceo"), extract_system_for("ceo", false));
        assert!(!extract_system("ceo").contains("predicate"));
        assert!(!consolidate_system("ceo").contains("predicate"));
        for p in [
            extract_system_for("ceo", true),
            consolidate_system_for("ceo", true),
        ] {
            assert_eq!(
                p.lines().next().map(|l| l.starts_with("OPC memory: ")),
                Some(true)
            );
            assert!(p.contains("\"predicate\":\"leads\"") && p.contains("both or neither"));
        }
    }

    #[test]
    fn duplicates_hash_alike() {
        assert_eq!(
            content_hash("The launch is on May 3rd."),
            content_hash("  the launch   is on may 3rd")
        );
        assert_ne!(
            content_hash("The launch is on May 3rd"),
            content_hash("The launch is on May 17th")
        );
    }
}
