use super::*;

fn config() -> AllocationConfig {
    with(|_| {})
}

/// Dynamic allocation between 0 and 100 executors of 2 slots, changed by `change`.
fn with(change: impl FnOnce(&mut DynamicAllocation)) -> AllocationConfig {
    let mut policy = DynamicAllocation {
        enabled: true,
        min_executors: 0,
        max_executors: 100,
        initial_executors: Some(0),
        backlog_timeout: Duration::from_secs(1),
        sustained_backlog_timeout: None,
        idle_timeout: Duration::from_secs(60),
        ratio: 1.0,
        cooldown: Duration::from_secs(10),
        max_pending: 100,
        max_start_failures: 3,
        start_backoff: Duration::from_secs(1),
    };
    change(&mut policy);
    AllocationConfig { policy, slots_per_executor: 2 }
}

fn view(pending: u32, running: u32, executors: &[(&str, bool)]) -> View {
    View {
        pending_tasks: pending,
        running_tasks: running,
        executors: executors.iter().map(|(id, busy)| (ExecutorId::from(*id), *busy)).collect(),
    }
}

fn requested(decisions: &[Decision]) -> u32 {
    decisions.iter().map(|d| if let Decision::Request(n) = d { *n } else { 0 }).sum()
}

fn released(decisions: &[Decision]) -> Vec<ExecutorId> {
    decisions
        .iter()
        .filter_map(|d| if let Decision::Release(id) = d { Some(id.clone()) } else { None })
        .collect()
}

#[test]
fn requests_ramp_one_two_four_eight_after_the_backlog_timeout() {
    let t0 = Instant::now();
    let mut a = Allocator::new(config());
    let backlog = view(200, 0, &[]);
    assert_eq!(requested(&a.step(t0, &backlog)), 0, "no request the moment a backlog appears");
    assert_eq!(requested(&a.step(t0 + Duration::from_millis(999), &backlog)), 0, "nor before its timeout");
    let mut asks = Vec::new();
    for s in 1..=5 {
        asks.push(requested(&a.step(t0 + Duration::from_secs(s), &backlog)));
    }
    assert_eq!(asks, vec![1, 2, 4, 8, 16]);
    assert_eq!(a.starting(), 31);
}

#[test]
fn requests_stop_at_the_target_and_the_maximum() {
    let t0 = Instant::now();
    let mut a = Allocator::new(with(|p| p.max_executors = 5));
    // 7 tasks on 2-slot executors want 4; the maximum is 5.
    let load = view(7, 0, &[]);
    let total: u32 = (0..10).map(|s| requested(&a.step(t0 + Duration::from_secs(s), &load))).sum();
    assert_eq!(total, 4, "the target, ceil(7 / 2)");
    let mut a = Allocator::new(with(|p| p.max_executors = 5));
    let load = view(1000, 0, &[]);
    let total: u32 = (0..10).map(|s| requested(&a.step(t0 + Duration::from_secs(s), &load))).sum();
    assert_eq!(total, 5, "never past the maximum");
}

#[test]
fn executors_asked_for_and_not_registered_are_capped() {
    let t0 = Instant::now();
    let mut a = Allocator::new(with(|p| p.max_pending = 3));
    let load = view(1000, 0, &[]);
    let total: u32 = (0..10).map(|s| requested(&a.step(t0 + Duration::from_secs(s), &load))).sum();
    assert_eq!(total, 3);
    a.registered();
    let more = requested(&a.step(t0 + Duration::from_secs(11), &view(1000, 0, &[("e1", true)])));
    assert_eq!(more, 1, "one registered, one more may be asked for");
}

#[test]
fn the_minimum_and_initial_executors_are_asked_for_at_once() {
    let t0 = Instant::now();
    let mut a = Allocator::new(with(|p| (p.min_executors, p.initial_executors) = (2, Some(3))));
    assert_eq!(requested(&a.step(t0, &view(0, 0, &[]))), 3);
    // All three came and went idle: only those above the minimum are given back.
    for _ in 0..3 {
        a.registered();
    }
    let idle = view(0, 0, &[("e1", false), ("e2", false), ("e3", false)]);
    a.step(t0 + Duration::from_secs(1), &idle);
    let gone = released(&a.step(t0 + Duration::from_secs(100), &idle));
    assert_eq!(gone.len(), 1, "{gone:?}");
    // The released one left and another was lost: back to the minimum at once.
    let after = view(0, 0, &[("e2", false)]);
    assert_eq!(requested(&a.step(t0 + Duration::from_secs(101), &after)), 1);
}

#[test]
fn idle_executors_go_after_the_timeout_and_busy_ones_never() {
    let t0 = Instant::now();
    let mut a = Allocator::new(config());
    let fleet = view(0, 1, &[("busy", true), ("idle", false)]);
    a.step(t0, &fleet);
    assert!(released(&a.step(t0 + Duration::from_secs(59), &fleet)).is_empty(), "not before the timeout");
    assert_eq!(released(&a.step(t0 + Duration::from_secs(60), &fleet)), vec![ExecutorId::from("idle")]);
    assert!(released(&a.step(t0 + Duration::from_secs(61), &fleet)).is_empty(), "released once");
    // The busy one never goes while busy, however long.
    let only_busy = view(0, 1, &[("busy", true)]);
    assert!(released(&a.step(t0 + Duration::from_secs(10_000), &only_busy)).is_empty());
    // Work ending starts its idle clock then, not before.
    let done = view(0, 0, &[("busy", false)]);
    assert!(released(&a.step(t0 + Duration::from_secs(10_001), &done)).is_empty());
    assert_eq!(released(&a.step(t0 + Duration::from_secs(10_061), &done)), vec![ExecutorId::from("busy")]);
}

#[test]
fn the_cooldown_stops_a_grow_shrink_flip_flop() {
    let t0 = Instant::now();
    let mut a = Allocator::new(with(|p| p.idle_timeout = Duration::from_secs(1)));
    let mut fleet: Vec<String> = Vec::new();
    // (second, grew, the fleet was empty before it)
    let mut changes: Vec<(u64, bool, bool)> = Vec::new();
    // A backlog that comes for three seconds and goes for three, for two minutes; the
    // fleet's executors register at once and leave when released.
    for s in 0..120u64 {
        let busy = (s / 3) % 2 == 0;
        let executors: Vec<(&str, bool)> = fleet.iter().map(|id| (id.as_str(), busy)).collect();
        // Twenty tasks in the busy phases: as many run as there are slots.
        let running = if busy { (fleet.len() as u32 * 2).min(20) } else { 0 };
        let pending = if busy { 20 - running } else { 0 };
        let load = view(pending, running, &executors);
        for d in a.step(t0 + Duration::from_secs(s), &load) {
            match d {
                Decision::Request(n) => {
                    let empty = fleet.is_empty();
                    for _ in 0..n {
                        a.registered();
                        fleet.push(format!("e{}", fleet.len() + changes.len()));
                    }
                    changes.push((s, true, empty));
                }
                Decision::Release(id) => {
                    fleet.retain(|e| **e != *id);
                    a.removed(&id);
                    changes.push((s, false, false));
                }
                Decision::GiveUp(r) => panic!("{r}"),
            }
        }
    }
    // Growing from an empty fleet waits for no cooldown (nothing would run at all).
    let flips: Vec<_> =
        changes.windows(2).filter(|w| w[0].1 != w[1].1 && !w[1].2).map(|w| w[1].0 - w[0].0).collect();
    assert!(!flips.is_empty(), "the load should move the fleet both ways: {changes:?}");
    assert!(flips.iter().all(|gap| *gap >= 10), "a change of direction within the cooldown: {changes:?}");
}

#[test]
fn start_failures_back_off_then_give_up_with_the_backends_reason() {
    let t0 = Instant::now();
    let mut a = Allocator::new(with(|p| p.max_pending = 1));
    let load = view(10, 0, &[]);
    a.step(t0, &load);
    assert_eq!(requested(&a.step(t0 + Duration::from_secs(1), &load)), 1);
    assert_eq!(a.start_failed(t0 + Duration::from_secs(2), "image pull failed".into()), None);
    // Backs off a second, then asks again.
    assert_eq!(requested(&a.step(t0 + Duration::from_millis(2500), &load)), 0, "backing off");
    assert_eq!(requested(&a.step(t0 + Duration::from_secs(3), &load)), 1);
    assert_eq!(a.start_failed(t0 + Duration::from_secs(4), "image pull failed".into()), None);
    // Two seconds this time.
    assert_eq!(requested(&a.step(t0 + Duration::from_millis(5500), &load)), 0, "backing off longer");
    assert_eq!(requested(&a.step(t0 + Duration::from_secs(6), &load)), 1);
    match a.start_failed(t0 + Duration::from_secs(7), "exit status 2: bad flag".into()) {
        Some(Decision::GiveUp(reason)) => {
            assert!(reason.contains("exit status 2: bad flag"), "{reason}");
            assert!(reason.contains("flint.dynamicAllocation.maxStartFailures"), "{reason}");
        }
        other => panic!("gave up expected: {other:?}"),
    }
    assert!(a.step(t0 + Duration::from_secs(100), &load).is_empty(), "no more asking, ever");
}

#[test]
fn a_registration_ends_the_failures_in_a_row() {
    let t0 = Instant::now();
    let mut a = Allocator::new(with(|p| p.max_pending = 1));
    let load = view(10, 0, &[]);
    a.step(t0, &load);
    for round in 0..5u64 {
        let at = t0 + Duration::from_secs(1 + round * 10);
        assert_eq!(requested(&a.step(at, &load)), 1, "round {round}");
        assert_eq!(a.start_failed(at, "flaky".into()), None);
        assert_eq!(requested(&a.step(at + Duration::from_secs(5), &load)), 1);
        a.registered();
    }
    assert!(a.given_up().is_none());
}

#[test]
fn a_recurring_job_keeps_what_a_slow_run_needed_and_gives_it_back_over_quiet_runs() {
    let t0 = Instant::now();
    let mut a = Allocator::new(config());
    let period = Duration::from_secs(10);
    let idle = |n: usize| -> View {
        let names: Vec<String> = (0..n).map(|i| format!("e{i}")).collect();
        View {
            pending_tasks: 0,
            running_tasks: 0,
            executors: names.into_iter().map(|id| (ExecutorId::from(id), false)).collect(),
        }
    };
    // A run of 16 tasks took 9 s of its 10: the fleet grows to 8 (16 ÷ 2 slots) at once,
    // without waiting for the next run's backlog.
    a.run_finished(period, Duration::from_secs(9), 16);
    assert_eq!(a.floor(), 8);
    assert_eq!(requested(&a.step(t0, &idle(0))), 8);
    for _ in 0..8 {
        a.registered();
    }
    // Between runs the eight sit idle past the idle timeout and stay.
    a.step(t0 + Duration::from_secs(1), &idle(8));
    assert!(released(&a.step(t0 + Duration::from_secs(300), &idle(8))).is_empty());
    // A run between half and 0.8 of the period changes nothing.
    a.run_finished(period, Duration::from_secs(6), 16);
    assert_eq!(a.floor(), 8);
    // Quick runs give the fleet back gradually: a quarter (at least one) a run.
    let mut floors = Vec::new();
    for _ in 0..6 {
        a.run_finished(period, Duration::from_secs(2), 16);
        floors.push(a.floor());
    }
    assert_eq!(floors, vec![6, 5, 4, 3, 2, 1]);
    let gone = released(&a.step(t0 + Duration::from_secs(400), &idle(8)));
    assert_eq!(gone.len(), 7, "idle executors above the floor go: {gone:?}");
}

#[test]
fn growing_from_no_executor_waits_for_the_backlog_never_for_the_cooldown() {
    let t0 = Instant::now();
    let mut a = Allocator::new(with(|p| p.idle_timeout = Duration::from_secs(1)));
    // One executor, idle past its timeout: given back, the fleet is empty.
    a.step(t0, &view(0, 0, &[("e1", false)]));
    let released_at = t0 + Duration::from_secs(1);
    assert_eq!(released(&a.step(released_at, &view(0, 0, &[("e1", false)]))), vec![ExecutorId::from("e1")]);
    a.removed(&ExecutorId::from("e1"));
    // A job arrives two seconds later, well within the 10 s cooldown.
    let arrives = released_at + Duration::from_secs(2);
    assert_eq!(requested(&a.step(arrives, &view(4, 0, &[]))), 0, "the backlog timeout first");
    assert_eq!(requested(&a.step(arrives + Duration::from_secs(1), &view(4, 0, &[]))), 1, "then at once");
}

#[test]
fn growing_back_after_a_shrink_waits_for_the_cooldown_while_an_executor_is_left() {
    let t0 = Instant::now();
    let mut a = Allocator::new(with(|p| {
        p.idle_timeout = Duration::from_secs(1);
        p.min_executors = 1;
    }));
    let idle = view(0, 0, &[("e1", false), ("e2", false)]);
    a.step(t0, &idle);
    // One of the two is given back; the minimum keeps the other.
    let shrunk = t0 + Duration::from_secs(1);
    assert_eq!(released(&a.step(shrunk, &idle)), vec![ExecutorId::from("e1")]);
    a.removed(&ExecutorId::from("e1"));
    let busy = view(6, 2, &[("e2", true)]);
    a.step(shrunk + Duration::from_secs(2), &busy);
    assert_eq!(requested(&a.step(shrunk + Duration::from_secs(5), &busy)), 0, "within the cooldown");
    assert!(requested(&a.step(shrunk + Duration::from_secs(10), &busy)) > 0, "after it");
}
