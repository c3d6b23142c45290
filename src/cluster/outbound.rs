//! A peer's two outbound lanes (data, control): a sender encodes its item straight into the
//! lane's open frame, and one writer task per lane publishes the frames.
//!
//! Batching needs no timer: a writer publishes as soon as it has something, and everything
//! encoded while it was publishing goes out together in the next frame (up to
//! [`BATCH_BYTES`]). Under light load a message costs one publish; under heavy load many share
//! one.
//!
//! A lane that has been quiet (its writer waiting, nothing published for [`QUIET`]) skips the
//! writer: the sender publishes its frame itself, if async-nats takes it without waiting. A
//! lone ask or reply then costs no hand-off to the writer task; a burst of sends still goes
//! through the writer, which batches it.
//!
//! Why the item is encoded under the lane's lock, into the frame itself, rather than queued as a
//! value for the writer to encode: a queued item needs its own buffer (an allocation, grown by
//! reallocation as it encodes) and a second copy into the frame, and a queue node of its own;
//! at 1 KiB per message those were a third of the sender's time. The lock is held for one
//! envelope and one copy of the body (the body is encoded before, outside it), and the frame's
//! buffer is reused once NATS has written the previous one.

use super::node::{NodeShared, PeerId};
use super::wire::{self, Item};
use crate::loom::lock;
use bytes::{BufMut, Bytes, BytesMut};
use futures::FutureExt;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// A frame is sealed once it holds this much (the next item opens a new one).
pub(crate) const BATCH_BYTES: usize = 64 << 10;
/// The most items in one frame.
const BATCH_ITEMS: u32 = 1024;
/// Room kept in a frame for its header and envelope (names, incarnations, item tags).
pub(crate) const FRAME_SLACK: usize = 512;
/// The least a new frame's buffer reserves: small frames share one allocation size.
const MIN_FRAME: usize = 4 << 10;
/// A lane with no publish for this long publishes a new item from the sender's thread (see
/// the module doc); sooner, the item waits for the writer, which batches. Well under one
/// request/reply round trip through NATS, well over the gap between two sends in a loop.
const QUIET: Duration = Duration::from_micros(20);

/// The lanes to one peer.
pub(crate) struct Outbound {
    data: Arc<Lane>,
    control: Arc<Lane>,
}

impl Outbound {
    /// Encodes `item` into its lane's open frame (never blocks on the network: the writer
    /// publishes it). `size` is the item's encoded size, or close to it (it decides whether
    /// the item still fits the open frame).
    ///
    /// # Errors
    ///
    /// The item did not encode (nothing was written).
    pub(crate) fn push(
        &self,
        node: &NodeShared,
        item: &Item<'_>,
        size: usize,
    ) -> Result<(), rmp_serde::encode::Error> {
        let lane = if item.is_control() {
            &self.control
        } else {
            &self.data
        };
        lane.push(node, item, size)
    }

    /// Stops the writers once they have published what is encoded.
    pub(crate) fn close(&self) {
        for lane in [&self.data, &self.control] {
            lock(&lane.state).closed = true;
            lane.wake.notify_one();
        }
    }
}

/// Starts the writers to `peer`.
pub(crate) fn start(node: &Arc<NodeShared>, peer: &PeerId) -> Outbound {
    let head: Arc<[u8]> =
        wire::frame_head(&node.me.name, node.me.incarnation, peer.incarnation).into();
    let room = node.max_frame.saturating_sub(FRAME_SLACK);
    let lane = |is_control| {
        Arc::new(Lane {
            state: Mutex::new(LaneState {
                open: BytesMut::new(),
                items: 0,
                sealed: VecDeque::new(),
                idle: false,
                closed: false,
                last_publish: Instant::now(),
            }),
            wake: Notify::new(),
            head: head.clone(),
            room,
            subject: node.subject(&peer.name, is_control).into(),
        })
    };
    let (data, control) = (lane(false), lane(true));
    for lane in [&data, &control] {
        tokio::spawn(write(Arc::downgrade(node), lane.clone()));
    }
    Outbound { data, control }
}

/// One lane: the frame being filled and the frames ready to publish, in order.
struct Lane {
    state: Mutex<LaneState>,
    /// Wakes the writer when it waits (`idle`) and something was encoded, or on close.
    wake: Notify,
    /// The bytes every frame of this lane starts with (`wire::frame_head`).
    head: Arc<[u8]>,
    /// The most a frame holds (the node's frame limit, less the slack).
    room: usize,
    subject: async_nats::Subject,
}

struct LaneState {
    /// The open frame: empty, or the head and `items` encoded items.
    open: BytesMut,
    items: u32,
    /// Sealed frames and their item counts, oldest first.
    sealed: VecDeque<(Bytes, u32)>,
    /// The writer found nothing to publish and waits for a wake.
    idle: bool,
    /// The peer is gone: nothing more is accepted; the writer stops once it has published
    /// what was sealed.
    closed: bool,
    /// When a publish last started, as the writer or a sender saw it (a sender publishes
    /// itself only after [`QUIET`]).
    last_publish: Instant,
}

impl Lane {
    fn push(
        &self,
        node: &NodeShared,
        item: &Item<'_>,
        size: usize,
    ) -> Result<(), rmp_serde::encode::Error> {
        let mut state = lock(&self.state);
        if state.closed {
            // A peer just declared down: its waiters have been failed already.
            return Ok(());
        }
        if state.items > 0 && state.open.len() + size > self.room {
            state.seal(self.head.len());
        }
        if state.items == 0 {
            // Reuses the last frame's buffer if NATS is done with it.
            state.open.reserve((self.head.len() + size).max(MIN_FRAME));
            state.open.extend_from_slice(&self.head);
        }
        let mark = state.open.len();
        let mut writer = (&mut state.open).writer();
        if let Err(error) = rmp_serde::encode::write_named(&mut writer, item) {
            state.open.truncate(mark);
            if state.items == 0 {
                state.open.clear();
            }
            return Err(error);
        }
        state.items += 1;
        if state.items >= BATCH_ITEMS || state.open.len() >= BATCH_BYTES {
            state.seal(self.head.len());
        }
        // The writer waits: publish from here if the lane has been quiet, else wake it.
        let wake = std::mem::replace(&mut state.idle, false);
        if wake {
            let now = Instant::now();
            if now.duration_since(state.last_publish) >= QUIET {
                state.last_publish = now;
                state.seal(self.head.len());
                let frames = std::mem::take(&mut state.sealed);
                drop(state);
                self.publish_here(node, frames);
                return Ok(());
            }
        }
        drop(state);
        if wake {
            self.wake.notify_one();
        }
        Ok(())
    }

    /// Publishes `frames` from the sender's thread, holding the lane as its writer would (the
    /// writer waits; items pushed meanwhile queue behind these, so order holds). A frame that
    /// async-nats cannot take at once (its command queue is full) goes back to the writer with
    /// those after it: `publish` is cancel-safe, nothing of a publish that did not complete was
    /// sent.
    fn publish_here(&self, node: &NodeShared, mut frames: VecDeque<(Bytes, u32)>) {
        while let Some((frame, items)) = frames.pop_front() {
            let len = frame.len();
            match node
                .client
                .publish(self.subject.clone(), frame.clone())
                .now_or_never()
            {
                Some(Ok(())) => node.stats.sent(items as usize, len),
                Some(Err(error)) => {
                    node.stats.publish_error();
                    tracing::warn!(subject = %self.subject, %error, items, "a frame could not be published");
                }
                None => {
                    frames.push_front((frame, items));
                    break;
                }
            }
        }
        let mut state = lock(&self.state);
        let handed_back = !frames.is_empty();
        while let Some(frame) = frames.pop_back() {
            state.sealed.push_front(frame);
        }
        if handed_back || state.items > 0 || !state.sealed.is_empty() {
            drop(state);
            self.wake.notify_one();
        } else {
            state.idle = true;
        }
    }
}

impl LaneState {
    /// Closes the open frame, if any, and queues it for the writer.
    fn seal(&mut self, head_len: usize) {
        if self.items == 0 {
            return;
        }
        wire::seal(&mut self.open, head_len, self.items);
        let frame = self.open.split().freeze();
        self.sealed
            .push_back((frame, std::mem::take(&mut self.items)));
    }
}

/// A lane's writer: publishes its frames until the lane closes (or the node is gone).
async fn write(node: Weak<NodeShared>, lane: Arc<Lane>) {
    let mut frames = VecDeque::new();
    loop {
        let closed = {
            let mut state = lock(&lane.state);
            state.seal(lane.head.len());
            std::mem::swap(&mut frames, &mut state.sealed);
            if frames.is_empty() {
                if !state.closed {
                    state.idle = true;
                }
            } else {
                state.last_publish = Instant::now();
            }
            state.closed
        };
        if frames.is_empty() {
            if closed {
                return;
            }
            lane.wake.notified().await;
            continue;
        }
        let Some(node) = node.upgrade() else {
            return;
        };
        for (frame, items) in frames.drain(..) {
            let len = frame.len();
            match node.client.publish(lane.subject.clone(), frame).await {
                Ok(()) => node.stats.sent(items as usize, len),
                Err(error) => {
                    node.stats.publish_error();
                    tracing::warn!(subject = %lane.subject, %error, items, "a frame could not be published");
                }
            }
        }
    }
}

/// An item's approximate encoded size (messages: exact enough to place them in frames).
pub(crate) fn item_size(item: &Item<'_>) -> usize {
    match item {
        Item::Message { body, ty, .. } => body.len() + ty.len() + 48,
        Item::Reply {
            result: Ok(body), ..
        } => body.0.len() + 32,
        Item::Spawn { args, name, .. } => args.len() + name.len() + 48,
        _ => 64,
    }
}
