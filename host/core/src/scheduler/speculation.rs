//! Speculative execution: a second attempt of a task that runs far longer than its
//! stage's others, on another executor; the first to succeed is the task's, the other
//! is killed. Off unless the policy has a `Speculation`; a job can refuse it (its
//! tasks write outside Flint and must not run twice).
//!
//! As Spark's: once `quantile` of a stage's tasks are done (or straggling: a pipelined
//! job's short tasks queued behind a straggler wait with it), a running task is a
//! candidate when it has run longer than `multiplier` × the median of the stage's
//! successful run times (and at least `min_runtime`). Candidates that have run longest
//! go first, never on the straggler's own executor nor on one that runs a straggler
//! itself, and at most a tenth of the application's slots (at least one) run copies at
//! once. A copy that finds no free slot elsewhere counts as a task waiting for one, so
//! dynamic allocation can grow for it.

use super::state::{Decided, Output, Scheduler, Straggling};
use flint_proto::wire::Progress;
use flint_proto::{Attempt, ExecutorId, JobId};
use std::time::{Duration, Instant};

/// The most of the application's slots copies may hold at once.
pub const MAX_SLOT_FRACTION: f64 = 0.1;

/// A candidate for a copy: its attempt running now, where, and why.
struct Candidate {
    job: JobId,
    index: u32,
    original: Attempt,
    on: super::room::Ix,
    why: Straggling,
}

impl Scheduler {
    /// When running tasks are next looked at for copies, while any job could have one.
    pub(super) fn speculation_due(&self) -> Option<Instant> {
        self.policy.speculation.as_ref()?;
        self.jobs.values().any(|j| j.speculate && j.running > 0).then_some(self.next_speculation?)
    }

    /// Starts copies of the tasks that straggle now (see the module documentation).
    pub(super) fn speculate(&mut self, now: Instant, out: &mut Vec<Output>) {
        let Some(policy) = self.policy.speculation.clone() else { return };
        if self.next_speculation.is_some_and(|at| now < at) {
            return;
        }
        self.next_speculation = Some(now + policy.interval);
        let mut candidates = Vec::new();
        for (&job_id, job) in self.jobs.iter_mut().filter(|(_, j)| j.speculate && j.running > 0) {
            // Running tasks have records: only those are walked, not the stage.
            let mut running: Vec<u32> =
                job.tasks.records().filter(|(_, t)| t.running.is_some()).map(|(i, _)| i).collect();
            running.sort_unstable();
            // A stage whose inputs are not all there (an output it reads was lost)
            // gets no copy: a copy would read what is gone.
            let ready: Vec<bool> = (0..job.stages.len()).map(|i| job.ready(i)).collect();
            for (stage, _) in job.stages.iter_mut().zip(ready).filter(|(_, ready)| *ready) {
                let n = stage.end - stage.start;
                let done = n - stage.undone;
                // At most every placed task of the job is waiting or straggling: a stage
                // that cannot be far enough along is not walked.
                let gate = (policy.quantile * f64::from(n)).ceil();
                if n == 0 || stage.undone == 0 || f64::from(done) + f64::from(job.running) < gate {
                    continue;
                }
                let Some(median) = stage.median() else { continue };
                let threshold = median.mul_f64(policy.multiplier).max(policy.min_runtime);
                let mut stragglers = Vec::new();
                // Placed, queued behind others on its executor and not started.
                let mut waiting = 0u32;
                let from = running.partition_point(|i| *i < stage.start);
                let to = running.partition_point(|i| *i < stage.end);
                for &index in &running[from..to] {
                    let task = job.tasks.get(index).expect("a record's index is in range");
                    let (Some((number, on)), Some(placed)) = (task.running, task.since) else { continue };
                    // Queued behind others on its executor, it has not started yet, or
                    // started when enough of them ended.
                    let exec = self.executors[on as usize].as_ref().expect("placed on a known executor");
                    let since = match task.starts_after {
                        after if after <= exec.ended => exec.started(after).map_or(placed, |t| t.max(placed)),
                        _ => {
                            waiting += 1;
                            continue;
                        }
                    };
                    let elapsed = now.saturating_duration_since(since);
                    if !task.done && elapsed > threshold {
                        let original = Attempt { job: job_id, index, number };
                        let heard = exec.progress.iter().find(|(a, ..)| *a == original);
                        let (read, left) = match heard {
                            Some(&(_, read, at)) => (Some(read), Some(time_left(since, read, at, now))),
                            None => (None, None),
                        };
                        let why = Straggling { elapsed, median, threshold, read, left };
                        stragglers
                            .push((task.copy.is_none(), Candidate { job: job_id, index, original, on, why }));
                    }
                }
                // The stage is far enough along once `quantile` of it is done, straggling
                // or queued on an executor without having started (a pipelined job's
                // short tasks behind a straggler wait with it: they are not copied,
                // they run once it is killed).
                let along = f64::from(done) + f64::from(waiting) + stragglers.len() as f64;
                if along >= gate {
                    candidates
                        .extend(stragglers.into_iter().filter(|(uncopied, _)| *uncopied).map(|(_, c)| c));
                }
            }
        }
        // The longest estimated time left first (LATE's order), else the longest running.
        candidates.sort_by_key(|c| std::cmp::Reverse(c.why.priority()));
        let cap = ((f64::from(self.usable_slots) * MAX_SLOT_FRACTION) as u32).max(1);
        let slow: Vec<super::room::Ix> = candidates.iter().map(|c| c.on).collect();
        let mut wanted = 0;
        for c in candidates {
            if self.copies >= cap {
                break;
            }
            // One slot per copy, whatever the job's pipeline depth: a copy is there to
            // run now, not to wait in a queue.
            self.room(0);
            let executors = &self.executors;
            let failed_on = &self.jobs[&c.job].tasks.get(c.index).expect("a candidate's index").failed_on;
            let pick = self.rooms[0].iter().find(|ix| {
                let id = &executors[*ix as usize].as_ref().expect("indexed executors exist").id;
                !slow.contains(ix) && !failed_on.contains(id)
            });
            let Some(ix) = pick else {
                wanted += 1;
                continue;
            };
            let task = self
                .jobs
                .get_mut(&c.job)
                .expect("a candidate's job")
                .tasks
                .get_mut(c.index)
                .expect("in range");
            let attempt = Attempt { job: c.job, index: c.index, number: task.launches };
            task.launches += 1;
            task.copy = Some((attempt.number, ix, now));
            self.copies += 1;
            self.placed += 1;
            self.reindex(ix, |exec| exec.running += 1);
            let executor = self.id_of(ix);
            let straggler = self.id_of(c.on);
            out.push(Output::Decided(Decided::Speculated {
                attempt,
                original: c.original,
                straggler,
                executor: executor.clone(),
                why: c.why,
            }));
            out.push(Output::Launch { executor, attempts: vec![attempt] });
        }
        self.copies_wanted = wanted;
    }

    /// The task of `attempt`, which just ended, may have another attempt running (its
    /// original or its copy). If `won`, that one is killed and its slot freed, and the
    /// ending one is left as the task's running attempt for its caller to end; if not
    /// (it failed), the other runs on as the task's only attempt. The ending attempt's
    /// own slot is its caller's to free.
    pub(super) fn end_other_attempt(&mut self, attempt: Attempt, won: bool, out: &mut Vec<Output>) {
        let Some(task) = self.jobs.get_mut(&attempt.job).and_then(|j| j.tasks.get_mut(attempt.index)) else {
            return;
        };
        let Some((copy, copy_on, copy_since)) = task.copy.take() else { return };
        self.copies -= 1;
        let (number, on) = task.running.expect("a copy runs beside its original");
        let ending_is_copy = copy == attempt.number;
        let (other, other_on) = if ending_is_copy { (number, on) } else { (copy, copy_on) };
        // The attempt that stays the task's running one: the ending one if it won, else
        // the other.
        if ending_is_copy == won {
            task.running = Some((copy, copy_on));
            task.since = Some(copy_since);
            task.starts_after = 0;
        }
        if won {
            let other = Attempt { number: other, ..attempt };
            self.release(other_on);
            let executor = self.id_of(other_on);
            out.push(Output::Kill { executor: executor.clone(), attempt: other });
            out.push(Output::Decided(Decided::SpeculationEnded {
                winner: attempt,
                loser: other,
                loser_executor: executor,
            }));
        }
    }

    /// An executor's heartbeat: how far its attempts are through their inputs. Kept
    /// while speculation is on, one entry per attempt placed there at most (the rest
    /// of what a peer sent is dropped).
    pub(super) fn progress_heard(&mut self, now: Instant, id: &ExecutorId, progress: Vec<Progress>) {
        if self.policy.speculation.is_none() {
            return;
        }
        let Some(exec) = self.ix(id).and_then(|ix| self.executors[ix as usize].as_mut()) else { return };
        exec.progress.clear();
        let heard = progress.iter().filter_map(|p| Some((p.attempt, p.fraction()?, now)));
        exec.progress.extend(heard.take(exec.running as usize));
    }

    fn id_of(&self, ix: super::room::Ix) -> ExecutorId {
        self.executors[ix as usize].as_ref().expect("placed on a known executor").id.clone()
    }
}

/// The run time left to an attempt that started at `since` and had read `read` of its
/// input at `heard`, if it goes on at the rate it read so far (LATE's estimate); a
/// task that had read nothing has the longest time left of all.
pub(super) fn time_left(since: Instant, read: f64, heard: Instant, now: Instant) -> Duration {
    if read <= 0.0 {
        return Duration::MAX;
    }
    let whole =
        Duration::try_from_secs_f64(heard.saturating_duration_since(since).as_secs_f64() / read.min(1.0));
    whole.unwrap_or(Duration::MAX).saturating_sub(now.saturating_duration_since(since))
}
