//! `opc validate`: every problem in a config, with positions and hints.
//!
//! Exit status is the contract scripts rely on: 0 valid (warnings allowed), 1 invalid, 2 unreadable.
//! A valid config also gets the list of configured features this build does not run yet, and what
//! the kernel offers the Bash sandbox (and whether Bash will be refused on this machine).
//!
//! The telemetry settings are checked too: the standard `OTEL_*` variables of this environment over
//! the config's `framework.telemetry` (what `opc run` would refuse to start with). Their problems
//! are errors; having no position in the file, they are printed after the config's, and in JSON
//! they are in `errors` with the variable or key as `path` and line and column 0.

use std::path::Path;
use std::process::ExitCode;

use opc_hierarchy::{ConfigError, Inactive, Report};
use opc_telemetry::settings::Problem;

use crate::Format;
use crate::term::{eprint, print};
use crate::validation::{report_json, unreadable_json};

const INVALID: u8 = 1;
const UNREADABLE: u8 = 2;

pub fn run(path: &Path, format: Format) -> ExitCode {
    let shown = path.display().to_string();
    let loaded = opc_hierarchy::load(path);
    let telemetry = telemetry_problems(loaded.as_ref().ok());
    match loaded {
        Ok(loaded) => {
            let warnings = loaded.report.warnings().count();
            match format {
                Format::Text => {
                    eprint(&loaded.report.render(true));
                    eprint(&crate::setup::inactive_note(&loaded.config));
                    eprint(&sandbox_note(&loaded.config));
                    if !telemetry.is_empty() {
                        eprint(&render(&telemetry));
                        eprint(&format!(
                            "{shown}: invalid — {} in the telemetry settings (`OTEL_*` variables over `framework.telemetry`){}\n",
                            plural_suffix("", telemetry.len(), "error"),
                            plural_suffix(", ", warnings, "warning"),
                        ));
                        return ExitCode::from(INVALID);
                    }
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
                    telemetry.is_empty(),
                    &loaded.report,
                    &opc_hierarchy::inactive(&loaded.config),
                    &telemetry,
                ),
            }
            if telemetry.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(INVALID)
            }
        }
        Err(ConfigError::Invalid(report)) => {
            let errors = report.errors().count() + telemetry.len();
            let warnings = report.warnings().count();
            match format {
                Format::Text => {
                    eprint(&report.render(true));
                    eprint(&render(&telemetry));
                    eprint(&format!(
                        "{shown}: invalid — {}{}\n",
                        plural_suffix("", errors, "error"),
                        plural_suffix(", ", warnings, "warning"),
                    ));
                }
                Format::Json => print_json(&shown, false, &report, &[], &telemetry),
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

/// The telemetry settings' problems: this environment's `OTEL_*` variables over the config's
/// `framework.telemetry` (none when the config did not load; its own errors say why).
fn telemetry_problems(loaded: Option<&opc_hierarchy::Loaded>) -> Vec<Problem> {
    let section = loaded
        .map(|loaded| crate::log::from_config(&loaded.config.framework.telemetry))
        .unwrap_or_default();
    opc_telemetry::settings::resolve(|name| std::env::var(name).ok(), &section)
        .err()
        .map(|problems| problems.0)
        .unwrap_or_default()
}

/// `error: SOURCE: message` and its hint, one pair per problem.
fn render(problems: &[Problem]) -> String {
    opc_telemetry::settings::Problems(problems.to_vec()).to_string()
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
fn print_json(
    file: &str,
    valid: bool,
    report: &Report,
    inactive: &[Inactive],
    telemetry: &[Problem],
) {
    print(&format!(
        "{}\n",
        json(file, valid, report, inactive, telemetry)
    ));
}

/// The JSON object: the config's own, with the telemetry settings' problems after its errors, at
/// line and column 0 (they are not in the file).
fn json(
    file: &str,
    valid: bool,
    report: &Report,
    inactive: &[Inactive],
    telemetry: &[Problem],
) -> serde_json::Value {
    let mut json = report_json(file, valid, report, inactive);
    if let Some(errors) = json["errors"].as_array_mut() {
        errors.extend(telemetry.iter().map(|p| {
            serde_json::json!({
                "severity": "error",
                "path": p.source,
                "message": p.message,
                "hint": p.hint,
                "line": 0,
                "column": 0,
            })
        }));
    }
    json
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn telemetry_problems_are_errors_named_by_their_variable() {
        let text = "framework:\n  defaultModel: claude-sonnet-4-5\n  providers:\n    anthropic: { kind: anthropic, models: { claude-sonnet-4-5: { input: 3, output: 15 } } }\nagents:\n  ceo:\n    role: CEO\n";
        let dir = std::env::temp_dir();
        let loaded =
            opc_hierarchy::parse("opc.config.yaml", text.to_string(), Some(&dir)).expect("valid");
        let problem = Problem {
            source: "OTEL_TRACES_SAMPLER".into(),
            message: "unknown sampler `sometimes`".into(),
            hint: "use one of always_on, …".into(),
        };
        let value = json(
            "opc.config.yaml",
            false,
            &loaded.report,
            &[],
            std::slice::from_ref(&problem),
        );
        assert_eq!(value["valid"], false);
        assert_eq!(
            value["errors"],
            serde_json::json!([{
                "severity": "error",
                "path": "OTEL_TRACES_SAMPLER",
                "message": "unknown sampler `sometimes`",
                "hint": "use one of always_on, …",
                "line": 0,
                "column": 0,
            }])
        );
        assert_eq!(
            render(&[problem]),
            "error: OTEL_TRACES_SAMPLER: unknown sampler `sometimes`\nhint: use one of always_on, …\n"
        );
    }
}
