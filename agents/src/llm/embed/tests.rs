//! The remote embedder against a scripted `/embeddings` server on 127.0.0.1: batching, masking,
//! the ledger, retries, a down endpoint and a refusal.

#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opc_privacy::EntityType;
use opc_privacy::detect::{DetectOptions, Detector, NerSlot};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// What the server was sent and will answer.
#[derive(Default)]
struct Script {
    /// Statuses for the next requests (200 when empty).
    statuses: VecDeque<u16>,
    /// Every request body received.
    bodies: Vec<String>,
    /// Every `authorization` header received.
    auth: Vec<String>,
    /// A request whose inputs include this text is refused with 400 (an input too long for it).
    refuse: Option<String>,
    /// Never answer (an endpoint that accepts and hangs).
    hang: bool,
}

type Shared = Arc<Mutex<Script>>;

/// A vector for `text`: letter counts folded into `dims` components (unnormalised on purpose).
fn vector(text: &str, dims: usize) -> Vec<f32> {
    let mut v = vec![0.0; dims];
    for b in text.bytes() {
        v[b as usize % dims] += 1.0;
    }
    v
}

async fn handle(mut socket: tokio::net::TcpStream, script: Shared) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let (head_end, length) = loop {
        let Ok(n) = socket.read(&mut chunk).await else {
            return;
        };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..at]).to_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (at + 4, length);
        }
    };
    while buf.len() < head_end + length {
        let Ok(n) = socket.read(&mut chunk).await else {
            return;
        };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let body = String::from_utf8_lossy(&buf[head_end..head_end + length]).to_string();
    let (status, hang) = {
        let mut s = script.lock().unwrap();
        s.bodies.push(body.clone());
        let refused = s
            .refuse
            .as_ref()
            .is_some_and(|r| body.contains(&format!("\"{r}\"")));
        if let Some(auth) = head
            .lines()
            .find(|l| l.to_lowercase().starts_with("authorization:"))
        {
            s.auth.push(auth.to_string());
        }
        let scripted = s.statuses.pop_front().unwrap_or(200);
        (if refused { 400 } else { scripted }, s.hang)
    };
    if hang {
        std::future::pending::<()>().await;
    }
    let reply = if status == 200 {
        let request: serde_json::Value = serde_json::from_str(&body).unwrap();
        let dims = request["dimensions"].as_u64().unwrap() as usize;
        let inputs = request["input"].as_array().unwrap();
        let data: Vec<serde_json::Value> = inputs
            .iter()
            .enumerate()
            .rev()
            .map(|(i, t)| serde_json::json!({"index": i, "embedding": vector(t.as_str().unwrap(), dims)}))
            .collect();
        serde_json::json!({"data": data, "usage": {"prompt_tokens": inputs.len() * 10}}).to_string()
    } else {
        serde_json::json!({"error": {"message": format!("scripted {status}")}}).to_string()
    };
    let text = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
        reply.len()
    );
    let _ = socket.write_all(text.as_bytes()).await;
    let _ = socket.shutdown().await;
}

/// A scripted server on its own thread; its base URL.
fn serve() -> (String, Shared) {
    let script: Shared = Arc::default();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let shared = script.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(handle(socket, shared.clone()));
            }
        });
    });
    (url, script)
}

#[derive(Default)]
struct Ledger(Mutex<Vec<EmbedCall>>);

impl EmbedLedger for Ledger {
    fn record(&self, call: EmbedCall) {
        self.0.lock().unwrap().push(call);
    }
}

fn masker() -> Arc<EmbedMasker> {
    let detector = Arc::new(Detector::new(
        DetectOptions {
            types: EntityType::ALL.to_vec(),
            whitelist: vec![],
            threshold: 0.5,
        },
        NerSlot::default(),
    ));
    Arc::new(EmbedMasker::new(
        detector,
        NerGate::optional(NerSlot::default()),
        Style::Fake,
        "mask",
        [7; 32],
    ))
}

fn options(url: &str, batch: usize, ledger: &Arc<Ledger>) -> RemoteOptions {
    RemoteOptions {
        model: "embed-small".into(),
        dimensions: 8,
        base_url: url.into(),
        api_key_env: Some("EMBED_TEST_KEY".into()),
        key: Some(ApiKey::new("sk-test-secret")),
        batch_size: batch,
        retry: RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
            ..RetryPolicy::default()
        },
        attempt_timeout: Duration::from_secs(10),
        max_concurrent: Some(2),
        requests_per_minute: None,
        price: Some(ModelPrice {
            input: 0.02,
            output: 0.0,
        }),
        ledger_model: "embeddings/embed-small".into(),
        masker: Some(masker()),
        ledger: Some(ledger.clone() as Arc<dyn EmbedLedger>),
        guard: None,
    }
}

/// Wait (with a deadline) until the ledger holds `n` calls: it is written just before the answer.
fn calls(ledger: &Ledger, n: usize) -> Vec<EmbedCall> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let calls = ledger.0.lock().unwrap().clone();
        if calls.len() >= n || std::time::Instant::now() > deadline {
            return calls;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn batches_masks_normalises_prices_and_records_every_call() {
    let (url, script) = serve();
    let ledger = Arc::new(Ledger::default());
    let embedder = RemoteEmbedder::start(options(&url, 2, &ledger)).unwrap();
    assert_eq!(embedder.model_id(), "openai-compatible:embed-small:8");
    assert_eq!(embedder.batch_size(), 2);
    assert_eq!(embedder.descriptor()["apiKeyEnv"], "EMBED_TEST_KEY");
    let texts = [
        "mail maria.lopez@example.com about the invoice",
        "",
        "the weather is fine",
        "maria.lopez@example.com answered",
        "budget review on friday",
    ];
    let vectors = embedder.embed(&texts).unwrap();
    assert_eq!(vectors.len(), 5);
    assert!(
        vectors[1].iter().all(|x| *x == 0.0),
        "empty text: zero vector"
    );
    for (i, v) in vectors.iter().enumerate().filter(|(i, _)| *i != 1) {
        assert_eq!(v.len(), 8);
        let norm: f32 = v.iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-4, "row {i}: {norm}");
    }
    let s = script.lock().unwrap();
    // Four non-empty texts in batches of two: two requests, nothing real in any byte.
    assert_eq!(s.bodies.len(), 2);
    for body in &s.bodies {
        assert!(!body.contains("maria.lopez"), "{body}");
        assert!(!body.contains("\"\""), "empty texts are not sent: {body}");
    }
    assert!(s.auth.iter().all(|a| a.ends_with("Bearer sk-test-secret")));
    // The same address has the same fake in both requests.
    let first: serde_json::Value = serde_json::from_str(&s.bodies[0]).unwrap();
    let second: serde_json::Value = serde_json::from_str(&s.bodies[1]).unwrap();
    let fake = first["input"][0]
        .as_str()
        .unwrap()
        .trim_start_matches("mail ")
        .trim_end_matches(" about the invoice")
        .to_string();
    assert_eq!(
        second["input"][0].as_str().unwrap(),
        format!("{fake} answered")
    );
    drop(s);
    let calls = calls(&ledger, 2);
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls.iter().map(|c| c.texts).collect::<Vec<_>>(),
        [2, 2],
        "{calls:?}"
    );
    assert!(calls.iter().all(|c| c.tokens == 20 && c.attempts == 1));
    assert!((calls[0].cost_usd - 20.0 * 0.02 / 1e6).abs() < 1e-12);
    let masked = calls[0].masked.as_ref().unwrap();
    assert_eq!(masked.get(EntityType::Email), 1);
}

#[test]
fn a_5xx_is_retried_and_a_down_endpoint_is_unavailable_then_recovers() {
    let (url, script) = serve();
    let ledger = Arc::new(Ledger::default());
    let embedder = RemoteEmbedder::start(options(&url, 16, &ledger)).unwrap();
    script.lock().unwrap().statuses.push_back(500);
    embedder.embed(&["first"]).unwrap();
    assert_eq!(calls(&ledger, 1)[0].attempts, 2);

    // Down for longer than the retries: the rows must wait, not fail.
    script
        .lock()
        .unwrap()
        .statuses
        .extend([503, 503, 503, 429, 429, 429]);
    let error = embedder.embed(&["second"]).unwrap_err();
    // The cool-down started before `embed` returned, so it still holds while less than its first
    // length has passed since now.
    let failed = std::time::Instant::now();
    assert!(matches!(error, EmbedError::Unavailable(_)), "{error}");
    let sent = script.lock().unwrap().bodies.len();
    assert_eq!(sent, 2 + 3, "the 500 and its retry, then three attempts");
    // Known down: the next call fails at once, without a request (checked only when it ran within
    // the cool-down: a machine slow enough to pass it would rightly ask the endpoint again).
    let result = embedder.embed(&["third"]);
    if failed.elapsed() < super::COOL_BASE {
        let error = result.unwrap_err();
        assert!(matches!(error, EmbedError::Unavailable(_)), "{error}");
        assert_eq!(script.lock().unwrap().bodies.len(), sent);
    }
    assert!(
        calls(&ledger, 2)[1]
            .error
            .as_deref()
            .unwrap()
            .contains("503")
    );
    // Once the cool-down passed, the endpoint is asked again (429 three times, then fine).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let vectors = loop {
        match embedder.embed(&["third"]) {
            Ok(v) => break v,
            Err(EmbedError::Unavailable(_)) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100))
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(vectors.len(), 1);
}

#[test]
fn a_refusal_is_said_with_its_fix_and_not_retried() {
    let (url, script) = serve();
    let ledger = Arc::new(Ledger::default());
    let embedder = RemoteEmbedder::start(options(&url, 16, &ledger)).unwrap();
    script.lock().unwrap().statuses.push_back(401);
    let error = embedder.embed(&["hello"]).unwrap_err();
    let EmbedError::Run(why) = &error else {
        panic!("{error:?}")
    };
    assert!(
        why.contains("401") && why.contains("EMBED_TEST_KEY"),
        "{why}"
    );
    assert!(!why.contains("sk-test-secret"), "{why}");
    assert_eq!(script.lock().unwrap().bodies.len(), 1, "not retried");
    // Said once: the next call returns the same refusal without a request.
    assert!(embedder.embed(&["again"]).is_err());
    assert_eq!(script.lock().unwrap().bodies.len(), 1);
}

#[test]
fn options_come_from_the_config_with_the_providers_price_and_limits() {
    let yaml = "framework:\n  defaultModel: m\n  providers:\n    oai: { kind: openai-compatible, baseUrl: 'http://127.0.0.1:9/v1', apiKeyEnv: OAI_KEY, requestsPerMinute: 60, models: { m: { input: 1, output: 1 }, emb: { input: 0.02, output: 0 } } }\n  privacy: { enabled: false }\n  memory: { embedding: { provider: openai-compatible, model: emb, dimensions: 16, baseUrl: 'http://127.0.0.1:9/v1', apiKeyEnv: OAI_KEY } }\nagents:\n  ceo: { role: CEO }\n";
    let config = opc_hierarchy::parse("t.yaml", yaml.to_string(), None)
        .unwrap()
        .config;
    let missing = RemoteOptions::from_config(&config, |_| None, RetryPolicy::default())
        .err()
        .unwrap();
    assert!(
        missing.contains("OAI_KEY") && missing.contains("Fix"),
        "{missing}"
    );
    let options = RemoteOptions::from_config(
        &config,
        |var| (var == "OAI_KEY").then(|| "k".to_string()),
        RetryPolicy::default(),
    )
    .unwrap();
    assert_eq!(options.dimensions, 16);
    assert_eq!(options.ledger_model, "oai/emb");
    assert_eq!(options.price.map(|p| p.input), Some(0.02));
    assert_eq!(options.requests_per_minute.map(|n| n.get()), Some(60));
    assert!(masker_for(&config, NerSlot::default(), [0; 32]).is_none());
}

#[test]
fn one_text_the_endpoint_refuses_is_left_without_a_vector_and_the_others_are_embedded() {
    let (url, script) = serve();
    script.lock().unwrap().refuse = Some("far too long".into());
    let ledger = Arc::new(Ledger::default());
    let embedder = RemoteEmbedder::start(options(&url, 16, &ledger)).unwrap();
    let vectors = embedder
        .embed(&["alpha", "beta", "far too long", "gamma"])
        .unwrap();
    assert_eq!(vectors.len(), 4);
    for (i, v) in vectors.iter().enumerate() {
        let zero = v.iter().all(|x| *x == 0.0);
        assert_eq!(zero, i == 2, "text {i}: {v:?}");
    }
    // Narrowed by halves (4, then 2 + 2, then 1 + 1 of the refused half, then the probe), and the
    // embedder is not left refusing: the next text is embedded.
    assert!(script.lock().unwrap().bodies.len() > 2);
    let next = embedder.embed(&["delta"]).unwrap();
    assert!(next[0].iter().any(|x| *x != 0.0));
}

#[test]
fn a_refusal_of_every_text_is_the_configs_and_is_returned() {
    let (url, script) = serve();
    script.lock().unwrap().statuses.extend([400; 16]);
    let ledger = Arc::new(Ledger::default());
    let embedder = RemoteEmbedder::start(options(&url, 16, &ledger)).unwrap();
    let error = embedder.embed(&["alpha"]).unwrap_err();
    assert!(matches!(error, EmbedError::Run(_)), "{error}");
}

#[test]
fn a_search_query_to_an_endpoint_that_hangs_gets_one_short_attempt() {
    let (url, script) = serve();
    script.lock().unwrap().hang = true;
    let ledger = Arc::new(Ledger::default());
    let embedder = RemoteEmbedder::start(options(&url, 16, &ledger)).unwrap();
    let error = embedder.embed_query("where is the report").unwrap_err();
    let failed = std::time::Instant::now();
    assert!(matches!(error, EmbedError::Unavailable(_)), "{error}");
    assert_eq!(script.lock().unwrap().bodies.len(), 1, "no retries");
    // Marked down: the next query fails at once, without a request (checked when it ran within
    // the cool-down, as above).
    let again = embedder.embed_query("again");
    if failed.elapsed() < super::COOL_BASE {
        assert!(again.is_err());
        assert_eq!(script.lock().unwrap().bodies.len(), 1);
    }
}

#[test]
fn a_guard_that_holds_sending_back_sends_nothing() {
    let (url, script) = serve();
    let ledger = Arc::new(Ledger::default());
    let mut held = options(&url, 16, &ledger);
    held.guard = Some(Arc::new(|| Some("privacy settings changed".into())));
    let embedder = RemoteEmbedder::start(held).unwrap();
    let error = embedder.embed(&["Ann Smith, ann@example.com"]).unwrap_err();
    assert!(matches!(error, EmbedError::Unavailable(_)), "{error}");
    assert!(embedder.embed_query("ann@example.com").is_err());
    assert!(script.lock().unwrap().bodies.is_empty());
}
