//! The driver with scripted executors, in the manner of Ballista's virtual task
//! launcher: executors that never answer, answer twice, report attempts they were never
//! given or indices out of range, hold a result block they never send, and old
//! incarnations that report after their id was taken again. The job is the real `noop`
//! component (it sums task outputs), so the answer says whether any output was lost or
//! counted twice: each scripted task answers its index + 1. Combining executors (the
//! real `pi` component, whose merge is commutative) hold outputs until the driver asks
//! for them, deliver partial results that name tasks they do not hold, or go before
//! they deliver. A reduce attempt of an executor taken for lost writes its part and
//! reports after its retry was committed (the real `draws` component).

use flint_driver::{
    Blocks, ChannelLink, Driver, DriverConfig, ExecutorInfo, ExecutorLink, Fetch, Incarnation, JobRequest,
};
use flint_proto::{
    Attempt, BlockId, BlockRef, Conf, ExecutorCommand, ExecutorId, JobId, JobReport, JobState, Partial,
    StatusUpdate, TaskLaunch, TaskOutput, TaskState,
};
use flint_runtime::{Runtime, RuntimeConfig};
use std::future::pending;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

fn example(name: &str) -> Vec<u8> {
    let path = format!("{}/../../target/wasm32-wasip2/release/{name}.wasm", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e} (run `make build` first)"))
}

fn noop() -> Vec<u8> {
    example("noop")
}

fn driver(timeout: &str) -> Driver {
    driver_with(&[("flint.network.timeout", timeout)])
}

/// A driver with heartbeats every 50 ms and `conf`.
fn driver_with(conf: &[(&str, &str)]) -> Driver {
    let conf: Conf = [("flint.executor.heartbeatInterval", "50ms")]
        .iter()
        .chain(conf)
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let runtime = Runtime::new(RuntimeConfig {
        slots: 2,
        instance_memory: 64 << 20,
        cache_dir: None,
        max_log_size: 1 << 16,
        pooling: false,
        component_cache: 64 << 20,
    })
    .unwrap();
    Driver::start(DriverConfig {
        app_id: "scripted".into(),
        conf,
        runtime: Arc::new(runtime),
        event_log: None,
    })
}

/// Blocks that never arrive.
struct Hoarded;

impl Blocks for Hoarded {
    fn fetch(&self, _: BlockRef) -> Fetch {
        Box::pin(pending())
    }

    fn close(&self, _: &str) {}
}

/// Blocks that arrive as these bytes, whatever was asked for.
struct Serves(Vec<u8>);

impl Blocks for Serves {
    fn fetch(&self, _: BlockRef) -> Fetch {
        let bytes = self.0.clone();
        Box::pin(async move { Ok(bytes) })
    }

    fn close(&self, _: &str) {}
}

/// A scripted executor: the test sees its commands and speaks for it.
struct Scripted {
    id: ExecutorId,
    incarnation: Incarnation,
    commands: mpsc::UnboundedReceiver<ExecutorCommand>,
}

async fn join(driver: &Driver, name: &str, slots: u32, heartbeat: bool) -> Scripted {
    join_serving(driver, name, slots, heartbeat, Hoarded).await
}

async fn join_serving(
    driver: &Driver,
    name: &str,
    slots: u32,
    heartbeat: bool,
    blocks: impl Blocks + 'static,
) -> Scripted {
    let (id, incarnation) = driver.reserve_executor_id(Some(name.into()), None).await.unwrap();
    let (tx, commands) = mpsc::unbounded_channel();
    let link: Arc<dyn ExecutorLink> = Arc::new(ChannelLink::new(tx, blocks));
    let info = ExecutorInfo { host: "scripted".into(), cores: slots, memory: 1 << 30, slots };
    driver.executor_up(id.clone(), incarnation, info, link).await;
    if heartbeat {
        beat(driver, &id, incarnation);
    }
    Scripted { id, incarnation, commands }
}

/// Heartbeats for `id`'s life `incarnation` every 50 ms, from now on.
fn beat(driver: &Driver, id: &ExecutorId, incarnation: Incarnation) {
    let (driver, id) = (driver.clone(), id.clone());
    tokio::spawn(async move {
        loop {
            driver.heartbeat(id.clone(), incarnation, Vec::new()).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}

impl Scripted {
    /// The next batch of launches (kills and job ends are skipped).
    async fn launches(&mut self) -> Vec<TaskLaunch> {
        loop {
            let next = tokio::time::timeout(Duration::from_secs(10), self.commands.recv()).await;
            match next.expect("a launch within 10 s").expect("the link is open") {
                ExecutorCommand::Launch(batch) => return batch,
                _ => continue,
            }
        }
    }

    fn report(&self, driver: &Driver, attempt: Attempt, output: TaskOutput) {
        let update = StatusUpdate {
            executor: self.id.clone(),
            attempt,
            state: TaskState::Succeeded(output),
            log: String::new(),
            elapsed: Duration::from_millis(1),
            metrics: Default::default(),
            asked: Vec::new(),
        };
        driver.status(self.incarnation, update);
    }

    /// The next command that is not a launch, kill or token push: the driver asking
    /// for partial results, or a job's end.
    async fn next_word(&mut self) -> ExecutorCommand {
        loop {
            let next = tokio::time::timeout(Duration::from_secs(10), self.commands.recv()).await;
            match next.expect("a command within 10 s").expect("the link is open") {
                ExecutorCommand::Launch(_) | ExecutorCommand::Kill(_) | ExecutorCommand::Tokens(_) => {
                    continue;
                }
                other => return other,
            }
        }
    }

    fn hand_over(&self, driver: &Driver, job: JobId, tasks: Vec<u32>, inside: u64, total: u64) {
        let output = Ok(TaskOutput::Inline(postcard::to_allocvec(&(inside, total)).unwrap()));
        driver.local_partial(self.id.clone(), self.incarnation, Partial { job, tasks, output });
    }

    /// Answers a pi attempt with its own output: 10 points, index + 1 inside.
    fn answer_pi(&self, driver: &Driver, attempt: Attempt) {
        let output = postcard::to_allocvec(&(u64::from(attempt.index) + 1, 10u64)).unwrap();
        self.report(driver, attempt, TaskOutput::Inline(output));
    }

    /// Answers `attempt` as an honest executor would.
    fn answer(&self, driver: &Driver, attempt: Attempt) {
        self.report(driver, attempt, TaskOutput::Inline(noop_output(u64::from(attempt.index) + 1)));
    }
}

async fn submit(driver: &Driver, tasks: u32) -> tokio::sync::oneshot::Receiver<JobReport> {
    let request = JobRequest {
        name: "noop".into(),
        component: noop(),
        partitions: Some(tasks),
        ..JobRequest::default()
    };
    driver.submit(request).await.unwrap().report
}

fn answer_of(report: &JobReport) -> u64 {
    let bytes = report.outcome.as_ref().unwrap_or_else(|e| panic!("the job failed: {e}"));
    String::from_utf8_lossy(bytes).parse().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn lies_and_second_answers_change_nothing() {
    let driver = driver("30s");
    let mut liar = join(&driver, "liar", 1, true).await;
    let mut report = submit(&driver, 6).await;
    let mut answered = 0;
    while answered < 6 {
        for launch in liar.launches().await {
            answered += 1;
            let a = launch.attempt;
            // An index out of range, an attempt never given, another job: all dropped.
            let lies = [
                Attempt { index: u32::MAX, ..a },
                Attempt { number: a.number + 7, ..a },
                Attempt { job: JobId(a.job.0 + 100), ..a },
            ];
            for lie in lies {
                liar.report(&driver, lie, TaskOutput::Inline(noop_output(1000)));
            }
            // The true answer, twice.
            liar.answer(&driver, a);
            liar.answer(&driver, a);
        }
    }
    let report = tokio::time::timeout(Duration::from_secs(10), &mut report).await.unwrap().unwrap();
    assert_eq!(answer_of(&report), 21, "1 + 2 + … + 6, each once");
    assert_eq!(report.attempts, 6);
    let status = driver.snapshot().await;
    assert_eq!(status.executors[0].tasks_done, 6, "{status:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_silent_executor_and_an_old_incarnation_cost_nothing_but_time() {
    let driver = driver("1s");
    // The mute one never answers and never heartbeats: it is removed after 1 s.
    let mut mute = join(&driver, "mute", 2, false).await;
    let mut report = submit(&driver, 4).await;
    assert_eq!(mute.launches().await.len(), 2);
    // "mute" comes back under a new incarnation once the old one has expired.
    let mut reborn = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (tx, commands) = mpsc::unbounded_channel();
        if let Ok((id, incarnation)) = driver.reserve_executor_id(Some("mute".into()), None).await {
            let info = ExecutorInfo { host: "scripted".into(), cores: 2, memory: 1 << 30, slots: 2 };
            driver.executor_up(id.clone(), incarnation, info, Arc::new(ChannelLink::new(tx, Hoarded))).await;
            // The new life is heard from: only the old one is silent (a loaded machine
            // must not see it expire too).
            beat(&driver, &id, incarnation);
            break Scripted { id, incarnation, commands };
        }
    };
    assert_ne!(reborn.incarnation, mute.incarnation);
    // Its old life's connection closes at last: the new life stays.
    driver.executor_lost("mute".into(), mute.incarnation, "old connection closed".into()).await;

    let mut done = 0;
    while done < 4 {
        for launch in reborn.launches().await {
            // The old incarnation claims the new life's very attempt, with a wrong output.
            mute.report(&driver, launch.attempt, TaskOutput::Inline(noop_output(1000)));
            reborn.answer(&driver, launch.attempt);
            done += 1;
        }
    }
    let report = tokio::time::timeout(Duration::from_secs(10), &mut report).await.unwrap().unwrap();
    assert_eq!(answer_of(&report), 10, "1 + 2 + 3 + 4, each once, none from the old life");
    let status = driver.snapshot().await;
    let now = status.executors.iter().find(|e| e.id == "mute").unwrap();
    assert!(now.removed.is_none(), "the old life's loss removed the new one: {status:?}");
    assert_eq!(now.tasks_done, 4, "{status:?}");
    // The finished job is listed from the status store, with the counts the driver kept.
    let job = status.jobs.iter().find(|j| j.job == report.job).expect("the finished job is listed");
    assert_eq!((job.state, job.progress.done, job.progress.total), (JobState::Succeeded, 4, 4), "{status:?}");
    assert_eq!(status.executors.iter().filter(|e| e.id == "mute").count(), 1, "one entry per id: {status:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_result_block_that_never_comes_is_made_again_elsewhere() {
    let driver = driver("1s");
    let mut hoarder = join(&driver, "hoarder", 1, true).await;
    let mut report = submit(&driver, 1).await;
    let launch = hoarder.launches().await.remove(0);
    let bytes = noop_output(1);
    let block = BlockRef::of(BlockId::Output(launch.attempt), &bytes);
    hoarder.report(&driver, launch.attempt, TaskOutput::Block(block));
    // The fetch gives up after flint.network.timeout; the task runs again (here, on the
    // same executor, the only one), and this time the answer comes inline.
    let again = hoarder.launches().await.remove(0);
    assert_eq!(again.attempt.index, 0);
    assert_eq!(again.attempt.number, 1);
    hoarder.answer(&driver, again.attempt);
    let report = tokio::time::timeout(Duration::from_secs(10), &mut report).await.unwrap().unwrap();
    assert_eq!(answer_of(&report), 1);
    assert!(
        report.failures.iter().any(|f| f.failure.to_string().contains("flint.network.timeout")),
        "{report:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_result_block_that_arrives_changed_is_refused_and_its_task_runs_again() {
    let driver = driver("30s");
    let bytes = noop_output(1);
    let mut changed = bytes.clone();
    changed[0] ^= 1;
    let mut liar = join_serving(&driver, "liar", 1, true, Serves(changed)).await;
    let mut report = submit(&driver, 1).await;
    let launch = liar.launches().await.remove(0);
    let block = BlockRef::of(BlockId::Output(launch.attempt), &bytes);
    liar.report(&driver, launch.attempt, TaskOutput::Block(block));
    let again = liar.launches().await.remove(0);
    assert_eq!((again.attempt.index, again.attempt.number), (0, 1));
    liar.answer(&driver, again.attempt);
    let report = tokio::time::timeout(Duration::from_secs(10), &mut report).await.unwrap().unwrap();
    assert_eq!(answer_of(&report), 1, "the changed bytes never reach the result");
    assert!(
        report.failures.iter().any(|f| f.failure.to_string().contains("does not match its reference")),
        "{report:?}"
    );
}

/// A task output of the no-op job (a count), encoded as its guest encodes it.
fn noop_output(n: u64) -> Vec<u8> {
    postcard::to_allocvec(&n).unwrap()
}

/// A pi job (its `Count` is `inside`, `total`, which postcard encodes as a pair).
async fn submit_pi(driver: &Driver, tasks: u32) -> tokio::sync::oneshot::Receiver<JobReport> {
    let request = JobRequest {
        name: "pi".into(),
        component: example("pi"),
        partitions: Some(tasks),
        ..JobRequest::default()
    };
    driver.submit(request).await.unwrap().report
}

/// The `inside` and `total` of a finished pi job.
fn pi_counts(report: &JobReport) -> (u64, u64) {
    let bytes = report.outcome.as_ref().unwrap_or_else(|e| panic!("the job failed: {e}"));
    let value: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    (value["inside"].as_u64().unwrap(), value["total"].as_u64().unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn combined_outputs_are_asked_for_once_all_are_done_and_a_partial_that_lies_is_refused() {
    let driver = driver("30s");
    let mut a = join(&driver, "a", 1, true).await;
    let mut b = join(&driver, "b", 1, true).await;
    let mut report = submit_pi(&driver, 6).await;
    // Each task "counts" 10 points of which its index + 1 are inside.
    let (mut held_a, mut held_b) = (Vec::new(), Vec::new());
    while held_a.len() + held_b.len() < 6 {
        tokio::select! {
            batch = a.launches() => for launch in batch {
                a.report(&driver, launch.attempt, TaskOutput::Combined);
                held_a.push(launch.attempt.index);
            },
            batch = b.launches() => for launch in batch {
                b.report(&driver, launch.attempt, TaskOutput::Combined);
                held_b.push(launch.attempt.index);
            },
        }
    }
    assert!(!held_a.is_empty() && !held_b.is_empty(), "both ran tasks: {held_a:?} {held_b:?}");
    // Only now, with every task done, is each holder asked.
    let job = match a.next_word().await {
        ExecutorCommand::Collect(job) => job,
        other => panic!("expected a collect, got {other:?}"),
    };
    assert!(matches!(b.next_word().await, ExecutorCommand::Collect(j) if j == job));
    let sum = |tasks: &[u32]| tasks.iter().map(|i| u64::from(*i) + 1).sum::<u64>();
    // b claims one of a's tasks too: refused whole, so b's own tasks run again (and a's
    // is still a's).
    let mut lie = held_b.clone();
    lie.push(held_a[0]);
    b.hand_over(&driver, job, lie.clone(), sum(&lie), 10 * lie.len() as u64);
    a.hand_over(&driver, job, held_a.clone(), sum(&held_a), 10 * held_a.len() as u64);
    // The reruns go wherever there is room; each executor holding one is asked again.
    let (mut again_a, mut again_b) = (Vec::new(), Vec::new());
    while again_a.len() + again_b.len() < held_b.len() {
        tokio::select! {
            batch = a.launches() => for launch in batch {
                a.report(&driver, launch.attempt, TaskOutput::Combined);
                again_a.push(launch.attempt);
            },
            batch = b.launches() => for launch in batch {
                b.report(&driver, launch.attempt, TaskOutput::Combined);
                again_b.push(launch.attempt);
            },
        }
    }
    let mut rerun: Vec<u32> = again_a.iter().chain(&again_b).map(|a| a.index).collect();
    rerun.sort_unstable();
    held_b.sort_unstable();
    assert_eq!(rerun, held_b, "exactly b's tasks ran again");
    assert!(again_a.iter().chain(&again_b).all(|a| a.number > 0), "{again_a:?} {again_b:?}");
    for (executor, again) in [(&mut a, &again_a), (&mut b, &again_b)] {
        if again.is_empty() {
            continue;
        }
        assert!(matches!(executor.next_word().await, ExecutorCommand::Collect(j) if j == job));
        let tasks: Vec<u32> = again.iter().map(|a| a.index).collect();
        executor.hand_over(&driver, job, tasks.clone(), sum(&tasks), 10 * tasks.len() as u64);
    }
    let report = tokio::time::timeout(Duration::from_secs(10), &mut report).await.unwrap().unwrap();
    assert_eq!(pi_counts(&report), (21, 60), "1 + … + 6 inside of 6 × 10, each task once");
    assert_eq!(report.attempts, 6 + held_b.len() as u32);
}

#[tokio::test(flavor = "multi_thread")]
async fn outputs_held_by_an_executor_that_goes_before_it_delivers_are_made_again() {
    let driver = driver("30s");
    let mut a = join(&driver, "a", 2, true).await;
    let mut report = submit_pi(&driver, 2).await;
    let mut held = Vec::new();
    while held.len() < 2 {
        for launch in a.launches().await {
            a.report(&driver, launch.attempt, TaskOutput::Combined);
            held.push(launch.attempt.index);
        }
    }
    let job = match a.next_word().await {
        ExecutorCommand::Collect(job) => job,
        other => panic!("expected a collect, got {other:?}"),
    };
    // A second executor joins, then the first goes without handing anything over.
    let mut b = join(&driver, "b", 2, true).await;
    driver.executor_lost(a.id.clone(), a.incarnation, "connection closed".into()).await;
    let mut rerun = Vec::new();
    while rerun.len() < 2 {
        rerun.extend(b.launches().await);
    }
    // The reruns prove the loss was taken; a partial from the lost life now is not folded.
    a.hand_over(&driver, job, held.clone(), 1000, 1000);
    for launch in rerun {
        b.answer_pi(&driver, launch.attempt);
    }
    let report = tokio::time::timeout(Duration::from_secs(10), &mut report).await.unwrap().unwrap();
    assert_eq!(pi_counts(&report), (3, 20), "each task once, from b");
    assert!(report.failures.is_empty(), "a loss is not a task failure: {:?}", report.failures);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_combined_report_for_a_job_that_does_not_combine_fails_that_attempt_only() {
    let driver = driver("30s");
    let mut liar = join(&driver, "liar", 1, true).await;
    let mut report = submit(&driver, 2).await;
    let mut lied = false;
    let mut answered = 0;
    while answered < 2 {
        for launch in liar.launches().await {
            if !lied {
                lied = true;
                liar.report(&driver, launch.attempt, TaskOutput::Combined);
                continue;
            }
            liar.answer(&driver, launch.attempt);
            answered += 1;
        }
    }
    let report = tokio::time::timeout(Duration::from_secs(10), &mut report).await.unwrap().unwrap();
    assert_eq!(answer_of(&report), 3, "1 + 2, each once");
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    assert!(report.failures[0].failure.to_string().contains("does not combine"), "{:?}", report.failures);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_token_is_never_handed_to_an_executor() {
    let driver = driver("30s");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let token = |service: &str, expires_at_ms| flint_proto::Token {
        service: service.into(),
        secret: format!("{service}-secret"),
        expires_at_ms,
        job: None,
    };
    // As `--tokens-file` gives them: one already expired, one expiring in a moment.
    driver.set_tokens(vec![token("old", now - 1), token("soon", now + 300), token("far", now + 3_600_000)]);
    let services =
        |tokens: &[flint_proto::Token]| tokens.iter().map(|t| t.service.clone()).collect::<Vec<_>>();
    assert_eq!(services(&driver.tokens()), ["soon", "far"]);
    let mut executor = join(&driver, "e", 1, true).await;
    let pushed = loop {
        let next = tokio::time::timeout(Duration::from_secs(10), executor.commands.recv()).await;
        if let ExecutorCommand::Tokens(tokens) = next.expect("tokens within 10 s").expect("the link is open")
        {
            break tokens;
        }
    };
    assert_eq!(services(&pushed), ["soon", "far"], "pushed at registration");
    tokio::time::sleep(Duration::from_millis(400)).await;
    // The next push (the file changed, say) leaves out the one that expired meanwhile.
    driver.set_tokens(vec![token("old", now - 1), token("soon", now + 300), token("far", now + 3_600_000)]);
    let pushed = loop {
        let next = tokio::time::timeout(Duration::from_secs(10), executor.commands.recv()).await;
        if let ExecutorCommand::Tokens(tokens) = next.expect("tokens within 10 s").expect("the link is open")
        {
            break tokens;
        }
    };
    assert_eq!(services(&pushed), ["far"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reduce_attempt_that_reports_after_its_retry_was_committed_never_replaces_its_part() {
    let out = tempfile::tempdir().unwrap();
    let roots = out.path().to_str().unwrap().to_owned();
    let driver = driver_with(&[("flint.network.timeout", "30s"), ("flint.output.roots", &roots)]);
    let dir = out.path().join("parts");
    let request = JobRequest {
        name: "draws".into(),
        component: example("draws"),
        partitions: Some(1),
        reduce_partitions: Some(1),
        output: Some(dir.to_str().unwrap().to_owned()),
        ..JobRequest::default()
    };
    // One map, one reduce, first on "partitioned" alone.
    let mut gone = join(&driver, "partitioned", 1, true).await;
    let mut report = driver.submit(request).await.unwrap().report;
    let map = gone.launches().await.remove(0).attempt;
    let status = flint_proto::MapStatus { sizes: vec![0], digest: [0; 32], records: 0, inline: Vec::new() };
    gone.report(&driver, map, TaskOutput::Map(status.clone()));
    let late = gone.launches().await.remove(0).attempt;
    assert_eq!((late.index, late.number), (1, 0), "the reduce task's first attempt");
    // It writes its part (as an executor's `PartFile` does) and goes silent: the
    // driver takes it for lost, and its map and its reduce run on "fresh".
    let attempt_file = |number| dir.join(flint_proto::Parts::attempt_path(0, number));
    std::fs::write(attempt_file(0), "written by the attempt taken for lost\n").unwrap();
    let mut fresh = join(&driver, "fresh", 1, true).await;
    driver.executor_lost(gone.id.clone(), gone.incarnation, "its connection went silent".into()).await;
    let rerun = fresh.launches().await.remove(0).attempt;
    assert_eq!(rerun.index, 0, "the lost map first");
    fresh.report(&driver, rerun, TaskOutput::Map(status));
    let retry = fresh.launches().await.remove(0).attempt;
    assert_eq!((retry.index, retry.number), (1, 1));
    std::fs::write(attempt_file(1), "committed\n").unwrap();
    fresh.report(&driver, retry, TaskOutput::Inline(postcard::to_allocvec(&(7u64, 9u64)).unwrap()));
    let report = tokio::time::timeout(Duration::from_secs(10), &mut report).await.unwrap().unwrap();
    assert!(report.outcome.is_ok(), "{report:?}");
    assert_eq!(report.maps_rerun, 1, "{report:?}");
    // Now the first attempt finishes, late: its report changes nothing, and it has
    // nowhere left to write.
    let wrong = postcard::to_allocvec(&(1000u64, 1000u64)).unwrap();
    gone.report(&driver, late, TaskOutput::Inline(wrong));
    let written = std::fs::write(attempt_file(0), "written after the job ended\n");
    assert_eq!(written.unwrap_err().kind(), std::io::ErrorKind::NotFound, "its _temporary is gone");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["_SUCCESS", "part-00000"], "exactly one part and _SUCCESS");
    assert_eq!(std::fs::read_to_string(dir.join("part-00000")).unwrap(), "committed\n");
    let result: serde_json::Value = serde_json::from_slice(report.outcome.as_ref().unwrap()).unwrap();
    assert_eq!(result, serde_json::json!({"count": 7, "sum": 9}), "the retry's answer alone");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_planned_before_any_executor_is_split_for_the_fleet_its_backend_will_start() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("words.txt");
    std::fs::write(&input, "a few words\n".repeat(10_000)).unwrap();
    let roots = dir.path().to_str().unwrap().to_owned();
    let driver = driver_with(&[
        ("flint.input.roots", &roots),
        ("flint.executor.backend", "local"),
        ("flint.dynamicAllocation.enabled", "true"),
        ("flint.dynamicAllocation.maxExecutors", "3"),
        ("flint.executor.cores", "2"),
    ]);
    let request = JobRequest {
        name: "word-count".into(),
        component: example("word_count"),
        inputs: vec![input.to_str().unwrap().to_owned()],
        ..JobRequest::default()
    };
    let _report = driver.submit(request).await.unwrap().report;
    let status = driver.snapshot().await;
    // Not one task for the one file: one per slot of the three executors to come.
    assert_eq!(status.jobs[0].progress.total, 6, "{status:?}");
}
