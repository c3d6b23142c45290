//! What `init` gets to know about its process.

use super::Pid;
use crate::scheduler::SchedulerHandle;

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
#[derive(Debug)]
pub struct ProcessContext<'a> {
    pid: Pid,
    scheduler: &'a SchedulerHandle,
}

impl<'a> ProcessContext<'a> {
    /// A context for `pid`. The scheduler builds one for every `init`; build your own to drive a
    /// process by hand (unit tests of a `Process`, custom drivers).
    pub fn new(pid: Pid, scheduler: &'a SchedulerHandle) -> Self {
        ProcessContext { pid, scheduler }
    }

    /// This process's PID.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The scheduler running this process.
    pub fn scheduler(&self) -> &'a SchedulerHandle {
        self.scheduler
    }
}
