//! Blocks an executor holds for others to fetch: task outputs too large to ride in a
//! status report. A block lives until it is fetched with `release` or its job ends.

use flint_proto::{BlockId, BlockRef, Digest, JobId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Default)]
pub struct BlockStore {
    blocks: Mutex<HashMap<BlockId, Arc<Vec<u8>>>>,
}

impl BlockStore {
    /// Keeps `bytes` under `id` and returns the reference a report carries.
    pub fn put(&self, id: BlockId, bytes: Vec<u8>) -> BlockRef {
        let block = BlockRef { id, size: bytes.len() as u64, digest: Digest::of(&bytes) };
        self.lock().insert(id, Arc::new(bytes));
        block
    }

    pub fn get(&self, id: &BlockId) -> Option<Arc<Vec<u8>>> {
        self.lock().get(id).cloned()
    }

    pub fn remove(&self, id: &BlockId) -> Option<Arc<Vec<u8>>> {
        self.lock().remove(id)
    }

    /// Drops every block of `job`.
    pub fn drop_job(&self, job: JobId) {
        self.lock().retain(|id, _| id.job() != job);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<BlockId, Arc<Vec<u8>>>> {
        self.blocks.lock().expect("blocks lock")
    }
}
