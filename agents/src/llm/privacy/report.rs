//! What the privacy layer reports about a call: counts by type ([`TypeCounts`]) in a
//! [`PrivacyReport`], for the ledger, the bus and `opc tasks --tree`.
//!
//! Invariant: a report carries counts by type, the mode and where a request was routed, never a
//! value.

use std::fmt;

use opc_privacy::{Counts, EntityType};
use serde::Serialize;
use serde_json::Value;

/// Counts by type, in the config's order of types, zero counts left out. Serialised as a map
/// (`{"PERSON_NAME": 2, "EMAIL": 1}`); displayed as `PERSON_NAME 2, EMAIL 1`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TypeCounts(Vec<(EntityType, u32)>);

impl TypeCounts {
    /// The count of `kind`.
    pub fn get(&self, kind: EntityType) -> u32 {
        self.0
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(0, |(_, n)| *n)
    }

    /// Set the count of `kind` (0 removes it), keeping the config's order.
    pub fn set(&mut self, kind: EntityType, n: u32) {
        self.0.retain(|(k, _)| *k != kind);
        if n > 0 {
            self.0.push((kind, n));
            self.0.sort_by_key(|(k, _)| *k);
        }
    }

    /// All occurrences.
    pub fn total(&self) -> u32 {
        self.0.iter().map(|(_, n)| n).sum()
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `(type, count)`, in the config's order.
    pub fn iter(&self) -> impl Iterator<Item = (EntityType, u32)> + '_ {
        self.0.iter().copied()
    }

    /// Keep, per type, the larger of this count and `other`'s.
    pub fn max_with(&mut self, other: &TypeCounts) {
        for (kind, n) in other.iter() {
            if n > self.get(kind) {
                self.set(kind, n);
            }
        }
    }

    /// The counts as a JSON object, for the ledger.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }

    /// Counts from the ledger's JSON object; unknown types and malformed text count as nothing.
    pub fn from_json(json: &str) -> TypeCounts {
        let mut counts = TypeCounts::default();
        if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(json) {
            for (name, n) in map {
                if let (Some(kind), Some(n)) = (EntityType::parse(&name), n.as_u64()) {
                    counts.set(kind, n as u32);
                }
            }
        }
        counts
    }

    /// `masked 3 (PERSON_NAME 2, EMAIL 1)`, or `None` when nothing was masked.
    pub fn summary(&self) -> Option<String> {
        (!self.is_empty()).then(|| format!("masked {} ({self})", self.total()))
    }
}

impl From<&Counts> for TypeCounts {
    fn from(counts: &Counts) -> Self {
        TypeCounts(counts.iter().collect())
    }
}

impl fmt::Display for TypeCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (kind, n)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{kind} {n}")?;
        }
        Ok(())
    }
}

impl Serialize for TypeCounts {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (kind, n) in &self.0 {
            map.serialize_entry(kind.as_str(), n)?;
        }
        map.end()
    }
}

/// Read back as [`TypeCounts::from_json`] reads the ledger: unknown types count as nothing (an
/// event relayed from a node that knows a type this one does not).
impl<'de> serde::Deserialize<'de> for TypeCounts {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = std::collections::BTreeMap::<String, u32>::deserialize(deserializer)?;
        let mut counts = TypeCounts::default();
        for (name, n) in map {
            if let Some(kind) = EntityType::parse(&name) {
                counts.set(kind, n);
            }
        }
        Ok(counts)
    }
}

/// What the privacy layer did to one call (counts by type, never values).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PrivacyReport {
    /// The mode (`mask`, `redact`, `route`).
    pub mode: &'static str,
    /// Personal data found in the request, by type: replaced (mask, redact) or sent to the trusted
    /// model (route).
    pub counts: TypeCounts,
    /// `provider/model` the request was routed to, when `route` sent it there.
    pub routed_to: Option<String>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn counts_round_trip_through_the_ledger_and_read_as_people_expect() {
        let mut counts = TypeCounts::default();
        counts.set(EntityType::Email, 1);
        counts.set(EntityType::PersonName, 2);
        assert_eq!(counts.to_string(), "PERSON_NAME 2, EMAIL 1");
        assert_eq!(
            counts.summary().unwrap(),
            "masked 3 (PERSON_NAME 2, EMAIL 1)"
        );
        assert_eq!(counts.to_json(), r#"{"PERSON_NAME":2,"EMAIL":1}"#);
        assert_eq!(TypeCounts::from_json(&counts.to_json()), counts);
        let mut other = TypeCounts::default();
        other.set(EntityType::Email, 4);
        counts.max_with(&other);
        assert_eq!(counts.to_string(), "PERSON_NAME 2, EMAIL 4");
        assert_eq!(TypeCounts::default().summary(), None);
    }
}
