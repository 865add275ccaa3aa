//! Dynamic allocation: how many executors the application asks its backend for, and
//! which idle ones it gives back. A state machine without IO, stepped with the current
//! time (Spark's `ExecutorAllocationManager`), plus what Spark's users miss: a cooldown
//! between growing and shrinking, a cap on executors asked for and not yet registered,
//! and start failures that back off and, past a cap, make the application stop asking.

use flint_proto::{Backend, DynamicAllocation, ExecutorId, Settings};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How often the policy looks at the load when nothing else wakes it.
pub const TICK: Duration = Duration::from_millis(250);

/// The longest wait between start attempts after failures.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// How the fleet follows the load: `flint.dynamicAllocation.*` as the settings read
/// them, beside the slots one executor brings.
#[derive(Debug, Clone, PartialEq)]
pub struct AllocationConfig {
    pub policy: DynamicAllocation,
    /// Task slots of one executor.
    pub slots_per_executor: u32,
}

impl AllocationConfig {
    /// What an application's settings ask of a backend that starts executors: dynamic
    /// allocation, or without it `flint.executor.instances` kept. None for the static
    /// backend (executors are started by hand).
    pub fn from_settings(settings: &Settings) -> Option<AllocationConfig> {
        if settings.executor_backend == Backend::Static {
            return None;
        }
        let mut policy = settings.dynamic_allocation.clone();
        if !policy.enabled {
            let n = settings.executor_instances;
            (policy.min_executors, policy.max_executors, policy.initial_executors) = (n, n, Some(n));
        }
        Some(AllocationConfig { policy, slots_per_executor: settings.slots() })
    }
}

/// What the policy decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Start this many executors.
    Request(u32),
    /// Decommission this idle executor.
    Release(ExecutorId),
    /// Executors cannot be started: stop asking, and fail what waits for them.
    GiveUp(String),
}

/// The load and fleet the policy looks at, from the control core.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// Tasks waiting for a slot.
    pub pending_tasks: u32,
    /// Tasks placed on executors.
    pub running_tasks: u32,
    /// Registered executors that take tasks, and whether each runs anything.
    pub executors: Vec<(ExecutorId, bool)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Grow,
    Shrink,
}

#[derive(Debug)]
pub struct Allocator {
    config: AllocationConfig,
    /// Executors asked for and not yet registered (or failed).
    starting: u32,
    /// Executors told to go and still registered.
    releasing: BTreeMap<ExecutorId, ()>,
    /// Since when each idle executor has been idle.
    idle_since: BTreeMap<ExecutorId, Instant>,
    backlog_since: Option<Instant>,
    /// The next request while the backlog lasts: 1, 2, 4, 8…
    next_batch: u32,
    next_grow_at: Option<Instant>,
    last_change: Option<(Direction, Instant)>,
    failures: u32,
    retry_at: Option<Instant>,
    last_failure: Option<String>,
    given_up: Option<String>,
    initial_sent: bool,
    /// For a recurring job: executors kept whatever the load between runs, sized from
    /// each run's processing time against its period.
    floor: u32,
}

/// A run of a recurring job above this share of its period grows the fleet to what
/// the run needed at once.
pub const RECURRING_GROW: f64 = 0.8;
/// A run below this share of its period gives back a quarter of the fleet it kept
/// (at least one executor), so a quiet stream is shrunk over several periods.
pub const RECURRING_SHRINK: f64 = 0.5;

impl Allocator {
    pub fn new(config: AllocationConfig) -> Allocator {
        Allocator {
            config,
            starting: 0,
            releasing: BTreeMap::new(),
            idle_since: BTreeMap::new(),
            backlog_since: None,
            next_batch: 1,
            next_grow_at: None,
            last_change: None,
            failures: 0,
            retry_at: None,
            last_failure: None,
            given_up: None,
            initial_sent: false,
            floor: 0,
        }
    }

    /// Tasks started waiting now: the backlog timeout runs from here, not from the next
    /// look at the load.
    pub fn note_backlog(&mut self, now: Instant) {
        if self.given_up.is_none() {
            self.backlog_since.get_or_insert(now);
        }
    }

    /// The next time a step would decide something new about growing: the backlog's
    /// next request, or the end of a start back-off.
    pub fn next_wake(&self) -> Option<Instant> {
        if self.given_up.is_some() {
            return None;
        }
        let grow = self
            .backlog_since
            .map(|since| self.next_grow_at.unwrap_or(since + self.config.policy.backlog_timeout));
        [grow, self.retry_at].into_iter().flatten().min()
    }

    /// Executors kept for a recurring job, whatever the load between its runs.
    pub fn floor(&self) -> u32 {
        self.floor
    }

    /// A run of a recurring job ended: `took` of its `period`, with `tasks` tasks.
    pub fn run_finished(&mut self, period: Duration, took: Duration, tasks: u32) {
        let share = took.as_secs_f64() / period.as_secs_f64().max(1e-3);
        let at_once = tasks.div_ceil(self.config.slots_per_executor.max(1));
        if share > RECURRING_GROW {
            self.floor = self.floor.max(at_once.min(self.config.policy.max_executors));
        } else if share < RECURRING_SHRINK {
            self.floor = self.floor.saturating_sub((self.floor / 4).max(1));
        }
    }

    /// Executors asked for and not yet registered.
    pub fn starting(&self) -> u32 {
        self.starting
    }

    /// Why the application stopped asking for executors, once it has.
    pub fn given_up(&self) -> Option<&str> {
        self.given_up.as_deref()
    }

    /// An executor the policy asked for registered: the start failures in a row end.
    pub fn registered(&mut self) {
        self.starting = self.starting.saturating_sub(1);
        self.failures = 0;
        self.retry_at = None;
    }

    /// An executor left the fleet.
    pub fn removed(&mut self, id: &ExecutorId) {
        self.releasing.remove(id);
        self.idle_since.remove(id);
    }

    /// An executor the policy asked for never registered; `reason` is the backend's.
    pub fn start_failed(&mut self, now: Instant, reason: String) -> Option<Decision> {
        self.starting = self.starting.saturating_sub(1);
        self.failures += 1;
        let reason = format!("executor start failed {} time(s) in a row; last: {reason}", self.failures);
        self.last_failure = Some(reason.clone());
        if self.failures >= self.config.policy.max_start_failures.max(1) && self.given_up.is_none() {
            let reason = format!("{reason} (flint.dynamicAllocation.maxStartFailures)");
            self.given_up = Some(reason.clone());
            return Some(Decision::GiveUp(reason));
        }
        let backoff = self
            .config
            .policy
            .start_backoff
            .saturating_mul(1 << (self.failures - 1).min(16))
            .min(MAX_BACKOFF);
        self.retry_at = Some(now + backoff);
        None
    }

    /// How many executors the load asks for, within the minimum and maximum.
    pub fn target(&self, view: &View) -> u32 {
        let tasks = f64::from(view.pending_tasks + view.running_tasks) * self.config.policy.ratio;
        let wanted = (tasks / f64::from(self.config.slots_per_executor.max(1))).ceil() as u32;
        wanted.max(self.floor).clamp(
            self.config.policy.min_executors,
            self.config.policy.max_executors.max(self.config.policy.min_executors),
        )
    }

    /// Looks at the load and decides.
    pub fn step(&mut self, now: Instant, view: &View) -> Vec<Decision> {
        let mut decisions = Vec::new();
        if self.given_up.is_some() {
            return decisions;
        }
        // Idle bookkeeping: busy executors are not idle; new idle ones start now.
        let live: BTreeMap<&str, bool> =
            view.executors.iter().map(|(id, busy)| (id.as_str(), *busy)).collect();
        self.idle_since.retain(|id, _| live.get(id.as_str()) == Some(&false));
        self.releasing.retain(|id, _| live.contains_key(id.as_str()));
        for (id, busy) in &view.executors {
            if !busy {
                self.idle_since.entry(id.clone()).or_insert(now);
            }
        }
        let fleet = view.executors.len() as u32 - self.releasing.len() as u32;
        let target = self.target(view);

        if !self.initial_sent {
            self.initial_sent = true;
            let initial = self
                .config
                .policy
                .initial()
                .max(self.config.policy.min_executors)
                .min(self.config.policy.max_executors);
            let ask = initial.saturating_sub(fleet + self.starting).min(self.room());
            if ask > 0 {
                self.grow(now, ask, &mut decisions);
            }
        }

        // Growing: after the backlog lasted the timeout, 1, 2, 4… while it lasts.
        if view.pending_tasks == 0 {
            self.backlog_since = None;
            self.next_batch = 1;
            self.next_grow_at = None;
        } else {
            let since = *self.backlog_since.get_or_insert(now);
            let due = self.next_grow_at.unwrap_or(since + self.config.policy.backlog_timeout);
            let missing = target.saturating_sub(fleet + self.starting);
            // From no executor at all, waiting out the cooldown would only starve the
            // job: there is no flip-flop to damp.
            let from_nothing = fleet + self.starting == 0;
            if now >= due
                && missing > 0
                && (from_nothing || self.may(Direction::Grow, now))
                && self.retry_at.is_none_or(|t| now >= t)
            {
                let ask = self.next_batch.min(missing).min(self.room());
                if ask > 0 {
                    self.grow(now, ask, &mut decisions);
                    self.next_batch = self.next_batch.saturating_mul(2);
                    self.next_grow_at = Some(now + self.config.policy.sustained());
                }
            }
        }
        // Below the minimum (executors lost, say) or a recurring job's floor: back up to
        // it at once.
        let floor = self.config.policy.min_executors.max(self.floor.min(self.config.policy.max_executors));
        let floor = floor.saturating_sub(fleet + self.starting).min(self.room());
        if floor > 0 && self.retry_at.is_none_or(|t| now >= t) {
            self.grow(now, floor, &mut decisions);
        }

        // Shrinking: executors idle past the timeout, never below the target or the
        // minimum, oldest idle first.
        let keep = target.max(self.config.policy.min_executors);
        let mut idle: Vec<(Instant, ExecutorId)> = self
            .idle_since
            .iter()
            .filter(|(id, since)| {
                now >= **since + self.config.policy.idle_timeout && !self.releasing.contains_key(*id)
            })
            .map(|(id, since)| (*since, id.clone()))
            .collect();
        idle.sort();
        let mut fleet = fleet;
        for (_, id) in idle {
            if fleet <= keep || !self.may(Direction::Shrink, now) {
                break;
            }
            fleet -= 1;
            self.releasing.insert(id.clone(), ());
            self.last_change = Some((Direction::Shrink, now));
            decisions.push(Decision::Release(id));
        }
        decisions
    }

    /// Executors that may still be asked for under `max_pending`.
    fn room(&self) -> u32 {
        self.config.policy.max_pending.max(1).saturating_sub(self.starting)
    }

    fn grow(&mut self, now: Instant, count: u32, decisions: &mut Vec<Decision>) {
        self.starting += count;
        self.last_change = Some((Direction::Grow, now));
        decisions.push(Decision::Request(count));
    }

    /// Whether a change in `direction` is allowed now: the opposite of the last change
    /// waits out the cooldown.
    fn may(&self, direction: Direction, now: Instant) -> bool {
        match self.last_change {
            Some((last, at)) if last != direction => now >= at + self.config.policy.cooldown,
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests;
