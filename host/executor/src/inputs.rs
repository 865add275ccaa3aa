//! Reading a task's input split wherever it lives: a file on this machine (under this
//! executor's own input roots), a file on the driver (its data service, with the job's
//! token), or an object (S3, HTTPS, with the credentials the driver pushed). The host
//! reads and attaches credentials, a block at a time as the guest asks for lines; the
//! guest sees only the bytes.

use crate::source::DriverSource;
use flint_data::lines::{Begun, ReadAhead};
use flint_data::{InputError, ObjectReader, SplitLines, StreamLines};
use flint_proto::{FLINT_SERVICE, JobDescriptor, Settings, Source, TaskFailure, Token};
use flint_runtime::LineSource;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// The most one request to the driver's data service or an object store asks for.
const MAX_READ: u64 = flint_proto::wire::MAX_INPUT_READ;

pub struct InputReader {
    /// This executor's `flint.input.roots`, resolved; a file outside them is not read,
    /// whatever a launch names.
    roots: Vec<PathBuf>,
    /// This executor's `flint.output.roots`, resolved: where reduce tasks may write part
    /// files, whatever a launch names.
    output_roots: Vec<PathBuf>,
    objects: Arc<ObjectReader>,
    /// Where network reads run; slot threads block on them.
    handle: tokio::runtime::Handle,
}

/// Where a split is and what it may take: which input, which bytes, the job's
/// deadline.
pub struct SplitAt<'a> {
    pub job: &'a JobDescriptor,
    pub source: &'a Source,
    pub start: u64,
    pub end: u64,
    pub size: u64,
    pub deadline: Instant,
}

type ReadAt = Box<dyn FnMut(u64, u64) -> Result<Vec<u8>, InputError> + Send>;

/// Ranged reads across the network, from any thread.
type RemoteRead = Box<dyn Fn(u64, u64) -> Result<Vec<u8>, InputError> + Send + Sync>;

impl InputReader {
    /// Reads under `settings`' input roots and object settings, network reads on `handle`.
    pub fn new(settings: &Settings, handle: tokio::runtime::Handle) -> InputReader {
        // A root that does not exist here allows nothing.
        let roots = settings.input_roots.iter().filter_map(|r| std::fs::canonicalize(r).ok()).collect();
        let output_roots =
            settings.output_roots.iter().filter_map(|r| std::fs::canonicalize(r).ok()).collect();
        InputReader {
            roots,
            output_roots,
            objects: Arc::new(ObjectReader::new(settings.objects.clone())),
            handle,
        }
    }

    /// The lines of a split, read as the task asks for them, its first read already
    /// begun when `begun` holds it ([`InputReader::begin_first_read`]). A local file is
    /// opened (and its roots checked) here; nothing else is read yet.
    pub fn open_split(
        &self,
        driver: &Arc<dyn DriverSource>,
        tokens: &[Token],
        at: SplitAt<'_>,
        begun: Option<Begun>,
    ) -> Result<Box<dyn LineSource>, InputError> {
        let SplitAt { job, source, start, end, size, deadline } = at;
        let read_at: ReadAt = match source {
            Source::File(path) => {
                let file = self.open_local(path)?;
                let path = path.clone();
                Box::new(move |offset, len| {
                    pread(&file, offset, len).map_err(|error| InputError::Local { path: path.clone(), error })
                })
            }
            Source::Driver(_) | Source::S3 { .. } | Source::Http(_) => {
                let read = self.remote_read(driver, tokens, job, source, deadline);
                let mut ahead = ReadAhead::new(read, self.handle.clone(), end, size).with_begun(begun);
                Box::new(move |offset, len| ahead.read(offset, len))
            }
            Source::HttpWhole(url) => {
                let mut whole = self.objects.whole(url)?;
                let handle = self.handle.clone();
                Box::new(move |offset, len| {
                    handle.block_on(async {
                        tokio::time::timeout_at(deadline.into(), whole.read(offset, len))
                            .await
                            .unwrap_or(Err(InputError::Deadline))
                    })
                })
            }
        };
        // A compressed input is planned as one split, read whole and decompressed.
        let lines: Lines = match flint_proto::Compression::of(source) {
            Some(compression) if start == 0 && end >= size => {
                let stream = StreamLines::new(compression, read_at, size).map_err(|e| e.reading(source))?;
                Lines::Stream(stream)
            }
            _ => Lines::Split(SplitLines::new(read_at, start, end, size)),
        };
        Ok(Box::new(Split {
            lines,
            source: source.to_string(),
            deadline,
            deadline_ms: job.deadline.as_millis() as u64,
        }))
    }

    /// Begins the first read of a split a task waiting for a slot will ask for, when
    /// it crosses the network ([`Source::reads_ahead`]): its task starts on bytes
    /// already here rather than waiting a round trip (tens of milliseconds from S3).
    /// The read is bounded by `at`'s deadline, which runs from now.
    pub fn begin_first_read(
        &self,
        driver: &Arc<dyn DriverSource>,
        tokens: &[Token],
        at: SplitAt<'_>,
    ) -> Option<Begun> {
        if !at.source.reads_ahead() {
            return None;
        }
        let read = self.remote_read(driver, tokens, at.job, at.source, at.deadline);
        ReadAhead::begin(read, &self.handle, at.start, at.end, at.size)
    }

    /// Reads of `source` across the network (the driver's data service, an object
    /// store) with the job's token or the pushed credentials, each within `deadline`.
    fn remote_read(
        &self,
        driver: &Arc<dyn DriverSource>,
        tokens: &[Token],
        job: &JobDescriptor,
        source: &Source,
        deadline: Instant,
    ) -> RemoteRead {
        if let Source::Driver(path) = source {
            // The newest token of this job; the driver checks it, the executor only picks.
            let token = tokens
                .iter()
                .filter(|t| t.job == Some(job.job) && t.service == FLINT_SERVICE)
                .max_by_key(|t| t.expires_at_ms)
                .cloned();
            let (driver, job, path) = (driver.clone(), job.job, path.clone());
            return Box::new(move |offset, len| {
                chunked(offset, len, |o, l| driver.read_input(token.as_ref(), job, &path, o, l, deadline))
            });
        }
        let (objects, handle, tokens, source) =
            (self.objects.clone(), self.handle.clone(), tokens.to_vec(), source.clone());
        Box::new(move |offset, len| {
            chunked(offset, len, |o, l| {
                let read = objects.read(&source, o, l, &tokens);
                handle.block_on(async {
                    tokio::time::timeout_at(deadline.into(), read).await.unwrap_or(Err(InputError::Deadline))
                })
            })
        })
    }

    /// The object stores, and the runtime their requests run on (slot threads block on
    /// them): a reduce task's part goes up through them too.
    pub fn objects(&self) -> (&ObjectReader, &tokio::runtime::Handle) {
        (&self.objects, &self.handle)
    }

    /// `dir`, resolved, when it lies under this executor's output roots.
    pub fn output_dir(&self, dir: &str) -> Result<PathBuf, String> {
        let real = std::fs::canonicalize(dir).map_err(|e| format!("output {dir}: {e}"))?;
        match self.output_roots.iter().any(|root| real.starts_with(root)) {
            true => Ok(real),
            false => Err(format!(
                "output {dir} is outside this executor's flint.output.roots ({})",
                if self.output_roots.is_empty() {
                    "none are set".to_owned()
                } else {
                    display(&self.output_roots)
                }
            )),
        }
    }

    fn open_local(&self, path: &str) -> Result<File, InputError> {
        let local = |error| InputError::Local { path: path.to_owned(), error }.reading(path);
        let real = std::fs::canonicalize(path).map_err(local)?;
        if !self.roots.iter().any(|root| real.starts_with(root)) {
            return Err(InputError::OutsideRoots {
                path: path.to_owned(),
                roots: if self.roots.is_empty() { "none are set".to_owned() } else { display(&self.roots) },
            });
        }
        // A device or a FIFO would be read without end, or block the slot's thread.
        if !std::fs::metadata(&real).map_err(local)?.is_file() {
            let error = std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file");
            return Err(local(error));
        }
        File::open(&real).map_err(local)
    }
}

/// A split's lines: a range of a plain input, or a whole compressed one.
enum Lines {
    Split(SplitLines<ReadAt>),
    Stream(StreamLines),
}

/// A split being read for its task.
struct Split {
    lines: Lines,
    source: String,
    deadline: Instant,
    deadline_ms: u64,
}

impl LineSource for Split {
    fn next(&mut self, max: usize) -> Result<Vec<u8>, TaskFailure> {
        let batch = match &mut self.lines {
            Lines::Split(lines) => lines.next_batch(max),
            Lines::Stream(lines) => lines.next_batch(max),
        };
        batch.map_err(|error| match Instant::now() >= self.deadline {
            // Reading took the rest of the deadline: that is what the task ran into.
            true => {
                TaskFailure::Deadline { deadline_ms: self.deadline_ms, key: "flint.task.deadline".into() }
            }
            false => TaskFailure::Input {
                retryable: error.retryable(),
                message: error.reading(&self.source).to_string(),
            },
        })
    }
}

fn display(roots: &[PathBuf]) -> String {
    roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// `len` bytes of `file` at `offset`, into a block buffer its split hands back.
fn pread(file: &File, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
    // Resized over what it held: nothing zeroed that the read writes.
    let mut data = flint_data::lines::BLOCKS.take();
    data.resize(len as usize, 0);
    file.read_exact_at(&mut data, offset)?;
    Ok(data)
}

/// One read of `len` bytes as requests of at most [`MAX_READ`].
fn chunked(
    offset: u64,
    len: u64,
    mut read: impl FnMut(u64, u64) -> Result<Vec<u8>, InputError>,
) -> Result<Vec<u8>, InputError> {
    if len <= MAX_READ {
        return read(offset, len);
    }
    let mut data = Vec::with_capacity(len as usize);
    let mut at = offset;
    while at < offset + len {
        let n = MAX_READ.min(offset + len - at);
        data.extend(read(at, n)?);
        at += n;
    }
    Ok(data)
}
