//! A map/reduce job through the control core, stepped event by event: reducers are
//! placed only once every map output is known, and the loss of an executor reruns
//! exactly the maps it held before any reducer is placed again.

use flint_core::registry::ExecutorInfo;
use flint_core::{Action, ControlCore, CoreConfig, Event, Incarnation, Policy};
use flint_proto::{Attempt, ExecutorId, JobId, MapStatus, TaskFailure};
use std::time::{Duration, Instant};

const JOB: JobId = JobId(1);
const MAPS: u32 = 4;
const REDUCES: u32 = 2;

fn core() -> ControlCore {
    ControlCore::new(CoreConfig {
        policy: Policy { exclude_after: None, pipeline: 1, max_executor_losses: None },
        heartbeat_timeout: Duration::from_secs(120),
        bootstrap_timeout: Duration::from_secs(60),
        allocation: None,
        backend: "static",
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
    let shuffle = Some((MAPS, REDUCES));
    core.handle(
        now,
        Event::JobSubmitted { job: JOB, tasks: MAPS + REDUCES, max_failures: 4, period: None, shuffle },
    )
}

fn launched(actions: &[Action]) -> Vec<(ExecutorId, Attempt)> {
    actions
        .iter()
        .flat_map(|a| match a {
            Action::Launch { executor, attempts, .. } => {
                attempts.iter().map(|t| (executor.clone(), *t)).collect()
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
        assert!(core.reduce_sources(JOB, 0).is_err(), "no sources while a map is missing");
        reducers.extend(launched(&map_done(&mut core, now, on.as_str(), incarnation, *attempt)));
    }
    assert_eq!(reducers.len(), 2, "both reducers once the last map is in: {reducers:?}");
    let held_by_b = maps.iter().filter(|(on, _)| on.as_str() == "b").count() as u32;
    assert_eq!(core.reduce_sources(JOB, 0).unwrap().holders.len(), 2, "one request per holder");

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
    assert!(core.reduce_sources(JOB, 0).is_err());
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

#[test]
fn dynamic_allocation_never_gives_back_an_executor_holding_a_running_jobs_map_outputs() {
    use flint_core::AllocationConfig;
    use flint_proto::DynamicAllocation;
    let idle = Duration::from_secs(1);
    let mut core = ControlCore::new(CoreConfig {
        policy: Policy { exclude_after: None, pipeline: 1, max_executor_losses: None },
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
    let mut pending: Vec<(ExecutorId, Attempt)> = launched(&submit(&mut core, t0));
    let mut reducers = Vec::new();
    while let Some((exec, attempt)) = pending.pop() {
        for (e, next) in launched(&map_done(&mut core, t0, exec.as_str(), on(&exec), attempt)) {
            if next.index < MAPS { pending.push((e, next)) } else { reducers.push((e, next)) }
        }
    }
    assert_eq!(reducers.len(), 2);
    // One reducer ends: an executor may now run nothing, but both hold map outputs.
    let (done_on, done) = reducers.pop().unwrap();
    let ok = |core: &mut ControlCore, exec: &ExecutorId, attempt: Attempt, at: Instant| {
        let event = Event::TaskSucceeded {
            id: exec.clone(),
            incarnation: on(exec),
            attempt,
            elapsed: Duration::ZERO,
        };
        core.handle(at, event)
    };
    ok(&mut core, &done_on, done, t0);
    let released =
        |actions: &[Action]| actions.iter().filter(|a| matches!(a, Action::Decommission { .. })).count();
    let mut later = t0;
    for _ in 0..5 {
        later += idle;
        assert_eq!(released(&core.handle_timeout(later)), 0, "no executor holding map outputs is given back");
    }
    // The job ends: its outputs are nothing to keep, and idle executors go.
    let (last_on, last) = reducers.pop().unwrap();
    let end = ok(&mut core, &last_on, last, later);
    assert!(end.iter().any(|a| matches!(a, Action::JobSucceeded { .. })), "{end:?}");
    let mut gone = 0;
    for _ in 0..5 {
        later += idle;
        gone += released(&core.handle_timeout(later));
    }
    assert!(gone > 0, "once the job ended, idle executors are given back");
}
