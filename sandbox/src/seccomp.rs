//! The seccomp filter a sandboxed command runs under: a deny list on top of Landlock.
//!
//! Landlock confines files; the namespaces confine the network. What is left is the kernel's own
//! attack surface and the few calls that would undo the process-group invariant. Denied with
//! `EPERM` (a command sees an ordinary "operation not permitted", not a crash):
//! - `setsid`, `setpgid`: a child that left the process group would survive the group kill;
//! - `ptrace`, `process_vm_readv/writev`: reading or steering other processes;
//! - `mount`, `umount2`, `pivot_root`, `chroot`, `unshare`, `setns`, and `clone` with any
//!   namespace flag: new namespaces give a process capabilities (inside them) to poke at kernel
//!   code rarely exercised by unprivileged users;
//! - `keyctl`, `add_key`, `request_key`, `bpf`, `perf_event_open`, `userfaultfd`,
//!   `kexec_load`, `kexec_file_load`, `init_module`, `finit_module`, `delete_module`, `reboot`,
//!   `swapon`, `swapoff`, `acct`, `quotactl`, `open_by_handle_at`: administration and the
//!   interfaces behind past privilege escalations.
//!
//! - `socket(AF_VSOCK)` unless the network is allowed: a VM's host channel is a network the
//!   network namespace does not cover.
//!
//! `clone3` gets `ENOSYS` (its flags sit in memory, where a filter cannot look), so libc falls back
//! to `clone`, whose flags the filter checks.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

/// Syscalls denied outright.
const DENIED: &[i64] = &[
    libc::SYS_setsid,
    libc::SYS_setpgid,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_open_by_handle_at,
];

/// `clone` flags that create a namespace.
const CLONE_NAMESPACES: &[i32] = &[
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

/// The two programs to install, in order (the deny list, then `clone3` → ENOSYS). `network`:
/// whether the policy allows the network (then `AF_VSOCK` sockets are allowed too).
pub(crate) fn filters(network: bool) -> Result<Vec<BpfProgram>, String> {
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e| format!("seccomp: unsupported architecture: {e:?}"))?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|nr| (*nr, Vec::new())).collect();
    let clone_rules = CLONE_NAMESPACES
        .iter()
        .map(|flag| {
            let flag = *flag as u64;
            SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )
            .and_then(|c| SeccompRule::new(vec![c]))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("seccomp: {e}"))?;
    rules.insert(libc::SYS_clone, clone_rules);
    if !network {
        let vsock = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            libc::AF_VSOCK as u64,
        )
        .and_then(|c| SeccompRule::new(vec![c]))
        .map_err(|e| format!("seccomp: {e}"))?;
        rules.insert(libc::SYS_socket, vec![vsock]);
    }
    let deny = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    );
    let clone3 = SeccompFilter::new(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    );
    [deny, clone3]
        .into_iter()
        .map(|filter| {
            filter
                .and_then(BpfProgram::try_from)
                .map_err(|e| format!("seccomp: {e}"))
        })
        .collect()
}
