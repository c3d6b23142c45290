//! The report: the comparison table, the memory, latency and growth tables, and the chart.
//!
//! Every table has procsched first and its peers after it, in [`PEERS`] order; "best peer" is,
//! per workload, the faster of the two tokio peers, and the chart and the claims are against it.

use std::fmt::Write as _;
use std::path::Path;

use procsched_benches::{self as common, format_ns, WORKERS};

use crate::latency;
use crate::lineup::PEERS;
use crate::samples::{GrowthSample, LatencySample, RssSample};
use crate::workload::*;

/// The medians of one workload, one per peer in [`PEERS`] order (procsched first).
#[derive(Clone)]
pub(crate) struct Row {
    pub(crate) workload: Workload,
    pub(crate) medians: [Option<f64>; 3],
}

impl Row {
    fn procsched(&self) -> Option<f64> {
        self.medians[0]
    }

    /// The faster of the two tokio peers: its index in [`PEERS`] and its median.
    fn best_peer(&self) -> Option<(usize, f64)> {
        (1..PEERS.len())
            .filter_map(|i| Some((i, self.medians[i]?)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// procsched / best peer.
    fn ratio_to_best(&self) -> Option<f64> {
        match (self.procsched(), self.best_peer()) {
            (Some(p), Some((_, best))) if best > 0.0 => Some(p / best),
            _ => None,
        }
    }
}

fn per_unit(workload: Workload, median_ns: Option<f64>) -> String {
    let Some(ns) = median_ns else {
        return "—".to_owned();
    };
    match workload.unit() {
        Unit::Per { count, what } => format!("{}/{what}", format_ns(ns / count)),
        Unit::Rate { count, what } => {
            format!("{} {what}", common::format_si(count / (ns * 1e-9)))
        }
    }
}

/// The main table, with the notes that go with it.
/// The async-fn variants: procsched running the same work as `spawn_fn` bodies, against the
/// state machines (target: within 1.5x) and both tokio peers (target: never slower than
/// tokio-actors).
pub(crate) fn async_fn_table(rows: &[(Row, Option<f64>)]) -> String {
    let mut table = String::from(
        "Async-fn processes (`spawn_fn`) doing the same work as the state machines above; \
         ratio = async fn / other.\n\n\
         | workload | state machine | async fn | async fn per unit | vs state machine | vs native \
         | vs actors |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for (row, async_fn) in rows {
        let [procsched, native, actors] = row.medians;
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} | {} | {} | {} |",
            row.workload.name(),
            common::format_cell(procsched),
            common::format_cell(*async_fn),
            per_unit(row.workload, *async_fn),
            common::format_ratio(*async_fn, procsched),
            common::format_ratio(*async_fn, native),
            common::format_ratio(*async_fn, actors),
        );
    }
    table
}

pub(crate) fn comparison_table(rows: &[Row]) -> String {
    let mut table = format!(
        "Median time per iteration, {} worker threads per peer; ratio = procsched / peer \
         (> 1.00: procsched is slower); best peer = the faster of tokio-native and \
         tokio-actors for that workload. procsched's async handlers run on its own tokio \
         runtime of the same size.\n\n",
        *WORKERS
    );
    table.push_str(
        "| workload | procsched | tokio-native | tokio-actors | vs native | vs actors | vs best peer \
         | procsched per unit | best peer per unit |\n",
    );
    table.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for row in rows {
        let [procsched, native, actors] = row.medians;
        let best = row.best_peer().map_or_else(
            || "—".to_owned(),
            |(i, ns)| format!("{} ({})", per_unit(row.workload, Some(ns)), short(PEERS[i])),
        );
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            row.workload.name(),
            common::format_cell(procsched),
            common::format_cell(native),
            common::format_cell(actors),
            common::format_ratio(procsched, native),
            common::format_ratio(procsched, actors),
            row.ratio_to_best()
                .map_or_else(|| "—".to_owned(), |r| format!("**{r:.2}**")),
            per_unit(row.workload, procsched),
            best,
        );
    }
    let _ = write!(
        table,
        "\n`many_yields` per yield includes a 1/{} share of spawning and joining its process; \
         `skynet` counts all {} processes of the tree ({} leaves). tokio-native does the inline \
         work as a plain function call, so its `one_yield`/`many_yields`/`parallel_spawn` are \
         essentially spawn and join.\n",
        MANY_YIELDS,
        skynet_processes(),
        SKYNET_LEAVES
    );
    table
}

/// `tokio-native` → `native`, for narrow cells.
fn short(peer: &str) -> &str {
    peer.strip_prefix("tokio-").unwrap_or(peer)
}

/// Peak RSS per process of the [`RSS_WORKLOADS`], per peer.
pub(crate) fn rss_table(rss: &[(Workload, [Option<RssSample>; 3])]) -> String {
    let mut table = String::from(
        "Peak RSS growth (VmHWM, fresh child process per measurement), bytes per process \
         (per peak-live process in brackets where processes overlap only partly):\n\n",
    );
    let _ = writeln!(table, "| workload | {} |", PEERS.join(" | "));
    table.push_str("|---|---:|---:|---:|\n");
    for (workload, samples) in rss {
        let cells = samples.map(|sample| match sample {
            Some(s) if s.peak_live != s.processes => format!(
                "{:.0} B ({:.0} B, peak live {})",
                s.bytes_per_process(),
                s.bytes_per_live_process(),
                s.peak_live
            ),
            Some(s) => format!("{:.0} B", s.bytes_per_process()),
            None => "—".to_owned(),
        });
        let _ = writeln!(table, "| {} | {} |", workload.name(), cells.join(" | "));
    }
    table.push_str(
        "\n`burst_spawn` holds all its processes on their async yield at the peak, so per \
         process = per live process (each includes its pending handler task).\n",
    );
    table
}

/// Round-trip percentiles per peer.
pub(crate) fn latency_table(samples: &[(&str, LatencySample)]) -> String {
    let mut table = format!(
        "Message round trip (send from a plain thread → step → reply over a std channel) on a \
         busy peer: {} background processes stepping (`Continue`, 1–2 µs of work per step) on \
         {} workers; {} samples after a warm-up.\n\n\
         | peer | p50 | p99 | p99.9 | max | background steps/s |\n\
         |---|---:|---:|---:|---:|---:|\n",
        latency::BACKGROUND,
        *WORKERS,
        latency::SAMPLES
    );
    for (peer, sample) in samples {
        let _ = writeln!(
            table,
            "| {peer} | {} | {} | {} | {} | {} |",
            format_ns(sample.at(0.5)),
            format_ns(sample.at(0.99)),
            format_ns(sample.at(0.999)),
            format_ns(sample.max()),
            common::format_si(sample.background_steps_per_sec),
        );
    }
    table
}

/// Cost per process at each size, per peer.
pub(crate) fn growth_table(samples: &[(&str, GrowthSample)]) -> String {
    let mut table = String::from(
        "Cost per process with N live processes (fresh child process per peer and size): spawn \
         until first step, send (sending thread only), send until handled, and peak RSS growth \
         per live process.\n\n\
         | live processes | peer | spawn | send | send → handled | memory |\n\
         |---:|---|---:|---:|---:|---:|\n",
    );
    for (peer, s) in samples {
        let _ = writeln!(
            table,
            "| {} | {peer} | {}/process | {}/msg | {}/msg | {:.0} B |",
            s.live,
            format_ns(s.spawn_per_process()),
            format_ns(s.send_per_message()),
            format_ns(s.handled_per_message()),
            s.bytes_per_process(),
        );
    }
    table
}

/// Draws procsched / best peer for every measured workload as a horizontal bar labelled with the
/// ratio and the best peer, to `path`. The axis is logarithmic and bars start at 1.0 (parity),
/// so 2× faster and 2× slower are bars of the same length on either side.
pub(crate) fn ratio_chart(rows: &[Row], path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;

    let bars: Vec<(&str, f64, &str)> = rows
        .iter()
        .filter_map(|row| {
            let (best, _) = row.best_peer()?;
            Some((
                row.workload.name(),
                row.ratio_to_best()?,
                short(PEERS[best]),
            ))
        })
        .collect();
    if bars.is_empty() {
        return Ok(());
    }
    let ratios = || bars.iter().map(|&(_, r, _)| r);
    // Room for the labels on the right.
    let max = ratios().fold(1.0, f64::max) * 2.0;
    let min = ratios().fold(1.0, f64::min) / 1.5;
    let height = 100 + 40 * bars.len() as u32;
    // A segmented range `0..top` has `top + 1` rows; one bar takes two (one stays empty)
    // because a single-point range cannot be drawn.
    let top = bars.len().saturating_sub(1).max(1);
    // Table order top-down: the i-th bar goes in row `top - i`.
    let row = |i: usize| top - i;
    let root = SVGBackend::new(path, (900, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "procsched / best tokio peer, time, {} workers (< 1: procsched faster)",
                *WORKERS
            ),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(130)
        .build_cartesian_2d((min..max).log_scale(), (0..top).into_segmented())?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(top + 1)
        .y_label_formatter(&|segment| match segment {
            SegmentValue::CenterOf(r) if *r <= top => {
                bars.get(top - *r).map_or("", |bar| bar.0).to_owned()
            }
            _ => String::new(),
        })
        .x_desc("procsched time / best peer time (log scale)")
        .draw()?;
    chart.draw_series(bars.iter().enumerate().map(|(i, &(_, ratio, _))| {
        let colour = if ratio <= 1.0 { BLUE } else { RED };
        let mut bar = Rectangle::new(
            [
                (1.0, SegmentValue::Exact(row(i))),
                (ratio, SegmentValue::Exact(row(i) + 1)),
            ],
            colour.mix(0.6).filled(),
        );
        bar.set_margin(6, 6, 0, 0);
        bar
    }))?;
    chart.draw_series(bars.iter().enumerate().map(|(i, &(_, ratio, best))| {
        Text::new(
            format!("{ratio:.2} (vs {best})"),
            // Right of the bar's end, or right of parity for bars to its left.
            (ratio.max(1.0) * 1.03, SegmentValue::CenterOf(row(i))),
            ("sans-serif", 13),
        )
    }))?;
    // Parity.
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(1.0, SegmentValue::Exact(0)), (1.0, SegmentValue::Last)],
        BLACK.stroke_width(2),
    )))?;
    root.present()?;
    Ok(())
}
