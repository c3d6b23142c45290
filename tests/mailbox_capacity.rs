//! A bounded mailbox (`mailbox_capacity`) counts what waits in it and what the body has not
//! received yet — not what the body has taken, even while the step that took it goes on.

mod support;

use procsched::error::SendErrorKind;
use procsched::prelude::*;
use std::sync::{mpsc, Mutex};

use support::{join_typed, HANG_GUARD};

enum Job {
    Work(u32),
    /// Answer how much work was done.
    Total(Reply<u32>),
}

#[test]
fn messages_taken_in_a_step_that_goes_on_no_longer_count_against_the_capacity() {
    let sched = Scheduler::builder()
        .workers(2)
        .mailbox_capacity(2)
        .build()
        .unwrap();
    let (answered_tx, answered) = mpsc::channel::<()>();
    let (go_tx, go) = mpsc::channel::<()>();
    let go = Mutex::new(go);
    let worker = sched
        .spawn_fn(move |cx: ProcessCx<Job>| async move {
            let mut total = 0;
            loop {
                match cx.recv().await? {
                    Job::Work(n) => total += n,
                    Job::Total(reply) => {
                        let _ = reply.send(total);
                        if total == 3 {
                            // Still inside the step that took both messages: hold it until
                            // the test has sent again.
                            answered_tx.send(()).unwrap();
                            go.lock().unwrap().recv_timeout(HANG_GUARD).unwrap();
                        }
                        if total == 10 {
                            return Ok::<_, BoxError>(total);
                        }
                    }
                }
            }
        })
        .unwrap();
    let addr = worker.addr();
    addr.send(Job::Work(3)).unwrap();
    assert_eq!(sched.block_on(addr.ask(Job::Total)).unwrap(), 3);
    answered.recv_timeout(HANG_GUARD).expect("hang guard");
    // The body has taken both messages; its step has not ended. Two more fit, a third not.
    addr.send(Job::Work(7)).unwrap();
    addr.send(Job::Work(0)).unwrap();
    let full = addr.send(Job::Work(0)).unwrap_err();
    assert_eq!(full.kind(), SendErrorKind::MailboxFull);
    go_tx.send(()).unwrap();
    // Once the body has taken those two, the ask fits.
    let deadline = std::time::Instant::now() + HANG_GUARD;
    let total = loop {
        match sched.block_on(addr.ask(Job::Total)) {
            Err(AskError::Undelivered(SendErrorKind::MailboxFull)) => {
                assert!(std::time::Instant::now() < deadline, "hang guard");
                std::thread::yield_now();
            }
            other => break other.unwrap(),
        }
    };
    assert_eq!(total, 10);
    assert_eq!(join_typed(worker).unwrap(), 10);
}
