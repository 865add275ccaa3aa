//! `flint submit` and `flint status`: the client side, over the client API.

use crate::bundle;
use crate::common::{PeerTls, fail, load_secret, output_url, parse_confs, progress_bar, show_progress};
use crate::exit;
use crate::report;
use crate::run::fail_chain;
use clap::Args;
use flint_client::{Client, Input, JobEvent};
use flint_net::{DriverUrl, Identity, Secret, Traffic};
use flint_proto::wire::CancelReply;
use flint_proto::{ClusterStatus, JobId};
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    driver: DriverArgs,
    /// The job: a job folder, a Python job, a .wasm component or a bundle (as for
    /// `flint run`).
    job: PathBuf,
    /// An input (repeatable): a file on this machine (sent to the driver with the job,
    /// which serves it to executors), `flint:///path` (a file under the driver's input
    /// roots), `s3://bucket/key` or `s3://bucket/prefix/`, `https://…`, or `file:///path`
    /// on a filesystem every executor shares.
    #[arg(long = "input", value_name = "URL")]
    inputs: Vec<String>,
    /// Partitions: generated tasks, or about how many file splits.
    #[arg(long)]
    partitions: Option<u32>,
    /// A map/reduce job's reduce partitions [default: the manifest's, else one per slot].
    #[arg(long)]
    reduce_partitions: Option<u32>,
    /// A map/reduce job's output: a directory as the driver and its executors see it
    /// (under their flint.output.roots), or s3://bucket/prefix/ (with the s3 token's
    /// credentials): part-NNNNN per reduce task, then _SUCCESS.
    /// Not with --every: each run would need an output of its own.
    #[arg(long, value_name = "DIR|URL", conflicts_with = "every")]
    output: Option<String>,
    /// Bring a map/reduce job's parts back instead (Spark's collect): what each reduce
    /// task writes to its part, printed in partition order.
    #[arg(long, conflicts_with = "output")]
    collect: bool,
    /// Job configuration KEY=VALUE (repeatable); flint.task.* keys set this job's limits.
    #[arg(long = "conf", value_name = "KEY=VALUE")]
    conf: Vec<String>,
    /// Print one JSON object, as `flint run --json` does.
    #[arg(long)]
    json: bool,
    /// Run the job again every DURATION (such as 10s): a run starts a period after the
    /// last one started, or as soon as it ends if it took longer (runs never overlap).
    /// A driver with a backend sizes its executors from each run's time against it.
    #[arg(long, value_parser = parse_period)]
    every: Option<std::time::Duration>,
    /// With --every: stop after this many runs [default: run until stopped].
    #[arg(long, requires = "every")]
    runs: Option<u32>,
}

/// Where the driver is, and how to prove the application secret to it.
#[derive(Args)]
pub struct DriverArgs {
    /// The driver's URL, as `flint driver` printed it.
    #[arg(long, env = "FLINT_DRIVER_URL")]
    driver_url: String,
    /// The application secret's file (`FLINT_SECRET` wins).
    #[arg(long, env = "FLINT_SECRET_FILE")]
    secret_file: Option<PathBuf>,
    #[command(flatten)]
    tls: PeerTls,
}

fn parse_period(text: &str) -> Result<std::time::Duration, String> {
    match flint_proto::config::parse_duration(text).map_err(|e| e.to_string())? {
        d if d.is_zero() => Err("the period must be positive".into()),
        d => Ok(d),
    }
}

#[derive(Args)]
pub struct StatusArgs {
    #[command(flatten)]
    driver: DriverArgs,
    /// Print one JSON object: executors and jobs.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct CancelArgs {
    /// The job's id, as `flint submit` and `flint status` show it.
    job: u64,
    #[command(flatten)]
    driver: DriverArgs,
    /// Print one JSON object: the job and what became of it.
    #[arg(long)]
    json: bool,
}

/// Where the driver is, the secret, and the certificate to show it, if any.
type Session = (DriverUrl, Secret, Option<Identity>);

fn session(args: &DriverArgs) -> Result<Session, String> {
    let url: DriverUrl = args.driver_url.parse().map_err(|e: flint_net::UrlError| e.to_string())?;
    let secret = match load_secret(args.secret_file.as_deref())? {
        Some(secret) => secret,
        None => crate::common::secret_of(&url)?.ok_or(
            "no application secret: set FLINT_SECRET or pass --secret-file (the secret of a driver on this machine that made its own is found in ~/.flint by its fingerprint)",
        )?,
    };
    Ok((url, secret, args.tls.identity()?))
}

/// Asks the driver one thing (`ask`) on a session of its own, then says goodbye: the
/// answer, or the exit code of what went wrong (said on stderr).
fn ask_driver<T>(
    args: &DriverArgs,
    ask: impl AsyncFnOnce(&Client) -> Result<T, flint_client::ClientError>,
) -> Result<T, u8> {
    let (url, secret, identity) = session(args).map_err(|e| fail(exit::USAGE, e))?;
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    tokio.block_on(async move {
        // One question and its answer.
        let client = Client::connect_as(&url, &secret, identity.as_ref(), Traffic::Requests)
            .await
            .map_err(|e| fail(connect_code(&e), e))?;
        let answer = ask(&client).await;
        client.close().await;
        answer.map_err(|e| fail(connect_code(&e), e))
    })
}

pub fn submit(args: SubmitArgs) -> u8 {
    let (url, secret, identity) = match session(&args.driver) {
        Ok(s) => s,
        Err(e) => return fail(exit::USAGE, e),
    };
    let conf = match parse_confs(&args.conf) {
        Ok(c) => c,
        Err(e) => return fail(exit::INVALID_JOB, e),
    };
    let mut bundle = match bundle::open(&args.job) {
        Ok(b) => b,
        Err(e) => return fail_chain(exit::INVALID_JOB, e),
    };
    if args.reduce_partitions.is_some() {
        bundle.manifest.reduce_partitions = args.reduce_partitions;
    }
    match args.output.as_deref().map(output_url) {
        None => {}
        Some(Ok(output)) => bundle.manifest.output = Some(output),
        Some(Err(e)) => return fail(exit::INVALID_JOB, e),
    }
    bundle.manifest.collect |= args.collect;
    // Files of this machine's, a folder's or a glob's, go with the job, one by one.
    let mut inputs = Vec::new();
    for text in &args.inputs {
        match Input::parse(text) {
            Input::File(path) => match flint_data::local_files(&path.to_string_lossy()) {
                Ok(files) => inputs.extend(files.into_iter().map(Input::File)),
                Err(e) => return fail(exit::INVALID_JOB, format!("--input {text}: {e}")),
            },
            url => inputs.push(url),
        }
    }
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    tokio.block_on(async move {
        // A job's files are bulk; a job and its report are not.
        let sends_files = inputs.iter().any(|i| matches!(i, Input::File(_)));
        let traffic = if sends_files { Traffic::Bulk } else { Traffic::Requests };
        let client = match Client::connect_as(&url, &secret, identity.as_ref(), traffic).await {
            Ok(c) => c,
            Err(e) => return fail(connect_code(&e), e),
        };
        let code = async {
            let mut first_failure = 0;
            for run in 1.. {
                let started = std::time::Instant::now();
                let code = submit_once(&client, &bundle, &conf, &inputs, &args).await;
                let Some(period) = args.every else { return code };
                // A busy driver may have room at the next period; these will not.
                if code == exit::UNREACHABLE || code == exit::INVALID_JOB {
                    return code;
                }
                if first_failure == 0 {
                    first_failure = code;
                }
                if args.runs.is_some_and(|n| run >= n) {
                    break;
                }
                if let Some(wait) = period.checked_sub(started.elapsed()) {
                    tokio::time::sleep(wait).await;
                }
            }
            first_failure
        }
        .await;
        client.close().await;
        code
    })
}

/// Submits the job once and prints its report; the exit code.
async fn submit_once(
    client: &Client,
    bundle: &flint_proto::Bundle,
    conf: &flint_proto::Conf,
    inputs: &[Input],
    args: &SubmitArgs,
) -> u8 {
    let submitted = client
        .submit(
            bundle.manifest.clone(),
            &bundle.component,
            conf.clone(),
            inputs.to_vec(),
            args.partitions,
            args.every,
        )
        .await;
    let mut job = match submitted {
        Ok(j) => j,
        Err(flint_client::ClientError::JobRejected(reason)) => return fail(exit::INVALID_JOB, reason),
        Err(e @ flint_client::ClientError::DriverBusy(_)) => return fail(exit::BUSY, e),
        Err(e) => return fail(connect_code(&e), e),
    };
    let bar = (!args.json && std::io::stderr().is_terminal()).then(|| progress_bar(0));
    // Ctrl-C asks the driver once to cancel the job, whose report then says so; a
    // second one leaves it running and exits at once.
    let (id, mut interrupts) = (job.id, 0);
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    // The cancel asked for, while its answer is awaited: beside the report and a
    // second Ctrl-C, never in their way.
    let mut cancelling = None;
    loop {
        // The read of the next frame is never dropped half-way: an interrupt is
        // answered beside it.
        let next = job.next();
        tokio::pin!(next);
        let next = loop {
            tokio::select! {
                next = &mut next => break next,
                _ = &mut interrupted => {
                    interrupts += 1;
                    if interrupts > 1 {
                        return 130;
                    }
                    interrupted.set(tokio::signal::ctrl_c());
                    eprintln!("flint: cancelling job {id} (Ctrl-C again to leave it running)");
                    cancelling = Some(Box::pin(client.cancel(id)));
                }
                answer = async { cancelling.as_mut().expect("checked").await }, if cancelling.is_some() => {
                    cancelling = None;
                    if let Err(e) = answer {
                        eprintln!("flint: could not cancel job {id}: {e}");
                    }
                }
            }
        };
        match next {
            Ok(Some(JobEvent::Progress(p))) => {
                if let Some(bar) = &bar {
                    show_progress(bar, &p);
                }
            }
            Ok(Some(JobEvent::Notice(said))) => match &bar {
                Some(bar) => bar.println(format!("flint: {said}")),
                None => eprintln!("flint: {said}"),
            },
            Ok(Some(JobEvent::Done(report))) => {
                if let Some(bar) = &bar {
                    bar.finish_and_clear();
                }
                return report::print(&report, args.json, bundle.manifest.collect);
            }
            Ok(None) => return fail(exit::UNREACHABLE, "the driver ended the job's stream without a report"),
            Err(e) => return fail(connect_code(&e), e),
        }
    }
}

/// The exit code for a client's error: the same numbers an executor exits with for the
/// same refusals, so a script tells a wrong secret from a driver that is not there.
fn connect_code(e: &flint_client::ClientError) -> u8 {
    use flint_client::ClientError;
    use flint_proto::wire::Rejection;
    match e {
        ClientError::FingerprintMismatch(_) => exit::FINGERPRINT,
        ClientError::Rejected(Rejection::NotAuthenticated) => exit::NOT_AUTHENTICATED,
        ClientError::Rejected(Rejection::WrongApp { .. }) => exit::WRONG_APP,
        ClientError::Rejected(Rejection::VersionMismatch { .. }) => exit::VERSION_MISMATCH,
        ClientError::Rejected(_) => exit::REFUSED,
        ClientError::Input(_) => exit::INVALID_JOB,
        ClientError::Unreachable { .. }
        | ClientError::Protocol(_)
        | ClientError::JobRejected(_)
        | ClientError::DriverBusy(_) => exit::UNREACHABLE,
    }
}

pub fn status(args: StatusArgs) -> u8 {
    match ask_driver(&args.driver, async |client| client.status().await) {
        Ok(status) if args.json => {
            println!("{}", serde_json::to_string(&status).expect("status encodes"));
            0
        }
        Ok(status) => {
            print!("{}", table(&status));
            0
        }
        Err(code) => code,
    }
}

pub fn cancel(args: CancelArgs) -> u8 {
    let job = JobId(args.job);
    let (code, said) = match ask_driver(&args.driver, async |client| client.cancel(job).await) {
        Ok(CancelReply::Cancelled) => (0, "cancelled"),
        Ok(CancelReply::Ended) => (exit::NO_SUCH_JOB, "ended already"),
        Ok(CancelReply::Unknown) => (exit::NO_SUCH_JOB, "unknown"),
        Err(code) => return code,
    };
    if args.json {
        println!("{}", serde_json::json!({ "job_id": job, "status": said }));
    } else if code == 0 {
        println!("job {job} cancelled");
    } else {
        eprintln!("flint: job {job} is {said}: nothing to cancel");
    }
    code
}

/// Rows laid out in columns as wide as their widest cell (`right`: the columns whose
/// cells are numbers, aligned right), two spaces in, two between; the last column is
/// not padded.
fn columns(rows: &[Vec<String>], right: &[usize]) -> String {
    let mut widths = vec![0; rows.iter().map(Vec::len).max().unwrap_or(0)];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        out.push_str("  ");
        for (i, cell) in row.iter().enumerate() {
            let pad = widths[i].saturating_sub(cell.chars().count());
            match (right.contains(&i), i + 1 == row.len()) {
                (true, _) => out.push_str(&format!("{}{cell}", " ".repeat(pad))),
                (false, true) => out.push_str(cell),
                (false, false) => out.push_str(&format!("{cell}{}", " ".repeat(pad))),
            }
            if i + 1 < row.len() {
                out.push_str("  ");
            }
        }
        out.push('\n');
    }
    out
}

fn table(status: &ClusterStatus) -> String {
    let mut out = format!("application {}\n\nexecutors:\n", status.app_id);
    let header =
        ["ID", "BACKEND", "POD OR HOST", "CORES", "MEMORY", "SLOTS", "RUNNING", "DONE", "FAILED", "STATE"];
    let mut rows = vec![header.iter().map(|h| h.to_string()).collect::<Vec<_>>()];
    for e in &status.executors {
        let state = match (&e.removed, e.last_heartbeat_ms) {
            (Some(reason), _) => format!("removed: {reason}"),
            (None, Some(ms)) => format!("{} (heartbeat {:.1} s ago)", e.state, ms as f64 / 1e3),
            (None, None) => e.state.to_string(),
        };
        rows.push(vec![
            e.id.to_string(),
            e.backend.clone(),
            e.pod.clone().unwrap_or_else(|| e.host.clone()),
            e.cores.to_string(),
            format!("{}m", e.memory >> 20),
            e.slots.to_string(),
            e.running.to_string(),
            e.tasks_done.to_string(),
            e.tasks_failed.to_string(),
            state,
        ]);
    }
    out.push_str(&columns(&rows, &[3, 4, 5, 6, 7, 8]));
    if status.executors_starting > 0 {
        out.push_str(&format!("  ({} more starting)\n", status.executors_starting));
    }
    if let Some(reason) = &status.allocation_stopped {
        out.push_str(&format!("  no more executors will be started: {reason}\n"));
    }
    if let Some(reason) = &status.executors_waiting {
        out.push_str(&format!("  {reason}\n"));
    }
    out.push_str("\njobs:\n");
    let mut rows =
        vec![["ID", "NAME", "STATE", "TASKS", "STAGES"].iter().map(|h| h.to_string()).collect::<Vec<_>>()];
    for j in &status.jobs {
        // A job of several stages: where each stands.
        let stages: Vec<String> = match j.stages.len() {
            0 | 1 => Vec::new(),
            _ => j.stages.iter().map(|s| format!("{}:{}/{}", s.id, s.done, s.tasks)).collect(),
        };
        rows.push(vec![
            j.job.to_string(),
            j.name.clone(),
            j.state.to_string(),
            format!("{}/{}", j.progress.done, j.progress.total),
            stages.join(" "),
        ]);
    }
    out.push_str(&columns(&rows, &[0, 3]));
    if status.left_out > 0 {
        out.push_str(&format!(
            "  ({} older finished jobs and removed executors left out)\n",
            status.left_out
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::columns;

    #[test]
    fn columns_line_up_whatever_their_cells_hold() {
        let rows: Vec<Vec<String>> =
            [["ID", "NAME", "TASKS"], ["1", "word-count-of-a-long-name", "3/3"], ["12", "pi", "16/16"]]
                .iter()
                .map(|r| r.iter().map(|c| c.to_string()).collect())
                .collect();
        let text = columns(&rows, &[0, 2]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "  ID  NAME                       TASKS");
        assert_eq!(lines[1], "   1  word-count-of-a-long-name    3/3");
        assert_eq!(lines[2], "  12  pi                         16/16");
    }
}
