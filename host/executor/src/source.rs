//! What an executor asks its driver for, behind one trait: the remote executor asks
//! over QUIC (`remote`), `flint run`'s in-process executors ask the driver itself.

use flint_data::InputError;
use flint_proto::{Digest, JobId, Token};
use std::time::Instant;

/// What an executor asks its driver for: a component's bytes the first time it meets
/// its digest, and byte ranges of a job's `flint://` inputs. Called from slot threads.
pub trait DriverSource: Send + Sync {
    fn fetch(&self, digest: &Digest) -> Result<Vec<u8>, SourceError>;

    /// `len` bytes of `path` from `offset`, for `job`, under its data token (a remote
    /// driver refuses a read without one), before `deadline`.
    fn read_input(
        &self,
        token: Option<&Token>,
        job: JobId,
        path: &str,
        offset: u64,
        len: u64,
        deadline: Instant,
    ) -> Result<Vec<u8>, InputError>;
}

/// Why the driver gave no component.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("the driver has no such component (its job has ended)")]
    NoSuchComponent,
    /// The connection to the driver failed.
    #[error("{0}")]
    Driver(String),
}
