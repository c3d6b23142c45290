//! What a node's decoding knows that the bytes do not: which node decodes them, and, for a
//! remote message, which peer sent it.
//!
//! Two types travel as bare ids and come out bound to the decoding node: a reply port
//! (`reply.rs`: the ask's id, answered back to the frame's origin) and a [`RemoteAddr`] (its
//! [`NodePid`], addressed through the decoding node). serde's `Deserialize` takes no context,
//! so the node installs a thread-local [`DecodeScope`] around each decode it runs: a remote
//! message's (node and origin), an ask's answer, a spawn's argument and a remote process's
//! output (node only: no reply port is answered from there).
//!
//! [`RemoteAddr`]: super::RemoteAddr
//! [`NodePid`]: super::NodePid

use super::node::{NodeShared, PeerId};
use std::cell::RefCell;
use std::sync::Arc;

/// The decoding node, and the origin of the frame whose message it decodes.
type Scope = (Arc<NodeShared>, Option<PeerId>);

thread_local! {
    static SCOPE: RefCell<Option<Scope>> = const { RefCell::new(None) };
}

/// Who decodes: installed around a decode by [`DecodeScope::decode`].
#[derive(Clone, Copy)]
pub(crate) struct DecodeScope<'a> {
    pub(crate) node: &'a Arc<NodeShared>,
    /// The peer whose message is decoded: its reply ports answer there. `None` where no port
    /// may come (an answer, a spawn's argument, an output).
    pub(crate) origin: Option<&'a PeerId>,
}

impl<'a> DecodeScope<'a> {
    /// A message from `origin`.
    pub(crate) fn message(node: &'a Arc<NodeShared>, origin: &'a PeerId) -> DecodeScope<'a> {
        DecodeScope {
            node,
            origin: Some(origin),
        }
    }

    /// Anything else `node` decodes from a user's type.
    pub(crate) fn node(node: &'a Arc<NodeShared>) -> DecodeScope<'a> {
        DecodeScope { node, origin: None }
    }

    /// Runs `decode` with this scope installed. Scopes nest (the outer one is back after), and
    /// the scope is taken down even if `decode` panics (a registered type's `Deserialize`).
    pub(crate) fn decode<T>(self, decode: impl FnOnce() -> T) -> T {
        struct Restore(Option<Scope>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let previous = self.0.take();
                SCOPE.with(|scope| *scope.borrow_mut() = previous);
            }
        }
        let _restore = Restore(SCOPE.with(|scope| {
            scope
                .borrow_mut()
                .replace((self.node.clone(), self.origin.cloned()))
        }));
        decode()
    }
}

impl DecodeScope<'_> {
    /// Decodes a user's type from its MessagePack `bytes` with this scope installed, after
    /// checking that they nest no deeper than the node's `max_nesting` (`nesting.rs`: serde
    /// would recurse once a level, and a stack overflow aborts the program).
    pub(crate) fn decode_msgpack<'de, T: serde::Deserialize<'de>>(
        self,
        bytes: &'de [u8],
    ) -> Result<T, String> {
        super::nesting::check(bytes, self.node.max_nesting).map_err(|deep| deep.to_string())?;
        self.decode(|| rmp_serde::from_slice(bytes))
            .map_err(|error| error.to_string())
    }
}

/// The node decoding on this thread, if one is.
pub(crate) fn decoding_node() -> Option<Arc<NodeShared>> {
    SCOPE.with(|scope| scope.borrow().as_ref().map(|(node, _)| node.clone()))
}

/// The node decoding on this thread and the peer whose message it decodes, if it decodes one.
pub(crate) fn decoding_message() -> Option<(Arc<NodeShared>, PeerId)> {
    SCOPE.with(|scope| match &*scope.borrow() {
        Some((node, Some(origin))) => Some((node.clone(), origin.clone())),
        _ => None,
    })
}
