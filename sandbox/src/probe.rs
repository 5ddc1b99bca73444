//! What the running kernel offers, read without side effects: the Landlock ABI (a version query,
//! no ruleset is applied), and `/proc` for namespaces, seccomp and `no_new_privs`.
//!
//! The probe is advice and a fast refusal, not the guarantee: the launcher applies every restriction
//! with hard requirements and fails closed at run time whatever the probe said. So a probe that is
//! too optimistic (say, an LSM that forbids user namespaces in a way no sysctl shows) costs a
//! clear error at the first run, never an unsandboxed one.

use std::path::Path;
use std::sync::OnceLock;

use landlock::{LandlockStatus, RestrictSelf};

use crate::policy::{Mode, Policy};

/// The kernel features the sandbox uses, as detected once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    /// The kernel's Landlock ABI version, or why there is none.
    pub landlock: Result<i32, String>,
    /// Unprivileged user namespaces can be created (needed by every enforced run: the process
    /// limit is counted inside one, and an unprivileged process needs one to own a network
    /// namespace), or why not.
    pub user_namespaces: Result<(), String>,
    /// Network namespaces exist (needed when the policy has no network), or why not.
    pub network_namespaces: Result<(), String>,
    /// Mount namespaces exist (every enforced run has a private root), or why not.
    pub mount_namespaces: Result<(), String>,
    /// PID namespaces exist (every enforced run has one, so nothing outlives it), or why not.
    pub pid_namespaces: Result<(), String>,
    /// seccomp filters (`SECCOMP_MODE_FILTER` with the errno action), or why not.
    pub seccomp: Result<(), String>,
    /// `PR_SET_NO_NEW_PRIVS` exists (Linux 3.5+), or why not.
    pub no_new_privs: Result<(), String>,
    /// Whether OPC runs as root, so commands run as [`crate::SANDBOX_UID`] instead.
    pub root: bool,
}

impl Probe {
    /// Detect once per process (cached: the kernel does not change under us).
    pub fn detect() -> Probe {
        static PROBE: OnceLock<Probe> = OnceLock::new();
        PROBE.get_or_init(Probe::detect_now).clone()
    }

    fn detect_now() -> Probe {
        // With no flags and no `no_new_privs`, `apply` makes no restricting syscall: it only
        // queries the ABI version.
        let status = RestrictSelf::default()
            .no_new_privs(false)
            .apply()
            .map(|s| s.landlock)
            .unwrap_or(LandlockStatus::NotImplemented);
        let landlock = match status {
            LandlockStatus::Available {
                effective_abi,
                kernel_abi,
            } => Ok(kernel_abi.unwrap_or(effective_abi as i32)),
            LandlockStatus::NotEnabled => Err(
                "built into the kernel but not enabled at boot: add `landlock` to the `lsm=` kernel parameter"
                    .into(),
            ),
            LandlockStatus::NotImplemented => {
                Err("not built into this kernel (Linux 5.13+ with CONFIG_SECURITY_LANDLOCK)".into())
            }
        };
        let status_file = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        Probe {
            landlock,
            user_namespaces: user_namespaces(),
            network_namespaces: exists("/proc/self/ns/net", "network namespaces (CONFIG_NET_NS)"),
            mount_namespaces: exists("/proc/self/ns/mnt", "mount namespaces"),
            pid_namespaces: exists("/proc/self/ns/pid", "PID namespaces (CONFIG_PID_NS)"),
            seccomp: match std::fs::read_to_string("/proc/sys/kernel/seccomp/actions_avail") {
                Ok(actions) if actions.split_whitespace().any(|a| a == "errno") => Ok(()),
                Ok(actions) => Err(format!(
                    "the errno action is missing (actions: {})",
                    actions.trim()
                )),
                Err(_) => Err(
                    "seccomp filters are not built into this kernel (CONFIG_SECCOMP_FILTER)".into(),
                ),
            },
            no_new_privs: if status_file.contains("NoNewPrivs:") {
                Ok(())
            } else {
                Err("PR_SET_NO_NEW_PRIVS needs Linux 3.5+".into())
            },
            root: nix::unistd::geteuid().is_root(),
        }
    }

    /// The lines `opc validate` prints, one per feature, e.g. `landlock: ABI 7 (ok)`.
    pub fn report(&self) -> Vec<String> {
        let line = |name: &str, result: &Result<(), String>| match result {
            Ok(()) => format!("{name}: ok"),
            Err(why) => format!("{name}: missing — {why}"),
        };
        let mut lines = vec![
            match &self.landlock {
                Ok(abi) => format!("landlock: ABI {abi} (ok)"),
                Err(why) => format!("landlock: missing — {why}"),
            },
            line("user namespaces", &self.user_namespaces),
            line("network namespaces", &self.network_namespaces),
            line("mount namespaces", &self.mount_namespaces),
            line("pid namespaces", &self.pid_namespaces),
            line("seccomp", &self.seccomp),
            line("no_new_privs", &self.no_new_privs),
            "rlimits: ok".to_string(),
        ];
        lines.push(if self.root {
            format!(
                "user: OPC runs as root, so commands run as uid {} gid {}",
                crate::SANDBOX_UID,
                crate::SANDBOX_GID
            )
        } else {
            "user: commands run as OPC's own user, in a user namespace".to_string()
        });
        lines
    }

    /// The features `policy` needs that this kernel lacks, each named with why (empty: it can run).
    /// An [`Mode::Off`] policy needs none.
    pub fn missing(&self, policy: &Policy) -> Vec<String> {
        if policy.mode == Mode::Off {
            return Vec::new();
        }
        let mut missing = Vec::new();
        let mut need = |name: &str, result: &Result<(), String>| {
            if let Err(why) = result {
                missing.push(format!("{name} ({why})"));
            }
        };
        need(
            "landlock",
            &self.landlock.as_ref().map(|_| ()).map_err(Clone::clone),
        );
        need("user namespaces", &self.user_namespaces);
        if !policy.network {
            need("network namespaces", &self.network_namespaces);
        }
        need("mount namespaces", &self.mount_namespaces);
        need("pid namespaces", &self.pid_namespaces);
        need("seccomp", &self.seccomp);
        need("no_new_privs", &self.no_new_privs);
        missing
    }
}

fn exists(path: &str, what: &str) -> Result<(), String> {
    if Path::new(path).exists() {
        Ok(())
    } else {
        Err(format!(
            "{what} not built into this kernel ({path} is missing)"
        ))
    }
}

/// The knobs distributions use to turn unprivileged user namespaces off, each read if present.
fn user_namespaces() -> Result<(), String> {
    exists("/proc/self/ns/user", "user namespaces (CONFIG_USER_NS)")?;
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .map(|s| s.trim().to_string())
    };
    if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        return Err("disabled: /proc/sys/user/max_user_namespaces is 0".into());
    }
    if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        return Err(
            "unprivileged ones are disabled: sysctl kernel.unprivileged_userns_clone=1 allows them"
                .into(),
        );
    }
    if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        return Err("AppArmor restricts unprivileged ones: sysctl kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile for opc that allows `userns`".into());
    }
    Ok(())
}
