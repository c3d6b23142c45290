// A `ProcessCx<u64>` receives `u64`s.
use procsched::prelude::*;

fn main() {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let _ = sched.spawn_fn(|cx: ProcessCx<u64>| async move {
        let text: String = cx.recv().await?;
        Ok::<_, BoxError>(text)
    });
}
