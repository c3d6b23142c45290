//! SIGKILL → `Down`: a node in a child process killed, timed until its monitor fires.

use crate::processes::{cluster, one_worker, start_node, Echo};
use crate::setup::Bench;
use crate::{DOWN_AFTER_ENV, GUARD, HEARTBEAT_ENV, KILLS, NATS_ENV, NODE_ENV, PREFIX_ENV};
use procsched::cluster::Placement;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// The child process: a node (its name in [`NODE_ENV`]) serving until killed, or until the
/// bench closes its stdin (the bench died: do not outlive it).
pub(crate) fn node_process(name: String) {
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
pub(crate) fn spawn_node(
    url: &str,
    prefix: &str,
    name: &str,
    timing: (Duration, Duration),
) -> Child {
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

pub(crate) struct DownRow {
    pub(crate) heartbeat: Duration,
    pub(crate) down_after: Duration,
    /// The watcher sends to the victim's process this often after the kill, if at all: a
    /// frame that meets no responder declares the victim down without waiting for its
    /// heartbeats to stop.
    pub(crate) traffic: Option<Duration>,
    pub(crate) samples: Vec<Duration>,
}

/// How often the `traffic` row sends to the killed node's process.
pub(crate) const TRAFFIC_EVERY: Duration = Duration::from_millis(10);

pub(crate) fn sigkill_to_down(bench: &Bench) -> Vec<DownRow> {
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
