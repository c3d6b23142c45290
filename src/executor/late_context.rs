//! A context every worker enters once it is set, after the workers started: the scheduler's
//! tokio runtime, built only when a process first needs one (`scheduler/builder.rs`).
//!
//! The builder's [`worker_context`](super::Builder::worker_context) wraps each worker's whole
//! loop, so it must exist before the threads start. A late context is published once
//! ([`LateContext`], in a `OnceLock`), and each worker enters it before its next poll: one
//! `Acquire` load per poll until then, one `bool` after. The worker keeps what `enter` returned
//! for the rest of its loop and drops it when the loop ends, innermost of the thread's contexts
//! (any context a poll enters is left by that poll).

use std::any::Any;
use std::sync::{Arc, OnceLock};

/// A context a worker thread can enter.
pub(crate) trait LateContext: Send + Sync + 'static {
    /// Enters the context on the current thread until the returned guard is dropped, on this
    /// thread.
    fn enter(&self) -> Box<dyn Any>;
}

/// The executor's late context, if one was set.
#[derive(Default)]
pub(crate) struct LateContextSlot(OnceLock<Arc<dyn LateContext>>);

impl LateContextSlot {
    /// Publishes `context` for every worker; `false` if one was set already.
    pub(crate) fn set(&self, context: Arc<dyn LateContext>) -> bool {
        self.0.set(context).is_ok()
    }

    /// The context, once set.
    #[inline]
    pub(crate) fn get(&self) -> Option<&Arc<dyn LateContext>> {
        self.0.get()
    }
}

impl std::fmt::Debug for LateContextSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LateContextSlot")
            .field(&self.0.get().is_some())
            .finish()
    }
}
