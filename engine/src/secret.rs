//! A wrapper that keeps secrets out of logs.

use sha2::{Digest, Sha256};
use std::fmt;

/// Compares two secrets (verify tokens, keys) in constant time: both are hashed with SHA-256
/// and the digests compared without an early exit, so neither the position of the first
/// difference nor the length of the expected value shows in the time taken (issue 15).
pub fn constant_time_eq(given: &[u8], expected: &[u8]) -> bool {
    let (a, b) = (Sha256::digest(given), Sha256::digest(expected));
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

/// A secret string (access token, app secret, signing secret). `Debug` and `Display` print
/// `***`, so a secret never reaches a log line by accident; read it with
/// [`Secret::expose`] where it is really needed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn secrets_do_not_print() {
        let s = super::Secret::new("EAAG-token");
        assert_eq!(format!("{s:?} {s}"), "Secret(***) ***");
        assert_eq!(s.expose(), "EAAG-token");
    }
}

#[cfg(test)]
mod constant_time_tests {
    use super::constant_time_eq;

    #[test]
    fn equal_only_when_equal() {
        assert!(constant_time_eq(b"token-123", b"token-123"));
        assert!(!constant_time_eq(b"token-124", b"token-123"));
        assert!(!constant_time_eq(b"token-12", b"token-123"));
        assert!(!constant_time_eq(b"", b"token-123"));
        assert!(constant_time_eq(b"", b""));
    }
}
