//! A throw-away PostgreSQL for tests: Debian's server binaries (`initdb`, `postgres`), a data
//! directory under the system's temp dir, a free port on 127.0.0.1, and a fresh database per test.
//!
//! Why our own: the tests need a real server (advisory locks, `SKIP LOCKED`, LISTEN/NOTIFY, commit
//! order) and one they can restart under traffic; a script beside the crate would be a second place
//! that knows how. `.ci/run` starts one server for the whole run and exports
//! `OPC_TEST_POSTGRES_URL`; without it (a developer's machine), the first test of a process that
//! needs one starts it here, and tests that restart the server start their own ([`PgServer::start`]).
//!
//! Invariants:
//! - every wait has a deadline, and a server that does not come up is an error naming its log;
//! - a server dies with the test process: it is spawned by one long-lived thread with a parent-death
//!   signal (`setpriv --pdeathsig KILL`), so a crashed or killed test binary leaves no postgres
//!   behind; data directories of test processes that are gone are removed at the next start;
//! - as root (CI), the server runs as the `postgres` user (`initdb` refuses root);
//! - where there is no server to be had, [`fresh_database`] goes through `opc-testgate`: a line and a
//!   skip on a developer's machine, a failure under CI.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

use opc_testgate::Group;

/// How long a server may take to initialise or start.
const START_DEADLINE: Duration = Duration::from_secs(60);

/// One PostgreSQL server owned by the test process.
pub struct PgServer {
    /// `<temp>/opc-test-pg/<pid>-<n>`: `data/` (the cluster), `socket/`, `log`.
    root: PathBuf,
    bin: PathBuf,
    port: u16,
    /// `(uid, gid)` of `postgres` when running as root.
    run_as: Option<(u32, u32)>,
    child: Mutex<Option<Child>>,
}

impl PgServer {
    /// Initialise and start a new server (seconds: `initdb` writes a cluster).
    pub fn start() -> Result<PgServer, String> {
        let bin = server_bin()?;
        let run_as = run_as()?;
        static SERVERS: AtomicU32 = AtomicU32::new(0);
        let base = std::env::temp_dir().join("opc-test-pg");
        std::fs::create_dir_all(&base).map_err(|e| format!("{}: {e}", base.display()))?;
        remove_stale(&base);
        let root = base.join(format!(
            "{}-{}",
            std::process::id(),
            SERVERS.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        for dir in [root.clone(), root.join("socket")] {
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            if let Some((uid, gid)) = run_as {
                std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
                    .map_err(|e| format!("chown {}: {e}", dir.display()))?;
            }
        }
        let server = PgServer {
            port: free_port()?,
            root,
            bin,
            run_as,
            child: Mutex::new(None),
        };
        let initdb = server
            .command("initdb")
            .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .arg("--locale=C")
            .arg("-D")
            .arg(server.root.join("data"))
            .output()
            .map_err(|e| format!("cannot run initdb: {e}"))?;
        if !initdb.status.success() {
            return Err(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&initdb.stderr).trim()
            ));
        }
        server.run()?;
        Ok(server)
    }

    /// The URL of database `db` on this server.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stop the server as `pg_ctl stop -m fast` does (SIGINT: clients are disconnected, the
    /// cluster is shut down cleanly) and wait for it.
    pub fn stop(&self) {
        let child = self.child.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut child) = child {
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + START_DEADLINE;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start the stopped server again, on the same port.
    pub fn restart(&self) -> Result<(), String> {
        self.stop();
        self.run()
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        match self.run_as {
            Some((uid, gid)) => {
                let mut c = Command::new("setpriv");
                c.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={gid}"))
                    .arg("--init-groups")
                    .args(["--pdeathsig", "KILL", "--"])
                    .arg(path);
                c
            }
            None => {
                let mut c = Command::new("setpriv");
                c.args(["--pdeathsig", "KILL", "--"]).arg(path);
                c
            }
        }
    }

    /// Start `postgres` on the cluster and wait until it accepts queries.
    fn run(&self) -> Result<(), String> {
        let log_path = self.root.join("log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| format!("{}: {e}", log_path.display()))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let mut command = self.command("postgres");
        command
            .arg("-D")
            .arg(self.root.join("data"))
            .args(["-p", &self.port.to_string()])
            .args(["-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!(
                "unix_socket_directories={}",
                self.root.join("socket").display()
            ))
            // A test server: durability against an OS crash is not what is tested here.
            .args(["-c", "fsync=off", "-c", "full_page_writes=off"])
            .args(["-c", "max_connections=400"])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err);
        let child = spawn_kept(command)?;
        *self.child.lock().unwrap_or_else(|p| p.into_inner()) = Some(child);
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            let ready = Command::new(self.bin.join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return Ok(());
            }
            if let Some(child) = self
                .child
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(format!(
                    "postgres exited ({status}) at start; its log: {}",
                    std::fs::read_to_string(&log_path).unwrap_or_default()
                ));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "postgres did not accept connections within {START_DEADLINE:?}; its log is {}",
                    log_path.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Spawn `command` from one thread that lives as long as the process, so the parent-death signal
/// (which follows the spawning *thread*) fires only when the test process ends.
fn spawn_kept(command: Command) -> Result<Child, String> {
    type Request = (Command, mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("opc-test-pg-spawner".into())
            .spawn(move || {
                while let Ok((mut command, reply)) = rx.recv() {
                    let _ = reply.send(command.spawn());
                }
                // Keep the thread (and with it the children's parent) alive to the end.
                loop {
                    std::thread::park();
                }
            })
            .map(|_| ())
            .unwrap_or_else(|e| panic!("cannot start the spawner thread: {e}"));
        Mutex::new(tx)
    });
    let (reply, answer) = mpsc::channel();
    spawner
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .send((command, reply))
        .map_err(|_| "the spawner thread is gone".to_string())?;
    answer
        .recv_timeout(START_DEADLINE)
        .map_err(|_| "the spawner thread did not answer".to_string())?
        .map_err(|e| format!("cannot start postgres: {e}"))
}

/// The directory of Debian's server binaries (the newest `/usr/lib/postgresql/<v>/bin`), or the
/// one holding `initdb` on `PATH`.
fn server_bin() -> Result<PathBuf, String> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .find(|dir| dir.join("initdb").is_file() && dir.join("postgres").is_file())
        .ok_or_else(|| {
            "no PostgreSQL server binaries (apt package `postgresql`; `.ci/run` installs it)"
                .to_string()
        })
}

/// `Some((uid, gid))` of the `postgres` user when running as root.
fn run_as() -> Result<Option<(u32, u32)>, String> {
    let me = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let root = me
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        == Some("0");
    if !root {
        return Ok(None);
    }
    let passwd = std::fs::read_to_string("/etc/passwd").map_err(|e| e.to_string())?;
    passwd
        .lines()
        .find_map(|line| {
            let f: Vec<&str> = line.split(':').collect();
            (f.first() == Some(&"postgres")).then(|| Some((f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?)))?
        })
        .map(Some)
        .ok_or_else(|| "running as root, and there is no `postgres` user to run the server as (apt package `postgresql` makes it)".to_string())
}

fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

/// Remove the data directories of test processes that are gone.
fn remove_stale(base: &Path) {
    for entry in std::fs::read_dir(base).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.split('-').next()) else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The server of this test process: `OPC_TEST_POSTGRES_URL`'s (`.ci/run` starts one), else one
/// started here on first use. `Err` says why there is none.
fn shared() -> Result<&'static str, String> {
    static SHARED: OnceLock<Result<String, String>> = OnceLock::new();
    static SERVER: OnceLock<PgServer> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            if let Ok(url) = std::env::var("OPC_TEST_POSTGRES_URL")
                && !url.is_empty()
            {
                return Ok(url);
            }
            let server = PgServer::start()?;
            let url = server.url("postgres");
            let _ = SERVER.set(server);
            Ok(url)
        })
        .as_deref()
        .map_err(|e| e.clone())
}

/// A new, empty database for `test`, on the shared server: its URL. `None` when there is no server
/// here (one line, or a failure under CI: `opc-testgate`).
pub async fn fresh_database(test: &str) -> Option<String> {
    let admin = opc_testgate::need(Group::Postgres, test, shared())?;
    Some(
        create_database(admin, test)
            .await
            .unwrap_or_else(|e| panic!("{test}: {e}")),
    )
}

/// A new database beside the one `admin_url` names; returns its URL.
pub async fn create_database(admin_url: &str, test: &str) -> Result<String, String> {
    static N: AtomicU32 = AtomicU32::new(0);
    let name: String = test
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(30)
        .collect();
    let name = format!(
        "t_{name}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let (client, connection) = tokio_postgres::connect(admin_url, tokio_postgres::NoTls)
        .await
        .map_err(|e| format!("cannot reach the test server: {e}"))?;
    let task = tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE DATABASE \"{name}\""))
        .await
        .map_err(|e| format!("cannot create a test database: {e}"))?;
    drop(client);
    let _ = task.await;
    let (base, _) = admin_url
        .rsplit_once('/')
        .ok_or_else(|| format!("not a database URL: {admin_url}"))?;
    Ok(format!("{base}/{name}"))
}
