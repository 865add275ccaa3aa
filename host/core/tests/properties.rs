//! Property tests of the control core: random sequences of what peers may say, honest or
//! not, over many executors. Whatever the sequence, the core never panics, no task has
//! two attempts placed at once, every task ends at most once, and a job whose executors
//! keep answering honestly ends exactly once.

use flint_core::{
    Action, AllocationConfig, ControlCore, CoreConfig, Event, ExecutorInfo, Incarnation, Policy,
};
use flint_proto::{Attempt, TaskFailure};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const JOB: u64 = 7;
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
    Cancel,
    /// The backend's n-th pending start registers (`ok`) or fails before it does.
    Start {
        n: usize,
        ok: bool,
    },
    /// A process the backend started dies.
    Exit {
        n: usize,
    },
    /// The backend says the n-th pending start (or any id at all) is under way.
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
        1 => Just(Op::Cancel),
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
    AllocationConfig {
        min_executors: 0,
        max_executors: 4,
        initial_executors: 0,
        backlog_timeout: Duration::from_secs(1),
        sustained_backlog_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(5),
        ratio: 1.0,
        cooldown: Duration::from_secs(2),
        max_pending: MAX_PENDING as u32,
        max_start_failures: 3,
        start_backoff: Duration::from_secs(1),
        slots_per_executor: 2,
    }
}

/// What the harness has seen the core decide, checked against the invariants.
struct World {
    core: ControlCore,
    now: Instant,
    live: BTreeMap<String, Incarnation>,
    /// Every incarnation ever registered, for ghosts.
    past: Vec<(String, Incarnation, Attempt)>,
    placed: BTreeMap<u32, (String, Incarnation, Attempt)>,
    /// Attempts the core killed: their late answer is not a lie.
    killed: BTreeSet<(String, Incarnation, Attempt)>,
    done: BTreeSet<u32>,
    ended: u32,
    succeeded: bool,
    tasks: u32,
    fresh: usize,
    /// Executors asked of the backend, not yet started or failed.
    starts: Vec<String>,
    /// Executors told to leave.
    leaving: BTreeSet<(String, Incarnation)>,
}

impl World {
    fn new(tasks: u32, executors: usize, allocation: Option<AllocationConfig>) -> World {
        let core = ControlCore::new(CoreConfig {
            policy: Policy { exclude_after: Some(2), pipeline: 4, max_executor_losses: None },
            heartbeat_timeout: TIMEOUT,
            bootstrap_timeout: TIMEOUT,
            allocation,
            backend: "local",
        });
        let mut world = World {
            core,
            now: Instant::now(),
            live: BTreeMap::new(),
            past: Vec::new(),
            placed: BTreeMap::new(),
            killed: BTreeSet::new(),
            done: BTreeSet::new(),
            ended: 0,
            succeeded: false,
            tasks,
            fresh: 100,
            starts: Vec::new(),
            leaving: BTreeSet::new(),
        };
        for e in 0..executors {
            world.join(e, 2);
        }
        let actions = world
            .core
            .handle(world.now, Event::JobSubmitted { job: JOB, tasks, max_failures: 3, period: None });
        world.apply(actions);
        world
    }

    fn join(&mut self, exec: usize, slots: u32) {
        self.join_as(format!("e{exec}"), slots);
    }

    fn join_as(&mut self, name: String, slots: u32) {
        let Ok((id, incarnation)) = self.core.reserve(self.now, Some(name), None) else { return };
        let info = ExecutorInfo { host: "h".into(), cores: slots, memory: 1 << 30, slots };
        let actions = self.core.handle(self.now, Event::Registered { id: id.clone(), incarnation, info });
        self.live.insert(id, incarnation);
        self.apply(actions);
    }

    fn apply(&mut self, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Launch { executor, incarnation, attempts } => {
                    assert_eq!(self.live.get(&executor), Some(&incarnation), "launch on a dead executor");
                    for attempt in attempts {
                        assert_eq!(attempt.job, JOB);
                        assert!(
                            !self.done.contains(&attempt.index),
                            "task {} launched after it ended",
                            attempt.index
                        );
                        let before =
                            self.placed.insert(attempt.index, (executor.clone(), incarnation, attempt));
                        assert!(before.is_none(), "task {} placed twice at once: {before:?}", attempt.index);
                        self.past.push((executor.clone(), incarnation, attempt));
                    }
                }
                Action::TaskDone { attempt } => {
                    assert!(self.placed.remove(&attempt.index).is_some(), "done without being placed");
                    assert!(self.done.insert(attempt.index), "task {} ended twice", attempt.index);
                }
                Action::TaskFailed { attempt, executor, .. } => {
                    let held = self.placed.remove(&attempt.index).expect("an accepted failure was placed");
                    assert_eq!((held.0, held.2), (executor, attempt));
                }
                Action::Kill { executor, incarnation, attempt } => {
                    self.placed.remove(&attempt.index);
                    self.killed.insert((executor, incarnation, attempt));
                }
                Action::ExecutorRemoved { executor, incarnation, .. } => {
                    if self.live.get(&executor) == Some(&incarnation) {
                        self.live.remove(&executor);
                    }
                    self.placed.retain(|_, (e, i, _)| !(*e == executor && *i == incarnation));
                }
                Action::JobSucceeded { job, counts } => {
                    assert_eq!(job, JOB);
                    assert_eq!(self.done.len() as u32, self.tasks, "succeeded with tasks missing");
                    assert_eq!(counts.done, self.tasks);
                    self.ended += 1;
                    self.succeeded = true;
                }
                Action::JobFailed { reason, .. } => {
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
                    self.ended += 1;
                    self.placed.clear();
                }
                Action::Retrying { .. } | Action::ExecutorExcluded { .. } => {}
                Action::Collect { .. } | Action::PartialAccepted { .. } | Action::TaskLost { .. } => {
                    panic!("no output is combined here: {action:?}")
                }
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
                    self.leaving.insert((executor, incarnation));
                }
            }
        }
        assert!(self.ended <= 1, "the job ended more than once");
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
        exec: String,
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

    fn nth_placed(&self, n: usize) -> Option<(String, Incarnation, Attempt)> {
        if self.placed.is_empty() {
            return None;
        }
        self.placed.values().nth(n % self.placed.len()).cloned()
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
                let id = format!("e{exec}");
                let incarnation = self.live.get(&id).copied().unwrap_or(0);
                let attempt = Attempt { job: JOB, index, number };
                let honest = self
                    .placed
                    .get(&index)
                    .is_some_and(|(e, i, a)| *e == id && *i == incarnation && *a == attempt);
                // The late answer to a kill is not a lie either.
                let killed = self.killed.contains(&(id.clone(), incarnation, attempt));
                if !honest && !killed {
                    let before = self.core.stale_reports();
                    self.report(id.clone(), incarnation, attempt, true, true);
                    self.report(id, incarnation, attempt, false, false);
                    assert_eq!(self.core.stale_reports(), before + 2, "a lie was believed");
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
                let id = format!("e{exec}");
                if let Some(incarnation) = self.live.get(&id).copied() {
                    let actions =
                        self.core.handle(self.now, Event::Lost { id, incarnation, reason: "test".into() });
                    self.apply(actions);
                }
            }
            Op::Join { exec, slots } => self.join(exec, slots),
            Op::Drain { exec } => {
                let id = format!("e{exec}");
                if let Some(incarnation) = self.live.get(&id).copied() {
                    let actions = self.core.handle(self.now, Event::Draining { id, incarnation });
                    self.apply(actions);
                }
            }
            Op::Heartbeat { exec } => {
                let id = format!("e{exec}");
                if let Some(incarnation) = self.live.get(&id).copied() {
                    let actions = self.core.handle(self.now, Event::Heartbeat { id, incarnation });
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
            Op::Cancel => {
                let actions =
                    self.core.handle(self.now, Event::CancelJob { job: JOB, reason: "test".into() });
                self.apply(actions);
            }
            Op::Start { n, ok } => self.start(n, ok),
            Op::Progress { n } => {
                let id = match self.starts.get(n % self.starts.len().max(1)) {
                    Some(id) if n % 5 != 0 => id.clone(),
                    _ => format!("dyn-{n}"),
                };
                let actions = self.core.handle(self.now, Event::BackendProgress { id });
                self.apply(actions);
            }
            Op::Exit { n } => {
                let started: Vec<String> =
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
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn no_sequence_breaks_the_core(tasks in 0..30u32, executors in 1..5usize, ops in prop::collection::vec(op(), 0..120)) {
        let mut world = World::new(tasks, executors, None);
        for op in ops {
            world.step(op);
            prop_assert!(world.core.placement_index_is_true(), "the placement index drifted");
        }
        // From here on every executor answers honestly and promptly; a fresh one joins
        // if none is left. The job must end, exactly once.
        for _ in 0..(tasks as usize * 8 + 16) {
            if world.ended == 1 {
                break;
            }
            match world.nth_placed(0) {
                Some((e, i, a)) => world.report(e, i, a, true, true),
                None => {
                    world.fresh += 1;
                    world.join(world.fresh, 2);
                }
            }
        }
        prop_assert!(world.core.placement_index_is_true(), "the placement index drifted");
        prop_assert_eq!(world.ended, 1, "the job never ended");
        prop_assert!(world.core.job(JOB).is_none());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// With dynamic allocation and a backend that fails starts, loses processes and
    /// drains executors: the invariants hold, no executor running a task is ever told to
    /// leave, starts stay under the cap, and once the backend and the executors behave the
    /// job ends exactly once (failed, if the policy gave up before any executor came).
    #[test]
    fn no_sequence_breaks_the_core_with_a_backend(tasks in 1..30u32, executors in 0..2usize, ops in prop::collection::vec(backend_op(), 0..150)) {
        let mut world = World::new(tasks, executors, Some(allocation()));
        for op in ops {
            world.step(op);
            prop_assert!(world.core.placement_index_is_true(), "the placement index drifted");
        }
        for _ in 0..(tasks as usize * 8 + 200) {
            if world.ended == 1 {
                break;
            }
            if let Some((e, i, a)) = world.nth_placed(0) {
                world.report(e, i, a, true, true);
            } else if !world.starts.is_empty() {
                world.start(0, true);
            } else {
                world.step(Op::Advance { secs: 1 });
            }
        }
        prop_assert_eq!(world.ended, 1, "the job never ended");
    }
}
