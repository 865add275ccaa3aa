//! `flint run`: a job on an embedded driver and in-process executors.

use crate::bundle;
use crate::common::{cache_dir, fail, output_url, parse_confs, progress_bar, show_progress};
use crate::exit;
use crate::local::{LocalCluster, LocalConfig};
use crate::report;
use anyhow::Context;
use clap::Args;
use flint_driver::JobRequest;
use flint_proto::config::parse_size;
use flint_proto::{Conf, Settings};
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(Args)]
pub struct RunArgs {
    /// The job: a job folder (with flint.toml; built with cargo), a Python job (a .py
    /// file, or a folder with app.py; built with componentize-py), a .wasm component,
    /// or a bundle from `flint bundle`.
    job: PathBuf,
    /// An input, split by byte range into partitions (repeatable): a path (`file://`),
    /// `s3://bucket/key` or `s3://bucket/prefix/`, or `https://…`.
    #[arg(long = "input", value_name = "URL")]
    inputs: Vec<String>,
    /// Partitions: generated tasks, or about how many file splits
    /// [default: the manifest's, else one per slot; files: no split over 64 MiB].
    #[arg(long)]
    partitions: Option<u32>,
    /// A map/reduce job's reduce partitions [default: the manifest's, else one per slot].
    #[arg(long)]
    reduce_partitions: Option<u32>,
    /// A map/reduce job's output, a directory or s3://bucket/prefix/: each reduce
    /// task's part goes there as part-NNNNN, and _SUCCESS once all are in place. It
    /// must be new or empty.
    #[arg(long, value_name = "DIR|URL")]
    output: Option<String>,
    /// Bring a map/reduce job's parts back instead (Spark's collect): what each reduce
    /// task writes to its part, printed in partition order.
    #[arg(long, conflicts_with = "output")]
    collect: bool,
    /// In-process executors.
    #[arg(long, default_value_t = 1)]
    executors: u32,
    /// Cores per executor (flint.executor.cores) [default: this machine's cores ÷ executors].
    #[arg(long)]
    cores: Option<u32>,
    /// Memory per executor, such as 512m or 4g (flint.executor.memory) [default: 1g].
    #[arg(long, value_parser = parse_size)]
    memory: Option<u64>,
    /// Configuration KEY=VALUE (repeatable): flint.* keys set the platform, others the job.
    #[arg(long = "conf", value_name = "KEY=VALUE")]
    conf: Vec<String>,
    /// Print one JSON object: result, tasks, attempts, failures, elapsed time.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct BundleArgs {
    /// The job folder (flint.toml beside a crate).
    job: PathBuf,
    /// Where to write the bundle.
    #[arg(short, long)]
    output: PathBuf,
}

pub fn bundle(args: BundleArgs) -> u8 {
    let written = bundle::open(&args.job).and_then(|b| {
        std::fs::write(&args.output, b.encode())
            .with_context(|| format!("cannot write {}", args.output.display()))
    });
    match written {
        Ok(()) => 0,
        Err(e) => fail(exit::INVALID_JOB, e),
    }
}

pub fn fail_chain(code: u8, e: anyhow::Error) -> u8 {
    let text: Vec<String> = e.chain().map(|c| c.to_string()).collect();
    fail(code, text.join(": "))
}

pub fn run(args: RunArgs) -> u8 {
    let cli_conf = match parse_confs(&args.conf) {
        Ok(c) => c,
        Err(e) => return fail(exit::INVALID_JOB, e),
    };
    let executors = args.executors.max(1);
    let cores = args.cores.unwrap_or_else(|| {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        (cpus / executors).max(1)
    });
    let mut platform: Conf = cli_conf
        .iter()
        .filter(|(k, _)| k.starts_with("flint."))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    platform.insert("flint.executor.cores".into(), cores.to_string());
    if let Some(memory) = args.memory {
        platform.insert("flint.executor.memory".into(), memory.to_string());
    }
    // `flint run` writes where its own command line says, and nowhere else.
    let output = match args.output.as_deref().map(output_url) {
        None => None,
        Some(Err(e)) => return fail(exit::INVALID_JOB, e),
        Some(Ok(url)) if url.starts_with("s3://") => Some(url),
        Some(Ok(dir)) => {
            if let Err(e) = std::fs::create_dir_all(&dir) {
                return fail(exit::INVALID_JOB, format!("--output {dir}: {e}"));
            }
            if !platform.contains_key("flint.output.roots") {
                platform.insert("flint.output.roots".into(), dir.clone());
            }
            Some(dir)
        }
    };
    // `flint run` reads the files its own command line names, and no others.
    if !platform.contains_key("flint.input.roots") {
        let named: Vec<String> = args
            .inputs
            .iter()
            .filter_map(|url| match flint_data::InputUrl::parse(url, true) {
                Ok(flint_data::InputUrl::Local(path) | flint_data::InputUrl::Driver(path)) => {
                    Some(if flint_data::is_glob(&path) { flint_data::glob_base(&path) } else { path.into() })
                }
                _ => None,
            })
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        platform.insert("flint.input.roots".into(), named.join(","));
    }
    match Settings::from_conf(&platform) {
        Err(e) => return fail(exit::INVALID_JOB, e),
        // Its executors are in-process: no backend starts any.
        Ok(s) if s.executor_backend != flint_proto::Backend::Static => {
            return fail(
                exit::INVALID_JOB,
                "flint.executor.backend is for `flint driver`; `flint run` runs its executors in-process (--executors)",
            );
        }
        Ok(_) => {}
    }
    let mut bundle = match bundle::open(&args.job) {
        Ok(b) => b,
        Err(e) => return fail_chain(exit::INVALID_JOB, e),
    };
    if args.reduce_partitions.is_some() {
        bundle.manifest.reduce_partitions = args.reduce_partitions;
    }
    if output.is_some() {
        bundle.manifest.output = output;
    }
    bundle.manifest.collect |= args.collect;
    let parts = bundle.manifest.collect;
    let inputs = args.inputs.clone();
    let request = match JobRequest::from_manifest(
        &bundle.manifest,
        bundle.component,
        // Platform keys went to the embedded driver above; the job keeps its own.
        cli_conf
            .into_iter()
            .filter(|(k, _)| !k.starts_with("flint.") || flint_proto::JOB_KEYS.contains(&k.as_str()))
            .collect(),
        inputs,
        args.partitions,
    ) {
        Ok(r) => r,
        Err(e) => return fail(exit::INVALID_JOB, format!("{}: {e}", args.job.display())),
    };
    let local = LocalConfig {
        app_id: format!("local-{}", std::process::id()),
        executors,
        conf: platform,
        cache_dir: cache_dir(),
    };
    let tokio = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            return fail(exit::INTERNAL, format!("cannot start the async runtime: {e}"));
        }
    };
    tokio.block_on(run_job(local, request, (args.json, parts)))
}

/// Runs the job and prints its report, as JSON or not, as collected parts or not.
async fn run_job(local: LocalConfig, request: JobRequest, (json, parts): (bool, bool)) -> u8 {
    let cluster = match LocalCluster::start(local).await {
        Ok(c) => c,
        Err(e) => return fail(exit::INTERNAL, e),
    };
    // Tokens from the same providers a driver has (an `s3://` input's credentials, say).
    let credentials = cluster.driver.settings().credentials.clone();
    if let Err(e) = cluster.driver.renew_credentials(&credentials).await {
        return fail(exit::INVALID_JOB, e);
    }
    let handle = match cluster.driver.submit(request).await {
        Ok(h) => h,
        Err(e) => return fail(exit::INVALID_JOB, e),
    };
    let bar =
        (!json && std::io::stderr().is_terminal()).then(|| progress_bar(handle.progress.borrow().total));
    let mut progress = handle.progress.clone();
    let mut report_rx = handle.report;
    let report = loop {
        tokio::select! {
            report = &mut report_rx => break report,
            changed = progress.changed() => {
                if changed.is_ok() && let Some(bar) = &bar {
                    show_progress(bar, &progress.borrow());
                }
            }
        }
    };
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    cluster.shutdown().await;
    let Ok(report) = report else {
        return fail(exit::INTERNAL, "the driver stopped before the job ended");
    };
    report::print(&report, json, parts)
}
