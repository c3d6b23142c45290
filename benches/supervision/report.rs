//! The report: restart latency percentiles and medians, per-process spawn/exit cost, ratios.

use crate::messages::Watch;
use crate::samples::{percentiles, SAMPLES};
use crate::{KAMEO, LEAVES, PROCSCHED, STORM};
use procsched_benches::{format_ns, format_ratio, median_ns, WORKERS};
use std::time::SystemTime;

pub(crate) fn us(ns: f64) -> String {
    format!("{:.1}", ns / 1e3)
}

/// The report: restart latency percentiles and medians, per-process spawn/exit cost, ratios.
pub(crate) fn report(started: SystemTime) -> Option<String> {
    let mut sections = Vec::new();
    let mut latency = format!(
        "Restart latency (crash message sent → replacement started), {} worker threads per \
         runtime; p50/p99 over every iteration's samples, median = criterion's median time per \
         iteration; ratio = procsched / kameo.\n\n\
         | row | procsched p50 µs | p99 µs | median | kameo p50 µs | p99 µs | median | ratio p50 | ratio p99 | ratio median |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        *WORKERS
    );
    let mut any = false;
    for row in ["restart_one", "restart_storm"] {
        let ours = percentiles(row, PROCSCHED);
        let theirs = percentiles(row, KAMEO);
        let ours_median = median_ns(row, PROCSCHED, started);
        let theirs_median = median_ns(row, KAMEO, started);
        if ours.is_none() && theirs.is_none() {
            continue;
        }
        any = true;
        let cell = |p: Option<(f64, f64, u64)>, at: usize| {
            p.map_or("—".to_owned(), |p| us([p.0, p.1][at]))
        };
        let ratio =
            |at: usize| format_ratio(ours.map(|p| [p.0, p.1][at]), theirs.map(|p| [p.0, p.1][at]));
        latency.push_str(&format!(
            "| {row} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            cell(ours, 0),
            cell(ours, 1),
            ours_median.map_or("—".to_owned(), format_ns),
            cell(theirs, 0),
            cell(theirs, 1),
            theirs_median.map_or("—".to_owned(), format_ns),
            ratio(0),
            ratio(1),
            format_ratio(ours_median, theirs_median),
        ));
    }
    if any {
        let counts: Vec<String> = SAMPLES
            .lock()
            .unwrap()
            .iter()
            .map(|((row, peer), h)| format!("{row}/{peer} {}", h.len()))
            .collect();
        latency.push_str(&format!(
            "\nSamples: {}. restart_storm's median is the time until all {STORM} are back.\n",
            counts.join(", ")
        ));
        sections.push(latency);
    }

    let unwatched = [PROCSCHED, KAMEO].map(|peer| median_ns("spawn_exit_unwatched", peer, started));
    let mut cost = format!(
        "Spawn and exit of one child ({LEAVES} per iteration), median per child; the watch's \
         cost is the row minus `spawn_exit_unwatched`.\n\n\
         | row | procsched | kameo | ratio | procsched watch cost | kameo watch cost |\n\
         |---|---:|---:|---:|---:|---:|\n"
    );
    let mut any = false;
    for watch in Watch::ALL {
        let group = watch.group();
        let [ours, theirs] = [PROCSCHED, KAMEO]
            .map(|peer| median_ns(group, peer, started).map(|ns| ns / LEAVES as f64));
        if ours.is_none() && theirs.is_none() {
            continue;
        }
        any = true;
        let extra = |row: Option<f64>, base: Option<f64>| match (row, base) {
            (Some(row), Some(base)) if !matches!(watch, Watch::Unwatched) => {
                let base = base / LEAVES as f64;
                format!("{:+.0} ns", row - base)
            }
            _ => "—".to_owned(),
        };
        cost.push_str(&format!(
            "| {group} | {} | {} | {} | {} | {} |\n",
            ours.map_or("—".to_owned(), format_ns),
            theirs.map_or("—".to_owned(), format_ns),
            format_ratio(ours, theirs),
            extra(ours, unwatched[0]),
            extra(theirs, unwatched[1]),
        ));
    }
    if any {
        sections.push(cost);
    }
    (!sections.is_empty()).then(|| sections.join("\n"))
}
