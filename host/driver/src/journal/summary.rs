//! What a job's succeeded tasks measured, in bounded memory: quantiles (Spark's task
//! summary) from a sketch, and the records of the slowest tasks. A job of ten million
//! tasks costs its store a few hundred kilobytes, not a record per task.

use flint_proto::TaskRecord;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

/// The value at quantile `q` of sorted values (nearest rank).
pub fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Values a sketch keeps exactly before it counts them in buckets.
const EXACT: usize = 1000;

/// Bits of a value a bucket keeps below its highest: values within 1/64 of each other
/// share one.
const PRECISION: u32 = 6;

/// Quantiles of a stream of values: exact up to `EXACT` of them, then within 1/64 of
/// the true value (a log-linear histogram, as HdrHistogram's), min and max exact.
#[derive(Debug, Clone, Default)]
pub struct Sketch {
    exact: Vec<u64>,
    buckets: BTreeMap<u32, u64>,
    count: u64,
    min: u64,
    max: u64,
}

fn bucket(value: u64) -> u32 {
    let bits = 64 - value.leading_zeros();
    if bits <= PRECISION + 1 {
        return value as u32;
    }
    let shift = bits - PRECISION - 1;
    (shift << (PRECISION + 1)) | (value >> shift) as u32
}

/// The highest shift a bucket of a `u64` has.
const MAX_SHIFT: u32 = 64 - PRECISION - 1;

/// The lowest value of bucket `b`, and the next bucket's.
fn bounds(b: u32) -> (u64, u64) {
    let shift = (b >> (PRECISION + 1)).min(MAX_SHIFT);
    if shift == 0 {
        return (u64::from(b), u64::from(b) + 1);
    }
    let mantissa = u64::from(b & ((1 << (PRECISION + 1)) - 1));
    let high = u64::try_from(u128::from(mantissa + 1) << shift).unwrap_or(u64::MAX);
    (mantissa << shift, high)
}

impl Sketch {
    pub fn add(&mut self, value: u64) {
        self.min = if self.count == 0 { value } else { self.min.min(value) };
        self.max = self.max.max(value);
        self.count += 1;
        if self.buckets.is_empty() && self.exact.len() < EXACT {
            self.exact.push(value);
            return;
        }
        for v in std::mem::take(&mut self.exact) {
            *self.buckets.entry(bucket(v)).or_default() += 1;
        }
        *self.buckets.entry(bucket(value)).or_default() += 1;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// What it holds, to be written and merged into another.
    pub fn data(&self) -> SketchData {
        SketchData {
            count: self.count,
            min: self.min,
            max: self.max,
            values: self.exact.clone(),
            buckets: self.buckets.iter().map(|(b, n)| (*b, *n)).collect(),
        }
    }

    /// Takes in the values `data` holds. Read from a log, so it is not trusted: its
    /// count is what it holds, buckets no `u64` falls in are dropped, values past
    /// `EXACT` go to buckets.
    pub fn merge(&mut self, data: &SketchData) {
        let valid = |b: &u32| (b >> (PRECISION + 1)) <= MAX_SHIFT;
        let count = data.values.len() as u64
            + data.buckets.iter().filter(|(b, _)| valid(b)).map(|(_, n)| *n).fold(0u64, u64::saturating_add);
        if count == 0 {
            return;
        }
        self.min = if self.count == 0 { data.min } else { self.min.min(data.min) };
        self.max = self.max.max(data.max);
        self.count = self.count.saturating_add(count);
        if self.buckets.is_empty() && data.buckets.is_empty() && self.exact.len() + data.values.len() <= EXACT
        {
            self.exact.extend_from_slice(&data.values);
            return;
        }
        for v in std::mem::take(&mut self.exact).into_iter().chain(data.values.iter().copied()) {
            *self.buckets.entry(bucket(v)).or_default() += 1;
        }
        for (b, n) in data.buckets.iter().filter(|(b, _)| valid(b)) {
            let held = self.buckets.entry(*b).or_default();
            *held = held.saturating_add(*n);
        }
    }

    /// Values and buckets held.
    fn weight(&self) -> usize {
        self.exact.len() + self.buckets.len()
    }

    /// The value at quantile `q` (nearest rank, as `quantile` over every value).
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        if self.buckets.is_empty() {
            let mut sorted = self.exact.clone();
            sorted.sort_unstable();
            return quantile(&sorted, q);
        }
        let rank = (q * (self.count - 1) as f64).round() as u64;
        if rank == 0 {
            return self.min;
        }
        if rank >= self.count - 1 {
            return self.max;
        }
        let mut seen = 0;
        for (&b, &n) in &self.buckets {
            seen += n;
            if seen > rank {
                let (low, high) = bounds(b);
                return (low + (high - low) / 2).clamp(self.min, self.max);
            }
        }
        self.max
    }
}

/// A sketch as the event log holds it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SketchData {
    pub count: u64,
    pub min: u64,
    pub max: u64,
    /// Its values, while it holds them exactly.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<u64>,
    /// Its buckets and their counts, once it does not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub buckets: Vec<(u32, u64)>,
}

/// A summary row: its key in the API, its label on the page, and what it reads of a
/// task.
pub type Metric = (&'static str, &'static str, fn(&TaskRecord) -> u64);

/// The summary's rows: what each shows of a succeeded task.
/// (Compiling comes last: an event log written before it held the first five.)
pub const METRICS: [Metric; 6] = [
    ("duration", "Duration", duration),
    ("reading", "Reading input", read),
    ("compute", "Compute", |t| duration(t).saturating_sub(read(t) + compile(t))),
    ("input", "Input", |t| t.metrics.input_bytes),
    ("records", "Records", |t| t.metrics.input_records),
    ("compile", "Compiling the component", compile),
];

fn duration(t: &TaskRecord) -> u64 {
    t.duration_ms.unwrap_or(0)
}

fn read(t: &TaskRecord) -> u64 {
    t.metrics.read_us / 1000
}

fn compile(t: &TaskRecord) -> u64 {
    t.metrics.compile_us / 1000
}

/// Records of succeeded tasks a running job keeps: its slowest.
pub const SUCCEEDED_KEPT: usize = 1000;

/// A job's succeeded tasks: the summary of all, and which of them keep their records.
#[derive(Debug, Clone, Default)]
pub struct Succeeded {
    pub sketches: [Sketch; METRICS.len()],
    /// The slowest succeeded tasks whose records are kept: (duration, index).
    slowest: BinaryHeap<Reverse<(u64, u32)>>,
}

impl Succeeded {
    /// Counts a succeeded task; says which task's record, if any, is no longer kept
    /// (this one or one faster that it displaced).
    pub fn add(&mut self, record: &TaskRecord) -> Option<u32> {
        for (sketch, (_, _, value)) in self.sketches.iter_mut().zip(METRICS) {
            sketch.add(value(record));
        }
        self.keep(record)
    }

    /// Keeps a succeeded task's record if it is among the slowest (it was counted in
    /// the sketches already); says which task's record is no longer kept, if any.
    pub fn keep(&mut self, record: &TaskRecord) -> Option<u32> {
        self.slowest.push(Reverse((duration(record), record.index)));
        if self.slowest.len() > SUCCEEDED_KEPT {
            return self.slowest.pop().map(|Reverse((_, index))| index);
        }
        None
    }

    /// A task counted here is no longer succeeded (its output was lost); its record, if
    /// kept, is no longer among the slowest (the sketches keep what it measured).
    pub fn forget(&mut self, index: u32) {
        self.slowest.retain(|Reverse((_, i))| *i != index);
    }

    pub fn count(&self) -> u64 {
        self.sketches[0].count()
    }

    /// What it holds, in records: its sketches' values and buckets, its slowest.
    pub fn weight(&self) -> usize {
        self.sketches.iter().map(Sketch::weight).sum::<usize>() + self.slowest.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_exact_for_small_jobs_and_within_a_sixty_fourth_past_them() {
        let mut small = Sketch::default();
        for v in [5, 1, 9, 3, 7] {
            small.add(v);
        }
        assert_eq!([0.0, 0.25, 0.5, 0.75, 1.0].map(|q| small.quantile(q)), [1, 3, 5, 7, 9]);
        let mut big = Sketch::default();
        let values: Vec<u64> = (0..1_000_000u64).map(|i| (i * 7919) % 1_000_003 + 10).collect();
        for v in &values {
            big.add(*v);
        }
        let mut sorted = values.clone();
        sorted.sort_unstable();
        for q in [0.0, 0.01, 0.25, 0.5, 0.75, 0.99, 1.0] {
            let (got, want) = (big.quantile(q), quantile(&sorted, q));
            assert!(got.abs_diff(want) <= want / 64 + 1, "q {q}: {got} against {want}");
        }
        assert!(big.buckets.len() < 2000, "{} buckets", big.buckets.len());
    }

    #[test]
    fn buckets_hold_the_values_they_are_named_for() {
        for v in [0u64, 1, 127, 128, 129, 1000, 65_535, 1 << 40, u64::MAX] {
            let (low, high) = bounds(bucket(v));
            assert!(low <= v && (v < high || v == u64::MAX), "{v}: {low}..{high}");
        }
    }
}
