//! The driver URL: `flint://HOST:PORT?fingerprint=HEX`, all a peer needs to reach the
//! driver and pin its certificate.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverUrl {
    pub host: String,
    pub port: u16,
    /// SHA-256 of the driver certificate's DER encoding.
    pub fingerprint: [u8; 32],
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid driver URL {url:?}: {reason} (expected flint://HOST:PORT?fingerprint=HEX)")]
pub struct UrlError {
    url: String,
    reason: &'static str,
}

impl FromStr for DriverUrl {
    type Err = UrlError;

    fn from_str(text: &str) -> Result<Self, UrlError> {
        let err = |reason| UrlError { url: text.to_owned(), reason };
        let rest = text.trim().strip_prefix("flint://").ok_or(err("it must start with flint://"))?;
        let (authority, query) = rest.split_once('?').ok_or(err("the certificate fingerprint is missing"))?;
        let authority = authority.trim_end_matches('/');
        let (host, port) = authority.rsplit_once(':').ok_or(err("the port is missing"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(err("the host is missing"));
        }
        let port = port.parse().map_err(|_| err("the port is not a number"))?;
        let hex = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("fingerprint="))
            .ok_or(err("the certificate fingerprint is missing"))?;
        let bytes = hex::decode(hex).map_err(|_| err("the fingerprint is not hex"))?;
        let fingerprint = bytes.try_into().map_err(|_| err("the fingerprint is not 32 bytes"))?;
        Ok(DriverUrl { host: host.to_owned(), port, fingerprint })
    }
}

impl fmt::Display for DriverUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        write!(f, "flint://{host}:{}?fingerprint={}", self.port, hex::encode(self.fingerprint))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_what_it_cannot_pin() {
        let url = DriverUrl { host: "127.0.0.1".into(), port: 7077, fingerprint: [0xab; 32] };
        let text = url.to_string();
        assert_eq!(text.parse::<DriverUrl>(), Ok(url));
        let v6 = DriverUrl { host: "::1".into(), port: 1, fingerprint: [1; 32] };
        assert_eq!(v6.to_string().parse::<DriverUrl>(), Ok(v6));
        for bad in [
            "http://127.0.0.1:1?fingerprint=00",
            "flint://127.0.0.1:7077",
            "flint://127.0.0.1?fingerprint=ab",
            "flint://127.0.0.1:7077?fingerprint=zz",
            "flint://127.0.0.1:7077?fingerprint=abab",
        ] {
            assert!(bad.parse::<DriverUrl>().is_err(), "{bad}");
        }
    }
}
