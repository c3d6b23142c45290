//! What a step produces: yields to dispatch, and the process's new status.

use super::payload::PayloadSlot;
use super::{drop_contained, drop_each, Payload, Tag};
use std::cell::Cell;
use std::mem::ManuallyDrop;
use std::time::Duration;

/// What a process wants after a step. `O` is the process's [`Output`](crate::state_machine::Process::Output).
///
/// # Examples
///
/// ```
/// use procsched::state_machine::{Events, StepOutput, Status};
///
/// // A step sets the status through its `StepOutput`: `wait()`, `done(..)`, or nothing (run again).
/// fn step(countdown: &mut u32, out: &mut StepOutput<&'static str>) {
///     *countdown -= 1;
///     if *countdown == 0 {
///         out.done("lift-off");
///     }
/// }
/// # let _ = (step, std::marker::PhantomData::<(Events, Status)>);
/// ```
#[derive(Debug, Default)]
#[non_exhaustive]
pub enum Status<O = Payload> {
    /// Run me again, after the other ready work (the default).
    #[default]
    Continue,
    /// I have yields outstanding: step me when an event arrives.
    Wait,
    /// I wait for messages: step me when an event arrives.
    Idle,
    /// I am finished, with this result. Yields of this step are dropped (with a warning).
    Done(O),
}

/// One yield: a command for the handler registered for its type.
#[derive(Debug)]
pub(crate) struct Yield {
    pub(crate) tag: Tag,
    pub(crate) command: Payload,
    /// Complete with `CommandError::TimedOut` if the handler takes longer.
    pub(crate) timeout: Option<Duration>,
}

/// One yield, owned where it lies in the step's yields buffer
/// ([`StepOutput::dispatch_in_place`]): dispatch reads the tag, the command's type and then only
/// the command's own bytes, never the whole yield (see [`PayloadSlot`]'s docs for why).
#[derive(Debug)]
pub(crate) struct YieldSlot<'a> {
    pub(crate) tag: Tag,
    pub(crate) command: PayloadSlot<'a>,
    timeout: &'a Option<Duration>,
}

impl<'a> YieldSlot<'a> {
    /// Takes ownership of the yield in `yielded`.
    ///
    /// # Safety
    ///
    /// As [`PayloadSlot::new`]: the owner of `yielded` gives it up, and never reads, moves or
    /// drops it again.
    #[inline]
    unsafe fn new(yielded: &'a mut Yield) -> YieldSlot<'a> {
        let Yield {
            tag,
            command,
            timeout,
        } = yielded;
        let command: *mut Payload = command;
        YieldSlot {
            tag: *tag,
            // SAFETY: `ManuallyDrop<Payload>` has `Payload`'s layout; the caller gives the
            // payload up (this function's contract is `PayloadSlot::new`'s).
            command: unsafe { PayloadSlot::new(&mut *command.cast::<ManuallyDrop<Payload>>()) },
            timeout,
        }
    }

    /// The yield's deadline, if it has one.
    #[inline]
    pub(crate) fn timeout(&self) -> Option<Duration> {
        *self.timeout
    }
}

/// The output buffer of a step: yields to dispatch and the new status.
///
/// The buffer is reused across steps; each step starts with no yields and status
/// [`Status::Continue`]. The first yield of a poll borrows its thread's spare buffer, given back
/// when the poll ends (no allocation per process, no buffer held while the process waits), and
/// small commands (up to four words) are stored inline in their yield.
///
/// # Examples
///
/// ```
/// use procsched::{Payload, state_machine::{Status, StepOutput}};
///
/// struct Fetch { url: &'static str }
///
/// let mut out = StepOutput::new();
/// out.yield_command(1, Fetch { url: "https://example.com" });
/// out.wait();
/// assert_eq!(out.yield_count(), 1);
/// assert!(matches!(out.status(), Status::Wait));
/// ```
#[derive(Debug)]
pub struct StepOutput<O = Payload> {
    yields: Yields,
    status: Status<O>,
    /// Tags of yields whose async-fn call future was dropped in this step before its
    /// completion came: the process future aborts their handler tasks after the step
    /// (`future.rs`, "Dropped calls"). Empty (no buffer) for every other step.
    dropped_calls: Vec<Tag>,
}

/// The yields of one step, apart from the (typed) status: the async-fn adapter's call futures
/// write here without knowing the process's output type.
pub(crate) type Yields = Vec<Yield>;

std::thread_local! {
    /// A spare yields buffer per thread: lent to the first yield of a poll, given back at its end.
    static YIELD_BUFFER: Cell<Yields> = const { Cell::new(Vec::new()) };
}

impl<O> Drop for StepOutput<O> {
    /// Yields and a `Done` value left in the buffer are user values: dropped one at a time,
    /// each destructor's panic contained (`contain.rs`). The scheduler empties its buffers
    /// after every step; this covers buffers driven by hand.
    #[inline]
    fn drop(&mut self) {
        if !self.yields.is_empty() || matches!(self.status, Status::Done(_)) {
            self.drop_contents();
        }
    }
}

impl<O> StepOutput<O> {
    #[cold]
    fn drop_contents(&mut self) {
        drop_each(self.yields.drain(..));
        drop_contained(std::mem::take(&mut self.status));
    }
}

impl<O> Default for StepOutput<O> {
    fn default() -> Self {
        StepOutput {
            yields: Yields::new(),
            status: Status::Continue,
            dropped_calls: Vec::new(),
        }
    }
}

impl StepOutput {
    /// An empty buffer for a process whose output is a [`Payload`] (for typed outputs:
    /// `StepOutput::<T>::default()`). For driving a process by hand.
    ///
    /// # Examples
    ///
    /// ```
    /// let out = procsched::state_machine::StepOutput::new();
    /// assert_eq!(out.yield_count(), 0);
    /// ```
    pub fn new() -> StepOutput {
        StepOutput::default()
    }
}

impl<O> StepOutput<O> {
    /// Asks for `command` to be dispatched to the handler registered for its type; its result
    /// comes back as [`Event::YieldComplete`](crate::state_machine::Event::YieldComplete) with this `tag`
    /// (distinct among the process's outstanding yields: [`Tag`]).
    ///
    /// Any type compiles here, unlike `cx.call`, which takes a
    /// [`Command`](crate::Command): a type with no registered handler (handlers are
    /// registered per `Command`) completes with `CommandError::NoHandler` at run time, and the
    /// reply is read with `payload.take::<C::Output>()`, checked at run time too. Declare
    /// commands with [`command!`](crate::command) and take their `Output`.
    ///
    /// # Examples
    ///
    /// ```
    /// struct Lookup(u32);
    /// let mut out = procsched::state_machine::StepOutput::new();
    /// out.yield_command(7, Lookup(1));
    /// let (tag, command) = out.take_yields().next().unwrap();
    /// assert_eq!((tag, command.is::<Lookup>()), (7, true));
    /// ```
    pub fn yield_command<C: Send + 'static>(&mut self, tag: Tag, command: C) {
        self.push_yield(Yield {
            tag,
            command: Payload::new(command),
            timeout: None,
        });
    }

    /// Like [`yield_command`](Self::yield_command), with a deadline: if an async or blocking
    /// handler has not completed within `timeout`, the yield completes with
    /// [`CommandError::TimedOut`](crate::error::CommandError::TimedOut) (an async handler's task is
    /// cancelled; a blocking one runs on, its late result discarded). Inline handlers complete
    /// during dispatch and are never late. Uses the tokio timer of the handlers' runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// struct Fetch;
    /// let mut out = procsched::state_machine::StepOutput::new();
    /// out.yield_command_within(1, Fetch, std::time::Duration::from_secs(5));
    /// assert_eq!(out.yield_count(), 1);
    /// ```
    pub fn yield_command_within<C: Send + 'static>(
        &mut self,
        tag: Tag,
        command: C,
        timeout: Duration,
    ) {
        self.push_yield(Yield {
            tag,
            command: Payload::new(command),
            timeout: Some(timeout),
        });
    }

    /// Number of yields so far in this step.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut out = procsched::state_machine::StepOutput::new();
    /// out.yield_command(1, ());
    /// out.yield_command(2, ());
    /// assert_eq!(out.yield_count(), 2);
    /// ```
    pub fn yield_count(&self) -> usize {
        self.yields.len()
    }

    /// Sets the status.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::state_machine::{Status, StepOutput};
    /// let mut out = StepOutput::<u8>::default();
    /// out.set_status(Status::Done(3));
    /// assert!(matches!(out.status(), Status::Done(3)));
    /// ```
    pub fn set_status(&mut self, status: Status<O>) {
        self.status = status;
    }

    /// The status so far.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::state_machine::{Status, StepOutput};
    /// let out = StepOutput::new();
    /// assert!(matches!(out.status(), Status::Continue)); // the default
    /// ```
    pub fn status(&self) -> &Status<O> {
        &self.status
    }

    /// [`Status::Continue`]: run again after other ready work.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::state_machine::{Status, StepOutput};
    /// let mut out = StepOutput::new();
    /// out.idle();
    /// out.continue_();
    /// assert!(matches!(out.status(), Status::Continue));
    /// ```
    pub fn continue_(&mut self) {
        self.status = Status::Continue;
    }

    /// [`Status::Wait`]: step again when an event (usually a yield completion) arrives.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::state_machine::{Status, StepOutput};
    /// let mut out = StepOutput::new();
    /// out.wait();
    /// assert!(matches!(out.status(), Status::Wait));
    /// ```
    pub fn wait(&mut self) {
        self.status = Status::Wait;
    }

    /// [`Status::Idle`]: step again when an event (usually a message) arrives.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::state_machine::{Status, StepOutput};
    /// let mut out = StepOutput::new();
    /// out.idle();
    /// assert!(matches!(out.status(), Status::Idle));
    /// ```
    pub fn idle(&mut self) {
        self.status = Status::Idle;
    }

    /// [`Status::Done`]: finish with `result`.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::state_machine::{Status, StepOutput};
    /// let mut out = StepOutput::<&str>::default();
    /// out.done("finished");
    /// assert!(matches!(out.status(), Status::Done("finished")));
    /// ```
    pub fn done(&mut self, result: O) {
        self.status = Status::Done(result);
    }

    /// Takes the status, leaving [`Status::Continue`]. For driving a process by hand (unit
    /// tests of a `Process`, custom drivers); the scheduler does this after every step.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::state_machine::{Status, StepOutput};
    /// let mut out = StepOutput::new();
    /// out.wait();
    /// assert!(matches!(out.take_status(), Status::Wait));
    /// assert!(matches!(out.status(), Status::Continue));
    /// ```
    pub fn take_status(&mut self) -> Status<O> {
        std::mem::take(&mut self.status)
    }

    /// Takes the yields, in order, as `(tag, command)` pairs. For driving a process by hand, like
    /// [`take_status`](Self::take_status).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::state_machine::StepOutput;
    ///
    /// let mut out = StepOutput::new();
    /// out.yield_command(7, "lookup");
    /// let yields: Vec<_> = out.take_yields().collect();
    /// assert_eq!(yields[0].0, 7);
    /// assert_eq!(yields[0].1.downcast_ref::<&str>(), Some(&"lookup"));
    /// assert_eq!(out.yield_count(), 0);
    /// ```
    pub fn take_yields(&mut self) -> impl Iterator<Item = (Tag, Payload)> + '_ {
        self.yields.drain(..).map(|y| (y.tag, y.command))
    }

    /// The yields, for the async-fn adapter's call futures.
    pub(crate) fn yields_mut(&mut self) -> &mut Yields {
        &mut self.yields
    }

    /// The tags of calls dropped in this step before their completion came, for the process
    /// future to abort their handler tasks (left empty, with its buffer).
    #[inline]
    pub(crate) fn dropped_calls(&mut self) -> &mut Vec<Tag> {
        &mut self.dropped_calls
    }

    /// Hands each yield, in order, to `dispatch` where it lies ([`YieldSlot`]), leaving the
    /// buffer empty with its capacity. If `dispatch` unwinds, the yields not yet handed out are
    /// dropped (the one it had owns itself: its slot drops it).
    #[inline]
    pub(crate) fn dispatch_in_place(&mut self, mut dispatch: impl FnMut(YieldSlot<'_>)) {
        /// The yields not yet handed out: `next..end` of the buffer.
        struct Rest {
            next: *mut Yield,
            end: *mut Yield,
        }
        impl Drop for Rest {
            #[inline]
            fn drop(&mut self) {
                // Only in an unwind: the loop below hands out every yield. Each destructor's
                // panic is contained: a second panic during this unwind would abort.
                while self.next < self.end {
                    let yielded = self.next;
                    // SAFETY: `yielded` is before `end`, so one past it is in bounds.
                    self.next = unsafe { yielded.add(1) };
                    // SAFETY: `yielded` was in `next..end`: initialized and not handed out.
                    // `next` is already past it, so the value is read out exactly once.
                    drop_contained(unsafe { std::ptr::read(yielded) });
                }
            }
        }
        let len = self.yields.len();
        // SAFETY: the elements `0..len` stay initialized in the allocation, now owned by `rest`
        // (and each, once handed out, by its slot) instead of by the vector; `set_len(0)` to a
        // smaller length is always allowed, and the vector is not touched again until the loop
        // is over.
        unsafe { self.yields.set_len(0) };
        let base = self.yields.as_mut_ptr();
        let mut rest = Rest {
            next: base,
            // SAFETY: `len` elements fit in the allocation: one past the end is in bounds.
            end: unsafe { base.add(len) },
        };
        while rest.next < rest.end {
            let yielded = rest.next;
            // SAFETY: `yielded` is before `end`, so one past it is in bounds.
            rest.next = unsafe { yielded.add(1) };
            // SAFETY: `yielded` is in bounds and initialized (it was `..len`), and `rest` no
            // longer covers it: from here the slot is its only owner.
            let slot = unsafe { YieldSlot::new(&mut *yielded) };
            dispatch(slot);
        }
    }

    /// Gives the yields' buffer back to this thread at the end of a poll, if it has one and it
    /// is empty (see [`StepOutput`]'s docs: the process keeps no buffer while it waits).
    #[inline]
    pub(crate) fn return_yield_buffer(&mut self) {
        if self.yields.capacity() > 0 && self.yields.is_empty() {
            let buffer = std::mem::take(&mut self.yields);
            let _ = YIELD_BUFFER.try_with(|spare| spare.set(buffer));
        }
    }

    /// Appends a yield, borrowing this thread's spare buffer for the first one.
    #[inline(always)]
    fn push_yield(&mut self, yielded: Yield) {
        push_yield(&mut self.yields, yielded);
    }
}

/// Appends a yield to a step's yields, borrowing this thread's spare buffer for the first one
/// (the async-fn adapter's calls push through here too: a `Vec::push` of their own would
/// allocate a buffer per poll, and the poll's end would free the thread's spare for it).
///
/// Always inlined, so the caller builds the yield straight into the buffer: a yield built on the
/// caller's stack (in 8-byte stores) and copied in by an outlined call (in 16-byte loads) stalls
/// on store forwarding every time (`YieldSlot`'s docs).
#[inline(always)]
pub(crate) fn push_yield(yields: &mut Yields, yielded: Yield) {
    if yields.capacity() == 0 {
        borrow_spare_buffer(yields);
    }
    yields.push(yielded);
}

/// The first yield of a poll: this thread's spare buffer (or a new one).
#[cold]
#[inline(never)]
fn borrow_spare_buffer(yields: &mut Yields) {
    *yields = YIELD_BUFFER.try_with(Cell::take).unwrap_or_default();
}
