//! [`SchedulerMetrics::export`]: a snapshot through the [`metrics`](https://docs.rs/metrics) facade.

use super::SchedulerMetrics;

#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
impl SchedulerMetrics {
    /// Records the snapshot through the [`metrics`](https://docs.rs/metrics) facade, into
    /// whatever recorder the application installed (a Prometheus exporter, StatsD, ...). Call
    /// it periodically (or before each scrape); counters are set to their absolute values,
    /// gauges to the snapshot's. A counter never goes down in the facade: `Counter::absolute`
    /// keeps the largest value it was given (`metrics`'s own counters hold a maximum), so
    /// exporting the same scheduler again counts nothing twice.
    ///
    /// | name | kind | labels |
    /// |---|---|---|
    /// | `procsched_processes` | gauge | `state`: ready, running, blocked, idle |
    /// | `procsched_spawned_total` | counter | |
    /// | `procsched_init_failed_total` | counter | |
    /// | `procsched_steps_total` | counter | |
    /// | `procsched_finished_total` | counter | `outcome`: done, failed, panicked, terminated, cancelled, forced |
    /// | `procsched_exits_total` | counter | `reason`: normal, failed, panicked, killed, shutdown, noproc, noconnection |
    /// | `procsched_messages_total` | counter | `result`: delivered, mailbox_full, closed, not_found |
    /// | `procsched_yields_total` | counter | `handler`: inline, async, blocking, none, ask (a state machine's `ask_command`) |
    /// | `procsched_handler_errors_total` | counter | |
    /// | `procsched_handler_panics_total` | counter | |
    /// | `procsched_destructor_panics_total` | counter | |
    /// | `procsched_mailbox_high_water` | gauge | |
    /// | `procsched_longest_step_seconds` | gauge | (0 when no step was sampled in the window; the process is in the snapshot: a `pid` label would grow a series per process) |
    /// | `procsched_worker_<counter>_total` | counter | `worker`: a configured worker's index (`0`, `1`, ...), or `spare-<index>` for a spare worker slot ([`ExecutorMetrics::spares`](crate::executor::ExecutorMetrics::spares)); one per [`WorkerMetrics`](crate::executor::WorkerMetrics) field |
    /// | `procsched_monitor_long_polls_total`, `procsched_monitor_spares_started_total`, `procsched_monitor_spares_retired_total`, `procsched_monitor_spare_threads_ended_total` | counter | (the [`MonitorMetrics`](crate::executor::MonitorMetrics) counters) |
    /// | `procsched_monitor_longest_poll_seconds`, `procsched_monitor_spare_threads`, `procsched_monitor_active_workers`, `procsched_monitor_stuck_workers` | gauge | (its gauges; the longest poll's PID stays in the snapshot) |
    ///
    /// No series carries a label naming the scheduler: two schedulers exporting into the same
    /// recorder write the same series — each export setting the gauges, and the counters
    /// showing the larger of the two schedulers' counts (the maximum above). A program that
    /// replaces its scheduler (after a shutdown, in tests) and exports the new one into the
    /// same recorder sees its counters stand still until the new counts pass the old ones. To
    /// tell schedulers apart, export each one's snapshot into a recorder of its own
    /// (`metrics::with_local_recorder`), or through a recorder layer that renames or labels
    /// what it records (the `metrics-util` crate's `layers`, such as its `PrefixLayer`).
    ///
    /// Requires the cargo feature `metrics`.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().workers(1).build()?;
    /// // With no recorder installed, the facade discards the values.
    /// sched.metrics().export();
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn export(&self) {
        use metrics::{counter, describe_counter, describe_gauge, gauge};

        describe_gauge!("procsched_processes", "Live processes by state");
        for (state, n) in [
            ("ready", self.processes.ready),
            ("running", self.processes.running),
            ("blocked", self.processes.blocked),
            ("idle", self.processes.idle),
        ] {
            gauge!("procsched_processes", "state" => state).set(n as f64);
        }
        describe_counter!("procsched_spawned_total", "Processes started");
        counter!("procsched_spawned_total").absolute(self.spawned);
        describe_counter!("procsched_init_failed_total", "Spawns whose init failed");
        counter!("procsched_init_failed_total").absolute(self.init_failed);
        describe_counter!("procsched_steps_total", "Steps run");
        counter!("procsched_steps_total").absolute(self.steps);
        describe_counter!("procsched_finished_total", "Processes finished, by outcome");
        let f = &self.finished;
        for (outcome, n) in [
            ("done", f.done),
            ("failed", f.failed),
            ("panicked", f.panicked),
            ("terminated", f.terminated),
            ("cancelled", f.cancelled),
            ("forced", f.forced),
        ] {
            counter!("procsched_finished_total", "outcome" => outcome).absolute(n);
        }
        describe_counter!(
            "procsched_exits_total",
            "Processes finished, by exit reason"
        );
        let e = &self.exits;
        for (reason, n) in [
            ("normal", e.normal),
            ("failed", e.failed),
            ("panicked", e.panicked),
            ("killed", e.killed),
            ("shutdown", e.shutdown),
            ("noproc", e.no_proc),
            ("noconnection", e.no_connection),
        ] {
            counter!("procsched_exits_total", "reason" => reason).absolute(n);
        }
        describe_counter!("procsched_messages_total", "Messages sent, by result");
        let m = &self.messages;
        for (result, n) in [
            ("delivered", m.delivered),
            ("mailbox_full", m.mailbox_full),
            ("closed", m.closed),
            ("not_found", m.not_found),
        ] {
            counter!("procsched_messages_total", "result" => result).absolute(n);
        }
        describe_counter!(
            "procsched_yields_total",
            "Yields dispatched, by handler kind"
        );
        let y = &self.yields;
        for (handler, n) in [
            ("inline", y.inline),
            ("async", y.asynchronous),
            ("blocking", y.blocking),
            ("none", y.no_handler),
            ("ask", y.asks),
        ] {
            counter!("procsched_yields_total", "handler" => handler).absolute(n);
        }
        describe_counter!("procsched_handler_errors_total", "Handler errors");
        counter!("procsched_handler_errors_total").absolute(self.handler_errors);
        describe_counter!("procsched_handler_panics_total", "Handler panics");
        counter!("procsched_handler_panics_total").absolute(self.handler_panics);
        describe_counter!(
            "procsched_destructor_panics_total",
            "Contained panics of user destructors"
        );
        counter!("procsched_destructor_panics_total").absolute(self.destructor_panics);
        describe_gauge!(
            "procsched_mailbox_high_water",
            "Most events ever queued in one mailbox"
        );
        gauge!("procsched_mailbox_high_water").set(self.mailbox_high_water as f64);
        describe_gauge!(
            "procsched_longest_step_seconds",
            "Longest sampled step of the last minutes (0: none sampled)"
        );
        // Set even when no step was sampled: a gauge left alone keeps its last value, which
        // would report a step that has left the window as if it were recent.
        let longest_step = self
            .longest_step
            .map_or(0.0, |step| step.duration.as_secs_f64());
        gauge!("procsched_longest_step_seconds").set(longest_step);
        let monitor = self.executor.monitor();
        for (name, help, n) in [
            (
                "procsched_monitor_long_polls_total",
                "Polls that ran past the long-poll threshold",
                monitor.long_polls,
            ),
            (
                "procsched_monitor_spares_started_total",
                "Times a spare worker was started or woken to replace a stuck one",
                monitor.spares_started,
            ),
            (
                "procsched_monitor_spares_retired_total",
                "Times a spare worker retired (gave its queue back)",
                monitor.spares_retired,
            ),
            (
                "procsched_monitor_spare_threads_ended_total",
                "Spare worker threads ended by their keep-alive",
                monitor.spare_threads_ended,
            ),
            (
                "procsched_monitor_exhausted_total",
                "Times every worker thread, spares at their cap included, was blocked at once",
                monitor.exhausted,
            ),
        ] {
            describe_counter!(name, help);
            counter!(name).absolute(n);
        }
        for (name, help, n) in [
            (
                "procsched_monitor_longest_poll_seconds",
                "Longest poll the monitor has seen",
                monitor.longest_poll_ns as f64 / 1e9,
            ),
            (
                "procsched_monitor_spare_threads",
                "Spare worker threads alive (active or parked)",
                monitor.spare_threads as f64,
            ),
            (
                "procsched_monitor_active_workers",
                "Worker threads holding a run queue: the configured ones and the active spares",
                monitor.active_workers as f64,
            ),
            (
                "procsched_monitor_stuck_workers",
                "Workers the monitor sees stuck in a long poll or blocking",
                monitor.stuck_workers as f64,
            ),
        ] {
            describe_gauge!(name, help);
            gauge!(name).set(n);
        }
        let configured = self.executor.workers().iter().enumerate();
        let configured = configured.map(|(index, w)| (index.to_string(), w));
        let spares = self.executor.spares().iter().enumerate();
        let spares = spares.map(|(index, w)| (format!("spare-{index}"), w));
        for (name, help) in WORKER_COUNTERS {
            describe_counter!(name, help);
        }
        for (worker, w) in configured.chain(spares) {
            let values = [
                w.polls,
                w.stolen,
                w.steal_ops,
                w.global_pops,
                w.inject_batches,
                w.inject_pops,
                w.parks,
                w.unparks,
                w.spins,
            ];
            for ((name, _), n) in WORKER_COUNTERS.into_iter().zip(values) {
                counter!(name, "worker" => worker.clone()).absolute(n);
            }
        }
    }
}

/// The per-worker counters' names and help texts, in `WorkerMetrics`'s field order (the values
/// `export` zips with them).
#[cfg(feature = "metrics")]
const WORKER_COUNTERS: [(&str, &str); 9] = [
    ("procsched_worker_polls_total", "Task polls"),
    (
        "procsched_worker_stolen_total",
        "Tasks taken from other workers",
    ),
    (
        "procsched_worker_steal_ops_total",
        "Successful steal operations",
    ),
    (
        "procsched_worker_global_pops_total",
        "Tasks taken from the global queue",
    ),
    (
        "procsched_worker_inject_batches_total",
        "Batch transfers into the worker's deque from the global or its inject queues",
    ),
    (
        "procsched_worker_inject_pops_total",
        "Tasks taken from the worker's inject queues",
    ),
    (
        "procsched_worker_parks_total",
        "Times the worker went to sleep",
    ),
    (
        "procsched_worker_unparks_total",
        "Times the worker was woken from sleep",
    ),
    (
        "procsched_worker_spins_total",
        "Search rounds that found nothing",
    ),
];
