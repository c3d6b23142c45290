//! A cart: the process the tests of links, disconnects and supervised remote children place on
//! other nodes. It answers `Total` with the number it was spawned with, until it ends.

use procsched::cluster::Cluster;
use procsched::prelude::*;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What a cart is asked.
#[derive(Serialize, Deserialize)]
pub(crate) enum Cart {
    Total(Reply<u64>),
}

/// Answers `Total` with `start`, for ever.
pub(crate) async fn cart(cx: ProcessCx<Cart>, start: u64) -> Result<(), BoxError> {
    loop {
        let Cart::Total(reply) = cx.recv().await?;
        let _ = reply.send(start);
    }
}

/// Node `name` on the server at `url`, spawning carts (`"cart"`): heartbeats every 200 ms, a
/// silent node declared down after `down_after`, requests waiting up to `guard`.
pub(crate) fn cart_cluster(
    url: &str,
    name: &str,
    down_after: Duration,
    guard: Duration,
) -> Cluster {
    Cluster::nats(url)
        .name(name)
        .heartbeat(Duration::from_millis(200))
        .down_after(down_after)
        .request_timeout(guard)
        .message::<Cart>("cart")
        .spawnable("cart", cart)
}
