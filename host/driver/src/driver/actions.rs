//! Carrying out what the control core decided: launches, kills and collects sent down
//! executors' links, accepted outputs handed to their job's fold, executors started and
//! stopped through the backend, tokens fetched and pushed, jobs ended.

use flint_core::{Action, Decided, Event as CoreEvent};
use flint_proto::{ExecutorId, MapSource, PartitionSpec, ShuffleEndpoint, TaskFailure, TaskLaunch};
use std::collections::HashMap;
use std::time::Instant;

use super::budget::Charged;
use super::event_loop::EventLoop;
use super::events::{Event, reporter};
use super::fold_worker::{Fold, FoldInput};
use crate::journal::{AppEvent, Envelope};

/// A holder of map outputs as a reduce task reaches it: its address, if it serves them
/// over the network.
fn map_source(
    addresses: &HashMap<ExecutorId, ShuffleEndpoint>,
    holder: flint_core::shuffle::Holder,
) -> MapSource {
    let address = addresses.get(&holder.executor).cloned();
    MapSource { executor: holder.executor, incarnation: holder.incarnation.0, address, maps: holder.slices }
}

impl EventLoop {
    /// Logs in a running job's span (nothing once the job is gone).
    fn in_job(&self, job: flint_proto::JobId, log: impl FnOnce()) {
        if let Some(record) = self.jobs.get(&job) {
            record.span.in_scope(log);
        }
    }

    /// Commits the part of a reduce task of a job writing parts, as the attempt the
    /// core accepted wrote it (Spark's output commit coordinator: once per task, and
    /// only that attempt's).
    fn commit(&mut self, attempt: flint_proto::Attempt) {
        let Some(job) = self.jobs.get_mut(&attempt.job) else { return };
        if let (Some(output), Some(partition)) = (&mut job.output, job.descriptor.output_index(attempt.index))
        {
            output.commit(partition, attempt.number);
        }
    }

    pub(super) fn feed(&mut self, now: Instant, event: CoreEvent) {
        let actions = self.core.handle(now, event);
        self.apply(actions, None);
    }

    /// Carries out what the core decided. `output` is the output of the success just
    /// fed, handed to the job's fold if the core accepted it.
    pub(super) fn apply(&mut self, actions: Vec<Action>, mut output: Option<Charged>) {
        for action in actions {
            match action {
                Action::Launch { executor, incarnation, attempts } => {
                    let Some((_, link)) = self.links.get(&executor).filter(|(i, _)| *i == incarnation) else {
                        continue;
                    };
                    // Attempts whose plan and launch disagree on what they read.
                    let mut unplanned = Vec::new();
                    let batch: Vec<TaskLaunch> = attempts
                        .into_iter()
                        .filter_map(|flint_core::Launch { attempt, reads }| {
                            let job = self.jobs.get_mut(&attempt.job)?;
                            if !job.executors.contains(&executor) {
                                job.executors.insert(executor.clone());
                            }
                            self.journal.push(Envelope::now(AppEvent::TaskStart {
                                job: attempt.job,
                                index: attempt.index,
                                attempt: attempt.number,
                                executor: executor.clone(), timeline: None }));
                            if attempt.number > 0 {
                                job.span.in_scope(
                                    || tracing::info!(%attempt, executor_id = %executor, "attempt relaunched"),
                                );
                            }
                            // A reduce task reads from wherever its maps' outputs are now, as
                            // the core's launch says.
                            let program = job.descriptor.program.as_deref();
                            let partition = match (job.plan.partition(attempt.index)?, reads.as_slice()) {
                                // A program's task reads every shuffle its stage reads.
                                (PartitionSpec::Reduce { partition, .. }, reads) if program.is_some() && !reads.is_empty() => {
                                    let stages = program.expect("checked");
                                    let reads = reads.iter().map(|read| {
                                        let writer = stages.get(read.shuffle as usize);
                                        let holders = read.input.holders.iter().cloned();
                                        flint_proto::ShuffleInput {
                                            shuffle: read.shuffle,
                                            first: writer.map_or(0, |s| s.first),
                                            maps: writer.map_or(0, |s| s.tasks),
                                            sources: holders.map(|h| map_source(&self.shuffle_addresses, h)).collect(),
                                            inline: read.input.inline.clone(),
                                        }
                                    });
                                    PartitionSpec::Shuffles { partition, reads: reads.collect() }
                                }
                                (PartitionSpec::Reduce { .. }, [read]) => {
                                    let holders = read.input.holders.iter().cloned();
                                    PartitionSpec::Reduce {
                                        partition: read.partition,
                                        shuffle: read.shuffle,
                                        sources: holders.map(|h| map_source(&self.shuffle_addresses, h)).collect(),
                                        inline: read.input.inline.clone(),
                                    }
                                }
                                (other @ (PartitionSpec::Index(_) | PartitionSpec::Value(_) | PartitionSpec::Split { .. }), []) => other,
                                // Never run on part of its input.
                                (_, reads) => {
                                    tracing::error!(%attempt, shuffles = reads.len(), "a launch reads other shuffles than its plan");
                                    unplanned.push(attempt);
                                    return None;
                                }
                            };
                            Some(TaskLaunch { attempt, job: job.descriptor.clone(), partition })
                        })
                        .collect();
                    link.launch(batch);
                    for attempt in unplanned {
                        let message = "the task's plan reads other shuffles than its launch".to_owned();
                        let failure = TaskFailure::Host { message };
                        let event =
                            CoreEvent::TaskFailed { id: executor.clone(), incarnation, attempt, failure };
                        self.feed(std::time::Instant::now(), event);
                    }
                }
                Action::Decided(Decided::TaskDone { attempt }) => {
                    // A reduce task's part is committed now, its accepted attempt's alone;
                    // the job ends once every commit is in, and fails if one is not.
                    self.commit(attempt);
                    if let (Some(job), Some(Charged { bytes, charge })) =
                        (self.jobs.get_mut(&attempt.job), output.take())
                    {
                        charge.keep();
                        // A map task's output stays on its executor: only the others fold.
                        let Some(index) = job.descriptor.output_index(attempt.index) else { continue };
                        match &mut job.fold {
                            Fold::Aggregate(worker) => {
                                if worker.push(FoldInput { index: Some(index), tasks: 1, bytes }) {
                                    self.folds_pending.push(attempt.job);
                                }
                            }
                            Fold::Collect(outputs) | Fold::Parts(outputs) | Fold::Outputs(outputs) => {
                                outputs[index as usize] = Some(bytes)
                            }
                        }
                    }
                }
                Action::Decided(Decided::PartialAccepted { job, tasks }) => {
                    if let (Some(record), Some(Charged { bytes, charge })) =
                        (self.jobs.get_mut(&job), output.take())
                        && let Fold::Aggregate(worker) = &mut record.fold
                    {
                        charge.keep();
                        if worker.push(FoldInput { index: None, tasks, bytes }) {
                            self.folds_pending.push(job);
                        }
                    }
                }
                Action::Collect { executor, incarnation, job } => {
                    if let Some((_, link)) = self.links.get(&executor).filter(|(i, _)| *i == incarnation) {
                        link.collect(job);
                    }
                }
                Action::Decided(Decided::TaskLost { job, index }) => {
                    self.in_job(job, || tracing::info!(index, "task output lost; the task runs again"));
                    self.record(AppEvent::TaskLost { job, index });
                }
                Action::Decided(Decided::Speculated { attempt, original, straggler, executor, why }) => {
                    self.in_job(attempt.job, || {
                        tracing::info!(%attempt, %original, straggler = %straggler, executor_id = %executor, reason = %why, "speculative copy started")
                    });
                    self.shared.speculations.started.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    self.record(AppEvent::Speculated {
                        job: attempt.job,
                        index: attempt.index,
                        attempt: attempt.number,
                        original: original.number,
                        straggler,
                        reason: why.to_string(),
                        timeline: None,
                    });
                }
                Action::Decided(Decided::SpeculationEnded { winner, loser, loser_executor }) => {
                    self.in_job(winner.job, || {
                        tracing::info!(%winner, %loser, executor_id = %loser_executor, "first of two attempts to succeed; the other is killed")
                    });
                    if winner.number > loser.number {
                        self.shared.speculations.won.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    self.record(AppEvent::SpeculationEnded {
                        job: winner.job,
                        index: winner.index,
                        winner: winner.number,
                        loser: loser.number,
                    });
                }
                Action::Kill { executor, incarnation, attempt } => {
                    if let Some((_, link)) = self.links.get(&executor).filter(|(i, _)| *i == incarnation) {
                        link.kill(attempt);
                    }
                }
                Action::TaskFailed { .. } => {}
                Action::Decided(Decided::Retrying { attempt, failure }) => {
                    self.in_job(
                        attempt.job,
                        || tracing::info!(%attempt, kind = failure.kind(), "retrying task"),
                    );
                }
                Action::ExecutorRemoved { executor, incarnation, reason } => {
                    self.slots_changed = true;
                    tracing::warn!(executor_id = %executor, %reason, "executor removed");
                    self.record_executor(Instant::now(), &executor, |executor| AppEvent::ExecutorRemoved {
                        executor,
                    });
                    if self.links.get(&executor).is_some_and(|(i, _)| *i == incarnation)
                        && let Some((_, link)) = self.links.remove(&executor)
                    {
                        link.close(&reason);
                        self.shuffle_addresses.remove(&executor);
                    }
                    // A process the backend started goes with its executor.
                    if let Some(backend) = self.shared.backend.get() {
                        backend.stop(&executor);
                    }
                }
                Action::StartExecutors { ids } => match self.shared.backend.get() {
                    Some(backend) => {
                        tracing::info!(count = ids.len(), backend = backend.name(), "starting executors");
                        backend.start(ids, reporter(&self.events));
                    }
                    // Started when the backend is attached (`Event::BackendAttached`).
                    None => self.unstarted.extend(ids),
                },
                Action::AbandonStart { executor } => {
                    tracing::warn!(executor_id = %executor, "executor did not register in time; stopping it");
                    if let Some(backend) = self.shared.backend.get() {
                        backend.abandon(&executor);
                    }
                }
                Action::FetchToken { service } => {
                    let Some(provider) = self.providers.get(&service).cloned() else { continue };
                    let events = self.events.clone();
                    tokio::spawn(async move {
                        let result = provider.fetch().await;
                        let _ = events.send(Event::TokenFetched { service, result });
                    });
                }
                Action::TokensChanged { tokens } => {
                    *self.shared.renewed.lock().expect("tokens lock") = tokens;
                    self.push_tokens();
                }
                Action::TokenRetry { service, failures, wait } => {
                    tracing::warn!(%service, failures, retry_in_ms = wait.as_millis() as u64, "token renewal will be tried again");
                }
                Action::Adopt { executor, incarnation, shuffle, from, outputs } => {
                    let job = shuffle.job;
                    let link = self.links.get(&executor).filter(|(i, _)| *i == incarnation);
                    let spec = self.jobs.get(&job).and_then(|r| r.descriptor.shuffle.as_ref());
                    // Executors keep one shuffle a job, the map/reduce world's: the
                    // outputs of another are not asked for, and are made again if read.
                    let program = self.jobs.get(&job).is_some_and(|r| r.descriptor.program.is_some());
                    if shuffle.index != 0 || program {
                        tracing::warn!(%job, shuffle = shuffle.index, "map outputs of a program's or a later stage's shuffle are not handed over");
                    } else if let (Some((_, link)), Some(spec)) = (link, spec) {
                        let address = self.shuffle_addresses.get(&from.0).cloned();
                        let from =
                            MapSource { executor: from.0, incarnation: from.1.0, address, maps: Vec::new() };
                        let adoption = flint_proto::Adoption {
                            job,
                            token: spec.token,
                            reduces: spec.reduces,
                            from,
                            outputs,
                        };
                        link.adopt(adoption);
                    }
                }
                Action::Leave { executor, incarnation } => {
                    if let Some((_, link)) = self.links.get(&executor).filter(|(i, _)| *i == incarnation) {
                        link.leave();
                    }
                }
                Action::Decommission { executor, incarnation } => {
                    tracing::info!(executor_id = %executor, "releasing an idle executor");
                    if let Some((_, link)) = self.links.get(&executor).filter(|(i, _)| *i == incarnation) {
                        link.decommission();
                    }
                }
                Action::Decided(Decided::ExecutorExcluded { executor, failed_tasks }) => {
                    self.slots_changed = true;
                    tracing::warn!(executor_id = %executor, failed_tasks, "executor excluded: too many task failures");
                    self.record_executor(Instant::now(), &executor, |executor| AppEvent::ExecutorUpdated {
                        executor,
                    });
                }
                Action::JobSucceeded { job, counts, stages } => {
                    if let Some(record) = self.jobs.get_mut(&job) {
                        record.ended = Some((counts, stages));
                    }
                    self.job_succeeded(job);
                }
                Action::JobFailed { job, reason, counts, stages } => {
                    if let Some(record) = self.jobs.get_mut(&job) {
                        record.ended = Some((counts, stages));
                    }
                    self.complete(job, Err(reason));
                }
            }
        }
        self.refresh_progress();
    }
}
