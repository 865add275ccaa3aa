//! Kills reach attempts still waiting for a slot: on a one-slot executor, a spinning
//! attempt holds the slot while others queue behind it. The real `chaos` component logs
//! "task N running" when it starts, so an attempt's log says whether it ever ran.

mod common;

use flint_executor::ExecutorCore;
use flint_proto::{
    Attempt, Digest, JobDescriptor, JobId, PartitionSpec, StatusUpdate, TaskFailure, TaskLaunch, TaskState,
};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

fn one_slot_executor() -> (Arc<ExecutorCore>, Digest) {
    let (core, digests) = common::one_slot_executor(&["chaos"], false);
    (core, digests["chaos"])
}

/// A job whose task 0 spins and whose other tasks succeed at once.
fn job(digest: Digest, tasks: u32) -> Arc<JobDescriptor> {
    common::job(digest, tasks, &[("mode", "loop"), ("only_task", "0"), ("other_mode", "ok")])
}

fn launch(
    core: &Arc<ExecutorCore>,
    job: &Arc<JobDescriptor>,
    index: u32,
    reports: &mpsc::UnboundedSender<StatusUpdate>,
) -> Attempt {
    let attempt = Attempt { job: job.job, index, number: 0 };
    let reports = reports.clone();
    core.launch(TaskLaunch { attempt, job: job.clone(), partition: PartitionSpec::Index(index) }, move |u| {
        let _ = reports.send(u);
    });
    attempt
}

/// Runs one of the job's quick tasks to its end first, so the component is compiled and
/// an instance of it is kept: the spinning attempt then starts in milliseconds, not after
/// a compile a loaded machine may take seconds over.
async fn warmed(
    core: &Arc<ExecutorCore>,
    job: &Arc<JobDescriptor>,
    rx: &mut mpsc::UnboundedReceiver<StatusUpdate>,
    tx: &mpsc::UnboundedSender<StatusUpdate>,
) {
    launch(core, job, job.task_count - 1, tx);
    let report = collect(rx, 1).await.remove(0);
    assert!(matches!(report.state, TaskState::Succeeded(_)), "warm-up: {:?}", report.state);
    assert_eq!(core.idle_instances(), 1);
}

async fn started(core: &ExecutorCore) {
    // The spinning attempt holds the slot once the core counts it running and the others
    // wait; give it a moment to be inside the guest (its instance is warm).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(core.running(), 3);
}

async fn collect(rx: &mut mpsc::UnboundedReceiver<StatusUpdate>, n: usize) -> Vec<StatusUpdate> {
    let mut all = Vec::new();
    while all.len() < n {
        all.push(tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.unwrap().unwrap());
    }
    all.sort_by_key(|u| u.attempt.index);
    all
}

fn assert_killed(update: &StatusUpdate, ran: bool) {
    let TaskState::Failed(TaskFailure::Killed { reason }) = &update.state else {
        panic!("task {} was not killed: {:?}", update.attempt.index, update.state);
    };
    let logged = update.log.contains(&format!("task {} running", update.attempt.index));
    assert_eq!(logged, ran, "task {} ({reason}): log {:?}", update.attempt.index, update.log);
}

#[tokio::test(flavor = "multi_thread")]
async fn killing_queued_attempts_keeps_them_from_ever_starting() {
    let (core, digest) = one_slot_executor();
    // Tasks 0 to 2 are launched below; task 3 warms the executor up.
    let job = job(digest, 4);
    let (tx, mut rx) = mpsc::unbounded_channel();
    warmed(&core, &job, &mut rx, &tx).await;
    let spinning = launch(&core, &job, 0, &tx);
    let queued = [launch(&core, &job, 1, &tx), launch(&core, &job, 2, &tx)];
    started(&core).await;
    for attempt in &queued {
        core.kill(attempt);
    }
    core.kill(&spinning);
    let reports = collect(&mut rx, 3).await;
    assert_killed(&reports[0], true);
    assert_killed(&reports[1], false);
    assert_killed(&reports[2], false);
    assert_eq!(core.running(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_ending_stops_its_attempts_running_or_queued() {
    let (core, digest) = one_slot_executor();
    // Tasks 0 to 2 are launched below; task 3 warms the executor up.
    let job = job(digest, 4);
    let (tx, mut rx) = mpsc::unbounded_channel();
    warmed(&core, &job, &mut rx, &tx).await;
    for index in 0..3 {
        launch(&core, &job, index, &tx);
    }
    started(&core).await;
    core.job_ended(job.job);
    let reports = collect(&mut rx, 3).await;
    assert_killed(&reports[0], true);
    assert_killed(&reports[1], false);
    assert_killed(&reports[2], false);
}

#[tokio::test(flavor = "multi_thread")]
async fn launches_past_what_any_driver_may_place_are_handed_back_not_queued() {
    use flint_executor::lifecycle::{self, MAX_HELD_PER_SLOT, Outbound};
    use flint_proto::ExecutorCommand;
    let (core, digest) = one_slot_executor();
    // Every task spins: the first holds the slot, the rest would queue.
    let mut descriptor = (*job(digest, 100)).clone();
    Arc::make_mut(&mut descriptor.config).remove("only_task");
    let job = Arc::new(descriptor);
    let (commands, command_rx) = mpsc::unbounded_channel();
    let (outbound, mut outbound_rx) = mpsc::channel(16);
    let (_decommission, watch) = tokio::sync::watch::channel(false);
    let serving = tokio::spawn(lifecycle::serve(core.clone(), command_rx, outbound, watch, Duration::ZERO));
    let launches = (0..100)
        .map(|i| TaskLaunch {
            attempt: Attempt { job: JobId(1), index: i, number: 0 },
            job: job.clone(),
            partition: PartitionSpec::Index(i),
        })
        .collect();
    commands.send(ExecutorCommand::Launch(launches)).unwrap();
    let mut handed_back = Vec::new();
    while handed_back.len() < 100 - MAX_HELD_PER_SLOT {
        let Some(Outbound::Reports(batch)) =
            tokio::time::timeout(Duration::from_secs(10), outbound_rx.recv()).await.unwrap()
        else {
            panic!("reports expected")
        };
        for update in batch {
            match update.state {
                TaskState::Failed(TaskFailure::ExecutorLost { reason, .. }) => {
                    assert!(reason.contains("most attempts"), "{reason}");
                    handed_back.push(update.attempt.index);
                }
                other => panic!("task {} ended as {other:?}", update.attempt.index),
            }
        }
    }
    handed_back.sort();
    assert_eq!(handed_back, (MAX_HELD_PER_SLOT as u32..100).collect::<Vec<_>>(), "the ones past the bound");
    assert_eq!(core.running(), MAX_HELD_PER_SLOT, "the rest are held: one running, the others queued");
    core.kill_all();
    drop(commands);
    let _ = tokio::time::timeout(Duration::from_secs(10), serving).await;
}
