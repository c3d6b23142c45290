//! The report: the rows printed and written to `target/bench-cluster.md`.

use crate::down::DownRow;
use crate::latency::LatencyRow;
use crate::send::SendWire;
use crate::setup::size_name;
use crate::{sends, HOPS, KILLS, LATENCY_SAMPLES, PROCSCHED, PROCSCHED_SHARED, RAW, RING};
use procsched_benches::{format_ns, format_si, median_ns, publish_report, WORKERS};
use std::time::{Duration, SystemTime};

pub(crate) fn ms(duration: Duration) -> String {
    format!("{:.0} ms", duration.as_secs_f64() * 1e3)
}

pub(crate) fn report(
    started: SystemTime,
    latency: &[LatencyRow],
    send_wire: &SendWire,
    lengths: &[(usize, usize)],
    down: &[DownRow],
) {
    let mut out = format!(
        "Raw async-nats against procsched's remote ask/send, one nats-server on 127.0.0.1, \
         {} tokio threads, one scheduler worker per node.\n\n",
        *WORKERS
    );
    if !latency.is_empty() {
        out.push_str(&format!(
            "### Request/reply latency ({LATENCY_SAMPLES} requests per cell and peer)\n\n\
             | payload | in flight | raw p50 | raw p99 | procsched p50 | procsched p99 | added p50 | \
             ratio p50 | raw req/s | procsched req/s | ≤ 10 µs added |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n"
        ));
        for row in latency {
            let added = row.ours.p50 - row.raw.p50;
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {}{} | {:.2} | {} | {} | {} |\n",
                size_name(row.size),
                row.in_flight,
                format_ns(row.raw.p50),
                format_ns(row.raw.p99),
                format_ns(row.ours.p50),
                format_ns(row.ours.p99),
                if added < 0.0 { "−" } else { "+" },
                format_ns(added.abs()),
                row.ours.p50 / row.raw.p50,
                format_si(row.raw.per_second),
                format_si(row.ours.per_second),
                if added <= 10_000.0 { "yes" } else { "**no**" },
            ));
        }
    }
    if !latency.is_empty() {
        out.push_str(
            "\n### CPU time per request (µs; `/proc/<pid>/stat`, 10 ms ticks)\n\n\
             | payload | in flight | raw: bench process | raw: nats-server | procsched: bench process | \
             procsched: nats-server |\n|---|---:|---:|---:|---:|---:|\n",
        );
        for row in latency {
            out.push_str(&format!(
                "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} |\n",
                size_name(row.size),
                row.in_flight,
                row.raw_cpu.0,
                row.raw_cpu.1,
                row.ours_cpu.0,
                row.ours_cpu.1,
            ));
        }
    }
    let mut throughput = String::new();
    for (size, wire) in send_wire {
        let n = sends(*size) as f64;
        let group = format!("send/{}", size_name(*size));
        let (Some(raw), Some(ours)) = (
            median_ns(&group.replace('/', "_"), RAW, started),
            median_ns(&group.replace('/', "_"), PROCSCHED, started),
        ) else {
            continue;
        };
        let shared = median_ns(&group.replace('/', "_"), PROCSCHED_SHARED, started);
        let rate = |ns: f64| n / (ns / 1e9);
        let mb = |ns: f64| format!("{:.1}", rate(ns) * *size as f64 / 1e6);
        let kept = raw / ours;
        let (shared_rate, shared_kept) = shared.map_or(("—".to_owned(), "—".to_owned()), |ns| {
            (format_si(rate(ns)), format!("{:.0} %", raw / ns * 100.0))
        });
        let best = shared.map_or(kept, |ns| kept.max(raw / ns));
        throughput.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {:.0} % | {} | {} | {} | {:.1} | {:.1} |\n",
            size_name(*size),
            format_si(n),
            format_si(rate(raw)),
            mb(raw),
            format_si(rate(ours)),
            mb(ours),
            kept * 100.0,
            shared_rate,
            shared_kept,
            if best >= 0.8 { "yes" } else { "**no**" },
            wire.0 as f64 / wire.2.max(1) as f64,
            wire.2 as f64 / wire.1.max(1) as f64,
        ));
    }
    if !throughput.is_empty() {
        out.push_str(
            "\n### Publish / send throughput (median of criterion's samples)\n\n\
             `Vec<u8>`: the payload copied into the message and decoded into a new `Vec`; \
             `Bytes`: a `shared_bytes` field, decoded as a slice of its frame.\n\n\
             | payload | messages | raw msg/s | raw MB/s | procsched `Vec<u8>` msg/s | MB/s | \
             of raw | procsched `Bytes` msg/s | of raw | ≥ 80 % | procsched wire bytes/msg | \
             msgs/frame |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n",
        );
        out.push_str(&throughput);
    }
    let mut codec = String::new();
    for (size, length) in lengths {
        let group = format!("codec/{}", size_name(*size));
        let Some(ns) = median_ns(&group.replace('/', "_"), "encode_decode", started) else {
            continue;
        };
        let single = latency
            .iter()
            .find(|row| row.size == *size && row.in_flight == 1);
        codec.push_str(&format!(
            "| {} | {} B | {} | {} | {} |\n",
            size_name(*size),
            length,
            format_ns(ns),
            single.map_or("—".to_owned(), |row| format!(
                "{:.0} B in {:.2} frames",
                row.bytes_per_ask, row.frames_per_ask
            )),
            2 * size,
        ));
    }
    if !codec.is_empty() {
        out.push_str(
            "\n### Codec cost and bytes on the wire\n\n\
             | payload | `Echo::Data` encoded | encode + decode | procsched: NATS payload bytes per ask, \
             both ways (1 in flight) | raw: per request + reply |\n\
             |---|---:|---:|---:|---:|\n",
        );
        out.push_str(&codec);
    }
    if !down.is_empty() {
        out.push_str(&format!(
            "\n### SIGKILL → `Down(NoConnection)` ({KILLS} kills each)\n\n\
             | heartbeat / down_after | messages to the killed node's process | min | median | max |\n\
             |---|---|---:|---:|---:|\n"
        ));
        for row in down {
            let traffic = row.traffic.map_or("none".to_owned(), |every| {
                format!("one every {}", ms(every))
            });
            out.push_str(&format!(
                "| {} / {} | {traffic} | {} | {} | {} |\n",
                ms(row.heartbeat),
                ms(row.down_after),
                ms(row.samples[0]),
                ms(row.samples[row.samples.len() / 2]),
                ms(*row.samples.last().expect("samples")),
            ));
        }
    }
    if let (Some(one), Some(two)) = (
        median_ns("ring", "one_node", started),
        median_ns("ring", "two_nodes", started),
    ) {
        let per = |ns: f64| format_ns(ns / HOPS as f64);
        out.push_str(&format!(
            "\n### Ring of {RING} members, {HOPS} hops per lap\n\n\
             | layout | per lap | per hop |\n|---|---:|---:|\n\
             | one node (local route) | {} | {} |\n\
             | two nodes (every hop crosses NATS) | {} | {} |\n\n\
             Two nodes / one node: {:.1}x per hop.\n",
            format_ns(one),
            per(one),
            format_ns(two),
            per(two),
            two / one,
        ));
    }
    publish_report("bench-cluster.md", &out);
}
