//! Why an input could not be listed or read: one type from the object stores, the
//! driver's data service and local files up to the task that reads them. None quotes
//! a secret; a store's or a server's own words are cut to a bounded length.

use flint_proto::wire::DataRefusal;

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// A link-local or metadata address, named literally or resolved to.
    #[error("{host} is a link-local or metadata address: inputs may not be read from it")]
    ForbiddenHost { host: String },
    /// The object store's own error with the causes under it.
    #[error("{0}")]
    Store(String),
    /// The store cannot do what reading needs (a server that ignores range requests):
    /// reading again cannot mend it.
    #[error("{0}: inputs are read by byte range, which this server does not answer")]
    Unsupported(String),
    #[error("more than {max} objects under {url}")]
    TooManyObjects { url: String, max: usize },
    #[error("no such object, and no objects under it as a prefix")]
    NotFound,
    #[error("{url} is not a usable glob: {reason}")]
    Glob { url: String, reason: String },
    #[error("{0} is not an object")]
    NotAnObject(String),
    #[error("{0} is not a URL naming a file")]
    NoFile(String),
    #[error("asked for {len} bytes at {offset}, got {got}: it changed since it was planned")]
    Changed { offset: u64, len: u64, got: u64 },
    #[error(
        "no token for service {service}: the driver gets one with flint.security.credentials.{service}.command or .file"
    )]
    NoS3Token { service: &'static str },
    #[error(
        "the {service} token is not S3 credentials: its secret must be JSON with access_key_id, secret_access_key and optionally session_token"
    )]
    NotS3Credentials { service: &'static str },
    #[error("a line runs over {max} bytes (the split ends at {end})")]
    LineTooLong { end: u64, max: u64 },
    /// Compressed bytes that do not decompress: reading them again cannot mend it.
    #[error("cannot decompress: {0}")]
    Corrupt(String),
    #[error("the task's deadline passed while reading")]
    Deadline,
    /// A file on this machine (its path is said by the [`InputError::Reading`] around it).
    #[error("{error}")]
    Local { path: String, error: std::io::Error },
    #[error(
        "{path} is outside this executor's flint.input.roots ({roots}); inputs it cannot see go through flint:// or object storage"
    )]
    OutsideRoots { path: String, roots: String },
    #[error("no data token for job {0} yet")]
    NoDataToken(flint_proto::JobId),
    #[error("the driver refused: {0}")]
    Refused(DataRefusal),
    /// The connection to the driver failed, or the driver answered out of turn.
    #[error("{0}")]
    Driver(String),
    /// What went wrong, and which source it went wrong with.
    #[error("cannot read {input}: {error}")]
    Reading { input: String, error: Box<InputError> },
}

impl InputError {
    /// Whether reading again may succeed: not for what the input itself holds.
    pub fn retryable(&self) -> bool {
        match self {
            InputError::LineTooLong { .. }
            | InputError::Changed { .. }
            | InputError::Unsupported(_)
            | InputError::Corrupt(_) => false,
            InputError::Reading { error, .. } => error.retryable(),
            _ => true,
        }
    }

    /// The same error, saying which source it is about.
    pub fn reading(self, input: impl std::fmt::Display) -> InputError {
        InputError::Reading { input: input.to_string(), error: Box::new(self) }
    }
}
