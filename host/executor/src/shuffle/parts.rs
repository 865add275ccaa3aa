//! A reduce task's part: a file (or an S3 object) of the attempt's own under the
//! output's `_temporary`, flushed to disk (or its upload completed) when its task
//! succeeds and left there for the driver to commit (only the attempt it accepts
//! becomes `part-NNNNN`, so a retried, repeated or late attempt never replaces it, and
//! a failed one leaves nothing); or bytes collected to go back to the submitter as the
//! task's output.

use super::disk::{LOOK_EVERY, free_space};
use flint_data::{InputError, PartUpload};
use flint_runtime::{KillSwitch, PartSink, ShuffleError};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub struct PartFile {
    file: BufWriter<File>,
    temporary: PathBuf,
    kept: bool,
    /// `flint.local.dir.minFree`, kept free on the output's disk too: looked at every
    /// [`LOOK_EVERY`] bytes written.
    min_free: u64,
    written: u64,
    look_at: u64,
}

impl PartFile {
    /// The part file of attempt `number` of reduce `partition` under `dir`, which
    /// writes while its disk keeps `min_free` bytes free.
    pub fn create(dir: &Path, partition: u32, number: u32, min_free: u64) -> std::io::Result<PartFile> {
        // Made by the driver when it took the job, removed when the job ended: an
        // attempt that outlives its job has nowhere to write.
        let temporary = dir.join(flint_proto::Parts::attempt_path(partition, number));
        let file = match File::create(&temporary) {
            Ok(file) => BufWriter::with_capacity(1 << 20, file),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(std::io::Error::new(e.kind(), "its _temporary is gone: the job has ended"));
            }
            Err(e) => return Err(e),
        };
        Ok(PartFile { file, temporary, kept: false, min_free, written: 0, look_at: 0 })
    }

    /// Flushes the part to disk and leaves it for the driver to commit.
    pub fn keep(mut self) -> std::io::Result<()> {
        self.file.flush()?;
        self.file.get_ref().sync_all()?;
        self.kept = true;
        Ok(())
    }
}

impl PartSink for PartFile {
    fn write(&mut self, bytes: &[u8]) -> Result<(), ShuffleError> {
        self.written += bytes.len() as u64;
        if self.min_free > 0 && self.written >= self.look_at {
            self.look_at = self.written + LOOK_EVERY;
            let dir = self.temporary.parent().unwrap_or(Path::new("/"));
            // A disk that cannot say is let be: the write itself will tell.
            if let Ok(free) = free_space(dir)
                && free < self.min_free.saturating_add(LOOK_EVERY)
            {
                return Err(ShuffleError {
                    message: format!(
                        "disk-full: writing {}: its disk has {free} bytes free, and flint.local.dir.minFree ({}) must stay free",
                        self.temporary.display(),
                        self.min_free
                    ),
                    retryable: true,
                });
            }
        }
        self.file.write_all(bytes).map_err(|e| ShuffleError {
            message: format!("writing {}: {e}", self.temporary.display()),
            retryable: true,
        })
    }
}

/// An attempt's part on its way to an object store: sent a chunk at a time as the
/// guest writes it, each wait bounded by the task's deadline and its kill switch.
pub struct PartObject {
    upload: Option<PartUpload>,
    name: String,
    handle: tokio::runtime::Handle,
    deadline: Instant,
    kill: KillSwitch,
}

/// How long an attempt that failed may take to discard what it sent.
const ABORT_TIME: Duration = Duration::from_secs(5);

impl PartObject {
    pub fn new(
        upload: PartUpload,
        name: String,
        handle: tokio::runtime::Handle,
        deadline: Instant,
        kill: KillSwitch,
    ) -> PartObject {
        PartObject { upload: Some(upload), name, handle, deadline, kill }
    }

    /// Completes the upload and leaves the object for the driver to commit; one that
    /// cannot be completed is discarded as this goes.
    pub fn keep(mut self) -> Result<(), String> {
        let upload = self.upload.as_mut().expect("kept once");
        bounded(&self.handle, self.deadline, &self.kill, upload.finish())
            .map_err(|e| format!("uploading {}: {e}", self.name))?;
        self.upload = None;
        Ok(())
    }
}

/// Runs `work` on `handle` until it ends, `deadline` passes or `kill` is thrown.
fn bounded<T>(
    handle: &tokio::runtime::Handle,
    deadline: Instant,
    kill: &KillSwitch,
    work: impl std::future::Future<Output = Result<T, InputError>>,
) -> Result<T, String> {
    handle.block_on(async {
        let killed = async {
            while !kill.is_killed() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::select! {
            done = tokio::time::timeout_at(deadline.into(), work) => match done {
                Ok(result) => result.map_err(|e| e.to_string()),
                Err(_) => Err("the task's deadline passed while its part was uploaded".into()),
            },
            () = killed => Err("the task was killed".into()),
        }
    })
}

impl PartSink for PartObject {
    fn write(&mut self, bytes: &[u8]) -> Result<(), ShuffleError> {
        let Some(upload) = self.upload.as_mut() else {
            return Err(ShuffleError { message: "the part is already complete".into(), retryable: false });
        };
        bounded(&self.handle, self.deadline, &self.kill, upload.write(bytes))
            .map_err(|e| ShuffleError { message: format!("uploading {}: {e}", self.name), retryable: true })
    }
}

impl Drop for PartObject {
    /// An attempt that did not succeed discards what it sent: nothing is put in place.
    fn drop(&mut self) {
        if let Some(mut upload) = self.upload.take() {
            let deadline = Instant::now() + ABORT_TIME;
            if let Err(e) = bounded(&self.handle, deadline, &KillSwitch::default(), upload.abort()) {
                tracing::warn!(part = %self.name, error = %e, "an unfinished part upload was not discarded");
            }
        }
    }
}

/// Where a reduce task's part goes.
pub enum Part {
    File(PartFile),
    Object(PartObject),
    /// Kept for the task's output, up to `flint.task.maxResultSize`: a write past it
    /// is refused and the size it would have reached kept, so that the task fails as
    /// too large whatever the guest does with the refusal.
    Collected {
        bytes: Vec<u8>,
        limit: u64,
        refused: Option<u64>,
    },
}

impl Part {
    pub fn collected(limit: u64) -> Part {
        Part::Collected { bytes: Vec::new(), limit, refused: None }
    }
}

impl PartSink for Part {
    fn write(&mut self, more: &[u8]) -> Result<(), ShuffleError> {
        match self {
            Part::File(file) => file.write(more),
            Part::Object(object) => object.write(more),
            Part::Collected { bytes, limit, refused } => {
                let size = (bytes.len() + more.len()) as u64;
                if size > *limit {
                    *refused = Some(refused.unwrap_or(0).max(size));
                    return Err(ShuffleError {
                        message: format!(
                            "the collected part is over flint.task.maxResultSize ({limit} bytes)"
                        ),
                        retryable: false,
                    });
                }
                bytes.extend_from_slice(more);
                Ok(())
            }
        }
    }
}

impl Drop for PartFile {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_file(&self.temporary);
        }
    }
}
