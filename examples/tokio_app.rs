//! A tokio app with procsched: 1 000 order processes (async fns with typed mailboxes) calling
//! async handlers (a file read, a timer), asking a coupon process, awaited in a `JoinSet`; one
//! terminate, then a graceful `shutdown_async`. Run: `cargo run --release --example tokio_app`.
use procsched::prelude::*;
use std::time::Duration;

struct LoadPrice(u64); // file I/O stands in for a price database
struct Reserve(u64); // a remote call: a timer stands in for the network
procsched::command!(LoadPrice => u64, Reserve => bool);

async fn load_price(LoadPrice(id): LoadPrice) -> std::io::Result<u64> {
    let store = tokio::fs::metadata(std::env::temp_dir()).await?;
    Ok(if store.is_dir() { 30 + id % 7 } else { 0 })
}

async fn reserve(Reserve(id): Reserve) -> Result<bool, BoxError> {
    tokio::time::sleep(Duration::from_millis(id % 5)).await;
    Ok(id % 10 != 0)
}

/// A process answering asks: on shutdown its `?` ends it as cancelled, not failed.
async fn coupons(cx: ProcessCx<(u64, Reply<u64>)>) -> Result<(), BoxError> {
    loop {
        let (id, reply) = cx.recv().await?;
        let _ = reply.send(id % 3);
    }
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut builder = Scheduler::builder();
    let sched = builder
        .async_handler(load_price)
        .async_handler(reserve)
        .build()?;
    let coupons = sched.spawn_fn(coupons)?;
    let (mut orders, mut addrs) = (tokio::task::JoinSet::new(), Vec::new());
    for id in 0..1_000u64 {
        let coupons = coupons.addr();
        let order = sched.spawn_fn(move |cx: ProcessCx<bool>| async move {
            let (price, reserved) = futures::join!(cx.call(LoadPrice(id)), cx.call(Reserve(id)));
            let go = cx.recv().await?; // Idle until its typed message arrives
            let coupon = coupons.ask(|reply| (id, reply)).await?; // Blocked until answered
            Ok::<_, BoxError>(if go && reserved? { price? - coupon } else { 0 })
        })?;
        addrs.push(order.addr()); // an `Addr<bool>`: sending it anything else does not compile
        orders.spawn(order);
    }
    addrs[1..].iter().try_for_each(|order| order.send(true))?;
    sched.terminate(addrs[0].pid())?; // order 0 never gets its message: stop it
    let mut revenue = 0;
    for result in orders.join_all().await {
        revenue += result.or_else(|e| if e.is_terminated() { Ok(0) } else { Err(e) })?;
    }
    let report = sched.shutdown_async(Duration::from_secs(1)).await;
    assert!(coupons.await.unwrap_err().is_cancelled() && report.graceful == 1);
    println!("revenue {revenue}, shutdown {report:?}");
    Ok(())
}
