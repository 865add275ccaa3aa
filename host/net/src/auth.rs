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

impl Secret {
    /// A credential for one `purpose` (the status page's, say) made from this secret:
    /// HMAC-SHA256 under the secret, as hex. Whoever holds it cannot work back to the
    /// secret, so it can be handed to a browser where the secret must not go.
    pub fn derive(&self, purpose: &str) -> Secret {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(b"flint-derived-credential:");
        mac.update(purpose.as_bytes());
        Secret(hex::encode(mac.finalize().into_bytes()).into_bytes())
    }
}

/// What marks an executor key handed to an executor in place of the application secret.
const EXECUTOR_KEY_MARK: &[u8] = b"flint-executor-key:";

impl Secret {
    /// The credential executors prove to their driver and to each other, made from the
    /// application secret: whoever carries it to an executor (a standalone master and
    /// its workers) can be an executor of the application, not its client. The key of
    /// a key handed over ([`Secret::executor_key_to_hand`]) is itself.
    pub fn executor_key(&self) -> Secret {
        match self.0.strip_prefix(EXECUTOR_KEY_MARK) {
            Some(key) => Secret(key.to_vec()),
            None => self.derive("executor"),
        }
    }

    /// The executor key as it is handed to executors in place of the secret (a
    /// worker's launch, its executors' secret file): marked, so that an executor that
    /// reads it takes it as it is.
    pub fn executor_key_to_hand(&self) -> Secret {
        Secret([EXECUTOR_KEY_MARK, &self.executor_key().0].concat())
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
    fn an_executor_key_is_the_same_from_the_secret_and_handed_over_and_is_not_the_secret() {
        let secret = super::Secret::new("the application's own");
        let key = secret.executor_key();
        assert_eq!(secret.executor_key_to_hand().executor_key(), key);
        let handed = secret.executor_key_to_hand();
        assert_eq!(handed.executor_key_to_hand(), handed, "handing a handed key over keeps it");
        assert_ne!(key, secret);
        assert!(
            !secret.executor_key_to_hand().expose().windows(21).any(|w| *w == b"the application's own"[..21])
        );
    }

    #[test]
    fn a_secret_matches_itself_only() {
        let secret = super::Secret::new("s3cret");
        assert!(secret.matches(b"s3cret"));
        assert!(!secret.matches(b"s3cret!") && !secret.matches(b"") && !secret.matches(b"S3cret"));
    }

    #[test]
    fn a_derived_credential_is_not_the_secret_and_differs_by_purpose() {
        let secret = super::Secret::new("s3cret");
        let ui = secret.derive("ui");
        assert_eq!(ui, secret.derive("ui"), "the same for the same secret");
        assert!(!ui.matches(b"s3cret") && !secret.matches(ui.expose()));
        assert_ne!(ui, secret.derive("other"));
        assert_ne!(ui, super::Secret::new("s3cret2").derive("ui"));
    }
}
