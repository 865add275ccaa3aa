//! Write Flint jobs in plain Rust.
//!
//! A job is a type that implements [`Task`] (each partition's work) and, when the job
//! folds its task outputs into one result, [`Aggregate`]. One macro exports it as a
//! `flint:task` component; no wit-bindgen appears in job code. Values are serde types:
//! task outputs travel in postcard, a compact binary encoding (so an output type must
//! not need a self-describing format: no `#[serde(untagged)]` or `flatten`), and the
//! job's result, which people read, as JSON.
//!
//! A complete job, Monte Carlo pi in 25 lines:
//!
//! ```no_run
//! use flint_guest::{Aggregate, Error, Partition, Task, config_or, task_info};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct Count { inside: u64, total: u64 }
//!
//! struct Pi;
//! impl Task for Pi {
//!     type Output = Count;
//!     fn run(_: Partition) -> Result<Count, Error> {
//!         let points: u64 = config_or("points", 1_000_000)?;
//!         let mut rng = task_info().task_index as u64;
//!         let mut next = || { rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1); rng >> 33 };
//!         let inside = (0..points).filter(|_| { let (x, y) = (next(), next()); x * x + y * y < 1 << 62 }).count();
//!         Ok(Count { inside: inside as u64, total: points })
//!     }
//! }
//! impl Aggregate for Pi {
//!     type Result = f64;
//!     fn merge(a: Count, b: Count) -> Result<Count, Error> { Ok(Count { inside: a.inside + b.inside, total: a.total + b.total }) }
//!     fn finish(c: Count) -> Result<f64, Error> { Ok(4.0 * c.inside as f64 / c.total as f64) }
//! }
//! flint_guest::export_aggregate!(Pi);
//! ```
//!
//! A job that only maps partitions (Spark's `map(..).collect()`) implements [`Task`] and
//! is exported with [`export_task!`]; its result is the list of task outputs in partition
//! order. A job whose merge is commutative implements [`Combine`] too, and is combined
//! where it runs; a job that moves records by key between tasks implements
//! [`MapReduce`].
//!
//! [`testing`] runs a job's hooks natively, over inputs in memory, for `cargo test`;
//! [`sandbox`] says what crosses the sandbox and what a task may keep between tasks.
//! `flint new NAME` makes a job crate with this SDK vendored, a template job and its
//! tests.

#![warn(missing_docs)]

extern crate self as flint_guest;

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt;
use std::str::FromStr;

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "aggregate",
        path: "../wit",
        pub_export_macro: true,
        export_macro_name: "__flint_export_world",
        default_bindings_module: "flint_guest::bindings",
        runtime_path: "flint_guest::__rt::wit_bindgen::rt",
    });
}

/// The `combiner` export for jobs that implement [`Combine`]. Everything else is
/// [`bindings`]'s: a combining job exports both worlds, and the component linker joins
/// them into `combine`.
#[doc(hidden)]
pub mod combine_bindings {
    wit_bindgen::generate!({
        world: "combine-extra",
        path: "../wit",
        pub_export_macro: true,
        export_macro_name: "__flint_export_combine",
        default_bindings_module: "flint_guest::combine_bindings",
        runtime_path: "flint_guest::__rt::wit_bindgen::rt",
        with: {
            "flint:task/types@0.3.0": crate::bindings::flint::task::types,
        },
    });
}

/// The `map-reduce-job` export and the `shuffle` import, for jobs that implement
/// [`MapReduce`]; joined with [`bindings`]'s world by the component linker.
#[doc(hidden)]
pub mod map_reduce_bindings {
    wit_bindgen::generate!({
        world: "map-reduce-extra",
        path: "../wit",
        pub_export_macro: true,
        export_macro_name: "__flint_export_map_reduce",
        default_bindings_module: "flint_guest::map_reduce_bindings",
        runtime_path: "flint_guest::__rt::wit_bindgen::rt",
        with: {
            "flint:task/types@0.3.0": crate::bindings::flint::task::types,
        },
    });
}

/// The `program` world: a program's `main` and its stages' tasks, and the `datasets`
/// the driver offers it; its `host`, `types` and `shuffle` are the other worlds'.
#[doc(hidden)]
pub mod program_bindings {
    wit_bindgen::generate!({
        world: "program",
        path: "../wit",
        pub_export_macro: true,
        export_macro_name: "__flint_export_program",
        default_bindings_module: "flint_guest::program_bindings",
        runtime_path: "flint_guest::__rt::wit_bindgen::rt",
        with: {
            "flint:task/types@0.3.0": crate::bindings::flint::task::types,
            "flint:task/host@0.3.0": crate::bindings::flint::task::host,
            "flint:task/shuffle@0.3.0": crate::map_reduce_bindings::flint::task::shuffle,
        },
    });
}

pub mod program;
mod shuffle;
pub use shuffle::{Emitter, MapReduce, Values, part, stable_hash};

#[cfg(not(target_arch = "wasm32"))]
pub mod testing;

pub mod sandbox {
    #![doc = include_str!("sandbox.md")]
}

#[doc(hidden)]
pub mod __rt {
    pub use wit_bindgen;
}

use bindings::flint::task::host;
use bindings::flint::task::types as wit;

/// A failure the job reports. Anything that implements `std::error::Error` converts into
/// one with `?`; such errors are retryable, as a flaky read would be.
///
/// ```
/// use flint_guest::{Error, config};
///
/// fn threshold() -> Result<u32, Error> {
///     let text = config("threshold").ok_or_else(|| Error::fatal("set --conf threshold=N"))?;
///     Ok(text.parse::<u32>()?) // a parse error converts, retryable
/// }
/// assert!(threshold().unwrap_err().to_string().contains("threshold=N"));
/// ```
#[derive(Debug, Clone)]
pub struct Error {
    message: String,
    retryable: bool,
}

impl Error {
    /// A failure the host reported through the contract.
    pub(crate) fn from_wit(e: wit::TaskError) -> Self {
        Error { message: e.message, retryable: e.retryable }
    }

    /// A failure that another attempt may not repeat: the task is retried (up to the
    /// job's `flint.task.maxFailures`).
    ///
    /// ```
    /// let e = flint_guest::Error::new("the service answered 503");
    /// assert!(e.is_retryable());
    /// ```
    pub fn new(message: impl Into<String>) -> Self {
        Error { message: message.into(), retryable: true }
    }

    /// A failure no retry can mend (bad input, say): the job fails at once.
    ///
    /// ```
    /// let e = flint_guest::Error::fatal("line 3 is not a number");
    /// assert!(!e.is_retryable());
    /// ```
    pub fn fatal(message: impl Into<String>) -> Self {
        Error { message: message.into(), retryable: false }
    }

    /// Whether another attempt of the task may succeed.
    ///
    /// ```
    /// let e: flint_guest::Error = "x".parse::<u8>().unwrap_err().into();
    /// assert!(e.is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }
}

/// The error for a value postcard cannot encode or decode, saying what to change: most
/// often a type that needs a self-describing format.
pub(crate) fn encode_error(action: &str, what: &str, e: postcard::Error) -> Error {
    let hint = match e {
        postcard::Error::WontImplement => {
            ": its type needs a self-describing format, which postcard, the encoding of \
             task outputs, keys and values, is not; remove `#[serde(untagged)]`, \
             `#[serde(flatten)]` or `serde_json::Value` from it (a job's result may keep \
             them: it is JSON)"
        }
        _ => "",
    };
    Error::fatal(format!("cannot {action} {what}: {e}{hint}"))
}

impl<E: std::error::Error> From<E> for Error {
    fn from(e: E) -> Self {
        Error::new(e.to_string())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// What one task works on: its index when the job has no input files (`--partitions
/// N`), one value of the job's input list (the manifest's `inputs`), or a split of an
/// input file (`--input PATH`).
///
/// ```
/// use flint_guest::{Error, Partition};
///
/// fn size(input: Partition) -> Result<u64, Error> {
///     Ok(match input {
///         Partition::Index(i) => u64::from(i),
///         Partition::Value(_) => input.value::<Vec<u64>>()?.len() as u64,
///         Partition::Lines(split) => split.end - split.start,
///     })
/// }
/// assert_eq!(size(Partition::Index(7)).unwrap(), 7);
/// ```
#[derive(Debug)]
pub enum Partition {
    /// A generated partition: the task index is the whole input.
    Index(u32),
    /// One value of the job's input list, still encoded; see [`Partition::value`].
    Value(Vec<u8>),
    /// The lines of an input file whose first byte falls in `start..end`, read a batch
    /// at a time.
    Lines(Split),
}

impl Partition {
    /// The partition's value, decoded from JSON.
    ///
    /// ```
    /// use flint_guest::Partition;
    /// let input = Partition::Value(br#"{"n": 3}"#.to_vec());
    /// #[derive(serde::Deserialize)]
    /// struct Job { n: u32 }
    /// assert_eq!(input.value::<Job>().unwrap().n, 3);
    /// ```
    pub fn value<T: DeserializeOwned>(&self) -> Result<T, Error> {
        match self {
            Partition::Value(bytes) => serde_json::from_slice(bytes)
                .map_err(|e| Error::fatal(format!("cannot decode the task input: {e}"))),
            other => Err(Error::fatal(format!("this task expects a value, not {}", other.kind()))),
        }
    }

    /// The file split, or a fatal error naming what the task got instead.
    ///
    /// ```
    /// use flint_guest::Partition;
    /// let error = Partition::Index(0).lines().unwrap_err();
    /// assert!(error.to_string().contains("--input"));
    /// ```
    pub fn lines(self) -> Result<Split, Error> {
        match self {
            Partition::Lines(split) => Ok(split),
            other => {
                Err(Error::fatal(format!("this task reads input files (--input PATH), not {}", other.kind())))
            }
        }
    }

    /// All of the partition's bytes: a file split read whole into the task's memory
    /// (under its cap: for splits known to be small), a value's encoded bytes, or
    /// nothing for a generated partition.
    ///
    /// ```
    /// use flint_guest::Partition;
    /// assert_eq!(Partition::Value(b"[1]".to_vec()).read_all().unwrap(), b"[1]");
    /// assert!(Partition::Index(4).read_all().unwrap().is_empty());
    /// ```
    pub fn read_all(self) -> Result<Vec<u8>, Error> {
        match self {
            Partition::Lines(mut split) => split.read_all(),
            Partition::Value(data) => Ok(data),
            Partition::Index(_) => Ok(Vec::new()),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Partition::Index(_) => "a generated partition",
            Partition::Value(_) => "a value",
            Partition::Lines(_) => "a file split",
        }
    }
}

/// A file split: the lines of `path` whose first byte falls in `start..end`, which the
/// host reads as the task asks for them, a batch of whole lines at a time, so a task's
/// memory does not grow with its split. A line keeps its `\n` (the input's last line
/// may have none); a batch never cuts one.
pub struct Split {
    /// The input file (as the submitter named it: a path or a URL).
    pub path: String,
    /// The split's first byte in the file.
    pub start: u64,
    /// Past the split's last byte: lines that start before it are the split's.
    pub end: u64,
    reader: LineReader,
}

/// Where a split's batches come from.
enum LineReader {
    /// The host, through the contract.
    Host(wit::SplitReader),
    /// Memory, in a native test ([`testing`]): the bytes and how far they are read.
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    Memory(Vec<u8>, usize),
}

impl LineReader {
    fn next(&mut self, max: u32) -> Result<Vec<u8>, Error> {
        match self {
            LineReader::Host(reader) => reader.next(max).map_err(Error::from_wit),
            LineReader::Memory(bytes, at) => {
                let rest = &bytes[*at..];
                // As the host: at most a batch, whatever is asked.
                let max = max.min(Split::BATCH) as usize;
                // Whole lines, about `max` bytes of them; a longer line whole.
                let cut = if rest.len() <= max {
                    rest.len()
                } else if let Some(newline) = rest[..max].iter().rposition(|b| *b == b'\n') {
                    newline + 1
                } else {
                    rest.iter().position(|b| *b == b'\n').map_or(rest.len(), |n| n + 1)
                };
                let batch = rest[..cut].to_vec();
                *at += cut;
                Ok(batch)
            }
        }
    }
}

impl Split {
    /// A split over bytes in memory, for native tests.
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn in_memory(path: String, start: u64, end: u64, bytes: Vec<u8>) -> Split {
        Split { path, start, end, reader: LineReader::Memory(bytes, 0) }
    }

    /// What [`Split::for_each_batch`] and [`Split::for_each_line`] ask for at a time:
    /// the most the host hands out in one batch (960 KiB).
    pub const BATCH: u32 = 960 << 10;

    /// The next whole lines, about `max` bytes of them and at most [`Split::BATCH`] (a
    /// longer line comes whole, up to 64 MiB); `None` at the end. A failed read fails the task whatever it does next.
    ///
    /// ```
    /// # use flint_guest::testing::{Input, Local};
    /// # use flint_guest::{Error, Partition, Task};
    /// # struct Job;
    /// # impl Task for Job {
    /// #     type Output = usize;
    /// #     fn run(input: Partition) -> Result<usize, Error> {
    /// let mut split = input.lines()?;
    /// let mut batches = 0;
    /// while let Some(batch) = split.next_batch(64 << 10)? {
    ///     assert!(batch.ends_with(b"\n") || split.next_batch(1)?.is_none());
    ///     batches += 1;
    /// }
    /// #         Ok(batches)
    /// #     }
    /// # }
    /// # assert_eq!(Local::new().run::<Job>(Input::text("a\nb\n"), 0, 1).unwrap(), 1);
    /// ```
    pub fn next_batch(&mut self, max: u32) -> Result<Option<Vec<u8>>, Error> {
        let batch = self.reader.next(max)?;
        Ok((!batch.is_empty()).then_some(batch))
    }

    /// Calls `f` with each batch of whole lines in turn, [`Split::BATCH`] bytes or so:
    /// the fastest way through a split (no word or line spans two batches).
    ///
    /// ```
    /// # use flint_guest::testing::{Input, Local};
    /// # use flint_guest::{Error, Partition, Task};
    /// # struct Bytes;
    /// # impl Task for Bytes {
    /// #     type Output = u64;
    /// #     fn run(input: Partition) -> Result<u64, Error> {
    /// let mut bytes = 0;
    /// input.lines()?.for_each_batch(|batch| Ok(bytes += batch.len() as u64))?;
    /// #         Ok(bytes)
    /// #     }
    /// # }
    /// # assert_eq!(Local::new().run::<Bytes>(Input::text("ab\nc\n"), 0, 1).unwrap(), 5);
    /// ```
    pub fn for_each_batch(&mut self, mut f: impl FnMut(&[u8]) -> Result<(), Error>) -> Result<(), Error> {
        while let Some(batch) = self.next_batch(Self::BATCH)? {
            f(&batch)?;
        }
        Ok(())
    }

    /// Calls `f` with each line, without its line ending (`\n` or `\r\n`).
    ///
    /// ```
    /// # use flint_guest::testing::{Input, Local};
    /// # use flint_guest::{Error, Partition, Task};
    /// # struct Longest;
    /// # impl Task for Longest {
    /// #     type Output = usize;
    /// #     fn run(input: Partition) -> Result<usize, Error> {
    /// let mut longest = 0;
    /// input.lines()?.for_each_line(|line| Ok(longest = longest.max(line.len())))?;
    /// #         Ok(longest)
    /// #     }
    /// # }
    /// # assert_eq!(Local::new().run::<Longest>(Input::text("ab\r\nabc\n"), 0, 1).unwrap(), 3);
    /// ```
    pub fn for_each_line(&mut self, mut f: impl FnMut(&[u8]) -> Result<(), Error>) -> Result<(), Error> {
        self.for_each_batch(|batch| {
            let batch = batch.strip_suffix(b"\n").unwrap_or(batch);
            batch.split(|b| *b == b'\n').try_for_each(|line| f(line.strip_suffix(b"\r").unwrap_or(line)))
        })
    }

    /// The whole split in the task's memory (under its cap): for splits known to be
    /// small.
    ///
    /// ```
    /// # use flint_guest::testing::{Input, Local};
    /// # use flint_guest::{Error, Partition, Task};
    /// # struct Text;
    /// # impl Task for Text {
    /// #     type Output = String;
    /// #     fn run(input: Partition) -> Result<String, Error> {
    /// let text = String::from_utf8(input.lines()?.read_all()?)?;
    /// #         Ok(text)
    /// #     }
    /// # }
    /// # assert_eq!(Local::new().run::<Text>(Input::text("a\nb"), 0, 1).unwrap(), "a\nb");
    /// ```
    pub fn read_all(&mut self) -> Result<Vec<u8>, Error> {
        let mut all = Vec::new();
        while let Some(batch) = self.next_batch(Self::BATCH)? {
            if all.is_empty() {
                all = batch;
            } else {
                all.extend_from_slice(&batch);
            }
        }
        Ok(all)
    }
}

impl fmt::Debug for Split {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Split")
            .field("path", &self.path)
            .field("start", &self.start)
            .field("end", &self.end)
            .finish()
    }
}

impl From<wit::Partition> for Partition {
    fn from(p: wit::Partition) -> Self {
        match p {
            wit::Partition::Index(i) => Partition::Index(i),
            wit::Partition::Value(v) => Partition::Value(v),
            wit::Partition::Lines(s) => Partition::Lines(Split {
                path: s.path,
                start: s.start,
                end: s.end,
                reader: LineReader::Host(s.lines),
            }),
        }
    }
}

/// A job's work on one partition. A job that implements only this is exported with
/// [`export_task!`]: its result is the list of its task outputs, in partition order.
///
/// ```
/// use flint_guest::{Error, Partition, Task, task_info};
///
/// /// Each partition's square.
/// struct Squares;
/// impl Task for Squares {
///     type Output = u64;
///     fn run(_: Partition) -> Result<u64, Error> {
///         let i = u64::from(task_info().task_index);
///         Ok(i * i)
///     }
/// }
/// flint_guest::export_task!(Squares);
///
/// # use flint_guest::testing::{Input, Local};
/// let run = Local::new().collect::<Squares>(vec![Input::Generated; 4]).unwrap();
/// assert_eq!(run.result, serde_json::json!([0, 1, 4, 9]));
/// ```
pub trait Task {
    /// What one task produces. It travels to the driver in postcard: see
    /// [`sandbox`] for what such a type must not use.
    type Output: Serialize + DeserializeOwned;
    /// The task's work on its partition. An `Err` fails the attempt: it is retried
    /// unless the error is [`Error::fatal`]; a panic is a trap, retried as well.
    fn run(input: Partition) -> Result<Self::Output, Error>;
}

/// A job that folds its task outputs into one result, as Spark's `aggregate`. Exported
/// with [`export_aggregate!`]. `merge` and `finish` run on the driver, in an instance
/// of the job, under `flint.merge.deadline`.
///
/// ```
/// use flint_guest::{Aggregate, Error, Partition, Task};
///
/// /// The longest line of the input files.
/// struct Longest;
/// impl Task for Longest {
///     type Output = String;
///     fn run(input: Partition) -> Result<String, Error> {
///         let mut longest = String::new();
///         input.lines()?.for_each_line(|line| {
///             if line.len() > longest.len() {
///                 longest = String::from_utf8_lossy(line).into_owned();
///             }
///             Ok(())
///         })?;
///         Ok(longest)
///     }
/// }
/// impl Aggregate for Longest {
///     type Result = String;
///     fn merge(a: String, b: String) -> Result<String, Error> {
///         Ok(if b.len() > a.len() { b } else { a })
///     }
///     fn finish(longest: String) -> Result<String, Error> {
///         Ok(longest)
///     }
/// }
/// flint_guest::export_aggregate!(Longest);
///
/// # use flint_guest::testing::{Input, Local};
/// let run = Local::new().aggregate::<Longest>([Input::text("ab\nabcd\n"), Input::text("abc")]).unwrap();
/// assert_eq!(run.result, "abcd");
/// ```
pub trait Aggregate: Task {
    /// The job's result, encoded as JSON for people to read (any serde type).
    type Result: Serialize;
    /// Combines two outputs. Must be associative; the host keeps partition order, so it
    /// need not be commutative.
    fn merge(a: Self::Output, b: Self::Output) -> Result<Self::Output, Error>;
    /// Turns the folded outputs into the job's result.
    fn finish(acc: Self::Output) -> Result<Self::Result, Error>;
}

/// An [`Aggregate`] whose merge is commutative as well as associative, so that
/// partitions may be folded in any order: the host then folds the partitions one
/// executor slot runs into one running value where they run (Spark's map-side
/// combine), and the driver merges one partial result per slot, not one output per
/// task. Exported with [`export_combine!`]; implementing it is the promise that the
/// order of merging does not change the result.
///
/// ```
/// use flint_guest::{Aggregate, Combine, Error, Partition, Task};
///
/// /// Bytes of the input files, counted where each slot runs.
/// struct Bytes;
/// impl Task for Bytes {
///     type Output = u64;
///     fn run(input: Partition) -> Result<u64, Error> {
///         let mut n = 0;
///         Self::add(&mut n, input)?;
///         Ok(n)
///     }
/// }
/// impl Aggregate for Bytes {
///     type Result = u64;
///     fn merge(a: u64, b: u64) -> Result<u64, Error> { Ok(a + b) }
///     fn finish(n: u64) -> Result<u64, Error> { Ok(n) }
/// }
/// impl Combine for Bytes {
///     fn empty() -> u64 { 0 }
///     fn add(acc: &mut u64, input: Partition) -> Result<(), Error> {
///         input.lines()?.for_each_batch(|batch| Ok(*acc += batch.len() as u64))
///     }
/// }
/// flint_guest::export_combine!(Bytes);
///
/// # use flint_guest::testing::{Input, Local};
/// let run = Local::new().combine::<Bytes>([Input::text("ab\n"), Input::text("c")]).unwrap();
/// assert_eq!(run.result, 4);
/// ```
pub trait Combine: Aggregate {
    /// The value of no partition: `merge(empty(), x)` is `x`.
    fn empty() -> Self::Output;

    /// Folds `input` into `acc`, as `acc = merge(acc, run(input))`. The default does
    /// exactly that; a job overrides it to count straight into `acc` without building
    /// a task output first (word count adds to one table instead of making one per
    /// split and merging them).
    fn add(acc: &mut Self::Output, input: Partition) -> Result<(), Error> {
        let output = Self::run(input)?;
        let current = std::mem::replace(acc, Self::empty());
        *acc = Self::merge(current, output)?;
        Ok(())
    }
}

/// The ids of the running task: application, job, partition index and count, attempt.
pub use host::TaskInfo;

/// The running task's application, job, index, count and attempt. Outside a task (a
/// native test not run through [`testing::Local`]), task 0 of 1.
///
/// ```
/// let me = flint_guest::task_info();
/// assert!(me.task_index < me.task_count);
/// ```
pub fn task_info() -> TaskInfo {
    ambient::current_task()
}

/// The job's configuration value for `key`: the manifest's `[config]`, overridden by
/// `--conf key=value`.
///
/// ```
/// use flint_guest::testing::{Input, Local};
/// use flint_guest::{Error, Partition, Task, config};
///
/// struct Greet;
/// impl Task for Greet {
///     type Output = String;
///     fn run(_: Partition) -> Result<String, Error> {
///         Ok(config("greeting").unwrap_or_else(|| "hello".into()))
///     }
/// }
/// let local = Local::new().config("greeting", "hi");
/// assert_eq!(local.run::<Greet>(Input::Generated, 0, 1).unwrap(), "hi");
/// ```
pub fn config(key: &str) -> Option<String> {
    ambient::config(key)
}

/// The job's configuration value for `key`, parsed, or `default` when it is not set. A
/// value that does not parse is a fatal error naming the key.
///
/// ```
/// let points: u64 = flint_guest::config_or("points", 1_000_000).unwrap();
/// assert_eq!(points, 1_000_000);
/// ```
pub fn config_or<T: FromStr>(key: &str, default: T) -> Result<T, Error>
where
    T::Err: fmt::Display,
{
    match ambient::config(key) {
        None => Ok(default),
        Some(text) => text.trim().parse().map_err(|e| Error::fatal(format!("config {key}={text:?}: {e}"))),
    }
}

/// A delegation token: the secret for a service and when it expires.
pub use host::Token;

/// The current token for `service`, if the job's manifest names it (`tokens =
/// ["service"]`) and the application holds one. The driver renews tokens while the job
/// runs: read it when it is needed rather than once.
///
/// ```
/// use flint_guest::testing::{Input, Local};
/// use flint_guest::{Error, Partition, Task, token};
///
/// struct Auth;
/// impl Task for Auth {
///     type Output = bool;
///     fn run(_: Partition) -> Result<bool, Error> {
///         let token = token("store").ok_or_else(|| Error::fatal("no token for store"))?;
///         Ok(!token.secret.is_empty())
///     }
/// }
/// assert!(Local::new().token("store", "s3cr3t").run::<Auth>(Input::Generated, 0, 1).unwrap());
/// assert!(Local::new().run::<Auth>(Input::Generated, 0, 1).is_err());
/// ```
pub fn token(service: &str) -> Option<Token> {
    ambient::token(service)
}

/// Log levels for [`log`].
pub use host::Level;

/// Writes a line to the task's log, tagged with the task's ids by the host; the
/// [`info!`], [`warn!`] and [`debug!`] macros format one.
///
/// ```
/// flint_guest::log(flint_guest::Level::Info, "starting");
/// ```
pub fn log(level: Level, message: &str) {
    ambient::log(level, message)
}

/// What the ambient functions read: the host's imports in a component, the test
/// harness's context natively.
#[cfg(target_arch = "wasm32")]
mod ambient {
    pub(crate) use super::host::{config, current_task, get_token as token, log};
}

#[cfg(not(target_arch = "wasm32"))]
mod ambient {
    pub(crate) use super::testing::{config, current_task, log, token};
}

/// `info!("read {} lines", n)`: a formatted line in the task's log.
///
/// ```
/// flint_guest::info!("read {} lines", 12);
/// ```
#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { $crate::log($crate::Level::Info, &::std::format!($($arg)*)) };
}

/// `warn!(...)`: as [`info!`], at warning level.
///
/// ```
/// flint_guest::warn!("skipped {} bad lines", 2);
/// ```
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { $crate::log($crate::Level::Warn, &::std::format!($($arg)*)) };
}

/// `debug!(...)`: as [`info!`], at debug level.
///
/// ```
/// flint_guest::debug!("batch of {} bytes", 4096);
/// ```
#[macro_export]
macro_rules! debug {
    ($($arg:tt)*) => { $crate::log($crate::Level::Debug, &::std::format!($($arg)*)) };
}

#[doc(hidden)]
pub mod __private {
    //! The glue the export macros expand to; not part of the API.
    use super::*;
    pub use crate::program::glue as program;
    use std::cell::RefCell;
    use std::marker::PhantomData;

    /// What the host folds: a job's task outputs, or for a `Task`-only job the list of
    /// them.
    pub trait Fold: 'static {
        type Value: Serialize + DeserializeOwned;
        fn run(input: Partition) -> Result<Self::Value, Error>;
        fn merge(a: Self::Value, b: Self::Value) -> Result<Self::Value, Error>;
        /// The job's result, as JSON.
        fn finish(value: Self::Value) -> Result<Vec<u8>, Error>;
    }

    pub struct AggregateOf<J>(PhantomData<J>);

    impl<J: Aggregate + 'static> Fold for AggregateOf<J> {
        type Value = J::Output;
        fn run(input: Partition) -> Result<J::Output, Error> {
            J::run(input)
        }
        fn merge(a: J::Output, b: J::Output) -> Result<J::Output, Error> {
            J::merge(a, b)
        }
        fn finish(value: J::Output) -> Result<Vec<u8>, Error> {
            to_json(&J::finish(value)?)
        }
    }

    /// A job's result is the list of its task outputs: each task's output is a list of
    /// one, and merging concatenates.
    pub struct CollectOf<J>(PhantomData<J>);

    impl<J: Task + 'static> Fold for CollectOf<J> {
        type Value = Vec<J::Output>;
        fn run(input: Partition) -> Result<Vec<J::Output>, Error> {
            Ok(vec![J::run(input)?])
        }
        fn merge(mut a: Vec<J::Output>, b: Vec<J::Output>) -> Result<Vec<J::Output>, Error> {
            a.extend(b);
            Ok(a)
        }
        fn finish(value: Vec<J::Output>) -> Result<Vec<u8>, Error> {
            to_json(&value)
        }
    }

    /// A map/reduce job's reduce outputs fold with its `merge` and `finish`; it has no
    /// plain tasks.
    pub struct MapReduceOf<J>(PhantomData<J>);

    impl<J: MapReduce> Fold for MapReduceOf<J> {
        type Value = J::Output;
        fn run(_: Partition) -> Result<J::Output, Error> {
            Err(Error::fatal("a map/reduce job runs map and reduce tasks, not run"))
        }
        fn merge(a: J::Output, b: J::Output) -> Result<J::Output, Error> {
            J::merge(a, b)
        }
        fn finish(value: J::Output) -> Result<Vec<u8>, Error> {
            to_json(&J::finish(value)?)
        }
    }

    pub fn map<J: MapReduce>(
        input: wit::Partition,
        out: &crate::map_reduce_bindings::flint::task::shuffle::Emitter,
    ) -> Result<(), wit::TaskError> {
        crate::shuffle::run_map::<J>(input.into(), out).map_err(wit_error)
    }

    pub fn combine_sorted<J: MapReduce>(batch: Vec<u8>) -> Result<Option<Vec<u8>>, wit::TaskError> {
        crate::shuffle::combine_sorted::<J>(&batch).map_err(wit_error)
    }

    pub fn reduce<J: MapReduce>(
        partition: u32,
        input: &crate::map_reduce_bindings::flint::task::shuffle::SortedInput,
        part: Option<&crate::map_reduce_bindings::flint::task::shuffle::PartWriter>,
    ) -> Result<Vec<u8>, wit::TaskError> {
        encode(&crate::shuffle::run_reduce::<J>(partition, input, part).map_err(wit_error)?)
    }

    fn to_json<T: Serialize>(value: &T) -> Result<Vec<u8>, Error> {
        serde_json::to_vec(value).map_err(|e| Error::fatal(format!("cannot encode the job's result: {e}")))
    }

    /// Task outputs and partial results cross the boundary in postcard: compact, and
    /// several times faster to read and write than JSON for tables of counts.
    fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, wit::TaskError> {
        postcard::to_allocvec(value).map_err(|e| wit_error(crate::encode_error("encode", "a task output", e)))
    }

    fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, wit::TaskError> {
        postcard::from_bytes(bytes).map_err(|e| wit_error(crate::encode_error("decode", "a task output", e)))
    }

    fn wit_error(e: Error) -> wit::TaskError {
        wit::TaskError { message: e.message, retryable: e.retryable }
    }

    pub fn run<F: Fold>(input: wit::Partition) -> Result<Vec<u8>, wit::TaskError> {
        encode(&F::run(input.into()).map_err(wit_error)?)
    }

    pub fn add<J: Combine>(acc: &mut J::Output, input: wit::Partition) -> Result<(), wit::TaskError> {
        J::add(acc, input.into()).map_err(wit_error)
    }

    /// The running value (an empty one if nothing was added), encoded as an output.
    pub fn take<J: Combine>(value: Option<J::Output>) -> Result<Vec<u8>, wit::TaskError> {
        encode(&value.unwrap_or_else(J::empty))
    }

    /// A fold's value, decoded, between the host's calls. Empty only after a failed
    /// merge, when the host drops the instance.
    pub struct Accumulator<F: Fold>(RefCell<Option<F::Value>>);

    impl<F: Fold> Accumulator<F> {
        pub fn load(output: &[u8]) -> Result<Self, wit::TaskError> {
            Ok(Accumulator(RefCell::new(Some(decode(output)?))))
        }

        fn take(&self) -> Result<F::Value, wit::TaskError> {
            self.0
                .borrow_mut()
                .take()
                .ok_or_else(|| wit_error(Error::fatal("accumulator used after a failed merge")))
        }

        pub fn absorb(&self, right: Self) -> Result<(), wit::TaskError> {
            let (left, right) = (self.take()?, right.take()?);
            *self.0.borrow_mut() = Some(F::merge(left, right).map_err(wit_error)?);
            Ok(())
        }

        pub fn encode(&self) -> Result<Vec<u8>, wit::TaskError> {
            match &*self.0.borrow() {
                Some(value) => encode(value),
                None => Err(wit_error(Error::fatal("accumulator used after a failed merge"))),
            }
        }

        pub fn finish(&self) -> Result<Vec<u8>, wit::TaskError> {
            F::finish(self.take()?).map_err(wit_error)
        }
    }
}

/// Exports a job that implements [`Aggregate`] as a component of the `aggregate`
/// world, once per crate (see [`Aggregate`] for a whole job).
///
/// ```
/// use flint_guest::{Aggregate, Error, Partition, Task};
/// struct Count;
/// impl Task for Count {
///     type Output = u64;
///     fn run(_: Partition) -> Result<u64, Error> { Ok(1) }
/// }
/// impl Aggregate for Count {
///     type Result = u64;
///     fn merge(a: u64, b: u64) -> Result<u64, Error> { Ok(a + b) }
///     fn finish(n: u64) -> Result<u64, Error> { Ok(n) }
/// }
/// flint_guest::export_aggregate!(Count);
/// ```
#[macro_export]
macro_rules! export_aggregate {
    ($job:ty) => {
        $crate::__export_glue!($crate::__private::AggregateOf<$job>);
    };
}

/// Exports a job that implements [`Combine`]: an `aggregate` component that also
/// exports `combiner`, so that the host combines it where it runs (see [`Combine`]
/// for a whole job). Once per crate, instead of [`export_aggregate!`].
///
/// ```
/// use flint_guest::{Aggregate, Combine, Error, Partition, Task};
/// struct Count;
/// impl Task for Count {
///     type Output = u64;
///     fn run(_: Partition) -> Result<u64, Error> { Ok(1) }
/// }
/// impl Aggregate for Count {
///     type Result = u64;
///     fn merge(a: u64, b: u64) -> Result<u64, Error> { Ok(a + b) }
///     fn finish(n: u64) -> Result<u64, Error> { Ok(n) }
/// }
/// impl Combine for Count {
///     fn empty() -> u64 { 0 }
/// }
/// flint_guest::export_combine!(Count);
/// ```
#[macro_export]
macro_rules! export_combine {
    ($job:ty) => {
        $crate::__export_glue!($crate::__private::AggregateOf<$job>);
        // The component's exports: in a component only (a native build, for tests,
        // keeps the glue, type-checked, without the symbols).
        #[cfg(target_arch = "wasm32")]
        $crate::combine_bindings::__flint_export_combine!(__FlintJob with_types_in $crate::combine_bindings);
        const _: () = {
            use $crate::combine_bindings::exports::flint::task::combiner;
            use $crate::bindings::flint::task::types::{Partition, TaskError};
            ::std::thread_local! {
                /// The running value of the partitions added to this instance.
                static RUNNING: ::std::cell::RefCell<Option<<$job as $crate::Task>::Output>> =
                    const { ::std::cell::RefCell::new(None) };
            }
            impl combiner::Guest for __FlintJob {
                fn add(input: Partition) -> Result<(), TaskError> {
                    RUNNING.with(|running| {
                        let mut running = running.borrow_mut();
                        let acc = running.get_or_insert_with(<$job as $crate::Combine>::empty);
                        $crate::__private::add::<$job>(acc, input)
                    })
                }
                fn take() -> Result<Vec<u8>, TaskError> {
                    let value = RUNNING.with(|running| running.borrow_mut().take());
                    $crate::__private::take::<$job>(value)
                }
            }
        };
    };
}

/// Exports a job that implements [`MapReduce`] as a component of the `map-reduce`
/// world, once per crate (see [`MapReduce`] for a whole job).
///
/// ```
/// use flint_guest::{Emitter, Error, MapReduce, Partition, Values};
/// struct Lengths;
/// impl MapReduce for Lengths {
///     type Key = u64;
///     type Value = u64;
///     type Output = u64;
///     type Result = u64;
///     fn map(input: Partition, out: &mut Emitter<Self>) -> Result<(), Error> {
///         input.lines()?.for_each_line(|line| out.emit(&(line.len() as u64), 1))
///     }
///     fn empty() -> u64 { 0 }
///     fn reduce(_: u64, _: &mut Values<'_, u64>, distinct: &mut u64) -> Result<(), Error> {
///         *distinct += 1;
///         Ok(())
///     }
///     fn merge(a: u64, b: u64) -> Result<u64, Error> { Ok(a + b) }
///     fn finish(n: u64) -> Result<u64, Error> { Ok(n) }
/// }
/// flint_guest::export_map_reduce!(Lengths);
/// ```
#[macro_export]
macro_rules! export_map_reduce {
    ($job:ty) => {
        $crate::__export_glue!($crate::__private::MapReduceOf<$job>);
        // The component's exports: in a component only (a native build, for tests,
        // keeps the glue, type-checked, without the symbols).
        #[cfg(target_arch = "wasm32")]
        $crate::map_reduce_bindings::__flint_export_map_reduce!(__FlintJob with_types_in $crate::map_reduce_bindings);
        const _: () = {
            use $crate::bindings::flint::task::types::{Partition, TaskError};
            use $crate::map_reduce_bindings::exports::flint::task::{map_combiner, map_reduce_job};
            use $crate::map_reduce_bindings::flint::task::shuffle::{Emitter, PartWriter, SortedInput};
            impl map_combiner::Guest for __FlintJob {
                fn combine_sorted(batch: Vec<u8>) -> Result<Option<Vec<u8>>, TaskError> {
                    $crate::__private::combine_sorted::<$job>(batch)
                }
            }
            impl map_reduce_job::Guest for __FlintJob {
                fn map(input: Partition, out: &Emitter) -> Result<(), TaskError> {
                    $crate::__private::map::<$job>(input, out)
                }
                fn reduce(
                    partition: u32,
                    input: &SortedInput,
                    part: Option<&PartWriter>,
                ) -> Result<Vec<u8>, TaskError> {
                    $crate::__private::reduce::<$job>(partition, input, part)
                }
            }
        };
    };
}

/// Exports a job that implements only [`Task`] as a component of the `task` world: its
/// result is the list of task outputs (see [`Task`] for a whole job).
///
/// ```
/// use flint_guest::{Error, Partition, Task};
/// struct Index;
/// impl Task for Index {
///     type Output = u32;
///     fn run(input: Partition) -> Result<u32, Error> {
///         Ok(match input { Partition::Index(i) => i, _ => 0 })
///     }
/// }
/// flint_guest::export_task!(Index);
/// ```
#[macro_export]
macro_rules! export_task {
    ($job:ty) => {
        $crate::__export_glue!($crate::__private::CollectOf<$job>);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __export_glue {
    ($fold:ty) => {
        #[doc(hidden)]
        pub struct __FlintJob;
        #[doc(hidden)]
        pub struct __FlintAccumulator($crate::__private::Accumulator<$fold>);
        const _: () = {
            use $crate::bindings::exports::flint::task::{aggregator, job};
            use $crate::bindings::flint::task::types::{Partition, TaskError};
            impl job::Guest for __FlintJob {
                fn run(input: Partition) -> Result<Vec<u8>, TaskError> {
                    $crate::__private::run::<$fold>(input)
                }
            }
            impl aggregator::Guest for __FlintJob {
                type Accumulator = __FlintAccumulator;
            }
            impl aggregator::GuestAccumulator for __FlintAccumulator {
                fn load(output: Vec<u8>) -> Result<aggregator::Accumulator, TaskError> {
                    let inner = $crate::__private::Accumulator::<$fold>::load(&output)?;
                    Ok(aggregator::Accumulator::new(__FlintAccumulator(inner)))
                }
                fn absorb(&self, right: aggregator::Accumulator) -> Result<(), TaskError> {
                    self.0.absorb(right.into_inner::<__FlintAccumulator>().0)
                }
                fn encode(&self) -> Result<Vec<u8>, TaskError> {
                    self.0.encode()
                }
                fn finish(&self) -> Result<Vec<u8>, TaskError> {
                    self.0.finish()
                }
            }
        };
        // The component's exports: in a component only (a native build, for tests,
        // keeps the glue, type-checked, without the symbols).
        #[cfg(target_arch = "wasm32")]
        $crate::bindings::__flint_export_world!(__FlintJob with_types_in $crate::bindings);
    };
}
