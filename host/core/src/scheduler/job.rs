//! A job as the scheduler keeps it: its tasks, and its stages, each waiting for the
//! stages it reads.

use super::room::Ix;
use flint_proto::ExecutorId;
use roaring::RoaringBitmap;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// One stage of a job as submitted: its task count and the stages it reads, by their
/// place in the list (each before it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagePlan {
    pub tasks: u32,
    pub parents: Vec<u32>,
}

#[derive(Debug)]
pub(super) struct Stage {
    /// Its tasks: `start..end` of the job's.
    pub(super) start: u32,
    pub(super) end: u32,
    pub(super) parents: Vec<usize>,
    /// Its tasks not done.
    pub(super) undone: u32,
    /// Run times of its successful attempts, for speculation's median: every one up
    /// to [`TIMES_KEPT`], then the latest that many.
    succeeded: Vec<Duration>,
    /// Successful attempts so far.
    successes: u64,
    /// The median of `succeeded` when this many had succeeded.
    median: Option<(u64, Duration)>,
}

/// Run times a stage keeps for its median: enough for a median within a percent or
/// two, and 64 KiB whatever the stage's size.
pub(super) const TIMES_KEPT: usize = 4096;

impl Stage {
    pub(super) fn new(start: u32, end: u32, parents: Vec<usize>) -> Stage {
        Stage { start, end, parents, undone: end - start, succeeded: Vec::new(), successes: 0, median: None }
    }

    pub(super) fn succeeded(&mut self, elapsed: Duration) {
        if self.succeeded.len() < TIMES_KEPT {
            self.succeeded.push(elapsed);
        } else {
            self.succeeded[(self.successes % TIMES_KEPT as u64) as usize] = elapsed;
        }
        self.successes += 1;
    }

    /// The median successful run time, worked out again only when a twentieth more of
    /// the stage's tasks have succeeded since.
    pub(super) fn median(&mut self) -> Option<Duration> {
        let n = self.successes;
        if n == 0 {
            return None;
        }
        match self.median {
            Some((at, median)) if n < at + at.div_ceil(20) => Some(median),
            _ => {
                let mut times = self.succeeded.clone();
                let middle = times.len() / 2;
                let (_, median, _) = times.select_nth_unstable(middle);
                let median = *median;
                self.median = Some((n, median));
                Some(median)
            }
        }
    }
}

#[derive(Debug)]
pub(super) struct Task {
    /// Launches so far; the next attempt's number.
    pub(super) launches: u32,
    /// Failures that count against `max_failures`.
    pub(super) failures: u32,
    /// Executors lost while an attempt of it ran there.
    pub(super) losses: u32,
    pub(super) failed_on: BTreeSet<ExecutorId>,
    /// The attempt's number and the executor it is placed on.
    pub(super) running: Option<(u32, Ix)>,
    /// When the running attempt was launched.
    pub(super) since: Option<Instant>,
    /// How many of its executor's attempts must end before it starts (it was queued
    /// behind others): its time as a straggler counts from then.
    pub(super) starts_after: u64,
    /// A copy of the running attempt, started because it straggled: its number, its
    /// executor and when it was launched.
    pub(super) copy: Option<(u32, Ix, Instant)>,
    pub(super) done: bool,
    /// Attempts that could not read their parents' outputs; at `max_failures` the job
    /// fails rather than rerun the same maps for ever.
    pub(super) fetch_failures: u32,
}

/// A task that never ran.
static IDLE: Task = Task::new(0, false);
/// A task whose one attempt succeeded.
static DONE: Task = Task::new(1, true);

impl Task {
    const fn new(launches: u32, done: bool) -> Task {
        Task {
            launches,
            failures: 0,
            losses: 0,
            failed_on: BTreeSet::new(),
            running: None,
            since: None,
            starts_after: 0,
            copy: None,
            done,
            fetch_failures: 0,
        }
    }

    /// Whether the task is one of those two, with nothing else to remember.
    fn plain(&self) -> bool {
        self.running.is_none()
            && self.copy.is_none()
            && self.failures == 0
            && self.losses == 0
            && self.fetch_failures == 0
            && self.failed_on.is_empty()
            && ((self.done && self.launches == 1) || (!self.done && self.launches == 0))
    }
}

/// A job's tasks, costing bytes rather than records: a task that never ran, or whose
/// one attempt succeeded, has none (a bit marks it done); a record is kept only while
/// an attempt of it runs, and for a task that failed, was retried, lost or copied. A
/// job of ten million tasks holds a few megabytes here, whatever its progress.
#[derive(Debug)]
pub(super) struct Tasks {
    count: u32,
    /// Done tasks without a record.
    done: RoaringBitmap,
    records: std::collections::HashMap<u32, Task, std::hash::BuildHasherDefault<IndexHasher>>,
}

impl Tasks {
    fn new(count: u32) -> Tasks {
        Tasks { count, done: RoaringBitmap::new(), records: Default::default() }
    }

    /// Task `index`, `None` out of range.
    pub(super) fn get(&self, index: u32) -> Option<&Task> {
        if index >= self.count {
            return None;
        }
        Some(match self.records.get(&index) {
            Some(task) => task,
            None if self.done.contains(index) => &DONE,
            None => &IDLE,
        })
    }

    /// Task `index` to change, `None` out of range; [`Tasks::settle`] it afterwards so
    /// that a record with nothing to remember goes.
    pub(super) fn get_mut(&mut self, index: u32) -> Option<&mut Task> {
        if index >= self.count {
            return None;
        }
        let done = &mut self.done;
        Some(self.records.entry(index).or_insert_with(|| {
            let was_done = done.remove(index);
            Task::new(u32::from(was_done), was_done)
        }))
    }

    /// Drops the record of task `index` if it holds nothing a bit does not.
    pub(super) fn settle(&mut self, index: u32) {
        if let Some(task) = self.records.get(&index).filter(|t| t.plain()) {
            if task.done {
                self.done.insert(index);
            }
            self.records.remove(&index);
        }
    }

    /// Tasks with records (every task with an attempt running is one), in no order.
    pub(super) fn records(&self) -> impl Iterator<Item = (u32, &Task)> {
        self.records.iter().map(|(i, t)| (*i, t))
    }

    pub(super) fn records_mut(&mut self) -> impl Iterator<Item = (u32, &mut Task)> {
        self.records.iter_mut().map(|(i, t)| (*i, t))
    }

    /// Records kept now (for the bound on the scheduler's memory).
    pub(super) fn kept(&self) -> usize {
        self.records.len()
    }
}

/// Hashes a task's index to itself, so that tasks launched together (neighbours in
/// the queue's ranges) sit in neighbouring buckets of the records' table, as they did
/// in a vector: a fleet's tens of thousands of attempts in flight are then walked in
/// memory order, not scattered over megabytes. The low 7 bits are also put in the top
/// ones, where the table reads the tag it compares before the key, so that neighbours
/// in one group of buckets are told apart by their tags. The indices are the
/// scheduler's own (`0..count`), so no peer picks them to collide.
#[derive(Default)]
pub(super) struct IndexHasher(u64);

impl std::hash::Hasher for IndexHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, _: &[u8]) {
        unreachable!("only task indices are hashed")
    }

    fn write_u32(&mut self, index: u32) {
        self.0 = u64::from(index) | (u64::from(index) << 57);
    }
}

#[derive(Debug)]
pub(super) struct Job {
    pub(super) tasks: Tasks,
    /// Moving average of successful attempts' run time, in seconds.
    pub(super) mean_secs: Option<f64>,
    /// Its outputs are too large to come in reports: each waits on its executor until
    /// the driver fetches it, so its tasks are never queued ahead on an executor.
    pub(super) large_outputs: bool,
    pub(super) remaining: u32,
    /// Tasks with an attempt placed on an executor now.
    pub(super) running: u32,
    pub(super) max_failures: u32,
    /// Done tasks whose outputs executors hold combined (counted in `remaining`).
    pub(super) held: u32,
    /// Those tasks, by the executor holding them until it delivers them.
    pub(super) holding: BTreeMap<Ix, RoaringBitmap>,
    /// When the executors holding outputs were asked for them, if they were and
    /// nothing ran again since.
    pub(super) collecting: Option<Instant>,
    /// Its stages, in order; one for a job of independent tasks.
    pub(super) stages: Vec<Stage>,
    /// Its slow tasks may get copies.
    pub(super) speculate: bool,
    /// Its tasks read across the network: they may be sent one ahead.
    pub(super) remote_input: bool,
}

impl Job {
    pub(super) fn new(
        tasks: u32,
        max_failures: u32,
        stages: Vec<Stage>,
        speculate: bool,
        remote_input: bool,
    ) -> Job {
        Job {
            tasks: Tasks::new(tasks),
            mean_secs: None,
            large_outputs: false,
            remaining: tasks,
            running: 0,
            max_failures: max_failures.max(1),
            held: 0,
            holding: BTreeMap::new(),
            collecting: None,
            stages,
            speculate,
            remote_input,
        }
    }

    pub(super) fn stage_of(&self, index: u32) -> usize {
        self.stages.iter().position(|s| index < s.end).unwrap_or(0)
    }

    /// Whether every stage `stage` reads is done.
    pub(super) fn ready(&self, stage: usize) -> bool {
        self.stages[stage].parents.iter().all(|&p| self.stages[p].undone == 0)
    }

    /// A task is done: its stage counts it, and the stages it made ready are returned
    /// to queue, as ranges of tasks (those done or running are passed over as they are
    /// taken).
    pub(super) fn task_done(&mut self, index: u32) -> Vec<std::ops::Range<u32>> {
        let stage = self.stage_of(index);
        self.stages[stage].undone -= 1;
        if self.stages[stage].undone > 0 {
            return Vec::new();
        }
        let mut ready = Vec::new();
        for (i, child) in self.stages.iter().enumerate() {
            if child.parents.contains(&stage) && self.ready(i) {
                ready.push(child.start..child.end);
            }
        }
        ready
    }

    /// The executor holding done task `index`'s output combined, if one does.
    pub(super) fn holder_of(&self, index: u32) -> Option<Ix> {
        self.holding.iter().find(|(_, held)| held.contains(index)).map(|(ix, _)| *ix)
    }
}
