//! `SpawnOptions`: a process's own mailbox bound, read by every send to it (`send`,
//! `Addr::send`, `send_wait`, an ask) instead of the scheduler's `mailbox_capacity`; an
//! unbounded process among bounded ones; the `link` option, as `spawn_fn_linked`'s; and the
//! scheduler-wide default, unchanged for processes spawned without options. `ChildOptions`: a
//! supervised child's own bound, held by every instance its factory starts (`async fn` body and
//! state machine). That a child's options cannot ask for a link is `tests/compile_fail/`'s.

mod support;

use futures::channel::oneshot;
use procsched::error::SendErrorKind;
use procsched::prelude::*;
use procsched::state_machine::{Events, Process, StepOutput};
use std::sync::mpsc;
use std::thread;
use support::{join_typed, HANG_GUARD};

/// A body that receives nothing until `gate` opens, then receives `expect` `u32`s and returns
/// their sum: what is sent before the gate opens waits in its mailbox.
fn gated(
    sched: &Scheduler,
    opts: SpawnOptions,
    expect: u32,
) -> (ProcessHandle<u32, u32>, oneshot::Sender<()>) {
    let (open, gate) = oneshot::channel::<()>();
    let handle = sched
        .spawn_fn_with(opts, move |cx: ProcessCx<u32>| async move {
            gate.await?;
            let mut sum = 0;
            for _ in 0..expect {
                sum += cx.recv().await?;
            }
            Ok::<_, BoxError>(sum)
        })
        .unwrap();
    (handle, open)
}

/// Sends 1s to `addr` until one is refused; returns how many were taken, and the refusal.
fn fill(addr: &Addr<u32>, most: u32) -> (u32, SendErrorKind) {
    for taken in 0..=most {
        if let Err(refused) = addr.send(1) {
            return (taken, refused.kind());
        }
    }
    panic!("{addr:?} took more than {most}");
}

#[test]
fn processes_with_capacities_of_their_own_each_refuse_at_their_own_bound() {
    let sched = Scheduler::builder()
        .workers(2)
        .mailbox_capacity(3)
        .build()
        .unwrap();
    let (two, open_two) = gated(&sched, SpawnOptions::new().mailbox_capacity(2), 2);
    let (five, open_five) = gated(&sched, SpawnOptions::new().mailbox_capacity(5), 5);
    let (default, open_default) = gated(&sched, SpawnOptions::new(), 3);
    let (plain, open_plain) = {
        let (open, gate) = oneshot::channel::<()>();
        let handle = sched
            .spawn_fn(move |cx: ProcessCx<u32>| async move {
                gate.await?;
                let mut sum = 0;
                for _ in 0..3 {
                    sum += cx.recv().await?;
                }
                Ok::<_, BoxError>(sum)
            })
            .unwrap();
        (handle, open)
    };

    assert_eq!(fill(&two.addr(), 10), (2, SendErrorKind::MailboxFull));
    assert_eq!(fill(&five.addr(), 10), (5, SendErrorKind::MailboxFull));
    // No options, or the default ones: the scheduler's bound, as before.
    assert_eq!(fill(&default.addr(), 10), (3, SendErrorKind::MailboxFull));
    assert_eq!(fill(&plain.addr(), 10), (3, SendErrorKind::MailboxFull));
    // The handle's untyped send meets the same bound.
    let untyped = sched.send(two.pid(), Message::new("one more", Payload::new(1u32)));
    assert!(untyped.unwrap_err().is_mailbox_full());

    for open in [open_two, open_five, open_default, open_plain] {
        open.send(()).unwrap();
    }
    assert_eq!(join_typed(two).unwrap(), 2, "every message taken was kept");
    assert_eq!(join_typed(five).unwrap(), 5);
    assert_eq!(join_typed(default).unwrap(), 3);
    assert_eq!(join_typed(plain).unwrap(), 3);
    sched.shutdown(HANG_GUARD);
}

#[test]
fn an_unbounded_process_on_a_bounded_scheduler_takes_ten_times_the_bound() {
    const BOUND: u32 = 4;
    let sched = Scheduler::builder()
        .workers(2)
        .mailbox_capacity(BOUND as usize)
        .build()
        .unwrap();
    let (sink, open) = gated(&sched, SpawnOptions::new().unbounded_mailbox(), 10 * BOUND);
    let addr = sink.addr();
    for n in 0..10 * BOUND {
        addr.send(1)
            .unwrap_or_else(|e| panic!("message {n} refused: {e}"));
    }
    open.send(()).unwrap();
    assert_eq!(join_typed(sink).unwrap(), 10 * BOUND);
    sched.shutdown(HANG_GUARD);
}

#[test]
fn a_bound_of_its_own_on_an_unbounded_scheduler_refuses_asks_and_send_wait_at_zero() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let (full, open) = gated(&sched, SpawnOptions::new().mailbox_capacity(1), 1);
    full.addr().send(1).unwrap();
    let asked = sched.block_on(full.addr().ask(|_: Reply<()>| 2u32));
    assert!(
        asked.unwrap_err().is_mailbox_full(),
        "an ask to a full mailbox"
    );
    open.send(()).unwrap();
    assert_eq!(join_typed(full).unwrap(), 1);

    let (refusing, open) = gated(&sched, SpawnOptions::new().mailbox_capacity(0), 0);
    let waited = futures::executor::block_on(refusing.addr().send_wait(1));
    assert_eq!(
        waited.unwrap_err().kind(),
        SendErrorKind::MailboxFull,
        "capacity 0: send_wait refuses at once, as under mailbox_capacity(0)"
    );
    open.send(()).unwrap();
    assert_eq!(join_typed(refusing).unwrap(), 0);
    sched.shutdown(HANG_GUARD);
}

#[test]
fn send_wait_to_a_bound_of_one_delivers_every_message_once_in_order_from_four_senders() {
    const SENDERS: u32 = 4;
    const EACH: u32 = 500;
    // Unbounded by default: only the process's own bound makes its senders wait.
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let (open, gate) = oneshot::channel::<()>();
    let sink = sched
        .spawn_fn_with(
            SpawnOptions::new().mailbox_capacity(1),
            move |cx: ProcessCx<(u32, u32)>| async move {
                gate.await?;
                let mut next = vec![0; SENDERS as usize];
                for _ in 0..SENDERS * EACH {
                    let (sender, n) = cx.recv().await?;
                    assert_eq!(n, next[sender as usize], "sender {sender}'s order");
                    next[sender as usize] += 1;
                }
                Ok::<_, BoxError>(next)
            },
        )
        .unwrap();
    let (delivered_tx, delivered) = mpsc::channel::<()>();
    let senders: Vec<_> = (0..SENDERS)
        .map(|sender| {
            let addr = sink.addr();
            let delivered = delivered_tx.clone();
            thread::spawn(move || {
                futures::executor::block_on(async {
                    for n in 0..EACH {
                        addr.send_wait((sender, n)).await.expect("never refused");
                        let _ = delivered.send(());
                    }
                })
            })
        })
        .collect();
    // While the body receives nothing, one message fits and the rest wait.
    delivered.recv_timeout(HANG_GUARD).expect("hang guard");
    let refused = sink.addr().send((0, EACH)).unwrap_err();
    assert!(refused.is_mailbox_full(), "the bound of 1 is reached");
    open.send(()).unwrap();
    for sender in senders {
        sender.join().unwrap();
    }
    assert_eq!(
        join_typed(sink).unwrap(),
        vec![EACH; SENDERS as usize],
        "every message once"
    );
    sched.shutdown(HANG_GUARD);
}

/// Spawns a child that fails from a parent that traps exits, with `spawn_child`; returns
/// whether the parent received the child's `Failed` exit.
fn trapped_exit_of_a_failing_child(
    sched: &Scheduler,
    spawn_child: fn(&ProcessCx<()>) -> Result<Pid, SpawnError>,
) -> bool {
    let parent = sched
        .spawn_fn(move |cx: ProcessCx<()>| async move {
            cx.trap_exit(true);
            let child = spawn_child(&cx)?;
            let exit = cx.recv_exit().await?;
            Ok::<_, BoxError>(exit.pid == child && exit.reason.is_failed())
        })
        .unwrap();
    join_typed(parent).unwrap()
}

async fn fails(_: ProcessCx) -> Result<(), BoxError> {
    Err("the child fails".into())
}

#[test]
fn the_link_option_links_as_spawn_fn_linked_does() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let linked = trapped_exit_of_a_failing_child(&sched, |cx| {
        Ok(cx.scheduler().spawn_fn_linked(cx.pid(), fails)?.pid())
    });
    let with_option = trapped_exit_of_a_failing_child(&sched, |cx| {
        let opts = SpawnOptions::new().link(cx.pid());
        Ok(cx.spawn_fn_with(opts, fails)?.pid())
    });
    let with_option_and_bound = trapped_exit_of_a_failing_child(&sched, |cx| {
        let opts = SpawnOptions::new().mailbox_capacity(0).link(cx.pid());
        Ok(cx.scheduler().spawn_fn_with(opts, fails)?.pid())
    });
    assert!(
        linked,
        "spawn_fn_linked: the exit reaches the trapping parent"
    );
    assert_eq!(with_option, linked, "the link option: the same");
    assert_eq!(with_option_and_bound, linked, "with a bound too");
    sched.shutdown(HANG_GUARD);
}

/// A state machine that fails at its first step.
struct Fails;

impl Process for Fails {
    type Output = ();
    fn step(&mut self, _: &mut Events, _: &mut StepOutput<()>) -> Result<(), BoxError> {
        Err("fails".into())
    }
}

/// A state machine whose first step tells `entered`, then holds until `release`: what is sent
/// meanwhile waits in its mailbox.
struct Held {
    entered: mpsc::Sender<()>,
    release: mpsc::Receiver<()>,
}

impl Process for Held {
    type Output = ();
    fn step(&mut self, _: &mut Events, out: &mut StepOutput<()>) -> Result<(), BoxError> {
        self.entered.send(())?;
        self.release.recv_timeout(HANG_GUARD)?;
        out.done(());
        Ok(())
    }
}

#[test]
fn spawn_with_gives_a_state_machine_its_bound_and_its_link() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let parent = sched
        .spawn_fn(|cx: ProcessCx<()>| async move { Ok::<_, BoxError>(cx.recv().await?) })
        .unwrap();
    let opts = SpawnOptions::new().link(parent.pid());
    let child = sched
        .spawn_with(opts, Fails, "run", Payload::empty())
        .unwrap();
    let _ = join_typed(child);
    let parent_end = join_typed(parent).unwrap_err();
    assert!(
        parent_end.exit_reason().is_failed(),
        "ended with its linked child, as under spawn_linked: {parent_end:?}"
    );

    let (entered_tx, entered) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let held = Held {
        entered: entered_tx,
        release: release_rx,
    };
    let opts = SpawnOptions::new().mailbox_capacity(2);
    let held = sched
        .handle()
        .spawn_with(opts, held, "run", Payload::empty())
        .unwrap();
    entered.recv_timeout(HANG_GUARD).expect("hang guard");
    let addr = sched.handle().addr::<u32>(held.pid());
    assert_eq!(fill(&addr, 10), (2, SendErrorKind::MailboxFull));
    release.send(()).unwrap();
    join_typed(held).unwrap();
    sched.shutdown(HANG_GUARD);
}

#[test]
fn a_supervised_child_keeps_a_bound_of_its_own_across_restarts() {
    use procsched::supervision::{ChildOptions, ChildSpec, Strategy, Supervisor};
    let sched = Scheduler::builder().workers(2).build().unwrap(); // unbounded
    let queue = ChildSpec::new("queue", |start| {
        start.spawn_fn_with(
            ChildOptions::new().mailbox_capacity(2),
            |cx: ProcessCx<u32>| async move {
                let Err(cancelled) = cx.cancelled().await;
                Err::<(), BoxError>(cancelled.into())
            },
        )
    })
    .register_as("queue");
    let _sup = sched
        .block_on(
            Supervisor::new(Strategy::OneForOne)
                .child(queue)
                .start(sched.handle()),
        )
        .unwrap();
    let mut killed = None;
    for instance in 0..3 {
        // The instance after the last kill, registered under the name.
        let deadline = std::time::Instant::now() + HANG_GUARD;
        let pid = loop {
            match sched.whereis("queue") {
                Some(pid) if Some(pid) != killed => break pid,
                _ => {
                    assert!(std::time::Instant::now() < deadline, "hang guard");
                    thread::yield_now();
                }
            }
        };
        let addr = sched.handle().addr::<u32>(pid);
        assert_eq!(
            fill(&addr, 10),
            (2, SendErrorKind::MailboxFull),
            "instance {instance}: its own bound of 2"
        );
        sched.terminate(pid).unwrap();
        killed = Some(pid);
    }
    sched.shutdown(HANG_GUARD);
}

/// A state machine whose first step tells `entered`, then holds until `release` says: a
/// release fails it (its supervisor restarts it), a dropped release ends it `Normal` (a
/// transient child is not restarted then).
struct HeldChild {
    entered: mpsc::Sender<()>,
    release: mpsc::Receiver<()>,
}

impl Process for HeldChild {
    type Output = ();
    fn step(&mut self, _: &mut Events, out: &mut StepOutput<()>) -> Result<(), BoxError> {
        self.entered.send(())?;
        match self.release.recv_timeout(HANG_GUARD) {
            Ok(()) => Err("released: fails, to be restarted".into()),
            Err(_) => {
                out.done(());
                Ok(())
            }
        }
    }
}

/// One instance of the held child: its PID, its first step's signal, its release.
type Instance = (Pid, mpsc::Receiver<()>, mpsc::Sender<()>);

#[test]
fn a_supervised_state_machine_keeps_a_bound_of_its_own_across_restarts() {
    use procsched::supervision::{ChildOptions, ChildSpec, Restart, Supervisor};
    let sched = Scheduler::builder().workers(2).build().unwrap(); // unbounded
    let (started_tx, started) = mpsc::channel::<Instance>();
    let held = ChildSpec::new("held", move |start| {
        let (entered_tx, entered) = mpsc::channel();
        let (release, release_rx) = mpsc::channel();
        let child = HeldChild {
            entered: entered_tx,
            release: release_rx,
        };
        let opts = ChildOptions::new().mailbox_capacity(2);
        let pid = start.spawn_with(opts, child, "run", Payload::empty())?;
        started_tx
            .send((pid, entered, release))
            .expect("the test holds the receiver");
        Ok(pid)
    })
    .restart(Restart::Transient);
    let _sup = sched
        .block_on(Supervisor::one_for_one().child(held).start(sched.handle()))
        .unwrap();
    // Two restarts: within the default intensity (3 in 5 s).
    const INSTANCES: usize = 3;
    for instance in 0..INSTANCES {
        let (pid, entered, release) = started.recv_timeout(HANG_GUARD).expect("hang guard");
        entered.recv_timeout(HANG_GUARD).expect("hang guard");
        let addr = sched.handle().addr::<u32>(pid);
        assert_eq!(
            fill(&addr, 10),
            (2, SendErrorKind::MailboxFull),
            "instance {instance}: its own bound of 2"
        );
        if instance + 1 < INSTANCES {
            release.send(()).unwrap(); // it fails, and is restarted
        } // else the release is dropped: it ends `Normal`, and is not restarted
    }
    sched.shutdown(HANG_GUARD);
}
