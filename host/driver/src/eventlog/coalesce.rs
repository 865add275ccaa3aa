//! What the event log writes of tasks: a line for each attempt only where something
//! happened. A task that succeeds at its first attempt, saying nothing, within a frame
//! of its start is counted into its job's [`AppEvent::TasksSucceeded`] for that frame
//! (its index, its executor, what it measured; the frame's slowest whole), in place of
//! two lines; a hundred thousand no-op tasks a second are a line a second.

use crate::journal::{AppEvent, EVENT_LOG_VERSION, Envelope, METRICS, SUCCEEDED_KEPT, Sketch, TIMELINE_KEPT};
use flint_proto::{AttemptState, ExecutorId, JobId, TaskRecord};
use roaring::RoaringBitmap;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

/// Starts held, waiting to learn whether their attempt's end is worth a line (a
/// frame's worth at well over 100,000 attempts a second, about 40 MB at most); past
/// this many, starts are written as they come.
const STARTS_HELD: usize = 1 << 18;

#[derive(Default)]
pub(super) struct Coalescer {
    /// Starts not written yet, by attempt.
    starts: HashMap<(JobId, u32, u32), Envelope>,
    batches: BTreeMap<JobId, Batch>,
    /// Each running job's timeline as the live store keeps it.
    timelines: HashMap<JobId, Timeline>,
}

/// Which attempts of a job the live store draws: the first [`TIMELINE_KEPT`] to start,
/// in the order it saw them, which the log's lines do not keep (starts wait here).
#[derive(Default)]
struct Timeline {
    started: usize,
    /// Copies announced whose start is still to come: that start is no new attempt.
    announced: std::collections::HashSet<(u32, u32)>,
}

impl Timeline {
    /// A new attempt, announced or started: whether the live store draws it.
    fn draws(&mut self) -> bool {
        self.started += 1;
        self.started <= TIMELINE_KEPT
    }
}

#[derive(Default)]
struct Batch {
    tasks: RoaringBitmap,
    /// The attempts the live store drew, and how many it did not.
    spans: Vec<(u32, u32, ExecutorId, u64, u64)>,
    spans_not_kept: u64,
    /// Per executor: tasks, bytes read, bytes written.
    executors: BTreeMap<ExecutorId, (u32, u64, u64)>,
    sketches: [Sketch; METRICS.len()],
    /// Its slowest, whole: as many as the store keeps of a job, so that a log read back
    /// keeps the records the live store kept.
    slowest: BinaryHeap<Reverse<Slow>>,
    /// When the last of them ended.
    at_ms: u64,
}

impl Coalescer {
    /// Takes one event; puts in `out` what is to be written now, in order.
    pub(super) fn take(&mut self, mut envelope: Envelope, out: &mut Vec<Envelope>) {
        match &mut envelope.event {
            AppEvent::TaskStart { job, index, attempt, timeline, .. } => {
                let drawn = self.timelines.entry(*job).or_default();
                *timeline = Some(match drawn.announced.remove(&(*index, *attempt)) {
                    true => true, // its copy's announcement placed it
                    false => drawn.draws(),
                });
                match (*job, *index, *attempt) {
                    (job, index, 0) if self.starts.len() < STARTS_HELD => {
                        self.starts.insert((job, index, 0), envelope);
                    }
                    _ => out.push(envelope),
                }
            }
            AppEvent::Speculated { job, index, attempt, timeline, .. } => {
                let drawn = self.timelines.entry(*job).or_default();
                let draws = drawn.draws();
                if draws {
                    drawn.announced.insert((*index, *attempt));
                }
                *timeline = Some(draws);
                self.flush(out);
                out.push(envelope);
            }
            AppEvent::TaskEnd { job, index, attempt, executor, duration_ms, failure, log_tail, metrics } => {
                let start = self.starts.remove(&(*job, *index, *attempt));
                match start {
                    // One that waited for its component keeps its own events: the
                    // timeline draws the compile, as the live page does.
                    Some(start) if failure.is_none() && log_tail.is_none() && metrics.compile_us < 1000 => {
                        let drawn = matches!(start.event, AppEvent::TaskStart { timeline: Some(true), .. });
                        let record = TaskRecord {
                            index: *index,
                            attempt: *attempt,
                            executor: executor.clone(),
                            state: AttemptState::Succeeded,
                            launched_ms: start.at_ms,
                            duration_ms: Some(*duration_ms),
                            ended_ms: Some(envelope.at_ms),
                            metrics: *metrics,
                            failure: None,
                            log_tail: None,
                        };
                        self.batches.entry(*job).or_default().add(record, envelope.at_ms, drawn);
                    }
                    Some(start) => {
                        out.push(start);
                        out.push(envelope);
                    }
                    None => out.push(envelope),
                }
            }
            // Anything else may speak of a task held here (a loss, the job's end): what
            // is held goes first.
            _ => {
                if let AppEvent::JobEnd { job, .. } = &envelope.event {
                    self.timelines.remove(job);
                }
                self.flush(out);
                out.push(envelope);
            }
        }
    }

    /// Puts in `out` everything held: the batches, then the starts of attempts still
    /// running, oldest first.
    pub(super) fn flush(&mut self, out: &mut Vec<Envelope>) {
        for (job, batch) in std::mem::take(&mut self.batches) {
            out.push(batch.into_event(job));
        }
        let mut starts: Vec<Envelope> = self.starts.drain().map(|(_, start)| start).collect();
        starts.sort_by_key(|s| s.at_ms);
        out.extend(starts);
    }
}

impl Batch {
    fn add(&mut self, record: TaskRecord, at_ms: u64, drawn: bool) {
        self.tasks.insert(record.index);
        match drawn {
            true => self.spans.push((
                record.index,
                record.attempt,
                record.executor.clone(),
                record.launched_ms,
                at_ms,
            )),
            false => self.spans_not_kept += 1,
        }
        let on = self.executors.entry(record.executor.clone()).or_default();
        on.0 += 1;
        on.1 = on.1.saturating_add(record.metrics.input_bytes);
        on.2 = on.2.saturating_add(record.metrics.shuffle_write_bytes);
        for (sketch, (_, _, value)) in self.sketches.iter_mut().zip(METRICS) {
            sketch.add(value(&record));
        }
        self.at_ms = self.at_ms.max(at_ms);
        self.slowest.push(Reverse(Slow(record)));
        if self.slowest.len() > SUCCEEDED_KEPT {
            self.slowest.pop();
        }
    }

    fn into_event(self, job: JobId) -> Envelope {
        let mut tasks = Vec::new();
        let mut run: Option<(u32, u32)> = None;
        for index in &self.tasks {
            run = match run {
                Some((start, end)) if end == index => Some((start, end.saturating_add(1))),
                Some(done) => {
                    tasks.push(done);
                    Some((index, index.saturating_add(1)))
                }
                None => Some((index, index.saturating_add(1))),
            };
        }
        tasks.extend(run);
        let bytes = self.executors.values().map(|(_, read, written)| (*read, *written)).collect();
        let executors: Vec<(ExecutorId, u32)> =
            self.executors.into_iter().map(|(id, (n, ..))| (id, n)).collect();
        let place = |id: &ExecutorId| executors.binary_search_by(|(e, _)| e.cmp(id)).unwrap_or(0) as u32;
        let spans = self.spans.iter().map(|(i, a, e, from, to)| (*i, *a, place(e), *from, *to)).collect();
        let event = AppEvent::TasksSucceeded {
            job,
            tasks,
            spans,
            spans_not_kept: self.spans_not_kept,
            executors,
            bytes,
            summary: self.sketches.iter().map(Sketch::data).collect(),
            slowest: self.slowest.into_iter().map(|Reverse(Slow(record))| record).collect(),
        };
        Envelope { v: EVENT_LOG_VERSION, at_ms: self.at_ms, event }
    }
}

/// A record ordered as the store orders its slowest: by run time, then index.
struct Slow(TaskRecord);

impl Slow {
    fn key(&self) -> (u64, u32) {
        (self.0.duration_ms.unwrap_or(0), self.0.index)
    }
}

impl PartialEq for Slow {
    fn eq(&self, other: &Slow) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Slow {}

impl PartialOrd for Slow {
    fn partial_cmp(&self, other: &Slow) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Slow {
    fn cmp(&self, other: &Slow) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}
