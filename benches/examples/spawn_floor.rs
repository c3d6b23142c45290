//! A floor for the spawn-bound process workloads (`single_step`, `one_yield`, `parallel_spawn`):
//! the least any runtime can spend when a plain thread hands work items to another thread and
//! then collects their results in order, as the bench thread does with processes and tasks.
//!
//! ```text
//! cargo run --release -p procsched-benches --example spawn_floor [ITEMS [ROUNDS]]
//! ```
//!
//! No scheduler, no task states, no parking, no wakers: the spawning thread allocates an item
//! (the size of a small task, 256 bytes), writes its input and pushes its pointer onto a
//! `crossbeam_deque::Injector` (the queue procsched's executor uses for work from outside);
//! one worker thread, which never parks (it spins on the queue), pops it, computes the output and
//! sets the item's `done` flag; after pushing all ITEMS (default 10 000, `single_step`'s count)
//! the spawning thread waits for each item's flag in order, reads the output and frees the item
//! (on the spawning thread: what a runtime's join does when it drops the last reference). Two
//! threads on the 2-core machine, so nobody waits for a core.
//!
//! Variant `reused` recycles the same ITEMS allocations round after round (no allocator at
//! all), which leaves the cost of moving the items' cache lines between the two cores.
//!
//! Prints ns per item (q1 / median / q3 over ROUNDS, default 200) for both variants.

use crossbeam_deque::{Injector, Steal};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A work item the size of a small task: the input, the output, the done flag and ballast.
#[repr(C)]
struct Item {
    input: u64,
    output: AtomicU64,
    done: AtomicBool,
    _ballast: [u64; 29],
}

const _: () = assert!(std::mem::size_of::<Item>() == 256);

/// A pointer to an item, sent to the worker.
struct ItemPtr(*const Item);

// SAFETY: the item behind the pointer is only read through `&Item` (atomics for the fields the
// worker writes) while the spawning thread keeps it alive: it frees an item only after seeing
// its `done` flag, which the worker sets last and never touches the item after.
unsafe impl Send for ItemPtr {}

fn main() {
    let mut args = std::env::args().skip(1);
    let items: usize = args
        .next()
        .map_or(10_000, |n| n.parse().expect("ITEMS must be a number"));
    let rounds: usize = args
        .next()
        .map_or(200, |n| n.parse().expect("ROUNDS must be a number"));

    let queue = Arc::new(Injector::<ItemPtr>::new());
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let (queue, stop) = (Arc::clone(&queue), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match queue.steal() {
                    Steal::Success(ItemPtr(item)) => {
                        // SAFETY: see `ItemPtr`: the item lives until `done` is seen set.
                        let item = unsafe { &*item };
                        item.output.store(item.input + 1, Ordering::Relaxed);
                        item.done.store(true, Ordering::Release);
                    }
                    Steal::Retry => {}
                    Steal::Empty => std::hint::spin_loop(),
                }
            }
        })
    };

    let new_item = |input: u64| Item {
        input,
        output: AtomicU64::new(0),
        done: AtomicBool::new(false),
        _ballast: [0; 29],
    };
    let wait_for = |item: &Item| {
        while !item.done.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        let output = item.output.load(Ordering::Relaxed);
        assert_eq!(output, item.input + 1);
        black_box(output);
    };

    let mut fresh = Vec::with_capacity(rounds);
    let mut reused = Vec::with_capacity(rounds);
    let mut kept: Vec<Box<Item>> = (0..items as u64).map(|i| Box::new(new_item(i))).collect();
    let mut handles: Vec<*mut Item> = Vec::with_capacity(items);
    for _ in 0..rounds {
        // Fresh: an allocation per item, freed after its result is read.
        let start = Instant::now();
        for i in 0..items as u64 {
            let item = Box::into_raw(Box::new(new_item(i)));
            handles.push(item);
            queue.push(ItemPtr(item));
        }
        for item in handles.drain(..) {
            // SAFETY: allocated above by `Box::into_raw` and not freed yet; the worker is done
            // with it once `wait_for` returns, and nothing else holds it.
            unsafe {
                wait_for(&*item);
                drop(Box::from_raw(item));
            }
        }
        fresh.push(start.elapsed().as_nanos() as f64 / items as f64);

        // Reused: the same allocations every round.
        let start = Instant::now();
        for (i, item) in kept.iter_mut().enumerate() {
            item.input = i as u64;
            *item.done.get_mut() = false;
            queue.push(ItemPtr(&**item));
        }
        for item in &kept {
            wait_for(item);
        }
        reused.push(start.elapsed().as_nanos() as f64 / items as f64);
    }
    stop.store(true, Ordering::Relaxed);
    worker.join().expect("worker panicked");

    println!("{rounds} rounds of {items} items; ns per item: q1 / median / q3");
    for (name, samples) in [
        ("fresh (malloc, push, join, free)", &mut fresh),
        ("reused (push, join)", &mut reused),
    ] {
        samples.sort_by(f64::total_cmp);
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
        println!(
            "{name:34} {:6.1} / {:6.1} / {:6.1}",
            at(0.25),
            at(0.5),
            at(0.75)
        );
    }
}
