//! An executor process's life with its driver over QUIC: connect with backoff, say
//! hello, fetch the application's configuration, register, serve launches, heartbeat on
//! a stream of its own, and leave cleanly when told to (SIGTERM: decommission).

use crate::core::{ComponentSource, ExecutorCore};
use flint_net::{
    ConnectError, DriverUrl, FrameError, Secret, connect, hello, read_frame, read_payload, write_frame,
    write_payload,
};
use flint_proto::wire::{
    AppConfig, BlockReply, DriverMessage, ExecutorMessage, Heartbeat, HelloReply, Registration, Rejection,
    Request, Role,
};
use flint_proto::{
    Conf, Digest, JobDescriptor, JobId, Settings, StatusUpdate, TaskFailure, TaskLaunch, TaskState,
};
use flint_runtime::{Runtime, RuntimeConfig};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tracing::Instrument;

/// Keys that configure the executor's own start-up: its local value wins over the
/// driver's, as with Spark's executor start-up settings.
const STARTUP_KEYS: &[&str] = &["flint.executor.cores", "flint.executor.memory", "flint.network.idleTimeout"];

/// Outputs up to this size ride in the status report; larger ones stay here as blocks
/// the driver fetches on a stream of their own.
pub const INLINE_OUTPUT: usize = 64 << 10;

/// Reports are sent together up to about this many bytes per frame.
const REPORT_BATCH_BYTES: usize = 1 << 20;

/// How an executor was asked to run.
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    pub driver_url: DriverUrl,
    pub secret: Secret,
    pub app_id: String,
    pub executor_id: Option<String>,
    pub pod_name: Option<String>,
    pub hostname: String,
    pub resource_profile_id: u32,
    /// Where compiled components are kept between restarts.
    pub cache_dir: Option<PathBuf>,
    /// Reported with the registration (the bind address, say).
    pub attributes: BTreeMap<String, String>,
    /// Local configuration: cores, memory and anything else given on the command line.
    pub conf: Conf,
    /// How long to keep trying to reach the driver at start-up.
    pub connect_timeout: Duration,
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
    mut decommission: watch::Receiver<bool>,
) -> Result<String, ExecutorExit> {
    let started = Instant::now();
    let url = &options.driver_url;
    let local = Settings::from_conf(&options.conf).map_err(|e| ExecutorExit::Config(e.to_string()))?;
    let (_endpoint, connection) =
        connect(url, options.connect_timeout, local.network_idle_timeout).await.map_err(|e| match e {
            ConnectError::FingerprintMismatch { .. } => ExecutorExit::FingerprintMismatch(e.to_string()),
            ConnectError::Unreachable(last) => {
                ExecutorExit::Unreachable { url: url.to_string(), after: started.elapsed(), last }
            }
        })?;
    let (reply, mut send, mut recv) = hello(
        &connection,
        &options.secret,
        Role::Executor,
        &options.app_id,
        options.executor_id.clone(),
        options.pod_name.clone(),
    )
    .await?;
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
        tracing::info!(properties = app.properties.len(), tokens = app.tokens.len(), "app config received");
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
        let core = Arc::new(ExecutorCore::new(id.clone(), Arc::new(runtime), source, INLINE_OUTPUT));
        core.set_tokens(app.tokens.clone());
        let registration = Registration {
            host: options.hostname.clone(),
            cores: settings.executor_cores,
            memory: settings.executor_memory,
            slots: settings.slots(),
            pid: std::process::id(),
            attributes: options.attributes.clone(),
            log_urls: BTreeMap::new(),
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
        serve(core, &connection, send, recv, settings.heartbeat_interval, &mut decommission).await?;
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

/// Fetches components from the driver on a stream per request.
struct RemoteSource {
    connection: quinn::Connection,
    handle: tokio::runtime::Handle,
}

impl ComponentSource for RemoteSource {
    fn fetch(&self, digest: &Digest) -> Result<Vec<u8>, String> {
        // Called from a task's blocking thread, never from the async runtime itself.
        self.handle.block_on(async {
            let (mut send, mut recv) = self.connection.open_bi().await.map_err(|e| e.to_string())?;
            write_frame(&mut send, &Request::FetchComponent(*digest)).await.map_err(|e| e.to_string())?;
            let _ = send.finish();
            read_payload(&mut recv, 256 << 20).await.map_err(|e| e.to_string())
        })
    }
}

async fn serve(
    core: Arc<ExecutorCore>,
    connection: &quinn::Connection,
    mut send: quinn::SendStream,
    recv: quinn::RecvStream,
    heartbeat_interval: Duration,
    decommission: &mut watch::Receiver<bool>,
) -> Result<(), ExecutorExit> {
    let tasks_done = Arc::new(AtomicU64::new(0));
    let (reports, mut report_rx) = mpsc::unbounded_channel::<StatusUpdate>();

    // Heartbeats on their own stream, so a busy control stream cannot starve them.
    let heartbeats = {
        let (connection, core, done) = (connection.clone(), core.clone(), tasks_done.clone());
        tokio::spawn(
            async move {
                let Ok(mut stream) = connection.open_uni().await else { return };
                let mut tick = tokio::time::interval(heartbeat_interval);
                loop {
                    tick.tick().await;
                    let beat = Heartbeat {
                        running: core.running() as u32,
                        tasks_done: done.load(Ordering::Relaxed),
                        rss_bytes: resident_memory(),
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

    // Frames are read by a task of their own: a read cut short by `select!` would lose
    // half a frame.
    let (messages, mut message_rx) = mpsc::channel::<Result<DriverMessage, String>>(64);
    let mut recv = recv;
    let reader = tokio::spawn(async move {
        loop {
            let next = match read_frame::<DriverMessage>(&mut recv).await {
                Ok(Some(message)) => Ok(message),
                Ok(None) => Err("the driver closed the connection".to_owned()),
                Err(e) => Err(e.to_string()),
            };
            let end = next.is_err();
            if messages.send(next).await.is_err() || end {
                return;
            }
        }
    });

    let mut jobs: HashMap<JobId, Arc<JobDescriptor>> = HashMap::new();
    let mut running = 0usize;
    let mut draining = false;
    let result = loop {
        tokio::select! {
            message = message_rx.recv() => match message.unwrap_or_else(|| Err("reader stopped".into())) {
                Ok(DriverMessage::Job(job)) => {
                    jobs.insert(job.job, Arc::new(job));
                }
                Ok(DriverMessage::Launch(batch)) => {
                    for launch in batch {
                        let Some(job) = jobs.get(&launch.attempt.job).cloned() else {
                            tracing::warn!(attempt = %launch.attempt, "launch for an unknown job");
                            continue;
                        };
                        running += 1;
                        if draining {
                            // Sent before the driver heard of the decommission: hand it back.
                            let failure = TaskFailure::ExecutorLost {
                                executor: core.id().to_owned(),
                                reason: "executor decommissioning".into(),
                            };
                            let _ = reports.send(StatusUpdate {
                                executor: core.id().to_owned(),
                                attempt: launch.attempt,
                                state: TaskState::Failed(failure),
                                log: String::new(),
                                elapsed: Duration::ZERO,
                            });
                            continue;
                        }
                        let launch = TaskLaunch { attempt: launch.attempt, job, partition: launch.partition };
                        let reports = reports.clone();
                        core.launch(launch, move |update| {
                            let _ = reports.send(update);
                        });
                    }
                }
                Ok(DriverMessage::Kill(attempt)) => core.kill(&attempt),
                Ok(DriverMessage::JobEnded(job)) => {
                    jobs.remove(&job);
                    core.job_ended(job);
                }
                Ok(DriverMessage::Tokens(tokens)) => core.set_tokens(tokens),
                Ok(DriverMessage::Decommission) => {
                    if !draining {
                        draining = true;
                        write_frame(&mut send, &ExecutorMessage::Decommissioning).await?;
                    }
                    if running == 0 {
                        break Ok(());
                    }
                }
                Ok(other) => tracing::warn!(?other, "unexpected message from the driver"),
                Err(e) => break Err(ExecutorExit::DriverLost(e)),
            },
            Some(first) = report_rx.recv() => {
                // Send the reports ready now together, a frame of about a megabyte at most
                // (each report is bounded: inline outputs, log tails, failure messages).
                let mut bytes = report_size(&first);
                let mut batch = vec![first];
                while bytes < REPORT_BATCH_BYTES {
                    let Ok(more) = report_rx.try_recv() else { break };
                    bytes += report_size(&more);
                    batch.push(more);
                }
                running -= batch.len();
                tasks_done.fetch_add(batch.len() as u64, Ordering::Relaxed);
                write_frame(&mut send, &ExecutorMessage::Status(batch)).await?;
                if draining && running == 0 {
                    break Ok(());
                }
            }
            changed = decommission.changed(), if !draining => {
                if changed.is_err() || *decommission.borrow() {
                    tracing::info!(running, "decommissioning: finishing running tasks");
                    draining = true;
                    write_frame(&mut send, &ExecutorMessage::Decommissioning).await?;
                    if running == 0 {
                        break Ok(());
                    }
                }
            }
        }
    };
    reader.abort();
    heartbeats.abort();
    blocks.abort();
    if result.is_ok() {
        let _ = send.finish();
        // Give the last reports time to reach the driver before the connection closes.
        let _ = tokio::time::timeout(Duration::from_secs(2), send.stopped()).await;
    }
    result
}

fn report_size(update: &StatusUpdate) -> usize {
    let output = match &update.state {
        TaskState::Succeeded(flint_proto::TaskOutput::Inline(bytes)) => bytes.len(),
        TaskState::Succeeded(_) => 64,
        TaskState::Failed(failure) => failure.to_string().len(),
    };
    output + update.log.len() + 128
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
                            write_payload(&mut send, &bytes).await?;
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
