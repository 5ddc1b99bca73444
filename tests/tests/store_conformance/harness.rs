//! The backends every conformance test runs against, and the fixtures they share.

use std::sync::Arc;

use opc_agents::llm::Message;
use opc_agents::store::{NewTask, PgStore, SqliteStore, Store, TaskId};

/// One backend under test.
pub struct Backend {
    /// `sqlite` or `postgres`, for assertion messages.
    pub name: &'static str,
    /// The store, as the engine holds it.
    pub store: Arc<dyn Store>,
    /// The SQLite file's directory, kept while the test runs.
    _dir: Option<tempfile::TempDir>,
}

/// Every backend available here: SQLite always, PostgreSQL when there is a server (else one line,
/// or a failure under CI).
pub async fn backends(test: &str) -> Vec<Backend> {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::open(&dir.path().join("opc.db")).unwrap();
    let mut all = vec![Backend {
        name: "sqlite",
        store: Arc::new(sqlite),
        _dir: Some(dir),
    }];
    if let Some(url) = opc_tests::postgres::fresh_database(test).await {
        let pg = PgStore::connect(&url, 8)
            .await
            .unwrap_or_else(|e| panic!("{test}: {e}"));
        all.push(Backend {
            name: "postgres",
            store: Arc::new(pg),
            _dir: None,
        });
    }
    all
}

/// Run `body` against every backend; `$name` is the test's name.
#[macro_export]
macro_rules! conformance {
    ($(#[$meta:meta])* async fn $name:ident($b:ident: &Backend) $body:block) => {
        $(#[$meta])*
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            for backend in $crate::store_conformance::harness::backends(stringify!($name)).await {
                let $b: &$crate::store_conformance::harness::Backend = &backend;
                $body
            }
        }
    };
}

/// A new root task in `conversation` for agent `ceo`, with `input`.
pub async fn root(store: &dyn Store, conversation: &str, input: &str) -> TaskId {
    store
        .create_task(&NewTask {
            parent_id: None,
            conversation_id: conversation,
            agent: "ceo",
            depth: 0,
            tool_use_id: None,
            tool_index: 0,
            input,
            messages: &[Message::user(input)],
            author: Some("web:alice"),
            trace: None,
        })
        .await
        .unwrap()
}

/// A child of `parent` for agent `agent`, created by tool call `tool` (index 0).
pub async fn child(
    store: &dyn Store,
    parent: TaskId,
    conversation: &str,
    agent: &str,
    tool: &str,
) -> TaskId {
    store
        .create_task(&NewTask {
            parent_id: Some(parent),
            conversation_id: conversation,
            agent,
            depth: 1,
            tool_use_id: Some(tool),
            tool_index: 0,
            input: "do the part",
            messages: &[],
            author: None,
            trace: None,
        })
        .await
        .unwrap()
}
