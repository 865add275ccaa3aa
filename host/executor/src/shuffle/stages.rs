//! A program's tasks on an executor: a stage's plan run in the job's instance between
//! what the task reads (its source partition, or its partition of each shuffle its
//! stage reads, merged) and what it writes (a shuffle through a [`MapWriter`], or the
//! task's output).

use super::write::MapWriter;
use crate::core::{ExecutorCore, StageRead, Taken};
use flint_proto::{TaskFailure, TaskLaunch, TaskOutput, TaskState};
use flint_runtime::{StageInput, TaskContext};

impl ExecutorCore {
    pub(crate) fn run_stage(
        &self,
        launch: &TaskLaunch,
        mut taken: Taken<'_>,
        ctx: &TaskContext,
        read: StageRead,
    ) -> (TaskState, String) {
        let host =
            |message: &str| (TaskState::Failed(TaskFailure::Host { message: message.into() }), String::new());
        let stages = launch.job.program.as_deref().map(Vec::as_slice).unwrap_or_default();
        let Some((stage, _)) = flint_proto::program::stage_of(stages, launch.attempt.index) else {
            return host("a program's task past its job's stages");
        };
        let input = match read {
            StageRead::Source(input) => StageInput::Source(input),
            StageRead::Shuffled { partition, runs } => StageInput::Shuffled { partition, source: runs },
        };
        let Some(writes) = &stage.plan.writes else {
            let (outcome, _) = taken.held().instance.stage::<MapWriter>(ctx, &stage.plan, input, None);
            return self.task_ended(launch, taken, ctx, outcome);
        };
        let Some(files) = &self.shuffle else { return host("this executor has no folder for shuffle files") };
        let budget = self.blocks().limit() / u64::from(self.runtime().slots());
        // Named by the task's index in the job: every shuffle of the job has its own maps.
        let writer = MapWriter::new(
            files.clone(),
            launch.job.job,
            launch.attempt.index,
            writes.partitions,
            budget as usize,
        );
        let (outcome, writer) = taken.held().instance.stage(ctx, &stage.plan, input, Some(writer));
        let Some(writer) = writer else { return host("the stage's writer did not come back") };
        let state = match outcome.result {
            _ if writer.refused().is_some() => TaskState::Failed(writer.refused().expect("checked").clone()),
            Ok(_) if ctx.kill.is_killed() => TaskState::Failed(TaskFailure::Killed {
                reason: "killed as its shuffle output was written".into(),
            }),
            // The guest combined what it could; keys its spills hold twice are combined
            // where they are read.
            Ok(_) => match writer.finish(None) {
                Ok(status) => TaskState::Succeeded(TaskOutput::Map(status)),
                Err(failure) => TaskState::Failed(failure),
            },
            Err(failure) => TaskState::Failed(failure),
        };
        self.keep_instance(launch, taken, ctx, &state);
        (state, outcome.log)
    }
}
