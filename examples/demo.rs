//! The procsched demo, from a tokio user's chair: tens of thousands of checkout processes.
//!
//! Each order is an `async fn` process. It loads its cart from an in-process store (an async
//! handler: a tokio lock and a timer standing in for a database round trip), prices it (an
//! inline handler), asks the payment-gateway process for authorisation by message and waits
//! (Idle) for the reply, and writes an audit line (a blocking handler doing file I/O). A few
//! carts are invalid (the order fails), a few handlers panic (reported, contained), one order
//! waits for a payment that never comes and is terminated. It ends with `shutdown_async`.
//!
//! While it runs it prints live progress: processes by state, steps and messages per second,
//! steals and long polls (from `Scheduler::metrics`). Then a summary, the metrics, and the same workload as plain tokio tasks, side by side
//! (time and peak memory, each variant measured in a child process of its own).
//!
//! `cargo run --release --example demo -- --help`

use clap::Parser;
use procsched::prelude::*;
use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::RwLock;

#[derive(Parser, Debug, Clone)]
#[command(about = "procsched demo: checkout processes vs the same work as plain tokio tasks")]
struct Args {
    /// Orders (processes) to run.
    #[arg(long, default_value_t = 50_000)]
    processes: u64,
    /// Worker threads (procsched workers; tokio gets the same number).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Simulated database latency per cart load, in microseconds.
    #[arg(long, default_value_t = 2_000)]
    db_latency_us: u64,
    /// One order in this many has an invalid cart (fails).
    #[arg(long, default_value_t = 100)]
    invalid_every: u64,
    /// One order in this many hits a panicking audit handler (reported, contained).
    #[arg(long, default_value_t = 1_000)]
    panic_every: u64,
    /// Progress interval in milliseconds.
    #[arg(long, default_value_t = 100)]
    progress_ms: u64,
    /// Skip the plain-tokio comparison.
    #[arg(long)]
    no_compare: bool,
    /// Internal: run one variant and print its measurements (used for the side-by-side run).
    #[arg(long, hide = true)]
    variant: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// The domain: a store, commands, handlers
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct Cart {
    items: Vec<u64>,
}

type Store = Arc<RwLock<HashMap<u64, Cart>>>;

struct LoadCart(u64);
struct Price(Vec<u64>);
struct Audit(u64, u64);
procsched::command!(LoadCart => Cart, Price => u64, Audit => ());

fn build_store(orders: u64, invalid_every: u64) -> Store {
    let carts = (0..orders)
        .map(|id| {
            let items = if id % invalid_every == invalid_every - 1 {
                Vec::new() // invalid: an empty cart
            } else {
                (0..1 + id % 5)
                    .map(|i| 100 + (id * 7 + i * 13) % 900)
                    .collect()
            };
            (id, Cart { items })
        })
        .collect();
    Arc::new(RwLock::new(carts))
}

async fn load_cart(store: &Store, id: u64, latency: Duration) -> Result<Cart, BoxError> {
    tokio::time::sleep(latency).await; // the database round trip
    let cart = store.read().await.get(&id).cloned();
    cart.ok_or_else(|| format!("no cart {id}").into())
}

fn price(items: &[u64]) -> Result<u64, BoxError> {
    if items.is_empty() {
        return Err("empty cart".into());
    }
    Ok(items.iter().sum::<u64>() * 108 / 100) // with tax
}

fn audit(log: &std::sync::Mutex<std::fs::File>, id: u64, cents: u64, panic_every: u64) {
    if id % panic_every == panic_every / 2 {
        panic!("audit log rejected order {id}");
    }
    let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
    let _ = writeln!(log, "order {id} paid {cents}");
}

fn audit_file(tag: &str) -> std::io::Result<std::sync::Mutex<std::fs::File>> {
    let path =
        std::env::temp_dir().join(format!("procsched-demo-{tag}-{}.log", std::process::id()));
    Ok(std::sync::Mutex::new(std::fs::File::create(path)?))
}

/// What each variant reports.
#[derive(Debug, Default)]
struct Outcome {
    paid: u64,
    failed: u64,
    panicked: u64,
    terminated: u64,
    revenue: u64,
    elapsed: Duration,
}

// ---------------------------------------------------------------------------------------------
// procsched
// ---------------------------------------------------------------------------------------------

async fn run_procsched(args: &Args, progress: bool) -> Result<(Outcome, String), BoxError> {
    let store = build_store(args.processes, args.invalid_every);
    let log = Arc::new(audit_file("procsched")?);
    let latency = Duration::from_micros(args.db_latency_us);
    let panic_every = args.panic_every;
    let loads = store.clone();
    let sched = Arc::new(
        Scheduler::builder()
            .workers(args.workers)
            .async_handler(move |LoadCart(id): LoadCart| {
                let store = loads.clone();
                async move { load_cart(&store, id, latency).await }
            })
            .inline_handler(|Price(items): Price| price(&items))
            .blocking_handler(move |Audit(id, cents): Audit| {
                audit(&log, id, cents, panic_every);
                Ok::<_, BoxError>(())
            })
            .build()?,
    );
    let started = Instant::now();

    // The payment gateway: one long-lived process that answers authorisation requests.
    let gateway = sched.spawn_fn(move |cx: ProcessCx| async move {
        let mut authorised = 0u64;
        loop {
            match cx.recv_message().await {
                Ok(request) => {
                    let from = request
                        .from
                        .ok_or("an authorisation request without a sender")?;
                    let cents: u64 = request.payload.take()?;
                    authorised += 1;
                    let reply = Message::new("authorised", Payload::new(cents > 0));
                    let _ = cx.scheduler().send(from, reply); // the order may be gone
                }
                Err(RecvError::Cancelled(_)) => return Ok::<_, BoxError>(authorised),
                Err(other) => return Err(other.into()),
            }
        }
    })?;
    let gateway_pid = gateway.pid();

    // The orders. Order 0 never asks the gateway: it waits for a payment that never comes.
    let mut orders = tokio::task::JoinSet::new();
    let mut pids = Vec::with_capacity(args.processes as usize);
    for id in 0..args.processes {
        let order = sched.spawn_fn(move |cx: ProcessCx<bool>| async move {
            let cart = cx.call(LoadCart(id)).await?;
            let cents = cx.call(Price(cart.items)).await?;
            if id != 0 {
                let request = Message::new("authorise", Payload::new(cents)).with_from(cx.pid());
                cx.scheduler().send(gateway_pid, request)?;
            }
            let authorised = cx.recv().await?; // Idle until the gateway answers
            if !authorised {
                return Err("payment declined".into());
            }
            cx.call(Audit(id, cents)).await?;
            Ok::<_, BoxError>(cents)
        })?;
        pids.push(order.pid());
        orders.spawn(order);
    }

    // Live progress while the orders run; order 0 is terminated once everything else is done.
    let reporter = progress.then(|| {
        let sched = sched.clone();
        let interval = Duration::from_millis(args.progress_ms);
        tokio::spawn(async move {
            let first = sched.metrics();
            let mut last = (Instant::now(), first.steps, first.messages.delivered);
            loop {
                tokio::time::sleep(interval).await;
                let m = sched.metrics();
                let now = (Instant::now(), m.steps, m.messages.delivered);
                let seconds = now.0.duration_since(last.0).as_secs_f64();
                let executor = m.executor.total();
                println!(
                    "{:>5.1}s  ready {:>6}  running {:>2}  blocked {:>6}  idle {:>6}  finished {:>6} \
                     | {:>8.0} steps/s {:>8.0} msgs/s | steals {:>5}  long polls {}",
                    started.elapsed().as_secs_f64(),
                    m.processes.ready,
                    m.processes.running,
                    m.processes.blocked,
                    m.processes.idle,
                    m.finished.done + m.finished.failed + m.finished.panicked + m.finished.terminated,
                    (now.1 - last.1) as f64 / seconds,
                    (now.2 - last.2) as f64 / seconds,
                    executor.steal_ops,
                    m.executor.monitor().long_polls,
                );
                last = now;
            }
        })
    });

    let mut outcome = Outcome::default();
    let terminate_when = args.processes.saturating_sub(1);
    let mut finished = 0u64;
    while let Some(joined) = orders.join_next().await {
        finished += 1;
        match joined? {
            Ok(cents) => {
                outcome.paid += 1;
                outcome.revenue += cents;
            }
            Err(error) if error.is_terminated() => outcome.terminated += 1,
            Err(error) if error.is_failed() => {
                let source = error
                    .into_failure()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                if source.contains("panicked") {
                    outcome.panicked += 1;
                } else {
                    outcome.failed += 1;
                }
            }
            Err(error) => return Err(error.into()),
        }
        if finished == terminate_when {
            sched.terminate(pids[0])?; // the order still waiting for its payment
        }
    }
    let report = sched.shutdown_async(Duration::from_secs(2)).await;
    let authorised = gateway.await?;
    outcome.elapsed = started.elapsed();
    if let Some(reporter) = reporter {
        reporter.abort();
    }
    let m = sched.metrics();
    let executor = m.executor.total();
    let summary = format!(
        "gateway authorised {authorised}; shutdown {report:?}\n\
         metrics: {} spawned, {} steps; finished {} done / {} failed / {} panicked / {} terminated; \
         {} messages delivered; yields {} inline / {} async / {} blocking; {} handler errors, {} \
         handler panics; mailbox high-water {}; longest sampled step {:?}\n\
         executor: {} polls, {} stolen in {} steals, {} parks; {} long polls",
        m.spawned,
        m.steps,
        m.finished.done,
        m.finished.failed,
        m.finished.panicked,
        m.finished.terminated,
        m.messages.delivered,
        m.yields.inline,
        m.yields.asynchronous,
        m.yields.blocking,
        m.handler_errors,
        m.handler_panics,
        m.mailbox_high_water,
        m.longest_step.map(|s| (s.pid, s.duration)),
        executor.polls,
        executor.stolen,
        executor.steal_ops,
        executor.parks,
        m.executor.monitor().long_polls,
    );
    Ok((outcome, summary))
}

// ---------------------------------------------------------------------------------------------
// The same work as plain tokio tasks
// ---------------------------------------------------------------------------------------------

async fn run_tokio(args: &Args) -> Result<Outcome, BoxError> {
    let store = build_store(args.processes, args.invalid_every);
    let log = Arc::new(audit_file("tokio")?);
    let latency = Duration::from_micros(args.db_latency_us);
    let started = Instant::now();
    // The gateway: a task with an mpsc mailbox; requests carry a oneshot for the reply.
    let (to_gateway, mut requests) =
        tokio::sync::mpsc::unbounded_channel::<(u64, tokio::sync::oneshot::Sender<bool>)>();
    let gateway = tokio::spawn(async move {
        let mut authorised = 0u64;
        while let Some((cents, reply)) = requests.recv().await {
            authorised += 1;
            let _ = reply.send(cents > 0);
        }
        authorised
    });
    let mut orders = tokio::task::JoinSet::new();
    let mut aborts = Vec::new();
    for id in 0..args.processes {
        let (store, log, to_gateway) = (store.clone(), log.clone(), to_gateway.clone());
        let panic_every = args.panic_every;
        let abort = orders.spawn(async move {
            let cart = load_cart(&store, id, latency).await?;
            let cents = price(&cart.items)?;
            let (reply_tx, reply_rx) = tokio::sync::oneshot::channel();
            if id != 0 {
                to_gateway
                    .send((cents, reply_tx))
                    .map_err(|_| "gateway gone")?;
            } else {
                std::mem::forget(reply_tx); // order 0 waits for a payment that never comes
            }
            if !reply_rx.await? {
                return Err::<u64, BoxError>("payment declined".into());
            }
            tokio::task::spawn_blocking(move || audit(&log, id, cents, panic_every))
                .await
                .map_err(|e| format!("audit panicked: {e}"))?;
            Ok(cents)
        });
        aborts.push(abort);
    }
    drop(to_gateway);
    let mut outcome = Outcome::default();
    let mut finished = 0u64;
    while let Some(joined) = orders.join_next().await {
        finished += 1;
        match joined {
            Ok(Ok(cents)) => {
                outcome.paid += 1;
                outcome.revenue += cents;
            }
            Ok(Err(error)) if error.to_string().contains("panicked") => outcome.panicked += 1,
            Ok(Err(_)) => outcome.failed += 1,
            Err(error) if error.is_cancelled() => outcome.terminated += 1,
            Err(error) => return Err(error.into()),
        }
        if finished == args.processes.saturating_sub(1) {
            aborts[0].abort();
        }
    }
    gateway.abort();
    outcome.elapsed = started.elapsed();
    Ok(outcome)
}

// ---------------------------------------------------------------------------------------------
// main: run, summarise, compare
// ---------------------------------------------------------------------------------------------

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmHWM:"))
                .and_then(|line| line.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn runtime(workers: usize) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
}

/// Runs one variant in a child process (so its peak memory is its own) and parses its line.
fn measure_in_child(args: &Args, variant: &str) -> Option<(f64, u64, String)> {
    let exe = std::env::current_exe().ok()?;
    let output = std::process::Command::new(exe)
        .args([
            "--variant",
            variant,
            "--processes",
            &args.processes.to_string(),
            "--workers",
            &args.workers.to_string(),
            "--db-latency-us",
            &args.db_latency_us.to_string(),
            "--invalid-every",
            &args.invalid_every.to_string(),
            "--panic-every",
            &args.panic_every.to_string(),
        ])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let line = String::from_utf8_lossy(&output.stdout);
    let line = line.lines().find(|l| l.starts_with("variant "))?;
    let fields: Vec<&str> = line.split_whitespace().collect();
    Some((
        fields.get(2)?.parse().ok()?,
        fields.get(3)?.parse().ok()?,
        fields.get(4..)?.join(" "),
    ))
}

fn main() -> Result<(), BoxError> {
    let args = Args::parse();
    // The demo's panicking handlers are expected: one line each, no backtrace.
    std::panic::set_hook(Box::new(|info| eprintln!("(contained) {info}")));
    if let Some(variant) = &args.variant {
        // A child of the side-by-side run: one variant, one line of measurements.
        let rt = runtime(args.workers)?;
        let outcome = match variant.as_str() {
            "procsched" => rt.block_on(run_procsched(&args, false))?.0,
            _ => rt.block_on(run_tokio(&args))?,
        };
        drop(rt);
        println!(
            "variant {variant} {:.3} {} paid={} failed={} panicked={} terminated={}",
            outcome.elapsed.as_secs_f64(),
            peak_rss_kib(),
            outcome.paid,
            outcome.failed,
            outcome.panicked,
            outcome.terminated
        );
        return Ok(());
    }

    println!(
        "procsched demo: {} checkout processes on {} workers (db latency {} µs)\n",
        args.processes, args.workers, args.db_latency_us
    );
    let rt = runtime(args.workers)?;
    let (outcome, summary) = rt.block_on(run_procsched(&args, true))?;
    drop(rt);
    println!("\n| outcome | orders |\n|---|---:|");
    println!("| paid | {} |", outcome.paid);
    println!("| failed (invalid cart) | {} |", outcome.failed);
    println!(
        "| failed (audit handler panicked, contained) | {} |",
        outcome.panicked
    );
    println!("| terminated | {} |", outcome.terminated);
    println!(
        "\nrevenue {} cents in {:.2} s\n{summary}",
        outcome.revenue,
        outcome.elapsed.as_secs_f64()
    );

    if !args.no_compare {
        println!("\nThe same workload, each variant in a child process of its own:\n");
        println!("| variant | time | peak RSS | outcome |\n|---|---:|---:|---|");
        let mut rows = Vec::new();
        for variant in ["procsched", "tokio"] {
            match measure_in_child(&args, variant) {
                Some((seconds, kib, detail)) => {
                    println!(
                        "| {variant} | {seconds:.2} s | {:.1} MiB | {detail} |",
                        kib as f64 / 1024.0
                    );
                    rows.push((seconds, kib));
                }
                None => println!("| {variant} | (failed to run) | | |"),
            }
        }
        if let [(p_time, p_kib), (t_time, t_kib)] = rows[..] {
            println!(
                "\nprocsched / tokio: time {:.2}×, peak memory {:.2}×",
                p_time / t_time,
                p_kib as f64 / t_kib as f64
            );
        }
    }
    Ok(())
}
