//! The commands a churning process yields (async `Work`, inline `Quick`, both replying with a
//! tracked value), their handlers, and the check on a send that races its target's end: shared
//! by the terminate race and the build/spawn/send/shutdown cycles.

use super::Tracker;
use procsched::{error::SendError, Payload, Pid};

/// Async command: replies with a tracked value after a tokio yield.
pub(crate) struct Work(pub(crate) u64);
procsched::command!(Work => Payload);
/// Inline command: replies with a tracked value.
pub(crate) struct Quick(pub(crate) u64);
procsched::command!(Quick => Payload);

pub(crate) fn churn_handlers(builder: &mut procsched::config::SchedulerBuilder, tracker: &Tracker) {
    let t = tracker.clone();
    builder.async_handler(move |Work(n): Work| {
        let tracked = t.track(n);
        async move {
            tokio::task::yield_now().await;
            Ok::<_, procsched::error::CommandError>(Payload::new(tracked))
        }
    });
    let t = tracker.clone();
    builder.inline_handler(move |Quick(n): Quick| {
        Ok::<_, procsched::error::CommandError>(Payload::new(t.track(n)))
    });
}

pub(crate) fn assert_send_outcome(result: Result<(), SendError>, pid: Pid) {
    match result {
        Ok(()) => {}
        Err(e) if e.is_closed() || e.is_not_found() => assert_eq!(e.pid(), pid),
        Err(other) => panic!("unexpected {other:?}"),
    }
}
