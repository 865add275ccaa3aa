//! A program's driver in a native test: the lineage kept as the host keeps it, each
//! action run as the host runs it (stages cut at every shuffle, each task running its
//! stage's whole chain, map outputs moved by key and sorted by their bytes), all in
//! memory, one task after another.

use super::{Input, Local};
use crate::program::Source;
use crate::program::functions::Registry;
use crate::program::stage::{self, Batches, Dep, KINDS, Plan, Sorted, Step};
use crate::{Error, Partition};
use std::cell::RefCell;
use std::rc::Rc;

enum Node {
    Source(Source),
    Narrow { parent: u32, step: Step },
    Wide { parents: Vec<u32>, dep: Dep },
}

pub(crate) struct Driver {
    local: Local,
    inputs: Vec<(String, Vec<u8>)>,
    registry: Rc<Registry>,
    nodes: Vec<Node>,
    pub(crate) logs: Vec<String>,
    /// Jobs run, and the stages each ran.
    pub(crate) stages: Vec<u32>,
}

thread_local! {
    static DRIVER: RefCell<Option<Driver>> = const { RefCell::new(None) };
}

/// The inputs a program was given: text splits, by their paths.
pub(crate) fn driver(local: &Local, inputs: Vec<Input>, registry: Rc<Registry>) -> Result<Driver, Error> {
    let inputs = inputs
        .into_iter()
        .map(|input| match input {
            Input::Text { path, bytes } => Ok((path, bytes)),
            other => Err(Error::fatal(format!("a program reads text inputs, not {other:?}"))),
        })
        .collect::<Result<_, _>>()?;
    Ok(Driver {
        local: local.clone(),
        inputs,
        registry,
        nodes: Vec::new(),
        logs: Vec::new(),
        stages: Vec::new(),
    })
}

/// Runs `f` with `driver` serving the program's calls; the driver back after.
pub(crate) fn serving<T>(driver: Driver, f: impl FnOnce() -> T) -> (T, Driver) {
    DRIVER.with(|d| *d.borrow_mut() = Some(driver));
    let result = f();
    let driver = DRIVER.with(|d| d.borrow_mut().take()).expect("the driver is back");
    (result, driver)
}

fn with<T>(f: impl FnOnce(&mut Driver) -> Result<T, Error>) -> Result<T, Error> {
    DRIVER.with(|d| match d.borrow_mut().as_mut() {
        Some(driver) => f(driver),
        None => Err(Error::fatal(
            "datasets are made by a program's main, run by the host (Local::program in a test)",
        )),
    })
}

pub(crate) fn source(source: Source) -> Result<u32, Error> {
    with(|d| {
        if let Source::TextFile(name) = &source {
            d.picked(name)?;
        }
        d.add(Node::Source(source))
    })
}

pub(crate) fn narrow(parent: u32, step: Step) -> Result<u32, Error> {
    with(|d| {
        d.node(parent)?;
        let needs = !matches!(step.kind.as_str(), "count" | "take" | "sample");
        if needs {
            let entry = d.registry.get(&step.function)?;
            let usable = match step.kind.as_str() {
                "map" => entry.map.is_some(),
                "flat-map" => entry.flat_map.is_some(),
                "filter" => entry.filter.is_some(),
                "key-by" => entry.key_by.is_some(),
                "map-values" => entry.map_values.is_some(),
                "top" => entry.top.is_some(),
                "fold" => entry.fold.is_some(),
                other => return Err(Error::fatal(format!("no step kind {other:?}"))),
            };
            if !usable {
                return Err(Error::fatal(format!(
                    "the function {} cannot be used as a {} step",
                    step.function, step.kind
                )));
            }
        }
        d.add(Node::Narrow { parent, step })
    })
}

pub(crate) fn wide(parents: &[u32], mut dep: Dep) -> Result<u32, Error> {
    with(|d| {
        if !KINDS.contains(&dep.kind.as_str()) {
            return Err(Error::fatal(format!("no dependency kind {:?}", dep.kind)));
        }
        if dep.kind == "reduce-by-key" {
            d.registry.reducer(&dep.function)?;
        }
        let two = matches!(dep.kind.as_str(), "join" | "left-outer-join" | "cogroup");
        if parents.len() != if two { 2 } else { 1 } {
            return Err(Error::fatal(format!("a {} of {} datasets", dep.kind, parents.len())));
        }
        if dep.partitions == 0 {
            dep.partitions = parents
                .iter()
                .map(|&p| d.partitions(p))
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .max()
                .unwrap_or(1)
                .max(1);
        }
        d.add(Node::Wide { parents: parents.to_vec(), dep })
    })
}

pub(crate) fn partitions(id: u32) -> Result<u32, Error> {
    with(|d| d.partitions(id))
}

pub(crate) fn collect(id: u32) -> Result<Vec<Vec<u8>>, Error> {
    with(|d| {
        d.node(id)?;
        d.stages.push(0);
        match d.run(id, None)? {
            Ran::Outputs(outputs) => Ok(outputs),
            Ran::Shuffled(_) => unreachable!("an action's stage writes no shuffle"),
        }
    })
}

/// What a stage's tasks made: their outputs, or their records by reduce partition.
enum Ran {
    Outputs(Vec<Vec<u8>>),
    Shuffled(Vec<Vec<(Vec<u8>, Vec<u8>)>>),
}

/// A shuffled record with the parent it came from: key, parent, value.
type Sided = (Vec<u8>, u32, Vec<u8>);

#[derive(Default)]
struct Memory(Vec<Vec<u8>>);

impl Batches for Memory {
    fn emit(&mut self, batch: &[u8]) -> Result<(), Error> {
        self.0.push(batch.to_vec());
        Ok(())
    }
}

struct Whole(Option<Vec<u8>>);

impl Sorted for Whole {
    fn next(&mut self) -> Result<Vec<u8>, Error> {
        Ok(self.0.take().unwrap_or_default())
    }
}

impl Driver {
    fn add(&mut self, node: Node) -> Result<u32, Error> {
        self.nodes.push(node);
        Ok(self.nodes.len() as u32 - 1)
    }

    fn node(&self, id: u32) -> Result<&Node, Error> {
        self.nodes.get(id as usize).ok_or_else(|| Error::fatal(format!("no dataset {id}")))
    }

    /// The inputs `name` picks.
    fn picked(&self, name: &str) -> Result<Vec<usize>, Error> {
        let picked: Vec<usize> = (0..self.inputs.len())
            .filter(|&i| {
                let path = &self.inputs[i].0;
                name == "*" || path == name || path.rsplit('/').next() == Some(name)
            })
            .collect();
        if picked.is_empty() {
            let given: Vec<&str> = self.inputs.iter().map(|(p, _)| p.as_str()).collect();
            return Err(Error::fatal(format!(
                "the program reads the input {name:?}, which the submission does not give (it gives: {})",
                if given.is_empty() { "none".into() } else { given.join(", ") }
            )));
        }
        Ok(picked)
    }

    fn partitions(&self, id: u32) -> Result<u32, Error> {
        Ok(match self.node(id)? {
            Node::Source(Source::TextFile(name)) => self.picked(name)?.len() as u32,
            Node::Source(Source::Parallelize { slices, .. }) => *slices,
            Node::Source(Source::Range(n)) => *n,
            Node::Narrow { parent, .. } => self.partitions(*parent)?,
            Node::Wide { dep, .. } => dep.partitions,
        })
    }

    /// Runs the stage that ends at `tail`, writing `writes` (or back to the driver).
    fn run(&mut self, tail: u32, writes: Option<&Dep>) -> Result<Ran, Error> {
        *self.stages.last_mut().expect("a job runs") += 1;
        let mut steps = Vec::new();
        let mut root = tail;
        while let Node::Narrow { parent, step } = self.node(root)? {
            steps.push(step.clone());
            root = *parent;
        }
        steps.reverse();
        let reads = match self.node(root)? {
            Node::Wide { dep, .. } => Some(dep.clone()),
            _ => None,
        };
        let plan = Plan { reads, steps, writes: writes.cloned() };
        let count = self.partitions(root)?;
        let registry = self.registry.clone();
        let mut outputs = Vec::new();
        let mut shuffled: Vec<Vec<(Vec<u8>, Vec<u8>)>> =
            vec![Vec::new(); writes.map_or(0, |d| d.partitions as usize)];
        let mut keep = |output: Vec<u8>, memory: Memory| -> Result<(), Error> {
            outputs.push(output);
            let partitions = shuffled.len();
            for batch in memory.0 {
                for (partition, key, value) in crate::shuffle::records(&batch)? {
                    let bucket = shuffled.get_mut(partition as usize).ok_or_else(|| {
                        Error::fatal(format!("a record for partition {partition} of {partitions}"))
                    })?;
                    bucket.push((key.to_vec(), value.to_vec()));
                }
            }
            Ok(())
        };
        match self.node(root)? {
            Node::Source(source) => {
                let partitions: Vec<Partition> = match source {
                    Source::TextFile(name) => self
                        .picked(name)?
                        .into_iter()
                        .map(|i| {
                            let (path, bytes) = self.inputs[i].clone();
                            let end = bytes.len() as u64;
                            Partition::Lines(crate::Split::in_memory(path, 0, end, bytes))
                        })
                        .collect(),
                    Source::Parallelize { records, slices } => (0..*slices as usize)
                        .map(|i| {
                            let n = records.len();
                            let mut framed = Vec::new();
                            for record in &records[i * n / *slices as usize..(i + 1) * n / *slices as usize] {
                                crate::program::records::frame(&mut framed, record);
                            }
                            Partition::Value(framed)
                        })
                        .collect(),
                    Source::Range(n) => (0..*n).map(Partition::Index).collect(),
                };
                for (index, partition) in (0..).zip(partitions) {
                    let mut memory = Memory::default();
                    let out = writes.map(|_| &mut memory as &mut dyn Batches);
                    let mut logs = Vec::new();
                    let output = self.local.as_task(Some(index), count, &mut logs, || {
                        stage::run_source(&registry, &plan, index, partition, out)
                    });
                    self.logs.extend(logs);
                    keep(output?, memory)?;
                }
            }
            Node::Wide { parents, dep } => {
                let (parents, dep) = (parents.clone(), dep.clone());
                // Each partition's records from every parent in turn, the parent's
                // number in the partition field, sorted by key (stable: the earlier
                // parent first among equal keys, as the host's merge has it).
                let mut by_partition: Vec<Vec<Sided>> = vec![Vec::new(); dep.partitions as usize];
                for (side, parent) in (0..).zip(parents) {
                    let Ran::Shuffled(records) = self.run(parent, Some(&dep))? else { unreachable!() };
                    for (bucket, records) in by_partition.iter_mut().zip(records) {
                        bucket.extend(records.into_iter().map(|(k, v)| (k, side, v)));
                    }
                }
                for (index, mut records) in (0..).zip(by_partition) {
                    records.sort_by(|a, b| a.0.cmp(&b.0));
                    let mut batch = Vec::new();
                    for (key, side, value) in &records {
                        batch.extend_from_slice(&side.to_le_bytes());
                        batch.extend_from_slice(&(key.len() as u32).to_le_bytes());
                        batch.extend_from_slice(&(value.len() as u32).to_le_bytes());
                        batch.extend_from_slice(key);
                        batch.extend_from_slice(value);
                    }
                    let mut memory = Memory::default();
                    let out = writes.map(|_| &mut memory as &mut dyn Batches);
                    let mut logs = Vec::new();
                    let output = self.local.as_task(Some(index), count, &mut logs, || {
                        stage::run_shuffled(&registry, &plan, index, &mut Whole(Some(batch)), out)
                    });
                    self.logs.extend(logs);
                    keep(output?, memory)?;
                }
            }
            Node::Narrow { .. } => unreachable!("walked past"),
        }
        Ok(match writes {
            None => Ran::Outputs(outputs),
            Some(_) => Ran::Shuffled(shuffled),
        })
    }
}
