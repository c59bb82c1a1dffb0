//! API tokens: their shape and how they are stored (a SHA-256 hash, never the value).

use sha2::{Digest, Sha256};

/// Every account API token starts with this prefix (spec "Authentication" item 2).
pub const TOKEN_PREFIX: &str = "svc_";

/// How many characters of a token are kept in clear for display (`svc_AbCd…`).
pub const DISPLAY_PREFIX_LEN: usize = 8;

/// Lowercase hex SHA-256 of a token value: the only form in which tokens are stored.
pub fn hash_token(value: &str) -> String {
    hex::encode(Sha256::digest(value.as_bytes()))
}

/// Whether `value` has the shape of an account token (`svc_` plus 20 to 128 URL-safe
/// characters). A cheap pre-check that spares a storage read for garbage.
pub fn looks_like_token(value: &str) -> bool {
    value.strip_prefix(TOKEN_PREFIX).is_some_and(|rest| {
        (20..=128).contains(&rest.len())
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    })
}

/// The display prefix of a token (its first [`DISPLAY_PREFIX_LEN`] characters).
pub fn display_prefix(value: &str) -> String {
    value.chars().take(DISPLAY_PREFIX_LEN).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_shapes() {
        assert!(looks_like_token("svc_abcdefghijklmnopqrstuvwxyz012345"));
        assert!(!looks_like_token("svc_short"));
        assert!(!looks_like_token("xyz_abcdefghijklmnopqrstuvwxyz012345"));
        assert!(!looks_like_token("svc_abcdefghijklmnopqrst uvwxyz012345"));
        assert_eq!(hash_token("a").len(), 64);
        assert_eq!(display_prefix("svc_abcdefgh"), "svc_abcd");
    }
}
