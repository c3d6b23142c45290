//! Starting worker threads: the configured workers (`builder.rs`) and the spares, which hand-off
//! steps 3 and 4 wake or start (`monitor.rs`, "Hand-off": from the monitor's tick, and from
//! `block_in_place` in `blocking.rs`).
//!
//! A worker thread runs the worker loop (`worker.rs`), so this sits above it. The monitor's state
//! and the spare pool sit below the shared state that holds them (`shared.rs`); they reach the
//! executor through [`MonitorHost`] and [`SpareHost`], implemented here for `Arc<Shared>`.

use super::monitor::MonitorHost;
use super::queue::Local;
use super::shared::{Notified, Shared};
use super::spare::SpareHost;
use super::worker;
use crate::loom::{thread, Arc};

/// Starts the thread of worker slot `index` (configured or spare) with its deque: it runs the
/// worker loop inside the builder's worker context (`threads.rs`).
pub(crate) fn spawn_worker(
    shared: &Arc<Shared>,
    index: usize,
    local: Local<Notified>,
) -> std::io::Result<thread::JoinHandle<()>> {
    let owned = shared.clone();
    shared
        .threads
        .spawn(index, move || worker::run(owned, index, local))
}

/// Hand-off steps 3 and 4.
pub(crate) fn hand_off(shared: &Arc<Shared>) {
    let monitor = &shared.monitor;
    let needed = monitor.needed();
    // The cheap checks first: a spawn from inside `block_in_place` calls this every time
    // (`schedule.rs`), and once a spare is active there is nothing to do.
    if needed == 0
        || monitor.spares.active() >= needed
        || shared.is_shutdown()
        || !shared.has_pending_work()
    {
        return;
    }
    while monitor.spares.active() < needed {
        if !monitor.spares.activate(shared, needed) {
            break;
        }
    }
}

impl MonitorHost for Arc<Shared> {
    fn hand_over_queues(&self, index: usize) {
        Shared::hand_over_queues(self, index);
    }

    fn has_queued_work(&self, index: usize) -> bool {
        Shared::has_queued_work(self, index)
    }

    fn hand_over_next(&self, index: usize) {
        Shared::hand_over_next(self, index);
    }

    fn notify_parked(&self) {
        Shared::notify_parked(self);
    }

    fn hand_off(&self) {
        hand_off(self);
    }

    fn is_shutdown(&self) -> bool {
        Shared::is_shutdown(self)
    }

    fn num_unparked(&self) -> usize {
        self.idle.num_unparked()
    }
}

impl SpareHost<Notified> for Arc<Shared> {
    fn unpark(&self, index: usize) {
        Shared::unpark(self, index);
    }

    fn worker_started(&self) {
        Shared::worker_started(self);
    }

    fn worker_exited(&self) {
        Shared::worker_exited(self);
    }

    fn start(
        &self,
        index: usize,
        local: Local<Notified>,
    ) -> std::io::Result<thread::JoinHandle<()>> {
        spawn_worker(self, index, local)
    }
}
