//! One long-lived thread that starts every launcher.
//!
//! Why: the launcher's death signal (`PR_SET_PDEATHSIG`) fires when the *thread* that forked it
//! exits, not the process. A launcher forked from a tokio blocking-pool thread, which exits after
//! ten idle seconds, would be killed mid-command. This thread never exits, so the signal means
//! exactly "OPC is gone".

use std::io;
use std::sync::OnceLock;
use std::sync::mpsc::{Sender, channel};

use tokio::process::Child;

type Job = (
    std::process::Command,
    tokio::runtime::Handle,
    tokio::sync::oneshot::Sender<io::Result<Child>>,
);

/// Spawn `cmd` from the spawner thread, registered with the caller's runtime (for `wait`).
pub(crate) async fn spawn(cmd: std::process::Command) -> io::Result<Child> {
    static THREAD: OnceLock<io::Result<Sender<Job>>> = OnceLock::new();
    let sender = THREAD
        .get_or_init(|| {
            let (sender, jobs) = channel::<Job>();
            std::thread::Builder::new()
                .name("opc-sandbox-spawner".into())
                .spawn(move || {
                    for (cmd, runtime, reply) in jobs {
                        let _entered = runtime.enter();
                        let _ = reply.send(tokio::process::Command::from(cmd).spawn());
                    }
                })
                .map(|_| sender)
        })
        .as_ref()
        .map_err(|e| io::Error::new(e.kind(), format!("starting the spawner thread: {e}")))?;
    let (reply, answer) = tokio::sync::oneshot::channel();
    sender
        .send((cmd, tokio::runtime::Handle::current(), reply))
        .map_err(|_| io::Error::other("the spawner thread is gone"))?;
    answer
        .await
        .map_err(|_| io::Error::other("the spawner thread is gone"))?
}
