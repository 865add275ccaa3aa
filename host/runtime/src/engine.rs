//! The engine an executor runs every task on, and the ticker that drives deadlines.

use crate::component::Loader;
use crate::component::{JobComponent, LoadError};
use crate::host::HostState;
use crate::limits::RuntimeStats;
use flint_proto::Digest;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use wasmtime::component::Linker;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How often the ticker advances the engine's epoch: the granularity of deadlines and
/// kills. Each tick costs running guests one callback.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Bytes of each pooled memory reset in place between instances. With `PAGEMAP_SCAN`
/// (Linux 6.7+) only the pages an instance dirtied are restored, so a no-op task pays
/// for a few pages and a task that used 30 MiB finds them mapped, not faulted in again;
/// an idle slot may keep this much resident.
const KEEP_RESIDENT: usize = 32 << 20;

/// How a runtime is sized.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Instances that may run at once: the executor's task slots, plus room for the
    /// merges a driver runs.
    pub slots: u32,
    /// The memory cap of one instance, in bytes.
    pub instance_memory: u64,
    /// Where compiled components are kept between restarts; `None` keeps them in memory.
    pub cache_dir: Option<PathBuf>,
    /// Guest stdout, stderr and log lines kept per task, in bytes.
    pub max_log_size: usize,
    /// Use the pooling allocator (falling back to on-demand allocation where it cannot
    /// reserve its address space); `false` always allocates on demand.
    pub pooling: bool,
    /// Bytes of compiled code kept in memory; the least recently used components past
    /// it are dropped (running calls keep theirs) and reloaded when needed.
    pub component_cache: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("cannot create the wasm engine: {0}")]
    Engine(String),
    #[error("cannot link the host interfaces: {0}")]
    Link(String),
}

/// One executor's wasm runtime.
pub struct Runtime {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<HostState>,
    pub(crate) config: RuntimeConfig,
    components: Mutex<ComponentCache>,
    pub(crate) stats: Arc<RuntimeStats>,
    pooling: bool,
    ticker: Option<Ticker>,
}

impl Runtime {
    /// Builds the engine. The pooling allocator reserves virtual memory for every slot
    /// up front; where it cannot (a small pod's address-space limit), the runtime falls
    /// back to allocating on demand and says so, rather than failing to start.
    pub fn new(config: RuntimeConfig) -> Result<Runtime, RuntimeError> {
        Runtime::build(config, None)
    }

    /// A runtime whose engine differs from the shipped one by `variant`: for `make
    /// bench`'s figure of what each setting is worth, never for running jobs.
    #[doc(hidden)]
    pub fn for_measurement(config: RuntimeConfig, variant: Variant) -> Result<Runtime, RuntimeError> {
        Runtime::build(config, Some(variant))
    }

    fn build(config: RuntimeConfig, variant: Option<Variant>) -> Result<Runtime, RuntimeError> {
        let engine_config = |config: &RuntimeConfig, pooling| engine_config(config, pooling, variant);
        let pooled = if config.pooling { Some(Engine::new(&engine_config(&config, true))) } else { None };
        let (engine, pooling) = match pooled {
            Some(Ok(engine)) => (engine, true),
            None => (
                Engine::new(&engine_config(&config, false))
                    .map_err(|e| RuntimeError::Engine(format!("{e:#}")))?,
                false,
            ),
            Some(Err(e)) => {
                tracing::warn!(error = %e, "pooling allocator unavailable; allocating instances on demand");
                let engine = Engine::new(&engine_config(&config, false))
                    .map_err(|e| RuntimeError::Engine(format!("{e:#}")))?;
                (engine, false)
            }
        };
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(|e| RuntimeError::Link(format!("{e:#}")))?;
        crate::blocking::add_to_linker(&mut linker).map_err(|e| RuntimeError::Link(format!("{e:#}")))?;
        crate::bindings::flint::task::host::add_to_linker::<_, wasmtime::component::HasSelf<_>>(
            &mut linker,
            |state| state,
        )
        .map_err(|e| RuntimeError::Link(format!("{e:#}")))?;
        crate::bindings::flint::task::types::add_to_linker::<_, wasmtime::component::HasSelf<_>>(
            &mut linker,
            |state| state,
        )
        .map_err(|e| RuntimeError::Link(format!("{e:#}")))?;
        crate::bindings::flint::task::shuffle::add_to_linker::<_, wasmtime::component::HasSelf<_>>(
            &mut linker,
            |state| state,
        )
        .map_err(|e| RuntimeError::Link(format!("{e:#}")))?;
        crate::bindings::flint::task::datasets::add_to_linker::<_, wasmtime::component::HasSelf<_>>(
            &mut linker,
            |state| state,
        )
        .map_err(|e| RuntimeError::Link(format!("{e:#}")))?;
        let ticker = Some(Ticker::start(engine.clone()));
        let components = Mutex::new(ComponentCache::new(config.component_cache));
        Ok(Runtime { engine, linker, config, components, stats: Arc::default(), pooling, ticker })
    }

    /// Calls that may run at once.
    pub fn slots(&self) -> u32 {
        self.config.slots
    }

    /// Whether instances come from the pooling allocator.
    pub fn pooling(&self) -> bool {
        self.pooling
    }

    /// The memory cap of one instance.
    pub fn instance_memory(&self) -> u64 {
        self.config.instance_memory
    }

    /// Memory an idle pooled slot keeps resident anyway: an instance kept alive between
    /// tasks within this size holds no more than an empty slot would.
    pub fn resident_per_slot(&self) -> u64 {
        KEEP_RESIDENT as u64
    }

    fn loader(&self) -> Loader<'_> {
        Loader {
            engine: &self.engine,
            linker: &self.linker,
            cache_dir: self.config.cache_dir.as_deref(),
            instance_memory: self.config.instance_memory,
        }
    }

    /// A component loaded and still in memory, by digest.
    pub fn cached(&self, digest: &Digest) -> Option<Arc<JobComponent>> {
        self.components.lock().expect("component cache lock").get(digest)
    }

    /// What the runtime has seen so far, for metrics.
    pub fn stats(&self) -> &RuntimeStats {
        &self.stats
    }

    /// A component by digest without its bytes: from memory, else from its compiled
    /// artifact in the disk cache (one dropped from memory comes back this way).
    pub fn load_known(&self, digest: &Digest) -> Option<Arc<JobComponent>> {
        if let Some(found) = self.cached(digest) {
            return Some(found);
        }
        let component = Arc::new(JobComponent::from_disk(&self.loader(), *digest)?);
        self.components.lock().expect("component cache lock").insert(component.clone());
        Some(component)
    }

    /// Loads a component: validates it, compiles it (or reads the compiled artifact from
    /// the disk cache) and prepares its instances. Loading the same bytes twice is free.
    pub fn load(&self, bytes: &[u8]) -> Result<Arc<JobComponent>, LoadError> {
        let digest = Digest::of(bytes);
        if let Some(found) = self.cached(&digest) {
            return Ok(found);
        }
        let component = Arc::new(JobComponent::load(&self.loader(), digest, bytes)?);
        self.components.lock().expect("component cache lock").insert(component.clone());
        Ok(component)
    }
}

/// Compiled components by digest, least recently used dropped past a byte budget. The
/// one just inserted always stays, whatever its size.
struct ComponentCache {
    budget: u64,
    used: u64,
    clock: u64,
    entries: HashMap<Digest, (Arc<JobComponent>, u64)>,
}

impl ComponentCache {
    fn new(budget: u64) -> ComponentCache {
        ComponentCache { budget, used: 0, clock: 0, entries: HashMap::new() }
    }

    fn get(&mut self, digest: &Digest) -> Option<Arc<JobComponent>> {
        self.clock += 1;
        let (component, last_used) = self.entries.get_mut(digest)?;
        *last_used = self.clock;
        Some(component.clone())
    }

    fn insert(&mut self, component: Arc<JobComponent>) {
        self.clock += 1;
        if let Some((old, _)) = self.entries.insert(component.digest, (component.clone(), self.clock)) {
            self.used -= old.size;
        }
        self.used += component.size;
        while self.used > self.budget {
            let oldest = self
                .entries
                .iter()
                .filter(|(digest, _)| **digest != component.digest)
                .min_by_key(|(_, (_, last_used))| *last_used)
                .map(|(digest, _)| *digest);
            let Some(digest) = oldest else { break };
            let (gone, _) = self.entries.remove(&digest).expect("found above");
            self.used -= gone.size;
            tracing::debug!(%digest, size = gone.size, "compiled component dropped from memory");
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(ticker) = self.ticker.take() {
            ticker.stop();
        }
    }
}

/// Engine settings `make bench` sets beside the shipped ones, to say what each is
/// worth in compute (`Runtime::for_measurement`).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// No epoch checks on loop back-edges and calls: no deadline or kill can stop a
    /// guest that computes.
    NoEpochChecks,
    /// Cranelift's `speed_and_size` optimisation level instead of `speed`.
    SpeedAndSize,
    /// The target's baseline CPU (x86-64: SSE2): none of the features wasmtime detects
    /// on the host (SSE4, AVX, BMI, LZCNT, …) used.
    BaselineCpu,
}

fn engine_config(config: &RuntimeConfig, pooling: bool, variant: Option<Variant>) -> Config {
    let mut c = Config::new();
    c.wasm_component_model(true);
    c.epoch_interruption(variant != Some(Variant::NoEpochChecks));
    match variant {
        Some(Variant::SpeedAndSize) => {
            c.cranelift_opt_level(wasmtime::OptLevel::SpeedAndSize);
        }
        Some(Variant::BaselineCpu) => {
            // Naming a target turns off the detection of the host's features.
            let abi = if cfg!(target_env = "musl") {
                "-musl"
            } else if cfg!(target_env = "gnu") {
                "-gnu"
            } else {
                ""
            };
            let host = format!("{}-unknown-{}{abi}", std::env::consts::ARCH, std::env::consts::OS);
            if let Err(e) = c.target(&host) {
                tracing::warn!(error = %e, "cannot name the host's target; the host's features stay on");
            }
        }
        _ => {}
    }
    c.memory_init_cow(true);
    if pooling {
        // Every instance may grow to the cap; a component holds a few core instances
        // (the program, libc's shims) and one or two memories.
        let instances = config.slots.max(1) * 2 + 2;
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(instances)
            .total_core_instances(instances * 8)
            .max_core_instances_per_component(16)
            .total_memories(instances * 2)
            .max_memories_per_component(2)
            .total_tables(instances * 8)
            .max_tables_per_component(8)
            .total_stacks(instances)
            .max_memory_size(config.instance_memory as usize)
            // Reset the first pages of each memory and table by writing over them rather
            // than unmapping them: small tasks then cost no page faults and no TLB
            // shootdowns across the executor's threads (measured: the largest cost of a
            // no-op task without it). Where the kernel can say which pages were written,
            // only those are restored: a no-op instantiate + call went from 21 to 8.5 µs.
            .linear_memory_keep_resident(KEEP_RESIDENT)
            .table_keep_resident(64 << 10)
            .pagemap_scan(wasmtime::Enabled::Auto);
        c.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    c
}

/// The one thread per engine that advances the epoch, so that deadlines and kills are
/// noticed by running guests within a tick.
struct Ticker {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Ticker {
    fn start(engine: Engine) -> Ticker {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("flint-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })
            .expect("spawn the epoch thread");
        Ticker { stop, thread }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }
}
