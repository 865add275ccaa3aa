//! `flint run` end to end: the real binary on real example components.
//! `make test` builds both first.

mod common;

use common::{command, corpus, corpus_of, flint, flint_peak_memory, json, lossy, wasm};
use serde_json::Value;
use std::collections::HashMap;
use std::time::{Duration, Instant};

#[test]
fn pi_gives_the_reference_count() {
    let out = flint(&["run", "examples/pi", "--conf", "points=25000000", "--partitions", "32", "--json"]);
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["status"], "succeeded");
    assert_eq!(report["result"]["inside"], 628327425u64);
    assert_eq!(report["result"]["total"], 800_000_000u64);
    assert_eq!(report["result"]["pi"], 4.0 * 628327425.0 / 800_000_000.0);
    assert_eq!(report["tasks"], 32);
    assert_eq!(report["attempts"], 32);
}

#[test]
fn word_count_equals_an_independent_count() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.txt"), dir.path().join("b.txt"));
    corpus(&a, 3 << 20);
    corpus(&b, 1 << 20);
    let mut counts: HashMap<String, u64> = HashMap::new();
    for file in [&a, &b] {
        let text = std::fs::read_to_string(file).unwrap();
        for word in text.split(|c: char| c.is_ascii_whitespace()).filter(|w| !w.is_empty()) {
            *counts.entry(word.to_owned()).or_default() += 1;
        }
    }
    let mut top: Vec<(&String, &u64)> = counts.iter().collect();
    top.sort_by(|x, y| y.1.cmp(x.1).then(x.0.cmp(y.0)));
    let expected_top: Vec<Value> = top[..10].iter().map(|(w, n)| serde_json::json!([w, n])).collect();

    let (a, b) = (a.to_string_lossy(), b.to_string_lossy());
    let args =
        ["run", "examples/word-count", "--input", &a, "--input", &b, "--executors", "3", "--cores", "2"];
    let out = flint(&[&args[..], &["--partitions", "7", "--json"]].concat());
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["result"]["total_words"], counts.values().sum::<u64>());
    assert_eq!(report["result"]["distinct_words"], counts.len() as u64);
    assert_eq!(report["result"]["top"], Value::Array(expected_top));
    assert!(report["tasks"].as_u64().unwrap() >= 7, "split into partitions: {report}");
}

/// Runs the chaos guest with `mode` on task 1 of 2 and returns the typed failure.
fn chaos_failure(mode: &str, extra: &[&str]) -> (Value, Value, Duration) {
    let base = ["run", "examples/chaos", "--partitions", "2", "--conf", "only_task=1", "--json"];
    let mode = format!("mode={mode}");
    let started = Instant::now();
    let out = flint(&[&base[..], &["--conf", &mode, "--conf", "flint.task.maxFailures=1"], extra].concat());
    let elapsed = started.elapsed();
    assert_eq!(out.status.code(), Some(1), "a failed job exits 1: {}", lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["status"], "failed");
    let error = report["error"].as_str().unwrap().to_owned();
    assert!(error.contains("task 1"), "the error names the task: {error}");
    (report["failure"]["reason"].clone(), Value::String(error), elapsed)
}

#[test]
fn trapping_guest_fails_with_a_trap_and_backtrace() {
    let (reason, error, _) = chaos_failure("trap", &[]);
    assert_eq!(reason["kind"], "trap");
    assert!(reason["backtrace"].as_str().unwrap().contains("chaos.wasm!"), "{reason}");
    assert!(error.as_str().unwrap().contains("unreachable"), "{error}");
}

#[test]
fn panicking_guest_fails_with_its_panic_message() {
    let (reason, _, _) = chaos_failure("panic", &[]);
    assert_eq!(reason["kind"], "trap");
    assert!(reason["message"].as_str().unwrap().contains("chaos asked to panic in task 1"), "{reason}");
}

#[test]
fn endless_loop_is_stopped_at_its_deadline() {
    let (reason, error, elapsed) = chaos_failure("loop", &["--conf", "flint.task.deadline=1s"]);
    assert_eq!(
        reason,
        serde_json::json!({"kind": "deadline", "deadline_ms": 1000, "key": "flint.task.deadline"})
    );
    assert!(error.as_str().unwrap().contains("deadline"), "{error}");
    // The whole run, start-up included, ends soon after the one-second deadline.
    assert!(elapsed < Duration::from_secs(6), "took {elapsed:?}");
}

#[test]
fn a_guest_waiting_in_wasi_is_stopped_at_its_deadline() {
    // An hour's sleep, and an hour's wait on a clock pollable, against a 2 s deadline.
    for mode in ["sleep", "poll"] {
        let (reason, _, elapsed) = chaos_failure(mode, &["--conf", "flint.task.deadline=2s"]);
        assert_eq!(reason["kind"], "deadline", "{mode}: {reason}");
        assert_eq!(reason["key"], "flint.task.deadline");
        assert!(elapsed < Duration::from_secs(3), "{mode}: deadline + 1 s at most, took {elapsed:?}");
    }
}

#[test]
fn attempts_waiting_in_wasi_are_killed_when_their_job_fails() {
    // Task 0 fails for good at once; the others sleep for an hour until they are killed.
    let started = Instant::now();
    let out = flint(&[
        "run",
        "examples/chaos",
        "--partitions",
        "4",
        "--cores",
        "4",
        "--conf",
        "mode=fatal",
        "--conf",
        "only_task=0",
        "--conf",
        "other_mode=sleep",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", lossy(&out.stderr));
    assert_eq!(json(&out)["failure"]["reason"]["kind"], "guest-error");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the sleepers ended with it: {:?}",
        started.elapsed()
    );
    assert!(!lossy(&out.stderr).contains("panicked"), "{}", lossy(&out.stderr));
}

#[test]
fn a_merge_that_sleeps_or_spins_is_stopped_at_the_merge_deadline() {
    for merge in ["sleep", "loop"] {
        let started = Instant::now();
        let merge_mode = format!("merge_mode={merge}");
        let out = flint(&[
            "run",
            "examples/chaos",
            "--partitions",
            "3",
            "--conf",
            &merge_mode,
            "--conf",
            "flint.merge.deadline=2s",
            "--json",
        ]);
        let elapsed = started.elapsed();
        assert_eq!(out.status.code(), Some(1), "{}", lossy(&out.stderr));
        let report = json(&out);
        assert_eq!(report["failure"]["reason"]["kind"], "deadline", "{merge}: {report}");
        assert!(report["error"].as_str().unwrap().contains("flint.merge.deadline"), "{report}");
        assert!(elapsed < Duration::from_secs(4), "{merge}: merge deadline + 1 s or so, took {elapsed:?}");
    }
}

#[test]
fn allocation_stops_at_the_instance_cap() {
    // 256 MiB × 0.6 shared by 2 slots.
    let (reason, _, _) = chaos_failure("alloc", &["--memory", "256m", "--cores", "2"]);
    assert_eq!(reason, serde_json::json!({"kind": "memory-limit", "limit": (256u64 << 20) * 6 / 10 / 2}));
}

#[test]
fn a_refused_allocation_the_guest_survived_does_not_hide_its_later_panic() {
    let (reason, _, _) = chaos_failure("refused-then-panic", &[]);
    assert_eq!(reason["kind"], "trap", "{reason}");
    assert!(reason["message"].as_str().unwrap().contains("unrelated failure"), "{reason}");
}

#[test]
fn oversized_result_is_refused() {
    let (reason, _, _) = chaos_failure("big-output", &["--conf", "flint.task.maxResultSize=1m"]);
    assert_eq!(reason["kind"], "result-too-large");
    assert_eq!(reason["limit"], 1 << 20);
    assert!(reason["size"].as_u64().unwrap() > 1 << 20);
}

#[test]
fn a_flaky_task_is_retried_and_the_job_succeeds() {
    let out = flint(&["run", "examples/chaos", "--partitions", "3", "--conf", "mode=flaky", "--json"]);
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["result"], serde_json::json!([0, 1, 2]));
    assert_eq!(report["attempts"], 6);
    assert_eq!(report["task_failures"].as_array().unwrap().len(), 3);
}

#[test]
fn a_combining_instance_that_traps_loses_what_it_held_and_those_tasks_run_again() {
    // One slot: tasks 0..9 are added to one combining instance, which traps adding 10.
    let args = ["run", "examples/tally", "--partitions", "20", "--executors", "1", "--cores", "1"];
    let out = flint(&[&args[..], &["--conf", "trap_task=10", "--json"]].concat());
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["result"], serde_json::json!({"sum": 210, "tasks": 20}), "each task once: {report}");
    let failures = report["task_failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "only the trap is a failure: {report}");
    assert_eq!(failures[0]["task"], 10, "{report}");
    assert_eq!(failures[0]["failure"]["kind"], "trap", "{report}");
    // 20 first attempts, task 10 again, and the ten whose outputs went with the instance.
    assert_eq!(report["attempts"], 31, "{report}");
}

#[test]
fn combined_values_too_large_for_a_report_arrive_as_blocks() {
    let args = ["run", "examples/tally", "--partitions", "16", "--executors", "2", "--cores", "2"];
    let out = flint(&[&args[..], &["--conf", "pad=300000", "--json"]].concat());
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["result"], serde_json::json!({"sum": 136, "tasks": 16}), "{report}");
    assert_eq!(report["attempts"], 16, "{report}");
}

/// A one-line error on stderr, exit code 3, no panic.
fn assert_refused(args: &[&str], needle: &str) {
    let out = flint(args);
    let stderr = lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{args:?}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    assert!(stderr.starts_with("error: ") && stderr.contains(needle), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.stdout.is_empty());
}

/// The mistakes a job's new author makes, each refused with what to change: a job
/// built for another target (a native library, an rlib, a core module), a component of
/// another world or of an older contract, a misspelt manifest key, a manifest whose world
/// is not its component's.
#[test]
fn a_new_author_s_mistakes_are_answered_with_what_to_change() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path.to_string_lossy().into_owned()
    };
    let elf = file("libjob.so", b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    assert_refused(&["run", &elf], "native library or executable (ELF) for this machine, not WebAssembly");
    assert_refused(&["run", &elf], "--target wasm32-wasip2");
    let rlib = file("libjob.rlib", b"!<arch>\n/               0           0     0     0       8         `\n");
    assert_refused(&["run", &rlib], "is the crate a cdylib?");
    let core = file("core.wasm", b"\0asm\x01\0\0\0");
    assert_refused(&["run", &core], "core wasm module");
    assert_refused(&["run", &core], "--target wasm32-wasip2");
    assert_refused(&["run", &wasm("hello-cli")], "implements no flint:task interface");

    // The no-op job as a flint of an older contract would have built it: the same
    // component, its flint:task names at 0.2.0.
    let mut old = std::fs::read(wasm("noop")).unwrap();
    let (from, to) = (b"@0.3.0", b"@0.2.0");
    let mut renamed = 0;
    for at in 0..old.len().saturating_sub(from.len()) {
        let named = old[..at].windows(11).rev().take(40).any(|w| w == b"flint:task/");
        if &old[at..at + from.len()] == from && named {
            old[at..at + from.len()].copy_from_slice(to);
            renamed += 1;
        }
    }
    assert!(renamed > 0, "the component names its contract");
    let old = file("old.wasm", &old);
    assert_refused(&["run", &old], "built against Flint's contract flint:task@0.2.0");
    assert_refused(&["run", &old], "this flint implements flint:task@0.3.0");

    let job = dir.path().join("job");
    std::fs::create_dir(&job).unwrap();
    let manifest = |text: &str| std::fs::write(job.join("flint.toml"), text).unwrap();
    let component = wasm("pi");
    manifest(&format!("name = \"pi\"\ncomponent = \"{component}\"\nwrold = \"aggregate\"\n"));
    let job_dir = job.to_string_lossy().into_owned();
    assert_refused(&["run", &job_dir], "line 3: unknown key `wrold`: did you mean `world`?");
    manifest(&format!("name = \"pi\"\ncomponent = \"{component}\"\nworld = \"map-reduce\"\n"));
    assert_refused(
        &["run", &job_dir],
        "declares world = \"map-reduce\" but the component implements the aggregate world",
    );
}

#[test]
fn a_key_the_job_never_reads_is_named_after_its_result_with_the_one_it_does_read() {
    let out =
        flint(&["run", "examples/shapes", "--conf", "n=1000", "--conf", "shap=circle", "--conf", "unused=1"]);
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    let said = lossy(&out.stderr);
    assert!(
        said.contains(
            "warning: the job never read the key shap it was given: did you mean shape, which it reads?\n"
        ) && said.contains("warning: the job never read the key unused it was given\n"),
        "{said}"
    );
    assert!(!lossy(&out.stdout).contains("warning"), "the result stays clean for a script");
    // Read keys, and flint.* keys (checked when given), say nothing.
    let out = flint(&[
        "run",
        "examples/shapes",
        "--conf",
        "n=1000",
        "--conf",
        "shape=hash",
        "--conf",
        "flint.task.cpus=1",
    ]);
    assert!(out.status.success() && !lossy(&out.stderr).contains("warning"), "{}", lossy(&out.stderr));
}

#[test]
fn bad_jobs_get_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.wasm");
    std::fs::write(&garbage, (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect::<Vec<u8>>()).unwrap();
    let garbage = garbage.to_string_lossy();
    assert_refused(&["run", &garbage], "not a WebAssembly component");
    assert_refused(&["run", "examples/word-count", "--input", "/no/such/file.txt"], "/no/such/file.txt");
    assert_refused(
        &["run", "examples/pi", "--conf", "flint.task.maxFailurez=2"],
        "unknown configuration key flint.task.maxFailurez",
    );
    assert_refused(&["run", "examples/pi", "--conf", "points"], "malformed --conf");
    assert_refused(&["run", "examples/pi", "--conf", "flint.task.deadline=soon"], "flint.task.deadline");
    let bundle = dir.path().join("bad.flint");
    std::fs::write(&bundle, b"FLINTBDL\x01\x00\x00\x00\xff\xff").unwrap();
    assert_refused(&["run", &bundle.to_string_lossy()], "not a valid Flint bundle");
    // Configuration that cannot work is refused with its key, before anything runs.
    for (conf, key) in [
        ("flint.network.timeout=0s", "flint.network.timeout"),
        ("flint.executor.heartbeatInterval=0s", "flint.executor.heartbeatInterval"),
        ("flint.task.deadline=0s", "flint.task.deadline"),
        ("flint.merge.deadline=0s", "flint.merge.deadline"),
        ("flint.executor.backend=local", "flint.executor.backend"),
        ("flint.executor.backend=yarn", "flint.executor.backend"),
    ] {
        assert_refused(&["run", "examples/pi", "--conf", conf], key);
    }
    assert_refused(&["run", "examples/pi", "--partitions", "0"], "partitions");
    for (limit, key) in [("memory = \"0\"", "limits.memory"), ("deadline = \"0s\"", "limits.deadline")] {
        let job = dir.path().join(key);
        std::fs::create_dir(&job).unwrap();
        let manifest = format!("name = \"pi\"\ncomponent = {:?}\n[limits]\n{limit}\n", wasm("pi"));
        std::fs::write(job.join("flint.toml"), manifest).unwrap();
        assert_refused(&["run", &job.to_string_lossy()], key);
    }
    // A component whose memory cannot fit the task cap, or the job's own limit, is
    // refused as such.
    assert_refused(
        &["run", &wasm("too_big"), "--memory", "512m"],
        "needs at least 1074855936 bytes of memory; this executor's task cap is",
    );
    let job = dir.path().join("under-own-limit");
    std::fs::create_dir(&job).unwrap();
    let manifest =
        format!("name = \"big\"\ncomponent = {:?}\n[limits]\nmemory = \"512m\"\n", wasm("too_big"));
    std::fs::write(job.join("flint.toml"), manifest).unwrap();
    assert_refused(
        &["run", &job.to_string_lossy(), "--memory", "8g"],
        "needs at least 1074855936 bytes of memory; the job's limits.memory is 536870912 bytes",
    );
}

#[test]
fn a_bundle_runs_as_its_folder_does() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("pi.flint");
    let bundle = bundle.to_string_lossy();
    let made = flint(&["bundle", "examples/pi", "-o", &bundle]);
    assert!(made.status.success(), "{}", lossy(&made.stderr));
    let args = ["--conf", "points=100000", "--partitions", "4", "--json"];
    let from_bundle = json(&flint(&[&["run", &bundle][..], &args].concat()));
    let from_folder = json(&flint(&[&["run", "examples/pi"][..], &args].concat()));
    assert_eq!(from_bundle["result"], from_folder["result"]);
    assert_eq!(from_bundle["job"], "pi");
}

#[test]
fn human_summary_shows_the_result() {
    let out = flint(&["run", "examples/noop", "--partitions", "5"]);
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    let stdout = lossy(&out.stdout);
    assert!(stdout.starts_with("job noop succeeded in "), "{stdout}");
    assert!(stdout.contains("5 tasks") && stdout.trim_end().ends_with('5'), "{stdout}");
}

#[test]
fn a_job_result_may_exceed_the_per_task_limit() {
    // Five outputs of 16 MB, each under flint.task.maxResultSize (64m): their merged
    // result (80 MB) is bounded by flint.driver.maxResultSize (1g), not the task limit.
    let out = flint(&[
        "run",
        "examples/chaos",
        "--partitions",
        "5",
        "--memory",
        "4g",
        "--conf",
        "mode=big-output",
        "--conf",
        "bytes=16000000",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}{}",
        lossy(&out.stderr),
        lossy(&out.stdout).chars().take(2000).collect::<String>()
    );
    let report = json(&out);
    let strings = report["result"].as_array().unwrap();
    assert_eq!(strings.len(), 5);
    assert!(
        strings
            .iter()
            .all(|s| s.as_str().is_some_and(|s| s.len() == 16_000_000 && s.bytes().all(|b| b == b'x')))
    );
}

#[test]
fn a_task_that_floods_its_log_and_errors_at_length_is_cut_and_says_so() {
    // 200 MB of log lines through the host import, then a 50 MB error message.
    let out = flint(&[
        "run",
        "examples/chaos",
        "--partitions",
        "1",
        "--conf",
        "mode=flood",
        "--conf",
        "bytes=209715200",
        "--conf",
        "error_bytes=52428800",
        "--conf",
        "flint.task.maxFailures=1",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", lossy(&out.stderr[..out.stderr.len().min(4096)]));
    assert!(out.stdout.len() < common::FLOOD_BOUND, "stdout {} bytes", out.stdout.len());
    assert!(out.stderr.len() < common::FLOOD_BOUND, "stderr {} bytes", out.stderr.len());
    let report = json(&out);
    let message = report["failure"]["reason"]["message"].as_str().unwrap();
    assert!(message.ends_with(" bytes dropped]"), "{}", &message[message.len() - 60..]);
    let tail = report["task_failures"][0]["log_tail"].as_str().unwrap();
    assert!(tail.contains("more bytes of task output dropped"), "{tail}");
    assert!(lossy(&out.stderr).contains("the rest go to its task log only"));
}

#[test]
fn outputs_behind_a_slow_merge_make_tasks_wait_not_memory_grow() {
    // 40 outputs of 24 MiB behind a merge that takes a tenth of a second each: without
    // a bound the driver held them all (1.1 GB peak); now fetches wait for the merges.
    let dir = tempfile::tempdir().unwrap();
    let stdout = dir.path().join("report.json");
    let args = ["run", "examples/chaos", "--partitions", "40", "--memory", "4g", "--json"];
    let conf = ["--conf", "mode=big-output", "--conf", "bytes=25165824", "--conf", "merge_mode=slow"];
    let mut child = common::command(&[&args[..], &conf[..]].concat())
        // A file, not a pipe: the 24 MiB report must not wait for a reader.
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let peak_kib = |text: &str| -> Option<u64> {
        text.lines().find(|l| l.starts_with("VmHWM:"))?.split_whitespace().nth(1)?.parse().ok()
    };
    let mut peak = 0;
    while child.try_wait().unwrap().is_none() {
        if let Some(kib) = std::fs::read_to_string(&status).ok().as_deref().and_then(peak_kib) {
            peak = kib;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(child.wait().unwrap().success());
    let report: Value = serde_json::from_slice(&std::fs::read(&stdout).unwrap()).unwrap();
    assert_eq!(report["result"].as_array().unwrap().len(), 1, "the merge keeps the left side");
    // Documented in ARCHITECTURE.md: outputs waiting for merges stay under 64 MiB.
    assert!(peak < 700 << 10, "peak RSS {} MiB", peak >> 10);
    eprintln!("peak RSS behind a slow merge: {} MiB", peak >> 10);
}

#[test]
fn a_jobs_tasks_reuse_their_instance_as_flint_task_instance_reuse_says() {
    // One slot: 8 tasks run one after another. Each residue task says how many ran in
    // its instance before it.
    let residues = |reuse: &str| -> Vec<String> {
        let reuse = format!("flint.task.instanceReuse={reuse}");
        let out = flint(&[
            "run",
            "examples/chaos",
            "--partitions",
            "8",
            "--cores",
            "1",
            "--conf",
            "mode=residue",
            "--conf",
            "bytes=4096",
            "--conf",
            &reuse,
            "--json",
        ]);
        assert!(out.status.success(), "{}", lossy(&out.stderr));
        let report = json(&out);
        let items = report["result"].as_array().unwrap().iter();
        items.map(|v| v.as_str().unwrap().split(' ').next().unwrap().to_owned()).collect()
    };
    let runs = |ns: &[u32]| -> Vec<String> { ns.iter().map(|n| format!("runs={n}")).collect() };
    assert_eq!(residues("4"), runs(&[0, 1, 2, 3, 0, 1, 2, 3]));
    assert_eq!(residues("1"), runs(&[0; 8]), "1: a fresh instance for every task");
    let out = flint(&["run", "examples/chaos", "--conf", "flint.task.instanceReuse=0", "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", lossy(&out.stderr));
    assert!(lossy(&out.stderr).contains("flint.task.instanceReuse"), "{}", lossy(&out.stderr));
}

/// A map whose keys overflow the SDK's combining table emits some keys more than once;
/// the host folds them with the job's combine as it writes the map's output, so each
/// key leaves the map once and the answer is the same.
#[test]
fn keys_a_map_wrote_more_than_once_leave_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("wide.txt");
    // Hundreds of thousands of distinct words in one map: more than its table holds.
    corpus_of(&input, 6 << 20, 1_000_000);
    let input = input.to_string_lossy();
    let args = ["run", "examples/word-count-mr", "--input", &input, "--partitions", "1", "--json"];
    let out = common::command(&args).env("FLINT_LOG", "flint_executor::shuffle=debug").output().unwrap();
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    let reference =
        json(&flint(&["run", "examples/word-count", "--input", &input, "--json"]))["result"].clone();
    assert_eq!(json(&out)["result"], reference);
    let log = lossy(&out.stderr);
    let line = log.lines().find(|l| l.contains("combined keys")).unwrap_or_else(|| panic!("{log}"));
    let field = |name: &str| -> u64 {
        line.split(&format!("{name}=")).nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap()
    };
    assert!(field("before") > field("after"), "{line}");
    assert_eq!(field("after"), reference["distinct_words"].as_u64().unwrap(), "each word once: {line}");
}

/// Word count as map/reduce (maps emit `(word, 1)` combined where they run, eight reduce
/// partitions sum them) gives exactly `word-count`'s result, on two in-process
/// executors that read each other's map outputs; its shuffle files, and those a dead
/// executor left in the same local folder, are gone when the run ends.
#[test]
fn map_reduce_word_count_equals_word_count_and_leaves_no_shuffle_files() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.txt"), dir.path().join("b.txt"));
    corpus(&a, 5 << 20);
    corpus(&b, 2 << 20);
    let local = dir.path().join("local");
    let stale = local.join("flint-shuffle-00000000deadbeef/job-1");
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join("map-0.data"), b"left by a run that died").unwrap();
    let (a, b) = (a.to_string_lossy(), b.to_string_lossy());
    let inputs = ["--input", &a, "--input", &b, "--partitions", "6", "--json"];
    let reference = flint(&[&["run", "examples/word-count"][..], &inputs].concat());
    assert!(reference.status.success(), "{}", lossy(&reference.stderr));
    let local_dir = format!("flint.local.dir={}", local.display());
    let args =
        ["run", "examples/word-count-mr", "--executors", "2", "--cores", "2", "--reduce-partitions", "8"];
    let out = flint(&[&args[..], &inputs, &["--conf", &local_dir]].concat());
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["status"], "succeeded", "{report}");
    assert_eq!(report["result"], json(&reference)["result"]);
    let maps = json(&reference)["tasks"].as_u64().unwrap();
    assert_eq!(report["tasks"], maps + 8, "the maps, then eight reduce tasks: {report}");
    // Two stages: the maps write the shuffle the reducers read, every byte of it.
    let stages = report["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 2, "{report}");
    assert_eq!((&stages[0]["kind"], &stages[0]["tasks"]), (&Value::from("shuffle"), &Value::from(maps)));
    assert_eq!((&stages[1]["kind"], &stages[1]["tasks"]), (&Value::from("result"), &Value::from(8)));
    assert_eq!(stages[1]["parents"], serde_json::json!([0]));
    assert!(stages[0]["shuffle_write_bytes"].as_u64() > Some(0), "{report}");
    assert_eq!(stages[0]["shuffle_write_bytes"], stages[1]["shuffle_read_bytes"], "{report}");
    assert_eq!((&stages[0]["skipped"], &stages[1]["rerun_tasks"]), (&Value::from(false), &Value::from(0)));
    // A job of one stage says so as well.
    let one = json(&reference)["stages"].clone();
    assert_eq!(one.as_array().map(Vec::len), Some(1), "{one}");
    assert_eq!((&one[0]["kind"], &one[0]["tasks"]), (&Value::from("result"), &Value::from(maps)), "{one}");
    let left: Vec<_> = std::fs::read_dir(&local).unwrap().flatten().map(|e| e.path()).collect();
    assert!(left.is_empty(), "shuffle folders left behind: {left:?}");
}

/// Every `word<TAB>value` line of the part files in `dir`, which must hold `parts`
/// parts, `_SUCCESS`, and nothing else; no word is in two lines.
fn part_lines(dir: &std::path::Path, parts: u32) -> Vec<(String, String)> {
    let names = common::names_in(dir);
    let mut expected: Vec<String> = (0..parts).map(|p| format!("part-{p:05}")).collect();
    expected.insert(0, "_SUCCESS".into());
    assert_eq!(names, expected, "what {} holds", dir.display());
    let mut lines = Vec::new();
    for name in &names[1..] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let part: Vec<(String, String)> = text
            .lines()
            .map(|l| {
                let (k, v) = l.split_once('\t').expect("word<TAB>value");
                (k.to_owned(), v.to_owned())
            })
            .collect();
        lines.extend(part);
    }
    let words: std::collections::HashSet<&String> = lines.iter().map(|(w, _)| w).collect();
    assert_eq!(words.len(), lines.len(), "a word in two lines");
    lines
}

#[test]
fn a_reduce_attempt_that_fails_after_writing_half_its_part_leaves_only_the_committed_one() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("corpus.txt");
    corpus(&input, 1 << 20);
    let input = input.to_string_lossy();
    let reference =
        json(&flint(&["run", "examples/word-count", "--input", &input, "--json"]))["result"].clone();
    let out_dir = dir.path().join("counts");
    let out = flint(&[
        "run",
        "examples/word-count-mr",
        "--input",
        &input,
        "--reduce-partitions",
        "4",
        "--output",
        out_dir.to_str().unwrap(),
        "--conf",
        "fail_first_attempt=true",
        "--json",
    ]);
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["result"], reference, "{report}");
    // Each reducer's first attempt wrote two megabytes of junk and failed; its retry is
    // what was committed, and nothing of the first is left.
    assert_eq!(report["task_failures"].as_array().unwrap().len(), 4, "{report}");
    assert_eq!(report["attempts"].as_u64(), report["tasks"].as_u64().map(|t| t + 4), "{report}");
    let lines = part_lines(&out_dir, 4);
    let total: u64 = lines.iter().map(|(_, n)| n.parse::<u64>().unwrap()).sum();
    assert_eq!(total, reference["total_words"].as_u64().unwrap());
}

#[test]
fn map_reduce_word_count_writes_part_files_that_hold_word_counts_answer() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("corpus.txt");
    corpus(&input, 4 << 20);
    let input = input.to_string_lossy();
    let reference = flint(&["run", "examples/word-count", "--input", &input, "--json"]);
    let reference = json(&reference)["result"].clone();
    // A relative directory, as a user types it, resolved against the working one.
    let out_dir = dir.path().join("counts");
    let job = common::root().join("examples/word-count-mr");
    let args = ["run", job.to_str().unwrap(), "--input", &input, "--reduce-partitions", "8"];
    let out = common::command(&[&args[..], &["--output", "counts", "--json"]].concat())
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    assert_eq!(json(&out)["result"], reference, "the folded result, as without --output");
    // The report says how the shuffle spread over the reduce partitions.
    let shuffle = &json(&out)["shuffle"];
    assert_eq!((&shuffle["partitions"], &shuffle["skewed"]), (&Value::from(8), &Value::from(0)), "{shuffle}");
    let (bytes, largest, median) = (
        shuffle["bytes"].as_u64().unwrap(),
        shuffle["largest"].as_u64().unwrap(),
        shuffle["median"].as_u64().unwrap(),
    );
    assert!(bytes > 0 && largest >= median && largest <= bytes, "{shuffle}");
    let lines = part_lines(&out_dir, 8);
    let total: u64 = lines.iter().map(|(_, n)| n.parse::<u64>().unwrap()).sum();
    assert_eq!(total, reference["total_words"].as_u64().unwrap());
    assert_eq!(lines.len() as u64, reference["distinct_words"].as_u64().unwrap());
    let mut top: Vec<(String, u64)> = lines.into_iter().map(|(w, n)| (w, n.parse().unwrap())).collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    top.truncate(10);
    assert_eq!(serde_json::to_value(&top).unwrap(), reference["top"]);
    // The same directory again: refused, and what it holds is left alone.
    let again = common::command(&[&args[..], &["--output", "counts", "--json"]].concat())
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(3), "{}", lossy(&again.stdout));
    assert!(
        lossy(&again.stderr).contains("of an earlier job: name a new directory"),
        "{}",
        lossy(&again.stderr)
    );
    assert_eq!(part_lines(&out_dir, 8).len() as u64, reference["distinct_words"].as_u64().unwrap());
    // Part files are a map/reduce job's.
    let other = flint(&[
        "run",
        "examples/word-count",
        "--input",
        &input,
        "--output",
        &format!("{}/x", dir.path().display()),
    ]);
    assert_eq!(other.status.code(), Some(3));
    assert!(lossy(&other.stderr).contains("are for map/reduce jobs"), "{}", lossy(&other.stderr));

    // Collected instead (`--collect`): the same parts, in partition order, on stdout.
    let files: Vec<u8> =
        (0..8).flat_map(|p| std::fs::read(out_dir.join(format!("part-{p:05}"))).unwrap()).collect();
    let collected = flint(&[&args[..], &["--collect"]].concat());
    assert!(collected.status.success(), "{}", lossy(&collected.stderr));
    assert!(collected.stdout == files, "stdout is the part files' bytes, in order");
    assert!(lossy(&collected.stderr).contains("succeeded"), "the summary goes to stderr");
    let as_json = flint(&[&args[..], &["--collect", "--json"]].concat());
    assert_eq!(json(&as_json)["result"].as_str().unwrap().as_bytes(), files);
    // Within the task's result bound, as any task output: a part past it fails its task.
    let bounded =
        flint(&[&args[..], &["--collect", "--json", "--conf", "flint.task.maxResultSize=1k"]].concat());
    assert_eq!(bounded.status.code(), Some(1), "{}", lossy(&bounded.stdout));
    assert_eq!(json(&bounded)["failure"]["reason"]["kind"], "result-too-large", "{}", lossy(&bounded.stdout));
    let both = flint(&[&args[..], &["--collect", "--output", "elsewhere"]].concat());
    assert_eq!(both.status.code(), Some(2), "one or the other: {}", lossy(&both.stderr));
}

#[test]
fn inverted_index_over_several_files_equals_an_independent_index() {
    use std::collections::{BTreeMap, BTreeSet};
    let dir = tempfile::tempdir().unwrap();
    let mut index: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut inputs = Vec::new();
    let mut seed = 7u64;
    for doc in 0..5 {
        let name = format!("doc-{doc}.txt");
        let mut text = String::new();
        for line in 0..20_000 {
            for _ in 0..8 {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                // Words shared by every document, and words of a few only.
                let word = format!("W{}", (seed >> 33) % (500 + 3000 * doc));
                index.entry(word.to_lowercase()).or_default().insert(name.clone());
                text.push_str(&word);
                text.push(if line % 3 == 0 { ',' } else { ' ' });
            }
            text.push('\n');
        }
        let path = dir.path().join(&name);
        std::fs::write(&path, text).unwrap();
        inputs.extend(["--input".to_owned(), path.to_string_lossy().into_owned()]);
    }
    let out_dir = dir.path().join("index");
    let out_arg = out_dir.to_string_lossy().into_owned();
    let args = ["run", "examples/inverted-index", "--partitions", "10", "--reduce-partitions", "4"];
    let inputs: Vec<&str> = inputs.iter().map(String::as_str).collect();
    let out = flint(
        &[&args[..], &inputs, &["--output", &out_arg, "--executors", "2", "--cores", "1", "--json"]].concat(),
    );
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    let found: BTreeMap<String, BTreeSet<String>> = part_lines(&out_dir, 4)
        .into_iter()
        .map(|(word, docs)| (word, docs.split(',').map(str::to_owned).collect()))
        .collect();
    assert_eq!(found.len(), index.len());
    assert!(found == index, "the index differs from the one computed here");
    let postings: usize = index.values().map(BTreeSet::len).sum();
    assert_eq!(json(&out)["result"], serde_json::json!({"words": index.len(), "postings": postings}));
}

#[path = "../examples/sort/src/records.rs"]
#[allow(dead_code)]
mod sort_records;

/// The checksum of every record the sort example's maps generate, computed natively.
fn sort_checksum(maps: u32, per_map: u64) -> u64 {
    let mut sum = 0u64;
    for map in 0..maps {
        sort_records::generate(map, per_map, |k, v| sum = sum.wrapping_add(sort_records::share(k, v)));
    }
    sum
}

/// The sort example, TeraSort-style: every key arrives in global order across range
/// partitions, and the checksum of what the reducers saw is the checksum of what the
/// maps generated (recomputed here, natively). Maps of ~50 MB on executors of 128 MiB
/// spill sorted runs and merge them.
#[test]
fn sort_puts_every_record_in_global_order_and_loses_none() {
    let (maps, per_map) = (3u32, 400_000u64);
    let expected = sort_checksum(maps, per_map);
    let per_map = format!("records_per_map={per_map}");
    let maps_arg = maps.to_string();
    let args =
        ["run", "examples/sort", "--partitions", &maps_arg, "--reduce-partitions", "4", "--conf", &per_map];
    let out =
        flint(&[&args[..], &["--executors", "2", "--cores", "2", "--memory", "128m", "--json"]].concat());
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["result"]["ordered"], true, "{report}");
    assert_eq!(report["result"]["records"], u64::from(maps) * 400_000);
    assert_eq!(report["result"]["checksum"], format!("{expected:016x}"));
    assert_eq!(report["tasks"], maps + 4);
}

/// One reduce partition of 400 MB of records, ten times its task's memory cap (executors
/// of 128 MiB: 38 MiB a task): maps spill sorted runs, the reducer reads its own
/// executor's slices in place and spills what it fetches past the host's share, and the
/// guest pulls its records in batches. The whole run stays far below the data's size.
#[test]
fn a_reduce_partition_ten_times_the_memory_cap_streams_through_bounded_memory() {
    let (maps, per_map) = (4u32, 1_000_000u64);
    let expected = sort_checksum(maps, per_map);
    let per_map = format!("records_per_map={per_map}");
    let args = ["run", "examples/sort", "--partitions", "4", "--reduce-partitions", "1", "--conf", &per_map];
    let (out, peak) = flint_peak_memory(
        &[&args[..], &["--executors", "2", "--cores", "2", "--memory", "128m", "--json"]].concat(),
    );
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["result"]["ordered"], true, "{report}");
    assert_eq!(report["result"]["records"], 4_000_000);
    assert_eq!(report["result"]["checksum"], format!("{expected:016x}"));
    // 400 MB went through; measured 178 MB resident at the peak for the whole process
    // (two executors, four slots, their instances and map buffers).
    assert!(peak < 300 << 20, "peak resident {} MiB", peak >> 20);
}

/// A JSON value that refuses an object holding a key twice, at any depth (serde_json
/// itself keeps the last, and so do log collectors).
struct NoKeyTwice;

impl<'de> serde::Deserialize<'de> for NoKeyTwice {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = NoKeyTwice;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("JSON")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<NoKeyTwice, A::Error> {
                let mut seen = std::collections::HashSet::new();
                while let Some(key) = map.next_key::<String>()? {
                    if !seen.insert(key.clone()) {
                        return Err(serde::de::Error::custom(format!("key {key:?} twice")));
                    }
                    map.next_value::<NoKeyTwice>()?;
                }
                Ok(NoKeyTwice)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<NoKeyTwice, A::Error> {
                while seq.next_element::<NoKeyTwice>()?.is_some() {}
                Ok(NoKeyTwice)
            }
            fn visit_bool<E>(self, _: bool) -> Result<NoKeyTwice, E> {
                Ok(NoKeyTwice)
            }
            fn visit_i64<E>(self, _: i64) -> Result<NoKeyTwice, E> {
                Ok(NoKeyTwice)
            }
            fn visit_u64<E>(self, _: u64) -> Result<NoKeyTwice, E> {
                Ok(NoKeyTwice)
            }
            fn visit_f64<E>(self, _: f64) -> Result<NoKeyTwice, E> {
                Ok(NoKeyTwice)
            }
            fn visit_str<E>(self, _: &str) -> Result<NoKeyTwice, E> {
                Ok(NoKeyTwice)
            }
            fn visit_unit<E>(self) -> Result<NoKeyTwice, E> {
                Ok(NoKeyTwice)
            }
        }
        d.deserialize_any(Visit)
    }
}

#[test]
fn json_log_lines_hold_each_field_once_and_a_normal_run_warns_of_nothing() {
    let out = command(&["--log-format", "json", "run", "examples/noop", "--partitions", "2"])
        .env("FLINT_LOG", "info")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    let log = lossy(&out.stderr);
    let lines: Vec<&str> = log.lines().filter(|l| l.starts_with('{')).collect();
    assert!(lines.iter().any(|l| l.contains("job submitted")), "{log}");
    for line in &lines {
        if let Err(e) = serde_json::from_str::<NoKeyTwice>(line) {
            panic!("{e}: {line}");
        }
        let value: Value = serde_json::from_str(line).unwrap();
        assert_ne!(value["level"], "WARN", "{line}");
    }
    let submitted = lines.iter().find(|l| l.contains("job submitted")).unwrap();
    let value: Value = serde_json::from_str(submitted).unwrap();
    assert_eq!(value["span"]["job_name"], "noop", "{submitted}");
}

#[test]
fn a_folder_or_a_glob_as_input_counts_its_visible_files_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir_all(logs.join("2026")).unwrap();
    common::corpus(&logs.join("a.txt"), 300_000);
    std::fs::write(logs.join("b.txt"), "alpha beta\ngamma alpha\n").unwrap();
    std::fs::write(logs.join("2026/c.txt"), "delta alpha\n").unwrap();
    // Hidden from listings, as Hadoop hides a job's markers and checksums.
    std::fs::write(logs.join("_SUCCESS"), "marker marker marker\n").unwrap();
    std::fs::write(logs.join(".b.txt.crc"), "crc crc\n").unwrap();
    let count = |inputs: &[String]| {
        let mut args = vec!["run".to_owned(), "examples/word-count".into(), "--json".into()];
        for input in inputs {
            args.extend(["--input".to_owned(), input.clone()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = flint(&args);
        assert!(out.status.success(), "{inputs:?}: {}", lossy(&out.stderr));
        json(&out)["result"].clone()
    };
    let at = |p: &str| logs.join(p).to_string_lossy().into_owned();
    let two = count(&[at("a.txt"), at("b.txt")]);
    assert_eq!(count(&[at("")]), two, "a folder: its files, not its subfolders nor hidden names");
    assert_eq!(count(&[at("*.txt")]), two, "a glob");
    assert_eq!(
        count(&[at("**/*.txt")]),
        count(&[at("a.txt"), at("b.txt"), at("2026/c.txt")]),
        "** reaches into folders"
    );

    let out = flint(&["run", "examples/word-count", "--input", &at("*.csv"), "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", lossy(&out.stderr));
    assert!(lossy(&out.stderr).contains("matches no file"), "{}", lossy(&out.stderr));
}

#[test]
fn gzip_and_zstd_inputs_are_read_decompressed_one_split_each() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("words.txt");
    common::corpus(&plain, 3 << 20);
    let text = std::fs::read(&plain).unwrap();
    let gz = dir.path().join("words.txt.gz");
    let status = std::process::Command::new("gzip").args(["-k", "-f"]).arg(&plain).status().unwrap();
    assert!(status.success() && gz.exists());
    let zst = dir.path().join("words.zst");
    std::fs::write(&zst, zstd::encode_all(&text[..], 3).unwrap()).unwrap();
    let count = |input: &std::path::Path| {
        let out = flint(&[
            "run",
            "examples/word-count",
            "--input",
            input.to_str().unwrap(),
            "--partitions",
            "8",
            "--json",
        ]);
        assert!(out.status.success(), "{}", lossy(&out.stderr));
        json(&out)
    };
    let expected = count(&plain);
    assert!(expected["tasks"].as_u64().unwrap() > 1, "the plain file is split");
    for input in [&gz, &zst] {
        let report = count(input);
        assert_eq!(report["result"], expected["result"], "{}", input.display());
        assert_eq!(report["tasks"], 1, "a compressed input is one split: {report}");
    }
    // Bytes that do not decompress fail the task once, as input no retry can mend.
    let fake = dir.path().join("fake.gz");
    std::fs::write(&fake, "not gzip at all\n").unwrap();
    let out = flint(&["run", "examples/word-count", "--input", fake.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["failure"]["reason"]["kind"], "input", "{report}");
    assert_eq!(report["attempts"], 1, "{report}");
    assert!(
        report["failure"]["reason"]["message"].as_str().unwrap().contains("cannot decompress"),
        "{report}"
    );
}

/// A toolchain without the `wasm32-wasip2` standard library (rustup's default one, say)
/// is named before anything is built, with the one command that adds the target.
#[test]
fn a_toolchain_without_the_wasm_target_is_named_before_the_build() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let sysroot = dir.path().join("sysroot");
    std::fs::create_dir_all(sysroot.join("lib/rustlib/x86_64-unknown-linux-gnu")).unwrap();
    let rustc = dir.path().join("rustc");
    std::fs::write(&rustc, format!("#!/bin/sh\necho {}\n", sysroot.display())).unwrap();
    std::fs::set_permissions(&rustc, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = command(&["run", "examples/pi"]).env("RUSTC", &rustc).output().unwrap();
    let stderr = lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("cannot build for wasm32-wasip2"), "{stderr}");
    assert!(stderr.contains("`rustup target add wasm32-wasip2`"), "{stderr}");
    assert!(out.stdout.is_empty());
    // `flint new` writes the crate, and says the command before the first run.
    let job = dir.path().join("counts");
    let made = command(&["new", job.to_str().unwrap()]).env("RUSTC", &rustc).output().unwrap();
    let said = lossy(&made.stdout);
    assert!(made.status.success(), "{}", lossy(&made.stderr));
    assert!(said.contains("rustup target add wasm32-wasip2"), "{said}");
    // Inside the repository its toolchain, which has the target, builds the job.
    let inside = tempfile::tempdir_in(common::root().join("target")).unwrap();
    let fine = command(&["new", inside.path().join("other").to_str().unwrap()]).output().unwrap();
    assert!(!lossy(&fine.stdout).contains("rustup target add"), "not where the target is there");
}

/// `flint new --help` says which templates each language has: Python has all four.
#[test]
fn flint_new_help_lists_every_template_for_python_too() {
    let help = lossy(&flint(&["new", "--help"]).stdout);
    let python = help.split("--lang").nth(1).unwrap_or_default();
    for template in ["task", "aggregate", "combine", "map-reduce"] {
        assert!(python.contains(template), "{template} for python:\n{help}");
    }
}
