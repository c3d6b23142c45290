//! The per-thread buffer a message body or a reply is encoded into before it is copied into
//! its frame (`outbound.rs`): once it has grown, encoding allocates nothing, where encoding
//! into a fresh `Vec` reallocates (and copies) every time it doubles.

use std::cell::RefCell;

/// A buffer that grew past this is not kept (one huge message must not pin its size on
/// every thread that ever sent one).
const KEEP: usize = 256 << 10;

thread_local! {
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with an empty buffer: this thread's, or a fresh one if `f` is re-entered (a
/// message whose `Serialize` sends a message).
pub(crate) fn with<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut buffer) => {
            buffer.clear();
            let result = f(&mut buffer);
            if buffer.capacity() > KEEP {
                *buffer = Vec::new();
            }
            result
        }
        Err(_) => f(&mut Vec::new()),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_nested_use_gets_its_own_buffer() {
        super::with(|outer| {
            outer.push(1);
            super::with(|inner| {
                assert!(inner.is_empty());
                inner.push(2);
            });
            assert_eq!(outer, &[1]);
        });
        super::with(|again| assert!(again.is_empty()));
    }
}
