//! Planning a job's partitions from its inputs: files under the driver's roots (sized
//! here, named by their resolved path), objects listed and sized with the driver's
//! tokens, values, or generated indices.

use super::shared::Shared;
use crate::job::SubmitError;
use flint_data::InputUrl;
use flint_proto::{JobPlan, Source};

/// Without `--partitions`, a file split is at most this large (Spark's
/// `maxPartitionBytes` is 128 MiB): small enough to spread and to retry.
pub(super) const DEFAULT_SPLIT: u64 = 64 << 20;

pub(super) const INPUT_ROOTS: &str = "flint.input.roots";

pub use flint_proto::MAX_TASKS;

/// Splits a job into partitions: byte ranges of its inputs, its values, or generated
/// indices. Defaults to one partition per slot, and no split over 64 MiB; partitions
/// asked for are what the job gets, however large its splits (a task streams its split,
/// so none is too large to read). A file
/// (a path, `file://` or `flint://`) must lie under one of the driver's input roots
/// once its links are resolved; the plan names it by that resolved path, so a link
/// changed afterwards cannot point a task elsewhere. Objects are sized (and prefixes
/// listed) here, with the driver's tokens; executors read them straight from the store.
pub(super) async fn plan(
    shared: &Shared,
    urls: &[String],
    uploads: Option<&std::path::Path>,
    values: &[serde_json::Value],
    partitions: Option<u32>,
    slots: u32,
) -> Result<JobPlan, SubmitError> {
    if urls.is_empty() {
        if !values.is_empty() {
            return Ok(JobPlan::values(values));
        }
        return Ok(JobPlan::indices(partitions.unwrap_or(slots)));
    }
    let settings = &shared.settings;
    let input_error = |path: &str, reason: String| SubmitError::Input { path: path.to_owned(), reason };
    let mut allowed = Vec::new();
    // The job's own files may be read wherever the driver keeps them.
    let roots = settings.input_roots.iter().map(std::path::Path::new).chain(uploads);
    for root in roots {
        // A root that does not exist allows nothing.
        if let Ok(root) = tokio::fs::canonicalize(root).await {
            allowed.push(root);
        }
    }
    let mut inputs = Vec::new();
    for text in urls {
        let url = InputUrl::parse(text, settings.objects.allow_http)
            .map_err(|e| input_error(text, e.to_string()))?;
        let path = match &url {
            InputUrl::Local(path) | InputUrl::Driver(path) => path,
            InputUrl::S3 { .. } | InputUrl::Http(_) => {
                let found = shared.objects.expand(&url, &shared.tokens()).await;
                inputs.extend(found.map_err(|e| input_error(text, e.to_string()))?);
                continue;
            }
        };
        // A folder or a glob is checked against the roots before it is listed, then
        // every file it names after its links are resolved.
        let base = if flint_data::is_glob(path) { flint_data::glob_base(path) } else { path.into() };
        let base = tokio::fs::canonicalize(&base).await.map_err(|e| input_error(text, e.to_string()))?;
        let outside = |real: &std::path::Path| !allowed.iter().any(|root| real.starts_with(root));
        if outside(&base) {
            return Err(outside_roots(text, settings));
        }
        let named = path.clone();
        let files = tokio::task::spawn_blocking(move || flint_data::local_files(&named))
            .await
            .map_err(|e| input_error(text, e.to_string()))?
            .map_err(|e| input_error(text, e))?;
        for file in files {
            let real = tokio::fs::canonicalize(&file).await.map_err(|e| input_error(text, e.to_string()))?;
            if outside(&real) {
                return Err(outside_roots(&file.to_string_lossy(), settings));
            }
            let meta = tokio::fs::metadata(&real).await.map_err(|e| input_error(text, e.to_string()))?;
            if !meta.is_file() {
                return Err(input_error(text, "not a regular file, a folder or a glob".into()));
            }
            let real = real.to_string_lossy().into_owned();
            let source =
                if matches!(url, InputUrl::Driver(_)) { Source::Driver(real) } else { Source::File(real) };
            inputs.push((source, meta.len()));
            if inputs.len() > flint_data::MAX_FILES {
                let reason = format!("the job's inputs name more than {} files", flint_data::MAX_FILES);
                return Err(input_error(text, reason));
            }
        }
    }
    let total: u64 = inputs.iter().map(|(_, n)| n).sum();
    let target = partitions
        .unwrap_or_else(|| slots.max(total.div_ceil(DEFAULT_SPLIT).min(u64::from(MAX_TASKS)) as u32));
    Ok(JobPlan::file_splits(&inputs, target))
}

/// A file outside the driver's input roots, and how its operator allows it.
fn outside_roots(text: &str, settings: &flint_proto::Settings) -> SubmitError {
    let roots = &settings.input_roots;
    let set = if roots.is_empty() { "none are set".to_owned() } else { roots.join(", ") };
    SubmitError::Input {
        path: text.to_owned(),
        reason: format!(
            "outside {INPUT_ROOTS} ({set}); the driver's operator allows directories with --conf {INPUT_ROOTS}=/dir,…"
        ),
    }
}
