//! Nodes joined through NATS (procsched's `cluster` feature), side by side with raw `async-nats`
//! in one run, against one real `nats-server` on 127.0.0.1 that the bench starts itself.
//!
//! | row | procsched | raw async-nats peer |
//! |---|---|---|
//! | `latency/<size>/<in flight>` | tokio code on node `a` asks an echo process on node `b` (`RemoteAddr::ask`, `Echo::Ask(bytes, Reply<ByteBuf>)`), 1 or 64 asks in flight | `client.request(subject, payload)` on one connection to a responder task (`subscribe` + `publish(reply, payload)`) on another |
//! | `send/<size>` | [`sends`] `RemoteAddr::send(Echo::Data(bytes))` (a `Vec<u8>`; and, as a second row, `Echo::Shared`: `Bytes` in a `shared_bytes` field) from node `a` to a counting process on `b`, timed until an ask of its count (queued behind them, order is kept per node pair) answers [`sends`] | [`sends`] `publish`es to a subject a subscriber task on the other connection counts, then `flush`; timed until it has counted them all |
//! | `codec/<size>` | `rmp_serde::to_vec_named` + `from_slice` of `Echo::Data` (what `send` encodes on the caller's thread and the receiving node decodes) | — |
//! | `ring/<layout>` | [`RING`] members pass a token [`HOPS`] hops, each forwarding with `RemoteAddr::send`: alternating nodes `a`, `b` (every hop crosses NATS), or all on `a` (the same API, local route) | — |
//! | SIGKILL → `Down` | a node in a child process (this binary, re-executed with `PROCSCHED_BENCH_NODE` set) is SIGKILLed; time until `Node::monitor` of its process resolves `NoConnection`, [`KILLS`] times at heartbeat 250 ms / down_after 1 s and at the defaults (500 ms / 2 s); and at the defaults with the watcher sending to the killed process every [`TRAFFIC_EVERY`] (a frame that meets no responder declares its node down at once) | — |
//!
//! Sizes: 64 B, 1 KiB and 16 KiB of payload. The `send`, `codec` and `ring` rows are criterion
//! groups (median per iteration); the latency rows record every request in an `hdrhistogram`
//! (p50/p99), raw and procsched alternating in two halves so that load drift hits both; the
//! kill rows are min/median/max. Bytes on the wire per message come from `Node::stats`
//! (`bytes_out / items_out`). One tokio multi-thread runtime with [`WORKERS`] threads runs both
//! peers' connections (and the nodes' tasks); each node's scheduler has one worker. The report
//! is printed and written to `target/bench-cluster.md`.
//!
//! The server binary is `$NATS_SERVER`, else what `scripts/install-nats-server.sh` prints.
//!
//! ```text
//! cargo bench -p procsched-benches --bench cluster            # about 80 s
//! cargo bench -p procsched-benches --bench cluster -- send    # criterion rows matching `send`
//!                                                             # (the custom rows: `latency`, `down`)
//! ```

mod codec;
mod down;
mod latency;
mod processes;
mod report;
mod ring;
mod send;
mod server;
mod setup;

use criterion::Criterion;
use down::{node_process, sigkill_to_down};
use setup::Bench;
use std::time::{Duration, SystemTime};

/// Payload sizes.
pub(crate) const SIZES: [usize; 3] = [64, 1024, 16 * 1024];
/// Requests in flight in the latency rows.
pub(crate) const IN_FLIGHT: [usize; 2] = [1, 64];
/// Measured requests per latency cell and peer (two halves, alternating with the other peer).
pub(crate) const LATENCY_SAMPLES: usize = 10_000;
/// Unrecorded requests before each latency cell, per peer.
pub(crate) const LATENCY_WARMUP: usize = 500;
/// Members of the ring.
pub(crate) const RING: usize = 8;
/// Hops per ring iteration.
pub(crate) const HOPS: u64 = 4_000;
/// SIGKILLs per heartbeat setting.
pub(crate) const KILLS: usize = 5;
/// Hang guard for every wait (and the nodes' request timeout).
pub(crate) const GUARD: Duration = Duration::from_secs(30);

/// Sends (publishes) per `send/<size>` iteration: under async-nats's default subscription
/// capacity (65 536 messages) and the server's 64 MiB per-client pending limit, so neither
/// side's subscriber drops anything on a slow machine.
pub(crate) fn sends(size: usize) -> u64 {
    if size <= 64 {
        50_000
    } else if size <= 1024 {
        20_000
    } else {
        2_000
    }
}

pub(crate) const RAW: &str = "raw";
pub(crate) const PROCSCHED: &str = "procsched";
/// The `send` rows' second procsched peer: the payload as a `shared_bytes` field.
pub(crate) const PROCSCHED_SHARED: &str = "procsched_shared_bytes";

/// Set in the child process that runs a node to be SIGKILLed: its node name.
pub(crate) const NODE_ENV: &str = "PROCSCHED_BENCH_NODE";
pub(crate) const NATS_ENV: &str = "PROCSCHED_BENCH_NATS";
pub(crate) const PREFIX_ENV: &str = "PROCSCHED_BENCH_PREFIX";
pub(crate) const HEARTBEAT_ENV: &str = "PROCSCHED_BENCH_HEARTBEAT_MS";
pub(crate) const DOWN_AFTER_ENV: &str = "PROCSCHED_BENCH_DOWN_AFTER_MS";

fn main() {
    if let Ok(name) = std::env::var(NODE_ENV) {
        node_process(name);
        return;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filter = args
        .iter()
        .find(|arg| !arg.starts_with('-'))
        .cloned()
        .unwrap_or_default();
    let listing = args.iter().any(|arg| arg == "--list");
    let runs = |row: &str| !listing && row.contains(filter.as_str());
    let started = SystemTime::now();
    let mut c = Criterion::default()
        .without_plots()
        .warm_up_time(Duration::from_secs(1))
        .configure_from_args();
    let lengths = codec::codec(&mut c);
    let bench = Bench::start();
    let latency = if runs("latency") {
        latency::latency(&bench)
    } else {
        Vec::new()
    };
    let send_wire = send::send(&mut c, &bench);
    ring::ring(&mut c, &bench);
    let down = if runs("down") {
        sigkill_to_down(&bench)
    } else {
        Vec::new()
    };
    bench.stop();
    c.final_summary();
    report::report(started, &latency, &send_wire, &lengths, &down);
}
