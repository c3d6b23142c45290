//! Supervised children on other nodes: a [`ChildSpec`] whose child runs wherever a placement
//! says, restarted by a local supervisor like any child.
//!
//! The supervisor's child is a small local *proxy* process: it spawns the real child with
//! [`Node::spawn_on`], monitors it, and ends with the child's exit reason — `NoConnection` if the
//! child's node dies — so the supervisor's strategy, restart type and intensity apply unchanged,
//! and a restart places the new child again (a dead node is no longer a candidate). Asked to
//! finish, the proxy stops the child and waits for its end (the spec's shutdown policy bounds
//! that wait, as for any child).

use super::{Node, NodePid, Placement};
use crate::process::exit::ExitReason;
use crate::process::BoxError;
use crate::scheduler::{ChildSpec, ProcessCx};
use futures::future::{select, Either};
use serde::Serialize;
use std::pin::pin;
use std::sync::{Arc, Mutex};

/// The current instance of a supervised child on another node ([`Node::remote_child`]).
///
/// # Examples
///
/// See [`Node::remote_child`].
#[derive(Debug, Clone, Default)]
pub struct RemoteChild {
    current: Arc<Mutex<Option<NodePid>>>,
}

impl RemoteChild {
    /// The running instance's PID: `None` between an end and its restart.
    ///
    /// # Examples
    ///
    /// See [`Node::remote_child`].
    pub fn pid(&self) -> Option<NodePid> {
        self.current.lock().ok()?.clone()
    }

    fn set(&self, pid: Option<NodePid>) {
        if let Ok(mut current) = self.current.lock() {
            *current = pid;
        }
    }
}

impl Node {
    /// A child spec for a supervisor on this node whose child is the body registered as `name`
    /// ([`Cluster::spawnable`](super::Cluster::spawnable)), spawned with `args` where
    /// `placement` says — on every (re)start, so a child whose node died comes back elsewhere.
    /// The child's end (its exit reason, `NoConnection` if its node died) is the spec's end.
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
    /// println!("the worker runs as {:?}", worker.pid());
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
    /// See [`remote_child`](Self::remote_child).
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
    let pid = node.spawn_encoded(placement, &name, args).await?;
    child.set(Some(pid.clone()));
    let down = pin!(node.monitor(pid.clone()));
    let asked = pin!(cx.recv());
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
    child.set(None);
    result
}
