//! Embedding throughput through the remote path (issue 39 §6): texts per second that
//! [`RemoteEmbedder`] embeds against a local scripted `/embeddings` endpoint, one text per request
//! against the preferred batch, side by side in the same run (rounds interleaved, medians).
//!
//! The path measured is the whole of it: masking by the privacy detector (patterns; every text
//! carries an e-mail address), the egress check, the worker hand-off, retry/limit/timeout, HTTP on
//! 127.0.0.1, parsing and normalising. The endpoint answers at once, so what is measured is OPC's
//! overhead per request and per text; a real endpoint adds its own latency per request, which
//! batching divides among the texts too.
//!
//! Run: `cargo run --release -p opc-agents --example embed_throughput -- --texts 1024 --rounds 5`

use std::sync::Arc;
use std::time::{Duration, Instant};

use opc_agents::llm::embed::{EmbedMasker, PREFERRED_BATCH, RemoteEmbedder, RemoteOptions};
use opc_agents::llm::layers::RetryPolicy;
use opc_agents::llm::privacy::NerGate;
use opc_memory::embed::Embedder;
use opc_privacy::detect::{DetectOptions, Detector, NerSlot};
use opc_privacy::{EntityType, Style};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const DIMS: usize = 256;

/// Answer one request on `socket` (keep-alive): vectors of [`DIMS`] for every input.
async fn serve(mut socket: tokio::net::TcpStream) {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        // Read one request: head, then Content-Length bytes.
        let (head_end, length) = loop {
            if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..at]).to_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                break (at + 4, length);
            }
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        while buf.len() < head_end + length {
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body: serde_json::Value =
            serde_json::from_slice(&buf[head_end..head_end + length]).unwrap_or_default();
        buf.drain(..head_end + length);
        let inputs = body["input"].as_array().map_or(0, Vec::len);
        let mut out = String::from("{\"data\":[");
        for i in 0..inputs {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&format!("{{\"index\":{i},\"embedding\":["));
            for d in 0..DIMS {
                if d > 0 {
                    out.push(',');
                }
                out.push_str(if (d + i) % 7 == 0 { "0.5" } else { "0.01" });
            }
            out.push_str("]}");
        }
        out.push_str(&format!(
            "],\"usage\":{{\"prompt_tokens\":{}}}}}",
            inputs * 20
        ));
        let reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{out}",
            out.len()
        );
        if socket.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn endpoint() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    listener.set_nonblocking(true).expect("nonblocking");
    let url = format!(
        "http://{}/v1",
        listener.local_addr().expect("local address")
    );
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket));
            }
        });
    });
    url
}

fn embedder(url: &str, batch: usize) -> RemoteEmbedder {
    let detector = Arc::new(Detector::new(
        DetectOptions {
            types: EntityType::ALL.to_vec(),
            whitelist: vec![],
            threshold: 0.5,
        },
        NerSlot::default(),
    ));
    let masker = Arc::new(EmbedMasker::new(
        detector,
        NerGate::optional(NerSlot::default()),
        Style::Fake,
        "mask",
        [9; 32],
    ));
    RemoteEmbedder::start(RemoteOptions {
        model: "bench-embed".into(),
        dimensions: DIMS,
        base_url: url.into(),
        api_key_env: None,
        key: None,
        batch_size: batch,
        retry: RetryPolicy::default(),
        attempt_timeout: Duration::from_secs(30),
        max_concurrent: None,
        requests_per_minute: None,
        price: None,
        ledger_model: "embeddings/bench-embed".into(),
        masker: Some(masker),
        ledger: None,
        guard: None,
    })
    .expect("embedder")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut texts_n = 1024usize;
    let mut rounds = 5usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().and_then(|v| v.parse().ok());
        match (arg.as_str(), value) {
            ("--texts", Some(n)) => texts_n = n,
            ("--rounds", Some(n)) => rounds = n,
            _ => {
                eprintln!("usage: embed_throughput [--texts N] [--rounds N]");
                std::process::exit(2);
            }
        }
    }
    let texts: Vec<String> = (0..texts_n)
        .map(|i| {
            format!(
                "Message {i}: the quarterly review of project {} moved; write to person{i}@example.com before Friday.",
                i % 37
            )
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let url = endpoint();
    let single = embedder(&url, 1);
    let batched = embedder(&url, PREFERRED_BATCH);
    // Warm up both (connections, the detector's first run).
    for e in [&single, &batched] {
        e.embed(&refs[..8.min(refs.len())]).expect("warm-up");
    }
    let (mut one, mut many) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        for (e, out) in [(&single, &mut one), (&batched, &mut many)] {
            let started = Instant::now();
            let vectors = e.embed(&refs).expect("embed");
            assert_eq!(vectors.len(), refs.len());
            out.push(refs.len() as f64 / started.elapsed().as_secs_f64());
        }
    }
    let (a, b) = (median(one), median(many));
    println!(
        "remote embeddings, {texts_n} texts x {rounds} rounds (interleaved), {DIMS}-d, masking on, local endpoint"
    );
    println!("  batch 1                : {a:>9.0} texts/s (median)");
    println!("  batch {PREFERRED_BATCH:<3} (preferred): {b:>9.0} texts/s (median)");
    println!("  ratio                  : {:>9.1}x", b / a);
}
