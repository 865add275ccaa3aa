//! Ten thousand executors through the control core, stepped with fake time: none
//! expires while they heartbeat, a job spreads over all of them, and executors that
//! come and go leave the core no more state than the fleet it has now.

use flint_core::{Action, ControlCore, CoreConfig, Event, ExecutorInfo, Policy};
use flint_proto::{Attempt, ExecutorId, Incarnation, JobId};
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

const FLEET: u32 = 10_000;
const HEARTBEAT: Duration = Duration::from_secs(10);
const TIMEOUT: Duration = Duration::from_secs(120);

fn core() -> ControlCore {
    ControlCore::new(CoreConfig {
        policy: Policy { exclude_after: None, pipeline: 1, max_executor_losses: None, speculation: None },
        heartbeat_timeout: TIMEOUT,
        bootstrap_timeout: Duration::from_secs(60),
        allocation: None,
        backend: "static",
        decommission_timeout: Duration::from_secs(20),
        max_stage_attempts: 4,
    })
}

/// Registers `FLEET` executors named `{prefix}-{i}` with 8 slots each.
fn register(core: &mut ControlCore, now: Instant, prefix: &str) -> Vec<(ExecutorId, Incarnation)> {
    (0..FLEET)
        .map(|i| {
            let (id, incarnation) = core.reserve(now, Some(format!("{prefix}-{i}").into()), None).unwrap();
            let info = ExecutorInfo { host: format!("host-{i}"), cores: 8, memory: 8 << 30, slots: 8 };
            core.handle(now, Event::Registered { id: id.clone(), incarnation, info });
            (id, incarnation)
        })
        .collect()
}

/// Heartbeats from the whole fleet, spread evenly over `span`, timeouts handled
/// whenever the core asks: the executors it removed.
fn heartbeats(
    core: &mut ControlCore,
    now: &mut Instant,
    fleet: &[(ExecutorId, Incarnation)],
    span: Duration,
) -> usize {
    let rounds = (span.as_secs() / HEARTBEAT.as_secs()) as usize;
    let step = HEARTBEAT / fleet.len() as u32;
    let mut removed = 0;
    for _ in 0..rounds {
        for (id, incarnation) in fleet {
            *now += step;
            core.handle(
                *now,
                Event::Heartbeat { id: id.clone(), incarnation: *incarnation, progress: Vec::new() },
            );
            if core.poll_timeout().is_some_and(|at| *now >= at) {
                removed += core
                    .handle_timeout(*now)
                    .iter()
                    .filter(|a| matches!(a, Action::ExecutorRemoved { .. }))
                    .count();
            }
        }
    }
    removed
}

#[test]
fn ten_thousand_executors_heartbeat_for_ten_minutes_run_a_job_and_leave_bounded_state() {
    let mut now = Instant::now();
    let mut core = core();
    let fleet = register(&mut core, now, "exec");
    assert_eq!(core.live_executors(), FLEET);
    assert_eq!(core.total_slots(), FLEET * 8);

    assert_eq!(heartbeats(&mut core, &mut now, &fleet, Duration::from_secs(600)), 0, "nobody expires");
    assert_eq!(core.live_executors(), FLEET);

    // A job of 100 tasks an executor: its first wave is on every executor, a slot each.
    let mut running: Vec<(ExecutorId, Incarnation, Attempt)> = Vec::new();
    let mut succeeded = None;
    let mut launches = |actions: Vec<Action>, running: &mut Vec<_>| {
        for action in actions {
            match action {
                Action::Launch { executor, incarnation, attempts } => {
                    running.extend(attempts.into_iter().map(|a| (executor.clone(), incarnation, a.attempt)));
                }
                Action::JobSucceeded { counts, .. } => succeeded = Some(counts),
                _ => {}
            }
        }
    };
    let tasks = FLEET * 100;
    let submitted = Event::JobSubmitted {
        job: JobId(1),
        stages: vec![flint_proto::StageSpec::tasks(tasks)],
        max_failures: 1,
        period: None,
        speculate: false,
        remote_input: false,
    };
    launches(core.handle(now, submitted), &mut running);
    assert_eq!(running.len(), (FLEET * 8) as usize, "every slot of the fleet is given a task");
    let mut per_executor: HashMap<&ExecutorId, u32> = HashMap::new();
    for (id, ..) in &running {
        *per_executor.entry(id).or_default() += 1;
    }
    assert_eq!(per_executor.len(), FLEET as usize);
    assert!(per_executor.values().all(|n| *n == 8));
    let mut done = BTreeSet::new();
    while let Some((id, incarnation, attempt)) = running.pop() {
        assert!(done.insert(attempt.index), "task {} done twice", attempt.index);
        let elapsed = Duration::from_millis(5);
        launches(core.handle(now, Event::TaskSucceeded { id, incarnation, attempt, elapsed }), &mut running);
    }
    assert_eq!(done.len(), tasks as usize);
    let counts = succeeded.expect("the job succeeded");
    assert_eq!((counts.done, counts.attempts), (tasks, tasks), "one attempt a task");

    // The whole fleet goes and another takes its place: the core lists the new fleet
    // and the last few hundred removed, not every executor it ever had.
    for (id, incarnation) in &fleet {
        core.handle(
            now,
            Event::Lost { id: id.clone(), incarnation: *incarnation, reason: "scaled down".into() },
        );
    }
    assert_eq!(core.live_executors(), 0);
    let next = register(&mut core, now, "next");
    assert_eq!(core.live_executors(), FLEET);
    let listed = core.executors(now).len();
    assert!(listed <= FLEET as usize + 256, "{listed} executors listed");
    assert!(core.placement_index_is_true());
    assert_eq!(heartbeats(&mut core, &mut now, &next, Duration::from_secs(200)), 0, "nobody expires");
}
