//! Executors reading each other's map outputs over QUIC. Each remote executor serves
//! its shuffle files on an endpoint of its own, with a certificate it makes at start-up
//! (the driver hands its fingerprint to the reducers that read there, which pin it). A
//! peer proves the application secret on the connection's first stream, as to the
//! driver, and then asks on a stream per request: every slice of one reduce partition
//! it wants of this executor's maps, with the job's shuffle token. Refusals are typed.

use crate::core::ExecutorCore;
use crate::shuffle::read::{FetchError, ShuffleFetch, Slice};
use crate::shuffle::tasks::Refusal;
use flint_net::gate::{Gate, Pass, hear_hello};
use flint_net::limited::Limited;
use flint_net::{Secret, read_frame, read_payload_exact, write_frame, write_payload_bytes};
use flint_proto::wire::{
    MAX_HELLO, OutputReply, OutputRequest, PROTOCOL_VERSION, PeerHello, PeerHelloReply, PeerRequest,
    Rejection, SliceHeader, SliceRefusal, SliceReply, SliceRequest,
};
use flint_proto::{ExecutorId, JobId, MapSource, ShuffleEndpoint};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tracing::Instrument;

/// Requests one executor serves at once, all peers together; more wait their turn.
const SERVING: usize = 16;
/// Slices one request may ask for: a job's maps at most.
const MAX_MAPS: usize = 100_000;

/// Peers proven at once; past it a new one is refused at its hello.
const MAX_PEERS: usize = 256;

/// How long a peer has to send a request's header once it opens its stream. The header
/// is read before the request takes one of the [`SERVING`] places, so streams that open
/// and say nothing hold no place another reducer needs.
const REQUEST_DEADLINE: Duration = Duration::from_secs(5);

/// What the accept loop shares with its connections.
struct Door {
    gate: Arc<Gate>,
    /// Places for proven peers.
    peers: Arc<Semaphore>,
    /// Requests served at once, all peers together.
    serving: Arc<Semaphore>,
    secret: Secret,
    app_id: String,
    /// Refusals a stranger can cause as fast as it likes, logged ten a minute.
    refused: Limited,
}

/// Serves this executor's map outputs on `endpoint` until it closes. Connections come
/// in through the same gate as the driver's: a small pool of unproven ones, the
/// handshake and hello within `flint_net::gate::HELLO_DEADLINE`, a retry when many arrive.
pub async fn serve_peers(
    endpoint: quinn::Endpoint,
    core: Weak<ExecutorCore>,
    secret: Secret,
    app_id: String,
) {
    let door = Arc::new(Door {
        gate: Arc::new(Gate::default()),
        peers: Arc::new(Semaphore::new(MAX_PEERS)),
        serving: Arc::new(Semaphore::new(SERVING)),
        secret,
        app_id,
        refused: Limited::default(),
    });
    while let Some(incoming) = endpoint.accept().await {
        let Some((incoming, pass)) = door.gate.let_in(incoming, &door.refused) else { continue };
        let remote = incoming.remote_address();
        let (core, door) = (core.clone(), door.clone());
        tokio::spawn(
            async move {
                if let Err(e) = serve_peer(incoming, pass, core, &door).await {
                    tracing::debug!(error = %e, "peer connection ended");
                }
            }
            .instrument(tracing::debug_span!("peer", %remote)),
        );
    }
}

async fn serve_peer(
    incoming: quinn::Incoming,
    pass: Pass,
    core: Weak<ExecutorCore>,
    door: &Door,
) -> Result<(), flint_net::FrameError> {
    let io = |e: &dyn std::fmt::Display| flint_net::FrameError::Io(std::io::Error::other(e.to_string()));
    // The handshake and the hello within one deadline, on the gate's pass.
    let (connection, mut send, _, hello) =
        hear_hello::<PeerHello>(incoming, MAX_HELLO).await.map_err(|e| io(&e))?;
    let place = door.peers.clone().try_acquire_owned();
    let verdict = if place.is_err() {
        Err(Rejection::Protocol(format!("this executor serves {MAX_PEERS} peers already")))
    } else if hello.protocol_version != PROTOCOL_VERSION {
        Err(Rejection::VersionMismatch { driver: PROTOCOL_VERSION, peer: hello.protocol_version })
    } else if hello.app_id != door.app_id {
        Err(Rejection::WrongApp { expected: door.app_id.clone() })
    } else if !flint_net::verify_proof(&door.secret, &connection, &hello.proof) {
        Err(Rejection::NotAuthenticated)
    } else {
        Ok(())
    };
    if let Err(rejection) = verdict {
        let remote = connection.remote_address();
        door.refused.note(|not_logged| tracing::warn!(%remote, %rejection, not_logged, "a peer was refused"));
        write_frame(&mut send, &PeerHelloReply::Rejected(rejection)).await?;
        let _ = send.finish();
        // The peer reads why, then goes; one that lingers is closed on.
        let _ = tokio::time::timeout(Duration::from_secs(2), connection.closed()).await;
        connection.close(1u32.into(), b"rejected");
        return Ok(());
    }
    // Proven: out of the gate's pool, into a place of its own.
    drop(pass);
    let _place = place;
    flint_net::open_up(&connection);
    write_frame(&mut send, &PeerHelloReply::Welcome).await?;
    loop {
        let Ok((mut send, mut recv)) = connection.accept_bi().await else { return Ok(()) };
        let (core, permits) = (core.clone(), door.serving.clone());
        tokio::spawn(async move {
            let request =
                match tokio::time::timeout(REQUEST_DEADLINE, read_frame::<PeerRequest>(&mut recv)).await {
                    Ok(Ok(Some(request))) => request,
                    Ok(Ok(None)) => return,
                    Ok(Err(e)) => return tracing::debug!(error = %e, "a peer's request did not read"),
                    Err(_) => {
                        let _ = recv.stop(3u32.into());
                        return tracing::debug!("a peer opened a stream and sent no request in time");
                    }
                };
            let _permit = permits.acquire_owned().await;
            if let Err(e) = answer(&mut send, request, core).await {
                tracing::debug!(error = %e, "a slice request failed");
            }
        });
    }
}

/// One request: slices, or a whole output.
async fn answer(
    send: &mut quinn::SendStream,
    request: PeerRequest,
    core: Weak<ExecutorCore>,
) -> Result<(), flint_net::FrameError> {
    match request {
        PeerRequest::Slices(request) => answer_slices(send, request, core).await,
        PeerRequest::Output(request) => answer_output(send, request, core).await,
    }
}

fn refusal(refused: Refusal) -> SliceRefusal {
    match refused {
        Refusal::UnknownJob(job) => SliceRefusal::UnknownJob(job),
        Refusal::BadToken(job) => SliceRefusal::BadToken(job),
        Refusal::Unreadable(e) => SliceRefusal::Unreadable { maps: e.maps, reason: e.reason },
    }
}

/// A whole map output, for a peer adopting it: its index, then its data file sent
/// from the file a piece at a time.
async fn answer_output(
    send: &mut quinn::SendStream,
    request: OutputRequest,
    core: Weak<ExecutorCore>,
) -> Result<(), flint_net::FrameError> {
    let map = request.map;
    let found = tokio::task::spawn_blocking(move || {
        Some(core.upgrade()?.serve_output(request.job, &request.token, request.map))
    });
    match found.await.ok().flatten() {
        None => {
            let stopping =
                SliceRefusal::Unreadable { maps: vec![map], reason: "the executor is stopping".into() };
            write_frame(send, &OutputReply::Refused(stopping)).await?;
        }
        Some(Err(refused)) => write_frame(send, &OutputReply::Refused(refusal(refused))).await?,
        Some(Ok(output)) => {
            tracing::debug!(map, bytes = output.size, "serving a map output to its adopter");
            write_frame(send, &OutputReply::Output { index: output.index, size: output.size }).await?;
            if flint_net::write_payload_from_file(send, output.data, 0, output.size).await? != output.size {
                // Shorter than its index says: the adopter sees the payload end early.
                let _ = send.reset(2u32.into());
                return Ok(());
            }
        }
    }
    let _ = send.finish();
    Ok(())
}

/// A reducer's request: its slices, read off the async threads, or a typed refusal.
async fn answer_slices(
    send: &mut quinn::SendStream,
    request: SliceRequest,
    core: Weak<ExecutorCore>,
) -> Result<(), flint_net::FrameError> {
    let (job, partition) = (request.job, request.partition);
    let reply = if request.maps.len() > MAX_MAPS {
        Err(SliceRefusal::Malformed(format!(
            "{} maps in one request; at most {MAX_MAPS}",
            request.maps.len()
        )))
    } else {
        let read = tokio::task::spawn_blocking(move || {
            let core = core.upgrade()?;
            Some(core.serve_slices(request.job, &request.token, request.partition, &request.maps))
        });
        match read.await.ok().flatten() {
            None => {
                Err(SliceRefusal::Unreadable { maps: Vec::new(), reason: "the executor is stopping".into() })
            }
            Some(Ok(slices)) => Ok(slices),
            Some(Err(refused)) => Err(refusal(refused)),
        }
    };
    match reply {
        Err(refusal) => write_frame(send, &SliceReply::Refused(refusal)).await?,
        Ok(located) => {
            tracing::debug!(job = %job, partition, slices = located.len(), "serving a reducer's request");
            // One slice in memory at a time, read off the async threads.
            write_frame(send, &SliceReply::Slices(located.len() as u32)).await?;
            for at in located {
                let slice = match tokio::task::spawn_blocking(move || at.read()).await {
                    Ok(Ok(slice)) => slice,
                    // Found a moment ago and unreadable now: the reader sees the stream
                    // end early and counts this holder's maps as lost.
                    _ => {
                        let _ = send.reset(2u32.into());
                        return Ok(());
                    }
                };
                let header = SliceHeader { map: slice.map, crc: slice.crc, len: slice.bytes.len() as u64 };
                write_frame(send, &header).await?;
                write_payload_bytes(send, slice.bytes).await?;
            }
        }
    }
    let _ = send.finish();
    Ok(())
}

/// Why a request ended early: the peer (its maps count as lost), or the reader's own
/// verdict on what it sent.
enum Failure {
    Peer(String),
    Reader(FetchError),
}

impl From<String> for Failure {
    fn from(reason: String) -> Failure {
        Failure::Peer(reason)
    }
}

impl From<&str> for Failure {
    fn from(reason: &str) -> Failure {
        Failure::Peer(reason.to_owned())
    }
}

/// A reducer's side: one connection per peer incarnation, kept while it works.
pub struct PeerFetch {
    endpoint: quinn::Endpoint,
    handle: tokio::runtime::Handle,
    secret: Secret,
    app_id: String,
    idle_timeout: Duration,
    /// How long a peer may take to answer before its maps count as lost.
    network_timeout: Duration,
    connections: Mutex<HashMap<(ExecutorId, u64), quinn::Connection>>,
}

impl PeerFetch {
    pub fn new(
        endpoint: quinn::Endpoint,
        handle: tokio::runtime::Handle,
        secret: Secret,
        app_id: String,
        (idle_timeout, network_timeout): (Duration, Duration),
    ) -> PeerFetch {
        PeerFetch {
            endpoint,
            handle,
            secret,
            app_id,
            idle_timeout,
            network_timeout,
            connections: Mutex::new(HashMap::new()),
        }
    }

    async fn connect(&self, peer: &ShuffleEndpoint) -> Result<quinn::Connection, String> {
        let addr: SocketAddr = match tokio::net::lookup_host(peer.address.as_str()).await {
            Ok(mut addrs) => addrs.next().ok_or("the address resolves to nothing")?,
            Err(e) => return Err(format!("cannot resolve {}: {e}", peer.address)),
        };
        let config = flint_net::pinned_client_config(peer.fingerprint, self.idle_timeout)
            .map_err(|e| e.to_string())?;
        let connecting =
            self.endpoint.connect_with(config, addr, "flint-executor").map_err(|e| e.to_string())?;
        let connection = connecting.await.map_err(|e| e.to_string())?;
        let (mut send, mut recv) = connection.open_bi().await.map_err(|e| e.to_string())?;
        let hello = PeerHello {
            protocol_version: PROTOCOL_VERSION,
            app_id: self.app_id.clone(),
            proof: flint_net::proof(&self.secret, &connection),
        };
        write_frame(&mut send, &hello).await.map_err(|e| e.to_string())?;
        match read_frame::<PeerHelloReply>(&mut recv).await.map_err(|e| e.to_string())? {
            Some(PeerHelloReply::Welcome) => Ok(connection),
            Some(PeerHelloReply::Rejected(r)) => Err(format!("the peer refused this executor: {r}")),
            None => Err("the peer closed the connection".into()),
        }
    }

    /// The connection to `source`'s incarnation: the one kept, or a new one.
    async fn connection(
        &self,
        source: &MapSource,
        peer: &ShuffleEndpoint,
    ) -> Result<quinn::Connection, String> {
        let key = (source.executor.clone(), source.incarnation);
        let known = self.connections.lock().expect("connections lock").get(&key).cloned();
        match known.filter(|c| c.close_reason().is_none()) {
            Some(c) => Ok(c),
            None => {
                let c = self.connect(peer).await?;
                self.connections.lock().expect("connections lock").insert(key, c.clone());
                Ok(c)
            }
        }
    }

    /// One whole output from its holder: the index returned, the data to `data`.
    async fn request_output(
        &self,
        adoption: &flint_proto::Adoption,
        map: u32,
        (most, index_most): (u64, usize),
        data: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> Result<Vec<u8>, String> {
        let source = &adoption.from;
        let peer = source.address.as_ref().ok_or("the executor serves no map outputs over the network")?;
        let connection = self.connection(source, peer).await?;
        let (mut send, mut recv) = connection.open_bi().await.map_err(|e| e.to_string())?;
        let request = OutputRequest { job: adoption.job, token: adoption.token, map };
        write_frame(&mut send, &PeerRequest::Output(request)).await.map_err(|e| e.to_string())?;
        let _ = send.finish();
        let (index, size) = match read_frame::<OutputReply>(&mut recv).await.map_err(|e| e.to_string())? {
            Some(OutputReply::Output { index, size }) => (index, size),
            Some(OutputReply::Refused(refusal)) => return Err(format!("refused: {refusal}")),
            None => return Err("the peer closed the stream".into()),
        };
        if index.len() > index_most || size > most {
            return Err(format!("the peer announced {size} bytes and a {}-byte index", index.len()));
        }
        let (mut piece, mut got) = (Vec::new(), 0u64);
        while flint_net::read_piece(&mut recv, &mut piece).await.map_err(|e| e.to_string())? {
            got += piece.iter().map(|b| b.len() as u64).sum::<u64>();
            if got > size {
                return Err(format!("the peer sent more than the {size} bytes it announced"));
            }
            for part in &piece {
                data(part).map_err(|e| format!("cannot write the copy: {e}"))?;
            }
        }
        match got == size {
            true => Ok(index),
            false => Err(format!("the peer sent {got} of the {size} bytes it announced")),
        }
    }

    /// One request to a holder; each slice goes to `each` as it arrives. An error from
    /// `each` is the reader's own and ends the request as it is.
    async fn request(
        &self,
        source: &MapSource,
        request: SliceRequest,
        each: &mut dyn FnMut(Slice) -> Result<(), FetchError>,
    ) -> Result<(), Failure> {
        let peer = source
            .address
            .as_ref()
            .ok_or(Failure::Peer("the executor serves no map outputs over the network".into()))?;
        let connection = self.connection(source, peer).await?;
        let (mut send, mut recv) = connection.open_bi().await.map_err(|e| e.to_string())?;
        let asked = request.maps.len();
        write_frame(&mut send, &PeerRequest::Slices(request)).await.map_err(|e| e.to_string())?;
        let _ = send.finish();
        match read_frame::<SliceReply>(&mut recv).await.map_err(|e| e.to_string())? {
            Some(SliceReply::Slices(count)) => {
                if count as usize > asked {
                    let said = format!("the peer sent {count} slices for {asked} maps");
                    return Err(said.into());
                }
                for _ in 0..count {
                    let header: SliceHeader = read_frame(&mut recv)
                        .await
                        .map_err(|e| e.to_string())?
                        .ok_or("the reply was cut short")?;
                    // No more than the tracker's bound for the slice (10% above its size).
                    let bound = source.maps.iter().find(|(m, _)| *m == header.map).map(|(_, b)| *b);
                    match bound {
                        Some(b) if header.len <= b => {}
                        _ => {
                            let said = format!("the peer sent {} bytes for map {}", header.len, header.map);
                            return Err(said.into());
                        }
                    }
                    let bytes = read_payload_exact(&mut recv, header.len).await.map_err(|e| e.to_string())?;
                    each(Slice { map: header.map, crc: header.crc, bytes }).map_err(Failure::Reader)?;
                }
                Ok(())
            }
            Some(SliceReply::Refused(refusal)) => Err(format!("refused: {refusal}").into()),
            None => Err("the peer closed the stream".into()),
        }
    }
}

impl ShuffleFetch for PeerFetch {
    fn fetch(
        &self,
        job: JobId,
        token: &[u8; 32],
        partition: u32,
        source: &MapSource,
        deadline: Instant,
        each: &mut dyn FnMut(Slice) -> Result<(), FetchError>,
    ) -> Result<(), FetchError> {
        let maps: Vec<u32> = source.maps.iter().map(|(m, _)| *m).collect();
        let request = SliceRequest { job, token: *token, partition, maps: maps.clone() };
        let limit = (Instant::now() + self.network_timeout).min(deadline);
        // Polled on this slot thread (the runtime's own thread drives the connection),
        // so each slice is kept or spilled here as it arrives.
        let result = self.handle.block_on(async {
            tokio::time::timeout_at(limit.into(), self.request(source, request, each)).await.unwrap_or_else(
                |_| {
                    Err(Failure::Peer(
                        "no answer in time (flint.network.timeout or the task's deadline)".into(),
                    ))
                },
            )
        });
        match result {
            Ok(()) => Ok(()),
            Err(Failure::Reader(e)) => Err(e),
            Err(Failure::Peer(reason)) => {
                let key = (source.executor.clone(), source.incarnation);
                self.connections.lock().expect("connections lock").remove(&key);
                Err(FetchError { maps, reason: format!("fetching from {}: {reason}", source.executor) })
            }
        }
    }

    fn fetch_output(
        &self,
        adoption: &flint_proto::Adoption,
        map: u32,
        bounds: (u64, usize),
        data: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> Result<Vec<u8>, String> {
        // Each piece is written to the copy on this (blocking) thread as it arrives.
        let copy = self.request_output(adoption, map, bounds, data);
        let limit = Instant::now() + self.network_timeout;
        let result = self.handle.block_on(async {
            tokio::time::timeout_at(limit.into(), copy)
                .await
                .unwrap_or_else(|_| Err("no whole copy in time (flint.network.timeout)".into()))
        });
        result.map_err(|reason| {
            let key = (adoption.from.executor.clone(), adoption.from.incarnation);
            self.connections.lock().expect("connections lock").remove(&key);
            format!("copying from {}: {reason}", adoption.from.executor)
        })
    }
}
