//! # Remote embeddings end to end (issue 39 §3), on the real `opc run`
//!
//! Role: `framework.memory.embedding.provider: openai-compatible` against a scripted `/embeddings`
//! endpoint on 127.0.0.1 (axum, in this test), with the privacy gateway on (patterns: e-mail
//! addresses and phone numbers, so no NER model is needed). Checked, in order, over the web chat
//! with the scripted LLM answering:
//! 1. the config validates and `opc run` does not list the feature as not active;
//! 2. every byte the endpoint receives is masked: no real e-mail address of the conversation, in
//!    any request (and the texts do arrive: the test can fail), with the key as a bearer token;
//! 3. the vectors are stored and used by recall search: the console's search for `automobile`
//!    finds the row about a sedan, which shares no word with it (only the vector half can);
//! 4. the calls are in the ledger as their own kind: the console's Costs list them apart;
//! 5. an endpoint that is down (503) delays the vectors, not the answer: the answer comes, the new
//!    rows stay without vectors, nothing is lost, and once it is up again they are embedded;
//! 6. a model change in the config (a restart with another `model`) re-embeds every row in the
//!    background: the endpoint sees the new model name for all rows, the new generation becomes the
//!    active one, and search still finds the sedan.
//!
//! Invariants: every wait has a deadline; order is asserted, never speed.

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use opc_tests::opc_process::{OpcRun, opc_binary};
use opc_tests::org::{KEY, KEY_VAR, marker, provider_yaml};
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use opc_tests::wait::{WAIT, WAIT_LONG, output_of, wait_for};
use opc_tests::web_chat;
use serde_json::{Value, json};

const DIMS: usize = 16;
const EMBED_KEY_VAR: &str = "OPC_TEST_EMBED_KEY";
const EMBED_KEY: &str = "sk-embed-test-4242";
const ANSWER: &str = "NOTED.";
const MARIA: &str = "maria.lopez@example.com";
const JON: &str = "jon.doe@example.org";
const SEDAN: &str =
    "My sedan broke down on the highway again; write to maria.lopez@example.com about the repair.";
const BUDGET: &str =
    "The quarterly budget review moved to Friday; tell jon.doe@example.org please.";

/// What the scripted endpoint received and how it answers.
#[derive(Default)]
struct Endpoint {
    /// Answer 503 to everything while set.
    down: AtomicBool,
    /// Every request body, as received.
    bodies: Mutex<Vec<String>>,
    /// Every `authorization` header.
    auth: Mutex<Vec<String>>,
    /// Per request answered with vectors: (model, inputs).
    served: Mutex<Vec<(String, Vec<String>)>>,
    /// Per request refused while down: its inputs.
    refused: Mutex<Vec<Vec<String>>>,
}

/// A word's component: the car words share one (the "meaning" this endpoint knows), every other
/// word hashes to one of the rest.
fn component(word: &str) -> usize {
    if matches!(word, "car" | "cars" | "automobile" | "sedan" | "vehicle") {
        return 0;
    }
    let hash = word.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    1 + (hash % (DIMS as u64 - 1)) as usize
}

fn vector(text: &str) -> Vec<f32> {
    let mut v = vec![0.0f32; DIMS];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        v[component(&word.to_lowercase())] += 1.0;
    }
    // The car component weighs more, so a text about a car is near any other.
    v[0] *= 4.0;
    v
}

async fn embeddings(State(ep): State<Arc<Endpoint>>, headers: HeaderMap, body: Bytes) -> Response {
    let text = String::from_utf8_lossy(&body).to_string();
    ep.bodies.lock().unwrap().push(text.clone());
    if let Some(auth) = headers.get("authorization").and_then(|v| v.to_str().ok()) {
        ep.auth.lock().unwrap().push(auth.to_string());
    }
    let Ok(request) = serde_json::from_str::<Value>(&text) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let inputs: Vec<String> = request["input"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if ep.down.load(Ordering::SeqCst) {
        ep.refused.lock().unwrap().push(inputs);
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({"error": {"message": "scripted outage"}})),
        )
            .into_response();
    }
    if request["dimensions"] != DIMS {
        return (StatusCode::BAD_REQUEST, "wrong dimensions").into_response();
    }
    let model = request["model"].as_str().unwrap_or_default().to_string();
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": vector(t)}))
        .collect();
    let tokens: usize = inputs.iter().map(|t| t.split_whitespace().count()).sum();
    ep.served.lock().unwrap().push((model, inputs));
    axum::Json(json!({"object": "list", "data": data, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}))
        .into_response()
}

/// The endpoint on 127.0.0.1: its state and base URL (`…/v1`).
async fn endpoint() -> (Arc<Endpoint>, String) {
    let ep = Arc::new(Endpoint::default());
    let app = axum::Router::new()
        .route("/v1/embeddings", post(embeddings))
        .with_state(ep.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (ep, format!("http://{addr}/v1"))
}

/// Write the org: the CEO with recall and `conversation_search`, privacy on (patterns), remote
/// embeddings with `model` at `url`, priced by a provider entry with the same base URL.
fn write_config(dir: &Path, llm: &ScriptedLlm, url: &str, model: &str) -> PathBuf {
    let providers = provider_yaml(&llm.url(), false);
    let yaml = format!(
        r#"
framework:
  name: Embedding Org
{providers}
    embedder:
      kind: openai-compatible
      baseUrl: {url}
      apiKeyEnv: {EMBED_KEY_VAR}
      models:
        {model}: {{ input: 0.02, output: 0 }}
  privacy: {{ enabled: true, requireNer: false, detectTypes: [EMAIL, PHONE] }}
  memory:
    consolidation: {{ enabled: false }}
    embedding: {{ provider: openai-compatible, model: {model}, dimensions: {DIMS}, baseUrl: '{url}', apiKeyEnv: {EMBED_KEY_VAR} }}
agents:
  ceo:
    role: CEO
    prompt: "You run the company."
    tools: [conversation_search]
channels:
  web: {{ listen: "127.0.0.1:0" }}
"#
    );
    let path = dir.join("opc.config.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

fn db(dir: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open_with_flags(
        dir.join(".opc/opc.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap()
}

/// `(seq, text)` of every recall row.
fn rows(dir: &Path) -> Vec<(i64, String)> {
    let db = db(dir);
    let mut stmt = db
        .prepare("SELECT seq, text FROM recall_messages ORDER BY seq")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The recall rows holding `needle`, and whether each has a vector of `model`.
fn embedded(dir: &Path, needle: &str, model: &str) -> Vec<bool> {
    let db = db(dir);
    rows(dir)
        .into_iter()
        .filter(|(_, text)| text.contains(needle))
        .map(|(seq, _)| {
            db.query_row(
                "SELECT COUNT(*) FROM recall_vectors WHERE seq = ?1 AND model = ?2",
                rusqlite::params![seq, model],
                |r| r.get::<_, i64>(0),
            )
            .unwrap_or(0)
                > 0
        })
        .collect()
}

/// The recall store's active generation, once there is one.
fn active_generation(dir: &Path) -> Option<String> {
    db(dir)
        .query_row(
            "SELECT model FROM memory_embedding_generations WHERE store = 'recall' AND state = 'active'",
            [],
            |r| r.get(0),
        )
        .ok()
}

async fn admin_get(opc: &OpcRun, path: &str) -> Value {
    let response = opc_tests::http_client()
        .get(opc.url(path))
        .send()
        .await
        .unwrap();
    assert!(
        response.status().is_success(),
        "GET {path}: {}",
        response.status()
    );
    response.json().await.unwrap()
}

/// The console's hybrid recall search for `q`: the texts of the hits the vector half found, best
/// first.
async fn search(opc: &OpcRun, q: &str) -> Vec<String> {
    let found = admin_get(opc, &format!("/admin/api/memory/search?q={q}&agent=ceo")).await;
    found["hits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| !h["vector_rank"].is_null())
        .filter_map(|h| h["message"]["text"].as_str().map(str::to_string))
        .collect()
}

/// Wait until the answer arrived in the web chat (a `message` or `edit` event carrying it).
async fn answered(sse: &mut opc_tests::sse::Sse) {
    sse.wait_for("message|edit", WAIT, |e| e["text"] == ANSWER)
        .await;
}

fn start(config: &Path) -> OpcRun {
    OpcRun::start(config, &[(KEY_VAR, KEY), (EMBED_KEY_VAR, EMBED_KEY)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_embeddings_are_masked_stored_searched_delayed_and_regenerated() {
    let script = Script::new().agent(marker("ceo"), vec![Step::text(ANSWER)]);
    let llm = ScriptedLlm::start(script).await.unwrap();
    let (ep, url) = endpoint().await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &llm, &url, "embed-v1");

    // 1. `opc validate` accepts it and lists nothing as not active.
    let mut validate = Command::new(opc_binary());
    validate
        .args(["validate", "--config"])
        .arg(&config)
        .env("NO_COLOR", "1")
        .env(KEY_VAR, KEY)
        .env(EMBED_KEY_VAR, EMBED_KEY);
    let out = output_of(validate, WAIT).await;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(!said.contains("openai-compatible embeddings"), "{said}");

    let opc = start(&config);
    assert!(!opc.stderr().contains("not active"), "{}", opc.stderr());

    // 2 and 3. A message with personal data about a sedan; the search for "automobile" finds it.
    let (_one, mut sse) = web_chat::start(&opc, SEDAN).await;
    answered(&mut sse).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let hits = search(&opc, "automobile").await;
        if hits.first().is_some_and(|h| h.contains("sedan")) {
            assert!(
                hits[0].contains(MARIA),
                "keywords and hits keep the real text: {hits:?}"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the vector search never found the sedan: {hits:?}; endpoint got {} requests; rows {:?}; vectors {:?}; active {:?}; stderr: {}",
            ep.bodies.lock().unwrap().len(),
            rows(dir.path()),
            embedded(dir.path(), "sedan", "openai-compatible:embed-v1:16"),
            active_generation(dir.path()),
            opc.stderr()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    {
        let bodies = ep.bodies.lock().unwrap();
        assert!(
            bodies.iter().any(|b| b.contains("sedan")),
            "the texts reach the endpoint: {bodies:?}"
        );
        for body in bodies.iter() {
            assert!(
                !body.contains(MARIA) && !body.contains("maria.lopez"),
                "{body}"
            );
        }
        let auth = ep.auth.lock().unwrap();
        assert!(!auth.is_empty() && auth.iter().all(|a| a == &format!("Bearer {EMBED_KEY}")));
    }

    // 4. The ledger: the calls are in Costs, apart.
    let costs = admin_get(&opc, "/admin/api/costs").await;
    let embeddings = costs["today"]["embeddings"].as_array().unwrap();
    assert_eq!(embeddings.len(), 1, "{costs}");
    assert_eq!(embeddings[0]["key"], "embedder/embed-v1", "{costs}");
    assert!(embeddings[0]["calls"].as_u64().unwrap() >= 1, "{costs}");
    assert!(embeddings[0]["tokens_in"].as_u64().unwrap() > 0, "{costs}");
    assert!(
        costs["today"]["by_work"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["key"] == "embedding"),
        "{costs}"
    );

    // 5. The endpoint goes down: the answer still comes, the rows wait, nothing is lost.
    ep.down.store(true, Ordering::SeqCst);
    let (_two, mut sse) = web_chat::start(&opc, BUDGET).await;
    answered(&mut sse).await;
    wait_for(WAIT, "a refused request carrying the new message", || {
        ep.refused
            .lock()
            .unwrap()
            .iter()
            .any(|inputs| inputs.iter().any(|t| t.contains("budget")))
            .then_some(())
    })
    .await;
    let waiting = embedded(dir.path(), "budget", "openai-compatible:embed-v1:16");
    assert_eq!(waiting, [false], "stored without its vector while down");
    for inputs in ep.refused.lock().unwrap().iter() {
        for text in inputs {
            assert!(!text.contains(JON), "{text}");
        }
    }
    ep.down.store(false, Ordering::SeqCst);
    wait_for(
        WAIT_LONG,
        "the waiting row embedded once the endpoint is up",
        || {
            (embedded(dir.path(), "budget", "openai-compatible:embed-v1:16") == [true])
                .then_some(())
        },
    )
    .await;
    let (_, stderr) = opc.stop();
    assert!(!stderr.contains(EMBED_KEY), "the key is never printed");

    // 6. Another model: a restart re-embeds every row in the background, then switches.
    let all = rows(dir.path());
    assert!(all.len() >= 4, "{all:?}");
    let config = write_config(dir.path(), &llm, &url, "embed-v2");
    let opc = start(&config);
    wait_for(WAIT_LONG, "the embed-v2 generation active", || {
        (active_generation(dir.path()).as_deref() == Some("openai-compatible:embed-v2:16"))
            .then_some(())
    })
    .await;
    let v2_inputs: usize = ep
        .served
        .lock()
        .unwrap()
        .iter()
        .filter(|(model, _)| model == "embed-v2")
        .map(|(_, inputs)| inputs.len())
        .sum();
    assert!(
        v2_inputs >= all.len(),
        "{v2_inputs} texts embedded by v2 for {} rows",
        all.len()
    );
    for (seq, _) in &all {
        let db = db(dir.path());
        let models: Vec<String> = db
            .prepare("SELECT model FROM recall_vectors WHERE seq = ?1")
            .unwrap()
            .query_map([seq], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(models, ["openai-compatible:embed-v2:16"], "row {seq}");
    }
    let hits = search(&opc, "automobile").await;
    assert!(
        hits.first().is_some_and(|h| h.contains("sedan")),
        "{hits:?}"
    );
    for body in ep.bodies.lock().unwrap().iter() {
        assert!(!body.contains(MARIA) && !body.contains(JON), "{body}");
    }
    opc.stop();
}
