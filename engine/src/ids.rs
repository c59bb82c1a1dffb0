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

/// Checks an id of the provider's graph a caller sent (a phone number id, a WABA id): digits
/// only, 1 to 32 of them, so a hostile value never becomes a Graph path segment (an empty one
/// would name another node). Errors: `required` when blank, `invalid_id` otherwise.
pub fn check_provider_node_id(
    field: &'static str,
    value: &str,
) -> Result<(), crate::ValidationError> {
    if value.trim().is_empty() {
        return Err(crate::ValidationError::new(
            "required",
            field,
            format!("O campo `{field}` é obrigatório."),
        ));
    }
    if value.len() > 32 || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(crate::ValidationError::new(
            "invalid_id",
            field,
            format!("`{field}` deve conter só dígitos (o id do provedor)."),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod provider_node_id_tests {
    use super::check_provider_node_id;

    #[test]
    fn a_provider_id_is_digits_only() {
        assert!(check_provider_node_id("phone_number_id", "106540352242922").is_ok());
        for bad in ["", "  ", "12a", "../me", "1 2", &"9".repeat(33)] {
            assert!(
                check_provider_node_id("phone_number_id", bad).is_err(),
                "{bad:?}"
            );
        }
        assert_eq!(
            check_provider_node_id("waba_id", "").unwrap_err().code,
            "required"
        );
    }
}
