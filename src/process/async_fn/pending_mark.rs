//! Which of the body's polls counted a receive pending, so that a receive dropped during that
//! same poll — the losing branch of a `select!` — is taken back out of the count: a body then
//! left waiting on a timer or a socket parks `Blocked`, as one that never received, not `Idle`
//! (`mod.rs`, the status a poll ends with).
//!
//! A receive (`recv`, `recv_message`, `cancelled`, the signal receives) holds a
//! [`PendingMark`] in place of its bare owner, and counts itself in
//! `Wants::receives` when it returns `Pending`, once per poll, and remembers the poll
//! (`CxState::poll_mark`). Dropped, it looks at the scope: in the same poll, the count goes
//! down; in a later poll (it was counted in an earlier one, which the reset of `wants` already
//! forgot) or outside any (the body dropped at its end), nothing happens. A receive that
//! never waited, or that became ready (`settle`), does not look at all: a thread-local read
//! per message on the ring's hop was +2.8 % of its instructions (callgrind, `msgprobe
//! ring_async 1`: 170.0 M before the marks, 174.7 M); with `settle`, the marks cost +1.3 %
//! (172.2 M).

use super::scope;
use super::state::CxState;
use crate::process::context::Owner;

/// A mail-waiting future's owner, and the body's poll that counted it pending (0: none).
/// Held by every receive in place of its bare owner: its drop takes the receive out of the
/// count.
#[derive(Debug)]
pub(super) struct PendingMark {
    owner: Owner,
    counted_in: u32,
}

impl PendingMark {
    /// A receive of `owner`'s, not counted yet.
    pub(super) fn new(owner: Owner) -> PendingMark {
        PendingMark {
            owner,
            counted_in: 0,
        }
    }

    /// The process the receive belongs to.
    #[inline]
    pub(super) fn owner(&self) -> Owner {
        self.owner
    }

    /// The future returns `Pending` in the poll `state` runs: counted once in it.
    #[inline]
    pub(super) fn count(&mut self, state: &mut CxState) {
        if self.counted_in != state.poll_mark {
            self.counted_in = state.poll_mark;
            state.wants.receives += 1;
        }
    }

    /// The future is ready: its drop needs no look at the scope (`recv`'s, whose drop follows
    /// every message). Were it counted in the poll running now (a combinator polled it again
    /// within one poll), it stays counted until that poll ends: the step reads `Idle` at worst.
    #[inline]
    pub(super) fn settle(&mut self) {
        self.counted_in = 0;
    }
}

/// The receive is dropped: if the poll running now counted it, it waits no more.
impl Drop for PendingMark {
    #[inline]
    fn drop(&mut self) {
        if self.counted_in == 0 {
            return;
        }
        let counted_in = self.counted_in;
        scope::with(self.owner, |scope| {
            if let Some(scope) = scope {
                if scope.state.poll_mark == counted_in {
                    scope.state.wants.receives -= 1;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receive_is_counted_once_per_poll() {
        let mut state = CxState::default();
        let owner = Owner {
            host: crate::process::context::HostId::next(),
            pid: crate::Pid::from_raw(1 << 26).unwrap(),
        };
        let mut mark = PendingMark::new(owner);
        state.poll_mark = 1;
        mark.count(&mut state);
        mark.count(&mut state);
        assert_eq!(
            state.wants.receives, 1,
            "polled twice in one poll: counted once"
        );
        // The next poll resets the count; the same receive pending again is counted again.
        state.poll_mark = 2;
        state.wants = Default::default();
        mark.count(&mut state);
        assert_eq!(state.wants.receives, 1);
        // Dropped outside any poll of its process (here: outside any): nothing to take back.
        drop(mark);
        assert_eq!(state.wants.receives, 1);
    }
}
