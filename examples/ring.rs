//! A ring of processes passing a token: each process receives the token, forwards it to the
//! next one, and finishes after it has seen `laps` tokens. Run:
//! `cargo run --release --example ring -- <processes> <laps>` (defaults: 1 000 processes, 100 laps).
use procsched::prelude::*;
use std::time::Instant;

fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>());
    let processes = args.next().transpose()?.unwrap_or(1_000);
    let laps = args.next().transpose()?.unwrap_or(100);
    let sched = Scheduler::builder().build()?;

    // Spawn the ring: each member learns the PID of the next one from its first message.
    let members: Vec<ProcessHandle<u64>> = (0..processes)
        .map(|_| {
            sched.spawn_fn(move |cx: ProcessCx| async move {
                let next: Pid = cx.recv().await?;
                for _ in 0..laps {
                    let hops: u64 = cx.recv().await?;
                    // The last member's last forward may find the first one already finished.
                    let _ = cx
                        .scheduler()
                        .send(next, Message::new("token", Payload::new(hops + 1)));
                }
                Ok::<_, BoxError>(laps)
            })
        })
        .collect::<Result<_, _>>()?;
    let pids: Vec<Pid> = members.iter().map(ProcessHandle::pid).collect();
    for (i, pid) in pids.iter().enumerate() {
        let next = pids[(i + 1) % pids.len()];
        sched.send(*pid, Message::new("next", Payload::new(next)))?;
    }

    let started = Instant::now();
    sched.send(pids[0], Message::new("token", Payload::new(0u64)))?;
    for member in members {
        sched.block_on(member)?;
    }
    let hops = processes * laps;
    let elapsed = started.elapsed();
    println!(
        "{hops} hops around {processes} processes in {elapsed:.2?}: {:.0} ns/hop",
        elapsed.as_nanos() as f64 / hops as f64
    );
    Ok(())
}
