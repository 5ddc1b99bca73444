//! Core memory blocks (`opc_memory::blocks`) on both backends: SQLite in a temp dir and PostgreSQL
//! (`framework.memory.storage: postgres`) in a fresh database. The same behaviours run on each —
//! seeding then admin changes, edits and the errors a model acts on, a hot reload's seeding and
//! revocations, a failed apply writing nothing — with the backend's name in every assertion, plus
//! what several nodes sharing one PostgreSQL must get right: edits racing from one version (exactly
//! one wins), nodes seeding one empty database at once (each block seeded once), and stored data
//! this build cannot read (an error, never a panic).
//!
//! Each `open` is a node of its own: its own SQLite connection, or its own PostgreSQL connection
//! (`opc_pg::Blocking`). Without a PostgreSQL server the PostgreSQL half skips with one line
//! (`opc-testgate`), and fails under CI.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::{Arc, Barrier};

use opc_memory::blocks::{
    self, Actor, Block, BlockError, BlockStore, Edit, HistoryEntry, OpenError, SHARED,
};
use opc_tests::postgres::fresh_database;

const BASE: &str = "framework:\n  defaultModel: m\n  providers: { p: { kind: anthropic, models: { m: { input: 1, output: 1 } } } }\n  privacy: { enabled: false }\n  memory: { consolidation: { enabled: false } }\n";

/// The org of the blocks' unit tests: the CEO's persona (limit 30), `a`'s notes and read-only
/// `fixed`, shared `plan` (limit 40) and read-only `rules`.
fn config(persona: &str) -> opc_hierarchy::Loaded {
    let text = format!(
        "{BASE}sharedBlocks:\n  plan: {{ description: the plan, value: 'step 1', limit: 40 }}\n  rules: {{ description: rules, value: be kind, readOnly: true }}\nagents:\n  ceo: {{ role: CEO, children: [a, b], memory: {{ blocks: [{{ label: persona, description: who I am, value: '{persona}', limit: 30 }}] }} }}\n  a: {{ role: A, parent: ceo, memory: {{ blocks: [{{ label: notes, description: n, value: '' }}, {{ label: fixed, description: f, value: x, readOnly: true }}], sharedBlocks: [plan, rules] }} }}\n  b: {{ role: B, parent: ceo, memory: {{ sharedBlocks: [plan] }} }}\n"
    );
    opc_hierarchy::parse("t.yaml", text, None).unwrap_or_else(|e| panic!("{e}"))
}

/// An org with one block: the CEO's persona.
fn solo(persona: &str) -> opc_hierarchy::Loaded {
    let text = format!(
        "{BASE}agents:\n  ceo: {{ role: CEO, memory: {{ blocks: [{{ label: persona, description: who I am, value: '{persona}' }}] }} }}\n"
    );
    opc_hierarchy::parse("t.yaml", text, None).unwrap_or_else(|e| panic!("{e}"))
}

/// The org before and after a reload: `a` shares with `b` and both see `plan`; the reload takes
/// both grants away and adds `c` (with a block) under the CEO; `extra` adds more agents.
fn reload_org(after: bool, extra: &str) -> opc_hierarchy::Loaded {
    let (share, b_shared, c) = if after {
        (
            "",
            "",
            "  c: { role: C, parent: ceo, memory: { blocks: [{ label: cnotes, description: n, value: C-NOTES }] } }\n",
        )
    } else {
        ("shareWith: [b], ", "sharedBlocks: [plan], ", "")
    };
    let children = if after { "[a, b, c]" } else { "[a, b]" };
    let children = if extra.is_empty() {
        children.to_string()
    } else {
        children.replace(']', ", d]")
    };
    let text = format!(
        "{BASE}sharedBlocks:\n  plan: {{ description: the plan, value: PLAN }}\nagents:\n  ceo: {{ role: CEO, children: {children} }}\n  a: {{ role: A, parent: ceo, memory: {{ {share}sharedBlocks: [plan], blocks: [{{ label: notes, description: n, value: A-NOTES }}] }} }}\n  b: {{ role: B, parent: ceo, memory: {{ {b_shared}blocks: [{{ label: bnotes, description: n, value: B }}] }} }}\n{c}{extra}"
    );
    opc_hierarchy::parse("t.yaml", text, None).unwrap_or_else(|e| panic!("{e}"))
}

fn actor(agent: &str) -> Actor<'_> {
    Actor {
        agent,
        task: Some(7),
    }
}

/// One database, on one backend.
enum Db {
    Sqlite {
        _dir: tempfile::TempDir,
        path: PathBuf,
    },
    Postgres {
        url: String,
    },
}

impl Db {
    fn name(&self) -> &'static str {
        match self {
            Db::Sqlite { .. } => "sqlite",
            Db::Postgres { .. } => "postgres",
        }
    }

    /// Open the blocks as a node of their own would (a connection of its own).
    fn try_open(&self, loaded: &opc_hierarchy::Loaded) -> Result<BlockStore, OpenError> {
        let org = Arc::new(loaded.org.clone());
        match self {
            Db::Sqlite { path, .. } => BlockStore::open(path, &loaded.config, org),
            Db::Postgres { url } => {
                BlockStore::open_postgres(self.connect_url(url), &loaded.config, org)
            }
        }
    }

    fn open(&self, loaded: &opc_hierarchy::Loaded) -> BlockStore {
        self.try_open(loaded)
            .unwrap_or_else(|e| panic!("{}: open: {e}", self.name()))
    }

    fn connect_url(&self, url: &str) -> opc_pg::Blocking {
        opc_pg::Blocking::connect(url, "blocks-test")
            .unwrap_or_else(|e| panic!("{}: connect: {e}", self.name()))
    }

    /// Run `sql` on a connection of its own (a trigger, a corruption).
    fn execute(&self, sql: &'static str) {
        match self {
            Db::Sqlite { path, .. } => rusqlite::Connection::open(path)
                .unwrap()
                .execute_batch(sql)
                .unwrap(),
            Db::Postgres { url } => self
                .connect_url(url)
                .run("test setup", move |client| client.batch_execute(sql))
                .unwrap(),
        }
    }

    /// The free functions the admin console uses, on a bare connection.
    fn read_all(&self) -> Vec<Block> {
        match self {
            Db::Sqlite { path, .. } => {
                blocks::read_all(&rusqlite::Connection::open(path).unwrap()).unwrap()
            }
            Db::Postgres { url } => blocks::read_all_postgres(&self.connect_url(url)).unwrap(),
        }
    }

    fn read_history(&self, label: &str, namespace: Option<&str>) -> Vec<HistoryEntry> {
        match self {
            Db::Sqlite { path, .. } => {
                blocks::read_history(&rusqlite::Connection::open(path).unwrap(), label, namespace)
                    .unwrap()
            }
            Db::Postgres { url } => {
                blocks::read_history_postgres(&self.connect_url(url), label, namespace).unwrap()
            }
        }
    }
}

fn sqlite() -> Db {
    let dir = tempfile::tempdir().unwrap();
    Db::Sqlite {
        path: dir.path().join("db"),
        _dir: dir,
    }
}

/// A fresh PostgreSQL database for `test`, if there is a server (a skip line here, a failure
/// under CI).
fn postgres(test: &str) -> Option<Db> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(fresh_database(test))
        .map(|url| Db::Postgres { url })
}

/// SQLite, and PostgreSQL when there is a server.
fn backends(test: &str) -> Vec<Db> {
    let mut out = vec![sqlite()];
    out.extend(postgres(test));
    out
}

fn ops(h: &[HistoryEntry]) -> Vec<(&str, &str, Option<&str>, &str)> {
    h.iter()
        .map(|e| {
            (
                e.operation.as_str(),
                e.author.as_str(),
                e.old_value.as_deref(),
                e.new_value.as_str(),
            )
        })
        .collect()
}

#[test]
fn config_seeds_then_stored_value_wins_then_admin_change_applies() {
    for db in backends("blocks_seed") {
        let name = db.name();
        let store = db.open(&config("I am the CEO"));
        let b = store.read("ceo", "persona").unwrap();
        assert_eq!((b.value.as_str(), b.version), ("I am the CEO", 1), "{name}");
        store
            .edit(
                actor("ceo"),
                "persona",
                &Edit::Write("I like tea".into()),
                Some(1),
            )
            .unwrap();
        drop(store);
        // Restart, same config: the edit stands.
        let store = db.open(&config("I am the CEO"));
        let b = store.read("ceo", "persona").unwrap();
        assert_eq!((b.value.as_str(), b.version), ("I like tea", 2), "{name}");
        drop(store);
        // The admin changes the config value: applied and recorded.
        let store = db.open(&config("I am the boss"));
        let b = store.read("ceo", "persona").unwrap();
        assert_eq!(
            (b.value.as_str(), b.version),
            ("I am the boss", 3),
            "{name}"
        );
        let h = store.history("persona", None).unwrap();
        assert_eq!(
            ops(&h),
            [
                ("seed", "config", None, "I am the CEO"),
                ("write", "ceo", Some("I am the CEO"), "I like tea"),
                ("config", "admin", Some("I like tea"), "I am the boss"),
            ],
            "{name}"
        );
        assert_eq!(h[1].task, Some(7), "{name}");
        assert_eq!(
            h.iter().map(|e| e.version).collect::<Vec<_>>(),
            [1, 2, 3],
            "{name}"
        );
        // The bare-connection readers (`opc memory show` / `history`) see the same.
        assert_eq!(db.read_history("persona", Some("agent/ceo")), h, "{name}");
        assert!(
            db.read_history("persona", Some(SHARED)).is_empty(),
            "{name}"
        );
        let all = db.read_all();
        assert_eq!(all, store.all().unwrap(), "{name}");
        let keys: Vec<(&str, &str)> = all
            .iter()
            .map(|b| (b.namespace.as_str(), b.label.as_str()))
            .collect();
        assert_eq!(
            keys,
            [
                ("agent/a", "fixed"),
                ("agent/a", "notes"),
                ("agent/ceo", "persona"),
                ("shared", "plan"),
                ("shared", "rules"),
            ],
            "{name}"
        );
        let rules = all.iter().find(|b| b.label == "rules").unwrap();
        assert!(rules.read_only && rules.is_shared(), "{name}: {rules:?}");
        assert_eq!(
            all.iter().find(|b| b.label == "plan").unwrap().limit,
            40,
            "{name}"
        );
    }
}

#[test]
fn edits_and_the_errors_a_model_can_act_on() {
    for db in backends("blocks_edits") {
        let name = db.name();
        let store = db.open(&config("aa bb aa"));
        // insert appends lines, or inserts before a line
        for text in ["one", "three"] {
            store
                .edit(
                    actor("a"),
                    "notes",
                    &Edit::Insert {
                        text: text.into(),
                        line: None,
                    },
                    None,
                )
                .unwrap();
        }
        let b = store
            .edit(
                actor("a"),
                "notes",
                &Edit::Insert {
                    text: "two".into(),
                    line: Some(1),
                },
                Some(3),
            )
            .unwrap();
        assert_eq!(
            (b.value.as_str(), b.version),
            ("one\ntwo\nthree", 4),
            "{name}"
        );
        let b = store
            .edit(
                actor("a"),
                "notes",
                &Edit::Replace {
                    old: "two".into(),
                    new: "2".into(),
                },
                Some(4),
            )
            .unwrap();
        assert_eq!(b.value, "one\n2\nthree", "{name}");
        let err = store
            .edit(
                actor("a"),
                "notes",
                &Edit::Insert {
                    text: "x".into(),
                    line: Some(9),
                },
                None,
            )
            .unwrap_err();
        assert!(
            matches!(err, BlockError::LineOutOfRange { lines: 3, .. }),
            "{name}: {err}"
        );
        // a stale version is refused with the current value, and changes nothing
        let err = store
            .edit(actor("a"), "notes", &Edit::Write("w".into()), Some(2))
            .unwrap_err();
        assert!(
            matches!(&err, BlockError::Stale { read: 2, current: 5, value, .. } if value == "one\n2\nthree"),
            "{name}: {err}"
        );
        // ambiguous and missing `old` carry the value
        let err = store
            .edit(
                actor("ceo"),
                "persona",
                &Edit::Replace {
                    old: "aa".into(),
                    new: "c".into(),
                },
                None,
            )
            .unwrap_err();
        assert!(
            matches!(&err, BlockError::Ambiguous { count: 2, value, .. } if value == "aa bb aa"),
            "{name}: {err}"
        );
        let err = store
            .edit(
                actor("ceo"),
                "persona",
                &Edit::Replace {
                    old: "zz".into(),
                    new: "c".into(),
                },
                None,
            )
            .unwrap_err();
        assert!(err.to_string().contains("aa bb aa"), "{name}: {err}");
        let err = store
            .edit(
                actor("ceo"),
                "persona",
                &Edit::Replace {
                    old: String::new(),
                    new: "c".into(),
                },
                None,
            )
            .unwrap_err();
        assert!(matches!(err, BlockError::EmptyOld { .. }), "{name}: {err}");
        // limit overrun carries the sizes, and changes nothing
        let err = store
            .edit(actor("ceo"), "persona", &Edit::Write("x".repeat(31)), None)
            .unwrap_err();
        assert!(
            matches!(
                err,
                BlockError::OverLimit {
                    limit: 30,
                    new_size: 31,
                    current_size: 8,
                    ..
                }
            ),
            "{name}: {err}"
        );
        assert_eq!(store.read("ceo", "persona").unwrap().version, 1, "{name}");
        // read-only, own and shared
        let err = store
            .edit(actor("a"), "fixed", &Edit::Write("y".into()), None)
            .unwrap_err();
        assert!(matches!(err, BlockError::ReadOnly { .. }), "{name}: {err}");
        let err = store
            .edit(actor("a"), "rules", &Edit::Write("y".into()), None)
            .unwrap_err();
        assert!(
            matches!(&err, BlockError::ReadOnly { value, .. } if value == "be kind"),
            "{name}: {err}"
        );
        // missing label lists what exists
        let err = store.read("a", "nope").unwrap_err();
        assert!(
            err.to_string().contains("notes, fixed, plan, rules"),
            "{name}: {err}"
        );
        // b does not see `rules`, and cannot edit a's blocks
        assert!(
            matches!(
                store.read("b", "rules").unwrap_err(),
                BlockError::NotFound { .. }
            ),
            "{name}"
        );
        assert!(
            matches!(
                store
                    .edit(actor("b"), "notes", &Edit::Write("z".into()), None)
                    .unwrap_err(),
                BlockError::NotFound { .. }
            ),
            "{name}"
        );
        // ACL: the manager reads a's block; a cannot read the manager's; a sibling without shareWith cannot
        assert_eq!(
            store.read_of("ceo", "a", "notes").unwrap().value,
            "one\n2\nthree",
            "{name}"
        );
        assert!(
            matches!(
                store.read_of("a", "ceo", "persona").unwrap_err(),
                BlockError::Denied(_)
            ),
            "{name}"
        );
        assert!(
            matches!(
                store.read_of("b", "a", "notes").unwrap_err(),
                BlockError::Denied(_)
            ),
            "{name}"
        );
        let err = store.read_of("ceo", "a", "nope").unwrap_err();
        assert!(
            matches!(&err, BlockError::NotFound { owner: Some(o), available, .. } if o == "a" && available == &["notes", "fixed"]),
            "{name}: {err}"
        );
        // prompt order: own, then shared
        let labels: Vec<String> = store
            .blocks_of("a")
            .unwrap()
            .into_iter()
            .map(|b| b.label)
            .collect();
        assert_eq!(labels, ["notes", "fixed", "plan", "rules"], "{name}");
        // every successful edit is in the history, with its author and task; the failed ones are not
        let h = store.history("notes", Some("agent/a")).unwrap();
        assert_eq!(
            h.iter()
                .map(|e| (e.operation.as_str(), e.version))
                .collect::<Vec<_>>(),
            [
                ("seed", 1),
                ("insert", 2),
                ("insert", 3),
                ("insert", 4),
                ("replace", 5)
            ],
            "{name}"
        );
        assert!(
            h[1..].iter().all(|e| e.author == "a" && e.task == Some(7)),
            "{name}: {h:?}"
        );
        // edit_by records the author apart from the actor whose permissions apply
        let b = store
            .edit_by(
                actor("a"),
                "consolidation",
                "notes",
                &Edit::Write("tidy".into()),
                Some(5),
            )
            .unwrap();
        assert_eq!((b.value.as_str(), b.version), ("tidy", 6), "{name}");
        let h = store.history("notes", None).unwrap();
        assert_eq!(h.last().unwrap().author, "consolidation", "{name}");
    }
}

/// Several nodes (each its own connection) edit one shared block at the same time, all having read
/// the same version: exactly one wins; every other gets a stale error carrying the winner's value,
/// and the history holds exactly one edit per round. Several rounds, so that an edit that does not
/// hold the block while it checks is caught (a round's edits may happen not to overlap).
#[test]
fn concurrent_edits_from_one_version_one_wins_the_others_are_told() {
    const NODES: usize = 6;
    const ROUNDS: u64 = 4;
    for db in backends("blocks_race") {
        let name = db.name();
        let nodes: Vec<BlockStore> = (0..NODES).map(|_| db.open(&config("p"))).collect();
        for read in 1..=ROUNDS {
            assert_eq!(nodes[0].read("a", "plan").unwrap().version, read, "{name}");
            let barrier = Arc::new(Barrier::new(NODES));
            let threads: Vec<_> = nodes
                .iter()
                .enumerate()
                .map(|(i, store)| {
                    let (store, barrier) = (store.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        let agent = if i % 2 == 0 { "a" } else { "b" };
                        barrier.wait();
                        store.edit(
                            Actor { agent, task: None },
                            "plan",
                            &Edit::Write(format!("round {read}: plan by node {i}")),
                            Some(read),
                        )
                    })
                })
                .collect();
            let results: Vec<Result<Block, BlockError>> =
                threads.into_iter().map(|t| t.join().unwrap()).collect();
            let winners: Vec<&Block> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
            assert_eq!(
                winners.len(),
                1,
                "{name}: round {read}: exactly one edit wins: {results:?}"
            );
            let won = winners[0].value.clone();
            for stale in results.iter().filter_map(|r| r.as_ref().err()) {
                match stale {
                    BlockError::Stale {
                        read: r,
                        current,
                        value,
                        ..
                    } if *r == read && *current == read + 1 => {
                        assert_eq!(*value, won, "{name}")
                    }
                    other => panic!("{name}: expected a stale error, got {other}"),
                }
            }
            // Every node reads the winner's value.
            for store in &nodes {
                let b = store.read("b", "plan").unwrap();
                assert_eq!(
                    (b.value.as_str(), b.version),
                    (won.as_str(), read + 1),
                    "{name}"
                );
            }
        }
        // The history records exactly one edit per round after the seed.
        let h = nodes[0].history("plan", Some(SHARED)).unwrap();
        assert_eq!(
            h.iter().map(|e| e.version).collect::<Vec<_>>(),
            (1..=ROUNDS + 1).collect::<Vec<_>>(),
            "{name}: {h:?}"
        );
    }
}

/// A reload builds a store with the new config's views and ACL; applying it seeds the added
/// agent's block (so it uses it and its manager reads it) and revokes what the new config no
/// longer grants for every store — also the one a tree in flight still holds.
#[test]
fn a_reload_seeds_added_agents_and_revokes_for_trees_in_flight_too() {
    for db in backends("blocks_reload") {
        let name = db.name();
        let before = reload_org(false, "");
        let old = db.open(&before);
        assert_eq!(
            old.read_of("b", "a", "notes").unwrap().value,
            "A-NOTES",
            "{name}"
        );
        assert_eq!(old.read("b", "plan").unwrap().value, "PLAN", "{name}");
        assert_eq!(old.readable("b"), ["b", "a"], "{name}");

        let after = reload_org(true, "");
        let new = old.for_config(&after.config, Arc::new(after.org.clone()));
        // Built, not applied: nothing is seeded and the old permissions still hold for the old store.
        assert!(
            matches!(
                new.read("c", "cnotes").unwrap_err(),
                BlockError::NotFound { .. }
            ),
            "{name}"
        );
        assert_eq!(
            old.read_of("b", "a", "notes").unwrap().value,
            "A-NOTES",
            "{name}"
        );
        assert!(
            matches!(
                new.read_of("b", "a", "notes").unwrap_err(),
                BlockError::Denied(_)
            ),
            "{name}"
        );

        new.apply().unwrap();
        // The added agent uses its own block; its manager reads it; the seed is in the history.
        assert_eq!(new.read("c", "cnotes").unwrap().value, "C-NOTES", "{name}");
        assert_eq!(
            new.read_of("ceo", "c", "cnotes").unwrap().value,
            "C-NOTES",
            "{name}"
        );
        assert!(new.readable("ceo").contains(&"c".to_string()), "{name}");
        assert_eq!(new.namespace_of("c", "cnotes").as_deref(), Some("agent/c"));
        let seeded = new.history("cnotes", Some("agent/c")).unwrap();
        assert_eq!(
            (seeded.len(), seeded[0].operation.as_str()),
            (1, "seed"),
            "{name}"
        );
        // Applying again (a second node's reload) seeds nothing twice.
        new.apply().unwrap();
        assert_eq!(new.history("cnotes", None).unwrap().len(), 1, "{name}");
        // Revoked everywhere: the new store and the store a tree started before the reload holds.
        for store in [&new, &old] {
            let err = store.read_of("b", "a", "notes").unwrap_err();
            assert!(
                matches!(&err, BlockError::Denied(e) if e.reason.contains("shareWith")),
                "{name}: {err}"
            );
            assert_eq!(store.readable("b"), ["b"], "{name}");
        }
        // `b` no longer references `plan`: the old store refuses it and leaves it out of the prompt.
        assert!(
            matches!(old.read("b", "plan").unwrap_err(), BlockError::Denied(_)),
            "{name}"
        );
        let labels: Vec<String> = old
            .blocks_of("b")
            .unwrap()
            .into_iter()
            .map(|b| b.label)
            .collect();
        assert_eq!(labels, ["bnotes"], "{name}");
        // What stays: own blocks, the manager's reads, and `a`'s shared block.
        assert_eq!(old.read("a", "notes").unwrap().value, "A-NOTES", "{name}");
        assert_eq!(
            old.read_of("ceo", "a", "notes").unwrap().value,
            "A-NOTES",
            "{name}"
        );
        assert_eq!(old.read("a", "plan").unwrap().value, "PLAN", "{name}");
        // The old store's tree never knew `c`: it does not grant reading it.
        assert!(old.read_of("ceo", "c", "cnotes").is_err(), "{name}");
    }
}

/// Seeding is one transaction: when one block of the reload cannot be written, no block of it
/// is, and the permissions in force stay the old ones.
#[test]
fn a_failed_apply_writes_nothing_and_keeps_the_old_permissions() {
    for db in backends("blocks_failed_apply") {
        let name = db.name();
        let before = reload_org(false, "");
        let old = db.open(&before);
        // The disk refuses the block labelled `boom` (a trigger stands in for a full disk).
        db.execute(match db {
            Db::Sqlite { .. } => {
                "CREATE TRIGGER refuse BEFORE INSERT ON memory_blocks WHEN NEW.label = 'boom' \
                 BEGIN SELECT RAISE(ABORT, 'disk full'); END;"
            }
            Db::Postgres { .. } => {
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ \
                 BEGIN IF NEW.label = 'boom' THEN RAISE EXCEPTION 'disk full'; END IF; RETURN NEW; END $$; \
                 CREATE TRIGGER refuse BEFORE INSERT ON memory_blocks \
                 FOR EACH ROW EXECUTE FUNCTION refuse();"
            }
        });
        let after = reload_org(
            true,
            "  d: { role: D, parent: ceo, memory: { blocks: [{ label: boom, description: n, value: x }] } }\n",
        );
        let new = old.for_config(&after.config, Arc::new(after.org.clone()));
        let err = new.apply().unwrap_err();
        assert!(err.to_string().contains("disk full"), "{name}: {err}");
        let labels: Vec<String> = old.all().unwrap().into_iter().map(|b| b.label).collect();
        assert!(
            !labels.iter().any(|l| l == "cnotes" || l == "boom"),
            "{name}: {labels:?}"
        );
        assert!(new.history("cnotes", None).unwrap().is_empty(), "{name}");
        assert_eq!(
            old.read_of("b", "a", "notes").unwrap().value,
            "A-NOTES",
            "{name}"
        );
        assert_eq!(old.readable("b"), ["b", "a"], "{name}");
        // A node starting with that config fails the same way, and writes nothing either.
        let err = db.try_open(&after).err().unwrap();
        assert!(err.to_string().contains("disk full"), "{name}: {err}");
        assert_eq!(old.all().unwrap().len(), labels.len(), "{name}");
    }
}

/// Nodes starting at once on an empty PostgreSQL database: every one opens (the migrations run
/// once, the seeding of one block waits for another's), each block is seeded once; then nodes
/// starting at once with an admin's new value apply it once. Run on the unit tests' org, and on
/// one whose changed block is the first a seeding locks (in the other, the row locks of the blocks
/// before it would serialise the nodes anyway, hiding a seeding that does not lock what it checks).
#[test]
fn nodes_seeding_one_empty_database_at_once_seed_each_block_once() {
    let Some(db) = postgres("blocks_seed_race") else {
        return;
    };
    let db = Arc::new(db);
    open_at_once(&db, config, "first");
    for label in ["persona", "notes", "fixed", "plan", "rules"] {
        let h = db.read_history(label, None);
        assert_eq!(
            ops(&h).iter().map(|o| o.0).collect::<Vec<_>>(),
            ["seed"],
            "postgres: {label}: {h:?}"
        );
    }
    assert_eq!(db.read_all().len(), 5, "postgres");
    open_at_once(&db, config, "second");
    let h = db.read_history("persona", None);
    assert_eq!(
        ops(&h),
        [
            ("seed", "config", None, "first"),
            ("config", "admin", Some("first"), "second"),
        ],
        "postgres: {h:?}"
    );
    let persona = db.read_all().into_iter().find(|b| b.label == "persona");
    assert_eq!(
        persona.map(|b| (b.value, b.version)),
        Some(("second".to_string(), 2)),
        "postgres"
    );

    // The org whose one block is the first (and only) one seeding locks.
    let Some(db) = postgres("blocks_seed_race_solo") else {
        return;
    };
    let db = Arc::new(db);
    for persona in ["one", "two", "three"] {
        open_at_once(&db, solo, persona);
    }
    let h = db.read_history("persona", None);
    assert_eq!(
        ops(&h),
        [
            ("seed", "config", None, "one"),
            ("config", "admin", Some("one"), "two"),
            ("config", "admin", Some("two"), "three"),
        ],
        "postgres: {h:?}"
    );
}

/// Several nodes open `db` with `config(persona)` at once; every one must open.
fn open_at_once(db: &Arc<Db>, config: fn(&str) -> opc_hierarchy::Loaded, persona: &'static str) {
    const NODES: usize = 4;
    let barrier = Arc::new(Barrier::new(NODES));
    let threads: Vec<_> = (0..NODES)
        .map(|_| {
            let (db, barrier) = (db.clone(), barrier.clone());
            std::thread::spawn(move || {
                let loaded = config(persona);
                barrier.wait();
                db.try_open(&loaded).map(|_| ())
            })
        })
        .collect();
    for t in threads {
        t.join()
            .unwrap()
            .unwrap_or_else(|e| panic!("{}: a node failed to open: {e}", db.name()));
    }
}

/// What PostgreSQL holds but this build cannot read as its types (a limit beyond `u32`, a negative
/// version) is an error naming the server, never a panic, and never the URL.
#[test]
fn stored_values_out_of_range_are_errors_on_postgres() {
    let Some(db) = postgres("blocks_corrupt") else {
        return;
    };
    let store = db.open(&config("p"));
    db.execute("UPDATE memory_blocks SET char_limit = 5000000000 WHERE label = 'persona'");
    let err = store.read("ceo", "persona").unwrap_err();
    let BlockError::Postgres(e) = &err else {
        panic!("postgres: expected a storage error, got {err}");
    };
    assert_eq!(e.fault, opc_pg::Fault::Corrupt, "postgres: {err}");
    assert!(err.to_string().contains("5000000000"), "postgres: {err}");
    assert!(!err.to_string().contains("postgres://"), "postgres: {err}");
    db.execute("UPDATE memory_blocks SET version = -1 WHERE label = 'notes'");
    let err = store
        .edit(actor("a"), "notes", &Edit::Write("x".into()), None)
        .unwrap_err();
    assert!(
        matches!(&err, BlockError::Postgres(e) if e.fault == opc_pg::Fault::Corrupt),
        "postgres: {err}"
    );
    assert!(store.all().is_err(), "postgres");
}
