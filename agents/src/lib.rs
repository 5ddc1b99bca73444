//! # opc-agents — the agents engine
//!
//! Role: the LLM call stack (timeout, retry, rate limit, privacy, tracing, cost as composable layers),
//! agent sessions and their tools, the context builder (write / select / compress / isolate), the
//! orchestrator that runs delegation down the [`opc_hierarchy::OrgTree`], the event bus and the ledger.
//!
//! Invariants (enforced once the agents-engine issue lands):
//! - an agent can only delegate to its direct children, whatever the model asks;
//! - each task is an independent session that sees only its direct parent's instructions;
//! - every task state change is a database transaction.
//!
//! Dependency direction: `opc-hierarchy` ← `opc-memory` ← `opc-agents` → `opc-privacy`.
