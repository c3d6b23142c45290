//! A supervisor's children: in start order, and found by id and by PID without a scan.
//!
//! A supervisor used as a pool holds one child per session — tens of thousands — and looks one
//! up at every `start_child` (is the id taken?), every child's end (whose PID is this?),
//! `terminate_child` and retried restart (which id?). Kept in a `Vec` scanned each time, a pool
//! of `n` sessions cost `O(n)` per start and per end, and removing a child from the middle
//! moved the rest: 40 000 sessions started at 149 µs each and ended at 41 µs each, against 33
//! and 1.1 µs at 1 000 (`benches/examples/pool_probe.rs`). Here a child is a [`Key`] — its
//! place in start order, never reused — in an ordered map, with two indexes beside it, so each
//! of those is `O(log n)`; only what walks every child (`which_children`, a `OneForAll`
//! restart, the supervisor's stop) is `O(n)`, as it must be.

use super::super::spec::ChildSpec;
use crate::process::Pid;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A child's place in its supervisor's start order. A child started later (or re-added after
/// `terminate_child`) has a greater key; a restarted child keeps its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Key(u64);

/// A child: its spec and its running instance.
pub(super) struct Child {
    pub(super) spec: ChildSpec,
    pub(super) pid: Option<Pid>,
}

/// The children, by start order, id and running PID.
#[derive(Default)]
pub(super) struct Children {
    order: BTreeMap<Key, Child>,
    by_id: HashMap<Arc<str>, Key>,
    by_pid: HashMap<Pid, Key>,
    next: u64,
}

impl Children {
    /// Adds a child not running yet, after the others. Its id must be new
    /// ([`contains_id`](Self::contains_id)).
    pub(super) fn push(&mut self, spec: ChildSpec) -> Key {
        let key = Key(self.next);
        self.next += 1;
        let previous = self.by_id.insert(Arc::clone(&spec.id), key);
        debug_assert!(previous.is_none(), "a child's id is new");
        self.order.insert(key, Child { spec, pid: None });
        key
    }

    /// Whether a child has the id `id`.
    pub(super) fn contains_id(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }

    /// The child of id `id`.
    pub(super) fn by_id(&self, id: &str) -> Option<Key> {
        self.by_id.get(id).copied()
    }

    /// The child whose running instance is `pid`.
    pub(super) fn by_pid(&self, pid: Pid) -> Option<Key> {
        self.by_pid.get(&pid).copied()
    }

    /// The child `key`'s spec. Panics if it was removed: keys are used only while their child
    /// is kept.
    pub(super) fn spec(&self, key: Key) -> &ChildSpec {
        &self.child(key).spec
    }

    /// The child `key`'s running instance.
    pub(super) fn pid(&self, key: Key) -> Option<Pid> {
        self.child(key).pid
    }

    /// Records `pid` as the child `key`'s running instance (`None`: not running); returns the
    /// one it replaces.
    pub(super) fn set_pid(&mut self, key: Key, pid: Option<Pid>) -> Option<Pid> {
        let child = self
            .order
            .get_mut(&key)
            .expect("a child is kept while its key is used");
        let previous = std::mem::replace(&mut child.pid, pid);
        if let Some(previous) = previous {
            self.by_pid.remove(&previous);
        }
        if let Some(pid) = pid {
            self.by_pid.insert(pid, key);
        }
        previous
    }

    /// Forgets the child `key`.
    /// Every child, removed (the supervisor's end disposes of their specs one by one).
    pub(super) fn take_all(&mut self) -> impl Iterator<Item = Child> {
        self.by_id.clear();
        self.by_pid.clear();
        std::mem::take(&mut self.order).into_values()
    }

    pub(super) fn remove(&mut self, key: Key) -> Option<Child> {
        let child = self.order.remove(&key)?;
        self.by_id.remove(&child.spec.id);
        if let Some(pid) = child.pid {
            self.by_pid.remove(&pid);
        }
        Some(child)
    }

    /// The children from `key` on, in start order (`key` itself included).
    pub(super) fn keys_from(&self, key: Key) -> Vec<Key> {
        self.order.range(key..).map(|(key, _)| *key).collect()
    }

    /// Every child, in start order.
    pub(super) fn keys(&self) -> Vec<Key> {
        self.order.keys().copied().collect()
    }

    /// Every child, in start order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Child> {
        self.order.values()
    }

    fn child(&self, key: Key) -> &Child {
        self.order
            .get(&key)
            .expect("a child is kept while its key is used")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::supervisor::spec::Restart;

    fn spec(id: &str) -> ChildSpec {
        ChildSpec::new(id, |_: &_| Err(crate::scheduler::SpawnError::ShuttingDown))
            .restart(Restart::Temporary)
    }

    fn pid(index: u32) -> Pid {
        Pid::new(index as usize, 1)
    }

    #[test]
    fn keeps_start_order_and_both_indexes_through_removals() {
        let mut children = Children::default();
        let keys: Vec<Key> = ["a", "b", "c", "d"]
            .map(spec)
            .into_iter()
            .map(|s| children.push(s))
            .collect();
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(children.set_pid(*key, Some(pid(i as u32 + 1))), None);
        }
        assert_eq!(children.by_pid(pid(3)), Some(keys[2]));
        assert_eq!(children.by_id("b"), Some(keys[1]));

        // A restart: the new instance replaces the old in the PID index.
        assert_eq!(children.set_pid(keys[1], Some(pid(9))), Some(pid(2)));
        assert_eq!(children.by_pid(pid(2)), None);
        assert_eq!(children.by_pid(pid(9)), Some(keys[1]));

        // Removed from the middle: gone from both indexes, the order of the rest kept.
        let removed = children.remove(keys[2]).expect("kept");
        assert_eq!(&*removed.spec.id, "c");
        assert!(!children.contains_id("c"));
        assert_eq!(children.by_pid(pid(3)), None);
        assert_eq!(children.keys(), vec![keys[0], keys[1], keys[3]]);
        assert_eq!(children.keys_from(keys[1]), vec![keys[1], keys[3]]);

        // Re-added under a freed id: last in start order.
        let again = children.push(spec("c"));
        assert!(again > keys[3]);
        let ids: Vec<&str> = children.iter().map(|child| &*child.spec.id).collect();
        assert_eq!(ids, ["a", "b", "d", "c"]);

        // Not running: out of the PID index.
        assert_eq!(children.set_pid(keys[0], None), Some(pid(1)));
        assert_eq!(children.by_pid(pid(1)), None);
        assert_eq!(children.pid(keys[0]), None);
    }
}
