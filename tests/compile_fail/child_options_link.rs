// A supervised child's link is its supervisor's: its options have no other to ask for.
use procsched::prelude::*;
use procsched::supervision::{ChildOptions, ChildSpec};

fn main() {
    let _ = ChildSpec::new("worker", |start| {
        let elsewhere = start.supervisor();
        let opts = ChildOptions::new().mailbox_capacity(8).link(elsewhere);
        start.spawn_fn_with(opts, |cx: ProcessCx<u64>| async move {
            Ok::<_, BoxError>(cx.recv().await?)
        })
    });
}
