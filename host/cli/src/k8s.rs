//! `flint k8s manifests`: what a Kubernetes cluster needs to run a Flint application —
//! the application secret and the driver's certificate in a Secret, the driver's
//! service account with a role limited to the pod verbs its `kubernetes` backend uses,
//! the executor pod template in a ConfigMap, a headless Service and the driver
//! Deployment — as multi-document YAML (each document a JSON object, which YAML reads
//! as it is), ready for `kubectl apply -f -`. The driver then asks for executor pods
//! itself, as many as `--executors` or, with dynamic allocation, as the load asks.
//!
//! The driver's certificate is made here, so its URL (printed on stderr) can pin the
//! fingerprint before the driver ever starts. The secret reaches pods only as a mounted
//! file, never as a literal in a pod spec, argv or URL. Containers run as the image's
//! non-root user, with a read-only root filesystem and no capabilities.

use crate::common::{fail, parse_confs};
use crate::exit;
use clap::Args;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

#[derive(Args)]
pub struct K8sArgs {
    #[command(subcommand)]
    command: K8sCommand,
}

#[derive(clap::Subcommand)]
enum K8sCommand {
    /// Print the manifests of an application (apply them with kubectl apply -f -).
    Manifests(ManifestArgs),
}

#[derive(Args)]
struct ManifestArgs {
    /// The application id; objects are named after it.
    #[arg(long)]
    app_id: String,
    /// The namespace the objects go in (it must exist).
    #[arg(long, default_value = "default")]
    namespace: String,
    /// The image (`make image` builds flint:latest).
    #[arg(long, default_value = "flint:latest")]
    image: String,
    /// Executors the driver keeps (flint.executor.instances; with
    /// flint.dynamicAllocation.enabled=true the load decides instead).
    #[arg(long, default_value_t = 2)]
    executors: u32,
    /// Cores per executor (its pod's CPU request and limit).
    #[arg(long, default_value_t = 2)]
    executor_cores: u32,
    /// Memory per executor, in MiB; the pod asks for this plus the overhead.
    #[arg(long, default_value_t = 1024)]
    executor_memory_mib: u64,
    /// The share of executor memory its pod asks for beyond it
    /// (flint.kubernetes.memoryOverheadFactor).
    #[arg(long, default_value_t = 0.1)]
    memory_overhead_factor: f64,
    /// Driver configuration KEY=VALUE (repeatable).
    #[arg(long = "conf", value_name = "KEY=VALUE")]
    conf: Vec<String>,
}

/// The driver's QUIC port inside the cluster.
const PORT: u16 = 7077;

/// Where the driver finds the executor pod template (from its ConfigMap).
const TEMPLATE_DIR: &str = "/etc/flint-template";
const TEMPLATE_FILE: &str = "executor-pod.yaml";

pub fn k8s(args: K8sArgs) -> u8 {
    match args.command {
        K8sCommand::Manifests(args) => match manifests(&args) {
            Ok(docs) => {
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                for doc in docs {
                    let text = serde_json::to_string_pretty(&doc).expect("JSON values encode");
                    // A reader that stops early (`| head`) ends the output, not the process.
                    if writeln!(out, "---\n{text}").is_err() {
                        return 0;
                    }
                }
                let _ = out.flush();
                0
            }
            Err((code, e)) => fail(code, e),
        },
    }
}

fn manifests(args: &ManifestArgs) -> Result<Vec<Value>, (u8, String)> {
    let name_ok = |n: &str| {
        !n.is_empty()
            && n.len() <= 50
            && n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !n.starts_with('-')
            && !n.ends_with('-')
    };
    if !name_ok(&args.app_id) {
        return Err((
            exit::USAGE,
            format!("--app-id {:?}: lowercase letters, digits and '-', at most 50", args.app_id),
        ));
    }
    let conf = parse_confs(&args.conf).map_err(|e| (exit::INVALID_JOB, e.to_string()))?;
    let (app, ns) = (args.app_id.as_str(), args.namespace.as_str());
    let driver_host = format!("{app}-driver.{ns}.svc");
    let certified = rcgen::generate_simple_self_signed(vec![driver_host.clone(), format!("{app}-driver")])
        .map_err(|e| (exit::INTERNAL, format!("cannot make a certificate: {e}")))?;
    let fingerprint = hex::encode(Sha256::digest(certified.cert.der()));
    let secret = flint_net::Secret::generate();
    // Clients in the cluster reach the driver here; the fingerprint pins the certificate
    // made above.
    eprintln!("flint: driver URL flint://{driver_host}:{PORT}?fingerprint={fingerprint}");
    let labels = |role: &str| json!({ "app.kubernetes.io/name": "flint", "app.kubernetes.io/instance": app, "flint.dev/role": role });
    let security = json!({
        "runAsNonRoot": true,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "capabilities": { "drop": ["ALL"] },
        "seccompProfile": { "type": "RuntimeDefault" },
    });
    // A kubelet writes a Secret's files owned by root: `fsGroup` gives them to the
    // process's group (mode 0440), which is how uid 65532 reads them.
    let pod_security = json!({ "fsGroup": 65532 });
    let secret_volume = |items: Value| json!({ "name": "flint-secret", "secret": { "secretName": format!("{app}-secret"), "defaultMode": 0o400, "items": items } });
    let work = json!({ "name": "work", "emptyDir": {} });
    let mut driver_args = vec![
        "driver".to_owned(),
        "--listen".into(),
        format!("0.0.0.0:{PORT}"),
        "--advertise-host".into(),
        driver_host.clone(),
        "--app-id".into(),
        app.to_owned(),
        "--secret-file".into(),
        "/etc/flint/secret".into(),
        "--cert-file".into(),
        "/etc/flint/tls.crt".into(),
        "--key-file".into(),
        "/etc/flint/tls.key".into(),
        "--backend".into(),
        "kubernetes".into(),
    ];
    // What the kubernetes backend needs to make executor pods; the user's --conf wins.
    let mut settings = flint_proto::Conf::from([
        ("flint.kubernetes.namespace".to_owned(), ns.to_owned()),
        ("flint.kubernetes.container.image".to_owned(), args.image.clone()),
        ("flint.kubernetes.executor.podTemplateFile".to_owned(), format!("{TEMPLATE_DIR}/{TEMPLATE_FILE}")),
        ("flint.kubernetes.memoryOverheadFactor".to_owned(), args.memory_overhead_factor.to_string()),
        ("flint.executor.instances".to_owned(), args.executors.to_string()),
        ("flint.executor.cores".to_owned(), args.executor_cores.to_string()),
        ("flint.executor.memory".to_owned(), format!("{}m", args.executor_memory_mib)),
    ]);
    settings.extend(conf);
    flint_proto::Settings::from_conf(&settings).map_err(|e| (exit::INVALID_JOB, e.to_string()))?;
    for (k, v) in &settings {
        driver_args.extend(["--conf".to_owned(), format!("{k}={v}")]);
    }
    let field = |path: &str| json!({ "valueFrom": { "fieldRef": { "fieldPath": path } } });
    let env = |name: &str, mut value: Value| {
        value["name"] = json!(name);
        value
    };
    let pod_template = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        // Each pod's name is the backend's: `<app>-exec-<id>`.
        "metadata": { "name": format!("{app}-exec"), "labels": labels("executor") },
        "spec": {
            // Executors leave on SIGTERM once their running tasks end.
            "terminationGracePeriodSeconds": 600,
            "automountServiceAccountToken": false,
            "securityContext": pod_security,
            "containers": [{ "name": "executor", "image": args.image, "securityContext": security }],
        },
    });
    let template_text = serde_json::to_string_pretty(&pod_template).expect("JSON values encode");
    Ok(vec![
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": { "name": format!("{app}-secret"), "namespace": ns, "labels": labels("secret") },
            "type": "Opaque",
            "stringData": {
                "secret": String::from_utf8_lossy(secret.expose()),
                "tls.crt": certified.cert.pem(),
                "tls.key": certified.signing_key.serialize_pem(),
            },
        }),
        json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": { "name": format!("{app}-driver"), "namespace": ns, "labels": labels("driver") },
        }),
        // Exactly what the kubernetes backend does with pods, in this namespace only.
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": { "name": format!("{app}-driver"), "namespace": ns, "labels": labels("driver") },
            "rules": [{
                "apiGroups": [""],
                "resources": ["pods"],
                "verbs": ["create", "get", "list", "watch", "delete", "deletecollection"],
            }],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": { "name": format!("{app}-driver"), "namespace": ns, "labels": labels("driver") },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("{app}-driver") },
            "subjects": [{ "kind": "ServiceAccount", "name": format!("{app}-driver"), "namespace": ns }],
        }),
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": format!("{app}-executor-template"), "namespace": ns, "labels": labels("executor") },
            "data": { TEMPLATE_FILE: template_text },
        }),
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": { "name": format!("{app}-driver"), "namespace": ns, "labels": labels("driver") },
            "spec": {
                "clusterIP": "None",
                "selector": labels("driver"),
                "ports": [{ "name": "quic", "port": PORT, "targetPort": PORT, "protocol": "UDP" }],
            },
        }),
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": { "name": format!("{app}-driver"), "namespace": ns, "labels": labels("driver") },
            "spec": {
                "replicas": 1,
                "strategy": { "type": "Recreate" },
                "selector": { "matchLabels": labels("driver") },
                "template": {
                    "metadata": { "labels": labels("driver") },
                    "spec": {
                        "serviceAccountName": format!("{app}-driver"),
                        // The driver talks to the API server as its service account.
                        "automountServiceAccountToken": true,
                        "securityContext": pod_security,
                        "containers": [{
                            "name": "driver",
                            "image": args.image,
                            "args": driver_args,
                            "env": [
                                env("FLINT_CACHE_DIR", json!({ "value": "/home/flint/work/cache" })),
                                // Owner of the executor pods: they go when it goes.
                                env("FLINT_DRIVER_POD_NAME", field("metadata.name")),
                            ],
                            "ports": [{ "name": "quic", "containerPort": PORT, "protocol": "UDP" }],
                            "resources": {
                                // flint.driver.memory (2g) for merges, and room for the rest.
                                "requests": { "cpu": "1", "memory": "2560Mi" },
                                "limits": { "cpu": "2", "memory": "2560Mi" },
                            },
                            "securityContext": security,
                            "volumeMounts": [
                                { "name": "flint-secret", "mountPath": "/etc/flint", "readOnly": true },
                                { "name": "executor-template", "mountPath": TEMPLATE_DIR, "readOnly": true },
                                { "name": "work", "mountPath": "/home/flint/work" },
                            ],
                        }],
                        "volumes": [
                            secret_volume(json!([
                                { "key": "secret", "path": "secret" },
                                { "key": "tls.crt", "path": "tls.crt" },
                                { "key": "tls.key", "path": "tls.key" },
                            ])),
                            { "name": "executor-template", "configMap": { "name": format!("{app}-executor-template") } },
                            work,
                        ],
                    },
                },
            },
        }),
    ])
}
