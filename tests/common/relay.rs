//! A UDP relay in front of one server, that a test can cut: the link goes dark (every
//! datagram dropped, both ways) while the processes at both ends run on untouched, as
//! when a cable or a firewall fails between them.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long a relay thread waits for a datagram before it looks at the flags again.
const TICK: Duration = Duration::from_millis(50);

pub struct Relay {
    /// Where peers send: the relay's own port, in place of the server's.
    pub addr: SocketAddr,
    dark: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
}

impl Relay {
    /// Relays datagrams from any peer to `server` and back, each peer through a
    /// socket of its own, so the server sees one address per peer as it would
    /// without the relay.
    pub fn start(server: SocketAddr) -> Relay {
        let front = UdpSocket::bind("127.0.0.1:0").unwrap();
        front.set_read_timeout(Some(TICK)).unwrap();
        let addr = front.local_addr().unwrap();
        let (dark, stop) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let (dark_in, stop_in) = (dark.clone(), stop.clone());
        std::thread::spawn(move || {
            let front = Arc::new(front);
            let mut peers: HashMap<SocketAddr, UdpSocket> = HashMap::new();
            let mut datagram = vec![0u8; 65_536];
            while !stop_in.load(Ordering::Relaxed) {
                let Ok((n, peer)) = front.recv_from(&mut datagram) else { continue };
                if dark_in.load(Ordering::Relaxed) {
                    continue;
                }
                let upstream = peers.entry(peer).or_insert_with(|| {
                    let upstream = UdpSocket::bind("127.0.0.1:0").unwrap();
                    upstream.connect(server).unwrap();
                    upstream.set_read_timeout(Some(TICK)).unwrap();
                    let back = upstream.try_clone().unwrap();
                    let (front, dark, stop) = (front.clone(), dark_in.clone(), stop_in.clone());
                    std::thread::spawn(move || {
                        let mut datagram = vec![0u8; 65_536];
                        while !stop.load(Ordering::Relaxed) {
                            if let Ok(n) = back.recv(&mut datagram)
                                && !dark.load(Ordering::Relaxed)
                            {
                                let _ = front.send_to(&datagram[..n], peer);
                            }
                        }
                    });
                    upstream
                });
                let _ = upstream.send(&datagram[..n]);
            }
        });
        Relay { addr, dark, stop }
    }

    /// From now on nothing crosses, either way.
    pub fn go_dark(&self) {
        self.dark.store(true, Ordering::Relaxed);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
