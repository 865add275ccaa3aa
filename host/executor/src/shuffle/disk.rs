//! The shuffle's disk budget: what an executor's shuffle files (map outputs, spilled
//! runs, fetched slices spilled) may take on its local directories at once, counted as
//! they are written and given back as they are deleted; and the room it leaves free on
//! each disk. A write past either fails its task as `disk-full`, naming the key, before
//! the disk fills and takes every executor on it down.

use flint_proto::TaskFailure;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Written between two looks at a disk's free space.
pub(crate) const LOOK_EVERY: u64 = 16 << 20;

/// What the executor's shuffle files may take.
#[derive(Debug)]
pub struct DiskBudget {
    /// `flint.shuffle.maxDiskSize`.
    limit: u64,
    /// `flint.local.dir.minFree`.
    min_free: u64,
    used: AtomicU64,
}

/// Why a shuffle write was refused; carried inside an `io::Error` to where the task's
/// failure is made.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct DiskFull {
    pub key: &'static str,
    pub message: String,
}

impl DiskBudget {
    /// A budget of `limit` bytes (none given: 90% of what `dirs` have free now), leaving
    /// `min_free` free on each disk.
    pub fn new(dirs: &[PathBuf], limit: Option<u64>, min_free: u64) -> DiskBudget {
        let limit = limit.unwrap_or_else(|| {
            let free: u64 = dirs.iter().filter_map(|d| free_space(d).ok()).sum();
            free / 10 * 9
        });
        DiskBudget { limit, min_free, used: AtomicU64::new(0) }
    }

    /// No bound: for tests.
    pub fn unbounded() -> DiskBudget {
        DiskBudget { limit: u64::MAX, min_free: 0, used: AtomicU64::new(0) }
    }

    /// Shuffle bytes on disk now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// `flint.local.dir.minFree`: what every write of the executor's leaves free.
    pub fn min_free(&self) -> u64 {
        self.min_free
    }
}

/// Bytes one file (or a task's files) holds of the budget, given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<DiskBudget>,
    dir: PathBuf,
    bytes: u64,
    /// Where the next look at the disk's free space is due.
    look_at: u64,
}

impl Reservation {
    /// Nothing yet, for files under `dir`.
    pub fn new(budget: &Arc<DiskBudget>, dir: &Path) -> Reservation {
        Reservation { budget: budget.clone(), dir: dir.to_owned(), bytes: 0, look_at: 0 }
    }

    /// `n` more bytes about to be written, or why not.
    pub fn grow(&mut self, n: u64) -> io::Result<()> {
        let budget = &self.budget;
        let before = budget.used.fetch_add(n, Ordering::Relaxed);
        if before.saturating_add(n) > budget.limit {
            budget.used.fetch_sub(n, Ordering::Relaxed);
            return Err(full(
                "flint.shuffle.maxDiskSize",
                format!(
                    "the executor's shuffle files would take {} bytes, past its {} bytes",
                    before.saturating_add(n),
                    budget.limit
                ),
            ));
        }
        self.bytes += n;
        if self.bytes >= self.look_at && budget.min_free > 0 {
            self.look_at = self.bytes + LOOK_EVERY;
            // A disk that cannot say is let be: the write itself will tell.
            if let Ok(free) = free_space(&self.dir)
                && free < budget.min_free.saturating_add(n.max(LOOK_EVERY))
            {
                return Err(full(
                    "flint.local.dir.minFree",
                    format!(
                        "{} has {free} bytes free, and {} must stay free",
                        self.dir.display(),
                        budget.min_free
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Another reservation's bytes, now held by this one.
    pub fn absorb(&mut self, mut other: Reservation) {
        self.bytes += std::mem::take(&mut other.bytes);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

fn full(key: &'static str, message: String) -> io::Error {
    io::Error::new(io::ErrorKind::StorageFull, DiskFull { key, message })
}

/// The task's failure when `e` is a refused write.
pub fn disk_full(e: &io::Error) -> Option<TaskFailure> {
    let refused = e.get_ref()?.downcast_ref::<DiskFull>()?;
    Some(TaskFailure::DiskFull { key: refused.key.to_owned(), message: refused.message.clone() })
}

/// Bytes an unprivileged writer may still put on the disk holding `dir`.
pub(crate) fn free_space(dir: &Path) -> io::Result<u64> {
    let stat = rustix::fs::statvfs(dir)?;
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}
