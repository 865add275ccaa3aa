//! A job's result budget (`flint.driver.maxResultSize`) and the charges drawn on it.

use flint_proto::JobError;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A job's result bytes against `flint.driver.maxResultSize`. Every output is charged
/// before it is fetched or folded; its [`Charge`] gives the bytes back when dropped
/// unless kept, so an output that never arrives (a failed fetch, a partial result the
/// core refused, a job that ended first) frees its share without anyone remembering to.
pub(super) struct ResultBudget {
    used: Arc<AtomicU64>,
    limit: u64,
}

impl ResultBudget {
    pub(super) fn new(limit: u64) -> Self {
        ResultBudget { used: Arc::default(), limit }
    }

    /// Charges `size` bytes, or says how far over the limit they would take the job.
    pub(super) fn charge(&self, size: u64) -> Result<Charge, JobError> {
        let add = |used: u64| Some(used.saturating_add(size));
        let before = self.used.fetch_update(Ordering::Relaxed, Ordering::Relaxed, add).unwrap_or_default();
        let charge = Charge { used: self.used.clone(), size };
        match before.saturating_add(size) {
            over if over > self.limit => Err(JobError::ResultTooLarge { size: over, limit: self.limit }),
            _ => Ok(charge),
        }
    }

    /// Bytes charged and not given back.
    #[cfg(test)]
    fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }
}

/// Bytes charged to a job's [`ResultBudget`], given back when dropped unless kept.
pub(super) struct Charge {
    used: Arc<AtomicU64>,
    size: u64,
}

impl Charge {
    /// The output is in the job's result: its bytes stay charged.
    pub(super) fn keep(mut self) {
        self.size = 0;
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        let size = self.size;
        let _ =
            self.used.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| Some(u.saturating_sub(size)));
    }
}

/// An output's bytes with their charge: what the loop hands to a job's fold.
pub(super) struct Charged {
    pub(super) bytes: Vec<u8>,
    pub(super) charge: Charge,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_charge_not_kept_gives_its_bytes_back_and_one_kept_stays() {
        let budget = ResultBudget::new(100);
        let kept = budget.charge(60).unwrap();
        let dropped = budget.charge(30).unwrap();
        assert_eq!(budget.used(), 90);
        drop(dropped);
        assert_eq!(budget.used(), 60);
        kept.keep();
        assert_eq!(budget.used(), 60);
        let Err(JobError::ResultTooLarge { size, limit }) = budget.charge(41) else {
            panic!("over the limit")
        };
        assert_eq!((size, limit), (101, 100));
        // A size from the wire cannot wrap the count around.
        assert!(budget.charge(u64::MAX).is_err());
    }
}
