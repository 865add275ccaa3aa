//! The queue slot threads pull from: launched attempts (and collects of partial
//! results) first in, first out, the first reads of those next in line begun while
//! they wait.

use crate::meter::InputMeter;
use flint_data::lines::Begun;
use flint_proto::{JobId, StatusUpdate, TaskLaunch};
use flint_runtime::KillSwitch;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};

/// Work for a slot thread.
pub(super) enum Work {
    Attempt(Queued),
    /// Hand over the job's partial results.
    Collect(JobId),
}

/// An attempt waiting for a slot.
pub(super) struct Queued {
    pub(super) launch: TaskLaunch,
    /// Also in `ExecutorCore::running`, with the meter, for kills and heartbeats.
    pub(super) kill: KillSwitch,
    /// What its input is counted on.
    pub(super) meter: Arc<InputMeter>,
    pub(super) report: Reporter,
    /// Its split's first read, begun while it waits ([`SlotQueue::begin_ahead`]).
    pub(super) first: Option<Begun>,
}

/// What reports an attempt's end.
pub(super) type Reporter = Box<dyn FnOnce(StatusUpdate) + Send>;

/// The attempts waiting for a slot; one thread per slot pulls from it. A thread runs
/// one attempt to its end and reports it itself: no task is spawned and no thread
/// handed over per attempt.
#[derive(Default)]
pub(super) struct SlotQueue {
    state: Mutex<QueueState>,
    ready: Condvar,
}

#[derive(Default)]
struct QueueState {
    waiting: VecDeque<Work>,
    /// Slot threads asleep on `ready`: a push wakes one only if there is one, so a
    /// busy executor makes no wake-up call per attempt.
    idle: usize,
    closed: bool,
}

impl SlotQueue {
    pub(super) fn push(&self, item: Work) {
        let mut state = self.state.lock().expect("slot queue lock");
        state.waiting.push_back(item);
        if state.idle > 0 {
            self.ready.notify_one();
        }
    }

    /// A collect of `job`, unless one waits already.
    pub(super) fn push_collect(&self, job: JobId) {
        let waiting = {
            let state = self.state.lock().expect("slot queue lock");
            state.waiting.iter().any(|work| matches!(work, Work::Collect(j) if *j == job))
        };
        if !waiting {
            self.push(Work::Collect(job));
        }
    }

    /// The next attempt, waiting for one; `None` once the executor is gone.
    pub(super) fn pop(&self) -> Option<Work> {
        let mut state = self.state.lock().expect("slot queue lock");
        loop {
            if state.closed {
                return None;
            }
            if let Some(item) = state.waiting.pop_front() {
                return Some(item);
            }
            state.idle += 1;
            state = self.ready.wait(state).expect("slot queue lock");
            state.idle -= 1;
        }
    }

    /// Begins, through `begin`, the first reads of the first `ahead` attempts waiting
    /// (one per slot: what a slot starts next) that have none begun yet: each is read
    /// while the attempts before it run. At most `ahead` first reads are held.
    pub(super) fn begin_ahead(&self, ahead: usize, mut begin: impl FnMut(&TaskLaunch) -> Option<Begun>) {
        let mut state = self.state.lock().expect("slot queue lock");
        let waiting = state.waiting.iter_mut().filter_map(|work| match work {
            Work::Attempt(queued) => Some(queued),
            Work::Collect(_) => None,
        });
        for queued in waiting.take(ahead) {
            if queued.first.is_none() && !queued.kill.is_killed() {
                // Under the queue's lock: a panic here would poison it for every slot.
                // A read that cannot begin is made by the task itself, which fails alone.
                let begun = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| begin(&queued.launch)));
                queued.first = begun.ok().flatten();
            }
        }
    }

    pub(super) fn close(&self) {
        let mut state = self.state.lock().expect("slot queue lock");
        state.closed = true;
        state.waiting.clear();
        self.ready.notify_all();
    }
}
