//! Process identifiers.

use std::fmt;
use std::num::NonZeroU64;

/// Bits of a [`Pid`] that name its slot in the scheduler's process table: at most
/// `2^26 - 1` (about 67 million) processes are live at once.
pub(crate) const INDEX_BITS: u32 = 26;
/// Bits of a [`Pid`] that count the incarnations of its slot. A slot whose count reaches
/// [`MAX_GENERATION`] is retired instead of reused, so no two processes ever share a `Pid`.
pub(crate) const GENERATION_BITS: u32 = 64 - INDEX_BITS;
/// The last incarnation of a slot.
pub(crate) const MAX_GENERATION: u64 = (1 << GENERATION_BITS) - 1;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;

/// A process identifier: small, `Copy`, and unique for the lifetime of its scheduler.
///
/// A `Pid` names a slot of the scheduler's process table and the incarnation of that slot
/// (its *generation*, which starts at 1). Slots are reused, generations never: a slot is retired
/// after its last generation (2^38 incarnations), so a `Pid` is **never reused**, and a stale
/// `Pid` can only ever name a finished process (`send` then reports
/// [`SendErrorKind::NotFound`](crate::error::SendErrorKind::NotFound)), never a different one.
///
/// A `Pid` is unique *within its scheduler*: two schedulers in one program number their
/// processes alike, so a `Pid` of one handed to the other names whatever process that one has
/// in the same slot and generation (as an Erlang PID means nothing to another runtime). Keep a
/// scheduler's PIDs with that scheduler — an [`Addr`](crate::Addr) carries its scheduler and
/// cannot be misrouted; across machines, the cluster's `NodePid` names the node too.
///
/// # Examples
///
/// ```
/// use procsched::Pid;
///
/// let pid = Pid::from_raw(7 << 26 | 3).unwrap();
/// assert_eq!(pid.as_u64(), 7 << 26 | 3);
/// assert_eq!(pid.to_string(), "<3.7>"); // <slot.generation>
/// assert!(Pid::from_raw(0).is_none());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pid(NonZeroU64);

impl Pid {
    /// A `Pid` from its numeric value (`None` for 0). Useful for logs and wire formats; a `Pid`
    /// that was never assigned simply names no process. A made-up value may be a real one:
    /// `1 << 26` (slot 0, generation 1, `<0.1>`) is the first PID a scheduler hands out, so a
    /// test's "nobody" taken after a spawn should be one no scheduler reaches soon (a high
    /// generation: `999 << 26 | 1000`).
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::Pid::from_raw(0).is_none());
    /// assert_eq!(procsched::Pid::from_raw(42).unwrap().as_u64(), 42);
    /// ```
    pub fn from_raw(raw: u64) -> Option<Pid> {
        NonZeroU64::new(raw).map(Pid)
    }

    /// The numeric value.
    ///
    /// # Examples
    ///
    /// ```
    /// let pid = procsched::Pid::from_raw(1 << 26 | 5).unwrap();
    /// assert_eq!(procsched::Pid::from_raw(pid.as_u64()), Some(pid));
    /// ```
    pub fn as_u64(self) -> u64 {
        self.0.get()
    }

    /// The `Pid` of incarnation `generation` (1..=[`MAX_GENERATION`]) of table slot `index`.
    pub(crate) fn new(index: usize, generation: u64) -> Pid {
        debug_assert!((index as u64) <= INDEX_MASK);
        debug_assert!((1..=MAX_GENERATION).contains(&generation));
        Pid::from_raw(generation << INDEX_BITS | index as u64).expect("generation is at least 1")
    }

    /// The table slot.
    pub(crate) fn index(self) -> usize {
        (self.0.get() & INDEX_MASK) as usize
    }

    /// The incarnation of the slot.
    pub(crate) fn generation(self) -> u64 {
        self.0.get() >> INDEX_BITS
    }
}

impl fmt::Debug for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pid({}.{})", self.index(), self.generation())
    }
}

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{}.{}>", self.index(), self.generation())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_and_generation_round_trip() {
        let max_index = (1 << INDEX_BITS) - 1;
        for (index, generation) in [(0, 1), (5, 9), (max_index, MAX_GENERATION)] {
            let pid = Pid::new(index, generation);
            assert_eq!((pid.index(), pid.generation()), (index, generation));
            assert_eq!(Pid::from_raw(pid.as_u64()), Some(pid));
        }
    }
}
