//! Property tests of the control core over random DAGs of stages (chains, joins,
//! diamonds, several roots) with executors lost, outputs that cannot be fetched,
//! speculative copies and decommissioned executors handing their outputs over.
//!
//! Whatever happens, no task is launched before every output it reads exists: each
//! launch names, for every shuffle its stage reads, holders that do hold those outputs
//! now, every map of the shuffle exactly once. No result task is done twice, the core
//! never has to fail a launch it could not source, and once executors answer honestly
//! every job ends, exactly once.

use flint_core::shuffle::ShuffleId;
use flint_core::{
    Action, ControlCore, CoreConfig, Decided, Event, ExecutorInfo, Incarnation, Policy, Speculation,
};
use flint_proto::{Attempt, ExecutorId, JobError, JobId, MapStatus, StageSpec, TaskFailure};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// A stage as drawn: its tasks, which earlier stages it tries to read (a bit each),
/// whether it writes a shuffle and into how many partitions.
type Drawn = (u32, u8, bool, u32);

/// A valid plan from what was drawn: a stage reads the earlier shuffles of as many
/// partitions as it has tasks that its bits pick; a shuffle nobody reads is not written.
fn plan(drawn: &[Drawn]) -> Vec<StageSpec> {
    let mut stages: Vec<StageSpec> = Vec::new();
    for (i, &(tasks, bits, writes, partitions)) in drawn.iter().enumerate() {
        let reads = (0..i as u32)
            .filter(|&j| bits & (1 << (j % 8)) != 0 && stages[j as usize].partitions == Some(tasks))
            .collect();
        let partitions = (writes && i + 1 < drawn.len()).then_some(partitions);
        stages.push(StageSpec { tasks, reads, partitions });
    }
    let read: BTreeSet<u32> = stages.iter().flat_map(|s| s.reads.clone()).collect();
    for (i, s) in stages.iter_mut().enumerate() {
        if !read.contains(&(i as u32)) {
            s.partitions = None;
        }
    }
    stages
}

#[derive(Debug, Clone)]
enum Op {
    /// The n-th placed attempt ends (`ok`: it succeeds).
    Report {
        n: usize,
        ok: bool,
    },
    /// The n-th placed attempt reading a shuffle could not fetch the k-th output it was
    /// sent to (that output is corrupt on its holder: gone).
    FetchFail {
        n: usize,
        k: usize,
    },
    Lose {
        exec: usize,
    },
    Join {
        exec: usize,
    },
    Drain {
        exec: usize,
    },
    /// The n-th copy asked of an adopter is answered (`ok`: copied, else refused).
    Adopt {
        n: usize,
        ok: bool,
    },
    Advance {
        ms: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (any::<usize>(), prop::bool::weighted(0.9)).prop_map(|(n, ok)| Op::Report { n, ok }),
        2 => (any::<usize>(), any::<usize>()).prop_map(|(n, k)| Op::FetchFail { n, k }),
        1 => (0..4usize).prop_map(|exec| Op::Lose { exec }),
        2 => (0..4usize).prop_map(|exec| Op::Join { exec }),
        1 => (0..4usize).prop_map(|exec| Op::Drain { exec }),
        2 => (any::<usize>(), prop::bool::weighted(0.8)).prop_map(|(n, ok)| Op::Adopt { n, ok }),
        2 => (0..3000u64).prop_map(|ms| Op::Advance { ms }),
    ]
}

fn stage() -> impl Strategy<Value = Drawn> {
    (1..=3u32, any::<u8>(), prop::bool::weighted(0.7), 1..=3u32)
}

/// A placed attempt, as its executor got it.
#[derive(Debug, Clone)]
struct Placed {
    executor: ExecutorId,
    incarnation: Incarnation,
    attempt: Attempt,
    since: Instant,
    /// (shuffle, holder, its incarnation, map) for every output it reads.
    reads: Vec<(u32, ExecutorId, Incarnation, u32)>,
}

#[derive(Debug, Default)]
struct JobSeen {
    stages: Vec<StageSpec>,
    results_done: BTreeSet<u32>,
    ended: u32,
    succeeded: bool,
    failed: Option<JobError>,
}

impl JobSeen {
    fn stage_of(&self, index: u32) -> (usize, u32) {
        let mut first = 0;
        for (i, s) in self.stages.iter().enumerate() {
            if index < first + s.tasks {
                return (i, index - first);
            }
            first += s.tasks;
        }
        panic!("task {index} is past the job's stages")
    }
}

type Copy = (ExecutorId, Incarnation, ShuffleId, (ExecutorId, Incarnation), Vec<u32>);

/// An executor's life.
type Life = (ExecutorId, Incarnation);

struct World {
    core: ControlCore,
    now: Instant,
    live: BTreeMap<ExecutorId, Incarnation>,
    /// The outputs each executor life holds: (job, shuffle, map).
    holds: BTreeMap<Life, BTreeSet<(JobId, u32, u32)>>,
    placed: Vec<Placed>,
    jobs: BTreeMap<JobId, JobSeen>,
    copies: Vec<Copy>,
    /// The stages of the job that ended last, as its end gave them.
    last_stages: Vec<flint_proto::StageReport>,
}

impl World {
    fn new(plans: Vec<Vec<StageSpec>>, speculate: bool) -> World {
        let speculation = speculate.then(|| Speculation {
            multiplier: 1.5,
            quantile: 0.5,
            min_runtime: Duration::from_millis(100),
            interval: Duration::from_millis(100),
        });
        let core = ControlCore::new(CoreConfig {
            policy: Policy { exclude_after: None, pipeline: 1, max_executor_losses: None, speculation },
            heartbeat_timeout: Duration::from_secs(3600),
            bootstrap_timeout: Duration::from_secs(3600),
            allocation: None,
            backend: "static",
            decommission_timeout: Duration::from_secs(5),
            max_stage_attempts: 4,
        });
        let mut world = World {
            core,
            now: Instant::now(),
            live: BTreeMap::new(),
            holds: BTreeMap::new(),
            placed: Vec::new(),
            jobs: BTreeMap::new(),
            copies: Vec::new(),
            last_stages: Vec::new(),
        };
        for exec in 0..3 {
            world.join(exec);
        }
        for (n, stages) in plans.into_iter().enumerate() {
            let job = JobId(n as u64 + 1);
            world.jobs.insert(job, JobSeen { stages: stages.clone(), ..JobSeen::default() });
            let submitted = Event::JobSubmitted {
                job,
                stages,
                max_failures: 4,
                period: None,
                speculate,
                remote_input: false,
            };
            world.handle(submitted);
        }
        world
    }

    fn handle(&mut self, event: Event) {
        let actions = self.core.handle(self.now, event);
        self.apply(actions);
    }

    fn join(&mut self, exec: usize) {
        let name: ExecutorId = format!("e{exec}").into();
        if self.live.contains_key(&name) {
            return;
        }
        let Ok((id, incarnation)) = self.core.reserve(self.now, Some(name), None) else { return };
        self.live.insert(id.clone(), incarnation);
        let info = ExecutorInfo { host: "h".into(), cores: 2, memory: 1 << 30, slots: 2 };
        self.handle(Event::Registered { id, incarnation, info });
    }

    fn lose(&mut self, id: &ExecutorId) {
        let Some(incarnation) = self.live.get(id).copied() else { return };
        self.handle(Event::Lost { id: id.clone(), incarnation, reason: "killed".into() });
    }

    fn gone(&mut self, id: &ExecutorId, incarnation: Incarnation) {
        if self.live.get(id) == Some(&incarnation) {
            self.live.remove(id);
        }
        self.holds.remove(&(id.clone(), incarnation));
        self.placed.retain(|p| !(p.executor == *id && p.incarnation == incarnation));
        self.copies.retain(|c| !(c.0 == *id && c.1 == incarnation));
    }

    fn apply(&mut self, actions: Vec<Action>) {
        let mut leaving = Vec::new();
        for action in actions {
            match action {
                Action::Launch { executor, incarnation, attempts } => {
                    assert_eq!(self.live.get(&executor), Some(&incarnation), "launch on a dead executor");
                    for launch in attempts {
                        let attempt = launch.attempt;
                        let seen = &self.jobs[&attempt.job];
                        assert_eq!(seen.ended, 0, "{attempt} launched after its job ended");
                        let (stage, partition) = seen.stage_of(attempt.index);
                        let spec = &seen.stages[stage];
                        let shuffles: Vec<u32> = launch.reads.iter().map(|r| r.shuffle).collect();
                        assert_eq!(
                            shuffles, spec.reads,
                            "{attempt}: one read for each shuffle its stage reads"
                        );
                        let mut reads = Vec::new();
                        for read in &launch.reads {
                            assert_eq!(read.partition, partition, "{attempt} reads its own partition");
                            assert!(read.input.inline.is_empty(), "no map of the test sends slices inline");
                            let mut maps = Vec::new();
                            for holder in &read.input.holders {
                                let life = (holder.executor.clone(), holder.incarnation);
                                for &(map, _) in &holder.slices {
                                    let held = self
                                        .holds
                                        .get(&life)
                                        .is_some_and(|h| h.contains(&(attempt.job, read.shuffle, map)));
                                    assert!(
                                        held,
                                        "{attempt} sent to {life:?} for map {map} of shuffle {} it does not hold",
                                        read.shuffle
                                    );
                                    maps.push(map);
                                    reads.push((
                                        read.shuffle,
                                        holder.executor.clone(),
                                        holder.incarnation,
                                        map,
                                    ));
                                }
                            }
                            maps.sort_unstable();
                            let every: Vec<u32> = (0..seen.stages[read.shuffle as usize].tasks).collect();
                            assert_eq!(maps, every, "{attempt}: every map of shuffle {} once", read.shuffle);
                        }
                        let twice = self
                            .placed
                            .iter()
                            .filter(|p| p.attempt.job == attempt.job && p.attempt.index == attempt.index)
                            .count();
                        assert!(twice < 2, "{attempt}: a third attempt placed at once");
                        let since = self.now;
                        self.placed.push(Placed {
                            executor: executor.clone(),
                            incarnation,
                            attempt,
                            since,
                            reads,
                        });
                    }
                }
                Action::Decided(Decided::TaskDone { attempt }) => {
                    let seen = self.jobs.get_mut(&attempt.job).expect("a job of the test");
                    let (stage, _) = seen.stage_of(attempt.index);
                    if seen.stages[stage].partitions.is_none() {
                        assert!(seen.results_done.insert(attempt.index), "result task {attempt} done twice");
                    }
                }
                Action::TaskFailed {
                    failure: TaskFailure::FetchFailed { maps, reason, .. },
                    attempt,
                    ..
                } if maps.is_empty() => {
                    panic!("{attempt} was placed before its inputs were there: {reason}")
                }
                Action::Kill { executor, incarnation, attempt } => {
                    self.placed.retain(|p| {
                        !(p.executor == executor && p.incarnation == incarnation && p.attempt == attempt)
                    });
                }
                Action::ExecutorRemoved { executor, incarnation, .. } => self.gone(&executor, incarnation),
                Action::Adopt { executor, incarnation, shuffle, from, outputs } => {
                    let maps = outputs.iter().map(|o| o.0).collect();
                    self.copies.push((executor, incarnation, shuffle, from, maps));
                }
                Action::Leave { executor, incarnation } => leaving.push((executor, incarnation)),
                Action::JobSucceeded { job, counts, stages } => {
                    let seen = self.jobs.get_mut(&job).expect("a job of the test");
                    let results: u32 =
                        seen.stages.iter().filter(|s| s.partitions.is_none()).map(|s| s.tasks).sum();
                    assert_eq!(
                        seen.results_done.len() as u32,
                        results,
                        "job {job} succeeded with results missing"
                    );
                    assert_eq!(counts.done, counts.tasks, "{counts:?}");
                    assert_eq!(stages.len(), seen.stages.len());
                    for s in &stages {
                        assert!(s.attempts >= s.tasks, "stage {} ran every task: {s:?}", s.id);
                    }
                    seen.ended += 1;
                    seen.succeeded = true;
                    self.placed.retain(|p| p.attempt.job != job);
                    self.last_stages = stages;
                }
                Action::JobFailed { job, reason, .. } => {
                    let seen = self.jobs.get_mut(&job).expect("a job of the test");
                    // The ops fail tasks and fetches: a job may fail of those, no other way.
                    let ours = match &reason {
                        JobError::TaskFailed { failure, .. } => match &**failure {
                            TaskFailure::Trap { .. } => true,
                            TaskFailure::FetchFailed { maps, .. } => !maps.is_empty(),
                            _ => false,
                        },
                        JobError::StageFailed { .. } => true,
                        _ => false,
                    };
                    assert!(ours, "job {job} failed: {reason}");
                    seen.ended += 1;
                    seen.failed = Some(reason);
                    self.placed.retain(|p| p.attempt.job != job);
                }
                _ => {}
            }
        }
        // A leaving executor let go exits; its connection closes.
        for (id, incarnation) in leaving {
            if self.live.get(&id) == Some(&incarnation) {
                self.handle(Event::Lost { id, incarnation, reason: "left".into() });
            }
        }
    }

    /// The n-th placed attempt ends.
    fn report(&mut self, n: usize, ok: bool) {
        if self.placed.is_empty() {
            return;
        }
        let p = self.placed.remove(n % self.placed.len());
        let elapsed = self.now.saturating_duration_since(p.since);
        let (id, incarnation, attempt) = (p.executor.clone(), p.incarnation, p.attempt);
        let seen = &self.jobs[&attempt.job];
        let (stage, map) = seen.stage_of(attempt.index);
        let event = match (ok, seen.stages[stage].partitions) {
            (false, _) => {
                let failure = TaskFailure::Trap { message: "boom".into(), backtrace: None };
                Event::TaskFailed { id, incarnation, attempt, failure }
            }
            (true, None) => Event::TaskSucceeded { id, incarnation, attempt, elapsed },
            (true, Some(partitions)) => {
                // Deterministic: every run of a map writes the same bytes.
                let status = MapStatus {
                    sizes: (0..partitions).map(|r| u64::from(r + map + 1)).collect(),
                    digest: [attempt.index as u8 ^ attempt.job.0 as u8; 32],
                    records: 1,
                    inline: Vec::new(),
                };
                let life = (p.executor.clone(), p.incarnation);
                self.holds.entry(life).or_default().insert((attempt.job, stage as u32, map));
                Event::MapSucceeded { id, incarnation, attempt, elapsed, status }
            }
        };
        self.handle(event);
    }

    fn fetch_fail(&mut self, n: usize, k: usize) {
        let readers: Vec<usize> =
            (0..self.placed.len()).filter(|&i| !self.placed[i].reads.is_empty()).collect();
        if readers.is_empty() {
            return;
        }
        let p = self.placed.remove(readers[n % readers.len()]);
        let (shuffle, holder, holder_life, map) = p.reads[k % p.reads.len()].clone();
        // What it could not read is corrupt where it lies: no one can read it there now.
        if let Some(h) = self.holds.get_mut(&(holder.clone(), holder_life)) {
            h.remove(&(p.attempt.job, shuffle, map));
        }
        let failure = TaskFailure::FetchFailed {
            executor: holder,
            incarnation: holder_life.0,
            shuffle,
            maps: vec![map],
            reason: "checksum mismatch".into(),
        };
        self.handle(Event::TaskFailed {
            id: p.executor,
            incarnation: p.incarnation,
            attempt: p.attempt,
            failure,
        });
    }

    fn adopt(&mut self, n: usize, ok: bool) {
        if self.copies.is_empty() {
            return;
        }
        let (id, incarnation, shuffle, from, maps) = self.copies.remove(n % self.copies.len());
        let source = self.holds.get(&from).cloned().unwrap_or_default();
        let (copied, failed): (Vec<u32>, Vec<u32>) =
            maps.into_iter().partition(|&m| ok && source.contains(&(shuffle.job, shuffle.index, m)));
        let holds = self.holds.entry((id.clone(), incarnation)).or_default();
        for &m in &copied {
            holds.insert((shuffle.job, shuffle.index, m));
        }
        let failed = failed.into_iter().map(|m| (m, "refused".to_owned())).collect();
        self.handle(Event::Adopted { id, incarnation, shuffle, from: from.1, maps: copied, failed });
    }

    fn advance(&mut self, by: Duration) {
        self.now += by;
        let actions = self.core.handle_timeout(self.now);
        self.apply(actions);
    }

    fn run(&mut self, op: Op) {
        match op {
            Op::Report { n, ok } => self.report(n, ok),
            Op::FetchFail { n, k } => self.fetch_fail(n, k),
            Op::Lose { exec } => self.lose(&format!("e{exec}").into()),
            Op::Join { exec } => self.join(exec),
            Op::Drain { exec } => {
                let id: ExecutorId = format!("e{exec}").into();
                if let Some(&incarnation) = self.live.get(&id) {
                    self.handle(Event::Draining { id, incarnation });
                }
            }
            Op::Adopt { n, ok } => self.adopt(n, ok),
            Op::Advance { ms } => self.advance(Duration::from_millis(ms)),
        }
    }

    fn all_ended(&self) -> bool {
        self.jobs.values().all(|j| j.ended == 1)
    }

    /// From here on every attempt succeeds and every copy is made; an executor joins
    /// whenever none takes work.
    fn settle(&mut self) {
        for round in 0..20_000 {
            if self.all_ended() {
                return;
            }
            if !self.copies.is_empty() {
                self.adopt(0, true);
            } else if !self.placed.is_empty() {
                self.report(0, true);
            } else {
                if self.core.live_executors() == 0 {
                    self.join(round % 4 + 4);
                }
                self.advance(Duration::from_secs(1));
            }
        }
        panic!("jobs never ended: {:?}", self.jobs.iter().map(|(j, s)| (*j, s.ended)).collect::<Vec<_>>());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn random_dags_read_only_outputs_that_exist_and_end_once(
        plans in prop::collection::vec(prop::collection::vec(stage(), 1..=6), 1..=2),
        ops in prop::collection::vec(op(), 0..160),
        speculate in any::<bool>(),
    ) {
        let plans: Vec<Vec<StageSpec>> = plans.iter().map(|p| plan(p)).collect();
        let mut world = World::new(plans, speculate);
        for op in ops {
            world.run(op);
        }
        world.settle();
        for (job, seen) in &world.jobs {
            prop_assert_eq!(seen.ended, 1, "job {} ended {} times", job, seen.ended);
        }
        prop_assert!(world.core.placement_index_is_true());
    }
}

/// The same plan with the map of a three-stage chain made unreadable again and again:
/// its reader's stage fails its job at `flint.stage.maxConsecutiveAttempts`, naming it.
#[test]
fn a_stage_whose_inputs_keep_going_fails_its_job_after_its_attempts_in_a_row() {
    let stages = vec![
        StageSpec { tasks: 2, reads: vec![], partitions: Some(2) },
        StageSpec { tasks: 2, reads: vec![0], partitions: Some(1) },
        StageSpec { tasks: 1, reads: vec![1], partitions: None },
    ];
    let mut world = World::new(vec![stages], false);
    let mut failed = None;
    for _ in 0..200 {
        if world.jobs[&JobId(1)].ended > 0 {
            break;
        }
        // A reader of stage 0 fails every time; everything else succeeds.
        match world.placed.iter().position(|p| p.reads.iter().any(|r| r.0 == 0)) {
            Some(n) => {
                let reader = world.placed[n].clone();
                world.placed.remove(n);
                world.placed.insert(0, reader);
                world.fetch_fail(0, 0);
            }
            None if !world.placed.is_empty() => world.report(0, true),
            None => world.advance(Duration::from_secs(1)),
        }
        if let Some(report) = world.core.stages(JobId(1)).get(1) {
            failed = Some(report.fetch_failures);
        }
    }
    let seen = &world.jobs[&JobId(1)];
    assert_eq!((seen.ended, seen.succeeded), (1, false), "the job failed");
    let reason = seen.failed.as_ref().unwrap();
    assert!(matches!(reason, JobError::StageFailed { stage: 1, attempts: 4, .. }), "{reason}");
    assert!(reason.to_string().contains("flint.stage.maxConsecutiveAttempts"), "{reason}");
    assert!(failed.is_some_and(|n| n >= 3), "stage 1's fetch failures were counted: {failed:?}");
}

/// A chain of three stages, the third running when an executor holding outputs of the
/// first two is lost: exactly its outputs run again, each in its stage, the second
/// stage's only once the first's it reads are back, and the stages count them.
#[test]
fn a_loss_during_the_third_stage_reruns_exactly_the_lost_outputs_of_every_stage() {
    let stages = vec![
        StageSpec { tasks: 4, reads: vec![], partitions: Some(2) },
        StageSpec { tasks: 2, reads: vec![0], partitions: Some(2) },
        StageSpec { tasks: 2, reads: vec![1], partitions: None },
    ];
    let mut world = World::new(vec![stages], false);
    let job = JobId(1);
    // The first two stages run; the third is placed.
    while world.placed.iter().any(|p| p.attempt.index < 6) {
        let n = world.placed.iter().position(|p| p.attempt.index < 6).unwrap();
        world.report(n, true);
    }
    assert!(world.placed.iter().all(|p| p.attempt.index >= 6), "the third stage runs: {:?}", world.placed);
    let lost: ExecutorId = "e1".into();
    let life = (lost.clone(), world.live[&lost]);
    let held = world.holds.get(&life).cloned().unwrap_or_default();
    let of = |stage: u32| held.iter().filter(|(_, s, _)| *s == stage).count() as u32;
    assert!(of(0) > 0 && of(1) > 0, "e1 holds outputs of both stages: {held:?}");
    world.lose(&lost);
    let relaunched: Vec<u32> = world.placed.iter().map(|p| p.attempt.index).filter(|&i| i < 6).collect();
    assert!(relaunched.iter().all(|&i| i < 4), "the first stage's first, alone: {relaunched:?}");
    world.settle();
    let seen = &world.jobs[&job];
    assert!(seen.succeeded, "{:?}", seen.failed);
    let report = world.last_stages.clone();
    let rerun: Vec<u32> = report.iter().map(|s| s.rerun_tasks).collect();
    assert_eq!(rerun, [of(0), of(1), 0], "{report:?}");
}
