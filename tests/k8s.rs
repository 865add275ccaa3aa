//! `flint k8s manifests`: the rendered objects pass `kubernetes-validate --strict`, say
//! what they must field by field, and work: a driver started with the driver
//! Deployment's arguments and the Secret's files, and an executor with the executor
//! Deployment's environment (only the host name swapped for loopback: there is no
//! cluster DNS here), register, pin the rendered certificate and run a job.

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
        "--executors",
        "3",
        "--executor-cores",
        "2",
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
    let driver = find(&docs, "Deployment", "wc-driver");
    let executors = find(&docs, "Deployment", "wc-exec");
    assert_eq!(executors["spec"]["replicas"], 3);
    let exec_pod = &executors["spec"]["template"]["spec"];
    let exec = &exec_pod["containers"][0];
    assert_eq!(exec["resources"]["requests"]["cpu"], "2");
    assert_eq!(exec["resources"]["limits"]["memory"], "2253Mi", "2048 MiB and a tenth more for overhead");
    assert_eq!(
        env_of(exec, "FLINT_EXECUTOR_POD_NAME")["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );
    assert_eq!(env_of(exec, "FLINT_EXECUTOR_POD_IP")["valueFrom"]["fieldRef"]["fieldPath"], "status.podIP");
    assert_eq!(
        exec_pod["volumes"][0]["secret"]["items"],
        serde_json::json!([{ "key": "secret", "path": "secret" }]),
        "executors get the application secret, not the driver's key"
    );
    for pod in [exec_pod, &driver["spec"]["template"]["spec"]] {
        let security = &pod["containers"][0]["securityContext"];
        assert_eq!(security["runAsNonRoot"], true);
        assert_eq!(security["readOnlyRootFilesystem"], true);
        assert_eq!(pod["automountServiceAccountToken"], false);
    }

    // The files the Secret mounts, and the driver as its Deployment starts it (on
    // loopback, port 0).
    let etc = dir.path().join("etc");
    std::fs::create_dir(&etc).unwrap();
    for key in ["secret", "tls.crt", "tls.key"] {
        std::fs::write(etc.join(key), secret["stringData"][key].as_str().unwrap()).unwrap();
    }
    let mut driver_args: Vec<String> = driver["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().replace("/etc/flint", etc.to_str().unwrap()))
        .collect();
    let listen = driver_args.iter().position(|a| a == "--listen").unwrap();
    driver_args[listen + 1] = "127.0.0.1:0".into();
    let url_file = dir.path().join("url");
    driver_args.extend(["--url-file".into(), url_file.to_string_lossy().into_owned()]);
    assert!(driver_args.contains(&"flint.task.maxFailures=6".to_owned()), "{driver_args:?}");
    let refs: Vec<&str> = driver_args.iter().map(String::as_str).collect();
    let driver = Proc::spawn(command(&refs), dir.path().join("driver.log"));
    let live = eventually(Duration::from_secs(20), || read_url(&url_file)).expect("the driver starts");
    let port = live.rsplit_once(':').unwrap().1.split('?').next().unwrap().to_owned();

    // An executor with the Deployment's environment; the rendered URL's fingerprint is
    // the certificate the driver serves.
    let rendered = env_of(exec, "FLINT_DRIVER_URL")["value"].as_str().unwrap().to_owned();
    assert!(rendered.starts_with("flint://wc-driver.jobs.svc:7077?fingerprint="), "{rendered}");
    let url = rendered.replace("wc-driver.jobs.svc:7077", &format!("127.0.0.1:{port}"));
    let mut executor_cmd = command(&["executor"]);
    for e in exec["env"].as_array().unwrap() {
        if let Some(value) = e["value"].as_str() {
            executor_cmd.env(e["name"].as_str().unwrap(), value.replace("/etc/flint", etc.to_str().unwrap()));
        }
    }
    executor_cmd
        .env("FLINT_DRIVER_URL", &url)
        .env("FLINT_EXECUTOR_POD_NAME", "wc-exec-7d9f8-x2x4q")
        .env("FLINT_EXECUTOR_POD_IP", "127.0.0.1")
        .env("FLINT_WORK_DIR", dir.path().join("work"))
        .env_remove("FLINT_SECRET");
    let executor = Proc::spawn(executor_cmd, dir.path().join("executor.log"));
    let registered =
        eventually(Duration::from_secs(20), || executor.log_text().contains("registered").then_some(()));
    assert!(registered.is_some(), "{}\n{}", executor.log_text(), driver.log_text());
    let secret_file = etc.join("secret");
    let mut submit = command(&["submit", "--driver-url", &url, &wasm("noop"), "--partitions", "8", "--json"]);
    let out = submit.env_remove("FLINT_SECRET").env("FLINT_SECRET_FILE", &secret_file).output().unwrap();
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    assert_eq!(json(&out)["result"], 8);
    let mut status = command(&["status", "--driver-url", &url, "--json"]);
    let status =
        json(&status.env_remove("FLINT_SECRET").env("FLINT_SECRET_FILE", &secret_file).output().unwrap());
    assert_eq!(status["executors"][0]["id"], "wc-exec-7d9f8-x2x4q", "the executor's id is its pod's name");
}
