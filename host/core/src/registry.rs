//! The executor registry: who may run tasks, under which incarnation, and since when it
//! was last heard from. No IO and no clock: callers pass `now`.
//!
//! An executor id names a slot in the application (Spark's executor id, a pod name);
//! an [`Incarnation`] names one life of that id. Ids may be taken again once free (a
//! restarted executor takes its id back), incarnations never: every report, heartbeat
//! and loss names the incarnation it belongs to, and one that is not current is
//! dropped. The lifecycle is pending (id reserved, bootstrapping) → registered →
//! draining → removed.

use flint_proto::ExecutorId;
use flint_proto::wire::Rejection;
use foldhash::HashMap;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

pub use flint_proto::Incarnation;

/// The most task slots one executor may register with: slots set its credit.
pub const MAX_SLOTS: u32 = 1024;

/// Removed executors kept for status pages; older ones are forgotten.
const REMOVED_KEPT: usize = 256;

/// What an executor registered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutorInfo {
    pub host: String,
    pub cores: u32,
    pub memory: u64,
    pub slots: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// The id is reserved; the executor is fetching its configuration.
    Pending,
    Registered,
    /// It finishes what it runs and takes nothing new.
    Draining,
}

#[derive(Debug, Clone)]
pub struct Entry {
    pub incarnation: Incarnation,
    pub state: Lifecycle,
    pub info: Option<ExecutorInfo>,
    pub last_heard: Instant,
    pub tasks_done: u64,
    pub tasks_failed: u64,
    /// Started by the driver's backend rather than by hand.
    pub by_backend: bool,
    /// The pod it runs in, as it said.
    pub pod: Option<String>,
}

impl Entry {
    fn count(&mut self, outcome: Option<bool>) {
        match outcome {
            Some(true) => self.tasks_done += 1,
            Some(false) => self.tasks_failed += 1,
            None => {}
        }
    }
}

/// An executor that is gone, with why.
#[derive(Debug, Clone)]
pub struct Removed {
    pub id: ExecutorId,
    pub entry: Entry,
    pub reason: String,
}

#[derive(Debug)]
pub struct Registry {
    live: HashMap<ExecutorId, Entry>,
    removed: VecDeque<Removed>,
    next_incarnation: Incarnation,
    next_number: u64,
    /// A registered executor silent this long is removed (`flint.network.timeout`).
    heartbeat_timeout: Duration,
    /// A reservation not followed by a registration this soon is dropped.
    bootstrap_timeout: Duration,
    /// No entry can expire before this; a lower bound kept cheaply (see `poll_timeout`).
    next_check: Option<Instant>,
}

impl Registry {
    pub fn new(heartbeat_timeout: Duration, bootstrap_timeout: Duration) -> Registry {
        Registry {
            live: HashMap::default(),
            removed: VecDeque::new(),
            next_incarnation: Incarnation(1),
            next_number: 1,
            heartbeat_timeout,
            bootstrap_timeout,
            next_check: None,
        }
    }

    /// Reserves an id for a new executor: the requested one if it is free, else one made
    /// from the pod name, else `exec-N`; and a fresh incarnation.
    pub fn reserve(
        &mut self,
        now: Instant,
        requested: Option<ExecutorId>,
        pod_name: Option<String>,
    ) -> Result<(ExecutorId, Incarnation), Rejection> {
        let id = match requested.filter(|r| !r.is_empty() && *r != "EXECID") {
            Some(id) if self.live.contains_key(&id) => return Err(Rejection::DuplicateId(id)),
            Some(id) => id,
            None => loop {
                let n = self.next_number;
                self.next_number += 1;
                let candidate = match pod_name.as_deref() {
                    Some(pod) if !self.live.contains_key(pod) => pod.to_owned(),
                    Some(pod) => format!("{pod}-{n}"),
                    None => format!("exec-{n}"),
                };
                if !self.live.contains_key(candidate.as_str()) {
                    break ExecutorId::from(candidate);
                }
            },
        };
        let incarnation = self.next_incarnation;
        self.next_incarnation = incarnation.next();
        let entry = Entry {
            incarnation,
            state: Lifecycle::Pending,
            info: None,
            last_heard: now,
            tasks_done: 0,
            tasks_failed: 0,
            by_backend: false,
            pod: pod_name,
        };
        self.live.insert(id.clone(), entry);
        self.wake_by(now + self.bootstrap_timeout);
        Ok((id, incarnation))
    }

    /// The entry of `id` if `incarnation` is its current life.
    pub fn current(&self, id: &ExecutorId, incarnation: Incarnation) -> Option<&Entry> {
        self.live.get(id).filter(|e| e.incarnation == incarnation)
    }

    /// The current incarnation of `id`, if it is live.
    pub fn incarnation_of(&self, id: &ExecutorId) -> Option<Incarnation> {
        self.live.get(id).map(|e| e.incarnation)
    }

    fn current_mut(&mut self, id: &ExecutorId, incarnation: Incarnation) -> Option<&mut Entry> {
        self.live.get_mut(id).filter(|e| e.incarnation == incarnation)
    }

    /// A pending executor registers; false if it is not pending under that incarnation
    /// or claims no slots or more than [`MAX_SLOTS`].
    pub fn register(
        &mut self,
        now: Instant,
        id: &ExecutorId,
        incarnation: Incarnation,
        info: ExecutorInfo,
    ) -> bool {
        if info.slots == 0 || info.slots > MAX_SLOTS {
            return false;
        }
        let Some(entry) = self.current_mut(id, incarnation) else { return false };
        if entry.state != Lifecycle::Pending {
            return false;
        }
        entry.state = Lifecycle::Registered;
        entry.info = Some(info);
        entry.last_heard = now;
        let by = now + self.heartbeat_timeout;
        self.wake_by(by);
        true
    }

    /// The executor is alive; false for an old incarnation.
    pub fn heard(&mut self, now: Instant, id: &ExecutorId, incarnation: Incarnation) -> bool {
        match self.current_mut(id, incarnation) {
            Some(entry) => {
                entry.last_heard = now;
                true
            }
            None => false,
        }
    }

    /// The executor drains; false unless it was registered under that incarnation.
    pub fn drain(&mut self, id: &ExecutorId, incarnation: Incarnation) -> bool {
        match self.current_mut(id, incarnation) {
            Some(entry) if entry.state == Lifecycle::Registered => {
                entry.state = Lifecycle::Draining;
                true
            }
            _ => false,
        }
    }

    /// Marks the executor as started by the driver's backend.
    pub fn mark_by_backend(&mut self, id: &ExecutorId, incarnation: Incarnation) {
        if let Some(entry) = self.current_mut(id, incarnation) {
            entry.by_backend = true;
        }
    }

    /// Counts a report against the executor.
    pub fn count(&mut self, id: &ExecutorId, incarnation: Incarnation, succeeded: bool) {
        if let Some(entry) = self.current_mut(id, incarnation) {
            entry.count(Some(succeeded));
        }
    }

    /// A report from the executor: it is alive, and the report counts as a success or
    /// a failure (`None`: neither). One lookup, as every task report comes this way;
    /// false for an old incarnation.
    pub fn reported(
        &mut self,
        now: Instant,
        id: &ExecutorId,
        incarnation: Incarnation,
        outcome: Option<bool>,
    ) -> bool {
        match self.current_mut(id, incarnation) {
            Some(entry) => {
                entry.last_heard = now;
                entry.count(outcome);
                true
            }
            None => false,
        }
    }

    /// Removes the executor's current life; its id is free again. Returns the entry as it
    /// was, or `None` for an old incarnation (nothing changes then).
    pub fn remove(&mut self, id: &ExecutorId, incarnation: Incarnation, reason: String) -> Option<Entry> {
        self.current(id, incarnation)?;
        let entry = self.live.remove(id)?;
        if entry.state == Lifecycle::Pending {
            return Some(entry); // never registered: nothing to show
        }
        if self.removed.len() == REMOVED_KEPT {
            self.removed.pop_front();
        }
        self.removed.push_back(Removed { id: id.to_owned(), entry: entry.clone(), reason });
        Some(entry)
    }

    /// Entries whose time ran out: registered ones silent past the heartbeat timeout,
    /// pending ones that never registered. The caller removes them.
    pub fn expired(&mut self, now: Instant) -> Vec<(ExecutorId, Incarnation, String)> {
        if self.next_check.is_none_or(|t| now < t) {
            return Vec::new();
        }
        let mut gone = Vec::new();
        let mut next: Option<Instant> = None;
        for (id, entry) in &self.live {
            let (limit, reason) = match entry.state {
                Lifecycle::Pending => (self.bootstrap_timeout, "never registered"),
                _ => (self.heartbeat_timeout, "heartbeat missing"),
            };
            let due = entry.last_heard + limit;
            if now >= due {
                let reason = format!("{reason}: nothing heard for {} ms", limit.as_millis());
                let reason = if entry.state == Lifecycle::Pending {
                    reason
                } else {
                    format!("{reason} (flint.network.timeout)")
                };
                gone.push((id.clone(), entry.incarnation, reason));
            } else {
                next = Some(next.map_or(due, |n| n.min(due)));
            }
        }
        self.next_check = next;
        gone.sort();
        gone
    }

    /// The earliest time an entry may expire. Heartbeats only push expiry later, so the
    /// bound is recomputed in `expired` rather than on every heartbeat.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_check
    }

    fn wake_by(&mut self, at: Instant) {
        self.next_check = Some(self.next_check.map_or(at, |t| t.min(at)));
    }

    /// The executor's live entry, of whatever incarnation.
    pub fn get(&self, id: &ExecutorId) -> Option<(&ExecutorId, &Entry)> {
        self.live.get_key_value(id)
    }

    /// Live executors (pending ones included), in no particular order.
    pub fn live(&self) -> impl Iterator<Item = (&ExecutorId, &Entry)> {
        self.live.iter()
    }

    /// The most recently removed executors, oldest first.
    pub fn removed(&self) -> impl Iterator<Item = &Removed> {
        self.removed.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> ExecutorInfo {
        ExecutorInfo { host: "h".into(), cores: 2, memory: 1 << 30, slots: 2 }
    }

    #[test]
    fn ids_come_back_but_incarnations_never_do() {
        let now = Instant::now();
        let mut r = Registry::new(Duration::from_secs(10), Duration::from_secs(5));
        let (id, first) = r.reserve(now, Some("a".into()), None).unwrap();
        assert_eq!(r.reserve(now, Some("a".into()), None), Err(Rejection::DuplicateId("a".into())));
        assert!(r.register(now, &id, first, info()));
        assert!(r.remove(&id, first, "gone".into()).is_some());
        let (again, second) = r.reserve(now, Some("a".into()), None).unwrap();
        assert_eq!(again, "a");
        assert_ne!(first, second);
        // The old life's late messages change nothing.
        assert!(!r.heard(now, &"a".into(), first));
        assert!(r.remove(&"a".into(), first, "old connection closed".into()).is_none());
        assert!(r.current(&"a".into(), second).is_some());
    }

    #[test]
    fn generated_ids_follow_the_pod_name() {
        let now = Instant::now();
        let mut r = Registry::new(Duration::from_secs(10), Duration::from_secs(5));
        assert_eq!(r.reserve(now, None, Some("pod".into())).unwrap().0, "pod");
        assert_eq!(r.reserve(now, Some("EXECID".into()), Some("pod".into())).unwrap().0, "pod-2");
        assert_eq!(r.reserve(now, Some(String::new().into()), None).unwrap().0, "exec-3");
    }

    #[test]
    fn silent_and_unregistered_executors_expire_on_time() {
        let t0 = Instant::now();
        let mut r = Registry::new(Duration::from_secs(10), Duration::from_secs(5));
        let (a, ia) = r.reserve(t0, Some("a".into()), None).unwrap();
        r.register(t0, &a, ia, info());
        let (b, ib) = r.reserve(t0, Some("b".into()), None).unwrap();
        let greedy = ExecutorInfo { slots: u32::MAX, ..info() };
        assert!(!r.register(t0, &b, ib, greedy), "no executor has four billion slots");
        assert_eq!(r.poll_timeout(), Some(t0 + Duration::from_secs(5)));
        assert!(r.expired(t0 + Duration::from_secs(4)).is_empty());
        let gone = r.expired(t0 + Duration::from_secs(5));
        assert_eq!(gone.len(), 1);
        assert!(gone[0].0 == "b" && gone[0].2.contains("never registered"), "{gone:?}");
        r.remove(&"b".into(), gone[0].1, gone[0].2.clone());
        // a heartbeats at 8 s: it is not due at 10 s but at 18 s.
        r.heard(t0 + Duration::from_secs(8), &a, ia);
        assert_eq!(r.poll_timeout(), Some(t0 + Duration::from_secs(10)));
        assert!(r.expired(t0 + Duration::from_secs(10)).is_empty());
        assert_eq!(r.poll_timeout(), Some(t0 + Duration::from_secs(18)));
        let gone = r.expired(t0 + Duration::from_secs(18));
        assert!(gone[0].2.contains("flint.network.timeout"), "{gone:?}");
    }
}
