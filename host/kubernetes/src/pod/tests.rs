use super::*;

fn config(template: Option<Value>) -> PodConfig {
    PodConfig {
        app_id: "wc".into(),
        namespace: "jobs".into(),
        image: "flint:1".into(),
        image_pull_policy: "IfNotPresent".into(),
        driver_url: "flint://d:7077?fingerprint=ab".into(),
        secret_name: "wc-secret".into(),
        cores: 2,
        memory: 512 << 20,
        memory_overhead_factor: 0.1,
        decommission_timeout: std::time::Duration::from_secs(20),
        template,
        owner: None,
    }
}

fn env<'a>(pod: &'a Value, name: &str) -> &'a Value {
    pod["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no env {name}"))
}

#[test]
fn a_template_keeps_its_own_fields_and_flints_win() {
    let template = json!({
        "metadata": { "name": "ignored", "labels": { "team": "data", "flint.dev/role": "wrong" } },
        "spec": {
            "nodeSelector": { "disk": "ssd" },
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 5,
            "containers": [
                { "name": "sidecar", "image": "proxy:1" },
                { "name": "executor", "image": "other:2", "command": ["/bin/sh"],
                  "env": [{ "name": "FLINT_APP_ID", "value": "spoofed" }, { "name": "TZ", "value": "UTC" }],
                  "resources": { "limits": { "nvidia.com/gpu": "1" } } },
            ],
        },
    });
    let pod = config(Some(template)).executor_pod("7");
    assert_eq!(pod["metadata"]["name"], "wc-exec-7");
    assert_eq!(pod["metadata"]["labels"]["team"], "data");
    assert_eq!(pod["metadata"]["labels"]["flint.dev/role"], "executor");
    assert_eq!(pod["metadata"]["labels"]["flint.dev/executor-id"], "7");
    assert_eq!(pod["spec"]["nodeSelector"]["disk"], "ssd");
    assert_eq!(pod["spec"]["restartPolicy"], "Never");
    assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 35, "time to hand map outputs over");
    let containers = pod["spec"]["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 2);
    assert_eq!(containers[0]["image"], "proxy:1", "the sidecar is left alone");
    let executor = &containers[1];
    assert_eq!(executor["image"], "flint:1");
    assert!(executor.get("command").is_none(), "the image's entrypoint runs");
    assert_eq!(executor["resources"]["limits"]["nvidia.com/gpu"], "1");
    assert_eq!(executor["resources"]["limits"]["memory"], "564Mi");
    let ids: Vec<&Value> =
        executor["env"].as_array().unwrap().iter().filter(|e| e["name"] == "FLINT_APP_ID").collect();
    assert_eq!(ids, [&json!({ "name": "FLINT_APP_ID", "value": "wc" })]);
    assert!(executor["env"].as_array().unwrap().iter().any(|e| e["name"] == "TZ"));
}

#[test]
fn a_pod_without_template_has_what_an_executor_needs_and_no_secret() {
    let pod = config(None).executor_pod("dyn-3");
    assert_eq!(env(&pod, "FLINT_EXECUTOR_POD_NAME")["valueFrom"]["fieldRef"]["fieldPath"], "metadata.name");
    assert_eq!(env(&pod, "FLINT_EXECUTOR_POD_IP")["valueFrom"]["fieldRef"]["fieldPath"], "status.podIP");
    assert_eq!(env(&pod, "FLINT_SECRET_FILE")["value"], "/etc/flint/secret");
    assert_eq!(pod["spec"]["volumes"][0]["secret"]["secretName"], "wc-secret");
    assert_eq!(pod["spec"]["containers"][0]["resources"]["requests"]["cpu"], "2");
    // It reads as a pod.
    let _: Pod = serde_json::from_value(pod).unwrap();
}

fn pod(status: Value) -> Pod {
    serde_json::from_value(json!({ "metadata": { "name": "p" }, "status": status })).unwrap()
}

#[test]
fn verdicts_carry_the_reason_kubernetes_gives() {
    let oom = pod(
        json!({ "phase": "Failed", "containerStatuses": [{ "name": "executor", "image": "i", "imageID": "",
        "ready": false, "restartCount": 0,
        "state": { "terminated": { "exitCode": 137, "reason": "OOMKilled" } } }] }),
    );
    assert_eq!(verdict(&oom), Verdict::Ended("pod terminated: OOMKilled (exit code 137)".into()));
    let pull = pod(
        json!({ "phase": "Pending", "containerStatuses": [{ "name": "executor", "image": "i", "imageID": "",
        "ready": false, "restartCount": 0,
        "state": { "waiting": { "reason": "ErrImagePull", "message": "no such image" } } }] }),
    );
    assert_eq!(verdict(&pull), Verdict::Ended("pod cannot start: ErrImagePull: no such image".into()));
    let evicted = pod(json!({ "phase": "Failed", "reason": "Evicted", "message": "low on memory" }));
    assert_eq!(verdict(&evicted), Verdict::Ended("pod failed: Evicted: low on memory".into()));
    let waiting =
        pod(json!({ "phase": "Pending", "conditions": [{ "type": "PodScheduled", "status": "False",
        "reason": "Unschedulable", "message": "0/3 nodes: insufficient cpu" }] }));
    assert_eq!(
        verdict(&waiting),
        Verdict::Waiting(Some("Unschedulable: 0/3 nodes: insufficient cpu".into()))
    );
    let running = pod(
        json!({ "phase": "Running", "containerStatuses": [{ "name": "executor", "image": "i", "imageID": "",
        "ready": true, "restartCount": 0, "state": { "running": {} } }] }),
    );
    assert_eq!(verdict(&running), Verdict::Running);
    let long = pod(json!({ "phase": "Failed", "reason": "Evicted", "message": "x".repeat(100_000) }));
    let Verdict::Ended(reason) = verdict(&long) else { panic!() };
    assert!(reason.len() < 400, "a hostile message is clipped");
}

#[test]
fn a_template_cannot_turn_the_hardening_off() {
    let template = json!({
        "spec": {
            "automountServiceAccountToken": true,
            "securityContext": { "runAsUser": 0, "runAsNonRoot": false, "supplementalGroups": [4000] },
            "containers": [{ "name": "executor", "securityContext": {
                "privileged": true, "runAsUser": 0, "allowPrivilegeEscalation": true,
                "readOnlyRootFilesystem": false, "capabilities": { "add": ["SYS_ADMIN"] } } }],
        },
    });
    let pod = config(Some(template)).executor_pod("1");
    let spec = &pod["spec"];
    assert_eq!(spec["automountServiceAccountToken"], false);
    let pod_security = &spec["securityContext"];
    assert_eq!(pod_security["runAsUser"], 65532);
    assert_eq!(pod_security["runAsNonRoot"], true);
    assert_eq!(pod_security["fsGroup"], 65532, "so that the kubelet lets the executor read its secret");
    assert_eq!(pod_security["supplementalGroups"], json!([4000]), "what Flint does not set stays");
    let container = &spec["containers"][0]["securityContext"];
    assert_eq!(container["privileged"], false);
    assert_eq!(container["runAsUser"], 65532);
    assert_eq!(container["allowPrivilegeEscalation"], false);
    assert_eq!(container["readOnlyRootFilesystem"], true);
    assert_eq!(container["capabilities"], json!({ "drop": ["ALL"] }));
}
