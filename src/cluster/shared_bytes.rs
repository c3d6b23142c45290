//! `bytes::Bytes` fields a node decodes without copying: `#[serde(with = "shared_bytes")]`.
//!
//! A message's bytes arrive inside a frame, which async-nats hands over as one `Bytes`. A field
//! of type `Vec<u8>` is decoded into a fresh allocation and copied; a `Bytes` field marked with
//! this module is decoded as a slice of the frame itself (`Bytes::slice_ref`): no allocation and
//! no copy, however large. Sending it from a `Bytes` costs no copy before the encode either, so
//! a payload the application already holds as `Bytes` is copied once on its way (into the
//! frame), as a raw NATS publish copies it into the socket.
//!
//! How: while the inbound task handles a frame it keeps the frame's `Bytes` in a thread-local
//! (`within_frame`); this module's `Deserialize` receives the field as bytes borrowed from the
//! frame (MessagePack's `bin`, read in place) and, if they lie inside that frame, slices it.
//! An ask's answer is decoded the same way on the asker's side, within the frame it came in.
//! Anywhere else — a local send never encodes at all; another format — it copies, so the field
//! always decodes.
//!
//! The slice keeps the whole frame's buffer alive while it lives (async-nats reads frames into
//! shared buffers of 64 KiB and more): copy out (`Bytes::copy_from_slice`) what you keep long.

use bytes::Bytes;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Serializer;
use std::cell::RefCell;
use std::fmt;

thread_local! {
    /// The frame being handled on this thread (`None` outside the inbound task's handling).
    static FRAME: RefCell<Option<Bytes>> = const { RefCell::new(None) };
}

/// Runs `handle` with `frame` as the frame fields of this module slice; the previous frame (if
/// any) is back afterwards, even if `handle` panics.
pub(crate) fn within_frame<T>(frame: &Bytes, handle: impl FnOnce() -> T) -> T {
    struct Restore(Option<Bytes>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            FRAME.with(|frame| *frame.borrow_mut() = previous);
        }
    }
    let _restore = Restore(FRAME.with(|current| current.borrow_mut().replace(frame.clone())));
    handle()
}

/// `bytes` as a slice of the frame being handled if they lie inside it, else a copy.
pub(crate) fn share_or_copy(bytes: &[u8]) -> Bytes {
    FRAME.with(|frame| match frame.borrow().as_ref() {
        Some(frame) if contains(frame, bytes) => frame.slice_ref(bytes),
        _ => Bytes::copy_from_slice(bytes),
    })
}

/// Whether `part` lies inside `whole`'s memory (what `Bytes::slice_ref` requires).
fn contains(whole: &[u8], part: &[u8]) -> bool {
    let (start, end) = (
        whole.as_ptr() as usize,
        whole.as_ptr() as usize + whole.len(),
    );
    let part_start = part.as_ptr() as usize;
    part_start >= start && part_start + part.len() <= end && !part.is_empty()
}

/// Serializes `bytes` as binary data (MessagePack `bin`), as `serde_bytes` would.
///
/// # Errors
///
/// The serializer's.
///
/// # Examples
///
/// ```
/// use bytes::Bytes;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct Chunk {
///     offset: u64,
///     #[serde(with = "procsched::cluster::shared_bytes")]
///     data: Bytes,
/// }
///
/// let chunk = Chunk { offset: 0, data: Bytes::from_static(b"hello") };
/// let encoded = rmp_serde::to_vec_named(&chunk)?;
/// let decoded: Chunk = rmp_serde::from_slice(&encoded)?;  // outside a node: a copy
/// assert_eq!(decoded.data, chunk.data);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn serialize<S: Serializer>(bytes: &Bytes, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_bytes(bytes)
}

/// Deserializes binary data as `Bytes`: a slice of the frame a node is handling, or a copy
/// anywhere else (see [the module](self)).
///
/// # Errors
///
/// The deserializer's, or data that is neither bytes nor a sequence of bytes.
///
/// # Examples
///
/// Called directly on a MessagePack `bin` (a node calls it through `#[serde(with = ..)]`, as in
/// [`serialize`]'s example):
///
/// ```
/// let encoded = rmp_serde::to_vec(&serde_bytes::Bytes::new(b"frame"))?;
/// let mut de = rmp_serde::Deserializer::from_read_ref(&encoded);
/// let data = procsched::cluster::shared_bytes::deserialize(&mut de)?;   // outside a node: a copy
/// assert_eq!(&data[..], b"frame");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Bytes, D::Error> {
    deserializer.deserialize_bytes(BytesVisitor)
}

struct BytesVisitor;

impl<'de> Visitor<'de> for BytesVisitor {
    type Value = Bytes;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("binary data")
    }

    fn visit_borrowed_bytes<E: de::Error>(self, bytes: &'de [u8]) -> Result<Bytes, E> {
        Ok(share_or_copy(bytes))
    }

    fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<Bytes, E> {
        Ok(Bytes::copy_from_slice(bytes))
    }

    fn visit_byte_buf<E: de::Error>(self, bytes: Vec<u8>) -> Result<Bytes, E> {
        Ok(Bytes::from(bytes))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Bytes, A::Error> {
        let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(byte) = seq.next_element::<u8>()? {
            bytes.push(byte);
        }
        Ok(Bytes::from(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize)]
    struct Chunk {
        n: u8,
        #[serde(with = "super")]
        data: Bytes,
    }

    #[test]
    fn inside_a_frame_the_field_is_a_slice_of_it_and_outside_a_copy() {
        let encoded = rmp_serde::to_vec_named(&Chunk {
            n: 7,
            data: Bytes::from(vec![5; 1000]),
        })
        .unwrap();
        let frame = Bytes::from(encoded);
        let inside: Chunk = within_frame(&frame, || rmp_serde::from_slice(&frame).unwrap());
        assert_eq!((inside.n, &inside.data[..]), (7, &[5; 1000][..]));
        assert!(contains(&frame, &inside.data), "shares the frame's memory");

        let outside: Chunk = rmp_serde::from_slice(&frame).unwrap();
        assert_eq!(outside.data, inside.data);
        assert!(!contains(&frame, &outside.data), "a copy");

        // Bytes from another buffer than the frame's are copied, not mis-sliced.
        let other = Bytes::from(frame.to_vec());
        let elsewhere: Chunk = within_frame(&frame, || rmp_serde::from_slice(&other).unwrap());
        assert!(!contains(&frame, &elsewhere.data) && !contains(&other, &elsewhere.data));
        assert!(FRAME.with(|frame| frame.borrow().is_none()), "restored");
    }

    #[test]
    fn a_sequence_of_numbers_decodes_too() {
        let json_like = rmp_serde::to_vec(&(7u8, vec![1u8, 2, 3])).unwrap();
        let chunk: Chunk = rmp_serde::from_slice(&json_like).unwrap();
        assert_eq!(&chunk.data[..], &[1, 2, 3]);
    }
}
