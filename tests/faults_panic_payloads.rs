//! A handler that panics completes its yield with `CommandError::Panicked`, and the body
//! decides what that means — even when the panic's *payload* (a user value, `panic_any`) panics
//! again as it is dropped: that second panic is contained, and changes no outcome.

mod support;

use procsched::error::CommandError;
use procsched::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use support::*;

/// A panic payload whose destructor panics too.
struct PanickingPayload(Arc<AtomicUsize>);

impl Drop for PanickingPayload {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
        panic!("{EXPECTED_PANIC}: a panic payload's destructor");
    }
}

struct Inline;
procsched::command!(Inline => ());
struct Blocking;
procsched::command!(Blocking => ());
struct Async;
procsched::command!(Async => ());

/// A scheduler whose three handlers (inline, blocking, async after a first `Pending`) panic
/// with a [`PanickingPayload`].
fn scheduler(drops: &Arc<AtomicUsize>) -> Scheduler {
    quiet_panics();
    let (inline, blocking, asynchronous) = (drops.clone(), drops.clone(), drops.clone());
    Scheduler::builder()
        .workers(1)
        .inline_handler(move |_: Inline| -> Result<(), BoxError> {
            std::panic::panic_any(PanickingPayload(inline.clone()))
        })
        .blocking_handler(move |_: Blocking| -> Result<(), BoxError> {
            std::panic::panic_any(PanickingPayload(blocking.clone()))
        })
        .async_handler(move |_: Async| {
            let drops = asynchronous.clone();
            async move {
                tokio::task::yield_now().await;
                std::panic::panic_any(PanickingPayload(drops));
                #[allow(unreachable_code)]
                Ok::<(), BoxError>(())
            }
        })
        .build()
        .unwrap()
}

/// Calls `command` from a body that returns the call's result, on a scheduler whose handler
/// for it panics with a [`PanickingPayload`]: the call completes `Panicked`, and the payload
/// was dropped once.
fn assert_called_panicked<C>(command: C)
where
    C: procsched::Command<Output = ()> + Send + 'static,
{
    let drops = Arc::new(AtomicUsize::new(0));
    let sched = scheduler(&drops);
    let body = sched
        .spawn_fn(move |cx: ProcessCx| async move { Ok::<_, BoxError>(cx.call(command).await) })
        .unwrap();
    let result = sched
        .block_on(body)
        .expect("the body handled its call's error");
    assert!(
        matches!(result, Err(CommandError::Panicked(_))),
        "{result:?}"
    );
    assert_eq!(drops.load(SeqCst), 1);
}

#[test]
fn an_inline_handlers_panic_with_a_panicking_payload_completes_the_call_panicked() {
    assert_called_panicked(Inline);
}

#[test]
fn a_blocking_handlers_panic_with_a_panicking_payload_completes_the_call_panicked() {
    assert_called_panicked(Blocking);
}

#[test]
fn an_async_handlers_panic_with_a_panicking_payload_completes_the_call_panicked() {
    assert_called_panicked(Async);
}
