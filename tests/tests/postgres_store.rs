//! What only the PostgreSQL backend has to get right: rows tailed in commit order, migrations run by
//! several nodes at once, a server that cannot be reached (named by host, never by password), and
//! one engine per database until the cluster lands. The behaviour both backends share is in
//! `store_conformance`.
//!
//! Without a PostgreSQL server these tests skip with one line (`opc-testgate`, group `postgres`),
//! and fail under CI.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use opc_agents::store::postgres::RecallTail;
use opc_agents::store::{PgStore, Store, StoreError};
use opc_tests::postgres::fresh_database;
use opc_tests::wait::within;

async fn connect(url: &str) -> PgStore {
    PgStore::connect(url, 4).await.unwrap()
}

async fn raw(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
}

const INSERT: &str = "INSERT INTO recall_messages (namespace, author, conversation, time_ms, content_hash, text) \
                      VALUES ('ceo', 'user', 'c', 0, 'h', $1) RETURNING seq";

/// Two transactions draw `seq` 1 and 2 and commit in the other order: a tail never skips the row
/// whose transaction committed last, never returns a row twice, and never returns a row before its
/// commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_rows_are_tailed_in_commit_order_and_none_is_missed() {
    let Some(url) = fresh_database("recall_tail").await else {
        return;
    };
    let store = connect(&url).await;
    let mut tail = RecallTail::from_start();
    let mut reader = store.pool().get().await.unwrap();

    let mut first = raw(&url).await;
    let mut second = raw(&url).await;
    let t1 = first.transaction().await.unwrap();
    let seq1: i64 = t1.query_one(INSERT, &[&"first"]).await.unwrap().get(0);
    let t2 = second.transaction().await.unwrap();
    let seq2: i64 = t2.query_one(INSERT, &[&"second"]).await.unwrap().get(0);
    assert!(seq1 < seq2);
    t2.commit().await.unwrap();

    // The later seq is committed, the earlier is not: nothing may be returned yet that would let the
    // cursor pass seq 1 (the horizon is held by the open transaction).
    let seen = tail.next(&mut reader, 100).await.unwrap();
    assert!(
        seen.iter().all(|m| m.seq != seq1),
        "an uncommitted row was read: {seen:?}"
    );
    let mut texts: Vec<String> = seen.into_iter().map(|m| m.text).collect();

    t1.commit().await.unwrap();
    // Both are final now; a few more rows in small batches, to cross batch edges.
    for i in 0..5 {
        first
            .query_one(INSERT, &[&format!("later {i}")])
            .await
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while texts.len() < 7 && Instant::now() < deadline {
        texts.extend(
            tail.next(&mut reader, 2)
                .await
                .unwrap()
                .into_iter()
                .map(|m| m.text),
        );
    }
    let mut sorted = texts.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), texts.len(), "a row came twice: {texts:?}");
    assert_eq!(texts.len(), 7, "rows missed: {texts:?}");
    assert!(texts.contains(&"first".to_string()), "{texts:?}");
    assert!(texts.contains(&"second".to_string()), "{texts:?}");
    assert!(tail.next(&mut reader, 100).await.unwrap().is_empty());
}

/// Several nodes starting at once against an empty database: one applies the migrations, the
/// others wait for it and apply nothing; all of them work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_starting_together_migrate_once() {
    let Some(url) = fresh_database("migrate_race").await else {
        return;
    };
    let mut starts = Vec::new();
    for _ in 0..4 {
        let url = url.clone();
        starts.push(tokio::spawn(async move { PgStore::connect(&url, 2).await }));
    }
    for start in starts {
        let store = start.await.unwrap().unwrap();
        store.create_conversation("c", "ceo").await.unwrap();
    }
    let client = raw(&url).await;
    let rows = client
        .query(
            "SELECT component, version FROM schema_versions ORDER BY component",
            &[],
        )
        .await
        .unwrap();
    let versions: Vec<(String, i64)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(
        versions,
        vec![
            (
                "agents".to_string(),
                opc_agents::store::postgres::schema::COMPONENT.version()
            ),
            (
                "memory".to_string(),
                opc_memory::schema::postgres::COMPONENT.version()
            )
        ]
    );
}

/// A database written by a newer build is refused, naming the database and how to fix it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_from_a_newer_build_is_refused() {
    let Some(url) = fresh_database("newer_build").await else {
        return;
    };
    drop(connect(&url).await);
    raw(&url)
        .await
        .execute(
            "UPDATE schema_versions SET version = 99 WHERE component = 'agents'",
            &[],
        )
        .await
        .unwrap();
    let err = PgStore::connect(&url, 2).await.err().expect("refused");
    assert!(matches!(err, StoreError::TooNew { found: 99, .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("127.0.0.1:"), "{text}");
}

/// A server that does not answer: the error comes within the deadline, names PostgreSQL and the
/// host, and never the password in the URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_is_named_by_host_and_never_by_password() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://opc:s3cret-Pa55@127.0.0.1:{port}/opc");
    let err = within(
        opc_agents::store::postgres::CONNECT_DEADLINE + Duration::from_secs(5),
        "the connection error",
        PgStore::connect(&url, 2),
    )
    .await
    .err()
    .expect("refused");
    let text = err.to_string();
    assert!(text.contains("PostgreSQL"), "{text}");
    assert!(text.contains(&format!("127.0.0.1:{port}/opc")), "{text}");
    assert!(!text.contains("s3cret"), "the password leaked: {text}");

    // A URL that does not parse is described without repeating it.
    let err = PgStore::connect("postgres://opc:s3cret-Pa55@127.0.0.1:notaport/opc", 2)
        .await
        .err()
        .expect("refused");
    assert!(!err.to_string().contains("s3cret"), "{err}");
}

/// Until several nodes can share a database, one engine claims it: a second is refused, naming the
/// database; the claim ends with its holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_engine_claims_a_database() {
    let Some(url) = fresh_database("claim").await else {
        return;
    };
    let first: Arc<dyn Store> = Arc::new(connect(&url).await);
    first.lock_exclusive().await.unwrap();
    let second = connect(&url).await;
    let err = second.lock_exclusive().await.unwrap_err();
    assert!(matches!(err, StoreError::Claimed { .. }), "{err}");
    drop(first);
    // The holder's connection closes with it; the claim passes (the server notices the close).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match second.lock_exclusive().await {
            Ok(()) => break,
            Err(e) if Instant::now() > deadline => panic!("the claim was not released: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// A server restarted under a blocking connection (the synchronous components' link): calls made
/// while it is down fail at once as unavailable, naming the server and never the password, and the
/// first call after it is back reconnects and works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_connection_reopens_after_the_server_restarts() {
    let Some(server) = opc_testgate::need(
        opc_testgate::Group::Postgres,
        "blocking_reconnect",
        opc_tests::postgres::PgServer::start(),
    ) else {
        return;
    };
    let url = server
        .url("postgres")
        .replace("postgres@", "postgres:not-the-password@");
    let conn = tokio::task::spawn_blocking(move || opc_pg::Blocking::connect(&url, "test"))
        .await
        .unwrap()
        .unwrap();
    let ask = |conn: opc_pg::Blocking| {
        tokio::task::spawn_blocking(move || {
            conn.run("asking", |c| {
                Ok(c.query_one("SELECT 41 + 1", &[])?.get::<_, i32>(0))
            })
        })
    };
    assert_eq!(ask(conn.clone()).await.unwrap().unwrap(), 42);

    server.stop();
    let down = ask(conn.clone()).await.unwrap().unwrap_err();
    assert_eq!(down.fault, opc_pg::Fault::Unavailable, "{down}");
    let text = down.to_string();
    assert!(
        text.contains(&format!("127.0.0.1:{}", server.port())),
        "{text}"
    );
    assert!(!text.contains("not-the-password"), "{text}");

    server.restart().unwrap();
    assert_eq!(ask(conn).await.unwrap().unwrap(), 42);
}
