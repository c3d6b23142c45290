//! Held monitors: monitors a process holds whose `Down` another layer delivers — the cluster's
//! monitors of processes on other nodes (`cluster/process_monitor.rs`). The watcher's cell holds
//! the monitor as any other, so receiving and `demonitor` work unchanged; what the cell cannot do
//! is tell the far side that nobody waits anymore. So each held monitor has a hook here, run by
//! the demonitor that ends it, and removed by the layer when it delivers the `Down` or sees the
//! watcher end. Local monitors never touch this map (their references are not marked held).

use crate::loom::{lock, Mutex};
use crate::process::exit::MonitorRef;
use std::collections::HashMap;

/// What a demonitor of a held monitor runs: tells the layer that watches its target.
pub(crate) type OnDemonitor = Box<dyn FnOnce() + Send>;

/// The hooks of the held monitors still watched (module docs).
#[derive(Default)]
pub(super) struct HeldMonitors {
    hooks: Mutex<HashMap<MonitorRef, OnDemonitor>>,
}

impl HeldMonitors {
    pub(super) fn insert(&self, monitor: MonitorRef, on_demonitor: OnDemonitor) {
        lock(&self.hooks).insert(monitor, on_demonitor);
    }

    /// The hook of `monitor`, if it is still watched.
    pub(super) fn remove(&self, monitor: &MonitorRef) -> Option<OnDemonitor> {
        lock(&self.hooks).remove(monitor)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::process::Pid;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::Arc;

    #[test]
    fn a_hook_is_taken_once() {
        let held = HeldMonitors::default();
        let monitor = MonitorRef::next_held(Pid::from_raw(1 << 26).unwrap());
        assert!(monitor.is_held());
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        held.insert(monitor, Box::new(move || flag.store(true, SeqCst)));
        (held.remove(&monitor).expect("watched"))();
        assert!(ran.load(SeqCst));
        assert!(held.remove(&monitor).is_none());
    }
}
