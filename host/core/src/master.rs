//! The standalone master's decisions, with no IO and no clock: which workers live under
//! which incarnation, which applications ask for executors, and where each executor
//! goes (Spark's standalone `Master`, made sturdier). `flint master` is plumbing around
//! it, as the driver is around [`crate::ControlCore`]: it feeds [`Event`]s with the time
//! and carries out the [`Action`]s.
//!
//! What Spark's users meet and this does not do: a worker that comes back (a master
//! that restarted, a connection lost) registers as a new incarnation, never "duplicate
//! worker id", while another process claiming a live worker's id is refused, naming
//! it; a request that cannot be placed is answered once, with the reason, and again
//! only when the reason changes; executors of an application that is gone (its
//! driver's connection closed, or it never came back after a master restart) are
//! stopped on every worker.
//!
//! A worker holds the cluster secret, not the truth: what one reports is bounded by
//! what it may hold. The applications it names that the master does not know are kept
//! at most [`MAX_ORPHANED_APPS`] (apart from the registered ones, so a real driver
//! always has room); an executor it claims that the master did not place there is
//! replaced as soon as the application's driver asks for that id; and an executor placed on it that never registers with its driver
//! (the driver says so: [`Event::Abandoned`]) goes back to wait, and the worker gets
//! no placement for [`SHUNNED_FOR`].

use flint_proto::{AppId, ExecutorId, Incarnation, WorkerId};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

/// Most applications and workers a master keeps: a request past them is refused.
pub const MAX_APPS: usize = 1024;
/// Most applications known only from workers' reports (after a master restart), beside
/// the registered ones: an executor reported for one more is stopped.
pub const MAX_ORPHANED_APPS: usize = 1024;
/// How long a worker that did not start an executor it was given gets no placement.
pub const SHUNNED_FOR: Duration = Duration::from_secs(300);
pub const MAX_WORKERS: usize = 10_000;
/// Most executors one application may ask for and not have yet.
pub const MAX_WAITING_PER_APP: usize = 1024;

#[derive(Debug, Clone, PartialEq)]
pub struct MasterConfig {
    /// A worker whose heartbeats stop for this long is lost.
    pub worker_timeout: Duration,
    /// How long executors that workers report for an application the master does not
    /// know (after a master restart) are kept for it to come back.
    pub app_grace: Duration,
}

/// What a worker offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resources {
    pub cores: u32,
    pub memory: u64,
}

impl Resources {
    fn fits(self, need: Resources) -> bool {
        self.cores >= need.cores && self.memory >= need.memory
    }
}

/// An executor as a worker runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Running {
    pub app: AppId,
    pub executor: ExecutorId,
    pub size: Resources,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A worker registered (its first life, or again after it or the master
    /// restarted), with the executors it still runs. Answered by
    /// [`Action::WorkerRegistered`].
    WorkerUp {
        id: WorkerId,
        /// Drawn by the worker's process when it starts: the same on each registration
        /// of one process, another for another process under the same id.
        instance: u64,
        offer: Resources,
        running: Vec<Running>,
    },
    WorkerHeartbeat {
        id: WorkerId,
        incarnation: Incarnation,
    },
    /// Its connection closed or went silent.
    WorkerLost {
        id: WorkerId,
        incarnation: Incarnation,
        reason: String,
    },
    /// A driver registered its application, with `flint.cores.max` if it set one.
    AppUp {
        app: AppId,
        cores_max: Option<u32>,
    },
    /// A driver's connection is gone: its application ends.
    AppLost {
        app: AppId,
        reason: String,
    },
    /// A driver asks for an executor of this size.
    Request {
        app: AppId,
        executor: ExecutorId,
        size: Resources,
    },
    /// A driver gives an executor back.
    Release {
        app: AppId,
        executor: ExecutorId,
    },
    /// A driver says an executor placed for it never registered in its time: the
    /// worker it went to is shunned and the executor stopped (the driver asks anew).
    Abandoned {
        app: AppId,
        executor: ExecutorId,
    },
    /// A worker says an executor it started ended.
    Exited {
        worker: WorkerId,
        incarnation: Incarnation,
        app: AppId,
        executor: ExecutorId,
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    WorkerRegistered {
        id: WorkerId,
        incarnation: Incarnation,
    },
    /// A worker's registration refused (the master is full, or its id is another's).
    WorkerRefused {
        id: WorkerId,
        reason: String,
    },
    /// Start this executor on this worker's life.
    Launch {
        worker: WorkerId,
        incarnation: Incarnation,
        app: AppId,
        executor: ExecutorId,
        size: Resources,
    },
    /// Stop it.
    Kill {
        worker: WorkerId,
        incarnation: Incarnation,
        app: AppId,
        executor: ExecutorId,
    },
    /// The application is over: the worker stops what it runs of it and removes its
    /// work dirs.
    AppEnded {
        worker: WorkerId,
        incarnation: Incarnation,
        app: AppId,
    },
    /// Tell the driver where its executor was placed.
    Placed {
        app: AppId,
        executor: ExecutorId,
        worker: WorkerId,
    },
    /// Tell the driver its request waits, and why (said once per reason).
    Waiting {
        app: AppId,
        executor: ExecutorId,
        reason: String,
    },
    /// Tell the driver its executor ended (or could never be started).
    Ended {
        app: AppId,
        executor: ExecutorId,
        reason: String,
    },
    /// A request refused for good (the application asks for too many at once).
    Refused {
        app: AppId,
        executor: ExecutorId,
        reason: String,
    },
}

#[derive(Debug)]
struct Worker {
    incarnation: Incarnation,
    instance: u64,
    /// No placements on it until then: an executor placed on it never registered.
    shunned_until: Option<Instant>,
    offer: Resources,
    free: Resources,
    last_heard: Instant,
    /// Executors placed on it, by (application, executor).
    executors: BTreeMap<(AppId, ExecutorId), Resources>,
}

#[derive(Debug, Default)]
struct App {
    cores_max: Option<u32>,
    /// Cores of its executors placed and running.
    cores_used: u32,
    /// Requests not yet placed, in the order asked, and what each was last told.
    waiting: VecDeque<(ExecutorId, Resources, Option<String>)>,
    /// Where each of its executors is.
    placed: BTreeMap<ExecutorId, WorkerId>,
    /// Known only from workers' reports (the master restarted): gone past this time
    /// unless its driver registers again.
    orphaned_until: Option<Instant>,
    /// Every worker that ran an executor of it (bounded by the workers): each removes
    /// the application's work dirs when it ends, even once its executors are gone.
    ran_on: BTreeSet<WorkerId>,
    /// Executors known only from a worker's report, never placed by this master: its
    /// driver asking for one is told where the worker says it runs.
    reported: BTreeSet<ExecutorId>,
}

/// A status line for the master's page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerView {
    pub id: WorkerId,
    pub incarnation: Incarnation,
    pub offer: Resources,
    pub free: Resources,
    pub executors: Vec<(AppId, ExecutorId)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppView {
    pub app: AppId,
    pub cores_max: Option<u32>,
    pub cores_used: u32,
    pub executors: Vec<(ExecutorId, WorkerId)>,
    /// Requests waiting, with the reason last given.
    pub waiting: Vec<(ExecutorId, Option<String>)>,
}

pub struct Master {
    config: MasterConfig,
    workers: BTreeMap<WorkerId, Worker>,
    apps: BTreeMap<AppId, App>,
    /// How many of `apps` are orphaned (known only from workers' reports).
    orphans: usize,
    next_incarnation: Incarnation,
    /// Where fairness resumes: the application after the one placed last.
    turn: Option<AppId>,
}

impl Master {
    pub fn new(config: MasterConfig) -> Master {
        Master {
            config,
            workers: BTreeMap::new(),
            apps: BTreeMap::new(),
            orphans: 0,
            next_incarnation: Incarnation(1),
            turn: None,
        }
    }

    pub fn handle(&mut self, now: Instant, event: Event) -> Vec<Action> {
        let mut out = Vec::new();
        match event {
            Event::WorkerUp { id, instance, offer, running } => {
                self.worker_up(now, id, instance, offer, running, &mut out)
            }
            // Changes no capacity and no demand: nothing to place (the hot path of a
            // master with many workers).
            Event::WorkerHeartbeat { id, incarnation } => {
                if let Some(worker) = self.workers.get_mut(&id).filter(|w| w.incarnation == incarnation) {
                    worker.last_heard = now;
                }
                return out;
            }
            Event::WorkerLost { id, incarnation, reason } => {
                if self.workers.get(&id).is_some_and(|w| w.incarnation == incarnation) {
                    self.lose_worker(&id, &reason, &mut out);
                }
            }
            Event::AppUp { app, cores_max } => {
                let registered = self.apps.len() - self.orphans;
                if registered >= MAX_APPS && self.apps.get(&app).is_none_or(|a| a.orphaned_until.is_none()) {
                    // Refused by the plumbing before it gets here; kept bounded all the same.
                    return out;
                }
                let entry = self.apps.entry(app).or_default();
                entry.cores_max = cores_max;
                if entry.orphaned_until.take().is_some() {
                    self.orphans -= 1;
                }
            }
            Event::AppLost { app, reason } => self.end_app(&app, &reason, &mut out),
            Event::Request { app, executor, size } => self.request(app, executor, size, &mut out),
            Event::Release { app, executor } => {
                self.release(&app, &executor, "released by its driver", &mut out)
            }
            Event::Abandoned { app, executor } => self.abandoned(now, app, executor, &mut out),
            Event::Exited { worker, incarnation, app, executor, reason } => {
                let current = self.workers.get(&worker).is_some_and(|w| w.incarnation == incarnation);
                let placed_here = self.apps.get(&app).and_then(|a| a.placed.get(&executor)) == Some(&worker);
                if current && placed_here {
                    self.unplace(&app, &executor);
                    out.push(Action::Ended { app, executor, reason });
                }
            }
        }
        self.place(now, &mut out);
        out
    }

    /// Workers silent past their timeout are lost; orphaned applications past their
    /// grace end.
    pub fn handle_timeout(&mut self, now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        let silent: Vec<WorkerId> = self
            .workers
            .iter()
            .filter(|(_, w)| now.duration_since(w.last_heard) >= self.config.worker_timeout)
            .map(|(id, _)| id.clone())
            .collect();
        for id in silent {
            let reason = format!("no heartbeat for {:?}", self.config.worker_timeout);
            self.lose_worker(&id, &reason, &mut out);
        }
        let orphans: Vec<AppId> = self
            .apps
            .iter()
            .filter(|(_, a)| a.orphaned_until.is_some_and(|until| now >= until))
            .map(|(id, _)| id.clone())
            .collect();
        for app in orphans {
            self.end_app(&app, "its driver did not come back after the master restarted", &mut out);
        }
        for worker in self.workers.values_mut() {
            if worker.shunned_until.is_some_and(|until| now >= until) {
                worker.shunned_until = None;
            }
        }
        self.place(now, &mut out);
        out
    }

    /// When [`Master::handle_timeout`] next has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let workers = self.workers.values().map(|w| w.last_heard + self.config.worker_timeout);
        let shunned = self.workers.values().filter_map(|w| w.shunned_until);
        let orphans = self.apps.values().filter_map(|a| a.orphaned_until);
        workers.chain(shunned).chain(orphans).min()
    }

    fn worker_up(
        &mut self,
        now: Instant,
        id: WorkerId,
        instance: u64,
        offer: Resources,
        running: Vec<Running>,
        out: &mut Vec<Action>,
    ) {
        if !self.workers.contains_key(&id) && self.workers.len() >= MAX_WORKERS {
            let reason = format!("the master keeps at most {MAX_WORKERS} workers");
            out.push(Action::WorkerRefused { id, reason });
            return;
        }
        // Another process under a live worker's id: refused, the live one kept (two
        // would knock each other out in turn). One that died is lost within the
        // worker timeout, and its id is free again.
        if self.workers.get(&id).is_some_and(|w| w.instance != instance) {
            let reason = format!(
                "worker id {id} is taken by another live worker: give each worker its own --worker-id (the default is the host name and process id)"
            );
            out.push(Action::WorkerRefused { id, reason });
            return;
        }
        // An earlier life of this worker is over: what it ran and this life does not
        // report has ended; what it reports carries on, taken in again below.
        let mut held_before = BTreeSet::new();
        let mut shunned_until = None;
        if let Some(old) = self.workers.remove(&id) {
            shunned_until = old.shunned_until;
            held_before.extend(old.executors.keys().cloned());
            for ((app, executor), size) in old.executors {
                if let Some(entry) = self.apps.get_mut(&app) {
                    entry.placed.remove(&executor);
                    entry.cores_used -= size.cores;
                }
                if !running.iter().any(|r| r.app == app && r.executor == executor) {
                    let reason = format!("worker {id} registered again without it");
                    out.push(Action::Ended { app, executor, reason });
                }
            }
        }
        let incarnation = self.next_incarnation;
        self.next_incarnation = incarnation.next();
        let mut worker = Worker {
            incarnation,
            instance,
            shunned_until,
            offer,
            free: offer,
            last_heard: now,
            executors: BTreeMap::new(),
        };
        out.push(Action::WorkerRegistered { id: id.clone(), incarnation });
        for Running { app, executor, size } in running {
            let kill = |out: &mut Vec<Action>, app, executor| {
                out.push(Action::Kill { worker: id.clone(), incarnation, app, executor })
            };
            // An application the master does not know is kept for its driver to come
            // back, as many as there is room for.
            if !self.apps.contains_key(&app) {
                if self.orphans >= MAX_ORPHANED_APPS {
                    kill(out, app, executor);
                    continue;
                }
                self.orphans += 1;
                let orphan = App { orphaned_until: Some(now + self.config.app_grace), ..App::default() };
                self.apps.insert(app.clone(), orphan);
            }
            let entry = self.apps.get_mut(&app).expect("known or just made");
            // Placed elsewhere meanwhile, or more than the worker offers: stopped.
            if entry.placed.contains_key(&executor) || !worker.free.fits(size) {
                kill(out, app, executor);
                continue;
            }
            // One this worker's earlier life was given is its own; any other is taken
            // on its word (a master that restarted knows no better) until the driver
            // asks for that id, which says it is not the driver's.
            if !held_before.contains(&(app.clone(), executor.clone())) {
                entry.reported.insert(executor.clone());
            }
            worker.free.cores -= size.cores;
            worker.free.memory -= size.memory;
            worker.executors.insert((app.clone(), executor.clone()), size);
            entry.cores_used += size.cores;
            entry.waiting.retain(|(e, _, _)| *e != executor);
            entry.placed.insert(executor, id.clone());
            entry.ran_on.insert(id.clone());
        }
        self.workers.insert(id, worker);
    }

    /// An executor placed on a worker never registered with its driver: stopped there,
    /// and the worker given no placement for [`SHUNNED_FOR`] (one that offers what it
    /// does not run would otherwise take every placement). The driver asks again under
    /// a new id, placed elsewhere.
    fn abandoned(&mut self, now: Instant, app: AppId, executor: ExecutorId, out: &mut Vec<Action>) {
        let Some(entry) = self.apps.get_mut(&app) else { return };
        entry.waiting.retain(|(e, _, _)| *e != executor);
        let Some(worker_id) = entry.placed.get(&executor).cloned() else { return };
        self.unplace(&app, &executor);
        let Some(worker) = self.workers.get_mut(&worker_id) else { return };
        worker.shunned_until = Some(now + SHUNNED_FOR);
        let incarnation = worker.incarnation;
        out.push(Action::Kill { worker: worker_id.clone(), incarnation, app, executor });
        // What else it claims to run that this master never placed is taken back too:
        // its word is not good any more.
        let claimed: Vec<(AppId, ExecutorId)> = worker
            .executors
            .keys()
            .filter(|(a, e)| self.apps.get(a).is_some_and(|entry| entry.reported.contains(e)))
            .cloned()
            .collect();
        for (app, executor) in claimed {
            self.unplace(&app, &executor);
            out.push(Action::Kill { worker: worker_id.clone(), incarnation, app, executor });
        }
    }

    fn lose_worker(&mut self, id: &WorkerId, reason: &str, out: &mut Vec<Action>) {
        let Some(worker) = self.workers.remove(id) else { return };
        for ((app, executor), size) in worker.executors {
            if let Some(entry) = self.apps.get_mut(&app) {
                entry.placed.remove(&executor);
                entry.cores_used -= size.cores;
            }
            out.push(Action::Ended { app, executor, reason: format!("worker {id} was lost: {reason}") });
        }
    }

    /// Ends an application: every worker that runs (or was sent) executors of it
    /// stops them and removes its work dirs. The plumbing says why (`_reason`).
    fn end_app(&mut self, app: &AppId, _reason: &str, out: &mut Vec<Action>) {
        let Some(entry) = self.apps.remove(app) else { return };
        if entry.orphaned_until.is_some() {
            self.orphans -= 1;
        }
        for (worker_id, worker) in &mut self.workers {
            let held: Vec<(AppId, ExecutorId)> =
                worker.executors.keys().filter(|(a, _)| a == app).cloned().collect();
            for key in &held {
                let size = worker.executors.remove(key).expect("listed just now");
                worker.free.cores += size.cores;
                worker.free.memory += size.memory;
            }
            if !held.is_empty() || entry.ran_on.contains(worker_id) {
                out.push(Action::AppEnded {
                    worker: worker_id.clone(),
                    incarnation: worker.incarnation,
                    app: app.clone(),
                });
            }
        }
        if self.turn.as_ref() == Some(app) {
            self.turn = None;
        }
    }

    fn request(&mut self, app: AppId, executor: ExecutorId, size: Resources, out: &mut Vec<Action>) {
        let Some(entry) = self.apps.get_mut(&app) else {
            let reason = "the application is not registered with the master".to_owned();
            out.push(Action::Refused { app, executor, reason });
            return;
        };
        // Asked for, though a worker says it runs it already (a master that restarted
        // knows no better): the driver is told where; if it never registers there, the
        // driver abandons it and that worker is shunned.
        if entry.reported.contains(&executor)
            && let Some(worker) = entry.placed.get(&executor)
        {
            out.push(Action::Placed { app: app.clone(), executor: executor.clone(), worker: worker.clone() });
            return;
        }
        if entry.placed.contains_key(&executor) || entry.waiting.iter().any(|(e, _, _)| *e == executor) {
            return; // asked already
        }
        if entry.waiting.len() >= MAX_WAITING_PER_APP {
            let reason = format!("at most {MAX_WAITING_PER_APP} executors may wait to be placed at once");
            out.push(Action::Refused { app, executor, reason });
            return;
        }
        entry.waiting.push_back((executor, size, None));
    }

    fn release(&mut self, app: &AppId, executor: &ExecutorId, reason: &str, out: &mut Vec<Action>) {
        let Some(entry) = self.apps.get_mut(app) else { return };
        entry.waiting.retain(|(e, _, _)| e != executor);
        let Some(worker_id) = entry.placed.get(executor).cloned() else { return };
        let Some(incarnation) = self.workers.get(&worker_id).map(|w| w.incarnation) else { return };
        self.unplace(app, executor);
        out.push(Action::Kill {
            worker: worker_id,
            incarnation,
            app: app.clone(),
            executor: executor.clone(),
        });
        out.push(Action::Ended { app: app.clone(), executor: executor.clone(), reason: reason.to_owned() });
    }

    /// Frees what an executor held.
    fn unplace(&mut self, app: &AppId, executor: &ExecutorId) {
        let Some(entry) = self.apps.get_mut(app) else { return };
        entry.reported.remove(executor);
        let Some(worker_id) = entry.placed.remove(executor) else { return };
        if let Some(worker) = self.workers.get_mut(&worker_id)
            && let Some(size) = worker.executors.remove(&(app.clone(), executor.clone()))
        {
            worker.free.cores += size.cores;
            worker.free.memory += size.memory;
            entry.cores_used -= size.cores;
        }
    }

    /// Places waiting requests: one per application in turn (fair between
    /// applications that ask at once), each on the worker with the most free cores that
    /// fits it (spreading an application's executors, as `spark.deploy.spreadOut`),
    /// within the application's `flint.cores.max`. A request that cannot be placed now
    /// is told why, once per reason.
    fn place(&mut self, now: Instant, out: &mut Vec<Action>) {
        let usable = |w: &Worker| w.shunned_until.is_none_or(|until| now >= until);
        let mut order: Vec<AppId> = self.apps.keys().cloned().collect();
        if let Some(turn) = &self.turn {
            let at = order.iter().position(|a| a > turn).unwrap_or(0);
            order.rotate_left(at);
        }
        loop {
            let mut placed_any = false;
            for app in &order {
                let entry = self.apps.get_mut(app).expect("listed");
                let Some((executor, size, _)) = entry.waiting.front().cloned() else { continue };
                if let Some(max) = entry.cores_max
                    && entry.cores_used.saturating_add(size.cores) > max
                {
                    continue;
                }
                let best = self
                    .workers
                    .iter()
                    .filter(|(_, w)| usable(w) && w.free.fits(size))
                    .max_by_key(|(id, w)| (w.free.cores, std::cmp::Reverse((*id).clone())))
                    .map(|(id, _)| id.clone());
                let Some(worker_id) = best else { continue };
                let worker = self.workers.get_mut(&worker_id).expect("found");
                worker.free.cores -= size.cores;
                worker.free.memory -= size.memory;
                worker.executors.insert((app.clone(), executor.clone()), size);
                entry.waiting.pop_front();
                entry.cores_used += size.cores;
                entry.placed.insert(executor.clone(), worker_id.clone());
                entry.ran_on.insert(worker_id.clone());
                let incarnation = worker.incarnation;
                out.push(Action::Launch {
                    worker: worker_id.clone(),
                    incarnation,
                    app: app.clone(),
                    executor: executor.clone(),
                    size,
                });
                out.push(Action::Placed { app: app.clone(), executor, worker: worker_id });
                self.turn = Some(app.clone());
                placed_any = true;
            }
            if !placed_any {
                break;
            }
        }
        // What still waits is told why, when the reason is new.
        let largest =
            self.workers.values().filter(|w| usable(w)).map(|w| w.free).max_by_key(|f| (f.cores, f.memory));
        let shunned = self.workers.values().filter(|w| !usable(w)).count();
        for (app, entry) in &mut self.apps {
            let (cores_max, cores_used) = (entry.cores_max, entry.cores_used);
            for (executor, size, told) in &mut entry.waiting {
                let reason = why_waiting(*size, cores_max, cores_used, largest, shunned);
                if told.as_deref() != Some(reason.as_str()) {
                    *told = Some(reason.clone());
                    out.push(Action::Waiting { app: app.clone(), executor: executor.clone(), reason });
                }
            }
        }
    }

    pub fn workers(&self) -> Vec<WorkerView> {
        self.workers
            .iter()
            .map(|(id, w)| WorkerView {
                id: id.clone(),
                incarnation: w.incarnation,
                offer: w.offer,
                free: w.free,
                executors: w.executors.keys().cloned().collect(),
            })
            .collect()
    }

    pub fn apps(&self) -> Vec<AppView> {
        self.apps
            .iter()
            .map(|(app, a)| AppView {
                app: app.clone(),
                cores_max: a.cores_max,
                cores_used: a.cores_used,
                executors: a.placed.iter().map(|(e, w)| (e.clone(), w.clone())).collect(),
                waiting: a.waiting.iter().map(|(e, _, told)| (e.clone(), told.clone())).collect(),
            })
            .collect()
    }
}

/// Why a request of `size` cannot be placed now.
fn why_waiting(
    size: Resources,
    cores_max: Option<u32>,
    cores_used: u32,
    largest: Option<Resources>,
    shunned: usize,
) -> String {
    let needs = format!("needs {} and {}", cores(size.cores), bytes(size.memory));
    if let Some(max) = cores_max
        && cores_used.saturating_add(size.cores) > max
    {
        return format!("{needs}; the application uses {cores_used} of its flint.cores.max ({max})");
    }
    let free = match largest {
        None => format!("{needs}; no worker is registered"),
        Some(free) => {
            format!("{needs}; the largest free worker has {} and {}", cores(free.cores), bytes(free.memory))
        }
    };
    match shunned {
        0 => free,
        1 => format!(
            "{free} (1 more worker gets no placement for now: an executor placed on it did not register with its driver)"
        ),
        n => format!(
            "{free} ({n} more workers get no placement for now: an executor placed on them did not register with its driver)"
        ),
    }
}

fn cores(n: u32) -> String {
    match n {
        1 => "1 core".to_owned(),
        n => format!("{n} cores"),
    }
}

fn bytes(n: u64) -> String {
    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;
    if n >= GIB && n.is_multiple_of(GIB) {
        format!("{} GiB", n / GIB)
    } else {
        format!("{} MiB", n.div_ceil(MIB))
    }
}

#[cfg(test)]
mod tests;
