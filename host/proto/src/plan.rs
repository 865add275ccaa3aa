//! A job's plan: its partitions, one task each, made as its tasks are launched. A plan
//! holds its inputs (files and their sizes, values, a count), never one descriptor per
//! task: ten million generated partitions or splits cost what one does.

use crate::job::{PartitionSpec, Source};
use serde::{Deserialize, Serialize};

/// The most tasks one job may have: 2³¹ − 1. Task indices travel as `u32`; the bound
/// keeps every count of a job's tasks (done plus running plus waiting) within an
/// `i32`, as the tools that read the status API (JavaScript's bit operations, Spark's
/// listeners) hold them. It costs the driver nothing: tasks cost bytes, not records.
pub const MAX_TASKS: u32 = i32::MAX as u32;

/// One stage of a job as the control core schedules it: its task count, the stages
/// whose shuffles its tasks read (each before it in the job's list, its `partitions`
/// equal to this stage's tasks: task `i` reads partition `i` of each), and, when its
/// tasks write a shuffle, into how many partitions. A job's tasks are numbered stage
/// after stage; a stage runs once every stage it reads has its outputs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageSpec {
    pub tasks: u32,
    pub reads: Vec<u32>,
    pub partitions: Option<u32>,
}

impl StageSpec {
    /// A stage of `tasks` tasks reading and writing no shuffle: a whole job of one.
    pub fn tasks(tasks: u32) -> StageSpec {
        StageSpec { tasks, reads: Vec::new(), partitions: None }
    }
}

/// A job split into partitions, one task each, stage after stage: a stage's tasks read
/// its source (generated indices, values or byte ranges of files) or their partition
/// of the shuffles it reads. A map/reduce job is two stages: its maps, then its reduce
/// partitions; a program's action as many as its plan has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobPlan {
    stages: Vec<Planned>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Planned {
    first: u32,
    input: Input,
    reads: Vec<u32>,
    writes: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Input {
    Maps(Maps),
    /// Partitions of the shuffles the stage reads (filled in at launch).
    Shuffled(u32),
}

/// What a stage of a [`JobPlan::staged`] plan reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StageInput {
    /// The source of a one-stage plan.
    Source(JobPlan),
    /// That many partitions of the shuffles it reads.
    Shuffled(u32),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Maps {
    Indices(u32),
    Values(Vec<Vec<u8>>),
    /// Files with their sizes and the index of their first split; every split but a
    /// file's last is `split` bytes.
    Splits {
        files: Vec<SplitFile>,
        split: u64,
        count: u32,
    },
}

impl Maps {
    fn tasks(&self) -> u32 {
        match self {
            Maps::Indices(n) => *n,
            Maps::Values(values) => values.len() as u32,
            Maps::Splits { count, .. } => *count,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct SplitFile {
    source: Source,
    size: u64,
    first: u32,
    /// Read whole: one split, whatever its size.
    whole: bool,
}

impl Planned {
    fn tasks(&self) -> u32 {
        match &self.input {
            Input::Maps(maps) => maps.tasks(),
            Input::Shuffled(n) => *n,
        }
    }
}

impl JobPlan {
    fn of(maps: Maps) -> JobPlan {
        JobPlan {
            stages: vec![Planned { first: 0, input: Input::Maps(maps), reads: Vec::new(), writes: None }],
        }
    }

    /// Generated partitions `0..n`.
    pub fn indices(n: u32) -> JobPlan {
        JobPlan::of(Maps::Indices(n))
    }

    /// One partition per value.
    pub fn values(values: &[serde_json::Value]) -> JobPlan {
        let encoded = values.iter().map(|v| serde_json::to_vec(v).expect("a JSON value encodes")).collect();
        JobPlan::of(Maps::Values(encoded))
    }

    /// One partition per value, as encoded.
    pub fn encoded_values(values: Vec<Vec<u8>>) -> JobPlan {
        JobPlan::of(Maps::Values(values))
    }

    /// Splits inputs (source, size in bytes) into about `target` byte ranges of equal size,
    /// as Hadoop's input format does: a range never spans two files, and every
    /// non-empty file gets at least one. The reader of a range takes the lines whose
    /// first byte falls in it, so ranges need not fall on line boundaries. The count
    /// saturates at [`MAX_TASKS`] (the driver refuses such a plan).
    pub fn file_splits(files: &[(Source, u64)], target: u32) -> JobPlan {
        let total: u64 = files.iter().map(|(_, size)| size).sum();
        let split = total.div_ceil(u64::from(target.max(1))).max(1);
        let mut planned = Vec::new();
        let mut count = 0u64;
        for (source, size) in files.iter().filter(|(_, size)| *size > 0) {
            let whole = source.whole_only();
            let first = count.min(u64::from(MAX_TASKS)) as u32;
            planned.push(SplitFile { source: source.clone(), size: *size, first, whole });
            count += if whole { 1 } else { size.div_ceil(split) };
        }
        let count = count.min(u64::from(MAX_TASKS) + 1).min(u64::from(u32::MAX)) as u32;
        JobPlan::of(Maps::Splits { files: planned, split, count })
    }

    /// The same maps, followed by `reduces` reduce partitions (whose sources are known
    /// only once the maps ran, and are filled in at launch).
    pub fn with_reduces(self, reduces: u32) -> JobPlan {
        if reduces == 0 {
            return self;
        }
        JobPlan::staged(vec![
            (StageInput::Source(self), Vec::new(), Some(reduces)),
            (StageInput::Shuffled(reduces), vec![0], None),
        ])
    }

    /// A plan of stages in order, each with the stages whose shuffles it reads and the
    /// partitions of the shuffle it writes (the control core checks that they fit).
    pub fn staged(stages: Vec<(StageInput, Vec<u32>, Option<u32>)>) -> JobPlan {
        let mut planned = Vec::with_capacity(stages.len());
        let mut first = 0u32;
        for (input, reads, writes) in stages {
            let input = match input {
                StageInput::Source(mut plan) => plan.stages.swap_remove(0).input,
                StageInput::Shuffled(n) => Input::Shuffled(n),
            };
            let stage = Planned { first, input, reads, writes };
            first = first.saturating_add(stage.tasks());
            planned.push(stage);
        }
        JobPlan { stages: planned }
    }

    /// The first stage's partitions (a map/reduce job's maps).
    pub fn maps(&self) -> u32 {
        self.stages.first().map_or(0, Planned::tasks)
    }

    /// The plan's stages, as the control core schedules them.
    pub fn stages(&self) -> Vec<StageSpec> {
        self.stages
            .iter()
            .map(|s| StageSpec { tasks: s.tasks(), reads: s.reads.clone(), partitions: s.writes })
            .collect()
    }

    /// Partitions, every stage's together.
    pub fn len(&self) -> u64 {
        self.stages.iter().map(|s| u64::from(s.tasks())).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Partition `index`, made now; `None` past the plan's end. A partition of a stage
    /// that reads shuffles names the first it reads, its sources left for the launch.
    pub fn partition(&self, index: u32) -> Option<PartitionSpec> {
        let stage = &self.stages[self.stages.partition_point(|s| s.first <= index).checked_sub(1)?];
        let index = index - stage.first;
        if index >= stage.tasks() {
            return None;
        }
        let maps = match &stage.input {
            Input::Shuffled(_) => {
                return Some(PartitionSpec::Reduce {
                    partition: index,
                    shuffle: stage.reads.first().copied().unwrap_or(0),
                    sources: Vec::new(),
                    inline: Vec::new(),
                });
            }
            Input::Maps(maps) => maps,
        };
        Some(match maps {
            Maps::Indices(_) => PartitionSpec::Index(index),
            Maps::Values(values) => PartitionSpec::Value(values[index as usize].clone()),
            Maps::Splits { files, split, .. } => {
                let file = &files[files.partition_point(|f| f.first <= index) - 1];
                let (start, end) = if file.whole {
                    (0, file.size)
                } else {
                    let start = u64::from(index - file.first) * split;
                    (start, (start + split).min(file.size))
                };
                PartitionSpec::Split { source: file.source.clone(), start, end, size: file.size }
            }
        })
    }

    /// The files the plan reads, each once a stage.
    pub fn sources(&self) -> impl Iterator<Item = &Source> {
        self.stages
            .iter()
            .flat_map(|stage| match &stage.input {
                Input::Maps(Maps::Splits { files, .. }) => files.as_slice(),
                _ => &[],
            })
            .map(|f| &f.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(plan: &JobPlan) -> Vec<(String, u64, u64)> {
        (0..plan.maps())
            .map(|i| match plan.partition(i).unwrap() {
                PartitionSpec::Split { source, start, end, .. } => (source.to_string(), start, end),
                other => panic!("not a split: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_compressed_input_is_one_split_whatever_the_target() {
        let gz = Source::S3 { bucket: "b".into(), key: "logs/day.GZ".into() };
        let files =
            [(Source::File("a.txt".into()), 100), (gz, 1000), (Source::Driver("/d/x.zst".into()), 10)];
        let plan = JobPlan::file_splits(&files, 50);
        let whole: Vec<_> = ranges(&plan).into_iter().filter(|(name, ..)| !name.ends_with(".txt")).collect();
        assert_eq!(whole, [("s3://b/logs/day.GZ".into(), 0, 1000), ("flint:///d/x.zst".into(), 0, 10)]);
        assert!(ranges(&plan).iter().filter(|(name, ..)| name.ends_with(".txt")).count() > 1);
        assert_eq!(
            crate::Compression::of(&Source::Http("https://h/a.zstd?x=1".into())),
            Some(crate::Compression::Zstd)
        );
        assert_eq!(crate::Compression::of(&Source::File("a.gzip.txt".into())), None);
    }

    #[test]
    fn splits_cover_every_byte_once_and_never_span_files() {
        let file = |name: &str| Source::File(name.into());
        let files = vec![(file("a"), 10), (file("empty"), 0), (file("b"), 25)];
        let plan = JobPlan::file_splits(&files, 4);
        let r = ranges(&plan);
        // 35 bytes in 4 parts: splits of 9 bytes, cut again at the file boundary.
        assert_eq!(
            r,
            vec![
                ("a".into(), 0, 9),
                ("a".into(), 9, 10),
                ("b".into(), 0, 9),
                ("b".into(), 9, 18),
                ("b".into(), 18, 25)
            ]
        );
        assert_eq!(plan.partition(5), None);
        assert_eq!(plan.sources().count(), 2, "the empty file has no split");
    }

    #[test]
    fn one_partition_per_index_or_value_and_reduces_after_the_maps() {
        assert_eq!(JobPlan::indices(3).len(), 3);
        let plan = JobPlan::values(&[serde_json::json!(1), serde_json::json!({"a": 2})]);
        assert_eq!(plan.partition(1), Some(PartitionSpec::Value(br#"{"a":2}"#.to_vec())));
        let plan = JobPlan::indices(2).with_reduces(3);
        assert_eq!((plan.maps(), plan.len()), (2, 5));
        assert!(matches!(plan.partition(4), Some(PartitionSpec::Reduce { partition: 2, .. })));
        assert_eq!(plan.partition(5), None);
    }

    #[test]
    fn ten_million_splits_are_one_file_in_the_plan_and_made_as_asked() {
        let big = Source::S3 { bucket: "b".into(), key: "huge.txt".into() };
        let plan = JobPlan::file_splits(&[(big, 10_000_000_000)], 10_000_000);
        assert_eq!(plan.maps(), 10_000_000);
        let last = plan.partition(9_999_999).unwrap();
        assert!(
            matches!(last, PartitionSpec::Split { start: 9_999_999_000, end: 10_000_000_000, .. }),
            "{last:?}"
        );
        // A plan past the bound says so by its count, for the driver to refuse.
        let plan = JobPlan::file_splits(&[(Source::File("x".into()), u64::MAX / 2)], u32::MAX);
        assert!(plan.len() > u64::from(MAX_TASKS));
    }
}
