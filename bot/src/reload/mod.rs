//! Hot reload of `opc.config.yaml` in `opc run`: a save from the admin console, a change to the file
//! or to a prompt file on disk (watched, debounced), `SIGHUP`, or — on a cluster — a config saved in
//! another node's console ([`Reloader::follow`]).
//!
//! A reload reads the file, validates it exactly as `opc validate` does, and only then applies it:
//! the engine builds a new runtime for roots started from then on ([`opc_agents::Engine::reload`]),
//! the gateway picks up the new rate limits, and the live config ([`crate::live::LiveConfig`]) — which `/api/org`, approvers and
//! the console read — switches in one step.
//!
//! Invariants:
//! - an invalid config is never applied: the running one stays, and the errors go to stderr, the
//!   console's banner ([`Reloader::status`]) and an event ([`opc_agents::Event::ConfigRejected`]);
//! - reloads run one at a time, and a reload of the files already running does nothing (the console's
//!   own save is seen again by the watcher and ignored that way);
//! - trees in flight finish with the config they started with; no inbound message waits on a reload
//!   or is dropped by one (the gateway reads the config per message);
//! - settings that live in a running connection or file (the web listener, Slack, Discord, the
//!   database) are not swapped: a reload that changes them says a restart is needed for them. They are
//!   compared with the values the process started with ([`crate::live::LiveConfig::started`]), so setting one back
//!   to the running value is not reported as a change;
//! - every reload says what it did, on stdout or stderr and in [`Reloader::status`]: applied (with the
//!   agents added, removed and changed and the sections changed), unchanged (said for `SIGHUP`, which
//!   a person sent and waits to see answered; the watcher's no-op rounds stay quiet), or refused with
//!   the errors. A file put back byte for byte to the running config withdraws a refusal: the banner
//!   goes away.
//!
//! One concern a file, none of them reaching back: `outcome` (what a reload reports), `files` (the
//! digests and the watched paths), `reloader` (the reload itself, on those two), and the three ways a
//! reload is asked for besides the console (on the reloader): `watcher`, `signal`, and `follow`,
//! which writes the cluster's newest saved config to the file and reloads it. The diff of two
//! configs is `opc_hierarchy::changes`, a pure function with its tests.

mod files;
mod follow;
mod outcome;
mod reloader;
mod signal;
mod watcher;

pub use outcome::Trigger;
pub use reloader::Reloader;
