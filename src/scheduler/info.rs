//! [`ProcessInfo`]: what a debugging endpoint or a console shows of one live process; and the
//! coarse clock its age is measured with.
//!
//! # Why a coarse clock
//! A process's age needs its spawn time, and `Instant::now()` costs ~35 ns on the machines this
//! was measured on: ~6 % of a whole spawn-step-finish cycle. On 64-bit Linux the spawn time is
//! read from `CLOCK_MONOTONIC_COARSE` instead (the kernel's last tick, read from the vDSO
//! without a hardware counter: ~10 ns, a resolution of 1–4 ms, plenty for an age). Elsewhere,
//! `Instant`.

use crate::process::stats::CellInfo;
use crate::process::{Pid, ProcessState};
use std::time::Duration;

/// One live process, as [`SchedulerHandle::process_info`](crate::SchedulerHandle::process_info)
/// and [`SchedulerHandle::processes`](crate::SchedulerHandle::processes) report it. Read under
/// the process's mailbox lock: its state, mailbox and unread counts are one moment's; `steps`
/// is published per poll (a step of the poll running now may not be counted yet, while the
/// yields it made already are in `outstanding_yields`).
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::metrics::ProcessState;
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let handle = sched.spawn_fn(|cx: ProcessCx<u32>| async move {
///     let n = cx.recv().await?;     // Idle until a message arrives
///     Ok::<_, BoxError>(n)
/// })?;
/// let pid = handle.pid();
/// while sched.state(pid) != Some(ProcessState::Idle) {
///     std::thread::yield_now();
/// }
/// let info = sched.handle().process_info(pid).expect("live");
/// assert_eq!((info.pid, info.state, info.steps, info.mailbox_depth), (pid, ProcessState::Idle, 1, 0));
/// assert_eq!(info.outstanding_yields, 0);
/// assert_eq!((info.unread_messages, info.unread_signals), (0, 0));
/// assert!(info.kind.contains("closure"), "an async fn process is named after its body");
/// sched.send(pid, Message::new("n", Payload::new(7u32)))?;
/// assert_eq!(sched.block_on(handle)?, 7);
/// assert!(sched.handle().process_info(pid).is_none(), "finished");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    /// Its PID.
    pub pid: Pid,
    /// Its type name (`std::any::type_name`): the [`Process`](crate::state_machine::Process) type, or for a
    /// process spawned with `spawn_fn`, its body's (closure or function) type — also for a
    /// supervised child and a cluster's registered body, whatever procsched wraps them in; a
    /// supervisor is `procsched::supervision::Supervisor`.
    pub kind: &'static str,
    /// Its state.
    pub state: ProcessState,
    /// Steps it has run.
    pub steps: u64,
    /// Events queued in its mailbox, not yet taken by a step — of every kind: messages, yield
    /// completions, exit signals and `Down`s, a cancel, overflow markers, and the wake-ups of an
    /// `async fn` body by a future outside procsched (a timer, a channel: one event per wake, or
    /// none if the last one queued is a wake-up too). Only messages count against
    /// [`mailbox_capacity`](crate::config::SchedulerBuilder::mailbox_capacity), so the depth may
    /// exceed it. What a step has taken and the process holds unread is not in it:
    /// [`unread_messages`](Self::unread_messages), [`unread_signals`](Self::unread_signals).
    pub mailbox_depth: usize,
    /// Time since it was spawned (to within a few milliseconds: see the module docs of
    /// `scheduler/info.rs`).
    pub age: Duration,
    /// Its async and blocking yields still running (their completion not yet in the mailbox).
    pub outstanding_yields: u64,
    /// Messages an `async fn` body took from its mailbox and has not received yet: its inbox, as
    /// of its last step (a step moves what arrived out of the mailbox; a receive takes from the
    /// inbox). A bounded mailbox counts them against its capacity too. 0 for a state-machine
    /// process, whose own buffers are its own
    /// ([`Process::unread_messages`](crate::state_machine::Process::unread_messages)).
    pub unread_messages: usize,
    /// Exit signals (when it traps exits) and monitors' `Down`s an `async fn` body holds and has
    /// not received yet (`recv_signal`, `recv_exit`, `recv_down`, `recv_any`), as of its last
    /// step. They are kept until received, as in an Erlang mailbox, and never count against a
    /// capacity: a body that traps exits or monitors but only calls `recv` keeps every one of
    /// them. 0 for a state-machine process (it sees each signal as an event of a step).
    pub unread_signals: usize,
}

impl ProcessInfo {
    pub(super) fn new(index: usize, cell: CellInfo, now: u64) -> ProcessInfo {
        ProcessInfo {
            pid: Pid::new(index, cell.generation),
            kind: cell.kind,
            state: cell.state,
            steps: cell.steps,
            mailbox_depth: cell.mailbox_depth,
            age: Duration::from_nanos(now.saturating_sub(cell.spawned_at)),
            outstanding_yields: cell.outstanding,
            unread_messages: cell.unread_messages as usize,
            unread_signals: cell.unread_signals as usize,
        }
    }
}

/// Now, in the coarse clock (nanoseconds since an unspecified origin; see the module docs).
pub(crate) fn coarse_now() -> u64 {
    #[cfg(all(target_os = "linux", target_pointer_width = "64", not(miri)))]
    if let Some(now) = linux::monotonic_coarse() {
        return now;
    }
    fallback_now()
}

fn fallback_now() -> u64 {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let origin = *ORIGIN.get_or_init(std::time::Instant::now);
    u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(all(target_os = "linux", target_pointer_width = "64", not(miri)))]
mod linux {
    /// `struct timespec` on 64-bit Linux (glibc and musl): two 64-bit fields.
    #[repr(C)]
    struct Timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }

    /// From `<linux/time.h>`; the same on every architecture.
    const CLOCK_MONOTONIC_COARSE: i32 = 6;

    extern "C" {
        /// libc's, which std links on Linux.
        fn clock_gettime(clock: i32, time: *mut Timespec) -> i32;
    }

    /// `CLOCK_MONOTONIC_COARSE` in nanoseconds, or `None` if the kernel refuses the clock.
    pub(super) fn monotonic_coarse() -> Option<u64> {
        let mut time = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `clock_gettime` writes one `struct timespec`, whose layout `Timespec` matches
        // on 64-bit Linux, through a pointer to a live, exclusively borrowed local; it has no
        // other effect.
        let status = unsafe { clock_gettime(CLOCK_MONOTONIC_COARSE, &mut time) };
        if status != 0 {
            return None;
        }
        let secs = u64::try_from(time.tv_sec).ok()?;
        let nanos = u64::try_from(time.tv_nsec).ok()?;
        Some(secs.wrapping_mul(1_000_000_000).wrapping_add(nanos))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_coarse_clock_is_monotonic_and_follows_real_time() {
        let start = coarse_now();
        std::thread::sleep(Duration::from_millis(20));
        let end = coarse_now();
        assert!(end >= start);
        let elapsed = Duration::from_nanos(end - start);
        assert!(elapsed >= Duration::from_millis(10), "{elapsed:?}");
    }
}
