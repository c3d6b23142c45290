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

use bytes::Bytes;
use criterion::Criterion;
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use hdrhistogram::Histogram;
use procsched::cluster::{nats, Cluster, Node, NodePid, NodeStats, Placement};
use procsched::prelude::*;
use procsched_benches::{format_ns, format_si, median_ns, publish_report, WORKERS};
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;
use std::future::Future;
use std::io::{BufRead, BufReader, Read};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// Payload sizes.
const SIZES: [usize; 3] = [64, 1024, 16 * 1024];
/// Requests in flight in the latency rows.
const IN_FLIGHT: [usize; 2] = [1, 64];
/// Measured requests per latency cell and peer (two halves, alternating with the other peer).
const LATENCY_SAMPLES: usize = 10_000;
/// Unrecorded requests before each latency cell, per peer.
const LATENCY_WARMUP: usize = 500;
/// Members of the ring.
const RING: usize = 8;
/// Hops per ring iteration.
const HOPS: u64 = 4_000;
/// SIGKILLs per heartbeat setting.
const KILLS: usize = 5;
/// Hang guard for every wait (and the nodes' request timeout).
const GUARD: Duration = Duration::from_secs(30);

/// Sends (publishes) per `send/<size>` iteration: under async-nats's default subscription
/// capacity (65 536 messages) and the server's 64 MiB per-client pending limit, so neither
/// side's subscriber drops anything on a slow machine.
fn sends(size: usize) -> u64 {
    if size <= 64 {
        50_000
    } else if size <= 1024 {
        20_000
    } else {
        2_000
    }
}

const RAW: &str = "raw";
const PROCSCHED: &str = "procsched";
/// The `send` rows' second procsched peer: the payload as a `shared_bytes` field.
const PROCSCHED_SHARED: &str = "procsched_shared_bytes";

/// Set in the child process that runs a node to be SIGKILLed: its node name.
const NODE_ENV: &str = "PROCSCHED_BENCH_NODE";
const NATS_ENV: &str = "PROCSCHED_BENCH_NATS";
const PREFIX_ENV: &str = "PROCSCHED_BENCH_PREFIX";
const HEARTBEAT_ENV: &str = "PROCSCHED_BENCH_HEARTBEAT_MS";
const DOWN_AFTER_ENV: &str = "PROCSCHED_BENCH_DOWN_AFTER_MS";

// ---------------------------------------------------------------------------------------------
// The processes
// ---------------------------------------------------------------------------------------------

/// The echo / counting process's messages.
#[derive(Serialize, Deserialize)]
enum Echo {
    /// Answer the bytes back.
    Ask(#[serde(with = "serde_bytes")] Vec<u8>, Reply<ByteBuf>),
    /// Count one.
    Data(#[serde(with = "serde_bytes")] Vec<u8>),
    /// Count one: the payload as `Bytes`, decoded as a slice of its frame.
    Shared(#[serde(with = "procsched::cluster::shared_bytes")] Bytes),
    /// Answer the count and start again from 0.
    Count(Reply<u64>),
}

async fn echo(cx: ProcessCx<Echo>, (): ()) -> Result<(), BoxError> {
    let mut count = 0u64;
    loop {
        match cx.recv().await? {
            Echo::Ask(bytes, reply) => {
                let _ = reply.send(ByteBuf::from(bytes));
            }
            Echo::Data(_) | Echo::Shared(_) => count += 1,
            Echo::Count(reply) => {
                let _ = reply.send(std::mem::take(&mut count));
            }
        }
    }
}

/// A ring member's messages (as `tests/cluster_nodes.rs`).
#[derive(Serialize, Deserialize)]
enum Ring {
    Next(NodePid),
    Start { hops: u64, done: Reply<u64> },
    Token { left: u64, origin: NodePid },
    Finished,
}

async fn ring_member(cx: ProcessCx<Ring>, (): ()) -> Result<(), BoxError> {
    let node = Node::for_scheduler(&cx.scheduler()).ok_or("not a node")?;
    let me = node.pid(cx.pid());
    let mut next = None;
    let mut waiting: Option<Reply<u64>> = None;
    loop {
        match cx.recv().await? {
            Ring::Next(pid) => next = Some(node.addr::<Ring>(pid)),
            Ring::Start { hops, done } => {
                waiting = Some(done);
                let next = next.as_ref().ok_or("no next member")?;
                next.send(Ring::Token {
                    left: hops - 1,
                    origin: me.clone(),
                })
                .map_err(|error| error.to_string())?;
            }
            Ring::Token { left: 0, origin } => node
                .addr::<Ring>(origin)
                .send(Ring::Finished)
                .map_err(|error| error.to_string())?,
            Ring::Token { left, origin } => {
                let next = next.as_ref().ok_or("no next member")?;
                next.send(Ring::Token {
                    left: left - 1,
                    origin,
                })
                .map_err(|error| error.to_string())?;
            }
            Ring::Finished => {
                if let Some(done) = waiting.take() {
                    let _ = done.send(0);
                }
            }
        }
    }
}

fn cluster(url: &str, name: &str) -> Cluster {
    Cluster::nats(url)
        .name(name)
        .request_timeout(GUARD)
        .message::<Echo>("echo")
        .message::<Ring>("ring")
        .spawnable("echo", echo)
        .spawnable("ring-member", ring_member)
}

/// Starts a node, retrying while the server's JetStream is still coming up.
async fn start_node(sched: &Scheduler, make: impl Fn() -> Cluster) -> Node {
    let deadline = Instant::now() + GUARD;
    loop {
        match Node::start(sched.handle(), make()).await {
            Ok(node) => return node,
            Err(error) if Instant::now() < deadline => {
                eprintln!("node start: {error}; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => panic!("node start: {error}"),
        }
    }
}

fn one_worker() -> Scheduler {
    Scheduler::builder().workers(1).build().expect("scheduler")
}

// ---------------------------------------------------------------------------------------------
// The server
// ---------------------------------------------------------------------------------------------

/// One `nats-server -js` on a free loopback port with a throwaway store dir; killed on drop.
struct NatsServer {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl NatsServer {
    fn start() -> NatsServer {
        let bin = nats_server_bin();
        for _ in 0..5 {
            let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .and_then(|probe| probe.local_addr())
                .expect("a free port")
                .port();
            let dir = std::env::temp_dir().join(format!(
                "procsched-bench-nats-{}-{port}",
                std::process::id()
            ));
            std::fs::create_dir_all(&dir).expect("server dir");
            let mut child = Command::new(&bin)
                .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
                .arg(&dir)
                .arg("-l")
                .arg(dir.join("server.log"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|error| panic!("cannot run {}: {error}", bin.display()));
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if child.try_wait().ok().flatten().is_some() {
                    break; // lost the port race: try another port
                }
                if TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok() {
                    return NatsServer { child, dir, port };
                }
                assert!(Instant::now() < deadline, "nats-server never listened");
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
        panic!("nats-server did not start");
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "nats-server's log kept: {}",
                self.dir.join("server.log").display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// `$NATS_SERVER`, else the last stdout line of `scripts/install-nats-server.sh`.
fn nats_server_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("NATS_SERVER").filter(|bin| !bin.is_empty()) {
        return PathBuf::from(bin);
    }
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scripts/install-nats-server.sh"
    );
    let out = Command::new("bash")
        .arg(script)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|error| panic!("cannot run {script}: {error}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    match stdout.lines().map(str::trim).rfind(|line| !line.is_empty()) {
        Some(last) if out.status.success() => PathBuf::from(last),
        _ => panic!("{script} failed ({}); set NATS_SERVER", out.status),
    }
}

// ---------------------------------------------------------------------------------------------
// The setup both peers share
// ---------------------------------------------------------------------------------------------

struct Bench {
    rt: tokio::runtime::Runtime,
    server: NatsServer,
    scheds: Vec<Scheduler>,
    a: Node,
    b: Node,
    /// The raw peer's requesting / publishing connection.
    raw_a: nats::Client,
    /// The raw peer's responding / counting connection.
    raw_b: nats::Client,
}

impl Bench {
    fn start() -> Bench {
        let server = NatsServer::start();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(*WORKERS)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let url = server.url();
        let scheds = vec![one_worker(), one_worker()];
        let (a, b, raw_a, raw_b) = rt.block_on(async {
            let a = start_node(&scheds[0], || cluster(&url, "a")).await;
            let b = start_node(&scheds[1], || cluster(&url, "b")).await;
            assert!(a.wait_for_nodes(1, GUARD).await, "a sees b");
            assert!(b.wait_for_nodes(1, GUARD).await, "b sees a");
            let raw_a = raw_client(&url).await;
            let raw_b = raw_client(&url).await;
            // The raw responder: what a competent async-nats user writes for an echo service.
            let mut requests = raw_b.subscribe("raw.echo").await.expect("subscribe");
            let responder = raw_b.clone();
            tokio::spawn(async move {
                while let Some(request) = requests.next().await {
                    if let Some(reply) = request.reply {
                        let _ = responder.publish(reply, request.payload).await;
                    }
                }
            });
            raw_b.flush().await.expect("flush");
            (a, b, raw_a, raw_b)
        });
        Bench {
            rt,
            server,
            scheds,
            a,
            b,
            raw_a,
            raw_b,
        }
    }

    fn cpu(&self) -> Cpu {
        Cpu {
            bench: cpu_ticks("self"),
            server: cpu_ticks(&self.server.child.id().to_string()),
        }
    }

    /// A fresh echo process on node `b`, addressed from node `a`.
    fn echo_on_b(&self) -> procsched::cluster::RemoteAddr<Echo> {
        self.rt.block_on(async {
            let pid = self
                .a
                .spawn_on(Placement::Node("b".into()), "echo", ())
                .await
                .expect("spawn echo on b");
            self.a.addr::<Echo>(pid)
        })
    }

    fn stop(self) {
        let Bench {
            rt,
            server,
            scheds,
            a,
            b,
            raw_a,
            raw_b,
        } = self;
        rt.block_on(async {
            a.leave().await;
            b.leave().await;
            drop((raw_a, raw_b));
        });
        for sched in scheds {
            sched.shutdown(Duration::from_secs(1));
        }
        rt.shutdown_timeout(Duration::from_secs(1));
        drop(server);
    }
}

/// A raw peer's connection: async-nats defaults; its trouble (slow consumers, disconnections)
/// on stderr.
async fn raw_client(url: &str) -> nats::Client {
    nats::ConnectOptions::new()
        .event_callback(|event| async move {
            if !matches!(event, nats::Event::Connected | nats::Event::Closed) {
                eprintln!("raw client: {event}");
            }
        })
        .connect(url)
        .await
        .expect("raw client")
}

fn payload(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i * 31 + 7) as u8).collect()
}

fn size_name(size: usize) -> String {
    if size >= 1024 {
        format!("{}KiB", size / 1024)
    } else {
        format!("{size}B")
    }
}

/// `after - before` of the traffic counters.
fn traffic(before: NodeStats, after: NodeStats) -> (u64, u64, u64) {
    (
        after.bytes_out - before.bytes_out,
        after.frames_out - before.frames_out,
        after.items_out - before.items_out,
    )
}

// ---------------------------------------------------------------------------------------------
// latency (custom: hdrhistogram)
// ---------------------------------------------------------------------------------------------

/// Runs `count` requests made by `request`, `in_flight` at a time, recording each one's latency
/// (ns) in `histogram` if given; returns the wall time of the whole run.
async fn run_requests<F, Fut>(
    count: usize,
    in_flight: usize,
    request: F,
    mut histogram: Option<&mut Histogram<u64>>,
) -> Duration
where
    F: Fn() -> Fut,
    Fut: Future<Output = ()>,
{
    let timed = || {
        let request = request();
        async move {
            let start = Instant::now();
            request.await;
            start.elapsed()
        }
    };
    let started = Instant::now();
    let mut running = FuturesUnordered::new();
    let mut issued = 0;
    while issued < count.min(in_flight) {
        running.push(timed());
        issued += 1;
    }
    while let Some(took) = running.next().await {
        if let Some(histogram) = histogram.as_deref_mut() {
            histogram.saturating_record(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX));
        }
        if issued < count {
            running.push(timed());
            issued += 1;
        }
    }
    started.elapsed()
}

/// One latency cell's results for one peer.
struct Latency {
    p50: f64,
    p99: f64,
    per_second: f64,
}

struct LatencyRow {
    size: usize,
    in_flight: usize,
    raw: Latency,
    ours: Latency,
    /// Bytes published by both nodes per ask (message, ack and reply), and frames per ask.
    /// CPU time per request (µs): this process (both peers' clients, the nodes, the
    /// schedulers) and the server.
    raw_cpu: (f64, f64),
    ours_cpu: (f64, f64),
    bytes_per_ask: f64,
    frames_per_ask: f64,
}

/// CPU time consumed so far, in clock ticks (`/proc/<pid>/stat` utime + stime), by this
/// process and by the server.
#[derive(Debug, Default, Clone, Copy)]
struct Cpu {
    bench: u64,
    server: u64,
}

impl std::ops::Add for Cpu {
    type Output = Cpu;
    fn add(self, other: Cpu) -> Cpu {
        Cpu {
            bench: self.bench + other.bench,
            server: self.server + other.server,
        }
    }
}

impl std::ops::Sub for Cpu {
    type Output = Cpu;
    fn sub(self, other: Cpu) -> Cpu {
        Cpu {
            bench: self.bench.saturating_sub(other.bench),
            server: self.server.saturating_sub(other.server),
        }
    }
}

impl Cpu {
    /// µs per request of (this process, the server), at 100 ticks per second (Linux's
    /// `USER_HZ`).
    fn per(self, requests: usize) -> (f64, f64) {
        let us = |ticks: u64| ticks as f64 * 10_000.0 / requests as f64;
        (us(self.bench), us(self.server))
    }
}

/// utime + stime of process `pid` (`self` for this one), in clock ticks; 0 if unreadable.
fn cpu_ticks(pid: &str) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    // After the command name, which may hold spaces: field 3 (state) onwards.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    field(14).unwrap_or(0) + field(15).unwrap_or(0)
}

fn latency(bench: &Bench) -> Vec<LatencyRow> {
    let addr = bench.echo_on_b();
    let mut rows = Vec::new();
    for size in SIZES {
        let bytes = Bytes::from(payload(size));
        for in_flight in IN_FLIGHT {
            let raw_request = || {
                let bytes = bytes.clone();
                async move {
                    let answer = bench
                        .raw_a
                        .request("raw.echo", bytes)
                        .await
                        .expect("raw request");
                    assert_eq!(answer.payload.len(), size);
                }
            };
            let ask = || {
                let addr = &addr;
                let bytes = &bytes;
                async move {
                    let answer = addr
                        .ask(|reply| Echo::Ask(bytes.to_vec(), reply))
                        .await
                        .expect("ask");
                    assert_eq!(answer.len(), size);
                }
            };
            let histogram = || Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
            let (mut raw, mut ours) = (histogram(), histogram());
            let (mut raw_wall, mut ours_wall) = (Duration::ZERO, Duration::ZERO);
            let mut wire = (0, 0);
            let (mut raw_cpu, mut ours_cpu) = (Cpu::default(), Cpu::default());
            bench.rt.block_on(async {
                run_requests(LATENCY_WARMUP, in_flight, raw_request, None).await;
                run_requests(LATENCY_WARMUP, in_flight, ask, None).await;
                for _ in 0..2 {
                    let half = LATENCY_SAMPLES / 2;
                    let cpu = bench.cpu();
                    raw_wall += run_requests(half, in_flight, raw_request, Some(&mut raw)).await;
                    raw_cpu = raw_cpu + (bench.cpu() - cpu);
                    let (a, b) = (bench.a.stats(), bench.b.stats());
                    let cpu = bench.cpu();
                    ours_wall += run_requests(half, in_flight, ask, Some(&mut ours)).await;
                    ours_cpu = ours_cpu + (bench.cpu() - cpu);
                    let (a, b) = (traffic(a, bench.a.stats()), traffic(b, bench.b.stats()));
                    wire = (wire.0 + a.0 + b.0, wire.1 + a.1 + b.1);
                }
            });
            let summary = |histogram: &Histogram<u64>, wall: Duration| Latency {
                p50: histogram.value_at_quantile(0.50) as f64,
                p99: histogram.value_at_quantile(0.99) as f64,
                per_second: histogram.len() as f64 / wall.as_secs_f64(),
            };
            let row = LatencyRow {
                size,
                in_flight,
                raw: summary(&raw, raw_wall),
                ours: summary(&ours, ours_wall),
                raw_cpu: raw_cpu.per(LATENCY_SAMPLES),
                ours_cpu: ours_cpu.per(LATENCY_SAMPLES),
                bytes_per_ask: wire.0 as f64 / LATENCY_SAMPLES as f64,
                frames_per_ask: wire.1 as f64 / LATENCY_SAMPLES as f64,
            };
            eprintln!(
                "latency/{}/{in_flight}: raw p50 {} p99 {}, procsched p50 {} p99 {}",
                size_name(size),
                format_ns(row.raw.p50),
                format_ns(row.raw.p99),
                format_ns(row.ours.p50),
                format_ns(row.ours.p99),
            );
            rows.push(row);
        }
    }
    rows
}

// ---------------------------------------------------------------------------------------------
// send (criterion)
// ---------------------------------------------------------------------------------------------

/// The raw counter's answer: how many it counted.
type Done = tokio::sync::oneshot::Sender<u64>;

/// Per size: (bytes, frames, items) node `a` published during the procsched send runs.
type SendWire = Vec<(usize, (u64, u64, u64))>;

fn send(c: &mut Criterion, bench: &Bench) -> SendWire {
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

// ---------------------------------------------------------------------------------------------
// codec (criterion)
// ---------------------------------------------------------------------------------------------

/// Per size: the encoded `Echo::Data`'s length.
fn codec(c: &mut Criterion) -> Vec<(usize, usize)> {
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

// ---------------------------------------------------------------------------------------------
// ring (criterion)
// ---------------------------------------------------------------------------------------------

fn ring(c: &mut Criterion, bench: &Bench) {
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

// ---------------------------------------------------------------------------------------------
// SIGKILL → Down (custom)
// ---------------------------------------------------------------------------------------------

/// The child process: a node (its name in [`NODE_ENV`]) serving until killed, or until the
/// bench closes its stdin (the bench died: do not outlive it).
fn node_process(name: String) {
    let var = |key: &str| std::env::var(key).unwrap_or_else(|_| panic!("{key} unset"));
    let millis = |key: &str| Duration::from_millis(var(key).parse().expect("milliseconds"));
    let (url, prefix) = (var(NATS_ENV), var(PREFIX_ENV));
    let (heartbeat, down_after) = (millis(HEARTBEAT_ENV), millis(DOWN_AFTER_ENV));
    std::thread::spawn(|| {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        std::process::exit(0);
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        let sched = one_worker();
        let node = start_node(&sched, || {
            cluster(&url, &name)
                .prefix(prefix.as_str())
                .bucket(format!("{prefix}_nodes"))
                .heartbeat(heartbeat)
                .down_after(down_after)
        })
        .await;
        println!("ready {}", node.incarnation());
        std::future::pending::<()>().await;
    });
}

/// Starts node `name` in a child process; returns it once it says it is ready.
fn spawn_node(url: &str, prefix: &str, name: &str, timing: (Duration, Duration)) -> Child {
    let mut child = Command::new(std::env::current_exe().expect("this binary"))
        .env(NODE_ENV, name)
        .env(NATS_ENV, url)
        .env(PREFIX_ENV, prefix)
        .env(HEARTBEAT_ENV, timing.0.as_millis().to_string())
        .env(DOWN_AFTER_ENV, timing.1.as_millis().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the node process");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    loop {
        let line = lines
            .next()
            .expect("the node process said nothing")
            .expect("read");
        if line.starts_with("ready ") {
            break;
        }
    }
    std::thread::spawn(move || lines.for_each(drop));
    child
}

struct DownRow {
    heartbeat: Duration,
    down_after: Duration,
    /// The watcher sends to the victim's process this often after the kill, if at all: a
    /// frame that meets no responder declares the victim down without waiting for its
    /// heartbeats to stop.
    traffic: Option<Duration>,
    samples: Vec<Duration>,
}

/// How often the `traffic` row sends to the killed node's process.
const TRAFFIC_EVERY: Duration = Duration::from_millis(10);

fn sigkill_to_down(bench: &Bench) -> Vec<DownRow> {
    let timings = [
        (
            "fast",
            Duration::from_millis(250),
            Duration::from_secs(1),
            None,
        ),
        (
            "default",
            procsched::cluster::DEFAULT_HEARTBEAT,
            procsched::cluster::DEFAULT_DOWN_AFTER,
            None,
        ),
        (
            "traffic",
            procsched::cluster::DEFAULT_HEARTBEAT,
            procsched::cluster::DEFAULT_DOWN_AFTER,
            Some(TRAFFIC_EVERY),
        ),
    ];
    let url = bench.server.url();
    let mut rows = Vec::new();
    for (tag, heartbeat, down_after, traffic) in timings {
        let prefix = format!("kill{tag}");
        let sched = one_worker();
        let watcher = bench.rt.block_on(start_node(&sched, || {
            cluster(&url, "watcher")
                .prefix(prefix.as_str())
                .bucket(format!("{prefix}_nodes"))
                .heartbeat(heartbeat)
                .down_after(down_after)
        }));
        let mut samples = Vec::new();
        for kill in 0..KILLS {
            let name = format!("victim{kill}");
            let mut child = spawn_node(&url, &prefix, &name, (heartbeat, down_after));
            let stdin: Option<ChildStdin> = child.stdin.take();
            let took = bench.rt.block_on(async {
                let deadline = Instant::now() + GUARD;
                while !watcher.nodes().iter().any(|node| node.name == name) {
                    assert!(
                        Instant::now() < deadline,
                        "hang guard: the watcher sees {name}"
                    );
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let pid = watcher
                    .spawn_on(Placement::Node(name.clone()), "echo", ())
                    .await
                    .expect("spawn on the victim");
                let down = watcher.monitor(pid.clone());
                let addr = watcher.addr::<Echo>(pid);
                addr.ask(Echo::Count).await.expect("the victim answers");
                if traffic.is_some() {
                    // A node the watcher has known for less than a heartbeat is not declared
                    // down by "no responders" (its interest may not have reached every server
                    // yet): measure a victim past that age, as a node in production is.
                    tokio::time::sleep(heartbeat).await;
                }
                // Kill at a different phase of the victim's heartbeat each time.
                tokio::time::sleep(heartbeat * (kill as u32 + 1) / (KILLS as u32 + 1)).await;
                child.kill().expect("SIGKILL");
                let killed = Instant::now();
                let sender = traffic.map(|every| {
                    tokio::spawn(async move {
                        let mut ticks = tokio::time::interval(every);
                        loop {
                            ticks.tick().await;
                            let _ = addr.send(Echo::Data(Vec::new()));
                        }
                    })
                });
                let down = tokio::time::timeout(GUARD, down)
                    .await
                    .expect("hang guard: Down");
                let took = killed.elapsed();
                if let Some(sender) = sender {
                    sender.abort();
                }
                assert!(down.reason.is_no_connection(), "{:?}", down.reason);
                took
            });
            let _ = child.wait();
            drop(stdin);
            eprintln!(
                "SIGKILL → Down, heartbeat {heartbeat:?} / down_after {down_after:?}, \
                 sending every {traffic:?}: {took:?}"
            );
            samples.push(took);
        }
        bench.rt.block_on(watcher.leave());
        sched.shutdown(Duration::from_secs(1));
        samples.sort();
        rows.push(DownRow {
            heartbeat,
            down_after,
            traffic,
            samples,
        });
    }
    rows
}

// ---------------------------------------------------------------------------------------------
// The report
// ---------------------------------------------------------------------------------------------

fn ms(duration: Duration) -> String {
    format!("{:.0} ms", duration.as_secs_f64() * 1e3)
}

fn report(
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
    let lengths = codec(&mut c);
    let bench = Bench::start();
    let latency = if runs("latency") {
        latency(&bench)
    } else {
        Vec::new()
    };
    let send_wire = send(&mut c, &bench);
    ring(&mut c, &bench);
    let down = if runs("down") {
        sigkill_to_down(&bench)
    } else {
        Vec::new()
    };
    bench.stop();
    c.final_summary();
    report(started, &latency, &send_wire, &lengths, &down);
}
