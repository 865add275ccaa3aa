//! The loop's work on jobs: a submitted job becomes a record and the core's; an ended
//! one gives its submitter the report, its executors word that it ended, and the
//! status listing its line.

use flint_core::{Event as CoreEvent, JobCounts};
use flint_proto::wire::CancelReply;
use flint_proto::{
    JobDescriptor, JobError, JobId, JobProgress, JobReport, Parts, ShuffleSpec, Source, World,
};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{oneshot, watch};

use super::budget::ResultBudget;
use super::event_loop::EventLoop;
use super::events::JobHandle;
use super::events::{Event, PreparedJob};
use super::fold_worker::{Fold, FoldMessage, collect_json, spawn_fold};
use super::records::{JobRecord, Waiting};
use super::warnings::unread_keys;
use crate::job::SubmitError;
use crate::journal::AppEvent;

impl EventLoop {
    /// Takes a checked job: it starts now if fewer than `flint.driver.maxRunningJobs`
    /// run and none waits before it, else waits its turn; with
    /// `flint.driver.maxWaitingJobs` waiting already it is refused, naming both keys.
    pub(super) fn submit(
        &mut self,
        now: Instant,
        job: PreparedJob,
        reply: oneshot::Sender<Result<JobHandle, SubmitError>>,
    ) {
        let refused = match &self.stopping {
            Some(reason) => Some(SubmitError::Cancelled(format!("the driver is stopping: {reason}"))),
            None if self.jobs.len() >= self.max_running() && self.waiting.len() >= self.max_waiting() => {
                Some(SubmitError::Busy(format!(
                    "{} jobs run (flint.driver.maxRunningJobs) and {} wait (flint.driver.maxWaitingJobs); submit again when one ends",
                    self.jobs.len(),
                    self.waiting.len()
                )))
            }
            None => None,
        };
        if let Some(error) = refused {
            self.shared.release_component(&job.component.digest);
            let _ = reply.send(Err(error));
            return;
        }
        let id = self.next_job;
        self.next_job = id.next();
        let tasks = job.plan.len() as u32;
        let (progress, progress_rx) = watch::channel(JobProgress { total: tasks, ..JobProgress::default() });
        let (report, report_rx) = oneshot::channel();
        let _ = reply.send(Ok(JobHandle { id, progress: progress_rx, report: report_rx }));
        let waiting = Waiting { id, job, progress, report, submitted: now };
        if self.waiting.is_empty() && self.jobs.len() < self.max_running() {
            self.start(now, waiting);
        } else {
            tracing::info!(job_id = id.0, job_name = %waiting.job.name, running = self.jobs.len(), "job waits for a running one to end (flint.driver.maxRunningJobs)");
            self.waiting.push_back(waiting);
        }
    }

    fn max_running(&self) -> usize {
        self.shared.settings.max_running_jobs as usize
    }

    fn max_waiting(&self) -> usize {
        self.shared.settings.max_waiting_jobs as usize
    }

    /// Starts waiting jobs while there is room (at the end of the loop's turn, so a job
    /// that ends as it starts cannot start the next from inside its own end).
    pub(super) fn start_waiting(&mut self, now: Instant) {
        while self.jobs.len() < self.max_running() && self.stopping.is_none() {
            let Some(waiting) = self.waiting.pop_front() else { break };
            self.start(now, waiting);
        }
    }

    /// Fails the jobs still waiting (the driver is stopping): each submitter gets its report.
    pub(super) fn cancel_waiting(&mut self, reason: &str) {
        for waiting in std::mem::take(&mut self.waiting) {
            self.drop_waiting(waiting, reason);
        }
    }

    /// Ends a job that never started: its submitter gets a report saying why.
    fn drop_waiting(&self, waiting: Waiting, reason: &str) {
        let Waiting { id, job, report, submitted, .. } = waiting;
        self.shared.release_component(&job.component.digest);
        let _ = report.send(JobReport {
            job: id,
            name: job.name,
            outcome: Err(JobError::Cancelled(reason.to_owned())),
            tasks: job.plan.len() as u32,
            attempts: 0,
            maps_rerun: 0,
            outputs_handed_over: 0,
            failures: Vec::new(),
            failures_dropped: 0,
            elapsed: submitted.elapsed(),
            shuffle: None,
            speculative: 0,
            speculative_won: 0,
            stages: Vec::new(),
            warnings: Vec::new(),
        });
    }

    /// Stops a job at a client's request: a waiting one leaves the queue; a running
    /// one's attempts are killed through the core, as for any job that ends, and it
    /// ends as cancelled (its output, if it writes parts, ended as a failed job's).
    pub(super) fn cancel(&mut self, now: Instant, id: JobId) -> CancelReply {
        let reason = "cancelled on request".to_owned();
        if let Some(at) = self.waiting.iter().position(|w| w.id == id) {
            let waiting = self.waiting.remove(at).expect("found at that place");
            tracing::info!(job_id = id.0, "waiting job cancelled");
            self.drop_waiting(waiting, &reason);
            return CancelReply::Cancelled;
        }
        match self.jobs.get(&id) {
            Some(job) if !job.ending => {
                job.span.in_scope(|| tracing::info!("job cancelled"));
                // Ends it when the core still runs it; else (its last tasks are done,
                // its result not yet made) it ends here.
                self.feed(now, CoreEvent::CancelJob { job: id, reason: reason.clone() });
                self.complete(id, Err(JobError::Cancelled(reason)));
                CancelReply::Cancelled
            }
            Some(_) => CancelReply::Ended,
            None if id < self.next_job => CancelReply::Ended,
            None => CancelReply::Unknown,
        }
    }

    /// Makes a job's record and hands it to the core, which places its tasks.
    fn start(&mut self, now: Instant, waiting: Waiting) {
        let Waiting { id, job, progress, report, submitted } = waiting;
        let tasks = job.plan.len() as u32;
        let descriptor = Arc::new(JobDescriptor {
            job: id,
            app_id: self.shared.app_id.clone(),
            name: job.name.clone(),
            component: job.component.digest,
            task_count: tasks,
            config: Arc::new(job.config),
            token_services: job.token_services,
            memory_limit: job.memory_limit,
            deadline: job.deadline,
            max_result_size: job.settings.task_max_result_size,
            // Its merge is commutative: the tasks a slot runs are combined there.
            combine: job.component.combines() && job.settings.task_combine && job.shuffle.is_none(),
            instance_reuse: job.settings.task_instance_reuse,
            // A program's shuffles are read with the same secret; their stages say
            // which tasks write which.
            shuffle: job.shuffle.or(job.program.as_ref().map(|_| (0, 0))).map(|(maps, reduces)| {
                ShuffleSpec { maps, reduces, token: rand::random(), parts: job.parts.clone() }
            }),
            program: job.program.clone(),
        });
        self.record(AppEvent::JobStart { job: id, name: job.name.clone(), tasks });
        let span = tracing::info_span!("job", job_id = id.0, job_name = %job.name);
        span.in_scope(|| tracing::info!(tasks, world = ?job.component.world, "job submitted"));
        let from_driver: std::collections::HashSet<String> = job
            .plan
            .sources()
            .filter_map(|source| match source {
                Source::Driver(path) => Some(path.clone()),
                _ => None,
            })
            .collect();
        // Its tasks may go one ahead, their first reads begun while they wait.
        let remote_input = job.plan.sources().any(Source::reads_ahead);
        if !from_driver.is_empty() {
            // The job's data token reaches every executor before any of its launches.
            self.shared.data.register(id, from_driver);
            self.push_tokens();
        }
        // A program's actions note the keys they read where the program does.
        let asked = job.asked.clone().unwrap_or_default();
        let fold = match job.component.world {
            World::MapReduce if matches!(job.parts, Some(Parts::Collect)) => {
                Fold::Parts(vec![None; descriptor.outputs() as usize])
            }
            World::Aggregate | World::MapReduce => Fold::Aggregate(spawn_fold(
                {
                    let events = self.events.clone();
                    move |result| {
                        let _ = events.send(Event::Folded { job: id, result });
                    }
                },
                self.shared.runtime.clone(),
                job.component.clone(),
                descriptor.clone(),
                asked.clone(),
                &job.settings,
                span.clone(),
            )),
            World::Task => Fold::Collect(vec![None; descriptor.outputs() as usize]),
            World::Program => Fold::Outputs(vec![None; descriptor.outputs() as usize]),
        };
        let stages = job.plan.stages();
        self.jobs.insert(
            id,
            JobRecord {
                descriptor,
                plan: job.plan,
                fold,
                progress,
                reply: Some(report),
                // What its submitter waited for, its wait included.
                started: submitted,
                ended: None,
                failures: Vec::new(),
                large_outputs: false,
                budget: ResultBudget::new(job.settings.driver_max_result_size),
                executors: BTreeSet::new(),
                span,
                _uploads: job.uploads,
                output: job.output.map(super::output::Committer::new),
                ending: false,
                asked,
            },
        );
        let max_failures = job.settings.task_max_failures;
        let (period, speculate) = (job.every, job.speculate);
        let submitted =
            CoreEvent::JobSubmitted { job: id, stages, max_failures, period, speculate, remote_input };
        self.feed(now, submitted);
    }

    pub(super) fn refresh_progress(&mut self) {
        let executors = self.core.live_executors();
        for (id, job) in &self.jobs {
            let Some(c) = job.ended.as_ref().map(|(c, _)| *c).or_else(|| self.core.job(*id)) else {
                continue;
            };
            job.progress.send_if_modified(|p| {
                let now = progress(c, executors);
                let changed = *p != now;
                *p = now;
                changed
            });
        }
    }

    pub(super) fn job_succeeded(&mut self, id: JobId) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        match &mut job.fold {
            Fold::Aggregate(worker) => {
                worker.flush();
                let _ = worker.sender.send(FoldMessage::Finish);
            }
            Fold::Collect(outputs) => {
                let result = collect_json(std::mem::take(outputs));
                self.complete(id, Ok(result));
            }
            Fold::Parts(outputs) => {
                let result = std::mem::take(outputs).into_iter().flatten().flatten().collect();
                self.complete(id, Ok(result));
            }
            Fold::Outputs(outputs) => {
                let outputs: Vec<Vec<u8>> =
                    std::mem::take(outputs).into_iter().map(Option::unwrap_or_default).collect();
                let result = postcard::to_allocvec(&outputs).expect("bytes encode");
                self.complete(id, Ok(result));
            }
        }
    }

    /// Ends a job with `outcome`. A job writing parts ends its output first, off the
    /// loop (its commits in, its leftovers swept, `_SUCCESS` last if it succeeded), and
    /// ends with what that says; until then nothing else ends it.
    pub(super) fn complete(&mut self, id: JobId, outcome: Result<Vec<u8>, JobError>) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        if job.ending {
            return;
        }
        let Some(output) = job.output.take() else {
            return self.finish(id, outcome);
        };
        job.ending = true;
        let span = job.span.clone();
        if outcome.is_err() {
            // Its attempts stop before their leftovers are swept.
            let reason = "job failed".to_string();
            self.feed(Instant::now(), CoreEvent::CancelJob { job: id, reason });
        }
        let events = self.events.clone();
        let ended = async move {
            let outcome = output.end(outcome).await;
            let _ = events.send(Event::OutputEnded { job: id, outcome });
        };
        tokio::spawn(tracing::Instrument::instrument(ended, span));
    }

    /// Ends a job: its submitter gets the report, its executors word that it ended.
    pub(super) fn finish(&mut self, id: JobId, outcome: Result<Vec<u8>, JobError>) {
        let Some(mut job) = self.jobs.remove(&id) else {
            return;
        };
        // Read before a cancel below makes the core forget the job.
        let tasks = job.descriptor.task_count;
        let (counts, stages) = match job.ended.take() {
            Some(ended) => ended,
            None => (
                self.core.job(id).unwrap_or(JobCounts { tasks, ..JobCounts::default() }),
                self.core.stages(id),
            ),
        };
        // A merge still running for a job that ended another way stops now.
        if let Fold::Aggregate(worker) = &job.fold {
            worker.kill.kill();
        }
        if outcome.is_err() {
            // A failed merge leaves tasks running: stop them (a no-op when the core
            // already ended the job).
            let reason = "job failed".to_string();
            self.feed(Instant::now(), CoreEvent::CancelJob { job: id, reason });
        }
        // Executors that ran it drop what they hold of it: descriptor, blocks, attempts.
        for executor in &job.executors {
            if let Some((_, link)) = self.links.get(executor) {
                link.job_ended(id);
            }
        }
        self.shared.release_component(&job.descriptor.component);
        self.shared.data.unregister(id);
        let mut report = JobReport {
            job: id,
            name: job.descriptor.name.clone(),
            outcome,
            tasks: job.descriptor.task_count,
            attempts: counts.attempts,
            maps_rerun: counts.maps_rerun,
            outputs_handed_over: counts.outputs_handed_over,
            failures: std::mem::take(&mut job.failures),
            failures_dropped: 0,
            elapsed: job.started.elapsed(),
            shuffle: counts.shuffle,
            speculative: counts.speculative,
            speculative_won: counts.speculative_won,
            stages,
            warnings: Vec::new(),
        };
        if report.outcome.is_ok() && job.descriptor.program.is_none() {
            let (asked, full) = job.asked.seen();
            if !full {
                report.warnings = unread_keys(&job.descriptor.config, &asked);
            }
        }
        // The report travels in one frame: many large failures must not stop it.
        report.fit_failures(flint_proto::report::REPORT_FAILURE_BYTES);
        // The job's last counts (its progress was published before its end): the
        // status store keeps them, and lists the job from now on.
        let progress = progress(JobCounts { running: 0, ..counts }, job.progress.borrow().executors);
        self.record(AppEvent::JobEnd {
            job: id,
            succeeded: report.outcome.is_ok(),
            cancelled: matches!(report.outcome, Err(JobError::Cancelled(_))),
            error: report.outcome.as_ref().err().map(ToString::to_string),
            attempts: report.attempts,
            progress: Some(progress),
            stages: report.stages.clone(),
        });
        job.span.in_scope(|| match &report.outcome {
            Ok(_) => tracing::info!(elapsed = ?report.elapsed, attempts = report.attempts, "job succeeded"),
            Err(e) => tracing::warn!(error = %e, "job failed"),
        });
        if let Some(reply) = job.reply.take() {
            let _ = reply.send(report);
        }
    }
}

/// What a submitter, the pages and the store see of a job's counts.
fn progress(c: JobCounts, executors: u32) -> JobProgress {
    JobProgress {
        total: c.tasks,
        done: c.done,
        running: c.running,
        failed_attempts: c.failed_attempts,
        executors,
        outputs_lost: c.outputs_lost,
        shuffle: c.shuffle,
        speculative: c.speculative,
        speculative_won: c.speculative_won,
    }
}
