//! The executor's task runner: runs launched attempts on the sandboxed runtime, one per
//! slot, in live instances a job's tasks reuse, keeps outputs too large for a report as
//! blocks, combines the tasks of jobs with a commutative merge into one live instance
//! per slot, and kills attempts, queued or running, on request.

mod slots;

use crate::blocks::{BlockStore, NotKept};
use crate::inputs::{InputReader, SplitAt};
use crate::meter::{InputMeter, Metered};
use crate::shuffle::files::ShuffleFiles;
use crate::shuffle::merge::SortedRuns;
use crate::shuffle::read::ShuffleFetch;
use crate::source::DriverSource;
use flint_data::lines::Begun;
use flint_proto::{
    Attempt, BlockId, Digest, ExecutorId, JobDescriptor, JobId, Partial, PartitionSpec, StatusUpdate,
    TaskFailure, TaskLaunch, TaskMetrics, TaskOutput, TaskState, Token,
};
use flint_runtime::{Instance, JobComponent, KillSwitch, Runtime, TaskContext, TaskInput};
use slots::{Queued, SlotQueue, Work};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Once, RwLock, Weak};
use std::time::{Duration, Instant};

/// Outputs up to this size ride in the status report; larger ones stay on the executor
/// as blocks the driver fetches when it is ready for them.
pub const INLINE_OUTPUT: usize = 64 << 10;

/// How long a combined value handed over waits for room in the block store before it
/// is given up as lost (its tasks run again).
const PARTIAL_ROOM_WAIT: Duration = Duration::from_secs(60);

/// Runs tasks on one runtime. Shared by the executor's slots.
pub struct ExecutorCore {
    id: ExecutorId,
    runtime: Arc<Runtime>,
    source: Arc<dyn DriverSource>,
    inputs: InputReader,
    /// Attempts launched here and not yet reported, queued or running, with their kill
    /// switches (a kill finds an attempt still waiting for a slot too) and the meters
    /// their input is counted on.
    running: Mutex<HashMap<Attempt, (KillSwitch, Arc<InputMeter>)>>,
    blocks: BlockStore,
    /// Outputs up to this size ride in the report; larger ones become blocks.
    inline_limit: usize,
    tokens: RwLock<Arc<Vec<Token>>>,
    /// Held while a component is fetched and compiled, so that slots meeting a new
    /// digest together fetch it once.
    loading: Mutex<()>,
    /// Launched attempts waiting for a slot thread, first in, first out.
    queue: Arc<SlotQueue>,
    /// Starts the slot threads on the first launch.
    started: Once,
    /// Live instances, at most one per slot.
    instances: Mutex<Instances>,
    /// Where partial results go, after the reports of the tasks they combine.
    partials: Mutex<Option<PartialSink>>,
    /// Where map outputs are written; none, and map/reduce tasks fail naming why.
    pub(crate) shuffle: Option<ShuffleFiles>,
    /// Fetches map outputs other executors hold, and the bytes a reduce task may ask
    /// for at once (`flint.reducer.maxSizeInFlight`).
    pub(crate) fetcher: RwLock<Option<(Arc<dyn ShuffleFetch>, u64)>>,
    /// The shuffle secret of each map/reduce job this executor was given a task of:
    /// it serves a job's map outputs only to a peer that shows it.
    pub(crate) shuffle_tokens: Mutex<HashMap<JobId, [u8; 32]>>,
    /// The configuration keys each job's calls here asked for, told to the driver with
    /// the job's reports; dropped when the job ends.
    asked: Mutex<HashMap<JobId, Arc<flint_runtime::ConfAsked>>>,
}

/// What hands partial results to the driver.
pub type PartialSink = Box<dyn Fn(Partial) + Send + Sync>;

/// The live instances of an executor, kept between tasks: a job's plain tasks run one
/// after another in one (up to its `instance_reuse`), a combining job's tasks add into
/// one. A slot takes its job's idle one (or makes one) for each task and puts it back
/// before reporting the task; so when the driver collects a job, every instance of it
/// is here. Idle ones count against the slots like running tasks: idle and taken
/// together never pass the slot count (at the bound an idle one holding nothing is
/// dropped first, else the longest idle hands its value over), so the instances alive
/// stay within the task memory pool.
#[derive(Default)]
struct Instances {
    idle: VecDeque<Held>,
    /// Taken out by a slot now.
    in_use: usize,
    /// Partial results handed over so far (numbers their blocks).
    handed: u64,
}

/// A live instance of a job and, for a combining job, the tasks whose outputs it holds.
pub(crate) struct Held {
    job: Arc<JobDescriptor>,
    pub(crate) instance: Instance,
    tasks: Vec<u32>,
}

/// A combining instance grown past this share of its memory cap hands its value over
/// at once, so that adding the next partition cannot fail for the room the running
/// value takes.
const FULL: u64 = 2;

impl Held {
    fn full(&self) -> bool {
        self.instance.memory() > self.instance.memory_limit() / FULL
    }
}

/// An instance a slot has taken out: counted against the slots until it is put back or
/// dropped, on every path out of the task, a host panic included.
pub(crate) struct Taken<'a> {
    instances: &'a Mutex<Instances>,
    held: Option<Held>,
    /// Still counted in `in_use`.
    counted: bool,
}

impl Taken<'_> {
    pub(crate) fn held(&mut self) -> &mut Held {
        self.held.as_mut().expect("an instance is held until it is put back or given up")
    }

    /// The instance itself, to hand its value over; it still counts until `self` goes.
    fn give_up(&mut self) -> Held {
        self.held.take().expect("an instance is held until it is put back or given up")
    }

    /// Puts the instance back for the job's next task, unless the attempt was killed:
    /// checked under the lock [`ExecutorCore::job_ended`] drops the job's idle
    /// instances under, after killing its attempts, so an instance never outlives its
    /// job. A killed one comes back, still counted.
    pub(crate) fn put_back(mut self, kill: &KillSwitch) -> Result<(), Self> {
        let instances = self.instances;
        let mut instances = instances.lock().expect("instances lock");
        if kill.is_killed() {
            drop(instances);
            return Err(self);
        }
        instances.idle.push_back(self.give_up());
        instances.in_use -= 1;
        self.counted = false;
        Ok(())
    }
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        // The instance goes first, so its memory is free before the slot counts free.
        drop(self.held.take());
        if self.counted {
            self.instances.lock().expect("instances lock").in_use -= 1;
        }
    }
}

impl Drop for ExecutorCore {
    fn drop(&mut self) {
        self.queue.close();
    }
}

impl ExecutorCore {
    /// An executor whose outputs over `inline_limit` bytes are kept as blocks, at most
    /// `block_limit` bytes of them at once.
    pub fn new(
        id: ExecutorId,
        runtime: Arc<Runtime>,
        source: Arc<dyn DriverSource>,
        inputs: InputReader,
        (inline_limit, block_limit): (usize, u64),
    ) -> Self {
        ExecutorCore {
            id,
            source,
            inputs,
            running: Mutex::new(HashMap::new()),
            blocks: BlockStore::new(block_limit),
            inline_limit,
            tokens: RwLock::new(Arc::new(Vec::new())),
            loading: Mutex::new(()),
            queue: Arc::new(SlotQueue::default()),
            started: Once::new(),
            instances: Mutex::new(Instances::default()),
            partials: Mutex::new(None),
            shuffle: None,
            fetcher: RwLock::new(None),
            shuffle_tokens: Mutex::new(HashMap::new()),
            asked: Mutex::new(HashMap::new()),
            runtime,
        }
    }

    /// Map outputs are written under these folders.
    pub fn with_shuffle(mut self, files: ShuffleFiles) -> Self {
        self.shuffle = Some(files);
        self
    }

    /// How reduce tasks read map outputs other executors hold.
    pub fn set_shuffle_fetch(&self, fetch: Arc<dyn ShuffleFetch>, max_in_flight: u64) {
        *self.fetcher.write().expect("fetcher lock") = Some((fetch, max_in_flight));
    }

    /// The shuffle secret of a map/reduce job this executor runs tasks of or holds
    /// outputs of: it serves the job's outputs behind it, and deletes them when told
    /// the job ended.
    pub(crate) fn know_shuffle(&self, job: JobId, token: [u8; 32]) {
        self.shuffle_tokens.lock().expect("tokens lock").entry(job).or_insert(token);
    }

    /// Whether map outputs of a running job are here, for its reducers to read.
    pub fn holds_map_outputs(&self) -> bool {
        self.shuffle.as_ref().is_some_and(ShuffleFiles::holds_outputs)
    }

    /// The folders this executor writes shuffle files under.
    pub fn shuffle_files(&self) -> Option<&ShuffleFiles> {
        self.shuffle.as_ref()
    }

    /// Where partial results of combined tasks go from now on. Without one they are
    /// dropped and the driver, after its collect timeout, runs those tasks again.
    pub fn set_partial_sink(&self, sink: PartialSink) {
        *self.partials.lock().expect("partials lock") = Some(sink);
    }

    fn hand_over(&self, partial: Partial) {
        if let Some(sink) = self.partials.lock().expect("partials lock").as_ref() {
            sink(partial);
        }
    }

    /// Hands over every partial result held for `job` (on a slot thread: it runs
    /// guest code). Queued only while an idle instance of the job is here and no
    /// collect of it waits already, so however many a driver sends, the slot queue
    /// holds at most one per idle instance (at most one per slot).
    pub fn collect(self: &Arc<Self>, job: JobId) {
        if !self.instances.lock().expect("instances lock").idle.iter().any(|held| held.job.job == job) {
            return;
        }
        self.started.call_once(|| self.start_slots());
        self.queue.push_collect(job);
    }

    /// One thread per slot, each pulling attempts from the queue. They hold the core
    /// weakly: dropping the core closes the queue and they end.
    fn start_slots(self: &Arc<Self>) {
        for slot in 0..self.runtime.slots() {
            let (queue, core) = (self.queue.clone(), Arc::downgrade(self));
            std::thread::Builder::new()
                .name(format!("flint-slot-{slot}"))
                .spawn(move || slot_loop(&queue, &core))
                .expect("spawn a slot thread");
        }
    }

    /// Queues an attempt for the next free slot, which runs it and hands its report to
    /// `report`.
    pub fn launch(self: &Arc<Self>, launch: TaskLaunch, report: impl FnOnce(StatusUpdate) + Send + 'static) {
        self.started.call_once(|| self.start_slots());
        let kill = KillSwitch::default();
        let meter = Arc::new(InputMeter::default());
        self.running.lock().expect("running lock").insert(launch.attempt, (kill.clone(), meter.clone()));
        let remote = reads_ahead(&launch);
        self.queue.push(Work::Attempt(Queued { launch, kill, meter, report: Box::new(report), first: None }));
        if remote {
            self.begin_first_reads();
        }
    }

    /// Begins the first reads of the attempts next in line for a slot, where their
    /// splits cross the network: a queued attempt starts on bytes already here.
    fn begin_first_reads(&self) {
        let mut tokens = None;
        self.queue.begin_ahead(self.runtime.slots() as usize, |launch| {
            let PartitionSpec::Split { source, start, end, size } = &launch.partition else { return None };
            if !source.reads_ahead() {
                return None;
            }
            // The read's own bound; the task's deadline runs from its start. Called off
            // the slot threads, it must not panic on a deadline past the clock's range.
            let deadline = Instant::now().checked_add(launch.job.deadline)?;
            let at = SplitAt { job: &launch.job, source, start: *start, end: *end, size: *size, deadline };
            let tokens = tokens.get_or_insert_with(|| self.tokens());
            self.inputs.begin_first_read(&self.source, tokens, at)
        });
    }

    /// Where this executor reads inputs from and may write part files.
    pub(crate) fn inputs(&self) -> &InputReader {
        &self.inputs
    }

    pub fn id(&self) -> &ExecutorId {
        &self.id
    }

    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Replaces the delegation tokens tasks may read.
    pub fn set_tokens(&self, tokens: Vec<Token>) {
        *self.tokens.write().expect("tokens lock") = Arc::new(tokens);
    }

    /// Every token the driver pushed, for the host's own reads and writes (a task sees
    /// only those its job names).
    pub(crate) fn tokens(&self) -> Arc<Vec<Token>> {
        self.tokens.read().expect("tokens lock").clone()
    }

    /// Live instances kept for their jobs' next tasks.
    pub fn idle_instances(&self) -> usize {
        self.instances.lock().expect("instances lock").idle.len()
    }

    /// Attempts running now.
    pub fn running(&self) -> usize {
        self.running.lock().expect("running lock").len()
    }

    /// How far this executor's attempts are through inputs of known size.
    pub fn progress(&self) -> Vec<flint_proto::wire::Progress> {
        let running = self.running.lock().expect("running lock");
        running.iter().filter_map(|(attempt, (_, meter))| meter.progress(*attempt)).collect()
    }

    /// Stops an attempt: a running one within one epoch tick, a queued one before it
    /// starts. Unknown attempts are ignored.
    pub fn kill(&self, attempt: &Attempt) {
        if let Some((switch, _)) = self.running.lock().expect("running lock").get(attempt) {
            switch.kill();
        }
    }

    /// Kills every attempt here, queued or running (the executor is going away).
    pub fn kill_all(&self) {
        for (switch, _) in self.running.lock().expect("running lock").values() {
            switch.kill();
        }
    }

    /// A job ended: its attempts still here are killed, its idle instances and blocks
    /// dropped. (A slot finishing one of its tasks now sees the kill and drops its
    /// instance: see `Taken::put_back`.)
    pub fn job_ended(&self, job: JobId) {
        for (attempt, (switch, _)) in self.running.lock().expect("running lock").iter() {
            if attempt.job == job {
                switch.kill();
            }
        }
        let ended: VecDeque<Held> = {
            let mut instances = self.instances.lock().expect("instances lock");
            let (ended, others) =
                std::mem::take(&mut instances.idle).into_iter().partition(|h| h.job.job == job);
            instances.idle = others;
            ended
        };
        drop(ended);
        self.asked.lock().expect("asked lock").remove(&job);
        self.blocks.drop_job(job);
        if self.shuffle_tokens.lock().expect("tokens lock").remove(&job).is_some()
            && let Some(files) = &self.shuffle
        {
            files.drop_job(job);
        }
    }

    /// The blocks this executor holds.
    pub fn blocks(&self) -> &BlockStore {
        &self.blocks
    }

    /// Runs one attempt to its end on the calling thread (a blocking call), with the
    /// partial results to hand over after its report. An attempt killed before it
    /// started does not start.
    fn run_attempt(
        &self,
        launch: &TaskLaunch,
        kill: KillSwitch,
        meter: Arc<InputMeter>,
        first: Option<Begun>,
    ) -> (StatusUpdate, Vec<Partial>) {
        let started = Instant::now();
        let mut partials = Vec::new();
        let mut gathering = Duration::ZERO;
        let (state, log) = if kill.is_killed() {
            let failure = TaskFailure::Killed { reason: "killed before it started".into() };
            (TaskState::Failed(failure), String::new())
        } else {
            match self.prepare(launch, &meter, first) {
                Ok((component, input, spent)) => {
                    gathering = spent;
                    let mut ctx = self.context(launch, kill);
                    // Gathering a reduce task's input counted against the deadline (as
                    // reading a split does, inside the call); compiling the component,
                    // once per executor, does not.
                    ctx.spent = spent;
                    let combine = launch.job.combine && component.combines();
                    let map = launch.job.shuffle.as_ref().filter(|s| s.is_map(launch.attempt.index));
                    match (self.take_instance(&launch.job, component, &ctx, &mut partials), input) {
                        (Ok(taken), input) if launch.job.program.is_some() => {
                            let read = match input {
                                Prepared::Input(input) => StageRead::Source(input),
                                Prepared::Reduce { partition, runs } => StageRead::Shuffled {
                                    partition,
                                    runs: Box::new(Metered::new(runs, meter.clone())),
                                },
                            };
                            self.run_stage(launch, taken, &ctx, read)
                        }
                        (Ok(taken), Prepared::Reduce { partition, runs }) => {
                            self.run_reduce(launch, taken, &ctx, partition, Metered::new(runs, meter.clone()))
                        }
                        (Ok(taken), Prepared::Input(input)) if map.is_some() => {
                            self.run_map(launch, taken, &ctx, input)
                        }
                        (Ok(taken), Prepared::Input(input)) if combine => {
                            self.combine(launch, taken, &ctx, input, &mut partials)
                        }
                        (Ok(taken), Prepared::Input(input)) => self.run_task(launch, taken, &ctx, input),
                        (Err(failure), _) => (TaskState::Failed(failure), String::new()),
                    }
                }
                Err(failure) => (TaskState::Failed(failure), String::new()),
            }
        };
        let shuffle_write_bytes = match &state {
            TaskState::Succeeded(TaskOutput::Map(status)) => status.sizes.iter().sum(),
            _ => 0,
        };
        let update = StatusUpdate {
            executor: self.id.clone(),
            attempt: launch.attempt,
            state,
            log,
            elapsed: started.elapsed(),
            metrics: TaskMetrics { shuffle_write_bytes, ..meter.metrics(gathering) },
            asked: self.asked_since(launch.attempt.job),
        }
        .bounded();
        if let TaskState::Failed(failure) = &update.state {
            tracing::warn!(attempt = %launch.attempt, kind = failure.kind(), %failure, "task failed");
        }
        (update, partials)
    }

    /// Runs the attempt's partition in the instance taken for it, and keeps the
    /// instance for the job's next task when it may run one: after a success, below
    /// the job's reuse count, and no larger than the memory an idle slot keeps resident
    /// anyway (a task that grew it further gives that memory back, as a fresh instance
    /// per task would).
    fn run_task(
        &self,
        launch: &TaskLaunch,
        mut taken: Taken<'_>,
        ctx: &TaskContext,
        input: TaskInput,
    ) -> (TaskState, String) {
        let outcome = taken.held().instance.run(ctx, input);
        self.task_ended(launch, taken, ctx, outcome)
    }

    /// A task whose output comes back (a plain task's, a reduce task's): the output
    /// kept, the instance kept for the next task when it may be.
    pub(crate) fn task_ended(
        &self,
        launch: &TaskLaunch,
        taken: Taken<'_>,
        ctx: &TaskContext,
        outcome: flint_runtime::Outcome,
    ) -> (TaskState, String) {
        let state = match outcome.result {
            Ok(bytes) => self.keep_output(launch, ctx, bytes),
            Err(failure) => TaskState::Failed(failure),
        };
        self.keep_instance(launch, taken, ctx, &state);
        (state, outcome.log)
    }

    /// Puts a plain task's instance back for the job's next task when it may run one:
    /// after a success, below the job's reuse count, and no larger than the memory an
    /// idle slot keeps resident anyway; else it goes.
    pub(crate) fn keep_instance(
        &self,
        launch: &TaskLaunch,
        mut taken: Taken<'_>,
        ctx: &TaskContext,
        state: &TaskState,
    ) {
        let held = taken.held();
        let reusable = matches!(state, TaskState::Succeeded(_))
            && held.instance.calls() < launch.job.instance_reuse
            && held.instance.memory() <= self.runtime.resident_per_slot();
        if reusable {
            // A killed attempt's instance comes back and goes with `taken`.
            let _ = taken.put_back(&ctx.kill);
        }
    }

    /// A successful task's output: in the report when small, else kept as a block
    /// (waiting for room counts against the task's deadline).
    pub(crate) fn keep_output(&self, launch: &TaskLaunch, ctx: &TaskContext, bytes: Vec<u8>) -> TaskState {
        if bytes.len() <= self.inline_limit {
            return TaskState::Succeeded(TaskOutput::Inline(bytes));
        }
        let until = Instant::now() + launch.job.deadline.saturating_sub(ctx.spent);
        match self.blocks.put(BlockId::Output(launch.attempt), bytes, until, || ctx.kill.is_killed()) {
            Ok(block) => TaskState::Succeeded(TaskOutput::Block(block)),
            Err(NotKept::GaveUp) => TaskState::Failed(TaskFailure::Killed {
                reason: "killed while its output waited for room in the block store".into(),
            }),
            Err(NotKept::NoRoom { limit }) => TaskState::Failed(TaskFailure::Host {
                message: format!(
                    "its output waited its whole deadline for room in the executor's block store ({limit} bytes): the driver is not fetching outputs"
                ),
            }),
        }
    }

    /// Adds the attempt's partition to its job's combining instance on this slot. A
    /// failed add loses what the instance held: those tasks are handed over as lost
    /// (they run again) and the attempt fails as any task would.
    fn combine(
        &self,
        launch: &TaskLaunch,
        mut taken: Taken<'_>,
        ctx: &TaskContext,
        input: TaskInput,
        partials: &mut Vec<Partial>,
    ) -> (TaskState, String) {
        let mut outcome = taken.held().instance.add(ctx, input);
        // Killed just as the add ended (its job ended, or the driver took the attempt
        // back): the instance is not put back, so it can neither outlive its job nor
        // hold an attempt the driver no longer counts; what it held runs again.
        if outcome.result.is_ok() && ctx.kill.is_killed() {
            outcome.result = Err(TaskFailure::Killed { reason: "killed as its output was combined".into() });
        }
        let failure = match outcome.result {
            Ok(_) => {
                let held = taken.held();
                held.tasks.push(launch.attempt.index);
                // The list of tasks a partial names stays far inside a frame.
                if held.full() || held.tasks.len() >= flint_proto::MAX_PARTIAL_TASKS {
                    partials.push(self.take_value(taken.give_up()));
                    return (TaskState::Succeeded(TaskOutput::Combined), outcome.log);
                }
                match taken.put_back(&ctx.kill) {
                    Ok(()) => return (TaskState::Succeeded(TaskOutput::Combined), outcome.log),
                    Err(mut back) => {
                        back.held().tasks.pop();
                        taken = back;
                        TaskFailure::Killed { reason: "killed as its output was combined".into() }
                    }
                }
            }
            Err(failure) => failure,
        };
        let held = taken.give_up();
        if !held.tasks.is_empty() {
            tracing::warn!(job_id = held.job.job.0, tasks = held.tasks.len(), %failure, "combined outputs lost with their instance");
            partials.push(Partial {
                job: held.job.job,
                tasks: held.tasks,
                output: Err(format!("the combining instance failed in task {}: {failure}", launch.attempt)),
            });
        }
        (TaskState::Failed(failure), outcome.log)
    }

    /// An instance of the job for the attempt: an idle one, or a new one. At most one
    /// per slot: at that bound an idle one of another job goes first.
    fn take_instance(
        &self,
        job: &Arc<JobDescriptor>,
        component: Arc<JobComponent>,
        ctx: &TaskContext,
        partials: &mut Vec<Partial>,
    ) -> Result<Taken<'_>, TaskFailure> {
        let taken = |held| Taken { instances: &self.instances, held, counted: true };
        {
            let mut instances = self.instances.lock().expect("instances lock");
            if let Some(at) = instances.idle.iter().position(|held| held.job.job == job.job) {
                instances.in_use += 1;
                return Ok(taken(instances.idle.remove(at)));
            }
        }
        self.make_room(partials);
        let mut slot = taken(None);
        slot.held = Some(Held {
            job: job.clone(),
            instance: self.runtime.instantiate(component, ctx)?,
            tasks: Vec::new(),
        });
        Ok(slot)
    }

    /// Counts an instance about to be taken, first making room while there would be
    /// more than one per slot: idle ones holding nothing are dropped first, then the
    /// longest idle hands its value over.
    fn make_room(&self, partials: &mut Vec<Partial>) {
        let evicted: Vec<Held> = {
            let mut instances = self.instances.lock().expect("instances lock");
            instances.in_use += 1;
            let mut evicted = Vec::new();
            while instances.idle.len() + instances.in_use > self.runtime.slots() as usize {
                let empty = instances.idle.iter().position(|held| held.tasks.is_empty());
                match instances.idle.remove(empty.unwrap_or(0)) {
                    Some(held) => evicted.push(held),
                    None => break,
                }
            }
            evicted
        };
        for held in evicted {
            if !held.tasks.is_empty() {
                partials.push(self.take_value(held));
            }
        }
    }

    /// The instance's value as a partial result (a block when it is large); the
    /// instance goes with it.
    fn take_value(&self, mut held: Held) -> Partial {
        let job = &held.job;
        let ctx = TaskContext {
            app_id: job.app_id.clone(),
            job_id: job.job.to_string(),
            task_index: held.tasks.first().copied().unwrap_or(0),
            task_count: job.task_count,
            attempt: 0,
            config: job.config.clone(),
            asked: self.asked_of(job.job),
            tokens: Arc::new(Vec::new()),
            memory_limit: job.memory_limit,
            deadline: job.deadline,
            spent: Duration::ZERO,
            deadline_key: "flint.task.deadline",
            // The value of many tasks: bounded by the instance's memory, which it came from.
            max_result_size: self.runtime.instance_memory(),
            kill: KillSwitch::default(),
            seed: None,
        };
        let output = match held.instance.take(&ctx) {
            Ok(bytes) if bytes.len() <= self.inline_limit => Ok(TaskOutput::Inline(bytes)),
            Ok(bytes) => {
                let number = {
                    let mut instances = self.instances.lock().expect("instances lock");
                    instances.handed += 1;
                    instances.handed
                };
                let until = Instant::now() + PARTIAL_ROOM_WAIT;
                self.blocks
                    .put(BlockId::Partial { job: job.job, number }, bytes, until, || false)
                    .map(TaskOutput::Block)
                    .map_err(|_| {
                        format!("no room in the block store within {} s", PARTIAL_ROOM_WAIT.as_secs())
                    })
            }
            Err(failure) => {
                tracing::warn!(job_id = job.job.0, tasks = held.tasks.len(), %failure, "combined outputs lost handing them over");
                Err(format!("handing the combined value over failed: {failure}"))
            }
        };
        Partial { job: job.job, tasks: std::mem::take(&mut held.tasks), output }
    }

    /// Hands over the partial results of the job's idle instances.
    fn collect_now(&self, job: JobId) {
        self.hand_over_where(|held| held.job.job == job);
    }

    /// Hands over every partial result this executor holds (it is leaving), on the
    /// calling thread: it runs guest code.
    pub fn hand_over_all(&self) {
        self.hand_over_where(|_| true);
    }

    /// Hands over the values of the picked idle instances; those holding none are
    /// dropped.
    fn hand_over_where(&self, pick: impl Fn(&Held) -> bool) {
        let held: VecDeque<Held> = {
            let mut instances = self.instances.lock().expect("instances lock");
            let (picked, others) = std::mem::take(&mut instances.idle).into_iter().partition(|h| pick(h));
            instances.idle = others;
            picked
        };
        for held in held.into_iter().filter(|held| !held.tasks.is_empty()) {
            let partial = self.take_value(held);
            self.hand_over(partial);
        }
    }

    /// The component and the input of an attempt (a split opened, a reduce task's slices
    /// gathered), and the time gathering took.
    fn prepare(
        &self,
        launch: &TaskLaunch,
        meter: &Arc<InputMeter>,
        first: Option<Begun>,
    ) -> Result<(Arc<JobComponent>, Prepared, Duration), TaskFailure> {
        let loading = Instant::now();
        let component = self.component(&launch.job.component)?;
        meter.compiled(loading.elapsed());
        let reading = Instant::now();
        let deadline = reading + launch.job.deadline;
        if let Some(spec) = &launch.job.shuffle {
            self.know_shuffle(launch.job.job, spec.token);
        }
        let input = match &launch.partition {
            // An executor keeps one shuffle a job (the map/reduce world's); its
            // fetch failures name that one.
            PartitionSpec::Reduce { shuffle: 1.., .. } => {
                return Err(TaskFailure::Host { message: "a task reading a later stage's shuffle".into() });
            }
            PartitionSpec::Reduce { partition, sources, inline, .. } => {
                let runs = self.reduce_input(launch, *partition, (sources, inline), deadline)?;
                return Ok((component, Prepared::Reduce { partition: *partition, runs }, reading.elapsed()));
            }
            PartitionSpec::Shuffles { partition, reads } => {
                let runs = self.shuffled_input(launch, *partition, reads, deadline)?;
                return Ok((component, Prepared::Reduce { partition: *partition, runs }, reading.elapsed()));
            }
            PartitionSpec::Index(i) => TaskInput::Index(*i),
            PartitionSpec::Value(v) => TaskInput::Value(v.clone()),
            PartitionSpec::Split { source, start, end, size } => {
                // Opened here, read as the task asks: a split of any size streams
                // through the task a batch at a time.
                let tokens = self.tokens();
                let at =
                    SplitAt { job: &launch.job, source, start: *start, end: *end, size: *size, deadline };
                let source_name = source.to_string();
                let lines = self.inputs.open_split(&self.source, &tokens, at, first).map_err(|error| {
                    TaskFailure::Input { retryable: error.retryable(), message: error.to_string() }
                })?;
                meter.expect(end.saturating_sub(*start));
                let source = Box::new(Metered::new(lines, meter.clone()));
                TaskInput::Lines { path: source_name, start: *start, end: *end, source }
            }
        };
        Ok((component, Prepared::Input(input), reading.elapsed()))
    }

    fn component(&self, digest: &Digest) -> Result<Arc<JobComponent>, TaskFailure> {
        let stats = self.runtime.stats();
        if let Some(found) = self.runtime.cached(digest) {
            stats.cache_hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Ok(found);
        }
        stats.cache_misses.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let _one_at_a_time = self.loading.lock().expect("loading lock");
        if let Some(found) = self.runtime.load_known(digest) {
            return Ok(found);
        }
        let bytes = self
            .source
            .fetch(digest)
            .map_err(|e| TaskFailure::Host { message: format!("cannot fetch component {digest}: {e}") })?;
        if Digest::of(&bytes) != *digest {
            return Err(TaskFailure::Host {
                message: format!("component fetched for {digest} has another digest"),
            });
        }
        self.runtime.load(&bytes).map_err(|e| TaskFailure::Host { message: e.to_string() })
    }

    /// The keys a job's calls here asked for since its last report; none once the job
    /// ended (its attempts killed then report after its record is gone, and must not
    /// make it again: nothing would drop it).
    fn asked_since(&self, job: JobId) -> Vec<String> {
        self.asked.lock().expect("asked lock").get(&job).map(|a| a.take()).unwrap_or_default()
    }

    /// Where a job's calls here note the keys they ask for.
    fn asked_of(&self, job: JobId) -> Arc<flint_runtime::ConfAsked> {
        self.asked.lock().expect("asked lock").entry(job).or_default().clone()
    }

    fn context(&self, launch: &TaskLaunch, kill: KillSwitch) -> TaskContext {
        let job: &JobDescriptor = &launch.job;
        let tokens = self.tokens.read().expect("tokens lock");
        // A job's data tokens are the host's: no task sees one.
        let tokens: Vec<Token> = tokens
            .iter()
            .filter(|t| t.job.is_none() && job.token_services.contains(&t.service))
            .cloned()
            .collect();
        TaskContext {
            app_id: job.app_id.clone(),
            job_id: job.job.to_string(),
            task_index: launch.attempt.index,
            task_count: job.task_count,
            attempt: launch.attempt.number,
            config: job.config.clone(),
            asked: self.asked_of(job.job),
            tokens: Arc::new(tokens),
            memory_limit: job.memory_limit,
            deadline: job.deadline,
            spent: Duration::ZERO,
            deadline_key: "flint.task.deadline",
            max_result_size: job.max_result_size,
            kill,
            // A map task draws the same numbers in every run: its output must not change.
            seed: job.shuffle.as_ref().filter(|s| s.is_map(launch.attempt.index)).map(|s| s.map_seed()),
        }
    }
}

/// Whether `launch` reads a split across the network, its reads begun ahead.
fn reads_ahead(launch: &TaskLaunch) -> bool {
    matches!(&launch.partition, PartitionSpec::Split { source, .. } if source.reads_ahead())
}

/// What an attempt runs on, once read.
enum Prepared {
    Input(TaskInput),
    /// A reduce task's partition and its records, merged from every map's slice.
    Reduce {
        partition: u32,
        runs: SortedRuns,
    },
}

/// What a program's task reads, prepared.
pub(crate) enum StageRead {
    Source(TaskInput),
    Shuffled { partition: u32, runs: Box<dyn flint_runtime::RecordSource> },
}

/// A slot thread's life: run queued attempts one after another until the core is gone.
fn slot_loop(queue: &SlotQueue, core: &Weak<ExecutorCore>) {
    while let Some(work) = queue.pop() {
        let Some(core) = core.upgrade() else { return };
        let Queued { launch, kill, meter, report, first } = match work {
            Work::Attempt(queued) => queued,
            Work::Collect(job) => {
                let span = tracing::debug_span!("collect", job_id = job.0);
                let _entered = span.enter();
                core.collect_now(job);
                continue;
            }
        };
        // The attempt after it is read while it runs.
        if reads_ahead(&launch) {
            core.begin_first_reads();
        }
        let attempt = launch.attempt;
        let span = tracing::debug_span!(
            "task",
            job_id = attempt.job.0,
            task_id = attempt.index,
            attempt = attempt.number
        );
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _entered = span.enter();
            core.run_attempt(&launch, kill, meter, first)
        }));
        // A panic in host code fails the attempt; the executor and its slot go on.
        let (update, partials) = run.unwrap_or_else(|panic| {
            let message = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("a panic");
            let update = StatusUpdate {
                executor: core.id.clone(),
                attempt,
                state: TaskState::Failed(TaskFailure::Host {
                    message: format!("the executor's task runner failed: {message}"),
                }),
                log: String::new(),
                elapsed: std::time::Duration::ZERO,
                metrics: Default::default(),
                asked: Vec::new(),
            };
            (update, Vec::new())
        });
        core.running.lock().expect("running lock").remove(&attempt);
        report(update);
        // After the report: the driver learns a task was combined before it is handed
        // the value that holds it.
        for partial in partials {
            core.hand_over(partial);
        }
    }
}
