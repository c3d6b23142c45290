//! A process's monitor of a process on another node: its `Down` arrives in the watcher's
//! mailbox, as a local monitor's does (`ProcessCx::monitor`; OTP's
//! `monitor(process, Pid)` for a pid of another node).
//!
//! The watcher's cell holds the monitor (so `recv_down`, `recv_any`, `demonitor` and the
//! state-machine `Event::Down` work unchanged), and a task of this node waits for the two ends
//! that matter: the target's, through a [`RemoteMonitor`] (the far node reports it on the
//! control subject, or the membership declares that node down: `NoConnection`), and the
//! watcher's, through a local monitor. Whichever comes first ends the task: the target's
//! delivers the `Down` (with the target's node in [`Down::node`]); the watcher's drops the
//! remote monitor, which tells the far node to forget it. A `Down` reported by the far node
//! comes after every message the target sent this node before it ended (one ordered lane per
//! node pair: `outbound.rs`), and the inbound task delivers those before it completes the
//! monitor.
//!
//! `demonitor` takes the monitor out of the watcher's cell at once — no `Down` is delivered
//! afterwards — and, through the monitor's hook (`scheduler/held_monitors.rs`), ends the task,
//! so the far node forgets its side too.

use super::error::RemoteError;
use super::node::NodeShared;
use super::remote_monitor::RemoteMonitor;
use super::NodePid;
use crate::process::exit::{Down, MonitorRef};
use crate::process::Pid;
use futures::future::{select, Either};
use std::sync::Arc;
use tokio::sync::oneshot;

/// Process `watcher` of this node monitors `target` (module docs).
pub(crate) fn monitor_from(
    node: &Arc<NodeShared>,
    watcher: Pid,
    target: &NodePid,
) -> Result<MonitorRef, RemoteError> {
    if **target.node_arc() == *node.me.name && target.incarnation() == node.me.incarnation {
        return node
            .sched
            .monitor_from(watcher, target.local())
            .map_err(|_| RemoteError::NotFound);
    }
    // A demonitor ends the task too (`scheduler/held_monitors.rs`): the far node forgets the
    // monitor then, not when the target or the watcher ends.
    let (demonitored, demonitor) = oneshot::channel::<()>();
    let on_demonitor = Box::new(move || {
        let _ = demonitored.send(());
    });
    let monitor = node
        .sched
        .hold_monitor(watcher, target.local(), on_demonitor)
        .map_err(|_| RemoteError::NotFound)?;
    let remote = RemoteMonitor::new(node, target.clone());
    let watcher_end = node.sched.monitor(watcher);
    let sched = node.sched.clone();
    node.runtime.spawn(async move {
        match select(remote, select(watcher_end, demonitor)).await {
            Either::Left((down, _)) => {
                let pid = down.pid;
                let down = Down::remote(
                    monitor,
                    pid.local(),
                    down.reason,
                    pid.node_arc().clone(),
                    pid.incarnation(),
                );
                sched.deliver_held_down(watcher, down);
            }
            // The watcher ended or demonitored: dropping the remote monitor demonitors it on
            // the far node.
            Either::Right((_, remote)) => {
                sched.release_held(monitor);
                drop(remote);
            }
        }
    });
    Ok(monitor)
}
