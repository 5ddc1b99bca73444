//! Several `opc run` nodes serving one org on one PostgreSQL database (issue 36 §2), for the
//! cluster's end-to-end tests: the org (the test org of [`crate::org`] on `storage: postgres`, with
//! the shortest lease, so a failover takes seconds), its nodes (`opc run --node NAME`: one config
//! file, one `DATABASE_URL`, each web chat on a port of its own), and what a test reads back from
//! the database to judge them (root tasks and the node that ran each, the web transcript).
//!
//! Why a fixture that owns the nodes: a failing cluster test is only understood with what every
//! node printed and what the database holds, so when a test panics [`Cluster`]'s drop prints each
//! node's stderr, labelled, and the tasks, leases and nodes tables ([`Db::dump_blocking`]), before
//! the nodes are killed.
//!
//! Invariants:
//! - every node is an [`OpcRun`], killed and reaped when the [`Cluster`] drops, also on failure; a
//!   node killed on purpose ([`Cluster::kill9`]) stays in the fixture, so its stderr is still shown;
//! - every read of the database opens its own connection ([`Db`]), so a read after the server
//!   restarted needs nothing reset, and nothing here holds a connection a test did not ask for;
//! - every wait has a deadline ([`poll`]).

use std::future::Future;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use opc_agents::TaskState;
use tokio_postgres::types::ToSql;

use crate::opc_process::{OpcRun, opc_binary};
use crate::org::{Execution, Extras, KEY, KEY_VAR, TestOrg, Wire};

/// `framework.cluster.leaseTtl` of the test org: the shortest the config accepts, so a node's
/// death hands its trees over after seconds, not the default 15.
pub const LEASE_TTL: &str = "3s";

/// The org's keys of `framework` (indented 2): everything in PostgreSQL, and the short lease.
pub fn framework_yaml() -> String {
    format!("  memory:\n    storage: postgres\n  cluster:\n    leaseTtl: {LEASE_TTL}\n")
}

/// The web chat on a port the system picks: every node reads the same file, and each gets a port
/// of its own (its ready line says which).
pub const WEB: &str = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n";

/// One node of the cluster.
struct Node {
    name: String,
    run: OpcRun,
}

/// An org on PostgreSQL and the nodes serving it.
pub struct Cluster {
    /// Declared first, so dropped (killed) before the config's directory goes.
    nodes: Vec<Node>,
    org: TestOrg,
    url: String,
    /// The org's database.
    pub db: Db,
}

impl Cluster {
    /// Write the test org at the scripted LLM `llm_url` on the database `url`, in cluster mode, with
    /// `execution`'s settings and the web chat on. No node runs yet ([`Cluster::start`]).
    pub fn new(llm_url: &str, url: &str, execution: Execution) -> Cluster {
        let framework = framework_yaml();
        let org = TestOrg::with_extras(
            llm_url,
            Wire::Anthropic,
            execution,
            &Extras {
                framework: &framework,
                sections: WEB,
                ..Extras::default()
            },
        );
        Cluster {
            nodes: Vec::new(),
            org,
            url: url.to_string(),
            db: Db::new(url),
        }
    }

    /// The config file every node reads.
    pub fn config_path(&self) -> std::path::PathBuf {
        self.org.config_path()
    }

    /// Start `opc run --node NAME` on the org and wait for its ready line. The nodes log warnings
    /// (as every `opc run` of the tests does); `OPC_TEST_NODE_LOG` set in the test's environment
    /// is their `OPC_LOG` instead, to see more of what a failing test's nodes did.
    pub fn start(&mut self, name: &str) -> &OpcRun {
        let log = std::env::var("OPC_TEST_NODE_LOG").unwrap_or_else(|_| "warn".to_string());
        let run = OpcRun::start_with_args(
            &self.org.config_path(),
            &["--node", name],
            &[
                (KEY_VAR, KEY),
                ("DATABASE_URL", self.url.as_str()),
                ("OPC_LOG", log.as_str()),
            ],
        );
        self.nodes.push(Node {
            name: name.to_string(),
            run,
        });
        &self.nodes[self.nodes.len() - 1].run
    }

    /// The node named `name` (the last started under that name).
    pub fn node(&self, name: &str) -> &OpcRun {
        &self
            .nodes
            .iter()
            .rfind(|n| n.name == name)
            .unwrap_or_else(|| panic!("no node {name:?} was started"))
            .run
    }

    /// `kill -9` the node named `name`, and wait until it is dead (a zombie, not reaped yet, so its
    /// stderr stays readable): when it died, by the clock the scripted LLM records with.
    pub fn kill9(&self, name: &str) -> SystemTime {
        let pid = self.node(name).pid();
        let status = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap_or_else(|e| panic!("kill -9 {pid}: {e}"));
        assert!(status.success(), "kill -9 {pid} ({name}): {status}");
        let deadline = std::time::Instant::now() + crate::wait::WAIT;
        while !dead(pid) {
            assert!(
                std::time::Instant::now() < deadline,
                "node {name} (pid {pid}) still runs {:?} after kill -9",
                crate::wait::WAIT
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        SystemTime::now()
    }

    /// Stop every node still running with SIGTERM, in order, asserting each exits 0 (a node killed
    /// on purpose is skipped).
    pub fn stop_all(&mut self) {
        for node in std::mem::take(&mut self.nodes) {
            if dead(node.run.pid()) {
                continue;
            }
            let stderr = node.run.stderr();
            let (code, _) = node.run.stop();
            assert_eq!(
                code,
                Some(0),
                "node {} did not stop cleanly:\n{stderr}",
                node.name
            );
        }
    }

    /// What every node printed on stderr so far, labelled by node.
    pub fn stderr(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("--- stderr of node {} ---\n{}\n", n.name, n.run.stderr()))
            .collect()
    }

    /// `opc ARGS --config <the org's config>` with the database URL: exit code, stdout, stderr.
    pub async fn cli(&self, args: &[&str]) -> (Option<i32>, String, String) {
        let mut command = Command::new(opc_binary());
        command
            .args(args)
            .arg("--config")
            .arg(self.org.config_path())
            .env("DATABASE_URL", &self.url)
            .env("NO_COLOR", "1");
        let out = crate::wait::output_of(command, crate::wait::WAIT).await;
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.stderr());
            eprintln!("{}", self.db.dump_blocking());
        }
    }
}

/// Whether process `pid` (a child of this process) has died: gone, or a zombie waiting to be
/// reaped.
fn dead(pid: u32) -> bool {
    match std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat")) {
        // `pid (comm) S …`: the state follows the last `)` (comm may hold spaces and parentheses).
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_none_or(|state| state == "Z" || state == "X"),
        Err(_) => true,
    }
}

/// A root task as the database has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Root {
    /// The root's task id.
    pub id: i64,
    /// What was asked.
    pub input: String,
    /// Its state's name (`COMPLETED` …).
    pub state: String,
    /// The node that ran it (`None` while it waits for a node).
    pub node: Option<String>,
    /// Its answer, once it has one.
    pub output: Option<String>,
}

impl Root {
    /// Whether it has ended, by the engine's own definition of the terminal states.
    pub fn ended(&self) -> bool {
        ended(&self.state)
    }
}

/// Whether the task state named `state` is terminal ([`TaskState::is_terminal`]).
pub fn ended(state: &str) -> bool {
    TaskState::ALL
        .into_iter()
        .find(|s| s.as_str() == state)
        .is_some_and(TaskState::is_terminal)
}

/// One message of a web conversation's transcript, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Said {
    /// `user`, `bot` or `notice`.
    pub author: String,
    /// Its latest text.
    pub text: String,
    /// Whether it is an approval card (a bot message too, but not an answer).
    pub card: bool,
}

/// Reads of the org's database, each on a connection of its own.
#[derive(Clone, Debug)]
pub struct Db {
    url: String,
}

impl Db {
    /// The database at `url`.
    pub fn new(url: &str) -> Db {
        Db {
            url: url.to_string(),
        }
    }

    /// The rows of `sql`, or why not (the server is down, the table is missing …).
    pub async fn try_rows(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, String> {
        let (client, connection) = tokio_postgres::connect(&self.url, tokio_postgres::NoTls)
            .await
            .map_err(|e| format!("cannot reach the test database: {e}"))?;
        let task = tokio::spawn(connection);
        let rows = client
            .query(sql, params)
            .await
            .map_err(|e| format!("{sql}: {e}"));
        drop(client);
        let _ = task.await;
        rows
    }

    /// The rows of `sql`; panics saying why when it cannot be read.
    pub async fn rows(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Vec<tokio_postgres::Row> {
        self.try_rows(sql, params)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Every root task, oldest first.
    pub async fn roots(&self) -> Vec<Root> {
        self.rows(
            "SELECT id, input, state, node, output FROM tasks WHERE parent_id IS NULL ORDER BY id",
            &[],
        )
        .await
        .iter()
        .map(|row| Root {
            id: row.get(0),
            input: row.get(1),
            state: row.get(2),
            node: row.get(3),
            output: row.get(4),
        })
        .collect()
    }

    /// The transcript of web conversation `conversation`, in order.
    pub async fn transcript(&self, conversation: &str) -> Vec<Said> {
        self.rows(
            "SELECT author, text, card IS NOT NULL FROM web_messages WHERE conversation = $1 \
             ORDER BY number",
            &[&conversation],
        )
        .await
        .iter()
        .map(|row| Said {
            author: row.get(0),
            text: row.get(1),
            card: row.get(2),
        })
        .collect()
    }
}

/// What a failing test shows of the database: every task, lease and node, as text rows.
const DUMP: [(&str, &str); 3] = [
    (
        "tasks",
        "SELECT id, parent_id, root_id, agent, state, node, left(coalesce(output, error, ''), 60) \
         FROM tasks ORDER BY id",
    ),
    (
        "tree_leases",
        "SELECT root_id, node, token, expires_ms - (extract(epoch FROM now()) * 1000)::bigint \
         AS expires_in_ms FROM tree_leases ORDER BY root_id",
    ),
    (
        "cluster_nodes",
        "SELECT id, stopped, (extract(epoch FROM now()) * 1000)::bigint - heartbeat_ms \
         AS heartbeat_ago_ms, slots_in_use, slots_total FROM cluster_nodes ORDER BY id",
    ),
];

impl Db {
    /// [`DUMP`] as text, read on a thread of its own (from a drop, during a panic, inside a
    /// runtime), within 10 s; what could not be read says why.
    pub fn dump_blocking(&self) -> String {
        let url = self.url.clone();
        let dump = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("no runtime for the dump: {e}"))?;
            runtime.block_on(async {
                let read = async {
                    let (client, connection) =
                        tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
                    tokio::spawn(connection);
                    let mut out = String::new();
                    for (name, sql) in DUMP {
                        out.push_str(&format!("--- {name} ---\n"));
                        for message in client.simple_query(sql).await? {
                            if let tokio_postgres::SimpleQueryMessage::Row(row) = message {
                                let cells: Vec<&str> = (0..row.len())
                                    .map(|i| row.get(i).unwrap_or("NULL"))
                                    .collect();
                                out.push_str(&cells.join(" | "));
                                out.push('\n');
                            }
                        }
                    }
                    Ok::<String, tokio_postgres::Error>(out)
                };
                match tokio::time::timeout(Duration::from_secs(10), read).await {
                    Ok(Ok(out)) => Ok(out),
                    Ok(Err(e)) => Err(format!("cannot read the database for the dump: {e}")),
                    Err(_) => Err("the database did not answer the dump within 10 s".to_string()),
                }
            })
        })
        .join();
        match dump {
            Ok(Ok(out)) => out,
            Ok(Err(why)) => why,
            Err(_) => "the dump panicked".to_string(),
        }
    }
}

/// Ask `probe` every 50 ms until it returns something, or panic after `limit` naming `what`.
pub async fn poll<T, F, Fut>(limit: Duration, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(found) = probe().await {
            return found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
