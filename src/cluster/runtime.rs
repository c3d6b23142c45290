//! A node's futures awaited from anywhere: each poll runs inside the node's tokio runtime.
//!
//! Why: a node's waits use tokio's timers (a request's timeout) and async-nats's calls (a
//! JetStream request), which need a runtime's context where they are polled. The node's
//! methods are awaited from tokio tasks, from process bodies (whose workers are inside the
//! scheduler's runtime), and — as procsched's own futures are — from `Scheduler::block_on` or
//! another executor, which have none: there, without this, the first timer panics ("no
//! reactor running"). Entering the node's runtime for the length of each poll gives every one
//! of them the same context; a timer made there is bound to that runtime's driver and fires
//! wherever the future is next polled.

use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::runtime::Handle;

pin_project! {
    /// `future`, polled inside `runtime`'s context ([`in_runtime`]).
    pub(crate) struct InRuntime<F> {
        runtime: Handle,
        #[pin]
        future: F,
    }
}

/// `future`, each of whose polls runs inside `runtime`'s context.
pub(crate) fn in_runtime<F: Future>(runtime: &Handle, future: F) -> InRuntime<F> {
    InRuntime {
        runtime: runtime.clone(),
        future,
    }
}

impl<F: Future> Future for InRuntime<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _entered = this.runtime.enter();
        this.future.poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_tokio_timer_awaited_outside_any_runtime_fires() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_time()
            .build()
            .unwrap();
        assert!(
            Handle::try_current().is_err(),
            "no runtime on the test thread"
        );
        let slept = futures::executor::block_on(in_runtime(runtime.handle(), async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            Handle::try_current().is_ok()
        }));
        assert!(slept, "polled inside the runtime's context");
    }
}
