//! The UDP socket under every QUIC endpoint: buffers sized for bulk transfers, and
//! datagrams as large as the path carries.
//!
//! quinn's cost is mostly per packet (framing, sealing, acknowledgement bookkeeping),
//! not per byte, so the endpoints search for the largest datagram the path carries
//! ([`MAX_DATAGRAM`]): up to 64 KiB on loopback, some 9 KB on jumbo-frame links, and the
//! usual 1,452 bytes where Ethernet's MTU rules. On loopback here raw QUIC moved
//! 0.9 GB/s with 1,452-byte packets and 2.2 GB/s with 64 KiB ones.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The largest UDP payload the endpoints search for and accept: IPv6's limit. quinn's
/// path MTU discovery probes up to it and settles on what the path carries; a probe
/// too large for the path is lost, never the connection's data.
pub const MAX_DATAGRAM: u16 = 65_527;

/// What each endpoint asks the kernel for as its UDP socket's receive and send buffers.
/// Linux's default (208 KiB) overflows in bursts once a connection runs at loopback or
/// LAN speed, and QUIC takes each burst of drops as congestion: on this machine raw
/// QUIC moved 540–660 MiB/s with the default and 610–970 MiB/s with this. The kernel
/// grants at most `net.core.rmem_max` / `wmem_max` (see the README's "Running a cluster").
pub const SOCKET_BUFFER: usize = 4 << 20;

/// The most one segmentation-offload send may carry: an IP packet's 65,535 bytes less
/// IPv4's and UDP's headers. Linux refuses a larger batch whole (`EMSGSIZE`), and
/// quinn-udp takes that refusal as sent: every packet in it would be lost.
const MAX_SEND: usize = 65_507;

/// A UDP socket on `bind` for a QUIC endpoint: buffers of [`SOCKET_BUFFER`] where the
/// kernel allows, dual-stack when bound to IPv6 (as quinn's client constructor makes
/// it), wrapped so that no send is larger than the kernel takes.
pub(crate) fn socket(bind: SocketAddr) -> io::Result<Arc<dyn quinn::AsyncUdpSocket>> {
    use quinn::Runtime;
    let socket = quinn::TokioRuntime.wrap_udp_socket(std_socket(bind)?)?;
    Ok(Arc::new(Batches(socket)))
}

fn std_socket(bind: SocketAddr) -> io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(bind), Type::DGRAM, Some(Protocol::UDP))?;
    if bind.is_ipv6()
        && let Err(e) = socket.set_only_v6(false)
    {
        tracing::debug!(%e, "UDP socket stays IPv6-only");
    }
    // Best effort: a kernel that grants less (or refuses) still carries QUIC, slower.
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    // Linux reports twice what it grants (its own bookkeeping included).
    let reported = socket.recv_buffer_size().unwrap_or(0).min(socket.send_buffer_size().unwrap_or(0));
    let granted = if cfg!(target_os = "linux") { reported / 2 } else { reported };
    static SAID: std::sync::Once = std::sync::Once::new();
    if granted < SOCKET_BUFFER {
        SAID.call_once(|| {
            tracing::info!(
                granted,
                wanted = SOCKET_BUFFER,
                "the kernel granted smaller UDP buffers than asked: bulk transfers will be slower \
                 (raise net.core.rmem_max and net.core.wmem_max)"
            )
        });
    }
    socket.set_nonblocking(true)?;
    socket.bind(&bind.into())?;
    Ok(socket.into())
}

/// quinn's socket, handing the kernel each batch of datagrams (quinn gathers up to ten
/// of the path's size for one segmentation-offload send) in runs of at most
/// [`MAX_SEND`] bytes: ten 64 KiB datagrams go as ten sends, ten of 1,452 bytes as one.
#[derive(Debug)]
struct Batches(Arc<dyn quinn::AsyncUdpSocket>);

impl quinn::AsyncUdpSocket for Batches {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn quinn::UdpPoller>> {
        self.0.clone().create_io_poller()
    }

    /// A batch the kernel takes only in part (its send buffer filled after the first
    /// runs) counts as sent: the rest is lost, as if dropped on the way, and QUIC sends
    /// it again. Asking quinn to retry the whole would send the first runs again each
    /// time, and a send buffer smaller than a batch would never take the last.
    fn try_send(&self, transmit: &quinn::udp::Transmit) -> io::Result<()> {
        let segment = match transmit.segment_size {
            Some(segment) if segment > 0 && transmit.contents.len() > MAX_SEND => segment,
            _ => return self.0.try_send(transmit),
        };
        let run = (MAX_SEND / segment).max(1) * segment;
        for (n, contents) in transmit.contents.chunks(run).enumerate() {
            let segment_size = (contents.len() > segment).then_some(segment);
            match self.0.try_send(&quinn::udp::Transmit { contents, segment_size, ..*transmit }) {
                Err(e) if n > 0 && e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                sent => sent?,
            }
        }
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [io::IoSliceMut<'_>],
        meta: &mut [quinn::udp::RecvMeta],
    ) -> Poll<io::Result<usize>> {
        self.0.poll_recv(cx, bufs, meta)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.0.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.0.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.0.may_fragment()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the kernel allows a socket (Linux reports twice what was set, its own
    /// bookkeeping included), read where an operator would look.
    fn allowed(sysctl: &str) -> usize {
        let limit: usize =
            std::fs::read_to_string(format!("/proc/sys/net/core/{sysctl}")).unwrap().trim().parse().unwrap();
        2 * limit.min(SOCKET_BUFFER)
    }

    #[test]
    fn endpoint_sockets_get_the_buffers_the_kernel_allows() {
        for bind in ["127.0.0.1:0", "[::1]:0"] {
            let socket = std_socket(bind.parse().unwrap()).unwrap();
            let socket = socket2::SockRef::from(&socket);
            assert_eq!(socket.recv_buffer_size().unwrap(), allowed("rmem_max"), "{bind}");
            assert_eq!(socket.send_buffer_size().unwrap(), allowed("wmem_max"), "{bind}");
        }
    }

    /// Ten 9,000-byte datagrams in one batch (a jumbo-frame path's, 90,000 bytes): more
    /// than one segmentation-offload send takes, and every one of them arrives.
    #[tokio::test]
    async fn a_batch_over_what_one_send_takes_arrives_whole() {
        let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        receiver.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        let sender = socket("127.0.0.1:0".parse().unwrap()).unwrap();
        let segments = sender.max_transmit_segments().min(10);
        let contents: Vec<u8> = (0..segments * 9000).map(|i| (i / 9000) as u8).collect();
        let transmit = quinn::udp::Transmit {
            destination: receiver.local_addr().unwrap(),
            ecn: None,
            contents: &contents,
            // A host without segmentation offload sends datagrams one by one.
            segment_size: (segments > 1).then_some(9000),
            src_ip: None,
        };
        let mut writable = sender.clone().create_io_poller();
        std::future::poll_fn(|cx| writable.as_mut().poll_writable(cx)).await.unwrap();
        sender.try_send(&transmit).unwrap();
        let mut datagram = vec![0; 65_536];
        for n in 0..segments {
            let got = receiver.recv(&mut datagram).expect("each datagram of the batch arrives");
            assert_eq!(got, 9000);
            assert!(datagram[..got].iter().all(|&b| b == n as u8), "datagram {n} in order, whole");
        }
    }

    /// A QUIC connection on loopback settles on datagrams far over Ethernet's 1,452 bytes,
    /// and its bytes all arrive.
    #[tokio::test]
    async fn quic_on_loopback_finds_large_datagrams() {
        let identity = crate::Identity::generate(vec!["flint-driver".into()]).unwrap();
        let idle = std::time::Duration::from_secs(30);
        let server = crate::server_endpoint("127.0.0.1:0".parse().unwrap(), &identity, idle, None).unwrap();
        let addr = server.local_addr().unwrap();
        let receiving = tokio::spawn(async move {
            let connection = server.accept().await.unwrap().await.unwrap();
            crate::open_up(&connection);
            let (_, mut recv) = connection.accept_bi().await.unwrap();
            let got = recv.read_to_end(usize::MAX).await.unwrap();
            (got, connection)
        });
        let client =
            crate::client_endpoint(identity.fingerprint(), idle, "127.0.0.1:0".parse().unwrap(), None)
                .unwrap();
        let connection = client.connect(addr, "flint-driver").unwrap().await.unwrap();
        let (mut send, _recv) = connection.open_bi().await.unwrap();
        let bytes: Vec<u8> = (0..32u32 << 20).map(|i| (i % 251) as u8).collect();
        send.write_all(&bytes).await.unwrap();
        send.finish().unwrap();
        let (got, _server_side) = receiving.await.unwrap();
        assert!(got == bytes, "the bytes arrive as sent");
        let mtu = connection.stats().path.current_mtu;
        assert!(mtu > 16_000, "loopback carries 64 KiB datagrams; the connection settled on {mtu} bytes");
    }
}
