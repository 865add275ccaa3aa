//! What bounds a store: the memory cap of one instance and the switch that kills a call,
//! with the counters the runtime keeps of them. The leaf the other modules build on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use wasmtime::{ResourceLimiter, Result};

/// Stops a running call within one epoch tick.
#[derive(Debug, Clone, Default)]
pub struct KillSwitch(Arc<AtomicBool>);

impl KillSwitch {
    pub fn kill(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_killed(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Marks the error a kill raises inside the guest.
#[derive(Debug)]
pub(crate) struct Killed;

impl std::fmt::Display for Killed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("killed on request")
    }
}

impl std::error::Error for Killed {}

/// Counters a runtime keeps for metrics.
#[derive(Debug, Default)]
pub struct RuntimeStats {
    /// The most linear memory any one instance was allowed to grow to.
    pub instance_memory_high_water: AtomicU64,
    /// Tasks that found their component loaded, and that did not (the executor counts).
    pub cache_hits: AtomicU64,
    pub cache_misses: AtomicU64,
    /// Instances made to run tasks in: against the tasks run, how often a task found
    /// one of its job's to reuse.
    pub instances_started: AtomicU64,
}

/// The memory cap of one instance. It remembers a refused growth, so that the trap a
/// guest raises when its allocator gives up is reported as a memory limit.
pub(crate) struct MemoryCap {
    pub(crate) limit: u64,
    pub(crate) refused: bool,
    /// The largest memory this instance was allowed to grow to.
    pub(crate) grown: u64,
    /// The runtime's high-water mark of instance memory, raised by each growth allowed.
    pub(crate) high_water: Arc<RuntimeStats>,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> Result<bool> {
        let ok = desired as u64 <= self.limit;
        self.refused |= !ok;
        if ok {
            self.grown = self.grown.max(desired as u64);
            self.high_water.instance_memory_high_water.fetch_max(desired as u64, Ordering::Relaxed);
        }
        Ok(ok)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> Result<bool> {
        // Tables hold function references; a million entries is far past any real job.
        Ok(desired <= 1 << 20)
    }
}
