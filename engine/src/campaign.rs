//! Campaigns: their states and the moves between them (decision D-029), and the recipient
//! states that make each send happen at most once.

use serde::{Deserialize, Serialize};

/// A campaign's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum CampaignState {
    /// Created; recipients may be added; nothing is sent.
    Draft,
    /// Waiting for its `scheduled_at` (D-038); starts by itself then.
    Scheduled,
    /// Dispatching through its numbers.
    Running,
    /// Stopped with a reason (no number left, or paused by an operator); resumable.
    Paused,
    /// Every recipient was sent, failed or skipped.
    Completed,
    /// Stopped for good.
    Cancelled,
}

impl CampaignState {
    /// The stored and wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            CampaignState::Draft => "draft",
            CampaignState::Scheduled => "scheduled",
            CampaignState::Running => "running",
            CampaignState::Paused => "paused",
            CampaignState::Completed => "completed",
            CampaignState::Cancelled => "cancelled",
        }
    }

    /// Parses the stored form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "draft" => CampaignState::Draft,
            "scheduled" => CampaignState::Scheduled,
            "running" => CampaignState::Running,
            "paused" => CampaignState::Paused,
            "completed" => CampaignState::Completed,
            "cancelled" => CampaignState::Cancelled,
            _ => return None,
        })
    }

    /// Whether recipients may still be added (draft, running and paused campaigns take more).
    pub fn accepts_recipients(self) -> bool {
        matches!(
            self,
            CampaignState::Draft
                | CampaignState::Scheduled
                | CampaignState::Running
                | CampaignState::Paused
        )
    }

    /// Whether `POST /campaigns/{id}/resend` may send its failed messages again: once it has
    /// started (running, paused or completed; a completed campaign runs again).
    pub fn can_resend(self) -> bool {
        matches!(
            self,
            CampaignState::Running | CampaignState::Paused | CampaignState::Completed
        )
    }

    /// Whether a stored state may be written over by `next` at all (whatever the caller
    /// saw): a cancelled campaign stays cancelled, a completed one only runs again (a resend,
    /// `can_resend`). Guards the compare-and-set of every campaign move (issue 50): a
    /// completion that raced a cancel leaves the cancel standing.
    pub fn may_be_overwritten_by(self, next: CampaignState) -> bool {
        match self {
            CampaignState::Cancelled => next == CampaignState::Cancelled,
            CampaignState::Completed => {
                matches!(next, CampaignState::Completed | CampaignState::Running)
            }
            _ => true,
        }
    }

    /// Whether the campaign may move to `next`.
    pub fn can_move_to(self, next: CampaignState) -> bool {
        use CampaignState::*;
        matches!(
            (self, next),
            (Draft, Running)
                | (Draft, Scheduled)
                | (Draft, Cancelled)
                | (Scheduled, Running)
                | (Scheduled, Draft)
                | (Scheduled, Cancelled)
                | (Running, Paused)
                | (Running, Completed)
                | (Running, Cancelled)
                | (Paused, Running)
                | (Paused, Cancelled)
        )
    }
}

/// A recipient's state: `planned → claimed → sent`, or `failed` / `skipped`. A row is claimed
/// (with its message id) before the provider is called, so it is sent at most once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RecipientState {
    /// A panel campaign's contact not released for sending: before validation and approval,
    /// invalid, or beyond the campaign's `volume` (issue 20, D-062). Never claimed.
    Pending,
    /// Waiting for a number.
    Planned,
    /// Taken by a number; its message is stored, the provider call may be under way.
    Claimed,
    /// The provider's answer was lost (timeout, or a process stopped mid-send): settled by a
    /// status webhook, or planned again after a grace period (D-032).
    InDoubt,
    /// Accepted by the provider.
    Sent,
    /// Refused by the provider or a rule.
    Failed,
    /// Deliberately not sent.
    Skipped,
}

impl RecipientState {
    /// The stored form.
    pub fn as_str(self) -> &'static str {
        match self {
            RecipientState::Pending => "pending",
            RecipientState::Planned => "planned",
            RecipientState::Claimed => "claimed",
            RecipientState::InDoubt => "in_doubt",
            RecipientState::Sent => "sent",
            RecipientState::Failed => "failed",
            RecipientState::Skipped => "skipped",
        }
    }
}

/// The status a campaign send shows (panel list, filter and export; issue 47): its message's
/// status once the provider saw it, else what its recipient state says — `queued` (waiting
/// for a number), `sending` (claimed or in doubt), `skipped`, `failed`. Never empty: a send
/// without a message (waiting, skipped) still has a status. `message_status` is the stored
/// message status, when the recipient has a message.
pub fn send_status(recipient_state: &str, message_status: Option<&str>) -> &'static str {
    use crate::message::MessageStatus as M;
    let message = message_status.and_then(M::parse);
    match recipient_state {
        "skipped" => "skipped",
        "failed" => "failed",
        "planned" | "pending" => "queued",
        _ => match message {
            Some(s @ (M::Sent | M::Delivered | M::Read | M::Failed)) => s.as_str(),
            _ if recipient_state == "sent" => "sent",
            _ => "sending",
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CampaignState::*;

    #[test]
    fn campaign_moves() {
        assert!(Draft.can_move_to(Running));
        assert!(Running.can_move_to(Paused) && Paused.can_move_to(Running));
        assert!(!Completed.can_move_to(Running));
        assert!(Completed.can_resend() && !Draft.can_resend() && !Cancelled.can_resend());
        assert!(!Cancelled.can_move_to(Running));
        assert!(!Draft.can_move_to(Completed));
        for s in [Draft, Running, Paused, Completed, Cancelled] {
            assert_eq!(CampaignState::parse(s.as_str()), Some(s));
        }
        assert!(Draft.accepts_recipients() && !Completed.accepts_recipients());
    }

    #[test]
    fn every_send_has_a_status() {
        assert_eq!(send_status("planned", None), "queued");
        assert_eq!(send_status("skipped", None), "skipped");
        assert_eq!(send_status("skipped", Some("queued")), "skipped");
        assert_eq!(send_status("failed", Some("failed")), "failed");
        assert_eq!(send_status("claimed", Some("queued")), "sending");
        assert_eq!(send_status("in_doubt", None), "sending");
        assert_eq!(send_status("in_doubt", Some("delivered")), "delivered");
        assert_eq!(send_status("sent", Some("read")), "read");
        assert_eq!(send_status("sent", Some("sent")), "sent");
        assert_eq!(send_status("sent", None), "sent");
    }

    #[test]
    fn a_cancel_stands_and_a_completion_only_runs_again() {
        for next in [Draft, Scheduled, Running, Paused, Completed] {
            assert!(!Cancelled.may_be_overwritten_by(next), "{next:?}");
        }
        assert!(Cancelled.may_be_overwritten_by(Cancelled));
        assert!(Completed.may_be_overwritten_by(Running));
        assert!(!Completed.may_be_overwritten_by(Paused));
        assert!(!Completed.may_be_overwritten_by(Cancelled));
        assert!(
            Running.may_be_overwritten_by(Completed) && Running.may_be_overwritten_by(Cancelled)
        );
    }
}
