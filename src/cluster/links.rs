//! Links across nodes, and stopping a process on another node.
//!
//! A link between local process `a` and process `b` of node B is kept by both nodes, not in the
//! processes' cells: each node watches its own end with a monitor (a task awaiting
//! [`SchedulerHandle::monitor`](crate::SchedulerHandle::monitor)) and, when it ends, sends
//! [`Item::LinkExit`] to the other, which delivers the exit signal to its end — dying with the
//! same reason unless it traps exits (OTP's semantics, as for local links). When node B is
//! declared down, every local end linked to B gets the exit signal `NoConnection`. Linking to a
//! process that is already gone gives `NoProc` (B's monitor of it resolves at once); to a node
//! that is not live, `NoConnection` at once. `unlink` removes both ends; a signal already sent
//! is not recalled, and none is delivered for a link that is gone.
//!
//! Order: exit signals travel on the control subject and messages on the data subject, through
//! one ordered lane per node pair (`outbound.rs`): a message a process sent before it ended is
//! delivered before its exit signal, and a link made before a message is in place when the
//! message arrives.

use super::error::RemoteError;
use super::node::{NodeShared, PeerId};
use super::wire::{Item, WireReason};
use super::NodePid;
use crate::loom::lock;
use crate::process::exit::{Exit, ExitReason};
use crate::process::Pid;
use std::sync::Arc;

/// One end of a link across nodes: the local process, the other node, the other process (raw).
pub(crate) type LinkKey = (Pid, PeerId, u64);

/// Links local `local` and `remote` (see the module docs).
pub(crate) fn link(
    node: &Arc<NodeShared>,
    local: Pid,
    remote: &NodePid,
) -> Result<(), RemoteError> {
    if !node.sched.hosts(local) {
        return Err(RemoteError::NotFound);
    }
    if **remote.node_arc() == *node.me.name {
        if remote.incarnation() != node.me.incarnation {
            signal(
                node,
                local,
                remote,
                node.other_life_reason(remote.incarnation()),
            );
            return Ok(());
        }
        return node
            .sched
            .link(local, remote.local())
            .map_err(|_| RemoteError::NotFound);
    }
    let peer = PeerId {
        name: remote.node_arc().clone(),
        incarnation: remote.incarnation(),
    };
    match node.incarnation_of(remote.node()) {
        None => {
            signal(node, local, remote, ExitReason::NoConnection);
            return Ok(());
        }
        Some(live) if live != remote.incarnation() => {
            let reason = NodeShared::other_life_exit(live, remote.incarnation());
            signal(node, local, remote, reason);
            return Ok(());
        }
        Some(_) => {}
    }
    let to = remote.local().as_u64();
    watch_end(node, local, peer.clone(), to);
    let item = Item::Link {
        from: local.as_u64(),
        to,
    };
    if node.send_item(&peer, item).is_err() {
        forget(node, &(local, peer, to));
        signal(node, local, remote, ExitReason::NoConnection);
    }
    Ok(())
}

/// Removes the link between local `local` and `remote`, both ends.
pub(crate) fn unlink(node: &Arc<NodeShared>, local: Pid, remote: &NodePid) {
    if **remote.node_arc() == *node.me.name {
        node.sched.unlink(local, remote.local());
        return;
    }
    let peer = PeerId {
        name: remote.node_arc().clone(),
        incarnation: remote.incarnation(),
    };
    let to = remote.local().as_u64();
    if forget(node, &(local, peer.clone(), to)) {
        let _ = node.send_item(
            &peer,
            Item::Unlink {
                from: local.as_u64(),
                to,
            },
        );
    }
}

/// `origin` links its `from` to our `to`.
pub(crate) fn linked(node: &Arc<NodeShared>, origin: &PeerId, from: u64, to: u64) {
    match Pid::from_raw(to) {
        Some(pid) => watch_end(node, pid, origin.clone(), from),
        None => {
            let reason = WireReason::NoProc;
            let _ = node.send_item(
                origin,
                Item::LinkExit {
                    from: to,
                    to: from,
                    reason,
                },
            );
        }
    }
}

/// `origin` unlinked its `from` from our `to`.
pub(crate) fn unlinked(node: &NodeShared, origin: &PeerId, from: u64, to: u64) {
    if let Some(pid) = Pid::from_raw(to) {
        forget(node, &(pid, origin.clone(), from));
    }
}

/// `origin`'s `from`, linked to our `to`, ended: the signal, if the link still stands.
pub(crate) fn exited(node: &NodeShared, origin: &PeerId, from: u64, to: u64, reason: WireReason) {
    let (Some(to), Some(from)) = (Pid::from_raw(to), Pid::from_raw(from)) else {
        return;
    };
    if forget(node, &(to, origin.clone(), from.as_u64())) {
        let exit = Exit::remote(
            from,
            reason.into_reason(),
            origin.name.clone(),
            origin.incarnation,
        );
        node.sched.exit_signal(to, exit);
    }
}

/// Node `peer` is down: every local end linked to it gets `NoConnection`.
pub(crate) fn peer_down(node: &NodeShared, peer: &PeerId) {
    let ends: Vec<(LinkKey, tokio::task::AbortHandle)> = {
        let mut links = lock(&node.links);
        let keys: Vec<LinkKey> = links
            .keys()
            .filter(|(_, p, _)| p == peer)
            .cloned()
            .collect();
        keys.into_iter()
            .filter_map(|key| links.remove(&key).map(|watch| (key, watch)))
            .collect()
    };
    for ((local, peer, remote), watch) in ends {
        watch.abort();
        if let Some(remote) = Pid::from_raw(remote) {
            let exit = Exit::remote(
                remote,
                ExitReason::NoConnection,
                peer.name,
                peer.incarnation,
            );
            node.sched.exit_signal(local, exit);
        }
    }
}

/// Asks `pid` to finish (`kill: false`) or terminates it.
pub(crate) fn stop(node: &Arc<NodeShared>, pid: &NodePid, kill: bool) -> Result<(), RemoteError> {
    if **pid.node_arc() == *node.me.name {
        if pid.incarnation() != node.me.incarnation {
            return Err(node.other_life_error(pid.incarnation()));
        }
        return stop_local(node, pid.local(), kill);
    }
    let peer = PeerId {
        name: pid.node_arc().clone(),
        incarnation: pid.incarnation(),
    };
    let target = pid.local().as_u64();
    node.send_item(&peer, Item::Stop { target, kill })
        .map_err(RemoteError::from_refusal)
}

/// [`stop`] of a local process.
pub(crate) fn stop_local(node: &NodeShared, pid: Pid, kill: bool) -> Result<(), RemoteError> {
    let result = if kill {
        node.sched.terminate(pid)
    } else {
        node.sched.cancel(pid)
    };
    result.map_err(|error| RemoteError::from_refusal(super::registry::refusal_of(error.kind())))
}

/// Watches local `local` for its link to `peer`'s `remote`: when it ends, tells `peer`.
fn watch_end(node: &Arc<NodeShared>, local: Pid, peer: PeerId, remote: u64) {
    let monitor = node.sched.monitor(local);
    let key: LinkKey = (local, peer, remote);
    let (weak, task_key) = (Arc::downgrade(node), key.clone());
    // As `inbound.rs`'s served monitors: the task starts once its handle is registered.
    let (registered, start) = tokio::sync::oneshot::channel::<()>();
    let task = node.runtime.spawn(async move {
        if start.await.is_err() {
            return;
        }
        let down = monitor.await;
        let Some(node) = weak.upgrade() else {
            return;
        };
        if lock(&node.links).remove(&task_key).is_none() {
            return; // unlinked meanwhile
        }
        let (local, peer, remote) = task_key;
        let reason = WireReason::from_reason(down.pid, &down.reason);
        let item = Item::LinkExit {
            from: local.as_u64(),
            to: remote,
            reason,
        };
        let _ = node.send_item(&peer, item);
    });
    if let Some(previous) = lock(&node.links).insert(key, task.abort_handle()) {
        previous.abort(); // linked twice: one link
    }
    let _ = registered.send(());
}

/// Forgets the link end `key`; `true` if it stood.
fn forget(node: &NodeShared, key: &LinkKey) -> bool {
    match lock(&node.links).remove(key) {
        Some(watch) => {
            watch.abort();
            true
        }
        None => false,
    }
}

/// Delivers `reason` from `remote` to local `local` at once.
fn signal(node: &NodeShared, local: Pid, remote: &NodePid, reason: ExitReason) {
    let exit = Exit::remote(
        remote.local(),
        reason,
        remote.node_arc().clone(),
        remote.incarnation(),
    );
    node.sched.exit_signal(local, exit);
}
