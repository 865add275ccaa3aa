//! The driver's data service: executors read byte ranges of `flint://` inputs (files
//! under the driver's input roots) on the driver's QUIC endpoint, each read under a
//! token the driver minted for the job that reads it. Tokens are signed with a key made
//! at start that never leaves the driver, live `flint.security.credentials.flint.lifetime`
//! and are renewed like every other service's: the control core renews the `flint`
//! service, and each renewal mints a new token for every job that reads from here.

use crate::credentials::{Fetch, TokenProvider, now_ms};
use flint_data::{Claims, DataKey};
use flint_net::limited::Limited;
use flint_proto::wire::{DataRefusal, MAX_INPUT_READ};
use flint_proto::{FLINT_SERVICE, JobId, Token};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// `flint://` reads the driver serves at once (each holds a piece of the file in memory
/// at a time).
const CONCURRENT_READS: usize = 16;

pub struct DataService {
    app_id: String,
    key: DataKey,
    /// Reads under way at once, each holding up to `MAX_INPUT_READ` bytes: executors
    /// asking for more wait their turn, so the driver's memory for them stays bounded.
    pub reads: tokio::sync::Semaphore,
    /// The `flint://` inputs of each running job that has any, by resolved path.
    jobs: Mutex<HashMap<JobId, Arc<HashSet<String>>>>,
    /// Refused reads, logged at most ten a minute: a peer holding the secret but no
    /// valid token cannot flood the driver's log.
    refusals: Limited,
    /// Files a client is still sending with its running job, by path: a read of bytes
    /// not yet there waits for them (a job starts while its files arrive).
    arriving: Arc<Mutex<HashMap<String, watch::Receiver<Arrival>>>>,
}

/// How far a file sent with a job has come.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arrival {
    /// This many bytes from its start are written.
    Bytes(u64),
    /// It will come no further: why.
    Stopped(String),
}

/// A file's entry among those arriving, removed when this goes (with the job's files):
/// until then a read sees how far it came, and never the zeros of a part that did not.
pub struct Arriving {
    path: String,
    arriving: Arc<Mutex<HashMap<String, watch::Receiver<Arrival>>>>,
}

impl Drop for Arriving {
    fn drop(&mut self) {
        self.arriving.lock().expect("arrivals lock").remove(&self.path);
    }
}

impl DataService {
    pub fn new(app_id: String) -> DataService {
        DataService {
            app_id,
            key: DataKey::generate(),
            reads: tokio::sync::Semaphore::new(CONCURRENT_READS),
            jobs: Mutex::new(HashMap::new()),
            refusals: Limited::default(),
            arriving: Arc::default(),
        }
    }

    /// `path` (a job's file, already at its full size) is still arriving: reads of it
    /// wait for what the returned sender says has come.
    pub fn arriving(&self, path: String) -> (Arriving, watch::Sender<Arrival>) {
        let (tx, rx) = watch::channel(Arrival::Bytes(0));
        self.arriving.lock().expect("arrivals lock").insert(path.clone(), rx);
        (Arriving { path, arriving: self.arriving.clone() }, tx)
    }

    /// Waits until `path`'s bytes up to `end` are there: at once for a file not
    /// arriving. A file that stopped arriving short of `end` refuses the read.
    pub async fn arrived(&self, path: &str, end: u64) -> Result<(), DataRefusal> {
        let watched = self.arriving.lock().expect("arrivals lock").get(path).cloned();
        let Some(mut arrival) = watched else { return Ok(()) };
        let reached = arrival
            .wait_for(|a| match a {
                Arrival::Bytes(n) => *n >= end,
                Arrival::Stopped(_) => true,
            })
            .await
            .map(|a| a.clone());
        match reached {
            Ok(Arrival::Bytes(_)) => Ok(()),
            Ok(Arrival::Stopped(why)) => Err(unreadable(path, format!("it stopped arriving: {why}"))),
            Err(_) => Err(unreadable(path, "it stopped arriving".into())),
        }
    }

    /// Counts a refused read and logs it, unless ten were logged this minute already
    /// (the next logged one says how many were not).
    pub fn note_refusal(&self, refusal: &DataRefusal) {
        self.refusals.note(|not_logged| tracing::warn!(%refusal, not_logged, "input read refused"));
    }

    /// Reads refused so far.
    pub fn refused(&self) -> u64 {
        self.refusals.total()
    }

    /// A job reads these files through the service until it ends.
    pub fn register(&self, job: JobId, paths: HashSet<String>) {
        self.jobs.lock().expect("data jobs lock").insert(job, Arc::new(paths));
    }

    /// The job ended: its tokens read nothing from now on.
    pub fn unregister(&self, job: JobId) {
        self.jobs.lock().expect("data jobs lock").remove(&job);
    }

    /// A token for each job that reads from here, valid until `expires_at_ms`.
    pub fn job_tokens(&self, expires_at_ms: u64) -> Vec<Token> {
        let jobs = self.jobs.lock().expect("data jobs lock");
        jobs.keys()
            .map(|&job| {
                let claims = Claims { app_id: self.app_id.clone(), job, expires_at_ms };
                Token { job: Some(job), ..Token::new(FLINT_SERVICE, self.key.mint(&claims), expires_at_ms) }
            })
            .collect()
    }

    /// What a remote executor asks: `len` bytes of `path` from `start`, under `token`:
    /// the file, checked and open, and how many of those bytes it holds (fewer only at
    /// its end), for the caller to send a piece at a time. A blocking call.
    pub fn open(&self, token: &str, path: &str, start: u64, len: u64) -> Result<(File, u64), DataRefusal> {
        let claims = self.key.verify(token, &self.app_id, now_ms())?;
        self.open_for(claims.job, path, start, len)
    }

    /// `len` bytes of `path` from `start` for `job`, if the job reads that file (fewer
    /// only at its end). A blocking call.
    pub fn read_for(&self, job: JobId, path: &str, start: u64, len: u64) -> Result<Vec<u8>, DataRefusal> {
        let (file, size) = self.open_for(job, path, start, len)?;
        futures::executor::block_on(self.arrived(path, start + size))?;
        let mut data = vec![0; size as usize];
        file.read_exact_at(&mut data, start).map_err(|e| unreadable(path, e.to_string()))?;
        Ok(data)
    }

    /// [`DataService::open`] for `job`, whose token was checked. The path is resolved
    /// again: a link changed since the job was planned reads nothing.
    pub fn open_for(&self, job: JobId, path: &str, start: u64, len: u64) -> Result<(File, u64), DataRefusal> {
        if len > MAX_INPUT_READ {
            return Err(DataRefusal::TooLarge { asked: len, limit: MAX_INPUT_READ });
        }
        let paths = self.jobs.lock().expect("data jobs lock").get(&job).cloned();
        let paths = paths.ok_or(DataRefusal::JobEnded(job))?;
        if !paths.contains(path) {
            return Err(DataRefusal::NotTheJobs { job, path: path.to_owned() });
        }
        let real = std::fs::canonicalize(path).map_err(|e| unreadable(path, e.to_string()))?;
        if real.to_str() != Some(path) {
            return Err(unreadable(path, "it resolves elsewhere since the job was planned".into()));
        }
        let file = File::open(&real).map_err(|e| unreadable(path, e.to_string()))?;
        let size = file.metadata().map_err(|e| unreadable(path, e.to_string()))?.len();
        Ok((file, len.min(size.saturating_sub(start))))
    }
}

fn unreadable(path: &str, reason: String) -> DataRefusal {
    DataRefusal::Unreadable { path: path.to_owned(), reason }
}

/// The `flint` service's provider: each fetch opens a new period of
/// `flint.security.credentials.flint.lifetime`; the token it gives never leaves the
/// driver, which mints each job's own token with its expiry.
pub struct FlintTokens {
    pub lifetime: Duration,
}

impl TokenProvider for FlintTokens {
    fn kind(&self) -> &'static str {
        "flint"
    }

    fn fetch(&self) -> Fetch {
        let expires_at_ms = now_ms() + self.lifetime.as_millis() as u64;
        Box::pin(async move { Ok(Token::new(FLINT_SERVICE, "", expires_at_ms)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read as the server makes it: the checked file, then its bytes.
    fn read(
        service: &DataService,
        token: &str,
        path: &str,
        start: u64,
        len: u64,
    ) -> Result<Vec<u8>, DataRefusal> {
        let (file, size) = service.open(token, path, start, len)?;
        let mut data = vec![0; size as usize];
        file.read_exact_at(&mut data, start).unwrap();
        Ok(data)
    }

    #[test]
    fn a_token_reads_only_its_own_jobs_files_while_the_job_runs() {
        let dir = tempdir();
        let (a, b) = (dir.join("a.txt"), dir.join("b.txt"));
        std::fs::write(&a, b"hello world\n").unwrap();
        std::fs::write(&b, b"other job\n").unwrap();
        let (a, b) = (a.to_str().unwrap().to_owned(), b.to_str().unwrap().to_owned());
        let service = DataService::new("app".into());
        service.register(JobId(1), HashSet::from([a.clone()]));
        service.register(JobId(2), HashSet::from([b.clone()]));
        let tokens = service.job_tokens(now_ms() + 60_000);
        let token = |job| tokens.iter().find(|t| t.job == Some(job)).unwrap().secret.clone();

        assert_eq!(read(&service, &token(JobId(1)), &a, 6, 5).unwrap(), b"world");
        assert_eq!(read(&service, &token(JobId(1)), &a, 6, 100).unwrap(), b"world\n", "short at the end");
        let refused = read(&service, &token(JobId(1)), &b, 0, 5).unwrap_err();
        assert_eq!(refused, DataRefusal::NotTheJobs { job: JobId(1), path: b.clone() });
        let refused = read(&service, &token(JobId(1)), &a, 0, MAX_INPUT_READ + 1).unwrap_err();
        assert!(matches!(refused, DataRefusal::TooLarge { .. }));

        // Another driver's key, an expired token, a job that ended.
        let stranger = DataService::new("app".into());
        stranger.register(JobId(1), HashSet::from([a.clone()]));
        let forged = &stranger.job_tokens(now_ms() + 60_000)[0].secret;
        assert_eq!(read(&service, forged, &a, 0, 5).unwrap_err(), DataRefusal::Forged);
        let old = service.job_tokens(now_ms() - 1);
        let old = &old.iter().find(|t| t.job == Some(JobId(1))).unwrap().secret;
        assert_eq!(read(&service, old, &a, 0, 5).unwrap_err(), DataRefusal::Expired);
        service.unregister(JobId(1));
        assert_eq!(read(&service, &token(JobId(1)), &a, 0, 5).unwrap_err(), DataRefusal::JobEnded(JobId(1)));
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn tempdir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("flint-data-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::canonicalize(dir).unwrap()
    }
}
