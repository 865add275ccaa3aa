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
    let out = m.handle(now, Event::WorkerUp { id: id.into(), offer: offer(cores, 8), running: Vec::new() });
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
    let out = m.handle(now, Event::WorkerUp { id: "w".into(), offer: offer(4, 8), running: Vec::new() });
    let apps: Vec<String> = launches(&out).into_iter().map(|(a, _, _)| a).collect();
    assert_eq!(apps, ["a", "b", "a", "b"]);
}

#[test]
fn a_request_no_worker_can_hold_is_told_why_once() {
    let (mut m, now) = master();
    m.handle(now, Event::AppUp { app: "a".into(), cores_max: None });
    let out = ask(&mut m, now, "a", "e1", 4);
    assert_eq!(reasons(&out), ["needs 4 cores and 1 GiB; no worker is registered"]);
    let out = m.handle(now, Event::WorkerUp { id: "w".into(), offer: offer(2, 8), running: Vec::new() });
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
    let out = m.handle(now, Event::WorkerUp { id: "w".into(), offer: offer(4, 8), running });
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
    let out = m.handle(now, Event::WorkerUp { id: "w".into(), offer: offer(4, 8), running });
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
