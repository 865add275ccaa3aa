//! An executor's pod: how it is made (from an optional template, Flint's fields winning)
//! and what its status says (waiting, running, or ended and why).

use k8s_openapi::api::core::v1::{ContainerState, Pod};
use serde_json::{Value, json};

/// Labels every executor pod carries.
pub const NAME_LABEL: &str = "app.kubernetes.io/name";
pub const APP_LABEL: &str = "app.kubernetes.io/instance";
pub const ROLE_LABEL: &str = "flint.dev/role";
pub const ID_LABEL: &str = "flint.dev/executor-id";

/// Where an executor pod finds the application secret and keeps its work.
pub const SECRET_DIR: &str = "/etc/flint";
pub const WORK_DIR: &str = "/home/flint/work";

/// The name of the container Flint fills in (a template's, if it has one so named).
pub const CONTAINER: &str = "executor";

/// What every executor pod of an application shares.
#[derive(Debug, Clone)]
pub struct PodConfig {
    pub app_id: String,
    pub namespace: String,
    pub image: String,
    pub image_pull_policy: String,
    /// The driver's URL, its certificate's fingerprint included.
    pub driver_url: String,
    /// The Secret whose `secret` key is the application secret.
    pub secret_name: String,
    pub cores: u32,
    /// Executor memory in bytes; the pod asks for this plus the overhead.
    pub memory: u64,
    pub memory_overhead_factor: f64,
    /// `flint.decommission.timeout`: a deleted pod is given this and a margin to hand
    /// its map outputs over before its kubelet kills it.
    pub decommission_timeout: std::time::Duration,
    /// The pod executor pods start from.
    pub template: Option<Value>,
    /// The driver's pod, owner of every executor pod, when the driver runs in one.
    pub owner: Option<Value>,
}

impl PodConfig {
    /// The label selector of this application's executor pods.
    pub fn selector(&self) -> String {
        format!("{NAME_LABEL}=flint,{APP_LABEL}={},{ROLE_LABEL}=executor", self.app_id)
    }

    /// Memory the pod asks for, in MiB: executor memory plus the overhead.
    pub fn pod_memory_mib(&self) -> u64 {
        let mib = self.memory as f64 / (1u64 << 20) as f64;
        (mib * (1.0 + self.memory_overhead_factor)).ceil() as u64
    }

    /// The pod of executor `id`.
    pub fn executor_pod(&self, id: &str) -> Value {
        let mut pod = self.template.clone().unwrap_or_else(|| json!({}));
        pod["apiVersion"] = json!("v1");
        pod["kind"] = json!("Pod");
        let meta = object(&mut pod, "metadata");
        meta.insert("name".into(), json!(flint_proto::KubernetesSettings::pod_name(&self.app_id, id)));
        meta.insert("namespace".into(), json!(self.namespace));
        for key in ["generateName", "resourceVersion", "uid", "creationTimestamp"] {
            meta.remove(key);
        }
        let labels = object_in(meta, "labels");
        for (k, v) in
            [(NAME_LABEL, "flint"), (APP_LABEL, &self.app_id), (ROLE_LABEL, "executor"), (ID_LABEL, id)]
        {
            labels.insert(k.into(), json!(v));
        }
        if let Some(owner) = &self.owner {
            meta.insert("ownerReferences".into(), json!([owner]));
        }
        let spec = object(&mut pod, "spec");
        // An executor that ends is replaced by the driver, never restarted in place.
        spec.insert("restartPolicy".into(), json!("Never"));
        spec.insert("automountServiceAccountToken".into(), json!(false));
        // A pod deleted gets its grace period to finish its tasks and hand its map
        // outputs over (the executor waits the timeout and 5 s for the driver's word);
        // a template may give it longer.
        let grace = self.decommission_timeout.as_secs() + 15;
        let asked = spec.get("terminationGracePeriodSeconds").and_then(Value::as_u64).unwrap_or(0);
        spec.insert("terminationGracePeriodSeconds".into(), json!(grace.max(asked)));
        // Flint's hardening wins over the template's, field by field (a template may add
        // to it). With `fsGroup` a kubelet makes the secret's files (root's own) readable
        // by the executor's group, which is how uid 65532 reads them.
        merge_over(
            object_in(spec, "securityContext"),
            json!({
                "runAsNonRoot": true,
                "runAsUser": RUN_AS,
                "runAsGroup": RUN_AS,
                "fsGroup": RUN_AS,
                "seccompProfile": { "type": "RuntimeDefault" },
            }),
        );
        let volumes = array_in(spec, "volumes");
        volumes.retain(|v| !matches!(v["name"].as_str(), Some("flint-secret" | "flint-work")));
        volumes.push(json!({
            "name": "flint-secret",
            "secret": {
                "secretName": self.secret_name,
                "defaultMode": 0o400,
                "items": [{ "key": "secret", "path": "secret" }],
            },
        }));
        volumes.push(json!({ "name": "flint-work", "emptyDir": {} }));
        let containers = array_in(spec, "containers");
        let at = containers.iter().position(|c| c["name"] == CONTAINER).unwrap_or(0);
        if containers.is_empty() {
            containers.push(json!({}));
        }
        let container = containers[at].as_object_mut().expect("a container is an object");
        container.insert("name".into(), json!(CONTAINER));
        container.insert("image".into(), json!(self.image));
        container.insert("imagePullPolicy".into(), json!(self.image_pull_policy));
        container.remove("command");
        container.insert("args".into(), json!(["executor"]));
        let field = |path: &str| json!({ "fieldRef": { "fieldPath": path } });
        let ours = [
            ("FLINT_DRIVER_URL", json!({ "value": self.driver_url })),
            ("FLINT_APP_ID", json!({ "value": self.app_id })),
            ("FLINT_EXECUTOR_CORES", json!({ "value": self.cores.to_string() })),
            ("FLINT_EXECUTOR_MEMORY", json!({ "value": self.memory.to_string() })),
            ("FLINT_EXECUTOR_POD_NAME", json!({ "valueFrom": field("metadata.name") })),
            ("FLINT_EXECUTOR_POD_IP", json!({ "valueFrom": field("status.podIP") })),
            ("FLINT_SECRET_FILE", json!({ "value": format!("{SECRET_DIR}/secret") })),
            ("FLINT_WORK_DIR", json!({ "value": WORK_DIR })),
        ];
        let env = array_in(container, "env");
        env.retain(|e| !ours.iter().any(|(name, _)| e["name"] == *name));
        for (name, mut value) in ours {
            value["name"] = json!(name);
            env.push(value);
        }
        let (cpu, memory) = (self.cores.to_string(), format!("{}Mi", self.pod_memory_mib()));
        let resources = object_in(container, "resources");
        for kind in ["requests", "limits"] {
            let r = object_in(resources, kind);
            r.insert("cpu".into(), json!(cpu));
            r.insert("memory".into(), json!(memory));
        }
        let mounts = array_in(container, "volumeMounts");
        mounts.retain(|m| !matches!(m["name"].as_str(), Some("flint-secret" | "flint-work")));
        mounts.push(json!({ "name": "flint-secret", "mountPath": SECRET_DIR, "readOnly": true }));
        mounts.push(json!({ "name": "flint-work", "mountPath": WORK_DIR }));
        // A container's own settings would override the pod's: the same fields again.
        merge_over(
            object_in(container, "securityContext"),
            json!({
                "runAsNonRoot": true,
                "runAsUser": RUN_AS,
                "runAsGroup": RUN_AS,
                "privileged": false,
                "allowPrivilegeEscalation": false,
                "readOnlyRootFilesystem": true,
                "capabilities": { "drop": ["ALL"] },
            }),
        );
        pod
    }
}

/// The user and group executors run as (the image's non-root user).
pub const RUN_AS: u32 = 65532;

/// Sets each of `ours` fields in `into`, keeping the fields it does not name.
fn merge_over(into: &mut serde_json::Map<String, Value>, ours: Value) {
    if let Value::Object(ours) = ours {
        for (k, v) in ours {
            // Whole values: our `capabilities` drops a template's `add` with the rest.
            into.insert(k, v);
        }
    }
}

/// `value[key]` as an object, made one if it is anything else.
fn object<'a>(value: &'a mut Value, key: &str) -> &'a mut serde_json::Map<String, Value> {
    if !value[key].is_object() {
        value[key] = json!({});
    }
    value[key].as_object_mut().expect("just made an object")
}

fn object_in<'a>(
    map: &'a mut serde_json::Map<String, Value>,
    key: &str,
) -> &'a mut serde_json::Map<String, Value> {
    let slot = map.entry(key).or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    slot.as_object_mut().expect("just made an object")
}

fn array_in<'a>(map: &'a mut serde_json::Map<String, Value>, key: &str) -> &'a mut Vec<Value> {
    let slot = map.entry(key).or_insert_with(|| json!([]));
    if !slot.is_array() {
        *slot = json!([]);
    }
    slot.as_array_mut().expect("just made an array")
}

/// What a pod's status says of its executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Not running yet: scheduled and pulling, or waiting for a node (the reason).
    Waiting(Option<String>),
    Running,
    /// Gone for good, with the reason Kubernetes gives.
    Ended(String),
}

/// Waiting reasons after which the container will not start without a change to the
/// pod or the cluster: counted as a failed start rather than waited out.
const STUCK: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "CrashLoopBackOff",
];

pub fn verdict(pod: &Pod) -> Verdict {
    let Some(status) = &pod.status else { return Verdict::Waiting(None) };
    let container = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == CONTAINER)
        .or_else(|| status.container_statuses.iter().flatten().next());
    let state = container.and_then(|c| c.state.as_ref());
    let said = |reason: &str, message: Option<&String>| match message.filter(|m| !m.is_empty()) {
        Some(m) => format!("{reason}: {}", clip(m)),
        None => reason.to_owned(),
    };
    if let Some(ContainerState { terminated: Some(t), .. }) = state {
        let reason = t.reason.as_deref().unwrap_or("Terminated");
        let what = format!("{reason} (exit code {})", t.exit_code);
        return Verdict::Ended(format!("pod terminated: {}", said(&what, t.message.as_ref())));
    }
    if let Some(ContainerState { waiting: Some(w), .. }) = state
        && let Some(reason) = w.reason.as_deref().filter(|r| STUCK.contains(r))
    {
        return Verdict::Ended(format!("pod cannot start: {}", said(reason, w.message.as_ref())));
    }
    match status.phase.as_deref() {
        Some("Failed") => {
            let reason = status.reason.as_deref().unwrap_or("Failed");
            Verdict::Ended(format!("pod failed: {}", said(reason, status.message.as_ref())))
        }
        Some("Succeeded") => Verdict::Ended("pod terminated: Completed (exit code 0)".into()),
        Some("Running") if state.is_some_and(|s| s.running.is_some()) => Verdict::Running,
        _ => {
            let unschedulable = status.conditions.iter().flatten().find(|c| {
                c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable")
            });
            Verdict::Waiting(unschedulable.map(|c| said("Unschedulable", c.message.as_ref())))
        }
    }
}

/// A message from the API server, cut to a length that fits a status line.
pub(crate) fn clip(message: &str) -> String {
    const MAX: usize = 300;
    match message.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &message[..at]),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests;
