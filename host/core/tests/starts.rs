//! Starts asked of a backend, stepped with fake time: a start that does not register
//! within the bootstrap timeout is abandoned and counts as a failed start, unless its
//! backend keeps saying it is under way (a pod waiting for a node or its image).

use flint_core::{Action, AllocationConfig, ControlCore, CoreConfig, Event, Policy};
use flint_proto::{DynamicAllocation, ExecutorId, JobId};
use std::time::{Duration, Instant};

const BOOTSTRAP: Duration = Duration::from_secs(60);

fn core() -> ControlCore {
    ControlCore::new(CoreConfig {
        policy: Policy { exclude_after: None, pipeline: 1, max_executor_losses: None, speculation: None },
        heartbeat_timeout: Duration::from_secs(120),
        bootstrap_timeout: BOOTSTRAP,
        allocation: Some(AllocationConfig {
            policy: DynamicAllocation {
                enabled: true,
                max_executors: 1,
                initial_executors: Some(0),
                cooldown: Duration::from_secs(0),
                max_pending: 1,
                ..DynamicAllocation::default()
            },
            slots_per_executor: 1,
        }),
        backend: "kubernetes",
        decommission_timeout: Duration::from_secs(20),
        max_stage_attempts: 4,
    })
}

/// Submits a one-task job and steps until the core asks for an executor; its id.
fn asked(core: &mut ControlCore, now: Instant) -> ExecutorId {
    core.handle(
        now,
        Event::JobSubmitted {
            job: JobId(1),
            stages: vec![flint_proto::StageSpec::tasks(1)],
            max_failures: 1,
            period: None,
            speculate: false,
            remote_input: false,
        },
    );
    for s in 0..5 {
        for action in core.handle_timeout(now + Duration::from_secs(s)) {
            if let Action::StartExecutors { ids } = action {
                return ids[0].clone();
            }
        }
    }
    panic!("no executor asked for");
}

fn abandoned(actions: &[Action]) -> bool {
    actions.iter().any(|a| matches!(a, Action::AbandonStart { .. }))
}

#[test]
fn a_start_that_never_registers_is_abandoned_at_the_bootstrap_timeout() {
    let (mut core, t0) = (core(), Instant::now());
    let id = asked(&mut core, t0);
    assert!(!abandoned(&core.handle_timeout(t0 + BOOTSTRAP)));
    let late = core.handle_timeout(t0 + BOOTSTRAP + Duration::from_secs(5));
    assert!(late.iter().any(|a| *a == Action::AbandonStart { executor: id.clone() }), "{late:?}");
    assert_eq!(core.executors_starting(), 0);
}

#[test]
fn a_start_its_backend_says_is_under_way_is_not_abandoned_while_it_waits() {
    let (mut core, t0) = (core(), Instant::now());
    let id = asked(&mut core, t0);
    // The pod waits for a node for five minutes; the backend sees it wait every 30 s.
    let mut now = t0;
    for _ in 0..10 {
        now += Duration::from_secs(30);
        core.handle(now, Event::BackendProgress { id: id.clone() });
        assert!(!abandoned(&core.handle_timeout(now)), "abandoned at {:?}", now - t0);
    }
    assert_eq!(core.executors_starting(), 1);
    // Then it is heard of no more: abandoned one bootstrap timeout after the last word.
    assert!(!abandoned(&core.handle_timeout(now + BOOTSTRAP - Duration::from_secs(1))));
    let later = now + BOOTSTRAP + Duration::from_secs(1);
    assert!(abandoned(&core.handle_timeout(later)));
    // Word of an id never asked for changes nothing.
    core.handle(later, Event::BackendProgress { id: "dyn-999".into() });
    assert_eq!(core.executors_starting(), 0);
}

#[test]
fn a_start_waiting_for_room_is_never_abandoned_and_is_timed_again_once_it_has_room() {
    let (mut core, t0) = (core(), Instant::now());
    let id = asked(&mut core, t0);
    // The master has no worker with the cores it needs: said once, waited an hour.
    core.handle(t0 + Duration::from_secs(1), Event::BackendWaiting { id: id.clone() });
    for minutes in 1..=60 {
        let now = t0 + Duration::from_secs(60 * minutes);
        assert!(!abandoned(&core.handle_timeout(now)), "abandoned after {minutes} minutes of waiting");
    }
    assert_eq!(core.executors_starting(), 1);
    assert_eq!(core.allocation_given_up(), None);
    // Placed at last: from then on it has the bootstrap timeout to register.
    let placed = t0 + Duration::from_secs(3700);
    core.handle(placed, Event::BackendProgress { id: id.clone() });
    assert!(!abandoned(&core.handle_timeout(placed + BOOTSTRAP - Duration::from_secs(1))));
    assert!(abandoned(&core.handle_timeout(placed + BOOTSTRAP + Duration::from_secs(1))));
}
