//! A peer's two outbound queues (data, control), each drained by one writer task that batches
//! whatever is queued into one frame per publish.
//!
//! Batching needs no timer: a writer publishes as soon as it has something, and everything that
//! queued up while it was publishing goes out together in the next frame (up to
//! [`BATCH_BYTES`]). Under light load a message costs one publish; under heavy load many share
//! one.

use super::node::{NodeShared, PeerId};
use super::wire::{self, Frame, Item};
use std::sync::Arc;
use tokio::sync::mpsc;

/// The most a writer packs into one frame (it stops adding items past this size).
pub(crate) const BATCH_BYTES: usize = 64 << 10;
/// The most items in one frame.
const BATCH_ITEMS: usize = 1024;
/// Room kept in a frame for its header and envelope (names, incarnations, item tags).
pub(crate) const FRAME_SLACK: usize = 512;

/// The queues to one peer.
pub(crate) struct Outbound {
    data: mpsc::UnboundedSender<Item<'static>>,
    control: mpsc::UnboundedSender<Item<'static>>,
}

impl Outbound {
    /// Queues `item` (never blocks: the queue is unbounded, its writer drains it as fast as
    /// NATS takes frames).
    pub(crate) fn push(&self, item: Item<'static>) {
        let queue = if item.is_control() {
            &self.control
        } else {
            &self.data
        };
        // A closed queue is a peer just declared down: the item is dropped, as its waiter has
        // been failed already.
        let _ = queue.send(item);
    }

    /// Stops the writers once they have sent what is queued.
    pub(crate) fn close(self) {
        drop(self);
    }
}

/// Starts the writers to `peer`.
pub(crate) fn start(node: &Arc<NodeShared>, peer: &PeerId) -> Outbound {
    let (data, data_rx) = mpsc::unbounded_channel();
    let (control, control_rx) = mpsc::unbounded_channel();
    for (rx, is_control) in [(data_rx, false), (control_rx, true)] {
        let subject = node.subject(&peer.name, is_control);
        tokio::spawn(write(Arc::downgrade(node), subject, peer.incarnation, rx));
    }
    Outbound { data, control }
}

/// A writer: drains its queue into frames until the queue closes.
async fn write(
    node: std::sync::Weak<NodeShared>,
    subject: String,
    to_incarnation: u64,
    mut queue: mpsc::UnboundedReceiver<Item<'static>>,
) {
    let mut items = Vec::new();
    // An item that would have pushed the last frame past the frame limit: it opens the next.
    let mut carried: Option<Item<'static>> = None;
    loop {
        let first = match carried.take() {
            Some(item) => item,
            None => match queue.recv().await {
                Some(item) => item,
                None => return,
            },
        };
        let Some(node) = node.upgrade() else {
            return;
        };
        let room = node.max_frame.saturating_sub(FRAME_SLACK);
        let mut size = item_size(&first);
        items.push(first);
        while size < BATCH_BYTES && items.len() < BATCH_ITEMS {
            match queue.try_recv() {
                Ok(item) if size + item_size(&item) > room => {
                    carried = Some(item);
                    break;
                }
                Ok(item) => {
                    size += item_size(&item);
                    items.push(item);
                }
                Err(_) => break,
            }
        }
        let count = items.len();
        let frame = Frame {
            from: node.me.name.to_string(),
            from_incarnation: node.me.incarnation,
            to_incarnation,
            items: std::mem::take(&mut items),
        };
        let bytes = match wire::encode(&frame, size + FRAME_SLACK) {
            Ok(bytes) => bytes,
            Err(error) => {
                node.stats.publish_error();
                tracing::error!(%subject, %error, "a frame did not encode: dropped");
                continue;
            }
        };
        let len = bytes.len();
        match node.client.publish(subject.clone(), bytes.into()).await {
            Ok(()) => node.stats.sent(count, len),
            Err(error) => {
                node.stats.publish_error();
                tracing::warn!(%subject, %error, items = count, "a frame could not be published");
            }
        }
    }
}

/// An item's approximate encoded size.
fn item_size(item: &Item<'_>) -> usize {
    match item {
        Item::Message { body, ty, .. } => body.len() + ty.len() + 24,
        Item::Reply {
            result: Ok(body), ..
        } => body.len() + 24,
        Item::Spawn { args, name, .. } => args.len() + name.len() + 24,
        _ => 32,
    }
}
