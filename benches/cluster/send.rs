//! `send/<size>` (criterion): publish / send throughput.

use crate::processes::Echo;
use crate::setup::{payload, size_name, traffic, Bench};
use crate::{sends, GUARD, PROCSCHED, PROCSCHED_SHARED, RAW, SIZES};
use bytes::Bytes;
use criterion::Criterion;
use futures::StreamExt;
use std::time::{Duration, Instant};

/// The raw counter's answer: how many it counted.
pub(crate) type Done = tokio::sync::oneshot::Sender<u64>;

/// Per size: (bytes, frames, items) node `a` published during the procsched send runs.
pub(crate) type SendWire = Vec<(usize, (u64, u64, u64))>;

pub(crate) fn send(c: &mut Criterion, bench: &Bench) -> SendWire {
    let counter = bench.echo_on_b();
    let mut wire = Vec::new();
    for size in SIZES {
        let n = sends(size);
        let bytes = Bytes::from(payload(size));
        let mut group = c.benchmark_group(format!("send/{}", size_name(size)));
        group
            .sample_size(10)
            .measurement_time(Duration::from_secs(3))
            .throughput(criterion::Throughput::Elements(n));
        // One long-lived counting subscriber (subscribing per iteration would race the SUB:
        // async-nats's `flush` writes out the buffer but is no round trip).
        let (expect, mut expected) = tokio::sync::mpsc::unbounded_channel::<(u64, Done)>();
        bench.rt.block_on(async {
            let mut subscriber = bench.raw_b.subscribe("raw.data").await.unwrap();
            // A round trip on the same connection: the server has the SUB once this answers.
            bench.raw_b.request("raw.echo", Bytes::new()).await.unwrap();
            tokio::spawn(async move {
                while let Some((n, done)) = expected.recv().await {
                    let mut count = 0;
                    while count < n {
                        match subscriber.next().await {
                            Some(_) => count += 1,
                            None => return,
                        }
                    }
                    let _ = done.send(count);
                }
            });
        });
        group.bench_function(RAW, |b| {
            b.iter_custom(|iterations| {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    total += bench.rt.block_on(async {
                        let (done, counted) = tokio::sync::oneshot::channel();
                        let start = Instant::now();
                        expect.send((n, done)).expect("counter alive");
                        for _ in 0..n {
                            bench
                                .raw_a
                                .publish("raw.data", bytes.clone())
                                .await
                                .expect("publish");
                        }
                        bench.raw_a.flush().await.expect("flush");
                        let count = tokio::time::timeout(GUARD, counted)
                            .await
                            .expect("hang guard: the raw subscriber lost messages")
                            .expect("counter");
                        assert_eq!(count, n);
                        start.elapsed()
                    });
                }
                total
            })
        });
        drop(expect);
        let before = bench.a.stats();
        // The payload as the application would hold it: a `Vec<u8>` (copied into the message,
        // and decoded into a new one) or `Bytes` (a `shared_bytes` field: no copy before the
        // encode, and decoded as a slice of its frame).
        let peers: [(&str, &dyn Fn() -> Echo); 2] = [
            (PROCSCHED, &|| Echo::Data(bytes.to_vec())),
            (PROCSCHED_SHARED, &|| Echo::Shared(bytes.clone())),
        ];
        for (name, message) in peers {
            group.bench_function(name, |b| {
                b.iter_custom(|iterations| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iterations {
                        total += bench.rt.block_on(async {
                            let start = Instant::now();
                            for _ in 0..n {
                                counter.send(message()).expect("send");
                            }
                            let count = counter.ask(Echo::Count).await.expect("count");
                            assert_eq!(count, n, "procsched lost messages");
                            start.elapsed()
                        });
                    }
                    total
                })
            });
        }
        wire.push((size, traffic(before, bench.a.stats())));
        group.finish();
    }
    wire
}
