//! The settings of one part each: object storage, credentials, Kubernetes, the
//! executor backend, dynamic allocation.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Where `s3://` inputs are served and whether plain `http://` is allowed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectSettings {
    /// `flint.s3.endpoint` (default: AWS's): an S3-compatible server such as MinIO.
    pub s3_endpoint: Option<String>,
    /// `flint.s3.region` (default `us-east-1`).
    pub s3_region: String,
    /// `flint.input.allowHttp` (default false): `http://` inputs and S3 endpoints
    /// without TLS.
    pub allow_http: bool,
}

impl Default for ObjectSettings {
    fn default() -> Self {
        ObjectSettings { s3_endpoint: None, s3_region: "us-east-1".into(), allow_http: false }
    }
}

/// The token service of the driver's own data service (`flint://` inputs).
pub const FLINT_SERVICE: &str = "flint";

/// `flint.security.credentials.*`: where the driver gets each service's token, and when
/// it renews them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CredentialSettings {
    /// `renewalRatio` (default 0.75): a token is renewed after this share of its
    /// remaining life.
    pub renewal_ratio: f64,
    /// `renewalMargin` (default 10s): and at least this long before it expires.
    pub renewal_margin: Duration,
    /// `retryWait` (default 1s): the wait after a failed renewal, doubled with each in a
    /// row (at most 5 minutes).
    pub retry_wait: Duration,
    /// `<service>.command`: a command (run by `sh -c` on the driver) that prints the
    /// service's token as JSON, `{"secret": …, "expires_at_ms": …}` or with
    /// `"expires_in_s"`: how Vault, `aws sts` or a kinit wrapper plug in.
    pub commands: BTreeMap<String, String>,
    /// `<service>.file`: a file holding the service's token as the same JSON, read
    /// again at each renewal.
    pub files: BTreeMap<String, String>,
    /// `flint.lifetime` (default 1h): how long the tokens the driver mints for its own
    /// data service (`flint://` inputs, one per job) live; renewed like the others.
    pub flint_lifetime: Duration,
}

impl Default for CredentialSettings {
    fn default() -> Self {
        CredentialSettings {
            renewal_ratio: 0.75,
            renewal_margin: Duration::from_secs(10),
            retry_wait: Duration::from_secs(1),
            commands: BTreeMap::new(),
            files: BTreeMap::new(),
            flint_lifetime: Duration::from_secs(3600),
        }
    }
}
/// `flint.kubernetes.*`: how the `kubernetes` backend asks for executor pods (Spark's
/// `spark.kubernetes.*` where Spark has the same thing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KubernetesSettings {
    /// `namespace` (default: the client configuration's, in a pod its own).
    pub namespace: Option<String>,
    /// `container.image` (default `flint:latest`, what `make image` builds).
    pub image: String,
    /// `container.image.pullPolicy` (default `IfNotPresent`).
    pub image_pull_policy: String,
    /// `memoryOverheadFactor` (default 0.1): the share of executor memory a pod asks
    /// for beyond it, for what is not task memory.
    pub memory_overhead_factor: f64,
    /// `allocation.batch.size` (default 20, as Spark): pods asked for at once.
    pub batch_size: u32,
    /// `allocation.batch.delay` (default 1s): the wait between batches.
    pub batch_delay: Duration,
    /// `executor.podTemplateFile` (default none): a pod (YAML or JSON) that executor
    /// pods start from; what Flint sets wins over it.
    pub pod_template_file: Option<String>,
    /// `executor.secretName` (default `<app>-secret`): the Secret whose `secret` key is
    /// the application secret, mounted into executor pods as a file.
    pub secret_name: Option<String>,
    /// `driver.pod.name` (default none): the driver's own pod, made the owner of every
    /// executor pod so that Kubernetes deletes them with it.
    pub driver_pod_name: Option<String>,
    /// `executor.apiPollingInterval` (default 30s, as Spark): how often the whole list
    /// of executor pods is read, mending any event the watch missed.
    pub api_polling_interval: Duration,
}

impl Default for KubernetesSettings {
    fn default() -> Self {
        KubernetesSettings {
            namespace: None,
            image: "flint:latest".into(),
            image_pull_policy: "IfNotPresent".into(),
            memory_overhead_factor: 0.1,
            batch_size: 20,
            batch_delay: Duration::from_secs(1),
            pod_template_file: None,
            secret_name: None,
            driver_pod_name: None,
            api_polling_interval: Duration::from_secs(30),
        }
    }
}

/// Who starts executors (`flint.executor.backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Backend {
    /// Executors are started by hand and stay until stopped.
    Static,
    /// The driver starts `flint executor` processes on its own machine.
    Local,
    /// The driver asks a Kubernetes API server for executor pods.
    Kubernetes,
    /// The driver asks a standalone master (`flint.master.url`), whose workers start
    /// executor processes.
    Standalone,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Static => "static",
            Backend::Local => "local",
            Backend::Kubernetes => "kubernetes",
            Backend::Standalone => "standalone",
        }
    }
}

/// `flint.dynamicAllocation.*`: Spark's keys and defaults, and Flint's own additions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DynamicAllocation {
    /// `enabled` (default false): the fleet follows the load.
    pub enabled: bool,
    /// `minExecutors` (default 0).
    pub min_executors: u32,
    /// `maxExecutors` (default unbounded).
    pub max_executors: u32,
    /// `initialExecutors` (default `minExecutors`).
    pub initial_executors: Option<u32>,
    /// `schedulerBacklogTimeout` (default 1s): a backlog this old asks for executors.
    pub backlog_timeout: Duration,
    /// `sustainedSchedulerBacklogTimeout` (default `schedulerBacklogTimeout`): the wait
    /// between further requests while the backlog lasts (1, 2, 4, 8… executors).
    pub sustained_backlog_timeout: Option<Duration>,
    /// `executorIdleTimeout` (default 60s): an executor idle this long is given back.
    pub idle_timeout: Duration,
    /// `executorAllocationRatio` (default 1.0): the share of the tasks' slots asked for.
    pub ratio: f64,
    /// `cooldown` (default 10s): no shrinking this soon after growing, nor growing this
    /// soon after shrinking.
    pub cooldown: Duration,
    /// `maxPendingExecutors` (default 20): executors asked for and not yet registered.
    pub max_pending: u32,
    /// `maxStartFailures` (default 5): start failures in a row after which the
    /// application stops asking and the jobs waiting for executors fail.
    pub max_start_failures: u32,
    /// `startBackoff` (default 1s): the wait after a start failure, doubled with each
    /// one in a row (at most 5 minutes).
    pub start_backoff: Duration,
}

impl DynamicAllocation {
    /// The executors asked for at start.
    pub fn initial(&self) -> u32 {
        self.initial_executors.unwrap_or(self.min_executors)
    }

    /// The wait between further requests while a backlog lasts.
    pub fn sustained(&self) -> Duration {
        self.sustained_backlog_timeout.unwrap_or(self.backlog_timeout)
    }
}

impl Default for DynamicAllocation {
    fn default() -> Self {
        DynamicAllocation {
            enabled: false,
            min_executors: 0,
            max_executors: u32::MAX,
            initial_executors: None,
            backlog_timeout: Duration::from_secs(1),
            sustained_backlog_timeout: None,
            idle_timeout: Duration::from_secs(60),
            ratio: 1.0,
            cooldown: Duration::from_secs(10),
            max_pending: 20,
            max_start_failures: 5,
            start_backoff: Duration::from_secs(1),
        }
    }
}

impl KubernetesSettings {
    /// The pod of executor `id` of application `app` (Spark's `<app>-exec-<id>`).
    pub fn pod_name(app: &str, id: &str) -> String {
        format!("{app}-exec-{id}")
    }

    /// The executor id a pod's name gives: what follows `<app>-exec-`, or the whole
    /// name for a pod named otherwise (one of a Deployment's, say).
    pub fn executor_id(app: &str, pod: &str) -> crate::ExecutorId {
        match pod.strip_prefix(app).and_then(|rest| rest.strip_prefix("-exec-")) {
            Some(id) if !id.is_empty() => id.into(),
            _ => pod.into(),
        }
    }
}

/// `flint.speculation.*` once enabled: when a straggling task gets a copy (see the
/// control core's scheduler).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeculationSettings {
    /// `flint.speculation.multiplier` (default 3): times the stage's median run time.
    pub multiplier: f64,
    /// `flint.speculation.quantile` (default 0.9): the stage's share done first.
    pub quantile: f64,
    /// `flint.speculation.minTaskRuntime` (default 100ms).
    pub min_task_runtime: Duration,
    /// `flint.speculation.interval` (default 100ms, at least 10ms).
    pub interval: Duration,
}

impl Default for SpeculationSettings {
    fn default() -> SpeculationSettings {
        SpeculationSettings {
            multiplier: 3.0,
            quantile: 0.9,
            min_task_runtime: Duration::from_millis(100),
            interval: Duration::from_millis(100),
        }
    }
}
