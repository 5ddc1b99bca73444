//! The namespace ACL: which agent may read or write which memory, decided from the org tree.
//!
//! Namespaces: every agent owns `agent/<id>` (its core blocks and its recall history); `shared` holds
//! the `sharedBlocks`, each visible to the agents whose `memory.sharedBlocks` references it.
//!
//! Reading an agent's namespace (blocks and recall alike):
//! - an agent reads its own;
//! - a superior (any ancestor) reads every descendant's — a manager must be able to see what its team
//!   knows;
//! - a sibling reads only when the owner lists it in `shareWith` (one-way: `a` sharing with `b` lets `b`
//!   read `a`, not the reverse), and only at the same level (validation enforces it; checked again here);
//! - nobody reads upward or across branches (a cousin never reads, even a same-level one named in
//!   `shareWith`: only siblings share).
//!
//! Writing: an agent writes only its own namespace (its non-`readOnly` blocks; its own recall history),
//! plus the non-`readOnly` shared blocks it references. A superior reads but never writes a
//! subordinate's memory: directives go through delegation, where they are recorded as tasks.
//!
//! Invariant: every block and recall call is checked here, inside the memory crate, before storage is
//! touched; callers cannot bypass it because the storage APIs take the acting agent, not a namespace.

use std::collections::HashMap;
use std::sync::Arc;

use opc_hierarchy::{Config, OrgTree};

/// A refusal, written for the model (it says why and what is allowed instead).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{agent} may not {action}: {reason}")]
pub struct AclError {
    /// Who asked.
    pub agent: String,
    /// What was refused, e.g. "read the memory of `ceo`".
    pub action: String,
    /// Why, and what the agent may do instead.
    pub reason: String,
}

/// The ACL of one org. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Acl {
    org: Arc<OrgTree>,
    /// Shared block label → (agents referencing it, readOnly).
    shared: Arc<HashMap<String, (Vec<String>, bool)>>,
}

impl Acl {
    /// The ACL of a validated config.
    pub fn new(config: &Config, org: Arc<OrgTree>) -> Acl {
        let mut shared: HashMap<String, (Vec<String>, bool)> = config
            .shared_blocks
            .iter()
            .map(|(label, b)| (label.clone(), (Vec::new(), b.read_only)))
            .collect();
        for (id, agent) in &config.agents {
            for label in &agent.memory.shared_blocks {
                if let Some((refs, _)) = shared.get_mut(label) {
                    refs.push(id.clone());
                }
            }
        }
        Acl {
            org,
            shared: Arc::new(shared),
        }
    }

    /// The org tree the ACL is drawn from.
    pub fn org(&self) -> &OrgTree {
        &self.org
    }

    /// Whether `reader` may read `owner`'s namespace (its core blocks and its recall history).
    pub fn may_read(&self, reader: &str, owner: &str) -> bool {
        let org = &*self.org;
        if !org.contains(reader) || !org.contains(owner) {
            return false;
        }
        reader == owner
            || org.is_ancestor(reader, owner)
            || (org.parent(reader).is_some()
                && org.parent(reader) == org.parent(owner)
                && org.level(reader) == org.level(owner)
                && org.shares_with(owner, reader))
    }

    /// [`Acl::may_read`] as a result whose error explains the refusal.
    pub fn check_read(&self, reader: &str, owner: &str) -> Result<(), AclError> {
        if self.may_read(reader, owner) {
            return Ok(());
        }
        let org = &*self.org;
        let reason = if !org.contains(owner) {
            "there is no agent with that id".to_string()
        } else if !org.contains(reader) {
            "the reader is not an agent of this org".to_string()
        } else if org.is_ancestor(owner, reader) {
            format!("`{owner}` is above you; nobody reads a superior's memory")
        } else if org.parent(reader) == org.parent(owner) {
            format!("`{owner}` does not share its memory with you (`shareWith`)")
        } else {
            format!("`{owner}` is not in your branch of the org")
        };
        Err(AclError {
            agent: reader.to_string(),
            action: format!("read the memory of `{owner}`"),
            reason: format!(
                "{reason}. You may read: {}",
                self.readable(reader).join(", ")
            ),
        })
    }

    /// Whether `writer` may write `owner`'s namespace: only its own.
    pub fn may_write(&self, writer: &str, owner: &str) -> bool {
        writer == owner && self.org.contains(writer)
    }

    /// [`Acl::may_write`] as a result whose error explains the refusal.
    pub fn check_write(&self, writer: &str, owner: &str) -> Result<(), AclError> {
        if self.may_write(writer, owner) {
            return Ok(());
        }
        Err(AclError {
            agent: writer.to_string(),
            action: format!("write the memory of `{owner}`"),
            reason: "an agent writes only its own memory (and the shared blocks it references); \
                     delegate a task to ask another agent to change theirs"
                .to_string(),
        })
    }

    /// Whether `agent` references shared block `label` (and so may read it).
    pub fn may_read_shared(&self, agent: &str, label: &str) -> bool {
        self.shared
            .get(label)
            .is_some_and(|(refs, _)| refs.iter().any(|r| r == agent))
    }

    /// Whether `agent` may edit shared block `label`: it references it and it is not `readOnly`.
    pub fn may_write_shared(&self, agent: &str, label: &str) -> bool {
        self.shared
            .get(label)
            .is_some_and(|(refs, read_only)| !read_only && refs.iter().any(|r| r == agent))
    }

    /// [`Acl::may_read_shared`] as a result.
    pub fn check_read_shared(&self, agent: &str, label: &str) -> Result<(), AclError> {
        if self.may_read_shared(agent, label) {
            return Ok(());
        }
        Err(AclError {
            agent: agent.to_string(),
            action: format!("read the shared block `{label}`"),
            reason: "only the agents that list it in `memory.sharedBlocks` see it".to_string(),
        })
    }

    /// Every agent whose namespace `reader` may read (itself first, then the org's order): the filter
    /// recall search applies.
    pub fn readable(&self, reader: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        if self.org.contains(reader) {
            out.push(reader.to_string());
        }
        out.extend(
            self.org
                .agent_ids()
                .filter(|id| *id != reader && self.may_read(reader, id))
                .map(str::to_string),
        );
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// ceo → (a → (a1 → a1x), b, c → c1). a shares with b (not with c); a1 and c1 are cousins. (A
    /// cousin named in shareWith is refused by validation — `hierarchy/tests/fixtures/invalid/
    /// sharewith-cousin.yaml` — and `may_read` requires siblings besides.)
    fn acl() -> Acl {
        let text = "framework:\n  defaultModel: m\n  providers: { p: { kind: anthropic, models: { m: { input: 1, output: 1 } } } }\n  privacy: { enabled: false }\n  memory: { consolidation: { enabled: false } }\nsharedBlocks:\n  team: { description: d, value: v }\n  rules: { description: d, value: v, readOnly: true }\nagents:\n  ceo: { role: CEO, children: [a, b, c] }\n  a: { role: A, parent: ceo, children: [a1], memory: { shareWith: [b], sharedBlocks: [team, rules] } }\n  b: { role: B, parent: ceo, memory: { sharedBlocks: [team] } }\n  c: { role: C, parent: ceo, children: [c1] }\n  a1: { role: A1, parent: a, children: [a1x] }\n  a1x: { role: A1X, parent: a1 }\n  c1: { role: C1, parent: c }\n";
        let loaded = opc_hierarchy::parse("t.yaml", text.to_string(), None)
            .unwrap_or_else(|e| panic!("{e}"));
        Acl::new(&loaded.config, Arc::new(loaded.org))
    }

    /// The full matrix. Each row: relation, reader, owner, then read/write on blocks and on recall,
    /// and read on facts (the same namespace rule governs all three, which the row checks rather
    /// than assumes; facts are written only through the agent's own namespace, like recall).
    #[test]
    fn namespace_matrix() {
        let acl = acl();
        // Facts are read under the same namespaces as recall: one fact per agent in a real store,
        // found (or not) by a search over what the reader may read.
        let dir = tempfile::tempdir().unwrap();
        let facts =
            crate::facts::FactStore::open(&dir.path().join("db.sqlite"), Default::default())
                .unwrap();
        for owner in ["ceo", "a", "b", "c", "a1", "a1x", "c1"] {
            let who = crate::facts::Provenance {
                agent: owner.to_string(),
                ..Default::default()
            };
            facts
                .insert(
                    &format!("agent/{owner}"),
                    &format!("The codeword of {owner} is zebra"),
                    Some("codeword"),
                    &who,
                    1,
                )
                .unwrap();
        }
        // relation, reader, owner, then the expected answers.
        type Row = (
            &'static str,
            &'static str,
            &'static str,
            bool,
            bool,
            bool,
            bool,
            bool,
        );
        #[rustfmt::skip]
        let rows: &[Row] = &[
            // relation,                 reader, owner, blk read, blk write, recall read, recall write, facts read
            ("self",                      "a",   "a",   true,  true,  true,  true,  true ),
            ("parent reads child",        "a",   "a1",  true,  false, true,  false, true ),
            ("grandparent",               "ceo", "a1",  true,  false, true,  false, true ),
            ("great-grandparent",         "ceo", "a1x", true,  false, true,  false, true ),
            ("child reads parent",        "a1",  "a",   false, false, false, false, false),
            ("grandchild reads grandpa",  "a1x", "a",   false, false, false, false, false),
            ("grandchild reads root",     "a1x", "ceo", false, false, false, false, false),
            ("sibling with shareWith",    "b",   "a",   true,  false, true,  false, true ),
            ("shareWith is one-way",      "a",   "b",   false, false, false, false, false),
            ("sibling without shareWith", "c",   "a",   false, false, false, false, false),
            ("cousin",                    "c1",  "a1",  false, false, false, false, false),
            ("cousin, the other way",     "a1",  "c1",  false, false, false, false, false),
            ("uncle reads nephew",        "b",   "a1",  false, false, false, false, false),
            ("unknown reader",            "zz",  "a",   false, false, false, false, false),
            ("unknown owner",             "a",   "zz",  false, false, false, false, false),
        ];
        for &(relation, reader, owner, br, bw, rr, rw, fr) in rows {
            // Blocks and recall share the namespace rule.
            assert_eq!(acl.may_read(reader, owner), br, "{relation}: block read");
            assert_eq!(acl.may_write(reader, owner), bw, "{relation}: block write");
            assert_eq!(
                acl.readable(reader).iter().any(|o| o == owner),
                rr,
                "{relation}: recall read"
            );
            assert_eq!(acl.may_write(reader, owner), rw, "{relation}: recall write");
            let namespaces: Vec<String> = acl
                .readable(reader)
                .iter()
                .map(|a| format!("agent/{a}"))
                .collect();
            let query = crate::facts::FactQuery {
                text: "zebra codeword".to_string(),
                namespaces: namespaces.clone(),
                view: crate::facts::View::Current,
                limit: 100,
            };
            let found = facts.search(&query).unwrap();
            let ns = format!("agent/{owner}");
            assert_eq!(
                found.iter().any(|h| h.version.namespace == ns),
                fr,
                "{relation}: facts read (search)"
            );
            let about = facts
                .about(&namespaces, "Codeword", crate::facts::View::Current)
                .unwrap();
            assert_eq!(
                about.iter().any(|v| v.namespace == ns),
                fr,
                "{relation}: facts read (about)"
            );
            assert_eq!(
                acl.check_read(reader, owner).is_ok(),
                br,
                "{relation}: check_read"
            );
            assert_eq!(
                acl.check_write(reader, owner).is_ok(),
                bw,
                "{relation}: check_write"
            );
        }
    }

    #[test]
    fn shared_blocks_follow_references_and_read_only() {
        let acl = acl();
        #[rustfmt::skip]
        let rows: &[(&str, &str, bool, bool)] = &[
            // agent, label,  read,  write
            ("a",   "team",  true,  true),
            ("b",   "team",  true,  true),
            ("a",   "rules", true,  false), // readOnly
            ("b",   "rules", false, false), // not referenced
            ("ceo", "team",  false, false), // superiors do not get shared blocks for free
            ("a",   "nope",  false, false),
        ];
        for &(agent, label, read, write) in rows {
            assert_eq!(
                acl.may_read_shared(agent, label),
                read,
                "{agent} {label} read"
            );
            assert_eq!(
                acl.may_write_shared(agent, label),
                write,
                "{agent} {label} write"
            );
        }
    }

    #[test]
    fn refusals_explain_themselves() {
        let acl = acl();
        let e = acl.check_read("a1", "a").unwrap_err();
        assert!(e.to_string().contains("is above you"), "{e}");
        assert!(e.to_string().contains("You may read: a1, a1x"), "{e}");
        let e = acl.check_read("c", "a").unwrap_err();
        assert!(e.to_string().contains("shareWith"), "{e}");
        let e = acl.check_read("a1", "c1").unwrap_err();
        assert!(e.to_string().contains("not in your branch"), "{e}");
        assert_eq!(acl.readable("ceo").len(), 7);
    }
}
