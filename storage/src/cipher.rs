//! Encryption of stored secrets (access tokens, app secrets, webhook signing secrets) with
//! AES-256-GCM under the master key (`DISPARO_MASTER_KEY`, DESIGN.md §4).

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use engine::Secret;
use rand::RngCore;

/// Encrypts and decrypts secrets. Stored form: `v2:` + base64(12-byte nonce ‖ ciphertext+tag),
/// sealed with associated data naming the row it belongs to (`table.column:id`), so a stored
/// value copied into another row or column does not open (issue 15, D-052). The `v1:` form
/// (no associated data) of older databases is re-sealed at start by
/// [`crate::Store::reseal_legacy_secrets`] and not read otherwise.
#[derive(Clone)]
pub struct Cipher {
    aead: Aes256Gcm,
    /// The key itself, for [`Cipher::derive_key`].
    root: [u8; 32],
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
        let root = key.try_into().map_err(|_| CipherError::BadKey)?;
        Ok(Self { aead, root })
    }

    /// A 32-byte key for another use, derived from the master key and `label` (HMAC-SHA256
    /// keyed with the master key over the label): e.g. the key nodes sign their NATS messages
    /// with (`engine::cluster::seal`, D-111). Different labels give unrelated keys, and none
    /// reveals the master key.
    pub fn derive_key(&self, label: &str) -> [u8; 32] {
        use hmac::Mac;
        let mut m = <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(&self.root)
            .expect("HMAC takes any key length");
        m.update(b"disparo derived key\0");
        m.update(label.as_bytes());
        m.finalize().into_bytes().into()
    }

    /// A new random key as base64 text (for the generated key file).
    pub fn generate_key_base64() -> String {
        let mut key = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut key);
        B64.encode(key)
    }

    fn encrypt(&self, prefix: &str, secret: &Secret, aad: &[u8]) -> String {
        let mut nonce = [0u8; 12];
        rand::thread_rng().fill_bytes(&mut nonce);
        let ct = self
            .aead
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: secret.expose().as_bytes(),
                    aad,
                },
            )
            .expect("AES-GCM encryption of an in-memory buffer does not fail");
        let mut out = Vec::with_capacity(12 + ct.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ct);
        format!("{prefix}{}", B64.encode(out))
    }

    fn decrypt(&self, prefix: &str, stored: &str, aad: &[u8]) -> Result<Secret, CipherError> {
        let raw = stored
            .strip_prefix(prefix)
            .and_then(|b| B64.decode(b).ok())
            .filter(|r| r.len() > 12)
            .ok_or(CipherError::Undecryptable)?;
        let (nonce, ct) = raw.split_at(12);
        let pt = self
            .aead
            .decrypt(Nonce::from_slice(nonce), Payload { msg: ct, aad })
            .map_err(|_| CipherError::Undecryptable)?;
        String::from_utf8(pt)
            .map(Secret::new)
            .map_err(|_| CipherError::Undecryptable)
    }

    /// Encrypts a secret for the row `id` of `table`, column `column` (its stored form,
    /// `v2:…`).
    pub fn seal(&self, secret: &Secret, table: &str, column: &str, id: i64) -> String {
        self.encrypt("v2:", secret, bound_to(table, column, id).as_bytes())
    }

    /// Decrypts the stored form of row `id` of `table`, column `column`. Errors:
    /// [`CipherError::Undecryptable`] for another key, a corrupted value, a value sealed for
    /// another row or column, or the legacy `v1:` form.
    pub fn open(
        &self,
        stored: &str,
        table: &str,
        column: &str,
        id: i64,
    ) -> Result<Secret, CipherError> {
        self.decrypt("v2:", stored, bound_to(table, column, id).as_bytes())
    }

    /// The legacy `v1:` form (no associated data), as databases before D-052 hold it: only
    /// for the migration that re-seals them and its tests.
    pub fn seal_legacy(&self, secret: &Secret) -> String {
        self.encrypt("v1:", secret, b"")
    }

    /// Opens the legacy `v1:` form (see [`Cipher::seal_legacy`]).
    pub fn open_legacy(&self, stored: &str) -> Result<Secret, CipherError> {
        self.decrypt("v1:", stored, b"")
    }
}

/// The associated data that binds a sealed value to its row.
fn bound_to(table: &str, column: &str, id: i64) -> String {
    format!("disparo:{table}.{column}:{id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_keys_depend_on_the_master_key_and_the_label() {
        let c = Cipher::from_bytes(&[7; 32]).unwrap();
        let d = Cipher::from_bytes(&[8; 32]).unwrap();
        assert_eq!(c.derive_key("nats"), c.derive_key("nats"));
        assert_ne!(c.derive_key("nats"), c.derive_key("other"));
        assert_ne!(c.derive_key("nats"), d.derive_key("nats"));
        assert_ne!(c.derive_key("nats"), [7; 32]);
    }

    #[test]
    fn seal_then_open_round_trips_and_other_keys_fail() {
        let c = Cipher::from_base64(&Cipher::generate_key_base64()).unwrap();
        let secret = Secret::new("EAAG-secret");
        let stored = c.seal(&secret, "channels", "access_token_enc", 7);
        assert!(!stored.contains("EAAG") && stored.starts_with("v2:"));
        assert_eq!(
            c.open(&stored, "channels", "access_token_enc", 7)
                .unwrap()
                .expose(),
            "EAAG-secret"
        );
        assert_ne!(
            stored,
            c.seal(&secret, "channels", "access_token_enc", 7),
            "nonces differ"
        );
        let other = Cipher::from_base64(&Cipher::generate_key_base64()).unwrap();
        assert!(other
            .open(&stored, "channels", "access_token_enc", 7)
            .is_err());
        assert!(c
            .open("v2:garbage", "channels", "access_token_enc", 7)
            .is_err());
        assert!(Cipher::from_base64("c2hvcnQ=").is_err());
    }

    #[test]
    fn a_sealed_value_opens_only_in_its_own_row_and_column() {
        let c = Cipher::from_base64(&Cipher::generate_key_base64()).unwrap();
        let stored = c.seal(&Secret::new("s"), "channels", "app_secret_enc", 1);
        assert!(
            c.open(&stored, "channels", "app_secret_enc", 2).is_err(),
            "another row"
        );
        assert!(
            c.open(&stored, "channels", "access_token_enc", 1).is_err(),
            "another column"
        );
        assert!(
            c.open(&stored, "webhook_subscriptions", "secret_enc", 1)
                .is_err(),
            "another table"
        );
        let legacy = c.seal_legacy(&Secret::new("s"));
        assert!(
            c.open(&legacy, "channels", "app_secret_enc", 1).is_err(),
            "v1 is not read"
        );
        assert_eq!(c.open_legacy(&legacy).unwrap().expose(), "s");
    }
}
