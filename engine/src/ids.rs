//! Typed ids of the records whose tenant scope matters (issue 51): an account (the tenant), a
//! channel (an official number) and a campaign. A lookup that proves a record belongs to an
//! account takes `(AccountId, ChannelId)` or `(AccountId, CampaignId)`, so the two cannot be
//! swapped or one passed for the other without the compiler saying so. On the wire and in
//! storage each is the plain integer (`#[serde(transparent)]`).

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! typed_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub i64);

        impl $name {
            /// The integer stored and shown.
            pub fn get(self) -> i64 {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl From<$name> for i64 {
            fn from(id: $name) -> i64 {
                id.0
            }
        }
    };
}

typed_id!(
    /// An account: the tenant every record belongs to (spec "Accounts").
    AccountId
);
typed_id!(
    /// A channel: one official number of an account (spec "Channels").
    ChannelId
);
typed_id!(
    /// A campaign of an account (spec "Campaigns").
    CampaignId
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_its_integer_on_the_wire() {
        let id = ChannelId(42);
        assert_eq!(serde_json::to_string(&id).unwrap(), "42");
        assert_eq!(
            serde_json::from_str::<CampaignId>("7").unwrap(),
            CampaignId(7)
        );
        assert_eq!(AccountId(3).to_string(), "3");
        assert_eq!(i64::from(AccountId(3)), 3);
    }
}
