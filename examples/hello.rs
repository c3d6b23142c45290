//! The smallest procsched program: one process, written as an async fn, greeting by message.
//! Run: `cargo run --example hello`.
use procsched::prelude::*;

fn main() -> Result<(), BoxError> {
    let sched = Scheduler::builder().workers(1).build()?;
    // A process that receives `String`s: its address only takes those.
    let greeter = sched.spawn_fn(|cx: ProcessCx<String>| async move {
        let name = cx.recv().await?; // Idle until a message arrives
        Ok::<_, BoxError>(format!("hello, {name} (from process {})", cx.pid()))
    })?;
    greeter.addr().send("world".to_owned())?;
    println!("{}", sched.block_on(greeter)?);
    Ok(())
}
