//! # opc-hierarchy — `opc.config.yaml` and the org it describes
//!
//! Role: read the config file, report every problem in it at once (file:line:column, key path, hint),
//! and turn a valid config into typed settings plus an [`OrgTree`] that answers who may delegate to whom.
//!
//! The pipeline, one module each:
//! 1. [`yaml`] parses text into a positioned tree (serde-saphyr; positions survive anchors and aliases).
//! 2. `decode` + [`schema`] read typed settings from the tree, collecting type errors, unknown keys with
//!    suggestions, duplicate keys, bad durations and non-positive limits.
//! 3. `validate` checks what only the whole config can tell: one root, no orphans or cycles, levels,
//!    depth, shareWith, shared blocks, tools, workspaces and Bash allow-lists, prompt files, model
//!    providers, and no inline secrets.
//! 4. [`OrgTree`] is built only from a config with no errors; it also answers where each agent's file
//!    and shell tools reach ([`WorkspaceAccess`]) and which commands run without asking.
//!
//! Beside the pipeline: `indentation` rewords a YAML syntax error caused by indentation so it names the
//! wrong line; `secrets` recognises pasted credentials and masks them in every diagnostic and in the
//! text kept for snippets; `workspace` holds the path and allow-prefix rules that `validate` and
//! [`OrgTree`] share; [`inactive`] lists what a config turns on that this build does not run yet;
//! [`read_prompt_file`] is the one way any crate reads a prompt file (regular files inside the
//! config's directory after resolving links, size-capped).
//!
//! Invariants: no input makes this crate panic; a config is either valid (possibly with warnings) or has
//! at least one error diagnostic; every diagnostic has a position; no output of this crate contains a
//! pasted credential in full. Of the other OPC crates it depends only on `opc-shapes`, the
//! dependency-free leaf that knows credential shapes and the kinds of personal data the detector finds
//! (so parsing YAML never builds the privacy crate's ML stack).

pub mod changes;
pub mod decode;
pub mod diagnostic;
pub mod edit;
mod inactive;
mod indentation;
mod org;
mod prompt_file;
pub mod schema;
mod secrets;
mod validate;
mod workspace;
pub mod yaml;

use std::path::{Path, PathBuf};

pub use diagnostic::{Diagnostic, KeyPath, Severity};
pub use inactive::{ACTIVE_TOOLS, Inactive, inactive};
pub use org::{OrgTree, WorkspaceAccess};
pub use prompt_file::{MAX_PROMPT_FILE_BYTES, PromptFileError, read_prompt_file};
pub use schema::Config;

/// Environment variable that names the config file when `--config` is not given.
pub const CONFIG_ENV: &str = "OPC_CONFIG";
/// The config file looked for in the current directory.
pub const DEFAULT_CONFIG_FILE: &str = "opc.config.yaml";

/// Everything found in one config file, with the text needed to show it.
#[derive(Clone, Debug)]
pub struct Report {
    /// The file name as the user gave it (shown in messages).
    pub origin: String,
    /// The file's text.
    pub source: String,
    /// Errors and warnings, ordered by position.
    pub diagnostics: Vec<Diagnostic>,
}

impl Report {
    /// The errors only.
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| d.is_error())
    }

    /// The warnings only.
    pub fn warnings(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| !d.is_error())
    }

    /// Whether the config is unusable.
    pub fn has_errors(&self) -> bool {
        self.errors().next().is_some()
    }

    /// Human-readable output: each diagnostic with its source line underlined and its hint.
    pub fn render(&self, color: bool) -> String {
        diagnostic::render(&self.origin, &self.source, &self.diagnostics, color)
    }

    /// One line per diagnostic, `file:line:column: severity: path: message (hint: …)`, for logs and tests.
    pub fn lines(&self) -> Vec<String> {
        self.diagnostics
            .iter()
            .map(|d| format!("{}:{d}", self.origin))
            .collect()
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let errors = self.errors().count();
        write!(
            f,
            "{}: {errors} error{} found",
            self.origin,
            if errors == 1 { "" } else { "s" }
        )?;
        for line in self.lines() {
            write!(f, "\n  {line}")?;
        }
        Ok(())
    }
}

/// Why a config could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read at all.
    #[error("cannot read config file `{}`: {source}", path.display())]
    Unreadable {
        /// The path that was tried.
        path: PathBuf,
        /// Why reading failed.
        #[source]
        source: std::io::Error,
    },
    /// The file was read but has errors.
    #[error("{0}")]
    Invalid(Box<Report>),
}

/// A config with no errors, ready to use.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The typed settings.
    pub config: Config,
    /// The org chart.
    pub org: OrgTree,
    /// Directory relative paths in the config resolve against.
    pub base_dir: PathBuf,
    /// Warnings (no errors) with the source text, for showing them.
    pub report: Report,
}

/// The config path to use: `explicit` if given, else `$OPC_CONFIG`, else `./opc.config.yaml`.
pub fn config_path(explicit: Option<&Path>) -> PathBuf {
    explicit.map(Path::to_path_buf).unwrap_or_else(|| {
        std::env::var_os(CONFIG_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG_FILE))
    })
}

/// Reads and validates a config file. Relative paths inside it resolve against the file's directory.
pub fn load(path: &Path) -> Result<Loaded, ConfigError> {
    let bytes = std::fs::read(path).map_err(|source| ConfigError::Unreadable {
        path: path.to_path_buf(),
        source,
    })?;
    let source = String::from_utf8(bytes).map_err(|e| ConfigError::Unreadable {
        path: path.to_path_buf(),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text ({e})"),
        ),
    })?;
    let base_dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    parse(&path.display().to_string(), source, Some(&base_dir))
}

/// Validates config text. `origin` names it in messages; `base_dir` is where prompt files are looked
/// up (`None` skips file checks, for text that has no home on disk).
pub fn parse(origin: &str, source: String, base_dir: Option<&Path>) -> Result<Loaded, ConfigError> {
    let (config, diagnostics) = check(&source, base_dir);
    // The text is kept only to show diagnostics; a credential pasted into it is shown masked.
    let source = if diagnostics.is_empty() {
        source
    } else {
        secrets::mask(&source).into_owned()
    };
    let report = Report {
        origin: origin.to_string(),
        source,
        diagnostics,
    };
    match config {
        Some(config) if !report.has_errors() => Ok(Loaded {
            org: OrgTree::build(&config, base_dir),
            config,
            base_dir: base_dir.map_or_else(|| PathBuf::from("."), Path::to_path_buf),
            report,
        }),
        _ => Err(ConfigError::Invalid(Box::new(report))),
    }
}

/// The whole pipeline on text: the decoded config (if the document had the right overall shape) and
/// every diagnostic, sorted by position.
pub fn check(source: &str, base_dir: Option<&Path>) -> (Option<Config>, Vec<Diagnostic>) {
    let doc = match yaml::parse(source) {
        Ok(doc) => doc,
        Err(syntax) => {
            return (None, vec![indentation::syntax_error(source, &syntax)]);
        }
    };
    let mut decoder = decode::Decoder::new(&doc);
    let config = Config::decode(&doc, &mut decoder);
    let mut diagnostics = decoder.diagnostics;
    if let Some(config) = &config {
        diagnostics.extend(validate::check(config, &doc, base_dir));
    }
    diagnostics.sort_by_key(|d| (d.span.line, d.span.column));
    for diagnostic in &mut diagnostics {
        diagnostic.mask_secrets();
    }
    (config, diagnostics)
}
