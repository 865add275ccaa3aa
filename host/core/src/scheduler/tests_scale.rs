//! The scheduler's memory per task: a record only where something is happening or
//! went wrong, whatever the job's size.

use super::tests::submitted;
use super::*;
use std::time::{Duration, Instant};

const SLOW: Duration = Duration::from_secs(1);

fn launched(out: &[Output]) -> Vec<(ExecutorId, Attempt)> {
    out.iter()
        .flat_map(|o| match o {
            Output::Launch { executor, attempts } => {
                attempts.iter().map(|a| (executor.clone(), *a)).collect()
            }
            _ => Vec::new(),
        })
        .collect()
}

fn fleet(slots: &[(&str, u32)]) -> (Scheduler, Instant) {
    let now = Instant::now();
    let mut s = Scheduler::new(Policy::default());
    for (id, slots) in slots {
        s.handle(now, Input::ExecutorAdded { id: (*id).into(), slots: *slots });
    }
    (s, now)
}

#[test]
fn a_job_of_ten_million_tasks_keeps_records_only_for_what_runs_or_went_wrong() {
    let (mut s, now) = fleet(&[("a", 4), ("b", 4)]);
    let job = JobId(1);
    let out = s.handle(now, submitted(job, 10_000_000, 4, false));
    let mut running = launched(&out);
    assert_eq!(running.len(), 8);
    let mut succeeded = 0u32;
    while succeeded < 100_000 {
        let (executor, attempt) = running.remove(0);
        let out = if attempt.index == 5 && attempt.number == 0 {
            let failure = TaskFailure::Trap { message: "once".into(), backtrace: None };
            s.handle(now, Input::TaskFailed { attempt, executor, failure })
        } else {
            succeeded += 1;
            s.handle(now, Input::TaskSucceeded { attempt, executor, elapsed: SLOW })
        };
        running.extend(launched(&out));
        // The eight running, and task 5 once it failed (its retry's number and its
        // failure are remembered, before and after it succeeds).
        assert!(s.task_records() <= 9, "{} records", s.task_records());
    }
    assert_eq!(running.len(), 8);
    assert_eq!(s.task_records(), 9);
    assert_eq!(u64::from(s.queued()), 10_000_000 - 100_000 - 8);
    assert_eq!(s.job_running(job), 8);
}

#[test]
fn outputs_held_combined_cost_no_record_and_a_lost_holder_s_run_again_with_new_numbers() {
    let (mut s, now) = fleet(&[("a", 2), ("b", 2)]);
    let job = JobId(1);
    let tasks = 200_000;
    let mut running = launched(&s.handle(now, submitted(job, tasks, 1, false)));
    let mut on_a = Vec::new();
    while let Some((executor, attempt)) = running.pop() {
        if executor == "a" {
            on_a.push(attempt.index);
        }
        let out = s.handle(now, Input::TaskCombined { attempt, executor, elapsed: SLOW });
        running.extend(launched(&out));
    }
    assert_eq!(s.task_records(), 0, "every task done, held combined without a record");
    // `a` goes before it delivers: its tasks run again, each as its attempt 1.
    let out = s.handle(now, Input::ExecutorLost { id: "a".into(), reason: "gone".into() });
    let again = launched(&out);
    assert!(!again.is_empty());
    assert!(again.iter().all(|(e, a)| e == "b" && a.number == 1 && on_a.contains(&a.index)), "{again:?}");
    assert_eq!(u64::from(s.queued()) + again.len() as u64, on_a.len() as u64, "every task a held runs again");
}
