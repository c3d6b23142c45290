//! [`NatsServer`] and [`NatsCluster`]: `nats-server` child processes with JetStream, owned by a
//! test. Ready means what a client needs, not only that the process runs: the server logged
//! `Server is ready` and its monitoring endpoint answers `/healthz` with `"status":"ok"`. For a
//! cluster member that includes contact with an elected JetStream meta leader, which comes well
//! after `Server is ready`: ~0.3 s on a fresh cluster, ~2-4 s for a restarted member (it waits
//! for the leader's heartbeat), ~4-6 s when all members restart (a new election).

use super::{free_ports, fresh_temp_dir, nats_server_bin, poll_until, unique_name};
use super::{PORT_RACE_RETRIES, READY_GUARD};
use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Health check of a standalone server: JetStream is enabled (nothing else to wait for).
const STANDALONE_HEALTH: &str = "/healthz?js-enabled-only=true";
/// Health check of a cluster member: the full check, which answers "unavailable" until the member
/// is in contact with a JetStream meta leader (`js-enabled-only` would pass before that).
const MEMBER_HEALTH: &str = "/healthz";

/// One `nats-server -js` process on 127.0.0.1 with its own store dir (which also holds its log).
/// Ports and store dir stay the same across [`stop`](Self::stop) and
/// [`restart`](Self::restart), so clients reconnect to it and JetStream keeps its data. Dropping
/// it kills the process and removes the dir.
#[derive(Debug)]
pub(crate) struct NatsServer {
    dir: PathBuf,
    port: u16,
    monitor_port: u16,
    /// Arguments after the standalone ones: a cluster member's name, cluster and routes.
    extra_args: Vec<String>,
    health_path: &'static str,
    child: Option<Child>,
    /// Length of the log when the current process was spawned: readiness is read after it.
    log_from: usize,
}

/// What one look at a spawned server found.
enum Check {
    Ready,
    NotYet,
    /// The process is gone; `port_race`: it lost one of its ports to another process.
    Exited {
        port_race: bool,
    },
}

impl NatsServer {
    /// Starts a standalone JetStream server on free ports and waits until it is ready. A start
    /// that lost a port race is retried on new ports; any other failure panics with the log tail.
    pub(crate) fn start() -> NatsServer {
        NatsServer::start_with(&[])
    }

    /// [`start`](Self::start) with more arguments: authentication, TLS.
    pub(crate) fn start_with(args: &[String]) -> NatsServer {
        for attempt in 1.. {
            let ports = free_ports(2);
            let mut server = NatsServer::new(ports[0], ports[1], args.to_vec(), STANDALONE_HEALTH);
            server.spawn();
            match server.await_ready() {
                Check::Exited { port_race: true } if attempt < PORT_RACE_RETRIES => continue,
                Check::Ready => return server,
                _ => server.fail("did not become ready"),
            }
        }
        unreachable!()
    }

    /// A server not yet spawned, with a fresh store dir.
    fn new(port: u16, monitor_port: u16, extra_args: Vec<String>, health: &'static str) -> Self {
        NatsServer {
            dir: fresh_temp_dir("procsched-nats"),
            port,
            monitor_port,
            extra_args,
            health_path: health,
            child: None,
            log_from: 0,
        }
    }

    /// The client URL, for `async_nats::connect` and friends.
    pub(crate) fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The client port (the same for the server's whole life, restarts included).
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// The HTTP monitoring port (`/varz`, `/healthz`, `/jsz`...), for tests that inspect state.
    pub(crate) fn monitor_port(&self) -> u16 {
        self.monitor_port
    }

    /// The store dir (JetStream data under `jetstream/`, the server's log in `nats.log`).
    pub(crate) fn store_dir(&self) -> &Path {
        &self.dir
    }

    /// The server's stdout and stderr, every run appended: for a test's own failure messages.
    pub(crate) fn log_path(&self) -> PathBuf {
        self.dir.join("nats.log")
    }

    /// Whether a process was spawned and has not exited.
    pub(crate) fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Kills the process (SIGKILL: a crash, as far as clients and JetStream can tell) and waits
    /// for it, so the ports are free when this returns. Idempotent.
    pub(crate) fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server and starts it again on the same ports and store dir, then waits until it
    /// is ready. A cluster member is ready only once it reaches a meta leader, so restart members
    /// one at a time while the others keep quorum (or use [`start_again`](Self::start_again)
    /// and [`NatsCluster::wait_healthy`]). A port taken meanwhile is waited for, until the guard.
    pub(crate) fn restart(&mut self) {
        self.stop();
        let end = Instant::now() + READY_GUARD;
        loop {
            self.spawn();
            match self.await_ready() {
                Check::Ready => return,
                Check::Exited { port_race: true } if Instant::now() < end => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                _ => self.fail("did not become ready after a restart"),
            }
        }
    }

    /// Spawns the process again (same ports and store dir) without waiting for it: for
    /// restarting several cluster members at once, followed by [`NatsCluster::wait_healthy`].
    pub(crate) fn start_again(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Spawns `nats-server` with output appended to the log.
    fn spawn(&mut self) {
        let log_path = self.log_path();
        let log = OpenOptions::new().create(true).append(true).open(&log_path);
        let log = log.unwrap_or_else(|e| panic!("open {}: {e}", log_path.display()));
        self.log_from = log.metadata().map_or(0, |m| m.len() as usize);
        let (port, monitor_port) = (self.port.to_string(), self.monitor_port.to_string());
        let bin = nats_server_bin();
        let child = Command::new(bin)
            .args(["-js", "-a", "127.0.0.1", "-p", &port, "-m", &monitor_port])
            .arg("-sd")
            .arg(&self.dir)
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log's file handle"))
            .stderr(log)
            .spawn();
        self.child = Some(child.unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display())));
    }

    /// One look: exited, ready (logged `Server is ready` in this run and `/healthz` says ok), or
    /// not yet. The log line rules out a `/healthz` answered by some other process that holds
    /// the monitoring port this server failed to bind.
    fn check(&mut self) -> Check {
        if !self.is_running() {
            let port_race = self.log_since_spawn().contains("address already in use");
            return Check::Exited { port_race };
        }
        if !self.log_since_spawn().contains("Server is ready") {
            return Check::NotYet;
        }
        match super::http_get(self.monitor_port, self.health_path) {
            Some((200, body)) if body.contains(r#""status":"ok""#) => Check::Ready,
            _ => Check::NotYet,
        }
    }

    /// Polls [`check`](Self::check) until it is not `NotYet` or the hang guard has passed.
    fn await_ready(&mut self) -> Check {
        let mut last = Check::NotYet;
        poll_until(READY_GUARD, || {
            last = self.check();
            !matches!(last, Check::NotYet)
        });
        last
    }

    /// The log written by the current run (empty if there is none yet).
    fn log_since_spawn(&self) -> String {
        let log = fs::read(self.log_path()).unwrap_or_default();
        String::from_utf8_lossy(log.get(self.log_from..).unwrap_or_default()).into_owned()
    }

    /// Panics with `what`, how the process ended (or that it outlived the guard), the last
    /// `/healthz` answer and the tail of the log.
    fn fail(&mut self, what: &str) -> ! {
        let health = super::http_get(self.monitor_port, self.health_path);
        let state = match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(Some(status))) => format!("exited: {status}"),
            _ => format!("still not ready after {READY_GUARD:?}"),
        };
        self.stop();
        let log = fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(40)..].join("\n");
        panic!(
            "nats-server on port {} {what} ({state}; {} -> {health:?})\n--- tail of {} ---\n{tail}",
            self.port,
            self.health_path,
            self.log_path().display(),
        );
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A routed cluster of JetStream servers (`-n nodeI --cluster_name <unique> --cluster
/// <own route url> --routes <the others'>`), each a [`NatsServer`] with its own ports and store
/// dir. Dropping it stops every member and removes their dirs.
#[derive(Debug)]
pub(crate) struct NatsCluster {
    name: String,
    servers: Vec<NatsServer>,
}

impl NatsCluster {
    /// Starts `n` members and waits until every one is healthy, i.e. JetStream has a meta leader
    /// all of them reach (a JetStream cluster wants n >= 3: 2 of 3 then keep quorum while one
    /// member is restarted). A start that lost a port race is retried whole on new ports.
    pub(crate) fn start(n: usize) -> NatsCluster {
        assert!(n >= 1, "a cluster needs at least one server");
        for attempt in 1.. {
            let name = unique_name("procsched");
            let ports = free_ports(3 * n);
            let route = |i: usize| format!("nats://127.0.0.1:{}", ports[3 * i + 2]);
            let servers = (0..n)
                .map(|i| {
                    let others: Vec<String> = (0..n).filter(|&j| j != i).map(route).collect();
                    let mut args = vec![
                        format!("-n=node{i}"),
                        format!("--cluster_name={name}"),
                        format!("--cluster={}", route(i)),
                    ];
                    if !others.is_empty() {
                        args.push(format!("--routes={}", others.join(",")));
                    }
                    NatsServer::new(ports[3 * i], ports[3 * i + 1], args, MEMBER_HEALTH)
                })
                .collect();
            let mut cluster = NatsCluster { name, servers };
            cluster.servers.iter_mut().for_each(NatsServer::spawn);
            match cluster.await_healthy() {
                Ok(()) => return cluster,
                Err((_, true)) if attempt < PORT_RACE_RETRIES => continue,
                Err((i, _)) => cluster.servers[i].fail("(cluster member) did not become healthy"),
            }
        }
        unreachable!()
    }

    /// Waits until every member is healthy (after [`NatsServer::start_again`] on several), and
    /// panics with the log tail of the first member that is not.
    pub(crate) fn wait_healthy(&mut self) {
        if let Err((i, _)) = self.await_healthy() {
            self.servers[i].fail("(cluster member) did not become healthy");
        }
    }

    /// Polls all members together, so one dead member is noticed at once, not after the others'
    /// guards: Ok when all are ready, else a member not ready (the dead one if there is one) and
    /// whether it exited after losing a port race.
    fn await_healthy(&mut self) -> Result<(), (usize, bool)> {
        let mut outcome = Ok(());
        poll_until(READY_GUARD, || {
            let checks: Vec<Check> = self.servers.iter_mut().map(NatsServer::check).collect();
            let exited = |c: &Check| matches!(c, Check::Exited { .. });
            let race = |c: &Check| matches!(c, Check::Exited { port_race: true });
            if let Some(i) = checks.iter().position(exited) {
                outcome = Err((i, race(&checks[i])));
                return true;
            }
            let not_yet = checks.iter().position(|c| matches!(c, Check::NotYet));
            outcome = not_yet.map_or(Ok(()), |i| Err((i, false)));
            not_yet.is_none()
        });
        outcome
    }

    /// The cluster's name (unique per cluster: it appears in each member's `INFO` as `cluster`).
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The number of members.
    pub(crate) fn len(&self) -> usize {
        self.servers.len()
    }

    /// Every member's client URL, in member order: a client given all of them fails over.
    pub(crate) fn urls(&self) -> Vec<String> {
        self.servers.iter().map(NatsServer::url).collect()
    }

    /// Member `i`, to read its ports or paths.
    pub(crate) fn server(&self, i: usize) -> &NatsServer {
        &self.servers[i]
    }

    /// Member `i`, to stop or restart it alone.
    pub(crate) fn server_mut(&mut self, i: usize) -> &mut NatsServer {
        &mut self.servers[i]
    }
}
