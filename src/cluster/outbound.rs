//! A peer's outbound lane: a sender encodes its item straight into the lane's open frame, and
//! one writer task per peer publishes the frames, in order, each to the peer's data subject
//! (messages) or control subject (everything else) by the kind of its items.
//!
//! Why one lane for both subjects: OTP orders every signal between two processes (messages,
//! links, monitors, exits, `Down`), and users rely on it: a process that sends its result and
//! then ends is seen to send before its `Down` arrives; a monitor set before the message that
//! stops its target sees the target's real exit, not `NoProc`. Two lanes (one per subject)
//! published independently and let a control item overtake a message or fall behind one. One
//! lane publishes in the order items were pushed; NATS delivers one connection's publishes to a
//! subscriber in that order (source-ordered delivery per publisher), and the receiving node
//! reads both its subjects through one subscription (`inbound.rs`). A frame holds items of one
//! kind: an item of the other kind seals the open frame and opens the next.
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
//!
//! A big body (at least [`LONE_BODY`]) is not copied at all: the sender encodes it behind a gap
//! left for the frame's head and the item's envelope (`wire::Envelope`, the item with its body
//! last), fills the gap, and the buffer itself becomes a frame of its own, queued behind the
//! open frame (which is sealed first, so order holds). At 16 KiB that copy into a frame was the
//! costliest of the sender's three (into memory not yet in cache).
//!
//! # Backlog
//!
//! A lane holds what its senders encoded until async-nats takes it. A fire-and-forget `send`
//! cannot wait, so a sender faster than the network — or any sender while the connection is
//! down and async-nats's own queue is full — would grow the lane without end. The lane counts
//! its *backlog* (the open frame and the sealed frames not yet handed to async-nats, in
//! bytes) and refuses a fire-and-forget message that would take it past the node's
//! [`max_backlog`](super::Cluster::max_backlog) once the backlog has reached it
//! ([`PushError::Backlogged`]; the message is handed back), as a bounded mailbox refuses a
//! local `send`. Everything else is
//! [`Admission::Always`]: a control item (a reply, a `Down`, a link's exit) must not be lost to
//! a flood of messages, and an acked send or an ask waits for its answer, which bounds how
//! many of them one caller has in flight. A sender that would rather wait than be refused
//! waits for [`room`](Outbound::room) first (`RemoteAddr::send_wait`), as Erlang suspends a
//! process that sends to a busy distribution port. The message that reaches the limit is
//! taken, so the backlog passes it by at most one message (and the waiters woken together).

use super::node::{NodeShared, PeerId};
use super::wire::{self, Item};
use crate::loom::lock;
use bytes::{BufMut, Bytes, BytesMut};
use futures::FutureExt;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// A frame is sealed before an item would take it past this, and once it holds this much (an
/// item bigger than this is a frame of its own).
///
/// Why 32 KiB, not more: a frame must reach the far side in one read. async-nats reads into a
/// buffer of at most 64 KiB (`read_buffer_capacity` is a `u16`) and nats-server's read buffer
/// stops growing at 64 KiB, so a frame near 64 KiB with its protocol line arrives in pieces
/// that both copy into a grown buffer (`BytesMut::reserve`, the server's `msgBuf`). Measured
/// (`--bench send/`, 2 cores, frames sealed before passing the cap): 1 KiB sends kept 0.70–0.73
/// of raw async-nats at 64 KiB, 0.73 at 48 KiB, 0.79–0.83 at 32 KiB, 0.76–0.80 at 24 KiB.
pub(crate) const BATCH_BYTES: usize = 32 << 10;
/// A body this big is encoded straight into a frame of its own (a *lone* frame,
/// [`Outbound::push_encoded`]): at most one more such item would fit its frame, and a copy of
/// that many bytes into the frame costs more than the publish it would share.
pub(crate) const LONE_BODY: usize = BATCH_BYTES / 2;
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

/// Why an item was not queued (nothing of it was written).
#[derive(Debug)]
pub(crate) enum PushError {
    /// It did not encode.
    Encode(rmp_serde::encode::Error),
    /// Its frame would pass the node's frame limit, which the peer would reject: it encodes to
    /// `size` bytes, over `limit` (the frame limit less the frame's head).
    TooLarge { size: usize, limit: usize },
    /// The lane is closed: its node is leaving (`Node::leave`) or its peer was declared down.
    Closed,
    /// A fire-and-forget message would take the lane's backlog past `limit` bytes (see the
    /// module doc, "Backlog").
    Backlogged { limit: usize },
}

/// Whether a push may be refused for the lane's backlog (see the module doc, "Backlog").
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Admission {
    /// Refused ([`PushError::Backlogged`]) if it would take the backlog past the limit: a
    /// fire-and-forget message.
    Bounded,
    /// Always taken: a control item, a message whose sender waits for an answer, or one whose
    /// sender waited for [`room`](Outbound::room).
    Always,
}

/// The lane to one peer.
pub(crate) struct Outbound {
    lane: Arc<Lane>,
}

impl Outbound {
    /// Encodes `item` into the lane's open frame (never blocks on the network: the writer
    /// publishes it). `size` is the item's encoded size, or close to it (it decides whether
    /// the item still fits the open frame).
    ///
    /// # Errors
    ///
    /// The item did not encode, or would pass the frame limit, or the lane is closed (nothing
    /// was written); or, [`Admission::Bounded`], it would take the backlog past its limit.
    pub(crate) fn push(
        &self,
        node: &NodeShared,
        item: &Item<'_>,
        size: usize,
        admission: Admission,
    ) -> Result<(), PushError> {
        self.lane.push(node, item, size, admission)
    }

    /// Queues an item whose body is already encoded in `buffer`, behind `gap` bytes left for
    /// the frame's head and the item's `envelope` (`gap` must be
    /// [`frame_head_len`](wire::frame_head_len) of this node's name plus
    /// [`envelope.len()`](wire::Envelope::len)). A body of at least [`LONE_BODY`] becomes a
    /// frame of its own with no copy: the head and envelope are written into the gap and the
    /// buffer itself is published (`buffer` is left empty, with room for as much). A smaller
    /// one is copied into the open frame as [`push`](Self::push) does.
    ///
    /// # Errors
    ///
    /// As [`push`](Self::push) (`TooLarge`: the body is over the frame limit less `gap`);
    /// nothing was queued.
    pub(crate) fn push_encoded(
        &self,
        node: &NodeShared,
        envelope: &wire::Envelope<'_>,
        buffer: &mut Vec<u8>,
        gap: usize,
        admission: Admission,
    ) -> Result<(), PushError> {
        debug_assert_eq!(
            gap,
            self.lane.head.len() + envelope.len(),
            "the head and envelope"
        );
        let body = buffer.len() - gap;
        // Exact: the item's frame is at most its head, its envelope and its body.
        let limit = self.lane.max_frame.saturating_sub(gap);
        if body > limit {
            return Err(PushError::TooLarge { size: body, limit });
        }
        let (true, Ok(body_len)) = (body >= LONE_BODY, u32::try_from(body)) else {
            let item = envelope.item(&buffer[gap..]);
            return self.lane.push(node, &item, item_size(&item), admission);
        };
        wire::write_lone_prefix(&mut buffer[..gap], &self.lane.head, envelope, body_len);
        // The buffer goes with its frame; its successor is sized for a frame like this one
        // (not the old capacity: after one huge message every lone frame would carry it).
        let next = Vec::with_capacity(buffer.len());
        let frame = Bytes::from(std::mem::replace(buffer, next));
        self.lane.push_lone(
            node,
            Sealed {
                frame,
                items: 1,
                kind: Kind::of_envelope(envelope),
            },
            admission,
        )
    }

    /// Stops the writer once it has published what is encoded (and wakes whoever waits for
    /// [`room`](Self::room): their push will find the lane closed).
    pub(crate) fn close(&self) {
        lock(&self.lane.state).closed = true;
        self.lane.wake.notify_one();
        self.lane.room.notify_waiters();
    }

    /// Resolves once the lane's backlog is under its limit (or the lane is closed): a sender
    /// that then pushes with [`Admission::Always`] is not refused. Several waiters woken at
    /// once may together pass the limit by their messages.
    pub(crate) fn room(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        until(
            self.lane.clone(),
            |lane| &lane.room,
            |lane, state| {
                if state.closed || state.finished || state.backlog() < lane.max_backlog {
                    return true;
                }
                state.room_wanted = true;
                false
            },
        )
    }

    /// The bytes the lane holds that async-nats has not taken yet.
    pub(crate) fn backlog(&self) -> usize {
        lock(&self.lane.state).backlog()
    }

    /// [`close`](Self::close)s the lane and resolves once its writer has handed everything
    /// encoded before to async-nats (and stopped), or has gone with its node: a node that
    /// leaves publishes its last answers before it deletes its membership entry
    /// (`Node::leave`).
    pub(crate) fn close_and_drain(&self) -> impl std::future::Future<Output = ()> + 'static {
        self.close();
        until(
            self.lane.clone(),
            |lane| &lane.finished,
            |_, state| state.finished,
        )
    }
}

/// Resolves once `ready` holds, checked under the lane's lock each time `notify` is told (the
/// wait is enabled before the check: a notification in between is not missed).
async fn until(
    lane: Arc<Lane>,
    notify: fn(&Lane) -> &Notify,
    ready: fn(&Lane, &mut LaneState) -> bool,
) {
    loop {
        let told = notify(&lane).notified();
        let mut told = std::pin::pin!(told);
        told.as_mut().enable();
        if ready(&lane, &mut lock(&lane.state)) {
            return;
        }
        told.await;
    }
}

/// Starts the writer to `peer`: the lane whose frames' heads say `to` (its incarnation and
/// the counts of `severance.rs`, fixed for the lane's life: a change of either replaces the
/// peer and its lane).
pub(crate) fn start(node: &Arc<NodeShared>, peer: &PeerId, to: wire::Session) -> Outbound {
    let lane = Arc::new(Lane {
        state: Mutex::new(LaneState {
            open: BytesMut::new(),
            items: 0,
            open_kind: Kind::Data,
            last_len: 0,
            sealed: VecDeque::new(),
            queued: 0,
            room_wanted: false,
            idle: false,
            closed: false,
            finished: false,
            last_publish: Instant::now(),
        }),
        wake: Notify::new(),
        finished: Notify::new(),
        room: Notify::new(),
        head: wire::frame_head(&node.me.name, node.me.incarnation, to).into(),
        batch: node.max_frame.saturating_sub(FRAME_SLACK).min(BATCH_BYTES),
        max_frame: node.max_frame,
        max_backlog: node.max_backlog,
        subjects: [
            node.subject(&peer.name, false).into(),
            node.subject(&peer.name, true).into(),
        ],
        unreached: node.unreached_subject(peer).into(),
    });
    node.runtime
        .spawn(write(Arc::downgrade(node), lane.clone()));
    Outbound { lane }
}

/// Which of the peer's subjects a frame goes to: its items are all of one kind.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Data = 0,
    Control = 1,
}

impl Kind {
    fn of(item: &Item<'_>) -> Kind {
        if item.is_control() {
            Kind::Control
        } else {
            Kind::Data
        }
    }

    fn of_envelope(envelope: &wire::Envelope<'_>) -> Kind {
        match envelope {
            wire::Envelope::Message { .. } => Kind::Data,
            wire::Envelope::Reply { .. } => Kind::Control,
        }
    }
}

/// A frame ready to publish.
struct Sealed {
    frame: Bytes,
    items: u32,
    kind: Kind,
}

/// The lane: the frame being filled and the frames ready to publish, in order.
struct Lane {
    state: Mutex<LaneState>,
    /// Wakes the writer when it waits (`idle`) and something was encoded, or on close.
    wake: Notify,
    /// Told when the writer stops (`LaneState::finished`).
    finished: Notify,
    /// Told when the backlog falls under its limit while someone waits for
    /// [`room`](Outbound::room) (`LaneState::room_wanted`), and on close.
    room: Notify,
    /// The bytes every frame of this lane starts with (`wire::frame_head`).
    head: Arc<[u8]>,
    /// The most a frame holds: [`BATCH_BYTES`], or less under a smaller frame limit (the
    /// node's, less the slack).
    batch: usize,
    /// The node's frame limit: no frame of this lane is longer.
    max_frame: usize,
    /// The node's backlog limit ([`Admission::Bounded`]).
    max_backlog: usize,
    /// The peer's data and control subjects, by [`Kind`].
    subjects: [async_nats::Subject; 2],
    /// Every frame's reply subject: NATS answers it "no responders" if the peer's subscription
    /// is gone, and the peer is declared down (`NodeShared::peer_unreached`).
    unreached: async_nats::Subject,
}

struct LaneState {
    /// The open frame: empty, or the head and `items` encoded items of kind `open_kind`.
    open: BytesMut,
    items: u32,
    open_kind: Kind,
    /// The length of the last frame sealed: a new frame reserves that much, so a frame filling
    /// in a burst is not grown (reallocated and copied) item by item.
    last_len: usize,
    /// Sealed frames, oldest first.
    sealed: VecDeque<Sealed>,
    /// The bytes of the frames sealed and not yet handed to async-nats (in `sealed`, or held by
    /// the writer or a sender publishing): with the open frame, the lane's backlog.
    queued: usize,
    /// Someone waits for [`room`](Outbound::room): the writer tells [`Lane::room`] when the
    /// backlog falls under the limit.
    room_wanted: bool,
    /// The writer found nothing to publish and waits for a wake.
    idle: bool,
    /// The peer is gone: nothing more is accepted; the writer stops once it has published
    /// what was sealed.
    closed: bool,
    /// The writer has stopped: closed and published, or its node gone.
    finished: bool,
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
        admission: Admission,
    ) -> Result<(), PushError> {
        let kind = Kind::of(item);
        let mut state = lock(&self.state);
        if state.closed {
            return Err(PushError::Closed);
        }
        self.admit(&state, admission)?;
        if state.items > 0 && (state.open_kind != kind || state.open.len() + size > self.batch) {
            state.seal(self.head.len());
        }
        if state.items == 0 {
            // Reuses the last frame's buffer if NATS is done with it.
            let reserve = (self.head.len() + size).max(MIN_FRAME).max(state.last_len);
            state.open.reserve(reserve);
            state.open.extend_from_slice(&self.head);
            state.open_kind = kind;
        }
        let mark = state.open.len();
        let mut writer = (&mut state.open).writer();
        let written = rmp_serde::encode::write_named(&mut writer, item);
        let encoded = state.open.len() - mark;
        let refused = match written {
            Err(error) => Some(PushError::Encode(error)),
            // Alone in its frame it would still pass the limit.
            Ok(()) if self.head.len() + encoded > self.max_frame => Some(PushError::TooLarge {
                size: encoded,
                limit: self.max_frame.saturating_sub(self.head.len()),
            }),
            Ok(()) => None,
        };
        if let Some(refused) = refused {
            state.open.truncate(mark);
            if state.items == 0 {
                state.open.clear();
            }
            return Err(refused);
        }
        state.items += 1;
        if state.items >= BATCH_ITEMS || state.open.len() >= self.batch {
            state.seal(self.head.len());
        }
        self.pushed(node, state);
        Ok(())
    }

    /// Queues a lone frame (`Outbound::push_encoded`) behind what the lane holds.
    fn push_lone(
        &self,
        node: &NodeShared,
        frame: Sealed,
        admission: Admission,
    ) -> Result<(), PushError> {
        let mut state = lock(&self.state);
        if state.closed {
            return Err(PushError::Closed);
        }
        self.admit(&state, admission)?;
        state.seal(self.head.len());
        state.queued += frame.frame.len();
        state.sealed.push_back(frame);
        self.pushed(node, state);
        Ok(())
    }

    /// Refuses a [`Admission::Bounded`] item once the backlog has reached the limit: the
    /// condition [`room`](Outbound::room) waits out, so a `send` is refused exactly when a
    /// `send_wait` would wait. (The item that reaches it is taken: the backlog passes the limit
    /// by at most one item, and an empty lane takes any.)
    fn admit(&self, state: &LaneState, admission: Admission) -> Result<(), PushError> {
        if admission == Admission::Bounded && state.backlog() >= self.max_backlog {
            return Err(PushError::Backlogged {
                limit: self.max_backlog,
            });
        }
        Ok(())
    }

    /// `len` bytes of frames were handed to async-nats (or failed to be): off the backlog, and
    /// whoever waits for room is told once it is under the limit.
    fn published(&self, state: &mut LaneState, len: usize) -> bool {
        state.queued = state.queued.saturating_sub(len);
        if state.room_wanted && state.backlog() < self.max_backlog {
            state.room_wanted = false;
            return true;
        }
        false
    }

    /// After a push: if the writer waits, publish from here when the lane has been quiet and
    /// holds one frame (more means a burst, the writer's job), else wake the writer.
    fn pushed(&self, node: &NodeShared, mut state: MutexGuard<'_, LaneState>) {
        let wake = std::mem::replace(&mut state.idle, false);
        let one_frame = match state.sealed.len() {
            0 => state.items > 0,
            1 => state.items == 0,
            _ => false,
        };
        if wake && one_frame {
            let now = Instant::now();
            if now.duration_since(state.last_publish) >= QUIET {
                state.last_publish = now;
                let frame = match state.sealed.pop_front() {
                    Some(frame) => frame,
                    None => state.take_open(self.head.len()),
                };
                drop(state);
                self.publish_here(node, frame);
                return;
            }
        }
        drop(state);
        if wake {
            self.wake.notify_one();
        }
    }

    /// Publishes `frame` from the sender's thread, holding the lane as its writer would (the
    /// writer waits; items pushed meanwhile queue behind it, so order holds). If async-nats
    /// cannot take it at once (its command queue is full), the frame goes back to the front of
    /// the lane for the writer: `publish` is cancel-safe, nothing of a publish that did not
    /// complete was sent.
    fn publish_here(&self, node: &NodeShared, sealed: Sealed) {
        let subject = &self.subjects[sealed.kind as usize];
        let len = sealed.frame.len();
        let handed_back = match node
            .client
            .publish_with_reply(
                subject.clone(),
                self.unreached.clone(),
                sealed.frame.clone(),
            )
            .now_or_never()
        {
            Some(Ok(())) => {
                node.stats.sent(sealed.items as usize, sealed.frame.len());
                None
            }
            Some(Err(error)) => {
                node.stats.publish_error();
                tracing::warn!(%subject, %error, items = sealed.items, "a frame could not be published");
                None
            }
            None => Some(sealed),
        };
        let mut state = lock(&self.state);
        let room = handed_back.is_none() && self.published(&mut state, len);
        match handed_back {
            Some(sealed) if state.finished => {
                // The lane closed while we held it (`Node::leave`, or its peer declared down)
                // and its writer has stopped: pushed back, the frame would never be written.
                drop(state);
                self.publish_late(node, sealed);
            }
            handed_back => {
                if let Some(sealed) = handed_back {
                    state.sealed.push_front(sealed);
                }
                if state.items > 0 || !state.sealed.is_empty() {
                    drop(state);
                    self.wake.notify_one();
                } else {
                    state.idle = true;
                    drop(state);
                }
            }
        }
        // After the unlock: a woken waiter's next step is to lock the lane.
        if room {
            self.room.notify_waiters();
        }
    }
}

impl Lane {
    /// Publishes a frame its stopped writer can no longer take, from a task of its own: its
    /// messages were accepted before the lane closed, and a peer reads a departed node's last
    /// frames (their messages are delivered). Counted as the writer counts.
    fn publish_late(&self, node: &NodeShared, sealed: Sealed) {
        let subject = self.subjects[sealed.kind as usize].clone();
        let (client, stats, reply) = (
            node.client.clone(),
            node.stats.clone(),
            self.unreached.clone(),
        );
        node.runtime.spawn(async move {
            let len = sealed.frame.len();
            match client
                .publish_with_reply(subject.clone(), reply, sealed.frame)
                .await
            {
                Ok(()) => stats.sent(sealed.items as usize, len),
                Err(error) => {
                    stats.publish_error();
                    let items = sealed.items;
                    tracing::warn!(%subject, %error, items, "a frame could not be published");
                }
            }
        });
    }
}

impl LaneState {
    /// The bytes encoded and not yet handed to async-nats: the open frame and the frames
    /// sealed ([`queued`](Self::queued)).
    fn backlog(&self) -> usize {
        self.queued + self.open.len()
    }

    /// Closes the open frame, if any, and queues it for the writer.
    fn seal(&mut self, head_len: usize) {
        if self.items > 0 {
            let sealed = self.take_open(head_len);
            self.sealed.push_back(sealed);
        }
    }

    /// Closes the open frame (it holds an item) and returns it.
    fn take_open(&mut self, head_len: usize) -> Sealed {
        wire::seal(&mut self.open, head_len, self.items);
        self.last_len = self.open.len();
        self.queued += self.open.len();
        Sealed {
            frame: self.open.split().freeze(),
            items: std::mem::take(&mut self.items),
            kind: self.open_kind,
        }
    }
}

/// Marks its lane's writer stopped however it stops (returned, or dropped with its runtime).
struct Finished(Arc<Lane>);

impl Drop for Finished {
    fn drop(&mut self) {
        lock(&self.0.state).finished = true;
        self.0.finished.notify_waiters();
        // A writer gone with its node leaves no one to make room.
        self.0.room.notify_waiters();
    }
}

/// The lane's writer: publishes its frames until the lane closes (or the node is gone).
async fn write(node: Weak<NodeShared>, lane: Arc<Lane>) {
    let _finished = Finished(lane.clone());
    let mut frames = VecDeque::new();
    loop {
        let closed = {
            let mut state = lock(&lane.state);
            state.seal(lane.head.len());
            std::mem::swap(&mut frames, &mut state.sealed);
            if frames.is_empty() {
                if !state.closed {
                    state.idle = true;
                } else {
                    // Set under the lock that saw nothing left (and again, with the
                    // notification, by `_finished`): a sender publishing from its thread
                    // (`publish_here`) that must hand its frame back reads it under this same
                    // lock, so it either queued the frame before this check or sees the writer
                    // gone and publishes the frame itself.
                    state.finished = true;
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
        for Sealed { frame, items, kind } in frames.drain(..) {
            let subject = &lane.subjects[kind as usize];
            let len = frame.len();
            let reply = lane.unreached.clone();
            match node
                .client
                .publish_with_reply(subject.clone(), reply, frame)
                .await
            {
                Ok(()) => node.stats.sent(items as usize, len),
                Err(error) => {
                    node.stats.publish_error();
                    tracing::warn!(%subject, %error, items, "a frame could not be published");
                }
            }
            // Off the backlog frame by frame, not once the batch is out: a batch can be all of
            // it, and senders waiting for room would wait for the last frame.
            let room = lane.published(&mut lock(&lane.state), len);
            if room {
                lane.room.notify_waiters();
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
