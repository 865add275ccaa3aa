//! Messages on the wire between clients, executors and the driver. Only these types
//! (and the domain types they carry) cross a connection; each frame is a length prefix
//! and a postcard body (see `flint-net`).
//!
//! A connection starts with [`Hello`] on its first bidirectional stream. An executor keeps
//! that stream as its control stream: commands one way, status reports the other. It
//! sends [`Heartbeat`]s on a unidirectional stream of their own, so that a busy task
//! path never starves them, and opens one stream per large transfer (a component).
//! A client opens a stream per request.

use crate::config::Conf;
use crate::job::{Manifest, PartitionSpec};
use crate::report::{JobProgress, JobReport};
use crate::task::{Attempt, BlockId, Digest, ExecutorId, JobDescriptor, JobId, StatusUpdate, Token};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Bumped on any incompatible change; peers of another version are rejected.
pub const PROTOCOL_VERSION: u32 = 20;

/// The largest frame a peer may send; bigger payloads travel in chunks.
pub const MAX_FRAME: usize = 8 << 20;

/// The largest hello a peer may send: it is read before the peer has proved anything.
pub const MAX_HELLO: usize = 4 << 10;

/// Chunk size for components and other large payloads.
pub const CHUNK: usize = 1 << 20;

/// The most one `ReadInput` asks for; readers of longer ranges ask again.
pub const MAX_INPUT_READ: u64 = 16 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    Executor,
    Client,
    /// A standalone worker, to its master (the `standalone` module's messages).
    Worker,
    /// A driver registering its application with a standalone master.
    Application,
}

/// The first frame a peer sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol_version: u32,
    pub role: Role,
    pub app_id: String,
    /// HMAC-SHA256 of the TLS session's exported keying material under the application
    /// secret: proves the secret without sending it, bound to this one connection.
    pub proof: [u8; 32],
    /// An executor's requested id (none: the driver assigns one, from the pod name when
    /// there is one).
    pub executor_id: Option<ExecutorId>,
    pub pod_name: Option<String>,
}

/// Why the driver turned a peer away.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum Rejection {
    #[error("executor id {0} is already registered")]
    DuplicateId(ExecutorId),
    #[error("wrong application id: this driver runs {expected}")]
    WrongApp { expected: String },
    #[error("protocol version {peer} is not the driver's {driver}")]
    VersionMismatch { driver: u32, peer: u32 },
    #[error("not authenticated: the application secret does not match")]
    NotAuthenticated,
    #[error("executor {0} is excluded")]
    Excluded(String),
    #[error("the application has stopped")]
    AppStopped,
    #[error("protocol error: {0}")]
    Protocol(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HelloReply {
    Welcome { executor_id: Option<ExecutorId> },
    Rejected(Rejection),
}

/// An executor's resources, as it registers them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    pub host: String,
    pub cores: u32,
    pub memory: u64,
    pub slots: u32,
    pub pid: u32,
    pub attributes: BTreeMap<String, String>,
    pub log_urls: BTreeMap<String, String>,
    /// Where it serves its map outputs to other executors.
    pub shuffle: Option<crate::job::ShuffleEndpoint>,
}

/// What an executor says first to a peer executor whose map outputs it reads, on the
/// connection's first stream: the application's, proved as to the driver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerHello {
    pub protocol_version: u32,
    pub app_id: String,
    /// As [`Hello::proof`]: bound to this connection.
    pub proof: [u8; 32],
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PeerHelloReply {
    Welcome,
    Rejected(Rejection),
}

/// What a peer asks on a stream of its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PeerRequest {
    /// A reducer's slices: answered by [`SliceReply`].
    Slices(SliceRequest),
    /// A whole map output, for an executor adopting it from one that leaves: answered
    /// by [`OutputReply`].
    Output(OutputRequest),
}

/// One map's whole output: its index and its data file.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputRequest {
    pub job: JobId,
    /// The job's shuffle secret.
    pub token: [u8; 32],
    pub map: u32,
}

impl std::fmt::Debug for OutputRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputRequest").field("job", &self.job).field("map", &self.map).finish()
    }
}

/// The answer to an [`OutputRequest`]: the index, then the data file's `size` bytes
/// in [`Chunk`]s; or why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OutputReply {
    Output { index: Vec<u8>, size: u64 },
    Refused(SliceRefusal),
}

/// A reducer's one request to a holder: every slice of `partition` it holds of `maps`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SliceRequest {
    pub job: JobId,
    /// The job's shuffle secret (see `ShuffleSpec::token`).
    pub token: [u8; 32],
    pub partition: u32,
    pub maps: Vec<u32>,
}

impl std::fmt::Debug for SliceRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SliceRequest")
            .field("job", &self.job)
            .field("token", &"<hidden>")
            .field("partition", &self.partition)
            .field("maps", &self.maps.len())
            .finish()
    }
}

/// One slice as it follows a [`SliceReply::Slices`]: `len` bytes in chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SliceHeader {
    pub map: u32,
    pub crc: u32,
    pub len: u64,
}

/// Why a holder would not give slices: typed, so a reducer can tell a refusal from a
/// loss.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum SliceRefusal {
    #[error("the executor was told of no map/reduce job {0}")]
    UnknownJob(JobId),
    #[error("the request's shuffle token is not job {0}'s")]
    BadToken(JobId),
    #[error("maps {maps:?}: {reason}")]
    Unreadable { maps: Vec<u32>, reason: String },
    #[error("the request is malformed: {0}")]
    Malformed(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SliceReply {
    /// The slices follow, each a header frame and its bytes.
    Slices(u32),
    Refused(SliceRefusal),
}

/// What the driver tells a new executor before it registers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppConfig {
    pub app_id: String,
    /// The driver's properties. Keys that configure the executor's own start-up keep
    /// the executor's local value; the executor applies the rest.
    pub properties: Conf,
    pub tokens: Vec<Token>,
    pub resource_profile: ResourceProfile,
    pub log_level: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceProfile {
    pub id: u32,
    pub task_cpus: u32,
}

/// Executor → driver, on the control stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ExecutorMessage {
    FetchConfig {
        resource_profile_id: u32,
    },
    Register(Registration),
    Status(Vec<StatusUpdate>),
    /// The executor was told to stop (SIGTERM): it finishes its tasks and takes no more.
    Decommissioning,
    /// Combined outputs handed over (after the reports of the tasks they combine).
    Partial(crate::Partial),
    /// What it made of an `Adopt`: the outputs it copied and holds now.
    Adopted(crate::Adopted),
}

/// Driver → executor, on the control stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum DriverMessage {
    AppConfig(AppConfig),
    Registered {
        executor_id: ExecutorId,
    },
    Rejected(Rejection),
    /// What the tasks of a job share, sent once before its first launch.
    Job(JobDescriptor),
    Launch(Vec<Launch>),
    Kill(Attempt),
    Tokens(Vec<Token>),
    Decommission,
    /// The job ended: kill its attempts still here, drop its descriptor and blocks.
    JobEnded(JobId),
    /// Hand over the partial results held for the job.
    Collect(JobId),
    /// Copy these map outputs from a leaving executor and hold them.
    Adopt(crate::Adoption),
    /// A drained executor may go now.
    Leave,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Launch {
    pub attempt: Attempt,
    pub partition: PartitionSpec,
}

/// Executor → driver, on the heartbeat stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub running: u32,
    pub tasks_done: u64,
    pub rss_bytes: u64,
    /// The most memory any one instance of the executor has held.
    pub instance_memory_high_water: u64,
    /// Components found loaded, and not, when a task needed one.
    pub component_cache_hits: u64,
    pub component_cache_misses: u64,
    /// Instances made to run tasks in (a task reusing its job's made none).
    pub instances_started: u64,
    /// How far its running attempts are through their input, where the host knows it
    /// (at most one entry per attempt it holds; speculation reads them).
    pub progress: Vec<Progress>,
}

/// How much of its input a running attempt has read: `read` of `of` bytes, as the host
/// measured them handing batches to the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    pub attempt: Attempt,
    pub read: u64,
    pub of: u64,
}

impl Progress {
    /// The share of its input read, in [0, 1]; `None` for an input of no known size.
    pub fn fraction(&self) -> Option<f64> {
        (self.of > 0).then(|| self.read.min(self.of) as f64 / self.of as f64)
    }
}

/// A job as a client submits it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Submission {
    pub manifest: Manifest,
    /// The component arrives in [`CHUNK`]-sized frames after this one.
    pub component_size: u64,
    pub config: Conf,
    pub inputs: Vec<SubmitInput>,
    pub partitions: Option<u32>,
    /// For a run of a recurring job, its period.
    pub every: Option<std::time::Duration>,
}

/// An input as a client names it: a URL the driver plans, or a file of the client's
/// own whose bytes follow the component (in the order listed), for the driver to keep
/// while the job runs and serve to executors as a `flint://` input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SubmitInput {
    Url(String),
    Upload { name: String, size: u64 },
}

/// A request on a stream of its own. Executors and clients send them to the driver; the
/// driver sends `FetchBlock` to an executor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Request {
    FetchComponent(Digest),
    Submit(Box<Submission>),
    Status,
    /// Client → driver: stop a job, running or waiting. Answered by [`CancelReply`].
    Cancel(JobId),
    /// Send a block's bytes; with `release`, drop it once sent (a task output is fetched
    /// once, by the driver).
    FetchBlock {
        id: BlockId,
        release: bool,
    },
    /// Executor → driver: `len` bytes of a `flint://` input from `start`, under a token
    /// of the job that reads it. Answered by [`InputReply`].
    ReadInput {
        token: DataToken,
        path: String,
        start: u64,
        len: u64,
    },
}

/// A job's data token on the wire; its `Debug` hides it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataToken(pub String);

impl std::fmt::Debug for DataToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DataToken(<hidden>)")
    }
}

/// The answer to `ReadInput`: the bytes (`size` of them, in [`Chunk`]s, fewer than asked
/// only at the input's end), or why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum InputReply {
    Data { size: u64 },
    Refused(DataRefusal),
}

/// Why the driver's data service refused a read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum DataRefusal {
    #[error("the data token has expired")]
    Expired,
    #[error("the data token was not signed by this driver")]
    Forged,
    #[error("the data token is job {job}'s, which does not read {path}")]
    NotTheJobs { job: JobId, path: String },
    #[error("job {0} has ended; its data token reads nothing")]
    JobEnded(JobId),
    #[error("a read of {asked} bytes is over the {limit}-byte limit")]
    TooLarge { asked: u64, limit: u64 },
    #[error("cannot read {path}: {reason}")]
    Unreadable { path: String, reason: String },
}

/// The answer to `Cancel`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CancelReply {
    /// Its attempts are being killed; its submitter gets a report saying it was cancelled.
    Cancelled,
    /// It has ended already, as it ended.
    Ended,
    /// This driver has no job of that id.
    Unknown,
}

/// The answer to `FetchBlock`: then, when found, the bytes in [`Chunk`]s.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BlockReply {
    Found { size: u64 },
    Missing,
}

/// A piece of a large payload; an empty chunk ends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk(pub Vec<u8>);

/// The driver's answers on a submission's stream: accepted (or rejected), progress as
/// it changes, then the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SubmitReply {
    Accepted {
        job: JobId,
    },
    Rejected(String),
    /// The driver runs and queues all the jobs it may (`flint.driver.maxRunningJobs`,
    /// `flint.driver.maxWaitingJobs`): the job is fine, try again later.
    Busy(String),
    Progress(JobProgress),
    /// The job's result: `size` bytes follow in [`Chunk`]s, then `Done` (whose outcome
    /// then holds no bytes of its own).
    Result {
        size: u64,
    },
    Done(Box<JobReport>),
    /// What the submitter should know while its job waits: why the executors it needs
    /// are not there yet (sent when that changes).
    Notice(String),
}
