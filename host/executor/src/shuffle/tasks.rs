//! Map and reduce tasks on an executor: a map's records written through a
//! [`MapWriter`], a reduce's slices gathered (read here or fetched from their holders),
//! checked and merged, and map outputs served to the reducers that show the job's
//! secret.

use super::merge::SortedRuns;
use super::parts::PartFile;
use super::read::{FetchError, Located, Slice, file_crc};
use super::write::MapWriter;
use crate::core::{ExecutorCore, Taken};
use flint_proto::{JobId, MapSource, TaskFailure, TaskLaunch, TaskOutput, TaskState};
use flint_runtime::{TaskContext, TaskInput};
use std::fs::File;
use std::io::{Cursor, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::time::Instant;

/// Where one slice of a reduce task's input waits until the merge reads it.
enum Waiting {
    Memory(Vec<u8>),
    /// A byte range of a file: this executor's own map output, or the task's spill.
    File {
        path: PathBuf,
        start: u64,
        len: u64,
    },
}

/// A reduce task's slices as they are gathered: in memory up to its budget, then
/// appended to a spill file of its own (deleted with the merge).
struct Gathered {
    slices: Vec<(u32, Waiting)>,
    in_memory: u64,
    budget: u64,
    spill: Option<(PathBuf, File, u64)>,
    dir: PathBuf,
    attempt: u32,
}

impl Gathered {
    fn new(dir: PathBuf, attempt: u32, budget: u64) -> Gathered {
        Gathered { slices: Vec::new(), in_memory: 0, budget, spill: None, dir, attempt }
    }

    fn in_place(&mut self, map: u32, path: PathBuf, start: u64, len: u64) {
        if len > 0 {
            self.slices.push((map, Waiting::File { path, start, len }));
        }
    }

    fn keep(&mut self, slice: Slice) -> Result<(), String> {
        let len = slice.bytes.len() as u64;
        if len == 0 {
            return Ok(());
        }
        if self.in_memory + len <= self.budget {
            self.in_memory += len;
            self.slices.push((slice.map, Waiting::Memory(slice.bytes)));
            return Ok(());
        }
        if self.spill.is_none() {
            std::fs::create_dir_all(&self.dir).map_err(|e| format!("cannot make the spill folder: {e}"))?;
            let path = self.dir.join(format!("fetched-{}-{:016x}", self.attempt, rand::random::<u64>()));
            let file = File::create(&path).map_err(|e| format!("cannot spill fetched slices: {e}"))?;
            self.spill = Some((path, file, 0));
        }
        let (path, file, at) = self.spill.as_mut().expect("made above");
        file.write_all(&slice.bytes).map_err(|e| format!("cannot spill fetched slices: {e}"))?;
        self.slices.push((slice.map, Waiting::File { path: path.clone(), start: *at, len }));
        *at += len;
        Ok(())
    }

    /// The merge of every slice, in map order (ties to the lower map).
    fn into_runs(mut self, partition: u32) -> std::io::Result<SortedRuns> {
        let mut runs = SortedRuns::new(partition);
        if let Some((path, mut file, _)) = self.spill.take() {
            file.flush()?;
            runs.own(path);
        }
        self.slices.sort_by_key(|(map, _)| *map);
        for (_, waiting) in self.slices {
            match waiting {
                Waiting::Memory(bytes) => runs.push(zstd::Decoder::new(Cursor::new(bytes))?)?,
                Waiting::File { path, start, len } => {
                    let mut file = File::open(&path)?;
                    file.seek(SeekFrom::Start(start))?;
                    runs.push(zstd::Decoder::new(file.take(len))?)?;
                }
            }
        }
        Ok(runs)
    }
}

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
        let part = match launch.job.shuffle.as_ref().and_then(|s| s.output.as_deref()) {
            None => None,
            Some(dir) => {
                // Unique to this attempt; the executor's id only as far as it is safe in a name.
                let id: String = self
                    .id()
                    .to_string()
                    .chars()
                    .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect();
                let attempt = format!("{}-{id}", launch.attempt.number);
                let created = self.inputs().output_dir(dir).and_then(|dir| {
                    PartFile::create(&dir, partition, &attempt).map_err(|e| format!("output {dir:?}: {e}"))
                });
                match created {
                    Ok(part) => Some(part),
                    Err(message) => return (TaskState::Failed(TaskFailure::Host { message }), String::new()),
                }
            }
        };
        let (mut outcome, part) = taken.held().instance.reduce(ctx, partition, runs, part);
        if let (Ok(_), Some(part)) = (&outcome.result, part)
            && let Err(e) = part.place()
        {
            outcome.result = Err(TaskFailure::Host { message: format!("putting a part file in place: {e}") });
        }
        self.task_ended(launch, taken, ctx, outcome)
    }

    /// Gathers a reduce partition's slices from every source and merges them in map
    /// order. This executor's own slices are checked against their CRCs and read in
    /// place; other holders are asked once each, and what they send is kept in memory up
    /// to the host's share for a task, then spilled to this executor's disk. A source
    /// that cannot give its slices, or one that fails its CRC, fails the task as
    /// `fetch-failed`, naming those maps, so that they run again.
    pub(crate) fn reduce_input(
        &self,
        launch: &TaskLaunch,
        partition: u32,
        sources: &[MapSource],
        deadline: Instant,
    ) -> Result<SortedRuns, TaskFailure> {
        let (Some(spec), Some(files)) = (&launch.job.shuffle, &self.shuffle) else {
            return Err(TaskFailure::Host {
                message: "a reduce task on an executor without shuffle files".into(),
            });
        };
        let job = launch.job.job;
        let budget = self.blocks().limit() / u64::from(self.runtime().slots());
        let mut gathered = Gathered::new(files.spill_dir(job, partition), launch.attempt.number, budget);
        for source in sources {
            let maps: Vec<u32> = source.maps.iter().map(|(m, _)| *m).collect();
            let failed = |maps: Vec<u32>, reason: String| TaskFailure::FetchFailed {
                executor: source.executor.clone(),
                incarnation: source.incarnation,
                maps,
                reason,
            };
            let mut seen = Vec::with_capacity(maps.len());
            if source.executor == *self.id() {
                for &map in &maps {
                    let located = files.slice_location(job, partition, map);
                    let (path, start, end, crc) =
                        located.map_err(|e| failed(vec![map], format!("map {map}'s output: {e}")))?;
                    match file_crc(&path, start, end - start) {
                        Ok(found) if found == crc => gathered.in_place(map, path, start, end - start),
                        Ok(_) => return Err(failed(vec![map], "a slice does not match its checksum".into())),
                        Err(e) => return Err(failed(vec![map], format!("map {map}'s output: {e}"))),
                    }
                    seen.push(map);
                }
            } else {
                let fetcher = self.fetcher.read().expect("fetcher lock").clone();
                let Some(fetcher) = fetcher else {
                    return Err(failed(maps, "this executor cannot reach its peers".into()));
                };
                let mut each = |slice: Slice| {
                    let map = slice.map;
                    if !maps.contains(&map) || seen.contains(&map) {
                        return Err(FetchError {
                            maps: maps.clone(),
                            reason: format!("a slice of map {map}, not asked for"),
                        });
                    }
                    if !slice.intact() {
                        return Err(FetchError {
                            maps: vec![map],
                            reason: "a slice does not match its checksum".into(),
                        });
                    }
                    seen.push(map);
                    gathered.keep(slice).map_err(|e| FetchError { maps: Vec::new(), reason: e })
                };
                let fetched = fetcher.fetch(job, &spec.token, partition, source, deadline, &mut each);
                match fetched {
                    // This executor's own disk failed it: not the holder's maps' fault.
                    Err(e) if e.maps.is_empty() => return Err(TaskFailure::Host { message: e.reason }),
                    Err(e) => return Err(failed(e.maps, e.reason)),
                    Ok(()) => {}
                }
            }
            seen.sort_unstable();
            if seen != maps {
                let missing: Vec<u32> = maps.iter().filter(|m| !seen.contains(m)).copied().collect();
                return Err(failed(missing, format!("asked for {} slices, got {}", maps.len(), seen.len())));
            }
        }
        gathered
            .into_runs(partition)
            .map_err(|e| TaskFailure::Host { message: format!("cannot read the slices: {e}") })
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
        files.locate_slices(job, partition, maps).map_err(Refusal::Unreadable)
    }
}
