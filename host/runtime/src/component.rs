//! Job components: identified by SHA-256 digest, compiled once per engine and kept on
//! disk, checked against the `flint:task` worlds, and pre-instantiated.

use crate::bindings::exports::flint::task::{
    aggregator, combiner, job, map_combiner, map_reduce_job as map_reduce, program_entry, stage,
};
use crate::host::HostState;
use flint_proto::{Digest, World};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::{Component, InstancePre, Linker};

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("not a WebAssembly component: {0}")]
    NotAComponent(String),
    #[error("not a Flint job: {0}")]
    WrongWorld(String),
    #[error(
        "the component needs at least {needs} bytes of memory; this executor's task cap is {cap} bytes (flint.executor.memory × flint.memory.fraction ÷ slots)"
    )]
    TooMuchMemory { needs: u64, cap: u64 },
}

/// What loading a component needs of its runtime: the engine that compiles it, the
/// linker it is checked against, the disk cache and the instance memory cap.
pub(crate) struct Loader<'a> {
    pub(crate) engine: &'a Engine,
    pub(crate) linker: &'a Linker<HostState>,
    pub(crate) cache_dir: Option<&'a Path>,
    pub(crate) instance_memory: u64,
}

/// A loaded job component, ready to instantiate.
pub struct JobComponent {
    pub digest: Digest,
    pub world: World,
    /// Bytes of compiled code and data this component keeps in memory.
    pub size: u64,
    /// The linear memory its largest memory starts with, in bytes: an instance cap
    /// below it can never run it.
    pub min_memory: u64,
    pub(crate) pre: InstancePre<HostState>,
    /// Every world's but `program`'s.
    pub(crate) job: Option<job::GuestIndices>,
    pub(crate) aggregator: Option<aggregator::GuestIndices>,
    /// Present when the job exports `combiner` (world `combine`): its merge is
    /// commutative and its partitions may be combined where they run.
    pub(crate) combiner: Option<combiner::GuestIndices>,
    /// Present when the job exports `map-reduce` (world `map-reduce`).
    pub(crate) map_reduce: Option<map_reduce::GuestIndices>,
    /// Present when a map/reduce job exports `map-combiner` (SDK-built ones do).
    pub(crate) map_combiner: Option<map_combiner::GuestIndices>,
    /// A program's `main` and its stages' tasks (world `program`).
    pub(crate) program: Option<(program_entry::GuestIndices, stage::GuestIndices)>,
}

impl fmt::Debug for JobComponent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobComponent").field("digest", &self.digest).field("world", &self.world).finish()
    }
}

impl JobComponent {
    pub(crate) fn load(rt: &Loader<'_>, digest: Digest, bytes: &[u8]) -> Result<JobComponent, LoadError> {
        let component = compile_cached(rt, digest, bytes)?;
        JobComponent::prepare(rt, digest, component)
    }

    /// The component from its compiled artifact on disk alone, when one is there.
    pub(crate) fn from_disk(rt: &Loader<'_>, digest: Digest) -> Option<JobComponent> {
        let path = artifact_path(rt, rt.cache_dir?, digest);
        // SAFETY: as in `compile_cached`.
        let component = unsafe { Component::deserialize_file(rt.engine, &path) }.ok()?;
        JobComponent::prepare(rt, digest, component).ok()
    }

    fn prepare(rt: &Loader<'_>, digest: Digest, component: Component) -> Result<JobComponent, LoadError> {
        let wrong = |said: String| contract_mismatch(rt.engine, &component).unwrap_or(said);
        let pre = rt
            .linker
            .instantiate_pre(&component)
            .map_err(|e| LoadError::WrongWorld(wrong(format!("{}", e).replace('\n', " "))))?;
        let program = program_entry::GuestIndices::new(&pre)
            .ok()
            .and_then(|entry| stage::GuestIndices::new(&pre).ok().map(|stage| (entry, stage)));
        let job = job::GuestIndices::new(&pre).ok();
        if job.is_none() && program.is_none() {
            return Err(LoadError::WrongWorld(wrong(
                "the component exports neither flint:task/job nor a program (build it with the flint-guest SDK: `flint new` makes a job crate)"
                    .into(),
            )));
        }
        let aggregator = aggregator::GuestIndices::new(&pre).ok();
        let combiner = aggregator.as_ref().and_then(|_| combiner::GuestIndices::new(&pre).ok());
        let map_reduce = aggregator.as_ref().and_then(|_| map_reduce::GuestIndices::new(&pre).ok());
        let map_combiner = map_reduce.as_ref().and_then(|_| map_combiner::GuestIndices::new(&pre).ok());
        let world = match (&aggregator, &map_reduce, &job) {
            (_, _, None) => World::Program,
            (Some(_), Some(_), _) => World::MapReduce,
            (Some(_), None, _) => World::Aggregate,
            _ => World::Task,
        };
        tracing::debug!(%digest, ?world, combines = combiner.is_some(), "component loaded");
        let image = component.image_range();
        let size = (image.end as usize).saturating_sub(image.start as usize) as u64;
        // Wasm pages of 64 KiB (the custom-page-sizes proposal is not enabled).
        let min_memory = component
            .resources_required()
            .and_then(|r| r.max_initial_memory_size)
            .map_or(0, |pages| pages.saturating_mul(64 << 10));
        Ok(JobComponent {
            digest,
            world,
            size,
            min_memory,
            pre,
            job,
            aggregator,
            combiner,
            map_reduce,
            map_combiner,
            program,
        })
    }

    /// Whether the job's partitions may be combined where they run (it exports
    /// `combiner`, promising a commutative merge).
    pub fn combines(&self) -> bool {
        self.combiner.is_some()
    }
}

/// Compiles `bytes`, or reads the artifact an earlier run kept. Artifacts are keyed by
/// the component's digest and the engine's compatibility hash, so an engine with other
/// settings or another wasmtime never reads one it cannot run.
fn compile_cached(rt: &Loader<'_>, digest: Digest, bytes: &[u8]) -> Result<Component, LoadError> {
    let path = rt.cache_dir.map(|dir| artifact_path(rt, dir, digest));
    if let Some(path) = path.as_deref().filter(|p| p.exists()) {
        // SAFETY: the cache directory is the executor's own; artifacts are written by
        // `Component::serialize` of an engine with the same compatibility hash and
        // renamed into place whole.
        match unsafe { Component::deserialize_file(rt.engine, path) } {
            Ok(component) => return Ok(component),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "compiled artifact unusable; recompiling")
            }
        }
    }
    if is_core_module(bytes) {
        return Err(LoadError::NotAComponent(
            "it is a core wasm module (built for wasm32-unknown-unknown or wasm32-wasip1?); build the job with `--target wasm32-wasip2` to get a component".into(),
        ));
    }
    if let Some(kind) = native_binary(bytes) {
        return Err(LoadError::NotAComponent(format!(
            "it is {kind} for this machine, not WebAssembly; build the job with `cargo build --release --target wasm32-wasip2` (or give `flint run` its folder, which does)"
        )));
    }
    let component = Component::new(rt.engine, bytes).map_err(|e| {
        let text = format!("{e:#}");
        if let Some(needs) = minimum_memory(&text) {
            return LoadError::TooMuchMemory { needs, cap: rt.instance_memory };
        }
        // The parser's message ends in a dump of the bytes it expected: keep the words.
        let first = text.lines().next().unwrap_or_default();
        LoadError::NotAComponent(first.split(" - expected").next().unwrap_or(first).to_owned())
    })?;
    if let Some(path) = path
        && let Err(e) = store_artifact(&component, &path)
    {
        tracing::warn!(path = %path.display(), error = %e, "cannot keep the compiled artifact");
    }
    Ok(component)
}

fn artifact_path(rt: &Loader<'_>, dir: &Path, digest: Digest) -> PathBuf {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    rt.engine.precompile_compatibility_hash().hash(&mut h);
    dir.join(format!("{}-{:016x}.cwasm", digest.hex(), h.finish()))
}

fn store_artifact(component: &Component, path: &Path) -> std::io::Result<()> {
    let bytes = component.serialize().map_err(std::io::Error::other)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// The minimum memory a component asked for, from the pooling allocator's refusal
/// ("… a minimum byte size of N which exceeds the limit …").
fn minimum_memory(error: &str) -> Option<u64> {
    let after = &error[error.find("minimum byte size of ")? + "minimum byte size of ".len()..];
    error.contains("exceeds the limit").then_some(())?;
    after.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// A core module starts with the wasm magic and version 1; a component has layer 1 in
/// the version field's upper half.
/// What native file `bytes` begin like, if any: a job built for the host's own target.
fn native_binary(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        [0x7f, b'E', b'L', b'F', ..] => Some("a native library or executable (ELF)"),
        [0xcf, 0xfa, 0xed, 0xfe, ..] | [0xfe, 0xed, 0xfa, 0xcf, ..] | [0xca, 0xfe, 0xba, 0xbe, ..] => {
            Some("a native library or executable (Mach-O)")
        }
        [b'M', b'Z', ..] => Some("a native library or executable (PE)"),
        [b'!', b'<', b'a', b'r', b'c', b'h', b'>', b'\n', ..] => {
            Some("a Rust library archive (an rlib: is the crate a cdylib?)")
        }
        _ => None,
    }
}

/// When a component names `flint:task` interfaces of another contract version than
/// [`crate::CONTRACT`], or none at all: why it cannot run, and what to do.
fn contract_mismatch(engine: &Engine, component: &Component) -> Option<String> {
    let ty = component.component_type();
    let names: Vec<String> = ty
        .imports(engine)
        .map(|(name, _)| name.to_owned())
        .chain(ty.exports(engine).map(|(name, _)| name.to_owned()))
        .collect();
    let versions: std::collections::BTreeSet<&str> = names
        .iter()
        .filter_map(|name| name.strip_prefix("flint:task/"))
        .map(|rest| rest.split_once('@').map_or("(no version)", |(_, version)| version))
        .collect();
    let ours = crate::CONTRACT;
    if versions.is_empty() {
        return Some(format!(
            "the component implements no flint:task interface (it is a component of another world); build the job with the flint-guest SDK for flint:task@{ours} (`flint new` makes a job crate)"
        ));
    }
    let other: Vec<&str> = versions.into_iter().filter(|v| *v != ours).collect();
    (!other.is_empty()).then(|| {
        format!(
            "the component was built against Flint's contract flint:task@{}; this flint implements flint:task@{ours}: rebuild the job with this flint's SDK (`flint new` vendors it)",
            other.join(", ")
        )
    })
}

fn is_core_module(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[4..8] == [1, 0, 0, 0]
}
