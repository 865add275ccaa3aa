//! Tasks waiting for a slot: ranges of a job's tasks, so that a job of ten million
//! tasks queues one entry, not ten million.

use flint_proto::JobId;
use std::collections::VecDeque;
use std::ops::Range;

/// Tasks waiting for a slot, oldest job first; retries go to the front.
#[derive(Debug, Default)]
pub(super) struct Queue {
    entries: VecDeque<(JobId, Range<u32>)>,
    /// Tasks in `entries`.
    len: u64,
}

impl Queue {
    /// Queues `tasks` of `job` behind what waits.
    pub(super) fn push_back(&mut self, job: JobId, tasks: Range<u32>) {
        if tasks.start >= tasks.end {
            return;
        }
        self.len += u64::from(tasks.end - tasks.start);
        self.entries.push_back((job, tasks));
    }

    /// Queues task `index` of `job` ahead of everything.
    pub(super) fn push_front(&mut self, job: JobId, index: u32) {
        self.len += 1;
        self.entries.push_front((job, index..index + 1));
    }

    /// The task to place next.
    pub(super) fn front(&self) -> Option<(JobId, u32)> {
        self.entries.front().map(|(job, tasks)| (*job, tasks.start))
    }

    /// Takes the task [`Queue::front`] gave.
    pub(super) fn pop_front(&mut self) {
        if let Some((_, tasks)) = self.entries.front_mut() {
            tasks.start += 1;
            self.len -= 1;
            if tasks.start == tasks.end {
                self.entries.pop_front();
            }
        }
    }

    /// Drops every task of `job`.
    pub(super) fn remove_job(&mut self, job: JobId) {
        let mut len = 0;
        self.entries.retain(|(j, tasks)| {
            let keep = *j != job;
            if keep {
                len += u64::from(tasks.end - tasks.start);
            }
            keep
        });
        self.len = len;
    }

    /// Tasks waiting (a task queued twice counts twice, until it is taken).
    pub(super) fn len(&self) -> u64 {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_taken_a_task_at_a_time_and_retries_go_first() {
        let mut q = Queue::default();
        q.push_back(JobId(1), 0..3);
        q.push_back(JobId(2), 0..10_000_000);
        q.push_front(JobId(1), 7);
        assert_eq!(q.len(), 10_000_004);
        let mut taken = Vec::new();
        for _ in 0..5 {
            taken.push(q.front().unwrap());
            q.pop_front();
        }
        assert_eq!(taken, [(JobId(1), 7), (JobId(1), 0), (JobId(1), 1), (JobId(1), 2), (JobId(2), 0)]);
        q.remove_job(JobId(2));
        assert_eq!((q.len(), q.front()), (0, None));
    }
}
