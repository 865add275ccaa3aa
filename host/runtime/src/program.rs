//! A program's calls: its `main`, on the driver, in an instance whose `datasets` calls
//! go to a [`DatasetsHost`]; and its stages' tasks, on executors, each a call of the
//! component's `stage` between what the task reads and what it writes.

use crate::bindings::exports::flint::task::stage;
use crate::bindings::flint::task::datasets;
use crate::component::JobComponent;
use crate::engine::Runtime;
use crate::host::{DatasetsHost, ProgramState};
use crate::records::{Emitter, RecordSink, RecordSource, Records, SortedInput};
use crate::sandbox::{Instance, Outcome, TaskContext, TaskInput, classify, close_input, partition, settle};
use flint_proto::TaskFailure;
use flint_proto::program::{Dependency, StagePlan};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::component::Resource;

/// What a task of a program's stage reads.
pub enum StageInput {
    /// Its source partition.
    Source(TaskInput),
    /// Its partition of the shuffles its stage reads, merged by key, each record's
    /// partition field the parent it came from.
    Shuffled { partition: u32, source: Box<dyn RecordSource> },
}

fn dependency(d: &Dependency) -> datasets::Dependency {
    datasets::Dependency {
        kind: d.kind.clone(),
        function: d.function.clone(),
        capture: d.capture.clone(),
        partitions: d.partitions,
    }
}

fn plan(p: &StagePlan) -> stage::Plan {
    stage::Plan {
        reads: p.reads.as_ref().map(dependency),
        steps: p
            .steps
            .iter()
            .map(|s| datasets::Step {
                kind: s.kind.clone(),
                function: s.function.clone(),
                capture: s.capture.clone(),
            })
            .collect(),
        writes: p.writes.as_ref().map(dependency),
    }
}

impl Instance {
    /// Runs a task of a program's stage: `plan`'s steps over `input`, into `sink` when
    /// the stage writes a shuffle (which comes back, whatever the call's end, for the
    /// caller to finish or drop), else into the task's output.
    pub fn stage<S: RecordSink>(
        &mut self,
        ctx: &TaskContext,
        plan_of: &StagePlan,
        input: StageInput,
        sink: Option<S>,
    ) -> (Outcome, Option<S>) {
        let started = Instant::now();
        self.enter(ctx);
        let writes = sink.is_some();
        let sink = sink.map(|s| Box::new(s) as Box<dyn RecordSink>);
        let wit_plan = plan(plan_of);
        let component = self.component.clone();
        let instance = self.instance;
        let store = &mut self.store;
        let result = (|| {
            let Some((_, indices)) = &component.program else {
                return Err(wasmtime::Error::msg("the component is not a program (world program)"));
            };
            let guest = indices.load(&mut *store, &instance)?;
            let out = if writes { Some(store.data_mut().table.push(Emitter)?) } else { None };
            let out_borrow = out.as_ref().map(|o| Resource::<Emitter>::new_borrow(o.rep()));
            let result = match input {
                StageInput::Source(input) => {
                    if let Some(sink) = sink {
                        store.data_mut().records = Records::Sink(sink);
                    }
                    let input = partition(&mut *store, input)?;
                    guest.call_run_source(&mut *store, &wit_plan, &input, out_borrow)
                }
                StageInput::Shuffled { partition: number, source } => {
                    store.data_mut().records = match sink {
                        Some(sink) => Records::Both(source, sink),
                        None => Records::Source(source),
                    };
                    let sorted = store.data_mut().table.push(SortedInput)?;
                    let borrow = Resource::<SortedInput>::new_borrow(sorted.rep());
                    let result = guest.call_run_shuffled(&mut *store, &wit_plan, number, borrow, out_borrow);
                    let _ = store.data_mut().table.delete(sorted);
                    result
                }
            };
            if let Some(out) = out {
                let _ = store.data_mut().table.delete(out);
            }
            result
        })();
        let result = settle(result, store, ctx);
        let result = close_input(store, result);
        let sink = std::mem::take(&mut store.data_mut().records).into_sink::<S>();
        (Outcome { result, log: store.data().log.contents(), elapsed: started.elapsed() }, sink)
    }
}

impl Runtime {
    /// Runs a program's `main` in a fresh instance of `component`, its datasets served
    /// by `host`, under `ctx`'s memory cap and deadline (the time its actions' jobs take
    /// is not its own, and is not counted). Its output is the program's result (JSON).
    pub fn program(
        &self,
        component: &Arc<JobComponent>,
        ctx: &TaskContext,
        host: Box<dyn DatasetsHost>,
    ) -> Outcome {
        let started = Instant::now();
        let (mut store, _log) = self.new_store(ctx);
        let failed = |failure: TaskFailure| Outcome {
            result: Err(failure),
            log: String::new(),
            elapsed: Duration::ZERO,
        };
        let Some((entry, _)) = &component.program else {
            return failed(TaskFailure::Host {
                message: "the component is not a program (world program)".into(),
            });
        };
        let instance = match component.pre.instantiate(&mut store) {
            Ok(instance) => instance,
            Err(e) => return failed(classify(e, &store, ctx)),
        };
        let result = entry.load(&mut store, &instance).and_then(|guest| {
            let functions = guest.call_functions(&mut store)?;
            store.data_mut().program =
                Some(ProgramState { host, functions: functions.into_iter().collect() });
            guest.call_main(&mut store)
        });
        let result = settle(result, &store, ctx);
        store.data_mut().program = None;
        Outcome { result, log: store.data().log.contents(), elapsed: started.elapsed() }
    }
}
