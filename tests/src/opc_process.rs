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
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

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
        let mut command = Command::new(opc_binary());
        command
            .arg("run")
            .arg("--config")
            .arg(config)
            .env_remove("OPC_CONFIG")
            .env("OPC_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().unwrap_or_else(|e| panic!("spawn opc: {e}"));
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(mut pipe) = child.stderr.take() {
            let sink = stderr.clone();
            std::thread::spawn(move || {
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
            });
        }
        let mut stdout = BufReader::new(child.stdout.take().unwrap_or_else(|| panic!("stdout")));
        let mut banner = String::new();
        let read = stdout.read_line(&mut banner).unwrap_or(0);
        if read == 0 {
            let status = child.wait().ok().and_then(|s| s.code());
            // Let the stderr reader catch up.
            std::thread::sleep(Duration::from_millis(100));
            let text = stderr.lock().unwrap_or_else(|p| p.into_inner()).clone();
            return Err((status, text));
        }
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
        self.stderr
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then wait: the exit code and the rest of stdout.
    pub fn stop(mut self) -> (Option<i32>, String) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let code = self.child.wait().ok().and_then(|s| s.code());
        let mut rest = String::new();
        if let Some(mut stdout) = self.stdout.take() {
            let _ = stdout.read_to_string(&mut rest);
        }
        (code, rest)
    }
}

impl Drop for OpcRun {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
