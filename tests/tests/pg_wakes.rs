//! Cross-node wake-ups on PostgreSQL (`WakeListener`, the listener every cluster node runs): a
//! `NOTIFY opc_cluster` from any connection arrives as a `Wake`; a payload this build does not know
//! is skipped; when the server restarts, the listener says so with a `Tick`, reconnects, says so
//! with another `Tick` once it listens again, and delivers again; dropped, it closes its
//! connection and its channel.
//!
//! The ticker runs every hour here, so every `Tick` after the first is one the connection sent.
//!
//! Without a PostgreSQL server these tests skip with one line (`opc-testgate`, group `postgres`),
//! and fail under CI.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use opc_agents::store::Wake;
use opc_agents::store::postgres::WakeListener;
use opc_tests::postgres::{PgServer, fresh_database};
use opc_tests::wait::{Deadline, WAIT, next_event, within};
use tokio::sync::broadcast;

/// The ticker's interval: long enough that no tick of its own falls inside a test (its first comes
/// at once, at start).
const NO_TICKS: Duration = Duration::from_secs(3600);

/// A plain client on `url` (its connection driven by a task of its own).
async fn client(url: &str) -> tokio_postgres::Client {
    let (client, connection) = within(
        WAIT,
        "a connection to the test server",
        tokio_postgres::connect(url, tokio_postgres::NoTls),
    )
    .await
    .unwrap();
    tokio::spawn(connection);
    client
}

/// Notify `payload` on the cluster's channel.
async fn notify(client: &tokio_postgres::Client, payload: &str) {
    client
        .execute("SELECT pg_notify('opc_cluster', $1)", &[&payload])
        .await
        .unwrap();
}

/// Notify `ended:7` until it arrives as `RootEnded(7)` (the listener connects in the background,
/// so the first notifications may come before it listens).
async fn until_delivered(client: &tokio_postgres::Client, wakes: &mut broadcast::Receiver<Wake>) {
    let deadline = Deadline::after(WAIT, "a NOTIFY to arrive as a wake-up");
    loop {
        notify(client, "ended:7").await;
        let arrived = deadline
            .run(async {
                let round = tokio::time::sleep(Duration::from_millis(200));
                tokio::pin!(round);
                loop {
                    tokio::select! {
                        _ = &mut round => return false,
                        wake = wakes.recv() => match wake {
                            Ok(Wake::RootEnded(7)) => return true,
                            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                            Err(broadcast::error::RecvError::Closed) => panic!("the listener stopped"),
                        },
                    }
                }
            })
            .await;
        if arrived {
            return;
        }
    }
}

/// Everything already received (so the next `recv` is about what happens next).
fn drain(wakes: &mut broadcast::Receiver<Wake>) {
    while !matches!(
        wakes.try_recv(),
        Err(broadcast::error::TryRecvError::Empty | broadcast::error::TryRecvError::Closed)
    ) {}
}

/// The next wake-up, whatever it is.
async fn next(wakes: &mut broadcast::Receiver<Wake>, what: &str) -> Wake {
    next_event(wakes, WAIT, what, Some).await
}

/// A notification arrives as its wake-up; the server restarts: a `Tick` when the connection is
/// lost, another once the listener listens again, and a notification sent after that second tick
/// is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_delivers_and_survives_a_server_restart() {
    let Some(server) = opc_testgate::need(
        opc_testgate::Group::Postgres,
        "pg_wakes_restart",
        PgServer::start(),
    ) else {
        return;
    };
    let url = server.url("postgres");
    let listener = WakeListener::start(&url, NO_TICKS).unwrap();
    let mut wakes = listener.subscribe();
    let sender = client(&url).await;
    until_delivered(&sender, &mut wakes).await;
    notify(&sender, "work").await;
    notify(&sender, "approval:12").await;
    notify(&sender, "cancelled:3").await;
    let mut got = Vec::new();
    while got.len() < 3 {
        match next(&mut wakes, "the three notifications").await {
            Wake::RootEnded(7) | Wake::Tick => {}
            other => got.push(other),
        }
    }
    assert_eq!(
        got,
        [Wake::Work, Wake::Approval(12), Wake::Cancelled(3)],
        "delivered in the order notified"
    );
    drop(sender);
    drain(&mut wakes);

    tokio::task::block_in_place(|| server.stop());
    assert_eq!(
        next(&mut wakes, "a tick when the connection is lost").await,
        Wake::Tick
    );
    tokio::task::block_in_place(|| server.restart()).unwrap();
    assert_eq!(
        next(&mut wakes, "a tick once listening again").await,
        Wake::Tick
    );
    // Listening already: one notification is enough.
    let sender = client(&url).await;
    notify(&sender, "ended:7").await;
    assert_eq!(
        next(&mut wakes, "the notification after the restart").await,
        Wake::RootEnded(7)
    );
}

/// A payload this build does not know (a newer node's) is skipped, and the listener goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_payload_is_skipped() {
    let Some(url) = fresh_database("pg_wakes_unknown").await else {
        return;
    };
    let listener = WakeListener::start(&url, NO_TICKS).unwrap();
    let mut wakes = listener.subscribe();
    let sender = client(&url).await;
    until_delivered(&sender, &mut wakes).await;
    for payload in ["moved:7", "ended:x", "", "work"] {
        notify(&sender, payload).await;
    }
    // Skipping ticks and the `ended:7`s sent before the unknown ones (delivered in order).
    let after = next_event(
        &mut wakes,
        WAIT,
        "the wake-up after the unknown ones",
        |w| (!matches!(w, Wake::Tick | Wake::RootEnded(7))).then_some(w),
    )
    .await;
    assert_eq!(after, Wake::Work);
}

/// Dropping the listener closes its connection (the server no longer has a session listening on
/// the database) and its channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_listener_closes_its_connection() {
    let Some(url) = fresh_database("pg_wakes_drop").await else {
        return;
    };
    let listener = WakeListener::start(&url, NO_TICKS).unwrap();
    let mut wakes = listener.subscribe();
    let watcher = client(&url).await;
    until_delivered(&watcher, &mut wakes).await;
    let listening = || async {
        let row = watcher
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND application_name = 'opc-wakes'",
                &[],
            )
            .await
            .unwrap();
        row.get::<_, i64>(0)
    };
    assert_eq!(listening().await, 1);
    drop(listener);
    within(WAIT, "the channel to close", async {
        loop {
            if let Err(broadcast::error::RecvError::Closed) = wakes.recv().await {
                return;
            }
        }
    })
    .await;
    within(WAIT, "the listening session to end", async {
        while listening().await != 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}
