//! # Admin console benchmark (issue 12 §5)
//!
//! Measures the console on the real (release) `opc run`, over loopback, with the scripted LLM
//! answering at once. Medians, with the spread, because the machine is small and shared.
//!
//! 1. **Page load**: `GET /admin` (the whole page, one response) and, in headless Chromium when it is
//!    installed, first contentful paint of `/admin#org` (the browser's own `paint` timing).
//! 2. **Validate as you type**: `POST /admin/api/config/validate` round trip for the example org and
//!    for a generated 1,000-agent org.
//! 3. **Reload**: from the file changing on disk (renamed over, as editors save) to `/api/org`
//!    showing the new generation (the watcher's debounce included), and from a console save's
//!    request to its answer (the save applies the config before answering).
//! 4. **50 console tabs on the event stream**: a web conversation's latency (message sent → the
//!    answer's event) with no `/admin/api/events` stream open, then with 50 open and read.
//! 5. **Idle RSS** of `opc run` on the example org (`VmRSS` 2 s after ready), and of a baseline build
//!    when `--baseline PATH` names one (e.g. the build before the console).
//!
//! Run: `cargo build --release -p opc-bot && cargo bench -p opc-tests --bench admin`
//! (`-- --quick` for fewer samples; `-- --baseline /path/to/old/opc`). Without `--bench` (as under
//! `cargo test --all-targets`) it runs a small smoke version.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use opc_tests::browser::Browser;
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{KEY, framework_yaml};
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use serde_json::{Value, json};

/// The example org as shipped.
const EXAMPLE: &str = include_str!("../../opc.config.yaml");

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn report(what: &str, samples: Vec<f64>, unit: &str) -> f64 {
    let n = samples.len();
    let (m, lo, hi) = median(samples);
    println!("  {what:<64} median {m:>8.2} {unit}  (min {lo:.2}, max {hi:.2}, n={n})");
    m
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// A valid org of `n` agents: a CEO, 10 VPs, leads under them, workers under the leads.
fn big_org(llm_url: &str, n: usize) -> String {
    let mut yaml = framework_yaml(llm_url, false);
    yaml.push_str("channels:\n  web: { listen: \"127.0.0.1:0\" }\nagents:\n");
    let vps: Vec<String> = (0..10).map(|i| format!("vp-{i}")).collect();
    let leads: Vec<String> = (0..100).map(|i| format!("lead-{i}")).collect();
    let workers: Vec<String> = (0..n.saturating_sub(111))
        .map(|i| format!("worker-{i}"))
        .collect();
    let agent =
        |yaml: &mut String, id: &str, level: u32, parent: Option<&str>, children: &[String]| {
            yaml.push_str(&format!(
                "  {id}:\n    role: Role of {id}\n    level: {level}\n"
            ));
            if let Some(p) = parent {
                yaml.push_str(&format!("    parent: {p}\n"));
            }
            if children.is_empty() {
                yaml.push_str("    tools: [escalate]\n");
            } else {
                yaml.push_str(&format!(
                    "    tools: [delegate, escalate]\n    children: [{}]\n",
                    children.join(", ")
                ));
            }
        };
    agent(&mut yaml, "ceo", 0, None, &vps);
    for (i, vp) in vps.iter().enumerate() {
        agent(&mut yaml, vp, 1, Some("ceo"), &leads[i * 10..i * 10 + 10]);
    }
    for (i, lead) in leads.iter().enumerate() {
        let mine: Vec<String> = workers
            .iter()
            .enumerate()
            .filter(|(w, _)| w % 100 == i)
            .map(|(_, w)| w.clone())
            .collect();
        agent(&mut yaml, lead, 2, Some(&format!("vp-{}", i / 10)), &mine);
    }
    for (w, worker) in workers.iter().enumerate() {
        agent(
            &mut yaml,
            worker,
            3,
            Some(&format!("lead-{}", w % 100)),
            &[],
        );
    }
    yaml
}

/// The example org in a fresh directory, on port 0 (prompt files copied along).
fn example_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = EXAMPLE.replace("127.0.0.1:7420", "127.0.0.1:0");
    let path = dir.path().join("opc.config.yaml");
    std::fs::write(&path, text).unwrap();
    let prompts = root.join("prompts");
    if prompts.is_dir() {
        let to = dir.path().join("prompts");
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(prompts).unwrap().flatten() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
    (dir, path)
}

async fn generation(client: &reqwest::Client, opc: &OpcRun) -> u64 {
    let org: Value = client
        .get(opc.url("/api/org"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    org["generation"].as_u64().unwrap()
}

/// Web conversation latency: a new conversation per sample, message sent → the answer's event.
async fn conversation_latency(opc: &OpcRun, samples: usize) -> Vec<f64> {
    let mut out = Vec::new();
    for i in 0..samples {
        let (id, mut sse) = opc_tests::web_chat::open(opc).await;
        let start = Instant::now();
        opc_tests::web_chat::say(opc, &id, &format!("question {i}")).await;
        sse.wait_for("message|edit", Duration::from_secs(20), |e| {
            e["text"].as_str() == Some("answered")
        })
        .await;
        out.push(ms(start));
    }
    out
}

fn rss_kb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(f64::NAN)
}

async fn idle_rss(binary: Option<&Path>, runs: usize) -> Vec<f64> {
    let mut out = Vec::new();
    for _ in 0..runs {
        let (_dir, config) = example_copy();
        let opc = match binary {
            Some(b) => OpcRun::try_start_binary(b, &config, &[]).unwrap(),
            None => OpcRun::try_start(&config, &[]).unwrap(),
        };
        tokio::time::sleep(Duration::from_secs(2)).await;
        out.push(rss_kb(opc.pid()) / 1024.0);
        opc.stop();
    }
    out
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bench = args.iter().any(|a| a == "--bench");
    let quick = args.iter().any(|a| a == "--quick") || !bench;
    let baseline = args
        .iter()
        .position(|a| a == "--baseline")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from);
    let n = |full: usize, short: usize| if quick { short } else { full };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        println!(
            "\n== opc admin console benchmark{} ==",
            if !bench { " (smoke run, not under `cargo bench`)" } else if quick { " (--quick)" } else { "" }
        );
        let llm = ScriptedLlm::start(Script::new().fallback(vec![Step::text("answered")]))
            .await
            .unwrap();
        let (_dir, config) = example_copy();
        // The example org as shipped, its Anthropic provider pointed at the scripted LLM.
        let text = std::fs::read_to_string(&config).unwrap();
        let org_text = text.replacen(
            "      kind: anthropic\n",
            &format!("      kind: anthropic\n      baseUrl: {}\n", llm.url()),
            1,
        );
        assert_ne!(org_text, text);
        std::fs::write(&config, &org_text).unwrap();
        let opc = OpcRun::start(&config, &[("ANTHROPIC_API_KEY", KEY)]);
        let client = opc_tests::http_client();

        println!("\n1. Page load (loopback)");
        let mut page = Vec::new();
        for _ in 0..n(50, 10) {
            let start = Instant::now();
            let r = client.get(opc.url("/admin")).send().await.unwrap();
            let body = r.bytes().await.unwrap();
            assert!(body.len() > 10_000);
            page.push(ms(start));
        }
        report("GET /admin (whole page, one response)", page, "ms");
        match Browser::find().await {
            Some(mut browser) => {
                let mut fcp = Vec::new();
                for i in 0..n(10, 3) {
                    // A fresh load each time (a query string defeats any cache).
                    browser.navigate(&opc.url(&format!("/admin?n={i}#org"))).await.unwrap();
                    browser
                        .wait_for("document.querySelectorAll('#org-tree button').length > 3", Duration::from_secs(20))
                        .await
                        .unwrap();
                    let t = browser
                        .eval("(performance.getEntriesByName('first-contentful-paint')[0] || {startTime: NaN}).startTime")
                        .await
                        .unwrap();
                    fcp.push(t.as_f64().unwrap_or(f64::NAN));
                }
                report("first contentful paint of /admin#org (Chromium)", fcp, "ms");
            }
            None => println!("  (no Chromium found: first paint not measured)"),
        }

        println!("\n2. Validate as you type: POST /admin/api/config/validate round trip");
        let big = big_org(&llm.url(), 1000);
        for (name, text, samples) in [("example org", org_text.clone(), n(50, 10)), ("1,000-agent org", big, n(20, 5))] {
            let mut rt = Vec::new();
            for _ in 0..samples {
                let start = Instant::now();
                let r = client
                    .post(opc.url("/admin/api/config/validate"))
                    .json(&json!({"text": text}))
                    .send()
                    .await
                    .unwrap();
                let report: Value = r.json().await.unwrap();
                assert_eq!(report["valid"], true, "{name}: {report}");
                rt.push(ms(start));
            }
            report(&format!("{name} ({} kB)", text.len() / 1024), rt, "ms");
        }

        println!("\n3. Reload");
        let mut file = Vec::new();
        let mut current = org_text.clone();
        for i in 0..n(10, 3) {
            let before = generation(&client, &opc).await;
            current = format!("# reload {i}\n{current}");
            let temp = config.with_extension("yaml.new");
            std::fs::write(&temp, &current).unwrap();
            let start = Instant::now();
            std::fs::rename(&temp, &config).unwrap();
            while generation(&client, &opc).await == before {
                tokio::time::sleep(Duration::from_millis(2)).await;
                assert!(start.elapsed() < Duration::from_secs(20), "no reload");
            }
            file.push(ms(start));
        }
        report("file changed on disk → /api/org shows the new generation", file, "ms");
        let mut save = Vec::new();
        for i in 0..n(10, 3) {
            let loaded: Value = client.get(opc.url("/admin/api/config")).send().await.unwrap().json().await.unwrap();
            let text = format!("# save {i}\n{}", loaded["text"].as_str().unwrap());
            let start = Instant::now();
            let r: Value = client
                .post(opc.url("/admin/api/config/save"))
                .json(&json!({"text": text, "etag": loaded["etag"]}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            save.push(ms(start));
            assert_eq!(r["applied"], true, "{r}");
        }
        report("console save → answered, applied (validate, write, reload)", save, "ms");

        println!("\n4. A web conversation's latency with console tabs on the event stream");
        println!("   (blocks without and with the tabs alternate, so a change in the machine's load hits both)");
        let samples = n(10, 3);
        let _ = conversation_latency(&opc, 3).await;
        let (mut without, mut with) = (Vec::new(), Vec::new());
        for _ in 0..n(3, 1) {
            without.extend(conversation_latency(&opc, samples).await);
            let mut tabs = Vec::new();
            for _ in 0..50 {
                let r = client.get(opc.url("/admin/api/events")).send().await.unwrap();
                assert_eq!(r.status(), 200);
                let mut stream = r.bytes_stream();
                tabs.push(tokio::spawn(async move { while stream.next().await.is_some() {} }));
            }
            with.extend(conversation_latency(&opc, samples).await);
            for t in tabs {
                t.abort();
            }
        }
        let none = report("no /admin/api/events stream open", without, "ms");
        let fifty = report("50 streams open and read", with, "ms");
        println!("  {:<64} {:>+8.2} ms ({:.2}×)", "added by 50 tabs", fifty - none, fifty / none);
        opc.stop();

        println!("\n5. Idle RSS of opc run, example org (VmRSS 2 s after ready)");
        let now = report("this build", idle_rss(None, n(5, 2)).await, "MB");
        if let Some(baseline) = baseline {
            let then = report(&format!("baseline {}", baseline.display()), idle_rss(Some(&baseline), n(5, 2)).await, "MB");
            println!("  {:<64} {:>+8.2} MB ({:.2}×)", "difference", now - then, now / then);
        }
        llm.shutdown().await;
    });
}
