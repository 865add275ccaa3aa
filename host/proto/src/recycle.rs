//! Large buffers kept for the next use instead of freed. `flint` sets glibc to give
//! every buffer of a MiB or more back to the system when it is freed (so that memory
//! does not pile up in per-thread arenas); the price is that the next such buffer
//! costs a page fault and a zeroed page every 4 KiB it is written. On the paths every
//! input byte crosses (a file's pieces going out on the wire, a split's blocks coming
//! in) that cost was most of the work: a few buffers kept here pay it once.

use std::sync::Mutex;

/// Up to `keep` buffers of `size` bytes or so, kept with their capacity for whoever
/// takes one next: memory held idle is at most `keep × 2 × size`.
pub struct Recycler {
    free: Mutex<Vec<Vec<u8>>>,
    keep: usize,
    size: usize,
}

impl Recycler {
    pub const fn new(keep: usize, size: usize) -> Recycler {
        Recycler { free: Mutex::new(Vec::new()), keep, size }
    }

    /// A buffer with room for `size` bytes: one given back before (its pages already
    /// mapped), else a new one (whose pages are mapped as they are written). A kept one
    /// still holds what it last held, so that resizing it over that costs no zeroing:
    /// clear it to append. What it held may be another job's bytes: a taker hands on
    /// only what it wrote.
    pub fn take(&self) -> Vec<u8> {
        let kept = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        kept.unwrap_or_else(|| Vec::with_capacity(self.size))
    }

    /// How many buffers are kept now.
    pub fn kept(&self) -> usize {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// `buffer`, kept for the next [`take`](Self::take) if fewer than `keep` are and its
    /// room is between `size` and twice that; else freed.
    pub fn give(&self, buffer: Vec<u8>) {
        if !(self.size..=2 * self.size).contains(&buffer.capacity()) {
            return;
        }
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.len() < self.keep {
            free.push(buffer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_given_back_is_taken_again_as_it_was_left_and_only_so_many_of_its_size_are_held() {
        let pool = Recycler::new(2, 1000);
        let mut first = pool.take();
        assert!(first.capacity() >= 1000, "a new one has the room");
        first.extend_from_slice(&[1; 1000]);
        let at = first.as_ptr();
        pool.give(first);
        let again = pool.take();
        assert!(again.len() == 1000 && again.as_ptr() == at, "the same memory, as it was left");
        for _ in 0..5 {
            pool.give(vec![0; 1500]);
        }
        pool.give(again);
        assert_eq!(pool.kept(), 2, "at most keep are held");
        let other = Recycler::new(2, 1000);
        other.give(Vec::with_capacity(2001));
        other.give(Vec::with_capacity(999));
        assert_eq!(other.kept(), 0, "ones far from the size are freed");
    }
}
