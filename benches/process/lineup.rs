//! The line-up: every peer of the comparison in run and table order, and what runs on each of
//! them outside criterion (a child process's work by peer name, the latency run on all three).

use crate::actors::ActorSystem;
use crate::native::Native;
use crate::procsched_peer::Procsched;
use crate::rss;
use crate::samples::LatencySample;
use crate::workload::Peer;

/// Every peer, in run and table order: procsched first, then the two tokio baselines.
pub(crate) const PEERS: [&str; 3] = [Procsched::NAME, Native::NAME, ActorSystem::NAME];

/// A child process's work (see [`rss`]): `spec` is `<task>/<peer>`.
pub(crate) fn child(spec: &str) {
    let (task, peer) = spec.rsplit_once('/').expect("child spec is <task>/<peer>");
    match peer {
        Procsched::NAME => rss::child::<Procsched>(task),
        Native::NAME => rss::child::<Native>(task),
        ActorSystem::NAME => rss::child::<ActorSystem>(task),
        other => panic!("unknown peer {other}"),
    }
}

/// Round trips on a fresh instance of every peer, one after the other.
pub(crate) fn latencies() -> Vec<(&'static str, LatencySample)> {
    fn one<P: Peer>() -> (&'static str, LatencySample) {
        let peer = P::build();
        let sample = peer.latency();
        peer.shutdown();
        (P::NAME, sample)
    }
    vec![one::<Procsched>(), one::<Native>(), one::<ActorSystem>()]
}
