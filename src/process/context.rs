//! What `init` gets to know about its process.

use super::Pid;
use std::any::Any;

/// The process's identity and a handle to its scheduler, given to [`Process::init`](super::Process::init).
///
/// Keep a clone of [`scheduler`](Self::scheduler) to spawn or send from inside `step`.
///
/// # Examples
///
/// ```
/// use procsched::{BoxError, Events, InitError, Payload, Pid, Process, ProcessContext, SchedulerHandle, StepOutput};
///
/// struct Child;
/// impl Process for Child {
///     fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> { Ok(()) }
///     fn step(&mut self, _: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
///         out.done(Payload::new(1u32));
///         Ok(())
///     }
/// }
///
/// struct Parent { me: Option<Pid>, sched: Option<SchedulerHandle> }
/// impl Process for Parent {
///     fn init(&mut self, ctx: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
///         self.me = Some(ctx.pid());
///         self.sched = Some(ctx.scheduler().clone());
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
    /// The scheduler hosting the process, type-erased: the process layer does not depend on the
    /// scheduler above it. The scheduler layer adds the typed constructor and accessor
    /// (`ProcessContext::new`, `ProcessContext::scheduler`, in `scheduler/handle.rs`).
    host: &'a (dyn Any + Send + Sync),
}

impl<'a> ProcessContext<'a> {
    /// A context for `pid` hosted by `host` (the scheduler layer's handle).
    pub(crate) fn with_host(pid: Pid, host: &'a (dyn Any + Send + Sync)) -> Self {
        ProcessContext { pid, host }
    }

    /// The host, for the scheduler layer to downcast.
    pub(crate) fn host(&self) -> &'a (dyn Any + Send + Sync) {
        self.host
    }

    /// This process's PID.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{Pid, ProcessContext, Scheduler};
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let pid = Pid::from_raw(1 << 26 | 7).unwrap();
    /// let ctx = ProcessContext::new(pid, sched.handle());
    /// assert_eq!(ctx.pid(), pid);
    /// # Ok::<(), procsched::BuildError>(())
    /// ```
    pub fn pid(&self) -> Pid {
        self.pid
    }
}

impl std::fmt::Debug for ProcessContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessContext")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}
