//! `SchedulerMetrics::export` (feature `metrics`) through a real recorder: every family the
//! export's table lists reaches a Prometheus scrape, the monitor's among them, with the values
//! of the snapshot.
#![cfg(feature = "metrics")]

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};
use procsched::metrics::SchedulerMetrics;
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
        "procsched_monitor_exhausted_total",
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
    // Every family says what it is: a `# HELP` line for each `# TYPE` line.
    for family in scrape
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|line| line.split_whitespace().next())
    {
        assert!(
            scrape.contains(&format!("# HELP {family} ")),
            "{family} has no HELP in:\n{scrape}"
        );
    }
    sched.shutdown(std::time::Duration::from_secs(5));
}

/// The scrape of `snapshots`, exported in order into a recorder of this test's own (the
/// global one is `every_documented_family_reaches_a_scrape`'s).
fn scrape_of(snapshots: &[&SchedulerMetrics]) -> String {
    let recorder: PrometheusRecorder = PrometheusBuilder::new().build_recorder();
    metrics::with_local_recorder(&recorder, || snapshots.iter().for_each(|m| m.export()));
    recorder.handle().render()
}

#[test]
fn the_spare_workers_counters_are_exported_labelled_spare() {
    let sched = Scheduler::builder()
        .workers(1)
        .max_spare_workers(2)
        .build()
        .unwrap();
    let metrics = sched.metrics();
    assert_eq!(metrics.executor.spares().len(), 2);
    let scrape = scrape_of(&[&metrics]);
    for (index, spare) in metrics.executor.spares().iter().enumerate() {
        let series = format!(
            "procsched_worker_polls_total{{worker=\"spare-{index}\"}} {}",
            spare.polls
        );
        assert!(scrape.contains(&series), "{series} missing from:\n{scrape}");
    }
    let worker = metrics.executor.workers()[0].polls;
    let series = format!("procsched_worker_polls_total{{worker=\"0\"}} {worker}");
    assert!(scrape.contains(&series), "{series} missing from:\n{scrape}");
    sched.shutdown(std::time::Duration::from_secs(5));
}

#[test]
fn the_longest_step_gauge_drops_to_zero_once_no_step_is_sampled() {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    // 65 steps: one step in 64 of each process is timed, so one of these is.
    let stepper = sched
        .spawn_fn(|cx: ProcessCx| async move {
            for _ in 0..64 {
                cx.yield_now().await;
            }
            Ok::<_, BoxError>(())
        })
        .unwrap();
    sched.block_on(stepper).unwrap();
    let sampled = sched.metrics();
    assert!(sampled.longest_step.is_some(), "a step was timed");
    // As a snapshot taken once that step has left the window.
    let mut later = sampled.clone();
    later.longest_step = None;
    let scrape = scrape_of(&[&sampled, &later]);
    assert!(
        scrape.contains("procsched_longest_step_seconds 0\n"),
        "the gauge kept the old step:\n{scrape}"
    );
    sched.shutdown(std::time::Duration::from_secs(5));
}
