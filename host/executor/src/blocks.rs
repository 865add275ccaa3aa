//! Blocks an executor holds for others to fetch: task outputs too large to ride in a
//! status report. A block lives until it is fetched with `remove` or its job ends.
//!
//! The store holds at most its byte limit: a slot with an output that does not fit
//! waits (its next task with it) until fetches make room, so a driver that falls behind
//! slows the executor down instead of growing it. One block is always let in when the
//! store is empty, so an output larger than the limit still moves.

use flint_proto::{BlockId, BlockRef, JobId};
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How often a waiting slot looks whether it should give up.
const RECHECK: Duration = Duration::from_millis(50);

pub struct BlockStore {
    held: Mutex<Held>,
    room: Condvar,
    limit: u64,
}

#[derive(Default)]
struct Held {
    blocks: HashMap<BlockId, Arc<Vec<u8>>>,
    bytes: u64,
}

/// Why a block was not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotKept {
    /// The one waiting for room gave up (its attempt was killed, say).
    GaveUp,
    /// No room came within the time allowed.
    NoRoom { limit: u64 },
}

impl BlockStore {
    /// A store of at most `limit` bytes.
    pub fn new(limit: u64) -> BlockStore {
        BlockStore { held: Mutex::default(), room: Condvar::new(), limit }
    }

    /// The most bytes the store holds.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Keeps `bytes` under `id` and returns the reference a report carries, waiting while
    /// the store has no room for them; gives up when `give_up` says so or at `until`.
    pub fn put(
        &self,
        id: BlockId,
        bytes: Vec<u8>,
        until: Instant,
        give_up: impl Fn() -> bool,
    ) -> Result<BlockRef, NotKept> {
        let size = bytes.len() as u64;
        // Summed before the lock: a large output's checksum must not hold up the others.
        let block = BlockRef::of(id, &bytes);
        let mut held = self.lock();
        while held.bytes > 0 && held.bytes.saturating_add(size) > self.limit {
            if give_up() {
                return Err(NotKept::GaveUp);
            }
            let now = Instant::now();
            if now >= until {
                return Err(NotKept::NoRoom { limit: self.limit });
            }
            held = self.room.wait_timeout(held, RECHECK.min(until - now)).expect("blocks lock").0;
        }
        held.bytes += size;
        if let Some(old) = held.blocks.insert(id, Arc::new(bytes)) {
            held.bytes -= old.len() as u64;
        }
        Ok(block)
    }

    pub fn get(&self, id: &BlockId) -> Option<Arc<Vec<u8>>> {
        self.lock().blocks.get(id).cloned()
    }

    pub fn remove(&self, id: &BlockId) -> Option<Arc<Vec<u8>>> {
        let mut held = self.lock();
        let removed = held.blocks.remove(id);
        if let Some(block) = &removed {
            held.bytes -= block.len() as u64;
            self.room.notify_all();
        }
        removed
    }

    /// Drops every block of `job`.
    pub fn drop_job(&self, job: JobId) {
        let mut held = self.lock();
        let mut freed = 0;
        held.blocks.retain(|id, block| {
            let keep = id.job() != job;
            if !keep {
                freed += block.len() as u64;
            }
            keep
        });
        held.bytes -= freed;
        self.room.notify_all();
    }

    /// Bytes held now.
    pub fn bytes(&self) -> u64 {
        self.lock().bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().expect("blocks lock")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flint_proto::Attempt;

    fn id(index: u32) -> BlockId {
        BlockId::Output(Attempt { job: JobId(1), index, number: 0 })
    }

    #[test]
    fn a_full_store_makes_the_next_block_wait_for_a_fetch() {
        let store = Arc::new(BlockStore::new(100));
        let soon = || Instant::now() + Duration::from_secs(10);
        store.put(id(0), vec![0; 60], soon(), || false).unwrap();
        // One larger than the limit still gets in alone; here there is no room for it.
        let waiting = {
            let store = store.clone();
            std::thread::spawn(move || store.put(id(1), vec![1; 60], soon(), || false))
        };
        std::thread::sleep(Duration::from_millis(200));
        assert!(!waiting.is_finished(), "a block past the limit waits");
        assert_eq!(store.bytes(), 60);
        store.remove(&id(0));
        assert_eq!(waiting.join().unwrap().unwrap().size, 60);
        assert_eq!(store.bytes(), 60);
        // Giving up, or running out of time, keeps nothing.
        assert_eq!(store.put(id(2), vec![2; 60], soon(), || true), Err(NotKept::GaveUp));
        let past = Instant::now();
        assert_eq!(store.put(id(2), vec![2; 60], past, || false), Err(NotKept::NoRoom { limit: 100 }));
        store.drop_job(JobId(1));
        assert_eq!(store.bytes(), 0);
        assert_eq!(store.put(id(3), vec![3; 500], soon(), || false).unwrap().size, 500, "alone, it fits");
    }
}
