//! Asks awaited in a body under a [`Harness`]: scripted yields, like calls; and the scripted
//! completions of both ([`Harness::complete`]), checked against what the steps yielded.
//!
//! On a scheduler, an ask from a body sends its request and the reply port answers into the
//! asking process's mailbox (`scheduler/ask.rs`). A harness has no mailbox and sends nothing
//! on the process's behalf: the ask's first poll records its request instead (below), the
//! step reports it ([`Step::asks`](super::Step::asks)) and the
//! process waits (`Status::Wait`) until the test answers — through the port inside the request
//! (as the asked process would: `Reply::send`, or dropping it), or with
//! [`Harness::reply`], [`Harness::time_out`] or [`Harness::complete`]. What the port answered
//! is read at the start of the next step, as the completion of the ask's call.
//!
//! For the duration of a step the harness opens an outbox on its thread ([`Published`]), where
//! the ask, polled inside that step, files its request (`process/async_fn/unhosted.rs`: the
//! ask's layer, which this one reads, never the other way); the step's asks go into the
//! harness's book when it returns. Nothing here is on a scheduler's path: only an ask from a
//! body without a mailbox reaches it.

use super::Harness;
use crate::process::async_fn::unhosted::{Outbox, UnhostedCall};
use crate::process::context::HostId;
use crate::process::{CommandError, Event, Payload, Pid, Process, Tag};
use std::any::TypeId;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::Duration;

/// An ask the body sent in a step under a [`Harness`]: its request, as the asked process would
/// have received it, and the tag its answer is scripted with.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::state_machine::Status;
/// use procsched::testing::Harness;
///
/// let target = Pid::from_raw(1 << 26 | 7).unwrap();
/// let mut harness = Harness::for_fn(move |cx: ProcessCx| async move {
///     let price = cx.scheduler().addr::<(&'static str, Reply<u32>)>(target);
///     Ok::<_, BoxError>(price.ask(|reply| ("sku-1", reply)).await?)
/// });
/// harness.init("run", Payload::empty())?;
/// let mut step = harness.step()?;
/// assert!(matches!(step.status, Status::Wait));
/// let asked = step.asks.pop().expect("one ask");
/// assert_eq!(asked.to, target);
/// assert_eq!(asked.timeout, None);
/// // Answer through the port, as the asked process would.
/// let (sku, reply) = asked.request.take::<(&'static str, Reply<u32>)>()?;
/// assert_eq!(sku, "sku-1");
/// let _ = reply.send(12);
/// assert!(matches!(harness.step()?.status, Status::Done(12)));
/// # Ok::<(), BoxError>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct Asked {
    /// The ask's tag: what [`Harness::reply`], [`Harness::time_out`] and
    /// [`Harness::complete`] answer it by.
    pub tag: Tag,
    /// The process asked (the address's PID). Nothing was sent to it.
    pub to: Pid,
    /// The request (the address's message type), holding the ask's [`Reply`](crate::Reply)
    /// port: answering that port answers the ask, and dropping it unanswered fails the ask
    /// with `NoReply`, read at the next step — unless a script ([`Harness::reply`],
    /// [`Harness::time_out`], [`Harness::complete`]) answers it first.
    pub request: Payload,
    /// The ask's timeout, for an `ask_within`: it does not run on the clock under a harness
    /// (script it with [`Harness::time_out`]).
    pub timeout: Option<Duration>,
}

/// A script a [`Harness`] refused: the ask it names is not waiting, or not for that.
///
/// # Examples
///
/// ```
/// use procsched::testing::{Harness, ScriptError};
///
/// let mut harness = Harness::for_fn(|_: procsched::ProcessCx| async { Ok::<_, procsched::BoxError>(()) });
/// assert_eq!(harness.reply(7, 1u8).unwrap_err(), ScriptError::NotAsked(7));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScriptError {
    /// No ask with this tag waits for a scripted answer: none was sent, or it was answered
    /// already (by its port's answer, or by an earlier script). A port dropped unanswered —
    /// with the [`Step`](super::Step) that held it, say — does not count as an answer here:
    /// the ask is `NoReply` at the next step only if no script answers it first.
    #[error("no ask with tag {0} waits for an answer")]
    NotAsked(Tag),
    /// The answer is not of the type the ask (or the call: its command's `Output`, for a
    /// body's `cx.call`) waits for.
    #[error("the ask or call with tag {tag} waits for a `{expected}`, not a `{actual}`")]
    WrongType {
        /// The ask's (or call's) tag.
        tag: Tag,
        /// The type the ask's port answers (the call's command's `Output`).
        expected: &'static str,
        /// The type scripted.
        actual: &'static str,
    },
    /// [`Harness::complete`] of a tag no yield waits on: no step yielded it, or it was
    /// completed already (by an earlier script, or — an ask's — through its port).
    #[error("no yield with tag {0} waits for a completion")]
    NotYielded(Tag),
    /// [`Harness::time_out`] on an ask with no timeout (`ask`, not `ask_within`): on a
    /// scheduler it would never time out.
    #[error("ask {0} has no timeout (it was not made with `ask_within`)")]
    NoTimeout(Tag),
}

/// An ask waiting for its answer.
struct Pending {
    tag: Tag,
    reply_type: TypeId,
    reply_type_name: &'static str,
    timed: bool,
    /// What the port answered, if it has: `Ok` the answer, `Err` its drop unanswered.
    answered: Box<dyn FnMut() -> Option<Result<Payload, CommandError>> + Send + Sync>,
    /// The port's answer, read by a script that found it answered already: the next step's.
    port_answer: Option<Result<Payload, CommandError>>,
}

impl Pending {
    /// The port's answer, if it has answered (kept until taken).
    fn port_answer(&mut self) -> Option<&Result<Payload, CommandError>> {
        if self.port_answer.is_none() {
            self.port_answer = (self.answered)();
        }
        self.port_answer.as_ref()
    }
}

/// The type a call's completion must hold, and its name.
type OutputType = (TypeId, &'static str);

/// A harness's asks: those sent in the current step, and those waiting for an answer; and the
/// tags of the calls its steps yielded that no script has completed yet.
///
/// Keyed by tag (a body's tags grow, so the order is the asks' and calls' own): a test
/// completing each of `n` calls or asks costs `O(log n)` per script, not a scan.
#[derive(Default)]
pub(super) struct AskBook {
    sent: Vec<Asked>,
    pending: BTreeMap<Tag, Pending>,
    /// Each yielded call not completed yet, with the type its completion must hold, when known
    /// (a body's `cx.call`: its command's `Output`; a state machine's yield: not known), and how
    /// many yields with that tag wait: a state machine may yield one tag twice, and a scheduler
    /// completes each (`Tag`'s docs), so a script may too.
    calls: BTreeMap<Tag, (Option<OutputType>, u32)>,
    /// The output types of the calls the last step's body made, until their yields are filed.
    call_types: HashMap<Tag, (TypeId, &'static str)>,
}

impl fmt::Debug for AskBook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let waiting: Vec<Tag> = self.pending.keys().copied().collect();
        f.debug_struct("AskBook")
            .field("waiting", &waiting)
            .finish()
    }
}

impl AskBook {
    /// Queues, as call completions, the answers the ports of waiting asks gave since the last
    /// step (those asks wait no more).
    pub(super) fn collect_answers(&mut self, events: &mut crate::process::Events) {
        self.pending.retain(|_, pending| {
            match pending.port_answer.take().or_else(|| (pending.answered)()) {
                Some(result) => {
                    events.push(Event::YieldComplete {
                        tag: pending.tag,
                        result,
                    });
                    false
                }
                None => true,
            }
        });
    }

    /// A step yielded `tags`: each waits for its completion.
    pub(super) fn yielded(&mut self, tags: impl Iterator<Item = Tag>) {
        for tag in tags {
            let output = self.call_types.remove(&tag);
            let (known, waiting) = self.calls.entry(tag).or_insert((output, 0));
            *known = known.or(output);
            *waiting += 1;
        }
        self.call_types.clear();
    }

    /// The asks sent since the last call.
    pub(super) fn take_sent(&mut self) -> Vec<Asked> {
        std::mem::take(&mut self.sent)
    }

    /// Ask `tag` is answered by a script: it waits no more (a later answer through its port
    /// is handed back to the answerer, as for an ask that gave up). `payload`, if any, must be
    /// of the type it waits for. An ask its port has answered already waits no more for a
    /// script (`NotAsked`): the port's answer is the one the next step delivers, as on a
    /// scheduler the first answer is.
    fn script(&mut self, tag: Tag, payload: Option<&Payload>) -> Result<Pending, ScriptError> {
        let pending = self
            .pending
            .get_mut(&tag)
            .ok_or(ScriptError::NotAsked(tag))?;
        // A port dropped unanswered is overruled by a script: the drop is most often the
        // test's `Step` going out of scope with the request (`harness.step()?.asks[0].tag`),
        // not an answer the test meant.
        if pending.port_answer().is_some_and(Result::is_ok) {
            return Err(ScriptError::NotAsked(tag));
        }
        if let Some(payload) = payload {
            if payload.value_type_id() != pending.reply_type {
                return Err(ScriptError::WrongType {
                    tag,
                    expected: pending.reply_type_name,
                    actual: payload.type_name(),
                });
            }
        }
        Ok(self.pending.remove(&tag).expect("found above"))
    }

    /// Completes the yielded call `tag` with `payload` (`None`: an error), which must be of the
    /// type it waits for, if known.
    fn complete_call(&mut self, tag: Tag, payload: Option<&Payload>) -> Result<(), ScriptError> {
        let (expected, _) = *self.calls.get(&tag).ok_or(ScriptError::NotYielded(tag))?;
        if let (Some((output, name)), Some(payload)) = (expected, payload) {
            if payload.value_type_id() != output {
                return Err(ScriptError::WrongType {
                    tag,
                    expected: name,
                    actual: payload.type_name(),
                });
            }
        }
        if let Some((_, waiting)) = self.calls.get_mut(&tag) {
            *waiting -= 1;
            if *waiting == 0 {
                self.calls.remove(&tag);
            }
        }
        Ok(())
    }
}

/// A harness's book, opened for one step of its process: the asks its body sends in the step
/// are filed in an outbox on this thread (`process/async_fn/unhosted.rs`), and moved into the
/// book when the step returns (dropped with the outbox if it unwinds: the process has ended).
pub(super) struct Published<'a> {
    book: &'a mut AskBook,
    outbox: Option<Outbox>,
}

impl<'a> Published<'a> {
    /// Opens the outbox of the harness `host`, whose book is `book`.
    pub(super) fn new(host: HostId, book: &'a mut AskBook) -> Published<'a> {
        Published {
            book,
            outbox: Some(Outbox::open(host)),
        }
    }
}

impl Drop for Published<'_> {
    fn drop(&mut self) {
        let Some(outbox) = self.outbox.take() else {
            return;
        };
        if std::thread::panicking() {
            return;
        }
        let filed = outbox.close();
        for UnhostedCall {
            tag,
            output_type,
            output_type_name,
        } in filed.calls
        {
            self.book
                .call_types
                .insert(tag, (output_type, output_type_name));
        }
        for ask in filed.asks {
            self.book.pending.insert(
                ask.tag,
                Pending {
                    tag: ask.tag,
                    reply_type: ask.reply_type,
                    reply_type_name: ask.reply_type_name,
                    timed: ask.timeout.is_some(),
                    answered: ask.answered,
                    port_answer: None,
                },
            );
            self.book.sent.push(Asked {
                tag: ask.tag,
                to: ask.to,
                request: ask.request,
                timeout: ask.timeout,
            });
        }
    }
}

impl<P: Process> Harness<P> {
    /// Queues `value` as the answer to the ask `tag` ([`Step::asks`](super::Step::asks)) for
    /// the next step, as if the asked process had sent it on the request's port (that port's
    /// own answer, if it comes later, is handed back to its sender: the ask waits no more).
    ///
    /// # Errors
    ///
    /// [`ScriptError::NotAsked`] if no ask `tag` waits; [`ScriptError::WrongType`] if it waits
    /// for another type. Nothing is queued. An ask the body has dropped (it lost a `select!`,
    /// say) still waits here — the harness does not see the drop — and an answer scripted for
    /// it is `Ok` and discarded, as a late answer on a scheduler is.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::state_machine::Status;
    /// use procsched::testing::{Harness, ScriptError};
    ///
    /// // Under test: asks the address it receives to double 21.
    /// let mut harness = Harness::for_fn(|cx: ProcessCx<Addr<(u64, Reply<u64>)>>| async move {
    ///     let doubler = cx.recv().await?;
    ///     Ok::<_, BoxError>(doubler.ask(|reply| (21, reply)).await? + 1)
    /// });
    /// harness.init("run", Payload::empty())?;
    /// let sched = harness.scheduler().ok_or("built by init")?;
    /// let doubler = sched.addr::<(u64, Reply<u64>)>(Pid::from_raw(1 << 26 | 3).ok_or("a pid")?);
    /// harness.send(Message::new("doubler", Payload::new(doubler)));
    /// let step = harness.step()?;
    /// assert!(matches!(step.status, Status::Wait));
    /// let asked = &step.asks[0];
    /// assert_eq!(asked.request.downcast_ref::<(u64, Reply<u64>)>().map(|r| r.0), Some(21));
    ///
    /// assert!(matches!(harness.reply(asked.tag, "42"), Err(ScriptError::WrongType { .. })));
    /// harness.reply(asked.tag, 42u64)?;
    /// assert!(matches!(harness.step()?.status, Status::Done(43)));
    /// # Ok::<(), BoxError>(())
    /// ```
    pub fn reply<R: Send + 'static>(
        &mut self,
        tag: Tag,
        value: R,
    ) -> Result<&mut Self, ScriptError> {
        let answer = Payload::new(value);
        self.asks.script(tag, Some(&answer))?;
        Ok(self.push(Event::YieldComplete {
            tag,
            result: Ok(answer),
        }))
    }

    /// Queues the completion of the yield `tag` for the next step. For an ask
    /// ([`Step::asks`](super::Step::asks)), `Ok` is its answer, `Err(CommandError::TimedOut)`
    /// its timeout (refused, [`ScriptError::NoTimeout`], for an ask made without one, as by
    /// [`time_out`](Self::time_out)), any other `Err` its port dropped (`NoReply`).
    ///
    /// A refused completion is not queued, and the next step is an error saying why (a
    /// [`ScriptError`]; the process is not stepped): an ask's answer of another type, or a
    /// body's call completed `Ok` with another type than its command's `Output`
    /// ([`ScriptError::WrongType`]: a state machine's yields are not checked, their step reads
    /// the payload), or a tag no yield waits on ([`ScriptError::NotYielded`]:
    /// no step yielded it, or it was completed already). A call the body has dropped (it lost a
    /// `select!`, say) still waits here, and its completion is accepted and discarded, as a
    /// late one on a scheduler is.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::error::CommandError;
    /// use procsched::state_machine::Status;
    /// use procsched::testing::Harness;
    ///
    /// struct Fetch(&'static str);
    /// procsched::command!(Fetch => String);
    ///
    /// let mut harness = Harness::for_fn(|cx: ProcessCx| async move {
    ///     let page = cx.call(Fetch("/index")).await.unwrap_or_else(|_| "offline".to_string());
    ///     Ok::<_, BoxError>(page)
    /// });
    /// harness.init("run", Payload::empty())?;
    /// let tag = harness.step()?.yields[0].0;
    /// // The failure a real handler gives only when the network is down, scripted.
    /// harness.complete(tag, Err(CommandError::failed("connection refused")));
    /// assert!(matches!(harness.step()?.status, Status::Done(page) if page == "offline"));
    /// # Ok::<(), BoxError>(())
    /// ```
    pub fn complete(&mut self, tag: Tag, result: Result<Payload, CommandError>) -> &mut Self {
        if let Some(refused) = self.script_completion(tag, &result) {
            // The first refusal is the one the next step reports: a later one is likely its
            // consequence.
            self.misscripted.get_or_insert(refused);
            return self;
        }
        self.push(Event::YieldComplete { tag, result })
    }

    /// Queues the timeout of the ask `tag` (made with `ask_within`) for the next step: the body
    /// gets [`AskError::TimedOut`](crate::error::AskError::TimedOut). Under a harness an ask's
    /// timeout does not run on the clock — the test decides when it passes — so a test never
    /// waits for one, and never races it. The same holds for a call's timeout
    /// (`cx.call_within`), which is a yield, not an ask: script it by completing the call with
    /// `Err(CommandError::TimedOut)` ([`complete`](Self::complete)); `time_out` of its tag is
    /// `NotAsked`.
    ///
    /// # Errors
    ///
    /// [`ScriptError::NotAsked`] if no ask `tag` waits; [`ScriptError::NoTimeout`] if it was
    /// made with `ask` (it would never time out). Nothing is queued.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::state_machine::Status;
    /// use procsched::testing::Harness;
    /// use std::time::Duration;
    ///
    /// let mut harness = Harness::for_fn(|cx: ProcessCx<Addr<Reply<u8>>>| async move {
    ///     let slow = cx.recv().await?;
    ///     match slow.ask_within(Duration::from_secs(5), |reply| reply).await {
    ///         Err(error) if error.is_timed_out() => Ok::<_, BoxError>(0),
    ///         other => Ok(other?),
    ///     }
    /// });
    /// harness.init("run", Payload::empty())?;
    /// let sched = harness.scheduler().ok_or("built by init")?;
    /// let slow = sched.addr::<Reply<u8>>(Pid::from_raw(1 << 26 | 3).ok_or("a pid")?);
    /// harness.send(Message::new("slow", Payload::new(slow)));
    /// let step = harness.step()?;
    /// assert_eq!(step.asks[0].timeout, Some(Duration::from_secs(5)));
    /// harness.time_out(step.asks[0].tag)?;
    /// assert!(matches!(harness.step()?.status, Status::Done(0)));
    /// # Ok::<(), BoxError>(())
    /// ```
    pub fn time_out(&mut self, tag: Tag) -> Result<&mut Self, ScriptError> {
        match self.asks.pending.get(&tag) {
            Some(pending) if !pending.timed => return Err(ScriptError::NoTimeout(tag)),
            _ => {}
        }
        self.asks.script(tag, None)?;
        Ok(self.push(Event::YieldComplete {
            tag,
            result: Err(CommandError::TimedOut),
        }))
    }

    /// [`complete`](Self::complete)'s check: a completion for a waiting ask answers it (`Ok`:
    /// its answer, which must be of its type; `Err`: the port dropped, `NoReply`); one for a
    /// yielded call completes it. `Some` refused: a wrongly typed answer, or a tag nothing
    /// waits on.
    fn script_completion(
        &mut self,
        tag: Tag,
        result: &Result<Payload, CommandError>,
    ) -> Option<ScriptError> {
        // An ask made with `ask` never times out, as `time_out` says: not by `complete` either.
        if matches!(result, Err(CommandError::TimedOut))
            && self
                .asks
                .pending
                .get(&tag)
                .is_some_and(|pending| !pending.timed)
        {
            return Some(ScriptError::NoTimeout(tag));
        }
        match self.asks.script(tag, result.as_ref().ok()) {
            Ok(_) => None,
            Err(ScriptError::NotAsked(_)) => {
                self.asks.complete_call(tag, result.as_ref().ok()).err()
            }
            Err(refused) => Some(refused),
        }
    }
}
