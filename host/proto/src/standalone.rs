//! Messages between a standalone master (`flint master`), its workers (`flint worker`)
//! and the drivers of its applications. A worker or a driver says [`crate::wire::Hello`]
//! on its connection's first stream (role `Worker` or `Application`, proving the
//! cluster secret) and keeps that stream: its messages one way, the master's the other.
//!
//! There is no acknowledgement message: what a worker runs is re-stated whole each time
//! it registers (after its own restart, a lost connection or the master's restart), and
//! an application re-states what it still waits for; the master reconciles both.

use crate::ids::{AppId, ExecutorId, Incarnation, WorkerId};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The most executors a worker may report running when it registers.
pub const MAX_RUNNING_PER_WORKER: usize = 4096;
/// The most executor arguments an application may hand its executors.
pub const MAX_EXECUTOR_ARGS: usize = 64;
/// The longest id (worker, application, executor) the master takes.
pub const MAX_NAME: usize = 128;

/// Whether `name` may be a worker's, an application's or an executor's id in a
/// standalone cluster: a worker makes folders of them, so only `[A-Za-z0-9._-]`, not
/// starting with a dot, at most [`MAX_NAME`] bytes.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a usable id: 1 to {MAX_NAME} of A-Z, a-z, 0-9, '.', '_', '-', not starting with '.'"
        ))
    }
}

/// An executor a worker runs, as it reports it when it registers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningExecutor {
    pub app: AppId,
    pub executor: ExecutorId,
    pub cores: u32,
    pub memory: u64,
}

/// What a worker says to the master.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum WorkerMessage {
    /// First, after the hello: who it is, what it offers, what it still runs.
    Register {
        id: WorkerId,
        /// Drawn when its process starts, the same on every registration of it: the
        /// master tells a worker registering again from another process under its id.
        instance: u64,
        host: String,
        cores: u32,
        memory: u64,
        running: Vec<RunningExecutor>,
    },
    Heartbeat,
    /// An executor it started ended (or could not start).
    Exited {
        app: AppId,
        executor: ExecutorId,
        reason: String,
    },
}

/// What the master says to a worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToWorker {
    /// Registered as this life; heartbeats every `heartbeat_ms` (a quarter of the
    /// master's worker timeout).
    Registered {
        incarnation: Incarnation,
        heartbeat_ms: u64,
    },
    Refused {
        reason: String,
    },
    Launch(LaunchExecutor),
    Kill {
        app: AppId,
        executor: ExecutorId,
    },
    /// The application is over: stop what runs of it, remove its work dirs.
    AppEnded {
        app: AppId,
    },
}

/// Start `flint executor` for an application's driver.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchExecutor {
    pub app: AppId,
    pub executor: ExecutorId,
    pub cores: u32,
    pub memory: u64,
    pub driver_url: String,
    /// The application's secret, for the executor's private file: never an argument.
    pub secret: Vec<u8>,
}

impl fmt::Debug for LaunchExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LaunchExecutor")
            .field("app", &self.app)
            .field("executor", &self.executor)
            .field("cores", &self.cores)
            .field("memory", &self.memory)
            .field("driver_url", &self.driver_url)
            .finish_non_exhaustive()
    }
}

/// What a driver says to the master for its application.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AppMessage {
    /// First, after the hello (and again after a lost connection).
    Register {
        app: AppId,
        /// `flint.cores.max`: the most cores its executors hold at once.
        cores_max: Option<u32>,
        /// Where its executors reach it.
        driver_url: String,
        /// Its status page, when it serves one (`http://HOST:PORT/`): the master's
        /// page links it. Only an `http://` or `https://` address is kept.
        #[serde(default)]
        ui_url: Option<String>,
        /// What its executors prove to it: the executor key made from its secret
        /// (marked, as `flint_net::Secret::executor_key_to_hand` makes it), never the
        /// secret itself, so that a master or worker cannot act as its client.
        secret: Vec<u8>,
    },
    /// An executor of this size, under this id.
    Request { executor: ExecutorId, cores: u32, memory: u64 },
    /// Given back.
    Release { executor: ExecutorId },
    /// Placed, but it never registered with the driver in its time: the worker it was
    /// sent to did not start it.
    Abandon { executor: ExecutorId },
}

impl fmt::Debug for AppMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppMessage::Register { app, cores_max, driver_url, ui_url, .. } => f
                .debug_struct("Register")
                .field("app", app)
                .field("cores_max", cores_max)
                .field("driver_url", driver_url)
                .field("ui_url", ui_url)
                .finish_non_exhaustive(),
            AppMessage::Request { executor, cores, memory } => f
                .debug_struct("Request")
                .field("executor", executor)
                .field("cores", cores)
                .field("memory", memory)
                .finish(),
            AppMessage::Release { executor } => {
                f.debug_struct("Release").field("executor", executor).finish()
            }
            AppMessage::Abandon { executor } => {
                f.debug_struct("Abandon").field("executor", executor).finish()
            }
        }
    }
}

/// What the master says to a driver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToApp {
    Registered,
    /// The application could not be registered (the master is full, a bad id).
    Refused {
        reason: String,
    },
    /// An executor was sent to a worker.
    Placed {
        executor: ExecutorId,
        worker: WorkerId,
    },
    /// An executor cannot be placed now, and why (said once per reason).
    Waiting {
        executor: ExecutorId,
        reason: String,
    },
    /// An executor ended, or can never start.
    Ended {
        executor: ExecutorId,
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_leave_a_folder_are_refused() {
        for good in ["app-1733-42", "w1", "dyn-3", "a.b_c"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", ".", "..", "../x", "a/b", ".hidden", "a b", "é", &"x".repeat(MAX_NAME + 1)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_secret_never_shows_in_debug() {
        let launch = LaunchExecutor {
            app: "a".into(),
            executor: "e".into(),
            cores: 1,
            memory: 1,
            driver_url: "flint://x".into(),
            secret: b"hunter2".to_vec(),
        };
        let register = AppMessage::Register {
            app: "a".into(),
            cores_max: None,
            driver_url: "u".into(),
            ui_url: None,
            secret: b"hunter2".to_vec(),
        };
        assert!(!format!("{launch:?}{register:?}").contains("hunter2"));
        assert!(!format!("{launch:?}").contains("104"), "nor as bytes");
    }
}
