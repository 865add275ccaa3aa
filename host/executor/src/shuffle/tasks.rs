//! Map and reduce tasks on an executor: a map's records written through a
//! [`MapWriter`], a reduce's slices gathered (read here or fetched from their holders),
//! checked and merged, and map outputs served to the reducers that show the job's
//! secret.

use super::gather::{Ask, Gathered, fetch_all};
use super::merge::SortedRuns;
use super::parts::{Part, PartFile, PartObject};
use super::read::{FetchError, Located, Slice, file_crc};
use super::write::MapWriter;
use crate::core::{ExecutorCore, Taken};
use flint_proto::{
    InlineSlice, JobId, MapSource, Parts, ShuffleInput, TaskFailure, TaskLaunch, TaskOutput, TaskState,
};
use flint_runtime::{RecordSource, TaskContext, TaskInput};
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
        let instance = &mut taken.held().instance;
        let (outcome, writer) = instance.map(ctx, input, writer);
        let state = match outcome.result {
            // Refused room on disk: that is the failure, whatever the guest made of it.
            _ if writer.refused().is_some() => TaskState::Failed(writer.refused().expect("checked").clone()),
            Ok(_) if ctx.kill.is_killed() => TaskState::Failed(TaskFailure::Killed {
                reason: "killed as its map output was written".into(),
            }),
            // A combining job folds, in its own instance, the keys its map wrote twice.
            Ok(_) => match writer.finish(Some(&mut |batch: &[u8]| instance.combine_sorted(ctx, batch))) {
                Ok(status) => TaskState::Succeeded(TaskOutput::Map(status)),
                Err(failure) => TaskState::Failed(failure),
            },
            Err(failure) => TaskState::Failed(failure),
        };
        self.keep_instance(launch, taken, ctx, &state);
        (state, outcome.log)
    }

    /// Runs a reduce task over its merged records; its output is kept as a task's (or,
    /// for a job that collects its parts, what it wrote to its part is).
    pub(crate) fn run_reduce(
        &self,
        launch: &TaskLaunch,
        mut taken: Taken<'_>,
        ctx: &TaskContext,
        partition: u32,
        runs: impl RecordSource,
    ) -> (TaskState, String) {
        let part = match launch.job.shuffle.as_ref().and_then(|s| s.parts.as_ref()) {
            None => None,
            Some(Parts::Collect) => Some(Part::collected(ctx.max_result_size)),
            Some(Parts::Files(dir)) => {
                let number = launch.attempt.number;
                let min_free = self.shuffle.as_ref().map_or(0, |files| files.budget().min_free());
                let created = self.inputs().output_dir(dir).and_then(|dir| {
                    PartFile::create(&dir, partition, number, min_free)
                        .map_err(|e| format!("output {dir:?}: {e}"))
                });
                match created {
                    Ok(part) => Some(Part::File(part)),
                    Err(message) => return (TaskState::Failed(TaskFailure::Host { message }), String::new()),
                }
            }
            Some(Parts::S3 { bucket, prefix }) => {
                let number = launch.attempt.number;
                let (objects, handle) = self.inputs().objects();
                match objects.output(bucket, prefix, &self.tokens()) {
                    Ok(output) => {
                        let name =
                            format!("s3://{bucket}/{prefix}/{}", Parts::attempt_path(partition, number));
                        // The call's own deadline: what gathering took is spent already.
                        let deadline = Instant::now() + ctx.deadline.saturating_sub(ctx.spent);
                        let upload = output.upload(partition, number);
                        Some(Part::Object(PartObject::new(
                            upload,
                            name,
                            handle.clone(),
                            deadline,
                            ctx.kill.clone(),
                        )))
                    }
                    Err(e) => {
                        let message = format!("output s3://{bucket}/{prefix}/: {e}");
                        return (TaskState::Failed(TaskFailure::Host { message }), String::new());
                    }
                }
            }
        };
        let (mut outcome, part) = taken.held().instance.reduce(ctx, partition, runs, part);
        match part {
            // Over the bound, whatever the guest made of the refused write.
            Some(Part::Collected { refused: Some(size), limit, .. }) => {
                outcome.result = Err(TaskFailure::ResultTooLarge { size, limit });
            }
            Some(Part::Collected { bytes, .. }) if outcome.result.is_ok() => outcome.result = Ok(bytes),
            Some(Part::File(file)) if outcome.result.is_ok() => {
                if let Err(e) = file.keep() {
                    let message = format!("writing a part file: {e}");
                    outcome.result = Err(TaskFailure::Host { message });
                }
            }
            Some(Part::Object(object)) if outcome.result.is_ok() => {
                if let Err(message) = object.keep() {
                    outcome.result = Err(TaskFailure::Host { message });
                }
            }
            _ => {}
        }
        self.task_ended(launch, taken, ctx, outcome)
    }

    /// Gathers a reduce partition's slices from every source and merges them in map
    /// order. Slices that came inline in the launch are taken as they are (CRC checked);
    /// this executor's own slices are checked against their CRCs and read in place;
    /// other holders are asked once each, and what they send is kept in memory up to the
    /// host's share for a task, then spilled to this executor's disk. A source that
    /// cannot give its slices, or one that fails its CRC, fails the task as
    /// `fetch-failed`, naming those maps, so that they run again.
    pub(crate) fn reduce_input(
        &self,
        launch: &TaskLaunch,
        partition: u32,
        (sources, inline): (&[MapSource], &[(u32, InlineSlice)]),
        deadline: Instant,
    ) -> Result<SortedRuns, TaskFailure> {
        let maps = launch.job.shuffle.as_ref().map_or(0, |s| s.maps);
        let read =
            ShuffleInput { shuffle: 0, first: 0, maps, sources: sources.to_vec(), inline: inline.to_vec() };
        self.gather(launch, partition, &read, deadline)?
            .into_runs(partition)
            .map_err(|e| TaskFailure::Host { message: format!("cannot read the slices: {e}") })
    }

    /// A program's task's partition of every shuffle it reads, each gathered as a
    /// reduce task's is, merged by key: a record's partition field says which of the
    /// stage's reads it came from (ties to the earlier read).
    pub(crate) fn shuffled_input(
        &self,
        launch: &TaskLaunch,
        partition: u32,
        reads: &[ShuffleInput],
        deadline: Instant,
    ) -> Result<SortedRuns, TaskFailure> {
        let mut merged = Vec::with_capacity(reads.len());
        for read in reads {
            let runs = self
                .gather(launch, partition, read, deadline)?
                .into_runs(partition)
                .map_err(|e| TaskFailure::Host { message: format!("cannot read the slices: {e}") })?;
            merged.push(runs);
        }
        Ok(SortedRuns::tagged(merged))
    }

    /// Gathers a partition's slices of one shuffle from every source. Slices that came
    /// inline in the launch are taken as they are (CRC checked); this executor's own
    /// slices are checked against their CRCs and read in place; other holders are asked
    /// once each, and what they send is kept in memory up to the host's share for a
    /// task, then spilled to this executor's disk. A source that cannot give its
    /// slices, or one that fails its CRC, fails the task as `fetch-failed`, naming
    /// those maps (as numbered in the stage that wrote them) and the shuffle, so that
    /// they run again. On disk and between executors a map is named by its task's
    /// index in the job.
    fn gather(
        &self,
        launch: &TaskLaunch,
        partition: u32,
        read: &ShuffleInput,
        deadline: Instant,
    ) -> Result<Gathered, TaskFailure> {
        let (Some(spec), Some(files)) = (&launch.job.shuffle, &self.shuffle) else {
            return Err(TaskFailure::Host {
                message: "a task reading a shuffle on an executor without shuffle files".into(),
            });
        };
        let job = launch.job.job;
        let ShuffleInput { shuffle, first, maps, sources, inline } = read;
        let global = |map: u32| first.saturating_add(map);
        // Each map once: a map named twice would have its records counted twice.
        let mut named = std::collections::HashSet::new();
        let every =
            inline.iter().map(|(map, _)| *map).chain(sources.iter().flat_map(|s| s.maps.iter().map(|m| m.0)));
        for map in every {
            if map >= *maps || !named.insert(map) {
                return Err(TaskFailure::Host {
                    message: format!("the launch names map {map} twice or past the stage's {maps} maps"),
                });
            }
        }
        let budget = self.blocks().limit() / u64::from(self.runtime().slots());
        let held = files.reserve(job, partition);
        let mut gathered =
            Gathered::new(files.spill_dir(job, partition), launch.attempt.number, budget, held);
        for (map, slice) in inline {
            let slice = Slice { map: global(*map), crc: slice.crc, bytes: slice.bytes.clone() };
            if !slice.intact() {
                return Err(TaskFailure::Host {
                    message: format!("map {map}'s inline slice does not match its checksum"),
                });
            }
            gathered.keep(slice)?;
        }
        let (own, others): (Vec<&MapSource>, Vec<&MapSource>) =
            sources.iter().partition(|source| source.executor == *self.id());
        for source in own {
            let failed = |map: u32, reason: String| TaskFailure::FetchFailed {
                executor: source.executor.clone(),
                incarnation: source.incarnation,
                shuffle: *shuffle,
                maps: vec![map],
                reason,
            };
            for &(map, _) in &source.maps {
                let located = files.slice_location(job, partition, global(map));
                let (path, start, end, crc) =
                    located.map_err(|e| failed(map, format!("map {map}'s output: {e}")))?;
                match file_crc(&path, start, end - start) {
                    Ok(found) if found == crc => gathered.in_place(global(map), path, start, end - start),
                    Ok(_) => return Err(failed(map, "a slice does not match its checksum".into())),
                    Err(e) => return Err(failed(map, format!("map {map}'s output: {e}"))),
                }
            }
        }
        if !others.is_empty() {
            let fetcher = self.fetcher.read().expect("fetcher lock").clone();
            let Some((fetcher, in_flight)) = fetcher else {
                let source = others[0];
                return Err(TaskFailure::FetchFailed {
                    executor: source.executor.clone(),
                    incarnation: source.incarnation,
                    shuffle: *shuffle,
                    maps: source.maps.iter().map(|(m, _)| *m).collect(),
                    reason: "this executor cannot reach its peers".into(),
                });
            };
            // Peers are asked for maps by their tasks' indices in the job.
            let asked: Vec<MapSource> = others
                .iter()
                .map(|s| MapSource {
                    maps: s.maps.iter().map(|&(m, b)| (global(m), b)).collect(),
                    ..(*s).clone()
                })
                .collect();
            let asked: Vec<&MapSource> = asked.iter().collect();
            let ask = Ask { fetcher: &*fetcher, job, token: &spec.token, partition, deadline, in_flight };
            fetch_all(&ask, &asked, &mut gathered).map_err(|failure| match failure {
                TaskFailure::FetchFailed { executor, incarnation, maps, reason, .. } => {
                    TaskFailure::FetchFailed {
                        executor,
                        incarnation,
                        shuffle: *shuffle,
                        maps: maps.into_iter().map(|m| m.saturating_sub(*first)).collect(),
                        reason,
                    }
                }
                other => other,
            })?;
        }
        Ok(gathered)
    }

    /// Whether `token` is the shuffle secret of a job this executor knows.
    pub(crate) fn check_token(&self, job: JobId, token: &[u8; 32]) -> Result<(), Refusal> {
        let known = self.shuffle_tokens.lock().expect("tokens lock").get(&job).copied();
        let Some(secret) = known else { return Err(Refusal::UnknownJob(job)) };
        // Compared in constant time: the secret must not leak through timing.
        match secret.iter().zip(token).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0 {
            true => Ok(()),
            false => Err(Refusal::BadToken(job)),
        }
    }

    /// Where the slices of `partition` from `maps`' outputs held here are, for a
    /// reducer that shows the job's shuffle secret: the server reads and sends them one
    /// at a time.
    pub fn serve_slices(
        &self,
        job: JobId,
        token: &[u8; 32],
        partition: u32,
        maps: &[u32],
    ) -> Result<Vec<Located>, Refusal> {
        self.check_token(job, token)?;
        let files = self.shuffle.as_ref().ok_or_else(|| {
            Refusal::Unreadable(FetchError { maps: maps.to_vec(), reason: "no shuffle folder here".into() })
        })?;
        files.locate_slices(job, partition, maps).map_err(Refusal::Unreadable)
    }
}
