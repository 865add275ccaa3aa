//! Opening a session with the driver: connect (with backoff) and say hello.

use crate::{DriverUrl, FrameError, Secret, client_endpoint, proof, read_frame, write_frame};
use flint_proto::wire::{Hello, HelloReply, PROTOCOL_VERSION, Role};
use std::time::{Duration, Instant};

/// Connects to the driver, retrying with exponential backoff and jitter for at most
/// `within`: a pod often starts before its driver's address resolves or its port
/// listens. Returns the last error when time runs out.
pub async fn connect(
    url: &DriverUrl,
    within: Duration,
) -> Result<(quinn::Endpoint, quinn::Connection), String> {
    let endpoint = client_endpoint(url.fingerprint, Duration::from_secs(30))
        .map_err(|e| format!("cannot open a QUIC endpoint: {e}"))?;
    let started = Instant::now();
    let mut delay = Duration::from_millis(50);
    loop {
        let attempt = async {
            let addr = tokio::net::lookup_host((url.host.as_str(), url.port))
                .await
                .map_err(|e| e.to_string())?
                .next()
                .ok_or_else(|| "the host has no address".to_owned())?;
            let connecting = endpoint.connect(addr, "flint-driver").map_err(|e| e.to_string())?;
            tokio::time::timeout(Duration::from_secs(5), connecting)
                .await
                .map_err(|_| "timed out".to_owned())?
                .map_err(|e| e.to_string())
        };
        match attempt.await {
            Ok(connection) => return Ok((endpoint, connection)),
            Err(last) if started.elapsed() + delay > within => return Err(last),
            Err(last) => {
                tracing::debug!(error = %last, ?delay, "driver not reachable yet");
                tokio::time::sleep(delay.mul_f64(rand::random_range(0.5..1.5))).await;
                delay = (delay * 2).min(Duration::from_secs(2));
            }
        }
    }
}

/// Says hello on a new control stream and returns the driver's answer with the stream.
pub async fn hello(
    connection: &quinn::Connection,
    secret: &Secret,
    role: Role,
    app_id: &str,
    executor_id: Option<String>,
    pod_name: Option<String>,
) -> Result<(HelloReply, quinn::SendStream, quinn::RecvStream), FrameError> {
    let (mut send, mut recv) = connection.open_bi().await.map_err(|e| FrameError::Io(e.into()))?;
    let hello = Hello {
        protocol_version: PROTOCOL_VERSION,
        role,
        app_id: app_id.to_owned(),
        proof: proof(secret, connection),
        executor_id,
        pod_name,
    };
    write_frame(&mut send, &hello).await?;
    let reply = read_frame::<HelloReply>(&mut recv).await?.ok_or(FrameError::Truncated)?;
    Ok((reply, send, recv))
}
