//! The native harness as a job author meets it: what it hands the hooks, and the
//! mistakes it reports as a cluster would.

use flint_guest::testing::{Input, Local};
use flint_guest::{Aggregate, Error, Partition, Task, config, task_info};
use serde::{Deserialize, Serialize};

/// Reports each batch's size and how it ends, at `batch` bytes a read.
struct Batches;
impl Task for Batches {
    type Output = Vec<(usize, bool)>;
    fn run(input: Partition) -> Result<Self::Output, Error> {
        let max: u32 = flint_guest::config_or("batch", 8)?;
        let mut split = input.lines()?;
        let mut out = Vec::new();
        while let Some(batch) = split.next_batch(max)? {
            out.push((batch.len(), batch.ends_with(b"\n")));
        }
        Ok(out)
    }
}

#[test]
fn a_split_comes_in_whole_lines_of_about_the_size_asked() {
    let text = "aaa\nbbb\ncccccccccccc\nd\ne";
    let batches = Local::new().config("batch", 8).run::<Batches>(Input::text(text), 0, 1).unwrap();
    // 8 bytes: two lines; a longer line whole; then what fits; the last without newline.
    assert_eq!(batches, vec![(8, true), (13, true), (3, false)]);
}

/// Says who it is and what it was given.
struct Who;
impl Task for Who {
    type Output = String;
    fn run(input: Partition) -> Result<String, Error> {
        let me = task_info();
        flint_guest::info!("task {} of {}", me.task_index, me.task_count);
        let what = match input {
            Partition::Index(i) => format!("index {i}"),
            Partition::Value(_) => format!("value {}", input.value::<u32>()?),
            Partition::Lines(split) => format!("split of {}", split.path),
        };
        Ok(format!("{what}, {}", config("tag").unwrap_or_default()))
    }
}

#[test]
fn each_task_sees_its_partition_ids_config_and_logs() {
    let inputs = [Input::Generated, Input::value(7), Input::text("x\n")];
    let run = Local::new().config("tag", "t").collect::<Who>(inputs).unwrap();
    assert_eq!(run.result, serde_json::json!(["index 0, t", "value 7, t", "split of input.txt, t"]));
    assert_eq!(
        run.logs,
        vec!["task 0: INFO: task 0 of 3", "task 1: INFO: task 1 of 3", "task 2: INFO: task 2 of 3"]
    );
}

/// An output type postcard cannot carry: untagged.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Loose {
    Number(u64),
    Text(String),
}

struct Untagged;
impl Task for Untagged {
    type Output = Loose;
    fn run(_: Partition) -> Result<Loose, Error> {
        Ok(if task_info().task_index == 0 { Loose::Number(1) } else { Loose::Text("one".into()) })
    }
}
impl Aggregate for Untagged {
    type Result = u64;
    fn merge(a: Loose, _: Loose) -> Result<Loose, Error> {
        Ok(a)
    }
    fn finish(_: Loose) -> Result<u64, Error> {
        Ok(0)
    }
}

#[test]
fn an_output_type_that_needs_a_self_describing_format_is_refused_with_what_to_change() {
    let error = Local::new().aggregate::<Untagged>([Input::Generated, Input::Generated]).unwrap_err();
    let message = error.to_string();
    assert!(message.contains("#[serde(untagged)]") && message.contains("self-describing"), "{message}");
    assert!(!error.is_retryable(), "no retry can mend a type");
}

/// A merge that depends on the order of its inputs: it concatenates.
struct Order;
impl Task for Order {
    type Output = Vec<u32>;
    fn run(_: Partition) -> Result<Vec<u32>, Error> {
        Ok(vec![task_info().task_index])
    }
}
impl Aggregate for Order {
    type Result = Vec<u32>;
    fn merge(mut a: Vec<u32>, b: Vec<u32>) -> Result<Vec<u32>, Error> {
        a.extend(b);
        Ok(a)
    }
    fn finish(a: Vec<u32>) -> Result<Vec<u32>, Error> {
        Ok(a)
    }
}
impl flint_guest::Combine for Order {
    fn empty() -> Vec<u32> {
        Vec::new()
    }
}

#[test]
fn combining_shows_a_merge_that_is_not_commutative() {
    let inputs = || vec![Input::Generated; 4];
    assert_eq!(Local::new().aggregate::<Order>(inputs()).unwrap().result, serde_json::json!([0, 1, 2, 3]));
    let combined = Local::new().combine::<Order>(inputs()).unwrap().result;
    assert_eq!(combined, serde_json::json!([0, 2, 1, 3]), "two slots, each its own running value");
}
