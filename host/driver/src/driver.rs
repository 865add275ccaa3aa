//! The driver: one event loop owns the control core (scheduler and executor registry),
//! the links to executors and every running job. Submitters, executors and fold workers
//! talk to it by events; it carries out what the core decides.

use crate::fold::{FoldError, Folding};
use crate::job::{JobRequest, SubmitError};
use crate::link::ExecutorLink;
use flint_core::{
    Action, ControlCore, CoreConfig, Event as CoreEvent, ExecutorInfo, Incarnation, JobCounts, Policy,
};
use flint_data::{InputUrl, ObjectReader};
use flint_executor::DriverSource;
use flint_proto::wire::Rejection;
use flint_proto::{
    BlockRef, ClusterStatus, Conf, CredentialSettings, Digest, ExecutorId, FLINT_SERVICE, FailureRecord,
    JobDescriptor, JobError, JobId, JobPlan, JobProgress, JobReport, JobStatus, Partial, PartitionSpec,
    Settings, Source, StatusUpdate, TaskFailure, TaskLaunch, TaskOutput, TaskState, Token, World,
};
use flint_runtime::{JobComponent, KillSwitch, Runtime, TaskContext};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, mpsc, oneshot, watch};
use tracing::Instrument;

use crate::backend::{ExecutorBackend, News, Reporter};
use crate::credentials::{self, CommandProvider, FileProvider, TokenProvider};
use crate::data::{DataService, FlintTokens};
use crate::eventlog::EventLogWriter;
use crate::journal::{AppEvent, Envelope, Store};

/// Attempts an executor holds per slot when a job's tasks are short: the next one waits
/// on the executor, not a round trip away (see `Policy::pipeline`).
const PIPELINE: u32 = 8;

// The deepest placement the scheduler makes is within what executors hold.
const _: () = assert!(
    (PIPELINE * flint_core::scheduler::TINY_DEPTH) as usize <= flint_executor::lifecycle::MAX_HELD_PER_SLOT
);

/// A file split is at most this large unless the user asks for fewer partitions.
const MAX_SPLIT: u64 = 64 << 20;

/// Result blocks fetched from executors at once; more wait their turn (and keep their
/// executor's slot meanwhile, which slows the producers down).
const CONCURRENT_FETCHES: usize = 4;

/// Bytes of outputs that may wait for a job's merges before its result fetches wait.
const FOLD_BACKLOG: u64 = 64 << 20;

/// How long a reserved executor id waits for its executor to register.
const BOOTSTRAP_TIMEOUT: Duration = Duration::from_secs(60);

/// The most tasks one job may have: each costs the driver a little memory.
pub const MAX_TASKS: u32 = 1_000_000;

pub struct DriverConfig {
    pub app_id: String,
    /// The driver's configuration; a job's own `flint.task.*` keys override it.
    pub conf: Conf,
    /// The runtime merges and finishes run on.
    pub runtime: Arc<Runtime>,
    /// Where the application's events are written (`flint.eventLog.dir`), if anywhere.
    pub event_log: Option<crate::eventlog::EventLogWriter>,
}

/// A submitted job: its progress as it runs, and its report when it ends.
pub struct JobHandle {
    pub id: JobId,
    pub progress: watch::Receiver<JobProgress>,
    pub report: oneshot::Receiver<JobReport>,
}

/// A handle on the driver's event loop. Cheap to clone.
#[derive(Clone)]
pub struct Driver {
    /// Events from the driver's own parts: fold workers, fetches, in-process executors
    /// and submitters. Bounded by what they are: a fold result per job, a fetch or a
    /// report per placed attempt (credit).
    events: mpsc::UnboundedSender<Event>,
    /// Reports and heartbeats read off remote executors' connections. Bounded: when the
    /// loop falls behind, those readers wait, and QUIC flow control slows the peers.
    peers: mpsc::Sender<Event>,
    shared: Arc<Shared>,
}

/// Peer events queued for the loop before their readers wait.
const PEER_QUEUE: usize = 1024;

struct Shared {
    app_id: String,
    conf: Conf,
    settings: Settings,
    runtime: Arc<Runtime>,
    /// Component bytes for executors to fetch, with the number of running jobs using
    /// each; removed when the last one ends.
    components: Mutex<HashMap<Digest, Shipped>>,
    /// A copy of the core's slot count, published after each event, for planning.
    slots: AtomicU32,
    /// Who starts executors, when the driver does (`flint.executor.backend`).
    backend: std::sync::OnceLock<Arc<dyn ExecutorBackend>>,
    /// The application's delegation tokens now: handed to executors at bootstrap, and
    /// pushed to every live one when they change.
    tokens: Mutex<Vec<flint_proto::Token>>,
    /// The tokens the control core renews from providers; for a service in both, these
    /// win over `tokens`.
    renewed: Mutex<Vec<flint_proto::Token>>,
    /// `flint://` inputs and their tokens.
    data: DataService,
    /// Sizes and listings of `s3://` and `https://` inputs, for planning.
    objects: ObjectReader,
    /// How long accepted attempts ran (`/metrics`).
    durations: crate::ui::Durations,
    /// Executors' heartbeats and the connections' traffic (`/metrics`).
    peer_metrics: crate::ui::PeerMetrics,
    /// Events the event log had no room for, when there is one.
    events_dropped: Option<Arc<AtomicU64>>,
    /// Bytes of files sent with jobs that the driver holds now.
    uploads_held: Arc<AtomicU64>,
    /// The records the status page shows, built from the loop's events at the end of
    /// each of its turns.
    store: Mutex<Store>,
}

/// A component's bytes and the number of running jobs that use it.
type Shipped = (Arc<Vec<u8>>, usize);

impl DriverSource for Driver {
    fn fetch(&self, digest: &Digest) -> Result<Vec<u8>, String> {
        self.component(digest)
            .map(|b| b.as_ref().clone())
            .ok_or_else(|| "the driver has no such component (its job has ended)".into())
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
    ) -> Result<Vec<u8>, String> {
        self.shared.data.read_for(job, path, start, len).map_err(|e| e.to_string())
    }
}

enum Event {
    Submit {
        job: Box<PreparedJob>,
        reply: oneshot::Sender<JobHandle>,
    },
    Reserve {
        requested: Option<String>,
        pod_name: Option<String>,
        reply: oneshot::Sender<Result<(ExecutorId, Incarnation), Rejection>>,
    },
    ExecutorUp {
        id: ExecutorId,
        incarnation: Incarnation,
        info: ExecutorInfo,
        link: Arc<dyn ExecutorLink>,
    },
    Heartbeat {
        id: ExecutorId,
        incarnation: Incarnation,
    },
    Decommissioning {
        id: ExecutorId,
        incarnation: Incarnation,
    },
    ExecutorLost {
        id: ExecutorId,
        incarnation: Incarnation,
        reason: String,
    },
    Status {
        incarnation: Incarnation,
        update: StatusUpdate,
    },
    Fetched {
        incarnation: Incarnation,
        update: StatusUpdate,
        result: Result<Vec<u8>, TaskFailure>,
    },
    /// An executor handed over combined outputs.
    Partial {
        id: ExecutorId,
        incarnation: Incarnation,
        partial: Partial,
    },
    /// A partial result's block arrived, or could not be had.
    PartialFetched {
        id: ExecutorId,
        incarnation: Incarnation,
        job: JobId,
        tasks: Vec<u32>,
        /// Charged before the fetch; given back if the bytes never came.
        size: u64,
        result: Result<Vec<u8>, String>,
    },
    Folded {
        job: JobId,
        result: Result<Vec<u8>, JobError>,
    },
    Snapshot(oneshot::Sender<ClusterStatus>),
    /// A backend was attached: the allocation policy may want executors at once.
    BackendAttached,
    /// The delegation tokens changed: push them to every live executor.
    TokensChanged,
    /// Renew tokens from these providers.
    RenewTokens {
        providers: HashMap<String, Arc<dyn TokenProvider>>,
        config: flint_core::RenewalConfig,
        initial: Vec<flint_proto::Token>,
    },
    /// A provider's fetch ended. At most one fetch per service is under way (the core
    /// asks again only after an answer), so these add one event per service at a time.
    TokenFetched {
        service: String,
        result: Result<flint_proto::Token, String>,
    },
    /// The backend's news of an executor it started.
    Backend {
        id: ExecutorId,
        news: News,
    },
    /// Fail every running job with `reason` and take no more (the driver is stopping).
    Shutdown {
        reason: String,
        done: oneshot::Sender<()>,
    },
}

struct PreparedJob {
    name: String,
    component: Arc<JobComponent>,
    plan: JobPlan,
    config: Conf,
    settings: Settings,
    memory_limit: Option<u64>,
    deadline: Duration,
    token_services: Vec<String>,
    every: Option<Duration>,
    /// Files sent with the job, kept until it ends.
    uploads: Option<Arc<crate::job::Uploads>>,
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
            peer_metrics: Default::default(),
            events_dropped: config.event_log.as_ref().map(EventLogWriter::dropped),
            uploads_held: Arc::default(),
            store: Mutex::new(Store::new(retained)),
        });
        let driver = Driver { events, peers, shared };
        let event_loop = EventLoop::new(driver.clone(), config.event_log);
        tokio::spawn(event_loop.run(rx, peer_rx));
        driver
    }

    pub fn app_id(&self) -> &str {
        &self.shared.app_id
    }

    /// The driver's settings, read from its configuration at start.
    pub fn settings(&self) -> &Settings {
        &self.shared.settings
    }

    /// Checks a job (its configuration, component and inputs), plans its partitions and
    /// queues it. Problems with the job come back here, before any task runs.
    pub async fn submit(&self, request: JobRequest) -> Result<JobHandle, SubmitError> {
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
        let bytes = Arc::new(request.component);
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
        let slots = self.shared.slots.load(Ordering::Relaxed).max(1);
        let uploads = request.uploads.as_deref().map(crate::job::Uploads::path);
        let plan = self.plan(&request.inputs, uploads, &request.values, request.partitions, slots).await?;
        if plan.len() > MAX_TASKS as usize {
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
            uploads: request.uploads,
        };
        self.shared
            .components
            .lock()
            .expect("components lock")
            .entry(job.component.digest)
            .or_insert_with(|| (bytes, 0))
            .1 += 1;
        let digest = job.component.digest;
        let (reply, handle) = oneshot::channel();
        if self.send(Event::Submit { job: Box::new(job), reply }).is_err() {
            self.release_component(&digest);
            return Err(SubmitError::DriverStopped);
        }
        handle.await.map_err(|_| SubmitError::DriverStopped)
    }

    /// Splits a job into partitions: byte ranges of its inputs, its values, or generated
    /// indices. Defaults to one partition per slot, and no split over 64 MiB. A file
    /// (a path, `file://` or `flint://`) must lie under one of the driver's input roots
    /// once its links are resolved; the plan names it by that resolved path, so a link
    /// changed afterwards cannot point a task elsewhere. Objects are sized (and prefixes
    /// listed) here, with the driver's tokens; executors read them straight from the store.
    async fn plan(
        &self,
        urls: &[String],
        uploads: Option<&std::path::Path>,
        values: &[serde_json::Value],
        partitions: Option<u32>,
        slots: u32,
    ) -> Result<JobPlan, SubmitError> {
        if urls.is_empty() {
            if !values.is_empty() {
                return Ok(JobPlan::values(values));
            }
            return Ok(JobPlan::indices(partitions.unwrap_or(slots)));
        }
        let settings = &self.shared.settings;
        let input_error = |path: &str, reason: String| SubmitError::Input { path: path.to_owned(), reason };
        let mut allowed = Vec::new();
        // The job's own files may be read wherever the driver keeps them.
        let roots = settings.input_roots.iter().map(std::path::Path::new).chain(uploads);
        for root in roots {
            // A root that does not exist allows nothing.
            if let Ok(root) = tokio::fs::canonicalize(root).await {
                allowed.push(root);
            }
        }
        let mut inputs = Vec::new();
        for text in urls {
            let url = InputUrl::parse(text, settings.objects.allow_http)
                .map_err(|e| input_error(text, e.to_string()))?;
            let path = match &url {
                InputUrl::Local(path) | InputUrl::Driver(path) => path,
                InputUrl::S3 { .. } | InputUrl::Http(_) => {
                    let found = self.shared.objects.expand(&url, &self.tokens()).await;
                    inputs.extend(found.map_err(|e| input_error(text, e))?);
                    continue;
                }
            };
            let real = tokio::fs::canonicalize(path).await.map_err(|e| input_error(text, e.to_string()))?;
            if !allowed.iter().any(|root| real.starts_with(root)) {
                let roots = &settings.input_roots;
                let set = if roots.is_empty() { "none are set".to_owned() } else { roots.join(", ") };
                return Err(input_error(
                    text,
                    format!(
                        "outside {INPUT_ROOTS} ({set}); the driver's operator allows directories with --conf {INPUT_ROOTS}=/dir,…"
                    ),
                ));
            }
            let meta = tokio::fs::metadata(&real).await.map_err(|e| input_error(text, e.to_string()))?;
            if !meta.is_file() {
                return Err(input_error(text, "not a regular file".into()));
            }
            let real = real.to_string_lossy().into_owned();
            let source =
                if matches!(url, InputUrl::Driver(_)) { Source::Driver(real) } else { Source::File(real) };
            inputs.push((source, meta.len()));
        }
        let total: u64 = inputs.iter().map(|(_, n)| n).sum();
        // However few partitions are asked for, no split passes MAX_SPLIT: a split is
        // read whole into its task's memory.
        let at_least = total.div_ceil(MAX_SPLIT).min(u64::from(MAX_TASKS)) as u32;
        let target = partitions.unwrap_or(slots).max(at_least);
        Ok(JobPlan::file_splits(&inputs, target))
    }

    /// Reserves an executor id and incarnation before the executor receives any
    /// configuration: the requested id if it is free, else one made from the pod name
    /// or a counter.
    pub async fn reserve_executor_id(
        &self,
        requested: Option<String>,
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
        let renewed = self.shared.renewed.lock().expect("tokens lock").clone();
        let given = self.shared.tokens.lock().expect("tokens lock").clone();
        let mut tokens: Vec<_> =
            given.into_iter().filter(|t| !renewed.iter().any(|r| r.service == t.service)).collect();
        // The `flint` service's token only says until when the jobs' own tokens hold.
        for token in renewed {
            if token.service == FLINT_SERVICE {
                tokens.extend(self.shared.data.job_tokens(token.expires_at_ms));
            } else {
                tokens.push(token);
            }
        }
        tokens
    }

    /// How long the attempts the driver accepted ran.
    pub fn durations(&self) -> &crate::ui::Durations {
        &self.shared.durations
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
    pub fn peer_metrics(&self) -> &crate::ui::PeerMetrics {
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
    pub async fn renew_credentials(&self, credentials: &CredentialSettings) -> Result<(), String> {
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
            initial.push(
                token.map_err(|e| format!("no token for service {service} ({}): {e}", provider.kind()))?,
            );
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

    /// Carries a backend's news (an executor's start under way, its process or pod
    /// ended) to the loop.
    fn reporter(&self) -> Reporter {
        let events = self.events.clone();
        Reporter::new(move |id, news| {
            let _ = events.send(Event::Backend { id, news });
        })
    }

    /// An executor is alive.
    pub async fn heartbeat(&self, id: ExecutorId, incarnation: Incarnation) {
        let _ = self.peers.send(Event::Heartbeat { id, incarnation }).await;
    }

    /// An executor finishes its tasks and takes no new ones.
    pub async fn decommissioning(&self, id: ExecutorId, incarnation: Incarnation) {
        let _ = self.peers.send(Event::Decommissioning { id, incarnation }).await;
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
            allocation_target: None,
        };
        if self.send(Event::Snapshot(reply)).is_err() {
            return empty();
        }
        rx.await.unwrap_or_else(|_| empty())
    }

    /// Fails every running job with `reason` (their submitters get that report) and
    /// refuses new ones. Returns once the reports are sent.
    pub async fn shutdown(&self, reason: &str) {
        let (done, rx) = oneshot::channel();
        if self.send(Event::Shutdown { reason: reason.to_owned(), done }).is_ok() {
            let _ = rx.await;
        }
    }

    /// A running job's component bytes, by digest, for executors to fetch.
    pub fn component(&self, digest: &Digest) -> Option<Arc<Vec<u8>>> {
        self.shared.components.lock().expect("components lock").get(digest).map(|(b, _)| b.clone())
    }

    fn release_component(&self, digest: &Digest) {
        let mut components = self.shared.components.lock().expect("components lock");
        if let Some((_, users)) = components.get_mut(digest) {
            *users -= 1;
            if *users == 0 {
                components.remove(digest);
            }
        }
    }

    /// The driver's configuration.
    pub fn conf(&self) -> &Conf {
        &self.shared.conf
    }

    fn send(&self, event: Event) -> Result<(), SubmitError> {
        self.events.send(event).map_err(|_| SubmitError::DriverStopped)
    }
}

const INPUT_ROOTS: &str = "flint.input.roots";

struct JobRecord {
    descriptor: Arc<JobDescriptor>,
    partitions: Vec<PartitionSpec>,
    fold: Fold,
    progress: watch::Sender<JobProgress>,
    reply: Option<oneshot::Sender<JobReport>>,
    started: Instant,
    counts: JobCounts,
    failures: Vec<FailureRecord>,
    /// Bytes of task results accepted so far (`flint.driver.maxResultSize`).
    result_bytes: u64,
    max_result_bytes: u64,
    /// Executors that were sent attempts of this job, told when it ends.
    executors: BTreeSet<ExecutorId>,
    span: tracing::Span,
    /// Files sent with the job: removed when the record goes (the job ended).
    _uploads: Option<Arc<crate::job::Uploads>>,
}

/// How a job's outputs become its result.
enum Fold {
    /// `aggregate` world: a worker thread merges in the job's sandbox as outputs arrive.
    Aggregate(FoldWorker),
    /// `task` world: outputs are collected in partition order.
    Collect(Vec<Option<Vec<u8>>>),
}

/// The thread folding an `aggregate` job's outputs.
struct FoldWorker {
    sender: std::sync::mpsc::Sender<FoldMessage>,
    /// Stops a merge in progress when the job ends another way.
    kill: KillSwitch,
    /// Bytes of outputs handed to the worker and not yet merged. Result fetches wait
    /// while it is over [`FOLD_BACKLOG`]: a slow merge holds tasks back, not memory.
    backlog: Arc<AtomicU64>,
    /// Outputs accepted in this turn of the event loop, sent to the worker together at
    /// its end (one wake-up of the fold thread per turn, not per task).
    pending: Vec<FoldInput>,
}

/// An output for the fold: one task's (`index`), or a partial result of `tasks`
/// combined ones, which a commutative fold takes in any order.
struct FoldInput {
    index: Option<u32>,
    tasks: u32,
    bytes: Vec<u8>,
}

impl FoldWorker {
    fn flush(&mut self) {
        if !self.pending.is_empty() {
            let _ = self.sender.send(FoldMessage::Outputs(std::mem::take(&mut self.pending)));
        }
    }
}

enum FoldMessage {
    Outputs(Vec<FoldInput>),
    Finish,
}

struct EventLoop {
    driver: Driver,
    core: ControlCore,
    links: HashMap<ExecutorId, (Incarnation, Arc<dyn ExecutorLink>)>,
    jobs: HashMap<JobId, JobRecord>,
    finished: VecDeque<JobStatus>,
    next_job: JobId,
    fetches: Arc<Semaphore>,
    /// Set once the driver is stopping: new jobs are refused.
    stopping: Option<String>,
    /// The executors' slots changed since they were last published for planning.
    slots_changed: bool,
    /// Jobs whose fold worker has outputs waiting for the end of the turn.
    folds_pending: Vec<JobId>,
    /// Where each renewed service's token comes from.
    providers: HashMap<String, Arc<dyn TokenProvider>>,
    /// Events of this turn, for the store and the event log at its end.
    journal: Vec<Envelope>,
    event_log: Option<EventLogWriter>,
}

impl EventLoop {
    fn new(driver: Driver, event_log: Option<EventLogWriter>) -> Self {
        let settings = &driver.shared.settings;
        let core = ControlCore::new(CoreConfig {
            policy: Policy {
                exclude_after: settings.exclude_on_failure.then_some(settings.max_failed_tasks_per_executor),
                pipeline: PIPELINE,
                max_executor_losses: (settings.task_max_executor_losses > 0)
                    .then_some(settings.task_max_executor_losses),
            },
            heartbeat_timeout: settings.network_timeout,
            bootstrap_timeout: BOOTSTRAP_TIMEOUT,
            allocation: allocation_config(settings),
            backend: settings.executor_backend.name(),
        });
        EventLoop {
            driver,
            core,
            links: HashMap::new(),
            jobs: HashMap::new(),
            finished: VecDeque::new(),
            next_job: 1,
            fetches: Arc::new(Semaphore::new(CONCURRENT_FETCHES)),
            stopping: None,
            slots_changed: false,
            folds_pending: Vec::new(),
            providers: HashMap::new(),
            journal: Vec::new(),
            event_log,
        }
    }

    /// Notes an event for the status store and the event log.
    fn record(&mut self, event: AppEvent) {
        self.journal.push(Envelope::now(event));
    }

    /// Notes the executor's state as the core has it now.
    fn record_executor(&mut self, now: Instant, id: &str, wrap: fn(flint_proto::ExecutorStatus) -> AppEvent) {
        if let Some(status) = self.core.executor(now, id) {
            self.record(wrap(status));
        }
    }

    /// Applies the turn's events to the store and hands them to the event log.
    fn flush_journal(&mut self) {
        if self.journal.is_empty() {
            return;
        }
        let events = std::mem::take(&mut self.journal);
        {
            let mut store = self.driver.shared.store.lock().expect("store lock");
            events.iter().for_each(|e| store.apply(e));
        }
        if let Some(log) = &self.event_log {
            log.send(events);
        }
    }

    /// Says the application ended, with the last word on each executor, and closes the
    /// event log.
    fn close_journal(&mut self, now: Instant) {
        let executors = self.core.executors(now);
        self.record(AppEvent::ApplicationEnd { executors });
        self.flush_journal();
        if let Some(mut log) = self.event_log.take() {
            log.close();
        }
    }

    /// Hands the current tokens to every live executor.
    fn push_tokens(&self) {
        let tokens = self.driver.tokens();
        for (_, link) in self.links.values() {
            link.tokens(tokens.clone());
        }
    }

    async fn run(mut self, mut events: mpsc::UnboundedReceiver<Event>, mut peers: mpsc::Receiver<Event>) {
        let app_id = self.driver.shared.app_id.clone();
        self.record(AppEvent::ApplicationStart { app_id, flint_version: env!("CARGO_PKG_VERSION").into() });
        self.flush_journal();
        loop {
            let wake = self.core.poll_timeout();
            let timer = async {
                match wake {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                event = events.recv() => {
                    let Some(event) = event else { break };
                    self.handle(event);
                    // Take what is already queued before waiting again.
                    while let Ok(event) = events.try_recv() {
                        self.handle(event);
                    }
                }
                Some(event) = peers.recv() => {
                    self.handle(event);
                    // A bounded turn, so that the loop's own events are never starved.
                    for _ in 0..PEER_QUEUE {
                        let Ok(event) = peers.try_recv() else { break };
                        self.handle(event);
                    }
                }
                _ = timer => {
                    let actions = self.core.handle_timeout(Instant::now());
                    self.apply(actions, None);
                }
            }
            for job in std::mem::take(&mut self.folds_pending) {
                if let Some(JobRecord { fold: Fold::Aggregate(worker), .. }) = self.jobs.get_mut(&job) {
                    worker.flush();
                }
            }
            if std::mem::take(&mut self.slots_changed) {
                self.driver.shared.slots.store(self.core.total_slots(), Ordering::Relaxed);
            }
            self.flush_journal();
        }
        if self.event_log.is_some() {
            self.close_journal(Instant::now());
        }
    }

    fn handle(&mut self, event: Event) {
        let now = Instant::now();
        match event {
            Event::Submit { job, reply } => self.submit(now, *job, reply),
            Event::Reserve { requested, pod_name, reply } => {
                let verdict = match &self.stopping {
                    Some(_) => Err(Rejection::AppStopped),
                    None => self.core.reserve(now, requested, pod_name),
                };
                let _ = reply.send(verdict);
            }
            Event::ExecutorUp { id, incarnation, info, link } => {
                if !self.core.is_current(&id, incarnation) {
                    link.close("registration of a reservation that expired");
                    return;
                }
                tracing::info!(executor_id = %id, host = %info.host, slots = info.slots, "executor registered");
                // Tokens that changed while it was bootstrapping reach it now.
                link.tokens(self.driver.tokens());
                self.links.insert(id.clone(), (incarnation, link));
                self.feed(now, CoreEvent::Registered { id: id.clone(), incarnation, info });
                self.record_executor(now, &id, |executor| AppEvent::ExecutorAdded { executor });
                self.slots_changed = true;
            }
            Event::Heartbeat { id, incarnation } => self.feed(now, CoreEvent::Heartbeat { id, incarnation }),
            Event::Decommissioning { id, incarnation } => {
                tracing::info!(executor_id = %id, "executor decommissioning");
                self.feed(now, CoreEvent::Draining { id: id.clone(), incarnation });
                self.record_executor(now, &id, |executor| AppEvent::ExecutorUpdated { executor });
                self.slots_changed = true;
            }
            Event::ExecutorLost { id, incarnation, reason } => {
                self.feed(now, CoreEvent::Lost { id, incarnation, reason })
            }
            Event::Status { incarnation, update } => self.status(now, incarnation, update),
            Event::Fetched { incarnation, update, result } => match result {
                Ok(bytes) => {
                    self.task_succeeded(incarnation, &update);
                    let StatusUpdate { executor, attempt, elapsed, .. } = update;
                    let event = CoreEvent::TaskSucceeded { id: executor, incarnation, attempt, elapsed };
                    let actions = self.core.handle(now, event);
                    self.apply(actions, Some(bytes));
                }
                Err(failure) => {
                    if let Some(job) = self.jobs.get_mut(&update.attempt.job) {
                        job.result_bytes = job.result_bytes.saturating_sub(update_size(&update.state));
                    }
                    self.fail(now, incarnation, update, failure)
                }
            },
            Event::Partial { id, incarnation, partial } => self.partial(now, id, incarnation, partial),
            Event::PartialFetched { id, incarnation, job, tasks, size, result } => match result {
                Ok(bytes) => self.partial_in(now, id, incarnation, job, tasks, bytes),
                Err(reason) => {
                    if let Some(record) = self.jobs.get_mut(&job) {
                        record.result_bytes = record.result_bytes.saturating_sub(size);
                    }
                    self.partial_lost(now, id, incarnation, job, tasks, &reason)
                }
            },
            Event::Folded { job, result } => self.complete(job, result),
            Event::Snapshot(reply) => {
                let _ = reply.send(self.snapshot(now));
            }
            Event::TokensChanged => self.push_tokens(),
            Event::RenewTokens { providers, config, initial } => {
                let services = providers.keys().cloned().collect();
                self.providers = providers;
                self.core.renew_credentials(now, credentials::now_ms(), config, services, initial);
                *self.driver.shared.renewed.lock().expect("tokens lock") = self.core.tokens();
                self.push_tokens();
                let actions = self.core.handle_timeout(now);
                self.apply(actions, None);
            }
            Event::TokenFetched { service, result } => match result {
                Ok(token) if token.service == service => {
                    let expires_in_s = token.expires_at_ms.saturating_sub(credentials::now_ms()) / 1000;
                    tracing::info!(%service, expires_in_s, "token renewed; pushed to executors");
                    let expires_at_ms = token.expires_at_ms;
                    self.record(AppEvent::TokenRenewed { service: service.clone(), expires_at_ms });
                    self.feed(now, CoreEvent::TokenObtained { token, now_ms: credentials::now_ms() });
                }
                Ok(_) => {
                    tracing::warn!(%service, "a provider gave a token of another service");
                    self.feed(now, CoreEvent::TokenFailed { service });
                }
                Err(error) => {
                    tracing::warn!(%service, %error, "token renewal failed");
                    self.record(AppEvent::TokenRenewalFailed { service: service.clone() });
                    self.feed(now, CoreEvent::TokenFailed { service });
                }
            },
            Event::BackendAttached => {
                let actions = self.core.handle_timeout(now);
                self.apply(actions, None);
            }
            Event::Backend { id, news: News::Exited(reason) } => {
                tracing::info!(executor_id = %id, %reason, "executor process ended");
                self.feed(now, CoreEvent::BackendExited { id, reason });
            }
            Event::Backend { id, news: News::Progress } => self.feed(now, CoreEvent::BackendProgress { id }),
            Event::Shutdown { reason, done } => {
                tracing::warn!(%reason, jobs = self.jobs.len(), "driver stopping: failing running jobs");
                self.stopping = Some(reason.clone());
                let running: Vec<JobId> = self.jobs.keys().copied().collect();
                for job in running {
                    let reason = format!("the driver is stopping: {reason}");
                    self.feed(now, CoreEvent::CancelJob { job, reason });
                }
                self.close_journal(now);
                let _ = done.send(());
            }
        }
    }

    fn snapshot(&self, now: Instant) -> ClusterStatus {
        let mut jobs: Vec<JobStatus> = self.finished.iter().cloned().collect();
        jobs.extend(self.jobs.iter().map(|(id, j)| JobStatus {
            job: *id,
            name: j.descriptor.name.clone(),
            state: "running".into(),
            progress: *j.progress.borrow(),
        }));
        jobs.sort_by_key(|j| j.job);
        ClusterStatus {
            app_id: self.driver.shared.app_id.clone(),
            executors: self.core.executors(now),
            jobs,
            executors_starting: self.core.executors_starting(),
            allocation_stopped: self.core.allocation_given_up().map(str::to_owned),
            allocation_target: self.core.allocation_target(),
        }
    }

    fn submit(&mut self, now: Instant, job: PreparedJob, reply: oneshot::Sender<JobHandle>) {
        if self.stopping.is_some() {
            self.driver.release_component(&job.component.digest);
            return; // dropping `reply` tells the submitter the driver stopped
        }
        let id = self.next_job;
        self.next_job += 1;
        let tasks = job.plan.len() as u32;
        let descriptor = Arc::new(JobDescriptor {
            job: id,
            app_id: self.driver.shared.app_id.clone(),
            name: job.name.clone(),
            component: job.component.digest,
            task_count: tasks,
            config: Arc::new(job.config),
            token_services: job.token_services,
            memory_limit: job.memory_limit,
            deadline: job.deadline,
            max_result_size: job.settings.task_max_result_size,
            // Its merge is commutative: the tasks a slot runs are combined there.
            combine: job.component.combines() && job.settings.task_combine,
            instance_reuse: job.settings.task_instance_reuse,
        });
        self.record(AppEvent::JobStart { job: id, name: job.name.clone(), tasks });
        let span = tracing::info_span!("job", job_id = id, name = %job.name);
        span.in_scope(|| tracing::info!(tasks, world = ?job.component.world, "job submitted"));
        let from_driver: std::collections::HashSet<String> = job
            .plan
            .partitions
            .iter()
            .filter_map(|p| match p {
                PartitionSpec::Split { source: Source::Driver(path), .. } => Some(path.clone()),
                _ => None,
            })
            .collect();
        if !from_driver.is_empty() {
            // The job's data token reaches every executor before any of its launches.
            self.driver.shared.data.register(id, from_driver);
            self.push_tokens();
        }
        let fold = match job.component.world {
            World::Aggregate => Fold::Aggregate(spawn_fold(
                self.driver.clone(),
                job.component.clone(),
                descriptor.clone(),
                &job.settings,
                span.clone(),
            )),
            World::Task => Fold::Collect(vec![None; tasks as usize]),
        };
        let (progress, progress_rx) = watch::channel(JobProgress { total: tasks, ..JobProgress::default() });
        let (report_tx, report_rx) = oneshot::channel();
        self.jobs.insert(
            id,
            JobRecord {
                descriptor,
                partitions: job.plan.partitions,
                fold,
                progress,
                reply: Some(report_tx),
                started: now,
                counts: JobCounts { tasks, ..JobCounts::default() },
                failures: Vec::new(),
                result_bytes: 0,
                max_result_bytes: job.settings.driver_max_result_size,
                executors: BTreeSet::new(),
                span,
                _uploads: job.uploads,
            },
        );
        let _ = reply.send(JobHandle { id, progress: progress_rx, report: report_rx });
        let max_failures = job.settings.task_max_failures;
        self.feed(now, CoreEvent::JobSubmitted { job: id, tasks, max_failures, period: job.every });
    }

    fn status(&mut self, now: Instant, incarnation: Incarnation, update: StatusUpdate) {
        // A report the core would drop (an old incarnation, an attempt not held there)
        // goes to it anyway, to be counted, but costs nothing more.
        if !self.core.accepts(&update.executor, incarnation, update.attempt) {
            let event = match update.state {
                TaskState::Succeeded(TaskOutput::Combined) => CoreEvent::TaskCombined {
                    id: update.executor,
                    incarnation,
                    attempt: update.attempt,
                    elapsed: update.elapsed,
                },
                TaskState::Succeeded(_) => CoreEvent::TaskSucceeded {
                    id: update.executor,
                    incarnation,
                    attempt: update.attempt,
                    elapsed: update.elapsed,
                },
                TaskState::Failed(failure) => CoreEvent::TaskFailed {
                    id: update.executor,
                    incarnation,
                    attempt: update.attempt,
                    failure,
                },
            };
            self.feed(now, event);
            return;
        }
        self.driver.shared.durations.record(update.elapsed);
        let mut update = update;
        let output = match &mut update.state {
            TaskState::Failed(failure) => {
                let failure = failure.clone();
                return self.fail(now, incarnation, update, failure);
            }
            TaskState::Succeeded(TaskOutput::Combined)
                if !self.jobs.get(&update.attempt.job).is_some_and(|j| j.descriptor.combine) =>
            {
                let failure = TaskFailure::Host {
                    message: "the executor held the output combined, but the job does not combine".into(),
                };
                return self.fail(now, incarnation, update, failure);
            }
            // The bytes move on to the fold; the report keeps only what it says.
            TaskState::Succeeded(TaskOutput::Inline(bytes)) => TaskOutput::Inline(std::mem::take(bytes)),
            TaskState::Succeeded(output) => output.clone(),
        };
        if !self.charge(update.attempt.job, output.size()) {
            return;
        }
        match output {
            TaskOutput::Inline(bytes) => {
                self.task_succeeded(incarnation, &update);
                let StatusUpdate { executor, attempt, elapsed, .. } = update;
                let actions = self
                    .core
                    .handle(now, CoreEvent::TaskSucceeded { id: executor, incarnation, attempt, elapsed });
                self.apply(actions, Some(bytes));
            }
            TaskOutput::Block(block) => {
                let (executor, job) = (update.executor.clone(), update.attempt.job);
                let span = tracing::debug_span!("fetch", attempt = %update.attempt, size = block.size);
                self.fetch(incarnation, &executor, job, block, span, move |result| {
                    let result = result.map_err(|failure| match failure {
                        FetchFailure::Mismatch(message) => TaskFailure::Host { message },
                        FetchFailure::Lost(reason) => TaskFailure::ExecutorLost {
                            executor: update.executor.clone(),
                            reason: format!("fetching the result failed: {reason}"),
                        },
                    });
                    Event::Fetched { incarnation, update, result }
                });
            }
            // Held on the executor, folded into its running value: it comes with a
            // partial result.
            TaskOutput::Combined => {
                self.task_succeeded(incarnation, &update);
                let StatusUpdate { executor, attempt, elapsed, .. } = update;
                self.feed(now, CoreEvent::TaskCombined { id: executor, incarnation, attempt, elapsed });
            }
        }
    }

    /// Counts `size` bytes of results against the job's `flint.driver.maxResultSize`,
    /// before any of them is fetched; over it, the job fails with that reason (and
    /// `complete` stops its tasks). False when the job is gone or just failed.
    fn charge(&mut self, job: JobId, size: u64) -> bool {
        let Some(record) = self.jobs.get_mut(&job) else { return false };
        record.result_bytes = record.result_bytes.saturating_add(size);
        if record.result_bytes > record.max_result_bytes {
            let reason =
                JobError::ResultTooLarge { size: record.result_bytes, limit: record.max_result_bytes };
            self.complete(job, Err(reason));
            return false;
        }
        true
    }

    /// Combined outputs handed over: small ones ride in the message, larger ones are
    /// fetched as a block (their size charged first, as a task's); a combining instance
    /// that failed loses what it held.
    fn partial(&mut self, now: Instant, id: ExecutorId, incarnation: Incarnation, partial: Partial) {
        let Partial { job, tasks, output } = partial;
        if tasks.len() > flint_proto::MAX_PARTIAL_TASKS {
            // No honest executor names this many: what it holds of them runs again.
            let reason =
                format!("a partial result may name at most {} tasks", flint_proto::MAX_PARTIAL_TASKS);
            return self.partial_lost(now, id, incarnation, job, tasks, &reason);
        }
        match output {
            Ok(TaskOutput::Inline(bytes)) => {
                if self.charge(job, bytes.len() as u64) {
                    self.partial_in(now, id, incarnation, job, tasks, bytes);
                }
            }
            Ok(TaskOutput::Block(block)) => {
                if !self.charge(job, block.size) {
                    return;
                }
                let span =
                    tracing::debug_span!("fetch", job_id = job, tasks = tasks.len(), size = block.size);
                let executor = id.clone();
                self.fetch(incarnation, &executor, job, block, span, move |result| Event::PartialFetched {
                    id,
                    incarnation,
                    job,
                    tasks,
                    size: block.size,
                    result: result.map_err(|failure| match failure {
                        FetchFailure::Mismatch(message) | FetchFailure::Lost(message) => message,
                    }),
                });
            }
            Ok(TaskOutput::Combined) => {
                self.partial_lost(now, id, incarnation, job, tasks, "a partial result must hold a value")
            }
            Err(reason) => self.partial_lost(now, id, incarnation, job, tasks, &reason),
        }
    }

    /// A partial result's bytes are in (and charged): the core accepts it whole (the executor holds
    /// every task it names) or has those tasks run again; accepted, it is folded.
    fn partial_in(
        &mut self,
        now: Instant,
        id: ExecutorId,
        incarnation: Incarnation,
        job: JobId,
        tasks: Vec<u32>,
        bytes: Vec<u8>,
    ) {
        if !self.jobs.contains_key(&job) {
            return;
        }
        let actions = self.core.handle(now, CoreEvent::Partial { id, incarnation, job, tasks });
        if !actions.iter().any(|a| matches!(a, Action::PartialAccepted { .. })) {
            // Refused: its tasks run again and are charged again when they end.
            if let Some(record) = self.jobs.get_mut(&job) {
                record.result_bytes = record.result_bytes.saturating_sub(bytes.len() as u64);
            }
        }
        self.apply(actions, Some(bytes));
    }

    fn partial_lost(
        &mut self,
        now: Instant,
        id: ExecutorId,
        incarnation: Incarnation,
        job: JobId,
        tasks: Vec<u32>,
        reason: &str,
    ) {
        if let Some(record) = self.jobs.get(&job) {
            let reason = flint_proto::failure::head(reason, 1024);
            record.span.in_scope(|| {
                tracing::warn!(executor_id = %id, tasks = tasks.len(), %reason, "combined outputs lost; those tasks run again")
            });
        }
        self.feed(now, CoreEvent::CombinedLost { id, incarnation, job, tasks });
    }

    /// Fetches a block on a stream of its own and sends what `done` makes of the bytes
    /// (checked against the block's size and digest) to the loop. A task's attempt keeps
    /// its slot until then; a partial result's tasks stay held by their executor.
    fn fetch(
        &mut self,
        incarnation: Incarnation,
        executor: &ExecutorId,
        job: JobId,
        block: BlockRef,
        span: tracing::Span,
        done: impl FnOnce(Result<Vec<u8>, FetchFailure>) -> Event + Send + 'static,
    ) {
        let Some((_, link)) = self.links.get(executor).filter(|(i, _)| *i == incarnation) else {
            return;
        };
        let fetch = link.fetch(block);
        let backlog = match self.jobs.get(&job).map(|j| &j.fold) {
            Some(Fold::Aggregate(worker)) => Some((worker.backlog.clone(), worker.kill.clone())),
            _ => None,
        };
        let (events, permits) = (self.driver.events.clone(), self.fetches.clone());
        // An executor that holds a block but never sends it must not hold the job: the
        // fetch gets as long as a silent executor does.
        let limit = self.driver.shared.settings.network_timeout;
        tokio::spawn(
            async move {
                // Outputs waiting for a slow merge hold this fetch back (and with it the
                // attempt's slot, so the executor gets no new work): memory stays bounded.
                while let Some((backlog, job_ended)) = &backlog {
                    let waiting = backlog.load(Ordering::Relaxed);
                    if waiting == 0 || waiting + block.size <= FOLD_BACKLOG || job_ended.is_killed() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let _permit = permits.acquire_owned().await;
                let fetched = tokio::time::timeout(limit, fetch).await.unwrap_or_else(|_| {
                    Err(format!("no block within {} ms (flint.network.timeout)", limit.as_millis()))
                });
                let result = match fetched {
                    Ok(bytes) if bytes.len() as u64 != block.size || Digest::of(&bytes) != block.digest => {
                        Err(FetchFailure::Mismatch(format!(
                            "result block of {} bytes does not match its reference ({} bytes, {})",
                            bytes.len(),
                            block.size,
                            block.digest
                        )))
                    }
                    Ok(bytes) => Ok(bytes),
                    Err(reason) => Err(FetchFailure::Lost(reason)),
                };
                let _ = events.send(done(result));
            }
            .instrument(span),
        );
    }

    fn fail(&mut self, now: Instant, incarnation: Incarnation, update: StatusUpdate, failure: TaskFailure) {
        let StatusUpdate { executor, attempt, log, .. } = update;
        if self.core.accepts(&executor, incarnation, attempt)
            && let Some(job) = self.jobs.get_mut(&attempt.job)
        {
            job.span.in_scope(|| tracing::warn!(%attempt, executor_id = %executor, %failure, "task failed"));
            job.failures.push(FailureRecord::new(attempt, executor.clone(), failure.clone(), &log));
            self.record(AppEvent::TaskEnd {
                job: attempt.job,
                index: attempt.index,
                attempt: attempt.number,
                executor: executor.clone(),
                duration_ms: update.elapsed.as_millis() as u64,
                failure: Some(failure.clone()),
                log_tail: Some(flint_proto::log_tail(&log)),
            });
        }
        self.feed(now, CoreEvent::TaskFailed { id: executor, incarnation, attempt, failure });
    }

    /// Notes an accepted success (its output is in, or being fetched and checked).
    fn task_succeeded(&mut self, incarnation: Incarnation, update: &StatusUpdate) {
        if !self.core.accepts(&update.executor, incarnation, update.attempt) {
            return;
        }
        let attempt = update.attempt;
        self.record(AppEvent::TaskEnd {
            job: attempt.job,
            index: attempt.index,
            attempt: attempt.number,
            executor: update.executor.clone(),
            duration_ms: update.elapsed.as_millis() as u64,
            failure: None,
            log_tail: (!update.log.is_empty()).then(|| flint_proto::log_tail(&update.log)),
        });
    }

    fn feed(&mut self, now: Instant, event: CoreEvent) {
        let actions = self.core.handle(now, event);
        self.apply(actions, None);
    }

    /// Carries out what the core decided. `output` is the output of the success just
    /// fed, handed to the job's fold if the core accepted it.
    fn apply(&mut self, actions: Vec<Action>, mut output: Option<Vec<u8>>) {
        for action in actions {
            match action {
                Action::Launch { executor, incarnation, attempts } => {
                    let Some((_, link)) = self.links.get(&executor).filter(|(i, _)| *i == incarnation) else {
                        continue;
                    };
                    let batch: Vec<TaskLaunch> = attempts
                        .into_iter()
                        .filter_map(|attempt| {
                            let job = self.jobs.get_mut(&attempt.job)?;
                            if !job.executors.contains(&executor) {
                                job.executors.insert(executor.clone());
                            }
                            self.journal.push(Envelope::now(AppEvent::TaskStart {
                                job: attempt.job,
                                index: attempt.index,
                                attempt: attempt.number,
                                executor: executor.clone(),
                            }));
                            if attempt.number > 0 {
                                job.span.in_scope(
                                    || tracing::info!(%attempt, executor_id = %executor, "attempt relaunched"),
                                );
                            }
                            Some(TaskLaunch {
                                attempt,
                                job: job.descriptor.clone(),
                                partition: job.partitions.get(attempt.index as usize)?.clone(),
                            })
                        })
                        .collect();
                    link.launch(batch);
                }
                Action::TaskDone { attempt } => {
                    if let (Some(job), Some(bytes)) = (self.jobs.get_mut(&attempt.job), output.take()) {
                        match &mut job.fold {
                            Fold::Aggregate(worker) => {
                                worker.backlog.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                                if worker.pending.is_empty() {
                                    self.folds_pending.push(attempt.job);
                                }
                                worker.pending.push(FoldInput {
                                    index: Some(attempt.index),
                                    tasks: 1,
                                    bytes,
                                });
                            }
                            Fold::Collect(outputs) => outputs[attempt.index as usize] = Some(bytes),
                        }
                    }
                }
                Action::PartialAccepted { job, tasks } => {
                    if let (Some(record), Some(bytes)) = (self.jobs.get_mut(&job), output.take())
                        && let Fold::Aggregate(worker) = &mut record.fold
                    {
                        worker.backlog.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                        if worker.pending.is_empty() {
                            self.folds_pending.push(job);
                        }
                        worker.pending.push(FoldInput { index: None, tasks, bytes });
                    }
                }
                Action::Collect { executor, incarnation, job } => {
                    if let Some((_, link)) = self.links.get(&executor).filter(|(i, _)| *i == incarnation) {
                        link.collect(job);
                    }
                }
                Action::TaskLost { job, index } => {
                    if let Some(record) = self.jobs.get(&job) {
                        record
                            .span
                            .in_scope(|| tracing::info!(index, "task output lost; the task runs again"));
                    }
                    self.record(AppEvent::TaskLost { job, index });
                }
                Action::Kill { executor, incarnation, attempt } => {
                    if let Some((_, link)) = self.links.get(&executor).filter(|(i, _)| *i == incarnation) {
                        link.kill(attempt);
                    }
                }
                Action::TaskFailed { .. } => {}
                Action::Retrying { attempt, failure } => {
                    if let Some(job) = self.jobs.get(&attempt.job) {
                        job.span
                            .in_scope(|| tracing::info!(%attempt, kind = failure.kind(), "retrying task"));
                    }
                }
                Action::ExecutorRemoved { executor, incarnation, reason } => {
                    self.slots_changed = true;
                    tracing::warn!(executor_id = %executor, %reason, "executor removed");
                    self.record_executor(Instant::now(), &executor, |executor| AppEvent::ExecutorRemoved {
                        executor,
                    });
                    if self.links.get(&executor).is_some_and(|(i, _)| *i == incarnation)
                        && let Some((_, link)) = self.links.remove(&executor)
                    {
                        link.close(&reason);
                    }
                    // A process the backend started goes with its executor.
                    if let Some(backend) = self.driver.shared.backend.get() {
                        backend.stop(&executor);
                    }
                }
                Action::StartExecutors { ids } => match self.driver.shared.backend.get() {
                    Some(backend) => {
                        tracing::info!(count = ids.len(), backend = backend.name(), "starting executors");
                        backend.start(ids, self.driver.reporter());
                    }
                    None => {
                        let reason = format!(
                            "flint.executor.backend={} but this driver has no such backend",
                            self.driver.shared.settings.executor_backend.name()
                        );
                        let report = self.driver.reporter();
                        ids.into_iter().for_each(|id| report.exited(id, reason.clone()));
                    }
                },
                Action::AbandonStart { executor } => {
                    tracing::warn!(executor_id = %executor, "executor did not register in time; stopping it");
                    if let Some(backend) = self.driver.shared.backend.get() {
                        backend.stop(&executor);
                    }
                }
                Action::FetchToken { service } => {
                    let Some(provider) = self.providers.get(&service).cloned() else { continue };
                    let events = self.driver.events.clone();
                    tokio::spawn(async move {
                        let result = provider.fetch().await;
                        let _ = events.send(Event::TokenFetched { service, result });
                    });
                }
                Action::TokensChanged { tokens } => {
                    *self.driver.shared.renewed.lock().expect("tokens lock") = tokens;
                    self.push_tokens();
                }
                Action::TokenRetry { service, failures, wait } => {
                    tracing::warn!(%service, failures, retry_in_ms = wait.as_millis() as u64, "token renewal will be tried again");
                }
                Action::Decommission { executor, incarnation } => {
                    tracing::info!(executor_id = %executor, "releasing an idle executor");
                    if let Some((_, link)) = self.links.get(&executor).filter(|(i, _)| *i == incarnation) {
                        link.decommission();
                    }
                }
                Action::ExecutorExcluded { executor, failed_tasks } => {
                    self.slots_changed = true;
                    tracing::warn!(executor_id = %executor, failed_tasks, "executor excluded: too many task failures");
                    self.record_executor(Instant::now(), &executor, |executor| AppEvent::ExecutorUpdated {
                        executor,
                    });
                }
                Action::JobSucceeded { job, counts } => {
                    if let Some(record) = self.jobs.get_mut(&job) {
                        record.counts = counts;
                    }
                    self.job_succeeded(job);
                }
                Action::JobFailed { job, reason, counts } => {
                    if let Some(record) = self.jobs.get_mut(&job) {
                        record.counts = counts;
                    }
                    self.complete(job, Err(reason));
                }
            }
        }
        self.refresh_progress();
    }

    fn refresh_progress(&mut self) {
        let executors = self.core.live_executors();
        for (id, job) in self.jobs.iter_mut() {
            if let Some(counts) = self.core.job(*id) {
                job.counts = counts;
            }
            let c = job.counts;
            job.progress.send_if_modified(|p| {
                let now = JobProgress {
                    total: c.tasks,
                    done: c.done,
                    running: c.running,
                    failed_attempts: c.failed_attempts,
                    executors,
                };
                let changed = *p != now;
                *p = now;
                changed
            });
        }
    }

    fn job_succeeded(&mut self, id: JobId) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        match &mut job.fold {
            Fold::Aggregate(worker) => {
                worker.flush();
                let _ = worker.sender.send(FoldMessage::Finish);
            }
            Fold::Collect(outputs) => {
                let result = collect_json(std::mem::take(outputs));
                self.complete(id, Ok(result));
            }
        }
    }

    fn complete(&mut self, id: JobId, outcome: Result<Vec<u8>, JobError>) {
        let Some(mut job) = self.jobs.remove(&id) else {
            return;
        };
        // A merge still running for a job that ended another way stops now.
        if let Fold::Aggregate(worker) = &job.fold {
            worker.kill.kill();
        }
        if outcome.is_err() {
            // A failed merge leaves tasks running: stop them (a no-op when the core
            // already ended the job).
            let reason = "job failed".to_string();
            self.feed(Instant::now(), CoreEvent::CancelJob { job: id, reason });
        }
        // Executors that ran it drop what they hold of it: descriptor, blocks, attempts.
        for executor in &job.executors {
            if let Some((_, link)) = self.links.get(executor) {
                link.job_ended(id);
            }
        }
        self.driver.release_component(&job.descriptor.component);
        self.driver.shared.data.unregister(id);
        let mut report = JobReport {
            job: id,
            name: job.descriptor.name.clone(),
            outcome,
            tasks: job.descriptor.task_count,
            attempts: job.counts.attempts,
            failures: std::mem::take(&mut job.failures),
            failures_dropped: 0,
            elapsed: job.started.elapsed(),
        };
        // The report travels in one frame: many large failures must not stop it.
        report.fit_failures(flint_proto::report::REPORT_FAILURE_BYTES);
        self.record(AppEvent::JobEnd {
            job: id,
            succeeded: report.outcome.is_ok(),
            error: report.outcome.as_ref().err().map(ToString::to_string),
            attempts: report.attempts,
        });
        job.span.in_scope(|| match &report.outcome {
            Ok(_) => tracing::info!(elapsed = ?report.elapsed, attempts = report.attempts, "job succeeded"),
            Err(e) => tracing::warn!(error = %e, "job failed"),
        });
        // The job's last counts (its progress was published before its end).
        let c = job.counts;
        let progress = JobProgress {
            total: c.tasks,
            done: c.done,
            running: 0,
            failed_attempts: c.failed_attempts,
            executors: job.progress.borrow().executors,
        };
        // Finished jobs listed by `status`, up to `flint.driver.retainedJobs`.
        let retained = self.driver.shared.settings.retained_jobs as usize;
        while self.finished.len() >= retained.max(1) {
            self.finished.pop_front();
        }
        self.finished.push_back(JobStatus {
            job: id,
            name: report.name.clone(),
            state: if report.outcome.is_ok() { "succeeded" } else { "failed" }.into(),
            progress,
        });
        if let Some(reply) = job.reply.take() {
            let _ = reply.send(report);
        }
    }
}

/// Why a block fetch gave no bytes.
enum FetchFailure {
    /// The bytes that came are not the block the executor named.
    Mismatch(String),
    /// None came: the stream or the executor went, or the time ran out.
    Lost(String),
}

fn update_size(state: &TaskState) -> u64 {
    match state {
        TaskState::Succeeded(output) => output.size(),
        TaskState::Failed(_) => 0,
    }
}

/// A `task`-world job's result: its outputs as a JSON array, in partition order. An
/// output that is not JSON becomes a JSON string.
fn collect_json(outputs: Vec<Option<Vec<u8>>>) -> Vec<u8> {
    let values: Vec<serde_json::Value> = outputs
        .into_iter()
        .map(|o| {
            let bytes = o.unwrap_or_default();
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        })
        .collect();
    serde_json::to_vec(&values).expect("JSON values encode")
}

/// Starts the thread that folds an `aggregate` job's outputs with its own `merge`, in one
/// sandboxed instance (`Runtime::folder`), and calls `finish` once every task is in.
fn spawn_fold(
    driver: Driver,
    component: Arc<JobComponent>,
    job: Arc<JobDescriptor>,
    settings: &Settings,
    span: tracing::Span,
) -> FoldWorker {
    let (max_result_size, deadline) = (settings.driver_max_result_size, settings.merge_deadline);
    let (kill, backlog) = (KillSwitch::default(), Arc::new(AtomicU64::new(0)));
    let (sender, rx) = std::sync::mpsc::channel();
    let worker = FoldWorker { sender, kill: kill.clone(), backlog: backlog.clone(), pending: Vec::new() };
    std::thread::Builder::new()
        .name(format!("flint-fold-{}", job.job))
        .spawn(move || {
            let _entered = span.enter();
            let runtime = driver.shared.runtime.clone();
            let ctx = TaskContext {
                app_id: job.app_id.clone(),
                job_id: job.job.to_string(),
                task_index: 0,
                task_count: job.task_count,
                attempt: 0,
                config: job.config.clone(),
                tokens: Arc::new(Vec::new()),
                // A merge answers to the driver's memory (`flint.driver.memory`, the
                // runtime's cap), not to the job's limit for one task.
                memory_limit: None,
                deadline,
                spent: Duration::ZERO,
                deadline_key: "flint.merge.deadline",
                // Merged outputs add up: they answer to the job's limit
                // (`flint.driver.maxResultSize`), not to one task's.
                max_result_size,
                kill,
            };
            // Outputs load into accumulators in the job's instance and stay there,
            // decoded, until `finish`: each is decoded once, the total never re-encoded.
            let mut folder = runtime.folder(&component, ctx);
            // A combining job's partial results come in any order: its merge promised
            // to be commutative.
            let mut fold = Folding::new(job.combine);
            let result = loop {
                match rx.recv() {
                    Ok(FoldMessage::Outputs(outputs)) => {
                        let mut failed = None;
                        for FoldInput { index, tasks, bytes } in outputs {
                            let size = bytes.len() as u64;
                            if failed.is_none() {
                                let pushed = folder.load(&bytes).map_err(FoldError::Merge).and_then(|acc| {
                                    drop(bytes);
                                    fold.push(index, tasks, acc, &mut |left, right| {
                                        folder.absorb(&left, right).map(|()| left)
                                    })
                                });
                                failed = pushed.err();
                            }
                            backlog.fetch_sub(size, Ordering::Relaxed);
                        }
                        match failed {
                            None => {}
                            Some(FoldError::Merge(failure)) => break Err(JobError::Merge(failure)),
                            Some(FoldError::Unplaceable) => {
                                break Err(JobError::Merge(TaskFailure::Host {
                                    message: "a combined output reached a job folded in partition order"
                                        .into(),
                                }));
                            }
                        }
                    }
                    Ok(FoldMessage::Finish) => {
                        break match fold.into_total(job.task_count) {
                            Some(total) => folder.finish(total).map_err(JobError::Finish),
                            // A job of no partitions has nothing to finish.
                            None if job.task_count == 0 => Ok(b"null".to_vec()),
                            None => Err(JobError::Merge(TaskFailure::Host {
                                message: format!(
                                    "the fold ended without all {} task outputs",
                                    job.task_count
                                ),
                            })),
                        };
                    }
                    Err(_) => return, // the job ended without us
                }
            };
            let _ = driver.events.send(Event::Folded { job: job.job, result });
        })
        .expect("spawn a fold thread");
    worker
}

/// Dynamic allocation's settings, or `None` when executors are started by hand. A
/// backend without dynamic allocation keeps `flint.executor.instances` executors.
fn allocation_config(settings: &Settings) -> Option<flint_core::AllocationConfig> {
    if settings.executor_backend == flint_proto::Backend::Static {
        return None;
    }
    let d = &settings.dynamic_allocation;
    let (min, max, initial) = if d.enabled {
        (d.min_executors, d.max_executors, d.initial_executors.unwrap_or(d.min_executors))
    } else {
        let n = settings.executor_instances;
        (n, n, n)
    };
    Some(flint_core::AllocationConfig {
        min_executors: min,
        max_executors: max,
        initial_executors: initial,
        backlog_timeout: d.backlog_timeout,
        sustained_backlog_timeout: d.sustained_backlog_timeout.unwrap_or(d.backlog_timeout),
        idle_timeout: d.idle_timeout,
        ratio: d.ratio,
        cooldown: d.cooldown,
        max_pending: d.max_pending,
        max_start_failures: d.max_start_failures,
        start_backoff: d.start_backoff,
        slots_per_executor: settings.slots(),
    })
}
