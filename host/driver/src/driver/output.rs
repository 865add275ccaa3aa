//! A map/reduce job's part output, on the driver's side: a directory or an `s3://`
//! prefix made ready and claimed when the job is taken; each reduce partition's part
//! committed from the one attempt the core accepted (Spark's output commit
//! coordinator: a retried, repeated or late attempt is never in place); and the job's
//! end, once every commit is in: the attempts' leftovers gone and, when it succeeded,
//! `_SUCCESS` written last.

use crate::job::SubmitError;
use flint_data::{ObjectOutput, ObjectReader, OutputError};
use flint_proto::{JobError, Parts, Settings, Token};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

pub(super) const OUTPUT_ROOTS: &str = "flint.output.roots";

/// Commits of one job under way at once (a commit is a rename, or a copy and a delete
/// in the store).
const COMMITS_AT_ONCE: usize = 8;

/// Where a job's parts go, claimed for it.
pub(super) enum Output {
    /// A directory, resolved; its `_temporary` is the claim, removed when this goes,
    /// however the job ends.
    Dir { dir: PathBuf, _claim: DirClaim },
    /// A prefix in a bucket; its `_temporary/` is swept when the job ends.
    Objects(ObjectOutput),
}

/// Makes a job's output ready: `s3://bucket/prefix/`, or a directory (absolute, under
/// the driver's `flint.output.roots` once its links are resolved, made if missing),
/// holding no earlier job's parts (as Spark refuses an output path that exists), and
/// claimed (one job wins a race for it). Returns what the executors are told, and the
/// output held.
pub(super) async fn prepare(
    settings: &Settings,
    objects: &ObjectReader,
    tokens: &[Token],
    output: &str,
) -> Result<(Parts, Output), SubmitError> {
    let refuse = |reason: String| SubmitError::Output(format!("{output}: {reason}"));
    if let Some(rest) = output.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let prefix = prefix.trim_matches('/');
        if bucket.is_empty() || prefix.is_empty() {
            return Err(refuse("an s3:// output names a bucket and a prefix: s3://bucket/prefix/".into()));
        }
        let store = objects.output(bucket, prefix, tokens).map_err(|e| refuse(e.to_string()))?;
        store.claim().await.map_err(|e: OutputError| refuse(e.to_string()))?;
        let parts = Parts::S3 { bucket: bucket.to_owned(), prefix: prefix.to_owned() };
        return Ok((parts, Output::Objects(store)));
    }
    if output.contains("://") {
        return Err(refuse("outputs are absolute paths or s3://bucket/prefix/".into()));
    }
    let (dir, claim) = prepare_dir(settings, output).await.map_err(refuse)?;
    Ok((Parts::Files(dir.to_string_lossy().into_owned()), Output::Dir { dir, _claim: claim }))
}

async fn prepare_dir(settings: &Settings, dir: &str) -> Result<(PathBuf, DirClaim), String> {
    if !dir.starts_with('/') {
        return Err("not an absolute path".into());
    }
    // `..` after a folder that does not exist yet would be resolved only once it is
    // made: refused, so what is made always lies under the ancestor checked below.
    let mut so_far = PathBuf::new();
    for part in Path::new(dir).components() {
        if part == std::path::Component::ParentDir && !tokio::fs::try_exists(&so_far).await.unwrap_or(false) {
            return Err(format!(
                "`..` after {}, which does not exist: name the directory itself",
                so_far.display()
            ));
        }
        so_far.push(part);
    }
    let mut roots = Vec::new();
    for root in &settings.output_roots {
        if let Ok(root) = tokio::fs::canonicalize(root).await {
            roots.push(root);
        }
    }
    // The nearest existing ancestor decides where the directory really is.
    let path = Path::new(dir);
    let existing = path.ancestors().find(|a| a.exists()).unwrap_or(Path::new("/"));
    let real = tokio::fs::canonicalize(existing).await.map_err(|e| e.to_string())?;
    let outside = || {
        let set = &settings.output_roots;
        let set = if set.is_empty() { "none are set".to_owned() } else { set.join(", ") };
        format!(
            "outside {OUTPUT_ROOTS} ({set}); the driver's and executors' operator allows directories with --conf {OUTPUT_ROOTS}=/dir,…"
        )
    };
    if !roots.iter().any(|root| real.starts_with(root)) {
        return Err(outside());
    }
    tokio::fs::create_dir_all(path).await.map_err(|e| e.to_string())?;
    // Checked again where it was made (a link put in its way meanwhile).
    let real = tokio::fs::canonicalize(path).await.map_err(|e| e.to_string())?;
    if !roots.iter().any(|root| real.starts_with(root)) {
        return Err(outside());
    }
    let mut entries = tokio::fs::read_dir(&real).await.map_err(|e| e.to_string())?;
    while let Some(entry) = entries.next_entry().await.map_err(|e| e.to_string())? {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name == Parts::TEMPORARY {
            return Err(format!(
                "holds {name}: another job is writing there, or one that did not end cleanly (name a new directory, or remove it)"
            ));
        }
        if name.starts_with("part-") || name == Parts::SUCCESS {
            return Err(format!("holds {name} of an earlier job: name a new directory or remove it"));
        }
    }
    let temporary = real.join(Parts::TEMPORARY);
    match tokio::fs::create_dir(&temporary).await {
        Ok(()) => Ok((real, DirClaim { temporary })),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            Err(format!("holds {}: another job is writing there (name a new directory)", Parts::TEMPORARY))
        }
        Err(e) => Err(e.to_string()),
    }
}

impl Output {
    /// Puts the part attempt `number` of reduce `partition` wrote in place.
    async fn commit(&self, partition: u32, number: u32) -> Result<(), String> {
        match self {
            Output::Dir { dir, .. } => {
                let (written, part) =
                    (dir.join(Parts::attempt_path(partition, number)), dir.join(Parts::part_name(partition)));
                tokio::fs::rename(&written, &part)
                    .await
                    .map_err(|e| format!("cannot commit {}: {e}", part.display()))
            }
            Output::Objects(store) => store
                .commit(partition, number)
                .await
                .map_err(|e| format!("cannot commit {}: {e}", Parts::part_name(partition))),
        }
    }

    /// Sweeps the attempts' leftovers and, when the job `succeeded`, writes `_SUCCESS`.
    async fn end(&self, succeeded: bool) -> Result<(), String> {
        match self {
            Output::Dir { dir, .. } => {
                let _ = tokio::fs::remove_dir_all(dir.join(Parts::TEMPORARY)).await;
                if succeeded {
                    let success = dir.join(Parts::SUCCESS);
                    tokio::fs::File::create(&success)
                        .await
                        .map_err(|e| format!("cannot write {}: {e}", success.display()))?;
                }
                Ok(())
            }
            Output::Objects(store) => {
                store.end(succeeded).await.map_err(|e| format!("ending the output: {e}"))
            }
        }
    }
}

/// A running job's output: the commits of its accepted reduce attempts, under way off
/// the event loop, and what is left to do when the job ends.
pub(super) struct Committer {
    output: Arc<Output>,
    commits: JoinSet<Result<(), String>>,
    at_once: Arc<Semaphore>,
    /// Partitions committed: a second commit of one would replace its part.
    committed: std::collections::HashSet<u32>,
}

impl Committer {
    pub(super) fn new(output: Output) -> Committer {
        Committer {
            output: Arc::new(output),
            commits: JoinSet::new(),
            at_once: Arc::new(Semaphore::new(COMMITS_AT_ONCE)),
            committed: std::collections::HashSet::new(),
        }
    }

    /// Commits reduce `partition`'s part as attempt `number` wrote it: the attempt the
    /// core accepted, once per task.
    pub(super) fn commit(&mut self, partition: u32, number: u32) {
        if !self.committed.insert(partition) {
            tracing::error!(
                partition,
                attempt = number,
                "a reduce partition done twice: its part stays the first's"
            );
            return;
        }
        let (output, at_once) = (self.output.clone(), self.at_once.clone());
        self.commits.spawn(async move {
            let _permit = at_once.acquire().await.expect("never closed");
            output.commit(partition, number).await
        });
    }

    /// Ends the job's output once every commit is in. A job that succeeded but whose
    /// parts cannot all be said to be in place fails.
    pub(super) async fn end(mut self, outcome: Result<Vec<u8>, JobError>) -> Result<Vec<u8>, JobError> {
        let mut failed = None;
        while let Some(joined) = self.commits.join_next().await {
            let result = joined.unwrap_or_else(|e| Err(format!("a commit stopped: {e}")));
            if let Err(message) = result {
                tracing::error!(%message, "part not committed");
                failed.get_or_insert(message);
            }
        }
        let outcome = match (outcome, failed) {
            (Ok(_), Some(message)) => Err(JobError::Output(message)),
            (outcome, _) => outcome,
        };
        match self.output.end(outcome.is_ok()).await {
            Err(message) if outcome.is_ok() => Err(JobError::Output(message)),
            _ => outcome,
        }
    }
}

/// A job's hold on its output directory: its `_temporary`, made when the job was
/// accepted (so that no other job can take the directory while this one waits or
/// runs) and removed when the hold goes, whichever way the job ends; an attempt
/// still running after that has nowhere to write or place its part.
#[derive(Debug)]
pub(super) struct DirClaim {
    temporary: PathBuf,
}

impl Drop for DirClaim {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.temporary);
    }
}
