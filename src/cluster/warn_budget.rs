//! Warnings other nodes' input can cause, rate-limited.
//!
//! Why: a rejected frame or item is a `warn` — an operator should see that something on the
//! NATS server speaks the node protocol wrongly — but one per rejection lets that something
//! write the node's log at its own rate: a black-box review's 20 000 bad spawns in one frame
//! were 20 000 lines. Every rejection is still counted ([`NodeStats`](super::NodeStats)); the
//! log gets [`PER_WINDOW`] of them a [`WINDOW`], and the first one after a window that dropped
//! some says how many (`suppressed`).
//!
//! "node down" lines, and the slow-consumer line that precedes a round of them, get a budget
//! of their own (`NodeShared::down_budget`): thousands of fake
//! membership entries, declared down together, were as many lines, and the input warnings
//! would otherwise crowd the real nodes' ends out of the log.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many warnings a window lets through.
pub(crate) const PER_WINDOW: u32 = 20;

/// The window.
pub(crate) const WINDOW: Duration = Duration::from_secs(1);

/// The budget of one node's warnings about its input.
#[derive(Debug)]
pub(crate) struct WarnBudget {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    window_start: Instant,
    logged: u32,
    suppressed: u64,
}

impl Default for WarnBudget {
    fn default() -> WarnBudget {
        WarnBudget {
            state: Mutex::new(State {
                window_start: Instant::now(),
                logged: 0,
                suppressed: 0,
            }),
        }
    }
}

impl WarnBudget {
    /// `Some(suppressed)` if a warning may be logged now — with how many were suppressed since
    /// the last one logged — else `None` (counted as suppressed).
    pub(crate) fn take(&self) -> Option<u64> {
        self.take_at(Instant::now())
    }

    fn take_at(&self, now: Instant) -> Option<u64> {
        let mut state = self.state.lock().expect("warn budget lock");
        if now.duration_since(state.window_start) >= WINDOW {
            state.window_start = now;
            state.logged = 0;
        }
        if state.logged >= PER_WINDOW {
            state.suppressed += 1;
            return None;
        }
        state.logged += 1;
        Some(std::mem::take(&mut state.suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_lets_its_share_through_and_the_next_says_how_many_it_dropped() {
        let budget = WarnBudget::default();
        let start = Instant::now();
        for _ in 0..PER_WINDOW {
            assert_eq!(budget.take_at(start), Some(0));
        }
        for _ in 0..5 {
            assert_eq!(budget.take_at(start), None, "over the window's share");
        }
        let next = start + WINDOW;
        assert_eq!(
            budget.take_at(next),
            Some(5),
            "the next window tells the dropped"
        );
        assert_eq!(budget.take_at(next), Some(0));
    }
}
