// A supervised child's spawn takes `ChildOptions`, not `SpawnOptions`: a link asked for there
// could not be made, so it is refused here rather than ignored at run time.
use procsched::prelude::*;
use procsched::supervision::ChildSpec;

fn main() {
    let _ = ChildSpec::new("worker", |start| {
        let elsewhere = start.supervisor();
        let opts = SpawnOptions::new().mailbox_capacity(8).link(elsewhere);
        start.spawn_fn_with(opts, |cx: ProcessCx<u64>| async move {
            Ok::<_, BoxError>(cx.recv().await?)
        })
    });
}
