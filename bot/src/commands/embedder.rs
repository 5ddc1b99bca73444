//! Which embedder recall and facts use, filled into their shared slot at `opc run`'s start:
//! the local model (loaded in the background) or an OpenAI-compatible endpoint
//! (`framework.memory.embedding.provider: openai-compatible`, issue 39), whose texts are masked by
//! the privacy gateway (the engine's detector and NER slot) and whose calls go to the store's
//! ledger as their own kind (the console's Costs show them apart).
//!
//! A model change (another provider, model or dimensions) starts a new generation in the stores;
//! until it is complete, searches embed their queries with the previous generation's embedder,
//! which is rebuilt here from the descriptor the stores recorded (`set_previous`). When it cannot
//! be (its key variable is gone), that is said once: the vector half of search is off until the new
//! generation completes, and searches never compare vectors of two models.
//!
//! The masking key: the fakes that replace personal data before embedding are a keyed function of
//! each value (the same person embeds the same way in every row and query, across restarts). The key
//! is 32 random bytes in a file beside the database (`<framework.memory.path>.embed-key`, mode
//! 0600), made on first use; processes sharing the database must share it (nodes of a cluster that
//! do not share the directory: copy it). Losing it only makes old and new rows' fakes differ.
//!
//! Invariants: an error says what, where and how to fix it, once, at start-up; the key and the
//! masking key are never printed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use opc_agents::Engine;
use opc_agents::llm::embed::{EmbedCall, EmbedLedger, RemoteEmbedder, RemoteOptions, masker_for};
use opc_agents::llm::layers::RetryPolicy;
use opc_hierarchy::Loaded;
use opc_hierarchy::schema::EmbeddingProvider;
use opc_memory::embed::{EmbedSlot, Embedder, MINILM_ID};

use crate::term::eprint;

/// Writes embedding calls to the engine's store; a failure is logged once, never fails a call.
#[derive(Clone)]
struct StoreLedger {
    engine: Engine,
    warned: Arc<AtomicBool>,
}

impl EmbedLedger for StoreLedger {
    fn record(&self, call: EmbedCall) {
        let ledger = self.clone();
        tokio::spawn(async move {
            if let Err(e) = ledger.engine.store().record_embedding_call(&call).await
                && !ledger.warned.swap(true, Ordering::Relaxed)
            {
                tracing::warn!(
                    "cannot record embedding calls in the ledger ({e}); they are not counted in Costs (said once)"
                );
            }
        });
    }
}

/// The masking key file of the database at `db`.
fn key_path(db: &Path) -> PathBuf {
    let mut path = db.as_os_str().to_owned();
    path.push(".embed-key");
    PathBuf::from(path)
}

/// 32 bytes from the OS.
fn random_key() -> Result<[u8; 32], String> {
    let mut key = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut key))
        .map_err(|e| format!("cannot read random bytes from /dev/urandom: {e}"))?;
    Ok(key)
}

/// The masking key beside the database `db`: read, or made (0600) when there is none.
fn masking_key(db: &Path) -> Result<[u8; 32], String> {
    let path = key_path(db);
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    // A process that just created the file writes it a moment later: an empty file is read again
    // for up to a second before it is taken for a bad one.
    let mut read = std::fs::read_to_string(&path);
    for _ in 0..20 {
        match &read {
            Ok(text) if text.trim().is_empty() => {
                std::thread::sleep(std::time::Duration::from_millis(50));
                read = std::fs::read_to_string(&path);
            }
            _ => break,
        }
    }
    match read {
        Ok(text) => {
            let text = text.trim();
            let mut key = [0u8; 32];
            let ok = text.len() == 64
                && text.is_ascii()
                && key.iter_mut().enumerate().all(|(i, k)| {
                    u8::from_str_radix(&text[2 * i..2 * i + 2], 16)
                        .map(|v| *k = v)
                        .is_ok()
                });
            if ok {
                Ok(key)
            } else {
                Err(format!(
                    "{} is not a masking key (64 hex digits). Fix: restore it from a backup, or delete it to make a new one (rows embedded before then keep their old fakes)",
                    path.display()
                ))
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = random_key()?;
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            }
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            match options.open(&path) {
                Ok(mut file) => {
                    file.write_all(hex(&key).as_bytes())
                        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                    Ok(key)
                }
                // Another process made it at the same moment: use theirs.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => masking_key(db),
                Err(e) => Err(format!("cannot create {}: {e}", path.display())),
            }
        }
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// A remote embedder from `options`, masked by the engine's privacy gateway, recorded in its ledger.
fn start_remote(
    loaded: &Loaded,
    engine: &Engine,
    mut options: RemoteOptions,
) -> Result<Arc<dyn Embedder>, String> {
    let config = &loaded.config;
    if config.framework.privacy.enabled {
        let key = masking_key(&crate::setup::database_path(loaded))?;
        options.masker = masker_for(config, engine.ner_slot(), key);
    }
    options.ledger = Some(Arc::new(StoreLedger {
        engine: engine.clone(),
        warned: Arc::default(),
    }));
    // The masker is built from the privacy settings of now. A reload that changes them (turns the
    // gateway on, adds a type) applies to model calls at once, but this embedder would go on
    // masking the old way: it holds its texts back until `opc run` restarts with the new settings.
    let built_with = config.framework.privacy.clone();
    let live = engine.clone();
    options.guard = Some(Arc::new(move || {
        (live.config().framework.privacy != built_with).then(|| {
            "the privacy settings changed since `opc run` started, and embeddings are masked with the settings it started with; restart `opc run` to embed with the new ones (rows wait, nothing is lost)".to_string()
        })
    }));
    Ok(Arc::new(RemoteEmbedder::start(options)?))
}

/// Fill `slot` with the configured embedder, and with the previous generation's when the stores'
/// active generation (read from `recall`) is another model. Prints what it does, and any error once.
pub fn fill(
    loaded: &Loaded,
    slot: &EmbedSlot,
    recall: &opc_memory::recall::RecallStore,
    engine: &Engine,
) {
    let config = &loaded.config;
    let env = |var: &str| std::env::var(var).ok();
    let embedding = &config.framework.memory.embedding;
    let configured = match embedding.provider {
        EmbeddingProvider::Local => {
            super::models::load_embedder_in_background(slot.clone());
            Some(MINILM_ID.to_string())
        }
        EmbeddingProvider::OpenAiCompatible => {
            let started = RemoteOptions::from_config(config, env, RetryPolicy::default())
                .and_then(|options| start_remote(loaded, engine, options));
            match started {
                Ok(embedder) => {
                    let id = embedder.model_id().to_string();
                    eprint(&format!(
                        "opc: recall and facts embed with `{}` at {}{}\n",
                        embedding.model,
                        embedding.base_url.as_deref().unwrap_or_default(),
                        if config.framework.privacy.enabled {
                            " (texts masked by the privacy gateway first)"
                        } else {
                            " (the privacy gateway is off: texts are sent as they are)"
                        }
                    ));
                    slot.set(embedder);
                    Some(id)
                }
                Err(why) => {
                    eprint(&format!(
                        "error: remote embeddings are off: {why}. Until then recall and facts search by keywords only\n"
                    ));
                    None
                }
            }
        }
    };
    let active = match recall.embedding_generations() {
        Ok(generations) => generations
            .into_iter()
            .find(|g| g.state == opc_memory::recall::generation::GenerationState::Active),
        Err(e) => {
            tracing::warn!(
                "cannot read the embedding generations ({e}); searching by keywords until the vectors are indexed"
            );
            None
        }
    };
    let Some(active) = active else {
        return;
    };
    if configured.as_deref() == Some(active.model.as_str()) {
        return;
    }
    // A new generation fills in the background: queries keep using the active one's embedder.
    let provider = active
        .descriptor
        .get("provider")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("local");
    if provider == "local" && active.model == MINILM_ID {
        let previous = slot.clone();
        std::thread::Builder::new()
            .name("embed-previous".into())
            .spawn(move || match opc_memory::embed::MiniLm::load_shared() {
                Ok(model) => {
                    previous.set_previous(model);
                }
                Err(e) => tracing::warn!(
                    "the previous embedding model cannot be loaded ({e}): the vector half of search is off until the new generation is complete"
                ),
            })
            .map(drop)
            .unwrap_or_else(|e| tracing::warn!("cannot start loading the previous embedding model: {e}"));
        return;
    }
    let rebuilt =
        RemoteOptions::from_descriptor(&active.descriptor, config, env, RetryPolicy::default())
            .and_then(|options| start_remote(loaded, engine, options));
    match rebuilt {
        Ok(embedder) => {
            slot.set_previous(embedder);
        }
        Err(why) => eprint(&format!(
            "note: the embeddings of the active generation (`{}`) cannot be computed for queries ({why}); the vector half of search is off until the new generation is complete\n",
            active.model
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_masking_key_is_made_once_kept_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state/opc.db");
        let key = masking_key(&db).unwrap();
        assert_eq!(masking_key(&db).unwrap(), key);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(key_path(&db))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(key_path(&db), "nope").unwrap();
        let error = masking_key(&db).unwrap_err();
        assert!(
            error.contains("64 hex digits") && error.contains("Fix"),
            "{error}"
        );
    }
}
