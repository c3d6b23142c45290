//! Handlers registered per command type: the [`HandlerSet`], looked up by `TypeId` on every
//! yield.

use super::{Handler, TimerProbe};
use std::any::TypeId;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Up to this many handlers are found by a linear scan of their `TypeId`s (a few compares of
/// two words each, cheaper than hashing and probing); past it, through a hash index.
const LINEAR_LOOKUP_MAX: usize = 8;

/// The handlers of one scheduler, looked up by the command's `TypeId` on every yield.
#[derive(Default, Clone)]
pub(crate) struct HandlerSet {
    handlers: Vec<(TypeId, Handler)>,
    /// `TypeId` → position in `handlers`; built only past [`LINEAR_LOOKUP_MAX`] handlers.
    index: HashMap<TypeId, usize, BuildHasherDefault<TypeIdHasher>>,
    /// Whether the runtime these handlers run on has timers (for yields with a deadline). Kept
    /// here because a handler set and its runtime are built together and live together.
    timers: TimerProbe,
}

impl HandlerSet {
    /// Adds a handler; returns `false` if one is already registered for `C`.
    pub(crate) fn insert(&mut self, type_id: TypeId, handler: Handler) -> bool {
        if self.position(type_id).is_some() {
            return false;
        }
        self.handlers.push((type_id, handler));
        if self.handlers.len() > LINEAR_LOOKUP_MAX {
            if self.index.is_empty() {
                self.index = self
                    .handlers
                    .iter()
                    .enumerate()
                    .map(|(i, (t, _))| (*t, i))
                    .collect();
            } else {
                self.index.insert(type_id, self.handlers.len() - 1);
            }
        }
        true
    }

    #[inline]
    fn position(&self, type_id: TypeId) -> Option<usize> {
        if self.handlers.len() > LINEAR_LOOKUP_MAX {
            self.index.get(&type_id).copied()
        } else {
            self.handlers.iter().position(|(t, _)| *t == type_id)
        }
    }

    #[inline]
    pub(crate) fn get(&self, type_id: TypeId) -> Option<&Handler> {
        self.position(type_id).map(|i| &self.handlers[i].1)
    }

    /// Whether the handlers' runtime has timers (see [`TimerProbe`]).
    pub(crate) fn timers(&self) -> &TimerProbe {
        &self.timers
    }

    pub(crate) fn needs_runtime(&self) -> bool {
        self.handlers.iter().any(|(_, h)| h.needs_runtime())
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::process::stats::HandlerOutcome;
    use crate::process::{CommandError, Event, Events, Payload, PayloadSlot, Pid};

    /// One distinct command type per handler.
    struct Cmd<const N: usize>;

    fn set_of<const N: usize>(set: &mut HandlerSet) -> bool {
        set.insert(
            TypeId::of::<Cmd<N>>(),
            Handler::inline(|_: Cmd<N>| Ok(Payload::new(N))),
        )
    }

    fn run(set: &HandlerSet, command: Payload) -> Option<usize> {
        let Handler::Inline(run) = set.get(command.value_type_id())? else {
            panic!("inline handlers only");
        };
        let mut events = Events::default();
        let _ = PayloadSlot::lend(command, |command| {
            run(command, 7, Pid::from_raw(1).unwrap(), &mut events)
        });
        match events.pop() {
            Some(Event::YieldComplete { tag: 7, result }) => result.ok()?.downcast().ok(),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn lookup_finds_every_handler_below_and_above_the_linear_limit() {
        let mut set = HandlerSet::default();
        assert!(set_of::<0>(&mut set));
        assert!(set_of::<1>(&mut set));
        assert!(!set_of::<1>(&mut set), "a duplicate is refused");
        assert_eq!(run(&set, Payload::new(Cmd::<1>)), Some(1));
        assert_eq!(run(&set, Payload::new(Cmd::<9>)), None);
        // Past LINEAR_LOOKUP_MAX the hash index takes over; every handler stays reachable.
        for added in [
            set_of::<2>,
            set_of::<3>,
            set_of::<4>,
            set_of::<5>,
            set_of::<6>,
            set_of::<7>,
            set_of::<8>,
            set_of::<9>,
            set_of::<10>,
        ] {
            assert!(added(&mut set));
        }
        assert!(set.handlers.len() > LINEAR_LOOKUP_MAX);
        assert!(
            !set_of::<4>(&mut set),
            "a duplicate is refused past the limit too"
        );
        assert_eq!(run(&set, Payload::new(Cmd::<0>)), Some(0));
        assert_eq!(run(&set, Payload::new(Cmd::<9>)), Some(9));
        assert_eq!(run(&set, Payload::new(Cmd::<10>)), Some(10));
        assert_eq!(run(&set, Payload::new(Cmd::<11>)), None);
    }

    #[test]
    fn an_inline_handler_panic_completes_the_yield_with_panicked() {
        let mut set = HandlerSet::default();
        set.insert(
            TypeId::of::<Cmd<0>>(),
            Handler::inline(|_: Cmd<0>| -> Result<Payload, CommandError> { panic!("boom") }),
        );
        let Some(Handler::Inline(run)) = set.get(TypeId::of::<Cmd<0>>()) else {
            panic!("registered");
        };
        let mut events = Events::default();
        // (The panic message printed here is expected.)
        let outcome = PayloadSlot::lend(Payload::new(Cmd::<0>), |command| {
            run(command, 3, Pid::from_raw(1).unwrap(), &mut events)
        });
        assert_eq!(outcome, HandlerOutcome::Panicked);
        match events.pop() {
            Some(Event::YieldComplete {
                tag: 3,
                result: Err(CommandError::Panicked(message)),
            }) => assert!(message.contains("boom")),
            other => panic!("unexpected {other:?}"),
        }
    }
}
