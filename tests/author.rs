//! A job author's first hour, outside this repository: in a temporary folder, with
//! `PATH` holding only the system's tools, cargo and the built `flint`, each template
//! of `flint new` passes its own `cargo test` and gives the exact answer through
//! `flint run .`; and the crate mistakes a new author makes (not a cdylib, an output
//! type postcard cannot carry) are answered with what to change.

mod common;

use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

/// A shell's view of a new user's machine: the system's tools, cargo, and `flint`.
struct Machine {
    home: tempfile::TempDir,
    bin: PathBuf,
}

impl Machine {
    fn new() -> Machine {
        let home = tempfile::tempdir().unwrap();
        let bin = home.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::os::unix::fs::symlink(common::bin(), bin.join("flint")).unwrap();
        Machine { home, bin }
    }

    /// `program args` in `dir`, with nothing of the repository or of the cargo that
    /// runs this test in its environment but the toolchain it uses; the build cache
    /// is shared by the jobs (and kept between runs) so that each builds its
    /// dependencies once.
    fn run(&self, dir: &Path, program: &str, args: &[&str]) -> Output {
        let cargo_bin = which("cargo").parent().unwrap().to_path_buf();
        let path = format!("{}:{}:/usr/bin:/bin", self.bin.display(), cargo_bin.display());
        let mut cmd = Command::new(program);
        cmd.args(args).current_dir(dir).env_clear().env("PATH", path);
        for keep in
            ["HOME", "CARGO_HOME", "RUSTUP_HOME", "SSL_CERT_FILE", "http_proxy", "https_proxy", "no_proxy"]
        {
            if let Some(value) = std::env::var_os(keep) {
                cmd.env(keep, value);
            }
        }
        // The toolchain the repository pins (with its wasm32-wasip2 target), as a user
        // would have installed one.
        cmd.env("RUSTUP_TOOLCHAIN", toolchain());
        cmd.env("CARGO_TARGET_DIR", common::root().join("target/author-jobs"));
        cmd.env("FLINT_CACHE_DIR", self.home.path().join("cache"));
        cmd.output().unwrap_or_else(|e| panic!("{program}: {e}"))
    }
}

fn which(program: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap();
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| p.exists()).expect("cargo is on PATH")
}

fn toolchain() -> String {
    let pinned = std::fs::read_to_string(common::root().join("rust-toolchain.toml")).unwrap();
    let line = pinned.lines().find(|l| l.starts_with("channel")).unwrap();
    line.split('"').nth(1).unwrap().to_owned()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A text of `lines` lines of words drawn from a small vocabulary, deterministic.
fn corpus(lines: usize) -> String {
    let mut state: u64 = 7;
    let mut next = || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    (0..lines)
        .map(|_| {
            let words: Vec<String> = (0..next() % 9).map(|_| format!("w{}", next() % 300)).collect();
            words.join(" ") + "\n"
        })
        .collect()
}

#[test]
fn each_template_tests_and_runs_with_the_exact_result_outside_the_repository() {
    let machine = Machine::new();
    let home = machine.home.path();
    let input = home.join("input.txt");
    let corpus = corpus(20_000);
    std::fs::write(&input, &corpus).unwrap();
    let input = input.to_string_lossy().into_owned();
    let lines = corpus.lines().count() as u64;
    let mut counts: HashMap<&str, u64> = HashMap::new();
    for word in corpus.split_ascii_whitespace() {
        *counts.entry(word).or_default() += 1;
    }
    let total_words: u64 = counts.values().sum();
    let mut top: Vec<(&str, u64)> = counts.iter().map(|(w, n)| (*w, *n)).collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    top.truncate(10);
    let top: Value = top.iter().map(|(w, n)| serde_json::json!([w, n])).collect();

    for template in ["combine", "task", "aggregate", "map-reduce"] {
        let started = Instant::now();
        let name = format!("job-{template}");
        let out = machine.run(home, "flint", &["new", &name, "--template", template]);
        assert!(out.status.success(), "{}", text(&out));
        let job = home.join(&name);
        let tested = machine.run(&job, "cargo", &["test", "--quiet"]);
        assert!(tested.status.success(), "{template}: cargo test: {}", text(&tested));
        assert!(String::from_utf8_lossy(&tested.stdout).contains("test result: ok."), "{}", text(&tested));
        let out = machine.run(&job, "flint", &["run", ".", "--input", &input, "--json"]);
        assert!(out.status.success(), "{template}: flint run: {}", text(&out));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let result = &report["result"];
        match template {
            "task" => {
                let per_split: u64 =
                    result.as_array().unwrap().iter().map(|s| s["lines"].as_u64().unwrap()).sum();
                assert_eq!(per_split, lines, "{report}");
                assert!(result.as_array().unwrap().len() > 1, "the input was split: {report}");
            }
            "aggregate" => assert_eq!(result["lines"], lines, "{report}"),
            _ => {
                assert_eq!(result["total_words"], total_words, "{template}: {report}");
                assert_eq!(result["distinct_words"], counts.len() as u64, "{template}: {report}");
                assert_eq!(result["top"], top, "{template}: {report}");
            }
        }
        println!("{template}: flint new to the exact result in {:.1} s", started.elapsed().as_secs_f64());
    }

    // What `flint new` itself refuses, as bad usage.
    for (args, said) in [
        (&["new", "9lives"][..], "starts with a letter"),
        (&["new", "job-task"][..], "exists and is not empty"),
        (&["new", "x", "--template", "task", "--value", "top=3"][..], "the task template takes description"),
        (&["new", "x", "--value", "top"][..], "KEY=VALUE"),
        (&["new", "fn"][..], "Rust keyword"),
        (&["new", "self"][..], "Rust keyword"),
        (&["new", "test"][..], "cargo keeps for itself"),
    ] {
        let out = machine.run(home, "flint", args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(said), "{args:?}: {}", text(&out));
    }
    assert!(!home.join("x").exists(), "nothing written for a refused one");
    for refused in ["fn", "self", "test"] {
        assert!(!home.join(refused).exists(), "nothing written for {refused}");
    }
    // A value holding a placeholder is written as it is: the manifest still parses.
    let out = machine.run(
        home,
        "flint",
        &["new", "placeholder", "--value", "description=see {{config}} and {{name}}"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let manifest = std::fs::read_to_string(home.join("placeholder/flint.toml")).unwrap();
    assert!(manifest.contains("# see {{config}} and {{name}}\n"), "{manifest}");
    let parsed = flint_proto::Manifest::from_toml(&manifest).unwrap_or_else(|e| panic!("{e}: {manifest}"));
    assert_eq!(parsed.name, "placeholder");

    // Not a cdylib: the build makes no component, and the message says what to add.
    let job = home.join("job-task");
    let manifest = std::fs::read_to_string(job.join("Cargo.toml")).unwrap();
    std::fs::write(job.join("Cargo.toml"), manifest.replace(r#"["cdylib", "rlib"]"#, r#"["rlib"]"#)).unwrap();
    let out = machine.run(&job, "flint", &["run", ".", "--input", &input]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains(r#"add `[lib] crate-type = ["cdylib", "rlib"]`"#), "{}", text(&out));

    // An output type postcard cannot carry: its own test says so, and so does Flint.
    let job = home.join("job-aggregate");
    std::fs::write(job.join("src/lib.rs"), UNTAGGED).unwrap();
    let tested = machine.run(&job, "cargo", &["test", "--quiet"]);
    assert!(!tested.status.success());
    assert!(text(&tested).contains("remove `#[serde(untagged)]`"), "{}", text(&tested));
    let out = machine.run(&job, "flint", &["run", ".", "--input", &input]);
    assert_eq!(out.status.code(), Some(1), "the job fails: {}", text(&out));
    assert!(text(&out).contains("remove `#[serde(untagged)]`"), "{}", text(&out));
}

/// A line count whose task output is an untagged enum.
const UNTAGGED: &str = r#"
use flint_guest::{Aggregate, Error, Partition, Task};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
pub enum Count {
    Lines(u64),
    Nothing(String),
}

pub struct Job;

impl Task for Job {
    type Output = Count;
    fn run(input: Partition) -> Result<Count, Error> {
        let mut n = 0;
        input.lines()?.for_each_line(|_| Ok(n += 1))?;
        Ok(Count::Lines(n))
    }
}

impl Aggregate for Job {
    type Result = u64;
    fn merge(a: Count, b: Count) -> Result<Count, Error> {
        match (a, b) {
            (Count::Lines(a), Count::Lines(b)) => Ok(Count::Lines(a + b)),
            _ => Ok(Count::Nothing("?".into())),
        }
    }
    fn finish(c: Count) -> Result<u64, Error> {
        Ok(match c { Count::Lines(n) => n, Count::Nothing(_) => 0 })
    }
}

flint_guest::export_aggregate!(Job);

#[cfg(test)]
mod tests {
    use flint_guest::testing::{Input, Local};

    #[test]
    fn counts() {
        let run = Local::new().aggregate::<super::Job>([Input::text("a\n"), Input::text("b\n")]).unwrap();
        assert_eq!(run.result, 2);
    }
}
"#;
