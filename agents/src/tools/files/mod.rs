//! The file tools: `Read`, `Write`, `Edit`, `Grep` and `Glob`, with Claude Code's names and
//! parameters (models are trained on them), confined to the caller's workspaces.
//!
//! Who reaches what is the org's answer (`OrgTree::workspace_access`): the agent's own workspace
//! read-write, its descendants' read-only, nothing else. Each concern has its file:
//! - `access`: resolving a path (relative, under `/workspace`, or a host path in a root) and opening
//!   it beneath its root without escaping (symlinks, `..`, magic links, hard links, a symlink
//!   swapped in after the check), with errors that say nothing about what lies outside;
//! - `walk`: the directory walk of Glob and Grep, ripgrep's ignore rules applied over directory
//!   handles, so no planted ignore file is read by name;
//! - `show`: how a path is shown to the model (control characters escaped);
//! - `tracking`: the per-task read records behind "Read before you overwrite";
//! - `read`, `write`, `edit`, `grep`, `glob`: the tools' work.
//!
//! Invariants: every refusal and every bad argument is a tool error (`is_error`) naming the rule,
//! never a task failure; every file the tools open (ignore files included) is opened beneath an
//! allowed root's handle, non-blocking, and read only when it is a regular file; no message or
//! listing shows the workspace's host path or says anything about a path outside the roots, and
//! every path shown goes through `show`; no call blocks an async worker (the filesystem work runs on
//! `spawn_blocking`); nothing is read whole that need not be (Read streams; only Edit loads a file,
//! bounded); files and directories the tools create belong to the sandbox's user when OPC runs as
//! root (`opc_sandbox::sandbox_owner`), so the agent's Bash can change them.

mod access;
mod edit;
mod glob;
mod grep;
mod read;
mod show;
#[cfg(test)]
mod testing;
mod tracking;
mod walk;
mod write;

use std::sync::Arc;

use async_trait::async_trait;
use opc_hierarchy::schema::{Agent, Tool};
use serde::Deserialize;
use serde_json::{Value, json};

pub use access::Access;
use access::{Intent, Roots, check_regular, open_error};
use tracking::ReadRecords;

use super::{SpecContext, ToolContext, ToolHandler, ToolRegistry, ToolResult, Validate, parse};
use crate::llm::ToolSpec;

/// Register the five file tools, sharing one set of read records.
pub(super) fn register(registry: &mut ToolRegistry) {
    let records = Arc::new(ReadRecords::default());
    for tool in [Tool::Read, Tool::Write, Tool::Edit, Tool::Grep, Tool::Glob] {
        registry.register(Arc::new(FileTool {
            tool,
            records: records.clone(),
        }));
    }
}

/// One of the file tools.
struct FileTool {
    tool: Tool,
    records: Arc<ReadRecords>,
}

/// A decoded call, ready to run off the async worker.
enum Call {
    Read(ReadArgs),
    Write(WriteArgs),
    Edit(EditArgs),
    Grep(Box<grep::Options>),
    Glob(GlobArgs),
}

#[async_trait]
impl ToolHandler for FileTool {
    fn name(&self) -> &'static str {
        self.tool.wire_name()
    }

    fn offered_to(&self, agent: &Agent) -> bool {
        agent.tools.contains(&self.tool)
    }

    fn spec(&self, _cx: &SpecContext<'_>) -> ToolSpec {
        spec(self.tool)
    }

    async fn run(&self, cx: &ToolContext<'_>, input: &Value) -> ToolResult {
        let name = self.name();
        let call = match decode(self.tool, input) {
            Ok(call) => call,
            Err(e) => return Ok((e, true)),
        };
        let Some(access) = cx.org().workspace_access(cx.agent()) else {
            return Ok((
                format!("`{}` has no workspace in this org", cx.agent()),
                true,
            ));
        };
        let base = cx.org().workspace_root().to_path_buf();
        let (agent, task) = (cx.agent().to_string(), cx.task());
        let records = self.records.clone();
        let work = tokio::task::spawn_blocking(move || {
            let access = Access {
                write: access.write,
                read: access.read,
            };
            let owner = opc_sandbox::sandbox_owner();
            let roots = Roots::open(&base, &access, owner)?;
            run_call(&roots, &records, &agent, task, owner, call)
        });
        Ok(match work.await {
            Ok(Ok(text)) => (text, false),
            Ok(Err(message)) => (message, true),
            Err(e) => (format!("the {name} call did not complete: {e}"), true),
        })
    }
}

/// The file tools outside a session, for benches and other callers that are not the engine: the
/// same decoding, rules and output as the registered handlers, with their own read records.
/// Blocking: call it where blocking is fine (the handlers run it on `spawn_blocking`).
#[derive(Debug, Default)]
pub struct Standalone {
    records: ReadRecords,
}

impl Standalone {
    /// Run `tool` (one of the five file tools) with `input` for `agent`'s `task`, reaching what
    /// `access` allows beneath the workspace root `base`. Returns `(content, is_error)`.
    pub fn call(
        &self,
        base: &std::path::Path,
        access: &Access,
        agent: &str,
        task: crate::store::TaskId,
        tool: Tool,
        input: &Value,
    ) -> (String, bool) {
        let result = decode(tool, input).and_then(|call| {
            let owner = opc_sandbox::sandbox_owner();
            let roots = Roots::open(base, access, owner)?;
            run_call(&roots, &self.records, agent, task, owner, call)
        });
        match result {
            Ok(text) => (text, false),
            Err(message) => (message, true),
        }
    }
}

/// Decode a tool's arguments (the error is for the model).
fn decode(tool: Tool, input: &Value) -> Result<Call, String> {
    let name = tool.wire_name();
    Ok(match tool {
        Tool::Read => Call::Read(parse(name, input)?),
        Tool::Write => Call::Write(parse(name, input)?),
        Tool::Edit => Call::Edit(parse(name, input)?),
        Tool::Grep => {
            let a: GrepArgs = parse(name, input)?;
            let context = a.context.unwrap_or(0);
            Call::Grep(Box::new(grep::Options {
                pattern: a.pattern,
                path: a.path,
                glob: a.glob,
                mode: a.output_mode.unwrap_or_default(),
                case_insensitive: a.case_insensitive.unwrap_or(false),
                line_numbers: a.line_numbers.unwrap_or(true),
                after: a.after.unwrap_or(context) as usize,
                before: a.before.unwrap_or(context) as usize,
                head_limit: a.head_limit.filter(|h| *h > 0).map(|h| h as usize),
            }))
        }
        Tool::Glob => Call::Glob(parse(name, input)?),
        other => return Err(format!("`{}` is not a file tool", other.wire_name())),
    })
}

/// Run one decoded call within `roots`.
fn run_call(
    roots: &Roots,
    records: &ReadRecords,
    agent: &str,
    task: crate::store::TaskId,
    owner: Option<(u32, u32)>,
    call: Call,
) -> Result<String, String> {
    let who = write::Writer {
        agent,
        task,
        records,
        owner,
    };
    match call {
        Call::Read(a) => {
            let resolved = roots.resolve(&a.file_path, Intent::Read)?;
            let shown = roots.display(&resolved.path);
            let file = resolved.open_read().map_err(|e| open_error(&e, &shown))?;
            let stat = check_regular(&file, &shown)?;
            let offset = a.offset.unwrap_or(1).max(1) as usize;
            let limit = a.limit.map_or(read::DEFAULT_LIMIT, |l| l as usize);
            let out = read::read(file, &stat, &shown, offset, limit)?;
            records.record(agent, task, &resolved.path, out.snapshot);
            Ok(out.text)
        }
        Call::Write(a) => write::write(roots, &who, &a.file_path, &a.content),
        Call::Edit(a) => edit::edit(
            roots,
            &who,
            &a.file_path,
            &a.old_string,
            &a.new_string,
            a.replace_all.unwrap_or(false),
        ),
        Call::Grep(opts) => grep::grep(roots, &opts),
        Call::Glob(a) => glob::glob(roots, &a.pattern, a.path.as_deref()),
    }
}

/// `Read` arguments.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// The file, relative to the workspace or absolute.
    pub file_path: String,
    /// The first line to show (1-based).
    #[serde(default)]
    pub offset: Option<u64>,
    /// How many lines to show.
    #[serde(default)]
    pub limit: Option<u64>,
}

/// `Write` arguments.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// The file.
    pub file_path: String,
    /// Its whole new content.
    pub content: String,
}

/// `Edit` arguments.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    /// The file.
    pub file_path: String,
    /// The exact text to replace.
    pub old_string: String,
    /// Its replacement.
    pub new_string: String,
    /// Replace every occurrence (default: exactly one must exist).
    #[serde(default)]
    pub replace_all: Option<bool>,
}

/// `Grep` arguments (the dashed names are `rg`'s flags, as in Claude Code).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// The regex (Rust `regex` syntax, as ripgrep).
    pub pattern: String,
    /// File or directory to search (default: the workspace).
    #[serde(default)]
    pub path: Option<String>,
    /// Only files matching this glob.
    #[serde(default)]
    pub glob: Option<String>,
    /// `content`, `files_with_matches` (default) or `count`.
    #[serde(default)]
    pub output_mode: Option<grep::OutputMode>,
    /// Case-insensitive.
    #[serde(default, rename = "-i")]
    pub case_insensitive: Option<bool>,
    /// Line numbers (content mode; default true).
    #[serde(default, rename = "-n")]
    pub line_numbers: Option<bool>,
    /// Lines after each match (content mode).
    #[serde(default, rename = "-A")]
    pub after: Option<u32>,
    /// Lines before each match (content mode).
    #[serde(default, rename = "-B")]
    pub before: Option<u32>,
    /// Lines before and after each match (content mode).
    #[serde(default, rename = "-C")]
    pub context: Option<u32>,
    /// Only the first N entries.
    #[serde(default)]
    pub head_limit: Option<u64>,
}

/// `Glob` arguments.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GlobArgs {
    /// The glob.
    pub pattern: String,
    /// The directory it is relative to (default: the workspace).
    #[serde(default)]
    pub path: Option<String>,
}

/// The most context lines Grep accepts.
const MAX_CONTEXT: u32 = 100;

fn non_empty(field: &str, value: &str) -> Result<(), String> {
    if value.is_empty() {
        Err(format!("`{field}` must not be empty"))
    } else {
        Ok(())
    }
}

impl Validate for ReadArgs {
    fn validate(&self) -> Result<(), String> {
        non_empty("file_path", &self.file_path)?;
        if self.limit == Some(0) {
            return Err("`limit` must be at least 1".into());
        }
        Ok(())
    }
}

impl Validate for WriteArgs {
    fn validate(&self) -> Result<(), String> {
        non_empty("file_path", &self.file_path)
    }
}

impl Validate for EditArgs {
    fn validate(&self) -> Result<(), String> {
        non_empty("file_path", &self.file_path)?;
        non_empty("old_string", &self.old_string)?;
        if self.old_string == self.new_string {
            return Err("`old_string` and `new_string` must differ".into());
        }
        Ok(())
    }
}

impl Validate for GrepArgs {
    fn validate(&self) -> Result<(), String> {
        non_empty("pattern", &self.pattern)?;
        for (flag, value) in [
            ("-A", self.after),
            ("-B", self.before),
            ("-C", self.context),
        ] {
            if value.is_some_and(|v| v > MAX_CONTEXT) {
                return Err(format!("`{flag}` must be at most {MAX_CONTEXT}"));
            }
        }
        Ok(())
    }
}

impl Validate for GlobArgs {
    fn validate(&self) -> Result<(), String> {
        non_empty("pattern", &self.pattern)
    }
}

/// The spec of a file tool (descriptions after Claude Code's, with this org's rules).
fn spec(tool: Tool) -> ToolSpec {
    const WHERE: &str = "Paths are relative to your workspace, or absolute under /workspace (your \
                         workspace, as your Bash sees it); you may also read (never change) your \
                         subordinates' workspaces.";
    let (description, schema) = match tool {
        Tool::Read => (
            format!(
                "Read a text file. Lines are numbered like `cat -n`; by default up to {} lines \
                 from the start; use offset and limit for a long file. Lines longer than {} \
                 characters are cut. Binary files are refused. {WHERE}",
                read::DEFAULT_LIMIT,
                read::MAX_LINE_CHARS
            ),
            json!({
                "type": "object",
                "properties": {
                    "file_path": {"type": "string", "minLength": 1, "description": "the file to read"},
                    "offset": {"type": "integer", "minimum": 0, "description": "the line number to start from (1-based)"},
                    "limit": {"type": "integer", "minimum": 1, "description": "how many lines to read"}
                },
                "required": ["file_path"],
                "additionalProperties": false
            }),
        ),
        Tool::Write => (
            format!(
                "Write a file (created with its directories, or replaced whole, atomically). To \
                 replace an existing file you must Read it first in this task, and it must not \
                 have changed since. Prefer Edit for changes to an existing file. {WHERE}"
            ),
            json!({
                "type": "object",
                "properties": {
                    "file_path": {"type": "string", "minLength": 1, "description": "the file to write"},
                    "content": {"type": "string", "description": "the file's whole new content"}
                },
                "required": ["file_path", "content"],
                "additionalProperties": false
            }),
        ),
        Tool::Edit => (
            format!(
                "Replace exact text in a file you have Read in this task. old_string must occur \
                 exactly once (give enough surrounding lines to make it unique) unless replace_all \
                 is true; copy it exactly from Read's output, without the line-number prefix. \
                 {WHERE}"
            ),
            json!({
                "type": "object",
                "properties": {
                    "file_path": {"type": "string", "minLength": 1, "description": "the file to change"},
                    "old_string": {"type": "string", "minLength": 1, "description": "the exact text to replace"},
                    "new_string": {"type": "string", "description": "the replacement (different from old_string)"},
                    "replace_all": {"type": "boolean", "default": false, "description": "replace every occurrence"}
                },
                "required": ["file_path", "old_string", "new_string"],
                "additionalProperties": false
            }),
        ),
        Tool::Grep => (
            format!(
                "Search file contents with a regular expression (ripgrep). .gitignore is \
                 honoured; hidden files are skipped. output_mode: files_with_matches (default; \
                 newest first), content (matching lines, with -n line numbers and -A/-B/-C \
                 context) or count. Results are capped ({} files, {} characters); head_limit \
                 shows only the first N entries. {WHERE}",
                grep::MAX_FILES,
                grep::MAX_OUTPUT_CHARS
            ),
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "minLength": 1, "description": "the regular expression"},
                    "path": {"type": "string", "description": "file or directory to search (default: your workspace)"},
                    "glob": {"type": "string", "description": "only files matching this glob, e.g. \"*.rs\" or \"*.{ts,tsx}\""},
                    "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"], "default": "files_with_matches"},
                    "-i": {"type": "boolean", "description": "case-insensitive"},
                    "-n": {"type": "boolean", "default": true, "description": "line numbers (content mode)"},
                    "-A": {"type": "integer", "minimum": 0, "maximum": MAX_CONTEXT, "description": "lines after each match (content mode)"},
                    "-B": {"type": "integer", "minimum": 0, "maximum": MAX_CONTEXT, "description": "lines before each match (content mode)"},
                    "-C": {"type": "integer", "minimum": 0, "maximum": MAX_CONTEXT, "description": "lines before and after each match (content mode)"},
                    "head_limit": {"type": "integer", "minimum": 0, "description": "only the first N files, lines or counts (0: no limit)"}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        ),
        _ => (
            format!(
                "Find files by glob pattern, e.g. \"**/*.rs\" or \"src/**/*.{{ts,tsx}}\" (`*` stays \
                 in one directory, `**` crosses directories), newest first, at most {}. \
                 .gitignore is honoured; hidden files are skipped. {WHERE}",
                glob::MAX_FILES
            ),
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "minLength": 1, "description": "the glob, relative to path"},
                    "path": {"type": "string", "description": "the directory to search (default: your workspace)"}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        ),
    };
    ToolSpec {
        name: tool.wire_name().to_string(),
        description,
        input_schema: schema,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::ending::TaskEnd;
    use crate::store::{StoreError, TaskId};
    use crate::tools::{ApprovalArgs, DelegateArgs, SeenVersions, ToolHost};
    use opc_hierarchy::OrgTree;
    use std::path::Path;

    /// A session stand-in: who calls, and the org.
    struct Host {
        agent: String,
        task: TaskId,
        org: OrgTree,
    }

    #[async_trait]
    impl ToolHost for Host {
        fn agent(&self) -> &str {
            &self.agent
        }
        fn task(&self) -> TaskId {
            self.task
        }
        fn conversation(&self) -> &str {
            "c"
        }
        fn org(&self) -> &OrgTree {
            &self.org
        }
        fn check_delegation(&self, _to: &str) -> Result<(), String> {
            Err("not in this test".into())
        }
        async fn delegate(
            &self,
            _tool_use_id: &str,
            _index: u32,
            _args: &DelegateArgs,
        ) -> Result<TaskEnd, StoreError> {
            Ok(TaskEnd::Failed("not in this test".into()))
        }
        async fn request_approval(&self, _id: &str, _args: &ApprovalArgs) -> ToolResult {
            Ok(("not in this test".into(), true))
        }
        async fn ask(
            &self,
            _id: &str,
            _summary: &str,
            _options: &[crate::store::OfferedOption],
        ) -> Result<crate::store::Approval, StoreError> {
            Err(StoreError::Writer("no approvals in this test".into()))
        }
        async fn command_approved(&self, _command: &str) -> Result<bool, StoreError> {
            Ok(false)
        }
        async fn approve_command(&self, _command: &str, _approval: i64) -> Result<(), StoreError> {
            Ok(())
        }
    }

    fn org(dir: &Path) -> OrgTree {
        let text = "framework:\n  defaultModel: m\n  providers: { p: { kind: anthropic, models: { m: { input: 1, output: 1 } } } }\n\
                    agents:\n  ceo: { role: CEO, tools: [delegate, Read, Grep, Glob], children: [dev] }\n  \
                    dev: { role: Dev, parent: ceo, tools: [Read, Write, Edit, Grep, Glob] }\n";
        opc_hierarchy::parse("t.yaml", text.to_string(), Some(dir))
            .unwrap()
            .org
    }

    async fn call(
        registry: &ToolRegistry,
        host: &Host,
        tool: &str,
        input: Value,
    ) -> (String, bool) {
        let seen = SeenVersions::default();
        let cx = ToolContext::new(host, "t1", &seen);
        let handler = registry.tools.iter().find(|t| t.name() == tool).unwrap();
        handler.run(&cx, &input).await.unwrap()
    }

    #[tokio::test]
    async fn a_worker_writes_reads_edits_and_searches_its_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let registry = ToolRegistry::standard(None, None, None, None);
        let dev = Host {
            agent: "dev".into(),
            task: 1,
            org: org(&base),
        };
        let (out, err) = call(
            &registry,
            &dev,
            "Write",
            json!({"file_path": "src/app.py", "content": "print('hi')\nprint('bye')\n"}),
        )
        .await;
        assert!(!err, "{out}");
        let ws = base.join(".opc/workspaces/dev");
        assert_eq!(
            std::fs::read_to_string(ws.join("src/app.py")).unwrap(),
            "print('hi')\nprint('bye')\n"
        );
        // Another task of the same agent has not read it.
        let other = Host {
            agent: "dev".into(),
            task: 2,
            org: org(&base),
        };
        let (out, err) = call(
            &registry,
            &other,
            "Edit",
            json!({"file_path": "src/app.py", "old_string": "hi", "new_string": "hello"}),
        )
        .await;
        assert!(err && out.contains("Read it first"), "{out}");
        let (out, err) = call(
            &registry,
            &other,
            "Read",
            json!({"file_path": "src/app.py"}),
        )
        .await;
        assert!(!err && out.starts_with("     1\tprint('hi')\n"), "{out}");
        let (out, err) = call(
            &registry,
            &other,
            "Edit",
            json!({"file_path": "src/app.py", "old_string": "hi", "new_string": "hello"}),
        )
        .await;
        assert!(!err, "{out}");
        let (out, err) = call(
            &registry,
            &dev,
            "Grep",
            json!({"pattern": "HELLO", "-i": true, "output_mode": "content"}),
        )
        .await;
        assert_eq!((out.as_str(), err), ("src/app.py:1:print('hello')", false));
        let (out, _) = call(&registry, &dev, "Glob", json!({"pattern": "**/*.py"})).await;
        assert_eq!(out, "src/app.py");
        // The manager reads its report's workspace but cannot write there.
        let ceo = Host {
            agent: "ceo".into(),
            task: 3,
            org: org(&base),
        };
        let target = ws.join("src/app.py").display().to_string();
        let (out, err) = call(&registry, &ceo, "Read", json!({"file_path": target})).await;
        assert!(!err && out.contains("print('hello')"), "{out}");
        let (out, err) = call(
            &registry,
            &ceo,
            "Write",
            json!({"file_path": target, "content": "x"}),
        )
        .await;
        assert!(err && out.contains("may read but not change"), "{out}");
        // And the worker cannot reach its manager's.
        let (out, err) = call(
            &registry,
            &dev,
            "Glob",
            json!({"pattern": "*", "path": "../ceo"}),
        )
        .await;
        assert!(err && out.contains("outside"), "{out}");
    }

    #[tokio::test]
    async fn read_of_a_link_out_says_nothing_about_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let registry = ToolRegistry::standard(None, None, None, None);
        let dev = Host {
            agent: "dev".into(),
            task: 1,
            org: org(&base),
        };
        let (out, err) = call(
            &registry,
            &dev,
            "Write",
            json!({"file_path": "/workspace/a.txt", "content": "in\n"}),
        )
        .await;
        assert_eq!(
            (out.as_str(), err),
            ("Created `a.txt` (1 lines, 3 bytes)", false)
        );
        let ws = base.join(".opc/workspaces/dev");
        let outside = base.join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("exists"), "secret").unwrap();
        let mut answers = Vec::new();
        for (link, target) in [
            ("l1", outside.join("exists")),
            ("l2", outside.join("missing")),
            ("l3", std::path::PathBuf::from("/etc/shadow")),
            ("l4", std::path::PathBuf::from("/nonexistent/x")),
        ] {
            std::os::unix::fs::symlink(&target, ws.join(link)).unwrap();
            let (out, err) = call(&registry, &dev, "Read", json!({"file_path": link})).await;
            assert!(err, "{out}");
            for leak in [
                base.display().to_string(),
                "/etc".into(),
                "/nonexistent".into(),
            ] {
                assert!(!out.contains(&leak), "{leak} in {out}");
            }
            answers.push(out.replace(link, "LINK"));
        }
        assert!(answers.iter().all(|a| a == &answers[0]), "{answers:#?}");
        assert!(
            answers[0].contains("outside your workspace"),
            "{}",
            answers[0]
        );
        // `/workspace` paths read the workspace; messages name files relative to it.
        let (out, err) = call(
            &registry,
            &dev,
            "Read",
            json!({"file_path": "/workspace/a.txt"}),
        )
        .await;
        assert!(!err && out.contains("(end of `a.txt`"), "{out}");
        let (out, err) = call(
            &registry,
            &dev,
            "Write",
            json!({"file_path": "esc\u{1b}[2J\nx.txt", "content": ""}),
        )
        .await;
        assert_eq!(
            (out.as_str(), err),
            ("Created `$'esc\\e[2J\\nx.txt'` (0 lines, 0 bytes)", false)
        );
    }

    #[tokio::test]
    async fn invalid_arguments_are_tool_errors() {
        let dir = tempfile::tempdir().unwrap();
        let registry = ToolRegistry::standard(None, None, None, None);
        let dev = Host {
            agent: "dev".into(),
            task: 1,
            org: org(dir.path()),
        };
        for (tool, input, needle) in [
            ("Read", json!({}), "missing field `file_path`"),
            (
                "Read",
                json!({"file_path": "a", "limit": 0}),
                "`limit` must be at least 1",
            ),
            (
                "Write",
                json!({"file_path": "a"}),
                "missing field `content`",
            ),
            (
                "Edit",
                json!({"file_path": "a", "old_string": "x", "new_string": "x"}),
                "must differ",
            ),
            (
                "Grep",
                json!({"pattern": "x", "-Z": true}),
                "unknown field `-Z`",
            ),
            (
                "Grep",
                json!({"pattern": "x", "output_mode": "lines"}),
                "unknown variant `lines`",
            ),
            ("Grep", json!({"pattern": "x", "-C": 1000}), "at most 100"),
            ("Grep", json!({"pattern": "("}), "invalid regex"),
            ("Glob", json!({"pattern": ""}), "must not be empty"),
            ("Glob", json!("**/*"), "expected a JSON object"),
        ] {
            let (out, err) = call(&registry, &dev, tool, input).await;
            assert!(err && out.contains(needle), "{tool}: {out}");
        }
    }

    #[test]
    fn schemas_name_claude_codes_parameters() {
        let props = |t| {
            let mut keys: Vec<String> = spec(t).input_schema["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            keys.sort();
            keys
        };
        assert_eq!(props(Tool::Read), ["file_path", "limit", "offset"]);
        assert_eq!(props(Tool::Write), ["content", "file_path"]);
        assert_eq!(
            props(Tool::Edit),
            ["file_path", "new_string", "old_string", "replace_all"]
        );
        assert_eq!(
            props(Tool::Grep),
            [
                "-A",
                "-B",
                "-C",
                "-i",
                "-n",
                "glob",
                "head_limit",
                "output_mode",
                "path",
                "pattern"
            ]
        );
        assert_eq!(props(Tool::Glob), ["path", "pattern"]);
        // Everything the schema lists decodes.
        let a: GrepArgs = parse(
            "Grep",
            &json!({"pattern": "x", "path": "p", "glob": "*.rs", "output_mode": "count", "-i": true,
                    "-n": false, "-A": 1, "-B": 2, "-C": 3, "head_limit": 5}),
        )
        .unwrap();
        assert_eq!((a.after, a.before, a.context), (Some(1), Some(2), Some(3)));
    }
}
