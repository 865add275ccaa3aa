//! A reduce task's input gathered from its holders: its own executor's slices read in
//! place, other holders asked at once, several at a time, under a bound on the bytes
//! asked for (`flint.reducer.maxSizeInFlight`), each slice checked as it arrives and
//! kept in memory up to the task's budget, then in a spill file of its own.

use super::disk::{Reservation, disk_full};
use super::merge::SortedRuns;
use super::read::{FetchError, ShuffleFetch, Slice};
use flint_proto::{JobId, MapSource, TaskFailure};
use std::fs::File;
use std::io::{Cursor, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, mpsc};
use std::time::Instant;

/// Holders asked at once by one reduce task.
const FETCHERS: usize = 4;

/// Slices fetched and not yet kept, all fetchers together.
const ARRIVED: usize = 4;

/// Where one slice of a reduce task's input waits until the merge reads it.
enum Waiting {
    Memory(Vec<u8>),
    /// A byte range of a file: this executor's own map output, or the task's spill.
    File {
        path: PathBuf,
        start: u64,
        len: u64,
    },
}

/// A reduce task's slices as they are gathered: in memory up to its budget, then
/// appended to a spill file of its own (deleted with the merge).
pub(crate) struct Gathered {
    slices: Vec<(u32, Waiting)>,
    in_memory: u64,
    budget: u64,
    spill: Option<(PathBuf, File, u64)>,
    /// What the spill holds of the executor's disk budget.
    held: Reservation,
    dir: PathBuf,
    attempt: u32,
}

impl Gathered {
    pub(crate) fn new(dir: PathBuf, attempt: u32, budget: u64, held: Reservation) -> Gathered {
        Gathered { slices: Vec::new(), in_memory: 0, budget, spill: None, held, dir, attempt }
    }

    pub(crate) fn in_place(&mut self, map: u32, path: PathBuf, start: u64, len: u64) {
        if len > 0 {
            self.slices.push((map, Waiting::File { path, start, len }));
        }
    }

    /// Keeps a checked slice: in memory within the budget, else in the spill file (a
    /// spill past the executor's disk budget fails the task as `disk-full`).
    pub(crate) fn keep(&mut self, slice: Slice) -> Result<(), TaskFailure> {
        let host = |message: String| TaskFailure::Host { message };
        let len = slice.bytes.len() as u64;
        if len == 0 {
            return Ok(());
        }
        if self.in_memory + len <= self.budget {
            self.in_memory += len;
            self.slices.push((slice.map, Waiting::Memory(slice.bytes)));
            return Ok(());
        }
        if self.spill.is_none() {
            std::fs::create_dir_all(&self.dir)
                .map_err(|e| host(format!("cannot make the spill folder: {e}")))?;
            let path = self.dir.join(format!("fetched-{}-{:016x}", self.attempt, rand::random::<u64>()));
            let file = File::create(&path).map_err(|e| host(format!("cannot spill fetched slices: {e}")))?;
            self.spill = Some((path, file, 0));
        }
        let (path, file, at) = self.spill.as_mut().expect("made above");
        self.held.grow(len).and_then(|()| file.write_all(&slice.bytes)).map_err(|e| {
            disk_full(&e).unwrap_or_else(|| host(format!("cannot spill fetched slices: {e}")))
        })?;
        self.slices.push((slice.map, Waiting::File { path: path.clone(), start: *at, len }));
        *at += len;
        Ok(())
    }

    /// The merge of every slice, in map order (ties to the lower map).
    pub(crate) fn into_runs(mut self, partition: u32) -> std::io::Result<SortedRuns> {
        let mut runs = SortedRuns::new(partition);
        if let Some((path, mut file, _)) = self.spill.take() {
            file.flush()?;
            runs.own(path, self.held);
        }
        self.slices.sort_by_key(|(map, _)| *map);
        for (_, waiting) in self.slices {
            match waiting {
                Waiting::Memory(bytes) => runs.push(zstd::Decoder::new(Cursor::new(bytes))?)?,
                Waiting::File { path, start, len } => {
                    let mut file = File::open(&path)?;
                    file.seek(SeekFrom::Start(start))?;
                    runs.push(zstd::Decoder::new(file.take(len))?)?;
                }
            }
        }
        Ok(runs)
    }
}

/// What a reduce task asks every holder for.
pub(crate) struct Ask<'a> {
    pub fetcher: &'a dyn ShuffleFetch,
    pub job: JobId,
    pub token: &'a [u8; 32],
    pub partition: u32,
    pub deadline: Instant,
    /// `flint.reducer.maxSizeInFlight`.
    pub in_flight: u64,
}

enum Arrival {
    Slice(usize, Slice),
    Done(usize, Result<(), FetchError>),
}

/// Fetches every holder's slices into `gathered`, [`FETCHERS`] holders at a time and at
/// most `in_flight` bytes asked for at once (by the holders' own upper bounds); each
/// slice is checked (asked for, once, intact) on this thread as it arrives. The first
/// failure stops the others and fails the task, naming the maps it could not read.
pub(crate) fn fetch_all(
    ask: &Ask<'_>,
    sources: &[&MapSource],
    gathered: &mut Gathered,
) -> Result<(), TaskFailure> {
    let budget = InFlight::new(ask.in_flight);
    let (stop, next) = (AtomicBool::new(false), AtomicUsize::new(0));
    let (sender, arrivals) = mpsc::sync_channel::<Arrival>(ARRIVED);
    let mut seen: Vec<Vec<u32>> = vec![Vec::new(); sources.len()];
    let mut failure: Option<TaskFailure> = None;
    std::thread::scope(|scope| {
        for _ in 0..FETCHERS.min(sources.len()) {
            let sender = sender.clone();
            let (budget, stop, next) = (&budget, &stop, &next);
            scope.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= sources.len() || stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let source = sources[i];
                    let want = source.maps.iter().map(|(_, n)| *n).sum::<u64>();
                    let result = match budget.take(want, ask.deadline, stop) {
                        false => Err(FetchError {
                            maps: source.maps.iter().map(|(m, _)| *m).collect(),
                            reason: "the task's deadline passed before the fetch could start".into(),
                        }),
                        true => {
                            let mut each = |slice: Slice| {
                                if stop.load(Ordering::Relaxed) {
                                    return Err(FetchError { maps: Vec::new(), reason: "stopped".into() });
                                }
                                sender.send(Arrival::Slice(i, slice)).map_err(|_| FetchError {
                                    maps: Vec::new(),
                                    reason: "the reduce task stopped".into(),
                                })
                            };
                            let fetched = ask.fetcher.fetch(
                                ask.job,
                                ask.token,
                                ask.partition,
                                source,
                                ask.deadline,
                                &mut each,
                            );
                            budget.give_back(want);
                            fetched
                        }
                    };
                    if sender.send(Arrival::Done(i, result)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(sender);
        // Every arrival is taken, after a failure too, so that no fetcher waits on a
        // full channel.
        for arrival in arrivals {
            if failure.is_some() {
                continue;
            }
            let source = |i: usize| sources[i];
            let failed = |i: usize, maps: Vec<u32>, reason: String| {
                let source = source(i);
                TaskFailure::FetchFailed {
                    executor: source.executor.clone(),
                    incarnation: source.incarnation,
                    shuffle: 0,
                    maps,
                    reason,
                }
            };
            let outcome = match arrival {
                Arrival::Slice(i, slice) => {
                    let asked: Vec<u32> = source(i).maps.iter().map(|(m, _)| *m).collect();
                    let map = slice.map;
                    if !asked.contains(&map) || seen[i].contains(&map) {
                        Err(failed(i, asked, format!("a slice of map {map}, not asked for")))
                    } else if !slice.intact() {
                        Err(failed(i, vec![map], "a slice does not match its checksum".into()))
                    } else {
                        seen[i].push(map);
                        gathered.keep(slice)
                    }
                }
                // This executor's own disk failed it: not the holder's maps' fault.
                Arrival::Done(_, Err(e)) if e.maps.is_empty() && e.reason == "stopped" => Ok(()),
                Arrival::Done(_, Err(e)) if e.maps.is_empty() => Err(TaskFailure::Host { message: e.reason }),
                Arrival::Done(i, Err(e)) => Err(failed(i, e.maps, e.reason)),
                Arrival::Done(i, Ok(())) => {
                    let asked: Vec<u32> = source(i).maps.iter().map(|(m, _)| *m).collect();
                    let missing: Vec<u32> = asked.iter().filter(|m| !seen[i].contains(m)).copied().collect();
                    match missing.is_empty() {
                        true => Ok(()),
                        false => {
                            let reason = format!("asked for {} slices, got {}", asked.len(), seen[i].len());
                            Err(failed(i, missing, reason))
                        }
                    }
                }
            };
            if let Err(e) = outcome {
                failure = Some(e);
                stop.store(true, Ordering::Relaxed);
                budget.wake();
            }
        }
    });
    failure.map_or(Ok(()), Err)
}

/// The bytes asked for at once: a fetch waits until its holder's bytes fit, or goes
/// alone when they never would.
struct InFlight {
    limit: u64,
    asked: Mutex<u64>,
    room: Condvar,
}

impl InFlight {
    fn new(limit: u64) -> InFlight {
        InFlight { limit, asked: Mutex::new(0), room: Condvar::new() }
    }

    /// Takes `bytes` of the bound, waiting for room; false when `deadline` passes or
    /// `stop` is set first.
    fn take(&self, bytes: u64, deadline: Instant, stop: &AtomicBool) -> bool {
        let mut asked = self.asked.lock().expect("in-flight lock");
        while *asked > 0 && *asked + bytes > self.limit {
            let now = Instant::now();
            if now >= deadline || stop.load(Ordering::Relaxed) {
                return false;
            }
            asked = self.room.wait_timeout(asked, deadline - now).expect("in-flight lock").0;
        }
        *asked += bytes;
        true
    }

    fn give_back(&self, bytes: u64) {
        *self.asked.lock().expect("in-flight lock") -= bytes;
        self.room.notify_all();
    }

    fn wake(&self) {
        self.room.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn fetches_wait_for_room_and_one_larger_than_the_bound_goes_alone() {
        let bound = InFlight::new(100);
        let (stop, far) = (AtomicBool::new(false), Instant::now() + Duration::from_secs(5));
        assert!(bound.take(60, far, &stop));
        assert!(bound.take(40, far, &stop));
        // Full: a third waits until the deadline, then gives up.
        assert!(!bound.take(1, Instant::now() + Duration::from_millis(50), &stop));
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| bound.take(50, far, &stop));
            std::thread::sleep(Duration::from_millis(50));
            bound.give_back(60);
            assert!(waiter.join().unwrap(), "room made by the first fetch's end");
        });
        bound.give_back(40);
        bound.give_back(50);
        assert!(bound.take(1000, far, &stop), "alone, a holder with more than the bound goes");
        let waiting = std::thread::scope(|scope| {
            let waiter = scope.spawn(|| bound.take(1, far, &stop));
            std::thread::sleep(Duration::from_millis(50));
            stop.store(true, Ordering::Relaxed);
            bound.wake();
            waiter.join().unwrap()
        });
        assert!(!waiting, "a stopped task's fetch does not start");
    }
}
