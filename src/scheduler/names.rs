//! Named processes: `register(name, pid)`, `whereis(name)`, send and ask by name.
//!
//! A name names one live process. It is released when that process ends (`shared.rs`,
//! `finished`: before its links and monitors are signalled, so whoever restarts it can
//! register the name again at once), and registering a name that is taken is a typed error. A
//! supervisor re-registers a child's name on every (re)start, so callers always reach the live
//! instance — never a dead one's PID (PIDs are never reused).
//!
//! One lock over the map: names are looked up per send by name, registered per (re)start;
//! neither is on the path of a send by PID or address.
//!
//! # Why no registration survives its process
//! `register` marks the process as named in its cell (a `Watch::Named`, `process/mailbox/watch.rs`
//! protocol 8) *under the names lock*, and that fails once the process's end has taken its
//! watches. The end, seeing the mark, releases the process's names under the names lock. So a
//! registration either marked the cell before the end (and the end removes it, after the
//! registration let go of the lock) or finds the process gone (and fails). A process without a
//! name costs its end nothing.
//!
//! # Released before anyone hears
//! No `Down` or exit signal of a process is seen while a name still gives its PID. Its end
//! releases its names before it signals its links and monitors; but the end refuses new
//! watches (the table's `release`) before it releases the names, and a monitor or link made
//! in between hears `NoProc` at once. So whoever is refused a watch releases the target's
//! names first (`Inner::gone`, `links.rs`): a refused watch means no registration of that PID
//! can follow (`register` marks the cell under the names lock, and the cell refuses it too),
//! and releasing twice is harmless (`by_pid` no longer has the PID: the name, perhaps taken by
//! another process since, is left alone). Only refusals pay: the names lock, on a path that
//! is already cold.

use super::handle::SchedulerHandle;
use super::Addr;
use crate::process::mailbox::Watch;
use crate::process::Pid;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The names of a scheduler's processes.
#[derive(Debug, Default)]
pub(crate) struct Names {
    map: Mutex<NameMap>,
}

#[derive(Debug, Default)]
struct NameMap {
    by_name: HashMap<Arc<str>, Pid>,
    /// The name each named process holds (one at most, as in OTP).
    by_pid: HashMap<Pid, Arc<str>>,
}

/// Why `register` failed.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::supervision::RegisterError;
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let waiter = || |cx: ProcessCx<()>| async move { Ok::<_, BoxError>(cx.recv().await?) };
/// let (primary, standby) = (sched.spawn_fn(waiter())?, sched.spawn_fn(waiter())?);
/// sched.handle().register("primary", primary.pid())?;
///
/// // One process per name, one name per process: the refusal names the holder.
/// match sched.handle().register("primary", standby.pid()) {
///     Err(RegisterError::Taken { holder, .. }) => assert_eq!(holder, primary.pid()),
///     other => panic!("expected Taken, got {other:?}"),
/// }
///
/// match sched.handle().register("alias", primary.pid()) {
///     Err(RegisterError::AlreadyNamed { name, .. }) => assert_eq!(&*name, "primary"),
///     other => panic!("expected AlreadyNamed, got {other:?}"),
/// }
///
/// let ended = standby.pid();
/// standby.addr().send(())?;
/// sched.block_on(standby)?;
/// assert_eq!(sched.handle().register("standby", ended), Err(RegisterError::NotRunning(ended)));
/// # primary.addr().send(())?;
/// # sched.block_on(primary)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegisterError {
    /// The name belongs to another live process.
    #[error("the name `{name}` is taken by {holder}")]
    Taken {
        /// The name.
        name: Arc<str>,
        /// Who holds it.
        holder: Pid,
    },
    /// The process is not running.
    #[error("process {0} is not running")]
    NotRunning(Pid),
    /// The process holds another name already: a process has at most one (OTP's
    /// `register/2`); [`unregister`](SchedulerHandle::unregister) that one first.
    #[error("process {pid} is registered as `{name}` already")]
    AlreadyNamed {
        /// The process.
        pid: Pid,
        /// The name it holds.
        name: Arc<str>,
    },
}

impl Names {
    fn lock(&self) -> std::sync::MutexGuard<'_, NameMap> {
        // No user code runs under the lock: a poisoned map is still consistent.
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Releases every name `pid` holds (its end).
    pub(crate) fn release(&self, pid: Pid) {
        let mut map = self.lock();
        if map.by_pid.is_empty() {
            return;
        }
        if let Some(name) = map.by_pid.remove(&pid) {
            map.by_name.remove(&name);
        }
    }
}

impl SchedulerHandle {
    /// Gives `pid` the name `name`, until it ends (or [`unregister`](Self::unregister)).
    ///
    /// # Errors
    ///
    /// [`RegisterError::Taken`] if another live process holds the name (the holder's own
    /// second registration of it succeeds), [`RegisterError::AlreadyNamed`] if `pid` holds
    /// another name (a process has at most one, as in OTP), [`RegisterError::NotRunning`] if
    /// `pid` has ended.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let cache = sched.spawn_fn(|cx: ProcessCx<u32>| async move { Ok::<_, BoxError>(cx.recv().await?) })?;
    /// sched.handle().register("cache", cache.pid())?;
    /// assert_eq!(sched.handle().whereis("cache"), Some(cache.pid()));
    /// sched.handle().named::<u32>("cache").unwrap().send(7)?;
    /// assert_eq!(sched.block_on(cache)?, 7);
    /// assert_eq!(sched.handle().whereis("cache"), None, "released when it ended");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn register(&self, name: impl Into<Arc<str>>, pid: Pid) -> Result<(), RegisterError> {
        let name = name.into();
        let inner = &self.inner;
        let mut map = inner.names.lock();
        if let Some(&holder) = map.by_name.get(&name) {
            return if holder == pid {
                Ok(())
            } else {
                Err(RegisterError::Taken { name, holder })
            };
        }
        if let Some(held) = map.by_pid.get(&pid) {
            return Err(RegisterError::AlreadyNamed {
                pid,
                name: held.clone(),
            });
        }
        // Under the names lock (module docs): a process that holds a name says so in its cell,
        // which its end reads with its other watches.
        let running = inner
            .table
            .get(pid)
            .is_some_and(|cell| cell.watch(pid.generation(), Watch::Named).is_ok());
        if !running {
            return Err(RegisterError::NotRunning(pid));
        }
        map.by_name.insert(name.clone(), pid);
        map.by_pid.insert(pid, name);
        Ok(())
    }

    /// Removes the name `name`; `true` if it was registered.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().workers(1).build()?;
    /// assert!(!sched.handle().unregister("nobody"));
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn unregister(&self, name: &str) -> bool {
        let mut map = self.inner.names.lock();
        let Some(pid) = map.by_name.remove(name) else {
            return false;
        };
        map.by_pid.remove(&pid);
        // Under the names lock, as `register` marked it: a process whose name is moved again
        // and again must not keep a mark per registration.
        if let Some(cell) = self.inner.table.get(pid) {
            cell.unwatch_named(pid.generation());
        }
        true
    }

    /// The live process named `name`, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let db = sched.spawn_fn(|cx: ProcessCx<()>| async move { Ok::<_, BoxError>(cx.recv().await?) })?;
    /// sched.handle().register("db", db.pid())?;
    ///
    /// // A PID, for what takes one: a monitor, a link, `state`.
    /// let pid = sched.handle().whereis("db").expect("registered");
    /// let down = sched.monitor(pid);
    /// sched.handle().addr::<()>(pid).send(())?;
    /// assert!(sched.block_on(down).reason.is_normal());
    /// assert_eq!(sched.handle().whereis("db"), None, "released before its monitors heard");
    /// # sched.block_on(db)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn whereis(&self, name: &str) -> Option<Pid> {
        self.inner.names.lock().by_name.get(name).copied()
    }

    /// The typed address of the process named `name`, if any, to send or ask by name: resolved
    /// now (a restarted process has a new PID, and the name moves to it: look it up again for
    /// each request that must reach the live instance).
    ///
    /// Names are not typed: `M` is what the caller says the process receives. A wrong `M`
    /// compiles; the process's receive then fails with
    /// [`RecvError::TypeMismatch`](crate::error::RecvError::TypeMismatch) and the message is
    /// dropped. Keep a name's message type next to the name (a constant and a type alias).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let config = sched.spawn_fn(|cx: ProcessCx<Reply<u16>>| async move {
    ///     let _ = cx.recv().await?.send(8080);
    ///     Ok::<_, BoxError>(())
    /// })?;
    /// sched.handle().register("config", config.pid())?;
    ///
    /// // Looked up per request: a restarted `config` would have a new PID under the same name.
    /// let addr = sched.handle().named::<Reply<u16>>("config").ok_or("no config process")?;
    /// assert_eq!(sched.block_on(addr.ask(|reply| reply))?, 8080);
    /// assert!(sched.handle().named::<Reply<u16>>("cache").is_none());
    /// # sched.block_on(config)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn named<M>(&self, name: &str) -> Option<Addr<M>> {
        self.whereis(name).map(|pid| self.addr(pid))
    }
}
