//! Tasks as the driver hands them to executors and executors report them back.

use crate::config::Conf;
use crate::failure::TaskFailure;
use crate::job::PartitionSpec;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use crate::ids::{ExecutorId, JobId};

/// A component's SHA-256 digest: the name executors fetch and cache it by.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    pub fn of(bytes: &[u8]) -> Digest {
        Digest(Sha256::digest(bytes).into())
    }

    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", &self.hex()[..12])
    }
}

/// One attempt of one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Attempt {
    pub job: JobId,
    pub index: u32,
    /// 0 for the first launch, then 1, 2, ...
    pub number: u32,
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job {} task {} attempt {}", self.job, self.index, self.number)
    }
}

/// A delegation token. Its `Debug` hides the secret, so that no log or error message
/// can carry it. A token of a job (`job`) is the host's, for reading that job's inputs
/// from the driver's data service: no task ever sees one.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Token {
    pub service: String,
    pub secret: String,
    /// Milliseconds since the Unix epoch.
    pub expires_at_ms: u64,
    pub job: Option<JobId>,
}

impl Token {
    /// An application-wide token of `service`.
    pub fn new(service: impl Into<String>, secret: impl Into<String>, expires_at_ms: u64) -> Token {
        Token { service: service.into(), secret: secret.into(), expires_at_ms, job: None }
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("service", &self.service)
            .field("secret", &"<hidden>")
            .field("expires_at_ms", &self.expires_at_ms)
            .field("job", &self.job)
            .finish()
    }
}

/// What every task of a job shares; sent to an executor once per job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobDescriptor {
    pub job: JobId,
    pub app_id: String,
    pub name: String,
    pub component: Digest,
    pub task_count: u32,
    /// The job's configuration, as tasks read it: shared by all its tasks on an
    /// executor, never copied per task.
    pub config: Arc<Conf>,
    /// Token services the job's manifest names.
    pub token_services: Vec<String>,
    /// The job's own memory cap, when it asks for less than the executor's.
    pub memory_limit: Option<u64>,
    pub deadline: Duration,
    pub max_result_size: u64,
    /// The job's merge is commutative (its component exports `combiner`) and the
    /// driver wants its partitions combined where they run: each slot folds the tasks
    /// it runs into one running value, handed over as a [`Partial`] when the driver
    /// collects it.
    pub combine: bool,
    /// The most tasks of this job one instance runs before a fresh one replaces it
    /// (`flint.task.instanceReuse`); 1 gives every task a fresh instance.
    pub instance_reuse: u32,
    /// A map/reduce job's shuffle: its first `maps` tasks are map tasks, the next
    /// `reduces` reduce tasks.
    pub shuffle: Option<ShuffleSpec>,
    /// A program's job: its stages, in order (their shuffles' secret is `shuffle`'s
    /// token); its last stage's task outputs are its outputs.
    #[serde(default)]
    pub program: Option<Arc<Vec<crate::program::ProgramStage>>>,
}

impl JobDescriptor {
    /// The outputs the job's fold takes: one per task, a map/reduce job's reduce
    /// outputs, or a program's last stage's.
    pub fn outputs(&self) -> u32 {
        if let Some(last) = self.program.as_ref().and_then(|p| p.last()) {
            return last.tasks;
        }
        self.shuffle.as_ref().map_or(self.task_count, |s| s.reduces)
    }

    /// Whether task `index` writes a shuffle (a map task; a program's task of a stage
    /// that writes one): its output is a map status, which stays on its executor.
    pub fn writes_shuffle(&self, index: u32) -> bool {
        if let Some(stages) = &self.program {
            return crate::program::stage_of(stages, index).is_some_and(|(s, _)| s.plan.writes.is_some());
        }
        self.shuffle.as_ref().is_some_and(|s| s.is_map(index))
    }

    /// Where task `index`'s output goes in the fold: its index, a reduce task's
    /// partition, or a program's last stage's task's; none for a task whose output is
    /// a shuffle's (it stays on its executor).
    pub fn output_index(&self, index: u32) -> Option<u32> {
        if let Some(last) = self.program.as_ref().and_then(|p| p.last()) {
            return index.checked_sub(last.first);
        }
        match &self.shuffle {
            Some(s) => index.checked_sub(s.maps),
            None => Some(index),
        }
    }
}

/// A map/reduce job's shape, and the secret that lets its reduce tasks read its map
/// outputs from the executors holding them.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShuffleSpec {
    pub maps: u32,
    pub reduces: u32,
    /// Random, per job, from the driver: an executor serves a job's map outputs only
    /// to a peer that shows it.
    pub token: [u8; 32],
    /// Where the reduce tasks' part output goes, when the job writes any.
    pub parts: Option<Parts>,
}

/// Where a map/reduce job's reduce tasks write what they write through their
/// `part-writer`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Parts {
    /// Part files in this directory (`--output DIR`); checked by the driver, and by
    /// each executor against its own roots.
    Files(String),
    /// Part objects under `s3://bucket/prefix/`, written and committed with the `s3`
    /// token's credentials.
    S3 { bucket: String, prefix: String },
    /// Back to the submitter (`--collect`): each reduce task's part is its task
    /// output, and the job's result is every part in partition order, within
    /// `flint.task.maxResultSize` a task and `flint.driver.maxResultSize` in all.
    Collect,
}

impl Parts {
    /// Where reduce attempts write their part files before one is committed.
    pub const TEMPORARY: &'static str = "_temporary";
    /// What a job writing parts leaves once every part is in place.
    pub const SUCCESS: &'static str = "_SUCCESS";

    /// Reduce partition `partition`'s part file, as committed.
    pub fn part_name(partition: u32) -> String {
        format!("part-{partition:05}")
    }

    /// Where attempt `number` of reduce partition `partition` writes its part, under
    /// the output directory: the driver commits the accepted attempt's (and only it)
    /// by renaming it to [`Parts::part_name`].
    pub fn attempt_path(partition: u32, number: u32) -> String {
        format!("{}/{}.{number}", Parts::TEMPORARY, Parts::part_name(partition))
    }
}

impl ShuffleSpec {
    /// Whether task `index` is a map task (else a reduce task).
    pub fn is_map(&self, index: u32) -> bool {
        index < self.maps
    }

    /// The seed of the job's map tasks' random numbers: from the job's secret, so
    /// every run of a map draws the same ones and no other job can tell them.
    pub fn map_seed(&self) -> [u8; 32] {
        use sha2::Digest as _;
        sha2::Sha256::new().chain_update(b"flint map random\0").chain_update(self.token).finalize().into()
    }
}

impl fmt::Debug for ShuffleSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShuffleSpec")
            .field("maps", &self.maps)
            .field("reduces", &self.reduces)
            .field("token", &"<hidden>")
            .finish()
    }
}

/// Run one attempt of one task.
#[derive(Debug, Clone)]
pub struct TaskLaunch {
    pub attempt: Attempt,
    pub job: Arc<JobDescriptor>,
    pub partition: PartitionSpec,
}

/// Names a block of bytes held by the executor that made it. Task outputs are blocks
/// today; shuffle map outputs will be blocks too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum BlockId {
    /// The output of one attempt.
    Output(Attempt),
    /// A partial result of combined tasks: the executor's `number`th of the job.
    Partial { job: JobId, number: u64 },
}

/// What a map task wrote: one data file and its index on the executor that ran it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapStatus {
    /// Stored bytes for each reduce partition, in partition order.
    pub sizes: Vec<u64>,
    /// SHA-256 of the records as written, partition by partition: the same for every
    /// run of a deterministic map.
    pub digest: [u8; 32],
    /// Records the map emitted.
    pub records: u64,
    /// Its smallest slices, by reduce partition (ascending), as stored: they ride in
    /// the report and on to their reducers' launches, so that tiny slices are never
    /// fetched one request each. Each is at most [`INLINE_SLICE`] bytes, all together
    /// at most [`INLINE_PER_MAP`]; every slice stays in the data file too.
    pub inline: Vec<(u32, InlineSlice)>,
}

/// The largest slice a map report carries inline.
pub const INLINE_SLICE: usize = 64 << 10;
/// The most slice bytes one map report carries inline: as much as a task output inline.
pub const INLINE_PER_MAP: usize = 64 << 10;
/// The most inline slice bytes one reduce launch carries; its other slices are fetched.
pub const INLINE_PER_LAUNCH: usize = 1 << 20;

/// A map output's slice of one reduce partition as stored (compressed framed records),
/// with the CRC-32 its index holds for it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InlineSlice {
    pub crc: u32,
    pub bytes: Vec<u8>,
}

impl fmt::Debug for InlineSlice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "InlineSlice {{ crc: {:08x}, {} bytes }}", self.crc, self.bytes.len())
    }
}

impl BlockId {
    pub fn job(&self) -> JobId {
        match self {
            BlockId::Output(attempt) => attempt.job,
            BlockId::Partial { job, .. } => *job,
        }
    }
}

/// Where to fetch a block, and what it must turn out to be: its size and CRC-32. A
/// checksum, as a shuffle slice's, not a digest: the bytes come over an authenticated,
/// encrypted stream from the executor that made them, so what the check can catch is a
/// mix-up or a corruption, not a forgery. Side by side on a 200 MB block, SHA-256 took
/// 180–300 ms and the CRC 40–50, and the executor and the driver each pay it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockRef {
    pub id: BlockId,
    pub size: u64,
    pub crc: u32,
}

impl BlockRef {
    /// The reference to `bytes` kept as `id`.
    pub fn of(id: BlockId, bytes: &[u8]) -> BlockRef {
        BlockRef { id, size: bytes.len() as u64, crc: crc32fast::hash(bytes) }
    }

    /// Whether `bytes` are the block this refers to.
    pub fn matches(&self, bytes: &[u8]) -> bool {
        bytes.len() as u64 == self.size && crc32fast::hash(bytes) == self.crc
    }
}

/// A successful attempt's output: small ones ride in the report, larger ones stay on
/// the executor as a block the driver fetches on a stream of its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum TaskOutput {
    Inline(Vec<u8>),
    Block(BlockRef),
    /// Folded into the running value the executor holds for the job (see
    /// [`JobDescriptor::combine`]); it arrives with a [`Partial`].
    Combined,
    /// A map task's output: its shuffle files stay on the executor.
    Map(MapStatus),
}

impl TaskOutput {
    pub fn size(&self) -> u64 {
        match self {
            TaskOutput::Inline(bytes) => bytes.len() as u64,
            TaskOutput::Block(block) => block.size,
            TaskOutput::Combined | TaskOutput::Map(_) => 0,
        }
    }
}

/// The most tasks one [`Partial`] may name: an executor hands a combining instance's
/// value over when it holds this many, and a driver refuses a longer list.
pub const MAX_PARTIAL_TASKS: usize = 1 << 16;

/// Attempts an executor holds per slot at most, queued or running: at least the deepest
/// the driver's scheduler pipelines (tiny tasks, 64 a slot; the driver checks this at
/// compile time).
pub const MAX_HELD_PER_SLOT: usize = 64;

/// The running value of combined tasks, handed over by the executor that combined
/// them (asked by the driver once every task of the job is done, or sooner when the
/// executor needs the room), or word that it was lost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Partial {
    pub job: JobId,
    /// The tasks whose outputs it combines.
    pub tasks: Vec<u32>,
    /// The value, encoded as a task output (inline or a block); or why the combining
    /// instance lost it, in which case those tasks run again.
    pub output: Result<TaskOutput, String>,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum TaskState {
    Succeeded(TaskOutput),
    Failed(TaskFailure),
}

/// The most of a task's log a report carries: the end, where the trouble usually is.
pub const REPORT_LOG_TAIL: usize = 8 << 10;

/// The most configuration keys a host notes a job asking for: past them, a guest asking
/// for ever new names is not followed.
pub const MAX_ASKED: usize = 64;

/// The longest configuration key noted as asked for; a longer one is no key a user typed.
pub const MAX_ASKED_KEY: usize = 128;

/// An executor's report of an attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusUpdate {
    pub executor: ExecutorId,
    pub attempt: Attempt,
    pub state: TaskState,
    /// The guest's captured stdout, stderr and log lines, bounded.
    pub log: String,
    pub elapsed: Duration,
    /// What the host measured of the attempt's input.
    pub metrics: TaskMetrics,
    /// The configuration keys the job's calls on this executor asked for (given or
    /// not) that no earlier report of the job named: at most [`MAX_ASKED`].
    pub asked: Vec<String>,
}

/// What an executor's host measures of an attempt's input as the task reads it: a
/// split's lines, a reduce task's records. The rest of the attempt's time is compute.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskMetrics {
    /// Bytes handed to the task (lines as they decompress, records as they merge).
    pub input_bytes: u64,
    /// Lines or records handed to the task.
    pub input_records: u64,
    /// Microseconds the task waited for its input: reading, fetching, decompressing,
    /// gathering a reduce task's slices.
    pub read_us: u64,
    /// Microseconds the task waited for its job's component: fetched and compiled on
    /// an executor's first task of a job (or loaded from its disk cache), nothing after.
    #[serde(default)]
    pub compile_us: u64,
    /// A map task's output bytes, as written to its shuffle files.
    #[serde(default)]
    pub shuffle_write_bytes: u64,
}

impl StatusUpdate {
    /// The report with its log cut to its last [`REPORT_LOG_TAIL`] bytes and a failure's
    /// message bounded, so that a report always fits a frame whatever the guest said.
    pub fn bounded(mut self) -> StatusUpdate {
        if self.log.len() > REPORT_LOG_TAIL {
            self.log = crate::failure::tail(&self.log, REPORT_LOG_TAIL);
        }
        if let TaskState::Failed(failure) = self.state {
            self.state = TaskState::Failed(failure.bounded());
        }
        self.asked.retain(|k| k.len() <= MAX_ASKED_KEY);
        self.asked.truncate(MAX_ASKED);
        self
    }
}

/// What a driver tells an executor.
#[derive(Debug, Clone)]
pub enum ExecutorCommand {
    /// Run these attempts (a batch, so that one message carries many launches).
    Launch(Vec<TaskLaunch>),
    Kill(Attempt),
    /// The job ended: kill its attempts still here, drop its descriptor and blocks.
    JobEnded(JobId),
    /// Finish the running tasks, take no new ones, then stop.
    Decommission,
    /// The application's delegation tokens changed: tasks read these from now on.
    Tokens(Vec<Token>),
    /// Hand over the partial results held for the job.
    Collect(JobId),
    /// Copy map outputs a leaving executor holds, and hold them from now on.
    Adopt(Adoption),
    /// A drained executor may go: what it held is handed over, or given up.
    Leave,
}

/// Map outputs of one job that a leaving executor holds, for another to copy and hold
/// in its place (the hand-over of a decommission).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Adoption {
    pub job: JobId,
    /// The job's shuffle secret: the leaving executor serves only to a peer showing it,
    /// and the adopter serves the copies behind it.
    pub token: [u8; 32],
    /// The job's reduce partitions: what each output's index must have.
    pub reduces: u32,
    /// The executor that holds them now.
    pub from: crate::job::MapSource,
    /// Each output: its map, the digest its map's first run wrote, and the most bytes
    /// its data file can hold.
    pub outputs: Vec<(u32, [u8; 32], u64)>,
}

impl fmt::Debug for Adoption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Adoption")
            .field("job", &self.job)
            .field("token", &"<hidden>")
            .field("from", &self.from.executor)
            .field("outputs", &self.outputs.len())
            .finish()
    }
}

/// What an executor made of an [`Adoption`]: the maps whose outputs it holds now, and
/// those it could not copy, with why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Adopted {
    pub job: JobId,
    /// The incarnation the outputs came from.
    pub from: u64,
    pub maps: Vec<u32>,
    pub failed: Vec<(u32, String)>,
}
