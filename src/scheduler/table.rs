//! The routing table: PID → process cell, for `send`, `state` and shutdown.
//!
//! Sharded by PID over reader-writer locks: `send` takes one shard's read lock (no writer
//! contention from other shards' spawns and exits), spawn and exit take a write lock on one shard.

use crate::loom::{Arc, RwLock};
use crate::process::mailbox::ProcessCell;
use crate::process::Pid;
use crossbeam_utils::CachePadded;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

const SHARDS: usize = 64;

type Shard = RwLock<HashMap<Pid, Arc<ProcessCell>, BuildHasherDefault<PidHasher>>>;

pub(crate) struct Table {
    shards: Box<[CachePadded<Shard>]>,
}

impl Table {
    pub(crate) fn new() -> Table {
        Table {
            shards: (0..SHARDS).map(|_| CachePadded::default()).collect(),
        }
    }

    fn shard(&self, pid: Pid) -> &Shard {
        &self.shards[pid.as_u64() as usize % SHARDS]
    }

    pub(crate) fn insert(&self, cell: Arc<ProcessCell>) {
        write(self.shard(cell.pid)).insert(cell.pid, cell);
    }

    pub(crate) fn remove(&self, pid: Pid) {
        let removed = write(self.shard(pid)).remove(&pid);
        // Drop the cell outside the lock.
        drop(removed);
    }

    /// Runs `f` on the cell of `pid`, under the shard's read lock (no reference-count traffic).
    pub(crate) fn with<R>(&self, pid: Pid, f: impl FnOnce(&Arc<ProcessCell>) -> R) -> Option<R> {
        read(self.shard(pid)).get(&pid).map(f)
    }

    /// Every live cell (a snapshot).
    pub(crate) fn cells(&self) -> Vec<Arc<ProcessCell>> {
        let mut all = Vec::new();
        for shard in self.shards.iter() {
            all.extend(read(shard).values().cloned());
        }
        all
    }

    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| read(s).len()).sum()
    }
}

fn read<T>(lock: &RwLock<T>) -> crate::loom::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> crate::loom::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// PIDs are sequential integers: a multiplicative hash spreads them over the buckets.
#[derive(Default)]
pub(crate) struct PidHasher(u64);

impl Hasher for PidHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}
