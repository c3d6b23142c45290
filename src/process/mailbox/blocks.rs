//! The mailbox intake's queue: unbounded, many producers, one consumer at a time, in blocks of
//! [`BLOCK_CAP`] slots that the consumer hands back to the producers instead of freeing them.
//!
//! # Why not a crate's queue
//! The intake (`intake.rs`) measured three (docs/bench-process-history.md, "Tried on 2026-11-24 and
//! not kept"). `crossbeam_queue::ArrayQueue` is bounded: a sender that outruns the drain by
//! more than its slots spills to the locked queue, and the process bench's `fan_in` (two
//! threads and a thousand processes sending to one) spent a fifth of its samples there.
//! `crossbeam_queue::SegQueue` never spills and took `fan_in` from 1.52–2.32 to 1.08–1.11 ms,
//! but it allocates a block every 31 pushes on the sender and frees it on the worker: under
//! glibc that is the arena lock across threads, and `send_to_blocked` lost a quarter (651–687
//! against 503–549 µs). Tokio's channel is built for an async receiver with a waker of its own,
//! which the mailbox already has in the state word. This queue is SegQueue's producer side
//! (the same claim-then-write protocol) with a consumer that recycles: a drained block becomes
//! the *spare*, which the producer that fills the current block takes as the next one. A
//! sender that a worker keeps up with trades the same two blocks with it for ever.
//!
//! # Layout
//! A position is `lap * LAP + offset`: block `lap`'s slot `offset`. `offset == BLOCK_CAP` is not
//! a slot but a sentinel: the tail sits there while the producer that claimed a block's last
//! slot installs the next block. Positions only grow, so a position names one slot of one lap
//! for ever (a `usize` of positions wraps after 2⁶⁴ pushes on 64-bit targets, 2³² on 32-bit
//! ones, as crossbeam's).
//!
//! # Protocol 8: push (any thread)
//! 1. Load the tail position (`Acquire`), then the tail block (`Acquire`). At the sentinel, back
//!    off and reload: the next block is being installed.
//! 2. Claiming the block's last slot means installing the next block: take the spare (a `swap`
//!    with null, `Acquire`: the consumer reset it before publishing it) or allocate one, before
//!    the claim, so the installation that others wait for is short.
//! 3. Claim the position with a CAS `position → position + 1` (`AcqRel`). It succeeds only if no
//!    one claimed it first, and — positions never repeat — only if no block was installed since
//!    step 1's loads, so the block loaded there is the claimed position's block. On failure,
//!    reload and go to 1. A producer touches a block only after such a claim.
//! 4. The claimant of a last slot installs the next block: the tail block (`Release`), then the
//!    tail past the sentinel (`fetch_add`, `Release`: whoever reads the new position sees the
//!    block), then the old block's `next` (`Release`).
//! 5. Write the value into the slot, then set its `ready` flag (`Release`). A block taken in step
//!    2 but not installed (the claim went to another position) goes back to the spare, or is
//!    freed if there is one already.
//!
//! # Protocol 8: pop (one consumer at a time; the mailbox lock serialises them)
//! 1. At the head position's slot, load `ready` (`Acquire`). Set: go to 2. Not set: is the
//!    position claimed? Asked with a CAS of the tail from the head's position to itself
//!    (`AcqRel`): success means nothing is claimed, the queue is empty, return
//!    [`Pop::Empty`]; failure means the slot is claimed and its value on the way (push step
//!    5): return [`Pop::Unwritten`] at once, leaving the head where it is.
//!    - A CAS, not a load: the intake's caller reads the process's state word after its push and
//!      may write nothing there (`intake.rs`, "No wake is lost"). Against a load, the C++ model
//!      lets that read and this one both see old values. A successful CAS is a write in the
//!      tail's modification order: a claim after it reads from it, and so sees everything the
//!      consumer did before, the clearing of the flag included.
//!    - Never waiting for the value (but in a process's `close`, `intake.rs` step 4): the
//!      consumer holds the mailbox lock, and a producer
//!      preempted between its claim and its write (16 senders on 2 cores) would stall the
//!      draining worker and every locked sender behind it. The producer that writes the slot
//!      tells the process afterwards (`intake.rs`, protocol 7 step 3), so a consumer that left
//!      it unread loses nothing; how the intake keeps each sender's order past such a slot is
//!      in `intake.rs` ("Each sender's messages stay in order").
//! 2. Read the value, clear `ready` (the block will be reused), advance the head.
//! 3. After a block's last slot, follow `next` (non-null: its installer stored it before
//!    writing that slot, and step 1's `Acquire` saw the write), then recycle the drained block:
//!    reset `next`, publish it as the spare (`Release`, a CAS from null), or free it if a spare is
//!    there. No producer still holds it: every slot was claimed and written, and a producer with a
//!    stale pointer fails its claim (push step 3).
//!
//! Checked by `loom_blocks_two_producers_keep_every_value_once`,
//! `loom_blocks_recycled_block_reused_while_the_consumer_drains` and
//! `loom_blocks_emptiness_check_against_a_flag_read_after_the_push`
//! (`process/tests/loom_blocks.rs`, at [`BLOCK_CAP`] 2 so that every model crosses blocks), by
//! the intake's models, which run on this queue, and under Miri by this module's tests.

use crate::loom::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use crate::loom::UnsafeCell;
use crossbeam_utils::CachePadded;
use std::mem::MaybeUninit;
use std::ptr;

/// Slots per block: a block is `BLOCK_CAP` slots and a pointer (2.9 KB for the mailbox's
/// 96-byte slots). Two in the loom build, so that small models cross blocks.
#[cfg(not(loom))]
pub(crate) const BLOCK_CAP: usize = 31;
#[cfg(loom)]
pub(crate) const BLOCK_CAP: usize = 2;

/// Positions per block: its slots and the sentinel (module docs, "Layout").
const LAP: usize = BLOCK_CAP + 1;

struct Slot<T> {
    value: UnsafeCell<MaybeUninit<T>>,
    /// Set when `value` is written (push step 5), cleared when it is taken (pop step 2).
    ready: AtomicBool,
}

struct Block<T> {
    /// The next block, once the claimant of this one's last slot installed it.
    next: AtomicPtr<Block<T>>,
    slots: [Slot<T>; BLOCK_CAP],
}

impl<T> Block<T> {
    /// A new, empty block, owned by the caller.
    #[cold]
    fn allocate() -> *mut Block<T> {
        Box::into_raw(Box::new(Block {
            next: AtomicPtr::new(ptr::null_mut()),
            slots: std::array::from_fn(|_| Slot {
                value: UnsafeCell::new(MaybeUninit::uninit()),
                ready: AtomicBool::new(false),
            }),
        }))
    }

    /// Frees an empty block (no slot holds a value).
    ///
    /// # Safety
    /// `block` came from [`allocate`](Self::allocate), and nothing else refers to it.
    unsafe fn free(block: *mut Block<T>) {
        // SAFETY: the caller's contract; the slots hold `MaybeUninit`s, dropped as nothing.
        drop(unsafe { Box::from_raw(block) });
    }
}

/// The producers' end.
struct Tail<T> {
    position: AtomicUsize,
    block: AtomicPtr<Block<T>>,
}

/// The consumer's end. Atomics only so that the struct is `Sync`: one consumer at a time (the
/// mailbox lock orders them) reads and writes them, `Relaxed`.
struct Head<T> {
    position: AtomicUsize,
    block: AtomicPtr<Block<T>>,
    /// A drained block for the next installation, or null (module docs).
    spare: AtomicPtr<Block<T>>,
}

/// What [`BlockQueue::pop`] found at the head.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Pop<T> {
    /// The oldest value, taken.
    Value(T),
    /// Nothing claimed: the queue is empty.
    Empty,
    /// The head slot is claimed and its value not written yet (pop step 1): the values behind
    /// it wait until it is.
    Unwritten,
}

#[cfg(test)]
impl<T> Pop<T> {
    /// The value, if one was taken.
    pub(crate) fn value(self) -> Option<T> {
        match self {
            Pop::Value(value) => Some(value),
            Pop::Empty | Pop::Unwritten => None,
        }
    }
}

/// An unbounded MPSC queue of `T` (module docs).
pub(crate) struct BlockQueue<T> {
    head: CachePadded<Head<T>>,
    tail: CachePadded<Tail<T>>,
}

// SAFETY: values move from producer threads to the consumer's, so `T: Send` is needed and
// enough; the blocks are reached only through the protocol above.
unsafe impl<T: Send> Send for BlockQueue<T> {}
// SAFETY: as above; shared access is `push` (any thread) and the consumer's `unsafe` methods,
// whose contract excludes two consumers at once.
unsafe impl<T: Send> Sync for BlockQueue<T> {}

impl<T> BlockQueue<T> {
    /// What one block takes on the heap.
    #[cfg(not(loom))]
    pub(crate) const BLOCK_BYTES: usize = std::mem::size_of::<Block<T>>();

    /// An empty queue with its first block.
    pub(crate) fn new() -> BlockQueue<T> {
        let block = Block::allocate();
        BlockQueue {
            head: CachePadded::new(Head {
                position: AtomicUsize::new(0),
                block: AtomicPtr::new(block),
                spare: AtomicPtr::new(ptr::null_mut()),
            }),
            tail: CachePadded::new(Tail {
                position: AtomicUsize::new(0),
                block: AtomicPtr::new(block),
            }),
        }
    }

    /// Queues `value` behind every value whose push finished before this one started (protocol
    /// 8, push). Never blocks on the consumer; waits only, briefly, while another producer
    /// installs the next block.
    #[inline]
    pub(crate) fn push(&self, value: T) {
        self.claim().write(value);
    }

    /// Push steps 1–4: a claimed slot, for [`Claim::write`] (step 5). The caller must write
    /// it, and soon: every consumer stops at a claimed, unwritten slot until it is.
    #[inline(always)]
    pub(crate) fn claim(&self) -> Claim<'_, T> {
        let mut backoff = Backoff::default();
        let mut position = self.tail.position.load(Ordering::Acquire);
        let mut block = self.tail.block.load(Ordering::Acquire);
        // A block taken for installation (step 2), until installed or handed back.
        let mut next: *mut Block<T> = ptr::null_mut();
        loop {
            let offset = position % LAP;
            if offset == BLOCK_CAP {
                // Step 1: the next block is being installed.
                backoff.snooze();
                position = self.tail.position.load(Ordering::Acquire);
                block = self.tail.block.load(Ordering::Acquire);
                continue;
            }
            if offset + 1 == BLOCK_CAP && next.is_null() {
                next = self.take_spare();
            }
            match self.tail.position.compare_exchange_weak(
                position,
                position + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    if offset + 1 == BLOCK_CAP {
                        // Step 4.
                        let installed = std::mem::replace(&mut next, ptr::null_mut());
                        self.tail.block.store(installed, Ordering::Release);
                        self.tail.position.fetch_add(1, Ordering::Release);
                        // SAFETY: `block` is the claimed position's block (step 3), not
                        // recycled before its last slot — ours — is written.
                        unsafe { (*block).next.store(installed, Ordering::Release) };
                    }
                    // SAFETY: as above; the claim makes the slot ours alone to write, and
                    // `offset < BLOCK_CAP`. The block outlives the borrow: it is recycled only
                    // after this slot is written and taken.
                    let slot = unsafe { (*block).slots.get_unchecked(offset) };
                    return Claim {
                        queue: self,
                        slot,
                        next,
                    };
                }
                Err(current) => {
                    position = current;
                    block = self.tail.block.load(Ordering::Acquire);
                    backoff.spin();
                }
            }
        }
    }

    /// Claims a slot whose value a test writes later ([`Claim::write`]): a sender preempted
    /// between its claim and its write, on demand. A claim never written stops every consumer
    /// at its slot for good.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn claim_for_test(&self) -> Claim<'_, T> {
        self.claim()
    }

    /// Takes the oldest value; or tells that the queue is empty, or that the oldest value is
    /// claimed but not written yet (protocol 8, pop). Never waits.
    ///
    /// # Safety
    /// No other consumer call ([`pop`](Self::pop), [`is_empty`](Self::is_empty),
    /// [`len`](Self::len)) on this queue runs at the same time: the mailbox lock serialises
    /// them.
    #[inline(always)]
    pub(crate) unsafe fn pop(&self) -> Pop<T> {
        let position = self.head.position.load(Ordering::Relaxed);
        let block = self.head.block.load(Ordering::Relaxed);
        let offset = position % LAP;
        debug_assert!(offset < BLOCK_CAP, "the head skips the sentinel");
        // SAFETY: the head block is live: only this consumer recycles blocks, and only the ones
        // it has left; `offset < BLOCK_CAP`.
        let slot = unsafe { (*block).slots.get_unchecked(offset) };
        if !slot.ready.load(Ordering::Acquire) {
            // Step 1: empty, or claimed with its value on the way (left for a later pop).
            return if self.nothing_claimed_at(position) {
                Pop::Empty
            } else {
                Pop::Unwritten
            };
        }
        // SAFETY: `ready` (Acquire) says the value was written (push step 5) and not taken:
        // reading it moves it out, and clearing `ready` makes sure it is read once.
        let value = slot
            .value
            .with(|value_ptr| unsafe { ptr::read(value_ptr).assume_init() });
        slot.ready.store(false, Ordering::Relaxed);
        if offset + 1 == BLOCK_CAP {
            // SAFETY: as above.
            let next = unsafe { (*block).next.load(Ordering::Acquire) };
            debug_assert!(
                !next.is_null(),
                "installed before the last slot was written"
            );
            self.head.block.store(next, Ordering::Relaxed);
            self.head.position.store(position + 2, Ordering::Relaxed);
            // SAFETY: every slot of `block` was claimed, written and taken; the head has left it.
            unsafe { self.recycle(block) };
        } else {
            self.head.position.store(position + 1, Ordering::Relaxed);
        }
        Pop::Value(value)
    }

    /// `true` if [`pop`](Self::pop) would return `None` now.
    ///
    /// # Safety
    /// As [`pop`](Self::pop).
    #[inline]
    pub(crate) unsafe fn is_empty(&self) -> bool {
        let position = self.head.position.load(Ordering::Relaxed);
        let block = self.head.block.load(Ordering::Relaxed);
        // SAFETY: as in `pop`.
        let slot = unsafe { (*block).slots.get_unchecked(position % LAP) };
        !slot.ready.load(Ordering::Acquire) && self.nothing_claimed_at(position)
    }

    /// Pop step 1: `true` if no producer has claimed `position` (the head's): the tail is still
    /// there. A CAS of the tail to itself rather than a load (module docs, pop step 1).
    #[inline]
    fn nothing_claimed_at(&self, position: usize) -> bool {
        self.tail
            .position
            .compare_exchange(position, position, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Values claimed and not yet taken (some perhaps still being written): for statistics.
    ///
    /// # Safety
    /// As [`pop`](Self::pop).
    pub(crate) unsafe fn len(&self) -> usize {
        let slots =
            |position: usize| (position / LAP) * BLOCK_CAP + (position % LAP).min(BLOCK_CAP);
        let tail = self.tail.position.load(Ordering::Acquire);
        let head = self.head.position.load(Ordering::Relaxed);
        slots(tail).saturating_sub(slots(head))
    }

    /// Frees the spare block, if there is one: for a queue that will sit idle. Any thread; a
    /// later installation allocates again.
    pub(crate) fn free_spare(&self) {
        let spare = self.swap_out_spare();
        if !spare.is_null() {
            // SAFETY: the swap made the caller its only owner; a spare is empty.
            unsafe { Block::free(spare) };
        }
    }

    /// The spare block, now owned by the caller, or null. `Acquire`: the consumer reset it
    /// before publishing it (pop step 3).
    fn swap_out_spare(&self) -> *mut Block<T> {
        self.head.spare.swap(ptr::null_mut(), Ordering::Acquire)
    }

    /// Push step 2: the spare block, or a new one.
    fn take_spare(&self) -> *mut Block<T> {
        let spare = self.swap_out_spare();
        if spare.is_null() {
            Block::allocate()
        } else {
            spare
        }
    }

    /// Makes `block`, empty and owned by the caller, the spare, or frees it if there is one.
    fn give_back(&self, block: *mut Block<T>) {
        if self
            .head
            .spare
            .compare_exchange(ptr::null_mut(), block, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            // SAFETY: the caller owns `block`, which is empty; it was not published.
            unsafe { Block::free(block) };
        }
    }

    /// Pop step 3: resets a drained block and gives it back.
    ///
    /// # Safety
    /// Every slot of `block` was taken and no producer can reach it any more.
    unsafe fn recycle(&self, block: *mut Block<T>) {
        // SAFETY: the caller's contract: the consumer owns the block now.
        unsafe { (*block).next.store(ptr::null_mut(), Ordering::Relaxed) };
        self.give_back(block);
    }
}

/// A claimed slot (push steps 1–4 done), to write: push step 5.
#[must_use = "a claimed slot must be written, or every consumer stops at it"]
pub(crate) struct Claim<'a, T> {
    queue: &'a BlockQueue<T>,
    slot: &'a Slot<T>,
    /// A block taken for an installation that went to another producer, to hand back.
    next: *mut Block<T>,
}

impl<T> Claim<'_, T> {
    /// Push step 5: writes the value and publishes it.
    #[inline(always)]
    pub(crate) fn write(self, value: T) {
        let slot = self.slot;
        // SAFETY: the claim makes the slot ours alone to write; the consumer reads the value
        // only after `ready`, set below.
        slot.value
            .with_mut(|value_ptr| unsafe { value_ptr.write(MaybeUninit::new(value)) });
        slot.ready.store(true, Ordering::Release);
        if !self.next.is_null() {
            self.queue.give_back(self.next);
        }
    }
}

impl<T> Drop for BlockQueue<T> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no producer is inside `push` and no other consumer exists, so
        // every claimed slot is written and `pop`'s contract holds.
        while let Pop::Value(value) = unsafe { self.pop() } {
            drop(value);
        }
        // After the last value the head block is the tail block, whose `next` is unset (a
        // block is installed only when a last slot is claimed, and that slot was taken).
        let block = self.head.block.load(Ordering::Relaxed);
        // SAFETY: the head block is live until freed below.
        debug_assert!(unsafe { (*block).next.load(Ordering::Relaxed) }.is_null());
        // SAFETY: the head block and the spare belong to the queue alone now.
        unsafe { Block::free(block) };
        let spare = self.head.spare.load(Ordering::Relaxed);
        if !spare.is_null() {
            // SAFETY: as above.
            unsafe { Block::free(spare) };
        }
    }
}

/// Spinning for a claim or an installation: crossbeam's exponential backoff normally; a
/// yield under loom, whose models need every spin loop to yield.
#[derive(Default)]
pub(super) struct Backoff {
    #[cfg(not(loom))]
    inner: crossbeam_utils::Backoff,
}

impl Backoff {
    #[inline]
    fn spin(&mut self) {
        #[cfg(not(loom))]
        self.inner.spin();
        #[cfg(loom)]
        crate::loom::thread::yield_now();
    }

    pub(super) fn snooze(&mut self) {
        #[cfg(not(loom))]
        self.inner.snooze();
        #[cfg(loom)]
        crate::loom::thread::yield_now();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize as Count;
    use std::sync::Arc;

    /// Counts its drops, so a value dropped twice or never shows.
    struct Counted(Arc<Count>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn pop_all<T>(queue: &BlockQueue<T>) -> Vec<T> {
        // SAFETY: the test's one consumer.
        std::iter::from_fn(|| unsafe { queue.pop() }.value()).collect()
    }

    #[test]
    fn values_come_out_in_order_across_blocks() {
        let queue = BlockQueue::new();
        let total = BLOCK_CAP as u64 * 3 + 5;
        for n in 0..total {
            queue.push(n);
        }
        // SAFETY: the test's one consumer.
        assert_eq!(unsafe { queue.len() }, total as usize);
        assert_eq!(pop_all(&queue), (0..total).collect::<Vec<_>>());
        // SAFETY: as above.
        assert!(unsafe { queue.is_empty() });
        // SAFETY: as above.
        assert_eq!(unsafe { queue.len() }, 0);
    }

    #[test]
    fn a_drained_block_is_reused_for_the_next_one() {
        let queue = BlockQueue::new();
        let first = queue.head.block.load(Ordering::Relaxed);
        for n in 0..BLOCK_CAP as u64 {
            queue.push(n);
        }
        assert_eq!(pop_all(&queue).len(), BLOCK_CAP);
        assert_eq!(queue.head.spare.load(Ordering::Relaxed), first, "recycled");
        for n in 0..BLOCK_CAP as u64 {
            queue.push(n);
        }
        // The second block's last push installed the first block again.
        assert_eq!(queue.tail.block.load(Ordering::Relaxed), first);
        assert!(queue.head.spare.load(Ordering::Relaxed).is_null());
        assert_eq!(pop_all(&queue).len(), BLOCK_CAP);
    }

    #[test]
    fn dropping_the_queue_drops_every_value_left_once() {
        let drops = Arc::new(Count::new(0));
        let queue = BlockQueue::new();
        let total = BLOCK_CAP as u64 * 2 + 3;
        for _ in 0..total {
            queue.push(Counted(drops.clone()));
        }
        let taken = (0..BLOCK_CAP + 1)
            // SAFETY: the test's one consumer.
            .map(|_| unsafe { queue.pop() }.value().expect("queued"))
            .collect::<Vec<_>>();
        drop(taken);
        drop(queue);
        assert_eq!(
            drops.load(std::sync::atomic::Ordering::Relaxed),
            total as usize
        );
    }

    #[test]
    fn racing_producers_lose_nothing_and_duplicate_nothing() {
        let producers = 3;
        // Fewer under Miri, which is slow, but still across many blocks.
        let per_producer: u64 = if cfg!(miri) { 200 } else { 100_000 };
        let queue = Arc::new(BlockQueue::new());
        let threads: Vec<_> = (0..producers)
            .map(|p| {
                let queue = queue.clone();
                std::thread::spawn(move || {
                    for n in 0..per_producer {
                        queue.push((p, n));
                    }
                })
            })
            .collect();
        let mut next = vec![0u64; producers];
        let mut received = 0;
        // A hang guard, not synchronisation: a lost value would otherwise spin for ever.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        // This thread is the one consumer, popping while they push.
        while received < producers as u64 * per_producer {
            assert!(std::time::Instant::now() < deadline, "lost: {next:?}");
            // SAFETY: the one consumer.
            match unsafe { queue.pop() } {
                Pop::Value((p, n)) => {
                    assert_eq!(n, next[p], "producer {p}'s values in order, each once");
                    next[p] += 1;
                    received += 1;
                }
                Pop::Empty | Pop::Unwritten => std::thread::yield_now(),
            }
        }
        for thread in threads {
            thread.join().expect("producer");
        }
        // SAFETY: as above.
        assert_eq!(unsafe { queue.pop() }, Pop::Empty);
        assert!(next.iter().all(|&n| n == per_producer));
    }
}
