//! Live instances on a one-slot executor with the real `tally` (task i counts i + 1;
//! its merge is commutative), `noop` and `chaos` components. A job's plain tasks reuse
//! one instance up to its reuse count, never after a failure, never across jobs, never
//! past the memory an idle slot keeps. Tasks of a combining job are added to one live
//! instance whose value is handed over when collected, when an `add` fails (as lost,
//! naming the tasks it held), or when a task of another job needs the slot's room.

mod common;

use flint_executor::ExecutorCore;
use flint_proto::{
    Attempt, Digest, JobDescriptor, JobId, Partial, PartitionSpec, StatusUpdate, TaskFailure, TaskLaunch,
    TaskOutput, TaskState,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

struct Executor {
    core: Arc<ExecutorCore>,
    digests: HashMap<&'static str, Digest>,
    reports: mpsc::UnboundedReceiver<StatusUpdate>,
    report_tx: mpsc::UnboundedSender<StatusUpdate>,
    partials: mpsc::UnboundedReceiver<Partial>,
}

fn one_slot_executor() -> Executor {
    let (core, digests) = common::one_slot_executor(&["tally", "noop", "chaos"], true);
    let (partial_tx, partials) = mpsc::unbounded_channel();
    core.set_partial_sink(Box::new(move |p| {
        let _ = partial_tx.send(p);
    }));
    let (report_tx, reports) = mpsc::unbounded_channel();
    Executor { core, digests, reports, report_tx, partials }
}

fn job(digest: Digest, id: JobId, tasks: u32, combine: bool, config: &[(&str, &str)]) -> Arc<JobDescriptor> {
    Arc::new(JobDescriptor {
        job: id,
        app_id: "a".into(),
        name: "j".into(),
        component: digest,
        task_count: tasks,
        config: Arc::new(config.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
        token_services: Vec::new(),
        memory_limit: None,
        deadline: Duration::from_secs(60),
        max_result_size: 1 << 20,
        combine,
        instance_reuse: 100,
        shuffle: None,
        program: None,
    })
}

impl Executor {
    fn launch(&self, job: &Arc<JobDescriptor>, index: u32) {
        let attempt = Attempt { job: job.job, index, number: 0 };
        let reports = self.report_tx.clone();
        let launch = TaskLaunch { attempt, job: job.clone(), partition: PartitionSpec::Index(index) };
        self.core.launch(launch, move |u| {
            let _ = reports.send(u);
        });
    }

    async fn report(&mut self) -> StatusUpdate {
        tokio::time::timeout(Duration::from_secs(10), self.reports.recv()).await.unwrap().unwrap()
    }

    async fn partial(&mut self) -> Partial {
        tokio::time::timeout(Duration::from_secs(10), self.partials.recv()).await.unwrap().unwrap()
    }

    /// No partial within a moment.
    async fn no_partial(&mut self) {
        let next = tokio::time::timeout(Duration::from_millis(300), self.partials.recv()).await;
        assert!(next.is_err(), "unexpected partial: {next:?}");
    }
}

/// tally's value: `sum`, `tasks`, then its padding, in postcard.
fn tally(partial: &Partial) -> (u64, u64) {
    let Ok(TaskOutput::Inline(bytes)) = &partial.output else { panic!("not an inline value: {partial:?}") };
    let (sum, tasks, _pad): (u64, u64, Vec<u8>) = postcard::from_bytes(bytes).unwrap();
    (sum, tasks)
}

/// The job with another reuse count.
fn reusing(job: Arc<JobDescriptor>, instance_reuse: u32) -> Arc<JobDescriptor> {
    Arc::new(JobDescriptor { instance_reuse, ..(*job).clone() })
}

/// What a chaos `residue` task said: how many calls of its mode its instance had run.
fn runs_before(update: &StatusUpdate) -> u32 {
    let TaskState::Succeeded(TaskOutput::Inline(bytes)) = &update.state else { panic!("{update:?}") };
    let text = String::from_utf8_lossy(bytes);
    let at = text.find("runs=").unwrap_or_else(|| panic!("{text}")) + "runs=".len();
    text[at..].split(' ').next().unwrap().parse().unwrap()
}

impl Executor {
    /// Launches `tasks` tasks of `job` and says what each found its instance had run.
    async fn residues(&mut self, job: &Arc<JobDescriptor>) -> Vec<u32> {
        for index in 0..job.task_count {
            self.launch(job, index);
        }
        let mut runs = Vec::new();
        for _ in 0..job.task_count {
            runs.push(runs_before(&self.report().await));
        }
        runs
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_jobs_tasks_reuse_one_instance_up_to_its_reuse_count() {
    let mut e = one_slot_executor();
    let chaos = e.digests["chaos"];
    let small = [("mode", "residue"), ("bytes", "4096")];
    let three = reusing(job(chaos, JobId(1), 7, false, &small), 3);
    assert_eq!(e.residues(&three).await, [0, 1, 2, 0, 1, 2, 0]);
    // flint.task.instanceReuse=1: a fresh instance for every task.
    let one = reusing(job(chaos, JobId(2), 3, false, &small), 1);
    assert_eq!(e.residues(&one).await, [0, 0, 0]);
    // A task that grew its instance past what an idle slot keeps resident (32 MiB)
    // gives that memory back: the next task starts fresh.
    let large = job(chaos, JobId(3), 3, false, &[("mode", "residue"), ("bytes", "41943040")]);
    assert_eq!(e.residues(&large).await, [0, 0, 0]);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_instance_is_dropped_after_a_failure_and_never_shared_between_jobs() {
    let mut e = one_slot_executor();
    let chaos = e.digests["chaos"];
    let conf = [("mode", "fail"), ("only_task", "1"), ("other_mode", "residue"), ("bytes", "4096")];
    let first = job(chaos, JobId(1), 4, false, &conf);
    for index in 0..4 {
        e.launch(&first, index);
    }
    let mut reports = Vec::new();
    for _ in 0..4 {
        reports.push(e.report().await);
    }
    assert!(matches!(reports[1].state, TaskState::Failed(TaskFailure::Guest { .. })), "{:?}", reports[1]);
    let runs: Vec<u32> = [0, 2, 3].iter().map(|&i| runs_before(&reports[i])).collect();
    assert_eq!(runs, [0, 0, 1], "task 2 starts in a fresh instance after task 1 failed in the first");
    // The same component in another job: an instance of its own.
    let second = job(chaos, JobId(2), 1, false, &[("mode", "residue"), ("bytes", "4096")]);
    assert_eq!(e.residues(&second).await, [0]);
    assert_eq!(e.core.idle_instances(), 1, "one slot: the first job's instance made room");
    e.core.job_ended(JobId(2));
    assert_eq!(e.core.idle_instances(), 0, "a job's instances go when it ends");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slot_combines_its_tasks_into_one_value_handed_over_when_collected() {
    let mut e = one_slot_executor();
    let job = job(e.digests["tally"], JobId(1), 4, true, &[]);
    for index in 0..4 {
        e.launch(&job, index);
    }
    for _ in 0..4 {
        let update = e.report().await;
        assert_eq!(update.state, TaskState::Succeeded(TaskOutput::Combined), "{update:?}");
    }
    e.no_partial().await;
    e.core.collect(JobId(1));
    let partial = e.partial().await;
    let mut tasks = partial.tasks.clone();
    tasks.sort_unstable();
    assert_eq!(tasks, vec![0, 1, 2, 3]);
    assert_eq!(tally(&partial), (10, 4), "1 + 2 + 3 + 4 from one instance");
    // Collected once: nothing is left to hand over.
    e.core.collect(JobId(1));
    e.no_partial().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_add_that_traps_hands_over_the_tasks_its_instance_held_as_lost() {
    let mut e = one_slot_executor();
    let job = job(e.digests["tally"], JobId(1), 4, true, &[("trap_task", "2")]);
    for index in 0..4 {
        e.launch(&job, index);
    }
    let mut states = Vec::new();
    for _ in 0..4 {
        let update = e.report().await;
        states.push((update.attempt.index, update.state));
    }
    assert!(matches!(&states[2], (2, TaskState::Failed(TaskFailure::Trap { .. }))), "{states:?}");
    let lost = e.partial().await;
    assert_eq!(lost.tasks, vec![0, 1], "what the trapped instance held");
    assert!(lost.output.as_ref().is_err_and(|e| e.contains("job 1 task 2 attempt 0")), "{lost:?}");
    // Task 3 went to a new instance.
    e.core.collect(JobId(1));
    let partial = e.partial().await;
    assert_eq!((partial.tasks.clone(), tally(&partial)), (vec![3], (4, 1)));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_of_another_job_takes_the_room_of_an_idle_combining_instance() {
    let mut e = one_slot_executor();
    let combining = job(e.digests["tally"], JobId(1), 2, true, &[]);
    let other = job(e.digests["noop"], JobId(2), 1, false, &[]);
    e.launch(&combining, 0);
    e.launch(&combining, 1);
    e.report().await;
    e.report().await;
    e.no_partial().await;
    // One slot: the idle instance hands its value over before the other job's task runs.
    e.launch(&other, 0);
    let update = e.report().await;
    assert!(matches!(update.state, TaskState::Succeeded(TaskOutput::Inline(_))), "{update:?}");
    let partial = e.partial().await;
    assert_eq!(tally(&partial), (3, 2));
    // A job that ended drops what is idle for it, unhanded.
    e.launch(&combining, 1);
    e.report().await;
    e.core.job_ended(JobId(1));
    e.core.collect(JobId(1));
    e.no_partial().await;
}
