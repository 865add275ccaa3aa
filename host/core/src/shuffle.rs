//! The map-output tracker: for each shuffle, which executor incarnation holds each map
//! task's output, its bytes per reduce partition and its digest. No IO and no clock,
//! beside the scheduler, one owner of this state (the driver's event loop).
//!
//! A map output is *gone* when its executor is lost or when a reducer could not read
//! it (executor unreachable, checksum mismatch, fetch refused): exactly those outputs
//! are marked, so exactly those maps run again, then the reducers that need them. A
//! report from an incarnation that no longer holds the output (a stale fetch failure,
//! a late report of a lost executor) changes nothing. A map that runs again must
//! reproduce the digest its output had: one that does not is nondeterministic, and its
//! reducers may already have read the old bytes, so it is an error, never a silent mix.
//!
//! Sizes are kept per (map, reduce partition), a byte each ([`compress_size`]: exact for
//! 0 and 1, else within 10% above), at most [`MAX_SLICES`] per shuffle: a reducer plans
//! its fetches from them and learns exact sizes from the holder's index.
//!
//! A map's smallest slices come inline in its report (at most [`INLINE_PER_MAP`] bytes)
//! and are kept here while the tracker holds less than [`MAX_INLINE_HELD`] of them all
//! told; a reducer gets them in its launch (at most [`INLINE_PER_LAUNCH`]) instead of
//! asking their holder. They are a copy: each stays in its map's data file, and goes
//! with its output when that is gone.

use flint_proto::{
    ExecutorId, INLINE_PER_LAUNCH, INLINE_PER_MAP, INLINE_SLICE, Incarnation, InlineSlice, JobId,
};
use foldhash::HashMap;
use std::collections::BTreeMap;

/// The most map tasks, and the most reduce partitions, one shuffle may have.
pub const MAX_PARTITIONS: u32 = 100_000;
/// The most (map, reduce partition) slices one shuffle may have: its sizes' bytes.
pub const MAX_SLICES: u64 = 1 << 26;
/// The most inline slice bytes the tracker keeps, every shuffle together; a map's
/// slices past it are fetched from their holder.
pub const MAX_INLINE_HELD: u64 = 64 << 20;

/// A slice's size in a byte: 0 and 1 exactly, else the least power of 1.1 at or above
/// it (Spark's map statuses do the same), up to about 35 GB.
pub fn compress_size(bytes: u64) -> u8 {
    match bytes {
        0 | 1 => bytes as u8,
        _ => ((bytes as f64).ln() / 1.1f64.ln()).ceil().min(255.0) as u8,
    }
}

/// What [`compress_size`] kept: at least the size it was given (below its cap).
pub fn decompress_size(code: u8) -> u64 {
    match code {
        0 | 1 => u64::from(code),
        _ => 1.1f64.powi(i32::from(code)).ceil() as u64,
    }
}

/// A job's shuffle: its stages' shuffles are numbered from 0 in the job's plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShuffleId {
    pub job: JobId,
    pub index: u32,
}

/// What a map task's attempt wrote and where it lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapOutput {
    pub executor: ExecutorId,
    pub incarnation: Incarnation,
    /// Bytes for each reduce partition, in partition order.
    pub sizes: Vec<u64>,
    /// The digest of the whole output, the same for every run of a deterministic map.
    pub digest: [u8; 32],
    /// Slices that came inline, by reduce partition (see [`flint_proto::MapStatus`]).
    pub inline: Vec<(u32, InlineSlice)>,
}

/// Why an output is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GoneReason {
    /// The executor holding it was lost.
    ExecutorLost,
    /// A reducer could not read it: the reducer's words.
    FetchFailed(String),
}

/// One output marked gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gone {
    pub shuffle: ShuffleId,
    pub map: u32,
    pub reason: GoneReason,
}

/// Where a reducer reads its slices: one holder, one request, carrying every slice it
/// holds for that reduce partition. Empty slices are never asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub executor: ExecutorId,
    pub incarnation: Incarnation,
    /// (map index, bytes at most) for each slice, by map index.
    pub slices: Vec<(u32, u64)>,
}

/// Where a reduce partition's slices are: holders to ask, and slices at hand.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReduceInput {
    pub holders: Vec<Holder>,
    /// Slices kept inline, by map index; none of these maps is in `holders`.
    pub inline: Vec<(u32, InlineSlice)>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrackerError {
    #[error("shuffle {0:?} is not registered")]
    UnknownShuffle(ShuffleId),
    #[error("shuffle {0:?} is already registered")]
    AlreadyRegistered(ShuffleId),
    #[error(
        "a shuffle of {maps} maps into {reduces} partitions: each must be 1 to {MAX_PARTITIONS}, and their product at most {MAX_SLICES}"
    )]
    Size { maps: u32, reduces: u32 },
    #[error("map {map} is not one of the shuffle's {maps}")]
    NoSuchMap { map: u32, maps: u32 },
    #[error("reduce partition {reduce} is not one of the shuffle's {reduces}")]
    NoSuchPartition { reduce: u32, reduces: u32 },
    #[error("map {map}'s output has {got} partition sizes, the shuffle {want}")]
    Partitions { map: u32, got: usize, want: u32 },
    #[error("map {map} ran again and wrote other bytes than before (nondeterministic map)")]
    Nondeterministic { map: u32 },
    #[error("maps {0:?} have no output: run them first")]
    Missing(Vec<u32>),
    #[error(
        "map {map}'s inline slices are not what a report may carry: {why} (partitions ascending, \
         each its size, at most {INLINE_SLICE} bytes each and {INLINE_PER_MAP} together)"
    )]
    Inline { map: u32, why: &'static str },
}

/// What recording an output did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// The first output of this map, or one that replaces an output gone.
    Added,
    /// The map already had a live output (a speculative or duplicate attempt): the
    /// first stays, this one is not used.
    Duplicate,
}

/// A live output as kept: its sizes a byte each.
#[derive(Debug)]
struct Held {
    executor: ExecutorId,
    incarnation: Incarnation,
    sizes: Box<[u8]>,
    /// Kept inline slices, by reduce partition (ascending).
    inline: Box<[(u32, InlineSlice)]>,
}

impl Held {
    fn inline_bytes(&self) -> u64 {
        self.inline.iter().map(|(_, s)| s.bytes.len() as u64).sum()
    }
}

#[derive(Debug)]
struct Shuffle {
    reduces: u32,
    /// By map index: the live output, if any.
    outputs: Vec<Option<Held>>,
    /// By map index: the digest of the first output recorded, kept when it is gone.
    digests: Vec<Option<[u8; 32]>>,
    /// Outputs recorded again after they were gone: the maps rerun.
    reruns: u32,
    /// Stored bytes of each reduce partition, every live output's together, as the
    /// sizes are kept (each at most 10% over): an output gone takes back exactly what
    /// it added.
    bytes: Vec<u64>,
    /// Outputs live now.
    live: u32,
    /// `bytes` read as sizes, once every map's output is in; forgotten when an output
    /// comes or goes (so a status read many times a second sorts them once).
    read: std::cell::Cell<Option<flint_proto::ShuffleSizes>>,
}

impl Shuffle {
    fn forget(&mut self, gone: &Held) {
        self.live -= 1;
        self.read.set(None);
        for (total, &code) in self.bytes.iter_mut().zip(gone.sizes.iter()) {
            *total -= decompress_size(code);
        }
    }
}

#[derive(Debug, Default)]
pub struct MapOutputTracker {
    shuffles: BTreeMap<ShuffleId, Shuffle>,
    /// Which outputs each executor incarnation holds, so a loss finds them at once.
    held: HashMap<(ExecutorId, Incarnation), Vec<(ShuffleId, u32)>>,
    /// Inline slice bytes kept, every shuffle together: at most [`MAX_INLINE_HELD`].
    inline_held: u64,
}

impl MapOutputTracker {
    pub fn new() -> MapOutputTracker {
        MapOutputTracker::default()
    }

    /// A shuffle written by `maps` map tasks into `reduces` partitions.
    pub fn register(&mut self, shuffle: ShuffleId, maps: u32, reduces: u32) -> Result<(), TrackerError> {
        let allowed = 1..=MAX_PARTITIONS;
        if !allowed.contains(&maps)
            || !allowed.contains(&reduces)
            || u64::from(maps) * u64::from(reduces) > MAX_SLICES
        {
            return Err(TrackerError::Size { maps, reduces });
        }
        if self.shuffles.contains_key(&shuffle) {
            return Err(TrackerError::AlreadyRegistered(shuffle));
        }
        let outputs = (0..maps).map(|_| None).collect();
        let digests = vec![None; maps as usize];
        let bytes = vec![0; reduces as usize];
        let read = std::cell::Cell::new(None);
        self.shuffles.insert(shuffle, Shuffle { reduces, outputs, digests, reruns: 0, bytes, live: 0, read });
        Ok(())
    }

    /// Records what a map task's successful attempt wrote.
    pub fn record(
        &mut self,
        shuffle: ShuffleId,
        map: u32,
        output: MapOutput,
    ) -> Result<Recorded, TrackerError> {
        let s = self.shuffles.get_mut(&shuffle).ok_or(TrackerError::UnknownShuffle(shuffle))?;
        let maps = s.outputs.len() as u32;
        let slot = s.outputs.get_mut(map as usize).ok_or(TrackerError::NoSuchMap { map, maps })?;
        if output.sizes.len() != s.reduces as usize {
            return Err(TrackerError::Partitions { map, got: output.sizes.len(), want: s.reduces });
        }
        check_inline(map, &output)?;
        if slot.is_some() {
            return Ok(Recorded::Duplicate);
        }
        let digest = &mut s.digests[map as usize];
        match digest {
            Some(first) if *first != output.digest => return Err(TrackerError::Nondeterministic { map }),
            Some(_) => s.reruns += 1,
            None => *digest = Some(output.digest),
        }
        let incarnation = output.incarnation;
        let holder = (output.executor.clone(), incarnation);
        let sizes: Box<[u8]> = output.sizes.iter().map(|&b| compress_size(b)).collect();
        s.bytes.iter_mut().zip(sizes.iter()).for_each(|(total, &code)| *total += decompress_size(code));
        let inline_bytes: u64 = output.inline.iter().map(|(_, s)| s.bytes.len() as u64).sum();
        // Past the bound the slices are not kept: their reducers fetch them.
        let inline = match self.inline_held + inline_bytes <= MAX_INLINE_HELD {
            true => {
                self.inline_held += inline_bytes;
                output.inline.into_boxed_slice()
            }
            false => Box::default(),
        };
        *slot = Some(Held { executor: output.executor, incarnation, sizes, inline });
        s.live += 1;
        s.read.set(None);
        self.held.entry(holder).or_default().push((shuffle, map));
        Ok(Recorded::Added)
    }

    /// The executor's incarnation is gone: every output it held is gone with it.
    pub fn executor_lost(&mut self, executor: &ExecutorId, incarnation: Incarnation) -> Vec<Gone> {
        let held = self.held.remove(&(executor.clone(), incarnation)).unwrap_or_default();
        let mut gone = Vec::new();
        for (shuffle, map) in held {
            let Some(s) = self.shuffles.get_mut(&shuffle) else { continue };
            let slot = &mut s.outputs[map as usize];
            // Only if it still holds it: a map rerun elsewhere has moved on.
            if slot.as_ref().is_some_and(|o| o.incarnation == incarnation && &o.executor == executor) {
                let held = slot.take().expect("checked above");
                self.inline_held -= held.inline_bytes();
                s.forget(&held);
                gone.push(Gone { shuffle, map, reason: GoneReason::ExecutorLost });
            }
        }
        gone.sort_by_key(|g| (g.shuffle, g.map));
        gone
    }

    /// A reducer could not read these maps' outputs from `incarnation`: those it still
    /// holds are gone (one it no longer holds was already rerun, or is being).
    pub fn fetch_failed(
        &mut self,
        shuffle: ShuffleId,
        incarnation: Incarnation,
        maps: &[u32],
        why: &str,
    ) -> Result<Vec<Gone>, TrackerError> {
        let s = self.shuffles.get_mut(&shuffle).ok_or(TrackerError::UnknownShuffle(shuffle))?;
        let count = s.outputs.len() as u32;
        let mut gone = Vec::new();
        for &map in maps {
            let slot = s.outputs.get_mut(map as usize).ok_or(TrackerError::NoSuchMap { map, maps: count })?;
            let Some(output) = slot.take_if(|o| o.incarnation == incarnation) else { continue };
            self.inline_held -= output.inline_bytes();
            s.forget(&output);
            if let Some(held) = self.held.get_mut(&(output.executor, incarnation)) {
                held.retain(|h| *h != (shuffle, map));
            }
            gone.push(Gone { shuffle, map, reason: GoneReason::FetchFailed(why.to_owned()) });
        }
        Ok(gone)
    }

    /// The maps whose output is not there: to run (again) before any reducer starts.
    pub fn missing(&self, shuffle: ShuffleId) -> Result<Vec<u32>, TrackerError> {
        let s = self.shuffles.get(&shuffle).ok_or(TrackerError::UnknownShuffle(shuffle))?;
        Ok(s.outputs.iter().enumerate().filter(|(_, o)| o.is_none()).map(|(m, _)| m as u32).collect())
    }

    /// Where reduce partition `reduce` reads its slices: inline ones at hand (up to
    /// [`INLINE_PER_LAUNCH`] bytes), the rest from one [`Holder`] per executor
    /// incarnation; refused while any map's output is missing.
    pub fn slices_for(&self, shuffle: ShuffleId, reduce: u32) -> Result<ReduceInput, TrackerError> {
        let s = self.shuffles.get(&shuffle).ok_or(TrackerError::UnknownShuffle(shuffle))?;
        if reduce >= s.reduces {
            return Err(TrackerError::NoSuchPartition { reduce, reduces: s.reduces });
        }
        let missing = self.missing(shuffle)?;
        if !missing.is_empty() {
            return Err(TrackerError::Missing(missing));
        }
        let mut holders: BTreeMap<(ExecutorId, Incarnation), Vec<(u32, u64)>> = BTreeMap::new();
        let mut inline = Vec::new();
        let mut inline_bytes = 0;
        for (map, output) in s.outputs.iter().enumerate() {
            let output = output.as_ref().expect("no output is missing");
            let bytes = decompress_size(output.sizes[reduce as usize]);
            if bytes == 0 {
                continue;
            }
            let at_hand = output.inline.binary_search_by_key(&reduce, |(p, _)| *p).ok();
            match at_hand.map(|i| &output.inline[i].1) {
                Some(slice) if inline_bytes + slice.bytes.len() <= INLINE_PER_LAUNCH => {
                    inline_bytes += slice.bytes.len();
                    inline.push((map as u32, slice.clone()));
                }
                _ => holders
                    .entry((output.executor.clone(), output.incarnation))
                    .or_default()
                    .push((map as u32, bytes)),
            }
        }
        let holders = holders
            .into_iter()
            .map(|((executor, incarnation), slices)| Holder { executor, incarnation, slices })
            .collect();
        Ok(ReduceInput { holders, inline })
    }

    /// How the shuffle's outputs spread over its reduce partitions, once every map's
    /// output is in (skew is known when the map stage ends); `None` before, or for no
    /// such shuffle.
    pub fn sizes(&self, shuffle: ShuffleId) -> Option<flint_proto::ShuffleSizes> {
        let s = self.shuffles.get(&shuffle).filter(|s| s.live as usize == s.outputs.len())?;
        let sizes = s.read.get().unwrap_or_else(|| flint_proto::ShuffleSizes::of(&s.bytes));
        s.read.set(Some(sizes));
        Some(sizes)
    }

    /// How many outputs of the shuffle were recorded again after they were gone.
    pub fn reruns(&self, shuffle: ShuffleId) -> Result<u32, TrackerError> {
        Ok(self.shuffles.get(&shuffle).ok_or(TrackerError::UnknownShuffle(shuffle))?.reruns)
    }

    /// The live outputs this executor incarnation holds: for each, its shuffle, map,
    /// the digest its first run wrote and the most bytes its data file holds (its sizes
    /// as kept, each at or above the size it stands for).
    pub fn held_by(
        &self,
        executor: &ExecutorId,
        incarnation: Incarnation,
    ) -> Vec<(ShuffleId, u32, [u8; 32], u64)> {
        let Some(held) = self.held.get(&(executor.clone(), incarnation)) else { return Vec::new() };
        let mut outputs: Vec<_> = held
            .iter()
            .filter_map(|&(shuffle, map)| {
                let s = self.shuffles.get(&shuffle)?;
                let output = s.outputs[map as usize].as_ref()?;
                let digest = s.digests[map as usize]?;
                let bytes = output.sizes.iter().map(|&c| decompress_size(c)).sum();
                Some((shuffle, map, digest, bytes))
            })
            .collect();
        outputs.sort_by_key(|o| (o.0, o.1));
        outputs
    }

    /// The output of `map` moves from one holder to another (a copy made before the
    /// first leaves): nothing changes unless `from` holds it now. Its sizes, digest and
    /// inline slices stay as they were.
    pub fn moved(
        &mut self,
        shuffle: ShuffleId,
        map: u32,
        from: (&ExecutorId, Incarnation),
        to: (ExecutorId, Incarnation),
    ) -> bool {
        let Some(output) = self
            .shuffles
            .get_mut(&shuffle)
            .and_then(|s| s.outputs.get_mut(map as usize))
            .and_then(Option::as_mut)
            .filter(|o| o.incarnation == from.1 && &o.executor == from.0)
        else {
            return false;
        };
        (output.executor, output.incarnation) = to.clone();
        if let Some(held) = self.held.get_mut(&(from.0.clone(), from.1)) {
            held.retain(|h| *h != (shuffle, map));
        }
        self.held.entry(to).or_default().push((shuffle, map));
        true
    }

    /// Inline slice bytes the tracker keeps now.
    pub fn inline_held(&self) -> u64 {
        self.inline_held
    }

    /// Forgets the job's shuffles (it ended): what their outputs held may be deleted.
    pub fn job_ended(&mut self, job: JobId) -> Vec<ShuffleId> {
        let ended: Vec<ShuffleId> = self.shuffles.keys().filter(|s| s.job == job).copied().collect();
        for shuffle in &ended {
            if let Some(s) = self.shuffles.remove(shuffle) {
                self.inline_held -= s.outputs.iter().flatten().map(Held::inline_bytes).sum::<u64>();
            }
        }
        self.held.retain(|_, held| {
            held.retain(|(s, _)| s.job != job);
            !held.is_empty()
        });
        ended
    }
}

/// Refuses inline slices no map can have written: out of order, past the partitions,
/// of another size than the output's own, or over the bounds.
fn check_inline(map: u32, output: &MapOutput) -> Result<(), TrackerError> {
    let refuse = |why| Err(TrackerError::Inline { map, why });
    let mut total = 0;
    let mut last = None;
    for (partition, slice) in &output.inline {
        let len = slice.bytes.len();
        if last.is_some_and(|l| *partition <= l) {
            return refuse("not in ascending partition order");
        }
        last = Some(*partition);
        match output.sizes.get(*partition as usize) {
            None => return refuse("a partition past the shuffle's"),
            Some(&size) if size != len as u64 => {
                return refuse("a slice of another size than its partition's");
            }
            Some(_) if len == 0 || len > INLINE_SLICE => return refuse("an empty or oversized slice"),
            Some(_) => total += len,
        }
    }
    match total > INLINE_PER_MAP {
        true => refuse("more bytes than a report may carry"),
        false => Ok(()),
    }
}

#[cfg(test)]
mod tests;
