//! The reply subject of a node's frames: NATS answers it "no responders" when the peer's
//! subscription is gone, which declares the peer down at once (`NodeShared::peer_unreached`).
//!
//! Why a secret in it: any client of the server can publish to a node's subjects, and a "no
//! responders" answer is only a status header (`NATS/1.0 503`) that any client can write. Were
//! the subject guessable (this node's name, the peer's name and incarnation — all read from the
//! membership bucket), one forged header would make this node declare a live peer down. The
//! subject carries a random secret drawn at the node's start, which travels only as the reply
//! subject of this node's own frames: a forger must first read them (a client allowed to read
//! another node's subjects can do worse; NATS permissions keep such clients out).

use super::node::PeerId;

/// The first characters of the token the subject adds after the node's own subjects.
const UNREACHED: &str = "nr-";

/// This node's secret for its reply subjects: random, non-zero.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Secret(u64);

impl Secret {
    /// A fresh secret: the standard library's per-process random hash keys (drawn from the
    /// operating system's generator), mixed with the clock.
    pub(crate) fn fresh() -> Secret {
        Secret(super::start::random_u64())
    }

    /// The subject of every frame to `peer` from node `me` under `prefix`: one token after
    /// the node's subjects (its subscription `<prefix>.node.<me>.*` reads the answer),
    /// `nr-<secret, 16 hex digits><incarnation, 16 hex digits>-<name>`.
    pub(crate) fn subject(self, prefix: &str, me: &str, peer: &PeerId) -> String {
        format!(
            "{prefix}.node.{me}.{UNREACHED}{:016x}{:016x}-{}",
            self.0, peer.incarnation, peer.name
        )
    }

    /// The peer a "no responders" answer is about, from the subject it came on; `None` if it
    /// is not a subject [`subject`](Self::subject) made with this secret.
    pub(crate) fn parse(self, subject: &str) -> Option<PeerId> {
        let token = subject.rsplit('.').next()?.strip_prefix(UNREACHED)?;
        let (numbers, name) = token.split_once('-')?;
        if numbers.len() != 32 || name.is_empty() || !numbers.is_ascii() {
            return None;
        }
        let (secret, incarnation) = numbers.split_at(16);
        if u64::from_str_radix(secret, 16).ok()? != self.0 {
            return None;
        }
        Some(PeerId {
            name: name.into(),
            incarnation: u64::from_str_radix(incarnation, 16).ok()?,
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
        let secret = Secret(0x0123_4567_89ab_cdef);
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
            // The same subject under another secret: a forgery.
            assert_eq!(Secret(1).parse(&subject), None, "{subject}");
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
}
