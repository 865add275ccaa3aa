//! The control core: the registry and the scheduler behind one `handle(now, event)`,
//! in the manner of `quinn-proto`. The driver's event loop feeds it what peers say and
//! what time it is, and carries out the [`Action`]s it returns; `poll_timeout` says when
//! to call [`ControlCore::handle_timeout`] next.
//!
//! Every id, index and attempt in an event may come from a peer: each is checked here,
//! and an event that names an old incarnation, an unknown job, an index out of range or
//! an attempt the executor does not hold changes nothing (it is counted as stale).

use crate::allocation::{AllocationConfig, Allocator, Decision, TICK, View};
use crate::credentials::{Credentials, Renewal, RenewalConfig};
use crate::registry::{Incarnation, Lifecycle, Registry};
use crate::scheduler::{Decided, Input, Output, Policy, Scheduler};
use crate::shuffle::{MapOutput, MapOutputTracker, ShuffleId, TrackerError};
use dag::Dag;
use flint_proto::wire::Rejection;
use flint_proto::{Attempt, ExecutorId, JobError, JobId, TaskFailure};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

mod dag;
mod events;
mod leaving;
mod stages;
mod status;
pub use dag::{MAX_STAGES, PlanError};
pub use events::{Action, Event, JobCounts, Launch, ShuffleRead};
use leaving::{Due, Leavers};

/// Unanswered kills remembered per executor.
const KILLED_KEPT: usize = 4096;

/// The control core's settings.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    pub policy: Policy,
    /// `flint.network.timeout`: a registered executor silent this long is removed.
    pub heartbeat_timeout: Duration,
    /// A reserved id whose executor has not registered within this is freed; an
    /// executor a backend started that has not registered within it failed to start.
    pub bootstrap_timeout: Duration,
    /// Executors started by a backend and sized to the load; `None` for executors
    /// started by hand.
    pub allocation: Option<AllocationConfig>,
    /// The backend's name, for the executors it started (`local`).
    pub backend: &'static str,
    /// `flint.decommission.timeout`: how long a leaving executor's map outputs may take
    /// to be copied to executors that stay.
    pub decommission_timeout: Duration,
    /// `flint.stage.maxConsecutiveAttempts`: attempts of a stage in a row that could
    /// not read their inputs before its job fails.
    pub max_stage_attempts: u32,
}

#[derive(Debug)]
pub struct ControlCore {
    registry: Registry,
    scheduler: Scheduler,
    jobs: BTreeMap<JobId, JobCounts>,
    /// Each running job's stages.
    dags: BTreeMap<JobId, Dag>,
    max_stage_attempts: u32,
    /// Attempts killed on each executor and not yet answered: a late answer to one of
    /// these counts for its executor. Bounded by credit; dropped with the executor.
    killed: BTreeMap<ExecutorId, BTreeSet<Attempt>>,
    stale: u64,
    allocator: Option<Allocator>,
    /// Executors asked of the backend and not yet registered, with the time by which
    /// they must.
    /// `None` while the backend says it waits for room: waiting is no failed start.
    starting: BTreeMap<ExecutorId, Option<Instant>>,
    bootstrap_timeout: Duration,
    next_started: u64,
    allocated_at: Option<Instant>,
    /// Runs of recurring jobs: their period and when they were submitted.
    recurring: BTreeMap<JobId, (Duration, Instant)>,
    /// The latest `now` the core was given (it reads no clock of its own).
    clock: Option<Instant>,
    backend: &'static str,
    /// Delegation tokens the driver renews, when it has providers.
    credentials: Option<Credentials>,
    /// Where map/reduce jobs' map outputs are.
    outputs: MapOutputTracker,
    /// Draining executors not let go yet: their map outputs are handed over first.
    leaving: Leavers,
}

impl ControlCore {
    pub fn new(config: CoreConfig) -> ControlCore {
        ControlCore {
            registry: Registry::new(config.heartbeat_timeout, config.bootstrap_timeout),
            // An executor asked for its partial results gets as long to deliver them as a
            // silent one gets to live.
            scheduler: Scheduler::new(config.policy).with_collect_timeout(config.heartbeat_timeout),
            jobs: BTreeMap::new(),
            dags: BTreeMap::new(),
            max_stage_attempts: config.max_stage_attempts.max(1),
            killed: BTreeMap::new(),
            stale: 0,
            allocator: config.allocation.map(Allocator::new),
            starting: BTreeMap::new(),
            bootstrap_timeout: config.bootstrap_timeout,
            next_started: 0,
            allocated_at: None,
            recurring: BTreeMap::new(),
            clock: None,
            backend: config.backend,
            credentials: None,
            outputs: MapOutputTracker::new(),
            leaving: Leavers::new(config.decommission_timeout),
        }
    }

    /// Moves every leaving executor on: plans the copies of one whose attempts have
    /// ended, and lets go one whose copies are all answered or whose time is up.
    fn step_leaving(&mut self, now: Instant, actions: &mut Vec<Action>) {
        let idle = |id: &ExecutorId, incarnation| {
            self.registry.current(id, incarnation).map(|_| self.scheduler.is_idle(id))
        };
        for ((id, incarnation), due) in self.leaving.due(now, idle) {
            match due {
                Due::Gone => self.leaving.forget(&id),
                Due::Plan => {
                    let held = self.outputs.held_by(&id, incarnation);
                    let adopters = self
                        .registry
                        .live()
                        .filter(|(other, entry)| {
                            **other != id
                                && entry.state == Lifecycle::Registered
                                && !self.scheduler.is_excluded(other)
                                && !self.leaving.contains(other)
                        })
                        .map(|(other, entry)| (other.clone(), entry.incarnation))
                        .collect();
                    actions.extend(self.leaving.plan(now, (id, incarnation), held, adopters));
                }
                Due::LetGo => {
                    let copied = self.leaving.let_go(&id);
                    self.switch(&id, incarnation, copied);
                    actions.push(Action::Leave { executor: id, incarnation });
                }
            }
        }
    }

    /// The copies made of outputs `id` held become the outputs, in one step.
    fn switch(
        &mut self,
        id: &ExecutorId,
        incarnation: Incarnation,
        copied: Vec<(leaving::Output, leaving::Life)>,
    ) {
        for ((shuffle, map), to) in copied {
            if self.outputs.moved(shuffle, map, (id, incarnation), to)
                && let Some(counts) = self.jobs.get_mut(&shuffle.job)
            {
                counts.outputs_handed_over += 1;
            }
        }
    }

    /// Renews the tokens of these services from now on, starting from the tokens
    /// already fetched (`initial`, fetched at wall time `now_ms`): a service without
    /// one is fetched at the next timeout.
    pub fn renew_credentials(
        &mut self,
        now: Instant,
        now_ms: u64,
        config: RenewalConfig,
        services: Vec<String>,
        initial: Vec<flint_proto::Token>,
    ) {
        let mut credentials = Credentials::new(config, services, now);
        for token in initial {
            credentials.obtained(now, now_ms, token);
        }
        self.credentials = Some(credentials);
    }

    /// The tokens the core renews that are valid now.
    pub fn tokens(&self) -> Vec<flint_proto::Token> {
        self.credentials.as_ref().map(Credentials::tokens).unwrap_or_default()
    }

    /// Reserves an id and an incarnation for an executor saying hello.
    pub fn reserve(
        &mut self,
        now: Instant,
        requested: Option<ExecutorId>,
        pod_name: Option<String>,
    ) -> Result<(ExecutorId, Incarnation), Rejection> {
        self.registry.reserve(now, requested, pod_name)
    }

    /// Whether a report of `attempt` from this executor life would be accepted now.
    pub fn accepts(&self, id: &ExecutorId, incarnation: Incarnation, attempt: Attempt) -> bool {
        self.registry.current(id, incarnation).is_some() && self.scheduler.holds(id, attempt)
    }

    /// Whether `incarnation` is the current life of `id`.
    pub fn is_current(&self, id: &ExecutorId, incarnation: Incarnation) -> bool {
        self.registry.current(id, incarnation).is_some()
    }

    pub fn handle(&mut self, now: Instant, event: Event) -> Vec<Action> {
        let mut actions = self.handle_event(now, event);
        self.step_leaving(now, &mut actions);
        self.clock = Some(now);
        if let Some(allocator) = &mut self.allocator
            && self.scheduler.queued() > 0
        {
            allocator.note_backlog(now);
        }
        actions
    }

    fn handle_event(&mut self, now: Instant, event: Event) -> Vec<Action> {
        let mut actions = Vec::new();
        match event {
            Event::Registered { id, incarnation, info } => {
                let slots = info.slots;
                if self.registry.register(now, &id, incarnation, info) {
                    if self.starting.remove(&id).is_some()
                        && let Some(allocator) = &mut self.allocator
                    {
                        allocator.registered();
                        self.registry.mark_by_backend(&id, incarnation);
                    }
                    self.step(now, Input::ExecutorAdded { id, slots }, &mut actions);
                } else {
                    self.stale += 1;
                }
            }
            Event::Heartbeat { id, incarnation, progress } => {
                if !self.registry.heard(now, &id, incarnation) {
                    self.stale += 1;
                } else if !progress.is_empty() {
                    self.step(now, Input::Progress { id, progress }, &mut actions);
                }
            }
            Event::Draining { id, incarnation } => {
                if self.registry.drain(&id, incarnation) {
                    self.leaving.adopter_gone(&id);
                    self.leaving.start(&id, incarnation);
                    self.step(now, Input::ExecutorDecommissioning { id }, &mut actions);
                }
            }
            Event::Adopted { id, incarnation, shuffle, from, maps, failed } => {
                if self.registry.current(&id, incarnation).is_none()
                    || !self.leaving.adopted((id, incarnation), shuffle, from, maps, failed)
                {
                    self.stale += 1;
                }
            }
            Event::Lost { id, incarnation, reason } => {
                self.remove(now, id, incarnation, reason, &mut actions)
            }
            Event::JobSubmitted { job, stages, max_failures, period, speculate, remote_input } => {
                if self.jobs.contains_key(&job) {
                    self.stale += 1;
                } else {
                    let tasks =
                        stages.iter().map(|s| u64::from(s.tasks)).sum::<u64>().min(u32::MAX.into()) as u32;
                    let planned = Dag::new(stages).map_err(|e| e.to_string()).and_then(|dag| {
                        for (stage, maps, partitions) in dag.shuffles() {
                            let shuffle = ShuffleId { job, index: stage };
                            if let Err(e) = self.outputs.register(shuffle, maps, partitions) {
                                self.outputs.job_ended(job);
                                return Err(format!("stage {stage}: {e}"));
                            }
                        }
                        Ok(dag)
                    });
                    let dag = match planned {
                        Ok(dag) => dag,
                        Err(e) => {
                            let counts = JobCounts { tasks, ..JobCounts::default() };
                            let reason = JobError::Shuffle(e);
                            actions.push(Action::JobFailed { job, reason, counts, stages: Vec::new() });
                            return actions;
                        }
                    };
                    let tasks = dag.tasks();
                    self.jobs.insert(job, JobCounts { tasks, ..JobCounts::default() });
                    if let Some(period) = period {
                        self.recurring.insert(job, (period, now));
                    }
                    let input = match dag.is_single() {
                        true => Input::JobSubmitted { job, tasks, max_failures, speculate, remote_input },
                        false => {
                            let stages = dag.plans();
                            Input::StagedJobSubmitted { job, stages, max_failures, speculate, remote_input }
                        }
                    };
                    self.dags.insert(job, dag);
                    self.step(now, input, &mut actions);
                    // No executor and none coming: the job cannot run.
                    if let Some(reason) = self.allocator.as_ref().and_then(|a| a.given_up())
                        && self.scheduler.live_executors() == 0
                    {
                        let error = JobError::NoExecutors(reason.to_owned());
                        self.step(now, Input::FailJob { job, error }, &mut actions);
                    }
                }
            }
            Event::TaskSucceeded { id, incarnation, attempt, elapsed } => {
                if self.scheduler.holds(&id, attempt)
                    && self.registry.reported(now, &id, incarnation, Some(true))
                {
                    // A task of a stage that writes a shuffle must say what it wrote.
                    if let Some(stage) = self.stage_writing(attempt) {
                        let message = format!("a task of stage {stage} reported no map output");
                        self.report_failed(now, id, attempt, TaskFailure::Host { message }, &mut actions);
                    } else {
                        let input = Input::TaskSucceeded { attempt, executor: id, elapsed };
                        self.step(now, input, &mut actions);
                    }
                } else {
                    self.unheld(&id, incarnation, attempt, true);
                }
            }
            Event::MapSucceeded { id, incarnation, attempt, elapsed, status } => {
                if self.scheduler.holds(&id, attempt)
                    && self.registry.reported(now, &id, incarnation, Some(true))
                {
                    let Some(stage) = self.stage_writing(attempt) else {
                        let message = "a map output of a task whose stage writes no shuffle".to_owned();
                        self.report_failed(now, id, attempt, TaskFailure::Host { message }, &mut actions);
                        return actions;
                    };
                    let shuffle = ShuffleId { job: attempt.job, index: stage };
                    let map = attempt.index - self.dags[&attempt.job].first(stage);
                    let output = MapOutput {
                        executor: id.clone(),
                        incarnation,
                        sizes: status.sizes,
                        digest: status.digest,
                        inline: status.inline,
                    };
                    match self.outputs.record(shuffle, map, output) {
                        Ok(_) => {
                            // Its readers' next fetch failures are a new attempt of theirs.
                            if self.outputs.missing(shuffle).is_ok_and(|m| m.is_empty())
                                && let Some(dag) = self.dags.get_mut(&attempt.job)
                            {
                                dag.whole(stage);
                            }
                            let input = Input::TaskSucceeded { attempt, executor: id, elapsed };
                            self.step(now, input, &mut actions);
                        }
                        Err(TrackerError::Nondeterministic { map }) => {
                            let error = JobError::Nondeterministic { map };
                            self.step(now, Input::FailJob { job: attempt.job, error }, &mut actions);
                        }
                        // An executor saying something no map can have written.
                        Err(e) => {
                            let failure = TaskFailure::Host { message: format!("the map's report: {e}") };
                            self.report_failed(now, id, attempt, failure, &mut actions);
                        }
                    }
                } else {
                    self.unheld(&id, incarnation, attempt, true);
                }
            }
            Event::TaskFailed { id, incarnation, attempt, failure } => {
                let counts = failure.counts_against_task();
                if self.scheduler.holds(&id, attempt)
                    && self.registry.reported(now, &id, incarnation, counts.then_some(false))
                {
                    // A task that could not read map outputs of a shuffle its stage
                    // reads: exactly those are gone, and run again before it does;
                    // unless its stage has failed so too often in a row.
                    let mut stage_failed = None;
                    if let TaskFailure::FetchFailed { incarnation: holder, shuffle, maps, reason, .. } =
                        &failure
                    {
                        match self.stage_fetch_failed(attempt, *shuffle) {
                            Ok(true) => {
                                let shuffle = ShuffleId { job: attempt.job, index: *shuffle };
                                if let Ok(gone) =
                                    self.outputs.fetch_failed(shuffle, Incarnation(*holder), maps, reason)
                                {
                                    self.outputs_gone(now, gone, false, &mut actions);
                                }
                            }
                            Ok(false) => {}
                            Err((stage, attempts)) => {
                                let last = reason.clone();
                                stage_failed = Some(JobError::StageFailed { stage, attempts, last });
                            }
                        }
                    }
                    if counts && let Some(counts) = self.jobs.get_mut(&attempt.job) {
                        counts.failed_attempts += 1;
                    }
                    actions.push(Action::TaskFailed {
                        attempt,
                        executor: id.clone(),
                        failure: failure.clone(),
                    });
                    match stage_failed {
                        Some(error) => {
                            self.step(now, Input::FailJob { job: attempt.job, error }, &mut actions)
                        }
                        None => {
                            self.step(now, Input::TaskFailed { attempt, executor: id, failure }, &mut actions)
                        }
                    }
                } else {
                    self.unheld(&id, incarnation, attempt, false);
                }
            }
            Event::TaskCombined { id, incarnation, attempt, elapsed } => {
                if self.scheduler.holds(&id, attempt)
                    && self.registry.reported(now, &id, incarnation, Some(true))
                {
                    self.step(now, Input::TaskCombined { attempt, executor: id, elapsed }, &mut actions);
                } else {
                    self.unheld(&id, incarnation, attempt, true);
                }
            }
            Event::Partial { id, incarnation, job, tasks } => {
                if self.registry.reported(now, &id, incarnation, None) {
                    self.step(now, Input::Partial { executor: id, job, tasks }, &mut actions);
                } else {
                    self.stale += 1;
                }
            }
            Event::CombinedLost { id, incarnation, job, tasks } => {
                if self.registry.reported(now, &id, incarnation, None) {
                    self.step(now, Input::CombinedLost { executor: id, job, tasks }, &mut actions);
                } else {
                    self.stale += 1;
                }
            }
            Event::LargeOutputs { job } => self.step(now, Input::LargeOutputs { job }, &mut actions),
            Event::CancelJob { job, reason } => {
                self.step(now, Input::CancelJob { job, reason }, &mut actions)
            }
            Event::BackendExited { id, reason } => {
                if self.starting.remove(&id).is_some() {
                    self.start_failed(now, reason, &mut actions);
                } else if let Some(incarnation) = self.incarnation(&id) {
                    self.remove(now, id, incarnation, reason, &mut actions);
                } else {
                    self.stale += 1; // gone already (decommissioned, say)
                }
            }
            Event::BackendProgress { id } => {
                if let Some(by) = self.starting.get_mut(&id) {
                    *by = Some(now + self.bootstrap_timeout);
                }
            }
            Event::BackendWaiting { id } => {
                if let Some(by) = self.starting.get_mut(&id) {
                    *by = None;
                }
            }
            Event::TokenObtained { token, now_ms } => {
                if let Some(credentials) = &mut self.credentials
                    && credentials.obtained(now, now_ms, token)
                {
                    actions.push(Action::TokensChanged { tokens: credentials.tokens() });
                }
            }
            Event::TokenFailed { service } => {
                if let Some(credentials) = &mut self.credentials
                    && let Some(wait) = credentials.failed(now, &service)
                {
                    let failures = credentials.failures(&service);
                    actions.push(Action::TokenRetry { service, failures, wait });
                }
            }
        }
        actions
    }

    /// Removes executors whose time ran out (see `Registry::expired`), fails starts
    /// that took too long, and lets dynamic allocation look at the load.
    pub fn handle_timeout(&mut self, now: Instant) -> Vec<Action> {
        self.clock = Some(now);
        let mut actions = Vec::new();
        for (id, incarnation, reason) in self.registry.expired(now) {
            self.remove(now, id, incarnation, reason, &mut actions);
        }
        if self.scheduler.poll_timeout().is_some_and(|at| now >= at) {
            let outputs = self.scheduler.handle_timeout(now);
            self.apply_outputs(now, outputs, &mut actions);
        }
        if let Some(credentials) = &mut self.credentials {
            let mut expired = false;
            for renewal in credentials.step(now) {
                match renewal {
                    Renewal::Fetch(service) => actions.push(Action::FetchToken { service }),
                    Renewal::Expired(_) => expired = true,
                }
            }
            if expired {
                actions.push(Action::TokensChanged { tokens: credentials.tokens() });
            }
        }
        let late: Vec<ExecutorId> = self
            .starting
            .iter()
            .filter(|(_, by)| by.is_some_and(|by| now >= by))
            .map(|(id, _)| id.clone())
            .collect();
        for id in late {
            self.starting.remove(&id);
            actions.push(Action::AbandonStart { executor: id.clone() });
            let reason =
                format!("executor {id} did not register within {} ms", self.bootstrap_timeout.as_millis());
            self.start_failed(now, reason, &mut actions);
        }
        let due = self.allocator.as_ref().and_then(Allocator::next_wake).is_some_and(|at| now >= at);
        if self.allocator.is_some() && (due || self.allocated_at.is_none_or(|at| now >= at + TICK)) {
            self.allocated_at = Some(now);
            self.allocate(now, &mut actions);
        }
        self.step_leaving(now, &mut actions);
        actions
    }

    /// When `handle_timeout` should run next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let (tick, wake) = match (&self.allocator, self.allocated_at) {
            (Some(a), _) if a.given_up().is_some() => (None, None),
            (Some(a), Some(at)) => (Some(at + TICK), a.next_wake()),
            // Not looked at the load yet: as soon as the caller can.
            (Some(a), None) => (self.clock, a.next_wake()),
            (None, _) => (None, None),
        };
        let renewal = self.credentials.as_ref().and_then(Credentials::next_wake);
        let collect = self.scheduler.poll_timeout();
        let leaving = self.leaving.deadline();
        [
            self.registry.poll_timeout(),
            self.starting.values().flatten().min().copied(),
            tick,
            wake,
            renewal,
            collect,
            leaving,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Why executors cannot be started, once dynamic allocation gave up.
    pub fn allocation_given_up(&self) -> Option<&str> {
        self.allocator.as_ref().and_then(|a| a.given_up())
    }

    /// How many executors the allocation policy wants now, when the driver starts them.
    pub fn allocation_target(&self) -> Option<u32> {
        let view = View {
            pending_tasks: self.scheduler.queued(),
            running_tasks: self.scheduler.running_tasks(),
            executors: Vec::new(),
        };
        self.allocator.as_ref().map(|a| a.target(&view))
    }

    /// Executors asked of the backend and not yet registered.
    pub fn executors_starting(&self) -> u32 {
        self.starting.len() as u32
    }

    /// Steps the allocation policy and carries out what it decides.
    fn allocate(&mut self, now: Instant, actions: &mut Vec<Action>) {
        // An idle executor holding map outputs is given back as any other: it hands
        // them to executors that stay before it goes (see `leaving`).
        let view = View {
            pending_tasks: self.scheduler.queued(),
            running_tasks: self.scheduler.running_tasks(),
            executors: self.scheduler.usable_executors().map(|(id, busy)| (id.clone(), busy)).collect(),
        };
        let Some(allocator) = &mut self.allocator else { return };
        for decision in allocator.step(now, &view) {
            match decision {
                Decision::Request(count) => {
                    let ids: Vec<ExecutorId> = (0..count)
                        .map(|_| {
                            self.next_started += 1;
                            ExecutorId::from(format!("dyn-{}", self.next_started))
                        })
                        .collect();
                    for id in &ids {
                        self.starting.insert(id.clone(), Some(now + self.bootstrap_timeout));
                    }
                    actions.push(Action::StartExecutors { ids });
                }
                Decision::Release(id) => {
                    let Some(incarnation) = self.registry.incarnation_of(&id) else { continue };
                    if self.registry.drain(&id, incarnation) {
                        // Nothing new goes there from now on.
                        self.leaving.adopter_gone(&id);
                        self.leaving.start(&id, incarnation);
                        self.step(now, Input::ExecutorDecommissioning { id: id.clone() }, actions);
                        actions.push(Action::Decommission { executor: id, incarnation });
                    }
                }
                Decision::GiveUp(reason) => self.give_up(now, reason, actions),
            }
        }
    }

    fn start_failed(&mut self, now: Instant, reason: String, actions: &mut Vec<Action>) {
        let Some(allocator) = &mut self.allocator else { return };
        if let Some(Decision::GiveUp(reason)) = allocator.start_failed(now, reason) {
            self.give_up(now, reason, actions);
        }
    }

    /// No executor can be started: with none left, every job fails with the reason.
    fn give_up(&mut self, now: Instant, reason: String, actions: &mut Vec<Action>) {
        if self.scheduler.live_executors() > 0 {
            return;
        }
        let jobs: Vec<JobId> = self.scheduler.jobs().collect();
        for job in jobs {
            let error = JobError::NoExecutors(reason.clone());
            self.step(now, Input::FailJob { job, error }, actions);
        }
    }

    /// A report of an attempt the core does not hold: the answer to a kill still counts
    /// for the executor (once); anything else is stale.
    fn unheld(&mut self, id: &ExecutorId, incarnation: Incarnation, attempt: Attempt, succeeded: bool) {
        let answered_kill = self.registry.current(id, incarnation).is_some()
            && self.killed.get_mut(id).is_some_and(|killed| killed.remove(&attempt));
        if answered_kill {
            self.registry.count(id, incarnation, succeeded);
        } else {
            self.stale += 1;
        }
    }

    fn remove(
        &mut self,
        now: Instant,
        id: ExecutorId,
        incarnation: Incarnation,
        reason: String,
        actions: &mut Vec<Action>,
    ) {
        let Some(entry) = self.registry.current(&id, incarnation) else {
            self.stale += 1;
            return;
        };
        let draining = entry.state == Lifecycle::Draining;
        // Copies it finished handing over still count; an adopter going takes its own.
        let copied = self.leaving.left_early(&id, incarnation);
        self.switch(&id, incarnation, copied);
        self.leaving.adopter_gone(&id);
        // One loss, one event: every map output it held is gone at once, before its
        // attempts are placed elsewhere, so no reducer starts without them.
        let gone = self.outputs.executor_lost(&id, incarnation);
        // An executor that was draining and had nothing left left as asked (and says
        // what it could not hand over).
        let reason = match (draining && self.scheduler.is_idle(&id), gone.len()) {
            (true, 0) => "decommissioned".to_owned(),
            (true, n) => {
                format!("decommissioned; {n} map outputs it held were not handed over and run again")
            }
            (false, _) => reason,
        };
        let Some(entry) = self.registry.remove(&id, incarnation, reason.clone()) else { return };
        self.killed.remove(&id);
        if let Some(allocator) = &mut self.allocator {
            allocator.removed(&id);
        }
        actions.push(Action::ExecutorRemoved { executor: id.clone(), incarnation, reason: reason.clone() });
        self.outputs_gone(now, gone, entry.state == Lifecycle::Pending, actions);
        if entry.state != Lifecycle::Pending {
            self.step(now, Input::ExecutorLost { id, reason }, actions);
        }
        // The last executor went and no other can be started: nothing will run.
        if let Some(reason) = self.allocation_given_up().map(str::to_owned) {
            self.give_up(now, reason, actions);
        }
    }

    /// Steps the scheduler and turns what it says into actions, launches batched per
    /// executor and last.
    fn step(&mut self, now: Instant, input: Input, actions: &mut Vec<Action>) {
        let outputs = self.scheduler.handle(now, input);
        self.apply_outputs(now, outputs, actions);
    }

    fn apply_outputs(&mut self, now: Instant, outputs: Vec<Output>, actions: &mut Vec<Action>) {
        let mut launches = Vec::new();
        for output in outputs {
            match output {
                Output::Launch { executor, attempts } => {
                    for attempt in &attempts {
                        if let Some(counts) = self.jobs.get_mut(&attempt.job) {
                            counts.attempts += 1;
                        }
                        if let Some(dag) = self.dags.get_mut(&attempt.job) {
                            dag.launched(attempt.index);
                        }
                    }
                    launches.push((executor, attempts));
                }
                Output::Decided(decided) => {
                    // The job's done count moves with what the scheduler decided.
                    match &decided {
                        Decided::TaskDone { attempt } => {
                            self.count_done(attempt.job, |d| d.saturating_add(1));
                            if let Some(dag) = self.dags.get_mut(&attempt.job) {
                                dag.task(attempt.index, true);
                            }
                        }
                        Decided::TaskLost { job, index } => {
                            self.count_done(*job, |d| d.saturating_sub(1));
                            let map =
                                self.stage_writing(Attempt { job: *job, index: *index, number: 0 }).is_some();
                            if let Some(counts) = self.jobs.get_mut(job) {
                                counts.outputs_lost += 1;
                                counts.maps_rerun += u32::from(map);
                            }
                            if let Some(dag) = self.dags.get_mut(job) {
                                dag.task(*index, false);
                            }
                        }
                        Decided::Speculated { attempt, .. } => {
                            if let Some(counts) = self.jobs.get_mut(&attempt.job) {
                                counts.speculative += 1;
                            }
                        }
                        // A copy is always the later attempt of its task.
                        Decided::SpeculationEnded { winner, loser, .. } if winner.number > loser.number => {
                            if let Some(counts) = self.jobs.get_mut(&winner.job) {
                                counts.speculative_won += 1;
                            }
                        }
                        _ => {}
                    }
                    actions.push(Action::Decided(decided));
                }
                Output::Collect { executor, job } => {
                    if let Some(incarnation) = self.incarnation(&executor) {
                        actions.push(Action::Collect { executor, incarnation, job });
                    }
                }
                Output::Kill { executor, attempt } => {
                    if let Some(incarnation) = self.incarnation(&executor) {
                        let killed = self.killed.entry(executor.clone()).or_default();
                        // An executor that never answers its kills cannot grow this
                        // without end: past the cap, the old ones are forgotten.
                        if killed.len() >= KILLED_KEPT {
                            killed.clear();
                        }
                        killed.insert(attempt);
                        actions.push(Action::Kill { executor, incarnation, attempt });
                    }
                }
                Output::JobSucceeded { job } => {
                    let (counts, stages) = self.job_ended(now, job);
                    actions.push(Action::JobSucceeded { job, counts, stages });
                }
                Output::JobFailed { job, reason } => {
                    let (counts, stages) = self.job_ended(now, job);
                    actions.push(Action::JobFailed { job, reason, counts, stages });
                }
            }
        }
        let mut unsourced = Vec::new();
        for (executor, attempts) in launches {
            let Some(incarnation) = self.incarnation(&executor) else { continue };
            let attempts = attempts
                .into_iter()
                .filter_map(|attempt| match self.whole_launch(attempt) {
                    Ok(launch) => Some(launch),
                    Err(e) => {
                        unsourced.push((executor.clone(), incarnation, attempt, e));
                        None
                    }
                })
                .collect();
            actions.push(Action::Launch { executor, incarnation, attempts });
        }
        self.unsourced(now, unsourced, actions);
    }

    fn count_done(&mut self, job: JobId, change: impl FnOnce(u32) -> u32) {
        if let Some(counts) = self.jobs.get_mut(&job) {
            counts.done = change(counts.done);
        }
    }

    /// A run of a recurring job ended: its time sizes the fleet for the next.
    fn run_ended(&mut self, now: Instant, job: JobId, tasks: u32) {
        if let Some((period, submitted)) = self.recurring.remove(&job)
            && let Some(allocator) = &mut self.allocator
        {
            allocator.run_finished(period, now.saturating_duration_since(submitted), tasks);
        }
    }

    fn incarnation(&self, id: &ExecutorId) -> Option<Incarnation> {
        self.registry.incarnation_of(id)
    }

    /// A running job's counts.
    pub fn job(&self, job: JobId) -> Option<JobCounts> {
        self.jobs.get(&job).map(|c| JobCounts {
            running: self.scheduler.job_running(job),
            shuffle: self.first_shuffle(job),
            ..*c
        })
    }

    /// Registered executors that take new tasks.
    pub fn live_executors(&self) -> u32 {
        self.scheduler.live_executors() as u32
    }

    /// Task slots of the executors that take new tasks.
    pub fn total_slots(&self) -> u32 {
        self.scheduler.total_slots()
    }

    /// Whether the scheduler's placement index agrees with its executors (for tests).
    #[doc(hidden)]
    pub fn placement_index_is_true(&self) -> bool {
        self.scheduler.room_index_is_true()
    }

    /// Reports and messages dropped because they named an old incarnation, an attempt
    /// the executor does not hold, or a job that is not running.
    pub fn stale_reports(&self) -> u64 {
        self.stale
    }
}
