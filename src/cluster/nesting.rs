//! How deep a MessagePack value nests, read without recursion, before serde decodes it.
//!
//! Why: serde decodes a nested value by recursion, one stack frame or more per level, and a
//! thread that overflows its stack aborts the whole program — every node and process in it.
//! rmp-serde bounds the depth of arrays and maps it decodes, but not of enums (an externally
//! tagged variant is a one-entry map it reads without counting), so one message of a recursive
//! type (`enum Tree { Leaf, Node(Box<Tree>) }`) 5 000 levels deep, sent by a peer or forged by
//! any client of the server, overflowed the receiving node's inbound task. Every value a node
//! decodes from a user's type — a message, a spawn's argument, an ask's answer, a remote
//! process's output — is measured here first and refused past the node's
//! [`max_nesting`](super::Cluster::max_nesting), as a malformed one is.
//!
//! The walk reads each marker once and skips strings, binaries and extensions whole: a pass
//! over the value's markers, not its bytes (a 16 KiB binary is one step).

/// Containers open at once that the walk counts without allocating.
const INLINE_LEVELS: usize = 32;

/// Why a value was not measured within the limit.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TooDeep {
    pub(crate) limit: usize,
}

impl std::fmt::Display for TooDeep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the value nests deeper than {} levels (the node's max_nesting)",
            self.limit
        )
    }
}

/// The items still to read of each open container, innermost last.
struct Levels {
    inline: [u64; INLINE_LEVELS],
    len: usize,
    spilled: Vec<u64>,
}

impl Levels {
    fn new() -> Levels {
        Levels {
            inline: [0; INLINE_LEVELS],
            len: 0,
            spilled: Vec::new(),
        }
    }

    fn depth(&self) -> usize {
        self.len + self.spilled.len()
    }

    fn push(&mut self, items: u64) {
        if self.len < INLINE_LEVELS {
            self.inline[self.len] = items;
            self.len += 1;
        } else {
            self.spilled.push(items);
        }
    }

    /// The innermost container's count, if any is open.
    fn last(&mut self) -> Option<&mut u64> {
        match self.spilled.last_mut() {
            Some(last) => Some(last),
            None if self.len > 0 => Some(&mut self.inline[self.len - 1]),
            None => None,
        }
    }

    fn pop(&mut self) {
        if self.spilled.pop().is_none() {
            self.len -= 1;
        }
    }
}

/// Checks that the MessagePack value at the start of `bytes` nests at most `limit` containers
/// deep (a scalar is depth 0, `[1]` depth 1). Bytes that are not MessagePack, or end early,
/// pass: the decoder that follows reports them.
pub(crate) fn check(bytes: &[u8], limit: usize) -> Result<(), TooDeep> {
    let mut levels = Levels::new();
    let mut at = 0usize;
    loop {
        // One value: a scalar (skipped), or a container (opened).
        let Some(&marker) = bytes.get(at) else {
            return Ok(());
        };
        let (skip, items) = match marker {
            0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => (1, None),
            0x80..=0x8f => (1, Some(2 * u64::from(marker & 0x0f))),
            0x90..=0x9f => (1, Some(u64::from(marker & 0x0f))),
            0xa0..=0xbf => (1 + usize::from(marker & 0x1f), None),
            0xc4 | 0xd9 => (2 + length(bytes, at + 1, 1), None),
            0xc5 | 0xda => (3 + length(bytes, at + 1, 2), None),
            0xc6 | 0xdb => (5 + length(bytes, at + 1, 4), None),
            0xc7 => (3 + length(bytes, at + 1, 1), None),
            0xc8 => (4 + length(bytes, at + 1, 2), None),
            0xc9 => (6 + length(bytes, at + 1, 4), None),
            0xca => (5, None),
            0xcb => (9, None),
            0xcc | 0xd0 => (2, None),
            0xcd | 0xd1 => (3, None),
            0xce | 0xd2 => (5, None),
            0xcf | 0xd3 => (9, None),
            0xd4 => (3, None),
            0xd5 => (4, None),
            0xd6 => (6, None),
            0xd7 => (10, None),
            0xd8 => (18, None),
            0xdc => (3, Some(length(bytes, at + 1, 2) as u64)),
            0xdd => (5, Some(length(bytes, at + 1, 4) as u64)),
            0xde => (3, Some(2 * length(bytes, at + 1, 2) as u64)),
            0xdf => (5, Some(2 * length(bytes, at + 1, 4) as u64)),
            // 0xc1: never used; the decoder reports it.
            0xc1 => return Ok(()),
        };
        at = at.saturating_add(skip);
        match items {
            Some(0) | None => {}
            Some(items) => {
                if levels.depth() == limit {
                    return Err(TooDeep { limit });
                }
                levels.push(items);
                continue;
            }
        }
        // A value was read: close every container it completed.
        loop {
            let Some(left) = levels.last() else {
                return Ok(());
            };
            *left -= 1;
            if *left > 0 {
                break;
            }
            levels.pop();
        }
        if at >= bytes.len() {
            return Ok(());
        }
    }
}

/// The big-endian length of `width` bytes at `at`, at most `bytes.len()` (no value claims
/// more and fits; the walk ends at the end of the bytes), 0 past the end.
fn length(bytes: &[u8], at: usize, width: usize) -> usize {
    match bytes.get(at..at.saturating_add(width)) {
        Some(field) => field
            .iter()
            .fold(0usize, |n, &b| n.saturating_mul(256) | usize::from(b))
            .min(bytes.len()),
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::{check, TooDeep};
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    enum Tree {
        Leaf,
        Node(Box<Tree>),
    }

    /// `Tree::Node` nested `depth` times around a `Leaf`, encoded by hand as rmp-serde encodes
    /// it (a one-entry map per level) — without recursion, at any depth.
    fn nested_tree(depth: usize) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(depth * 6 + 5);
        for _ in 0..depth {
            bytes.extend_from_slice(&[0x81, 0xa4, b'N', b'o', b'd', b'e']);
        }
        bytes.extend_from_slice(&[0xa4, b'L', b'e', b'a', b'f']);
        bytes
    }

    #[test]
    fn the_hand_encoding_is_rmp_serdes() {
        let tree = Tree::Node(Box::new(Tree::Node(Box::new(Tree::Leaf))));
        assert_eq!(rmp_serde::to_vec(&tree).unwrap(), nested_tree(2));
    }

    #[test]
    fn scalars_and_flat_values_have_depth_zero_or_one() {
        for value in [
            rmp_serde::to_vec(&7u64).unwrap(),
            rmp_serde::to_vec(&"text").unwrap(),
            rmp_serde::to_vec(&serde_bytes::ByteBuf::from(vec![0u8; 70_000])).unwrap(),
            rmp_serde::to_vec(&f64::MAX).unwrap(),
        ] {
            assert_eq!(check(&value, 0), Ok(()));
        }
        let flat = rmp_serde::to_vec(&vec![1u32; 100_000]).unwrap();
        assert_eq!(check(&flat, 1), Ok(()));
        assert_eq!(check(&flat, 0), Err(TooDeep { limit: 0 }));
    }

    #[test]
    fn depth_is_counted_exactly_at_the_limit() {
        let tree = nested_tree(128);
        assert_eq!(check(&tree, 128), Ok(()));
        assert_eq!(check(&tree, 127), Err(TooDeep { limit: 127 }));
        let decoded: Tree = rmp_serde::from_slice(&nested_tree(3)).unwrap();
        assert_eq!(
            decoded,
            Tree::Node(Box::new(Tree::Node(Box::new(Tree::Node(Box::new(
                Tree::Leaf
            ))))))
        );
    }

    #[test]
    fn siblings_do_not_add_up_and_closed_containers_free_their_level() {
        // [[[1]], [[2]], {"k": [[3]]}]: depth 4 (the tuple, the map, two arrays), not the sum.
        let value = (
            vec![vec![1u8]],
            vec![vec![2u8]],
            std::collections::BTreeMap::from([("k", vec![vec![3u8]])]),
        );
        let bytes = rmp_serde::to_vec(&value).unwrap();
        assert_eq!(check(&bytes, 4), Ok(()));
        assert_eq!(check(&bytes, 3), Err(TooDeep { limit: 3 }));
    }

    #[test]
    fn a_value_far_deeper_than_any_stack_is_refused_without_recursion() {
        let deep = nested_tree(1_000_000);
        assert_eq!(check(&deep, 128), Err(TooDeep { limit: 128 }));
        // Past the inline levels: the spilled ones count the same.
        assert_eq!(check(&nested_tree(1_000), 1_000), Ok(()));
        assert_eq!(
            check(&nested_tree(1_001), 1_000),
            Err(TooDeep { limit: 1_000 })
        );
    }

    #[test]
    fn truncated_or_invalid_bytes_pass_to_the_decoder() {
        for bytes in [
            &[][..],
            &[0xc1],
            &[0xdd, 0xff],
            &[0x92, 0x01],
            &[0xc6, 0xff, 0xff],
        ] {
            assert_eq!(check(bytes, 4), Ok(()), "{bytes:x?}");
        }
        // A claimed length past the end ends the walk, whatever follows.
        assert_eq!(check(&[0xdc, 0xff, 0xff, 0x91, 0x91, 0x91], 8), Ok(()));
    }
}
