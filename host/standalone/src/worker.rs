//! `flint worker`: one machine's daemon. It registers with the master (again, as a new
//! life, whenever its connection is lost or the master restarts, saying what it still
//! runs), heartbeats, starts `flint executor` processes on the master's request and
//! reports each one's end. An executor gets its own work dir under the application's,
//! and the application's secret through a file only this user can read; it dies with
//! the worker (`PR_SET_PDEATHSIG`, as the driver's own `local` executors do). When an
//! application ends, its executors are killed and its work dirs removed
//! (`--cleanup`, on by default).

use flint_driver::backend::{ExecutorBackend, LocalBackend, LocalBackendConfig, Reporter};
use flint_net::{DriverUrl, Secret, Traffic, WhenRefused, connect_as, hello, read_frame, write_frame};
use flint_proto::standalone::{LaunchExecutor, RunningExecutor, ToWorker, WorkerMessage, check_name};
use flint_proto::wire::{HelloReply, Rejection, Role};
use flint_proto::{AppId, ExecutorId, WorkerId};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// Exits waiting to be told to the master; executors end at most as often as they are
/// started, and a worker runs at most its cores of them.
const EXITS: usize = 4096;
/// How long an ended application's executors get to be reaped before its folder goes.
const REAP_WAIT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct WorkerOptions {
    pub master: DriverUrl,
    pub secret: Secret,
    pub id: WorkerId,
    /// The host name the master shows for it.
    pub host: String,
    pub cores: u32,
    pub memory: u64,
    pub work_dir: PathBuf,
    /// The `flint` binary executors run as.
    pub program: PathBuf,
    pub cleanup: bool,
    pub idle_timeout: Duration,
}

/// Why a worker stopped for good.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("the master refused this worker: {0}")]
    Rejected(Rejection),
    #[error("the master refused this worker: {0}")]
    Refused(String),
    #[error("{0}")]
    Connect(#[from] flint_net::ConnectError),
}

/// One application's executors on this worker.
struct AppProcesses {
    processes: LocalBackend,
    sizes: HashMap<ExecutorId, (u32, u64)>,
}

#[derive(Clone)]
struct Worker {
    options: Arc<WorkerOptions>,
    /// Drawn once for this process: its registrations are one worker's lives.
    instance: u64,
    apps: Arc<Mutex<HashMap<AppId, AppProcesses>>>,
    exits: mpsc::Sender<(AppId, ExecutorId, String)>,
}

/// Serves the master until a refusal it cannot mend or `shutdown`; executors it started
/// are asked to leave when it returns, and killed if they have not within 6 s.
pub async fn run_worker(
    options: WorkerOptions,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), WorkerError> {
    let (exits, mut exit_rx) = mpsc::channel(EXITS);
    let worker = Worker { options: Arc::new(options), instance: rand::random(), apps: Arc::default(), exits };
    let serving = async {
        let mut registered = false;
        loop {
            match worker.session(&mut exit_rx, &mut registered).await {
                Err(e @ (WorkerError::Rejected(_) | WorkerError::Refused(_))) => return Err(e),
                // The first registration must succeed within its time: a wrong URL is
                // said at once. Later, the master may be restarting: keep trying.
                Err(e) if !registered => return Err(e),
                Err(e) => tracing::warn!(error = %e, "master lost; registering again"),
                Ok(()) => tracing::warn!("master connection ended; registering again"),
            }
            tokio::time::sleep(Duration::from_millis(rand::random_range(100..500))).await;
        }
    };
    let result = tokio::select! {
        result = serving => result,
        () = shutdown => Ok(()),
    };
    // Stopped: executors are asked to leave (SIGTERM: they decommission, handing their
    // map outputs over), and killed past the local backend's grace.
    let apps: Vec<AppProcesses> = worker.apps.lock().expect("apps lock").drain().map(|(_, a)| a).collect();
    for app in &apps {
        for id in app.processes.running_ids() {
            app.processes.stop(&id);
        }
    }
    let until = tokio::time::Instant::now() + REAP_WAIT + Duration::from_secs(1);
    while apps.iter().any(|a| a.processes.running() > 0) && tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    result
}

impl Worker {
    /// One connection to the master: register, then serve until it is lost.
    async fn session(
        &self,
        exit_rx: &mut mpsc::Receiver<(AppId, ExecutorId, String)>,
        registered: &mut bool,
    ) -> Result<(), WorkerError> {
        let o = &self.options;
        let first = !*registered;
        let within = if first { Duration::from_secs(60) } else { Duration::from_secs(3600) };
        let when_refused = if first { WhenRefused::GiveUp } else { WhenRefused::Retry };
        let (_endpoint, connection) =
            connect_as(&o.master, within, o.idle_timeout, None, when_refused, Traffic::Requests).await?;
        let lost = |e: flint_net::FrameError| {
            WorkerError::Connect(flint_net::ConnectError::Unreachable(e.to_string()))
        };
        let (reply, mut send, mut recv) =
            hello(&connection, &o.secret, Role::Worker, "", None, None).await.map_err(lost)?;
        if let HelloReply::Rejected(rejection) = reply {
            return Err(WorkerError::Rejected(rejection));
        }
        // What ended while no master listened is told by what is not in this list.
        while exit_rx.try_recv().is_ok() {}
        let running = self.running();
        let register = WorkerMessage::Register {
            id: o.id.clone(),
            instance: self.instance,
            host: o.host.clone(),
            cores: o.cores,
            memory: o.memory,
            running,
        };
        write_frame(&mut send, &register).await.map_err(lost)?;
        let heartbeat;
        match read_frame::<ToWorker>(&mut recv).await.map_err(lost)? {
            Some(ToWorker::Registered { incarnation, heartbeat_ms }) => {
                tracing::info!(worker_id = %o.id, %incarnation, master = %o.master, "registered with the master");
                heartbeat = Duration::from_millis(heartbeat_ms.clamp(10, 60_000));
                *registered = true;
            }
            Some(ToWorker::Refused { reason }) => return Err(WorkerError::Refused(reason)),
            other => {
                return Err(lost(flint_net::FrameError::Io(std::io::Error::other(format!(
                    "unexpected answer: {other:?}"
                )))));
            }
        }
        let mut beat = tokio::time::interval(heartbeat);
        let mut orders = crate::frames::read_frames::<ToWorker>(recv);
        loop {
            tokio::select! {
                order = orders.recv() => match order {
                    Some(order) => self.obey(order.map_err(lost)?),
                    None => return Ok(()),
                },
                Some((app, executor, reason)) = exit_rx.recv() => {
                    if let Some(a) = self.apps.lock().expect("apps lock").get_mut(&app) {
                        a.sizes.remove(&executor);
                    }
                    write_frame(&mut send, &WorkerMessage::Exited { app, executor, reason }).await.map_err(lost)?;
                }
                _ = beat.tick() => write_frame(&mut send, &WorkerMessage::Heartbeat).await.map_err(lost)?,
            }
        }
    }

    /// What runs now; sizes of what ended while no master listened are forgotten.
    fn running(&self) -> Vec<RunningExecutor> {
        let mut apps = self.apps.lock().expect("apps lock");
        let mut running = Vec::new();
        for (app, a) in apps.iter_mut() {
            let ids = a.processes.running_ids();
            a.sizes.retain(|id, _| ids.contains(id));
            for executor in ids {
                let (cores, memory) = a.sizes.get(&executor).copied().unwrap_or((1, 0));
                running.push(RunningExecutor { app: app.clone(), executor, cores, memory });
            }
        }
        running
    }

    fn obey(&self, message: ToWorker) {
        match message {
            ToWorker::Launch(launch) => {
                let (app, executor) = (launch.app.clone(), launch.executor.clone());
                if let Err(reason) = self.launch(launch) {
                    tracing::warn!(app_id = %app, executor_id = %executor, %reason, "executor not started");
                    let _ = self.exits.try_send((app, executor, reason));
                }
            }
            ToWorker::Kill { app, executor } => {
                if let Some(a) = self.apps.lock().expect("apps lock").get(&app) {
                    a.processes.stop(&executor);
                }
            }
            ToWorker::AppEnded { app } => self.end_app(app),
            ToWorker::Registered { .. } | ToWorker::Refused { .. } => {}
        }
    }

    fn launch(&self, launch: LaunchExecutor) -> Result<(), String> {
        check_name(&launch.app)?;
        check_name(&launch.executor)?;
        let o = &self.options;
        let mut apps = self.apps.lock().expect("apps lock");
        if !apps.contains_key(&launch.app) {
            let dir = o.work_dir.join(launch.app.as_str());
            let secret_file = private_secret(&dir, &launch.secret)?;
            let processes = LocalBackend::new(LocalBackendConfig {
                program: o.program.clone(),
                driver_url: launch.driver_url.clone(),
                app_id: launch.app.to_string(),
                secret_file,
                args: vec![
                    "--cores".into(),
                    launch.cores.to_string(),
                    "--memory".into(),
                    launch.memory.to_string(),
                    "--hostname".into(),
                    o.host.clone(),
                    // Shuffle files stay under this worker's folder: a driver's
                    // flint.local.dir names a path on the driver's machine.
                    "--conf".into(),
                    format!("flint.local.dir={}", dir.display()),
                ],
                work_root: Some(dir),
            });
            apps.insert(launch.app.clone(), AppProcesses { processes, sizes: HashMap::new() });
        }
        let a = apps.get_mut(&launch.app).expect("inserted");
        if a.processes.running_ids().contains(&launch.executor) {
            // Asked twice (a message repeated across a master restart): it runs.
            return Ok(());
        }
        a.sizes.insert(launch.executor.clone(), (launch.cores, launch.memory));
        // Called with `apps` locked when the process cannot even be spawned: it only
        // queues the exit, which the session tells the master and forgets.
        let (exits, app) = (self.exits.clone(), launch.app.clone());
        let report = Reporter::new(move |executor, news| {
            if let flint_driver::backend::News::Exited(reason) = news {
                let _ = exits.try_send((app.clone(), executor, reason));
            }
        });
        tracing::info!(app_id = %launch.app, executor_id = %launch.executor, cores = launch.cores, "starting executor");
        a.processes.start(vec![launch.executor], report);
        Ok(())
    }

    /// Kills what runs of an ended application and, once it is reaped, removes its
    /// folder (work dirs and secret).
    fn end_app(&self, app: AppId) {
        let Some(ended) = self.apps.lock().expect("apps lock").remove(&app) else {
            self.remove_dir(&app);
            return;
        };
        tracing::info!(app_id = %app, executors = ended.processes.running(), "application ended: stopping its executors");
        ended.processes.kill_all();
        let worker = self.clone();
        tokio::spawn(async move {
            let until = tokio::time::Instant::now() + REAP_WAIT;
            while ended.processes.running() > 0 && tokio::time::Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            drop(ended);
            worker.remove_dir(&app);
        });
    }

    fn remove_dir(&self, app: &AppId) {
        if !self.options.cleanup || check_name(app).is_err() {
            return;
        }
        let dir = self.options.work_dir.join(app.as_str());
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => tracing::info!(app_id = %app, dir = %dir.display(), "work dir removed"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(app_id = %app, dir = %dir.display(), error = %e, "cannot remove work dir")
            }
        }
    }
}

/// Makes an application's folder (0700) and writes its secret there (0600).
fn private_secret(dir: &Path, secret: &[u8]) -> Result<PathBuf, String> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(dir)
        .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    let path = dir.join(".secret");
    let _ = std::fs::remove_file(&path);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut f| f.write_all(secret))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}
