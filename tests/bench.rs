//! `make bench`: Flint's performance figures, each beside a reference measured in the
//! same run, printed and written to `target/bench/results.json`.
//!
//! - instantiate + call a trivial component, warm (pooling allocator) — reference: the
//!   same with on-demand allocation; target ≤ 10 µs median
//! - Monte Carlo pi in wasm on 2 threads — reference: the same Rust compiled natively;
//!   target ≤ 1.1× native time
//! - shapes of compute in wasm (an integer hash loop, an f64 loop, a memory-bound
//!   table walk) — reference: the same source natively on the same 2 threads
//! - word count's compute alone, the corpus in memory, in the word-count component —
//!   reference: its counting code natively on the same 2 threads; also without epoch
//!   checks, what the deadline checks cost the loop every word-count figure stands on
//! - word count over 256 MiB of Zipf text in 32 splits, `flint run` and a cluster —
//!   reference: the example's counting code compiled natively with rayon on the same 2
//!   threads; target ≥ 0.5× native; and `flint run` by split count, 2 to 64
//! - the control core alone, no-op launches with 1,000 executors × 8 slots — reference:
//!   the same with 10 executors; target ≥ 200,000 launches/s
//! - one driver process with 1,000 simulated executors (real QUIC connections from this
//!   process, answering launches at once, no wasm): time for all to register (target ≤
//!   10 s), none expired over a minute of heartbeats, a 100,000-task no-op job across
//!   them, the driver's CPU and memory
//! - 20,000 no-op tasks through driver → executor (2 slots) → driver, as processes over
//!   QUIC — reference: Python's `multiprocessing.Pool(2)`, one call a task; target ≥ 2×
//! - executor process start to registered — reference: starting and ending `flint
//!   --version`; target ≤ 200 ms
//! - an idle executor's resident memory — reference: the idle driver's; target ≤ 40 MiB
//! - the local backend with dynamic allocation from an empty fleet: the time from a job's
//!   submission to its first executor registered (the backlog timeout included), and a
//!   burst of 1,000 short tasks on the empty fleet — reference: the same burst on the
//!   fleet it left warm
//! - bytes between processes: raw QUIC on loopback with the project's TLS and transport
//!   settings (the reference, taken again beside each round of a figure held to it);
//!   256 MiB read by a no-op job from the executor's disk, served by the driver
//!   (`flint://`) and uploaded by the client; a 200 MB result block; word count over each
//!   of those input forms, whole `flint submit` — reference: native word count; and
//!   `flint status` and a one-task `flint submit` against a warm cluster, whole process
//! - `kill -9` of a busy executor to the first of its attempts relaunched elsewhere, with
//!   default settings — reference: `flint.network.idleTimeout`; target ≤ 5 s
//! - speculation: 40 tasks on 8 executors, one throttled (SIGSTOP/SIGCONT) to a tenth of
//!   its speed, with speculation and with the job refusing it — reference: the same job
//!   on the healthy fleet; target ≤ 1.3× with copies ≤ 10% of the task-seconds

#[path = "../examples/pi/src/count.rs"]
mod pi_kernel;
#[path = "../examples/shapes/src/shapes.rs"]
mod shapes_kernel;
#[path = "../examples/sort/src/records.rs"]
mod sort_records;
#[path = "../examples/word-count/src/count.rs"]
mod word_kernel;

use flint_proto::Conf;
use flint_runtime::{Call, KillSwitch, Runtime, RuntimeConfig, TaskContext, TaskInput};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The flint binary benched: `target/release/flint`, or `FLINT_BIN` (another build, to
/// compare two in one sitting).
fn bin() -> PathBuf {
    std::env::var_os("FLINT_BIN").map_or_else(|| root().join("target/release/flint"), PathBuf::from)
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
        asked: Arc::default(),
        tokens: Arc::new(Vec::new()),
        memory_limit: None,
        deadline: Duration::from_secs(600),
        spent: Duration::ZERO,
        deadline_key: "flint.task.deadline",
        max_result_size: 64 << 20,
        kill: KillSwitch::default(),
        seed: None,
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

/// The median of figures such as rates.
fn median_f64(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
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

/// Median time of one call of the no-op component in a live instance, as a job's
/// tasks reuse theirs on a slot.
fn reused_call_median(rt: &Runtime, bytes: &[u8], rounds: usize) -> Duration {
    let noop = rt.load(bytes).unwrap();
    let c = ctx(Conf::new(), 0, 1);
    let mut instance = rt.instantiate(noop, &c).unwrap();
    for _ in 0..200 {
        instance.run(&c, TaskInput::Index(0)).result.unwrap();
    }
    let samples = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            instance.run(&c, TaskInput::Index(0)).result.unwrap();
            t.elapsed()
        })
        .collect();
    median(samples)
}

/// Runs tasks `0..tasks` on `threads` threads, each pulling the next from a shared
/// counter; returns what each task gave, by index, and the wall time.
fn in_parallel<T: Send>(threads: u32, tasks: u32, run: impl Fn(u32) -> T + Sync) -> (Vec<T>, Duration) {
    let next = std::sync::atomic::AtomicU32::new(0);
    let started = Instant::now();
    let mut done: Vec<(u32, T)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let t = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if t >= tasks {
                            break done;
                        }
                        done.push((t, run(t)));
                    }
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap()).collect()
    });
    let elapsed = started.elapsed();
    done.sort_by_key(|(t, _)| *t);
    (done.into_iter().map(|(_, out)| out).collect(), elapsed)
}

/// Runs `tasks` pi tasks of `points` each on `threads` threads; returns the total inside
/// count and the wall time.
fn pi_parallel(threads: u32, tasks: u32, run: impl Fn(u32) -> u64 + Sync) -> (u64, Duration) {
    let (inside, elapsed) = in_parallel(threads, tasks, run);
    (inside.into_iter().sum(), elapsed)
}

/// Whether the figure `name` was asked for: `make bench` runs them all;
/// `cargo bench -p flint-tests --bench bench -- NAME...` runs those named (instantiate,
/// pi, shapes, wordcount, core, fleet, python, elastic, cluster, failure, wire, sort, standalone,
/// speculation).
fn wanted(name: &str) -> bool {
    let names: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    names.is_empty() || names.iter().any(|n| n == name)
}

fn main() {
    let mut results = serde_json::Map::new();
    if wanted("instantiate") {
        instantiate_figure(&mut results);
    }
    if wanted("pi") {
        pi_figure(&mut results);
    }
    if wanted("shapes") {
        shapes_figure(&mut results);
        word_count_compute_figure(&mut results);
    }
    if wanted("wordcount") {
        word_count_figures(&mut results);
    }
    if wanted("core") {
        control_core_figures(&mut results);
    }
    if wanted("fleet") {
        fleet_figures(&mut results);
    }
    if wanted("python") {
        python_figures(&mut results);
    }
    if wanted("scale") {
        scale_figures(&mut results);
    }
    if wanted("elastic") {
        elastic_figures(&mut results);
    }
    if wanted("cluster") {
        cluster_figures(&mut results);
    }
    if wanted("failure") {
        failure_detection(&mut results);
    }
    if wanted("wire") {
        wire_figures(&mut results);
    }
    if wanted("sort") {
        sort_figures(&mut results);
    }
    if wanted("standalone") {
        standalone_figures(&mut results);
    }
    if wanted("speculation") {
        speculation_figures(&mut results);
    }

    let dir = root().join("target/bench");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("results.json");
    std::fs::write(&path, serde_json::to_string_pretty(&results).unwrap()).unwrap();
    println!("wrote {}", path.display());
}

/// Warm instantiate + call of the no-op component, pooled against on-demand allocation.
fn instantiate_figure(results: &mut serde_json::Map<String, serde_json::Value>) {
    let noop = component("noop");
    let pooled = instantiate_median(&runtime(2), &noop, 5000);
    let on_demand = instantiate_median(&on_demand_runtime(), &noop, 5000);
    let reused = reused_call_median(&runtime(2), &noop, 5000);
    println!(
        "instantiate+call (warm, no-op component): median {:.1} µs (target ≤ 10 µs); on-demand allocation {:.1} µs; ratio {:.2}×; a call in a reused instance {:.2} µs",
        us(pooled),
        us(on_demand),
        pooled.as_secs_f64() / on_demand.as_secs_f64(),
        us(reused)
    );
    results.insert(
        "instantiate_call_median_us".into(),
        json!({ "value": us(pooled), "target": 10.0, "reference_on_demand_us": us(on_demand),
                "ratio_to_reference": pooled.as_secs_f64() / on_demand.as_secs_f64(),
                "reused_instance_call_us": us(reused) }),
    );
}

/// Pi in wasm against the same code compiled natively, both on 2 threads.
fn pi_figure(results: &mut serde_json::Map<String, serde_json::Value>) {
    // 800 M points, as the issue's reference: 32 tasks of 25 M.
    let (threads, tasks, points) = (2, 32, 25_000_000u64);
    let native_run = || pi_parallel(threads, tasks, |t| pi_kernel::count_inside(u64::from(t), points));
    let bytes = component("pi");
    // As shipped, and without epoch checks (for the figure only): what the deadline
    // checks cost pi's loop.
    let shipped = runtime(threads);
    let unchecked = Runtime::for_measurement(config(threads), flint_runtime::Variant::NoEpochChecks).unwrap();
    let runtimes = [&shipped, &unchecked].map(|rt| (rt, rt.load(&bytes).unwrap()));
    let config: Conf = [("points".to_string(), points.to_string())].into();
    let wasm_run = |rt: &Runtime, pi| {
        pi_parallel(threads, tasks, |t| {
            let out =
                rt.call(pi, &ctx(config.clone(), t, tasks), Call::Run(TaskInput::Index(t))).result.unwrap();
            // The guest's output, `Count { inside, total }`, in the SDK's encoding.
            let (inside, _total): (u64, u64) = postcard::from_bytes(&out).unwrap();
            inside
        })
    };
    // Three rounds, each round all, so that each sees the machine as the others did;
    // each ratio is the median of its rounds' ratios, each to its own round's native run.
    let (mut natives, mut ratios) = (Vec::new(), [Vec::new(), Vec::new()]);
    for _ in 0..3 {
        let (native_inside, native) = native_run();
        natives.push(native);
        for ((rt, pi), ratios) in runtimes.iter().zip(&mut ratios) {
            let (inside, time) = wasm_run(rt, pi);
            ratios.push(time.as_secs_f64() / native.as_secs_f64());
            assert_eq!(native_inside, inside, "wasm and native count the same points");
        }
    }
    let native = median(natives);
    let [ratio, unchecked_ratio] = ratios.map(median_f64);
    // The shipped runtime's time, as its ratio says it.
    let wasm = native.mul_f64(ratio);
    let total = f64::from(tasks) * points as f64 * 2.0;
    println!(
        "pi, {} M points on {threads} threads: wasm {:.3} s ({:.0} M points/s), native {:.3} s ({:.0} M points/s); wasm/native time {ratio:.2}× (median of each round's ratio; target ≤ 1.1×), without epoch checks {unchecked_ratio:.2}×",
        total / 2e6,
        wasm.as_secs_f64(),
        total / 2e6 / wasm.as_secs_f64(),
        native.as_secs_f64(),
        total / 2e6 / native.as_secs_f64(),
    );
    results.insert(
        "pi_wasm_vs_native".into(),
        json!({ "wasm_s": wasm.as_secs_f64(), "native_s": native.as_secs_f64(), "ratio": ratio, "target": 1.1,
                "ratio_without_epoch_checks": unchecked_ratio, "points": total / 2.0, "threads": threads }),
    );
}

/// The engine settings the compute figures are also measured under, beside the runtime
/// as shipped: label, JSON key, variant.
const VARIANTS: [(&str, &str, flint_runtime::Variant); 3] = [
    ("without epoch checks", "without_epoch_checks", flint_runtime::Variant::NoEpochChecks),
    ("speed_and_size", "speed_and_size", flint_runtime::Variant::SpeedAndSize),
    ("baseline CPU", "baseline_cpu", flint_runtime::Variant::BaselineCpu),
];

/// Shapes of compute (`examples/shapes`) in wasm against the same source compiled
/// natively, all on 2 threads: in the runtime as shipped, and in runtimes that differ
/// by one engine setting each (for these figures only): no epoch checks (no deadline
/// could stop their guests), so that what the checks on loop back-edges cost shows
/// apart from Cranelift's code; Cranelift's `speed_and_size` level; and the baseline
/// CPU instead of the host's detected features.
fn shapes_figure(results: &mut serde_json::Map<String, serde_json::Value>) {
    let (threads, tasks) = (2, 16);
    let bytes = component("shapes");
    let runtimes = variant_runtimes(threads);
    let runtimes: Vec<_> = runtimes.iter().map(|rt| (rt, rt.load(&bytes).unwrap())).collect();
    let entries = 8 << 20;
    let mut figures = serde_json::Map::new();
    let shapes_run =
        [("hash", 50_000_000u64), ("float", 20_000_000), ("float-by-four", 20_000_000), ("table", 2_000_000)];
    for (shape, steps) in shapes_run {
        let native_run = || {
            pi_parallel(threads, tasks, |t| match shape {
                "hash" => shapes_kernel::hash(u64::from(t), steps),
                "float" => shapes_kernel::float(u64::from(t), steps),
                "float-by-four" => shapes_kernel::float_by_four(u64::from(t), steps),
                _ => shapes_kernel::table(u64::from(t), steps, entries),
            })
        };
        let config: Conf =
            [("shape".to_string(), shape.to_string()), ("n".to_string(), steps.to_string())].into();
        let wasm_run = |rt: &Runtime, component| {
            pi_parallel(threads, tasks, |t| {
                let call = Call::Run(TaskInput::Index(t));
                let out = rt.call(component, &ctx(config.clone(), t, tasks), call).result.unwrap();
                postcard::from_bytes::<u64>(&out).unwrap()
            })
        };
        // Rounds of each in turn, so that each sees the machine as the others did; each
        // ratio is the median of its rounds' ratios, each to its own round's native run.
        let mut natives = Vec::new();
        let mut ratios = vec![Vec::new(); runtimes.len()];
        for _ in 0..3 {
            let (native_sum, native) = native_run();
            natives.push(native);
            for ((rt, component), ratios) in runtimes.iter().zip(&mut ratios) {
                let (sum, time) = wasm_run(rt, component);
                assert_eq!(sum, native_sum, "{shape}: wasm computes what native does");
                ratios.push(time.as_secs_f64() / native.as_secs_f64());
            }
        }
        let (text, figure) = variant_figure(ratios, median(natives));
        println!(
            "compute shape {shape}, {tasks} tasks of {} M steps on {threads} threads (target ≤ 1.1× as shipped): {text}",
            steps / 1_000_000
        );
        figures.insert(shape.into(), figure);
    }
    results.insert("compute_shapes_wasm_vs_native".into(), serde_json::Value::Object(figures));
}

/// The runtime as shipped, then one for each of [`VARIANTS`], in that order.
fn variant_runtimes(threads: u32) -> Vec<Runtime> {
    let variants = VARIANTS.iter().map(|(.., v)| Runtime::for_measurement(config(threads), *v).unwrap());
    std::iter::once(runtime(threads)).chain(variants).collect()
}

/// A compute figure from its rounds: `ratios[0]` the runtime as shipped, then one a
/// variant of [`VARIANTS`], each a list of rounds' wasm-to-native time ratios. Says it
/// (each ratio the median of its rounds') and gives it as JSON.
fn variant_figure(ratios: Vec<Vec<f64>>, native: Duration) -> (String, serde_json::Value) {
    let ratios: Vec<f64> = ratios.into_iter().map(median_f64).collect();
    let native = native.as_secs_f64();
    let mut text = format!(
        "wasm {:.3} s, native {native:.3} s; wasm/native time {:.2}× (median of each round's ratio)",
        ratios[0] * native,
        ratios[0]
    );
    let mut figure = json!({ "wasm_s": ratios[0] * native, "native_s": native, "ratio": ratios[0] });
    for ((label, key, _), ratio) in VARIANTS.iter().zip(&ratios[1..]) {
        text.push_str(&format!(", {label} {ratio:.2}×"));
        figure[format!("ratio_{key}")] = json!(ratio);
    }
    (text, figure)
}

/// Word count's compute alone: the example component over the corpus held in memory,
/// 32 splits on 2 threads, against its counting code natively, each split counted into
/// a table of its own on both sides; in the runtime as shipped and under each of
/// [`VARIANTS`]. Without epoch checks says what the deadline checks cost this loop, the
/// compute every word-count figure of a cluster stands on.
fn word_count_compute_figure(results: &mut serde_json::Map<String, serde_json::Value>) {
    let (threads, splits) = (2, 32);
    let text = std::fs::read(corpus(CORPUS)).unwrap();
    let ranges = line_splits(&text, splits);
    let bytes = component("word_count");
    let runtimes = variant_runtimes(threads);
    let runtimes: Vec<_> = runtimes.iter().map(|rt| (rt, rt.load(&bytes).unwrap())).collect();
    let text = Arc::new(text);
    let native_run = || {
        in_parallel(threads, splits, |t| {
            let (start, end) = ranges[t as usize];
            let mut counts = word_kernel::Counts::default();
            word_kernel::count_words(&text[start..end], &mut counts);
            counts
        })
    };
    let wasm_run = |rt: &Runtime, component| {
        in_parallel(threads, splits, |t| {
            let (start, end) = ranges[t as usize];
            let source = Box::new(MemoryLines { text: text.clone(), at: start, end });
            let input =
                TaskInput::Lines { path: "corpus".into(), start: start as u64, end: end as u64, source };
            rt.call(component, &ctx(Conf::new(), t, splits), Call::Run(input)).result.unwrap()
        })
    };
    // Each ratio is the median of its rounds' ratios, each to its own round's native
    // run: this machine's speed drifts from round to round.
    let (mut natives, mut ratios) = (Vec::new(), vec![Vec::new(); runtimes.len()]);
    for _ in 0..3 {
        let (tables, native) = native_run();
        natives.push(native);
        let merged = tables.into_iter().reduce(word_kernel::merge).unwrap();
        let expected = (merged.values().sum::<u64>(), merged.len());
        for ((rt, component), ratios) in runtimes.iter().zip(&mut ratios) {
            let (outputs, time) = wasm_run(rt, component);
            ratios.push(time.as_secs_f64() / native.as_secs_f64());
            // Each task's table, in the SDK's encoding (postcard), merged here.
            let mut merged = std::collections::HashMap::<String, u64>::new();
            for output in outputs {
                let table: std::collections::HashMap<String, u64> = postcard::from_bytes(&output).unwrap();
                for (word, n) in table {
                    *merged.entry(word).or_default() += n;
                }
            }
            assert_eq!((merged.values().sum(), merged.len()), expected, "wasm counts what native does");
        }
    }
    let (text, figure) = variant_figure(ratios, median(natives));
    println!(
        "word count's compute, {} MiB in memory in {splits} splits on {threads} threads: {text}",
        CORPUS >> 20
    );
    results.insert("word_count_compute_wasm_vs_native".into(), figure);
}

/// The byte ranges of `text`'s splits as Flint plans them: of `splits` equal ranges,
/// the lines whose first byte falls in each.
fn line_splits(text: &[u8], splits: u32) -> Vec<(usize, usize)> {
    let line_start = |at: usize| match at {
        0 => 0,
        at => text[at - 1..].iter().position(|b| *b == b'\n').map_or(text.len(), |i| at + i),
    };
    let size = text.len() as u64;
    (0..u64::from(splits))
        .map(|i| {
            (
                line_start((size * i / u64::from(splits)) as usize),
                line_start((size * (i + 1) / u64::from(splits)) as usize),
            )
        })
        .collect()
}

/// A split held in memory, handed out as an executor hands out a split: whole lines,
/// about `max` bytes a batch (a longer line whole), an empty batch at the end.
struct MemoryLines {
    text: Arc<Vec<u8>>,
    at: usize,
    end: usize,
}

impl flint_runtime::LineSource for MemoryLines {
    fn next(&mut self, max: usize) -> Result<Vec<u8>, flint_proto::TaskFailure> {
        let rest = &self.text[self.at..self.end];
        let cut = if rest.len() <= max {
            rest.len()
        } else {
            match rest[..max].iter().rposition(|b| *b == b'\n') {
                Some(i) => i + 1,
                None => rest.iter().position(|b| *b == b'\n').map_or(rest.len(), |i| i + 1),
            }
        };
        self.at += cut;
        Ok(rest[..cut].to_vec())
    }
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

/// The text the word-count and wire figures read, and what each raw QUIC reference moves.
const CORPUS: u64 = 256 << 20;

fn flint() -> std::process::Command {
    let mut cmd = std::process::Command::new(bin());
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

/// Starts a driver (logging at info to `stderr`) and returns it with its URL and the
/// folder that holds its URL file and its temporary files (jobs' uploaded files, which
/// a killed driver leaves behind), removed with it.
fn start_driver(stderr: std::process::Stdio, args: &[&str]) -> (Child, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url_file = dir.path().join("url");
    let driver = Child(
        flint()
            .args(["driver", "--url-file", url_file.to_str().unwrap()])
            .args(args)
            .env("FLINT_LOG", "info")
            .env("TMPDIR", dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap(),
    );
    let url = url_from(&url_file, "the driver");
    (driver, url, dir)
}

/// The URL a driver or master writes to `file` once it listens.
fn url_from(file: &std::path::Path, what: &str) -> String {
    let started = Instant::now();
    loop {
        if let Ok(url) = std::fs::read_to_string(file) {
            return url;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{what} did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Starts an executor and returns it with the time from spawn to its "registered" line.
fn start_executor(url: &str, args: &[&str]) -> (Child, Duration) {
    let (child, registered, _) = start_counting_executor(url, args, None);
    (child, registered)
}

/// An executor (2 cores unless `args` say otherwise), and how many of its log lines
/// hold `needle`, if one is given, from its start on (its reducers' requests served, say).
fn start_counting_executor(
    url: &str,
    args: &[&str],
    needle: Option<&'static str>,
) -> (Child, Duration, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    use std::io::BufRead;
    use std::sync::atomic::{AtomicU64, Ordering};
    let started = Instant::now();
    let cores: &[&str] = if args.contains(&"--cores") { &[] } else { &["--cores", "2"] };
    let mut child = flint()
        .args(["executor", "--driver-url", url])
        .args(cores)
        .args(args)
        .env("FLINT_LOG", "info,flint_executor::peers=debug")
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
    let seen = std::sync::Arc::new(AtomicU64::new(0));
    let counted = seen.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if needle.is_some_and(|needle| line.contains(needle)) {
                counted.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    (Child(child), registered, seen)
}

/// The reference for no-op tasks: 20,000 calls of a function returning 1 through a
/// Python `multiprocessing.Pool` of 2 processes, warm, each call sent as its own task
/// (`chunksize=1`: `map`'s default would send 2,500 calls as one message, which is
/// what a Flint job of 8 partitions does, not one of 20,000).
fn python_pool_tasks_per_second() -> f64 {
    const SCRIPT: &str = r#"
import multiprocessing, time
def noop(i):
    return 1
if __name__ == "__main__":
    with multiprocessing.Pool(2) as pool:
        pool.map(noop, range(2000), chunksize=1)
        rates = []
        for _ in range(3):
            t = time.perf_counter()
            assert sum(pool.map(noop, range(20000), chunksize=1)) == 20000
            rates.append(20000 / (time.perf_counter() - t))
    print(sorted(rates)[1])
"#;
    let out = std::process::Command::new("python3").args(["-c", SCRIPT]).output().expect("python3 runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
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
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("driver.log");
    let (_driver, url, _dir) = start_driver(std::fs::File::create(&log).unwrap().into(), &[]);
    let started = Instant::now();
    let (mut victim, _) = start_executor(&url, &[]);
    let (_survivor, _) = start_executor(&url, &[]);
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
    let (driver, url, _dir) = start_driver(std::process::Stdio::null(), &[]);

    // Start-up: the median of five executors, each stopped before the next.
    let mut startups = Vec::new();
    for _ in 0..5 {
        startups.push(start_executor(&url, &[]).1);
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
    let (executor, _) = start_executor(&url, &[]);
    std::thread::sleep(Duration::from_millis(500));
    let noop = root().join("target/wasm32-wasip2/release/noop.wasm");
    let noop = noop.to_str().unwrap();
    let _warm =
        noop_job_tasks_per_second(&["submit", "--driver-url", &url, noop, "--partitions", "20000", "--json"]);
    let median_rate = |args: &[&str]| median_f64((0..3).map(|_| noop_job_tasks_per_second(args)).collect());
    let cluster = median_rate(&["submit", "--driver-url", &url, noop, "--partitions", "20000", "--json"]);
    let embedded = median_rate(&["run", noop, "--partitions", "20000", "--cores", "2", "--json"]);
    // The same job with a fresh instance for every task, as before instances were reused.
    let fresh = median_rate(&[
        "submit",
        "--driver-url",
        &url,
        noop,
        "--partitions",
        "20000",
        "--conf",
        "flint.task.instanceReuse=1",
        "--json",
    ]);
    let python = python_pool_tasks_per_second();
    // What the user waits for: the whole `flint submit` process, connection and report
    // included.
    let whole = 20_000.0
        / whole_command(&["submit", "--driver-url", &url, noop, "--partitions", "20000", "--json"], 3)
            .as_secs_f64();
    println!(
        "20,000 no-op tasks, whole flint submit process: {whole:.0} tasks/s, {:.2}× Python multiprocessing.Pool(2) (target ≥ 2×)",
        whole / python
    );
    println!(
        "20,000 no-op tasks, driver → executor (2 slots) → driver: {cluster:.0} tasks/s, {:.2}× Python multiprocessing.Pool(2) at {python:.0} tasks/s (target ≥ 2×); in-process executor {embedded:.0} tasks/s; a fresh instance per task (flint.task.instanceReuse=1) {fresh:.0} tasks/s, reuse {:.2}× faster",
        cluster / python,
        cluster / fresh
    );
    results.insert(
        "noop_tasks_per_second".into(),
        json!({ "value": cluster, "reference_python_pool": python, "ratio_to_reference": cluster / python,
                "target_ratio": 2.0, "in_process": embedded, "fresh_instance_per_task": fresh,
                "whole_process": whole, "whole_process_ratio": whole / python }),
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

/// A deterministic text of `size` bytes: lines of up to 12 words drawn from a 100,000
/// word vocabulary with a Zipf distribution (the word of rank r has weight 1/r, as in
/// natural text), words of 1 to 4 letters.
fn corpus(size: u64) -> PathBuf {
    let path = root().join(format!("target/bench/zipf100k-{}m.txt", size >> 20));
    if std::fs::metadata(&path).is_ok_and(|m| m.len() == size) {
        return path;
    }
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut text = Vec::with_capacity(size as usize + 128);
    let mut rng: u64 = 42;
    let mut next = |bound: u64| {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((rng >> 33) * bound) >> 31
    };
    while (text.len() as u64) < size {
        let words = next(13);
        for w in 0..words {
            if w > 0 {
                text.push(b' ');
            }
            let mut id = (1e5f64.powf(next(1 << 30) as f64 / f64::from(1 << 30)) - 1.0) as u64;
            loop {
                text.push(b'a' + (id % 26) as u8);
                id /= 26;
                if id == 0 {
                    break;
                }
            }
        }
        text.push(b'\n');
    }
    // Cut at the last line end within `size`, padded with newlines to exactly `size`.
    let end = text[..size as usize].iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    text.truncate(end);
    text.resize(size as usize, b'\n');
    std::fs::write(&path, &text).unwrap();
    path
}

/// The native reference: the example's counting code on `threads` threads (rayon), each
/// split read from the file as a task reads it, tables folded per thread then merged.
fn native_word_count(path: &std::path::Path, splits: u64, threads: usize) -> (word_kernel::Counts, Duration) {
    use rayon::prelude::*;
    use std::os::unix::fs::FileExt;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    let started = Instant::now();
    let file = std::fs::File::open(path).unwrap();
    let size = file.metadata().unwrap().len();
    let counts = pool.install(|| {
        (0..splits)
            .into_par_iter()
            .fold(word_kernel::Counts::default, |mut acc, i| {
                // The lines whose first byte falls in [start, end), as Flint splits files.
                let (start, end) = (size * i / splits, size * (i + 1) / splits);
                let from = if start == 0 { 0 } else { next_line_start(&file, start - 1, size) };
                let until = if end >= size { size } else { next_line_start(&file, end - 1, size) };
                let mut text = vec![0u8; until.saturating_sub(from) as usize];
                file.read_exact_at(&mut text, from).unwrap();
                word_kernel::count_words(&text, &mut acc);
                acc
            })
            .reduce(word_kernel::Counts::default, word_kernel::merge)
    });
    (counts, started.elapsed())
}

/// The offset just past the first newline at or after `at`, or `size` when none follows.
fn next_line_start(file: &std::fs::File, mut at: u64, size: u64) -> u64 {
    use std::os::unix::fs::FileExt;
    let mut chunk = [0u8; 4096];
    while at < size {
        let n = file.read_at(&mut chunk, at).unwrap();
        if let Some(p) = chunk[..n].iter().position(|b| *b == b'\n') {
            return at + p as u64 + 1;
        }
        at += n as u64;
    }
    size
}

/// The sort example over about 1 GiB of generated 100-byte records (16 maps into 8
/// range partitions) against the same records generated and sorted natively on two
/// threads; the whole `flint run` process timed and its peak resident memory read as it
/// runs, beside the in-job time.
fn sort_figures(results: &mut serde_json::Map<String, serde_json::Value>) {
    use rayon::prelude::*;
    const MAPS: u32 = 16;
    const PER_MAP: u64 = 671_089; // 16 × 671,089 × 100 bytes ≈ 1 GiB
    let bytes = f64::from(MAPS) * PER_MAP as f64 * 100.0;
    let mib = bytes / f64::from(1 << 20);
    let native = || {
        let started = Instant::now();
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let (sorted, checksum) = pool.install(|| {
            let mut records: Vec<[u8; 100]> = (0..MAPS)
                .into_par_iter()
                .flat_map_iter(|map| {
                    let mut out = Vec::with_capacity(PER_MAP as usize);
                    sort_records::generate(map, PER_MAP, |k, v| {
                        let mut r = [0u8; 100];
                        r[..10].copy_from_slice(k);
                        r[10..].copy_from_slice(v);
                        out.push(r);
                    });
                    out
                })
                .collect();
            records.par_sort_unstable_by(|a, b| a[..10].cmp(&b[..10]));
            let checksum =
                records.iter().fold(0u64, |acc, r| acc.wrapping_add(sort_records::share(&r[..10], &r[10..])));
            (records.len(), checksum)
        });
        (started.elapsed(), sorted, checksum)
    };
    let job = root().join("examples/sort");
    let per_map = format!("records_per_map={PER_MAP}");
    let run = || {
        let mut child = flint()
            .args([
                "run",
                job.to_str().unwrap(),
                "--partitions",
                &MAPS.to_string(),
                "--reduce-partitions",
                "8",
            ])
            .args(["--cores", "2", "--conf", &per_map, "--json"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let status = format!("/proc/{}/status", child.id());
        let mut peak_kib = 0u64;
        while child.try_wait().unwrap().is_none() {
            if let Ok(text) = std::fs::read_to_string(&status)
                && let Some(line) = text.lines().find(|l| l.starts_with("VmHWM:"))
            {
                peak_kib = line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(peak_kib);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let wall = started.elapsed();
        let out = child.wait_with_output().unwrap();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["status"], "succeeded", "{report}");
        let in_job = Duration::from_secs_f64(report["elapsed_ms"].as_f64().unwrap() / 1e3);
        (report["result"].clone(), wall, in_job, peak_kib)
    };
    let (mut natives, mut walls, mut in_jobs, mut peaks) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..3 {
        let (time, count, checksum) = native();
        natives.push(time);
        let (result, wall, in_job, peak) = run();
        assert_eq!(result["ordered"], true);
        assert_eq!(result["records"], count as u64);
        assert_eq!(result["checksum"], format!("{checksum:016x}"), "the sort keeps every record");
        walls.push(wall);
        in_jobs.push(in_job);
        peaks.push(peak);
    }
    let (native, wall, in_job) = (median(natives), median(walls), median(in_jobs));
    let peak_mib = *peaks.iter().max().unwrap() as f64 / 1024.0;
    let rate = |d: Duration| mib / d.as_secs_f64();
    println!(
        "sort, {mib:.0} MiB of 100-byte records (16 maps into 8 range partitions), flint run on 2 cores: {:.0} MiB/s whole process ({:.2}× native), {:.0} MiB/s in the job; native generate + parallel sort {:.0} MiB/s (target ≥ 0.4× native); peak resident {peak_mib:.0} MiB; one fetch request per (reducer, holding executor)",
        rate(wall),
        native.as_secs_f64() / wall.as_secs_f64(),
        rate(in_job),
        rate(native),
    );
    results.insert(
        "sort_mib_per_s".into(),
        json!({ "flint_run_process": rate(wall), "flint_run_in_job": rate(in_job), "native": rate(native),
                "ratio": native.as_secs_f64() / wall.as_secs_f64(), "target_ratio": 0.4, "peak_rss_mib": peak_mib }),
    );
}

/// A word count job's report: its time and its summary.
fn flint_word_count(args: &[&str]) -> (serde_json::Value, Duration) {
    let out = flint().args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let elapsed = Duration::from_secs_f64(report["elapsed_ms"].as_f64().unwrap() / 1e3);
    (report["result"].clone(), elapsed)
}

/// Word count over 256 MiB in 32 splits: `flint run` and a cluster against the same
/// counting code compiled natively on the same two threads; then `flint run` as the
/// split count grows.
fn word_count_figures(results: &mut serde_json::Map<String, serde_json::Value>) {
    const SIZE: u64 = CORPUS;
    let path = corpus(SIZE);
    let input = path.to_str().unwrap();
    let mib = SIZE as f64 / f64::from(1 << 20);
    let (counts, _) = native_word_count(&path, 32, 2);
    let expected_total: u64 = counts.values().sum();
    let check = |summary: &serde_json::Value, what: &str| {
        assert_eq!(summary["total_words"], expected_total, "{what}: total words");
        assert_eq!(summary["distinct_words"], counts.len() as u64, "{what}: distinct words");
    };
    let job = root().join("examples/word-count");
    let job = job.to_str().unwrap();
    // `combine`: the splits a slot runs are counted into one table there (the job
    // implements `Combine`); without it, each split's table is sent and merged.
    let run_with = |splits: &str, combine: bool| {
        let combine = format!("flint.task.combine={combine}");
        let (summary, time) = flint_word_count(&[
            "run",
            job,
            "--input",
            input,
            "--partitions",
            splits,
            "--cores",
            "2",
            "--conf",
            &combine,
            "--json",
        ]);
        check(&summary, &format!("flint run, {splits} splits, {combine}"));
        time
    };
    let run = |splits: &str| run_with(splits, true);
    let roots = format!("flint.input.roots={}", path.parent().unwrap().display());
    let (_driver, url, _dir) = start_driver(std::process::Stdio::null(), &["--conf", &roots]);
    let (_executor, _) = start_executor(&url, &[]);
    // Read by path, as `flint run` reads it: a filesystem the executor shares.
    let shared = format!("file://{input}");
    let submit = || {
        let (summary, time) = flint_word_count(&[
            "submit",
            "--driver-url",
            &url,
            job,
            "--input",
            &shared,
            "--partitions",
            "32",
            "--json",
        ]);
        check(&summary, "cluster");
        time
    };
    // The same count as map/reduce: maps emit (word, 1) combined where they run, eight
    // reduce partitions sum them; its answer must be word-count's.
    let mr_job = root().join("examples/word-count-mr");
    let mr_job = mr_job.to_str().unwrap();
    let mr = |command: &[&str]| {
        let common = ["--input", input, "--partitions", "32", "--reduce-partitions", "8", "--json"];
        let (summary, time) = flint_word_count(&[command, &[mr_job], &common].concat());
        check(&summary, &format!("map/reduce {}", command[0]));
        time
    };
    // Rounds of all of them, so that each sees the machine as the others did.
    let (mut natives, mut embeddeds, mut clusters, mut uncombined) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut mr_runs, mut mr_clusters) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        natives.push(native_word_count(&path, 32, 2).1);
        embeddeds.push(run("32"));
        clusters.push(submit());
        uncombined.push(run_with("32", false));
        mr_runs.push(mr(&["run", "--cores", "2"]));
        mr_clusters.push(mr(&["submit", "--driver-url", &url]));
    }
    let (mr_run, mr_cluster) = (median(mr_runs), median(mr_clusters));
    // The same job on two executors of one core each (the same two cores): each reduce
    // task reads its own executor's slices in place and asks the other executor once.
    let (_driver2, url2, _dir2) = start_driver(std::process::Stdio::null(), &["--conf", &roots]);
    const SERVED: &str = "serving a reducer's request";
    let pair: Vec<_> =
        (0..2).map(|_| start_counting_executor(&url2, &["--cores", "1"], Some(SERVED))).collect();
    let served = || pair.iter().map(|(_, _, n)| n.load(std::sync::atomic::Ordering::Relaxed)).sum::<u64>();
    let before = served();
    let mr_pair = median((0..3).map(|_| mr(&["submit", "--driver-url", &url2])).collect());
    // Eight reduce tasks a run, three runs.
    let requests_per_reducer = (served() - before) as f64 / 24.0;
    let (native, embedded, cluster) = (median(natives), median(embeddeds), median(clusters));
    let uncombined = median(uncombined);
    let rate = |d: Duration| mib / d.as_secs_f64();
    println!(
        "word count, 256 MiB in 32 splits on 2 threads: flint run {:.0} MiB/s ({:.2}× native), cluster {:.0} MiB/s ({:.2}× native), native Rust (rayon) {:.0} MiB/s (target ≥ 0.5× native)",
        rate(embedded),
        native.as_secs_f64() / embedded.as_secs_f64(),
        rate(cluster),
        native.as_secs_f64() / cluster.as_secs_f64(),
        rate(native),
    );
    println!(
        "word count, 256 MiB in 32 splits, flint run without combining (flint.task.combine=false): {:.0} MiB/s ({:.2}× native); combining is {:.2}× faster",
        rate(uncombined),
        native.as_secs_f64() / uncombined.as_secs_f64(),
        uncombined.as_secs_f64() / embedded.as_secs_f64(),
    );
    println!(
        "map/reduce word count (word-count-mr, 32 maps into 8 reduce partitions), 256 MiB: flint run {:.0} MiB/s ({:.2}× native), cluster of one executor {:.0} MiB/s ({:.2}× native), of two executors × 1 core {:.0} MiB/s ({:.2}× native, {requests_per_reducer:.2} fetch requests per reduce task) (target ≥ 0.5× native)",
        rate(mr_run),
        native.as_secs_f64() / mr_run.as_secs_f64(),
        rate(mr_cluster),
        native.as_secs_f64() / mr_cluster.as_secs_f64(),
        rate(mr_pair),
        native.as_secs_f64() / mr_pair.as_secs_f64(),
    );
    results.insert(
        "map_reduce_word_count_mib_per_s".into(),
        json!({ "flint_run": rate(mr_run), "cluster": rate(mr_cluster), "native": rate(native),
                "cluster_two_executors": rate(mr_pair), "fetch_requests_per_reduce_task": requests_per_reducer,
                "ratio_flint_run": native.as_secs_f64() / mr_run.as_secs_f64(),
                "ratio_cluster": native.as_secs_f64() / mr_cluster.as_secs_f64(), "target_ratio": 0.5 }),
    );
    let sweep: Vec<(u32, f64)> = [2u32, 8, 32, 64]
        .iter()
        .map(|n| (*n, median((0..3).map(|_| run(&n.to_string())).collect()).as_secs_f64()))
        .collect();
    println!(
        "word count, 256 MiB, flint run by split count: {}",
        sweep.iter().map(|(n, t)| format!("{n} splits {t:.2} s")).collect::<Vec<_>>().join(", ")
    );
    results.insert(
        "word_count_mib_per_s".into(),
        json!({ "flint_run": rate(embedded), "cluster": rate(cluster), "native": rate(native),
                "ratio_flint_run": native.as_secs_f64() / embedded.as_secs_f64(),
                "ratio_cluster": native.as_secs_f64() / cluster.as_secs_f64(), "target_ratio": 0.5,
                "flint_run_uncombined": rate(uncombined),
                "seconds_by_splits": sweep.iter().map(|(n, t)| (n.to_string(), json!(t))).collect::<serde_json::Map<_, _>>() }),
    );
}

/// The control core the core figures measure: a static fleet, a two-minute heartbeat
/// timeout.
fn bench_core() -> flint_core::ControlCore {
    use flint_core::{ControlCore, CoreConfig, Policy};
    ControlCore::new(CoreConfig {
        policy: Policy { exclude_after: Some(2), pipeline: 8, max_executor_losses: None, speculation: None },
        heartbeat_timeout: Duration::from_secs(120),
        bootstrap_timeout: Duration::from_secs(60),
        allocation: None,
        backend: "static",
        decommission_timeout: Duration::from_secs(20),
        max_stage_attempts: 4,
    })
}

/// Launches a second through the control core alone (no IO, no wasm): `executors` of
/// `slots` slots each, registered; one job of `tasks` tasks whose every launch is
/// answered at once with a success; a heartbeat from one executor in turn every 100
/// reports.
fn core_launch_rate(executors: u32, slots: u32, tasks: u32) -> f64 {
    use flint_core::{Action, Event, ExecutorInfo};
    let now = Instant::now();
    let mut core = bench_core();
    let mut lives = Vec::new();
    for i in 0..executors {
        let (id, incarnation) = core.reserve(now, Some(format!("exec-{i}").into()), None).unwrap();
        let info = ExecutorInfo { host: "sim".into(), cores: slots, memory: 1 << 30, slots };
        core.handle(now, Event::Registered { id: id.clone(), incarnation, info });
        lives.push((id, incarnation));
    }
    let mut pending = std::collections::VecDeque::new();
    let mut launches = 0u64;
    let mut take = |actions: Vec<Action>, pending: &mut std::collections::VecDeque<_>| {
        let mut done = false;
        for action in actions {
            match action {
                Action::Launch { executor, incarnation, attempts } => {
                    launches += attempts.len() as u64;
                    pending.extend(attempts.into_iter().map(|a| (executor.clone(), incarnation, a.attempt)));
                }
                Action::JobSucceeded { .. } => done = true,
                _ => {}
            }
        }
        done
    };
    let started = Instant::now();
    take(
        core.handle(
            now,
            Event::JobSubmitted {
                job: flint_proto::JobId(1),
                stages: vec![flint_proto::StageSpec::tasks(tasks)],
                max_failures: 4,
                period: None,
                speculate: false,
                remote_input: false,
            },
        ),
        &mut pending,
    );
    let mut reports = 0usize;
    let mut finished = false;
    while let Some((id, incarnation, attempt)) = pending.pop_front() {
        let elapsed = Duration::from_millis(1);
        finished |=
            take(core.handle(now, Event::TaskSucceeded { id, incarnation, attempt, elapsed }), &mut pending);
        reports += 1;
        if reports.is_multiple_of(100) {
            let (id, incarnation) = lives[reports / 100 % lives.len()].clone();
            core.handle(now, Event::Heartbeat { id, incarnation, progress: Vec::new() });
        }
    }
    assert!(finished, "the simulated job finished");
    assert_eq!(launches, u64::from(tasks));
    launches as f64 / started.elapsed().as_secs_f64()
}

/// The heartbeat of one executor in turn through the control core alone, `executors`
/// of them registered: each heartbeats every second of fake time (their beats spread
/// evenly) and the core's timeouts are handled whenever it asks, as the driver does.
/// Nanoseconds per heartbeat, over `beats` of them.
fn core_heartbeat_cost(executors: u32, beats: u32) -> f64 {
    use flint_core::{Event, ExecutorInfo};
    let mut now = Instant::now();
    let mut core = bench_core();
    let lives: Vec<_> = (0..executors)
        .map(|i| {
            let (id, incarnation) = core.reserve(now, Some(format!("exec-{i}").into()), None).unwrap();
            let info = ExecutorInfo { host: "sim".into(), cores: 8, memory: 1 << 30, slots: 8 };
            core.handle(now, Event::Registered { id: id.clone(), incarnation, info });
            (id, incarnation)
        })
        .collect();
    let step = Duration::from_secs(1) / executors;
    let started = Instant::now();
    for beat in 0..beats {
        now += step;
        let (id, incarnation) = lives[(beat % executors) as usize].clone();
        let actions = core.handle(now, Event::Heartbeat { id, incarnation, progress: Vec::new() });
        debug_assert!(actions.is_empty());
        if core.poll_timeout().is_some_and(|at| now >= at) {
            assert!(core.handle_timeout(now).is_empty(), "nobody expires");
        }
    }
    assert_eq!(core.live_executors(), executors);
    started.elapsed().as_nanos() as f64 / f64::from(beats)
}

/// The control core alone: launches a second with 1,000 and 10,000 executors × 8
/// slots, against the same with 10 executors; a heartbeat's cost with 10,000
/// executors against 1,000.
fn control_core_figures(results: &mut serde_json::Map<String, serde_json::Value>) {
    let rate = |executors| {
        let _warm = core_launch_rate(executors, 8, 20_000);
        median_f64((0..3).map(|_| core_launch_rate(executors, 8, 500_000)).collect())
    };
    let (small, large, largest) = (rate(10), rate(1000), rate(10_000));
    println!(
        "control core alone, 500,000 no-op launches: 1,000 executors × 8 slots {large:.0} launches/s (target ≥ 200,000); 10,000 executors {largest:.0}/s; 10 executors {small:.0}/s; ratios {:.2}× and {:.2}× (target ≥ 1.0)",
        large / small,
        largest / small
    );
    results.insert(
        "control_core_launches_per_second".into(),
        json!({ "value": large, "target": 200000.0, "reference_10_executors": small, "ratio_to_reference": large / small,
                "executors_10000": largest, "ratio_10000_to_reference": largest / small }),
    );
    let beat = |executors| median_f64((0..3).map(|_| core_heartbeat_cost(executors, 2_000_000)).collect());
    let (thousand, ten_thousand) = (beat(1000), beat(10_000));
    println!(
        "control core alone, 2,000,000 heartbeats with their timeouts: {ten_thousand:.0} ns each with 10,000 executors, {thousand:.0} ns with 1,000; ratio {:.2}× (target ≤ 1.5: flat per executor)",
        ten_thousand / thousand
    );
    results.insert(
        "control_core_heartbeat_ns".into(),
        json!({ "executors_10000": ten_thousand, "executors_1000": thousand, "ratio": ten_thousand / thousand, "target_ratio": 1.5 }),
    );
}

/// Bootstraps the simulated executors began again, a connection lost on the way.
static BOOTSTRAPS_AGAIN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One simulated executor: the real protocol over its own QUIC connection (hello, app
/// config, registration, heartbeats on their own stream), answering every launch at
/// once with the no-op job's output, as a real executor would report it. Its packets
/// come from `host` when given (an endpoint bound to an address of its own on
/// loopback, shared by the executors of one simulated host), else from an endpoint of
/// its own on the machine's address with `flint_net::connect`'s backoff. Says when it
/// registered on `registered`; runs until the connection ends.
async fn simulated_executor(
    url: flint_net::DriverUrl,
    host: Option<quinn::Endpoint>,
    idle: Duration,
    registered: tokio::sync::mpsc::UnboundedSender<Duration>,
) {
    use flint_net::{Secret, connect, hello, read_frame, write_frame};
    use flint_proto::wire::{DriverMessage, ExecutorMessage, Heartbeat, HelloReply, Registration, Role};
    use flint_proto::{Settings, StatusUpdate, TaskOutput, TaskState};
    let started = Instant::now();
    let secret = Secret::new(SECRET.as_bytes().to_vec());
    // Connect, hello, the application's configuration, registration: as a real
    // executor does, a connection lost on the way is tried again from the start.
    let bootstrap = async || -> Result<_, String> {
        let (endpoint, connection) = match &host {
            None => connect(&url, Duration::from_secs(30), idle).await.map_err(|e| e.to_string())?,
            Some(endpoint) => {
                let endpoint = endpoint.clone();
                let driver = tokio::net::lookup_host((url.host.as_str(), url.port))
                    .await
                    .map_err(|e| e.to_string())?
                    .find(|a| a.is_ipv4())
                    .ok_or("no IPv4 address for the driver")?;
                let connecting = endpoint.connect(driver, "flint-driver").map_err(|e| e.to_string())?;
                let connection = tokio::time::timeout(Duration::from_secs(10), connecting)
                    .await
                    .map_err(|_| "handshake timed out".to_owned())?
                    .map_err(|e| e.to_string())?;
                (endpoint, connection)
            }
        };
        let (reply, mut send, mut recv) =
            hello(&connection, &secret, Role::Executor, "", None, None).await.map_err(|e| e.to_string())?;
        let HelloReply::Welcome { executor_id: Some(id) } = reply else { panic!("not welcome: {reply:?}") };
        let fetch = ExecutorMessage::FetchConfig { resource_profile_id: 0 };
        write_frame(&mut send, &fetch).await.map_err(|e| e.to_string())?;
        let Some(DriverMessage::AppConfig(app)) =
            read_frame::<DriverMessage>(&mut recv).await.map_err(|e| e.to_string())?
        else {
            return Err("no app config".into());
        };
        let settings = Settings::from_conf(&app.properties).unwrap();
        let registration = Registration {
            host: "simulated".into(),
            cores: 8,
            memory: 8 << 30,
            slots: 8,
            pid: std::process::id(),
            attributes: Default::default(),
            log_urls: Default::default(),
            shuffle: None,
        };
        write_frame(&mut send, &ExecutorMessage::Register(registration)).await.map_err(|e| e.to_string())?;
        match read_frame::<DriverMessage>(&mut recv).await.map_err(|e| e.to_string())? {
            Some(DriverMessage::Registered { .. }) => Ok((endpoint, connection, id, settings, send, recv)),
            other => Err(format!("not registered: {other:?}")),
        }
    };
    let mut delay = Duration::from_millis(50);
    let (_endpoint, connection, id, settings, mut send, mut recv) = loop {
        match bootstrap().await {
            Ok(parts) => break parts,
            Err(e) if started.elapsed() < Duration::from_secs(120) => {
                if BOOTSTRAPS_AGAIN.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < 10 {
                    eprintln!("simulated executor: {e}; trying again");
                }
                // As `flint_net::connect` backs off: doubling to 2 s, with jitter.
                let jitter = {
                    use std::hash::{BuildHasher, Hasher};
                    let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
                    0.5 + (random % 1000) as f64 / 1000.0
                };
                tokio::time::sleep(delay.mul_f64(jitter)).await;
                delay = (delay * 2).min(Duration::from_secs(2));
            }
            Err(e) => panic!("no registration in two minutes: {e}"),
        }
    };
    let _ = registered.send(started.elapsed());
    let beats = {
        let connection = connection.clone();
        tokio::spawn(async move {
            let Ok(mut stream) = connection.open_uni().await else { return };
            let mut tick = tokio::time::interval(settings.heartbeat_interval);
            loop {
                tick.tick().await;
                let beat = Heartbeat::default();
                if write_frame(&mut stream, &beat).await.is_err() {
                    return;
                }
            }
        })
    };
    let output = postcard::to_allocvec(&1u64).unwrap();
    while let Ok(Some(message)) = read_frame::<DriverMessage>(&mut recv).await {
        if let DriverMessage::Launch(batch) = message {
            let reports = batch
                .into_iter()
                .map(|launch| StatusUpdate {
                    executor: id.clone(),
                    attempt: launch.attempt,
                    state: TaskState::Succeeded(TaskOutput::Inline(output.clone())),
                    log: String::new(),
                    elapsed: Duration::from_micros(10),
                    metrics: Default::default(),
                    asked: Vec::new(),
                })
                .collect();
            if write_frame(&mut send, &ExecutorMessage::Status(reports)).await.is_err() {
                break;
            }
        }
    }
    beats.abort();
}

/// CPU seconds a process has used, from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields.get(11..13).map_or(0.0, |f| f.iter().filter_map(|v| v.parse::<f64>().ok()).sum());
    ticks / 100.0
}

/// What one driver did with a fleet of simulated executors.
struct Fleet {
    registered_s: f64,
    registering_cpu_s: f64,
    bootstraps_again: usize,
    tasks_per_second: f64,
    live: usize,
    removed: usize,
    idle_cpu_percent: f64,
    rss_mib: f64,
}

/// One driver with `size` simulated executors of 8 slots each: registration, a no-op
/// job of 100 tasks per executor across them (the same work for each executor at any
/// fleet size), then a minute of heartbeats from all. The driver and every simulated
/// executor share this machine's cores, so QUIC's idle timeout is 30 s, not 3 s: at
/// 10,000 connections a starved process answers packets seconds late (with 3 s, 4,139
/// of 10,000 were dropped as idle during the job), which executors on hosts of their
/// own do not.
fn fleet(size: usize, own_hosts: bool) -> Fleet {
    /// Executors a simulated host runs: a big machine's worth of 8-slot executors, and
    /// within what the driver lets one source have in handshake at once.
    const PER_HOST: usize = 40;
    let total = (size * 100) as u32;
    const IDLE: Duration = Duration::from_secs(30);
    let (driver, url, _dir) =
        start_driver(std::process::Stdio::null(), &["--conf", "flint.network.idleTimeout=30s"]);
    let pid = driver.0.id();
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let parsed: flint_net::DriverUrl = url.parse().unwrap();
    // Bounded by the simulated executors: each says once that it registered.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let cpu_before = cpu_seconds(pid);
    let started = Instant::now();
    let again_before = BOOTSTRAPS_AGAIN.load(std::sync::atomic::Ordering::Relaxed);
    let hosts: Vec<quinn::Endpoint> = (0..if own_hosts { size.div_ceil(PER_HOST) } else { 0 })
        .map(|h| {
            // 127.1.0.1, 127.1.0.2, …: Linux answers for all of 127/8 on loopback.
            let ip = std::net::Ipv4Addr::new(127, 1, (h / 250) as u8, (h % 250 + 1) as u8);
            let _tokio = tokio.enter();
            flint_net::client_endpoint(parsed.fingerprint, IDLE, (ip, 0).into(), None).unwrap()
        })
        .collect();
    for i in 0..size {
        let host = own_hosts.then(|| hosts[i / PER_HOST].clone());
        tokio.spawn(simulated_executor(parsed.clone(), host, IDLE, tx.clone()));
    }
    let all_registered = tokio.block_on(async {
        for _ in 0..size {
            tokio::time::timeout(Duration::from_secs(120), rx.recv())
                .await
                .expect("all register within two minutes");
        }
        started.elapsed()
    });
    let cpu_registering = cpu_seconds(pid) - cpu_before;
    let again = BOOTSTRAPS_AGAIN.load(std::sync::atomic::Ordering::Relaxed) - again_before;

    // A no-op job across the fleet, every launch answered at once.
    let noop = root().join("target/wasm32-wasip2/release/noop.wasm");
    let tasks = total.to_string();
    let out = flint()
        .args(["submit", "--driver-url", &url, noop.to_str().unwrap(), "--partitions", &tasks, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["result"], total);
    let tasks_per_second = f64::from(total) / (report["elapsed_ms"].as_f64().unwrap() / 1e3);

    // A minute of heartbeats from the whole fleet: nobody expires.
    let heartbeat_from = Instant::now();
    let cpu_heartbeat_before = cpu_seconds(pid);
    std::thread::sleep(Duration::from_secs(60));
    let heartbeat_cpu = cpu_seconds(pid) - cpu_heartbeat_before;
    let heartbeat_secs = heartbeat_from.elapsed().as_secs_f64();
    let status = flint().args(["status", "--driver-url", &url, "--json"]).output().unwrap();
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let executors = status["executors"].as_array().unwrap();
    let live = executors.iter().filter(|e| e["removed"].is_null()).count();
    let removed = size - live;
    let mut why: std::collections::BTreeMap<String, usize> = Default::default();
    for e in executors.iter().filter(|e| !e["removed"].is_null()) {
        *why.entry(e["removed"].as_str().unwrap_or("?").chars().take(120).collect()).or_default() += 1;
    }
    if removed > 0 {
        println!("{removed} of {size} executors removed; of those the driver still lists, why: {why:#?}");
    }
    let rss_mib = rss_kib(pid) as f64 / 1024.0;
    drop(tokio);
    Fleet {
        registered_s: all_registered.as_secs_f64(),
        registering_cpu_s: cpu_registering,
        bootstraps_again: again,
        tasks_per_second,
        live,
        removed,
        idle_cpu_percent: 100.0 * heartbeat_cpu / heartbeat_secs,
        rss_mib,
    }
}

/// One driver with 1,000 simulated executors, then another with 10,000: registration,
/// launches across them against the smaller fleet's, heartbeats at rest, memory per
/// executor.
fn fleet_figures(results: &mut serde_json::Map<String, serde_json::Value>) {
    let small = fleet(1000, true);
    let large = fleet(10_000, true);
    for (size, f, target_s) in [(1000, &small, 10.0), (10_000, &large, 30.0)] {
        println!(
            "driver with {size} simulated executors × 8 slots: all registered in {:.2} s (target ≤ {target_s} s), {:.2} CPU s, {} bootstraps begun again; {} no-op tasks (100 an executor) at {:.0}/s; after a minute {} live, {} removed (target 0); heartbeats cost the driver {:.1}% of a core (target < 50%); resident memory {:.0} MiB",
            f.registered_s,
            f.registering_cpu_s,
            f.bootstraps_again,
            size * 100,
            f.tasks_per_second,
            f.live,
            f.removed,
            f.idle_cpu_percent,
            f.rss_mib
        );
        assert_eq!(f.removed, 0, "executors expired with a fleet of {size}");
        results.insert(
            format!("fleet_{size}_executors"),
            json!({ "registered_s": f.registered_s, "target_registered_s": target_s,
                    "registering_cpu_s": f.registering_cpu_s, "live_after_a_minute": f.live, "removed": f.removed,
                    "noop_tasks_per_second": f.tasks_per_second, "idle_cpu_percent": f.idle_cpu_percent,
                    "driver_rss_mib": f.rss_mib }),
        );
    }
    let ratio = large.tasks_per_second / small.tasks_per_second;
    let per_executor_kib = (large.rss_mib - small.rss_mib) * 1024.0 / 9000.0;
    println!(
        "10,000 executors against 1,000: launches at {ratio:.2}× (target ≥ 0.5); the driver's memory per executor about {per_executor_kib:.0} KiB"
    );
    results.insert(
        "fleet_scaling".into(),
        json!({ "launch_ratio_10000_to_1000": ratio, "target": 0.5, "driver_kib_per_executor": per_executor_kib }),
    );
}

/// Runs a whole command with its output to a file; its time, its output and its peak
/// resident memory (from `wait4`, which reaps it: clippy does not know that call).
#[allow(clippy::zombie_processes)]
fn measured(cmd: &mut std::process::Command) -> (Duration, String, f64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out");
    let started = Instant::now();
    let child = cmd.stdout(std::fs::File::create(&path).unwrap()).spawn().unwrap();
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, writing into the locals given.
    let waited = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    let elapsed = started.elapsed();
    assert_eq!(waited, child.id() as i32);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "{cmd:?} failed: {status}");
    (elapsed, std::fs::read_to_string(&path).unwrap(), usage.ru_maxrss as f64 / 1024.0)
}

/// `GET path` from the status server on `port`: how long the whole answer took.
fn get_timed(port: u16, path: &str) -> Duration {
    use std::io::{Read, Write};
    let started = Instant::now();
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    assert!(
        response.starts_with(b"HTTP/1.1 200"),
        "{path}: {}",
        String::from_utf8_lossy(&response[..80.min(response.len())])
    );
    started.elapsed()
}

/// Jobs of millions of tasks: `flint run` of 1,000,000 and 10,000,000 no-op tasks
/// (whole command, peak memory), then a 10,000,000-task job on a driver with 100
/// simulated executors, its status page and API asked every 200 ms while it runs.
fn scale_figures(results: &mut serde_json::Map<String, serde_json::Value>) {
    let noop = root().join("target/wasm32-wasip2/release/noop.wasm");
    let run = |tasks: u32| {
        let n = tasks.to_string();
        let (elapsed, out, rss) =
            measured(flint().args(["run", noop.to_str().unwrap(), "--partitions", &n, "--json"]));
        let report: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(report["result"], tasks, "the exact count");
        (f64::from(tasks) / elapsed.as_secs_f64(), elapsed.as_secs_f64(), rss)
    };
    let _warm = run(10_000);
    let (rate1, secs1, rss1) = run(1_000_000);
    let (rate10, secs10, rss10) = run(10_000_000);
    println!(
        "flint run of no-op tasks, whole command: 1,000,000 in {secs1:.1} s ({rate1:.0}/s), peak RSS {rss1:.0} MiB (target < 150); 10,000,000 in {secs10:.1} s ({rate10:.0}/s, {:.2}× the 1,000,000-task rate, target ≥ 1.0), peak RSS {rss10:.0} MiB (target < 1024)",
        rate10 / rate1
    );
    results.insert(
        "run_1m_noop".into(),
        json!({ "seconds": secs1, "tasks_per_second": rate1, "peak_rss_mib": rss1, "target_rss_mib": 150.0 }),
    );
    results.insert(
        "run_10m_noop".into(),
        json!({ "seconds": secs10, "tasks_per_second": rate10, "rate_ratio_to_1m": rate10 / rate1,
                "peak_rss_mib": rss10, "target_rss_mib": 1024.0 }),
    );

    // The same job size on a driver, its pages asked while it runs.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (driver, url, _dir) = start_driver(std::process::Stdio::null(), &["--ui-port", &port.to_string()]);
    let tokio = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let parsed: flint_net::DriverUrl = url.parse().unwrap();
    // Bounded by the simulated executors: each says once that it registered.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..100 {
        let idle = flint_proto::Settings::default().network_idle_timeout;
        tokio.spawn(simulated_executor(parsed.clone(), None, idle, tx.clone()));
    }
    tokio.block_on(async {
        for _ in 0..100 {
            rx.recv().await.unwrap();
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("report.json");
    let started = Instant::now();
    let mut submit = Child(
        flint()
            .args([
                "submit",
                "--driver-url",
                &url,
                noop.to_str().unwrap(),
                "--partitions",
                "10000000",
                "--json",
            ])
            .stdout(std::fs::File::create(&out_path).unwrap())
            .spawn()
            .unwrap(),
    );
    let paths = ["/api/v1/status", "/jobs/1", "/api/v1/jobs/1/tasks", "/api/v1/jobs/1/attempts"];
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); paths.len()];
    while submit.0.try_wait().unwrap().is_none() {
        // Asked once the job runs (its page exists from its start).
        if started.elapsed() > Duration::from_secs(2) {
            for (path, times) in paths.iter().zip(&mut times) {
                times.push(get_timed(port, path));
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let elapsed = started.elapsed();
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out_path).unwrap()).unwrap();
    assert_eq!(report["result"], 10_000_000, "the exact count");
    let hwm = std::fs::read_to_string(format!("/proc/{}/status", driver.0.id())).unwrap();
    let peak: f64 = hwm
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0)
        / 1024.0;
    let mut answers = serde_json::Map::new();
    let mut line = String::new();
    for (path, mut times) in paths.iter().zip(times) {
        times.sort();
        let (median, max) = (times[times.len() / 2], times[times.len() - 1]);
        line.push_str(&format!(
            " {path} median {:.1} ms, slowest {:.1} ms ({} asked);",
            ms(median),
            ms(max),
            times.len()
        ));
        answers.insert(
            (*path).into(),
            json!({ "median_ms": ms(median), "max_ms": ms(max), "target_ms": 100.0 }),
        );
    }
    println!(
        "a driver running 10,000,000 no-op tasks on 100 simulated executors: {:.1} s, {:.0} tasks/s, driver peak RSS {peak:.0} MiB; while it ran:{line}",
        elapsed.as_secs_f64(),
        1e7 / elapsed.as_secs_f64()
    );
    results.insert(
        "driver_10m_noop".into(),
        json!({ "seconds": elapsed.as_secs_f64(), "driver_peak_rss_mib": peak, "pages": answers }),
    );
    drop(tokio);
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Seconds since midnight of a log line's RFC 3339 timestamp (`…T21:34:15.631555Z`).
fn log_time(line: &str) -> Option<f64> {
    let time = line.split_whitespace().next()?.split_once('T')?.1.trim_end_matches('Z');
    let mut parts = time.split(':');
    let (h, m, s): (f64, f64, f64) =
        (parts.next()?.parse().ok()?, parts.next()?.parse().ok()?, parts.next()?.parse().ok()?);
    Some(h * 3600.0 + m * 60.0 + s)
}

/// From the driver's "starting executors" to its "executor registered", in its log.
fn start_to_registered(log: &std::path::Path) -> f64 {
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let at = |what: &str| text.lines().find(|l| l.contains(what)).and_then(log_time);
        if let (Some(asked), Some(registered)) = (at("starting executors"), at("executor registered")) {
            return (registered - asked) * 1e3;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no executor registered:\n{text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A standalone master and worker: a driver's request to its executor registered (the
/// local backend's, same run, as the reference: the same process start without the
/// master's hop), and a worker's `kill -9` to the master's "worker lost".
fn standalone_figures(results: &mut serde_json::Map<String, serde_json::Value>) {
    let logs = tempfile::tempdir().unwrap();
    let file = |name: &str| std::fs::File::create(logs.path().join(name)).unwrap();
    let local_log = logs.path().join("local.log");
    let local = start_driver(
        file("local.log").into(),
        &["--backend", "local", "--conf", "flint.executor.instances=1"],
    );
    let local_ms = start_to_registered(&local_log);
    drop(local);

    let url_file = logs.path().join("master.url");
    let master_log = logs.path().join("master.log");
    let _master = Child(
        flint()
            .args([
                "master",
                "--listen",
                "127.0.0.1:0",
                "--ui-port",
                "0",
                "--url-file",
                url_file.to_str().unwrap(),
            ])
            .args(["--state-dir", logs.path().join("state").to_str().unwrap()])
            .env("FLINT_LOG", "info")
            .stdout(std::process::Stdio::null())
            .stderr(file("master.log"))
            .spawn()
            .unwrap(),
    );
    let master = url_from(&url_file, "the master");
    let mut worker = Child(
        flint()
            .args(["worker", "--master-url", &master, "--worker-id", "w1", "--cores", "2", "--memory", "4g"])
            .args(["--work-dir", logs.path().join("work").to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let driver_log = logs.path().join("standalone.log");
    let args = ["--master-url", &master, "--conf", "flint.executor.instances=1"];
    let _driver = start_driver(file("standalone.log").into(), &args);
    let standalone_ms = start_to_registered(&driver_log);

    let killed = Instant::now();
    worker.0.kill().unwrap();
    let lost = loop {
        if std::fs::read_to_string(&master_log).unwrap_or_default().contains("worker lost") {
            break killed.elapsed();
        }
        assert!(killed.elapsed() < Duration::from_secs(120), "the master never noticed the worker's loss");
        std::thread::sleep(Duration::from_millis(5));
    };
    let idle = flint_proto::Settings::default().network_idle_timeout;
    println!(
        "standalone: a driver's request to its executor registered on a worker {standalone_ms:.0} ms (target ≤ 200 ms; the local backend's {local_ms:.0} ms, {:.2}×); kill -9 of a worker to the master's \"worker lost\" {:.0} ms (flint.network.idleTimeout {} ms)",
        standalone_ms / local_ms,
        lost.as_secs_f64() * 1e3,
        idle.as_millis()
    );
    results.insert(
        "standalone".into(),
        json!({ "request_to_registered_ms": standalone_ms, "target_ms": 200.0,
                "reference_local_backend_ms": local_ms, "ratio_to_reference": standalone_ms / local_ms,
                "worker_kill_to_lost_ms": lost.as_secs_f64() * 1e3, "idle_timeout_ms": idle.as_millis() as f64 }),
    );
}

/// The local backend growing from nothing.
fn elastic_figures(results: &mut serde_json::Map<String, serde_json::Value>) {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("driver.log");
    let args = [
        "--backend",
        "local",
        "--conf",
        "flint.dynamicAllocation.enabled=true",
        "--conf",
        "flint.dynamicAllocation.maxExecutors=2",
        "--conf",
        "flint.executor.cores=1",
    ];
    let (_driver, url, _dir) = start_driver(std::fs::File::create(&log).unwrap().into(), &args);
    let noop = root().join("target/wasm32-wasip2/release/noop.wasm");
    let burst = || {
        let started = Instant::now();
        let out = flint()
            .args(["submit", "--driver-url", &url, noop.to_str().unwrap(), "--partitions", "1000", "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["result"], 1000);
        started.elapsed()
    };
    let cold = burst();
    let text = std::fs::read_to_string(&log).unwrap();
    let at = |what: &str| text.lines().find(|l| l.contains(what)).and_then(log_time);
    let to_executor = at("executor registered").unwrap() - at("job submitted").unwrap();
    let warm = median((0..3).map(|_| burst()).collect());
    let backlog = flint_proto::Settings::default().dynamic_allocation.backlog_timeout;
    println!(
        "local backend from no executors: job submitted to its first executor registered {:.0} ms (schedulerBacklogTimeout {} ms of it); 1,000 no-op tasks on the empty fleet {:.2} s, on the warm fleet {:.2} s ({:.1}×)",
        to_executor * 1e3,
        backlog.as_millis(),
        cold.as_secs_f64(),
        warm.as_secs_f64(),
        cold.as_secs_f64() / warm.as_secs_f64()
    );
    results.insert(
        "local_backend_scale_up".into(),
        json!({ "submitted_to_executor_ms": to_executor * 1e3, "backlog_timeout_ms": backlog.as_millis() as f64,
                "burst_empty_fleet_s": cold.as_secs_f64(), "burst_warm_fleet_s": warm.as_secs_f64(),
                "ratio_to_warm": cold.as_secs_f64() / warm.as_secs_f64() }),
    );
}

/// The wire's reference, in this process: `total` bytes from a client endpoint to a
/// server endpoint over loopback, with the project's own TLS and transport settings
/// (`flint_net`, the connection opened up as the driver opens a proven peer's), over
/// `streams` streams at once; MiB/s. Each end has a runtime of one thread of its own,
/// as two processes would: sharing one runtime, both ends' work now and then landed on
/// one thread and the figure halved, run to run. Beside the rate, the datagram size the
/// connection settled on.
fn quinn_mib_per_s(total: usize, streams: usize) -> (f64, u16) {
    let runtime =
        || tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let (server_rt, client_rt) = (runtime(), runtime());
    let identity = flint_net::Identity::generate(vec!["flint-driver".into()]).unwrap();
    let idle = Duration::from_secs(30);
    let server = server_rt.block_on(async {
        flint_net::server_endpoint("127.0.0.1:0".parse().unwrap(), &identity, idle, None).unwrap()
    });
    let addr = server.local_addr().unwrap();
    let receiving = server_rt.spawn(async move {
        let connection = server.accept().await.unwrap().await.unwrap();
        flint_net::open_up(&connection);
        let mut readers = Vec::new();
        for _ in 0..streams {
            let (_, mut recv) = connection.accept_bi().await.unwrap();
            readers.push(tokio::spawn(async move {
                let mut got = 0usize;
                while let Some(chunk) = recv.read_chunk(usize::MAX, true).await.unwrap() {
                    got += chunk.bytes.len();
                }
                got
            }));
        }
        let mut got = 0;
        for r in readers {
            got += r.await.unwrap();
        }
        (got, connection)
    });
    client_rt.block_on(async {
        let client =
            flint_net::client_endpoint(identity.fingerprint(), idle, "127.0.0.1:0".parse().unwrap(), None)
                .unwrap();
        let connection = client.connect(addr, "flint-driver").unwrap().await.unwrap();
        let piece = vec![7u8; 1 << 20];
        let started = Instant::now();
        let mut writers = Vec::new();
        for _ in 0..streams {
            let (mut send, _recv) = connection.open_bi().await.unwrap();
            let piece = piece.clone();
            writers.push(tokio::spawn(async move {
                for _ in 0..total / streams / piece.len() {
                    send.write_all(&piece).await.unwrap();
                }
                send.finish().unwrap();
                let _ = send.stopped().await;
                _recv
            }));
        }
        for w in writers {
            w.await.unwrap();
        }
        let (got, _server_side) = receiving.await.unwrap();
        let elapsed = started.elapsed();
        assert_eq!(got, total / streams / piece.len() * streams * piece.len());
        (got as f64 / f64::from(1 << 20) / elapsed.as_secs_f64(), connection.stats().path.current_mtu)
    })
}

/// Whole `flint` commands, in seconds: the median of `rounds`.
fn whole_command(args: &[&str], rounds: usize) -> Duration {
    median(
        (0..rounds)
            .map(|_| {
                let t = Instant::now();
                let out = flint().args(args).output().unwrap();
                assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
                t.elapsed()
            })
            .collect(),
    )
}

/// Bytes between processes: the raw QUIC reference, then the paths a job's data takes
/// (served from the driver, uploaded by `flint submit`), word count over each input form
/// as the user waits for it (the whole `flint submit`, upload included), and the fixed
/// cost of a command against a warm cluster.
fn wire_figures(results: &mut serde_json::Map<String, serde_json::Value>) {
    const SIZE: u64 = CORPUS;
    let mib = SIZE as f64 / f64::from(1 << 20);
    let path = corpus(SIZE);
    let input = path.to_str().unwrap();
    let mut datagram = u16::MAX;
    let mut quinn_median = |streams| {
        let runs: Vec<(f64, u16)> = (0..3).map(|_| quinn_mib_per_s(SIZE as usize, streams)).collect();
        datagram = runs.iter().map(|(_, mtu)| *mtu).fold(datagram, u16::min);
        median_f64(runs.into_iter().map(|(rate, _)| rate).collect())
    };
    let (quinn1, quinn4) = (quinn_median(1), quinn_median(4));
    println!(
        "raw QUIC on loopback (flint_net's TLS and transport): one stream {quinn1:.0} MiB/s, four streams {quinn4:.0} MiB/s; datagrams of {datagram} bytes (the smallest any run settled on)"
    );
    let quinn = quinn1.max(quinn4);

    let roots = format!("flint.input.roots={}", path.parent().unwrap().display());
    let ui = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let (_driver, url, _dir) =
        start_driver(std::process::Stdio::null(), &["--conf", &roots, "--ui-port", &ui]);
    // Memory for a 200 MB result: the guest holds it and its encoding at once.
    let (_executor, _) = start_executor(&url, &["--memory", "2g"]);
    let transfer = |path: &str| transfer_figures(&ui, path);
    let noop = root().join("target/wasm32-wasip2/release/noop.wasm");
    let noop = noop.to_str().unwrap();
    let chaos = root().join("target/wasm32-wasip2/release/chaos.wasm");
    let chaos = chaos.to_str().unwrap();
    let (local, served) = (format!("file://{input}"), format!("flint://{input}"));
    let submit = |job: &str, input: &str, rounds: usize| {
        whole_command(
            &["submit", "--driver-url", &url, job, "--input", input, "--partitions", "32", "--json"],
            rounds,
        )
    };
    // A job over the corpus whose tasks do nothing with the bytes but read them all:
    // each says how many it read, and they must add up to the file.
    let read_once = |input: &str| {
        let t = Instant::now();
        let args = ["submit", "--driver-url", &url, chaos, "--input", input, "--partitions", "32"];
        let out = flint().args(args).args(["--conf", "mode=read", "--json"]).output().unwrap();
        let took = t.elapsed();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let read: u64 = report["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(read, SIZE, "the tasks read the whole corpus");
        took
    };
    let read_all = |input: &str| median((0..3).map(|_| read_once(input)).collect());
    let read_local = read_all(&local);
    let (served_rate, served_ratio) = beside_raw(5, || mib / read_once(&served).as_secs_f64());
    let uploads_before = transfer("upload");
    let read_uploaded = read_all(input);
    let (upload_bytes, upload_seconds) = delta(uploads_before, transfer("upload"));
    let upload_while_read = upload_bytes / f64::from(1 << 20) / upload_seconds;
    let (upload, upload_ratio) = upload_alone(input, SIZE);
    println!(
        "256 MiB read by a job that does nothing else, whole flint submit: read by the executor from its disk {:.0} MiB/s; served by the driver (flint://) {served_rate:.0} MiB/s ({served_ratio:.2}× raw QUIC taken beside it); sent by the client with the job {:.0} MiB/s, the upload as the driver received it while the job read it {upload_while_read:.0} MiB/s ({:.2}× raw QUIC)",
        mib / read_local.as_secs_f64(),
        mib / read_uploaded.as_secs_f64(),
        upload_while_read / quinn,
    );
    println!(
        "the same upload with nothing else running (client to driver, written to the driver's disk): {upload:.0} MiB/s ({upload_ratio:.2}× raw QUIC taken beside it) (targets ≥ 0.5× for serving and upload)",
    );

    // A 200 MB result block, fetched by the driver from the executor that made it.
    let mut bigs = Vec::new();
    let (block, block_ratio) = beside_raw(3, || {
        let fetches_before = transfer("block_fetch");
        bigs.push(whole_command(
            &[
                "submit",
                "--driver-url",
                &url,
                chaos,
                "--partitions",
                "1",
                "--conf",
                "mode=big-output",
                "--conf",
                "bytes=200000000",
                "--conf",
                "flint.task.maxResultSize=256m",
                "--json",
            ],
            1,
        ));
        let (block_bytes, block_seconds) = delta(fetches_before, transfer("block_fetch"));
        block_bytes / f64::from(1 << 20) / block_seconds
    });
    let big = median(bigs);
    println!(
        "a 200 MB result block fetched by the driver: {block:.0} MiB/s ({block_ratio:.2}× raw QUIC taken beside it, target ≥ 0.5×); the whole flint submit that makes, fetches and prints it {:.2} s",
        big.as_secs_f64(),
    );

    let job = root().join("examples/word-count");
    let job = job.to_str().unwrap();
    // Round by round, the reference beside each form: this machine's speed drifts by a
    // fifth over a minute, and each ratio should see the same drift.
    let forms = [("file://", local.as_str()), ("flint://", served.as_str()), ("uploaded", input)];
    // Each form's ratio is the median of its rounds' ratios, each to the native run of
    // its own round.
    let (mut natives, mut ratios) = (Vec::new(), vec![Vec::new(); forms.len()]);
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); forms.len()];
    for _ in 0..5 {
        let native = native_word_count(&path, 32, 2).1;
        natives.push(native);
        for (k, (_, form)) in forms.iter().enumerate() {
            let t = submit(job, form, 1);
            times[k].push(t);
            ratios[k].push(native.as_secs_f64() / t.as_secs_f64());
        }
    }
    let native = median(natives);
    let ratios: Vec<f64> = ratios.into_iter().map(median_f64).collect();
    let times: Vec<Duration> = times.into_iter().map(median).collect();
    println!(
        "word count over 256 MiB through the cluster, whole flint submit: {} (native {:.0} MiB/s; ratios: median of 5 rounds, each to its round's native run; target ≥ 0.5× for each)",
        forms
            .iter()
            .zip(&times)
            .zip(&ratios)
            .map(|(((name, _), t), ratio)| format!(
                "{name} {:.0} MiB/s ({ratio:.2}× native)",
                mib / t.as_secs_f64()
            ))
            .collect::<Vec<_>>()
            .join(", "),
        mib / native.as_secs_f64(),
    );

    let status = whole_command(&["status", "--driver-url", &url, "--json"], 20);
    let tiny = whole_command(&["submit", "--driver-url", &url, noop, "--partitions", "1", "--json"], 20);
    let version = whole_command(&["--version"], 20);
    println!(
        "warm cluster, whole process, median of 20: flint status {:.1} ms (target ≤ 20 ms), a one-task no-op flint submit {:.1} ms (target ≤ 40 ms); flint --version {:.1} ms",
        status.as_secs_f64() * 1e3,
        tiny.as_secs_f64() * 1e3,
        version.as_secs_f64() * 1e3,
    );
    results.insert(
        "wire".into(),
        json!({
            "quinn_mib_per_s": { "one_stream": quinn1, "four_streams": quinn4, "datagram_bytes": datagram },
            "read_corpus_mib_per_s": { "file": mib / read_local.as_secs_f64(), "flint": served_rate,
                "uploaded": mib / read_uploaded.as_secs_f64(), "upload_alone": upload, "upload_while_read": upload_while_read },
            "block_fetch_mib_per_s": block, "big_result_submit_s": big.as_secs_f64(),
            "ratio_to_quinn": { "flint": served_ratio, "upload": upload_ratio, "block_fetch": block_ratio, "target": 0.5 },
            "word_count_ratio_to_native": forms.iter().zip(&ratios).map(|((n, _), r)| (n.to_string(), json!(r))).collect::<serde_json::Map<_, _>>(),
            "status_ms": status.as_secs_f64() * 1e3, "one_task_submit_ms": tiny.as_secs_f64() * 1e3,
            "version_ms": version.as_secs_f64() * 1e3,
        }),
    );
}

/// A job's file of `size` bytes at `path` as a driver receives it with nothing else
/// running, in MiB/s, and its ratio to raw QUIC ([`beside_raw`], three rounds): the
/// driver has no executor, so the job's tasks wait while its file arrives, and the
/// submission is stopped once it has.
fn upload_alone(path: &str, size: u64) -> (f64, f64) {
    let ui = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let (_driver, url, _dir) = start_driver(std::process::Stdio::null(), &["--ui-port", &ui]);
    let chaos = root().join("target/wasm32-wasip2/release/chaos.wasm");
    beside_raw(3, || {
        let before = transfer_figures(&ui, "upload");
        let submit = Child(
            flint()
                .args(["submit", "--driver-url", &url, chaos.to_str().unwrap(), "--input", path])
                .args(["--partitions", "32", "--conf", "mode=read"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        let started = Instant::now();
        let (bytes, seconds) = loop {
            let (bytes, seconds) = delta(before, transfer_figures(&ui, "upload"));
            if bytes >= size as f64 {
                break (bytes, seconds);
            }
            assert!(started.elapsed() < Duration::from_secs(60), "the upload arrives");
            std::thread::sleep(Duration::from_millis(10));
        };
        drop(submit);
        bytes / f64::from(1 << 20) / seconds
    })
}

/// A figure in MiB/s taken `rounds` times, each right after raw QUIC's (the better of
/// one stream and four): the median figure, and the median of each round's ratio to
/// the reference taken beside it. This machine's speed drifts by a fifth over a minute;
/// a ratio to a reference taken minutes before sees the drift, not the path.
fn beside_raw(rounds: usize, mut figure: impl FnMut() -> f64) -> (f64, f64) {
    let (mut values, mut ratios) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let raw = quinn_mib_per_s(CORPUS as usize, 1).0.max(quinn_mib_per_s(CORPUS as usize, 4).0);
        let value = figure();
        values.push(value);
        ratios.push(value / raw);
    }
    (median_f64(values), median_f64(ratios))
}

/// The driver's `flint_transfer_bytes_total` and `flint_transfer_seconds_total` for
/// `path` (`upload`, `block_fetch`, `input_served`), from its `/metrics` on `port`.
fn transfer_figures(port: &str, path: &str) -> (f64, f64) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    write!(stream, "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let body = text.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    let scrape = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_owned()))).unwrap();
    let value = |name: &str| {
        let sample = scrape.samples.iter().find(|s| s.metric == name && s.labels.get("path") == Some(path));
        // NaN from a driver that does not count transfers (an older binary, for a base).
        match sample.map(|s| &s.value) {
            Some(prometheus_parse::Value::Counter(v)) => *v,
            _ => f64::NAN,
        }
    };
    (value("flint_transfer_bytes_total"), value("flint_transfer_seconds_total"))
}

/// What a counter pair added between two readings.
fn delta(before: (f64, f64), after: (f64, f64)) -> (f64, f64) {
    (after.0 - before.0, after.1 - before.1)
}

/// Sends SIGSTOP and SIGCONT to `pid` in turn while `on` holds, so that it runs 10 ms of
/// every 120: an executor given a twelfth of its time, as a throttled pod or a noisy
/// neighbour leaves it (a task of short waits runs about ten times slower: the wait in
/// progress at each stop ends as the process continues). Stops with the process
/// continued.
fn throttle(pid: u32, on: Arc<std::sync::atomic::AtomicBool>) -> std::thread::JoinHandle<()> {
    use std::sync::atomic::Ordering;
    std::thread::spawn(move || {
        let pid = pid as libc::pid_t;
        while on.load(Ordering::Relaxed) {
            // SAFETY: signals to a child process this bench started and still holds.
            unsafe { libc::kill(pid, libc::SIGSTOP) };
            std::thread::sleep(Duration::from_millis(110));
            unsafe { libc::kill(pid, libc::SIGCONT) };
            std::thread::sleep(Duration::from_millis(10));
        }
    })
}

/// `GET path` from the status server on `port`, as JSON.
fn get_json(port: u16, path: &str) -> serde_json::Value {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{path}: {head}");
    serde_json::from_str(body).unwrap()
}

/// Speculation against one slow executor: 8 executors of 1 core, a job of 40 tasks each
/// made of 100 naps of 2 ms (no CPU to contend for on this 2-core machine), one executor
/// throttled to about a tenth of its speed. The same job with the executor healthy is the
/// reference; then throttled, with speculation (Spark's defaults: 3 × the median, once
/// 90% of the stage is done) and with the job refusing it in its manifest. Also the copies'
/// share of the job's task-seconds (from the attempts API), and that the healthy job
/// started none.
fn speculation_figures(results: &mut serde_json::Map<String, serde_json::Value>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    /// One run: its whole `flint submit` time, copies started and won, their share of
    /// the task-seconds of all its attempts, and the slow executor's longest attempt
    /// against the others' median.
    struct Run {
        took: Duration,
        started: u64,
        won: u64,
        share: f64,
        slowdown: f64,
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (_driver, url, _dir) = start_driver(
        std::process::Stdio::null(),
        &["--ui-port", &port.to_string(), "--conf", "flint.speculation.enabled=true"],
    );
    let mut executors = Vec::new();
    for i in 0..8 {
        let id = if i == 0 { "slow".to_owned() } else { format!("e{i}") };
        executors.push(start_executor(&url, &["--cores", "1", "--executor-id", &id]).0);
    }
    let slow = executors[0].0.id();
    let chaos = root().join("target/wasm32-wasip2/release/chaos.wasm");
    let job = |speculation: bool| {
        let dir = tempfile::tempdir().unwrap();
        let refuse = if speculation { "" } else { "speculation = false\n" };
        std::fs::write(
            dir.path().join("flint.toml"),
            format!("name = \"naps\"\nworld = \"aggregate\"\n{refuse}component = \"{}\"\n", chaos.display()),
        )
        .unwrap();
        dir
    };
    let (speculating, refusing) = (job(true), job(false));
    let run = |dir: &tempfile::TempDir| {
        let started = Instant::now();
        let out = flint()
            .args(["submit", "--driver-url", &url, dir.path().to_str().unwrap(), "--partitions", "40"])
            .args(["--conf", "mode=naps", "--conf", "naps=100", "--conf", "nap_ms=2", "--json"])
            .output()
            .unwrap();
        let took = started.elapsed();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let indices: Vec<serde_json::Value> = (0..40).map(serde_json::Value::from).collect();
        assert_eq!(report["result"], serde_json::Value::from(indices), "the exact result");
        let attempts = get_json(port, &format!("/api/v1/jobs/{}/attempts", report["job_id"]));
        let (mut all, mut copies, mut on_slow, mut elsewhere) = (0u64, 0u64, 0u64, Vec::new());
        for a in attempts.as_array().unwrap() {
            let ms = a["ended_ms"].as_u64().unwrap_or(0).saturating_sub(a["launched_ms"].as_u64().unwrap());
            all += ms;
            if a.get("speculative").is_some() {
                copies += ms;
            }
            if a["executor"] == "slow" {
                on_slow = on_slow.max(ms);
            } else {
                elsewhere.push(Duration::from_millis(ms));
            }
        }
        let started = report["speculative_attempts"].as_u64().unwrap();
        let won = report["speculative_won"].as_u64().unwrap();
        let slowdown = on_slow as f64 / median(elsewhere).as_millis() as f64;
        Run { took, started, won, share: copies as f64 / all as f64, slowdown }
    };
    run(&speculating); // warm: the component compiled on every executor
    let healthy: Vec<_> = (0..3).map(|_| run(&speculating)).collect();
    let on = Arc::new(AtomicBool::new(true));
    let throttling = throttle(slow, on.clone());
    let speculated: Vec<_> = (0..3).map(|_| run(&speculating)).collect();
    let waited: Vec<_> = (0..3).map(|_| run(&refusing)).collect();
    on.store(false, Ordering::Relaxed);
    throttling.join().unwrap();

    let time = |runs: &[Run]| median(runs.iter().map(|r| r.took).collect()).as_secs_f64();
    let (reference, with, without) = (time(&healthy), time(&speculated), time(&waited));
    let healthy_copies: u64 = healthy.iter().map(|r| r.started).sum();
    let copies: Vec<(u64, u64)> = speculated.iter().map(|r| (r.started, r.won)).collect();
    let share = speculated.iter().map(|r| r.share).fold(0.0, f64::max);
    let slowdown = waited.iter().map(|r| r.slowdown).fold(0.0, f64::max);
    println!(
        "speculation, 40 tasks of 100 × 2 ms naps on 8 executors, one throttled to about a tenth of its speed \
         (its longest attempt {slowdown:.1}× the others' median): {with:.2} s with speculation against \
         {reference:.2} s healthy ({:.2}×, target ≤ 1.3×), {without:.2} s when the job refuses it ({:.2}×); \
         copies (started, won) per run {copies:?}, at most {:.1}% of the job's task-seconds (target ≤ 10%); \
         copies on the healthy fleet: {healthy_copies}",
        with / reference,
        without / reference,
        share * 100.0
    );
    results.insert(
        "speculation".into(),
        json!({ "healthy_s": reference, "throttled_speculating_s": with, "throttled_refusing_s": without,
                "ratio_speculating": with / reference, "ratio_refusing": without / reference,
                "copies_task_seconds_share": share, "copies_on_healthy_fleet": healthy_copies,
                "throttled_slowdown": slowdown }),
    );
}

/// The word count of `examples/python/word-count/app.py` (a `Counter` updated with each
/// 1 MiB batch of whole lines split at whitespace, merged), over `path` in `splits`
/// byte ranges on 2 processes: in a `multiprocessing.Pool(2)`, or with `spark` in
/// PySpark `local[2]` (its lines, `mapPartitions` with the same counting, `reduce`).
/// Prints the total words.
/// Python pi's own `count_inside` over `points` points for each of `tasks` seeds, in
/// `multiprocessing.Pool(2)`: prints the points inside.
const PI_POOL: &str = r#"
import sys
from multiprocessing import Pool
from app import count_inside

points, tasks = int(sys.argv[1]), int(sys.argv[2])
with Pool(2) as pool:
    print(sum(pool.starmap(count_inside, [(t, points) for t in range(tasks)])))
"#;

const PYTHON_PEERS: &str = r#"
import os, sys
from collections import Counter

path, splits, peer = sys.argv[1], int(sys.argv[2]), sys.argv[3]
size = os.path.getsize(path)

def count_split(i):
    # Lines whose first byte is in [start, end), as a Flint split.
    start, end = size * i // splits, size * (i + 1) // splits
    counts = Counter()
    with open(path, "rb") as f:
        if start > 0:
            f.seek(start - 1)
            f.readline()
        at = f.tell()
        while at < end:
            batch = f.read(1 << 20)
            if not batch:
                break
            batch += f.readline()
            if at + len(batch) > end:
                # Up to the end of the line holding the split's last byte.
                cut = batch.find(b"\n", end - 1 - at)
                batch = batch if cut < 0 else batch[: cut + 1]
            counts.update(batch.split())
            at += len(batch)
    return counts

def merge(a, b):
    if len(a) < len(b):
        a, b = b, a
    a.update(b)
    return a

if peer == "pool":
    import multiprocessing
    with multiprocessing.Pool(2) as pool:
        total = Counter()
        for c in pool.imap_unordered(count_split, range(splits)):
            total = merge(total, c)
else:
    from pyspark import SparkContext
    sc = SparkContext("local[2]", "wc")
    sc.setLogLevel("ERROR")
    lines = sc.textFile(path, splits)
    total = lines.mapPartitions(lambda it: [Counter(w for line in it for w in line.split())]).reduce(merge)
    sc.stop()
print(sum(total.values()))
"#;

/// Python jobs: word count over 64 MiB through `flint run` (whole command) against the
/// same counting in a `multiprocessing.Pool(2)` and in PySpark `local[2]` (whole
/// processes); 20,000 no-op tasks of a Python job against a Rust one (reused
/// instances); Python pi against Rust pi on the same points.
fn python_figures(results: &mut serde_json::Map<String, serde_json::Value>) {
    const SIZE: u64 = 64 << 20;
    let path = corpus(SIZE);
    let input = path.to_str().unwrap();
    let mib = SIZE as f64 / f64::from(1 << 20);
    let componentize = root().join("target/pyvenv/bin/componentize-py");
    let spark_python = root().join("target/benchvenv/bin/python");
    assert!(
        componentize.exists() && spark_python.exists(),
        "make bench sets up target/pyvenv and target/benchvenv"
    );
    let python_job = |job: &str, args: &[&str]| {
        let started = Instant::now();
        let out = flint()
            .args(
                [&["run", root().join("examples/python").join(job).to_str().unwrap()][..], args, &["--json"]]
                    .concat(),
            )
            .env("FLINT_COMPONENTIZE_PY", &componentize)
            .output()
            .unwrap();
        let whole = started.elapsed();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (report, whole)
    };
    let peer = |peer: &str| {
        let python = if peer == "spark" { spark_python.as_os_str() } else { std::ffi::OsStr::new("python3") };
        let started = Instant::now();
        let out = std::process::Command::new(python)
            .args(["-c", PYTHON_PEERS, input, "16", peer])
            .output()
            .unwrap();
        assert!(out.status.success(), "{peer}: {}", String::from_utf8_lossy(&out.stderr));
        let total: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        (total, started.elapsed())
    };
    let wc_args = ["--input", input, "--partitions", "16", "--cores", "2"];
    let (warm, _) = python_job("word-count", &wc_args); // built and compiled once
    let python_result = warm["result"].clone();
    let total = python_result["total_words"].as_u64().unwrap();
    let (mut flints, mut in_job, mut pools, mut sparks) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..3 {
        let (report, whole) = python_job("word-count", &wc_args);
        assert_eq!(report["result"]["total_words"], total);
        flints.push(whole);
        in_job.push(Duration::from_secs_f64(report["elapsed_ms"].as_f64().unwrap() / 1e3));
        let (pool_total, pool) = peer("pool");
        assert_eq!(pool_total, total, "the pool counts what Flint does");
        pools.push(pool);
        let (spark_total, spark) = peer("spark");
        assert_eq!(spark_total, total, "PySpark counts what Flint does");
        sparks.push(spark);
    }
    let rate = |d: Duration| mib / d.as_secs_f64();
    let (flint_rate, job_rate, pool_rate, spark_rate) =
        (rate(median(flints)), rate(median(in_job)), rate(median(pools)), rate(median(sparks)));
    println!(
        "Python word count, {mib:.0} MiB in 16 splits on 2 cores, whole processes: flint run {flint_rate:.1} MiB/s (in-job {job_rate:.1}); multiprocessing.Pool(2) {pool_rate:.1} MiB/s ({:.2}×, target ≥ 0.5); PySpark local[2] {spark_rate:.1} MiB/s ({:.2}×, target ≥ 2)",
        flint_rate / pool_rate,
        flint_rate / spark_rate
    );
    results.insert(
        "python_word_count".into(),
        json!({ "flint_mib_s": flint_rate, "in_job_mib_s": job_rate, "pool_mib_s": pool_rate, "pyspark_mib_s": spark_rate,
                "ratio_to_pool": flint_rate / pool_rate, "target_to_pool": 0.5,
                "ratio_to_pyspark": flint_rate / spark_rate, "target_to_pyspark": 2.0 }),
    );

    // The same count through the shuffle: maps count, reducers sum by word.
    let mr_args = ["--input", input, "--partitions", "16", "--reduce-partitions", "4", "--cores", "2"];
    let (warm, _) = python_job("word-count-mr", &mr_args);
    assert_eq!(warm["result"], python_result, "map/reduce counts what the combining job does");
    let mrs: Vec<Duration> = (0..3).map(|_| python_job("word-count-mr", &mr_args).1).collect();
    let mr_rate = rate(median(mrs));
    println!(
        "Python map/reduce word count, {mib:.0} MiB, 16 maps to 4 reduces, whole process: {mr_rate:.1} MiB/s ({:.2}× the combining job, {:.2}× the pool)",
        mr_rate / flint_rate,
        mr_rate / pool_rate
    );

    // A task's cost: 20,000 no-op tasks, each a call into a live instance.
    let noop_args = ["--partitions", "20000", "--cores", "2", "--conf", "flint.task.combine=false"];
    let _ = python_job("noop", &noop_args);
    let per_task = |report: &serde_json::Value| report["elapsed_ms"].as_f64().unwrap() * 1e3 / 20_000.0;
    let (python_noop, _) = python_job("noop", &noop_args);
    assert_eq!(python_noop["result"], 20_000);
    let rust_noop = root().join("target/wasm32-wasip2/release/noop.wasm");
    let rust = flint()
        .args([&["run", rust_noop.to_str().unwrap()][..], &noop_args, &["--json"]].concat())
        .output()
        .unwrap();
    let rust: serde_json::Value = serde_json::from_slice(&rust.stdout).unwrap();
    let (python_us, rust_us) = (per_task(&python_noop), per_task(&rust));
    println!(
        "20,000 no-op tasks on 2 slots, reused instances: Python {python_us:.1} µs a task, Rust {rust_us:.1} µs ({:.2}×)",
        python_us / rust_us
    );

    // What a Python component costs an executor: its first use (compiled, or loaded
    // from the executor's disk cache), a fresh instance with its first call, a call in a
    // reused instance; the Rust no-op's beside it.
    let built = tempfile::tempdir().unwrap();
    let made = flint()
        .args(["run", root().join("examples/python/noop").to_str().unwrap(), "--partitions", "1"])
        .env("FLINT_COMPONENTIZE_PY", &componentize)
        .env("FLINT_CACHE_DIR", built.path())
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let python_wasm = std::fs::read_dir(built.path().join("python"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "wasm"))
        .expect("the Python component in the cache");
    let python_bytes = std::fs::read(&python_wasm).unwrap();
    let compiled = tempfile::tempdir().unwrap();
    let first_use = |cache: bool| {
        let rt =
            Runtime::new(RuntimeConfig { cache_dir: cache.then(|| compiled.path().to_owned()), ..config(2) })
                .unwrap();
        let started = Instant::now();
        rt.load(&python_bytes).unwrap();
        started.elapsed()
    };
    let compile = first_use(true); // fills the disk cache
    let from_disk = median((0..3).map(|_| first_use(true)).collect());
    let rt = runtime(2);
    let (fresh, reused) =
        (instantiate_median(&rt, &python_bytes, 200), reused_call_median(&rt, &python_bytes, 2000));
    let rust_fresh = instantiate_median(&rt, &component("noop"), 2000);
    println!(
        "a Python component ({:.1} MB): first use on an executor {:.1} s compiled, {:.0} ms from its disk cache; a fresh instance and its first call {:.0} µs (Rust's no-op {:.0} µs); a call in a reused instance {:.1} µs",
        python_bytes.len() as f64 / 1e6,
        compile.as_secs_f64(),
        from_disk.as_secs_f64() * 1e3,
        us(fresh),
        us(rust_fresh),
        us(reused)
    );

    // Pi's same points in Python and in Rust.
    let pi_args = ["--conf", "points=1000000", "--partitions", "4", "--cores", "2"];
    let (_, _) = python_job("pi", &pi_args);
    let (python_pi, python_pi_whole) = python_job("pi", &pi_args);
    let rust_pi = flint()
        .args([&["run", root().join("examples/pi").to_str().unwrap()][..], &pi_args, &["--json"]].concat())
        .output()
        .unwrap();
    let rust_pi: serde_json::Value = serde_json::from_slice(&rust_pi.stdout).unwrap();
    assert_eq!(python_pi["result"], rust_pi["result"], "Python pi counts Rust pi's points");
    // The job's own count_inside, natively, in multiprocessing.Pool(2): CPython against
    // the CPython inside the component, whole processes.
    let started = Instant::now();
    let pool = std::process::Command::new("python3")
        .args(["-c", PI_POOL, "1000000", "4"])
        .env(
            "PYTHONPATH",
            format!(
                "{}:{}",
                root().join("examples/python/pi").display(),
                root().join("guest-sdk/python").display()
            ),
        )
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let pool_pi_whole = started.elapsed();
    assert!(pool.status.success(), "{}", String::from_utf8_lossy(&pool.stderr));
    let pool_inside: u64 = String::from_utf8_lossy(&pool.stdout).trim().parse().unwrap();
    assert_eq!(Some(pool_inside), python_pi["result"]["inside"].as_u64(), "the pool counts Flint's points");
    println!(
        "pi over 4,000,000 points in Python, whole processes: flint run {:.2} s, multiprocessing.Pool(2) {:.2} s ({:.2}× the pool's time)",
        python_pi_whole.as_secs_f64(),
        pool_pi_whole.as_secs_f64(),
        python_pi_whole.as_secs_f64() / pool_pi_whole.as_secs_f64()
    );
    let ratio = python_pi["elapsed_ms"].as_f64().unwrap() / rust_pi["elapsed_ms"].as_f64().unwrap();
    println!(
        "pi over 4,000,000 points on 2 slots: Python {:.0} ms in the job ({:.1} s whole command), Rust {:.1} ms: Python takes {ratio:.0}× Rust's time",
        python_pi["elapsed_ms"].as_f64().unwrap(),
        python_pi_whole.as_secs_f64(),
        rust_pi["elapsed_ms"].as_f64().unwrap()
    );
    results.insert(
        "python_tasks".into(),
        json!({ "noop_task_us": python_us, "rust_noop_task_us": rust_us, "pi_ratio_to_rust": ratio,
                "component_mb": python_bytes.len() as f64 / 1e6, "first_use_compiled_s": compile.as_secs_f64(),
                "first_use_from_disk_ms": from_disk.as_secs_f64() * 1e3, "fresh_instance_call_us": us(fresh),
                "reused_instance_call_us": us(reused),
                "pi_ratio_to_pool": python_pi_whole.as_secs_f64() / pool_pi_whole.as_secs_f64(),
                "map_reduce_word_count_mib_s": mr_rate }),
    );
}
