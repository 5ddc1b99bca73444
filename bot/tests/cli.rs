//! The `opc` binary as a user runs it: exit codes, output formats, `init` safety, `$OPC_CONFIG`.

use opc_tests::wait::{OutputWithin, WAIT, blocking_within, child_within, output_within};
use std::path::Path;
use std::process::{Command, Output};

fn opc(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opc"))
        .args(args)
        .current_dir(dir)
        .env_remove("OPC_CONFIG")
        .env("NO_COLOR", "1")
        .output_within(WAIT)
        .expect("opc runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn init_writes_a_valid_org_and_refuses_to_overwrite() {
    let dir = tempfile::tempdir().expect("temp dir");
    let target = dir.path().join("my-org");
    let out = opc(&["init", target.to_str().expect("utf-8 path")], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(target.join("opc.config.yaml").is_file());
    assert!(target.join("prompts/ceo.md").is_file());

    let out = opc(&["validate"], &target);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("valid — 9 agents, 4 levels"),
        "{}",
        text(&out.stdout)
    );
    // The example turns privacy and memory on; this build runs all of it (privacy, core memory
    // blocks, recall, archival memory and consolidation), so nothing is listed as not active. (The
    // sandbox probe printed after the list names Bash too: only the list is checked.)
    let stderr = text(&out.stderr);
    let stderr = stderr
        .split("sandbox (what this kernel offers Bash)")
        .next()
        .unwrap_or_default()
        .to_string();
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
    ] {
        assert!(!stderr.contains(active), "{active:?} runs: {stderr}");
    }
    assert!(
        !stderr.contains("privacy gateway"),
        "privacy runs: {stderr}"
    );
    let out = opc(&["validate", "--format", "json"], &target);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
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
    let out = opc(&["init", "."], &target);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("refusing to overwrite"),
        "{}",
        text(&out.stderr)
    );
    let kept = std::fs::read_to_string(target.join("prompts/ceo.md")).expect("still there");
    assert_eq!(kept, "my own prompt");
}

#[test]
fn validate_reports_every_error_with_positions_and_exits_1() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("opc.config.yaml"),
        "framework:\n  defaultModel: m\n  providers: { p: { kind: anthropic } }\n  execution: { taskTimeout: soon }\nagents:\n  ceo: { role: CEO, chidren: [] }\n",
    )
    .expect("write config");

    let out = opc(&["validate"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("opc.config.yaml:4:29"), "{stderr}");
    assert!(
        stderr.contains("framework.execution.taskTimeout"),
        "{stderr}"
    );
    assert!(stderr.contains("did you mean `children`?"), "{stderr}");
    assert!(stderr.contains("invalid — 2 errors, 1 warning"), "{stderr}");

    let out = opc(&["validate", "--format", "json"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json output");
    assert_eq!(report["valid"], false);
    let errors = report["errors"].as_array().expect("errors array");
    assert_eq!(errors.len(), 2, "{report}");
    assert_eq!(errors[0]["path"], "framework.execution.taskTimeout");
    assert_eq!(
        (errors[0]["line"].as_u64(), errors[0]["column"].as_u64()),
        (Some(4), Some(29))
    );
    assert_eq!(errors[1]["path"], "agents.ceo.chidren");
    assert_eq!(
        (errors[1]["line"].as_u64(), errors[1]["column"].as_u64()),
        (Some(6), Some(21))
    );
    assert!(
        errors[1]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("children"))
    );
}

#[test]
fn unreadable_config_exits_2_and_config_env_is_honoured() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = opc(&["validate"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("opc init"),
        "{}",
        text(&out.stderr)
    );

    let out = opc(
        &["validate", "--format", "json", "--config", "missing.yaml"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json output");
    assert!(
        report["unreadable"]
            .as_str()
            .is_some_and(|m| m.contains("missing.yaml"))
    );

    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../opc.config.yaml");
    let out = Command::new(env!("CARGO_BIN_EXE_opc"))
        .arg("validate")
        .current_dir(dir.path())
        .env("OPC_CONFIG", &example)
        .output_within(WAIT)
        .expect("opc runs");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn visualize_draws_the_tree_without_colour_when_piped() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = opc(&["visualize"], &root);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let drawing = text(&out.stdout);
    assert!(
        !drawing.contains('\u{1b}'),
        "no escape codes in piped output"
    );
    let lines: Vec<&str> = drawing.lines().collect();
    assert!(
        lines[1].starts_with("ceo  CEO  [anthropic/claude-opus-4-6]"),
        "{drawing}"
    );
    assert!(
        drawing.contains("├── vp-eng  VP Engineering  [anthropic/claude-sonnet-4-5, default]"),
        "{drawing}"
    );
    assert!(drawing.contains("│   │   └── dev-backend"), "{drawing}");
    assert!(drawing.contains("shares with: vp-ops"), "{drawing}");
    assert!(drawing.contains("shared team_policies"), "{drawing}");
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
    let dir = tempfile::tempdir().expect("temp dir");
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
    let out = opc(&["validate"], dir.path());
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for expected in [
        "opc.config.yaml:4:31",
        "`GITHUB_TOKEN` looks like a secret (a token): the sandbox's environment never holds a provider key or a platform token",
        "`../elsewhere` climbs out of the workspace root",
        "`mode: off`",
        "`rm` is not allowed by `ceo`",
    ] {
        assert!(stderr.contains(expected), "{expected:?} in {stderr}");
    }

    write("", org);
    let out = opc(&["validate", "--format", "json"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let warnings = json["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{json}");
    assert_eq!(warnings[0]["path"], "agents.dev.bash.allow[1]");

    // A root inside the model cache puts every workspace there.
    let models = dir.path().join("models");
    write("  workspace: { root: models/ws }\n", org);
    let out = Command::new(env!("CARGO_BIN_EXE_opc"))
        .arg("validate")
        .current_dir(dir.path())
        .env_remove("OPC_CONFIG")
        .env("OPC_MODELS", &models)
        .env("NO_COLOR", "1")
        .output_within(WAIT)
        .expect("opc runs");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("holds or lies in the model cache"),
        "{stderr}"
    );
}

#[test]
fn help_explains_every_command() {
    let out = opc(&["--help"], Path::new("."));
    let help = text(&out.stdout);
    for command in ["init", "validate", "visualize"] {
        assert!(help.contains(command), "{help}");
    }
    let out = opc(&["validate", "--help"], Path::new("."));
    assert!(
        text(&out.stdout).contains("0 valid"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn run_serves_the_org_and_stops_cleanly_on_sigterm() {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpStream;
    use std::process::Stdio;

    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("opc.config.yaml"),
        "framework:\n  name: Tiny <Org>\n  defaultModel: m\n  providers: { p: { kind: anthropic, models: { m: { input: 1, output: 1 } } } }\n  sandbox: { mode: off }\n  memory: { graph: { enabled: true } }\nchannels:\n  web: { listen: \"127.0.0.1:0\" }\nagents:\n  ceo: { role: CEO, tools: [delegate], children: [dev] }\n  dev: { role: Dev, parent: ceo }\n",
    )
    .expect("write config");
    let mut child = Command::new(env!("CARGO_BIN_EXE_opc"))
        .arg("run")
        .current_dir(dir.path())
        .env_remove("OPC_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("opc run starts");
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let (mut stdout, banner) = blocking_within(WAIT, "opc run's ready line", move || {
        let mut stdout = stdout;
        let mut banner = String::new();
        stdout.read_line(&mut banner).expect("banner line");
        (stdout, banner)
    })
    .unwrap_or_else(|| {
        let _ = child.kill();
        panic!("no ready line within {WAIT:?}")
    });
    let address = banner
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {banner:?}"))
        .to_string();
    assert!(address.starts_with("127.0.0.1:"), "{banner}");

    let get = |path: &str| {
        let mut stream = TcpStream::connect(&address).expect("connect");
        stream.set_read_timeout(Some(WAIT)).expect("read timeout");
        write!(
            stream,
            // The listener's own name with its port, as a browser sends it (a bare `localhost`
            // is not one of its names on any port but 80).
            "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
        )
        .expect("send");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("read");
        response
    };
    let org = get("/api/org");
    assert!(org.starts_with("HTTP/1.1 200"), "{org}");
    let body = org.split("\r\n\r\n").nth(1).expect("body");
    let json: serde_json::Value = serde_json::from_str(body).expect("json body");
    assert_eq!(json["root"], "ceo");
    assert_eq!(json["agents"][1]["parent"], "ceo");
    let page = get("/org");
    assert!(
        page.contains("Tiny &lt;Org&gt;"),
        "names are escaped: {page}"
    );
    assert!(get("/healthz").ends_with("ok"));

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let status = child_within(&mut child, WAIT, "opc run to exit on SIGTERM");
    assert_eq!(status.code(), Some(0));
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("stderr");
    assert!(
        stderr.contains("graph memory") && !stderr.contains("consolidation"),
        "run names what is not active, and consolidation runs: {stderr}"
    );
    assert!(
        stderr.contains("warning")
            && stderr.contains("`mode: off`: Bash commands run without the kernel sandbox"),
        "run warns that the sandbox is off: {stderr}"
    );
    assert!(
        !stderr.contains("privacy gateway"),
        "privacy runs: {stderr}"
    );
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("rest of stdout");
    assert!(rest.contains("opc: stopped"), "{rest}");
}

#[test]
fn run_refuses_an_invalid_config() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("opc.config.yaml"), "agents: {}\n").expect("write config");
    let out = opc(&["run"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("not starting"),
        "{}",
        text(&out.stderr)
    );
}

/// `opc memory show` and `opc memory history` read the blocks as stored: seeded from the config, then
/// edited (here through the memory API, as an agent's tool call would).
#[test]
fn memory_show_and_history_read_the_stored_blocks() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = opc(&["init", "."], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    // No database yet: says how blocks come to be.
    let out = opc(&["memory", "show"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("No memory blocks yet"),
        "{}",
        text(&out.stdout)
    );

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

    let out = opc(&["memory", "show", "ceo"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(
        shown.contains("agent/ceo/persona  v2  21/2000 chars"),
        "{shown}"
    );
    assert!(shown.contains("  | Patient and thorough."), "{shown}");
    assert!(shown.contains("agent/ceo/org_context  v1"), "{shown}");
    // The CEO does not reference the shared block; a VP does.
    assert!(!shown.contains("team_policies"), "{shown}");
    let out = opc(&["memory", "show", "vp-eng"], dir.path());
    assert!(
        text(&out.stdout).contains("shared/team_policies  v1"),
        "{}",
        text(&out.stdout)
    );
    let out = opc(&["memory", "show", "nobody"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("there is no agent `nobody`"),
        "{}",
        text(&out.stderr)
    );

    let out = opc(
        &["memory", "history", "persona", "--agent", "ceo"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let history = text(&out.stdout);
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
    let dir = tempfile::tempdir().expect("temp dir");
    let out = opc(&["init", "."], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ms = |t: &str| opc_memory::facts::time::parse_time(t).expect("time");

    // No database yet: an empty list, and nothing created.
    let out = opc(&["memory", "facts", "ceo", "--format", "json"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "{\"facts\":[]}\n");
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
        let mut all = vec!["memory", "facts"];
        all.extend_from_slice(args);
        let out = opc(&all, dir.path());
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
        text(&out.stdout)
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

    let history: serde_json::Value =
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
    assert_eq!(open["invalidated_at"], serde_json::Value::Null);
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
        keys,
        [
            "agent",
            "conversation",
            "fact_id",
            "id",
            "invalidated_at",
            "reason",
            "recorded_at",
            "source",
            "subject",
            "task",
            "text",
            "valid_from",
            "valid_to"
        ]
    );

    // Bad input: what was wrong, and exit 2 for usage; an unknown agent names the agents.
    for (args, says) in [
        (
            &[
                "memory",
                "facts",
                "ceo",
                "--at",
                "2026-05-03",
                "--valid-at",
                "2026-05-03",
            ][..],
            "cannot be used with",
        ),
        (
            &["memory", "facts", "ceo", "--history", "--at", "2026-05-03"],
            "cannot be used with",
        ),
        (
            &["memory", "facts", "ceo", "--at", "last week"],
            "is not a time",
        ),
        (
            &[
                "memory",
                "facts",
                "ceo",
                "--valid-at",
                "2026-05-03T10:00:00",
            ],
            "is not a time",
        ),
    ] {
        let out = opc(args, dir.path());
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text(&out.stderr).contains(says),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    let out = opc(&["memory", "facts", "nobody"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("there is no agent `nobody`") && stderr.contains("ceo, "),
        "{stderr}"
    );
    // An agent without archival memory still lists what is stored, and says it records nothing new.
    let out = opc(&["memory", "facts", "dev-backend"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("No facts of `dev-backend` (current)."));
    assert!(
        text(&out.stderr).contains("`dev-backend` has archival memory off"),
        "{}",
        text(&out.stderr)
    );
    drop(store);
}

/// `opc` with `stdin` as its standard input.
fn opc_with_input(args: &[&str], dir: &Path, stdin: &str) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_opc"))
        .args(args)
        .current_dir(dir)
        .env_remove("OPC_CONFIG")
        .env("NO_COLOR", "1")
        .env("OPC_MODELS_OFFLINE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("opc runs");
    let mut pipe = child.stdin.take().expect("stdin");
    let stdin = stdin.to_string();
    // Written on its own thread: a pipe's buffer is small, and `opc` may be blocked writing its output.
    std::thread::spawn(move || {
        let _ = pipe.write_all(stdin.as_bytes());
    });
    output_within(child, WAIT, &format!("`opc {}` to finish", args.join(" ")))
}

/// `--config` is one global option: every subcommand that reads a config takes it before or after its
/// name (`opc --help`, and so docs/cli.md, write `opc memory show --config X`), and it is really the file read.
#[test]
fn config_is_accepted_before_and_after_every_subcommand() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = opc(&["init", "org"], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
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
        for before in [false, true] {
            let mut full: Vec<&str> = Vec::new();
            if before {
                full.extend(["--config", config]);
            }
            full.extend(args.iter().copied());
            if !before {
                full.extend(["--config", config]);
            }
            let out = opc_with_input(&full, dir.path(), "");
            assert_eq!(
                out.status.code(),
                Some(0),
                "opc {}: {}",
                full.join(" "),
                text(&out.stderr)
            );
        }
    }
    // `-c` too, after the subcommand.
    let out = opc(&["validate", "-c", config], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // Without it, the same commands find no config.
    let out = opc(&["memory", "show"], dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));

    // The privacy commands read the named file: its whitelist keeps an address unmasked.
    std::fs::write(
        dir.path().join("org/privacy.yaml"),
        std::fs::read_to_string(dir.path().join("org/opc.config.yaml"))
            .expect("config")
            .replace("whitelist: [", "whitelist: [ops@example.com, "),
    )
    .expect("write");
    let line = "{\"text\":\"write to ops@example.com\"}\n";
    let defaults = opc_with_input(&["privacy", "detect"], dir.path(), line);
    assert!(
        text(&defaults.stdout).contains("EMAIL"),
        "{}",
        text(&defaults.stdout)
    );
    let whitelisted = dir.path().join("org/privacy.yaml");
    let whitelisted = whitelisted.to_str().expect("utf-8");
    for args in [
        ["privacy", "detect", "--config", whitelisted],
        ["--config", whitelisted, "privacy", "detect"],
    ] {
        let out = opc_with_input(&args, dir.path(), line);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert_eq!(text(&out.stdout).trim(), "{\"entities\":[]}", "{args:?}");
    }
    // And an invalid file named after the subcommand is reported as such.
    std::fs::write(dir.path().join("bad.yaml"), "agents: {}\n").expect("write");
    let out = opc_with_input(
        &["privacy", "detect", "--config", "bad.yaml"],
        dir.path(),
        "",
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
}

#[test]
fn help_texts_name_every_subcommand_model_and_page() {
    let help = |args: &[&str]| {
        let out = opc(args, Path::new("."));
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
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
    let dir = tempfile::tempdir().expect("temp dir");
    let out = opc(&["init", "my-org"], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let next = text(&out.stdout);
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

    let out = opc(&["init", "my-org"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let refusal = text(&out.stderr);
    assert!(refusal.contains("refusing to overwrite"), "{refusal}");
    assert!(refusal.contains("`opc init my-org-2`"), "{refusal}");
    assert!(!refusal.contains("`opc init my-org`"), "{refusal}");
    // The suggestion works.
    let out = opc(&["init", "my-org-2"], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Inside an org: a new subdirectory (`opc init .` there suggests `my-org`, not `.`).
    let out = opc(&["init"], &dir.path().join("my-org"));
    assert_eq!(out.status.code(), Some(1));
    let refusal = text(&out.stderr);
    assert!(refusal.contains("`opc init ./my-org`"), "{refusal}");
}

/// A config for `opc run` whose own `listen` cannot be bound here (TEST-NET-1, not on this machine), so
/// only `--listen` can make it serve; it names an access token, as a non-loopback address requires.
const UNBINDABLE: &str = "framework:\n  name: Listen Org\n  defaultModel: m\n  providers: { p: { kind: anthropic, models: { m: { input: 1, output: 1 } } } }\nchannels:\n  web: { listen: \"192.0.2.1:7420\", accessTokenEnv: OPC_TEST_WEB_TOKEN }\nagents:\n  ceo: { role: CEO }\n";

#[test]
fn run_listen_overrides_the_config_and_keeps_its_rules() {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpStream;
    use std::process::Stdio;

    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("opc.config.yaml"), UNBINDABLE).expect("write config");
    let mut child = Command::new(env!("CARGO_BIN_EXE_opc"))
        .args(["run", "--listen", "127.0.0.1:0"])
        .current_dir(dir.path())
        .env_remove("OPC_CONFIG")
        .env("OPC_TEST_WEB_TOKEN", "s3cret-token")
        .env("OPC_MODELS_OFFLINE", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("opc run starts");
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let (_stdout, banner) = blocking_within(WAIT, "opc run's ready line", move || {
        let mut stdout = stdout;
        let mut banner = String::new();
        stdout.read_line(&mut banner).expect("banner line");
        (stdout, banner)
    })
    .unwrap_or_else(|| {
        let _ = child.kill();
        panic!("no ready line within {WAIT:?}")
    });
    let address = banner
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {banner:?}"))
        .to_string();
    assert!(address.starts_with("127.0.0.1:"), "{banner}");
    assert!(banner.contains("/admin"), "{banner}");
    let mut stream = TcpStream::connect(&address).expect("connect");
    stream.set_read_timeout(Some(WAIT)).expect("read timeout");
    write!(
        stream,
        "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    assert_eq!(
        child_within(&mut child, WAIT, "opc run to exit on SIGTERM").code(),
        Some(0)
    );

    // A reachable address without an access token is refused before anything starts, as in the config.
    std::fs::write(
        dir.path().join("open.yaml"),
        UNBINDABLE.replace(
            "{ listen: \"192.0.2.1:7420\", accessTokenEnv: OPC_TEST_WEB_TOKEN }",
            "{ listen: \"127.0.0.1:0\" }",
        ),
    )
    .expect("write config");
    let out = opc(
        &["run", "--config", "open.yaml", "--listen", "0.0.0.0:0"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("--listen 0.0.0.0:0 is reachable from other machines")
            && stderr.contains("accessTokenEnv"),
        "{stderr}"
    );
    // Not an address: clap says so.
    let out = opc(&["run", "--listen", "localhost"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--listen"),
        "{}",
        text(&out.stderr)
    );
}

/// The manifest `opc slack manifest` prints: valid JSON, the org's name, the scopes of every Web API
/// method the adapter calls (its own list), its events and the `/opc` command; Socket Mode or request
/// URLs per the config; clear errors without a Slack section or a URL.
#[test]
fn slack_manifest_describes_the_app_the_adapter_needs() {
    use opc_adapters::slack::manifest::{BOT_EVENTS, Token, WEB_API_METHODS};

    let dir = tempfile::tempdir().expect("temp dir");
    let base = "framework:\n  name: Acme Robotics\n  defaultModel: m\n  providers: { p: { kind: anthropic, models: { m: { input: 1, output: 1 } } } }\nagents:\n  ceo: { role: CEO }\n";
    std::fs::write(dir.path().join("none.yaml"), base).expect("write");
    std::fs::write(
        dir.path().join("socket.yaml"),
        format!("{base}channels:\n  slack: {{ mode: socket, botTokenEnv: SLACK_BOT_TOKEN, appTokenEnv: MY_APP_TOKEN }}\n"),
    )
    .expect("write");
    std::fs::write(
        dir.path().join("http.yaml"),
        format!("{base}channels:\n  slack: {{ mode: http, botTokenEnv: SLACK_BOT_TOKEN, signingSecretEnv: MY_SIGNING_SECRET }}\n"),
    )
    .expect("write");
    std::fs::write(
        dir.path().join("public.yaml"),
        format!("{base}channels:\n  slack: {{ mode: http, botTokenEnv: SLACK_BOT_TOKEN, signingSecretEnv: MY_SIGNING_SECRET }}\n  web: {{ publicUrl: \"https://opc.acme.example\", accessTokenEnv: OPC_WEB_TOKEN }}\n"),
    )
    .expect("write");

    let out = opc(
        &["slack", "manifest", "--config", "socket.yaml"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let manifest: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is the manifest alone, as JSON");
    assert_eq!(manifest["display_information"]["name"], "Acme Robotics");
    assert_eq!(
        manifest["features"]["bot_user"]["display_name"],
        "Acme Robotics"
    );
    assert_eq!(manifest["settings"]["socket_mode_enabled"], true);
    assert_eq!(manifest["settings"]["interactivity"]["is_enabled"], true);
    let scopes: Vec<&str> = manifest["oauth_config"]["scopes"]["bot"]
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
    let events: Vec<&str> = manifest["settings"]["event_subscriptions"]["bot_events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e.as_str())
        .collect();
    let handled: Vec<&str> = BOT_EVENTS.iter().map(|(e, _)| *e).collect();
    assert_eq!(events, handled);
    let command = &manifest["features"]["slash_commands"][0];
    assert_eq!(command["command"], "/opc");
    for (name, _) in opc_adapters::Command::ALL {
        assert!(
            command["usage_hint"]
                .as_str()
                .is_some_and(|h| h.contains(name)),
            "/opc {name} in {command}"
        );
    }
    assert!(!String::from_utf8_lossy(&out.stdout).contains("request_url"));
    let steps = text(&out.stderr);
    for step in [
        "api.slack.com/apps",
        "connections:write",
        "MY_APP_TOKEN",
        "SLACK_BOT_TOKEN",
    ] {
        assert!(steps.contains(step), "{step} in {steps}");
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
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let manifest: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(manifest["settings"]["socket_mode_enabled"], false);
    assert_eq!(
        manifest["settings"]["event_subscriptions"]["request_url"],
        "https://opc.example.com/slack/events"
    );
    assert_eq!(
        manifest["settings"]["interactivity"]["request_url"],
        "https://opc.example.com/slack/interactions"
    );
    assert_eq!(
        manifest["features"]["slash_commands"][0]["url"],
        "https://opc.example.com/slack/commands"
    );
    assert!(text(&out.stderr).contains("MY_SIGNING_SECRET"));

    let out = opc(&["slack", "manifest", "--config", "http.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("publicUrl: https://") && stderr.contains("--url"),
        "{stderr}"
    );

    // Without --url, the listener's public address is where Slack posts; --url still wins.
    let out = opc(
        &["slack", "manifest", "--config", "public.yaml"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let manifest: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        manifest["settings"]["event_subscriptions"]["request_url"],
        "https://opc.acme.example/slack/events"
    );
    let out = opc(
        &[
            "slack",
            "manifest",
            "--config",
            "public.yaml",
            "--url",
            "https://other.example",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let manifest: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        manifest["settings"]["event_subscriptions"]["request_url"],
        "https://other.example/slack/events"
    );
    let out = opc(
        &[
            "slack",
            "manifest",
            "--config",
            "http.yaml",
            "--url",
            "http://plain.example.com",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("https://"),
        "{}",
        text(&out.stderr)
    );

    let out = opc(&["slack", "manifest", "--config", "none.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("no `channels.slack` section")
            && stderr.contains("slack: { mode: socket, botTokenEnv: SLACK_BOT_TOKEN"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}
