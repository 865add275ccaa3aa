//! A standalone cluster of real processes on 127.0.0.1: `flint master`, `flint worker`s
//! (each with its own work dir, standing for a machine) and drivers with
//! `--master-url`, as an operator would run them.

#[path = "common/browser.rs"]
mod browser;
mod common;

use common::{
    Proc, alive, children_of, command, eventually, flint, free_port, http_get, json, lossy, read_url,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

const SECRET: &str = "cluster-secret-0123456789";

struct Standalone {
    dir: tempfile::TempDir,
    url: String,
    ui: u16,
    master: Option<Proc>,
    workers: Vec<(String, Proc)>,
}

struct App {
    id: String,
    url: String,
    driver: Proc,
    /// The application secret its executors and clients prove.
    secret: String,
}

impl Standalone {
    fn start() -> Standalone {
        let dir = tempfile::tempdir().unwrap();
        let ui = free_port();
        let mut cluster = Standalone { dir, url: String::new(), ui, master: None, workers: Vec::new() };
        cluster.start_master();
        cluster
    }

    /// The master, on the same port and state dir as before if it ran already (so its
    /// URL is the same).
    fn start_master(&mut self) {
        let url_file = self.dir.path().join("master.url");
        let _ = std::fs::remove_file(&url_file);
        let listen = match self.url.is_empty() {
            true => "127.0.0.1:0".to_owned(),
            false => format!("127.0.0.1:{}", self.url.rsplit_once(':').unwrap().1.split('?').next().unwrap()),
        };
        let state = self.dir.path().join("master-state");
        let mut cmd = command(&["master", "--listen", &listen, "--url-file", url_file.to_str().unwrap()]);
        cmd.args(["--state-dir", state.to_str().unwrap(), "--ui-port", &self.ui.to_string()]);
        cmd.args(["--worker-timeout", "5s"]).env("FLINT_SECRET", SECRET);
        let n = std::fs::read_dir(self.dir.path()).unwrap().count();
        let master = Proc::spawn(cmd, self.dir.path().join(format!("master-{n}.log")));
        let url = eventually(Duration::from_secs(20), || read_url(&url_file))
            .unwrap_or_else(|| panic!("the master prints its URL; its log:\n{}", master.log_text()));
        assert!(self.url.is_empty() || self.url == url, "a restarted master keeps its URL");
        self.url = url;
        self.master = Some(master);
    }

    fn work_dir(&self, id: &str) -> PathBuf {
        self.dir.path().join(format!("work-{id}"))
    }

    fn worker(&mut self, id: &str, cores: u32) -> u32 {
        let work = self.work_dir(id);
        let mut cmd = command(&["worker", "--master-url", &self.url, "--worker-id", id]);
        cmd.args(["--cores", &cores.to_string(), "--memory", "4g", "--host", "127.0.0.1"]);
        cmd.args(["--work-dir", work.to_str().unwrap()]).env("FLINT_SECRET", SECRET);
        let n = self.workers.len();
        let worker = Proc::spawn(cmd, self.dir.path().join(format!("worker-{id}-{n}.log")));
        let pid = worker.pid();
        self.workers.push((id.to_owned(), worker));
        pid
    }

    fn api(&self, path: &str) -> Value {
        let (code, body) = http_get(self.ui, path, None);
        assert_eq!(code, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    fn wait_workers(&self, ids: &[&str]) {
        let listed = eventually(Duration::from_secs(20), || {
            let workers = self.api("/api/v1/workers");
            let mut listed: Vec<String> =
                workers.as_array().unwrap().iter().map(|w| w["id"].as_str().unwrap().to_owned()).collect();
            listed.sort();
            let mut want: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
            want.sort();
            (listed == want).then_some(())
        });
        assert!(
            listed.is_some(),
            "workers {ids:?} registered: {}\n{}",
            self.api("/api/v1/workers"),
            self.logs()
        );
    }

    fn application(&self, id: &str) -> Value {
        let apps = self.api("/api/v1/applications");
        apps.as_array().unwrap().iter().find(|a| a["id"] == id).cloned().unwrap_or(Value::Null)
    }

    /// A driver of application `id` asking this master for its executors, its
    /// application secret the cluster's.
    fn app(&self, id: &str, conf: &[&str]) -> App {
        self.app_with_secret(id, conf, SECRET)
    }

    /// A driver whose application keeps `secret` for its executors and clients, and
    /// proves the cluster's to the master from a file.
    fn app_with_secret(&self, id: &str, conf: &[&str], secret: &str) -> App {
        self.app_with(id, conf, secret, 0)
    }

    /// The same, its status page on `ui_port` (0: none).
    fn app_with(&self, id: &str, conf: &[&str], secret: &str, ui_port: u16) -> App {
        let url_file = self.dir.path().join(format!("{id}.url"));
        let port = ui_port.to_string();
        let mut cmd = command(&[
            "driver",
            "--app-id",
            id,
            "--url-file",
            url_file.to_str().unwrap(),
            "--ui-port",
            &port,
        ]);
        cmd.args(["--master-url", &self.url, "--conf", "flint.network.timeout=3s"]);
        cmd.args(["--conf", "flint.executor.heartbeatInterval=250ms"]);
        for c in conf {
            cmd.args(["--conf", c]);
        }
        if secret != SECRET {
            let file = self.dir.path().join("cluster.secret");
            std::fs::write(&file, SECRET).unwrap();
            std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
            cmd.arg("--master-secret-file").arg(&file);
        }
        cmd.env("FLINT_SECRET", secret);
        let driver = Proc::spawn(cmd, self.dir.path().join(format!("driver-{id}.log")));
        let url = eventually(Duration::from_secs(20), || read_url(&url_file))
            .unwrap_or_else(|| panic!("the driver prints its URL; its log:\n{}", driver.log_text()));
        App { id: id.to_owned(), url, driver, secret: secret.to_owned() }
    }

    fn logs(&self) -> String {
        let mut text = String::new();
        if let Some(master) = &self.master {
            text += &format!("--- master\n{}", master.log_text());
        }
        for (id, w) in &self.workers {
            text += &format!("--- worker {id}\n{}", w.log_text());
        }
        text
    }
}

impl App {
    fn client(&self, args: &[&str]) -> Output {
        let mut cmd = command(args);
        cmd.args(["--driver-url", &self.url]).env("FLINT_SECRET", &self.secret);
        cmd.output().unwrap()
    }

    fn status(&self) -> Value {
        let out = self.client(&["status", "--json"]);
        assert!(out.status.success(), "status: {}", lossy(&out.stderr));
        json(&out)
    }

    fn live(&self) -> Vec<Value> {
        let status = self.status();
        status["executors"].as_array().unwrap().iter().filter(|e| e["removed"].is_null()).cloned().collect()
    }

    fn wait_live(&self, n: usize) {
        let live = eventually(Duration::from_secs(30), || (self.live().len() == n).then_some(()));
        assert!(
            live.is_some(),
            "{}: {n} live executors: {}\n{}",
            self.id,
            self.status(),
            self.driver.log_text()
        );
    }

    fn submit(&self, args: &[&str]) -> std::process::Child {
        let mut cmd = command(&[&["submit"][..], args].concat());
        cmd.args(["--driver-url", &self.url]).env("FLINT_SECRET", &self.secret);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    }
}

fn ok_json(out: &Output) -> Value {
    assert!(out.status.success(), "exit {:?}: {}", out.status.code(), lossy(&out.stderr));
    json(out)
}

fn answer(job: &[&str]) -> Value {
    ok_json(&flint(&[&["run"][..], job].concat()))["result"].clone()
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir).map_or_else(
        |_| Vec::new(),
        |d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect(),
    )
}

const PI: [&str; 6] = ["examples/pi", "--conf", "points=40000000", "--partitions", "24", "--json"];

#[test]
fn two_applications_share_three_workers_within_their_cores_max_and_both_answers_are_exact() {
    let mut cluster = Standalone::start();
    for id in ["w1", "w2", "w3"] {
        cluster.worker(id, 2);
    }
    cluster.wait_workers(&["w1", "w2", "w3"]);
    let one_core = ["flint.executor.cores=1", "flint.executor.memory=512m"];
    let a =
        cluster.app("app-a", &[&one_core[..], &["flint.executor.instances=2", "flint.cores.max=2"]].concat());
    // Asks for more than its bound lets it have: 3 run, the fourth waits, saying why.
    // It keeps a secret of its own for its executors, which the workers hand them.
    let b_conf = [&one_core[..], &["flint.executor.instances=4", "flint.cores.max=3"]].concat();
    let b = cluster.app_with_secret("app-b", &b_conf, "app-b-own-secret-0123456789");
    a.wait_live(2);
    b.wait_live(3);

    let words = common::root().join("target/standalone-corpus.txt");
    common::corpus(&words, 2 << 20);
    let count = ["examples/word-count", "--input", words.to_str().unwrap(), "--json"];
    let (ja, jb) = (a.submit(&PI), b.submit(&count));
    let (ra, rb) = (ok_json(&ja.wait_with_output().unwrap()), ok_json(&jb.wait_with_output().unwrap()));
    assert_eq!(ra["result"], answer(&PI), "app-a's answer");
    assert_eq!(rb["result"], answer(&count), "app-b's answer");

    // The master lists the workers, both applications and where their executors run,
    // each within its flint.cores.max.
    let workers = cluster.api("/api/v1/workers");
    assert_eq!(workers.as_array().unwrap().len(), 3, "{workers}");
    for (app, max, running) in [("app-a", 2, 2), ("app-b", 3, 3)] {
        let view = cluster.application(app);
        assert_eq!(view["cores_used"], max, "{view}");
        assert_eq!(view["executors"].as_array().unwrap().len(), running, "{view}");
        assert!(view["driver_url"].as_str().unwrap().starts_with("flint://"), "{view}");
        let shown = view.to_string();
        assert!(!shown.contains(SECRET) && !shown.contains(&b.secret), "no secret in the API");
    }
    let waiting = cluster.application("app-b")["waiting"].clone();
    assert_eq!(waiting.as_array().unwrap().len(), 1, "{waiting}");
    let reason = waiting[0]["reason"].as_str().unwrap();
    assert!(reason.contains("flint.cores.max (3)"), "{reason}");
    // Spread: no worker holds more than its 2 cores; 5 executors over 3 workers.
    let held: Vec<usize> =
        workers.as_array().unwrap().iter().map(|w| w["executors"].as_array().unwrap().len()).collect();
    assert!(held.iter().all(|n| *n >= 1 && *n <= 2), "{workers}");
    // The waiting request shows in the driver's status too.
    let status = b.status();
    assert!(status["executors_waiting"].as_str().unwrap_or_default().contains("flint.cores.max"), "{status}");

    // Every executor runs under its application's folder on its worker, never with the
    // secret on its command line.
    for (id, worker) in &cluster.workers {
        for pid in children_of(worker.pid()) {
            let argv = lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap());
            assert!(!argv.contains(SECRET) && !argv.contains(&b.secret), "a secret in argv: {argv}");
            assert!(argv.contains(&cluster.work_dir(id).to_string_lossy().into_owned()), "{argv}");
        }
    }

    // An application that serves its page is linked from the master's.
    let page_port = common::free_port();
    let _c = cluster.app_with("app-c", &["flint.dynamicAllocation.enabled=true"], SECRET, page_port);
    let linked = eventually(Duration::from_secs(10), || {
        cluster.application("app-c")["ui_url"].as_str().map(str::to_owned)
    });
    assert_eq!(
        linked,
        Some(format!("http://127.0.0.1:{page_port}/")),
        "{}",
        cluster.api("/api/v1/applications")
    );
    assert_eq!(cluster.application("app-a")["ui_url"], Value::Null, "no page, no link");

    let browser = browser::Browser::start();
    browser.goto(&format!("http://127.0.0.1:{}/", cluster.ui));
    let listed = "return document.querySelectorAll('tr.worker').length === 3 \
                  && document.querySelectorAll('tr.executor').length === 5;";
    assert!(browser.wait_for(Duration::from_secs(10), listed), "the master's page:\n{}", browser.text());
    let text = browser.text();
    for name in ["w1", "w2", "w3", "app-a", "app-b", "app-c"] {
        assert!(text.contains(name), "{name} on the page:\n{text}");
    }
    assert!(text.contains("3 workers, 6 cores (5 in use), 3 applications"), "{text}");
    assert!(text.contains("1 executor waits to be placed"), "{text}");
    let shots = common::root().join("target/ui");
    std::fs::create_dir_all(&shots).unwrap();
    browser.screenshot(&shots.join("master.png"));
    // The link leads to app-c's own page.
    browser.eval("document.querySelector('a.app-page').click(); return null;");
    let there = "return document.title.includes('app-c');";
    assert!(browser.wait_for(Duration::from_secs(10), there), "app-c's page:\n{}", browser.text());
}

#[test]
fn a_killed_driver_leaves_no_executor_and_no_work_dir_on_any_worker() {
    let mut cluster = Standalone::start();
    let workers = [cluster.worker("w1", 2), cluster.worker("w2", 2)];
    cluster.wait_workers(&["w1", "w2"]);
    let app = cluster.app("doomed", &["flint.executor.cores=1", "flint.executor.instances=3"]);
    app.wait_live(3);
    let executors: Vec<u32> = workers.iter().flat_map(|w| children_of(*w)).collect();
    assert_eq!(executors.len(), 3, "three executor processes on the workers");
    for id in ["w1", "w2"] {
        let dir = cluster.work_dir(id).join("doomed");
        if dir.exists() {
            let mode =
                std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&dir).unwrap().permissions());
            assert_eq!(mode & 0o777, 0o700, "an application's folder is private");
        }
    }

    let killed = Instant::now();
    app.driver.signal("KILL");
    let gone = eventually(Duration::from_secs(10), || {
        let left = executors.iter().any(|p| alive(*p));
        let dirs = ["w1", "w2"].iter().any(|id| cluster.work_dir(id).join("doomed").exists());
        (!left && !dirs).then_some(())
    });
    assert!(
        gone.is_some(),
        "after {:?}: executors {:?}, folders {:?} {:?}\n{}",
        killed.elapsed(),
        executors.iter().filter(|p| alive(**p)).collect::<Vec<_>>(),
        entries(&cluster.work_dir("w1")),
        entries(&cluster.work_dir("w2")),
        cluster.logs()
    );
    assert!(cluster.application("doomed").is_null(), "the master forgot the application");
    // The workers serve on, with all their cores free.
    let workers = cluster.api("/api/v1/workers");
    for w in workers.as_array().unwrap() {
        assert_eq!(w["cores_free"], 2, "{workers}");
    }
}

#[test]
fn a_worker_killed_mid_job_is_noticed_in_seconds_and_comes_back_as_a_new_life() {
    let mut cluster = Standalone::start();
    cluster.worker("steady", 1);
    let victim = cluster.worker("victim", 1);
    cluster.wait_workers(&["steady", "victim"]);
    let first_life = cluster
        .api("/api/v1/workers")
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == "victim")
        .unwrap()["incarnation"]
        .clone();
    let app = cluster.app("busy", &["flint.executor.cores=1", "flint.executor.instances=2"]);
    app.wait_live(2);
    let job = app.submit(&PI);
    let busy = eventually(Duration::from_secs(20), || {
        let status = app.status();
        let running: u64 =
            status["executors"].as_array().unwrap().iter().map(|e| e["running"].as_u64().unwrap_or(0)).sum();
        (running >= 2).then_some(())
    });
    assert!(busy.is_some(), "both executors got tasks");

    let executors = children_of(victim);
    let killed = Instant::now();
    cluster.workers[1].1.signal("KILL");
    // Its executor dies with it at once, and the master and the driver know in seconds.
    let orphans = eventually(Duration::from_secs(2), || executors.iter().all(|p| !alive(*p)).then_some(()));
    assert!(orphans.is_some(), "the worker's executors outlived it");
    let noticed = eventually(Duration::from_secs(10), || {
        let workers = cluster.api("/api/v1/workers");
        workers.as_array().unwrap().iter().all(|w| w["id"] != "victim").then(|| killed.elapsed())
    });
    let noticed = noticed.unwrap_or_else(|| panic!("the master still lists the victim\n{}", cluster.logs()));
    assert!(noticed < Duration::from_secs(6), "noticed after {noticed:?}");

    // Back with the same id: a new life, no "duplicate" anywhere; it gets the executor
    // the application lost, and the job ends exactly.
    cluster.worker("victim", 1);
    let second = eventually(Duration::from_secs(20), || {
        let workers = cluster.api("/api/v1/workers");
        workers.as_array().unwrap().iter().find(|w| w["id"] == "victim").map(|w| w["incarnation"].clone())
    });
    assert!(second.is_some_and(|life| life != first_life), "registered again as a new life");
    let report = ok_json(&job.wait_with_output().unwrap());
    assert_eq!(report["result"], answer(&PI), "the exact answer despite the loss");
    app.wait_live(2);
    let logs = cluster.logs() + &app.driver.log_text();
    assert!(!logs.to_lowercase().contains("duplicate"), "{logs}");
}

#[test]
fn an_application_asking_for_more_than_any_worker_has_is_told_why_once() {
    let mut cluster = Standalone::start();
    cluster.worker("small", 1);
    cluster.wait_workers(&["small"]);
    let app = cluster.app("greedy", &["flint.executor.cores=4", "flint.executor.instances=1"]);
    let told =
        eventually(Duration::from_secs(20), || app.status()["executors_waiting"].as_str().map(str::to_owned));
    let told = told.unwrap_or_else(|| panic!("no reason in the status: {}", app.status()));
    assert!(told.contains("needs 4 cores") && told.contains("largest free worker has 1 core and"), "{told}");
    let out = app.client(&["status"]);
    assert!(lossy(&out.stdout).contains("needs 4 cores"), "flint status says why:\n{}", lossy(&out.stdout));
    let waiting = cluster.application("greedy")["waiting"].clone();
    assert!(waiting[0]["reason"].as_str().unwrap_or_default().contains("needs 4 cores"), "{waiting}");
    let page = http_get(cluster.ui, "/", None).1;
    assert!(page.contains("needs 4 cores"), "the master's page says why: {page}");
    // Said once, not every few seconds.
    std::thread::sleep(Duration::from_secs(3));
    let master = cluster.master.as_ref().unwrap().log_text();
    assert_eq!(master.matches("executor waits").count(), 1, "{master}");
    assert_eq!(app.driver.log_text().matches("waits for a worker").count(), 1, "{}", app.driver.log_text());
}

#[test]
fn a_restarted_master_is_joined_again_and_the_running_job_ends_exactly() {
    let mut cluster = Standalone::start();
    cluster.worker("w1", 1);
    cluster.worker("w2", 1);
    cluster.wait_workers(&["w1", "w2"]);
    let app = cluster.app("steady", &["flint.executor.cores=1", "flint.executor.instances=2"]);
    app.wait_live(2);
    let executors: Vec<String> = app.live().iter().map(|e| e["id"].as_str().unwrap().to_owned()).collect();
    let job = app.submit(&PI);
    std::thread::sleep(Duration::from_millis(500));

    drop(cluster.master.take()); // kill -9
    std::thread::sleep(Duration::from_secs(1));
    cluster.start_master();
    cluster.wait_workers(&["w1", "w2"]);
    let rejoined = eventually(Duration::from_secs(20), || {
        let view = cluster.application("steady");
        (view["connected"] == true && view["executors"].as_array().is_some_and(|e| e.len() == 2))
            .then_some(view)
    });
    assert!(
        rejoined.is_some(),
        "the application and its executors are known again: {}\n{}",
        cluster.api("/api/v1/status"),
        cluster.logs()
    );

    let report = ok_json(&job.wait_with_output().unwrap());
    assert_eq!(report["result"], answer(&PI), "the exact answer");
    assert_eq!(report["task_failures"].as_array().map_or(0, Vec::len), 0, "no task lost: {report}");
    let after: Vec<String> = app.live().iter().map(|e| e["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(after, executors, "the same executors ran on");
    let logs = cluster.logs() + &app.driver.log_text();
    assert!(!logs.to_lowercase().contains("duplicate"), "{logs}");
}

/// A peer speaking the master's protocol by hand: connects, says hello as `role` with
/// `secret`, sends `first` and returns the hello's answer and the reply to `first`.
fn scripted<T: serde::Serialize, R: serde::de::DeserializeOwned>(
    url: &str,
    role: flint_proto::wire::Role,
    secret: &str,
    first: &T,
) -> (flint_proto::wire::HelloReply, Option<R>) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let url: flint_net::DriverUrl = url.parse().unwrap();
        let (_endpoint, connection) =
            flint_net::connect(&url, Duration::from_secs(5), Duration::from_secs(3)).await.unwrap();
        let secret = flint_net::Secret::new(secret);
        let (reply, mut send, mut recv) =
            flint_net::hello(&connection, &secret, role, "", None, None).await.unwrap();
        if !matches!(reply, flint_proto::wire::HelloReply::Welcome { .. }) {
            return (reply, None);
        }
        flint_net::write_frame(&mut send, first).await.unwrap();
        (reply, flint_net::read_frame::<R>(&mut recv).await.ok().flatten())
    })
}

#[test]
fn peers_the_master_must_not_serve_are_turned_away_saying_why_and_harm_no_one() {
    use flint_proto::standalone::{RunningExecutor, ToWorker, WorkerMessage};
    use flint_proto::wire::{HelloReply, Rejection, Role};
    let mut cluster = Standalone::start();
    let register = |id: &str, running: Vec<RunningExecutor>| WorkerMessage::Register {
        id: id.into(),
        instance: 1,
        host: "h".into(),
        cores: 2,
        memory: 1 << 30,
        running,
    };

    // The wrong secret: nothing but the refusal, and a worker exits with the
    // executors' code for it.
    let (reply, _) = scripted::<_, ToWorker>(&cluster.url, Role::Worker, "wrong", &register("w", vec![]));
    assert_eq!(reply, HelloReply::Rejected(Rejection::NotAuthenticated));
    let mut cmd = command(&["worker", "--master-url", &cluster.url, "--worker-id", "w9"]);
    let work = cluster.work_dir("w9");
    let out = cmd.args(["--work-dir", work.to_str().unwrap()]).env("FLINT_SECRET", "wrong").output().unwrap();
    assert_eq!(out.status.code(), Some(11), "{}", lossy(&out.stderr));
    assert!(lossy(&out.stderr).contains("secret"), "{}", lossy(&out.stderr));

    // Ids a worker would make folders of are checked: its own, and those it reports.
    let escape = scripted::<_, ToWorker>(&cluster.url, Role::Worker, SECRET, &register("../../etc", vec![]));
    assert!(matches!(escape.1, Some(ToWorker::Refused { .. })), "{escape:?}");
    let running = vec![RunningExecutor { app: "../x".into(), executor: "e".into(), cores: 1, memory: 1 }];
    let smuggled = scripted::<_, ToWorker>(&cluster.url, Role::Worker, SECRET, &register("fine", running));
    assert!(matches!(smuggled.1, Some(ToWorker::Refused { .. })), "{smuggled:?}");
    // Sizes whose sums could overflow the master's bookkeeping are refused too.
    let huge = WorkerMessage::Register {
        id: "huge".into(),
        instance: 1,
        host: "h".into(),
        cores: u32::MAX,
        memory: 1,
        running: vec![],
    };
    let huge = scripted::<_, ToWorker>(&cluster.url, Role::Worker, SECRET, &huge);
    assert!(matches!(huge.1, Some(ToWorker::Refused { .. })), "{huge:?}");
    let out = command(&["worker", "--master-url", &cluster.url, "--worker-id", "../w"])
        .env("FLINT_SECRET", SECRET)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", lossy(&out.stderr));

    // A client pointed at the master is told it is a master, not a driver; a worker
    // pointed at a driver is told the converse.
    let out =
        command(&["status", "--driver-url", &cluster.url]).env("FLINT_SECRET", SECRET).output().unwrap();
    assert_eq!(out.status.code(), Some(14), "{}", lossy(&out.stderr));
    assert!(lossy(&out.stderr).contains("standalone master"), "{}", lossy(&out.stderr));
    let app = cluster.app("app", &["flint.executor.instances=0"]);
    let (reply, _) = scripted::<_, ToWorker>(&app.url, Role::Worker, SECRET, &register("w", vec![]));
    assert!(matches!(reply, HelloReply::Rejected(Rejection::Protocol(_))), "{reply:?}");

    // A second driver under the same application id would take the first's executors:
    // it is refused at start, saying why.
    let mut twin = command(&["driver", "--app-id", "app", "--ui-port", "0", "--master-url", &cluster.url]);
    let out = twin.env("FLINT_SECRET", SECRET).output().unwrap();
    assert_eq!(out.status.code(), Some(14), "{}", lossy(&out.stderr));
    assert!(lossy(&out.stderr).contains("registered already"), "{}", lossy(&out.stderr));

    // None of it harmed the master: a real worker registers and serves.
    cluster.worker("real", 1);
    cluster.wait_workers(&["real"]);
    assert!(cluster.application("app")["connected"] == true);
}

#[test]
fn under_dynamic_allocation_the_fleet_on_the_workers_follows_the_load_and_is_given_back() {
    let mut cluster = Standalone::start();
    let workers = [cluster.worker("w1", 2), cluster.worker("w2", 2)];
    cluster.wait_workers(&["w1", "w2"]);
    let app = cluster.app(
        "elastic",
        &[
            "flint.executor.cores=1",
            "flint.dynamicAllocation.enabled=true",
            "flint.dynamicAllocation.maxExecutors=3",
            "flint.dynamicAllocation.executorIdleTimeout=2s",
            "flint.dynamicAllocation.cooldown=1s",
        ],
    );
    let running = || workers.iter().map(|w| children_of(*w).len()).sum::<usize>();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(running(), 0, "minExecutors=0: nothing starts before there is work");

    let report = ok_json(&app.submit(&PI).wait_with_output().unwrap());
    assert_eq!(report["result"], answer(&PI), "the exact answer");
    let status = app.status();
    let started = status["executors"].as_array().unwrap().len();
    assert!((2..=3).contains(&started), "the backlog brought up more than one, at most 3: {status}");

    // Idle past the timeout: every executor is given back, its process gone from its
    // worker, and the master holds nothing for the application.
    let given_back = eventually(Duration::from_secs(20), || {
        let view = cluster.application("elastic");
        (running() == 0 && view["executors"].as_array().is_some_and(Vec::is_empty)).then_some(())
    });
    assert!(given_back.is_some(), "{}\n{}", cluster.api("/api/v1/status"), cluster.logs());
    for w in cluster.api("/api/v1/workers").as_array().unwrap() {
        assert_eq!(w["cores_free"], 2, "{w}");
    }
}

#[test]
fn executors_no_worker_can_start_stop_being_asked_for_and_the_job_says_why() {
    let mut cluster = Standalone::start();
    // The worker cannot make the application's folder: a file stands where it goes, as
    // a full or broken disk would stop it.
    std::fs::create_dir_all(cluster.work_dir("w1")).unwrap();
    std::fs::write(cluster.work_dir("w1").join("stuck"), "not a folder").unwrap();
    cluster.worker("w1", 2);
    cluster.wait_workers(&["w1"]);
    let app = cluster.app(
        "stuck",
        &[
            "flint.executor.cores=1",
            "flint.dynamicAllocation.enabled=true",
            "flint.dynamicAllocation.maxStartFailures=3",
            "flint.dynamicAllocation.startBackoff=100ms",
            "flint.dynamicAllocation.schedulerBacklogTimeout=100ms",
        ],
    );
    let out = app.submit(&["examples/pi", "--partitions", "4", "--json"]).wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", lossy(&out.stderr));
    let report = json(&out);
    let reason = report["failure"]["reason"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(reason.contains("cannot make") && reason.contains("maxStartFailures"), "{report}");
    // Three starts asked of the master, then no more however long.
    std::thread::sleep(Duration::from_secs(1));
    let master = cluster.master.as_ref().unwrap().log_text();
    assert_eq!(master.matches("executor placed").count(), 3, "{master}");
    let status = app.status();
    assert!(status["allocation_stopped"].as_str().is_some_and(|r| r.contains("cannot make")), "{status}");
}

#[test]
fn executors_waiting_for_room_are_never_failed_starts_and_the_job_runs_once_room_comes() {
    let mut cluster = Standalone::start();
    cluster.worker("small-1", 1);
    cluster.worker("small-2", 1);
    cluster.wait_workers(&["small-1", "small-2"]);
    let app = cluster.app(
        "patient",
        &[
            "flint.executor.cores=2",
            "flint.dynamicAllocation.enabled=true",
            "flint.dynamicAllocation.maxExecutors=1",
            "flint.dynamicAllocation.schedulerBacklogTimeout=100ms",
            // Waiting ten times as long as a start may take is still no failed start.
            "flint.executor.startTimeout=1s",
        ],
    );
    let job = app.submit(&PI);
    let told =
        eventually(Duration::from_secs(20), || app.status()["executors_waiting"].as_str().map(str::to_owned));
    let told = told.unwrap_or_else(|| panic!("no reason in the status: {}", app.status()));
    assert!(told.contains("needs 2 cores"), "{told}");
    std::thread::sleep(Duration::from_secs(10));
    let status = app.status();
    assert_eq!(status["allocation_stopped"], Value::Null, "still asking: {status}");
    assert!(
        status["executors_waiting"].as_str().is_some_and(|r| r.contains("needs 2 cores")),
        "{status}\n{}",
        app.driver.log_text()
    );
    let logs = app.driver.log_text();
    assert!(!logs.contains("did not register"), "no start counted as failed:\n{logs}");
    // Room comes: the waiting executor is placed there and the job ends exactly.
    cluster.worker("big", 2);
    let out = job.wait_with_output().unwrap();
    let report = ok_json(&out);
    assert_eq!(report["result"], answer(&PI), "the exact answer");
    // Its submitter was told why, once.
    let stderr = lossy(&out.stderr);
    assert_eq!(stderr.matches("waits for a worker: needs 2 cores").count(), 1, "{stderr}");
    assert!(stderr.starts_with("flint: executor dyn-1 waits for a worker"), "{stderr}");
    assert_eq!(app.status()["executors_waiting"], Value::Null);
}

/// A worker that lies, spoken by hand: it registers as `id` offering `cores` and saying
/// it runs `running`, heartbeats, and starts nothing it is sent, until dropped.
struct Liar {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<Option<flint_proto::standalone::ToWorker>>>,
}

impl Liar {
    fn start(
        url: &str,
        id: &str,
        cores: u32,
        running: Vec<flint_proto::standalone::RunningExecutor>,
    ) -> Liar {
        use flint_proto::standalone::{ToWorker, WorkerMessage};
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (url, id, flag) = (url.to_owned(), id.to_owned(), stop.clone());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let url: flint_net::DriverUrl = url.parse().unwrap();
                let (_endpoint, connection) =
                    flint_net::connect(&url, Duration::from_secs(5), Duration::from_secs(3)).await.unwrap();
                let secret = flint_net::Secret::new(SECRET);
                let role = flint_proto::wire::Role::Worker;
                let (_, mut send, mut recv) =
                    flint_net::hello(&connection, &secret, role, "", None, None).await.unwrap();
                // Each liar a process of its own, as far as the master can tell.
                static INSTANCES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1000);
                let instance = INSTANCES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let register = WorkerMessage::Register {
                    id: id.into(),
                    instance,
                    host: "liar".into(),
                    cores,
                    memory: 1 << 40,
                    running,
                };
                flint_net::write_frame(&mut send, &register).await.unwrap();
                let answer = flint_net::read_frame::<ToWorker>(&mut recv).await.ok().flatten();
                if !matches!(answer, Some(ToWorker::Registered { .. })) {
                    return answer;
                }
                let said = tokio::spawn(async move {
                    // Every order is read and ignored.
                    while let Ok(Some(_)) = flint_net::read_frame::<ToWorker>(&mut recv).await {}
                });
                while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                    if flint_net::write_frame(&mut send, &WorkerMessage::Heartbeat).await.is_err() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                said.abort();
                answer
            })
        });
        Liar { stop, thread: Some(thread) }
    }
}

impl Liar {
    /// What the master answered its registration, once it is over.
    fn thread_answer(mut self) -> Option<flint_proto::standalone::ToWorker> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().and_then(|t| t.join().ok()).flatten()
    }
}

impl Drop for Liar {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[test]
fn workers_started_side_by_side_with_the_defaults_each_serve_and_a_twin_id_is_refused() {
    let mut cluster = Standalone::start();
    // Three workers on one machine, as a user trying standalone starts them: no ids.
    for n in 0..3 {
        let work = cluster.work_dir(&format!("default-{n}"));
        let mut cmd = command(&["worker", "--master-url", &cluster.url, "--cores", "1", "--memory", "2g"]);
        cmd.args(["--host", "127.0.0.1", "--work-dir", work.to_str().unwrap()]).env("FLINT_SECRET", SECRET);
        let log = cluster.dir.path().join(format!("worker-default-{n}.log"));
        cluster.workers.push((format!("default-{n}"), Proc::spawn(cmd, log)));
    }
    let listed = eventually(Duration::from_secs(20), || {
        let workers = cluster.api("/api/v1/workers");
        (workers.as_array().unwrap().len() == 3).then_some(workers)
    })
    .unwrap_or_else(|| panic!("three workers: {}", cluster.logs()));
    let lives: Vec<Value> = listed.as_array().unwrap().iter().map(|w| w["incarnation"].clone()).collect();
    // A driver whose flint.local.dir is a path on its own machine: the workers'
    // executors keep their shuffle files under their workers' folders all the same.
    let driver_dir = cluster.dir.path().join("driver-local");
    std::fs::create_dir(&driver_dir).unwrap();
    let local = format!("flint.local.dir={}", driver_dir.display());
    let app = cluster.app("side-by-side", &["flint.executor.cores=1", "flint.executor.instances=3", &local]);
    app.wait_live(3);
    let words = cluster.dir.path().join("words.txt");
    common::corpus(&words, 1 << 20);
    let mr =
        ["examples/word-count-mr", "--input", words.to_str().unwrap(), "--reduce-partitions", "3", "--json"];
    let (pi, counted) = (app.submit(&PI), app.submit(&mr));
    assert_eq!(ok_json(&pi.wait_with_output().unwrap())["result"], answer(&PI));
    let reference = answer(&["examples/word-count", "--input", words.to_str().unwrap(), "--json"]);
    assert_eq!(ok_json(&counted.wait_with_output().unwrap())["result"], reference);
    assert!(
        entries(&driver_dir).is_empty(),
        "no shuffle file under the driver's path: {:?}",
        entries(&driver_dir)
    );
    for n in 0..3 {
        let app_dir = cluster.work_dir(&format!("default-{n}")).join("side-by-side");
        assert!(entries(&app_dir).iter().any(|e| e.starts_with("flint-shuffle-")), "{:?}", entries(&app_dir));
    }
    // A fourth worker naming one of theirs: refused, saying so; the three serve on.
    let taken = listed[0]["id"].as_str().unwrap().to_owned();
    let work = cluster.work_dir("twin");
    let out = command(&["worker", "--master-url", &cluster.url, "--worker-id", &taken, "--cores", "1"])
        .args(["--work-dir", work.to_str().unwrap()])
        .env("FLINT_SECRET", SECRET)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", lossy(&out.stderr));
    assert!(lossy(&out.stderr).contains(&format!("worker id {taken} is taken")), "{}", lossy(&out.stderr));
    let after = cluster.api("/api/v1/workers");
    let again: Vec<Value> = after.as_array().unwrap().iter().map(|w| w["incarnation"].clone()).collect();
    assert_eq!(again, lives, "no life of theirs was knocked out: {after}");
}

#[test]
fn liars_at_the_master_fill_no_more_than_their_bound_and_cost_a_driver_one_start() {
    use flint_proto::standalone::{RunningExecutor, ToWorker};
    let mut cluster = Standalone::start();
    // A liar that offers 65,536 cores, starts nothing, and claims the executor ids a
    // driver will ask for; beside it one honest worker.
    let claims = (1..=4)
        .map(|i| RunningExecutor {
            app: "victim".into(),
            executor: format!("dyn-{i}").into(),
            cores: 1,
            memory: 0,
        })
        .collect();
    let _liar = Liar::start(&cluster.url, "liar", 1 << 16, claims);
    cluster.worker("honest", 3);
    cluster.wait_workers(&["liar", "honest"]);
    let app = cluster.app(
        "victim",
        &["flint.executor.cores=1", "flint.executor.instances=2", "flint.executor.startTimeout=3s"],
    );
    let report = ok_json(&app.submit(&PI).wait_with_output().unwrap());
    assert_eq!(report["result"], answer(&PI), "the exact answer, from the honest worker's executors");
    let master = cluster.master.as_ref().unwrap().log_text();
    assert!(master.contains("never registered with its driver"), "{master}");
    let honest = cluster.api("/api/v1/workers");
    let honest = honest.as_array().unwrap().iter().find(|w| w["id"] == "honest").unwrap().clone();
    assert_eq!(honest["executors"].as_array().unwrap().len(), 2, "{honest}");
    // Workers naming thousands of made-up applications each: the master keeps its bound,
    // and a driver registering after them is served.
    let fake = |w: usize| -> Vec<RunningExecutor> {
        (0..4096)
            .map(|i| RunningExecutor {
                app: format!("fake-{w}-{i}").into(),
                executor: "e".into(),
                cores: 1,
                memory: 0,
            })
            .collect()
    };
    let floods: Vec<Liar> =
        (0..3).map(|w| Liar::start(&cluster.url, &format!("flood-{w}"), 1 << 16, fake(w))).collect();
    let apps = eventually(Duration::from_secs(20), || {
        let workers = cluster.api("/api/v1/workers").as_array().unwrap().len();
        (workers == 5).then(|| cluster.api("/api/v1/applications").as_array().unwrap().len())
    })
    .expect("the floods registered");
    assert!(apps <= 1024 + 1, "{apps} applications held");
    drop(floods);
    let late = cluster.app("late", &["flint.executor.cores=1", "flint.executor.instances=1"]);
    late.wait_live(1);
    assert_eq!(ok_json(&late.submit(&PI).wait_with_output().unwrap())["result"], answer(&PI));
    // A registration naming the liar's live id from another process is refused.
    let twin = Liar::start(&cluster.url, "liar", 1, Vec::new());
    let refused = twin.thread_answer();
    assert!(
        matches!(&refused, Some(ToWorker::Refused { reason }) if reason.contains("is taken")),
        "{refused:?}"
    );
}
