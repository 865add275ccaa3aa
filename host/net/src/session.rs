//! Opening a session with the driver: connect (with backoff) and say hello.

use crate::tls::{Traffic, pinned_endpoint};
use crate::{DriverUrl, FrameError, Identity, Secret, proof, read_frame, write_frame};
use flint_proto::ExecutorId;
use flint_proto::wire::{Hello, HelloReply, PROTOCOL_VERSION, Role};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Why a connection to the driver could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Retrying cannot help: the peer at that address is not the driver we pinned.
    #[error(
        "the driver at {addr} presented a certificate whose fingerprint is not the one in the driver URL (a wrong or stale URL, or another service on that port)"
    )]
    FingerprintMismatch { addr: SocketAddr },
    #[error("{0}")]
    Unreachable(String),
    /// Nothing listens there: the host answered that the port is closed.
    #[error("nothing listens on {addr} (the port is closed)")]
    Refused { addr: SocketAddr },
}

/// What a closed port means to the one connecting: a client gives up at once (its user
/// named the wrong address, or no driver runs); an executor, which may start before its
/// driver, tries again within its time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenRefused {
    GiveUp,
    Retry,
}

/// Connects to the driver, retrying with exponential backoff and jitter for at most
/// `within`: a pod often starts before its driver's address resolves or its port
/// listens. Every address the name resolves to is tried, IPv6 and IPv4, each from an
/// endpoint of its own family. A certificate mismatch ends the attempts at once. The
/// connection is for [`Traffic::Bulk`].
pub async fn connect(
    url: &DriverUrl,
    within: Duration,
    idle_timeout: Duration,
) -> Result<(quinn::Endpoint, quinn::Connection), ConnectError> {
    connect_as(url, within, idle_timeout, None, WhenRefused::Retry, Traffic::Bulk).await
}

/// [`connect`], showing `identity` to a driver that asks for a client certificate
/// (mutual TLS), for a connection that will carry `traffic`.
pub async fn connect_as(
    url: &DriverUrl,
    within: Duration,
    idle_timeout: Duration,
    identity: Option<&Identity>,
    when_refused: WhenRefused,
    traffic: Traffic,
) -> Result<(quinn::Endpoint, quinn::Connection), ConnectError> {
    let started = Instant::now();
    let mut delay = Duration::from_millis(50);
    // An endpoint per address family, with its verifier's mismatch flag.
    let mut endpoints: Vec<(bool, quinn::Endpoint, Arc<AtomicBool>)> = Vec::new();
    loop {
        let mut last = String::from("the host has no address");
        match tokio::net::lookup_host((url.host.as_str(), url.port)).await {
            Err(e) => last = e.to_string(),
            Ok(addrs) => {
                for addr in addrs {
                    let v6 = addr.is_ipv6();
                    let (endpoint, mismatch) = match endpoints.iter().find(|(family, ..)| *family == v6) {
                        Some((_, e, m)) => (e.clone(), m.clone()),
                        None => {
                            let bind: SocketAddr =
                                if v6 { "[::]:0" } else { "0.0.0.0:0" }.parse().expect("an address");
                            let (e, m) =
                                pinned_endpoint(url.fingerprint, idle_timeout, bind, identity, traffic)
                                    .map_err(|e| {
                                        ConnectError::Unreachable(format!("cannot open a QUIC endpoint: {e}"))
                                    })?;
                            endpoints.push((v6, e.clone(), m.clone()));
                            (e, m)
                        }
                    };
                    let attempt = async {
                        let connecting = endpoint.connect(addr, "flint-driver").map_err(|e| e.to_string())?;
                        // A closed port answers at once; QUIC alone would wait out the
                        // handshake for it.
                        tokio::select! {
                            handshake = tokio::time::timeout(Duration::from_secs(5), connecting) => match handshake {
                                Err(_) => Err("timed out".to_owned()),
                                Ok(Err(e)) => Err(e.to_string()),
                                Ok(Ok(connection)) => Ok(connection),
                            },
                            Ok(()) = closed_port(addr) => Err(REFUSED.to_owned()),
                        }
                    };
                    match attempt.await {
                        Ok(connection) => return Ok((endpoint, connection)),
                        Err(_) if mismatch.swap(false, Ordering::Relaxed) => {
                            return Err(ConnectError::FingerprintMismatch { addr });
                        }
                        Err(e) if e == REFUSED && when_refused == WhenRefused::GiveUp => {
                            return Err(ConnectError::Refused { addr });
                        }
                        Err(e) => last = format!("{addr}: {e}"),
                    }
                }
            }
        }
        if started.elapsed() + delay > within {
            return Err(ConnectError::Unreachable(last));
        }
        tracing::debug!(error = %last, ?delay, "driver not reachable yet");
        tokio::time::sleep(delay.mul_f64(rand::random_range(0.5..1.5))).await;
        delay = (delay * 2).min(Duration::from_secs(2));
    }
}

const REFUSED: &str = "the port is closed";

/// Resolves when `addr` answers a datagram with "port unreachable": nothing listens
/// there. Pends for ever otherwise (a host that drops such answers, or a driver that
/// listens: a one-byte datagram is no QUIC packet, and it drops it).
async fn closed_port(addr: SocketAddr) -> std::io::Result<()> {
    let bind: SocketAddr = if addr.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" }.parse().expect("an address");
    let socket = tokio::net::UdpSocket::bind(bind).await?;
    socket.connect(addr).await?;
    socket.send(&[0]).await?;
    let mut byte = [0u8; 1];
    loop {
        match socket.recv(&mut byte).await {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Ok(()),
            Err(e) => return Err(e),
            Ok(_) => continue,
        }
    }
}

/// Says hello on a new control stream and returns the driver's answer with the stream.
/// A driver that refused this peer's certificate (or its lack of one) is said so.
pub async fn hello(
    connection: &quinn::Connection,
    secret: &Secret,
    role: Role,
    app_id: &str,
    executor_id: Option<ExecutorId>,
    pod_name: Option<String>,
) -> Result<(HelloReply, quinn::SendStream, quinn::RecvStream), FrameError> {
    let hello = Hello {
        protocol_version: PROTOCOL_VERSION,
        role,
        app_id: app_id.to_owned(),
        proof: proof(secret, connection),
        executor_id,
        pod_name,
    };
    let said = async {
        let (mut send, mut recv) = connection.open_bi().await.map_err(|e| FrameError::Io(e.into()))?;
        write_frame(&mut send, &hello).await?;
        let reply = read_frame::<HelloReply>(&mut recv).await?.ok_or(FrameError::Truncated)?;
        Ok((reply, send, recv))
    };
    said.await.map_err(|e| match connection.close_reason().as_ref().and_then(certificate_refusal) {
        Some(refusal) => FrameError::Io(std::io::Error::other(refusal)),
        None => e,
    })
}

/// What a TLS alert closing the connection says about this peer's certificate. With
/// TLS 1.3 a client finishes its handshake before the server checks its certificate,
/// so a driver asking for mutual TLS refuses a peer after the connection is up.
fn certificate_refusal(reason: &quinn::ConnectionError) -> Option<String> {
    let quinn::ConnectionError::ConnectionClosed(close) = reason else { return None };
    let code = u64::from(close.error_code);
    // QUIC carries TLS alerts as 0x100 + alert.
    let alert = code.checked_sub(0x100).filter(|a| *a < 0x100)?;
    Some(match alert {
        116 => "the driver requires a client certificate (mutual TLS): pass --tls-cert and --tls-key".into(),
        42..=46 | 48 | 49 | 51 => format!(
            "the driver refused this peer's certificate (TLS alert {alert}): it must be signed by a CA the driver trusts"
        ),
        _ => return None,
    })
}
