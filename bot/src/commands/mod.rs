//! One module per subcommand. What several of them share (loading the config, the runtime, the
//! database, printing) lives outside, in leaf modules the server parts use too, so that this module
//! depends on the rest of the binary and nothing depends back on it.

pub mod chat;
pub mod embedder;
pub mod init;
pub mod memory;
pub mod memory_blocks;
pub mod memory_facts;
pub mod memory_graph;
pub mod models;
pub mod privacy;
pub mod run;
pub mod slack;
pub mod store;
pub mod tasks;
pub mod validate;
pub mod visualize;
