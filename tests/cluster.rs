//! A cluster of real processes on 127.0.0.1: `flint driver`, `flint executor`s, and
//! `flint submit`/`flint status` as a user would run them.

mod common;

use common::cluster::{APP, Cluster, SECRET, ok_json, shuffle_endpoint};
use common::{
    Proc, alive, catches_ctrl_c, children_of, command, corpus, corpus_of, eventually, flint, free_port,
    http_get, http_get_with, json, lossy, read_url, wasm,
};
use serde_json::{Value, json};
use std::process::{Output, Stdio};
use std::time::Duration;

#[test]
fn submit_gives_exactly_the_answers_run_gives() {
    let mut cluster = Cluster::start(&[]);
    cluster.executor(&["--cores", "2"]);
    cluster.executor(&["--cores", "2"]);
    cluster.wait_live(2);

    // A key given with a slip of the finger is named, the same way by both.
    let pi =
        ["examples/pi", "--conf", "points=3000000", "--conf", "pointz=9", "--partitions", "16", "--json"];
    let submitted = ok_json(&cluster.submit(&pi));
    let local = ok_json(&flint(&[&["run"][..], &pi].concat()));
    assert_eq!(submitted["result"], local["result"]);
    assert_eq!(submitted["tasks"], 16);
    let warned = serde_json::json!([
        "the job never read the key pointz it was given: did you mean points, which it reads?"
    ]);
    assert_eq!((&submitted["warnings"], &local["warnings"]), (&warned, &warned), "{submitted}");

    let input = cluster.dir.path().join("inputs/corpus.txt");
    corpus(&input, 2 << 20);
    let input = input.to_str().unwrap();
    let wc = ["examples/word-count", "--input", input, "--partitions", "6", "--json"];
    let submitted = ok_json(&cluster.submit(&wc));
    let local = ok_json(&flint(&[&["run"][..], &wc].concat()));
    assert_eq!(submitted["result"], local["result"]);
    assert!(submitted["result"]["total_words"].as_u64().unwrap() > 100_000);

    // Combined values too large for a frame cross as blocks the driver fetches, each
    // task counted once (tally's answer is 1 + … + 16), none run twice.
    let tally = ["examples/tally", "--partitions", "16", "--conf", "pad=300000", "--json"];
    let submitted = ok_json(&cluster.submit(&tally));
    assert_eq!(submitted["result"], serde_json::json!({"sum": 136, "tasks": 16}), "{submitted}");
    assert_eq!(submitted["attempts"], 16, "{submitted}");
    // pad is read where the values are combined: no warning.
    assert_eq!(submitted["warnings"], serde_json::json!([]), "{submitted}");

    // Both executors took part.
    let status = cluster.status();
    for e in status["executors"].as_array().unwrap() {
        assert!(e["tasks_done"].as_u64().unwrap() > 0, "{status}");
        assert_eq!(
            (&e["backend"], &e["state"]),
            (&Value::from("static"), &Value::from("registered")),
            "{status}"
        );
    }
    assert_eq!(status["jobs"].as_array().unwrap().len(), 3);
}

/// Long enough tasks to catch executors busy: 24 tasks of 40 M points.
const SLOW_PI: [&str; 6] = ["examples/pi", "--conf", "points=40000000", "--partitions", "24", "--json"];

fn start_slow_job(cluster: &Cluster) -> std::process::Child {
    let mut cmd = command(&[&["submit"][..], &SLOW_PI].concat());
    cmd.args(["--driver-url", &cluster.url]).env("FLINT_SECRET", SECRET);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

fn expected_slow_pi() -> Value {
    ok_json(&flint(&[&["run"][..], &SLOW_PI].concat()))["result"].clone()
}

#[test]
fn killing_an_executor_mid_job_loses_nothing() {
    let mut cluster = Cluster::start(&[]);
    let a = cluster.executor(&["--cores", "2", "--executor-id", "victim"]);
    cluster.executor(&["--cores", "2", "--executor-id", "survivor"]);
    cluster.wait_live(2);
    let job = start_slow_job(&cluster);
    let victim_busy = eventually(Duration::from_secs(20), || {
        let e = cluster.executor_status("victim");
        (e["running"].as_u64().unwrap_or(0) > 0).then_some(())
    });
    assert!(victim_busy.is_some(), "the victim got tasks");
    cluster.executors[a].signal("KILL");

    let out = job.wait_with_output().unwrap();
    let report = ok_json(&out);
    assert_eq!(report["result"], expected_slow_pi(), "the exact answer despite the loss");
    let victim = cluster.executor_status("victim");
    let reason = victim["removed"].as_str().unwrap_or_default().to_owned();
    assert!(!reason.is_empty() && reason != "decommissioned", "removed with a reason: {victim}");
    assert!(cluster.executor_status("survivor")["removed"].is_null());

    // A restarted executor takes its old id back.
    cluster.executor(&["--cores", "2", "--executor-id", "victim"]);
    cluster.wait_live(2);
}

#[test]
fn sigterm_decommissions_a_busy_executor() {
    let mut cluster = Cluster::start(&[]);
    cluster.executor(&["--cores", "2", "--executor-id", "leaver"]);
    cluster.executor(&["--cores", "2", "--executor-id", "stayer"]);
    cluster.wait_live(2);
    let job = start_slow_job(&cluster);
    let (running, done) = eventually(Duration::from_secs(20), || {
        let e = cluster.executor_status("leaver");
        let running = e["running"].as_u64().unwrap_or(0);
        (running > 0).then(|| (running, e["tasks_done"].as_u64().unwrap()))
    })
    .expect("the leaver got tasks");
    cluster.executors[0].signal("TERM");
    assert_eq!(
        cluster.executors[0].wait(Duration::from_secs(60)),
        Some(0),
        "{}",
        cluster.executors[0].log_text()
    );

    let report = ok_json(&job.wait_with_output().unwrap());
    assert_eq!(report["result"], expected_slow_pi());
    assert_eq!(report["task_failures"], serde_json::json!([]), "no task was lost or retried");
    // pi combines where it runs: the leaver handed its combined value over before it
    // left, so none of the tasks it ran had to run again.
    assert_eq!(report["attempts"], 24, "{report}");
    let leaver = cluster.executor_status("leaver");
    assert_eq!(leaver["removed"], "decommissioned", "{leaver}\n{}", cluster.driver.log_text());
    assert!(leaver["tasks_done"].as_u64().unwrap() >= done + running, "its running tasks reported: {leaver}");
}

#[test]
fn a_failed_job_kills_its_running_tasks() {
    let mut cluster = Cluster::start(&[]);
    cluster.executor(&["--cores", "2", "--executor-id", "worker"]);
    cluster.wait_live(1);
    // Task 0 fails for good at once; task 1 would spin, then sleep in WASI, until its
    // ten-minute deadline.
    let args = ["examples/chaos", "--partitions", "2", "--conf", "mode=fatal", "--conf", "only_task=0"];
    for (round, other) in ["other_mode=loop", "other_mode=sleep"].into_iter().enumerate() {
        let out = cluster.submit(&[&args[..], &["--conf", other, "--json"]].concat());
        let failed_at = std::time::Instant::now();
        assert_eq!(out.status.code(), Some(1), "{}", lossy(&out.stderr));
        let report = json(&out);
        assert_eq!(report["failure"]["reason"]["kind"], "guest-error", "{report}");
        let failed = 2 * (round as u64 + 1);
        let stopped = eventually(Duration::from_secs(10), || {
            (cluster.executor_status("worker")["tasks_failed"] == failed).then(|| failed_at.elapsed())
        });
        let stopped =
            stopped.unwrap_or_else(|| panic!("{other}: not killed: {}", cluster.executor_status("worker")));
        assert!(stopped < Duration::from_secs(1), "{other}: killed {stopped:?} after the job failed");
    }
    assert!(cluster.executors[0].log_text().contains("killed"), "{}", cluster.executors[0].log_text());
    // The executor runs the next job.
    assert_eq!(ok_json(&cluster.submit(&["examples/noop", "--partitions", "2", "--json"]))["result"], 2);
}

#[test]
fn an_executor_started_before_its_driver_joins_once_it_is_up() {
    let dir = tempfile::tempdir().unwrap();
    let identity = flint_net::Identity::generate(vec!["localhost".into()]).unwrap();
    let (cert, key) = (dir.path().join("cert.der"), dir.path().join("key.der"));
    std::fs::write(&cert, &identity.cert).unwrap();
    std::fs::write(&key, identity.key_der()).unwrap();
    let port = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = flint_net::DriverUrl { host: "127.0.0.1".into(), port, fingerprint: identity.fingerprint() }
        .to_string();

    let mut early = command(&["executor", "--driver-url", &url, "--app-id", APP, "--cores", "1"]);
    early.env("FLINT_SECRET", SECRET);
    let mut executor = Proc::spawn(early, dir.path().join("executor.log"));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(executor.child.try_wait().unwrap(), None, "still waiting for its driver");

    let listen = format!("127.0.0.1:{port}");
    let url_file = dir.path().join("url");
    let mut cmd = command(&["driver", "--app-id", APP, "--listen", &listen]);
    cmd.args(["--cert-file", cert.to_str().unwrap(), "--key-file", key.to_str().unwrap()])
        .args(["--url-file", url_file.to_str().unwrap()])
        .env("FLINT_SECRET", SECRET);
    let driver = Proc::spawn(cmd, dir.path().join("driver.log"));
    // Asked before it listens, the driver's port is closed and a client gives up at once.
    let listening = eventually(Duration::from_secs(20), || read_url(&url_file));
    assert!(listening.is_some(), "the driver listens; its log:\n{}", driver.log_text());
    let cluster = Cluster { dir, url, driver, executors: vec![], peer_env: vec![] };
    cluster.wait_live(1);
    let report = ok_json(&cluster.submit(&["examples/noop", "--partitions", "3", "--json"]));
    assert_eq!(report["result"], 3);
    assert_eq!(executor.child.try_wait().unwrap(), None, "the executor serves on");
}

#[test]
fn rejected_executors_get_no_config_and_exit_with_their_reason() {
    let mut cluster = Cluster::start(&[]);
    cluster.executor(&["--cores", "1", "--executor-id", "taken"]);
    cluster.wait_live(1);

    let cases: [(&[&str], Option<&str>, i32, &str); 3] = [
        (&["--executor-id", "taken"], None, 10, "already registered"),
        (&[], Some("not-the-secret"), 11, "not authenticated"),
        (&["--app-id", "another-app"], None, 12, "wrong application id"),
    ];
    for (args, secret, code, reason) in cases {
        let mut cmd = cluster.executor_command(args);
        cmd.args(["--cores", "1"]);
        if let Some(secret) = secret {
            cmd.env("FLINT_SECRET", secret);
        }
        let out = cmd.output().unwrap();
        let stderr = lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.contains(reason), "{args:?}: {stderr}");
        assert!(!stderr.contains("app config received"), "a rejected executor got the config: {stderr}");
        assert!(!stderr.contains(SECRET), "the secret never appears in a log");
    }
    assert_eq!(cluster.status()["executors"].as_array().unwrap().len(), 1);
    assert!(!cluster.driver.log_text().contains(SECRET), "the secret never appears in the driver's log");

    // Clients refused the same way exit with the same codes, not as if the driver were
    // not there; a file to send that is not one (nor a folder or glob naming any) is a
    // job that cannot start.
    for args in [&["status"][..], &["submit", "examples/noop"], &["cancel", "1"]] {
        let out =
            command(args).args(["--driver-url", &cluster.url]).env("FLINT_SECRET", "not-the-secret").output();
        let out = out.unwrap();
        assert_eq!(out.status.code(), Some(11), "{args:?}: {}", lossy(&out.stderr));
        assert!(lossy(&out.stderr).contains("not authenticated"), "{args:?}: {}", lossy(&out.stderr));
    }
    let empty = cluster.dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let empty = empty.to_str().unwrap().to_owned();
    let glob = format!("{}/*.none", cluster.dir.path().display());
    for input in ["/no/such/file.txt", empty.as_str(), glob.as_str()] {
        let out = cluster.submit(&["examples/word-count", "--input", input]);
        assert_eq!(out.status.code(), Some(3), "{input}: {}", lossy(&out.stderr));
    }
}

#[test]
fn a_client_pointed_where_nothing_listens_fails_at_once() {
    // A port just bound and let go: closed.
    let port = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("flint://127.0.0.1:{port}?fingerprint={}", "0".repeat(64));
    for args in [&["status"][..], &["cancel", "1"]] {
        let started = std::time::Instant::now();
        let out = command(args).args(["--driver-url", &url]).env("FLINT_SECRET", SECRET).output().unwrap();
        assert!(started.elapsed() < Duration::from_secs(1), "{args:?} took {:?}", started.elapsed());
        assert_eq!(out.status.code(), Some(5), "{args:?}: {}", lossy(&out.stderr));
        assert!(lossy(&out.stderr).contains("nothing listens"), "{args:?}: {}", lossy(&out.stderr));
    }
}

#[test]
fn an_executor_with_a_value_its_settings_cannot_take_exits_3_naming_the_key() {
    let url = format!("flint://127.0.0.1:1?fingerprint={}", "0".repeat(64));
    for (conf, key) in [
        ("flint.task.cpus=abc", "flint.task.cpus"),
        ("flint.executor.heartbeatInterval=soon", "flint.executor.heartbeatInterval"),
    ] {
        let out =
            command(&["executor", "--driver-url", &url, "--conf", conf]).env("FLINT_SECRET", SECRET).output();
        let out = out.unwrap();
        assert_eq!(out.status.code(), Some(3), "{conf}: {}", lossy(&out.stderr));
        assert!(lossy(&out.stderr).contains(key), "{conf}: {}", lossy(&out.stderr));
    }
}

#[test]
fn a_secret_file_others_can_read_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("secret");
    std::fs::write(&file, SECRET).unwrap();
    use std::os::unix::fs::PermissionsExt;
    for mode in [0o644, 0o640, 0o604] {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        let url = format!("flint://127.0.0.1:1?fingerprint={}", "0".repeat(64));
        for role in [&["driver"][..], &["executor", "--driver-url", &url]] {
            let out =
                command(role).arg("--secret-file").arg(&file).env_remove("FLINT_SECRET").output().unwrap();
            let stderr = lossy(&out.stderr);
            assert!(!out.status.success(), "{role:?} with mode {mode:o} started");
            assert!(
                stderr.contains("chmod 600") && stderr.contains(&format!("{mode:o}")),
                "{role:?}: {stderr}"
            );
            assert!(!stderr.contains(SECRET));
        }
    }
}

#[test]
fn garbage_on_the_driver_port_harms_no_one() {
    let mut cluster = Cluster::start(&[]);
    cluster.executor(&["--cores", "2"]);
    cluster.wait_live(1);
    let url: flint_net::DriverUrl = cluster.url.parse().unwrap();

    // A megabyte of random datagrams.
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut state = 0x1234_5678_u64;
    for _ in 0..(1 << 20) / 1200 {
        let datagram: Vec<u8> = (0..1200)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                (state >> 56) as u8
            })
            .collect();
        let _ = udp.send_to(&datagram, ("127.0.0.1", url.port));
    }

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        use flint_proto::wire::Role;
        let secret = flint_net::Secret::new(SECRET);
        // Garbage instead of a hello.
        let (_e1, raw) =
            flint_net::connect(&url, Duration::from_secs(5), Duration::from_secs(5)).await.unwrap();
        let (mut send, _recv) = raw.open_bi().await.unwrap();
        send.write_all(&[0xde, 0xad, 0xbe, 0xef, 1, 2, 3]).await.unwrap();
        let _ = send.finish();
        // An authenticated client sending a truncated frame, then an unknown message.
        let (_e2, conn) =
            flint_net::connect(&url, Duration::from_secs(5), Duration::from_secs(5)).await.unwrap();
        let (reply, _s, _r) = flint_net::hello(&conn, &secret, Role::Client, "", None, None).await.unwrap();
        assert!(matches!(reply, flint_proto::wire::HelloReply::Welcome { .. }));
        let (mut send, _recv) = conn.open_bi().await.unwrap();
        send.write_all(&100u32.to_le_bytes()).await.unwrap();
        send.write_all(b"short").await.unwrap();
        let _ = send.finish();
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        send.write_all(&1u32.to_le_bytes()).await.unwrap();
        send.write_all(&[99]).await.unwrap(); // no such request variant
        let _ = send.finish();
        let _ = tokio::time::timeout(Duration::from_secs(5), recv.read_to_end(1024)).await;
        // An executor that claims four billion slots is refused at registration.
        use flint_proto::wire::{DriverMessage, ExecutorMessage, Registration};
        let (_e3, conn) =
            flint_net::connect(&url, Duration::from_secs(5), Duration::from_secs(5)).await.unwrap();
        let (reply, mut send, mut recv) =
            flint_net::hello(&conn, &secret, Role::Executor, APP, Some("greedy".into()), None).await.unwrap();
        assert!(matches!(reply, flint_proto::wire::HelloReply::Welcome { .. }));
        let fetch = ExecutorMessage::FetchConfig { resource_profile_id: 0 };
        flint_net::write_frame(&mut send, &fetch).await.unwrap();
        let config = flint_net::read_frame::<DriverMessage>(&mut recv).await.unwrap();
        assert!(matches!(config, Some(DriverMessage::AppConfig(_))));
        let greedy = Registration {
            host: "h".into(),
            cores: 1,
            memory: 1 << 30,
            slots: u32::MAX,
            pid: 1,
            attributes: Default::default(),
            log_urls: Default::default(),
            shuffle: None,
        };
        flint_net::write_frame(&mut send, &ExecutorMessage::Register(greedy)).await.unwrap();
        let answer = flint_net::read_frame::<DriverMessage>(&mut recv).await.unwrap();
        assert!(matches!(&answer, Some(DriverMessage::Rejected(_))), "{answer:?}");
    });

    let log = eventually(Duration::from_secs(10), || {
        let log = cluster.driver.log_text();
        (log.contains("stream ended inside a frame") && log.contains("undecodable frame")).then_some(log)
    });
    assert!(log.is_some(), "the driver logs each bad peer:\n{}", cluster.driver.log_text());
    assert_eq!(cluster.driver.child.try_wait().unwrap(), None, "the driver is still up");
    let report = ok_json(&cluster.submit(&["examples/noop", "--partitions", "4", "--json"]));
    assert_eq!(report["result"], 4, "and still serves its executors");
    assert_eq!(cluster.live_executors().len(), 1, "the greedy executor never joined: {}", cluster.status());
}

#[test]
fn connections_that_never_say_hello_crowd_out_no_one_and_cost_the_driver_little() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let mut cluster = Cluster::start(&[]);
    let url: flint_net::DriverUrl = cluster.url.parse().unwrap();
    let driver: std::net::SocketAddr = ([127, 0, 0, 1], url.port).into();
    let pid = cluster.driver.pid();
    let before = rss(pid);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _inside = rt.enter();
    let stop = Arc::new(AtomicBool::new(false));
    let (streams, handshakes) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let fillers = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let endpoint = |source: [u8; 4]| {
        let bind = std::net::SocketAddr::from((source, 0));
        flint_net::client_endpoint(url.fingerprint, Duration::from_secs(30), bind, None).unwrap()
    };
    // From 127.0.0.2: as many connections as the driver takes, each opening every stream
    // it may and writing into them without end, never saying hello.
    let fill = endpoint([127, 0, 0, 2]);
    let (stop1, streams1, fillers1, most1) = (stop.clone(), streams.clone(), fillers.clone(), most.clone());
    let filler = rt.spawn(async move {
        let mut held = Vec::new();
        while !stop1.load(Ordering::Relaxed) {
            let Ok(connecting) = fill.connect(driver, "flint-driver") else { break };
            let Ok(Ok(connection)) = tokio::time::timeout(Duration::from_secs(2), connecting).await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            fillers1.fetch_add(1, Ordering::Relaxed);
            for n in 1..=1024 {
                let Ok(Ok((mut send, _recv))) =
                    tokio::time::timeout(Duration::from_millis(100), connection.open_bi()).await
                else {
                    break;
                };
                streams1.fetch_add(1, Ordering::Relaxed);
                most1.fetch_max(n, Ordering::Relaxed);
                tokio::spawn(async move {
                    let junk = vec![0x5a; 64 << 10];
                    while send.write_all(&junk).await.is_ok() {}
                });
            }
            held.push(connection);
        }
    });
    // From 127.0.0.3: new connections as fast as they complete, never saying hello.
    let churn = endpoint([127, 0, 0, 3]);
    let (stop2, handshakes2) = (stop.clone(), handshakes.clone());
    let churner = rt.spawn(async move {
        let mut open = Vec::new();
        while !stop2.load(Ordering::Relaxed) {
            let Ok(connecting) = churn.connect(driver, "flint-driver") else { break };
            match tokio::time::timeout(Duration::from_secs(2), connecting).await {
                Ok(Ok(connection)) => {
                    handshakes2.fetch_add(1, Ordering::Relaxed);
                    open.push(connection);
                }
                _ => tokio::task::yield_now().await,
            }
        }
    });
    std::thread::sleep(Duration::from_secs(2));

    // Meanwhile an executor registers and a job runs.
    cluster.executor(&["--cores", "2"]);
    cluster.wait_live(1);
    let report = ok_json(&cluster.submit(&["examples/noop", "--partitions", "8", "--json"]));
    assert_eq!(report["result"], 8);
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    rt.block_on(async {
        let _ = tokio::time::timeout(Duration::from_secs(5), filler).await;
        let _ = tokio::time::timeout(Duration::from_secs(5), churner).await;
    });
    let (streams, handshakes) = (streams.load(Ordering::Relaxed), handshakes.load(Ordering::Relaxed));
    assert!(handshakes > 50, "the flood made only {handshakes} connections");
    // One stream at a time (the hello's; a second may open once the driver has dropped
    // the first, before the connection's close arrives): quinn's default would have let
    // each connection open 1,024 of 1.25 MB.
    let (fillers, most) = (fillers.load(Ordering::Relaxed), most.load(Ordering::Relaxed));
    assert!(
        fillers > 0 && most <= 2,
        "{most} streams on one connection before a hello ({streams} on {fillers})"
    );
    let grown = peak_rss(pid).saturating_sub(before);
    eprintln!(
        "flood: {handshakes} handshakes, {streams} streams on {fillers} connections, driver +{} MiB",
        grown >> 20
    );
    assert!(grown < 100 << 20, "the driver grew by {} MiB", grown >> 20);
    assert!(cluster.driver.log_text().contains("not said hello"), "{}", cluster.driver.log_text());
    drop(_inside);
    drop(rt);
}

#[test]
fn messages_too_big_for_a_frame_end_with_a_clear_outcome_and_harm_no_one() {
    let mut cluster = Cluster::start(&[]);
    cluster.executor(&["--cores", "2"]);
    cluster.wait_live(1);
    // 600 failed attempts of 16 KB messages: more than a frame holds. The job succeeds,
    // its report arrives with as many as fit, and says how many it left out.
    let flaky =
        ["examples/chaos", "--partitions", "600", "--conf", "mode=flaky", "--conf", "error_bytes=16000"];
    let report = ok_json(&cluster.submit(&[&flaky[..], &["--json"]].concat()));
    assert_eq!(report["result"].as_array().unwrap().len(), 600);
    let kept = report["task_failures"].as_array().unwrap().len() as u64;
    let dropped = report["task_failures_dropped"].as_u64().unwrap();
    assert_eq!(kept + dropped, 600, "{kept} + {dropped}");
    assert!(kept > 0 && dropped > 0, "{kept} + {dropped}");
    // A URL of 33 KB is refused at submission, naming the bound.
    let long = format!("https://example.com/{}", "a".repeat(33_000));
    let out = cluster.submit(&["examples/word-count", "--input", &long, "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", lossy(&out.stderr));
    assert!(lossy(&out.stderr).contains("at most 4096"), "{}", lossy(&out.stderr));
    // A 4 MB job name is refused by the driver, a 9 MB one before it leaves the client
    // (no message may carry it); each names the bound.
    let dir = tempfile::tempdir().unwrap();
    for (size, says) in [(4 << 20, "at most 256"), (9 << 20, "over the 8388608 a message may carry")] {
        let manifest = format!("name = \"{}\"\ncomponent = \"{}\"\n", "n".repeat(size), wasm("noop"));
        std::fs::write(dir.path().join("flint.toml"), manifest).unwrap();
        let out = cluster.submit(&[&dir.path().to_string_lossy(), "--json"]);
        assert_eq!(out.status.code(), Some(3), "{}", lossy(&out.stderr));
        assert!(lossy(&out.stderr).contains(says), "{}", lossy(&out.stderr));
        assert!(lossy(&out.stderr).len() < 1000, "the error does not echo the name");
    }
    // Everything still works: the executor, a job, status.
    assert_eq!(ok_json(&cluster.submit(&["examples/noop", "--partitions", "4", "--json"]))["result"], 4);
    assert_eq!(cluster.live_executors().len(), 1);
    assert!(
        cluster.status()["jobs"].as_array().unwrap().iter().all(|j| j["name"].as_str().unwrap().len() < 256)
    );
}

/// The pi jobs these tests submit: small, since what they check is how many run at once.
const SMALL_PI: [&str; 3] = ["examples/pi", "--conf", "points=1000000"];

/// Submits `n` pi jobs at once (job `i` of `i % 4 + 1` partitions) to a cluster with no
/// executor yet, so none can end: returns how many `flint status` shows running and
/// waiting once all are in; then runs `meanwhile`, starts an executor and returns their
/// reports in order.
fn jobs_at_once(
    cluster: &mut Cluster,
    n: usize,
    meanwhile: impl FnOnce(&Cluster),
) -> (usize, usize, Vec<Value>) {
    let submits: Vec<_> = (0..n)
        .map(|i| {
            let partitions = (i % 4 + 1).to_string();
            let mut cmd =
                command(&[&["submit"][..], &SMALL_PI, &["--partitions", &partitions, "--json"]].concat());
            cmd.args(["--driver-url", &cluster.url]).env("FLINT_SECRET", SECRET);
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
        })
        .collect();
    let count = |jobs: &[Value], state: &str| jobs.iter().filter(|j| j["state"] == state).count();
    let all_in = eventually(Duration::from_secs(60), || {
        let jobs = cluster.status()["jobs"].as_array().unwrap().clone();
        (jobs.len() == n).then(|| (count(&jobs, "running"), count(&jobs, "waiting")))
    });
    let (running, waiting) = all_in.unwrap_or_else(|| panic!("{n} jobs in: {}", cluster.status()));
    meanwhile(cluster);
    cluster.executor(&["--cores", "4"]);
    let reports = submits.into_iter().map(|child| ok_json(&child.wait_with_output().unwrap())).collect();
    (running, waiting, reports)
}

#[test]
fn thirty_jobs_at_once_all_succeed_and_no_more_than_max_running_jobs_run() {
    let pi = |partitions: usize| {
        let partitions = partitions.to_string();
        let args = [&["run"][..], &SMALL_PI, &["--partitions", &partitions, "--json"]].concat();
        ok_json(&flint(&args))["result"].clone()
    };
    let expected: Vec<Value> = (1..=4).map(pi).collect();
    // The default (16 at once) is more than the old pool of merge instances held.
    for (extra, max) in [(vec![], 16), (vec!["--conf", "flint.driver.maxRunningJobs=4"], 4)] {
        let mut cluster = Cluster::start(&extra);
        let (running, waiting, reports) = jobs_at_once(&mut cluster, 30, |_| {});
        assert_eq!((running, waiting), (max, 30 - max), "with {max} at once");
        for (i, report) in reports.iter().enumerate() {
            assert_eq!(report["result"], expected[i % 4], "job {i} with {max} at once");
        }
    }
    // A full queue refuses with its own exit code, naming both keys; what waits still runs.
    let limits = ["--conf", "flint.driver.maxRunningJobs=1", "--conf", "flint.driver.maxWaitingJobs=1"];
    let mut cluster = Cluster::start(&limits);
    let (running, waiting, reports) = jobs_at_once(&mut cluster, 2, |cluster| {
        let out = cluster.submit(&[&SMALL_PI[..], &["--json"]].concat());
        assert_eq!(out.status.code(), Some(7), "busy: {}", lossy(&out.stderr));
        let said = lossy(&out.stderr);
        let named =
            said.contains("flint.driver.maxRunningJobs") && said.contains("flint.driver.maxWaitingJobs");
        assert!(named, "{said}");
    });
    assert_eq!((running, waiting), (1, 1));
    assert_eq!(reports.iter().map(|r| r["result"].clone()).collect::<Vec<_>>(), expected[..2]);
}

#[test]
fn a_task_reads_only_the_tokens_its_manifest_names() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.json");
    let far = 4_102_444_800_000u64; // 2100-01-01
    let list = serde_json::json!([
        {"service": "storage", "secret": "storage-token-1", "expires_at_ms": far},
        {"service": "other", "secret": "other-token", "expires_at_ms": far},
    ]);
    std::fs::write(&tokens, list.to_string()).unwrap();
    let mut cluster = Cluster::start(&["--tokens-file", tokens.to_str().unwrap()]);
    cluster.executor(&["--cores", "1"]);
    cluster.wait_live(1);

    let job = dir.path().join("job");
    std::fs::create_dir(&job).unwrap();
    let manifest = format!(
        "name = \"reader\"\ncomponent = {:?}\ntokens = [\"storage\"]\npartitions = 1\n",
        wasm("chaos")
    );
    std::fs::write(job.join("flint.toml"), manifest).unwrap();
    let job = job.to_str().unwrap();
    let read = |service: &str| {
        let conf = format!("service={service}");
        ok_json(&cluster.submit(&[job, "--conf", "mode=token", "--conf", &conf, "--json"]))["result"].clone()
    };
    assert_eq!(read("storage"), serde_json::json!(["storage-token-1"]));
    assert_eq!(read("other"), serde_json::json!(["none"]), "not named in the manifest");
    assert_eq!(read("missing"), serde_json::json!(["none"]));
    let logged = eventually(Duration::from_secs(5), || {
        let log = cluster.executors[0].log_text();
        (log.contains("a task asked for a token it may not read") && log.contains("service=other"))
            .then_some(())
    });
    assert!(logged.is_some(), "the attempt is logged: {}", cluster.executors[0].log_text());

    // The file is rotated: the running executor's tasks read the new token, no restart.
    let rotated =
        serde_json::json!([{"service": "storage", "secret": "storage-token-2", "expires_at_ms": far}]);
    std::fs::write(&tokens, rotated.to_string()).unwrap();
    let seen = eventually(Duration::from_secs(10), || {
        (read("storage") == serde_json::json!(["storage-token-2"])).then_some(())
    });
    assert!(seen.is_some(), "the rotated token never reached the tasks");
    assert_eq!(cluster.live_executors().len(), 1);
    // A broken rewrite keeps the last good tokens, and says so without a secret.
    std::fs::write(&tokens, "{ not json").unwrap();
    let noticed = eventually(Duration::from_secs(10), || {
        cluster.driver.log_text().contains("keeping the last good tokens").then_some(())
    });
    assert!(noticed.is_some(), "{}", cluster.driver.log_text());
    assert_eq!(read("storage"), serde_json::json!(["storage-token-2"]));
    for log in [cluster.driver.log_text(), cluster.executors[0].log_text()] {
        assert!(!log.contains("storage-token"), "a token's secret in a log:\n{log}");
    }
}

/// The peak resident memory of a process, from /proc (VmHWM), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// Checks that a chaos `big-output` job's result is `tasks` strings of `bytes` x's,
/// every byte of them, by digest.
fn assert_big_result(report: &Value, tasks: usize, bytes: usize) {
    use sha2::{Digest, Sha256};
    let strings = report["result"].as_array().unwrap_or_else(|| panic!("an array: {}", report["error"]));
    assert_eq!(strings.len(), tasks);
    let expected = Sha256::digest("x".repeat(bytes).as_bytes());
    for s in strings {
        let s = s.as_str().unwrap();
        assert_eq!(s.len(), bytes);
        assert_eq!(Sha256::digest(s.as_bytes()), expected, "every byte intact");
    }
}

/// A token command: each run issues `renewed-token-N` with three seconds of life and
/// notes `N expires_at_ms` in `issued`.
fn token_command(dir: &std::path::Path) -> String {
    let script = dir.join("token.sh");
    let (count, issued) = (dir.join("count"), dir.join("issued"));
    std::fs::write(
        &script,
        format!(
            "n=$(( $(cat {c} 2>/dev/null || echo 0) + 1 )); echo $n > {c}\n\
             at=$(( $(date +%s%3N) + 3000 ))\n\
             echo \"$n $at\" >> {i}\n\
             echo \"{{\\\"secret\\\": \\\"renewed-token-$n\\\", \\\"expires_at_ms\\\": $at}}\"\n",
            c = count.display(),
            i = issued.display()
        ),
    )
    .unwrap();
    format!("flint.security.credentials.storage.command=sh {}", script.display())
}

#[test]
fn tokens_are_renewed_before_they_expire_and_tasks_read_only_valid_ones() {
    let dir = tempfile::tempdir().unwrap();
    let command = token_command(dir.path());
    let mut cluster =
        Cluster::start(&["--conf", &command, "--conf", "flint.security.credentials.renewalMargin=1s"]);
    cluster.executor(&["--cores", "1"]);
    cluster.wait_live(1);
    let job = dir.path().join("job");
    std::fs::create_dir(&job).unwrap();
    let manifest = format!(
        "name = \"reader\"\ncomponent = {:?}\ntokens = [\"storage\"]\npartitions = 2\n",
        wasm("chaos")
    );
    std::fs::write(job.join("flint.toml"), manifest).unwrap();
    let job = job.to_str().unwrap();
    // Runs over some three lifetimes of the token.
    let mut seen = Vec::new();
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(9) {
        let submitted_at =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
        let report =
            ok_json(&cluster.submit(&[job, "--conf", "mode=token", "--conf", "service=storage", "--json"]));
        for secret in report["result"].as_array().unwrap() {
            seen.push((secret.as_str().unwrap().to_owned(), submitted_at));
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let issued: std::collections::HashMap<String, u64> = std::fs::read_to_string(dir.path().join("issued"))
        .unwrap()
        .lines()
        .map(|l| {
            let (n, at) = l.split_once(' ').unwrap();
            (format!("renewed-token-{n}"), at.parse().unwrap())
        })
        .collect();
    let distinct: std::collections::BTreeSet<&str> = seen.iter().map(|(s, _)| s.as_str()).collect();
    assert!(distinct.len() >= 3, "the token was renewed and pushed as it aged: {distinct:?}");
    for (secret, submitted_at) in &seen {
        let expires = issued.get(secret).unwrap_or_else(|| panic!("a task read {secret:?}, never issued"));
        // Tasks read it after their job was submitted: it had not expired by then.
        assert!(expires > submitted_at, "{secret} was read after it expired");
    }
    assert_eq!(cluster.live_executors().len(), 1);
    for log in [cluster.driver.log_text(), cluster.executors[0].log_text()] {
        assert!(!log.contains("renewed-token"), "a token's secret in a log:\n{log}");
    }
    assert!(cluster.driver.log_text().contains("token renewed"));
}

#[test]
fn a_token_provider_that_fails_at_start_fails_the_driver_with_its_reason() {
    let out = command(&[
        "driver",
        "--conf",
        "flint.security.credentials.storage.command=echo vault is sealed >&2; exit 2",
    ])
    .env("FLINT_SECRET", SECRET)
    .output()
    .unwrap();
    let stderr = lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("no token for service storage") && stderr.contains("vault is sealed"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no URL printed: the driver never served: {}", lossy(&out.stdout));
}

#[test]
fn results_of_many_megabytes_arrive_whole_and_executors_stay() {
    // Merges of these outputs run on the driver, within its default flint.driver.memory.
    let mut cluster = Cluster::start(&["--conf", "flint.task.maxResultSize=256m"]);
    cluster.executor(&["--cores", "2", "--memory", "4g", "--executor-id", "a"]);
    cluster.executor(&["--cores", "1", "--memory", "4g", "--executor-id", "b"]);
    cluster.wait_live(2);

    // Four tasks of 20 MB each: every output travels as a block, not in a report.
    let big = ["examples/chaos", "--partitions", "4", "--conf", "mode=big-output", "--json"];
    let out = cluster.submit(&[&big[..], &["--conf", "bytes=20000000"]].concat());
    assert_big_result(&ok_json(&out), 4, 20_000_000);

    // One task whose single result is 200 MB.
    let one =
        ["examples/chaos", "--partitions", "1", "--conf", "mode=big-output", "--conf", "bytes=200000000"];
    let out = cluster.submit(&[&one[..], &["--json"]].concat());
    assert_big_result(&ok_json(&out), 1, 200_000_000);

    assert_eq!(cluster.live_executors().len(), 2, "both executors stayed: {}", cluster.status());
    for e in cluster.status()["executors"].as_array().unwrap() {
        assert!(e["removed"].is_null(), "{e}");
    }
    // The driver held the 200 MB result, its copy into the finishing sandbox and the
    // sandbox's answer at most: documented in ARCHITECTURE.md as about four times the
    // largest result plus a few hundred MB.
    let peak = peak_rss(cluster.driver.pid());
    assert!(peak < 4 * 200_000_000 + (400 << 20), "driver peak RSS {} MB", peak >> 20);
    eprintln!("driver peak RSS: {} MB", peak >> 20);
}

#[test]
fn a_job_over_the_driver_result_limit_fails_naming_the_key() {
    let mut cluster = Cluster::start(&["--conf", "flint.driver.maxResultSize=10m"]);
    cluster.executor(&["--cores", "2"]);
    cluster.wait_live(1);
    let big = ["examples/chaos", "--partitions", "4", "--conf", "mode=big-output", "--conf", "bytes=4000000"];
    let out = cluster.submit(&[&big[..], &["--json"]].concat());
    assert_eq!(out.status.code(), Some(1), "{}", lossy(&out.stderr));
    let report = json(&out);
    let error = report["error"].as_str().unwrap();
    assert!(error.contains("flint.driver.maxResultSize"), "{error}");
    assert_eq!(report["failure"]["reason"]["kind"], "result-too-large", "{report}");
    // A job cannot lift the driver's limit (nor any key the driver holds); it may lower it.
    for (conf, key) in [
        ("flint.driver.maxResultSize=1t", "flint.driver.maxResultSize"),
        ("flint.merge.deadline=1d", "flint.merge.deadline"),
        ("flint.input.allowHttp=true", "flint.input.allowHttp"),
    ] {
        let out = cluster.submit(&["examples/noop", "--conf", conf, "--json"]);
        assert_eq!(out.status.code(), Some(3), "{conf}: {}", lossy(&out.stderr));
        assert!(lossy(&out.stderr).contains(key), "{conf}: {}", lossy(&out.stderr));
    }
    let lowered = ["examples/noop", "--partitions", "2", "--conf", "flint.driver.maxResultSize=1m", "--json"];
    assert_eq!(ok_json(&cluster.submit(&lowered))["result"], 2);
    // The cluster serves the next job.
    let report = ok_json(&cluster.submit(&["examples/noop", "--partitions", "3", "--json"]));
    assert_eq!(report["result"], 3);
    assert_eq!(cluster.live_executors().len(), 1);
}

#[test]
fn a_wrong_fingerprint_fails_at_once_with_its_own_code() {
    let mut cluster = Cluster::start(&[]);
    let url: flint_net::DriverUrl = cluster.url.parse().unwrap();
    let wrong = flint_net::DriverUrl { fingerprint: [7; 32], ..url }.to_string();
    let started = std::time::Instant::now();
    let mut cmd = command(&["status", "--driver-url", &wrong]);
    let out = cmd.env("FLINT_SECRET", SECRET).output().unwrap();
    assert_eq!(out.status.code(), Some(6), "{}", lossy(&out.stderr));
    assert!(lossy(&out.stderr).contains("fingerprint"), "{}", lossy(&out.stderr));
    let mut cmd = command(&["executor", "--driver-url", &wrong, "--app-id", APP, "--cores", "1"]);
    let out = cmd.env("FLINT_SECRET", SECRET).output().unwrap();
    assert_eq!(out.status.code(), Some(17), "{}", lossy(&out.stderr));
    assert!(started.elapsed() < Duration::from_secs(10), "no minute of retries: {:?}", started.elapsed());
    // The right URL still works.
    cluster.executor(&["--cores", "1"]);
    cluster.wait_live(1);
}

#[test]
fn executors_and_clients_reach_a_driver_on_ipv6() {
    let mut cluster = Cluster::start(&["--listen", "[::1]:0"]);
    assert!(cluster.url.contains("[::1]") || cluster.url.contains("::1"), "{}", cluster.url);
    cluster.executor(&["--cores", "1"]);
    cluster.wait_live(1);
    let report = ok_json(&cluster.submit(&["examples/noop", "--partitions", "2", "--json"]));
    assert_eq!(report["result"], 2);
}

#[test]
fn a_killed_executor_is_noticed_in_seconds_and_a_killed_driver_too() {
    // The heartbeat timeout is long, as by default: only the transport can notice.
    let mut cluster =
        Cluster::start(&["--conf", "flint.network.timeout=120s", "--conf", "flint.network.idleTimeout=2s"]);
    cluster.executor(&["--cores", "2", "--executor-id", "victim", "--conf", "flint.network.idleTimeout=2s"]);
    cluster.executor(&[
        "--cores",
        "2",
        "--executor-id",
        "survivor",
        "--conf",
        "flint.network.idleTimeout=2s",
    ]);
    cluster.wait_live(2);
    let job = start_slow_job(&cluster);
    eventually(Duration::from_secs(20), || {
        (cluster.executor_status("victim")["running"].as_u64()? > 0).then_some(())
    })
    .expect("the victim got tasks");
    let killed = std::time::Instant::now();
    cluster.executors[0].signal("KILL");
    // Its tasks run elsewhere within seconds: the driver's own event says so.
    let relaunched = eventually(Duration::from_secs(20), || {
        cluster.driver.log_text().contains("attempt relaunched").then(|| killed.elapsed())
    })
    .expect("the victim's attempts are relaunched");
    assert!(relaunched < Duration::from_secs(5), "relaunched {relaunched:?} after the kill");
    let noticed = cluster.executor_status("victim")["removed"].as_str().unwrap_or_default().to_owned();
    assert!(
        noticed.contains("connection idle") && noticed.contains("flint.network.idleTimeout"),
        "{noticed}"
    );
    let report = ok_json(&job.wait_with_output().unwrap());
    assert_eq!(report["result"], expected_slow_pi(), "the exact answer");

    // Every slot of two executors busy with guest code for longer than three idle
    // timeouts: no false alarm.
    cluster.executor(&["--cores", "2", "--executor-id", "second", "--conf", "flint.network.idleTimeout=2s"]);
    cluster.wait_live(2);
    let spin = ["examples/chaos", "--partitions", "4", "--conf", "mode=loop", "--json"];
    let limits = ["--conf", "flint.task.deadline=7s", "--conf", "flint.task.maxFailures=1"];
    let out = cluster.submit(&[&spin[..], &limits[..]].concat());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out)["failure"]["reason"]["kind"], "deadline", "{}", lossy(&out.stdout));
    for id in ["survivor", "second"] {
        let e = cluster.executor_status(id);
        assert!(e["removed"].is_null(), "{}", cluster.status());
        assert!(e["tasks_failed"].as_u64().unwrap() >= 1, "{id} ran a spinning task: {e}");
    }

    // The driver dies: its executors leave with the "driver lost" code within seconds.
    let killed = std::time::Instant::now();
    cluster.driver.signal("KILL");
    for n in [1, 2] {
        let code = cluster.executors[n].wait(Duration::from_secs(10));
        assert_eq!(code, Some(16), "{}", cluster.executors[n].log_text());
    }
    assert!(killed.elapsed() < Duration::from_secs(5), "{:?}", killed.elapsed());
}

#[test]
fn jobs_read_inputs_only_under_the_drivers_roots() {
    let mut cluster = Cluster::start(&[]);
    cluster.executor(&["--cores", "1"]);
    cluster.wait_live(1);
    let inputs = cluster.dir.path().join("inputs");
    let inside = inputs.join("ok.txt");
    std::fs::write(&inside, "a b\nc\n").unwrap();
    let outside = cluster.dir.path().join("secret.txt");
    std::fs::write(&outside, "secret words\n").unwrap();
    std::os::unix::fs::symlink(&outside, inputs.join("link.txt")).unwrap();
    // `file://`: executors read the path themselves (a shared filesystem).
    let wc = |input: &std::path::Path, extra: &[&str]| {
        let url = format!("file://{}", input.display());
        let args = ["examples/word-count", "--input", &url, "--json"];
        cluster.submit(&[&args[..], extra].concat())
    };
    let report = ok_json(&wc(&inside, &[]));
    assert_eq!(report["result"]["total_words"], 3);
    // Outside, through `..`, through a link, or by a job widening the roots itself.
    let dotdot = inputs.join("../secret.txt");
    let widen = format!("flint.input.roots={}", cluster.dir.path().display());
    for (input, extra) in [
        (&outside, &[][..]),
        (&dotdot, &[][..]),
        (&inputs.join("link.txt"), &[][..]),
        (&outside, &["--conf", widen.as_str()][..]),
    ] {
        let out = wc(input, extra);
        let stderr = lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{input:?}: {stderr}");
        assert!(stderr.contains("flint.input.roots"), "{input:?}: {stderr}");
    }
}

#[test]
fn a_driver_told_to_stop_fails_running_jobs_with_a_reason_and_exits_zero() {
    let mut cluster = Cluster::start(&[]);
    cluster.executor(&["--cores", "2"]);
    cluster.wait_live(1);
    let job = start_slow_job(&cluster);
    eventually(Duration::from_secs(20), || {
        (cluster.live_executors()[0]["running"].as_u64().unwrap_or(0) > 0).then_some(())
    })
    .expect("the job runs");
    cluster.driver.signal("TERM");
    let out = job.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(8), "cancelled by the driver's end: {}", lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["status"], "cancelled", "{report}");
    let error = report["error"].as_str().unwrap_or_default();
    assert!(error.contains("the driver is stopping"), "{report}");
    assert_eq!(cluster.driver.wait(Duration::from_secs(10)), Some(0), "{}", cluster.driver.log_text());
    // Its executor stops with it, cleanly: a supervisor counts no crash.
    let code = cluster.executors[0].wait(Duration::from_secs(10));
    assert_eq!(code, Some(0), "{}", cluster.executors[0].log_text());
}

#[test]
fn flint_cancel_and_ctrl_c_end_a_running_job_as_cancelled_and_the_executors_run_the_next() {
    let mut cluster = Cluster::start(&[]);
    cluster.executor(&["--cores", "2"]);
    cluster.wait_live(1);
    let busy = |cluster: &Cluster| {
        eventually(Duration::from_secs(20), || {
            (cluster.live_executors()[0]["running"].as_u64().unwrap_or(0) > 0).then_some(())
        })
        .expect("the job runs")
    };
    // Within a second the submitter has its report, and no attempt of the job runs
    // (its 24 long tasks would keep both slots busy for seconds).
    let ended_within_a_second = |job: std::process::Child, cancelled: std::time::Instant| {
        let out = job.wait_with_output().unwrap();
        assert!(cancelled.elapsed() < Duration::from_secs(1), "{:?} to end", cancelled.elapsed());
        assert_eq!(out.status.code(), Some(8), "{}", lossy(&out.stderr));
        let report = json(&out);
        assert_eq!(report["status"], "cancelled", "{report}");
        assert_eq!(report["failure"]["reason"]["kind"], "cancelled", "{report}");
        let idle = eventually(Duration::from_secs(1), || {
            (cluster.live_executors()[0]["running"].as_u64() == Some(0)).then_some(())
        });
        assert!(idle.is_some(), "attempts still run: {}", cluster.status());
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(cluster.live_executors()[0]["running"].as_u64(), Some(0), "none starts afterwards");
        report["job_id"].as_u64().unwrap()
    };

    let job = start_slow_job(&cluster);
    busy(&cluster);
    let id = cluster.status()["jobs"][0]["job"].as_u64().expect("the running job's id").to_string();
    let cancelled = std::time::Instant::now();
    let out = cluster.client(&["cancel", &id]);
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    assert_eq!(ended_within_a_second(job, cancelled).to_string(), id);
    let listed = cluster.status()["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job"] == id.parse::<u64>().unwrap())
        .cloned();
    assert_eq!(listed.as_ref().map(|j| j["state"].clone()), Some(Value::from("cancelled")), "{listed:?}");
    // Nothing is left to cancel.
    let again = cluster.client(&["cancel", &id]);
    assert_eq!(again.status.code(), Some(9), "{}", lossy(&again.stderr));

    // Ctrl-C on `flint submit` asks the driver to cancel, once.
    let job = start_slow_job(&cluster);
    busy(&cluster);
    eventually(Duration::from_secs(20), || catches_ctrl_c(job.id()).then_some(())).expect("Ctrl-C is caught");
    let cancelled = std::time::Instant::now();
    assert!(
        std::process::Command::new("kill").args(["-INT", &job.id().to_string()]).status().unwrap().success()
    );
    ended_within_a_second(job, cancelled);

    // The executors serve the next job as before.
    let report =
        ok_json(&cluster.submit(&["examples/pi", "--conf", "points=100000", "--partitions", "4", "--json"]));
    assert_eq!(report["status"], "succeeded", "{report}");
}

/// The status server's cancel: the API takes the secret as a bearer token and nothing
/// less; the job page's button works for a browser holding the UI's cookie, posting
/// from the page itself; a form posted from another origin, or without the cookie,
/// cancels nothing.
#[test]
fn the_cancel_api_and_the_job_pages_button_end_a_job_as_cancelled_and_no_other_site_can() {
    let port = free_port();
    let mut cluster = Cluster::start(&["--ui-port", &port.to_string()]);
    cluster.executor(&["--cores", "2"]);
    cluster.wait_live(1);
    let running_job = |cluster: &Cluster| {
        eventually(Duration::from_secs(20), || {
            let status = cluster.status();
            let job = status["jobs"].as_array()?.iter().find(|j| j["state"] == "running")?["job"].as_u64()?;
            (cluster.live_executors()[0]["running"].as_u64().unwrap_or(0) > 0).then_some(job)
        })
        .expect("the job runs")
    };
    let state_of = |cluster: &Cluster, id: u64| {
        let status = cluster.status();
        status["jobs"].as_array().unwrap().iter().find(|j| j["job"] == id).map(|j| j["state"].clone())
    };
    let post = |path: &str, headers: &str, body: &str| {
        let form = if body.is_empty() { "" } else { "Content-Type: application/x-www-form-urlencoded\r\n" };
        let (code, _, answer) = common::http_request(port, "POST", path, &format!("{form}{headers}"), body);
        (code, answer)
    };

    // The API: nothing without the secret, and the job runs on; with it, cancelled.
    let job = start_slow_job(&cluster);
    let id = running_job(&cluster);
    let cancel = format!("/api/v1/jobs/{id}/cancel");
    assert_eq!(post(&cancel, "", "").0, 401, "no credential");
    assert_eq!(post(&cancel, "Authorization: Bearer wrong\r\n", "").0, 401, "a wrong one");
    // The UI token is a browser's cookie, sent to every port of the host: as a bearer
    // it is nothing.
    let ui_bearer = format!("Authorization: Bearer {}\r\n", derived_ui_token());
    assert_eq!(post(&cancel, &ui_bearer, "").0, 401, "the UI token as a bearer");
    assert_eq!(state_of(&cluster, id), Some(Value::from("running")));
    let now_ms = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    let started = std::time::Instant::now();
    let asked_ms = now_ms() as u64;
    let (code, answer) = post(&cancel, &format!("Authorization: Bearer {SECRET}\r\n"), "");
    assert_eq!((code, answer.contains("\"cancelled\"")), (200, true), "{answer}");
    let out = job.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(1), "{:?} to end", started.elapsed());
    assert_eq!(out.status.code(), Some(8), "{}", lossy(&out.stderr));
    assert_eq!(json(&out)["status"], "cancelled");
    // No attempt of it was launched after the cancel, and none runs.
    std::thread::sleep(Duration::from_millis(500));
    let (_, attempts) = http_get(port, &format!("/api/v1/jobs/{id}/attempts"), None);
    let attempts: Value = serde_json::from_str(&attempts).unwrap();
    for a in attempts.as_array().unwrap() {
        assert!(a["launched_ms"].as_u64().unwrap() <= asked_ms, "launched after the cancel: {a}");
        assert_ne!(a["state"], "running", "{a}");
    }
    assert_eq!(cluster.live_executors()[0]["running"].as_u64(), Some(0));
    let (code, answer) = post(&cancel, &format!("Authorization: Bearer {SECRET}\r\n"), "");
    assert_eq!(code, 409, "it has ended: {answer}");
    assert_eq!(post("/api/v1/jobs/999/cancel", &format!("Authorization: Bearer {SECRET}\r\n"), "").0, 404);

    // The button: shown only to a browser that showed the credential.
    let job = start_slow_job(&cluster);
    let id = running_job(&cluster);
    let page = format!("http://127.0.0.1:{port}/jobs/{id}");
    let (_, without) = http_get(port, &format!("/jobs/{id}"), None);
    assert!(!without.contains("id=cancel"), "no button without the credential:\n{without}");
    let browser = browser::Browser::start();
    browser.goto(&format!("{page}?token={SECRET}"));
    assert!(browser.wait_for(Duration::from_secs(5), "return !!document.querySelector('#cancel button');"));
    let html = browser.eval("return document.documentElement.outerHTML;").to_string();
    assert!(!html.contains(SECRET), "the page does not carry the secret");
    let csrf = browser
        .eval("return document.querySelector('#cancel input[name=csrf]').value;")
        .as_str()
        .unwrap()
        .to_owned();
    let cookie = format!("Cookie: flint_ui={}\r\n", derived_ui_token());
    // Another site's form: the cookie would not come (SameSite), but were it sent, the
    // origin is not the page's; without the form token, nothing either.
    let form = format!("/jobs/{id}/cancel");
    let evil = format!("{cookie}Origin: http://evil.example\r\n");
    assert_eq!(post(&form, &evil, &format!("csrf={csrf}")).0, 403, "another origin");
    let ours = format!("{cookie}Origin: http://localhost\r\n");
    assert_eq!(post(&form, &ours, "csrf=guess").0, 403, "a wrong form token");
    assert_eq!(post(&form, "Origin: http://localhost\r\n", &format!("csrf={csrf}")).0, 401, "no cookie");
    assert_eq!(state_of(&cluster, id), Some(Value::from("running")), "none of those cancelled it");
    let started = std::time::Instant::now();
    browser.eval("document.querySelector('#cancel button').click(); return null;");
    let out = job.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(1), "{:?} to end", started.elapsed());
    assert_eq!(json(&out)["status"], "cancelled");
    let shown = "return document.querySelector('#job-state').innerText.startsWith('cancelled');";
    assert!(browser.wait_for(Duration::from_secs(5), shown), "the page says so:\n{}", browser.text());
    assert_eq!(state_of(&cluster, id), Some(Value::from("cancelled")));
}

/// The UI token a browser's cookie holds: the secret's derivation for the status page.
fn derived_ui_token() -> String {
    let secret = flint_net::Secret::new(SECRET.as_bytes());
    String::from_utf8(flint_driver::ui::ui_token(&secret).expose().to_vec()).unwrap()
}

/// A driver and one two-core executor that may write part files under a folder of
/// their own, a 1 MB corpus, and where its counts should go: (cluster, the folder,
/// the corpus, the output directory).
fn cluster_writing_parts() -> (Cluster, tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let shared = tempfile::tempdir().unwrap();
    let roots = format!("flint.output.roots={}", shared.path().display());
    let mut cluster = Cluster::start(&["--conf", &roots]);
    cluster.executor(&["--cores", "2", "--conf", &roots]);
    cluster.wait_live(1);
    let input = cluster.dir.path().join("inputs/corpus.txt");
    corpus(&input, 1 << 20);
    let output = shared.path().join("counts");
    (cluster, shared, input, output)
}

#[test]
fn a_driver_told_to_stop_ends_a_job_writing_parts_before_it_goes() {
    let (mut cluster, _shared, input, output) = cluster_writing_parts();
    let job = command(&[
        "submit",
        "examples/word-count-mr",
        "--input",
        input.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
        "--conf",
        "reduce_pause_ms=5000",
        "--driver-url",
        &cluster.url,
        "--json",
    ])
    .env("FLINT_SECRET", SECRET)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Its reducers hold back with their parts begun.
    let begun = eventually(Duration::from_secs(20), || {
        let parts = std::fs::read_dir(output.join("_temporary")).ok()?.count();
        (parts > 0).then_some(())
    });
    assert!(begun.is_some(), "the reducers started");
    cluster.driver.signal("TERM");
    let out = job.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(8), "its submitter hears it was cancelled: {}", lossy(&out.stderr));
    assert_eq!(cluster.driver.wait(Duration::from_secs(10)), Some(0), "{}", cluster.driver.log_text());
    let left = common::names_in(&output);
    assert!(left.iter().all(|n| n != "_SUCCESS" && n != "_temporary"), "{left:?}");
}

#[test]
fn the_driver_lists_only_the_retained_finished_jobs() {
    let mut cluster = Cluster::start(&["--conf", "flint.driver.retainedJobs=2"]);
    cluster.executor(&["--cores", "1"]);
    cluster.wait_live(1);
    for _ in 0..3 {
        ok_json(&cluster.submit(&["examples/noop", "--partitions", "2", "--json"]));
    }
    let jobs: Vec<u64> =
        cluster.status()["jobs"].as_array().unwrap().iter().map(|j| j["job"].as_u64().unwrap()).collect();
    assert_eq!(jobs, vec![2, 3], "the oldest is forgotten");
}

/// Resident memory of a process now (VmRSS), in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// `noop` with a custom section of `size` bytes from `seed` appended: a distinct,
/// large, valid component.
fn padded_noop(seed: u64, size: usize) -> Vec<u8> {
    let mut bytes = std::fs::read(wasm("noop")).unwrap();
    let name = b"flint-test-padding";
    let mut payload = vec![name.len() as u8];
    payload.extend_from_slice(name);
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    payload.extend((0..size).map(|_| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as u8
    }));
    bytes.push(0); // a custom section
    let mut len = payload.len();
    loop {
        let byte = (len & 0x7f) as u8;
        len >>= 7;
        if len == 0 {
            bytes.push(byte);
            break;
        }
        bytes.push(byte | 0x80);
    }
    bytes.extend(payload);
    bytes
}

#[test]
fn ten_jobs_with_distinct_large_components_leave_memory_where_the_first_did() {
    let mut cluster = Cluster::start(&[]);
    cluster.executor(&["--cores", "2", "--executor-id", "long-lived"]);
    cluster.wait_live(1);
    let dir = cluster.dir.path().to_owned();
    let mut after_first = (0, 0);
    for n in 0..10u64 {
        let component = dir.join(format!("job-{n}.wasm"));
        std::fs::write(&component, padded_noop(n, 40 << 20)).unwrap();
        let report = ok_json(&cluster.submit(&[component.to_str().unwrap(), "--partitions", "4", "--json"]));
        assert_eq!(report["result"], 4);
        std::fs::remove_file(&component).unwrap();
        if n == 0 {
            after_first = (rss(cluster.driver.pid()), rss(cluster.executors[0].pid()));
        }
    }
    let after_tenth = (rss(cluster.driver.pid()), rss(cluster.executors[0].pid()));
    let mib = |b: u64| b >> 20;
    eprintln!(
        "RSS after the first and the tenth job: driver {} → {} MiB, executor {} → {} MiB",
        mib(after_first.0),
        mib(after_tenth.0),
        mib(after_first.1),
        mib(after_tenth.1)
    );
    // Documented in ARCHITECTURE.md: within 64 MiB of where the first job left it.
    assert!(
        after_tenth.0 < after_first.0 + (64 << 20),
        "driver grew {} → {} MiB",
        mib(after_first.0),
        mib(after_tenth.0)
    );
    assert!(
        after_tenth.1 < after_first.1 + (64 << 20),
        "executor grew {} → {} MiB",
        mib(after_first.1),
        mib(after_tenth.1)
    );
}

#[test]
fn a_task_sleeping_in_wasi_meets_its_deadline_on_a_remote_executor() {
    let mut cluster = Cluster::start(&[]);
    cluster.executor(&["--cores", "1"]);
    cluster.wait_live(1);
    for mode in ["mode=sleep", "mode=poll"] {
        let started = std::time::Instant::now();
        let args = ["examples/chaos", "--partitions", "1", "--conf", mode, "--json"];
        let limits = ["--conf", "flint.task.deadline=2s", "--conf", "flint.task.maxFailures=1"];
        let out = cluster.submit(&[&args[..], &limits[..]].concat());
        let elapsed = started.elapsed();
        assert_eq!(out.status.code(), Some(1), "{}", lossy(&out.stderr));
        assert_eq!(json(&out)["failure"]["reason"]["kind"], "deadline", "{mode}");
        assert!(elapsed < Duration::from_secs(3) + Duration::from_millis(500), "{mode}: {elapsed:?}");
    }
    // The executor runs the next job.
    assert_eq!(ok_json(&cluster.submit(&["examples/noop", "--partitions", "2", "--json"]))["result"], 2);
}

#[test]
fn a_task_whose_executors_keep_dying_fails_its_job_after_a_bounded_number_of_starts() {
    // The local backend keeps one executor; each one that takes the task is killed while
    // it runs it, as a task that brought its host down would leave it.
    let cluster = Cluster::start(&[
        "--backend",
        "local",
        "--conf",
        "flint.executor.instances=1",
        "--conf",
        "flint.executor.cores=1",
        "--conf",
        "flint.task.maxExecutorLosses=3",
    ]);
    let driver = cluster.driver.pid();
    let job = ["examples/chaos", "--partitions", "1", "--conf", "mode=sleep", "--conf", "secs=600", "--json"];
    let (out, killed) = std::thread::scope(|scope| {
        let running = scope.spawn(|| cluster.submit(&job));
        let mut killed = 0;
        while !running.is_finished() && killed < 10 {
            let busy = eventually(Duration::from_secs(30), || {
                if running.is_finished() {
                    return Some(());
                }
                let status = cluster.status();
                let busy = status["executors"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|e| e["removed"].is_null() && e["running"].as_u64().unwrap_or(0) > 0);
                busy.then_some(())
            });
            if busy.is_none() || running.is_finished() {
                break;
            }
            for child in children_of(driver) {
                // SAFETY: a signal to the driver's own child, an executor it started.
                unsafe { libc::kill(child as i32, libc::SIGKILL) };
            }
            killed += 1;
            std::thread::sleep(Duration::from_millis(500));
        }
        (running.join().unwrap(), killed)
    });
    assert_eq!(out.status.code(), Some(1), "{}", lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["failure"]["reason"]["kind"], "executors-lost", "{report}");
    assert_eq!(report["failure"]["reason"]["losses"], 3, "{report}");
    assert!(report["error"].as_str().unwrap().contains("flint.task.maxExecutorLosses"), "{report}");
    assert_eq!(killed, 3, "three executors started and lost, then no more for this task");
}

#[test]
fn the_local_backend_follows_the_load_and_reaps_what_it_started() {
    let cluster = Cluster::start(&[
        "--backend",
        "local",
        "--conf",
        "flint.dynamicAllocation.enabled=true",
        "--conf",
        "flint.dynamicAllocation.maxExecutors=3",
        "--conf",
        "flint.dynamicAllocation.executorIdleTimeout=2s",
        "--conf",
        "flint.dynamicAllocation.cooldown=1s",
        "--conf",
        "flint.executor.cores=1",
    ]);
    let driver = cluster.driver.pid();
    std::thread::sleep(Duration::from_secs(2));
    assert!(children_of(driver).is_empty(), "minExecutors=0: nothing starts before there is work");

    let job = ["examples/pi", "--conf", "points=30000000", "--partitions", "64", "--json"];
    let submitted = std::thread::scope(|scope| {
        let running = scope.spawn(|| ok_json(&cluster.submit(&job)));
        // While the backlog waits, the policy wants executors, at most maxExecutors.
        let wanted = eventually(Duration::from_secs(20), || {
            cluster.status()["allocation_target"].as_u64().filter(|n| *n > 0)
        });
        assert!(matches!(wanted, Some(1..=3)), "{wanted:?}");
        running.join().unwrap()
    });
    let local = ok_json(&flint(&[&["run"][..], &job].concat()));
    assert_eq!(submitted["result"], local["result"], "the exact answer");

    let status = cluster.status();
    let started: Vec<&Value> = status["executors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["id"].as_str().unwrap().starts_with("dyn-"))
        .collect();
    assert!(started.len() > 1, "the backlog brought up more than one executor: {status}");
    assert!(started.len() <= 3, "never more than maxExecutors: {status}");
    for e in &started {
        assert_eq!(e["backend"], "local", "{status}");
    }

    // Idle past the timeout, every executor is given back, and its process exits and
    // is reaped by the driver.
    let gone = eventually(Duration::from_secs(20), || children_of(driver).is_empty().then_some(()));
    assert!(
        gone.is_some(),
        "executor processes left: {:?}\n{}",
        children_of(driver),
        cluster.driver.log_text()
    );
    let status = cluster.status();
    for e in status["executors"].as_array().unwrap() {
        assert_eq!(e["removed"], "decommissioned", "{status}");
    }
    assert_eq!(status["allocation_target"], 0, "no load, minExecutors=0: {status}");
}

/// A fleet that shrank to nothing grows again for the next job within the backlog
/// timeout and an executor's start, not after the cooldown that stops a grow-shrink
/// flip-flop while executors are left.
#[test]
fn a_job_a_second_after_the_fleet_emptied_starts_within_the_backlog_timeout() {
    let ui = free_port();
    let cluster = Cluster::start(&[
        "--backend",
        "local",
        "--ui-port",
        &ui.to_string(),
        "--conf",
        "flint.dynamicAllocation.enabled=true",
        "--conf",
        "flint.dynamicAllocation.maxExecutors=2",
        "--conf",
        "flint.dynamicAllocation.executorIdleTimeout=1s",
        "--conf",
        "flint.dynamicAllocation.schedulerBacklogTimeout=1s",
        "--conf",
        "flint.dynamicAllocation.cooldown=10s",
        "--conf",
        "flint.executor.cores=1",
    ]);
    let driver = cluster.driver.pid();
    let job = ["examples/pi", "--conf", "points=100000", "--partitions", "4", "--json"];
    assert_eq!(ok_json(&cluster.submit(&job))["status"], "succeeded");
    let emptied = eventually(Duration::from_secs(20), || children_of(driver).is_empty().then_some(()));
    assert!(emptied.is_some(), "the idle fleet is given back");
    std::thread::sleep(Duration::from_secs(1));
    let submitted = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let report = ok_json(&cluster.submit(&job));
    let id = report["job_id"].as_u64().unwrap();
    let (_, attempts) = http_get(ui, &format!("/api/v1/jobs/{id}/attempts"), None);
    let attempts: Value = serde_json::from_str(&attempts).unwrap();
    let first = attempts.as_array().unwrap().iter().filter_map(|a| a["launched_ms"].as_u64()).min().unwrap();
    let waited = Duration::from_millis(first.saturating_sub(submitted.as_millis() as u64));
    // 1 s of backlog, then an executor process's start (about a second here): never
    // the 10 s cooldown.
    assert!(waited < Duration::from_secs(5), "the first task started {waited:?} after the submission");
}

#[test]
fn executors_the_driver_started_die_with_it_even_by_kill_9() {
    let cluster = Cluster::start(&["--backend", "local", "--conf", "flint.executor.instances=2"]);
    let driver = cluster.driver.pid();
    cluster.wait_live(2);
    let executors = children_of(driver);
    assert_eq!(executors.len(), 2, "flint.executor.instances=2 without dynamic allocation: {executors:?}");
    // The secret reached them through a file, never their command line.
    for pid in &executors {
        let argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        assert!(!lossy(&argv).contains(SECRET), "the secret in argv: {}", lossy(&argv));
    }
    cluster.driver.signal("KILL");
    // At once: not after the executors would notice the connection gone (3 s).
    let orphans = eventually(Duration::from_secs(1), || executors.iter().all(|p| !alive(*p)).then_some(()));
    assert!(
        orphans.is_some(),
        "executors outlived the driver: {:?}",
        executors.iter().filter(|p| alive(**p)).collect::<Vec<_>>()
    );
}

#[test]
fn an_executor_process_that_exits_is_removed_at_once_with_its_status() {
    let cluster = Cluster::start(&["--backend", "local", "--conf", "flint.executor.instances=1"]);
    let driver = cluster.driver.pid();
    cluster.wait_live(1);
    let executor = children_of(driver)[0];
    let killed = std::time::Instant::now();
    assert!(
        std::process::Command::new("kill").args(["-9", &executor.to_string()]).status().unwrap().success()
    );
    let reason = eventually(Duration::from_secs(10), || {
        cluster.status()["executors"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|e| e["removed"].as_str().filter(|r| r.contains("signal 9")).map(str::to_owned))
    });
    let reason = reason.unwrap_or_else(|| panic!("no removal naming the signal: {}", cluster.status()));
    assert!(killed.elapsed() < Duration::from_secs(2), "noticed after {:?}: {reason}", killed.elapsed());
    // A fixed-size fleet is made whole again.
    cluster.wait_live(1);
}

#[test]
fn a_recurring_job_runs_on_its_period_and_never_overlaps() {
    let mut cluster = Cluster::start(&[]);
    cluster.executor(&["--cores", "2"]);
    cluster.wait_live(1);
    let job = ["examples/pi", "--conf", "points=2000000", "--partitions", "4"];
    let started = std::time::Instant::now();
    let out = cluster.submit(&[&job[..], &["--every", "1s", "--runs", "3", "--json"]].concat());
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    let reports: Vec<Value> =
        serde_json::Deserializer::from_slice(&out.stdout).into_iter().collect::<Result<_, _>>().unwrap();
    assert_eq!(reports.len(), 3, "{}", lossy(&out.stdout));
    let expected = ok_json(&flint(&[&["run"][..], &job, &["--json"]].concat()))["result"].clone();
    for report in &reports {
        assert_eq!(report["status"], "succeeded");
        assert_eq!(report["result"], expected);
    }
    // The third run started two periods after the first.
    assert!(started.elapsed() >= Duration::from_secs(2), "{:?}", started.elapsed());
    // Never two at once: each run ended before the next was submitted.
    let log = cluster.driver.log_text();
    let events: Vec<&str> = log
        .lines()
        .filter_map(|l| {
            if l.contains("job submitted") {
                Some("submitted")
            } else if l.contains("job succeeded") {
                Some("succeeded")
            } else {
                None
            }
        })
        .collect();
    assert_eq!(events, ["submitted", "succeeded"].repeat(3), "{log}");
    // A bad period is refused before anything runs.
    let out = cluster.submit(&[&job[..], &["--every", "0s"]].concat());
    assert_eq!(out.status.code(), Some(2), "{}", lossy(&out.stderr));
}

#[test]
fn executors_that_fail_at_start_every_time_stop_being_started_and_the_job_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let url_file = dir.path().join("url");
    let mut cmd =
        command(&["driver", "--app-id", APP, "--url-file", url_file.to_str().unwrap(), "--backend", "local"]);
    cmd.args(["--conf", "flint.dynamicAllocation.enabled=true"])
        .args(["--conf", "flint.dynamicAllocation.maxStartFailures=3"])
        .args(["--conf", "flint.dynamicAllocation.startBackoff=100ms"])
        .args(["--conf", "flint.dynamicAllocation.schedulerBacklogTimeout=100ms"])
        .env("FLINT_SECRET", SECRET)
        // Inherited by every executor it starts, each of which refuses it and exits 2.
        .env("FLINT_RESOURCE_PROFILE_ID", "not-a-number");
    let driver = Proc::spawn(cmd, dir.path().join("driver.log"));
    let url = eventually(Duration::from_secs(20), || read_url(&url_file)).expect("the driver prints its URL");
    let mut submit = command(&["submit", "--driver-url", &url, "examples/pi", "--partitions", "4", "--json"]);
    let out = submit.env("FLINT_SECRET", SECRET).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", lossy(&out.stderr));
    let report = json(&out);
    let reason = report["failure"]["reason"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(reason.contains("process exited with status 2"), "{report}");
    assert!(reason.contains("maxStartFailures"), "{report}");
    // Three starts, then no more however long.
    std::thread::sleep(Duration::from_secs(1));
    let starts = driver.log_text().matches("executor process started").count();
    assert_eq!(starts, 3, "{}", driver.log_text());
    let mut status = command(&["status", "--driver-url", &url, "--json"]);
    let status = json(&status.env("FLINT_SECRET", SECRET).output().unwrap());
    assert!(status["allocation_stopped"].as_str().is_some_and(|r| r.contains("status 2")), "{status}");
}

impl Cluster {
    /// An executor in a mount namespace of its own where the driver's input folder is
    /// an empty tmpfs: it cannot see the driver's files by path, as on another host.
    fn hidden_executor(&mut self, args: &[&str]) -> usize {
        let inner = self.executor_command(args);
        let mut cmd = std::process::Command::new("unshare");
        let inputs = self.dir.path().join("inputs");
        cmd.args(["-m", "sh", "-c", "mount -t tmpfs tmpfs \"$0\" && exec \"$@\""]).arg(&inputs);
        cmd.arg(inner.get_program()).args(inner.get_args());
        for (key, value) in inner.get_envs() {
            if let Some(value) = value {
                cmd.env(key, value);
            }
        }
        let n = self.executors.len();
        let log = self.dir.path().join(format!("executor-{n}.log"));
        self.executors.push(Proc::spawn(cmd, log));
        n
    }

    /// Every log line, and the status, as one text to search for secrets.
    fn everything_said(&self) -> String {
        let mut text = self.driver.log_text();
        for executor in &self.executors {
            text.push_str(&executor.log_text());
        }
        text.push_str(&self.status().to_string());
        text.push_str(&lossy(&self.client(&["status"]).stdout));
        text
    }
}

/// A scripted executor: registers, takes the tokens the driver hands it at bootstrap
/// (a running job's data token among them), and reads the driver's data service.
struct Spy {
    connection: quinn::Connection,
    _endpoint: quinn::Endpoint,
    tokens: Vec<flint_proto::Token>,
    _heartbeats: tokio::task::JoinHandle<()>,
}

impl Spy {
    async fn join(url: &str, id: &str) -> Spy {
        use flint_proto::wire::{DriverMessage, ExecutorMessage, Heartbeat, HelloReply, Registration, Role};
        let url: flint_net::DriverUrl = url.parse().unwrap();
        let secret = flint_net::Secret::new(SECRET);
        let (endpoint, connection) =
            flint_net::connect(&url, Duration::from_secs(5), Duration::from_secs(30)).await.unwrap();
        let (reply, mut send, mut recv) =
            flint_net::hello(&connection, &secret, Role::Executor, APP, Some(id.into()), None).await.unwrap();
        assert!(matches!(reply, HelloReply::Welcome { .. }), "{reply:?}");
        flint_net::write_frame(&mut send, &ExecutorMessage::FetchConfig { resource_profile_id: 0 })
            .await
            .unwrap();
        let Some(DriverMessage::AppConfig(app)) = flint_net::read_frame(&mut recv).await.unwrap() else {
            panic!("no app config")
        };
        let registration = Registration {
            host: "spy".into(),
            cores: 1,
            memory: 1 << 30,
            slots: 1,
            pid: 1,
            attributes: Default::default(),
            log_urls: Default::default(),
            shuffle: None,
        };
        flint_net::write_frame(&mut send, &ExecutorMessage::Register(registration)).await.unwrap();
        let answer = flint_net::read_frame::<DriverMessage>(&mut recv).await.unwrap();
        assert!(matches!(answer, Some(DriverMessage::Registered { .. })), "{answer:?}");
        // Alive as far as the driver can tell; the launches it sends wait unread.
        let beating = connection.clone();
        let heartbeats = tokio::spawn(async move {
            let mut stream = beating.open_uni().await.unwrap();
            loop {
                let beat = Heartbeat::default();
                if flint_net::write_frame(&mut stream, &beat).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        std::mem::forget((send, recv)); // the control stream stays open
        Spy { connection, _endpoint: endpoint, tokens: app.tokens, _heartbeats: heartbeats }
    }

    async fn read(&self, token: &str, path: &str) -> flint_proto::wire::InputReply {
        use flint_proto::wire::{DataToken, InputReply, Request};
        let (mut send, mut recv) = self.connection.open_bi().await.unwrap();
        let request =
            Request::ReadInput { token: DataToken(token.into()), path: path.into(), start: 0, len: 10 };
        flint_net::write_frame(&mut send, &request).await.unwrap();
        let _ = send.finish();
        let reply = flint_net::read_frame::<InputReply>(&mut recv).await.unwrap().unwrap();
        if let InputReply::Data { size } = reply {
            let data = flint_net::read_payload(&mut recv, size as usize).await.unwrap();
            assert_eq!(data.len() as u64, size);
        }
        reply
    }
}

#[test]
fn executors_that_cannot_see_an_input_read_it_through_the_driver_under_renewed_job_tokens() {
    use flint_proto::wire::{DataRefusal, InputReply};
    let mut cluster = Cluster::start(&[
        "--conf",
        "flint.security.credentials.flint.lifetime=3s",
        "--conf",
        "flint.security.credentials.renewalMargin=1s",
    ]);
    let file = cluster.dir.path().join("inputs/corpus.txt");
    corpus(&file, 2 << 20);
    let path = std::fs::canonicalize(&file).unwrap().to_str().unwrap().to_owned();
    cluster.hidden_executor(&["--cores", "1", "--executor-id", "a"]);
    cluster.hidden_executor(&["--cores", "1", "--executor-id", "b"]);
    cluster.wait_live(2);

    // By path, the executors find nothing: the job fails saying so.
    let shared = format!("file://{path}");
    let out = cluster.submit(&["examples/word-count", "--input", &shared, "--json"]);
    assert!(!out.status.success());
    let said = format!("{}{}", lossy(&out.stdout), lossy(&out.stderr));
    assert!(said.contains("No such file"), "{said}");

    // Through the driver, the exact answer `flint run` gives.
    let url = format!("flint://{path}");
    let expected =
        ok_json(&flint(&["run", "examples/word-count", "--input", &path, "--json"]))["result"].clone();
    let report =
        ok_json(&cluster.submit(&["examples/word-count", "--input", &url, "--partitions", "6", "--json"]));
    assert_eq!(report["result"], expected);

    // A file on the client's own disk, outside every root, goes with the job; the
    // driver keeps it while the job runs.
    let mine = cluster.dir.path().join("client.txt");
    corpus(&mine, 1 << 20);
    let expected =
        ok_json(&flint(&["run", "examples/word-count", "--input", mine.to_str().unwrap(), "--json"]));
    let report =
        ok_json(&cluster.submit(&["examples/word-count", "--input", mine.to_str().unwrap(), "--json"]));
    assert_eq!(report["result"], expected["result"]);
    let log = cluster.driver.log_text();
    let kept =
        log.lines().find(|l| l.contains("job files arriving")).expect("the driver says where it keeps them");
    let folder = kept.split("folder=").nth(1).unwrap().split_whitespace().next().unwrap();
    assert!(!std::path::Path::new(folder).exists(), "{folder} is removed once the job ended");

    // A job over several lifetimes of its token: 16 tasks of a second each, each
    // reading its split when it starts.
    let mut cmd = command(&["submit", "--driver-url", &cluster.url, &wasm("chaos"), "--input", &url]);
    cmd.args(["--partitions", "16", "--conf", "mode=sleep", "--conf", "secs=1", "--json"]);
    let job = cmd.env("FLINT_SECRET", SECRET).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let running = eventually(Duration::from_secs(20), || {
        let jobs = cluster.status()["jobs"].clone();
        jobs.as_array()?.iter().any(|j| j["state"] == "running").then_some(())
    });
    assert!(running.is_some(), "{}", cluster.status());

    let rt = tokio::runtime::Runtime::new().unwrap();
    let captured = rt.block_on(async {
        let spy = Spy::join(&cluster.url, "spy").await;
        let token = spy.tokens.iter().find(|t| t.job.is_some()).expect("the running job's token").clone();
        assert_eq!(token.service, "flint");
        assert!(matches!(spy.read(&token.secret, &path).await, InputReply::Data { size: 10 }));
        // Another file under the same roots is not this job's.
        let other = cluster.dir.path().join("inputs/other.txt");
        std::fs::write(&other, "not yours\n").unwrap();
        let other = std::fs::canonicalize(other).unwrap().to_str().unwrap().to_owned();
        assert!(matches!(
            spy.read(&token.secret, &other).await,
            InputReply::Refused(DataRefusal::NotTheJobs { .. })
        ));
        let mut forged = token.secret.clone().into_bytes();
        forged[3] ^= 1;
        let forged = String::from_utf8(forged).unwrap();
        assert_eq!(spy.read(&forged, &path).await, InputReply::Refused(DataRefusal::Forged));
        // A peer that keeps trying does not flood the driver's log (checked below).
        for _ in 0..40 {
            assert_eq!(spy.read(&forged, &path).await, InputReply::Refused(DataRefusal::Forged));
        }
        // Once its expiry passes, the captured token reads nothing.
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
        tokio::time::sleep(Duration::from_millis(token.expires_at_ms.saturating_sub(now) + 200)).await;
        assert_eq!(spy.read(&token.secret, &path).await, InputReply::Refused(DataRefusal::Expired));
        spy.connection.close(0u32.into(), b"done");
        token.secret
    });

    let report = ok_json(&job.wait_with_output().unwrap());
    assert_eq!(report["result"].as_array().unwrap().len(), 16, "{report}");
    let failures = report["task_failures"].to_string();
    assert!(!failures.contains("refused") && !failures.contains("cannot read"), "{failures}");
    let log = cluster.driver.log_text();
    let renewals = log.lines().filter(|l| l.contains("token renewed") && l.contains("service=flint")).count();
    assert!(renewals >= 3, "the flint tokens were renewed as they aged:\n{}", cluster.driver.log_text());
    let refusals = log.lines().filter(|l| l.contains("input read refused")).count();
    assert!((1..=20).contains(&refusals), "43 refused reads, at most 10 logged a minute: {refusals}");
    let said = cluster.everything_said();
    assert!(!said.contains(&captured), "a data token in a log or the status");
    assert!(!said.contains(SECRET), "the application secret in a log or the status");
}

/// moto's S3 (from PyPI, installed by `.ci/run`) on a free loopback port, enforcing
/// credentials once `setup.py` made the bucket, an IAM user and its key.
struct S3Server {
    _server: Proc,
    endpoint: String,
}

impl S3Server {
    fn start(dir: &std::path::Path) -> S3Server {
        let bin = common::root().join("target/pyvenv/bin/moto_server");
        assert!(bin.exists(), "{} is missing: `.ci/run` installs moto[server]", bin.display());
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut cmd = std::process::Command::new(bin);
        // Anonymous set-up (user, key, policy, bucket), then every request is checked.
        cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()]).env("INITIAL_NO_AUTH_ACTION_COUNT", "4");
        let server = Proc::spawn(cmd, dir.join("moto.log"));
        let up =
            eventually(Duration::from_secs(30), || std::net::TcpStream::connect(("127.0.0.1", port)).ok());
        assert!(up.is_some(), "moto did not start:\n{}", server.log_text());
        S3Server { _server: server, endpoint: format!("http://127.0.0.1:{port}") }
    }

    /// moto with the bucket `data` holding a corpus of `bytes` (also written to the
    /// file returned) as three objects under `corpus/`, and a token file for the `s3`
    /// provider: (server, corpus file, token file, the token).
    fn with_corpus(
        dir: &std::path::Path,
        bytes: usize,
    ) -> (S3Server, std::path::PathBuf, std::path::PathBuf, Value) {
        let s3 = S3Server::start(dir);
        let corpus_file = dir.join("corpus.txt");
        corpus(&corpus_file, bytes);
        let token = s3.python(S3_SETUP, &[corpus_file.to_str().unwrap()]);
        let token_file = dir.join("s3-token.json");
        std::fs::write(&token_file, &token).unwrap();
        (s3, corpus_file, token_file, serde_json::from_str(&token).unwrap())
    }

    /// Runs a boto3 script with the endpoint as its first argument.
    fn python(&self, script: &str, args: &[&str]) -> String {
        let python = common::root().join("target/pyvenv/bin/python");
        let out = std::process::Command::new(python)
            .args(["-c", script, &self.endpoint])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", lossy(&out.stderr));
        lossy(&out.stdout)
    }
}

/// Makes the bucket `data` and a user allowed S3; uploads the corpus (argv[2]) as three
/// objects under `corpus/` (cut at line ends, beside hidden ones) and one object elsewhere; prints the
/// user's key as a token provider's JSON.
const S3_SETUP: &str = r#"
import boto3, json, sys
ep, corpus = sys.argv[1], sys.argv[2]
anon = dict(endpoint_url=ep, region_name="us-east-1", aws_access_key_id="setup", aws_secret_access_key="setup")
iam = boto3.client("iam", **anon)
iam.create_user(UserName="flint")
key = iam.create_access_key(UserName="flint")["AccessKey"]
policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
iam.put_user_policy(UserName="flint", PolicyName="s3", PolicyDocument=json.dumps(policy))
boto3.client("s3", **anon).create_bucket(Bucket="data")
s3 = boto3.client("s3", endpoint_url=ep, region_name="us-east-1",
                  aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"])
lines = open(corpus, "rb").read().splitlines(keepends=True)
third = len(lines) // 3
for i, part in enumerate([lines[:third], lines[third:2 * third], lines[2 * third:]]):
    s3.put_object(Bucket="data", Key=f"corpus/part-{i}", Body=b"".join(part))
s3.put_object(Bucket="data", Key="elsewhere.txt", Body=b"not part of the corpus\n")
# What a folder's listing hides, a prefix's does too: a marker, a checksum, an
# uncommitted part under `_temporary/`.
for hidden in ["corpus/_SUCCESS", "corpus/.part-0.crc", "corpus/_temporary/part-9"]:
    s3.put_object(Bucket="data", Key=hidden, Body=b"hidden words never counted\n")
secret = {"access_key_id": key["AccessKeyId"], "secret_access_key": key["SecretAccessKey"]}
print(json.dumps({"secret": secret, "expires_in_s": 3600}))
"#;

#[test]
fn word_count_over_an_s3_prefix_reads_with_the_providers_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let (s3, corpus_file, token_file, token) = S3Server::with_corpus(dir.path(), 3 << 20);
    let secret_key = token["secret"]["secret_access_key"].as_str().unwrap().to_owned();

    let mut cluster = Cluster::start(&[
        "--conf",
        &format!("flint.s3.endpoint={}", s3.endpoint),
        "--conf",
        "flint.input.allowHttp=true",
        "--conf",
        &format!("flint.security.credentials.s3.file={}", token_file.display()),
    ]);
    // Credentials in the executors' environment would be refused: they are not used.
    for id in ["a", "b"] {
        let mut cmd = cluster.executor_command(&["--cores", "1", "--executor-id", id]);
        cmd.env("AWS_ACCESS_KEY_ID", "AKIAWRONG").env("AWS_SECRET_ACCESS_KEY", "wrong");
        let log = cluster.dir.path().join(format!("executor-{id}.log"));
        cluster.executors.push(Proc::spawn(cmd, log));
    }
    cluster.wait_live(2);

    let expected =
        ok_json(&flint(&["run", "examples/word-count", "--input", corpus_file.to_str().unwrap(), "--json"]));
    let report = ok_json(&cluster.submit(&[
        "examples/word-count",
        "--input",
        "s3://data/corpus/",
        "--partitions",
        "5",
        "--json",
    ]));
    assert_eq!(report["result"], expected["result"], "the three objects under the prefix, and nothing else");
    assert!(report["tasks"].as_u64().unwrap() >= 3, "{report}");

    // `flint run` reads the same objects with the same provider.
    let endpoint = format!("flint.s3.endpoint={}", s3.endpoint);
    let provider = format!("flint.security.credentials.s3.file={}", token_file.display());
    let run = ok_json(&flint(&[
        "run",
        "examples/word-count",
        "--input",
        "s3://data/corpus/",
        "--conf",
        &endpoint,
        "--conf",
        "flint.input.allowHttp=true",
        "--conf",
        &provider,
        "--json",
    ]));
    assert_eq!(run["result"], expected["result"]);

    // Globs over keys: `*` within a folder, `**` across them.
    for glob in ["s3://data/corpus/part-*", "s3://data/**/part-[0-9]"] {
        let report = ok_json(&cluster.submit(&["examples/word-count", "--input", glob, "--json"]));
        assert_eq!(report["result"], expected["result"], "{glob}");
    }
    let top = ok_json(&cluster.submit(&["examples/word-count", "--input", "s3://data/*.txt", "--json"]));
    assert_eq!(top["result"]["total_words"], 5, "only elsewhere.txt, not the corpus under its folder: {top}");

    // A key that names nothing, under no prefix either, is refused before any task.
    let out = cluster.submit(&["examples/word-count", "--input", "s3://data/missing", "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", lossy(&out.stderr));
    assert!(lossy(&out.stderr).contains("s3://data/missing"), "{}", lossy(&out.stderr));

    let said = cluster.everything_said();
    assert!(!said.contains(&secret_key), "the S3 secret key in a log or the status");
}

/// What the bucket `data` holds under a prefix (argv[4]), read with the user's key
/// (argv[2], argv[3]): each object's text by its name under the prefix, and how many
/// multipart uploads there are still open.
const S3_LIST: &str = r#"
import boto3, json, sys
ep, key, secret, prefix = sys.argv[1:5]
s3 = boto3.client("s3", endpoint_url=ep, region_name="us-east-1",
                  aws_access_key_id=key, aws_secret_access_key=secret)
found = s3.list_objects_v2(Bucket="data", Prefix=prefix).get("Contents", [])
objects = {o["Key"][len(prefix):]: s3.get_object(Bucket="data", Key=o["Key"])["Body"].read().decode()
           for o in found}
uploads = s3.list_multipart_uploads(Bucket="data", Prefix=prefix).get("Uploads", [])
print(json.dumps({"objects": objects, "uploads": len(uploads)}))
"#;

#[test]
fn map_reduce_parts_go_to_s3_committed_once_each_and_a_failed_job_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (s3, corpus_file, token_file, token) = S3Server::with_corpus(dir.path(), 2 << 20);
    let key = token["secret"].clone();
    let (key_id, secret_key) =
        (key["access_key_id"].as_str().unwrap(), key["secret_access_key"].as_str().unwrap());
    let list = |prefix: &str| -> Value {
        serde_json::from_str(&s3.python(S3_LIST, &[key_id, secret_key, prefix])).unwrap()
    };
    let endpoint = format!("flint.s3.endpoint={}", s3.endpoint);
    let provider = format!("flint.security.credentials.s3.file={}", token_file.display());
    let conf = ["--conf", &endpoint, "--conf", "flint.input.allowHttp=true", "--conf", &provider];
    let mut cluster = Cluster::start(&conf);
    cluster.executor(&["--cores", "1"]);
    cluster.executor(&["--cores", "1"]);
    cluster.wait_live(2);
    let reference =
        ok_json(&flint(&["run", "examples/word-count", "--input", corpus_file.to_str().unwrap(), "--json"]))
            ["result"]
            .clone();
    // The words of every part, each word once; `objects` must be exactly the four parts
    // and `_SUCCESS`.
    let words_of = |listed: &Value| -> u64 {
        let objects = listed["objects"].as_object().unwrap();
        let names: Vec<&str> = objects.keys().map(String::as_str).collect();
        assert_eq!(names, ["_SUCCESS", "part-00000", "part-00001", "part-00002", "part-00003"], "{listed}");
        assert_eq!(listed["uploads"], 0, "no upload left open: {listed}");
        let mut seen = std::collections::HashSet::new();
        let mut total = 0;
        for text in objects.values() {
            for line in text.as_str().unwrap().lines() {
                let (word, n) = line.split_once('\t').expect("word<TAB>count");
                assert!(seen.insert(word.to_owned()), "{word} in two lines");
                total += n.parse::<u64>().unwrap();
            }
        }
        total
    };

    // Each reducer's first attempt uploads 12 MiB of junk (a multipart upload under
    // way) and fails; only the retries' parts are committed, and nothing else is left.
    // Four reducers whose first attempts upload 12 MiB of junk and fail, into `output`.
    let failing_first = |output: &str, more: &[&str]| {
        let args = ["examples/word-count-mr", "--input", "s3://data/corpus/", "--reduce-partitions", "4"];
        let junk = ["--conf", "fail_first_attempt=true", "--conf", "fail_first_attempt_bytes=12582912"];
        cluster.submit(&[&args[..], &["--output", output, "--json"], &junk, more].concat())
    };
    let report = ok_json(&failing_first("s3://data/counts/", &[]));
    assert_eq!(report["result"], reference, "{report}");
    assert_eq!(report["task_failures"].as_array().unwrap().len(), 4, "{report}");
    assert_eq!(words_of(&list("counts/")), reference["total_words"].as_u64().unwrap());

    // The prefix holds a job's parts now: a second job naming it is refused before it runs.
    let again = cluster.submit(&[
        "examples/word-count-mr",
        "--input",
        "s3://data/corpus/",
        "--output",
        "s3://data/counts/",
    ]);
    assert_eq!(again.status.code(), Some(3), "{}", lossy(&again.stderr));
    assert!(lossy(&again.stderr).contains("of an earlier job"), "{}", lossy(&again.stderr));

    // A job that fails (no retry for the failing first attempts) leaves no `_SUCCESS`,
    // no part and no upload.
    let failed = failing_first("s3://data/failed/", &["--conf", "flint.task.maxFailures=1"]);
    assert!(!failed.status.success(), "{}", lossy(&failed.stderr));
    // Attempts the job's end killed discard their uploads as they stop, within seconds.
    let nothing = serde_json::json!({"objects": {}, "uploads": 0});
    let left = eventually(Duration::from_secs(5), || (list("failed/") == nothing).then_some(()));
    assert!(left.is_some(), "a failed job leaves nothing: {}", list("failed/"));

    // `flint run` writes to the store the same way, with the same provider.
    let run = ok_json(&flint(
        &[
            &["run", "examples/word-count-mr", "--input", corpus_file.to_str().unwrap()][..],
            &["--reduce-partitions", "4", "--output", "s3://data/run/", "--json"],
            &conf,
        ]
        .concat(),
    ));
    assert_eq!(run["result"], reference, "{run}");
    assert_eq!(words_of(&list("run/")), reference["total_words"].as_u64().unwrap());
    assert!(!cluster.everything_said().contains(secret_key), "the S3 secret key in a log or the status");
}

/// A CA, and certificates with their keys (PEM files in `dir`): `name` signed by the
/// CA, or self-signed when `signed` is false.
fn certificate(
    dir: &std::path::Path,
    name: &str,
    ca: Option<&rcgen::Issuer<'_, rcgen::KeyPair>>,
) -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap();
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let cert = match ca {
        Some(ca) => params.signed_by(&key, ca).unwrap(),
        None => params.self_signed(&key).unwrap(),
    };
    let (cert_file, key_file) = (dir.join(format!("{name}.pem")), dir.join(format!("{name}.key")));
    std::fs::write(&cert_file, cert.pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    (cert_file.to_str().unwrap().to_owned(), key_file.to_str().unwrap().to_owned())
}

#[test]
fn with_mutual_tls_only_peers_with_a_certificate_the_ca_signed_get_anything() {
    let dir = tempfile::tempdir().unwrap();
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.key_usages =
        vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::DigitalSignature];
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca_params.self_signed(&ca_key).unwrap().pem()).unwrap();
    let ca = rcgen::Issuer::new(ca_params, ca_key);
    let (cert, key) = certificate(dir.path(), "trusted", Some(&ca));
    let (stranger_cert, stranger_key) = certificate(dir.path(), "stranger", None);

    let mut cluster = Cluster::start(&["--client-ca-file", ca_file.to_str().unwrap()]);
    cluster.peer_env = vec![("FLINT_TLS_CERT".into(), cert), ("FLINT_TLS_KEY".into(), key)];
    cluster.executor(&["--cores", "1", "--executor-id", "trusted"]);
    cluster.wait_live(1);
    let report = ok_json(&cluster.submit(&["examples/noop", "--partitions", "4", "--json"]));
    assert_eq!(report["result"], 4);

    // The secret alone, or with a certificate the CA never signed: nothing.
    for (name, tls, says) in [
        ("bare", None, "requires a client certificate"),
        ("stranger", Some((&stranger_cert, &stranger_key)), "refused this peer's certificate"),
    ] {
        let mut cmd =
            command(&["executor", "--driver-url", &cluster.url, "--app-id", APP, "--executor-id", name]);
        cmd.args(["--connect-timeout", "2s"]).env("FLINT_SECRET", SECRET);
        let mut client = command(&["status", "--json", "--driver-url", &cluster.url]);
        client.env("FLINT_SECRET", SECRET);
        if let Some((cert, key)) = tls {
            cmd.args(["--tls-cert", cert, "--tls-key", key]);
            client.args(["--tls-cert", cert, "--tls-key", key]);
        }
        let out = cmd.output().unwrap();
        assert!(
            !out.status.success() && lossy(&out.stderr).contains(says),
            "{name} executor: {}",
            lossy(&out.stderr)
        );
        let out = client.output().unwrap();
        assert!(!out.status.success() && out.stdout.is_empty(), "{name} client: {}", lossy(&out.stdout));
        assert!(lossy(&out.stderr).contains(says), "{name} client: {}", lossy(&out.stderr));
    }
    let status = cluster.status();
    let ids: Vec<&str> =
        status["executors"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["trusted"], "{status}");
    let log = cluster.driver.log_text();
    assert!(!log.contains("executor_id=bare") && !log.contains("executor_id=stranger"), "{log}");
}

/// A file server that answers HEAD and ranged GETs, as object stores and CDNs do, on a
/// free loopback port, counting the requests that asked for a range.
fn serve_ranges(
    body: Vec<u8>,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>, tokio::runtime::Runtime) {
    serve_ranges_after(body, Duration::ZERO)
}

/// [`serve_ranges`], answering each ranged GET only after `stall`.
fn serve_ranges_after(
    body: Vec<u8>,
    stall: Duration,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>, tokio::runtime::Runtime) {
    use axum::http::{HeaderMap, StatusCode, header};
    use axum::response::IntoResponse;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let ranged = std::sync::Arc::new(AtomicUsize::new(0));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let url = format!("http://{}/data/corpus.txt", listener.local_addr().unwrap());
    let (body, counter) = (std::sync::Arc::new(body), ranged.clone());
    let handler = move |headers: HeaderMap| {
        let (body, counter) = (body.clone(), counter.clone());
        async move {
            let len = body.len();
            let range = headers.get(header::RANGE).and_then(|r| {
                r.to_str()
                    .ok()?
                    .strip_prefix("bytes=")?
                    .split_once('-')
                    .map(|(a, b)| (a.to_owned(), b.to_owned()))
            });
            match range {
                None => ([(header::CONTENT_LENGTH, len.to_string())], body.to_vec()).into_response(),
                Some((a, b)) => {
                    counter.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(stall).await;
                    let start: usize = a.parse().unwrap();
                    let end: usize = b.parse::<usize>().map_or(len - 1, |e| e.min(len - 1));
                    let content_range = format!("bytes {start}-{end}/{len}");
                    (
                        StatusCode::PARTIAL_CONTENT,
                        [(header::CONTENT_RANGE, content_range)],
                        body[start..=end].to_vec(),
                    )
                        .into_response()
                }
            }
        }
    };
    let app = axum::Router::new().route("/data/corpus.txt", axum::routing::get(handler));
    rt.spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, ranged, rt)
}

#[test]
fn an_http_input_cannot_reach_a_cloud_metadata_address_directly_or_by_redirect() {
    // A server that sends every request to the metadata address.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut stream in listener.incoming().flatten() {
            let mut head = [0u8; 4096];
            let _ = stream.read(&mut head);
            let _ = stream.write_all(
                b"HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/latest/meta-data/iam\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    let mut cluster = Cluster::start(&["--conf", "flint.input.allowHttp=true"]);
    cluster.executor(&["--cores", "1"]);
    cluster.wait_live(1);
    for url in
        [format!("http://127.0.0.1:{port}/data.txt"), "http://169.254.169.254/latest/meta-data/".to_owned()]
    {
        let out = cluster.submit(&["examples/word-count", "--input", &url, "--json"]);
        let stderr = lossy(&out.stderr);
        assert!(!out.status.success(), "{url}: {stderr}");
        assert!(stderr.contains("link-local or metadata address"), "{url}: {stderr}");
    }
}

#[test]
fn an_http_input_is_read_by_ranges_and_plain_http_needs_allowing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("corpus.txt");
    corpus(&file, 1 << 20);
    let (url, ranged, _server) = serve_ranges(std::fs::read(&file).unwrap());
    let mut cluster = Cluster::start(&["--conf", "flint.input.allowHttp=true"]);
    cluster.executor(&["--cores", "2"]);
    cluster.wait_live(1);
    let expected =
        ok_json(&flint(&["run", "examples/word-count", "--input", file.to_str().unwrap(), "--json"]));
    let report =
        ok_json(&cluster.submit(&["examples/word-count", "--input", &url, "--partitions", "4", "--json"]));
    assert_eq!(report["result"], expected["result"]);
    let reads = ranged.load(std::sync::atomic::Ordering::Relaxed);
    assert!((4..=8).contains(&reads), "four splits, a ranged read or two each: {reads}");

    // A driver that was not told to allow it refuses plain http.
    let strict = Cluster::start(&[]);
    let out = strict.submit(&["examples/word-count", "--input", &url, "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", lossy(&out.stderr));
    assert!(lossy(&out.stderr).contains("flint.input.allowHttp"), "{}", lossy(&out.stderr));
}

#[test]
fn a_server_that_ignores_ranges_is_read_whole_by_one_task_and_the_host_counts_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    corpus(&dir.path().join("corpus.txt"), 256 << 10);
    // Python's own server answers every GET whole, Range or not.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut cmd = std::process::Command::new(common::root().join("target/pyvenv/bin/python"));
    cmd.args(["-m", "http.server", &port.to_string(), "--bind", "127.0.0.1", "--directory"]).arg(dir.path());
    let _server = Proc::spawn(cmd, dir.path().join("http.log"));
    let up = eventually(Duration::from_secs(20), || std::net::TcpStream::connect(("127.0.0.1", port)).ok());
    assert!(up.is_some(), "python's http.server started");
    let ui = free_port();
    let mut cluster = Cluster::start(&["--conf", "flint.input.allowHttp=true", "--ui-port", &ui.to_string()]);
    cluster.executor(&["--cores", "2"]);
    cluster.wait_live(1);
    let file = dir.path().join("corpus.txt");
    let expected =
        ok_json(&flint(&["run", "examples/word-count", "--input", file.to_str().unwrap(), "--json"]));
    let url = format!("http://127.0.0.1:{port}/corpus.txt");
    // Planning finds the server answers no byte ranges: however many splits were asked
    // for, one task reads the file whole, once.
    let report =
        ok_json(&cluster.submit(&["examples/word-count", "--input", &url, "--partitions", "4", "--json"]));
    assert_eq!(report["result"], expected["result"], "{report}");
    assert_eq!((report["tasks"].as_u64(), report["attempts"].as_u64()), (Some(1), Some(1)), "{report}");
    // What the host measured of the task's input: every byte and line of the file.
    let job = report["job_id"].as_u64().unwrap();
    let (_, tasks) = http_get(ui, &format!("/api/v1/jobs/{job}/tasks"), None);
    let tasks: Value = serde_json::from_str(&tasks).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let metrics = &tasks[0]["metrics"];
    assert_eq!(metrics["input_bytes"].as_u64(), Some(text.len() as u64), "{tasks}");
    assert_eq!(metrics["input_records"].as_u64(), Some(text.lines().count() as u64), "{tasks}");
    assert!(metrics["read_us"].as_u64().unwrap() > 0, "{tasks}");
}

/// A command's connection ends with a goodbye the driver hears, not with silence it must
/// wait out: the driver counts a client's traffic when its connection ends, well within
/// the 3 s idle timeout that would otherwise end it.
#[test]
fn the_driver_hears_a_client_say_goodbye_as_it_exits() {
    let port = free_port();
    let cluster = Cluster::start(&["--ui-port", &port.to_string()]);
    let client_bytes = || {
        let text = http_get(port, "/metrics", None).1;
        let line = text
            .lines()
            .find(|l| l.starts_with("flint_network_bytes_total{peer=\"client\",direction=\"in\"}"));
        line.and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).unwrap_or_else(|| panic!("{text}"))
    };
    assert_eq!(client_bytes(), 0.0, "no client yet");
    assert!(cluster.status()["executors"].is_array());
    let heard = eventually(Duration::from_secs(1), || (client_bytes() > 0.0).then_some(()));
    assert!(heard.is_some(), "the driver still holds the connection of a client that exited");
}

#[test]
fn the_status_api_and_metrics_agree_with_flint_status_and_the_jobs_reports() {
    let port = free_port();
    let mut cluster = Cluster::start(&["--ui-port", &port.to_string()]);
    cluster.executor(&["--cores", "1", "--executor-id", "a"]);
    cluster.executor(&["--cores", "1", "--executor-id", "b"]);
    cluster.wait_live(2);
    let mut attempts = 0;
    for job in [
        &["examples/noop", "--partitions", "8", "--json"][..],
        &["examples/pi", "--partitions", "16", "--json"],
    ] {
        attempts += ok_json(&cluster.submit(job))["attempts"].as_u64().unwrap();
    }

    let (code, body) = http_get(port, "/api/v1/executors", None);
    assert_eq!(code, 200, "{body}");
    let api: Vec<Value> = serde_json::from_str(&body).unwrap();
    let status = cluster.status();
    let pick = |e: &Value| (e["id"].clone(), e["tasks_done"].clone(), e["slots"].clone(), e["state"].clone());
    let cli: Vec<_> = status["executors"].as_array().unwrap().iter().map(pick).collect();
    assert_eq!(api.iter().map(pick).collect::<Vec<_>>(), cli, "the records flint status --json prints");
    let (_, jobs) = http_get(port, "/api/v1/jobs", None);
    assert_eq!(serde_json::from_str::<Value>(&jobs).unwrap(), status["jobs"]);

    let (code, text) = http_get(port, "/metrics", None);
    assert_eq!(code, 200);
    // A histogram's buckets read as one sample, its sum and count as one each.
    let histogram = "flint_task_duration_seconds";
    let plain = text.lines().filter(|l| !l.starts_with('#') && !l.is_empty() && !l.starts_with(histogram));
    let samples = plain.count() + 3;
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap();
    assert_eq!(scrape.samples.len(), samples, "every line parses:\n{text}");
    let value = |name: &str, label: (&str, &str)| {
        let sample =
            scrape.samples.iter().find(|s| s.metric == name && s.labels.get(label.0) == Some(label.1));
        match sample.unwrap_or_else(|| panic!("no {name} {label:?}:\n{text}")).value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            ref other => panic!("{other:?}"),
        }
    };
    assert_eq!(value("flint_tasks_total", ("outcome", "succeeded")), attempts as f64);
    assert_eq!(value("flint_executors", ("state", "registered")), 2.0);
    assert_eq!(value("flint_jobs", ("state", "succeeded")), 2.0);
    assert_eq!(value("flint_executor_slots", ("executor", "a")), 1.0);
    let durations =
        scrape.samples.iter().find(|s| s.metric == "flint_task_duration_seconds").expect("a histogram");
    let prometheus_parse::Value::Histogram(buckets) = &durations.value else {
        panic!("{:?}", durations.value)
    };
    let inf = buckets.iter().find(|b| b.less_than == f64::INFINITY).expect("+Inf").count;
    assert_eq!(inf, attempts as f64, "every attempt's duration is counted once");
    assert!(buckets.windows(2).all(|w| w[0].count <= w[1].count), "cumulative buckets");
    for name in scrape.samples.iter().map(|s| &s.metric) {
        assert!(
            !name.contains("exec") || name.starts_with("flint_executor"),
            "ids stay out of names: {name}"
        );
    }
    assert!(!text.contains(SECRET) && !body.contains(SECRET));
    assert!(value("flint_network_bytes_total", ("peer", "executor")) > 0.0, "{text}");
    // What executors say in heartbeats: their instances' memory, their component cache.
    // Heartbeats carry them, so they may lag the jobs' end by a beat.
    // Each executor ran two jobs' tasks: all but its first of each job found their
    // component loaded; pi's instances are small. Heartbeats carry these, so they may
    // lag the jobs' end by a beat.
    let total = attempts as f64;
    let seen = eventually(Duration::from_secs(5), || {
        let text = http_get(port, "/metrics", None).1;
        let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap();
        let values = |name: &str| -> Vec<f64> {
            let samples = scrape.samples.iter().filter(|s| s.metric == name);
            samples
                .map(|s| match s.value {
                    prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Gauge(v) => v,
                    _ => f64::NAN,
                })
                .collect()
        };
        let high_water = values("flint_executor_instance_memory_high_water_bytes");
        let hits = values("flint_executor_component_cache_hits_total");
        let misses = values("flint_executor_component_cache_misses_total");
        let instances = values("flint_executor_instances_started_total");
        let all_in = hits.iter().sum::<f64>() + misses.iter().sum::<f64>() >= total;
        (high_water.len() == 2 && hits.len() == 2 && all_in).then_some((high_water, hits, misses, instances))
    });
    let (high_water, hits, misses, instances) = seen.expect("both executors' heartbeats say what they ran");
    assert!(high_water.iter().all(|b| *b > 0.0 && *b < 64.0 * 1024.0 * 1024.0), "{high_water:?}");
    assert!(misses.iter().sum::<f64>() <= 4.0, "hits {hits:?}, misses {misses:?}");
    // One slot each: noop's tasks reused one instance per executor, pi's combined into
    // one; 24 attempts, at most 4 instances.
    assert_eq!(instances.len(), 2, "{instances:?}");
    assert!(instances.iter().all(|n| (1.0..=2.0).contains(n)), "{instances:?} for {total} attempts");

    // Bound to loopback, it answers only requests addressed to loopback: a page whose
    // name was rebound to 127.0.0.1 sends its own name, and is refused.
    let raw = |request: &str| {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        response.split(' ').nth(1).and_then(|c| c.parse::<u16>().ok()).unwrap_or(0)
    };
    let get = |host: &str| {
        raw(&format!("GET /api/v1/status HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"))
    };
    assert_eq!(get("evil.example:80"), 403);
    assert_eq!(get(&format!("127.0.0.1:{port}")), 200);
    assert_eq!(get(&format!("[::1]:{port}")), 200);
    // Idle sockets past the server's connection limit cost a browser nothing: the
    // longest idle is closed for each new one. And a request whose headers never end is
    // dropped, not waited for.
    let idle: Vec<std::net::TcpStream> =
        (0..100).map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap()).collect();
    let started = std::time::Instant::now();
    assert_eq!(http_get(port, "/api/v1/status", None).0, 200);
    assert!(started.elapsed() < Duration::from_secs(3), "{:?} behind idle sockets", started.elapsed());
    drop(idle);

    // Reachable beyond loopback, it asks for the secret.
    let open = free_port();
    let exposed = Cluster::start(&["--ui-port", &open.to_string(), "--ui-bind", "0.0.0.0"]);
    assert_eq!(http_get(open, "/api/v1/status", None).0, 401);
    assert_eq!(http_get(open, "/metrics", Some("wrong")).0, 401);
    let (code, body) = http_get(open, "/api/v1/status", Some(SECRET));
    assert_eq!(
        (code, serde_json::from_str::<Value>(&body).unwrap()["app_id"].clone()),
        (200, Value::from(APP))
    );
    // A browser is given a credential once in the address: it keeps the UI's own token
    // (not the secret) as a cookie, and is sent to the same page without the token.
    assert_eq!(http_get(open, "/?token=wrong", None).0, 401);
    let (code, head, page) = http_get_with(open, &format!("/jobs/1?fragment=1&token={SECRET}"), "");
    assert_eq!(code, 303, "{page}");
    let header = |name: &str| {
        head.lines()
            .find_map(|l| {
                l.split_once(": ").filter(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.to_owned())
            })
            .unwrap_or_else(|| panic!("no {name} in {head}"))
    };
    assert_eq!(header("location"), "/jobs/1?fragment=1", "the address drops the token");
    let cookie = header("set-cookie");
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
    assert!(!cookie.contains(SECRET) && !head.contains(SECRET), "no secret in the answer: {head}");
    let pair = cookie.split(';').next().unwrap().to_owned();
    let (code, _, jobs) = http_get_with(open, "/api/v1/jobs", &format!("Cookie: {pair}\r\n"));
    assert_eq!((code, jobs.as_str()), (200, "[]"));
    let (code, _, page) = http_get_with(open, "/", &format!("Cookie: {pair}\r\n"));
    assert!(
        code == 200 && !page.contains(SECRET) && !page.contains(pair.split('=').nth(1).unwrap()),
        "{page}"
    );
    assert_eq!(
        http_get_with(open, "/api/v1/jobs", &format!("Cookie: flint_ui={SECRET}\r\n")).0,
        401,
        "the cookie takes the UI token, not the secret"
    );
    assert_eq!(http_get_with(open, "/api/v1/jobs", "Cookie: flint_ui=wrong\r\n").0, 401);
    // The UI token opens the page too, given once in the address.
    let token = pair.split_once('=').unwrap().1;
    assert_eq!(http_get_with(open, &format!("/?token={token}"), "").0, 303);
    drop(exposed);
}

#[test]
fn an_input_that_never_arrives_fails_its_task_at_the_deadline() {
    let (url, _, _server) = serve_ranges_after(b"one two\nthree\n".to_vec(), Duration::from_secs(3600));
    let mut cluster = Cluster::start(&["--conf", "flint.input.allowHttp=true"]);
    cluster.executor(&["--cores", "1"]);
    cluster.wait_live(1);
    let started = std::time::Instant::now();
    let out = cluster.submit(&[
        "examples/word-count",
        "--input",
        &url,
        "--conf",
        "flint.task.deadline=2s",
        "--conf",
        "flint.task.maxFailures=1",
        "--json",
    ]);
    assert!(!out.status.success());
    let report = json(&out);
    assert_eq!(report["task_failures"][0]["failure"]["kind"], "deadline", "{report}");
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    assert_eq!(cluster.live_executors().len(), 1, "the executor stays");
}

#[test]
fn executors_log_at_the_drivers_level_and_logs_can_be_json() {
    let mut cluster = Cluster::start(&["--conf", "flint.log.level=debug", "--log-format", "json"]);
    let mut cmd = cluster.executor_command(&["--cores", "1"]);
    cmd.env_remove("FLINT_LOG");
    let log = cluster.dir.path().join("executor-debug.log");
    cluster.executors.push(Proc::spawn(cmd, log));
    cluster.wait_live(1);
    ok_json(&cluster.submit(&["examples/noop", "--partitions", "4", "--json"]));
    let executor = cluster.executors[0].log_text();
    assert!(executor.contains("DEBUG"), "the executor took the driver's level:\n{executor}");
    let driver = cluster.driver.log_text();
    assert!(driver.lines().count() > 3, "{driver}");
    for line in driver.lines() {
        let record: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(record["level"].is_string() && record["fields"].is_object(), "{line}");
    }
    // FLINT_LOG on an executor wins over the driver's level.
    let mut cmd = cluster.executor_command(&["--cores", "1", "--executor-id", "quiet"]);
    cmd.env("FLINT_LOG", "warn");
    let quiet = cluster.dir.path().join("executor-quiet.log");
    cluster.executors.push(Proc::spawn(cmd, quiet));
    cluster.wait_live(2);
    ok_json(&cluster.submit(&["examples/noop", "--partitions", "4", "--json"]));
    let quiet = cluster.executors[1].log_text();
    assert!(!quiet.contains("DEBUG") && !quiet.contains("INFO"), "{quiet}");
}

#[path = "common/browser.rs"]
mod browser;

/// Every line of every file of an event log folder, decompressed.
fn event_log_text(folder: &std::path::Path) -> String {
    let mut files: Vec<_> = std::fs::read_dir(folder).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut text = String::new();
    for file in files {
        let bytes = zstd::stream::decode_all(std::fs::File::open(&file).unwrap()).unwrap();
        text.push_str(&String::from_utf8(bytes).unwrap());
    }
    text
}

#[test]
fn the_status_page_follows_the_cluster_live_and_history_shows_what_it_showed() {
    const TOKEN_SECRET: &str = "vault-token-7f3e9a1c";
    const PASSWORD: &str = "hunter2-do-not-show";
    let shots = common::root().join("target/ui");
    let events = tempfile::tempdir().unwrap();
    let token = events.path().join("vault.json");
    std::fs::write(&token, format!(r#"{{"secret": "{TOKEN_SECRET}", "expires_in_s": 3600}}"#)).unwrap();
    let logs = events.path().join("logs");
    let port = free_port();
    let mut cluster = Cluster::start(&[
        "--ui-port",
        &port.to_string(),
        "--conf",
        &format!("flint.eventLog.dir={}", logs.display()),
        "--conf",
        &format!("flint.security.credentials.vault.file={}", token.display()),
    ]);
    // A folder of its own, so that a's first task compiles the job's component as on a
    // new machine (not one the disk cache of earlier runs holds).
    let fresh = events.path().join("work-a");
    cluster.executor(&["--cores", "1", "--executor-id", "a", "--work-dir", fresh.to_str().unwrap()]);
    let doomed = cluster.executor(&["--cores", "1", "--executor-id", "b"]);
    cluster.wait_live(2);

    let browser = browser::Browser::start();
    let page = format!("http://127.0.0.1:{port}");
    browser.goto(&format!("{page}/"));
    let both = "return document.querySelectorAll('#executors tr[data-state=registered]').length === 2;";
    assert!(browser.wait_for(Duration::from_secs(10), both), "both executors listed:\n{}", browser.text());
    browser.screenshot(&shots.join("executors.png"));

    // Lost without a reload: the page's own state survives while the row changes.
    browser.eval("window.flintMark = 42; return null;");
    cluster.executors[doomed].signal("KILL");
    let lost = "const row = document.querySelector('#executor-b'); \
                return !!row && row.dataset.state === 'removed' && row.innerText.includes('heartbeat');";
    assert!(browser.wait_for(Duration::from_secs(15), lost), "b shows as lost:\n{}", browser.text());
    assert_eq!(browser.eval("return window.flintMark;"), Value::from(42), "the page was not reloaded");
    browser.screenshot(&shots.join("executor-lost.png"));

    let out = cluster.submit(&[
        "examples/chaos",
        "--partitions",
        "3",
        "--conf",
        "mode=panic",
        "--conf",
        "only_task=1",
        "--conf",
        "other_mode=ok",
        "--conf",
        &format!("password={PASSWORD}"),
        "--json",
    ]);
    assert!(!out.status.success(), "task 1 panics every time");
    let (_, jobs) = http_get(port, "/api/v1/jobs", None);
    let job = serde_json::from_str::<Value>(&jobs).unwrap()[0]["job"].as_u64().expect("the job is listed");

    // The failed task's page: the typed failure and the guest's backtrace.
    browser.goto(&format!("{page}/jobs/{job}/tasks/1"));
    let text = browser.text();
    for expected in ["trap", "chaos asked to panic in task 1", "Guest backtrace", "chaos.wasm!"] {
        assert!(text.contains(expected), "{expected:?} on the task's page:\n{text}");
    }
    browser.screenshot(&shots.join("failed-task.png"));
    browser.goto(&format!("{page}/jobs/{job}"));
    assert!(browser.text().contains("succeeded"), "the other tasks' rows:\n{}", browser.text());
    // The timeline: one bar per attempt, as the API lists them (task 1's four, the
    // others' one each if they began before the job failed), each where its executor
    // ran it.
    let (_, attempts) = http_get(port, &format!("/api/v1/jobs/{job}/attempts"), None);
    let attempts: Value = serde_json::from_str(&attempts).unwrap();
    let attempts = attempts.as_array().unwrap();
    let of_task = |i: u64| attempts.iter().filter(|a| a["index"] == i).count();
    assert!(of_task(1) == 4 && of_task(0) <= 1 && of_task(2) <= 1, "{attempts:?}");
    let bars = browser.eval(
        "return [...document.querySelectorAll('svg#timeline rect[data-task]')]\
         .map(r => r.dataset.task + '/' + r.dataset.attempt).sort().join(' ');",
    );
    let mut listed: Vec<String> =
        attempts.iter().map(|a| format!("{}/{}", a["index"], a["attempt"])).collect();
    listed.sort();
    assert_eq!(bars, Value::from(listed.join(" ")), "one bar per attempt");
    // The first attempt on the fresh executor waited for the component to compile: a
    // phase of its own at its bar's start, and a column of the task table.
    let compiled: Vec<&Value> =
        attempts.iter().filter(|a| a["compile_ms"].as_u64().is_some_and(|c| c > 0)).collect();
    assert_eq!(compiled.len(), 1, "{attempts:?}");
    let of = format!("{}/{}", compiled[0]["index"], compiled[0]["attempt"]);
    let phases = browser
        .eval("return [...document.querySelectorAll('svg#timeline rect.compile')].map(r => r.dataset.of);");
    assert_eq!(phases, serde_json::json!([of]), "the compile drawn on its attempt");
    let header = browser.eval("return document.querySelector('#tasks tr').innerText;");
    assert!(header.as_str().unwrap().contains("Compile"), "{header}");
    for a in attempts {
        let (launched, ended) = (a["launched_ms"].as_u64().unwrap(), a["ended_ms"].as_u64().unwrap());
        assert!(launched <= ended && a["executor"] == "a", "{a}");
    }
    // The summary's quantiles, and task 1's four identical failures folded into one.
    let summary = browser.eval("return document.querySelector('#summary-duration').innerText;");
    assert!(summary.as_str().unwrap().starts_with("Duration"), "{summary}");
    let folded = browser.eval(
        "return [...document.querySelectorAll('#failures details')].map(d => d.querySelector('summary').innerText);",
    );
    assert_eq!(folded.as_array().map(Vec::len), Some(1), "{folded}");
    assert!(folded[0].as_str().unwrap().contains("4 attempts"), "{folded}");
    assert_eq!(browser.eval("return document.querySelectorAll('pre.backtrace').length;"), Value::from(1));
    browser.eval("document.querySelector('#failures details').open = true; return null;");
    browser.screenshot(&shots.join("job.png"));
    // Times on every record of the API.
    let (_, listed_jobs) = http_get(port, "/api/v1/jobs", None);
    let listed_jobs: Value = serde_json::from_str(&listed_jobs).unwrap();
    assert!(listed_jobs[0]["started_ms"].as_u64().is_some() && listed_jobs[0]["ended_ms"].as_u64().is_some());
    // The configuration, with what names a credential redacted.
    browser.goto(&format!("{page}/config"));
    let text = browser.text();
    assert!(text.contains("flint.eventLog.dir") && text.contains(&logs.display().to_string()), "{text}");
    assert!(text.contains("flint.security.credentials.vault.file\t*********(redacted)"), "{text}");
    // Every key not set, with the value in force; the versions it runs.
    assert!(
        text.contains("flint.task.maxFailures\t4") && text.contains("flint.cores.max\t(no bound)"),
        "{text}"
    );
    assert!(
        text.contains(&format!("Flint\t{}", env!("CARGO_PKG_VERSION"))) && text.contains("flint:task@0."),
        "{text}"
    );
    let defaults = browser.eval("return document.querySelectorAll('#defaults td:first-child').length;");
    let set = browser.eval("return document.querySelectorAll('#config td:first-child').length;");
    let keys = (defaults.as_u64().unwrap() + set.as_u64().unwrap()) as usize;
    assert!(keys >= flint_proto::Settings::KEYS.len(), "every key once: {defaults} + {set}");
    browser.screenshot(&shots.join("config.png"));

    // A map/reduce job: its two stages as the report, the API, the page and, later,
    // history show them.
    let input = cluster.dir.path().join("inputs/mr.txt");
    corpus_of(&input, 256 << 10, 500);
    let mr = ok_json(&cluster.submit(&[
        "examples/word-count-mr",
        "--input",
        input.to_str().unwrap(),
        "--partitions",
        "3",
        "--reduce-partitions",
        "2",
        "--json",
    ]));
    let (_, listed) = http_get(port, "/api/v1/jobs", None);
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let mr_job = listed.as_array().unwrap().iter().find(|j| j["job"] == mr["job_id"]).expect("listed");
    assert_eq!(mr_job["stages"], mr["stages"], "the API's stages are the report's: {mr_job}");
    assert_eq!(mr["stages"].as_array().map(Vec::len), Some(2), "{mr}");
    // What executor a read and wrote, summed over its attempts (its maps read the whole
    // input and wrote the shuffle), on the API and in its row.
    let (_, executors) = http_get(port, "/api/v1/executors", None);
    let executors: Value = serde_json::from_str(&executors).unwrap();
    let a = executors.as_array().unwrap().iter().find(|e| e["id"] == "a").expect("a listed");
    // (The stage's figure is the tracker's: each partition's size kept to within 10%.)
    let stage = mr["stages"][0]["shuffle_write_bytes"].as_u64().unwrap() as f64;
    let wrote = a["shuffle_write_bytes"].as_u64().unwrap() as f64;
    assert!(a["input_bytes"].as_u64() >= Some(256 << 10), "{a}");
    assert!(wrote > 0.0 && (wrote / stage - 1.0).abs() < 0.15, "{a} beside the stage's {stage}");
    browser.goto(&format!("{page}/"));
    let header = browser.eval("return document.querySelector('#executors tr').innerText;");
    let row = browser.eval("return document.querySelector('#executor-a').innerText;");
    assert!(
        header.as_str().unwrap().contains("Shuffle written") && row.as_str().unwrap().contains(" KiB"),
        "{row}"
    );
    browser.goto(&format!("{page}/jobs/{}", mr["job_id"]));
    let drawn = browser.eval(
        "return [document.querySelectorAll('svg#stages-dag g.stage.succeeded').length, \
         [...document.querySelectorAll('svg#stages-dag line.edge')].map(l => l.dataset.from + '>' + l.dataset.to), \
         document.querySelectorAll('table#stages tr[data-stage]').length];",
    );
    assert_eq!(
        drawn,
        json!([2, ["0>1"], 2]),
        "two stages drawn, the shuffle between them:\n{}",
        browser.text()
    );
    browser.screenshot(&shots.join("stages.png"));

    // What the live API says, to compare with history after the driver is gone.
    let api = |base: &str, path: &str| -> Value {
        let (code, body) = http_get_at(base, path);
        assert_eq!(code, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    };
    let live = format!("127.0.0.1:{port}");
    let paths = [
        "/api/v1/executors".to_owned(),
        "/api/v1/jobs".into(),
        format!("/api/v1/jobs/{job}/tasks"),
        format!("/api/v1/jobs/{job}/failures"),
        format!("/api/v1/jobs/{job}/attempts"),
        "/api/v1/config".into(),
        // The map/reduce job's tasks succeeded at once, saying nothing: the event log
        // writes them as batches, and history must draw them as live did.
        format!("/api/v1/jobs/{}/attempts", mr["job_id"]),
        format!("/api/v1/jobs/{}/tasks", mr["job_id"]),
    ];
    let seen: Vec<Value> = paths.iter().map(|p| api(&live, p)).collect();
    // What each job's page draws: its timeline's bars and its stages.
    const DRAWING: &str = "return [...document.querySelectorAll('svg#timeline rect[data-task], svg#timeline rect.compile, svg#timeline line[data-executor], svg#stages-dag g.stage')]\
                           .map(r => r.outerHTML).join('');";
    let drawn: Vec<(Value, Value)> = [Value::from(job), mr["job_id"].clone()]
        .into_iter()
        .map(|id| {
            browser.goto(&format!("{page}/jobs/{id}"));
            let drawing = browser.eval(DRAWING);
            assert!(drawing.as_str().is_some_and(|d| d.contains("data-task")), "job {id} drawn: {drawing}");
            (id, drawing)
        })
        .collect();
    let mut shown = String::new();
    for path in [
        "/",
        &format!("/jobs/{job}"),
        &format!("/jobs/{job}/tasks/1"),
        "/metrics",
        "/api/v1/status",
        "/config",
        "/api/v1/config",
    ] {
        shown.push_str(&http_get(port, path, None).1);
    }
    for v in &seen {
        shown.push_str(&v.to_string());
    }

    assert!(shown.contains("\nflint_event_log_dropped_events_total 0\n"), "the event log kept up:\n{shown}");

    // History while the application runs: listed as running.
    let history_port = free_port();
    let mut history_cmd =
        command(&["history", logs.to_str().unwrap(), "--ui-port", &history_port.to_string()]);
    history_cmd.stdout(Stdio::null());
    let _history = common::Proc::spawn(history_cmd, cluster.dir.path().join("history.log"));
    let history = format!("127.0.0.1:{history_port}");
    let running = eventually(Duration::from_secs(10), || {
        let apps = api(&history, "/api/v1/applications");
        (apps[0]["app_id"] == APP).then_some(apps[0]["running"].clone())
    });
    assert_eq!(running, Some(Value::Bool(true)), "its log is not closed yet");

    // The driver stops; history shows the same executors, jobs, tasks and failures.
    cluster.driver.signal("TERM");
    assert_eq!(cluster.driver.wait(Duration::from_secs(20)), Some(0));
    let apps = api(&history, "/api/v1/applications");
    assert_eq!(apps[0]["running"], Value::Bool(false), "{apps}");
    let folder = apps[0]["id"].as_str().unwrap().to_owned();
    let base = format!("/history/{folder}");
    let logged: Vec<Value> = paths.iter().map(|p| api(&history, &format!("{base}{p}"))).collect();
    let executor = |e: &Value| {
        let keep =
            ["id", "host", "cores", "memory", "slots", "tasks_done", "tasks_failed", "backend", "added_ms"];
        keep.iter().map(|k| e[*k].clone()).collect::<Vec<_>>()
    };
    let executors = |v: &Value| v.as_array().unwrap().iter().map(executor).collect::<Vec<_>>();
    assert_eq!(executors(&logged[0]), executors(&seen[0]), "executors");
    // The one still registered at the end ended with the application; b as it was lost.
    let removed = |v: &Value| {
        v.as_array().unwrap().iter().map(|e| (e["id"].clone(), e["removed"].clone())).collect::<Vec<_>>()
    };
    let live_a = seen[0].as_array().unwrap().iter().find(|e| e["id"] == "a").unwrap();
    assert_eq!(live_a["removed"], Value::Null);
    assert!(live_a["tasks_done"].as_u64().unwrap() >= 2, "{live_a}");
    let b_lost = seen[0].as_array().unwrap().iter().find(|e| e["id"] == "b").unwrap()["removed"].clone();
    assert_eq!(
        removed(&logged[0]),
        vec![(Value::from("a"), Value::from("the application ended")), (Value::from("b"), b_lost)],
        "{}",
        logged[0]
    );
    let job_row = |j: &Value| {
        (
            j["job"].clone(),
            j["name"].clone(),
            j["state"].clone(),
            j["progress"]["total"].clone(),
            j["progress"]["done"].clone(),
            j["progress"]["failed_attempts"].clone(),
            j["stages"].clone(),
        )
    };
    let jobs = |v: &Value| v.as_array().unwrap().iter().map(job_row).collect::<Vec<_>>();
    assert_eq!(jobs(&logged[1]), jobs(&seen[1]), "jobs");
    assert_eq!(logged[2], seen[2], "the job's tasks");
    assert_eq!(logged[3], seen[3], "the job's failures");
    assert_eq!(logged[4], seen[4], "the job's attempts");
    assert_eq!(logged[5], seen[5], "the configuration");
    assert_eq!(seen[6].as_array().map(Vec::len), Some(5), "the map/reduce job's five attempts: {}", seen[6]);
    assert_eq!(logged[6], seen[6], "the map/reduce job's attempts");
    assert_eq!(logged[7], seen[7], "the map/reduce job's tasks");
    assert_eq!(seen[3].as_array().unwrap().len(), 4, "task 1 failed four times: {}", seen[3]);

    // Every job's page draws the same bars and stages from the log as it did live.
    for (id, live) in &drawn {
        browser.goto(&format!("http://{history}{base}/jobs/{id}"));
        assert_eq!(&browser.eval(DRAWING), live, "job {id}'s timeline and stages in history");
    }
    browser.goto(&format!("http://{history}{base}/jobs/{job}/tasks/1"));
    let text = browser.text();
    assert!(text.contains("chaos.wasm!") && text.contains("history; finished"), "{text}");
    browser.screenshot(&shots.join("history-failed-task.png"));
    browser.goto(&format!("http://{history}{base}/"));
    let text = browser.text();
    assert!(text.contains("0 live") && !text.contains("registered"), "a closed log shows none live:\n{text}");
    browser.goto(&format!("http://{history}/"));
    assert!(browser.text().contains(APP), "{}", browser.text());
    // Every link of the history's pages answers.
    let links = browser.eval("return [...document.querySelectorAll('a')].map(a => a.getAttribute('href'));");
    let mut pages: Vec<String> =
        links.as_array().unwrap().iter().map(|l| l.as_str().unwrap().to_owned()).collect();
    browser.goto(&format!("http://{history}{base}/jobs/{job}"));
    let links = browser.eval("return [...document.querySelectorAll('a')].map(a => a.getAttribute('href'));");
    pages.extend(links.as_array().unwrap().iter().map(|l| l.as_str().unwrap().to_owned()));
    for link in pages {
        let (code, body) = http_get_at(&history, &link);
        assert_eq!(code, 200, "{link}: {body}");
    }
    for path in ["/", &format!("{base}/"), &format!("{base}/jobs/{job}")] {
        shown.push_str(&http_get_at(&history, path).1);
    }

    // Nothing secret anywhere: not the application's secret, not a token, not a job's
    // configuration.
    let log = event_log_text(&logs.join(&folder));
    for event in [
        "application_start",
        "executor_added",
        "executor_removed",
        "job_start",
        "task_end",
        "application_end",
    ] {
        assert!(log.contains(&format!("\"event\":\"{event}\"")), "{event} in the event log:\n{log}");
    }
    assert!(log.lines().all(|l| l.starts_with("{\"v\":1,")), "versioned lines:\n{log}");
    for secret in [SECRET, TOKEN_SECRET, PASSWORD] {
        assert!(!shown.contains(secret), "{secret} shown");
        assert!(!log.contains(secret), "{secret} in the event log");
    }
}

/// `GET path` from `host:port`.
fn http_get_at(at: &str, path: &str) -> (u16, String) {
    let port = at.rsplit(':').next().unwrap().parse().unwrap();
    http_get(port, path, None)
}

#[test]
fn files_sent_with_jobs_are_bounded_per_job_and_on_the_drivers_disk() {
    let mut cluster = Cluster::start(&[
        "--conf",
        "flint.driver.maxUploadSize=1m",
        "--conf",
        "flint.driver.maxUploadsHeld=1m",
    ]);
    cluster.executor(&["--cores", "1"]);
    cluster.wait_live(1);
    let big = cluster.dir.path().join("big.txt");
    corpus(&big, 2 << 20);
    let out = cluster.submit(&["examples/word-count", "--input", big.to_str().unwrap(), "--json"]);
    assert!(!out.status.success());
    assert!(lossy(&out.stderr).contains("flint.driver.maxUploadSize"), "{}", lossy(&out.stderr));

    // One job's files held while it runs leave no room for another's.
    let (first, second) = (cluster.dir.path().join("first.txt"), cluster.dir.path().join("second.txt"));
    corpus(&first, 700 << 10);
    corpus(&second, 700 << 10);
    let mut cmd = command(&["submit", "--driver-url", &cluster.url, &wasm("chaos")]);
    cmd.args([
        "--input",
        first.to_str().unwrap(),
        "--partitions",
        "1",
        "--conf",
        "mode=sleep",
        "--conf",
        "secs=3",
    ]);
    let sleeping =
        cmd.env("FLINT_SECRET", SECRET).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let running = eventually(Duration::from_secs(20), || {
        let jobs = cluster.status()["jobs"].clone();
        jobs.as_array()?.iter().any(|j| j["state"] == "running").then_some(())
    });
    assert!(running.is_some(), "{}", cluster.status());
    let word_count = ["examples/word-count", "--input", second.to_str().unwrap(), "--json"];
    let out = cluster.submit(&word_count);
    assert!(!out.status.success());
    assert!(lossy(&out.stderr).contains("flint.driver.maxUploadsHeld"), "{}", lossy(&out.stderr));
    assert!(sleeping.wait_with_output().unwrap().status.success());
    // Its files went with it: there is room again.
    let expected =
        ok_json(&flint(&["run", "examples/word-count", "--input", second.to_str().unwrap(), "--json"]));
    assert_eq!(ok_json(&cluster.submit(&word_count))["result"], expected["result"]);
}

/// A job starts while its file still arrives, each task reading its range once it is
/// there; a file that stops arriving fails the job naming it, and its missing part is
/// never read as the zeros of a file made at its announced size. A scripted client,
/// since `flint submit` always sends whole files.
#[test]
fn a_job_runs_while_its_file_arrives_and_one_that_stops_fails_it_by_name() {
    use flint_proto::wire::{Chunk, HelloReply, Request, Role, Submission, SubmitInput, SubmitReply};
    let port = free_port();
    let mut cluster = Cluster::start(&["--ui-port", &port.to_string()]);
    cluster.executor(&["--cores", "1"]);
    cluster.wait_live(1);
    // 2.2 MB in two splits: the first (and its lookahead) within the first 1.5 MB sent.
    let text = "alpha beta\n".repeat(200_000).into_bytes();
    let sent = 1_500_000;
    let component = std::fs::read(wasm("word_count")).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (progress, report) = rt.block_on(async {
        let url: flint_net::DriverUrl = cluster.url.parse().unwrap();
        let (_endpoint, connection) = flint_net::connect_as(
            &url,
            Duration::from_secs(10),
            Duration::from_secs(30),
            None,
            flint_net::WhenRefused::GiveUp,
            flint_net::Traffic::Bulk,
        )
        .await
        .unwrap();
        let secret = flint_net::Secret::new(SECRET);
        let welcomed = flint_net::hello(&connection, &secret, Role::Client, "", None, None).await.unwrap();
        assert!(matches!(welcomed.0, HelloReply::Welcome { .. }));
        let (mut send, mut recv) = connection.open_bi().await.unwrap();
        let submission = Submission {
            manifest: flint_proto::Manifest { name: "arriving".into(), ..Default::default() },
            component_size: component.len() as u64,
            config: Default::default(),
            inputs: vec![SubmitInput::Upload { name: "words.txt".into(), size: text.len() as u64 }],
            partitions: Some(2),
            every: None,
        };
        flint_net::write_frame(&mut send, &Request::Submit(Box::new(submission))).await.unwrap();
        flint_net::write_payload(&mut send, &component).await.unwrap();
        for piece in text[..sent].chunks(1 << 16) {
            flint_net::write_frame(&mut send, &Chunk(piece.to_vec())).await.unwrap();
        }
        let accepted = flint_net::read_frame::<SubmitReply>(&mut recv).await.unwrap();
        assert!(matches!(accepted, Some(SubmitReply::Accepted { .. })), "{accepted:?}");
        // Then nothing more: the driver waits out flint.network.timeout (3 s here).
        let mut progress = Vec::new();
        loop {
            match flint_net::read_frame::<SubmitReply>(&mut recv).await.unwrap() {
                Some(SubmitReply::Progress(p)) => progress.push(p),
                Some(SubmitReply::Done(report)) => break (progress, report),
                other => panic!("unexpected {other:?}"),
            }
        }
    });
    assert!(progress.iter().any(|p| p.done == 1), "the first split ran on the bytes that came: {progress:?}");
    let failure = format!("{:?}", report.outcome.unwrap_err());
    assert!(failure.contains("words.txt") && failure.contains("stopped arriving"), "{failure}");
    assert!(failure.contains("nothing came for 3s"), "{failure}");

    // The driver is none the worse: the same file sent whole counts every word.
    let whole = cluster.dir.path().join("words.txt");
    std::fs::write(&whole, &text).unwrap();
    let out = cluster.submit(&["examples/word-count", "--input", whole.to_str().unwrap(), "--json"]);
    assert_eq!(json(&out)["result"]["total_words"], 400_000, "{}", lossy(&out.stderr));
    // The metrics count the whole upload once, not the one that stopped, and every byte
    // of both jobs' reads that the driver served.
    let text_len = text.len() as f64;
    let metrics = http_get(port, "/metrics", None).1;
    let transferred = |path: &str| {
        let series = format!("flint_transfer_bytes_total{{path=\"{path}\"}} ");
        let line = metrics.lines().find_map(|l| l.strip_prefix(&series));
        line.and_then(|v| v.parse::<f64>().ok()).unwrap_or_else(|| panic!("no {series}in\n{metrics}"))
    };
    assert_eq!(transferred("upload"), text_len, "{metrics}");
    assert!(
        transferred("input_served") >= 1.5 * text_len,
        "both jobs' first split, the second's last: {metrics}"
    );
}

/// A map/reduce word count whose reduce tasks hold back 1.5 s once they have their
/// input, over a corpus of `vocabulary` words (a wide one makes slices too big to ride
/// in the maps' reports, so that reducers read them from the holders' files).
fn paused_map_reduce(
    cluster: &Cluster,
    reduces: &str,
    vocabulary: usize,
) -> (std::process::Child, Vec<String>) {
    let input = cluster.dir.path().join("inputs/corpus.txt");
    corpus_of(&input, 3 << 20, vocabulary);
    let input = input.to_str().unwrap().to_owned();
    let args = [
        "examples/word-count-mr",
        "--input",
        &input,
        "--partitions",
        "6",
        "--reduce-partitions",
        reduces,
        "--conf",
        "reduce_pause_ms=1500",
        "--json",
    ];
    let mut cmd = command(&[&["submit"][..], &args].concat());
    cmd.args(["--driver-url", &cluster.url]).env("FLINT_SECRET", SECRET);
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    (child, vec![input])
}

/// The running job's done count once every one of its six maps is done.
fn wait_for_maps(cluster: &Cluster) {
    let done = eventually(Duration::from_secs(30), || {
        let jobs = cluster.status()["jobs"].as_array().unwrap().clone();
        jobs.iter()
            .any(|j| j["state"] == "running" && j["progress"]["done"].as_u64() >= Some(6))
            .then_some(())
    });
    assert!(done.is_some(), "the maps ended: {}", cluster.status());
}

/// The reference answer: `word-count` over the same input, in process.
fn word_count_of(input: &str) -> Value {
    ok_json(&flint(&["run", "examples/word-count", "--input", input, "--json"]))["result"].clone()
}

#[test]
fn a_killed_executor_costs_exactly_the_maps_it_held_and_the_answer_stays_exact() {
    let mut cluster = Cluster::start(&[]);
    let work = |n: usize| cluster.dir.path().join(format!("work-{n}")).to_string_lossy().into_owned();
    let (w0, w1) = (work(0), work(1));
    cluster.executor(&["--cores", "2", "--executor-id", "keep", "--work-dir", &w0]);
    cluster.executor(&["--cores", "2", "--executor-id", "doomed", "--work-dir", &w1]);
    cluster.wait_live(2);
    let (child, inputs) = paused_map_reduce(&cluster, "4", 3000);
    wait_for_maps(&cluster);
    // Reducers hold their input now; none has ended: what `doomed` has done is maps.
    let held = cluster.executor_status("doomed")["tasks_done"].as_u64().unwrap();
    assert!(held > 0, "both executors ran maps: {}", cluster.status());
    cluster.executors[1].signal("KILL");
    let report = ok_json(&child.wait_with_output().unwrap());
    assert_eq!(report["result"], word_count_of(&inputs[0]));
    assert_eq!(report["maps_rerun"], held, "exactly the maps it held ran again: {report}");
    // Its stages say where: the map stage ran those again, the reduce stage none.
    let stages = report["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 2, "{report}");
    assert_eq!((&stages[0]["kind"], &stages[1]["kind"]), (&json!("shuffle"), &json!("result")), "{report}");
    assert_eq!((&stages[0]["tasks"], &stages[1]["tasks"]), (&json!(6), &json!(4)), "{report}");
    assert_eq!(stages[1]["parents"], json!([0]), "{report}");
    assert_eq!((&stages[0]["rerun_tasks"], &stages[1]["rerun_tasks"]), (&json!(held), &json!(0)), "{report}");
    assert!(stages[0]["attempts"].as_u64() >= Some(6 + held), "{report}");
    assert!(stages[0]["shuffle_write_bytes"].as_u64() > Some(0), "{report}");
    assert_eq!(stages[0]["shuffle_write_bytes"], stages[1]["shuffle_read_bytes"], "{report}");
    // The status says so too, beside the job.
    let jobs = cluster.status()["jobs"].clone();
    assert_eq!(jobs[0]["progress"]["outputs_lost"], held, "{jobs}");
    // The survivor's shuffle files went with the job.
    let left: Vec<_> = std::fs::read_dir(&w0)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("flint-shuffle-"))
        .flat_map(|e| std::fs::read_dir(e.path()).unwrap().flatten().map(|f| f.file_name()))
        .filter(|name| name != "lock")
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// `draws` over six generated partitions on two executors, `doomed` killed once its
/// maps are done and the reducers hold their input: the job's report and how many maps
/// `doomed` had run.
fn draws_losing_an_executor(mode: &str) -> (Value, u64) {
    let mut cluster = Cluster::start(&[]);
    cluster.executor(&["--cores", "2", "--executor-id", "keep"]);
    cluster.executor(&["--cores", "2", "--executor-id", "doomed"]);
    cluster.wait_live(2);
    let args = ["submit", "examples/draws", "--partitions", "6", "--reduce-partitions", "4", "--json"];
    let mut cmd = command(&args);
    let mode = format!("mode={mode}");
    cmd.args(["--conf", &mode, "--conf", "reduce_pause_ms=1500", "--driver-url", &cluster.url]);
    let child =
        cmd.env("FLINT_SECRET", SECRET).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    wait_for_maps(&cluster);
    let held = cluster.executor_status("doomed")["tasks_done"].as_u64().unwrap();
    assert!(held > 0, "both executors ran maps: {}", cluster.status());
    cluster.executors[1].signal("KILL");
    let out = child.wait_with_output().unwrap();
    (json(&out), held)
}

#[test]
fn a_map_that_draws_random_numbers_draws_the_same_ones_when_it_runs_again() {
    // Its random source is seeded from the job and the partition: the maps run again
    // write what the lost ones wrote, so the reducers' input is one consistent whole.
    let (report, held) = draws_losing_an_executor("random");
    assert_eq!(report["status"], "succeeded", "{report}");
    assert_eq!(report["maps_rerun"], held, "{report}");
    assert_eq!(report["result"]["count"], 60_000, "{report}");
}

#[test]
fn a_map_that_writes_other_records_when_it_runs_again_fails_its_job_never_mixes() {
    // The wall clock: no rerun repeats it, so the job stops rather than join outputs of
    // two different runs of one map.
    let (report, _) = draws_losing_an_executor("clock");
    assert_eq!(report["status"], "failed", "{report}");
    assert_eq!(report["failure"]["reason"]["kind"], "nondeterministic-map", "{report}");
    assert!(report["failure"]["task"].as_u64().unwrap() < 6, "names a map task: {report}");
}

#[test]
fn sigterm_hands_an_executors_map_outputs_over_and_no_map_runs_again() {
    let mut cluster = Cluster::start(&[]);
    cluster.executor(&["--cores", "2", "--executor-id", "keep"]);
    cluster.executor(&["--cores", "2", "--executor-id", "leaving"]);
    cluster.wait_live(2);
    // Eight reducers in waves of four, over slices too big to ride inline: those that
    // start after the hand-over read the copies `keep` made.
    let (child, inputs) = paused_map_reduce(&cluster, "8", 1_000_000);
    wait_for_maps(&cluster);
    // "leaving" leaves, unless the scheduler placed every map on "keep": then that one
    // does, and "leaving" adopts what it held.
    let maps_of = |id: &str| cluster.executor_status(id)["tasks_done"].as_u64().unwrap();
    let (index, id) = if maps_of("leaving") > 0 { (1, "leaving") } else { (0, "keep") };
    let held = maps_of(id);
    assert!(held > 0, "{id} ran maps: {}", cluster.status());
    cluster.executors[index].signal("TERM");
    let report = ok_json(&child.wait_with_output().unwrap());
    assert_eq!(report["result"], word_count_of(&inputs[0]));
    assert_eq!(report["maps_rerun"], 0, "{report}");
    assert_eq!(report["outputs_handed_over"], held, "every map output it held: {report}");
    assert_eq!(report["task_failures"], serde_json::json!([]), "no fetch failed: {report}");
    let status = cluster.executor_status(id);
    assert_eq!(status["removed"], "decommissioned", "{status}");
    assert_eq!(cluster.executors[index].wait(Duration::from_secs(10)), Some(0), "it left cleanly");
}

#[test]
fn dynamic_allocation_gives_back_executors_holding_map_outputs_without_a_rerun() {
    let cluster = Cluster::start(&[
        "--backend",
        "local",
        "--conf",
        "flint.dynamicAllocation.enabled=true",
        "--conf",
        "flint.dynamicAllocation.maxExecutors=4",
        "--conf",
        "flint.dynamicAllocation.executorIdleTimeout=1s",
        "--conf",
        "flint.dynamicAllocation.schedulerBacklogTimeout=200ms",
        "--conf",
        "flint.dynamicAllocation.cooldown=0s",
        "--conf",
        "flint.executor.cores=1",
    ]);
    let driver = cluster.driver.pid();
    // Twelve slow maps grow the fleet to four; two reducers keep two of them busy while
    // the other two, idle and holding map outputs, are given back.
    let job = [
        "examples/draws",
        "--partitions",
        "12",
        "--reduce-partitions",
        "2",
        "--conf",
        "map_pause_ms=1500",
        "--conf",
        "reduce_pause_ms=6000",
        "--json",
    ];
    let report = ok_json(&cluster.submit(&job));
    assert_eq!(report["result"]["count"], 120_000, "every record once: {report}");
    assert_eq!(report["maps_rerun"], 0, "{report}");
    assert_eq!(report["task_failures"], serde_json::json!([]), "no fetch failed: {report}");
    assert!(report["outputs_handed_over"].as_u64() >= Some(2), "two executors handed theirs over: {report}");
    let status = cluster.status();
    let started = status["executors"].as_array().unwrap().len();
    assert_eq!(started, 4, "the fleet grew to four: {status}");
    // Idle and holding nothing once the job ended, every executor goes.
    let gone = eventually(Duration::from_secs(8), || children_of(driver).is_empty().then_some(()));
    assert!(gone.is_some(), "executors left: {}", cluster.status());
    for e in cluster.status()["executors"].as_array().unwrap() {
        assert_eq!(e["removed"], "decommissioned", "{e}");
    }
}

#[test]
fn shuffle_files_past_the_disk_budget_fail_their_job_and_the_executor_serves_on() {
    let mut cluster = Cluster::start(&[]);
    let work = cluster.dir.path().join("work");
    let w = work.to_string_lossy().into_owned();
    cluster.executor(&["--cores", "2", "--work-dir", &w, "--conf", "flint.shuffle.maxDiskSize=1m"]);
    cluster.wait_live(1);
    // 60 MB of random records to sort: far past the executor's 1 MiB of shuffle files.
    let sort = [
        "examples/sort",
        "--partitions",
        "3",
        "--reduce-partitions",
        "2",
        "--conf",
        "records_per_map=200000",
    ];
    let refused = cluster.submit(&[&sort[..], &["--json"]].concat());
    let report = json(&refused);
    assert_eq!(report["status"], "failed", "{report}");
    let reason = &report["failure"]["reason"];
    assert_eq!(
        (&reason["kind"], &reason["key"]),
        (&Value::from("disk-full"), &Value::from("flint.shuffle.maxDiskSize")),
        "{report}"
    );
    // The executor serves on, and each job's files give their room back when it ends:
    // twenty jobs in a row fit where their outputs together would not.
    let input = cluster.dir.path().join("inputs/corpus.txt");
    corpus_of(&input, 2 << 20, 200_000);
    let input = input.to_str().unwrap();
    let reference = word_count_of(input);
    for run in 0..20 {
        let args = ["examples/word-count-mr", "--input", input, "--partitions", "4", "--json"];
        let report = ok_json(&cluster.submit(&args));
        assert_eq!(report["result"], reference, "run {run}");
    }
    assert_eq!(cluster.status()["executors"].as_array().unwrap().len(), 1);
}

#[test]
fn on_a_one_gib_tmpfs_twenty_shuffle_jobs_fit_and_one_needing_two_fails_as_disk_full() {
    let mut cluster = Cluster::start(&[]);
    let local = cluster.dir.path().join("local");
    std::fs::create_dir(&local).unwrap();
    let local = local.to_str().unwrap().to_owned();
    // The executor alone sees a 1 GiB tmpfs at its local directory: a mount namespace
    // of its own, inside a user namespace, so no root is needed.
    let inner = cluster.executor_command(&["--cores", "2", "--conf", &format!("flint.local.dir={local}")]);
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["--user", "--map-root-user", "--mount", "sh", "-c"])
        .arg(r#"mount -t tmpfs -o size=1g flint-shuffle "$0" && exec "$@""#)
        .arg(&local)
        .arg(inner.get_program())
        .args(inner.get_args());
    for (key, value) in inner.get_envs() {
        if let Some(value) = value {
            cmd.env(key, value);
        }
    }
    cluster.executors.push(Proc::spawn(cmd, cluster.dir.path().join("executor-0.log")));
    cluster.wait_live(1);
    let pid = cluster.executors[0].child.id();
    let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
    assert!(
        mounts.lines().any(|l| l.contains(&format!(" {local} ")) && l.contains("tmpfs")),
        "the executor's local directory is its tmpfs:\n{mounts}"
    );
    // Random values of a kilobyte do not compress: each map writes about 100 MB.
    let draws = |maps: &str| {
        let args = ["examples/draws", "--partitions", maps, "--reduce-partitions", "2", "--json"];
        cluster.submit(&[&args[..], &["--conf", "records=100000", "--conf", "pad_bytes=1000"]].concat())
    };
    // Twenty jobs of about 200 MB each, 4 GB together on a 1 GiB disk: each job's files
    // are gone when it ends, or a later one would not fit.
    for run in 0..20 {
        let report = ok_json(&draws("2"));
        assert_eq!(report["result"]["count"], 200_000, "run {run}: {report}");
    }
    // One that needs 2 GB fails as disk-full, before the disk fills, naming the key.
    let report = json(&draws("20"));
    assert_eq!(report["status"], "failed", "{report}");
    let reason = &report["failure"]["reason"];
    assert_eq!(reason["kind"], "disk-full", "{report}");
    let key = reason["key"].as_str().unwrap_or_default();
    assert!(["flint.shuffle.maxDiskSize", "flint.local.dir.minFree"].contains(&key), "{report}");
    // The executor serves on, as it was.
    let report = ok_json(&draws("2"));
    assert_eq!(report["result"]["count"], 200_000, "{report}");
    let executors = cluster.status()["executors"].as_array().unwrap().clone();
    assert_eq!(executors.len(), 1, "{executors:?}");
    assert!(executors[0]["removed"].is_null(), "{executors:?}");
    let log = cluster.executors[0].log_text();
    assert!(!log.contains("No space left"), "the disk never filled:\n{log}");
}

#[test]
fn a_job_holds_its_output_directory_until_it_ends() {
    let (cluster, _shared, input, output) = cluster_writing_parts();
    let args = ["submit", "examples/word-count-mr", "--input", input.to_str().unwrap(), "--partitions", "2"];
    let first = command(
        &[&args[..], &["--output", output.to_str().unwrap(), "--conf", "reduce_pause_ms=1500"]].concat(),
    )
    .args(["--driver-url", &cluster.url, "--json"])
    .env("FLINT_SECRET", SECRET)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let claimed = eventually(Duration::from_secs(20), || output.join("_temporary").exists().then_some(()));
    assert!(claimed.is_some(), "the first job claimed the directory");
    // A second job naming the same directory while the first runs: refused, and the
    // first is untouched.
    let second = cluster.submit(&[&args[1..], &["--output", output.to_str().unwrap()]].concat());
    assert_eq!(second.status.code(), Some(3), "{}", lossy(&second.stderr));
    assert!(
        lossy(&second.stderr).contains("_temporary: another job is writing there"),
        "{}",
        lossy(&second.stderr)
    );
    let report = json(&first.wait_with_output().unwrap());
    assert_eq!(report["status"], "succeeded", "{report}");
    let names = common::names_in(&output);
    assert_eq!(names[0], "_SUCCESS", "{names:?}");
    assert!(names[1..].iter().all(|n| n.starts_with("part-")), "no _temporary left: {names:?}");
}

/// The map output files (`data` or `index`) an executor with this work dir holds.
fn map_files(work: &std::path::Path, extension: &str) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(work)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("flint-shuffle-"))
        .flat_map(|e| std::fs::read_dir(e.path()).unwrap().flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with("job-"))
        .flat_map(|e| std::fs::read_dir(e.path()).unwrap().flatten().map(|f| f.path()))
        .filter(|p| p.extension().is_some_and(|x| x == extension))
        .collect()
}

#[test]
fn a_corrupted_map_output_fails_its_checksum_runs_again_and_the_answer_stays_exact() {
    let mut cluster = Cluster::start(&[]);
    let work = cluster.dir.path().join("work");
    let w = work.to_string_lossy().into_owned();
    cluster.executor(&["--cores", "2", "--work-dir", &w]);
    cluster.wait_live(1);
    // Eight reducers on two slots: six wait while the first two hold back.
    let (child, inputs) = paused_map_reduce(&cluster, "8", 1_000_000);
    wait_for_maps(&cluster);
    let data = map_files(&work, "data");
    assert_eq!(data.len(), 6, "one data file per map: {data:?}");
    let victim = &data[0];
    let size = std::fs::metadata(victim).unwrap().len() as usize;
    std::fs::write(victim, vec![0x5a; size]).unwrap();
    let report = ok_json(&child.wait_with_output().unwrap());
    assert_eq!(report["result"], word_count_of(&inputs[0]));
    assert_eq!(report["maps_rerun"], 1, "the one map whose file was spoilt: {report}");
    let failures = report["task_failures"].as_array().unwrap();
    assert!(
        failures.iter().any(|f| f["failure"]["kind"] == "fetch-failed"
            && f["failure"]["reason"].as_str().unwrap().contains("checksum")),
        "{report}"
    );
}

#[test]
fn an_index_that_lies_about_its_sizes_fails_its_map_and_the_executor_serves_on() {
    let mut cluster = Cluster::start(&[]);
    let work = cluster.dir.path().join("work");
    let w = work.to_string_lossy().into_owned();
    cluster.executor(&["--cores", "2", "--work-dir", &w]);
    cluster.wait_live(1);
    let (child, inputs) = paused_map_reduce(&cluster, "8", 1_000_000);
    wait_for_maps(&cluster);
    let indexes = map_files(&work, "index");
    assert_eq!(indexes.len(), 6, "one index per map: {indexes:?}");
    // Every offset from the first partition's end on says 32 TiB: still in order, the
    // same length, but past the data file.
    let mut index = std::fs::read(&indexes[0]).unwrap();
    let reduces = u32::from_le_bytes(index[8..12].try_into().unwrap()) as usize;
    for at in 1..=reduces {
        index[12 + at * 8..20 + at * 8].copy_from_slice(&(1u64 << 45).to_le_bytes());
    }
    std::fs::write(&indexes[0], index).unwrap();
    let report = ok_json(&child.wait_with_output().unwrap());
    assert_eq!(report["result"], word_count_of(&inputs[0]));
    assert_eq!(report["maps_rerun"], 1, "the one map whose index lies: {report}");
    let failures = report["task_failures"].as_array().unwrap();
    assert!(
        failures.iter().any(|f| f["failure"]["kind"] == "fetch-failed"
            && f["failure"]["reason"].as_str().unwrap().contains("-byte data file")),
        "{report}"
    );
    // The executor that read the lie is the one that served the rest.
    assert!(alive(cluster.executors[0].pid()), "{}", cluster.executors[0].log_text());
    assert_eq!(cluster.live_executors().len(), 1);
}

#[test]
fn an_executor_serves_map_outputs_only_to_a_peer_with_the_secret_and_the_jobs_token() {
    use flint_proto::wire::{
        OutputReply, OutputRequest, PeerHello, PeerHelloReply, PeerRequest, SliceRefusal, SliceReply,
        SliceRequest,
    };
    let mut cluster = Cluster::start(&[]);
    cluster.executor(&["--cores", "2"]);
    cluster.wait_live(1);
    let (child, _) = paused_map_reduce(&cluster, "4", 3000);
    wait_for_maps(&cluster);
    let (addr, fingerprint) = shuffle_endpoint(&cluster.executors[0].log_text());
    let job = cluster.status()["jobs"].as_array().unwrap()[0]["job"].as_u64().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        let config = flint_net::pinned_client_config(fingerprint, Duration::from_secs(5)).unwrap();
        let hello = |secret: &str, conn: &quinn::Connection| PeerHello {
            protocol_version: flint_proto::wire::PROTOCOL_VERSION,
            app_id: APP.into(),
            // Executors prove the executor key made from the secret to each other.
            proof: flint_net::proof(&flint_net::Secret::new(secret.as_bytes()).executor_key(), conn),
        };
        // Without the application secret, nothing.
        let conn = endpoint.connect_with(config.clone(), addr, "flint-executor").unwrap().await.unwrap();
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        flint_net::write_frame(&mut send, &hello("not-the-secret-at-all", &conn)).await.unwrap();
        let reply = flint_net::read_frame::<PeerHelloReply>(&mut recv).await.unwrap();
        assert!(
            matches!(reply, Some(PeerHelloReply::Rejected(flint_proto::wire::Rejection::NotAuthenticated))),
            "{reply:?}"
        );
        // With it: requests are still checked against the job's token.
        let conn = endpoint.connect_with(config, addr, "flint-executor").unwrap().await.unwrap();
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        flint_net::write_frame(&mut send, &hello(SECRET, &conn)).await.unwrap();
        let reply = flint_net::read_frame::<PeerHelloReply>(&mut recv).await.unwrap();
        assert_eq!(reply, Some(PeerHelloReply::Welcome));
        let ask = |job: u64, token: [u8; 32]| SliceRequest {
            job: flint_proto::JobId(job),
            token,
            partition: 0,
            maps: vec![0, 1, 2],
        };
        for (request, expected) in [
            (ask(job, [7; 32]), SliceRefusal::BadToken(flint_proto::JobId(job))),
            (ask(job + 40, [7; 32]), SliceRefusal::UnknownJob(flint_proto::JobId(job + 40))),
        ] {
            let (mut send, mut recv) = conn.open_bi().await.unwrap();
            flint_net::write_frame(&mut send, &PeerRequest::Slices(request)).await.unwrap();
            let _ = send.finish();
            let reply = flint_net::read_frame::<SliceReply>(&mut recv).await.unwrap();
            assert_eq!(reply, Some(SliceReply::Refused(expected)));
        }
        // Whole map outputs (what an adopter copies) are behind the same token.
        let whole = |job: u64| OutputRequest { job: flint_proto::JobId(job), token: [7; 32], map: 0 };
        for (request, expected) in [
            (whole(job), SliceRefusal::BadToken(flint_proto::JobId(job))),
            (whole(job + 40), SliceRefusal::UnknownJob(flint_proto::JobId(job + 40))),
        ] {
            let (mut send, mut recv) = conn.open_bi().await.unwrap();
            flint_net::write_frame(&mut send, &PeerRequest::Output(request)).await.unwrap();
            let _ = send.finish();
            let reply = flint_net::read_frame::<OutputReply>(&mut recv).await.unwrap();
            assert_eq!(reply, Some(OutputReply::Refused(expected)));
        }
    });
    // The job itself was not disturbed.
    let report = ok_json(&child.wait_with_output().unwrap());
    assert_eq!(report["status"], "succeeded");
    assert_eq!(report["maps_rerun"], 0);
}

#[test]
fn map_reduce_over_three_executors_reads_every_holder_and_equals_word_count() {
    // The executors write part files where the driver and they all see them, and log
    // each reducer's request they serve.
    let shared = tempfile::tempdir().unwrap();
    let roots = format!("flint.output.roots={}", shared.path().display());
    let mut cluster = Cluster::start(&["--conf", &roots]);
    for n in 0..3 {
        let mut cmd = cluster.executor_command(&["--cores", "1", "--conf", &roots]);
        cmd.env("FLINT_LOG", "info,flint_executor=debug");
        let log = cluster.dir.path().join(format!("executor-{n}.log"));
        cluster.executors.push(Proc::spawn(cmd, log));
    }
    cluster.wait_live(3);
    let served = |cluster: &Cluster| -> usize {
        cluster.executors.iter().map(|e| e.log_text().matches("serving a reducer's request").count()).sum()
    };
    let submit = |cluster: &Cluster, input: &str, more: &[&str]| {
        let args =
            ["examples/word-count-mr", "--input", input, "--partitions", "9", "--reduce-partitions", "6"];
        cluster.submit(&[&args[..], more].concat())
    };

    // A narrow vocabulary: every slice is small enough to ride in its map's report, so
    // no reducer asks a holder for anything.
    let narrow = cluster.dir.path().join("inputs/narrow.txt");
    corpus(&narrow, 3 << 20);
    let narrow = narrow.to_str().unwrap();
    let report = ok_json(&submit(&cluster, narrow, &["--json"]));
    assert_eq!(report["result"], word_count_of(narrow));
    assert_eq!(served(&cluster), 0, "tiny slices came with the launches");

    // A wide one: slices stay in the holders' files and every reducer reads its peers'.
    let input = cluster.dir.path().join("inputs/corpus.txt");
    corpus_of(&input, 3 << 20, 1_000_000);
    let input = input.to_str().unwrap();
    let output = shared.path().join("counts");
    let report = ok_json(&submit(&cluster, input, &["--output", output.to_str().unwrap(), "--json"]));
    let reference = word_count_of(input);
    assert_eq!(report["result"], reference);
    assert!(served(&cluster) >= 6, "each reducer asked its peers: {}", served(&cluster));
    let names = common::names_in(&output);
    assert_eq!(
        names,
        ["_SUCCESS", "part-00000", "part-00001", "part-00002", "part-00003", "part-00004", "part-00005"]
    );
    let total: u64 = names[1..]
        .iter()
        .flat_map(|n| {
            std::fs::read_to_string(output.join(n)).unwrap().lines().map(str::to_owned).collect::<Vec<_>>()
        })
        .map(|l| l.split_once('\t').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, reference["total_words"].as_u64().unwrap());
    // Collected instead: the same parts, in partition order, come back to the client
    // (each part is larger than a report carries, so the driver fetched it as a block).
    let files: Vec<u8> = names[1..].iter().flat_map(|n| std::fs::read(output.join(n)).unwrap()).collect();
    assert!(files.len() / 6 > 64 << 10, "{} bytes", files.len());
    let collected = submit(&cluster, input, &["--collect"]);
    assert!(collected.status.success(), "{}", lossy(&collected.stderr));
    assert!(collected.stdout == files, "stdout holds the parts in order");
    // Outside the driver's output roots: refused before anything runs.
    let outside = cluster.dir.path().join("elsewhere");
    let refused = submit(&cluster, input, &["--output", outside.to_str().unwrap()]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("outside flint.output.roots"), "{refused:?}");
    assert!(!outside.exists());
    assert_eq!((&report["tasks"], &report["maps_rerun"]), (&Value::from(15), &Value::from(0)), "{report}");
    // Maps ran on every executor, so every reducer read from two peers and itself.
    let status = cluster.status();
    for e in status["executors"].as_array().unwrap() {
        assert!(e["tasks_done"].as_u64().unwrap() > 0, "{status}");
    }
}

#[test]
fn folders_and_globs_are_inputs_on_the_driver_and_from_the_client() {
    let mut cluster = Cluster::start(&[]);
    cluster.executor(&["--cores", "2"]);
    cluster.wait_live(1);
    let logs = cluster.dir.path().join("inputs/logs");
    std::fs::create_dir_all(&logs).unwrap();
    corpus(&logs.join("a.txt"), 400_000);
    corpus_of(&logs.join("b.txt"), 200_000, 50);
    std::fs::write(logs.join("_SUCCESS"), "marker\n").unwrap();
    let at = |p: &str| logs.join(p).to_string_lossy().into_owned();
    let expected = ok_json(&flint(&[
        "run",
        "examples/word-count",
        "--input",
        &at("a.txt"),
        "--input",
        &at("b.txt"),
        "--json",
    ]))["result"]
        .clone();
    for input in [format!("flint://{}", at("")), format!("flint://{}", at("*.txt")), at(""), at("[ab].txt")] {
        let report = ok_json(&cluster.submit(&["examples/word-count", "--input", &input, "--json"]));
        assert_eq!(report["result"], expected, "{input}");
    }
    // Outside the driver's roots, a glob is refused before it is listed.
    let out = cluster.submit(&["examples/word-count", "--input", "flint:///etc/*", "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", lossy(&out.stderr));
    assert!(lossy(&out.stderr).contains("flint.input.roots"), "{}", lossy(&out.stderr));
}

/// A driver that answers every hello with `rejection`, as a driver of another version
/// or one whose application stopped says it: the refusals no real driver of this build
/// can be made to give. Returns its URL.
fn refusing_driver(rt: &tokio::runtime::Runtime, rejection: flint_proto::wire::Rejection) -> String {
    use flint_proto::wire::{Hello, HelloReply};
    let _entered = rt.enter();
    let identity = flint_net::Identity::generate(vec!["localhost".into()]).unwrap();
    let bind = "127.0.0.1:0".parse().unwrap();
    let endpoint = flint_net::server_endpoint(bind, &identity, Duration::from_secs(5), None).unwrap();
    let port = endpoint.local_addr().unwrap().port();
    rt.spawn(async move {
        while let Some(incoming) = endpoint.accept().await {
            let rejection = rejection.clone();
            tokio::spawn(async move {
                let heard = flint_net::gate::hear_hello::<Hello>(incoming, 64 << 10).await;
                if let Ok((connection, mut send, _recv, _hello)) = heard {
                    let _ = flint_net::write_frame(&mut send, &HelloReply::Rejected(rejection)).await;
                    let _ = send.finish();
                    connection.closed().await;
                }
            });
        }
    });
    flint_net::DriverUrl { host: "127.0.0.1".into(), port, fingerprint: identity.fingerprint() }.to_string()
}

/// `flint submit` of the slow job through a relay that goes dark once the job runs,
/// interrupted twice: the second time only after it said it asks for the cancel, which
/// cannot be answered now. The job it leaves running, and what the command did.
fn second_ctrl_c_on_a_dark_link(cluster: &Cluster) -> (u64, Output) {
    use std::io::BufRead;
    let url: flint_net::DriverUrl = cluster.url.parse().unwrap();
    let relay = common::relay::Relay::start(format!("{}:{}", url.host, url.port).parse().unwrap());
    let through_relay = flint_net::DriverUrl { port: relay.addr.port(), ..url }.to_string();
    let mut cmd = command(&[&["submit"][..], &SLOW_PI].concat());
    cmd.args(["--driver-url", &through_relay]).env("FLINT_SECRET", SECRET);
    let mut slow = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let stderr = std::io::BufReader::new(slow.stderr.take().unwrap());
    let (said, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || stderr.lines().map_while(Result::ok).try_for_each(|line| said.send(line)));
    let id = eventually(Duration::from_secs(20), || {
        let status = cluster.status();
        status["jobs"].as_array()?.iter().find(|j| j["state"] == "running")?["job"].as_u64()
    })
    .expect("the slow job runs");
    eventually(Duration::from_secs(20), || catches_ctrl_c(slow.id()).then_some(()))
        .expect("Ctrl-C is caught");
    relay.go_dark();
    let interrupt = || {
        let int = std::process::Command::new("kill").args(["-INT", &slow.id().to_string()]).status();
        assert!(int.unwrap().success());
    };
    interrupt();
    let mut heard = Vec::new();
    while !heard.iter().any(|l: &String| l.contains("cancelling job")) {
        match lines.recv_timeout(Duration::from_secs(20)) {
            Ok(line) => heard.push(line),
            Err(e) => panic!("no word of the cancel after a Ctrl-C ({e}); it said: {heard:?}"),
        }
    }
    interrupt();
    let exited = eventually(Duration::from_secs(20), || slow.try_wait().unwrap());
    if exited.is_none() {
        let _ = slow.kill();
        panic!("a second Ctrl-C did not end flint submit; it said: {heard:?}");
    }
    let mut out = slow.wait_with_output().unwrap();
    heard.extend(lines.iter());
    out.stderr = heard.join("\n").into_bytes();
    (id, out)
}

/// The codes of one of the README's exit-code tables: the first (every command) or
/// the second (`flint executor`).
fn readme_exit_codes(table: usize) -> std::collections::BTreeSet<i32> {
    let readme = std::fs::read_to_string(common::root().join("README.md")).unwrap();
    let section = readme.split("### Exit codes").nth(1).expect("the README has its exit codes");
    let section = section.split("\n### ").next().unwrap();
    let tables: Vec<&str> = section.split("| code | meaning |").skip(1).collect();
    assert_eq!(tables.len(), 2, "two tables: the commands' and the executor's");
    tables[table]
        .lines()
        .skip_while(|l| !l.starts_with("|---"))
        .skip(1)
        .map_while(|l| l.strip_prefix("| "))
        .filter_map(|row| row.split(" |").next()?.trim().parse().ok())
        .collect()
}

/// Every code in the README's two exit-code tables, against what the commands really
/// do: each is brought about as a user meets it, and a code the README lists that no
/// case here makes (or a case whose code the README does not list) fails the test.
#[test]
fn every_exit_code_the_readme_lists_is_what_the_commands_do() {
    use flint_proto::wire::Rejection;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut cluster = Cluster::start(&[
        "--conf",
        "flint.driver.maxRunningJobs=1",
        "--conf",
        "flint.driver.maxWaitingJobs=0",
    ]);
    cluster.executor(&["--cores", "2", "--executor-id", "taken"]);
    cluster.wait_live(1);
    let code = |out: &Output| out.status.code().unwrap_or(-1);
    let closed = format!("flint://127.0.0.1:{}?fingerprint={}", free_port(), "00".repeat(32));
    let url: flint_net::DriverUrl = cluster.url.parse().unwrap();
    let wrong_pin = flint_net::DriverUrl { fingerprint: [7; 32], ..url }.to_string();
    let refusing = |rejection| refusing_driver(&rt, rejection);
    let other_version = refusing(Rejection::VersionMismatch { driver: 999, peer: 18 });
    let other_app = refusing(Rejection::WrongApp { expected: "another-app".into() });
    let stopped = refusing(Rejection::AppStopped);
    let client = |args: &[&str], url: &str, secret: &str| {
        command(args).args(["--driver-url", url]).env("FLINT_SECRET", secret).output().unwrap()
    };
    let executor = |args: &[&str], url: &str, secret: &str| {
        let mut cmd = command(&["executor", "--driver-url", url, "--app-id", APP, "--cores", "1"]);
        cmd.args(args).env("FLINT_SECRET", secret).output().unwrap()
    };

    let mut commands: Vec<(i32, &str, i32)> = Vec::new();
    let mut said = |code_expected: i32, case: &'static str, out: Output| {
        assert_eq!(code(&out), code_expected, "{case}: {}{}", lossy(&out.stderr), lossy(&out.stdout));
        commands.push((code_expected, case, code(&out)));
    };
    said(0, "a job that succeeds", flint(&["run", "examples/noop", "--partitions", "2"]));
    said(1, "a task that fails every time", flint(&["run", "examples/chaos", "--conf", "mode=panic"]));
    said(2, "an unknown flag", flint(&["run", "examples/noop", "--no-such-flag"]));
    said(3, "an input that is not there", flint(&["run", "examples/word-count", "--input", "/no/such/file"]));
    // A port some other process holds: the driver cannot listen.
    let held = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let listen = held.local_addr().unwrap().to_string();
    said(4, "a driver that cannot listen", flint(&["driver", "--app-id", APP, "--listen", &listen]));
    said(5, "nothing listening", client(&["status"], &closed, SECRET));
    said(6, "another certificate than the pinned one", client(&["status"], &wrong_pin, SECRET));
    // One job runs and none may wait: the next is turned away.
    let slow = start_slow_job(&cluster);
    eventually(Duration::from_secs(20), || {
        (cluster.live_executors()[0]["running"].as_u64().unwrap_or(0) > 0).then_some(())
    })
    .expect("the slow job runs");
    said(7, "a busy driver", client(&["submit", "examples/noop"], &cluster.url, SECRET));
    let running = cluster.status()["jobs"][0]["job"].as_u64().unwrap().to_string();
    let cancel = client(&["cancel", &running], &cluster.url, SECRET);
    assert!(cancel.status.success(), "{}", lossy(&cancel.stderr));
    said(8, "a cancelled job", slow.wait_with_output().unwrap());
    said(9, "nothing to cancel", client(&["cancel", "999"], &cluster.url, SECRET));
    said(11, "a wrong secret", client(&["status"], &cluster.url, "not-the-secret"));
    said(12, "a driver of another application", client(&["status"], &other_app, SECRET));
    said(13, "a driver of another protocol version", client(&["status"], &other_version, SECRET));
    said(14, "a driver whose application stopped", client(&["status"], &stopped, SECRET));
    // A second Ctrl-C leaves the job running and exits at once, though the first one's
    // cancel is never answered: the link to the driver goes dark once the job runs.
    let (left_running, out) = second_ctrl_c_on_a_dark_link(&cluster);
    said(130, "a second Ctrl-C", out);

    let mut executors: Vec<(i32, &str, i32)> = Vec::new();
    let mut exited = |code_expected: i32, case: &'static str, out: Output| {
        assert_eq!(code(&out), code_expected, "executor, {case}: {}", lossy(&out.stderr));
        executors.push((code_expected, case, code(&out)));
    };
    exited(10, "an id another executor has", executor(&["--executor-id", "taken"], &cluster.url, SECRET));
    exited(11, "a wrong secret", executor(&[], &cluster.url, "not-the-secret"));
    let mut other = command(&["executor", "--driver-url", &cluster.url, "--app-id", "another-app"]);
    exited(
        12,
        "another application",
        other.args(["--cores", "1"]).env("FLINT_SECRET", SECRET).output().unwrap(),
    );
    exited(13, "another protocol version", executor(&[], &other_version, SECRET));
    exited(14, "an application that stopped", executor(&[], &stopped, SECRET));
    exited(15, "no driver within the timeout", executor(&["--connect-timeout", "1s"], &closed, SECRET));
    exited(17, "another certificate than the pinned one", executor(&[], &wrong_pin, SECRET));
    // The driver killed under a registered executor (the cancelled job's is let go first).
    let _ = cluster.client(&["cancel", &left_running.to_string()]);
    cluster.driver.signal("KILL");
    let taken = &mut cluster.executors[0];
    let lost = taken.wait(Duration::from_secs(20));
    assert_eq!(lost, Some(16), "executor, a lost driver");
    executors.push((16, "a lost driver", 16));

    let listed =
        |cases: &[(i32, &str, i32)]| cases.iter().map(|c| c.0).collect::<std::collections::BTreeSet<_>>();
    assert_eq!(listed(&commands), readme_exit_codes(0), "the README's table for commands, case by case");
    assert_eq!(listed(&executors), readme_exit_codes(1), "the README's table for executors, case by case");
}

/// The README's shell blocks, run as written where this machine can: each in a fresh
/// folder holding the examples and the files it names, with `flint` on the PATH. What
/// a block starts to serve (a driver, an executor, a master, a worker) runs in the
/// background until the block's last command has answered, and loopback with a free
/// port stands in for `0.0.0.0` and a fixed one; `/data` and `/var/lib/flint` are
/// folders of the test's. A block this test neither runs nor names as skipped fails it.
#[test]
fn the_readmes_shell_blocks_run_as_written() {
    let readme = std::fs::read_to_string(common::root().join("README.md")).unwrap();
    let mut blocks: Vec<(usize, String)> = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (n, line) in readme.lines().enumerate() {
        match (&mut open, line.trim_end()) {
            (None, "```sh") => open = Some((n + 1, String::new())),
            (Some(_), "```") => blocks.push(open.take().unwrap()),
            (Some((_, text)), line) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, _) => {}
        }
    }
    // Blocks that need what a test cannot have, and where they are tested instead.
    let skipped = [
        ("make demo", "CI's own commands: `make test` is this test's caller"),
        ("kubectl", "a Kubernetes cluster: tests/k8s.rs applies the same manifests to a stand-in API server"),
        (
            "flint new",
            "a job crate built from the registry: tests/author.rs does this outside the repository",
        ),
    ];
    let bin = common::root().join("target/release");
    // componentize-py, for the Python block (tests/setup.sh installs it).
    let venv = common::root().join("target/pyvenv/bin");
    let mut ran = 0;
    for (at, block) in &blocks {
        if let Some((_, why)) = skipped.iter().find(|(mark, _)| block.contains(mark)) {
            eprintln!("README line {at}: not run here ({why})");
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(common::root().join("examples"), dir.path().join("examples")).unwrap();
        for name in ["big.txt", "more.txt", "data/big.txt"] {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            corpus(&path, 256 << 10);
        }
        let data = dir.path().join("data");
        let work = dir.path().join("work");
        let script = shell_script(block, &data, &work);
        let out = std::process::Command::new("timeout")
            .args(["120", "bash", "-c", &script])
            .current_dir(dir.path())
            .env("PATH", format!("{}:{}:{}", bin.display(), venv.display(), std::env::var("PATH").unwrap()))
            .env("FLINT_CACHE_DIR", common::root().join("target/test-cache"))
            .env_remove("FLINT_SECRET")
            .output()
            .unwrap();
        let logs: String = ["driver", "executor", "master", "worker"]
            .iter()
            .filter_map(|n| std::fs::read_to_string(dir.path().join(format!("{n}.log"))).ok())
            .collect();
        assert!(
            out.status.success(),
            "README line {at}:\n{script}\nexit {:?}\n{}\n{}\n{logs}",
            out.status.code(),
            lossy(&out.stdout),
            lossy(&out.stderr)
        );
        // Each block ends in a command that answered something; a word count, its counts.
        let stdout = lossy(&out.stdout);
        assert!(!stdout.is_empty(), "README line {at} printed nothing:\n{}", lossy(&out.stderr));
        if block.contains("word-count") {
            assert!(stdout.contains("\"total_words\""), "README line {at}:\n{stdout}");
        }
        ran += 1;
    }
    assert!(ran >= 3, "the run, cluster and standalone blocks ran: {ran} of {}", blocks.len());
}

/// A README shell block as a script this machine can run: comments cut, continued
/// lines joined, servers started in the background (their URL files awaited), and
/// addresses and folders made the test's own.
fn shell_script(block: &str, data: &std::path::Path, work: &std::path::Path) -> String {
    let mut script = String::from(
        "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true' EXIT\n",
    );
    let joined = block.replace("\\\n", " ");
    for line in joined.lines() {
        // A comment starts at ` #` outside quotes (no README command quotes a #).
        let line = line.split(" #").next().unwrap().trim();
        if line.is_empty() {
            continue;
        }
        let line = line
            .replace("0.0.0.0:7077", "127.0.0.1:0")
            .replace("0.0.0.0:7078", "127.0.0.1:0")
            .replace("/var/lib/flint", &work.display().to_string())
            .replace("=/data", &format!("={}", data.display()))
            .replace(" /data/", &format!(" {}/", data.display()))
            .replace("flint:///data/", &format!("flint://{}/", data.display()));
        let line = match line.strip_prefix("export FLINT_SECRET=...") {
            Some(_) => {
                "export FLINT_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n')".to_owned()
            }
            None => line,
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        let serves = words.len() > 1
            && words[0] == "flint"
            && ["driver", "executor", "master", "worker"].contains(&words[1]);
        if serves {
            script.push_str(&format!("{line} > {}.log 2>&1 &\n", words[1]));
            if let Some(i) = words.iter().position(|w| *w == "--url-file") {
                let file = words[i + 1];
                script.push_str(&format!(
                    "for _ in $(seq 200); do [ -s {file} ] && break; sleep 0.1; done; [ -s {file} ]\n"
                ));
            }
        } else {
            script.push_str(&line);
            script.push('\n');
        }
    }
    script
}

/// Speculation end to end: task 5's first attempt sleeps half a minute (a straggler
/// whatever executor it lands on); with `flint.speculation.enabled` it gets one copy on
/// the other executor, the copy wins, the original is killed, and the job ends in
/// seconds with the exact answer, its copy counted and shown. A job whose manifest says
/// `speculation = false` waits for its straggler.
#[test]
fn a_straggler_gets_a_speculative_copy_that_wins_unless_the_job_refuses() {
    let ui = free_port();
    let logs = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(&[
        "--ui-port",
        &ui.to_string(),
        "--conf",
        "flint.speculation.enabled=true",
        "--conf",
        &format!("flint.eventLog.dir={}", logs.path().display()),
    ]);
    cluster.executor(&["--cores", "1", "--executor-id", "a"]);
    cluster.executor(&["--cores", "1", "--executor-id", "b"]);
    cluster.wait_live(2);
    let straggling = |secs: &str| {
        vec![
            "--partitions".to_owned(),
            "10".into(),
            "--conf".into(),
            "mode=sleep".into(),
            "--conf".into(),
            format!("secs={secs}"),
            "--conf".into(),
            "only_task=5".into(),
            "--conf".into(),
            "only_attempt=0".into(),
            "--json".into(),
        ]
    };
    let started = std::time::Instant::now();
    let args: Vec<String> = [vec!["examples/chaos".to_owned()], straggling("30")].concat();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let report = ok_json(&cluster.submit(&args));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(20), "the copy ended it, not the 30 s sleep: {took:?}");
    let indices: Vec<Value> = (0..10).map(Value::from).collect();
    assert_eq!(report["result"], Value::from(indices), "{report}");
    assert_eq!(
        (report["speculative_attempts"].as_u64(), report["speculative_won"].as_u64()),
        (Some(1), Some(1))
    );

    // Task 5's two attempts: the original killed, the copy (on the other executor,
    // with its reason) the winner.
    let job = report["job_id"].as_u64().unwrap();
    let (_, attempts) = http_get(ui, &format!("/api/v1/jobs/{job}/attempts"), None);
    let attempts: Value = serde_json::from_str(&attempts).unwrap();
    let of_5: Vec<&Value> = attempts.as_array().unwrap().iter().filter(|a| a["index"] == 5).collect();
    assert_eq!(of_5.len(), 2, "{attempts}");
    assert_eq!((&of_5[0]["state"], &of_5[1]["state"]), (&Value::from("killed"), &Value::from("succeeded")));
    assert_ne!(of_5[0]["executor"], of_5[1]["executor"], "never on the straggler's executor");
    assert!(of_5[1]["speculative"].as_str().is_some_and(|why| why.contains("median")), "{}", of_5[1]);
    let (_, metrics) = http_get(ui, "/metrics", None);
    assert!(metrics.contains("flint_speculative_attempts_total{outcome=\"won\"} 1"), "{metrics}");
    let (_, page) = http_get(ui, &format!("/jobs/{job}/tasks/5"), None);
    assert!(page.contains("yes: the original ran"), "{page}");
    // Both slots free: the killed original is gone.
    let idle = eventually(Duration::from_secs(5), || {
        cluster.live_executors().iter().all(|e| e["running"] == 0).then_some(())
    });
    assert!(idle.is_some(), "{}", cluster.status());

    // A job that must not run twice: its manifest refuses, it waits for its straggler.
    let dir = tempfile::tempdir().unwrap();
    let manifest = format!(
        "name = \"chaos\"\nworld = \"aggregate\"\nspeculation = false\ncomponent = \"{}\"\n",
        common::wasm("chaos")
    );
    std::fs::write(dir.path().join("flint.toml"), manifest).unwrap();
    let started = std::time::Instant::now();
    let args: Vec<String> = [vec![dir.path().display().to_string()], straggling("3")].concat();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let report = ok_json(&cluster.submit(&args));
    assert!(started.elapsed() >= Duration::from_secs(3), "it waited for its straggler");
    assert_eq!(report["speculative_attempts"].as_u64(), Some(0), "{report}");
    cluster.driver.signal("TERM");
    assert_eq!(cluster.driver.wait(Duration::from_secs(20)), Some(0));
    let log = event_log_text(&logs.path().join(common::names_in(logs.path())[0].clone()));
    for event in ["\"event\":\"speculated\"", "\"event\":\"speculation_ended\""] {
        assert_eq!(log.matches(event).count(), 1, "{event} once in the event log");
    }
}

/// A straggler that reads its split slowly: its executor's heartbeats carry how far it
/// is through its input (measured by the host), and the copy's reason says so, a share
/// short of all of it.
#[test]
fn a_straggler_s_copy_says_how_much_of_its_input_it_had_read() {
    let ui = free_port();
    let mut cluster = Cluster::start(&[
        "--ui-port",
        &ui.to_string(),
        "--conf",
        "flint.speculation.enabled=true",
        // Past a few heartbeats (every 250 ms here), so progress has been heard.
        "--conf",
        "flint.speculation.minTaskRuntime=1500ms",
    ]);
    cluster.executor(&["--cores", "1"]);
    cluster.executor(&["--cores", "1"]);
    cluster.wait_live(2);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("lines.txt");
    let lines: String = (0..600).map(|i| format!("line number {i:05}\n")).collect();
    std::fs::write(&input, lines).unwrap();
    let input = input.display().to_string();
    let args = [
        "examples/chaos",
        "--input",
        &input,
        "--partitions",
        "6",
        "--conf",
        "mode=slow-read",
        "--conf",
        "nap_ms=200",
        "--conf",
        "only_task=2",
        "--conf",
        "only_attempt=0",
        "--json",
    ];
    let started = std::time::Instant::now();
    let report = ok_json(&cluster.submit(&args));
    // Its split, about 1.9 KB in batches of 64 bytes, would take about 6 s.
    assert!(started.elapsed() < Duration::from_secs(5), "the copy ended it: {:?}", started.elapsed());
    assert_eq!(report["speculative_won"].as_u64(), Some(1), "{report}");
    let job = report["job_id"].as_u64().unwrap();
    let (_, attempts) = http_get(ui, &format!("/api/v1/jobs/{job}/attempts"), None);
    let attempts: Value = serde_json::from_str(&attempts).unwrap();
    let why = attempts.as_array().unwrap().iter().find_map(|a| a["speculative"].as_str()).unwrap().to_owned();
    let read: u32 = why
        .split_once("% of its input read")
        .and_then(|(before, _)| before.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the reason says how much was read: {why}"));
    assert!((1..100).contains(&read), "{why}");
    assert!(why.contains("ms left at its rate"), "{why}");
}

/// A speculative copy of a reduce task that writes part files: the straggling
/// original's part is begun and never committed, the copy's is; the output holds one
/// part per partition and one `_SUCCESS`, and the counts are `flint run`'s.
#[test]
fn a_speculative_copy_of_a_reduce_task_commits_one_part_per_partition() {
    let shared = tempfile::tempdir().unwrap();
    let roots = format!("flint.output.roots={}", shared.path().display());
    let mut cluster = Cluster::start(&["--conf", &roots, "--conf", "flint.speculation.enabled=true"]);
    cluster.executor(&["--cores", "1", "--executor-id", "a", "--conf", &roots]);
    cluster.executor(&["--cores", "1", "--executor-id", "b", "--conf", &roots]);
    cluster.wait_live(2);
    let input = cluster.dir.path().join("inputs/corpus.txt");
    corpus(&input, 1 << 20);
    let output = shared.path().join("counts");
    // Two maps (tasks 0 and 1), then four reducers (2 to 5): the first attempt of
    // reducer 3 (partition 1) straggles for a minute.
    let report = ok_json(&cluster.submit(&[
        "examples/word-count-mr",
        "--input",
        input.to_str().unwrap(),
        "--partitions",
        "2",
        "--reduce-partitions",
        "4",
        "--output",
        output.to_str().unwrap(),
        "--conf",
        "straggle_task=3",
        "--json",
    ]));
    assert_eq!(
        (report["speculative_attempts"].as_u64(), report["speculative_won"].as_u64()),
        (Some(1), Some(1))
    );
    let mut names = common::names_in(&output);
    names.sort();
    assert_eq!(names, ["_SUCCESS", "part-00000", "part-00001", "part-00002", "part-00003"], "{report}");
    let collected = ok_json(&flint(&[
        "run",
        "examples/word-count-mr",
        "--input",
        input.to_str().unwrap(),
        "--reduce-partitions",
        "4",
        "--json",
    ]));
    assert_eq!(report["result"], collected["result"], "the counts of the parts as run gives them");
    // The killed original left nothing behind, even once its executor let it go.
    std::thread::sleep(Duration::from_millis(500));
    let mut names = common::names_in(&output);
    names.sort();
    assert_eq!(names.len(), 5, "{names:?}");
}

/// With dynamic allocation, a copy that finds no free slot off its straggler's
/// executor makes the fleet grow for it; once the task has ended, the executor started
/// for it is given back after its idle timeout.
#[test]
fn an_executor_started_for_a_speculative_copy_is_given_back_once_idle() {
    let cluster = Cluster::start(&[
        "--backend",
        "local",
        "--conf",
        "flint.speculation.enabled=true",
        "--conf",
        "flint.dynamicAllocation.enabled=true",
        "--conf",
        "flint.dynamicAllocation.minExecutors=1",
        "--conf",
        "flint.dynamicAllocation.initialExecutors=1",
        "--conf",
        "flint.dynamicAllocation.maxExecutors=2",
        "--conf",
        "flint.dynamicAllocation.executorIdleTimeout=2s",
        "--conf",
        "flint.dynamicAllocation.schedulerBacklogTimeout=200ms",
        "--conf",
        "flint.executor.cores=1",
    ]);
    let driver = cluster.driver.pid();
    cluster.wait_live(1);
    let started = std::time::Instant::now();
    let report = ok_json(&cluster.submit(&[
        "examples/chaos",
        "--partitions",
        "10",
        "--conf",
        "mode=sleep",
        "--conf",
        "secs=60",
        "--conf",
        "only_task=5",
        "--conf",
        "only_attempt=0",
        "--json",
    ]));
    assert!(started.elapsed() < Duration::from_secs(30), "the copy ended it: {:?}", started.elapsed());
    // Task 5's copy won (the short tasks queued behind it on the first executor may
    // have had copies too, once it was done).
    assert!(report["speculative_won"].as_u64() >= Some(1), "{report}");
    let status = cluster.status();
    let grew = status["executors"].as_array().unwrap().len();
    assert_eq!(grew, 2, "the fleet grew for the copy: {status}");
    // Idle past the timeout, the fleet shrinks back to its minimum.
    let back = eventually(Duration::from_secs(20), || (children_of(driver).len() == 1).then_some(()));
    assert!(back.is_some(), "{}", cluster.status());
    let status = cluster.status();
    let removed =
        status["executors"].as_array().unwrap().iter().filter(|e| e["removed"] == "decommissioned").count();
    assert_eq!(removed, 1, "{status}");
}

/// A driver started without a secret makes one under `~/.flint`; clients on the same
/// machine, as the same user, find it by the driver's fingerprint, and others do not.
#[test]
fn clients_on_the_drivers_machine_find_the_secret_it_made() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let url_file = dir.path().join("url");
    let mut cmd = command(&["driver", "--app-id", "made-here", "--url-file", url_file.to_str().unwrap()]);
    cmd.args(["--ui-port", "0"]).env_remove("FLINT_SECRET").env("HOME", &home).env("TMPDIR", dir.path());
    let driver = Proc::spawn(cmd, dir.path().join("driver.log"));
    let url = eventually(Duration::from_secs(20), || read_url(&url_file))
        .unwrap_or_else(|| panic!("the driver prints its URL; its log:\n{}", driver.log_text()));
    assert!(home.join(".flint/made-here.secret").is_file(), "{}", driver.log_text());
    let status = |home: &std::path::Path| {
        command(&["status", "--driver-url", &url, "--json"])
            .env_remove("FLINT_SECRET")
            .env("HOME", home)
            .output()
            .unwrap()
    };
    let out = status(&home);
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    assert_eq!(json(&out)["app_id"], "made-here");
    // Another user's home has no such secret: told what to set.
    let elsewhere = dir.path().join("other");
    std::fs::create_dir(&elsewhere).unwrap();
    let out = status(&elsewhere);
    assert!(!out.status.success());
    assert!(lossy(&out.stderr).contains("set FLINT_SECRET"), "{}", lossy(&out.stderr));
}
