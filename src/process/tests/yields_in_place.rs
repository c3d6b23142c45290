//! `StepOutput::dispatch_in_place`: every yield handed out once, in order, and none lost or
//! dropped twice when dispatch unwinds. Runs under Miri too (`.ci/run`).

use crate::process::payload::tests::{LargeCounted, SmallCounted};
use crate::process::{StepOutput, YieldSlot};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

/// A step's output with yields tagged 1, 2, 3: inline, boxed, inline commands.
fn three_yields(drops: &Arc<AtomicUsize>) -> StepOutput {
    let mut out = StepOutput::new();
    out.yield_command(1, SmallCounted::new(drops));
    out.yield_command_within(
        2,
        LargeCounted::new(drops),
        std::time::Duration::from_secs(1),
    );
    out.yield_command(3, SmallCounted::new(drops));
    out
}

#[test]
fn every_yield_is_handed_out_once_in_order() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut out = three_yields(&drops);
    let mut seen = Vec::new();
    out.dispatch_in_place(|yielded: YieldSlot<'_>| {
        let tag = yielded.tag;
        let timeout = yielded.timeout();
        // Take the boxed one, leave the inline ones for the slot to drop.
        if tag == 2 {
            let command = yielded.command.downcast::<LargeCounted>().expect("boxed");
            assert_eq!(command.ballast, [7; 25]);
        }
        seen.push((tag, timeout.is_some()));
    });
    assert_eq!(seen, [(1, false), (2, true), (3, false)]);
    assert_eq!(drops.load(SeqCst), 3, "each command dropped exactly once");
    assert_eq!(out.yield_count(), 0);
    // The buffer is kept for the next step.
    out.yield_command(4, ());
    assert_eq!(out.yield_count(), 1);
}

#[test]
fn an_unwinding_dispatch_drops_the_rest_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut out = three_yields(&drops);
    let mut handed = 0;
    let unwound = catch_unwind(AssertUnwindSafe(|| {
        out.dispatch_in_place(|yielded| {
            handed += 1;
            if yielded.tag == 2 {
                panic!("dispatch panics holding the second yield");
            }
        })
    }));
    assert!(unwound.is_err());
    assert_eq!(handed, 2, "the third yield was never handed out");
    assert_eq!(drops.load(SeqCst), 3, "each command dropped exactly once");
    assert_eq!(out.yield_count(), 0);
}
