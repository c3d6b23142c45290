//! The futures an `async fn` process awaits, made by its [`ProcessCx`](crate::ProcessCx) (and
//! [`Ask`] and [`SendWait`], made by an [`Addr`](crate::Addr)). You rarely name them: `.await` them.
//!
//! | future | made by | resolves to |
//! |---|---|---|
//! | [`Call`] | `cx.call(command)` | the handler's reply: a *yield*, the process is `Blocked` meanwhile |
//! | [`Recv`] | `cx.recv()` | the next message, as the process's message type |
//! | [`RecvMessage`] | `cx.recv_message()` | the next message, whole (topic, sender, payload) |
//! | [`Cancelled`] | `cx.cancelled()` | when the process is asked to finish (shutdown) |
//! | [`YieldNow`] | `cx.yield_now()` | after other ready work had a turn |
//! | [`Run`] | `cx.run(future)` | a future run as a task on the handler runtime |
//! | [`Ask`] | `addr.ask(..)` | the answer of another process |
//! | [`SendWait`] | `addr.send_wait(..)` | once the message is in a bounded mailbox (waits for room; in a body, until its cancel) |
//!
//! Each remembers the process that made it and fails with a typed error (`OutsideProcess`)
//! if polled anywhere else.
//!
//! # Examples
//!
//! ```
//! use procsched::prelude::*;
//! use procsched::body::Recv;
//!
//! let sched = Scheduler::builder().workers(1).build()?;
//! let handle = sched.spawn_fn(|cx: ProcessCx<u64>| async move {
//!     let next: Recv<u64> = cx.recv();
//!     Ok::<_, BoxError>(next.await? + 1)
//! })?;
//! handle.addr().send(41)?;
//! assert_eq!(sched.block_on(handle)?, 42);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub use crate::dispatch::Run;
pub use crate::process::{
    Call, Cancelled, Recv, RecvAny, RecvDown, RecvExit, RecvMessage, RecvSignal, YieldNow,
};
pub use crate::scheduler::{Ask, SendWait};
