//! The reply subject of a node's frames: NATS answers it "no responders" when the peer's
//! subscription is gone, which declares the peer down at once (`NodeShared::peer_unreached`).
//!
//! Why a secret in it: any client of the server can publish to a node's subjects, and a "no
//! responders" answer is only a status header (`NATS/1.0 503`) that any client can write. Were
//! the subject guessable (this node's name, the peer's name and incarnation — all read from the
//! membership bucket), one forged header would make this node declare a live peer down. The
//! subject carries a tag only this node can make: a keyed hash of the peer's name and
//! incarnation, under random keys drawn at the node's start. It travels only as the reply
//! subject of this node's frames *to that peer*, so a forger must read those first (a client
//! allowed to read another node's subjects can do worse; NATS permissions keep such clients
//! out). One tag for every peer, as the first version had, let any client that posed as a node
//! — a made-up name is enough — read the tag in the reply subject of the answers it drew, and
//! forge the "no responders" of a real peer with it (a hostile review did).

use super::node::PeerId;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

/// The first characters of the token the subject adds after the node's own subjects.
const UNREACHED: &str = "nr-";

/// This node's keys for its reply subjects' tags.
#[derive(Clone)]
pub(crate) struct Secret(RandomState);

impl Secret {
    /// Fresh keys: the standard library's per-process random hash keys (SipHash's, drawn from
    /// the operating system's generator), a new pair for each secret.
    pub(crate) fn fresh() -> Secret {
        Secret(RandomState::new())
    }

    /// The tag of `peer`'s subject: a keyed hash of its name and incarnation.
    fn tag(&self, name: &str, incarnation: u64) -> u64 {
        self.0.hash_one((name, incarnation))
    }

    /// The subject of every frame to `peer` from node `me` under `prefix`: one token after
    /// the node's subjects (its subscription `<prefix>.node.<me>.*` reads the answer),
    /// `nr-<tag, 16 hex digits><incarnation, 16 hex digits>-<name>`.
    pub(crate) fn subject(&self, prefix: &str, me: &str, peer: &PeerId) -> String {
        format!(
            "{prefix}.node.{me}.{UNREACHED}{:016x}{:016x}-{}",
            self.tag(&peer.name, peer.incarnation),
            peer.incarnation,
            peer.name
        )
    }

    /// The peer a "no responders" answer is about, from the subject it came on; `None` if it
    /// is not a subject [`subject`](Self::subject) made with these keys for that peer.
    pub(crate) fn parse(&self, subject: &str) -> Option<PeerId> {
        let token = subject.rsplit('.').next()?.strip_prefix(UNREACHED)?;
        let (numbers, name) = token.split_once('-')?;
        if numbers.len() != 32 || name.is_empty() || !numbers.is_ascii() {
            return None;
        }
        let (tag, incarnation) = numbers.split_at(16);
        let incarnation = u64::from_str_radix(incarnation, 16).ok()?;
        if u64::from_str_radix(tag, 16).ok()? != self.tag(name, incarnation) {
            return None;
        }
        Some(PeerId {
            name: name.into(),
            incarnation,
        })
    }
}

impl std::fmt::Debug for Secret {
    /// Never printed: a log must not hand out what a forger needs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreached_subject_names_its_peer_and_incarnation_and_nothing_else_parses() {
        let secret = Secret::fresh();
        for (name, incarnation) in [("b", 0), ("orders-2", u64::MAX), ("a_b-c", 0x1234)] {
            let peer = PeerId {
                name: name.into(),
                incarnation,
            };
            let subject = secret.subject("procsched", "me", &peer);
            // One token after the node's own subjects: its subscription `<prefix>.node.<me>.*`
            // reads the answer.
            assert_eq!(subject.matches('.').count(), 3, "{subject}");
            assert!(subject.starts_with("procsched.node.me."));
            assert_eq!(secret.parse(&subject), Some(peer.clone()));
            // The same subject under other keys: a forgery.
            assert_eq!(Secret::fresh().parse(&subject), None, "{subject}");
        }
        for other in [
            "procsched.node.me.data",
            "procsched.node.me.ctl",
            "procsched.node.me.nr-",
            "procsched.node.me.nr-12-b",
            // The earlier form, with no secret: what a forger could write from the bucket.
            "procsched.node.me.nr-0000000000000001-b",
            "procsched.node.me.nr-0123456789abcdef000000000000000g-b",
            "procsched.node.me.nr-0123456789abcdef0000000000000001-",
            "procsched.node.me.nr-0123456789abcdéf000000000000001-b",
            "",
        ] {
            assert_eq!(secret.parse(other), None, "{other}");
        }
    }

    #[test]
    fn one_peers_tag_does_not_make_another_peers_subject() {
        // What a client posing as node `mallory` reads in the reply subject of the answers it
        // draws from this node, put on a real peer's name and incarnation: not this node's
        // subject for that peer, so its forged "no responders" is rejected.
        let secret = Secret::fresh();
        let mallory = PeerId {
            name: "mallory".into(),
            incarnation: 7,
        };
        let seen = secret.subject("procsched", "me", &mallory);
        let tag = &seen["procsched.node.me.nr-".len()..][..16];
        let beta = PeerId {
            name: "beta".into(),
            incarnation: 9,
        };
        let forged = format!("procsched.node.me.nr-{tag}{:016x}-beta", beta.incarnation);
        assert_eq!(secret.parse(&forged), None);
        assert_eq!(
            secret.parse(&secret.subject("procsched", "me", &beta)),
            Some(beta)
        );
    }
}
