//! The driver's QUIC front: accepts executors and clients, authenticates them, and
//! bridges their streams to the event loop. One task per connection, with a span that
//! names the peer; a peer that sends garbage loses its connection, nobody else notices.

use crate::data::Arrival;
use crate::driver::Driver;
use crate::job::{HeldBytes, Uploads};
use crate::job::{JobRequest, SubmitError};
use crate::link::{Blocks, ChannelLink, Fetch};
use crate::metrics::{Peer, Transfer};
use flint_core::{ExecutorInfo, Incarnation};
use flint_net::gate::{Gate, Pass, hear_hello};
use flint_net::limited::Limited;
use flint_net::{
    FrameError, Secret, payload_buffer, read_frame, read_payload, read_payload_into, read_piece,
    verify_proof, write_frame, write_payload_bytes, write_payload_from_file,
};
use flint_proto::wire::{
    AppConfig, BlockReply, DriverMessage, ExecutorMessage, Heartbeat, Hello, HelloReply, InputReply, Launch,
    MAX_HELLO, PROTOCOL_VERSION, Rejection, Request, ResourceProfile, Role, Submission, SubmitInput,
    SubmitReply,
};
use flint_proto::{BlockRef, ExecutorCommand, ExecutorId, JobId, StatusUpdate};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tracing::Instrument;

/// The largest component a client may submit.
const MAX_COMPONENT: usize = 256 << 20;
/// The least time between two progress updates sent to a submitter.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);
/// How often a submitter whose job runs nothing is told why its executors wait (when
/// that changed).
const NOTICE_EVERY: Duration = Duration::from_secs(1);
/// Launches per frame, and about the most bytes of them: a frame stays far below the
/// size limit whatever the partitions (a job's values and URLs are bounded at submission).
const LAUNCHES_PER_FRAME: usize = 256;
const LAUNCH_FRAME_BYTES: usize = 1 << 20;
/// The largest job result a submitter is sent (beyond it the job fails on the driver,
/// by `flint.driver.maxResultSize`, long before).
const MAX_CLIENT_RESULT: u64 = 1 << 40;

/// A remote executor's blocks, fetched on streams the driver opens; the link ends by
/// closing the connection.
struct QuicBlocks(quinn::Connection);

impl Blocks for QuicBlocks {
    fn fetch(&self, block: BlockRef) -> Fetch {
        let connection = self.0.clone();
        Box::pin(async move {
            let (mut send, mut recv) = connection.open_bi().await.map_err(|e| e.to_string())?;
            write_frame(&mut send, &Request::FetchBlock { id: block.id, release: true })
                .await
                .map_err(|e| e.to_string())?;
            let _ = send.finish();
            match read_frame::<BlockReply>(&mut recv).await.map_err(|e| e.to_string())? {
                Some(BlockReply::Found { size }) if size == block.size => {
                    // The block's size was charged to the job's budget before the fetch.
                    let room = usize::try_from(size).map_err(|_| format!("a block of {size} bytes"))?;
                    let mut bytes = payload_buffer(room)
                        .map_err(|e| format!("no room for a block of {size} bytes: {e}"))?;
                    read_payload_into(&mut recv, size, &mut bytes).await.map_err(|e| e.to_string())?;
                    Ok(bytes)
                }
                Some(BlockReply::Found { size }) => {
                    Err(format!("block is {size} bytes, {} expected", block.size))
                }
                Some(BlockReply::Missing) => Err("the executor no longer holds the block".into()),
                None => Err("the executor closed the stream".into()),
            }
        })
    }

    fn close(&self, reason: &str) {
        let reason = flint_proto::failure::head(reason, 256);
        self.0.close(1u32.into(), reason.as_bytes());
    }
}

/// What the front needs besides the driver.
pub struct FrontConfig {
    pub secret: Secret,
    pub log_level: String,
}

/// Connections that proved the secret are refused past this many at once (executors
/// and clients together); those that have not are bounded apart (`gate`). Room for a
/// fleet of ten thousand executors and its clients (`make bench`'s `fleet` figure).
pub const MAX_CONNECTIONS: usize = 16_384;

/// Accepts connections until the endpoint closes. A new one must first get past the
/// gate (a small pool of unproven connections, retries when many arrive), and once its
/// hello is accepted, one of [`MAX_CONNECTIONS`] places: past either bound it is
/// refused at once rather than queued.
pub async fn serve(driver: Driver, endpoint: quinn::Endpoint, config: FrontConfig) {
    let front = Arc::new(Front {
        config,
        gate: Arc::new(Gate::default()),
        permits: Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS)),
        turned_away: Limited::default(),
        dropped: Limited::default(),
    });
    while let Some(incoming) = endpoint.accept().await {
        let Some((incoming, pass)) = front.gate.let_in(incoming, &front.turned_away) else { continue };
        let remote = incoming.remote_address();
        let (driver, front) = (driver.clone(), front.clone());
        let span = tracing::info_span!("connection", %remote);
        tokio::spawn(
            async move {
                if let Err(e) = handle_connection(driver, incoming, pass, &front).await {
                    // Unproven peers can make these as fast as they like.
                    match e {
                        PeerError::Unproven(_) | PeerError::Rejected(_) => front
                            .dropped
                            .note(|not_logged| tracing::warn!(error = %e, not_logged, "connection dropped")),
                        _ => tracing::warn!(error = %e, "connection dropped"),
                    }
                }
            }
            .instrument(span),
        );
    }
}

/// The front's own state, shared by its connections.
struct Front {
    config: FrontConfig,
    gate: Arc<Gate>,
    /// Places for connections that proved the secret.
    permits: Arc<tokio::sync::Semaphore>,
    /// Connections refused at the gate, and unproven ones dropped: logged at most ten a
    /// minute each.
    turned_away: Limited,
    dropped: Limited,
}

#[derive(Debug, thiserror::Error)]
enum PeerError {
    #[error("{0}")]
    Frame(#[from] FrameError),
    #[error("connection: {0}")]
    Connection(#[from] quinn::ConnectionError),
    #[error("rejected: {0}")]
    Rejected(Rejection),
    #[error("protocol: {0}")]
    Protocol(String),
    /// Before its hello was accepted: a handshake that failed, a hello that did not come
    /// in time, bytes that are not a hello.
    #[error("before hello: {0}")]
    Unproven(String),
}

/// Whether the hello proves what its role needs: the application secret, or for an
/// executor the executor key made from it ([`flint_net::Secret::executor_key`]), which
/// is all a standalone master and its workers ever carry.
fn proven(config: &FrontConfig, hello: &Hello, connection: &quinn::Connection) -> bool {
    verify_proof(&config.secret, connection, &hello.proof)
        || (hello.role == Role::Executor
            && verify_proof(&config.secret.executor_key(), connection, &hello.proof))
}

async fn handle_connection(
    driver: Driver,
    incoming: quinn::Incoming,
    pass: Pass,
    front: &Front,
) -> Result<(), PeerError> {
    let config = &front.config;
    // The handshake and the hello within one deadline, on the gate's pass.
    let (connection, mut send, recv, hello) =
        hear_hello::<Hello>(incoming, MAX_HELLO).await.map_err(PeerError::Unproven)?;
    // A place among the proven connections, taken before an executor id is reserved.
    let permit = front.permits.clone().try_acquire_owned();
    let verdict = if permit.is_err() {
        Err(Rejection::Protocol(format!("the driver serves {MAX_CONNECTIONS} connections already")))
    } else if hello.protocol_version != PROTOCOL_VERSION {
        Err(Rejection::VersionMismatch { driver: PROTOCOL_VERSION, peer: hello.protocol_version })
    } else if !proven(config, &hello, &connection) {
        Err(Rejection::NotAuthenticated)
    } else if matches!(hello.role, Role::Worker | Role::Application) {
        Err(Rejection::Protocol(format!("a driver serves executors and clients, not a {:?}", hello.role)))
    } else if !hello.app_id.is_empty() && hello.app_id != driver.app_id() {
        Err(Rejection::WrongApp { expected: driver.app_id().to_owned() })
    } else if hello.role == Role::Executor {
        let (requested, pod) = (hello.executor_id.clone(), hello.pod_name.clone());
        driver.reserve_executor_id(requested, pod).await.map(Some)
    } else {
        Ok(None)
    };
    let executor_id = match verdict {
        Ok(id) => id,
        Err(rejection) => {
            return reject(&connection, send, &HelloReply::Rejected(rejection.clone()), rejection).await;
        }
    };
    // Proven: out of the gate's pool, into a place of its own, with the streams and
    // window every peer has.
    drop(pass);
    let _permit = permit;
    flint_net::open_up(&connection);
    write_frame(
        &mut send,
        &HelloReply::Welcome { executor_id: executor_id.as_ref().map(|(id, _)| id.clone()) },
    )
    .await?;
    match executor_id {
        Some((id, incarnation)) => {
            let span = tracing::info_span!("executor", executor_id = %id, incarnation = incarnation.0);
            let result = serve_executor(&driver, &connection, config, (id.clone(), incarnation), send, recv)
                .instrument(span)
                .await;
            // Which layer noticed: the transport's idle timeout, or the peer closing.
            let reason = match (connection.close_reason(), &result) {
                (Some(quinn::ConnectionError::TimedOut), _) => format!(
                    "connection idle: nothing heard for {} ms (flint.network.idleTimeout)",
                    driver.settings().network_idle_timeout.as_millis()
                ),
                (_, Ok(())) => "connection closed".to_owned(),
                (_, Err(e)) => e.to_string(),
            };
            driver.executor_lost(id, incarnation, reason).await;
            result
        }
        None => serve_client(&driver, &connection).await,
    }
}

/// Sends a peer the reason it is turned away and lets it reach the peer before the
/// connection goes.
async fn reject(
    connection: &quinn::Connection,
    mut send: quinn::SendStream,
    reply: &impl serde::Serialize,
    rejection: Rejection,
) -> Result<(), PeerError> {
    write_frame(&mut send, reply).await?;
    let _ = send.finish();
    let _ = tokio::time::timeout(Duration::from_secs(2), connection.closed()).await;
    Err(PeerError::Rejected(rejection))
}

async fn serve_executor(
    driver: &Driver,
    connection: &quinn::Connection,
    config: &FrontConfig,
    (id, incarnation): (ExecutorId, Incarnation),
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
) -> Result<(), PeerError> {
    // Bootstrap: configuration, then registration.
    let Some(ExecutorMessage::FetchConfig { resource_profile_id }) = read_frame(&mut recv).await? else {
        return Err(PeerError::Protocol("expected FetchConfig".into()));
    };
    let settings = driver.settings();
    let app = AppConfig {
        app_id: driver.app_id().to_owned(),
        // How the driver gets its tokens (commands, files) is its own business:
        // executors get the tokens, never the means.
        properties: driver
            .conf()
            .iter()
            .filter(|(key, _)| !key.starts_with("flint.security.credentials."))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        tokens: driver.tokens(),
        resource_profile: ResourceProfile { id: resource_profile_id, task_cpus: settings.task_cpus },
        log_level: config.log_level.clone(),
    };
    write_frame(&mut send, &DriverMessage::AppConfig(app)).await?;
    let Some(ExecutorMessage::Register(registration)) = read_frame(&mut recv).await? else {
        return Err(PeerError::Protocol("expected Register".into()));
    };
    // Slots set the executor's credit: a claim the driver cannot honour is refused.
    if registration.slots == 0 || registration.slots > flint_core::MAX_SLOTS {
        let rejection = Rejection::Protocol(format!(
            "registration claims {} slots; an executor has 1 to {}",
            registration.slots,
            flint_core::MAX_SLOTS
        ));
        return reject(connection, send, &DriverMessage::Rejected(rejection.clone()), rejection).await;
    }
    write_frame(&mut send, &DriverMessage::Registered { executor_id: id.clone() }).await?;
    let (commands, mut command_rx) = mpsc::unbounded_channel();
    let info = ExecutorInfo {
        host: flint_proto::failure::head(&registration.host, 256),
        cores: registration.cores,
        memory: registration.memory,
        slots: registration.slots,
    };
    // The address is the executor's word; peers pin the fingerprint beside it, and
    // what they read there is checked slice by slice.
    let shuffle = registration.shuffle.filter(|s| s.address.len() <= 256);
    let link = Arc::new(ChannelLink::new(commands, QuicBlocks(connection.clone())).with_shuffle(shuffle));
    driver.executor_up(id.clone(), incarnation, info, link).await;

    // Commands out: a job's descriptor goes once, before its first launch here.
    let out = connection.clone();
    let writer = tokio::spawn(
        async move {
            let mut known: HashSet<JobId> = HashSet::new();
            while let Some(first) = command_rx.recv().await {
                // Take what is already queued too: launches that follow each other go
                // out together, up to LAUNCHES_PER_FRAME a frame, in the order given.
                let mut commands = vec![first];
                while commands.len() < LAUNCHES_PER_FRAME {
                    let Ok(more) = command_rx.try_recv() else { break };
                    commands.push(more);
                }
                let mut messages = Vec::new();
                let mut launches = Vec::new();
                let mut launch_bytes = 0;
                for command in commands {
                    if !matches!(command, ExecutorCommand::Launch(_)) && !launches.is_empty() {
                        messages.push(DriverMessage::Launch(std::mem::take(&mut launches)));
                    }
                    match command {
                        ExecutorCommand::Launch(batch) => {
                            for launch in batch {
                                if known.insert(launch.job.job) {
                                    if !launches.is_empty() {
                                        messages.push(DriverMessage::Launch(std::mem::take(&mut launches)));
                                    }
                                    messages.push(DriverMessage::Job((*launch.job).clone()));
                                }
                                if launches.is_empty() {
                                    launch_bytes = 0;
                                }
                                launch_bytes += launch.partition.wire_size_hint();
                                launches
                                    .push(Launch { attempt: launch.attempt, partition: launch.partition });
                                if launches.len() == LAUNCHES_PER_FRAME || launch_bytes >= LAUNCH_FRAME_BYTES
                                {
                                    messages.push(DriverMessage::Launch(std::mem::take(&mut launches)));
                                }
                            }
                        }
                        ExecutorCommand::Kill(attempt) => messages.push(DriverMessage::Kill(attempt)),
                        ExecutorCommand::JobEnded(job) => {
                            if known.remove(&job) {
                                messages.push(DriverMessage::JobEnded(job));
                            }
                        }
                        ExecutorCommand::Decommission => messages.push(DriverMessage::Decommission),
                        ExecutorCommand::Collect(job) => messages.push(DriverMessage::Collect(job)),
                        ExecutorCommand::Tokens(tokens) => messages.push(DriverMessage::Tokens(tokens)),
                        ExecutorCommand::Adopt(adoption) => messages.push(DriverMessage::Adopt(adoption)),
                        ExecutorCommand::Leave => messages.push(DriverMessage::Leave),
                    }
                }
                if !launches.is_empty() {
                    messages.push(DriverMessage::Launch(launches));
                }
                for message in messages {
                    if let Err(e) = write_frame(&mut send, &message).await {
                        // A link that cannot carry a command is no link: the executor
                        // goes (its tasks run elsewhere) rather than stay registered
                        // and never hear from the driver again.
                        tracing::warn!(error = %e, "a command to the executor could not be written");
                        let why = flint_proto::failure::head(&format!("cannot send a command: {e}"), 200);
                        out.close(2u32.into(), why.as_bytes());
                        return;
                    }
                }
            }
        }
        .in_current_span(),
    );

    // Heartbeats on their own stream; component fetches on streams of their own.
    let side = tokio::spawn(
        serve_executor_streams(
            driver.clone(),
            connection.clone(),
            id.clone(),
            incarnation,
            registration.slots,
        )
        .in_current_span(),
    );

    // Reports in, until the executor goes.
    let result = loop {
        match read_frame::<ExecutorMessage>(&mut recv).await {
            Ok(Some(ExecutorMessage::Status(updates))) => {
                // The executor is who the connection says, whatever the report claims, and
                // what it says is bounded here as an honest executor bounds it.
                let updates = updates
                    .into_iter()
                    .map(|u| if u.executor == id { u } else { StatusUpdate { executor: id.clone(), ..u } })
                    .map(StatusUpdate::bounded)
                    .collect();
                driver.peer_status(incarnation, updates).await;
            }
            Ok(Some(ExecutorMessage::Decommissioning)) => {
                driver.decommissioning(id.clone(), incarnation).await
            }
            Ok(Some(ExecutorMessage::Partial(partial))) => {
                driver.partial(id.clone(), incarnation, partial).await
            }
            Ok(Some(ExecutorMessage::Adopted(adopted))) => {
                driver.adopted(id.clone(), incarnation, adopted).await
            }
            Ok(Some(other)) => break Err(PeerError::Protocol(format!("unexpected {other:?}"))),
            Ok(None) => break Ok(()),
            Err(e) => break Err(e.into()),
        }
    };
    writer.abort();
    side.abort();
    result
}

async fn serve_executor_streams(
    driver: Driver,
    connection: quinn::Connection,
    id: ExecutorId,
    incarnation: Incarnation,
    slots: u32,
) {
    // An honest executor's heartbeat says how far each attempt it holds is: at most
    // this many.
    let progress_kept = slots as usize * flint_proto::MAX_HELD_PER_SLOT;
    let beats = {
        let (driver, connection, id) = (driver.clone(), connection.clone(), id.clone());
        async move {
            let mut counted = (0, 0);
            while let Ok(mut stream) = connection.accept_uni().await {
                while let Ok(Some(mut beat)) = read_frame::<Heartbeat>(&mut stream).await {
                    beat.progress.truncate(progress_kept);
                    driver.heartbeat(id.clone(), incarnation, std::mem::take(&mut beat.progress)).await;
                    driver.peer_metrics().beat(&id, beat);
                    counted = driver.peer_metrics().count_traffic(Peer::Executor, &connection, counted);
                }
            }
            driver.peer_metrics().gone(&id);
            driver.peer_metrics().count_traffic(Peer::Executor, &connection, counted);
        }
    };
    let requests = async move {
        while let Ok((send, recv)) = connection.accept_bi().await {
            tokio::spawn(serve_request(driver.clone(), Role::Executor, send, recv).in_current_span());
        }
    };
    tokio::join!(beats, requests);
}

async fn serve_client(driver: &Driver, connection: &quinn::Connection) -> Result<(), PeerError> {
    let result = serve_client_streams(driver, connection).await;
    driver.peer_metrics().count_traffic(Peer::Client, connection, (0, 0));
    result
}

async fn serve_client_streams(driver: &Driver, connection: &quinn::Connection) -> Result<(), PeerError> {
    loop {
        let (send, recv) = match connection.accept_bi().await {
            Ok(streams) => streams,
            Err(quinn::ConnectionError::ApplicationClosed(_) | quinn::ConnectionError::LocallyClosed) => {
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        tokio::spawn(serve_request(driver.clone(), Role::Client, send, recv).in_current_span());
    }
}

/// One request on a stream of its own. An executor may fetch components and nothing
/// else; a client may submit and ask for status.
async fn serve_request(driver: Driver, role: Role, mut send: quinn::SendStream, mut recv: quinn::RecvStream) {
    let result: Result<(), PeerError> = async {
        let Some(request) = read_frame::<Request>(&mut recv).await? else { return Ok(()) };
        match (role, &request) {
            (Role::Executor, Request::FetchComponent(_) | Request::ReadInput { .. })
            | (Role::Client, Request::Submit(_) | Request::Status | Request::Cancel(_)) => {}
            _ => {
                return Err(PeerError::Protocol(format!(
                    "a {role:?} may not send {}",
                    request_name(&request)
                )));
            }
        }
        match request {
            Request::FetchComponent(digest) => match driver.component(&digest) {
                Some(bytes) => write_payload_bytes(&mut send, flint_net::shared_bytes(bytes)).await?,
                None => return Err(PeerError::Protocol(format!("no component {digest}"))),
            },
            Request::Status => {
                // Many finished jobs (a raised flint.driver.retainedJobs) must not make
                // the reply too big to send: the oldest are left out, and counted.
                let mut status = driver.snapshot().await;
                status.fit(flint_proto::wire::MAX_FRAME);
                write_frame(&mut send, &status).await?
            }
            Request::Submit(submission) => submit(&driver, *submission, &mut send, &mut recv).await?,
            Request::Cancel(job) => write_frame(&mut send, &driver.cancel(job).await).await?,
            Request::FetchBlock { .. } => {
                return Err(PeerError::Protocol("the driver holds no blocks".into()));
            }
            Request::ReadInput { token, path, start, len } => {
                let reader = driver.clone();
                let opened = tokio::task::spawn_blocking(move || {
                    let (file, size) = reader.data().open(&token.0, &path, start, len)?;
                    Ok((file, size, path))
                });
                let opened = opened.await.map_err(|e| PeerError::Protocol(e.to_string()))?;
                // A file still arriving with its job is read once the range is there.
                let ready = match opened {
                    Ok((file, size, path)) => {
                        driver.data().arrived(&path, start + size).await.map(|()| (file, size))
                    }
                    Err(refusal) => Err(refusal),
                };
                match ready {
                    Ok((file, size)) => {
                        // Held until the bytes are sent: a slow reader slows only the
                        // others' turns.
                        let _turn = driver
                            .data()
                            .reads
                            .acquire()
                            .await
                            .map_err(|e| PeerError::Protocol(e.to_string()))?;
                        let started = std::time::Instant::now();
                        // A piece at a time from the file: no read holds its whole range in
                        // memory. A file cut short meanwhile sends fewer bytes than said,
                        // which the executor refuses.
                        write_frame(&mut send, &InputReply::Data { size }).await?;
                        write_payload_from_file(&mut send, file, start, size).await?;
                        driver.peer_metrics().transferred(Transfer::InputServed, size, started.elapsed());
                    }
                    Err(refusal) => {
                        driver.data().note_refusal(&refusal);
                        write_frame(&mut send, &InputReply::Refused(refusal)).await?;
                    }
                }
            }
        }
        Ok(())
    }
    .await;
    if let Err(e) = result {
        tracing::warn!(error = %e, "request failed");
    }
    let _ = send.finish();
}

async fn submit(
    driver: &Driver,
    submission: Submission,
    send: &mut quinn::SendStream,
    recv: &mut quinn::RecvStream,
) -> Result<(), PeerError> {
    let Submission { manifest, component_size, config, inputs, partitions, every } = submission;
    let limit = (component_size as usize).min(MAX_COMPONENT);
    let component = read_payload(recv, limit).await?;
    // Up to 1,024 files made on the driver's disk: off the connections' threads.
    let making = driver.clone();
    let room = tokio::task::spawn_blocking(move || make_room(&making, inputs));
    let Room { urls, names, uploads, incoming } =
        match room.await.map_err(|e| PeerError::Protocol(e.to_string()))? {
            Ok(room) => room,
            Err(reason) => return Ok(write_frame(send, &SubmitReply::Rejected(reason)).await?),
        };
    let request = match JobRequest::from_manifest(&manifest, component, config, urls, partitions) {
        Ok(r) => JobRequest { every, uploads, input_names: names, ..r },
        Err(e) => return Ok(write_frame(send, &SubmitReply::Rejected(e.to_string())).await?),
    };
    let handle = match driver.submit(request).await {
        Ok(h) => h,
        Err(SubmitError::Busy(why)) => return Ok(write_frame(send, &SubmitReply::Busy(why)).await?),
        Err(e) => return Ok(write_frame(send, &SubmitReply::Rejected(e.to_string())).await?),
    };
    write_frame(send, &SubmitReply::Accepted { job: handle.id }).await?;
    // The job's files arrive while it runs: a read of bytes not yet there waits for
    // them, and one past where a file stopped is refused.
    let receiving = receive_files(driver, incoming, recv);
    tokio::pin!(receiving);
    let mut received = false;
    let mut progress = handle.progress.clone();
    let mut report = handle.report;
    // A frame per finished task would cost more than the tasks: at most ten updates a
    // second. The pause is a deadline beside the report, never a sleep before it, so a
    // job's end is sent the moment it comes.
    let mut quiet_until: Option<tokio::time::Instant> = None;
    let mut watching = true;
    // While nothing of the job runs, why the executors it needs wait, when that changes.
    let mut noticed: Option<String> = None;
    let mut notices = tokio::time::interval(NOTICE_EVERY);
    notices.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            done = &mut report => {
                let Ok(mut report) = done else { return Err(PeerError::Protocol("driver stopped".into())) };
                // The result travels in chunks after its size, never as one frame.
                if let Ok(result) = &mut report.outcome {
                    let result = std::mem::take(result);
                    if result.len() as u64 > MAX_CLIENT_RESULT {
                        return Err(PeerError::Protocol("result too large to send".into()));
                    }
                    write_frame(send, &SubmitReply::Result { size: result.len() as u64 }).await?;
                    write_payload_bytes(send, result).await?;
                }
                return Ok(write_frame(send, &SubmitReply::Done(Box::new(report))).await?);
            }
            outcome = &mut receiving, if !received => {
                received = true;
                if let Err(why) = outcome {
                    tracing::warn!(job = %handle.id, "a file sent with the job stopped arriving: {why}");
                }
            }
            () = tokio::time::sleep_until(quiet_until.unwrap_or_else(tokio::time::Instant::now)), if quiet_until.is_some() => {
                quiet_until = None;
            }
            _ = notices.tick(), if watching => {
                let idle = progress.borrow().running == 0;
                let waiting = if idle { driver.executors_waiting() } else { None };
                if let Some(reason) = waiting.filter(|w| noticed.as_ref() != Some(w)) {
                    write_frame(send, &SubmitReply::Notice(reason.clone())).await?;
                    noticed = Some(reason);
                }
            }
            changed = progress.changed(), if watching && quiet_until.is_none() => {
                if changed.is_ok() {
                    let now = *progress.borrow_and_update();
                    write_frame(send, &SubmitReply::Progress(now)).await?;
                    quiet_until = Some(tokio::time::Instant::now() + PROGRESS_EVERY);
                } else {
                    // The job's record is gone: only its report is still to come.
                    watching = false;
                }
            }
        }
    }
}

/// The most files one submission may send: each is a file on the driver's disk.
const MAX_UPLOADED_FILES: usize = 1024;

/// What a submission's files are given before any of their bytes come.
struct Room {
    /// The job's inputs, each file sent with it as a `flint://` URL.
    urls: Vec<String>,
    /// Each as the submitter named it (a program picks its inputs by these).
    names: Vec<String>,
    /// The folder they are kept in, and what it holds of the driver's budget.
    uploads: Option<Arc<Uploads>>,
    incoming: Vec<Incoming>,
}

/// A file sent with a job, made at its full size, to be written as it comes.
struct Incoming {
    name: String,
    file: std::fs::File,
    size: u64,
    arrival: Arc<watch::Sender<Arrival>>,
}

/// Room for a submission's files (they follow its component): within the driver's
/// budgets, in a folder of their own, private to the driver and removed when the job
/// ends, each made at its announced size so the job is planned before its bytes come.
/// Each becomes a `flint://` input; what the client may be told is the error.
fn make_room(driver: &Driver, inputs: Vec<SubmitInput>) -> Result<Room, String> {
    let limit = driver.settings().driver_max_upload_size;
    let files = inputs.iter().filter(|i| matches!(i, SubmitInput::Upload { .. })).count();
    if files > MAX_UPLOADED_FILES {
        return Err(format!(
            "the job sends {files} files, over the {MAX_UPLOADED_FILES} a submission may; put them in one, or where executors can read them (s3://, flint:///…)"
        ));
    }
    let declared: u64 = inputs
        .iter()
        .map(|i| if let SubmitInput::Upload { size, .. } = i { *size } else { 0 })
        .fold(0, u64::saturating_add);
    if declared > limit {
        return Err(format!(
            "the job's files hold {declared} bytes, over flint.driver.maxUploadSize ({limit}); put them where executors can read them (s3://, flint:///…)"
        ));
    }
    if files == 0 {
        let urls: Vec<String> = inputs
            .into_iter()
            .filter_map(|i| if let SubmitInput::Url(u) = i { Some(u) } else { None })
            .collect();
        return Ok(Room { names: urls.clone(), urls, uploads: None, incoming: Vec::new() });
    }
    // Every running job's files together stay within the driver's budget for them.
    let cap = driver.settings().driver_max_uploads_held;
    let held = HeldBytes::reserve(driver.uploads_held(), declared, cap).map_err(|held| {
        format!(
            "the job's files hold {declared} bytes and the driver already keeps {held} bytes of running jobs' files, within flint.driver.maxUploadsHeld ({cap}); submit again when they end"
        )
    })?;
    let cannot = |e: std::io::Error| format!("the driver cannot keep files: {e}");
    let dir = tempfile::Builder::new().prefix("flint-upload-").tempdir().map_err(cannot)?;
    let (mut urls, mut incoming, mut arriving) = (Vec::with_capacity(inputs.len()), Vec::new(), Vec::new());
    let mut names = Vec::with_capacity(inputs.len());
    for (n, input) in inputs.into_iter().enumerate() {
        match input {
            SubmitInput::Url(url) => {
                names.push(url.clone());
                urls.push(url);
            }
            SubmitInput::Upload { name, size } => {
                // The client's name, kept readable but never a path of its own.
                let safe: String = name
                    .chars()
                    .take(100)
                    .map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' })
                    .collect();
                let path = dir.path().join(format!("{n}-{safe}"));
                let file = std::fs::File::create_new(&path).map_err(cannot)?;
                file.set_len(size).map_err(cannot)?;
                let (entry, arrival) = driver.data().arriving(path.to_string_lossy().into_owned());
                arriving.push(entry);
                urls.push(format!("flint://{}", path.display()));
                names.push(name.clone());
                incoming.push(Incoming { name, file, size, arrival: Arc::new(arrival) });
            }
        }
    }
    tracing::info!(folder = %dir.path().display(), files = incoming.len(), bytes = declared, "job files arriving");
    Ok(Room { urls, names, uploads: Some(Arc::new(Uploads::new(dir, held, arriving))), incoming })
}

/// A job's files, in the order announced: each written where the job reads it as its
/// pieces come, its readers told how far it came. A client silent for
/// `flint.network.timeout`, or one sending other than it announced, stops the upload.
async fn receive_files(
    driver: &Driver,
    files: Vec<Incoming>,
    recv: &mut quinn::RecvStream,
) -> Result<(), String> {
    let stall = driver.settings().network_timeout;
    let (started, count) = (std::time::Instant::now(), files.len());
    let bytes: u64 = files.iter().map(|f| f.size).sum();
    for Incoming { name, file, size, arrival } in files {
        let started = std::time::Instant::now();
        match receive_file(file, size, arrival.clone(), recv, stall).await {
            Ok(()) => driver.peer_metrics().transferred(Transfer::Upload, size, started.elapsed()),
            Err(why) => {
                arrival.send_replace(Arrival::Stopped(why.clone()));
                return Err(format!("{name}: {why}"));
            }
        }
    }
    if count > 0 {
        tracing::info!(files = count, bytes, elapsed = ?started.elapsed(), "job files received");
    }
    Ok(())
}

async fn receive_file(
    file: std::fs::File,
    size: u64,
    arrival: Arc<watch::Sender<Arrival>>,
    recv: &mut quinn::RecvStream,
    stall: Duration,
) -> Result<(), String> {
    // Written on a thread of its own while the next piece comes off the wire: each piece
    // as the bytes QUIC received, never copied on the way to the file.
    let (pieces, mut to_write) = mpsc::channel::<Vec<bytes::Bytes>>(2);
    let writer = tokio::task::spawn_blocking(move || {
        let (mut file, mut at) = (file, 0);
        while let Some(piece) = to_write.blocking_recv() {
            at += write_all_vectored(&mut file, &piece)?;
            arrival.send_replace(Arrival::Bytes(at));
        }
        std::io::Result::Ok(())
    });
    let read = async {
        let mut got = 0u64;
        loop {
            let mut piece = Vec::new();
            let more = tokio::time::timeout(stall, read_piece(recv, &mut piece))
                .await
                .map_err(|_| format!("nothing came for {}", humantime::format_duration(stall)))?
                .map_err(|e| e.to_string())?;
            if !more {
                break;
            }
            got += piece.iter().map(|b| b.len() as u64).sum::<u64>();
            if got > size {
                return Err(format!("more than the {size} bytes announced"));
            }
            if pieces.send(piece).await.is_err() {
                // The writer failed: it says why.
                break;
            }
        }
        if got < size { Err(format!("{got} bytes arrived, {size} announced")) } else { Ok(()) }
    }
    .await;
    drop(pieces);
    let written = writer.await.map_err(|e| e.to_string())?;
    written.map_err(|e| format!("the driver cannot write it: {e}"))?;
    read
}

/// Writes `parts` at the file's position, in as few calls as the kernel allows; the
/// bytes written. A piece from `read_piece` is a few dozen parts at most, but any number
/// is written whole.
fn write_all_vectored(file: &mut std::fs::File, parts: &[bytes::Bytes]) -> std::io::Result<u64> {
    use std::io::{IoSlice, Write};
    let mut slices: Vec<IoSlice> = parts.iter().map(|part| IoSlice::new(part)).collect();
    let mut left = &mut slices[..];
    let mut written = 0;
    while !left.is_empty() {
        match file.write_vectored(left) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                written += n as u64;
                IoSlice::advance_slices(&mut left, n);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(written)
}

fn request_name(request: &Request) -> &'static str {
    match request {
        Request::FetchComponent(_) => "FetchComponent",
        Request::Submit(_) => "Submit",
        Request::Status => "Status",
        Request::Cancel(_) => "Cancel",
        Request::FetchBlock { .. } => "FetchBlock",
        Request::ReadInput { .. } => "ReadInput",
    }
}

#[cfg(test)]
mod tests {
    /// More parts than one `writev` takes (`IOV_MAX` is 1,024 on Linux): all written,
    /// in order.
    #[test]
    fn a_piece_in_many_parts_is_written_whole_in_order() {
        let parts: Vec<bytes::Bytes> =
            (0..3000u32).map(|n| bytes::Bytes::from(format!("{n:06}|").into_bytes())).collect();
        let mut file = tempfile::tempfile().unwrap();
        assert_eq!(super::write_all_vectored(&mut file, &parts).unwrap(), 3000 * 7);
        let mut written = String::new();
        std::io::Seek::rewind(&mut file).unwrap();
        std::io::Read::read_to_string(&mut file, &mut written).unwrap();
        let expected: String = parts.iter().map(|p| std::str::from_utf8(p).unwrap()).collect();
        assert_eq!(written, expected);
    }
}
