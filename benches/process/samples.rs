//! What the measurements outside criterion return: peak RSS (`rss.rs`), growth (`growth.rs`)
//! and round-trip latency (`latency.rs`), with the RSS high-water mark they read and the
//! one-line form in which a child process hands its sample to its parent (`rss.rs`).

use std::time::Duration;

use hdrhistogram::Histogram;

// ---------------------------------------------------------------------------
// Peak RSS
// ---------------------------------------------------------------------------

/// One RSS measurement: the high-water mark before and after, and how many processes it was
/// spread over.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RssSample {
    pub(crate) before_kib: u64,
    pub(crate) after_kib: u64,
    pub(crate) processes: u64,
    /// Most processes alive at the same time.
    pub(crate) peak_live: u64,
}

impl RssSample {
    pub(crate) fn bytes_per_process(&self) -> f64 {
        self.after_kib.saturating_sub(self.before_kib) as f64 * 1024.0 / self.processes as f64
    }

    pub(crate) fn bytes_per_live_process(&self) -> f64 {
        self.after_kib.saturating_sub(self.before_kib) as f64 * 1024.0 / self.peak_live as f64
    }

    pub(crate) fn to_line(self) -> String {
        let RssSample {
            before_kib,
            after_kib,
            processes,
            peak_live,
        } = self;
        format!("{before_kib} {after_kib} {processes} {peak_live}")
    }

    pub(crate) fn parse(line: &str) -> Option<RssSample> {
        match parse_u64s(line)[..] {
            [before_kib, after_kib, processes, peak_live] => Some(RssSample {
                before_kib,
                after_kib,
                processes,
                peak_live,
            }),
            _ => None,
        }
    }
}

/// The RSS high-water mark of this process, in KiB.
pub(crate) fn vm_hwm_kib() -> u64 {
    procsched_benches::proc_status_kib("VmHWM").expect("/proc/self/status has no VmHWM")
}

/// Space-separated integers.
fn parse_u64s(line: &str) -> Vec<u64> {
    line.split(' ').filter_map(|f| f.parse().ok()).collect()
}

// ---------------------------------------------------------------------------
// Growth
// ---------------------------------------------------------------------------

/// One growth measurement.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GrowthSample {
    pub(crate) live: u64,
    spawn_ns: u64,
    send_ns: u64,
    handled_ns: u64,
    before_kib: u64,
    after_kib: u64,
}

impl GrowthSample {
    pub(crate) fn new(
        live: usize,
        timings: [Duration; 3],
        before_kib: u64,
        after_kib: u64,
    ) -> Self {
        let [spawn, send, handled] = timings.map(|t| t.as_nanos() as u64);
        GrowthSample {
            live: live as u64,
            spawn_ns: spawn,
            send_ns: send,
            handled_ns: handled,
            before_kib,
            after_kib,
        }
    }

    /// Spawn until first step, per process, in nanoseconds.
    pub(crate) fn spawn_per_process(&self) -> f64 {
        self.spawn_ns as f64 / self.live as f64
    }

    /// Sending thread's time per message, in nanoseconds.
    pub(crate) fn send_per_message(&self) -> f64 {
        self.send_ns as f64 / self.live as f64
    }

    /// First send until the last message is handled, per message, in nanoseconds.
    pub(crate) fn handled_per_message(&self) -> f64 {
        self.handled_ns as f64 / self.live as f64
    }

    /// Growth of the RSS high-water mark per live process, in bytes.
    pub(crate) fn bytes_per_process(&self) -> f64 {
        self.after_kib.saturating_sub(self.before_kib) as f64 * 1024.0 / self.live as f64
    }

    pub(crate) fn to_line(self) -> String {
        let GrowthSample {
            live,
            spawn_ns,
            send_ns,
            handled_ns,
            before_kib,
            after_kib,
        } = self;
        format!("{live} {spawn_ns} {send_ns} {handled_ns} {before_kib} {after_kib}")
    }

    pub(crate) fn parse(line: &str) -> Option<GrowthSample> {
        match parse_u64s(line)[..] {
            [live, spawn_ns, send_ns, handled_ns, before_kib, after_kib] => Some(GrowthSample {
                live,
                spawn_ns,
                send_ns,
                handled_ns,
                before_kib,
                after_kib,
            }),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------
// Latency
// ---------------------------------------------------------------------------

/// The result of one peer's latency run.
#[derive(Debug)]
pub(crate) struct LatencySample {
    /// Round trips, in nanoseconds.
    pub(crate) round_trips: Histogram<u64>,
    /// Steps the background processes did per second, from their spawn to the end of sampling.
    pub(crate) background_steps_per_sec: f64,
}

impl LatencySample {
    /// The round trip at `quantile` (0.5, 0.99, ...), in nanoseconds.
    pub(crate) fn at(&self, quantile: f64) -> f64 {
        self.round_trips.value_at_quantile(quantile) as f64
    }

    /// The longest round trip, in nanoseconds.
    pub(crate) fn max(&self) -> f64 {
        self.round_trips.max() as f64
    }
}
