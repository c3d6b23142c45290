//! Scheduler metrics on a Prometheus endpoint: a small workload of async-fn processes (each
//! calls an async handler for a price; one call in ten fails), its `SchedulerMetrics`
//! exported through the `metrics` facade every 200 ms, served by
//! `metrics-exporter-prometheus`'s recorder at http://127.0.0.1:9898/metrics.
//!
//! ```sh
//! cargo run --example prometheus --features metrics                # serves for 10 s
//! cargo run --example prometheus --features metrics -- --seconds 1 # CI: a short run
//! curl -s http://127.0.0.1:9898/metrics | grep procsched_
//! ```
//!
//! It stops by itself after `--seconds` (default 10), fetches its own endpoint once to show
//! what a scrape sees, and shuts the scheduler down.

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use procsched::error::CommandError;
use procsched::prelude::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

struct Price(u32);
procsched::command!(Price => u64);

const ADDRESS: &str = "127.0.0.1:9898";

fn main() -> Result<(), BoxError> {
    let seconds: u64 = std::env::args()
        .skip_while(|arg| arg != "--seconds")
        .nth(1)
        .map_or(Ok(10), |s| s.parse())?;
    let run_for = Duration::from_secs(seconds);

    let prometheus = PrometheusBuilder::new().install_recorder()?;
    let sched = Scheduler::builder()
        .workers(2)
        .async_handler(|Price(sku): Price| async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            if sku % 10 == 0 {
                return Err(CommandError::failed("out of stock"));
            }
            Ok(u64::from(sku) * 3)
        })
        .build()?;

    let listener = TcpListener::bind(ADDRESS)?;
    listener.set_nonblocking(true)?;
    println!("serving http://{ADDRESS}/metrics for {seconds} s");

    let started = Instant::now();
    let mut next_export = started;
    let mut sku = 0;
    while started.elapsed() < run_for {
        // The workload: a few orders every tick, each asking for one price.
        for _ in 0..20 {
            sku += 1;
            let order = sku;
            // Nobody awaits the result: dropping the handle detaches the process.
            drop(sched.spawn_fn(move |cx: ProcessCx| async move {
                let price = cx.call(Price(order)).await?;
                Ok::<_, BoxError>(price)
            })?);
        }
        if Instant::now() >= next_export {
            sched.metrics().export();
            next_export += Duration::from_millis(200);
        }
        serve_pending(&listener, &prometheus);
        std::thread::sleep(Duration::from_millis(20));
    }
    sched.metrics().export();

    // What a scrape sees: fetch our own endpoint once (answered from the same thread).
    let mut client = TcpStream::connect(ADDRESS)?;
    client.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")?;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !serve_pending(&listener, &prometheus) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut scraped = String::new();
    client.read_to_string(&mut scraped)?;
    for line in scraped
        .lines()
        .filter(|l| l.starts_with("procsched_") && !l.contains("worker"))
    {
        println!("{line}");
    }

    let report = sched.shutdown(Duration::from_secs(1));
    println!("shut down: {report:?}");
    Ok(())
}

/// Answers every pending connection with the rendered metrics; `true` if it answered one.
fn serve_pending(listener: &TcpListener, prometheus: &PrometheusHandle) -> bool {
    let mut served = false;
    while let Ok((stream, _)) = listener.accept() {
        served = true;
        if let Err(error) = answer(stream, prometheus) {
            eprintln!("scrape failed: {error}");
        }
    }
    served
}

fn answer(mut stream: TcpStream, prometheus: &PrometheusHandle) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(1)))?;
    // Read the request head (any path answers with the metrics).
    let mut reader = BufReader::new(&stream);
    let mut line = String::new();
    while reader.read_line(&mut line)? > 2 {
        line.clear();
    }
    let body = prometheus.render();
    write!(
        stream,
        "HTTP/1.0 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}
