//! A job as the scheduler keeps it: its tasks, and its stages, each waiting for the
//! stages it reads.

use super::room::Ix;
use flint_proto::ExecutorId;
use std::collections::BTreeSet;
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
    /// Its successful attempts' run times, for speculation's median.
    succeeded: Vec<Duration>,
    /// The median of `succeeded` when it held this many.
    median: Option<(usize, Duration)>,
}

impl Stage {
    pub(super) fn new(start: u32, end: u32, parents: Vec<usize>) -> Stage {
        Stage { start, end, parents, undone: end - start, succeeded: Vec::new(), median: None }
    }

    pub(super) fn succeeded(&mut self, elapsed: Duration) {
        if self.succeeded.len() < (self.end - self.start) as usize {
            self.succeeded.push(elapsed);
        }
    }

    /// The median successful run time, worked out again only when a twentieth more of
    /// the stage's tasks have succeeded since.
    pub(super) fn median(&mut self) -> Option<Duration> {
        let n = self.succeeded.len();
        if n == 0 {
            return None;
        }
        match self.median {
            Some((at, median)) if n < at + at.div_ceil(20) => Some(median),
            _ => {
                let mut times = self.succeeded.clone();
                let (_, median, _) = times.select_nth_unstable(n / 2);
                let median = *median;
                self.median = Some((n, median));
                Some(median)
            }
        }
    }
}

#[derive(Debug, Default)]
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
    /// The executor holding the done task's output combined, until it delivers it.
    pub(super) held: Option<Ix>,
    /// Attempts that could not read their parents' outputs; at `max_failures` the job
    /// fails rather than rerun the same maps for ever.
    pub(super) fetch_failures: u32,
}

#[derive(Debug)]
pub(super) struct Job {
    pub(super) tasks: Vec<Task>,
    /// Moving average of successful attempts' run time, in seconds.
    pub(super) mean_secs: Option<f64>,
    pub(super) remaining: u32,
    /// Tasks with an attempt placed on an executor now.
    pub(super) running: u32,
    pub(super) max_failures: u32,
    /// Done tasks whose outputs executors hold combined (counted in `remaining`).
    pub(super) held: u32,
    /// When the executors holding outputs were asked for them, if they were and
    /// nothing ran again since.
    pub(super) collecting: Option<Instant>,
    /// Its stages, in order; one for a job of independent tasks.
    pub(super) stages: Vec<Stage>,
    /// Its slow tasks may get copies.
    pub(super) speculate: bool,
}

impl Job {
    pub(super) fn new(tasks: u32, max_failures: u32, stages: Vec<Stage>, speculate: bool) -> Job {
        Job {
            tasks: (0..tasks).map(|_| Task::default()).collect(),
            mean_secs: None,
            remaining: tasks,
            running: 0,
            max_failures: max_failures.max(1),
            held: 0,
            collecting: None,
            stages,
            speculate,
        }
    }

    pub(super) fn stage_of(&self, index: u32) -> usize {
        self.stages.iter().position(|s| index < s.end).unwrap_or(0)
    }

    /// Whether every stage `stage` reads is done.
    pub(super) fn ready(&self, stage: usize) -> bool {
        self.stages[stage].parents.iter().all(|&p| self.stages[p].undone == 0)
    }

    /// A task is done: its stage counts it, and the tasks of stages it made ready are
    /// returned to queue.
    pub(super) fn task_done(&mut self, index: u32) -> Vec<u32> {
        let stage = self.stage_of(index);
        self.stages[stage].undone -= 1;
        if self.stages[stage].undone > 0 {
            return Vec::new();
        }
        let mut ready = Vec::new();
        for (i, child) in self.stages.iter().enumerate() {
            if child.parents.contains(&stage) && self.ready(i) {
                ready.extend((child.start..child.end).filter(|&t| {
                    let task = &self.tasks[t as usize];
                    !task.done && task.running.is_none()
                }));
            }
        }
        ready
    }
}
