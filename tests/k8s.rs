//! Kubernetes: the `kubernetes` backend against a test API server whose kubelet runs
//! real executors, and `flint k8s manifests`: the rendered objects pass
//! `kubernetes-validate --strict`, say what they must field by field, and work — a
//! driver started with the Deployment's arguments and the Secret's and ConfigMap's
//! files (only the host name swapped for loopback: there is no cluster DNS here) asks
//! for its executor pods, runs a job on them and deletes them when it stops.

mod common;

use common::{Proc, command, eventually, flint, json, lossy, read_url, root, wasm};
use serde_json::Value;
use std::time::Duration;

fn validator() -> std::path::PathBuf {
    // .ci/run installs it into target/pyvenv; without it this fails, it does not skip.
    let local = root().join("target/pyvenv/bin/kubernetes-validate");
    if local.exists() {
        return local;
    }
    let on_path = std::process::Command::new("kubernetes-validate").arg("--version").output();
    assert!(
        on_path.is_ok_and(|o| o.status.success()),
        "kubernetes-validate is needed: python3 -m venv target/pyvenv && target/pyvenv/bin/pip install kubernetes-validate"
    );
    "kubernetes-validate".into()
}

fn documents(text: &str) -> Vec<Value> {
    text.split("---\n").filter(|d| !d.trim().is_empty()).map(|d| serde_json::from_str(d).unwrap()).collect()
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn env_of(container: &Value, name: &str) -> Value {
    container["env"].as_array().unwrap().iter().find(|e| e["name"] == name).cloned().unwrap_or(Value::Null)
}

#[test]
fn manifests_validate_say_what_they_must_and_run() {
    let args = [
        "k8s",
        "manifests",
        "--app-id",
        "wc",
        "--namespace",
        "jobs",
        "--image",
        "flint:test",
        "--executors",
        "2",
        "--executor-cores",
        "1",
        "--executor-memory-mib",
        "2048",
        "--conf",
        "flint.task.maxFailures=6",
    ];
    let out = flint(&args);
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    let text = lossy(&out.stdout);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("flint.yaml");
    std::fs::write(&file, &text).unwrap();
    let check = std::process::Command::new(validator()).arg("--strict").arg(&file).output().unwrap();
    assert!(check.status.success(), "{}{}", lossy(&check.stdout), lossy(&check.stderr));

    let docs = documents(&text);
    let secret = find(&docs, "Secret", "wc-secret");
    let app_secret = secret["stringData"]["secret"].as_str().unwrap();
    assert_eq!(text.matches(app_secret).count(), 1, "the secret appears once, in its Secret");
    let service = find(&docs, "Service", "wc-driver");
    assert_eq!(service["spec"]["clusterIP"], "None");
    assert_eq!(service["spec"]["ports"][0]["protocol"], "UDP");
    let role = find(&docs, "Role", "wc-driver");
    assert_eq!(
        role["rules"],
        serde_json::json!([{ "apiGroups": [""], "resources": ["pods"],
            "verbs": ["create", "get", "list", "watch", "delete", "deletecollection"] }]),
        "the driver may do with pods what its backend does, and nothing else"
    );
    let binding = find(&docs, "RoleBinding", "wc-driver");
    assert_eq!(binding["subjects"][0]["name"], "wc-driver");
    find(&docs, "ServiceAccount", "wc-driver");
    let driver = find(&docs, "Deployment", "wc-driver");
    let driver_pod = &driver["spec"]["template"]["spec"];
    assert_eq!(driver_pod["serviceAccountName"], "wc-driver");
    let template_map = find(&docs, "ConfigMap", "wc-executor-template");
    let template_text = template_map["data"]["executor-pod.yaml"].as_str().unwrap();
    let template: Value = serde_json::from_str(template_text).unwrap();
    assert_eq!(template["kind"], "Pod");
    let template_file = dir.path().join("template.json");
    std::fs::write(&template_file, template_text).unwrap();
    let check = std::process::Command::new(validator()).arg("--strict").arg(&template_file).output().unwrap();
    assert!(check.status.success(), "the pod template: {}{}", lossy(&check.stdout), lossy(&check.stderr));
    // A reader that stops early (`| head`) ends the output, not in a panic.
    let piped = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{} k8s manifests --app-id wc --namespace jobs | head -c 10 >/dev/null",
            common::bin().display()
        ))
        .output()
        .unwrap();
    assert!(piped.status.success() && !lossy(&piped.stderr).contains("panicked"), "{}", lossy(&piped.stderr));
    let security = &driver_pod["containers"][0]["securityContext"];
    assert_eq!(security["runAsNonRoot"], true);
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(template["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"], true);

    // The driver as its Deployment starts it (on loopback, port 0), with the Secret's
    // and the ConfigMap's files, against the test API server with its kubelet: it asks
    // for the executor pods itself and runs a job on them.
    let api =
        KubeApi::start(HashMap::from([("flint:test".to_owned(), common::bin())]), dir.path().join("pods"));
    api.add_secret(NS, "wc-secret", &[("secret", app_secret)]);
    let uid = api.add_pod(NS, "wc-driver-5f7c9-abcde");
    let etc = dir.path().join("etc");
    std::fs::create_dir(&etc).unwrap();
    // As a kubelet mounts the Secret's volume for the Deployment's pod: files owned by
    // root, group fsGroup, the volume's defaultMode with group read added.
    let volume =
        driver_pod["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "flint-secret").unwrap();
    let mode = volume["secret"]["defaultMode"].as_u64().unwrap() as u32;
    let fs_group =
        driver_pod["securityContext"]["fsGroup"].as_u64().expect("the driver's pod sets fsGroup") as u32;
    for key in ["secret", "tls.crt", "tls.key"] {
        let data = secret["stringData"][key].as_str().unwrap().as_bytes();
        kube_api::write_secret_file(&etc.join(key), data, mode, Some(fs_group));
    }
    let templates = dir.path().join("template");
    std::fs::create_dir(&templates).unwrap();
    std::fs::write(templates.join("executor-pod.yaml"), template_text).unwrap();
    let mut driver_args: Vec<String> = driver_pod["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            a.as_str()
                .unwrap()
                .replace("/etc/flint-template", templates.to_str().unwrap())
                .replace("/etc/flint", etc.to_str().unwrap())
        })
        .collect();
    let listen = driver_args.iter().position(|a| a == "--listen").unwrap();
    driver_args[listen + 1] = "127.0.0.1:0".into();
    // No cluster DNS here: the executors reach the driver on loopback.
    let host = driver_args.iter().position(|a| a == "--advertise-host").unwrap();
    driver_args[host + 1] = "127.0.0.1".into();
    // The driver's process is the Deployment's user; it writes its URL where it may.
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let url_file = run.join("url");
    driver_args.extend(["--url-file".into(), url_file.to_string_lossy().into_owned()]);
    assert!(driver_args.contains(&"flint.task.maxFailures=6".to_owned()), "{driver_args:?}");
    // The image's binary, in a folder of the run's own, as the container would have it.
    let mut driver_cmd = std::process::Command::new(api.image_binary("flint:test"));
    driver_cmd
        .args(&driver_args)
        .current_dir(&run)
        .env("FLINT_CACHE_DIR", run.join("cache"))
        .env("KUBECONFIG", api.kubeconfig(NS))
        .env("FLINT_DRIVER_POD_NAME", "wc-driver-5f7c9-abcde")
        .env_remove("FLINT_SECRET")
        .env_remove("HOME");
    if kube_api::is_root() {
        let user = driver_pod["containers"][0]["securityContext"]["runAsUser"].as_u64().unwrap() as u32;
        let group = driver_pod["containers"][0]["securityContext"]["runAsGroup"].as_u64().unwrap() as u32;
        assert_eq!(user, 65532);
        kube_api::become_user(&mut driver_cmd, Some(user), group, Some(fs_group));
    }
    let driver = Proc::spawn(driver_cmd, dir.path().join("driver.log"));
    let url = eventually(Duration::from_secs(20), || read_url(&url_file));
    let url = url.unwrap_or_else(|| panic!("the driver starts: {}", driver.log_text()));
    let fingerprint = url.split("fingerprint=").nth(1).unwrap().to_owned();
    assert!(lossy(&out.stderr).contains(&fingerprint), "the printed URL pins the rendered certificate");

    let pods = eventually(Duration::from_secs(20), || {
        let pods = api.executor_pods(NS);
        (pods.len() == 2 && pods.iter().all(|p| p["status"]["phase"] == "Running")).then_some(pods)
    });
    let pods = pods.unwrap_or_else(|| {
        panic!(
            "two executor pods run: {:?}
{}",
            api.executor_pods(NS),
            driver.log_text()
        )
    });
    for pod in &pods {
        assert_eq!(pod["metadata"]["ownerReferences"][0]["uid"], uid.as_str());
        let container = &pod["spec"]["containers"][0];
        assert_eq!(container["resources"]["limits"]["memory"], "2253Mi", "2048 MiB and a tenth for overhead");
        assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 600, "from the template");
        // Its executor runs as the image's user and read its root-owned secret file.
        let name = pod["metadata"]["name"].as_str().unwrap();
        let pid = api.pod_pid(NS, name).expect("the pod's process runs");
        let proc_status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let uid = proc_status.lines().find(|l| l.starts_with("Uid:")).unwrap().to_owned();
        if kube_api::is_root() {
            assert!(uid.split_whitespace().nth(1) == Some("65532"), "{name}: {uid}");
            let secret =
                std::fs::read_dir(api.pod_dir(name).join("flint-secret")).unwrap().next().unwrap().unwrap();
            let meta = secret.metadata().unwrap();
            use std::os::unix::fs::MetadataExt;
            assert_eq!(
                (meta.uid(), meta.gid(), meta.mode() & 0o777),
                (0, 65532, 0o440),
                "as a kubelet writes it"
            );
        }
    }
    // A user in the cluster runs clients where the secret is mounted, as the driver's
    // user (`kubectl exec deploy/wc-driver -- flint submit …`): root outside the pod's
    // group is refused the group-readable file, as it should be.
    let secret_file = etc.join("secret");
    let job = run.join("noop.wasm");
    std::fs::copy(wasm("noop"), &job).unwrap();
    let in_pod = |args: &[&str]| {
        let mut cmd = std::process::Command::new(api.image_binary("flint:test"));
        cmd.args(args)
            .current_dir(&run)
            .env_remove("FLINT_SECRET")
            .env_remove("HOME")
            .env("FLINT_CACHE_DIR", run.join("cache"))
            .env("FLINT_SECRET_FILE", &secret_file);
        if kube_api::is_root() {
            kube_api::become_user(&mut cmd, Some(65532), 65532, Some(fs_group));
        }
        cmd.output().unwrap()
    };
    let out = in_pod(&["submit", "--driver-url", &url, job.to_str().unwrap(), "--partitions", "8", "--json"]);
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    assert_eq!(json(&out)["result"], 8);
    let status = json(&in_pod(&["status", "--driver-url", &url, "--json"]));
    let executors = status["executors"].as_array().unwrap();
    assert_eq!(executors.len(), 2, "{status}");
    assert!(executors.iter().all(|e| e["backend"] == "kubernetes" && e["removed"].is_null()), "{status}");

    // The driver stops: its executor pods are deleted.
    driver.signal("TERM");
    let gone = eventually(Duration::from_secs(20), || api.executor_pods(NS).is_empty().then_some(()));
    assert!(gone.is_some(), "pods left after the driver: {:?}", api.executor_pods(NS));
}

#[path = "common/kube_api.rs"]
mod kube_api;

use kube_api::KubeApi;
use std::collections::HashMap;

const SECRET: &str = "kubernetes-test-secret-0123456789";
const NS: &str = "jobs";

/// A driver with the `kubernetes` backend against the test API server, with the
/// application secret in a Secret there and the driver's own pod registered.
struct PodCluster {
    dir: tempfile::TempDir,
    api: KubeApi,
    driver: Proc,
    url: String,
    driver_uid: String,
}

impl PodCluster {
    fn start(image: &str, conf: &[&str]) -> PodCluster {
        let dir = tempfile::tempdir().unwrap();
        let pods = dir.path().join("pods");
        let api = KubeApi::start(HashMap::from([("flint:test".to_owned(), common::bin())]), pods);
        api.add_secret(NS, "wc-secret", &[("secret", SECRET)]);
        let driver_uid = api.add_pod(NS, "wc-driver-0");
        let url_file = dir.path().join("url");
        let mut cmd = command(&["driver", "--backend", "kubernetes", "--app-id", "wc"]);
        cmd.args(["--url-file", url_file.to_str().unwrap()])
            .args(["--conf", &format!("flint.kubernetes.container.image={image}")])
            .args(["--conf", "flint.kubernetes.driver.pod.name=wc-driver-0"])
            .args(["--conf", "flint.executor.cores=1", "--conf", "flint.executor.memory=256m"])
            .args(["--conf", "flint.kubernetes.allocation.batch.delay=200ms"])
            .args(conf.iter().flat_map(|c| ["--conf", c]))
            .env("KUBECONFIG", api.kubeconfig(NS))
            .env("FLINT_SECRET", SECRET);
        let driver = Proc::spawn(cmd, dir.path().join("driver.log"));
        let url = eventually(Duration::from_secs(20), || read_url(&url_file));
        let url = url.unwrap_or_else(|| panic!("the driver starts: {}", driver.log_text()));
        PodCluster { dir, api, driver, url, driver_uid }
    }

    fn client(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = command(args);
        cmd.args(["--driver-url", &self.url]).env("FLINT_SECRET", SECRET);
        cmd
    }

    fn status(&self) -> Value {
        let out = self.client(&["status", "--json"]).output().unwrap();
        assert!(out.status.success(), "{}", lossy(&out.stderr));
        json(&out)
    }

    fn logs(&self) -> String {
        let pods: String = std::fs::read_dir(self.dir.path().join("pods"))
            .unwrap()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
            .map(|e| format!("--- {}\n{}", e.path().display(), std::fs::read_to_string(e.path()).unwrap()))
            .collect();
        format!("driver:\n{}\n{pods}", self.driver.log_text())
    }
}

#[test]
fn executor_pods_follow_the_load_and_a_pod_killed_for_memory_says_so() {
    let cluster = PodCluster::start(
        "flint:test",
        &[
            "flint.dynamicAllocation.enabled=true",
            "flint.dynamicAllocation.maxExecutors=3",
            "flint.dynamicAllocation.executorIdleTimeout=2s",
            "flint.dynamicAllocation.cooldown=1s",
        ],
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(cluster.api.created(), 0, "minExecutors=0: no pod before there is work");

    // Long enough tasks that a pod can be killed while it runs some.
    let job = ["examples/pi", "--conf", "points=60000000", "--partitions", "24", "--json"];
    let submit = cluster.client(&[&["submit"][..], &job].concat());
    let submitted = std::thread::spawn(move || { submit }.output().unwrap());

    // The pod exactly as the driver made it, checked field by field.
    let first = eventually(Duration::from_secs(30), || cluster.api.executor_pods(NS).into_iter().next());
    let pod = first.unwrap_or_else(|| panic!("a pod is asked for: {}", cluster.logs()));
    let name = pod["metadata"]["name"].as_str().unwrap();
    let id = pod["metadata"]["labels"]["flint.dev/executor-id"].as_str().unwrap();
    assert_eq!(name, format!("wc-exec-{id}"));
    assert_eq!(pod["metadata"]["namespace"], NS);
    assert_eq!(pod["metadata"]["labels"]["app.kubernetes.io/instance"], "wc");
    assert_eq!(pod["metadata"]["labels"]["flint.dev/role"], "executor");
    let owner = &pod["metadata"]["ownerReferences"][0];
    assert_eq!((owner["kind"].as_str(), owner["name"].as_str()), (Some("Pod"), Some("wc-driver-0")));
    assert_eq!(owner["uid"], cluster.driver_uid.as_str(), "Kubernetes deletes executors with the driver");
    let spec = &pod["spec"];
    assert_eq!(spec["restartPolicy"], "Never");
    assert_eq!(spec["automountServiceAccountToken"], false);
    let container = &spec["containers"][0];
    assert_eq!(container["image"], "flint:test");
    assert_eq!(container["args"], serde_json::json!(["executor"]));
    assert_eq!(container["resources"]["requests"]["cpu"], "1");
    assert_eq!(container["resources"]["limits"]["memory"], "282Mi", "256 MiB and a tenth for overhead");
    assert_eq!(
        env_of(container, "FLINT_EXECUTOR_POD_NAME")["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );
    assert_eq!(
        env_of(container, "FLINT_EXECUTOR_POD_IP")["valueFrom"]["fieldRef"]["fieldPath"],
        "status.podIP"
    );
    assert_eq!(env_of(container, "FLINT_DRIVER_URL")["value"], cluster.url.as_str());
    assert_eq!(env_of(container, "FLINT_SECRET_FILE")["value"], "/etc/flint/secret");
    let secret_volume =
        spec["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "flint-secret").unwrap();
    assert_eq!(secret_volume["secret"]["secretName"], "wc-secret");
    assert!(!pod.to_string().contains(SECRET), "the secret is never a literal in the pod");
    let file = cluster.dir.path().join("pod.json");
    let mut spec_only = pod.clone();
    spec_only.as_object_mut().unwrap().remove("status");
    std::fs::write(&file, spec_only.to_string()).unwrap();
    let check = std::process::Command::new(validator()).arg("--strict").arg(&file).output().unwrap();
    assert!(check.status.success(), "{}{}", lossy(&check.stdout), lossy(&check.stderr));

    // A pod running tasks is killed for memory: its tasks run elsewhere.
    let busy = eventually(Duration::from_secs(30), || {
        let status = cluster.status();
        let live = status["executors"].as_array().unwrap().iter().filter(|e| e["removed"].is_null()).count();
        let busy =
            status["executors"].as_array().unwrap().iter().find(|e| e["running"].as_u64() > Some(0))?;
        (live > 1).then(|| busy["pod"].as_str().unwrap().to_owned())
    });
    let victim =
        busy.unwrap_or_else(|| panic!("two executors, one busy: {}\n{}", cluster.status(), cluster.logs()));
    cluster.api.fail(NS, &victim, "OOMKilled", 137);

    let submitted = submitted.join().unwrap();
    assert!(submitted.status.success(), "{}\n{}", lossy(&submitted.stderr), cluster.logs());
    let local = flint(&[&["run"][..], &job].concat());
    assert_eq!(json(&submitted)["result"], json(&local)["result"], "the exact answer");

    let status = cluster.status();
    let executors = status["executors"].as_array().unwrap();
    assert!(executors.len() > 1, "the backlog brought up more than one pod: {status}");
    for e in executors {
        let id = e["id"].as_str().unwrap();
        assert_eq!(e["backend"], "kubernetes", "{status}");
        assert_eq!(e["pod"], format!("wc-exec-{id}").as_str(), "the id comes from the pod's name: {status}");
    }
    let killed = executors.iter().find(|e| e["pod"] == victim.as_str()).unwrap();
    let reason = killed["removed"].as_str().unwrap_or_default();
    assert!(reason.contains("OOMKilled") && reason.contains("137"), "{status}");
    let table = cluster.client(&["status"]).output().unwrap();
    assert!(lossy(&table.stdout).contains("OOMKilled"), "{}", lossy(&table.stdout));

    // Idle past the timeout, every pod is given back and its process has ended.
    let gone = eventually(Duration::from_secs(30), || {
        (cluster.api.executor_pods(NS).is_empty() && cluster.api.running() == 0).then_some(())
    });
    assert!(gone.is_some(), "pods left: {:?}\n{}", cluster.api.executor_pods(NS), cluster.logs());
    assert!(cluster.api.created() <= 5, "three at most at once, one replaced: {}", cluster.api.created());
}

#[test]
fn a_pod_that_cannot_start_is_not_recreated_forever() {
    let cluster = PodCluster::start(
        "flint:no-such-image",
        &[
            "flint.dynamicAllocation.enabled=true",
            "flint.dynamicAllocation.maxExecutors=2",
            "flint.dynamicAllocation.maxStartFailures=3",
            "flint.dynamicAllocation.startBackoff=100ms",
        ],
    );
    let out = cluster.client(&["submit", &wasm("noop"), "--partitions", "4", "--json"]).output().unwrap();
    assert!(!out.status.success(), "no executor can start");
    let said = format!("{}{}", lossy(&out.stdout), lossy(&out.stderr));
    assert!(
        said.contains("ErrImagePull") && said.contains("flint:no-such-image"),
        "{said}\n{}",
        cluster.logs()
    );
    let created = cluster.api.created();
    assert!((3..=4).contains(&created), "asked {created} times for a pod");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(cluster.api.created(), created, "no pod is asked for after the cap");
    assert!(cluster.status()["allocation_stopped"].as_str().unwrap_or_default().contains("ErrImagePull"));
    let cleaned =
        eventually(Duration::from_secs(10), || cluster.api.executor_pods(NS).is_empty().then_some(()));
    assert!(cleaned.is_some(), "failed pods are deleted: {:?}", cluster.api.executor_pods(NS));
}

#[test]
fn a_pod_event_the_watch_missed_is_mended_by_the_periodic_list() {
    let cluster = PodCluster::start(
        "flint:test",
        &["flint.executor.instances=1", "flint.kubernetes.executor.apiPollingInterval=1s"],
    );
    let running = eventually(Duration::from_secs(20), || {
        let status = cluster.status();
        let e = status["executors"].as_array().unwrap().first()?.clone();
        e["removed"].is_null().then_some(e)
    });
    let executor = running.unwrap_or_else(|| panic!("one executor: {}", cluster.logs()));
    let pod = executor["pod"].as_str().unwrap().to_owned();
    cluster.api.vanish(NS, &pod);
    let removed = eventually(Duration::from_secs(10), || {
        let status = cluster.status();
        let e = status["executors"].as_array().unwrap().iter().find(|e| e["pod"] == pod.as_str())?.clone();
        e["removed"].as_str().map(str::to_owned)
    });
    let reason = removed.unwrap_or_else(|| panic!("the lost pod is noticed: {}", cluster.logs()));
    assert!(reason.contains("vanished"), "{reason}");
    let replaced = eventually(Duration::from_secs(10), || (cluster.api.created() >= 2).then_some(()));
    assert!(replaced.is_some(), "flint.executor.instances=1 keeps one: {}", cluster.logs());
}

/// `kubectl delete pod NAME` without a grace period of its own: an HTTP DELETE to the
/// API server.
fn kubectl_delete(api: &KubeApi, name: &str) {
    use std::io::{Read, Write};
    let host = api.url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    let request = format!(
        "DELETE /api/v1/namespaces/{NS}/pods/{name} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
}

#[test]
fn a_pod_deleted_mid_shuffle_hands_its_map_outputs_over_within_its_grace_period() {
    let cluster = PodCluster::start("flint:test", &["flint.executor.instances=2"]);
    let live = |status: &Value| -> Vec<Value> {
        status["executors"].as_array().unwrap().iter().filter(|e| e["removed"].is_null()).cloned().collect()
    };
    let two = eventually(Duration::from_secs(30), || (live(&cluster.status()).len() == 2).then_some(()));
    assert!(two.is_some(), "two executor pods: {}", cluster.logs());
    // Six maps, then eight reducers in four waves of two seconds on the two one-slot
    // executors: those after the pod is gone read what it handed over. The waves leave
    // six seconds after the maps for the delete to land while reducers still wait,
    // however slowly `flint status` answers on a loaded machine.
    let job = [
        "submit",
        "examples/draws",
        "--partitions",
        "6",
        "--reduce-partitions",
        "8",
        "--conf",
        "reduce_pause_ms=2000",
        "--json",
    ];
    let submitted = cluster.client(&job).stdout(std::process::Stdio::piped()).spawn().unwrap();
    let maps_done = eventually(Duration::from_secs(30), || {
        let status = cluster.status();
        let done = status["jobs"].as_array().unwrap().iter().find_map(|j| j["progress"]["done"].as_u64());
        done.is_some_and(|d| d >= 6).then_some((status, done))
    });
    let (status, done) = maps_done.unwrap_or_else(|| panic!("the maps end: {}", cluster.logs()));
    assert!(done < Some(12), "the pod is deleted before the last wave of reducers: {status}");
    let victim = live(&status).into_iter().find(|e| e["tasks_done"].as_u64() > Some(0)).unwrap();
    let (pod, held) = (victim["pod"].as_str().unwrap().to_owned(), victim["tasks_done"].as_u64().unwrap());
    kubectl_delete(&cluster.api, &pod);
    let out = submitted.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", cluster.logs());
    let report = json(&out);
    assert_eq!(report["result"]["count"], 60_000, "every record once: {report}");
    assert_eq!(report["maps_rerun"], 0, "{report}");
    assert_eq!(report["outputs_handed_over"], held, "every map output it held: {report}");
    let status = cluster.status();
    let gone = status["executors"].as_array().unwrap().iter().find(|e| e["pod"] == pod.as_str()).unwrap();
    assert_eq!(gone["removed"], "decommissioned", "{status}");
}
