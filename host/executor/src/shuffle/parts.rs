//! A reduce task's part: a file of the attempt's own under the output directory's
//! `_temporary`, flushed to disk when its task succeeds and left there for the driver
//! to commit (only the attempt it accepts is renamed `part-NNNNN`, so a retried,
//! repeated or late attempt never replaces it, and a failed one leaves nothing); or
//! bytes collected to go back to the submitter as the task's output.

use flint_runtime::{PartSink, ShuffleError};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

pub struct PartFile {
    file: BufWriter<File>,
    temporary: PathBuf,
    kept: bool,
}

impl PartFile {
    /// The part file of attempt `number` of reduce `partition` under `dir`.
    pub fn create(dir: &Path, partition: u32, number: u32) -> std::io::Result<PartFile> {
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
        Ok(PartFile { file, temporary, kept: false })
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
        if !self.kept {
            let _ = std::fs::remove_file(&self.temporary);
        }
    }
}
