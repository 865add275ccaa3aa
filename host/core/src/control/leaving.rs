//! Executors leaving with map outputs: once a draining executor has no attempt left,
//! the outputs it holds are copied to executors that stay (spread by bytes), and the
//! tracker switches to the copies in one step before the executor is let go. Past
//! `flint.decommission.timeout` it goes anyway, and what was not copied is gone as
//! after a loss. This is the bookkeeping; the control core feeds it and carries out
//! what it decides.

use super::events::Action;
use crate::registry::Incarnation;
use crate::shuffle::ShuffleId;
use flint_proto::{ExecutorId, JobId};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// An output: its shuffle and map.
pub(super) type Output = (ShuffleId, u32);

/// An executor incarnation.
pub(super) type Life = (ExecutorId, Incarnation);

/// An output as the tracker holds it: its shuffle, map, digest and most bytes.
pub(super) type Held = (ShuffleId, u32, [u8; 32], u64);

/// An output as an adopter is asked for it: its map, digest and most bytes.
type Asked = (u32, [u8; 32], u64);

#[derive(Debug)]
struct Leaving {
    incarnation: Incarnation,
    stage: Stage,
}

#[derive(Debug)]
enum Stage {
    /// Its attempts still run.
    Finishing,
    /// Its outputs are being copied.
    Copying {
        /// Past this it goes with what it has not handed over.
        deadline: Instant,
        /// Asked of an adopter and not yet answered.
        asked: BTreeMap<Output, Life>,
        /// Copied: the adopter holds it once the executor goes.
        copied: Vec<(Output, Life)>,
        /// Outputs an adopter could not copy.
        failed: u32,
    },
}

/// What is due for a leaving executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Due {
    /// It is no longer the executor's current life: forget it.
    Gone,
    /// Its attempts ended: plan the copies.
    Plan,
    /// Every copy is answered, or its time is up: let it go.
    LetGo,
}

/// Every draining executor not let go yet.
#[derive(Debug)]
pub(super) struct Leavers {
    leaving: BTreeMap<ExecutorId, Leaving>,
    timeout: Duration,
}

impl Leavers {
    pub fn new(timeout: Duration) -> Leavers {
        Leavers { leaving: BTreeMap::new(), timeout }
    }

    /// A draining executor starts to leave: its hand-over begins once its attempts end.
    pub fn start(&mut self, id: &ExecutorId, incarnation: Incarnation) {
        self.leaving.entry(id.clone()).or_insert(Leaving { incarnation, stage: Stage::Finishing });
    }

    pub fn contains(&self, id: &ExecutorId) -> bool {
        self.leaving.contains_key(id)
    }

    /// The earliest hand-over deadline.
    pub fn deadline(&self) -> Option<Instant> {
        self.leaving
            .values()
            .filter_map(|l| match &l.stage {
                Stage::Copying { deadline, .. } => Some(*deadline),
                Stage::Finishing => None,
            })
            .min()
    }

    /// What is due now; `idle` says whether a life is current and runs nothing.
    pub fn due(
        &self,
        now: Instant,
        idle: impl Fn(&ExecutorId, Incarnation) -> Option<bool>,
    ) -> Vec<(Life, Due)> {
        self.leaving
            .iter()
            .filter_map(|(id, l)| {
                let due = match (idle(id, l.incarnation), &l.stage) {
                    (None, _) => Due::Gone,
                    (Some(true), Stage::Finishing) => Due::Plan,
                    (_, Stage::Copying { asked, deadline, .. }) if asked.is_empty() || now >= *deadline => {
                        Due::LetGo
                    }
                    _ => return None,
                };
                Some(((id.clone(), l.incarnation), due))
            })
            .collect()
    }

    pub fn forget(&mut self, id: &ExecutorId) {
        self.leaving.remove(id);
    }

    /// Asks `adopters` to copy what `leaver` holds, the largest outputs first, each to
    /// the adopter given the fewest bytes so far; with nothing to copy, or no one to
    /// copy it to, the executor goes at once.
    pub fn plan(
        &mut self,
        now: Instant,
        (id, incarnation): Life,
        mut held: Vec<Held>,
        adopters: Vec<Life>,
    ) -> Vec<Action> {
        if held.is_empty() || adopters.is_empty() {
            if !held.is_empty() {
                tracing::warn!(executor_id = %id, outputs = held.len(), "no executor to hand map outputs to");
            }
            self.leaving.remove(&id);
            return vec![Action::Leave { executor: id, incarnation }];
        }
        let mut load: Vec<(u64, Life)> = adopters.into_iter().map(|a| (0, a)).collect();
        held.sort_by_key(|o| std::cmp::Reverse(o.3));
        let mut asked = BTreeMap::new();
        let mut batches: BTreeMap<(Life, ShuffleId), Vec<Asked>> = BTreeMap::new();
        for (shuffle, map, digest, bytes) in held {
            let least = load.iter_mut().min_by_key(|a| a.0).expect("at least one adopter");
            least.0 += bytes;
            batches.entry((least.1.clone(), shuffle)).or_default().push((map, digest, bytes));
            asked.insert((shuffle, map), least.1.clone());
        }
        tracing::info!(executor_id = %id, outputs = asked.len(), "handing map outputs over");
        let actions = batches
            .into_iter()
            .map(|(((executor, adopter), shuffle), outputs)| Action::Adopt {
                executor,
                incarnation: adopter,
                shuffle,
                from: (id.clone(), incarnation),
                outputs,
            })
            .collect();
        let stage = Stage::Copying { deadline: now + self.timeout, asked, copied: Vec::new(), failed: 0 };
        if let Some(leaving) = self.leaving.get_mut(&id) {
            leaving.stage = stage;
        }
        actions
    }

    /// Lets `id` go: the copies made, to switch to; what was not copied stays its own.
    pub fn let_go(&mut self, id: &ExecutorId) -> Vec<(Output, Life)> {
        match self.leaving.remove(id).map(|l| l.stage) {
            Some(Stage::Copying { copied, asked, failed, .. }) => {
                let left = asked.len() as u32 + failed;
                match left {
                    0 => tracing::info!(executor_id = %id, moved = copied.len(), "map outputs handed over"),
                    _ => tracing::warn!(executor_id = %id, left, "some map outputs were not handed over"),
                }
                copied
            }
            _ => Vec::new(),
        }
    }

    /// An adopter's answer: the outputs it copied, and those it could not. False when
    /// no such copy was asked of it.
    pub fn adopted(
        &mut self,
        adopter: Life,
        shuffle: ShuffleId,
        from: Incarnation,
        maps: Vec<u32>,
        failed: Vec<(u32, String)>,
    ) -> bool {
        let stage = self.leaving.values_mut().find(|l| l.incarnation == from).map(|l| &mut l.stage);
        let Some(Stage::Copying { asked, copied, failed: count, .. }) = stage else { return false };
        let mut known = false;
        let mut answered = |map: u32| {
            let yes = asked.get(&(shuffle, map)) == Some(&adopter);
            if yes {
                asked.remove(&(shuffle, map));
            }
            yes
        };
        let mut done = Vec::new();
        for map in maps {
            if answered(map) {
                done.push(((shuffle, map), adopter.clone()));
            }
        }
        for (map, why) in failed {
            if answered(map) {
                tracing::warn!(executor_id = %adopter.0, map, reason = %why, "a map output was not adopted");
                *count += 1;
                known = true;
            }
        }
        known |= !done.is_empty();
        copied.extend(done);
        known
    }

    /// An adopter is gone or leaving itself: what it was asked and has not answered
    /// will not be, and what it copied goes with it.
    pub fn adopter_gone(&mut self, id: &ExecutorId) {
        for leaving in self.leaving.values_mut() {
            if let Stage::Copying { asked, copied, failed, .. } = &mut leaving.stage {
                let before = asked.len();
                asked.retain(|_, (adopter, _)| adopter != id);
                *failed += (before - asked.len()) as u32;
                copied.retain(|(_, (adopter, _))| adopter != id);
            }
        }
    }

    /// The leaving executor is gone before it was let go (killed, say): the copies it
    /// finished still count.
    pub fn left_early(&mut self, id: &ExecutorId, incarnation: Incarnation) -> Vec<(Output, Life)> {
        match self.leaving.get(id) {
            Some(l) if l.incarnation == incarnation => self.let_go(id),
            _ => Vec::new(),
        }
    }

    /// A job ended: its outputs are no one's to copy.
    pub fn forget_job(&mut self, job: JobId) {
        for leaving in self.leaving.values_mut() {
            if let Stage::Copying { asked, copied, .. } = &mut leaving.stage {
                asked.retain(|(shuffle, _), _| shuffle.job != job);
                copied.retain(|((shuffle, _), _)| shuffle.job != job);
            }
        }
    }
}
