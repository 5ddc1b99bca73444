//! The `opc` binary as a user runs it: exit codes, output formats, `init` safety, `$OPC_CONFIG`.

use std::path::Path;
use std::process::{Command, Output};

fn opc(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opc"))
        .args(args)
        .current_dir(dir)
        .env_remove("OPC_CONFIG")
        .env("NO_COLOR", "1")
        .output()
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
    // The example turns privacy and memory on; this build runs privacy, core memory blocks and
    // recall, not archival memory yet, and says so.
    let stderr = text(&out.stderr);
    for inactive in ["not active in this build", "archival memory"] {
        assert!(stderr.contains(inactive), "{inactive:?} in {stderr}");
    }
    for active in [
        "core memory blocks",
        "tools memory_read",
        "conversation recall",
        "embeddings",
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
    assert!(!paths.contains(&"framework.privacy.enabled"), "{paths:?}");
    assert!(!paths.is_empty(), "memory is still listed");

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
        .output()
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
        "framework:\n  name: Tiny <Org>\n  defaultModel: m\n  providers: { p: { kind: anthropic, models: { m: { input: 1, output: 1 } } } }\nchannels:\n  web: { listen: \"127.0.0.1:0\" }\nagents:\n  ceo: { role: CEO, tools: [delegate], children: [dev] }\n  dev: { role: Dev, parent: ceo }\n",
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
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut banner = String::new();
    stdout.read_line(&mut banner).expect("banner line");
    let address = banner
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {banner:?}"))
        .to_string();
    assert!(address.starts_with("127.0.0.1:"), "{banner}");

    let get = |path: &str| {
        let mut stream = TcpStream::connect(&address).expect("connect");
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
    let status = child.wait().expect("exits");
    assert_eq!(status.code(), Some(0));
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("stderr");
    assert!(
        stderr.contains("memory consolidation"),
        "run names what is not active: {stderr}"
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
