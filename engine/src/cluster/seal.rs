//! Signed messages between nodes (cluster mode, issue 52, decision D-111): every request a node
//! puts on a NATS subject and every reply to one carries an HMAC-SHA256 under a key derived from
//! the master key, so a client of the NATS server that is not a disparo node of this cluster
//! can neither forge a control message (a quality change, a 1:1 send) nor answer one in a
//! node's place, and a captured request does not work twice.
//!
//! A request: `1` (version) ‖ sent at (ms since the epoch, 8 bytes big-endian) ‖ nonce (16
//! bytes) ‖ tag (32 bytes) ‖ body, the tag over `"req"` ‖ subject ‖ sent at ‖ nonce ‖ body. It
//! is accepted within [`WINDOW_MS`] of the receiver's clock and once ([`Replays`]).
//! A reply: `1` ‖ tag (32 bytes) ‖ body, the tag over `"rep"` ‖ the request's tag ‖ body: it
//! answers that request and no other.
//!
//! Pure: the clock and the nonce are passed in.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::collections::{BTreeMap, HashMap};

/// How far a request's send time may be from the receiver's clock, ms (either way). Nodes'
/// clocks must agree within it (NTP); a request older than this is refused as a replay.
pub const WINDOW_MS: i64 = 30_000;

/// The version byte of both forms.
const VERSION: u8 = 1;
/// A request's header before the body: version, sent at, nonce, tag.
const REQUEST_HEAD: usize = 1 + 8 + 16 + 32;
/// A reply's header before the body: version, tag.
const REPLY_HEAD: usize = 1 + 32;

/// The 32-byte key both sides sign with (derived from the master key by the caller).
#[derive(Clone)]
pub struct SealKey([u8; 32]);

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealKey(***)")
    }
}

impl SealKey {
    /// From 32 bytes.
    pub fn new(key: [u8; 32]) -> Self {
        Self(key)
    }

    fn mac(&self, domain: &[u8]) -> Hmac<Sha256> {
        let mut m = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        m.update(domain);
        m
    }
}

/// A request's tag: what its reply is bound to and what [`Replays`] remembers.
pub type Tag = [u8; 32];

/// Why a message was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealError {
    /// Too short or an unknown version.
    Malformed,
    /// The tag does not match (another key, a changed byte, another subject or request).
    BadTag,
    /// Sent more than [`WINDOW_MS`] from the receiver's clock.
    Stale,
    /// Already accepted once.
    Replayed,
}

/// A request as accepted: its tag (to seal the reply with) and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened<'a> {
    /// The request's tag.
    pub tag: Tag,
    /// When it was sent, ms.
    pub sent_at_ms: i64,
    /// The body.
    pub body: &'a [u8],
}

fn request_mac(key: &SealKey, subject: &str, head: &[u8], body: &[u8]) -> Hmac<Sha256> {
    let mut m = key.mac(b"req");
    m.update(&(subject.len() as u64).to_be_bytes());
    m.update(subject.as_bytes());
    m.update(head);
    m.update(body);
    m
}

/// Seals a request for `subject` sent at `now_ms` with a fresh random `nonce`; returns the
/// bytes to publish and the tag its reply must be bound to.
pub fn seal_request(
    key: &SealKey,
    subject: &str,
    now_ms: i64,
    nonce: [u8; 16],
    body: &[u8],
) -> (Vec<u8>, Tag) {
    let mut head = [0u8; 24];
    head[..8].copy_from_slice(&now_ms.to_be_bytes());
    head[8..].copy_from_slice(&nonce);
    let tag: Tag = request_mac(key, subject, &head, body)
        .finalize()
        .into_bytes()
        .into();
    let mut out = Vec::with_capacity(REQUEST_HEAD + body.len());
    out.push(VERSION);
    out.extend_from_slice(&head);
    out.extend_from_slice(&tag);
    out.extend_from_slice(body);
    (out, tag)
}

/// Opens a request received on `subject` at `now_ms`: checks the tag (in constant time) and the
/// window. Replays are the caller's to refuse, with [`Replays::admit`]. Errors:
/// [`SealError::Malformed`], [`SealError::BadTag`], [`SealError::Stale`].
pub fn open_request<'a>(
    key: &SealKey,
    subject: &str,
    now_ms: i64,
    bytes: &'a [u8],
) -> Result<Opened<'a>, SealError> {
    if bytes.len() < REQUEST_HEAD || bytes[0] != VERSION {
        return Err(SealError::Malformed);
    }
    let head = &bytes[1..25];
    let tag = &bytes[25..REQUEST_HEAD];
    let body = &bytes[REQUEST_HEAD..];
    request_mac(key, subject, head, body)
        .verify_slice(tag)
        .map_err(|_| SealError::BadTag)?;
    let sent_at_ms = i64::from_be_bytes(head[..8].try_into().expect("8 bytes"));
    if (now_ms - sent_at_ms).abs() > WINDOW_MS {
        return Err(SealError::Stale);
    }
    Ok(Opened {
        tag: tag.try_into().expect("32 bytes"),
        sent_at_ms,
        body,
    })
}

fn reply_mac(key: &SealKey, request: &Tag, body: &[u8]) -> Hmac<Sha256> {
    let mut m = key.mac(b"rep");
    m.update(request);
    m.update(body);
    m
}

/// Seals the reply to the request tagged `request`.
pub fn seal_reply(key: &SealKey, request: &Tag, body: &[u8]) -> Vec<u8> {
    let tag = reply_mac(key, request, body).finalize().into_bytes();
    let mut out = Vec::with_capacity(REPLY_HEAD + body.len());
    out.push(VERSION);
    out.extend_from_slice(&tag);
    out.extend_from_slice(body);
    out
}

/// Opens a reply to the request tagged `request`; its body. Errors: [`SealError::Malformed`],
/// [`SealError::BadTag`] (another key, or a reply to another request).
pub fn open_reply<'a>(
    key: &SealKey,
    request: &Tag,
    bytes: &'a [u8],
) -> Result<&'a [u8], SealError> {
    if bytes.len() < REPLY_HEAD || bytes[0] != VERSION {
        return Err(SealError::Malformed);
    }
    let body = &bytes[REPLY_HEAD..];
    reply_mac(key, request, body)
        .verify_slice(&bytes[1..REPLY_HEAD])
        .map_err(|_| SealError::BadTag)?;
    Ok(body)
}

/// The requests a listener accepted in the last [`WINDOW_MS`] × 2, by tag: a request seen
/// again is refused. Bounded by what arrives in the window; forgotten as the window moves.
#[derive(Debug, Default)]
pub struct Replays {
    seen: HashMap<Tag, i64>,
    by_time: BTreeMap<(i64, Tag), ()>,
}

impl Replays {
    /// Remembers `opened` at `now_ms`; `false` when it was accepted before (a replay).
    pub fn admit(&mut self, opened: &Opened<'_>, now_ms: i64) -> bool {
        self.forget(now_ms);
        if self.seen.contains_key(&opened.tag) {
            return false;
        }
        self.seen.insert(opened.tag, opened.sent_at_ms);
        self.by_time.insert((opened.sent_at_ms, opened.tag), ());
        true
    }

    /// How many requests are remembered.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// Forgets requests sent before the window (they are refused as stale anyway).
    fn forget(&mut self, now_ms: i64) {
        let horizon = now_ms - 2 * WINDOW_MS;
        while let Some((&(at, tag), _)) = self.by_time.first_key_value() {
            if at >= horizon {
                break;
            }
            self.by_time.pop_first();
            self.seen.remove(&tag);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> SealKey {
        SealKey::new([b; 32])
    }

    #[test]
    fn a_request_opens_once_with_its_key_and_subject() {
        let (bytes, tag) = seal_request(&key(1), "dsp.ch.7.ctl", 1_000, [9; 16], b"hello");
        let opened = open_request(&key(1), "dsp.ch.7.ctl", 1_500, &bytes).unwrap();
        assert_eq!(opened.body, b"hello");
        assert_eq!(opened.tag, tag);
        assert_eq!(
            open_request(&key(2), "dsp.ch.7.ctl", 1_500, &bytes),
            Err(SealError::BadTag)
        );
        assert_eq!(
            open_request(&key(1), "dsp.ch.8.ctl", 1_500, &bytes),
            Err(SealError::BadTag)
        );
        let mut replays = Replays::default();
        assert!(replays.admit(&opened, 1_500));
        assert!(!replays.admit(&opened, 1_600));
    }

    #[test]
    fn a_changed_byte_or_a_plain_body_is_refused() {
        let (mut bytes, _) = seal_request(&key(1), "s", 0, [0; 16], b"{\"Snapshot\":null}");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert_eq!(
            open_request(&key(1), "s", 0, &bytes),
            Err(SealError::BadTag)
        );
        assert_eq!(
            open_request(&key(1), "s", 0, b"\"Snapshot\""),
            Err(SealError::Malformed)
        );
    }

    #[test]
    fn old_or_future_requests_are_stale() {
        let (bytes, _) = seal_request(&key(1), "s", 100_000, [0; 16], b"x");
        assert!(open_request(&key(1), "s", 100_000 + WINDOW_MS, &bytes).is_ok());
        assert_eq!(
            open_request(&key(1), "s", 100_001 + WINDOW_MS, &bytes),
            Err(SealError::Stale)
        );
        assert_eq!(
            open_request(&key(1), "s", 99_999 - WINDOW_MS, &bytes),
            Err(SealError::Stale)
        );
    }

    #[test]
    fn a_reply_answers_its_request_only() {
        let (_, tag_a) = seal_request(&key(1), "s", 0, [1; 16], b"a");
        let (_, tag_b) = seal_request(&key(1), "s", 0, [2; 16], b"a");
        assert_ne!(tag_a, tag_b, "the nonce makes equal requests differ");
        let reply = seal_reply(&key(1), &tag_a, b"ok");
        assert_eq!(open_reply(&key(1), &tag_a, &reply), Ok(&b"ok"[..]));
        assert_eq!(open_reply(&key(1), &tag_b, &reply), Err(SealError::BadTag));
        assert_eq!(open_reply(&key(2), &tag_a, &reply), Err(SealError::BadTag));
        assert_eq!(
            open_reply(&key(1), &tag_a, b"ok"),
            Err(SealError::Malformed)
        );
    }

    #[test]
    fn replays_forget_what_the_window_refuses_anyway() {
        let mut replays = Replays::default();
        for i in 0..100u8 {
            let (bytes, _) = seal_request(&key(1), "s", i64::from(i) * 1_000, [i; 16], b"x");
            let opened = open_request(&key(1), "s", i64::from(i) * 1_000, &bytes).unwrap();
            assert!(replays.admit(&opened, i64::from(i) * 1_000));
        }
        assert!(replays.len() <= (2 * WINDOW_MS / 1_000 + 1) as usize);
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_open_or_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            proptest::prop_assert!(open_request(&key(1), "s", 0, &bytes).is_err());
            proptest::prop_assert!(open_reply(&key(1), &[0; 32], &bytes).is_err());
        }
    }
}
