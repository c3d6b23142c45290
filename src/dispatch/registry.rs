//! Handlers registered per command type.

use super::YieldCompleter;
use crate::process::{panic_message, CommandError};
use crate::Payload;
use futures::FutureExt;
use std::any::TypeId;
use std::collections::HashMap;
use std::future::Future;
use std::hash::{BuildHasherDefault, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
// Plain std types: these live on tokio's threads, outside every loom model.
use std::sync::{Arc as StdArc, Mutex as StdMutex};
use std::time::Duration;

type InlineFn = dyn Fn(Payload) -> Result<Payload, CommandError> + Send + Sync;
/// Spawns the handler for one command: (command, its completer, the runtime, the deadline).
type SpawnFn = dyn Fn(
        Payload,
        YieldCompleter,
        &tokio::runtime::Handle,
        Option<Duration>,
    ) -> Option<tokio::task::AbortHandle>
    + Send
    + Sync;

/// A type-erased handler. The erased closures downcast the command to the type they were
/// registered for; the registry only calls them with commands of that type.
pub(crate) enum Handler {
    Inline(Box<InlineFn>),
    Async(Box<SpawnFn>),
    Blocking(Box<SpawnFn>),
}

impl Handler {
    pub(crate) fn inline<C, F>(f: F) -> Handler
    where
        C: Send + 'static,
        F: Fn(C) -> Result<Payload, CommandError> + Send + Sync + 'static,
    {
        Handler::Inline(Box::new(move |command: Payload| f(downcast::<C>(command))))
    }

    pub(crate) fn asynchronous<C, F, Fut>(f: F) -> Handler
    where
        C: Send + 'static,
        F: Fn(C) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Payload, CommandError>> + Send + 'static,
    {
        Handler::Async(Box::new(move |command, completer, runtime, timeout| {
            // Building the future is user code too: a panic here completes the yield, once.
            let command = downcast::<C>(command);
            let future = match catch_unwind(AssertUnwindSafe(|| f(command))) {
                Ok(future) => AssertUnwindSafe(future).catch_unwind(),
                Err(panic) => {
                    completer.complete(Err(CommandError::Panicked(panic_message(&*panic))));
                    return None;
                }
            };
            runtime
                .spawn(async move {
                    let caught = match timeout {
                        None => future.await,
                        Some(timeout) => match tokio::time::timeout(timeout, future).await {
                            Ok(caught) => caught,
                            Err(_elapsed) => Ok(Err(CommandError::TimedOut)),
                        },
                    };
                    let result = caught.unwrap_or_else(|panic| {
                        Err(CommandError::Panicked(panic_message(&*panic)))
                    });
                    completer.complete(result);
                })
                .abort_handle()
                .into()
        }))
    }

    pub(crate) fn blocking<C, F>(f: F) -> Handler
    where
        C: Send + 'static,
        F: Fn(C) -> Result<Payload, CommandError> + Send + Sync + 'static,
    {
        let f = StdArc::new(f);
        Handler::Blocking(Box::new(move |command, completer, runtime, timeout| {
            let f = f.clone();
            let command = downcast::<C>(command);
            // With a deadline, the blocking call and a timer race for the one completion.
            let slot = StdArc::new(StdMutex::new(Some(completer)));
            if let Some(timeout) = timeout {
                let slot = slot.clone();
                runtime.spawn(async move {
                    tokio::time::sleep(timeout).await;
                    if let Some(completer) = take(&slot) {
                        completer.complete(Err(CommandError::TimedOut));
                    }
                });
            }
            runtime
                .spawn_blocking(move || {
                    let result =
                        catch_unwind(AssertUnwindSafe(|| f(command))).unwrap_or_else(|panic| {
                            Err(CommandError::Panicked(panic_message(&*panic)))
                        });
                    if let Some(completer) = take(&slot) {
                        completer.complete(result);
                    }
                })
                .abort_handle()
                .into()
        }))
    }

    pub(crate) fn needs_runtime(&self) -> bool {
        !matches!(self, Handler::Inline(_))
    }
}

/// Takes the completer out of a blocking yield's slot (first of handler and timer wins).
fn take(slot: &StdMutex<Option<YieldCompleter>>) -> Option<YieldCompleter> {
    slot.lock().unwrap_or_else(|p| p.into_inner()).take()
}

fn downcast<C: 'static>(command: Payload) -> C {
    match command.downcast::<C>() {
        Ok(command) => command,
        Err(other) => unreachable!("handler for {} got {other:?}", std::any::type_name::<C>()),
    }
}

/// The handlers of one scheduler, looked up by the command's `TypeId` on every yield.
#[derive(Default)]
pub(crate) struct HandlerSet {
    handlers: HashMap<TypeId, Handler, BuildHasherDefault<TypeIdHasher>>,
}

impl HandlerSet {
    /// Adds a handler; returns `false` if one is already registered for `C`.
    pub(crate) fn insert(&mut self, type_id: TypeId, handler: Handler) -> bool {
        match self.handlers.entry(type_id) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(handler);
                true
            }
        }
    }

    pub(crate) fn get(&self, type_id: TypeId) -> Option<&Handler> {
        self.handlers.get(&type_id)
    }

    pub(crate) fn needs_runtime(&self) -> bool {
        self.handlers.values().any(Handler::needs_runtime)
    }
}

/// `TypeId`s are already well-distributed hashes: pass them through instead of running SipHash
/// on every yield.
#[derive(Default)]
pub(crate) struct TypeIdHasher(u64);

impl Hasher for TypeIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 ^= u64::from_ne_bytes(word);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }
}
