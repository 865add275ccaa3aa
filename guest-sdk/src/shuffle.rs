//! Map/reduce jobs: typed records in, typed records out, the batches between them.
//!
//! A map task's records leave the guest in batches of the flat layout `flint:task/shuffle`
//! describes (one host call per batch, never one per record); a job that combines
//! (`MapReduce::COMBINE`) folds the values of each key in a table first, as Spark's
//! `reduceByKey` does on the map side. A reduce task pulls its records back in batches
//! and sees each key once, with its values as an iterator.

use crate::map_reduce_bindings::flint::task::shuffle::{Emitter as WitEmitter, PartWriter, SortedInput};
use crate::{Error, Partition};
use rustc_hash::FxHashMap;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The layout's record header: partition, key length, value length (u32 LE each).
const HEADER: usize = 12;
/// A batch is sent once it holds this many bytes.
const BATCH: usize = 1 << 20;
/// A combining table is emitted once it holds this many keys (and at the task's end).
const COMBINE_KEYS: usize = 1 << 17;
/// What one reduce read asks for.
const READ: u32 = 1 << 20;

/// The partition a key goes to unless the job says otherwise: FNV-1a (64-bit) of the
/// key's encoded bytes, modulo the partition count. Fixed: the same on every host and
/// in every release, so a job's partitions never move under it.
///
/// ```
/// assert_eq!(flint_guest::stable_hash(b""), 0xcbf2_9ce4_8422_2325);
/// assert_eq!(flint_guest::stable_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
/// ```
pub fn stable_hash(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// A map/reduce job, as Spark's `map(..).reduceByKey(..)` or `groupByKey`: `map` emits
/// `(key, value)` records for each input partition, the host moves them by key to
/// `--reduce-partitions` reduce tasks, and `reduce` sees each key of its partition once,
/// in order of the key's encoded bytes, with all its values. Each reduce task starts
/// from [`MapReduce::empty`]; their outputs fold into the job's result with `merge` (in
/// partition order: associative suffices) and `finish`.
///
/// Keys and values travel in postcard, so their types must not need a self-describing
/// format. Keys are ordered by their encoded bytes: fixed-size integers and byte arrays
/// keep their order big-endian (`u64::to_be_bytes`), strings are ordered by length
/// first. Exported with [`crate::export_map_reduce!`].
///
/// ```
/// use flint_guest::{Emitter, Error, MapReduce, Partition, Values};
///
/// /// Words by their first letter: how many start with each.
/// struct Initials;
/// impl MapReduce for Initials {
///     type Key = char;
///     type Value = u64;
///     type Output = Vec<(char, u64)>;
///     type Result = Vec<(char, u64)>;
///     const COMBINE: bool = true;
///
///     fn map(input: Partition, out: &mut Emitter<Self>) -> Result<(), Error> {
///         input.lines()?.for_each_line(|line| {
///             for word in String::from_utf8_lossy(line).split_whitespace() {
///                 out.emit(&word.chars().next().unwrap_or(' '), 1)?;
///             }
///             Ok(())
///         })
///     }
///     fn combine(acc: &mut u64, n: u64) -> Result<(), Error> {
///         *acc += n;
///         Ok(())
///     }
///     fn empty() -> Vec<(char, u64)> {
///         Vec::new()
///     }
///     fn reduce(initial: char, counts: &mut Values<'_, u64>, out: &mut Vec<(char, u64)>) -> Result<(), Error> {
///         out.push((initial, counts.sum()));
///         Ok(())
///     }
///     fn merge(mut a: Vec<(char, u64)>, b: Vec<(char, u64)>) -> Result<Vec<(char, u64)>, Error> {
///         a.extend(b);
///         Ok(a)
///     }
///     fn finish(mut all: Vec<(char, u64)>) -> Result<Vec<(char, u64)>, Error> {
///         all.sort();
///         Ok(all)
///     }
/// }
/// flint_guest::export_map_reduce!(Initials);
///
/// # use flint_guest::testing::{Input, Local};
/// let run = Local::new().map_reduce::<Initials>([Input::text("apple bee\nant\n")], 2).unwrap();
/// assert_eq!(run.result, serde_json::json!([["a", 2], ["b", 1]]));
/// ```
pub trait MapReduce: 'static {
    /// Hashed and compared as itself in the map-side combining table (so a key seen
    /// before costs one hash and one compare, never an encoding).
    type Key: Serialize + DeserializeOwned + std::hash::Hash + Eq;
    /// What a record carries beside its key.
    type Value: Serialize + DeserializeOwned;
    /// What one reduce task produces; folded into the job's result.
    type Output: Serialize + DeserializeOwned;
    /// The job's result.
    type Result: Serialize;

    /// Whether `combine` folds a key's values on the map side (`reduceByKey`): set it
    /// to `true` when combining is commutative and associative.
    const COMBINE: bool = false;

    /// Emits the records of one input partition.
    fn map(input: Partition, out: &mut Emitter<Self>) -> Result<(), Error>
    where
        Self: Sized;

    /// Folds `value` into `acc`, both values of one key (used when `COMBINE` is set).
    fn combine(_acc: &mut Self::Value, _value: Self::Value) -> Result<(), Error> {
        Err(Error::fatal("COMBINE is set but combine is not implemented"))
    }

    /// The reduce partition of a key, given its encoded bytes: [`stable_hash`] modulo
    /// `partitions` unless the job knows better (a range partition for a total sort).
    /// Must be below `partitions`.
    fn partition(encoded: &[u8], partitions: u32) -> u32 {
        (stable_hash(encoded) % u64::from(partitions)) as u32
    }

    /// A reduce task's output before any key.
    fn empty() -> Self::Output;

    /// Adds one key and all its values to the reduce task's output.
    fn reduce(
        key: Self::Key,
        values: &mut Values<'_, Self::Value>,
        out: &mut Self::Output,
    ) -> Result<(), Error>;

    /// Joins two reduce outputs (of adjacent partitions, left before right).
    fn merge(a: Self::Output, b: Self::Output) -> Result<Self::Output, Error>;

    /// The job's result from the folded outputs.
    fn finish(acc: Self::Output) -> Result<Self::Result, Error>;
}

/// Where a map task's batches go.
enum Sink<'a> {
    /// The host, through the contract.
    Host(&'a WitEmitter),
    /// Memory, in a native test.
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    Memory(Vec<Vec<u8>>),
}

/// Where a map task's records go: [`MapReduce::map`] emits each with
/// [`Emitter::emit`]; they leave the task in batches.
pub struct Emitter<'a, J: MapReduce> {
    out: Sink<'a>,
    partitions: u32,
    batch: Vec<u8>,
    key: Vec<u8>,
    /// For a combining job: values by key, each with its partition.
    table: FxHashMap<J::Key, (u32, J::Value)>,
}

impl<J: MapReduce> Emitter<'_, J> {
    /// The job's reduce partitions (`--reduce-partitions`).
    ///
    /// ```
    /// # use flint_guest::{Emitter, Error, MapReduce, Partition, Values};
    /// # struct Spread;
    /// # impl MapReduce for Spread {
    /// #     type Key = u32; type Value = u32; type Output = u32; type Result = u32;
    /// fn map(_: Partition, out: &mut Emitter<Self>) -> Result<(), Error> {
    ///     // One record for each reduce partition.
    ///     for p in 0..out.partitions() {
    ///         out.emit(&p, 1)?;
    ///     }
    ///     Ok(())
    /// }
    /// #     fn empty() -> u32 { 0 }
    /// #     fn reduce(_: u32, v: &mut Values<'_, u32>, out: &mut u32) -> Result<(), Error> { *out += v.sum::<u32>(); Ok(()) }
    /// #     fn merge(a: u32, b: u32) -> Result<u32, Error> { Ok(a + b) }
    /// #     fn finish(n: u32) -> Result<u32, Error> { Ok(n) }
    /// # }
    /// # use flint_guest::testing::{Input, Local};
    /// # assert_eq!(Local::new().map_reduce::<Spread>([Input::Generated], 3).unwrap().result, 3);
    /// ```
    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    /// Emits one record (sent in batches). The key may be given borrowed (`&str` for a
    /// `String` key): borrowed forms encode, hash and compare as their owners do.
    ///
    /// ```
    /// # use flint_guest::{Emitter, Error, MapReduce, Partition, Values};
    /// # struct Words;
    /// # impl MapReduce for Words {
    /// #     type Key = String; type Value = u64; type Output = u64; type Result = u64;
    /// fn map(input: Partition, out: &mut Emitter<Self>) -> Result<(), Error> {
    ///     input.lines()?.for_each_line(|line| {
    ///         let line = String::from_utf8_lossy(line);
    ///         line.split_whitespace().try_for_each(|word| out.emit(word, 1))
    ///     })
    /// }
    /// #     fn empty() -> u64 { 0 }
    /// #     fn reduce(_: String, v: &mut Values<'_, u64>, out: &mut u64) -> Result<(), Error> { *out += v.sum::<u64>(); Ok(()) }
    /// #     fn merge(a: u64, b: u64) -> Result<u64, Error> { Ok(a + b) }
    /// #     fn finish(n: u64) -> Result<u64, Error> { Ok(n) }
    /// # }
    /// # use flint_guest::testing::{Input, Local};
    /// # assert_eq!(Local::new().map_reduce::<Words>([Input::text("a b a\n")], 2).unwrap().result, 3);
    /// ```
    pub fn emit<Q>(&mut self, key: &Q, value: J::Value) -> Result<(), Error>
    where
        Q: Serialize + std::hash::Hash + Eq + ToOwned<Owned = J::Key> + ?Sized,
        J::Key: std::borrow::Borrow<Q>,
    {
        // A key already in the combining table has its partition: nothing to encode.
        if J::COMBINE
            && let Some((_, acc)) = self.table.get_mut(key)
        {
            return J::combine(acc, value);
        }
        self.key.clear();
        let key_bytes = postcard::to_extend(key, std::mem::take(&mut self.key))
            .map_err(|e| Error::fatal(format!("cannot encode a key: {e}")))?;
        self.key = key_bytes;
        let partition = J::partition(&self.key, self.partitions);
        if partition >= self.partitions {
            return Err(Error::fatal(format!(
                "partition() gave {partition} for a job of {} reduce partitions",
                self.partitions
            )));
        }
        if J::COMBINE {
            self.table.insert(key.to_owned(), (partition, value));
            if self.table.len() >= COMBINE_KEYS {
                self.drain_table()?;
            }
            return Ok(());
        }
        let key = std::mem::take(&mut self.key);
        let result = self.push(partition, &key, &value);
        self.key = key;
        result
    }

    fn push(&mut self, partition: u32, key: &[u8], value: &J::Value) -> Result<(), Error> {
        push_record(&mut self.batch, partition, key, value)?;
        if self.batch.len() >= BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn drain_table(&mut self) -> Result<(), Error> {
        // Drained, not replaced: the table keeps its room for the next keys.
        let mut table = std::mem::take(&mut self.table);
        let mut encoded = std::mem::take(&mut self.key);
        for (key, (partition, value)) in table.drain() {
            encoded.clear();
            encoded = postcard::to_extend(&key, encoded)
                .map_err(|e| Error::fatal(format!("cannot encode a key: {e}")))?;
            self.push(partition, &encoded, &value)?;
        }
        self.key = encoded;
        self.table = table;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Error> {
        if !self.batch.is_empty() {
            match &mut self.out {
                Sink::Host(out) => out.emit(&self.batch).map_err(Error::from_wit)?,
                Sink::Memory(batches) => batches.push(self.batch.clone()),
            }
            self.batch.clear();
        }
        Ok(())
    }
}

/// Appends one record in the flat layout: header, key, the value encoded.
fn push_record<V: Serialize>(
    batch: &mut Vec<u8>,
    partition: u32,
    key: &[u8],
    value: &V,
) -> Result<(), Error> {
    let start = batch.len();
    batch.extend_from_slice(&partition.to_le_bytes());
    batch.extend_from_slice(&(key.len() as u32).to_le_bytes());
    batch.extend_from_slice(&[0; 4]);
    batch.extend_from_slice(key);
    let before = batch.len();
    *batch = postcard::to_extend(value, std::mem::take(batch))
        .map_err(|e| crate::encode_error("encode", "a value", e))?;
    let value_len = (batch.len() - before) as u32;
    batch[start + 8..start + 12].copy_from_slice(&value_len.to_le_bytes());
    Ok(())
}

/// A record of a flat batch: partition, key, value, and where the next begins.
type Flat<'a> = (u32, &'a [u8], &'a [u8], usize);

/// The record at `at` of a flat batch.
fn record_at(batch: &[u8], at: usize) -> Result<Flat<'_>, Error> {
    let field =
        |i: usize| batch.get(at + i..at + i + 4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")));
    let (Some(partition), Some(klen), Some(vlen)) = (field(0), field(4), field(8)) else {
        return Err(Error::fatal("the host sent a cut record"));
    };
    let key_at = at + HEADER;
    let value_at = key_at + klen as usize;
    let end = value_at + vlen as usize;
    if end > batch.len() {
        return Err(Error::fatal("the host sent a cut record"));
    }
    Ok((partition, &batch[key_at..value_at], &batch[value_at..end], end))
}

fn decode<V: DeserializeOwned>(bytes: &[u8]) -> Result<V, Error> {
    postcard::from_bytes(bytes).map_err(|e| crate::encode_error("decode", "a value", e))
}

/// The host's `combine-sorted`: `batch`'s records (sorted by key) with each run of one
/// key folded by [`MapReduce::combine`] into one record, a lone record left as it is;
/// `None` for a job that does not combine.
pub(crate) fn combine_sorted<J: MapReduce>(batch: &[u8]) -> Result<Option<Vec<u8>>, Error> {
    if !J::COMBINE {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(batch.len());
    let mut at = 0;
    while at < batch.len() {
        let (partition, key, value, end) = record_at(batch, at)?;
        let mut next = end;
        let mut acc: Option<J::Value> = None;
        while next < batch.len() {
            let (p, k, v, e) = record_at(batch, next)?;
            if (p, k) != (partition, key) {
                break;
            }
            let acc = match &mut acc {
                Some(acc) => acc,
                None => acc.insert(decode(value)?),
            };
            J::combine(acc, decode(v)?)?;
            next = e;
        }
        match acc {
            None => out.extend_from_slice(&batch[at..end]),
            Some(value) => push_record(&mut out, partition, key, &value)?,
        }
        at = next;
    }
    Ok(Some(out))
}

pub(crate) fn run_map<J: MapReduce>(input: Partition, out: &WitEmitter) -> Result<(), Error> {
    map_into::<J>(input, Sink::Host(out), out.partitions()).map(drop)
}

/// Runs `map` over `input` into `out`; returns the sink, with what it holds.
fn map_into<'a, J: MapReduce>(input: Partition, out: Sink<'a>, partitions: u32) -> Result<Sink<'a>, Error> {
    let mut emitter =
        Emitter::<J> { out, partitions, batch: Vec::new(), key: Vec::new(), table: FxHashMap::default() };
    J::map(input, &mut emitter)?;
    emitter.drain_table()?;
    emitter.flush()?;
    Ok(emitter.out)
}

/// A map task in a native test: its batches of records, as the host would receive them.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn map_in_memory<J: MapReduce>(input: Partition, partitions: u32) -> Result<Vec<Vec<u8>>, Error> {
    match map_into::<J>(input, Sink::Memory(Vec::new()), partitions)? {
        Sink::Memory(batches) => Ok(batches),
        Sink::Host(_) => unreachable!("memory in, memory out"),
    }
}

/// A record's partition, key and value, as encoded.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) type Keyed<'a> = (u32, &'a [u8], &'a [u8]);

/// A flat batch's records.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn records(batch: &[u8]) -> Result<Vec<Keyed<'_>>, Error> {
    let (mut at, mut out) = (0, Vec::new());
    while at < batch.len() {
        let (partition, key, value, end) = record_at(batch, at)?;
        out.push((partition, key, value));
        at = end;
    }
    Ok(out)
}

/// One partition's records, encoded, as one flat batch.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn flat(partition: u32, records: &[(Vec<u8>, Vec<u8>)]) -> Result<Vec<u8>, Error> {
    let mut batch = Vec::new();
    for (key, value) in records {
        batch.extend_from_slice(&partition.to_le_bytes());
        batch.extend_from_slice(&(key.len() as u32).to_le_bytes());
        batch.extend_from_slice(&(value.len() as u32).to_le_bytes());
        batch.extend_from_slice(key);
        batch.extend_from_slice(value);
    }
    Ok(batch)
}

/// A reduce task in a native test over its sorted records (one flat batch), with its
/// part when `parts` (as `--output` would ask for).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn reduce_in_memory<J: MapReduce>(
    sorted: Vec<u8>,
    parts: bool,
) -> Result<(J::Output, Option<Vec<u8>>), Error> {
    PART.with(|p| *p.borrow_mut() = parts.then(Vec::new));
    let mut reader = Reader { input: Sorted::Memory(Some(sorted)), batch: Vec::new(), at: 0, ended: false };
    let result = reduce_keys::<J>(&mut reader, None);
    let part = PART.with(|p| p.borrow_mut().take());
    Ok((result?, part))
}

/// A record's key and value, as encoded.
type Record<'a> = (&'a [u8], &'a [u8]);

/// Where a reduce task's sorted records come from.
enum Sorted<'a> {
    /// The host, through the contract.
    Host(&'a SortedInput),
    /// Memory, in a native test: all of them, until read.
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    Memory(Option<Vec<u8>>),
}

/// A reduce task's records, read a batch at a time.
struct Reader<'a> {
    input: Sorted<'a>,
    batch: Vec<u8>,
    at: usize,
    ended: bool,
}

impl Reader<'_> {
    /// The next record's key and value, without moving past it.
    fn peek(&mut self) -> Result<Option<Record<'_>>, Error> {
        if self.at >= self.batch.len() {
            if self.ended {
                return Ok(None);
            }
            self.batch = match &mut self.input {
                Sorted::Host(input) => input.next(READ).map_err(Error::from_wit)?,
                Sorted::Memory(rest) => rest.take().unwrap_or_default(),
            };
            self.at = 0;
            if self.batch.is_empty() {
                self.ended = true;
                return Ok(None);
            }
        }
        let (_, key, value, _) = record_at(&self.batch, self.at)?;
        Ok(Some((key, value)))
    }

    /// Past the record `peek` gave.
    fn advance(&mut self) {
        self.at = record_at(&self.batch, self.at).map_or(self.batch.len(), |(.., end)| end);
    }
}

/// Records read in order: what [`Values`] walks.
trait Records {
    fn peek(&mut self) -> Result<Option<Record<'_>>, Error>;
    fn advance(&mut self);
}

impl Records for Reader<'_> {
    fn peek(&mut self) -> Result<Option<Record<'_>>, Error> {
        Reader::peek(self)
    }
    fn advance(&mut self) {
        Reader::advance(self)
    }
}

/// The values of one key, pulled from the host as the reduce reads them: an iterator,
/// each value decoded as it is reached. Values the reduce leaves unread are skipped.
///
/// ```
/// # use flint_guest::{Emitter, Error, MapReduce, Partition, Values};
/// # struct Max;
/// # impl MapReduce for Max {
/// #     type Key = u8; type Value = u64; type Output = u64; type Result = u64;
/// #     fn map(_: Partition, out: &mut Emitter<Self>) -> Result<(), Error> { out.emit(&0, 3)?; out.emit(&0, 9) }
/// #     fn empty() -> u64 { 0 }
/// fn reduce(_: u8, values: &mut Values<'_, u64>, out: &mut u64) -> Result<(), Error> {
///     *out = values.max().unwrap_or(0).max(*out);
///     Ok(())
/// }
/// #     fn merge(a: u64, b: u64) -> Result<u64, Error> { Ok(a.max(b)) }
/// #     fn finish(n: u64) -> Result<u64, Error> { Ok(n) }
/// # }
/// # use flint_guest::testing::{Input, Local};
/// # assert_eq!(Local::new().map_reduce::<Max>([Input::Generated], 1).unwrap().result, 9);
/// ```
pub struct Values<'a, V> {
    reader: &'a mut dyn Records,
    key: &'a [u8],
    error: Option<Error>,
    _value: std::marker::PhantomData<V>,
}

impl<V: DeserializeOwned> Iterator for Values<'_, V> {
    type Item = V;

    fn next(&mut self) -> Option<V> {
        if self.error.is_some() {
            return None;
        }
        let value = match self.reader.peek() {
            Ok(Some((key, value))) if key == self.key => {
                postcard::from_bytes(value).map_err(|e| Error::fatal(format!("cannot decode a value: {e}")))
            }
            Ok(_) => return None,
            Err(e) => Err(e),
        };
        match value {
            Ok(value) => {
                self.reader.advance();
                Some(value)
            }
            Err(e) => {
                self.error = Some(e);
                None
            }
        }
    }
}

pub(crate) fn run_reduce<J: MapReduce>(
    _partition: u32,
    input: &SortedInput,
    part: Option<&PartWriter>,
) -> Result<J::Output, Error> {
    PART.with(|p| *p.borrow_mut() = part.map(|_| Vec::new()));
    let mut reader = Reader { input: Sorted::Host(input), batch: Vec::new(), at: 0, ended: false };
    let result = reduce_keys::<J>(&mut reader, part);
    let rest = PART.with(|p| p.borrow_mut().take());
    let out = result?;
    if let (Some(writer), Some(rest)) = (part, rest) {
        flush(writer, rest)?;
    }
    Ok(out)
}

/// What a reduce task's part file holds before it goes to the host.
const PART_BUFFER: usize = 1 << 20;

thread_local! {
    /// The running reduce task's part file, not yet written; `None` when the job
    /// writes none.
    static PART: std::cell::RefCell<Option<Vec<u8>>> = const { std::cell::RefCell::new(None) };
}

fn flush(writer: &PartWriter, bytes: Vec<u8>) -> Result<(), Error> {
    if bytes.is_empty() { Ok(()) } else { writer.write(&bytes).map_err(Error::from_wit) }
}

/// A reduce task's part, when the job was given an output directory (`--output DIR`)
/// or collects its parts (`--collect`): what `reduce` writes here becomes
/// `DIR/part-NNNNN` once its task succeeds, or comes back to the submitter with the
/// other parts in partition order (Spark's `saveAsTextFile` and `collect`).
///
/// ```
/// # use flint_guest::{Emitter, Error, MapReduce, Partition, Values, part};
/// # struct Lines;
/// # impl MapReduce for Lines {
/// #     type Key = String; type Value = u64; type Output = u64; type Result = u64;
/// #     fn map(input: Partition, out: &mut Emitter<Self>) -> Result<(), Error> {
/// #         input.lines()?.for_each_line(|l| out.emit(String::from_utf8_lossy(l).as_ref(), 1))
/// #     }
/// #     fn empty() -> u64 { 0 }
/// fn reduce(line: String, counts: &mut Values<'_, u64>, out: &mut u64) -> Result<(), Error> {
///     let n: u64 = counts.sum();
///     if part::wanted() {
///         part::line(format_args!("{line}\t{n}"))?;
///     }
///     *out += 1;
///     Ok(())
/// }
/// #     fn merge(a: u64, b: u64) -> Result<u64, Error> { Ok(a + b) }
/// #     fn finish(n: u64) -> Result<u64, Error> { Ok(n) }
/// # }
/// # use flint_guest::testing::{Input, Local};
/// # let run = Local::new().with_parts().map_reduce::<Lines>([Input::text("x\nx\n")], 1).unwrap();
/// # assert_eq!(run.parts, vec![b"x\t2\n".to_vec()]);
/// ```
pub mod part {
    use super::PART;
    use crate::Error;

    const NO_PART: &str = "no part to write: a job writes one only with --output DIR or --collect";

    /// Whether this task writes a part: in `reduce`, when the job was given `--output
    /// DIR` or `--collect`.
    pub fn wanted() -> bool {
        PART.with(|p| p.borrow().is_some())
    }

    /// Appends `bytes` to this reduce task's part.
    pub fn write(bytes: &[u8]) -> Result<(), Error> {
        PART.with(|p| match p.borrow_mut().as_mut() {
            Some(part) => {
                part.extend_from_slice(bytes);
                Ok(())
            }
            None => Err(Error::fatal(NO_PART)),
        })
    }

    /// Appends `line` and a newline to this reduce task's part.
    pub fn line(line: impl std::fmt::Display) -> Result<(), Error> {
        use std::io::Write;
        PART.with(|p| match p.borrow_mut().as_mut() {
            Some(part) => writeln!(part, "{line}").map_err(|e| Error::fatal(e.to_string())),
            None => Err(Error::fatal(NO_PART)),
        })
    }
}

fn reduce_keys<J: MapReduce>(reader: &mut Reader<'_>, part: Option<&PartWriter>) -> Result<J::Output, Error> {
    let mut out = J::empty();
    loop {
        if let Some(writer) = part {
            let full = PART.with(|p| {
                let mut p = p.borrow_mut();
                p.as_mut().filter(|b| b.len() >= PART_BUFFER).map(std::mem::take)
            });
            if let Some(full) = full {
                flush(writer, full)?;
            }
        }
        let key_bytes = match reader.peek()? {
            Some((key, _)) => key.to_vec(),
            None => return Ok(out),
        };
        let key: J::Key = postcard::from_bytes(&key_bytes)
            .map_err(|e| Error::fatal(format!("cannot decode a key: {e}")))?;
        // The iterator borrows the reader for this key only; whatever values the
        // reduce left unread are skipped after it.
        let error = {
            let mut values = Values::<J::Value> {
                reader: &mut *reader,
                key: &key_bytes,
                error: None,
                _value: std::marker::PhantomData,
            };
            let result = J::reduce(key, &mut values, &mut out);
            result.err().or(values.error)
        };
        if let Some(e) = error {
            return Err(e);
        }
        while let Some((key, _)) = reader.peek()? {
            if key != key_bytes.as_slice() {
                break;
            }
            reader.advance();
        }
    }
}
