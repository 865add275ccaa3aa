//! One task of a program's stage, in the guest: its records read (a source partition,
//! or its partition of the shuffles the stage reads, grouped by key as the dependency
//! says), passed through the stage's steps one by one, and written (a shuffle, keyed
//! and combined as the next dependency says, or framed back to the driver).

use super::functions::{Entry, Out, Registry};
use super::records::{self, Rec};
use crate::{Error, Partition};
use rustc_hash::{FxHashMap, FxHashSet};
use std::any::Any;

/// A narrow step as the plan names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Step {
    pub kind: String,
    pub function: String,
    pub capture: Vec<u8>,
}

/// A wide dependency as the plan names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dep {
    pub kind: String,
    pub function: String,
    pub capture: Vec<u8>,
    pub partitions: u32,
}

/// A stage as its tasks run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub reads: Option<Dep>,
    pub steps: Vec<Step>,
    pub writes: Option<Dep>,
}

/// The dependency kinds, as plans name them.
#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
pub(crate) const KINDS: [&str; 8] = [
    "reduce-by-key",
    "group-by-key",
    "join",
    "left-outer-join",
    "cogroup",
    "distinct",
    "repartition",
    "sort-by-key",
];

/// The flat layout's record header: partition (here, which parent), key and value
/// lengths, u32 LE each.
const HEADER: usize = 12;
/// What a task hands the host at a time.
const BATCH: usize = 1 << 20;
/// The most keys a map-side combining table holds before it is written out.
const TABLE: usize = 1 << 17;

/// Where a task's shuffle records go: the host's emitter, or memory in a native test.
pub(crate) trait Batches {
    fn emit(&mut self, batch: &[u8]) -> Result<(), Error>;
}

/// Where a task's sorted records come from.
pub(crate) trait Sorted {
    /// The next batch of whole records; empty at the end.
    fn next(&mut self) -> Result<Vec<u8>, Error>;
}

/// A step of the chain, as it runs.
pub(crate) trait Op {
    fn push(&mut self, record: Rec, out: Out<'_>) -> Result<(), Error>;
    /// After the last record: what the step held back (a count, the partition's top).
    fn finish(&mut self, _out: Out<'_>) -> Result<(), Error> {
        Ok(())
    }
}

/// Runs a task over a source partition.
pub(crate) fn run_source(
    registry: &Registry,
    plan: &Plan,
    task: u32,
    input: Partition,
    out: Option<&mut dyn Batches>,
) -> Result<Vec<u8>, Error> {
    let mut chain = Chain::new(registry, plan, task, out)?;
    match input {
        Partition::Lines(mut split) => {
            split.for_each_line(|line| chain.push(Rec::typed(String::from_utf8_lossy(line).into_owned())))?
        }
        Partition::Value(bytes) => {
            for record in records::unframe(&bytes)? {
                chain.push(tagged(record)?)?;
            }
        }
        Partition::Index(index) => chain.push(Rec::typed(index))?,
    }
    chain.finish()
}

/// Runs a task over its partition of the shuffles its stage reads.
pub(crate) fn run_shuffled(
    registry: &Registry,
    plan: &Plan,
    task: u32,
    input: &mut dyn Sorted,
    out: Option<&mut dyn Batches>,
) -> Result<Vec<u8>, Error> {
    let Some(reads) = &plan.reads else {
        return Err(Error::fatal("a stage over a source was given a shuffle"));
    };
    let mut chain = Chain::new(registry, plan, task, out)?;
    let reducer = match reads.kind.as_str() {
        "reduce-by-key" => Some(registry.reducer(&reads.function)?),
        _ => None,
    };
    let mut descending = false;
    if reads.kind == "sort-by-key" {
        descending = !records::decode::<(bool, Vec<Vec<u8>>)>(&reads.capture)?.0;
    }
    let mut groups = Groups::new(input);
    while let Some((key, values)) = groups.next()? {
        match reads.kind.as_str() {
            "reduce-by-key" => {
                let reducer = reducer.as_ref().expect("made above");
                let mut acc: Option<Box<dyn Any>> = None;
                for (_, value) in values {
                    let value = (reducer.decode)(&value)?;
                    acc = Some(match acc {
                        None => value,
                        Some(acc) => (reducer.combine)(acc, value)?,
                    });
                }
                let mut bytes = key.clone();
                (reducer.encode)(&*acc.expect("a key has a value"), &mut bytes)?;
                chain.push(Rec::Pair(bytes, key.len()))?;
            }
            "group-by-key" => {
                let mut bytes = key.clone();
                push_seq(&mut bytes, values.iter().map(|(_, v)| v));
                chain.push(Rec::Pair(bytes, key.len()))?;
            }
            "join" | "left-outer-join" => {
                let (left, right): (Vec<_>, Vec<_>) = values.into_iter().partition(|(side, _)| *side == 0);
                for (_, v) in &left {
                    if right.is_empty() && reads.kind == "left-outer-join" {
                        let mut bytes = [&key[..], v, &[0]].concat();
                        bytes.shrink_to_fit();
                        chain.push(Rec::Pair(bytes, key.len()))?;
                    }
                    for (_, w) in &right {
                        let option: &[u8] = if reads.kind == "join" { &[] } else { &[1] };
                        chain.push(Rec::Pair([&key[..], v, option, w].concat(), key.len()))?;
                    }
                }
            }
            "cogroup" => {
                let mut bytes = key.clone();
                push_seq(&mut bytes, values.iter().filter(|(side, _)| *side == 0).map(|(_, v)| v));
                push_seq(&mut bytes, values.iter().filter(|(side, _)| *side == 1).map(|(_, v)| v));
                chain.push(Rec::Pair(bytes, key.len()))?;
            }
            "distinct" => {
                let (_, value) = values.into_iter().next().expect("a key has a value");
                chain.push(untag_split(key, &value)?)?;
            }
            "repartition" => {
                for (_, value) in values {
                    chain.push(tagged(&value)?)?;
                }
            }
            "sort-by-key" => {
                let key: Vec<u8> = if descending { key.iter().map(|b| !b).collect() } else { key };
                for (_, value) in values {
                    chain.push(Rec::Pair([&key[..], &value].concat(), key.len()))?;
                }
            }
            other => return Err(Error::fatal(format!("no dependency kind {other:?}"))),
        }
    }
    chain.finish()
}

/// A seq of already encoded elements, as memcomparable writes a `Vec`.
fn push_seq<'a>(out: &mut Vec<u8>, elements: impl Iterator<Item = &'a Vec<u8>>) {
    for element in elements {
        out.push(1);
        out.extend_from_slice(element);
    }
    out.push(0);
}

/// A record as a source or a repartition carries it: a tag (0 whole, 1 a pair whose
/// key ends at the u32 LE that follows), then its encoding.
pub(crate) fn tag(record: Rec) -> Result<Vec<u8>, Error> {
    Ok(match record {
        Rec::Typed(typed) => {
            let mut body = Vec::new();
            match typed.encode_pair(&mut body) {
                Ok(split) => [&[1], &(split as u32).to_le_bytes()[..], &body].concat(),
                Err(_) => {
                    let mut out = vec![0];
                    typed.encode(&mut out)?;
                    out
                }
            }
        }
        Rec::Pair(bytes, split) => [&[1], &(split as u32).to_le_bytes()[..], &bytes].concat(),
        Rec::Enc(bytes) => [&[0], &bytes[..]].concat(),
    })
}

fn tagged(bytes: &[u8]) -> Result<Rec, Error> {
    match bytes.split_first() {
        Some((0, rest)) => Ok(Rec::Enc(rest.to_vec())),
        Some((1, rest)) if rest.len() >= 4 => {
            let split = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
            let body = rest[4..].to_vec();
            if split > body.len() {
                return Err(Error::fatal("a record's key ends past it"));
            }
            Ok(Rec::Pair(body, split))
        }
        _ => Err(Error::fatal("a record of an unknown form")),
    }
}

/// A distinct record back from its key: a pair when the value says where its key ends.
fn untag_split(key: Vec<u8>, value: &[u8]) -> Result<Rec, Error> {
    match value.len() {
        0 => Ok(Rec::Enc(key)),
        4 => {
            let split = u32::from_le_bytes(value.try_into().expect("4 bytes")) as usize;
            if split > key.len() {
                return Err(Error::fatal("a record's key ends past it"));
            }
            Ok(Rec::Pair(key, split))
        }
        _ => Err(Error::fatal("a distinct record of an unknown form")),
    }
}

/// The records of one key at a time, with the parent each came from.
struct Groups<'a> {
    input: &'a mut dyn Sorted,
    batch: Vec<u8>,
    at: usize,
    ended: bool,
}

type Group = (Vec<u8>, Vec<(u32, Vec<u8>)>);

/// A record as the host sent it: the parent it came from, its key, its value.
type Flat<'a> = (u32, &'a [u8], &'a [u8]);

impl<'a> Groups<'a> {
    fn new(input: &'a mut dyn Sorted) -> Self {
        Groups { input, batch: Vec::new(), at: 0, ended: false }
    }

    /// The record at the read position: (parent, key, value).
    fn peek(&mut self) -> Result<Option<Flat<'_>>, Error> {
        if self.at >= self.batch.len() {
            if self.ended {
                return Ok(None);
            }
            self.batch = self.input.next()?;
            self.at = 0;
            if self.batch.is_empty() {
                self.ended = true;
                return Ok(None);
            }
        }
        let b = &self.batch;
        let field =
            |i: usize| b.get(self.at + i..self.at + i + 4).map(|f| u32::from_le_bytes(f.try_into().unwrap()));
        let (Some(side), Some(klen), Some(vlen)) = (field(0), field(4), field(8)) else {
            return Err(Error::fatal("the host sent a cut record"));
        };
        let key_at = self.at + HEADER;
        let value_at = key_at + klen as usize;
        let end = value_at + vlen as usize;
        if end > b.len() {
            return Err(Error::fatal("the host sent a cut record"));
        }
        Ok(Some((side, &b[key_at..value_at], &b[value_at..end])))
    }

    fn advance(&mut self) {
        let b = &self.batch;
        let len = |i: usize| u32::from_le_bytes(b[self.at + i..self.at + i + 4].try_into().unwrap()) as usize;
        self.at += HEADER + len(4) + len(8);
    }

    fn next(&mut self) -> Result<Option<Group>, Error> {
        let Some((side, key, value)) = self.peek()? else { return Ok(None) };
        let key = key.to_vec();
        let mut values = vec![(side, value.to_vec())];
        self.advance();
        while let Some((side, k, value)) = self.peek()? {
            if k != key.as_slice() {
                break;
            }
            values.push((side, value.to_vec()));
            self.advance();
        }
        Ok(Some((key, values)))
    }
}

/// A task's chain of steps and the sink at its end.
struct Chain<'a> {
    ops: Vec<Box<dyn Op>>,
    sink: Sink<'a>,
}

impl<'a> Chain<'a> {
    fn new(
        registry: &Registry,
        plan: &Plan,
        task: u32,
        out: Option<&'a mut dyn Batches>,
    ) -> Result<Self, Error> {
        let ops = plan.steps.iter().map(|step| op(registry, step)).collect::<Result<_, _>>()?;
        let sink = match (&plan.writes, out) {
            (None, None) => Sink::Collect(Vec::new()),
            (Some(dep), Some(out)) => Sink::Shuffle(Writer::new(registry, dep, task, out)?),
            (Some(_), None) => {
                return Err(Error::fatal("a stage that writes a shuffle was given nowhere to write"));
            }
            (None, Some(_)) => return Err(Error::fatal("an action's stage was given a shuffle to write")),
        };
        Ok(Chain { ops, sink })
    }

    fn push(&mut self, record: Rec) -> Result<(), Error> {
        feed(&mut self.ops, record, &mut self.sink)
    }

    fn finish(mut self) -> Result<Vec<u8>, Error> {
        for i in 0..self.ops.len() {
            let (done, rest) = self.ops.split_at_mut(i + 1);
            let sink = &mut self.sink;
            done[i].finish(&mut |record| feed(rest, record, sink))?;
        }
        self.sink.finish()
    }
}

fn feed(ops: &mut [Box<dyn Op>], record: Rec, sink: &mut Sink<'_>) -> Result<(), Error> {
    match ops.split_first_mut() {
        None => sink.push(record),
        Some((first, rest)) => first.push(record, &mut |record| feed(rest, record, sink)),
    }
}

/// A step as it runs: the function's use its kind names, or one of the SDK's own.
fn op(registry: &Registry, step: &Step) -> Result<Box<dyn Op>, Error> {
    let capture = step.capture.clone();
    let entry = || registry.get(&step.function);
    let unusable = |entry: &Entry| {
        Error::fatal(format!("the function {} cannot be used as a {} step", entry.name, step.kind))
    };
    Ok(match step.kind.as_str() {
        "count" => Box::new(Count(0)),
        "take" => Box::new(Take(records::decode::<u64>(&capture)?)),
        "sample" => Box::new(Sample::new(records::decode::<(bool, u64)>(&capture)?)),
        kind => {
            let entry = entry()?;
            let made = match kind {
                "map" => entry.map.as_ref().map(|f| f(capture)),
                "flat-map" => entry.flat_map.as_ref().map(|f| f(capture)),
                "filter" => entry.filter.as_ref().map(|f| f(capture)),
                "key-by" => entry.key_by.as_ref().map(|f| f(capture)),
                "map-values" => entry.map_values.as_ref().map(|f| f(capture)),
                "top" => entry.top.as_ref().map(|f| f(capture)),
                "fold" => entry.fold.as_ref().map(|f| f(capture)),
                other => return Err(Error::fatal(format!("no step kind {other:?}"))),
            };
            made.ok_or_else(|| unusable(entry))?
        }
    })
}

struct Count(u64);

impl Op for Count {
    fn push(&mut self, _: Rec, _: Out<'_>) -> Result<(), Error> {
        self.0 += 1;
        Ok(())
    }
    fn finish(&mut self, out: Out<'_>) -> Result<(), Error> {
        out(Rec::typed(self.0))
    }
}

struct Take(u64);

impl Op for Take {
    fn push(&mut self, record: Rec, out: Out<'_>) -> Result<(), Error> {
        if self.0 == 0 {
            return Ok(());
        }
        self.0 -= 1;
        out(record)
    }
}

/// Keys of a keyed partition, for a sort's range bounds: a reservoir of at most `n`,
/// drawn with a fixed seed (the same keys every run of the task), as the sort orders
/// them (complemented when it is descending).
struct Sample {
    descending: bool,
    n: u64,
    seen: u64,
    state: u64,
    kept: Vec<Vec<u8>>,
}

impl Sample {
    fn new((ascending, n): (bool, u64)) -> Self {
        Sample { descending: !ascending, n, seen: 0, state: 0x9e37_79b9_7f4a_7c15, kept: Vec::new() }
    }
}

impl Op for Sample {
    fn push(&mut self, record: Rec, _: Out<'_>) -> Result<(), Error> {
        let (bytes, split) = record.pair()?;
        let mut key = bytes[..split].to_vec();
        if self.descending {
            key.iter_mut().for_each(|b| *b = !*b);
        }
        self.seen += 1;
        if (self.kept.len() as u64) < self.n {
            self.kept.push(key);
        } else {
            // xorshift64*: any fixed draw will do.
            self.state ^= self.state << 13;
            self.state ^= self.state >> 7;
            self.state ^= self.state << 17;
            let at = self.state % self.seen;
            if at < self.n {
                self.kept[at as usize] = key;
            }
        }
        Ok(())
    }
    fn finish(&mut self, out: Out<'_>) -> Result<(), Error> {
        for key in self.kept.drain(..) {
            out(Rec::typed(key))?;
        }
        Ok(())
    }
}

/// The end of a task's chain.
enum Sink<'a> {
    /// An action's records, framed, as the task's output.
    Collect(Vec<u8>),
    Shuffle(Writer<'a>),
}

impl Sink<'_> {
    fn push(&mut self, record: Rec) -> Result<(), Error> {
        match self {
            Sink::Collect(out) => {
                let bytes = record.encoded()?;
                records::frame(out, &bytes);
                Ok(())
            }
            Sink::Shuffle(writer) => writer.push(record),
        }
    }

    fn finish(self) -> Result<Vec<u8>, Error> {
        match self {
            Sink::Collect(out) => Ok(out),
            Sink::Shuffle(mut writer) => {
                writer.finish()?;
                Ok(Vec::new())
            }
        }
    }
}

/// A task writing the shuffle of a dependency: records keyed, partitioned and, for
/// `reduce-by-key` and `distinct`, combined in the task before they leave it.
struct Writer<'a> {
    kind: Kind,
    partitions: u32,
    out: &'a mut dyn Batches,
    batch: Vec<u8>,
    next: u32,
}

enum Kind {
    Hash,
    Combine(super::functions::Reducer, FxHashMap<Vec<u8>, Box<dyn Any>>),
    Distinct(FxHashSet<Vec<u8>>),
    Repartition,
    Sort { descending: bool, bounds: Vec<Vec<u8>> },
}

impl<'a> Writer<'a> {
    fn new(registry: &Registry, dep: &Dep, task: u32, out: &'a mut dyn Batches) -> Result<Self, Error> {
        if dep.partitions == 0 {
            return Err(Error::fatal("a shuffle of no partitions"));
        }
        let kind = match dep.kind.as_str() {
            "reduce-by-key" => Kind::Combine(registry.reducer(&dep.function)?, FxHashMap::default()),
            "group-by-key" | "join" | "left-outer-join" | "cogroup" => Kind::Hash,
            "distinct" => Kind::Distinct(FxHashSet::default()),
            "repartition" => Kind::Repartition,
            "sort-by-key" => {
                let (ascending, bounds) = records::decode::<(bool, Vec<Vec<u8>>)>(&dep.capture)?;
                Kind::Sort { descending: !ascending, bounds }
            }
            other => return Err(Error::fatal(format!("no dependency kind {other:?}"))),
        };
        Ok(Writer { kind, partitions: dep.partitions, out, batch: Vec::new(), next: task })
    }

    fn hash(&self, key: &[u8]) -> u32 {
        (crate::stable_hash(key) % u64::from(self.partitions)) as u32
    }

    fn push(&mut self, record: Rec) -> Result<(), Error> {
        match &mut self.kind {
            Kind::Hash => {
                let (bytes, split) = record.pair()?;
                let partition = self.hash(&bytes[..split]);
                self.write(partition, &bytes[..split], &bytes[split..])
            }
            Kind::Combine(reducer, table) => {
                let (mut bytes, split) = record.pair()?;
                let value = (reducer.decode)(&bytes[split..])?;
                bytes.truncate(split);
                match table.remove(&bytes) {
                    Some(acc) => {
                        let combined = (reducer.combine)(acc, value)?;
                        table.insert(bytes, combined);
                    }
                    None => {
                        table.insert(bytes, value);
                    }
                }
                if table.len() >= TABLE {
                    self.drain()?;
                }
                Ok(())
            }
            Kind::Distinct(seen) => {
                let (bytes, split) = match record {
                    Rec::Enc(bytes) => (bytes, None),
                    Rec::Pair(bytes, split) => (bytes, Some(split)),
                    Rec::Typed(typed) => {
                        let mut bytes = Vec::new();
                        match typed.encode_pair(&mut bytes) {
                            Ok(split) => (bytes, Some(split)),
                            Err(_) => (records::encode_whole(&*typed)?, None),
                        }
                    }
                };
                // Seen keys are forgotten past the table's size: the reading side
                // keeps one of each key whatever comes twice.
                if seen.len() >= TABLE {
                    seen.clear();
                }
                if !seen.insert(bytes.clone()) {
                    return Ok(());
                }
                let partition = self.hash(&bytes);
                let value = split.map(|s| (s as u32).to_le_bytes().to_vec()).unwrap_or_default();
                self.write(partition, &bytes, &value)
            }
            Kind::Repartition => {
                let partition = self.next % self.partitions;
                self.next = self.next.wrapping_add(1);
                let value = tag(record)?;
                self.write(partition, &[], &value)
            }
            Kind::Sort { descending, bounds } => {
                let (mut bytes, split) = record.pair()?;
                if *descending {
                    bytes[..split].iter_mut().for_each(|b| *b = !*b);
                }
                let partition = bounds.partition_point(|b| b.as_slice() <= &bytes[..split]) as u32;
                let partition = partition.min(self.partitions - 1);
                self.write(partition, &bytes[..split], &bytes[split..])
            }
        }
    }

    /// The combining table written out: each key once, with its combined value.
    fn drain(&mut self) -> Result<(), Error> {
        let table = match &mut self.kind {
            Kind::Combine(_, table) => std::mem::take(table),
            _ => return Ok(()),
        };
        let Kind::Combine(reducer, _) = &self.kind else { unreachable!() };
        let encode = reducer.encode;
        let mut value = Vec::new();
        for (key, acc) in table {
            value.clear();
            encode(&*acc, &mut value)?;
            let partition = self.hash(&key);
            self.write(partition, &key, &value)?;
        }
        Ok(())
    }

    fn write(&mut self, partition: u32, key: &[u8], value: &[u8]) -> Result<(), Error> {
        self.batch.extend_from_slice(&partition.to_le_bytes());
        self.batch.extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.batch.extend_from_slice(&(value.len() as u32).to_le_bytes());
        self.batch.extend_from_slice(key);
        self.batch.extend_from_slice(value);
        if self.batch.len() >= BATCH {
            self.out.emit(&self.batch)?;
            self.batch.clear();
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), Error> {
        self.drain()?;
        if !self.batch.is_empty() {
            self.out.emit(&self.batch)?;
            self.batch.clear();
        }
        Ok(())
    }
}
