//! What a send costs as a function of the message's size: `send_to_blocked`'s pattern (a plain
//! thread sends batches of 10 000 messages to one receiver that is blocked on a call that never
//! completes) on tokio-native with messages of 16, 48 and 80 bytes, and on procsched (whose
//! `Message` is 80 bytes: sender, topic, a payload with 32 bytes inline), in one run,
//! interleaved round by round so that the machine's slow phases hit every variant alike.
//!
//! ```text
//! cargo run --release -p procsched-benches --example send_size [VARIANT [ROUNDS]]
//! ```
//!
//! Prints the median and quartiles of ns/send per variant over ROUNDS (default 60) batches, and
//! each median's ratio to tokio-native's at 16 bytes (the bench's peer). A batch is timed from
//! its first send to its last; between batches the receiver reports its count, which must equal
//! everything sent (nothing lost), so each batch starts against a drained, waiting receiver.

use procsched::prelude::*;
use procsched_benches::blocked::{never, spawn_native_receiver, Blocked, BlockedMsg};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;

const BATCH: u64 = 10_000;
const WORKERS: usize = 2;
const ACK_TIMEOUT: Duration = Duration::from_secs(30);

/// A message of `8 * (W + 1)` bytes: the count in the first word, `W - 1` words of ballast, and
/// the enum's tag.
type Msg<const W: usize> = BlockedMsg<[u64; W]>;

/// The bench's tokio-native receiver for `Msg<W>`, and the sender the bench thread uses.
struct NativeReceiver<const W: usize> {
    to: UnboundedSender<Msg<W>>,
    acks: mpsc::Receiver<u64>,
    task: tokio::task::JoinHandle<u64>,
    sent: u64,
}

impl<const W: usize> NativeReceiver<W> {
    fn start(runtime: &tokio::runtime::Runtime) -> Self {
        let (ack, acks) = mpsc::channel();
        let (to, task) = spawn_native_receiver::<[u64; W]>(runtime.handle(), ack);
        NativeReceiver {
            to,
            acks,
            task,
            sent: 0,
        }
    }

    /// One timed batch, then the flush check; ns per send.
    fn batch(&mut self) -> f64 {
        let start = Instant::now();
        for i in 0..BATCH {
            let mut words = [0u64; W];
            words[0] = i;
            if self.to.send(Msg::Count(words)).is_err() {
                panic!("the receiver has finished");
            }
        }
        let elapsed = start.elapsed();
        self.sent += BATCH;
        let _ = self.to.send(Msg::Flush);
        let seen = self.acks.recv_timeout(ACK_TIMEOUT).expect("no flush ack");
        assert_eq!(seen, self.sent, "messages lost");
        elapsed.as_nanos() as f64 / BATCH as f64
    }

    fn stop(self, runtime: &tokio::runtime::Runtime) {
        let _ = self.to.send(Msg::Stop);
        let received = runtime.block_on(self.task).expect("receiver panicked");
        assert_eq!(received, self.sent);
    }
}

struct ProcschedReceiver {
    pid: Pid,
    handle: ProcessHandle<Payload>,
    acks: mpsc::Receiver<u64>,
    sent: u64,
}

impl ProcschedReceiver {
    fn start(scheduler: &Scheduler) -> Self {
        let (ack, acks) = mpsc::channel();
        let handle = scheduler
            .spawn(Blocked::new(ack), "run", Payload::empty())
            .expect("spawn");
        ProcschedReceiver {
            pid: handle.pid(),
            handle,
            acks,
            sent: 0,
        }
    }

    fn batch(&mut self, scheduler: &Scheduler) -> f64 {
        let start = Instant::now();
        for i in 0..BATCH {
            scheduler
                .send(self.pid, Message::new("m", Payload::new(i)))
                .expect("send");
        }
        let elapsed = start.elapsed();
        self.sent += BATCH;
        scheduler
            .send(self.pid, Message::new("flush", Payload::empty()))
            .expect("send");
        let seen = self.acks.recv_timeout(ACK_TIMEOUT).expect("no flush ack");
        assert_eq!(seen, self.sent, "messages lost");
        elapsed.as_nanos() as f64 / BATCH as f64
    }

    fn stop(self, scheduler: &Scheduler) {
        scheduler
            .send(self.pid, Message::new("stop", Payload::empty()))
            .expect("send");
        let received = scheduler.block_on(self.handle).expect("receiver failed");
        assert_eq!(received.downcast::<u64>().ok(), Some(self.sent));
    }
}

/// Median and quartiles of `samples`.
fn quartiles(samples: &mut [f64]) -> (f64, f64, f64) {
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    (at(0.25), at(0.5), at(0.75))
}

/// The variants, by the name the command line takes.
const VARIANTS: [&str; 4] = ["native16", "native48", "native80", "procsched"];

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "all".into());
    let rounds: usize = args
        .next()
        .map_or(60, |n| n.parse().expect("ROUNDS must be a number"));
    let chosen: Vec<usize> = match VARIANTS.iter().position(|v| *v == which) {
        Some(k) => vec![k],
        None if which == "all" => (0..VARIANTS.len()).collect(),
        None => panic!("VARIANT must be one of {VARIANTS:?} or `all`"),
    };
    assert_eq!(std::mem::size_of::<Msg<1>>(), 16);
    assert_eq!(std::mem::size_of::<Msg<5>>(), 48);
    assert_eq!(std::mem::size_of::<Msg<9>>(), 80);
    assert_eq!(std::mem::size_of::<Message>(), 80);
    // Only the runtimes a chosen variant needs: an idle runtime's spinning workers would take
    // the CPU from the measured one on a small machine.
    let wants_native = chosen.iter().any(|&k| k < 3);
    let wants_procsched = chosen.contains(&3);
    let tokio_runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .enable_all()
            .build()
            .expect("tokio runtime")
    };
    // The native receivers' runtime, and the one procsched's async handler (`never`) runs on.
    let runtime = wants_native.then(tokio_runtime);
    let io = wants_procsched.then(tokio_runtime);
    let scheduler = io.as_ref().map(|io| {
        Scheduler::builder()
            .workers(WORKERS)
            .tokio_handle(io.handle().clone())
            .async_handler(never)
            .build()
            .expect("scheduler")
    });

    let mut native16 = runtime.as_ref().map(NativeReceiver::<1>::start);
    let mut native48 = runtime.as_ref().map(NativeReceiver::<5>::start);
    let mut native80 = runtime.as_ref().map(NativeReceiver::<9>::start);
    let mut ours = scheduler.as_ref().map(ProcschedReceiver::start);

    let mut samples = [const { Vec::new() }; 4];
    for round in 0..rounds {
        // Rotate the order, so that no variant always follows the same one.
        for k in 0..chosen.len() {
            let variant = chosen[(round + k) % chosen.len()];
            let ns = match variant {
                0 => native16.as_mut().expect("started").batch(),
                1 => native48.as_mut().expect("started").batch(),
                2 => native80.as_mut().expect("started").batch(),
                _ => ours
                    .as_mut()
                    .expect("started")
                    .batch(scheduler.as_ref().expect("built")),
            };
            samples[variant].push(ns);
        }
    }
    if let Some(runtime) = &runtime {
        native16.take().expect("started").stop(runtime);
        native48.take().expect("started").stop(runtime);
        native80.take().expect("started").stop(runtime);
    }
    if let Some(scheduler) = &scheduler {
        ours.take().expect("started").stop(scheduler);
    }

    let names = [
        "tokio-native, 16-byte message",
        "tokio-native, 48-byte message",
        "tokio-native, 80-byte message",
        "procsched, 80-byte Message",
    ];
    println!("{rounds} batches of {BATCH} sends each; ns/send: q1 / median / q3");
    for &k in &chosen {
        let (q1, median, q3) = quartiles(&mut samples[k]);
        println!("{:32} {q1:6.1} / {median:6.1} / {q3:6.1}", names[k]);
    }
    drop(scheduler);
    if let Some(io) = io {
        io.shutdown_timeout(Duration::from_secs(5));
    }
}
