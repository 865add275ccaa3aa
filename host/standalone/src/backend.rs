//! The driver's `standalone` backend: its application registered with a standalone
//! master, executors asked of it by id and size, and what the master says of each
//! (placed, waiting and why, ended) handed to the driver as backend news. A lost
//! master is connected to again with back-off; the application registers again and
//! asks again for what was not placed (what runs is re-stated by the workers).

use flint_driver::backend::{ExecutorBackend, Reporter};
use flint_net::{DriverUrl, Secret, Traffic, WhenRefused, connect_as, hello, read_frame, write_frame};
use flint_proto::standalone::{AppMessage, ToApp};
use flint_proto::wire::{HelloReply, Rejection, Role};
use flint_proto::{AppId, ExecutorId};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// Requests and releases waiting for the master connection: the core asks for at most
/// `maxPendingExecutors` at once, and releases as many as it started.
const COMMANDS: usize = 4096;

#[derive(Debug, Clone)]
pub struct StandaloneOptions {
    pub master: DriverUrl,
    /// The cluster secret, proved to the master.
    pub cluster_secret: Secret,
    pub app: AppId,
    /// Where executors reach this driver, and the secret they prove to it.
    pub driver_url: String,
    /// The driver's status page, which the master's page links.
    pub ui_url: Option<String>,
    pub app_secret: Secret,
    pub cores_max: Option<u32>,
    pub executor_cores: u32,
    pub executor_memory: u64,
    pub idle_timeout: Duration,
}

/// Why the backend could not attach.
#[derive(Debug, thiserror::Error)]
pub enum StandaloneError {
    #[error("the master refused the application: {0}")]
    Rejected(Rejection),
    #[error("the master refused the application: {0}")]
    Refused(String),
    #[error("cannot reach the master: {0}")]
    Connect(String),
}

enum Command {
    Start(Vec<ExecutorId>, Reporter),
    Stop(ExecutorId),
    /// Stopped, and the master told the worker it went to never started it.
    Abandon(ExecutorId),
}

pub struct StandaloneBackend {
    commands: mpsc::Sender<Command>,
    /// The master's last word on a request that waits, if one does.
    waiting: Arc<Mutex<BTreeMap<ExecutorId, String>>>,
}

struct Session {
    send: quinn::SendStream,
    /// What the master says, read by a task of its own.
    said: mpsc::Receiver<Result<ToApp, flint_net::FrameError>>,
    _endpoint: quinn::Endpoint,
    connection: quinn::Connection,
}

impl StandaloneBackend {
    /// Registers the application with the master (said at once if it cannot be), then
    /// serves requests in the background.
    pub async fn connect(options: StandaloneOptions) -> Result<StandaloneBackend, StandaloneError> {
        let session = register(&options, Duration::from_secs(30), WhenRefused::GiveUp).await?;
        tracing::info!(master = %options.master, "application registered with the standalone master");
        let (commands, rx) = mpsc::channel(COMMANDS);
        let waiting = Arc::new(Mutex::new(BTreeMap::new()));
        let state = State { options, asked: BTreeMap::new(), report: None, waiting: waiting.clone() };
        tokio::spawn(state.run(session, rx));
        Ok(StandaloneBackend { commands, waiting })
    }
}

async fn register(
    o: &StandaloneOptions,
    within: Duration,
    when_refused: WhenRefused,
) -> Result<Session, StandaloneError> {
    let (endpoint, connection) =
        connect_as(&o.master, within, o.idle_timeout, None, when_refused, Traffic::Requests)
            .await
            .map_err(|e| StandaloneError::Connect(e.to_string()))?;
    let lost = |e: flint_net::FrameError| StandaloneError::Connect(e.to_string());
    let (reply, mut send, mut recv) =
        hello(&connection, &o.cluster_secret, Role::Application, o.app.as_str(), None, None)
            .await
            .map_err(lost)?;
    if let HelloReply::Rejected(rejection) = reply {
        return Err(StandaloneError::Rejected(rejection));
    }
    let register = AppMessage::Register {
        app: o.app.clone(),
        cores_max: o.cores_max,
        driver_url: o.driver_url.clone(),
        ui_url: o.ui_url.clone(),
        // The master and its workers carry the executor key, never the secret: with
        // it they can start executors of this application, not act as its client.
        secret: o.app_secret.executor_key_to_hand().expose().to_vec(),
    };
    write_frame(&mut send, &register).await.map_err(lost)?;
    match read_frame::<ToApp>(&mut recv).await.map_err(lost)? {
        Some(ToApp::Registered) => {
            let said = crate::frames::read_frames(recv);
            Ok(Session { send, said, _endpoint: endpoint, connection })
        }
        Some(ToApp::Refused { reason }) => Err(StandaloneError::Refused(reason)),
        other => Err(StandaloneError::Connect(format!("unexpected answer: {other:?}"))),
    }
}

/// Whether an executor asked for is placed on a worker yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    Waiting,
    Placed,
}

struct State {
    options: StandaloneOptions,
    asked: BTreeMap<ExecutorId, Asked>,
    report: Option<Reporter>,
    waiting: Arc<Mutex<BTreeMap<ExecutorId, String>>>,
}

impl State {
    async fn run(mut self, first: Session, mut commands: mpsc::Receiver<Command>) {
        let mut session = Some(first);
        loop {
            let Some(s) = session.as_mut() else {
                // Lost: connect again, register again, ask again for what waits.
                match register(&self.options, Duration::from_secs(3600), WhenRefused::Retry).await {
                    Ok(mut s) => {
                        tracing::info!(master = %self.options.master, "registered with the standalone master again");
                        let again: Vec<ExecutorId> = self
                            .asked
                            .iter()
                            .filter(|(_, a)| **a == Asked::Waiting)
                            .map(|(id, _)| id.clone())
                            .collect();
                        let mut ok = true;
                        for executor in again {
                            ok &= write_frame(&mut s.send, &self.request(executor)).await.is_ok();
                        }
                        session = ok.then_some(s);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot register with the standalone master again");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
                continue;
            };
            tokio::select! {
                command = commands.recv() => {
                    let Some(command) = command else {
                        s.connection.close(0u32.into(), b"driver stopped");
                        return;
                    };
                    let message = match command {
                        Command::Start(ids, report) => {
                            self.report = Some(report);
                            let mut ok = true;
                            for id in ids {
                                self.asked.insert(id.clone(), Asked::Waiting);
                                ok &= write_frame(&mut s.send, &self.request(id)).await.is_ok();
                            }
                            if !ok {
                                session = None;
                            }
                            continue;
                        }
                        Command::Stop(id) => {
                            self.asked.remove(&id);
                            self.waiting.lock().expect("waiting lock").remove(&id);
                            AppMessage::Release { executor: id }
                        }
                        Command::Abandon(id) => {
                            self.waiting.lock().expect("waiting lock").remove(&id);
                            match self.asked.remove(&id) {
                                // Placed, and never heard of since: the worker's doing.
                                Some(Asked::Placed) => AppMessage::Abandon { executor: id },
                                _ => AppMessage::Release { executor: id },
                            }
                        }
                    };
                    if write_frame(&mut s.send, &message).await.is_err() {
                        session = None;
                    }
                }
                said = s.said.recv() => match said {
                    Some(Ok(said)) => self.heard(said),
                    None | Some(Err(_)) => {
                        tracing::warn!(reason = ?s.connection.close_reason(), "standalone master lost");
                        session = None;
                    }
                },
            }
        }
    }

    fn request(&self, executor: ExecutorId) -> AppMessage {
        let o = &self.options;
        AppMessage::Request { executor, cores: o.executor_cores, memory: o.executor_memory }
    }

    fn heard(&mut self, said: ToApp) {
        let Some(report) = &self.report else { return };
        match said {
            ToApp::Placed { executor, worker } => {
                tracing::info!(executor_id = %executor, worker_id = %worker, "executor placed on a worker");
                self.waiting.lock().expect("waiting lock").remove(&executor);
                if let Some(asked) = self.asked.get_mut(&executor) {
                    *asked = Asked::Placed;
                    report.progress(executor);
                }
            }
            ToApp::Waiting { executor, reason } => {
                if self.asked.contains_key(&executor) {
                    // Waiting for room is no failed start: the bootstrap timeout stops
                    // until it is placed. The reason is shown in the driver's status.
                    tracing::info!(executor_id = %executor, %reason, "executor waits for a worker");
                    self.waiting.lock().expect("waiting lock").insert(executor.clone(), reason);
                    report.waiting(executor);
                }
            }
            ToApp::Ended { executor, reason } => {
                self.waiting.lock().expect("waiting lock").remove(&executor);
                if self.asked.remove(&executor).is_some() {
                    report.exited(executor, reason);
                }
            }
            ToApp::Registered | ToApp::Refused { .. } => {}
        }
    }
}

impl ExecutorBackend for StandaloneBackend {
    fn name(&self) -> &'static str {
        "standalone"
    }

    fn start(&self, ids: Vec<ExecutorId>, report: Reporter) {
        if let Err(e) = self.commands.try_send(Command::Start(ids.clone(), report.clone())) {
            for id in ids {
                report.exited(id, format!("the standalone backend is behind: {e}"));
            }
        }
    }

    fn stop(&self, id: &ExecutorId) {
        let _ = self.commands.try_send(Command::Stop(id.clone()));
    }

    fn abandon(&self, id: &ExecutorId) {
        let _ = self.commands.try_send(Command::Abandon(id.clone()));
    }

    fn waiting(&self) -> Option<String> {
        let waiting = self.waiting.lock().expect("waiting lock");
        let (executor, reason) = waiting.iter().next()?;
        Some(match waiting.len() {
            1 => format!("executor {executor} waits for a worker: {reason}"),
            n => format!("{n} executors wait for a worker; {executor}: {reason}"),
        })
    }
}
