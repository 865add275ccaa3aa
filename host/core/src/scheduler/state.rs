//! The scheduler's state and what goes in and out of it: its [`Input`]s, its
//! [`Output`]s and [`Decided`]s, its [`Policy`]. Its behaviour is its parent's (and, for
//! copies of stragglers, `speculation`'s).

use super::job::{Job, StagePlan};
use super::room::{Executor, Ix, Room};
pub use flint_proto::{Attempt, ExecutorId, JobId};
use flint_proto::{JobError, TaskFailure};
use foldhash::HashMap;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    ExecutorAdded {
        id: ExecutorId,
        slots: u32,
    },
    /// The executor is gone; its running tasks go back to the queue without counting
    /// as failures.
    ExecutorLost {
        id: ExecutorId,
        reason: String,
    },
    /// The executor finishes what it runs and takes nothing new.
    ExecutorDecommissioning {
        id: ExecutorId,
    },
    /// An executor's heartbeat said how far its attempts are through inputs of known
    /// size (what speculation orders its candidates by).
    Progress {
        id: ExecutorId,
        progress: Vec<flint_proto::wire::Progress>,
    },
    JobSubmitted {
        job: JobId,
        tasks: u32,
        max_failures: u32,
        /// Its slow tasks may get copies, when the policy speculates.
        speculate: bool,
        /// Its tasks read their input across the network: see [`AHEAD_TASK`].
        remote_input: bool,
    },
    /// A job of several stages, its tasks numbered stage after stage: a stage's tasks
    /// wait until every task of its parents is done, and wait again while one of those
    /// is run again (its output lost).
    StagedJobSubmitted {
        job: JobId,
        stages: Vec<StagePlan>,
        max_failures: u32,
        speculate: bool,
        remote_input: bool,
    },
    /// Done tasks whose outputs are gone (map outputs on a lost executor, or that a
    /// reducer could not read): they run again, without counting as failures, and the
    /// stages that read them wait for them.
    OutputsLost {
        job: JobId,
        tasks: Vec<u32>,
    },
    TaskSucceeded {
        attempt: Attempt,
        executor: ExecutorId,
        /// How long the attempt ran: short tasks are pipelined.
        elapsed: Duration,
    },
    TaskFailed {
        attempt: Attempt,
        executor: ExecutorId,
        failure: TaskFailure,
    },
    /// The attempt succeeded and its output was combined into a running value its
    /// executor holds (a job with a commutative merge): the task is done, but its output
    /// reaches the driver only with the executor's next partial result, and runs again
    /// if the executor goes first.
    TaskCombined {
        attempt: Attempt,
        executor: ExecutorId,
        elapsed: Duration,
    },
    /// A partial result from the executor, combining the outputs of `tasks`. Accepted
    /// only if the executor holds every one of them; otherwise it is not folded and
    /// those it does hold run again.
    Partial {
        executor: ExecutorId,
        job: JobId,
        tasks: Vec<u32>,
    },
    /// The executor lost the combined outputs of `tasks` (its combining instance
    /// failed): they run again, without counting as failures.
    CombinedLost {
        executor: ExecutorId,
        job: JobId,
        tasks: Vec<u32>,
    },
    CancelJob {
        job: JobId,
        reason: String,
    },
    /// A task of the job gave an output too large for its report (a block the driver
    /// fetches): the job's tasks go one a slot from now on, however short, so that an
    /// executor holds no more unfetched outputs than it has slots.
    LargeOutputs {
        job: JobId,
    },
    /// The job cannot go on, for `error`.
    FailJob {
        job: JobId,
        error: JobError,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Run these attempts on the executor.
    Launch {
        executor: ExecutorId,
        attempts: Vec<Attempt>,
    },
    Kill {
        executor: ExecutorId,
        attempt: Attempt,
    },
    JobSucceeded {
        job: JobId,
    },
    JobFailed {
        job: JobId,
        reason: JobError,
    },
    /// Every task of the job is done and some outputs are held combined on this
    /// executor: ask it for its partial results.
    Collect {
        executor: ExecutorId,
        job: JobId,
    },
    /// What the control core passes on as it is.
    Decided(Decided),
}

/// What the scheduler decided that needs nothing added on its way to the driver: the
/// control core's [`crate::Action::Decided`] carries it unchanged.
#[derive(Debug, Clone, PartialEq)]
pub enum Decided {
    /// The attempt's success was accepted: its output is the task's output. Reports of
    /// attempts already replaced are dropped without this.
    TaskDone { attempt: Attempt },
    /// The executor failed too many distinct tasks and gets no new ones.
    ExecutorExcluded { executor: ExecutorId, failed_tasks: u32 },
    /// A failed attempt will be tried again.
    Retrying { attempt: Attempt, failure: TaskFailure },
    /// The partial result just fed was accepted: fold it (it holds `tasks` outputs).
    PartialAccepted { job: JobId, tasks: u32 },
    /// A done task's output was lost before it reached the driver: it runs again.
    TaskLost { job: JobId, index: u32 },
    /// A copy of a straggling attempt was started (its launch follows).
    Speculated {
        attempt: Attempt,
        original: Attempt,
        straggler: ExecutorId,
        executor: ExecutorId,
        why: Straggling,
    },
    /// Of a task's two attempts, `winner` succeeded first; `loser` is killed.
    SpeculationEnded { winner: Attempt, loser: Attempt, loser_executor: ExecutorId },
}

/// Tasks of a job whose mean run time is below this are pipelined.
pub const SHORT_TASK: Duration = Duration::from_millis(50);

/// Tasks of a job whose mean run time is below this are pipelined [`TINY_DEPTH`] times
/// deeper: a round trip to the driver takes longer than several of them, and slots
/// would wait for work otherwise (no-op tasks: slots idle most of the time at 8 deep).
pub const TINY_TASK: Duration = Duration::from_millis(1);

/// How much deeper than [`Policy::pipeline`] tiny tasks are queued.
pub const TINY_DEPTH: u32 = 8;

/// Tasks that read their input across the network (the driver's data service, an
/// object store) and whose mean run time is below this are sent one ahead: two per
/// slot, so that an executor begins the next task's first read while the one before
/// computes (a first byte from S3 takes tens of milliseconds, one per task otherwise).
/// Longer tasks gain too little from it to queue one behind another.
pub const AHEAD_TASK: Duration = Duration::from_secs(1);

/// Scheduling policy.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Exclude an executor once this many distinct tasks failed on it
    /// (`flint.excludeOnFailure.*`); `None` never excludes. The last usable executor
    /// is never excluded.
    pub exclude_after: Option<u32>,
    /// Attempts an executor may hold per slot for a job whose tasks are short (a mean
    /// under [`SHORT_TASK`]), and [`TINY_DEPTH`] times as many when they are tiny (under
    /// [`TINY_TASK`]); two, one ahead, for a job whose tasks read across the network
    /// and run under [`AHEAD_TASK`]; other jobs get one per slot, as in Spark, so that
    /// long tasks are never queued behind each other while a slot elsewhere is free.
    /// Above 1, an executor has the next short task at hand when one ends instead of
    /// waiting a round trip to the driver; 1 sends nothing ahead.
    pub pipeline: u32,
    /// A task whose running attempts were on this many executors that were lost fails
    /// its job (`flint.task.maxExecutorLosses`): a task that takes its executor down
    /// would otherwise take one after another, since a loss is not a task failure.
    /// `None` never fails a job for it.
    pub max_executor_losses: Option<u32>,
    /// Copies of straggling tasks (`flint.speculation.*`); `None`: never.
    pub speculation: Option<Speculation>,
}

/// The scheduler's state. See the module documentation.
#[derive(Debug, Default)]
pub struct Scheduler {
    pub(super) policy: Policy,
    /// Executors by [`Ix`]; `None` where one left and none took the place yet.
    pub(super) executors: Vec<Option<Executor>>,
    pub(super) vacant: Vec<Ix>,
    pub(super) by_id: HashMap<ExecutorId, Ix>,
    /// Usable executors and their slots, kept by `index`/`unindex`.
    pub(super) usable: u32,
    pub(super) usable_slots: u32,
    /// Usable executors by room at each depth of [`Scheduler::depths`], so that placing
    /// an attempt costs a lookup, not a pass over the fleet. Kept by `reindex` whenever
    /// an executor's room or usability changes.
    pub(super) rooms: [Room; 4],
    /// Attempts placed so far (the clock of `Room::last_used`).
    pub(super) placed: u64,
    pub(super) next_seq: u64,
    pub(super) jobs: BTreeMap<JobId, Job>,
    /// Tasks waiting for a slot, oldest job first; retries go to the front.
    pub(super) queue: super::queue::Queue,
    /// How long an executor asked for its partial results may take before the outputs
    /// it holds are counted lost; `None`: as long as it lives.
    pub(super) collect_timeout: Option<Duration>,
    /// Copies of straggling attempts running now.
    pub(super) copies: u32,
    /// Copies wanted that found no free slot off their stragglers' executors.
    pub(super) copies_wanted: u32,
    /// When running tasks are next looked at for stragglers.
    pub(super) next_speculation: Option<Instant>,
    /// The time of the input being handled.
    pub(super) clock: Option<Instant>,
}

/// When to start copies of slow tasks (`flint.speculation.*`).
#[derive(Debug, Clone, PartialEq)]
pub struct Speculation {
    /// How many times the stage's median run time a task must have run.
    pub multiplier: f64,
    /// The fraction of a stage's tasks done before any of its tasks is copied.
    pub quantile: f64,
    /// A task is never copied before it ran this long.
    pub min_runtime: Duration,
    /// How often running tasks are looked at.
    pub interval: Duration,
}

impl Default for Speculation {
    fn default() -> Speculation {
        Speculation {
            multiplier: 3.0,
            quantile: 0.9,
            min_runtime: Duration::from_millis(100),
            interval: Duration::from_millis(100),
        }
    }
}

/// Why a copy was started: what the page and the event log say.
#[derive(Debug, Clone, PartialEq)]
pub struct Straggling {
    /// How long the original attempt had run.
    pub elapsed: Duration,
    /// The stage's median successful run time then.
    pub median: Duration,
    /// What it had to run longer than (`multiplier` × median, at least `min_runtime`).
    pub threshold: Duration,
    /// How much of its input it had read, by its executor's last heartbeat, where the
    /// input's size is known.
    pub read: Option<f64>,
    /// The run time it has left, estimated from that progress at its rate so far;
    /// `None` without progress to go by.
    pub left: Option<Duration>,
}

impl Straggling {
    /// Candidates with the longest estimated time left go first. Without progress to
    /// go by, a task is taken to be halfway (its time left is the time it has run).
    pub(super) fn priority(&self) -> Duration {
        self.left.unwrap_or(self.elapsed)
    }
}

impl std::fmt::Display for Straggling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ran {} ms, over {} ms ({}× the stage's median of {} ms)",
            self.elapsed.as_millis(),
            self.threshold.as_millis(),
            if self.median.is_zero() {
                "—".to_owned()
            } else {
                format!("{:.1}", self.threshold.as_secs_f64() / self.median.as_secs_f64())
            },
            self.median.as_millis()
        )?;
        if let Some(read) = self.read {
            write!(f, ", {:.0}% of its input read", read * 100.0)?;
            if let Some(left) = self.left.filter(|left| *left < Duration::from_secs(86_400 * 365)) {
                write!(f, ", about {} ms left at its rate", left.as_millis())?;
            }
        }
        Ok(())
    }
}
