//! The real `opc` binary as a child process, for end-to-end tests of `opc run`: start it on a config,
//! learn its address from the ready line, stop it with SIGTERM (a clean shutdown) or SIGKILL (a crash).
//!
//! Why a process and not an in-process server: the tests then cover exactly what users run — argument
//! parsing, env-var secrets, start-up errors, signal handling and restarts over the same database.
//!
//! The binary is the workspace's `target/<profile>/opc`. `cargo test --workspace` builds it before any
//! test runs; when a test is run alone (`cargo test -p opc-tests`), it is built on first use.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::wait::blocking_within;

/// Path of the `opc` binary, built if it is missing.
pub fn opc_binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            // target/<profile>/deps/<test exe> → target/<profile>/opc
            let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current exe: {e}"));
            let profile_dir = exe
                .parent()
                .and_then(Path::parent)
                .unwrap_or_else(|| panic!("no target dir above {}", exe.display()))
                .to_path_buf();
            let binary = profile_dir.join("opc");
            if !binary.exists() {
                let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
                let mut build = Command::new(cargo);
                build.args(["build", "-p", "opc-bot", "--bin", "opc"]);
                if profile_dir.ends_with("release") {
                    build.arg("--release");
                }
                let status = build
                    .status()
                    .unwrap_or_else(|e| panic!("building opc: {e}"));
                assert!(status.success(), "building opc failed");
            }
            binary
        })
        .clone()
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

    /// [`OpcRun::try_start`] with another build of `opc` (a benchmark's baseline).
    pub fn try_start_binary(
        binary: &Path,
        config: &Path,
        env: &[(&str, &str)],
    ) -> Result<OpcRun, (Option<i32>, String)> {
        let mut command = Command::new(binary);
        command
            .arg("run")
            .arg("--config")
            .arg(config)
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
                let status = wait_with_deadline(&mut child, EXIT).and_then(|s| s.code());
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
        let Some(status) = wait_with_deadline(&mut self.child, EXIT) else {
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

/// Wait for `child` to exit, up to `limit`; `None` if it is still running.
fn wait_with_deadline(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) | Err(_) => return None,
        }
    }
}

impl Drop for OpcRun {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
