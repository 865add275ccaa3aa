//! How a job's outputs become its result: a `task` job's are collected in partition
//! order; an `aggregate` job's go to a thread of its own that merges them in one
//! sandboxed instance (`Runtime::folder`) as they arrive and calls `finish` at the end.

use crate::fold::{FoldError, Folding};
use flint_proto::{JobDescriptor, JobError, Settings, TaskFailure};
use flint_runtime::Runtime;
use flint_runtime::{JobComponent, KillSwitch, TaskContext};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Bytes of outputs that may wait for a job's merges before its result fetches wait.
pub(super) const FOLD_BACKLOG: u64 = 64 << 20;

/// How a job's outputs become its result.
pub(super) enum Fold {
    /// `aggregate` world: a worker thread merges in the job's sandbox as outputs arrive.
    Aggregate(FoldWorker),
    /// `task` world: outputs are collected in partition order.
    Collect(Vec<Option<Vec<u8>>>),
    /// A map/reduce job's collected parts (`--collect`): joined in partition order.
    Parts(Vec<Option<Vec<u8>>>),
    /// A program's action: its outputs, in partition order, as they came (the job's
    /// result is their list in postcard, for the program).
    Outputs(Vec<Option<Vec<u8>>>),
}

/// The thread folding an `aggregate` job's outputs.
pub(super) struct FoldWorker {
    pub(super) sender: std::sync::mpsc::Sender<FoldMessage>,
    /// Stops a merge in progress when the job ends another way.
    pub(super) kill: KillSwitch,
    /// Bytes of outputs handed to the worker and not yet merged. Result fetches wait
    /// while it is over [`FOLD_BACKLOG`]: a slow merge holds tasks back, not memory.
    pub(super) backlog: Arc<AtomicU64>,
    /// Outputs accepted in this turn of the event loop, sent to the worker together at
    /// its end (one wake-up of the fold thread per turn, not per task).
    pub(super) pending: Vec<FoldInput>,
}

/// An output for the fold: one task's (`index`), or a partial result of `tasks`
/// combined ones, which a commutative fold takes in any order.
pub(super) struct FoldInput {
    pub(super) index: Option<u32>,
    pub(super) tasks: u32,
    pub(super) bytes: Vec<u8>,
}

impl FoldWorker {
    /// Queues an output for the end of the loop's turn; true when it is the turn's
    /// first, so the job is noted for the flush.
    pub(super) fn push(&mut self, input: FoldInput) -> bool {
        self.backlog.fetch_add(input.bytes.len() as u64, Ordering::Relaxed);
        self.pending.push(input);
        self.pending.len() == 1
    }

    pub(super) fn flush(&mut self) {
        if !self.pending.is_empty() {
            let _ = self.sender.send(FoldMessage::Outputs(std::mem::take(&mut self.pending)));
        }
    }
}

pub(super) enum FoldMessage {
    Outputs(Vec<FoldInput>),
    Finish,
}

/// Starts the thread that folds an `aggregate` job's outputs with its own `merge`, in one
/// sandboxed instance (`Runtime::folder`), and calls `finish` once every task is in.
pub(super) fn spawn_fold(
    done: impl FnOnce(Result<Vec<u8>, JobError>) + Send + 'static,
    runtime: Arc<Runtime>,
    component: Arc<JobComponent>,
    job: Arc<JobDescriptor>,
    asked: Arc<flint_runtime::ConfAsked>,
    settings: &Settings,
    span: tracing::Span,
) -> FoldWorker {
    let (max_result_size, deadline) = (settings.driver_max_result_size, settings.merge_deadline);
    let (kill, backlog) = (KillSwitch::default(), Arc::new(AtomicU64::new(0)));
    // Unbounded as a type: one message per loop turn with outputs for this job, each
    // output once (a task's, or a partial naming tasks the core accepted). Blocks wait
    // before their fetch while the worker is over FOLD_BACKLOG; outputs that rode in a
    // report (at most 64 KiB each) are not held back, so a merge far slower than its
    // tasks may have up to tasks × 64 KiB waiting here.
    let (sender, rx) = std::sync::mpsc::channel();
    let worker = FoldWorker { sender, kill: kill.clone(), backlog: backlog.clone(), pending: Vec::new() };
    std::thread::Builder::new()
        .name(format!("flint-fold-{}", job.job))
        .spawn(move || {
            let _entered = span.enter();
            let ctx = TaskContext {
                app_id: job.app_id.clone(),
                job_id: job.job.to_string(),
                task_index: 0,
                task_count: job.task_count,
                attempt: 0,
                config: job.config.clone(),
                asked,
                tokens: Arc::new(Vec::new()),
                // A merge answers to the driver's memory (`flint.driver.memory`, the
                // runtime's cap), not to the job's limit for one task.
                memory_limit: None,
                deadline,
                spent: Duration::ZERO,
                deadline_key: "flint.merge.deadline",
                // Merged outputs add up: they answer to the job's limit
                // (`flint.driver.maxResultSize`), not to one task's.
                max_result_size,
                kill,
                seed: None,
            };
            // Outputs load into accumulators in the job's instance and stay there,
            // decoded, until `finish`: each is decoded once, the total never re-encoded.
            let mut folder = runtime.folder(&component, ctx);
            // A combining job's partial results come in any order: its merge promised
            // to be commutative.
            let mut fold = Folding::new(job.combine);
            let result = loop {
                match rx.recv() {
                    Ok(FoldMessage::Outputs(outputs)) => {
                        let mut failed = None;
                        for FoldInput { index, tasks, bytes } in outputs {
                            let size = bytes.len() as u64;
                            if failed.is_none() {
                                let pushed = folder.load(&bytes).map_err(FoldError::Merge).and_then(|acc| {
                                    drop(bytes);
                                    fold.push(index, tasks, acc, &mut |left, right| {
                                        folder.absorb(&left, right).map(|()| left)
                                    })
                                });
                                failed = pushed.err();
                            }
                            backlog.fetch_sub(size, Ordering::Relaxed);
                        }
                        match failed {
                            None => {}
                            Some(FoldError::Merge(failure)) => break Err(JobError::Merge(failure)),
                            Some(FoldError::Unplaceable) => {
                                break Err(JobError::Merge(TaskFailure::Host {
                                    message: "a combined output reached a job folded in partition order"
                                        .into(),
                                }));
                            }
                        }
                    }
                    Ok(FoldMessage::Finish) => {
                        break match fold.into_total(job.outputs()) {
                            Some(total) => folder.finish(total).map_err(JobError::Finish),
                            // A job of no partitions has nothing to finish.
                            None if job.outputs() == 0 => Ok(b"null".to_vec()),
                            None => Err(JobError::Merge(TaskFailure::Host {
                                message: format!("the fold ended without all {} task outputs", job.outputs()),
                            })),
                        };
                    }
                    Err(_) => return, // the job ended without us
                }
            };
            done(result);
        })
        .expect("spawn a fold thread");
    worker
}

/// A `task`-world job's result: its outputs as a JSON array, in partition order. An
/// output that is not JSON becomes a JSON string.
pub(super) fn collect_json(outputs: Vec<Option<Vec<u8>>>) -> Vec<u8> {
    let values: Vec<serde_json::Value> = outputs
        .into_iter()
        .map(|o| {
            let bytes = o.unwrap_or_default();
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        })
        .collect();
    serde_json::to_vec(&values).expect("JSON values encode")
}
