//! What a node accepts from others: the message types it decodes and the bodies it spawns, by
//! registered name. Fixed when the node starts, so lookups take no lock.

use super::decoding::DecodeScope;
use super::reply;
use super::wire::{Refusal, WireReason};
use crate::process::take_panic_message;
use crate::process::{BoxError, MessageType, Payload, Pid, Process, ProcessError};
use crate::scheduler::{
    ChildOptions, ProcessCx, SchedulerHandle, SendErrorKind, SpawnError, SpawnOptions,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::any::TypeId;
use std::collections::HashMap;
use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;

/// Decodes a message of one registered type and delivers it to a local process.
type DeliverFn =
    dyn Fn(&SchedulerHandle, Pid, &[u8], DecodeScope<'_>) -> Result<(), Refusal> + Send + Sync;
/// Decodes a spawn's argument and spawns one registered body: its PID, and its outcome to
/// await (the output encoded, or the exit reason) if someone asked to join it.
type SpawnFn = dyn Fn(&SchedulerHandle, &[u8], DecodeScope<'_>) -> Result<(Pid, JoinFuture), Refusal>
    + Send
    + Sync;

/// A spawned body's outcome: its output encoded, or why it ended without one.
pub(crate) type JoinFuture = Pin<Box<dyn Future<Output = Result<Vec<u8>, WireReason>> + Send>>;

/// The registered message types and spawnable bodies.
#[derive(Default, Clone)]
pub(crate) struct Registry {
    deliver: HashMap<String, Arc<DeliverFn>>,
    names: HashMap<TypeId, Arc<str>>,
    /// The type each message name decodes as, and the body each spawnable name runs: what a
    /// second registration of a name (or type) is checked against.
    message_types: HashMap<String, Registered>,
    spawn_bodies: HashMap<String, (Registered, ChildOptions)>,
    spawn: HashMap<String, Arc<SpawnFn>>,
    /// Registrations that contradict an earlier one, refused by `Node::start`
    /// ([`check`](Self::check)): the builder's methods cannot fail.
    conflicts: Vec<String>,
}

/// A registered type (a message type, or a spawnable body's type).
#[derive(Clone, Copy)]
struct Registered {
    id: TypeId,
    name: &'static str,
}

impl Registered {
    fn of<T: 'static>() -> Registered {
        Registered {
            id: TypeId::of::<T>(),
            name: std::any::type_name::<T>(),
        }
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("messages", &self.deliver.keys().collect::<Vec<_>>())
            .field("spawnable", &self.spawn.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Registry {
    /// Registers message type `M` as `name`. Again under the same name: nothing changes. Under
    /// a name another type has, or with `M` already under another name: a conflict
    /// ([`check`](Self::check)) — the name would decode as one type only (the other's messages
    /// refused `WrongType`), and `M` would be sent under one name only.
    pub(crate) fn message<M>(&mut self, name: &str)
    where
        M: DeserializeOwned + Send + 'static,
    {
        let ty = Registered::of::<M>();
        if let Some(earlier) = self.message_types.get(name) {
            if earlier.id != ty.id {
                self.conflicts.push(format!(
                    "the message name {name:?} is registered for two types, `{}` and `{}`: \
                     each message type needs a name of its own",
                    earlier.name, ty.name
                ));
            }
            return;
        }
        if let Some(earlier) = self.names.get(&ty.id) {
            self.conflicts.push(format!(
                "the message type `{}` is registered under two names, {earlier:?} and \
                 {name:?}: a type is sent under one name",
                ty.name
            ));
            return;
        }
        self.message_types.insert(name.to_owned(), ty);
        let wire_name: Arc<str> = name.into();
        let deliver =
            move |sched: &SchedulerHandle, pid: Pid, body: &[u8], scope: DecodeScope<'_>| {
                // Before decoding: a refused message's reply ports are never made. The sender's
                // type is known here only by its name: the refusal says both, so that a name
                // registered for different types on two nodes shows.
                check_takes::<M>(scope.node.takes(pid)).map_err(|refusal| match refusal {
                    Refusal::WrongType { takes, sent } => Refusal::WrongType {
                        takes,
                        sent: format!("{sent} (sent as {wire_name:?})"),
                    },
                    other => other,
                })?;
                let message: M = scope.decode_msgpack(body).map_err(Refusal::Decode)?;
                sched.addr::<M>(pid).send(message).map_err(|refused| {
                    let refusal = refusal_of(refused.kind());
                    // The message is dropped here, unanswered: a reply port inside it must not
                    // race a `NoReply` ahead of the refusal the asker gets instead.
                    reply::quietly(|| drop(refused));
                    refusal
                })
            };
        self.deliver.insert(name.to_owned(), Arc::new(deliver));
        self.names.insert(TypeId::of::<M>(), name.into());
    }

    /// Registers `body` as spawnable by `name`, with an argument of type `A`, each instance
    /// spawned with `options`.
    pub(crate) fn spawnable<A, M, F, Fut, T, E>(
        &mut self,
        name: &str,
        options: ChildOptions,
        body: F,
    ) where
        A: DeserializeOwned + Send + 'static,
        M: Send + 'static,
        F: Fn(ProcessCx<M>, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Serialize + Send + 'static,
        E: Into<BoxError>,
    {
        if !self.claim_spawnable::<F>(name, &options) {
            return;
        }
        let body = Arc::new(body);
        let spawn = move |sched: &SchedulerHandle, args: &[u8], scope: DecodeScope<'_>| {
            let args: A = decode_args(scope, args)?;
            let body = body.clone();
            let handle = sched
                .spawn_fn_with(
                    SpawnOptions::from(options.clone()).kind_of::<F>(),
                    move |cx: ProcessCx<M>| body(cx, args),
                )
                .map_err(|error| refusal_of_spawn(&error))?;
            let pid = handle.pid();
            Ok((pid, encoded_outcome(pid, handle)))
        };
        self.spawn.insert(name.to_owned(), Arc::new(spawn));
    }

    /// Registers a state machine made by `make` from an argument of type `A` as spawnable by
    /// `name`, each instance spawned with `options` and initialised for entry method `name`.
    pub(crate) fn spawnable_process<A, P, F>(&mut self, name: &str, options: ChildOptions, make: F)
    where
        A: DeserializeOwned + Send + 'static,
        P: Process,
        P::Output: Serialize,
        F: Fn(A) -> P + Send + Sync + 'static,
    {
        if !self.claim_spawnable::<F>(name, &options) {
            return;
        }
        let method: Arc<str> = name.into();
        let spawn = move |sched: &SchedulerHandle, args: &[u8], scope: DecodeScope<'_>| {
            let args: A = decode_args(scope, args)?;
            // The constructor is user code, run on the node's inbound task: a panic refuses
            // the spawn as a panicking `init` would.
            let process = panic::catch_unwind(AssertUnwindSafe(|| make(args)))
                .map_err(|panic| Refusal::SpawnPanicked(take_panic_message(panic)))?;
            let handle = sched
                .spawn_with(
                    SpawnOptions::from(options.clone()),
                    process,
                    &method,
                    Payload::empty(),
                )
                .map_err(|error| refusal_of_spawn(&error))?;
            let pid = handle.pid();
            Ok((pid, encoded_outcome(pid, handle)))
        };
        self.spawn.insert(name.to_owned(), Arc::new(spawn));
    }

    /// Claims `name` for a body of type `F` with `options`: `false` if it is taken already —
    /// by the same body with the same options (nothing to do), or else a conflict
    /// ([`check`](Self::check)).
    fn claim_spawnable<F: 'static>(&mut self, name: &str, options: &ChildOptions) -> bool {
        // A body of a zero-sized type (a function item, a closure that captures nothing)
        // registered again is the same body. Two values of a sized type — a closure with
        // state, a `fn` pointer (two may point at different functions) — cannot be compared:
        // a conflict, as any other second body under the name.
        let kind = Registered::of::<F>();
        if let Some((earlier, earlier_options)) = self.spawn_bodies.get(name) {
            if earlier.id != kind.id {
                self.conflicts.push(format!(
                    "the spawnable name {name:?} is registered for two bodies, `{}` and `{}`: \
                     each body needs a name of its own",
                    earlier.name, kind.name
                ));
            } else if std::mem::size_of::<F>() != 0 {
                self.conflicts.push(format!(
                    "the spawnable name {name:?} is registered twice with a body procsched \
                     cannot compare (`{}`: a closure with state, or a `fn` pointer): register \
                     it once, or the function itself (not a pointer to it)",
                    kind.name
                ));
            } else if earlier_options != options {
                self.conflicts.push(format!(
                    "the spawnable name {name:?} is registered twice with different options \
                     ({earlier_options:?} and {options:?}): its instances are spawned with one"
                ));
            }
            return false;
        }
        self.spawn_bodies
            .insert(name.to_owned(), (kind, options.clone()));
        true
    }

    /// `Err` with every registration that contradicts an earlier one (see
    /// [`message`](Self::message), [`spawnable`](Self::spawnable)).
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.conflicts.is_empty() {
            Ok(())
        } else {
            Err(self.conflicts.join("; "))
        }
    }

    /// The registered name of message type `M`.
    pub(crate) fn name_of<M: 'static>(&self) -> Option<&str> {
        self.names.get(&TypeId::of::<M>()).map(|name| &**name)
    }

    /// Delivers a message of registered type `ty`.
    pub(crate) fn deliver(
        &self,
        sched: &SchedulerHandle,
        ty: &str,
        pid: Pid,
        body: &[u8],
        scope: DecodeScope<'_>,
    ) -> Result<(), Refusal> {
        match self.deliver.get(ty) {
            Some(deliver) => catching("a message's decoding", || deliver(sched, pid, body, scope)),
            None => Err(Refusal::Unregistered(ty.to_owned())),
        }
    }

    /// Spawns registered body `name`.
    pub(crate) fn spawn(
        &self,
        sched: &SchedulerHandle,
        name: &str,
        args: &[u8],
        scope: DecodeScope<'_>,
    ) -> Result<(Pid, JoinFuture), Refusal> {
        match self.spawn.get(name) {
            Some(spawn) => catching("a spawn's argument", || spawn(sched, args, scope)),
            None => Err(Refusal::Unregistered(name.to_owned())),
        }
    }
}

/// A spawn's argument, decoded as `A`.
fn decode_args<A: DeserializeOwned>(scope: DecodeScope<'_>, args: &[u8]) -> Result<A, Refusal> {
    scope.decode_msgpack(args).map_err(|error| {
        Refusal::Decode(format!(
            "the argument did not decode as `{}`: {error}",
            std::any::type_name::<A>()
        ))
    })
}

/// The outcome of spawned process `pid`, awaited through `handle`: its output encoded, or why
/// it ended without one.
fn encoded_outcome<T, H>(pid: Pid, handle: H) -> JoinFuture
where
    T: Serialize + Send + 'static,
    H: Future<Output = Result<T, ProcessError>> + Send + 'static,
{
    Box::pin(async move {
        match handle.await {
            // The output's `Serialize` is user code, run on the node's own task.
            Ok(output) => {
                match panic::catch_unwind(AssertUnwindSafe(|| rmp_serde::to_vec_named(&output))) {
                    Ok(Ok(bytes)) => Ok(bytes),
                    Ok(Err(error)) => Err(WireReason::Failed(format!(
                        "the output did not encode: {error}"
                    ))),
                    Err(panic) => Err(WireReason::Failed(format!(
                        "the output's Serialize panicked: {}",
                        take_panic_message(panic)
                    ))),
                }
            }
            Err(error) => Err(WireReason::from_reason(pid, &error.exit_reason())),
        }
    })
}

/// Refuses an `M` for local process `pid` if it declared another message type
/// (`ProcessCx<T>`, `T` not `M`): a remote sender holds only a PID, so its `M` was never
/// checked by a compiler, and delivered, the message would fail the process's receive (and a
/// body that propagates that with `?`, the process). A process that declared none (a state
/// machine, `ProcessCx<()>`, `ProcessCx<Message>`) takes what comes, as locally; a PID with no
/// live process is the delivery's to report (`NotFound`). `takes`: what the process declared
/// (`NodeShared::takes`).
pub(crate) fn check_takes<M: 'static>(takes: Option<Option<MessageType>>) -> Result<(), Refusal> {
    match takes {
        Some(Some(takes)) if takes.id() != TypeId::of::<M>() => Err(Refusal::WrongType {
            takes: takes.name().to_owned(),
            sent: std::any::type_name::<M>().to_owned(),
        }),
        _ => Ok(()),
    }
}

/// Runs `f`, which runs a registered type's own code (its `Deserialize`, or its `Drop` when
/// it is refused) on the node's inbound task: a panic there refuses that one item as
/// undecodable, traced, instead of ending the task (which would leave every later frame from
/// every node unread, and their asks waiting for their timeouts).
fn catching<T>(what: &str, f: impl FnOnce() -> Result<T, Refusal>) -> Result<T, Refusal> {
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(panic) => {
            let message = take_panic_message(panic);
            tracing::error!(%message, "{what} panicked");
            Err(Refusal::Decode(format!("{what} panicked: {message}")))
        }
    }
}

/// A local send's refusal, for the wire.
pub(crate) fn refusal_of(kind: SendErrorKind) -> Refusal {
    match kind {
        SendErrorKind::NotFound => Refusal::NotFound,
        SendErrorKind::Closed => Refusal::Closed,
        _ => Refusal::MailboxFull,
    }
}

/// A local spawn's refusal, for the wire.
pub(crate) fn refusal_of_spawn(error: &SpawnError) -> Refusal {
    match error {
        // The error of a failed `init` is user code: its `Display` is contained.
        SpawnError::Init(error) => {
            Refusal::SpawnInit(crate::process::display_contained(error, None).to_string())
        }
        SpawnError::InitPanicked(message) => Refusal::SpawnPanicked(message.clone()),
        SpawnError::ShuttingDown => Refusal::ShuttingDown,
        SpawnError::Limit(limit) => Refusal::Limit(*limit as u64),
    }
}
