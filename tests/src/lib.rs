//! # opc-tests — end-to-end tests and their test doubles
//!
//! Role: the workspace member that holds end-to-end tests which drive the real `opc` components over real
//! sockets on 127.0.0.1, and the test doubles they need (a scripted LLM server, a fake Slack, a fake
//! Discord). Test doubles live here and nowhere else, so no product crate can reach them.
//!
//! Invariant: nothing in this crate talks to any host other than the loopback interface.

pub mod browser;
pub mod fake_discord;
pub mod fake_slack;
pub mod opc_process;
pub mod org;
pub mod scripted_llm;
pub mod sse;

/// A reqwest client for tests. reqwest is built without a default TLS provider (the product picks
/// ring once at start-up), so the provider is installed here first, once per process.
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}
