//! `make bench`: Flint's performance figures, each beside a reference measured in the
//! same run, printed and written to `target/bench/results.json`.
//!
//! - instantiate + call a trivial component, warm (pooling allocator) — reference: the
//!   same with on-demand allocation; target ≤ 20 µs median
//! - Monte Carlo pi in wasm on 2 threads — reference: the same Rust compiled natively;
//!   target ≤ 1.3× native time

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
        max_result_size: 64 << 20,
        kill: KillSwitch::default(),
    }
}

fn config(slots: u32) -> RuntimeConfig {
    RuntimeConfig { slots, instance_memory: 256 << 20, cache_dir: None, max_log_size: 1 << 20, pooling: true }
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
