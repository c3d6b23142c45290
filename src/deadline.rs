//! Deadlines from user-given timeouts.
//!
//! Every API that takes a timeout (`ask_within`, `shutdown`, `wait_for_abandoned`, the drop
//! timeout, an executor's shutdown, a node's waits) turns it into an `Instant`. `Instant +
//! Duration` panics on overflow, and `Duration::MAX` is how a caller says "no limit" (tokio's
//! `timeout` takes it): such a timeout means a deadline that never comes, never a panic.

use std::time::{Duration, Instant};

/// How far ahead a deadline past `Instant`'s range is put: about 136 years, which every
/// platform's `Instant` holds from any `now`.
const NEVER: Duration = Duration::from_secs(u32::MAX as u64);

/// `timeout` from now; a timeout past `Instant`'s range waits as if unbounded: the farthest of
/// [`NEVER`], half of it, … that the platform's `Instant` holds.
pub(crate) fn after(timeout: Duration) -> Instant {
    let now = Instant::now();
    if let Some(deadline) = now.checked_add(timeout) {
        return deadline;
    }
    let mut ahead = NEVER;
    loop {
        if let Some(deadline) = now.checked_add(ahead) {
            return deadline;
        }
        ahead /= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_past_the_range_of_instant_is_a_deadline_far_away() {
        let far = after(Duration::MAX);
        assert!(far >= Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600));
        let near = after(Duration::from_millis(5));
        assert!(near <= Instant::now() + Duration::from_millis(5));
    }
}
