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
fn a_three_gigabyte_input_as_one_partition_streams_through_one_task_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("large.txt");
    let lines: String = (0..4000).map(|i| format!("w{} w{} w{}\n", i % 997, i % 13, i)).collect();
    let words = repeated(&input, &lines, 3 << 30);
    let input = input.to_string_lossy();
    let args = ["run", "examples/word-count", "--input", &input, "--partitions", "1", "--cores", "2"];
    let (out, peak) = common::flint_peak_memory(&[&args[..], &["--json"]].concat());
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["result"]["total_words"], words);
    assert_eq!(report["tasks"], 1, "one partition asked for, one split: {report}");
    // A split read whole would alone take 3 GiB; read a block at a time, the task holds
    // a block and a batch beside its counts.
    assert!(peak < 256 << 20, "peak resident memory {} MiB for a 3 GiB split", peak >> 20);
}

#[test]
fn a_split_many_times_the_tasks_memory_cap_streams_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.txt");
    let words = repeated(&input, "one two three\n", 80 << 20);
    let input = input.to_string_lossy();
    // 64m on 2 cores: a task may hold 64 MiB × 0.6 ÷ 2, about 19 MiB; the split is 80 MiB.
    let args = ["run", "examples/word-count", "--input", &input, "--partitions", "1", "--cores", "2"];
    let out = flint(&[&args[..], &["--memory", "64m", "--json"]].concat());
    assert!(out.status.success(), "{}", lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["result"]["total_words"], words, "{report}");
    assert_eq!(report["result"]["distinct_words"], 3, "{report}");
}

#[test]
fn a_line_longer_than_any_batch_fails_its_task_as_an_input_error_even_when_the_task_ignores_it() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("one-line.txt");
    repeated(&input, "x", 70 << 20);
    let input = input.to_string_lossy();
    for (job, conf) in [("examples/word-count", "mode=ok"), ("examples/chaos", "mode=swallow-input")] {
        let args = ["run", job, "--input", &input, "--partitions", "1", "--conf", conf, "--json"];
        let out = flint(&args);
        assert_eq!(out.status.code(), Some(1), "{job}: {}", lossy(&out.stderr));
        let report = json(&out);
        let reason = &report["failure"]["reason"];
        assert_eq!(reason["kind"], "input", "{job}: {report}");
        assert_eq!(reason["retryable"], false, "{job}: {report}");
        let message = reason["message"].as_str().unwrap();
        assert!(
            message.contains(&*input) && message.contains("a line runs over 67108864 bytes"),
            "{message}"
        );
        assert_eq!(report["attempts"], 1, "not retried: {report}");
    }
}
