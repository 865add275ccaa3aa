//! `flint master`'s plumbing around the control core's [`Master`]: a QUIC front where
//! workers and drivers say hello with the cluster secret, one event loop that owns the
//! master's state and carries out its actions, and what the page reads.
//!
//! A worker or an application is one connection: its loss (the process died: silent
//! past the idle timeout; or it closed) is its end. A driver's end ends its
//! application, so every worker stops its executors; a worker's end ends the executors
//! it ran, which their drivers hear of.

use flint_core::master::{self, Action, Master, MasterConfig, Resources, Running};
use flint_net::gate::{Gate, hear_hello};
use flint_net::limited::Limited;
use flint_net::{Secret, read_frame, verify_proof, write_frame};
use flint_proto::standalone::{
    AppMessage, LaunchExecutor, MAX_RUNNING_PER_WORKER, RunningExecutor, ToApp, ToWorker, WorkerMessage,
    check_name,
};
use flint_proto::wire::{Hello, HelloReply, MAX_HELLO, PROTOCOL_VERSION, Rejection, Role};
use flint_proto::{AppId, ExecutorId, Incarnation, WorkerId};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

/// Frames waiting to be written to one worker or driver; past it the peer is stuck and
/// its connection is closed (the loop never waits on a peer).
const PEER_QUEUE: usize = 4096;
/// Events from every connection to the loop: readers wait when it is full.
const EVENTS: usize = 1024;
/// The most cores a worker may offer or an executor ask for (an executor's slots are
/// bounded by the same number): sums of them never overflow.
const MAX_CORES: u32 = 1 << 16;
/// Workers and drivers connected at once.
pub const MAX_CONNECTIONS: usize = master::MAX_WORKERS + master::MAX_APPS;

#[derive(Debug, Clone)]
pub struct MasterOptions {
    pub secret: Secret,
    /// A worker whose heartbeats stop this long is lost (its connection's silence
    /// tells sooner when its process died).
    pub worker_timeout: Duration,
    /// How long executors of an application the master does not know (it restarted)
    /// are kept for their driver to come back.
    pub app_grace: Duration,
}

/// What the page shows: the master's state, with where each peer is.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MasterView {
    pub workers: Vec<WorkerView>,
    pub applications: Vec<AppView>,
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkerView {
    pub id: WorkerId,
    pub incarnation: Incarnation,
    pub host: String,
    pub cores: u32,
    pub memory: u64,
    pub cores_free: u32,
    pub memory_free: u64,
    pub executors: Vec<(AppId, ExecutorId)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AppView {
    pub id: AppId,
    pub driver_url: Option<String>,
    /// Its driver's status page, when it said one.
    pub ui_url: Option<String>,
    /// Whether its driver is connected now (after a master restart, an application may
    /// be known only from what workers run of it).
    pub connected: bool,
    pub cores_max: Option<u32>,
    pub cores_used: u32,
    pub executors: Vec<ExecutorView>,
    pub waiting: Vec<WaitingView>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ExecutorView {
    pub id: ExecutorId,
    pub worker: WorkerId,
}

#[derive(Debug, Clone, Serialize)]
pub struct WaitingView {
    pub executor: ExecutorId,
    pub reason: Option<String>,
}

/// The running master, as its page and the CLI see it.
#[derive(Clone)]
pub struct MasterHandle {
    events: mpsc::Sender<Input>,
}

impl MasterHandle {
    pub async fn view(&self) -> MasterView {
        let (reply, rx) = oneshot::channel();
        let _ = self.events.send(Input::View(reply)).await;
        rx.await.unwrap_or_default()
    }
}

enum Input {
    WorkerUp {
        id: WorkerId,
        instance: u64,
        host: String,
        offer: Resources,
        running: Vec<Running>,
        to: mpsc::Sender<ToWorker>,
        reply: oneshot::Sender<Result<Incarnation, Refused>>,
    },
    WorkerSays {
        id: WorkerId,
        incarnation: Incarnation,
        message: WorkerMessage,
    },
    WorkerGone {
        id: WorkerId,
        incarnation: Incarnation,
        reason: String,
    },
    AppUp {
        app: AppId,
        cores_max: Option<u32>,
        driver_url: String,
        ui_url: Option<String>,
        secret: Vec<u8>,
        to: mpsc::Sender<ToApp>,
        reply: oneshot::Sender<Result<u64, String>>,
    },
    AppSays {
        app: AppId,
        session: u64,
        message: AppMessage,
    },
    AppGone {
        app: AppId,
        session: u64,
        reason: String,
    },
    View(oneshot::Sender<MasterView>),
}

/// Starts the master's loop; [`serve`] feeds it connections.
pub fn start(options: &MasterOptions) -> MasterHandle {
    let (events, rx) = mpsc::channel(EVENTS);
    let core =
        Master::new(MasterConfig { worker_timeout: options.worker_timeout, app_grace: options.app_grace });
    let state = Loop { core, workers: HashMap::new(), apps: HashMap::new(), next_session: 1 };
    tokio::spawn(state.run(rx).instrument(tracing::info_span!("master")));
    MasterHandle { events }
}

struct WorkerLink {
    incarnation: Incarnation,
    host: String,
    to: mpsc::Sender<ToWorker>,
}

struct AppLink {
    session: u64,
    driver_url: String,
    ui_url: Option<String>,
    secret: Vec<u8>,
    to: mpsc::Sender<ToApp>,
}

struct Loop {
    core: Master,
    workers: HashMap<WorkerId, WorkerLink>,
    apps: HashMap<AppId, AppLink>,
    next_session: u64,
}

impl Loop {
    async fn run(mut self, mut rx: mpsc::Receiver<Input>) {
        loop {
            let wake = self.core.poll_timeout();
            let input = tokio::select! {
                input = rx.recv() => match input {
                    Some(input) => input,
                    None => return,
                },
                () = sleep_until(wake) => {
                    let actions = self.core.handle_timeout(Instant::now());
                    self.apply(actions);
                    continue;
                }
            };
            self.step(input);
        }
    }

    fn step(&mut self, input: Input) {
        let now = Instant::now();
        match input {
            Input::WorkerUp { id, instance, host, offer, running, to, reply } => {
                let up = master::Event::WorkerUp { id: id.clone(), instance, offer, running };
                let actions = self.core.handle(now, up);
                // The registration's answer comes first among the actions.
                let answer = actions
                    .iter()
                    .find_map(|a| match a {
                        Action::WorkerRegistered { id: of, incarnation } if *of == id => {
                            Some(Ok(*incarnation))
                        }
                        Action::WorkerRefused { id: of, reason } if *of == id => {
                            Some(Err(Refused(reason.clone())))
                        }
                        _ => None,
                    })
                    .unwrap_or_else(|| Err(Refused("the master is full".into())));
                if let Ok(incarnation) = answer {
                    tracing::info!(worker_id = %id, %incarnation, %host, cores = offer.cores, "worker registered");
                    self.workers.insert(id, WorkerLink { incarnation, host, to });
                }
                let _ = reply.send(answer);
                self.apply(actions);
            }
            Input::WorkerSays { id, incarnation, message } => {
                let event = match message {
                    WorkerMessage::Heartbeat => master::Event::WorkerHeartbeat { id, incarnation },
                    WorkerMessage::Exited { app, executor, reason } => {
                        tracing::info!(worker_id = %id, app_id = %app, executor_id = %executor, %reason, "executor ended");
                        master::Event::Exited { worker: id, incarnation, app, executor, reason }
                    }
                    WorkerMessage::Register { .. } => return,
                };
                let actions = self.core.handle(now, event);
                self.apply(actions);
            }
            Input::WorkerGone { id, incarnation, reason } => {
                if self.workers.get(&id).is_some_and(|w| w.incarnation == incarnation) {
                    tracing::warn!(worker_id = %id, %reason, "worker lost");
                    self.workers.remove(&id);
                }
                let actions = self.core.handle(now, master::Event::WorkerLost { id, incarnation, reason });
                self.apply(actions);
            }
            Input::AppUp { app, cores_max, driver_url, ui_url, secret, to, reply } => {
                if let Some(other) = self.apps.get(&app) {
                    // Two drivers under one id would take each other's executors. A
                    // driver that lost its connection is let in again once the master
                    // hears it is gone (its silence past the idle timeout).
                    let reason = format!(
                        "application {app} is registered already, by the driver at {}: application ids must be unique",
                        other.driver_url
                    );
                    let _ = reply.send(Err(reason));
                    return;
                }
                if self.apps.len() >= master::MAX_APPS {
                    let _ = reply
                        .send(Err(format!("the master keeps at most {} applications", master::MAX_APPS)));
                    return;
                }
                let session = self.next_session;
                self.next_session += 1;
                tracing::info!(app_id = %app, %driver_url, ?cores_max, "application registered");
                self.apps.insert(app.clone(), AppLink { session, driver_url, ui_url, secret, to });
                let _ = reply.send(Ok(session));
                let actions = self.core.handle(now, master::Event::AppUp { app, cores_max });
                self.apply(actions);
            }
            Input::AppSays { app, session, message } => {
                if self.apps.get(&app).is_none_or(|a| a.session != session) {
                    return;
                }
                let event = match message {
                    AppMessage::Request { executor, cores, memory } => {
                        master::Event::Request { app, executor, size: Resources { cores, memory } }
                    }
                    AppMessage::Release { executor } => master::Event::Release { app, executor },
                    AppMessage::Abandon { executor } => {
                        tracing::warn!(app_id = %app, executor_id = %executor, "executor never registered with its driver");
                        master::Event::Abandoned { app, executor }
                    }
                    AppMessage::Register { .. } => return,
                };
                let actions = self.core.handle(now, event);
                self.apply(actions);
            }
            Input::AppGone { app, session, reason } => {
                if self.apps.get(&app).is_none_or(|a| a.session != session) {
                    return;
                }
                tracing::info!(app_id = %app, %reason, "application ended");
                self.apps.remove(&app);
                let actions = self.core.handle(now, master::Event::AppLost { app, reason });
                self.apply(actions);
            }
            Input::View(reply) => {
                let _ = reply.send(self.view());
            }
        }
    }

    fn apply(&mut self, actions: Vec<Action>) {
        for action in actions {
            match action {
                // Answered through the registration's reply.
                Action::WorkerRegistered { .. } => {}
                Action::WorkerRefused { id, reason } => {
                    tracing::warn!(worker_id = %id, %reason, "worker refused");
                }
                Action::Launch { worker, incarnation, app, executor, size } => {
                    let Some(link) = self.apps.get(&app) else {
                        // Known only from workers' reports: nobody to start one for.
                        continue;
                    };
                    tracing::info!(worker_id = %worker, app_id = %app, executor_id = %executor, "executor placed");
                    let launch = LaunchExecutor {
                        app,
                        executor,
                        cores: size.cores,
                        memory: size.memory,
                        driver_url: link.driver_url.clone(),
                        secret: link.secret.clone(),
                    };
                    self.tell_worker(&worker, incarnation, ToWorker::Launch(launch));
                }
                Action::Kill { worker, incarnation, app, executor } => {
                    self.tell_worker(&worker, incarnation, ToWorker::Kill { app, executor })
                }
                Action::AppEnded { worker, incarnation, app } => {
                    self.tell_worker(&worker, incarnation, ToWorker::AppEnded { app })
                }
                Action::Placed { app, executor, worker } => {
                    self.tell_app(&app, ToApp::Placed { executor, worker })
                }
                Action::Waiting { app, executor, reason } => {
                    tracing::info!(app_id = %app, executor_id = %executor, %reason, "executor waits");
                    self.tell_app(&app, ToApp::Waiting { executor, reason })
                }
                Action::Ended { app, executor, reason } => {
                    self.tell_app(&app, ToApp::Ended { executor, reason })
                }
                Action::Refused { app, executor, reason } => {
                    self.tell_app(&app, ToApp::Ended { executor, reason })
                }
            }
        }
    }

    /// Sends to a worker's current life; one whose queue is full is stuck, and closed.
    fn tell_worker(&mut self, id: &WorkerId, incarnation: Incarnation, message: ToWorker) {
        let Some(link) = self.workers.get(id).filter(|w| w.incarnation == incarnation) else { return };
        if link.to.try_send(message).is_err() {
            tracing::warn!(worker_id = %id, "worker does not read what it is sent: dropping its connection");
            self.workers.remove(id);
        }
    }

    fn tell_app(&mut self, app: &AppId, message: ToApp) {
        let Some(link) = self.apps.get(app) else { return };
        if link.to.try_send(message).is_err() {
            tracing::warn!(app_id = %app, "driver does not read what it is sent: dropping its connection");
            self.apps.remove(app);
        }
    }

    fn view(&self) -> MasterView {
        let workers = self
            .core
            .workers()
            .into_iter()
            .map(|w| WorkerView {
                host: self.workers.get(&w.id).map(|l| l.host.clone()).unwrap_or_default(),
                id: w.id,
                incarnation: w.incarnation,
                cores: w.offer.cores,
                memory: w.offer.memory,
                cores_free: w.free.cores,
                memory_free: w.free.memory,
                executors: w.executors,
            })
            .collect();
        let applications = self
            .core
            .apps()
            .into_iter()
            .map(|a| AppView {
                driver_url: self.apps.get(&a.app).map(|l| l.driver_url.clone()),
                ui_url: self.apps.get(&a.app).and_then(|l| l.ui_url.clone()),
                connected: self.apps.contains_key(&a.app),
                id: a.app,
                cores_max: a.cores_max,
                cores_used: a.cores_used,
                executors: a.executors.into_iter().map(|(id, worker)| ExecutorView { id, worker }).collect(),
                waiting: a
                    .waiting
                    .into_iter()
                    .map(|(executor, reason)| WaitingView { executor, reason })
                    .collect(),
            })
            .collect();
        MasterView { workers, applications }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Why the master turned a worker's registration away, for its refusal.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Refused(String);

#[derive(Debug, thiserror::Error)]
enum PeerError {
    #[error("{0}")]
    Frame(#[from] flint_net::FrameError),
    #[error("rejected: {0}")]
    Rejected(Rejection),
    #[error("protocol: {0}")]
    Protocol(String),
    #[error("before hello: {0}")]
    Unproven(String),
}

/// Accepts workers and drivers until the endpoint closes, behind the same gate as the
/// driver's front: unproven connections get a small pool and a few seconds.
pub async fn serve(master: MasterHandle, endpoint: quinn::Endpoint, options: &MasterOptions) {
    let heartbeat_ms = (options.worker_timeout.as_millis() / 4).clamp(10, 15_000) as u64;
    let secret = options.secret.clone();
    let gate = Arc::new(Gate::default());
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let (turned_away, dropped) = (Arc::new(Limited::default()), Arc::new(Limited::default()));
    let secret = Arc::new(secret);
    while let Some(incoming) = endpoint.accept().await {
        let Some((incoming, pass)) = gate.let_in(incoming, &turned_away) else { continue };
        let remote = incoming.remote_address();
        let (master, secret, permits, dropped) =
            (master.clone(), secret.clone(), permits.clone(), dropped.clone());
        tokio::spawn(
            async move {
                if let Err(e) = handle(&master, incoming, pass, &secret, &permits, heartbeat_ms).await {
                    match e {
                        PeerError::Unproven(_) | PeerError::Rejected(_) => dropped
                            .note(|not_logged| tracing::warn!(error = %e, not_logged, "connection dropped")),
                        _ => tracing::warn!(error = %e, "connection dropped"),
                    }
                }
            }
            .instrument(tracing::info_span!("connection", %remote)),
        );
    }
}

/// One connection: the handshake and hello within their deadline, the secret checked,
/// then a worker's or a driver's session.
async fn handle(
    master: &MasterHandle,
    incoming: quinn::Incoming,
    pass: flint_net::gate::Pass,
    secret: &Secret,
    permits: &Arc<tokio::sync::Semaphore>,
    heartbeat_ms: u64,
) -> Result<(), PeerError> {
    let (connection, mut send, recv, hello) =
        hear_hello::<Hello>(incoming, MAX_HELLO).await.map_err(PeerError::Unproven)?;
    let permit = permits.clone().try_acquire_owned();
    let verdict = if permit.is_err() {
        Err(Rejection::Protocol(format!("the master serves {MAX_CONNECTIONS} connections already")))
    } else if hello.protocol_version != PROTOCOL_VERSION {
        Err(Rejection::VersionMismatch { driver: PROTOCOL_VERSION, peer: hello.protocol_version })
    } else if !verify_proof(secret, &connection, &hello.proof) {
        Err(Rejection::NotAuthenticated)
    } else if !matches!(hello.role, Role::Worker | Role::Application) {
        Err(Rejection::Protocol(format!(
            "this is a standalone master: it serves workers and drivers, not a {:?} (use the driver's URL)",
            hello.role
        )))
    } else {
        Ok(())
    };
    if let Err(rejection) = verdict {
        let _ = write_frame(&mut send, &HelloReply::Rejected(rejection.clone())).await;
        linger(&connection, send).await;
        return Err(PeerError::Rejected(rejection));
    }
    // Proven: out of the gate's pool, into a place of its own.
    drop(pass);
    let _permit = permit;
    flint_net::open_up(&connection);
    write_frame(&mut send, &HelloReply::Welcome { executor_id: None }).await?;
    match hello.role {
        Role::Worker => serve_worker(master, heartbeat_ms, &connection, send, recv).await,
        _ => serve_app(master, &connection, send, recv).await,
    }
}

/// Ends `send` and waits (at most 2 s) for the peer to read the refusal on it and go:
/// dropping the connection at once could lose the answer.
async fn linger(connection: &quinn::Connection, mut send: quinn::SendStream) {
    let _ = send.finish();
    let _ = tokio::time::timeout(Duration::from_secs(2), connection.closed()).await;
}

/// Why a connection ended, for the peer's end reason.
fn ended(connection: &quinn::Connection, read: Result<(), PeerError>) -> String {
    match (connection.close_reason(), read) {
        (Some(quinn::ConnectionError::TimedOut), _) => "its connection went silent".to_owned(),
        (Some(reason), _) => format!("its connection closed: {reason}"),
        (None, Err(e)) => e.to_string(),
        (None, Ok(())) => "it closed its stream".to_owned(),
    }
}

/// Writes what the loop sends a peer, in order, until the peer or the loop goes.
fn writer<T: Serialize + Send + Sync + 'static>(
    connection: quinn::Connection,
    mut send: quinn::SendStream,
    mut rx: mpsc::Receiver<T>,
) {
    tokio::spawn(
        async move {
            while let Some(message) = rx.recv().await {
                if write_frame(&mut send, &message).await.is_err() {
                    return;
                }
            }
            // The loop dropped the peer (stuck, or another life took its place).
            connection.close(1u32.into(), b"replaced or stuck");
        }
        .in_current_span(),
    );
}

async fn serve_worker(
    master: &MasterHandle,
    heartbeat_ms: u64,
    connection: &quinn::Connection,
    send: quinn::SendStream,
    mut recv: quinn::RecvStream,
) -> Result<(), PeerError> {
    let Some(WorkerMessage::Register { id, instance, host, cores, memory, running }) =
        read_frame(&mut recv).await?
    else {
        return Err(PeerError::Protocol("a worker's first message must be Register".into()));
    };
    let (to, rx) = mpsc::channel(PEER_QUEUE);
    let mut early = send;
    let refuse = |reason: String| ToWorker::Refused { reason };
    let checked = check_name(&id)
        .and_then(|()| match running.len() {
            n if n > MAX_RUNNING_PER_WORKER => {
                Err(format!("reports {n} executors, over {MAX_RUNNING_PER_WORKER}"))
            }
            _ => Ok(()),
        })
        .and_then(|()| {
            running.iter().try_for_each(|r| check_name(&r.app).and_then(|()| check_name(&r.executor)))
        })
        .and_then(|()| match cores {
            1..=MAX_CORES => Ok(()),
            _ => Err(format!("offers {cores} cores, not 1 to {MAX_CORES}")),
        })
        .and_then(|()| match running.iter().find(|r| r.cores == 0 || r.cores > MAX_CORES) {
            Some(r) => Err(format!("reports executor {} with {} cores", r.executor, r.cores)),
            None => Ok(()),
        });
    if let Err(reason) = checked {
        write_frame(&mut early, &refuse(reason.clone())).await?;
        linger(connection, early).await;
        return Err(PeerError::Protocol(format!("worker refused: {reason}")));
    }
    let running = running
        .into_iter()
        .map(|RunningExecutor { app, executor, cores, memory }| Running {
            app,
            executor,
            size: Resources { cores, memory },
        })
        .collect();
    let (reply, answer) = oneshot::channel();
    let offer = Resources { cores, memory };
    let up = Input::WorkerUp { id: id.clone(), instance, host, offer, running, to, reply };
    let _ = master.events.send(up).await;
    let incarnation = match answer.await {
        Ok(Ok(incarnation)) => incarnation,
        Ok(Err(Refused(reason))) => {
            write_frame(&mut early, &refuse(reason.clone())).await?;
            linger(connection, early).await;
            return Err(PeerError::Protocol(format!("worker {id} refused: {reason}")));
        }
        Err(_) => return Err(PeerError::Protocol("the master is stopping".into())),
    };
    write_frame(&mut early, &ToWorker::Registered { incarnation, heartbeat_ms }).await?;
    writer(connection.clone(), early, rx);
    let span = tracing::info_span!("worker", worker_id = %id, %incarnation);
    let read = async {
        while let Some(message) = read_frame::<WorkerMessage>(&mut recv).await? {
            if let WorkerMessage::Exited { app, executor, .. } = &message
                && (check_name(app).is_err() || check_name(executor).is_err())
            {
                continue;
            }
            let _ = master.events.send(Input::WorkerSays { id: id.clone(), incarnation, message }).await;
        }
        Ok(())
    }
    .instrument(span)
    .await;
    let reason = ended(connection, read);
    let _ = master.events.send(Input::WorkerGone { id, incarnation, reason }).await;
    Ok(())
}

async fn serve_app(
    master: &MasterHandle,
    connection: &quinn::Connection,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
) -> Result<(), PeerError> {
    let Some(AppMessage::Register { app, cores_max, driver_url, ui_url, secret }) =
        read_frame(&mut recv).await?
    else {
        return Err(PeerError::Protocol("a driver's first message must be Register".into()));
    };
    if let Err(reason) = check_name(&app) {
        write_frame(&mut send, &ToApp::Refused { reason: reason.clone() }).await?;
        linger(connection, send).await;
        return Err(PeerError::Protocol(format!("application refused: {reason}")));
    }
    let (to, rx) = mpsc::channel(PEER_QUEUE);
    let (reply, answer) = oneshot::channel();
    // A link on the master's page: a web address, never a script.
    let ui_url = ui_url.filter(|u| {
        (u.starts_with("http://") || u.starts_with("https://"))
            && u.len() <= 512
            && !u.contains(char::is_whitespace)
    });
    let up = Input::AppUp { app: app.clone(), cores_max, driver_url, ui_url, secret, to, reply };
    let _ = master.events.send(up).await;
    let session = match answer.await {
        Ok(Ok(session)) => session,
        Ok(Err(reason)) => {
            write_frame(&mut send, &ToApp::Refused { reason: reason.clone() }).await?;
            linger(connection, send).await;
            return Err(PeerError::Protocol(format!("application refused: {reason}")));
        }
        Err(_) => return Err(PeerError::Protocol("the master is stopping".into())),
    };
    write_frame(&mut send, &ToApp::Registered).await?;
    writer(connection.clone(), send, rx);
    let read = async {
        while let Some(message) = read_frame::<AppMessage>(&mut recv).await? {
            let executor = match &message {
                AppMessage::Request { executor, cores, .. } if *cores == 0 || *cores > MAX_CORES => {
                    let why = format!("executor {executor} asks for {cores} cores, not 1 to {MAX_CORES}");
                    return Err(PeerError::Protocol(why));
                }
                AppMessage::Request { executor, .. }
                | AppMessage::Release { executor }
                | AppMessage::Abandon { executor } => executor,
                AppMessage::Register { .. } => return Err(PeerError::Protocol("registered twice".into())),
            };
            check_name(executor).map_err(PeerError::Protocol)?;
            let _ = master.events.send(Input::AppSays { app: app.clone(), session, message }).await;
        }
        Ok(())
    }
    .instrument(tracing::info_span!("application", app_id = %app))
    .await;
    let reason = ended(connection, read);
    let _ = master.events.send(Input::AppGone { app, session, reason }).await;
    Ok(())
}
