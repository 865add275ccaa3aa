//! `make bench`: Flint's performance figures, each beside a reference measured in the
//! same run, printed and written to `target/bench/results.json`.
//!
//! - instantiate + call a trivial component, warm (pooling allocator) — reference: the
//!   same with on-demand allocation; target ≤ 20 µs median
//! - Monte Carlo pi in wasm on 2 threads — reference: the same Rust compiled natively;
//!   target ≤ 1.3× native time
//! - 20,000 no-op tasks through driver → executor (2 slots) → driver, as processes over
//!   QUIC — reference: the same job on `flint run`'s in-process executor; target ≥ 20,000/s
//! - executor process start to registered — reference: starting and ending `flint
//!   --version`; target ≤ 200 ms
//! - an idle executor's resident memory — reference: the idle driver's; target ≤ 40 MiB
//! - `kill -9` of a busy executor to the first of its attempts relaunched elsewhere, with
//!   default settings — reference: `flint.network.idleTimeout`; target ≤ 5 s

#[path = "../examples/pi/src/count.rs"]
mod pi_kernel;

use flint_proto::Conf;
use flint_runtime::{Call, KillSwitch, Runtime, RuntimeConfig, TaskContext, TaskInput};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn component(name: &str) -> Vec<u8> {
    let path = root().join(format!("target/wasm32-wasip2/release/{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}; run `make examples` first", path.display()))
}

fn ctx(config: Conf, index: u32, count: u32) -> TaskContext {
    TaskContext {
        app_id: "bench".into(),
        job_id: "1".into(),
        task_index: index,
        task_count: count,
        attempt: 0,
        config: Arc::new(config),
        tokens: Arc::new(Vec::new()),
        memory_limit: None,
        deadline: Duration::from_secs(600),
        deadline_key: "flint.task.deadline",
        max_result_size: 64 << 20,
        kill: KillSwitch::default(),
    }
}

fn config(slots: u32) -> RuntimeConfig {
    RuntimeConfig {
        slots,
        instance_memory: 256 << 20,
        cache_dir: None,
        max_log_size: 1 << 20,
        pooling: true,
        component_cache: 256 << 20,
    }
}

fn runtime(slots: u32) -> Runtime {
    Runtime::new(config(slots)).expect("runtime starts")
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Median time of a fresh store + instantiate + call of the no-op component.
fn instantiate_median(rt: &Runtime, bytes: &[u8], rounds: usize) -> Duration {
    let noop = rt.load(bytes).unwrap();
    let c = ctx(Conf::new(), 0, 1);
    for _ in 0..200 {
        rt.call(&noop, &c, Call::Run(TaskInput::Index(0))).result.unwrap();
    }
    let samples = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            rt.call(&noop, &c, Call::Run(TaskInput::Index(0))).result.unwrap();
            t.elapsed()
        })
        .collect();
    median(samples)
}

/// Runs `tasks` pi tasks of `points` each on `threads` threads, pulling from a shared
/// counter; returns the total inside count and the wall time.
fn pi_parallel(threads: u32, tasks: u32, run: impl Fn(u32) -> u64 + Sync) -> (u64, Duration) {
    let next = std::sync::atomic::AtomicU32::new(0);
    let started = Instant::now();
    let inside = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut sum = 0;
                    loop {
                        let t = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if t >= tasks {
                            break sum;
                        }
                        sum += run(t);
                    }
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    (inside, started.elapsed())
}

fn main() {
    let mut results = serde_json::Map::new();

    // 1. Warm instantiate + call.
    let noop = component("noop");
    let pooled = instantiate_median(&runtime(2), &noop, 5000);
    let on_demand = instantiate_median(&on_demand_runtime(), &noop, 5000);
    println!(
        "instantiate+call (warm, no-op component): median {:.1} µs (target ≤ 20 µs); on-demand allocation {:.1} µs; ratio {:.2}×",
        us(pooled),
        us(on_demand),
        pooled.as_secs_f64() / on_demand.as_secs_f64()
    );
    results.insert(
        "instantiate_call_median_us".into(),
        json!({ "value": us(pooled), "target": 20.0, "reference_on_demand_us": us(on_demand),
                "ratio_to_reference": pooled.as_secs_f64() / on_demand.as_secs_f64() }),
    );

    // 2. Pi in wasm against the same code compiled natively, both on 2 threads.
    let (threads, tasks, points) = (2, 16, 10_000_000u64);
    let (native_inside, native) =
        pi_parallel(threads, tasks, |t| pi_kernel::count_inside(u64::from(t), points));
    let rt = runtime(threads);
    let pi = rt.load(&component("pi")).unwrap();
    let config: Conf = [("points".to_string(), points.to_string())].into();
    let (wasm_inside, wasm) = pi_parallel(threads, tasks, |t| {
        let out =
            rt.call(&pi, &ctx(config.clone(), t, tasks), Call::Run(TaskInput::Index(t))).result.unwrap();
        let count: serde_json::Value = serde_json::from_slice(&out).unwrap();
        count["inside"].as_u64().unwrap()
    });
    assert_eq!(native_inside, wasm_inside, "wasm and native count the same points");
    let total = f64::from(tasks) * points as f64 * 2.0;
    let ratio = wasm.as_secs_f64() / native.as_secs_f64();
    println!(
        "pi, {} M points on {threads} threads: wasm {:.3} s ({:.0} M points/s), native {:.3} s ({:.0} M points/s); wasm/native {ratio:.2}× (target ≤ 1.3×)",
        total / 2e6,
        wasm.as_secs_f64(),
        total / 2e6 / wasm.as_secs_f64(),
        native.as_secs_f64(),
        total / 2e6 / native.as_secs_f64(),
    );
    results.insert(
        "pi_wasm_vs_native".into(),
        json!({ "wasm_s": wasm.as_secs_f64(), "native_s": native.as_secs_f64(), "ratio": ratio, "target": 1.3,
                "points": total / 2.0, "threads": threads }),
    );

    cluster_figures(&mut results);
    failure_detection(&mut results);

    let dir = root().join("target/bench");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("results.json");
    std::fs::write(&path, serde_json::to_string_pretty(&results).unwrap()).unwrap();
    println!("wrote {}", path.display());
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The same runtime allocating instances on demand, as it does where the pool cannot
/// reserve its address space.
fn on_demand_runtime() -> Runtime {
    Runtime::new(RuntimeConfig { pooling: false, ..config(2) }).expect("runtime starts")
}

const SECRET: &str = "bench-secret";

fn flint() -> std::process::Command {
    let mut cmd = std::process::Command::new(root().join("target/release/flint"));
    cmd.env("FLINT_SECRET", SECRET).env("FLINT_CACHE_DIR", root().join("target/bench/cache"));
    cmd
}

/// Kills its process when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Starts an executor and returns it with the time from spawn to its "registered" line.
fn start_executor(url: &str) -> (Child, Duration) {
    use std::io::BufRead;
    let started = Instant::now();
    let mut child = flint()
        .args(["executor", "--driver-url", url, "--cores", "2"])
        .env("FLINT_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = std::io::BufReader::new(stderr).lines();
    let registered = loop {
        match lines.next() {
            Some(Ok(line)) if line.contains("registered") => break started.elapsed(),
            Some(_) => continue,
            None => panic!("the executor exited before registering"),
        }
    };
    // Keep draining its stderr so that it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (Child(child), registered)
}

fn noop_job_tasks_per_second(args: &[&str]) -> f64 {
    let out = flint().args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["result"], 20_000);
    20_000.0 / (report["elapsed_ms"].as_f64().unwrap() / 1e3)
}

/// `kill -9` of an executor running a long task, to the driver's "attempt relaunched"
/// line for it, on a cluster of its own with default settings.
fn failure_detection(results: &mut serde_json::Map<String, serde_json::Value>) {
    let dir = tempfile::tempdir().unwrap();
    let (url_file, log) = (dir.path().join("url"), dir.path().join("driver.log"));
    let _driver = Child(
        flint()
            .args(["driver", "--url-file", url_file.to_str().unwrap()])
            .env("FLINT_LOG", "info")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let started = Instant::now();
    let url = loop {
        if let Ok(url) = std::fs::read_to_string(&url_file) {
            break url;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "the driver did not start");
        std::thread::sleep(Duration::from_millis(10));
    };
    let (mut victim, _) = start_executor(&url);
    let (_survivor, _) = start_executor(&url);
    // Two long tasks: one lands on each executor (the most free slots first).
    let pi = root().join("examples/pi");
    let job = Child(
        flint()
            .args(["submit", "--driver-url", &url, pi.to_str().unwrap(), "--partitions", "2"])
            .args(["--conf", "points=400000000", "--json"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    let launched = |text: &str| text.matches("job submitted").count() == 1;
    while !launched(&read()) {
        assert!(started.elapsed() < Duration::from_secs(30), "the job did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    let killed = Instant::now();
    victim.0.kill().unwrap();
    let relaunched = loop {
        if read().contains("attempt relaunched") {
            break killed.elapsed();
        }
        assert!(killed.elapsed() < Duration::from_secs(60), "no relaunch within a minute:\n{}", read());
        std::thread::sleep(Duration::from_millis(5));
    };
    drop(job);
    let idle = flint_proto::Settings::default().network_idle_timeout;
    println!(
        "kill -9 of a busy executor to its attempt relaunched: {:.0} ms (target ≤ 5000 ms); flint.network.idleTimeout {} ms",
        relaunched.as_secs_f64() * 1e3,
        idle.as_millis()
    );
    results.insert(
        "kill_to_relaunch_ms".into(),
        json!({ "value": relaunched.as_secs_f64() * 1e3, "target": 5000.0, "reference_idle_timeout_ms": idle.as_millis() as f64 }),
    );
}

fn cluster_figures(results: &mut serde_json::Map<String, serde_json::Value>) {
    let dir = tempfile::tempdir().unwrap();
    let url_file = dir.path().join("url");
    let driver = Child(
        flint()
            .args(["driver", "--url-file", url_file.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let started = Instant::now();
    let url = loop {
        if let Ok(url) = std::fs::read_to_string(&url_file) {
            break url;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "the driver did not start");
        std::thread::sleep(Duration::from_millis(10));
    };

    // Start-up: the median of five executors, each stopped before the next.
    let mut startups = Vec::new();
    for _ in 0..5 {
        startups.push(start_executor(&url).1);
    }
    let bare = median(
        (0..5)
            .map(|_| {
                let t = Instant::now();
                assert!(flint().arg("--version").output().unwrap().status.success());
                t.elapsed()
            })
            .collect(),
    );
    let startup = median(startups);
    println!(
        "executor start to registered: median {:.0} ms (target ≤ 200 ms); bare process start {:.1} ms",
        startup.as_secs_f64() * 1e3,
        bare.as_secs_f64() * 1e3
    );
    results.insert(
        "executor_start_to_registered_ms".into(),
        json!({ "value": startup.as_secs_f64() * 1e3, "target": 200.0, "reference_process_start_ms": bare.as_secs_f64() * 1e3 }),
    );

    // Throughput and idle memory with one executor of 2 slots.
    let (executor, _) = start_executor(&url);
    std::thread::sleep(Duration::from_millis(500));
    let noop = root().join("target/wasm32-wasip2/release/noop.wasm");
    let noop = noop.to_str().unwrap();
    let _warm =
        noop_job_tasks_per_second(&["submit", "--driver-url", &url, noop, "--partitions", "20000", "--json"]);
    let cluster =
        noop_job_tasks_per_second(&["submit", "--driver-url", &url, noop, "--partitions", "20000", "--json"]);
    let embedded =
        noop_job_tasks_per_second(&["run", noop, "--partitions", "20000", "--cores", "2", "--json"]);
    println!(
        "20,000 no-op tasks, driver → executor (2 slots) → driver: {cluster:.0} tasks/s (target ≥ 20,000); in-process executor {embedded:.0} tasks/s; ratio {:.2}×",
        cluster / embedded
    );
    results.insert(
        "noop_tasks_per_second".into(),
        json!({ "value": cluster, "target": 20000.0, "reference_in_process": embedded, "ratio_to_reference": cluster / embedded }),
    );

    std::thread::sleep(Duration::from_secs(1));
    let (executor_rss, driver_rss) = (rss_kib(executor.0.id()), rss_kib(driver.0.id()));
    println!(
        "idle executor resident memory: {:.1} MiB (target ≤ 40 MiB); idle driver {:.1} MiB",
        executor_rss as f64 / 1024.0,
        driver_rss as f64 / 1024.0
    );
    results.insert(
        "idle_executor_rss_mib".into(),
        json!({ "value": executor_rss as f64 / 1024.0, "target": 40.0, "reference_driver_mib": driver_rss as f64 / 1024.0 }),
    );
}
