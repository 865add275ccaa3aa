//! The runtime on real components built from `examples/` (`make examples` builds them):
//! every failure is typed, a failure never spoils the runtime, and the sandbox grants
//! no ambient authority.

use flint_proto::{Conf, TaskFailure};
use flint_runtime::{Call, KillSwitch, Runtime, RuntimeConfig, TaskContext, TaskInput};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn component(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/wasm32-wasip2/release")
        .join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}; run `make examples` first", path.display()))
}

fn runtime(instance_memory: u64, cache_dir: Option<PathBuf>) -> Runtime {
    Runtime::new(RuntimeConfig {
        slots: 2,
        instance_memory,
        cache_dir,
        max_log_size: 64 << 10,
        pooling: true,
        component_cache: 256 << 20,
    })
    .unwrap()
}

fn ctx(conf: &[(&str, &str)]) -> TaskContext {
    let config: Conf = conf.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    TaskContext {
        app_id: "test-app".into(),
        job_id: "1".into(),
        task_index: 0,
        task_count: 1,
        attempt: 0,
        config: Arc::new(config),
        asked: Arc::default(),
        tokens: Arc::new(Vec::new()),
        memory_limit: None,
        deadline: Duration::from_secs(30),
        spent: Duration::ZERO,
        deadline_key: "flint.task.deadline",
        max_result_size: 1 << 20,
        kill: KillSwitch::default(),
        seed: None,
    }
}

/// Runs one task and shows its output as its job's result would: loaded into an
/// accumulator and finished, as the driver does with a job of one task.
fn run(rt: &Runtime, bytes: &[u8], ctx: &TaskContext) -> Result<Vec<u8>, TaskFailure> {
    let component = rt.load(bytes).unwrap();
    let output = rt.call(&component, ctx, Call::Run(TaskInput::Index(ctx.task_index))).result?;
    let mut folder = rt.folder(&component, ctx.clone());
    let acc = folder.load(&output).expect("a task output loads");
    Ok(folder.finish(acc).expect("one output finishes"))
}

#[test]
fn every_failure_is_typed_and_the_runtime_keeps_serving() {
    let rt = runtime(64 << 20, None);
    let chaos = component("chaos");
    let healthy = |rt: &Runtime| assert_eq!(run(rt, &chaos, &ctx(&[])).unwrap(), b"[0]");

    match run(&rt, &chaos, &ctx(&[("mode", "trap")])) {
        Err(TaskFailure::Trap { message, backtrace }) => {
            assert!(message.contains("unreachable"), "{message}");
            assert!(backtrace.unwrap_or_default().contains("chaos.wasm!"), "a guest backtrace");
        }
        other => panic!("trap expected: {other:?}"),
    }
    healthy(&rt);

    match run(&rt, &chaos, &ctx(&[("mode", "panic")])) {
        Err(TaskFailure::Trap { message, .. }) => {
            assert!(message.contains("chaos asked to panic in task 0"), "{message}")
        }
        other => panic!("trap expected: {other:?}"),
    }
    healthy(&rt);

    assert_eq!(
        run(&rt, &chaos, &ctx(&[("mode", "alloc")])),
        Err(TaskFailure::MemoryLimit { limit: 64 << 20 }),
        "the allocation stops at the instance cap"
    );
    healthy(&rt);

    let mut deadline = ctx(&[("mode", "loop")]);
    deadline.deadline = Duration::from_millis(300);
    let started = Instant::now();
    assert_eq!(
        run(&rt, &chaos, &deadline),
        Err(TaskFailure::Deadline { deadline_ms: 300, key: "flint.task.deadline".into() })
    );
    assert!(started.elapsed() < Duration::from_secs(5), "stopped soon after its deadline");
    healthy(&rt);

    match run(&rt, &chaos, &ctx(&[("mode", "big-output"), ("bytes", "2000000")])) {
        Err(TaskFailure::ResultTooLarge { size, limit }) => {
            assert!(size > limit && limit == 1 << 20)
        }
        other => panic!("result too large expected: {other:?}"),
    }
    assert_eq!(
        run(&rt, &chaos, &ctx(&[("mode", "fatal")])),
        Err(TaskFailure::Guest { message: "chaos asked to fail for good".into(), retryable: false })
    );
    healthy(&rt);

    // Handles live in the host's memory, outside the cap: wasmtime stops a store at
    // 100,000 of them.
    match run(&rt, &chaos, &ctx(&[("mode", "handles")])) {
        Err(TaskFailure::Trap { message, .. }) => assert!(message.contains("handle limit"), "{message}"),
        other => panic!("a trap at the handle limit expected: {other:?}"),
    }
    healthy(&rt);
}

#[test]
fn a_job_may_ask_for_less_memory_never_more() {
    let rt = runtime(64 << 20, None);
    let chaos = component("chaos");
    let mut small = ctx(&[("mode", "alloc")]);
    small.memory_limit = Some(32 << 20);
    assert_eq!(run(&rt, &chaos, &small), Err(TaskFailure::MemoryLimit { limit: 32 << 20 }));
    small.memory_limit = Some(1 << 30);
    assert_eq!(run(&rt, &chaos, &small), Err(TaskFailure::MemoryLimit { limit: 64 << 20 }));
}

#[test]
fn kill_switch_stops_a_running_guest() {
    let rt = Arc::new(runtime(64 << 20, None));
    let chaos = component("chaos");
    let c = ctx(&[("mode", "loop")]);
    let kill = c.kill.clone();
    let worker = {
        let rt = rt.clone();
        std::thread::spawn(move || run(&rt, &chaos, &c))
    };
    std::thread::sleep(Duration::from_millis(100));
    kill.kill();
    assert!(matches!(worker.join().unwrap(), Err(TaskFailure::Killed { .. })));
}

#[test]
fn sandbox_grants_no_ambient_authority() {
    let rt = runtime(64 << 20, None);
    let out = run(&rt, &component("chaos"), &ctx(&[("mode", "probe")])).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), r#"["env=0 args=0 root=false tcp=false"]"#);
}

#[test]
fn guest_output_is_captured_and_bounded() {
    let rt = runtime(64 << 20, None);
    let component = rt.load(&component("chaos")).unwrap();
    let outcome = rt.call(
        &component,
        &ctx(&[("mode", "chatter"), ("bytes", "1000000")]),
        Call::Run(TaskInput::Index(0)),
    );
    assert!(outcome.result.is_ok(), "a chatty guest is not failed for it: {:?}", outcome.result);
    assert!(outcome.log.starts_with("[INFO] task 0 running mode chatter\n...."), "{}", &outcome.log[..80]);
    assert!(outcome.log.len() < (64 << 10) + 200, "bounded: {} bytes", outcome.log.len());
    assert!(outcome.log.contains("more bytes of task output dropped"));
}

#[test]
fn components_are_checked_for_the_flint_world() {
    let rt = runtime(64 << 20, None);
    let err = rt.load(b"definitely not wasm").unwrap_err().to_string();
    assert!(err.starts_with("not a WebAssembly component"), "{err}");
    let err = rt.load(&component("hello-cli")).unwrap_err().to_string();
    assert!(err.contains("implements no flint:task interface"), "{err}");
    let pi = rt.load(&component("pi")).unwrap();
    assert_eq!(pi.world, flint_proto::World::Aggregate);
}

#[test]
fn compiled_components_are_kept_on_disk_and_reused() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = component("noop");
    let digest = flint_proto::Digest::of(&bytes);
    let first = runtime(64 << 20, Some(dir.path().to_owned()));
    first.load(&bytes).unwrap();
    let artifacts: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(artifacts.len(), 1, "{artifacts:?}");
    let name = artifacts[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with(&digest.hex()) && name.ends_with(".cwasm"), "{name}");
    let written = std::fs::metadata(&artifacts[0]).unwrap().modified().unwrap();

    // A restarted executor reads the artifact instead of compiling again.
    let second = runtime(64 << 20, Some(dir.path().to_owned()));
    let noop = second.load(&bytes).unwrap();
    assert_eq!(std::fs::metadata(&artifacts[0]).unwrap().modified().unwrap(), written);
    assert!(second.call(&noop, &ctx(&[]), Call::Run(TaskInput::Index(0))).result.is_ok());
    assert_eq!(run(&second, &bytes, &ctx(&[])).unwrap(), b"1");

    // A damaged artifact is recompiled, not trusted. (Runtimes map artifacts into
    // memory, so the damage is done with none running, as after a crash.)
    drop((first, noop, second));
    std::fs::write(&artifacts[0], b"garbage").unwrap();
    let third = runtime(64 << 20, Some(dir.path().to_owned()));
    assert!(third.load(&bytes).is_ok());
}

#[test]
fn compiled_components_past_the_budget_are_dropped_least_recently_used_first() {
    let dir = tempfile::tempdir().unwrap();
    let (noop, pi, chaos) = (component("noop"), component("pi"), component("chaos"));
    let probe = runtime(64 << 20, None);
    let sizes: Vec<u64> = [&noop, &pi, &chaos].iter().map(|b| probe.load(b).unwrap().size).collect();
    assert!(sizes.iter().all(|s| *s > 0), "{sizes:?}");
    // Room for the two largest, not for all three.
    let mut sorted = sizes.clone();
    sorted.sort();
    let budget = sorted[1] + sorted[2];
    let rt = Runtime::new(RuntimeConfig {
        slots: 2,
        instance_memory: 64 << 20,
        cache_dir: Some(dir.path().to_owned()),
        max_log_size: 64 << 10,
        pooling: true,
        component_cache: budget,
    })
    .unwrap();
    let digest = |b: &[u8]| flint_proto::Digest::of(b);
    rt.load(&noop).unwrap();
    rt.load(&pi).unwrap();
    assert!(rt.cached(&digest(&noop)).is_some(), "noop is now the most recently used");
    rt.load(&chaos).unwrap();
    let kept: Vec<bool> = [&noop, &pi, &chaos].iter().map(|b| rt.cached(&digest(b)).is_some()).collect();
    assert!(kept[2], "the newest stays");
    assert!(!kept[1], "pi, the least recently used, was dropped: {kept:?} of {sizes:?} in {budget}");
    // A dropped one comes back from the disk cache, without its bytes, and runs.
    let again = rt.load_known(&digest(&pi)).expect("pi's artifact is on disk");
    let out = rt.call(&again, &ctx(&[("points", "1000")]), Call::Run(TaskInput::Index(0)));
    assert!(out.result.is_ok(), "{:?}", out.result);
}

#[test]
fn nothing_an_instance_leaves_in_memory_reaches_the_next() {
    // One slot, so every task reuses the same pooled memory: its first pages are reset
    // in place, the rest by the kernel; 8 MiB spans both.
    let rt = Runtime::new(RuntimeConfig {
        slots: 1,
        instance_memory: 64 << 20,
        cache_dir: None,
        max_log_size: 64 << 10,
        pooling: true,
        component_cache: 256 << 20,
    })
    .unwrap();
    let chaos = component("chaos");
    for size in [4 << 10, 8 << 20, 64 << 10] {
        let bytes = size.to_string();
        for task in 0..5 {
            let mut c = ctx(&[("mode", "residue"), ("bytes", &bytes)]);
            c.task_index = task;
            let out = String::from_utf8(run(&rt, &chaos, &c).unwrap()).unwrap();
            assert_eq!(out, r#"["runs=0 dirty=0"]"#, "task {task} after others wrote {size} bytes");
        }
    }
}

#[test]
fn a_live_instance_runs_each_call_as_a_task_of_its_own_and_keeps_its_memory() {
    let rt = runtime(64 << 20, None);
    let chaos = rt.load(&component("chaos")).unwrap();
    let shown = |output: Vec<u8>| {
        let mut folder = rt.folder(&chaos, ctx(&[]));
        let acc = folder.load(&output).unwrap();
        String::from_utf8(folder.finish(acc).unwrap()).unwrap()
    };
    let call = |task: u32, conf: &[(&str, &str)]| {
        let mut c = ctx(conf);
        c.task_index = task;
        c
    };
    let residue = [("mode", "residue"), ("bytes", "4096")];
    let mut instance = rt.instantiate(chaos.clone(), &call(0, &residue)).unwrap();
    // What one call leaves in the guest's globals, the next sees: that is what reuse
    // is (a fresh instance per call sees none, as the test above shows).
    for task in 0..3 {
        let out = instance.run(&call(task, &residue), TaskInput::Index(task)).result.unwrap();
        assert!(shown(out).starts_with(&format!(r#"["runs={task} "#)), "call {task}");
    }
    // Each call has its own task, log and deadline.
    let chatter = instance.run(&call(7, &[("mode", "chatter"), ("bytes", "2048")]), TaskInput::Index(7));
    assert!(chatter.log.starts_with("[INFO] task 7 running mode chatter\n"), "{}", chatter.log);
    assert!(!chatter.log.contains("residue"), "the log holds this call's output only");
    let ok = instance.run(&call(9, &[]), TaskInput::Index(9));
    assert_eq!(shown(ok.result.unwrap()), "[9]");
    assert_eq!(ok.log, "[INFO] task 9 running mode ok\n");
    let mut short = call(10, &[("mode", "sleep")]);
    short.deadline = Duration::from_millis(100);
    let started = Instant::now();
    let slept = instance.run(&short, TaskInput::Index(10));
    assert!(matches!(slept.result, Err(TaskFailure::Deadline { .. })), "{:?}", slept.result);
    assert!(started.elapsed() < Duration::from_secs(5), "the call's own deadline, not the first one's");
    assert_eq!(instance.calls(), 6);
}

#[test]
fn outputs_fold_in_one_instance_in_partition_order() {
    let rt = runtime(64 << 20, None);
    let chaos = rt.load(&component("chaos")).unwrap();
    let outputs: Vec<Vec<u8>> = (0..4)
        .map(|i| {
            let mut c = ctx(&[]);
            c.task_index = i;
            rt.call(&chaos, &c, Call::Run(TaskInput::Index(i))).result.unwrap()
        })
        .collect();
    let mut folder = rt.folder(&chaos, ctx(&[]));
    let accs: Vec<_> = outputs.iter().map(|o| folder.load(o).unwrap()).collect();
    let mut accs = accs.into_iter();
    let (a0, a1, a2, a3) =
        (accs.next().unwrap(), accs.next().unwrap(), accs.next().unwrap(), accs.next().unwrap());
    // (0 1) and (2 3) apart, then together; a partial result reloads as an output would.
    folder.absorb(&a0, a1).unwrap();
    folder.absorb(&a2, a3).unwrap();
    let partial = folder.encode(&a2).unwrap();
    let reloaded = folder.load(&partial).unwrap();
    folder.absorb(&a0, reloaded).unwrap();
    assert_eq!(folder.finish(a0).unwrap(), b"[0,1,2,3]");

    // A bad output fails the fold with the guest's reason, and the folder stays failed.
    let mut folder = rt.folder(&chaos, ctx(&[]));
    match folder.load(b"\xff\xff\xff") {
        Err(TaskFailure::Guest { message, retryable: false }) => {
            assert!(message.contains("cannot decode a task output"), "{message}")
        }
        other => panic!("a decode failure expected: {other:?}"),
    }
    assert!(folder.load(&outputs[0]).is_err(), "a failed folder answers with its failure");
}
