//! The driver with scripted executors, in the manner of Ballista's virtual task
//! launcher: executors that never answer, answer twice, report attempts they were never
//! given or indices out of range, hold a result block they never send, and old
//! incarnations that report after their id was taken again. The job is the real `noop`
//! component (it sums task outputs), so the answer says whether any output was lost or
//! counted twice: each scripted task answers its index + 1.

use flint_driver::{
    Blocks, ChannelLink, Driver, DriverConfig, ExecutorInfo, ExecutorLink, Fetch, Incarnation, JobRequest,
};
use flint_proto::{
    Attempt, BlockId, BlockRef, Conf, Digest, ExecutorCommand, JobReport, StatusUpdate, TaskLaunch,
    TaskOutput, TaskState,
};
use flint_runtime::{Runtime, RuntimeConfig};
use std::future::pending;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

fn noop() -> Vec<u8> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/wasm32-wasip2/release/noop.wasm");
    std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e} (run `make build` first)"))
}

fn driver(timeout: &str) -> Driver {
    let conf: Conf = [("flint.network.timeout", timeout), ("flint.executor.heartbeatInterval", "50ms")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
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

/// A scripted executor: the test sees its commands and speaks for it.
struct Scripted {
    id: String,
    incarnation: Incarnation,
    commands: mpsc::UnboundedReceiver<ExecutorCommand>,
}

async fn join(driver: &Driver, name: &str, slots: u32, heartbeat: bool) -> Scripted {
    let (id, incarnation) = driver.reserve_executor_id(Some(name.into()), None).await.unwrap();
    let (tx, commands) = mpsc::unbounded_channel();
    let link: Arc<dyn ExecutorLink> = Arc::new(ChannelLink::new(tx, Hoarded));
    let info = ExecutorInfo { host: "scripted".into(), cores: slots, memory: 1 << 30, slots };
    driver.executor_up(id.clone(), incarnation, info, link).await;
    if heartbeat {
        let (driver, id) = (driver.clone(), id.clone());
        tokio::spawn(async move {
            loop {
                driver.heartbeat(id.clone(), incarnation).await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
    }
    Scripted { id, incarnation, commands }
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
        };
        driver.status(self.incarnation, update);
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
                Attempt { job: a.job + 100, ..a },
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
}

#[tokio::test(flavor = "multi_thread")]
async fn a_result_block_that_never_comes_is_made_again_elsewhere() {
    let driver = driver("1s");
    let mut hoarder = join(&driver, "hoarder", 1, true).await;
    let mut report = submit(&driver, 1).await;
    let launch = hoarder.launches().await.remove(0);
    let bytes = noop_output(1);
    let block = BlockRef {
        id: BlockId::Output(launch.attempt),
        size: bytes.len() as u64,
        digest: Digest::of(&bytes),
    };
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

/// A task output of the no-op job (a count), encoded as its guest encodes it.
fn noop_output(n: u64) -> Vec<u8> {
    postcard::to_allocvec(&n).unwrap()
}
