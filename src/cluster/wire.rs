//! The wire format: frames of MessagePack items, one frame per NATS publish.
//!
//! A frame is `[version, codec] ++ body`: byte 0 is [`FRAME_VERSION`], byte 1 the codec
//! ([`CODEC_MSGPACK`]: MessagePack with named fields, `rmp-serde`), the rest the encoded
//! [`Frame`]. A frame carries several items for one destination node (batching under load: senders
//! encode their items one after the other into the lane's open frame, `outbound.rs`), in the
//! order they were sent, so the order of messages from one node to another is kept. A frame is
//! written item by item behind a [`frame_head`] whose item count is filled in last ([`seal`]).
//!
//! A user message travels as an item naming its registered type and holding its own encoding
//! (`body`, a binary blob), so a node decodes only what it registered: anything else is
//! rejected, counted and traced (`inbound.rs`), never a panic.

use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// The frame layout version, byte 0 of every frame.
pub(crate) const FRAME_VERSION: u8 = 1;
/// The codec of the frame's body, byte 1: MessagePack, named fields.
pub(crate) const CODEC_MSGPACK: u8 = 1;

/// One publish: who sends (name and incarnation), to which incarnation of the receiver, and
/// the items.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Frame<'a> {
    #[serde(borrow)]
    pub(crate) from: Cow<'a, str>,
    pub(crate) from_incarnation: u64,
    /// The receiver's incarnation as the sender knows it: a frame for another life of the
    /// receiving node is answered `NoProc` item by item.
    pub(crate) to_incarnation: u64,
    /// How many times the sender has declared the receiver (at `to_incarnation`) down, and how
    /// many times the sender knows the receiver declared it down (`severance.rs`). Absent in
    /// a frame from a node that predates them: zero.
    #[serde(default)]
    pub(crate) severed: u64,
    #[serde(default)]
    pub(crate) seen: u64,
    #[serde(borrow)]
    pub(crate) items: Vec<Item<'a>>,
}

/// What crosses the wire.
/// Received, a message's type name and body borrow the frame's bytes (no copy until the body
/// is decoded into its type); sent, they borrow the sender's (the item is encoded straight
/// into its frame, `outbound.rs`).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Item<'a> {
    /// A message of registered type `ty` to local process `to` (raw PID). `ack`: the sender
    /// waits for an [`Item::Ack`] (`send_acked`: always; an ask: only if the message is
    /// refused — otherwise its reply is the answer, one message fewer on the wire).
    Message {
        to: u64,
        #[serde(borrow)]
        ty: Cow<'a, str>,
        #[serde(borrow, with = "serde_bytes")]
        body: Cow<'a, [u8]>,
        ack: Option<Ack>,
    },
    /// The outcome of delivering an acked message.
    Ack {
        id: u64,
        result: Result<(), Refusal>,
    },
    /// The answer to ask `ask`: the reply's encoding, or why there is none.
    Reply {
        ask: u64,
        #[serde(borrow)]
        result: Result<Body<'a>, Refusal>,
    },
    /// Spawn the registered body `name` with `args` (its argument's encoding); `join`: answer
    /// its outcome as [`Item::Joined`] with this id.
    Spawn {
        id: u64,
        name: String,
        #[serde(with = "serde_bytes")]
        args: Vec<u8>,
        #[serde(default)]
        join: Option<u64>,
    },
    /// A joined spawn's outcome: its output's encoding, or its exit reason.
    Joined {
        id: u64,
        result: Result<serde_bytes::ByteBuf, WireReason>,
    },
    /// The outcome of a spawn: the new process's raw PID, or why not.
    Spawned {
        id: u64,
        result: Result<u64, Refusal>,
    },
    /// Watch local process `target`: answer with one [`Item::Down`] for monitor `id`.
    Monitor { id: u64, target: u64 },
    /// Forget monitor `id`.
    Demonitor { id: u64 },
    /// Monitor `id`'s target ended.
    Down { id: u64, reason: WireReason },
    /// Link the sender's process `from` and the receiver's process `to`: the receiver watches
    /// `to` and answers its end with an [`Item::LinkExit`].
    Link { from: u64, to: u64 },
    /// Forget the link between the sender's `from` and the receiver's `to`.
    Unlink { from: u64, to: u64 },
    /// The sender's process `from`, linked to the receiver's `to`, ended with `reason`.
    LinkExit {
        from: u64,
        to: u64,
        reason: WireReason,
    },
    /// Ask the receiver's process `target` to finish (`kill: false`, it ends `Shutdown`) or
    /// terminate it (`kill: true`, `Killed`).
    Stop { target: u64, kill: bool },
    /// Which of the receiver's processes is registered as `name`: answered with an
    /// [`Item::Located`] (`Node::whereis`).
    Whereis {
        id: u64,
        #[serde(borrow)]
        name: Cow<'a, str>,
    },
    /// The answer to [`Item::Whereis`] `id`: the named process's raw PID (`None`: no live
    /// process holds the name), or why there is no answer.
    Located {
        id: u64,
        result: Result<Option<u64>, Refusal>,
    },
}

/// An encoded value inside an item (a reply), borrowed from the frame it is read from or
/// from the scratch buffer it was encoded into: one binary blob on the wire.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Body<'a>(#[serde(borrow, with = "serde_bytes")] pub(crate) Cow<'a, [u8]>);

/// When the receiver of a message answers with an [`Item::Ack`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Ack {
    /// Always: delivered or refused (`send_acked`).
    Always(u64),
    /// Only if refused (an ask: its reply says it was delivered).
    Refused(u64),
}

impl Item<'_> {
    /// Items that go on the control subject (spawns, monitors, answers); messages go on the
    /// data subject.
    pub(crate) fn is_control(&self) -> bool {
        !matches!(self, Item::Message { .. })
    }
}

/// Why a remote operation was refused, as the receiving node says it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Refusal {
    /// No live process with that PID.
    NotFound,
    /// The process is finishing.
    Closed,
    /// Its mailbox is full.
    MailboxFull,
    /// The PID belongs to another incarnation of the node.
    NoProc,
    /// The receiving node did not register the message type, or the spawnable name.
    Unregistered(String),
    /// The bytes did not decode as the registered type.
    Decode(String),
    /// The process declared message type `takes`, not `sent`.
    WrongType { takes: String, sent: String },
    /// The reply port was dropped unanswered.
    NoReply,
    /// A spawn failed: `init`'s error (its text), a refused spawn.
    SpawnInit(String),
    /// A spawn failed: `init` panicked.
    SpawnPanicked(String),
    /// A spawn failed: the scheduler is shutting down.
    ShuttingDown,
    /// A spawn failed: the process limit.
    Limit(u64),
    /// The node could not be reached (said by the sending side of a dead or unknown node).
    NoConnection,
    /// The answer would not fit a frame: it encodes to `size` bytes, over `limit`.
    TooLarge { size: u64, limit: u64 },
    /// A fire-and-forget message would take the lane to its node past `limit` bytes unsent
    /// (said by the sending side only, as `NoConnection`: never on the wire).
    Backlogged { limit: u64 },
}

/// An [`ExitReason`](crate::supervision::ExitReason) on the wire (errors travel as their text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum WireReason {
    Normal,
    Failed(String),
    Panicked(String),
    Killed,
    Shutdown,
    NoProc,
    NoConnection,
}

impl WireReason {
    /// The reason `pid` ended with, for the wire. A `Failed` reason's error travels as its
    /// text: its `Display` is user code, contained (`process/contain.rs`) so that it cannot
    /// end the cluster task sending it.
    pub(crate) fn from_reason(
        pid: crate::process::Pid,
        reason: &crate::process::exit::ExitReason,
    ) -> WireReason {
        use crate::process::exit::ExitReason as R;
        match reason {
            R::Normal => WireReason::Normal,
            R::Failed(error) => WireReason::Failed(
                crate::process::display_contained(&**error, Some(pid)).to_string(),
            ),
            R::Panicked(message) => WireReason::Panicked(message.to_string()),
            R::Killed => WireReason::Killed,
            R::Shutdown => WireReason::Shutdown,
            R::NoProc => WireReason::NoProc,
            R::NoConnection => WireReason::NoConnection,
        }
    }

    pub(crate) fn into_reason(self) -> crate::process::exit::ExitReason {
        use crate::process::exit::ExitReason as R;
        match self {
            WireReason::Normal => R::Normal,
            WireReason::Failed(text) => R::failed(text),
            WireReason::Panicked(text) => R::Panicked(text.into()),
            WireReason::Killed => R::Killed,
            WireReason::Shutdown => R::Shutdown,
            WireReason::NoProc => R::NoProc,
            WireReason::NoConnection => R::NoConnection,
        }
    }
}

/// Why a received frame was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Rejected {
    #[error("frame of {size} bytes over the limit of {limit}")]
    Oversized { size: usize, limit: usize },
    #[error("frame version {0} (this node speaks {FRAME_VERSION})")]
    Version(u8),
    #[error("frame codec {0} (this node speaks {CODEC_MSGPACK})")]
    Codec(u8),
    #[error("malformed frame: {0}")]
    Malformed(String),
}

/// Encodes `frame` with its header in one piece (the reference the lanes' frames, written
/// item by item behind a [`frame_head`], are tested against).
#[cfg(test)]
pub(crate) fn encode(
    frame: &Frame<'_>,
    capacity: usize,
) -> Result<Vec<u8>, rmp_serde::encode::Error> {
    let mut bytes = Vec::with_capacity(capacity);
    bytes.extend_from_slice(&[FRAME_VERSION, CODEC_MSGPACK]);
    rmp_serde::encode::write_named(&mut bytes, frame)?;
    Ok(bytes)
}

/// The frame field that holds the items: the last one, so a frame can be written item by item.
const ITEMS_FIELD: &str = "items";
/// A msgpack `array 32` marker: the item count is patched in when the frame is sealed.
const ARRAY32: u8 = 0xdd;

/// The bytes every frame from `from` to `to_incarnation` starts with: the header bytes and a
/// [`Frame`] map up to its item array, whose count (4 bytes, last) [`seal`] fills in. Items
/// encoded one after the other behind it make a frame that [`decode`] reads as a [`Frame`]
/// (a struct decodes from a map with its fields by name, in any order, integers of any
/// width).
pub(crate) fn frame_head(from: &str, from_incarnation: u64, to: Session) -> Vec<u8> {
    let mut head = Vec::new();
    write_head(&mut head, from, from_incarnation, to);
    head
}

/// What a frame's head says of its receiver: its incarnation, and the counts of `severance.rs`
/// ([`Frame::severed`], [`Frame::seen`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Session {
    pub(crate) incarnation: u64,
    pub(crate) severed: u64,
    pub(crate) seen: u64,
}

/// The length of every [`frame_head`] from a node named `from`.
pub(crate) fn frame_head_len(from: &str) -> usize {
    let mut count = Count(0);
    write_head(&mut count, from, 0, Session::default());
    count.0
}

fn write_head(out: &mut impl Out, from: &str, from_incarnation: u64, to: Session) {
    out.put(&[FRAME_VERSION, CODEC_MSGPACK, FIXMAP | 6]);
    write_str(out, "from");
    write_str(out, from);
    write_str(out, "from_incarnation");
    write_u64(out, from_incarnation);
    write_str(out, "to_incarnation");
    write_u64(out, to.incarnation);
    write_str(out, "severed");
    write_u64(out, to.severed);
    write_str(out, "seen");
    write_u64(out, to.seen);
    write_str(out, ITEMS_FIELD);
    out.put(&[ARRAY32, 0, 0, 0, 0]);
}

/// Where the hand-written msgpack goes: a buffer, or a [`Count`] of its bytes (so a length is
/// computed by the very code that writes, never by a second description of it).
trait Out {
    fn put(&mut self, bytes: &[u8]);
}

impl Out for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Fills a slice from its start (a lone frame's gap, [`write_lone_prefix`]).
struct Fill<'a>(&'a mut [u8]);

impl Out for Fill<'_> {
    fn put(&mut self, bytes: &[u8]) {
        let (filled, rest) = std::mem::take(&mut self.0).split_at_mut(bytes.len());
        filled.copy_from_slice(bytes);
        self.0 = rest;
    }
}

/// Writes a lone frame's head (`head`, sealed with one item) and `envelope` into `gap`, the
/// bytes in front of its `body_len`-byte body; `gap` is exactly as long as the two.
pub(crate) fn write_lone_prefix(
    gap: &mut [u8],
    head: &[u8],
    envelope: &Envelope<'_>,
    body_len: u32,
) {
    let mut fill = Fill(&mut *gap);
    fill.put(head);
    envelope.write_to(&mut fill, body_len);
    debug_assert!(fill.0.is_empty(), "the gap is the head and the envelope");
    seal(gap, head.len(), 1);
}

/// Counts what would be written.
struct Count(usize);

impl Out for Count {
    fn put(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }
}

/// msgpack markers written by hand (the spec's names).
const FIXMAP: u8 = 0x80;
const STR8: u8 = 0xd9;
const STR16: u8 = 0xda;
const STR32: u8 = 0xdb;
const UINT64: u8 = 0xcf;
const NIL: u8 = 0xc0;
const BIN32: u8 = 0xc6;

fn write_str(out: &mut impl Out, text: &str) {
    let len = text.len();
    if let Ok(len) = u8::try_from(len) {
        out.put(&[STR8, len]);
    } else if let Ok(len) = u16::try_from(len) {
        out.put(&[STR16]);
        out.put(&len.to_be_bytes());
    } else {
        out.put(&[STR32]);
        out.put(&(len as u32).to_be_bytes());
    }
    out.put(text.as_bytes());
}

/// An enum variant as serde writes it in MessagePack: a one-entry map from its name to its
/// value, which the caller writes next.
fn write_variant(out: &mut impl Out, name: &str) {
    out.put(&[FIXMAP | 1]);
    write_str(out, name);
}

fn write_u64(out: &mut impl Out, value: u64) {
    out.put(&[UINT64]);
    out.put(&value.to_be_bytes());
}

/// An item, up to its body, for a body encoded in place behind it: a frame whose body was
/// encoded straight into its buffer, after a gap the envelope and the frame's head are written
/// into (`outbound.rs`, a lone frame). Written by hand so that the body comes last: the bytes
/// read as the [`Item`] serde writes (a struct variant is a one-entry map of its name to a map
/// of its fields, which decodes in any field order), with the body as a `bin 32`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Envelope<'a> {
    /// [`Item::Message`] to `to`, of type `ty`.
    Message {
        to: u64,
        ty: &'a str,
        ack: Option<Ack>,
    },
    /// [`Item::Reply`] to ask `ask`, answered (`Ok`).
    Reply { ask: u64 },
}

impl<'a> Envelope<'a> {
    /// The bytes the envelope takes in front of its body ([`write_lone_prefix`]).
    pub(crate) fn len(&self) -> usize {
        let mut count = Count(0);
        self.write_to(&mut count, 0);
        count.0
    }

    /// Writes the item up to its body, which is `body_len` bytes and comes next.
    #[cfg(test)]
    pub(crate) fn write(&self, out: &mut Vec<u8>, body_len: u32) {
        self.write_to(out, body_len);
    }

    fn write_to(&self, out: &mut impl Out, body_len: u32) {
        match *self {
            Envelope::Message { to, ty, ack } => {
                write_variant(out, "Message");
                out.put(&[FIXMAP | 4]);
                write_str(out, "to");
                write_u64(out, to);
                write_str(out, "ty");
                write_str(out, ty);
                write_str(out, "ack");
                match ack {
                    None => out.put(&[NIL]),
                    Some(Ack::Always(id)) => {
                        write_variant(out, "Always");
                        write_u64(out, id);
                    }
                    Some(Ack::Refused(id)) => {
                        write_variant(out, "Refused");
                        write_u64(out, id);
                    }
                }
                write_str(out, "body");
            }
            Envelope::Reply { ask } => {
                write_variant(out, "Reply");
                out.put(&[FIXMAP | 2]);
                write_str(out, "ask");
                write_u64(out, ask);
                write_str(out, "result");
                write_variant(out, "Ok");
            }
        }
        out.put(&[BIN32]);
        out.put(&body_len.to_be_bytes());
    }

    /// The item with `body` (the batched path: the item is encoded into a shared frame).
    pub(crate) fn item<'b>(&self, body: &'b [u8]) -> Item<'b>
    where
        'a: 'b,
    {
        match *self {
            Envelope::Message { to, ty, ack } => Item::Message {
                to,
                ty: Cow::Borrowed(ty),
                body: Cow::Borrowed(body),
                ack,
            },
            Envelope::Reply { ask } => Item::Reply {
                ask,
                result: Ok(Body(Cow::Borrowed(body))),
            },
        }
    }
}

/// Fills in the item count of a frame that starts with a [`frame_head`].
pub(crate) fn seal(frame: &mut [u8], head_len: usize, items: u32) {
    frame[head_len - 4..head_len].copy_from_slice(&items.to_be_bytes());
}

/// How deep a frame's or a membership entry's own MessagePack may nest. Neither nests deeper
/// than about six levels (a frame, its items, an item, a reason, ...: user values travel as
/// binary blobs, checked by `nesting.rs` before their own decode); rmp-serde's own bound is
/// 1 024, and serde recurses once a level — skipping an unknown field too — with kilobytes of
/// stack a level in a debug build: a hostile frame nested 1 023 deep in a field nobody reads
/// overflowed a tokio worker's stack and aborted the process (a black-box review).
pub(crate) const MAX_DEPTH: usize = 32;

/// Decodes `bytes` — a frame's body or a membership entry, never a user's value — nested at
/// most [`MAX_DEPTH`] deep.
pub(crate) fn from_shallow<'de, T: Deserialize<'de>>(
    bytes: &'de [u8],
) -> Result<T, rmp_serde::decode::Error> {
    let mut decoder = rmp_serde::Deserializer::from_read_ref(bytes);
    decoder.set_max_depth(MAX_DEPTH);
    T::deserialize(&mut decoder)
}

/// Decodes a frame, checking its size and header first.
pub(crate) fn decode(bytes: &[u8], limit: usize) -> Result<Frame<'_>, Rejected> {
    if bytes.len() > limit {
        return Err(Rejected::Oversized {
            size: bytes.len(),
            limit,
        });
    }
    match bytes {
        [FRAME_VERSION, CODEC_MSGPACK, body @ ..] => {
            from_shallow(body).map_err(|error| Rejected::Malformed(error.to_string()))
        }
        [FRAME_VERSION, codec, ..] => Err(Rejected::Codec(*codec)),
        [version, ..] => Err(Rejected::Version(*version)),
        [] => Err(Rejected::Malformed("empty".to_owned())),
    }
}

#[cfg(test)]
mod tests;
