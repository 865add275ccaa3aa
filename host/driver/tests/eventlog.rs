//! Event logs written by earlier versions stay readable: a log a version-1 driver wrote
//! (a chaos job whose task 1 panicked four times, an executor lost) reads back into the
//! same records.

use flint_driver::eventlog::{describe, read_app};
use flint_proto::{JobId, TaskFailure};
use std::path::Path;

#[test]
fn a_version_1_log_reads_back_into_the_same_records() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/eventlog-v1/smoke");
    let (store, skipped) = read_app(&folder, 1000).unwrap();
    assert_eq!(skipped, 0);
    let app = describe(&folder, &store);
    assert_eq!((app.app_id.as_str(), app.running), ("smoke", false));

    let status = store.status();
    let states: Vec<(&str, &str)> =
        status.executors.iter().map(|e| (e.id.as_str(), e.state.as_str())).collect();
    // b was still registered when the log closed: it ended with its application.
    assert_eq!(states, [("a", "removed"), ("b", "removed")]);
    assert!(status.executors[0].removed.as_deref().unwrap().contains("heartbeat"));
    assert_eq!(status.executors[1].removed.as_deref(), Some("the application ended"));
    // Its counts are the driver's last word on it, and a log of that version has times.
    assert!(status.executors[1].tasks_done >= 2, "{:?}", status.executors[1]);
    assert!(status.executors.iter().all(|e| e.added_ms.is_some() && e.removed_ms.is_some()));

    let job = store.job(JobId(1)).expect("job 1");
    assert_eq!((job.status.name.as_str(), job.status.state.as_str()), ("chaos", "failed"));
    assert_eq!((job.status.progress.total, job.status.progress.done), (3, 2));
    assert_eq!(job.failures.len(), 4, "task 1's four attempts");
    assert!(job.failures.iter().all(|f| f.task == 1));
    let TaskFailure::Trap { backtrace: Some(backtrace), .. } = &job.failures[0].failure else {
        panic!("{:?}", job.failures[0].failure)
    };
    assert!(backtrace.contains("chaos.wasm!"), "{backtrace}");
    assert!(job.failures[0].log_tail.contains("chaos asked to panic in task 1"));
    let task = job.tasks.get(&1).expect("task 1's record");
    assert_eq!((task.attempt, task.state.as_str()), (3, "failed"));
    // Every attempt, for the timeline, from a log written before it was drawn.
    assert_eq!(job.attempts.len(), 2 + 4);
    assert!(job.attempts.values().all(|a| a.ended_ms.is_some_and(|end| end >= a.launched_ms)));
}
