//! The event loop: one task owning the control core, the links to executors and every
//! running job. It takes events in turns (the driver's own, then a bounded batch of the
//! peers'), dispatches each, and at a turn's end wakes the fold workers, publishes the
//! slot count and applies the turn's journal to the status store and the event log.

use crate::link::ExecutorLink;
use flint_core::{ControlCore, CoreConfig, Event as CoreEvent, Incarnation, Policy};
use flint_proto::wire::Rejection;
use flint_proto::{ClusterStatus, ExecutorId, JobId, JobState, JobStatus, StatusUpdate};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;
use tokio::sync::{Semaphore, mpsc};

use super::events::{Event, PEER_QUEUE, reporter};
use super::fold_worker::Fold;
use super::records::JobRecord;
use super::records::Waiting;
use super::shared::Shared;
use crate::backend::News;
use crate::credentials::{self, TokenProvider};
use crate::eventlog::EventLogWriter;
use crate::journal::{AppEvent, Envelope};

/// Attempts an executor holds per slot when a job's tasks are short: the next one waits
/// on the executor, not a round trip away (see `Policy::pipeline`).
pub(super) const PIPELINE: u32 = 8;

// The deepest placement the scheduler makes is within what executors hold.
const _: () =
    assert!((PIPELINE * flint_core::scheduler::TINY_DEPTH) as usize <= flint_proto::MAX_HELD_PER_SLOT);

/// Result blocks fetched from executors at once; more wait their turn (and keep their
/// executor's slot meanwhile, which slows the producers down).
pub(super) const CONCURRENT_FETCHES: usize = 4;

pub(super) struct EventLoop {
    pub(super) shared: Arc<Shared>,
    /// The loop's own queue, for the work it starts (fetches, folds, token fetches,
    /// backends) to answer on.
    pub(super) events: mpsc::UnboundedSender<Event>,
    pub(super) core: ControlCore,
    pub(super) links: HashMap<ExecutorId, (Incarnation, Arc<dyn ExecutorLink>)>,
    /// Where each executor serves its map outputs to peers (`host:port`), when it does.
    pub(super) shuffle_addresses: HashMap<ExecutorId, flint_proto::ShuffleEndpoint>,
    pub(super) jobs: HashMap<JobId, JobRecord>,
    pub(super) next_job: JobId,
    pub(super) fetches: Arc<Semaphore>,
    /// Set once the driver is stopping: new jobs are refused.
    pub(super) stopping: Option<String>,
    /// The stop's answer, held while jobs it cancelled still end their outputs.
    pub(super) stopped: Option<tokio::sync::oneshot::Sender<()>>,
    /// The executors' slots changed since they were last published for planning.
    pub(super) slots_changed: bool,
    /// Jobs whose fold worker has outputs waiting for the end of the turn.
    pub(super) folds_pending: Vec<JobId>,
    /// Jobs waiting for one of the `flint.driver.maxRunningJobs` places, oldest first
    /// (at most `flint.driver.maxWaitingJobs`).
    pub(super) waiting: VecDeque<Waiting>,
    /// Where each renewed service's token comes from.
    pub(super) providers: HashMap<String, Arc<dyn TokenProvider>>,
    /// Events of this turn, for the store and the event log at its end.
    pub(super) journal: Vec<Envelope>,
    /// How many of the turn's `journal` events a snapshot has applied to the store.
    pub(super) applied: usize,
    pub(super) event_log: Option<EventLogWriter>,
    /// Executors the core asked for before the backend was attached (a standalone
    /// master or a Kubernetes API server still being reached): started once it is.
    /// At most `maxPendingExecutors`, as the core counts them pending.
    pub(super) unstarted: Vec<ExecutorId>,
}

impl EventLoop {
    pub(super) fn new(
        shared: Arc<Shared>,
        events: mpsc::UnboundedSender<Event>,
        event_log: Option<EventLogWriter>,
    ) -> Self {
        let settings = &shared.settings;
        let core = ControlCore::new(CoreConfig {
            policy: Policy {
                exclude_after: settings.exclude_on_failure.then_some(settings.max_failed_tasks_per_executor),
                pipeline: PIPELINE,
                max_executor_losses: (settings.task_max_executor_losses > 0)
                    .then_some(settings.task_max_executor_losses),
                speculation: settings.speculation.as_ref().map(|s| flint_core::Speculation {
                    multiplier: s.multiplier,
                    quantile: s.quantile,
                    min_runtime: s.min_task_runtime,
                    interval: s.interval,
                }),
            },
            heartbeat_timeout: settings.network_timeout,
            bootstrap_timeout: settings.executor_start_timeout,
            allocation: flint_core::AllocationConfig::from_settings(settings),
            backend: settings.executor_backend.name(),
            decommission_timeout: settings.decommission_timeout,
            max_stage_attempts: settings.stage_max_consecutive_attempts,
        });
        EventLoop {
            shared,
            events,
            core,
            links: HashMap::new(),
            shuffle_addresses: HashMap::new(),
            jobs: HashMap::new(),
            next_job: JobId(1),
            fetches: Arc::new(Semaphore::new(CONCURRENT_FETCHES)),
            stopping: None,
            stopped: None,
            slots_changed: false,
            folds_pending: Vec::new(),
            waiting: VecDeque::new(),
            providers: HashMap::new(),
            journal: Vec::new(),
            applied: 0,
            event_log,
            unstarted: Vec::new(),
        }
    }

    /// Notes an event for the status store and the event log.
    pub(super) fn record(&mut self, event: AppEvent) {
        self.journal.push(Envelope::now(event));
    }

    /// Notes the executor's state as the core has it now.
    pub(super) fn record_executor(
        &mut self,
        now: Instant,
        id: &ExecutorId,
        wrap: fn(flint_proto::ExecutorStatus) -> AppEvent,
    ) {
        if let Some(status) = self.core.executor(now, id) {
            self.record(wrap(status));
        }
    }

    /// Applies the turn's events to the store and hands them to the event log.
    pub(super) fn flush_journal(&mut self) {
        if self.journal.is_empty() {
            return;
        }
        let events = std::mem::take(&mut self.journal);
        {
            let mut store = self.shared.store.lock().expect("store lock");
            events[std::mem::take(&mut self.applied)..].iter().for_each(|e| store.apply(e));
        }
        if let Some(log) = &self.event_log {
            log.send(events);
        }
    }

    /// Says the application ended, with the last word on each executor, and closes the
    /// event log.
    pub(super) fn close_journal(&mut self, now: Instant) {
        let executors = self.core.executors(now);
        self.record(AppEvent::ApplicationEnd { executors });
        self.flush_journal();
        if let Some(mut log) = self.event_log.take() {
            log.close();
        }
    }

    /// Once the driver is stopping and no job is still ending its output, closes the
    /// event log and answers the stop.
    pub(super) fn stop_when_ended(&mut self, now: Instant) {
        if self.stopped.is_none() || self.jobs.values().any(|job| job.ending) {
            return;
        }
        self.close_journal(now);
        if let Some(done) = self.stopped.take() {
            let _ = done.send(());
        }
    }

    /// Hands the current tokens to every live executor.
    pub(super) fn push_tokens(&self) {
        let tokens = self.shared.tokens();
        for (_, link) in self.links.values() {
            link.tokens(tokens.clone());
        }
    }

    pub(super) async fn run(
        mut self,
        mut events: mpsc::UnboundedReceiver<Event>,
        mut peers: mpsc::Receiver<Event>,
    ) {
        let app_id = self.shared.app_id.clone();
        let config = flint_proto::config::redacted(&self.shared.conf);
        let flint_version = env!("CARGO_PKG_VERSION").into();
        self.record(AppEvent::ApplicationStart { app_id, flint_version, config });
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
            self.start_waiting(Instant::now());
            if std::mem::take(&mut self.slots_changed) {
                self.shared.slots.store(self.core.total_slots(), Ordering::Relaxed);
            }
            self.flush_journal();
        }
        if self.event_log.is_some() {
            self.close_journal(Instant::now());
        }
    }

    pub(super) fn handle(&mut self, event: Event) {
        let now = Instant::now();
        match event {
            Event::Submit { job, reply } => self.submit(now, *job, reply),
            Event::NewJobId { reply } => {
                let id = self.next_job;
                self.next_job = id.next();
                let _ = reply.send(id);
            }
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
                link.tokens(self.shared.tokens());
                match link.shuffle_endpoint() {
                    Some(endpoint) => self.shuffle_addresses.insert(id.clone(), endpoint),
                    None => self.shuffle_addresses.remove(&id),
                };
                self.links.insert(id.clone(), (incarnation, link));
                self.feed(now, CoreEvent::Registered { id: id.clone(), incarnation, info });
                self.record_executor(now, &id, |executor| AppEvent::ExecutorAdded { executor });
                self.slots_changed = true;
            }
            Event::Heartbeat { id, incarnation, progress } => {
                self.feed(now, CoreEvent::Heartbeat { id, incarnation, progress })
            }
            Event::Decommissioning { id, incarnation } => {
                tracing::info!(executor_id = %id, "executor decommissioning");
                self.feed(now, CoreEvent::Draining { id: id.clone(), incarnation });
                self.record_executor(now, &id, |executor| AppEvent::ExecutorUpdated { executor });
                self.slots_changed = true;
            }
            Event::Adopted { id, incarnation, adopted } => {
                let flint_proto::Adopted { job, from, maps, failed } = adopted;
                let from = Incarnation(from);
                self.feed(
                    now,
                    CoreEvent::Adopted {
                        id,
                        incarnation,
                        shuffle: flint_core::shuffle::ShuffleId { job, index: 0 },
                        from,
                        maps,
                        failed,
                    },
                )
            }
            Event::ExecutorLost { id, incarnation, reason } => {
                self.feed(now, CoreEvent::Lost { id, incarnation, reason })
            }
            Event::Status { incarnation, update } => self.status(now, incarnation, update),
            Event::Fetched { incarnation, update, result } => match result {
                Ok(output) => {
                    self.task_succeeded(incarnation, &update);
                    let StatusUpdate { executor, attempt, elapsed, .. } = update;
                    let event = CoreEvent::TaskSucceeded { id: executor, incarnation, attempt, elapsed };
                    let actions = self.core.handle(now, event);
                    self.apply(actions, Some(output));
                }
                Err(failure) => self.fail(now, incarnation, update, failure),
            },
            Event::Partial { id, incarnation, partial } => self.partial(now, id, incarnation, partial),
            Event::PartialFetched { id, incarnation, job, tasks, result } => {
                self.partial_ended(now, (id, incarnation), job, tasks, result)
            }
            Event::Folded { job, result } => self.complete(job, result),
            Event::OutputEnded { job, outcome } => {
                self.finish(job, outcome);
                self.stop_when_ended(now);
            }
            Event::Snapshot(reply) => {
                let _ = reply.send(self.snapshot(now));
            }
            Event::Cancel { job, reply } => {
                let _ = reply.send(self.cancel(now, job));
            }
            Event::TokensChanged => self.push_tokens(),
            Event::RenewTokens { providers, config, initial } => {
                let services = providers.keys().cloned().collect();
                self.providers = providers;
                self.core.renew_credentials(now, credentials::now_ms(), config, services, initial);
                *self.shared.renewed.lock().expect("tokens lock") = self.core.tokens();
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
                let unstarted = std::mem::take(&mut self.unstarted);
                if let (false, Some(backend)) = (unstarted.is_empty(), self.shared.backend.get()) {
                    tracing::info!(count = unstarted.len(), backend = backend.name(), "starting executors");
                    backend.start(unstarted, reporter(&self.events));
                }
                let actions = self.core.handle_timeout(now);
                self.apply(actions, None);
            }
            Event::Backend { id, news: News::Exited(reason) } => {
                tracing::info!(executor_id = %id, %reason, "executor process ended");
                self.feed(now, CoreEvent::BackendExited { id, reason });
            }
            Event::Backend { id, news: News::Progress } => self.feed(now, CoreEvent::BackendProgress { id }),
            Event::Backend { id, news: News::Waiting } => self.feed(now, CoreEvent::BackendWaiting { id }),
            Event::Shutdown { reason, done } => {
                // A warning only when it cuts jobs short: `flint run` stops its driver
                // after every job.
                match self.jobs.len() + self.waiting.len() {
                    0 => tracing::info!(%reason, "driver stopping"),
                    jobs => tracing::warn!(%reason, jobs, "driver stopping: cancelling its jobs"),
                }
                self.stopping = Some(reason.clone());
                self.cancel_waiting(&format!("the driver is stopping: {reason}"));
                let running: Vec<JobId> = self.jobs.keys().copied().collect();
                for job in running {
                    let reason = format!("the driver is stopping: {reason}");
                    self.feed(now, CoreEvent::CancelJob { job, reason });
                }
                self.stopped = Some(done);
                self.stop_when_ended(now);
            }
        }
    }

    /// What pages, the API, metrics and `flint status` show: finished jobs and removed
    /// executors as the status store keeps them (the one record of the past, history
    /// reads the same), beside the live figures only the loop and the core have.
    pub(super) fn snapshot(&mut self, now: Instant) -> ClusterStatus {
        // What this turn did is in the store before it is read (the event log still
        // gets the turn's events in one batch at its end).
        let mut live = self.core.live_statuses(now);
        let jobs_started: Vec<Option<u64>>;
        let (mut jobs, mut executors) = {
            let mut store = self.shared.store.lock().expect("store lock");
            self.journal[self.applied..].iter().for_each(|e| store.apply(e));
            self.applied = self.journal.len();
            jobs_started =
                self.jobs.keys().map(|id| store.job(*id).and_then(|e| e.status.started_ms)).collect();
            for executor in &mut live {
                executor.added_ms = store.executor_added(&executor.id);
                (executor.input_bytes, executor.shuffle_write_bytes) = store.executor_bytes(&executor.id);
            }
            store.past()
        };
        jobs.extend(self.jobs.iter().zip(jobs_started).map(|((id, j), started_ms)| JobStatus {
            job: *id,
            name: j.descriptor.name.clone(),
            state: JobState::Running,
            progress: *j.progress.borrow(),
            started_ms,
            ended_ms: None,
            stages: self.core.stages(*id),
        }));
        jobs.extend(self.waiting.iter().map(|w| JobStatus {
            job: w.id,
            name: w.job.name.clone(),
            state: JobState::Waiting,
            progress: *w.progress.borrow(),
            started_ms: None,
            ended_ms: None,
            stages: Vec::new(),
        }));
        jobs.sort_by_key(|j| j.job);
        // A live executor replaces the record of an earlier life of its id.
        let alive: std::collections::HashSet<&ExecutorId> = live.iter().map(|l| &l.id).collect();
        executors.retain(|e| !alive.contains(&e.id));
        executors.extend(live);
        executors.sort_by(|a, b| a.id.cmp(&b.id));
        ClusterStatus {
            app_id: self.shared.app_id.clone(),
            executors,
            jobs,
            executors_starting: self.core.executors_starting(),
            allocation_stopped: self.core.allocation_given_up().map(str::to_owned),
            executors_waiting: self.shared.backend.get().and_then(|b| b.waiting()),
            allocation_target: self.core.allocation_target(),
            left_out: 0,
        }
    }
}
