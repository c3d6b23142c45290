//! The process table: a pool of process cells, indexed by the slot part of a [`Pid`].
//!
//! A [`Pid`] is a slot index and the generation of that slot's current incarnation. Looking a
//! PID up is two dependent loads (page, then cell) with no lock and no hashing; whether the cell
//! still hosts *that* process is decided by the cell itself, under its mailbox lock, from the
//! generation (`process/mailbox/mod.rs`). So `send` never takes a table-wide lock, and spawning or
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
//! The free list (`free_list.rs`) moves released indices between threads in batches: a spawn
//! or a finish touches no line another core wrote, except once per batch.

use super::free_list::FreeList;
use crate::loom::atomic::{fence, AtomicPtr, AtomicUsize, Ordering::*};
use crate::loom::{lock, Arc, Mutex};
use crate::process::mailbox::{Incarnation, ProcessCell, Watch};
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

struct Slot {
    /// The cell, created by the fresh claimer; owns one `Arc` reference (`Arc::into_raw`).
    /// Written once, so the slot array stays read-mostly (shared in every core's cache).
    cell: AtomicPtr<ProcessCell>,
}

pub(crate) struct Table {
    /// Page `k`: a leaked `Box<[Slot]>` of `FIRST_PAGE << k` slots, or null.
    pages: Box<[AtomicPtr<Slot>]>,
    /// Serialises page allocation (rare: once per page).
    grow: Mutex<()>,
    /// The next index never handed out.
    fresh: AtomicUsize,
    /// Released slots (protocol step 2), for claims (step 1).
    free: FreeList,
    /// Claims (step 1) and releases (step 2) so far: their difference is the cells hosting a
    /// process — what [`len`](Self::len) counts by visiting every cell — so that shutdown's seal
    /// reads it in constant time, whatever the table's size ([`occupied`](Self::occupied)). Two
    /// counts on lines of their own, not one: a thread that spawns and a worker that finishes
    /// each write only their own, where one count's line went back and forth between them at
    /// every process (`probe spawn_from_thread`: the release's decrement was most of its time).
    claimed: CachePadded<AtomicUsize>,
    released: CachePadded<AtomicUsize>,
    /// The mailbox capacity of new processes (`mailbox_capacity`), but those with a bound of
    /// their own (`MailboxBound`).
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
            free: FreeList::new(),
            claimed: CachePadded::new(AtomicUsize::new(0)),
            released: CachePadded::new(AtomicUsize::new(0)),
            mailbox_capacity,
        }
    }

    /// [`claim_as`](Self::claim_as) for an anonymous process (tests).
    #[cfg(test)]
    pub(crate) fn claim(&self) -> Option<(Pid, Arc<ProcessCell>)> {
        self.claim_as(Incarnation::default())
    }

    /// Protocol step 1: a cell for a new process, opened (recording `incarnation` for
    /// `process_info`, with the mailbox capacity its `mailbox` bound resolves to against the
    /// table's), and the process's PID. `None` when every index is in use (or retired).
    pub(crate) fn claim_as(&self, incarnation: Incarnation) -> Option<(Pid, Arc<ProcessCell>)> {
        self.claim_from(incarnation, 0)
    }

    /// [`claim_as`](Self::claim_as), the cell opened in generation `at_least` if that is past
    /// its next one (a test harness's process: `stepped.rs`). `None` also if `at_least` is past
    /// the last generation.
    pub(crate) fn claim_from(
        &self,
        incarnation: Incarnation,
        at_least: u64,
    ) -> Option<(Pid, Arc<ProcessCell>)> {
        if at_least > MAX_GENERATION {
            return None;
        }
        // Raw pointers, as the slot stores them: their provenance covers the whole `Arc`
        // allocation, which taking a reference of our own needs (a `&ProcessCell` would not do).
        let (index, cell) = match self.free.claim() {
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
        let capacity = incarnation.mailbox.capacity(self.mailbox_capacity);
        let generation = cell.open_as(incarnation, capacity, at_least);
        // Before the spawn's later steps, which take shutdown's tally lock if it has begun: a
        // seal that comes after them sees this count (`seal`, in `lifecycle.rs`).
        self.claimed.fetch_add(1, AcqRel);
        Some((Pid::new(index, generation), cell))
    }

    /// Protocol step 2, for the process `pid` whose cell is closed. Returns the watches
    /// registered on it, for the caller to signal (`links.rs`).
    pub(crate) fn release(&self, pid: Pid, cell: &ProcessCell) -> (Vec<Watch>, bool) {
        let (generation, watches, cancel_asked) = cell.release_asked();
        debug_assert_eq!(generation, pid.generation());
        self.released.fetch_add(1, AcqRel);
        if generation < MAX_GENERATION {
            self.free.release(pid.index());
        } else {
            tracing::debug!(%pid, "process table slot retired: its generations are used up");
        }
        (watches, cancel_asked)
    }

    /// [`release`](Self::release), but the slot is retired, never claimed again: a test
    /// harness's process (`stepped.rs`), whose generation was drawn from a program-wide count
    /// and whose slot's next ones may be another harness's PIDs.
    pub(crate) fn retire(&self, pid: Pid, cell: &ProcessCell) -> (Vec<Watch>, bool) {
        let (generation, watches, cancel_asked) = cell.release_asked();
        debug_assert_eq!(generation, pid.generation());
        self.released.fetch_add(1, AcqRel);
        (watches, cancel_asked)
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

    /// Number of cells hosting a process (takes every cell's lock; for diagnostics and tests:
    /// [`occupied`](Self::occupied) is the same count, read in constant time).
    pub(crate) fn len(&self) -> usize {
        self.cells().filter(|cell| cell.is_occupied()).count()
    }

    /// Number of cells hosting a process — opened by a claim and not yet released — without
    /// visiting them: shutdown's seal (`lifecycle.rs`), which must not take time that grows with
    /// the table. A claim or release that happens-before the call is counted; one concurrent
    /// with it may or may not be (as a cell the walk of [`len`](Self::len) visits before or
    /// after its claim).
    pub(crate) fn occupied(&self) -> usize {
        // Releases first: every release read here acquires its claim (which happens-before it:
        // the cell passes from claim to release through the process), so the claims read next
        // count it, and the difference never underflows.
        let released = self.released.load(Acquire);
        self.claimed.load(Acquire) - released
    }

    /// Visits the cells of slots `from..`, at most `slots` slot indices of allocated pages (a
    /// page not allocated is skipped without counting); returns the index to resume from, or
    /// `None` once past the last page. A walk in pieces, for the forced stop's closers
    /// (`tasks.rs`): each piece is short, so the walk can stop at a deadline between two.
    pub(crate) fn visit_from(
        &self,
        from: usize,
        slots: usize,
        mut visit: impl FnMut(&ProcessCell),
    ) -> Option<usize> {
        let mut index = from;
        let mut left = slots;
        while left > 0 {
            if index >= MAX_SLOTS {
                return None;
            }
            let (k, offset) = locate(index);
            let Some(page) = self.page(k) else {
                // Not allocated: skip to the next page (indices run on across pages).
                index += (FIRST_PAGE << k) - offset;
                continue;
            };
            let end = (offset + left).min(page.len());
            for slot in &page[offset..end] {
                if let Some(cell) = slot_cell(slot) {
                    visit(cell);
                }
            }
            left -= end - offset;
            index += end - offset;
        }
        (index < MAX_SLOTS).then_some(index)
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
}

impl Drop for Table {
    fn drop(&mut self) {
        self.free.clear();
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

// SAFETY: the raw pointers are owned `Arc<ProcessCell>` references and boxed slot pages, both
// `Send + Sync` (`ProcessCell` is); every access goes through atomics or the cells' own locks.
unsafe impl Send for Table {}
// SAFETY: as above.
unsafe impl Sync for Table {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::process::mailbox::MailboxBound;
    use std::collections::HashSet;

    fn finish(table: &Table, pid: Pid, cell: &ProcessCell) {
        cell.close();
        let _ = table.release(pid, cell);
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
        assert_eq!(table.occupied(), claimed.len());
        let (old, cell) = &claimed[3];
        finish(&table, *old, cell);
        assert_eq!(table.len(), claimed.len() - 1);
        assert_eq!(table.occupied(), claimed.len() - 1);
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
    fn a_walk_in_pieces_visits_every_cell_once_across_pages() {
        let table = Table::new(usize::MAX);
        let claimed: Vec<_> = (0..FIRST_PAGE * 7 + 3)
            .map(|_| table.claim().unwrap())
            .collect();
        for piece in [1, 5, FIRST_PAGE, FIRST_PAGE * 3 + 1] {
            let mut visited = Vec::new();
            let mut next = Some(0);
            let mut pieces = 0;
            while let Some(from) = next {
                next = table.visit_from(from, piece, |cell| visited.push(cell as *const _));
                pieces += 1;
                assert!(pieces < MAX_SLOTS, "the walk ends");
            }
            let all: Vec<*const ProcessCell> = table.cells().map(|cell| cell as *const _).collect();
            assert_eq!(visited, all, "pieces of {piece}");
            assert_eq!(visited.len(), claimed.len());
        }
        let mut none = 0;
        assert_eq!(
            Table::new(1).visit_from(0, 10, |_| none += 1),
            None,
            "no page allocated: the walk ends at once"
        );
        assert_eq!(none, 0);
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
    fn slots_released_by_an_exited_thread_or_cached_for_another_table_are_reused() {
        let (a, b) = (Arc::new(Table::new(usize::MAX)), Table::new(usize::MAX));
        let claimed: Vec<_> = (0..10).map(|_| a.claim().unwrap()).collect();
        // Released on a thread that then exits: its cache goes back to `a`'s pool. (A plain
        // thread's `join` returns after its thread-locals are destroyed; a scoped thread's does
        // not wait for that.)
        let releaser = {
            let a = a.clone();
            std::thread::spawn(move || {
                for (pid, cell) in &claimed {
                    finish(&a, *pid, cell);
                }
            })
        };
        releaser.join().unwrap();
        // This thread caches `a`'s slots, then serves `b`: they go back to `a`'s pool.
        let again: Vec<_> = (0..10).map(|_| a.claim().unwrap()).collect();
        assert!(again.iter().all(|(pid, _)| pid.generation() == 2));
        for (pid, cell) in &again {
            finish(&a, *pid, cell);
        }
        let (pid, cell) = b.claim().unwrap();
        finish(&b, pid, &cell);
        let claimer = {
            let a = a.clone();
            std::thread::spawn(move || (0..10).map(|_| a.claim().unwrap().0).collect::<Vec<_>>())
        };
        let third = claimer.join().unwrap();
        assert!(third.iter().all(|pid| pid.generation() == 3));
        assert_eq!(a.fresh.load(Relaxed), 10, "every released slot was reused");
    }

    #[test]
    fn the_mailbox_capacity_is_each_incarnations_own() {
        let table = Table::new(1);
        let supervisor = Incarnation {
            mailbox: MailboxBound::Unbounded,
            ..Incarnation::default()
        };
        let (pid, cell) = table.claim_as(supervisor).unwrap();
        assert!(!cell.is_bounded(), "a supervisor's mailbox is unbounded");
        finish(&table, pid, &cell);
        let (next, cell) = table.claim().unwrap();
        assert_eq!(next.index(), pid.index(), "the same cell");
        assert!(
            cell.is_bounded(),
            "the next process has the table's capacity"
        );
        finish(&table, next, &cell);
        let refusing = Incarnation {
            mailbox: MailboxBound::Capacity(0),
            ..Incarnation::default()
        };
        let (pid, cell) = table.claim_as(refusing).unwrap();
        assert!(
            cell.never_has_room(),
            "a capacity of its own, below the table's"
        );
        finish(&table, pid, &cell);
        let unbounded_table = Table::new(usize::MAX);
        let bounded = Incarnation {
            mailbox: MailboxBound::Capacity(3),
            ..Incarnation::default()
        };
        let (_, cell) = unbounded_table.claim_as(bounded).unwrap();
        assert!(cell.is_bounded(), "bounded on an unbounded table");
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
        assert_eq!(table.occupied(), 0);
    }
}
