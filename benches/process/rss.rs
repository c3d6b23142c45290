//! Memory and growth are measured in child processes: the bench re-runs itself with
//! [`CHILD_ENV`] set, once per measurement, so neither criterion's iterations nor another peer's
//! freed-but-retained heap skew the RSS high-water mark. This file holds both sides of that
//! protocol; the samples the children send back are in `samples.rs`.

use std::process::{Command, Stdio};

use crate::samples::{GrowthSample, RssSample};
use crate::workload::{Peer, Workload, RSS_WORKLOADS};

/// Set (to `<task>/<peer>`) in a child process; `<task>` is a workload name (peak RSS) or
/// `growth-<live processes>`.
pub(crate) const CHILD_ENV: &str = "PROCSCHED_BENCH_CHILD";
/// Prefix of the one line a child prints for its parent.
const RESULT_PREFIX: &str = "RESULT ";

/// The child side: builds peer `P`, runs `task` on it and prints the result for the parent.
pub(crate) fn child<P: Peer>(task: &str) {
    let peer = P::build();
    let line = match task.strip_prefix("growth-") {
        Some(live) => {
            let live = live.parse().expect("growth-<live processes>");
            peer.growth(live).to_line()
        }
        None => {
            let workload = RSS_WORKLOADS
                .into_iter()
                .find(|w| w.name() == task)
                .expect("unknown RSS workload");
            peer.rss(workload).to_line()
        }
    };
    peer.shutdown();
    println!("{RESULT_PREFIX}{line}");
}

/// The parent side: re-runs this executable as a child for `task` on `peer` and returns the
/// line it printed; `None` (with a warning) if it failed.
fn run_child(task: &str, peer: &str) -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    let output = Command::new(exe)
        .env(CHILD_ENV, format!("{task}/{peer}"))
        .stderr(Stdio::inherit())
        .output()
        .ok()?;
    if !output.status.success() {
        eprintln!("warning: child run {task}/{peer} failed: {}", output.status);
        return None;
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().find_map(|l| l.strip_prefix(RESULT_PREFIX));
    line.map(str::to_owned)
}

/// Peak RSS of `workload` on `peer`, measured in a child process.
pub(crate) fn rss_of(workload: Workload, peer: &str) -> Option<RssSample> {
    RssSample::parse(&run_child(workload.name(), peer)?)
}

/// Growth with `live` processes on `peer`, measured in a child process.
pub(crate) fn growth_of(live: usize, peer: &str) -> Option<GrowthSample> {
    GrowthSample::parse(&run_child(&format!("growth-{live}"), peer)?)
}
