//! A validation report as JSON: the object `opc validate --format json` prints, which the admin
//! console's validation and reload's refusals return too.
//!
//! Why one place: editors, CI scripts and the console read the same fields, so the shape is written
//! once. Why a leaf: `opc validate`, the console and reload all use it, and it uses none of them.
//!
//! Invariants: every object has the same keys (`file`, `valid`, `unreadable`, `errors`,
//! `warnings`, `inactive`); `inactive` is filled only for a valid config (an invalid one runs
//! nothing); `unreadable` is a message only when the file could not be read.

use std::path::Path;

use opc_hierarchy::{ConfigError, Diagnostic, Inactive, Report};
use serde_json::{Value, json};

/// The object for a config that was read: its errors, warnings and (when valid) inactive features.
pub fn report_json(file: &str, valid: bool, report: &Report, inactive: &[Inactive]) -> Value {
    let list = |items: Vec<&Diagnostic>| serde_json::to_value(items).unwrap_or_default();
    json!({
        "file": file,
        "valid": valid,
        "unreadable": null,
        "errors": list(report.errors().collect()),
        "warnings": list(report.warnings().collect()),
        "inactive": serde_json::to_value(inactive).unwrap_or_default(),
    })
}

/// The object for a config that could not be read, saying why.
pub fn unreadable_json(file: &str, why: &str) -> Value {
    json!({"file": file, "valid": false, "unreadable": why, "errors": [], "warnings": [], "inactive": []})
}

/// Validate config `text` as if it were the file `file` (prompt files are looked up in `base_dir`),
/// with the same checks and the same JSON as `opc validate --format json`.
pub fn validate_text(file: &str, text: String, base_dir: &Path) -> Value {
    match opc_hierarchy::parse(file, text, Some(base_dir)) {
        Ok(loaded) => report_json(
            file,
            true,
            &loaded.report,
            &opc_hierarchy::inactive(&loaded.config),
        ),
        Err(ConfigError::Invalid(report)) => report_json(file, false, &report, &[]),
        // Text has no file to fail reading; kept total for the type's sake.
        Err(error @ ConfigError::Unreadable { .. }) => unreadable_json(file, &error.to_string()),
    }
}
