//! Maps and sets keyed by a [`Tag`]: the adapter's live calls
//! (`async_fn/live_calls.rs`) and the asks a process gave up on (`mailbox/abandoned.rs`), each of
//! which may hold tens of thousands of tags (a body's `FuturesUnordered` of asks).

use super::Tag;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// Keyed by tag, hashed by [`TagHasher`].
pub(crate) type TagMap<V> = HashMap<Tag, V, BuildHasherDefault<TagHasher>>;
/// A set of tags, hashed by [`TagHasher`].
pub(crate) type TagSet = HashSet<Tag, BuildHasherDefault<TagHasher>>;

/// Tags are a counter the adapter owns (no one can choose them to collide), so SipHash's
/// defence is not needed: a multiply by an odd constant spreads consecutive tags over the low
/// bits (the bucket) and mixes them into the high ones (the table's control bytes), where the
/// identity would give every tag the same control byte.
#[derive(Default)]
pub(crate) struct TagHasher(u64);

impl Hasher for TagHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used (a `Tag` is a `u64`); this keeps any other input hashed.
        for &byte in bytes {
            self.write_u64(self.0.rotate_left(8) ^ u64::from(byte));
        }
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}
