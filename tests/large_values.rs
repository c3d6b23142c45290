//! Large values held by value: a 64 KiB message received by a body, sent between bodies, and a
//! 64 KiB output. An unoptimised build (`cargo test`'s) copies such a value at every layer
//! between the mailbox and the body; on std's 2 MiB default stack a worker overflowed and
//! aborted the whole program, where tokio's tasks did the same work. Workers get 8 MiB
//! (`Builder::thread_stack_size`).

use procsched::prelude::*;
use std::time::Duration;

type Big = [u8; 64 << 10];

const GUARD: Duration = Duration::from_secs(30);

fn big(first: u8) -> Big {
    let mut value = [0u8; 64 << 10];
    value[0] = first;
    value
}

#[test]
fn a_body_receives_large_messages_and_returns_a_large_output() {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let sum = sched
        .spawn_fn(|cx: ProcessCx<Big>| async move {
            let mut last = big(0);
            for _ in 0..4 {
                let value = cx.recv().await?;
                last[0] += value[0];
            }
            Ok::<_, BoxError>(last)
        })
        .unwrap();
    let addr = sum.addr();
    for i in 1..=4 {
        addr.send(big(i)).unwrap();
    }
    assert_eq!(sched.block_on(sum).unwrap()[0], 10);
    sched.shutdown(GUARD);
}

#[test]
fn large_messages_pass_between_bodies() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let sink = sched
        .spawn_fn(|cx: ProcessCx<Big>| async move {
            let mut total = 0u64;
            for _ in 0..8 {
                total += u64::from(cx.recv().await?[0]);
            }
            Ok::<_, BoxError>(total)
        })
        .unwrap();
    let to_sink = sink.addr();
    let source = sched
        .spawn_fn(move |_: ProcessCx<()>| async move {
            for i in 0..8 {
                to_sink.send(big(i))?;
            }
            Ok::<_, BoxError>(())
        })
        .unwrap();
    sched.block_on(source).unwrap();
    assert_eq!(sched.block_on(sink).unwrap(), 28);
    sched.shutdown(GUARD);
}

#[test]
fn worker_stacks_are_configurable() {
    // A body that needs more than the default: 16 MiB on its stack (one array, touched).
    let sched = Scheduler::builder()
        .workers(1)
        .thread_stack_size(64 << 20)
        .build()
        .unwrap();
    let deep = sched
        .spawn_fn(|_: ProcessCx<()>| async move {
            let value = std::hint::black_box([1u8; 16 << 20]);
            Ok::<_, BoxError>(value.iter().map(|&b| u64::from(b)).sum::<u64>())
        })
        .unwrap();
    assert_eq!(sched.block_on(deep).unwrap(), 16 << 20);
    sched.shutdown(GUARD);
}

/// A stack too small for a worker is refused at `build` with a typed error, rather than
/// aborting the program at the first poll; the least one accepted runs processes — a panicking
/// one included, whose unwinding and report take the most of a worker's own stack.
#[test]
fn a_worker_stack_below_the_minimum_is_refused_and_the_minimum_runs_processes() {
    use procsched::error::BuildError;
    use procsched::executor::MIN_STACK_SIZE;
    for bytes in [0, 4 << 10, MIN_STACK_SIZE - 1] {
        match Scheduler::builder().thread_stack_size(bytes).build() {
            Err(BuildError::Io(error)) => {
                assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput, "{error}")
            }
            other => panic!("{bytes} bytes: expected InvalidInput, got {other:?}"),
        }
    }
    let sched = Scheduler::builder()
        .workers(1)
        .thread_stack_size(MIN_STACK_SIZE)
        .build()
        .unwrap();
    let fine = sched
        .spawn_fn(|cx: ProcessCx<u32>| async move { Ok::<_, BoxError>(cx.recv().await? + 1) })
        .unwrap();
    fine.addr().send(41).unwrap();
    assert_eq!(sched.block_on(fine).unwrap(), 42);
    let panicking = sched
        .spawn_fn(|_: ProcessCx| async move {
            if std::hint::black_box(true) {
                panic!("a panic on a small stack");
            }
            Ok::<_, BoxError>(())
        })
        .unwrap();
    assert!(sched.block_on(panicking).unwrap_err().is_panicked());
    sched.shutdown(GUARD);
}
