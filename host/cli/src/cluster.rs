//! `flint driver` and `flint executor`: the two halves of a cluster, as processes.

use crate::common::cache_dir;
use crate::common::{PeerTls, fail, hostname, load_secret, parse_confs, wait_for_shutdown, write_private};
use crate::exit;
use clap::Args;
use flint_driver::server::{FrontConfig, serve};
use flint_driver::{Driver, DriverConfig};
use flint_executor::remote::{ExecutorOptions, run_executor};
use flint_net::{DriverUrl, Identity, Secret, server_endpoint};
use flint_proto::{KubernetesSettings, Settings, Token};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args)]
#[allow(
    rustdoc::invalid_html_tags,
    rustdoc::broken_intra_doc_links,
    reason = "its fields' doc comments are --help text: <app-id> and [default: …] as clap shows them"
)]
pub struct DriverArgs {
    /// Address to listen on (UDP, QUIC); port 0 picks a free port.
    #[arg(long, env = "FLINT_DRIVER_LISTEN", default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The host name executors and clients use to reach this driver [default: the
    /// listen address, or this machine's name when listening on all addresses].
    #[arg(long, env = "FLINT_DRIVER_HOST")]
    advertise_host: Option<String>,
    /// The application id [default: app-<time>-<pid>].
    #[arg(long, env = "FLINT_APP_ID")]
    app_id: Option<String>,
    /// Also write the driver URL to this file (replaced whole, so it can be polled).
    #[arg(long)]
    url_file: Option<PathBuf>,
    /// The application secret's file (`FLINT_SECRET` wins). Without either, a new secret
    /// is written to ~/.flint/<app-id>.secret, readable only by you.
    #[arg(long, env = "FLINT_SECRET_FILE")]
    secret_file: Option<PathBuf>,
    /// The driver's certificate (PEM or DER) [default: a new self-signed one].
    #[arg(long, requires = "key_file")]
    cert_file: Option<PathBuf>,
    /// The certificate's PKCS#8 private key (PEM or DER).
    #[arg(long, requires = "cert_file")]
    key_file: Option<PathBuf>,
    /// The port of the status page, its JSON API and metrics (`/`, `/api/v1/…`,
    /// `/metrics`); taken, the next 16 are tried; 0 turns it off.
    #[arg(long, default_value_t = 4040)]
    ui_port: u16,
    /// The address the status API listens on. Beyond loopback, requests must show the
    /// application secret as a bearer token.
    #[arg(long, default_value = "127.0.0.1")]
    ui_bind: std::net::IpAddr,
    /// Mutual TLS: CA certificates (PEM); executors and clients must show a certificate
    /// one of them signed (`--tls-cert`), besides proving the secret, or get nothing.
    #[arg(long, env = "FLINT_CLIENT_CA_FILE")]
    client_ca_file: Option<PathBuf>,
    /// Delegation tokens to hand executors: a JSON list of
    /// {"service", "secret", "expires_at_ms"}.
    #[arg(long)]
    tokens_file: Option<PathBuf>,
    /// Who starts executors (flint.executor.backend): `static`, people by hand; `local`,
    /// this driver, as processes on this machine; `kubernetes`, this driver, as pods
    /// (flint.kubernetes.*). As many as flint.executor.instances or, with
    /// flint.dynamicAllocation.enabled=true, as the load asks.
    /// `standalone`, a standalone master's workers (--master-url).
    #[arg(long, value_parser = ["static", "local", "kubernetes", "standalone"])]
    backend: Option<String>,
    /// The standalone master to ask for executors (flint.master.url), as `flint
    /// master` printed it; implies --backend standalone.
    #[arg(long, env = "FLINT_MASTER_URL")]
    master_url: Option<String>,
    /// The cluster secret the master checks, when this application keeps a secret of
    /// its own for its executors [default: FLINT_SECRET, else the application secret].
    #[arg(long, env = "FLINT_MASTER_SECRET_FILE")]
    master_secret_file: Option<PathBuf>,
    /// The pod this driver runs in, owner of the executor pods it makes
    /// (flint.kubernetes.driver.pod.name).
    #[arg(long, env = "FLINT_DRIVER_POD_NAME")]
    driver_pod_name: Option<String>,
    /// Configuration KEY=VALUE (repeatable).
    #[arg(long = "conf", value_name = "KEY=VALUE")]
    conf: Vec<String>,
}

pub fn driver(args: DriverArgs) -> u8 {
    let mut conf = match parse_confs(&args.conf) {
        Ok(c) => c,
        Err(e) => return fail(exit::INVALID_JOB, e),
    };
    if let Some(master) = &args.master_url {
        conf.insert("flint.master.url".into(), master.clone());
        conf.entry("flint.executor.backend".into()).or_insert_with(|| "standalone".into());
    }
    if let Some(backend) = &args.backend {
        conf.insert("flint.executor.backend".into(), backend.clone());
    }
    if let Some(pod) = &args.driver_pod_name {
        conf.insert("flint.kubernetes.driver.pod.name".into(), pod.clone());
    }
    let settings = match Settings::from_conf(&conf) {
        Ok(s) => s,
        Err(e) => return fail(exit::INVALID_JOB, e),
    };
    let app_id = args.app_id.clone().unwrap_or_else(|| {
        let secs =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        format!("app-{secs}-{}", std::process::id())
    });
    // A secret made here is found by clients on this machine through the driver's
    // fingerprint, once it is known.
    let mut made = None;
    let secret = match load_secret(args.secret_file.as_deref()) {
        Ok(Some(secret)) => secret,
        Ok(None) => {
            let secret = Secret::generate();
            let Some(home) = std::env::var_os("HOME") else {
                return fail(exit::INVALID_JOB, "no secret given and no HOME to write a new one to");
            };
            let path = PathBuf::from(home).join(".flint").join(format!("{app_id}.secret"));
            if let Err(e) = write_private(&path, secret.expose()) {
                return fail(exit::INTERNAL, format!("cannot write the secret to {}: {e}", path.display()));
            }
            eprintln!("flint: new application secret in {}", path.display());
            made = Some(path);
            secret
        }
        Err(e) => return fail(exit::INVALID_JOB, e),
    };
    let tokens = match &args.tokens_file {
        None => Vec::new(),
        Some(path) => match read_tokens(path) {
            Ok(tokens) => tokens,
            Err(e) => return fail(exit::INVALID_JOB, e),
        },
    };
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    tokio.block_on(async move {
        let host = args.advertise_host.clone().unwrap_or_else(|| match args.listen.ip() {
            ip if ip.is_unspecified() => hostname(),
            ip => ip.to_string(),
        });
        let names = vec![host.clone(), "localhost".into(), "flint-driver".into()];
        let identity = match (&args.cert_file, &args.key_file) {
            (Some(cert), Some(key)) => Identity::load(cert, key)
                .map_err(|e| fail(exit::INVALID_JOB, format!("cannot read the certificate: {e}"))),
            _ => Identity::generate(names)
                .map_err(|e| fail(exit::INTERNAL, format!("cannot make a certificate: {e}"))),
        };
        let identity = match identity {
            Ok(i) => i,
            Err(code) => return code,
        };
        let client_ca = match &args.client_ca_file {
            None => None,
            Some(_) if settings.executor_backend != flint_proto::Backend::Static => {
                return fail(
                    exit::INVALID_JOB,
                    "mutual TLS (--client-ca-file) is for executors started by hand: a backend cannot give the executors it starts a certificate yet",
                );
            }
            Some(path) => match flint_net::load_certs(path) {
                Ok(certs) => Some(certs),
                Err(e) => return fail(exit::INVALID_JOB, format!("cannot read the client CA: {e}")),
            },
        };
        let idle = settings.network_idle_timeout;
        let endpoint = match server_endpoint(args.listen, &identity, idle, client_ca.as_deref()) {
            Ok(e) => e,
            Err(e) => return fail(exit::INTERNAL, format!("cannot listen on {}: {e}", args.listen)),
        };
        let port = endpoint.local_addr().map(|a| a.port()).unwrap_or(args.listen.port());
        let url = DriverUrl { host, port, fingerprint: identity.fingerprint() };
        let runtime = match flint_driver::merge_runtime(&settings, cache_dir()) {
            Ok(r) => Arc::new(r),
            Err(e) => return fail(exit::INTERNAL, e),
        };
        let event_log = match flint_driver::eventlog::EventLogWriter::from_settings(&settings, &app_id) {
            Ok(log) => log,
            Err((dir, e)) => return fail(exit::USAGE, format!("cannot write the event log under {dir}: {e}")),
        };
        if let Some(log) = &event_log {
            tracing::info!(folder = %log.folder.display(), "writing the event log");
        }
        let driver = Driver::start(DriverConfig { app_id: app_id.clone(), conf, runtime, event_log });
        let mut ui_url = None;
        if args.ui_port != 0 {
            let bind = SocketAddr::new(args.ui_bind, args.ui_port);
            match flint_driver::ui::serve_ui(driver.clone(), bind, &secret).await {
                Ok(at) => {
                    // As others reach it: by the advertised host when it listens on all.
                    let host = match at.ip() {
                        ip if ip.is_unspecified() => url.host.clone(),
                        ip => SocketAddr::new(ip, 0).to_string().trim_end_matches(":0").to_owned(),
                    };
                    let page = format!("http://{host}:{}/", at.port());
                    tracing::info!(url = %page, "status page listening");
                    ui_url = Some(page);
                }
                // A secret too weak for where the page listens: said, and not started.
                Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => return fail(exit::USAGE, e),
                // The driver runs on without it.
                Err(e) => tracing::warn!(error = %e, %bind, "no status API: cannot listen"),
            }
        }
        // Every provider gives its first token before any executor can start: one that
        // cannot fails the driver at once, with its reason.
        if let Err(e) = driver.renew_credentials(&settings.credentials).await {
            return fail(exit::INVALID_JOB, e);
        }
        // Kept until the driver ends: the local backend's secret file and its processes,
        // the Kubernetes backend's pods.
        let mut _local = None;
        let mut pods = None;
        match settings.executor_backend {
            // Attached below, once the driver's front can take its executors.
            flint_proto::Backend::Static | flint_proto::Backend::Standalone => {}
            flint_proto::Backend::Local => match local_backend(&driver, &url, &app_id, &secret, &settings) {
                Ok(local) => _local = Some(local),
                Err(e) => return fail(exit::INTERNAL, e),
            },
            flint_proto::Backend::Kubernetes => {
                if let Err(e) = flint_proto::config::dns_label(&format!("{app_id}-exec-x")) {
                    return fail(exit::USAGE, format!("--app-id {app_id:?} cannot name pods: it {e}"));
                }
                match flint_kubernetes::KubernetesBackend::connect(&settings, &app_id, &url.to_string()).await
                {
                    Ok(backend) => {
                        tracing::info!(namespace = backend.namespace(), "executors are Kubernetes pods");
                        let backend = Arc::new(backend);
                        driver.set_backend(backend.clone());
                        pods = Some(backend);
                    }
                    Err(e) => return fail(exit::INVALID_JOB, e),
                }
            }
        }
        driver.set_tokens(tokens);
        if let Some(path) = args.tokens_file.clone() {
            tokio::spawn(watch_tokens(driver.clone(), path));
        }
        let front = FrontConfig { secret: secret.clone(), log_level: settings.executor_log_level.clone() };
        tokio::spawn(serve(driver.clone(), endpoint.clone(), front));
        if settings.executor_backend == flint_proto::Backend::Standalone {
            let cluster_secret = args.master_secret_file.as_deref();
            if let Err((code, e)) =
                crate::standalone::attach(&driver, &settings, &url, ui_url, &secret, cluster_secret).await
            {
                return fail(code, e);
            }
        }
        println!("{url}");
        if let Some(path) = &args.url_file
            && let Err(e) = write_private(path, url.to_string().as_bytes())
        {
            return fail(exit::INTERNAL, format!("cannot write {}: {e}", path.display()));
        }
        if let Some(path) = &made
            && let Err(e) = crate::common::link_secret(path, &url)
        {
            tracing::warn!(error = %e, "clients on this machine will need FLINT_SECRET or --secret-file");
        }
        tracing::info!(%app_id, %url, "driver listening");
        wait_for_shutdown().await;
        // Running jobs fail with a reason their submitters see before the connections go.
        driver.shutdown("the driver received a signal to stop").await;
        if let Some(pods) = pods {
            pods.shutdown().await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        endpoint.close(flint_net::DRIVER_STOPPED.into(), b"driver stopped");
        endpoint.wait_idle().await;
        0
    })
}

/// Reads a tokens file: a JSON list of `{"service", "secret", "expires_at_ms"}`. Errors
/// name the file and what is wrong, never a secret.
fn read_tokens(path: &std::path::Path) -> Result<Vec<Token>, String> {
    std::fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| format!("not a JSON list of tokens: {e}")))
        .map_err(|e| format!("tokens file {}: {e}", path.display()))
}

/// Re-reads the tokens file when it changes (checked every second: a rotated Kubernetes
/// projected token is a new file behind a symlink) and pushes the new tokens to every
/// executor. A file that cannot be read or parsed leaves the last good tokens in force.
async fn watch_tokens(driver: Driver, path: PathBuf) {
    let stamp = |p: &std::path::Path| std::fs::metadata(p).ok().map(|m| (m.modified().ok(), m.len()));
    let mut seen = stamp(&path);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let now = stamp(&path);
        if now == seen {
            continue;
        }
        seen = now;
        match read_tokens(&path) {
            Ok(tokens) => {
                let services: Vec<&str> = tokens.iter().map(|t| t.service.as_str()).collect();
                tracing::info!(?services, "tokens file changed: new tokens pushed to executors");
                driver.set_tokens(tokens);
            }
            Err(e) => tracing::warn!(error = %e, "keeping the last good tokens"),
        }
    }
}

/// Attaches the `local` backend: executors as child processes of this driver, handed
/// the secret in a file only this user can read, in a folder of this driver's own
/// (a fresh name each time: one left by a driver that was killed is never in the way),
/// removed when the driver ends.
fn local_backend(
    driver: &Driver,
    url: &DriverUrl,
    app_id: &str,
    secret: &Secret,
    settings: &Settings,
) -> Result<tempfile::TempDir, String> {
    use std::os::unix::fs::PermissionsExt;
    let base = std::env::var_os("XDG_RUNTIME_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let dir = tempfile::Builder::new()
        .prefix(&format!("flint-{app_id}-"))
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(&base)
        .map_err(|e| format!("cannot make a private folder in {}: {e}", base.display()))?;
    let secret_file = dir.path().join("secret");
    write_private(&secret_file, secret.expose())
        .map_err(|e| format!("cannot write {}: {e}", secret_file.display()))?;
    let program = std::env::current_exe().map_err(|e| format!("cannot find the flint binary: {e}"))?;
    let backend = flint_driver::backend::LocalBackend::new(flint_driver::backend::LocalBackendConfig {
        program,
        driver_url: url.to_string(),
        app_id: app_id.to_owned(),
        secret_file,
        args: vec![
            "--cores".into(),
            settings.executor_cores.to_string(),
            "--memory".into(),
            settings.executor_memory.to_string(),
        ],
        work_root: None,
    });
    driver.set_backend(Arc::new(backend));
    Ok(dir)
}

#[derive(Args)]
#[allow(
    rustdoc::invalid_html_tags,
    rustdoc::broken_intra_doc_links,
    reason = "its fields' doc comments are --help text: <app-id> and [default: …] as clap shows them"
)]
pub struct ExecutorArgs {
    /// The driver's URL, as `flint driver` printed it.
    #[arg(long, env = "FLINT_DRIVER_URL")]
    driver_url: String,
    /// This executor's id [default: from --pod-name if given (what follows
    /// `<app-id>-exec-`), else the driver assigns one].
    #[arg(long, env = "FLINT_EXECUTOR_ID")]
    executor_id: Option<flint_proto::ExecutorId>,
    /// Cores (flint.executor.cores) [default: this machine's cores].
    #[arg(long, env = "FLINT_EXECUTOR_CORES")]
    cores: Option<u32>,
    /// Memory, such as 512m or 4g (flint.executor.memory) [default: 1g].
    #[arg(long, env = "FLINT_EXECUTOR_MEMORY", value_parser = flint_proto::config::parse_size)]
    memory: Option<u64>,
    /// The application this executor serves; the driver rejects another.
    #[arg(long, env = "FLINT_APP_ID", default_value = "")]
    app_id: String,
    /// The host name the driver records for this executor [default: this machine's].
    #[arg(long, env = "FLINT_EXECUTOR_POD_IP")]
    hostname: Option<String>,
    /// The address this executor serves peers on (shuffle, later).
    #[arg(long, env = "FLINT_BIND_ADDRESS")]
    bind_address: Option<String>,
    /// The pod this executor runs in (Kubernetes).
    #[arg(long, env = "FLINT_EXECUTOR_POD_NAME")]
    pod_name: Option<String>,
    #[arg(long, env = "FLINT_RESOURCE_PROFILE_ID", default_value_t = 0)]
    resource_profile_id: u32,
    /// Where compiled components are kept [default: the user's cache folder].
    #[arg(long, env = "FLINT_WORK_DIR")]
    work_dir: Option<PathBuf>,
    /// The application secret's file (`FLINT_SECRET` wins).
    #[arg(long, env = "FLINT_SECRET_FILE")]
    secret_file: Option<PathBuf>,
    /// How long to keep trying to reach the driver at start-up.
    #[arg(long, default_value = "60s", value_parser = flint_proto::config::parse_duration)]
    connect_timeout: Duration,
    /// Configuration KEY=VALUE (repeatable); the driver's values apply except for
    /// start-up keys (cores, memory) given here.
    #[arg(long = "conf", value_name = "KEY=VALUE")]
    conf: Vec<String>,
    #[command(flatten)]
    tls: PeerTls,
}

pub fn executor(args: ExecutorArgs, set_log_level: crate::SetLogLevel) -> u8 {
    let driver_url: DriverUrl = match args.driver_url.parse() {
        Ok(u) => u,
        Err(e) => return fail(exit::USAGE, e),
    };
    let secret = match load_secret(args.secret_file.as_deref()) {
        Ok(Some(s)) => s,
        Ok(None) => {
            return fail(exit::USAGE, "no application secret: set FLINT_SECRET or pass --secret-file");
        }
        Err(e) => return fail(exit::USAGE, e),
    };
    let mut conf = match parse_confs(&args.conf) {
        Ok(c) => c,
        Err(e) => return fail(exit::USAGE, e),
    };
    let cores =
        args.cores.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32));
    conf.insert("flint.executor.cores".into(), cores.to_string());
    if let Some(memory) = args.memory {
        conf.insert("flint.executor.memory".into(), memory.to_string());
    }
    // A value the settings cannot take is invalid configuration (3), as the driver's.
    if let Err(e) = Settings::from_conf(&conf) {
        return fail(exit::INVALID_JOB, e);
    }
    let identity = match args.tls.identity() {
        Ok(identity) => identity,
        Err(e) => return fail(exit::USAGE, e),
    };
    let executor_id = args
        .executor_id
        .or_else(|| args.pod_name.as_deref().map(|pod| KubernetesSettings::executor_id(&args.app_id, pod)));
    let options = ExecutorOptions {
        driver_url,
        secret,
        app_id: args.app_id,
        executor_id,
        pod_name: args.pod_name,
        hostname: args.hostname.unwrap_or_else(hostname),
        resource_profile_id: args.resource_profile_id,
        cache_dir: args.work_dir.as_ref().map(|d| d.join("components")).or_else(cache_dir),
        work_dir: args.work_dir.clone(),
        attributes: args.bind_address.map(|a| ("bind_address".to_owned(), a)).into_iter().collect(),
        conf,
        connect_timeout: args.connect_timeout,
        identity: identity.map(Arc::new),
        set_log_level: Some(flint_executor::remote::LogLevelHook(set_log_level)),
    };
    // One thread for the connection, the heartbeats and the serving loop: guest code
    // runs on the slot threads, so nothing here waits behind it, and no task hops
    // between runtime threads per attempt (measured: a quarter of the executor's time
    // went to such hand-overs with a multi-threaded runtime).
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    tokio.block_on(async move {
        let (decommission, watch) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            wait_for_shutdown().await;
            let _ = decommission.send(true);
        });
        match run_executor(options, watch).await {
            Ok(id) => {
                tracing::info!(executor_id = %id, "decommissioned");
                0
            }
            Err(e) => fail(e.code(), e),
        }
    })
}

/// `flint history`: serve the status pages of the applications whose event logs are in
/// a directory.
#[derive(clap::Args, Debug)]
pub struct HistoryArgs {
    /// The directory drivers write event logs to (their `flint.eventLog.dir`).
    dir: PathBuf,
    /// The port to serve on; taken, the next 16 are tried.
    #[arg(long, default_value_t = 18080)]
    ui_port: u16,
    /// The address to listen on. The pages show what the applications' tasks printed
    /// and why they failed: beyond loopback, put something that checks who asks in front.
    #[arg(long, default_value = "127.0.0.1")]
    ui_bind: std::net::IpAddr,
    /// Finished jobs kept per application, the oldest forgotten first.
    #[arg(long, default_value_t = 1000)]
    retained_jobs: usize,
}

pub fn history(args: HistoryArgs) -> u8 {
    let rt = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(exit::INTERNAL, e),
    };
    rt.block_on(async {
        let bind = SocketAddr::new(args.ui_bind, args.ui_port);
        match flint_driver::history::serve_history(&args.dir, bind, args.retained_jobs).await {
            Ok(at) => {
                println!("http://{at}/");
                tracing::info!(dir = %args.dir.display(), url = %format!("http://{at}/"), "history listening");
            }
            Err(e) => return fail(exit::USAGE, format!("cannot serve {}: {e}", args.dir.display())),
        }
        wait_for_shutdown().await;
        0
    })
}
