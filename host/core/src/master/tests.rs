//! The master stepped with fake time: placement spread over workers within each
//! application's cores, fairness between applications, reasons said once, lost and
//! returning workers, ended applications, and a master restart re-joined.

use super::*;

const GIB: u64 = 1 << 30;

fn master() -> (Master, Instant) {
    let config = MasterConfig { worker_timeout: Duration::from_secs(3), app_grace: Duration::from_secs(10) };
    (Master::new(config), Instant::now())
}

fn offer(cores: u32, gib: u64) -> Resources {
    Resources { cores, memory: gib * GIB }
}

fn worker(m: &mut Master, now: Instant, id: &str, cores: u32) -> Incarnation {
    let out = m.handle(
        now,
        Event::WorkerUp { id: id.into(), instance: 1, offer: offer(cores, 8), running: Vec::new() },
    );
    match out.first() {
        Some(Action::WorkerRegistered { incarnation, .. }) => *incarnation,
        other => panic!("{other:?}"),
    }
}

fn ask(m: &mut Master, now: Instant, app: &str, executor: &str, cores: u32) -> Vec<Action> {
    let size = offer(cores, 1);
    m.handle(now, Event::Request { app: app.into(), executor: executor.into(), size })
}

/// Where each launch in `out` went: (app, executor, worker).
fn launches(out: &[Action]) -> Vec<(String, String, String)> {
    out.iter()
        .filter_map(|a| match a {
            Action::Launch { worker, app, executor, .. } => {
                Some((app.to_string(), executor.to_string(), worker.to_string()))
            }
            _ => None,
        })
        .collect()
}

fn reasons(out: &[Action]) -> Vec<String> {
    out.iter()
        .filter_map(|a| match a {
            Action::Waiting { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn executors_spread_over_workers_within_cores_max() {
    let (mut m, now) = master();
    for id in ["w1", "w2", "w3"] {
        worker(&mut m, now, id, 4);
    }
    m.handle(now, Event::AppUp { app: "a".into(), cores_max: Some(6) });
    let mut placed = Vec::new();
    for e in ["e1", "e2", "e3", "e4"] {
        placed.extend(launches(&ask(&mut m, now, "a", e, 2)));
    }
    let workers: Vec<&str> = placed.iter().map(|(_, _, w)| w.as_str()).collect();
    assert_eq!(workers, ["w1", "w2", "w3"], "spread, and the fourth past 6 cores waits");
    let app = &m.apps()[0];
    assert_eq!((app.cores_used, app.waiting.len()), (6, 1));
    assert!(app.waiting[0].1.as_deref().unwrap().contains("flint.cores.max (6)"), "{app:?}");
    // One gives back: the waiting one takes its place.
    let out = m.handle(now, Event::Release { app: "a".into(), executor: "e1".into() });
    assert!(out.iter().any(|a| matches!(a, Action::Kill { executor, .. } if executor == "e1")), "{out:?}");
    assert_eq!(launches(&out), [("a".into(), "e4".into(), "w1".into())]);
}

#[test]
fn applications_asking_at_once_take_turns() {
    let (mut m, now) = master();
    m.handle(now, Event::AppUp { app: "a".into(), cores_max: None });
    m.handle(now, Event::AppUp { app: "b".into(), cores_max: None });
    for i in 0..4 {
        ask(&mut m, now, "a", &format!("a{i}"), 1);
        ask(&mut m, now, "b", &format!("b{i}"), 1);
    }
    // Four cores for eight requests: two each.
    let out = m.handle(
        now,
        Event::WorkerUp { id: "w".into(), instance: 1, offer: offer(4, 8), running: Vec::new() },
    );
    let apps: Vec<String> = launches(&out).into_iter().map(|(a, _, _)| a).collect();
    assert_eq!(apps, ["a", "b", "a", "b"]);
}

#[test]
fn a_request_no_worker_can_hold_is_told_why_once() {
    let (mut m, now) = master();
    m.handle(now, Event::AppUp { app: "a".into(), cores_max: None });
    let out = ask(&mut m, now, "a", "e1", 4);
    assert_eq!(reasons(&out), ["needs 4 cores and 1 GiB; no worker is registered"]);
    let out = m.handle(
        now,
        Event::WorkerUp { id: "w".into(), instance: 1, offer: offer(2, 8), running: Vec::new() },
    );
    assert_eq!(reasons(&out), ["needs 4 cores and 1 GiB; the largest free worker has 2 cores and 8 GiB"]);
    // Nothing new: nothing said again, whatever else happens.
    for later in 1..20 {
        let out = m.handle_timeout(now + Duration::from_millis(later * 100));
        assert!(reasons(&out).is_empty(), "{out:?}");
        m.handle(now, Event::WorkerHeartbeat { id: "w".into(), incarnation: Incarnation(1) });
    }
}

#[test]
fn a_lost_worker_ends_its_executors_and_comes_back_as_a_new_incarnation() {
    let (mut m, now) = master();
    let first = worker(&mut m, now, "w1", 2);
    worker(&mut m, now, "w2", 2);
    m.handle(now, Event::AppUp { app: "a".into(), cores_max: None });
    ask(&mut m, now, "a", "e1", 2);
    ask(&mut m, now, "a", "e2", 2);
    // w2 keeps beating; w1 falls silent.
    let later = now + Duration::from_secs(2);
    m.handle(later, Event::WorkerHeartbeat { id: "w2".into(), incarnation: Incarnation(2) });
    assert_eq!(m.poll_timeout(), Some(now + Duration::from_secs(3)));
    let out = m.handle_timeout(now + Duration::from_secs(3));
    let ended: Vec<&Action> = out.iter().filter(|a| matches!(a, Action::Ended { .. })).collect();
    assert_eq!(ended.len(), 1, "{out:?}");
    assert!(
        matches!(ended[0], Action::Ended { executor, reason, .. } if executor == "e1" && reason.contains("w1"))
    );
    // It comes back: a new life, no duplicate, and its late word of the old life
    // changes nothing.
    let again = worker(&mut m, now + Duration::from_secs(4), "w1", 2);
    assert_ne!(again, first);
    let stale = Event::Exited {
        worker: "w1".into(),
        incarnation: first,
        app: "a".into(),
        executor: "e1".into(),
        reason: "old".into(),
    };
    assert!(m.handle(now + Duration::from_secs(4), stale).is_empty());
    // The driver asks again; the new life gets it.
    let out = ask(&mut m, now + Duration::from_secs(4), "a", "e3", 2);
    assert!(
        matches!(&out[0], Action::Launch { worker, incarnation, .. } if worker == "w1" && *incarnation == again)
    );
}

#[test]
fn an_ended_application_is_stopped_on_every_worker_that_ran_it() {
    let (mut m, now) = master();
    worker(&mut m, now, "w1", 2);
    worker(&mut m, now, "w2", 2);
    worker(&mut m, now, "w3", 2);
    m.handle(now, Event::AppUp { app: "a".into(), cores_max: None });
    m.handle(now, Event::AppUp { app: "b".into(), cores_max: None });
    ask(&mut m, now, "a", "e1", 2);
    ask(&mut m, now, "a", "e2", 2);
    ask(&mut m, now, "b", "e1", 2);
    let out =
        m.handle(now, Event::AppLost { app: "a".into(), reason: "its driver's connection closed".into() });
    let mut told: Vec<String> = out
        .iter()
        .filter_map(|a| match a {
            Action::AppEnded { worker, app, .. } if app == "a" => Some(worker.to_string()),
            _ => None,
        })
        .collect();
    told.sort();
    assert_eq!(told.len(), 2, "{out:?}");
    let free: u32 = m.workers().iter().map(|w| w.free.cores).sum();
    assert_eq!(free, 4, "a's cores are free, b's held");
    assert_eq!(m.apps().len(), 1);

    // b's executor ended before b did (its driver died and its executors noticed
    // first): its worker still hears of b's end, to remove b's work dirs.
    let w = m.apps()[0].executors[0].1.clone();
    let life = m.workers().iter().find(|v| v.id == w).unwrap().incarnation;
    let exited = Event::Exited {
        worker: w.clone(),
        incarnation: life,
        app: "b".into(),
        executor: "e1".into(),
        reason: "process exited with status 16".into(),
    };
    m.handle(now, exited);
    let out = m.handle(now, Event::AppLost { app: "b".into(), reason: "gone".into() });
    assert_eq!(out, vec![Action::AppEnded { worker: w, incarnation: life, app: "b".into() }]);
}

#[test]
fn after_a_master_restart_workers_and_drivers_rejoin_with_what_they_hold() {
    let (mut m, now) = master();
    // The new master hears from a worker first: it runs executors of "a" and "gone".
    let running = vec![
        Running { app: "a".into(), executor: "e1".into(), size: offer(2, 1) },
        Running { app: "gone".into(), executor: "e1".into(), size: offer(1, 1) },
    ];
    let out = m.handle(now, Event::WorkerUp { id: "w".into(), instance: 1, offer: offer(4, 8), running });
    assert!(matches!(out[0], Action::WorkerRegistered { .. }));
    assert_eq!(m.workers()[0].free.cores, 1);
    // "a"'s driver re-registers within the grace; "gone"'s never does.
    m.handle(now + Duration::from_secs(1), Event::AppUp { app: "a".into(), cores_max: None });
    let out = ask(&mut m, now + Duration::from_secs(1), "a", "e1", 2);
    assert!(launches(&out).is_empty(), "it runs already: {out:?}");
    assert_eq!(m.poll_timeout(), Some(now + Duration::from_secs(3)), "the worker's heartbeat first");
    m.handle(
        now + Duration::from_secs(2),
        Event::WorkerHeartbeat { id: "w".into(), incarnation: Incarnation(1) },
    );
    m.handle(
        now + Duration::from_secs(4),
        Event::WorkerHeartbeat { id: "w".into(), incarnation: Incarnation(1) },
    );
    m.handle(
        now + Duration::from_secs(6),
        Event::WorkerHeartbeat { id: "w".into(), incarnation: Incarnation(1) },
    );
    m.handle(
        now + Duration::from_secs(8),
        Event::WorkerHeartbeat { id: "w".into(), incarnation: Incarnation(1) },
    );
    let out = m.handle_timeout(now + Duration::from_secs(10));
    assert!(
        out.iter().any(|a| matches!(a, Action::AppEnded { app, .. } if app == "gone")),
        "an application that never came back is stopped: {out:?}"
    );
    let apps: Vec<String> = m.apps().into_iter().map(|a| a.app.to_string()).collect();
    assert_eq!(apps, ["a"]);
    assert_eq!(m.workers()[0].free.cores, 2);
}

#[test]
fn a_worker_that_reconnects_keeps_the_executors_it_still_runs() {
    let (mut m, now) = master();
    let first = worker(&mut m, now, "w", 4);
    m.handle(now, Event::AppUp { app: "a".into(), cores_max: None });
    ask(&mut m, now, "a", "e1", 2);
    ask(&mut m, now, "a", "e2", 2);
    // Its connection dropped and came back before the master noticed: e1 still runs,
    // e2 ended meanwhile.
    let running = vec![Running { app: "a".into(), executor: "e1".into(), size: offer(2, 1) }];
    let out = m.handle(now, Event::WorkerUp { id: "w".into(), instance: 1, offer: offer(4, 8), running });
    let ended: Vec<&ExecutorId> = out
        .iter()
        .filter_map(|a| match a {
            Action::Ended { executor, .. } => Some(executor),
            _ => None,
        })
        .collect();
    assert_eq!(ended, ["e2"], "{out:?}");
    let w = &m.workers()[0];
    assert_ne!(w.incarnation, first);
    assert_eq!((w.free.cores, w.executors.len()), (2, 1));
    assert_eq!(m.apps()[0].cores_used, 2);
}

#[test]
fn a_second_process_under_a_live_workers_id_is_refused_and_the_first_keeps_serving() {
    let (mut m, now) = master();
    let first = worker(&mut m, now, "host", 2);
    let twin = Event::WorkerUp { id: "host".into(), instance: 2, offer: offer(2, 8), running: Vec::new() };
    let out = m.handle(now, twin.clone());
    match &out[..] {
        [Action::WorkerRefused { id, reason }] => {
            assert_eq!(id, "host");
            assert!(reason.contains("worker id host is taken") && reason.contains("--worker-id"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(m.workers()[0].incarnation, first, "the first keeps its life");
    // Its own process registering again (a lost connection) is a new life, as ever.
    let again = worker(&mut m, now, "host", 2);
    assert_ne!(again, first);
    // Once the first is lost, the id is free for another process.
    let out = m.handle_timeout(now + Duration::from_secs(3));
    assert!(m.workers().is_empty(), "{out:?}");
    assert!(matches!(m.handle(now + Duration::from_secs(3), twin)[0], Action::WorkerRegistered { .. }));
}

#[test]
fn workers_naming_made_up_applications_fill_no_more_than_their_bound_and_drivers_still_register() {
    let (mut m, now) = master();
    for w in 0..3 {
        let running = (0..MAX_ORPHANED_APPS)
            .map(|i| Running { app: format!("fake-{w}-{i}").into(), executor: "e".into(), size: offer(1, 0) })
            .collect();
        let up = Event::WorkerUp {
            id: format!("liar-{w}").into(),
            instance: 1,
            offer: offer(1 << 16, 1 << 20),
            running,
        };
        let out = m.handle(now, up);
        let killed = out.iter().filter(|a| matches!(a, Action::Kill { .. })).count();
        assert_eq!(killed, if w == 0 { 0 } else { MAX_ORPHANED_APPS }, "liar {w}");
    }
    assert_eq!(m.apps().len(), MAX_ORPHANED_APPS);
    // Every registered place is still there for real drivers.
    for i in 0..MAX_APPS {
        m.handle(now, Event::AppUp { app: format!("real-{i}").into(), cores_max: None });
    }
    assert_eq!(m.apps().len(), MAX_ORPHANED_APPS + MAX_APPS);
    assert!(m.apps().iter().any(|a| a.app == "real-1023"));
}

#[test]
fn a_worker_that_starts_nothing_it_is_given_is_shunned_and_the_next_request_goes_elsewhere() {
    let (mut m, now) = master();
    let honest = worker(&mut m, now, "honest", 2);
    // Offers far more than it runs: it takes the first placement.
    let liar = worker(&mut m, now, "liar", 1 << 16);
    m.handle(now, Event::AppUp { app: "a".into(), cores_max: None });
    let out = ask(&mut m, now, "a", "1", 1);
    assert_eq!(launches(&out), [("a".into(), "1".into(), "liar".into())]);
    // The driver heard nothing from it in its time, and says so.
    let later = now + Duration::from_secs(60);
    let out = m.handle(later, Event::Abandoned { app: "a".into(), executor: "1".into() });
    assert!(out.iter().any(|a| matches!(a, Action::Kill { worker, .. } if worker == "liar")), "{out:?}");
    let out = ask(&mut m, later, "a", "2", 1);
    assert_eq!(launches(&out), [("a".into(), "2".into(), "honest".into())]);
    // Past the shun (both heard from meanwhile), it may be given work again.
    let end = later + SHUNNED_FOR;
    for (id, incarnation) in [("honest", honest), ("liar", liar)] {
        m.handle(end, Event::WorkerHeartbeat { id: id.into(), incarnation });
    }
    let out = ask(&mut m, end, "a", "3", 2);
    assert_eq!(launches(&out), [("a".into(), "3".into(), "liar".into())]);
}

#[test]
fn executor_ids_a_worker_claims_cost_their_driver_one_start_and_then_the_claims_go() {
    let (mut m, now) = master();
    worker(&mut m, now, "honest", 4);
    m.handle(now, Event::AppUp { app: "a".into(), cores_max: None });
    // A worker claims to run the ids the driver will ask for next.
    let running = (1..=3)
        .map(|i| Running { app: "a".into(), executor: i.to_string().into(), size: offer(1, 0) })
        .collect();
    m.handle(now, Event::WorkerUp { id: "liar".into(), instance: 1, offer: offer(8, 8), running });
    // Asked for, the driver is told where the worker says it runs: not "asked already".
    let out = ask(&mut m, now, "a", "1", 1);
    assert!(out.iter().any(|a| matches!(a, Action::Placed { worker, .. } if worker == "liar")), "{out:?}");
    // It never registers: the worker is shunned and every claim of its goes with it.
    let out = m.handle(now, Event::Abandoned { app: "a".into(), executor: "1".into() });
    let killed = out.iter().filter(|a| matches!(a, Action::Kill { worker, .. } if worker == "liar")).count();
    assert_eq!(killed, 3, "{out:?}");
    let out = ask(&mut m, now, "a", "2", 1);
    assert_eq!(launches(&out), [("a".into(), "2".into(), "honest".into())]);
}

#[test]
fn reasons_count_their_cores_and_workers_in_words() {
    let size = |cores| Resources { cores, memory: GIB };
    assert_eq!(
        why_waiting(size(1), None, 0, Some(size(1)), 1),
        "needs 1 core and 1 GiB; the largest free worker has 1 core and 1 GiB (1 more worker gets no \
         placement for now: an executor placed on it did not register with its driver)"
    );
    assert!(why_waiting(size(2), None, 0, None, 3).contains("(3 more workers get no placement"));
    assert_eq!(
        why_waiting(size(1), Some(1), 1, None, 0),
        "needs 1 core and 1 GiB; the application uses 1 of its flint.cores.max (1)"
    );
}
