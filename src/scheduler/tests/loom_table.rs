//! Loom models of the process table: the free list and slot reuse against stale producers.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --lib --release loom_`

use crate::loom::model::model;
use crate::loom::{thread, Arc};
use crate::process::mailbox::Admission;
use crate::process::Payload;
use crate::process::{Event, Events, Message, Pid};
use crate::scheduler::table::Table;

fn finish(table: &Table, pid: Pid) {
    let cell = table.get(pid).expect("claimed");
    cell.close();
    table.release(pid, cell);
}

#[test]
fn loom_free_list_never_hands_a_slot_to_two_live_processes() {
    model(|| {
        let table = Arc::new(Table::new(usize::MAX));
        // Two slots on the free list, so both threads pop and push concurrently.
        let (a, _) = table.claim().unwrap();
        let (b, _) = table.claim().unwrap();
        finish(&table, a);
        finish(&table, b);
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let table = table.clone();
                thread::spawn(move || {
                    let (first, _) = table.claim().unwrap();
                    finish(&table, first);
                    let (second, _) = table.claim().unwrap();
                    second
                })
            })
            .collect();
        let held: Vec<Pid> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_ne!(
            held[0].index(),
            held[1].index(),
            "one slot, two live processes"
        );
        for pid in held {
            assert!(pid.generation() >= 2 || pid.index() >= 2);
            finish(&table, pid);
        }
        assert_eq!(table.len(), 0);
    });
}

#[test]
fn loom_stale_pid_racing_with_the_slots_reuse_never_reaches_the_next_process() {
    model(|| {
        let table = Arc::new(Table::new(usize::MAX));
        let (old, _) = table.claim().unwrap();
        let sender = {
            let table = table.clone();
            thread::spawn(move || {
                let message = Event::Message(Message::new("late", Payload::empty()));
                table.get(old).unwrap().deliver(old.generation(), message)
            })
        };
        finish(&table, old);
        let (new, cell) = table.claim().unwrap();
        assert_eq!(new.index(), old.index(), "the slot is reused");
        let outcome = sender.join().unwrap();
        let mut events = Events::default();
        let _ = cell.drain_into(&mut events, 8, None);
        assert!(events.is_empty(), "the next process got a stale message");
        assert!(matches!(
            outcome,
            Admission::Accepted | Admission::Closed | Admission::Gone
        ));
    });
}

/// `Table::occupied` — claims minus releases, two counters — read while a process is claimed
/// on one thread and released on another (the cell handed over as a process is) is 0 or 1,
/// never a wrapped-around difference: the release read first acquires its claim.
#[test]
fn loom_occupied_read_racing_with_a_claim_and_its_release_never_underflows() {
    use crate::loom::atomic::{AtomicU64, Ordering::*};
    model(|| {
        let table = Arc::new(Table::new(usize::MAX));
        let handoff = Arc::new(AtomicU64::new(0));
        let spawner = {
            let (table, handoff) = (table.clone(), handoff.clone());
            thread::spawn(move || {
                let (pid, _) = table.claim().unwrap();
                handoff.store(pid.as_u64(), Release);
            })
        };
        let worker = {
            let (table, handoff) = (table.clone(), handoff.clone());
            thread::spawn(move || loop {
                if let Some(pid) = Pid::from_raw(handoff.load(Acquire)) {
                    finish(&table, pid);
                    return;
                }
                thread::yield_now();
            })
        };
        let seen = table.occupied();
        assert!(seen <= 1, "occupied read {seen}");
        spawner.join().unwrap();
        worker.join().unwrap();
        assert_eq!(table.occupied(), 0);
    });
}
