//! A scheduler given a `#[tokio::test(start_paused = true)]` runtime with `tokio_handle`: its
//! bodies' tokio timers follow the paused clock (an hour's sleep passes as the test awaits). Left
//! to its own runtime (a current-thread one is not adopted implicitly), it would sleep in real
//! time: the README and `tokio_handle`'s docs say which to pick.

mod support;

use procsched::prelude::*;
use std::sync::mpsc;
use std::time::Duration;
use support::HANG_GUARD;

#[tokio::test(start_paused = true)]
async fn a_body_s_tokio_sleep_follows_the_test_s_paused_clock_when_given_its_runtime() {
    // Hang guard on a real clock: an hour slept in real time fails the test instead.
    let (done, finished) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        if finished.recv_timeout(HANG_GUARD) == Err(mpsc::RecvTimeoutError::Timeout) {
            eprintln!("hang guard: the body slept on a real clock");
            std::process::exit(1);
        }
    });
    let sched = Scheduler::builder()
        .workers(1)
        .tokio_handle(tokio::runtime::Handle::current())
        .build()
        .unwrap();
    let before = tokio::time::Instant::now();
    let sleeper = sched
        .spawn_fn(|_: ProcessCx| async {
            tokio::time::sleep(Duration::from_secs(3_600)).await;
            Ok::<_, BoxError>(())
        })
        .unwrap();
    sleeper.await.unwrap();
    assert!(tokio::time::Instant::now() >= before + Duration::from_secs(3_600));
    done.send(()).unwrap();
    let report = sched.shutdown_async(HANG_GUARD).await;
    assert!(report.is_complete(), "{report:?}");
}
