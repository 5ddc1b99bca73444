//! `opc validate`: every problem in a config, with positions and hints.
//!
//! Exit status is the contract scripts rely on: 0 valid (warnings allowed), 1 invalid, 2 unreadable.
//! A valid config also gets the list of configured features this build does not run yet, and what
//! the kernel offers the Bash sandbox (and whether Bash will be refused on this machine).

use std::path::Path;
use std::process::ExitCode;

use opc_hierarchy::{ConfigError, Inactive, Report};

use crate::Format;
use crate::term::{eprint, print};
use crate::validation::{report_json, unreadable_json};

const INVALID: u8 = 1;
const UNREADABLE: u8 = 2;

pub fn run(path: &Path, format: Format) -> ExitCode {
    let shown = path.display().to_string();
    match opc_hierarchy::load(path) {
        Ok(loaded) => {
            let warnings = loaded.report.warnings().count();
            match format {
                Format::Text => {
                    eprint(&loaded.report.render(true));
                    eprint(&crate::setup::inactive_note(&loaded.config));
                    eprint(&sandbox_note(&loaded.config));
                    print(&format!(
                        "{shown}: valid — {} agents, {} level{}{}\n",
                        loaded.org.len(),
                        loaded.org.depth() + 1,
                        if loaded.org.depth() == 0 { "" } else { "s" },
                        plural_suffix(", ", warnings, "warning"),
                    ));
                }
                Format::Json => print_json(
                    &shown,
                    true,
                    &loaded.report,
                    &opc_hierarchy::inactive(&loaded.config),
                ),
            }
            ExitCode::SUCCESS
        }
        Err(ConfigError::Invalid(report)) => {
            let errors = report.errors().count();
            let warnings = report.warnings().count();
            match format {
                Format::Text => {
                    eprint(&report.render(true));
                    eprint(&format!(
                        "{shown}: invalid — {}{}\n",
                        plural_suffix("", errors, "error"),
                        plural_suffix(", ", warnings, "warning"),
                    ));
                }
                Format::Json => print_json(&shown, false, &report, &[]),
            }
            ExitCode::from(INVALID)
        }
        Err(error @ ConfigError::Unreadable { .. }) => {
            let (error, hint) = crate::setup::unreadable(
                path,
                &error,
                "pass --config PATH, set $OPC_CONFIG, or run `opc init` to create opc.config.yaml",
            );
            match format {
                Format::Text => eprint(&format!("error: {error}\nhint: {hint}\n")),
                Format::Json => print(&format!("{}\n", unreadable_json(&shown, &error))),
            }
            ExitCode::from(UNREADABLE)
        }
    }
}

/// The `sandbox:` section: the kernel probe, `opc doctor`-style, then, when an agent runs Bash and
/// the configured sandbox needs a feature this kernel lacks, that Bash will be refused and why (the
/// sandbox fails closed; `opc validate` is where an admin finds out before a user does).
fn sandbox_note(config: &opc_hierarchy::Config) -> String {
    let probe = opc_sandbox::Probe::detect();
    let settings = &config.framework.sandbox;
    let mut policy = opc_sandbox::Policy::new(".");
    policy.network = settings.network;
    policy.mode = match settings.mode {
        opc_hierarchy::schema::SandboxMode::Enforce => opc_sandbox::Mode::Enforce,
        opc_hierarchy::schema::SandboxMode::Off => opc_sandbox::Mode::Off,
    };
    let mut note = String::from("sandbox (what this kernel offers Bash):\n");
    for line in probe.report() {
        note.push_str(&format!("  {line}\n"));
    }
    let runs_bash = config
        .agents
        .values()
        .any(|agent| agent.tools.contains(&opc_hierarchy::schema::Tool::Bash));
    if !runs_bash {
        return note;
    }
    if policy.mode == opc_sandbox::Mode::Off {
        note.push_str("  mode: off — Bash commands run without the sandbox, as OPC's own user\n");
        return note;
    }
    let missing = probe.missing(&policy);
    if !missing.is_empty() {
        note.push_str(&format!(
            "  Bash will be refused (the sandbox fails closed): this kernel lacks {}. Fix: a kernel with these features, or `framework.sandbox.mode: off` (commands then run unsandboxed)\n",
            missing.join(", ")
        ));
    }
    note
}

fn plural_suffix(prefix: &str, count: usize, noun: &str) -> String {
    match count {
        0 if prefix.is_empty() => format!("no {noun}s"),
        0 => String::new(),
        1 => format!("{prefix}1 {noun}"),
        n => format!("{prefix}{n} {noun}s"),
    }
}

/// `inactive` is listed only for a valid config: an invalid one runs nothing.
fn print_json(file: &str, valid: bool, report: &Report, inactive: &[Inactive]) {
    print(&format!("{}\n", report_json(file, valid, report, inactive)));
}
