//! Figures of a running process as the kernel reports them in `/proc/<pid>/status`, for benches that
//! measure `opc run`'s memory from outside (`VmRSS`, `RssAnon` …).
//!
//! Invariant: reading never fails a run — a process that has gone, or a field the kernel does not
//! report, reads as 0, which a bench shows as such rather than stopping mid-measurement.

/// A `kB` figure of `/proc/<pid>/status`, `field` with its colon (`VmRSS:`, `RssAnon:` …); 0 if
/// unreadable.
pub fn status_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse().ok())
        })
        .unwrap_or(0)
}
