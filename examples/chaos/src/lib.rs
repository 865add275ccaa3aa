//! A job that misbehaves on request, so that tests can drive every failure path of the
//! host through a real component. `mode` (job config) chooses the behaviour:
//!
//! - `ok` (default): output the task index
//! - `trap`: execute `unreachable`
//! - `loop`: spin forever
//! - `alloc`: allocate until memory runs out
//! - `panic`: panic with a message
//! - `big-output`: return `bytes` bytes (default 4 MiB)
//! - `fail` / `fatal`: return a retryable / non-retryable job error
//! - `flaky`: fail on the first attempt, succeed on retries
//! - `chatter`: write `bytes` bytes to stdout, then succeed
//! - `probe`: report what ambient authority the sandbox grants (it should grant none)
//! - `token`: output the secret of the token for service `service` (or "none")
//! - `sleep`: sleep `secs` seconds (default an hour) in one blocking WASI call
//! - `poll`: wait `secs` seconds on a clock pollable with `wasi:io/poll.poll`
//! - `naps`: `naps` (default 100) waits of `nap_ms` milliseconds (default 2) in turn:
//!   work in small steps, which an executor given a tenth of the time (a throttled
//!   pod, a stopped-and-continued process) does ten times slower
//! - `slow-read`: read the split in batches of `batch` bytes (default 64), napping
//!   `nap_ms` (default 2) after each: a task whose input the host sees read slowly
//! - `handles`: make `count` (default ten million) clock pollables and never drop them
//! - `refused-then-panic`: ask for more memory than any cap allows, cope with the
//!   refusal, then panic for another reason
//! - `residue`: report what earlier instances left behind: how many times this
//!   instance's static counter was already bumped, and how many bytes of a fresh
//!   `bytes`-long zeroed allocation are not zero; then dirty both
//! - `flood`: log `bytes` bytes through the host's log import at error level, in lines
//!   of a KiB, then fail with a message of `error_bytes` bytes
//! - `read`: read the file split in batches of `batch` bytes (default 1 MiB) and output
//!   how many bytes it held, doing nothing else with them
//! - `swallow-input`: read the file split, drop any read error on the floor and
//!   succeed (the host must fail the task all the same)
//!
//! `merge_mode` (job config) makes every merge on the driver misbehave the same way:
//! `sleep` or `loop`, or `slow` (a tenth of a second per merge, keeping only the left
//! side, as a reducing merge would); otherwise merges concatenate, so the result is the list of task
//! outputs in partition order.
//!
//! `only_task=N` applies the mode to task N alone; the others follow `other_mode`
//! (default `ok`). `only_attempt=K` narrows it to that attempt of the task (a
//! straggler whose speculative copy, a later attempt, runs as the others do).

use flint_guest::{Aggregate, Error, Partition, Task, config, config_or, info, task_info};
use std::hint::black_box;
use std::io::Write;

pub struct Chaos;

impl Task for Chaos {
    /// One item per task; merges concatenate.
    type Output = Vec<serde_json_value::Output>;

    fn run(input: Partition) -> Result<Self::Output, Error> {
        let me = task_info();
        let only: Option<u32> = config("only_task").map(|t| t.parse()).transpose()?;
        let only_attempt: Option<u32> = config("only_attempt").map(|t| t.parse()).transpose()?;
        let mode = match (only, only_attempt) {
            (Some(t), _) if t != me.task_index => config("other_mode"),
            (_, Some(a)) if a != me.attempt => config("other_mode"),
            _ => config("mode"),
        }
        .unwrap_or_else(|| "ok".into());
        info!("task {} running mode {mode}", me.task_index);
        let bytes: usize = config_or("bytes", 4 << 20)?;
        match mode.as_str() {
            "ok" => {}
            "trap" => core::arch::wasm32::unreachable(),
            "loop" => {
                let mut n: u64 = 0;
                loop {
                    n = black_box(n.wrapping_add(1));
                }
            }
            "alloc" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    let mut block = vec![0u8; 16 << 20];
                    block[0] = 1;
                    hoard.push(black_box(block));
                }
            }
            "panic" => panic!("chaos asked to panic in task {}", me.task_index),
            "big-output" => return Ok(vec![serde_json_value::Output::Bytes("x".repeat(bytes))]),
            "fail" => return Err(Error::new("chaos asked to fail")),
            "fatal" => return Err(Error::fatal("chaos asked to fail for good")),
            "flaky" if me.attempt == 0 => {
                // `error_bytes` pads the message, for reports carrying many large failures.
                let pad = "!".repeat(config_or("error_bytes", 0)?);
                return Err(Error::new(format!("flaky on first attempt{pad}")));
            }
            "flaky" => {}
            "chatter" => {
                let line = [b'.'; 1023];
                let mut out = std::io::stdout().lock();
                for _ in 0..bytes / 1024 {
                    out.write_all(&line)?;
                    out.write_all(b"\n")?;
                }
            }
            "probe" => {
                let probe = format!(
                    "env={} args={} root={} tcp={}",
                    std::env::vars().count(),
                    std::env::args().count(),
                    std::fs::read_dir("/").is_ok(),
                    std::net::TcpStream::connect("127.0.0.1:9").is_ok(),
                );
                return Ok(vec![serde_json_value::Output::Bytes(probe)]);
            }
            "token" => {
                let service = config("service").unwrap_or_default();
                let secret = flint_guest::token(&service).map_or_else(|| "none".to_owned(), |t| t.secret);
                return Ok(vec![serde_json_value::Output::Bytes(secret)]);
            }
            "refused-then-panic" => {
                let mut huge: Vec<u8> = Vec::new();
                let refused = huge.try_reserve_exact(3 << 30).is_err();
                panic!("unrelated failure after a refused allocation (refused: {refused})");
            }
            "flood" => {
                let line = "e".repeat(1023);
                for _ in 0..bytes / 1024 {
                    flint_guest::log(flint_guest::Level::Error, &line);
                }
                let error_bytes: usize = config_or("error_bytes", 1 << 20)?;
                return Err(Error::new("!".repeat(error_bytes)));
            }
            "residue" => {
                static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
                let runs = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let mut fresh = vec![0u8; bytes];
                let dirty = fresh.iter().filter(|b| **b != 0).count();
                fresh.fill(0xa5);
                black_box(&fresh);
                return Ok(vec![serde_json_value::Output::Bytes(format!("runs={runs} dirty={dirty}"))]);
            }
            "sleep" => std::thread::sleep(std::time::Duration::from_secs(config_or("secs", 3600)?)),
            "naps" => {
                let nap = std::time::Duration::from_millis(config_or("nap_ms", 2)?);
                for _ in 0..config_or::<u32>("naps", 100)? {
                    std::thread::sleep(nap);
                }
            }
            "slow-read" => {
                let nap = std::time::Duration::from_millis(config_or("nap_ms", 2)?);
                let mut split = input.lines()?;
                while split.next_batch(config_or("batch", 64)?)?.is_some() {
                    std::thread::sleep(nap);
                }
            }
            "poll" => {
                let nanos = config_or::<u64>("secs", 3600)?.saturating_mul(1_000_000_000);
                let clock = wasi::clocks::monotonic_clock::subscribe_duration(nanos);
                wasi::io::poll::poll(&[&clock]);
            }
            "read" => {
                let mut split = input.lines()?;
                let mut read = 0;
                while let Some(batch) = split.next_batch(config_or("batch", 1 << 20)?)? {
                    read += batch.len();
                }
                return Ok(vec![serde_json_value::Output::Bytes(read.to_string())]);
            }
            "swallow-input" => {
                let _ignored = input.read_all();
            }
            "handles" => {
                // Host-side handles the guest never drops: each lives in the host's
                // memory, not the guest's.
                for _ in 0..config_or::<u64>("count", 10_000_000)? {
                    std::mem::forget(wasi::clocks::monotonic_clock::subscribe_duration(1));
                }
            }
            other => return Err(Error::fatal(format!("unknown mode {other:?}"))),
        }
        Ok(vec![serde_json_value::Output::Index(me.task_index)])
    }
}

impl Aggregate for Chaos {
    type Result = Vec<serde_json_value::Shown>;

    fn merge(mut a: Self::Output, b: Self::Output) -> Result<Self::Output, Error> {
        match config("merge_mode").as_deref() {
            Some("sleep") => std::thread::sleep(std::time::Duration::from_secs(3600)),
            Some("loop") => {
                let mut n: u64 = 0;
                loop {
                    n = black_box(n.wrapping_add(1));
                }
            }
            Some("slow") => {
                std::thread::sleep(std::time::Duration::from_millis(100));
                return Ok(a);
            }
            _ => {}
        }
        a.extend(b);
        Ok(a)
    }

    fn finish(acc: Self::Output) -> Result<Self::Result, Error> {
        Ok(acc.into_iter().map(Into::into).collect())
    }
}

mod serde_json_value {
    /// A task's output: its index, or a large string.
    #[derive(serde::Serialize, serde::Deserialize)]
    pub enum Output {
        Index(u32),
        Bytes(String),
    }

    /// An output as the job's result shows it: the index or the string alone.
    #[derive(serde::Serialize)]
    #[serde(untagged)]
    pub enum Shown {
        Index(u32),
        Bytes(String),
    }

    impl From<Output> for Shown {
        fn from(o: Output) -> Shown {
            match o {
                Output::Index(i) => Shown::Index(i),
                Output::Bytes(s) => Shown::Bytes(s),
            }
        }
    }
}

flint_guest::export_aggregate!(Chaos);
