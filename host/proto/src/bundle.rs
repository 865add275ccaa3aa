//! The bundle file `flint bundle` writes: a magic, a format version, then the manifest
//! and component as postcard. Decoding bad bytes is an error, never a panic.

use crate::job::Manifest;
use serde::{Deserialize, Serialize};

const MAGIC: &[u8; 8] = b"FLINTBDL";
const VERSION: u32 = 1;

/// A job's manifest and component.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bundle {
    pub manifest: Manifest,
    pub component: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("truncated header")]
    Truncated,
    #[error("bundle format version {0}; this flint reads version {VERSION}")]
    Version(u32),
    #[error("corrupt bundle body: {0}")]
    Body(#[from] postcard::Error),
}

impl Bundle {
    /// Whether `bytes` start like a bundle (rather than a component).
    pub fn looks_like(bytes: &[u8]) -> bool {
        bytes.starts_with(MAGIC)
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend(postcard::to_stdvec(self).expect("a bundle encodes"));
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Bundle, BundleError> {
        let version = bytes.get(8..12).ok_or(BundleError::Truncated)?;
        match u32::from_le_bytes(version.try_into().expect("4 bytes")) {
            VERSION => Ok(postcard::from_bytes(&bytes[12..])?),
            v => Err(BundleError::Version(v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundles_round_trip_and_bad_bytes_are_errors() {
        let bundle =
            Bundle { manifest: Manifest { name: "j".into(), ..Manifest::default() }, component: vec![1, 2] };
        let bytes = bundle.encode();
        assert!(Bundle::looks_like(&bytes));
        assert_eq!(Bundle::decode(&bytes).unwrap(), bundle);
        assert!(matches!(Bundle::decode(&bytes[..10]), Err(BundleError::Truncated)));
        assert!(matches!(Bundle::decode(&bytes[..bytes.len() - 1]), Err(BundleError::Body(_))));
        let mut future = bytes.clone();
        future[8] = 9;
        assert!(matches!(Bundle::decode(&future), Err(BundleError::Version(9))));
    }
}
