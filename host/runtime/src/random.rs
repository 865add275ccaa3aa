//! A store's random source (`wasi:random`): fresh from the OS for each call, or, for a
//! map task, seeded from its job's secret and its partition, so that a map run again
//! after a loss draws the same numbers and writes the same output.

use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _, TryRng};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

/// What a store's `wasi:random` reads: shared with the store's state, which reseeds it
/// as each call begins.
#[derive(Clone)]
pub(crate) struct TaskRandom(Arc<Mutex<StdRng>>);

impl TaskRandom {
    pub(crate) fn new() -> TaskRandom {
        TaskRandom(Arc::new(Mutex::new(StdRng::from_rng(&mut rand::rng()))))
    }

    /// The next call's numbers: from `seed` mixed with `task`, or fresh ones.
    pub(crate) fn reseed(&self, seed: Option<&[u8; 32]>, task: u32) {
        let rng = match seed {
            Some(seed) => {
                let mut bytes = *seed;
                bytes.iter_mut().zip(task.to_le_bytes()).for_each(|(b, t)| *b ^= t);
                StdRng::from_seed(bytes)
            }
            None => StdRng::from_rng(&mut rand::rng()),
        };
        *self.0.lock().expect("random lock") = rng;
    }
}

impl TryRng for TaskRandom {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(self.0.lock().expect("random lock").next_u32())
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(self.0.lock().expect("random lock").next_u64())
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), Infallible> {
        self.0.lock().expect("random lock").fill_bytes(dest);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws(random: &mut TaskRandom) -> Vec<u64> {
        (0..4).map(|_| random.try_next_u64().unwrap()).collect()
    }

    #[test]
    fn a_seeded_task_draws_the_same_numbers_every_time_and_only_it() {
        let mut random = TaskRandom::new();
        let seed = [7u8; 32];
        random.reseed(Some(&seed), 3);
        let first = draws(&mut random);
        random.reseed(Some(&seed), 3);
        assert_eq!(draws(&mut random), first, "the same task, the same numbers");
        random.reseed(Some(&seed), 4);
        assert_ne!(draws(&mut random), first, "another partition, others");
        random.reseed(None, 3);
        let fresh = draws(&mut random);
        random.reseed(None, 3);
        assert_ne!(draws(&mut random), fresh, "unseeded: fresh each call");
    }
}
