//! Flint's client API: what `flint submit` and `flint status` use, and what an
//! application can call directly to submit jobs to a driver over QUIC.
//!
//! ```no_run
//! # async fn example(url: flint_net::DriverUrl, secret: flint_net::Secret,
//! #     manifest: flint_proto::Manifest, component: Vec<u8>) -> Result<(), flint_client::ClientError> {
//! let client = flint_client::Client::connect(&url, &secret).await?;
//! let mut job = client.submit(manifest, &component, Default::default(), vec![], None, None).await?;
//! while let Some(event) = job.next().await? {
//!     if let flint_client::JobEvent::Done(report) = event {
//!         println!("{:?}", report.outcome);
//!     }
//! }
//! # Ok(()) }
//! ```

use flint_net::{
    ConnectError, DriverUrl, FrameError, Identity, Secret, Traffic, WhenRefused, connect_as, hello,
    read_frame, read_payload_exact, write_frame, write_payload, write_payload_from_file,
};
use flint_proto::wire::{
    CancelReply, HelloReply, Rejection, Request, Role, Submission, SubmitInput, SubmitReply,
};
use flint_proto::{ClusterStatus, Conf, JobId, JobProgress, JobReport, Manifest};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach the driver at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("{0}")]
    FingerprintMismatch(String),
    #[error("the driver refused the connection: {0}")]
    Rejected(Rejection),
    #[error("the driver refused the job: {0}")]
    JobRejected(String),
    #[error("the driver is busy: {0}")]
    DriverBusy(String),
    #[error("connection to the driver failed: {0}")]
    Protocol(String),
    #[error("cannot read input {0}")]
    Input(String),
}

/// An input as a client gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Where the data lives (`flint:///…`, `s3://…`, `https://…`, `file:///…` on a
    /// filesystem every executor shares); the driver plans it.
    Url(String),
    /// A file on this machine: sent with the job.
    File(std::path::PathBuf),
}

impl Input {
    /// A URL is where data lives; anything else is a path to a file of the client's.
    pub fn parse(text: &str) -> Input {
        if text.contains("://") { Input::Url(text.to_owned()) } else { Input::File(text.into()) }
    }
}

impl From<FrameError> for ClientError {
    fn from(e: FrameError) -> Self {
        ClientError::Protocol(e.to_string())
    }
}

impl From<quinn::ConnectionError> for ClientError {
    fn from(e: quinn::ConnectionError) -> Self {
        ClientError::Protocol(e.to_string())
    }
}

/// A session with a driver.
pub struct Client {
    connection: quinn::Connection,
    _endpoint: quinn::Endpoint,
}

/// What a submitted job tells its submitter.
#[derive(Debug, Clone, PartialEq)]
pub enum JobEvent {
    Progress(JobProgress),
    /// Why the executors the job needs wait (said when that changes).
    Notice(String),
    Done(Box<JobReport>),
}

/// A job the driver accepted.
pub struct SubmittedJob {
    pub id: JobId,
    recv: quinn::RecvStream,
    done: bool,
    result: Option<Vec<u8>>,
    /// The job's files, still being sent; stopped when the job is dropped.
    sending: Option<(tokio::task::JoinHandle<Result<(), ClientError>>, AbortOnDrop)>,
    /// Why a file could not be sent: said unless the driver's report comes first (a
    /// job that ended before it read its files stops their sending).
    unsent: Option<ClientError>,
}

/// Stops a spawned task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Client {
    /// Says goodbye to the driver, so that it does not wait for this connection to go
    /// idle (and log it as lost), and waits until the goodbye has left: not for the
    /// draining period (three probe timeouts, some 80 ms even on loopback), which only
    /// matters for packets still arriving, and never more than 250 ms.
    pub async fn close(self) {
        // After the close, the one datagram the connection still sends is the close.
        let before = self.connection.stats().udp_tx.datagrams;
        self.connection.close(0u32.into(), b"client done");
        let sent = async {
            while self.connection.stats().udp_tx.datagrams == before {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        };
        let _ = tokio::time::timeout(Duration::from_millis(250), sent).await;
    }

    /// Connects (retrying for a few seconds while the driver starts) and proves the
    /// application secret: a session for any traffic, files included ([`Traffic::Bulk`]).
    pub async fn connect(url: &DriverUrl, secret: &Secret) -> Result<Client, ClientError> {
        Client::connect_as(url, secret, None, Traffic::Bulk).await
    }

    /// [`Client::connect`], showing `identity` to a driver that asks for a client
    /// certificate (mutual TLS), for a session that carries `traffic`: a one-off
    /// question is answered sooner over [`Traffic::Requests`].
    pub async fn connect_as(
        url: &DriverUrl,
        secret: &Secret,
        identity: Option<&Identity>,
        traffic: Traffic,
    ) -> Result<Client, ClientError> {
        let idle = flint_proto::Settings::default().network_idle_timeout;
        let (endpoint, connection) =
            connect_as(url, Duration::from_secs(10), idle, identity, WhenRefused::GiveUp, traffic)
                .await
                .map_err(|e| match e {
                    ConnectError::FingerprintMismatch { .. } => {
                        ClientError::FingerprintMismatch(e.to_string())
                    }
                    ConnectError::Unreachable(reason) => {
                        ClientError::Unreachable { url: url.to_string(), reason }
                    }
                    ConnectError::Refused { .. } => {
                        ClientError::Unreachable { url: url.to_string(), reason: e.to_string() }
                    }
                })?;
        match hello(&connection, secret, Role::Client, "", None, None).await?.0 {
            HelloReply::Welcome { .. } => Ok(Client { connection, _endpoint: endpoint }),
            HelloReply::Rejected(r) => Err(ClientError::Rejected(r)),
        }
    }

    /// Submits a job. URL inputs are planned by the driver and read by executors from
    /// where they live; files (`Input::File`) are sent to the driver, which keeps them
    /// while the job runs and serves them to executors. `every` marks a run of a
    /// recurring job with its period, which the driver sizes its fleet by.
    pub async fn submit(
        &self,
        manifest: Manifest,
        component: &[u8],
        config: Conf,
        inputs: Vec<Input>,
        partitions: Option<u32>,
        every: Option<std::time::Duration>,
    ) -> Result<SubmittedJob, ClientError> {
        let mut listed = Vec::new();
        let mut files = Vec::new();
        for input in inputs {
            match input {
                Input::Url(url) => listed.push(SubmitInput::Url(url)),
                Input::File(path) => {
                    let cannot = |e: std::io::Error| ClientError::Input(format!("{}: {e}", path.display()));
                    let file = tokio::fs::File::open(&path).await.map_err(cannot)?.into_std().await;
                    let size = file.metadata().map_err(cannot)?.len();
                    let name = path.file_name().map_or("input".into(), |n| n.to_string_lossy().into_owned());
                    listed.push(SubmitInput::Upload { name, size });
                    files.push((path, file, size));
                }
            }
        }
        let (mut send, mut recv) = self.connection.open_bi().await?;
        let submission = Submission {
            manifest,
            component_size: component.len() as u64,
            config,
            inputs: listed,
            partitions,
            every,
        };
        match write_frame(&mut send, &Request::Submit(Box::new(submission))).await {
            Err(FrameError::TooLarge(size)) => {
                return Err(ClientError::JobRejected(format!(
                    "its description (manifest, configuration, input names) is {size} bytes, over the {} a message may carry",
                    flint_proto::wire::MAX_FRAME
                )));
            }
            sent => sent?,
        }
        write_payload(&mut send, component).await?;
        // The files go on while the job runs: the driver plans it from their sizes and
        // its tasks read each range once it is there.
        let sending = tokio::spawn(async move {
            for (path, file, size) in files {
                let sent = write_payload_from_file(&mut send, file, 0, size).await;
                match sent {
                    Ok(n) if n == size => {}
                    Ok(n) => {
                        let _ = send.reset(0u32.into());
                        return Err(ClientError::Input(format!(
                            "{}: {n} bytes read, {size} when the job was submitted (the file changed)",
                            path.display()
                        )));
                    }
                    Err(e) => {
                        return Err(ClientError::Input(format!("{}: not all sent: {e}", path.display())));
                    }
                }
            }
            let _ = send.finish();
            Ok(())
        });
        let abort = AbortOnDrop(sending.abort_handle());
        match read_frame::<SubmitReply>(&mut recv).await? {
            Some(SubmitReply::Accepted { job }) => Ok(SubmittedJob {
                id: job,
                recv,
                done: false,
                result: None,
                sending: Some((sending, abort)),
                unsent: None,
            }),
            Some(SubmitReply::Rejected(reason)) => Err(ClientError::JobRejected(reason)),
            Some(SubmitReply::Busy(why)) => Err(ClientError::DriverBusy(why)),
            other => Err(ClientError::Protocol(format!("unexpected reply {other:?}"))),
        }
    }

    /// The driver's executors and jobs.
    pub async fn status(&self) -> Result<ClusterStatus, ClientError> {
        let (mut send, mut recv) = self.connection.open_bi().await?;
        write_frame(&mut send, &Request::Status).await?;
        let _ = send.finish();
        read_frame(&mut recv).await?.ok_or_else(|| ClientError::Protocol("no status".into()))
    }

    /// Stops job `job`, running or waiting: its attempts are killed, and whoever
    /// submitted it gets a report saying it was cancelled.
    pub async fn cancel(&self, job: JobId) -> Result<CancelReply, ClientError> {
        let (mut send, mut recv) = self.connection.open_bi().await?;
        write_frame(&mut send, &Request::Cancel(job)).await?;
        let _ = send.finish();
        read_frame(&mut recv).await?.ok_or_else(|| ClientError::Protocol("no answer to the cancel".into()))
    }
}

impl SubmittedJob {
    /// The next progress update, then the report; `None` after the report.
    pub async fn next(&mut self) -> Result<Option<JobEvent>, ClientError> {
        if self.done {
            return Ok(None);
        }
        // A file that could not be sent fails the job on the driver; this side says why,
        // unless the driver's report says more.
        if let Some((sending, _)) = self.sending.as_mut().filter(|(s, _)| s.is_finished()) {
            let sent = sending.await.unwrap_or_else(|e| Err(ClientError::Input(e.to_string())));
            self.sending = None;
            self.unsent = sent.err();
        }
        loop {
            let frame = match read_frame::<SubmitReply>(&mut self.recv).await {
                Ok(frame) => frame,
                Err(e) => return Err(self.unsent.take().unwrap_or(e.into())),
            };
            match frame {
                Some(SubmitReply::Progress(p)) => return Ok(Some(JobEvent::Progress(p))),
                Some(SubmitReply::Notice(said)) => return Ok(Some(JobEvent::Notice(said))),
                Some(SubmitReply::Result { size }) => {
                    self.result = Some(read_payload_exact(&mut self.recv, size).await?);
                }
                Some(SubmitReply::Done(mut report)) => {
                    self.done = true;
                    if let (Ok(bytes), Some(result)) = (&mut report.outcome, self.result.take()) {
                        *bytes = result;
                    }
                    return Ok(Some(JobEvent::Done(report)));
                }
                Some(other) => return Err(ClientError::Protocol(format!("unexpected reply {other:?}"))),
                None => {
                    return Err(self.unsent.take().unwrap_or_else(|| {
                        ClientError::Protocol("the driver closed the job's stream before its report".into())
                    }));
                }
            }
        }
    }
}
