//! The `Bash` tool: `bash -c COMMAND` in the calling agent's workspace, under the kernel sandbox
//! ([`opc_sandbox`]), with approvals that follow the org chart.
//!
//! A call goes: arguments checked → the matcher ([`allow`]) decides whether the command runs without
//! asking (every part starts with a prefix of `OrgTree::bash_allow`, which the managers have already
//! narrowed) → otherwise `bash.unlisted` decides: `deny` is a tool error naming the policy; `ask`
//! raises an approval in the conversation ([`approval`]: approve once, approve this exact command for
//! the rest of the conversation, reject) unless the same agent already had this exact command approved
//! for this conversation → the sandbox runs it: the workspace read-write (created on first use), the
//! descendants' workspaces read-only, network and extra variables from `framework.sandbox`.
//!
//! Invariants:
//! - fail closed: a rejected, timed-out or cancelled approval never runs the command, and the tool
//!   result says which; a sandbox that cannot start (a kernel feature missing) is a tool error naming
//!   it, never an unsandboxed run (only `framework.sandbox.mode: off` runs without one);
//! - the timeout defaults to 2 minutes and is clamped to 10 (the result says so); on timeout, and
//!   when the call's future is dropped (the task or its tree was cancelled), the sandbox kills the
//!   command's whole process tree;
//! - the tool-call ledger gets a description of the command that holds no personal data
//!   ([`allow::safe_summary`]): the command itself is in the task's history and the approval card,
//!   where `opc privacy erase` finds it, but never in the ledger.

mod allow;
mod approval;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use opc_hierarchy::schema::{Agent, SandboxMode, Tool, Unlisted};
use opc_sandbox::{Mode, Policy, Sandbox};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{SpecContext, ToolContext, ToolHandler, ToolRegistry, ToolResult, Validate, parse};
use crate::llm::ToolSpec;
pub(crate) use allow::{Decision, decide, safe_summary};
pub use approval::{ONCE, REJECT, for_conversation, options as approval_options};

/// Default timeout: 2 minutes.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Largest timeout: 10 minutes (a larger one is clamped, and the result says so).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);

/// Register `Bash` over `sandbox`.
pub(super) fn register(registry: &mut ToolRegistry, sandbox: Arc<Sandbox>) {
    registry.register(Arc::new(BashTool { sandbox }));
}

/// `Bash` arguments (Claude Code's names: models are trained on them).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BashArgs {
    /// The command line, run by `bash -c`.
    pub command: String,
    /// Milliseconds (default 120,000; at most 600,000).
    #[serde(default)]
    pub timeout: Option<u64>,
    /// What the command does, in a few words (shown on the approval card).
    #[serde(default)]
    pub description: Option<String>,
}

impl Validate for BashArgs {
    fn validate(&self) -> Result<(), String> {
        super::non_empty("command", &self.command)?;
        if self.timeout == Some(0) {
            return Err("`timeout` must be a positive number of milliseconds".into());
        }
        Ok(())
    }
}

impl BashArgs {
    /// The timeout to run with, and whether the requested one was clamped.
    fn timeout(&self) -> (Duration, bool) {
        match self.timeout.map(Duration::from_millis) {
            None => (DEFAULT_TIMEOUT, false),
            Some(t) if t > MAX_TIMEOUT => (MAX_TIMEOUT, true),
            Some(t) => (t, false),
        }
    }
}

struct BashTool {
    sandbox: Arc<Sandbox>,
}

#[async_trait]
impl ToolHandler for BashTool {
    fn name(&self) -> &'static str {
        Tool::Bash.wire_name()
    }

    fn offered_to(&self, agent: &Agent) -> bool {
        agent.tools.contains(&Tool::Bash)
    }

    fn spec(&self, _cx: &SpecContext<'_>) -> ToolSpec {
        ToolSpec {
            name: self.name().to_string(),
            description: "Run a shell command (`bash -c`) in your workspace, which it sees as \
                `/workspace` (its working directory). It runs in a sandbox with a private root: it \
                can write only inside `/workspace`, read your team's workspaces under `/team/<name>`, \
                and has no network unless the org allows it. HOME (`/home/agent`) and `/tmp` are \
                private and empty at the start of every call. stdout and stderr come back together \
                (long output keeps its head and tail), then the exit code. Commands your policy does \
                not allow may need a human's approval first; a rejected command does not run. \
                Default timeout 2 minutes, at most 10; on timeout the whole process tree is killed."
                .to_string(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "minLength": 1, "description": "the command to run"},
                    "timeout": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT.as_millis() as u64,
                                "description": "milliseconds (default 120000, max 600000)"},
                    "description": {"type": "string", "description": "what this command does, in 5-10 words (shown to the human who approves it)"}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        }
    }

    async fn run(&self, cx: &ToolContext<'_>, input: &Value) -> ToolResult {
        let args: BashArgs = match parse(self.name(), input) {
            Ok(a) => a,
            Err(e) => return Ok((e, true)),
        };
        let org = cx.org();
        let agent = cx.agent().to_string();
        let allow = org.bash_allow(&agent);
        cx.note(Some(safe_summary(&args.command, &allow)), None);
        let Some(access) = org.workspace_access(&agent) else {
            observe_run("not_run", None);
            return Ok((format!("`{agent}` has no workspace in this org"), true));
        };
        if let Err(e) = prepare_workspace(&access.write).await {
            observe_run("not_run", None);
            return Ok((
                format!(
                    "cannot create the workspace {}: {e}; check that `framework.workspace.root` is writable by OPC",
                    access.write.display()
                ),
                true,
            ));
        }
        // Whether to ask, and the answer.
        if let Decision::Unlisted(why) = decide(&args.command, &allow) {
            match org.bash_unlisted(&agent) {
                Unlisted::Deny => {
                    observe_run("denied", None);
                    return Ok((
                        format!(
                            "not run: `{agent}`'s bash policy does not allow this command ({why}), and \
                             `agents.{agent}.bash.unlisted` is `deny`. Allowed prefixes: {}",
                            if allow.is_empty() {
                                "none".to_string()
                            } else {
                                allow.join(", ")
                            }
                        ),
                        true,
                    ));
                }
                Unlisted::Ask => {
                    if !cx.host().command_approved(&args.command).await? {
                        let summary = approval::summary(
                            &agent,
                            &args.command,
                            &access.write,
                            args.description.as_deref(),
                            &why,
                        );
                        let decided = cx
                            .host()
                            .ask(cx.tool_use_id, &summary, &approval::options(&args.command))
                            .await?;
                        match approval::verdict(&decided, &args.command) {
                            approval::Verdict::Once => {}
                            approval::Verdict::ForConversation => {
                                cx.host().approve_command(&args.command, decided.id).await?;
                            }
                            approval::Verdict::Rejected(text) => {
                                observe_run("rejected", None);
                                return Ok((text, true));
                            }
                        }
                    }
                }
            }
        }
        let sandbox = org.sandbox();
        let policy = Policy {
            mode: match sandbox.mode {
                SandboxMode::Enforce => Mode::Enforce,
                SandboxMode::Off => Mode::Off,
            },
            workdir: access.write.clone(),
            read_only: access.read.clone(),
            network: sandbox.network,
            // Values read from OPC's own environment by name; a variable that is not set is left out.
            env: sandbox
                .env
                .iter()
                .filter_map(|name| std::env::var(name).ok().map(|v| (name.clone(), v)))
                .collect(),
            limits: Default::default(),
        };
        let (timeout, clamped) = args.timeout();
        match self.sandbox.run(&policy, &args.command, timeout).await {
            Err(e) => {
                observe_run("not_run", None);
                Ok((format!("not run: {e}"), true))
            }
            Ok(output) => {
                cx.note(None, output.exit_code);
                observe_run(run_outcome(&output), output.exit_code);
                Ok(result_text(&output, timeout, clamped))
            }
        }
    }
}

/// How a command that the sandbox ran ended, in one word (`opc.sandbox.outcome`).
fn run_outcome(output: &opc_sandbox::Output) -> &'static str {
    if output.timed_out {
        "timed_out"
    } else if output.exit_code == Some(0) {
        "ok"
    } else if output.exit_code.is_some() {
        "failed"
    } else if output.signal.is_some() {
        "killed"
    } else {
        "unknown"
    }
}

/// Record a command's sandbox outcome on its `execute_tool Bash` span (the current span: the
/// session runs each tool inside its own) and count it in `opc.sandbox.runs`. Never the command
/// or its output, which may hold real personal data.
fn observe_run(outcome: &'static str, exit_code: Option<i32>) {
    let span = tracing::Span::current();
    span.record("opc.sandbox.outcome", outcome);
    if let Some(code) = exit_code {
        span.record("opc.sandbox.exit_code", code);
    }
    opc_telemetry::metrics::instruments().sandbox_runs.add(
        1,
        &[opc_telemetry::metrics::kv("opc.sandbox.outcome", outcome)],
    );
}

/// Create the workspace if it is missing; when OPC runs as root, hand it to the sandbox's user so
/// the command can write in it ([`opc_sandbox::make_writable`], cheap once done).
async fn prepare_workspace(dir: &std::path::Path) -> std::io::Result<()> {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || opc_sandbox::make_writable(&dir))
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())))
}

/// The result the model sees: the output, then how the command ended. A non-zero exit, a signal and
/// a timeout are errors.
fn result_text(output: &opc_sandbox::Output, timeout: Duration, clamped: bool) -> (String, bool) {
    let mut text = output.text.clone();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    let (end, is_error) = if output.timed_out {
        (
            format!(
                "timed out after {} s; the process tree was killed",
                timeout.as_secs_f64()
            ),
            true,
        )
    } else if let Some(code) = output.exit_code {
        (format!("exit code {code}"), code != 0)
    } else if let Some(signal) = output.signal {
        (format!("killed by signal {signal}"), true)
    } else {
        ("ended without an exit code".to_string(), true)
    };
    text.push_str(&end);
    if clamped {
        text.push_str(&format!(
            "\n(the requested timeout was above the maximum; it was clamped to {} minutes)",
            MAX_TIMEOUT.as_secs() / 60
        ));
    }
    (text, is_error)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn arguments_and_timeouts() {
        let a: BashArgs = parse("Bash", &json!({"command": "ls"})).unwrap();
        assert_eq!(a.timeout(), (DEFAULT_TIMEOUT, false));
        let a: BashArgs = parse("Bash", &json!({"command": "ls", "timeout": 5000})).unwrap();
        assert_eq!(a.timeout(), (Duration::from_secs(5), false));
        let a: BashArgs = parse("Bash", &json!({"command": "ls", "timeout": 3_600_000})).unwrap();
        assert_eq!(a.timeout(), (MAX_TIMEOUT, true));
        for (input, needle) in [
            (json!({"command": " "}), "`command` must not be empty"),
            (json!({"command": "ls", "timeout": 0}), "positive"),
            (json!({"command": "ls", "cwd": "/"}), "unknown field `cwd`"),
            (json!({"timeout": 5}), "missing field `command`"),
        ] {
            let err = parse::<BashArgs>("Bash", &input).unwrap_err();
            assert!(err.contains(needle), "{err}");
        }
    }

    fn output(exit: Option<i32>, signal: Option<i32>, timed_out: bool) -> opc_sandbox::Output {
        opc_sandbox::Output {
            text: "hello".into(),
            omitted_bytes: 0,
            exit_code: exit,
            signal,
            timed_out,
            duration: Duration::from_millis(3),
        }
    }

    #[test]
    fn the_result_ends_with_how_the_command_ended() {
        let t = Duration::from_secs(2);
        assert_eq!(
            result_text(&output(Some(0), None, false), t, false),
            ("hello\nexit code 0".to_string(), false)
        );
        assert_eq!(
            result_text(&output(Some(3), None, false), t, false),
            ("hello\nexit code 3".to_string(), true)
        );
        let (text, err) = result_text(&output(None, Some(9), false), t, false);
        assert!(err && text.ends_with("killed by signal 9"), "{text}");
        let (text, err) = result_text(&output(None, Some(9), true), t, false);
        assert!(
            err && text.contains("timed out after 2 s; the process tree was killed"),
            "{text}"
        );
        let (text, _) = result_text(&output(Some(0), None, false), MAX_TIMEOUT, true);
        assert!(text.contains("clamped to 10 minutes"), "{text}");
    }
}
