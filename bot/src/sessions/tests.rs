//! The sessions store on both backends (SQLite in a temporary directory, PostgreSQL in a fresh
//! database from `opc_tests::postgres`, skipped with one line where there is no server, a failure
//! under CI), driven through the listener's [`Access`] with a given clock: a session is valid until
//! its expiry and no longer, is purged, survives a reopening of the store (a restart), keeps its
//! role, and is refused once its token is no longer configured.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use opc_adapters::session::{Access, Role, SignIn, Via};

use super::*;

enum Db {
    Sqlite(tempfile::TempDir),
    Postgres(String),
}

impl Db {
    fn name(&self) -> &'static str {
        match self {
            Db::Sqlite(_) => "sqlite",
            Db::Postgres(_) => "postgres",
        }
    }

    /// A new connection, as a restarted `opc run` opens.
    fn open(&self) -> Arc<Sessions> {
        Arc::new(match self {
            Db::Sqlite(dir) => Sessions::open(&dir.path().join("opc.db")).unwrap(),
            Db::Postgres(url) => {
                Sessions::open_postgres(opc_pg::Blocking::connect(url, "sessions-test").unwrap())
                    .unwrap()
            }
        })
    }
}

fn databases(test: &str) -> Vec<Db> {
    let mut dbs = vec![Db::Sqlite(tempfile::tempdir().unwrap())];
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    if let Some(url) = runtime.block_on(opc_tests::postgres::fresh_database(test)) {
        dbs.push(Db::Postgres(url));
    }
    dbs
}

/// The listener's credentials over `store`.
fn access(store: Arc<Sessions>, admin: &str, viewer: Option<&str>) -> Access {
    Access::new(Some(admin), viewer).with_sign_in(SignIn {
        store,
        limit: Arc::new(Attempts::new()),
        secure: false,
        title: "test".into(),
    })
}

const NOW: i64 = 1_700_000_000_000;

#[test]
fn a_session_lasts_until_its_expiry_across_a_restart_and_is_purged() {
    for db in databases("sessions_expiry") {
        let name = db.name();
        let store = db.open();
        let first = access(store.clone(), "admin-token", Some("viewer-token"));
        let (id, caller) = first.start(Role::Admin, NOW).unwrap();
        let expires = caller.expires_at.unwrap();
        assert_eq!(expires - NOW, 7 * 24 * 3600 * 1000, "{name}");
        let found = first.session(&id, NOW + 1).unwrap().unwrap();
        assert_eq!(
            (found.role, found.via),
            (Role::Admin, Via::Session),
            "{name}"
        );
        // The store holds a digest: the id itself is no key.
        assert!(store.find(id.as_bytes()).unwrap().is_none(), "{name}");

        // A restart: a new connection and new credentials with the same tokens.
        let again = access(db.open(), "admin-token", Some("viewer-token"));
        assert!(again.session(&id, NOW + 2).unwrap().is_some(), "{name}");

        // At its expiry it is refused, and gone.
        assert!(again.session(&id, expires).unwrap().is_none(), "{name}");
        assert!(
            again.session(&id, NOW + 3).unwrap().is_none(),
            "{name}: deleted when seen expired"
        );

        // Expired sessions are purged when a new one starts.
        let (old, _) = again.start(Role::Viewer, NOW).unwrap();
        let later = expires + 10;
        let (_new, _) = again.start(Role::Admin, later).unwrap();
        assert!(
            again.session(&old, NOW + 4).unwrap().is_none(),
            "{name}: purged"
        );
        assert_eq!(
            store.purge(later).unwrap(),
            0,
            "{name}: nothing left to purge"
        );
    }
}

#[test]
fn a_session_keeps_its_role_and_dies_with_its_token() {
    for db in databases("sessions_tokens") {
        let name = db.name();
        let store = db.open();
        let before = access(store.clone(), "admin-1", Some("viewer-1"));
        let (viewer, _) = before.start(Role::Viewer, NOW).unwrap();
        let (admin, _) = before.start(Role::Admin, NOW).unwrap();
        assert_eq!(
            before.session(&viewer, NOW + 1).unwrap().unwrap().role,
            Role::Viewer,
            "{name}"
        );
        // The viewer token changed at a restart: the viewer's session is refused, the admin's kept.
        let after = access(store.clone(), "admin-1", Some("viewer-2"));
        assert!(after.session(&viewer, NOW + 2).unwrap().is_none(), "{name}");
        assert_eq!(
            after.session(&admin, NOW + 2).unwrap().unwrap().role,
            Role::Admin,
            "{name}"
        );
        // No viewer token at all: no viewer session can start.
        assert!(
            access(store.clone(), "admin-1", None)
                .start(Role::Viewer, NOW)
                .is_err()
        );
        // The access token changed: the admin's session goes too.
        let rotated = access(store.clone(), "admin-2", Some("viewer-2"));
        assert!(
            rotated.session(&admin, NOW + 3).unwrap().is_none(),
            "{name}"
        );
        // An id that is not one of ours, or unknown, is no session.
        assert!(rotated.session("not-hex", NOW).unwrap().is_none(), "{name}");
        assert!(
            rotated.session(&"ab".repeat(32), NOW).unwrap().is_none(),
            "{name}"
        );
    }
}

#[test]
fn sign_in_attempts_are_limited_per_peer() {
    let attempts = Attempts::new();
    let guesser: IpAddr = "203.0.113.7".parse().unwrap();
    for _ in 0..ATTEMPTS_BURST {
        assert!(attempts.attempt(guesser).is_ok());
    }
    let wait = attempts.attempt(guesser).unwrap_err();
    assert!(wait > Duration::ZERO && wait <= ATTEMPT_EVERY, "{wait:?}");
    // Another peer is not held up by the first.
    assert!(attempts.attempt("203.0.113.8".parse().unwrap()).is_ok());
}

#[test]
fn hex_round_trips() {
    let bytes = [0u8, 1, 0xab, 0xff];
    assert_eq!(to_hex(&bytes), "0001abff");
    assert_eq!(from_hex("0001ABff").unwrap(), bytes);
    assert!(from_hex("abc").is_none() && from_hex("zz").is_none());
}
