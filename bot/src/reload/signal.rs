//! `SIGHUP` reloads: the way to ask a running `opc run` for a reload from a shell or a service
//! manager.
//!
//! Invariant: a reload asked for by signal always says what it did, even "unchanged" (its sender
//! waits to see it answered); where signals cannot be listened to, a warning says how else to reload.

use std::sync::Arc;

use super::outcome::Trigger;
use super::reloader::Reloader;

impl Reloader {
    /// Reload on `SIGHUP` until the process stops.
    pub fn on_sighup(self: &Arc<Self>) {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            match signal(SignalKind::hangup()) {
                Ok(mut hangup) => {
                    let this = self.clone();
                    tokio::spawn(async move {
                        while hangup.recv().await.is_some() {
                            this.reload(Trigger::Signal).await;
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not listen for SIGHUP; reload from the console or by saving the file");
                }
            }
        }
    }
}
