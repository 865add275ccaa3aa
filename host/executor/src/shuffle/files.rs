//! Where an executor's shuffle files live: its own folders under each local directory,
//! locked while it lives, swept of dead executors' folders at start-up.

use super::disk::{DiskBudget, Reservation};
use flint_proto::JobId;
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Where an executor writes shuffle files: `flint.local.dir`'s folders, else its work
/// folder, else the system's temporary folder.
pub fn local_dirs(settings: &flint_proto::Settings, work_dir: Option<&Path>) -> Vec<PathBuf> {
    if !settings.local_dirs.is_empty() {
        return settings.local_dirs.iter().map(PathBuf::from).collect();
    }
    vec![work_dir.map_or_else(std::env::temp_dir, Path::to_path_buf)]
}

/// Deletes the shuffle folders under `root` whose lock no live executor holds.
fn sweep(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let ours = entry.file_name().to_str().is_some_and(|n| n.starts_with(PREFIX));
        if !ours || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        // A folder whose lock can be taken belongs to no live executor.
        let free = match File::open(path.join("lock")) {
            Ok(lock) => lock.try_lock().is_ok(),
            Err(_) => true,
        };
        if free {
            match std::fs::remove_dir_all(&path) {
                Ok(()) => {
                    tracing::info!(dir = %path.display(), "deleted shuffle files an earlier executor left")
                }
                Err(e) => {
                    tracing::warn!(dir = %path.display(), error = %e, "cannot delete old shuffle files")
                }
            }
        }
    }
}

/// The folders map outputs are written under, one picked per map by a hash of its job
/// and index (as Spark spreads its block files over `spark.local.dir`). Each executor
/// writes in folders of its own (`flint-shuffle-<random>` under each local directory),
/// holding a lock on each while it lives: at start-up an executor deletes the folders
/// no live executor holds, which an earlier run that died left behind. Its own go when
/// it is dropped.
#[derive(Debug, Clone)]
pub struct ShuffleFiles {
    inner: Arc<Folders>,
}

#[derive(Debug)]
struct Folders {
    dirs: Vec<PathBuf>,
    /// The locks that say the folders are in use.
    _locks: Vec<File>,
    budget: Arc<DiskBudget>,
    /// What each job's map outputs here hold of the budget, given back with them.
    kept: Mutex<HashMap<JobId, Reservation>>,
}

impl Drop for Folders {
    fn drop(&mut self) {
        for dir in &self.dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

const PREFIX: &str = "flint-shuffle-";

impl ShuffleFiles {
    /// Shuffle folders of this executor's own under each of `roots`, without a bound on
    /// what they take (tests).
    pub fn new(roots: &[PathBuf]) -> std::io::Result<ShuffleFiles> {
        ShuffleFiles::bounded(roots, |_| DiskBudget::unbounded())
    }

    /// Shuffle folders of this executor's own under each of `roots` (made if missing),
    /// after deleting those an executor that is gone left there, within the settings'
    /// `flint.shuffle.maxDiskSize` and `flint.local.dir.minFree`.
    pub fn with_settings(
        roots: &[PathBuf],
        settings: &flint_proto::Settings,
    ) -> std::io::Result<ShuffleFiles> {
        ShuffleFiles::bounded(roots, |dirs| {
            DiskBudget::new(dirs, settings.shuffle_max_disk_size, settings.local_dir_min_free)
        })
    }

    fn bounded(
        roots: &[PathBuf],
        budget: impl FnOnce(&[PathBuf]) -> DiskBudget,
    ) -> std::io::Result<ShuffleFiles> {
        if roots.is_empty() {
            return Err(std::io::Error::other("no local directory for shuffle files (flint.local.dir)"));
        }
        let (mut dirs, mut locks) = (Vec::new(), Vec::new());
        for root in roots {
            std::fs::create_dir_all(root)?;
            sweep(root);
            // Made and locked under a name no sweep looks at, then renamed: an executor
            // starting beside this one never finds the folder without its lock held.
            let name = format!("{PREFIX}{:016x}", rand::random::<u64>());
            let making = root.join(format!(".{name}.new"));
            std::fs::create_dir(&making)?;
            let lock = File::create(making.join("lock"))?;
            lock.try_lock()
                .map_err(|e| std::io::Error::other(format!("cannot lock {}: {e}", making.display())))?;
            let dir = root.join(name);
            std::fs::rename(&making, &dir)?;
            dirs.push(dir);
            locks.push(lock);
        }
        let budget = Arc::new(budget(&dirs));
        let kept = Mutex::new(HashMap::new());
        Ok(ShuffleFiles { inner: Arc::new(Folders { dirs, _locks: locks, budget, kept }) })
    }

    /// An empty hold on the budget for files of `job`'s task `map` (or a reduce
    /// partition's), under the folder they go in.
    pub(crate) fn reserve(&self, job: JobId, map: u32) -> Reservation {
        let dir = self.job_dir(job, map);
        Reservation::new(&self.inner.budget, dir.parent().expect("a shuffle folder"))
    }

    /// Keeps `held` until the job's files go.
    pub(crate) fn keep(&self, job: JobId, held: Reservation) {
        let mut kept = self.inner.kept.lock().expect("kept lock");
        match kept.get_mut(&job) {
            Some(all) => all.absorb(held),
            None => {
                kept.insert(job, held);
            }
        }
    }

    /// Whether map outputs of a job that has not ended are here.
    pub fn holds_outputs(&self) -> bool {
        !self.inner.kept.lock().expect("kept lock").is_empty()
    }

    /// The budget: its bound and what is on disk now.
    pub fn budget(&self) -> &DiskBudget {
        &self.inner.budget
    }

    fn job_dir(&self, job: JobId, map: u32) -> PathBuf {
        let dirs = &self.inner.dirs;
        let pick = (job.0.wrapping_mul(31).wrapping_add(u64::from(map))) % dirs.len() as u64;
        dirs[pick as usize].join(format!("job-{}", job.0))
    }

    /// The data file and index of a map's output.
    pub(crate) fn paths(&self, job: JobId, map: u32) -> (PathBuf, PathBuf) {
        let dir = self.job_dir(job, map);
        (dir.join(format!("map-{map}.data")), dir.join(format!("map-{map}.index")))
    }

    /// A folder for one task's spilled runs, deleted with its job.
    pub(crate) fn spill_dir(&self, job: JobId, map: u32) -> PathBuf {
        self.job_dir(job, map).join("spill")
    }

    /// Deletes this executor's shuffle folders and everything in them (it is ending).
    pub fn remove_all(&self) {
        for dir in &self.inner.dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    /// Deletes every shuffle file of the job, and gives back what they held.
    pub fn drop_job(&self, job: JobId) {
        let held = self.inner.kept.lock().expect("kept lock").remove(&job);
        for dir in &self.inner.dirs {
            let path = dir.join(format!("job-{}", job.0));
            match std::fs::remove_dir_all(&path) {
                Ok(()) => tracing::debug!(job_id = job.0, dir = %path.display(), "shuffle files deleted"),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(job_id = job.0, dir = %path.display(), error = %e, "cannot delete shuffle files")
                }
            }
        }
        drop(held);
    }

    /// Every folder shuffle files go under.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.inner.dirs
    }

    /// Shuffle files present now, all jobs together (for tests and the status).
    pub fn count_files(&self) -> usize {
        fn count(path: &Path) -> usize {
            std::fs::read_dir(path).map_or(0, |entries| {
                entries
                    .flatten()
                    .map(|e| match e.file_type() {
                        Ok(t) if t.is_dir() => count(&e.path()),
                        _ => 1,
                    })
                    .sum()
            })
        }
        // The lock file of each folder is not a shuffle file.
        self.inner.dirs.iter().map(|d| count(d).saturating_sub(1)).sum()
    }
}
