//! The `flint` binary: one command for running jobs, and (later) for drivers, executors
//! and submitters of a cluster.

mod bundle;
mod client;
mod cluster;
mod common;
mod confine;
mod k8s;
mod local;
mod new;
mod python;
mod report;
mod run;
mod standalone;

use clap::{Parser, Subcommand};
use std::io::IsTerminal;
use std::process::ExitCode;

/// Exit codes, documented in the README.
pub mod exit {
    /// The job failed: a task failed past its retries, or merging failed.
    pub const JOB_FAILED: u8 = 1;
    /// Bad command-line usage (clap's own code).
    pub const USAGE: u8 = 2;
    /// The job could not start: a bad bundle, component, input or configuration.
    pub const INVALID_JOB: u8 = 3;
    /// The platform itself failed (the engine could not start, say).
    pub const INTERNAL: u8 = 4;
    /// `submit`/`status`: the driver could not be reached or the connection failed.
    pub const UNREACHABLE: u8 = 5;
    /// `submit`/`status`: the driver's certificate is not the one the URL pins.
    pub const FINGERPRINT: u8 = 6;
    /// `submit`: the driver runs and queues all the jobs it may; the job was not taken.
    pub const BUSY: u8 = 7;
    /// The job was cancelled: `flint cancel`, Ctrl-C on `flint submit`, or its driver
    /// stopping.
    pub const CANCELLED: u8 = 8;
    /// `cancel`: the driver runs no such job, nor has it waiting (it ended, or never was).
    pub const NO_SUCH_JOB: u8 = 9;
    /// `submit`/`status`/`cancel` (as `executor`): the driver refused the connection:
    /// the application secret does not match.
    pub const NOT_AUTHENTICATED: u8 = 11;
    /// The driver runs another application.
    pub const WRONG_APP: u8 = 12;
    /// The driver speaks another protocol version.
    pub const VERSION_MISMATCH: u8 = 13;
    /// The driver refused the connection for another reason (it is stopping).
    pub const REFUSED: u8 = 14;
}

#[derive(Parser)]
#[command(name = "flint", version, about = "Run WebAssembly jobs on a cluster of sandboxed executors")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How log lines are written to stderr: `text`, or `json` (one object a line, for
    /// log collectors).
    #[arg(long, global = true, env = "FLINT_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
}

/// Changes the log level of a running process, unless `FLINT_LOG` set it.
pub type SetLogLevel = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

#[derive(Subcommand)]
enum Command {
    /// Make a job: a crate with a template job, its tests, Flint's guest SDK and WIT
    /// contract vendored, ready for `cargo test` and `flint run .` (with `--lang
    /// python`, a Python module with its tests, for `python3 -m unittest`).
    New(new::NewArgs),
    /// Run a job on an embedded driver with in-process executors: no cluster needed.
    Run(run::RunArgs),
    /// Package a job folder (flint.toml and its crate) into a bundle file.
    Bundle(run::BundleArgs),
    /// Run a driver: accept executors and jobs over QUIC. Prints its URL.
    Driver(cluster::DriverArgs),
    /// Run an executor for a driver.
    Executor(cluster::ExecutorArgs),
    /// Submit a job to a driver and wait for its result.
    Submit(client::SubmitArgs),
    /// Show a driver's executors and jobs.
    Status(client::StatusArgs),
    /// Stop a running or waiting job: its attempts are killed and it ends as cancelled.
    Cancel(client::CancelArgs),
    /// Run a standalone master: workers register with it, drivers ask it for
    /// executors. Prints its URL.
    Master(standalone::MasterArgs),
    /// Run a standalone worker: starts executors on this machine at its master's
    /// request.
    Worker(standalone::WorkerArgs),
    /// Kubernetes: render what a cluster needs to run an application.
    K8s(k8s::K8sArgs),
    /// Serve the status pages of finished (and running) applications from their event
    /// logs (`flint.eventLog.dir`). Prints its URL.
    History(cluster::HistoryArgs),
}

/// Buffers of a MiB or more (task inputs and outputs, blocks) get pages of their own
/// and give them back when freed. glibc otherwise raises its mmap threshold after the
/// first such free, to 32 MiB, and later ones land in per-thread arenas that keep the
/// memory: 40 outputs of 24 MiB left `flint run` at 820 MiB resident, 540 with this.
/// Smaller ones are reused from the heap: up to 4 MiB free at the top of an arena is
/// kept (the fixed threshold leaves glibc's trim at 128 KiB, which handed a split's
/// batch buffers back and faulted them in again at every call). The hot paths' large
/// buffers are reused on purpose (`flint_proto::recycle`).
fn return_large_buffers_to_the_system() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; called before any other thread.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 4 << 20);
    }
}

fn main() -> ExitCode {
    return_large_buffers_to_the_system();
    let cli = Cli::parse();
    // `run` reports failures in its summary; a long-running service logs them.
    let default_level = match cli.command {
        Command::New(_)
        | Command::Run(_)
        | Command::Bundle(_)
        | Command::Submit(_)
        | Command::Status(_)
        | Command::Cancel(_)
        | Command::K8s(_) => "error",
        Command::Driver(_)
        | Command::Executor(_)
        | Command::History(_)
        | Command::Master(_)
        | Command::Worker(_) => "info",
    };
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let from_env = tracing_subscriber::EnvFilter::try_from_env("FLINT_LOG").ok();
    let pinned = from_env.is_some();
    let filter = from_env.unwrap_or_else(|| tracing_subscriber::EnvFilter::new(default_level));
    let (filter, reload) = tracing_subscriber::reload::Layer::new(filter);
    let registry = tracing_subscriber::registry().with(filter);
    let text = cli.log_format == "text";
    let _ = if text {
        let fmt = tracing_subscriber::fmt::layer()
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr);
        registry.with(fmt).try_init()
    } else {
        registry.with(tracing_subscriber::fmt::layer().json().with_writer(std::io::stderr)).try_init()
    };
    // An executor takes the level its driver gives, unless FLINT_LOG said otherwise.
    let set_level: SetLogLevel = std::sync::Arc::new(move |level: &str| {
        if pinned {
            return;
        }
        match tracing_subscriber::EnvFilter::try_new(level) {
            Ok(filter) => {
                let _ = reload.reload(filter);
            }
            Err(e) => {
                tracing::warn!(%level, error = %e, "the driver's log level does not parse; kept the default")
            }
        }
    });
    let code = match cli.command {
        Command::New(args) => new::new(args),
        Command::Run(args) => run::run(args),
        Command::Bundle(args) => run::bundle(args),
        Command::Driver(args) => cluster::driver(args),
        Command::Executor(args) => cluster::executor(args, set_level),
        Command::Submit(args) => client::submit(args),
        Command::Status(args) => client::status(args),
        Command::Cancel(args) => client::cancel(args),
        Command::Master(args) => standalone::master(args),
        Command::Worker(args) => standalone::worker(args),
        Command::K8s(args) => k8s::k8s(args),
        Command::History(args) => cluster::history(args),
    };
    ExitCode::from(code)
}
