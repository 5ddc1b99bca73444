//! Issue 24's "Done when", end to end: the real `opc` binary (`opc run` with its web chat over
//! 127.0.0.1, and `opc chat` over stdin/stdout), the scripted LLM, and the real sandbox.
//!
//! A four-level org (ceo → vp → lead → worker); the worker, three levels down, runs Write → Read →
//! Edit → Grep → Glob → Bash on files it wrote, each result checked in the next request the scripted
//! LLM receives; then the escape list, each refused: `..`, an absolute path outside, a symlink and a
//! hard link out of the workspace, `/proc/self/root/…`, OPC's config and database from Bash, writing
//! outside, `env` showing a key, a TCP connect to a local listener, a fork bomb (bounded: the run
//! goes on), a child left running after a timeout (killed), 5 MB of output (capped). A snapshot of
//! everything outside the workspace that the test placed (paths, sizes, mtimes, owners, modes, link
//! counts) is the same before and after.
//!
//! The worker has `allow: ["*"]` in both flows (`opc run` and `opc chat`): the sandbox must hold
//! without an approval in the way, and the same escape list runs through each.
//!
//! Approvals: an unlisted command raises a card in the web chat (headless Chromium clicks it) and a
//! prompt in `opc chat` (`n`, `y`, end of input); a rejected command leaves no file behind.
//!
//! The org's dirs are 0700, as `mktemp -d` makes them: the tests run as root, so the sandbox drops
//! commands to uid 61000, which cannot traverse them. It need not: the command runs in a private
//! root, with its workspace at `/workspace` and HOME at `/home/agent`; the host paths the escapes
//! name do not exist for it. Its PIDs (`$$`, `$!`) are its PID namespace's, so the child left
//! running after a timeout is found by a token in its command line.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use opc_tests::browser::Browser;
use opc_tests::opc_process::{OpcRun, opc_binary};
use opc_tests::org::{KEY, KEY_VAR, manager_chain_yaml, marker, provider_yaml, relay};
use opc_tests::sandbox::{private_dir, running_with};
use opc_tests::scripted_llm::{
    RecordedRequest, Script, ScriptedLlm, Step, bash_call, step_results,
};
use opc_tests::wait::{WAIT, WAIT_LONG, output_within_async, wait_until};
use opc_tests::web_chat;
use serde_json::json;

/// A provider key in `opc`'s environment that no command may see.
const PROVIDER_KEY: &str = "sk-ant-test-e2e-0123456789abcdef";
/// The content of the file outside the workspace the escapes aim at.
const SECRET: &str = "OUTSIDE-SECRET-CONTENT";
/// The deadline of a whole scripted flow through the org (a fork bomb and a timeout included).
const FLOW: Duration = Duration::from_secs(240);

/// What a snapshot keeps of a path: size, mtime (s, ns), uid, gid, mode, link count.
type Stat = (u64, i64, i64, u32, u32, u32, u64);

/// The org on disk: the config dir (config, database, workspaces), and a dir outside it holding the
/// files the escapes aim at; and the token the flow's long-running child carries.
struct Org {
    dir: tempfile::TempDir,
    outside: tempfile::TempDir,
    token: String,
}

impl Org {
    /// Two fresh dirs (made before the script, whose steps name their paths).
    fn dirs() -> Org {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        Org {
            dir: private_dir(),
            outside: private_dir(),
            // Digits: also the fraction of a `sleep` argument, so the sleep carries it too.
            token: format!("{}{nanos:09}", std::process::id()),
        }
    }

    /// Write the config pointed at `llm`, with `bash` as the worker's policy (a YAML flow mapping),
    /// and the outside files.
    fn write(self, llm: &ScriptedLlm, bash: &str) -> Org {
        let providers = provider_yaml(&llm.url(), false);
        let managers = manager_chain_yaml(
            &[
                ("ceo", "CEO"),
                ("vp", "VP Engineering"),
                ("lead", "Backend Lead"),
            ],
            "worker",
        );
        let yaml = format!(
            r#"
framework:
  name: Worker Org
{providers}
  privacy: {{ enabled: false }}
  memory: {{ consolidation: {{ enabled: false }} }}
  execution:
    taskTimeout: 10m
    approvalTimeout: 1h
agents:
{managers}  worker:
    role: Backend Developer
    level: 3
    parent: lead
    tools: [Read, Write, Edit, Grep, Glob, Bash, escalate]
    memory: {{ recall: false }}
    bash: {bash}
channels:
  web: {{ listen: "127.0.0.1:0" }}
"#
        );
        std::fs::write(self.config(), yaml).unwrap();
        let outside = self.outside.path();
        std::fs::write(outside.join("secret.txt"), format!("{SECRET}\n")).unwrap();
        std::fs::write(outside.join("hard-target.txt"), "hard target\n").unwrap();
        std::fs::create_dir(outside.join("sub")).unwrap();
        std::fs::write(outside.join("sub/keep.txt"), "keep\n").unwrap();
        self
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("opc.config.yaml")
    }

    fn database(&self) -> PathBuf {
        self.dir.path().join(".opc/opc.db")
    }

    fn workspace(&self) -> PathBuf {
        self.dir.path().join(".opc/workspaces/worker")
    }

    fn out(&self, name: &str) -> String {
        self.outside.path().join(name).display().to_string()
    }

    /// The worker's workspace made beforehand (as an admin would: owned by root), holding a symlink
    /// and a hard link to files outside it.
    fn plant_links(&self) {
        let workspace = self.workspace();
        std::fs::create_dir_all(&workspace).unwrap();
        for dir in [
            self.dir.path().join(".opc"),
            self.dir.path().join(".opc/workspaces"),
            workspace.clone(),
        ] {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::os::unix::fs::symlink(
            self.outside.path().join("secret.txt"),
            workspace.join("link-out"),
        )
        .unwrap();
        std::fs::hard_link(
            self.outside.path().join("hard-target.txt"),
            workspace.join("hard-out"),
        )
        .unwrap();
    }

    /// What must not change: everything in the outside dir, and the config dir except `.opc` (the
    /// database and the workspaces).
    fn snapshot(&self) -> BTreeMap<PathBuf, Stat> {
        let mut all = BTreeMap::new();
        snapshot_into(self.outside.path(), None, &mut all);
        snapshot_into(
            self.dir.path(),
            Some(&self.dir.path().join(".opc")),
            &mut all,
        );
        all
    }
}

fn snapshot_into(dir: &Path, skip: Option<&Path>, all: &mut BTreeMap<PathBuf, Stat>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if Some(path.as_path()) == skip {
            continue;
        }
        let meta = std::fs::symlink_metadata(&path).unwrap();
        all.insert(
            path.clone(),
            (
                meta.size(),
                meta.mtime(),
                meta.mtime_nsec(),
                meta.uid(),
                meta.gid(),
                meta.mode(),
                meta.nlink(),
            ),
        );
        if meta.is_dir() {
            snapshot_into(&path, skip, all);
        }
    }
}

/// ceo → vp → lead → worker, each manager relaying its report's answer with a prefix, `runs` times.
fn managers(script: Script, runs: usize) -> Script {
    let relay = |child: &str, prefix: &str| -> Vec<Step> {
        (0..runs)
            .flat_map(|_| relay(child, "do the work", prefix))
            .collect()
    };
    script
        .agent(marker("ceo"), relay("vp", "CEO: "))
        .agent(marker("vp"), relay("lead", "VP: "))
        .agent(marker("lead"), relay("worker", "LEAD: "))
}

#[track_caller]
fn ok(result: &(String, bool), needles: &[&str]) {
    assert!(!result.1, "expected success: {}", result.0);
    for needle in needles {
        assert!(result.0.contains(needle), "{needle:?} in {}", result.0);
    }
}

#[track_caller]
fn refused(result: &(String, bool), needles: &[&str]) {
    assert!(result.1, "expected a refusal (is_error): {}", result.0);
    assert!(
        !result.0.contains(SECRET),
        "the secret leaked: {}",
        result.0
    );
    for needle in needles {
        assert!(result.0.contains(needle), "{needle:?} in {}", result.0);
    }
}

/// The happy path every flow starts with (steps 0–5): Write → Read → Edit → Grep → Glob → Bash.
fn happy_path() -> Vec<Step> {
    vec![
        Step::tool(
            "Write",
            json!({"file_path": "notes/hello.txt", "content": "alpha\nbeta\ngamma\n"}),
        ),
        Step::tool("Read", json!({"file_path": "notes/hello.txt"})),
        Step::tool(
            "Edit",
            json!({"file_path": "notes/hello.txt", "old_string": "beta", "new_string": "BETA-EDITED"}),
        ),
        Step::tool(
            "Grep",
            json!({"pattern": "BETA-ED", "output_mode": "content"}),
        ),
        Step::tool("Glob", json!({"pattern": "**/*.txt"})),
        Step::tools([bash_call(
            "sh -c 'cat notes/hello.txt; wc -l < notes/hello.txt'",
        )]),
    ]
}

fn check_happy_path(worker: &[RecordedRequest]) {
    ok(&step_results(worker, 0)[0], &["notes/hello.txt"]);
    ok(
        &step_results(worker, 1)[0],
        &["     1\talpha", "     2\tbeta", "     3\tgamma"],
    );
    ok(&step_results(worker, 2)[0], &["BETA-EDITED"]);
    ok(
        &step_results(worker, 3)[0],
        &["notes/hello.txt:2:BETA-EDITED"],
    );
    ok(&step_results(worker, 4)[0], &["notes/hello.txt"]);
    ok(
        &step_results(worker, 5)[0],
        &["alpha\nBETA-EDITED\ngamma\n3\n", "exit code 0"],
    );
}

/// Steps 6–11, the escape list, aimed at `org`'s files and a listener on `port`.
fn escape_steps(org: &Org, port: u16) -> Vec<Step> {
    let config = org.config().display().to_string();
    let database = org.database().display().to_string();
    let secret = org.out("secret.txt");
    vec![
        // 6: the file tools' escapes.
        Step::tools([
            ("Read", json!({"file_path": "../../../opc.config.yaml"})),
            ("Read", json!({"file_path": secret})),
            ("Read", json!({"file_path": "link-out"})),
            ("Read", json!({"file_path": "hard-out"})),
            (
                "Read",
                json!({"file_path": format!("/proc/self/root{secret}")}),
            ),
            (
                "Write",
                json!({"file_path": org.out("written.txt"), "content": "x"}),
            ),
            (
                "Write",
                json!({"file_path": "../escape.txt", "content": "x"}),
            ),
            ("Write", json!({"file_path": "link-out", "content": "x"})),
            ("Write", json!({"file_path": "hard-out", "content": "x"})),
            (
                "Grep",
                json!({"pattern": "OUTSIDE", "path": org.outside.path().display().to_string()}),
            ),
        ]),
        // 7: Bash's escapes.
        Step::tools([
            bash_call(&format!("cat {config}")),
            bash_call(&format!("cat {database}")),
            bash_call("cat link-out"),
            bash_call(&format!("cat /proc/self/root{secret}")),
            bash_call(&format!("echo x > {}", org.out("bash-written.txt"))),
            bash_call("echo x >> hard-out"),
            bash_call(&format!("cat {secret}")),
            bash_call("env"),
            bash_call(&format!(
                "bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' && echo connected"
            )),
        ]),
        // 8: a fork bomb, bounded; 9: the sandbox still runs commands afterwards.
        Step::tool(
            "Bash",
            json!({"command": "bomb() { bomb | bomb & }; bomb; sleep 5", "timeout": 60000}),
        ),
        Step::tools([bash_call("echo alive")]),
        // 10: a child left running when the timeout fires (`: TOKEN` keeps bash from exec'ing
        // the sleep, so the subshell carries the token too).
        Step::tool(
            "Bash",
            json!({
                "command": format!("(sleep 300.{token}; : {token}) & echo started; wait; : {token}", token = org.token),
                "timeout": 2000,
            }),
        ),
        // 11: 5 MB of output.
        Step::tools([bash_call("head -c 5000000 /dev/zero | tr '\\0' a")]),
    ]
}

/// A listener no sandboxed command may reach, not accepting (a connect would queue).
fn listener() -> (std::net::TcpListener, u16) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

/// Every escape of steps 6–11 was refused, naming why; the listener was never reached.
async fn check_escapes(org: &Org, worker: &[RecordedRequest], listener: &std::net::TcpListener) {
    // The file tools refuse every way out, naming the rule.
    let files = step_results(worker, 6);
    assert_eq!(files.len(), 10, "{files:?}");
    for result in &files {
        refused(result, &[]);
    }
    assert!(
        files[0].0.contains("outside your workspace"),
        "{}",
        files[0].0
    );
    assert!(
        files[3].0.contains("link"),
        "the hard link is named: {}",
        files[3].0
    );

    // Bash: the sandbox refuses, whatever the allow-list says.
    let shell = step_results(worker, 7);
    assert_eq!(shell.len(), 9, "{shell:?}");
    for (i, result) in shell.iter().enumerate() {
        if i == 7 {
            continue;
        }
        refused(result, &["exit code"]);
        assert!(
            !result.0.contains("apiKeyEnv"),
            "the config leaked: {}",
            result.0
        );
        assert!(
            !result.0.contains("SQLite format"),
            "the database leaked: {}",
            result.0
        );
        assert!(
            !result.0.contains(SECRET),
            "the secret leaked: {}",
            result.0
        );
    }
    assert!(!shell[8].0.contains("connected"), "{}", shell[8].0);
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the listener was reached"
    );
    // `env`: the scrubbed environment, no key; HOME private and outside the workspace; no host path.
    let env = &shell[7];
    ok(
        env,
        &[
            "exit code 0",
            "TERM=dumb",
            "HOME=/home/agent\n",
            "PWD=/workspace\n",
        ],
    );
    let host = org.dir.path().display().to_string();
    for leak in [PROVIDER_KEY, "ANTHROPIC_API_KEY", KEY_VAR, KEY, &host] {
        assert!(!env.0.contains(leak), "{leak} in env: {}", env.0);
    }

    // The fork bomb ended (the flow went on), and the next command ran.
    // What stopped it is the process limit.
    let bomb = &step_results(worker, 8)[0];
    assert!(
        bomb.0
            .contains("fork: retry: Resource temporarily unavailable")
            || bomb.0.contains("fork: Resource temporarily unavailable"),
        "{}",
        bomb.0
    );
    ok(&step_results(worker, 9)[0], &["alive", "exit code 0"]);

    // The timeout killed the child it left running (which had started: the command ran until the
    // timeout only because of it), and every other process of the command.
    let timed_out = &step_results(worker, 10)[0];
    refused(timed_out, &["started", "timed out", "killed"]);
    wait_until(
        WAIT,
        "the timed-out command's processes to be killed",
        || running_with(&org.token).is_empty(),
    )
    .await;

    // 5 MB of output: the head and the tail, the middle said.
    let big = &step_results(worker, 11)[0];
    ok(big, &["bytes omitted", "exit code 0"]);
    assert!(big.0.chars().count() <= 31_000, "{} chars", big.0.len());
    assert!(big.0.starts_with("aaaa"), "{}", &big.0[..100]);

    // The hard link's target kept its content.
    assert_eq!(
        std::fs::read_to_string(org.outside.path().join("hard-target.txt")).unwrap(),
        "hard target\n"
    );
}

/// The flow both front ends drive: the worker's happy path then the escape list, under
/// `allow: ["*"]`, with the links planted and a snapshot of everything outside the workspace.
struct EscapeFlow {
    listener: std::net::TcpListener,
    llm: ScriptedLlm,
    org: Org,
    before: BTreeMap<PathBuf, Stat>,
    steps: usize,
}

impl EscapeFlow {
    /// The scripted LLM and the org, ready for `opc` to run the flow.
    async fn start() -> EscapeFlow {
        let (listener, port) = listener();
        let org = Org::dirs();
        let mut worker = happy_path();
        worker.extend(escape_steps(&org, port));
        worker.push(Step::text("WORKER: done"));
        let steps = worker.len();

        let script = managers(Script::new().agent(marker("worker"), worker), 1);
        let llm = ScriptedLlm::start(script).await.unwrap();
        let org = org.write(&llm, r#"{ allow: ["*"] }"#);
        org.plant_links();
        let before = org.snapshot();
        EscapeFlow {
            listener,
            llm,
            org,
            before,
            steps,
        }
    }

    /// After the flow: every step's result as expected, and nothing outside the workspace changed
    /// (nor was created there).
    async fn check(&self) {
        let worker = self.llm.requests_for(&marker("worker"));
        assert_eq!(worker.len(), self.steps, "one request per step");
        check_happy_path(&worker);
        check_escapes(&self.org, &worker, &self.listener).await;
        assert_eq!(self.before, self.org.snapshot(), "outside the workspace");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_three_levels_down_uses_its_tools_and_every_escape_is_refused_in_opc_run() {
    let flow = EscapeFlow::start().await;
    let opc = OpcRun::start(
        &flow.org.config(),
        &[(KEY_VAR, KEY), ("ANTHROPIC_API_KEY", PROVIDER_KEY)],
    );
    let (_conversation, mut sse) = web_chat::start(&opc, "Build the notes").await;
    sse.wait_for("message|edit", FLOW, |data| {
        data["text"].as_str() == Some("CEO: VP: LEAD: WORKER: done")
    })
    .await;
    flow.check().await;
    assert_eq!(opc.stop().0, Some(0));
}

/// Run `opc` with `args` and `stdin` (a provider key in its environment), waiting on a blocking
/// thread so the scripted server keeps serving.
async fn opc(org: &Org, args: &[&str], stdin: &str, deadline: Duration) -> Output {
    let mut command = Command::new(opc_binary());
    command
        .args(args)
        .arg("--config")
        .arg(org.config())
        .env("NO_COLOR", "1")
        .env("OPC_LOG", "warn")
        .env("OPC_MODELS_OFFLINE", "1")
        .env(KEY_VAR, KEY)
        .env("ANTHROPIC_API_KEY", PROVIDER_KEY)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("opc starts");
    let mut input = child.stdin.take().expect("stdin");
    let stdin = stdin.to_string();
    // Written on its own thread: a pipe's buffer is small, and `opc` may be blocked writing.
    std::thread::spawn(move || {
        let _ = input.write_all(stdin.as_bytes());
    });
    output_within_async(
        child,
        deadline,
        &format!("`opc {}` to finish", args.join(" ")),
    )
    .await
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_flow_through_opc_chat_refuses_every_escape() {
    let flow = EscapeFlow::start().await;
    let out = opc(&flow.org, &["chat", "Build the notes"], "", FLOW).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        text(&out.stdout),
        "CEO: VP: LEAD: WORKER: done\n",
        "{stderr}"
    );
    flow.check().await;
}

/// The worker runs `touch marker` (unlisted: it asks) once per request, and reports the result.
fn asks_to_touch(runs: usize) -> Script {
    let mut steps = Vec::new();
    for _ in 0..runs {
        steps.push(Step::tools([bash_call("touch marker")]));
        steps.push(Step::text("WORKER: {{last_result}}"));
    }
    managers(Script::new().agent(marker("worker"), steps), runs)
}

/// The page's value of the JavaScript expression `js`, as a `T`.
async fn eval_as<T: serde::de::DeserializeOwned>(browser: &mut Browser, js: &str) -> T {
    serde_json::from_value(browser.eval(js).await.unwrap()).unwrap()
}

const ASK: &str = r#"{ allow: ["echo", "cat"], unlisted: ask }"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bash_approval_is_decided_in_the_web_chat() {
    let Some(mut browser) = Browser::for_test().await else {
        return;
    };
    let llm = ScriptedLlm::start(asks_to_touch(2)).await.unwrap();
    let org = Org::dirs().write(&llm, ASK);
    let opc = OpcRun::start(&org.config(), &[(KEY_VAR, KEY)]);
    let workspace = org.workspace();
    browser.navigate(&opc.url("/")).await.unwrap();
    browser
        .wait_for(
            "document.activeElement && document.activeElement.id === 'input'",
            WAIT,
        )
        .await
        .unwrap();

    // Reject: the command never runs, and the model is told.
    browser.type_text("Touch the marker").await.unwrap();
    browser.press_enter().await.unwrap();
    let open_card = "[...document.querySelectorAll('.card')].filter(c => c.querySelectorAll('button').length === 3 && c.textContent.includes('touch marker') && c.textContent.includes('worker'))";
    browser
        .wait_for(&format!("{open_card}.length === 1"), WAIT)
        .await
        .unwrap();
    let labels: Vec<String> = eval_as(
        &mut browser,
        &format!("[...{open_card}[0].querySelectorAll('button')].map(b => b.textContent)"),
    )
    .await;
    assert_eq!(
        labels,
        [
            "Approve once",
            "Approve `touch marker` for this conversation",
            "Reject"
        ]
    );
    // The card names the agent, the command and where it runs.
    let card: String = eval_as(&mut browser, &format!("{open_card}[0].textContent")).await;
    assert!(
        card.contains(&workspace.display().to_string()),
        "the working directory in {card}"
    );
    let click = |label: &str| {
        format!(
            "[...{open_card}[0].querySelectorAll('button')].find(b => b.textContent === '{label}').click()"
        )
    };
    let first: String = eval_as(&mut browser, &format!("{open_card}[0].dataset.approval")).await;
    browser.eval(&click("Reject")).await.unwrap();
    // The card shows the decision in place of its buttons.
    browser
        .wait_for(
            &format!("(document.querySelector('.card[data-approval=\"{first}\"] .decision') || {{}}).textContent?.startsWith('Rejected: Reject')"),
            WAIT,
        )
        .await
        .unwrap();
    let answers = "[...document.querySelectorAll('#log .body')].map(b => b.textContent).filter(t => t.startsWith('CEO: VP: LEAD: WORKER:') && !t.endsWith('…'))";
    browser
        .wait_for(&format!("{answers}.length === 1"), FLOW)
        .await
        .unwrap();
    let worker = llm.requests_for(&marker("worker"));
    assert_eq!(worker.len(), 2);
    let rejected = &worker[1].tool_results()[0];
    assert!(rejected.1, "{}", rejected.0);
    assert!(rejected.0.contains("not run: rejected"), "{}", rejected.0);
    assert!(
        !workspace.join("marker").exists(),
        "a rejected command leaves no trace"
    );

    // Approve once: it runs.
    browser.type_text("Touch it again").await.unwrap();
    browser.press_enter().await.unwrap();
    browser
        .wait_for(&format!("{open_card}.length === 1"), WAIT)
        .await
        .unwrap();
    browser.eval(&click("Approve once")).await.unwrap();
    browser
        .wait_for(&format!("{answers}.length === 2"), FLOW)
        .await
        .unwrap();
    let worker = llm.requests_for(&marker("worker"));
    assert_eq!(worker.len(), 4);
    ok(&worker[3].tool_results()[0], &["exit code 0"]);
    assert!(workspace.join("marker").exists());
    assert_eq!(opc.stop().0, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bash_approval_is_decided_in_opc_chat() {
    let llm = ScriptedLlm::start(asks_to_touch(3)).await.unwrap();
    let org = Org::dirs().write(&llm, ASK);
    let marker_file = org.workspace().join("marker");

    // `n` rejects: no file.
    let out = opc(&org, &["chat", "Touch the marker"], "n\n", WAIT_LONG).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("touch marker"),
        "the prompt shows the command: {stderr}"
    );
    let stdout = text(&out.stdout);
    assert!(stdout.contains("not run: rejected"), "{stdout}");
    assert!(!marker_file.exists(), "a rejected command leaves no trace");

    // End of input rejects.
    let out = opc(&org, &["chat", "Touch the marker again"], "", WAIT_LONG).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(stdout.contains("not run: rejected"), "{stdout}");
    assert!(!marker_file.exists(), "a rejected command leaves no trace");

    // `y` approves once: the file is made.
    let out = opc(&org, &["chat", "Touch it, please"], "y\n", WAIT_LONG).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(stdout.contains("exit code 0"), "{stdout}");
    assert!(marker_file.exists());
    assert_eq!(llm.requests_for(&marker("worker")).len(), 6);
}
