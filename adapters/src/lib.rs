//! # opc-adapters — chat platforms behind one trait
//!
//! Role: normalise Slack, Discord and the built-in web chat into one stream of inbound events (mention,
//! follow-up, button action, slash command) and one set of outbound operations (post, reply, streaming
//! reply, approval card, ephemeral reply). One file per platform.
//!
//! Invariants (enforced once the gateway issue lands):
//! - this crate depends on no other OPC crate: it knows platforms, not agents;
//! - inbound HTTP requests are verified (Slack signatures, Discord Ed25519) before anything is parsed;
//! - every inbound event is acknowledged before any slow work starts.
