//! Latency samples of the restart rows, in histograms (criterion gives no percentiles).

use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

/// Latency samples in nanoseconds, by (row, peer).
pub(crate) type Samples = BTreeMap<(&'static str, &'static str), Histogram<u64>>;

pub(crate) static SAMPLES: LazyLock<Mutex<Samples>> = LazyLock::new(|| Mutex::new(BTreeMap::new()));

pub(crate) fn record(row: &'static str, peer: &'static str, samples: &[Duration]) {
    let mut all = SAMPLES.lock().unwrap();
    let histogram = all.entry((row, peer)).or_insert_with(|| {
        Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds")
    });
    for sample in samples {
        let ns = u64::try_from(sample.as_nanos()).unwrap_or(u64::MAX).max(1);
        histogram.saturating_record(ns);
    }
}

/// p50 and p99 of a row, in nanoseconds, and the number of samples.
pub(crate) fn percentiles(row: &'static str, peer: &'static str) -> Option<(f64, f64, u64)> {
    let all = SAMPLES.lock().unwrap();
    let histogram = all.get(&(row, peer)).filter(|h| !h.is_empty())?;
    Some((
        histogram.value_at_quantile(0.50) as f64,
        histogram.value_at_quantile(0.99) as f64,
        histogram.len(),
    ))
}
