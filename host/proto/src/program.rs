//! A program's stages as the host carries them to executors: each stage's plan (what
//! its tasks read, the narrow steps they run in the guest, what they write), named as
//! the `flint:task` contract's `stage.plan` names them. The host reads a plan's kinds
//! and partitions; its functions and captures are the guest's to read.

use serde::{Deserialize, Serialize};

/// Where a program's dataset starts, as its `main` asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatasetSource {
    /// The lines of the submission's inputs a name picks.
    TextFile(String),
    /// The program's own records (encoded by its SDK), in `slices` partitions.
    Parallelize { records: Vec<Vec<u8>>, slices: u32 },
    /// Generated partitions.
    Range(u32),
}

/// A narrow step: a function of the component applied in the guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    pub kind: String,
    pub function: String,
    pub capture: Vec<u8>,
}

/// A wide dependency: records moved by key into `partitions` partitions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dependency {
    pub kind: String,
    pub function: String,
    pub capture: Vec<u8>,
    pub partitions: u32,
}

/// The dependency kinds a program may name.
pub const DEPENDENCIES: [&str; 8] = [
    "reduce-by-key",
    "group-by-key",
    "join",
    "left-outer-join",
    "cogroup",
    "distinct",
    "repartition",
    "sort-by-key",
];

impl Dependency {
    /// How many parents a dependency of `kind` has, if it is one.
    pub fn parents(kind: &str) -> Option<usize> {
        match kind {
            "join" | "left-outer-join" | "cogroup" => Some(2),
            kind if DEPENDENCIES.contains(&kind) => Some(1),
            _ => None,
        }
    }
}

/// A stage as its tasks run it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagePlan {
    /// The dependency its tasks read; none for a stage over a source.
    pub reads: Option<Dependency>,
    pub steps: Vec<Step>,
    /// The dependency its tasks write; none for the stage of an action.
    pub writes: Option<Dependency>,
}

/// A stage of a program's job: its plan and where its tasks are in the job's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramStage {
    pub first: u32,
    pub tasks: u32,
    pub plan: StagePlan,
}

/// The stage task `index` of a job of `stages` belongs to, with its index in the stage.
pub fn stage_of(stages: &[ProgramStage], index: u32) -> Option<(&ProgramStage, u32)> {
    let at = stages.partition_point(|s| s.first <= index).checked_sub(1)?;
    let stage = &stages[at];
    (index - stage.first < stage.tasks).then(|| (stage, index - stage.first))
}
