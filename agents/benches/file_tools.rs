//! The file tools' numbers (issue 24 §5), a bench rather than a timed test:
//!
//! - Read of a 10 MB file: time, and the peak-RSS growth (`VmHWM`, reset through
//!   `/proc/self/clear_refs` before each run) — it must stay far below the file's size, because Read
//!   streams;
//! - Grep over a generated 50,000-file tree against the `rg` binary on the same tree (the same
//!   pattern, `files_with_matches` ≙ `rg -l`, and `content` ≙ `rg -n`), alternated run by run so
//!   both see the same cache and machine load; medians and the ratio. Target ≤ 1.5×. Without `rg`
//!   on PATH that comparison is skipped with one line.
//!
//! Run: `cargo bench -p opc-agents --bench file_tools`; `-- --files N --runs N` (or `FILES=…`,
//! `RUNS=…`) change the tree size and the run count, `-- --help` lists the options.

#![allow(clippy::unwrap_used, missing_docs)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use clap::Parser;
use opc_agents::tools::files::{Access, Standalone};
use opc_hierarchy::schema::Tool;
use serde_json::json;

/// The file tools' numbers: Read of a 10 MB file, Grep against `rg`, Glob.
#[derive(Parser)]
struct Args {
    /// Files in the generated tree Grep and Glob run over.
    #[arg(long, env = "FILES", default_value_t = 50_000)]
    files: usize,
    /// Runs of each measurement (medians are reported).
    #[arg(long, env = "RUNS", default_value_t = 7)]
    runs: usize,
    /// Passed by `cargo bench`; changes nothing.
    #[arg(long, hide = true)]
    bench: bool,
}

/// `VmHWM` in KiB (peak resident set since the last reset).
fn hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// `VmRSS` in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Reset `VmHWM` to the current RSS.
fn reset_hwm() {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

const WORDS: [&str; 16] = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa",
];

/// A tree of `files` source-like files (~1.5 KB each), one in 97 holding `fn needle_<n>`.
fn generate(root: &Path, files: usize) {
    let mut rng = fastrand::Rng::with_seed(24);
    for i in 0..files {
        let dir = root.join(format!("d{:03}/s{:02}", i / 500, (i / 50) % 10));
        if i % 50 == 0 {
            std::fs::create_dir_all(&dir).unwrap();
        }
        let mut text = String::with_capacity(1600);
        for line in 0..40 {
            for _ in 0..5 {
                text.push_str(WORDS[rng.usize(..WORDS.len())]);
                text.push(' ');
            }
            if i % 97 == 0 && line == 20 {
                text.push_str(&format!("fn needle_{i}() {{}}"));
            }
            text.push('\n');
        }
        std::fs::write(dir.join(format!("f{i}.rs")), text).unwrap();
    }
}

fn main() {
    let args = Args::parse();
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let access = Access {
        write: base.join("ws"),
        read: vec![],
    };
    let tools = Standalone::default();
    let runs = args.runs;

    // Read of a 10 MB file, first, in a process that has not grown yet.
    std::fs::create_dir_all(&access.write).unwrap();
    let big = access.write.join("big.log");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&big).unwrap());
        let line = format!("{}\n", "0123456789".repeat(10));
        for _ in 0..=(10 * 1024 * 1024 / line.len()) {
            f.write_all(line.as_bytes()).unwrap();
        }
    }
    let size = std::fs::metadata(&big).unwrap().len();
    let mut times = Vec::new();
    let mut growth = Vec::new();
    for i in 0..runs {
        // The default window (first 2,000 lines), and one near the end: both stream the whole file
        // (the read record hashes it).
        let input = if i % 2 == 0 {
            json!({"file_path": "big.log"})
        } else {
            json!({"file_path": "big.log", "offset": 100_000, "limit": 50})
        };
        reset_hwm();
        let before = rss_kib();
        let start = Instant::now();
        let (out, err) = tools.call(&base, &access, "dev", 1, Tool::Read, &input);
        times.push(start.elapsed());
        growth.push(hwm_kib().saturating_sub(before));
        assert!(!err, "{out}");
        drop(out);
    }
    growth.sort();
    println!(
        "Read {:.1} MiB file: median {} over {runs} runs; peak RSS growth (VmHWM - RSS before) median {} KiB, max {} KiB",
        size as f64 / (1024.0 * 1024.0),
        ms(median(times)),
        growth[growth.len() / 2],
        growth[growth.len() - 1],
    );
    std::fs::remove_file(&big).unwrap();

    // Grep over a generated tree.
    let files = args.files;
    let tree: PathBuf = access.write.join("tree");
    let start = Instant::now();
    generate(&tree, files);
    println!("generated {files} files in {}", ms(start.elapsed()));
    let pattern = r"fn needle_\d+";
    let rg = Command::new("rg").arg("--version").output().is_ok();
    if !rg {
        println!("rg not found on PATH: the comparison with ripgrep is skipped");
    }
    for (mode, rg_flag) in [("files_with_matches", "-l"), ("content", "-n")] {
        let input = json!({"pattern": pattern, "path": "tree", "output_mode": mode});
        let ours_once = || {
            let start = Instant::now();
            let (out, err) = tools.call(&base, &access, "dev", 1, Tool::Grep, &input);
            let took = start.elapsed();
            assert!(!err, "{out}");
            (took, out)
        };
        let rg_once = || {
            let start = Instant::now();
            let out = Command::new("rg")
                .args([rg_flag, pattern, "tree"])
                .current_dir(&access.write)
                .output()
                .unwrap();
            (start.elapsed(), out.stdout.len())
        };
        // Warm the cache for both.
        let (_, first) = ours_once();
        let expected = files.div_ceil(97);
        if mode == "files_with_matches" {
            assert!(
                first.starts_with(&format!("Found {expected} files")),
                "{}",
                &first[..80]
            );
        }
        if rg {
            rg_once();
        }
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            ours.push(ours_once().0);
            if rg {
                theirs.push(rg_once().0);
            }
        }
        let ours = median(ours);
        if rg {
            let theirs = median(theirs);
            println!(
                "Grep {mode} over {files} files ({expected} match): ours median {}, rg {rg_flag} median {}, ratio {:.2}x",
                ms(ours),
                ms(theirs),
                ours.as_secs_f64() / theirs.as_secs_f64()
            );
        } else {
            println!(
                "Grep {mode} over {files} files ({expected} match): ours median {}",
                ms(ours)
            );
        }
    }
    // Glob over the same tree.
    let input = json!({"pattern": "**/f1*.rs", "path": "tree"});
    let mut times = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        let (out, err) = tools.call(&base, &access, "dev", 1, Tool::Glob, &input);
        times.push(start.elapsed());
        assert!(!err, "{out}");
    }
    println!(
        "Glob **/f1*.rs over {files} files: median {}",
        ms(median(times))
    );
}
