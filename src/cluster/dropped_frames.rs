//! Frames the NATS client dropped (a slow consumer) end the sessions with every peer.
//!
//! Why: a node's subscription has a bounded queue (`ConnectOptions::subscription_capacity`);
//! when its inbound task falls that far behind — a slow `Deserialize`, a starved runtime — the
//! client drops what arrives and reports a slow consumer. Frames carry no sequence number, so
//! the node cannot tell which peer lost what, and a lost control frame is not a lost message:
//! a `Down` or exit signal its watchers would wait for forever, a spawn's answer whose process
//! nobody could reach. Messages are at most once; signals are owed. So, as OTP ends a
//! distribution connection it cannot keep, the node declares every peer down — their links
//! fire, their monitors resolve, what it waits for from them fails, all with `NoConnection`,
//! counted so that each peer does the same on its side (`severance.rs`) — and takes each back
//! as a fresh peer with its next frame or heartbeat. The frames it reads meanwhile were
//! queued before the drop, or belong to the session being ended; either way the severance
//! leaves nothing waiting on a frame that will not come.
//!
//! How: the client's event callback only counts each dropped frame and wakes [`sever_peers`];
//! many drops in a burst fold into one wake-up (a `Notify` keeps one permit), and each round
//! declares down whoever is a peer then.

use super::node::NodeShared;
use std::sync::Arc;
use tokio::sync::Notify;

/// Declares every peer down each time the client reports dropped frames, until the node stops.
pub(crate) async fn sever_peers(node: Arc<NodeShared>, dropped: Arc<Notify>) {
    let mut reported = 0;
    loop {
        dropped.notified().await;
        if node.is_detached() {
            return;
        }
        let drops = node.stats.slow_consumers();
        let peers = node.peer_names();
        // Rate-limited with the "node down" lines it causes (`NodeShared::down_budget`), not
        // with the input warnings, which the flood behind the drops spends: a flood made 100
        // lines a second in a review. A line says how many drops since the last line.
        if drops != reported || !peers.is_empty() {
            if let Some(suppressed) = node.down_budget.take() {
                tracing::warn!(
                    suppressed,
                    dropped = drops - reported,
                    peers = peers.len(),
                    "the NATS client dropped frames (a slow consumer): every peer is declared \
                     down, as a lost signal cannot be told from a lost message"
                );
                reported = drops;
            }
        }
        for name in peers {
            node.sever(&name, None, "frames from it were dropped (a slow consumer)");
        }
    }
}
