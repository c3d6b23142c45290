//! The checkout workload, twice: as procsched processes and as plain tokio tasks.
//!
//! Each order loads its cart from an in-process store (an async handler: a tokio lock and a
//! timer standing in for a database round trip), prices it (an inline handler), asks the
//! payment-gateway process for authorisation (a typed ask: the order is `Blocked`, its worker
//! free, until the answer) and writes an audit line (a blocking handler doing file I/O). A few
//! carts are invalid (the order fails), a few audit calls panic (contained: the call fails, so
//! the order fails), and order 0 waits for an authorisation that never comes and is terminated.

use crate::Args;
use procsched::error::CommandError;
use procsched::prelude::*;
use std::collections::HashMap;
use std::error::Error;
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::RwLock;

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

/// The payment gateway's messages: an authorisation request carries the port for its answer.
enum Gateway {
    Authorise(u64, Reply<bool>),
}

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
    let file = std::fs::File::create(&path)?;
    // Removed at once, so the demo leaves nothing behind: the open file stays writable (Unix;
    // elsewhere the removal fails and the file stays).
    let _ = std::fs::remove_file(&path);
    Ok(std::sync::Mutex::new(file))
}

/// Whether `error` (or anything in its `source()` chain) is a procsched call whose handler
/// panicked: a typed predicate, not a match on the text.
fn handler_panicked(error: &(dyn Error + 'static)) -> bool {
    std::iter::successors(Some(error), |&e| e.source()).any(|e| {
        e.downcast_ref::<CommandError>()
            .is_some_and(CommandError::is_panicked)
    })
}

/// The same question for the tokio variant: the audit ran in `spawn_blocking`, whose
/// `JoinError` says whether the closure panicked.
fn blocking_task_panicked(error: &(dyn Error + 'static)) -> bool {
    std::iter::successors(Some(error), |&e| e.source()).any(|e| {
        e.downcast_ref::<tokio::task::JoinError>()
            .is_some_and(tokio::task::JoinError::is_panic)
    })
}

/// What each variant reports: orders by outcome.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) paid: u64,
    /// The order's own error (an invalid cart).
    pub(crate) failed: u64,
    /// The audit call's handler panicked; the panic was contained and failed the order.
    pub(crate) audit_panicked: u64,
    /// The order process itself panicked (none do: kept to show it is told apart).
    pub(crate) process_panicked: u64,
    pub(crate) terminated: u64,
    pub(crate) revenue: u64,
    /// The first handler panic's message, as the order saw it.
    pub(crate) first_handler_panic: Option<String>,
    pub(crate) elapsed: Duration,
}

/// What the procsched run saw beyond the orders' outcomes.
#[derive(Debug)]
pub(crate) struct Report {
    pub(crate) gateway_answered: u64,
    pub(crate) shutdown: procsched::metrics::ShutdownReport,
    pub(crate) metrics: procsched::metrics::SchedulerMetrics,
}

// ---------------------------------------------------------------------------------------------
// procsched
// ---------------------------------------------------------------------------------------------

pub(crate) async fn run_procsched(
    args: &Args,
    progress: bool,
) -> Result<(Outcome, Report), BoxError> {
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
    let gateway = sched.spawn_fn(|cx: ProcessCx<Gateway>| async move {
        let mut answered = 0u64;
        loop {
            match cx.recv().await {
                Ok(Gateway::Authorise(cents, reply)) => {
                    answered += 1;
                    let _ = reply.send(cents > 0); // the order may be gone
                }
                Err(RecvError::Cancelled(_)) => return Ok::<_, BoxError>(answered),
                Err(other) => return Err(other.into()),
            }
        }
    })?;

    // The orders. Order 0 never asks the gateway: it waits for an authorisation that never
    // comes (as if its request was lost), until it is terminated.
    let mut orders = tokio::task::JoinSet::new();
    let mut order_0 = None;
    for id in 0..args.processes {
        let gateway = gateway.addr();
        let order = sched.spawn_fn(move |cx: ProcessCx<bool>| async move {
            let cart = cx.call(LoadCart(id)).await?;
            let cents = cx.call(Price(cart.items)).await?;
            let authorised = if id != 0 {
                gateway
                    .ask(|reply| Gateway::Authorise(cents, reply))
                    .await?
            } else {
                cx.recv().await? // Idle: nothing will ever be sent
            };
            if !authorised {
                return Err("payment declined".into());
            }
            cx.call(Audit(id, cents)).await?;
            Ok::<_, BoxError>(cents)
        })?;
        if id == 0 {
            order_0 = Some(order.pid());
        }
        orders.spawn(order);
    }

    // Live progress: one line rewritten in place on a terminal (in a log, one line a second).
    let reporter = progress.then(|| {
        let sched = sched.clone();
        let interval = Duration::from_millis(args.progress_ms.max(1));
        let total = args.processes;
        tokio::spawn(async move {
            let terminal = std::io::stdout().is_terminal();
            let mut last = (Instant::now(), sched.metrics().steps);
            let mut printed = Instant::now();
            loop {
                tokio::time::sleep(interval).await;
                let m = sched.metrics();
                let now = (Instant::now(), m.steps);
                let rate = (now.1 - last.1) as f64 / now.0.duration_since(last.0).as_secs_f64();
                last = now;
                if terminal || printed.elapsed() >= Duration::from_secs(1) {
                    printed = Instant::now();
                    print_progress(started, total, &m, rate, terminal);
                }
            }
        })
    });

    let mut outcome = Outcome::default();
    let mut finished = 0u64;
    loop {
        // Order 0 would wait forever: terminate it once every other order has finished.
        if finished + 1 >= args.processes {
            if let Some(pid) = order_0.take() {
                let _ = sched.terminate(pid); // an error: it had already failed (invalid cart)
            }
        }
        let Some(joined) = orders.join_next().await else {
            break;
        };
        finished += 1;
        match joined? {
            Ok(cents) => {
                outcome.paid += 1;
                outcome.revenue += cents;
            }
            Err(error) if error.is_terminated() => outcome.terminated += 1,
            Err(error) if error.is_panicked() => outcome.process_panicked += 1,
            Err(error) if error.is_failed() && handler_panicked(&error) => {
                outcome.audit_panicked += 1;
                if outcome.first_handler_panic.is_none() {
                    outcome.first_handler_panic = Some(error.to_string());
                }
            }
            Err(error) if error.is_failed() => outcome.failed += 1,
            Err(error) => return Err(error.into()),
        }
    }
    let shutdown = sched.shutdown_async(Duration::from_secs(2)).await;
    let gateway_answered = gateway.await?;
    outcome.elapsed = started.elapsed();
    if let Some(reporter) = reporter {
        reporter.abort();
        let _ = reporter.await;
        // The last line: the state at the end, and the average rate over the run.
        let m = sched.metrics();
        let average = m.steps as f64 / outcome.elapsed.as_secs_f64();
        let terminal = std::io::stdout().is_terminal();
        print_progress(started, args.processes, &m, average, terminal);
        if terminal {
            println!();
        }
    }
    let metrics = sched.metrics();
    let report = Report {
        gateway_answered,
        shutdown,
        metrics,
    };
    Ok((outcome, report))
}

/// The columns of the live line (printed once above it).
pub(crate) const PROGRESS_LEGEND: &str =
    " time | orders finished | ready (queued or running) · blocked (in a call or ask) · idle | steps/s";

/// The live line: under 80 columns, so that rewriting it in place (`\r`) never wraps.
fn print_progress(
    started: Instant,
    total: u64,
    m: &procsched::metrics::SchedulerMetrics,
    steps_per_second: f64,
    in_place: bool,
) {
    // Orders only: the gateway finishes at shutdown.
    let done = m.finished.total().min(total);
    let live = &m.processes;
    let line = format!(
        "{:>4.1}s | {:>13} | {:>6} ready · {:>6} blocked · {:>6} idle | {:>9}",
        started.elapsed().as_secs_f64(),
        format!("{}/{}", crate::n(done), crate::n(total)),
        crate::n((live.ready + live.running) as u64),
        crate::n(live.blocked as u64),
        crate::n(live.idle as u64),
        crate::n(steps_per_second as u64),
    );
    let mut out = std::io::stdout().lock();
    let _ = if in_place {
        write!(out, "\r{line}")
    } else {
        writeln!(out, "{line}")
    };
    let _ = out.flush();
}

// ---------------------------------------------------------------------------------------------
// The same work as plain tokio tasks
// ---------------------------------------------------------------------------------------------

pub(crate) async fn run_tokio(args: &Args) -> Result<Outcome, BoxError> {
    let store = build_store(args.processes, args.invalid_every);
    let log = Arc::new(audit_file("tokio")?);
    let latency = Duration::from_micros(args.db_latency_us);
    let started = Instant::now();
    // The gateway: a task with an mpsc mailbox; requests carry a oneshot for the reply.
    let (to_gateway, mut requests) =
        tokio::sync::mpsc::unbounded_channel::<(u64, tokio::sync::oneshot::Sender<bool>)>();
    let gateway = tokio::spawn(async move {
        while let Some((cents, reply)) = requests.recv().await {
            let _ = reply.send(cents > 0);
        }
    });
    let mut orders = tokio::task::JoinSet::new();
    let mut order_0 = None;
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
                std::mem::forget(reply_tx); // order 0 waits for an authorisation that never comes
            }
            if !reply_rx.await? {
                return Err::<u64, BoxError>("payment declined".into());
            }
            tokio::task::spawn_blocking(move || audit(&log, id, cents, panic_every)).await?;
            Ok(cents)
        });
        if id == 0 {
            order_0 = Some(abort);
        }
    }
    drop(to_gateway);
    let mut outcome = Outcome::default();
    let mut finished = 0u64;
    loop {
        if finished + 1 >= args.processes {
            if let Some(order_0) = order_0.take() {
                order_0.abort(); // as in the procsched variant
            }
        }
        let Some(joined) = orders.join_next().await else {
            break;
        };
        finished += 1;
        match joined {
            Ok(Ok(cents)) => {
                outcome.paid += 1;
                outcome.revenue += cents;
            }
            Ok(Err(error)) if blocking_task_panicked(&*error) => outcome.audit_panicked += 1,
            Ok(Err(_)) => outcome.failed += 1,
            Err(error) if error.is_cancelled() => outcome.terminated += 1,
            Err(error) if error.is_panic() => outcome.process_panicked += 1,
            Err(error) => return Err(error.into()),
        }
    }
    gateway.abort();
    outcome.elapsed = started.elapsed();
    Ok(outcome)
}
