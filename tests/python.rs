//! Jobs in Python: a module written against `flint_guest` for Python, built by `flint`
//! with componentize-py (installed by tests/setup.sh into target/pyvenv) and run as
//! any component, through `flint run` and through a cluster of real processes.

mod common;

use common::cluster::{Cluster, ok_json};
use common::{command, corpus_of, lossy, root, wasm};
use serde_json::Value;
use std::path::Path;
use std::process::Output;

/// `flint ARGS` with componentize-py from the repository's venv, in `dir`.
fn flint_in(dir: &Path, args: &[&str]) -> Output {
    command(args).current_dir(dir).env("FLINT_COMPONENTIZE_PY", componentize_py()).output().unwrap()
}

fn componentize_py() -> std::path::PathBuf {
    let tool = root().join("target/pyvenv/bin/componentize-py");
    assert!(tool.exists(), "{} is missing: tests/setup.sh installs it", tool.display());
    tool
}

/// A job folder outside the repository holding `app.py` with `source`.
fn job_folder(source: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("app.py"), source).unwrap();
    dir
}

#[test]
fn a_python_word_count_gives_the_rust_one_s_exact_result_through_run_and_a_cluster() {
    let job = job_folder(&std::fs::read_to_string(root().join("examples/python/word-count/app.py")).unwrap());
    let mut cluster = Cluster::start(&[]);
    let input = cluster.dir.path().join("inputs/corpus.txt");
    corpus_of(&input, 3 << 20, 5000);
    // The edges of "ASCII whitespace" and of UTF-8: a vertical tab is no separator in
    // Rust's split, a form feed is; bytes that are not UTF-8 count under their lossy form.
    let mut text = std::fs::read(&input).unwrap();
    text.extend_from_slice(b"a\x0bb c\x0cd \xff\xfe w1 \xc3\n\xe2\x82 w1\n");
    std::fs::write(&input, text).unwrap();
    let input = input.to_str().unwrap();

    let rust = ok_json(&command(&["run", &wasm("word_count"), "--input", input, "--json"]).output().unwrap());
    // A cache of this test's own, so that the first run builds.
    let cache = tempfile::tempdir().unwrap();
    let flint_in = |dir: &Path, args: &[&str]| {
        let mut cmd = command(args);
        cmd.current_dir(dir)
            .env("FLINT_COMPONENTIZE_PY", componentize_py())
            .env("FLINT_CACHE_DIR", cache.path());
        cmd.output().unwrap()
    };
    let first = flint_in(job.path(), &["run", ".", "--input", input, "--json"]);
    let python = ok_json(&first);
    assert!(lossy(&first.stderr).contains("building the Python job"), "{}", lossy(&first.stderr));
    assert_eq!(python["result"], rust["result"], "Python's count is Rust's");
    assert!(python["result"]["total_words"].as_u64().unwrap() > 400_000);
    assert_eq!(python["status"], "succeeded");

    // Built once: the next run takes the component from the cache.
    let again = flint_in(job.path(), &["run", "app.py", "--input", input, "--json", "--partitions", "5"]);
    assert!(!lossy(&again.stderr).contains("building"), "{}", lossy(&again.stderr));
    assert_eq!(ok_json(&again)["result"], rust["result"]);

    // The client builds the job as `flint run` did, and finds it in the same cache.
    cluster.peer_env.push(("FLINT_COMPONENTIZE_PY".into(), componentize_py().to_string_lossy().into()));
    cluster.peer_env.push(("FLINT_CACHE_DIR".into(), cache.path().to_string_lossy().into()));
    cluster.executor(&["--cores", "2"]);
    cluster.executor(&["--cores", "2"]);
    cluster.wait_live(2);
    let app = job.path().join("app.py");
    let submitted = cluster.submit(&[app.to_str().unwrap(), "--input", input, "--partitions", "8", "--json"]);
    assert!(!lossy(&submitted.stderr).contains("building"), "{}", lossy(&submitted.stderr));
    let submitted = ok_json(&submitted);
    assert_eq!(submitted["result"], rust["result"], "the cluster's count is Rust's too");
    let status = cluster.status();
    let executors = status["executors"].as_array().unwrap();
    assert!(executors.len() == 2 && executors.iter().all(|e| e["tasks_done"].as_u64() > Some(0)), "{status}");
}

#[test]
fn python_pi_counts_exactly_the_points_rust_pi_does() {
    let args = ["--conf", "points=20000", "--partitions", "6", "--json"];
    let rust = ok_json(&command(&[&["run", &wasm("pi")][..], &args].concat()).output().unwrap());
    let examples = root().join("examples/python");
    let python = ok_json(&flint_in(&examples, &[&["run", "pi"][..], &args].concat()));
    assert_eq!(python["result"], rust["result"]);
    assert_eq!(python["result"]["total"], 120_000);
}

const FAILING: &str = r#"
import flint_guest

class Failing(flint_guest.Task):
    def run(self, partition):
        what = flint_guest.config("what", "none")
        flint_guest.info(f"task {flint_guest.task_info().task_index} does {what}")
        if what == "raise":
            return {"a": 1}["missing key"]
        if what == "fatal":
            raise flint_guest.Fatal("the configuration names no table")
        if what == "loop":
            while True:
                pass
        if what == "flood":
            line = "x" * 1000
            for _ in range(50_000):
                flint_guest.error(line)
                print(line)
            raise ValueError("y" * 20_000_000)
        if what == "lazy":
            import fractions
        if what == "grow":
            kept = []
            while True:
                kept.append(bytearray(1 << 20))
        return [partition.index, flint_guest.config("greeting")]
"#;

/// The one task failure of a one-task job run with `what`.
fn failure(job: &Path, what: &str, extra: &[&str]) -> Value {
    let what = format!("what={what}");
    let args = [&["run", ".", "--partitions", "1", "--conf", &what, "--json"][..], extra].concat();
    let out = flint_in(job, &args);
    assert!(!out.status.success(), "the job fails");
    let report: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", lossy(&out.stderr)));
    assert_eq!(report["status"], "failed", "{report}");
    report["task_failures"][0].clone()
}

#[test]
fn python_tasks_end_as_rust_ones_do_past_deadline_and_memory_and_on_an_exception() {
    let job = job_folder(FAILING);
    let ok =
        ok_json(&flint_in(job.path(), &["run", ".", "--partitions", "3", "--conf", "greeting=hi", "--json"]));
    assert_eq!(
        ok["result"],
        serde_json::json!([[0, "hi"], [1, "hi"], [2, "hi"]]),
        "a Task job's list of outputs"
    );

    let once = ["--conf", "flint.task.maxFailures=1"];
    let raised = failure(job.path(), "raise", &once);
    assert_eq!(raised["failure"]["kind"], "guest-error", "{raised}");
    let message = raised["failure"]["message"].as_str().unwrap();
    assert!(message.starts_with("Traceback (most recent call last):"), "{message}");
    assert!(
        message.contains("app.py\", line 9, in run") && message.ends_with("KeyError: 'missing key'"),
        "{message}"
    );
    assert_eq!(raised["failure"]["retryable"], true);
    assert!(raised["log_tail"].as_str().unwrap().contains("task 0 does raise"), "{raised}");

    // A Fatal is not tried again, whatever maxFailures allows.
    let fatal = failure(job.path(), "fatal", &[]);
    assert_eq!(fatal["failure"]["retryable"], false, "{fatal}");
    assert!(
        fatal["failure"]["message"].as_str().unwrap().ends_with("Fatal: the configuration names no table")
    );
    assert_eq!(fatal["attempt"], 0);

    let looped = failure(job.path(), "loop", &[&once[..], &["--conf", "flint.task.deadline=2s"]].concat());
    assert_eq!(looped["failure"]["kind"], "deadline", "{looped}");
    assert_eq!(looped["failure"]["deadline_ms"], 2000);

    // 50 MB of log lines and printed lines, then a 20 MB exception: cut, and said so,
    // within what a Rust task's flood may put on the process's output.
    let flood = flint_in(
        job.path(),
        &[
            "run",
            ".",
            "--partitions",
            "1",
            "--conf",
            "what=flood",
            "--conf",
            "flint.task.maxFailures=1",
            "--json",
        ],
    );
    assert_eq!(flood.status.code(), Some(1), "{}", lossy(&flood.stderr[..flood.stderr.len().min(4096)]));
    assert!(flood.stdout.len() < common::FLOOD_BOUND, "stdout {} bytes", flood.stdout.len());
    assert!(flood.stderr.len() < common::FLOOD_BOUND, "stderr {} bytes", flood.stderr.len());
    let report: Value = serde_json::from_slice(&flood.stdout).unwrap();
    let message = report["failure"]["reason"]["message"].as_str().unwrap();
    assert!(message.starts_with("Traceback") && message.ends_with(" bytes dropped]"), "{}", &message[..200]);
    let tail = report["task_failures"][0]["log_tail"].as_str().unwrap();
    assert!(
        tail.contains("more bytes of task output dropped"),
        "{}",
        &tail[tail.len().saturating_sub(300)..]
    );
    assert!(lossy(&flood.stderr).contains("the rest go to its task log only"));

    // A module first imported as the task runs was not there when the job was built.
    let lazy = failure(job.path(), "lazy", &once);
    let message = lazy["failure"]["message"].as_str().unwrap();
    assert!(
        message.contains("No module named 'fractions'")
            && message.contains("import fractions at the top of the job's module"),
        "{message}"
    );

    let grown = failure(job.path(), "grow", &once);
    assert_eq!(grown["failure"]["kind"], "memory-limit", "{grown}");
    assert!(grown["log_tail"].as_str().unwrap().contains("MemoryError"), "{grown}");
}

#[test]
fn a_python_job_that_cannot_be_built_says_why() {
    let job = job_folder(
        "import flint_guest\n\nclass A(flint_guest.Task):\n    def run(self, p)\n        return 1\n",
    );
    let out = flint_in(job.path(), &["run", "."]);
    assert!(!out.status.success());
    let said = lossy(&out.stderr);
    assert!(said.contains("app.py does not parse: SyntaxError: expected ':'"), "{said}");
    // As Python says it, on lines of its own: the author's file and line, the line and a
    // caret under the fault, none of Flint's frames and no noise of the host's Python.
    let at = format!("File \"{}/app.py\", line 4\n    def run(self, p)\n", job.path().display());
    assert!(said.contains(&at) && said.contains("^\nSyntaxError: expected ':'\n"), "{said}");
    assert!(!said.contains("ast.py") && !said.contains("<string>") && !said.contains("denied"), "{said}");

    let two = job_folder(
        "import flint_guest\nclass A(flint_guest.Task):\n    pass\nclass B(flint_guest.Task):\n    pass\n",
    );
    let out = flint_in(two.path(), &["run", "."]);
    let said = lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("must define one job class") && said.contains("A, B"),
        "{said}"
    );

    // A hook left out is said at the build, not in the middle of a job.
    let hookless = job_folder(
        "import flint_guest\nclass Sum(flint_guest.Aggregate):\n    def run(self, p):\n        return 1\n",
    );
    let out = flint_in(hookless.path(), &["run", "."]);
    let said = lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("Sum must define merge(self, a, b)"), "{said}");

    // A module componentize-py cannot find: its traceback, at the author's own path.
    let missing = job_folder("import not_a_module_anywhere\nimport flint_guest\n");
    let out = flint_in(missing.path(), &["run", "."]);
    let said = lossy(&out.stderr);
    let at = format!("File \"{}/app.py\", line 1", missing.path().canonicalize().unwrap().display());
    assert!(!out.status.success() && said.contains(&at), "{said}");
    assert!(
        said.contains("No module named 'not_a_module_anywhere'")
            && said.contains("built for WASI")
            && said.contains("error: componentize-py could not build the Python job in")
            && said.contains("no module named not_a_module_anywhere where the build looks"),
        "{said}"
    );

    // An exception in merge fails the job with its traceback.
    let merging = job_folder(
        "import flint_guest\nclass Sum(flint_guest.Aggregate):\n    def run(self, p):\n        return 1\n    def merge(self, a, b):\n        raise ValueError('cannot merge')\n",
    );
    let out = flint_in(merging.path(), &["run", ".", "--partitions", "3"]);
    let said = lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("File \"app.py\", line 6, in merge") && said.contains("ValueError: cannot merge"),
        "{said}"
    );

    let none = job_folder("import flint_guest\n");
    let out = command(&["run", none.path().join("app.py").to_str().unwrap()])
        .env("FLINT_COMPONENTIZE_PY", "/nonexistent/componentize-py")
        .output()
        .unwrap();
    let said = lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("pip install componentize-py=="), "{said}");
}

/// A job whose top-level code (run as componentize-py builds it) tries to leave a file
/// in every folder on its path and in its own folder, and carries on when refused.
const WRITES_AT_IMPORT: &str = r#"
import os, sys
import flint_guest
NAME = "MARKER"
for folder in list(sys.path) + [os.path.dirname(os.path.abspath(__file__))]:
    try:
        with open(os.path.join(folder, NAME), "w") as f:
            f.write("import os; os.system('touch /tmp/pwned')\n")
    except OSError:
        pass

class Count(flint_guest.Aggregate):
    def run(self, partition):
        return 1
    def merge(self, a, b):
        return a + b
"#;

/// The folders a `.pth` in would run on every start of the build's Python: its own
/// site-packages and its base installation's.
fn site_folders() -> Vec<std::path::PathBuf> {
    let python = root().join("target/pyvenv/bin/python");
    let script = "import site, sys; print('\\n'.join(site.getsitepackages([sys.prefix, sys.base_prefix])))";
    let out = std::process::Command::new(python).args(["-c", script]).output().unwrap();
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    let folders: Vec<_> =
        lossy(&out.stdout).lines().map(std::path::PathBuf::from).filter(|p| p.is_dir()).collect();
    assert!(!folders.is_empty(), "{}", lossy(&out.stdout));
    folders
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_python_build_runs_nothing_of_the_job_on_the_host_and_writes_nowhere_but_its_own_folder() {
    let marker = format!("flint-build-{}.pth", std::process::id());
    let witness = tempfile::tempdir().unwrap();
    let job = job_folder(&WRITES_AT_IMPORT.replace("MARKER", &marker));
    // A module of the job's folder that shadows the standard library's `ast` (which
    // reading the job's world uses): run on the host, it would leave a file behind.
    let ran = witness.path().join("ast-ran");
    let shadow = format!("open({:?}, 'w').write('ran')\nfrom _ast import *\n", ran.to_str().unwrap());
    std::fs::write(job.path().join("ast.py"), shadow).unwrap();
    let before = listing(job.path());
    let cache = tempfile::tempdir().unwrap();
    let out = command(&["run", ".", "--partitions", "3", "--json"])
        .current_dir(job.path())
        .env("FLINT_COMPONENTIZE_PY", componentize_py())
        .env("FLINT_CACHE_DIR", cache.path())
        .output()
        .unwrap();
    // The job builds and runs: its refused writes cost it nothing.
    assert_eq!(ok_json(&out)["result"], 3, "{}", lossy(&out.stderr));
    assert!(lossy(&out.stderr).contains("building the Python job"), "{}", lossy(&out.stderr));
    assert!(!ran.exists(), "the job's ast.py ran on the host");
    assert_eq!(listing(job.path()), before, "the build wrote into the job's folder");
    for folder in site_folders() {
        assert!(!folder.join(&marker).exists(), "the build wrote {marker} into {}", folder.display());
    }
}

#[test]
fn a_python_job_s_sources_are_read_within_bounds_and_only_from_its_folder() {
    let refused = |job: &Path, expected: &str| {
        let out = flint_in(job, &["run", "."]);
        let said = lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{said}");
        assert!(said.contains(expected), "expected {expected:?}: {said}");
        assert!(!said.contains("building"), "refused as it is read, before any build: {said}");
    };
    // A source that is a device, or a FIFO: refused before a byte is read.
    let device = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/dev/zero", device.path().join("app.py")).unwrap();
    refused(device.path(), "not a regular file");
    let fifo = job_folder("import flint_guest\n");
    let made = std::process::Command::new("mkfifo").arg(fifo.path().join("helper.py")).status().unwrap();
    assert!(made.success());
    refused(fifo.path(), "not a regular file");
    // A module that links to a file of the host's, which the component would carry to
    // a cluster.
    let outside = job_folder("import flint_guest\n");
    let secret = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(secret.path(), "KEY = 'the host user secret'\n").unwrap();
    std::os::unix::fs::symlink(secret.path(), outside.path().join("secrets.py")).unwrap();
    refused(outside.path(), "outside the job's folder");
    // A source past the bound: refused without reading it whole.
    let huge = job_folder("import flint_guest\n");
    let file = std::fs::File::create(huge.path().join("app.py")).unwrap();
    file.set_len(768 << 20).unwrap();
    refused(huge.path(), "is over 16 MiB");
}

#[test]
fn flint_new_makes_a_python_job_whose_tests_pass_and_that_runs() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("words.txt");
    std::fs::write(&input, "the cat saw the dog\nthe end\n").unwrap();
    for template in ["task", "aggregate", "combine", "map-reduce"] {
        let made = flint_in(dir.path(), &["new", template, "--lang", "python", "--template", template]);
        assert!(made.status.success(), "{}", lossy(&made.stderr));
        assert!(lossy(&made.stdout).contains("python3 -m unittest"), "{}", lossy(&made.stdout));
        let job = dir.path().join(template);
        // The job's own tests, natively, with the SDK `flint new` wrote beside it.
        let tested =
            std::process::Command::new("python3").args(["-m", "unittest", "-q"]).current_dir(&job).output();
        let tested = tested.unwrap();
        assert!(tested.status.success(), "{template}: {}", lossy(&tested.stderr));
        let args = ["run", ".", "--input", input.to_str().unwrap(), "--partitions", "1", "--json"];
        let ran = ok_json(&flint_in(&job, &args));
        let expected = match template {
            "task" => serde_json::json!([2]),
            "aggregate" => serde_json::json!({"lines": 2}),
            _ => serde_json::json!({"total_words": 7, "distinct_words": 5,
                                    "top": [["the", 3], ["cat", 1], ["dog", 1], ["end", 1], ["saw", 1]]}),
        };
        assert_eq!(ran["result"], expected, "{template}");
    }
}

#[test]
fn a_python_map_reduce_word_count_gives_the_rust_one_s_result_and_parts_through_run_and_a_cluster() {
    let job =
        job_folder(&std::fs::read_to_string(root().join("examples/python/word-count-mr/app.py")).unwrap());
    let mut cluster = Cluster::start(&[]);
    let input = cluster.dir.path().join("inputs/corpus.txt");
    corpus_of(&input, 2 << 20, 5000);
    let mut text = std::fs::read(&input).unwrap();
    text.extend_from_slice(b"a\x0bb c\x0cd \xff\xfe w1 \xc3\n\xe2\x82 w1 \xef\xbf\xbd\n");
    std::fs::write(&input, text).unwrap();
    let input = input.to_str().unwrap();
    let rust = ok_json(&command(&["run", &wasm("word_count"), "--input", input, "--json"]).output().unwrap());

    let parts = tempfile::tempdir().unwrap();
    let output = parts.path().join("counts");
    let args =
        ["run", ".", "--input", input, "--reduce-partitions", "3", "--output", output.to_str().unwrap()];
    let ran = ok_json(&flint_in(job.path(), &[&args[..], &["--json"]].concat()));
    assert_eq!(ran["result"], rust["result"], "Python's map/reduce count is Rust's word count");
    assert_eq!(ran["status"], "succeeded");
    // Every word once, in the partition its key hashes to, with its count.
    let mut words = std::collections::BTreeMap::new();
    for p in 0..3 {
        let part = std::fs::read_to_string(output.join(format!("part-{p:05}"))).unwrap();
        let mut last: Option<String> = None;
        for line in part.lines() {
            let (word, n) = line.split_once('\t').unwrap();
            assert!(last.as_deref() < Some(word), "a part's words in order: {last:?}, {word}");
            last = Some(word.to_owned());
            assert!(words.insert(word.to_owned(), n.parse::<u64>().unwrap()).is_none(), "{word} twice");
        }
    }
    assert!(output.join("_SUCCESS").exists());
    assert_eq!(words.len() as u64, rust["result"]["distinct_words"].as_u64().unwrap());
    assert_eq!(words.values().sum::<u64>(), rust["result"]["total_words"].as_u64().unwrap());
    for top in rust["result"]["top"].as_array().unwrap() {
        assert_eq!(words[top[0].as_str().unwrap()], top[1].as_u64().unwrap(), "{top}");
    }

    // Across two executors, reducers fetch the other's map outputs over QUIC.
    cluster.peer_env.push(("FLINT_COMPONENTIZE_PY".into(), componentize_py().to_string_lossy().into()));
    cluster.executor(&["--cores", "2"]);
    cluster.executor(&["--cores", "2"]);
    cluster.wait_live(2);
    let app = job.path().join("app.py");
    let args =
        [app.to_str().unwrap(), "--input", input, "--partitions", "8", "--reduce-partitions", "4", "--json"];
    let submitted = ok_json(&cluster.submit(&args));
    assert_eq!(submitted["result"], rust["result"], "the cluster's count is Rust's too");
    assert_eq!(submitted["tasks"], 12, "8 maps and 4 reduces: {submitted}");
}

/// A grouping job (no combine) whose keys are tuples of an int, a negative int and a
/// string holding NULs, sent to partitions of their own choosing: each reduce checks
/// that its keys come in Python's order and each key's values in the maps' order.
const GROUPED: &str = r#"
import flint_guest

class Group(flint_guest.MapReduce):
    def map(self, partition, out):
        for n in range(3000):
            m = partition.index * 3000 + n
            out.emit((m % 5, -(m * 7919 % 1000), "\u00e9\x00" * (m % 3)), m)

    def partition(self, key, partitions):
        return key[0] % partitions

    def empty(self):
        return {"keys": [], "values": 0}

    def reduce(self, key, values, out):
        maps = [m // 3000 for m in values]
        if maps != sorted(maps):
            raise flint_guest.Fatal(f"{key}: values not in the maps' order: {maps}")
        if out["keys"] and key <= out["keys"][-1]:
            raise flint_guest.Fatal(f"{key} came after {out['keys'][-1]}")
        out["keys"].append(key)
        out["values"] += len(maps)
        return out

    def merge(self, a, b):
        a["keys"] += b["keys"]
        a["values"] += b["values"]
        return a

    def finish(self, total):
        return {"keys": [list(k) for k in total["keys"]], "values": total["values"]}
"#;

/// A combining job whose maps emit each of 150,000 keys twice, past the SDK's table of
/// 131,072 keys: the host folds what a map emitted twice through the job's `combine`,
/// so a reduce sees one value per map.
const SPILLED: &str = r#"
import flint_guest

class Spill(flint_guest.MapReduce):
    def map(self, partition, out):
        for n in range(300_000):
            out.emit(n % 150_000, 1)

    def combine(self, a, b):
        return a + b

    def empty(self):
        return {"keys": 0, "most_values": 0, "total": 0}

    def reduce(self, key, values, out):
        values = list(values)
        out["keys"] += 1
        out["most_values"] = max(out["most_values"], len(values))
        out["total"] += sum(values)
        return out

    def merge(self, a, b):
        return {"keys": a["keys"] + b["keys"], "most_values": max(a["most_values"], b["most_values"]),
                "total": a["total"] + b["total"]}
"#;

#[test]
fn python_keys_reach_their_reducers_in_python_s_order_and_combined_spills_fold() {
    let grouped = job_folder(GROUPED);
    let ran = ok_json(&flint_in(
        grouped.path(),
        &["run", ".", "--partitions", "4", "--reduce-partitions", "3", "--json"],
    ));
    let mut expected: Vec<(u32, (i64, i64, usize))> = (0..12_000i64)
        .map(|m| (m % 5, -(m * 7919 % 1000), (m % 3) as usize))
        .map(|key| ((key.0 % 3) as u32, key))
        .collect();
    expected.sort();
    expected.dedup();
    let expected: Vec<Value> =
        expected.iter().map(|(_, (a, b, k))| serde_json::json!([a, b, "\u{e9}\0".repeat(*k)])).collect();
    assert_eq!(ran["result"]["values"], 12_000, "{}", ran["result"]["values"]);
    assert_eq!(ran["result"]["keys"], Value::Array(expected), "keys by partition, then in Python's order");

    let spilled = job_folder(SPILLED);
    let ran = ok_json(&flint_in(
        spilled.path(),
        &["run", ".", "--partitions", "2", "--reduce-partitions", "2", "--json"],
    ));
    assert_eq!(ran["result"], serde_json::json!({"keys": 150_000, "most_values": 2, "total": 600_000}));
}

#[test]
fn the_python_sdk_s_own_tests_pass() {
    let out = std::process::Command::new("python3")
        .args(["-m", "unittest", "discover", "-s", "tests"])
        .current_dir(root().join("guest-sdk/python"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    assert!(lossy(&out.stderr).contains("OK"), "{}", lossy(&out.stderr));
}
