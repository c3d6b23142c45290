//! Three nodes joined through NATS, each its own OS process, and a ring of processes spread over
//! them passing a token; then one node is SIGKILLed and the others hear of it.
//!
//! ```sh
//! cargo run --release --features cluster --example cluster            # 30 000 hops
//! cargo run --release --features cluster --example cluster -- 100000  # more hops
//! ```
//!
//! It starts its own `nats-server` (`$NATS_SERVER`, or the one `scripts/install-nats-server.sh`
//! installs) on a free port, starts the three nodes as child processes of this binary
//! (`--node <name> --nats <url>`), and joins the cluster itself as node `driver`, which places
//! the ring and drives it.

use procsched::cluster::{Cluster, Node, NodePid, Placement, RemoteAddr};
use procsched::prelude::*;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A ring member's messages: its next member (an address on another node), the token, the end
/// of the run back to the first member, and the count of hops it saw. Addresses travel inside
/// messages and decode on the receiving node as addresses through it.
#[derive(Serialize, Deserialize)]
enum Ring {
    Next(RemoteAddr<Ring>),
    Start { hops: u64, done: Reply<u64> },
    Token { left: u64, first: RemoteAddr<Ring> },
    Finished,
    Count(Reply<u64>),
}

async fn member(cx: ProcessCx<Ring>, (): ()) -> Result<(), BoxError> {
    let node = Node::for_scheduler(&cx.scheduler()).ok_or("not a node")?;
    let me = node.addr::<Ring>(node.pid(cx.pid()));
    let (mut next, mut seen, mut done) = (None, 0u64, None);
    loop {
        match cx.recv().await? {
            Ring::Next(addr) => next = Some(addr),
            Ring::Start { hops, done: reply } => {
                done = Some(reply);
                let first = me.clone();
                next.as_ref().ok_or("no next")?.send(Ring::Token {
                    left: hops - 1,
                    first,
                })?;
            }
            Ring::Token { left: 0, first } => {
                seen += 1;
                first.send(Ring::Finished)?;
            }
            Ring::Token { left, first } => {
                seen += 1;
                next.as_ref().ok_or("no next")?.send(Ring::Token {
                    left: left - 1,
                    first,
                })?;
            }
            Ring::Finished => {
                if let Some(done) = done.take() {
                    let _ = done.send(seen);
                }
            }
            Ring::Count(reply) => {
                let _ = reply.send(seen);
            }
        }
    }
}

fn cluster(url: &str, name: &str) -> Cluster {
    Cluster::nats(url)
        .name(name)
        .heartbeat(Duration::from_millis(250))
        .down_after(Duration::from_secs(1))
        .message::<Ring>("ring")
        .spawnable("member", member)
}

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Runtime::new()?;
    if let [_, flag, name, nats_flag, url] = args.as_slice() {
        if flag == "--node" && nats_flag == "--nats" {
            return runtime.block_on(run_node(name, url));
        }
    }
    let hops: u64 = args
        .get(1)
        .map(|hops| hops.parse())
        .transpose()?
        .unwrap_or(30_000);
    runtime.block_on(drive(hops))
}

/// A node process: joins, says so, and serves until killed.
async fn run_node(name: &str, url: &str) -> Result<(), BoxError> {
    let sched = Scheduler::builder().workers(1).build()?;
    let node = Node::start(sched.handle(), cluster(url, name)).await?;
    println!(
        "ready {}",
        node.pid(procsched::Pid::from_raw(1).ok_or("pid")?)
            .incarnation()
    );
    std::future::pending::<()>().await;
    Ok(())
}

async fn drive(hops: u64) -> Result<(), BoxError> {
    let mut server = NatsServer::start()?;
    let url = server.url.clone();
    println!("nats-server on {url}");
    let mut nodes: Vec<(String, NodeProcess)> = Vec::new();
    for name in ["n1", "n2", "n3"] {
        nodes.push((name.to_owned(), spawn_node(&url, name)?));
    }
    let sched = Scheduler::builder().workers(1).build()?;
    let driver = Node::start(sched.handle(), cluster(&url, "driver")).await?;
    if !driver.wait_for_nodes(3, Duration::from_secs(10)).await {
        return Err("the three nodes did not all join".into());
    }
    println!(
        "driver sees: {:?}",
        driver
            .nodes()
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>()
    );

    // Nine members, n1 n2 n3 n1 n2 n3 …: every hop crosses a node.
    let mut members = Vec::new();
    for n in 0..9 {
        let on = Placement::Node(nodes[n % 3].0.clone());
        members.push(driver.spawn_on(on, "member", ()).await?);
    }
    for (n, pid) in members.iter().enumerate() {
        let next = driver.addr::<Ring>(members[(n + 1) % members.len()].clone());
        driver
            .addr::<Ring>(pid.clone())
            .send_acked(Ring::Next(next))
            .await?;
    }
    let first = driver.addr::<Ring>(members[0].clone());
    let started = Instant::now();
    first
        .ask_within(Duration::from_secs(600), |done| Ring::Start { hops, done })
        .await?;
    let elapsed = started.elapsed();
    let mut total = 0;
    for pid in &members {
        let seen = driver.addr::<Ring>(pid.clone()).ask(Ring::Count).await?;
        println!("  {pid}: {seen} hops");
        total += seen;
    }
    println!(
        "{total} hops (of {hops}) over 3 nodes in {elapsed:.2?}: {:.1} µs/hop",
        elapsed.as_secs_f64() * 1e6 / hops as f64
    );
    for node in driver.nodes() {
        println!(
            "  node {} (incarnation {:016x}): {} live processes",
            node.name, node.incarnation, node.live
        );
    }

    // SIGKILL n3: the driver's monitors of its members fire `NoConnection`.
    let on_n3: Vec<NodePid> = members
        .iter()
        .filter(|pid| pid.node() == "n3")
        .cloned()
        .collect();
    let monitors: Vec<_> = on_n3
        .iter()
        .map(|pid| driver.monitor(pid.clone()))
        .collect();
    let (_, mut n3) = nodes.pop().ok_or("n3")?;
    n3.0.kill()?;
    n3.0.wait()?;
    let killed = Instant::now();
    for monitor in monitors {
        let down = monitor.await;
        println!(
            "  Down {} ({}) after {:.2?}",
            down.pid,
            down.reason,
            killed.elapsed()
        );
    }
    let stats = driver.stats();
    println!(
        "driver: {} frames / {} items out, {} bytes; rejected {} frames, {} items",
        stats.frames_out,
        stats.items_out,
        stats.bytes_out,
        stats.rejected_frames,
        stats.rejected_items
    );
    drop(nodes); // SIGKILLs the other two
    driver.leave().await;
    sched.shutdown_async(Duration::from_secs(5)).await;
    server.stop();
    Ok(())
}

/// A node's OS process, SIGKILLed when dropped: on every way out of `main`, an error's too.
struct NodeProcess(Child);

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_node(url: &str, name: &str) -> Result<NodeProcess, BoxError> {
    let mut node = NodeProcess(
        Command::new(std::env::current_exe()?)
            .args(["--node", name, "--nats", url])
            .stdout(Stdio::piped())
            .spawn()?,
    );
    let mut lines = BufReader::new(node.0.stdout.take().ok_or("stdout")?).lines();
    match lines.next() {
        Some(Ok(line)) if line.starts_with("ready") => Ok(node),
        other => Err(format!("node {name} did not start: {other:?}").into()),
    }
}

/// A throwaway `nats-server` with JetStream on a free port.
struct NatsServer {
    child: Child,
    url: String,
    dir: std::path::PathBuf,
}

impl NatsServer {
    fn start() -> Result<NatsServer, BoxError> {
        let binary = match std::env::var("NATS_SERVER") {
            Ok(binary) => binary,
            Err(_) => {
                let script = concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/scripts/install-nats-server.sh"
                );
                let output = Command::new(script).stderr(Stdio::inherit()).output()?;
                let stdout = String::from_utf8(output.stdout)?;
                stdout
                    .lines()
                    .last()
                    .ok_or("the install script printed nothing")?
                    .to_owned()
            }
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let dir =
            std::env::temp_dir().join(format!("procsched-cluster-example-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let child = Command::new(binary)
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err("nats-server did not start".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(NatsServer {
            child,
            url: format!("nats://127.0.0.1:{port}"),
            dir,
        })
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
    }
}
