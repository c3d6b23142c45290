//! A tokio app with procsched: 1 000 order processes written as async fns, async handlers doing
//! tokio timers and file reads, typed results awaited in a `JoinSet`, messages, one terminate,
//! and a graceful `shutdown_async`. Run: `cargo run --release --example tokio_app`.
use procsched::prelude::*;
use std::time::Duration;
use tokio::task::JoinSet;

struct LoadPrice(u64); // reads a price list from disk
struct Reserve(u64); // a remote call: a timer stands in for the network
procsched::command!(LoadPrice => u64, Reserve => bool);

async fn load_price(LoadPrice(id): LoadPrice) -> std::io::Result<u64> {
    let list = tokio::fs::read_to_string(std::env::temp_dir().join("procsched-prices.txt")).await?;
    Ok(list.lines().count() as u64 * 10 + id % 7)
}

async fn reserve(Reserve(id): Reserve) -> Result<bool, BoxError> {
    tokio::time::sleep(Duration::from_millis(id % 5)).await;
    Ok(id % 10 != 0)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    tokio::fs::write(
        std::env::temp_dir().join("procsched-prices.txt"),
        "a\nb\nc\n",
    )
    .await?;
    let sched = Scheduler::builder()
        .async_handler(load_price)
        .async_handler(reserve)
        .build()?;
    let (mut orders, mut pids) = (JoinSet::new(), Vec::new());
    for id in 0..1_000u64 {
        let order = sched.spawn_fn(move |cx: ProcessCx| async move {
            let (price, reserved) = futures::join!(cx.call(LoadPrice(id)), cx.call(Reserve(id)));
            let coupon: u64 = cx.recv().await?; // waits Idle for its message
            Ok::<_, BoxError>(if reserved? { price? - coupon } else { 0 })
        })?;
        pids.push(order.pid());
        orders.spawn(order);
    }
    for (i, pid) in pids.iter().enumerate().skip(1) {
        sched.send(*pid, Message::new("coupon", Payload::new(i as u64 % 3)))?;
    }
    sched.terminate(pids[0])?; // order 0 never gets its coupon: stop it
    let (mut revenue, mut failed) = (0, 0);
    while let Some(joined) = orders.join_next().await {
        match joined? {
            Ok(amount) => revenue += amount,
            Err(error) if error.is_terminated() => failed += 1,
            Err(error) => return Err(error.into()),
        }
    }
    let report = sched.shutdown_async(Duration::from_secs(1)).await;
    println!("revenue {revenue}, {failed} terminated, shutdown {report:?}");
    assert_eq!((failed, report.total()), (1, 0));
    Ok(())
}
