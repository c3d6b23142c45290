//! The wire format: frames round-trip, a frame written item by item behind its head reads as
//! one encoded in one piece, an older head reads with defaults, and bad frames are refused.

use super::*;

fn frame() -> Frame<'static> {
    Frame {
        from: "a".into(),
        from_incarnation: 1,
        to_incarnation: 2,
        severed: 3,
        seen: 4,
        items: vec![
            Item::Message {
                to: 5,
                ty: Cow::Borrowed("t"),
                body: vec![1, 2, 3].into(),
                ack: Some(Ack::Always(9)),
            },
            Item::Down {
                id: 3,
                reason: WireReason::Failed("x".into()),
            },
        ],
    }
}

#[test]
fn a_frame_round_trips_with_its_header() {
    let bytes = encode(&frame(), 64).unwrap();
    assert_eq!(&bytes[..2], &[FRAME_VERSION, CODEC_MSGPACK]);
    let back = decode(&bytes, 1 << 20).unwrap();
    assert_eq!(back.items.len(), 2);
    assert!(
        matches!(&back.items[0], Item::Message { body: Cow::Borrowed(body), .. } if body == &[1, 2, 3])
    );
}

#[test]
fn a_frame_written_item_by_item_reads_as_the_frame() {
    let whole = frame();
    let to = Session {
        incarnation: whole.to_incarnation,
        severed: whole.severed,
        seen: whole.seen,
    };
    let head = frame_head(&whole.from, whole.from_incarnation, to);
    let mut bytes = head.clone();
    for item in &whole.items {
        rmp_serde::encode::write_named(&mut bytes, item).unwrap();
    }
    seal(&mut bytes, head.len(), whole.items.len() as u32);
    let back = decode(&bytes, 1 << 20).unwrap();
    assert_eq!(format!("{back:?}"), format!("{whole:?}"));
    // An empty frame, and a long sender name, still read.
    let long = "n".repeat(300);
    let to = Session {
        incarnation: 8,
        severed: u64::MAX,
        seen: 0,
    };
    let mut empty = frame_head(&long, 7, to);
    let len = empty.len();
    seal(&mut empty, len, 0);
    let back = decode(&empty, 1 << 20).unwrap();
    assert_eq!(
        (
            back.from.len(),
            back.from_incarnation,
            back.to_incarnation,
            back.severed,
            back.seen
        ),
        (300, 7, 8, u64::MAX, 0)
    );
    assert!(back.items.is_empty());
}

#[test]
fn a_frame_without_the_severance_counts_reads_them_as_zero() {
    #[derive(Serialize)]
    struct Older<'a> {
        from: &'a str,
        from_incarnation: u64,
        to_incarnation: u64,
        items: Vec<Item<'a>>,
    }
    let older = Older {
        from: "a",
        from_incarnation: 1,
        to_incarnation: 2,
        items: Vec::new(),
    };
    let mut bytes = vec![FRAME_VERSION, CODEC_MSGPACK];
    rmp_serde::encode::write_named(&mut bytes, &older).unwrap();
    let back = decode(&bytes, 1 << 20).unwrap();
    assert_eq!((back.to_incarnation, back.severed, back.seen), (2, 0, 0));
}

#[test]
fn an_envelope_and_the_body_behind_it_read_as_the_item() {
    let body = rmp_serde::to_vec_named(&("a body", 5u32)).unwrap();
    let long_type = "t".repeat(300);
    let envelopes = [
        Envelope::Message {
            to: 5,
            ty: "t",
            ack: None,
        },
        Envelope::Message {
            to: u64::MAX,
            ty: &long_type,
            ack: Some(Ack::Always(9)),
        },
        Envelope::Message {
            to: 0,
            ty: "t",
            ack: Some(Ack::Refused(u64::MAX)),
        },
        Envelope::Reply { ask: 7 },
    ];
    for from in ["a", &"n".repeat(300)] {
        for envelope in &envelopes {
            let to = Session {
                incarnation: 2,
                ..Session::default()
            };
            let head = frame_head(from, 1, to);
            assert_eq!(head.len(), frame_head_len(from));
            let mut bytes = head.clone();
            envelope.write(&mut bytes, body.len() as u32);
            assert_eq!(bytes.len(), head.len() + envelope.len(), "{envelope:?}");
            bytes.extend_from_slice(&body);
            seal(&mut bytes, head.len(), 1);
            let back = decode(&bytes, 1 << 20).unwrap();
            assert_eq!(back.items.len(), 1);
            assert_eq!(
                format!("{:?}", back.items[0]),
                format!("{:?}", envelope.item(&body))
            );
        }
    }
}

#[test]
fn bad_frames_are_rejected_not_panicked_on() {
    let bytes = encode(&frame(), 64).unwrap();
    assert!(matches!(decode(&bytes, 4), Err(Rejected::Oversized { .. })));
    assert_eq!(
        decode(&[], 64).unwrap_err(),
        Rejected::Malformed("empty".into())
    );
    assert_eq!(decode(&[9, 1], 64).unwrap_err(), Rejected::Version(9));
    assert_eq!(decode(&[1, 7], 64).unwrap_err(), Rejected::Codec(7));
    assert!(matches!(
        decode(&[1, 1, 0xc1, 0xff], 64),
        Err(Rejected::Malformed(_))
    ));
    let mut truncated = bytes.clone();
    truncated.truncate(bytes.len() - 3);
    assert!(matches!(
        decode(&truncated, 1 << 20),
        Err(Rejected::Malformed(_))
    ));
}

/// A frame whose unread field nests `depth` arrays deep.
fn nested_junk(depth: usize) -> Vec<u8> {
    let mut bytes = vec![FRAME_VERSION, CODEC_MSGPACK];
    let mut map = Vec::new();
    rmp_serde::encode::write_named(&mut map, &frame()).unwrap();
    // The frame's map gains a field, "junk": `depth` arrays of one, around a nil.
    let fields = map[0] & 0x0f;
    bytes.push(0x80 | (fields + 1));
    bytes.extend_from_slice(&map[1..]);
    bytes.push(0xa4); // a string of four bytes
    bytes.extend_from_slice(b"junk");
    bytes.extend(std::iter::repeat_n(0x91, depth));
    bytes.push(0xc0);
    bytes
}

#[test]
fn a_frame_nested_deeper_than_a_frame_can_be_is_rejected_without_recursing_through_it() {
    // Unknown fields are skipped by recursing, a level at a time: in a debug build 1 000
    // levels overflowed a worker's stack. A frame nests a few levels; anything deeper than
    // `MAX_DEPTH` is refused where it starts.
    assert!(decode(&nested_junk(MAX_DEPTH - 8), 1 << 20).is_ok());
    for depth in [MAX_DEPTH + 1, 1_000, 100_000] {
        let refused = decode(&nested_junk(depth), 1 << 20).unwrap_err();
        assert!(
            matches!(&refused, Rejected::Malformed(why) if why.contains("depth")),
            "{depth}: {refused:?}"
        );
    }
}

/// An error whose `Display` panics.
#[derive(Debug)]
struct PanicOnDisplay;

impl std::fmt::Display for PanicOnDisplay {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        panic!("boom (a test's Display)");
    }
}

impl std::error::Error for PanicOnDisplay {}

#[test]
fn a_failed_reason_whose_display_panics_travels_as_the_placeholder() {
    let pid = crate::process::Pid::from_raw(1 << 26).unwrap();
    let reason = crate::process::exit::ExitReason::failed(PanicOnDisplay);
    assert_eq!(
        WireReason::from_reason(pid, &reason),
        WireReason::Failed("<Display panicked>".to_owned())
    );
}
