//! What an `https://` input may reach. A job names its URLs, so without a guard a job
//! could have the driver and its executors fetch a cloud's metadata endpoint (the
//! machine's credentials) and hand back the answer. Link-local and metadata addresses
//! are refused wherever they appear: as the URL's literal host, as any address its name
//! resolves to (checked at connect time, so a name rebound after planning is caught),
//! and as the target of a redirect.

use crate::InputError;
use object_store::ClientOptions;
use object_store::client::{HttpClient, HttpConnector};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// Whether `ip` is an address no job input may be read from: link-local (where every
/// major cloud serves instance metadata: 169.254.169.254, fd00:ec2::254 is AWS's IPv6
/// one), unspecified, or another known metadata address.
pub fn forbidden(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.octets() == [100, 100, 100, 200]
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => forbidden(IpAddr::V4(v4)),
            None => {
                (v6.segments()[0] & 0xffc0) == 0xfe80
                    || v6.is_unspecified()
                    || v6 == "fd00:ec2::254".parse::<std::net::Ipv6Addr>().expect("an address")
            }
        },
    }
}

/// Checks a URL's host when it is a literal address.
pub fn check_host(host: &str) -> Result<(), InputError> {
    let bare = host.trim_start_matches('[').split(']').next().unwrap_or(host);
    let bare = if host.starts_with('[') { bare } else { host.rsplit_once(':').map_or(host, |(h, _)| h) };
    match bare.parse::<IpAddr>() {
        Ok(ip) if forbidden(ip) => Err(InputError::ForbiddenHost { host: host.to_owned() }),
        _ => Ok(()),
    }
}

/// Resolves names as the system does, without the forbidden addresses.
#[derive(Debug)]
struct Resolver;

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = found.iter().copied().filter(|a| !forbidden(a.ip())).collect();
            if allowed.is_empty() && !found.is_empty() {
                let refused = format!(
                    "{host} resolves to a link-local or metadata address: inputs may not be read from it"
                );
                return Err(refused.into());
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Builds the HTTP clients of `https://` inputs: the guard's resolver, redirects
/// followed only to allowed hosts, and the timeouts Flint's reads use.
#[derive(Debug)]
pub struct GuardedConnector {
    pub allow_http: bool,
}

impl HttpConnector for GuardedConnector {
    fn connect(&self, _options: &ClientOptions) -> object_store::Result<HttpClient> {
        let redirects = reqwest::redirect::Policy::custom(|attempt| {
            let host = attempt.url().host_str().unwrap_or("").to_owned();
            if attempt.previous().len() >= 10 {
                attempt.error("too many redirects")
            } else if let Err(refused) = check_host(&host) {
                attempt.error(refused)
            } else {
                attempt.follow()
            }
        });
        let client = reqwest::Client::builder()
            .dns_resolver(Arc::new(Resolver))
            .redirect(redirects)
            .https_only(!self.allow_http)
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| object_store::Error::Generic { store: "HTTP", source: Box::new(e) })?;
        Ok(HttpClient::new(client))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_and_link_local_addresses_are_refused_and_others_pass() {
        for bad in [
            "169.254.169.254",
            "169.254.0.1",
            "0.0.0.0",
            "fe80::1",
            "fd00:ec2::254",
            "::ffff:169.254.169.254",
            "100.100.100.200",
        ] {
            assert!(forbidden(bad.parse().unwrap()), "{bad}");
        }
        for good in ["127.0.0.1", "10.0.0.1", "93.184.216.34", "::1", "2001:db8::1"] {
            assert!(!forbidden(good.parse().unwrap()), "{good}");
        }
        assert!(check_host("169.254.169.254").is_err());
        assert!(check_host("169.254.169.254:80").is_err());
        assert!(check_host("[fe80::1]:443").is_err());
        assert!(check_host("example.com:443").is_ok());
        assert!(check_host("127.0.0.1:8080").is_ok());
    }
}
