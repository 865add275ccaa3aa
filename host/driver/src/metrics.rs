//! What `/metrics` says: the cluster's status as Prometheus text, and the figures the
//! driver keeps in atomics beside it (how long attempts ran, what executors say in
//! heartbeats, the connections' traffic). Written by the event loop and the
//! connections' tasks, read by the UI; depends on neither.

use flint_proto::{ClusterStatus, ExecutorId, ExecutorState, JobState};
use std::collections::HashMap;
use std::fmt::Write as _;

/// Upper bounds (seconds) of the task duration histogram's buckets.
const DURATION_BUCKETS: [f64; 11] = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0, 300.0];

/// How long task attempts ran, as the driver accepted their reports: a Prometheus
/// histogram kept in atomics, written by the event loop, read by `/metrics`.
#[derive(Default)]
pub struct Durations {
    /// Attempts at or under each bound (not cumulative; summed when rendered).
    buckets: [std::sync::atomic::AtomicU64; DURATION_BUCKETS.len()],
    count: std::sync::atomic::AtomicU64,
    sum_micros: std::sync::atomic::AtomicU64,
}

impl Durations {
    pub fn record(&self, elapsed: std::time::Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        let seconds = elapsed.as_secs_f64();
        if let Some(i) = DURATION_BUCKETS.iter().position(|bound| seconds <= *bound) {
            self.buckets[i].fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        self.sum_micros.fetch_add(elapsed.as_micros() as u64, Relaxed);
    }

    pub fn render(&self, out: &mut String) {
        use std::sync::atomic::Ordering::Relaxed;
        let name = "flint_task_duration_seconds";
        let _ = writeln!(out, "# HELP {name} How long task attempts ran.\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (bound, bucket) in DURATION_BUCKETS.iter().zip(&self.buckets) {
            cumulative += bucket.load(Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        let count = self.count.load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(out, "{name}_sum {}", self.sum_micros.load(Relaxed) as f64 / 1e6);
        let _ = writeln!(out, "{name}_count {count}");
    }
}

/// Speculative copies: started, and those that finished before their originals.
#[derive(Default)]
pub struct Speculations {
    pub started: std::sync::atomic::AtomicU64,
    pub won: std::sync::atomic::AtomicU64,
}

impl Speculations {
    pub fn render(&self, out: &mut String) {
        use std::sync::atomic::Ordering::Relaxed;
        let name = "flint_speculative_attempts_total";
        let _ = writeln!(
            out,
            "# HELP {name} Copies of straggling attempts started, and how many finished first.\n# TYPE {name} counter"
        );
        let _ = writeln!(out, "{name}{{outcome=\"started\"}} {}", self.started.load(Relaxed));
        let _ = writeln!(out, "{name}{{outcome=\"won\"}} {}", self.won.load(Relaxed));
    }
}

/// Who is at the other end of a connection, for traffic counts.
#[derive(Clone, Copy)]
pub enum Peer {
    Executor,
    Client,
}

/// The ways a job's bytes move through the driver, timed one transfer at a time.
#[derive(Clone, Copy)]
pub enum Transfer {
    /// A task's result block, fetched from the executor that holds it.
    BlockFetch,
    /// A byte range of a `flint://` input, sent to an executor.
    InputServed,
    /// A file sent with a job by `flint submit`, kept by the driver.
    Upload,
}

impl Transfer {
    const ALL: [(Transfer, &'static str); 3] = [
        (Transfer::BlockFetch, "block_fetch"),
        (Transfer::InputServed, "input_served"),
        (Transfer::Upload, "upload"),
    ];
}

/// What executors say of themselves in heartbeats, the bytes the driver's connections
/// carried, and the job data it moved: written by the connections' tasks, read by
/// `/metrics`.
#[derive(Default)]
pub struct PeerMetrics {
    /// The last heartbeat of each connected executor (one entry per connection).
    beats: std::sync::Mutex<HashMap<flint_proto::ExecutorId, flint_proto::wire::Heartbeat>>,
    /// Bytes in and out: executors', clients'.
    traffic: [[std::sync::atomic::AtomicU64; 2]; 2],
    /// Bytes and microseconds of each kind of transfer, summed over transfers.
    transfers: [[std::sync::atomic::AtomicU64; 2]; Transfer::ALL.len()],
}

impl PeerMetrics {
    pub fn beat(&self, id: &ExecutorId, beat: flint_proto::wire::Heartbeat) {
        self.beats.lock().expect("metrics lock").insert(id.to_owned(), beat);
    }

    pub fn gone(&self, id: &ExecutorId) {
        self.beats.lock().expect("metrics lock").remove(id);
    }

    /// One transfer of `bytes` that took `elapsed`, start to last byte.
    pub fn transferred(&self, kind: Transfer, bytes: u64, elapsed: std::time::Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        let counters = &self.transfers[kind as usize];
        counters[0].fetch_add(bytes, Relaxed);
        counters[1].fetch_add(elapsed.as_micros() as u64, Relaxed);
    }

    /// Adds what `connection` carried since `counted` (its bytes in and out when last
    /// counted) and returns its counts now.
    pub fn count_traffic(
        &self,
        peer: Peer,
        connection: &quinn::Connection,
        counted: (u64, u64),
    ) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        let stats = connection.stats();
        let now = (stats.udp_rx.bytes, stats.udp_tx.bytes);
        let counters = &self.traffic[peer as usize];
        counters[0].fetch_add(now.0.saturating_sub(counted.0), Relaxed);
        counters[1].fetch_add(now.1.saturating_sub(counted.1), Relaxed);
        now
    }

    pub fn render(&self, status: &ClusterStatus, out: &mut String) {
        use std::sync::atomic::Ordering::Relaxed;
        let name = "flint_network_bytes_total";
        let _ = writeln!(out, "# HELP {name} Bytes the driver's connections carried, by peer and direction.");
        let _ = writeln!(out, "# TYPE {name} counter");
        for (peer, counters) in ["executor", "client"].iter().zip(&self.traffic) {
            for (direction, counter) in ["in", "out"].iter().zip(counters) {
                let value = counter.load(Relaxed);
                let _ = writeln!(out, "{name}{{peer=\"{peer}\",direction=\"{direction}\"}} {value}");
            }
        }
        let families = [
            ("flint_transfer_bytes_total", "Bytes of job data the driver moved, by path."),
            (
                "flint_transfer_seconds_total",
                "Time the driver's transfers of job data took, summed one transfer at a time (bytes over seconds is the rate of one transfer, not of the link).",
            ),
        ];
        for (field, (name, help)) in families.iter().enumerate() {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for ((_, path), counters) in Transfer::ALL.iter().zip(&self.transfers) {
                let value = counters[field].load(Relaxed);
                let value = if field == 0 { value as f64 } else { value as f64 / 1e6 };
                let _ = writeln!(out, "{name}{{path=\"{path}\"}} {value}");
            }
        }
        let beats = self.beats.lock().expect("metrics lock");
        let live: Vec<_> = status
            .executors
            .iter()
            .filter(|e| e.removed.is_none())
            .filter_map(|e| beats.get(&e.id).map(|b| (escape(&e.id), b)))
            .collect();
        type Field = fn(&flint_proto::wire::Heartbeat) -> u64;
        let families: [(&str, &str, &str, Field); 5] = [
            ("flint_executor_rss_bytes", "gauge", "Resident memory of each live executor.", |b| b.rss_bytes),
            (
                "flint_executor_instance_memory_high_water_bytes",
                "gauge",
                "The most memory one instance of each live executor has held.",
                |b| b.instance_memory_high_water,
            ),
            (
                "flint_executor_component_cache_hits_total",
                "counter",
                "Tasks of each live executor that found their component loaded.",
                |b| b.component_cache_hits,
            ),
            (
                "flint_executor_component_cache_misses_total",
                "counter",
                "Tasks of each live executor that had to load their component.",
                |b| b.component_cache_misses,
            ),
            (
                "flint_executor_instances_started_total",
                "counter",
                "Instances each live executor made to run tasks in; a task reusing its job's makes none.",
                |b| b.instances_started,
            ),
        ];
        for (name, kind, help, field) in families {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (id, beat) in &live {
                let _ = writeln!(out, "{name}{{executor=\"{id}\"}} {}", field(beat));
            }
        }
    }
}

/// The status as Prometheus text. Names carry no ids; an executor's id is a label of
/// the series of live executors only, so their number is bounded by the fleet.
pub fn render_metrics(status: &ClusterStatus) -> String {
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{labels} {value}");
        }
    };
    let live: Vec<_> = status.executors.iter().filter(|e| e.removed.is_none()).collect();
    let count_state = |state| status.executors.iter().filter(|e| e.state == state).count() as f64;
    let by_state: Vec<_> =
        ExecutorState::ALL.iter().map(|&s| (format!("{{state=\"{s}\"}}"), count_state(s))).collect();
    family("flint_executors", "gauge", "Executors by state.", &by_state);
    family(
        "flint_executors_starting",
        "gauge",
        "Executors asked of the backend and not yet registered.",
        &[(String::new(), f64::from(status.executors_starting))],
    );
    let (done, failed) =
        status.executors.iter().fold((0u64, 0u64), |(d, f), e| (d + e.tasks_done, f + e.tasks_failed));
    family(
        "flint_tasks_total",
        "counter",
        "Task attempts ended, by outcome, on every executor the application had.",
        &[("{outcome=\"succeeded\"}".into(), done as f64), ("{outcome=\"failed\"}".into(), failed as f64)],
    );
    let per = |f: &dyn Fn(&flint_proto::ExecutorStatus) -> f64| -> Vec<(String, f64)> {
        live.iter().map(|e| (format!("{{executor=\"{}\"}}", escape(&e.id)), f(e))).collect()
    };
    family(
        "flint_executor_running_tasks",
        "gauge",
        "Attempts running on each live executor.",
        &per(&|e| f64::from(e.running)),
    );
    family(
        "flint_executor_slots",
        "gauge",
        "Task slots of each live executor.",
        &per(&|e| f64::from(e.slots)),
    );
    family(
        "flint_executor_heartbeat_age_seconds",
        "gauge",
        "Time since each live executor's last heartbeat.",
        &per(&|e| e.last_heartbeat_ms.map_or(f64::NAN, |ms| ms as f64 / 1000.0)),
    );
    let count_jobs = |state| status.jobs.iter().filter(|j| j.state == state).count() as f64;
    let jobs: Vec<_> = JobState::ALL.iter().map(|&s| (format!("{{state=\"{s}\"}}"), count_jobs(s))).collect();
    family("flint_jobs", "gauge", "Jobs the driver lists, by state.", &jobs);
    let running = status.jobs.iter().filter(|j| j.state == JobState::Running);
    let waiting: u32 =
        running.map(|j| j.progress.total.saturating_sub(j.progress.done + j.progress.running)).sum();
    if let Some(target) = status.allocation_target {
        family(
            "flint_allocation_target_executors",
            "gauge",
            "Executors dynamic allocation wants now (compare flint_executors and flint_executors_starting).",
            &[(String::new(), f64::from(target))],
        );
    }
    family(
        "flint_scheduler_waiting_tasks",
        "gauge",
        "Tasks of running jobs neither done nor running.",
        &[(String::new(), f64::from(waiting))],
    );
    out
}

/// A label value as the text format wants it.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}
