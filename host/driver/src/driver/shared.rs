//! What the driver's handle and its event loop share: configuration, the runtime for
//! merges, the components running jobs ship, tokens, the data service, metrics and the
//! status store.

use flint_data::ObjectReader;
use flint_proto::{Conf, Digest, FLINT_SERVICE, Settings, Token};
use flint_runtime::Runtime;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::{Arc, Mutex};

use crate::backend::ExecutorBackend;
use crate::data::DataService;
use crate::journal::Store;

pub(super) struct Shared {
    /// Programs running now: how to stop each, and its action's job when one runs.
    pub(super) programs: Mutex<HashMap<flint_proto::JobId, Control>>,
    pub(super) app_id: String,
    pub(super) conf: Conf,
    pub(super) settings: Settings,
    pub(super) runtime: Arc<Runtime>,
    /// Component bytes for executors to fetch, with the number of running jobs using
    /// each; removed when the last one ends.
    pub(super) components: Mutex<HashMap<Digest, Shipped>>,
    /// A copy of the core's slot count, published after each event, for planning.
    pub(super) slots: AtomicU32,
    /// Who starts executors, when the driver does (`flint.executor.backend`).
    pub(super) backend: std::sync::OnceLock<Arc<dyn ExecutorBackend>>,
    /// The application's delegation tokens now: handed to executors at bootstrap, and
    /// pushed to every live one when they change.
    pub(super) tokens: Mutex<Vec<flint_proto::Token>>,
    /// The tokens the control core renews from providers; for a service in both, these
    /// win over `tokens`.
    pub(super) renewed: Mutex<Vec<flint_proto::Token>>,
    /// `flint://` inputs and their tokens.
    pub(super) data: DataService,
    /// Sizes and listings of `s3://` and `https://` inputs, for planning.
    pub(super) objects: ObjectReader,
    /// How long accepted attempts ran (`/metrics`).
    pub(super) durations: crate::metrics::Durations,
    pub(super) speculations: crate::metrics::Speculations,
    /// Executors' heartbeats and the connections' traffic (`/metrics`).
    pub(super) peer_metrics: crate::metrics::PeerMetrics,
    /// Events the event log had no room for, when there is one.
    pub(super) events_dropped: Option<Arc<AtomicU64>>,
    /// Bytes of files sent with jobs that the driver holds now.
    pub(super) uploads_held: Arc<AtomicU64>,
    /// The records the status page shows, built from the loop's events at the end of
    /// each of its turns.
    pub(super) store: Mutex<Store>,
}

/// A component's bytes and the number of running jobs that use it.
pub(super) type Shipped = (Arc<Vec<u8>>, usize);

/// The most executors a job with none registered yet is planned for.
const PLANNED_EXECUTORS: u32 = 64;

/// The slots a job is planned for while no executor is registered: the most executors
/// its backend keeps (`flint.executor.instances`, or dynamic allocation's maximum; at
/// most [`PLANNED_EXECUTORS`]) times an executor's slots, within `flint.cores.max`;
/// one for executors started by hand.
fn planned_slots(settings: &flint_proto::Settings) -> u32 {
    flint_core::AllocationConfig::from_settings(settings)
        .map(|c| {
            let executors = c.policy.max_executors.max(c.policy.min_executors).min(PLANNED_EXECUTORS);
            let slots = executors.saturating_mul(c.slots_per_executor);
            // A standalone application never holds more than flint.cores.max.
            match settings.cores_max {
                Some(cores) => slots.min(cores / settings.task_cpus.max(1)),
                None => slots,
            }
        })
        .unwrap_or(1)
        .max(1)
}

impl Shared {
    /// The slots a job is planned for (its splits, its reduce partitions): those
    /// registered now; with none yet, the fleet a backend will start for it (its fixed
    /// fixed count, or dynamic allocation's maximum, up to 64 executors and within
    /// `flint.cores.max`), so that the fleet that grows has tasks to run; else one.
    pub(super) fn planning_slots(&self) -> u32 {
        match self.slots.load(std::sync::atomic::Ordering::Relaxed) {
            0 => planned_slots(&self.settings),
            n => n,
        }
    }

    /// The application's delegation tokens now: the renewed ones, then the given ones
    /// of services nobody renews. The one expiry rule of every token that leaves the
    /// driver (bootstrap, pushes, planning): an expired one is never handed out,
    /// whichever source it came from.
    pub(super) fn tokens(&self) -> Vec<Token> {
        let now = crate::credentials::now_ms();
        let mut tokens = self.all_tokens();
        tokens.retain(|t| t.expires_at_ms > now);
        tokens
    }

    fn all_tokens(&self) -> Vec<Token> {
        let renewed = self.renewed.lock().expect("tokens lock").clone();
        let given = self.tokens.lock().expect("tokens lock").clone();
        let mut tokens: Vec<_> =
            given.into_iter().filter(|t| !renewed.iter().any(|r| r.service == t.service)).collect();
        // The `flint` service's token only says until when the jobs' own tokens hold.
        for token in renewed {
            if token.service == FLINT_SERVICE {
                tokens.extend(self.data.job_tokens(token.expires_at_ms));
            } else {
                tokens.push(token);
            }
        }
        tokens
    }

    /// A running job's component bytes, by digest.
    pub(super) fn component(&self, digest: &Digest) -> Option<Arc<Vec<u8>>> {
        self.components.lock().expect("components lock").get(digest).map(|(b, _)| b.clone())
    }

    /// Notes one more running job shipping `bytes`.
    pub(super) fn hold_component(&self, digest: Digest, bytes: Arc<Vec<u8>>) {
        self.components.lock().expect("components lock").entry(digest).or_insert_with(|| (bytes, 0)).1 += 1;
    }

    /// A job shipping the component ended: the last one's end drops the bytes.
    pub(super) fn release_component(&self, digest: &Digest) {
        let mut components = self.components.lock().expect("components lock");
        if let Some((_, users)) = components.get_mut(digest) {
            *users -= 1;
            if *users == 0 {
                components.remove(digest);
            }
        }
    }
}

/// How to stop a running program.
pub(super) struct Control {
    pub(super) kill: flint_runtime::KillSwitch,
    /// The job of the action it waits for, if it waits for one.
    pub(super) action: Option<flint_proto::JobId>,
}

#[cfg(test)]
mod tests {
    use super::planned_slots;

    fn settings(pairs: &[(&str, &str)]) -> flint_proto::Settings {
        let conf = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        flint_proto::Settings::from_conf(&conf).unwrap()
    }

    #[test]
    fn a_job_before_any_executor_is_planned_for_the_fleet_it_may_get() {
        let dynamic = [
            ("flint.executor.backend", "local"),
            ("flint.dynamicAllocation.enabled", "true"),
            ("flint.executor.cores", "4"),
        ];
        assert_eq!(planned_slots(&settings(&dynamic)), 64 * 4, "64 executors at most");
        let bounded = [&dynamic[..], &[("flint.cores.max", "16")]].concat();
        assert_eq!(planned_slots(&settings(&bounded)), 16, "within flint.cores.max");
        let few = [&dynamic[..], &[("flint.cores.max", "2")]].concat();
        assert_eq!(planned_slots(&settings(&few)), 2);
        let fixed = [("flint.executor.backend", "local"), ("flint.executor.instances", "3")];
        assert_eq!(planned_slots(&settings(&fixed)), 3 * 2, "three executors of two cores");
        assert_eq!(planned_slots(&settings(&[])), 1, "a fleet started by hand: one");
    }
}
