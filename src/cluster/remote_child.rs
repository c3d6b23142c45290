//! Supervised children on other nodes: a [`ChildSpec`] whose child runs wherever a placement
//! says, restarted by a local supervisor like any child.
//!
//! The supervisor's child is a small local *proxy* process: it spawns the real child with
//! [`Node::spawn_on`], monitors it, and ends with the child's exit reason — `NoConnection` if the
//! child's node dies — so the supervisor's strategy, restart type and intensity apply unchanged,
//! and a restart places the new child again (a dead node is no longer a candidate). Asked to
//! finish, the proxy stops the child and waits for its end (the spec's shutdown policy bounds
//! that wait, as for any child). The proxy is also linked to the child, as an OTP supervisor
//! is to its children: a proxy that ends without stopping it (killed with its supervisor, or
//! its node declared down by the child's) takes the child with it, so that a restart does not
//! leave two instances running (below: as far as this node can tell), nor a killed tree a child
//! behind.
//!
//! Placement decides where a restart can go: `LeastLoaded` and `AnyOf` place it on a live node,
//! `Placement::Node(name)` on that node only. A proxy that finds no live node to place on waits
//! for one, for up to the node's request timeout (`Cluster::request_timeout`), before it fails
//! (`NoNode`): a NATS server restart, or a brief cut, declares every peer down to this node —
//! what was sent meanwhile may be lost, so the sessions end — and without that wait every
//! restart would fail at once, spending the supervisor's whole intensity in a millisecond (a
//! black-box review measured 100 restarts in 1 ms) and ending a tree that the peers' next
//! heartbeats would have let back. A restart that keeps finding no node fails once per request
//! timeout, which the intensity then judges as OTP's would a child that cannot start.
//!
//! A restart does not overlap the previous instance, as far as this node can tell. The proxy
//! that saw its child end (its `Down`) lets the next one start at once; a proxy that ended
//! without seeing it — killed by a `BrutalKill` shutdown or a stop's timeout, its link then
//! taking the child down asynchronously, across the network; or ended by the child's own exit
//! signal before it read the `Down` — leaves the instance's PID behind, and the next proxy
//! waits for that instance's end (a monitor's `Down`: one round trip, `NoProc` if it is gone
//! already; at most the request timeout) before it places a new one, as OTP's `brutal_kill`
//! waits for the killed child's `'DOWN'`. The PID is cleared only once that end is seen: a
//! proxy stopped while it waits leaves it to the next. Two cases stay outside: a node declared
//! down here answers that monitor `NoConnection` at once, though in a partition the instance
//! may still run there until its node hears of the severance and its link to the proxy ends
//! it (`severance.rs`); and a proxy stopped while its spawn is in flight leaves that instance
//! to the spawn's own clean-up (terminated once its answer comes), which the next proxy does
//! not wait for.
//!
//! The proxy takes no messages: what is sent to it is dropped. A name given to the spec with
//! `ChildSpec::register_as` names the proxy, on this node; the child is reached through
//! [`RemoteChild::pid`], or by a name it registers on its own node (`cx.register`, found with
//! `Node::whereis`).

use super::{Node, NodePid, Placement};
use crate::error::RecvError;
use crate::process::exit::ExitReason;
use crate::process::{foreign_wake, BoxError};
use crate::scheduler::deadline::Deadline;
use crate::scheduler::{ChildSpec, ProcessCx};
use futures::future::{select, Either};
use serde::Serialize;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The current instance of a supervised child on another node ([`Node::remote_child`]).
///
/// # Examples
///
/// See [`Node::remote_child`].
#[derive(Debug, Clone)]
pub struct RemoteChild {
    current: watch::Sender<Option<NodePid>>,
    /// An instance whose end its proxy did not see (module docs): the next proxy waits for it.
    unconfirmed: Arc<Mutex<Option<NodePid>>>,
}

impl Default for RemoteChild {
    fn default() -> RemoteChild {
        RemoteChild {
            current: watch::Sender::new(None),
            unconfirmed: Arc::default(),
        }
    }
}

impl RemoteChild {
    /// The running instance's PID: `None` until the supervisor has started it on its node (a
    /// round trip after the supervisor's start returns), and between an end and its restart.
    /// [`running`](Self::running) waits for it.
    ///
    /// # Examples
    ///
    /// See [`Node::remote_child`].
    pub fn pid(&self) -> Option<NodePid> {
        self.current.borrow().clone()
    }

    /// The running instance's PID, once there is one: at once if it runs, else when the
    /// supervisor has (re)started it. Never resolves if it is never started again (its
    /// supervisor gave up): bound the wait.
    ///
    /// # Examples
    ///
    /// See [`Node::remote_child`].
    pub async fn running(&self) -> NodePid {
        let mut current = self.current.subscribe();
        loop {
            if let Some(pid) = current.borrow_and_update().clone() {
                return pid;
            }
            if current.changed().await.is_err() {
                // Unreachable: `self` holds the sender while this waits.
                std::future::pending::<()>().await;
            }
        }
    }

    /// The instance whose end no proxy saw, if any.
    fn unconfirmed(&self) -> Option<NodePid> {
        self.unconfirmed.lock().expect("unconfirmed lock").clone()
    }

    /// `pid`'s end was seen: nobody waits for it any more (unless another instance took its
    /// place meanwhile).
    fn confirm(&self, pid: &NodePid) {
        let mut unconfirmed = self.unconfirmed.lock().expect("unconfirmed lock");
        if unconfirmed.as_ref() == Some(pid) {
            *unconfirmed = None;
        }
    }

    fn set(&self, pid: Option<NodePid>) {
        // The value is stored before the wake: a waiting task's panicking waker (not ours,
        // `foreign_wake.rs`) must not end the task that runs the child.
        let _ = foreign_wake("a task awaiting a remote child", || {
            self.current.send_replace(pid)
        });
    }
}

impl Node {
    /// A child spec for a supervisor on this node whose child is the body registered as `name`
    /// ([`Cluster::spawnable`](super::Cluster::spawnable), or a state machine's
    /// [`Cluster::spawnable_process`](super::Cluster::spawnable_process)), spawned with `args`
    /// where `placement` says — on every (re)start, so a child whose node died comes back elsewhere
    /// (with `LeastLoaded` or `AnyOf`; a child pinned with `Placement::Node` comes back on that
    /// node only, once it is live again, as a node restarted under its name is).
    /// The child's end (its exit reason, `NoConnection` if its node died) is the spec's end.
    ///
    /// A (re)start that finds no live node to place on waits for one, up to the node's request
    /// timeout ([`Cluster::request_timeout`](super::Cluster::request_timeout)), then fails
    /// `NoNode` — spent from the supervisor's intensity as any failed restart — so a tree
    /// rides out a NATS server restart (every session ends with it: the children are
    /// restarted, not lost). A restart does not run beside the previous instance: after a
    /// `BrutalKill` or a stop's timeout it waits for that instance's end first — except for
    /// an instance on a node declared down here (a partition: it ends when its node hears of
    /// the severance) and one whose spawn was still in flight when it was stopped (terminated
    /// once the spawn's answer comes).
    ///
    /// The spec's own process on this node is a proxy that takes no messages: what is sent to
    /// it is dropped, and a name given with
    /// [`ChildSpec::register_as`](crate::supervision::ChildSpec::register_as) names the proxy,
    /// here. Reach the child through [`RemoteChild::pid`], or by a name it registers on its own
    /// node (`cx.register`, found with [`Node::whereis`]).
    ///
    /// # Errors
    ///
    /// `args` that do not encode.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use procsched::cluster::{Node, Placement};
    /// use procsched::supervision::Supervisor;
    ///
    /// # async fn demo(node: Node) -> Result<(), procsched::BoxError> {
    /// let (spec, worker) = node.remote_child("worker", Placement::LeastLoaded, "cart", 0u64)?;
    /// let supervisor = Supervisor::one_for_one().child(spec).start(&node.scheduler()).await?;
    /// // Placed and spawned on its node a round trip after the supervisor started.
    /// let pid = tokio::time::timeout(std::time::Duration::from_secs(5), worker.running()).await?;
    /// println!("the worker runs as {pid}");
    /// # Ok(()) }
    /// ```
    pub fn remote_child<A: Serialize>(
        &self,
        id: &str,
        placement: Placement,
        name: &str,
        args: A,
    ) -> Result<(ChildSpec, RemoteChild), super::RemoteError> {
        let args = rmp_serde::to_vec_named(&args)
            .map_err(|error| super::RemoteError::Encode(error.to_string()))?;
        let child = RemoteChild::default();
        let (node, name, handle) = (self.clone(), name.to_owned(), child.clone());
        let spec = ChildSpec::new(id, move |start| {
            let (node, placement, name) = (node.clone(), placement.clone(), name.clone());
            let (args, handle) = (args.clone(), handle.clone());
            start.spawn_fn(move |cx: ProcessCx<()>| proxy(cx, node, placement, name, args, handle))
        });
        Ok((spec, child))
    }

    /// The scheduler this node runs on.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use procsched::prelude::*;
    ///
    /// # async fn demo(node: procsched::cluster::Node) -> Result<(), BoxError> {
    /// // Local processes of a node are spawned on its scheduler as usual.
    /// let local = node.scheduler().spawn_fn(|_cx: ProcessCx<()>| async { Ok::<_, BoxError>(42u64) })?;
    /// assert_eq!(local.await?, 42);
    /// # Ok(())
    /// # }
    /// ```
    pub fn scheduler(&self) -> crate::SchedulerHandle {
        self.shared.sched.clone()
    }
}

/// The proxy: spawns the child, and ends as it ends (or stops it when asked to finish).
async fn proxy(
    cx: ProcessCx<()>,
    node: Node,
    placement: Placement,
    name: String,
    args: Vec<u8>,
    child: RemoteChild,
) -> Result<(), BoxError> {
    let mut asked = pin!(asked_to_finish(&cx));
    // Asked to finish before the child is placed: nothing runs (a spawn dropped in flight
    // terminates what it started, `spawn.rs`).
    let placing = pin!(place(&node, &child, placement, &name, args));
    let pid = match select(placing, asked.as_mut()).await {
        Either::Left((placed, _)) => placed?,
        Either::Right((asked, _)) => return asked.map_err(BoxError::from),
    };
    // Linked to the child, as OTP's supervisor is to its children, and not trapping exits (as
    // an OTP worker): if the proxy ends without stopping the child — killed with its
    // supervisor, by a `BrutalKill` shutdown, or its node declared down by the child's
    // (`Node::disconnect`) — the child ends too, instead of running on beside the instance a
    // restart starts; and the child's end, through the link, ends the proxy with its reason,
    // as the monitor below does.
    node.link(cx.pid(), &pid)?;
    // However the proxy ends (an exit signal drops it where it waits): no instance runs, and
    // one whose end it did not see is left for the next proxy to wait for.
    let mut current = Current::set(&child, pid.clone());
    let down = pin!(node.monitor(pid.clone()));
    let result = match select(down, asked).await {
        Either::Left((down, _)) => match down.reason {
            ExitReason::Normal => Ok(()),
            reason => Err(reason.into()),
        },
        Either::Right((asked, down)) => {
            // Asked to finish: the child finishes first, within the spec's shutdown policy.
            let _ = node.stop(&pid);
            let _ = down.await;
            asked.map_err(BoxError::from)
        }
    };
    current.ended = true;
    result
}

/// Resolves when the proxy is asked to finish (its supervisor stops it, or a shutdown), with
/// the receive's report of it. Messages sent to the proxy — by its PID, or by the name a
/// `ChildSpec::register_as` gave it on this node — are dropped: they are not a request to
/// finish (before, each one stopped the child and cost its supervisor a restart), and the
/// proxy has nothing to forward them as.
async fn asked_to_finish(cx: &ProcessCx<()>) -> Result<(), RecvError> {
    loop {
        match cx.recv().await {
            Err(cancelled @ RecvError::Cancelled(_)) => return Err(cancelled),
            // Not its own process's receive: cannot happen here, and would never resolve.
            Err(outside @ RecvError::OutsideProcess) => return Err(outside),
            Ok(()) | Err(_) => {
                tracing::debug!(proxy = %cx.pid(), "a message to a remote child's proxy dropped");
            }
        }
    }
}

/// Places and spawns an instance of the child: once the previous instance's end is seen (if
/// its proxy did not see it), on a live node — waiting for one, up to the request timeout, if
/// there is none yet (module docs).
async fn place(
    node: &Node,
    child: &RemoteChild,
    placement: Placement,
    name: &str,
    args: Vec<u8>,
) -> Result<NodePid, super::RemoteError> {
    let patience = node.shared.request_timeout;
    if let Some(previous) = child.unconfirmed() {
        let down = pin!(node.monitor(previous.clone()));
        if let Either::Right(_) = select(down, until(patience)).await {
            tracing::warn!(%previous, ?patience, "the previous instance's end was not seen in time; placing the next one");
        }
        // Cleared only now: a proxy stopped during the wait leaves it to the next one.
        child.confirm(&previous);
    }
    let deadline = crate::deadline::after(patience);
    let mut waited = false;
    loop {
        match node
            .spawn_encoded(placement.clone(), name, args.clone())
            .await
        {
            Err(super::RemoteError::NoNode(why)) if Instant::now() < deadline => {
                if !waited {
                    tracing::debug!(%why, "no live node to place a supervised child on: waiting for one");
                    waited = true;
                }
                // Membership changes with heartbeats: a quarter of one, as `wait_for_nodes`.
                until(node.shared.heartbeat / 4).await;
            }
            placed => return placed,
        }
    }
}

/// A timer on the crate's own clock (`deadline.rs`), not tokio's: the proxy runs on the
/// scheduler's workers.
fn until(after: Duration) -> Deadline {
    Deadline::new(crate::deadline::after(after))
}

/// The running instance's PID in a [`RemoteChild`], from [`set`](Self::set) until dropped;
/// dropped before its end was seen (`ended`), the PID is left for the next proxy to wait for.
struct Current<'a> {
    child: &'a RemoteChild,
    pid: NodePid,
    ended: bool,
}

impl<'a> Current<'a> {
    fn set(child: &'a RemoteChild, pid: NodePid) -> Current<'a> {
        child.set(Some(pid.clone()));
        Current {
            child,
            pid,
            ended: false,
        }
    }
}

impl Drop for Current<'_> {
    fn drop(&mut self) {
        if !self.ended {
            *self.child.unconfirmed.lock().expect("unconfirmed lock") = Some(self.pid.clone());
        }
        self.child.set(None);
    }
}
