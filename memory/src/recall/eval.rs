//! LoCoMo evidence recall@k, measured through the same code path as live recall.
//!
//! Each conversation's turns are appended to a fresh [`RecallStore`] (the speaker as author, the
//! session as thread, the session date as time, `dia_id` as the source id), indexed by the same
//! catch-up the background indexer runs, and each question searches its own conversation.
//! recall@k = the share of a question's evidence `dia_id`s among the top k hits, averaged over the
//! questions that have evidence (LoCoMo's own metric; questions with no resolvable evidence are
//! counted in `skipped`, not scored).
//!
//! A report keeps every scored question (its conversation, category, and each evidence turn's rank),
//! so it can be cut by category (`opc memory eval locomo --by-category`) and by conversation
//! ([`Report::part`]: tuning on some conversations and checking on the others, as
//! `examples/locomo_tune.rs` does).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use serde_json::Value;

use super::{Mode, NewMessage, Query, RecallError, RecallStore, Tuning, date};
use crate::embed::EmbedSlot;

/// One configuration to measure.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Config {
    /// A label for the report.
    pub name: String,
    /// Which lists.
    pub mode: Mode,
    /// Knobs.
    pub tuning: Tuning,
}

/// Recall of one configuration.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    /// The configuration.
    pub config: Config,
    /// The k values, ascending.
    pub ks: Vec<usize>,
    /// Questions scored.
    pub questions: usize,
    /// Questions without evidence (not scored).
    pub skipped: usize,
    /// recall@k in percent, per k (same order as `ks`).
    pub overall: Vec<f64>,
    /// Per category name: (questions, recall@k per k in percent).
    pub by_category: BTreeMap<String, (usize, Vec<f64>)>,
    /// Per conversation (`sample_id`): (questions, recall@k per k in percent).
    pub by_sample: BTreeMap<String, (usize, Vec<f64>)>,
    /// Every scored question, for [`Report::part`].
    #[serde(skip)]
    pub scored: Vec<Scored>,
}

/// One scored question.
#[derive(Debug, Clone)]
pub struct Scored {
    /// Its conversation (`sample_id`).
    pub sample: String,
    /// Its category name.
    pub category: String,
    /// The share of its evidence in the top k, per k (0–1).
    pub per_k: Vec<f64>,
    /// The question, for error analysis.
    pub question: String,
    /// Each evidence `dia_id` with its 1-based rank among the hits (`None`: not in the top max k).
    pub ranks: Vec<(String, Option<usize>)>,
}

struct Turn {
    sample: String,
    msg: NewMessage,
}

struct Question {
    sample: String,
    text: String,
    category: String,
    evidence: Vec<String>,
}

fn read_jsonl(path: &Path) -> Result<Vec<Value>, RecallError> {
    let text = std::fs::read_to_string(path).map_err(|e| RecallError::Io {
        context: format!("reading {}", path.display()),
        source: e,
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                RecallError::Invalid(format!("{}:{}: not JSON: {e}", path.display(), i + 1))
            })
        })
        .collect()
}

fn string(v: &Value, key: &str) -> String {
    match &v[key] {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn turns(path: &Path) -> Result<Vec<Turn>, RecallError> {
    read_jsonl(path)?
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let sample = string(&v, "sample_id");
            let dia = string(&v, "dia_id");
            if sample.is_empty() || dia.is_empty() {
                return Err(RecallError::Invalid(format!(
                    "{}:{}: a turn needs sample_id and dia_id",
                    path.display(),
                    i + 1
                )));
            }
            let mut text = string(&v, "text");
            let caption = string(&v, "blip_caption");
            if !caption.is_empty() {
                text = format!("{text} [shares a photo of {caption}]");
            }
            let time_ms = date::parse_locomo(&string(&v, "session_date_time")).unwrap_or(0);
            Ok(Turn {
                msg: NewMessage {
                    namespace: "locomo".into(),
                    author: string(&v, "speaker"),
                    conversation: sample.clone(),
                    task: None,
                    thread: Some(format!("session {}", string(&v, "session"))),
                    source_id: Some(dia),
                    time_ms,
                    text,
                },
                sample,
            })
        })
        .collect()
}

fn questions(path: &Path) -> Result<Vec<Question>, RecallError> {
    read_jsonl(path)?
        .into_iter()
        .map(|v| {
            let evidence = v["evidence"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|e| e.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            let mut category = string(&v, "category_name");
            if category.is_empty() {
                category = format!("category {}", string(&v, "category"));
            }
            Ok(Question {
                sample: string(&v, "sample_id"),
                text: string(&v, "question"),
                category,
                evidence,
            })
        })
        .collect()
}

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Measure every configuration in `configs` over the LoCoMo files; the embedder in `slot` (when
/// filled) embeds the turns once for all configurations.
pub fn run(
    turns_path: &Path,
    qa_path: &Path,
    ks: &[usize],
    configs: &[Config],
    slot: &EmbedSlot,
) -> Result<Vec<Report>, RecallError> {
    let mut ks: Vec<usize> = ks.iter().copied().filter(|&k| k > 0).collect();
    ks.sort_unstable();
    ks.dedup();
    let max_k = ks
        .last()
        .copied()
        .ok_or_else(|| RecallError::Invalid("no k given".into()))?;
    let turns = turns(turns_path)?;
    let questions = questions(qa_path)?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let scratch =
        Scratch(std::env::temp_dir().join(format!("opc-locomo-{}-{nanos}", std::process::id())));
    std::fs::create_dir_all(&scratch.0).map_err(|e| RecallError::Io {
        context: format!("creating {}", scratch.0.display()),
        source: e,
    })?;
    let mut samples: Vec<&str> = Vec::new();
    for t in &turns {
        if !samples.contains(&t.sample.as_str()) {
            samples.push(&t.sample);
        }
    }
    // Per configuration: every scored question.
    let mut scores: Vec<Vec<Scored>> = vec![Vec::new(); configs.len()];
    let mut skipped = 0;
    let never = AtomicBool::new(false);
    for (i, sample) in samples.iter().enumerate() {
        let store = RecallStore::open(&scratch.0.join(format!("conv{i}.db")), slot.clone())?;
        let msgs: Vec<NewMessage> = turns
            .iter()
            .filter(|t| t.sample == *sample)
            .map(|t| t.msg.clone())
            .collect();
        store.append_all(&msgs)?;
        let t0 = std::time::Instant::now();
        store.catch_up(&never)?;
        tracing::info!(
            sample,
            turns = msgs.len(),
            secs = t0.elapsed().as_secs_f64(),
            "indexed"
        );
        let asked: Vec<&Question> = questions.iter().filter(|q| q.sample == *sample).collect();
        // Embed the questions once, batched, for every configuration.
        let qvecs: Vec<Option<Vec<f32>>> = match slot.get() {
            Some(m) => {
                let texts: Vec<&str> = asked.iter().map(|q| q.text.as_str()).collect();
                m.embed(&texts)?.into_iter().map(Some).collect()
            }
            None => vec![None; asked.len()],
        };
        for (q, qv) in asked.into_iter().zip(qvecs) {
            if q.evidence.is_empty() {
                skipped += 1;
                continue;
            }
            for (c, config) in configs.iter().enumerate() {
                let mut query =
                    Query::new(q.text.clone(), vec!["locomo".into()], config.mode, max_k);
                query.tuning = config.tuning;
                query.vector.clone_from(&qv);
                let hits = store.search(&query)?;
                let ids: Vec<&str> = hits
                    .iter()
                    .map(|h| h.message.source_id.as_deref().unwrap_or(""))
                    .collect();
                let per_k = ks
                    .iter()
                    .map(|&k| {
                        let top = &ids[..k.min(ids.len())];
                        let found = q
                            .evidence
                            .iter()
                            .filter(|e| top.contains(&e.as_str()))
                            .count();
                        found as f64 / q.evidence.len() as f64
                    })
                    .collect();
                let ranks = q
                    .evidence
                    .iter()
                    .map(|e| (e.clone(), ids.iter().position(|i| i == e).map(|p| p + 1)))
                    .collect();
                scores[c].push(Scored {
                    sample: q.sample.clone(),
                    category: q.category.clone(),
                    per_k,
                    question: q.text.clone(),
                    ranks,
                });
            }
        }
    }
    Ok(configs
        .iter()
        .zip(scores)
        .map(|(config, s)| summarise(config.clone(), ks.clone(), skipped, s))
        .collect())
}

/// Mean recall per k, in percent, of `rows` (0 for none).
fn mean(rows: &[&Scored], ks: usize) -> Vec<f64> {
    (0..ks)
        .map(|j| {
            if rows.is_empty() {
                0.0
            } else {
                100.0 * rows.iter().map(|r| r.per_k[j]).sum::<f64>() / rows.len() as f64
            }
        })
        .collect()
}

/// The report of `scored` questions: overall, per category and per conversation.
fn summarise(config: Config, ks: Vec<usize>, skipped: usize, scored: Vec<Scored>) -> Report {
    let group = |key: fn(&Scored) -> &String| {
        let mut keys: Vec<&String> = scored.iter().map(key).collect();
        keys.sort();
        keys.dedup();
        keys.into_iter()
            .map(|k| {
                let rows: Vec<&Scored> = scored.iter().filter(|x| key(x) == k).collect();
                (k.clone(), (rows.len(), mean(&rows, ks.len())))
            })
            .collect::<BTreeMap<_, _>>()
    };
    let by_category = group(|x| &x.category);
    let by_sample = group(|x| &x.sample);
    let all: Vec<&Scored> = scored.iter().collect();
    let overall = mean(&all, ks.len());
    Report {
        config,
        questions: scored.len(),
        skipped,
        overall,
        by_category,
        by_sample,
        ks,
        scored,
    }
}

impl Report {
    /// The same report over the questions of the conversations `samples` only (a held-out part);
    /// `skipped` is not split and reads 0.
    pub fn part(&self, samples: &[&str]) -> Report {
        let scored = self
            .scored
            .iter()
            .filter(|s| samples.contains(&s.sample.as_str()))
            .cloned()
            .collect();
        summarise(self.config.clone(), self.ks.clone(), 0, scored)
    }

    /// The recall at `k` in percent, when `k` was measured.
    pub fn at(&self, k: usize) -> Option<f64> {
        self.ks
            .iter()
            .position(|&x| x == k)
            .map(|i| self.overall[i])
    }

    /// A table for people: one row per category when `by_category`, then the overall row; ends
    /// with `recall@10 = NN.N` when 10 is among the ks.
    pub fn text(&self, by_category: bool) -> String {
        let mut out = format!(
            "LoCoMo evidence recall ({}, mode {:?}, {} questions, {} without evidence skipped)\n",
            self.config.name, self.config.mode, self.questions, self.skipped
        );
        let head: Vec<String> = self.ks.iter().map(|k| format!("R@{k:<5}")).collect();
        out.push_str(&format!(
            "{:<14} {:>5}  {}\n",
            "category",
            "n",
            head.join(" ")
        ));
        let row = |name: &str, n: usize, v: &[f64]| {
            let cells: Vec<String> = v.iter().map(|x| format!("{x:>6.1}")).collect();
            format!("{name:<14} {n:>5}  {}\n", cells.join(" "))
        };
        if by_category {
            for (cat, (n, v)) in &self.by_category {
                out.push_str(&row(cat, *n, v));
            }
        }
        out.push_str(&row("overall", self.questions, &self.overall));
        if let Some(r) = self.at(10) {
            out.push_str(&format!("recall@10 = {r:.1}\n"));
        }
        out
    }
}
