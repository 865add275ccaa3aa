//! A reduce task's part: a file written under the output directory's `_temporary`,
//! then put in place as `part-NNNNN` by one rename when its task succeeds, so a retried
//! or repeated task never leaves two, and a failed one leaves none; or bytes collected
//! to go back to the submitter as the task's output.

use flint_runtime::{PartSink, ShuffleError};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

pub struct PartFile {
    file: BufWriter<File>,
    temporary: PathBuf,
    dest: PathBuf,
    placed: bool,
}

impl PartFile {
    /// A part file for reduce `partition`, written by attempt `attempt` (unique within
    /// the job) under `dir`.
    pub fn create(dir: &Path, partition: u32, attempt: &str) -> std::io::Result<PartFile> {
        let name = format!("part-{partition:05}");
        // Made by the driver when it took the job, removed when the job ended: an
        // attempt that outlives its job has nowhere to write.
        let temporary = dir.join("_temporary").join(format!("{name}.{attempt}"));
        let file = match File::create(&temporary) {
            Ok(file) => BufWriter::with_capacity(1 << 20, file),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(std::io::Error::new(e.kind(), "its _temporary is gone: the job has ended"));
            }
            Err(e) => return Err(e),
        };
        Ok(PartFile { file, temporary, dest: dir.join(name), placed: false })
    }

    /// Flushes the part to disk and puts it in place.
    pub fn place(mut self) -> std::io::Result<()> {
        self.file.flush()?;
        self.file.get_ref().sync_all()?;
        std::fs::rename(&self.temporary, &self.dest)?;
        self.placed = true;
        Ok(())
    }
}

impl PartSink for PartFile {
    fn write(&mut self, bytes: &[u8]) -> Result<(), ShuffleError> {
        self.file.write_all(bytes).map_err(|e| ShuffleError {
            message: format!("writing {}: {e}", self.temporary.display()),
            retryable: true,
        })
    }
}

/// Where a reduce task's part goes.
pub enum Part {
    File(PartFile),
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
        if !self.placed {
            let _ = std::fs::remove_file(&self.temporary);
        }
    }
}
