//! The control core's side of a job's stages: where a task's inputs are, outputs made
//! again while a stage still needs them, reports a stage's task may not make, the
//! stages' counts.

use super::{Action, ControlCore, JobCounts, Launch, ShuffleRead};
use crate::registry::Incarnation;
use crate::scheduler::Input;
use crate::shuffle::{Gone, ReduceInput, ShuffleId, TrackerError};
use flint_proto::{Attempt, ExecutorId, JobId, StageReport, TaskFailure};
use std::collections::BTreeSet;
use std::time::Instant;

impl ControlCore {
    /// Where partition `partition` of the job's shuffle `shuffle` (the stage that
    /// writes it) is: one holder per executor incarnation with bytes for it, and the
    /// slices at hand.
    pub fn shuffle_input(
        &self,
        job: JobId,
        shuffle: u32,
        partition: u32,
    ) -> Result<ReduceInput, TrackerError> {
        self.outputs.slices_for(ShuffleId { job, index: shuffle }, partition)
    }

    /// Outputs that are gone run again while a stage that reads them has tasks to run
    /// (see `Dag::needing`): the scheduler requeues those tasks, in one step so that
    /// nothing is placed on what is about to go, and holds back the stages that read
    /// them. With `launch` false nothing is placed yet (the caller's next step will).
    pub(super) fn outputs_gone(
        &mut self,
        now: Instant,
        gone: Vec<Gone>,
        launch: bool,
        actions: &mut Vec<Action>,
    ) {
        let jobs: BTreeSet<JobId> = gone.iter().map(|g| g.shuffle.job).collect();
        for job in jobs {
            self.rerun_needed(now, job, launch, actions);
        }
    }

    /// Makes again the outputs of `job` that a stage still to run needs.
    pub(super) fn rerun_needed(&mut self, now: Instant, job: JobId, launch: bool, actions: &mut Vec<Action>) {
        let Some(dag) = self.dags.get(&job) else { return };
        let tasks = dag.needing(job, &self.outputs);
        if tasks.is_empty() {
            return;
        }
        match launch {
            true => self.step(now, Input::OutputsLost { job, tasks }, actions),
            false => {
                let outputs = self.scheduler.forget_outputs(job, &tasks);
                self.apply_outputs(now, outputs, actions);
            }
        }
    }

    /// The stage of the attempt's task, when that stage writes a shuffle.
    pub(super) fn stage_writing(&self, attempt: Attempt) -> Option<u32> {
        let dag = self.dags.get(&attempt.job)?;
        dag.stage_of(attempt.index).map(|(stage, _)| stage).filter(|&stage| dag.writes(stage))
    }

    /// An attempt's report is refused: it fails as `failure` says.
    pub(super) fn report_failed(
        &mut self,
        now: Instant,
        executor: ExecutorId,
        attempt: Attempt,
        failure: TaskFailure,
        actions: &mut Vec<Action>,
    ) {
        actions.push(Action::TaskFailed { attempt, executor: executor.clone(), failure: failure.clone() });
        self.step(now, Input::TaskFailed { attempt, executor, failure }, actions);
    }

    /// A task could not read shuffle `shuffle`: whether that is a shuffle its stage
    /// reads (whose outputs named are then marked gone), or, as `(stage, attempts)`,
    /// that its job fails, its stage's attempts having failed so
    /// `flint.stage.maxConsecutiveAttempts` times in a row.
    pub(super) fn stage_fetch_failed(&mut self, attempt: Attempt, shuffle: u32) -> Result<bool, (u32, u32)> {
        let Some(dag) = self.dags.get_mut(&attempt.job) else { return Ok(false) };
        let Some((stage, _)) = dag.stage_of(attempt.index) else { return Ok(false) };
        if !dag.reads(stage).contains(&shuffle) {
            return Ok(false);
        }
        let attempts = dag.fetch_failed(stage);
        if attempts >= self.max_stage_attempts {
            return Err((stage, attempts));
        }
        Ok(true)
    }

    /// Fails the attempts placed before every output they read was there.
    pub(super) fn unsourced(
        &mut self,
        now: Instant,
        unsourced: Vec<(ExecutorId, Incarnation, Attempt, (u32, TrackerError))>,
        actions: &mut Vec<Action>,
    ) {
        // The scheduler places a stage's task only once every output it reads is
        // there; should one not be (an output let go because nothing was left to read
        // it, before a reader lost its own), the attempt fails as unable to read it,
        // never runs on part of its input, and what it needs is made again first.
        for (executor, incarnation, attempt, (shuffle, e)) in unsourced {
            tracing::warn!(%attempt, shuffle, error = %e, "a task was placed before its inputs were there");
            let failure = TaskFailure::FetchFailed {
                executor: executor.clone(),
                incarnation: incarnation.0,
                shuffle,
                maps: Vec::new(),
                reason: e.to_string(),
            };
            actions.push(Action::TaskFailed {
                attempt,
                executor: executor.clone(),
                failure: failure.clone(),
            });
            if let Some(dag) = self.dags.get(&attempt.job) {
                let first = dag.first(shuffle);
                let missing = self.outputs.missing(ShuffleId { job: attempt.job, index: shuffle });
                let tasks = missing.unwrap_or_default().into_iter().map(|m| first + m).collect();
                self.step(now, Input::OutputsLost { job: attempt.job, tasks }, actions);
            }
            self.step(now, Input::TaskFailed { attempt, executor, failure }, actions);
        }
    }

    /// The attempt with where its partition of each shuffle it reads is; the shuffle
    /// and why when one is not all there.
    pub(super) fn whole_launch(&self, attempt: Attempt) -> Result<Launch, (u32, TrackerError)> {
        let Some(dag) = self.dags.get(&attempt.job) else { return Ok(Launch { attempt, reads: Vec::new() }) };
        let Some((stage, partition)) = dag.stage_of(attempt.index) else {
            return Ok(Launch { attempt, reads: Vec::new() });
        };
        let reads = dag
            .reads(stage)
            .iter()
            .map(|&shuffle| {
                let input =
                    self.outputs.slices_for(ShuffleId { job: attempt.job, index: shuffle }, partition);
                input.map(|input| ShuffleRead { shuffle, partition, input }).map_err(|e| (shuffle, e))
            })
            .collect::<Result<_, _>>()?;
        Ok(Launch { attempt, reads })
    }

    /// A job ended: its shuffles and stages are let go; its last counts and stages.
    pub(super) fn job_ended(&mut self, now: Instant, job: JobId) -> (JobCounts, Vec<StageReport>) {
        let shuffle = self.first_shuffle(job);
        let stages = self.stages(job);
        self.outputs.job_ended(job);
        self.dags.remove(&job);
        self.leaving.forget_job(job);
        let counts = JobCounts { shuffle, running: 0, ..self.jobs.remove(&job).unwrap_or_default() };
        self.run_ended(now, job, counts.tasks);
        (counts, stages)
    }

    /// The sizes of the job's first shuffle, once all its outputs are in.
    pub(super) fn first_shuffle(&self, job: JobId) -> Option<flint_proto::ShuffleSizes> {
        let (stage, _, _) = self.dags.get(&job)?.shuffles().next()?;
        self.outputs.sizes(ShuffleId { job, index: stage })
    }

    /// A running job's stages, in plan order: what each ran, and its shuffles' sizes.
    pub fn stages(&self, job: JobId) -> Vec<StageReport> {
        self.dags.get(&job).map(|dag| dag.report(job, &self.outputs)).unwrap_or_default()
    }
}
