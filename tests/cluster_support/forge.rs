//! Frames as a client that is no node would forge them: the wire's frame (`src/cluster/wire.rs`)
//! rebuilt from its parts, for the tests that feed a node bad or foreign input.

use serde::Serialize;

/// A frame's body.
#[derive(Serialize)]
struct Frame {
    from: String,
    from_incarnation: u64,
    to_incarnation: u64,
    severed: u64,
    seen: u64,
    items: Vec<Item>,
}

/// The items the tests forge.
#[derive(Serialize)]
pub(crate) enum Item {
    Message {
        to: u64,
        ty: String,
        #[serde(with = "serde_bytes")]
        body: Vec<u8>,
        ack: Option<u64>,
    },
    Spawn {
        id: u64,
        name: String,
        #[serde(with = "serde_bytes")]
        args: Vec<u8>,
    },
    /// The answer to ask `ask`: `value`'s encoding.
    Reply { ask: u64, result: Result<Body, ()> },
    /// Monitor `id` of the sender's, on the receiver's process `target`.
    Monitor { id: u64, target: u64 },
    /// Which process the receiver registered as `name` (answered to the sender's subject).
    Whereis { id: u64, name: String },
}

/// An encoded value, as the wire carries it (a binary blob).
#[derive(Serialize)]
pub(crate) struct Body(#[serde(with = "serde_bytes")] pub(crate) Vec<u8>);

/// A frame of `items` (see [`frame`]).
pub(crate) fn frame_of(
    from: &str,
    from_incarnation: u64,
    to_incarnation: u64,
    items: Vec<Item>,
) -> Vec<u8> {
    counted_frame(from, from_incarnation, to_incarnation, 0, items)
}

/// A frame of `items` whose head says its sender declared the receiver down `severed` times
/// (`src/cluster/severance.rs`).
pub(crate) fn counted_frame(
    from: &str,
    from_incarnation: u64,
    to_incarnation: u64,
    severed: u64,
    items: Vec<Item>,
) -> Vec<u8> {
    let frame = Frame {
        from: from.to_owned(),
        from_incarnation,
        to_incarnation,
        severed,
        seen: 0,
        items,
    };
    let mut bytes = vec![1, 1];
    bytes.extend(rmp_serde::to_vec_named(&frame).expect("a forged frame encodes"));
    bytes
}

/// A frame of one `item`, claiming to come from node `from` at `from_incarnation`, for
/// `to_incarnation` of the receiving node: version 1, codec 1 (MessagePack, named fields).
pub(crate) fn frame(from: &str, from_incarnation: u64, to_incarnation: u64, item: Item) -> Vec<u8> {
    frame_of(from, from_incarnation, to_incarnation, vec![item])
}
