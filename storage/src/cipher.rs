//! Encryption of stored secrets (access tokens, app secrets, webhook signing secrets) with
//! AES-256-GCM under the master key (`DISPARO_MASTER_KEY`, DESIGN.md §4).

use aes_gcm::aead::{Aead, KeyInit};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use engine::Secret;
use rand::RngCore;

/// Encrypts and decrypts secrets. Stored form: `v1:` + base64(12-byte nonce ‖ ciphertext+tag).
#[derive(Clone)]
pub struct Cipher {
    aead: Aes256Gcm,
}

impl std::fmt::Debug for Cipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cipher(***)")
    }
}

/// Errors of the cipher.
#[derive(Debug, thiserror::Error)]
pub enum CipherError {
    /// The master key is not base64 of exactly 32 bytes.
    #[error("DISPARO_MASTER_KEY must be base64 of exactly 32 bytes")]
    BadKey,
    /// A stored value does not decrypt under this key (wrong key or corrupted row).
    #[error("a stored secret does not decrypt with this master key")]
    Undecryptable,
}

impl Cipher {
    /// From the base64 text of a 32-byte key.
    pub fn from_base64(key_b64: &str) -> Result<Self, CipherError> {
        let key = B64
            .decode(key_b64.trim())
            .map_err(|_| CipherError::BadKey)?;
        Self::from_bytes(&key)
    }

    /// From 32 raw bytes.
    pub fn from_bytes(key: &[u8]) -> Result<Self, CipherError> {
        let aead = Aes256Gcm::new_from_slice(key).map_err(|_| CipherError::BadKey)?;
        Ok(Self { aead })
    }

    /// A new random key as base64 text (for the generated key file).
    pub fn generate_key_base64() -> String {
        let mut key = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut key);
        B64.encode(key)
    }

    /// Encrypts a secret to its stored form.
    pub fn seal(&self, secret: &Secret) -> String {
        let mut nonce = [0u8; 12];
        rand::thread_rng().fill_bytes(&mut nonce);
        let ct = self
            .aead
            .encrypt(Nonce::from_slice(&nonce), secret.expose().as_bytes())
            .expect("AES-GCM encryption of an in-memory buffer does not fail");
        let mut out = Vec::with_capacity(12 + ct.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ct);
        format!("v1:{}", B64.encode(out))
    }

    /// Decrypts a stored form.
    pub fn open(&self, stored: &str) -> Result<Secret, CipherError> {
        let raw = stored
            .strip_prefix("v1:")
            .and_then(|b| B64.decode(b).ok())
            .filter(|r| r.len() > 12)
            .ok_or(CipherError::Undecryptable)?;
        let (nonce, ct) = raw.split_at(12);
        let pt = self
            .aead
            .decrypt(Nonce::from_slice(nonce), ct)
            .map_err(|_| CipherError::Undecryptable)?;
        String::from_utf8(pt)
            .map(Secret::new)
            .map_err(|_| CipherError::Undecryptable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_then_open_round_trips_and_other_keys_fail() {
        let c = Cipher::from_base64(&Cipher::generate_key_base64()).unwrap();
        let stored = c.seal(&Secret::new("EAAG-secret"));
        assert!(!stored.contains("EAAG"));
        assert_eq!(c.open(&stored).unwrap().expose(), "EAAG-secret");
        assert_ne!(stored, c.seal(&Secret::new("EAAG-secret")), "nonces differ");
        let other = Cipher::from_base64(&Cipher::generate_key_base64()).unwrap();
        assert!(other.open(&stored).is_err());
        assert!(c.open("v1:garbage").is_err());
        assert!(Cipher::from_base64("c2hvcnQ=").is_err());
    }
}
