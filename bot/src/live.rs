//! The config `opc run` serves right now, shared by the gateway, the HTTP routes and the admin
//! console.
//!
//! Why a holder of its own: a reload (a console save, a changed file, `SIGHUP`) replaces the whole
//! [`Loaded`] at once, and every reader must see either the old config or the new one, never a mix.
//! Readers take an `Arc` snapshot and keep using it for the request in hand; the swap never waits for
//! them.
//!
//! It also keeps the config the process started with: settings that live in a running connection or
//! file (the web listener, Slack, Discord, the database) keep their start-up values until a restart,
//! whatever a reload applied, so "what runs now" for those is [`LiveConfig::started`], not
//! [`LiveConfig::get`].

use std::sync::{Arc, RwLock};

use opc_hierarchy::Loaded;
use tokio::sync::watch;

/// The running config and its generation (1 at start-up, +1 per applied reload).
#[derive(Debug)]
pub struct LiveConfig {
    current: RwLock<Arc<Loaded>>,
    started: Arc<Loaded>,
    generation: watch::Sender<u64>,
}

impl LiveConfig {
    /// The config `opc run` started with, as generation 1.
    pub fn new(loaded: Arc<Loaded>) -> Arc<LiveConfig> {
        Arc::new(LiveConfig {
            started: loaded.clone(),
            current: RwLock::new(loaded),
            generation: watch::Sender::new(1),
        })
    }

    /// A snapshot of the running config.
    pub fn get(&self) -> Arc<Loaded> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The config `opc run` started with: the values of the settings a reload cannot swap in (see
    /// the module docs).
    pub fn started(&self) -> Arc<Loaded> {
        self.started.clone()
    }

    /// The running config's generation.
    pub fn generation(&self) -> u64 {
        *self.generation.borrow()
    }

    /// Make `loaded` the running config; returns its generation.
    pub fn set(&self, loaded: Arc<Loaded>) -> u64 {
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = loaded;
        let mut next = 0;
        self.generation.send_modify(|g| {
            *g += 1;
            next = *g;
        });
        next
    }
}
