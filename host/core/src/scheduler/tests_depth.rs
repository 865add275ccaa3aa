//! How deep the scheduler queues a job's tasks on an executor: by their mean time, and
//! one ahead for tasks that read across the network.

use super::tests::{launches, submitted};
use super::*;
use std::time::{Duration, Instant};

/// A task time well past `SHORT_TASK` and `AHEAD_TASK`: no pipelining.
const SLOW: Duration = Duration::from_secs(1);

/// A scheduler pipelining `pipeline` deep, with one executor of two slots.
fn two_slots(pipeline: u32) -> Scheduler {
    let mut s = Scheduler::new(Policy { pipeline, ..Policy::default() });
    s.handle(Instant::now(), Input::ExecutorAdded { id: "a".into(), slots: 2 });
    s
}

#[test]
fn short_tasks_are_pipelined_and_long_ones_are_not() {
    let now = Instant::now();
    let mut s = two_slots(4);
    let out = s.handle(now, submitted(JobId(1), 20, 4, false));
    assert_eq!(launches(&out).len(), 2, "one per slot until the job's tasks prove short");
    let done = |s: &mut Scheduler, index, elapsed| {
        let attempt = Attempt { job: JobId(1), index, number: 0 };
        launches(&s.handle(now, Input::TaskSucceeded { attempt, executor: "a".into(), elapsed }))
    };
    assert_eq!(
        done(&mut s, 0, Duration::from_millis(2)).len(),
        7,
        "short: two slots, four deep, one running"
    );

    let mut s = two_slots(4);
    s.handle(now, submitted(JobId(1), 20, 4, false));
    assert_eq!(done(&mut s, 0, SLOW).len(), 1, "long: one per slot");

    let mut s = two_slots(4);
    s.handle(now, submitted(JobId(1), 200, 4, false));
    assert_eq!(
        done(&mut s, 0, Duration::from_micros(20)).len(),
        2 * 4 * crate::scheduler::TINY_DEPTH as usize - 1,
        "tiny: two slots, {} deep, one running",
        4 * crate::scheduler::TINY_DEPTH
    );
}

/// A task of a job over the network (the driver's data service, S3) that runs under
/// `AHEAD_TASK` has the next at hand, so that its executor begins that one's first read
/// while it computes; a local read, a long task or a policy that does not pipeline get
/// one per slot.
#[test]
fn tasks_that_read_across_the_network_go_one_ahead_while_they_are_short_of_a_second() {
    let now = Instant::now();
    let placed_after_one_ends = |remote_input, pipeline, elapsed| {
        let mut s = two_slots(pipeline);
        let submitted =
            Input::JobSubmitted { job: JobId(1), tasks: 20, max_failures: 4, speculate: false, remote_input };
        assert_eq!(launches(&s.handle(now, submitted)).len(), 2, "one per slot until a task's time is known");
        let attempt = Attempt { job: JobId(1), index: 0, number: 0 };
        let next = launches(&s.handle(now, Input::TaskSucceeded { attempt, executor: "a".into(), elapsed }));
        assert!(s.room_index_is_true());
        next.len()
    };
    let word_count = Duration::from_millis(150);
    assert_eq!(placed_after_one_ends(true, 8, word_count), 3, "two slots, two each, one running");
    assert_eq!(placed_after_one_ends(false, 8, word_count), 1, "a local read: one per slot");
    assert_eq!(placed_after_one_ends(true, 8, AHEAD_TASK), 1, "a task of a second: one per slot");
    assert_eq!(placed_after_one_ends(true, 1, word_count), 1, "a policy that does not pipeline");
    assert_eq!(placed_after_one_ends(true, 8, Duration::from_millis(2)), 15, "short: the pipeline's depth");

    // A map/reduce job over the network: its maps read splits and go one ahead, its
    // reducers read the shuffle and get one per slot.
    let mut s = two_slots(8);
    let stages = vec![StagePlan { tasks: 6, parents: vec![] }, StagePlan { tasks: 8, parents: vec![0] }];
    let submitted = Input::StagedJobSubmitted {
        job: JobId(1),
        stages,
        max_failures: 4,
        speculate: false,
        remote_input: true,
    };
    let mut placed: Vec<u32> = launches(&s.handle(now, submitted)).iter().map(|l| l.1).collect();
    let (mut most_held, mut ended) = (0, 0);
    while let Some(index) = placed.first().copied() {
        placed.remove(0);
        ended += 1;
        let attempt = Attempt { job: JobId(1), index, number: 0 };
        let out = s.handle(now, Input::TaskSucceeded { attempt, executor: "a".into(), elapsed: word_count });
        placed.extend(launches(&out).iter().map(|l| l.1));
        let (maps, reduces) = placed.iter().partition::<Vec<u32>, _>(|&&i| i < 6);
        assert!(maps.len() <= 4 && reduces.len() <= 2, "maps {maps:?}, reducers {reduces:?}");
        most_held = most_held.max(maps.len());
    }
    assert_eq!(ended, 14, "every map and reducer ran");
    assert_eq!(most_held, 4, "the maps went two a slot");
}

/// A job whose outputs are too large for a report (each waits on its executor until
/// the driver fetches it) is never queued ahead, however short its tasks: an executor
/// holds at most a slot's worth of unfetched outputs.
#[test]
fn a_job_with_large_outputs_goes_one_a_slot_however_short() {
    let now = Instant::now();
    let mut s = two_slots(4);
    s.handle(now, submitted(JobId(1), 20, 4, false));
    s.handle(now, Input::LargeOutputs { job: JobId(1) });
    let attempt = Attempt { job: JobId(1), index: 0, number: 0 };
    let elapsed = Duration::from_millis(2);
    let out = s.handle(now, Input::TaskSucceeded { attempt, executor: "a".into(), elapsed });
    assert_eq!(launches(&out).len(), 1, "short, but one a slot: {out:?}");
}
