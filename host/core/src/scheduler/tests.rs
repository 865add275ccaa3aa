//! The scheduler stepped input by input, with no executors, threads or clocks.

use super::*;
use flint_proto::wire::Progress;
use std::time::{Duration, Instant};

pub(super) fn launches(out: &[Output]) -> Vec<(ExecutorId, u32, u32)> {
    out.iter()
        .flat_map(|o| match o {
            Output::Launch { executor, attempts } => {
                attempts.iter().map(|a| (executor.clone(), a.index, a.number)).collect()
            }
            _ => Vec::new(),
        })
        .collect()
}

/// Job `job` of `tasks` independent tasks, its inputs local.
pub(super) fn submitted(job: JobId, tasks: u32, max_failures: u32, speculate: bool) -> Input {
    Input::JobSubmitted { job, tasks, max_failures, speculate, remote_input: false }
}

/// A task time well past `SHORT_TASK`: no pipelining.
const SLOW: Duration = Duration::from_secs(1);

fn trap() -> TaskFailure {
    TaskFailure::Trap { message: "unreachable".into(), backtrace: None }
}

fn cluster(execs: &[(&str, u32)]) -> (Scheduler, Instant) {
    let now = Instant::now();
    let mut s = Scheduler::new(Policy::default());
    for (id, slots) in execs {
        assert!(s.handle(now, Input::ExecutorAdded { id: id.to_string().into(), slots: *slots }).is_empty());
    }
    (s, now)
}

fn ok(s: &mut Scheduler, now: Instant, exec: &str, index: u32, number: u32) -> Vec<Output> {
    s.handle(
        now,
        Input::TaskSucceeded {
            attempt: Attempt { job: JobId(1), index, number },
            executor: exec.into(),
            elapsed: SLOW,
        },
    )
}

#[test]
fn fills_free_slots_spread_over_executors_then_queues() {
    let (mut s, now) = cluster(&[("a", 2), ("b", 2)]);
    let out = s.handle(now, submitted(JobId(1), 6, 4, false));
    let l = launches(&out);
    assert_eq!(l.len(), 4, "{out:?}");
    assert_eq!(l.iter().filter(|(e, ..)| e == "a").count(), 2);
    assert_eq!(s.free_slots(), 0);
    // A finished task frees its slot for the next queued one.
    let out = ok(&mut s, now, &l[0].0, l[0].1, 0);
    assert_eq!(launches(&out), vec![(l[0].0.clone(), 4, 0)]);
}

#[test]
fn job_succeeds_when_every_task_has() {
    let (mut s, now) = cluster(&[("a", 2)]);
    s.handle(now, submitted(JobId(1), 2, 4, false));
    assert!(!ok(&mut s, now, "a", 0, 0).contains(&Output::JobSucceeded { job: JobId(1) }));
    assert!(ok(&mut s, now, "a", 1, 0).contains(&Output::JobSucceeded { job: JobId(1) }));
    assert_eq!(s.free_slots(), 2);
}

#[test]
fn empty_job_succeeds_at_once() {
    let (mut s, now) = cluster(&[("a", 1)]);
    let out = s.handle(now, submitted(JobId(1), 0, 4, false));
    assert_eq!(out, vec![Output::JobSucceeded { job: JobId(1) }]);
}

#[test]
fn failed_task_is_retried_on_another_executor() {
    let (mut s, now) = cluster(&[("a", 1), ("b", 1)]);
    let l = launches(&s.handle(now, submitted(JobId(1), 1, 4, false)));
    let first = l[0].0.clone();
    let other = if first == "a" { "b" } else { "a" };
    let out = s.handle(
        now,
        Input::TaskFailed {
            attempt: Attempt { job: JobId(1), index: 0, number: 0 },
            executor: first.clone(),
            failure: trap(),
        },
    );
    assert!(matches!(out[0], Output::Decided(Decided::Retrying { .. })), "{out:?}");
    assert_eq!(launches(&out), vec![(ExecutorId::from(other), 0, 1)]);
}

#[test]
fn retry_waits_for_a_clean_executor_rather_than_the_one_that_failed() {
    let (mut s, now) = cluster(&[("a", 1), ("b", 1)]);
    s.handle(now, submitted(JobId(1), 2, 4, false));
    // Task 0 on a (the tie-break picks the lower id first), task 1 on b.
    let out = s.handle(
        now,
        Input::TaskFailed {
            attempt: Attempt { job: JobId(1), index: 0, number: 0 },
            executor: "a".into(),
            failure: trap(),
        },
    );
    assert!(launches(&out).is_empty(), "a is free but task 0 failed there while b lives: {out:?}");
    assert_eq!(launches(&ok(&mut s, now, "b", 1, 0)), vec![(ExecutorId::from("b"), 0, 1)]);
}

#[test]
fn job_fails_after_max_failures_and_its_running_tasks_are_killed() {
    let (mut s, now) = cluster(&[("a", 2)]);
    s.handle(now, submitted(JobId(1), 2, 2, false));
    let fail = |s: &mut Scheduler, number| {
        s.handle(
            now,
            Input::TaskFailed {
                attempt: Attempt { job: JobId(1), index: 0, number },
                executor: "a".into(),
                failure: trap(),
            },
        )
    };
    let out = fail(&mut s, 0);
    assert_eq!(
        launches(&out),
        vec![(ExecutorId::from("a"), 0, 1)],
        "one executor: the retry goes back to it"
    );
    let out = fail(&mut s, 1);
    assert!(out.contains(&Output::Kill {
        executor: "a".into(),
        attempt: Attempt { job: JobId(1), index: 1, number: 0 }
    }));
    let failed = out.iter().find_map(|o| match o {
        Output::JobFailed { reason, .. } => Some(reason.clone()),
        _ => None,
    });
    let reason = failed.expect("job failed").to_string();
    assert!(reason.contains("task 0 failed 2 time(s)") && reason.contains("trap"), "{reason}");
    assert_eq!(s.free_slots(), 2);
}

#[test]
fn a_fatal_failure_fails_the_job_at_once() {
    let (mut s, now) = cluster(&[("a", 1)]);
    s.handle(now, submitted(JobId(1), 1, 4, false));
    let out = s.handle(
        now,
        Input::TaskFailed {
            attempt: Attempt { job: JobId(1), index: 0, number: 0 },
            executor: "a".into(),
            failure: TaskFailure::ResultTooLarge { size: 10, limit: 5 },
        },
    );
    assert!(matches!(out.last(), Some(Output::JobFailed { .. })), "{out:?}");
}

#[test]
fn a_task_that_keeps_losing_its_executors_fails_its_job_naming_the_losses() {
    let now = Instant::now();
    let policy = Policy { max_executor_losses: Some(3), ..Policy::default() };
    let mut s = Scheduler::new(policy);
    s.handle(now, Input::ExecutorAdded { id: "e0".into(), slots: 1 });
    s.handle(now, submitted(JobId(1), 1, 4, false));
    for n in 0..3 {
        // Each new executor takes the task; each is lost while it runs it.
        let next = ExecutorId::from(format!("e{}", n + 1));
        let out =
            s.handle(now, Input::ExecutorLost { id: format!("e{n}").into(), reason: format!("exit {n}") });
        if n < 2 {
            assert!(!out.iter().any(|o| matches!(o, Output::JobFailed { .. })), "{out:?}");
            let placed = launches(&s.handle(now, Input::ExecutorAdded { id: next.clone(), slots: 1 }));
            assert_eq!(placed, vec![(next, 0, n + 1)], "placed again after the loss");
        } else {
            let failed = out.iter().find_map(|o| match o {
                Output::JobFailed { reason, .. } => Some(reason.clone()),
                _ => None,
            });
            let reason = failed.expect("the third loss fails the job");
            assert!(
                matches!(&reason, JobError::ExecutorsLost { index: 0, losses: 3, last } if last == "exit 2")
            );
            assert!(reason.to_string().contains("flint.task.maxExecutorLosses"), "{reason}");
        }
    }
}

#[test]
fn losing_an_executor_requeues_its_tasks_without_counting_a_failure() {
    let (mut s, now) = cluster(&[("a", 1), ("b", 1)]);
    s.handle(now, submitted(JobId(1), 2, 1, false));
    let out = s.handle(now, Input::ExecutorLost { id: "a".into(), reason: "heartbeat timed out".into() });
    assert!(out.is_empty(), "b is busy: {out:?}");
    // b finishes task 1 and takes task 0's next attempt; max_failures=1 was not used up.
    let out = ok(&mut s, now, "b", 1, 0);
    assert_eq!(launches(&out), vec![(ExecutorId::from("b"), 0, 1)]);
    assert!(ok(&mut s, now, "b", 0, 1).contains(&Output::JobSucceeded { job: JobId(1) }));
}

#[test]
fn stale_reports_are_ignored() {
    let (mut s, now) = cluster(&[("a", 1), ("b", 1)]);
    s.handle(now, submitted(JobId(1), 1, 4, false));
    s.handle(now, Input::ExecutorLost { id: "a".into(), reason: "gone".into() });
    // Attempt 0 was on a and has been replaced by attempt 1 on b.
    let stale = s.handle(
        now,
        Input::TaskSucceeded {
            attempt: Attempt { job: JobId(1), index: 0, number: 0 },
            executor: "a".into(),
            elapsed: SLOW,
        },
    );
    assert!(stale.is_empty(), "{stale:?}");
    let out = ok(&mut s, now, "b", 0, 1);
    assert_eq!(
        out,
        vec![
            Output::Decided(Decided::TaskDone { attempt: Attempt { job: JobId(1), index: 0, number: 1 } }),
            Output::JobSucceeded { job: JobId(1) }
        ]
    );
}

#[test]
fn decommissioning_executor_takes_no_new_tasks() {
    let (mut s, now) = cluster(&[("a", 1), ("b", 1)]);
    s.handle(now, Input::ExecutorDecommissioning { id: "a".into() });
    let l = launches(&s.handle(now, submitted(JobId(1), 2, 4, false)));
    assert_eq!(l, vec![(ExecutorId::from("b"), 0, 0)]);
    assert_eq!(s.live_executors(), 1);
}

#[test]
fn cancel_kills_running_and_drops_queued_tasks() {
    let (mut s, now) = cluster(&[("a", 1)]);
    s.handle(now, submitted(JobId(1), 3, 4, false));
    let out = s.handle(now, Input::CancelJob { job: JobId(1), reason: "user asked".into() });
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(matches!(&out[1], Output::JobFailed { reason: JobError::Cancelled(_), .. }));
    let out = s.handle(now, submitted(JobId(2), 1, 4, false));
    assert_eq!(launches(&out).len(), 1, "the slot was freed");
}

#[test]
fn an_executor_failing_distinct_tasks_is_excluded_but_never_the_last() {
    let now = Instant::now();
    let mut s = Scheduler::new(Policy {
        exclude_after: Some(2),
        pipeline: 1,
        max_executor_losses: None,
        speculation: None,
    });
    for id in ["a", "b"] {
        s.handle(now, Input::ExecutorAdded { id: id.into(), slots: 2 });
    }
    let placed = launches(&s.handle(now, submitted(JobId(1), 4, 4, false)));
    let on =
        |exec: &str| -> Vec<u32> { placed.iter().filter(|(e, ..)| e == exec).map(|(_, i, _)| *i).collect() };
    let (on_a, on_b) = (on("a"), on("b"));
    assert_eq!((on_a.len(), on_b.len()), (2, 2), "{placed:?}");
    let fail = |s: &mut Scheduler, exec: &str, index, number| {
        s.handle(
            now,
            Input::TaskFailed {
                attempt: Attempt { job: JobId(1), index, number },
                executor: exec.into(),
                failure: trap(),
            },
        )
    };
    // b holds its two tasks, so the retries of a's tasks queue.
    let out = fail(&mut s, "a", on_a[0], 0);
    assert!(!out.iter().any(|o| matches!(o, Output::Decided(Decided::ExecutorExcluded { .. }))));
    let out = fail(&mut s, "a", on_a[1], 0);
    assert!(
        out.contains(&Output::Decided(Decided::ExecutorExcluded { executor: "a".into(), failed_tasks: 2 })),
        "{out:?}"
    );
    assert_eq!(s.live_executors(), 1);
    // b is now the last usable executor: its failures retry on it, never exclude it.
    let out = fail(&mut s, "b", on_b[0], 0);
    assert!(!out.iter().any(|o| matches!(o, Output::Decided(Decided::ExecutorExcluded { .. }))), "{out:?}");
    let out = fail(&mut s, "b", on_b[1], 0);
    assert!(!out.iter().any(|o| matches!(o, Output::Decided(Decided::ExecutorExcluded { .. }))), "{out:?}");
    assert_eq!(s.live_executors(), 1);
}

#[test]
fn reports_from_executors_that_do_not_hold_the_attempt_change_nothing() {
    let (mut s, now) = cluster(&[("a", 1), ("b", 1)]);
    let placed = launches(&s.handle(now, submitted(JobId(1), 2, 1, false)));
    let (holder, index, _) = placed[0].clone();
    let other = if holder == "a" { "b" } else { "a" };
    // The wrong executor, an attempt never given, an index out of range, another job.
    let lies = [
        (ExecutorId::from(other), Attempt { job: JobId(1), index, number: 0 }),
        (holder.clone(), Attempt { job: JobId(1), index, number: 5 }),
        (holder.clone(), Attempt { job: JobId(1), index: 4_000_000_000, number: 0 }),
        (holder.clone(), Attempt { job: JobId(9), index, number: 0 }),
    ];
    for (executor, attempt) in lies {
        assert!(
            s.handle(now, Input::TaskSucceeded { attempt, executor: executor.clone(), elapsed: SLOW })
                .is_empty()
        );
        let failed = s.handle(now, Input::TaskFailed { attempt, executor, failure: trap() });
        assert!(failed.is_empty(), "{failed:?}");
    }
    assert_eq!(s.free_slots(), 0, "both slots still held");
    // A second success of the same attempt is stale too.
    assert_eq!(
        ok(&mut s, now, &holder, index, 0),
        vec![Output::Decided(Decided::TaskDone { attempt: Attempt { job: JobId(1), index, number: 0 } })]
    );
    assert!(ok(&mut s, now, &holder, index, 0).is_empty());
}

#[test]
fn a_depth_no_job_placed_from_lately_is_rebuilt_when_a_job_needs_it() {
    let (mut s, now) = cluster(&[("a", 2), ("b", 1)]);
    let tasks = 3 * ROOM_DORMANT_AFTER as u32;
    let mut out = s.handle(now, submitted(JobId(1), tasks, 4, false));
    let mut answered = 0;
    while !out.contains(&Output::JobSucceeded { job: JobId(1) }) {
        let mut next = Vec::new();
        for (executor, index, number) in launches(&out) {
            let attempt = Attempt { job: JobId(1), index, number };
            let tiny = Duration::from_micros(5);
            next.extend(s.handle(now, Input::TaskSucceeded { attempt, executor, elapsed: tiny }));
            answered += 1;
        }
        out = next;
    }
    assert_eq!(answered, tasks);
    // Tiny tasks placed from the deepest room only: the shallow one stopped being kept.
    assert!(!s.rooms[0].live && s.rooms[3].live);
    assert!(s.room_index_is_true());
    // A job of long tasks needs it again: most room first, as if it had been kept.
    let out = s.handle(now, submitted(JobId(2), 4, 4, false));
    let placed: Vec<(ExecutorId, u32, u32)> = launches(&out);
    assert_eq!(placed.iter().filter(|(e, ..)| e == "a").count(), 2, "{out:?}");
    assert_eq!(placed.iter().filter(|(e, ..)| e == "b").count(), 1, "{out:?}");
    assert!(s.rooms[0].live && s.room_index_is_true());
}

#[test]
fn a_place_left_by_a_lost_executor_is_taken_by_the_next_without_its_history() {
    let (mut s, now) = cluster(&[("a", 1), ("b", 1)]);
    s.handle(now, submitted(JobId(1), 4, 4, false));
    s.handle(now, Input::ExecutorLost { id: "a".into(), reason: "gone".into() });
    // "c" takes a's place in the table; a's attempt went back to the queue and a report
    // naming "a" is not c's.
    let out = s.handle(now, Input::ExecutorAdded { id: "c".into(), slots: 1 });
    assert_eq!(launches(&out), vec![("c".into(), 0, 1)]);
    assert!(ok(&mut s, now, "a", 0, 0).is_empty());
    assert!(s.holds(&"c".into(), Attempt { job: JobId(1), index: 0, number: 1 }));
    assert_eq!(s.running_on(&"c".into()), 1);
    assert!(s.room_index_is_true());
}

fn combined(s: &mut Scheduler, now: Instant, exec: &str, index: u32, number: u32) -> Vec<Output> {
    let attempt = Attempt { job: JobId(1), index, number };
    s.handle(now, Input::TaskCombined { attempt, executor: exec.into(), elapsed: SLOW })
}

fn partial(s: &mut Scheduler, now: Instant, exec: &str, tasks: &[u32]) -> Vec<Output> {
    s.handle(now, Input::Partial { executor: exec.into(), job: JobId(1), tasks: tasks.to_vec() })
}

fn collects(out: &[Output]) -> Vec<ExecutorId> {
    out.iter()
        .filter_map(|o| match o {
            Output::Collect { executor, .. } => Some(executor.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn combined_outputs_are_collected_from_their_executors_once_every_task_is_done() {
    let (mut s, now) = cluster(&[("a", 1), ("b", 1)]);
    s.handle(now, submitted(JobId(1), 3, 4, false));
    assert!(collects(&combined(&mut s, now, "a", 0, 0)).is_empty());
    assert!(!s.is_idle(&"a".into()), "a holds an output the driver has not got");
    assert!(collects(&combined(&mut s, now, "b", 1, 0)).is_empty());
    // The last task: both holders are asked, once.
    let out = combined(&mut s, now, "a", 2, 0);
    assert_eq!(collects(&out), vec![ExecutorId::from("a"), ExecutorId::from("b")]);
    let out = partial(&mut s, now, "a", &[2, 0]);
    assert!(out.contains(&Output::Decided(Decided::PartialAccepted { job: JobId(1), tasks: 2 })), "{out:?}");
    assert!(!out.contains(&Output::JobSucceeded { job: JobId(1) }));
    let out = partial(&mut s, now, "b", &[1]);
    assert!(out.contains(&Output::JobSucceeded { job: JobId(1) }), "{out:?}");
    assert!(s.is_idle(&"a".into()) && s.is_idle(&"b".into()));
    assert!(s.room_index_is_true());
}

#[test]
fn outputs_held_by_a_lost_executor_run_again_without_counting_as_failures() {
    let (mut s, now) = cluster(&[("a", 1), ("b", 1)]);
    s.handle(now, submitted(JobId(1), 2, 1, false));
    combined(&mut s, now, "a", 0, 0);
    let out = combined(&mut s, now, "b", 1, 0);
    assert_eq!(collects(&out).len(), 2);
    // b delivers; a goes before it does: its task runs again, on b.
    partial(&mut s, now, "b", &[1]);
    let out = s.handle(now, Input::ExecutorLost { id: "a".into(), reason: "gone".into() });
    assert!(out.contains(&Output::Decided(Decided::TaskLost { job: JobId(1), index: 0 })), "{out:?}");
    assert_eq!(launches(&out), vec![("b".into(), 0, 1)]);
    // max_failures is 1: a loss is not a failure, and the rerun combines again.
    let out = combined(&mut s, now, "b", 0, 1);
    assert_eq!(collects(&out), vec![ExecutorId::from("b")]);
    assert!(partial(&mut s, now, "b", &[0]).contains(&Output::JobSucceeded { job: JobId(1) }));
}

#[test]
fn a_partial_that_does_not_match_what_its_executor_holds_is_refused_and_those_tasks_rerun() {
    let (mut s, now) = cluster(&[("a", 2), ("b", 1)]);
    s.handle(now, submitted(JobId(1), 3, 4, false));
    combined(&mut s, now, "a", 0, 0);
    combined(&mut s, now, "a", 1, 0);
    combined(&mut s, now, "b", 2, 0);
    // Claims b's task, names one twice, names one out of range, names none.
    for tasks in [&[0, 2][..], &[0, 0], &[0, 7], &[]] {
        let out = partial(&mut s, now, "a", tasks);
        assert!(
            !out.iter().any(|o| matches!(o, Output::Decided(Decided::PartialAccepted { .. }))),
            "{tasks:?}: {out:?}"
        );
    }
    // a's outputs that the refused partials named went back to the queue and run again;
    // b's is still b's.
    assert!(s.holds(&"a".into(), Attempt { job: JobId(1), index: 0, number: 1 }));
    assert!(
        partial(&mut s, now, "b", &[2])
            .contains(&Output::Decided(Decided::PartialAccepted { job: JobId(1), tasks: 1 }))
    );
    assert!(s.room_index_is_true());
}

#[test]
fn an_executor_that_does_not_deliver_when_asked_loses_its_outputs_after_the_timeout() {
    let now = Instant::now();
    let mut s = Scheduler::new(Policy::default()).with_collect_timeout(Duration::from_secs(5));
    s.handle(now, Input::ExecutorAdded { id: "a".into(), slots: 1 });
    s.handle(now, submitted(JobId(1), 1, 4, false));
    assert_eq!(collects(&combined(&mut s, now, "a", 0, 0)), vec![ExecutorId::from("a")]);
    assert_eq!(s.poll_timeout(), Some(now + Duration::from_secs(5)));
    assert!(s.handle_timeout(now + Duration::from_secs(4)).is_empty());
    let out = s.handle_timeout(now + Duration::from_secs(5));
    assert!(out.contains(&Output::Decided(Decided::TaskLost { job: JobId(1), index: 0 })), "{out:?}");
    assert_eq!(launches(&out), vec![("a".into(), 0, 1)]);
    assert_eq!(s.poll_timeout(), None);
}

/// Three maps then two reducers, on one executor of four slots.
fn map_reduce() -> (Scheduler, Instant, Vec<Output>) {
    let (mut s, now) = cluster(&[("a", 4)]);
    let stages = vec![StagePlan { tasks: 3, parents: vec![] }, StagePlan { tasks: 2, parents: vec![0] }];
    let out = s.handle(
        now,
        Input::StagedJobSubmitted {
            job: JobId(1),
            stages,
            max_failures: 2,
            speculate: false,
            remote_input: false,
        },
    );
    (s, now, out)
}

#[test]
fn reducers_wait_for_every_map_and_the_job_for_every_reducer() {
    let (mut s, now, out) = map_reduce();
    let first: Vec<u32> = launches(&out).iter().map(|l| l.1).collect();
    assert_eq!(first, [0, 1, 2], "only the maps, though a slot is free");
    assert!(launches(&ok(&mut s, now, "a", 0, 0)).is_empty());
    assert!(launches(&ok(&mut s, now, "a", 1, 0)).is_empty());
    let out = ok(&mut s, now, "a", 2, 0);
    assert_eq!(
        launches(&out).iter().map(|l| l.1).collect::<Vec<_>>(),
        [3, 4],
        "the last map frees both reducers"
    );
    ok(&mut s, now, "a", 3, 0);
    let out = ok(&mut s, now, "a", 4, 0);
    assert!(out.contains(&Output::JobSucceeded { job: JobId(1) }), "{out:?}");
}

#[test]
fn lost_map_outputs_run_again_before_the_reducers_that_need_them() {
    let (mut s, now, _) = map_reduce();
    for map in 0..3 {
        ok(&mut s, now, "a", map, 0);
    }
    // Reducer 3 cannot read map 1's output: map 1 runs again, reducer 3 waits for it
    // (its failure not counted), reducer 4 goes on.
    let lost = s.handle(now, Input::OutputsLost { job: JobId(1), tasks: vec![1] });
    assert!(lost.contains(&Output::Decided(Decided::TaskLost { job: JobId(1), index: 1 })), "{lost:?}");
    assert_eq!(launches(&lost), [("a".into(), 1, 1)]);
    let failure = TaskFailure::FetchFailed {
        executor: "a".into(),
        incarnation: 1,
        shuffle: 0,
        maps: vec![1],
        reason: "gone".into(),
    };
    let attempt = Attempt { job: JobId(1), index: 3, number: 0 };
    let out = s.handle(now, Input::TaskFailed { attempt, executor: "a".into(), failure: failure.clone() });
    assert!(launches(&out).is_empty(), "the reducer waits for map 1: {out:?}");
    let out = ok(&mut s, now, "a", 1, 1);
    assert_eq!(launches(&out), [("a".into(), 3, 1)], "map 1 is back: the reducer runs again");
    // A reducer that keeps failing to fetch fails the job at maxFailures, not for ever.
    s.handle(now, Input::OutputsLost { job: JobId(1), tasks: vec![1] });
    ok(&mut s, now, "a", 1, 2);
    let attempt = Attempt { job: JobId(1), index: 3, number: 1 };
    let out = s.handle(now, Input::TaskFailed { attempt, executor: "a".into(), failure });
    assert!(out.iter().any(|o| matches!(o, Output::JobFailed { .. })), "{out:?}");
}

#[test]
fn outputs_lost_of_tasks_not_done_or_unknown_change_nothing() {
    let (mut s, now, _) = map_reduce();
    let out = s.handle(now, Input::OutputsLost { job: JobId(1), tasks: vec![0, 99] });
    assert!(out.is_empty(), "map 0 runs; 99 is no task: {out:?}");
    let out = s.handle(now, Input::OutputsLost { job: JobId(9), tasks: vec![0] });
    assert!(out.is_empty());
}

/// A scheduler that speculates, with executors `a`, `b`, `c` of one slot each: Spark's
/// defaults (3× the median once 90% are done, 100 ms at least, looked at every 100 ms).
fn speculating(executors: &[&str]) -> (Scheduler, Instant) {
    speculating_after(executors, 0.9)
}

/// The same, copying once `quantile` of a stage is done.
fn speculating_after(executors: &[&str], quantile: f64) -> (Scheduler, Instant) {
    let now = Instant::now();
    let speculation = Speculation { quantile, ..Speculation::default() };
    let policy = Policy { pipeline: 1, speculation: Some(speculation), ..Policy::default() };
    let mut s = Scheduler::new(policy);
    for id in executors {
        s.handle(now, Input::ExecutorAdded { id: (*id).into(), slots: 1 });
    }
    (s, now)
}

fn speculated(out: &[Output]) -> Vec<(Attempt, ExecutorId, ExecutorId)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Decided(Decided::Speculated { attempt, straggler, executor, .. }) => {
                Some((*attempt, straggler.clone(), executor.clone()))
            }
            _ => None,
        })
        .collect()
}

fn done_in(s: &mut Scheduler, now: Instant, exec: &str, index: u32, number: u32, ms: u64) -> Vec<Output> {
    let attempt = Attempt { job: JobId(1), index, number };
    s.handle(now, Input::TaskSucceeded { attempt, executor: exec.into(), elapsed: Duration::from_millis(ms) })
}

/// Ten tasks of 100 ms on three executors, task 9 stuck on `c`: once nine are done and
/// it has run past 3× the median, one copy starts on another executor; the copy wins,
/// the original is killed, and the job is done.
#[test]
fn a_straggler_gets_one_copy_elsewhere_and_the_first_success_wins() {
    let (mut s, t0) = speculating(&["a", "b", "c"]);
    let spec = submitted(JobId(1), 10, 4, true);
    let placed = launches(&s.handle(t0, spec));
    assert_eq!(placed.len(), 3);
    // a and b run tasks 0..9 at 100 ms each; c holds task 2 and never ends it.
    let on_c = placed.iter().find(|(e, ..)| e.as_str() == "c").unwrap().1;
    let mut now = t0;
    let mut running: Vec<(ExecutorId, u32)> =
        placed.iter().filter(|(e, ..)| e.as_str() != "c").map(|(e, i, _)| (e.clone(), *i)).collect();
    let mut done = 0;
    while done < 9 {
        now += Duration::from_millis(100);
        let (exec, index) = running.remove(0);
        let out = done_in(&mut s, now, exec.as_str(), index, 0, 100);
        done += 1;
        assert!(speculated(&out).is_empty());
        running.extend(launches(&out).into_iter().map(|(e, i, _)| (e, i)));
    }
    assert!(running.is_empty(), "nine done, the tenth on c: {running:?}");
    // Not before it has run 3× the median (300 ms)...
    let early = s.handle_timeout(t0 + Duration::from_millis(250));
    assert!(speculated(&early).is_empty());
    // ...then one copy, never on c.
    let late = t0 + Duration::from_millis(1000);
    assert!(s.poll_timeout().is_some_and(|at| at <= late), "the check is due");
    let out = s.handle_timeout(late);
    let copies = speculated(&out);
    assert_eq!(copies.len(), 1, "{out:?}");
    let (copy, straggler, executor) = copies[0].clone();
    assert_eq!((copy.index, copy.number, straggler.as_str()), (on_c, 1, "c"));
    assert_ne!(executor.as_str(), "c");
    assert_eq!(launches(&out), vec![(executor.clone(), on_c, 1)]);
    assert!(speculated(&s.handle_timeout(late + Duration::from_secs(1))).is_empty(), "one copy per task");
    // The copy wins: the original is killed, the task done, the job too.
    let out = done_in(&mut s, late + Duration::from_millis(100), executor.as_str(), on_c, 1, 100);
    assert!(out.contains(&Output::Kill {
        executor: "c".into(),
        attempt: Attempt { job: JobId(1), index: on_c, number: 0 }
    }));
    assert!(out.contains(&Output::Decided(Decided::TaskDone { attempt: copy })));
    assert!(out.contains(&Output::JobSucceeded { job: JobId(1) }));
    // The original's late report is stale.
    assert!(done_in(&mut s, late + Duration::from_millis(200), "c", on_c, 0, 100).is_empty());
    assert_eq!(s.free_slots(), 3, "every slot is free again");
    assert!(s.room_index_is_true());
}

/// Uniform tasks never get a copy; nor do a job that refuses speculation, nor one
/// under a policy without it.
#[test]
fn uniform_tasks_and_jobs_that_refuse_get_no_copy() {
    for speculate in [true, false] {
        let (mut s, t0) = speculating(&["a", "b"]);
        let out = s.handle(t0, submitted(JobId(1), 20, 4, speculate));
        // Two slots, each ending a 100 ms task every 100 ms, the check every 50 ms.
        let mut running = launches(&out);
        let mut now = t0;
        let mut ended = 0;
        while running.len() > usize::from(!speculate) {
            now += Duration::from_millis(50);
            let (exec, index, number) = running.remove(0);
            let mut out = done_in(&mut s, now, exec.as_str(), index, number, 100);
            ended += 1;
            out.extend(s.handle_timeout(now));
            assert!(speculated(&out).is_empty(), "{out:?}");
            running.extend(launches(&out));
        }
        assert_eq!(ended, if speculate { 20 } else { 19 });
        // A job that refused, its last task stuck: no copy however long it runs.
        if !speculate {
            let out = s.handle_timeout(now + Duration::from_secs(60));
            assert!(speculated(&out).is_empty());
        }
    }
}

/// The original fails while its copy runs: nothing is queued again, the copy runs on
/// as the task's attempt, and its success ends the job.
#[test]
fn a_failed_original_leaves_its_copy_running_as_the_task() {
    let (mut s, t0) = speculating_after(&["a", "b"], 0.5);
    launches(&s.handle(t0, submitted(JobId(1), 2, 4, true)));
    // Task 0 on a ends at 100 ms; task 1 on b straggles.
    let a: ExecutorId = "a".into();
    let placed_0_on =
        |s: &Scheduler| if s.holds(&a, Attempt { job: JobId(1), index: 0, number: 0 }) { "a" } else { "b" };
    let first = placed_0_on(&s);
    let other = if first == "a" { "b" } else { "a" };
    done_in(&mut s, t0 + Duration::from_millis(100), first, 0, 0, 100);
    let out = s.handle_timeout(t0 + Duration::from_secs(2));
    let copies = speculated(&out);
    assert_eq!(copies.len(), 1);
    assert_eq!(copies[0].2.as_str(), first, "the copy runs where the other task ran");
    let original = Attempt { job: JobId(1), index: 1, number: 0 };
    let failed = s.handle(
        t0 + Duration::from_secs(3),
        Input::TaskFailed { attempt: original, executor: other.into(), failure: trap() },
    );
    assert!(launches(&failed).is_empty(), "not queued again: its copy runs");
    assert!(!failed.iter().any(|o| matches!(o, Output::Decided(Decided::Retrying { .. }))));
    let copy = Attempt { job: JobId(1), index: 1, number: 1 };
    assert!(s.holds(&first.into(), copy));
    let out = done_in(&mut s, t0 + Duration::from_secs(4), first, 1, 1, 100);
    assert!(out.contains(&Output::JobSucceeded { job: JobId(1) }));
    assert!(s.room_index_is_true());
}

/// The executor running a copy is lost: the original runs on, nothing is queued; the
/// executor of an original is lost: its copy becomes the task's attempt.
#[test]
fn a_lost_executor_takes_only_its_own_attempt_of_a_copied_task() {
    for lose_original in [false, true] {
        let (mut s, t0) = speculating_after(&["a", "b"], 0.5);
        s.handle(t0, submitted(JobId(1), 2, 4, true));
        let first =
            if s.holds(&"a".into(), Attempt { job: JobId(1), index: 0, number: 0 }) { "a" } else { "b" };
        let other = if first == "a" { "b" } else { "a" };
        done_in(&mut s, t0 + Duration::from_millis(100), first, 0, 0, 100);
        assert_eq!(speculated(&s.handle_timeout(t0 + Duration::from_secs(2))).len(), 1);
        let gone = if lose_original { other } else { first };
        let out = s
            .handle(t0 + Duration::from_secs(3), Input::ExecutorLost { id: gone.into(), reason: "x".into() });
        assert!(launches(&out).is_empty(), "nothing to run again: the other attempt runs");
        let (left, number) = if lose_original { (first, 1) } else { (other, 0) };
        assert!(s.holds(&left.into(), Attempt { job: JobId(1), index: 1, number }));
        let out = done_in(&mut s, t0 + Duration::from_secs(4), left, 1, number, 100);
        assert!(out.contains(&Output::JobSucceeded { job: JobId(1) }), "{out:?}");
        assert!(s.room_index_is_true());
    }
}

/// A hundred runs of a uniform job (tasks of 80 to 120 ms, as a healthy cluster runs
/// them, on four one-slot executors, looked at every 100 ms) start no copy.
#[test]
fn a_hundred_runs_of_a_uniform_job_start_no_copy() {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut jitter = move || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        80 + (seed >> 33) % 41
    };
    for run in 0..100u64 {
        let (mut s, t0) = speculating(&["a", "b", "c", "d"]);
        let job = JobId(run + 1);
        let out = s.handle(
            t0,
            Input::JobSubmitted { job, tasks: 40, max_failures: 4, speculate: true, remote_input: false },
        );
        // (ends at, executor, attempt)
        let mut running: Vec<(Instant, ExecutorId, Attempt)> = Vec::new();
        let mut launch = |out: &[Output], now: Instant, running: &mut Vec<(Instant, ExecutorId, Attempt)>| {
            for o in out {
                if let Output::Launch { executor, attempts } = o {
                    for a in attempts {
                        running.push((now + Duration::from_millis(jitter()), executor.clone(), *a));
                    }
                }
            }
        };
        launch(&out, t0, &mut running);
        let mut check = t0 + Duration::from_millis(100);
        let mut ended = 0;
        while !running.is_empty() {
            running.sort_by_key(|r| r.0);
            let now = running[0].0.min(check);
            let out = if now == check {
                check += Duration::from_millis(100);
                s.handle_timeout(now)
            } else {
                let (at, executor, attempt) = running.remove(0);
                ended += 1;
                let elapsed = Duration::from_millis(100);
                s.handle(at, Input::TaskSucceeded { attempt, executor, elapsed })
            };
            assert!(speculated(&out).is_empty(), "run {run}: {out:?}");
            launch(&out, now, &mut running);
        }
        assert_eq!(ended, 40, "run {run}");
    }
}

/// A pipelined job's short tasks queued behind others on an executor are not
/// stragglers for the time they waited: their time counts from when they could start.
#[test]
fn tasks_queued_behind_others_count_their_time_from_their_start() {
    let now = Instant::now();
    let speculation = Speculation { quantile: 0.5, ..Speculation::default() };
    let mut s = Scheduler::new(Policy { pipeline: 4, speculation: Some(speculation), ..Policy::default() });
    s.handle(now, Input::ExecutorAdded { id: "a".into(), slots: 1 });
    s.handle(now, Input::ExecutorAdded { id: "b".into(), slots: 1 });
    let job = submitted(JobId(1), 40, 4, true);
    let mut running: std::collections::VecDeque<(ExecutorId, u32, u32)> =
        launches(&s.handle(now, job)).into();
    // Each executor ends one 40 ms task every 40 ms: short tasks, pipelined four deep,
    // each waiting up to 120 ms in its executor's queue before it runs.
    let mut t = now;
    let mut ended = 0;
    while let Some((exec, index, number)) = running.pop_front() {
        t += Duration::from_millis(20);
        let mut out = done_in(&mut s, t, exec.as_str(), index, number, 40);
        out.extend(s.handle_timeout(t));
        assert!(speculated(&out).is_empty(), "task {index}: {out:?}");
        // Nor is a copy wanted, which would make dynamic allocation grow.
        assert_eq!(s.copies_wanted, 0, "task {index}");
        running.extend(launches(&out));
        ended += 1;
    }
    assert_eq!(ended, 40);
}

/// Two stragglers that have run as long, room for one copy (a tenth of four slots,
/// at least one): the copy goes to the task with the longest estimated time left, by
/// how much of its input its executor's heartbeat says it has read (LATE's order), not
/// to the one first in the stage; the reason says how far it was.
#[test]
fn the_copy_goes_to_the_straggler_with_the_most_time_left_by_its_input_read() {
    let (mut s, t0) = speculating_after(&["a", "b", "s1", "s2"], 0.5);
    let out = s.handle(t0, submitted(JobId(1), 6, 4, true));
    let placed = launches(&out);
    let on = |exec: &str| placed.iter().find(|(e, ..)| e.as_str() == exec).unwrap().1;
    let (first, second) = (on("s1"), on("s2"));
    // Whichever index comes first in the stage is nearly done; the other has barely begun.
    let (nearly, barely) =
        if first < second { (("s1", first), ("s2", second)) } else { (("s2", second), ("s1", first)) };
    let mut running: Vec<(ExecutorId, u32)> = placed
        .iter()
        .filter(|(e, ..)| e.as_str() == "a" || e.as_str() == "b")
        .map(|(e, i, _)| (e.clone(), *i))
        .collect();
    for step in 1..=2 {
        let ended = std::mem::take(&mut running);
        for (exec, index) in ended {
            let out = done_in(&mut s, t0 + Duration::from_millis(100 * step), exec.as_str(), index, 0, 100);
            running.extend(launches(&out).into_iter().map(|(e, i, _)| (e, i)));
        }
    }
    assert!(running.is_empty(), "four done, two straggling: {running:?}");
    let heard = |exec: &str, index: u32, read: u64| Input::Progress {
        id: exec.into(),
        progress: vec![Progress { attempt: Attempt { job: JobId(1), index, number: 0 }, read, of: 100 }],
    };
    s.handle(t0 + Duration::from_millis(250), heard(nearly.0, nearly.1, 95));
    s.handle(t0 + Duration::from_millis(250), heard(barely.0, barely.1, 5));
    let out = s.handle_timeout(t0 + Duration::from_millis(400));
    let copies = speculated(&out);
    assert_eq!(copies.len(), 1, "room for one copy: {out:?}");
    assert_eq!((copies[0].0.index, copies[0].1.as_str()), (barely.1, barely.0), "the one with most left");
    let why = out
        .iter()
        .find_map(|o| match o {
            Output::Decided(Decided::Speculated { why, .. }) => Some(why.to_string()),
            _ => None,
        })
        .unwrap();
    assert!(why.contains("5% of its input read"), "{why}");
    assert!(why.contains("ms left at its rate"), "{why}");
}

/// What a peer says of attempts that are not its own, or more entries than it holds
/// attempts, is not kept; an estimate never overflows, whatever the share read.
#[test]
fn progress_from_the_wire_is_bounded_to_the_attempts_an_executor_holds() {
    let (mut s, t0) = speculating(&["a"]);
    s.handle(t0, submitted(JobId(1), 1, 4, true));
    let flood: Vec<Progress> = (0..10_000)
        .map(|i| Progress { attempt: Attempt { job: JobId(7), index: i, number: 0 }, read: 1, of: u64::MAX })
        .collect();
    s.handle(t0, Input::Progress { id: "a".into(), progress: flood });
    let held = &s.executors[0].as_ref().unwrap().progress;
    assert_eq!(held.len(), 1, "one attempt placed there, one entry kept at most");
    // A sliver read over a long run: the time left saturates instead of overflowing.
    let far = t0 + Duration::from_secs(86_400);
    let left = super::speculation::time_left(t0, 1.0 / u64::MAX as f64, far, far);
    assert!(left > Duration::from_secs(86_400 * 365 * 1_000_000), "{left:?}");
    assert_eq!(
        super::speculation::time_left(t0, 0.5, t0 + Duration::from_secs(2), t0 + Duration::from_secs(3)),
        Duration::from_secs(1)
    );
}
