//! A program that goes wrong as `--conf mode=…` asks, for the driver's tests:
//! `undeclared` names a function its component does not export, `input` reads an input
//! it was not given, `loop` never returns, `alloc` grows past any cap, `collect` brings
//! back more than `flint.driver.maxResultSize`, `panic` panics, `deep` sums in three
//! stages (the last one slow, `pause_ms` a record); anything else counts
//! to `n` (default 1000) as a program should, through a shuffle and two actions.

use flint_guest::program::{Capture, Program, captured, parallelize, range, text_file};
use flint_guest::{Error, config};

flint_guest::functions! {
    fn key(n: u32) -> (u32, u64) { (n % 7, u64::from(n)) }
    fn add(a: u64, b: u64) -> u64 { a + b }
    /// Declared, but left out of the export below: a program that names it fails.
    fn hidden(n: u32) -> u32 { n }
    fn numbers(index: u32) -> Vec<u32> { (0..1000).map(|i| index * 1000 + i).collect() }
    /// A mebibyte of bytes a record.
    fn big(n: u32) -> Vec<u8> { vec![n as u8; 1 << 20] }
    fn spread(n: u32) -> (u32, u64) { (n % 600, u64::from(n)) }
    fn gather(entry: (u32, u64)) -> (u32, u64) { (entry.0 % 60, entry.1) }
    /// Each record after the pause it was given, in milliseconds.
    fn slow(entry: (u32, u64)) -> (u32, u64) {
        std::thread::sleep(std::time::Duration::from_millis(captured::<u64>()));
        entry
    }
}

pub struct Chaos;

impl Program for Chaos {
    type Result = serde_json::Value;

    fn main() -> Result<serde_json::Value, Error> {
        let mode = config("mode").unwrap_or_default();
        match mode.as_str() {
            "undeclared" => {
                let n = range(2).map(hidden).count()?;
                Ok(serde_json::json!(n))
            }
            "input" => Ok(serde_json::json!(text_file("not-given.txt").count()?)),
            "loop" => {
                let mut x = 1u64;
                loop {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
            }
            "alloc" => {
                let mut held: Vec<Vec<u8>> = Vec::new();
                loop {
                    held.push(vec![1u8; 64 << 20]);
                    std::hint::black_box(&held);
                }
            }
            "collect" => Ok(serde_json::json!(range(64).map(big).collect()?.len())),
            "panic" => panic!("the program gave up"),
            // Three stages, the last slow (`pause_ms` a record): sums of 0..n by n % 60.
            "deep" => {
                let n: u32 = config("n").and_then(|n| n.parse().ok()).unwrap_or(60_000);
                let pause: u64 = config("pause_ms").and_then(|n| n.parse().ok()).unwrap_or(0);
                let sums =
                    parallelize(0..n, 6).map(spread).reduce_by_key(add, 6).map(gather).reduce_by_key(add, 6);
                let mut sums = sums.map(slow.with(&pause)?).collect()?;
                sums.sort();
                Ok(serde_json::json!(sums))
            }
            _ => {
                let n: u32 = config("n").and_then(|n| n.parse().ok()).unwrap_or(1000);
                let sums = parallelize(0..n, 4).map(key).reduce_by_key(add, 3);
                let mut sums = sums.collect()?;
                sums.sort();
                let total: u64 = range(3).flat_map(numbers).count()?;
                Ok(serde_json::json!({ "sums": sums, "generated": total }))
            }
        }
    }
}

flint_guest::export_program!(Chaos, [key, add, numbers, big, spread, gather, slow]);
