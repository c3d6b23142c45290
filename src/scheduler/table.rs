//! The process table: a pool of process cells, indexed by the slot part of a [`Pid`].
//!
//! A [`Pid`] is a slot index and the generation of that slot's current incarnation. Looking a
//! PID up is two dependent loads (page, then cell) with no lock and no hashing; whether the cell
//! still hosts *that* process is decided by the cell itself, under its mailbox lock, from the
//! generation (`process/mailbox.rs`). So `send` never takes a table-wide lock, and spawning or
//! finishing a process allocates nothing once the pool has grown to the live high-water mark.
//!
//! # Layout
//! Page `k` holds `FIRST_PAGE << k` slots; pages are allocated on first use and never freed
//! before the table, so a reference to a slot stays valid for the table's life. A slot's cell is
//! created by the one spawner that claims the slot's index fresh (each fresh index is handed out
//! once), and kept — it hosts one process after another — until the table is dropped. So the pool
//! never shrinks: for the scheduler's life its memory stays at the live high-water mark (a cell per
//! slot: ~200 bytes plus the largest mailbox buffer it has needed).
//!
//! # Protocol
//! 1. **Claim** (spawn): pop a slot off the free list, or take a fresh index (allocating its page
//!    and creating its cell); then `open` the cell, which bumps its generation.
//! 2. **Release** (the process finished and its cell is closed): the cell goes `Free`, and the
//!    slot goes back on the free list — unless its generation is exhausted, then it is retired
//!    for good, so no PID is ever issued twice.
//!
//! Loom models (`tests/loom_table.rs`): two threads claiming and releasing through the free list
//! never hold one slot at once, `loom_free_list_never_hands_a_slot_to_two_live_processes`; a
//! sender holding a stale PID while its slot is released and reclaimed never reaches the next
//! process, `loom_stale_pid_racing_with_the_slots_reuse_never_reaches_the_next_process`.
//!
//! The free list is [`FREE_SHARDS`] Treiber stacks threaded through the cells' `next_free` words.
//! A thread releases into, and claims from, the stack of its own shard first (a shard per thread,
//! picked once from the address of a thread-local), and only when that is empty pops from the
//! others, so workers that both spawn and finish processes (a process tree) do not fight over one
//! head. A head packs a tag with the index, and every successful push or pop bumps the tag, so a
//! pop that read a stale `next_free` (the slot was popped and pushed back meanwhile: ABA) fails its
//! CAS. Slots are never freed, so reading a stale `next_free` is harmless.

use crate::loom::atomic::{fence, AtomicPtr, AtomicU64, AtomicUsize, Ordering::*};
use crate::loom::{lock, Arc, Mutex};
use crate::process::mailbox::{Incarnation, ProcessCell};
use crate::process::{Pid, INDEX_BITS, MAX_GENERATION};
use crossbeam_utils::CachePadded;
use std::ptr;

/// Slots in page 0 (a power of two); page `k` holds `FIRST_PAGE << k`. Tiny under loom, so
/// models cross page boundaries.
const FIRST_PAGE: usize = if cfg!(loom) { 2 } else { 64 };
/// Most slots: every index a [`Pid`] can hold.
pub(crate) const MAX_SLOTS: usize = 1 << INDEX_BITS;
/// Pages needed to hold `MAX_SLOTS` slots.
const PAGES: usize = (usize::BITS - (MAX_SLOTS / FIRST_PAGE).leading_zeros()) as usize;
/// A free-list head's index half when the stack is empty (indices are stored plus one).
const EMPTY: u64 = 0;
/// Free-list stacks (a power of two).
const FREE_SHARDS: usize = if cfg!(loom) { 1 } else { 8 };

crate::loom::thread_local_const! {
    /// Only its address is used: it tells threads apart, for free-list sharding.
    static SHARD_PROBE: u8 = 0;
}

struct Slot {
    /// The cell, created by the fresh claimer; owns one `Arc` reference (`Arc::into_raw`).
    /// Written once, so the slot array stays read-mostly (shared in every core's cache); the
    /// free-list link lives in the cell (`ProcessCell::next_free`: the next free slot's index
    /// plus one, 0 for none).
    cell: AtomicPtr<ProcessCell>,
}

pub(crate) struct Table {
    /// Page `k`: a leaked `Box<[Slot]>` of `FIRST_PAGE << k` slots, or null.
    pages: Box<[AtomicPtr<Slot>]>,
    /// Serialises page allocation (rare: once per page).
    grow: Mutex<()>,
    /// The next index never handed out.
    fresh: AtomicUsize,
    /// The free lists' heads: `tag << 32 | (index + 1)`.
    free_heads: Box<[CachePadded<AtomicU64>]>,
    /// The mailbox capacity of new cells.
    mailbox_capacity: usize,
}

impl Table {
    pub(crate) fn new(mailbox_capacity: usize) -> Table {
        Table {
            pages: (0..PAGES)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect(),
            grow: Mutex::new(()),
            fresh: AtomicUsize::new(0),
            free_heads: (0..FREE_SHARDS)
                .map(|_| CachePadded::new(AtomicU64::new(EMPTY)))
                .collect(),
            mailbox_capacity,
        }
    }

    /// [`claim_as`](Self::claim_as) for an anonymous process (tests).
    #[cfg(test)]
    pub(crate) fn claim(&self) -> Option<(Pid, Arc<ProcessCell>)> {
        self.claim_as(Incarnation::default())
    }

    /// Protocol step 1: a cell for a new process, opened (recording `incarnation` for
    /// `process_info`), and the process's PID. `None` when every index is in use (or retired).
    pub(crate) fn claim_as(&self, incarnation: Incarnation) -> Option<(Pid, Arc<ProcessCell>)> {
        // Raw pointers, as the slot stores them: their provenance covers the whole `Arc`
        // allocation, which taking a reference of our own needs (a `&ProcessCell` would not do).
        let (index, cell) = match self.pop_free() {
            Some(index) => (
                index,
                self.created_slot(index).cell.load(Acquire).cast_const(),
            ),
            None => {
                let index = self.fresh.fetch_add(1, Relaxed);
                if index >= MAX_SLOTS {
                    return None;
                }
                (index, self.create_cell(index))
            }
        };
        debug_assert!(!cell.is_null(), "a claimed slot has a cell");
        // SAFETY: the pointer came from `Arc::into_raw` (`create_cell`) and the slot owns that
        // reference until the table drops; `&self` keeps the table alive while we take our own.
        let cell = unsafe {
            Arc::increment_strong_count(cell);
            Arc::from_raw(cell)
        };
        let generation = cell.open_as(incarnation);
        Some((Pid::new(index, generation), cell))
    }

    /// Protocol step 2, for the process `pid` whose cell is closed.
    pub(crate) fn release(&self, pid: Pid, cell: &ProcessCell) {
        let generation = cell.release();
        debug_assert_eq!(generation, pid.generation());
        if generation < MAX_GENERATION {
            self.push_free(pid.index());
        } else {
            tracing::debug!(%pid, "process table slot retired: its generations are used up");
        }
    }

    /// The cell that hosts (or hosted, or will host) the process `pid`. Whether it hosts `pid`
    /// *now* is for the cell to say, from the generation.
    pub(crate) fn get(&self, pid: Pid) -> Option<&ProcessCell> {
        self.cell(pid.index())
    }

    /// Every cell created so far (shutdown visits them all).
    pub(crate) fn cells(&self) -> impl Iterator<Item = &ProcessCell> + '_ {
        self.entries().map(|(_, cell)| cell)
    }

    /// Every cell created so far, with its slot index.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (usize, &ProcessCell)> + '_ {
        (0..PAGES)
            .filter_map(|k| Some((k, self.page(k)?)))
            .flat_map(|(k, slots)| {
                let first = (FIRST_PAGE << k) - FIRST_PAGE;
                slots
                    .iter()
                    .enumerate()
                    .map(move |(i, slot)| (first + i, slot))
            })
            .filter_map(|(index, slot)| Some((index, slot_cell(slot)?)))
    }

    /// Number of cells hosting a process (takes every cell's lock; for diagnostics).
    pub(crate) fn len(&self) -> usize {
        self.cells().filter(|cell| cell.is_occupied()).count()
    }

    /// Page `k`, if allocated.
    fn page(&self, k: usize) -> Option<&[Slot]> {
        let first = self.pages.get(k)?.load(Acquire);
        if first.is_null() {
            return None;
        }
        // SAFETY: a non-null page pointer was published (Release, after the slots were
        // initialised) by `create_cell` from a leaked `Box<[Slot]>` of exactly
        // `FIRST_PAGE << k` slots, which stays allocated until the table is dropped; `&self`
        // keeps the table alive for the returned borrow.
        Some(unsafe { std::slice::from_raw_parts(first, FIRST_PAGE << k) })
    }

    /// Slot `index`, if its page is allocated.
    fn slot(&self, index: usize) -> Option<&Slot> {
        let (k, offset) = locate(index);
        Some(&self.page(k)?[offset])
    }

    /// The cell of slot `index`, if created.
    fn cell(&self, index: usize) -> Option<&ProcessCell> {
        slot_cell(self.slot(index)?)
    }

    /// A slot whose cell exists (it was claimed fresh once: every slot on a free list).
    fn created_slot(&self, index: usize) -> &Slot {
        self.slot(index).expect("a slot on the free list exists")
    }

    fn created_cell(&self, index: usize) -> &ProcessCell {
        slot_cell(self.created_slot(index)).expect("a slot on the free list has a cell")
    }

    /// Creates the cell of fresh `index`, allocating its page if needed, and returns the slot's
    /// pointer to it. Each fresh index is handed out once, so no one else writes this slot.
    fn create_cell(&self, index: usize) -> *const ProcessCell {
        let (k, offset) = locate(index);
        let page = match self.page(k) {
            Some(page) => page,
            None => self.allocate_page(k),
        };
        let cell = Arc::into_raw(Arc::new(ProcessCell::new(self.mailbox_capacity)));
        // Release: a reader that finds the pointer (e.g. shutdown's scan) sees the cell built.
        page[offset].cell.store(cell.cast_mut(), Release);
        // Shutdown sets its flag, fences, then scans the pages and slots; the spawner checks the
        // flag after opening the cell. With this fence, either the scan finds the new cell (and
        // then its lock orders the rest) or the spawner sees the flag. Only fresh slots pay it.
        fence(SeqCst);
        cell
    }

    /// Page `k`, allocated by this call unless a concurrent one got there first.
    fn allocate_page(&self, k: usize) -> &[Slot] {
        let _grow = lock(&self.grow);
        if let Some(page) = self.page(k) {
            return page;
        }
        let slots: Box<[Slot]> = (0..FIRST_PAGE << k)
            .map(|_| Slot {
                cell: AtomicPtr::new(ptr::null_mut()),
            })
            .collect();
        self.pages[k].store(Box::into_raw(slots).cast::<Slot>(), Release);
        self.page(k).expect("just published")
    }

    /// Pops a free slot: from this thread's stack, else from any other.
    fn pop_free(&self) -> Option<usize> {
        let own = own_shard();
        (0..FREE_SHARDS).find_map(|i| self.pop_from(&self.free_heads[(own + i) % FREE_SHARDS]))
    }

    fn pop_from(&self, free_head: &AtomicU64) -> Option<usize> {
        let mut head = free_head.load(Acquire);
        loop {
            let index = (head & u64::from(u32::MAX)).checked_sub(1)? as usize;
            // Possibly stale if the slot was popped meanwhile; the tag then fails the CAS.
            let next = self.created_cell(index).next_free.load(Relaxed);
            let new = next_tag(head) | u64::from(next);
            match free_head.compare_exchange_weak(head, new, AcqRel, Acquire) {
                Ok(_) => return Some(index),
                Err(actual) => head = actual,
            }
        }
    }

    /// Pushes a free slot onto this thread's stack.
    fn push_free(&self, index: usize) {
        let cell = self.created_cell(index);
        let free_head = &self.free_heads[own_shard()];
        let mut head = free_head.load(Relaxed);
        loop {
            cell.next_free
                .store((head & u64::from(u32::MAX)) as u32, Relaxed);
            let new = next_tag(head) | (index as u64 + 1);
            // Release: the popper that takes this slot sees `next_free` and the cell's release.
            match free_head.compare_exchange_weak(head, new, Release, Relaxed) {
                Ok(_) => return,
                Err(actual) => head = actual,
            }
        }
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        for (k, page) in self.pages.iter().enumerate() {
            let first = page.load(Acquire);
            if first.is_null() {
                continue;
            }
            // SAFETY: as in `page`; `&mut self` means no borrow of a slot is left, and the
            // pointer came from `Box::into_raw` of a boxed slice of this length.
            let slots =
                unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(first, FIRST_PAGE << k)) };
            for slot in slots.iter() {
                let cell = slot.cell.load(Acquire);
                if !cell.is_null() {
                    // SAFETY: the slot owns the reference it got from `Arc::into_raw`; the
                    // pointer is never read again.
                    drop(unsafe { Arc::from_raw(cell) });
                }
            }
        }
    }
}

/// The slot's cell, if created.
fn slot_cell(slot: &Slot) -> Option<&ProcessCell> {
    let cell = slot.cell.load(Acquire);
    // SAFETY: a non-null pointer came from `Arc::into_raw` (`create_cell`, published with
    // Release, loaded here with Acquire) and the slot owns that reference until the table drops;
    // the returned borrow is tied to the slot's, hence to the table's.
    unsafe { cell.as_ref() }
}

/// Page and offset of slot `index`.
fn locate(index: usize) -> (usize, usize) {
    let x = index + FIRST_PAGE;
    let k = (x.ilog2() - FIRST_PAGE.ilog2()) as usize;
    (k, x - (FIRST_PAGE << k))
}

/// This thread's free-list stack.
fn own_shard() -> usize {
    if FREE_SHARDS == 1 {
        return 0;
    }
    // Thread-locals of different threads live at different addresses; drop the low bits (all
    // threads' blocks share their alignment) and mix the rest.
    let address = SHARD_PROBE.with(|probe| ptr::from_ref(probe) as usize);
    let hash = ((address >> 6) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (hash >> 60) as usize % FREE_SHARDS
}

/// The tag half of a new free-list head.
fn next_tag(head: u64) -> u64 {
    ((head >> 32).wrapping_add(1)) << 32
}

// SAFETY: the raw pointers are owned `Arc<ProcessCell>` references and boxed slot pages, both
// `Send + Sync` (`ProcessCell` is); every access goes through atomics or the cells' own locks.
unsafe impl Send for Table {}
// SAFETY: as above.
unsafe impl Sync for Table {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn finish(table: &Table, pid: Pid, cell: &ProcessCell) {
        cell.close();
        table.release(pid, cell);
    }

    #[test]
    fn pids_are_distinct_across_pages_and_reuse_bumps_the_generation() {
        let table = Table::new(usize::MAX);
        let claimed: Vec<_> = (0..FIRST_PAGE * 5)
            .map(|_| table.claim().unwrap())
            .collect();
        let indices: HashSet<usize> = claimed.iter().map(|(pid, _)| pid.index()).collect();
        assert_eq!(
            indices.len(),
            claimed.len(),
            "every live process has its own slot"
        );
        assert!(claimed.iter().all(|(pid, _)| pid.generation() == 1));
        for (pid, cell) in &claimed {
            assert!(std::ptr::eq(table.get(*pid).unwrap(), &**cell));
        }
        assert_eq!(table.len(), claimed.len());
        let (old, cell) = &claimed[3];
        finish(&table, *old, cell);
        assert_eq!(table.len(), claimed.len() - 1);
        // The freed slot is reused first, in its next generation.
        let (new, _) = table.claim().unwrap();
        assert_eq!((new.index(), new.generation()), (old.index(), 2));
        assert_ne!(new, *old);
        assert!(table.get(Pid::from_raw(u64::MAX).unwrap()).is_none());
    }

    #[test]
    fn entries_name_each_cell_by_its_slot_index_across_pages() {
        let table = Table::new(usize::MAX);
        let claimed: Vec<_> = (0..FIRST_PAGE * 3 + 5)
            .map(|_| table.claim().unwrap())
            .collect();
        let entries: Vec<_> = table.entries().collect();
        assert_eq!(entries.len(), claimed.len());
        for (pid, cell) in &claimed {
            let (_, found) = entries
                .iter()
                .find(|(index, _)| *index == pid.index())
                .expect("every claimed slot is an entry");
            assert!(std::ptr::eq(*found, &**cell));
        }
    }

    #[test]
    fn the_free_list_hands_every_slot_out_once() {
        let table = Table::new(usize::MAX);
        let first: Vec<_> = (0..100).map(|_| table.claim().unwrap()).collect();
        for (pid, cell) in &first {
            finish(&table, *pid, cell);
        }
        let second: Vec<_> = (0..100).map(|_| table.claim().unwrap()).collect();
        let slots: HashSet<usize> = second.iter().map(|(pid, _)| pid.index()).collect();
        assert_eq!(slots.len(), 100);
        assert!(second.iter().all(|(pid, _)| pid.generation() == 2));
        assert_eq!(
            table.fresh.load(Relaxed),
            100,
            "no fresh slot while freed ones remain"
        );
    }

    #[test]
    fn a_slot_whose_generations_ran_out_is_retired() {
        let table = Table::new(usize::MAX);
        let (pid, cell) = table.claim().unwrap();
        cell.close();
        let _ = cell.release();
        cell.set_generation(MAX_GENERATION - 1);
        let last = cell.open();
        assert_eq!(last, MAX_GENERATION);
        let last = Pid::new(pid.index(), last);
        finish(&table, last, &cell);
        let (next, _) = table.claim().unwrap();
        assert_ne!(next.index(), pid.index(), "retired, not reused");
    }

    #[test]
    fn concurrent_claims_and_releases_never_share_a_slot() {
        let table = Arc::new(Table::new(usize::MAX));
        let per_thread = if cfg!(miri) { 50 } else { 20_000 };
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let table = table.clone();
                std::thread::spawn(move || {
                    let mut seen = Vec::new();
                    let mut held = Vec::new();
                    for i in 0..per_thread {
                        let (pid, cell) = table.claim().unwrap();
                        seen.push(pid);
                        held.push((pid, cell));
                        if i % 3 != 0 {
                            let (pid, cell) = held.swap_remove(i % held.len());
                            finish(&table, pid, &cell);
                        }
                    }
                    for (pid, cell) in held {
                        finish(&table, pid, &cell);
                    }
                    seen
                })
            })
            .collect();
        let all: Vec<Pid> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        let distinct: HashSet<Pid> = all.iter().copied().collect();
        assert_eq!(distinct.len(), all.len(), "a PID was issued twice");
        assert_eq!(table.len(), 0);
    }
}
