//! A queued attempt over the network starts on bytes already here: while a one-slot
//! executor runs a spinning attempt, the first read of the split next in line is made
//! (and only that one's: one per slot), and the task that opens the split takes it
//! rather than asking again. The stand-in driver serves a `flint://` input and records
//! every read asked of it; the real `chaos` component reads its split whole ("read").

mod common;

use common::Served;
use flint_data::lines::FIRST_READ;
use flint_executor::ExecutorCore;
use flint_proto::{
    Attempt, JobDescriptor, PartitionSpec, Source, StatusUpdate, TaskFailure, TaskLaunch, TaskOutput,
    TaskState,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

const LINE: &[u8] = b"a line of some words\n";

/// A job whose task 0 spins and whose other tasks read their split and say how many
/// bytes they read.
fn job(digest: flint_proto::Digest) -> Arc<JobDescriptor> {
    common::job(digest, 4, &[("mode", "loop"), ("only_task", "0"), ("other_mode", "read")])
}

fn launch(
    core: &Arc<ExecutorCore>,
    job: &Arc<JobDescriptor>,
    index: u32,
    partition: PartitionSpec,
    reports: &mpsc::Sender<StatusUpdate>,
) -> Attempt {
    let attempt = Attempt { job: job.job, index, number: 0 };
    let reports = reports.clone();
    core.launch(TaskLaunch { attempt, job: job.clone(), partition }, move |u| {
        reports.try_send(u).expect("room for every report");
    });
    attempt
}

async fn report(rx: &mut mpsc::Receiver<StatusUpdate>) -> StatusUpdate {
    tokio::time::timeout(Duration::from_secs(20), rx.recv()).await.unwrap().unwrap()
}

/// The bytes a `read` task says it read: the number its output ends with.
fn read_by(update: &StatusUpdate) -> u64 {
    let TaskState::Succeeded(TaskOutput::Inline(bytes)) = &update.state else {
        panic!("task {}: {:?}", update.attempt.index, update.state);
    };
    let text = String::from_utf8_lossy(bytes);
    text.rsplit(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap_or_else(|_| panic!("{text}"))
}

/// The bytes of the lines of `text` that start in `start..end`: a split's.
fn lines_starting_in(text: &[u8], start: u64, end: u64) -> u64 {
    let starts = (0..text.len()).filter(|&i| i == 0 || text[i - 1] == b'\n');
    starts.filter(|&i| (start..end).contains(&(i as u64))).count() as u64 * LINE.len() as u64
}

#[tokio::test(flavor = "multi_thread")]
async fn the_split_next_in_line_has_its_first_read_made_while_the_slot_is_busy_and_never_twice() {
    let text = LINE.repeat((3 * FIRST_READ as usize) / LINE.len() + 5);
    let size = text.len() as u64;
    let served = Arc::new(Served { text: text.clone(), reads: Mutex::new(Vec::new()) });
    let (core, digests) = common::one_slot_executor_serving(&["chaos"], false, Some(served.clone()));
    let job = job(digests["chaos"]);
    let split =
        |start, end| PartitionSpec::Split { source: Source::Driver("/in.txt".into()), start, end, size };
    // Room for the four reports the test waits for.
    let (tx, mut rx) = mpsc::channel(4);

    // Warm: the component compiled and an instance kept, so the spinner starts at once.
    launch(&core, &job, 3, split(0, 100), &tx);
    assert_eq!(read_by(&report(&mut rx).await), lines_starting_in(&text, 0, 100));
    served.reads.lock().unwrap().clear();

    let half = size / 2;
    let spinning = launch(&core, &job, 0, PartitionSpec::Index(0), &tx);
    // The spinner holds the slot (its instance is warm) before the others come.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let killed = launch(&core, &job, 1, split(0, half), &tx);
    let read = launch(&core, &job, 2, split(half, size), &tx);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(core.running(), 3);
    assert_eq!(
        *served.reads.lock().unwrap(),
        [(0, FIRST_READ)],
        "the first read of the split next in line made while the slot spins, and only that one"
    );

    // Killed while it waits, its read begun: it never starts; the one behind it is next
    // in line and gets its first read begun, then runs on it.
    core.kill(&killed);
    core.kill(&spinning);
    let mut reports = [report(&mut rx).await, report(&mut rx).await, report(&mut rx).await];
    reports.sort_by_key(|u| u.attempt.index);
    assert!(matches!(reports[0].state, TaskState::Failed(TaskFailure::Killed { .. })), "{:?}", reports[0]);
    let TaskState::Failed(TaskFailure::Killed { reason }) = &reports[1].state else {
        panic!("the queued attempt was not killed: {:?}", reports[1].state)
    };
    assert!(!reports[1].log.contains("task 1 running"), "{reason}: it ran: {}", reports[1].log);
    assert_eq!(reports[2].attempt, read);
    assert_eq!(read_by(&reports[2]), lines_starting_in(&text, half, size), "the split's lines, each once");

    let reads = served.reads.lock().unwrap().clone();
    assert_eq!(reads[0], (0, FIRST_READ), "{reads:?}");
    let second: Vec<_> = reads[1..].to_vec();
    assert_eq!(second[0], (half - 1, FIRST_READ), "the next split's first read, from the byte before it");
    let mut once = second.clone();
    once.sort();
    once.dedup();
    assert_eq!(once.len(), second.len(), "no byte range asked twice: {second:?}");
    assert_eq!(second.iter().map(|(_, len)| len).sum::<u64>(), size - (half - 1), "{second:?}");
    assert_eq!(core.running(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deadline_past_the_clocks_range_fails_its_task_not_the_executor() {
    let text = LINE.repeat(100);
    let size = text.len() as u64;
    let served = Arc::new(Served { text: text.clone(), reads: Mutex::new(Vec::new()) });
    let (core, digests) = common::one_slot_executor_serving(&["chaos"], false, Some(served));
    let split = PartitionSpec::Split { source: Source::Driver("/in.txt".into()), start: 0, end: size, size };
    let endless = Arc::new(JobDescriptor { deadline: Duration::MAX, ..(*job(digests["chaos"])).clone() });
    let (tx, mut rx) = mpsc::channel(4);
    launch(&core, &endless, 1, split.clone(), &tx);
    let update = report(&mut rx).await;
    assert!(matches!(update.state, TaskState::Failed(_)), "{:?}", update.state);
    // The executor goes on: the same split under a sane deadline is read whole.
    launch(&core, &job(digests["chaos"]), 1, split, &tx);
    assert_eq!(read_by(&report(&mut rx).await), size);
}
