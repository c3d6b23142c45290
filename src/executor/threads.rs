//! How worker threads are started: their names and the builder's [`WorkerContext`].
//! Configured workers start at build time, spares on demand (`spare.rs`); `start.rs` starts both.
//!
//! Both kinds run the same loop (`worker::run`, which `start.rs` hands to
//! [`ThreadConfig::spawn`]) inside the same [`WorkerContext`], so a task cannot tell a spare from
//! a configured worker.

use crate::loom::thread;
use std::fmt;

/// Runs a worker's whole loop (the `FnMut` it is given) inside some context.
pub(crate) type WorkerContextFn = dyn Fn(&mut dyn FnMut()) + Send + Sync;

/// The builder's `worker_context`, shared by every worker thread.
#[derive(Clone)]
pub(crate) struct WorkerContext(pub(crate) std::sync::Arc<WorkerContextFn>);

impl fmt::Debug for WorkerContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WorkerContext(..)")
    }
}

/// How worker threads are started: name prefix, stack size and context.
#[derive(Debug, Clone)]
pub(crate) struct ThreadConfig {
    pub(crate) name: String,
    pub(crate) stack_size: usize,
    pub(crate) context: Option<WorkerContext>,
}

impl ThreadConfig {
    /// Starts the thread of worker slot `index` (named `<prefix>-<index>`), which runs `run`
    /// (the worker loop with its deque: `start.rs`) inside the context.
    pub(crate) fn spawn(
        &self,
        index: usize,
        run: impl FnOnce() + Send + 'static,
    ) -> std::io::Result<thread::JoinHandle<()>> {
        let context = self.context.clone();
        thread::Builder::new()
            .name(format!("{}-{index}", self.name))
            .stack_size(self.stack_size)
            .spawn(move || {
                let mut run = Some(run);
                let mut run_once = || {
                    if let Some(run) = run.take() {
                        run();
                    }
                };
                if let Some(WorkerContext(context)) = context {
                    // The context is user code: a panic in it must not end the thread before
                    // the worker ran (its tasks would never run, and shutdown would wait its
                    // whole timeout for a worker that never counted itself out).
                    let entered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        context(&mut run_once)
                    }));
                    if let Err(panic) = entered {
                        tracing::error!(
                            worker = index,
                            message = super::task::panic_message(&*panic),
                            "the executor's worker context panicked; the panic was contained"
                        );
                    }
                }
                // A context that did not call it, or panicked before it did: the worker must
                // run all the same (without the context). After the worker ran, this does nothing.
                run_once();
            })
    }
}
