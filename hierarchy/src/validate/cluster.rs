//! Cluster: `framework.cluster` only does something when several nodes can share the org's state,
//! that is with `framework.memory.storage: postgres`.
//!
//! Invariant: only a section that changes something is judged (a `cluster:` written with the
//! default values is harmless, and a config that never mentions it is not asked to); what the
//! decoder said about `leaseTtl` (too short, not a duration) is not said again.

use super::checker::Checker;
use crate::diagnostic::{Anchor, KeyPath};
use crate::schema::{ClusterSettings, Storage};

impl<'a> Checker<'a> {
    /// `framework.cluster` with SQLite: one process owns the file, there is no other node to take
    /// a tree over, so a lease setting has no effect.
    pub(super) fn cluster(&mut self) {
        let framework = &self.config.framework;
        if framework.memory.storage == Storage::Postgres
            || framework.cluster == ClusterSettings::default()
        {
            return;
        }
        let base = KeyPath::of(["framework", "cluster"]);
        let path = if self.node_at(&base.clone().key("leaseTtl")).is_some() {
            base.key("leaseTtl")
        } else {
            base
        };
        self.warning(
            path,
            Anchor::Key,
            "`framework.cluster` has no effect with `framework.memory.storage: sqlite`: one `opc run` owns the SQLite file, so there are no other nodes to take its work over".into(),
            "set `framework.memory.storage: postgres` to run several nodes on one database (see `opc store copy --to postgres`), or remove `framework.cluster`",
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::Duration;

    use crate::{ConfigError, Severity, parse};

    const HEAD: &str = "framework:\n  defaultModel: m\n  providers: { p: { kind: anthropic, models: { m: { input: 1, output: 1 } } } }\n";
    const ORG: &str = "agents:\n  ceo: { role: CEO }\n";

    /// One diagnostic as `(severity, line, column, path, message)`.
    type Found = (Severity, u32, u32, String, String);

    /// Every diagnostic about `framework.cluster` for the framework lines `framework`, and the
    /// lease decoded when the config is valid.
    fn judge(framework: &str) -> (Vec<Found>, Option<Duration>) {
        let text = format!("{HEAD}{framework}{ORG}");
        let (diagnostics, lease) = match parse("t.yaml", text, None) {
            Ok(loaded) => (
                loaded.report.diagnostics,
                Some(loaded.config.framework.cluster.lease_ttl),
            ),
            Err(ConfigError::Invalid(report)) => (report.diagnostics, None),
            Err(e) => panic!("{e}"),
        };
        let cluster = diagnostics
            .into_iter()
            .filter(|d| d.path.starts_with("framework.cluster"))
            .map(|d| (d.severity, d.line(), d.column(), d.path.clone(), d.message))
            .collect();
        (cluster, lease)
    }

    #[test]
    fn the_default_lease_is_fifteen_seconds_and_needs_no_section() {
        assert_eq!(judge(""), (Vec::new(), Some(Duration::from_secs(15))));
    }

    #[test]
    fn a_lease_on_postgres_is_taken_as_written() {
        let (found, lease) =
            judge("  memory: { storage: postgres }\n  cluster:\n    leaseTtl: 5s\n");
        assert_eq!(found, Vec::new());
        assert_eq!(lease, Some(Duration::from_secs(5)));
    }

    #[test]
    fn a_lease_shorter_than_three_seconds_is_refused_with_the_minimum() {
        let (found, lease) =
            judge("  memory: { storage: postgres }\n  cluster:\n    leaseTtl: 2500ms\n");
        assert_eq!(lease, None, "invalid");
        assert_eq!(found.len(), 1, "{found:?}");
        let (severity, line, column, path, message) = &found[0];
        assert_eq!(
            (*severity, *line, *column, path.as_str()),
            (Severity::Error, 6, 15, "framework.cluster.leaseTtl")
        );
        assert!(message.contains("2s 500ms is too short"), "{message}");
        assert!(message.contains("the shortest is 3s"), "{message}");
        // Exactly the minimum is accepted.
        let (found, lease) =
            judge("  memory: { storage: postgres }\n  cluster: { leaseTtl: 3s }\n");
        assert_eq!((found, lease), (Vec::new(), Some(Duration::from_secs(3))));
    }

    #[test]
    fn a_lease_that_is_not_a_duration_is_refused() {
        for bad in ["15", "soon", "0s"] {
            let (found, lease) = judge(&format!("  cluster: {{ leaseTtl: {bad} }}\n"));
            assert_eq!(lease, None, "{bad}");
            assert_eq!(found.len(), 1, "{bad}: {found:?}");
            assert_eq!(found[0].0, Severity::Error, "{bad}");
        }
    }

    #[test]
    fn unknown_keys_in_the_section_are_refused() {
        let (found, lease) = judge("  cluster: { leaseTTL: 5s }\n");
        assert_eq!(lease, None);
        assert!(
            found
                .iter()
                .any(|d| d.0 == Severity::Error && d.4.contains("leaseTTL")),
            "{found:?}"
        );
    }

    #[test]
    fn a_changed_section_on_sqlite_is_warned_about() {
        let (found, lease) = judge("  cluster:\n    leaseTtl: 30s\n");
        assert_eq!(
            lease,
            Some(Duration::from_secs(30)),
            "valid: a warning only"
        );
        assert_eq!(found.len(), 1, "{found:?}");
        let (severity, line, column, path, message) = &found[0];
        assert_eq!(
            (*severity, *line, *column, path.as_str()),
            (Severity::Warning, 5, 5, "framework.cluster.leaseTtl")
        );
        assert!(message.contains("has no effect"), "{message}");
        // The defaults written out change nothing, so they are not warned about.
        assert_eq!(judge("  cluster: { leaseTtl: 15s }\n").0, Vec::new());
    }
}
