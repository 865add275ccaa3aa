//! What a submitter hands the driver, and what it gets back.

use flint_proto::{Conf, ConfError, Manifest, World};
use flint_runtime::LoadError;
use std::time::Duration;

/// A job to run: a component, its configuration and its inputs.
#[derive(Debug, Clone, Default)]
pub struct JobRequest {
    pub name: String,
    pub component: Vec<u8>,
    /// The job's configuration (manifest, then `--conf`). `flint.task.*` keys here set
    /// this job's task limits.
    pub config: Conf,
    /// Input files, split by byte range; none for generated or value partitions.
    pub inputs: Vec<String>,
    /// Each input as its submitter named it (a file sent with the job is kept under
    /// another name), when not as `inputs` has it: a program picks its inputs by name.
    pub input_names: Vec<String>,
    /// Input values, one task each.
    pub values: Vec<serde_json::Value>,
    /// Partitions: how many generated tasks, or about how many file splits.
    pub partitions: Option<u32>,
    /// A map/reduce job's reduce partitions (default: the cluster's slots).
    pub reduce_partitions: Option<u32>,
    /// Where a map/reduce job writes its part files.
    pub output: Option<String>,
    /// Whether a map/reduce job's parts come back as its result instead.
    pub collect: bool,
    /// A memory cap per task below the executor's.
    pub memory_limit: Option<u64>,
    /// A deadline per task, overriding `flint.task.deadline`.
    pub deadline: Option<Duration>,
    pub token_services: Vec<String>,
    /// The world the manifest declares; the component must implement it.
    pub world: Option<World>,
    /// For a run of a recurring job (`flint submit --every`), its period: the fleet is
    /// sized from each run's time against it.
    pub every: Option<Duration>,
    /// The folder holding the files sent with the job (named in `inputs` as
    /// `flint://` URLs), removed once the job has ended and nothing holds it.
    pub uploads: Option<std::sync::Arc<Uploads>>,
    /// Its manifest said `speculation = false`: no task of it ever runs twice at once.
    pub no_speculation: bool,
}

/// Files sent with a job, in a private folder removed when this goes; the bytes they
/// hold count against the driver's `flint.driver.maxUploadsHeld` until then, and how
/// far each has arrived is known to the data service.
pub struct Uploads {
    dir: tempfile::TempDir,
    _held: HeldBytes,
    _arriving: Vec<crate::data::Arriving>,
}

impl std::fmt::Debug for Uploads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Uploads").field("dir", &self.dir.path()).finish_non_exhaustive()
    }
}

impl Uploads {
    pub fn new(dir: tempfile::TempDir, held: HeldBytes, arriving: Vec<crate::data::Arriving>) -> Uploads {
        Uploads { dir, _held: held, _arriving: arriving }
    }

    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
}

/// Bytes reserved on a shared count, given back when dropped.
#[derive(Debug)]
pub struct HeldBytes {
    count: std::sync::Arc<std::sync::atomic::AtomicU64>,
    bytes: u64,
}

impl HeldBytes {
    /// Reserves `bytes` on `count` if it stays within `limit`; else says how much is held.
    pub fn reserve(
        count: &std::sync::Arc<std::sync::atomic::AtomicU64>,
        bytes: u64,
        limit: u64,
    ) -> Result<HeldBytes, u64> {
        use std::sync::atomic::Ordering::SeqCst;
        count
            .fetch_update(SeqCst, SeqCst, |held| held.checked_add(bytes).filter(|total| *total <= limit))
            .map(|_| HeldBytes { count: count.clone(), bytes })
    }
}

impl Drop for HeldBytes {
    fn drop(&mut self) {
        self.count.fetch_sub(self.bytes, std::sync::atomic::Ordering::SeqCst);
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error("{0}")]
    Component(#[from] LoadError),
    #[error("the component needs at least {needs} bytes of memory; the job's limits.memory is {limit} bytes")]
    UnderOwnLimit { needs: u64, limit: u64 },
    #[error(
        "flint.toml declares world = \"{declared}\" but the component implements the {found} world: set world = \"{found}\", or export the job with the macro of its world (export_task!, export_aggregate! or export_combine!, export_map_reduce!)"
    )]
    WorldMismatch { declared: World, found: World },
    #[error("input {path}: {reason}")]
    Input { path: String, reason: String },
    #[error(transparent)]
    Conf(#[from] ConfError),
    #[error("partitions: {0}")]
    Partitions(String),
    #[error("output: {0}")]
    Output(String),
    #[error("too large: {0}")]
    TooLarge(String),
    #[error("the driver has stopped")]
    DriverStopped,
    #[error("the driver is busy: {0}")]
    Busy(String),
    #[error("cancelled: {0}")]
    Cancelled(String),
}

/// The longest job name: it is shown in every status reply and page.
pub const MAX_NAME: usize = 256;
/// The longest input URL or path: each travels in its tasks' launches.
pub const MAX_URL: usize = 4096;
/// The largest input value (JSON): each travels in its task's launch.
pub const MAX_VALUE: usize = 16 << 10;

impl JobRequest {
    /// Refuses names, URLs and values too large to travel in status replies and launch
    /// frames, naming which.
    pub fn check_sizes(&self) -> Result<(), SubmitError> {
        if self.name.len() > MAX_NAME {
            return Err(SubmitError::TooLarge(format!(
                "the job's name is {} bytes; at most {MAX_NAME}",
                self.name.len()
            )));
        }
        if let Some(url) = self.inputs.iter().find(|u| u.len() > MAX_URL) {
            return Err(SubmitError::TooLarge(format!(
                "input {} is {} bytes long; at most {MAX_URL}",
                flint_proto::failure::head(url, 64),
                url.len()
            )));
        }
        for (n, value) in self.values.iter().enumerate() {
            let size = value.to_string().len();
            if size > MAX_VALUE {
                return Err(SubmitError::TooLarge(format!(
                    "input value {n} is {size} bytes of JSON; at most {MAX_VALUE} (put large inputs in files)"
                )));
            }
        }
        Ok(())
    }

    /// A request from a job's manifest and component, with configuration given at
    /// submission (`--conf`, overriding the manifest's key by key), input files and a
    /// partition count. Shared by `flint run` and the driver's submission endpoint.
    pub fn from_manifest(
        manifest: &Manifest,
        component: Vec<u8>,
        conf: Conf,
        inputs: Vec<String>,
        partitions: Option<u32>,
    ) -> Result<JobRequest, flint_proto::LimitError> {
        let memory_limit = manifest.limits.memory_bytes()?;
        let deadline = manifest.limits.deadline()?;
        let mut config = manifest.config.clone();
        config.extend(conf);
        // The manifest's partition count is for generated partitions; files split by size.
        let partitions = partitions.or(if inputs.is_empty() { manifest.partitions } else { None });
        Ok(JobRequest {
            name: manifest.name.clone(),
            component,
            config,
            input_names: Vec::new(),
            inputs,
            values: manifest.inputs.clone(),
            partitions,
            reduce_partitions: manifest.reduce_partitions,
            output: manifest.output.clone(),
            collect: manifest.collect,
            memory_limit,
            deadline,
            token_services: manifest.tokens.clone(),
            world: manifest.world,
            every: None,
            uploads: None,
            no_speculation: manifest.speculation == Some(false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_urls_and_values_too_large_to_travel_are_refused_naming_which() {
        let ok = JobRequest { name: "wc".into(), inputs: vec!["/data/a".into()], ..Default::default() };
        assert!(ok.check_sizes().is_ok());
        let name = JobRequest { name: "n".repeat(4 << 20), ..Default::default() };
        assert!(name.check_sizes().unwrap_err().to_string().contains("name"));
        let url =
            JobRequest { inputs: vec![format!("https://h/{}", "a".repeat(33_000))], ..Default::default() };
        assert!(url.check_sizes().unwrap_err().to_string().contains("at most 4096"));
        let value = JobRequest { values: vec![serde_json::json!("v".repeat(20_000))], ..Default::default() };
        assert!(value.check_sizes().unwrap_err().to_string().contains("input value 0"));
    }
}
