//! The real `opc` binary as a child process, for end-to-end tests of `opc run`: start it on a config,
//! learn its address from the ready line, stop it with SIGTERM (a clean shutdown) or SIGKILL (a crash).
//!
//! Why a process and not an in-process server: the tests then cover exactly what users run — argument
//! parsing, env-var secrets, start-up errors, signal handling and restarts over the same database.
//!
//! The binary is the workspace's `target/<profile>/opc`, checked against the current sources before
//! the first test of a process uses it ([`crate::fresh`]). `cargo test --workspace` has just built it
//! (opc-bot's own tests need it), so the check passes and costs a few hundred `stat`s. Under
//! `cargo test -p opc-tests` (or a bench) nothing builds it, so when it is stale or missing it is built
//! here, once per process, with `cargo build -p opc-bot --bin opc` in the same profile and target
//! directory; then it is checked again and a test never runs a binary the check rejects.
//!
//! Why not always run `cargo build`: under `cargo test --workspace` the workspace's dev-dependencies
//! unify features (tokio's `test-util`, axum's `ws`) that `cargo build -p opc-bot` alone does not, so an
//! unconditional build would compile a second copy of most of the dependency graph in every CI run.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::fresh;
use crate::wait::{self, blocking_within};

/// Path of the `opc` binary built from the current sources: built first when it is missing or stale
/// (see the module doc). Panics, saying why, when even a fresh build does not pass the check.
pub fn opc_binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(fresh_binary).clone()
}

/// The checkout the tests were compiled from (the parent of `tests/`).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// How long building `opc` may take before the test gives up (a cold debug build on 2 busy cores).
const BUILD: Duration = Duration::from_secs(30 * 60);

fn fresh_binary() -> PathBuf {
    // target/<profile>/deps/<test exe> → target/<profile>/opc
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current exe: {e}"));
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| panic!("no target dir above {}", exe.display()))
        .to_path_buf();
    let binary = profile_dir.join(format!("opc{}", std::env::consts::EXE_SUFFIX));
    let workspace = workspace_root();
    let Err(stale) = fresh::check(&binary, &workspace) else {
        return binary;
    };
    // One build at a time across test processes (cargo would serialise them too, but each would
    // still run); the one that waited finds the binary fresh.
    let lock_path = profile_dir.join(".opc-tests-build.lock");
    let lock = std::fs::File::create(&lock_path)
        .unwrap_or_else(|e| panic!("create {}: {e}", lock_path.display()));
    lock.lock()
        .unwrap_or_else(|e| panic!("lock {}: {e}", lock_path.display()));
    if fresh::check(&binary, &workspace).is_ok() {
        return binary;
    }
    // Straight to stderr, past the test harness's capture: a build can take minutes, and the one
    // running the tests should see why.
    let _ = writeln!(
        std::io::stderr(),
        "opc-tests: {} is not the current build: {stale}; building it",
        binary.display()
    );
    let mut build = build_command(&profile_dir);
    build.current_dir(&workspace);
    let mut child = build
        .spawn()
        .unwrap_or_else(|e| panic!("run {build:?}: {e}"));
    let status = wait::child_within(&mut child, BUILD, "`cargo build -p opc-bot` to finish");
    assert!(status.success(), "{build:?} failed ({status})");
    if let Err(stale) = fresh::check(&binary, &workspace) {
        panic!(
            "{} is still not the build of the current sources after {build:?}: {stale}",
            binary.display()
        );
    }
    binary
}

/// `cargo build -p opc-bot --bin opc` into `profile_dir` (`target[/<triple>]/<profile>`).
fn build_command(profile_dir: &Path) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build.args(["build", "-p", "opc-bot", "--bin", "opc"]);
    match profile_dir.file_name().and_then(|n| n.to_str()) {
        // `debug` holds the dev and test profiles; `release` the release and bench profiles.
        Some("debug") | None => {}
        Some("release") => {
            build.arg("--release");
        }
        Some(custom) => {
            build.args(["--profile", custom]);
        }
    }
    // The target directory holds a CACHEDIR.TAG; with `--target <triple>` it is one level further up.
    let is_target_dir = |dir: &Path| dir.join("CACHEDIR.TAG").exists();
    let above = profile_dir.parent();
    match (above, above.and_then(Path::parent)) {
        (Some(target), _) if is_target_dir(target) => {
            build.arg("--target-dir").arg(target);
        }
        (Some(triple_dir), Some(target)) if is_target_dir(target) => {
            build.arg("--target-dir").arg(target);
            build
                .arg("--target")
                .arg(triple_dir.file_name().unwrap_or_default());
        }
        _ => {}
    }
    build
}

/// A running `opc run`.
pub struct OpcRun {
    child: Child,
    /// `127.0.0.1:PORT` of its web server.
    pub address: String,
    /// The ready line it printed.
    pub banner: String,
    stderr: Arc<Mutex<String>>,
    stdout: Option<BufReader<std::process::ChildStdout>>,
}

impl OpcRun {
    /// Start `opc run --config <config>` with `env` added, and wait for its ready line. Panics with its
    /// stderr if it exits first.
    pub fn start(config: &Path, env: &[(&str, &str)]) -> OpcRun {
        match OpcRun::try_start(config, env) {
            Ok(run) => run,
            Err((code, stderr)) => panic!("opc run exited with {code:?} before ready:\n{stderr}"),
        }
    }

    /// Start, or return the exit code and stderr if it exits before its ready line.
    pub fn try_start(config: &Path, env: &[(&str, &str)]) -> Result<OpcRun, (Option<i32>, String)> {
        OpcRun::try_start_binary(&opc_binary(), config, env)
    }

    /// [`OpcRun::start`] with more arguments after `opc run --config <config>` (`--listen ADDR`).
    pub fn start_with_args(config: &Path, args: &[&str], env: &[(&str, &str)]) -> OpcRun {
        match OpcRun::try_start_args(&opc_binary(), config, args, env) {
            Ok(run) => run,
            Err((code, stderr)) => panic!("opc run exited with {code:?} before ready:\n{stderr}"),
        }
    }

    /// [`OpcRun::try_start`] with another build of `opc` (a benchmark's baseline).
    pub fn try_start_binary(
        binary: &Path,
        config: &Path,
        env: &[(&str, &str)],
    ) -> Result<OpcRun, (Option<i32>, String)> {
        OpcRun::try_start_args(binary, config, &[], env)
    }

    /// The one way every `OpcRun` starts: `binary run --config <config> ARGS`, up to its ready line.
    fn try_start_args(
        binary: &Path,
        config: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<OpcRun, (Option<i32>, String)> {
        let mut command = Command::new(binary);
        command
            .arg("run")
            .arg("--config")
            .arg(config)
            .args(args)
            .env_remove("OPC_CONFIG")
            .env("OPC_LOG", "warn")
            // A test never downloads the NER model; it loads it when the cache has it (CI fetches it).
            .env("OPC_MODELS_OFFLINE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().unwrap_or_else(|e| panic!("spawn opc: {e}"));
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut stderr_reader = None;
        if let Some(mut pipe) = child.stderr.take() {
            let sink = stderr.clone();
            stderr_reader = Some(std::thread::spawn(move || {
                let mut buffer = [0u8; 4096];
                while let Ok(n) = pipe.read(&mut buffer) {
                    if n == 0 {
                        break;
                    }
                    let text = String::from_utf8_lossy(&buffer[..n]).into_owned();
                    sink.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push_str(&text);
                }
            }));
        }
        let stdout = BufReader::new(child.stdout.take().unwrap_or_else(|| panic!("stdout")));
        let ready = blocking_within(READY, "opc run's ready line", move || {
            let mut stdout = stdout;
            let mut banner = String::new();
            let read = stdout.read_line(&mut banner).unwrap_or(0);
            (stdout, banner, read)
        });
        let (stdout, banner) = match ready {
            Some((stdout, banner, read)) if read > 0 => (stdout, banner),
            ready => {
                if ready.is_none() {
                    // Started but never ready: stop it, and say so with what it printed.
                    let _ = child.kill();
                }
                let status = wait::exit_within(&mut child, EXIT).and_then(|s| s.code());
                // It has exited: its stderr ends, so the reader finishes with everything it printed.
                if let Some(reader) = stderr_reader {
                    let _ = blocking_within(EXIT, "opc run's stderr", move || reader.join());
                }
                let mut text = collected(&stderr);
                if ready.is_none() {
                    text.push_str(&format!("\n(no ready line within {READY:?}; killed)"));
                }
                return Err((status, text));
            }
        };
        let address = banner
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_else(|| panic!("no address in {banner:?}"))
            .to_string();
        Ok(OpcRun {
            child,
            address,
            banner,
            stderr,
            stdout: Some(stdout),
        })
    }

    /// `http://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// `GET /healthz` asked for JSON, which must answer 200: its body (`status`, and under `privacy`
    /// the privacy gateway's NER state). One request for the tests that read the NER state, so they
    /// all ask the same way.
    pub async fn health(&self) -> serde_json::Value {
        let url = self.url("/healthz");
        let response = crate::http_client()
            .get(&url)
            .header("accept", "application/json")
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        assert_eq!(response.status(), 200, "GET {url}");
        response
            .json()
            .await
            .unwrap_or_else(|e| panic!("GET {url}: not JSON: {e}"))
    }

    /// What it printed on stderr so far.
    pub fn stderr(&self) -> String {
        collected(&self.stderr)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then wait (up to 30 s, else it is killed and this panics): the exit code and the rest of
    /// stdout.
    pub fn stop(mut self) -> (Option<i32>, String) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let Some(status) = wait::exit_within(&mut self.child, EXIT) else {
            let _ = self.child.kill();
            panic!(
                "opc run did not exit within {EXIT:?} of SIGTERM; stderr:\n{}",
                self.stderr()
            );
        };
        let mut rest = String::new();
        if let Some(mut stdout) = self.stdout.take() {
            // The process has exited, so this read ends at the closed pipe.
            let _ = stdout.read_to_string(&mut rest);
        }
        (status.code(), rest)
    }
}

/// How long `opc run` may take to print its ready line (generous: a loaded machine, a cold disk).
const READY: Duration = Duration::from_secs(60);
/// How long it may take to exit once told to (SIGTERM, or SIGKILL).
const EXIT: Duration = Duration::from_secs(30);

fn collected(stderr: &Mutex<String>) -> String {
    stderr.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

impl Drop for OpcRun {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
