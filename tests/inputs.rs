//! Large inputs through `flint run`, alone in a test binary of their own: cargo runs
//! test binaries one after another, so the gigabyte these read never slows the deadline
//! checks of `run.rs`.

mod common;

use common::{flint, json, lossy};

/// `lines` repeated until the file holds `bytes`, and the words it then holds.
fn repeated(path: &std::path::Path, lines: &str, bytes: u64) -> u64 {
    use std::io::Write;
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let times = bytes.div_ceil(lines.len() as u64);
    for _ in 0..times {
        file.write_all(lines.as_bytes()).unwrap();
    }
    file.flush().unwrap();
    times * lines.split_ascii_whitespace().count() as u64
}

#[test]
fn a_large_input_as_one_partition_runs_in_splits_a_task_can_hold_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("large.txt");
    let lines: String = (0..4000).map(|i| format!("w{} w{} w{}\n", i % 997, i % 13, i)).collect();
    let words = repeated(&input, &lines, 1 << 30);
    let input = input.to_string_lossy();
    let args = ["run", "examples/word-count", "--input", &input, "--partitions", "1", "--cores", "2"];
    let (out, peak) = common::flint_peak_memory(&[&args[..], &["--json"]].concat());
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["result"]["total_words"], words);
    assert!(report["tasks"].as_u64().unwrap() >= 16, "1 GiB in splits of at most 64 MiB: {report}");
    // README: input costs an executor about cores × 2 × 64 MiB beside its base and its
    // instances' working memory; a split read whole would alone take 1 GiB.
    assert!(peak < 480 << 20, "peak resident memory {} MiB for a 1 GiB input", peak >> 20);
}

#[test]
fn a_split_over_the_tasks_memory_cap_is_refused_naming_the_split_and_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.txt");
    repeated(&input, "one two three\n", 40 << 20);
    let size = std::fs::metadata(&input).unwrap().len();
    let input = input.to_string_lossy();
    // 64m on 2 cores: a task may hold 64 MiB × 0.6 ÷ 2, about 19 MiB; the split is 40 MiB.
    let args = ["run", "examples/word-count", "--input", &input, "--partitions", "1", "--cores", "2"];
    let out = flint(&[&args[..], &["--memory", "64m", "--json"]].concat());
    assert_eq!(out.status.code(), Some(1), "{}", lossy(&out.stderr));
    let report = json(&out);
    let reason = &report["failure"]["reason"];
    assert_eq!(reason["kind"], "input-too-large", "{report}");
    assert_eq!(reason["bytes"], size);
    assert_eq!(reason["limit"], (64u64 << 20) * 6 / 10 / 2);
    assert_eq!(reason["split"], format!("{input} bytes 0..{size}"));
    assert_eq!(report["attempts"], 1, "not retried: {report}");
    assert!(report["error"].as_str().unwrap().contains("give executors more memory"), "{report}");
}
