//! [`yield_now`]: give the other ready tasks a turn.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Yields once: the task goes behind the other ready tasks, then runs again.
///
/// On one of the executor's workers the task waits in that worker's yielded lane: the worker runs
/// its deque and the tasks woken from outside first, and every 61st task it looks at the global
/// queue and then the yielded lane first, so neither local nor outside work is starved, while the task stays cache-warm on its worker (and idle workers
/// can still steal it). Anywhere else it goes to the global queue.
///
/// # Examples
///
/// ```
/// let executor = procsched::executor::Executor::builder().workers(1).build()?;
/// let task = executor.spawn(async {
///     for _ in 0..3 {
///         procsched::executor::yield_now().await;
///     }
/// });
/// executor.block_on(task).unwrap();
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// The future's type is not named: a process body yields with
/// [`ProcessCx::yield_now`](crate::ProcessCx::yield_now) (`procsched::body::YieldNow`), which
/// also lets the process's step end.
pub fn yield_now() -> impl Future<Output = ()> + Send + Sync + Unpin + std::fmt::Debug {
    YieldNow { yielded: false }
}

/// The future returned by [`yield_now`].
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub(crate) struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
