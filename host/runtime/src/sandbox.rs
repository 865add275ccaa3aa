//! Running job components in limited stores: a fresh instance per call
//! ([`Runtime::call`]), a live [`Instance`] a job's calls enter one after another, each
//! as its own task ([`Runtime::instantiate`]), or a job's [`Folder`].
//!
//! Every store is made in one place and always carries the memory cap, the deadline,
//! the kill switch and a WASI context with no ambient authority: no environment,
//! arguments, directories or sockets; stdout and stderr go to the task's bounded log;
//! clocks and random are allowed.

use crate::bindings::exports::flint::task::job;
use crate::bindings::flint::task::host::TaskInfo;
use crate::bindings::flint::task::types::{FileSplit, Partition, TaskError};
use crate::capture::TaskLogSink;
use crate::component::JobComponent;
use crate::engine::Runtime;
use crate::host::HostState;
use crate::limits::{KillSwitch, Killed, MemoryCap};
use crate::random::TaskRandom;
use crate::records::{
    Emitter, LineSource, PartSink, PartWriter, RecordSink, RecordSource, Records, SortedInput, SplitReader,
};
use flint_proto::{Conf, TaskFailure, Token};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use wasmtime::component::{Resource, ResourceAny, ResourceTable};
use wasmtime::{Store, Trap, UpdateDeadline, WasmBacktrace};
use wasmtime_wasi::WasiCtxBuilder;

/// Who a call runs as and under which limits.
#[derive(Debug, Clone)]
pub struct TaskContext {
    pub app_id: String,
    pub job_id: String,
    pub task_index: u32,
    pub task_count: u32,
    pub attempt: u32,
    pub config: Arc<Conf>,
    /// Where the keys the call asks of `config` are noted.
    pub asked: Arc<crate::ConfAsked>,
    pub tokens: Arc<Vec<Token>>,
    /// A job's own memory cap; the runtime's instance cap applies when it is larger.
    pub memory_limit: Option<u64>,
    pub deadline: Duration,
    /// Time the task spent before the call (reading its input): it counts against the
    /// deadline.
    pub spent: Duration,
    /// The setting the deadline comes from, named in a `deadline` failure.
    pub deadline_key: &'static str,
    pub max_result_size: u64,
    pub kill: KillSwitch,
    /// A map task's random seed, from its job: `wasi:random` then gives the task (the
    /// seed mixed with its index) the same numbers in every run. `None`: fresh ones.
    pub seed: Option<[u8; 32]>,
}

/// A task's input: a file split's lines come from `source` as the guest reads them.
pub enum TaskInput {
    Index(u32),
    Value(Vec<u8>),
    Lines { path: String, start: u64, end: u64, source: Box<dyn LineSource> },
}

impl std::fmt::Debug for TaskInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaskInput::Index(i) => write!(f, "Index({i})"),
            TaskInput::Value(v) => write!(f, "Value({} bytes)", v.len()),
            TaskInput::Lines { path, start, end, .. } => write!(f, "Lines({path} {start}..{end})"),
        }
    }
}

/// What to call.
#[derive(Debug)]
pub enum Call {
    Run(TaskInput),
}

/// How a call ended, with the task's captured output.
#[derive(Debug)]
pub struct Outcome {
    pub result: Result<Vec<u8>, TaskFailure>,
    pub log: String,
    pub elapsed: Duration,
}

impl Runtime {
    /// Runs `call` in a fresh instance of `component`. Never panics on guest behaviour:
    /// every way a guest can fail comes back as a [`TaskFailure`].
    pub fn call(&self, component: &Arc<JobComponent>, ctx: &TaskContext, call: Call) -> Outcome {
        let started = Instant::now();
        let Call::Run(input) = call;
        let mut outcome = match self.instantiate(component.clone(), ctx) {
            Ok(mut instance) => instance.run(ctx, input),
            Err(failure) => Outcome { result: Err(failure), log: String::new(), elapsed: Duration::ZERO },
        };
        outcome.elapsed = started.elapsed();
        outcome
    }

    /// One instance of an `aggregate` job in which its outputs are folded: they load
    /// into accumulators that stay decoded in the instance between calls. Each call gets
    /// the full deadline; after a failed call the folder answers every call with that
    /// failure (its accumulators went with the instance).
    pub fn folder<'a>(&'a self, component: &'a JobComponent, ctx: TaskContext) -> Folder<'a> {
        Folder { runtime: self, component, ctx, live: None, failed: None }
    }

    /// The one place a store is made: memory cap, deadline, kill switch, sandboxed WASI.
    pub(crate) fn new_store(&self, ctx: &TaskContext) -> (Store<HostState>, TaskLogSink) {
        let log = TaskLogSink::new(self.config.max_log_size);
        let limit =
            ctx.memory_limit.map_or(self.config.instance_memory, |l| l.min(self.config.instance_memory));
        let random = TaskRandom::new();
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(log.clone())
            .stderr(log.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .secure_random(random.clone())
            .insecure_random(random.clone());
        // The seed of guests' hash tables, the same for every instance of a seeded job.
        if let Some(seed) = &ctx.seed {
            wasi.insecure_random_seed(u128::from_le_bytes(seed[16..].try_into().expect("16 bytes")));
        }
        let wasi = wasi.build();
        let info = TaskInfo {
            app_id: ctx.app_id.clone(),
            job_id: ctx.job_id.clone(),
            task_index: ctx.task_index,
            task_count: ctx.task_count,
            attempt: ctx.attempt,
        };
        let state = HostState {
            wasi,
            table: ResourceTable::new(),
            limits: MemoryCap { limit, refused: false, grown: 0, high_water: self.stats.clone() },
            info,
            config: ctx.config.clone(),
            asked: ctx.asked.clone(),
            tokens: ctx.tokens.clone(),
            log: log.clone(),
            deadline: Instant::now() + ctx.deadline.saturating_sub(ctx.spent),
            kill: ctx.kill.clone(),
            echo: crate::host::EchoBudget::new(),
            records: crate::records::Records::None,
            input: None,
            input_failed: None,
            input_handle: None,
            part: None,
            random,
            program: None,
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limits);
        store.set_hostcall_fuel(hostcall_fuel(ctx));
        store.set_epoch_deadline(1);
        // The kill switch and the deadline are read from the store: a live instance
        // (one reused, or combining) gets the next call's own before each call.
        store.epoch_deadline_callback(move |store| {
            if store.data().kill.is_killed() {
                return Err(wasmtime::Error::new(Killed));
            }
            if Instant::now() >= store.data().deadline {
                return Ok(UpdateDeadline::Interrupt);
            }
            Ok(UpdateDeadline::Continue(1))
        });
        (store, log)
    }
}

impl Runtime {
    /// A live instance of `component`, in which calls run one after another, each as
    /// a task of its own: a job's tasks on one slot reuse it (as PySpark reuses its
    /// Python workers), and a combining job adds its partitions into it.
    pub fn instantiate(
        &self,
        component: Arc<JobComponent>,
        ctx: &TaskContext,
    ) -> Result<Instance, TaskFailure> {
        let (mut store, _log) = self.new_store(ctx);
        self.stats.instances_started.fetch_add(1, Ordering::Relaxed);
        let instance = component.pre.instantiate(&mut store).map_err(|e| classify(e, &store, ctx))?;
        Ok(Instance { component, store, instance, calls: 0 })
    }
}

/// A live instance of a job. Each call runs as its own task: its ids, configuration,
/// deadline, kill switch and log, under the instance's one memory cap; what the guest
/// keeps in memory or globals carries over to the next call. After a failed call the
/// instance may be in any state: the owner drops it (with the value a combining
/// instance held: those partitions run again).
pub struct Instance {
    pub(crate) component: Arc<JobComponent>,
    pub(crate) store: Store<HostState>,
    pub(crate) instance: wasmtime::component::Instance,
    calls: u32,
}

impl Instance {
    /// Runs one partition: a task whose output comes back.
    pub fn run(&mut self, ctx: &TaskContext, input: TaskInput) -> Outcome {
        let started = Instant::now();
        self.enter(ctx);
        let result = invoke(&self.component, &mut self.store, &self.instance, Call::Run(input));
        let result = settle(result, &self.store, ctx);
        let result = close_input(&mut self.store, result);
        Outcome { result, log: self.store.data().log.contents(), elapsed: started.elapsed() }
    }

    /// Folds one partition into the running value of a combining job: a task whose
    /// output stays here.
    pub fn add(&mut self, ctx: &TaskContext, input: TaskInput) -> Outcome {
        let started = Instant::now();
        self.enter(ctx);
        let store = &mut self.store;
        let result = combiner(&self.component, store, &self.instance).and_then(|c| {
            let input = partition(&mut *store, input)?;
            c.call_add(&mut *store, &input)
        });
        let result = result
            .map_err(|e| classify(e, store, ctx))
            .and_then(|r| r.map_err(|e| TaskFailure::Guest { message: e.message, retryable: e.retryable }));
        let result = close_input(store, result);
        let log = store.data().log.contents();
        Outcome { result: result.map(|()| Vec::new()), log, elapsed: started.elapsed() }
    }

    /// The running value of a combining job, encoded as a task output, within `ctx`'s
    /// result size.
    pub fn take(&mut self, ctx: &TaskContext) -> Result<Vec<u8>, TaskFailure> {
        self.enter(ctx);
        let store = &mut self.store;
        let result = combiner(&self.component, store, &self.instance).and_then(|c| c.call_take(&mut *store));
        settle(result, store, ctx)
    }

    /// Runs a map task: the partition's records go to `sink`, which comes back with
    /// what it took (whatever the call's end) for the caller to finish or drop.
    pub fn map<S: RecordSink>(&mut self, ctx: &TaskContext, input: TaskInput, sink: S) -> (Outcome, S) {
        let started = Instant::now();
        self.enter(ctx);
        self.store.data_mut().records = Records::Sink(Box::new(sink));
        let store = &mut self.store;
        let result = map_reduce(&self.component, store, &self.instance).and_then(|mr| {
            let out = store.data_mut().table.push(Emitter)?;
            let rep = out.rep();
            let input = partition(&mut *store, input)?;
            let result = mr.call_map(&mut *store, &input, Resource::<Emitter>::new_borrow(rep));
            let _ = store.data_mut().table.delete(out);
            result
        });
        let result = result
            .map_err(|e| classify(e, store, ctx))
            .and_then(|r| r.map_err(|e| TaskFailure::Guest { message: e.message, retryable: e.retryable }));
        let result = close_input(store, result);
        let sink =
            std::mem::take(&mut store.data_mut().records).into_sink::<S>().expect("the call's own sink");
        let log = store.data().log.contents();
        (Outcome { result: result.map(|()| Vec::new()), log, elapsed: started.elapsed() }, sink)
    }

    /// Runs a reduce task over `source`, the partition's records in key order; its
    /// output is a task output, as `run`'s. When the job writes files, what the task
    /// writes goes to `part`, which comes back (whatever the call's end) for the caller
    /// to put in place or drop.
    pub fn reduce<P: PartSink>(
        &mut self,
        ctx: &TaskContext,
        partition: u32,
        source: impl RecordSource,
        part: Option<P>,
    ) -> (Outcome, Option<P>) {
        let started = Instant::now();
        self.enter(ctx);
        let writes = part.is_some();
        self.store.data_mut().records = Records::Source(Box::new(source));
        self.store.data_mut().part = part.map(|p| Box::new(p) as Box<dyn PartSink>);
        let store = &mut self.store;
        let result = map_reduce(&self.component, store, &self.instance).and_then(|mr| {
            let input = store.data_mut().table.push(SortedInput)?;
            let writer = if writes { Some(store.data_mut().table.push(PartWriter)?) } else { None };
            let rep = input.rep();
            let part = writer.as_ref().map(|w| Resource::<PartWriter>::new_borrow(w.rep()));
            let result =
                mr.call_reduce(&mut *store, partition, Resource::<SortedInput>::new_borrow(rep), part);
            let _ = store.data_mut().table.delete(input);
            if let Some(writer) = writer {
                let _ = store.data_mut().table.delete(writer);
            }
            result
        });
        let result = settle(result, store, ctx);
        store.data_mut().records = Records::None;
        let part = store
            .data_mut()
            .part
            .take()
            .map(|p| *(p as Box<dyn std::any::Any>).downcast::<P>().expect("the call's own part sink"));
        (Outcome { result, log: store.data().log.contents(), elapsed: started.elapsed() }, part)
    }

    /// After a map call of this task: `batch` (one partition's records, sorted) with
    /// each run of one key folded by the job's combine, or `None` when the job does not
    /// combine (or exports no `map-combiner`). Runs under the map call's deadline, kill
    /// switch and memory cap: its time is the task's.
    pub fn combine_sorted(
        &mut self,
        ctx: &TaskContext,
        batch: &[u8],
    ) -> Result<Option<Vec<u8>>, TaskFailure> {
        let Some(indices) = &self.component.map_combiner else { return Ok(None) };
        self.store.set_hostcall_fuel(hostcall_fuel(ctx));
        self.store.set_epoch_deadline(1);
        let store = &mut self.store;
        let result =
            indices.load(&mut *store, &self.instance).and_then(|c| c.call_combine_sorted(&mut *store, batch));
        result
            .map_err(|e| classify(e, store, ctx))
            .and_then(|r| r.map_err(|e| TaskFailure::Guest { message: e.message, retryable: e.retryable }))
    }

    /// The most memory the instance has grown to, in bytes.
    pub fn memory(&self) -> u64 {
        self.store.data().limits.grown
    }

    /// The memory cap the instance runs under (the job's, when it asked for less).
    pub fn memory_limit(&self) -> u64 {
        self.store.data().limits.limit
    }

    /// Calls made in this instance so far.
    pub fn calls(&self) -> u32 {
        self.calls
    }

    /// Makes the store the next call's: its ids, configuration, tokens, deadline, kill
    /// switch, and an empty log.
    pub(crate) fn enter(&mut self, ctx: &TaskContext) {
        self.calls = self.calls.saturating_add(1);
        let state = self.store.data_mut();
        state.info = TaskInfo {
            app_id: ctx.app_id.clone(),
            job_id: ctx.job_id.clone(),
            task_index: ctx.task_index,
            task_count: ctx.task_count,
            attempt: ctx.attempt,
        };
        state.config = ctx.config.clone();
        state.asked = ctx.asked.clone();
        state.tokens = ctx.tokens.clone();
        state.deadline = Instant::now() + ctx.deadline.saturating_sub(ctx.spent);
        state.kill = ctx.kill.clone();
        state.random.reseed(ctx.seed.as_ref(), ctx.task_index);
        state.limits.refused = false;
        state.echo = crate::host::EchoBudget::new();
        state.records = Records::None;
        state.input = None;
        state.input_failed = None;
        state.part = None;
        state.log.clear();
        self.store.set_hostcall_fuel(hostcall_fuel(ctx));
        self.store.set_epoch_deadline(1);
    }
}

fn map_reduce(
    component: &JobComponent,
    store: &mut Store<HostState>,
    instance: &wasmtime::component::Instance,
) -> wasmtime::Result<crate::bindings::exports::flint::task::map_reduce_job::Guest> {
    match &component.map_reduce {
        Some(indices) => indices.load(&mut *store, instance),
        None => Err(wasmtime::Error::msg("the component exports no map-reduce (world map-reduce)")),
    }
}

fn combiner(
    component: &JobComponent,
    store: &mut Store<HostState>,
    instance: &wasmtime::component::Instance,
) -> wasmtime::Result<crate::bindings::exports::flint::task::combiner::Guest> {
    match &component.combiner {
        Some(indices) => indices.load(&mut *store, instance),
        None => Err(wasmtime::Error::msg("the component exports no combiner")),
    }
}

/// See [`Runtime::folder`].
pub struct Folder<'a> {
    runtime: &'a Runtime,
    component: &'a JobComponent,
    ctx: TaskContext,
    live: Option<(Store<HostState>, wasmtime::component::Instance)>,
    failed: Option<TaskFailure>,
}

/// Folded outputs held in a [`Folder`]'s instance; meaningful only to that folder.
#[derive(Debug)]
pub struct Accumulator(ResourceAny);

impl Folder<'_> {
    /// An accumulator holding one task output (or an encoded partial result).
    pub fn load(&mut self, output: &[u8]) -> Result<Accumulator, TaskFailure> {
        self.guest_call(|acc, store| acc.call_load(store, output)).map(Accumulator)
    }

    /// Folds `right` (the partitions just after `left`'s) into `left`.
    pub fn absorb(&mut self, left: &Accumulator, right: Accumulator) -> Result<(), TaskFailure> {
        self.guest_call(|acc, store| acc.call_absorb(store, left.0, right.0))
    }

    /// The folded value encoded as a task output.
    pub fn encode(&mut self, acc: &Accumulator) -> Result<Vec<u8>, TaskFailure> {
        let bytes = self.guest_call(|a, store| a.call_encode(store, acc.0))?;
        self.within_limit(bytes)
    }

    /// The job's result from the folded value; the accumulator is gone after it.
    pub fn finish(&mut self, acc: Accumulator) -> Result<Vec<u8>, TaskFailure> {
        let bytes = self.guest_call(|a, store| a.call_finish(store, acc.0))?;
        if let Some((store, _)) = self.live.as_mut() {
            let _ = acc.0.resource_drop(store);
        }
        self.within_limit(bytes)
    }

    fn within_limit(&mut self, bytes: Vec<u8>) -> Result<Vec<u8>, TaskFailure> {
        match bytes.len() as u64 {
            size if size > self.ctx.max_result_size => {
                Err(TaskFailure::ResultTooLarge { size, limit: self.ctx.max_result_size })
            }
            _ => Ok(bytes),
        }
    }

    /// Runs one call of the accumulator resource in the live instance (made on first
    /// use), under a fresh deadline.
    fn guest_call<T>(
        &mut self,
        call: impl FnOnce(
            &crate::bindings::exports::flint::task::aggregator::GuestAccumulator<'_>,
            &mut Store<HostState>,
        ) -> wasmtime::Result<Result<T, TaskError>>,
    ) -> Result<T, TaskFailure> {
        if let Some(failure) = &self.failed {
            return Err(failure.clone());
        }
        if self.live.is_none() {
            let (mut store, _log) = self.runtime.new_store(&self.ctx);
            match self.component.pre.instantiate(&mut store) {
                Ok(instance) => self.live = Some((store, instance)),
                Err(e) => return Err(self.fail(classify(e, &store, &self.ctx))),
            }
        }
        let (store, instance) = self.live.as_mut().expect("made above");
        store.data_mut().deadline = Instant::now() + self.ctx.deadline;
        store.set_epoch_deadline(1);
        let result =
            aggregator(self.component, store, instance).and_then(|agg| call(&agg.accumulator(), store));
        match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(self.fail(TaskFailure::Guest { message: e.message, retryable: e.retryable })),
            Err(e) => {
                let failure = classify(e, store, &self.ctx);
                Err(self.fail(failure))
            }
        }
    }

    fn fail(&mut self, failure: TaskFailure) -> TaskFailure {
        self.live = None;
        self.failed = Some(failure.clone());
        failure
    }
}

/// What a guest may hand the host in one call (its output, above all): room for a
/// result of twice the task's limit, so that one over it is reported as too large
/// rather than as a failed copy; never below wasmtime's default of 128 MiB.
fn hostcall_fuel(ctx: &TaskContext) -> usize {
    let fuel = usize::try_from(ctx.max_result_size.saturating_mul(2)).unwrap_or(usize::MAX);
    fuel.max(128 << 20)
}

/// A call's result as the caller sees it: typed failures, the size limit applied.
pub(crate) fn settle(
    result: wasmtime::Result<Result<Vec<u8>, TaskError>>,
    store: &Store<HostState>,
    ctx: &TaskContext,
) -> Result<Vec<u8>, TaskFailure> {
    result
        .map_err(|e| classify(e, store, ctx))
        .and_then(|r| r.map_err(|e| TaskFailure::Guest { message: e.message, retryable: e.retryable }))
        .and_then(|bytes| match bytes.len() as u64 {
            size if size > ctx.max_result_size => {
                Err(TaskFailure::ResultTooLarge { size, limit: ctx.max_result_size })
            }
            _ => Ok(bytes),
        })
}

fn invoke(
    component: &JobComponent,
    store: &mut Store<HostState>,
    instance: &wasmtime::component::Instance,
    call: Call,
) -> wasmtime::Result<Result<Vec<u8>, TaskError>> {
    match call {
        Call::Run(input) => {
            let Some(indices) = &component.job else {
                return Err(wasmtime::Error::msg(
                    "the component is a program: it runs stages, not tasks of its own",
                ));
            };
            let job: job::Guest = indices.load(&mut *store, instance)?;
            let input = partition(&mut *store, input)?;
            job.call_run(&mut *store, &input)
        }
    }
}

fn aggregator(
    component: &JobComponent,
    store: &mut Store<HostState>,
    instance: &wasmtime::component::Instance,
) -> wasmtime::Result<crate::bindings::exports::flint::task::aggregator::Guest> {
    match &component.aggregator {
        Some(indices) => indices.load(&mut *store, instance),
        None => Err(wasmtime::Error::msg("the component exports no aggregator (world task)")),
    }
}

/// The guest's view of `input`. A file split's lines go into the store, read through
/// the `split-reader` the partition carries.
pub(crate) fn partition(store: &mut Store<HostState>, input: TaskInput) -> wasmtime::Result<Partition> {
    Ok(match input {
        TaskInput::Index(i) => Partition::Index(i),
        TaskInput::Value(v) => Partition::Value(v),
        TaskInput::Lines { path, start, end, source } => {
            let state = store.data_mut();
            state.input = Some(source);
            let lines = state.table.push(SplitReader)?;
            state.input_handle = Some(lines.rep());
            Partition::Lines(FileSplit { path, start, end, lines })
        }
    })
}

/// Ends a call's reading of its split: a handle the guest kept reads nothing more, and
/// a failed read is the call's failure (unless it was killed), whatever the guest
/// returned after it: a task that swallowed the error must not pass off part of its
/// split as all of it.
pub(crate) fn close_input<T>(
    store: &mut Store<HostState>,
    result: Result<T, TaskFailure>,
) -> Result<T, TaskFailure> {
    let state = store.data_mut();
    state.input = None;
    if let Some(rep) = state.input_handle.take() {
        let _ = state.table.delete(Resource::<SplitReader>::new_own(rep));
    }
    match (state.input_failed.take(), result) {
        (_, Err(killed @ TaskFailure::Killed { .. })) => Err(killed),
        (Some(failure), _) => Err(failure),
        (None, result) => result,
    }
}

/// Turns a wasmtime error into the failure a user can act on.
pub(crate) fn classify(e: wasmtime::Error, store: &Store<HostState>, ctx: &TaskContext) -> TaskFailure {
    let log = &store.data().log;
    if e.is::<Killed>() {
        return TaskFailure::Killed { reason: "killed on request".into() };
    }
    let trap = e.downcast_ref::<Trap>();
    if trap == Some(&Trap::Interrupt) {
        return TaskFailure::Deadline {
            deadline_ms: ctx.deadline.as_millis() as u64,
            key: ctx.deadline_key.into(),
        };
    }
    let panic = panic_message(&log.contents());
    // A refused growth ended the task only if nothing else did: a guest that coped with
    // the refusal and panicked later for its own reason reports that panic.
    if store.data().limits.refused && panic.is_none() {
        return TaskFailure::MemoryLimit { limit: store.data().limits.limit };
    }
    match trap {
        Some(trap) => {
            let mut message = trap.to_string().trim_start_matches("wasm trap: ").to_owned();
            if let Some(panic) = panic {
                message = format!("{message} (guest panicked: {panic})");
            }
            let backtrace = e.downcast_ref::<WasmBacktrace>().map(|bt| bt.to_string());
            TaskFailure::Trap { message, backtrace }
        }
        // Refused by wasmtime in the middle of the guest's call for what the guest did
        // (a store past its 100,000 handles, say): the guest's failure, where it was.
        None => match e.downcast_ref::<WasmBacktrace>() {
            Some(backtrace) => TaskFailure::Trap {
                message: e.root_cause().to_string(),
                backtrace: Some(backtrace.to_string()),
            },
            None => TaskFailure::Host { message: format!("{e:#}").replace('\n', " ") },
        },
    }
}

/// The message of a Rust panic, from what the guest's panic hook wrote to stderr.
fn panic_message(log: &str) -> Option<String> {
    let after = &log[log.find("panicked at ")?..];
    let mut lines = after.lines().skip(1).take_while(|l| !l.starts_with("note:"));
    let message: Vec<&str> = lines.by_ref().collect();
    Some(message.join(" ").trim().to_owned()).filter(|m| !m.is_empty())
}

#[cfg(test)]
mod tests {
    use super::panic_message;

    #[test]
    fn panic_message_is_read_from_the_hook_output() {
        let log = "thread '<unnamed>' panicked at src/lib.rs:5:9:\nboom in task 3\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(panic_message(log).as_deref(), Some("boom in task 3"));
        assert_eq!(panic_message("all quiet"), None);
    }
}
