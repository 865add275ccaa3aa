//! The task scheduler: a state machine without IO, in the manner of `quinn-proto`.
//!
//! The driver's event loop feeds it [`Input`]s with the current time and carries out the
//! [`Output`]s it returns: launches on free slots, kills, and job outcomes. It owns which
//! task runs where, how often each has failed, and which executors are usable; it knows
//! nothing of sockets, threads or wasm.

pub use flint_proto::{Attempt, ExecutorId, JobId};
use flint_proto::{JobError, TaskFailure};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    ExecutorAdded {
        id: ExecutorId,
        slots: u32,
    },
    /// The executor is gone; its running tasks go back to the queue without counting
    /// as failures.
    ExecutorLost {
        id: ExecutorId,
        reason: String,
    },
    /// The executor finishes what it runs and takes nothing new.
    ExecutorDecommissioning {
        id: ExecutorId,
    },
    JobSubmitted {
        job: JobId,
        tasks: u32,
        max_failures: u32,
    },
    TaskSucceeded {
        attempt: Attempt,
        executor: ExecutorId,
        /// How long the attempt ran: short tasks are pipelined.
        elapsed: Duration,
    },
    TaskFailed {
        attempt: Attempt,
        executor: ExecutorId,
        failure: TaskFailure,
    },
    CancelJob {
        job: JobId,
        reason: String,
    },
    /// The job cannot go on, for `error`.
    FailJob {
        job: JobId,
        error: JobError,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    Launch {
        executor: ExecutorId,
        attempt: Attempt,
    },
    /// The attempt's success was accepted: its output is the task's output. Reports of
    /// attempts already replaced are dropped without this.
    TaskDone {
        attempt: Attempt,
    },
    Kill {
        executor: ExecutorId,
        attempt: Attempt,
    },
    /// The executor failed too many distinct tasks and gets no new ones.
    ExecutorExcluded {
        executor: ExecutorId,
        failed_tasks: u32,
    },
    /// A failed attempt will be tried again.
    Retrying {
        attempt: Attempt,
        failure: TaskFailure,
    },
    JobSucceeded {
        job: JobId,
    },
    JobFailed {
        job: JobId,
        reason: JobError,
    },
}

#[derive(Debug)]
struct Executor {
    /// Join order: ties in placement go to the executor that joined first.
    seq: u64,
    slots: u32,
    running: BTreeSet<Attempt>,
    decommissioning: bool,
    /// Tasks that failed here (in a way that counts against them).
    failed_tasks: BTreeSet<(JobId, u32)>,
    excluded: bool,
}

impl Executor {
    fn usable(&self) -> bool {
        !self.decommissioning && !self.excluded
    }

    /// Attempts it may still take when each slot may hold `depth`.
    fn free(&self, depth: u32) -> u32 {
        if self.usable() {
            self.slots.saturating_mul(depth).saturating_sub(self.running.len() as u32)
        } else {
            0
        }
    }
}

/// Tasks of a job whose mean run time is below this are pipelined.
pub const SHORT_TASK: Duration = Duration::from_millis(50);

/// Tasks of a job whose mean run time is below this are pipelined [`TINY_DEPTH`] times
/// deeper: a round trip to the driver takes longer than several of them, and slots
/// would wait for work otherwise (no-op tasks: slots idle most of the time at 8 deep).
pub const TINY_TASK: Duration = Duration::from_millis(1);

/// How much deeper than [`Policy::pipeline`] tiny tasks are queued.
pub const TINY_DEPTH: u32 = 8;

/// Scheduling policy.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Exclude an executor once this many distinct tasks failed on it
    /// (`flint.excludeOnFailure.*`); `None` never excludes. The last usable executor
    /// is never excluded.
    pub exclude_after: Option<u32>,
    /// Attempts an executor may hold per slot for a job whose tasks are short (a mean
    /// under [`SHORT_TASK`]), and [`TINY_DEPTH`] times as many when they are tiny (under
    /// [`TINY_TASK`]); other jobs get one per slot, as in Spark, so that long tasks are
    /// never queued behind each other while a slot elsewhere is free. Above 1, an
    /// executor has the next short task at hand when one ends instead of waiting a
    /// round trip to the driver.
    pub pipeline: u32,
}

#[derive(Debug, Default)]
struct Task {
    /// Launches so far; the next attempt's number.
    launches: u32,
    /// Failures that count against `max_failures`.
    failures: u32,
    failed_on: BTreeSet<ExecutorId>,
    running: Option<(u32, ExecutorId)>,
    done: bool,
}

#[derive(Debug)]
struct Job {
    tasks: Vec<Task>,
    /// Moving average of successful attempts' run time, in seconds.
    mean_secs: Option<f64>,
    remaining: u32,
    /// Tasks with an attempt placed on an executor now.
    running: u32,
    max_failures: u32,
}

/// The scheduler's state. See the module documentation.
#[derive(Debug, Default)]
pub struct Scheduler {
    policy: Policy,
    executors: HashMap<ExecutorId, Executor>,
    /// Usable executors by room for attempts at each depth of [`Scheduler::depths`],
    /// then by join order (`seq`), so that placing an attempt costs a lookup, not a
    /// pass over the fleet. Kept by `reindex` whenever an executor's room or usability
    /// changes.
    by_room: [BTreeSet<(u32, Reverse<u64>)>; 3],
    /// Executor ids by `seq`.
    ids: HashMap<u64, ExecutorId>,
    next_seq: u64,
    jobs: BTreeMap<JobId, Job>,
    /// Tasks waiting for a slot, oldest job first; retries go to the front.
    queue: VecDeque<(JobId, u32)>,
}

impl Scheduler {
    pub fn new(policy: Policy) -> Self {
        Scheduler { policy, ..Self::default() }
    }

    /// Feeds one input; returns what to do, launches last.
    pub fn handle(&mut self, _now: Instant, input: Input) -> Vec<Output> {
        let mut out = Vec::new();
        match input {
            Input::ExecutorAdded { id, slots } => {
                if !self.executors.contains_key(&id) {
                    self.next_seq += 1;
                    self.ids.insert(self.next_seq, id.clone());
                    self.executors.insert(
                        id.clone(),
                        Executor {
                            seq: self.next_seq,
                            slots,
                            running: BTreeSet::new(),
                            decommissioning: false,
                            failed_tasks: BTreeSet::new(),
                            excluded: false,
                        },
                    );
                    self.reindex(&id, |_| {});
                }
            }
            Input::ExecutorLost { id, .. } => {
                self.unindex(&id);
                if let Some(exec) = self.executors.remove(&id) {
                    self.ids.remove(&exec.seq);
                    for attempt in exec.running.into_iter().rev() {
                        let Some(job) = self.jobs.get_mut(&attempt.job) else { continue };
                        if let Some(task) = job.tasks.get_mut(attempt.index as usize) {
                            task.running = None;
                            job.running -= 1;
                            self.queue.push_front((attempt.job, attempt.index));
                        }
                    }
                }
            }
            Input::ExecutorDecommissioning { id } => {
                self.reindex(&id, |exec| exec.decommissioning = true);
            }
            Input::JobSubmitted { job, tasks, max_failures } => {
                let state = Job {
                    tasks: (0..tasks).map(|_| Task::default()).collect(),
                    mean_secs: None,
                    remaining: tasks,
                    running: 0,
                    max_failures: max_failures.max(1),
                };
                self.jobs.insert(job, state);
                self.queue.extend((0..tasks).map(|i| (job, i)));
                if tasks == 0 {
                    self.jobs.remove(&job);
                    out.push(Output::JobSucceeded { job });
                }
            }
            Input::TaskSucceeded { attempt, executor, elapsed } => {
                // Only the executor holding the attempt may end it: a report for an index
                // out of range, an attempt never given, or one already replaced is dropped.
                if !self.holds(&executor, attempt) {
                    return out;
                }
                self.release(&executor, attempt);
                let job = self.jobs.get_mut(&attempt.job).expect("holds() checked the job");
                let secs = elapsed.as_secs_f64();
                job.mean_secs = Some(job.mean_secs.map_or(secs, |m| 0.8 * m + 0.2 * secs));
                let task = &mut job.tasks[attempt.index as usize];
                task.done = true;
                task.running = None;
                job.running -= 1;
                job.remaining -= 1;
                out.push(Output::TaskDone { attempt });
                if job.remaining == 0 {
                    self.jobs.remove(&attempt.job);
                    out.push(Output::JobSucceeded { job: attempt.job });
                }
            }
            Input::TaskFailed { attempt, executor, failure } => {
                if !self.holds(&executor, attempt) {
                    return out;
                }
                self.release(&executor, attempt);
                self.task_failed(attempt, executor, failure, &mut out);
            }
            Input::CancelJob { job, reason } => {
                self.fail_job(job, JobError::Cancelled(reason), &mut out);
            }
            Input::FailJob { job, error } => self.fail_job(job, error, &mut out),
        }
        self.launch(&mut out);
        out
    }

    /// Slots free across usable executors.
    pub fn free_slots(&self) -> u32 {
        self.executors.values().map(|e| e.free(1)).sum()
    }

    /// Attempts per slot at each level: one; the pipeline depth for short tasks; deeper
    /// for tiny ones.
    fn depths(&self) -> [u32; 3] {
        let pipeline = self.policy.pipeline.max(1);
        [1, pipeline, pipeline.saturating_mul(TINY_DEPTH)]
    }

    /// The depth level (an index into `depths`) for `job`'s tasks, by their mean time.
    fn level(&self, job: JobId) -> usize {
        match self.jobs.get(&job).and_then(|j| j.mean_secs) {
            Some(mean) if mean < TINY_TASK.as_secs_f64() => 2,
            Some(mean) if mean < SHORT_TASK.as_secs_f64() => 1,
            _ => 0,
        }
    }

    /// Executors known and usable for new tasks.
    pub fn live_executors(&self) -> usize {
        self.executors.values().filter(|e| e.usable()).count()
    }

    /// Whether an executor runs nothing (for decommission and idle removal).
    pub fn is_idle(&self, id: &str) -> bool {
        self.executors.get(id).is_none_or(|e| e.running.is_empty())
    }

    /// Whether `executor` holds `attempt` now: the job runs, the index is in range, the
    /// attempt is the task's current one and runs there. Reports are accepted only then.
    pub fn holds(&self, executor: &str, attempt: Attempt) -> bool {
        self.jobs
            .get(&attempt.job)
            .and_then(|j| j.tasks.get(attempt.index as usize))
            .and_then(|t| t.running.as_ref())
            .is_some_and(|(number, on)| *number == attempt.number && on == executor)
    }

    /// Attempts an executor holds now (running or queued there).
    pub fn running_on(&self, id: &str) -> u32 {
        self.executors.get(id).map_or(0, |e| e.running.len() as u32)
    }

    /// Task slots of usable executors.
    pub fn total_slots(&self) -> u32 {
        self.executors.values().filter(|e| e.usable()).map(|e| e.slots).sum()
    }

    /// Whether the executor was excluded for failing tasks.
    pub fn is_excluded(&self, id: &str) -> bool {
        self.executors.get(id).is_some_and(|e| e.excluded)
    }

    /// Tasks waiting for a slot.
    pub fn queued(&self) -> u32 {
        self.queue.len() as u32
    }

    /// Tasks placed on executors now, all jobs together.
    pub fn running_tasks(&self) -> u32 {
        self.jobs.values().map(|j| j.running).sum()
    }

    /// Usable executors, each with whether it holds any attempt.
    pub fn usable_executors(&self) -> impl Iterator<Item = (&ExecutorId, bool)> {
        self.executors.iter().filter(|(_, e)| e.usable()).map(|(id, e)| (id, !e.running.is_empty()))
    }

    /// Jobs the scheduler knows.
    pub fn jobs(&self) -> impl Iterator<Item = JobId> + '_ {
        self.jobs.keys().copied()
    }

    /// Tasks of `job` placed on an executor now.
    pub fn job_running(&self, job: JobId) -> u32 {
        self.jobs.get(&job).map_or(0, |j| j.running)
    }

    fn release(&mut self, executor: &str, attempt: Attempt) {
        self.reindex(executor, |exec| {
            exec.running.remove(&attempt);
        });
    }

    /// Whether `by_room` says exactly what a pass over the executors would (for tests).
    #[doc(hidden)]
    pub fn room_index_is_true(&self) -> bool {
        let expected = |d: u32| -> BTreeSet<(u32, Reverse<u64>)> {
            self.executors.values().filter(|e| e.usable()).map(|e| (e.free(d), Reverse(e.seq))).collect()
        };
        let ids_true = self.ids.len() == self.executors.len()
            && self.executors.iter().all(|(id, e)| self.ids.get(&e.seq) == Some(id));
        ids_true && self.depths().iter().zip(&self.by_room).all(|(d, room)| *room == expected(*d))
    }

    /// Changes an executor with `change` and keeps `by_room` in step with it.
    fn reindex(&mut self, id: &str, change: impl FnOnce(&mut Executor)) {
        self.unindex(id);
        let depths = self.depths();
        let Some(exec) = self.executors.get_mut(id) else { return };
        change(exec);
        if exec.usable() {
            for (room, depth) in self.by_room.iter_mut().zip(depths) {
                room.insert((exec.free(depth), Reverse(exec.seq)));
            }
        }
    }

    fn unindex(&mut self, id: &str) {
        let depths = self.depths();
        let Some(exec) = self.executors.get(id) else { return };
        if exec.usable() {
            for (room, depth) in self.by_room.iter_mut().zip(depths) {
                room.remove(&(exec.free(depth), Reverse(exec.seq)));
            }
        }
    }

    /// A failure of an attempt `holds()` has vouched for.
    fn task_failed(
        &mut self,
        attempt: Attempt,
        executor: ExecutorId,
        failure: TaskFailure,
        out: &mut Vec<Output>,
    ) {
        let Some(job) = self.jobs.get_mut(&attempt.job) else {
            return;
        };
        let max_failures = job.max_failures;
        let Some(task) = job.tasks.get_mut(attempt.index as usize) else { return };
        task.running = None;
        job.running -= 1;
        if failure.counts_against_task() {
            task.failures += 1;
            task.failed_on.insert(executor.clone());
            self.note_failure(&executor, attempt, out);
        }
        let task = &mut self.jobs.get_mut(&attempt.job).expect("checked above").tasks[attempt.index as usize];
        if !failure.retryable() || task.failures >= max_failures {
            let reason = JobError::TaskFailed {
                index: attempt.index,
                attempts: task.launches,
                last_attempt: attempt.number,
                executor,
                failure,
            };
            self.fail_job(attempt.job, reason, out);
        } else {
            out.push(Output::Retrying { attempt, failure });
            self.queue.push_front((attempt.job, attempt.index));
        }
    }

    /// Counts a task failure against its executor and excludes the executor past the
    /// policy's threshold, unless no other usable executor would remain.
    fn note_failure(&mut self, executor: &str, attempt: Attempt, out: &mut Vec<Output>) {
        let Some(limit) = self.policy.exclude_after else { return };
        let others = self.executors.iter().filter(|(id, e)| id.as_str() != executor && e.usable()).count();
        let Some(exec) = self.executors.get_mut(executor) else { return };
        exec.failed_tasks.insert((attempt.job, attempt.index));
        let failed = exec.failed_tasks.len() as u32;
        if !exec.excluded && failed >= limit && others > 0 {
            self.reindex(executor, |exec| exec.excluded = true);
            out.push(Output::ExecutorExcluded { executor: executor.to_owned(), failed_tasks: failed });
        }
    }

    fn fail_job(&mut self, job: JobId, reason: JobError, out: &mut Vec<Output>) {
        let Some(state) = self.jobs.remove(&job) else {
            return;
        };
        for (index, task) in state.tasks.iter().enumerate() {
            if let Some((number, executor)) = &task.running {
                let attempt = Attempt { job, index: index as u32, number: *number };
                self.release(executor, attempt);
                out.push(Output::Kill { executor: executor.clone(), attempt });
            }
        }
        self.queue.retain(|(j, _)| *j != job);
        out.push(Output::JobFailed { job, reason });
    }

    /// Places queued tasks on free slots, spreading them over executors (the one with
    /// the most room first, the first to join among equals) and keeping a retry off the
    /// executors it failed on while another executor could take it. Each placement is a
    /// lookup in `by_room`, whatever the size of the fleet.
    fn launch(&mut self, out: &mut Vec<Output>) {
        let mut deferred = Vec::new();
        // First in, first out: when the head of the queue cannot be placed for want of
        // room, nothing behind it jumps ahead.
        while let Some(&(job, index)) = self.queue.front() {
            let room = &self.by_room[self.level(job)];
            if room.last().is_none_or(|(free, _)| *free == 0) {
                break;
            }
            self.queue.pop_front();
            let Some(task) = self.jobs.get(&job).and_then(|j| j.tasks.get(index as usize)) else {
                continue;
            };
            if task.done || task.running.is_some() {
                continue;
            }
            let pick = if task.failed_on.is_empty() {
                room.last().map(|(_, Reverse(seq))| self.ids[seq].clone())
            } else {
                // A clean executor exists unless every usable one failed this task.
                let failed_usable = task
                    .failed_on
                    .iter()
                    .filter(|id| self.executors.get(*id).is_some_and(Executor::usable))
                    .count();
                let clean_exists = self.by_room[0].len() > failed_usable;
                room.iter()
                    .rev()
                    .take_while(|(free, _)| *free > 0)
                    .map(|(_, Reverse(seq))| &self.ids[seq])
                    .find(|id| !clean_exists || !task.failed_on.contains(*id))
                    .cloned()
            };
            let Some(executor) = pick else {
                deferred.push((job, index));
                continue;
            };
            let state = self.jobs.get_mut(&job).expect("job checked above");
            state.running += 1;
            let task = &mut state.tasks[index as usize];
            let attempt = Attempt { job, index, number: task.launches };
            task.launches += 1;
            task.running = Some((attempt.number, executor.clone()));
            self.reindex(&executor, |exec| {
                exec.running.insert(attempt);
            });
            out.push(Output::Launch { executor, attempt });
        }
        for item in deferred.into_iter().rev() {
            self.queue.push_front(item);
        }
    }
}

#[cfg(test)]
mod tests;
