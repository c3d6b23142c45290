//! Asks from a body that runs without a scheduler — only a test harness runs one: recorded in
//! an outbox, not sent; and the output type of each call such a body makes, so that the
//! harness can refuse a scripted completion of the wrong type (as it refuses an ask's).
//!
//! Why here, in the process layer: the ask (`scheduler/ask.rs`) is where the request is built,
//! and the harness (`testing/asks.rs`) is what reads it; neither may import the other upward.
//! The harness opens an outbox on its thread for the length of one step ([`Outbox::open`]), an
//! ask polled in that step files its request there ([`record`]), and the harness takes what
//! was filed when the step returns ([`Outbox::close`]). Nothing here is on a scheduler's path:
//! an ask reaches [`record`] only after finding no mailbox to answer into.

use crate::process::context::HostId;
use crate::process::{CommandError, Payload, Pid, Tag};
use std::any::TypeId;
use std::cell::RefCell;
use std::time::Duration;

/// An ask recorded instead of sent.
pub(crate) struct UnhostedAsk {
    /// The ask's call tag: its answer completes that call.
    pub(crate) tag: Tag,
    /// The process asked.
    pub(crate) to: Pid,
    /// The request, holding the ask's reply port.
    pub(crate) request: Payload,
    /// The ask's timeout (`ask_within`), which does not run on a clock here.
    pub(crate) timeout: Option<Duration>,
    /// The type the port answers.
    pub(crate) reply_type: TypeId,
    pub(crate) reply_type_name: &'static str,
    /// What the port answered, if it has: `Ok` the answer, `Err` its drop unanswered.
    pub(crate) answered: Box<dyn FnMut() -> Option<Result<Payload, CommandError>> + Send + Sync>,
}

/// The type a call made in a body without a scheduler completes with (its command's
/// `Output`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct UnhostedCall {
    /// The call's tag.
    pub(crate) tag: Tag,
    pub(crate) output_type: TypeId,
    pub(crate) output_type_name: &'static str,
}

/// What a body filed in one step: its asks and its calls' output types.
#[derive(Default)]
pub(crate) struct Filed {
    pub(crate) asks: Vec<UnhostedAsk>,
    pub(crate) calls: Vec<UnhostedCall>,
}

// Plain std `thread_local!`: a harness steps its process on the calling thread.
std::thread_local! {
    static OUTBOX: RefCell<Option<(HostId, Filed)>> = const { RefCell::new(None) };
}

/// The outbox of host `host`'s body, open on this thread until [`close`](Self::close)d (or
/// dropped, when a step unwinds: what it held is dropped).
#[must_use = "an outbox is open until closed"]
pub(crate) struct Outbox {
    /// The outbox set aside (`Some(None)`: none was open); `None` once restored.
    previous: Option<Option<(HostId, Filed)>>,
}

impl Outbox {
    /// Opens the outbox of host `host` on this thread (one of another host, open around it,
    /// is set aside until this one closes).
    pub(crate) fn open(host: HostId) -> Outbox {
        let previous = OUTBOX.with(|outbox| outbox.replace(Some((host, Filed::default()))));
        Outbox {
            previous: Some(previous),
        }
    }

    /// Closes the outbox: what was filed since it opened.
    pub(crate) fn close(mut self) -> Filed {
        self.restore()
    }

    fn restore(&mut self) -> Filed {
        let Some(previous) = self.previous.take() else {
            return Filed::default();
        };
        let mine = OUTBOX.with(|outbox| outbox.replace(previous));
        mine.map(|(_, filed)| filed).unwrap_or_default()
    }
}

impl Drop for Outbox {
    fn drop(&mut self) {
        drop(self.restore());
    }
}

/// Files `ask`, from a body of host `host`, in that host's open outbox; hands it back if none
/// is open on this thread.
#[allow(clippy::result_large_err)] // the ask comes back by value
pub(crate) fn record(host: HostId, ask: UnhostedAsk) -> Result<(), UnhostedAsk> {
    OUTBOX.with(|outbox| match &mut *outbox.borrow_mut() {
        Some((open, filed)) if *open == host => {
            filed.asks.push(ask);
            Ok(())
        }
        _ => Err(ask),
    })
}

/// Files the output type of `call`, made by a body of host `host` that runs without a
/// scheduler, in that host's open outbox (nothing if none is open: the completion is then
/// checked by the body only).
#[cold]
pub(crate) fn record_call(host: HostId, call: UnhostedCall) {
    OUTBOX.with(|outbox| {
        if let Some((open, filed)) = &mut *outbox.borrow_mut() {
            if *open == host {
                filed.calls.push(call);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(tag: Tag) -> UnhostedAsk {
        UnhostedAsk {
            tag,
            to: Pid::from_raw(1 << 26 | 1).unwrap(),
            request: Payload::new(tag),
            timeout: None,
            reply_type: TypeId::of::<u8>(),
            reply_type_name: "u8",
            answered: Box::new(|| None),
        }
    }

    #[test]
    fn an_ask_is_filed_only_in_its_own_hosts_open_outbox() {
        let (mine, other) = (HostId::next(), HostId::next());
        assert!(record(mine, ask(1)).is_err(), "none open");
        let outer = Outbox::open(other);
        let inner = Outbox::open(mine);
        assert!(record(mine, ask(2)).is_ok());
        assert!(
            record(other, ask(3)).is_err(),
            "set aside while the inner one is open"
        );
        let call = |tag| UnhostedCall {
            tag,
            output_type: TypeId::of::<u8>(),
            output_type_name: "u8",
        };
        record_call(mine, call(6));
        record_call(other, call(7));
        let filed = inner.close();
        assert_eq!(
            filed.asks.iter().map(|ask| ask.tag).collect::<Vec<_>>(),
            [2]
        );
        assert_eq!(
            filed.calls.iter().map(|call| call.tag).collect::<Vec<_>>(),
            [6]
        );
        assert!(record(other, ask(4)).is_ok(), "open again");
        assert_eq!(outer.close().asks.len(), 1);
        assert!(record(other, ask(5)).is_err(), "closed");
    }
}
