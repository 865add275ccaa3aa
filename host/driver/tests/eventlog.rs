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
    assert_eq!(states, [("a", "removed"), ("b", "registered")]);
    assert!(status.executors[0].removed.as_deref().unwrap().contains("heartbeat"));

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
}
