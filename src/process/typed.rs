//! Typed messages as ordinary [`Message`]s (`scheduler/addr.rs`): a typed message's payload is
//! the value, its topic the type's name; [`Message`] itself travels as it is.

use super::{Event, Message, Payload, TypeMismatch};
use std::any::{Any, TypeId};

/// The message type a process's body declared it receives (`ProcessCx<M>`), kept in its cell
/// so that a sender whose type the compiler could not check — another node, holding only a
/// PID — is refused instead of delivered to a receive that would fail. One word (a function
/// that describes `M`), not the 32 bytes of a `TypeId` and a name: every cell carries it.
#[derive(Clone, Copy)]
pub(crate) struct MessageType(fn() -> (TypeId, &'static str));

impl MessageType {
    /// `M`'s, or `None` for the two that declare no one type: `()` (a body that takes no
    /// messages, or reads them untyped) and [`Message`] (untyped, by topic).
    pub(crate) fn of<M: 'static>() -> Option<MessageType> {
        let id = TypeId::of::<M>();
        (id != TypeId::of::<()>() && id != TypeId::of::<Message>())
            .then_some(MessageType(describe::<M>))
    }

    pub(crate) fn id(self) -> TypeId {
        (self.0)().0
    }

    pub(crate) fn name(self) -> &'static str {
        (self.0)().1
    }
}

fn describe<M: 'static>() -> (TypeId, &'static str) {
    (TypeId::of::<M>(), std::any::type_name::<M>())
}

impl std::fmt::Debug for MessageType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

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
    from_message_counted(message).map_err(|(mismatch, _)| mismatch)
}

/// [`from_message`], and on a mismatch how many destructor panics dropping the payload
/// contained ([`Payload::take_counted`]).
#[inline(always)]
pub(crate) fn from_message_counted<M: 'static>(message: Message) -> Result<M, (TypeMismatch, u64)> {
    if TypeId::of::<M>() == TypeId::of::<Message>() {
        let mut slot = Some(message);
        let itself = (&mut slot as &mut dyn Any).downcast_mut::<Option<M>>();
        return Ok(itself.and_then(Option::take).expect("M is Message"));
    }
    message.payload.take_counted::<M>()
}

/// Takes the message in `slot` (a step's lone event, where the drain put it) as an `M`: the
/// payload's value is read where it lies and the rest of the message dropped in place, rather
/// than the whole message moved out and then taken apart (each move of a just-written
/// message is a store-forwarding stall: most of an async receive's time before). `None` if
/// `slot` holds no message (it is left as is); `Err` with the whole message if its payload is
/// not an `M` — for the caller to report (and drop, contained) outside any scope.
#[inline(always)]
pub(crate) fn take_lone<M: 'static>(slot: &mut Option<Event>) -> Option<Result<M, Message>> {
    let Some(Event::Message(message)) = slot else {
        return None;
    };
    if TypeId::of::<M>() != TypeId::of::<Message>() {
        if let Some(value) = message.payload.take_value::<M>() {
            // The shell left — topic, sender, an empty payload — has no user destructor.
            *slot = None;
            return Some(Ok(value));
        }
    }
    let Some(Event::Message(message)) = slot.take() else {
        unreachable!("checked above")
    };
    if TypeId::of::<M>() == TypeId::of::<Message>() {
        return Some(Ok(from_message::<M>(message).expect("M is Message")));
    }
    Some(Err(message))
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

    #[test]
    fn a_message_type_is_one_word_and_none_for_the_untyped_ones() {
        assert_eq!(std::mem::size_of::<Option<MessageType>>(), 8);
        let u64s = MessageType::of::<u64>().unwrap();
        assert_eq!((u64s.id(), u64s.name()), (TypeId::of::<u64>(), "u64"));
        assert_ne!(MessageType::of::<u32>().unwrap().id(), u64s.id());
        assert!(MessageType::of::<()>().is_none());
        assert!(MessageType::of::<Message>().is_none());
    }

    #[test]
    fn a_lone_message_is_taken_in_place_or_handed_back_whole() {
        let mut slot = Some(Event::Message(into_message(String::from("hi"))));
        assert_eq!(take_lone::<String>(&mut slot).unwrap().unwrap(), "hi");
        assert!(slot.is_none());

        let mut slot = Some(Event::Message(into_message(7u64)));
        let back = take_lone::<u32>(&mut slot).unwrap().unwrap_err();
        assert!(slot.is_none());
        assert_eq!(back.payload.take::<u64>().unwrap(), 7);

        let mut slot = Some(Event::Message(Message::new("t", Payload::new(1u8))));
        let whole: Message = take_lone(&mut slot).unwrap().unwrap();
        assert_eq!(whole.topic, "t");

        let mut slot = Some(Event::Woken);
        assert!(take_lone::<u8>(&mut slot).is_none());
        assert!(
            matches!(slot, Some(Event::Woken)),
            "not a message: left as is"
        );
    }
}
