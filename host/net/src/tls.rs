//! QUIC endpoints: the driver's, with its certificate, and peers', which accept only the
//! certificate whose fingerprint they pinned.

use crate::ALPN;
use crate::udp::MAX_DATAGRAM;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The driver's certificate and key.
pub struct Identity {
    pub cert: CertificateDer<'static>,
    key: PrivatePkcs8KeyDer<'static>,
}

/// Shows the certificate's fingerprint, never the key.
impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fingerprint: String = self.fingerprint().iter().map(|b| format!("{b:02x}")).collect();
        f.debug_struct("Identity").field("fingerprint", &fingerprint).finish_non_exhaustive()
    }
}

/// Why a certificate or key given by path could not be used.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("{}: {error}", path.display())]
    Read { path: std::path::PathBuf, error: std::io::Error },
    #[error("{}: {error}", path.display())]
    Pem { path: std::path::PathBuf, error: rustls::pki_types::pem::Error },
    #[error("{}: no certificate in it", .0.display())]
    NoCertificate(std::path::PathBuf),
}

impl Identity {
    /// A fresh self-signed certificate for `names` (host names or addresses).
    pub fn generate(names: Vec<String>) -> Result<Identity, rcgen::Error> {
        let certified = rcgen::generate_simple_self_signed(names)?;
        Ok(Identity {
            cert: certified.cert.der().clone(),
            key: PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der()),
        })
    }

    /// A certificate and PKCS#8 key given in DER.
    pub fn from_der(cert: Vec<u8>, key: Vec<u8>) -> Identity {
        Identity { cert: CertificateDer::from(cert), key: PrivatePkcs8KeyDer::from(key) }
    }

    /// Reads a certificate and its PKCS#8 key, each in PEM or DER.
    pub fn load(cert: &std::path::Path, key: &std::path::Path) -> Result<Identity, IdentityError> {
        use rustls::pki_types::pem::PemObject;
        let read = |p: &std::path::Path| {
            std::fs::read(p).map_err(|error| IdentityError::Read { path: p.to_owned(), error })
        };
        let pem = |p: &std::path::Path| {
            let path = p.to_owned();
            move |error| IdentityError::Pem { path, error }
        };
        let (cert_bytes, key_bytes) = (read(cert)?, read(key)?);
        let cert = if cert_bytes.starts_with(b"-----BEGIN") {
            CertificateDer::from_pem_slice(&cert_bytes).map_err(pem(cert))?
        } else {
            CertificateDer::from(cert_bytes)
        };
        let key = if key_bytes.starts_with(b"-----BEGIN") {
            PrivatePkcs8KeyDer::from_pem_slice(&key_bytes).map_err(pem(key))?
        } else {
            PrivatePkcs8KeyDer::from(key_bytes)
        };
        Ok(Identity { cert, key })
    }

    /// The private key, PKCS#8 DER, to store it beside the certificate.
    pub fn key_der(&self) -> &[u8] {
        self.key.secret_pkcs8_der()
    }

    /// What peers pin: SHA-256 of the certificate.
    pub fn fingerprint(&self) -> [u8; 32] {
        Sha256::digest(&self.cert).into()
    }
}

/// ring's TLS 1.3 suites, fastest first for this CPU: AES-128-GCM where the CPU has AES
/// instructions (every byte on the wire passes through it; AES-256 costs some 40% more
/// rounds for no gain against what guards the link), ChaCha20-Poly1305 where it has not.
/// Both ends prefer the same order, so a connection between two such hosts uses it.
fn provider() -> Arc<CryptoProvider> {
    use rustls::crypto::ring::cipher_suite::{
        TLS13_AES_128_GCM_SHA256, TLS13_AES_256_GCM_SHA384, TLS13_CHACHA20_POLY1305_SHA256,
    };
    let cipher_suites = if aes_in_hardware() {
        vec![TLS13_AES_128_GCM_SHA256, TLS13_AES_256_GCM_SHA384, TLS13_CHACHA20_POLY1305_SHA256]
    } else {
        vec![TLS13_CHACHA20_POLY1305_SHA256, TLS13_AES_128_GCM_SHA256, TLS13_AES_256_GCM_SHA384]
    };
    Arc::new(CryptoProvider { cipher_suites, ..rustls::crypto::ring::default_provider() })
}

fn aes_in_hardware() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("aes") && std::arch::is_x86_feature_detected!("pclmulqdq");
    #[cfg(target_arch = "aarch64")]
    return std::arch::is_aarch64_feature_detected!("aes");
    #[allow(unreachable_code)]
    false
}

/// Streams a peer that proved itself may have open towards the other side at once.
const OPEN_STREAMS: u32 = 1024;
/// ... and one-way streams (heartbeats).
const OPEN_UNI_STREAMS: u32 = 16;
/// The bytes a peer that has not yet proved the secret may have in flight towards the
/// driver, all streams together (a hello is at most 4 KiB).
pub const UNPROVEN_WINDOW: u32 = 64 << 10;

fn transport(idle_timeout: Duration, traffic: Traffic) -> quinn::TransportConfig {
    let mut t = quinn::TransportConfig::default();
    t.max_idle_timeout(Some(idle_timeout.try_into().expect("idle timeout in range")));
    // Three keep-alives fit in the idle timeout: one lost packet is not a lost peer.
    t.keep_alive_interval(Some(idle_timeout / 3));
    t.max_concurrent_bidi_streams(OPEN_STREAMS.into());
    t.max_concurrent_uni_streams(OPEN_UNI_STREAMS.into());
    if traffic == Traffic::Bulk {
        let mut mtu = quinn::MtuDiscoveryConfig::default();
        mtu.upper_bound(MAX_DATAGRAM);
        t.mtu_discovery_config(Some(mtu));
    }
    t
}

/// What a connection mostly carries, which decides how large its datagrams grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Traffic {
    /// Bytes in bulk (inputs, blocks, a job's files) over a connection that lasts:
    /// datagrams as large as the path carries, both ways (`MAX_DATAGRAM`). Finding
    /// that size takes some ten probes each way, once, each up to 64 KiB that the
    /// receiver reads as one-byte padding frames: about 10 ms on loopback here.
    Bulk,
    /// Requests and answers of a few packets (`flint status`, a job without files):
    /// Ethernet's datagrams both ways, so that the search's 10 ms do not double a
    /// command that takes as long.
    Requests,
}

/// An endpoint on `bind` serving `server` (the driver) or only connecting out (peers),
/// accepting the datagrams `traffic` wants from its peers.
fn endpoint(
    bind: SocketAddr,
    server: Option<quinn::ServerConfig>,
    traffic: Traffic,
) -> std::io::Result<quinn::Endpoint> {
    let mut config = quinn::EndpointConfig::default();
    if traffic == Traffic::Bulk {
        config.max_udp_payload_size(MAX_DATAGRAM).expect("a UDP payload size within bounds");
    }
    let socket = crate::udp::socket(bind)?;
    quinn::Endpoint::new_with_abstract_socket(config, server, socket, Arc::new(quinn::TokioRuntime))
}

/// The driver's side: until a peer's hello is accepted it may open its hello stream
/// and nothing else, with [`UNPROVEN_WINDOW`] bytes in flight (quinn's default would let
/// it open 1,024 streams of 1.25 MB each). [`open_up`] gives a welcome peer the rest.
fn unproven_transport(idle_timeout: Duration) -> quinn::TransportConfig {
    let mut t = transport(idle_timeout, Traffic::Bulk);
    t.max_concurrent_bidi_streams(1u32.into());
    t.max_concurrent_uni_streams(0u32.into());
    t.receive_window(UNPROVEN_WINDOW.into());
    t
}

/// Lifts a connection the driver accepted out of `unproven_transport`'s limits: the
/// streams and window every peer has. Call it before answering the hello, so that the
/// peer finds room for its next streams (until then, its opens wait, they do not fail).
pub fn open_up(connection: &quinn::Connection) {
    connection.set_max_concurrent_bi_streams(OPEN_STREAMS.into());
    connection.set_max_concurrent_uni_streams(OPEN_UNI_STREAMS.into());
    connection.set_receive_window(quinn::VarInt::MAX);
}

/// Reads the certificates of a PEM (or single-certificate DER) file: a CA bundle.
pub fn load_certs(path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, IdentityError> {
    use rustls::pki_types::pem::PemObject;
    let bytes = std::fs::read(path).map_err(|error| IdentityError::Read { path: path.to_owned(), error })?;
    if !bytes.starts_with(b"-----BEGIN") {
        return Ok(vec![CertificateDer::from(bytes)]);
    }
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<_, _>>()
        .map_err(|error| IdentityError::Pem { path: path.to_owned(), error })?;
    if certs.is_empty() {
        return Err(IdentityError::NoCertificate(path.to_owned()));
    }
    Ok(certs)
}

/// The driver's endpoint on `bind`. Connections idle past `idle_timeout` close. With
/// `client_ca` (mutual TLS), a peer must show a certificate one of those CAs signed, or
/// the handshake fails before a byte of Flint's protocol is read.
pub fn server_endpoint(
    bind: SocketAddr,
    identity: &Identity,
    idle_timeout: Duration,
    client_ca: Option<&[CertificateDer<'static>]>,
) -> std::io::Result<quinn::Endpoint> {
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(std::io::Error::other)?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(cas) => {
            let mut roots = rustls::RootCertStore::empty();
            for ca in cas {
                roots.add(ca.clone()).map_err(std::io::Error::other)?;
            }
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                    .build()
                    .map_err(std::io::Error::other)?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut tls = builder
        .with_single_cert(vec![identity.cert.clone()], PrivateKeyDer::Pkcs8(identity.key.clone_key()))
        .map_err(std::io::Error::other)?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).map_err(std::io::Error::other)?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(unproven_transport(idle_timeout)));
    endpoint(bind, Some(config), Traffic::Bulk)
}

/// What a peer's TLS stack says when the driver shows another certificate (for logs:
/// the mismatch itself is known by the verifier's flag, see [`pinned_endpoint`]).
const MISMATCH: &str = "the driver's certificate does not match the pinned fingerprint";

/// A peer's endpoint, bound on `bind` (the unspecified address of the driver's family),
/// that trusts only the driver certificate with `fingerprint`, and shows `identity`
/// (for a driver that asks for mutual TLS), for [`Traffic::Bulk`].
pub fn client_endpoint(
    fingerprint: [u8; 32],
    idle_timeout: Duration,
    bind: SocketAddr,
    identity: Option<&Identity>,
) -> std::io::Result<quinn::Endpoint> {
    pinned_endpoint(fingerprint, idle_timeout, bind, identity, Traffic::Bulk).map(|(endpoint, _)| endpoint)
}

/// [`client_endpoint`], with the flag its verifier raises when a driver shows another
/// certificate than the pinned one: a mismatch is known as such, not by an error's text.
pub(crate) fn pinned_endpoint(
    fingerprint: [u8; 32],
    idle_timeout: Duration,
    bind: SocketAddr,
    identity: Option<&Identity>,
    traffic: Traffic,
) -> std::io::Result<(quinn::Endpoint, Arc<AtomicBool>)> {
    let mismatch = Arc::new(AtomicBool::new(false));
    let config = pinned_config(fingerprint, idle_timeout, identity, mismatch.clone(), traffic)?;
    let mut endpoint = endpoint(bind, None, traffic)?;
    endpoint.set_default_client_config(config);
    Ok((endpoint, mismatch))
}

/// A client configuration that trusts only the certificate with `fingerprint`: for a
/// connection to one peer from an endpoint that reaches several (executors reading
/// each other's map outputs, each pinning the certificate the driver named), for
/// [`Traffic::Bulk`].
pub fn pinned_client_config(
    fingerprint: [u8; 32],
    idle_timeout: Duration,
) -> std::io::Result<quinn::ClientConfig> {
    pinned_config(fingerprint, idle_timeout, None, Arc::new(AtomicBool::new(false)), Traffic::Bulk)
}

fn pinned_config(
    fingerprint: [u8; 32],
    idle_timeout: Duration,
    identity: Option<&Identity>,
    mismatch: Arc<AtomicBool>,
    traffic: Traffic,
) -> std::io::Result<quinn::ClientConfig> {
    let provider = provider();
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(std::io::Error::other)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned {
            fingerprint,
            provider,
            mismatch: mismatch.clone(),
        }));
    let mut tls = match identity {
        None => builder.with_no_client_auth(),
        Some(id) => builder
            .with_client_auth_cert(vec![id.cert.clone()], PrivateKeyDer::Pkcs8(id.key.clone_key()))
            .map_err(std::io::Error::other)?,
    };
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).map_err(std::io::Error::other)?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(Arc::new(transport(idle_timeout, traffic)));
    Ok(config)
}

/// Accepts the one certificate whose SHA-256 was pinned, whatever its name or issuer:
/// the fingerprint in the driver URL is the trust anchor. Handshake signatures are still
/// checked, so only the holder of the certificate's key passes.
#[derive(Debug)]
struct Pinned {
    fingerprint: [u8; 32],
    provider: Arc<CryptoProvider>,
    /// Raised when a driver showed another certificate.
    mismatch: Arc<AtomicBool>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let seen: [u8; 32] = Sha256::digest(end_entity).into();
        if seen == self.fingerprint {
            Ok(ServerCertVerified::assertion())
        } else {
            self.mismatch.store(true, Ordering::Relaxed);
            Err(rustls::Error::General(MISMATCH.into()))
        }
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("TLS 1.2 is not spoken here".into()))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}
