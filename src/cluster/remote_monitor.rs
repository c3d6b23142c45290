//! A monitor on a process of any node ([`Node::monitor`](super::Node::monitor)): exactly one
//! [`RemoteDown`], from the far node's `Down`, or `NoConnection` when that node dies.

use super::node::{NodeShared, PeerId, Pending};
use super::wire::{Item, WireReason};
use super::NodePid;
use crate::process::exit::ExitReason;
use crate::scheduler::Monitor;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::oneshot;

/// A process's end, as a [`RemoteMonitor`] reports it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RemoteDown {
    /// The monitored process.
    pub pid: NodePid,
    /// Why it ended: `NoConnection` if its node died or became unreachable, `NoProc` if it was
    /// already gone.
    pub reason: ExitReason,
}

/// A monitor on a process on any node ([`Node::monitor`](super::Node::monitor)): resolves to
/// exactly one [`RemoteDown`]. Dropping it first demonitors.
///
/// # Examples
///
/// ```no_run
/// use procsched::cluster::{Node, NodePid};
/// use std::time::Duration;
///
/// # async fn demo(node: Node, pid: NodePid) {
/// let monitor = node.monitor(pid);
/// // Watch for a while only: the timeout drops the monitor, which demonitors.
/// if let Ok(down) = tokio::time::timeout(Duration::from_secs(30), monitor).await {
///     eprintln!("{} ended: {}", down.pid, down.reason);
/// }
/// # }
/// ```
#[must_use = "a monitor reports only when awaited; dropping it demonitors"]
pub struct RemoteMonitor {
    pid: NodePid,
    state: Watching,
}

enum Watching {
    Local(Monitor),
    Remote {
        node: Arc<NodeShared>,
        peer: PeerId,
        id: u64,
        down: oneshot::Receiver<WireReason>,
    },
    Ready(Option<ExitReason>),
}

impl fmt::Debug for RemoteMonitor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RemoteMonitor").field(&self.pid).finish()
    }
}

impl RemoteMonitor {
    pub(crate) fn new(node: &Arc<NodeShared>, pid: NodePid) -> RemoteMonitor {
        let ready = |reason| RemoteMonitor {
            pid: pid.clone(),
            state: Watching::Ready(Some(reason)),
        };
        if **pid.node_arc() == *node.me.name {
            if pid.incarnation() != node.me.incarnation {
                return ready(node.other_life_reason(pid.incarnation()));
            }
            let monitor = node.sched.monitor(pid.local());
            return RemoteMonitor {
                pid,
                state: Watching::Local(monitor),
            };
        }
        match node.incarnation_of(pid.node()) {
            None => ready(ExitReason::NoConnection),
            Some(live) if live != pid.incarnation() => {
                ready(NodeShared::other_life_exit(live, pid.incarnation()))
            }
            Some(_) => {
                let peer = PeerId {
                    name: pid.node_arc().clone(),
                    incarnation: pid.incarnation(),
                };
                let id = node.next_id();
                let (tx, down) = oneshot::channel();
                node.expect(id, peer.clone(), Pending::Monitor(tx));
                let target = pid.local().as_u64();
                if node.send_item(&peer, Item::Monitor { id, target }).is_err() {
                    node.forget_pending(id);
                    return ready(ExitReason::NoConnection);
                }
                RemoteMonitor {
                    pid,
                    state: Watching::Remote {
                        node: node.clone(),
                        peer,
                        id,
                        down,
                    },
                }
            }
        }
    }

    /// The monitored process.
    ///
    /// # Examples
    ///
    /// See [`Node::monitor`](super::Node::monitor).
    pub fn pid(&self) -> &NodePid {
        &self.pid
    }
}

impl Future for RemoteMonitor {
    type Output = RemoteDown;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<RemoteDown> {
        let this = &mut *self;
        let reason = match &mut this.state {
            Watching::Local(monitor) => match Pin::new(monitor).poll(cx) {
                Poll::Ready(down) => down.reason,
                Poll::Pending => return Poll::Pending,
            },
            Watching::Remote { down, .. } => match Pin::new(down).poll(cx) {
                Poll::Ready(Ok(reason)) => reason.into_reason(),
                // The node stopped: nothing will report anymore.
                Poll::Ready(Err(_)) => ExitReason::NoConnection,
                Poll::Pending => return Poll::Pending,
            },
            Watching::Ready(reason) => reason.take().unwrap_or(ExitReason::NoConnection),
        };
        this.state = Watching::Ready(None);
        Poll::Ready(RemoteDown {
            pid: this.pid.clone(),
            reason,
        })
    }
}

impl Drop for RemoteMonitor {
    fn drop(&mut self) {
        if let Watching::Remote { node, peer, id, .. } = &self.state {
            if node.forget_pending(*id).is_some() {
                let _ = node.send_item(peer, Item::Demonitor { id: *id });
            }
        }
    }
}
