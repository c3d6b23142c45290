//! The ask servers of the messages bench's `ask_*` groups, on procsched and on tokio-native:
//! each answers `(n, reply)` with `n + 1`. Used by `benches/messages.rs` (criterion) and by
//! `examples/msgprobe.rs` (`ask_between`, `ask_task`, `ask_native`): one definition, so the
//! probe's numbers measure the same servers as the bench's.

use procsched::prelude::*;
use tokio::sync::{mpsc, oneshot};

/// procsched's server: a process answering `(n, reply)` with `n + 1` until it is terminated
/// (or the scheduler shuts down). Stop it with `sched.terminate(addr.pid())`.
pub fn spawn_server(sched: &Scheduler) -> Addr<(u64, Reply<u64>)> {
    sched
        .spawn_fn(|cx: ProcessCx<(u64, Reply<u64>)>| async move {
            loop {
                let (n, reply) = cx.recv().await?;
                let _ = reply.send(n + 1);
            }
            #[allow(unreachable_code)]
            Ok::<(), BoxError>(())
        })
        .expect("spawn")
        .addr()
}

/// The tokio-native server: a task on `runtime` answering `(n, oneshot)` requests with
/// `n + 1`; it ends when every clone of the returned sender is dropped.
pub fn spawn_native_server(
    runtime: &tokio::runtime::Runtime,
) -> mpsc::UnboundedSender<(u64, oneshot::Sender<u64>)> {
    let (tx, mut rx) = mpsc::unbounded_channel::<(u64, oneshot::Sender<u64>)>();
    runtime.spawn(async move {
        while let Some((n, reply)) = rx.recv().await {
            let _ = reply.send(n + 1);
        }
    });
    tx
}
