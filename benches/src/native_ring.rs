//! The tokio-native ring of the typed-messages issue's harness, run by `benches/messages.rs`
//! (criterion's peer row) and by `examples/msgprobe.rs` (`ring_native`): one definition, so
//! the probe measures exactly the bench's peer.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// `members` tasks learn the ring's senders from a shared `OnceLock` and forward a `u64` token
/// until each has seen `laps` of them; timed from the first send until every task is joined.
///
/// # Examples
///
/// ```
/// let runtime = tokio::runtime::Builder::new_multi_thread()
///     .worker_threads(2)
///     .build()
///     .unwrap();
/// let elapsed = procsched_benches::native_ring::run(&runtime, 8, 3);
/// assert!(elapsed > std::time::Duration::ZERO);
/// ```
pub fn run(runtime: &tokio::runtime::Runtime, members: usize, laps: u64) -> Duration {
    let ring: Arc<OnceLock<Vec<mpsc::UnboundedSender<u64>>>> = Arc::new(OnceLock::new());
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..members)
        .map(|_| mpsc::unbounded_channel::<u64>())
        .unzip();
    let tasks: Vec<_> = receivers
        .into_iter()
        .enumerate()
        .map(|(me, mut rx)| {
            let ring = ring.clone();
            runtime.spawn(async move {
                let mut seen = 0;
                while seen < laps {
                    let token = rx.recv().await.expect("ring alive");
                    let ring = ring.get().expect("the ring is set");
                    let _ = ring[(me + 1) % ring.len()].send(token + 1);
                    seen += 1;
                }
                seen
            })
        })
        .collect();
    let first = senders[0].clone();
    ring.set(senders).expect("set once");
    let start = Instant::now();
    first.send(0).expect("first send");
    for task in tasks {
        assert_eq!(runtime.block_on(task).expect("member"), laps);
    }
    start.elapsed()
}
