//! An executor as the scheduler keeps it, and the placement index: for each pipeline
//! depth, the usable executors with room, in buckets by how much, kept in step with
//! every change to an executor (by the scheduler's `index` and `unindex`).

use flint_proto::{ExecutorId, JobId};
use std::collections::{BTreeMap, BTreeSet};

/// An executor's place in [`Scheduler::executors`]: dense, reused once the executor
/// is gone, and never seen outside the scheduler (ids are strings only at its edges, so
/// the hot path neither hashes nor compares them).
pub(super) type Ix = u32;

#[derive(Debug)]
pub(super) struct Executor {
    pub(super) id: ExecutorId,
    /// Join order: ties in placement go to the executor that joined first.
    pub(super) seq: u64,
    pub(super) slots: u32,
    /// Attempts placed here now (running or queued on the executor).
    pub(super) running: u32,
    /// Done tasks whose outputs it holds combined, not yet delivered.
    pub(super) held: u32,
    pub(super) decommissioning: bool,
    /// Tasks that failed here (in a way that counts against them).
    pub(super) failed_tasks: BTreeSet<(JobId, u32)>,
    pub(super) excluded: bool,
    /// Attempts it ended (or was told to drop) so far, and when the latest of them
    /// ended: an attempt queued behind others (a pipelined job's) starts when enough of
    /// those before it have ended, and its time as a straggler counts from then.
    pub(super) ended: u64,
    pub(super) ended_at: std::collections::VecDeque<std::time::Instant>,
    /// Its last heartbeat's word on its attempts: the share of its input each had read,
    /// and when that was heard (kept only while speculation is on; at most one entry
    /// per attempt placed here).
    pub(super) progress: Vec<(flint_proto::Attempt, f64, std::time::Instant)>,
}

/// Ends an executor remembers the time of: more than any queue an executor holds.
pub(super) const ENDS_KEPT: usize = 1024;

impl Executor {
    /// When the attempt that starts once `after` of this executor's attempts have ended
    /// started, if it has.
    pub(super) fn started(&self, after: u64) -> Option<std::time::Instant> {
        if after > self.ended {
            return None;
        }
        // Ends before the first remembered one: longer ago than any it knows the time of.
        let forgotten = self.ended - self.ended_at.len() as u64;
        match after.checked_sub(forgotten + 1) {
            Some(i) => Some(self.ended_at[i as usize]),
            None => self.ended_at.front().copied(),
        }
    }
}

impl Executor {
    pub(super) fn usable(&self) -> bool {
        !self.decommissioning && !self.excluded
    }

    /// Attempts it may still take when each slot may hold `depth`.
    pub(super) fn free(&self, depth: u32) -> u32 {
        if self.usable() { self.slots.saturating_mul(depth).saturating_sub(self.running) } else { 0 }
    }
}

/// Usable executors with room at one pipeline depth, in placement order: most room
/// first, then join order. A bucket per amount of room, and only executors with room
/// are in it: in a saturated fleet an executor that fills up leaves the index, so the
/// buckets in use hold the few executors with a free place whatever the fleet's size,
/// and moving an executor costs two operations on small maps.
#[derive(Debug, Default)]
pub(super) struct Room {
    /// Kept up to date only while some job places from it (see `Scheduler::room`);
    /// otherwise empty, and rebuilt when a job needs it again.
    pub(super) live: bool,
    /// `buckets[f]`: executors with room for `f` more attempts, by `seq`.
    pub(super) buckets: Vec<BTreeMap<u64, Ix>>,
    /// The highest non-empty bucket; 0 when no executor has room.
    pub(super) top: usize,
    /// The placement count when a job last placed from this room.
    pub(super) last_used: u64,
}

impl Room {
    pub(super) fn insert(&mut self, free: u32, seq: u64, ix: Ix) {
        if free == 0 {
            return;
        }
        let f = free as usize;
        if self.buckets.len() <= f {
            self.buckets.resize_with(f + 1, BTreeMap::new);
        }
        self.buckets[f].insert(seq, ix);
        self.top = self.top.max(f);
    }

    pub(super) fn remove(&mut self, free: u32, seq: u64) {
        if let Some(bucket) = self.buckets.get_mut(free as usize).filter(|_| free > 0) {
            bucket.remove(&seq);
            while self.top > 0 && self.buckets[self.top].is_empty() {
                self.top -= 1;
            }
        }
    }

    /// The executor to place on next.
    pub(super) fn best(&self) -> Option<Ix> {
        self.buckets.get(self.top).filter(|_| self.top > 0)?.first_key_value().map(|(_, ix)| *ix)
    }

    /// Executors with room, in placement order.
    pub(super) fn iter(&self) -> impl Iterator<Item = Ix> + '_ {
        self.buckets.iter().take(self.top + 1).skip(1).rev().flat_map(|bucket| bucket.values().copied())
    }

    pub(super) fn clear(&mut self) {
        self.buckets.iter_mut().for_each(BTreeMap::clear);
        self.top = 0;
    }
}
