//! Embedding generations: which model's vectors a store searches, and which one it is filling.
//!
//! Role: the SQL of `memory_embedding_generations` (migration 6, [`crate::schema::embeddings`]) on
//! both backends, for recall and facts alike, and the one decision both stores take from it at every
//! catch-up ([`plan`]): given the generations on disk and the embedder configured in the slot,
//! which generation is searched (active) and which one is being embedded (filling).
//!
//! Why generations: a vector is only comparable with vectors of the same model and size. When the
//! configured embedder changes, the stores embed every row again into a new generation in the
//! background while searches keep using the active one — its vectors AND its embedder for the query
//! (the slot's previous embedder) — and switch in one transaction when every row has a new vector.
//! Nothing is ever searched against vectors of two models at once.
//!
//! Invariants: at most one active generation per store (a unique partial index); at most one
//! filling generation is kept (a generation neither active nor configured is dropped with its
//! vectors — the configuration moved on); a descriptor never holds a secret (the embedder writes it,
//! naming the key's environment variable, not its value).

use opc_pg::postgres;
use rusqlite::{Connection, OptionalExtension, params};

/// Which store a generation belongs to (the table's `store` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// Recall memory's `recall_vectors`.
    Recall,
    /// Facts' `memory_fact_vectors`.
    Facts,
}

impl Store {
    fn key(self) -> &'static str {
        match self {
            Store::Recall => "recall",
            Store::Facts => "facts",
        }
    }
}

/// Whether a generation is searched or being filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum GenerationState {
    /// Searched (its embedder embeds the queries).
    Active,
    /// Being embedded in the background; searched once complete.
    Filling,
}

/// One generation as recorded.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Generation {
    /// The embedder's model id (the key stored with each vector).
    pub model: String,
    /// What builds that embedder again (`{"provider", "model", "dimensions", "baseUrl",
    /// "apiKeyEnv"}`), never a secret.
    pub descriptor: serde_json::Value,
    /// Active or filling.
    pub state: GenerationState,
}

fn parse(model: String, descriptor: String, state: String) -> Generation {
    Generation {
        model,
        // A descriptor that does not parse is kept as its text: the bot then cannot rebuild that
        // embedder, which only turns the vector half of search off until the next switch.
        descriptor: serde_json::from_str(&descriptor)
            .unwrap_or(serde_json::Value::String(descriptor)),
        state: if state == "active" {
            GenerationState::Active
        } else {
            GenerationState::Filling
        },
    }
}

/// What a switch attempt found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    /// The generation is active now; the old one's vectors are gone.
    Done,
    /// Some rows have no vector of it yet: nothing changed.
    Lacking,
    /// It is not filling any more (another process switched or dropped it): nothing changed.
    NotFilling,
}

/// What a catch-up does, decided from the generations on disk and the configured embedder.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// The generation searched (and kept up to date with its own embedder when loaded); `None`:
    /// no vectors yet.
    pub active: Option<String>,
    /// The generation to fill in the background (the configured embedder's), when it is not the
    /// active one.
    pub filling: Option<String>,
    /// Generations to drop with their vectors (neither active nor configured any more).
    pub stale: Vec<String>,
    /// A generation to create: (model, descriptor, state) — the first embedder of a store becomes
    /// active at once, a later one starts filling.
    pub create: Option<(String, String, GenerationState)>,
}

/// The plan for `generations` on disk and the configured embedder `configured` ((model id,
/// descriptor), when loaded).
pub fn plan(generations: &[Generation], configured: Option<(&str, String)>) -> Plan {
    let active = generations
        .iter()
        .find(|g| g.state == GenerationState::Active)
        .map(|g| g.model.clone());
    let mut plan = Plan {
        active: active.clone(),
        ..Plan::default()
    };
    let Some((model, descriptor)) = configured else {
        return plan;
    };
    match active {
        None => {
            plan.active = Some(model.to_string());
            plan.create = Some((model.to_string(), descriptor, GenerationState::Active));
        }
        Some(a) if a == model => {}
        Some(_) => {
            plan.filling = Some(model.to_string());
            if !generations.iter().any(|g| g.model == model) {
                plan.create = Some((model.to_string(), descriptor, GenerationState::Filling));
            }
        }
    }
    plan.stale = generations
        .iter()
        .filter(|g| g.state == GenerationState::Filling && g.model != model)
        .map(|g| g.model.clone())
        .collect();
    plan
}

/// The generations of `store` on SQLite (none before migration 6 ran: a read-only reader of an
/// older file sees none).
pub fn list_sqlite(conn: &Connection, store: Store) -> rusqlite::Result<Vec<Generation>> {
    let exists: bool = conn.query_row(
        "SELECT EXISTS(SELECT 1 FROM sqlite_master WHERE name = 'memory_embedding_generations')",
        [],
        |r| r.get(0),
    )?;
    if !exists {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare_cached(
        "SELECT model, descriptor, state FROM memory_embedding_generations WHERE store = ?1
         ORDER BY state, model",
    )?;
    stmt.query_map([store.key()], |r| {
        Ok(parse(r.get(0)?, r.get(1)?, r.get(2)?))
    })?
    .collect()
}

/// Carry out `plan`'s bookkeeping on SQLite inside `tx`: create its generation, drop the stale ones
/// with their vectors (`vectors_table`, keyed by `model`).
pub fn apply_sqlite(
    tx: &Connection,
    store: Store,
    plan: &Plan,
    vectors_table: &str,
    now_ms: i64,
) -> rusqlite::Result<()> {
    if let Some((model, descriptor, state)) = &plan.create {
        tx.execute(
            "INSERT OR IGNORE INTO memory_embedding_generations (store, model, descriptor, state, started_ms)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![store.key(), model, descriptor, state_key(*state), now_ms],
        )?;
    }
    for model in &plan.stale {
        tx.execute(
            &format!("DELETE FROM {vectors_table} WHERE model = ?1"),
            [model],
        )?;
        tx.execute(
            "DELETE FROM memory_embedding_generations WHERE store = ?1 AND model = ?2 AND state = 'filling'",
            params![store.key(), model],
        )?;
    }
    Ok(())
}

/// Make `new` the active generation of `store` inside `tx` (SQLite) and delete the old one's
/// vectors; `false` (nothing changed) when `new` is not filling any more (another process switched
/// or dropped it).
pub fn switch_sqlite(
    tx: &Connection,
    store: Store,
    new: &str,
    vectors_table: &str,
) -> rusqlite::Result<bool> {
    let filling: Option<String> = tx
        .query_row(
            "SELECT state FROM memory_embedding_generations WHERE store = ?1 AND model = ?2",
            params![store.key(), new],
            |r| r.get(0),
        )
        .optional()?;
    if filling.as_deref() != Some("filling") {
        return Ok(false);
    }
    tx.execute(
        &format!("DELETE FROM {vectors_table} WHERE model <> ?1"),
        [new],
    )?;
    tx.execute(
        "DELETE FROM memory_embedding_generations WHERE store = ?1 AND model <> ?2",
        params![store.key(), new],
    )?;
    tx.execute(
        "UPDATE memory_embedding_generations SET state = 'active' WHERE store = ?1 AND model = ?2",
        params![store.key(), new],
    )?;
    Ok(true)
}

fn state_key(state: GenerationState) -> &'static str {
    match state {
        GenerationState::Active => "active",
        GenerationState::Filling => "filling",
    }
}

/// The generations of `store` on PostgreSQL (none before migration 4 ran).
pub fn list_pg(
    c: &mut impl postgres::GenericClient,
    store: Store,
) -> Result<Vec<Generation>, postgres::Error> {
    // A read-only reader of a database no node has migrated to memory's migration 4 yet sees none.
    let exists: bool = c
        .query_one(
            "SELECT to_regclass('memory_embedding_generations') IS NOT NULL",
            &[],
        )?
        .try_get(0)?;
    if !exists {
        return Ok(Vec::new());
    }
    c.query(
        "SELECT model, descriptor, state FROM memory_embedding_generations WHERE store = $1
         ORDER BY state, model",
        &[&store.key()],
    )?
    .iter()
    .map(|r| Ok(parse(r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
    .collect()
}

/// [`apply_sqlite`] on PostgreSQL, in one transaction of its own. A node whose plan raced another's
/// (both creating the first active generation) keeps the one that committed first.
pub fn apply_pg(
    c: &mut postgres::Client,
    store: Store,
    plan: &Plan,
    vectors_table: &str,
    now_ms: i64,
) -> Result<(), postgres::Error> {
    let mut tx = c.transaction()?;
    if let Some((model, descriptor, state)) = &plan.create {
        tx.execute(
            "INSERT INTO memory_embedding_generations (store, model, descriptor, state, started_ms)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
            &[&store.key(), model, descriptor, &state_key(*state), &now_ms],
        )?;
    }
    for model in &plan.stale {
        let gone = tx.execute(
            "DELETE FROM memory_embedding_generations WHERE store = $1 AND model = $2 AND state = 'filling'",
            &[&store.key(), model],
        )?;
        if gone > 0 {
            tx.execute(
                &format!("DELETE FROM {vectors_table} WHERE model = $1"),
                &[model],
            )?;
        }
    }
    tx.commit()
}

/// [`switch_sqlite`] on PostgreSQL inside `tx`: the generation rows are locked first, so two nodes
/// switching at once switch once.
pub fn switch_pg(
    tx: &mut postgres::Transaction<'_>,
    store: Store,
    new: &str,
    vectors_table: &str,
) -> Result<bool, postgres::Error> {
    let rows = tx.query(
        "SELECT model, state FROM memory_embedding_generations WHERE store = $1 FOR UPDATE",
        &[&store.key()],
    )?;
    let filling = rows.iter().any(|r| {
        r.try_get::<_, String>(0).is_ok_and(|m| m == new)
            && r.try_get::<_, String>(1).is_ok_and(|s| s == "filling")
    });
    if !filling {
        return Ok(false);
    }
    tx.execute(
        &format!("DELETE FROM {vectors_table} WHERE model <> $1"),
        &[&new],
    )?;
    tx.execute(
        "DELETE FROM memory_embedding_generations WHERE store = $1 AND model <> $2",
        &[&store.key(), &new],
    )?;
    tx.execute(
        "UPDATE memory_embedding_generations SET state = 'active' WHERE store = $1 AND model = $2",
        &[&store.key(), &new],
    )?;
    Ok(true)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn g(model: &str, state: GenerationState) -> Generation {
        Generation {
            model: model.into(),
            descriptor: serde_json::json!({}),
            state,
        }
    }

    #[test]
    fn the_plan_follows_the_configured_embedder() {
        use GenerationState::*;
        // A fresh store: the first embedder is active at once.
        let p = plan(&[], Some(("a", "{}".into())));
        assert_eq!(p.active.as_deref(), Some("a"));
        assert_eq!(p.create.as_ref().map(|c| c.2), Some(Active));
        // Same model: nothing to do.
        let p = plan(&[g("a", Active)], Some(("a", "{}".into())));
        assert_eq!((p.filling, p.create, p.stale.len()), (None, None, 0));
        // Another model: fill it beside the active one.
        let p = plan(&[g("a", Active)], Some(("b", "{}".into())));
        assert_eq!(p.active.as_deref(), Some("a"));
        assert_eq!(p.filling.as_deref(), Some("b"));
        assert_eq!(p.create.as_ref().map(|c| c.2), Some(Filling));
        // Changed again mid-fill: the abandoned generation is dropped.
        let p = plan(&[g("a", Active), g("b", Filling)], Some(("c", "{}".into())));
        assert_eq!(p.stale, vec!["b".to_string()]);
        assert_eq!(p.filling.as_deref(), Some("c"));
        // Back to the active model: the filling one is dropped.
        let p = plan(&[g("a", Active), g("b", Filling)], Some(("a", "{}".into())));
        assert_eq!((p.filling, p.stale), (None, vec!["b".to_string()]));
        // No embedder loaded: search what is active, change nothing.
        let p = plan(&[g("a", Active), g("b", Filling)], None);
        assert_eq!(
            (p.active.as_deref(), p.filling, p.stale.len()),
            (Some("a"), None, 0)
        );
    }
}
