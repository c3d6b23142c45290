//! The `nats-server` the bench starts itself.

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One `nats-server -js` on a free loopback port with a throwaway store dir; killed on drop.
pub(crate) struct NatsServer {
    pub(crate) child: Child,
    pub(crate) dir: PathBuf,
    pub(crate) port: u16,
}

impl NatsServer {
    pub(crate) fn start() -> NatsServer {
        let bin = nats_server_bin();
        for _ in 0..5 {
            let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .and_then(|probe| probe.local_addr())
                .expect("a free port")
                .port();
            let dir = std::env::temp_dir().join(format!(
                "procsched-bench-nats-{}-{port}",
                std::process::id()
            ));
            std::fs::create_dir_all(&dir).expect("server dir");
            let mut child = Command::new(&bin)
                .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
                .arg(&dir)
                .arg("-l")
                .arg(dir.join("server.log"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|error| panic!("cannot run {}: {error}", bin.display()));
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if child.try_wait().ok().flatten().is_some() {
                    break; // lost the port race: try another port
                }
                if TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok() {
                    return NatsServer { child, dir, port };
                }
                assert!(Instant::now() < deadline, "nats-server never listened");
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
        panic!("nats-server did not start");
    }

    pub(crate) fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "nats-server's log kept: {}",
                self.dir.join("server.log").display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// `$NATS_SERVER`, else the last stdout line of `scripts/install-nats-server.sh`.
pub(crate) fn nats_server_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("NATS_SERVER").filter(|bin| !bin.is_empty()) {
        return PathBuf::from(bin);
    }
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scripts/install-nats-server.sh"
    );
    let out = Command::new("bash")
        .arg(script)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|error| panic!("cannot run {script}: {error}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    match stdout.lines().map(str::trim).rfind(|line| !line.is_empty()) {
        Some(last) if out.status.success() => PathBuf::from(last),
        _ => panic!("{script} failed ({}); set NATS_SERVER", out.status),
    }
}
