//! Map and reduce tasks on an executor: a map's records written through a
//! [`MapWriter`], a reduce's slices gathered (read here or fetched from their holders),
//! checked and merged, and map outputs served to the reducers that show the job's
//! secret.

use super::merge::SortedRuns;
use super::read::{FetchError, Slice};
use super::write::MapWriter;
use crate::core::{ExecutorCore, Taken};
use flint_proto::{JobId, MapSource, TaskFailure, TaskLaunch, TaskOutput, TaskState};
use flint_runtime::{TaskContext, TaskInput};
use std::io::Cursor;
use std::time::Instant;

/// Why an executor would not serve map outputs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("this executor was told of no map/reduce job {0}")]
    UnknownJob(JobId),
    #[error("the shuffle token for job {0} is not the job's")]
    BadToken(JobId),
    #[error("{0}")]
    Unreadable(FetchError),
}

impl ExecutorCore {
    /// Runs a map task: its records sorted into this executor's shuffle files.
    pub(crate) fn run_map(
        &self,
        launch: &TaskLaunch,
        mut taken: Taken<'_>,
        ctx: &TaskContext,
        input: TaskInput,
    ) -> (TaskState, String) {
        let (Some(files), Some(spec)) = (&self.shuffle, &launch.job.shuffle) else {
            let failure =
                TaskFailure::Host { message: "this executor has no folder for shuffle files".into() };
            return (TaskState::Failed(failure), String::new());
        };
        // The host's share of the executor's memory, split between its slots: what a
        // map's records may take before they spill.
        let budget = self.blocks().limit() / u64::from(self.runtime().slots());
        let writer = MapWriter::new(
            files.clone(),
            launch.job.job,
            launch.attempt.index,
            spec.reduces,
            budget as usize,
        );
        let (outcome, writer) = taken.held().instance.map(ctx, input, writer);
        let state = match outcome.result {
            Ok(_) if ctx.kill.is_killed() => TaskState::Failed(TaskFailure::Killed {
                reason: "killed as its map output was written".into(),
            }),
            Ok(_) => match writer.finish() {
                Ok(status) => TaskState::Succeeded(TaskOutput::Map(status)),
                Err(e) => TaskState::Failed(TaskFailure::Host { message: e.message }),
            },
            Err(failure) => TaskState::Failed(failure),
        };
        self.keep_instance(launch, taken, ctx, &state);
        (state, outcome.log)
    }

    /// Runs a reduce task over its merged records; its output is kept as a task's.
    pub(crate) fn run_reduce(
        &self,
        launch: &TaskLaunch,
        mut taken: Taken<'_>,
        ctx: &TaskContext,
        partition: u32,
        runs: SortedRuns,
    ) -> (TaskState, String) {
        let outcome = taken.held().instance.reduce(ctx, partition, runs);
        let state = match outcome.result {
            Ok(bytes) => self.keep_output(launch, ctx, bytes),
            Err(failure) => TaskState::Failed(failure),
        };
        self.keep_instance(launch, taken, ctx, &state);
        (state, outcome.log)
    }

    /// Gathers a reduce partition's slices from every source (this executor's own
    /// files, or one request to each other holder), checks each against its CRC and
    /// the maps asked for, and merges them in map order. A source that cannot give
    /// them fails the task as `fetch-failed`, naming its maps, so those run again.
    pub(crate) fn reduce_input(
        &self,
        launch: &TaskLaunch,
        partition: u32,
        sources: &[MapSource],
        deadline: Instant,
    ) -> Result<SortedRuns, TaskFailure> {
        let Some(spec) = &launch.job.shuffle else {
            return Err(TaskFailure::Host { message: "a reduce task of a job without a shuffle".into() });
        };
        let mut slices: Vec<Slice> = Vec::new();
        for source in sources {
            let maps: Vec<u32> = source.maps.iter().map(|(m, _)| *m).collect();
            let fetched = if source.executor == *self.id() {
                match &self.shuffle {
                    Some(files) => files.read_slices(launch.job.job, partition, &maps),
                    None => Err(FetchError { maps: maps.clone(), reason: "no shuffle folder here".into() }),
                }
            } else {
                let fetcher = self.fetcher.read().expect("fetcher lock").clone();
                match fetcher {
                    Some(fetcher) => fetcher.fetch(launch.job.job, &spec.token, partition, source, deadline),
                    None => Err(FetchError {
                        maps: maps.clone(),
                        reason: "this executor cannot reach its peers".into(),
                    }),
                }
            };
            let failed = |maps: Vec<u32>, reason: String| TaskFailure::FetchFailed {
                executor: source.executor.clone(),
                incarnation: source.incarnation,
                maps,
                reason,
            };
            let got = fetched.map_err(|e| failed(e.maps, e.reason))?;
            // Exactly the maps asked for, each once and intact.
            let mut named: Vec<u32> = got.iter().map(|s| s.map).collect();
            named.sort_unstable();
            if named != maps {
                return Err(failed(
                    maps,
                    format!("asked for {} slices, got {}", source.maps.len(), got.len()),
                ));
            }
            let broken: Vec<u32> = got.iter().filter(|s| !s.intact()).map(|s| s.map).collect();
            if !broken.is_empty() {
                return Err(failed(broken, "a slice does not match its checksum".into()));
            }
            slices.extend(got);
        }
        slices.sort_by_key(|s| s.map);
        let mut runs = SortedRuns::new(partition);
        for slice in slices {
            let map = slice.map;
            let decoder = zstd::Decoder::new(Cursor::new(slice.bytes))
                .map_err(|e| TaskFailure::Host { message: format!("cannot read map {map}'s slice: {e}") })?;
            runs.push(decoder)
                .map_err(|e| TaskFailure::Host { message: format!("cannot read map {map}'s slice: {e}") })?;
        }
        Ok(runs)
    }

    /// The slices of `partition` from `maps`' outputs held here, for a reducer that
    /// shows the job's shuffle secret.
    pub fn serve_slices(
        &self,
        job: JobId,
        token: &[u8; 32],
        partition: u32,
        maps: &[u32],
    ) -> Result<Vec<Slice>, Refusal> {
        let known = self.shuffle_tokens.lock().expect("tokens lock").get(&job).copied();
        let Some(secret) = known else { return Err(Refusal::UnknownJob(job)) };
        // Compared in constant time: the secret must not leak through timing.
        let same = secret.iter().zip(token).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
        if !same {
            return Err(Refusal::BadToken(job));
        }
        let files = self.shuffle.as_ref().ok_or_else(|| {
            Refusal::Unreadable(FetchError { maps: maps.to_vec(), reason: "no shuffle folder here".into() })
        })?;
        files.read_slices(job, partition, maps).map_err(Refusal::Unreadable)
    }
}
