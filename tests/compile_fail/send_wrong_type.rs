// An `Addr<Amount>` sends `Amount`s only.
use procsched::prelude::*;

struct Amount(u64);

fn main() {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let session = sched
        .spawn_fn(|cx: ProcessCx<Amount>| async move { Ok::<_, BoxError>(cx.recv().await?.0) })
        .unwrap();
    let addr: Addr<Amount> = session.addr();
    addr.send(5u64).unwrap();
}
