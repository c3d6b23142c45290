//! What `init` gets to know about its process.

use super::mailbox::ProcessCell;
use super::{Event, Pid, Tag};
use crate::loom::Arc;
use std::marker::PhantomData;
use std::task::{Wake, Waker};

/// The process's identity and a handle to its scheduler, given to [`Process::init`](super::Process::init).
///
/// Keep a clone of [`scheduler`](Self::scheduler) to spawn or send from inside `step`.
///
/// # Examples
///
/// ```
/// use procsched::{BoxError, Payload, Pid, SchedulerHandle, state_machine::{Events, Process, ProcessContext, StepOutput}, error::InitError};
///
/// struct Child;
/// impl Process for Child {
///     type Output = Payload;
///     fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> { Ok(()) }
///     fn step(&mut self, _: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
///         out.done(Payload::new(1u32));
///         Ok(())
///     }
/// }
///
/// struct Parent { me: Option<Pid>, sched: Option<SchedulerHandle> }
/// impl Process for Parent {
///     type Output = Payload;
///     fn init(&mut self, ctx: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
///         self.me = Some(ctx.pid());
///         self.sched = Some(ctx.scheduler());
///         Ok(())
///     }
///     fn step(&mut self, _: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
///         let sched = self.sched.as_ref().unwrap();
///         let child = sched.spawn(Child, "run", Payload::empty())?;
///         out.done(Payload::new(child.pid()));
///         Ok(())
///     }
/// }
/// # let sched = procsched::Scheduler::builder().workers(1).build().unwrap();
/// # let h = sched.spawn(Parent { me: None, sched: None }, "run", Payload::empty()).unwrap();
/// # assert!(sched.block_on(h).unwrap().is::<Pid>());
/// ```
pub struct ProcessContext<'a> {
    pid: Pid,
    /// The host's identity ([`HostId`]): with the PID, names the process among every host's.
    host_id: HostId,
    /// The process's cell, when it runs in a scheduler (not in a hand-made context).
    cell: Option<&'a Arc<ProcessCell>>,
    /// A context borrows its scheduler for `'a` (`scheduler/hosts.rs`).
    _borrows: PhantomData<&'a ()>,
}

impl<'a> ProcessContext<'a> {
    /// A context for `pid` in the host `host_id`: the scheduler layer's constructor and
    /// accessor (`ProcessContext::new`, `ProcessContext::scheduler`, in `scheduler/hosts.rs`)
    /// find the scheduler by that identity, which the process layer cannot name.
    pub(crate) fn for_host(pid: Pid, host_id: HostId) -> Self {
        ProcessContext {
            pid,
            host_id,
            cell: None,
            _borrows: PhantomData,
        }
    }

    /// The host's identity.
    pub(crate) fn host_id(&self) -> HostId {
        self.host_id
    }

    /// The process among every host's: its host's identity and its PID.
    pub(crate) fn owner(&self) -> Owner {
        Owner {
            host: self.host_id,
            pid: self.pid,
        }
    }

    /// The same context, able to hand out wakers into `cell` (the process's own).
    pub(crate) fn with_cell(mut self, cell: &'a Arc<ProcessCell>) -> Self {
        self.cell = Some(cell);
        self
    }

    /// This process's PID.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{Pid, Scheduler, state_machine::ProcessContext};
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let pid = Pid::from_raw(1 << 26 | 7).unwrap();
    /// let ctx = ProcessContext::new(pid, sched.handle());
    /// assert_eq!(ctx.pid(), pid);
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// A [`Waker`] that delivers [`Event::Woken`] to this process (consecutive wakes coalesce
    /// into one event; wakes after the process ended are ignored): hand it to a future or a
    /// callback outside procsched to be stepped when it has news. `None` in a context made by
    /// hand ([`ProcessContext::new`]) and under a [`testing::Harness`](crate::testing::Harness)
    /// (the test steps its process: nothing else does), where the example's `init` refuses to
    /// start with an `InitError`.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::{state_machine::{Event, Events, Process, ProcessContext, StepOutput}, error::InitError};
    /// use std::task::Waker;
    ///
    /// /// Hands its waker out, finishes when woken.
    /// struct Wakeable(std::sync::mpsc::Sender<Waker>);
    /// impl Process for Wakeable {
    ///     type Output = ();
    ///     fn init(&mut self, ctx: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
    ///         let waker = ctx.waker().ok_or_else(|| InitError::failed("no waker: not on a scheduler"))?;
    ///         self.0.send(waker).map_err(InitError::failed)?;
    ///         Ok(())
    ///     }
    ///     fn step(&mut self, events: &mut Events, out: &mut StepOutput<()>) -> Result<(), BoxError> {
    ///         match events.pop() {
    ///             Some(Event::Woken) => out.done(()),
    ///             _ => out.wait(),
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let handle = sched.spawn(Wakeable(tx), "run", Payload::empty())?;
    /// rx.recv()?.wake();
    /// sched.block_on(handle)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn waker(&self) -> Option<Waker> {
        self.wake_target().map(ProcessWake::waker)
    }

    /// What a waker of this process wakes, for wakers made later (the async-fn adapter's).
    pub(crate) fn wake_target(&self) -> Option<ProcessWake> {
        Some(ProcessWake {
            cell: self.cell?.clone(),
            generation: self.pid.generation(),
        })
    }
}

/// A host's identity: unique among the schedulers and test harnesses of this program, for as
/// long as it runs (a PID is unique within its host only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct HostId(u64);

impl HostId {
    /// A new, never used identity.
    pub(crate) fn next() -> HostId {
        // Plain std: an identity, not part of any protocol a loom model explores.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        HostId(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

/// Names one process among every host's: what the async-fn futures remember, so that one
/// polled inside another process is told apart (`async_fn/scope.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Owner {
    pub(crate) host: HostId,
    pub(crate) pid: Pid,
}

/// What a process's [`Waker`] wakes: its cell, in the incarnation it was made for.
#[derive(Clone)]
pub(crate) struct ProcessWake {
    cell: Arc<ProcessCell>,
    generation: u64,
}

impl ProcessWake {
    /// What wakes the process of `generation` in `cell` (a state machine's ask: its answer's
    /// way into the asker's mailbox, `dispatch/ask.rs`).
    pub(crate) fn new(cell: Arc<ProcessCell>, generation: u64) -> ProcessWake {
        ProcessWake { cell, generation }
    }

    /// `true` if this wakes `pid`, a process of `cell` (the asker is the asked).
    pub(crate) fn is(&self, cell: &ProcessCell, pid: crate::process::Pid) -> bool {
        std::ptr::eq(&*self.cell, cell) && self.generation == pid.generation()
    }

    /// A waker delivering `Event::Woken` to this target (one allocation).
    pub(crate) fn waker(self) -> Waker {
        Waker::from(std::sync::Arc::new(self))
    }

    /// Delivers `event` to the process, waking it if it waits; hands the event back if the
    /// process is gone (its incarnation ended).
    #[allow(clippy::result_large_err)] // an answer comes back by value
    pub(crate) fn deliver(&self, event: Event) -> Result<(), Event> {
        self.cell.deliver_or_return(self.generation, event)
    }

    /// The process (this target, polling its body) stops waiting for the answer to its ask
    /// `tag`: the answer is refused when it comes (`mailbox/abandoned.rs`).
    pub(crate) fn abandon_ask(&self, tag: Tag) {
        self.cell.abandon_ask(self.generation, tag);
    }

    /// Takes back an [`abandon_ask`](Self::abandon_ask) of `tag` whose answer has not come:
    /// `true` if it was still recorded (now forgotten), `false` if the answer came, and was
    /// refused (`mailbox/abandoned.rs`).
    pub(crate) fn forget_abandoned(&self, tag: Tag) -> bool {
        self.cell.forget_abandoned(self.generation, tag)
    }

    /// [`ProcessCell::time_out_ask`] for this process.
    pub(crate) fn time_out_ask(&self, tag: Tag) -> bool {
        self.cell.time_out_ask(self.generation, tag)
    }

    /// `true` if the process's mailbox has a capacity.
    pub(crate) fn is_bounded(&self) -> bool {
        self.cell.is_bounded()
    }

    /// The process (this target, polling its body) holds `unread` messages it has not handled
    /// (a bounded mailbox's count: `ProcessCell::set_unread`).
    pub(crate) fn set_unread(&self, unread: usize) {
        self.cell.set_unread(unread);
    }

    /// The process (this target, polling its body) holds `messages` and `signals` unread, for
    /// `process_info` (`CellStats::set_held`).
    pub(crate) fn set_held(&self, messages: u32, signals: u32) {
        self.cell.stats.set_held(messages, signals);
    }

    /// `true` if the process lives and still waits for the answer to its ask `tag`.
    pub(crate) fn awaits_answer(&self, tag: Tag) -> bool {
        self.cell.awaits_answer(self.generation, tag)
    }

    /// Counts contained destructor panics in the process's cell (`contain.rs`).
    pub(crate) fn destructors_panicked(&self, panics: u64) {
        self.cell.stats.destructors_panicked(panics);
    }
}

impl std::fmt::Debug for ProcessWake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessWake")
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl Wake for ProcessWake {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        // Refused once the process is gone (the generation moved on): nothing to wake.
        let _ = self.cell.deliver(self.generation, Event::Woken);
    }
}

impl std::fmt::Debug for ProcessContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessContext")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}
