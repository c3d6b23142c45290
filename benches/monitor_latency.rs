//! Latency of short message-driven processes next to long-running steps, with the executor's
//! monitor on, with it off, and with the same work as plain tokio tasks.
//!
//! Workload, on 2 workers: `HOGS` processes whose every step takes 20 ms (busy CPU, or a thread
//! sleep) back to back, and `SHORT` idle processes receiving `MESSAGES` messages, one every
//! 500 µs, round robin. Each message carries its send instant; the receiving step records the
//! delay. Reports p50/p99/max of those delays per variant as a Markdown table, plus ratios.
//!
//! A third kind of hog makes the spare workers churn: every step is a 100 µs sleep inside
//! `block_in_place` (tokio's own `block_in_place` for the tokio tasks), so the executor hands a
//! worker off and takes it back thousands of times a second; the table's last column says how
//! many spare activations a second that cost procsched.
//!
//! ```text
//! cargo bench --bench monitor_latency          # about 15 s
//! ```
//!
//! Self-contained (no criterion, no shared bench code): percentiles come from sorting the
//! samples.

use procsched::{
    error::InitError,
    state_machine::{Event, Events, Process, ProcessContext, StepOutput},
    BoxError, Message, Payload, Scheduler,
};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const WORKERS: usize = 2;
const HOGS: usize = 2;
const HOG_STEP: Duration = Duration::from_millis(20);
const SHORT: usize = 100;
const MESSAGES: usize = 2_000;
const INTERVAL: Duration = Duration::from_micros(500);

/// Each step of the `BlockInPlace` hog.
const SHORT_BLOCK: Duration = Duration::from_micros(100);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Hog {
    /// Busy CPU for the whole step.
    Cpu,
    /// `thread::sleep` for the whole step (a blocking call).
    Sleep,
    /// A short sleep inside `block_in_place`, step after step: spare workers churn.
    BlockInPlace,
}

impl Hog {
    fn name(self) -> &'static str {
        match self {
            Hog::Cpu => "20 ms CPU steps",
            Hog::Sleep => "20 ms sleeping steps",
            Hog::BlockInPlace => "100 µs block_in_place steps",
        }
    }

    /// One step, on procsched.
    fn run_step(self) {
        match self {
            Hog::Cpu => {
                let start = Instant::now();
                while start.elapsed() < HOG_STEP {
                    std::hint::spin_loop();
                }
            }
            Hog::Sleep => thread::sleep(HOG_STEP),
            Hog::BlockInPlace => procsched::executor::block_in_place(|| thread::sleep(SHORT_BLOCK)),
        }
    }

    /// One step, in a tokio task.
    fn run_tokio_step(self) {
        match self {
            Hog::BlockInPlace => tokio::task::block_in_place(|| thread::sleep(SHORT_BLOCK)),
            other => other.run_step(),
        }
    }
}

/// Delays recorded by the short processes, in nanoseconds.
#[derive(Default)]
struct Samples {
    delays: Mutex<Vec<u64>>,
    count: AtomicUsize,
}

impl Samples {
    fn record(&self, sent: Instant) {
        let delay = sent.elapsed().as_nanos() as u64;
        self.delays.lock().unwrap().push(delay);
        self.count.fetch_add(1, SeqCst);
    }

    fn wait_all(&self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.count.load(SeqCst) < MESSAGES {
            assert!(Instant::now() < deadline, "messages lost");
            thread::sleep(Duration::from_millis(1));
        }
    }
}

struct HogProcess {
    hog: Hog,
    stop: Arc<AtomicBool>,
}

impl Process for HogProcess {
    type Output = ();
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, _: &mut Events, out: &mut StepOutput<()>) -> Result<(), BoxError> {
        if self.stop.load(SeqCst) {
            out.done(());
        } else {
            self.hog.run_step();
            out.continue_();
        }
        Ok(())
    }
}

struct ShortProcess {
    samples: Arc<Samples>,
}

impl Process for ShortProcess {
    type Output = ();
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, events: &mut Events, out: &mut StepOutput<()>) -> Result<(), BoxError> {
        while let Some(event) = events.pop() {
            match event {
                Event::Message(message) => {
                    if let Ok(sent) = message.payload.downcast::<Instant>() {
                        self.samples.record(sent);
                    }
                }
                Event::Cancel { .. } => {
                    out.done(());
                    return Ok(());
                }
                _ => {}
            }
        }
        out.idle();
        Ok(())
    }
}

/// Sends `MESSAGES` messages, one every `INTERVAL`, round robin over `SHORT` receivers.
fn pace(mut send: impl FnMut(usize, Instant)) {
    let start = Instant::now();
    for i in 0..MESSAGES {
        let due = start + INTERVAL * i as u32;
        while Instant::now() < due {
            let left = due - Instant::now();
            if left > Duration::from_micros(200) {
                thread::sleep(left - Duration::from_micros(100));
            } else {
                std::hint::spin_loop();
            }
        }
        send(i % SHORT, Instant::now());
    }
}

/// The short processes' delays, and spare activations per second.
fn procsched_run(hog: Hog, monitor: bool) -> (Vec<u64>, f64) {
    let sched = Scheduler::builder()
        .workers(WORKERS)
        .monitor(monitor)
        .build()
        .expect("scheduler starts");
    let stop = Arc::new(AtomicBool::new(false));
    let samples = Arc::new(Samples::default());
    let hogs: Vec<_> = (0..HOGS)
        .map(|_| {
            let process = HogProcess {
                hog,
                stop: stop.clone(),
            };
            sched.spawn(process, "run", Payload::empty()).unwrap()
        })
        .collect();
    let short: Vec<_> = (0..SHORT)
        .map(|_| {
            let process = ShortProcess {
                samples: samples.clone(),
            };
            sched.spawn(process, "run", Payload::empty()).unwrap()
        })
        .collect();
    let pids: Vec<_> = short.iter().map(|h| h.pid()).collect();
    let (started, before) = (Instant::now(), sched.metrics().executor.monitor());
    pace(|to, sent| {
        sched
            .send(pids[to], Message::new("ping", Payload::new(sent)))
            .expect("the short process is alive");
    });
    samples.wait_all();
    let after = sched.metrics().executor.monitor();
    let activations =
        (after.spares_started - before.spares_started) as f64 / started.elapsed().as_secs_f64();
    stop.store(true, SeqCst);
    for handle in hogs {
        let _ = sched.block_on(handle);
    }
    sched.shutdown(Duration::from_secs(5));
    drop(short);
    let delays = std::mem::take(&mut *samples.delays.lock().unwrap());
    (delays, activations)
}

fn tokio_run(hog: Hog) -> Vec<u64> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("tokio starts");
    let stop = Arc::new(AtomicBool::new(false));
    let samples = Arc::new(Samples::default());
    let hogs: Vec<_> = (0..HOGS)
        .map(|_| {
            let stop = stop.clone();
            runtime.spawn(async move {
                while !stop.load(SeqCst) {
                    hog.run_tokio_step();
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    let mailboxes: Vec<_> = (0..SHORT)
        .map(|_| {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
            let samples = samples.clone();
            runtime.spawn(async move {
                while let Some(sent) = rx.recv().await {
                    samples.record(sent);
                }
            });
            tx
        })
        .collect();
    pace(|to, sent| mailboxes[to].send(sent).expect("the task is alive"));
    samples.wait_all();
    stop.store(true, SeqCst);
    drop(mailboxes);
    for handle in hogs {
        let _ = runtime.block_on(handle);
    }
    let delays = std::mem::take(&mut *samples.delays.lock().unwrap());
    delays
}

#[derive(Clone, Copy)]
struct Summary {
    p50: u64,
    p99: u64,
    max: u64,
}

fn summarize(mut delays: Vec<u64>) -> Summary {
    assert_eq!(delays.len(), MESSAGES, "every message delivered once");
    delays.sort_unstable();
    let at = |q: f64| delays[((delays.len() - 1) as f64 * q).round() as usize];
    Summary {
        p50: at(0.50),
        p99: at(0.99),
        max: *delays.last().unwrap(),
    }
}

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is accepted and ignored.
    println!(
        "monitor latency: {WORKERS} workers, {HOGS} hogs, {SHORT} short processes, \
         {MESSAGES} messages every {} µs\n",
        INTERVAL.as_micros()
    );
    let mut table = String::from(
        "| hogs | variant | p50 | p99 | max | spare activations/s |\n|---|---|---:|---:|---:|---:|\n",
    );
    let mut ratios = String::from(
        "\n| hogs | p99 off / on | p99 tokio / on | p50 off / on | p50 tokio / on |\n|---|---:|---:|---:|---:|\n",
    );
    for hog in [Hog::Cpu, Hog::Sleep, Hog::BlockInPlace] {
        let (on, on_spares) = procsched_run(hog, true);
        let (off, off_spares) = procsched_run(hog, false);
        let (on, off) = (summarize(on), summarize(off));
        let tokio = summarize(tokio_run(hog));
        for (name, s, spares) in [
            ("procsched, monitor on", on, format!("{on_spares:.0}")),
            ("procsched, monitor off", off, format!("{off_spares:.0}")),
            ("tokio tasks", tokio, "–".to_owned()),
        ] {
            table.push_str(&format!(
                "| {} | {name} | {} | {} | {} | {spares} |\n",
                hog.name(),
                ms(s.p50),
                ms(s.p99),
                ms(s.max)
            ));
        }
        let ratio = |a: u64, b: u64| a as f64 / b.max(1) as f64;
        ratios.push_str(&format!(
            "| {} | {:.1}x | {:.1}x | {:.1}x | {:.1}x |\n",
            hog.name(),
            ratio(off.p99, on.p99),
            ratio(tokio.p99, on.p99),
            ratio(off.p50, on.p50),
            ratio(tokio.p50, on.p50),
        ));
    }
    println!("{table}{ratios}");
}
