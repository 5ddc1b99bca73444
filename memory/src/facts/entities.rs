//! Graph-lite: subjects normalised into entities (per namespace), with aliases.
//!
//! A fact's `subject` ("The Orion launch") is normalised (lowercase, punctuation to spaces, collapsed
//! whitespace, a leading article and a trailing possessive dropped: `orion launch`) and resolved
//! through the alias table to an entity of the namespace, created on first sight. Every spelling
//! seen is kept as an alias of its entity, and [`super::FactStore::alias`] joins another name to an
//! entity ("Orion" → the Orion launch), so "everything about X" is one indexed lookup whatever the
//! spelling. Entities are per namespace so that one agent's subjects never leak into another's.

use rusqlite::{Connection, OptionalExtension, params};

/// The normalised form of a subject or alias (empty when it has no letters or digits).
pub fn normalise(name: &str) -> String {
    let lowered: String = name
        .chars()
        .flat_map(char::to_lowercase)
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect();
    let mut words: Vec<&str> = lowered.split_whitespace().collect();
    if words.len() > 1 && matches!(words[0], "the" | "a" | "an") {
        words.remove(0);
    }
    // "Orion's" became "orion s": drop the possessive's lone `s`.
    if words.len() > 1 && words.last() == Some(&"s") {
        words.pop();
    }
    words.join(" ")
}

/// The entity `name` resolves to in `namespace`, if any.
pub fn find(conn: &Connection, namespace: &str, name: &str) -> rusqlite::Result<Option<i64>> {
    let norm = normalise(name);
    if norm.is_empty() {
        return Ok(None);
    }
    conn.query_row(
        "SELECT entity_id FROM memory_entity_aliases WHERE namespace = ?1 AND norm = ?2",
        params![namespace, norm],
        |r| r.get(0),
    )
    .optional()
}

/// Resolve `name` in `namespace`, creating its entity (and alias) on first sight; records this
/// spelling as an alias. None when the name normalises to nothing.
pub fn resolve(
    conn: &Connection,
    namespace: &str,
    name: &str,
    now_ms: i64,
) -> rusqlite::Result<Option<i64>> {
    let norm = normalise(name);
    if norm.is_empty() {
        return Ok(None);
    }
    if let Some(id) = find(conn, namespace, name)? {
        return Ok(Some(id));
    }
    conn.execute(
        "INSERT INTO memory_entities (namespace, name, norm, created_ms) VALUES (?1, ?2, ?3, ?4)",
        params![namespace, name.trim(), norm, now_ms],
    )?;
    let id = conn.last_insert_rowid();
    conn.execute(
        "INSERT INTO memory_entity_aliases (namespace, norm, alias, entity_id, created_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![namespace, norm, name.trim(), id, now_ms],
    )?;
    Ok(Some(id))
}

/// Why an alias could not be added.
#[derive(Debug, PartialEq, Eq)]
pub enum AliasError {
    /// The entity's name has no letters or digits, or names no entity.
    UnknownEntity,
    /// The alias has no letters or digits.
    Empty,
    /// The alias already names another entity (its id).
    Taken(i64),
}

/// Make `alias` resolve to the entity `entity` names in `namespace`.
pub fn add_alias(
    conn: &Connection,
    namespace: &str,
    entity: &str,
    alias: &str,
    now_ms: i64,
) -> rusqlite::Result<Result<i64, AliasError>> {
    let Some(id) = find(conn, namespace, entity)? else {
        return Ok(Err(AliasError::UnknownEntity));
    };
    let norm = normalise(alias);
    if norm.is_empty() {
        return Ok(Err(AliasError::Empty));
    }
    match find(conn, namespace, alias)? {
        Some(other) if other == id => return Ok(Ok(id)),
        Some(other) => return Ok(Err(AliasError::Taken(other))),
        None => {}
    }
    conn.execute(
        "INSERT INTO memory_entity_aliases (namespace, norm, alias, entity_id, created_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![namespace, norm, alias.trim(), id, now_ms],
    )?;
    Ok(Ok(id))
}

#[cfg(test)]
mod tests {
    use super::normalise;

    #[test]
    fn normalises_spellings_together() {
        assert_eq!(normalise("The Orion Launch"), "orion launch");
        assert_eq!(normalise("  orion   launch! "), "orion launch");
        assert_eq!(normalise("Orion's"), "orion");
        assert_eq!(normalise("the"), "the");
        assert_eq!(normalise("Zoë-Ann"), "zoë ann");
        assert_eq!(normalise("!!!"), "");
    }
}
