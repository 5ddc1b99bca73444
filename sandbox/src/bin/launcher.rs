//! A minimal sandbox launcher for this crate's tests and bench (in the product, `opc` itself is the
//! launcher): `main` calls `enter_if_launcher()` first, as `opc` does.
//!
//! `opc-sandbox-launcher run WORKDIR COMMAND` also runs COMMAND under the default policy with this
//! executable as the launcher and prints its output; the tests use it to check what a command sees
//! of its parent's environment (a test cannot set its own environment without `unsafe`).

use std::time::Duration;

fn main() {
    opc_sandbox::enter_if_launcher();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [mode, workdir, command] = args.as_slice() else {
        eprintln!("usage: opc-sandbox-launcher run WORKDIR COMMAND");
        std::process::exit(2);
    };
    if mode != "run" {
        eprintln!("usage: opc-sandbox-launcher run WORKDIR COMMAND");
        std::process::exit(2);
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("current_exe: {e}");
            std::process::exit(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("tokio: {e}");
            std::process::exit(2);
        }
    };
    let policy = opc_sandbox::Policy::new(workdir);
    let sandbox = opc_sandbox::Sandbox::new(exe);
    match runtime.block_on(sandbox.run(&policy, command, Duration::from_secs(30))) {
        Ok(output) => {
            print!("{}", output.text);
            std::process::exit(output.exit_code.unwrap_or(1));
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(3);
        }
    }
}
