//! The status store built from events, step by step.

use super::*;
use flint_proto::ExecutorState;

fn at(at_ms: u64, event: AppEvent) -> Envelope {
    Envelope { v: EVENT_LOG_VERSION, at_ms, event }
}

/// An executor's record, registered or (with a reason) removed.
pub(crate) fn executor(id: &str, removed: Option<&str>) -> ExecutorStatus {
    ExecutorStatus {
        id: id.into(),
        host: "h".into(),
        cores: 1,
        memory: 1,
        slots: 1,
        running: 0,
        tasks_done: 0,
        tasks_failed: 0,
        last_heartbeat_ms: None,
        excluded: false,
        removed: removed.map(Into::into),
        backend: "static".into(),
        pod: None,
        state: if removed.is_some() { ExecutorState::Removed } else { ExecutorState::Registered },
        added_ms: None,
        removed_ms: None,
        input_bytes: 0,
        shuffle_write_bytes: 0,
    }
}

#[test]
fn a_cancelled_job_ends_cancelled_and_an_older_log_without_the_field_reads_failed() {
    let mut store = Store::new(10);
    for job in [1, 2] {
        store.apply(&at(job, AppEvent::JobStart { job: JobId(job), name: "j".into(), tasks: 1 }));
    }
    let end = |job, cancelled| AppEvent::JobEnd {
        job: JobId(job),
        succeeded: false,
        cancelled,
        error: Some("cancelled on request".into()),
        attempts: 1,
        progress: None,
        stages: Vec::new(),
    };
    store.apply(&at(3, end(1, true)));
    // A line written before `cancelled` was: the same, without the field.
    let mut line = serde_json::to_value(at(4, end(2, true))).unwrap();
    assert_eq!(line.as_object_mut().unwrap().remove("cancelled"), Some(serde_json::Value::Bool(true)));
    store.apply(&serde_json::from_value(line).unwrap());
    assert_eq!(store.job(JobId(1)).unwrap().status.state, JobState::Cancelled);
    assert_eq!(store.job(JobId(2)).unwrap().status.state, JobState::Failed);
}

#[test]
fn a_retried_task_shows_its_last_attempt_and_keeps_every_failure() {
    let mut store = Store::new(10);
    store.apply(&at(1, AppEvent::JobStart { job: JobId(1), name: "j".into(), tasks: 2 }));
    let start = |index, attempt, executor: &str| AppEvent::TaskStart {
        job: JobId(1),
        index,
        attempt,
        executor: executor.into(),
        timeline: None,
    };
    let end = |index, attempt, executor: &str, failure| AppEvent::TaskEnd {
        job: JobId(1),
        index,
        attempt,
        executor: executor.into(),
        duration_ms: 5,
        failure,
        log_tail: Some("said something".into()),
        metrics: TaskMetrics {
            input_bytes: 10,
            input_records: 2,
            read_us: 1000,
            compile_us: 0,
            shuffle_write_bytes: 0,
        },
    };
    store.apply(&at(2, start(0, 0, "a")));
    store.apply(&at(2, start(1, 0, "b")));
    let trap = TaskFailure::Trap { message: "boom".into(), backtrace: Some("0: f".into()) };
    store.apply(&at(3, end(0, 0, "a", Some(trap.clone()))));
    store.apply(&at(4, start(0, 1, "b")));
    assert_eq!(store.job(JobId(1)).unwrap().status.progress.running, 2);
    store.apply(&at(5, end(0, 1, "b", None)));
    store.apply(&at(6, end(1, 0, "b", None)));
    store.apply(&at(
        7,
        AppEvent::JobEnd {
            job: JobId(1),
            succeeded: true,
            cancelled: false,
            error: None,
            attempts: 3,
            progress: None,
            stages: Vec::new(),
        },
    ));
    let job = store.job(JobId(1)).unwrap();
    let tasks = job.launched();
    assert_eq!(
        (tasks[0].attempt, tasks[0].state.as_str(), tasks[0].executor.as_str()),
        (1, "succeeded", "b")
    );
    assert_eq!(job.failures.len(), 1);
    assert_eq!(job.failures[0].failure, trap);
    let p = job.status.progress;
    assert_eq!((p.total, p.done, p.running, p.failed_attempts), (2, 2, 0, 1));
    assert_eq!(job.status.state, JobState::Succeeded);
    assert_eq!((job.status.started_ms, job.status.ended_ms), (Some(1), Some(7)));
    assert_eq!((tasks[0].launched_ms, tasks[0].ended_ms, tasks[0].metrics.input_records), (4, Some(5), 2));
    // Every attempt, for the timeline: task 0's failed first and its retry.
    let spans: Vec<_> = job
        .attempts
        .values()
        .map(|a| (a.index, a.attempt, a.executor.as_str(), a.state.as_str(), a.launched_ms, a.ended_ms))
        .collect();
    assert_eq!(
        spans,
        [
            (0, 0, "a", "failed", 2, Some(3)),
            (0, 1, "b", "succeeded", 4, Some(5)),
            (1, 0, "b", "succeeded", 2, Some(6))
        ]
    );
}

#[test]
fn a_done_task_whose_output_was_lost_is_not_done_until_it_runs_again() {
    let mut store = Store::new(10);
    store.apply(&at(1, AppEvent::JobStart { job: JobId(1), name: "j".into(), tasks: 1 }));
    let start = |attempt| AppEvent::TaskStart {
        job: JobId(1),
        index: 0,
        attempt,
        executor: "a".into(),
        timeline: None,
    };
    let end = |attempt| AppEvent::TaskEnd {
        job: JobId(1),
        index: 0,
        attempt,
        executor: "a".into(),
        duration_ms: 5,
        failure: None,
        log_tail: None,
        metrics: TaskMetrics::default(),
    };
    store.apply(&at(2, start(0)));
    store.apply(&at(3, end(0)));
    store.apply(&at(4, AppEvent::TaskLost { job: JobId(1), index: 0 }));
    let job = store.job(JobId(1)).unwrap();
    assert_eq!((job.status.progress.done, job.launched()[0].state.as_str()), (0, "lost"));
    store.apply(&at(5, start(1)));
    store.apply(&at(6, end(1)));
    let job = store.job(JobId(1)).unwrap();
    assert_eq!((job.status.progress.done, job.launched()[0].state.as_str()), (1, "succeeded"));
    assert_eq!(job.launched()[0].attempt, 1);
}

#[test]
fn a_removed_executors_running_attempts_show_as_lost() {
    let mut store = Store::new(10);
    store.apply(&at(1, AppEvent::JobStart { job: JobId(1), name: "j".into(), tasks: 1 }));
    store.apply(&at(
        2,
        AppEvent::TaskStart { job: JobId(1), index: 0, attempt: 0, executor: "a".into(), timeline: None },
    ));
    let gone = executor("a", Some("no heartbeat"));
    store.apply(&at(3, AppEvent::ExecutorRemoved { executor: gone }));
    let task = &store.job(JobId(1)).unwrap().launched()[0];
    assert_eq!(task.state, AttemptState::Failed);
    assert!(
        matches!(&task.failure, Some(TaskFailure::ExecutorLost { reason, .. }) if reason == "no heartbeat")
    );
    assert_eq!(store.status().executors[0].state, ExecutorState::Removed);
}

#[test]
fn an_executor_that_came_back_outlives_the_eviction_of_its_old_removal() {
    let mut store = Store::new(10);
    store.apply(&at(1, AppEvent::ExecutorRemoved { executor: executor("a", Some("gone")) }));
    store.apply(&at(2, AppEvent::ExecutorAdded { executor: executor("a", None) }));
    for n in 0..REMOVED_KEPT {
        store.apply(&at(3, AppEvent::ExecutorRemoved { executor: executor(&format!("x{n}"), Some("gone")) }));
    }
    let a = store.status().executors.into_iter().find(|e| e.id == "a");
    assert_eq!(a.map(|e| e.state), Some(ExecutorState::Registered));
}

#[test]
fn finished_jobs_beyond_the_retained_number_are_dropped_oldest_first() {
    let mut store = Store::new(2);
    for job in 1..=3 {
        store.apply(&at(job, AppEvent::JobStart { job: JobId(job), name: "j".into(), tasks: 0 }));
        store.apply(&at(
            job,
            AppEvent::JobEnd {
                job: JobId(job),
                succeeded: true,
                cancelled: false,
                error: None,
                attempts: 0,
                progress: None,
                stages: Vec::new(),
            },
        ));
    }
    assert_eq!(store.status().jobs.iter().map(|j| j.job).collect::<Vec<_>>(), [JobId(2), JobId(3)]);
}

#[test]
fn old_finished_jobs_let_their_task_records_go_past_the_budget() {
    let mut store = Store::new(100);
    let per_job = RETAINED_TASKS as u32 / 2 + 1;
    for job in 1..=3 {
        store.apply(&at(job, AppEvent::JobStart { job: JobId(job), name: "j".into(), tasks: per_job }));
        for index in 0..per_job {
            let executor = "a".to_owned();
            store.apply(&at(
                job,
                AppEvent::TaskStart {
                    job: JobId(job),
                    index,
                    attempt: 0,
                    executor: executor.into(),
                    timeline: None,
                },
            ));
        }
        // A hostile or stale event naming a task past the job's end is ignored.
        store.apply(&at(
            job,
            AppEvent::TaskStart {
                job: JobId(job),
                index: per_job,
                attempt: 0,
                executor: "a".into(),
                timeline: None,
            },
        ));
        store.apply(&at(
            job,
            AppEvent::JobEnd {
                job: JobId(job),
                succeeded: false,
                cancelled: false,
                error: None,
                attempts: per_job,
                progress: None,
                stages: Vec::new(),
            },
        ));
    }
    let kept: Vec<usize> = (1..=3).map(|j| store.job(JobId(j)).unwrap().tasks.len()).collect();
    assert_eq!(kept, [0, 0, per_job as usize], "only the newest fits");
    assert!(store.job(JobId(1)).unwrap().tasks_forgotten && !store.job(JobId(3)).unwrap().tasks_forgotten);
    assert_eq!(store.status().jobs.len(), 3, "their summaries stay");
}

#[test]
fn a_line_reads_back_and_a_newer_version_is_refused_by_name() {
    let line =
        serde_json::to_string(&at(9, AppEvent::TokenRenewed { service: "s3".into(), expires_at_ms: 10 }))
            .unwrap();
    assert!(line.contains("\"event\":\"token_renewed\""), "{line}");
    assert_eq!(Envelope::parse(&line).unwrap().at_ms, 9);
    let newer = line.replace("\"v\":1", "\"v\":2");
    assert!(matches!(Envelope::parse(&newer), Err(LineError::Version(2))));
}

#[test]
fn a_job_of_many_tasks_keeps_its_slowest_records_and_counts_the_rest() {
    let mut store = Store::new(10);
    let tasks = 100_000u32;
    store.apply(&at(1, AppEvent::JobStart { job: JobId(1), name: "j".into(), tasks }));
    let end = |index: u32, attempt, duration_ms| AppEvent::TaskEnd {
        job: JobId(1),
        index,
        attempt,
        executor: "a".into(),
        duration_ms,
        failure: None,
        log_tail: None,
        metrics: TaskMetrics::default(),
    };
    for index in 0..tasks {
        store.apply(&at(
            2,
            AppEvent::TaskStart { job: JobId(1), index, attempt: 0, executor: "a".into(), timeline: None },
        ));
        // Task 7 runs longest of all; the others 1 to 100 ms.
        let duration = if index == 7 { 10_000 } else { u64::from(index % 100) + 1 };
        store.apply(&at(3, end(index, 0, duration)));
    }
    let entry = store.job(JobId(1)).unwrap();
    assert_eq!(entry.status.progress.done, tasks);
    assert_eq!(entry.tasks.len(), SUCCEEDED_KEPT);
    assert_eq!(entry.tasks_not_kept.len() as usize + entry.tasks.len(), tasks as usize);
    assert!(entry.tasks.contains_key(&7), "the slowest is kept");
    assert!(entry.tasks.values().all(|t| t.duration_ms >= Some(100)), "the kept are the slowest");
    let sketch = &entry.succeeded.sketches[0];
    assert_eq!((sketch.count(), sketch.quantile(0.0), sketch.quantile(1.0)), (100_000, 1, 10_000));
    assert!(sketch.quantile(0.5).abs_diff(50) <= 1, "{}", sketch.quantile(0.5));
    // A late report of a task whose record went changes nothing; its loss is counted.
    let not_kept = entry.tasks_not_kept.min().unwrap();
    store.apply(&at(4, end(not_kept, 1, 5)));
    assert_eq!(store.job(JobId(1)).unwrap().status.progress.done, tasks);
    store.apply(&at(5, AppEvent::TaskLost { job: JobId(1), index: not_kept }));
    let progress = &store.job(JobId(1)).unwrap().status.progress;
    assert_eq!((progress.done, progress.outputs_lost), (tasks - 1, 1));
    // A log that starts a task it counted done, then counts every task done again in a
    // batch (crafted, or torn): the task runs and is not done; no count passes the job.
    let other = store.job(JobId(1)).unwrap().tasks_not_kept.max().unwrap();
    store.apply(&at(
        6,
        AppEvent::TaskStart { job: JobId(1), index: other, attempt: 1, executor: "a".into(), timeline: None },
    ));
    assert_eq!(store.job(JobId(1)).unwrap().status.progress.done, tasks - 2);
    let batch = AppEvent::TasksSucceeded {
        job: JobId(1),
        tasks: vec![(0, u32::MAX), (5, 2)],
        executors: Vec::new(),
        summary: Vec::new(),
        slowest: Vec::new(),
        // Spans naming an executor the batch does not list, or a task past the job.
        spans: vec![(1, 0, 3, 0, 1), (u32::MAX, 0, 0, 0, 1)],
        spans_not_kept: 1,
        // Bytes for executors it does not list.
        bytes: vec![(1, 2), (3, 4)],
    };
    store.apply(&at(7, batch));
    let entry = store.job(JobId(1)).unwrap();
    assert_eq!(entry.status.progress.done, tasks - 1, "all but the running one");
    assert_eq!(entry.tasks[&other].state, AttemptState::Running);
}
