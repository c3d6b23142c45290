//! Process identifiers.

use std::fmt;
use std::num::NonZeroU64;

/// A process identifier: small, `Copy`, and unique for the lifetime of its scheduler.
///
/// PIDs are assigned from a counter when a process is spawned and are **never reused**, so a
/// stale `Pid` can only ever name a finished process (`send` then reports
/// [`SendError::NotFound`](crate::SendError::NotFound)), never a different one.
///
/// # Examples
///
/// ```
/// use procsched::Pid;
///
/// let pid = Pid::from_raw(7).unwrap();
/// assert_eq!(pid.as_u64(), 7);
/// assert_eq!(pid.to_string(), "<7>");
/// assert!(Pid::from_raw(0).is_none());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pid(NonZeroU64);

impl Pid {
    /// A `Pid` from its numeric value (`None` for 0). Useful for logs and wire formats; a `Pid`
    /// that was never assigned simply names no process.
    pub fn from_raw(raw: u64) -> Option<Pid> {
        NonZeroU64::new(raw).map(Pid)
    }

    /// The numeric value.
    pub fn as_u64(self) -> u64 {
        self.0.get()
    }
}

impl fmt::Debug for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pid({})", self.0)
    }
}

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{}>", self.0)
    }
}
