//! The placement index: for each pipeline depth, the usable executors with room, in
//! buckets by how much, kept in step with every change to an executor.

use super::{Executor, Ix, Scheduler};
use std::cmp::Reverse;
use std::collections::BTreeMap;

/// Usable executors with room at one pipeline depth, in placement order: most room
/// first, then join order. A bucket per amount of room, and only executors with room
/// are in it: in a saturated fleet an executor that fills up leaves the index, so the
/// buckets in use hold the few executors with a free place whatever the fleet's size,
/// and moving an executor costs two operations on small maps.
#[derive(Debug, Default)]
pub(super) struct Room {
    /// Kept up to date only while some job places from it (see [`Scheduler::room`]);
    /// otherwise empty, and rebuilt when a job needs it again.
    pub(super) live: bool,
    /// `buckets[f]`: executors with room for `f` more attempts, by `seq`.
    pub(super) buckets: Vec<BTreeMap<u64, Ix>>,
    /// The highest non-empty bucket; 0 when no executor has room.
    pub(super) top: usize,
    /// The placement count when a job last placed from this room.
    pub(super) last_used: u64,
}

impl Room {
    pub(super) fn insert(&mut self, free: u32, seq: u64, ix: Ix) {
        if free == 0 {
            return;
        }
        let f = free as usize;
        if self.buckets.len() <= f {
            self.buckets.resize_with(f + 1, BTreeMap::new);
        }
        self.buckets[f].insert(seq, ix);
        self.top = self.top.max(f);
    }

    pub(super) fn remove(&mut self, free: u32, seq: u64) {
        if let Some(bucket) = self.buckets.get_mut(free as usize).filter(|_| free > 0) {
            bucket.remove(&seq);
            while self.top > 0 && self.buckets[self.top].is_empty() {
                self.top -= 1;
            }
        }
    }

    /// The executor to place on next.
    pub(super) fn best(&self) -> Option<Ix> {
        self.buckets.get(self.top).filter(|_| self.top > 0)?.first_key_value().map(|(_, ix)| *ix)
    }

    /// Executors with room, in placement order.
    pub(super) fn iter(&self) -> impl Iterator<Item = Ix> + '_ {
        self.buckets.iter().take(self.top + 1).skip(1).rev().flat_map(|bucket| bucket.values().copied())
    }

    pub(super) fn clear(&mut self) {
        self.buckets.iter_mut().for_each(BTreeMap::clear);
        self.top = 0;
    }
}

/// A room no job placed from in this many placements is no longer kept up to date.
pub(super) const ROOM_DORMANT_AFTER: u64 = 4096;

impl Scheduler {
    /// Whether the placement index says exactly what a pass over the executors would
    /// (for tests): the rooms kept up to date, the ids, the counts.
    #[doc(hidden)]
    pub fn room_index_is_true(&self) -> bool {
        let depths = self.depths();
        let placed = |ix: &Ix| self.executors[*ix as usize].as_ref().map(|e| (e.seq, *ix));
        let rooms_true = self.rooms.iter().zip(depths).all(|(room, depth)| {
            let mut expected: Vec<(u32, u64, Ix)> = self
                .executors
                .iter()
                .enumerate()
                .filter_map(|(ix, e)| e.as_ref().map(|e| (e.free(depth), e.seq, ix as Ix)))
                .filter(|(free, ..)| room.live && *free > 0)
                .collect();
            expected.sort_by_key(|(free, seq, _)| (Reverse(*free), *seq));
            let listed: Vec<(u64, Ix)> = room.iter().filter_map(|ix| placed(&ix)).collect();
            let top_true = room.buckets.get(room.top).is_none_or(|b| room.top == 0 || !b.is_empty());
            top_true && listed == expected.iter().map(|(_, seq, ix)| (*seq, *ix)).collect::<Vec<_>>()
        });
        let usable: Vec<&Executor> = self.executors.iter().flatten().filter(|e| e.usable()).collect();
        let ids_true = self.by_id.len() == self.executors.iter().flatten().count()
            && self
                .by_id
                .iter()
                .all(|(id, ix)| self.executors[*ix as usize].as_ref().is_some_and(|e| &e.id == id));
        rooms_true
            && ids_true
            && usable.len() as u32 == self.usable
            && usable.iter().map(|e| e.slots).sum::<u32>() == self.usable_slots
    }

    /// Changes an executor with `change` and keeps the rooms in step with it.
    pub(super) fn reindex(&mut self, ix: Ix, change: impl FnOnce(&mut Executor)) {
        self.unindex(ix);
        if let Some(exec) = self.executors[ix as usize].as_mut() {
            change(exec);
        }
        self.index(ix);
    }

    pub(super) fn index(&mut self, ix: Ix) {
        let depths = self.depths();
        let Some(exec) = self.executors[ix as usize].as_ref() else { return };
        if exec.usable() {
            self.usable += 1;
            self.usable_slots += exec.slots;
            for (room, depth) in self.rooms.iter_mut().zip(depths).filter(|(room, _)| room.live) {
                room.insert(exec.free(depth), exec.seq, ix);
            }
        }
    }

    pub(super) fn unindex(&mut self, ix: Ix) {
        let depths = self.depths();
        let Some(exec) = self.executors[ix as usize].as_ref() else { return };
        if exec.usable() {
            self.usable -= 1;
            self.usable_slots -= exec.slots;
            for (room, depth) in self.rooms.iter_mut().zip(depths).filter(|(room, _)| room.live) {
                room.remove(exec.free(depth), exec.seq);
            }
        }
    }

    /// The room at depth `level`, brought up to date if no job placed from it lately;
    /// rooms no job placed from for [`ROOM_DORMANT_AFTER`] placements stop being kept,
    /// so a fleet does not pay on every launch for depths its jobs do not use.
    pub(super) fn room(&mut self, level: usize) -> &Room {
        if !self.rooms[level].live {
            let depth = self.depths()[level];
            let room = &mut self.rooms[level];
            room.live = true;
            for (ix, exec) in self.executors.iter().enumerate() {
                if let Some(exec) = exec.as_ref().filter(|e| e.usable()) {
                    room.insert(exec.free(depth), exec.seq, ix as Ix);
                }
            }
        }
        self.rooms[level].last_used = self.placed;
        if self.placed.is_multiple_of(ROOM_DORMANT_AFTER) {
            for room in
                self.rooms.iter_mut().filter(|r| r.live && r.last_used + ROOM_DORMANT_AFTER < self.placed)
            {
                room.live = false;
                room.clear();
            }
        }
        &self.rooms[level]
    }
}
