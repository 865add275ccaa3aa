//! A Kubernetes API server written for the tests, with a kubelet inside.
//!
//! It serves the real REST paths for pods in namespaces (create, get, list, watch with
//! resource versions and label selectors, delete, delete a collection), keeps a
//! history of events for watches that resume, and answers errors as `Status` objects.
//! Like a kubelet, it starts a real `flint executor` process for each executor pod it
//! accepts, with the environment the pod spec asks for (downward-API fields filled from
//! the pod's name, namespace and IP; secret keys from the Secrets given to it), mounts
//! its volumes as directories (paths under a mount in env values and args are moved
//! there), stops the process on delete (SIGTERM, SIGKILL after the grace period), and
//! records how it ended. A test can fail a pod with a given reason (OOMKilled), and an
//! image it does not know fails to pull.
//!
//! Files and users are as a real kubelet makes them, since that is what breaks pods on
//! real clusters: a Secret's files are owned by root with the volume's `defaultMode`
//! (or the item's `mode`); with a pod `fsGroup` their group becomes that gid and group
//! read is added (a read-only volume gets `mode | 0440`); an `emptyDir` is 0777, given
//! to `fsGroup` with the setgid bit; and the container's process runs as `runAsUser`
//! and `runAsGroup` (the container's securityContext over the pod's) with `fsGroup`
//! among its supplementary groups. See
//! <https://kubernetes.io/docs/concepts/configuration/secret/#using-secrets-as-files-from-a-pod>
//! and <https://kubernetes.io/docs/tasks/configure-pod-container/security-context/>.
//! That needs root (as a kubelet has); run as anyone else, the kubelet keeps the modes
//! but not the owners, and says so.
#![allow(dead_code)]

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::broadcast;

/// One event of the pod store: its resource version, type and the pod then.
type Change = (u64, &'static str, Value);

struct Store {
    pods: BTreeMap<(String, String), Value>,
    /// Executor processes running, by pod.
    pids: HashMap<(String, String), u32>,
    /// How a test asked a pod to end (reason, exit code).
    failing: HashMap<(String, String), (String, i32)>,
    secrets: HashMap<(String, String), BTreeMap<String, String>>,
    version: u64,
    history: Vec<Change>,
    created: u32,
}

struct Inner {
    store: Mutex<Store>,
    changes: broadcast::Sender<Change>,
    images: HashMap<String, PathBuf>,
    dir: PathBuf,
}

pub struct KubeApi {
    inner: Arc<Inner>,
    pub url: String,
    runtime: Option<tokio::runtime::Runtime>,
}

const HISTORY: usize = 10_000;

impl KubeApi {
    /// Serves on loopback; pods with an image in `images` run that binary, as an image's
    /// entrypoint would; their files go under `dir`.
    pub fn start(images: HashMap<String, PathBuf>, dir: PathBuf) -> KubeApi {
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        // Pods run as their own users: they pass through the test's folders to theirs,
        // and run their image's binary from a copy of their own (an image's files are
        // the image's, wherever the test's checkout lives).
        std::fs::create_dir_all(&dir).unwrap();
        for folder in [dir.parent(), Some(dir.as_path())].into_iter().flatten() {
            set_mode(folder, 0o711);
        }
        let layers = dir.join("images");
        std::fs::create_dir_all(&layers).unwrap();
        set_mode(&layers, 0o755);
        let images = images
            .into_iter()
            .enumerate()
            .map(|(n, (image, binary))| {
                let copy = layers.join(n.to_string());
                std::fs::copy(&binary, &copy).unwrap();
                set_mode(&copy, 0o755);
                (image, copy)
            })
            .collect();
        let inner = Arc::new(Inner {
            store: Mutex::new(Store {
                pods: BTreeMap::new(),
                pids: HashMap::new(),
                failing: HashMap::new(),
                secrets: HashMap::new(),
                version: 1,
                history: Vec::new(),
                created: 0,
            }),
            changes: broadcast::channel(4096).0,
            images,
            dir,
        });
        let app = Router::new()
            .route("/api/v1/namespaces/{ns}/pods", get(list_or_watch).post(create).delete(delete_collection))
            .route("/api/v1/namespaces/{ns}/pods/{name}", get(get_pod).delete(delete_pod))
            .with_state(inner.clone());
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        runtime.spawn(async move { axum::serve(listener, app).await });
        KubeApi { inner, url, runtime: Some(runtime) }
    }

    /// The folder a pod's volumes are in (each under its name).
    pub fn pod_dir(&self, name: &str) -> PathBuf {
        self.inner.dir.join(name)
    }

    /// The process running a pod's container, while it runs.
    pub fn pod_pid(&self, namespace: &str, name: &str) -> Option<u32> {
        self.inner.store.lock().unwrap().pids.get(&(namespace.to_owned(), name.to_owned())).copied()
    }

    /// The copy of `image`'s binary that its pods run (readable by their users).
    pub fn image_binary(&self, image: &str) -> PathBuf {
        self.inner.images[image].clone()
    }

    /// A kubeconfig that points at this server, in `namespace`.
    pub fn kubeconfig(&self, namespace: &str) -> PathBuf {
        let path = self.inner.dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {}\nusers:\n- name: test\n  user: {{}}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n    namespace: {namespace}\ncurrent-context: test\n",
            self.url
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    pub fn add_secret(&self, namespace: &str, name: &str, data: &[(&str, &str)]) {
        let data = data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        self.inner.store.lock().unwrap().secrets.insert((namespace.into(), name.into()), data);
    }

    /// A pod the kubelet does not run (the driver's own, say); returns its uid.
    pub fn add_pod(&self, namespace: &str, name: &str) -> String {
        let pod = json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": name, "namespace": namespace },
            "spec": { "containers": [{ "name": "driver", "image": "elsewhere" }] } });
        let mut store = self.inner.store.lock().unwrap();
        let pod = store.admit(namespace, pod).unwrap();
        let pod = store.put(&self.inner.changes, "ADDED", pod);
        pod["metadata"]["uid"].as_str().unwrap().to_owned()
    }

    pub fn pods(&self, namespace: &str) -> Vec<Value> {
        let store = self.inner.store.lock().unwrap();
        store.pods.iter().filter(|((ns, _), _)| ns == namespace).map(|(_, p)| p.clone()).collect()
    }

    pub fn executor_pods(&self, namespace: &str) -> Vec<Value> {
        self.pods(namespace)
            .into_iter()
            .filter(|p| p["metadata"]["labels"]["flint.dev/role"] == "executor")
            .collect()
    }

    /// Pods created through the API so far.
    pub fn created(&self) -> u32 {
        self.inner.store.lock().unwrap().created
    }

    /// Executor processes running now.
    pub fn running(&self) -> usize {
        self.inner.store.lock().unwrap().pids.len()
    }

    /// Ends a running pod's process as the kernel would, and records `reason`.
    pub fn fail(&self, namespace: &str, name: &str, reason: &str, exit_code: i32) {
        let key = (namespace.to_owned(), name.to_owned());
        let mut store = self.inner.store.lock().unwrap();
        store.failing.insert(key.clone(), (reason.into(), exit_code));
        let pid = *store.pids.get(&key).expect("the pod runs");
        signal(pid, libc::SIGKILL);
    }

    /// Forgets a pod without telling any watcher: an event the driver's watch missed.
    /// Its process, if any, goes on.
    pub fn vanish(&self, namespace: &str, name: &str) {
        let mut store = self.inner.store.lock().unwrap();
        store.pods.remove(&(namespace.to_owned(), name.to_owned()));
        store.version += 1;
    }

    pub fn log_of(&self, name: &str) -> String {
        std::fs::read_to_string(self.inner.dir.join(format!("{name}.log"))).unwrap_or_default()
    }
}

impl Drop for KubeApi {
    fn drop(&mut self) {
        for pid in self.inner.store.lock().unwrap().pids.values() {
            signal(*pid, libc::SIGKILL);
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

fn signal(pid: u32, sig: libc::c_int) {
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

impl Store {
    /// Fills in what the server sets on create, or says why not (code, reason, message).
    fn admit(
        &mut self,
        namespace: &str,
        mut pod: Value,
    ) -> Result<Value, (StatusCode, &'static str, String)> {
        let Some(name) = pod["metadata"]["name"].as_str().map(str::to_owned) else {
            return Err((StatusCode::UNPROCESSABLE_ENTITY, "Invalid", "metadata.name is required".into()));
        };
        if self.pods.contains_key(&(namespace.to_owned(), name.clone())) {
            return Err((StatusCode::CONFLICT, "AlreadyExists", format!("pods {name:?} already exists")));
        }
        pod["metadata"]["namespace"] = json!(namespace);
        pod["metadata"]["uid"] = json!(format!("uid-{}-{}", self.version, name));
        pod["metadata"]["creationTimestamp"] = json!("2026-11-30T00:00:00Z");
        pod["status"] = json!({ "phase": "Pending" });
        Ok(pod)
    }

    /// Stores a pod at a new version and tells the watchers.
    fn put(&mut self, changes: &broadcast::Sender<Change>, kind: &'static str, mut pod: Value) -> Value {
        self.version += 1;
        pod["metadata"]["resourceVersion"] = json!(self.version.to_string());
        let key = key_of(&pod);
        if kind == "DELETED" {
            self.pods.remove(&key);
        } else {
            self.pods.insert(key, pod.clone());
        }
        self.history.push((self.version, kind, pod.clone()));
        if self.history.len() > HISTORY {
            self.history.drain(..HISTORY / 2);
        }
        let _ = changes.send((self.version, kind, pod.clone()));
        pod
    }
}

fn key_of(pod: &Value) -> (String, String) {
    let meta = &pod["metadata"];
    (meta["namespace"].as_str().unwrap_or("").to_owned(), meta["name"].as_str().unwrap_or("").to_owned())
}

fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16() });
    (code, axum::Json(body)).into_response()
}

/// `a=b,c=d` (also `==`, `!=`), as the API server reads an equality selector.
fn selects(selector: Option<&String>, pod: &Value) -> bool {
    let Some(selector) = selector.filter(|s| !s.is_empty()) else { return true };
    let labels = &pod["metadata"]["labels"];
    selector.split(',').all(|term| {
        if let Some((k, v)) = term.split_once("!=") {
            labels[k.trim()].as_str() != Some(v.trim())
        } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            labels[k.trim()].as_str() == Some(v.trim())
        } else {
            labels.get(term.trim()).is_some()
        }
    })
}

type Params = Query<HashMap<String, String>>;

async fn list_or_watch(
    State(inner): State<Arc<Inner>>,
    Path(ns): Path<String>,
    Query(q): Params,
) -> Response {
    let selector = q.get("labelSelector");
    let in_ns = |pod: &Value| pod["metadata"]["namespace"] == ns.as_str() && selects(selector, pod);
    if !matches!(q.get("watch").map(String::as_str), Some("true" | "1")) {
        let store = inner.store.lock().unwrap();
        let items: Vec<&Value> = store.pods.values().filter(|p| in_ns(p)).collect();
        let body = json!({ "apiVersion": "v1", "kind": "PodList",
            "metadata": { "resourceVersion": store.version.to_string() }, "items": items });
        return axum::Json(body).into_response();
    }
    let from: u64 = q.get("resourceVersion").and_then(|v| v.parse().ok()).unwrap_or(0);
    let timeout = Duration::from_secs(q.get("timeoutSeconds").and_then(|v| v.parse().ok()).unwrap_or(300));
    // Subscribed before the history is read: no change falls between the two.
    let (replay, live) = {
        let store = inner.store.lock().unwrap();
        let live = inner.changes.subscribe();
        let oldest = store.history.first().map_or(store.version, |c| c.0);
        if from != 0 && from + 1 < oldest {
            let gone = json!({ "type": "ERROR", "object": { "kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": "too old resource version", "reason": "Expired", "code": 410 } });
            return Response::new(Body::from(format!("{gone}\n")));
        }
        let replay: Vec<Change> = if from == 0 {
            store.pods.values().map(|p| (0, "ADDED", p.clone())).collect()
        } else {
            store.history.iter().filter(|c| c.0 > from).cloned().collect()
        };
        (replay, live)
    };
    let deadline = tokio::time::Instant::now() + timeout;
    let line = |(_, kind, pod): Change| format!("{}\n", json!({ "type": kind, "object": pod }));
    let (ns2, selector) = (ns.clone(), selector.cloned());
    let wanted =
        move |pod: &Value| pod["metadata"]["namespace"] == ns2.as_str() && selects(selector.as_ref(), pod);
    let first: Vec<String> = replay.into_iter().filter(|c| wanted(&c.2)).map(line).collect();
    let rest = futures::stream::unfold((live, wanted), move |(mut live, wanted)| async move {
        loop {
            match tokio::time::timeout_at(deadline, live.recv()).await {
                Ok(Ok(change)) if wanted(&change.2) => return Some((line(change), (live, wanted))),
                Ok(Ok(_)) => continue,
                Ok(Err(broadcast::error::RecvError::Lagged(_))) => continue,
                _ => return None,
            }
        }
    });
    let stream = futures::StreamExt::map(
        futures::StreamExt::chain(futures::stream::iter(first), rest),
        Ok::<_, std::convert::Infallible>,
    );
    Response::new(Body::from_stream(stream))
}

async fn get_pod(State(inner): State<Arc<Inner>>, Path((ns, name)): Path<(String, String)>) -> Response {
    match inner.store.lock().unwrap().pods.get(&(ns, name.clone())) {
        Some(pod) => axum::Json(pod.clone()).into_response(),
        None => status(StatusCode::NOT_FOUND, "NotFound", &format!("pods \"{name}\" not found")),
    }
}

async fn create(
    State(inner): State<Arc<Inner>>,
    Path(ns): Path<String>,
    axum::Json(pod): axum::Json<Value>,
) -> Response {
    let pod = {
        let mut store = inner.store.lock().unwrap();
        let pod = match store.admit(&ns, pod) {
            Ok(pod) => pod,
            Err((code, reason, message)) => return status(code, reason, &message),
        };
        store.created += 1;
        store.put(&inner.changes, "ADDED", pod)
    };
    tokio::spawn(kubelet(inner.clone(), pod.clone()));
    (StatusCode::CREATED, axum::Json(pod)).into_response()
}

async fn delete_pod(
    State(inner): State<Arc<Inner>>,
    Path((ns, name)): Path<(String, String)>,
    Query(q): Params,
    body: axum::body::Bytes,
) -> Response {
    let grace = grace_of(&q, &body);
    match delete(&inner, (ns, name.clone()), grace) {
        Some(pod) => axum::Json(pod).into_response(),
        None => status(StatusCode::NOT_FOUND, "NotFound", &format!("pods \"{name}\" not found")),
    }
}

async fn delete_collection(
    State(inner): State<Arc<Inner>>,
    Path(ns): Path<String>,
    Query(q): Params,
    body: axum::body::Bytes,
) -> Response {
    let grace = grace_of(&q, &body);
    let keys: Vec<(String, String)> = {
        let store = inner.store.lock().unwrap();
        store
            .pods
            .iter()
            .filter(|((pns, _), p)| *pns == ns && selects(q.get("labelSelector"), p))
            .map(|(k, _)| k.clone())
            .collect()
    };
    let items: Vec<Value> = keys.into_iter().filter_map(|k| delete(&inner, k, grace)).collect();
    axum::Json(json!({ "apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items }))
        .into_response()
}

/// The grace period a delete asks for, if it asks for one.
fn grace_of(q: &HashMap<String, String>, body: &[u8]) -> Option<u64> {
    let from_body = serde_json::from_slice::<Value>(body).ok().and_then(|b| b["gracePeriodSeconds"].as_u64());
    from_body.or_else(|| q.get("gracePeriodSeconds").and_then(|g| g.parse().ok()))
}

/// Marks a pod deleted; it goes once its process has ended (at once if none runs).
/// Without a grace period of its own, the delete gives the pod's
/// `terminationGracePeriodSeconds` (30 unless set), as Kubernetes does.
fn delete(inner: &Arc<Inner>, key: (String, String), grace: Option<u64>) -> Option<Value> {
    let mut store = inner.store.lock().unwrap();
    let mut pod = store.pods.get(&key)?.clone();
    let grace = grace.or_else(|| pod["spec"]["terminationGracePeriodSeconds"].as_u64()).unwrap_or(30);
    if pod["metadata"]["deletionTimestamp"].is_null() {
        pod["metadata"]["deletionTimestamp"] = json!("2026-11-30T00:00:01Z");
        pod = store.put(&inner.changes, "MODIFIED", pod);
    }
    match store.pids.get(&key).copied() {
        Some(pid) => {
            signal(pid, libc::SIGTERM);
            let inner = inner.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(grace)).await;
                if inner.store.lock().unwrap().pids.get(&key) == Some(&pid) {
                    signal(pid, libc::SIGKILL);
                }
            });
        }
        None => {
            pod = store.put(&inner.changes, "DELETED", pod);
        }
    }
    Some(pod)
}

/// Runs an executor pod's container as a process.
async fn kubelet(inner: Arc<Inner>, pod: Value) {
    if pod["metadata"]["labels"]["flint.dev/role"] != "executor" {
        return;
    }
    let key = key_of(&pod);
    let container = pod["spec"]["containers"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == "executor").or(cs.first()))
        .cloned()
        .unwrap_or(Value::Null);
    let image = container["image"].as_str().unwrap_or("").to_owned();
    let Some(binary) = inner.images.get(&image).cloned() else {
        update(&inner, &key, |pod| {
            pod["status"]["containerStatuses"] = json!([container_status(
                &image,
                json!({ "waiting": {
                "reason": "ErrImagePull", "message": format!("image {image:?} not found") } })
            )]);
        });
        return;
    };
    let (ns, name) = key.clone();
    let pod_ip = "127.0.0.1";
    let run_as = RunAs::of(&pod, &container);
    let root = inner.dir.join(&name);
    std::fs::create_dir_all(&root).unwrap();
    set_mode(&root, 0o755);
    // Volumes as directories; paths under their mounts moved there.
    let mut mounts: Vec<(String, PathBuf)> = Vec::new();
    for mount in container["volumeMounts"].as_array().into_iter().flatten() {
        let volume_name = mount["name"].as_str().unwrap();
        let volume =
            pod["spec"]["volumes"].as_array().unwrap().iter().find(|v| v["name"] == volume_name).unwrap();
        let dir = root.join(volume_name);
        std::fs::create_dir_all(&dir).unwrap();
        set_mode(&dir, 0o755);
        if volume.get("emptyDir").is_some() {
            set_mode(&dir, 0o777);
            if let Some(group) = run_as.fs_group {
                own(&dir, None, Some(group));
                set_mode(&dir, 0o2777);
            }
        }
        if let Some(secret) = volume.get("secret") {
            let data = inner
                .store
                .lock()
                .unwrap()
                .secrets
                .get(&(ns.clone(), secret["secretName"].as_str().unwrap().into()))
                .cloned();
            let Some(data) = data else {
                update(&inner, &key, |pod| {
                    pod["status"]["containerStatuses"] = json!([container_status(
                        &image,
                        json!({ "waiting": {
                        "reason": "CreateContainerConfigError", "message": "secret not found" } })
                    )]);
                });
                return;
            };
            // Kubernetes' default mode for a Secret volume is 0644.
            let default_mode = secret["defaultMode"].as_u64().unwrap_or(0o644) as u32;
            for item in secret["items"].as_array().unwrap() {
                let file = dir.join(item["path"].as_str().unwrap());
                let mode = item["mode"].as_u64().map_or(default_mode, |m| m as u32);
                write_secret_file(
                    &file,
                    data[item["key"].as_str().unwrap()].as_bytes(),
                    mode,
                    run_as.fs_group,
                );
            }
        }
        mounts.push((mount["mountPath"].as_str().unwrap().to_owned(), dir));
    }
    let moved = |text: &str| {
        for (at, dir) in &mounts {
            if let Some(rest) = text.strip_prefix(at.as_str()) {
                return format!("{}{rest}", dir.display());
            }
        }
        text.to_owned()
    };
    let mut command = tokio::process::Command::new(binary);
    command.env_clear().env("PATH", std::env::var("PATH").unwrap_or_default());
    for e in container["env"].as_array().into_iter().flatten() {
        let value = if let Some(v) = e["value"].as_str() {
            moved(v)
        } else {
            match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                Some("metadata.name") => name.clone(),
                Some("metadata.namespace") => ns.clone(),
                Some("status.podIP") => pod_ip.into(),
                Some("metadata.uid") => pod["metadata"]["uid"].as_str().unwrap().into(),
                other => panic!("the test kubelet does not fill {other:?}"),
            }
        };
        command.env(e["name"].as_str().unwrap(), value);
    }
    let args: Vec<String> =
        container["args"].as_array().into_iter().flatten().map(|a| moved(a.as_str().unwrap())).collect();
    let log = std::fs::File::create(inner.dir.join(format!("{name}.log"))).unwrap();
    run_as.apply(&mut command);
    let spawned = command
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .kill_on_drop(true)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            update(&inner, &key, |pod| {
                pod["status"]["containerStatuses"] = json!([container_status(
                    &image,
                    json!({ "waiting": {
                    "reason": "RunContainerError", "message": e.to_string() } })
                )]);
            });
            return;
        }
    };
    inner.store.lock().unwrap().pids.insert(key.clone(), child.id().unwrap());
    update(&inner, &key, |pod| {
        pod["status"] = json!({ "phase": "Running", "podIP": pod_ip,
            "containerStatuses": [container_status(&image, json!({ "running": { "startedAt": "2026-11-30T00:00:00Z" } }))] });
    });
    let exit = child.wait().await.ok();
    use std::os::unix::process::ExitStatusExt;
    let code = exit.map_or(-1, |s| s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)));
    let mut store = inner.store.lock().unwrap();
    store.pids.remove(&key);
    let (reason, code) = store
        .failing
        .remove(&key)
        .unwrap_or_else(|| (if code == 0 { "Completed" } else { "Error" }.to_owned(), code));
    let Some(mut pod) = store.pods.get(&key).cloned() else { return };
    pod["status"]["phase"] = json!(if code == 0 { "Succeeded" } else { "Failed" });
    pod["status"]["containerStatuses"] =
        json!([container_status(&image, json!({ "terminated": { "exitCode": code, "reason": reason } }))]);
    let deleting = !pod["metadata"]["deletionTimestamp"].is_null();
    let pod = store.put(&inner.changes, "MODIFIED", pod);
    if deleting {
        store.put(&inner.changes, "DELETED", pod);
    }
}

/// Writes one file of a Secret volume as a kubelet does: owned by root, with `mode`;
/// with an `fsGroup`, given to that group with group read added (`mode | 0440`).
pub fn write_secret_file(file: &std::path::Path, data: &[u8], mode: u32, fs_group: Option<u32>) {
    std::fs::write(file, data).unwrap();
    own(file, Some(0), Some(fs_group.unwrap_or(0)));
    set_mode(file, if fs_group.is_some() { mode | 0o440 } else { mode });
}

/// Who a container's process runs as.
struct RunAs {
    uid: Option<u32>,
    gid: Option<u32>,
    fs_group: Option<u32>,
}

impl RunAs {
    fn of(pod: &Value, container: &Value) -> RunAs {
        let field = |name: &str| {
            let ours = &container["securityContext"][name];
            let theirs = &pod["spec"]["securityContext"][name];
            ours.as_u64().or(theirs.as_u64()).map(|n| n as u32)
        };
        RunAs { uid: field("runAsUser"), gid: field("runAsGroup"), fs_group: field("fsGroup") }
    }

    fn apply(&self, command: &mut tokio::process::Command) {
        if !is_root() {
            eprintln!("test kubelet: not root, so the executor runs as the test's own user");
            return;
        }
        // A container without runAsGroup runs in group 0 (the image's user's group, here).
        become_user(command.as_std_mut(), self.uid, self.gid.unwrap_or(0), self.fs_group);
    }
}

/// Makes `command` run as `uid` (else root), in `gid`, with `supplementary` as its
/// only other group. The three calls are made in the child between fork and exec, in
/// the one order that works (the groups while still root), which `Command::uid` and
/// `gid` cannot combine with supplementary groups.
pub fn become_user(
    command: &mut std::process::Command,
    uid: Option<u32>,
    gid: u32,
    supplementary: Option<u32>,
) {
    use std::os::unix::process::CommandExt;
    let groups: Vec<libc::gid_t> = supplementary.into_iter().collect();
    // SAFETY: only async-signal-safe calls, between fork and exec, on a vector made
    // before the fork.
    unsafe {
        command.pre_exec(move || {
            if libc::setgroups(groups.len(), groups.as_ptr()) != 0 || libc::setgid(gid) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(uid) = uid
                && libc::setuid(uid) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn set_mode(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Gives `path` to `uid` and `gid`, as a kubelet (root) does; a kubelet run by another
/// user cannot, and leaves it as it is.
fn own(path: &std::path::Path, uid: Option<u32>, gid: Option<u32>) {
    if is_root() {
        std::os::unix::fs::chown(path, uid, gid).unwrap();
    }
}

fn container_status(image: &str, state: Value) -> Value {
    json!({ "name": "executor", "image": image, "imageID": "", "ready": state.get("running").is_some(),
        "restartCount": 0, "state": state })
}

fn update(inner: &Arc<Inner>, key: &(String, String), change: impl FnOnce(&mut Value)) {
    let mut store = inner.store.lock().unwrap();
    let Some(mut pod) = store.pods.get(key).cloned() else { return };
    change(&mut pod);
    store.put(&inner.changes, "MODIFIED", pod);
}
