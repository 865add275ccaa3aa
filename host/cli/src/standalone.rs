//! `flint master` and `flint worker`: a standalone cluster, as processes; and the
//! driver's `standalone` backend, attached from `flint driver`.

use crate::common::{fail, load_secret, parse_confs, read_secret_file, write_private};
use crate::exit;
use clap::Args;
use flint_driver::Driver;
use flint_net::{ConnectError, DriverUrl, Identity, Secret, server_endpoint};
use flint_proto::wire::Rejection;
use flint_proto::{Settings, WorkerId};
use flint_standalone::{StandaloneError, WorkerError};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[derive(Args)]
pub struct MasterArgs {
    /// Address to listen on (UDP, QUIC); port 0 picks a free port.
    #[arg(long, env = "FLINT_MASTER_LISTEN", default_value = "127.0.0.1:7078")]
    listen: SocketAddr,
    /// The host name workers and drivers use to reach this master [default: the
    /// listen address, or this machine's name when listening on all addresses].
    #[arg(long, env = "FLINT_MASTER_HOST")]
    advertise_host: Option<String>,
    /// Also write the master URL to this file (replaced whole, so it can be polled).
    #[arg(long)]
    url_file: Option<PathBuf>,
    /// The cluster secret's file (`FLINT_SECRET` wins). Without either, a new secret is
    /// written to the state dir, readable only by you.
    #[arg(long, env = "FLINT_SECRET_FILE")]
    secret_file: Option<PathBuf>,
    /// Where the master keeps its certificate (so that a restarted master has the same
    /// URL) and a secret it made.
    #[arg(long, env = "FLINT_MASTER_STATE_DIR")]
    state_dir: Option<PathBuf>,
    /// The port of the master's page and JSON API (`/`, `/api/v1/…`); taken, the next
    /// 16 are tried; 0 turns it off.
    #[arg(long, default_value_t = 8080)]
    ui_port: u16,
    /// The address the page listens on. Beyond loopback, requests must show the cluster
    /// secret as a bearer token.
    #[arg(long, default_value = "127.0.0.1")]
    ui_bind: std::net::IpAddr,
    /// A worker whose heartbeats stop this long is lost (one whose process dies is
    /// noticed sooner, by its connection's silence: flint.network.idleTimeout).
    #[arg(long, default_value = "60s", value_parser = flint_proto::config::parse_duration)]
    worker_timeout: Duration,
    /// Configuration KEY=VALUE (repeatable): flint.network.idleTimeout.
    #[arg(long = "conf", value_name = "KEY=VALUE")]
    conf: Vec<String>,
}

pub fn master(args: MasterArgs) -> u8 {
    let settings = match settings(&args.conf) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let state_dir = match args.state_dir.clone().or_else(|| home().map(|h| h.join(".flint").join("master"))) {
        Some(dir) => dir,
        None => return fail(exit::USAGE, "no HOME: pass --state-dir"),
    };
    let secret = match load_secret(args.secret_file.as_deref()) {
        Ok(Some(secret)) => secret,
        Ok(None) => match made_secret(&state_dir.join("secret")) {
            Ok(secret) => secret,
            Err(e) => return fail(exit::INTERNAL, e),
        },
        Err(e) => return fail(exit::INVALID_JOB, e),
    };
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    tokio.block_on(async move {
        let host = args.advertise_host.clone().unwrap_or_else(|| match args.listen.ip() {
            ip if ip.is_unspecified() => crate::common::hostname(),
            ip => ip.to_string(),
        });
        let identity = match kept_identity(&state_dir, vec![host.clone(), "localhost".into()]) {
            Ok(identity) => identity,
            Err(e) => return fail(exit::INTERNAL, e),
        };
        let endpoint = match server_endpoint(args.listen, &identity, settings.network_idle_timeout, None) {
            Ok(e) => e,
            Err(e) => return fail(exit::INTERNAL, format!("cannot listen on {}: {e}", args.listen)),
        };
        let port = endpoint.local_addr().map(|a| a.port()).unwrap_or(args.listen.port());
        let url = DriverUrl { host, port, fingerprint: identity.fingerprint() };
        let options = flint_standalone::MasterOptions {
            secret: secret.clone(),
            worker_timeout: args.worker_timeout,
            app_grace: args.worker_timeout,
        };
        let master = flint_standalone::master::start(&options);
        if args.ui_port != 0 {
            let bind = SocketAddr::new(args.ui_bind, args.ui_port);
            match flint_standalone::page::serve_page(master.clone(), bind, &secret).await {
                Ok(at) => tracing::info!(url = %format!("http://{at}/"), "master page listening"),
                Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => return fail(exit::USAGE, e),
                Err(e) => tracing::warn!(error = %e, %bind, "no master page: cannot listen"),
            }
        }
        let serving = endpoint.clone();
        tokio::spawn(async move { flint_standalone::master::serve(master, serving, &options).await });
        println!("{url}");
        if let Some(path) = &args.url_file
            && let Err(e) = write_private(path, url.to_string().as_bytes())
        {
            return fail(exit::INTERNAL, format!("cannot write {}: {e}", path.display()));
        }
        tracing::info!(%url, "master listening");
        crate::common::wait_for_shutdown().await;
        endpoint.close(0u32.into(), b"master stopped");
        endpoint.wait_idle().await;
        0
    })
}

/// The `--conf` pairs a master or worker takes (the network's timeouts).
fn settings(conf: &[String]) -> Result<Settings, u8> {
    parse_confs(conf)
        .map_err(|e| e.to_string())
        .and_then(|c| Settings::from_conf(&c).map_err(|e| e.to_string()))
        .map_err(|e| fail(exit::INVALID_JOB, e))
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from)
}

/// A secret the master made on an earlier start, or a new one.
fn made_secret(path: &Path) -> Result<Secret, String> {
    if path.exists() {
        return read_secret_file(path);
    }
    let secret = Secret::generate();
    write_private(path, secret.expose()).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    eprintln!("flint: new cluster secret in {}", path.display());
    Ok(secret)
}

/// The master's certificate, kept in the state dir so that its URL (which pins it)
/// outlives a restart.
fn kept_identity(dir: &Path, names: Vec<String>) -> Result<Identity, String> {
    let (cert, key) = (dir.join("cert.der"), dir.join("key.der"));
    if cert.exists() && key.exists() {
        return Identity::load(&cert, &key).map_err(|e| format!("cannot read the master's certificate: {e}"));
    }
    let identity = Identity::generate(names).map_err(|e| format!("cannot make a certificate: {e}"))?;
    write_private(&key, identity.key_der()).map_err(|e| format!("cannot write {}: {e}", key.display()))?;
    write_private(&cert, &identity.cert).map_err(|e| format!("cannot write {}: {e}", cert.display()))?;
    Ok(identity)
}

#[derive(Args)]
pub struct WorkerArgs {
    /// The master's URL, as `flint master` printed it.
    #[arg(long, env = "FLINT_MASTER_URL")]
    master_url: String,
    /// This worker's id [default: this machine's name and this process's id, so that
    /// workers started on one machine never share one, as Spark's carry host and port].
    /// The master refuses a second live worker under one id.
    #[arg(long, env = "FLINT_WORKER_ID")]
    worker_id: Option<String>,
    /// Cores it offers [default: this machine's].
    #[arg(long, env = "FLINT_WORKER_CORES")]
    cores: Option<u32>,
    /// Memory it offers, such as 8g [default: this machine's, less 1g].
    #[arg(long, env = "FLINT_WORKER_MEMORY", value_parser = flint_proto::config::parse_size)]
    memory: Option<u64>,
    /// Where executors get their work dirs: `<dir>/<app-id>/<executor-id>`.
    #[arg(long, env = "FLINT_WORKER_DIR")]
    work_dir: Option<PathBuf>,
    /// The host name the master shows and executors register with [default: this
    /// machine's name].
    #[arg(long, env = "FLINT_WORKER_HOST")]
    host: Option<String>,
    /// The cluster secret's file (`FLINT_SECRET` wins).
    #[arg(long, env = "FLINT_SECRET_FILE")]
    secret_file: Option<PathBuf>,
    /// Remove an application's work dirs when it ends (flint.worker.cleanup).
    #[arg(long, env = "FLINT_WORKER_CLEANUP", default_value_t = true, action = clap::ArgAction::Set)]
    cleanup: bool,
    /// Configuration KEY=VALUE (repeatable): flint.network.idleTimeout.
    #[arg(long = "conf", value_name = "KEY=VALUE")]
    conf: Vec<String>,
}

pub fn worker(args: WorkerArgs) -> u8 {
    let settings = match settings(&args.conf) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let master: DriverUrl = match args.master_url.parse() {
        Ok(url) => url,
        Err(e) => return fail(exit::USAGE, e),
    };
    let secret = match load_secret(args.secret_file.as_deref()) {
        Ok(Some(secret)) => secret,
        Ok(None) => return fail(exit::USAGE, "no cluster secret: set FLINT_SECRET or pass --secret-file"),
        Err(e) => return fail(exit::USAGE, e),
    };
    let host = args.host.clone().unwrap_or_else(crate::common::hostname);
    let id = args.worker_id.clone().unwrap_or_else(|| {
        let host: String = host
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '-' })
            .collect();
        format!("{}-{}", host.trim_start_matches('.'), std::process::id())
    });
    if let Err(e) = flint_proto::standalone::check_name(&id) {
        return fail(exit::USAGE, format!("--worker-id: {e}"));
    }
    let Some(work_dir) = args.work_dir.clone().or_else(|| home().map(|h| h.join(".flint").join("work")))
    else {
        return fail(exit::USAGE, "no HOME: pass --work-dir");
    };
    if let Err(e) = std::fs::create_dir_all(&work_dir) {
        return fail(exit::INVALID_JOB, format!("cannot make {}: {e}", work_dir.display()));
    }
    let program = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => return fail(exit::INTERNAL, format!("cannot find the flint binary: {e}")),
    };
    let options = flint_standalone::WorkerOptions {
        master,
        secret,
        id: WorkerId::from(id),
        host,
        cores: args.cores.unwrap_or_else(machine_cores),
        memory: args.memory.unwrap_or_else(machine_memory),
        work_dir,
        program,
        cleanup: args.cleanup,
        idle_timeout: settings.network_idle_timeout,
    };
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    tokio.block_on(async move {
        match flint_standalone::run_worker(options, crate::common::wait_for_shutdown()).await {
            Ok(()) => 0,
            Err(e) => fail(worker_code(&e), e),
        }
    })
}

/// The executors' codes for the same refusals (README).
fn worker_code(e: &WorkerError) -> u8 {
    match e {
        WorkerError::Rejected(rejection) => rejection_code(rejection),
        WorkerError::Refused(_) => 14,
        WorkerError::Connect(ConnectError::FingerprintMismatch { .. }) => 17,
        WorkerError::Connect(_) => 15,
    }
}

fn rejection_code(rejection: &Rejection) -> u8 {
    match rejection {
        Rejection::NotAuthenticated => exit::NOT_AUTHENTICATED,
        Rejection::WrongApp { .. } => exit::WRONG_APP,
        Rejection::VersionMismatch { .. } => exit::VERSION_MISMATCH,
        _ => exit::REFUSED,
    }
}

fn machine_cores() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

fn machine_memory() -> u64 {
    // SAFETY: sysconf only reads a system value.
    let (pages, size) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    let total = (pages.max(0) as u64).saturating_mul(size.max(0) as u64);
    total.saturating_sub(1 << 30).max(1 << 30)
}

/// Attaches the `standalone` backend: the application registered with the master at
/// `flint.master.url`, proving the cluster secret (`--master-secret-file`, else
/// `FLINT_SECRET`, else the application's own), its executors to prove `app_secret`.
pub async fn attach(
    driver: &Driver,
    settings: &Settings,
    driver_url: &DriverUrl,
    ui_url: Option<String>,
    app_secret: &Secret,
    cluster_secret_file: Option<&Path>,
) -> Result<(), (u8, String)> {
    let Some(master) = &settings.master_url else {
        return Err((exit::USAGE, "the standalone backend needs flint.master.url (--master-url)".into()));
    };
    let master: DriverUrl = master.parse().map_err(|e| (exit::USAGE, format!("flint.master.url: {e}")))?;
    let cluster_secret = match cluster_secret_file {
        Some(path) => Some(read_secret_file(path).map_err(|e| (exit::USAGE, e))?),
        None => load_secret(None).map_err(|e| (exit::USAGE, e))?,
    }
    .unwrap_or_else(|| app_secret.clone());
    let app = flint_proto::AppId::from(driver.app_id());
    if let Err(e) = flint_proto::standalone::check_name(&app) {
        return Err((exit::USAGE, format!("--app-id: {e}")));
    }
    let options = flint_standalone::StandaloneOptions {
        master,
        cluster_secret,
        app,
        driver_url: driver_url.to_string(),
        ui_url,
        app_secret: app_secret.clone(),
        cores_max: settings.cores_max,
        executor_cores: settings.executor_cores,
        executor_memory: settings.executor_memory,
        idle_timeout: settings.network_idle_timeout,
    };
    let backend = flint_standalone::StandaloneBackend::connect(options).await.map_err(|e| {
        let code = match &e {
            StandaloneError::Rejected(rejection) => rejection_code(rejection),
            StandaloneError::Refused(_) => exit::REFUSED,
            StandaloneError::Connect(_) => exit::UNREACHABLE,
        };
        (code, e.to_string())
    })?;
    driver.set_backend(Arc::new(backend));
    Ok(())
}
