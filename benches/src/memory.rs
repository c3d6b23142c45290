//! Memory figures of the running process.

use std::fs;

// ---------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------

/// A `kB` field of `/proc/self/status` (`VmHWM`, `VmRSS`, ...), in KiB; `None` where procfs
/// is unavailable (not Linux) or the field is missing.
pub fn proc_status_kib(field: &str) -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| {
        let value = line.strip_prefix(field)?.strip_prefix(':')?;
        value.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}
