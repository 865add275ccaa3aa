//! The door before authentication, for every QUIC server of Flint's (the driver's
//! front, an executor's map-output endpoint). Until a peer's hello proves the secret it
//! gets almost nothing: one stream and a small receive window (`tls`, raised by
//! `open_up` once it is welcome), a few seconds, and a place in a
//! small pool of unproven connections, of which one source may hold only a few. When
//! many arrive at once, a new one must first prove its address (a QUIC retry), so
//! spoofed sources cost the driver a packet, not a handshake. A flood of connections
//! that never say hello therefore fills this pool, never the one executors and clients
//! are served from.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Connections that have not yet proved the secret, at most, in all.
pub const MAX_UNPROVEN: usize = 512;
/// ... and from one source (an IPv4 address, an IPv6 /64).
pub const MAX_UNPROVEN_PER_SOURCE: usize = 64;
/// Past this many unproven connections, a new one must prove its address first.
pub const RETRY_ABOVE: usize = 64;
/// From the first packet to a hello accepted: the TLS handshake, the hello and its
/// check. A peer that takes longer is dropped (it may connect again).
pub const HELLO_DEADLINE: Duration = Duration::from_secs(5);

/// What to do with a new connection.
#[derive(Debug)]
pub enum Admit {
    /// Take it; the pass holds its place until it proves itself or goes.
    Accept(Pass),
    /// Ask it to prove its address first (it comes back with a token).
    Retry,
    /// Turn it away: too many unproven, in all or from its source.
    Refuse(&'static str),
}

#[derive(Debug, Default)]
pub struct Gate {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    total: usize,
    by_source: HashMap<IpAddr, usize>,
}

/// A place among the unproven connections, given back when dropped.
#[derive(Debug)]
pub struct Pass {
    gate: Arc<Gate>,
    source: IpAddr,
}

impl Gate {
    /// Lets `incoming` in with its pass, or answers it here: a retry when its address
    /// must be proved first, a refusal (noted in `refused`, which logs a few) when the
    /// pool is full for it.
    pub fn let_in(
        self: &Arc<Self>,
        incoming: quinn::Incoming,
        refused: &crate::limited::Limited,
    ) -> Option<(quinn::Incoming, Pass)> {
        let remote = incoming.remote_address();
        let validated = incoming.remote_address_validated() || !incoming.may_retry();
        match self.admit(remote.ip(), validated) {
            Admit::Accept(pass) => Some((incoming, pass)),
            Admit::Retry => {
                let _ = incoming.retry();
                None
            }
            Admit::Refuse(why) => {
                refused.note(|not_logged| tracing::warn!(%remote, not_logged, "connection refused: {why}"));
                incoming.refuse();
                None
            }
        }
    }

    /// Decides on a connection from `remote`, whose address is `validated` when it
    /// came back from a retry with a token (or cannot be asked again).
    pub fn admit(self: &Arc<Self>, remote: IpAddr, validated: bool) -> Admit {
        let source = source_of(remote);
        let mut s = self.state.lock().expect("gate lock");
        if s.total >= MAX_UNPROVEN {
            return Admit::Refuse("too many connections have not said hello");
        }
        if s.by_source.get(&source).is_some_and(|n| *n >= MAX_UNPROVEN_PER_SOURCE) {
            return Admit::Refuse("too many connections from this source have not said hello");
        }
        if s.total >= RETRY_ABOVE && !validated {
            return Admit::Retry;
        }
        s.total += 1;
        *s.by_source.entry(source).or_default() += 1;
        Admit::Accept(Pass { gate: self.clone(), source })
    }

    /// Connections holding a pass now.
    pub fn unproven(&self) -> usize {
        self.state.lock().expect("gate lock").total
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        let mut s = self.gate.state.lock().expect("gate lock");
        s.total -= 1;
        if let Some(n) = s.by_source.get_mut(&self.source) {
            *n -= 1;
            if *n == 0 {
                s.by_source.remove(&self.source);
            }
        }
    }
}

/// A new connection's handshake and first frame, its hello (at most `max` bytes, read
/// before the peer has proved anything), within [`HELLO_DEADLINE`]: the connection, the
/// hello's stream and the hello; or what went wrong, for a log line.
pub async fn hear_hello<H: serde::de::DeserializeOwned>(
    incoming: quinn::Incoming,
    max: usize,
) -> Result<(quinn::Connection, quinn::SendStream, quinn::RecvStream, H), String> {
    let said = async {
        let connection = incoming.await.map_err(|e| format!("handshake failed: {e}"))?;
        let (send, mut recv) = connection.accept_bi().await.map_err(|e| format!("no hello: {e}"))?;
        let hello = crate::frame::read_frame_within(&mut recv, max)
            .await
            .map_err(|e| format!("bad hello: {e}"))?
            .ok_or_else(|| "stream closed before hello".to_owned())?;
        Ok((connection, send, recv, hello))
    };
    tokio::time::timeout(HELLO_DEADLINE, said)
        .await
        .map_err(|_| format!("no hello within {} s", HELLO_DEADLINE.as_secs()))?
}

/// The unit one party is likely to hold: an IPv4 address, or an IPv6 /64 (a host is
/// often given a whole /64).
fn source_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_source_cannot_fill_the_pool_and_places_come_back() {
        let gate = Arc::new(Gate::default());
        let flood: IpAddr = "10.0.0.1".parse().unwrap();
        let passes: Vec<Pass> = (0..MAX_UNPROVEN_PER_SOURCE)
            .map(|_| match gate.admit(flood, true) {
                Admit::Accept(p) => p,
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(matches!(gate.admit(flood, true), Admit::Refuse(_)));
        // Another source still gets in, once it proves its address.
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        assert!(matches!(gate.admit(other, false), Admit::Retry));
        assert!(matches!(gate.admit(other, true), Admit::Accept(_)));
        drop(passes);
        assert_eq!(gate.unproven(), 0);
        assert!(matches!(gate.admit(flood, false), Admit::Accept(_)), "a quiet driver asks no retry");
    }

    #[test]
    fn an_ipv6_host_is_one_source_across_its_64() {
        let gate = Arc::new(Gate::default());
        let _held: Vec<Admit> = (0..MAX_UNPROVEN_PER_SOURCE)
            .map(|n| gate.admit(format!("2001:db8::{n:x}").parse().unwrap(), true))
            .collect();
        assert!(matches!(gate.admit("2001:db8::ffff:1".parse().unwrap(), true), Admit::Refuse(_)));
        assert!(matches!(gate.admit("2001:db8:0:1::1".parse().unwrap(), true), Admit::Accept(_)));
    }

    #[test]
    fn the_pool_is_bounded_in_all() {
        let gate = Arc::new(Gate::default());
        let _held: Vec<Admit> = (0..MAX_UNPROVEN)
            .map(|n| gate.admit(IpAddr::from([10, 1, (n / 256) as u8, n as u8]), true))
            .collect();
        assert_eq!(gate.unproven(), MAX_UNPROVEN);
        assert!(matches!(gate.admit("10.9.9.9".parse().unwrap(), true), Admit::Refuse(_)));
    }
}
