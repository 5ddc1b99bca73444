//! The sandbox's overhead per Bash call: `true` under [`opc_sandbox::Sandbox::run`] (enforced, and
//! with `Mode::Off` for the parent side alone, and enforced with `network: true`, which skips
//! creating a network namespace) against a plain `bash -c true` spawn, interleaved
//! round by round so machine noise hits all three alike. Prints p50 and p99 of each, and the
//! enforced run's ratio and difference against the plain spawn (target: < 10 ms added).
//!
//! `cargo bench -p opc-sandbox --bench overhead` (optionally `-- ROUNDS`, default 300). The
//! launcher is this crate's small test binary unless `OPC_SANDBOX_LAUNCHER` names another (`opc`).
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use opc_sandbox::{Mode, Policy, Probe, Sandbox};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(300);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let work = dir.path().join("work");
    opc_sandbox::make_writable(&work).unwrap();
    let enforce = Policy::new(&work);
    let missing = Probe::detect().missing(&enforce);
    if !missing.is_empty() {
        println!("skipped: this kernel lacks {}", missing.join(", "));
        return;
    }
    let off = Policy {
        mode: Mode::Off,
        ..enforce.clone()
    };
    let networked = Policy {
        network: true,
        ..enforce.clone()
    };
    // OPC_SANDBOX_LAUNCHER=target/release/opc measures the real launcher (a much larger binary).
    let launcher = std::env::var_os("OPC_SANDBOX_LAUNCHER")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_opc-sandbox-launcher").into());
    println!("launcher: {}", launcher.display());
    let sandbox = Sandbox::new(launcher);
    let timeout = Duration::from_secs(30);

    let (mut plain, mut sandboxed, mut unsandboxed, mut with_network) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    runtime.block_on(async {
        // Warm up the page cache and the probe.
        for _ in 0..10 {
            sandbox.run(&enforce, "true", timeout).await.unwrap();
        }
        for _ in 0..rounds {
            let start = Instant::now();
            let status = tokio::process::Command::new("/usr/bin/bash")
                .args(["-c", "true"])
                .output()
                .await
                .unwrap();
            assert!(status.status.success());
            plain.push(start.elapsed());

            let start = Instant::now();
            let output = sandbox.run(&enforce, "true", timeout).await.unwrap();
            assert_eq!(output.exit_code, Some(0), "{}", output.text);
            sandboxed.push(start.elapsed());

            let start = Instant::now();
            let output = sandbox.run(&off, "true", timeout).await.unwrap();
            assert_eq!(output.exit_code, Some(0), "{}", output.text);
            unsandboxed.push(start.elapsed());

            let start = Instant::now();
            let output = sandbox.run(&networked, "true", timeout).await.unwrap();
            assert_eq!(output.exit_code, Some(0), "{}", output.text);
            with_network.push(start.elapsed());
        }
    });
    for samples in [
        &mut plain,
        &mut sandboxed,
        &mut unsandboxed,
        &mut with_network,
    ] {
        samples.sort();
    }
    println!("per call of `true`, {rounds} rounds interleaved");
    println!("{:<34} {:>9} {:>9}", "", "p50 ms", "p99 ms");
    for (name, samples) in [
        ("plain `bash -c true` spawn", &plain),
        ("Sandbox::run, Mode::Off", &unsandboxed),
        ("Sandbox::run, Mode::Enforce", &sandboxed),
        ("  the same with network: true", &with_network),
    ] {
        println!(
            "{name:<34} {:>9.2} {:>9.2}",
            ms(percentile(samples, 0.5)),
            ms(percentile(samples, 0.99))
        );
    }
    for (label, p) in [("p50", 0.5), ("p99", 0.99)] {
        let base = percentile(&plain, p);
        let ours = percentile(&sandboxed, p);
        println!(
            "enforced vs plain, {label}: {:.2}x, +{:.2} ms",
            ours.as_secs_f64() / base.as_secs_f64(),
            ms(ours) - ms(base)
        );
    }
}
