//! One command per handler kind (inline, async, async with yields, blocking), their handlers
//! (each counting its invocations) and a helper that yields the command of a given kind: shared
//! by the tests of mixed yields and the randomized stress.

use super::{self as support, count};
use procsched::{
    error::CommandError,
    state_machine::{StepOutput, Tag},
    Payload,
};
use std::sync::atomic::Ordering::SeqCst;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Inline,
    Async,
    AsyncYielding,
    Blocking,
}

pub(crate) const KINDS: [Kind; 4] = [
    Kind::Inline,
    Kind::Async,
    Kind::AsyncYielding,
    Kind::Blocking,
];

pub(crate) struct InlineCmd(pub(crate) Tag);
procsched::command!(InlineCmd => Payload);
pub(crate) struct AsyncCmd(pub(crate) Tag);
procsched::command!(AsyncCmd => Payload);
pub(crate) struct AsyncYieldingCmd(pub(crate) Tag);
procsched::command!(AsyncYieldingCmd => Payload);
pub(crate) struct BlockingCmd(pub(crate) Tag);
procsched::command!(BlockingCmd => Payload);

/// Handler invocations per kind.
#[derive(Clone, Default)]
pub(crate) struct KindCounts([support::Counter; 4]);

impl KindCounts {
    pub(crate) fn get(&self, kind: Kind) -> usize {
        count(&self.0[kind as usize])
    }
}

pub(crate) fn reply(tag: Tag) -> Payload {
    Payload::new(tag.wrapping_mul(3) + 1)
}

/// Registers one handler per `Kind`, each replying `reply(tag)` and counting its invocations.
pub(crate) fn kind_handlers(
    builder: &mut procsched::config::SchedulerBuilder,
    counts: &KindCounts,
) {
    let c = counts.clone();
    builder.inline_handler(move |InlineCmd(tag): InlineCmd| {
        c.0[Kind::Inline as usize].fetch_add(1, SeqCst);
        Ok::<_, procsched::error::CommandError>(reply(tag))
    });
    let c = counts.clone();
    builder.async_handler(move |AsyncCmd(tag): AsyncCmd| {
        c.0[Kind::Async as usize].fetch_add(1, SeqCst);
        async move { Ok::<_, procsched::error::CommandError>(reply(tag)) }
    });
    let c = counts.clone();
    builder.async_handler(move |AsyncYieldingCmd(tag): AsyncYieldingCmd| {
        c.0[Kind::AsyncYielding as usize].fetch_add(1, SeqCst);
        async move {
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
            Ok::<_, CommandError>(reply(tag))
        }
    });
    let c = counts.clone();
    builder.blocking_handler(move |BlockingCmd(tag): BlockingCmd| {
        c.0[Kind::Blocking as usize].fetch_add(1, SeqCst);
        Ok::<_, CommandError>(reply(tag))
    });
}

pub(crate) fn yield_kind(out: &mut StepOutput, tag: Tag, kind: Kind) {
    match kind {
        Kind::Inline => out.yield_command(tag, InlineCmd(tag)),
        Kind::Async => out.yield_command(tag, AsyncCmd(tag)),
        Kind::AsyncYielding => out.yield_command(tag, AsyncYieldingCmd(tag)),
        Kind::Blocking => out.yield_command(tag, BlockingCmd(tag)),
    }
}
