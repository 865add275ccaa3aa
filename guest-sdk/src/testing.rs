//! Run a job's hooks natively, without a cluster: `cargo test` in a job's crate.
//!
//! [`Local`] plays the host: it hands each task its [`Partition`], its
//! [`task_info`](crate::task_info), the job's [`config`](crate::config) and
//! [`token`](crate::token)s, and gathers what the job logs. Outputs go through the
//! encoding they have between a task and the driver (postcard), so a type that cannot
//! cross fails here as it would in a cluster; results come back as the JSON a user
//! reads. Partitions run in turn on the calling thread; a [`Combine`] job's are added
//! into two running values, interleaved, as two slots would, and a [`MapReduce`] job's
//! records are moved by key, sorted and combined as the host does.
//!
//! ```
//! use flint_guest::testing::{Input, Local};
//! use flint_guest::{Aggregate, Error, Partition, Task};
//!
//! struct Lines;
//! impl Task for Lines {
//!     type Output = u64;
//!     fn run(input: Partition) -> Result<u64, Error> {
//!         let mut n = 0;
//!         input.lines()?.for_each_line(|_| Ok(n += 1))?;
//!         Ok(n)
//!     }
//! }
//! impl Aggregate for Lines {
//!     type Result = u64;
//!     fn merge(a: u64, b: u64) -> Result<u64, Error> { Ok(a + b) }
//!     fn finish(n: u64) -> Result<u64, Error> { Ok(n) }
//! }
//!
//! let run = Local::new().aggregate::<Lines>([Input::text("a\nb\n"), Input::text("c\n")]).unwrap();
//! assert_eq!(run.result, 3);
//! ```
//!
//! Only on the host's own target (not in a component): a job's crate builds it for
//! `cargo test` and leaves it out of the `wasm32-wasip2` build.

use crate::{Aggregate, Combine, Error, Level, MapReduce, Partition, Task, TaskInfo, Token};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::cell::RefCell;
use std::collections::BTreeMap;

/// One partition of a job run by [`Local`], as Flint would hand it to a task.
#[derive(Debug, Clone)]
pub enum Input {
    /// A generated partition (a job without input files): the task gets its own index.
    Generated,
    /// A file split holding this text: the task reads its lines through
    /// [`Partition::lines`], as from a file.
    Text {
        /// The path the task sees.
        path: String,
        /// The split's bytes.
        bytes: Vec<u8>,
    },
    /// One value of the job's input list (JSON), read with [`Partition::value`].
    Value(serde_json::Value),
}

impl Input {
    /// A split of a file `input.txt` holding `text`.
    ///
    /// ```
    /// # use flint_guest::testing::Input;
    /// let split = Input::text("one line\nanother\n");
    /// ```
    pub fn text(text: impl Into<String>) -> Input {
        Input::Text { path: "input.txt".into(), bytes: text.into().into_bytes() }
    }

    /// A value of the job's input list.
    ///
    /// ```
    /// # use flint_guest::testing::Input;
    /// let value = Input::value(serde_json::json!({"user": 7}));
    /// ```
    pub fn value(value: impl Serialize) -> Input {
        Input::Value(serde_json::to_value(value).expect("a test input encodes as JSON"))
    }

    fn partition(self, index: u32) -> Partition {
        match self {
            Input::Generated => Partition::Index(index),
            Input::Text { path, bytes } => {
                let end = bytes.len() as u64;
                Partition::Lines(crate::Split::in_memory(path, 0, end, bytes))
            }
            Input::Value(value) => Partition::Value(serde_json::to_vec(&value).expect("JSON encodes")),
        }
    }
}

/// What a job run by [`Local`] gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The job's result, as `flint run` prints it.
    pub result: serde_json::Value,
    /// A map/reduce job's part files, in partition order, when asked for with
    /// [`Local::with_parts`] (one per reduce partition, empty ones included).
    pub parts: Vec<Vec<u8>>,
    /// Every line the job logged, `"task N: LEVEL: message"` (`"driver"` for merges).
    pub logs: Vec<String>,
}

/// A job's host in a test: its configuration, tokens and ids, and the runs of its
/// hooks. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct Local {
    config: BTreeMap<String, String>,
    tokens: Vec<Token>,
    app_id: String,
    job_id: String,
    parts: bool,
}

impl Default for Local {
    fn default() -> Self {
        Local::new()
    }
}

/// What the running task sees through the ambient functions: set by [`Local`] around
/// each call of a job's hook.
struct Context {
    info: TaskInfo,
    config: BTreeMap<String, String>,
    tokens: Vec<Token>,
    logs: Vec<String>,
    who: String,
}

thread_local! {
    static CONTEXT: RefCell<Option<Context>> = const { RefCell::new(None) };
}

/// The running task's ids: task 0 of 1 outside a [`Local`] run.
pub(crate) fn current_task() -> TaskInfo {
    CONTEXT.with(|c| c.borrow().as_ref().map(|c| c.info.clone())).unwrap_or_else(|| TaskInfo {
        app_id: "local".into(),
        job_id: "0".into(),
        task_index: 0,
        task_count: 1,
        attempt: 0,
    })
}

pub(crate) fn config(key: &str) -> Option<String> {
    CONTEXT.with(|c| c.borrow().as_ref().and_then(|c| c.config.get(key).cloned()))
}

pub(crate) fn token(service: &str) -> Option<Token> {
    CONTEXT
        .with(|c| c.borrow().as_ref().and_then(|c| c.tokens.iter().find(|t| t.service == service).cloned()))
}

pub(crate) fn log(level: Level, message: &str) {
    let level = match level {
        Level::Trace => "TRACE",
        Level::Debug => "DEBUG",
        Level::Info => "INFO",
        Level::Warn => "WARN",
        Level::Error => "ERROR",
    };
    let kept = CONTEXT.with(|c| {
        c.borrow_mut().as_mut().map(|c| {
            let line = format!("{}: {level}: {message}", c.who);
            eprintln!("{line}");
            c.logs.push(line);
        })
    });
    if kept.is_none() {
        eprintln!("{level}: {message}");
    }
}

/// Postcard both ways, as a task's output travels to the driver.
fn cross<T: Serialize + DeserializeOwned>(value: &T, what: &str) -> Result<T, Error> {
    let bytes = postcard::to_allocvec(value).map_err(|e| crate::encode_error("encode", what, e))?;
    postcard::from_bytes(&bytes).map_err(|e| crate::encode_error("decode", what, e))
}

fn json<T: Serialize>(value: &T) -> Result<serde_json::Value, Error> {
    serde_json::to_value(value)
        .map_err(|e| Error::fatal(format!("cannot encode the job's result as JSON: {e}")))
}

pub(crate) mod program;

impl Local {
    /// A host with no configuration and no tokens.
    ///
    /// ```
    /// let local = flint_guest::testing::Local::new();
    /// ```
    pub fn new() -> Local {
        Local {
            config: BTreeMap::new(),
            tokens: Vec::new(),
            app_id: "local".into(),
            job_id: "0".into(),
            parts: false,
        }
    }

    /// Sets the job's configuration value for `key`, as `--conf key=value` would.
    ///
    /// ```
    /// let local = flint_guest::testing::Local::new().config("points", 1000).config("mode", "fast");
    /// ```
    pub fn config(mut self, key: impl Into<String>, value: impl ToString) -> Local {
        self.config.insert(key.into(), value.to_string());
        self
    }

    /// Gives the job a token for `service` that expires in an hour.
    ///
    /// ```
    /// let local = flint_guest::testing::Local::new().token("store", "s3cr3t");
    /// ```
    pub fn token(mut self, service: impl Into<String>, secret: impl Into<String>) -> Local {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let expires_at_ms = now.as_millis() as u64 + 3_600_000;
        self.tokens.push(Token { service: service.into(), secret: secret.into(), expires_at_ms });
        self
    }

    /// Makes a map/reduce job's reduce tasks write parts ([`crate::part::wanted`] holds),
    /// as `--output DIR` or `--collect` would; [`Outcome::parts`] has them (see
    /// [`crate::part`] for a job that writes them).
    ///
    /// ```
    /// let local = flint_guest::testing::Local::new().with_parts();
    /// ```
    pub fn with_parts(mut self) -> Local {
        self.parts = true;
        self
    }

    /// Runs `f` as task `index` of `count` (or as the driver, `None`), with what the
    /// task sees set; the lines it logged are added to `logs`.
    fn as_task<T>(&self, index: Option<u32>, count: u32, logs: &mut Vec<String>, f: impl FnOnce() -> T) -> T {
        let who = index.map_or_else(|| "driver".to_owned(), |i| format!("task {i}"));
        let info = TaskInfo {
            app_id: self.app_id.clone(),
            job_id: self.job_id.clone(),
            task_index: index.unwrap_or(0),
            task_count: count,
            attempt: 0,
        };
        let context =
            Context { info, config: self.config.clone(), tokens: self.tokens.clone(), logs: Vec::new(), who };
        let outer = CONTEXT.with(|c| c.borrow_mut().replace(context));
        let result = f();
        let context = CONTEXT.with(|c| std::mem::replace(&mut *c.borrow_mut(), outer));
        logs.extend(context.map(|c| c.logs).unwrap_or_default());
        result
    }

    /// One task: `J::run` over `input` as task `index` of `count`, its output as the
    /// driver would receive it.
    ///
    /// ```
    /// # use flint_guest::{Aggregate, Combine, Error, Partition, Task};
    /// # struct Lines;
    /// # impl Task for Lines {
    /// #     type Output = u64;
    /// #     fn run(input: Partition) -> Result<u64, Error> { let mut n = 0; input.lines()?.for_each_line(|_| Ok(n += 1))?; Ok(n) }
    /// # }
    /// # impl Aggregate for Lines {
    /// #     type Result = u64;
    /// #     fn merge(a: u64, b: u64) -> Result<u64, Error> { Ok(a + b) }
    /// #     fn finish(n: u64) -> Result<u64, Error> { Ok(n) }
    /// # }
    /// # impl Combine for Lines { fn empty() -> u64 { 0 } }
    /// # use flint_guest::testing::{Input, Local};
    /// assert_eq!(Local::new().run::<Lines>(Input::text("a\nb\n"), 0, 1).unwrap(), 2);
    /// ```
    pub fn run<J: Task>(&self, input: Input, index: u32, count: u32) -> Result<J::Output, Error> {
        let output = self.as_task(Some(index), count, &mut Vec::new(), || J::run(input.partition(index)))?;
        cross(&output, "the task's output")
    }

    /// A job exported with [`crate::export_task!`]: its result is the list of its task
    /// outputs in partition order.
    ///
    /// ```
    /// # use flint_guest::{Aggregate, Combine, Error, Partition, Task};
    /// # struct Lines;
    /// # impl Task for Lines {
    /// #     type Output = u64;
    /// #     fn run(input: Partition) -> Result<u64, Error> { let mut n = 0; input.lines()?.for_each_line(|_| Ok(n += 1))?; Ok(n) }
    /// # }
    /// # impl Aggregate for Lines {
    /// #     type Result = u64;
    /// #     fn merge(a: u64, b: u64) -> Result<u64, Error> { Ok(a + b) }
    /// #     fn finish(n: u64) -> Result<u64, Error> { Ok(n) }
    /// # }
    /// # impl Combine for Lines { fn empty() -> u64 { 0 } }
    /// # use flint_guest::testing::{Input, Local};
    /// let run = Local::new().collect::<Lines>([Input::text("a\n"), Input::text("b\nc\n")]).unwrap();
    /// assert_eq!(run.result, serde_json::json!([1, 2]));
    /// ```
    pub fn collect<J: Task>(&self, inputs: impl IntoIterator<Item = Input>) -> Result<Outcome, Error> {
        let inputs: Vec<Input> = inputs.into_iter().collect();
        let count = inputs.len() as u32;
        let mut logs = Vec::new();
        let mut outputs = Vec::with_capacity(inputs.len());
        for (index, input) in (0..).zip(inputs) {
            let output = self.as_task(Some(index), count, &mut logs, || J::run(input.partition(index)))?;
            outputs.push(cross(&output, "the task's output")?);
        }
        Ok(Outcome { result: json(&outputs)?, parts: Vec::new(), logs })
    }

    /// A job exported with [`crate::export_aggregate!`]: every partition's `run`, the
    /// outputs merged in partition order, then `finish`.
    ///
    /// ```
    /// # use flint_guest::{Aggregate, Combine, Error, Partition, Task};
    /// # struct Lines;
    /// # impl Task for Lines {
    /// #     type Output = u64;
    /// #     fn run(input: Partition) -> Result<u64, Error> { let mut n = 0; input.lines()?.for_each_line(|_| Ok(n += 1))?; Ok(n) }
    /// # }
    /// # impl Aggregate for Lines {
    /// #     type Result = u64;
    /// #     fn merge(a: u64, b: u64) -> Result<u64, Error> { Ok(a + b) }
    /// #     fn finish(n: u64) -> Result<u64, Error> { Ok(n) }
    /// # }
    /// # impl Combine for Lines { fn empty() -> u64 { 0 } }
    /// # use flint_guest::testing::{Input, Local};
    /// let run = Local::new().aggregate::<Lines>([Input::text("a\n"), Input::text("b\nc\n")]).unwrap();
    /// assert_eq!(run.result, 3);
    /// ```
    pub fn aggregate<J: Aggregate>(&self, inputs: impl IntoIterator<Item = Input>) -> Result<Outcome, Error> {
        let inputs: Vec<Input> = inputs.into_iter().collect();
        let count = inputs.len() as u32;
        let mut logs = Vec::new();
        let mut acc: Option<J::Output> = None;
        for (index, input) in (0..).zip(inputs) {
            let output = self.as_task(Some(index), count, &mut logs, || J::run(input.partition(index)))?;
            let output = cross(&output, "the task's output")?;
            acc = Some(match acc {
                None => output,
                Some(left) => self.as_task(None, count, &mut logs, || J::merge(left, output))?,
            });
        }
        let Some(acc) = acc else { return Err(Error::fatal("a job of no partitions has no result")) };
        let result = self.as_task(None, count, &mut logs, || J::finish(acc))?;
        Ok(Outcome { result: json(&result)?, parts: Vec::new(), logs })
    }

    /// A job exported with [`crate::export_combine!`]: partitions added into two running
    /// values in turn (even ones into the first, odd into the second), as two slots
    /// would, each starting from `empty`; the two merged, then `finish`. A merge that
    /// depends on order gives another result here than [`Local::aggregate`].
    ///
    /// ```
    /// # use flint_guest::{Aggregate, Combine, Error, Partition, Task};
    /// # struct Lines;
    /// # impl Task for Lines {
    /// #     type Output = u64;
    /// #     fn run(input: Partition) -> Result<u64, Error> { let mut n = 0; input.lines()?.for_each_line(|_| Ok(n += 1))?; Ok(n) }
    /// # }
    /// # impl Aggregate for Lines {
    /// #     type Result = u64;
    /// #     fn merge(a: u64, b: u64) -> Result<u64, Error> { Ok(a + b) }
    /// #     fn finish(n: u64) -> Result<u64, Error> { Ok(n) }
    /// # }
    /// # impl Combine for Lines { fn empty() -> u64 { 0 } }
    /// # use flint_guest::testing::{Input, Local};
    /// let inputs = || (0..5).map(|i| Input::text("x\n".repeat(i)));
    /// let combined = Local::new().combine::<Lines>(inputs()).unwrap();
    /// assert_eq!(combined.result, Local::new().aggregate::<Lines>(inputs()).unwrap().result);
    /// ```
    pub fn combine<J: Combine>(&self, inputs: impl IntoIterator<Item = Input>) -> Result<Outcome, Error> {
        let inputs: Vec<Input> = inputs.into_iter().collect();
        let count = inputs.len() as u32;
        let mut logs = Vec::new();
        let mut slots: [Option<J::Output>; 2] = [None, None];
        for (index, input) in (0..).zip(inputs) {
            let slot = &mut slots[index as usize % 2];
            self.as_task(Some(index), count, &mut logs, || {
                let acc = slot.get_or_insert_with(J::empty);
                J::add(acc, input.partition(index))
            })?;
        }
        let mut partials = Vec::new();
        for value in slots.into_iter().flatten() {
            partials.push(cross(&value, "the running value")?);
        }
        let mut acc = J::empty();
        for partial in partials {
            acc = self.as_task(None, count, &mut logs, || J::merge(acc, partial))?;
        }
        let result = self.as_task(None, count, &mut logs, || J::finish(acc))?;
        Ok(Outcome { result: json(&result)?, parts: Vec::new(), logs })
    }

    /// A job exported with [`crate::export_map_reduce!`]: every partition mapped (its
    /// records combined on the map side when the job combines), the records moved to
    /// `reduce_partitions` partitions by key, sorted by their encoded keys and combined
    /// again as the host does, each reduce partition reduced from `empty`, the outputs
    /// merged in partition order, then `finish`. See [`MapReduce`] for an example.
    pub fn map_reduce<J: MapReduce>(
        &self,
        inputs: impl IntoIterator<Item = Input>,
        reduce_partitions: u32,
    ) -> Result<Outcome, Error> {
        if reduce_partitions == 0 {
            return Err(Error::fatal("a map/reduce job needs at least one reduce partition"));
        }
        let inputs: Vec<Input> = inputs.into_iter().collect();
        let maps = inputs.len() as u32;
        let count = maps + reduce_partitions;
        let mut logs = Vec::new();
        // Each partition's records: (key, value) as encoded, from every map in turn.
        let mut by_partition: Vec<Vec<(Vec<u8>, Vec<u8>)>> = vec![Vec::new(); reduce_partitions as usize];
        for (index, input) in (0..).zip(inputs) {
            let batches = self.as_task(Some(index), count, &mut logs, || {
                crate::shuffle::map_in_memory::<J>(input.partition(index), reduce_partitions)
            })?;
            for batch in batches {
                for (partition, key, value) in crate::shuffle::records(&batch)? {
                    let records = by_partition.get_mut(partition as usize).ok_or_else(|| {
                        Error::fatal(format!("a record for partition {partition} of {reduce_partitions}"))
                    })?;
                    records.push((key.to_vec(), value.to_vec()));
                }
            }
        }
        let mut parts = Vec::new();
        let mut acc: Option<J::Output> = None;
        for (partition, mut records) in (0..).zip(by_partition) {
            records.sort_by(|a, b| a.0.cmp(&b.0));
            let sorted = crate::shuffle::flat(partition, &records)?;
            let sorted = crate::shuffle::combine_sorted::<J>(&sorted)?.unwrap_or(sorted);
            let index = maps + partition;
            let (output, part) = self.as_task(Some(index), count, &mut logs, || {
                crate::shuffle::reduce_in_memory::<J>(sorted, self.parts)
            })?;
            let output = cross(&output, "the reduce task's output")?;
            parts.extend(part);
            acc = Some(match acc {
                None => output,
                Some(left) => self.as_task(None, count, &mut logs, || J::merge(left, output))?,
            });
        }
        let acc = acc.expect("at least one reduce partition");
        let result = self.as_task(None, count, &mut logs, || J::finish(acc))?;
        Ok(Outcome { result: json(&result)?, parts, logs })
    }

    /// A program exported with [`crate::export_program!`]: its `main` run as the driver
    /// runs it, with `inputs` (text inputs, by their paths) as the submission's, each
    /// action run as a job of stages whose tasks run here one after another, the
    /// records between stages moved by key and sorted as the host moves and sorts them.
    /// See [`crate::program`] for an example.
    pub fn program<P: crate::program::Program + crate::__private::program::Registered>(
        &self,
        inputs: impl IntoIterator<Item = Input>,
    ) -> Result<Outcome, Error> {
        let registry = crate::program::glue::registry::<P>();
        let driver = program::driver(self, inputs.into_iter().collect(), registry)?;
        let mut logs = Vec::new();
        let (result, driver) = program::serving(driver, || self.as_task(None, 0, &mut logs, P::main));
        logs.extend(driver.logs);
        Ok(Outcome { result: json(&result?)?, parts: Vec::new(), logs })
    }
}
