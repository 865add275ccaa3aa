//! A job's stages as the control core keeps them: where each stage's tasks start, the
//! shuffle it writes (numbered by the stage) and those it reads, what its attempts
//! cost, and how many attempts of it in a row could not read their inputs.
//!
//! Lineage is lazy, as Spark's: outputs of a stage that are gone are made again only
//! while a stage that reads them still has tasks to run ([`Dag::needing`]), however
//! deep the chain of stages whose outputs went with them.

use crate::scheduler::StagePlan;
use crate::shuffle::{MapOutputTracker, ShuffleId};
use flint_proto::{JobId, MAX_TASKS, StageKind, StageReport, StageSpec};

/// The most stages one job may have: each costs the core a record, and every view of
/// the job one entry.
pub const MAX_STAGES: usize = 1024;

/// Why a job's stages cannot be scheduled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("a job needs at least one stage")]
    NoStages,
    #[error("stage {stage} reads stage {parent}, which is not before it")]
    NotBefore { stage: u32, parent: u32 },
    #[error("stage {stage} reads stage {parent}, which writes no shuffle")]
    NoShuffle { stage: u32, parent: u32 },
    #[error("stage {stage} reads stage {parent} twice")]
    ReadTwice { stage: u32, parent: u32 },
    #[error("stage {stage} has {tasks} tasks but reads the {partitions} partitions of stage {parent}")]
    Partitions { stage: u32, tasks: u32, parent: u32, partitions: u32 },
    #[error("stage {stage}'s shuffle is never read")]
    Unread { stage: u32 },
    #[error("the job has more than {MAX_TASKS} tasks")]
    TooManyTasks,
    #[error("the job has more than {MAX_STAGES} stages")]
    TooManyStages,
}

#[derive(Debug)]
struct Stage {
    spec: StageSpec,
    first: u32,
    readers: Vec<u32>,
    /// Its tasks done now (as the scheduler decided: lost outputs count them again).
    done: u32,
    attempts: u32,
    rerun: u32,
    fetch_failures: u32,
    /// Attempts of the stage in a row whose tasks could not read their inputs; back to
    /// 0 when the stage has every task done.
    failed_attempts: u32,
    /// The current attempt of the stage has failed already: more fetch failures before
    /// its inputs are whole again are the same attempt's.
    failing: bool,
}

#[derive(Debug)]
pub(super) struct Dag {
    stages: Vec<Stage>,
}

impl Dag {
    pub(super) fn new(specs: Vec<StageSpec>) -> Result<Dag, PlanError> {
        if specs.is_empty() {
            return Err(PlanError::NoStages);
        }
        if specs.len() > MAX_STAGES {
            return Err(PlanError::TooManyStages);
        }
        let mut first = 0u64;
        let mut stages: Vec<Stage> = Vec::with_capacity(specs.len());
        for (i, spec) in specs.into_iter().enumerate() {
            let stage = i as u32;
            for (n, &parent) in spec.reads.iter().enumerate() {
                let Some(p) = stages.get(parent as usize) else {
                    return Err(PlanError::NotBefore { stage, parent });
                };
                if spec.reads[..n].contains(&parent) {
                    return Err(PlanError::ReadTwice { stage, parent });
                }
                match p.spec.partitions {
                    None => return Err(PlanError::NoShuffle { stage, parent }),
                    Some(partitions) if partitions != spec.tasks => {
                        return Err(PlanError::Partitions { stage, tasks: spec.tasks, parent, partitions });
                    }
                    Some(_) => {}
                }
            }
            for &parent in &spec.reads {
                stages[parent as usize].readers.push(stage);
            }
            let start = first as u32;
            first += u64::from(spec.tasks);
            if first > u64::from(MAX_TASKS) {
                return Err(PlanError::TooManyTasks);
            }
            stages.push(Stage {
                spec,
                first: start,
                readers: Vec::new(),
                done: 0,
                attempts: 0,
                rerun: 0,
                fetch_failures: 0,
                failed_attempts: 0,
                failing: false,
            });
        }
        if let Some((i, _)) =
            stages.iter().enumerate().find(|(_, s)| s.spec.partitions.is_some() && s.readers.is_empty())
        {
            return Err(PlanError::Unread { stage: i as u32 });
        }
        Ok(Dag { stages })
    }

    pub(super) fn tasks(&self) -> u32 {
        self.stages.last().map_or(0, |s| s.first + s.spec.tasks)
    }

    /// The stages as the scheduler takes them.
    pub(super) fn plans(&self) -> Vec<StagePlan> {
        self.stages.iter().map(|s| StagePlan { tasks: s.spec.tasks, parents: s.spec.reads.clone() }).collect()
    }

    /// Whether the job is a single stage reading and writing no shuffle.
    pub(super) fn is_single(&self) -> bool {
        self.stages.len() == 1 && self.stages[0].spec.partitions.is_none()
    }

    /// The shuffles the job writes: (stage, maps, partitions).
    pub(super) fn shuffles(&self) -> impl Iterator<Item = (u32, u32, u32)> + '_ {
        self.stages
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.spec.partitions.map(|p| (i as u32, s.spec.tasks, p)))
    }

    /// The stage of the job's task `index`, and the task's index within it.
    pub(super) fn stage_of(&self, index: u32) -> Option<(u32, u32)> {
        let stage = self.stages.partition_point(|s| s.first <= index).checked_sub(1)?;
        let s = &self.stages[stage];
        (index - s.first < s.spec.tasks).then_some((stage as u32, index - s.first))
    }

    /// Whether stage `stage` writes a shuffle.
    pub(super) fn writes(&self, stage: u32) -> bool {
        self.stages.get(stage as usize).is_some_and(|s| s.spec.partitions.is_some())
    }

    /// The stages stage `stage` reads.
    pub(super) fn reads(&self, stage: u32) -> &[u32] {
        self.stages.get(stage as usize).map_or(&[], |s| &s.spec.reads)
    }

    pub(super) fn first(&self, stage: u32) -> u32 {
        self.stages[stage as usize].first
    }

    /// A task of the job was decided done (`true`) or its output lost (`false`).
    pub(super) fn task(&mut self, index: u32, done: bool) {
        let Some((stage, _)) = self.stage_of(index) else { return };
        let s = &mut self.stages[stage as usize];
        if done {
            s.done = (s.done + 1).min(s.spec.tasks);
            if s.done == s.spec.tasks {
                s.failed_attempts = 0;
                s.failing = false;
            }
        } else {
            s.done = s.done.saturating_sub(1);
            s.rerun += 1;
        }
    }

    pub(super) fn launched(&mut self, index: u32) {
        if let Some((stage, _)) = self.stage_of(index) {
            self.stages[stage as usize].attempts += 1;
        }
    }

    /// A task of `stage` could not read its inputs: the stage's attempt failed, the
    /// first time since they were last whole. The stage's failed attempts in a row.
    pub(super) fn fetch_failed(&mut self, stage: u32) -> u32 {
        let s = &mut self.stages[stage as usize];
        s.fetch_failures += 1;
        if !s.failing {
            s.failing = true;
            s.failed_attempts += 1;
        }
        s.failed_attempts
    }

    /// Shuffle `stage` is whole again: its readers' next fetch failures are a new
    /// attempt of theirs.
    pub(super) fn whole(&mut self, stage: u32) {
        let readers = self.stages[stage as usize].readers.clone();
        for r in readers {
            self.stages[r as usize].failing = false;
        }
    }

    /// The job's tasks whose outputs must be made again: the missing outputs of every
    /// shuffle a stage still to run reads, that stage counting as still to run when it
    /// has tasks not done or outputs of its own about to be made again. Tasks never
    /// done are among them; the scheduler passes over those.
    pub(super) fn needing(&self, job: JobId, tracker: &MapOutputTracker) -> Vec<u32> {
        let mut again = vec![false; self.stages.len()];
        let mut missing: Vec<Vec<u32>> = vec![Vec::new(); self.stages.len()];
        for (stage, _, _) in self.shuffles() {
            missing[stage as usize] = tracker.missing(ShuffleId { job, index: stage }).unwrap_or_default();
        }
        // Readers come after the stages they read: one pass from the last stage back
        // sees every reader's state before its parents'.
        for stage in (0..self.stages.len()).rev() {
            let s = &self.stages[stage];
            let to_run = |r: &u32| {
                let reader = &self.stages[*r as usize];
                reader.done < reader.spec.tasks || again[*r as usize]
            };
            if !missing[stage].is_empty() && s.readers.iter().any(to_run) {
                again[stage] = true;
            }
        }
        let mut tasks = Vec::new();
        for (stage, maps) in missing.iter().enumerate() {
            if again[stage] {
                tasks.extend(maps.iter().map(|m| self.stages[stage].first + m));
            }
        }
        tasks
    }

    /// The stages as the report shows them.
    pub(super) fn report(&self, job: JobId, tracker: &MapOutputTracker) -> Vec<StageReport> {
        let sizes = |stage: u32| tracker.sizes(ShuffleId { job, index: stage });
        self.stages
            .iter()
            .enumerate()
            .map(|(i, s)| StageReport {
                id: i as u32,
                kind: if s.spec.partitions.is_some() { StageKind::Shuffle } else { StageKind::Result },
                first: s.first,
                tasks: s.spec.tasks,
                done: s.done,
                parents: s.spec.reads.clone(),
                attempts: s.attempts,
                rerun_tasks: s.rerun,
                fetch_failures: s.fetch_failures,
                shuffle_write_bytes: s.spec.partitions.and_then(|_| sizes(i as u32)).map_or(0, |z| z.bytes),
                shuffle_read_bytes: s.spec.reads.iter().filter_map(|&p| sizes(p)).map(|z| z.bytes).sum(),
                skipped: false,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(tasks: u32, reads: &[u32], partitions: Option<u32>) -> StageSpec {
        StageSpec { tasks, reads: reads.to_vec(), partitions }
    }

    #[test]
    fn plans_that_cannot_run_are_refused_naming_the_stage() {
        let refused = |specs: Vec<StageSpec>| Dag::new(specs).unwrap_err().to_string();
        assert_eq!(refused(vec![]), "a job needs at least one stage");
        assert!(refused(vec![spec(2, &[1], None), spec(2, &[], Some(2))]).contains("stage 0 reads stage 1"));
        assert!(refused(vec![spec(2, &[], None), spec(2, &[0], None)]).contains("writes no shuffle"));
        assert!(refused(vec![spec(2, &[], Some(3)), spec(2, &[0], None)]).contains("3 partitions"));
        assert!(refused(vec![spec(2, &[], Some(2)), spec(2, &[0, 0], None)]).contains("twice"));
        assert!(refused(vec![spec(2, &[], Some(2))]).contains("never read"));
        assert!(refused(vec![spec(u32::MAX, &[], Some(1)), spec(1, &[0], None)]).contains("more than"));
        assert!(refused(vec![spec(1, &[], None); MAX_STAGES + 1]).contains("stages"));
    }

    #[test]
    fn a_task_index_is_found_in_its_stage() {
        let dag =
            Dag::new(vec![spec(3, &[], Some(2)), spec(0, &[], Some(2)), spec(2, &[0, 1], None)]).unwrap();
        assert_eq!(dag.tasks(), 5);
        let found: Vec<_> = (0..6).map(|i| dag.stage_of(i)).collect();
        assert_eq!(found, [Some((0, 0)), Some((0, 1)), Some((0, 2)), Some((2, 0)), Some((2, 1)), None]);
    }

    #[test]
    fn a_stage_counts_one_failed_attempt_until_its_inputs_are_whole_again() {
        let mut dag = Dag::new(vec![spec(2, &[], Some(2)), spec(2, &[0], None)]).unwrap();
        assert_eq!(dag.fetch_failed(1), 1);
        assert_eq!(dag.fetch_failed(1), 1, "a second task of the same attempt");
        dag.whole(0);
        assert_eq!(dag.fetch_failed(1), 2);
        dag.task(2, true);
        dag.task(3, true);
        dag.whole(0);
        assert_eq!(dag.fetch_failed(1), 1, "the stage finished in between");
    }
}
