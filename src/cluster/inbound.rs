//! Frames in: decode (size, header, body), check who claims to send them, then handle each
//! item. Nothing here panics on bad input: a bad frame or item is rejected, counted and
//! traced, and the subscription goes on.

use super::decoding::DecodeScope;
use super::departed;
use super::links;
use super::node::{NodeShared, PeerId, Pending};
use super::peers::WAITER;
use super::severance::Session;
use super::shared_bytes;
use super::wire::{self, Ack, Frame, Item, Refusal, WireReason};
use crate::loom::lock;
use crate::process::{foreign_wake, Pid};
use futures::{FutureExt, StreamExt};
use std::future::Future;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Reads `subscriber` until it ends (the node stops).
///
/// Once this node has lost its name (`eviction.rs`), the subjects are the other node's: the
/// subscription is dropped (unsubscribed), so that NATS delivers their frames to that node
/// alone and answers "no responders" for them once it is gone.
///
/// # Departures
///
/// A node that leaves publishes its last frames (the answers it gave, the messages it sent),
/// then deletes its membership entry (`Node::leave`). The delete reaches this node through the
/// membership watch, its frames through this subscription: two subscriptions, which NATS does
/// not order against each other, read by two tasks. Declared down by the watch, the node would
/// fail with `NoConnection` an ask whose answer is already here, waiting to be read. So the
/// watch hands the departure to this task (`departures`), which first handles every frame
/// already received — the server sent the node's frames before the delete it stored after
/// them — then declares the node down.
pub(crate) async fn run(
    node: Arc<NodeShared>,
    mut subscriber: async_nats::Subscriber,
    mut departures: Departures,
) {
    let mut evicted = std::pin::pin!(node.on_evicted.notified());
    let mut linger = Linger::new(node.sched.spins_waiting());
    let mut asked = false;
    loop {
        let mut poll_next = |cx: &mut Context<'_>| {
            if evicted.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Next::End);
            }
            if let Poll::Ready(Some(departure)) = departures.poll_recv(cx) {
                return Poll::Ready(Next::Departure(departure));
            }
            subscriber.poll_next_unpin(cx).map(|message| match message {
                Some(message) => Next::Frame(message),
                None => Next::End,
            })
        };
        let next = if std::mem::take(&mut asked) && linger.admits() {
            linger.wait(&node, &mut poll_next).await
        } else {
            futures::future::poll_fn(poll_next).await
        };
        match next {
            Next::Frame(message) => match read(&node, &message) {
                ControlFlow::Break(()) => break,
                ControlFlow::Continue(delivered_ask) => asked = delivered_ask,
            },
            Next::Departure((name, left)) => {
                let mut ended = false;
                for _ in 0..DRAIN_AT_DEPARTURE {
                    // Unconstrained: a receive past tokio's per-task budget reports nothing
                    // ready, whatever is there (the drain would stop after ~126 frames).
                    match tokio::task::unconstrained(subscriber.next()).now_or_never() {
                        Some(Some(message)) => {
                            if read(&node, &message).is_break() {
                                ended = true;
                                break;
                            }
                        }
                        Some(None) => {
                            ended = true;
                            break;
                        }
                        None => break,
                    }
                }
                // Unless a frame of the name's next incarnation declared it already.
                if node.take_departure(&name, left) {
                    node.peer_down(&name, Some(left), "left the cluster");
                }
                if ended {
                    break;
                }
            }
            Next::End => break,
        }
    }
}

/// How long the inbound task stays awake after delivering an ask, for its answer (`Linger`).
const LINGER: Duration = Duration::from_micros(30);
/// The most consecutive lingers that missed counted: a backoff of at most 2^10 asks.
const MAX_LINGER_BACKOFF: u32 = 10;

/// After delivering an ask to a process here, the inbound task keeps its tokio thread awake
/// (yielding) until the answer is published, a frame comes, or [`LINGER`] passes.
///
/// Why: the answer is published from the scheduler's worker, into async-nats's connection task
/// (or this node's writer task), which then has to be woken on a tokio thread. With both tokio
/// threads parked, that is a second cross-thread wake-up per remote ask on this node (the first
/// woke the worker), where async-nats's own request/reply makes none: its responder is a tokio
/// task, woken on the connection's thread. A tokio thread kept awake takes the woken task from
/// its queue at its next yield. It costs the thread's time only while an answer is due, and a
/// linger that misses (a slow step, a busy worker) makes the next 2^k asks skip it, as a wait
/// from outside the scheduler that misses its answer (`scheduler/spin_wait.rs`). Never on one
/// core or with `spin_waits(false)`: the same setting.
struct Linger {
    enabled: bool,
    /// Consecutive lingers that missed (capped at [`MAX_LINGER_BACKOFF`]).
    misses: u32,
    /// Asks still to skip lingering for.
    skip: u32,
}

impl Linger {
    fn new(enabled: bool) -> Linger {
        Linger {
            enabled,
            misses: 0,
            skip: 0,
        }
    }

    /// May the task linger for this ask's answer?
    fn admits(&mut self) -> bool {
        if !self.enabled {
            return false;
        }
        if self.skip > 0 {
            self.skip -= 1;
            return false;
        }
        true
    }

    /// The answer went out while the task lingered.
    fn answered(&mut self) {
        self.misses = 0;
    }

    /// [`LINGER`] passed first: the next 2^k - 1 asks do not linger.
    fn missed(&mut self) {
        self.misses = (self.misses + 1).min(MAX_LINGER_BACKOFF);
        self.skip = (1 << self.misses) - 1;
    }

    /// Yields until `poll_next` has something (returned), this node publishes a frame (the
    /// answer, most likely), or [`LINGER`] passes; then waits for `poll_next` as usual.
    async fn wait(
        &mut self,
        node: &NodeShared,
        poll_next: &mut impl FnMut(&mut Context<'_>) -> Poll<Next>,
    ) -> Next {
        let published = node.stats.frames_out();
        let deadline = Instant::now() + LINGER;
        loop {
            let polled = futures::future::poll_fn(|cx| Poll::Ready(poll_next(cx))).await;
            if let Poll::Ready(next) = polled {
                return next;
            }
            if node.stats.frames_out() != published {
                self.answered();
                break;
            }
            if Instant::now() >= deadline {
                self.missed();
                break;
            }
            tokio::task::yield_now().await;
        }
        futures::future::poll_fn(poll_next).await
    }
}

/// A departure: the name whose membership entry was deleted, and the incarnation that put it
/// last (`membership.rs`).
pub(crate) type Departure = (Arc<str>, u64);
/// The membership watch's departures, to the inbound task ("Departures" above).
pub(crate) type Departures = tokio::sync::mpsc::UnboundedReceiver<Departure>;

/// The most frames read at a departure before the node is declared down: the node's last
/// frames came in before its delete, so they are among the first read; the bound keeps a flood
/// from other nodes from holding the departure back.
const DRAIN_AT_DEPARTURE: usize = 4096;

/// What the inbound task does next.
enum Next {
    Frame(async_nats::Message),
    Departure(Departure),
    End,
}

/// One message of the subscription: a frame, or NATS's "no responders". `Break` once this
/// node has lost its name; else whether the frame delivered an ask to a process here (its
/// answer is on its way: `Linger`).
fn read(node: &Arc<NodeShared>, message: &async_nats::Message) -> ControlFlow<(), bool> {
    if node.is_evicted() {
        return ControlFlow::Break(());
    }
    if message.status == Some(async_nats::StatusCode::NO_RESPONDERS) {
        unreached(node, &message.subject);
        return ControlFlow::Continue(false);
    }
    // `Bytes` fields marked `shared_bytes` decode as slices of this frame.
    let asked = shared_bytes::within_frame(&message.payload, || receive(node, &message.payload));
    ControlFlow::Continue(asked)
}

/// NATS's "no responders" answer to one of this node's frames: the peer it was for is gone.
fn unreached(node: &NodeShared, subject: &str) {
    match node.unreached.parse(subject) {
        Some(peer) => node.peer_unreached(&peer),
        None => {
            node.stats.rejected_frame();
            if let Some(suppressed) = node.warn_budget.take() {
                tracing::warn!(
                    suppressed,
                    %subject,
                    "a \"no responders\" answer on a subject this node never used (forged?): rejected"
                );
            }
        }
    }
}

/// One frame; `true` if it delivered an ask to a process here.
pub(crate) fn receive(node: &Arc<NodeShared>, bytes: &[u8]) -> bool {
    let frame = match wire::decode(bytes, node.max_frame) {
        Ok(frame) => frame,
        Err(rejected) => {
            node.stats.undecodable_frame(bytes.len());
            if let Some(suppressed) = node.warn_budget.take() {
                tracing::warn!(suppressed, %rejected, bytes = bytes.len(), "frame rejected");
            }
            return false;
        }
    };
    node.stats.received(frame.items.len(), bytes.len());
    let Some((origin, standing)) = check_origin(node, &frame) else {
        return false;
    };
    let for_me = frame.to_incarnation == node.me.incarnation;
    let mut dropped = 0usize;
    let mut asked = false;
    for item in frame.items {
        if standing == Standing::Peer || departed::still_handled(&item) {
            asked |= handle(node, &origin, for_me, item);
        } else {
            dropped += 1;
        }
    }
    if dropped > 0 {
        tracing::debug!(
            from = %origin.name,
            dropped,
            "items from a node that left dropped: nobody is left to answer or close them"
        );
    }
    asked
}

/// What a frame's sender is to this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standing {
    /// A peer (taken as one by this frame, if it was not yet).
    Peer,
    /// An incarnation that left: only some of its items are handled (`departed.rs`).
    Departed,
}

/// The sender, if its claim holds: a frame from this node's own name, or from a known node at
/// another incarnation, is rejected (a stale or forged identity). A node not known yet is
/// admitted (its heartbeat may trail its first frame), kept out of placement until its
/// heartbeat is read, and declared down like any other if none follows. A frame from a session
/// one side has ended is dropped, and one that says its sender declared this node down ends
/// the session here too (`severance.rs`). A frame from an incarnation that left does not bring
/// it back (`departed.rs`).
fn check_origin(node: &Arc<NodeShared>, frame: &Frame<'_>) -> Option<(PeerId, Standing)> {
    let origin = PeerId {
        name: frame.from.as_ref().into(),
        incarnation: frame.from_incarnation,
    };
    if origin.name == node.me.name {
        if let Some(suppressed) = node.warn_budget.take() {
            tracing::warn!(suppressed, from = %frame.from, "frame rejected: it claims this node's own name");
        }
        node.stats.rejected_frame();
        return None;
    }
    match node.session_of(&origin, frame.severed, frame.seen) {
        Some(Session::Current) => return Some((origin, Standing::Peer)),
        Some(Session::Severed) => {
            node.peer_heard(origin.clone(), frame.severed);
            return Some((origin, Standing::Peer));
        }
        Some(Session::Stale) => return stale(node, frame),
        None => {}
    }
    let mut known = node.incarnation_of(&origin.name);
    if let Some(left) = known.filter(|known| *known != origin.incarnation) {
        // A new incarnation of a node whose departure waits to be declared (it left and
        // started again): the departure first, then the frame is admitted as any new node's.
        if node.take_departure(&origin.name, left) {
            node.peer_down(&origin.name, Some(left), "left the cluster");
            known = node.incarnation_of(&origin.name);
        }
    }
    match known {
        Some(known) if known != origin.incarnation => {
            if let Some(suppressed) = node.warn_budget.take() {
                tracing::warn!(
                    suppressed,
                    from = %frame.from,
                    claimed = origin.incarnation,
                    known,
                    "frame rejected: it claims another incarnation of a live node"
                );
            }
            node.stats.rejected_frame();
            None
        }
        _ => {
            if !super::config::is_token(&frame.from) {
                if let Some(suppressed) = node.warn_budget.take() {
                    tracing::warn!(suppressed, from = ?frame.from, "frame rejected: not a node name");
                }
                node.stats.rejected_frame();
                return None;
            }
            // Sent before its sender heard that this node declared it down.
            if frame.seen < node.severances.count(&origin) {
                return stale(node, frame);
            }
            if node.peer_heard(origin.clone(), frame.severed) {
                Some((origin, Standing::Peer))
            } else if node.departed.contains(&origin) {
                Some((origin, Standing::Departed))
            } else {
                None
            }
        }
    }
}

/// Drops a frame sent in a session one side has ended (`severance.rs`).
fn stale<T>(node: &NodeShared, frame: &Frame<'_>) -> Option<T> {
    node.stats.stale_frame();
    tracing::debug!(
        from = %frame.from,
        severed = frame.severed,
        seen = frame.seen,
        items = frame.items.len(),
        "frame dropped: sent in a session that has ended"
    );
    None
}

/// One item from `origin`. `for_me`: the frame named this incarnation of this node. `true`
/// for an ask delivered to a process here.
fn handle(node: &Arc<NodeShared>, origin: &PeerId, for_me: bool, item: Item<'_>) -> bool {
    let mut asked = false;
    match item {
        Item::Message { to, ty, body, ack } => {
            let result = if !for_me {
                Err(Refusal::NoProc)
            } else {
                match Pid::from_raw(to) {
                    Some(pid) => {
                        let scope = DecodeScope::message(node, origin);
                        node.registry.deliver(&node.sched, &ty, pid, &body, scope)
                    }
                    None => Err(Refusal::NotFound),
                }
            };
            if let Err(refusal) = &result {
                match refusal {
                    Refusal::Unregistered(_) | Refusal::Decode(_) | Refusal::WrongType { .. } => {
                        node.stats.rejected_item();
                        if let Some(suppressed) = node.warn_budget.take() {
                            tracing::warn!(suppressed, from = %origin.name, %ty, ?refusal, "message rejected");
                        }
                    }
                    _ => {
                        node.stats.undelivered();
                        tracing::debug!(from = %origin.name, %ty, ?refusal, "message not delivered");
                    }
                }
            }
            match ack {
                Some(Ack::Always(id)) => answer(node, origin, Item::Ack { id, result }),
                Some(Ack::Refused(id)) if result.is_err() => {
                    answer(node, origin, Item::Ack { id, result });
                }
                // An ask, delivered: its answer will be published from here.
                Some(Ack::Refused(_)) => asked = true,
                None => {}
            }
        }
        Item::Ack { id, result } => match node.take_pending(id, origin) {
            Some(Pending::Ack(ack)) => {
                let _ = foreign_wake(WAITER, || ack.send(result));
            }
            // An ask's delivery: a refusal fails it; success leaves it waiting for its reply.
            Some(Pending::Ask(reply)) => match result {
                Err(refusal) => {
                    let _ = foreign_wake(WAITER, || reply.send(Err(refusal)));
                }
                Ok(()) => node.expect(id, origin.clone(), Pending::Ask(reply)),
            },
            Some(other) => node.expect(id, origin.clone(), other),
            None => {}
        },
        Item::Reply { ask, result } => {
            if let Some(Pending::Ask(reply)) = node.take_pending(ask, origin) {
                // The frame's own bytes, not a copy: the asker decodes them within this frame
                // (`shared_bytes` fields in the answer stay slices of it).
                let _ = foreign_wake(WAITER, || {
                    reply.send(result.map(|body| shared_bytes::share_or_copy(&body.0)))
                });
            }
        }
        Item::Spawn {
            id,
            name,
            args,
            join,
        } => {
            let spawned = if for_me {
                node.registry
                    .spawn(&node.sched, &name, &args, DecodeScope::node(node))
            } else {
                Err(Refusal::NoProc)
            };
            let result = match spawned {
                Ok((pid, outcome)) => {
                    if let Some(join) = join {
                        let (weak, origin) = (Arc::downgrade(node), origin.clone());
                        node.runtime.spawn(async move {
                            let result = outcome.await.map(serde_bytes::ByteBuf::from);
                            if let Some(node) = weak.upgrade() {
                                joined(&node, &origin, join, result);
                            }
                        });
                    }
                    Ok(pid.as_u64())
                }
                Err(refusal) => Err(refusal),
            };
            if let Err(refusal @ (Refusal::Unregistered(_) | Refusal::Decode(_))) = &result {
                node.stats.rejected_item();
                if let Some(suppressed) = node.warn_budget.take() {
                    tracing::warn!(suppressed, from = %origin.name, %name, ?refusal, "spawn rejected");
                }
            }
            // An argument the body cannot take is its input rejected, as `init` rejects one:
            // the spawner hears the same `SpawnError::Init` a local spawn would give.
            let result = result.map_err(|refusal| match refusal {
                Refusal::Decode(why) => Refusal::SpawnInit(why),
                other => other,
            });
            let spawned = result.as_ref().ok().copied();
            if let Err(refusal) = node.send_control(origin, Item::Spawned { id, result }) {
                // Its answer cannot go (this node is leaving, or the spawner was declared down
                // meanwhile): nobody will hold the PID, so the process must not run on.
                tracing::debug!(to = %origin.name, ?refusal, "a spawn's answer found its node gone");
                if let Some(pid) = spawned.and_then(Pid::from_raw) {
                    node.stats.orphan_stopped();
                    let _ = links::stop_local(node, pid, true);
                }
            }
        }
        Item::Spawned { id, result } => {
            let unwanted = match node.take_pending(id, origin) {
                Some(Pending::Spawn(spawned)) => {
                    // `Err`: its `spawn_on` future was dropped while it waited.
                    foreign_wake(WAITER, || spawned.send(result)).and_then(Result::err)
                }
                Some(_) => None,
                // Forgotten: its `spawn_on` timed out (or a forger's frame: the stop below
                // goes to the frame's own node, so it can reach only that node's processes).
                None => Some(result),
            };
            if let Some(Ok(orphan)) = unwanted {
                stop_orphan(node, origin, orphan);
            }
        }
        Item::Joined { id, result } => {
            if let Some(Pending::Join(joined)) = node.take_pending(id, origin) {
                let _ = foreign_wake(WAITER, || {
                    joined.send(result.map(serde_bytes::ByteBuf::into_vec))
                });
            }
        }
        Item::Monitor { id, target } => serve_monitor(node, origin, for_me, id, target),
        Item::Demonitor { id } => {
            if let Some(monitor) = lock(&node.served).remove(&(origin.clone(), id)) {
                monitor.abort();
            }
        }
        Item::Down { id, reason } => {
            if let Some(Pending::Monitor(down)) = node.take_pending(id, origin) {
                let _ = foreign_wake(WAITER, || down.send(reason));
            }
        }
        Item::Link { from, to } if for_me => links::linked(node, origin, from, to),
        Item::Link { from, to } => {
            let reason = WireReason::NoProc;
            answer(
                node,
                origin,
                Item::LinkExit {
                    from: to,
                    to: from,
                    reason,
                },
            );
        }
        Item::Unlink { from, to } => links::unlinked(node, origin, from, to),
        Item::LinkExit { from, to, reason } => links::exited(node, origin, from, to, reason),
        Item::Stop { target, kill } => {
            if let Some(pid) = Pid::from_raw(target).filter(|_| for_me) {
                let _ = links::stop_local(node, pid, kill);
            }
        }
        Item::Whereis { id, name } => {
            // Another life of this node was asked: that node is gone, as the asker will learn.
            let result = if for_me {
                Ok(node.sched.whereis(&name).map(Pid::as_u64))
            } else {
                Err(Refusal::NoConnection)
            };
            answer(node, origin, Item::Located { id, result });
        }
        Item::Located { id, result } => {
            if let Some(Pending::Whereis(located)) = node.take_pending(id, origin) {
                let _ = foreign_wake(WAITER, || located.send(result));
            }
        }
    }
    asked
}

/// Watches local process `target` for `origin`'s monitor `id`: one `Down` back when it ends.
fn serve_monitor(node: &Arc<NodeShared>, origin: &PeerId, for_me: bool, id: u64, target: u64) {
    let pid = Pid::from_raw(target).filter(|_| for_me);
    let Some(pid) = pid else {
        let reason = WireReason::NoProc;
        answer(node, origin, Item::Down { id, reason });
        return;
    };
    let monitor = node.sched.monitor(pid);
    let (task_node, task_origin) = (Arc::downgrade(node), origin.clone());
    // The task starts once its abort handle is registered, so that its own removal of the
    // entry always comes after the insertion. Aborted, it drops (demonitors) the monitor.
    let (registered, start) = tokio::sync::oneshot::channel::<()>();
    let task = node.runtime.spawn(async move {
        if start.await.is_err() {
            return;
        }
        let down = monitor.await;
        if let Some(node) = task_node.upgrade() {
            let key = (task_origin.clone(), id);
            let mut served = lock(&node.served);
            // Only its own entry: a repeat of the id (below) may have replaced it, and this
            // task, past its monitor already, was not stopped by the abort in time.
            if served
                .get(&key)
                .is_some_and(|entry| entry.id() == tokio::task::id())
            {
                served.remove(&key);
            }
            drop(served);
            let reason = WireReason::from_reason(down.pid, &down.reason);
            answer(&node, &task_origin, Item::Down { id, reason });
        }
    });
    let previous = lock(&node.served).insert((origin.clone(), id), task.abort_handle());
    if let Some(previous) = previous {
        // The same id again (no node sends it twice: a forged or broken peer's): one monitor,
        // as a link made twice is one. Left running, each repeat was a task and a monitor kept
        // until the process ended — 200 000 repeats, 200 000 tasks — that no count showed and a
        // node-down did not abort (it aborts what the map holds).
        previous.abort();
    }
    let _ = foreign_wake(WAITER, || registered.send(()));
}

/// Answers a joined spawn's outcome; an output too big for a frame ends the far handle
/// `Failed` with why (the frame would be rejected, and the handle wait for the node's death).
fn joined(
    node: &NodeShared,
    origin: &PeerId,
    id: u64,
    result: Result<serde_bytes::ByteBuf, WireReason>,
) {
    match node.send_control(origin, Item::Joined { id, result }) {
        Ok(()) => {}
        Err(Refusal::TooLarge { size, limit }) => {
            let why =
                format!("the output encodes to {size} bytes, over the frame limit of {limit}");
            let result = Err(WireReason::Failed(why));
            answer(node, origin, Item::Joined { id, result });
        }
        Err(refusal) => {
            tracing::debug!(to = %origin.name, ?refusal, "an answer found its node gone");
        }
    }
}

/// A process `origin` spawned for a `spawn_on` that gave up before the answer came (timed
/// out, or its future dropped): nobody holds its PID, and a retry would run a second one, so
/// it is terminated (as `Node::kill`: its `close` runs; the join a `spawn_on_with_handle`
/// asked for was forgotten with the wait). Counted and traced, so a spawn that keeps timing out
/// is seen.
pub(crate) fn stop_orphan(node: &NodeShared, origin: &PeerId, orphan: u64) {
    node.stats.orphan_stopped();
    tracing::debug!(
        from = %origin.name,
        pid = orphan,
        "a spawn answered after its caller gave up: terminated"
    );
    if let Err(refusal) = node.send_item(
        origin,
        Item::Stop {
            target: orphan,
            kill: true,
        },
    ) {
        tracing::debug!(to = %origin.name, ?refusal, "an orphan's stop found its node gone");
    }
}

/// Sends an answer to `origin`; it is lost only if `origin` was declared down meanwhile.
fn answer(node: &NodeShared, origin: &PeerId, item: Item<'static>) {
    if let Err(refusal) = node.send_answer(origin, item) {
        tracing::debug!(to = %origin.name, ?refusal, "an answer found its node gone");
    }
}

#[cfg(test)]
mod tests {
    use super::{Linger, MAX_LINGER_BACKOFF};

    /// How many of the next `asks` the linger admits.
    fn admitted(linger: &mut Linger, asks: usize) -> usize {
        (0..asks).filter(|_| linger.admits()).count()
    }

    #[test]
    fn a_linger_turned_off_admits_nothing() {
        let mut linger = Linger::new(false);
        assert_eq!(admitted(&mut linger, 10), 0);
    }

    #[test]
    fn misses_back_off_exponentially_up_to_the_cap_and_an_answer_resets_them() {
        let mut linger = Linger::new(true);
        assert_eq!(admitted(&mut linger, 5), 5, "no miss yet: every ask");
        for k in 1..=MAX_LINGER_BACKOFF + 2 {
            linger.missed();
            let skipped = (1usize << k.min(MAX_LINGER_BACKOFF)) - 1;
            assert_eq!(admitted(&mut linger, skipped), 0, "after miss {k}");
            assert!(linger.admits(), "the ask after the backoff lingers");
        }
        linger.answered();
        linger.missed();
        assert_eq!(
            admitted(&mut linger, 1),
            0,
            "an answer reset the backoff to 2^1"
        );
        assert_eq!(admitted(&mut linger, 3), 3);
    }
}
