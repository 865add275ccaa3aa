//! The embedded cluster behind `flint run`: a driver and in-process executors, each
//! with its own runtime, joined by channels instead of QUIC.

use flint_core::ExecutorInfo;
use flint_data::InputError;
use flint_driver::link::{Blocks, ChannelLink, Fetch};
use flint_driver::{Driver, DriverConfig};
use flint_executor::lifecycle::{self, Outbound};
use flint_executor::shuffle::{FetchError, Refusal, ShuffleFetch, Slice, local_dirs};
use flint_executor::{DriverSource, ExecutorCore, INLINE_OUTPUT, InputReader, ShuffleFiles, SourceError};
use flint_proto::{
    BlockRef, Conf, ConfError, Digest, ExecutorCommand, Incarnation, JobId, MapSource, Settings, Token,
};
use flint_runtime::{Runtime, RuntimeConfig, RuntimeError};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::Instrument;

#[derive(Debug, Clone)]
pub struct LocalConfig {
    pub app_id: String,
    pub executors: u32,
    /// Platform configuration: executor cores and memory, task limits.
    pub conf: Conf,
    /// Where compiled components are kept between runs.
    pub cache_dir: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error(transparent)]
    Conf(#[from] ConfError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("the driver refused an in-process executor: {0}")]
    Rejected(flint_proto::wire::Rejection),
    #[error("cannot write the event log under {dir}: {error}")]
    EventLog { dir: String, error: std::io::Error },
    #[error("cannot make the shuffle folders (flint.local.dir): {0}")]
    Shuffle(std::io::Error),
}

/// The in-process executors, as reduce tasks reach their peers: each serves its map
/// outputs as its server would, the job's secret checked.
struct InProcessPeers(Vec<std::sync::Weak<ExecutorCore>>);

impl ShuffleFetch for InProcessPeers {
    fn fetch(
        &self,
        job: JobId,
        token: &[u8; 32],
        partition: u32,
        source: &MapSource,
        _deadline: Instant,
        each: &mut dyn FnMut(Slice) -> Result<(), FetchError>,
    ) -> Result<(), FetchError> {
        let maps: Vec<u32> = source.maps.iter().map(|(m, _)| *m).collect();
        let Some(peer) = self.0.iter().filter_map(|c| c.upgrade()).find(|c| *c.id() == source.executor)
        else {
            return Err(FetchError { maps, reason: format!("no executor {}", source.executor) });
        };
        let slices = peer.serve_slices(job, token, partition, &maps).map_err(|e| match e {
            Refusal::Unreadable(e) => e,
            other => FetchError { maps, reason: other.to_string() },
        })?;
        for located in slices {
            let slice = located.read().map_err(|e| FetchError {
                maps: vec![located.map],
                reason: format!("map {}'s output: {e}", located.map),
            })?;
            each(slice)?;
        }
        Ok(())
    }

    /// In-process executors leave as they drain (their outputs go with the process):
    /// none is ever a holder to copy from.
    fn fetch_output(
        &self,
        adoption: &flint_proto::Adoption,
        _: u32,
        _: (u64, usize),
        _: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> Result<Vec<u8>, String> {
        Err(format!("{} is in-process: it hands no map output over", adoption.from.executor))
    }
}

/// What an in-process executor asks its driver for, asked of the driver itself.
struct InProcessSource(Driver);

impl DriverSource for InProcessSource {
    fn fetch(&self, digest: &Digest) -> Result<Vec<u8>, SourceError> {
        self.0.component(digest).map(|b| b.as_ref().clone()).ok_or(SourceError::NoSuchComponent)
    }

    /// In-process executors read the driver's files directly, with the same check of
    /// which job reads which file; they need no token.
    fn read_input(
        &self,
        _: Option<&Token>,
        job: JobId,
        path: &str,
        start: u64,
        len: u64,
        _: Instant,
    ) -> Result<Vec<u8>, InputError> {
        self.0.data().read_for(job, path, start, len).map_err(InputError::Refused)
    }
}

/// An in-process executor's blocks, read straight from its store.
struct LocalBlocks(Arc<ExecutorCore>);

impl Blocks for LocalBlocks {
    fn fetch(&self, block: BlockRef) -> Fetch {
        let found = self.0.blocks().remove(&block.id);
        Box::pin(async move {
            found
                .map(|bytes| Arc::try_unwrap(bytes).unwrap_or_else(|shared| shared.as_ref().clone()))
                .ok_or_else(|| "no such block".to_owned())
        })
    }

    /// The decommission the link sent stops the serve loop: nothing more to end.
    fn close(&self, _reason: &str) {}
}

/// The in-process side of the shared lifecycle: reports and the start of a drain go
/// straight to the driver. An in-process executor is never decommissioned by a signal.
async fn serve_in_process(
    driver: Driver,
    core: Arc<ExecutorCore>,
    incarnation: Incarnation,
    commands: mpsc::UnboundedReceiver<ExecutorCommand>,
) {
    let (outbound, mut outbound_rx) = mpsc::channel(16);
    let (_never, decommission) = tokio::sync::watch::channel(false);
    let id = core.id().to_owned();
    let forward = async move {
        while let Some(message) = outbound_rx.recv().await {
            match message {
                Outbound::Reports(batch) => batch.into_iter().for_each(|u| driver.status(incarnation, u)),
                Outbound::Partial(partial) => driver.local_partial(id.clone(), incarnation, partial),
                Outbound::Draining => driver.decommissioning(id.clone(), incarnation).await,
                Outbound::Adopted(adopted) => driver.adopted(id.clone(), incarnation, adopted).await,
            }
        }
    };
    // In-process executors leave as they drain: their outputs go with the process.
    tokio::join!(
        lifecycle::serve(core, commands, outbound, decommission, std::time::Duration::ZERO),
        forward
    );
}

pub struct LocalCluster {
    pub driver: Driver,
    executors: Vec<JoinHandle<()>>,
    cores: Vec<Arc<ExecutorCore>>,
}

impl LocalCluster {
    /// Starts the driver and its executors on the current tokio runtime.
    pub async fn start(config: LocalConfig) -> Result<LocalCluster, LocalError> {
        let settings = Settings::from_conf(&config.conf)?;
        let runtime_config = |slots, instance_memory| RuntimeConfig {
            slots,
            instance_memory,
            cache_dir: config.cache_dir.clone(),
            max_log_size: settings.task_max_log_size as usize,
            pooling: true,
            component_cache: settings.component_cache_size,
        };
        let driver_runtime = Arc::new(flint_driver::merge_runtime(&settings, config.cache_dir.clone())?);
        let event_log = flint_driver::eventlog::EventLogWriter::from_settings(&settings, &config.app_id)
            .map_err(|(dir, error)| LocalError::EventLog { dir, error })?;
        let driver = Driver::start(DriverConfig {
            app_id: config.app_id.clone(),
            conf: config.conf.clone(),
            runtime: driver_runtime,
            event_log,
        });
        let (mut executors, mut cores) = (Vec::new(), Vec::new());
        for n in 1..=config.executors {
            let (id, incarnation) = driver
                .reserve_executor_id(Some(format!("exec-{n}").into()), None)
                .await
                .map_err(LocalError::Rejected)?;
            let runtime =
                Arc::new(Runtime::new(runtime_config(settings.slots(), settings.instance_memory()))?);
            // Large outputs wait as blocks here too, until the driver is ready for them.
            let inputs = InputReader::new(&settings, tokio::runtime::Handle::current());
            let source = Arc::new(InProcessSource(driver.clone()));
            let shuffle = ShuffleFiles::with_settings(&local_dirs(&settings, None), &settings)
                .map_err(LocalError::Shuffle)?;
            let core = Arc::new(
                ExecutorCore::new(
                    id.clone(),
                    runtime,
                    source,
                    inputs,
                    (INLINE_OUTPUT, settings.block_memory()),
                )
                .with_shuffle(shuffle),
            );
            let (commands, rx) = mpsc::unbounded_channel();
            cores.push(core.clone());
            let span = tracing::info_span!("executor", executor_id = %id);
            executors.push(tokio::spawn(
                serve_in_process(driver.clone(), core.clone(), incarnation, rx).instrument(span),
            ));
            let info = ExecutorInfo {
                host: "in-process".into(),
                cores: settings.executor_cores,
                memory: settings.executor_memory,
                slots: settings.slots(),
            };
            let link = Arc::new(ChannelLink::new(commands, LocalBlocks(core.clone())));
            driver.executor_up(id.clone(), incarnation, info, link).await;
            // In-process executors cannot be lost, but they heartbeat like any other so
            // that the driver treats them alike.
            let (beat, interval) = (driver.clone(), settings.heartbeat_interval);
            executors.push(tokio::spawn(async move {
                let mut tick = tokio::time::interval(interval);
                loop {
                    tick.tick().await;
                    beat.heartbeat(id.clone(), incarnation, core.progress()).await;
                }
            }));
        }
        // Reduce tasks read the map outputs of the other in-process executors straight
        // from them, as a peer's server would serve them.
        let peers = Arc::new(InProcessPeers(cores.iter().map(Arc::downgrade).collect()));
        for core in &cores {
            core.set_shuffle_fetch(peers.clone(), settings.reducer_max_size_in_flight);
        }
        Ok(LocalCluster { driver, executors, cores })
    }

    /// Stops the executors: whatever still runs or waits for a slot is killed, so that
    /// nothing outlives the job that started it.
    pub async fn shutdown(self) {
        let LocalCluster { driver, executors, cores } = self;
        // Closes the event log, its last word the executors' counts.
        driver.shutdown("the run ended").await;
        drop(driver);
        for core in &cores {
            core.kill_all();
            // Now, not when the last handle goes: the process may end first.
            if let Some(files) = core.shuffle_files() {
                files.remove_all();
            }
        }
        for executor in executors {
            executor.abort();
            let _ = executor.await;
        }
    }
}
