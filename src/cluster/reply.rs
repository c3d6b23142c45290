//! Reply ports across nodes: a [`Reply<R>`] inside a remote ask's message crosses the wire as
//! the ask's id, and comes out on the answering node as a port whose answer travels back.
//!
//! On the asking node the closure given to `ask` gets a *placeholder* port that serializes as
//! the ask's id (`AskTicket`). The answering node decodes the message inside a
//! [`DecodeScope`](super::decoding::DecodeScope) naming the node and the frame's origin, where the port's
//! `Deserialize` builds a `WireAnswer`: `send` encodes the reply and queues it for the origin;
//! dropped unanswered, it queues `NoReply` — unless the message itself was refused (then the
//! asker hears the refusal instead: [`quietly`]).

use super::node::{NodeShared, PeerId};
use super::outbound::Admission;
use super::wire::{Envelope, Item, Refusal};
use crate::process::panic_message;
use crate::scheduler::{RemoteAnswer, Reply};
use serde::de::Error as _;
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

thread_local! {
    /// Ports dropped now stay silent (their message was refused: the refusal is the answer).
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` (which drops a refused message) with its reply ports silenced; they speak again
/// afterwards even if `f` panics (a message's `Drop`).
pub(crate) fn quietly(f: impl FnOnce()) {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            QUIET.with(|quiet| quiet.set(self.0));
        }
    }
    let _restore = Restore(QUIET.with(|quiet| quiet.replace(true)));
    f();
}

/// The asking node's placeholder: what the closure of a remote `ask` builds its message with.
pub(crate) struct AskTicket(pub(crate) u64);

impl<R> RemoteAnswer<R> for AskTicket {
    fn wire_id(&self) -> Option<u64> {
        Some(self.0)
    }

    fn answer(self: Box<Self>, value: R) -> Result<(), R> {
        // Answered before it left: nobody waits on this side of the wire.
        Err(value)
    }

    fn unanswered(self: Box<Self>) {}

    fn is_closed(&self) -> bool {
        false
    }
}

/// The answering node's port: the answer goes back to `origin` as an [`Item::Reply`].
struct WireAnswer<R> {
    node: Arc<NodeShared>,
    origin: PeerId,
    ask: u64,
    encode: fn(&mut Vec<u8>, &R) -> Result<(), rmp_serde::encode::Error>,
}

impl<R: Send + 'static> RemoteAnswer<R> for WireAnswer<R> {
    fn wire_id(&self) -> Option<u64> {
        None
    }

    fn answer(self: Box<Self>, value: R) -> Result<(), R> {
        let envelope = Envelope::Reply { ask: self.ask };
        // Encoded behind room for its frame's head and envelope, as a message is (a big reply
        // is published from this buffer, `NodeShared::send_encoded`).
        let gap = self.node.gap(&envelope);
        let mut panicked = None;
        let sent = super::scratch::with(|buffer| {
            buffer.resize(gap, 0);
            // The reply type's `Serialize` is user code: if it panics, the asker hears it at
            // once (not at its timeout), and the panic goes on to the answering process.
            let encoded = panic::catch_unwind(AssertUnwindSafe(|| (self.encode)(buffer, &value)));
            let refusal = match encoded {
                Ok(Ok(())) => match self.node.send_encoded(
                    &self.origin,
                    &envelope,
                    buffer,
                    gap,
                    Admission::Always,
                ) {
                    // Over the frame limit: nothing was queued, the asker is told below.
                    Err(refusal @ Refusal::TooLarge { .. }) => refusal,
                    sent => return sent,
                },
                Ok(Err(error)) => Refusal::Decode(format!("the reply did not encode: {error}")),
                Err(panic) => {
                    let message = panic_message(&*panic);
                    panicked = Some(panic);
                    Refusal::Decode(format!("the reply's Serialize panicked: {message}"))
                }
            };
            // The asker hears why at once; the answer comes back to the answering process.
            tracing::warn!(ask = self.ask, ?refusal, "a reply was not sent");
            let item = Item::Reply {
                ask: self.ask,
                result: Err(refusal.clone()),
            };
            let _ = self.node.send_control(&self.origin, item);
            Err(refusal)
        });
        if let Some(panic) = panicked {
            panic::resume_unwind(panic);
        }
        sent.map_err(|_| value)
    }

    fn unanswered(self: Box<Self>) {
        if QUIET.with(Cell::get) {
            return;
        }
        let item = Item::Reply {
            ask: self.ask,
            result: Err(Refusal::NoReply),
        };
        let _ = self.node.send_control(&self.origin, item);
    }

    fn is_closed(&self) -> bool {
        !self.node.is_live(&self.origin)
    }
}

impl<R> Serialize for Reply<R> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.wire_id() {
            Some(id) => serializer.serialize_u64(id),
            None => Err(S::Error::custom(
                "a reply port crosses nodes only inside a remote ask",
            )),
        }
    }
}

impl<'de, R: Serialize + Send + 'static> Deserialize<'de> for Reply<R> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Reply<R>, D::Error> {
        let ask = u64::deserialize(deserializer)?;
        let Some((node, origin)) = super::decoding::decoding_message() else {
            return Err(D::Error::custom(
                "a reply port is decoded only by a node receiving a remote ask",
            ));
        };
        Ok(Reply::remote(Box::new(WireAnswer {
            node,
            origin,
            ask,
            encode: |out: &mut Vec<u8>, value: &R| rmp_serde::encode::write_named(out, value),
        })))
    }
}
