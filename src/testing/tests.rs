//! The harness's own drop (its one `unsafe` block, run under Miri): a process whose destructor
//! panics is dropped contained, also while the thread already panics (a failing test).

use super::Harness;
use crate::process::{BoxError, Events, Process, StepOutput};

/// A process whose drop panics.
struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("drop boom");
    }
}

impl Process for PanicsOnDrop {
    type Output = ();
    fn step(&mut self, _: &mut Events, out: &mut StepOutput<()>) -> Result<(), BoxError> {
        out.done(());
        Ok(())
    }
}

#[test]
fn a_process_whose_drop_panics_is_dropped_contained() {
    let harness = Harness::new(PanicsOnDrop);
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(harness)));
    assert!(
        dropped.is_ok(),
        "the drop's panic stayed inside the harness"
    );
}

#[test]
fn dropped_during_a_failing_test_it_does_not_abort() {
    // A panic while the harness unwinds: without containment, a panic during cleanup aborts.
    let failing = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _harness = Harness::new(PanicsOnDrop);
        panic!("the test's assertion fails");
    }));
    assert!(failing.is_err(), "the test's own panic, and no abort");
}
