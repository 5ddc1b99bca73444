//! A minimal sandbox launcher for this crate's tests and bench: `main` calls
//! `enter_if_launcher()` and nothing else. In the product, `opc` itself is the launcher.

fn main() {
    opc_sandbox::enter_if_launcher();
    eprintln!(
        "opc-sandbox-launcher: started without the launcher marker; it is only run by opc_sandbox::Sandbox"
    );
    std::process::exit(2);
}
