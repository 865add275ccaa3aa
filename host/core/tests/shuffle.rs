//! A map/reduce job through the control core, stepped event by event: reducers are
//! placed only once every map output is known, and the loss of an executor reruns
//! exactly the maps it held before any reducer is placed again.

use flint_core::registry::ExecutorInfo;
use flint_core::shuffle::ShuffleId;
use flint_core::{Action, ControlCore, CoreConfig, Event, Incarnation, Policy};
use flint_proto::{Attempt, ExecutorId, JobId, JobPlan, MapStatus, TaskFailure};
use std::time::{Duration, Instant};

const JOB: JobId = JobId(1);
const MAPS: u32 = 4;
const REDUCES: u32 = 2;
const SHUFFLE: ShuffleId = ShuffleId { job: JOB, index: 0 };

fn core() -> ControlCore {
    ControlCore::new(CoreConfig {
        policy: Policy { exclude_after: None, pipeline: 1, max_executor_losses: None, speculation: None },
        heartbeat_timeout: Duration::from_secs(120),
        bootstrap_timeout: Duration::from_secs(60),
        allocation: None,
        backend: "static",
        decommission_timeout: Duration::from_secs(20),
        max_stage_attempts: 4,
    })
}

fn join(core: &mut ControlCore, now: Instant, name: &str) -> Incarnation {
    let (id, incarnation) = core.reserve(now, Some(name.into()), None).unwrap();
    let info = ExecutorInfo { host: "h".into(), cores: 2, memory: 1 << 30, slots: 2 };
    core.handle(now, Event::Registered { id, incarnation, info });
    incarnation
}

/// Submits the job of four maps into two reduce partitions.
fn submit(core: &mut ControlCore, now: Instant) -> Vec<Action> {
    let stages = JobPlan::indices(MAPS).with_reduces(REDUCES).stages();
    core.handle(
        now,
        Event::JobSubmitted {
            job: JOB,
            stages,
            max_failures: 4,
            period: None,
            speculate: false,
            remote_input: false,
        },
    )
}

fn launched(actions: &[Action]) -> Vec<(ExecutorId, Attempt)> {
    actions
        .iter()
        .flat_map(|a| match a {
            Action::Launch { executor, attempts, .. } => {
                attempts.iter().map(|t| (executor.clone(), t.attempt)).collect()
            }
            _ => Vec::new(),
        })
        .collect()
}

fn map_done(
    core: &mut ControlCore,
    now: Instant,
    on: &str,
    incarnation: Incarnation,
    attempt: Attempt,
) -> Vec<Action> {
    let status = MapStatus {
        sizes: vec![100; REDUCES as usize],
        digest: [attempt.index as u8; 32],
        records: 10,
        inline: Vec::new(),
    };
    core.handle(
        now,
        Event::MapSucceeded {
            id: on.into(),
            incarnation,
            attempt,
            elapsed: Duration::from_millis(5),
            status,
        },
    )
}

#[test]
fn a_lost_executor_reruns_its_maps_before_any_reducer_is_placed_again() {
    let (mut core, now) = (core(), Instant::now());
    let (a, b) = (join(&mut core, now, "a"), join(&mut core, now, "b"));
    let first = submit(&mut core, now);
    let maps = launched(&first);
    assert_eq!(maps.len(), 4, "the four maps, no reducer: {first:?}");
    assert!(maps.iter().all(|(_, t)| t.index < MAPS));
    let mut reducers = Vec::new();
    for (on, attempt) in &maps {
        let incarnation = if on.as_str() == "a" { a } else { b };
        assert!(core.shuffle_input(JOB, 0, 0).is_err(), "no sources while a map is missing");
        reducers.extend(launched(&map_done(&mut core, now, on.as_str(), incarnation, *attempt)));
    }
    assert_eq!(reducers.len(), 2, "both reducers once the last map is in: {reducers:?}");
    let held_by_b = maps.iter().filter(|(on, _)| on.as_str() == "b").count() as u32;
    assert_eq!(core.shuffle_input(JOB, 0, 0).unwrap().holders.len(), 2, "one request per holder");

    // `b` goes: its maps run again first; its reducer waits for them.
    let lost = core.handle(now, Event::Lost { id: "b".into(), incarnation: b, reason: "killed".into() });
    let relaunched = launched(&lost);
    assert!(
        relaunched.iter().all(|(on, t)| on.as_str() == "a" && t.index < MAPS),
        "only maps, on a: {lost:?}"
    );
    let free_on_a = 2 - reducers.iter().filter(|(on, _)| on.as_str() == "a").count() as u32;
    assert_eq!(relaunched.len() as u32, held_by_b.min(free_on_a), "as many as a's free slots take: {lost:?}");
    assert_eq!(core.job(JOB).unwrap().maps_rerun, held_by_b);
    // A late report from the lost executor changes nothing.
    let (_, stale) = maps.iter().find(|(on, _)| on.as_str() == "b").unwrap();
    assert!(map_done(&mut core, now, "b", b, *stale).is_empty());
    assert!(core.shuffle_input(JOB, 0, 0).is_err());
}

#[test]
fn a_fetch_failure_reruns_exactly_the_maps_named_and_a_rerun_must_write_the_same_bytes() {
    let (mut core, now) = (core(), Instant::now());
    let a = join(&mut core, now, "a");
    let first = submit(&mut core, now);
    let mut pending: Vec<Attempt> = launched(&first).into_iter().map(|(_, t)| t).collect();
    let mut reducers = Vec::new();
    while let Some(attempt) = pending.pop() {
        for (_, next) in launched(&map_done(&mut core, now, "a", a, attempt)) {
            if next.index < MAPS { pending.push(next) } else { reducers.push(next) }
        }
    }
    let reducer = reducers[0];
    let failure = TaskFailure::FetchFailed {
        executor: "a".into(),
        incarnation: a.0,
        shuffle: 0,
        maps: vec![2],
        reason: "checksum".into(),
    };
    let out =
        core.handle(now, Event::TaskFailed { id: "a".into(), incarnation: a, attempt: reducer, failure });
    let again = launched(&out);
    assert_eq!(again.iter().map(|(_, t)| t.index).collect::<Vec<_>>(), [2], "map 2 alone: {out:?}");
    assert_eq!(core.job(JOB).unwrap().maps_rerun, 1);
    // The rerun writes other bytes: the job fails as nondeterministic, not silently mixed.
    let (_, rerun) = again[0];
    let status = MapStatus { sizes: vec![100; 2], digest: [99; 32], records: 10, inline: Vec::new() };
    let out = core.handle(
        now,
        Event::MapSucceeded {
            id: "a".into(),
            incarnation: a,
            attempt: rerun,
            elapsed: Duration::ZERO,
            status,
        },
    );
    assert!(
        out.iter().any(|a| matches!(
            a,
            Action::JobFailed { reason: flint_proto::JobError::Nondeterministic { map: 2 }, .. }
        )),
        "{out:?}"
    );
}

/// The actions' copies asked for: (adopter, from, maps).
fn adoptions(actions: &[Action]) -> Vec<(ExecutorId, ExecutorId, Vec<u32>)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Adopt { executor, from, outputs, shuffle, .. } if shuffle.job == JOB => {
                Some((executor.clone(), from.0.clone(), outputs.iter().map(|o| o.0).collect()))
            }
            _ => None,
        })
        .collect()
}

fn leaves(actions: &[Action]) -> Vec<ExecutorId> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Leave { executor, .. } => Some(executor.clone()),
            _ => None,
        })
        .collect()
}

/// Attempts placed, and where.
type Placed = Vec<(ExecutorId, Attempt)>;

/// Runs every map of the job on `a` and `b` (alternating as placed), places both
/// reducers, and returns them with the maps each executor holds.
fn maps_on_two(
    core: &mut ControlCore,
    now: Instant,
    lives: &[(&str, Incarnation)],
) -> (Placed, Vec<(ExecutorId, u32)>) {
    let on = |id: &ExecutorId| lives.iter().find(|(n, _)| *n == id.as_str()).unwrap().1;
    let mut pending = launched(&submit(core, now));
    let (mut reducers, mut held) = (Vec::new(), Vec::new());
    while let Some((exec, attempt)) = pending.pop() {
        held.push((exec.clone(), attempt.index));
        for (e, next) in launched(&map_done(core, now, exec.as_str(), on(&exec), attempt)) {
            if next.index < MAPS { pending.push((e, next)) } else { reducers.push((e, next)) }
        }
    }
    (reducers, held)
}

#[test]
fn a_leaving_executor_hands_its_map_outputs_over_and_goes_only_once_the_tracker_switched() {
    let (mut core, now) = (core(), Instant::now());
    let (a, b, c) = (join(&mut core, now, "a"), join(&mut core, now, "b"), join(&mut core, now, "c"));
    let (reducers, held) = maps_on_two(&mut core, now, &[("a", a), ("b", b), ("c", c)]);
    assert_eq!(reducers.len(), 2);
    let of_b: Vec<u32> = held.iter().filter(|(e, _)| e.as_str() == "b").map(|(_, m)| *m).collect();
    // `b` is told to leave (SIGTERM) once its reducer, if any, has ended.
    let drain = core.handle(now, Event::Draining { id: "b".into(), incarnation: b });
    let busy = reducers.iter().find(|(e, _)| e.as_str() == "b").map(|(_, t)| *t);
    let asked = match busy {
        Some(attempt) => {
            assert!(adoptions(&drain).is_empty(), "nothing is copied while a task runs there: {drain:?}");
            let event =
                Event::TaskSucceeded { id: "b".into(), incarnation: b, attempt, elapsed: Duration::ZERO };
            adoptions(&core.handle(now, event))
        }
        None => adoptions(&drain),
    };
    assert!(!of_b.is_empty(), "placement spread the maps: {held:?}");
    let mut copied: Vec<u32> = asked.iter().flat_map(|(_, _, maps)| maps.clone()).collect();
    copied.sort();
    let mut want = of_b.clone();
    want.sort();
    assert_eq!(copied, want, "every output b holds, and only those: {asked:?}");
    assert!(asked.iter().all(|(to, from, _)| to.as_str() != "b" && from.as_str() == "b"), "{asked:?}");
    // Before every answer is in, b still serves its outputs and does not go.
    let mut last = Vec::new();
    for (i, (to, _, maps)) in asked.iter().enumerate() {
        let incarnation = if to.as_str() == "a" { a } else { c };
        let event = Event::Adopted {
            id: to.clone(),
            incarnation,
            shuffle: SHUFFLE,
            from: b,
            maps: maps.clone(),
            failed: Vec::new(),
        };
        last = core.handle(now, event);
        if i + 1 < asked.len() {
            assert!(leaves(&last).is_empty(), "{last:?}");
            let holders = core.shuffle_input(JOB, 0, 0).unwrap().holders;
            assert!(holders.iter().any(|h| h.executor.as_str() == "b"), "not switched yet: {holders:?}");
        }
    }
    assert_eq!(leaves(&last), ["b"], "let go once every copy is in: {last:?}");
    let holders = core.shuffle_input(JOB, 0, 0).unwrap().holders;
    assert!(holders.iter().all(|h| h.executor.as_str() != "b"), "switched in one step: {holders:?}");
    // It goes: nothing runs again.
    let gone = core.handle(now, Event::Lost { id: "b".into(), incarnation: b, reason: "closed".into() });
    assert!(launched(&gone).iter().all(|(_, t)| t.index >= MAPS), "no map reruns: {gone:?}");
    let counts = core.job(JOB).unwrap();
    assert_eq!((counts.maps_rerun, counts.outputs_handed_over), (0, of_b.len() as u32));
    let removed = core.executor(now, &"b".into()).unwrap();
    assert_eq!(removed.removed.as_deref(), Some("decommissioned"), "{removed:?}");
}

/// Executors `a` and `b` ran the maps; `b`'s reducer, if it had one, is done: it runs
/// nothing and holds at least two map outputs (returned).
fn b_idle_holding_maps() -> (ControlCore, Instant, (Incarnation, Incarnation), Vec<u32>) {
    let (mut core, now) = (core(), Instant::now());
    let (a, b) = (join(&mut core, now, "a"), join(&mut core, now, "b"));
    let (reducers, held) = maps_on_two(&mut core, now, &[("a", a), ("b", b)]);
    for (exec, attempt) in reducers.iter().filter(|(e, _)| e.as_str() == "b") {
        let event = Event::TaskSucceeded {
            id: exec.clone(),
            incarnation: b,
            attempt: *attempt,
            elapsed: Duration::ZERO,
        };
        core.handle(now, event);
    }
    let of_b: Vec<u32> = held.iter().filter(|(e, _)| e.as_str() == "b").map(|(_, m)| *m).collect();
    assert!(of_b.len() >= 2, "placement spread the maps: {held:?}");
    (core, now, (a, b), of_b)
}

#[test]
fn outputs_not_copied_in_time_or_refused_run_again_and_the_removal_says_so() {
    let (mut core, now, (a, b), of_b) = b_idle_holding_maps();
    let asked = adoptions(&core.handle(now, Event::Draining { id: "b".into(), incarnation: b }));
    assert_eq!(asked.len(), 1, "a is the only adopter: {asked:?}");
    // A refuses one (no room, say), copies another, never answers the rest.
    let (refused, copied) = (of_b[0], of_b[1]);
    let event = Event::Adopted {
        id: "a".into(),
        incarnation: a,
        shuffle: SHUFFLE,
        from: b,
        maps: vec![copied],
        failed: vec![(refused, "no room".into())],
    };
    let out = core.handle(now, event);
    let answered_all = of_b.len() == 2;
    assert_eq!(leaves(&out).is_empty(), !answered_all, "{out:?}");
    // An answer from an executor never asked, or for another incarnation, is stale.
    let stale = Event::Adopted {
        id: "b".into(),
        incarnation: b,
        shuffle: SHUFFLE,
        from: b,
        maps: of_b.clone(),
        failed: vec![],
    };
    assert!(leaves(&core.handle(now, stale)).is_empty());
    // The timeout lets it go with what was copied.
    let due = core.poll_timeout().unwrap();
    if !answered_all {
        assert!(due <= now + Duration::from_secs(20), "the hand-over's deadline is a timeout");
        assert!(leaves(&core.handle_timeout(now + Duration::from_secs(19))).is_empty());
        assert_eq!(leaves(&core.handle_timeout(now + Duration::from_secs(20))), ["b"]);
    }
    let later = now + Duration::from_secs(21);
    let gone = core.handle(later, Event::Lost { id: "b".into(), incarnation: b, reason: "closed".into() });
    let mut rerun: Vec<u32> = launched(&gone).iter().map(|(_, t)| t.index).filter(|i| *i < MAPS).collect();
    rerun.sort();
    let want: Vec<u32> = of_b.iter().copied().filter(|m| *m != copied).collect();
    let mut want_sorted = want.clone();
    want_sorted.sort();
    // a has two slots: as many of them as fit run at once.
    assert!(
        !rerun.is_empty() && rerun.iter().all(|m| want_sorted.contains(m)),
        "{rerun:?} of {want_sorted:?}"
    );
    let counts = core.job(JOB).unwrap();
    assert_eq!((counts.maps_rerun, counts.outputs_handed_over), (want.len() as u32, 1));
    let removed = core.executor(now, &"b".into()).unwrap();
    let reason = removed.removed.unwrap();
    assert!(reason.contains(&format!("{} map outputs it held were not handed over", want.len())), "{reason}");
}

#[test]
fn a_leaving_executor_killed_mid_copy_keeps_the_copies_made_and_loses_the_rest() {
    let (mut core, now, (a, b), of_b) = b_idle_holding_maps();
    core.handle(now, Event::Draining { id: "b".into(), incarnation: b });
    let event = Event::Adopted {
        id: "a".into(),
        incarnation: a,
        shuffle: SHUFFLE,
        from: b,
        maps: vec![of_b[0]],
        failed: vec![],
    };
    core.handle(now, event);
    let gone = core.handle(now, Event::Lost { id: "b".into(), incarnation: b, reason: "killed".into() });
    assert!(launched(&gone).iter().all(|(_, t)| t.index != of_b[0]), "the copy holds: {gone:?}");
    let counts = core.job(JOB).unwrap();
    assert_eq!((counts.maps_rerun, counts.outputs_handed_over), (of_b.len() as u32 - 1, 1));
}

#[test]
fn dynamic_allocation_gives_back_an_idle_executor_holding_map_outputs_once_they_are_handed_over() {
    use flint_core::AllocationConfig;
    use flint_proto::DynamicAllocation;
    let idle = Duration::from_secs(1);
    let mut core = ControlCore::new(CoreConfig {
        policy: Policy { exclude_after: None, pipeline: 1, max_executor_losses: None, speculation: None },
        heartbeat_timeout: Duration::from_secs(120),
        bootstrap_timeout: Duration::from_secs(60),
        allocation: Some(AllocationConfig {
            policy: DynamicAllocation {
                enabled: true,
                min_executors: 0,
                max_executors: 2,
                initial_executors: Some(2),
                idle_timeout: idle,
                cooldown: Duration::ZERO,
                ..DynamicAllocation::default()
            },
            slots_per_executor: 2,
        }),
        backend: "local",
        decommission_timeout: Duration::from_secs(20),
        max_stage_attempts: 4,
    });
    let t0 = Instant::now();
    let ids = core
        .handle_timeout(t0)
        .into_iter()
        .find_map(|a| match a {
            Action::StartExecutors { ids } => Some(ids),
            _ => None,
        })
        .expect("the initial executors are asked for");
    let incarnations: Vec<Incarnation> = ids.iter().map(|id| join(&mut core, t0, id.as_str())).collect();
    let on = |id: &ExecutorId| incarnations[ids.iter().position(|i| i == id).unwrap()];
    let lives: Vec<(&str, Incarnation)> = ids.iter().map(|id| (id.as_str(), on(id))).collect();
    let (mut reducers, _) = maps_on_two(&mut core, t0, &lives);
    assert_eq!(reducers.len(), 2);
    // One reducer ends: its executor runs nothing now, though it holds map outputs.
    let (done_on, done) = reducers.pop().unwrap();
    let event = Event::TaskSucceeded {
        id: done_on.clone(),
        incarnation: on(&done_on),
        attempt: done,
        elapsed: Duration::ZERO,
    };
    core.handle(t0, event);
    let (busy_on, _) = reducers.pop().unwrap();
    assert_ne!(busy_on, done_on, "one reducer on each executor");
    // Past the idle timeout it is given back, and hands its outputs to the busy one.
    let mut later = t0;
    let mut asked = Vec::new();
    for _ in 0..5 {
        later += idle;
        let out = core.handle_timeout(later);
        asked.extend(adoptions(&out));
        if !asked.is_empty() {
            assert!(
                out.iter()
                    .any(|a| matches!(a, Action::Decommission { executor, .. } if *executor == done_on))
            );
            break;
        }
    }
    assert!(
        !asked.is_empty() && asked.iter().all(|(to, from, _)| *to == busy_on && *from == done_on),
        "{asked:?}"
    );
    let (to, _, maps) = asked.remove(0);
    let event = Event::Adopted {
        id: to.clone(),
        incarnation: on(&to),
        shuffle: SHUFFLE,
        from: on(&done_on),
        maps,
        failed: vec![],
    };
    assert_eq!(leaves(&core.handle(later, event)), std::slice::from_ref(&done_on));
    let gone = core.handle(
        later,
        Event::Lost { id: done_on.clone(), incarnation: on(&done_on), reason: "closed".into() },
    );
    assert!(launched(&gone).is_empty(), "no map runs again: {gone:?}");
    assert_eq!(core.job(JOB).unwrap().maps_rerun, 0);
}
