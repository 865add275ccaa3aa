//! Property tests of the control core: random sequences of what peers may say, honest or
//! not, over many executors and several jobs at once, some of whose outputs executors
//! hold combined. Whatever the sequence, the core never panics, no task has two attempts
//! placed at once, every task's output reaches its job's fold exactly once (as a task's
//! output or inside one accepted partial result, never both), no partial naming a task
//! its executor does not hold is accepted, and every job whose executors keep answering
//! honestly ends exactly once.

use flint_core::{
    Action, AllocationConfig, ControlCore, CoreConfig, Decided, Event, ExecutorInfo, Incarnation, Policy,
};
use flint_proto::{Attempt, DynamicAllocation, ExecutorId, JobId, TaskFailure};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
enum Op {
    /// The executor holding the n-th placed attempt reports it (`ok`: success).
    Report {
        n: usize,
        ok: bool,
        retryable: bool,
    },
    /// The same report twice.
    Twice {
        n: usize,
    },
    /// A report from the wrong executor, of a wrong attempt number or index.
    Lie {
        exec: usize,
        index: u32,
        number: u32,
    },
    /// An old incarnation of an executor reports what it once held.
    Ghost {
        n: usize,
    },
    Lose {
        exec: usize,
    },
    Join {
        exec: usize,
        slots: u32,
    },
    Drain {
        exec: usize,
    },
    Heartbeat {
        exec: usize,
    },
    Advance {
        secs: u64,
    },
    /// The n-th running job is cancelled.
    Cancel {
        n: usize,
    },
    /// The executor holding the n-th placed attempt reports it combined: it holds the
    /// output in its running value.
    Combine {
        n: usize,
    },
    /// The n-th holder of combined outputs hands them over (`lie`: naming one more task
    /// than it holds).
    HandOver {
        n: usize,
        lie: bool,
    },
    /// The n-th holder's combining instance failed: what it held is lost.
    DropHeld {
        n: usize,
    },
    /// The backend's n-th pending start registers (`ok`) or fails before it does.
    Start {
        n: usize,
        ok: bool,
    },
    /// A process the backend started dies.
    Exit {
        n: usize,
    },
    /// The backend says the n-th pending start (or any id at all) is under way, or
    /// waits for room.
    Progress {
        n: usize,
    },
    /// A decommissioned executor drains and leaves.
    Leave {
        n: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<usize>(), any::<bool>(), any::<bool>()).prop_map(|(n, ok, retryable)| Op::Report { n, ok, retryable }),
        1 => any::<usize>().prop_map(|n| Op::Twice { n }),
        2 => (0..6usize, 0..40u32, 0..6u32).prop_map(|(exec, index, number)| Op::Lie { exec, index, number }),
        1 => any::<usize>().prop_map(|n| Op::Ghost { n }),
        1 => (0..6usize).prop_map(|exec| Op::Lose { exec }),
        2 => (0..6usize, 1..4u32).prop_map(|(exec, slots)| Op::Join { exec, slots }),
        1 => (0..6usize).prop_map(|exec| Op::Drain { exec }),
        2 => (0..6usize).prop_map(|exec| Op::Heartbeat { exec }),
        1 => (0..15u64).prop_map(|secs| Op::Advance { secs }),
        1 => any::<usize>().prop_map(|n| Op::Cancel { n }),
        4 => any::<usize>().prop_map(|n| Op::Combine { n }),
        2 => (any::<usize>(), prop::bool::weighted(0.3)).prop_map(|(n, lie)| Op::HandOver { n, lie }),
        1 => any::<usize>().prop_map(|n| Op::DropHeld { n }),
    ]
}

/// The same, with a backend that starts, fails and loses executors.
fn backend_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => op(),
        3 => (any::<usize>(), prop::bool::weighted(0.7)).prop_map(|(n, ok)| Op::Start { n, ok }),
        1 => any::<usize>().prop_map(|n| Op::Exit { n }),
        1 => any::<usize>().prop_map(|n| Op::Progress { n }),
        2 => any::<usize>().prop_map(|n| Op::Leave { n }),
        2 => (1..4u64).prop_map(|secs| Op::Advance { secs }),
    ]
}

const MAX_PENDING: usize = 3;

fn allocation() -> AllocationConfig {
    let policy = DynamicAllocation {
        enabled: true,
        min_executors: 0,
        max_executors: 4,
        initial_executors: Some(0),
        backlog_timeout: Duration::from_secs(1),
        sustained_backlog_timeout: None,
        idle_timeout: Duration::from_secs(5),
        ratio: 1.0,
        cooldown: Duration::from_secs(2),
        max_pending: MAX_PENDING as u32,
        max_start_failures: 3,
        start_backoff: Duration::from_secs(1),
    };
    AllocationConfig { policy, slots_per_executor: 2 }
}

type Holder = (ExecutorId, Incarnation);

/// What the harness knows of one job.
#[derive(Default)]
struct JobSeen {
    tasks: u32,
    /// Tasks whose output reached the fold: a task's own (`TaskDone`) or inside an
    /// accepted partial result.
    folded: BTreeSet<u32>,
    ended: u32,
    succeeded: bool,
}

/// What the harness has seen the core decide, checked against the invariants.
struct World {
    core: ControlCore,
    now: Instant,
    live: BTreeMap<ExecutorId, Incarnation>,
    /// Every incarnation ever registered, for ghosts.
    past: Vec<(ExecutorId, Incarnation, Attempt)>,
    /// Attempts placed now, by task.
    placed: BTreeMap<(JobId, u32), (ExecutorId, Incarnation, Attempt)>,
    /// Tasks reported combined, by who holds their outputs (and truly does).
    held: BTreeMap<(Holder, JobId), BTreeSet<u32>>,
    /// Attempts the core killed: their late answer is not a lie.
    killed: BTreeSet<(ExecutorId, Incarnation, Attempt)>,
    jobs: BTreeMap<JobId, JobSeen>,
    /// The partial result just fed: by whom, of which job, the tasks it truly holds of
    /// those it names.
    handing: Option<(Holder, JobId, BTreeSet<u32>)>,
    /// The attempt just reported combined: its `TaskDone` says the task is done, its
    /// output held, not folded.
    combining: Option<(Holder, Attempt)>,
    /// Collects the core asked for and nobody answered yet.
    collects: BTreeSet<(Holder, JobId)>,
    fresh: usize,
    /// Executors asked of the backend, not yet started or failed.
    starts: Vec<ExecutorId>,
    /// Executors told to leave.
    leaving: BTreeSet<(ExecutorId, Incarnation)>,
}

impl World {
    fn new(jobs: &[u32], executors: usize, allocation: Option<AllocationConfig>) -> World {
        let core = ControlCore::new(CoreConfig {
            policy: Policy {
                exclude_after: Some(2),
                pipeline: 4,
                max_executor_losses: None,
                speculation: None,
            },
            heartbeat_timeout: TIMEOUT,
            bootstrap_timeout: TIMEOUT,
            allocation,
            backend: "local",
            decommission_timeout: Duration::from_secs(20),
            max_stage_attempts: 4,
        });
        let mut world = World {
            core,
            now: Instant::now(),
            live: BTreeMap::new(),
            past: Vec::new(),
            placed: BTreeMap::new(),
            held: BTreeMap::new(),
            killed: BTreeSet::new(),
            jobs: BTreeMap::new(),
            handing: None,
            combining: None,
            collects: BTreeSet::new(),
            fresh: 100,
            starts: Vec::new(),
            leaving: BTreeSet::new(),
        };
        for e in 0..executors {
            world.join(e, 2);
        }
        for (n, tasks) in jobs.iter().enumerate() {
            let job = JobId(n as u64 + 1);
            world.jobs.insert(job, JobSeen { tasks: *tasks, ..JobSeen::default() });
            let submitted = Event::JobSubmitted {
                job,
                stages: vec![flint_proto::StageSpec::tasks(*tasks)],
                max_failures: 3,
                period: None,
                speculate: false,
                // Every other job reads across the network: its tasks may go one ahead.
                remote_input: n % 2 == 1,
            };
            let actions = world.core.handle(world.now, submitted);
            world.apply(actions);
        }
        world
    }

    fn running(&self) -> Vec<JobId> {
        self.jobs.iter().filter(|(_, j)| j.ended == 0).map(|(id, _)| *id).collect()
    }

    fn all_ended(&self) -> bool {
        self.jobs.values().all(|j| j.ended == 1)
    }

    fn join(&mut self, exec: usize, slots: u32) {
        self.join_as(format!("e{exec}").into(), slots);
    }

    fn join_as(&mut self, name: ExecutorId, slots: u32) {
        let Ok((id, incarnation)) = self.core.reserve(self.now, Some(name), None) else { return };
        let info = ExecutorInfo { host: "h".into(), cores: slots, memory: 1 << 30, slots };
        let actions = self.core.handle(self.now, Event::Registered { id: id.clone(), incarnation, info });
        self.live.insert(id, incarnation);
        self.apply(actions);
    }

    fn fold(&mut self, job: JobId, index: u32) {
        let seen = self.jobs.get_mut(&job).expect("a job of the test");
        assert!(seen.folded.insert(index), "task {index} of job {job} reached the fold twice");
    }

    fn apply(&mut self, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Launch { executor, incarnation, attempts } => {
                    assert_eq!(self.live.get(&executor), Some(&incarnation), "launch on a dead executor");
                    for launch in attempts {
                        let attempt = launch.attempt;
                        let key = (attempt.job, attempt.index);
                        let seen = &self.jobs[&attempt.job];
                        assert_eq!(seen.ended, 0, "job {} launched after it ended", attempt.job);
                        assert!(
                            !seen.folded.contains(&attempt.index),
                            "task {key:?} launched after it was folded"
                        );
                        let held = self
                            .held
                            .iter()
                            .any(|((_, j), tasks)| *j == attempt.job && tasks.contains(&attempt.index));
                        assert!(!held, "task {key:?} launched while its output is held");
                        let before = self.placed.insert(key, (executor.clone(), incarnation, attempt));
                        assert!(before.is_none(), "task {key:?} placed twice at once: {before:?}");
                        self.past.push((executor.clone(), incarnation, attempt));
                    }
                }
                Action::Decided(Decided::TaskDone { attempt }) => {
                    let key = (attempt.job, attempt.index);
                    assert!(self.placed.remove(&key).is_some(), "task {key:?} done without being placed");
                    match self.combining.take() {
                        Some((holder, combined)) if combined == attempt => {
                            self.held.entry((holder, attempt.job)).or_default().insert(attempt.index);
                        }
                        _ => self.fold(attempt.job, attempt.index),
                    }
                }
                Action::Decided(Decided::Speculated { .. } | Decided::SpeculationEnded { .. }) => {
                    panic!("a copy of an attempt where the policy never speculates")
                }
                Action::TaskFailed { attempt, executor, .. } => {
                    let held = self
                        .placed
                        .remove(&(attempt.job, attempt.index))
                        .expect("an accepted failure was placed");
                    assert_eq!((held.0, held.2), (executor, attempt));
                }
                Action::Kill { executor, incarnation, attempt } => {
                    self.placed.remove(&(attempt.job, attempt.index));
                    self.killed.insert((executor, incarnation, attempt));
                }
                Action::ExecutorRemoved { executor, incarnation, .. } => {
                    if self.live.get(&executor) == Some(&incarnation) {
                        self.live.remove(&executor);
                    }
                    self.placed.retain(|_, (e, i, _)| !(*e == executor && *i == incarnation));
                }
                Action::JobSucceeded { job, counts, .. } => {
                    let seen = self.jobs.get_mut(&job).expect("a job of the test");
                    assert_eq!(
                        seen.folded.len() as u32,
                        seen.tasks,
                        "job {job} succeeded with outputs missing"
                    );
                    assert_eq!(counts.done, seen.tasks);
                    seen.ended += 1;
                    seen.succeeded = true;
                    self.forget(job);
                }
                Action::JobFailed { job, reason, .. } => {
                    if matches!(reason, flint_proto::JobError::NoExecutors(_)) {
                        assert!(
                            self.core.allocation_given_up().is_some(),
                            "no executors, yet the policy goes on"
                        );
                        assert_eq!(
                            self.core.live_executors(),
                            0,
                            "failed for want of executors with usable ones ({:?} connected)",
                            self.live
                        );
                    }
                    self.jobs.get_mut(&job).expect("a job of the test").ended += 1;
                    self.forget(job);
                }
                Action::Collect { executor, incarnation, job } => {
                    let holder = (executor, incarnation);
                    let holds = self.held.get(&(holder.clone(), job)).is_some_and(|t| !t.is_empty());
                    assert!(holds, "{holder:?} asked for job {job}'s outputs it does not hold");
                    let seen = &self.jobs[&job];
                    let held: usize =
                        self.held.iter().filter(|((_, j), _)| *j == job).map(|(_, t)| t.len()).sum();
                    assert_eq!(
                        seen.folded.len() + held,
                        seen.tasks as usize,
                        "job {job} collected before every task was done"
                    );
                    self.collects.insert((holder, job));
                }
                Action::Decided(Decided::PartialAccepted { job, tasks }) => {
                    let (holder, of, truly) =
                        self.handing.take().expect("accepted a partial nobody handed over");
                    assert_eq!(of, job);
                    let named = self.held.remove(&(holder.clone(), job)).unwrap_or_default();
                    assert_eq!(
                        named, truly,
                        "{holder:?}'s partial named tasks it does not hold, and was accepted"
                    );
                    assert_eq!(tasks as usize, named.len());
                    for index in named {
                        self.fold(job, index);
                    }
                }
                Action::Decided(Decided::TaskLost { job, index }) => {
                    let mut found = false;
                    for ((_, j), tasks) in self.held.iter_mut().filter(|((_, j), _)| *j == job) {
                        found |= tasks.remove(&index);
                        let _ = j;
                    }
                    assert!(found, "task {index} of job {job} lost, but nobody held it");
                    assert!(!self.jobs[&job].folded.contains(&index), "a folded task of job {job} lost");
                }
                Action::Decided(Decided::Retrying { .. } | Decided::ExecutorExcluded { .. }) => {}
                Action::FetchToken { .. } | Action::TokensChanged { .. } | Action::TokenRetry { .. } => {
                    panic!("no token is renewed here: {action:?}")
                }
                Action::StartExecutors { ids } => {
                    for id in &ids {
                        assert!(
                            !self.live.contains_key(id) && !self.starts.contains(id),
                            "id {id} given twice"
                        );
                    }
                    self.starts.extend(ids);
                    assert!(
                        self.starts.len() <= MAX_PENDING,
                        "more starts pending than allowed: {:?}",
                        self.starts
                    );
                }
                Action::AbandonStart { executor } => {
                    assert!(self.starts.contains(&executor), "abandoned a start never asked: {executor}");
                    self.starts.retain(|id| *id != executor);
                }
                Action::Decommission { executor, incarnation } => {
                    assert_eq!(
                        self.live.get(&executor),
                        Some(&incarnation),
                        "decommissioned a dead executor"
                    );
                    let busy = self.placed.values().any(|(e, i, _)| *e == executor && *i == incarnation);
                    assert!(!busy, "decommissioned {executor}, which runs a task: {:?}", self.placed);
                    let holds = self
                        .held
                        .iter()
                        .any(|(((e, i), _), t)| *e == executor && *i == incarnation && !t.is_empty());
                    assert!(!holds, "decommissioned {executor}, which holds outputs no one collected");
                    self.leaving.insert((executor, incarnation));
                }
                Action::Adopt { .. } => panic!("no job here writes map outputs: {action:?}"),
                Action::Leave { executor, incarnation } => {
                    assert_eq!(self.live.get(&executor), Some(&incarnation), "let go a dead executor");
                    let busy = self.placed.values().any(|(e, i, _)| *e == executor && *i == incarnation);
                    assert!(!busy, "let go {executor}, which runs a task: {:?}", self.placed);
                }
            }
        }
        // What a dead incarnation held is lost, and its tasks run again.
        for (((e, i), job), tasks) in &self.held {
            if self.jobs[job].ended == 0 && !tasks.is_empty() {
                assert_eq!(
                    self.live.get(e),
                    Some(i),
                    "{e}'s old life still holds job {job}'s tasks {tasks:?}"
                );
            }
        }
        for seen in self.jobs.values() {
            assert!(seen.ended <= 1, "a job ended more than once");
        }
    }

    /// A job ended: what is placed or held of it no longer matters.
    fn forget(&mut self, job: JobId) {
        self.placed.retain(|(j, _), _| *j != job);
        self.held.retain(|(_, j), _| *j != job);
        self.collects.retain(|(_, j)| *j != job);
    }

    /// The backend's n-th pending start registers, or its process exits first.
    fn start(&mut self, n: usize, ok: bool) {
        if self.starts.is_empty() {
            return;
        }
        let id = self.starts.remove(n % self.starts.len());
        if ok {
            self.join_as(id, 2);
        } else {
            let actions =
                self.core.handle(self.now, Event::BackendExited { id, reason: "exit status 2".into() });
            self.apply(actions);
        }
    }

    fn report(
        &mut self,
        exec: ExecutorId,
        incarnation: Incarnation,
        attempt: Attempt,
        ok: bool,
        retryable: bool,
    ) {
        let event = if ok {
            Event::TaskSucceeded { id: exec, incarnation, attempt, elapsed: Duration::from_millis(3) }
        } else {
            let failure = TaskFailure::Guest { message: "no".into(), retryable };
            Event::TaskFailed { id: exec, incarnation, attempt, failure }
        };
        let actions = self.core.handle(self.now, event);
        self.apply(actions);
    }

    /// The holder of a placed attempt reports it combined into what it holds.
    fn combine(&mut self, exec: ExecutorId, incarnation: Incarnation, attempt: Attempt) {
        self.combining = Some(((exec.clone(), incarnation), attempt));
        let event = Event::TaskCombined { id: exec, incarnation, attempt, elapsed: Duration::from_millis(3) };
        let actions = self.core.handle(self.now, event);
        self.apply(actions);
        assert!(self.combining.take().is_none(), "an honest combined report was not taken");
    }

    /// A holder hands over what it holds of a job (one more task named, if it lies).
    fn hand_over(&mut self, holder: Holder, job: JobId, lie: bool) {
        let truly = self.held.get(&(holder.clone(), job)).cloned().unwrap_or_default();
        let mut named: Vec<u32> = truly.iter().copied().collect();
        if lie {
            let tasks = self.jobs[&job].tasks;
            match (0..tasks).find(|t| !truly.contains(t)) {
                Some(extra) => named.push(extra),
                None => return,
            }
        }
        self.collects.remove(&(holder.clone(), job));
        // Only an honest partial from a live holder may be accepted.
        let honest = !lie && self.live.get(&holder.0) == Some(&holder.1);
        self.handing = honest.then(|| (holder.clone(), job, truly));
        let (id, incarnation) = holder;
        let actions = self.core.handle(self.now, Event::Partial { id, incarnation, job, tasks: named });
        self.apply(actions);
        self.handing = None;
    }

    fn nth_placed(&self, n: usize) -> Option<(ExecutorId, Incarnation, Attempt)> {
        if self.placed.is_empty() {
            return None;
        }
        self.placed.values().nth(n % self.placed.len()).cloned()
    }

    fn nth_holder(&self, n: usize) -> Option<(Holder, JobId)> {
        let holders: Vec<_> =
            self.held.iter().filter(|(_, t)| !t.is_empty()).map(|(k, _)| k.clone()).collect();
        (!holders.is_empty()).then(|| holders[n % holders.len()].clone())
    }

    fn step(&mut self, op: Op) {
        match op {
            Op::Report { n, ok, retryable } => {
                if let Some((e, i, a)) = self.nth_placed(n) {
                    self.report(e, i, a, ok, retryable);
                }
            }
            Op::Twice { n } => {
                if let Some((e, i, a)) = self.nth_placed(n) {
                    self.report(e.clone(), i, a, true, true);
                    self.report(e, i, a, true, true);
                }
            }
            Op::Lie { exec, index, number } => {
                let id = ExecutorId::from(format!("e{exec}"));
                let incarnation = self.live.get(&id).copied().unwrap_or(Incarnation(0));
                let Some(job) = self.running().first().copied() else { return };
                let attempt = Attempt { job, index, number };
                let honest = self
                    .placed
                    .get(&(job, index))
                    .is_some_and(|(e, i, a)| *e == id && *i == incarnation && *a == attempt);
                // The late answer to a kill is not a lie either.
                let killed = self.killed.contains(&(id.clone(), incarnation, attempt));
                if !honest && !killed {
                    let before = self.core.stale_reports();
                    self.report(id.clone(), incarnation, attempt, true, true);
                    self.report(id.clone(), incarnation, attempt, false, false);
                    let event =
                        Event::TaskCombined { id, incarnation, attempt, elapsed: Duration::from_millis(3) };
                    let actions = self.core.handle(self.now, event);
                    self.apply(actions);
                    assert_eq!(self.core.stale_reports(), before + 3, "a lie was believed");
                }
            }
            Op::Ghost { n } => {
                let ghosts: Vec<_> =
                    self.past.iter().filter(|(e, i, _)| self.live.get(e) != Some(i)).cloned().collect();
                if !ghosts.is_empty() {
                    let (e, i, a) = ghosts[n % ghosts.len()].clone();
                    let before = self.core.stale_reports();
                    self.report(e.clone(), i, a, true, true);
                    assert_eq!(self.core.stale_reports(), before + 1, "a ghost's report was believed");
                    // Nor does its partial result count.
                    self.hand_over((e.clone(), i), a.job, false);
                    // Its connection closing at last must not remove the id's new life.
                    let actions = self.core.handle(
                        self.now,
                        Event::Lost { id: e.clone(), incarnation: i, reason: "late".into() },
                    );
                    assert!(actions.is_empty(), "a ghost's loss removed {actions:?}");
                    if let Some(current) = self.live.get(&e) {
                        assert!(self.core.is_current(&e, *current));
                    }
                }
            }
            Op::Lose { exec } => {
                let id = ExecutorId::from(format!("e{exec}"));
                if let Some(incarnation) = self.live.get(&id).copied() {
                    let actions =
                        self.core.handle(self.now, Event::Lost { id, incarnation, reason: "test".into() });
                    self.apply(actions);
                }
            }
            Op::Join { exec, slots } => self.join(exec, slots),
            Op::Drain { exec } => {
                let id = ExecutorId::from(format!("e{exec}"));
                if let Some(incarnation) = self.live.get(&id).copied() {
                    let actions = self.core.handle(self.now, Event::Draining { id, incarnation });
                    self.apply(actions);
                }
            }
            Op::Heartbeat { exec } => {
                let id = ExecutorId::from(format!("e{exec}"));
                if let Some(incarnation) = self.live.get(&id).copied() {
                    let actions = self
                        .core
                        .handle(self.now, Event::Heartbeat { id, incarnation, progress: Vec::new() });
                    self.apply(actions);
                }
            }
            Op::Advance { secs } => {
                self.now += Duration::from_secs(secs);
                if self.core.poll_timeout().is_some_and(|t| t <= self.now) {
                    let actions = self.core.handle_timeout(self.now);
                    self.apply(actions);
                }
            }
            Op::Cancel { n } => {
                let running = self.running();
                if let Some(job) = running.get(n % running.len().max(1)).copied() {
                    let actions = self.core.handle(self.now, Event::CancelJob { job, reason: "test".into() });
                    self.apply(actions);
                }
            }
            Op::Combine { n } => {
                if let Some((e, i, a)) = self.nth_placed(n) {
                    self.combine(e, i, a);
                }
            }
            Op::HandOver { n, lie } => {
                if let Some((holder, job)) = self.nth_holder(n) {
                    self.hand_over(holder, job, lie);
                }
            }
            Op::DropHeld { n } => {
                if let Some((holder, job)) = self.nth_holder(n) {
                    let tasks: Vec<u32> = self.held[&(holder.clone(), job)].iter().copied().collect();
                    let (id, incarnation) = holder;
                    let actions =
                        self.core.handle(self.now, Event::CombinedLost { id, incarnation, job, tasks });
                    self.apply(actions);
                }
            }
            Op::Start { n, ok } => self.start(n, ok),
            Op::Progress { n } => {
                let id = match self.starts.get(n % self.starts.len().max(1)) {
                    Some(id) if n % 5 != 0 => id.clone(),
                    _ => format!("dyn-{n}").into(),
                };
                // Every third word is that it waits for room, the rest that it is under way.
                let event = match n % 3 {
                    0 => Event::BackendWaiting { id },
                    _ => Event::BackendProgress { id },
                };
                let actions = self.core.handle(self.now, event);
                self.apply(actions);
            }
            Op::Exit { n } => {
                let started: Vec<ExecutorId> =
                    self.live.keys().filter(|id| id.starts_with("dyn-")).cloned().collect();
                if !started.is_empty() {
                    let id = started[n % started.len()].clone();
                    let actions = self
                        .core
                        .handle(self.now, Event::BackendExited { id, reason: "killed by signal 9".into() });
                    self.apply(actions);
                }
            }
            Op::Leave { n } => {
                let leaving: Vec<_> = self.leaving.iter().cloned().collect();
                if !leaving.is_empty() {
                    let (id, incarnation) = leaving[n % leaving.len()].clone();
                    self.leaving.remove(&(id.clone(), incarnation));
                    let actions = self.core.handle(self.now, Event::Draining { id: id.clone(), incarnation });
                    self.apply(actions);
                    let actions =
                        self.core.handle(self.now, Event::Lost { id, incarnation, reason: "closed".into() });
                    self.apply(actions);
                }
            }
        }
    }

    /// From here on every executor answers honestly and promptly: placed attempts
    /// succeed (every other one combined), asked-for partials are handed over, and a
    /// fresh executor joins (or a start registers) when nothing else can move.
    fn honest_step(&mut self, backend: bool) {
        if let Some((holder, job)) = self.collects.iter().next().cloned() {
            self.hand_over(holder, job, false);
        } else if let Some((e, i, a)) = self.nth_placed(0) {
            match a.index % 2 {
                0 => self.report(e, i, a, true, true),
                _ => self.combine(e, i, a),
            }
        } else if backend && !self.starts.is_empty() {
            self.start(0, true);
        } else if backend {
            self.step(Op::Advance { secs: 1 });
        } else {
            self.fresh += 1;
            self.join(self.fresh, 2);
        }
    }
}

fn jobs() -> impl Strategy<Value = Vec<u32>> {
    prop::collection::vec(0..12u32, 1..4)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn no_sequence_breaks_the_core(jobs in jobs(), executors in 1..5usize, ops in prop::collection::vec(op(), 0..150)) {
        let mut world = World::new(&jobs, executors, None);
        for op in ops {
            world.step(op);
            prop_assert!(world.core.placement_index_is_true(), "the placement index drifted");
        }
        // Every job must end, exactly once.
        let total: u32 = jobs.iter().sum();
        for _ in 0..(total as usize * 16 + 64) {
            if world.all_ended() {
                break;
            }
            world.honest_step(false);
        }
        prop_assert!(world.core.placement_index_is_true(), "the placement index drifted");
        prop_assert!(world.all_ended(), "a job never ended");
        for job in world.jobs.keys() {
            prop_assert!(world.core.job(*job).is_none());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// With dynamic allocation and a backend that fails starts, loses processes and
    /// drains executors: the invariants hold, no executor running a task or holding
    /// outputs is ever told to leave, starts stay under the cap, and once the backend and
    /// the executors behave every job ends exactly once (failed, if the policy gave up
    /// before any executor came).
    #[test]
    fn no_sequence_breaks_the_core_with_a_backend(jobs in jobs(), executors in 0..2usize, ops in prop::collection::vec(backend_op(), 0..150)) {
        let mut world = World::new(&jobs, executors, Some(allocation()));
        for op in ops {
            world.step(op);
            prop_assert!(world.core.placement_index_is_true(), "the placement index drifted");
        }
        let total: u32 = jobs.iter().sum();
        for _ in 0..(total as usize * 16 + 400) {
            if world.all_ended() {
                break;
            }
            world.honest_step(true);
        }
        prop_assert!(world.all_ended(), "a job never ended");
    }
}
