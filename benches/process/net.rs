//! [`Net`]: how a process reaches other processes from inside `step`, on each process peer. The
//! processes that talk to others are generic over it, so the very same state machine runs on
//! procsched and on tokio-actors. Each peer implements it beside its `ProcessPeer`
//! (`procsched_peer.rs`, `actors.rs`).

use procsched::{
    state_machine::{Process, ProcessContext},
    BoxError, Message, Payload,
};

/// What a process keeps to spawn and send from inside `step`: a `SchedulerHandle` on
/// procsched, an `actors::Handle` on the actors. Processes that talk to others are generic
/// over it, so the very same state machine runs on both peers.
pub(crate) trait Net: Clone + Send + Sync + 'static {
    /// A process's address: a `Pid` on procsched, a mailbox sender on the actors.
    type Addr: Clone + Send + Sync + 'static;

    /// What the spawner puts into a new process for its `init` to finish with
    /// [`complete`](Self::complete). procsched: nothing, `init` takes `ctx.scheduler()`.
    fn preset(&self) -> Option<Self>;

    /// Run in `init`: the handle the process keeps.
    fn complete(preset: Option<Self>, ctx: &ProcessContext<'_>) -> Self;

    /// Run in `init`: the process's own address.
    fn own_addr(ctx: &ProcessContext<'_>) -> Self::Addr;

    /// Sends `message` to `to`.
    fn send_to(&self, to: &Self::Addr, message: Message) -> Result<(), BoxError>;

    /// Spawns a process without keeping its handle.
    fn spawn_detached<P: Process<Output = Payload>>(
        &self,
        process: P,
        method: &str,
        input: Payload,
    ) -> Result<(), BoxError>;
}
