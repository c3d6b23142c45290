//! The smallest procsched program: one process, written as an async fn, greeting by message.
//! Run: `cargo run --example hello`.
use procsched::prelude::*;

fn main() -> Result<(), BoxError> {
    let sched = Scheduler::builder().workers(1).build()?;
    let greeter = sched.spawn_fn(|cx: ProcessCx| async move {
        let name: String = cx.recv().await?; // Idle until a message arrives
        Ok::<_, BoxError>(format!("hello, {name} (from process {})", cx.pid()))
    })?;
    sched.send(
        greeter.pid(),
        Message::new("name", Payload::new("world".to_owned())),
    )?;
    println!("{}", sched.block_on(greeter)?);
    Ok(())
}
