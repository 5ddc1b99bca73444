//! The files a reload reads: the config and the prompt files it names, as digests (to tell an
//! unchanged config, and whose prompt file changed) and as the list of paths to watch.
//!
//! Invariants: prompt files are read only through `opc_hierarchy::read_prompt_file` (size-capped,
//! inside the config's directory), so a device or a huge file named as a prompt is never read without
//! a limit; a prompt file that cannot be read has a digest too (of its error), so fixing it counts as
//! a change.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use opc_hierarchy::Loaded;
use opc_hierarchy::schema::Prompt;
use sha2::{Digest, Sha256};

/// The files running now: one digest of the config and its prompt files (to tell "unchanged"), and
/// each agent's prompt-file digest (to tell whose prompt file changed).
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// The config and its prompt files together.
    pub print: [u8; 32],
    /// Each agent's prompt-file digest.
    pub prompts: HashMap<String, [u8; 32]>,
}

/// The config file and every prompt file it names, as absolute paths.
pub fn watched_files(path: &Path, loaded: &Loaded) -> Vec<PathBuf> {
    let mut files = vec![absolute(path)];
    for agent in loaded.config.agents.values() {
        if let Some(Prompt::File(file)) = &agent.prompt {
            files.push(absolute(&loaded.base_dir.join(file)));
        }
    }
    files
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Whether a changed path `event` is the watched file `watched` (compared by directory and name, so
/// a relative and an absolute spelling of one file match).
pub fn same_file(event: &Path, watched: &Path) -> bool {
    event == watched
        || (event.file_name() == watched.file_name()
            && event.parent().map(absolute) == watched.parent().map(absolute))
}

/// The config file and its prompt files as they are on disk now (`None` when the config cannot be
/// read). Prompt files are read through [`opc_hierarchy::read_prompt_file`], so a device or a huge file
/// named as a prompt is never read without a limit here either.
pub fn snapshot(path: &Path, loaded: &Loaded) -> Option<Snapshot> {
    let mut hash = Sha256::new();
    hash.update(std::fs::read(path).ok()?);
    let mut prompts = HashMap::new();
    for (id, agent) in &loaded.config.agents {
        let Some(Prompt::File(file)) = &agent.prompt else {
            continue;
        };
        let digest: [u8; 32] = match opc_hierarchy::read_prompt_file(&loaded.base_dir, file) {
            Ok(text) => Sha256::new()
                .chain_update([1])
                .chain_update(text)
                .finalize()
                .into(),
            Err(e) => Sha256::new()
                .chain_update([0])
                .chain_update(e.to_string())
                .finalize()
                .into(),
        };
        hash.update(
            absolute(&loaded.base_dir.join(file))
                .as_os_str()
                .as_encoded_bytes(),
        );
        hash.update(digest);
        prompts.insert(id.clone(), digest);
    }
    Some(Snapshot {
        print: hash.finalize().into(),
        prompts,
    })
}
