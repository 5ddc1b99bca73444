//! The `opc` binary as a user runs it: exit codes, output formats, `init` safety, `$OPC_CONFIG`.
//!
//! Every command runs through one fixture: [`opc`] (or [`Opc`], for an environment or standard
//! input) returns a [`Ran`] with stdout and stderr as text, whose checks name the exit code expected
//! and show stderr when another came. `opc run` is started with opc-tests' `OpcRun`, which reads its
//! ready line, with `OpcRun::start_with_args` where a test passes `--listen`.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};

use opc_tests::opc_process::OpcRun;
use opc_tests::wait::{WAIT, output_within, wait_until};
use serde_json::Value;

/// One `opc` command line before it runs: in a directory, without `$OPC_CONFIG`, colour or model
/// downloads unless the test adds them, and with an empty standard input unless it gives one.
struct Opc {
    command: Command,
    shown: String,
    input: String,
}

impl Opc {
    fn new(args: &[&str], dir: &Path) -> Opc {
        let mut command = Command::new(env!("CARGO_BIN_EXE_opc"));
        command
            .args(args)
            .current_dir(dir)
            .env_remove("OPC_CONFIG")
            .env("NO_COLOR", "1")
            .env("OPC_MODELS_OFFLINE", "1");
        Opc {
            command,
            shown: format!("opc {}", args.join(" ")),
            input: String::new(),
        }
    }

    /// With `key` set to `value` in its environment.
    fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Opc {
        self.command.env(key, value);
        self
    }

    /// With `text` as its standard input.
    fn input(mut self, text: &str) -> Opc {
        self.input = text.to_string();
        self
    }

    /// Run it to its end, within the tests' deadline.
    fn run(mut self) -> Ran {
        let mut child = self
            .command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("opc runs");
        let mut pipe = child.stdin.take().expect("stdin");
        let input = self.input;
        // Written on its own thread: a pipe's buffer is small, and `opc` may be blocked writing its
        // output.
        std::thread::spawn(move || {
            let _ = pipe.write_all(input.as_bytes());
        });
        let out = output_within(child, WAIT, &format!("`{}` to finish", self.shown));
        Ran {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            shown: self.shown,
        }
    }
}

/// What one `opc` command did.
struct Ran {
    shown: String,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Ran {
    /// Asserts it exited with `code` (showing its stderr when not), and hands it on.
    #[track_caller]
    fn exits(self, code: i32) -> Ran {
        assert_eq!(self.code, Some(code), "`{}`: {}", self.shown, self.stderr);
        self
    }

    /// Asserts it succeeded.
    #[track_caller]
    fn ok(self) -> Ran {
        self.exits(0)
    }

    /// Asserts its stdout holds `words`.
    #[track_caller]
    fn prints(self, words: &str) -> Ran {
        assert!(self.stdout.contains(words), "{words:?} in {}", self.stdout);
        self
    }

    /// Asserts its stderr holds `words`.
    #[track_caller]
    fn complains(self, words: &str) -> Ran {
        assert!(self.stderr.contains(words), "{words:?} in {}", self.stderr);
        self
    }

    /// Its stdout, which must be JSON alone.
    #[track_caller]
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "`{}`: stdout is not JSON ({e}): {}",
                self.shown, self.stdout
            )
        })
    }
}

/// `opc ARGS` in `dir`, run to its end.
fn opc(args: &[&str], dir: &Path) -> Ran {
    Opc::new(args, dir).run()
}

/// A temporary directory, with the config `opc.config.yaml` holding `config` when one is given.
fn org_dir(config: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    if let Some(config) = config {
        std::fs::write(dir.path().join("opc.config.yaml"), config).expect("write config");
    }
    dir
}

/// `GET path` over a plain socket to `address`, naming `host`: the whole response, head and body.
fn get(address: &str, host: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream.set_read_timeout(Some(WAIT)).expect("read timeout");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    response
}

#[test]
fn init_writes_a_valid_org_and_refuses_to_overwrite() {
    let dir = org_dir(None);
    let target = dir.path().join("my-org");
    opc(&["init", target.to_str().expect("utf-8 path")], dir.path()).ok();
    assert!(target.join("opc.config.yaml").is_file());
    assert!(target.join("prompts/ceo.md").is_file());

    let out = opc(&["validate"], &target)
        .ok()
        .prints("valid — 9 agents, 4 levels");
    // The example turns privacy and memory on; this build runs all of it (privacy, core memory
    // blocks, recall, archival memory and consolidation), so nothing is listed as not active. (The
    // sandbox probe printed after the list names Bash too: only the list is checked.)
    let stderr = out
        .stderr
        .split("sandbox (what this kernel offers Bash)")
        .next()
        .unwrap_or_default();
    for active in [
        "not active in this build",
        "archival memory",
        "consolidation",
        "core memory blocks",
        "tools memory_read",
        "conversation recall",
        "embeddings",
        // The workers' file and shell tools run (issue 24).
        "tools Read",
        "Bash",
        "privacy gateway",
    ] {
        assert!(!stderr.contains(active), "{active:?} runs: {stderr}");
    }
    let json = opc(&["validate", "--format", "json"], &target).json();
    let paths: Vec<&str> = json["inactive"]
        .as_array()
        .expect("inactive list")
        .iter()
        .filter_map(|i| i["path"].as_str())
        .collect();
    assert!(
        paths.is_empty(),
        "everything the example turns on runs: {paths:?}"
    );

    // A user's edits survive a second init: nothing is written, and the command says why.
    std::fs::write(target.join("prompts/ceo.md"), "my own prompt").expect("edit");
    opc(&["init", "."], &target)
        .exits(1)
        .complains("refusing to overwrite");
    let kept = std::fs::read_to_string(target.join("prompts/ceo.md")).expect("still there");
    assert_eq!(kept, "my own prompt");
}

#[test]
fn validate_reports_every_error_with_positions_and_exits_1() {
    let dir = org_dir(Some(
        "framework:\n  defaultModel: m\n  providers: { p: { kind: anthropic } }\n  execution: { taskTimeout: soon }\nagents:\n  ceo: { role: CEO, chidren: [] }\n",
    ));
    opc(&["validate"], dir.path())
        .exits(1)
        .complains("opc.config.yaml:4:29")
        .complains("framework.execution.taskTimeout")
        .complains("did you mean `children`?")
        .complains("invalid — 2 errors, 1 warning");

    let report = opc(&["validate", "--format", "json"], dir.path())
        .exits(1)
        .json();
    assert_eq!(report["valid"], false);
    let errors = report["errors"].as_array().expect("errors array");
    assert_eq!(errors.len(), 2, "{report}");
    let at = |error: &Value| (error["line"].as_u64(), error["column"].as_u64());
    assert_eq!(errors[0]["path"], "framework.execution.taskTimeout");
    assert_eq!(at(&errors[0]), (Some(4), Some(29)));
    assert_eq!(errors[1]["path"], "agents.ceo.chidren");
    assert_eq!(at(&errors[1]), (Some(6), Some(21)));
    assert!(
        errors[1]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("children"))
    );
}

#[test]
fn unreadable_config_exits_2_and_config_env_is_honoured() {
    let dir = org_dir(None);
    opc(&["validate"], dir.path())
        .exits(2)
        .complains("opc init");

    let report = opc(
        &["validate", "--format", "json", "--config", "missing.yaml"],
        dir.path(),
    )
    .exits(2)
    .json();
    assert!(
        report["unreadable"]
            .as_str()
            .is_some_and(|m| m.contains("missing.yaml"))
    );

    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../opc.config.yaml");
    Opc::new(&["validate"], dir.path())
        .env("OPC_CONFIG", &example)
        .run()
        .ok();
}

/// A directory given as the config is said to be one, not reported as an OS error: the hint names
/// the config file inside it when there is one, and how to write one when there is not.
#[test]
fn a_directory_as_the_config_names_the_file_inside_it() {
    let dir = org_dir(None);
    let out = opc(&["validate", "--config", "."], dir.path())
        .exits(2)
        .complains("`.` is a directory, not a config file")
        .complains("there is no `./opc.config.yaml` either")
        .complains("`opc init .`");
    assert!(!out.stderr.contains("os error"), "{}", out.stderr);

    opc(&["init", "org"], dir.path()).ok();
    for args in [
        &["tasks", "--config", "org"][..],
        &["--config", "org", "memory", "show"],
        &["validate", "--config", "org"],
    ] {
        opc(args, dir.path())
            .exits(2)
            .complains("`org` is a directory, not a config file")
            .complains("pass --config org/opc.config.yaml");
    }
    let report = opc(
        &["validate", "--format", "json", "--config", "org"],
        dir.path(),
    )
    .exits(2)
    .json();
    assert_eq!(
        report["unreadable"], "`org` is a directory, not a config file",
        "{report}"
    );
}

#[test]
fn visualize_draws_the_tree_without_colour_when_piped() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let drawing = opc(&["visualize"], &root).ok().stdout;
    assert!(
        !drawing.contains('\u{1b}'),
        "no escape codes in piped output"
    );
    let lines: Vec<&str> = drawing.lines().collect();
    assert!(
        lines[1].starts_with("ceo  CEO  [anthropic/claude-opus-4-6]"),
        "{drawing}"
    );
    for drawn in [
        "├── vp-eng  VP Engineering  [anthropic/claude-sonnet-4-5, default]",
        "│   │   └── dev-backend",
        "shares with: vp-ops",
        "shared team_policies",
    ] {
        assert!(drawing.contains(drawn), "{drawn:?} in {drawing}");
    }
    assert!(
        lines
            .last()
            .is_some_and(|l| l.starts_with("        └── support-agent")),
        "{drawing}"
    );
}

/// The worker-tool keys as `opc validate` reports them: a workspace outside the root and a token
/// passed into the sandbox are errors (exit 1, at their lines); `mode: off` and a prefix the manager
/// does not allow are warnings; the model cache is out of reach of any workspace.
#[test]
fn validate_checks_workspaces_sandbox_and_allow_lists() {
    let dir = org_dir(None);
    let head = "framework:\n  defaultModel: m\n  providers: { p: { kind: anthropic, models: { m: { input: 1, output: 1 } } } }\n";
    let org = "agents:\n  ceo: { role: CEO, tools: [delegate], children: [dev], bash: { allow: [ls] } }\n  dev: { role: Dev, parent: ceo, tools: [Read, Bash], bash: { allow: [ls, rm] } }\n";
    let write = |framework: &str, agents: &str| {
        std::fs::write(
            dir.path().join("opc.config.yaml"),
            format!("{head}{framework}{agents}"),
        )
        .expect("write config");
    };

    write(
        "  sandbox: { mode: off, env: [GITHUB_TOKEN] }\n",
        &org.replace(
            "tools: [Read, Bash]",
            "tools: [Read, Bash], workspace: ../elsewhere",
        ),
    );
    let out = opc(&["validate"], dir.path()).exits(1);
    for expected in [
        "opc.config.yaml:4:31",
        "`GITHUB_TOKEN` looks like a secret (a token): the sandbox's environment never holds a provider key or a platform token",
        "`../elsewhere` climbs out of the workspace root",
        "`mode: off`",
        "`rm` is not allowed by `ceo`",
    ] {
        assert!(
            out.stderr.contains(expected),
            "{expected:?} in {}",
            out.stderr
        );
    }

    write("", org);
    let json = opc(&["validate", "--format", "json"], dir.path())
        .ok()
        .json();
    let warnings = json["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{json}");
    assert_eq!(warnings[0]["path"], "agents.dev.bash.allow[1]");

    // A root inside the model cache puts every workspace there.
    write("  workspace: { root: models/ws }\n", org);
    Opc::new(&["validate"], dir.path())
        .env("OPC_MODELS", dir.path().join("models"))
        .run()
        .exits(1)
        .complains("holds or lies in the model cache");
}

#[test]
fn help_explains_every_command() {
    let help = opc(&["--help"], Path::new(".")).stdout;
    for command in ["init", "validate", "visualize"] {
        assert!(help.contains(command), "{help}");
    }
    opc(&["validate", "--help"], Path::new(".")).prints("0 valid");
}

#[tokio::test]
async fn run_serves_the_org_and_stops_cleanly_on_sigterm() {
    let dir = org_dir(Some(
        "framework:\n  name: Tiny <Org>\n  defaultModel: m\n  providers: { p: { kind: anthropic, models: { m: { input: 1, output: 1 } } } }\n  sandbox: { mode: off }\n  memory: { graph: { enabled: true } }\nchannels:\n  web: { listen: \"127.0.0.1:0\" }\nagents:\n  ceo: { role: CEO, tools: [delegate], children: [dev] }\n  dev: { role: Dev, parent: ceo }\n",
    ));
    let run = OpcRun::start(&dir.path().join("opc.config.yaml"), &[]);
    assert!(run.address.starts_with("127.0.0.1:"), "{}", run.banner);

    // The listener's own name with its port, as a browser sends it (a bare `localhost` is not one of
    // its names on any port but 80).
    let fetch = |path: &str| get(&run.address, &run.address, path);
    let org = fetch("/api/org");
    assert!(org.starts_with("HTTP/1.1 200"), "{org}");
    let body = org.split("\r\n\r\n").nth(1).expect("body");
    let json: Value = serde_json::from_str(body).expect("json body");
    assert_eq!(json["root"], "ceo");
    assert_eq!(json["agents"][1]["parent"], "ceo");
    let page = fetch("/org");
    assert!(
        page.contains("Tiny &lt;Org&gt;"),
        "names are escaped: {page}"
    );
    assert!(fetch("/healthz").ends_with("ok"));

    // The start-up notes come before the ready line; the reader of its stderr may lag behind.
    let sandbox_off = "`mode: off`: Bash commands run without the kernel sandbox";
    wait_until(WAIT, "opc run's start-up notes", || {
        run.stderr().contains(sandbox_off)
    })
    .await;
    let stderr = run.stderr();
    // Graph memory (configured above) and consolidation both run: nothing is listed as not active.
    assert!(
        !stderr.contains("not active in this build") && !stderr.contains("graph memory"),
        "run lists nothing as not active: {stderr}"
    );
    assert!(
        stderr.contains("warning"),
        "run warns that the sandbox is off: {stderr}"
    );
    assert!(
        !stderr.contains("privacy gateway"),
        "privacy runs: {stderr}"
    );
    let (code, rest) = run.stop();
    assert_eq!(code, Some(0));
    assert!(rest.contains("opc: stopped"), "{rest}");
}

#[test]
fn run_refuses_an_invalid_config() {
    let dir = org_dir(Some("agents: {}\n"));
    opc(&["run"], dir.path()).exits(1).complains("not starting");
}

/// `opc memory show` and `opc memory history` read the blocks as stored: seeded from the config, then
/// edited (here through the memory API, as an agent's tool call would).
#[test]
fn memory_show_and_history_read_the_stored_blocks() {
    let dir = org_dir(None);
    opc(&["init", "."], dir.path()).ok();
    // No database yet: says how blocks come to be.
    opc(&["memory", "show"], dir.path())
        .ok()
        .prints("No memory blocks yet");

    let loaded = opc_hierarchy::load(&dir.path().join("opc.config.yaml")).expect("config");
    let db = loaded.base_dir.join(&loaded.config.framework.memory.path);
    std::fs::create_dir_all(db.parent().expect("parent")).expect("db dir");
    let store = opc_memory::blocks::BlockStore::open(
        &db,
        &loaded.config,
        std::sync::Arc::new(loaded.org.clone()),
    )
    .expect("blocks");
    store
        .edit(
            opc_memory::blocks::Actor {
                agent: "ceo",
                task: Some(42),
            },
            "persona",
            &opc_memory::blocks::Edit::Write("Patient and thorough.".into()),
            Some(1),
        )
        .expect("edit");
    drop(store);

    let shown = opc(&["memory", "show", "ceo"], dir.path())
        .ok()
        .prints("agent/ceo/persona  v2  21/2000 chars")
        .prints("  | Patient and thorough.")
        .prints("agent/ceo/org_context  v1")
        .stdout;
    // The CEO does not reference the shared block; a VP does.
    assert!(!shown.contains("team_policies"), "{shown}");
    opc(&["memory", "show", "vp-eng"], dir.path()).prints("shared/team_policies  v1");
    opc(&["memory", "show", "nobody"], dir.path())
        .exits(1)
        .complains("there is no agent `nobody`");

    let history = opc(
        &["memory", "history", "persona", "--agent", "ceo"],
        dir.path(),
    )
    .ok()
    .stdout;
    let lines: Vec<&str> = history.lines().collect();
    assert!(
        lines[0].starts_with("agent/ceo/persona v1  ") && lines[0].ends_with("seed by config"),
        "{history}"
    );
    assert!(
        lines[2].starts_with("agent/ceo/persona v2  ")
            && lines[2].ends_with("write by ceo (task 42)"),
        "{history}"
    );
    assert_eq!(
        lines[3],
        "  - Decisive, brief, delegates everything that is not a decision."
    );
    assert_eq!(lines[4], "  + Patient and thorough.");
}

/// `opc memory facts` on a temp database written by a facts store of the test's own (held open,
/// read-write, the whole time, as `opc run` would hold it): the current fact, what was believed
/// before a change (`--at`), what was true in the world (`--valid-at`), every version with its
/// conversation (`--history`), JSON exactly as documented, and clear errors for bad input.
#[test]
fn memory_facts_lists_current_believed_valid_and_history_beside_a_writer() {
    use opc_memory::facts::{FactStore, Op, Provenance, View};
    let dir = org_dir(None);
    opc(&["init", "."], dir.path()).ok();
    let ms = |t: &str| opc_memory::facts::time::parse_time(t).expect("time");

    // No database yet: an empty list, and nothing created.
    let out = opc(&["memory", "facts", "ceo", "--format", "json"], dir.path()).ok();
    assert_eq!(out.stdout, "{\"facts\":[]}\n");
    let loaded = opc_hierarchy::load(&dir.path().join("opc.config.yaml")).expect("config");
    let db = loaded.base_dir.join(&loaded.config.framework.memory.path);
    assert!(!db.exists(), "a read creates no database");

    std::fs::create_dir_all(db.parent().expect("parent")).expect("db dir");
    let store = FactStore::open(&db, opc_memory::embed::EmbedSlot::new()).expect("facts store");
    let provenance = |conversation: &str, task: i64| Provenance {
        agent: "ceo".into(),
        task: Some(task),
        conversation: Some(conversation.into()),
        ..Provenance::default()
    };
    let first = store
        .apply(
            "agent/ceo",
            &[Op::Add {
                text: "The launch is on May 3rd".into(),
                subject: Some("launch".into()),
                predicate: None,
                object: None,
                valid_from: Some(ms("2026-05-03")),
                valid_to: None,
            }],
            &provenance("web:first", 1),
            ms("2026-04-01T10:00:00Z"),
        )
        .expect("add");
    let old = first.added[0];
    store
        .apply(
            "agent/ceo",
            &[Op::Update {
                target: old,
                text: "The launch moved to May 17th".into(),
                subject: Some("launch".into()),
                predicate: None,
                object: None,
                valid_from: Some(ms("2026-05-17")),
                valid_to: None,
                reason: Some("moved".into()),
            }],
            &provenance("web:second", 2),
            ms("2026-04-02T10:00:00Z"),
        )
        .expect("update");
    assert_eq!(
        store.list("agent/ceo", View::History).expect("list").len(),
        2
    );

    let facts = |args: &[&str]| {
        opc(&[&["memory", "facts"][..], args].concat(), dir.path())
            .ok()
            .stdout
    };
    let current = facts(&["ceo"]);
    assert!(
        current.starts_with("1 fact version of `ceo` (current):")
            && current.contains("  | The launch moved to May 17th\n")
            && current.contains("  valid:        from 2026-05-17T00:00:00Z to open\n")
            && current.contains("  conversation: web:second\n")
            && !current.contains("May 3rd"),
        "{current}"
    );
    let before = facts(&["ceo", "--at", "2026-04-01T12:00:00Z"]);
    assert!(
        before.contains("The launch is on May 3rd") && !before.contains("May 17th"),
        "{before}"
    );
    assert!(
        facts(&["ceo", "--at", "2026-03-01"])
            .starts_with("No facts of `ceo` (believed at 2026-03-01T00:00:00Z).")
    );
    // In the world, the current belief holds from May 17th on.
    assert!(facts(&["ceo", "--valid-at", "2026-05-10"]).starts_with("No facts"));
    assert!(facts(&["ceo", "--valid-at", "2026-05-20T08:00:00+02:00"]).contains("May 17th"));

    let history: Value =
        serde_json::from_str(&facts(&["ceo", "--history", "--format", "json"])).expect("json");
    let versions = history["facts"].as_array().expect("facts");
    assert_eq!(versions.len(), 2, "{history}");
    let closed = versions
        .iter()
        .find(|v| v["id"] == old)
        .expect("the old version");
    let open = versions
        .iter()
        .find(|v| v["id"] != old)
        .expect("the new version");
    assert_eq!(closed["fact_id"], open["fact_id"], "one fact, two versions");
    assert_eq!(closed["text"], "The launch is on May 3rd");
    assert_eq!(closed["invalidated_at"], "2026-04-02T10:00:00Z");
    assert_eq!(closed["valid_to"], "2026-05-17T00:00:00Z");
    assert_eq!(closed["conversation"], "web:first");
    assert_eq!(open["conversation"], "web:second");
    assert_eq!(open["invalidated_at"], Value::Null);
    assert_eq!(open["reason"], "moved");
    assert_eq!(open["source"], "agent");
    assert_eq!(open["task"], 2);
    let mut keys: Vec<&str> = open
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys.join(" "),
        "agent conversation fact_id id invalidated_at reason recorded_at source subject task text \
         valid_from valid_to"
    );

    // Bad input: what was wrong, and exit 2 for usage; an unknown agent names the agents.
    for (args, says) in [
        (
            &["ceo", "--at", "2026-05-03", "--valid-at", "2026-05-03"][..],
            "cannot be used with",
        ),
        (
            &["ceo", "--history", "--at", "2026-05-03"],
            "cannot be used with",
        ),
        (&["ceo", "--at", "last week"], "is not a time"),
        (
            &["ceo", "--valid-at", "2026-05-03T10:00:00"],
            "is not a time",
        ),
    ] {
        opc(&[&["memory", "facts"][..], args].concat(), dir.path())
            .exits(2)
            .complains(says);
    }
    opc(&["memory", "facts", "nobody"], dir.path())
        .exits(1)
        .complains("there is no agent `nobody`")
        .complains("ceo, ");
    // An agent without archival memory still lists what is stored, and says it records nothing new.
    let out = opc(&["memory", "facts", "dev-backend"], dir.path())
        .ok()
        .complains("`dev-backend` has archival memory off");
    assert!(
        out.stdout
            .starts_with("No facts of `dev-backend` (current).")
    );
    drop(store);
}

/// `--config` is one global option: every subcommand that reads a config takes it before or after its
/// name (`opc --help`, and so docs/cli.md, write `opc memory show --config X`), and it is really the file read.
/// `init` reads no config: its help does not offer `--config`, and a `--config` given anyway (before
/// or after it) is refused with the way on, and writes nothing, rather than being silently ignored.
#[test]
fn init_neither_offers_nor_ignores_config() {
    let dir = org_dir(None);
    let help = opc(&["init", "--help"], dir.path()).ok();
    assert!(!help.stdout.contains("--config"), "{}", help.stdout);
    assert!(help.stdout.contains("DIR"), "{}", help.stdout);
    for args in [
        ["init", "--config", "x.yaml", "org"],
        ["--config", "x.yaml", "init", "org"],
    ] {
        opc(&args, dir.path())
            .exits(2)
            .complains("`opc init` writes a new org and reads no config")
            .complains("DIR/opc.config.yaml");
        assert!(!dir.path().join("org").exists(), "{args:?} wrote nothing");
    }
    // Other commands still list it.
    opc(&["validate", "--help"], dir.path())
        .ok()
        .prints("--config");
}

#[test]
fn config_is_accepted_before_and_after_every_subcommand() {
    let dir = org_dir(None);
    opc(&["init", "org"], dir.path()).ok();
    let config = dir.path().join("org/opc.config.yaml");
    let config = config.to_str().expect("utf-8 path");
    // The current directory has no config: each command below can only have read `config`.
    for args in [
        vec!["validate"],
        vec!["visualize"],
        vec!["tasks"],
        vec!["memory", "show"],
        vec!["memory", "history", "persona"],
        vec!["privacy", "detect"],
    ] {
        opc(&[&["--config", config][..], &args[..]].concat(), dir.path()).ok();
        opc(&[&args[..], &["--config", config][..]].concat(), dir.path()).ok();
    }
    // `-c` too, after the subcommand.
    opc(&["validate", "-c", config], dir.path()).ok();
    // Without it, the same commands find no config.
    opc(&["memory", "show"], dir.path()).exits(2);

    // The privacy commands read the named file: its whitelist keeps an address unmasked.
    std::fs::write(
        dir.path().join("org/privacy.yaml"),
        std::fs::read_to_string(dir.path().join("org/opc.config.yaml"))
            .expect("config")
            .replace("whitelist: [", "whitelist: [ops@example.com, "),
    )
    .expect("write");
    let line = "{\"text\":\"write to ops@example.com\"}\n";
    let detect = |args: &[&str]| Opc::new(args, dir.path()).input(line).run();
    detect(&["privacy", "detect"]).prints("EMAIL");
    let whitelisted = dir.path().join("org/privacy.yaml");
    let whitelisted = whitelisted.to_str().expect("utf-8");
    for args in [
        ["privacy", "detect", "--config", whitelisted],
        ["--config", whitelisted, "privacy", "detect"],
    ] {
        let out = detect(&args).ok();
        assert_eq!(out.stdout.trim(), "{\"entities\":[]}", "{args:?}");
    }
    // And an invalid file named after the subcommand is reported as such.
    std::fs::write(dir.path().join("bad.yaml"), "agents: {}\n").expect("write");
    opc(&["privacy", "detect", "--config", "bad.yaml"], dir.path()).exits(1);
}

#[test]
fn help_texts_name_every_subcommand_model_and_page() {
    let help = |args: &[&str]| opc(args, Path::new(".")).ok().stdout;
    let privacy = help(&["privacy", "--help"]);
    for word in ["detect", "mask", "eval"] {
        assert!(privacy.contains(word), "{word} in {privacy}");
    }
    let about = privacy.lines().next().unwrap_or_default();
    assert!(about.contains("mask"), "the summary names mask: {about}");
    let models = help(&["models", "--help"]);
    for word in ["rampart", "minilm", "NER", "all-MiniLM-L6-v2"] {
        assert!(models.contains(word), "{word} in {models}");
    }
    let top = help(&["--help"]);
    assert!(
        top.contains("both models") || top.contains("Local model files"),
        "{top}"
    );
    assert!(top.contains("slack"), "{top}");
    let run = help(&["run", "--help"]);
    for word in ["/admin", "--listen", "accessTokenEnv", "--config"] {
        assert!(run.contains(word), "{word} in {run}");
    }
    let slack = help(&["slack", "manifest", "--help"]);
    for word in ["--url", "api.slack.com/apps", "--config"] {
        assert!(slack.contains(word), "{word} in {slack}");
    }
}

/// "Next:" leads to a running org in a browser; a refusal suggests a directory that would work.
#[test]
fn init_says_what_to_do_next_and_suggests_a_free_directory() {
    let dir = org_dir(None);
    let next = opc(&["init", "my-org"], dir.path()).ok().stdout;
    let steps = [
        "cd my-org",
        "opc validate",
        "opc visualize",
        "export ANTHROPIC_API_KEY=",
        "console.anthropic.com",
        "opc run",
        "http://127.0.0.1:7420/",
        "http://127.0.0.1:7420/admin",
        "examples/offline/run.sh --serve",
    ];
    let mut at = 0;
    for step in steps {
        let found = next[at..]
            .find(step)
            .unwrap_or_else(|| panic!("{step:?} after byte {at} in {next}"));
        at += found;
    }

    let refusal = opc(&["init", "my-org"], dir.path())
        .exits(1)
        .complains("refusing to overwrite")
        .complains("`opc init my-org-2`")
        .stderr;
    assert!(!refusal.contains("`opc init my-org`"), "{refusal}");
    // The suggestion works.
    opc(&["init", "my-org-2"], dir.path()).ok();
    // Inside an org: a new subdirectory (`opc init .` there suggests `my-org`, not `.`).
    opc(&["init"], &dir.path().join("my-org"))
        .exits(1)
        .complains("`opc init ./my-org`");
}

/// A config for `opc run` whose own `listen` cannot be bound here (TEST-NET-1, not on this machine), so
/// only `--listen` can make it serve; it names an access token, as a non-loopback address requires.
const UNBINDABLE: &str = "framework:\n  name: Listen Org\n  defaultModel: m\n  providers: { p: { kind: anthropic, models: { m: { input: 1, output: 1 } } } }\nchannels:\n  web: { listen: \"192.0.2.1:7420\", accessTokenEnv: OPC_TEST_WEB_TOKEN }\nagents:\n  ceo: { role: CEO }\n";

#[test]
fn run_listen_overrides_the_config_and_keeps_its_rules() {
    let dir = org_dir(Some(UNBINDABLE));
    let run = OpcRun::start_with_args(
        &dir.path().join("opc.config.yaml"),
        &["--listen", "127.0.0.1:0"],
        &[("OPC_TEST_WEB_TOKEN", "s3cret-token")],
    );
    assert!(run.address.starts_with("127.0.0.1:"), "{}", run.banner);
    assert!(run.banner.contains("/admin"), "{}", run.banner);
    let response = get(&run.address, "localhost", "/healthz");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let (code, _) = run.stop();
    assert_eq!(code, Some(0), "opc run exits 0 on SIGTERM");

    // A reachable address without an access token is refused before anything starts, as in the config.
    std::fs::write(
        dir.path().join("open.yaml"),
        UNBINDABLE.replace(
            "{ listen: \"192.0.2.1:7420\", accessTokenEnv: OPC_TEST_WEB_TOKEN }",
            "{ listen: \"127.0.0.1:0\" }",
        ),
    )
    .expect("write config");
    opc(
        &["run", "--config", "open.yaml", "--listen", "0.0.0.0:0"],
        dir.path(),
    )
    .exits(2)
    .complains("--listen 0.0.0.0:0 is reachable from other machines")
    .complains("accessTokenEnv");
    // Not an address: clap says so.
    opc(&["run", "--listen", "localhost"], dir.path())
        .exits(2)
        .complains("--listen");
}

/// The manifest `opc slack manifest` prints: valid JSON, the org's name, the scopes of every Web API
/// method the adapter calls (its own list), its events and the `/opc` command; Socket Mode or request
/// URLs per the config; clear errors without a Slack section or a URL.
#[test]
fn slack_manifest_describes_the_app_the_adapter_needs() {
    use opc_adapters::slack::manifest::{BOT_EVENTS, Token, WEB_API_METHODS};

    let dir = org_dir(None);
    let base = "framework:\n  name: Acme Robotics\n  defaultModel: m\n  providers: { p: { kind: anthropic, models: { m: { input: 1, output: 1 } } } }\nagents:\n  ceo: { role: CEO }\n";
    let http =
        "slack: { mode: http, botTokenEnv: SLACK_BOT_TOKEN, signingSecretEnv: MY_SIGNING_SECRET }";
    for (file, channels) in [
        ("none.yaml", String::new()),
        (
            "socket.yaml",
            "channels:\n  slack: { mode: socket, botTokenEnv: SLACK_BOT_TOKEN, appTokenEnv: MY_APP_TOKEN }\n".into(),
        ),
        ("http.yaml", format!("channels:\n  {http}\n")),
        (
            "public.yaml",
            format!("channels:\n  {http}\n  web: {{ publicUrl: \"https://opc.acme.example\", accessTokenEnv: OPC_WEB_TOKEN }}\n"),
        ),
    ] {
        std::fs::write(dir.path().join(file), format!("{base}{channels}")).expect("write");
    }
    let manifest = |args: &[&str]| opc(&[&["slack", "manifest"][..], args].concat(), dir.path());
    let events_url =
        |manifest: &Value| manifest["settings"]["event_subscriptions"]["request_url"].clone();

    let out = manifest(&["--config", "socket.yaml"]).ok();
    let socket = out.json();
    assert_eq!(socket["display_information"]["name"], "Acme Robotics");
    assert_eq!(
        socket["features"]["bot_user"]["display_name"],
        "Acme Robotics"
    );
    assert_eq!(socket["settings"]["socket_mode_enabled"], true);
    assert_eq!(socket["settings"]["interactivity"]["is_enabled"], true);
    let scopes: Vec<&str> = socket["oauth_config"]["scopes"]["bot"]
        .as_array()
        .expect("bot scopes")
        .iter()
        .filter_map(|s| s.as_str())
        .collect();
    for method in WEB_API_METHODS.iter().filter(|m| m.token == Token::Bot) {
        if let Some(scope) = method.scope {
            assert!(scopes.contains(&scope), "{} needs {scope}", method.name);
        }
    }
    assert!(scopes.contains(&"commands"), "{scopes:?}");
    let events: Vec<&str> = socket["settings"]["event_subscriptions"]["bot_events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e.as_str())
        .collect();
    let handled: Vec<&str> = BOT_EVENTS.iter().map(|(e, _)| *e).collect();
    assert_eq!(events, handled);
    let command = &socket["features"]["slash_commands"][0];
    assert_eq!(command["command"], "/opc");
    for (name, _) in opc_adapters::Command::ALL {
        assert!(
            command["usage_hint"]
                .as_str()
                .is_some_and(|h| h.contains(name)),
            "/opc {name} in {command}"
        );
    }
    assert!(!out.stdout.contains("request_url"));
    for step in [
        "api.slack.com/apps",
        "connections:write",
        "MY_APP_TOKEN",
        "SLACK_BOT_TOKEN",
    ] {
        assert!(out.stderr.contains(step), "{step} in {}", out.stderr);
    }

    // HTTP mode: the request URLs under --url (also after `--config`, before the subcommand).
    let out = opc(
        &[
            "--config",
            "http.yaml",
            "slack",
            "manifest",
            "--url",
            "https://opc.example.com/",
        ],
        dir.path(),
    )
    .ok()
    .complains("MY_SIGNING_SECRET");
    let http = out.json();
    assert_eq!(http["settings"]["socket_mode_enabled"], false);
    assert_eq!(events_url(&http), "https://opc.example.com/slack/events");
    assert_eq!(
        http["settings"]["interactivity"]["request_url"],
        "https://opc.example.com/slack/interactions"
    );
    assert_eq!(
        http["features"]["slash_commands"][0]["url"],
        "https://opc.example.com/slack/commands"
    );

    manifest(&["--config", "http.yaml"])
        .exits(2)
        .complains("publicUrl: https://")
        .complains("--url");

    // Without --url, the listener's public address is where Slack posts; --url still wins.
    for (args, url) in [
        (
            &["--config", "public.yaml"][..],
            "https://opc.acme.example/slack/events",
        ),
        (
            &["--config", "public.yaml", "--url", "https://other.example"],
            "https://other.example/slack/events",
        ),
    ] {
        assert_eq!(events_url(&manifest(args).ok().json()), url, "{args:?}");
    }
    manifest(&["--config", "http.yaml", "--url", "http://plain.example.com"])
        .exits(2)
        .complains("https://");

    let out = manifest(&["--config", "none.yaml"])
        .exits(1)
        .complains("no `channels.slack` section")
        .complains("slack: { mode: socket, botTokenEnv: SLACK_BOT_TOKEN");
    assert!(out.stdout.is_empty());
}
