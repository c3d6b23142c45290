//! `testing::Harness` behaves as the scheduler does: a body waiting on a foreign future
//! alongside a receive or a call fails its step.

use procsched::prelude::*;
use procsched::testing::Harness;
use std::time::Duration;

async fn receive_or_time_out(cx: ProcessCx<u32>) -> Result<&'static str, BoxError> {
    match tokio::time::timeout(Duration::from_secs(5), cx.recv()).await {
        Ok(received) => {
            received?;
            Ok("received")
        }
        Err(_) => Ok("timed out"),
    }
}

fn a_foreign_timer_with_a_receive_fails_the_step() {
    let mut harness = Harness::for_fn(receive_or_time_out);
    harness.init("run", Payload::empty()).unwrap();
    let error = harness.step().unwrap_err().to_string();
    assert!(error.contains("not procsched's own"), "{error}");
}

#[test]
fn a_foreign_timer_awaited_with_a_receive_fails_the_step_in_a_plain_test() {
    a_foreign_timer_with_a_receive_fails_the_step();
}

#[test]
fn a_foreign_timer_awaited_with_a_receive_fails_the_step_in_a_tokio_runtime() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async { a_foreign_timer_with_a_receive_fails_the_step() });
}

struct Price;
procsched::command!(Price => u32);

#[test]
fn a_foreign_timer_awaited_with_a_call_fails_the_step() {
    let mut harness = Harness::for_fn(|cx: ProcessCx| async move {
        let priced = tokio::time::timeout(Duration::from_secs(5), cx.call(Price)).await;
        Ok::<_, BoxError>(priced.is_ok())
    });
    harness.init("run", Payload::empty()).unwrap();
    let error = harness.step().unwrap_err().to_string();
    assert!(error.contains("not procsched's own"), "{error}");
}
