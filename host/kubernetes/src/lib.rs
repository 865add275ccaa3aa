//! The `kubernetes` executor backend: the driver asks a Kubernetes API server for
//! executor pods (Spark's `ExecutorPodsAllocator` and `ExecutorPodsLifecycleManager`).
//!
//! The control core decides how many executors and which; this backend turns its
//! decisions into pods and the pods' fate into news for the core:
//! - pods are created in batches (`flint.kubernetes.allocation.batch.size`, then
//!   `batch.delay`), named `<app>-exec-<id>`, labelled with the application, role and
//!   executor id, and owned by the driver's pod when there is one;
//! - one task watches the application's pods (and lists them all every
//!   `executor.apiPollingInterval`, mending any event the watch missed): a pod that
//!   terminated, failed, was evicted, cannot pull its image or vanished is reported
//!   once, with the reason Kubernetes gives, and deleted; a pod that waits (for a node,
//!   for its image) or runs is reported as progress, so waiting is not a failed start;
//! - pods are deleted when their executor is removed, and all of them when the driver
//!   ends.

pub mod pod;

use flint_driver::backend::{ExecutorBackend, Reporter};
use flint_proto::{ExecutorId, Settings};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use pod::{ID_LABEL, PodConfig, Verdict, verdict};
use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

#[derive(Debug, thiserror::Error)]
pub enum KubernetesError {
    #[error("no Kubernetes client configuration (in a pod: its service account; else KUBECONFIG): {0}")]
    Config(String),
    #[error("flint.kubernetes.executor.podTemplateFile {path}: {reason}")]
    Template { path: String, reason: String },
    #[error("the driver's pod {name} (flint.kubernetes.driver.pod.name): {reason}")]
    DriverPod { name: String, reason: String },
    #[error(
        "cannot list pods in namespace {namespace} (is the driver's service account allowed to?): {reason}"
    )]
    Unreachable { namespace: String, reason: String },
}

/// How long a deleted executor pod has to leave: it finishes what it runs on SIGTERM,
/// but a removed executor runs nothing the driver still counts on.
const DELETE_GRACE_SECONDS: u32 = 5;

/// What the backend is asked to do, carried to its one task.
enum Command {
    Start(Vec<ExecutorId>, Reporter),
    Stop(ExecutorId),
    Shutdown(oneshot::Sender<()>),
}

pub struct KubernetesBackend {
    commands: mpsc::UnboundedSender<Command>,
    namespace: String,
}

impl KubernetesBackend {
    /// Connects to the API server (in a pod through its service account, else through
    /// `KUBECONFIG` or `~/.kube/config`), reads the pod template and the driver's own
    /// pod, and checks that the application's pods can be listed: a driver that could
    /// not start executors fails here, at start, with the reason.
    pub async fn connect(
        settings: &Settings,
        app_id: &str,
        driver_url: &str,
    ) -> Result<KubernetesBackend, KubernetesError> {
        let k = &settings.kubernetes;
        let config = kube::Config::infer().await.map_err(|e| KubernetesError::Config(e.to_string()))?;
        let namespace = k.namespace.clone().unwrap_or_else(|| config.default_namespace.clone());
        let client = kube::Client::try_from(config).map_err(|e| KubernetesError::Config(e.to_string()))?;
        let api: Api<Pod> = Api::namespaced(client, &namespace);
        let template = match &k.pod_template_file {
            None => None,
            Some(path) => Some(read_template(path)?),
        };
        let owner = match &k.driver_pod_name {
            None => None,
            Some(name) => {
                let driver = api
                    .get(name)
                    .await
                    .map_err(|e| KubernetesError::DriverPod { name: name.clone(), reason: e.to_string() })?;
                let uid = driver.metadata.uid.ok_or_else(|| KubernetesError::DriverPod {
                    name: name.clone(),
                    reason: "it has no uid".into(),
                })?;
                Some(serde_json::json!({
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": name,
                    "uid": uid,
                    "controller": true,
                }))
            }
        };
        let config = PodConfig {
            app_id: app_id.to_owned(),
            namespace: namespace.clone(),
            image: k.image.clone(),
            image_pull_policy: k.image_pull_policy.clone(),
            driver_url: driver_url.to_owned(),
            secret_name: k.secret_name.clone().unwrap_or_else(|| format!("{app_id}-secret")),
            cores: settings.executor_cores,
            memory: settings.executor_memory,
            memory_overhead_factor: k.memory_overhead_factor,
            decommission_timeout: settings.decommission_timeout,
            template,
            owner,
        };
        api.list(&ListParams::default().labels(&config.selector()).limit(1)).await.map_err(|e| {
            KubernetesError::Unreachable { namespace: namespace.clone(), reason: e.to_string() }
        })?;
        // Unbounded, but bounded by its only sender, the driver's event loop: starts are
        // capped by flint.dynamicAllocation.maxPendingExecutors (or the fixed fleet), and
        // there is one stop per executor removed or start abandoned. Nothing from the
        // wire or the API server is queued here.
        let (commands, rx) = mpsc::unbounded_channel();
        let worker = Worker {
            api,
            config,
            batch_size: k.batch_size.max(1) as usize,
            batch_delay: k.batch_delay,
            polling: k.api_polling_interval,
            reporter: None,
            queue: VecDeque::new(),
            pods: HashMap::new(),
            next_batch: Instant::now(),
        };
        tokio::spawn(worker.run(rx));
        Ok(KubernetesBackend { commands, namespace })
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Deletes every executor pod of the application and waits for the API server to
    /// take the request: the driver is ending.
    pub async fn shutdown(&self) {
        let (done, wait) = oneshot::channel();
        if self.commands.send(Command::Shutdown(done)).is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(10), wait).await;
        }
    }
}

impl ExecutorBackend for KubernetesBackend {
    fn name(&self) -> &'static str {
        "kubernetes"
    }

    fn start(&self, ids: Vec<ExecutorId>, report: Reporter) {
        let _ = self.commands.send(Command::Start(ids, report));
    }

    fn stop(&self, id: &ExecutorId) {
        let _ = self.commands.send(Command::Stop(id.to_owned()));
    }
}

fn read_template(path: &str) -> Result<serde_json::Value, KubernetesError> {
    let fail = |reason: String| KubernetesError::Template { path: path.to_owned(), reason };
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    // YAML (JSON is YAML too), read as a pod so that a template that is not one fails
    // here rather than at the first executor.
    let pod: Pod = serde_saphyr::from_str(&text).map_err(|e| fail(format!("not a pod: {e}")))?;
    serde_json::to_value(pod).map_err(|e| fail(e.to_string()))
}

/// What the backend knows of a pod it asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    Created,
    Running,
}

type Events = Pin<Box<dyn Stream<Item = kube::Result<WatchEvent<Pod>>> + Send>>;

struct Worker {
    api: Api<Pod>,
    config: PodConfig,
    batch_size: usize,
    batch_delay: Duration,
    polling: Duration,
    reporter: Option<Reporter>,
    /// Executors to make pods for, in order.
    queue: VecDeque<ExecutorId>,
    /// Pods made and not yet reported ended.
    pods: HashMap<ExecutorId, Known>,
    next_batch: Instant,
}

impl Worker {
    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let mut events: Option<Events> = None;
        let mut version = String::new();
        let mut relist = tokio::time::interval(self.polling);
        relist.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if events.is_none() {
                // Start from a full list; then watch from its version.
                match self.relist().await {
                    Some(v) => version = v,
                    None => tokio::time::sleep(Duration::from_secs(1)).await,
                }
                events = self.watch(&version).await;
            }
            let batch_due = !self.queue.is_empty();
            tokio::select! {
                command = commands.recv() => match command {
                    None => return,
                    Some(Command::Start(ids, reporter)) => {
                        self.reporter = Some(reporter);
                        self.queue.extend(ids);
                    }
                    Some(Command::Stop(id)) => self.stop(&id).await,
                    Some(Command::Shutdown(done)) => {
                        self.delete_all().await;
                        let _ = done.send(());
                        return;
                    }
                },
                _ = tokio::time::sleep_until(self.next_batch), if batch_due => self.create_batch().await,
                event = next(&mut events) => match event {
                    Some(Ok(WatchEvent::Added(pod) | WatchEvent::Modified(pod))) => {
                        remember(&mut version, &pod);
                        self.saw(&pod).await;
                    }
                    Some(Ok(WatchEvent::Deleted(pod))) => {
                        remember(&mut version, &pod);
                        self.vanished(&pod).await;
                    }
                    Some(Ok(WatchEvent::Bookmark(mark))) => version = mark.metadata.resource_version,
                    Some(Ok(WatchEvent::Error(status))) => {
                        // 410 Gone: the version is too old; list again.
                        tracing::debug!(code = status.code, message = %status.message, "pod watch ended");
                        events = None;
                    }
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "pod watch failed; listing again");
                        events = None;
                    }
                    // The server ended the watch (its timeout): go on from where it was.
                    None => events = self.watch(&version).await,
                },
                _ = relist.tick() => {
                    if let Some(v) = self.relist().await {
                        version = v;
                        events = self.watch(&version).await;
                    }
                }
            }
        }
    }

    async fn watch(&self, version: &str) -> Option<Events> {
        let params = WatchParams::default().labels(&self.config.selector()).timeout(290);
        match self.api.watch(&params, version).await {
            Ok(stream) => Some(stream.boxed()),
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch executor pods");
                None
            }
        }
    }

    /// Reads every pod of the application and acts on each as on a watch event: a
    /// pod known here and missing from the list is gone; a pod of the application
    /// unknown here (left by an earlier driver, or one whose executor was removed) is
    /// deleted. Returns the list's version.
    async fn relist(&mut self) -> Option<String> {
        let list = match self.api.list(&ListParams::default().labels(&self.config.selector())).await {
            Ok(list) => list,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list executor pods");
                return None;
            }
        };
        let mut listed = std::collections::HashSet::new();
        for pod in &list.items {
            if let Some(id) = executor_id(pod) {
                listed.insert(id.clone());
                if self.pods.contains_key(&id) {
                    self.saw(pod).await;
                } else if pod.metadata.deletion_timestamp.is_none() {
                    tracing::info!(pod = %name(pod), "deleting an executor pod this driver does not know");
                    self.delete(&id).await;
                }
            }
        }
        let missing: Vec<ExecutorId> = self.pods.keys().filter(|id| !listed.contains(*id)).cloned().collect();
        for id in missing {
            self.ended(&id, "pod vanished from the API server's list".into());
        }
        list.metadata.resource_version
    }

    async fn create_batch(&mut self) {
        let take = self.batch_size.min(self.queue.len());
        let batch: Vec<ExecutorId> = self.queue.drain(..take).collect();
        for id in batch {
            let pod: Pod = match serde_json::from_value(self.config.executor_pod(&id)) {
                Ok(pod) => pod,
                Err(e) => {
                    self.report_exit(
                        id,
                        format!("cannot make the executor pod: {}", pod::clip(&e.to_string())),
                    );
                    continue;
                }
            };
            match self.api.create(&PostParams::default(), &pod).await {
                Ok(_) => {
                    tracing::info!(executor_id = %id, pod = %name(&pod), "executor pod created");
                    self.pods.insert(id, Known::Created);
                }
                Err(e) => self.report_exit(
                    id,
                    format!("the API server refused the pod: {}", pod::clip(&e.to_string())),
                ),
            }
        }
        self.next_batch = Instant::now() + self.batch_delay;
    }

    /// A pod's new status.
    async fn saw(&mut self, pod: &Pod) {
        let Some(id) = executor_id(pod) else { return };
        let Some(known) = self.pods.get(&id).copied() else { return };
        match verdict(pod) {
            Verdict::Ended(reason) => {
                self.ended(&id, reason);
                self.delete(&id).await;
            }
            Verdict::Running => {
                if known != Known::Running {
                    self.pods.insert(id.clone(), Known::Running);
                    self.progress(id);
                }
            }
            Verdict::Waiting(why) => {
                if let Some(why) = why {
                    tracing::info!(executor_id = %id, pod = %name(pod), %why, "executor pod waits");
                }
                self.progress(id);
            }
        }
    }

    async fn vanished(&mut self, pod: &Pod) {
        let Some(id) = executor_id(pod) else { return };
        if self.pods.contains_key(&id) {
            let reason = match verdict(pod) {
                Verdict::Ended(reason) => reason,
                _ => "pod deleted".into(),
            };
            self.ended(&id, reason);
        }
    }

    /// The pod of `id` is gone for good: said once.
    fn ended(&mut self, id: &ExecutorId, reason: String) {
        if self.pods.remove(id).is_some() {
            tracing::info!(executor_id = %id, %reason, "executor pod ended");
            self.report_exit(id.clone(), reason);
        }
    }

    fn report_exit(&self, id: ExecutorId, reason: String) {
        if let Some(reporter) = &self.reporter {
            reporter.exited(id, reason);
        }
    }

    fn progress(&self, id: ExecutorId) {
        if let Some(reporter) = &self.reporter {
            reporter.progress(id);
        }
    }

    /// The driver is done with `id`: a pod not made yet never will be.
    async fn stop(&mut self, id: &ExecutorId) {
        self.queue.retain(|queued| queued != id);
        if self.pods.remove(id).is_some() {
            self.delete(id).await;
        }
    }

    async fn delete(&self, id: &str) {
        let name = flint_proto::KubernetesSettings::pod_name(&self.config.app_id, id);
        let params = DeleteParams { grace_period_seconds: Some(DELETE_GRACE_SECONDS), ..Default::default() };
        match self.api.delete(&name, &params).await {
            Ok(_) => tracing::debug!(pod = %name, "executor pod deleted"),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => tracing::warn!(pod = %name, error = %e, "cannot delete an executor pod"),
        }
    }

    async fn delete_all(&mut self) {
        self.queue.clear();
        self.pods.clear();
        let params = DeleteParams { grace_period_seconds: Some(DELETE_GRACE_SECONDS), ..Default::default() };
        let list = ListParams::default().labels(&self.config.selector());
        match self.api.delete_collection(&params, &list).await {
            Ok(_) => tracing::info!("executor pods deleted"),
            Err(e) => tracing::warn!(error = %e, "cannot delete the executor pods"),
        }
    }
}

async fn next(events: &mut Option<Events>) -> Option<kube::Result<WatchEvent<Pod>>> {
    match events {
        Some(stream) => stream.next().await,
        None => std::future::pending().await,
    }
}

fn remember(version: &mut String, pod: &Pod) {
    if let Some(v) = &pod.metadata.resource_version {
        v.clone_into(version);
    }
}

fn executor_id(pod: &Pod) -> Option<ExecutorId> {
    pod.metadata.labels.as_ref()?.get(ID_LABEL).cloned().map(ExecutorId::from)
}

fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or("?")
}
