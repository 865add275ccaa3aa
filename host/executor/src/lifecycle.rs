//! One executor's serving life, shared by the in-process executors of `flint run` and
//! the remote ones: take commands, run launches on the core, batch reports, copy map
//! outputs handed over by executors that leave, and drain when told to (finish what
//! runs, hand back what arrives, wait while its own map outputs are copied off, then
//! end). Only the transport around it differs.

use crate::core::ExecutorCore;
use flint_proto::{Adopted, ExecutorCommand, Partial, StatusUpdate, TaskFailure, TaskState};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// Reports are sent together up to about this many bytes (each report is bounded:
/// inline outputs, log tails, failure messages).
const REPORT_BATCH_BYTES: usize = 1 << 20;

/// A driver sending more than this a slot is wrong: what is past it is handed back
/// rather than queued, so the slot queue, the report channel and the kill switches stay
/// bounded whatever arrives.
pub use flint_proto::MAX_HELD_PER_SLOT;

/// What an executor tells its driver.
#[derive(Debug)]
pub enum Outbound {
    Reports(Vec<StatusUpdate>),
    /// Combined outputs handed over; always after the reports of the tasks they hold.
    Partial(Partial),
    /// It drains: it takes nothing new.
    Draining,
    /// What it made of an adoption.
    Adopted(Adopted),
}

/// What the slot threads say, in the order they say it: a task's report before the
/// partial result that holds its output.
enum Said {
    Report(StatusUpdate),
    Partial(Partial),
    Adopted(Adopted),
}

/// How serving ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// Drained: every launched attempt has reported.
    Drained,
    /// The command channel closed: the driver is gone (or dropped this executor).
    Closed,
}

/// Serves `commands` until drained or the channel closes. Reports and the start of a
/// drain go to `outbound`, in order. `decommission` turning true (or its sender going)
/// starts a drain, as a `Decommission` command does. Drained while it holds map
/// outputs, it waits up to `leave_within` for the driver to let it go (their copies
/// made) or for their jobs to end.
pub async fn serve(
    core: Arc<ExecutorCore>,
    mut commands: mpsc::UnboundedReceiver<ExecutorCommand>,
    outbound: mpsc::Sender<Outbound>,
    mut decommission: watch::Receiver<bool>,
    leave_within: Duration,
) -> Ended {
    // Reports of attempts launched here (at most `limit` are ever outstanding) and the
    // partial results of combined ones. Unbounded as a type, bounded by what feeds it:
    // a partial names at least one task combined here, each in one partial only, and
    // a task is combined only under the launch credit, so at most `limit` reports and
    // as many partials wait between two turns of this loop; and one answer per
    // adoption, which the driver asks once per leaving executor and job.
    let (said, mut said_rx) = mpsc::unbounded_channel::<Said>();
    {
        let said = said.clone();
        core.set_partial_sink(Box::new(move |partial| {
            let _ = said.send(Said::Partial(partial));
        }));
    }
    // Launched here and not yet reported.
    let mut running = 0usize;
    let limit = core.runtime().slots() as usize * MAX_HELD_PER_SLOT;
    let mut draining = false;
    // Told to go by the driver; drained and waiting to be, until then.
    let mut leave = false;
    let mut waiting: Option<tokio::time::Instant> = None;
    loop {
        let drain_now = tokio::select! {
            command = commands.recv() => match command {
                None => return Ended::Closed,
                Some(ExecutorCommand::Launch(batch)) => {
                    for launch in batch {
                        running += 1;
                        // Sent before the driver heard of the drain, or past what any
                        // driver may place here: hand it back.
                        let refused = if draining {
                            Some("executor decommissioning")
                        } else if running > limit {
                            Some("executor holds its most attempts already")
                        } else {
                            None
                        };
                        if let Some(reason) = refused {
                            let failure = TaskFailure::ExecutorLost {
                                executor: core.id().to_owned(),
                                reason: reason.into(),
                            };
                            let _ = said.send(Said::Report(StatusUpdate {
                                executor: core.id().to_owned(),
                                attempt: launch.attempt,
                                state: TaskState::Failed(failure),
                                log: String::new(),
                                elapsed: Duration::ZERO,
                                metrics: Default::default(),
                                asked: Vec::new(),
                            }));
                            continue;
                        }
                        let said = said.clone();
                        core.launch(launch, move |update| {
                            let _ = said.send(Said::Report(update));
                        });
                    }
                    false
                }
                Some(ExecutorCommand::Kill(attempt)) => {
                    core.kill(&attempt);
                    false
                }
                Some(ExecutorCommand::JobEnded(job)) => {
                    core.job_ended(job);
                    false
                }
                Some(ExecutorCommand::Collect(job)) => {
                    core.collect(job);
                    false
                }
                Some(ExecutorCommand::Decommission) => true,
                Some(ExecutorCommand::Leave) => {
                    leave = true;
                    false
                }
                Some(ExecutorCommand::Adopt(adoption)) => {
                    // Known now, in command order: a `JobEnded` after it deletes the copies.
                    if !draining {
                        core.know_shuffle(adoption.job, adoption.token);
                    }
                    let (core, said) = (core.clone(), said.clone());
                    // Off the async threads: the copies are files written as they come.
                    tokio::task::spawn_blocking(move || {
                        let adopted = match draining {
                            false => core.adopt(&adoption),
                            true => Adopted {
                                job: adoption.job,
                                from: adoption.from.incarnation,
                                maps: Vec::new(),
                                failed: adoption.outputs.iter().map(|o| (o.0, "it is leaving too".into())).collect(),
                            },
                        };
                        let _ = said.send(Said::Adopted(adopted));
                    });
                    false
                }
                Some(ExecutorCommand::Tokens(tokens)) => {
                    core.set_tokens(tokens);
                    false
                }
            },
            Some(first) = said_rx.recv() => {
                match forward(first, &mut said_rx, &mut running, &outbound).await {
                    Ok(()) => false,
                    Err(Closed) => return Ended::Closed,
                }
            }
            changed = decommission.changed(), if !draining => changed.is_err() || *decommission.borrow(),
            () = tokio::time::sleep_until(waiting.unwrap_or_else(tokio::time::Instant::now)), if waiting.is_some() => {
                tracing::warn!("leaving without word from the driver (flint.decommission.timeout)");
                return Ended::Drained;
            }
        };
        if drain_now && !draining {
            tracing::info!(running, "decommissioning: finishing running tasks");
            draining = true;
            if outbound.send(Outbound::Draining).await.is_err() {
                return Ended::Closed;
            }
        }
        if draining && running == 0 && waiting.is_none() {
            // What it combined goes to the driver before it leaves, so that no task runs
            // again for want of it.
            let handing = core.clone();
            let _ = tokio::task::spawn_blocking(move || handing.hand_over_all()).await;
            while let Ok(next) = said_rx.try_recv() {
                if forward(next, &mut said_rx, &mut running, &outbound).await.is_err() {
                    return Ended::Closed;
                }
            }
            if core.holds_map_outputs() && !leave && !leave_within.is_zero() {
                tracing::info!("drained; waiting while its map outputs are copied to executors that stay");
                waiting = Some(tokio::time::Instant::now() + leave_within);
                continue;
            }
            return Ended::Drained;
        }
        // Let go by the driver, or nothing of its own left to hand over.
        if waiting.is_some() && (leave || !core.holds_map_outputs()) {
            return Ended::Drained;
        }
    }
}

/// The outbound channel closed: the transport is gone.
struct Closed;

/// Sends `first` and what follows it already queued: reports together up to about
/// [`REPORT_BATCH_BYTES`], a partial result on its own after the reports before it.
async fn forward(
    first: Said,
    said_rx: &mut mpsc::UnboundedReceiver<Said>,
    running: &mut usize,
    outbound: &mpsc::Sender<Outbound>,
) -> Result<(), Closed> {
    let mut batch = Vec::new();
    let mut bytes = 0;
    let mut next = Some(first);
    while let Some(said) = next.take() {
        match said {
            Said::Report(update) => {
                bytes += report_size(&update);
                batch.push(update);
                if bytes < REPORT_BATCH_BYTES {
                    next = said_rx.try_recv().ok();
                }
            }
            Said::Partial(partial) => {
                if !batch.is_empty() {
                    *running -= batch.len();
                    outbound.send(Outbound::Reports(std::mem::take(&mut batch))).await.map_err(|_| Closed)?;
                }
                outbound.send(Outbound::Partial(partial)).await.map_err(|_| Closed)?;
            }
            Said::Adopted(adopted) => outbound.send(Outbound::Adopted(adopted)).await.map_err(|_| Closed)?,
        }
    }
    if !batch.is_empty() {
        *running -= batch.len();
        outbound.send(Outbound::Reports(batch)).await.map_err(|_| Closed)?;
    }
    Ok(())
}

fn report_size(update: &StatusUpdate) -> usize {
    let output = match &update.state {
        TaskState::Succeeded(flint_proto::TaskOutput::Inline(bytes)) => bytes.len(),
        // A size per reduce partition (a varint of at most ten bytes) and the inline slices.
        TaskState::Succeeded(flint_proto::TaskOutput::Map(status)) => {
            64 + 10 * status.sizes.len()
                + status.inline.iter().map(|(_, s)| 16 + s.bytes.len()).sum::<usize>()
        }
        TaskState::Succeeded(_) => 64,
        TaskState::Failed(failure) => failure.to_string().len(),
    };
    output + update.log.len() + 128
}
