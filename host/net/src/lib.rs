//! Flint's transport: QUIC (quinn) with TLS 1.3 (rustls, ring). The driver presents a
//! certificate that peers pin by its SHA-256 fingerprint, carried in the driver URL;
//! peers prove the application secret with an HMAC bound to the TLS session, so the
//! secret itself never travels. Messages are length-prefixed postcard frames.

mod auth;
mod frame;
mod session;
mod tls;
mod udp;
mod url;

pub mod gate;
pub mod limited;
pub use auth::{Secret, proof, verify_proof};
pub use frame::{
    ChunkSource, FrameError, decode, payload_buffer, read_frame, read_frame_within, read_payload,
    read_payload_exact, read_payload_into, read_piece, shared_bytes, write_frame, write_payload,
    write_payload_bytes, write_payload_from_file,
};
pub use session::{ConnectError, WhenRefused, connect, connect_as, hello};
pub use tls::{
    Identity, IdentityError, Traffic, client_endpoint, load_certs, open_up, pinned_client_config,
    server_endpoint,
};
pub use url::{DriverUrl, UrlError};

/// The ALPN protocol name Flint peers speak.
pub const ALPN: &[u8] = b"flint/1";

/// The code a driver that was told to stop closes its connections with: its executors
/// exit 0, as when decommissioned, not as if they had lost it.
pub const DRIVER_STOPPED: u32 = 3;
