//! Messages: their statuses, kinds and the acknowledgement values integrators receive.

use serde::{Deserialize, Serialize};

/// Where a message travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// From the business to a contact.
    Out,
    /// From a contact to the business.
    In,
}

impl Direction {
    /// The stored and wire form (`out` / `in`).
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Out => "out",
            Direction::In => "in",
        }
    }
}

/// The payload kind of a message, named as the provider names its `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MessageKind {
    /// Free text (`text.body`).
    Text,
    /// An approved template; business-initiated when sent outside the 24-hour window.
    Template,
    /// An image with an optional caption.
    Image,
    /// A document (PDF, office files…).
    Document,
    /// A video.
    Video,
    /// An audio file or voice note.
    Audio,
    /// Any other inbound kind (sticker, location, reaction…), kept as received.
    Other,
}

impl MessageKind {
    /// The stored and wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageKind::Text => "text",
            MessageKind::Template => "template",
            MessageKind::Image => "image",
            MessageKind::Document => "document",
            MessageKind::Video => "video",
            MessageKind::Audio => "audio",
            MessageKind::Other => "other",
        }
    }

    /// Parses the stored form; unknown kinds read as [`MessageKind::Other`].
    pub fn parse(s: &str) -> Self {
        match s {
            "text" => MessageKind::Text,
            "template" => MessageKind::Template,
            "image" => MessageKind::Image,
            "document" => MessageKind::Document,
            "video" => MessageKind::Video,
            "audio" => MessageKind::Audio,
            _ => MessageKind::Other,
        }
    }
}

/// A message's stored status (spec: "Message statuses used by report filters").
///
/// Outbound messages move `queued → sending → sent → delivered → read`, or to `failed`;
/// `skipped` marks a campaign recipient that was deliberately not sent. `delivered` and `read`
/// also have their own timestamps, set whenever the provider reports them (see
/// [`next_status`]).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum MessageStatus {
    /// Stored, not yet handed to the provider.
    Queued,
    /// Handed to the provider; its answer is pending.
    Sending,
    /// Accepted by the provider (it returned a message id) or reported `sent`.
    Sent,
    /// The provider reported delivery to the handset.
    Delivered,
    /// The provider reported that the contact read it.
    Read,
    /// Refused by the provider, synchronously or through a `failed` status.
    Failed,
    /// Not sent on purpose (e.g. a campaign recipient that a rule excluded).
    Skipped,
    /// Received from a contact (inbound messages only).
    Received,
}

impl MessageStatus {
    /// The stored and wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageStatus::Queued => "queued",
            MessageStatus::Sending => "sending",
            MessageStatus::Sent => "sent",
            MessageStatus::Delivered => "delivered",
            MessageStatus::Read => "read",
            MessageStatus::Failed => "failed",
            MessageStatus::Skipped => "skipped",
            MessageStatus::Received => "received",
        }
    }

    /// Parses the stored form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "queued" => MessageStatus::Queued,
            "sending" => MessageStatus::Sending,
            "sent" => MessageStatus::Sent,
            "delivered" => MessageStatus::Delivered,
            "read" => MessageStatus::Read,
            "failed" => MessageStatus::Failed,
            "skipped" => MessageStatus::Skipped,
            "received" => MessageStatus::Received,
            _ => return None,
        })
    }

    /// Rank on the delivery ladder; a status only ever moves up it.
    fn rank(self) -> u8 {
        match self {
            MessageStatus::Queued => 0,
            MessageStatus::Sending => 1,
            MessageStatus::Sent => 2,
            MessageStatus::Delivered => 3,
            MessageStatus::Read => 4,
            MessageStatus::Failed | MessageStatus::Skipped | MessageStatus::Received => 5,
        }
    }
}

/// A delivery status reported by the provider in `statuses[].status` (PROVIDER.md §9.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderStatus {
    /// Accepted by WhatsApp's servers.
    Sent,
    /// Delivered to the contact's device.
    Delivered,
    /// Read by the contact.
    Read,
    /// A voice message was first played (treated as read).
    Played,
    /// Not delivered; `errors[]` says why.
    Failed,
}

impl ProviderStatus {
    /// Parses the provider's string; unknown values give `None` (ignored, never an error).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "sent" => ProviderStatus::Sent,
            "delivered" => ProviderStatus::Delivered,
            "read" => ProviderStatus::Read,
            "played" => ProviderStatus::Played,
            "failed" => ProviderStatus::Failed,
            _ => return None,
        })
    }

    /// The acknowledgement sent to integrators in `message.ack` for this status.
    pub fn ack(self) -> Ack {
        match self {
            ProviderStatus::Sent => Ack::Sent,
            ProviderStatus::Delivered => Ack::Delivered,
            ProviderStatus::Read => Ack::Read,
            ProviderStatus::Played => Ack::Played,
            ProviderStatus::Failed => Ack::Failed,
        }
    }
}

/// The stored status a message takes when the provider reports `reported` while it is
/// `current`. Statuses never move backwards (the provider may deliver `delivered` after
/// `read`, or skip `delivered`), and `failed` after `sent` wins, because the provider can fail a
/// message it had accepted (e.g. 131049). Returns `None` when the stored status stays as is.
pub fn next_status(current: MessageStatus, reported: ProviderStatus) -> Option<MessageStatus> {
    let target = match reported {
        ProviderStatus::Sent => MessageStatus::Sent,
        ProviderStatus::Delivered => MessageStatus::Delivered,
        ProviderStatus::Read | ProviderStatus::Played => MessageStatus::Read,
        ProviderStatus::Failed => MessageStatus::Failed,
    };
    match current {
        MessageStatus::Failed | MessageStatus::Skipped | MessageStatus::Received => None,
        _ if target == MessageStatus::Failed => {
            // A failure after delivery or read is not credible; keep what the contact saw.
            (current.rank() < MessageStatus::Delivered.rank()).then_some(MessageStatus::Failed)
        }
        _ => (target.rank() > current.rank()).then_some(target),
    }
}

/// The acknowledgement values of `message.ack` events (decision D-004 in docs/decisions.md).
///
/// `ack` is an integer ordered like the delivery ladder so that automation can compare it;
/// `ack_label` is its stable English name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Ack {
    /// -1: the provider reported a failure.
    Failed,
    /// 1: the provider's servers accepted it.
    Sent,
    /// 2: delivered to the device.
    Delivered,
    /// 3: read by the contact.
    Read,
    /// 4: a voice message was played.
    Played,
}

impl Ack {
    /// The integer value (`-1`, `1`, `2`, `3`, `4`).
    pub fn value(self) -> i32 {
        match self {
            Ack::Failed => -1,
            Ack::Sent => 1,
            Ack::Delivered => 2,
            Ack::Read => 3,
            Ack::Played => 4,
        }
    }

    /// The label (`failed`, `sent`, `delivered`, `read`, `played`).
    pub fn label(self) -> &'static str {
        match self {
            Ack::Failed => "failed",
            Ack::Sent => "sent",
            Ack::Delivered => "delivered",
            Ack::Read => "read",
            Ack::Played => "played",
        }
    }
}

/// Whether free text may be sent now: the contact's last inbound message (ms since epoch), if
/// any, must be less than 24 hours old (PROVIDER.md §10.5, spec "Limits").
pub fn window_open(last_inbound_at: Option<i64>, now: i64) -> bool {
    matches!(last_inbound_at, Some(t) if now - t < crate::DAY_MS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use MessageStatus as M;
    use ProviderStatus as P;

    #[test]
    fn statuses_only_move_up_the_ladder() {
        let table = [
            (M::Sending, P::Sent, Some(M::Sent)),
            (M::Queued, P::Delivered, Some(M::Delivered)),
            (M::Sent, P::Delivered, Some(M::Delivered)),
            (M::Sent, P::Read, Some(M::Read)),
            (M::Read, P::Delivered, None),
            (M::Delivered, P::Sent, None),
            (M::Delivered, P::Played, Some(M::Read)),
            (M::Sent, P::Failed, Some(M::Failed)),
            (M::Sending, P::Failed, Some(M::Failed)),
            (M::Read, P::Failed, None),
            (M::Failed, P::Read, None),
            (M::Skipped, P::Sent, None),
        ];
        for (current, reported, want) in table {
            assert_eq!(
                next_status(current, reported),
                want,
                "{current:?} + {reported:?}"
            );
        }
    }

    #[test]
    fn stored_forms_round_trip() {
        for s in [
            M::Queued,
            M::Sending,
            M::Sent,
            M::Delivered,
            M::Read,
            M::Failed,
            M::Skipped,
            M::Received,
        ] {
            assert_eq!(MessageStatus::parse(s.as_str()), Some(s));
        }
        for k in ["text", "template", "image", "document", "video", "audio"] {
            assert_eq!(MessageKind::parse(k).as_str(), k);
        }
    }

    #[test]
    fn ack_values_follow_the_ladder() {
        assert_eq!(P::Failed.ack().value(), -1);
        assert!(P::Sent.ack().value() < P::Delivered.ack().value());
        assert!(P::Delivered.ack().value() < P::Read.ack().value());
        assert_eq!(P::Read.ack().label(), "read");
    }

    #[test]
    fn the_window_lasts_24_hours_from_the_last_inbound_message() {
        let now = 10 * crate::DAY_MS;
        assert!(!window_open(None, now));
        assert!(window_open(Some(now - 1000), now));
        assert!(window_open(Some(now - crate::DAY_MS + 1), now));
        assert!(!window_open(Some(now - crate::DAY_MS), now));
    }

    proptest::proptest! {
        /// A message's status never moves backwards down the delivery ladder, whatever order
        /// the provider's reports arrive in; a final status (failed, skipped, received) stays.
        #[test]
        fn a_status_never_moves_backwards(
            start in 0usize..8,
            reports in proptest::collection::vec(0usize..5, 0..20),
        ) {
            use MessageStatus as M;
            use ProviderStatus as P;
            let all = [M::Queued, M::Sending, M::Sent, M::Delivered, M::Read, M::Failed, M::Skipped, M::Received];
            let reported = [P::Sent, P::Delivered, P::Read, P::Played, P::Failed];
            let mut current = all[start];
            for r in reports {
                let before = current;
                if let Some(next) = next_status(current, reported[r]) {
                    proptest::prop_assert!(next.rank() > before.rank(), "{:?} -> {:?}", before, next);
                    current = next;
                }
                if matches!(before, M::Failed | M::Skipped | M::Received) {
                    proptest::prop_assert_eq!(current, before);
                }
                if matches!(before, M::Delivered | M::Read) {
                    proptest::prop_assert_ne!(current, M::Failed);
                }
            }
        }
    }
}
