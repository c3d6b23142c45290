//! A ring of processes passing a token: each process receives the token, forwards it to the
//! next one, and finishes after it has seen `laps` tokens. Run:
//! `cargo run --release --example ring -- <processes> <laps>` (defaults: 1 000 processes, 100 laps).
use procsched::prelude::*;
use std::time::Instant;

/// What a ring member receives: its neighbour's address first, then tokens.
enum Ring {
    Next(Addr<Ring>),
    Token(u64),
}

fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>());
    let processes = args.next().transpose()?.unwrap_or(1_000);
    let laps = args.next().transpose()?.unwrap_or(100);
    let sched = Scheduler::builder().build()?;

    let members: Vec<ProcessHandle<u64, Ring>> = (0..processes)
        .map(|_| {
            sched.spawn_fn(move |cx: ProcessCx<Ring>| async move {
                let Ring::Next(next) = cx.recv().await? else {
                    return Err("the neighbour comes first".into());
                };
                for _ in 0..laps {
                    let Ring::Token(hops) = cx.recv().await? else {
                        return Err("one neighbour only".into());
                    };
                    // The last member's last forward may find the first one already finished.
                    let _ = next.send(Ring::Token(hops + 1));
                }
                Ok::<_, BoxError>(laps)
            })
        })
        .collect::<Result<_, _>>()?;
    let addrs: Vec<Addr<Ring>> = members.iter().map(ProcessHandle::addr).collect();
    for (i, addr) in addrs.iter().enumerate() {
        addr.send(Ring::Next(addrs[(i + 1) % addrs.len()].clone()))?;
    }

    let started = Instant::now();
    addrs[0].send(Ring::Token(0))?;
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
