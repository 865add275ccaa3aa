//! The seam between the driver and an executor: what the event loop may ask of one.
//!
//! Three links implement it: the in-process one behind `flint run` (`local.rs`), the
//! QUIC one for remote executors (`server.rs`), and scripted ones in tests, whose
//! executors fail, stall, lie or never answer. Calls never block the event loop: a link
//! queues what it is told. The queue is bounded by credit, not by a channel size: the
//! control core never places more attempts on an executor than its slots times the
//! pipeline depth, so a link holds at most that many launches (and a kill per attempt).

use flint_proto::{Attempt, BlockRef, ExecutorCommand, JobId, TaskLaunch};
use std::future::Future;
use std::pin::Pin;
use tokio::sync::mpsc;

/// The bytes of a fetched block, or why they could not be had.
pub type Fetch = Pin<Box<dyn Future<Output = Result<Vec<u8>, String>> + Send>>;

pub trait ExecutorLink: Send + Sync {
    /// Run these attempts.
    fn launch(&self, batch: Vec<TaskLaunch>);
    /// Stop an attempt, running or still queued.
    fn kill(&self, attempt: Attempt);
    /// The job ended: the executor drops its descriptor, blocks and leftover attempts.
    fn job_ended(&self, job: JobId);
    /// Finish the running attempts, take no new ones, then leave.
    fn decommission(&self);
    /// Hand over the partial results of the job's combined tasks.
    fn collect(&self, job: JobId);
    /// Copy these map outputs from a leaving executor, and hold them.
    fn adopt(&self, adoption: flint_proto::Adoption);
    /// A drained executor may go.
    fn leave(&self);
    /// Tasks read these delegation tokens from now on.
    fn tokens(&self, tokens: Vec<flint_proto::Token>) {
        let _ = tokens;
    }
    /// Fetches a block the executor holds (and lets it go: task outputs are read once).
    fn fetch(&self, block: BlockRef) -> Fetch;
    /// The driver removed this executor: end the link.
    fn close(&self, reason: &str);
    /// Where the executor serves its map outputs to its peers, if it does over the
    /// network (in-process executors are reached in-process).
    fn shuffle_endpoint(&self) -> Option<flint_proto::ShuffleEndpoint> {
        None
    }
}

/// Where a channel-fed executor's blocks come from, and how its transport ends.
pub trait Blocks: Send + Sync {
    fn fetch(&self, block: BlockRef) -> Fetch;
    /// Ends the transport once the executor has been told to stop.
    fn close(&self, reason: &str);
}

/// An executor fed by a command channel: the in-process one (`local.rs`) and the QUIC
/// one, whose channel a connection's writer task drains (`server.rs`). They differ only
/// in how blocks are fetched and the link ends.
///
/// The channel is unbounded as a type and bounded by its one sender, the event loop:
/// launches only under the scheduler's placement credit (slots × pipeline depth, each
/// handed back as its report arrives), kills at most one per attempt placed, a collect
/// per job the executor holds outputs of, a job's end once per job, a token push per
/// change, an adoption per job and leaving executor, one word to leave. Nothing a peer sends is queued here; a writer that cannot write ends the
/// link, and the executor is removed.
pub struct ChannelLink<B> {
    commands: mpsc::UnboundedSender<ExecutorCommand>,
    blocks: B,
    shuffle: Option<flint_proto::ShuffleEndpoint>,
}

impl<B: Blocks> ChannelLink<B> {
    pub fn new(commands: mpsc::UnboundedSender<ExecutorCommand>, blocks: B) -> ChannelLink<B> {
        ChannelLink { commands, blocks, shuffle: None }
    }

    /// An executor that serves its map outputs to peers there.
    pub fn with_shuffle(mut self, endpoint: Option<flint_proto::ShuffleEndpoint>) -> ChannelLink<B> {
        self.shuffle = endpoint;
        self
    }

    fn send(&self, command: ExecutorCommand) {
        // A closed channel means the executor is going; its loss reaches the loop apart.
        let _ = self.commands.send(command);
    }
}

impl<B: Blocks> ExecutorLink for ChannelLink<B> {
    fn shuffle_endpoint(&self) -> Option<flint_proto::ShuffleEndpoint> {
        self.shuffle.clone()
    }

    fn launch(&self, batch: Vec<TaskLaunch>) {
        self.send(ExecutorCommand::Launch(batch));
    }

    fn kill(&self, attempt: Attempt) {
        self.send(ExecutorCommand::Kill(attempt));
    }

    fn job_ended(&self, job: JobId) {
        self.send(ExecutorCommand::JobEnded(job));
    }

    fn decommission(&self) {
        self.send(ExecutorCommand::Decommission);
    }

    fn collect(&self, job: JobId) {
        self.send(ExecutorCommand::Collect(job));
    }

    fn tokens(&self, tokens: Vec<flint_proto::Token>) {
        self.send(ExecutorCommand::Tokens(tokens));
    }

    fn adopt(&self, adoption: flint_proto::Adoption) {
        self.send(ExecutorCommand::Adopt(adoption));
    }

    fn leave(&self) {
        self.send(ExecutorCommand::Leave);
    }

    fn fetch(&self, block: BlockRef) -> Fetch {
        self.blocks.fetch(block)
    }

    fn close(&self, reason: &str) {
        self.send(ExecutorCommand::Decommission);
        self.blocks.close(reason);
    }
}
