//! Who starts executors for the driver (`flint.executor.backend`): `static` (people,
//! by hand: no backend object at all) and `local` (`flint executor` processes on the
//! driver's own machine). The control core decides how many and which; a backend only
//! starts, reaps and stops processes, and says when one ended and why.

use flint_proto::ExecutorId;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};

/// What a backend tells the driver about an executor it started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum News {
    /// Its process or pod ended, for this reason.
    Exited(String),
    /// Its start is under way and not stuck (a pod waits for a node or its image, or
    /// the process runs): the bootstrap timeout starts again.
    Progress,
    /// It waits for room (a standalone master's workers are full): its bootstrap
    /// timeout stops until a `Progress` says it has room.
    Waiting,
}

/// Carries a backend's news to the driver.
#[derive(Clone)]
pub struct Reporter(Arc<dyn Fn(ExecutorId, News) + Send + Sync>);

impl Reporter {
    pub fn new(report: impl Fn(ExecutorId, News) + Send + Sync + 'static) -> Reporter {
        Reporter(Arc::new(report))
    }

    pub fn exited(&self, id: ExecutorId, reason: String) {
        (self.0)(id, News::Exited(reason))
    }

    pub fn progress(&self, id: ExecutorId) {
        (self.0)(id, News::Progress)
    }

    pub fn waiting(&self, id: ExecutorId) {
        (self.0)(id, News::Waiting)
    }
}

pub trait ExecutorBackend: Send + Sync {
    /// `flint.executor.backend`'s value for it.
    fn name(&self) -> &'static str;
    /// Starts executors that register under these ids; `report` hears of each one's
    /// progress and end.
    fn start(&self, ids: Vec<ExecutorId>, report: Reporter);
    /// Makes sure the executor's process is gone: the driver removed it.
    fn stop(&self, id: &ExecutorId);
    /// The executor never registered within `flint.executor.startTimeout`: gone, as
    /// [`ExecutorBackend::stop`], and a backend that placed it somewhere may hold that
    /// against the place.
    fn abandon(&self, id: &ExecutorId) {
        self.stop(id);
    }
    /// Why executors asked for are not starting yet, as the backend last heard it (a
    /// standalone master with no room), for the driver's status.
    fn waiting(&self) -> Option<String> {
        None
    }
}

/// How the `local` backend starts an executor.
#[derive(Debug, Clone)]
pub struct LocalBackendConfig {
    /// The `flint` binary.
    pub program: PathBuf,
    /// The driver's URL.
    pub driver_url: String,
    pub app_id: String,
    /// The application secret, in a file only this user can read: never in argv or a URL.
    pub secret_file: PathBuf,
    /// More `flint executor` arguments (cores, memory, `--conf`).
    pub args: Vec<String>,
    /// Where each executor gets a work dir of its own, `<work_root>/<executor id>`
    /// (none: the executor's default).
    pub work_root: Option<PathBuf>,
}

/// Executors as child processes of the driver. They share its fate: each asks the
/// kernel to kill it when the driver dies (`PR_SET_PDEATHSIG`), even by `kill -9`, and
/// the driver reaps each one and reports its exit status.
pub struct LocalBackend {
    config: LocalBackendConfig,
    children: Arc<Mutex<HashMap<ExecutorId, u32>>>,
}

impl LocalBackend {
    pub fn new(config: LocalBackendConfig) -> LocalBackend {
        LocalBackend { config, children: Arc::default() }
    }

    /// Processes running now.
    pub fn running(&self) -> usize {
        self.children.lock().expect("children lock").len()
    }

    /// The ids of the processes running now.
    pub fn running_ids(&self) -> Vec<ExecutorId> {
        self.children.lock().expect("children lock").keys().cloned().collect()
    }

    /// Kills every process at once (their application is over); each is still reaped
    /// and reported.
    pub fn kill_all(&self) {
        for pid in self.children.lock().expect("children lock").values() {
            signal(*pid, libc::SIGKILL);
        }
    }
}

impl ExecutorBackend for LocalBackend {
    fn name(&self) -> &'static str {
        "local"
    }

    fn start(&self, ids: Vec<ExecutorId>, report: Reporter) {
        let parent = std::process::id();
        for id in ids {
            let mut command = tokio::process::Command::new(&self.config.program);
            command
                .arg("executor")
                .args(["--driver-url", &self.config.driver_url, "--executor-id", &id])
                .args(["--app-id", &self.config.app_id])
                .arg("--secret-file")
                .arg(&self.config.secret_file)
                .args(&self.config.args)
                .args(self.config.work_root.iter().flat_map(|root| {
                    [std::ffi::OsString::from("--work-dir"), root.join(id.as_str()).into_os_string()]
                }))
                .env_remove("FLINT_SECRET")
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true);
            // SAFETY: between fork and exec only async-signal-safe calls: prctl,
            // getppid, _exit.
            unsafe {
                command.pre_exec(move || {
                    // Die with the driver; and if it died already, do not start.
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    if libc::getppid() as u32 != parent {
                        libc::_exit(1);
                    }
                    Ok(())
                });
            }
            match command.spawn() {
                Err(e) => report.exited(id, format!("cannot start {}: {e}", self.config.program.display())),
                Ok(mut child) => {
                    let pid = child.id().unwrap_or(0);
                    tracing::info!(executor_id = %id, pid, "executor process started");
                    self.children.lock().expect("children lock").insert(id.clone(), pid);
                    let (children, report) = (self.children.clone(), report.clone());
                    tokio::spawn(async move {
                        let reason = match child.wait().await {
                            Ok(status) => describe(status),
                            Err(e) => format!("process lost: {e}"),
                        };
                        children.lock().expect("children lock").remove(&id);
                        tracing::info!(executor_id = %id, pid, %reason, "executor process ended");
                        report.exited(id, reason);
                    });
                }
            }
        }
    }

    fn stop(&self, id: &ExecutorId) {
        let Some(pid) = self.children.lock().expect("children lock").get(id).copied() else { return };
        // Asked to go first (an executor drains on SIGTERM; one already leaving is not
        // cut short), killed if still there after a grace period.
        signal(pid, libc::SIGTERM);
        let (children, id) = (self.children.clone(), id.to_owned());
        tokio::spawn(async move {
            tokio::time::sleep(STOP_GRACE).await;
            if children.lock().expect("children lock").get(&id) == Some(&pid) {
                signal(pid, libc::SIGKILL);
            }
        });
    }
}

/// How long a stopped executor process has to leave before it is killed.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: a plain signal to our own child, which its waiting task reaps; a pid is
    // removed from `children` as soon as it is reaped, so it is never a stranger's.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
}

impl Drop for LocalBackend {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// An exit status as a removal reason.
fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("process exited with status {code}"),
        (None, Some(signal)) => format!("process killed by signal {signal}"),
        _ => format!("process ended: {status}"),
    }
}
