//! `SchedulerMetrics::export` (feature `metrics`) through a real recorder: every family the
//! export's table lists reaches a Prometheus scrape, the monitor's among them, with the values
//! of the snapshot.
#![cfg(feature = "metrics")]

use metrics_exporter_prometheus::PrometheusBuilder;
use procsched::prelude::*;

#[test]
fn every_documented_family_reaches_a_scrape() {
    // This binary's only test: the recorder is the process's global one.
    let prometheus = PrometheusBuilder::new().install_recorder().unwrap();
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let done = sched
        .spawn_fn(|_: ProcessCx| async { Ok::<_, BoxError>(()) })
        .unwrap();
    sched.block_on(done).unwrap();
    sched.metrics().export();
    let scrape = prometheus.render();
    for family in [
        "procsched_processes",
        "procsched_spawned_total",
        "procsched_init_failed_total",
        "procsched_steps_total",
        "procsched_finished_total",
        "procsched_exits_total",
        "procsched_messages_total",
        "procsched_yields_total",
        "procsched_handler_errors_total",
        "procsched_handler_panics_total",
        "procsched_destructor_panics_total",
        "procsched_mailbox_high_water",
        "procsched_worker_polls_total",
        "procsched_monitor_long_polls_total",
        "procsched_monitor_spares_started_total",
        "procsched_monitor_spares_retired_total",
        "procsched_monitor_spare_threads_ended_total",
        "procsched_monitor_longest_poll_seconds",
        "procsched_monitor_spare_threads",
        "procsched_monitor_active_workers",
        "procsched_monitor_stuck_workers",
    ] {
        assert!(scrape.contains(family), "{family} missing from:\n{scrape}");
    }
    assert!(scrape.contains("procsched_spawned_total 1"), "{scrape}");
    assert!(
        scrape.contains("procsched_finished_total{outcome=\"done\"} 1"),
        "{scrape}"
    );
    assert!(
        scrape.contains("procsched_exits_total{reason=\"normal\"} 1"),
        "{scrape}"
    );
    assert!(
        scrape.contains("procsched_monitor_active_workers 2"),
        "{scrape}"
    );
    sched.shutdown(std::time::Duration::from_secs(5));
}
