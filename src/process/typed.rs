//! Typed messages as ordinary [`Message`]s (`scheduler/addr.rs`): a typed message's payload is
//! the value, its topic the type's name; [`Message`] itself travels as it is.

use super::{Message, Payload, TypeMismatch};
use std::any::{Any, TypeId};

/// The message a typed send carries: `M` itself if it is a [`Message`], otherwise a message
/// whose payload is the `M` and whose topic is its type's name.
#[inline(always)]
pub(crate) fn into_message<M: Send + 'static>(message: M) -> Message {
    // Two constants once monomorphised: the test costs nothing, and the typed case never goes
    // through `Any` (whose `type_id` is a call through a vtable).
    if TypeId::of::<M>() == TypeId::of::<Message>() {
        let mut slot = Some(message);
        let itself = (&mut slot as &mut dyn Any).downcast_mut::<Option<Message>>();
        return itself.and_then(Option::take).expect("M is Message");
    }
    Message::new(std::any::type_name::<M>(), Payload::new(message))
}

/// The `M` a typed message carries (the inverse of [`into_message`]): the message itself if
/// `M` is [`Message`], otherwise its payload, which must be an `M`.
#[inline(always)]
pub(crate) fn from_message<M: 'static>(message: Message) -> Result<M, TypeMismatch> {
    if TypeId::of::<M>() == TypeId::of::<Message>() {
        let mut slot = Some(message);
        let itself = (&mut slot as &mut dyn Any).downcast_mut::<Option<M>>();
        return Ok(itself.and_then(Option::take).expect("M is Message"));
    }
    message.payload.take::<M>()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_typed_message_round_trips_and_a_message_stays_itself() {
        let message = into_message(7u64);
        assert_eq!(message.topic, "u64");
        assert_eq!(from_message::<u64>(message).unwrap(), 7);
        let untyped = Message::new("topic", Payload::new(1u8));
        let same = into_message(untyped);
        assert_eq!(same.topic, "topic");
        let back: Message = from_message(same).unwrap();
        assert_eq!(back.payload.take::<u8>().unwrap(), 1);
        assert!(from_message::<u32>(into_message(1u64)).is_err());
    }
}
