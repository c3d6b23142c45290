//! Loom models of the intake queue (`mailbox/blocks.rs`, protocol 8), at two slots per block so
//! that every model crosses blocks: racing producers at a block boundary, a recycled block
//! reinstalled while the consumer drains, and the emptiness check against a flag the producer
//! reads after its push (the store-then-load pattern of the intake's protocol 7).
//!
//! Run: `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2 cargo test --lib --release loom_blocks`

use crate::loom::atomic::{AtomicBool, Ordering};
use crate::loom::model::model;
use crate::loom::{thread, Arc};
use crate::process::mailbox::blocks::{BlockQueue, Pop, BLOCK_CAP};

/// Pops until `count` values arrived, yielding while the next is not there yet.
fn pop_n(queue: &BlockQueue<(usize, usize)>, count: usize) -> Vec<(usize, usize)> {
    let mut values = Vec::with_capacity(count);
    while values.len() < count {
        // SAFETY: the model's one consumer.
        match unsafe { queue.pop() } {
            Pop::Value(value) => values.push(value),
            Pop::Empty | Pop::Unwritten => thread::yield_now(),
        }
    }
    values
}

/// Protocol 8, push: two producers race for the last slot of a block and the first of the
/// next: one installs the next block while the other waits at the sentinel, or loses its claim
/// and retries (and hands back the block it took for an installation it did not make). Every
/// value is read once afterwards, and the drop frees every block once (loom reports a leak).
/// The consumer pops after the producers are done: a consumer spinning on a claimed slot while
/// a producer spins at the sentinel is two spin loops, which loom cannot bound; the consumer
/// racing a producer is the next model's, and the intake's.
#[test]
fn loom_blocks_two_producers_keep_every_value_once() {
    assert_eq!(BLOCK_CAP, 2);
    model(|| {
        let queue = Arc::new(BlockQueue::new());
        // Before the threads start: the tail at the first block's last slot.
        queue.push((9, 9));
        // SAFETY: the model's one consumer.
        assert_eq!(unsafe { queue.pop() }, Pop::Value((9, 9)));
        let producers: Vec<_> = (0..2)
            .map(|p| {
                let queue = queue.clone();
                thread::spawn(move || queue.push((p, 0)))
            })
            .collect();
        for producer in producers {
            producer.join().unwrap();
        }
        let mut values = pop_n(&queue, 2);
        values.sort_unstable();
        assert_eq!(values, [(0, 0), (1, 0)]);
        // SAFETY: as above.
        assert_eq!(unsafe { queue.pop() }, Pop::Empty);
    });
}

/// Protocol 8, pop step 3 and push step 2: the consumer recycles the first block while the
/// producer fills the second, whose last claim takes it back as the third. Values written
/// into the reused block are read once, in order, and the drop frees every block once (loom
/// reports a leak or a double free).
#[test]
fn loom_blocks_recycled_block_reused_while_the_consumer_drains() {
    model(|| {
        let queue = Arc::new(BlockQueue::new());
        let total = 3 * BLOCK_CAP;
        let producer = {
            let queue = queue.clone();
            thread::spawn(move || {
                for n in 0..total {
                    queue.push((0, n));
                }
            })
        };
        let values = pop_n(&queue, total);
        producer.join().unwrap();
        assert_eq!(values, (0..total).map(|n| (0, n)).collect::<Vec<_>>());
    });
}

/// Protocol 8, pop step 1, and the intake's "No wake is lost": the producer pushes, then reads
/// a flag (the process's `NOTIFIED`) and, finding it set, does nothing more; the consumer
/// clears the flag (an RMW), then asks whether the queue is empty. Both must not read the old
/// values: if the producer saw the flag set, the consumer sees the value (or its claim).
#[test]
fn loom_blocks_emptiness_check_against_a_flag_read_after_the_push() {
    model(|| {
        let queue = Arc::new(BlockQueue::new());
        let flagged = Arc::new(AtomicBool::new(true));
        let producer_relied_on_the_flag = Arc::new(AtomicBool::new(false));
        let producer = {
            let (queue, flagged, relied) = (
                queue.clone(),
                flagged.clone(),
                producer_relied_on_the_flag.clone(),
            );
            thread::spawn(move || {
                queue.push((0, 0));
                // The state word's load-only path: `Acquire`, as `transition_on_event` reads.
                if flagged.load(Ordering::Acquire) {
                    relied.store(true, Ordering::SeqCst);
                }
            })
        };
        flagged.swap(false, Ordering::AcqRel);
        // SAFETY: the model's one consumer.
        let saw_nothing = unsafe { queue.is_empty() };
        producer.join().unwrap();
        assert!(
            !(saw_nothing && producer_relied_on_the_flag.load(Ordering::SeqCst)),
            "the producer counted on a flag the consumer had cleared before it looked"
        );
    });
}
