//! The task scheduler: a state machine without IO, in the manner of `quinn-proto`.
//!
//! The driver's event loop feeds it [`Input`]s with the current time and carries out the
//! [`Output`]s it returns: launches on free slots, kills, and job outcomes. It owns which
//! task runs where, how often each has failed, and which executors are usable; it knows
//! nothing of sockets, threads or wasm.

pub use flint_proto::{Attempt, ExecutorId, JobId};
use flint_proto::{JobError, TaskFailure};
pub use job::StagePlan;
use job::{Job, Stage};
use room::{Executor, Ix, Room};
pub use state::{
    AHEAD_TASK, Decided, Input, Output, Policy, SHORT_TASK, Scheduler, Speculation, Straggling, TINY_DEPTH,
    TINY_TASK,
};
use std::cmp::Reverse;
use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};

impl Scheduler {
    pub fn new(policy: Policy) -> Self {
        Scheduler { policy, ..Self::default() }
    }

    /// Outputs held on an executor that has not delivered them this long after being
    /// asked run again elsewhere (see [`Scheduler::handle_timeout`]).
    pub fn with_collect_timeout(mut self, timeout: Duration) -> Self {
        self.collect_timeout = Some(timeout);
        self
    }

    /// Feeds one input; returns what to do, launches last (one batch per executor).
    pub fn handle(&mut self, now: Instant, input: Input) -> Vec<Output> {
        self.clock = Some(now);
        let mut out = Vec::new();
        match input {
            Input::ExecutorAdded { id, slots } => {
                if !self.by_id.contains_key(&id) {
                    self.next_seq += 1;
                    let exec = Executor {
                        id: id.clone(),
                        seq: self.next_seq,
                        slots,
                        running: 0,
                        held: 0,
                        decommissioning: false,
                        failed_tasks: BTreeSet::new(),
                        excluded: false,
                        ended: 0,
                        ended_at: VecDeque::new(),
                        progress: Vec::new(),
                    };
                    let ix = match self.vacant.pop() {
                        Some(ix) => {
                            self.executors[ix as usize] = Some(exec);
                            ix
                        }
                        None => {
                            self.executors.push(Some(exec));
                            (self.executors.len() - 1) as Ix
                        }
                    };
                    self.by_id.insert(id, ix);
                    self.index(ix);
                }
            }
            Input::ExecutorLost { id, reason } => {
                if let Some(ix) = self.by_id.remove(&id) {
                    self.unindex(ix);
                    self.executors[ix as usize] = None;
                    self.vacant.push(ix);
                    // Its attempts and the outputs it held, found through the tasks
                    // (losses are rare; a set per executor would cost every launch and
                    // report).
                    let mut lost = Vec::new();
                    let mut fatal = Vec::new();
                    let max_losses = self.policy.max_executor_losses;
                    for (job_id, job) in self.jobs.iter_mut() {
                        let mut touched = Vec::new();
                        for (index, task) in job.tasks.records_mut() {
                            if task.copy.is_none() && task.running.is_none() {
                                continue;
                            }
                            touched.push(index);
                            // A copy lost is only gone: its original runs on.
                            if task.copy.is_some_and(|(_, on, _)| on == ix) {
                                task.copy = None;
                                self.copies -= 1;
                            }
                            if task.running.is_some_and(|(_, on)| on == ix) {
                                task.losses += 1;
                                if max_losses.is_some_and(|max| task.losses >= max) {
                                    fatal.push((*job_id, index, task.losses));
                                }
                                match task.copy.take() {
                                    // Its copy elsewhere runs on as the task's attempt.
                                    Some((number, on, since)) => {
                                        task.running = Some((number, on));
                                        task.since = Some(since);
                                        task.starts_after = 0;
                                        self.copies -= 1;
                                    }
                                    None => {
                                        task.running = None;
                                        task.since = None;
                                        job.running -= 1;
                                        lost.push((*job_id, index));
                                    }
                                }
                            }
                        }
                        for index in touched {
                            job.tasks.settle(index);
                        }
                        // The outputs it held combined are lost with it.
                        for index in job.holding.remove(&ix).unwrap_or_default() {
                            if let Some(task) = job.tasks.get_mut(index) {
                                task.done = false;
                            }
                            job.tasks.settle(index);
                            job.held -= 1;
                            let stage = job.stage_of(index);
                            job.stages[stage].undone += 1;
                            job.collecting = None;
                            out.push(Output::Decided(Decided::TaskLost { job: *job_id, index }));
                            lost.push((*job_id, index));
                        }
                    }
                    lost.sort_unstable();
                    fatal.sort_unstable();
                    for (job, index) in lost.into_iter().rev() {
                        self.queue.push_front(job, index);
                    }
                    for (job, index, losses) in fatal {
                        let last = flint_proto::failure::head(&reason, 1024);
                        let reason = JobError::ExecutorsLost { index, losses, last };
                        self.fail_job(job, reason, &mut out);
                    }
                }
            }
            Input::ExecutorDecommissioning { id } => {
                if let Some(ix) = self.ix(&id) {
                    self.reindex(ix, |exec| exec.decommissioning = true);
                }
            }
            Input::Progress { id, progress } => self.progress_heard(now, &id, progress),
            Input::JobSubmitted { job, tasks, max_failures, speculate, remote_input } => {
                let stage = Stage::new(0, tasks, Vec::new());
                let state = Job::new(tasks, max_failures, vec![stage], speculate, remote_input);
                self.jobs.insert(job, state);
                self.queue.push_back(job, 0..tasks);
                if tasks == 0 {
                    self.jobs.remove(&job);
                    out.push(Output::JobSucceeded { job });
                }
            }
            Input::StagedJobSubmitted { job, stages, max_failures, speculate, remote_input } => {
                let mut planned = Vec::with_capacity(stages.len());
                let mut start = 0u32;
                for (i, plan) in stages.iter().enumerate() {
                    // A stage reads only stages before it: the plan is a DAG by construction.
                    let parents = plan.parents.iter().map(|&p| p as usize).filter(|&p| p < i).collect();
                    let end = start.saturating_add(plan.tasks);
                    planned.push(Stage::new(start, end, parents));
                    start = end;
                }
                let state = Job::new(start, max_failures, planned, speculate, remote_input);
                let roots: Vec<std::ops::Range<u32>> = state
                    .stages
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| state.ready(*i))
                    .map(|(_, s)| s.start..s.end)
                    .collect();
                self.jobs.insert(job, state);
                for tasks in roots {
                    self.queue.push_back(job, tasks);
                }
                if start == 0 {
                    self.jobs.remove(&job);
                    out.push(Output::JobSucceeded { job });
                }
            }
            Input::OutputsLost { job, tasks } => self.outputs_lost(job, &tasks, &mut out),
            Input::TaskSucceeded { attempt, executor, elapsed } => {
                // Only the executor holding the attempt may end it: a report for an index
                // out of range, an attempt never given, or one already replaced is dropped.
                let Some(ix) = self.holder(&executor, attempt) else { return out };
                self.end_other_attempt(attempt, true, &mut out);
                let job = self.attempt_ended_well(ix, attempt, elapsed);
                job.remaining -= 1;
                let ready = job.task_done(attempt.index);
                for tasks in ready {
                    self.queue.push_back(attempt.job, tasks);
                }
                let job = self.jobs.get_mut(&attempt.job).expect("holder() checked the job");
                out.push(Output::Decided(Decided::TaskDone { attempt }));
                if job.remaining == 0 {
                    self.jobs.remove(&attempt.job);
                    out.push(Output::JobSucceeded { job: attempt.job });
                } else {
                    // The last task to end may be one whose output came in the report
                    // while others wait combined on executors.
                    self.collect_if_ready(now, attempt.job, &mut out);
                }
            }
            Input::TaskFailed { attempt, executor, failure } => {
                let Some(ix) = self.holder(&executor, attempt) else { return out };
                self.release(ix);
                let other_runs =
                    self.jobs[&attempt.job].tasks.get(attempt.index).is_some_and(|t| t.copy.is_some());
                self.end_other_attempt(attempt, false, &mut out);
                self.task_failed(attempt, executor, failure, other_runs, &mut out);
            }
            Input::TaskCombined { attempt, executor, elapsed } => {
                let Some(ix) = self.holder(&executor, attempt) else { return out };
                self.end_other_attempt(attempt, true, &mut out);
                if let Some(exec) = self.executors[ix as usize].as_mut() {
                    exec.held += 1;
                }
                let job = self.attempt_ended_well(ix, attempt, elapsed);
                job.holding.entry(ix).or_default().insert(attempt.index);
                job.held += 1;
                let ready = job.task_done(attempt.index);
                for tasks in ready {
                    self.queue.push_back(attempt.job, tasks);
                }
                out.push(Output::Decided(Decided::TaskDone { attempt }));
                self.collect_if_ready(now, attempt.job, &mut out);
            }
            Input::Partial { executor, job, tasks } => self.partial(executor, job, tasks, &mut out),
            Input::CombinedLost { executor, job, tasks } => {
                if let Some(ix) = self.ix(&executor) {
                    self.lose_held(ix, job, &tasks, &mut out);
                }
            }
            Input::LargeOutputs { job } => {
                if let Some(state) = self.jobs.get_mut(&job) {
                    state.large_outputs = true;
                }
            }
            Input::CancelJob { job, reason } => {
                self.fail_job(job, JobError::Cancelled(reason), &mut out);
            }
            Input::FailJob { job, error } => self.fail_job(job, error, &mut out),
        }
        self.launch(now, &mut out);
        out
    }

    fn ix(&self, id: &ExecutorId) -> Option<Ix> {
        self.by_id.get(id).copied()
    }

    fn executor(&self, id: &ExecutorId) -> Option<&Executor> {
        self.ix(id).and_then(|ix| self.executors[ix as usize].as_ref())
    }

    /// Slots free across usable executors.
    pub fn free_slots(&self) -> u32 {
        self.executors.iter().flatten().map(|e| e.free(1)).sum()
    }

    /// Attempts per slot at each level: one; one ahead for tasks that read across the
    /// network; the pipeline depth for short tasks; deeper for tiny ones. A policy
    /// that does not pipeline (depth 1) sends nothing ahead either.
    fn depths(&self) -> [u32; 4] {
        let pipeline = self.policy.pipeline.max(1);
        [1, pipeline.min(2), pipeline, pipeline.saturating_mul(TINY_DEPTH)]
    }

    /// The depth level (an index into `depths`) for task `index` of `job`, by the
    /// job's mean task time and where the task reads: only a first stage's tasks read
    /// splits, later ones read shuffles. Until a task ends, the mean is unknown: one
    /// per slot.
    fn level(&self, job: JobId, index: u32) -> usize {
        let Some(job) = self.jobs.get(&job) else { return 0 };
        let reads_split = || job.stages.get(job.stage_of(index)).is_none_or(|s| s.parents.is_empty());
        if job.large_outputs {
            return 0;
        }
        match job.mean_secs {
            Some(mean) if mean < TINY_TASK.as_secs_f64() => 3,
            Some(mean) if mean < SHORT_TASK.as_secs_f64() => 2,
            Some(mean) if job.remote_input && mean < AHEAD_TASK.as_secs_f64() && reads_split() => 1,
            _ => 0,
        }
    }

    /// Executors known and usable for new tasks.
    pub fn live_executors(&self) -> usize {
        self.usable as usize
    }

    /// Whether an executor runs nothing and holds no undelivered output (for
    /// decommission and idle removal).
    pub fn is_idle(&self, id: &ExecutorId) -> bool {
        self.executor(id).is_none_or(|e| e.running == 0 && e.held == 0)
    }

    /// Whether `executor` holds `attempt` now: the job runs, the index is in range, the
    /// attempt is the task's current one and runs there. Reports are accepted only then.
    pub fn holds(&self, executor: &ExecutorId, attempt: Attempt) -> bool {
        self.holder(executor, attempt).is_some()
    }

    /// The place of `executor` if it holds `attempt` now.
    fn holder(&self, executor: &ExecutorId, attempt: Attempt) -> Option<Ix> {
        let task = self.jobs.get(&attempt.job)?.tasks.get(attempt.index)?;
        let on = match (task.running, task.copy) {
            (Some((number, on)), _) if number == attempt.number => on,
            (_, Some((number, on, _))) if number == attempt.number => on,
            _ => return None,
        };
        (self.ix(executor) == Some(on)).then_some(on)
    }

    /// Attempts an executor holds now (running or queued there).
    pub fn running_on(&self, id: &ExecutorId) -> u32 {
        self.executor(id).map_or(0, |e| e.running)
    }

    /// Task slots of usable executors.
    pub fn total_slots(&self) -> u32 {
        self.usable_slots
    }

    /// Whether the executor was excluded for failing tasks.
    pub fn is_excluded(&self, id: &ExecutorId) -> bool {
        self.executor(id).is_some_and(|e| e.excluded)
    }

    /// Tasks waiting for a slot, and copies of stragglers waiting for one.
    pub fn queued(&self) -> u32 {
        u32::try_from(self.queue.len()).unwrap_or(u32::MAX).saturating_add(self.copies_wanted)
    }

    /// Copies of straggling attempts running now.
    pub fn copies_running(&self) -> u32 {
        self.copies
    }

    /// Task records kept, all jobs together: one per task with an attempt running, or
    /// that failed, was retried, lost or copied; none for the rest (see `job::Tasks`).
    pub fn task_records(&self) -> usize {
        self.jobs.values().map(|j| j.tasks.kept()).sum()
    }

    /// Tasks placed on executors now, all jobs together.
    pub fn running_tasks(&self) -> u32 {
        self.jobs.values().map(|j| j.running).sum()
    }

    /// Usable executors, each with whether it holds any attempt.
    pub fn usable_executors(&self) -> impl Iterator<Item = (&ExecutorId, bool)> {
        self.executors.iter().flatten().filter(|e| e.usable()).map(|e| (&e.id, e.running > 0 || e.held > 0))
    }

    /// Jobs the scheduler knows.
    pub fn jobs(&self) -> impl Iterator<Item = JobId> + '_ {
        self.jobs.keys().copied()
    }

    /// Tasks of `job` placed on an executor now.
    pub fn job_running(&self, job: JobId) -> u32 {
        self.jobs.get(&job).map_or(0, |j| j.running)
    }

    fn release(&mut self, ix: Ix) {
        let now = self.clock;
        self.reindex(ix, |exec| {
            exec.running -= 1;
            if let Some(now) = now {
                exec.ended += 1;
                exec.ended_at.push_back(now);
                if exec.ended_at.len() > room::ENDS_KEPT {
                    exec.ended_at.pop_front();
                }
            }
        });
    }

    /// An attempt `holder()` vouched for ended with its output (sent or held): its place
    /// is freed, the job's mean run time takes it in, and its task is done.
    fn attempt_ended_well(&mut self, ix: Ix, attempt: Attempt, elapsed: Duration) -> &mut Job {
        self.release(ix);
        let job = self.jobs.get_mut(&attempt.job).expect("holder() checked the job");
        let secs = elapsed.as_secs_f64();
        job.mean_secs = Some(job.mean_secs.map_or(secs, |m| 0.8 * m + 0.2 * secs));
        let stage = job.stage_of(attempt.index);
        job.stages[stage].succeeded(elapsed);
        let task = job.tasks.get_mut(attempt.index).expect("holder() checked the index");
        task.done = true;
        task.running = None;
        task.since = None;
        job.tasks.settle(attempt.index);
        job.running -= 1;
        job
    }

    /// Once nothing of `job` waits or runs and executors hold some of its outputs,
    /// asks each of them for its partial results (once, until something runs again).
    fn collect_if_ready(&mut self, now: Instant, job: JobId, out: &mut Vec<Output>) {
        let Some(state) = self.jobs.get_mut(&job) else { return };
        if state.held == 0 || state.remaining != state.held || state.collecting.is_some() {
            return;
        }
        state.collecting = Some(now);
        let holders: Vec<Ix> =
            state.holding.iter().filter(|(_, held)| !held.is_empty()).map(|(ix, _)| *ix).collect();
        for ix in holders {
            if let Some(exec) = self.executors[ix as usize].as_ref() {
                out.push(Output::Collect { executor: exec.id.clone(), job });
            }
        }
    }

    /// A partial result: accepted whole when the executor holds every task it names
    /// (once each), else refused, and the tasks it does hold of those run again; a
    /// partial that does not match what its executor holds cannot be folded without
    /// counting an output twice or missing one.
    fn partial(&mut self, executor: ExecutorId, job: JobId, tasks: Vec<u32>, out: &mut Vec<Output>) {
        let Some(ix) = self.ix(&executor) else { return };
        let Some(state) = self.jobs.get(&job) else { return };
        let mut named = tasks.clone();
        named.sort_unstable();
        named.dedup();
        let whole = !tasks.is_empty()
            && named.len() == tasks.len()
            && state.holding.get(&ix).is_some_and(|held| named.iter().all(|i| held.contains(*i)));
        if !whole {
            self.lose_held(ix, job, &named, out);
            return;
        }
        let state = self.jobs.get_mut(&job).expect("found above");
        if let Some(held) = state.holding.get_mut(&ix) {
            for i in &named {
                held.remove(*i);
            }
        }
        let n = named.len() as u32;
        state.held -= n;
        state.remaining -= n;
        if let Some(exec) = self.executors[ix as usize].as_mut() {
            exec.held -= n;
        }
        out.push(Output::Decided(Decided::PartialAccepted { job, tasks: n }));
        if state.remaining == 0 {
            self.jobs.remove(&job);
            out.push(Output::JobSucceeded { job });
        }
    }

    /// Done tasks whose outputs are gone are queued again, and the stages reading them
    /// wait, without launching anything yet: for a caller with more to tell first (an
    /// executor lost with the outputs it held, so that nothing is placed on it).
    pub fn forget_outputs(&mut self, job: JobId, tasks: &[u32]) -> Vec<Output> {
        let mut out = Vec::new();
        self.outputs_lost(job, tasks, &mut out);
        out
    }

    /// Done tasks whose outputs are gone run again; stages reading them wait.
    fn outputs_lost(&mut self, job: JobId, tasks: &[u32], out: &mut Vec<Output>) {
        let Some(state) = self.jobs.get_mut(&job) else { return };
        let mut lost = Vec::new();
        for &index in tasks {
            if !state.tasks.get(index).is_some_and(|t| t.done) || state.holder_of(index).is_some() {
                continue;
            }
            state.tasks.get_mut(index).expect("in range").done = false;
            state.tasks.settle(index);
            state.remaining += 1;
            let stage = state.stage_of(index);
            state.stages[stage].undone += 1;
            lost.push(index);
            out.push(Output::Decided(Decided::TaskLost { job, index }));
        }
        for index in lost.into_iter().rev() {
            self.queue.push_front(job, index);
        }
    }

    /// The outputs of `tasks` that `ix` holds for `job` are lost: those tasks run again.
    fn lose_held(&mut self, ix: Ix, job: JobId, tasks: &[u32], out: &mut Vec<Output>) {
        let Some(state) = self.jobs.get_mut(&job) else { return };
        let mut lost = Vec::new();
        for &index in tasks {
            if state.holding.get_mut(&ix).is_some_and(|held| held.remove(index)) {
                state.tasks.get_mut(index).expect("held tasks are in range").done = false;
                state.tasks.settle(index);
                state.held -= 1;
                let stage = state.stage_of(index);
                state.stages[stage].undone += 1;
                state.collecting = None;
                lost.push(index);
                out.push(Output::Decided(Decided::TaskLost { job, index }));
            }
        }
        if let Some(exec) = self.executors[ix as usize].as_mut() {
            exec.held -= lost.len() as u32;
        }
        for index in lost.into_iter().rev() {
            self.queue.push_front(job, index);
        }
    }

    /// Outputs held by executors that were asked for them more than the collect
    /// timeout ago and did not deliver run again elsewhere.
    pub fn handle_timeout(&mut self, now: Instant) -> Vec<Output> {
        self.clock = Some(now);
        let mut out = Vec::new();
        self.speculate(now, &mut out);
        let Some(timeout) = self.collect_timeout else { return out };
        let late: Vec<JobId> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.collecting.is_some_and(|at| now >= at + timeout))
            .map(|(id, _)| *id)
            .collect();
        for job in late {
            let held: Vec<(Ix, Vec<u32>)> =
                self.jobs[&job].holding.iter().map(|(ix, held)| (*ix, held.iter().collect())).collect();
            for (ix, tasks) in held {
                self.lose_held(ix, job, &tasks, &mut out);
            }
        }
        self.launch(now, &mut out);
        out
    }

    /// When [`Scheduler::handle_timeout`] has something to do next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let collect = self
            .collect_timeout
            .and_then(|timeout| self.jobs.values().filter_map(|j| j.collecting).min().map(|at| at + timeout));
        collect.into_iter().chain(self.speculation_due()).min()
    }

    /// A failure of an attempt `holder()` has vouched for; `other_runs`: another attempt
    /// of the task (its original or its copy) runs on, so it is not queued again.
    fn task_failed(
        &mut self,
        attempt: Attempt,
        executor: ExecutorId,
        failure: TaskFailure,
        other_runs: bool,
        out: &mut Vec<Output>,
    ) {
        let Some(job) = self.jobs.get_mut(&attempt.job) else {
            return;
        };
        let max_failures = job.max_failures;
        let Some(task) = job.tasks.get_mut(attempt.index) else { return };
        if !other_runs {
            task.running = None;
            task.since = None;
            job.running -= 1;
        }
        let fetch_failed = matches!(failure, TaskFailure::FetchFailed { .. });
        if fetch_failed {
            task.fetch_failures += 1;
        }
        if failure.counts_against_task() {
            task.failures += 1;
            task.failed_on.insert(executor.clone());
            self.note_failure(&executor, attempt, out);
        }
        let task = self.jobs[&attempt.job].tasks.get(attempt.index).expect("checked above");
        if !failure.retryable() || task.failures >= max_failures || task.fetch_failures >= max_failures {
            let reason = JobError::TaskFailed {
                index: attempt.index,
                attempts: task.launches,
                last_attempt: attempt.number,
                executor,
                failure: Box::new(failure),
            };
            self.fail_job(attempt.job, reason, out);
        } else if !other_runs {
            out.push(Output::Decided(Decided::Retrying { attempt, failure }));
            self.queue.push_front(attempt.job, attempt.index);
        }
    }

    /// Counts a task failure against its executor and excludes the executor past the
    /// policy's threshold, unless no other usable executor would remain.
    fn note_failure(&mut self, executor: &ExecutorId, attempt: Attempt, out: &mut Vec<Output>) {
        let Some(limit) = self.policy.exclude_after else { return };
        let Some(ix) = self.ix(executor) else { return };
        let Some(exec) = self.executors[ix as usize].as_mut() else { return };
        let others = self.usable - u32::from(exec.usable());
        exec.failed_tasks.insert((attempt.job, attempt.index));
        let failed = exec.failed_tasks.len() as u32;
        if !exec.excluded && failed >= limit && others > 0 {
            self.reindex(ix, |exec| exec.excluded = true);
            out.push(Output::Decided(Decided::ExecutorExcluded {
                executor: executor.to_owned(),
                failed_tasks: failed,
            }));
        }
    }

    fn fail_job(&mut self, job: JobId, reason: JobError, out: &mut Vec<Output>) {
        let Some(state) = self.jobs.remove(&job) else {
            return;
        };
        // What executors hold for the job goes with it (they drop it at the job's end).
        for (ix, held) in &state.holding {
            if let Some(exec) = self.executors[*ix as usize].as_mut() {
                exec.held -= held.len() as u32;
            }
        }
        // In index order, as every output of the scheduler is ordered.
        let mut records: Vec<(u32, &job::Task)> = state.tasks.records().collect();
        records.sort_unstable_by_key(|(index, _)| *index);
        for (index, task) in records {
            let copy = task.copy.map(|(number, ix, _)| (number, ix));
            for (number, ix) in task.running.into_iter().chain(copy) {
                let attempt = Attempt { job, index, number };
                self.release(ix);
                let executor =
                    self.executors[ix as usize].as_ref().expect("placed on a known executor").id.clone();
                out.push(Output::Kill { executor, attempt });
            }
            if copy.is_some() {
                self.copies -= 1;
            }
        }
        self.queue.remove_job(job);
        out.push(Output::JobFailed { job, reason });
    }

    /// Places queued tasks on free slots, spreading them over executors (the one with
    /// the most room first, the first to join among equals) and keeping a retry off the
    /// executors it failed on while another executor could take it. Each placement is a
    /// lookup in a room, whatever the size of the fleet.
    fn launch(&mut self, now: Instant, out: &mut Vec<Output>) {
        let mut deferred = Vec::new();
        let mut placed: Vec<(Ix, Attempt)> = Vec::new();
        // First in, first out: when the head of the queue cannot be placed for want of
        // room, nothing behind it jumps ahead.
        while let Some((job, index)) = self.queue.front() {
            let level = self.level(job, index);
            let Some(best) = self.room(level).best() else { break };
            self.queue.pop_front();
            let Some(task) = self.jobs.get(&job).and_then(|j| j.tasks.get(index)) else {
                continue;
            };
            if task.done || task.running.is_some() {
                continue;
            }
            // A task of a stage whose inputs are not all there waits; it is queued again
            // when they are.
            let state = &self.jobs[&job];
            let stage = state.stage_of(index);
            if !state.ready(stage) {
                continue;
            }
            let pick = if task.failed_on.is_empty() {
                Some(best)
            } else {
                // A clean executor exists unless every usable one failed this task.
                let failed_usable = task
                    .failed_on
                    .iter()
                    .filter(|id| self.executor(id).is_some_and(Executor::usable))
                    .count() as u32;
                let clean_exists = self.usable > failed_usable;
                let executors = &self.executors;
                self.rooms[level].iter().find(|ix| {
                    let id = &executors[*ix as usize].as_ref().expect("indexed executors exist").id;
                    !clean_exists || !task.failed_on.contains(id)
                })
            };
            let Some(ix) = pick else {
                deferred.push((job, index));
                continue;
            };
            let state = self.jobs.get_mut(&job).expect("job checked above");
            state.running += 1;
            let task = state.tasks.get_mut(index).expect("found above");
            let attempt = Attempt { job, index, number: task.launches };
            task.launches += 1;
            task.running = Some((attempt.number, ix));
            task.since = Some(now);
            // Queued behind the attempts it finds there beyond the executor's slots, it
            // starts once that many more have ended.
            let exec = self.executors[ix as usize].as_ref().expect("placed on a known executor");
            task.starts_after = exec.ended + u64::from((exec.running + 1).saturating_sub(exec.slots));
            if state.speculate && self.next_speculation.is_none() {
                self.next_speculation = self.policy.speculation.as_ref().map(|p| now + p.interval);
            }
            self.placed += 1;
            self.reindex(ix, |exec| exec.running += 1);
            placed.push((ix, attempt));
        }
        for (job, index) in deferred.into_iter().rev() {
            self.queue.push_front(job, index);
        }
        // One batch per executor.
        placed.sort_by_key(|(ix, _)| *ix);
        for run in placed.chunk_by(|a, b| a.0 == b.0) {
            let executor =
                self.executors[run[0].0 as usize].as_ref().expect("placed on a known executor").id.clone();
            out.push(Output::Launch { executor, attempts: run.iter().map(|(_, a)| *a).collect() });
        }
    }
}

/// A room no job placed from in this many placements is no longer kept up to date.
const ROOM_DORMANT_AFTER: u64 = 4096;

impl Scheduler {
    /// Whether the placement index says exactly what a pass over the executors would
    /// (for tests): the rooms kept up to date, the ids, the counts.
    #[doc(hidden)]
    pub fn room_index_is_true(&self) -> bool {
        let depths = self.depths();
        let placed = |ix: &Ix| self.executors[*ix as usize].as_ref().map(|e| (e.seq, *ix));
        let rooms_true = self.rooms.iter().zip(depths).all(|(room, depth)| {
            let mut expected: Vec<(u32, u64, Ix)> = self
                .executors
                .iter()
                .enumerate()
                .filter_map(|(ix, e)| e.as_ref().map(|e| (e.free(depth), e.seq, ix as Ix)))
                .filter(|(free, ..)| room.live && *free > 0)
                .collect();
            expected.sort_by_key(|(free, seq, _)| (Reverse(*free), *seq));
            let listed: Vec<(u64, Ix)> = room.iter().filter_map(|ix| placed(&ix)).collect();
            let top_true = room.buckets.get(room.top).is_none_or(|b| room.top == 0 || !b.is_empty());
            top_true && listed == expected.iter().map(|(_, seq, ix)| (*seq, *ix)).collect::<Vec<_>>()
        });
        let usable: Vec<&Executor> = self.executors.iter().flatten().filter(|e| e.usable()).collect();
        let ids_true = self.by_id.len() == self.executors.iter().flatten().count()
            && self
                .by_id
                .iter()
                .all(|(id, ix)| self.executors[*ix as usize].as_ref().is_some_and(|e| &e.id == id));
        rooms_true
            && ids_true
            && usable.len() as u32 == self.usable
            && usable.iter().map(|e| e.slots).sum::<u32>() == self.usable_slots
    }

    /// Changes an executor with `change` and keeps the rooms in step with it.
    fn reindex(&mut self, ix: Ix, change: impl FnOnce(&mut Executor)) {
        self.unindex(ix);
        if let Some(exec) = self.executors[ix as usize].as_mut() {
            change(exec);
        }
        self.index(ix);
    }

    fn index(&mut self, ix: Ix) {
        let depths = self.depths();
        let Some(exec) = self.executors[ix as usize].as_ref() else { return };
        if exec.usable() {
            self.usable += 1;
            self.usable_slots += exec.slots;
            for (room, depth) in self.rooms.iter_mut().zip(depths).filter(|(room, _)| room.live) {
                room.insert(exec.free(depth), exec.seq, ix);
            }
        }
    }

    fn unindex(&mut self, ix: Ix) {
        let depths = self.depths();
        let Some(exec) = self.executors[ix as usize].as_ref() else { return };
        if exec.usable() {
            self.usable -= 1;
            self.usable_slots -= exec.slots;
            for (room, depth) in self.rooms.iter_mut().zip(depths).filter(|(room, _)| room.live) {
                room.remove(exec.free(depth), exec.seq);
            }
        }
    }

    /// The room at depth `level`, brought up to date if no job placed from it lately;
    /// rooms no job placed from for [`ROOM_DORMANT_AFTER`] placements stop being kept,
    /// so a fleet does not pay on every launch for depths its jobs do not use.
    fn room(&mut self, level: usize) -> &Room {
        if !self.rooms[level].live {
            let depth = self.depths()[level];
            let room = &mut self.rooms[level];
            room.live = true;
            for (ix, exec) in self.executors.iter().enumerate() {
                if let Some(exec) = exec.as_ref().filter(|e| e.usable()) {
                    room.insert(exec.free(depth), exec.seq, ix as Ix);
                }
            }
        }
        self.rooms[level].last_used = self.placed;
        if self.placed.is_multiple_of(ROOM_DORMANT_AFTER) {
            for room in
                self.rooms.iter_mut().filter(|r| r.live && r.last_used + ROOM_DORMANT_AFTER < self.placed)
            {
                room.live = false;
                room.clear();
            }
        }
        &self.rooms[level]
    }
}

mod job;
mod queue;
mod room;
mod speculation;
mod state;
pub use speculation::MAX_SLOT_FRACTION;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_depth;
#[cfg(test)]
mod tests_scale;
