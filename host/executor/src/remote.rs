//! An executor process's life with its driver over QUIC: connect with backoff, say
//! hello, fetch the application's configuration, register, serve launches, heartbeat on
//! a stream of its own, and leave cleanly when told to (SIGTERM: decommission).

use crate::core::ExecutorCore;
use crate::inputs::InputReader;
use crate::lifecycle::{self, Ended, Outbound};
use crate::peers::{PeerFetch, serve_peers};
use crate::shuffle::files::{ShuffleFiles, local_dirs};
use crate::source::{DriverSource, SourceError};
use flint_data::InputError;
use flint_net::{
    ConnectError, DriverUrl, FrameError, Identity, Secret, Traffic, WhenRefused, connect_as, hello,
    read_frame, read_payload, read_payload_into, server_endpoint, write_frame, write_payload_bytes,
};
use flint_proto::wire::{
    AppConfig, BlockReply, DataToken, DriverMessage, ExecutorMessage, Heartbeat, HelloReply, InputReply,
    Registration, Rejection, Request, Role,
};
use flint_proto::{
    Conf, Digest, ExecutorCommand, ExecutorId, JobDescriptor, JobId, Settings, ShuffleEndpoint, TaskLaunch,
    Token,
};
use flint_runtime::{Runtime, RuntimeConfig};
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tracing::Instrument;

/// Keys that configure the executor's own start-up, or limit what it may touch on the
/// machine it runs on: its local value wins over the driver's, as with Spark's executor
/// start-up settings. An operator's roots are never widened by the driver or a job.
const STARTUP_KEYS: &[&str] = &[
    "flint.input.roots",
    "flint.output.roots",
    "flint.executor.cores",
    "flint.executor.memory",
    "flint.network.idleTimeout",
    "flint.local.dir",
    "flint.shuffle.maxDiskSize",
    "flint.local.dir.minFree",
];

pub use crate::core::INLINE_OUTPUT;

/// How an executor was asked to run.
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    pub driver_url: DriverUrl,
    /// The application secret, or the executor key a worker handed over in its place:
    /// either way the executor proves the key ([`Secret::executor_key`]).
    pub secret: Secret,
    pub app_id: String,
    pub executor_id: Option<ExecutorId>,
    pub pod_name: Option<String>,
    pub hostname: String,
    pub resource_profile_id: u32,
    /// Where compiled components are kept between restarts.
    pub cache_dir: Option<PathBuf>,
    /// `--work-dir`: where shuffle files go unless `flint.local.dir` says otherwise.
    pub work_dir: Option<PathBuf>,
    /// Reported with the registration (the bind address, say).
    pub attributes: BTreeMap<String, String>,
    /// Local configuration: cores, memory and anything else given on the command line.
    pub conf: Conf,
    /// How long to keep trying to reach the driver at start-up.
    pub connect_timeout: Duration,
    /// This executor's certificate, for a driver that asks for one (mutual TLS).
    pub identity: Option<Arc<Identity>>,
    /// Applies the log level the driver gives (`flint.log.level`).
    pub set_log_level: Option<LogLevelHook>,
}

/// What applies a log level to the running process.
#[derive(Clone)]
pub struct LogLevelHook(pub Arc<dyn Fn(&str) + Send + Sync>);

impl std::fmt::Debug for LogLevelHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LogLevelHook")
    }
}

/// How an executor's life ended; each maps to a documented exit code.
#[derive(Debug, thiserror::Error)]
pub enum ExecutorExit {
    #[error("the driver rejected this executor: {0}")]
    Rejected(Rejection),
    #[error("could not reach the driver at {url} within {after:?}: {last}")]
    Unreachable { url: String, after: Duration, last: String },
    #[error("{0}")]
    FingerprintMismatch(String),
    #[error("lost the driver: {0}")]
    DriverLost(String),
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("the runtime could not start: {0}")]
    Runtime(String),
}

impl ExecutorExit {
    /// The process exit code, as documented in the README.
    pub fn code(&self) -> u8 {
        match self {
            ExecutorExit::Rejected(Rejection::DuplicateId(_)) => 10,
            ExecutorExit::Rejected(Rejection::NotAuthenticated) => 11,
            ExecutorExit::Rejected(Rejection::WrongApp { .. }) => 12,
            ExecutorExit::Rejected(Rejection::VersionMismatch { .. }) => 13,
            ExecutorExit::Rejected(_) => 14,
            ExecutorExit::Unreachable { .. } => 15,
            ExecutorExit::DriverLost(_) => 16,
            ExecutorExit::FingerprintMismatch(_) => 17,
            ExecutorExit::Config(_) => 3,
            ExecutorExit::Runtime(_) => 4,
        }
    }
}

impl From<FrameError> for ExecutorExit {
    fn from(e: FrameError) -> Self {
        ExecutorExit::DriverLost(e.to_string())
    }
}

impl From<quinn::ConnectionError> for ExecutorExit {
    fn from(e: quinn::ConnectionError) -> Self {
        ExecutorExit::DriverLost(e.to_string())
    }
}

/// Runs an executor until it is decommissioned (`Ok`) or must exit (`Err`).
/// `decommission` turns true on SIGTERM.
pub async fn run_executor(
    options: ExecutorOptions,
    decommission: watch::Receiver<bool>,
) -> Result<ExecutorId, ExecutorExit> {
    let started = Instant::now();
    let url = &options.driver_url;
    let local = Settings::from_conf(&options.conf).map_err(|e| ExecutorExit::Config(e.to_string()))?;
    // A connection lost before the hello is answered (a driver swamped by a fleet
    // starting at once, say) is tried again while `--connect-timeout` lasts, first after
    // the idle timeout: by then the driver has dropped what it reserved for the lost one.
    let mut delay = local.network_idle_timeout;
    let (_endpoint, connection, reply, mut send, mut recv) = loop {
        let within = options.connect_timeout.saturating_sub(started.elapsed());
        let (endpoint, connection) = connect_as(
            url,
            within,
            local.network_idle_timeout,
            options.identity.as_deref(),
            WhenRefused::Retry,
            Traffic::Bulk,
        )
        .await
        .map_err(|e| match e {
            ConnectError::FingerprintMismatch { .. } => ExecutorExit::FingerprintMismatch(e.to_string()),
            ConnectError::Unreachable(last) => {
                ExecutorExit::Unreachable { url: url.to_string(), after: started.elapsed(), last }
            }
            // Not given up on here (it retries), but said the same way if it were.
            ConnectError::Refused { .. } => ExecutorExit::Unreachable {
                url: url.to_string(),
                after: started.elapsed(),
                last: e.to_string(),
            },
        })?;
        let said = hello(
            &connection,
            &options.secret.executor_key(),
            Role::Executor,
            &options.app_id,
            options.executor_id.clone(),
            options.pod_name.clone(),
        )
        .await;
        match said {
            Ok((reply, send, recv)) => break (endpoint, connection, reply, send, recv),
            Err(e) if started.elapsed() + delay < options.connect_timeout => {
                tracing::warn!(error = %e, retry_in_ms = delay.as_millis() as u64, "hello failed; trying again");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(10));
            }
            Err(e) => return Err(e.into()),
        }
    };
    let id = match reply {
        HelloReply::Welcome { executor_id: Some(id) } => id,
        HelloReply::Rejected(r) => return Err(ExecutorExit::Rejected(r)),
        other => return Err(ExecutorExit::DriverLost(format!("unexpected hello reply {other:?}"))),
    };
    let span = tracing::info_span!("executor", executor_id = %id);
    async move {
        write_frame(
            &mut send,
            &ExecutorMessage::FetchConfig { resource_profile_id: options.resource_profile_id },
        )
        .await?;
        let app = match read_frame::<DriverMessage>(&mut recv).await? {
            Some(DriverMessage::AppConfig(app)) => app,
            Some(DriverMessage::Rejected(r)) => return Err(ExecutorExit::Rejected(r)),
            other => return Err(ExecutorExit::DriverLost(format!("expected the app config, got {other:?}"))),
        };
        if let Some(LogLevelHook(set)) = &options.set_log_level {
            set(&app.log_level);
        }
        tracing::info!(properties = app.properties.len(), tokens = app.tokens.len(), level = %app.log_level, "app config received");
        let conf = merge_conf(&options.conf, &app);
        let settings = Settings::from_conf(&conf).map_err(|e| ExecutorExit::Config(e.to_string()))?;
        let runtime = Runtime::new(RuntimeConfig {
            slots: settings.slots(),
            instance_memory: settings.instance_memory(),
            cache_dir: options.cache_dir.clone(),
            max_log_size: settings.task_max_log_size as usize,
            pooling: true,
            component_cache: settings.component_cache_size,
        })
        .map_err(|e| ExecutorExit::Runtime(e.to_string()))?;
        let source = Arc::new(RemoteSource {
            connection: connection.clone(),
            handle: tokio::runtime::Handle::current(),
        });
        let inputs = InputReader::new(&settings, tokio::runtime::Handle::current());
        let shuffle = ShuffleFiles::with_settings(&local_dirs(&settings, options.work_dir.as_deref()), &settings)
            .map_err(|e| ExecutorExit::Config(format!("flint.local.dir: {e}")))?;
        let core = Arc::new(
            ExecutorCore::new(id.clone(), Arc::new(runtime), source, inputs, (INLINE_OUTPUT, settings.block_memory()))
                .with_shuffle(shuffle),
        );
        core.set_tokens(app.tokens.clone());
        let shuffle = serve_map_outputs(&options, &connection, &settings, &core)?;
        let registration = Registration {
            host: options.hostname.clone(),
            cores: settings.executor_cores,
            memory: settings.executor_memory,
            slots: settings.slots(),
            pid: std::process::id(),
            attributes: options.attributes.clone(),
            log_urls: BTreeMap::new(),
            shuffle: Some(shuffle),
        };
        write_frame(&mut send, &ExecutorMessage::Register(registration)).await?;
        match read_frame::<DriverMessage>(&mut recv).await? {
            Some(DriverMessage::Registered { .. }) => {}
            Some(DriverMessage::Rejected(r)) => return Err(ExecutorExit::Rejected(r)),
            other => return Err(ExecutorExit::DriverLost(format!("expected registration, got {other:?}"))),
        }
        tracing::info!(
            slots = settings.slots(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "registered"
        );
        let files = core.shuffle_files().cloned();
        let served = serve(core, &connection, (send, recv), &settings, decommission).await;
        // Whatever the end, this executor's map outputs go with it.
        if let Some(files) = files {
            files.remove_all();
        }
        served?;
        connection.close(0u32.into(), b"decommissioned");
        Ok(id)
    }
    .instrument(span)
    .await
}

/// The driver's properties, except start-up keys the executor was given itself.
fn merge_conf(local: &Conf, app: &AppConfig) -> Conf {
    let mut conf = app.properties.clone();
    for key in STARTUP_KEYS {
        if let Some(value) = local.get(*key) {
            conf.insert((*key).to_owned(), value.clone());
        }
    }
    for (key, value) in local {
        conf.entry(key.clone()).or_insert_with(|| value.clone());
    }
    conf
}

/// Starts serving this executor's map outputs to its peers (and reading theirs) on an
/// endpoint of its own, with a certificate made now: `--bind-address` (an address, or
/// an address and port), else the address this executor reaches the driver from. Says
/// where peers find it.
fn serve_map_outputs(
    options: &ExecutorOptions,
    driver: &quinn::Connection,
    settings: &Settings,
    core: &Arc<ExecutorCore>,
) -> Result<ShuffleEndpoint, ExecutorExit> {
    let bind_error = |e: &dyn std::fmt::Display| ExecutorExit::Config(format!("--bind-address: {e}"));
    let bind: SocketAddr = match options.attributes.get("bind_address") {
        Some(text) => match text.parse::<SocketAddr>() {
            Ok(addr) => addr,
            Err(_) => SocketAddr::new(text.parse::<IpAddr>().map_err(|e| bind_error(&e))?, 0),
        },
        None => SocketAddr::new(toward(driver.remote_address()), 0),
    };
    let identity = Identity::generate(vec!["flint-executor".into()]).map_err(|e| bind_error(&e))?;
    let endpoint =
        server_endpoint(bind, &identity, settings.network_idle_timeout, None).map_err(|e| bind_error(&e))?;
    let local = endpoint.local_addr().map_err(|e| bind_error(&e))?;
    // Peers reach an unspecified bind through the address this side reaches the driver from.
    let ip = match local.ip() {
        ip if ip.is_unspecified() => toward(driver.remote_address()),
        ip => ip,
    };
    let address = SocketAddr::new(ip, local.port()).to_string();
    let fetch = PeerFetch::new(
        endpoint.clone(),
        tokio::runtime::Handle::current(),
        options.secret.executor_key(),
        options.app_id.clone(),
        (settings.network_idle_timeout, settings.network_timeout),
    );
    core.set_shuffle_fetch(Arc::new(fetch), settings.reducer_max_size_in_flight);
    // Peers prove the executor key, which every executor of the application holds
    // (made from the secret, or handed over by a worker in its place).
    let key = options.secret.executor_key();
    tokio::spawn(serve_peers(endpoint, Arc::downgrade(core), key, options.app_id.clone()));
    let fingerprint = identity.fingerprint();
    let hex: String = fingerprint.iter().map(|b| format!("{b:02x}")).collect();
    tracing::info!(%address, fingerprint = %hex, "serving map outputs to peers");
    Ok(ShuffleEndpoint { address, fingerprint })
}

/// The local address this host sends from to reach `peer` (the routing table's answer,
/// asked by connecting a UDP socket, which sends nothing); unspecified if there is none.
fn toward(peer: SocketAddr) -> IpAddr {
    let unspecified: IpAddr =
        if peer.is_ipv6() { Ipv6Addr::UNSPECIFIED.into() } else { Ipv4Addr::UNSPECIFIED.into() };
    std::net::UdpSocket::bind(SocketAddr::new(unspecified, 0))
        .and_then(|socket| socket.connect(peer).and_then(|()| socket.local_addr()))
        .map_or(unspecified, |local| local.ip())
}

/// Fetches components from the driver on a stream per request.
struct RemoteSource {
    connection: quinn::Connection,
    handle: tokio::runtime::Handle,
}

impl DriverSource for RemoteSource {
    fn fetch(&self, digest: &Digest) -> Result<Vec<u8>, SourceError> {
        let lost = |e: &dyn std::fmt::Display| SourceError::Driver(e.to_string());
        // Called from a slot thread, never from the async runtime itself.
        self.handle.block_on(async {
            let (mut send, mut recv) = self.connection.open_bi().await.map_err(|e| lost(&e))?;
            write_frame(&mut send, &Request::FetchComponent(*digest)).await.map_err(|e| lost(&e))?;
            let _ = send.finish();
            read_payload(&mut recv, 256 << 20).await.map_err(|e| lost(&e))
        })
    }

    fn read_input(
        &self,
        token: Option<&Token>,
        job: JobId,
        path: &str,
        start: u64,
        len: u64,
        deadline: Instant,
    ) -> Result<Vec<u8>, InputError> {
        let lost = |e: &dyn std::fmt::Display| InputError::Driver(e.to_string());
        let token = token.ok_or(InputError::NoDataToken(job))?;
        let request =
            Request::ReadInput { token: DataToken(token.secret.clone()), path: path.to_owned(), start, len };
        let connection = self.connection.clone();
        let read = async move {
            let (mut send, mut recv) = connection.open_bi().await.map_err(|e| lost(&e))?;
            write_frame(&mut send, &request).await.map_err(|e| lost(&e))?;
            let _ = send.finish();
            match read_frame::<InputReply>(&mut recv).await.map_err(|e| lost(&e))? {
                Some(InputReply::Data { size }) if size == len => {
                    // Into a block buffer its split hands back: pages already mapped.
                    let mut block = flint_data::lines::BLOCKS.take();
                    block.clear();
                    read_payload_into(&mut recv, len, &mut block).await.map_err(|e| lost(&e))?;
                    Ok(block)
                }
                Some(InputReply::Data { size }) => Err(InputError::Changed { offset: start, len, got: size }),
                Some(InputReply::Refused(refusal)) => Err(InputError::Refused(refusal)),
                None => Err(lost(&"the driver closed the stream")),
            }
        };
        // The read runs on the runtime's thread, which takes the packets off the wire:
        // this slot thread is woken once, when the bytes are all in, not at each packet.
        let read = self.handle.spawn(async move {
            tokio::time::timeout_at(deadline.into(), read).await.unwrap_or(Err(InputError::Deadline))
        });
        self.handle.block_on(read).unwrap_or_else(|e| Err(InputError::Driver(e.to_string())))
    }
}

/// The remote side of the shared lifecycle (`lifecycle::serve`): frames from the driver
/// become commands, reports and the start of a drain become frames; heartbeats and
/// block fetches on streams of their own.
async fn serve(
    core: Arc<ExecutorCore>,
    connection: &quinn::Connection,
    (mut send, mut recv): (quinn::SendStream, quinn::RecvStream),
    settings: &flint_proto::Settings,
    decommission: watch::Receiver<bool>,
) -> Result<(), ExecutorExit> {
    let heartbeat_interval = settings.heartbeat_interval;
    // A little past the driver's own bound, whose word it waits for.
    let leave_within = settings.decommission_timeout + Duration::from_secs(5);
    let tasks_done = Arc::new(AtomicU64::new(0));

    // Heartbeats on their own stream, so a busy control stream cannot starve them.
    let heartbeats = {
        let (connection, core, done) = (connection.clone(), core.clone(), tasks_done.clone());
        tokio::spawn(
            async move {
                let Ok(mut stream) = connection.open_uni().await else { return };
                let mut tick = tokio::time::interval(heartbeat_interval);
                loop {
                    tick.tick().await;
                    let stats = core.runtime().stats();
                    let beat = Heartbeat {
                        running: core.running() as u32,
                        tasks_done: done.load(Ordering::Relaxed),
                        rss_bytes: resident_memory(),
                        instance_memory_high_water: stats.instance_memory_high_water.load(Ordering::Relaxed),
                        component_cache_hits: stats.cache_hits.load(Ordering::Relaxed),
                        component_cache_misses: stats.cache_misses.load(Ordering::Relaxed),
                        instances_started: stats.instances_started.load(Ordering::Relaxed),
                        progress: core.progress(),
                    };
                    if write_frame(&mut stream, &beat).await.is_err() {
                        return;
                    }
                }
            }
            .in_current_span(),
        )
    };

    // The driver fetches result blocks on streams it opens.
    let blocks = tokio::spawn(serve_blocks(core.clone(), connection.clone()).in_current_span());

    // Frames in, read by a task of their own (a read cut short by `select!` would lose
    // half a frame); it ends with why the driver is gone. The lifecycle takes each
    // command as it comes (launches past `MAX_HELD_PER_SLOT` a slot are handed straight
    // back), so this channel holds only what one read ahead of it, at QUIC's pace.
    let (commands, command_rx) = mpsc::unbounded_channel();
    let reader = {
        let core = core.clone();
        tokio::spawn(
            async move {
                let mut jobs: HashMap<JobId, Arc<JobDescriptor>> = HashMap::new();
                loop {
                    let command = match read_frame::<DriverMessage>(&mut recv).await {
                        Ok(Some(DriverMessage::Job(job))) => {
                            jobs.insert(job.job, Arc::new(job));
                            continue;
                        }
                        Ok(Some(DriverMessage::Launch(batch))) => {
                            let launches = batch
                                .into_iter()
                                .filter_map(|launch| {
                                    let Some(job) = jobs.get(&launch.attempt.job).cloned() else {
                                        tracing::warn!(attempt = %launch.attempt, "launch for an unknown job");
                                        return None;
                                    };
                                    Some(TaskLaunch { attempt: launch.attempt, job, partition: launch.partition })
                                })
                                .collect();
                            ExecutorCommand::Launch(launches)
                        }
                        Ok(Some(DriverMessage::Kill(attempt))) => ExecutorCommand::Kill(attempt),
                        Ok(Some(DriverMessage::JobEnded(job))) => {
                            jobs.remove(&job);
                            ExecutorCommand::JobEnded(job)
                        }
                        Ok(Some(DriverMessage::Decommission)) => ExecutorCommand::Decommission,
                        Ok(Some(DriverMessage::Collect(job))) => ExecutorCommand::Collect(job),
                        Ok(Some(DriverMessage::Adopt(adoption))) => ExecutorCommand::Adopt(adoption),
                        Ok(Some(DriverMessage::Leave)) => ExecutorCommand::Leave,
                        Ok(Some(DriverMessage::Tokens(tokens))) => {
                            core.set_tokens(tokens);
                            continue;
                        }
                        Ok(Some(other)) => {
                            tracing::warn!(?other, "unexpected message from the driver");
                            continue;
                        }
                        Ok(None) => return "the driver closed the connection".to_owned(),
                        Err(e) => return e.to_string(),
                    };
                    if commands.send(command).is_err() {
                        return "stopped".to_owned();
                    }
                }
            }
            .in_current_span(),
        )
    };

    // Reports and the start of a drain out, in the order the lifecycle says them.
    let (outbound, mut outbound_rx) = mpsc::channel::<Outbound>(16);
    let writer = {
        let done = tasks_done.clone();
        tokio::spawn(
            async move {
                while let Some(message) = outbound_rx.recv().await {
                    let message = match message {
                        Outbound::Reports(batch) => {
                            done.fetch_add(batch.len() as u64, Ordering::Relaxed);
                            ExecutorMessage::Status(batch)
                        }
                        Outbound::Partial(partial) => ExecutorMessage::Partial(partial),
                        Outbound::Draining => ExecutorMessage::Decommissioning,
                        Outbound::Adopted(adopted) => ExecutorMessage::Adopted(adopted),
                    };
                    write_frame(&mut send, &message).await?;
                }
                Ok::<_, FrameError>(send)
            }
            .in_current_span(),
        )
    };

    let ended = lifecycle::serve(core, command_rx, outbound, decommission, leave_within).await;
    heartbeats.abort();
    blocks.abort();
    // The lifecycle has dropped its sender: the writer ends once the last frame is out.
    let written = writer.await;
    match ended {
        Ended::Drained => {
            reader.abort();
            let mut send = match written {
                Ok(Ok(send)) => send,
                Ok(Err(e)) => return Err(e.into()),
                Err(e) => return Err(ExecutorExit::DriverLost(e.to_string())),
            };
            let _ = send.finish();
            // Give the last reports time to reach the driver before the connection closes.
            let _ = tokio::time::timeout(Duration::from_secs(2), send.stopped()).await;
            Ok(())
        }
        Ended::Closed => {
            let reason = reader.await.unwrap_or_else(|e| e.to_string());
            match connection.close_reason() {
                // Its driver stopped on purpose: so does it, cleanly.
                Some(quinn::ConnectionError::ApplicationClosed(close))
                    if close.error_code == flint_net::DRIVER_STOPPED.into() =>
                {
                    tracing::info!("the driver stopped");
                    Ok(())
                }
                _ => Err(ExecutorExit::DriverLost(reason)),
            }
        }
    }
}

/// Serves the blocks this executor holds to the driver, a stream per request.
async fn serve_blocks(core: Arc<ExecutorCore>, connection: quinn::Connection) {
    while let Ok((mut send, mut recv)) = connection.accept_bi().await {
        let core = core.clone();
        tokio::spawn(
            async move {
                let result: Result<(), FrameError> = async {
                    let Some(Request::FetchBlock { id, release }) = read_frame::<Request>(&mut recv).await?
                    else {
                        return Ok(());
                    };
                    let block = if release { core.blocks().remove(&id) } else { core.blocks().get(&id) };
                    match block {
                        Some(bytes) => {
                            write_frame(&mut send, &BlockReply::Found { size: bytes.len() as u64 }).await?;
                            write_payload_bytes(&mut send, flint_net::shared_bytes(bytes)).await?;
                        }
                        None => write_frame(&mut send, &BlockReply::Missing).await?,
                    }
                    Ok(())
                }
                .await;
                if let Err(e) = result {
                    tracing::warn!(error = %e, "block request failed");
                }
                let _ = send.finish();
            }
            .in_current_span(),
        );
    }
}

/// This process's resident memory, from /proc (0 where it cannot be read).
pub fn resident_memory() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .map_or(0, |pages| pages * 4096)
}
