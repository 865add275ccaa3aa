//! Proving the application secret without sending it: both ends derive keying material
//! from the TLS session (RFC 5705 exporter) and the peer sends its HMAC under the secret.
//! A proof is worthless on any other connection.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;

const LABEL: &[u8] = b"EXPORTER-flint-application-secret";

/// The application secret. Its `Debug` does not show it, so it cannot leak into a log.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        Secret(bytes.into())
    }

    /// A fresh random secret, as hex text, for a driver started without one.
    pub fn generate() -> Self {
        let bytes: [u8; 32] = rand::random();
        Secret(hex::encode(bytes).into_bytes())
    }

    pub fn expose(&self) -> &[u8] {
        &self.0
    }

    /// Whether `shown` is the secret, in time that does not depend on where they differ:
    /// the two are compared as HMACs of one message, by the HMAC's own constant-time check.
    pub fn matches(&self, shown: &[u8]) -> bool {
        let tag = |key: &[u8]| {
            let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
            mac.update(LABEL);
            mac
        };
        tag(shown).verify_slice(&tag(&self.0).finalize().into_bytes()).is_ok()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// This side's proof of the secret on `connection`.
pub fn proof(secret: &Secret, connection: &quinn::Connection) -> [u8; 32] {
    let mut material = [0u8; 32];
    // Exporting fails only before the handshake completes; a zero block then simply
    // fails verification on the other side.
    let _ = connection.export_keying_material(&mut material, LABEL, b"");
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.expose()).expect("HMAC takes any key length");
    mac.update(&material);
    mac.finalize().into_bytes().into()
}

/// Checks a peer's proof in constant time.
pub fn verify_proof(secret: &Secret, connection: &quinn::Connection, claimed: &[u8; 32]) -> bool {
    let mut material = [0u8; 32];
    if connection.export_keying_material(&mut material, LABEL, b"").is_err() {
        return false;
    }
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.expose()).expect("HMAC takes any key length");
    mac.update(&material);
    mac.verify_slice(claimed).is_ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_secret_matches_itself_only() {
        let secret = super::Secret::new("s3cret");
        assert!(secret.matches(b"s3cret"));
        assert!(!secret.matches(b"s3cret!") && !secret.matches(b"") && !secret.matches(b"S3cret"));
    }
}
