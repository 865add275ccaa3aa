//! What the executor's tests share: the real example components, served by a stand-in
//! driver, on a one-slot executor.

use flint_executor::{DriverSource, ExecutorCore, InputReader};
use flint_proto::{Digest, JobId, Settings, Token};
use flint_runtime::{Runtime, RuntimeConfig};
use std::collections::HashMap;
use std::sync::Arc;

fn component(name: &str) -> Vec<u8> {
    let path = format!("{}/../../target/wasm32-wasip2/release/{name}.wasm", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e} (run `make build` first)"))
}

/// A driver that serves components by digest and has no inputs.
struct Components(HashMap<Digest, Vec<u8>>);

impl DriverSource for Components {
    fn fetch(&self, digest: &Digest) -> Result<Vec<u8>, flint_executor::SourceError> {
        self.0.get(digest).cloned().ok_or(flint_executor::SourceError::NoSuchComponent)
    }

    fn read_input(
        &self,
        _: Option<&Token>,
        _: JobId,
        _: &str,
        _: u64,
        _: u64,
        _: std::time::Instant,
    ) -> Result<Vec<u8>, flint_data::InputError> {
        Err(flint_data::InputError::Driver("no inputs here".into()))
    }
}

/// An executor of one slot (64 MiB instances) whose driver serves the named examples,
/// and their digests by name.
pub fn one_slot_executor(
    names: &[&'static str],
    pooling: bool,
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
        Arc::new(Components(bytes)),
        inputs,
        (usize::MAX, u64::MAX),
    );
    (Arc::new(core), digests)
}
