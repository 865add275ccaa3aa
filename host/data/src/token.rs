//! The driver's own data tokens (`flint://` inputs): signed by a key that never leaves
//! the driver, scoped to the application and one job, with an expiry. An executor holds
//! the tokens of the jobs it runs and shows one with each read; the driver checks the
//! signature, the expiry and that the job reads that input.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use flint_proto::JobId;
use flint_proto::wire::DataRefusal;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// What a token says; signed, not secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub app_id: String,
    pub job: JobId,
    /// Milliseconds since the Unix epoch.
    pub expires_at_ms: u64,
}

/// The driver's signing key: random, made at start, never sent. Its `Debug` hides it.
pub struct DataKey([u8; 32]);

impl std::fmt::Debug for DataKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DataKey(<hidden>)")
    }
}

impl DataKey {
    pub fn generate() -> DataKey {
        DataKey(rand::random())
    }

    fn mac(&self) -> Hmac<Sha256> {
        Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length")
    }

    /// A token for these claims: `base64(claims).base64(HMAC-SHA256(claims))`.
    pub fn mint(&self, claims: &Claims) -> String {
        let body = postcard::to_allocvec(claims).expect("claims encode");
        let mut mac = self.mac();
        mac.update(&body);
        let tag = mac.finalize().into_bytes();
        format!("{}.{}", URL_SAFE_NO_PAD.encode(&body), URL_SAFE_NO_PAD.encode(tag))
    }

    /// The claims of a token this key signed for `app_id`, unexpired at `now_ms`.
    pub fn verify(&self, token: &str, app_id: &str, now_ms: u64) -> Result<Claims, DataRefusal> {
        let (body, tag) = token.split_once('.').ok_or(DataRefusal::Forged)?;
        let body = URL_SAFE_NO_PAD.decode(body).map_err(|_| DataRefusal::Forged)?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| DataRefusal::Forged)?;
        let mut mac = self.mac();
        mac.update(&body);
        // Constant time: a forger learns nothing from how long the refusal took.
        mac.verify_slice(&tag).map_err(|_| DataRefusal::Forged)?;
        let claims: Claims = postcard::from_bytes(&body).map_err(|_| DataRefusal::Forged)?;
        if claims.app_id != app_id {
            return Err(DataRefusal::Forged);
        }
        if claims.expires_at_ms <= now_ms {
            return Err(DataRefusal::Expired);
        }
        Ok(claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(job: u64, expires_at_ms: u64) -> Claims {
        Claims { app_id: "app".into(), job: JobId(job), expires_at_ms }
    }

    #[test]
    fn a_token_holds_until_its_expiry_and_only_for_its_own_key_and_app() {
        let key = DataKey::generate();
        let token = key.mint(&claims(7, 1_000));
        assert_eq!(key.verify(&token, "app", 999), Ok(claims(7, 1_000)));
        assert_eq!(key.verify(&token, "app", 1_000), Err(DataRefusal::Expired));
        assert_eq!(key.verify(&token, "other", 0), Err(DataRefusal::Forged));
        assert_eq!(DataKey::generate().verify(&token, "app", 0), Err(DataRefusal::Forged));
    }

    #[test]
    fn a_changed_claim_or_garbage_is_forged() {
        let key = DataKey::generate();
        let token = key.mint(&claims(7, 1_000));
        let (_, tag) = token.split_once('.').unwrap();
        // The same signature over a longer life or another job.
        let body = URL_SAFE_NO_PAD.encode(postcard::to_allocvec(&claims(7, u64::MAX)).unwrap());
        assert_eq!(key.verify(&format!("{body}.{tag}"), "app", 0), Err(DataRefusal::Forged));
        let body = URL_SAFE_NO_PAD.encode(postcard::to_allocvec(&claims(8, 1_000)).unwrap());
        assert_eq!(key.verify(&format!("{body}.{tag}"), "app", 0), Err(DataRefusal::Forged));
        for garbage in ["", ".", "abc", "a.b.c", "!!!.???"] {
            assert_eq!(key.verify(garbage, "app", 0), Err(DataRefusal::Forged), "{garbage:?}");
        }
    }

    #[test]
    fn the_key_never_shows_in_debug() {
        assert_eq!(format!("{:?}", DataKey([7; 32])), "DataKey(<hidden>)");
    }
}
