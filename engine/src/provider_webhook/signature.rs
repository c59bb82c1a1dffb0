//! `X-Hub-Signature-256`: how the provider signs webhook bodies (PROVIDER.md §8.2).
//!
//! The provider signs the body with HMAC-SHA256 keyed by the app secret, over the body in which
//! every non-ASCII character is written as `\uXXXX` (UTF-16 code units, lowercase hex). It also
//! sends its bodies already escaped that way, so hashing the received bytes works; a body that
//! reached us with raw UTF-8 (re-encoded by a proxy, or the simulator's raw mode) verifies only
//! after escaping. [`verify`] accepts both.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header name.
pub const HEADER: &str = "x-hub-signature-256";

/// Rewrites every non-ASCII character of `text` as `\uXXXX` (lowercase hex UTF-16 code units),
/// the form the provider signs and sends. ASCII is left as is.
pub fn escape_unicode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    let mut units = [0u16; 2];
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

fn mac(app_secret: &str) -> Hmac<Sha256> {
    Hmac::<Sha256>::new_from_slice(app_secret.as_bytes()).expect("HMAC takes any key")
}

/// The header value for `body` (already in the form that is sent): `sha256=<64 hex>`.
pub fn sign(app_secret: &str, body: &[u8]) -> String {
    let mut m = mac(app_secret);
    m.update(body);
    format!("sha256={}", hex::encode(m.finalize().into_bytes()))
}

/// Checks a header value against `body` in constant time. Accepts a signature over the bytes
/// as received, or, when the body holds raw non-ASCII UTF-8, over its escaped form.
pub fn verify(app_secret: &str, body: &[u8], header: &str) -> bool {
    let Some(sig) = header
        .trim()
        .strip_prefix("sha256=")
        .and_then(|h| hex::decode(h).ok())
    else {
        return false;
    };
    let mut m = mac(app_secret);
    m.update(body);
    if m.verify_slice(&sig).is_ok() {
        return true;
    }
    match std::str::from_utf8(body) {
        Ok(text) if !text.is_ascii() => {
            let mut m = mac(app_secret);
            m.update(escape_unicode(text).as_bytes());
            m.verify_slice(&sig).is_ok()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Vector {
        app_secret: String,
        raw_body: String,
        x_hub_signature_256: String,
    }

    fn vector() -> Vector {
        let path = format!(
            "{}/../provider/testdata/webhook_signature_vector_unicode_escaped.json",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn the_public_vector_verifies_through_escaping() {
        let v = vector();
        // The raw UTF-8 bytes do not match: the provider signed the escaped form.
        assert_ne!(
            sign(&v.app_secret, v.raw_body.as_bytes()),
            v.x_hub_signature_256
        );
        assert_eq!(
            sign(&v.app_secret, escape_unicode(&v.raw_body).as_bytes()),
            v.x_hub_signature_256
        );
        assert!(verify(
            &v.app_secret,
            v.raw_body.as_bytes(),
            &v.x_hub_signature_256
        ));
        assert!(verify(
            &v.app_secret,
            escape_unicode(&v.raw_body).as_bytes(),
            &v.x_hub_signature_256
        ));
    }

    #[test]
    fn forgeries_fail() {
        let v = vector();
        assert!(!verify(
            "other",
            v.raw_body.as_bytes(),
            &v.x_hub_signature_256
        ));
        assert!(!verify(&v.app_secret, b"tampered", &v.x_hub_signature_256));
        assert!(!verify(&v.app_secret, v.raw_body.as_bytes(), "sha256=00"));
        assert!(!verify(&v.app_secret, v.raw_body.as_bytes(), "md5=abc"));
    }

    #[test]
    fn escaping_uses_utf16_code_units() {
        assert_eq!(escape_unicode("äöå"), "\\u00e4\\u00f6\\u00e5");
        assert_eq!(escape_unicode("a😀"), "a\\ud83d\\ude00");
        assert_eq!(escape_unicode("plain"), "plain");
    }
}
