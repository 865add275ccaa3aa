//! What the control core says of executors, for status.

use super::ControlCore;
use crate::registry::{ExecutorInfo, Lifecycle};
use flint_proto::{ExecutorId, ExecutorState, ExecutorStatus};
use std::collections::BTreeMap;
use std::time::Instant;

impl ControlCore {
    /// Registered and recently removed executors, for status.
    pub fn executors(&self, now: Instant) -> Vec<ExecutorStatus> {
        // The latest life of each id: a live one, else its last removal.
        let mut by_id: BTreeMap<ExecutorId, ExecutorStatus> = BTreeMap::new();
        for r in self.registry.removed() {
            by_id.insert(r.id.clone(), self.removed_status(r));
        }
        for (id, e) in self.registry.live().filter(|(_, e)| e.state != Lifecycle::Pending) {
            by_id.insert(id.clone(), self.live_status(now, id, e));
        }
        by_id.into_values().collect()
    }

    /// The executors alive now (registered or draining), without the removed ones
    /// [`ControlCore::executors`] adds.
    pub fn live_statuses(&self, now: Instant) -> Vec<ExecutorStatus> {
        self.registry
            .live()
            .filter(|(_, e)| e.state != Lifecycle::Pending)
            .map(|(id, e)| self.live_status(now, id, e))
            .collect()
    }

    /// One executor's latest life, as [`ControlCore::executors`] lists it.
    pub fn executor(&self, now: Instant, id: &ExecutorId) -> Option<ExecutorStatus> {
        match self.registry.get(id).filter(|(_, e)| e.state != Lifecycle::Pending) {
            Some((id, e)) => Some(self.live_status(now, id, e)),
            None => self.registry.removed().filter(|r| r.id == *id).last().map(|r| self.removed_status(r)),
        }
    }

    fn entry_status(&self, id: &ExecutorId, entry: &crate::registry::Entry) -> ExecutorStatus {
        let info =
            entry.info.clone().unwrap_or(ExecutorInfo { host: String::new(), cores: 0, memory: 0, slots: 0 });
        ExecutorStatus {
            id: id.clone(),
            host: info.host,
            cores: info.cores,
            memory: info.memory,
            slots: info.slots,
            running: 0,
            tasks_done: entry.tasks_done,
            tasks_failed: entry.tasks_failed,
            last_heartbeat_ms: None,
            excluded: false,
            removed: None,
            backend: if entry.by_backend { self.backend } else { "static" }.to_owned(),
            pod: entry.pod.clone(),
            state: match entry.state {
                Lifecycle::Draining => ExecutorState::Draining,
                _ => ExecutorState::Registered,
            },
            added_ms: None,
            removed_ms: None,
            input_bytes: 0,
            shuffle_write_bytes: 0,
        }
    }

    fn removed_status(&self, r: &crate::registry::Removed) -> ExecutorStatus {
        ExecutorStatus {
            removed: Some(r.reason.clone()),
            state: ExecutorState::Removed,
            ..self.entry_status(&r.id, &r.entry)
        }
    }

    fn live_status(&self, now: Instant, id: &ExecutorId, e: &crate::registry::Entry) -> ExecutorStatus {
        let excluded = self.scheduler.is_excluded(id);
        let base = self.entry_status(id, e);
        ExecutorStatus {
            running: self.scheduler.running_on(id),
            last_heartbeat_ms: Some(now.saturating_duration_since(e.last_heard).as_millis() as u64),
            excluded,
            state: if excluded { ExecutorState::Excluded } else { base.state },
            ..base
        }
    }
}
