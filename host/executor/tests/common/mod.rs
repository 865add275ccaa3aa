//! What the executor's tests share: the real example components, served by a stand-in
//! driver, on a one-slot executor.

use flint_executor::{DriverSource, ExecutorCore, InputReader};
use flint_proto::{Digest, JobDescriptor, JobId, Settings, Token};
use flint_runtime::{Runtime, RuntimeConfig};
use std::collections::HashMap;
use std::sync::Arc;

fn component(name: &str) -> Vec<u8> {
    let path = format!("{}/../../target/wasm32-wasip2/release/{name}.wasm", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e} (run `make build` first)"))
}

/// A driver that serves components by digest and, if it has one, an input.
struct Components(HashMap<Digest, Vec<u8>>, Option<Arc<Served>>);

/// A `flint://` input the stand-in driver serves (whatever its path), and the reads
/// asked of it, in order.
#[allow(dead_code)] // Not every test binary reads inputs.
pub struct Served {
    pub text: Vec<u8>,
    pub reads: std::sync::Mutex<Vec<(u64, u64)>>,
}

impl DriverSource for Components {
    fn fetch(&self, digest: &Digest) -> Result<Vec<u8>, flint_executor::SourceError> {
        self.0.get(digest).cloned().ok_or(flint_executor::SourceError::NoSuchComponent)
    }

    fn read_input(
        &self,
        _: Option<&Token>,
        _: JobId,
        _: &str,
        offset: u64,
        len: u64,
        _: std::time::Instant,
    ) -> Result<Vec<u8>, flint_data::InputError> {
        let Some(served) = &self.1 else {
            return Err(flint_data::InputError::Driver("no inputs here".into()));
        };
        served.reads.lock().unwrap().push((offset, len));
        Ok(served.text[offset as usize..(offset + len) as usize].to_vec())
    }
}

/// An executor of one slot (64 MiB instances) whose driver serves the named examples,
/// and their digests by name.
#[allow(dead_code)] // Not every test binary needs it.
pub fn one_slot_executor(
    names: &[&'static str],
    pooling: bool,
) -> (Arc<ExecutorCore>, HashMap<&'static str, Digest>) {
    one_slot_executor_serving(names, pooling, None)
}

/// The same, its driver serving `input` too.
pub fn one_slot_executor_serving(
    names: &[&'static str],
    pooling: bool,
    input: Option<Arc<Served>>,
) -> (Arc<ExecutorCore>, HashMap<&'static str, Digest>) {
    let mut digests = HashMap::new();
    let mut bytes = HashMap::new();
    for name in names {
        let b = component(name);
        digests.insert(*name, Digest::of(&b));
        bytes.insert(Digest::of(&b), b);
    }
    let runtime = Runtime::new(RuntimeConfig {
        slots: 1,
        instance_memory: 64 << 20,
        cache_dir: None,
        max_log_size: 1 << 16,
        pooling,
        component_cache: 64 << 20,
    })
    .unwrap();
    let inputs = InputReader::new(&Settings::default(), tokio::runtime::Handle::current());
    let core = ExecutorCore::new(
        "e".into(),
        Arc::new(runtime),
        Arc::new(Components(bytes, input)),
        inputs,
        (usize::MAX, u64::MAX),
    );
    (Arc::new(core), digests)
}

/// Job 1: `tasks` tasks of the component `digest` under `config`, a minute's deadline.
#[allow(dead_code)] // Not every test binary needs it.
pub fn job(digest: Digest, tasks: u32, config: &[(&str, &str)]) -> Arc<JobDescriptor> {
    Arc::new(JobDescriptor {
        job: JobId(1),
        app_id: "a".into(),
        name: "chaos".into(),
        component: digest,
        task_count: tasks,
        config: Arc::new(config.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
        token_services: Vec::new(),
        memory_limit: None,
        deadline: std::time::Duration::from_secs(60),
        max_result_size: 1 << 20,
        combine: false,
        instance_reuse: 100,
        shuffle: None,
        program: None,
    })
}
