//! Cluster-wide process identifiers: a local [`Pid`] qualified by its node and the node's
//! incarnation.
//!
//! # Layout and limits
//! A [`NodePid`] is `(node name, incarnation, local PID)`:
//! - the **node name** is the one the node claimed in the membership bucket (`[A-Za-z0-9_-]`,
//!   at most 64 bytes; `config.rs`);
//! - the **incarnation** is drawn when the node starts — its start time in milliseconds (the
//!   high 44 bits) and 20 random bits: a node restarted under the same name is a new
//!   incarnation, so a PID from its previous life fails at once with `NoProc` instead of
//!   reaching a stranger. Lives of one name order by their start, so a PID of a *newer* life
//!   than the one a node has read from the membership bucket (it lags up to a heartbeat behind
//!   a restart; the PID may come sooner, from a third node) is `NoConnection` there — not
//!   reachable yet — rather than taken for a dead one's (the ordering assumes the clocks of
//!   the machines one name restarts on agree to within the restart's time, a second or more);
//! - the **local PID** is the node's own [`Pid`], never reused by that scheduler.
//!
//! So a `NodePid` is never reused cluster-wide. The local fast path does not see any of this:
//! processes on this node are still addressed by [`Pid`] through [`Addr`](crate::Addr), with no
//! serialization and no extra branch; a `NodePid` is for what crosses nodes.
//!
//! The stable string form, for logs and configuration, is `node@incarnation/slot.generation`
//! with the incarnation in 16 hex digits (`orders-1@00c0ffee00c0ffee/3.7`); [`NodePid`]'s
//! `FromStr` reads it back.

use crate::process::Pid;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// A process anywhere in the cluster: its node, the node's incarnation, and its local [`Pid`].
///
/// Serializable (MessagePack: a 3-element record), so a PID can be passed inside a message to
/// a third node, which can then address the process directly. Decoding refuses what [`FromStr`]
/// refuses (a name no node can claim, incarnation 0, local PID 0): a frame carrying one is
/// rejected as malformed.
///
/// # Layout and limits
/// - **node**: the name the node claimed in the membership bucket, 1 to 64 bytes of
///   `[A-Za-z0-9_-]` (a second live node cannot claim it);
/// - **incarnation**: a non-zero 64-bit number drawn each time the node starts (its start
///   time in milliseconds, then 20 random bits), so a PID from a node's previous life fails
///   at once with `NoProc` instead of reaching a stranger, and one from a newer life this node
///   has not heard of yet is `NoConnection` (see the module's "Layout and limits");
/// - **local PID**: the node's own [`Pid`] (a slot of its process table, at most 2²⁶ live
///   processes, and that slot's generation: a slot retires after 2³⁸ of them, so a PID is
///   never reused by its scheduler).
///
/// So a `NodePid` is never reused cluster-wide. The string form, for logs and configuration,
/// is `node@incarnation/slot.generation` with the incarnation in 16 hex digits, and
/// [`FromStr`] reads it back. Processes of this node are still addressed by [`Pid`] through
/// [`Addr`](crate::Addr): a `NodePid` is for what crosses nodes.
///
/// # Examples
///
/// ```
/// use procsched::cluster::NodePid;
/// use procsched::Pid;
///
/// let pid = NodePid::new("orders-1", 0xc0ffee, Pid::from_raw(7 << 26 | 3).unwrap());
/// assert_eq!(pid.to_string(), "orders-1@0000000000c0ffee/3.7");
/// assert_eq!(pid.to_string().parse::<NodePid>().unwrap(), pid);
/// assert_eq!(pid.node(), "orders-1");
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "WirePid", into = "WirePid")]
pub struct NodePid {
    node: Arc<str>,
    incarnation: u64,
    pid: Pid,
}

/// The wire form: a flat record, the PID as its raw number.
#[derive(Serialize, Deserialize)]
struct WirePid {
    node: String,
    incarnation: u64,
    pid: u64,
}

impl From<NodePid> for WirePid {
    fn from(pid: NodePid) -> WirePid {
        WirePid {
            node: pid.node.to_string(),
            incarnation: pid.incarnation,
            pid: pid.pid.as_u64(),
        }
    }
}

impl TryFrom<WirePid> for NodePid {
    type Error = String;

    /// Refuses what the string form refuses, so every decoded `NodePid` prints a form
    /// [`FromStr`] reads back, and names a node that could exist.
    fn try_from(wire: WirePid) -> Result<NodePid, String> {
        if !could_be_claimed(&wire.node, wire.incarnation) {
            return Err(format!(
                "a node PID of a node no node can be: name {:?}, incarnation {}",
                wire.node, wire.incarnation
            ));
        }
        // A raw 0 names no process: refused, so a decoded `NodePid` always holds a real `Pid`.
        let pid = Pid::from_raw(wire.pid).ok_or("a node PID with local PID 0")?;
        Ok(NodePid {
            node: wire.node.into(),
            incarnation: wire.incarnation,
            pid,
        })
    }
}

/// Whether a node could have claimed this name and drawn this incarnation: a name is a token
/// (what `Cluster::name` accepts) and an incarnation is never 0 (`start.rs` draws it
/// non-zero). Both decoders hold a `NodePid` from outside to it, so a peer's frame cannot hand
/// us a PID whose string form we could not read back or whose subject is not a node's.
fn could_be_claimed(node: &str, incarnation: u64) -> bool {
    incarnation != 0 && super::config::is_token(node)
}

impl NodePid {
    /// The PID of local process `pid` on node `node`, incarnation `incarnation`. Nothing is
    /// checked: a name [`Cluster::name`](super::Cluster::name) would refuse, or incarnation 0,
    /// makes a PID no node has — its string form does not parse back, and a node that
    /// receives it refuses it as malformed. PIDs come from [`Node::pid`](super::Node::pid), a
    /// spawn, or parsing one's string form ([`FromStr`]).
    ///
    /// # Examples
    ///
    /// See [`NodePid`].
    pub fn new(node: impl Into<Arc<str>>, incarnation: u64, pid: Pid) -> NodePid {
        NodePid {
            node: node.into(),
            incarnation,
            pid,
        }
    }

    /// The node's name.
    ///
    /// # Examples
    ///
    /// See [`NodePid`].
    pub fn node(&self) -> &str {
        &self.node
    }

    pub(crate) fn node_arc(&self) -> &Arc<str> {
        &self.node
    }

    /// The node's incarnation (its life) when the process was spawned.
    ///
    /// # Examples
    ///
    /// ```
    /// # use procsched::{cluster::NodePid, Pid};
    /// let pid = NodePid::new("a", 9, Pid::from_raw(1 << 26 | 1).unwrap());
    /// assert_eq!(pid.incarnation(), 9);
    /// ```
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// The PID of the process an exit signal came from, if it is on another node (a link
    /// across nodes, [`Node::link`](super::Node::link)).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(cx: procsched::ProcessCx) -> Result<(), procsched::BoxError> {
    /// let exit = cx.recv_exit().await?;
    /// if let Some(remote) = procsched::cluster::NodePid::of_exit(&exit) {
    ///     println!("{remote} ended: {}", exit.reason);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn of_exit(exit: &crate::process::Exit) -> Option<NodePid> {
        let node = exit.node.as_ref()?;
        Some(NodePid::new(node.name.clone(), node.incarnation, exit.pid))
    }

    /// The PID of the process a [`Down`](crate::supervision::Down) reports, if it ran on
    /// another node (a monitor made by [`Node::monitor_from`](super::Node::monitor_from)).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use procsched::prelude::*;
    /// # async fn demo(cx: ProcessCx) -> Result<(), BoxError> {
    /// let down = cx.recv_down().await?;
    /// if let Some(remote) = procsched::cluster::NodePid::of_down(&down) {
    ///     println!("{remote} ended: {}", down.reason);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn of_down(down: &crate::process::Down) -> Option<NodePid> {
        let node = down.node.as_ref()?;
        Some(NodePid::new(node.name.clone(), node.incarnation, down.pid))
    }

    /// The process's PID on its own node.
    ///
    /// # Examples
    ///
    /// ```
    /// # use procsched::{cluster::NodePid, Pid};
    /// let local = Pid::from_raw(1 << 26 | 1).unwrap();
    /// assert_eq!(NodePid::new("a", 9, local).local(), local);
    /// ```
    pub fn local(&self) -> Pid {
        self.pid
    }
}

impl super::Node {
    /// The cluster-wide PID of the process a [`Down`](crate::supervision::Down) received on
    /// this node reports: the other node's ([`NodePid::of_down`]) for a monitor across nodes,
    /// this node's ([`pid`](super::Node::pid)) for a local one — so a watcher of processes on
    /// any node, its own included, names each the same way.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use procsched::prelude::*;
    /// # async fn demo(node: procsched::cluster::Node, cx: ProcessCx) -> Result<(), BoxError> {
    /// let down = cx.recv_down().await?;
    /// let ended = node.pid_of_down(&down);   // `node@<incarnation>/<slot>.<generation>`
    /// println!("{ended} ended: {}", down.reason);
    /// # Ok(()) }
    /// ```
    pub fn pid_of_down(&self, down: &crate::process::Down) -> NodePid {
        NodePid::of_down(down).unwrap_or_else(|| self.pid(down.pid))
    }

    /// The cluster-wide PID of the process an exit signal received on this node came from:
    /// the other node's ([`NodePid::of_exit`]) for a link across nodes, this node's for a
    /// local one.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use procsched::prelude::*;
    /// # async fn demo(node: procsched::cluster::Node, cx: ProcessCx) -> Result<(), BoxError> {
    /// let exit = cx.recv_exit().await?;
    /// println!("{} ended: {}", node.pid_of_exit(&exit), exit.reason);
    /// # Ok(()) }
    /// ```
    pub fn pid_of_exit(&self, exit: &crate::process::Exit) -> NodePid {
        NodePid::of_exit(exit).unwrap_or_else(|| self.pid(exit.pid))
    }
}

impl fmt::Display for NodePid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let raw = self.pid.as_u64();
        let (slot, generation) = (
            raw & ((1 << crate::process::pid::INDEX_BITS) - 1),
            raw >> crate::process::pid::INDEX_BITS,
        );
        write!(
            f,
            "{}@{:016x}/{}.{}",
            self.node, self.incarnation, slot, generation
        )
    }
}

impl fmt::Debug for NodePid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A string that is not a [`NodePid`]'s stable form (`node@incarnation/slot.generation`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a node PID (`node@incarnation/slot.generation`): {0:?}")]
pub struct ParseNodePidError(String);

impl FromStr for NodePid {
    type Err = ParseNodePidError;

    /// Only the canonical form [`Display`](fmt::Display) writes parses: a node name as a node
    /// can claim, 16 lowercase hex digits not all zero, decimal slot and generation without
    /// sign or leading zeros — so a string and its PID round-trip, and no PID parses that no
    /// node could have.
    fn from_str(s: &str) -> Result<NodePid, ParseNodePidError> {
        let bad = || ParseNodePidError(s.to_owned());
        let decimal = |digits: &str| {
            let canonical = !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit())
                && (digits == "0" || !digits.starts_with('0'));
            canonical.then(|| digits.parse::<u64>().ok()).flatten()
        };
        let (node, rest) = s.split_once('@').ok_or_else(bad)?;
        let (incarnation, local) = rest.split_once('/').ok_or_else(bad)?;
        let (slot, generation) = local.split_once('.').ok_or_else(bad)?;
        let hex = incarnation.len() == 16
            && incarnation
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !hex {
            return Err(bad());
        }
        let incarnation = u64::from_str_radix(incarnation, 16).map_err(|_| bad())?;
        if !could_be_claimed(node, incarnation) {
            return Err(bad());
        }
        let slot = decimal(slot).ok_or_else(bad)?;
        let generation = decimal(generation).ok_or_else(bad)?;
        // Generation 0 is never handed out (`Pid::new` starts at 1).
        if generation == 0 || slot >> crate::process::pid::INDEX_BITS != 0 {
            return Err(bad());
        }
        let raw = generation
            .checked_shl(crate::process::pid::INDEX_BITS)
            .filter(|shifted| shifted >> crate::process::pid::INDEX_BITS == generation)
            .ok_or_else(bad)?
            | slot;
        let pid = Pid::from_raw(raw).ok_or_else(bad)?;
        Ok(NodePid::new(node, incarnation, pid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_string_form_round_trips_and_rejects_garbage() {
        let pid = NodePid::new("n-1", u64::MAX, Pid::from_raw(5 << 26 | 9).unwrap());
        assert_eq!(pid.to_string(), "n-1@ffffffffffffffff/9.5");
        assert_eq!(pid.to_string().parse::<NodePid>(), Ok(pid));
        for bad in [
            "",
            "n",
            "n@x/1.1",
            "n@1/1",
            "@1/1.1",
            "n@1/0.0",
            "n@1/99999999999.1",
            // Not the canonical form: a name no node can claim, a short or signed or
            // upper-case incarnation, a signed or zero-padded slot or generation.
            "bad name!@0000000000000001/1.1",
            "a@b@0000000000000001/1.1",
            "a@1/1.1",
            "a@000000000000000000001/1.1",
            "a@+1/1.1",
            "a@000000000000000A/1.1",
            // No node draws incarnation 0.
            "a@0000000000000000/1.1",
            "a@0000000000000001/+1.1",
            "a@0000000000000001/01.1",
            "a@0000000000000001/1.+1",
            "a@0000000000000001/1.01",
            // Generation 0 is never handed out.
            "a@0000000000000001/9.0",
            "n@00000000000000ff/9.0",
        ] {
            assert!(bad.parse::<NodePid>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_wire_form_round_trips_through_messagepack() {
        let pid = NodePid::new("n-1", 42, Pid::from_raw(5 << 26 | 9).unwrap());
        let bytes = rmp_serde::to_vec_named(&pid).unwrap();
        assert_eq!(rmp_serde::from_slice::<NodePid>(&bytes).unwrap(), pid);
        let zero = WirePid {
            node: "n".into(),
            incarnation: 1,
            pid: 0,
        };
        let bytes = rmp_serde::to_vec_named(&zero).unwrap();
        assert!(rmp_serde::from_slice::<NodePid>(&bytes).is_err());
        // What the string form refuses, the wire form refuses: a name no node can claim (empty,
        // dotted, which would also be another subject), incarnation 0.
        for (node, incarnation) in [("", 1), ("a.b", 1), ("a*", 1), ("a", 0)] {
            let wire = WirePid {
                node: node.into(),
                incarnation,
                pid: 5 << 26 | 9,
            };
            let bytes = rmp_serde::to_vec_named(&wire).unwrap();
            assert!(
                rmp_serde::from_slice::<NodePid>(&bytes).is_err(),
                "{node:?} {incarnation}"
            );
        }
    }
}
