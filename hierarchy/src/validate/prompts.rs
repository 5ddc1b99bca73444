//! Prompt files: each `prompt: file:…` is read exactly as the agents will read it, so a file that
//! validates is one they can use.
//!
//! Invariant: the file system is touched only here and only when the config has a directory on disk
//! (text checked without one skips this family).

use std::path::Path as FsPath;

use super::checker::Checker;
use crate::diagnostic::Anchor;
use crate::prompt_file::PromptFileError;
use crate::schema::Prompt;

impl<'a> Checker<'a> {
    /// Prompt files lie inside the config file's directory (once symlinks are followed), are regular
    /// files with one name, readable UTF-8 within the size cap, and not empty (read through
    /// [`crate::read_prompt_file`], as every other reader does).
    pub(super) fn prompts(&mut self, base_dir: &FsPath) {
        for (id, agent) in &self.config.agents {
            let path = Self::agent_path(id).key("prompt");
            match &agent.prompt {
                Some(Prompt::File(file)) => match crate::read_prompt_file(base_dir, file) {
                    Ok(text) if text.trim().is_empty() => self.warning(
                        path,
                        Anchor::Value,
                        format!("prompt file `{}` is empty", file.display()),
                        "write the agent's instructions into it",
                    ),
                    Ok(_) => {}
                    Err(e) => {
                        let hint = e.hint();
                        let message = match &e {
                            // The path as written and as resolved: a relative path resolves against
                            // the config's directory, which is not always where the user stands.
                            PromptFileError::Io {
                                path: resolved,
                                source,
                            } => format!(
                                "cannot read prompt file `{}` ({}): {source}",
                                file.display(),
                                resolved.display()
                            ),
                            other => other.to_string(),
                        };
                        self.error(path, Anchor::Value, message, hint);
                    }
                },
                Some(Prompt::Inline(text)) if text.trim().is_empty() => self.warning(
                    path,
                    Anchor::Value,
                    "the prompt is empty".into(),
                    "write the agent's instructions, or `file:prompts/<id>.md`",
                ),
                _ => {}
            }
        }
    }
}
