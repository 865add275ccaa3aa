//! Programs on the driver: a program's `main` runs in a sandboxed instance of its
//! component on a thread of its own; the datasets it makes are lineage kept here, and
//! each action it calls is cut into stages at every wide dependency (a stage: a source
//! or a shuffle read, the narrow steps after it, and what it writes) and run as a job
//! of those stages through the loop, as any submitted job runs. The program waits for
//! the job, and gets its last stage's records back.

use super::events::{JobHandle, PreparedJob};
use super::shared::{Control, Shared};
use crate::job::{JobRequest, SubmitError};
use flint_proto::program::{DatasetSource, Dependency, ProgramStage, StagePlan, Step};
use flint_proto::{JobError, JobId, JobPlan, JobProgress, JobReport, Settings, StageInput, StageReport};
use flint_runtime::{DatasetError, DatasetsHost, JobComponent, KillSwitch, TaskContext};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, watch};

/// The most datasets one program may make: each costs the driver a record.
pub const MAX_DATASETS: usize = 100_000;
/// The largest value a step or a dependency carries: it travels to executors with
/// every stage that runs it (a large value belongs in a dataset).
pub const MAX_CAPTURE: usize = 1 << 20;
/// The longest name of a function, a kind or an input a program gives.
pub const MAX_NAME: usize = 1024;

/// A step's or a dependency's names and value, within their bounds.
fn bounded(what: &str, names: &[&str], capture: &[u8]) -> Result<(), String> {
    if let Some(name) = names.iter().find(|n| n.len() > MAX_NAME) {
        return Err(format!("a {what} names {} bytes; at most {MAX_NAME}", name.len()));
    }
    if capture.len() > MAX_CAPTURE {
        return Err(format!(
            "a {what} carries a value of {} bytes; at most {MAX_CAPTURE} (give a large value as a dataset)",
            capture.len()
        ));
    }
    Ok(())
}

/// What a program asks of the driver (its handle, which starts programs, answers).
pub(super) trait Submitter: Clone + Send + Sync + 'static {
    fn shared(&self) -> &Arc<Shared>;
    /// Queues a job made ready here, shipping `bytes` as its component.
    fn submit_prepared(
        &self,
        job: PreparedJob,
        bytes: Arc<Vec<u8>>,
    ) -> impl Future<Output = Result<JobHandle, SubmitError>> + Send;
    /// A job id of the loop's numbering.
    fn new_job_id(&self) -> impl Future<Output = Result<JobId, SubmitError>> + Send;
    fn cancel(&self, job: JobId) -> impl Future<Output = flint_proto::wire::CancelReply> + Send;
}

/// A dataset as its program made it.
#[derive(Debug, Clone)]
enum Node {
    Source(DatasetSource),
    Narrow { parent: u32, step: Step },
    Wide { parents: Vec<u32>, dependency: Dependency },
}

/// A stage of an action, before its job is planned.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Draft {
    /// The dataset its tasks start from: a source, or a wide dependency they read.
    root: u32,
    plan: StagePlan,
    reads: Vec<u32>,
}

/// A program's datasets.
#[derive(Debug, Default)]
struct Lineage {
    nodes: Vec<Node>,
}

impl Lineage {
    fn add(&mut self, node: Node) -> Result<u32, String> {
        if self.nodes.len() >= MAX_DATASETS {
            return Err(format!("a program may make at most {MAX_DATASETS} datasets"));
        }
        self.nodes.push(node);
        Ok(self.nodes.len() as u32 - 1)
    }

    fn node(&self, id: u32) -> Result<&Node, String> {
        self.nodes.get(id as usize).ok_or_else(|| format!("no dataset {id}"))
    }

    /// The stages that compute `tail` (parents before children), the last writing
    /// `writes` or, for the action's own, nothing.
    fn cut(&self, tail: u32, writes: Option<Dependency>, stages: &mut Vec<Draft>) -> Result<u32, String> {
        let mut steps = Vec::new();
        let mut root = tail;
        while let Node::Narrow { parent, step } = self.node(root)? {
            steps.push(step.clone());
            root = *parent;
        }
        steps.reverse();
        let (reads, read) = match self.node(root)? {
            Node::Wide { parents, dependency } => {
                let mut reads = Vec::new();
                for &parent in parents {
                    reads.push(self.cut(parent, Some(dependency.clone()), stages)?);
                }
                (reads, Some(dependency.clone()))
            }
            _ => (Vec::new(), None),
        };
        stages.push(Draft { root, plan: StagePlan { reads: read, steps, writes }, reads });
        Ok(stages.len() as u32 - 1)
    }
}

/// The driver's side of one program's datasets.
struct ProgramHost<D> {
    id: JobId,
    kill: KillSwitch,
    driver: D,
    runtime: tokio::runtime::Handle,
    request: Arc<JobRequest>,
    component: Arc<JobComponent>,
    bytes: Arc<Vec<u8>>,
    settings: Settings,
    lineage: Lineage,
    /// Each source's partitions, planned once.
    planned: std::collections::HashMap<u32, JobPlan>,
    ran: Arc<std::sync::Mutex<Ran>>,
    /// What its `parallelize` calls gave, all together: the driver holds it.
    parallelized: u64,
    /// The keys the program and its tasks read.
    asked: Arc<flint_runtime::ConfAsked>,
    progress: watch::Sender<JobProgress>,
}

/// What a program's actions ran.
#[derive(Default)]
struct Ran {
    /// The reports of their jobs.
    reports: Vec<JobReport>,
    /// The first that failed, as its job said.
    failed: Option<JobError>,
}

impl<D: Submitter> ProgramHost<D> {
    /// The submission's inputs `name` picks: one as its submitter named it, one by its
    /// file name, or all of them.
    fn picked(&self, name: &str) -> Result<Vec<String>, String> {
        let request = &self.request;
        let names = match request.input_names.len() == request.inputs.len() {
            true => &request.input_names,
            false => &request.inputs,
        };
        let file_name = |input: &str| input.trim_end_matches('/').rsplit('/').next().map(str::to_owned);
        let picked: Vec<String> = names
            .iter()
            .zip(&request.inputs)
            .filter(|(given, _)| {
                name == "*" || given.as_str() == name || file_name(given).as_deref() == Some(name)
            })
            .map(|(_, url)| url.clone())
            .collect();
        if picked.is_empty() {
            let given = if names.is_empty() { "none".to_owned() } else { names.join(", ") };
            return Err(format!(
                "the program reads the input {name:?}, which the submission does not give (it gives: {given}); name one with --input"
            ));
        }
        Ok(picked)
    }

    /// A source's partitions, planned on first use as a submitted job's are.
    fn source_plan(&mut self, id: u32) -> Result<JobPlan, String> {
        if let Some(plan) = self.planned.get(&id) {
            return Ok(plan.clone());
        }
        let plan = match self.lineage.node(id)?.clone() {
            Node::Source(DatasetSource::TextFile(name)) => {
                let urls = self.picked(&name)?;
                let shared = self.driver.shared().clone();
                let uploads = self.request.uploads.clone();
                let partitions = self.request.partitions;
                let slots = shared.planning_slots();
                self.runtime
                    .block_on(async move {
                        let uploads = uploads.as_deref().map(crate::job::Uploads::path);
                        super::plan::plan(&shared, &urls, uploads, &[], partitions, slots).await
                    })
                    .map_err(|e| e.to_string())?
            }
            Node::Source(DatasetSource::Parallelize { records, slices }) => {
                let n = records.len();
                let slices = slices.clamp(1, n.max(1) as u32) as usize;
                let framed = (0..slices)
                    .map(|i| {
                        let mut framed = Vec::new();
                        for record in &records[i * n / slices..(i + 1) * n / slices] {
                            framed.extend_from_slice(&(record.len() as u32).to_le_bytes());
                            framed.extend_from_slice(record);
                        }
                        framed
                    })
                    .collect();
                JobPlan::encoded_values(framed)
            }
            Node::Source(DatasetSource::Range(n)) => JobPlan::indices(n),
            _ => return Err(format!("dataset {id} is not a source")),
        };
        if plan.is_empty() {
            return Err(format!("dataset {id}'s source has no partitions (an empty input?)"));
        }
        self.planned.insert(id, plan.clone());
        Ok(plan)
    }

    fn partitions_of(&mut self, id: u32) -> Result<u32, String> {
        match self.lineage.node(id)?.clone() {
            Node::Source(_) => Ok(self.source_plan(id)?.len() as u32),
            Node::Narrow { parent, .. } => self.partitions_of(parent),
            Node::Wide { dependency, .. } => Ok(dependency.partitions),
        }
    }

    /// Runs the job of an action's stages; its outputs.
    fn run(&mut self, tail: u32) -> Result<Vec<Vec<u8>>, DatasetError> {
        let job = self.planned_job(tail).map_err(DatasetError::Refused)?;
        self.submit(job).map_err(DatasetError::ActionFailed)
    }

    /// An action's job, its stages cut and planned.
    fn planned_job(&mut self, tail: u32) -> Result<PreparedJob, String> {
        let mut drafts = Vec::new();
        self.lineage.cut(tail, None, &mut drafts)?;
        let mut stages = Vec::with_capacity(drafts.len());
        let mut programs = Vec::with_capacity(drafts.len());
        let mut first = 0u32;
        for draft in &drafts {
            let input = match &draft.plan.reads {
                Some(dependency) => StageInput::Shuffled(dependency.partitions),
                None => StageInput::Source(self.source_plan(draft.root)?),
            };
            let tasks = match &input {
                StageInput::Shuffled(n) => *n,
                StageInput::Source(plan) => plan.len() as u32,
            };
            let writes = draft.plan.writes.as_ref().map(|d| d.partitions);
            // The tracker keeps a size for every slice of a shuffle.
            if let Some(partitions) = writes
                && u64::from(tasks) * u64::from(partitions) > flint_core::shuffle::MAX_SLICES
            {
                return Err(format!(
                    "a stage of {tasks} tasks writing {partitions} partitions: at most {} slices a shuffle",
                    flint_core::shuffle::MAX_SLICES
                ));
            }
            stages.push((input, draft.reads.clone(), writes));
            programs.push(ProgramStage { first, tasks, plan: draft.plan.clone() });
            first = first.saturating_add(tasks);
        }
        let plan = JobPlan::staged(stages);
        if plan.len() > u64::from(flint_proto::MAX_TASKS) {
            return Err(format!(
                "the action has {} tasks; at most {} a job",
                plan.len(),
                flint_proto::MAX_TASKS
            ));
        }
        let number = self.ran.lock().expect("ran lock").reports.len() + 1;
        let request = &self.request;
        let job = PreparedJob {
            name: format!("{} (action {number})", request.name),
            component: self.component.clone(),
            plan,
            config: request.config.clone(),
            deadline: request.deadline.unwrap_or(self.settings.task_deadline),
            settings: self.settings.clone(),
            memory_limit: request.memory_limit,
            token_services: request.token_services.clone(),
            every: None,
            shuffle: None,
            program: Some(Arc::new(programs)),
            asked: Some(self.asked.clone()),
            parts: None,
            output: None,
            uploads: request.uploads.clone(),
            speculate: !request.no_speculation,
        };
        Ok(job)
    }

    /// Submits an action's job and waits for it: its outputs, or why it failed.
    fn submit(&mut self, job: PreparedJob) -> Result<Vec<Vec<u8>>, String> {
        if self.kill.is_killed() {
            return Err("the program was cancelled".into());
        }
        let driver = self.driver.clone();
        let bytes = self.bytes.clone();
        let (id, kill) = (self.id, self.kill.clone());
        let report = self.runtime.block_on(async move {
            let handle: JobHandle = driver.submit_prepared(job, bytes).await.map_err(|e| e.to_string())?;
            // A cancel that came while the job was being made stops it now.
            let cancelled = {
                let mut programs = driver.shared().programs.lock().expect("programs lock");
                if let Some(c) = programs.get_mut(&id) {
                    c.action = Some(handle.id);
                }
                kill.is_killed()
            };
            if cancelled {
                let _ = driver.cancel(handle.id).await;
            }
            let report = handle.report.await.map_err(|_| "the driver stopped".to_owned());
            if let Some(c) = driver.shared().programs.lock().expect("programs lock").get_mut(&id) {
                c.action = None;
            }
            report
        })?;
        self.progress.send_modify(|p| {
            p.total += report.tasks;
            p.done += report.tasks;
        });
        let outcome = report.outcome.clone();
        let mut ran = self.ran.lock().expect("ran lock");
        ran.reports.push(report);
        match outcome {
            Ok(bytes) => postcard::from_bytes(&bytes).map_err(|e| format!("the action's records: {e}")),
            Err(error) => {
                let said = error.to_string();
                ran.failed.get_or_insert(error);
                Err(said)
            }
        }
    }
}

impl<D: Submitter> ProgramHost<D> {
    fn source_of(&mut self, source: DatasetSource) -> Result<u32, String> {
        match &source {
            DatasetSource::TextFile(name) => {
                bounded("source", &[name], &[])?;
                self.picked(name)?;
            }
            DatasetSource::Parallelize { records, .. } => {
                let size = records.iter().map(|r| r.len() as u64 + 4).sum::<u64>();
                let limit = self.settings.driver_max_result_size;
                if self.parallelized.saturating_add(size) > limit {
                    return Err(format!(
                        "parallelize of {size} bytes, after {} before: at most flint.driver.maxResultSize ({limit} bytes) a program",
                        self.parallelized
                    ));
                }
                self.parallelized += size;
            }
            DatasetSource::Range(0) => return Err("a range of no partitions".into()),
            DatasetSource::Range(n) if *n > flint_proto::MAX_TASKS => {
                return Err(format!("a range of {n} partitions; at most {}", flint_proto::MAX_TASKS));
            }
            DatasetSource::Range(_) => {}
        }
        self.lineage.add(Node::Source(source))
    }

    fn narrow_of(&mut self, parent: u32, step: Step) -> Result<u32, String> {
        self.lineage.node(parent)?;
        bounded("step", &[&step.kind, &step.function], &step.capture)?;
        const KINDS: [&str; 10] =
            ["map", "flat-map", "filter", "key-by", "map-values", "top", "fold", "count", "take", "sample"];
        if !KINDS.contains(&step.kind.as_str()) {
            return Err(format!("no step kind {:?}", step.kind));
        }
        self.lineage.add(Node::Narrow { parent, step })
    }

    fn wide_of(&mut self, parents: Vec<u32>, mut dependency: Dependency) -> Result<u32, String> {
        bounded("dependency", &[&dependency.kind, &dependency.function], &dependency.capture)?;
        let Some(wanted) = Dependency::parents(&dependency.kind) else {
            return Err(format!("no dependency kind {:?}", dependency.kind));
        };
        if parents.len() != wanted {
            return Err(format!("a {} of {} datasets; it takes {wanted}", dependency.kind, parents.len()));
        }
        if dependency.partitions == 0 {
            let mut largest = 1;
            for &parent in &parents {
                largest = largest.max(self.partitions_of(parent)?);
            }
            dependency.partitions = largest;
        }
        let limit = flint_core::shuffle::MAX_PARTITIONS;
        if dependency.partitions > limit {
            return Err(format!("a shuffle of {} partitions; at most {limit}", dependency.partitions));
        }
        for &parent in &parents {
            self.lineage.node(parent)?;
        }
        self.lineage.add(Node::Wide { parents, dependency })
    }
}

impl<D: Submitter> DatasetsHost for ProgramHost<D> {
    fn source(&mut self, source: DatasetSource) -> Result<u32, DatasetError> {
        self.source_of(source).map_err(DatasetError::Refused)
    }

    fn narrow(&mut self, parent: u32, step: Step) -> Result<u32, DatasetError> {
        self.narrow_of(parent, step).map_err(DatasetError::Refused)
    }

    fn wide(&mut self, parents: Vec<u32>, dependency: Dependency) -> Result<u32, DatasetError> {
        self.wide_of(parents, dependency).map_err(DatasetError::Refused)
    }

    fn partitions(&mut self, dataset: u32) -> Result<u32, DatasetError> {
        self.partitions_of(dataset).map_err(DatasetError::Refused)
    }

    fn collect(&mut self, dataset: u32) -> Result<Vec<Vec<u8>>, DatasetError> {
        self.lineage.node(dataset).map_err(DatasetError::Refused)?;
        self.run(dataset)
    }
}

/// Starts a program: its handle at once, its report when `main` returns.
pub(super) async fn start<D: Submitter>(
    driver: D,
    request: JobRequest,
    component: Arc<JobComponent>,
    bytes: Arc<Vec<u8>>,
    settings: Settings,
) -> Result<JobHandle, SubmitError> {
    if request.reduce_partitions.is_some() {
        return Err(SubmitError::Partitions(
            "a program sets the partitions of each of its shuffles itself".into(),
        ));
    }
    if request.output.is_some() || request.collect {
        return Err(SubmitError::Output("a program's result is what its main returns".into()));
    }
    let id = driver.new_job_id().await?;
    let (progress, progress_rx) = watch::channel(JobProgress::default());
    let (report, report_rx) = oneshot::channel();
    let shared = driver.shared().clone();
    let runtime = tokio::runtime::Handle::current();
    let request = Arc::new(request);
    let started = Instant::now();
    let asked: Arc<flint_runtime::ConfAsked> = Arc::default();
    let ctx = TaskContext {
        app_id: shared.app_id.clone(),
        job_id: id.to_string(),
        task_index: 0,
        task_count: 1,
        attempt: 0,
        config: Arc::new(request.config.clone()),
        asked: asked.clone(),
        tokens: Arc::new(shared.tokens()),
        memory_limit: request.memory_limit,
        deadline: request.deadline.unwrap_or(settings.task_deadline),
        spent: Duration::ZERO,
        deadline_key: "flint.task.deadline",
        max_result_size: settings.driver_max_result_size,
        kill: KillSwitch::default(),
        seed: None,
    };
    let kill = ctx.kill.clone();
    shared.programs.lock().expect("programs lock").insert(id, Control { kill: kill.clone(), action: None });
    let host = ProgramHost {
        id,
        kill: kill.clone(),
        driver,
        runtime,
        request: request.clone(),
        component: component.clone(),
        bytes,
        settings,
        lineage: Lineage::default(),
        planned: Default::default(),
        ran: Arc::default(),
        parallelized: 0,
        asked: asked.clone(),
        progress,
    };
    let ran = host.ran.clone();
    let name = request.name.clone();
    tracing::info!(job_id = id.0, job_name = %name, "program started");
    std::thread::Builder::new()
        .name(format!("flint-program-{id}"))
        .spawn(move || {
            let outcome = shared.runtime.program(&component, &ctx, Box::new(host));
            shared.programs.lock().expect("programs lock").remove(&id);
            let ran = std::mem::take(&mut *ran.lock().expect("ran lock"));
            let mut report_of = program_report(id, name, outcome, ran, started);
            if kill.is_killed() {
                report_of.outcome = Err(JobError::Cancelled("cancelled on request".into()));
            }
            if report_of.outcome.is_ok() {
                let (asked, full) = asked.seen();
                if !full {
                    report_of.warnings = super::warnings::unread_keys(&request.config, &asked);
                }
            }
            let _ = report.send(report_of);
        })
        .map_err(|_| SubmitError::DriverStopped)?;
    Ok(JobHandle { id, progress: progress_rx, report: report_rx })
}

/// The program's report: what `main` returned, and every action's job together.
fn program_report(
    id: JobId,
    name: String,
    outcome: flint_runtime::Outcome,
    ran: Ran,
    started: Instant,
) -> JobReport {
    let Ran { reports, failed } = ran;
    let outcome = match (outcome.result, failed) {
        (Ok(result), _) => Ok(result),
        // The action's own failure says more than the program's giving up on it.
        (Err(_), Some(error)) => Err(error),
        (Err(failure), None) => Err(JobError::Program(Box::new(failure))),
    };
    let mut stages: Vec<StageReport> = Vec::new();
    let (mut tasks, mut attempts, mut maps_rerun, mut handed, mut speculative, mut won) = (0, 0, 0, 0, 0, 0);
    let mut failures = Vec::new();
    let mut failures_dropped = 0;
    for report in reports {
        let (offset, first) = (stages.len() as u32, tasks);
        stages.extend(report.stages.into_iter().map(|mut s| {
            s.id += offset;
            s.first += first;
            s.parents.iter_mut().for_each(|p| *p += offset);
            s
        }));
        tasks += report.tasks;
        attempts += report.attempts;
        maps_rerun += report.maps_rerun;
        handed += report.outputs_handed_over;
        speculative += report.speculative;
        won += report.speculative_won;
        failures.extend(report.failures);
        failures_dropped += report.failures_dropped;
    }
    JobReport {
        job: id,
        name,
        outcome,
        tasks,
        attempts,
        maps_rerun,
        outputs_handed_over: handed,
        failures,
        failures_dropped,
        elapsed: started.elapsed(),
        shuffle: None,
        speculative,
        speculative_won: won,
        stages,
        warnings: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(kind: &str) -> Step {
        Step { kind: kind.into(), function: format!("f::{kind}"), capture: Vec::new() }
    }

    fn dependency(kind: &str, partitions: u32) -> Dependency {
        Dependency { kind: kind.into(), function: String::new(), capture: Vec::new(), partitions }
    }

    #[test]
    fn an_action_is_cut_at_every_wide_dependency_parents_first() {
        let mut lineage = Lineage::default();
        let text =
            |l: &mut Lineage, name: &str| l.add(Node::Source(DatasetSource::TextFile(name.into()))).unwrap();
        // a.map.filter ⋈ b.map, then a reduce, then a collect's narrow step.
        let a = text(&mut lineage, "a");
        let a = lineage.add(Node::Narrow { parent: a, step: step("map") }).unwrap();
        let a = lineage.add(Node::Narrow { parent: a, step: step("filter") }).unwrap();
        let b = text(&mut lineage, "b");
        let b = lineage.add(Node::Narrow { parent: b, step: step("map") }).unwrap();
        let joined =
            lineage.add(Node::Wide { parents: vec![a, b], dependency: dependency("join", 4) }).unwrap();
        let keyed = lineage.add(Node::Narrow { parent: joined, step: step("map") }).unwrap();
        let summed = lineage
            .add(Node::Wide { parents: vec![keyed], dependency: dependency("reduce-by-key", 2) })
            .unwrap();
        let tail = lineage.add(Node::Narrow { parent: summed, step: step("top") }).unwrap();
        let mut stages = Vec::new();
        assert_eq!(lineage.cut(tail, None, &mut stages), Ok(3));
        let kinds = |d: &Draft| d.plan.steps.iter().map(|s| s.kind.clone()).collect::<Vec<_>>();
        assert_eq!(
            stages.iter().map(kinds).collect::<Vec<_>>(),
            [vec!["map", "filter"], vec!["map"], vec!["map"], vec!["top"]]
        );
        // Each stage writes what its child reads; the children read their parents'.
        assert_eq!(stages[0].plan.writes, Some(dependency("join", 4)));
        assert_eq!(stages[1].plan.writes, Some(dependency("join", 4)));
        assert_eq!(
            (stages[2].reads.clone(), stages[2].plan.reads.clone()),
            (vec![0, 1], Some(dependency("join", 4)))
        );
        assert_eq!(stages[2].plan.writes, Some(dependency("reduce-by-key", 2)));
        assert_eq!((stages[3].reads.clone(), stages[3].plan.writes.clone()), (vec![2], None));
        assert_eq!((stages[0].root, stages[1].root, stages[2].root, stages[3].root), (0, 3, joined, summed));
        // A dataset the program never made is refused, not cut.
        assert!(lineage.cut(99, None, &mut Vec::new()).is_err());
    }

    #[test]
    fn a_value_too_large_to_travel_with_its_stages_is_refused_naming_the_bound() {
        assert!(bounded("step", &["map", "f::g"], &[0; 1024]).is_ok());
        let said = bounded("step", &["map"], &vec![0; MAX_CAPTURE + 1]).unwrap_err();
        assert!(said.contains("at most 1048576") && said.contains("as a dataset"), "{said}");
        assert!(
            bounded("dependency", &[&"k".repeat(MAX_NAME + 1)], &[]).unwrap_err().contains("at most 1024")
        );
    }
}
