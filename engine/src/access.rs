//! Access levels of API tokens (decision D-027): `read` < `write` < `admin`.

use serde::{Deserialize, Serialize};

/// What a token may do. Ordered: a higher level may do everything a lower one may.
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
pub enum Level {
    /// Reads only.
    Read,
    /// Reads, sends, campaigns, templates, webhooks, channel configuration.
    Write,
    /// Everything, including deleting templates, authorizing numbers past their daily cap
    /// and managing tokens.
    Admin,
}

impl Level {
    /// Every level, lowest first.
    pub const ALL: [Level; 3] = [Level::Read, Level::Write, Level::Admin];

    /// Parses `read`, `write`, `admin`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "read" => Some(Level::Read),
            "write" => Some(Level::Write),
            "admin" => Some(Level::Admin),
            _ => None,
        }
    }

    /// The stored and wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Read => "read",
            Level::Write => "write",
            Level::Admin => "admin",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_ordered() {
        assert!(Level::Read < Level::Write && Level::Write < Level::Admin);
        for l in Level::ALL {
            assert_eq!(Level::parse(l.as_str()), Some(l));
        }
        assert_eq!(Level::parse("root"), None);
    }
}
