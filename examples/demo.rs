//! The procsched demo, from a tokio user's chair.
//!
//! 1. **Checkout**: tens of thousands of order processes (`async fn` bodies) — an async
//!    handler for the database, an inline one for pricing, a typed ask to a payment-gateway
//!    process, a blocking handler for the audit log. A few carts are invalid, a few audit
//!    calls panic (contained: the call fails, and so does the order that made it), one order
//!    waits for an authorisation that never comes and is terminated. Live progress on one
//!    line, then a summary with every figure labelled, then the same workload as plain tokio
//!    tasks (time and peak memory, each variant in a child process of its own).
//! 2. **Blocking steps**: a few processes whose steps block their worker (a synchronous call,
//!    not declared with `block_in_place`) beside thousands of short ones; the short ones'
//!    latency on procsched (whose monitor hands a stuck worker's queue to a spare thread) and
//!    on a plain tokio runtime with as many workers.
//!
//! The audit panics are expected: a panic hook counts them (and keeps the first) instead of
//! printing each. No tracing subscriber is installed, so the scheduler's own `tracing` events
//! (a warning per long poll, for one) stay silent.
//!
//! `cargo run --release --example demo -- --help`

#[path = "demo/blocking.rs"]
mod blocking;
#[path = "demo/checkout.rs"]
mod checkout;

use clap::Parser;
use procsched::BoxError;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

#[derive(Parser, Debug, Clone)]
#[command(about = "procsched demo: checkout processes, and steps that block, vs plain tokio")]
struct Args {
    /// Orders (processes) to run.
    #[arg(long, default_value_t = 50_000)]
    processes: u64,
    /// Worker threads (procsched workers; tokio gets the same number).
    #[arg(long, default_value_t = 2, value_parser = at_least_one())]
    workers: usize,
    /// Simulated database latency per cart load, in microseconds.
    #[arg(long, default_value_t = 2_000)]
    db_latency_us: u64,
    /// One order in this many has an invalid cart (fails).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    invalid_every: u64,
    /// One order in this many hits a panicking audit handler (contained; the order fails).
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..))]
    panic_every: u64,
    /// Progress interval in milliseconds.
    #[arg(long, default_value_t = 100)]
    progress_ms: u64,
    /// Skip the plain-tokio comparison of the checkout workload.
    #[arg(long)]
    no_compare: bool,
    /// Skip the blocking-steps phase.
    #[arg(long)]
    no_blocking: bool,
    /// Blocking phase: processes whose steps block their worker.
    #[arg(long, default_value_t = 4)]
    blockers: usize,
    /// Blocking phase: how long each blocking step holds its thread, in milliseconds.
    #[arg(long, default_value_t = 50)]
    block_ms: u64,
    /// Blocking phase: short processes receiving timestamped pings.
    #[arg(long, default_value_t = 5_000, value_parser = at_least_one())]
    short_processes: usize,
    /// Blocking phase: how long it runs on each runtime, in milliseconds.
    #[arg(long, default_value_t = 1_500)]
    phase_ms: u64,
    /// Blocking phase: pings sent per second (round-robin over the short processes).
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..))]
    ping_rate: u64,
    /// Blocking phase: most spare threads procsched's monitor may run at once (its
    /// `max_spare_workers`; default: one per blocker, at least one per worker).
    #[arg(long)]
    max_spares: Option<usize>,
    /// Internal: run one checkout variant and print its measurements (the side-by-side run).
    #[arg(long, hide = true)]
    variant: Option<String>,
}

/// A `usize` flag that must be at least 1.
fn at_least_one() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(1..)
}

// ---------------------------------------------------------------------------------------------
// Contained panics: counted, the first one kept, none printed
// ---------------------------------------------------------------------------------------------

static PANICS: AtomicU64 = AtomicU64::new(0);
static FIRST_PANIC: OnceLock<String> = OnceLock::new();

/// Replaces the default hook (which prints every panic) by one that counts them.
fn count_panics() {
    std::panic::set_hook(Box::new(|info| {
        PANICS.fetch_add(1, Ordering::Relaxed);
        if FIRST_PANIC.get().is_none() {
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(a non-string panic payload)".into());
            let at = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            let thread = std::thread::current();
            let thread = thread.name().unwrap_or("unnamed");
            let _ = FIRST_PANIC.set(format!("thread '{thread}' panicked{at}: {message}"));
        }
    }));
}

/// What the counting hook saw so far, in one line.
fn panic_summary() -> String {
    match (PANICS.load(Ordering::Relaxed), FIRST_PANIC.get()) {
        (0, _) => "panics caught: none".into(),
        (n, first) => format!(
            "panics caught: {n}, counted by the demo's panic hook, not printed; the first:\n    {}",
            first.map_or("?", String::as_str)
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// Output helpers
// ---------------------------------------------------------------------------------------------

/// `1234567` → `"1,234,567"`.
fn n(value: impl Into<u64>) -> String {
    let digits = value.into().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// A latency, with as many digits as it deserves: `0.04 ms`, `529 ms`, `1.35 s`.
fn latency(duration: Option<Duration>) -> String {
    match duration.map(|d| d.as_secs_f64() * 1e3) {
        None => "-".into(),
        Some(ms) if ms < 0.1 => format!("{:.1} µs", ms * 1e3),
        Some(ms) if ms < 10.0 => format!("{ms:.2} ms"),
        Some(ms) if ms < 1_000.0 => format!("{ms:.0} ms"),
        Some(ms) => format!("{:.2} s", ms / 1e3),
    }
}

/// The monitor's long-poll threshold (the demo keeps the default).
fn threshold_ms() -> u128 {
    procsched::config::DEFAULT_LONG_POLL_THRESHOLD.as_millis()
}

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

// ---------------------------------------------------------------------------------------------
// Phase 1: checkout
// ---------------------------------------------------------------------------------------------

fn print_checkout(args: &Args, outcome: &checkout::Outcome, report: &checkout::Report) {
    let m = &report.metrics;
    let executor = m.executor.total();
    let monitor = m.executor.monitor();
    println!(
        "\nCheckout: {} orders in {:.2} s (wall time, first spawn to shutdown)",
        n(args.processes),
        outcome.elapsed.as_secs_f64()
    );
    println!(
        "  {:<44}{:>8}   revenue {}.{:02} (prices incl. tax)",
        "paid",
        n(outcome.paid),
        n(outcome.revenue / 100),
        outcome.revenue % 100
    );
    let rows = [
        ("failed: invalid cart (its own error)", outcome.failed),
        ("failed: its audit handler panicked", outcome.audit_panicked),
        (
            "terminated (order 0: no authorisation came)",
            outcome.terminated,
        ),
        ("order processes that panicked", outcome.process_panicked),
    ];
    for (what, count) in rows {
        println!("  {what:<44}{:>8}", n(count));
    }
    println!(
        "  A handler's panic is contained: the call that ran it fails (CommandError::is_panicked, \
         in"
    );
    println!(
        "  the order's error chain) and so does the order; the order's own process did not panic."
    );
    if let Some(first) = &outcome.first_handler_panic {
        println!("  e.g. {first}");
    }
    println!("  {}", panic_summary());
    println!("Scheduler::metrics() after shutdown:");
    println!(
        "  processes by outcome: {} done · {} failed (the orders above) · {} panicked · {} \
         terminated",
        n(m.finished.done),
        n(m.finished.failed),
        n(m.finished.panicked),
        n(m.finished.terminated)
    );
    println!(
        "  steps run: {} (a step: a process runs until it waits) · longest sampled step: {}",
        n(m.steps),
        latency(m.longest_step.map(|s| s.duration)),
    );
    println!(
        "  calls by handler kind: {} inline · {} async · {} blocking; {} failed, {} panicked",
        n(m.yields.inline),
        n(m.yields.asynchronous),
        n(m.yields.blocking),
        n(m.handler_errors),
        n(m.handler_panics)
    );
    println!(
        "  gateway asks answered: {} · mailbox high-water (most messages queued in one mailbox): {}",
        n(report.gateway_answered),
        n(m.mailbox_high_water as u64)
    );
    println!(
        "  executor: {} task polls · {} tasks stolen by idle workers in {} steals · {} worker sleeps",
        n(executor.polls),
        n(executor.stolen),
        n(executor.steal_ops),
        n(executor.parks)
    );
    println!(
        "  monitor: long polls (polls over its {} ms threshold): {} · spare-worker activations: {}",
        threshold_ms(),
        n(monitor.long_polls),
        n(monitor.spares_started),
    );
    println!(
        "  shutdown: {} process ended gracefully (the gateway) · {} forced · {} abandoned",
        report.shutdown.graceful, report.shutdown.forced, report.shutdown.abandoned
    );
}

/// Runs one checkout variant in a child process (so its peak memory is its own) and parses
/// its line: `variant NAME SECONDS PEAK_KIB paid failed audit_panicked terminated`.
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
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().find(|l| l.starts_with("variant "))?;
    let fields: Vec<&str> = line.split_whitespace().collect();
    let count = |i: usize| -> Option<String> { Some(n(fields.get(i)?.parse::<u64>().ok()?)) };
    Some((
        fields.get(2)?.parse().ok()?,
        fields.get(3)?.parse().ok()?,
        format!(
            "{} / {} / {} / {}",
            count(4)?,
            count(5)?,
            count(6)?,
            count(7)?
        ),
    ))
}

fn compare_checkout(args: &Args) {
    println!("\nThe same checkout workload, each variant in a child process of its own:");
    println!(
        "| variant   | wall time | peak RSS   | orders paid / failed / audit panicked / terminated |"
    );
    let mut rows = Vec::new();
    for variant in ["procsched", "tokio"] {
        match measure_in_child(args, variant) {
            Some((seconds, kib, detail)) => {
                println!(
                    "| {variant:<9} | {seconds:>7.2} s | {:>6.1} MiB | {detail:<50} |",
                    kib as f64 / 1024.0
                );
                rows.push((seconds, kib));
            }
            None => println!("| {variant:<9} | (the child process failed to run) |"),
        }
    }
    if let [(p_time, p_kib), (t_time, t_kib)] = rows[..] {
        println!(
            "procsched ÷ tokio: wall time {:.2}×, peak memory {:.2}× (below 1: procsched used less)",
            p_time / t_time,
            p_kib as f64 / t_kib.max(1) as f64
        );
    }
}

/// A child of the side-by-side run: one variant, one line of measurements.
fn run_variant(args: &Args, variant: &str) -> Result<(), BoxError> {
    let rt = runtime(args.workers)?;
    let outcome = match variant {
        "procsched" => rt.block_on(checkout::run_procsched(args, false))?.0,
        "tokio" => rt.block_on(checkout::run_tokio(args))?,
        other => return Err(format!("unknown variant {other:?}").into()),
    };
    drop(rt);
    println!(
        "variant {variant} {:.3} {} {} {} {} {}",
        outcome.elapsed.as_secs_f64(),
        peak_rss_kib(),
        outcome.paid,
        outcome.failed,
        outcome.audit_panicked + outcome.process_panicked,
        outcome.terminated
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Phase 2: blocking steps
// ---------------------------------------------------------------------------------------------

/// On a terminal, shows `message` on the current line until the next call (`""` clears it).
fn status(message: &str) {
    let mut out = std::io::stdout().lock();
    if out.is_terminal() {
        let _ = write!(out, "\r\x1b[2K{message}");
        let _ = out.flush();
    }
}

fn blocking_phase(args: &Args) -> Result<(), BoxError> {
    let sizes = blocking::Sizes::from_args(args);
    println!(
        "\nBlocking steps: {} processes call std::thread::sleep({} ms) in every step (not \
         block_in_place),",
        sizes.blockers,
        sizes.block.as_millis()
    );
    println!(
        "beside {} short ones pinged {} times a second for {:.1} s. {} workers on each runtime;",
        n(sizes.short as u64),
        n(sizes.ping_rate),
        sizes.duration.as_secs_f64(),
        sizes.workers
    );
    println!(
        "procsched's monitor may add up to {} spare threads while steps block. Ping latency, \
         send to receipt:",
        sizes.max_spares
    );
    status("  running on procsched ...");
    let (procsched, monitor) = blocking::run_procsched(sizes)?;
    status("  running on tokio ...");
    let tokio = blocking::run_tokio(sizes)?;
    status("");
    println!(
        "| runtime   |      p50 |      p99 |      max | pings received / sent | blocking steps done |"
    );
    for (name, run) in [("procsched", &procsched), ("tokio", &tokio)] {
        println!(
            "| {name:<9} | {:>8} | {:>8} | {:>8} | {:>21} | {:>19} |",
            latency(run.percentile(50.0)),
            latency(run.percentile(99.0)),
            latency(run.max()),
            format!("{} / {}", n(run.latencies.len() as u64), n(run.sent)),
            n(run.blocking_steps)
        );
    }
    println!(
        "procsched's monitor: {} long polls (steps over its {} ms threshold); {} activations of \
         {} spare",
        n(monitor.long_polls),
        threshold_ms(),
        n(monitor.spares_started),
        monitor.spare_threads + monitor.spare_threads_ended as usize
    );
    println!(
        "threads (started or woken to run a stuck worker's queue). A blocked tokio worker keeps \
         its queue:"
    );
    println!("the pings queued behind a blocking step wait for it to return.");
    Ok(())
}

fn main() -> Result<(), BoxError> {
    let args = Args::parse();
    count_panics();
    if let Some(variant) = &args.variant {
        return run_variant(&args, variant);
    }

    println!(
        "procsched demo: {} checkout processes on {} workers (a simulated {} µs database call \
         each)",
        n(args.processes),
        args.workers,
        n(args.db_latency_us)
    );
    println!("{}", checkout::PROGRESS_LEGEND);
    let rt = runtime(args.workers)?;
    let (outcome, report) = rt.block_on(checkout::run_procsched(&args, true))?;
    drop(rt);
    print_checkout(&args, &outcome, &report);
    if !args.no_compare {
        compare_checkout(&args);
    }
    let counted = PANICS.load(Ordering::Relaxed);
    if !args.no_blocking {
        blocking_phase(&args)?;
    }
    let _ = std::panic::take_hook(); // the default hook again
    if PANICS.load(Ordering::Relaxed) > counted {
        println!("{}", panic_summary()); // none expected after the checkout
    }
    Ok(())
}
