//! # scripted-llm — serve a script file as an LLM endpoint
//!
//! Role: the command-line face of [`opc_tests::scripted_llm`], for offline demos (e.g. `opc chat`
//! pointed at it) and for driving the real binaries from shell scripts.
//! Usage: `scripted-llm --script FILE [--listen 127.0.0.1:0] [--quiet]`.
//!
//! Invariants: the first line on stdout is `listening on http://ADDR` (flushed at once, so a
//! parent process can read the port); only loopback addresses are bound; one line per request goes
//! to stderr unless `--quiet`; it serves until ctrl-c (SIGINT) or SIGTERM, then shuts down cleanly.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use opc_tests::scripted_llm::{Script, ScriptedLlm};

/// Serve a scripted LLM (Anthropic Messages and OpenAI Chat Completions) on the loopback interface.
#[derive(Debug, Parser)]
#[command(name = "scripted-llm")]
struct Args {
    /// Script file (JSON): {"agents": [{"marker": …, "replies": [STEP, …]}], "fallback": [STEP, …]}.
    #[arg(long, value_name = "FILE")]
    script: PathBuf,
    /// Address to listen on; must be a loopback address (port 0 picks a free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Do not log requests to stderr.
    #[arg(long)]
    quiet: bool,
}

// One thread: a scripted reply is microseconds of work, and on one thread a request's accept, read,
// answer and write never hop between workers (each hop is a wake-up that the benchmarks' per-turn
// figures would count); thousands of concurrent requests are timers and sockets on one loop.
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    let script = match Script::from_file(&args.script) {
        Ok(script) => script,
        Err(e) => {
            eprintln!("scripted-llm: {e}");
            return ExitCode::from(2);
        }
    };
    let server = match ScriptedLlm::start_on(script, args.listen).await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("scripted-llm: cannot listen on {}: {e}", args.listen);
            return ExitCode::from(1);
        }
    };
    server.log_requests(!args.quiet);
    {
        let mut stdout = std::io::stdout().lock();
        // If stdout is gone, whoever started us cannot read the port; serve regardless.
        let _ = writeln!(stdout, "listening on {}", server.url()).and_then(|()| stdout.flush());
    }
    wait_for_stop().await;
    server.shutdown().await;
    ExitCode::SUCCESS
}

/// Resolves on ctrl-c (SIGINT) or, on Unix, SIGTERM.
async fn wait_for_stop() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
