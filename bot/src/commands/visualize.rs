//! `opc visualize`: the org chart in the terminal, drawn like `tree`.
//!
//! One line per agent: id, role, model, tools, memory, shareWith. Colour goes through anstream, which
//! drops it when stdout is not a terminal or NO_COLOR is set, so piped output stays plain text.

use std::path::Path;
use std::process::ExitCode;

use anstyle::{AnsiColor, Style};
use opc_hierarchy::schema::Agent;
use opc_hierarchy::{ConfigError, Loaded};

use super::{eprint, print};

const ID: Style = Style::new().bold();
const ROLE: Style = AnsiColor::Cyan.on_default();
const MODEL: Style = AnsiColor::Green.on_default();
const TOOLS: Style = AnsiColor::Yellow.on_default();
const MEMORY: Style = AnsiColor::Magenta.on_default();
const DIM: Style = Style::new().dimmed();

pub fn run(path: &Path) -> ExitCode {
    match opc_hierarchy::load(path) {
        Ok(loaded) => {
            print(&draw(&loaded));
            ExitCode::SUCCESS
        }
        Err(ConfigError::Invalid(report)) => {
            eprint(&report.render(true));
            eprint(&format!(
                "{}: invalid — fix the errors above (or run `opc validate`) to see the org\n",
                path.display()
            ));
            ExitCode::from(1)
        }
        Err(error) => {
            eprint(&format!("error: {error}\n"));
            ExitCode::from(2)
        }
    }
}

/// The whole picture: a heading, then the tree from the root down.
pub fn draw(loaded: &Loaded) -> String {
    let org = &loaded.org;
    let mut out = format!(
        "{ID}{}{ID:#} {DIM}— {} agents, {} levels{DIM:#}\n",
        loaded.config.framework.name,
        org.len(),
        org.depth() + 1
    );
    // Iterative depth-first walk: (agent id, prefix for its children, connector for itself).
    let mut stack = vec![(org.root(), String::new(), String::new())];
    while let Some((id, prefix, connector)) = stack.pop() {
        out.push_str(&format!(
            "{DIM}{connector}{DIM:#}{}\n",
            describe(loaded, id)
        ));
        let children = org.children(id);
        let count = children.len();
        for (i, child) in children.into_iter().enumerate().rev() {
            let last = i + 1 == count;
            let connector = format!("{prefix}{}", if last { "└── " } else { "├── " });
            let child_prefix = format!("{prefix}{}", if last { "    " } else { "│   " });
            stack.push((child, child_prefix, connector));
        }
    }
    out
}

fn describe(loaded: &Loaded, id: &str) -> String {
    let Some(agent) = loaded.config.agents.get(id) else {
        return id.to_string();
    };
    let mut line = format!(
        "{ID}{id}{ID:#}  {ROLE}{}{ROLE:#}  {MODEL}[{}]{MODEL:#}",
        agent.role,
        model(loaded, agent)
    );
    if !agent.tools.is_empty() {
        let tools: Vec<&str> = agent.tools.iter().map(|t| t.as_str()).collect();
        line.push_str(&format!("  {TOOLS}tools: {}{TOOLS:#}", tools.join(", ")));
    }
    line.push_str(&format!("  {MEMORY}memory: {}{MEMORY:#}", memory(agent)));
    if !agent.memory.share_with.is_empty() {
        line.push_str(&format!(
            "  {DIM}shares with: {}{DIM:#}",
            agent.memory.share_with.join(", ")
        ));
    }
    line
}

/// `provider/model`, marked when it is the default rather than the agent's own choice.
fn model(loaded: &Loaded, agent: &Agent) -> String {
    let framework = &loaded.config.framework;
    let (reference, inherited) = match &agent.model {
        Some(model) => (model.as_str(), false),
        None => (framework.default_model.as_str(), true),
    };
    let resolved = framework.resolve_model(reference).map_or_else(
        |_| reference.to_string(),
        |(provider, id)| format!("{provider}/{id}"),
    );
    if inherited {
        format!("{resolved}, default")
    } else {
        resolved
    }
}

/// `blocks persona, team_status · shared team_policies · recall · archival`
fn memory(agent: &Agent) -> String {
    let memory = &agent.memory;
    let mut parts = Vec::new();
    if !memory.blocks.is_empty() {
        let labels: Vec<&str> = memory.blocks.iter().map(|b| b.label.as_str()).collect();
        parts.push(format!("blocks {}", labels.join(", ")));
    }
    if !memory.shared_blocks.is_empty() {
        parts.push(format!("shared {}", memory.shared_blocks.join(", ")));
    }
    if memory.recall {
        parts.push("recall".to_string());
    }
    if memory.archival {
        parts.push("archival".to_string());
    }
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(" · ")
    }
}
