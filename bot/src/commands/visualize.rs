//! `opc visualize`: the org chart in the terminal, drawn like `tree`.
//!
//! One line per agent: id, role, model, tools, memory, shareWith. Colour goes through anstream, which
//! drops it when stdout is not a terminal or NO_COLOR is set, so piped output stays plain text. On a
//! terminal, lines wrap to its width (from `terminal_size`, already in clap's tree), continuing under
//! the agent with the tree's guide lines intact.

use std::path::Path;
use std::process::ExitCode;

use anstyle::{AnsiColor, Style};
use opc_hierarchy::schema::Agent;
use opc_hierarchy::{ConfigError, Loaded};

use crate::term::{eprint, print};

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

/// The whole picture for stdout: wrapped to the terminal's width when stdout is one, or to `COLUMNS`
/// when that is set (a pager or a terminal the size query cannot see, such as some CI logs and
/// editors' consoles); unwrapped otherwise (so scripts get one line per agent).
pub fn draw(loaded: &Loaded) -> String {
    use std::io::IsTerminal;
    let terminal = std::io::stdout()
        .is_terminal()
        .then(|| terminal_size::terminal_size().map(|(w, _)| usize::from(w.0)))
        .flatten();
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok());
    draw_to_width(loaded, terminal.or(columns).filter(|w| *w > 0))
}

/// A heading, then the tree from the root down. With a `width`, an agent's description continues on
/// indented lines (under a `│` that leads to its children) instead of running past the edge.
pub fn draw_to_width(loaded: &Loaded, width: Option<usize>) -> String {
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
        let children = org.children(id);
        let continuation = format!(
            "{prefix}{}",
            if children.is_empty() {
                "    "
            } else {
                "│   "
            }
        );
        out.push_str(&wrap(
            &connector,
            &continuation,
            &describe(loaded, id),
            width,
        ));
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

/// A run of text in one style.
type Piece = (Style, String);

/// Lays out `pieces` (groups of styled words, groups two spaces apart) after `first` and, on further
/// lines, after `next`, breaking between words so no line is wider than `width` (a single word wider
/// than the room left stands alone on its line).
fn wrap(first: &str, next: &str, groups: &[Vec<Piece>], width: Option<usize>) -> String {
    let mut out = format!("{DIM}{first}{DIM:#}");
    let mut column = first.chars().count();
    let indent = next.chars().count();
    let mut at_line_start = true;
    for (g, group) in groups.iter().enumerate() {
        for (w, (style, word)) in group.iter().enumerate() {
            let gap = match (at_line_start, w == 0 && g > 0) {
                (true, _) => 0,
                (false, true) => 2,
                (false, false) => 1,
            };
            let len = word.chars().count();
            if let Some(width) = width
                && !at_line_start
                && column + gap + len > width
            {
                out.push_str(&format!("\n{DIM}{next}{DIM:#}"));
                column = indent;
            } else {
                out.push_str(&" ".repeat(gap));
                column += gap;
            }
            out.push_str(&format!("{style}{word}{style:#}"));
            column += len;
            at_line_start = false;
        }
    }
    out.push('\n');
    out
}

/// Words of `text` in `style`.
fn words(style: Style, text: &str) -> Vec<Piece> {
    text.split(' ')
        .filter(|w| !w.is_empty())
        .map(|w| (style, w.to_string()))
        .collect()
}

/// The description of one agent, as groups of words: id, role, model, tools, memory, shareWith.
fn describe(loaded: &Loaded, id: &str) -> Vec<Vec<Piece>> {
    let Some(agent) = loaded.config.agents.get(id) else {
        return vec![words(ID, id)];
    };
    let mut groups = vec![
        words(ID, id),
        words(ROLE, &agent.role),
        words(MODEL, &format!("[{}]", model(loaded, agent))),
    ];
    if !agent.tools.is_empty() {
        let tools: Vec<&str> = agent.tools.iter().map(|t| t.as_str()).collect();
        groups.push(words(TOOLS, &format!("tools: {}", tools.join(", "))));
    }
    groups.push(words(MEMORY, &format!("memory: {}", memory(agent))));
    if !agent.memory.share_with.is_empty() {
        groups.push(words(
            DIM,
            &format!("shares with: {}", agent.memory.share_with.join(", ")),
        ));
    }
    groups
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_fit_the_width_and_keep_every_word() {
        let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../opc.config.yaml");
        let loaded = opc_hierarchy::load(&example).expect("the example org loads");
        let wide = draw_to_width(&loaded, None);
        let plain = |text: &str| {
            let mut out = Vec::new();
            let mut stream = anstream::StripStream::new(&mut out);
            std::io::Write::write_all(&mut stream, text.as_bytes()).expect("strip");
            String::from_utf8(out).expect("utf-8")
        };
        let wide = plain(&wide);
        for width in [50, 72, 100] {
            let narrow = plain(&draw_to_width(&loaded, Some(width)));
            for line in narrow.lines() {
                assert!(line.chars().count() <= width, "{width}: {line:?}\n{narrow}");
            }
            let words = |text: &str| -> Vec<String> {
                text.split_whitespace()
                    .filter(|w| !w.chars().all(|c| "│├└─".contains(c)))
                    .map(str::to_string)
                    .collect()
            };
            assert_eq!(words(&narrow), words(&wide), "{width}");
        }
        assert_eq!(
            wide.lines().count(),
            loaded.org.len() + 1,
            "unwrapped: one line per agent"
        );
    }
}
