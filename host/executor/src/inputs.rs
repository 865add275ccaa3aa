//! Reading a task's input split wherever it lives: a file on this machine (under this
//! executor's own input roots), a file on the driver (its data service, with the job's
//! token), or an object (S3, HTTPS, with the credentials the driver pushed). The host
//! reads and attaches credentials; the guest sees only the bytes.

use crate::source::DriverSource;
use flint_data::{InputError, ObjectReader, read_lines};
use flint_proto::{FLINT_SERVICE, JobDescriptor, Settings, Source, Token};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::Instant;

/// The most one request to the driver's data service or an object store asks for.
const MAX_READ: u64 = flint_proto::wire::MAX_INPUT_READ;

pub struct InputReader {
    /// This executor's `flint.input.roots`, resolved; a file outside them is not read,
    /// whatever a launch names.
    roots: Vec<PathBuf>,
    objects: ObjectReader,
    /// Where network reads run; slot threads block on them.
    handle: tokio::runtime::Handle,
}

impl InputReader {
    /// Reads under `settings`' input roots and object settings, network reads on `handle`.
    pub fn new(settings: &Settings, handle: tokio::runtime::Handle) -> InputReader {
        // A root that does not exist here allows nothing.
        let roots = settings.input_roots.iter().filter_map(|r| std::fs::canonicalize(r).ok()).collect();
        InputReader { roots, objects: ObjectReader::new(settings.objects.clone()), handle }
    }

    /// The lines of `source` whose first byte falls in `start..end`, read before
    /// `deadline`.
    #[allow(clippy::too_many_arguments)]
    pub fn read_split(
        &self,
        driver: &dyn DriverSource,
        job: &JobDescriptor,
        tokens: &[Token],
        source: &Source,
        (start, end, size): (u64, u64, u64),
        deadline: Instant,
    ) -> Result<Vec<u8>, InputError> {
        match source {
            Source::File(path) => {
                let file = self.open_local(path)?;
                let local = |error| InputError::Local { path: path.clone(), error };
                read_lines(|offset, len| pread(&file, offset, len).map_err(local), start, end, size)
                    .map_err(|e| e.reading(source))
            }
            Source::Driver(path) => {
                // The newest token of this job; the driver checks it, the executor only picks.
                let token = tokens
                    .iter()
                    .filter(|t| t.job == Some(job.job) && t.service == FLINT_SERVICE)
                    .max_by_key(|t| t.expires_at_ms);
                let read = |offset, len| {
                    chunked(offset, len, |o, l| driver.read_input(token, job.job, path, o, l, deadline))
                };
                read_lines(read, start, end, size).map_err(|e| e.reading(source))
            }
            Source::S3 { .. } | Source::Http(_) => {
                let read = |offset, len| {
                    chunked(offset, len, |o, l| {
                        let read = self.objects.read(source, o, l, tokens);
                        self.handle.block_on(async {
                            tokio::time::timeout_at(deadline.into(), read)
                                .await
                                .unwrap_or(Err(InputError::Deadline))
                        })
                    })
                };
                read_lines(read, start, end, size).map_err(|e| e.reading(source))
            }
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
        File::open(&real).map_err(local)
    }
}

fn display(roots: &[PathBuf]) -> String {
    roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", ")
}

fn pread(file: &File, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
    let mut data = vec![0; len as usize];
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
