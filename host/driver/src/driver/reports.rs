//! What executors report of their attempts: successes (inline, as blocks to fetch, or
//! combined on the executor), failures, and partial results of combined outputs. A
//! report the core would not accept costs one lookup and nothing more.

use flint_core::{Event as CoreEvent, Incarnation};
use flint_proto::{
    BlockRef, ExecutorId, FailureRecord, JobId, Partial, StatusUpdate, TaskFailure, TaskOutput, TaskState,
};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tracing::Instrument;

use super::budget::{Charge, Charged};
use super::event_loop::EventLoop;
use super::events::{Event, FetchFailure, PartialLoss};
use super::fold_worker::{FOLD_BACKLOG, Fold};
use crate::journal::AppEvent;

impl EventLoop {
    pub(super) fn status(&mut self, now: Instant, incarnation: Incarnation, update: StatusUpdate) {
        if let Some(job) = self.jobs.get(&update.attempt.job) {
            // Bounded there too: past MAX_ASKED keys a job's record takes no more.
            update.asked.iter().for_each(|key| job.asked.record(key));
        }
        // A report the core would drop (an old incarnation, an attempt not held there)
        // goes to it anyway, to be counted, but costs nothing more.
        if !self.core.accepts(&update.executor, incarnation, update.attempt) {
            let event = match update.state {
                TaskState::Succeeded(TaskOutput::Combined) => CoreEvent::TaskCombined {
                    id: update.executor,
                    incarnation,
                    attempt: update.attempt,
                    elapsed: update.elapsed,
                },
                TaskState::Succeeded(_) => CoreEvent::TaskSucceeded {
                    id: update.executor,
                    incarnation,
                    attempt: update.attempt,
                    elapsed: update.elapsed,
                },
                TaskState::Failed(failure) => CoreEvent::TaskFailed {
                    id: update.executor,
                    incarnation,
                    attempt: update.attempt,
                    failure,
                },
            };
            self.feed(now, event);
            return;
        }
        self.shared.durations.record(update.elapsed);
        let mut update = update;
        let output = match &mut update.state {
            TaskState::Failed(failure) => {
                let failure = failure.clone();
                return self.fail(now, incarnation, update, failure);
            }
            // A map task's output is a map status, and only a map task's is: anything else
            // from an executor is refused, so the tracker and the scheduler never disagree
            // about which map outputs exist.
            TaskState::Succeeded(output)
                if matches!(output, TaskOutput::Map(_))
                    != self
                        .jobs
                        .get(&update.attempt.job)
                        .is_some_and(|j| j.descriptor.writes_shuffle(update.attempt.index)) =>
            {
                let message = match output {
                    TaskOutput::Map(_) => "a map output from a task that is not a map",
                    _ => "a map task's report without its map output",
                };
                let failure = TaskFailure::Host { message: message.into() };
                return self.fail(now, incarnation, update, failure);
            }
            TaskState::Succeeded(TaskOutput::Map(status)) => {
                let status = std::mem::replace(
                    status,
                    flint_proto::MapStatus {
                        sizes: Vec::new(),
                        digest: [0; 32],
                        records: 0,
                        inline: Vec::new(),
                    },
                );
                self.task_succeeded(incarnation, &update);
                let StatusUpdate { executor, attempt, elapsed, .. } = update;
                self.feed(
                    now,
                    CoreEvent::MapSucceeded { id: executor, incarnation, attempt, elapsed, status },
                );
                return;
            }
            TaskState::Succeeded(TaskOutput::Combined)
                if !self.jobs.get(&update.attempt.job).is_some_and(|j| j.descriptor.combine) =>
            {
                let failure = TaskFailure::Host {
                    message: "the executor held the output combined, but the job does not combine".into(),
                };
                return self.fail(now, incarnation, update, failure);
            }
            // The bytes move on to the fold; the report keeps only what it says.
            TaskState::Succeeded(TaskOutput::Inline(bytes)) => TaskOutput::Inline(std::mem::take(bytes)),
            TaskState::Succeeded(output) => output.clone(),
        };
        let Some(charge) = self.charge(update.attempt.job, output.size()) else { return };
        match output {
            TaskOutput::Inline(bytes) => {
                self.task_succeeded(incarnation, &update);
                let StatusUpdate { executor, attempt, elapsed, .. } = update;
                let actions = self
                    .core
                    .handle(now, CoreEvent::TaskSucceeded { id: executor, incarnation, attempt, elapsed });
                self.apply(actions, Some(Charged { bytes, charge }));
            }
            TaskOutput::Block(block) => {
                let (executor, job) = (update.executor.clone(), update.attempt.job);
                // Outputs that wait on their executors: no task queued ahead there.
                if let Some(record) = self.jobs.get_mut(&job).filter(|r| !r.large_outputs) {
                    record.large_outputs = true;
                    self.feed(now, CoreEvent::LargeOutputs { job });
                }
                let span = tracing::debug_span!("fetch", attempt = %update.attempt, size = block.size);
                self.fetch(incarnation, &executor, job, (block, charge), span, move |result| {
                    let result = result.map_err(|failure| match failure {
                        FetchFailure::Mismatch(message) => TaskFailure::Host { message },
                        FetchFailure::Lost(reason) => TaskFailure::ExecutorLost {
                            executor: update.executor.clone(),
                            reason: format!("fetching the result failed: {reason}"),
                        },
                    });
                    Event::Fetched { incarnation, update, result }
                });
            }
            // Taken above, before any charge.
            TaskOutput::Map(_) => {}
            // Held on the executor, folded into its running value: it comes with a
            // partial result.
            TaskOutput::Combined => {
                self.task_succeeded(incarnation, &update);
                let StatusUpdate { executor, attempt, elapsed, .. } = update;
                self.feed(now, CoreEvent::TaskCombined { id: executor, incarnation, attempt, elapsed });
            }
        }
    }

    /// Charges `size` bytes of results to the job's `flint.driver.maxResultSize`,
    /// before any of them is fetched; over it, the job fails with that reason (and
    /// `complete` stops its tasks). None when the job is gone or just failed.
    pub(super) fn charge(&mut self, job: JobId, size: u64) -> Option<Charge> {
        match self.jobs.get(&job)?.budget.charge(size) {
            Ok(charge) => Some(charge),
            Err(reason) => {
                self.complete(job, Err(reason));
                None
            }
        }
    }

    /// Combined outputs handed over: small ones ride in the message, larger ones are
    /// fetched as a block (their size charged first, as a task's); a combining instance
    /// that failed loses what it held.
    pub(super) fn partial(
        &mut self,
        now: Instant,
        id: ExecutorId,
        incarnation: Incarnation,
        partial: Partial,
    ) {
        let Partial { job, tasks, output } = partial;
        if tasks.len() > flint_proto::MAX_PARTIAL_TASKS {
            // No honest executor names this many: what it holds of them runs again.
            return self.partial_ended(now, (id, incarnation), job, tasks, Err(PartialLoss::TooManyTasks));
        }
        match output {
            Ok(TaskOutput::Inline(bytes)) => {
                if let Some(charge) = self.charge(job, bytes.len() as u64) {
                    self.partial_ended(now, (id, incarnation), job, tasks, Ok(Charged { bytes, charge }));
                }
            }
            Ok(TaskOutput::Block(block)) => {
                let Some(charge) = self.charge(job, block.size) else { return };
                let span =
                    tracing::debug_span!("fetch", job_id = job.0, tasks = tasks.len(), size = block.size);
                let executor = id.clone();
                self.fetch(incarnation, &executor, job, (block, charge), span, move |result| {
                    Event::PartialFetched {
                        id,
                        incarnation,
                        job,
                        tasks,
                        result: result.map_err(PartialLoss::Fetch),
                    }
                });
            }
            Ok(TaskOutput::Combined | TaskOutput::Map(_)) => {
                self.partial_ended(now, (id, incarnation), job, tasks, Err(PartialLoss::NoValue))
            }
            Err(reason) => {
                self.partial_ended(now, (id, incarnation), job, tasks, Err(PartialLoss::OnExecutor(reason)))
            }
        }
    }

    /// A partial result came to an end: its bytes are in (and charged), and the core
    /// accepts it whole (the executor holds every task it names) or has those tasks run
    /// again; or it was lost on the way, and those tasks run again. Accepted, it is
    /// folded.
    pub(super) fn partial_ended(
        &mut self,
        now: Instant,
        (id, incarnation): (ExecutorId, Incarnation),
        job: JobId,
        tasks: Vec<u32>,
        result: Result<Charged, PartialLoss>,
    ) {
        match result {
            Ok(output) => {
                if !self.jobs.contains_key(&job) {
                    return;
                }
                // Refused, its tasks run again and are charged again when they end: the
                // output is dropped unfolded, and its charge with it.
                let actions = self.core.handle(now, CoreEvent::Partial { id, incarnation, job, tasks });
                self.apply(actions, Some(output));
            }
            Err(loss) => {
                if let Some(record) = self.jobs.get(&job) {
                    let reason = flint_proto::failure::head(&loss.to_string(), 1024);
                    record.span.in_scope(|| {
                        tracing::warn!(executor_id = %id, tasks = tasks.len(), %reason, "combined outputs lost; those tasks run again")
                    });
                }
                self.feed(now, CoreEvent::CombinedLost { id, incarnation, job, tasks });
            }
        }
    }

    /// Fetches a block on a stream of its own and sends what `done` makes of the bytes
    /// (checked against the block's size and digest) to the loop. A task's attempt keeps
    /// its slot until then; a partial result's tasks stay held by their executor.
    pub(super) fn fetch(
        &mut self,
        incarnation: Incarnation,
        executor: &ExecutorId,
        job: JobId,
        (block, charge): (BlockRef, Charge),
        span: tracing::Span,
        done: impl FnOnce(Result<Charged, FetchFailure>) -> Event + Send + 'static,
    ) {
        let Some((_, link)) = self.links.get(executor).filter(|(i, _)| *i == incarnation) else {
            return;
        };
        let fetch = link.fetch(block);
        let backlog = match self.jobs.get(&job).map(|j| &j.fold) {
            Some(Fold::Aggregate(worker)) => Some((worker.backlog.clone(), worker.kill.clone())),
            _ => None,
        };
        let (events, permits, shared) = (self.events.clone(), self.fetches.clone(), self.shared.clone());
        // An executor that holds a block but never sends it must not hold the job: the
        // fetch gets as long as a silent executor does.
        let limit = self.shared.settings.network_timeout;
        tokio::spawn(
            async move {
                // Outputs waiting for a slow merge hold this fetch back (and with it the
                // attempt's slot, so the executor gets no new work): memory stays bounded.
                while let Some((backlog, job_ended)) = &backlog {
                    let waiting = backlog.load(Ordering::Relaxed);
                    if waiting == 0 || waiting + block.size <= FOLD_BACKLOG || job_ended.is_killed() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let _permit = permits.acquire_owned().await;
                let started = std::time::Instant::now();
                let fetched = tokio::time::timeout(limit, fetch).await.unwrap_or_else(|_| {
                    Err(format!("no block within {} ms (flint.network.timeout)", limit.as_millis()))
                });
                if let Ok(bytes) = &fetched {
                    let (kind, size) = (crate::metrics::Transfer::BlockFetch, bytes.len() as u64);
                    shared.peer_metrics.transferred(kind, size, started.elapsed());
                }
                let result = match fetched {
                    Ok(bytes) if !block.matches(&bytes) => Err(FetchFailure::Mismatch(format!(
                        "result block of {} bytes does not match its reference ({} bytes, CRC-32 {:08x})",
                        bytes.len(),
                        block.size,
                        block.crc
                    ))),
                    Ok(bytes) => Ok(Charged { bytes, charge }),
                    Err(reason) => Err(FetchFailure::Lost(reason)),
                };
                let _ = events.send(done(result));
            }
            .instrument(span),
        );
    }

    pub(super) fn fail(
        &mut self,
        now: Instant,
        incarnation: Incarnation,
        update: StatusUpdate,
        failure: TaskFailure,
    ) {
        let StatusUpdate { executor, attempt, ref log, .. } = update;
        if self.core.accepts(&executor, incarnation, attempt)
            && let Some(job) = self.jobs.get_mut(&attempt.job)
        {
            job.span.in_scope(|| tracing::warn!(%attempt, executor_id = %executor, %failure, "task failed"));
            job.failures.push(FailureRecord::new(attempt, executor.clone(), failure.clone(), log));
            self.record(AppEvent::TaskEnd {
                job: attempt.job,
                index: attempt.index,
                attempt: attempt.number,
                executor: executor.clone(),
                duration_ms: update.elapsed.as_millis() as u64,
                failure: Some(failure.clone()),
                log_tail: Some(flint_proto::log_tail(log)),
                metrics: update.metrics,
            });
        }
        self.feed(now, CoreEvent::TaskFailed { id: executor, incarnation, attempt, failure });
    }

    /// Notes an accepted success (its output is in, or being fetched and checked).
    pub(super) fn task_succeeded(&mut self, incarnation: Incarnation, update: &StatusUpdate) {
        if !self.core.accepts(&update.executor, incarnation, update.attempt) {
            return;
        }
        let attempt = update.attempt;
        self.record(AppEvent::TaskEnd {
            job: attempt.job,
            index: attempt.index,
            attempt: attempt.number,
            executor: update.executor.clone(),
            duration_ms: update.elapsed.as_millis() as u64,
            failure: None,
            log_tail: (!update.log.is_empty()).then(|| flint_proto::log_tail(&update.log)),
            metrics: update.metrics,
        });
    }
}
