//! The Landlock ruleset: the second wall, inside the private root.
//!
//! The mount namespace already shows the command only what the policy allows; Landlock restates it
//! by path, so a mistake in one wall is not an escape. Applied at the highest ABI both the kernel
//! and the `landlock` crate know, every access right handled, as a hard requirement: read+execute
//! on the system directories and the `/etc` entries bound in; read-write on the devices; everything
//! on the workspace, `/tmp` and HOME; read on the shared trees. Where the kernel has them, TCP
//! bind/connect (ABI 4, when the network is off) and signals and abstract Unix sockets to processes
//! outside the sandbox (ABI 6) are denied too. `/proc` (mounted by nothing, but kept out by rule
//! too) is not reachable. Applying it also sets `no_new_privs`.

use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, PathBeneath, PathFd,
    RestrictSelf, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::protocol::{Failure, Spec};
use crate::layout::{HOME, TMP, WORKSPACE};

/// System directories: read and execute (bound read-only into the private root).
pub(crate) const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt",
];

/// `/etc` entries that bash, the loader, libc's name services and TLS clients read. Not `/etc`
/// whole: it holds secrets (`shadow`, keys under `ssl/private`, service credentials).
pub(crate) const ETC_FILES: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/localtime",
    "/etc/alternatives",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/resolv.conf",
    "/etc/ssl/certs",
    "/etc/ca-certificates",
    "/etc/inputrc",
];

/// Devices: read and write.
pub(crate) const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/urandom",
    "/dev/random",
    "/dev/full",
];

/// Restrict this process (and so bash and everything it starts) to the private root's paths.
pub(crate) fn apply(spec: &Spec) -> Result<(), Failure> {
    let status = RestrictSelf::default()
        .no_new_privs(false)
        .apply()
        .map(|s| s.landlock)
        .map_err(|e| Failure::unsupported("landlock", e))?;
    let abi = match status {
        LandlockStatus::Available { effective_abi, .. } => effective_abi,
        LandlockStatus::NotEnabled => {
            return Err(Failure::unsupported("landlock", "not enabled at boot"));
        }
        LandlockStatus::NotImplemented => {
            return Err(Failure::unsupported(
                "landlock",
                "not built into this kernel",
            ));
        }
    };
    let fail = |e: landlock::RulesetError| Failure::unsupported("landlock", e);
    let read_exec = AccessFs::from_read(abi);
    let read_write = AccessFs::from_all(abi);
    let file_rw = AccessFs::from_file(abi);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(fail)?;
    if !spec.network && abi >= ABI::V4 {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(fail)?;
    }
    if abi >= ABI::V6 {
        ruleset = ruleset.scope(Scope::from_all(abi)).map_err(fail)?;
    }
    let mut created = ruleset.create().map_err(fail)?;
    let mut add = |path: &Path, access, must_exist: bool| -> Result<(), Failure> {
        match PathFd::new(path) {
            Ok(fd) => {
                // A file gets only the file rights of the set (directory rights do not apply).
                let access = if path.is_dir() {
                    access
                } else {
                    access & file_rw
                };
                (&mut created)
                    .add_rule(PathBeneath::new(fd, access))
                    .map(|_| ())
                    .map_err(|e| Failure::unsupported("landlock", e))
            }
            Err(_) if !must_exist => Ok(()),
            Err(e) => Err(Failure::setup(format!("{}: {e}", path.display()))),
        }
    };
    // Listing `/` shows only what the private root holds; names, not contents.
    add(Path::new("/"), AccessFs::ReadDir.into(), true)?;
    for dir in SYSTEM_DIRS.iter().chain(ETC_FILES) {
        add(Path::new(dir), read_exec, false)?;
    }
    for dev in DEVICES {
        add(Path::new(dev), file_rw, false)?;
    }
    for tree in &spec.shared {
        add(&tree.inside, read_exec, false)?;
    }
    for dir in [WORKSPACE, TMP, HOME] {
        add(Path::new(dir), read_write, true)?;
    }
    let status = created.restrict_self().map_err(fail)?;
    if status.ruleset != RulesetStatus::FullyEnforced || !status.no_new_privs {
        return Err(Failure::unsupported(
            "landlock",
            format!("the ruleset was not fully enforced ({:?})", status.ruleset),
        ));
    }
    Ok(())
}
