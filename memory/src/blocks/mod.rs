//! Core memory blocks: small labelled texts that are always in an agent's system prompt, and that the
//! agent edits itself through the memory tools.
//!
//! Where a block comes from: `agents.<id>.memory.blocks` (namespace `agent/<id>`) and the top-level
//! `sharedBlocks` (namespace `shared`, visible to the agents that reference them). The config value
//! seeds a block on first start; after that the stored value is the truth, because agents edit it. An
//! admin who changes the value in the config means it: on the next start that value is applied and
//! recorded in the history (author `admin`). Description, limit and readOnly always follow the config.
//!
//! Storage: SQLite (memory's own connection to the engine's file, WAL, busy timeout 5 s — never the
//! engine store's) or PostgreSQL (`framework.memory.storage: postgres`, an [`opc_pg::Blocking`]
//! connection, possibly shared by several nodes). This file holds the rules, written once; the SQL
//! is in [`sqlite`] and [`postgres`], one file per backend, each using this file's items (never each
//! other's).
//!
//! Invariants:
//! - every read and edit goes through the [`Acl`] before storage is touched;
//! - every edit is one transaction that checks the version, writes the value and appends a history
//!   row (who, task, when, old → new) — so an edit and its record never diverge. The transaction
//!   holds the block against other writers while it checks: SQLite's `BEGIN IMMEDIATE` (the whole
//!   file), PostgreSQL's `SELECT … FOR UPDATE` (the block's row), so two nodes editing from one
//!   version cannot both succeed;
//! - optimistic concurrency: an edit names the version it read; a stale edit fails with the current
//!   value and version ([`BlockError::Stale`]), so a lost update is impossible (the writer learns
//!   about the other edit and can redo its own on top of it);
//! - a value never exceeds its block's limit (in characters) through an edit;
//! - seeding a config is one transaction, and nodes seeding at once seed each block once (one `seed`
//!   history row) and apply an admin's change once;
//! - errors carry what the model needs to fix its call: the current size, value or version.
//!
//! A hot reload ([`BlockStore::for_config`], then [`BlockStore::apply`]): the store is built per config,
//! like the engine's runtime — its views (which blocks an agent sees) and its ACL are those of the
//! config it was built for, so a tree started after a reload sees the new org (an agent the reload
//! added uses its own blocks, its manager reads them), and a tree in flight keeps the org it started
//! with. Grants follow the tree; **revocations do not wait for it**: every store built from one
//! [`BlockStore::open`] (or [`BlockStore::open_postgres`]) shares the newest applied ACL, and a read
//! by another agent, or of a shared block, must be allowed by the store's own ACL *and* by the newest
//! one. Why: a reload that removes a `shareWith` or a `sharedBlocks` reference is how an operator
//! closes a leak, and a long tree (one suspended on an approval for a day) must not keep reading what
//! was taken away. An agent's own blocks stay its own while its tree runs, even when the reload
//! removed the agent, so its task finishes as it began (nobody else can reach them through the newest
//! ACL).
//!
//! [`BlockStore::apply`] is the reload's commit: the new config's blocks are seeded (and admin changes
//! applied) in one transaction, and only once it has committed does the config's ACL become the
//! newest. When it fails, nothing was written and the previous ACL stays in force.

mod postgres;
mod sqlite;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

use opc_hierarchy::{Config, OrgTree};
use rusqlite::Connection;

use crate::acl::{Acl, AclError};
use crate::schema::{self, SchemaError};

/// The namespace of shared blocks.
pub const SHARED: &str = "shared";

/// The namespace of an agent's own blocks.
pub fn agent_namespace(agent: &str) -> String {
    format!("agent/{agent}")
}

/// A core memory block as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// `agent/<id>` or [`SHARED`].
    pub namespace: String,
    /// The block's label, unique in its namespace.
    pub label: String,
    /// What the block is for (shown to the agent).
    pub description: String,
    /// The current value.
    pub value: String,
    /// Maximum length of the value in characters.
    pub limit: u32,
    /// Whether agents may not edit it.
    pub read_only: bool,
    /// Increases by one with every change; an edit names the version it read.
    pub version: u64,
}

impl Block {
    /// Whether this is a shared block.
    pub fn is_shared(&self) -> bool {
        self.namespace == SHARED
    }

    /// The value's size in characters (what the limit counts).
    pub fn size(&self) -> usize {
        self.value.chars().count()
    }
}

/// An edit of a block's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Edit {
    /// Replace the whole value.
    Write(String),
    /// Replace the one occurrence of `old` with `new`.
    Replace {
        /// Text that must occur exactly once.
        old: String,
        /// Its replacement.
        new: String,
    },
    /// Insert `text` as a line: before 0-based line `line`, or at the end.
    Insert {
        /// The text (may span lines).
        text: String,
        /// Where; `None` appends.
        line: Option<usize>,
    },
}

impl Edit {
    fn operation(&self) -> &'static str {
        match self {
            Edit::Write(_) => "write",
            Edit::Replace { .. } => "replace",
            Edit::Insert { .. } => "insert",
        }
    }
}

/// Who edits: the agent and the task it works on (recorded in the history).
#[derive(Clone, Copy, Debug)]
pub struct Actor<'a> {
    /// The agent.
    pub agent: &'a str,
    /// The task, when the edit comes from one.
    pub task: Option<i64>,
}

/// One row of a block's history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryEntry {
    /// The block's namespace.
    pub namespace: String,
    /// The block's label.
    pub label: String,
    /// The version this change produced.
    pub version: u64,
    /// `seed`, `config`, `write`, `replace` or `insert`.
    pub operation: String,
    /// The agent, or `config` / `admin`.
    pub author: String,
    /// The task, when the edit came from one.
    pub task: Option<i64>,
    /// Unix time in milliseconds.
    pub at_ms: i64,
    /// The value before (`None` for the seed).
    pub old_value: Option<String>,
    /// The value after.
    pub new_value: String,
}

/// Why a block operation failed. Every variant except storage failures is something the model can
/// act on, and carries the current state it needs to.
#[derive(Debug, thiserror::Error)]
pub enum BlockError {
    /// No such block among those the agent sees.
    #[error("there is no memory block `{label}`{}; blocks you can use: {}", owner.as_ref().map(|o| format!(" of `{o}`")).unwrap_or_default(), if available.is_empty() { "none".to_string() } else { available.join(", ") })]
    NotFound {
        /// The label asked for.
        label: String,
        /// The owner asked about, if another agent.
        owner: Option<String>,
        /// The labels that exist there.
        available: Vec<String>,
    },
    /// The ACL refused.
    #[error(transparent)]
    Denied(#[from] AclError),
    /// The block is read-only.
    #[error("memory block `{label}` is read-only; its value stays:\n{value}")]
    ReadOnly {
        /// The block.
        label: String,
        /// Its current value.
        value: String,
    },
    /// The edit would exceed the limit.
    #[error(
        "memory block `{label}` holds at most {limit} characters: the edit would make it {new_size} (it is {current_size} now); shorten or summarise the text"
    )]
    OverLimit {
        /// The block.
        label: String,
        /// Its limit.
        limit: u32,
        /// The size the edit would give.
        new_size: usize,
        /// The size now.
        current_size: usize,
    },
    /// `old` does not occur.
    #[error("`old` does not occur in memory block `{label}`; its current value is:\n{value}")]
    OldNotFound {
        /// The block.
        label: String,
        /// Its current value.
        value: String,
    },
    /// `old` occurs more than once.
    #[error(
        "`old` occurs {count} times in memory block `{label}`; include more surrounding text so it occurs once. Current value:\n{value}"
    )]
    Ambiguous {
        /// The block.
        label: String,
        /// How often it occurs.
        count: usize,
        /// Its current value.
        value: String,
    },
    /// `old` is empty.
    #[error("`old` must not be empty (memory block `{label}`)")]
    EmptyOld {
        /// The block.
        label: String,
    },
    /// The line is past the end.
    #[error("memory block `{label}` has {lines} lines: `line` must be between 0 and {lines}")]
    LineOutOfRange {
        /// The block.
        label: String,
        /// How many lines it has.
        lines: usize,
    },
    /// Someone else changed the block since the editor read it.
    #[error(
        "memory block `{label}` changed since you read it (you read version {read}, it is now version {current}); nothing was changed. Its current value is:\n{value}\nRedo your edit on this value if it still applies."
    )]
    Stale {
        /// The block.
        label: String,
        /// The version the editor read.
        read: u64,
        /// The current version.
        current: u64,
        /// The current value.
        value: String,
    },
    /// SQLite failed.
    #[error("memory storage failed: {0}")]
    Storage(#[from] rusqlite::Error),
    /// PostgreSQL failed, or holds what this build cannot read (the error names the server as
    /// `host:port/db`, never the URL).
    #[error("memory storage failed: {0}")]
    Postgres(#[from] opc_pg::PgError),
}

/// Why the block store could not open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The schema could not be migrated.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// SQLite failed.
    #[error("cannot open the memory tables in {path}: {source}")]
    Sqlite {
        /// The database file.
        path: String,
        /// Why.
        source: rusqlite::Error,
    },
    /// Memory's PostgreSQL tables could not be migrated (a newer build wrote them, or the server
    /// failed).
    #[error("cannot open the memory tables: {0}")]
    PostgresSchema(#[from] opc_pg::PgMigrateError),
    /// PostgreSQL failed while seeding the config's blocks.
    #[error("cannot open the memory tables: {0}")]
    Postgres(#[from] opc_pg::PgError),
}

/// A block as the config defines it, for one namespace (what [`BlockStore::apply`] seeds).
#[derive(Debug)]
struct Configured {
    namespace: String,
    label: String,
    description: String,
    value: String,
    limit: u32,
    read_only: bool,
}

/// Every block `config` defines: the agents' own, then the shared ones.
fn configured(config: &Config) -> Vec<Configured> {
    let mut out = Vec::new();
    for (id, agent) in &config.agents {
        for b in &agent.memory.blocks {
            out.push(Configured {
                namespace: agent_namespace(id),
                label: b.label.clone(),
                description: b.description.clone(),
                value: b.value.clone(),
                limit: b.limit.get(),
                read_only: b.read_only,
            });
        }
    }
    for (label, b) in &config.shared_blocks {
        out.push(Configured {
            namespace: SHARED.to_string(),
            label: label.clone(),
            description: b.description.clone(),
            value: b.value.clone(),
            limit: b.limit.get(),
            read_only: b.read_only,
        });
    }
    out
}

/// What a configured block's row holds before seeding: the value, the config value last applied,
/// and the version.
struct Stored {
    value: String,
    applied: String,
    version: u64,
}

/// What seeding does with one configured block, given what is stored.
enum Seeding {
    /// Not stored: insert it at version 1 (history: `seed` by `config`).
    Insert(HistoryEntry),
    /// The config's value changed since it was last applied: an admin means it. Write it at the
    /// entry's version (history: `config` by `admin`).
    Admin(HistoryEntry),
    /// Otherwise only description, limit and readOnly follow the config.
    Describe,
}

/// The rule of seeding (see the module doc), for both backends.
fn seeding(c: &Configured, stored: Option<Stored>, now: i64) -> Seeding {
    let entry = |version, operation: &str, author: &str, old_value| HistoryEntry {
        namespace: c.namespace.clone(),
        label: c.label.clone(),
        version,
        operation: operation.to_string(),
        author: author.to_string(),
        task: None,
        at_ms: now,
        old_value,
        new_value: c.value.clone(),
    };
    match stored {
        None => Seeding::Insert(entry(1, "seed", "config", None)),
        Some(s) if s.applied != c.value => {
            Seeding::Admin(entry(s.version + 1, "config", "admin", Some(s.value)))
        }
        Some(_) => Seeding::Describe,
    }
}

/// What an edit asks of storage, once the ACL has passed: which block, by whom, what, and the
/// version the editor read.
#[derive(Clone, Debug)]
struct EditRequest {
    namespace: String,
    label: String,
    /// Whether the actor may write the block (own blocks: yes; shared: both ACLs' `may_write_shared`).
    writable: bool,
    edit: Edit,
    read_version: Option<u64>,
    author: String,
    task: Option<i64>,
}

impl EditRequest {
    /// The block when it is missing.
    fn missing(&self) -> BlockError {
        BlockError::NotFound {
            label: self.label.clone(),
            owner: None,
            available: Vec::new(),
        }
    }

    /// The rule of an edit, for both backends: given the block as stored (and held by the
    /// transaction), the block after the edit and its history row, or why the edit does not apply
    /// (read-only, stale, not applicable, over the limit).
    fn decide(&self, current: Block, now: i64) -> Result<(Block, HistoryEntry), BlockError> {
        let label = || self.label.clone();
        if current.read_only || !self.writable {
            return Err(BlockError::ReadOnly {
                label: label(),
                value: current.value,
            });
        }
        if let Some(read) = self.read_version
            && read != current.version
        {
            return Err(BlockError::Stale {
                label: label(),
                read,
                current: current.version,
                value: current.value,
            });
        }
        let new_value = apply(&current, &self.edit)?;
        let new_size = new_value.chars().count();
        if new_size > current.limit as usize {
            return Err(BlockError::OverLimit {
                label: label(),
                limit: current.limit,
                new_size,
                current_size: current.size(),
            });
        }
        let version = current.version + 1;
        let entry = HistoryEntry {
            namespace: self.namespace.clone(),
            label: label(),
            version,
            operation: self.edit.operation().to_string(),
            author: self.author.clone(),
            task: self.task,
            at_ms: now,
            old_value: Some(current.value.clone()),
            new_value: new_value.clone(),
        };
        Ok((
            Block {
                value: new_value,
                version,
                ..current
            },
            entry,
        ))
    }
}

/// Where the blocks are stored. Cheap to clone: clones share the connection.
#[derive(Clone)]
enum Backend {
    /// Memory's SQLite connection; the mutex orders the store's users on it.
    Sqlite(Arc<Mutex<Connection>>),
    /// A PostgreSQL connection (its own thread orders the calls).
    Postgres(opc_pg::Blocking),
}

impl Backend {
    /// The SQLite connection, held for one operation (a panic elsewhere leaves it usable: every
    /// change is a transaction, rolled back if it did not commit).
    fn locked(conn: &Mutex<Connection>) -> std::sync::MutexGuard<'_, Connection> {
        conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn load(&self, namespace: &str, label: &str) -> Result<Option<Block>, BlockError> {
        match self {
            Backend::Sqlite(conn) => Ok(sqlite::load(&Backend::locked(conn), namespace, label)?),
            Backend::Postgres(conn) => {
                let keys = vec![(namespace.to_string(), label.to_string())];
                Ok(postgres::load_each(conn, keys)?.pop().flatten())
            }
        }
    }

    /// The blocks `keys` name, in order (`None` where there is none).
    fn load_each(&self, keys: Vec<(String, String)>) -> Result<Vec<Option<Block>>, BlockError> {
        match self {
            Backend::Sqlite(conn) => {
                let conn = Backend::locked(conn);
                keys.iter()
                    .map(|(namespace, label)| Ok(sqlite::load(&conn, namespace, label)?))
                    .collect()
            }
            Backend::Postgres(conn) => Ok(postgres::load_each(conn, keys)?),
        }
    }

    fn sync(&self, configured: &Arc<Vec<Configured>>) -> Result<(), BlockError> {
        match self {
            Backend::Sqlite(conn) => Ok(sqlite::sync(&mut Backend::locked(conn), configured)?),
            Backend::Postgres(conn) => Ok(postgres::sync(conn, configured.clone())?),
        }
    }

    fn edit(&self, request: EditRequest) -> Result<Block, BlockError> {
        match self {
            Backend::Sqlite(conn) => sqlite::edit(&mut Backend::locked(conn), &request),
            Backend::Postgres(conn) => postgres::edit(conn, request),
        }
    }

    fn all(&self) -> Result<Vec<Block>, BlockError> {
        match self {
            Backend::Sqlite(conn) => read_all(&Backend::locked(conn)),
            Backend::Postgres(conn) => read_all_postgres(conn),
        }
    }

    fn history(
        &self,
        label: &str,
        namespace: Option<&str>,
    ) -> Result<Vec<HistoryEntry>, BlockError> {
        match self {
            Backend::Sqlite(conn) => read_history(&Backend::locked(conn), label, namespace),
            Backend::Postgres(conn) => read_history_postgres(conn, label, namespace),
        }
    }
}

/// The core blocks of one org, as one config defines it, in memory's database. Cheap to clone.
#[derive(Clone)]
pub struct BlockStore {
    backend: Backend,
    /// The ACL of the config this store was built for.
    acl: Acl,
    /// The ACL of the newest applied config, shared by every store of one [`BlockStore::open`]:
    /// reads by other agents and of shared blocks must pass it too (revocations apply at once).
    newest: Arc<RwLock<Acl>>,
    /// Per agent, the `(namespace, label)` of the blocks it sees, in prompt order: its own blocks in
    /// config order, then the shared blocks it references.
    views: Arc<HashMap<String, Vec<(String, String)>>>,
    /// The blocks the config defines, seeded by [`BlockStore::apply`].
    configured: Arc<Vec<Configured>>,
}

impl BlockStore {
    /// Open the blocks in the database at `path` (migrating the memory schema), and bring them in
    /// line with `config`: seed new blocks, apply values an admin changed in the config.
    pub fn open(path: &Path, config: &Config, org: Arc<OrgTree>) -> Result<BlockStore, OpenError> {
        let failed = |source| OpenError::Sqlite {
            path: path.display().to_string(),
            source,
        };
        let mut conn = schema::open(path).map_err(failed)?;
        schema::migrate(&mut conn)?;
        let configured = configured(config);
        sqlite::sync(&mut conn, &configured).map_err(failed)?;
        Ok(BlockStore::new(
            Backend::Sqlite(Arc::new(Mutex::new(conn))),
            config,
            org,
            configured,
        ))
    }

    /// Open the blocks on PostgreSQL (`framework.memory.storage: postgres`): apply memory's
    /// PostgreSQL migrations on `conn` (once, however many nodes start together), then bring the
    /// blocks in line with `config` as [`BlockStore::open`] does. Nodes opening at once on one
    /// database seed each block once.
    pub fn open_postgres(
        conn: opc_pg::Blocking,
        config: &Config,
        org: Arc<OrgTree>,
    ) -> Result<BlockStore, OpenError> {
        conn.migrate(&schema::postgres::COMPONENT)?;
        let configured = Arc::new(configured(config));
        postgres::sync(&conn, configured.clone())?;
        Ok(BlockStore::new(
            Backend::Postgres(conn),
            config,
            org,
            configured,
        ))
    }

    fn new(
        backend: Backend,
        config: &Config,
        org: Arc<OrgTree>,
        configured: impl Into<Arc<Vec<Configured>>>,
    ) -> BlockStore {
        let acl = Acl::new(config, org);
        BlockStore {
            backend,
            newest: Arc::new(RwLock::new(acl.clone())),
            acl,
            views: Arc::new(views(config)),
            configured: configured.into(),
        }
    }

    /// The store for a reloaded `config` (validated): the same database and the same newest ACL,
    /// with the views and the ACL of `config`. Nothing is stored and no permission changes until
    /// [`BlockStore::apply`]; until then the blocks of agents `config` adds are missing.
    pub fn for_config(&self, config: &Config, org: Arc<OrgTree>) -> BlockStore {
        BlockStore {
            backend: self.backend.clone(),
            newest: self.newest.clone(),
            acl: Acl::new(config, org),
            views: Arc::new(views(config)),
            configured: Arc::new(configured(config)),
        }
    }

    /// Commit this store's config to memory: seed the blocks it adds and apply values an admin
    /// changed, in one transaction; once that has committed, its ACL becomes the newest, which every
    /// store of this database checks reads against (so a revocation reaches trees in flight). On
    /// error nothing was written and the previous newest ACL stays.
    pub fn apply(&self) -> Result<(), BlockError> {
        self.sync_config()?;
        *self.newest.write().unwrap_or_else(|p| p.into_inner()) = self.acl.clone();
        Ok(())
    }

    /// The ACL of the newest applied config.
    fn newest(&self) -> Acl {
        self.newest
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether `reader` may read `owner`'s namespace (blocks and recall history), as a result whose
    /// error explains a refusal: its own always (while its tree runs), another's when both this
    /// store's ACL and the newest allow it.
    pub fn check_read(&self, reader: &str, owner: &str) -> Result<(), AclError> {
        self.acl.check_read(reader, owner)?;
        if reader != owner {
            self.newest().check_read(reader, owner)?;
        }
        Ok(())
    }

    /// Every agent whose namespace `reader` may read (itself first): the filter recall search
    /// applies, under both this store's ACL and the newest.
    pub fn readable(&self, reader: &str) -> Vec<String> {
        let newest = self.newest();
        self.acl
            .readable(reader)
            .into_iter()
            .filter(|owner| owner == reader || newest.may_read(reader, owner))
            .collect()
    }

    /// Whether `agent` may read shared block `label` (both ACLs).
    fn check_read_shared(&self, agent: &str, label: &str) -> Result<(), AclError> {
        self.acl.check_read_shared(agent, label)?;
        self.newest().check_read_shared(agent, label)
    }

    /// Whether `agent` may edit shared block `label` (both ACLs).
    fn may_write_shared(&self, agent: &str, label: &str) -> bool {
        self.acl.may_write_shared(agent, label) && self.newest().may_write_shared(agent, label)
    }

    /// Seed blocks the database does not have; apply config values that changed since last applied.
    /// One transaction: all of it or none.
    fn sync_config(&self) -> Result<(), BlockError> {
        self.backend.sync(&self.configured)
    }

    /// Resolve `label` among the blocks `agent` sees (own first, then referenced shared blocks).
    fn resolve(&self, agent: &str, label: &str) -> Result<(String, String), BlockError> {
        let view = self.views.get(agent).map(Vec::as_slice).unwrap_or(&[]);
        view.iter()
            .find(|(_, l)| l == label)
            .cloned()
            .ok_or_else(|| BlockError::NotFound {
                label: label.to_string(),
                owner: None,
                available: view.iter().map(|(_, l)| l.clone()).collect(),
            })
    }

    /// The namespace of the block `label` as `agent` sees it (own first, then shared), if any.
    pub fn namespace_of(&self, agent: &str, label: &str) -> Option<String> {
        self.resolve(agent, label)
            .ok()
            .map(|(namespace, _)| namespace)
    }

    /// The blocks `agent` sees, in prompt order: its own, then the shared blocks it references (and
    /// the newest config still lets it read).
    pub fn blocks_of(&self, agent: &str) -> Result<Vec<Block>, BlockError> {
        let view = self.views.get(agent).map(Vec::as_slice).unwrap_or(&[]);
        let newest = self.newest();
        let keys: Vec<(String, String)> = view
            .iter()
            .filter(|(namespace, label)| {
                namespace != SHARED || newest.may_read_shared(agent, label)
            })
            .cloned()
            .collect();
        Ok(self
            .backend
            .load_each(keys)?
            .into_iter()
            .flatten()
            .collect())
    }

    /// `reader` reads one of its own (or its shared) blocks.
    pub fn read(&self, reader: &str, label: &str) -> Result<Block, BlockError> {
        let (namespace, label) = self.resolve(reader, label)?;
        if namespace == SHARED {
            self.check_read_shared(reader, &label)?;
        } else {
            self.check_read(reader, reader)?;
        }
        self.backend
            .load(&namespace, &label)?
            .ok_or(BlockError::NotFound {
                label,
                owner: None,
                available: Vec::new(),
            })
    }

    /// `reader` reads `owner`'s own block `label`, if the ACL allows it.
    pub fn read_of(&self, reader: &str, owner: &str, label: &str) -> Result<Block, BlockError> {
        if reader == owner {
            return self.read(reader, label);
        }
        self.check_read(reader, owner)?;
        let namespace = agent_namespace(owner);
        match self.backend.load(&namespace, label)? {
            Some(block) => Ok(block),
            None => Err(BlockError::NotFound {
                label: label.to_string(),
                owner: Some(owner.to_string()),
                available: self
                    .views
                    .get(owner)
                    .map(|v| {
                        v.iter()
                            .filter(|(ns, _)| *ns == namespace)
                            .map(|(_, l)| l.clone())
                            .collect()
                    })
                    .unwrap_or_default(),
            }),
        }
    }

    /// `actor` edits its block `label` (own or a referenced shared one), having read version
    /// `read_version` (`None`: edit whatever is current — only for callers that hold no read, e.g. an
    /// admin tool; the agents' tools always pass the version they showed the model).
    pub fn edit(
        &self,
        actor: Actor<'_>,
        label: &str,
        edit: &Edit,
        read_version: Option<u64>,
    ) -> Result<Block, BlockError> {
        self.edit_by(actor, actor.agent, label, edit, read_version)
    }

    /// [`BlockStore::edit`] with the history's author given apart from the actor whose permissions
    /// apply: a consolidation run edits an agent's blocks under that agent's ACL and is recorded as
    /// `consolidation`.
    ///
    /// One transaction, holding the block while it checks the version: on SQLite the whole file
    /// (`BEGIN IMMEDIATE`), on PostgreSQL the block's row (`SELECT … FOR UPDATE`), so of two edits
    /// from one version exactly one succeeds and the other is [`BlockError::Stale`].
    pub fn edit_by(
        &self,
        actor: Actor<'_>,
        author: &str,
        label: &str,
        edit: &Edit,
        read_version: Option<u64>,
    ) -> Result<Block, BlockError> {
        let (namespace, label) = self.resolve(actor.agent, label)?;
        if namespace == SHARED {
            self.check_read_shared(actor.agent, &label)?;
        } else {
            self.acl.check_write(actor.agent, actor.agent)?;
        }
        let writable = namespace != SHARED || self.may_write_shared(actor.agent, &label);
        self.backend.edit(EditRequest {
            namespace,
            label,
            writable,
            edit: edit.clone(),
            read_version,
            author: author.to_string(),
            task: actor.task,
        })
    }

    /// Every stored block (for `opc memory show`), by namespace and label. No ACL: this is the
    /// operator's view, not an agent's.
    pub fn all(&self) -> Result<Vec<Block>, BlockError> {
        self.backend.all()
    }

    /// The history of every block labelled `label` (in any namespace, or only `namespace`), oldest
    /// first. No ACL: the operator's view.
    pub fn history(
        &self,
        label: &str,
        namespace: Option<&str>,
    ) -> Result<Vec<HistoryEntry>, BlockError> {
        self.backend.history(label, namespace)
    }
}

/// The author an operator's edit is recorded under (the admin console; a config value an admin
/// changed is recorded under it too).
pub const ADMIN: &str = "admin";

/// An operator's edit (the admin console): no agent's ACL applies — the operator may change every
/// block — but every other rule of an edit does, in the edit's one transaction: a read-only block is
/// refused ([`BlockError::ReadOnly`]: it follows the config), the version the operator read is
/// checked ([`BlockError::Stale`], with the current value and version), the limit is enforced
/// ([`BlockError::OverLimit`]), and the change is kept in the block's history by [`ADMIN`].
#[derive(Clone, Debug)]
pub struct AdminEdit {
    /// `agent/<id>` or [`SHARED`].
    pub namespace: String,
    /// The block's label.
    pub label: String,
    /// The whole new value.
    pub value: String,
    /// The version the operator read.
    pub version: u64,
}

impl AdminEdit {
    fn request(&self) -> EditRequest {
        EditRequest {
            namespace: self.namespace.clone(),
            label: self.label.clone(),
            writable: true,
            edit: Edit::Write(self.value.clone()),
            read_version: Some(self.version),
            author: ADMIN.to_string(),
            task: None,
        }
    }
}

/// Apply an operator's `edit` ([`AdminEdit`]) on a bare SQLite connection to the engine's file (the
/// console holds no [`BlockStore`]); the block as written.
pub fn admin_write(conn: &mut Connection, edit: &AdminEdit) -> Result<Block, BlockError> {
    sqlite::edit(conn, &edit.request())
}

/// [`admin_write`] on PostgreSQL (memory's tables must exist: nothing is migrated).
pub fn admin_write_postgres(
    conn: &opc_pg::Blocking,
    edit: &AdminEdit,
) -> Result<Block, BlockError> {
    postgres::edit(conn, edit.request())
}

/// The history of `label` on a bare SQLite connection (`opc memory history` opens the database
/// read-only, without the config).
pub fn read_history(
    conn: &Connection,
    label: &str,
    namespace: Option<&str>,
) -> Result<Vec<HistoryEntry>, BlockError> {
    Ok(sqlite::history(conn, label, namespace)?)
}

/// Every stored block on a bare SQLite connection (`opc memory show`).
pub fn read_all(conn: &Connection) -> Result<Vec<Block>, BlockError> {
    Ok(sqlite::all(conn)?)
}

/// [`read_history`] on PostgreSQL (memory's tables must exist: nothing is migrated).
pub fn read_history_postgres(
    conn: &opc_pg::Blocking,
    label: &str,
    namespace: Option<&str>,
) -> Result<Vec<HistoryEntry>, BlockError> {
    Ok(postgres::history(
        conn,
        label.to_string(),
        namespace.map(str::to_string),
    )?)
}

/// [`read_all`] on PostgreSQL (memory's tables must exist: nothing is migrated).
pub fn read_all_postgres(conn: &opc_pg::Blocking) -> Result<Vec<Block>, BlockError> {
    Ok(postgres::all(conn)?)
}

/// The value after `edit`, or why the edit does not apply.
fn apply(current: &Block, edit: &Edit) -> Result<String, BlockError> {
    let label = || current.label.clone();
    match edit {
        Edit::Write(value) => Ok(value.clone()),
        Edit::Replace { old, new } => {
            if old.is_empty() {
                return Err(BlockError::EmptyOld { label: label() });
            }
            match current.value.matches(old.as_str()).count() {
                0 => Err(BlockError::OldNotFound {
                    label: label(),
                    value: current.value.clone(),
                }),
                1 => Ok(current.value.replacen(old.as_str(), new, 1)),
                count => Err(BlockError::Ambiguous {
                    label: label(),
                    count,
                    value: current.value.clone(),
                }),
            }
        }
        Edit::Insert { text, line } => {
            let mut lines: Vec<&str> = if current.value.is_empty() {
                Vec::new()
            } else {
                current.value.lines().collect()
            };
            let at = line.unwrap_or(lines.len());
            if at > lines.len() {
                return Err(BlockError::LineOutOfRange {
                    label: label(),
                    lines: lines.len(),
                });
            }
            lines.insert(at, text.as_str());
            Ok(lines.join("\n"))
        }
    }
}

/// Per agent, the blocks it sees: own (config order), then referenced shared blocks.
fn views(config: &Config) -> HashMap<String, Vec<(String, String)>> {
    config
        .agents
        .iter()
        .map(|(id, agent)| {
            let own = agent
                .memory
                .blocks
                .iter()
                .map(|b| (agent_namespace(id), b.label.clone()));
            let shared = agent
                .memory
                .shared_blocks
                .iter()
                .filter(|l| config.shared_blocks.contains_key(*l))
                .map(|l| (SHARED.to_string(), l.clone()));
            (id.clone(), own.chain(shared).collect())
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const BASE: &str = "framework:\n  defaultModel: m\n  providers: { p: { kind: anthropic, models: { m: { input: 1, output: 1 } } } }\n  privacy: { enabled: false }\n  memory: { consolidation: { enabled: false } }\n";

    fn config(persona: &str) -> opc_hierarchy::Loaded {
        let text = format!(
            "{BASE}sharedBlocks:\n  plan: {{ description: the plan, value: 'step 1', limit: 40 }}\n  rules: {{ description: rules, value: be kind, readOnly: true }}\nagents:\n  ceo: {{ role: CEO, children: [a, b], memory: {{ blocks: [{{ label: persona, description: who I am, value: '{persona}', limit: 30 }}] }} }}\n  a: {{ role: A, parent: ceo, memory: {{ blocks: [{{ label: notes, description: n, value: '' }}, {{ label: fixed, description: f, value: x, readOnly: true }}], sharedBlocks: [plan, rules] }} }}\n  b: {{ role: B, parent: ceo, memory: {{ sharedBlocks: [plan] }} }}\n"
        );
        opc_hierarchy::parse("t.yaml", text, None).unwrap_or_else(|e| panic!("{e}"))
    }

    fn open(path: &Path, persona: &str) -> BlockStore {
        let loaded = config(persona);
        BlockStore::open(path, &loaded.config, Arc::new(loaded.org)).unwrap()
    }

    fn actor(agent: &str) -> Actor<'_> {
        Actor {
            agent,
            task: Some(7),
        }
    }

    #[test]
    fn an_admin_edit_skips_the_acl_but_keeps_read_only_version_and_limit() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        let store = open(&db, "I am the CEO");
        let mut conn = schema::open(&db).unwrap();
        let edit = |namespace: &str, label: &str, value: &str, version| AdminEdit {
            namespace: namespace.into(),
            label: label.into(),
            value: value.into(),
            version,
        };
        // No agent may write another's block; the operator may.
        let b = admin_write(&mut conn, &edit("agent/ceo", "persona", "I run it", 1)).unwrap();
        assert_eq!((b.value.as_str(), b.version), ("I run it", 2));
        assert!(matches!(
            admin_write(&mut conn, &edit("agent/ceo", "persona", "late", 1)),
            Err(BlockError::Stale { read: 1, current: 2, ref value, .. }) if value == "I run it"
        ));
        assert!(matches!(
            admin_write(&mut conn, &edit("agent/ceo", "persona", &"x".repeat(31), 2)),
            Err(BlockError::OverLimit {
                limit: 30,
                new_size: 31,
                ..
            })
        ));
        assert!(matches!(
            admin_write(&mut conn, &edit(SHARED, "rules", "be rude", 1)),
            Err(BlockError::ReadOnly { .. })
        ));
        assert!(matches!(
            admin_write(&mut conn, &edit(SHARED, "nope", "x", 1)),
            Err(BlockError::NotFound { .. })
        ));
        let last = store.history("persona", None).unwrap().pop().unwrap();
        assert_eq!(
            (
                last.author.as_str(),
                last.operation.as_str(),
                last.task,
                last.old_value.as_deref(),
                last.new_value.as_str()
            ),
            (ADMIN, "write", None, Some("I am the CEO"), "I run it")
        );
        assert_eq!(store.read("ceo", "persona").unwrap().version, 2);
    }

    #[test]
    fn config_seeds_then_stored_value_wins_then_admin_change_applies() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        let store = open(&db, "I am the CEO");
        let b = store.read("ceo", "persona").unwrap();
        assert_eq!((b.value.as_str(), b.version), ("I am the CEO", 1));
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
        let store = open(&db, "I am the CEO");
        let b = store.read("ceo", "persona").unwrap();
        assert_eq!((b.value.as_str(), b.version), ("I like tea", 2));
        drop(store);
        // The admin changes the config value: applied and recorded.
        let store = open(&db, "I am the boss");
        let b = store.read("ceo", "persona").unwrap();
        assert_eq!((b.value.as_str(), b.version), ("I am the boss", 3));
        let h = store.history("persona", None).unwrap();
        let ops: Vec<(&str, &str, Option<&str>, &str)> = h
            .iter()
            .map(|e| {
                (
                    e.operation.as_str(),
                    e.author.as_str(),
                    e.old_value.as_deref(),
                    e.new_value.as_str(),
                )
            })
            .collect();
        assert_eq!(
            ops,
            [
                ("seed", "config", None, "I am the CEO"),
                ("write", "ceo", Some("I am the CEO"), "I like tea"),
                ("config", "admin", Some("I like tea"), "I am the boss"),
            ]
        );
        assert_eq!(h[1].task, Some(7));
    }

    #[test]
    fn edits_and_the_errors_a_model_can_act_on() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir.path().join("db"), "aa bb aa");
        // insert appends lines, or inserts before a line
        store
            .edit(
                actor("a"),
                "notes",
                &Edit::Insert {
                    text: "one".into(),
                    line: None,
                },
                None,
            )
            .unwrap();
        store
            .edit(
                actor("a"),
                "notes",
                &Edit::Insert {
                    text: "three".into(),
                    line: None,
                },
                None,
            )
            .unwrap();
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
        assert_eq!((b.value.as_str(), b.version), ("one\ntwo\nthree", 4));
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
        assert_eq!(b.value, "one\n2\nthree");
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
            "{err}"
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
            "{err}"
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
        assert!(err.to_string().contains("aa bb aa"), "{err}");
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
            "{err}"
        );
        assert_eq!(store.read("ceo", "persona").unwrap().version, 1);
        // read-only, own and shared
        let err = store
            .edit(actor("a"), "fixed", &Edit::Write("y".into()), None)
            .unwrap_err();
        assert!(matches!(err, BlockError::ReadOnly { .. }), "{err}");
        let err = store
            .edit(actor("a"), "rules", &Edit::Write("y".into()), None)
            .unwrap_err();
        assert!(
            matches!(&err, BlockError::ReadOnly { value, .. } if value == "be kind"),
            "{err}"
        );
        // missing label lists what exists
        let err = store.read("a", "nope").unwrap_err();
        assert!(
            err.to_string().contains("notes, fixed, plan, rules"),
            "{err}"
        );
        // b does not see `rules`, and cannot edit a's blocks
        assert!(matches!(
            store.read("b", "rules").unwrap_err(),
            BlockError::NotFound { .. }
        ));
        assert!(matches!(
            store
                .edit(actor("b"), "notes", &Edit::Write("z".into()), None)
                .unwrap_err(),
            BlockError::NotFound { .. }
        ));
        // ACL: the manager reads a's block; a cannot read the manager's; a sibling without shareWith cannot
        assert_eq!(
            store.read_of("ceo", "a", "notes").unwrap().value,
            "one\n2\nthree"
        );
        assert!(matches!(
            store.read_of("a", "ceo", "persona").unwrap_err(),
            BlockError::Denied(_)
        ));
        assert!(matches!(
            store.read_of("b", "a", "notes").unwrap_err(),
            BlockError::Denied(_)
        ));
        // prompt order: own, then shared
        let labels: Vec<String> = store
            .blocks_of("a")
            .unwrap()
            .into_iter()
            .map(|b| b.label)
            .collect();
        assert_eq!(labels, ["notes", "fixed", "plan", "rules"]);
    }

    /// Two agents edit one shared block at the same time, each on its own connection, both having
    /// read version 1: exactly one wins; the other gets a stale error carrying the winner's value,
    /// and nothing is lost.
    #[test]
    fn concurrent_shared_edits_one_wins_the_other_is_told() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        let first = open(&db, "p");
        let second = open(&db, "p");
        assert_eq!(first.read("a", "plan").unwrap().version, 1);
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let run = |store: BlockStore, agent: &'static str, text: &'static str| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                store.edit(
                    Actor { agent, task: None },
                    "plan",
                    &Edit::Write(text.into()),
                    Some(1),
                )
            })
        };
        let ta = run(first.clone(), "a", "plan by a");
        let tb = run(second, "b", "plan by b");
        let results = [ta.join().unwrap(), tb.join().unwrap()];
        let winners: Vec<&Block> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "exactly one edit wins: {results:?}");
        let won = winners[0].value.clone();
        let stale = results.iter().find_map(|r| r.as_ref().err()).unwrap();
        match stale {
            BlockError::Stale {
                read: 1,
                current: 2,
                value,
                ..
            } => assert_eq!(*value, won),
            other => panic!("expected a stale error, got {other}"),
        }
        assert!(stale.to_string().contains(&won));
        // The stored value is the winner's, and the history records exactly one edit after the seed.
        assert_eq!(first.read("b", "plan").unwrap().value, won);
        assert_eq!(first.history("plan", Some(SHARED)).unwrap().len(), 2);
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

    fn reconfigured(store: &BlockStore, loaded: &opc_hierarchy::Loaded) -> BlockStore {
        store.for_config(&loaded.config, Arc::new(loaded.org.clone()))
    }

    /// A reload builds a store with the new config's views and ACL; applying it seeds the added
    /// agent's block (so it uses it and its manager reads it) and revokes what the new config no
    /// longer grants for every store — also the one a tree in flight still holds.
    #[test]
    fn a_reload_seeds_added_agents_and_revokes_for_trees_in_flight_too() {
        let dir = tempfile::tempdir().unwrap();
        let before = reload_org(false, "");
        let old = BlockStore::open(
            &dir.path().join("db"),
            &before.config,
            Arc::new(before.org.clone()),
        )
        .unwrap();
        assert_eq!(old.read_of("b", "a", "notes").unwrap().value, "A-NOTES");
        assert_eq!(old.read("b", "plan").unwrap().value, "PLAN");
        assert_eq!(old.readable("b"), ["b", "a"]);

        let new = reconfigured(&old, &reload_org(true, ""));
        // Built, not applied: nothing is seeded and the old permissions still hold for the old store.
        assert!(matches!(
            new.read("c", "cnotes").unwrap_err(),
            BlockError::NotFound { .. }
        ));
        assert_eq!(old.read_of("b", "a", "notes").unwrap().value, "A-NOTES");
        assert!(matches!(
            new.read_of("b", "a", "notes").unwrap_err(),
            BlockError::Denied(_)
        ));

        new.apply().unwrap();
        // The added agent uses its own block; its manager reads it; the seed is in the history.
        assert_eq!(new.read("c", "cnotes").unwrap().value, "C-NOTES");
        assert_eq!(new.read_of("ceo", "c", "cnotes").unwrap().value, "C-NOTES");
        assert!(new.readable("ceo").contains(&"c".to_string()));
        let seeded = new.history("cnotes", Some("agent/c")).unwrap();
        assert_eq!((seeded.len(), seeded[0].operation.as_str()), (1, "seed"));
        // Revoked everywhere: the new store and the store a tree started before the reload holds.
        for store in [&new, &old] {
            let err = store.read_of("b", "a", "notes").unwrap_err();
            assert!(
                matches!(&err, BlockError::Denied(e) if e.reason.contains("shareWith")),
                "{err}"
            );
            assert_eq!(store.readable("b"), ["b"]);
        }
        // `b` no longer references `plan`: the old store refuses it and leaves it out of the prompt.
        assert!(matches!(
            old.read("b", "plan").unwrap_err(),
            BlockError::Denied(_)
        ));
        let labels: Vec<String> = old
            .blocks_of("b")
            .unwrap()
            .into_iter()
            .map(|b| b.label)
            .collect();
        assert_eq!(labels, ["bnotes"]);
        // What stays: own blocks, the manager's reads, and `a`'s shared block.
        assert_eq!(old.read("a", "notes").unwrap().value, "A-NOTES");
        assert_eq!(old.read_of("ceo", "a", "notes").unwrap().value, "A-NOTES");
        assert_eq!(old.read("a", "plan").unwrap().value, "PLAN");
        // The old store's tree never knew `c`: it does not grant reading it.
        assert!(old.read_of("ceo", "c", "cnotes").is_err());
    }

    /// Seeding is one transaction: when one block of the reload cannot be written, no block of it
    /// is, and the permissions in force stay the old ones.
    #[test]
    fn a_failed_apply_writes_nothing_and_keeps_the_old_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        let before = reload_org(false, "");
        let old = BlockStore::open(&db, &before.config, Arc::new(before.org.clone())).unwrap();
        // The disk refuses the block labelled `boom` (a trigger stands in for a full disk).
        Connection::open(&db)
            .unwrap()
            .execute_batch(
                "CREATE TRIGGER refuse BEFORE INSERT ON memory_blocks WHEN NEW.label = 'boom' \
                 BEGIN SELECT RAISE(ABORT, 'disk full'); END;",
            )
            .unwrap();
        let after = reload_org(
            true,
            "  d: { role: D, parent: ceo, memory: { blocks: [{ label: boom, description: n, value: x }] } }\n",
        );
        let new = reconfigured(&old, &after);
        let err = new.apply().unwrap_err();
        assert!(err.to_string().contains("disk full"), "{err}");
        let labels: Vec<String> = old.all().unwrap().into_iter().map(|b| b.label).collect();
        assert!(
            !labels.iter().any(|l| l == "cnotes" || l == "boom"),
            "{labels:?}"
        );
        assert!(new.history("cnotes", None).unwrap().is_empty());
        assert_eq!(old.read_of("b", "a", "notes").unwrap().value, "A-NOTES");
        assert_eq!(old.readable("b"), ["b", "a"]);
    }
}
