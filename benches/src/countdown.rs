//! Completion signalling that costs every runtime the same.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::time::Duration;

// ---------------------------------------------------------------------------
// Completion signalling
// ---------------------------------------------------------------------------

/// How long the bench thread waits for a workload before declaring it stuck.
///
/// Far above any sane iteration time; it turns a lost wake-up or a panicked
/// task (which never counts down) into a failure with a message instead of a
/// benchmark that hangs forever. It is a watchdog, not synchronisation.
const STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Lets the bench thread block until `n` tasks have finished.
///
/// Tasks share a counter; the one that takes it to zero sends on a bounded
/// `std::sync::mpsc` channel the bench thread is blocked on. This is the
/// scheme of tokio's `rt_multi_threaded` benches and costs every runtime the
/// same, unlike join handles. One `CountDown` is reused across iterations.
pub struct CountDown {
    shared: Arc<CountDownShared>,
    done_rx: Receiver<()>,
    label: String,
}

struct CountDownShared {
    remaining: AtomicUsize,
    done_tx: SyncSender<()>,
}

/// The tasks' side of a [`CountDown`]; cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct CountDownHandle(Arc<CountDownShared>);

impl CountDown {
    /// `label` (e.g. `"yield_many/tokio"`) names the workload in a stall panic.
    pub fn new(label: impl Into<String>) -> Self {
        // Capacity 1: exactly one signal per armed round, so sending never blocks.
        let (done_tx, done_rx) = mpsc::sync_channel(1);
        CountDown {
            shared: Arc::new(CountDownShared {
                remaining: AtomicUsize::new(0),
                done_tx,
            }),
            done_rx,
            label: label.into(),
        }
    }

    /// Starts a round in which `n` (> 0) calls to
    /// [`CountDownHandle::count_down`] are expected.
    pub fn arm(&self, n: usize) -> CountDownHandle {
        assert!(n > 0, "a CountDown round needs at least one participant");
        let previous = self.shared.remaining.swap(n, Ordering::AcqRel);
        assert_eq!(previous, 0, "{}: previous round did not finish", self.label);
        CountDownHandle(Arc::clone(&self.shared))
    }

    /// Blocks until the armed round completes.
    ///
    /// # Panics
    /// If it takes longer than [`STALL_TIMEOUT`].
    pub fn wait(&self) {
        match self.done_rx.recv_timeout(STALL_TIMEOUT) {
            Ok(()) => {}
            Err(RecvTimeoutError::Timeout) => panic!(
                "{}: {} of the tasks had not finished after {:?}; \
                 a lost wake-up, a deadlock, or a panicked task (see stderr)",
                self.label,
                self.shared.remaining.load(Ordering::Acquire),
                STALL_TIMEOUT,
            ),
            Err(RecvTimeoutError::Disconnected) => {
                unreachable!("CountDown owns a sender, so its channel cannot disconnect")
            }
        }
    }
}

impl fmt::Debug for CountDown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountDown")
            .field("label", &self.label)
            .field("remaining", &self.shared.remaining.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl CountDownHandle {
    /// Records one finished task; the last one of the round wakes the waiter.
    pub fn count_down(&self) {
        // AcqRel makes every participant's work happen-before the wake-up,
        // so the bench thread sees a fully finished round.
        if self.0.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Cannot be full (one send per round, drained by `wait`); an
            // error means the waiter is gone, so nobody is listening anyway.
            let _ = self.0.done_tx.try_send(());
        }
    }
}

impl fmt::Debug for CountDownHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountDownHandle").finish_non_exhaustive()
    }
}
