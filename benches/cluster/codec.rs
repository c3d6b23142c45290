//! `codec/<size>` (criterion): encode + decode of a message.

use crate::processes::Echo;
use crate::setup::{payload, size_name};
use crate::SIZES;
use criterion::Criterion;
use std::time::Duration;

/// Per size: the encoded `Echo::Data`'s length.
pub(crate) fn codec(c: &mut Criterion) -> Vec<(usize, usize)> {
    let mut lengths = Vec::new();
    for size in SIZES {
        let message = Echo::Data(payload(size));
        let encoded = rmp_serde::to_vec_named(&message).expect("encode");
        lengths.push((size, encoded.len()));
        let mut group = c.benchmark_group(format!("codec/{}", size_name(size)));
        group
            .sample_size(20)
            .measurement_time(Duration::from_secs(1));
        group.bench_function("encode_decode", |b| {
            b.iter(|| {
                let bytes = rmp_serde::to_vec_named(std::hint::black_box(&message)).unwrap();
                let back: Echo = rmp_serde::from_slice(&bytes).unwrap();
                std::hint::black_box(back)
            })
        });
        group.finish();
    }
    lengths
}
