//! Membership: nodes claim their name in a JetStream key-value bucket, refresh it as their
//! heartbeat, and watch the bucket for each other.
//!
//! - **Claim**: `create` of the key `<name>` (fails while another life of the name is in the
//!   bucket: a restarted node waits for its old entry to expire — the bucket's max age, and
//!   NATS's lateness — while the entry does not change; one that changes is a live node's,
//!   and the name is taken).
//! - **Heartbeat**: `update` of the key at the revision it last wrote, every `heartbeat`, with
//!   the node's incarnation and load. The bucket's max age is three heartbeats, so a dead node's
//!   entry disappears by itself.
//! - **Watch**: every node watches the whole bucket: a `Put` is a node alive (a new incarnation
//!   of a known name: the old one is dead), a `Delete`/`Purge` a node gone (a clean stop; its
//!   frames read after that do not bring it back: `departed.rs`).
//! - **Down**: a node whose last heartbeat is older than `down_after` is declared down by a
//!   sweep every half heartbeat: so a SIGKILLed node is seen down within
//!   `down_after + heartbeat / 2` — or at once, if a frame is sent to it: its subscription
//!   died with it, and NATS answers the frame's reply subject "no responders"
//!   (`NodeShared::peer_unreached`). A sweep that runs a heartbeat late finds this node was
//!   stalled itself (paused, starved), and gives every peer a fresh `down_after` instead of
//!   judging them by a silence it caused (`sweep`). The heartbeat also says how many times the node declared
//!   each of its peers down, so that a peer declared down while alive hears of it
//!   (`severance.rs`).
//! - **Evicted**: a node cut off for longer than its entry lives may find its name claimed by
//!   another node when it comes back — its heartbeat's new claim fails with the name taken, or
//!   its watch reads its name at another incarnation: it has lost its name (`eviction.rs`).

use super::node::{Load, NodeShared, PeerId};
use super::severance::{self, Severed};
use async_nats::jetstream::kv::{self, Operation};
use futures::StreamExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The bucket and this node's claim in it.
pub(crate) struct Membership {
    pub(crate) store: kv::Store,
    pub(crate) revision: u64,
}

/// Opens (or creates) the bucket and claims `node`'s name, waiting for a previous life's entry
/// to expire if there is one.
///
/// A claim that fails for another reason is retried until `patience` runs out: a bucket just
/// created on a NATS cluster has no stream leader for a moment (the server answers "no
/// responders"), and a server that just died leaves its clients reconnecting. Nodes started
/// together with their servers meet exactly that.
pub(crate) async fn join(
    client: &async_nats::Client,
    bucket: &str,
    name: &str,
    heartbeat: Duration,
    replicas: usize,
    load: Load,
    patience: Duration,
) -> Result<Membership, JoinError> {
    let started = Instant::now();
    let incarnation = load.incarnation;
    let value = encode(&Beat::new(load, severance::Report::default()));
    // The holder's entry as first seen, and when: a live holder rewrites it every heartbeat,
    // a dead one's stays until it expires (`Taken` below).
    let mut held: Option<((u64, u64), Instant)> = None;
    let mut backoff = Duration::from_millis(20);
    loop {
        let attempt = match open_bucket(client, bucket, heartbeat, replicas).await {
            Ok(store) => match matching_max_age(&store, heartbeat).await {
                Err(Some(mismatch)) => return Err(JoinError::Config(mismatch)),
                Err(None) => format!("reading the membership bucket `{bucket}`'s settings"),
                Ok(()) => match store.create(name, value.clone().into()).await {
                    Ok(revision) => return Ok(Membership { store, revision }),
                    Err(error) if error.kind() == kv::CreateErrorKind::AlreadyExists => {
                        // Our own entry: an earlier attempt's create landed and its answer
                        // was lost (a timeout, a reconnection). Waiting for it to expire would
                        // delay the join by three heartbeats, or fail it `Taken`.
                        let holder = holder(&store, name).await;
                        if let Some(revision) = own_claim(holder, incarnation) {
                            return Ok(Membership { store, revision });
                        }
                        if is_taken(&mut held, holder, heartbeat, patience) {
                            return Err(JoinError::Taken);
                        }
                        tokio::time::sleep(heartbeat / 2).await;
                        continue;
                    }
                    Err(error) => format!("claiming the node name `{name}`: {error}"),
                },
            },
            Err(error) => error,
        };
        if started.elapsed() >= patience {
            return Err(JoinError::Failed(attempt));
        }
        tracing::debug!(error = %attempt, "joining the cluster: retrying");
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2)
            .min(heartbeat / 2)
            .max(Duration::from_millis(1));
    }
}

/// Whether the name is held by a live node, given its entry `now` (incarnation, revision;
/// `None`: gone since the claim failed) and the entry as first seen (`held`, kept here).
///
/// A live holder rewrites its entry every heartbeat: an entry that changed while this node
/// waited is a live node's — OTP's `already_started`, told within a heartbeat or two. A dead
/// node's entry does not change and is waited for until it expires: three heartbeats after its
/// last, as the bucket's max age says, but NATS's expiry runs late by a heartbeat or more at
/// short heartbeats (a black-box review measured 4–6 at 34–50 ms), so no bound in heartbeats
/// is taken for granted; only `patience` ends that wait (an entry that never expires is held).
fn is_taken(
    held: &mut Option<((u64, u64), Instant)>,
    now: Option<(u64, u64)>,
    heartbeat: Duration,
    patience: Duration,
) -> bool {
    let Some(now) = now else {
        *held = None;
        return false; // gone: the next create may claim it
    };
    match *held {
        None => {
            *held = Some((now, Instant::now()));
            false
        }
        Some((first, _)) if first != now => true,
        // Unchanged for longer than the patience (and at least the entry's life): held.
        Some((_, since)) => since.elapsed() >= patience.max(heartbeat * 5),
    }
}

/// The revision of `holder` (the name's entry: its incarnation and revision) if it is this
/// node's own claim, `incarnation` being this node's.
fn own_claim(holder: Option<(u64, u64)>, incarnation: u64) -> Option<u64> {
    holder.and_then(|(held_by, revision)| (held_by == incarnation).then_some(revision))
}

/// Why [`join`] failed.
#[derive(Debug)]
pub(crate) enum JoinError {
    /// A live node holds the name: its entry outlived the wait for a dead node's to expire.
    Taken,
    /// The bucket could not be opened or the name claimed within the patience given.
    Failed(String),
    /// The bucket's entries do not live three of this node's heartbeats.
    Config(String),
}

/// `Ok` if the bucket's entries live three of `heartbeat`s, as every claim and expiry here
/// assumes; `Err(Some(why))` if they do not, `Err(None)` if the settings could not be read (a
/// transient failure: retried).
///
/// The bucket's max age is set once, by the node that creates it, and kept (file storage)
/// after every node has gone: a node with another heartbeat would see its claims hold for
/// too short (a second live node under its name) or too long (its own restart refused).
async fn matching_max_age(store: &kv::Store, heartbeat: Duration) -> Result<(), Option<String>> {
    let max_age = store.status().await.map_err(|_| None)?.max_age();
    if max_age == heartbeat * 3 {
        return Ok(());
    }
    Err(Some(format!(
        "the membership bucket `{}` keeps entries for {max_age:?}, three heartbeats of {:?},          but this node's heartbeat is {heartbeat:?}: every node sharing a bucket needs the          same heartbeat (use another `Cluster::bucket` for another heartbeat, or delete the          old bucket once no node uses it)",
        store.name,
        max_age / 3
    )))
}

/// Opens the bucket, creating it if it does not exist (the first node, or after the server
/// lost it). File storage: the membership survives a server restart.
pub(crate) async fn open_bucket(
    client: &async_nats::Client,
    bucket: &str,
    heartbeat: Duration,
    replicas: usize,
) -> Result<kv::Store, String> {
    let mut jetstream = async_nats::jetstream::new(client.clone());
    jetstream.set_timeout(api_timeout(heartbeat));
    if let Ok(store) = jetstream.get_key_value(bucket).await {
        return Ok(store);
    }
    let config = kv::Config {
        bucket: bucket.to_owned(),
        history: 1,
        max_age: heartbeat * 3,
        storage: async_nats::jetstream::stream::StorageType::File,
        num_replicas: replicas,
        ..Default::default()
    };
    match jetstream.create_key_value(config).await {
        Ok(store) => Ok(store),
        // Another node created it meanwhile.
        Err(error) => jetstream
            .get_key_value(bucket)
            .await
            .map_err(|_| format!("the membership bucket `{bucket}` could not be created: {error}")),
    }
}

/// Refreshes this node's entry every heartbeat, until the node stops.
pub(crate) async fn heartbeat(node: Arc<NodeShared>, store: kv::Store, mut revision: u64) {
    let mut ticks = tokio::time::interval(node.heartbeat);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        // Lost (found by the watch): the name is another node's, even once that one is gone.
        if node.is_evicted() {
            return;
        }
        let load = node.load();
        *crate::loom::lock(&node.last_load) = load;
        // The names first: `peers` is never locked inside `severances`.
        let peers = node.peer_names();
        let forget_after = severance::forget_after(node.down_after);
        let value = encode(&Beat::new(
            load,
            node.severances.report(&peers, forget_after),
        ));
        match store
            .update(&*node.me.name, value.clone().into(), revision)
            .await
        {
            Ok(next) => revision = next,
            Err(error) => {
                // Disconnected (the client reconnects by itself), our entry expired meanwhile
                // (a long disconnection), or the bucket is gone (a server that lost it): make
                // sure the bucket exists and claim the name again if nobody else has.
                tracing::warn!(%error, "heartbeat failed");
                let bucket = store.name.clone();
                if let Err(error) =
                    open_bucket(&node.client, &bucket, node.heartbeat, node.replicas).await
                {
                    tracing::warn!(%error, "membership bucket unavailable");
                    continue;
                }
                match store.create(&*node.me.name, value.into()).await {
                    Ok(next) => revision = next,
                    Err(error) if error.kind() == kv::CreateErrorKind::AlreadyExists => {
                        match holder(&store, &node.me.name).await {
                            // Our own entry, written by an update whose answer was lost.
                            Some((incarnation, at)) if incarnation == node.me.incarnation => {
                                revision = at;
                            }
                            Some((incarnation, _)) => {
                                node.evict(
                                    Some(incarnation),
                                    "the heartbeat found the name claimed by another node",
                                );
                                return;
                            }
                            // Unreadable now, or expired meanwhile: the next beat tries again.
                            None => {}
                        }
                    }
                    Err(error) => tracing::warn!(%error, "claiming the node name again failed"),
                }
            }
        }
    }
}

/// The incarnation in `name`'s entry and the entry's revision, if it can be read and is live.
pub(crate) async fn holder(store: &kv::Store, name: &str) -> Option<(u64, u64)> {
    let entry = store.entry(name).await.ok()??;
    if entry.operation != Operation::Put {
        return None;
    }
    let beat = super::wire::from_shallow::<Beat>(&entry.value).ok()?;
    Some((beat.incarnation, entry.revision))
}

/// Watches the bucket and sweeps for silent nodes, until the node stops.
pub(crate) async fn watch(node: Arc<NodeShared>, store: kv::Store) {
    let sweep = node.runtime.spawn(sweep(Arc::downgrade(&node)));
    let _stop_sweep = AbortOnDrop(sweep.abort_handle());
    // The incarnation in each entry's last put: a delete carries none, and must end only that
    // incarnation (a newer one may be known from its frames already).
    let mut last_put: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    loop {
        let mut entries = match store.watch_with_history(">").await {
            Ok(entries) => entries,
            Err(error) => {
                tracing::warn!(%error, "membership watch failed: retrying");
                tokio::time::sleep(node.heartbeat).await;
                continue;
            }
        };
        while let Some(entry) = entries.next().await {
            let Ok(entry) = entry else {
                break;
            };
            if node.is_evicted() {
                return;
            }
            match entry.operation {
                Operation::Put => match super::wire::from_shallow::<Beat>(&entry.value) {
                    // This node's name at another incarnation: the entry is read after this
                    // node's own claim (the watch starts after it), so the name was claimed
                    // again by another node while this one's entry had expired.
                    Ok(beat)
                        if *entry.key == *node.me.name
                            && beat.incarnation != node.me.incarnation =>
                    {
                        node.evict(
                            Some(beat.incarnation),
                            "the membership shows the name at another incarnation",
                        );
                        return;
                    }
                    // Not a node name (`Cluster::name` refuses it): a key such as `a.b` would
                    // put its frames on other subjects than the node's. Frames from such a
                    // name are refused too (`inbound.rs`).
                    Ok(_) if !super::config::is_token(&entry.key) => {
                        if let Some(suppressed) = node.warn_budget.take() {
                            tracing::warn!(suppressed, key = %entry.key, "membership entry rejected: not a node name");
                        }
                    }
                    Ok(beat) => {
                        let id = PeerId {
                            name: entry.key.as_str().into(),
                            incarnation: beat.incarnation,
                        };
                        // A count left out of a cut list is not a zero: what this node
                        // acted on stands.
                        let severed_us = match severance::reported(&node.me, &beat.severed) {
                            Some(count) => count,
                            None if beat.truncated => node.acted_on(&id),
                            None => 0,
                        };
                        last_put.insert(entry.key.clone(), beat.incarnation);
                        node.peer_seen(id, beat.load(), severed_us);
                        let known = node.peers.read().expect("peers lock").len();
                        forget_gone(&mut last_put, known, || node.peer_names());
                    }
                    Err(error) => {
                        if let Some(suppressed) = node.warn_budget.take() {
                            tracing::warn!(suppressed, key = %entry.key, %error, "membership entry rejected");
                        }
                    }
                },
                Operation::Delete | Operation::Purge => {
                    let left = last_put.remove(&entry.key);
                    node.departed(&entry.key, left);
                }
            }
        }
        tokio::time::sleep(node.heartbeat / 2).await;
    }
}

/// Above this many names beyond twice the peers, [`forget_gone`] prunes the watch's map.
const LAST_PUT_SLACK: usize = 64;

/// Keeps the watch's map of last puts from growing with every name ever seen: a node that died
/// without deleting its entry (its entry expired) is never deleted, so its name would stay for
/// the node's life — in a cluster whose nodes are named afresh at each start, without bound.
/// Pruned to the current peers once it holds more than twice as many names (amortised: a
/// prune at most once per that many puts). A delete of a pruned name is declared without its
/// incarnation, as one never seen put is (`departed.rs`).
fn forget_gone(
    last_put: &mut std::collections::HashMap<String, u64>,
    peers_known: usize,
    peer_names: impl FnOnce() -> Vec<Arc<str>>,
) {
    if last_put.len() <= 2 * peers_known + LAST_PUT_SLACK {
        return;
    }
    let peers = peer_names();
    let live: std::collections::HashSet<&str> = peers.iter().map(|name| &**name).collect();
    last_put.retain(|name, _| live.contains(name.as_str()));
}

/// Declares down every peer silent for longer than `down_after`.
///
/// Unless this node was itself stalled: a sweep that runs a heartbeat or more late (the
/// process was paused — SIGSTOP, a VM migration — or its runtime starved) has not been
/// reading either, and its peers' heartbeats wait unread in its subscription. Judging them
/// by the silence it caused, it declared every peer down at once on waking, after they had
/// taken it back — a second teardown of every link and monitor between them. Such a sweep gives
/// each peer a fresh `down_after` from now instead (a peer that died meanwhile is declared
/// down that much later; a frame to it still meets no responder at once).
async fn sweep(node: std::sync::Weak<NodeShared>) {
    let (every, heartbeat) = match node.upgrade() {
        Some(node) => (node.heartbeat / 2, node.heartbeat),
        None => return,
    };
    let mut last = Instant::now();
    loop {
        tokio::time::sleep(every).await;
        let Some(node) = node.upgrade() else {
            return;
        };
        let now = Instant::now();
        let slept = now.duration_since(last);
        last = now;
        if was_stalled(slept, heartbeat) {
            tracing::warn!(
                late = ?slept.saturating_sub(every),
                "this node was stalled: its peers' silence is not theirs; each gets a fresh down_after"
            );
            for peer in node.peers.write().expect("peers lock").values_mut() {
                peer.last_seen = now;
            }
            continue;
        }
        let silent: Vec<PeerId> = node
            .peers
            .read()
            .expect("peers lock")
            .values()
            .filter(|peer| peer.last_seen.elapsed() > node.down_after)
            .map(|peer| peer.id.clone())
            .collect();
        for peer in silent {
            node.sever(&peer.name, Some(peer.incarnation), "no heartbeat");
        }
    }
}

/// Whether a sweep that slept `slept` (it asked for half a heartbeat) was held up a
/// heartbeat or more: this node was not running, nor reading its peers' heartbeats.
fn was_stalled(slept: Duration, heartbeat: Duration) -> bool {
    slept > heartbeat / 2 + heartbeat
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How long a membership request to JetStream (claim, heartbeat, watch) waits for its answer.
/// async-nats's default is the client's request timeout (10 s): a request lost while the
/// bucket's stream elects a new leader (a server died) would stall a heartbeat past
/// `down_after`, or a new node's watch for 10 s at a time. A few heartbeats is plenty for an
/// answer and retries soon enough.
fn api_timeout(heartbeat: Duration) -> Duration {
    (heartbeat * 4).clamp(Duration::from_secs(1), Duration::from_secs(10))
}

/// A membership entry's value: the node's life and load, and how many times it declared each
/// of its peers down (`severance.rs`: a peer it sends nothing to learns it here).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Beat {
    incarnation: u64,
    live: u64,
    runnable: u64,
    /// Absent in an entry from a node that predates it: none.
    #[serde(default)]
    severed: Vec<Severed>,
    /// Absent in an entry from a node that predates it: not shutting down.
    #[serde(default)]
    shutting_down: bool,
    /// Some counts of nodes that are no peers of the writer were left out of `severed`
    /// (`Severances::report`). Absent in an entry from a node that predates it: none was.
    #[serde(default)]
    truncated: bool,
}

impl Beat {
    fn new(load: Load, report: severance::Report) -> Beat {
        Beat {
            incarnation: load.incarnation,
            live: load.live,
            runnable: load.runnable,
            severed: report.severed,
            shutting_down: load.shutting_down,
            truncated: report.truncated,
        }
    }

    fn load(&self) -> Load {
        Load {
            incarnation: self.incarnation,
            live: self.live,
            runnable: self.runnable,
            shutting_down: self.shutting_down,
        }
    }
}

fn encode(beat: &Beat) -> Vec<u8> {
    // Integers and node names under named fields: encoding cannot fail.
    rmp_serde::to_vec_named(beat).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_held_up_a_heartbeat_or_more_finds_its_node_stalled() {
        let heartbeat = Duration::from_millis(500);
        // On time, or late by less than a heartbeat (a busy runtime): peers are judged.
        assert!(!was_stalled(Duration::from_millis(250), heartbeat));
        assert!(!was_stalled(Duration::from_millis(700), heartbeat));
        // A pause of a heartbeat or more (SIGSTOP, a VM migration): they are not.
        assert!(was_stalled(Duration::from_millis(800), heartbeat));
        assert!(was_stalled(Duration::from_secs(3), heartbeat));
    }

    #[test]
    fn the_last_puts_are_pruned_to_the_peers_once_they_outgrow_them() {
        let mut last_put = std::collections::HashMap::new();
        let peers: Vec<Arc<str>> = vec!["a".into(), "b".into()];
        for n in 0..=(2 * peers.len() + LAST_PUT_SLACK) {
            last_put.insert(format!("gone-{n}"), n as u64);
        }
        last_put.insert("a".to_owned(), 7);
        last_put.insert("b".to_owned(), 8);
        forget_gone(&mut last_put, peers.len(), || peers.clone());
        assert_eq!(last_put.len(), 2, "only the peers' names are kept");
        assert_eq!((last_put["a"], last_put["b"]), (7, 8));
        // Within the bound nothing is pruned (and the names are not even asked for).
        last_put.insert("gone".to_owned(), 1);
        forget_gone(&mut last_put, peers.len(), || unreachable!("no prune"));
        assert_eq!(last_put.len(), 3);
    }

    #[test]
    fn a_name_held_at_this_nodes_incarnation_is_its_own_claim() {
        // An earlier create whose answer was lost: ours, joined at its revision.
        assert_eq!(own_claim(Some((41, 9)), 41), Some(9));
        // Another life of the name (or unreadable, or expired): not ours, wait or fail Taken.
        assert_eq!(own_claim(Some((40, 9)), 41), None);
        assert_eq!(own_claim(None, 41), None);
    }
}
