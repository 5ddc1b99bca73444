//! Configured features that this build accepts but does not run yet.
//!
//! The schema describes the whole product (memory, postgres, …),
//! while the engine implements it in stages. A setting that silently does nothing is worse than an
//! error: a user who configures memory blocks would believe agents remember. So this
//! module is the one place that decides what is configured but inactive; `opc validate`, `opc run` and
//! `opc chat` print its list, and the engine's own list of executed tools is checked against it by a
//! test in the `opc` binary. When a feature lands, its entry is removed here.
//!
//! Defaults count as configured: `memory.recall` is on unless turned off, and a
//! user relying on the default is exactly the one who would be misled.

use crate::diagnostic::KeyPath;
use crate::schema::{Config, Tool};

/// A configured feature that does nothing in this build.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Inactive {
    /// Where it is configured: a key path (the first one, when several agents configure it).
    pub path: String,
    /// What it is, e.g. `privacy gateway`.
    pub feature: String,
    /// What happens instead, in one sentence.
    pub effect: String,
}

/// The tools the engine executes; every other tool is configured but inactive. Today that is every
/// tool the schema knows: the file and shell tools run in the agent's workspace (Bash under the
/// sandbox); the list stays so that a tool added to the schema before the engine runs it is reported.
pub const ACTIVE_TOOLS: [Tool; 15] = [
    Tool::Delegate,
    Tool::DelegateParallel,
    Tool::Escalate,
    Tool::RequestApproval,
    Tool::MemoryRead,
    Tool::MemoryWrite,
    Tool::MemoryReplace,
    Tool::MemoryInsert,
    Tool::ConversationSearch,
    Tool::Read,
    Tool::Write,
    Tool::Edit,
    Tool::Bash,
    Tool::Grep,
    Tool::Glob,
];

/// Every configured feature of `config` that this build does not run, in the order of the reference.
pub fn inactive(config: &Config) -> Vec<Inactive> {
    let mut out = Vec::new();
    let mut add = |path: KeyPath, feature: &str, effect: &str| {
        out.push(Inactive {
            path: path.to_string(),
            feature: feature.to_string(),
            effect: effect.to_string(),
        });
    };
    // Core blocks, shared blocks, shareWith, recall (the Select step and `conversation_search`) and
    // local embeddings are active: blocks reach every prompt, every task and answer is recorded and
    // searched under the namespace ACL.
    // Archival memory (facts extracted after each completed task, `archival_search` /
    // `archival_insert`) and sleep-time consolidation run too: they are not listed.
    // Embeddings from an OpenAI-compatible endpoint (behind the privacy gateway) are active too.
    // Graph memory (relations on the facts, the multi-hop Select, `graph_search`) runs too.
    let mut tools: Vec<&str> = Vec::new();
    let mut first: Option<KeyPath> = None;
    for (id, agent) in &config.agents {
        for tool in agent.tools.iter().filter(|t| !ACTIVE_TOOLS.contains(t)) {
            first.get_or_insert_with(|| KeyPath::of(["agents", id, "tools"]));
            if !tools.contains(&tool.as_str()) {
                tools.push(tool.as_str());
            }
        }
    }
    if let Some(path) = first {
        add(
            path,
            &format!("tools {}", tools.join(", ")),
            "they are not offered to agents",
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(agents: &str) -> Config {
        let text = format!(
            "framework:\n  defaultModel: m\n  providers: {{ p: {{ kind: anthropic, models: {{ m: {{ input: 1, output: 1 }} }} }} }}\n  privacy: {{ enabled: false }}\n  memory: {{ consolidation: {{ enabled: false }} }}\nagents:\n{agents}"
        );
        crate::parse("t.yaml", text, None)
            .unwrap_or_else(|e| panic!("{e}"))
            .config
    }

    #[test]
    fn everything_off_is_nothing_inactive() {
        let c = config("  ceo: { role: CEO, memory: { recall: false } }\n");
        assert_eq!(inactive(&c), Vec::new());
    }

    #[test]
    fn archival_and_consolidation_are_active_and_every_tool_is_active() {
        let c = config(
            "  ceo: { role: CEO, tools: [delegate, memory_read, Bash], children: [a], memory: { archival: true, blocks: [{ label: p, description: d, value: v }] } }\n  a: { role: A, parent: ceo, tools: [memory_read, Read, Write, Edit, Grep, Glob, Bash], memory: { archival: true } }\n",
        );
        assert_eq!(inactive(&c), Vec::new());
        // Consolidation on (its default) is not listed either.
        let on = crate::parse(
            "t.yaml",
            "framework:\n  defaultModel: m\n  providers: { p: { kind: anthropic, models: { m: { input: 1, output: 1 } } } }\n  privacy: { enabled: false }\nagents:\n  ceo: { role: CEO, memory: { recall: false, archival: true } }\n".to_string(),
            None,
        )
        .unwrap_or_else(|e| panic!("{e}"))
        .config;
        assert!(on.framework.memory.consolidation.enabled);
        assert_eq!(inactive(&on), Vec::new());
    }

    /// Graph memory runs (issue 39): not listed.
    #[test]
    fn graph_memory_is_active() {
        let text = "framework:\n  defaultModel: m\n  providers: { p: { kind: anthropic, models: { m: { input: 1, output: 1 } } } }\n  privacy: { enabled: false }\n  memory: { graph: { enabled: true } }\nagents:\n  ceo: { role: CEO, memory: { recall: false } }\n";
        let c = crate::parse("t.yaml", text.to_string(), None)
            .unwrap_or_else(|e| panic!("{e}"))
            .config;
        assert!(c.framework.memory.graph_enabled);
        let listed = inactive(&c);
        assert!(listed.is_empty(), "{listed:?}");
    }

    /// OpenAI-compatible embeddings run (issue 39): not listed; their `baseUrl` is required and must be
    /// an http(s) URL, and `apiKeyEnv` names a variable.
    #[test]
    fn openai_compatible_embeddings_are_active_and_checked() {
        let with = |embedding: &str| {
            format!(
                "framework:\n  defaultModel: m\n  providers: {{ p: {{ kind: anthropic, models: {{ m: {{ input: 1, output: 1 }} }} }} }}\n  privacy: {{ enabled: false }}\n  memory: {{ consolidation: {{ enabled: false }}, embedding: {embedding} }}\nagents:\n  ceo: {{ role: CEO, tools: [conversation_search] }}\n"
            )
        };
        let ok = with(
            "{ provider: openai-compatible, model: text-embedding-3-small, dimensions: 256, baseUrl: 'http://127.0.0.1:9/v1/', apiKeyEnv: EMBED_KEY }",
        );
        let c = crate::parse("t.yaml", ok, None)
            .unwrap_or_else(|e| panic!("{e}"))
            .config;
        let listed = inactive(&c);
        assert!(listed.is_empty(), "{listed:?}");
        let e = &c.framework.memory.embedding;
        assert_eq!(e.base_url.as_deref(), Some("http://127.0.0.1:9/v1"));
        assert_eq!(e.api_key_env.as_ref().map(|v| v.name()), Some("EMBED_KEY"));
        assert_eq!(e.dimensions.get(), 256);
        for (bad, says) in [
            (
                "{ provider: openai-compatible, model: x }",
                "missing required key `baseUrl`",
            ),
            (
                "{ provider: openai-compatible, model: x, baseUrl: 'ftp://h/v1' }",
                "baseUrl",
            ),
            (
                "{ provider: openai-compatible, model: x, baseUrl: 'http://h/v1', apiKeyEnv: 'not a var' }",
                "apiKeyEnv",
            ),
        ] {
            let error = crate::parse("t.yaml", with(bad), None)
                .err()
                .unwrap_or_else(|| panic!("{bad} was accepted"))
                .to_string();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }

    /// On PostgreSQL, several nodes run (`framework.cluster`) and `opc privacy erase` works: nothing
    /// is listed.
    #[test]
    fn postgres_lists_nothing() {
        let text = "framework:\n  defaultModel: m\n  providers: { p: { kind: anthropic, models: { m: { input: 1, output: 1 } } } }\n  privacy: { enabled: false }\n  memory: { storage: postgres, consolidation: { enabled: false } }\nagents:\n  ceo: { role: CEO, memory: { recall: false } }\n";
        let c = crate::parse("t.yaml", text.to_string(), None)
            .unwrap_or_else(|e| panic!("{e}"))
            .config;
        let listed = inactive(&c);
        assert!(listed.is_empty(), "{listed:?}");
    }

    /// Every tool the schema knows is executed: none is "configured but not active".
    #[test]
    fn active_tools_are_every_tool() {
        let mut active = ACTIVE_TOOLS.to_vec();
        active.sort();
        let mut all = Tool::ALL.to_vec();
        all.sort();
        assert_eq!(active, all);
    }
}
