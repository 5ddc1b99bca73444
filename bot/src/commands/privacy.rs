//! `opc privacy`: the detector from the command line, for people checking what would be masked and for
//! evaluation.
//!
//! - `opc privacy detect [FILE]`: JSON lines in (`{"text": …}`, other fields ignored; stdin without
//!   FILE), one line out per line in, in order: `{"entities":[{"type","start","end","score"}]}` with
//!   offsets in Unicode code points. A line that is not such an object is an error naming its line
//!   number (exit 1), after the lines before it were answered.
//! - `opc privacy eval FILE…`: files in the `../shared/data/pii` shapes (see
//!   `opc_privacy::detect::eval`); prints per-type precision, recall, F1 and F2 at token and span level,
//!   and the false positives on negative cases.
//!
//! - `opc privacy mask [FILE]`: plain text in (stdin without FILE); prints the text as a model would see
//!   it, then the mapping (type, real value, substitute). For an admin checking what leaves the
//!   machine: it prints real values to the terminal that asked, and nowhere else.
//!
//! - `opc privacy erase VALUE [--dry-run]`: every stored copy of VALUE (database tables, the recall
//!   search index and vectors) replaced by `[erased]`; see [`erase`]. It needs the config (for the
//!   database's path) and no detector.
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

use super::eprint;

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
    /// Score the detector on labelled JSON-lines files (the ../shared/data/pii shapes, or the synthetic
    /// corpus): per-type precision, recall, F1 and F2 at token and span level.
    Eval {
        /// Files to score.
        #[arg(required = true)]
        files: Vec<PathBuf>,
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
    /// no old bytes remain. Matches the value in any case, its JSON-escaped forms, at word
    /// boundaries. Values shorter than 4 characters are refused. Stop `opc run` first (it refuses
    /// while `opc run` holds the database); `--dry-run` works beside it.
    Erase {
        /// The exact value, e.g. an e-mail address or a full name.
        value: String,
        /// Report what would be replaced, per table, and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// Run a `privacy` subcommand with the config at `config` (used only when it exists).
pub fn run(config: &Path, command: PrivacyCommand) -> ExitCode {
    // Erasure needs no detector: answer it before loading the NER model.
    if let PrivacyCommand::Erase { value, dry_run } = &command {
        return erase::run(config, value, *dry_run);
    }
    let ner = NerSlot::new();
    let patterns = "names and addresses are found by patterns only";
    if let Err(reason) = super::models::load_now(&ner, patterns) {
        eprint(&format!(
            "note: the privacy NER model is not loaded ({reason}); {patterns}. Fetch it with `opc models fetch`\n"
        ));
    }
    let (detector, style) = match detector_for(config, ner) {
        Ok(d) => d,
        Err(code) => return code,
    };
    match command {
        PrivacyCommand::Detect { file } => detect(&detector, file.as_deref()),
        PrivacyCommand::Eval { files } => evaluate(&detector, &files),
        PrivacyCommand::Mask { file, json } => mask(&detector, style, file.as_deref(), json),
        PrivacyCommand::Erase { value, dry_run } => erase::run(config, &value, dry_run),
    }
}

/// The detector and the substitute style (`redact` gives placeholders) for the config, built as the
/// gateway builds them (`opc_agents::llm::privacy::detector`), or the defaults when there is no config
/// file.
fn detector_for(config: &Path, ner: NerSlot) -> Result<(Detector, Style), ExitCode> {
    if !config.exists() {
        return Ok((Detector::new(DetectOptions::default(), ner), Style::Fake));
    }
    let loaded = super::load_config(config)?;
    let style = match loaded.config.framework.privacy.mode {
        PrivacyMode::Redact => Style::Placeholder,
        PrivacyMode::Mask | PrivacyMode::Route => Style::Fake,
    };
    Ok((
        opc_agents::llm::privacy::detector(&loaded.config, ner),
        style,
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
            .map_err(|e| format!("not JSON ({e})"))
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

fn evaluate(detector: &Detector, files: &[PathBuf]) -> ExitCode {
    let mut total = Report::default();
    for file in files {
        let mut text = String::new();
        let read = std::fs::File::open(file).and_then(|mut f| f.read_to_string(&mut text));
        if let Err(e) = read {
            eprint(&format!("error: cannot read {}: {e}\n", file.display()));
            return ExitCode::from(2);
        }
        let mut report = Report::default();
        let mut cases = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match eval::parse_case(line) {
                Ok(Ok(case)) => cases.push(case),
                Ok(Err(skip)) => {
                    report.skip(&skip);
                    total.skip(&skip);
                }
                Err(e) => {
                    eprint(&format!("error: {}:{}: {e}\n", file.display(), i + 1));
                    return ExitCode::from(1);
                }
            }
        }
        for chunk in cases.chunks(DETECT_CHUNK) {
            let texts: Vec<&str> = chunk.iter().map(|c| c.text.as_str()).collect();
            for (case, found) in chunk.iter().zip(detector.detect_batch(&texts)) {
                report.add(case, &found);
                total.add(case, &found);
            }
        }
        println!("== {}\n{report}", file.display());
    }
    if files.len() > 1 {
        println!("== all files\n{total}");
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
