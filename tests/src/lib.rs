//! # opc-tests — end-to-end tests and their test doubles
//!
//! Role: the workspace member that holds end-to-end tests which drive the real `opc` components over real
//! sockets on 127.0.0.1, and the test doubles they need (a scripted LLM server, a fake Slack, a fake
//! Discord). Test doubles live here and nowhere else, so no product crate can reach them.
//!
//! Invariant: nothing in this crate talks to any host other than the loopback interface.

pub mod browser;
pub mod cluster;
pub mod example;
pub mod fake_discord;
pub mod fake_slack;
pub mod fresh;
pub mod module_graph;
pub mod opc_process;
pub mod org;
pub mod otlp;
pub mod postgres;
pub mod proc_status;
pub mod reload;
pub mod sandbox;
pub mod scripted_llm;
pub mod sse;
pub mod wait;
pub mod web_chat;
pub mod word_vectors;

/// A reqwest client for tests. reqwest is built without a default TLS provider (the product picks
/// ring once at start-up), so the provider is installed here first, once per process.
///
/// No request can hang a test: connecting gives up after 10 s and a response that sends nothing for
/// 60 s fails (a per-read limit, not a total one, so event streams stay open while they are alive).
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .read_timeout(std::time::Duration::from_secs(60))
        .build()
        .unwrap_or_else(|e| panic!("test HTTP client: {e}"))
}

/// POST `body` as JSON to `url`: the status and the JSON answer (`Null` when it is not JSON).
pub async fn post_json(url: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
    let response = http_client()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {url}: {e}"));
    let status = response.status().as_u16();
    let body = response.json().await.unwrap_or(serde_json::Value::Null);
    (status, body)
}
