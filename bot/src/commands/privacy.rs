//! `opc privacy`: the detector from the command line, for people checking what would be masked and for
//! evaluation.
//!
//! - `opc privacy detect [FILE]`: JSON lines in (`{"text": …}`, other fields ignored; stdin without
//!   FILE), one line out per line in, in order: `{"entities":[{"type","start","end","score"}]}` with
//!   offsets in Unicode code points. A line that is not such an object is an error naming its line
//!   number (exit 1), after the lines before it were answered.
//! - `opc privacy eval FILE… [--threshold T] [--sweep [LIST|FROM:TO:STEP]] [--format text|json]`:
//!   files in the `../shared/data/pii` shapes or the generated corpus's (see
//!   `opc_privacy::detect::eval` and `privacy/examples/pii_corpus.rs`); prints per-type precision,
//!   recall, F1 and F2 at token and span level as Markdown tables, the micro token F2, and the false
//!   positives on negative cases. `--threshold` replaces the config's `confidenceThreshold`; `--sweep`
//!   adds, per file, the token-level precision/recall/F2 curve over thresholds (0.30 to 0.95 by
//!   default), from one detection run at the lowest of them. Labelled types the detector does not
//!   know (`LOCATION` in builds without it) are scored as misses and named, never fatal.
//!
//! - `opc privacy mask [FILE]`: plain text in (stdin without FILE); prints the text as a model would see
//!   it, then the mapping (type, real value, substitute). For an admin checking what leaves the
//!   machine: it prints real values to the terminal that asked, and nowhere else.
//!
//! - `opc privacy erase VALUE [--dry-run] [--workspaces]`: every stored copy of VALUE (database
//!   tables, the recall search index and vectors, and with `--workspaces` the agents' workspace
//!   files) replaced by `[erased]`, on SQLite or PostgreSQL; see [`erase`]. It needs the config (for
//!   the database and the workspaces' paths) and no detector.
//!
//! The others use the config's `framework.privacy` (`detectTypes`, `whitelist`, `confidenceThreshold`; the
//! org's name, agent ids and roles are always whitelisted) when a config is found by the usual
//! discovery (`--config`, `$OPC_CONFIG`, `./opc.config.yaml`), else the defaults. The detector
//! runs its NER tier too when the model is in the cache (`opc models fetch`); without it, a note on stderr
//! says names and addresses are found by patterns only.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use opc_hierarchy::schema::PrivacyMode;
use opc_privacy::detect::eval::{self, Report};
use opc_privacy::detect::{DetectOptions, Detector, NerSlot};
use opc_privacy::{Entity, EntityType, Style, Vault};
use serde_json::{Value, json};

use crate::term::eprint;

mod erase;

/// `opc privacy …` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum PrivacyCommand {
    /// Detect personal data in JSON lines (`{"text": …}` per line; stdin without FILE) and print
    /// `{"entities":[{"type","start","end","score"}]}` per line, offsets in code points.
    Detect {
        /// A JSON-lines file; stdin when absent.
        file: Option<PathBuf>,
    },
    /// Score the detector on labelled JSON-lines files, one
    /// `{"text": …, "entities": [{"type", "start", "end"}]}` per line (offsets in code points):
    /// per-type precision, recall, F1 and F2 at token and span level.
    Eval {
        /// Files to score.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// The confidence threshold to score at (default: the config's `confidenceThreshold`, else
        /// 0.85).
        #[arg(long, value_name = "T")]
        threshold: Option<f32>,
        /// Also print the precision/recall/F2 curve over thresholds: a comma list (`0.3,0.5,0.7`) or
        /// `FROM:TO:STEP`; 0.30 to 0.95 in steps of 0.05 without a value.
        #[arg(long, value_name = "LIST", num_args = 0..=1, default_missing_value = "0.3:0.95:0.05")]
        sweep: Option<String>,
        /// `text` (Markdown tables) or `json` (one object with every file's report and sweep).
        #[arg(long, value_name = "FORMAT", default_value = "text")]
        format: EvalFormat,
    },
    /// Mask plain text (stdin without FILE) as the privacy gateway would, and print the masked text
    /// and the mapping from real values to substitutes.
    Mask {
        /// A text file; stdin when absent.
        file: Option<PathBuf>,
        /// Print one JSON object (`masked`, `mapping`, `counts`) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Replace every stored copy of VALUE with `[erased]`: in every table of the database (tasks and
    /// their histories, recall rows, memory blocks, the web transcript and its progress events,
    /// approvals, notices, …), in the recall search index and its vectors; then rebuild the file so
    /// no old bytes remain. Also lists the files in the agents' workspaces that hold it (written by
    /// the Write tool or Bash); `--workspaces` replaces it in them too. Matches the value in any
    /// case, its JSON-escaped forms, at word boundaries. Values shorter than 4 characters are
    /// refused. On SQLite, stop `opc run` first (it refuses while `opc run` holds the database;
    /// `--dry-run` works beside it); on PostgreSQL the nodes keep running and their search indexes
    /// re-read the rewritten rows.
    Erase {
        /// The exact value, e.g. an e-mail address or a full name.
        value: String,
        /// Report what would be replaced, per table and per workspace file, and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Also replace the value in the workspace files that hold it, in place (text files only:
        /// binary and very large files, files with several hard links and symlinks are listed, not
        /// edited).
        #[arg(long)]
        workspaces: bool,
    },
}

/// How `opc privacy eval` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EvalFormat {
    /// Markdown tables.
    Text,
    /// One JSON object.
    Json,
}

/// Run a `privacy` subcommand with the config at `config` (used only when it exists).
pub fn run(config: &Path, command: PrivacyCommand) -> ExitCode {
    // Erasure needs no detector: answer it before loading the NER model.
    if let PrivacyCommand::Erase {
        value,
        dry_run,
        workspaces,
    } = &command
    {
        return erase::run(config, value, *dry_run, *workspaces);
    }
    // Eval's thresholds: the one to report at, and the sweep's.
    let mut eval_thresholds = None;
    if let PrivacyCommand::Eval {
        threshold, sweep, ..
    } = &command
    {
        if let Some(t) = threshold
            && !(0.0..=1.0).contains(t)
        {
            eprint(&format!(
                "error: --threshold {t} is outside 0..1 (it is a confidence: 0.5 masks spans the detector is at least half sure of)\n"
            ));
            return ExitCode::from(2);
        }
        let points = match sweep.as_deref().map(eval::parse_thresholds).transpose() {
            Ok(p) => p,
            Err(e) => {
                eprint(&format!("error: --sweep: {e}\n"));
                return ExitCode::from(2);
            }
        };
        eval_thresholds = Some((*threshold, points));
    }
    let ner = NerSlot::new();
    let patterns = "names and addresses are found by patterns only";
    if let Err(reason) = super::models::load_now(&ner, patterns) {
        eprint(&format!(
            "note: the privacy NER model is not loaded ({reason}); {patterns}. Fetch it with `opc models fetch`\n"
        ));
    }
    // Eval keeps every span (threshold 0) and filters by score per threshold it reports.
    let lowest = eval_thresholds.as_ref().map(|_| 0.0);
    let (detector, style, configured) = match detector_for(config, ner, lowest) {
        Ok(d) => d,
        Err(code) => return code,
    };
    match command {
        PrivacyCommand::Detect { file } => detect(&detector, file.as_deref()),
        PrivacyCommand::Eval {
            files,
            threshold,
            format,
            ..
        } => {
            let sweep = eval_thresholds.and_then(|(_, p)| p);
            evaluate(
                &detector,
                &files,
                threshold.unwrap_or(configured),
                sweep.as_deref(),
                format,
            )
        }
        PrivacyCommand::Mask { file, json } => mask(&detector, style, file.as_deref(), json),
        PrivacyCommand::Erase {
            value,
            dry_run,
            workspaces,
        } => erase::run(config, &value, dry_run, workspaces),
    }
}

/// The detector, the substitute style (`redact` gives placeholders) and the configured threshold for
/// the config, built as the gateway builds them (`opc_agents::llm::privacy::detector`), or the
/// defaults when there is no config file. `threshold`, when given, replaces the configured one in the
/// detector (eval's `--threshold` and `--sweep`).
fn detector_for(
    config: &Path,
    ner: NerSlot,
    threshold: Option<f32>,
) -> Result<(Detector, Style, f32), ExitCode> {
    if !config.exists() {
        let mut options = DetectOptions::default();
        let configured = options.threshold;
        if let Some(t) = threshold {
            options.threshold = t;
        }
        return Ok((Detector::new(options, ner), Style::Fake, configured));
    }
    let mut loaded = crate::setup::load_config(config)?;
    let style = match loaded.config.framework.privacy.mode {
        PrivacyMode::Redact => Style::Placeholder,
        PrivacyMode::Mask | PrivacyMode::Route => Style::Fake,
    };
    let configured = loaded.config.framework.privacy.confidence_threshold as f32;
    if let Some(t) = threshold {
        loaded.config.framework.privacy.confidence_threshold = f64::from(t);
    }
    Ok((
        opc_agents::llm::privacy::detector(&loaded.config, ner),
        style,
        configured,
    ))
}

/// Byte offset → code-point offset, for byte offsets on char boundaries in increasing order.
fn code_points(text: &str, offsets: &[usize]) -> Vec<usize> {
    let mut bounds = text
        .char_indices()
        .map(|(b, _)| b)
        .chain(std::iter::once(text.len()))
        .enumerate()
        .peekable();
    let mut out = Vec::with_capacity(offsets.len());
    for &target in offsets {
        while bounds.peek().is_some_and(|&(_, b)| b < target) {
            bounds.next();
        }
        out.push(bounds.peek().map_or(0, |&(cp, _)| cp));
    }
    out
}

/// The output line of `text`, whose entities are `found` (byte offsets, turned into code points).
fn entities_line(text: &str, found: &[Entity]) -> Value {
    let mut offsets: Vec<usize> = found.iter().flat_map(|e| [e.start, e.end]).collect();
    offsets.sort_unstable();
    let cps = code_points(text, &offsets);
    let cp = |b: usize| offsets.binary_search(&b).map_or(0, |i| cps[i]);
    let entities: Vec<Value> = found
        .iter()
        .map(|e| {
            json!({
                "type": e.kind.as_str(),
                "start": cp(e.start),
                "end": cp(e.end),
                "score": (f64::from(e.score) * 1000.0).round() / 1000.0,
            })
        })
        .collect();
    json!({ "entities": entities })
}

/// Lines detected together: with the NER model loaded, one forward pass over many short texts costs
/// far less per text than one pass each (see `Rampart::batch_predictions`). Output order and
/// streaming are kept: each chunk is written as soon as it is done.
const DETECT_CHUNK: usize = 256;

/// Detect `texts` together and write one line each.
fn write_chunk(detector: &Detector, texts: &mut Vec<String>, out: &mut impl Write) {
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    for (text, found) in refs.iter().zip(detector.detect_batch(&refs)) {
        let _ = writeln!(out, "{}", entities_line(text, &found));
    }
    texts.clear();
}

fn open(file: Option<&Path>) -> Result<BufReader<Box<dyn Read>>, String> {
    let input: Box<dyn Read> = match file {
        None => Box::new(std::io::stdin()),
        Some(path) => Box::new(
            std::fs::File::open(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?,
        ),
    };
    Ok(BufReader::with_capacity(1 << 20, input))
}

fn detect(detector: &Detector, file: Option<&Path>) -> ExitCode {
    let mut input = match open(file) {
        Ok(i) => i,
        Err(e) => {
            eprint(&format!("error: {e}\n"));
            return ExitCode::from(2);
        }
    };
    let name = file.map_or("stdin".to_string(), |p| p.display().to_string());
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut chunk: Vec<String> = Vec::with_capacity(DETECT_CHUNK);
    let mut line = String::new();
    for n in 1.. {
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                write_chunk(detector, &mut chunk, &mut out);
                let _ = out.flush();
                eprint(&format!("error: {name}:{n}: cannot read the line: {e}\n"));
                return ExitCode::from(1);
            }
        }
        let line = line.strip_suffix('\n').unwrap_or(&line);
        let line = line.strip_suffix('\r').unwrap_or(line);
        let text = serde_json::from_str::<Value>(line)
            .map_err(|e| {
                format!(
                    "not JSON ({e}): each line is one object like {{\"text\": \"Call Ann on …\"}}; \
                     for plain text use `opc privacy mask`, or wrap each line with `jq -Rc '{{text: .}}'`"
                )
            })
            .and_then(|v| {
                v.get("text")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| "expected an object with a \"text\" string".to_string())
            });
        match text {
            Ok(text) => {
                chunk.push(text);
                // A full chunk, or nothing more read ahead (the next read could wait on a person
                // or a program expecting this answer first): answer what we have.
                if chunk.len() == DETECT_CHUNK || input.buffer().is_empty() {
                    write_chunk(detector, &mut chunk, &mut out);
                    let _ = out.flush();
                }
            }
            Err(e) => {
                // Every line before the bad one is answered first.
                write_chunk(detector, &mut chunk, &mut out);
                let _ = out.flush();
                eprint(&format!("error: {name}:{n}: {e}\n"));
                return ExitCode::from(1);
            }
        }
    }
    write_chunk(detector, &mut chunk, &mut out);
    let _ = out.flush();
    ExitCode::SUCCESS
}

/// The vault's bound for one `opc privacy mask` run: a text with more distinct values than this is
/// refused rather than printed half-masked.
const MASK_VAULT_CAPACITY: usize = 100_000;

fn mask(detector: &Detector, style: Style, file: Option<&Path>, json: bool) -> ExitCode {
    let mut text = String::new();
    let name = file.map_or("stdin".to_string(), |p| p.display().to_string());
    let read = match open(file) {
        Ok(mut input) => input
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read {name}: {e}")),
        Err(e) => Err(e),
    };
    if let Err(e) = read {
        eprint(&format!("error: {e}\n"));
        return ExitCode::from(2);
    }
    let found = detector.detect(&text);
    // A fixed seed: the same text masks the same way on every run, so an admin can compare runs.
    let mut vault = Vault::new(0, style, MASK_VAULT_CAPACITY);
    let masked = match vault.mask(&text, &found) {
        Ok(m) => m,
        Err(e) => {
            eprint(&format!("error: {e}\n"));
            return ExitCode::from(1);
        }
    };
    // The mapping, in order of first appearance, each real value once. `substitute` is stable, so
    // asking again returns what `mask` used.
    let mut mapping: Vec<(EntityType, &str, String)> = Vec::new();
    for e in &found {
        let real = e.text(&text);
        if mapping.iter().any(|(_, r, _)| *r == real) {
            continue;
        }
        match vault.substitute(real, e.kind) {
            Ok(sub) => mapping.push((e.kind, real, sub)),
            Err(err) => {
                eprint(&format!("error: {err}\n"));
                return ExitCode::from(1);
            }
        }
    }
    if json {
        let mapping: Vec<Value> = mapping
            .iter()
            .map(
                |(kind, real, sub)| json!({"type": kind.as_str(), "real": real, "substitute": sub}),
            )
            .collect();
        let counts: serde_json::Map<String, Value> = masked
            .counts
            .iter()
            .map(|(kind, n)| (kind.as_str().to_string(), json!(n)))
            .collect();
        println!(
            "{}",
            json!({"masked": masked.text, "mapping": mapping, "counts": counts})
        );
        return ExitCode::SUCCESS;
    }
    print!("{}", masked.text);
    if !masked.text.ends_with('\n') {
        println!();
    }
    if mapping.is_empty() {
        println!("\nnothing to mask");
        return ExitCode::SUCCESS;
    }
    println!("\nmasked {} ({})", masked.counts.total(), masked.counts);
    let width = mapping
        .iter()
        .map(|(k, _, _)| k.as_str().len())
        .max()
        .unwrap_or(0);
    for (kind, real, sub) in &mapping {
        println!("  {:width$}  {real} → {sub}", kind.as_str());
    }
    ExitCode::SUCCESS
}

/// Read one file's cases; skipped lines are counted in `report`.
fn read_cases(file: &Path, report: &mut Report) -> Result<Vec<eval::Case>, (String, u8)> {
    let mut text = String::new();
    std::fs::File::open(file)
        .and_then(|mut f| f.read_to_string(&mut text))
        .map_err(|e| (format!("cannot read {}: {e}", file.display()), 2))?;
    let mut cases = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match eval::parse_case(line) {
            Ok(Ok(case)) => cases.push(case),
            Ok(Err(skip)) => report.skip(&skip),
            Err(e) => return Err((format!("{}:{}: {e}", file.display(), i + 1), 1)),
        }
    }
    Ok(cases)
}

/// Score `files` at `threshold`, and over `sweep` when given. The detector keeps every span (it was
/// built with threshold 0); each report filters its output by score, which equals detecting at that
/// threshold (see `opc_privacy::detect::eval`).
fn evaluate(
    detector: &Detector,
    files: &[PathBuf],
    threshold: f32,
    sweep: Option<&[f32]>,
    format: EvalFormat,
) -> ExitCode {
    let mut all_cases = Vec::new();
    let mut all_found = Vec::new();
    let mut all_skips = Report::default();
    let mut outputs = Vec::new();
    for file in files {
        let mut skips = Report::default();
        let cases = match read_cases(file, &mut skips) {
            Ok(c) => c,
            Err((e, code)) => {
                eprint(&format!("error: {e}\n"));
                return ExitCode::from(code);
            }
        };
        let mut found = Vec::with_capacity(cases.len());
        for chunk in cases.chunks(DETECT_CHUNK) {
            let texts: Vec<&str> = chunk.iter().map(|c| c.text.as_str()).collect();
            found.extend(detector.detect_batch(&texts));
        }
        let mut report = eval::score(&cases, &found, threshold);
        report.skipped = skips.skipped.clone();
        for (k, n) in skips.skipped {
            *all_skips.skipped.entry(k).or_default() += n;
        }
        let points = sweep.map(|t| eval::sweep(&cases, &found, t));
        outputs.push((file.display().to_string(), report, points));
        all_cases.extend(cases);
        all_found.extend(found);
    }
    if files.len() > 1 {
        let mut report = eval::score(&all_cases, &all_found, threshold);
        report.skipped = all_skips.skipped;
        let points = sweep.map(|t| eval::sweep(&all_cases, &all_found, t));
        outputs.push(("all files".to_string(), report, points));
    }
    match format {
        EvalFormat::Json => {
            let files: Vec<Value> = outputs
                .iter()
                .map(|(name, report, points)| {
                    let sweep = points.as_ref().map(|ps| {
                        ps.iter()
                            .map(|p| json!({"threshold": (f64::from(p.threshold) * 1000.0).round() / 1000.0, "report": p.report.to_json()}))
                            .collect::<Vec<Value>>()
                    });
                    json!({"file": name, "report": report.to_json(), "sweep": sweep})
                })
                .collect();
            println!(
                "{}",
                json!({"threshold": (f64::from(threshold) * 1000.0).round() / 1000.0, "files": files})
            );
        }
        EvalFormat::Text => {
            for (name, report, points) in &outputs {
                println!("== {name} (threshold {threshold:.2})\n{report}");
                if let Some(points) = points {
                    println!(
                        "threshold sweep (token level; ← best micro F2):\n\n{}",
                        eval::sweep_table(points)
                    );
                }
            }
        }
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_code_points() {
        let d = Detector::new(DetectOptions::default(), NerSlot::new());
        let text = "Grüße an zoë@example.com ✓";
        let v = entities_line(text, &d.detect(text));
        assert_eq!(v["entities"][0]["type"], "EMAIL");
        assert_eq!(v["entities"][0]["start"], 9);
        assert_eq!(v["entities"][0]["end"], 24);
        assert_eq!(code_points("aéb", &[0, 1, 3, 4]), vec![0, 1, 2, 3]);
    }
}
