//! A future polled by hand with a waker that counts its wakes: for tests that check who is
//! woken, and how often (a mailbox's line of waiting senders).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// A waker that counts its wakes.
#[derive(Default)]
pub(crate) struct Wakes(AtomicUsize);

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A waiting send polled by hand, with its own counting waker.
pub(crate) struct Waiting<F> {
    future: Pin<Box<F>>,
    wakes: Arc<Wakes>,
    waker: Waker,
}

impl<F: Future> Waiting<F> {
    pub(crate) fn new(future: F) -> Waiting<F> {
        let wakes = Arc::new(Wakes::default());
        Waiting {
            future: Box::pin(future),
            waker: Waker::from(wakes.clone()),
            wakes,
        }
    }

    pub(crate) fn poll(&mut self) -> Poll<F::Output> {
        self.future
            .as_mut()
            .poll(&mut Context::from_waker(&self.waker))
    }

    pub(crate) fn wakes(&self) -> usize {
        self.wakes.0.load(SeqCst)
    }
}
