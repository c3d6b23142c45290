//! Unit tests of `Payload`'s representation; they run under Miri too (`.ci/run`).

use super::*;
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

/// `true` if the payload's `T` lies inside the payload itself (inline), `false` if elsewhere
/// (boxed). Addresses only: zero-sized values count as inline if their address is the storage's.
fn stored_inline<T: 'static>(payload: &Payload) -> bool {
    let start = payload as *const Payload as usize;
    let value = payload.downcast_ref::<T>().expect("a T") as *const T as usize;
    (start..start + std::mem::size_of::<Payload>()).contains(&value)
}

/// Counts its drops in a shared counter; `N` bytes of ballast decide inline or boxed. Also
/// used by the tests of values moved in place (`slot.rs`, `process/tests/yields_in_place.rs`).
#[derive(Debug)]
pub(crate) struct Counted<const N: usize> {
    drops: Arc<AtomicUsize>,
    pub(crate) ballast: [u8; N],
}

impl<const N: usize> Counted<N> {
    pub(crate) fn new(drops: &Arc<AtomicUsize>) -> Counted<N> {
        Counted {
            drops: drops.clone(),
            ballast: [7; N],
        }
    }
}

impl<const N: usize> Drop for Counted<N> {
    fn drop(&mut self) {
        self.drops.fetch_add(1, SeqCst);
    }
}

/// 8 (the `Arc`) + 24 = 32 bytes: inline. 8 + 25 = 33 (padded to 40): boxed.
pub(crate) type SmallCounted = Counted<24>;
pub(crate) type LargeCounted = Counted<25>;

#[repr(align(16))]
struct Align16(u8);

#[repr(align(32))]
#[derive(Debug, PartialEq)]
struct Align32([u64; 2]);

/// A zero-sized type with alignment 32: zero bytes, but boxed (over-aligned).
#[repr(align(32))]
struct OverAlignedZst;

#[test]
#[cfg(target_pointer_width = "64")]
fn a_payload_is_five_words_with_a_niche() {
    assert_eq!(std::mem::size_of::<Payload>(), 40);
    assert_eq!(std::mem::align_of::<Payload>(), 8);
    assert_eq!(std::mem::size_of::<Option<Payload>>(), 40);
    assert_eq!(std::mem::size_of::<Result<Payload, TypeMismatch>>(), 40);
}

#[test]
fn small_values_stay_inline_and_large_ones_are_boxed() {
    assert!(stored_inline::<u64>(&Payload::new(7u64)));
    assert!(stored_inline::<[u64; 4]>(&Payload::new([0u64; 4])));
    assert!(stored_inline::<[u8; 32]>(&Payload::new([0u8; 32])));
    assert!(stored_inline::<String>(&Payload::new(String::from("s"))));
    assert!(stored_inline::<Arc<u8>>(&Payload::new(Arc::new(1u8))));
    assert!(stored_inline::<()>(&Payload::empty()));
    assert!(stored_inline::<SmallCounted>(&Payload::new(
        SmallCounted::new(&Arc::default())
    )));
    assert!(!stored_inline::<[u64; 5]>(&Payload::new([0u64; 5])));
    assert!(!stored_inline::<[u8; 33]>(&Payload::new([0u8; 33])));
    assert!(!stored_inline::<LargeCounted>(&Payload::new(
        LargeCounted::new(&Arc::default())
    )));
    assert!(!stored_inline::<Payload>(&Payload::new(Payload::empty())));
}

#[test]
fn over_aligned_values_are_boxed_and_aligned() {
    let small = Payload::new(Align16(3));
    assert!(!stored_inline::<Align16>(&small));
    let r = small.downcast_ref::<Align16>().unwrap();
    assert_eq!((r as *const Align16 as usize % 16, r.0), (0, 3));
    assert_eq!(small.take::<Align16>().unwrap().0, 3);

    let mut p = Payload::new(Align32([1, 2]));
    assert!(!stored_inline::<Align32>(&p));
    let r = p.downcast_mut::<Align32>().unwrap();
    assert_eq!(r as *mut Align32 as usize % 32, 0);
    r.0[1] = 5;
    let p = p.downcast::<u8>().unwrap_err(); // a mismatch hands it back intact
    assert_eq!(p.downcast::<Align32>().unwrap(), Align32([1, 5]));
    drop(Payload::new(Align32([9, 9]))); // freed by drop, not taken
}

#[test]
fn zero_sized_values() {
    struct Marker;
    let unit = Payload::empty();
    assert!(unit.is::<()>() && !unit.is::<Marker>());
    assert_eq!(unit.type_name(), "()");
    unit.take::<()>().unwrap();

    let marker = Payload::new(Marker);
    assert!(marker.is::<Marker>() && !marker.is::<()>());
    assert!(marker
        .downcast::<()>()
        .unwrap_err()
        .take::<Marker>()
        .is_ok());

    let zst = Payload::new(OverAlignedZst);
    assert!(zst.downcast_ref::<OverAlignedZst>().is_some());
    let taken: OverAlignedZst = zst.take().unwrap();
    assert_eq!(&taken as *const OverAlignedZst as usize % 32, 0);
    drop(Payload::new(OverAlignedZst));

    // A zero-sized type with a destructor: dropped once, like any other.
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    struct DropZst;
    impl Drop for DropZst {
        fn drop(&mut self) {
            DROPS.fetch_add(1, SeqCst);
        }
    }
    drop(Payload::new(DropZst));
    assert_eq!(DROPS.load(SeqCst), 1);
    let taken = Payload::new(DropZst).take::<DropZst>().unwrap();
    assert_eq!(DROPS.load(SeqCst), 1);
    drop(taken);
    assert_eq!(DROPS.load(SeqCst), 2);
}

#[test]
fn destructors_run_once_whether_taken_or_dropped() {
    let count = Arc::new(AtomicUsize::new(0));
    drop(Payload::new(SmallCounted::new(&count)));
    assert_eq!(count.load(SeqCst), 1);
    let taken = Payload::new(SmallCounted::new(&count))
        .downcast::<SmallCounted>()
        .ok()
        .unwrap();
    assert_eq!(count.load(SeqCst), 1);
    drop(taken);
    assert_eq!(count.load(SeqCst), 2);
}

/// The same contract for a value inline (`N` = 24) and boxed (`N` = 25).
fn drop_contract<const N: usize>() {
    let count = Arc::new(AtomicUsize::new(0));
    let drops = || count.load(SeqCst);

    drop(Payload::new(Counted::<N>::new(&count)));
    assert_eq!(drops(), 1, "dropped once with the payload");

    let taken = Payload::new(Counted::<N>::new(&count))
        .take::<Counted<N>>()
        .unwrap();
    let downcast = Payload::new(Counted::<N>::new(&count))
        .downcast::<Counted<N>>()
        .ok()
        .unwrap();
    assert_eq!(drops(), 1, "not dropped when moved out");
    assert_eq!((taken.ballast, downcast.ballast), ([7; N], [7; N]));
    drop((taken, downcast));
    assert_eq!(drops(), 3, "the moved-out values drop once each");

    let mut back = Payload::new(Counted::<N>::new(&count))
        .downcast::<u64>()
        .unwrap_err();
    back = back.downcast::<Counted<1>>().unwrap_err();
    assert!(back.downcast_ref::<u64>().is_none() && back.downcast_mut::<u64>().is_none());
    assert_eq!(drops(), 3, "not dropped by a mismatch");
    assert_eq!(back.downcast_ref::<Counted<N>>().unwrap().ballast, [7; N]);
    let value = back.take::<Counted<N>>().unwrap();
    assert_eq!(drops(), 3);
    drop(value);
    assert_eq!(drops(), 4);

    let err = Payload::new(Counted::<N>::new(&count))
        .take::<u64>()
        .unwrap_err();
    assert_eq!(drops(), 5, "dropped by a mismatched take");
    assert_eq!(err.actual(), std::any::type_name::<Counted<N>>());
}

#[test]
fn destructors_run_exactly_once_inline() {
    drop_contract::<24>();
}

#[test]
fn destructors_run_exactly_once_boxed() {
    drop_contract::<25>();
}

/// Counts its drops, then panics.
struct PanicsOnDrop<const N: usize> {
    drops: Arc<AtomicUsize>,
    _ballast: [u8; N],
}

impl<const N: usize> Drop for PanicsOnDrop<N> {
    fn drop(&mut self) {
        self.drops.fetch_add(1, SeqCst);
        panic!("PanicsOnDrop (expected by the test)");
    }
}

fn panicking_drop<const N: usize>() {
    let count = Arc::new(AtomicUsize::new(0));
    let payload = Payload::new(PanicsOnDrop::<N> {
        drops: count.clone(),
        _ballast: [0; N],
    });
    let result = panic::catch_unwind(AssertUnwindSafe(move || drop(payload)));
    assert!(result.is_err(), "the destructor's panic propagates");
    // Once: the unwinding does not drop the value a second time. (Boxed: Miri's leak check
    // sees that the box was freed all the same.) The counter's own `Arc` clone, inside the
    // value, was dropped with it: ours is the only one left.
    assert_eq!(count.load(SeqCst), 1);
    assert_eq!(Arc::strong_count(&count), 1);
}

#[test]
fn a_panicking_destructor_propagates_without_a_double_drop_inline() {
    panicking_drop::<8>();
}

#[test]
fn a_panicking_destructor_propagates_without_a_double_drop_boxed() {
    panicking_drop::<64>();
}

#[test]
fn downcast_mut_then_take() {
    let mut small = Payload::new(1u32);
    *small.downcast_mut::<u32>().unwrap() += 1;
    assert!(small.downcast_mut::<u64>().is_none());
    assert_eq!(small.take::<u32>().unwrap(), 2);

    let mut text = Payload::new(String::from("a"));
    text.downcast_mut::<String>().unwrap().push_str("bc");
    assert_eq!(text.downcast_ref::<String>().unwrap(), "abc");
    assert_eq!(text.take::<String>().unwrap(), "abc");

    let mut large = Payload::new([0u64; 8]);
    large.downcast_mut::<[u64; 8]>().unwrap()[7] = 9;
    assert_eq!(large.take::<[u64; 8]>().unwrap()[7], 9);
}

#[test]
fn interior_mutability_through_a_shared_borrow() {
    let atomic = Payload::new(AtomicU64::new(1));
    atomic
        .downcast_ref::<AtomicU64>()
        .unwrap()
        .fetch_add(1, SeqCst);
    assert_eq!(atomic.take::<AtomicU64>().unwrap().into_inner(), 2);

    let cell = Payload::new(Cell::new(5i32));
    let (a, b) = (
        cell.downcast_ref::<Cell<i32>>().unwrap(),
        cell.downcast_ref::<Cell<i32>>().unwrap(),
    );
    a.set(b.get() + 1);
    assert_eq!(cell.take::<Cell<i32>>().unwrap().get(), 6);
}

#[test]
fn a_payload_of_a_payload() {
    let nested = Payload::new(Payload::new(5u64));
    assert!(nested.is::<Payload>() && !nested.is::<u64>());
    assert_eq!(nested.type_name(), std::any::type_name::<Payload>());
    assert_eq!(
        nested.downcast_ref::<Payload>().unwrap().downcast_ref(),
        Some(&5u64)
    );

    // `take::<Payload>()` is the payload itself: still nested.
    let itself = nested.take::<Payload>().unwrap();
    assert!(itself.is::<Payload>());
    // `downcast::<Payload>()` unwraps one level.
    let inner = itself.downcast::<Payload>().unwrap();
    assert!(inner.is::<u64>());
    // Not nested: `take::<Payload>()` is still the payload itself, `downcast` a mismatch.
    let inner = inner.take::<Payload>().unwrap();
    let inner = inner.downcast::<Payload>().unwrap_err();
    assert_eq!(inner.take::<u64>().unwrap(), 5);

    // `wrap` does not nest; `new` does.
    assert!(Payload::wrap(Payload::new(1u8)).is::<u8>());
    assert!(Payload::wrap(1u8).is::<u8>());
    assert!(Payload::new(Payload::new(1u8)).is::<Payload>());

    // The inner value is dropped once, with the outer payload.
    let count = Arc::new(AtomicUsize::new(0));
    drop(Payload::new(Payload::new(SmallCounted::new(&count))));
    assert_eq!(count.load(SeqCst), 1);
    let mut nested = Payload::new(Payload::new(LargeCounted::new(&count)));
    let inner = nested.downcast_mut::<Payload>().unwrap();
    inner.downcast_mut::<LargeCounted>().unwrap().ballast[0] = 1;
    let value = nested
        .take::<Payload>()
        .unwrap()
        .downcast::<Payload>()
        .unwrap();
    assert_eq!(value.take::<LargeCounted>().unwrap().ballast[0], 1);
    assert_eq!(count.load(SeqCst), 2);
}

#[test]
fn values_with_static_references() {
    static NUMBER: u64 = 11;
    static BYTES: [u8; 3] = [1, 2, 3];
    static HITS: AtomicUsize = AtomicUsize::new(0);

    assert_eq!(Payload::new("text").take::<&str>().unwrap(), "text");
    let slice: &'static [u8] = &BYTES;
    assert_eq!(Payload::new(slice).take::<&[u8]>().unwrap(), &[1, 2, 3]);
    let pair = Payload::new((Some(&NUMBER), "n"));
    assert_eq!(
        pair.take::<(Option<&u64>, &str)>().unwrap(),
        (Some(&11), "n")
    );

    struct Refs {
        hits: &'static AtomicUsize,
        name: &'static str,
        f: fn(u64) -> u64,
    }
    let p = Payload::new(Refs {
        hits: &HITS,
        name: "refs",
        f: |x| x + 1,
    });
    let refs = p.downcast_ref::<Refs>().unwrap();
    refs.hits.fetch_add(1, SeqCst);
    assert_eq!((refs.name, (refs.f)(1)), ("refs", 2));
    assert_eq!(p.take::<Refs>().unwrap().hits.load(SeqCst), 1);
}

#[test]
fn large_arrays() {
    let mut bytes = [0u8; 4096];
    bytes[4095] = 1;
    let mut p = Payload::new(bytes);
    assert_eq!(p.downcast_ref::<[u8; 4096]>().unwrap()[4095], 1);
    p.downcast_mut::<[u8; 4096]>().unwrap()[0] = 2;
    let back = p.take::<[u8; 4096]>().unwrap();
    assert_eq!((back[0], back[4095]), (2, 1));

    let strings: [String; 100] = std::array::from_fn(|i| i.to_string());
    let p = Payload::new(strings);
    let p = p.downcast::<[String; 99]>().unwrap_err();
    assert_eq!(p.take::<[String; 100]>().unwrap()[99], "99");
    drop(Payload::new(std::array::from_fn::<String, 50, _>(|i| {
        i.to_string()
    })));
}

#[test]
fn values_survive_moves_of_the_payload() {
    // Inline values, pointers and padding included, move byte for byte with the payload.
    let mut all: Vec<Payload> = Vec::new();
    for i in 0..20u64 {
        all.push(match i % 4 {
            0 => Payload::new(format!("s{i}")),
            1 => Payload::new((i as u8, i)), // padding between the fields
            2 => Payload::new(Arc::new(i)),
            _ => Payload::new(vec![i; 5]), // boxed? no: a `Vec` is three words, inline
        });
    }
    all.reverse();
    let mut opt: Vec<Option<Payload>> = all.into_iter().map(Some).collect();
    opt.swap(0, 19);
    opt.swap(0, 19);
    for (j, slot) in opt.into_iter().enumerate() {
        let i = 19 - j as u64;
        let p = slot.unwrap();
        match i % 4 {
            0 => assert_eq!(p.take::<String>().unwrap(), format!("s{i}")),
            1 => assert_eq!(p.take::<(u8, u64)>().unwrap(), (i as u8, i)),
            2 => assert_eq!(*p.take::<Arc<u64>>().unwrap(), i),
            _ => assert_eq!(p.take::<Vec<u64>>().unwrap(), vec![i; 5]),
        }
    }
}

#[test]
fn payloads_cross_threads() {
    let inline = Payload::new(String::from("inline"));
    let boxed = Payload::new([3u64; 16]);
    let (a, b) = std::thread::spawn(move || {
        (
            inline.take::<String>().unwrap(),
            boxed.take::<[u64; 16]>().unwrap(),
        )
    })
    .join()
    .unwrap();
    assert_eq!((a.as_str(), b[15]), ("inline", 3));
}

#[test]
fn type_ids_names_debug_and_mismatches() {
    let p = Payload::new(1u8);
    assert_eq!(p.value_type_id(), TypeId::of::<u8>());
    assert_eq!(p.type_name(), "u8");
    assert_eq!(format!("{p:?}"), "Payload<u8>");
    assert_eq!(format!("{:?}", Payload::default()), "Payload<()>");
    let err = p.take::<u16>().unwrap_err();
    assert_eq!((err.expected(), err.actual()), ("u16", "u8"));
    assert_eq!(
        format!("{:?}", Payload::new([0u64; 9])),
        "Payload<[u64; 9]>"
    );
}

/// `Payload` is `Send` and not `Sync`, as a `Box<dyn Any + Send>` (and `!Unpin`: the field's
/// docs say why).
#[test]
fn send_but_not_sync() {
    fn is_send<T: Send>() {}
    is_send::<Payload>();

    // Compiles only if `Payload: !Sync` (else `_` is ambiguous between the two impls).
    trait AmbiguousIfSync<A> {
        fn check() {}
    }
    impl<T: ?Sized> AmbiguousIfSync<()> for T {}
    impl<T: ?Sized + Sync> AmbiguousIfSync<u8> for T {}
    <Payload as AmbiguousIfSync<_>>::check();
}

// `PayloadSlot` (`slot.rs`): a payload owned in place.

fn slot_downcast_moves_the_value_out_once<const N: usize>() {
    let drops = Arc::new(AtomicUsize::new(0));
    let value = PayloadSlot::lend(Payload::new(Counted::<N>::new(&drops)), |slot| {
        assert_eq!(slot.value_type_id(), TypeId::of::<Counted<N>>());
        slot.downcast::<Counted<N>>().expect("a Counted")
    });
    assert_eq!((drops.load(SeqCst), value.ballast), (0, [7; N]));
    drop(value);
    assert_eq!(drops.load(SeqCst), 1);
}

#[test]
fn slot_downcast_moves_an_inline_value_out_once() {
    slot_downcast_moves_the_value_out_once::<24>();
}

#[test]
fn slot_downcast_moves_a_boxed_value_out_once() {
    slot_downcast_moves_the_value_out_once::<25>();
}

fn slot_mismatch_hands_the_slot_back_and_drops_once<const N: usize>() {
    let drops = Arc::new(AtomicUsize::new(0));
    PayloadSlot::lend(Payload::new(Counted::<N>::new(&drops)), |slot| {
        let slot = slot.downcast::<u64>().expect_err("not a u64");
        assert!(slot.type_name().contains("Counted"));
        assert_eq!(drops.load(SeqCst), 0);
    });
    assert_eq!(drops.load(SeqCst), 1);
}

#[test]
fn slot_mismatch_hands_an_inline_slot_back_and_drops_it_once() {
    slot_mismatch_hands_the_slot_back_and_drops_once::<24>();
}

#[test]
fn slot_mismatch_hands_a_boxed_slot_back_and_drops_it_once() {
    slot_mismatch_hands_the_slot_back_and_drops_once::<25>();
}

#[test]
fn a_slot_dropped_in_an_unwind_drops_its_value_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let payload = Payload::new(LargeCounted::new(&drops));
    let unwound = panic::catch_unwind(AssertUnwindSafe(|| {
        PayloadSlot::lend(payload, |slot| {
            let _owned = slot;
            panic!("the handler panics before taking its command");
        })
    }));
    assert!(unwound.is_err());
    assert_eq!(drops.load(SeqCst), 1);
}

/// `take_value` moves the value out and leaves an empty payload: dropped once, by its new owner.
fn take_value_moves_out_once<const N: usize>() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut payload = Payload::new(Counted::<N>::new(&drops));
    assert!(
        payload.take_value::<u64>().is_none(),
        "a mismatch leaves it"
    );
    assert!(payload.is::<Counted<N>>());
    let value = payload.take_value::<Counted<N>>().expect("a Counted");
    assert!(payload.is::<()>(), "left empty");
    drop(payload);
    assert_eq!(drops.load(SeqCst), 0, "the empty payload drops nothing");
    assert_eq!(value.ballast[N - 1], 7);
    drop(value);
    assert_eq!(drops.load(SeqCst), 1);
}

#[test]
fn take_value_moves_an_inline_value_out_once() {
    take_value_moves_out_once::<24>();
}

#[test]
fn take_value_moves_a_boxed_value_out_once() {
    take_value_moves_out_once::<25>();
}
