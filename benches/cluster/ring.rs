//! `ring/<layout>` (criterion): a ring on one node vs over two.

use crate::processes::Ring;
use crate::setup::Bench;
use crate::{HOPS, RING};
use criterion::Criterion;
use procsched::cluster::Placement;
use std::time::{Duration, Instant};

pub(crate) fn ring(c: &mut Criterion, bench: &Bench) {
    let mut group = c.benchmark_group("ring");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(4));
    for (layout, nodes) in [("one_node", ["a", "a"]), ("two_nodes", ["a", "b"])] {
        let first = bench.rt.block_on(async {
            let mut members = Vec::new();
            for n in 0..RING {
                let on = Placement::Node(nodes[n % 2].into());
                members.push(bench.a.spawn_on(on, "ring-member", ()).await.unwrap());
            }
            for (n, member) in members.iter().enumerate() {
                let next = members[(n + 1) % RING].clone();
                bench
                    .a
                    .addr::<Ring>(member.clone())
                    .send_acked(Ring::Next(next))
                    .await
                    .unwrap();
            }
            bench.a.addr::<Ring>(members[0].clone())
        });
        group.bench_function(layout, |b| {
            b.iter_custom(|iterations| {
                bench.rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iterations {
                        first
                            .ask(|done| Ring::Start { hops: HOPS, done })
                            .await
                            .expect("a lap of the ring");
                    }
                    start.elapsed()
                })
            })
        });
    }
    group.finish();
}
