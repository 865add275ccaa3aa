//! The driver's handle: what submitters, the QUIC front, in-process executors and the
//! UI hold. It checks and plans a job before queueing it, and otherwise only sends
//! events to the loop and reads what the loop shares.

use crate::job::{JobRequest, SubmitError};
use crate::link::ExecutorLink;
use flint_core::{ExecutorInfo, Incarnation};
use flint_data::ObjectReader;
use flint_proto::wire::Rejection;
use flint_proto::{
    ClusterStatus, Conf, CredentialSettings, Digest, ExecutorId, FLINT_SERVICE, Partial, Parts, Settings,
    StatusUpdate, World,
};
use flint_runtime::{Runtime, RuntimeConfig, RuntimeError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

use super::event_loop::EventLoop;
use super::events::JobHandle;
use super::events::{Event, PEER_QUEUE, PreparedJob};
use super::plan::{MAX_TASKS, plan};
use super::shared::Shared;
use crate::backend::ExecutorBackend;
use crate::credentials::{CommandProvider, FileProvider, TokenProvider};
use crate::data::{DataService, FlintTokens};
use crate::eventlog::EventLogWriter;
use crate::journal::Store;

pub struct DriverConfig {
    pub app_id: String,
    /// The driver's configuration; a job's own `flint.task.*` keys override it.
    pub conf: Conf,
    /// The runtime merges and finishes run on.
    pub runtime: Arc<Runtime>,
    /// Where the application's events are written (`flint.eventLog.dir`), if anywhere.
    pub event_log: Option<crate::eventlog::EventLogWriter>,
}

/// A handle on the driver's event loop. Cheap to clone.
#[derive(Clone)]
pub struct Driver {
    /// Events from the driver's own parts: fold workers, fetches, in-process executors,
    /// backends, token providers and submitters. Unbounded as a type, bounded by what
    /// sends: a fold result per running job (at most `flint.driver.maxRunningJobs`), a
    /// fetch or an in-process report per placed attempt (the scheduler's credit), a
    /// token fetch per service at a time, a backend's news per executor it started, and
    /// a submission or snapshot per call awaiting its answer (for clients, at most
    /// `server::MAX_CONNECTIONS` connections × `OPEN_STREAMS` streams; a submission's
    /// bytes are held by its caller until the loop answers anyway).
    events: mpsc::UnboundedSender<Event>,
    /// Reports and heartbeats read off remote executors' connections. Bounded: when the
    /// loop falls behind, those readers wait, and QUIC flow control slows the peers.
    peers: mpsc::Sender<Event>,
    shared: Arc<Shared>,
}

/// The runtime a driver runs merges and finishes on: room for an instance per job that
/// may run at once (`flint.driver.maxRunningJobs`; an `aggregate` job folds in one of
/// its own for its whole run, so no fold ever finds the pool empty), each within
/// `flint.driver.memory`. Every composition root (`flint driver`, `flint run`) makes
/// its driver's runtime here.
pub fn merge_runtime(
    settings: &Settings,
    cache_dir: Option<std::path::PathBuf>,
) -> Result<Runtime, RuntimeError> {
    Runtime::new(RuntimeConfig {
        slots: settings.max_running_jobs,
        instance_memory: settings.merge_memory(),
        cache_dir,
        max_log_size: settings.task_max_log_size as usize,
        pooling: true,
        component_cache: settings.component_cache_size,
    })
}

/// A provider gave no first token: the driver does not start without it.
#[derive(Debug, thiserror::Error)]
#[error("no token for service {service} ({kind}): {error}")]
pub struct NoToken {
    pub service: String,
    pub kind: &'static str,
    pub error: crate::credentials::TokenError,
}

impl Driver {
    /// Starts the event loop on the current tokio runtime. The configuration must be
    /// valid (`Settings::from_conf`); callers check it at start-up.
    pub fn start(config: DriverConfig) -> Driver {
        let (events, rx) = mpsc::unbounded_channel();
        let (peers, peer_rx) = mpsc::channel(PEER_QUEUE);
        let settings = Settings::from_conf(&config.conf).unwrap_or_default();
        let retained = settings.retained_jobs as usize;
        let data = DataService::new(config.app_id.clone());
        let objects = ObjectReader::new(settings.objects.clone());
        let shared = Arc::new(Shared {
            programs: Mutex::default(),
            app_id: config.app_id,
            conf: config.conf,
            settings,
            runtime: config.runtime,
            components: Mutex::new(HashMap::new()),
            slots: AtomicU32::new(0),
            backend: std::sync::OnceLock::new(),
            tokens: Mutex::new(Vec::new()),
            renewed: Mutex::new(Vec::new()),
            data,
            objects,
            durations: Default::default(),
            speculations: Default::default(),
            peer_metrics: Default::default(),
            events_dropped: config.event_log.as_ref().map(EventLogWriter::dropped),
            uploads_held: Arc::default(),
            store: Mutex::new(Store::new(retained)),
        });
        let event_loop = EventLoop::new(shared.clone(), events.clone(), config.event_log);
        tokio::spawn(event_loop.run(rx, peer_rx));
        Driver { events, peers, shared }
    }

    pub fn app_id(&self) -> &str {
        &self.shared.app_id
    }

    /// Why the executors asked of the backend wait, when they do (a standalone master
    /// without room for them).
    pub fn executors_waiting(&self) -> Option<String> {
        self.shared.backend.get().and_then(|b| b.waiting())
    }

    /// The driver's settings, read from its configuration at start.
    pub fn settings(&self) -> &Settings {
        &self.shared.settings
    }

    /// Checks a job (its configuration, component and inputs), plans its partitions and
    /// queues it. Problems with the job come back here, before any task runs.
    pub async fn submit(&self, mut request: JobRequest) -> Result<JobHandle, SubmitError> {
        let mut conf = self.shared.conf.clone();
        conf.extend(request.config.clone());
        let settings = Settings::from_conf(&conf)?;
        // The driver's limits, inputs, network and security are its operator's: a job
        // may tighten a limit, never loosen one or change the rest.
        settings.within_driver(self.settings())?;
        request.check_sizes()?;
        if request.partitions == Some(0) {
            return Err(SubmitError::Partitions("must be at least 1".into()));
        }
        if request.partitions.is_some_and(|p| p > MAX_TASKS) {
            return Err(SubmitError::Partitions(format!("at most {MAX_TASKS} tasks per job")));
        }
        let runtime = self.shared.runtime.clone();
        let bytes = Arc::new(std::mem::take(&mut request.component));
        let component = {
            let bytes = bytes.clone();
            tokio::task::spawn_blocking(move || runtime.load(&bytes))
                .await
                .map_err(|_| SubmitError::DriverStopped)??
        };
        // The driver's own instances are sized for merges; a component no task slot
        // (or the job's own `limits.memory`) can hold is refused here, as an executor
        // would refuse it.
        let task_cap = settings.instance_memory();
        if let Some(limit) = request.memory_limit.filter(|l| component.min_memory > *l && *l < task_cap) {
            return Err(SubmitError::UnderOwnLimit { needs: component.min_memory, limit });
        }
        if component.min_memory > task_cap {
            let error =
                flint_runtime::LoadError::TooMuchMemory { needs: component.min_memory, cap: task_cap };
            return Err(SubmitError::Component(error));
        }
        if let Some(declared) = request.world.filter(|w| *w != component.world) {
            return Err(SubmitError::WorldMismatch { declared, found: component.world });
        }
        if component.world == World::Program {
            return super::program::start(self.clone(), request, component, bytes, settings).await;
        }
        let slots = self.shared.planning_slots();
        let uploads = request.uploads.as_deref().map(crate::job::Uploads::path);
        let mut plan =
            plan(&self.shared, &request.inputs, uploads, &request.values, request.partitions, slots).await?;
        // A map/reduce job: its map partitions, then one reduce task per partition,
        // whose sources are known only once its maps ran.
        let shuffle = match (component.world, request.reduce_partitions) {
            (World::MapReduce, reduces) => {
                let (maps, reduces) = (plan.len() as u32, reduces.unwrap_or(slots));
                let limit = flint_core::shuffle::MAX_PARTITIONS;
                if maps == 0
                    || !(1..=limit).contains(&reduces)
                    || u64::from(maps) * u64::from(reduces) > flint_core::shuffle::MAX_SLICES
                {
                    return Err(SubmitError::Partitions(format!(
                        "{maps} maps into {reduces} reduce partitions: each must be 1 to {limit}, and their product at most {}",
                        flint_core::shuffle::MAX_SLICES
                    )));
                }
                plan = plan.with_reduces(reduces);
                Some((maps, reduces))
            }
            (_, Some(_)) => {
                return Err(SubmitError::Partitions(
                    "reduce partitions are for map/reduce jobs (world map-reduce)".into(),
                ));
            }
            (_, None) => None,
        };
        let mut output = None;
        let parts = match (&request.output, request.collect, shuffle) {
            (None, false, _) => None,
            (_, _, None) => {
                return Err(SubmitError::Output(
                    "part files and collected parts are for map/reduce jobs (world map-reduce)".into(),
                ));
            }
            (Some(_), true, _) => {
                return Err(SubmitError::Output("--output and --collect: one or the other".into()));
            }
            (Some(text), false, _) => {
                let tokens = self.shared.tokens();
                let (parts, held) =
                    super::output::prepare(&settings, &self.shared.objects, &tokens, text).await?;
                output = Some(held);
                Some(parts)
            }
            (None, true, _) => Some(Parts::Collect),
        };
        if plan.len() > u64::from(MAX_TASKS) {
            return Err(SubmitError::Partitions(format!(
                "{} tasks; at most {MAX_TASKS} per job",
                plan.len()
            )));
        }
        let job = PreparedJob {
            name: request.name,
            component,
            plan,
            config: request.config,
            deadline: request.deadline.unwrap_or(settings.task_deadline),
            settings,
            memory_limit: request.memory_limit,
            token_services: request.token_services,
            every: request.every,
            shuffle,
            program: None,
            asked: None,
            parts,
            output,
            uploads: request.uploads,
            speculate: !request.no_speculation,
        };
        super::program::Submitter::submit_prepared(self, job, bytes).await
    }

    /// Reserves an executor id and incarnation before the executor receives any
    /// configuration: the requested id if it is free, else one made from the pod name
    /// or a counter.
    pub async fn reserve_executor_id(
        &self,
        requested: Option<ExecutorId>,
        pod_name: Option<String>,
    ) -> Result<(ExecutorId, Incarnation), Rejection> {
        let (reply, rx) = oneshot::channel();
        self.send(Event::Reserve { requested, pod_name, reply }).map_err(|_| Rejection::AppStopped)?;
        rx.await.map_err(|_| Rejection::AppStopped)?
    }

    // What executors say of themselves goes through the bounded peer queue, in the
    // order each connection says it: a loss never overtakes the reports before it.

    /// Adds a registered executor, reached through `link`.
    pub async fn executor_up(
        &self,
        id: ExecutorId,
        incarnation: Incarnation,
        info: ExecutorInfo,
        link: Arc<dyn ExecutorLink>,
    ) {
        let _ = self.peers.send(Event::ExecutorUp { id, incarnation, info, link }).await;
    }

    /// The application's delegation tokens now.
    pub fn tokens(&self) -> Vec<flint_proto::Token> {
        self.shared.tokens()
    }

    /// How long the attempts the driver accepted ran.
    pub fn durations(&self) -> &crate::metrics::Durations {
        &self.shared.durations
    }

    /// Speculative copies started and won, for `/metrics`.
    pub fn speculations(&self) -> &crate::metrics::Speculations {
        &self.shared.speculations
    }

    /// Events the event log dropped because its writer fell behind, when there is one.
    pub fn events_dropped(&self) -> Option<u64> {
        self.shared.events_dropped.as_ref().map(|d| d.load(Ordering::Relaxed))
    }

    /// Bytes of files sent with jobs the driver holds now (`flint.driver.maxUploadsHeld`).
    pub fn uploads_held(&self) -> &Arc<AtomicU64> {
        &self.shared.uploads_held
    }

    /// What executors said in their heartbeats, and the connections' traffic.
    pub fn peer_metrics(&self) -> &crate::metrics::PeerMetrics {
        &self.shared.peer_metrics
    }

    /// The application's records as the status page shows them: jobs, their tasks and
    /// failures. Held briefly; the event loop writes it at the end of each turn.
    pub fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.shared.store.lock().expect("store lock")
    }

    /// The driver's data service (`flint://` inputs).
    pub fn data(&self) -> &DataService {
        &self.shared.data
    }

    /// Fetches the first token of every provider `credentials` names, and of the
    /// driver's own `flint` service, then renews them from now on. A provider that
    /// cannot give one is an error naming the service and why.
    pub async fn renew_credentials(&self, credentials: &CredentialSettings) -> Result<(), NoToken> {
        let c = credentials;
        let mut providers: HashMap<String, Arc<dyn TokenProvider>> = HashMap::new();
        providers.insert(FLINT_SERVICE.into(), Arc::new(FlintTokens { lifetime: c.flint_lifetime }));
        for (service, command) in &c.commands {
            let provider = CommandProvider { service: service.clone(), command: command.clone() };
            providers.insert(service.clone(), Arc::new(provider));
        }
        for (service, path) in &c.files {
            providers.insert(
                service.clone(),
                Arc::new(FileProvider { service: service.clone(), path: path.into() }),
            );
        }
        let mut initial = Vec::new();
        for (service, provider) in &providers {
            let token = provider.fetch().await;
            initial.push(token.map_err(|error| NoToken {
                service: service.clone(),
                kind: provider.kind(),
                error,
            })?);
        }
        let config = flint_core::RenewalConfig {
            ratio: c.renewal_ratio,
            margin: c.renewal_margin,
            retry_wait: c.retry_wait,
            ..Default::default()
        };
        tracing::info!(services = ?providers.keys().collect::<Vec<_>>(), "tokens renewed by the driver");
        self.renew_tokens(providers, config, initial);
        Ok(())
    }

    /// Renews each service's token from its provider from now on (the control core
    /// decides when), starting from `initial`, fetched just before.
    pub fn renew_tokens(
        &self,
        providers: HashMap<String, Arc<dyn TokenProvider>>,
        config: flint_core::RenewalConfig,
        initial: Vec<flint_proto::Token>,
    ) {
        // In force at once: a job planned before the loop takes them up sees them too.
        *self.shared.renewed.lock().expect("tokens lock") = initial.clone();
        let _ = self.events.send(Event::RenewTokens { providers, config, initial });
    }

    /// Replaces the application's delegation tokens and pushes them to every live
    /// executor; executors that register later get them at bootstrap.
    pub fn set_tokens(&self, tokens: Vec<flint_proto::Token>) {
        *self.shared.tokens.lock().expect("tokens lock") = tokens;
        let _ = self.events.send(Event::TokensChanged);
    }

    /// Attaches the backend that starts executors for `flint.executor.backend`; the
    /// control core asks it for executors from then on. Set once.
    pub fn set_backend(&self, backend: Arc<dyn ExecutorBackend>) {
        let _ = self.shared.backend.set(backend);
        // Wake the loop: the policy may want executors at once.
        let _ = self.events.send(Event::BackendAttached);
    }

    /// An executor is alive, its attempts this far through their inputs.
    pub async fn heartbeat(
        &self,
        id: ExecutorId,
        incarnation: Incarnation,
        progress: Vec<flint_proto::wire::Progress>,
    ) {
        let _ = self.peers.send(Event::Heartbeat { id, incarnation, progress }).await;
    }

    /// An executor finishes its tasks and takes no new ones.
    pub async fn decommissioning(&self, id: ExecutorId, incarnation: Incarnation) {
        let _ = self.peers.send(Event::Decommissioning { id, incarnation }).await;
    }

    /// An executor copied map outputs of a leaving one (or could not).
    pub async fn adopted(&self, id: ExecutorId, incarnation: Incarnation, adopted: flint_proto::Adopted) {
        let _ = self.peers.send(Event::Adopted { id, incarnation, adopted }).await;
    }

    /// Removes an executor; its running tasks are requeued. A loss of an old
    /// incarnation changes nothing.
    pub async fn executor_lost(&self, id: ExecutorId, incarnation: Incarnation, reason: String) {
        let _ = self.peers.send(Event::ExecutorLost { id, incarnation, reason }).await;
    }

    /// Reports read off a remote executor's connection.
    pub async fn peer_status(&self, incarnation: Incarnation, updates: Vec<StatusUpdate>) {
        for update in updates {
            let _ = self.peers.send(Event::Status { incarnation, update }).await;
        }
    }

    /// Combined outputs read off a remote executor's connection (its id is the
    /// connection's).
    pub async fn partial(&self, id: ExecutorId, incarnation: Incarnation, partial: Partial) {
        let _ = self.peers.send(Event::Partial { id, incarnation, partial }).await;
    }

    /// An in-process executor's combined outputs (at most one per combining instance,
    /// each after the reports of the tasks it holds).
    pub fn local_partial(&self, id: ExecutorId, incarnation: Incarnation, partial: Partial) {
        let _ = self.send(Event::Partial { id, incarnation, partial });
    }

    /// An in-process executor's report of an attempt (its queue is bounded by credit);
    /// `update.executor` names the executor, and `incarnation` the life of it that the
    /// report came from.
    pub fn status(&self, incarnation: Incarnation, update: StatusUpdate) {
        let _ = self.send(Event::Status { incarnation, update });
    }

    /// Executors (removed ones included) and jobs.
    pub async fn snapshot(&self) -> ClusterStatus {
        let (reply, rx) = oneshot::channel();
        let empty = || ClusterStatus {
            app_id: self.app_id().to_owned(),
            executors: Vec::new(),
            jobs: Vec::new(),
            executors_starting: 0,
            allocation_stopped: None,
            executors_waiting: None,
            allocation_target: None,
            left_out: 0,
        };
        if self.send(Event::Snapshot(reply)).is_err() {
            return empty();
        }
        rx.await.unwrap_or_else(|_| empty())
    }

    /// Stops job `job`, running or waiting: its attempts are killed and it ends as
    /// cancelled.
    pub async fn cancel(&self, job: flint_proto::JobId) -> flint_proto::wire::CancelReply {
        // A program stops where it is, and so does the job of its action.
        let program = self.shared.programs.lock().expect("programs lock").get(&job).map(|c| {
            c.kill.kill();
            c.action
        });
        let job = match program {
            None => job,
            Some(None) => return flint_proto::wire::CancelReply::Cancelled,
            Some(Some(action)) => action,
        };
        let (reply, rx) = oneshot::channel();
        if self.send(Event::Cancel { job, reply }).is_err() {
            return flint_proto::wire::CancelReply::Ended;
        }
        rx.await.unwrap_or(flint_proto::wire::CancelReply::Ended)
    }

    /// Cancels every running job with `reason` (their submitters get that report) and
    /// refuses new ones. Returns once the reports are sent, a job writing parts having
    /// ended its output first (for at most 30 s).
    pub async fn shutdown(&self, reason: &str) {
        let (done, rx) = oneshot::channel();
        if self.send(Event::Shutdown { reason: reason.to_owned(), done }).is_ok() {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(30), rx).await;
        }
    }

    /// A running job's component bytes, by digest, for executors to fetch.
    pub fn component(&self, digest: &Digest) -> Option<Arc<Vec<u8>>> {
        self.shared.component(digest)
    }

    /// The driver's configuration.
    pub fn conf(&self) -> &Conf {
        &self.shared.conf
    }

    fn send(&self, event: Event) -> Result<(), SubmitError> {
        self.events.send(event).map_err(|_| SubmitError::DriverStopped)
    }
}

impl super::program::Submitter for Driver {
    fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    async fn submit_prepared(&self, job: PreparedJob, bytes: Arc<Vec<u8>>) -> Result<JobHandle, SubmitError> {
        let digest = job.component.digest;
        self.shared.hold_component(digest, bytes);
        let (reply, handle) = oneshot::channel();
        if self.send(Event::Submit { job: Box::new(job), reply }).is_err() {
            self.shared.release_component(&digest);
            return Err(SubmitError::DriverStopped);
        }
        handle.await.map_err(|_| SubmitError::DriverStopped)?
    }

    async fn new_job_id(&self) -> Result<flint_proto::JobId, SubmitError> {
        let (reply, id) = oneshot::channel();
        self.send(Event::NewJobId { reply })?;
        id.await.map_err(|_| SubmitError::DriverStopped)
    }

    async fn cancel(&self, job: flint_proto::JobId) -> flint_proto::wire::CancelReply {
        Driver::cancel(self, job).await
    }
}
