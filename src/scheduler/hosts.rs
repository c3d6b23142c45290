//! Which scheduler a [`HostId`] names: how a [`ProcessContext`] leads back to its scheduler.
//!
//! The process layer cannot name the scheduler (dependencies point down), so a context
//! carries its host's identity, a [`HostId`], and this layer keeps the map from identities to
//! schedulers: a scheduler registers when it is built and leaves when its shared state is
//! dropped. The map holds `Weak` references, so it keeps no scheduler alive; a context borrows
//! the handle it was made from (or is made by `spawn`, which runs on a live handle), so its
//! scheduler is alive — and registered — for as long as the context is.
//!
//! A lock, not a lock-free map: it is taken when a scheduler is built or dropped and when a
//! context's [`scheduler`](ProcessContext::scheduler) is asked for (once per `init`, at most),
//! never on a path a message or a step takes.

use super::handle::SchedulerHandle;
use super::shared::Inner;
use crate::loom::Arc;
use crate::process::context::HostId;
use crate::process::{Pid, ProcessContext};

#[cfg(not(loom))]
mod map {
    use super::{Arc, HostId, Inner};
    use std::collections::HashMap;
    use std::sync::{Mutex, PoisonError, Weak};

    /// Plain std: a registry, not part of any protocol a loom model explores.
    static HOSTS: Mutex<Option<HashMap<HostId, Weak<Inner>>>> = Mutex::new(None);

    fn with<R>(f: impl FnOnce(&mut HashMap<HostId, Weak<Inner>>) -> R) -> R {
        // No user code runs under the lock: a poisoned map is still a consistent map.
        let mut hosts = HOSTS.lock().unwrap_or_else(PoisonError::into_inner);
        f(hosts.get_or_insert_with(HashMap::new))
    }

    pub(super) fn register(inner: &Arc<Inner>) {
        with(|hosts| hosts.insert(inner.host_id, Arc::downgrade(inner)));
    }

    pub(super) fn unregister(host_id: HostId) {
        with(|hosts| hosts.remove(&host_id));
    }

    pub(super) fn lookup(host_id: HostId) -> Option<Arc<Inner>> {
        with(|hosts| hosts.get(&host_id).and_then(Weak::upgrade))
    }
}

/// Under loom the shared state sits in loom's `Arc`, which has no `Weak`: nothing is
/// registered (no model asks a context for its scheduler).
#[cfg(loom)]
mod map {
    use super::{Arc, HostId, Inner};

    pub(super) fn register(_: &Arc<Inner>) {}

    pub(super) fn unregister(_: HostId) {}

    pub(super) fn lookup(_: HostId) -> Option<Arc<Inner>> {
        None
    }
}

/// Registers a scheduler just built (`builder.rs`).
pub(super) fn register(inner: &Arc<Inner>) {
    map::register(inner);
}

/// Forgets a scheduler whose shared state is being dropped (`shared.rs`).
pub(super) fn unregister(host_id: HostId) {
    map::unregister(host_id);
}

/// The scheduler side of [`ProcessContext`].
impl<'a> ProcessContext<'a> {
    /// A context for `pid` in `scheduler`. The scheduler builds one for every `init`; build your
    /// own to drive a process by hand (unit tests of a `Process`, custom drivers; see also
    /// [`testing::Harness`](crate::testing::Harness)).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{Pid, Scheduler, state_machine::ProcessContext};
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let ctx = ProcessContext::new(Pid::from_raw(1 << 26).unwrap(), sched.handle());
    /// assert_eq!(ctx.scheduler().live_processes(), 0);
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn new(pid: Pid, scheduler: &'a SchedulerHandle) -> Self {
        ProcessContext::for_host(pid, scheduler.inner.host_id)
    }

    /// The scheduler running this process (a cheap handle: a reference count); keep it to
    /// spawn or send from `step`.
    ///
    /// # Examples
    ///
    /// See [`ProcessContext`].
    pub fn scheduler(&self) -> SchedulerHandle {
        let inner = map::lookup(self.host_id())
            // Module docs: a context never outlives its scheduler's registration.
            .expect("a process context outlived its scheduler");
        SchedulerHandle { inner }
    }
}
