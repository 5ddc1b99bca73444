//! Credentials: no value anywhere in the file has the shape of a credential; secrets come from
//! environment variables only.
//!
//! Invariants: the scan covers the whole positioned tree, aliases included, and allocates nothing
//! unless it finds something; `…Env` values are left to the decoder, which says more about them.
//! The diagnostic never holds the secret itself (every diagnostic is masked before it leaves the
//! crate).

use super::checker::Checker;
use crate::diagnostic::{Diagnostic, Path};
use crate::secrets;
use crate::yaml::{Node, Value};

impl<'a> Checker<'a> {
    /// No credential anywhere in the file: secrets come from environment variables only. Walks with a
    /// borrowed path so that the whole-document scan allocates nothing unless it finds something.
    pub(super) fn credentials(&mut self, node: &Node, path: Path<'_>) {
        match &node.value {
            Value::Str(text) => {
                // `…Env` values are checked (with a better message) when they are decoded.
                let is_env_key = matches!(path, Path::Key(_, key) if key.ends_with("Env"));
                if !is_env_key && let Some(kind) = secrets::find_secret(text) {
                    self.out.push(
                        Diagnostic::error(path, node.span, format!("this looks like {} {kind}; secrets must not be written in the config", secrets::article(kind)))
                            .with_hint(ROTATE_HINT),
                    );
                }
            }
            Value::Seq(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.credentials(item, path.index(i));
                }
            }
            Value::Map(entries) => {
                for entry in entries {
                    self.credentials(&entry.value, path.key(&entry.key));
                }
            }
            _ => {}
        }
    }
}

/// What to do about a credential found in the file.
const ROTATE_HINT: &str = "treat it as leaked and rotate it with its issuer (it is in this file, and maybe in version control or a backup); then remove it, export the new one as an environment variable, and name that variable in the matching `…Env` key";
